r"""Assumed density filtering (ADF): the moment-matching updates of probabilistic backpropagation.

Every training row of PBP (Hernández-Lobato & Adams 2015,
[HernandezLobato2015]_; Cinelli 2019, section 3.4, Algorithm 3) is a
likelihood factor included by matching the moments of q(w) N(y | f(x, w), 1/gamma)
with the update of Cinelli 2019, eqs. 3.34 and 3.37,

.. math::

    m \leftarrow m + v \frac{\partial \log Z}{\partial m}, \qquad
    v \leftarrow v - v^2 \Big[\Big(\frac{\partial \log Z}{\partial m}\Big)^2
                              - 2 \frac{\partial \log Z}{\partial v}\Big]

(:func:`adf_gaussian_update`), and the Gamma posteriors over precisions by
matching their first two moments (eqs. 3.30-3.31, :func:`gamma_moment_update`).
The training loop uses :meth:`PBPOptimizer.adf_pass`, which takes the
gradients of log Z from their hand-written vector-Jacobian product
(:func:`~skbayes.nn.networks.pbp.log_z_gradients`) and runs the per-row steps
on NumPy views of the CPU tensors, where a step of one row costs far less than
torch's eager dispatch of the same operations (about 55 against 370
microseconds per row of a 8-50-1 network, float64, one thread; the autograd
step costs more still). :class:`PBPOptimizer` is also a
:class:`torch.optim.Optimizer` whose ``step()`` applies the update given
autograd's gradients of the loss ``-log Z``, for loops of one's own.

With several rows per step (not in the paper, whose schedule is one row per
step) the weights take one ADF step with the sum of the rows' log Z, i.e. the
minibatch is one factor whose rows are treated as independent under q. It is
faster per row and approximate: on kin8nm split 0 (40 epochs) the test
log-likelihood was 0.86 with 16 rows per step and 0.82 with 64.

References
----------
.. [HernandezLobato2015] J. M. Hernández-Lobato and R. P. Adams, "Probabilistic
   backpropagation for scalable learning of Bayesian neural networks", ICML 2015
   (Cinelli 2019, section 3.4).
"""

import sys

import numpy as np
import torch

from ..functional import NUMPY_OPS, TORCH_OPS, array_ops
from ._closure import evaluate_closure

__all__ = [
    "PBPOptimizer",
    "adf_gaussian_update",
    "adf_gaussian_update_",
    "gamma_log_normalisers",
    "gamma_moment_update",
    "include_noise_rows",
    "valid_gamma",
]


def adf_gaussian_update(mean, var, d_mean, d_var):
    r"""ADF moment-matching update of independent Gaussian factors N(m, v).

    Cinelli 2019, eqs. 3.34 and 3.37 (Hernández-Lobato & Adams 2015, eqs. 5-6):
    ``m + v dlogZ/dm`` and ``v - v^2 [(dlogZ/dm)^2 - 2 dlogZ/dv]``. An update
    that gives a non-positive variance or a non-finite value is skipped for
    that weight (the safeguard of the reference implementation).

    Parameters
    ----------
    mean, var : torch.Tensor
        Current means and variances (var > 0), any shape.
    d_mean, d_var : torch.Tensor
        dlogZ/dm and dlogZ/dv, same shape.

    Returns
    -------
    new_mean, new_var : torch.Tensor
        Updated moments (the old ones where the update was skipped).
    accepted : torch.BoolTensor
        Where the update was applied.
    """
    new_mean, new_var, accepted = _adf_moments(mean, var, d_mean, d_var, TORCH_OPS)
    return (
        torch.where(accepted, new_mean, mean),
        torch.where(accepted, new_var, var),
        accepted,
    )


def _adf_moments(mean, var, d_mean, d_var, ops):
    """The moments of :func:`adf_gaussian_update` and where they are acceptable (torch or NumPy)."""
    new_mean = mean + var * d_mean
    new_var = var - var * var * (d_mean * d_mean - 2.0 * d_var)
    # A finite positive new_var implies finite gradients, hence a finite new_mean.
    info = ops.finfo(var.dtype)
    return new_mean, new_var, (new_var > info.tiny) & (new_var <= info.max)


def adf_gaussian_update_(mean, var, d_mean, d_var, ops=TORCH_OPS):
    """:func:`adf_gaussian_update` in place, on torch tensors or NumPy arrays.

    Parameters
    ----------
    mean, var : array
        Updated in place where the update is accepted.
    d_mean, d_var : array
        dlogZ/dm and dlogZ/dv, same shape.
    ops : ArrayOps, default=TORCH_OPS
        :data:`~skbayes.nn.functional.NUMPY_OPS` for NumPy arrays.

    Returns
    -------
    accepted : bool array
        Where the update was applied.
    """
    new_mean, new_var, accepted = _adf_moments(mean, var, d_mean, d_var, ops)
    ops.assign_where(mean, accepted, new_mean)
    ops.assign_where(var, accepted, new_var)
    return accepted


def gamma_moment_update(alpha, beta, log_z0, log_z1, log_z2):
    r"""Gamma(alpha, beta) matching the first two moments of the tilted distribution.

    For a factor with normaliser K(alpha, beta) under Gamma(alpha, beta)
    (shape, rate), Cinelli 2019, eqs. 3.30-3.31 with K_s = K(alpha + s, beta):

    .. math::

        \alpha' = \Big[\frac{K_0 K_2}{K_1^2}\frac{\alpha + 1}{\alpha} - 1\Big]^{-1},
        \qquad
        \beta' = \Big[\frac{K_2}{K_1}\frac{\alpha + 1}{\beta}
                      - \frac{K_1}{K_0}\frac{\alpha}{\beta}\Big]^{-1}.

    Parameters
    ----------
    alpha, beta : torch.Tensor, NumPy array or float
        Current shape and rate (> 0), broadcastable with the log Z's.
    log_z0, log_z1, log_z2 : torch.Tensor, NumPy array or float
        log K_0, log K_1, log K_2 (constants common to the three cancel).

    Returns
    -------
    alpha, beta : torch.Tensor
        The moment-matched shape and rate (not checked for validity).
    """
    exp = array_ops(log_z0).exp
    new_alpha = 1.0 / (exp(log_z2 - 2.0 * log_z1 + log_z0) * (alpha + 1.0) / alpha - 1.0)
    new_beta = 1.0 / (exp(log_z2 - log_z1) * (alpha + 1.0) / beta - exp(log_z1 - log_z0) * alpha / beta)
    return new_alpha, new_beta


def gamma_log_normalisers(alpha, beta, resid2, var):
    r"""log K_s, s = 0, 1, 2, of a Gaussian factor whose precision has the posterior Gamma(alpha, beta).

    K_s = N(r | 0, var + beta / (alpha - 1 + s)) with r^2 = ``resid2``: the
    normaliser of the factor under Gamma(alpha + s, beta), the Student-t of the
    marginalised precision replaced by the Gaussian of the same variance
    (Cinelli 2019, eqs. 3.24 and 3.38). These are the inputs of
    :func:`gamma_moment_update`, which the constant -log(2 pi)/2 does not
    affect, so it is left out.

    Parameters
    ----------
    alpha, beta : torch.Tensor, NumPy array or float
        Shape and rate of the Gamma, broadcastable with ``resid2`` and ``var``.
    resid2, var : torch.Tensor, NumPy array or float (all of one kind)
        Squared residual and the variance of the Gaussian part.

    Returns
    -------
    log_z0, log_z1, log_z2 : torch.Tensor
        Broadcast shape of the inputs.
    """
    log = array_ops(var).log
    log_z = []
    for s in range(3):
        total = var + beta / (alpha - 1.0 + s)
        log_z.append(-0.5 * (log(total) + resid2 / total))
    return tuple(log_z)


def valid_gamma(alpha, beta):
    """alpha > 1 and 0 < beta, both finite (NaN fails the comparisons), elementwise."""
    big = sys.float_info.max if isinstance(alpha, float) else array_ops(alpha).finfo(alpha.dtype).max
    return (alpha > 1.0) & (alpha <= big) & (beta > 0.0) & (beta <= big)


class PBPOptimizer(torch.optim.Optimizer):
    r"""PBP as a :class:`torch.optim.Optimizer`: one ADF step per minibatch.

    The loss must be ``-log_z.mean()`` for ``log_z, rows =
    network.log_z(x, y)`` of the minibatch, so that the gradients of the
    layers' ``mean`` and ``var`` are -dlogZ/dm and -dlogZ/dv divided by the
    number of rows; ``step(rows)`` then applies the ADF update
    (:func:`adf_gaussian_update`, with the safeguard) and updates q(gamma)
    with the same rows when ``update_noise``
    (:meth:`~skbayes.nn.networks.PBPNetwork.update_noise`). There is no
    learning rate. The optimiser knows nothing of epochs: the refinement of
    the prior factors after each pass over the data
    (:meth:`~skbayes.nn.networks.PBPNetwork.refine_prior`, Cinelli 2019,
    Algorithm 3) is the training loop's.

    Parameters
    ----------
    network : PBPNetwork
    update_noise : bool, default=True
        Update q(gamma); False when the noise variance is fixed.
    """

    def __init__(self, network, *, update_noise=True):
        params = [p for layer in network.layers for p in (layer.mean, layer.var)]
        super().__init__(params, {})
        self.network = network
        self.update_noise = bool(update_noise)
        self._n_rejected = 0

    @property
    def n_rejected(self):
        """Number of weight updates skipped by the safeguard so far (int)."""
        return int(self._n_rejected)

    @torch.no_grad()
    def adf_pass(self, x, y, *, batch_size=1, noise_var=None):
        r"""Include the rows of (x, y) in their order, ``batch_size`` rows per ADF step.

        Each step is that of :meth:`step` (the weights by eqs. 3.34 and 3.37,
        then q(gamma) with the same rows when ``update_noise``), with the
        gradients of log Z from the hand-written vector-Jacobian product
        :func:`~skbayes.nn.networks.pbp.log_z_gradients` instead of autograd,
        and no per-step allocation of torch tensors: on the CPU the steps
        run on NumPy views of the network's tensors (updated in place), where
        a step of one row costs a few dozen microseconds; on other devices
        on the tensors, with no synchronisation with the host.

        Parameters
        ----------
        x : torch.Tensor of shape (n, n_features)
        y : torch.Tensor of shape (n, n_outputs)
        batch_size : int, default=1
            Rows per step (one, the paper's schedule; more: one factor of
            independent rows, as in :meth:`step`); the last step may have fewer.
        noise_var : torch.Tensor of shape (n_outputs,), optional
            A fixed noise variance; None uses E[1/gamma], updated after every step.

        Returns
        -------
        log_z : torch.Tensor of shape (n,)
            log Z of each row under q before the step that included it, in nats.
        """
        network = self.network  # a PBPNetwork: its log Z gradients (networks import this module, not back)
        on_cpu = x.device.type == "cpu"
        ops = NUMPY_OPS if on_cpu else TORCH_OPS

        def arrays(tensor):
            return tensor.detach().numpy() if on_cpu else tensor.detach()

        means = [arrays(layer.mean) for layer in network.layers]
        variances = [arrays(layer.var) for layer in network.layers]
        x, y = arrays(x), arrays(y)
        n = x.shape[0]
        if on_cpu:
            inputs = np.concatenate([x, np.ones((n, 1), x.dtype)], axis=1)
            log_z = np.empty(n, x.dtype)
        else:
            inputs = torch.cat([x, x.new_ones((n, 1))], dim=1)
            log_z = x.new_empty(n)
        inputs_sq = inputs * inputs
        hidden = network.hidden_workspace(means, min(batch_size, n), inputs)
        alpha, beta = arrays(network.noise_alpha), arrays(network.noise_beta)
        learn = noise_var is None
        if not learn:
            noise_var = arrays(noise_var)
        n_rejected = 0
        for start in range(0, n, batch_size):
            stop = start + batch_size
            if learn:
                noise_var = beta / (alpha - 1.0)
            log_z[start:stop], grads, mean, var = network.log_z_gradients(
                inputs[start:stop], y[start:stop], means, variances, noise_var,
                inputs_sq=inputs_sq[start:stop], hidden=hidden, ops=ops,
            )
            for weight_mean, weight_var, (d_mean, d_var) in zip(means, variances, grads):
                accepted = adf_gaussian_update_(weight_mean, weight_var, d_mean, d_var, ops)
                n_rejected += accepted.size - np.count_nonzero(accepted) if on_cpu else (~accepted).sum()
            if self.update_noise:
                if on_cpu and stop - start == 1:
                    _include_noise_row(alpha, beta, mean[0], var[0], y[start])
                else:
                    include_noise_rows(alpha, beta, mean, var, y[start:stop])
        self._n_rejected += n_rejected
        return torch.from_numpy(log_z) if on_cpu else log_z

    @torch.no_grad()
    def step(self, rows, closure=None):
        """Apply the ADF update of one minibatch.

        Parameters
        ----------
        rows : RowMoments
            What ``network.log_z(x, y)`` returned with the log Z whose mean
            the gradients are of (its number of rows rescales them).
        closure : callable, optional
            Re-evaluates and returns the loss (with its gradients); ``step``
            returns that loss (None without a closure).
        """
        loss = evaluate_closure(closure)
        network = self.network
        n_rows = rows.mean.shape[0]
        for layer in network.layers:
            if layer.mean.grad is None or layer.var.grad is None:
                continue
            # loss = -mean_i log Z_i, so dlogZ/dtheta = -n_rows * grad.
            scale = -float(n_rows)
            new_mean, new_var, accepted = adf_gaussian_update(
                layer.mean, layer.var, layer.mean.grad * scale, layer.var.grad * scale
            )
            layer.mean.copy_(new_mean)
            layer.var.copy_(new_var)
            self._n_rejected += accepted.numel() - accepted.sum()
        if self.update_noise:
            network.update_noise(rows)
        return loss


def include_noise_rows(alpha, beta, mean, var, y):
    """ADF update of q(gamma) = Ga(alpha, beta) with rows of moments (mean, var), in place (eqs. 3.30-3.31).

    Each row's moment-matched Gamma is computed from the current q(gamma);
    with several rows their changes of (alpha, beta) are added (a parallel
    update; with one row, as in the paper, it is the plain ADF step). Rows
    whose update gives a non-finite value, alpha <= 1 or beta <= 0 are
    skipped, and so is the whole update if the sum is invalid.

    Parameters
    ----------
    alpha, beta : torch.Tensor or NumPy array of shape (n_outputs,)
        Shape and rate of q(gamma) of each output, updated in place.
    mean, var : array of shape (n, n_outputs)
        The rows' output moments under q(w) (noise excluded).
    y : array of shape (n, n_outputs)
        Their targets.

    Returns
    -------
    accepted : bool array of shape (n_outputs,)
        Whether q(gamma) of each output changed.
    """
    ops = array_ops(alpha)
    log_z = gamma_log_normalisers(alpha, beta, (y - mean) ** 2, var)
    new_alpha, new_beta = gamma_moment_update(alpha, beta, *log_z)  # (n, k)
    if new_alpha.shape[0] == 1:
        new_alpha, new_beta = new_alpha[0], new_beta[0]
    else:
        ok = valid_gamma(new_alpha, new_beta)
        new_alpha = alpha + ops.where(ok, new_alpha - alpha, 0.0).sum(0)
        new_beta = beta + ops.where(ok, new_beta - beta, 0.0).sum(0)
    ok = valid_gamma(new_alpha, new_beta)
    ops.assign_where(alpha, ok, new_alpha)
    ops.assign_where(beta, ok, new_beta)
    return ok


def _include_noise_row(alpha, beta, mean, var, y):
    """:func:`include_noise_rows` for one row, on NumPy arrays, computed in Python floats (faster)."""
    for k in range(alpha.shape[0]):
        a, b, resid = float(alpha[k]), float(beta[k]), float(y[k]) - float(mean[k])
        try:
            new_alpha, new_beta = gamma_moment_update(a, b, *gamma_log_normalisers(a, b, resid**2, float(var[k])))
        except ArithmeticError:  # an overflow or a division by zero: not finite
            continue
        if valid_gamma(new_alpha, new_beta):
            alpha[k], beta[k] = new_alpha, new_beta
