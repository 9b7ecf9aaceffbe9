r"""Log-densities of the priors of the Bayesian sparse GP (Rossi 2022, section 6.3.1).

The sampled coordinates are unconstrained ("raw") values r mapped to a
positive hyperparameter theta = g(r) (softplus for the kernel, the squared
softplus-plus-floor standard deviation for the noise variance). A prior on
theta is a density on r through the change of variables

.. math::

    \log p_r(r) = \log p_\theta(g(r)) + \log |g'(r)|,

which :func:`log_normal_raw_log_prob` evaluates for the log-normal priors.

References
----------
.. [Rossi2022] S. Rossi, "Improving scalability and inference in
   probabilistic deep models", PhD thesis, 2022, section 6.3.1.
.. [Rossi2021] S. Rossi, M. Heinonen, E. V. Bonilla, Z. Shen and
   M. Filippone, "Sparse Gaussian processes revisited: Bayesian approaches to
   inducing-variable approximations", AISTATS 2021.
"""

import math

from torch.nn import functional as F

__all__ = ["dpp_log_prob", "log_normal_log_prob", "log_normal_raw_log_prob", "standard_normal_log_prob"]

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def log_normal_log_prob(value, loc, scale):
    r"""Elementwise log-density of LogNormal(loc, scale) at ``value`` > 0.

    log p(x) = -log x - log scale - log(2 pi) / 2 - (log x - loc)^2 / (2 scale^2):
    log x ~ N(loc, scale^2). The median of x is exp(loc).

    Parameters
    ----------
    value : torch.Tensor
        Positive values.
    loc, scale : float
        Mean and standard deviation of log x (scale > 0).

    Returns
    -------
    log_prob : torch.Tensor, shape of ``value``
    """
    log_x = value.log()
    return -log_x - math.log(scale) - _HALF_LOG_2PI - 0.5 * ((log_x - loc) / scale).square()


def log_normal_raw_log_prob(raw, loc, scale, *, transform="softplus", floor=0.0):
    r"""Log-density of the raw coordinate r of a hyperparameter with a log-normal prior.

    With theta = g(r) ~ LogNormal(loc, scale) (Rossi 2022, section 6.3.1),
    the density of r is ``p(g(r)) |g'(r)|``:

    ``transform="softplus"`` (kernel length-scales and signal variance,
    :class:`~skbayes.nn.gp.kernels.RBFKernel`): g(r) = softplus(r),
    g'(r) = sigmoid(r);

    ``transform="softplus_squared"`` (noise variance of
    :class:`~skbayes.nn.GaussianLikelihood`, which stores the standard
    deviation): g(r) = (softplus(r) + floor)^2,
    g'(r) = 2 (softplus(r) + floor) sigmoid(r).

    Parameters
    ----------
    raw : torch.Tensor
        Unconstrained values r.
    loc, scale : float
        Mean and standard deviation of log theta.
    transform : {"softplus", "softplus_squared"}, default="softplus"
    floor : float, default=0.0
        The floor added to the standard deviation (``"softplus_squared"``).

    Returns
    -------
    log_prob : torch.Tensor, shape of ``raw``
        In nats, elementwise.

    Raises
    ------
    ValueError
        On an unknown ``transform``.
    """
    log_sigmoid = F.logsigmoid(raw)
    if transform == "softplus":
        return log_normal_log_prob(F.softplus(raw), loc, scale) + log_sigmoid
    if transform == "softplus_squared":
        std = F.softplus(raw) + floor
        return log_normal_log_prob(std.square(), loc, scale) + math.log(2.0) + std.log() + log_sigmoid
    raise ValueError(f"transform must be 'softplus' or 'softplus_squared'; got {transform!r}.")


def standard_normal_log_prob(value):
    """Summed log-density of independent N(0, 1) entries, a scalar.

    The prior of the whitened inducing values v and the default prior
    p(Z) = prod_j N(z_j | 0, I) of the inducing inputs (Rossi 2022, section
    6.3.1, which assumes standardised inputs).

    Parameters
    ----------
    value : torch.Tensor of any shape

    Returns
    -------
    log_prob : torch.Tensor, scalar
    """
    return -0.5 * value.square().sum() - value.numel() * _HALF_LOG_2PI


def dpp_log_prob(chol_zz):
    r"""Unnormalised log-density of the determinantal prior p(Z) ∝ det K_zz.

    The repulsive prior of Rossi 2022, section 6.3.1 (xi = theta): with
    K_zz = L L^T, log det K_zz = 2 sum_i log L_ii. The normaliser depends on
    the kernel hyperparameters and is ignored, as in [Rossi2021]_.

    Parameters
    ----------
    chol_zz : torch.Tensor of shape (M, M)
        Lower Cholesky factor of K_zz (with its jitter).

    Returns
    -------
    log_prob : torch.Tensor, scalar
    """
    return 2.0 * chol_zz.diagonal().log().sum()
