r"""The Bayesian sparse GP (BSGP): the sampled posterior of (u, theta, Z) and its predictive.

[Rossi2021]_ (Rossi 2022, section 6.3) replace the Gaussian q(u) of SVGP and
the point estimates of the hyperparameters theta and the inducing inputs Z
by samples of their joint posterior (Rossi 2022, eq. 6.17):

.. math::

    \log p(\Psi \mid y, X) = \sum_n \log \mathbb E_{p(f_n \mid \Psi, x_n)}
    p(y_n \mid f_n) + \log p(u \mid \theta, Z) + \log p(Z) + \log p(\theta)
    - \log C,

with the FITC conditional p(f_n | u) = N(mu~_n, sigma~_n^2) (eqs. 6.9-6.10),
so that for Gaussian noise the data term is (eq. 6.12)
sum_n log N(y_n | mu~_n, sigma~_n^2 + sigma^2). For classification
(:func:`data_log_lik`) it is the log of the one-dimensional expectation of
eq. 6.13: with the probit link sum_n log Phi(y~_n mu~_n / sqrt(1 +
sigma~_n^2)), y~_n = +-1 (eq. 6.14); with the logit link a Gauss-Hermite
quadrature inside the log; with C classes and the robust-max likelihood one
latent function per class, each with its own v and the same FITC variance,
and the log of the robust-max predictive probability of the observed class.
The softmax likelihood has no cheap log-expectation and is not supported.
On a minibatch B the sum is scaled by ``N / |B|`` (eq. 2.27), which gives the
energy that SGHMC samples.

Coordinates. The inducing values are sampled whitened, v ~ N(0, I) and
u = L_zz v with L_zz = chol(K_zz) (as in the authors' released code, not
the unwhitened u of the thesis' notation): ``p(v) = p(u) |det L_zz|``, so the
posterior over (u, theta, Z) is the same, but in v the prior does not
couple u to theta and Z (no funnel between u and the length-scales), and
mu~_n = c + a_n^T v, sigma~_n^2 = k_nn - a_n^T a_n with a_n = L_zz^-1 k_zn
(:class:`~skbayes.nn.gp.SVGP`'s cross term; its ``q_mean`` holds
v). The hyperparameters are sampled through their raw (softplus)
coordinates with the Jacobian of :func:`~skbayes.nn.priors.log_normal_raw_log_prob`.

Priors (:class:`SparseGPPriors`, Rossi 2022, section 6.3.1): log-normal
length-scales and signal variance with unit variance and "means" 1 and
0.05, read as the medians exp(loc) of the log-normals, i.e. log l ~ N(0, 1)
and log s^2 ~ N(log 0.05, 1) (the reading of the authors' released code);
Z ~ N(0, I) (assumes standardised inputs) or the determinantal prior
p(Z) ∝ det K_zz; the noise variance sigma^2 (not specified in the thesis)
is sampled too, with log sigma^2 ~ N(log 0.05, 1).

Prediction (:func:`mixture_moments`): each kept sample s gives the FITC
conditional mean and variance mu_s(x) = c + a(x)^T v_s, v_s(x) = k(x, x) -
a(x)^T a(x) (:func:`conditional`); the predictive is the mixture over
samples, summarised by its mean and variance,
mean = avg_s mu_s, var_f = avg_s v_s + var_s mu_s, var_y = var_f + avg_s sigma_s^2.

References
----------
.. [Rossi2021] S. Rossi, M. Heinonen, E. V. Bonilla, Z. Shen and
   M. Filippone, "Sparse Gaussian processes revisited: Bayesian approaches to
   inducing-variable approximations", AISTATS 2021.
.. [Rossi2022] S. Rossi, "Improving scalability and inference in
   probabilistic deep models", PhD thesis, 2022, chapter 6.
"""

import math
from dataclasses import dataclass

import torch
from torch import nn

from ..functional import gaussian_log_prob
from ..priors import dpp_log_prob, log_normal_raw_log_prob, standard_normal_log_prob

__all__ = ["INDUCING_PRIORS", "KeptStates", "SparseGPPriors", "conditional", "data_log_lik", "deep_conditional",
           "deep_neg_log_posterior", "fitc_log_lik", "mixture_moments", "neg_log_posterior"]

#: Floor of an inner layer's conditional variance before its square root (:func:`deep_conditional`).
_MIN_PROPAGATED_VARIANCE = 1e-12
#: The priors p(Z) of the inducing inputs (Rossi 2022, section 6.3.1).
INDUCING_PRIORS = ("normal", "dpp", "uniform")


@dataclass(frozen=True)
class SparseGPPriors:
    """The priors of the Bayesian sparse GP (Rossi 2022, section 6.3.1).

    Each log-normal prior is given as (loc, scale) of the log of the
    hyperparameter, in the standardised units the model works in.

    Attributes
    ----------
    length_scale : tuple of float, default=(0.0, 1.0)
        log l ~ N(0, 1): median 1 (the thesis' "mean 1"), unit variance.
    variance : tuple of float, default=(log 0.05, 1.0)
        log s^2 ~ N(log 0.05, 1): median 0.05 (the thesis' "mean 0.05").
    noise_variance : tuple of float, default=(log 0.05, 1.0)
        log sigma^2 ~ N(log 0.05, 1) (not specified in the thesis).
    inducing : {"normal", "dpp", "uniform"}, default="normal"
        p(Z): N(0, I) per inducing input, det K_zz (unnormalised), or flat.
    """

    length_scale: tuple = (0.0, 1.0)
    variance: tuple = (math.log(0.05), 1.0)
    noise_variance: tuple = (math.log(0.05), 1.0)
    inducing: str = "normal"

    def __post_init__(self):
        if self.inducing not in INDUCING_PRIORS:
            raise ValueError(f"inducing must be one of {INDUCING_PRIORS}; got {self.inducing!r}.")

    def log_prob(self, gp, likelihood, chol_zz):
        r"""log p(v) + log p(Z) + log p(theta) + log p(sigma^2) in the sampled coordinates, a scalar.

        Only the tensors that are sampled (``requires_grad``) contribute: a
        fixed Z, kernel or noise adds a constant, which is left out.

        Parameters
        ----------
        gp : skbayes.nn.SVGP
            Its ``q_mean`` holds the whitened inducing values v; its kernel
            stores ``raw_length_scale`` and ``raw_variance`` (softplus).
        likelihood : skbayes.nn.GaussianLikelihood or a classification likelihood
            The noise prior applies only to a likelihood with a ``raw_noise``.
        chol_zz : torch.Tensor of shape (M, M)
            chol(K_zz), for the determinantal prior.

        Returns
        -------
        log_prior : torch.Tensor, scalar
        """
        total = standard_normal_log_prob(gp.q_mean)
        z = gp.inducing_points
        if z.requires_grad:
            if self.inducing == "normal":
                total = total + standard_normal_log_prob(z)
            elif self.inducing == "dpp":
                total = total + dpp_log_prob(chol_zz)
        kernel = gp.kernel
        for raw, (loc, scale) in ((kernel.raw_length_scale, self.length_scale), (kernel.raw_variance, self.variance)):
            if raw.requires_grad:
                total = total + log_normal_raw_log_prob(raw, loc, scale).sum()
        raw = getattr(likelihood, "raw_noise", None)
        if raw is not None and raw.requires_grad:
            loc, scale = self.noise_variance
            total = total + log_normal_raw_log_prob(
                raw, loc, scale, transform="softplus_squared", floor=likelihood._floor
            ).sum()
        return total


def conditional(gp, x, chol_zz=None):
    r"""The FITC conditional p(f_n | v) at the rows of ``x``: its means and variances.

    mu~_n = c + a_n^T v and sigma~_n^2 = k_nn - a_n^T a_n, a_n = L_zz^-1 k_zn
    (Rossi 2022, eqs. 6.9-6.10 in whitened form), with v = ``gp.q_mean``.

    Parameters
    ----------
    gp : skbayes.nn.SVGP
        With one latent function, or L of them (``n_latent``; v of shape
        (L, M), one row per latent, sharing Z and the kernel).
    x : torch.Tensor of shape (n, d)
    chol_zz : torch.Tensor of shape (M, M), optional
        A precomputed ``gp.chol_zz()``.

    Returns
    -------
    mean, var : torch.Tensor of shape (n,), or (n, L) with L latents
        The variance, the same for every latent, is clipped at 0 against
        round-off.
    """
    if chol_zz is None:
        chol_zz = gp.chol_zz()
    a = gp.whitened_cross(x, chol_zz)
    var = (gp.kernel.diag(x) - a.square().sum(0)).clamp_min(0.0)
    if gp.q_mean.ndim == 1:
        return a.T @ gp.q_mean + gp.mean_constant, var
    mean = a.T @ gp.q_mean.T + gp.mean_constant
    return mean, var[:, None].expand_as(mean)


def fitc_log_lik(gp, x, y, noise_var, chol_zz=None):
    r"""log N(y_n | mu~_n, sigma~_n^2 + sigma^2) per row (Rossi 2022, eqs. 6.5 and 6.12).

    The log of the expectation of the Gaussian likelihood under the FITC
    conditional :func:`conditional`, for the current sample v, Z, theta.

    Parameters
    ----------
    gp : skbayes.nn.SVGP
    x : torch.Tensor of shape (n, d)
    y : torch.Tensor of shape (n,)
    noise_var : torch.Tensor or float
        sigma^2.
    chol_zz : torch.Tensor of shape (M, M), optional

    Returns
    -------
    log_lik : torch.Tensor of shape (n,)
        In nats.
    """
    mean, var = conditional(gp, x, chol_zz)
    return gaussian_log_prob(y, mean, var + noise_var)


def data_log_lik(gp, likelihood, x, y, chol_zz=None):
    r"""log E_{p(f_n | v)}[p(y_n | f_n)] per row: the data term of Rossi 2022, eq. 6.17.

    Gaussian likelihood: log N(y_n | mu~_n, sigma~_n^2 + sigma^2)
    (:func:`fitc_log_lik`, eq. 6.12). Classification likelihood: its
    ``log_predictive_prob`` at the FITC conditional (eq. 6.13; for the
    probit link log Phi(y~_n mu~_n / sqrt(1 + sigma~_n^2)), eq. 6.14).

    Parameters
    ----------
    gp : skbayes.nn.SVGP
    likelihood : skbayes.nn.GaussianLikelihood, skbayes.nn.BinaryLikelihood or skbayes.nn.RobustMaxLikelihood
    x : torch.Tensor of shape (n, d)
    y : torch.Tensor of shape (n,)
        Targets, or class indices.
    chol_zz : torch.Tensor of shape (M, M), optional

    Returns
    -------
    log_lik : torch.Tensor of shape (n,)
        In nats.

    Raises
    ------
    ValueError
        For a likelihood without a log-expectation (the softmax).
    """
    if hasattr(likelihood, "noise_std"):
        return fitc_log_lik(gp, x, y, likelihood.noise_std[0].square(), chol_zz)
    if not hasattr(likelihood, "log_predictive_prob"):
        raise ValueError(
            f"{type(likelihood).__name__} has no log-expectation of the likelihood under a Gaussian "
            "(log_predictive_prob); the Bayesian sparse GP cannot use it."
        )
    mean, var = conditional(gp, x, chol_zz)
    return likelihood.log_predictive_prob(y, mean, var)


def neg_log_posterior(gp, likelihood, x, y, n_data, priors):
    r"""Per-datum minibatch energy U / N of the BSGP posterior (Rossi 2022, eq. 6.17).

    .. math::

        \frac{\tilde U}{N} = -\frac{1}{|B|} \sum_{n \in B}
        \log \mathcal N(y_n \mid \tilde\mu_n, \tilde\sigma_n^2 + \sigma^2)
        - \frac{\log p(v) + \log p(Z) + \log p(\theta) + \log p(\sigma^2)}{N},

    an unbiased estimate of minus the log posterior (up to a constant)
    divided by N: eq. 6.17 with the minibatch scaling of eq. 2.27. With a
    classification likelihood the Gaussian term is replaced by the log of
    the expected likelihood of :func:`data_log_lik` (eqs. 6.13-6.14). This is
    the loss that :class:`skbayes.nn.SGHMC` takes (it multiplies the
    gradient by N).

    Parameters
    ----------
    gp : skbayes.nn.SVGP
        The current sample: v in ``q_mean``, Z, the kernel.
    likelihood : skbayes.nn.GaussianLikelihood, skbayes.nn.BinaryLikelihood or skbayes.nn.RobustMaxLikelihood
        Gaussian with one output, or a classification likelihood.
    x : torch.Tensor of shape (batch_size, d)
    y : torch.Tensor of shape (batch_size,)
        Targets, or class indices.
    n_data : int
        N.
    priors : SparseGPPriors

    Returns
    -------
    energy : torch.Tensor, scalar
    """
    chol_zz = gp.chol_zz()
    log_lik = data_log_lik(gp, likelihood, x, y, chol_zz)
    return -log_lik.mean() - priors.log_prob(gp, likelihood, chol_zz) / n_data


def deep_conditional(dgp, x, noise, chols=None):
    r"""Marginals of f^L at x for one sample of every layer's (v, Z, theta): the sampled deep GP's pass.

    Each layer's FITC conditional :func:`conditional` given its sampled v;
    the inner layers are propagated by single draws,
    f̃^l = f̃^{l-1} W_l + mu~^l(f̃^{l-1}) + sigma~^l(f̃^{l-1}) * eps^l,
    f̃^0 = x (Rossi 2022, eqs. 6.21-6.22, "single MC samples" layer by
    layer; the inner layers' fixed linear means W_l of
    :class:`~skbayes.nn.gp.DeepGP`), and the last layer's conditional is
    returned in closed form (eq. 6.23).

    Parameters
    ----------
    dgp : skbayes.nn.gp.DeepGP
        The current sample: each layer's v in ``q_mean`` (q's scale is not used).
    x : torch.Tensor of shape (n, d)
    noise : sequence of torch.Tensor
        L - 1 standard normal tensors eps^l of shape (S, n, H_l), or
        (S, 1, H_l) for numbers shared by all rows.
    chols : sequence of torch.Tensor, optional
        Each layer's precomputed ``chol_zz()``.

    Returns
    -------
    mean, var : torch.Tensor of shape (S, n)
        Mean and variance of p(f^L_n | v^L, f̃^{L-1}_n) per draw (S = 1 with one layer).
    """
    chols = [None] * dgp.n_layers if chols is None else chols
    h = x.unsqueeze(0)
    for index, eps in enumerate(noise):
        gp = dgp.layers[index]
        flat = h.reshape(-1, h.shape[-1])
        mean, var = conditional(gp, flat, chols[index])
        mean = mean + flat @ dgp.mean_weight(index)
        lead = h.shape[:-1]  # (1, n) for the first layer, then (S, n)
        # at an inducing input the FITC variance is 0 (clipped): keep the square root's gradient finite
        h = mean.reshape(*lead, -1) + var.clamp_min(_MIN_PROPAGATED_VARIANCE).sqrt().reshape(*lead, -1) * eps
    mean, var = conditional(dgp.layers[-1], h.reshape(-1, h.shape[-1]), chols[-1])
    return mean.reshape(h.shape[:-1]), var.reshape(h.shape[:-1])


def deep_neg_log_posterior(dgp, likelihood, x, y, n_data, priors, noise):
    r"""Per-datum minibatch energy U / N of the sampled deep GP (Rossi 2022, eqs. 6.21-6.23).

    .. math::

        \frac{\tilde U}{N} = -\frac{1}{S |B|} \sum_{s} \sum_{n \in B}
        \log \mathcal N(y_n \mid \tilde\mu^L_{ns}, \tilde\sigma^{L2}_{ns} + \sigma^2)
        - \frac{1}{N} \Big[\sum_l \log p(v^l) + \log p(Z^l) + \log p(\theta^l)\Big]
        - \frac{\log p(\sigma^2)}{N},

    with the last layer's inputs drawn by :func:`deep_conditional` (one
    draw per row and s: an unbiased estimate of E_eps[log p(y | f̃^{L-1})],
    the single-sample data term of eq. 6.22, with the BSGP's "log of
    expectation" form, eq. 6.17, at the last layer) and every layer under the priors of :class:`SparseGPPriors`
    (only its sampled tensors count). With one layer it is
    :func:`neg_log_posterior`.

    Parameters
    ----------
    dgp : skbayes.nn.gp.DeepGP
    likelihood : skbayes.nn.GaussianLikelihood
        One output.
    x : torch.Tensor of shape (batch_size, d)
    y : torch.Tensor of shape (batch_size,)
    n_data : int
        N.
    priors : SparseGPPriors
    noise : sequence of torch.Tensor
        The eps^l of :func:`deep_conditional`.

    Returns
    -------
    energy : torch.Tensor, scalar
    """
    chols = [gp.chol_zz() for gp in dgp.layers]  # one factorisation per layer, for the pass and the priors
    mean, var = deep_conditional(dgp, x, noise, chols)
    log_lik = gaussian_log_prob(y, mean, var + likelihood.noise_std[0] ** 2)
    last = dgp.n_layers - 1
    log_prior = sum(
        priors.log_prob(gp, likelihood if index == last else None, chol) for index, (gp, chol) in
        enumerate(zip(dgp.layers, chols))
    )
    return -log_lik.mean() - log_prior / n_data


def mixture_moments(means, variances):
    """Mean and variance of an equally weighted mixture of Gaussians.

    mean = avg_s mu_s and var = avg_s v_s + var_s mu_s (the law of total
    variance; the population variance over samples).

    Parameters
    ----------
    means, variances : torch.Tensor of shape (S, ...)
        Per-sample means and variances, samples on the first axis.

    Returns
    -------
    mean, var : torch.Tensor of shape (...)
    """
    mean = means.mean(0)
    return mean, variances.mean(0) + (means - mean).square().mean(0)


class KeptStates(nn.Module):
    """Kept samples of some tensors of a module, stacked on a first axis.

    Holds, for each name of ``names`` (a dotted name of a parameter or
    buffer of the module the samples were taken from, e.g.
    ``"gp.q_mean"``), a buffer of shape (n_samples, ...), so that the
    samples move with ``.to(device)`` and pickle with the estimator.

    Parameters
    ----------
    samples : dict of str to torch.Tensor of shape (n_samples, ...)
    n_chains : int
        Number of chains the samples come from, chain-major (sample
        ``c * n_kept + j`` is the j-th kept sample of chain c).
    """

    def __init__(self, samples, n_chains):
        super().__init__()
        self.names = list(samples)
        self.n_chains = int(n_chains)
        for i, name in enumerate(self.names):
            self.register_buffer(f"state_{i}", samples[name])

    @property
    def n_samples(self):
        """Number of kept samples (all chains)."""
        return self.state_0.shape[0] if self.names else 0

    def stacked(self, name):
        """The samples of ``name``, shape (n_samples, ...)."""
        return getattr(self, f"state_{self.names.index(name)}")

    @torch.no_grad()
    def load_(self, index, module):
        """Copy sample ``index`` into the tensors of ``module`` with the stored names."""
        tensors = dict(module.named_parameters())
        tensors.update(dict(module.named_buffers()))
        for i, name in enumerate(self.names):
            tensors[name].copy_(getattr(self, f"state_{i}")[index])
        return module
