r"""Binary observations: the VAE's :class:`BernoulliLikelihood` (logits) and the GP classifier's :class:`BinaryLikelihood` (probit or logit link).

References
----------
.. [Hensman2015c] J. Hensman, A. G. de G. Matthews and Z. Ghahramani,
   "Scalable variational Gaussian process classification", AISTATS 2015.
.. [RW2006] C. E. Rasmussen and C. K. I. Williams, "Gaussian processes for
   machine learning", MIT Press, 2006, section 3.9 (eq. 3.80).
"""

import math

import torch
from torch.nn import functional as F

from ._base import N_QUADRATURE, Likelihood, _quadrature, gauss_hermite

__all__ = ["BernoulliLikelihood", "BinaryLikelihood", "ContinuousBernoulliLikelihood"]


class BernoulliLikelihood(Likelihood):
    """Independent Bernoulli pixels with logits f: log p(x | f) = -BCE(f, x).

    For x in [0, 1] that is not binary this is the usual cross-entropy
    objective, not a normalised density on [0, 1].
    """

    def log_prob(self, x, f):
        """Log-probability of each row, summed over features.

        Parameters
        ----------
        x : torch.Tensor of shape (n, d)
            Observations in [0, 1].
        f : torch.Tensor of shape (..., n, d)
            Logits.

        Returns
        -------
        log_prob : torch.Tensor of shape (..., n)
            In nats.
        """
        x = x.expand_as(f)
        return -F.binary_cross_entropy_with_logits(f, x, reduction="none").sum(-1)

    @staticmethod
    def mean(f):
        """Success probabilities sigmoid(f)."""
        return torch.sigmoid(f)


class ContinuousBernoulliLikelihood(Likelihood):
    r"""Independent continuous-Bernoulli values in [0, 1] with logits f (Loaiza-Ganem & Cunningham 2019).

    p(x | lambda) = C(lambda) lambda^x (1 - lambda)^(1 - x) on [0, 1], lambda = sigma(f), with the
    normaliser C(lambda) = 2 artanh(1 - 2 lambda) / (1 - 2 lambda) (2 at lambda = 1/2): the Bernoulli
    cross-entropy made a density on [0, 1] (Rossi 2022, eq. 5.18, the likelihood of the Bayesian
    autoencoder). The mean, variance and draws are those of
    :class:`torch.distributions.ContinuousBernoulli`; the log-density is
    written in the logits (:meth:`log_prob`).
    """

    @staticmethod
    def distribution(f):
        """The continuous Bernoulli of logits ``f`` (its arguments not validated: f may be any real)."""
        return torch.distributions.ContinuousBernoulli(logits=f, validate_args=False)

    def log_prob(self, x, f):
        """Log-density of each row, summed over features: x (n, d) in [0, 1], f (..., n, d) -> (..., n).

        Written in the logits: lambda^x (1 - lambda)^(1 - x) = exp(-x softplus(-f) - (1 - x) softplus(f)),
        and C(lambda) = f / tanh(f / 2) (as artanh(1 - 2 lambda) = -f / 2), 2 + f^2 / 6 near 0. Torch's
        ``log_prob`` clamps lambda at its float's epsilon, which caps C for logits beyond about -16 (float32)
        and undercounts the density of values at 0 or 1 the network is sure of by up to a few nats each.
        """
        x = x.expand_as(f)
        size = f.abs()
        small = size < 1e-3
        safe = torch.where(small, torch.ones_like(size), size)
        log_c = torch.where(small, math.log(2.0) + f * f / 12, torch.log(safe) - torch.log(torch.tanh(safe / 2)))
        return (log_c - x * F.softplus(-f) - (1 - x) * F.softplus(f)).sum(-1)

    def mean(self, f):
        """E[x | f] of each value, the shape of f (not lambda: the continuous Bernoulli's mean)."""
        return self.distribution(f).mean

    def variance(self, f):
        """Var[x | f] of each value, the shape of f."""
        return self.distribution(f).variance

    def rsample(self, f, generator=None):
        """One draw of x per value of f, by the inverse CDF of uniforms from ``generator`` (differentiable in f)."""
        u = torch.rand(f.shape, generator=generator, dtype=f.dtype, device=getattr(generator, "device", "cpu"))
        return self.distribution(f).icdf(u.to(f.device).clamp(1e-6, 1 - 1e-6))


class BinaryLikelihood(Likelihood):
    r"""Bernoulli likelihood of a binary class through a link function of one latent f.

    p(y = 1 | f) = Phi(f) (``link="probit"``, the standard normal CDF) or
    sigma(f) = 1 / (1 + e^-f) (``link="logit"``), and p(y = 0 | f) = 1 -
    p(y = 1 | f), so that log p(y | f) = log link((2y - 1) f).

    The expected log-likelihood E_{N(f | mu, s^2)}[log p(y | f)] is a
    one-dimensional Gauss-Hermite quadrature ([Hensman2015c]_, section 3;
    Rossi 2022, eq. 6.13). The predictive probability is in closed form for
    the probit link ([RW2006]_, eq. 3.80; Rossi 2022, eq. 6.14),

    .. math::

        \int \Phi(f)\, \mathcal N(f \mid \mu, s^2)\, df
        = \Phi\!\left(\frac{\mu}{\sqrt{1 + s^2}}\right),

    and by quadrature for the logit link.

    Parameters
    ----------
    link : {"probit", "logit"}, default="probit"
    n_quadrature : int, default=20
        Gauss-Hermite nodes of the expectations.

    Raises
    ------
    ValueError
        If ``link`` is not ``"probit"`` or ``"logit"``.
    """

    n_classes = 2

    def __init__(self, link="probit", n_quadrature=N_QUADRATURE):
        super().__init__()
        if link not in ("probit", "logit"):
            raise ValueError(f"link must be 'probit' or 'logit'; got {link!r}.")
        self.link = link
        self.n_quadrature = int(n_quadrature)

    def _log_link(self, f):
        return torch.special.log_ndtr(f) if self.link == "probit" else F.logsigmoid(f)

    def log_prob(self, y, f):
        """log p(y | f) of each row.

        Parameters
        ----------
        y : torch.Tensor of shape (n,)
            Labels 0 or 1 (any dtype).
        f : torch.Tensor of shape (..., n)
            Latent values.

        Returns
        -------
        log_prob : torch.Tensor of shape (..., n)
            In nats.
        """
        return self._log_link((2.0 * y.to(f.dtype) - 1.0) * f)

    def predictive_proba(self, f_mean, f_var):
        """Class probabilities E_q[p(y | f)], closed form (probit) or quadrature (logit).

        Parameters
        ----------
        f_mean, f_var : torch.Tensor of shape (n,)

        Returns
        -------
        proba : torch.Tensor of shape (n, 2)
            Columns p(y = 0), p(y = 1).
        """
        if self.link == "probit":
            p1 = torch.special.ndtr(f_mean / torch.sqrt(1.0 + f_var.clamp_min(0.0)))
        else:
            p1 = _quadrature(torch.sigmoid, f_mean, f_var, self.n_quadrature)
        return torch.stack([1.0 - p1, p1], dim=-1)

    def log_predictive_prob(self, y, f_mean, f_var):
        r"""log E_{N(f | f_mean, f_var)}[p(y | f)] of each row, the log of the expected likelihood.

        The data term of the Bayesian sparse GP (Rossi 2022, eq. 6.13, the
        log of the expectation, not the expectation of the log of
        :meth:`expected_log_prob`). Probit: log Phi(y~ mu / sqrt(1 + s^2))
        with y~ = 2y - 1 (eq. 6.14), by ``log_ndtr`` (accurate in the far
        tail); logit: log sum_i w_i sigma(y~ f_i) over the Gauss-Hermite
        nodes f_i, as a log-sum-exp.

        Parameters
        ----------
        y : torch.Tensor of shape (n,)
            Labels 0 or 1.
        f_mean, f_var : torch.Tensor of shape (n,)
            Mean and variance (>= 0) of f.

        Returns
        -------
        log_prob : torch.Tensor of shape (n,)
            In nats; differentiable in f_mean and f_var.
        """
        sign = 2.0 * y.to(f_mean.dtype) - 1.0
        if self.link == "probit":
            return torch.special.log_ndtr(sign * f_mean / torch.sqrt(1.0 + f_var.clamp_min(0.0)))
        nodes, weights = gauss_hermite(self.n_quadrature, device=f_mean.device, dtype=f_mean.dtype)
        f = f_mean + f_var.clamp_min(0.0).sqrt() * nodes[:, None]
        return torch.logsumexp(weights.log()[:, None] + F.logsigmoid(sign * f), dim=0)

    def conditional_proba(self, f):
        """p(y | f) for draws of f: shape (..., n) -> (..., n, 2)."""
        p1 = torch.special.ndtr(f) if self.link == "probit" else torch.sigmoid(f)
        return torch.stack([1.0 - p1, p1], dim=-1)
