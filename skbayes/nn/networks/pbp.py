r"""The network of probabilistic backpropagation (PBP) for ReLU regression.

PBP (Hernández-Lobato & Adams 2015, [HernandezLobato2015]_; Cinelli 2019,
section 3.4, Algorithm 3) keeps a fully factorised Gaussian posterior
q(w) = prod N(w | m, v) over the weights of a ReLU network and Gamma
posteriors over the precision lambda of the weight prior N(w | 0, 1/lambda)
and the precision gamma of the Gaussian observation noise. There is no
learning rate: every training row is a likelihood factor that is included by
assumed density filtering (ADF), i.e. by matching the moments of
q(w) N(y | f(x, w), 1/gamma). Z, the probability of a row under q, is
approximated by forward moment propagation (:meth:`PBPNetwork.moments`,
Cinelli 2019, eqs. 3.38-3.43, with :func:`~skbayes.nn.functional.relu_moments`);
the update of the weights given the gradients of log Z is
:class:`~skbayes.nn.optim.PBPOptimizer`. This module holds the network, its
log Z, its gradients written out by hand (:func:`log_z_gradients`, what the
ADF pass uses), the ADF update of q(gamma) (:meth:`PBPNetwork.update_noise`)
and the EP refinement of the prior factors (:meth:`PBPNetwork.refine_prior`).

Deviations from the reference implementation (the authors' Theano code):

* The prior factors N(w_j | 0, 1/lambda) are refined by EP once per epoch for
  all weights *in parallel* (one vectorised pass; every cavity is taken from
  the same q(lambda)) instead of one weight after the other. Each factor
  moves q(lambda) by about 1/(number of weights), so the two schedules reach
  nearly the same state: on a 3-10-1 network after 4 passes the predictive
  means differed by 0.04 predictive standard deviations on average, less
  than a different shuffle of the rows changes them (0.15), and E[1/lambda]
  by under 8% (``tests/inference/test_pbp.py``).
* The Gamma updates (eqs. 3.30-3.31) are rejected, like the weight updates,
  when they would give a non-finite value or a shape parameter <= 1.
* With several rows per step (not in the paper, whose schedule is one row per
  step) q(gamma) adds the rows' separate moment-matching changes.

References
----------
.. [HernandezLobato2015] J. M. Hernández-Lobato and R. P. Adams, "Probabilistic
   backpropagation for scalable learning of Bayesian neural networks", ICML 2015
   (Cinelli 2019, section 3.4).
"""

import math
from itertools import pairwise
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from ..functional import (
    LOG_2PI,
    TORCH_OPS,
    gaussian_log_prob,
    relu_moments,
    relu_moments_backward,
    relu_moments_forward,
    standard_normal,
)
from ..layers import PBPLinear
from ..optim.adf import gamma_log_normalisers, gamma_moment_update, include_noise_rows
from .mlp import BayesianLayerStack

__all__ = ["PBPNetwork", "RowMoments", "hidden_workspace", "log_z_gradients"]

# Cavities of prior factors with a variance above this are not refined (as in
# the reference implementation): such a weight has seen almost no data.
_MAX_CAVITY_VAR = 1e6


def log_z_gradients(inputs, y, means, variances, noise_var, *, inputs_sq=None, hidden=None, ops=TORCH_OPS):
    r"""log Z of rows and its gradients with respect to every weight's mean and variance, by hand.

    The forward half is :meth:`PBPNetwork.moments` and :meth:`PBPNetwork.log_z`:
    the moments of each layer's output (Cinelli 2019, eq. 3.40,
    m_a = m_z M and v_a = (m_z^2 + v_z) V + v_z M^2 with the bias as an input
    of mean 1 and variance 0), the rectified moments between layers
    (eqs. 3.42-3.43, :func:`~skbayes.nn.functional.relu_moments_forward`) and
    log Z = sum_k log N(y_k | m_k, v_k + sigma_k^2) (eq. 3.38). The backward
    half is its vector-Jacobian product, written out: with r = y - m and
    T = v + sigma^2, dlogZ/dm = r / T and dlogZ/dv = ((r / T)^2 - 1 / T) / 2;
    then, layer by layer from the top,
    dlogZ/dM = m_z^T g_m + 2 M (v_z^T g_v), dlogZ/dV = (m_z^2 + v_z)^T g_v,
    and to the layer's inputs g_{m_z} = g_m M^T + 2 m_z (g_v V^T),
    g_{v_z} = g_v V^T + g_v (M^2)^T, through the rectifier by Price's
    theorem (:func:`~skbayes.nn.functional.relu_moments_backward`). These
    are the gradients the ADF update of the weights (eqs. 3.34 and 3.37)
    needs; with several rows they are those of the sum of their log Z.
    No autograd graph is built, so the same code runs on torch tensors and
    on NumPy arrays (``ops``), one row per call at little cost.

    Parameters
    ----------
    inputs : array of shape (n, n_features + 1)
        The rows with a last column of ones (the bias input).
    y : array of shape (n, n_outputs)
    means, variances : sequence of arrays of shape (V_l + 1, V_{l+1})
        The layers' (scaled) weight means and variances, bias row last
        (:class:`~skbayes.nn.layers.PBPLinear`).
    noise_var : array of shape (n_outputs,) or float
        sigma^2, the observation noise variance.
    inputs_sq : array like ``inputs``, optional
        ``inputs * inputs``, when precomputed.
    hidden : sequence of pairs of arrays of shape (>= n, V_l + 1), optional
        Work space of each hidden layer's input moments: a mean array whose
        last column is 1 and a variance array whose last column is 0 (only
        the first n rows and the other columns are written); allocated when
        not given.
    ops : ArrayOps, default=TORCH_OPS
        :data:`~skbayes.nn.functional.NUMPY_OPS` for NumPy arrays.

    Returns
    -------
    log_z : array of shape (n,)
        In nats, summed over the outputs.
    grads : list of (d_mean, d_var) pairs
        d(sum of log_z)/d(means[l]) and d(sum of log_z)/d(variances[l]).
    mean, var : array of shape (n, n_outputs)
        The moments of the network output (noise excluded).
    """
    n = inputs.shape[0]
    if inputs_sq is None:
        inputs_sq = inputs * inputs
    # forward: per layer, the input moments (with the bias column) and the rectifier's saved values
    a, s, v = inputs, inputs_sq, None
    saved = []
    out_mean = a @ means[0]
    out_var = s @ variances[0]
    for layer in range(1, len(means)):
        mean_z, var_z, relu_saved = relu_moments_forward(out_mean, out_var, ops)
        if hidden is None:
            hidden = hidden_workspace(means, n, inputs)
        a, v = hidden[layer - 1]
        a, v = a[:n], v[:n]
        a[:, :-1] = mean_z
        v[:, :-1] = var_z
        s = a * a + v
        mean_sq = means[layer] * means[layer]
        saved.append((a, s, v, mean_sq, relu_saved))
        out_mean = a @ means[layer]
        out_var = s @ variances[layer] + v @ mean_sq
    # log Z (eq. 3.38) and its gradients with respect to the output moments
    total = out_var + noise_var
    g_mean = (y - out_mean) / total
    log_z = (-0.5 * (LOG_2PI + ops.log(total) + (y - out_mean) * g_mean)).sum(-1)
    g_var = 0.5 * (g_mean * g_mean - 1.0 / total)
    # backward, from the top layer down
    grads = [None] * len(means)
    for layer in range(len(means) - 1, 0, -1):
        a, s, v, mean_sq, relu_saved = saved[layer - 1]
        weight_mean, weight_var = means[layer][:-1], variances[layer][:-1]
        grads[layer] = (a.T @ g_mean + 2.0 * means[layer] * (v.T @ g_var), s.T @ g_var)
        g_s = g_var @ weight_var.T
        g_a = g_mean @ weight_mean.T + 2.0 * a[:, :-1] * g_s
        g_v = g_s + g_var @ mean_sq[:-1].T
        g_mean, g_var = relu_moments_backward(relu_saved, g_a, g_v)
    grads[0] = (inputs.T @ g_mean, inputs_sq.T @ g_var)
    return log_z, grads, out_mean, out_var


def hidden_workspace(means, n, like):
    """The ``hidden`` work space of :func:`log_z_gradients` for up to n rows.

    Parameters
    ----------
    means : sequence of arrays
        The layers' weight means (their shapes give the widths).
    n : int
        Rows per call.
    like : torch.Tensor or NumPy array
        The arrays are of its kind, dtype and device.

    Returns
    -------
    list of (mean, var) pairs of arrays of shape (n, V_l + 1), one per hidden layer
    """
    pairs = []
    for weight in means[1:]:
        shape = (n, weight.shape[0])
        if isinstance(like, np.ndarray):
            mean, var = np.ones(shape, like.dtype), np.zeros(shape, like.dtype)
        else:
            mean = torch.ones(shape, dtype=like.dtype, device=like.device)
            var = torch.zeros(shape, dtype=like.dtype, device=like.device)
        pairs.append((mean, var))
    return pairs


class RowMoments(NamedTuple):
    """The rows of one ADF step, as :meth:`PBPNetwork.log_z` hands them to the optimiser.

    Attributes
    ----------
    mean, var : torch.Tensor of shape (n, n_outputs)
        Moments of f(x, w) under q(w) before the step (detached).
    y : torch.Tensor of shape (n, n_outputs)
        The rows' targets.
    """

    mean: torch.Tensor
    var: torch.Tensor
    y: torch.Tensor


class GaussianOutputDraws(NamedTuple):
    """Standardised values xi of the output f = m(x) + v(x)^(1/2) xi under PBP's Gaussian predictive.

    What :meth:`PBPNetwork.sample_parameters` and
    :meth:`PBPNetwork.quadrature_parameters` return in place of weight draws
    when the network predicts by its moments (``predictive="moments"``).
    """

    xi: torch.Tensor


def gaussian_quadrature_nodes(n, like):
    """n equally weighted nodes of N(0, 1) with mean exactly 0 and variance exactly 1.

    The midpoint quantiles Phi^{-1}((t - 1/2) / n), t = 1..n, centred and
    divided by their standard deviation (population form): averages over the
    nodes of a + b xi and of (a + b xi)^2 are then exact.

    Parameters
    ----------
    n : int
        Number of nodes (>= 2).
    like : torch.Tensor
        Gives the dtype and the device.

    Returns
    -------
    xi : torch.Tensor of shape (n,)
    """
    from scipy.special import ndtri

    xi = ndtri((np.arange(n) + 0.5) / n)
    xi = (xi - xi.mean()) / xi.std()
    return torch.as_tensor(xi, dtype=like.dtype, device=like.device)


class PBPNetwork(BayesianLayerStack):
    r"""A ReLU regression network with the approximate posterior of PBP.

    q(w, lambda, gamma) = prod N(w | m, v) Ga(lambda | alpha_l, beta_l)
    Ga(gamma | alpha_g, beta_g) (Cinelli 2019, eqs. 3.13-3.19): the weights
    (:class:`PBPLinear` layers), the precision lambda of their shared prior
    N(w | 0, 1/lambda) and one noise precision gamma per output.

    Parameters
    ----------
    n_features : int
        Input width d.
    hidden_layer_sizes : sequence of int
        Widths of the ReLU hidden layers; empty gives Bayesian linear regression.
    n_outputs : int, default=1
        Output width k (independent outputs, one noise precision each).
    prior_alpha, prior_beta : float, default=6.0
        Hyperprior Ga(lambda | alpha_0, beta_0) of the weight-prior precision
        (shape, rate). The default 6, 6 (E[1/lambda] = 1.2) is the reference
        implementation's; Cinelli 2019 only calls it "weak".
    noise_alpha, noise_beta : float, default=6.0
        Hyperprior Ga(gamma | alpha_0, beta_0) of the noise precision, for
        standardised targets (E[1/gamma] = 1.2, reference implementation).
    generator : torch.Generator, optional
        Source of the random initial means (the symmetry breaker of the
        reference implementation: N(0, 1) / (V + 1) for the scaled weights).
    device, dtype : optional
        Where and in which precision the tensors live.

    Raises
    ------
    ValueError
        If a hyperprior shape is <= 1 or a rate is <= 0 (E[1/lambda] and
        E[1/gamma] must exist).

    Notes
    -----
    The network follows the protocol of :class:`~skbayes.nn.BayesianMLP`
    (``forward``, ``sample_parameters``, ``forward_with``, ``kl``,
    ``layers``), so its posterior predicts by Monte Carlo like a mean-field
    network; :meth:`moments` gives PBP's own Gaussian approximation of the
    predictive instead (eq. 3.38).

    ``log_z_gradients`` and ``hidden_workspace`` are the functions of this
    module, reached through the network by
    :meth:`~skbayes.nn.optim.PBPOptimizer.adf_pass` (the optimiser module is
    imported by this one and does not import it back).
    """

    activation = "relu"
    #: How the network predicts: "sampling" (weight draws from q, the protocol of
    #: :class:`~skbayes.nn.BayesianMLP`) or "moments" (the Gaussian of :meth:`moments`).
    predictive = "sampling"
    log_z_gradients = staticmethod(log_z_gradients)
    hidden_workspace = staticmethod(hidden_workspace)

    def __init__(
        self,
        n_features,
        hidden_layer_sizes,
        n_outputs=1,
        *,
        prior_alpha=6.0,
        prior_beta=6.0,
        noise_alpha=6.0,
        noise_beta=6.0,
        generator=None,
        device=None,
        dtype=None,
    ):
        super().__init__()
        for name, a, b in (
            ("prior", prior_alpha, prior_beta),
            ("noise", noise_alpha, noise_beta),
        ):
            if not (a > 1 and b > 0):
                raise ValueError(
                    f"{name}_alpha must be > 1 and {name}_beta > 0; got {a!r} and {b!r}."
                )
        factory = {"device": device, "dtype": dtype}
        sizes = [n_features, *hidden_layer_sizes, n_outputs]
        init_var = prior_beta / (prior_alpha - 1.0)
        self.layers = nn.ModuleList(
            PBPLinear(n_in, n_out, init_var=init_var, generator=generator, **factory)
            for n_in, n_out in pairwise(sizes)
        )
        self.register_buffer(
            "prior_alpha0", torch.tensor(float(prior_alpha), **factory)
        )
        self.register_buffer("prior_beta0", torch.tensor(float(prior_beta), **factory))
        self.register_buffer("prior_alpha", torch.tensor(float(prior_alpha), **factory))
        self.register_buffer("prior_beta", torch.tensor(float(prior_beta), **factory))
        self.register_buffer(
            "noise_alpha", torch.full((n_outputs,), float(noise_alpha), **factory)
        )
        self.register_buffer(
            "noise_beta", torch.full((n_outputs,), float(noise_beta), **factory)
        )

    # ------------------------------------------------------------ expectations
    def expected_noise_var(self):
        """E[1/gamma] = beta / (alpha - 1) per output, tensor of shape (k,)."""
        return self.noise_beta / (self.noise_alpha - 1.0)

    def expected_prior_var(self):
        """E[1/lambda] = beta / (alpha - 1), the prior variance of the unscaled weights (scalar tensor)."""
        return self.prior_beta / (self.prior_alpha - 1.0)

    # ----------------------------------------------------- moment propagation
    def moments(self, x):
        """Mean and variance of the network output under q(w) (Cinelli 2019, eqs. 3.39-3.43).

        Parameters
        ----------
        x : torch.Tensor of shape (n, n_features)

        Returns
        -------
        mean, var : torch.Tensor of shape (n, n_outputs)
            Moments of f(x, w), w ~ q (noise excluded), each layer's
            pre-activations treated as independent Gaussians.
        """
        mean, var = x, None
        for i, layer in enumerate(self.layers):
            if i:
                mean, var = relu_moments(mean, var)
            mean, var = layer.moments(mean, var)
        return mean, var

    # ---------------------------------------------------------- prediction
    def sample_parameters(self, n_samples, generator=None):
        """``n_samples`` draws for :meth:`forward_with`: weight draws from q, or Gaussian output draws.

        With ``predictive="sampling"`` a list of (W, b) per layer (the
        protocol of :class:`~skbayes.nn.BayesianMLP`); with ``"moments"`` a
        ``GaussianOutputDraws`` of n_samples N(0, 1) values xi, each
        shared by all rows: f_s(x) = m(x) + v(x)^(1/2) xi_s.
        """
        if self.predictive == "moments":
            like = self.layers[0].mean
            return GaussianOutputDraws(standard_normal((n_samples,), like, generator))
        return super().sample_parameters(n_samples, generator)

    def quadrature_parameters(self, n_nodes):
        """Deterministic nodes of the Gaussian predictive (``predictive="moments"``), else None.

        ``gaussian_quadrature_nodes``: the estimators average their
        predictive quantities over them instead of over random draws, so
        that the mean and the variance of f are those of :meth:`moments`
        exactly.
        """
        if self.predictive != "moments":
            return None
        return GaussianOutputDraws(gaussian_quadrature_nodes(max(int(n_nodes), 2), self.layers[0].mean))

    def forward_with(self, x, parameters):
        """The network's outputs under draws of :meth:`sample_parameters` or :meth:`quadrature_parameters`.

        Returns
        -------
        f : torch.Tensor of shape (n_draws, n, n_outputs)
        """
        if isinstance(parameters, GaussianOutputDraws):
            mean, var = self.moments(x)
            return mean + var.clamp_min(0.0).sqrt() * parameters.xi[:, None, None]
        return super().forward_with(x, parameters)

    def prediction_row_size(self, parameters):
        """Numbers held per row at prediction under Gaussian output draws (bounds the rows per block).

        None for weight draws: the estimators' rule for the MLPs applies.
        """
        if not isinstance(parameters, GaussianOutputDraws):
            return None
        width = max(max(layer.in_features, layer.out_features) for layer in self.layers)
        return 4 * width + 2 * parameters.xi.shape[0] * self.layers[-1].out_features

    def log_z(self, x, y, noise_var=None):
        r"""log Z of each row, differentiable in the layers' means and variances.

        Z_i = N(y_i | m(x_i), v(x_i) + sigma^2) (Cinelli 2019, eq. 3.38), the
        Gaussian approximation of the probability of the row under q, with
        sigma^2 = E[1/gamma] (the Student-t of the Gamma-marginalised noise
        replaced by the Gaussian of the same variance) unless given.

        Parameters
        ----------
        x : torch.Tensor of shape (n, n_features)
        y : torch.Tensor of shape (n, n_outputs)
        noise_var : torch.Tensor of shape (n_outputs,), optional
            A fixed noise variance; None uses E[1/gamma].

        Returns
        -------
        log_z : torch.Tensor of shape (n,)
            In nats, summed over the outputs.
        rows : RowMoments
            The rows' moments (detached) and targets, for the ADF step
            (:meth:`~skbayes.nn.optim.PBPOptimizer.step`) and :meth:`update_noise`.
        """
        mean, var = self.moments(x)
        if noise_var is None:
            noise_var = self.expected_noise_var()
        log_z = gaussian_log_prob(y, mean, var + noise_var).sum(-1)
        return log_z, RowMoments(mean.detach(), var.detach(), y)

    # ---------------------------------------------------------------- updates
    @torch.no_grad()
    def update_noise(self, rows):
        """ADF update of q(gamma) with the given rows (eqs. 3.30-3.31).

        :func:`~skbayes.nn.optim.adf.include_noise_rows` on q(gamma): with
        several rows their changes of (alpha, beta) are added.

        Parameters
        ----------
        rows : RowMoments
            The rows' moments under q(w) and targets, as returned by :meth:`log_z`.

        Returns
        -------
        accepted : torch.BoolTensor of shape (n_outputs,)
            Whether q(gamma) of each output changed.
        """
        mean, var, y = rows
        ok = include_noise_rows(self.noise_alpha, self.noise_beta, mean, var, y)
        return ok

    @torch.no_grad()
    def refine_prior(self):
        r"""EP update of every prior factor N(w_j | 0, 1/lambda), all weights in parallel.

        For each weight, the cavity q / f~_j (Gaussian and Gamma parts) is
        formed, the factor is included with
        K_s = N(m_cav | 0, v_cav + beta_cav / (alpha_cav - 1 + s)) (Cinelli 2019,
        eq. 3.24; the Student-t of the marginalised prior replaced by the
        Gaussian of the same variance), the Gaussian moments follow eqs. 3.34
        and 3.37 and the Gamma moments eqs. 3.30-3.31; the new site is the
        new q over the cavity. Cavities with v_cav <= 0 or > 1e6,
        beta_cav <= 0 or alpha_cav <= 1 are left alone (reference
        implementation). Then q(lambda) = Ga(alpha_0 + sum_j alpha~_j,
        beta_0 + sum_j beta~_j).

        Returns
        -------
        n_refined : int
            Number of prior factors updated.
        """
        a, b = self.prior_alpha, self.prior_beta
        n_refined = 0
        site_alpha_sum = torch.zeros_like(a)
        site_beta_sum = torch.zeros_like(b)
        for layer in self.layers:
            root = math.sqrt(layer.scale2)
            m, v = layer.mean * root, layer.var * layer.scale2
            prec_cav = 1.0 / v - layer.site_precision
            mp_cav = m / v - layer.site_mean_precision
            v_cav = 1.0 / prec_cav
            m_cav = mp_cav * v_cav
            a_cav = a - layer.site_alpha
            b_cav = b + layer.site_beta
            ok = (v_cav > 0) & (v_cav < _MAX_CAVITY_VAR) & (b_cav > 0) & (a_cav > 1)
            # Evaluate on safe values everywhere, keep only the valid cavities.
            v_cav = torch.where(ok, v_cav, torch.ones_like(v_cav))
            m_cav = torch.where(ok, m_cav, torch.zeros_like(m_cav))
            a_cav = torch.where(ok, a_cav, torch.full_like(a_cav, 2.0))
            b_cav = torch.where(ok, b_cav, torch.ones_like(b_cav))
            log_z = gamma_log_normalisers(a_cav, b_cav, m_cav * m_cav, v_cav)
            total0 = v_cav + b_cav / (a_cav - 1.0)
            m_new = m_cav - v_cav * m_cav / total0
            v_new = v_cav - v_cav * v_cav / total0
            a_new, b_new = gamma_moment_update(a_cav, b_cav, *log_z)
            ok &= (
                (v_new > 0)
                & torch.isfinite(m_new)
                & torch.isfinite(a_new)
                & torch.isfinite(b_new)
            )
            ok &= (a_new > 1.0) & (b_new > 0.0)
            layer.site_precision.copy_(
                torch.where(ok, 1.0 / v_new - 1.0 / v_cav, layer.site_precision)
            )
            layer.site_mean_precision.copy_(
                torch.where(
                    ok, m_new / v_new - m_cav / v_cav, layer.site_mean_precision
                )
            )
            layer.site_alpha.copy_(torch.where(ok, a_new - a_cav, layer.site_alpha))
            layer.site_beta.copy_(torch.where(ok, b_cav - b_new, layer.site_beta))
            layer.mean.copy_(torch.where(ok, m_new / root, layer.mean))
            layer.var.copy_(torch.where(ok, v_new / layer.scale2, layer.var))
            site_alpha_sum += layer.site_alpha.sum()
            site_beta_sum += layer.site_beta.sum()
            n_refined += int(ok.sum())
        alpha = self.prior_alpha0 + site_alpha_sum
        beta = self.prior_beta0 - site_beta_sum
        if bool(
            torch.isfinite(alpha) & torch.isfinite(beta) & (alpha > 1.0) & (beta > 0.0)
        ):
            self.prior_alpha.copy_(alpha)
            self.prior_beta.copy_(beta)
        return n_refined

    def kl(self):
        """KL(q(w) || N(0, E[1/lambda])) of all the weights, a scalar in nats (a diagnostic)."""
        prior_var = self.expected_prior_var().detach()
        return sum(layer.kl(prior_var) for layer in self.layers)
