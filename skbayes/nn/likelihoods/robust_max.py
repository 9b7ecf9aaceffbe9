r"""Robust multi-class GP classification: :class:`RobustMaxLikelihood`.

References
----------
.. [HernandezLobato2011] D. Hernandez-Lobato, J. M. Hernandez-Lobato and
   P. Dupont, "Robust multi-class Gaussian process classification", NeurIPS
   2011.
.. [Hensman2015c] J. Hensman, A. G. de G. Matthews and Z. Ghahramani,
   "Scalable variational Gaussian process classification", AISTATS 2015.
"""

import math

import torch
from torch.nn import functional as F

from ._base import N_QUADRATURE, Likelihood, gauss_hermite

__all__ = ["RobustMaxLikelihood"]


class RobustMaxLikelihood(Likelihood):
    r"""Robust-max likelihood: the class of the largest latent, mislabelled with probability epsilon.

    p(y = c | f) = 1 - epsilon if c = argmax_k f_k, else epsilon / (C - 1)
    ([HernandezLobato2011]_; [Hensman2015c]_, section 4, as in GPflow's
    ``RobustMax``). With P_c = Pr_q[f_c = max_k f_k] for independent q(f_k)
    = N(mu_k, s_k^2),

    .. math::

        P_c = \int \mathcal N(f_c \mid \mu_c, s_c^2)
              \prod_{k \ne c} \Phi\!\left(\frac{f_c - \mu_k}{s_k}\right) df_c,

    a one-dimensional integral done by Gauss-Hermite quadrature over f_c,
    and then exactly

    .. math::

        \mathbb E_q[\log p(y \mid f)] = P_y \log(1 - \epsilon)
            + (1 - P_y) \log\frac{\epsilon}{C - 1}, \qquad
        p(y = c) = (1 - \epsilon) P_c + \frac{\epsilon}{C - 1} (1 - P_c).

    Parameters
    ----------
    n_classes : int
        C >= 2.
    epsilon : float, default=1e-3
        Mislabelling probability, in (0, 1); fixed (GPflow's default).
    n_quadrature : int, default=20
        Gauss-Hermite nodes.

    Raises
    ------
    ValueError
        If ``n_classes < 2`` or ``epsilon`` is not in (0, 1).
    """

    def __init__(self, n_classes, epsilon=1e-3, n_quadrature=N_QUADRATURE):
        super().__init__()
        if n_classes < 2:
            raise ValueError(f"n_classes must be >= 2; got {n_classes!r}.")
        if not 0.0 < epsilon < 1.0:
            raise ValueError(f"epsilon must be in (0, 1); got {epsilon!r}.")
        self.n_classes = int(n_classes)
        self.epsilon = float(epsilon)
        self.n_quadrature = int(n_quadrature)

    def _wrong(self):
        return self.epsilon / (self.n_classes - 1)

    def prob_max(self, f_mean, f_var):
        """P_c = Pr_q[f_c is the largest], shape (n, C), by quadrature over f_c."""
        nodes, weights = gauss_hermite(self.n_quadrature, device=f_mean.device, dtype=f_mean.dtype)
        std = f_var.clamp_min(1e-12).sqrt()  # (n, C)
        f_c = f_mean[None] + std[None] * nodes[:, None, None]  # (Q, n, C): node q for class c
        # log Phi((f_c - mu_k) / s_k) for every pair (c, k): (Q, n, C, C)
        log_cdf = torch.special.log_ndtr((f_c[..., :, None] - f_mean[None, :, None, :]) / std[None, :, None, :])
        eye = torch.eye(self.n_classes, dtype=torch.bool, device=f_mean.device)
        log_cdf = log_cdf.masked_fill(eye, 0.0)  # the product runs over k != c
        return (weights[:, None, None] * log_cdf.sum(-1).exp()).sum(0).clamp(0.0, 1.0)

    def log_prob(self, y, f):
        """log p(y | f) of each row; y of shape (n,), f of shape (..., n, C)."""
        hit = f.argmax(-1) == y.long()
        return torch.where(hit, math.log1p(-self.epsilon), math.log(self._wrong()))

    def expected_log_prob(self, y, f_mean, f_var):
        """E_q[log p(y | f)] of each row (exact up to the quadrature), shape (n,).

        Parameters
        ----------
        y : torch.Tensor of shape (n,)
            Class indices.
        f_mean, f_var : torch.Tensor of shape (n, C)
        """
        p_y = self.prob_max(f_mean, f_var).gather(-1, y.long().reshape(-1, 1)).squeeze(-1)
        return p_y * math.log1p(-self.epsilon) + (1.0 - p_y) * math.log(self._wrong())

    def predictive_proba(self, f_mean, f_var):
        """Class probabilities (1 - eps) P_c + eps / (C - 1) (1 - P_c), shape (n, C)."""
        p = self.prob_max(f_mean, f_var)
        p = p / p.sum(-1, keepdim=True)  # remove the quadrature error from the normalisation
        return (1.0 - self.epsilon) * p + self._wrong() * (1.0 - p)

    def log_predictive_prob(self, y, f_mean, f_var):
        """log p(y) of :meth:`predictive_proba` at the observed class, the log of the expected likelihood.

        The data term of the Bayesian sparse GP (Rossi 2022, eq. 6.13); it
        is at least log(epsilon / (C - 1)), so the log needs no care.

        Parameters
        ----------
        y : torch.Tensor of shape (n,)
            Class indices.
        f_mean, f_var : torch.Tensor of shape (n, C)

        Returns
        -------
        log_prob : torch.Tensor of shape (n,)
            In nats.
        """
        proba = self.predictive_proba(f_mean, f_var)
        return proba.gather(-1, y.long().reshape(-1, 1)).squeeze(-1).log()

    def conditional_proba(self, f):
        """p(y = c | f) for draws of f: shape (..., n, C)."""
        hit = F.one_hot(f.argmax(-1), self.n_classes).to(f.dtype)
        return (1.0 - self.epsilon) * hit + self._wrong() * (1.0 - hit)
