r"""SWA-Gaussian: a Gaussian over the weights from the moments of an optimiser's iterates (Maddox et al. 2019).

After the network has been trained (the MAP fit), the optimiser runs on at
a constant step size and the weights theta_1, ..., theta_T are recorded
once per epoch. Their running moments define a Gaussian with a diagonal
plus low-rank covariance (Maddox et al. 2019, section 4):

.. math::

    \bar\theta = \frac1T \sum_i \theta_i, \qquad
    \Sigma_{diag} = \mathrm{diag}\Big(\frac1T \sum_i \theta_i^2 - \bar\theta^2\Big), \qquad
    \hat D = [\theta_{T-K+1} - \bar\theta_{T-K+1}, \dots, \theta_T - \bar\theta_T],

with :math:`\bar\theta_i` the running mean after i iterates and
:math:`\hat D` the last K deviations (K = ``rank``), and

.. math::

    \Sigma = \tfrac12 \big(\Sigma_{diag} + \hat D \hat D^T / (K - 1)\big), \qquad
    \tilde\theta = \bar\theta + \tfrac{1}{\sqrt2} \Sigma_{diag}^{1/2} z_1
      + \tfrac{1}{\sqrt{2(K-1)}} \hat D z_2, \quad z_1 \sim N(0, I_P),\ z_2 \sim N(0, I_K),

the draw of section 4.2 (eq. 1), whose covariance is Sigma. Several
independently trained Gaussians averaged are MultiSWAG (Wilson & Izmailov
2020, section 4). Here every member of a stacked network has its own
moments: the iterates are of shape (M, P), M members of P weights each.

References
----------
.. [Maddox2019] W. J. Maddox, T. Garipov, P. Izmailov, D. Vetrov and
   A. G. Wilson, "A simple baseline for Bayesian uncertainty in deep
   learning", NeurIPS 2019.
.. [Wilson2020] A. G. Wilson and P. Izmailov, "Bayesian deep learning and a
   probabilistic perspective of generalization", NeurIPS 2020.
"""

import math

import torch

from .functional import standard_normal

__all__ = ["SWAGMoments", "flatten_members"]


def flatten_members(tensors):
    """Concatenate per-member tensors (each with the members on its first axis) into one (M, P) matrix."""
    return torch.cat([t.detach().reshape(t.shape[0], -1) for t in tensors], dim=1)


class SWAGMoments:
    """The running moments of M members' iterates and the SWAG Gaussian they define.

    Parameters
    ----------
    rank : int
        K, the number of most recent deviations kept for the low-rank part
        (Maddox et al. 2019 use 20).

    Attributes
    ----------
    n_collected : int
        T, the iterates recorded so far.
    mean, sq_mean : torch.Tensor of shape (M, P)
        First and second moments of the iterates (None before the first).
    deviations : torch.Tensor of shape (M, min(T, K), P)
        The last deviations theta_i - theta_bar_i, oldest first.
    """

    def __init__(self, rank):
        if rank < 1:
            raise ValueError(f"rank must be at least 1; got {rank}.")
        self.rank = rank
        self.n_collected = 0
        self.mean = self.sq_mean = self.deviations = None

    def update(self, theta):
        """Record one iterate ``theta`` of shape (M, P) (computed in float64)."""
        theta = theta.detach().double()
        n = self.n_collected
        if n == 0:
            self.mean, self.sq_mean = theta.clone(), theta.square()
            self.deviations = theta.new_zeros(theta.shape[0], 0, theta.shape[1])
        else:
            self.mean = (n * self.mean + theta) / (n + 1)
            self.sq_mean = (n * self.sq_mean + theta.square()) / (n + 1)
        self.n_collected = n + 1
        deviation = (theta - self.mean)[:, None]
        self.deviations = torch.cat([self.deviations, deviation], dim=1)[:, -self.rank:]

    def diagonal_variance(self):
        """Sigma_diag of each member, shape (M, P): the iterates' variance, floored at 0 against round-off."""
        self._check()
        return (self.sq_mean - self.mean.square()).clamp_min(0.0)

    def covariance(self):
        """The full covariance 1/2 (Sigma_diag + D D^T / (K - 1)) of each member, shape (M, P, P); for small P."""
        cov = torch.diag_embed(self.diagonal_variance())
        k = self.deviations.shape[1]
        if k > 1:
            d = self.deviations.transpose(1, 2)
            cov = cov + d @ d.transpose(1, 2) / (k - 1)
        return cov / 2

    def sample(self, n_draws, generator=None, scale=1.0):
        """``n_draws`` draws of every member's Gaussian (eq. 1), shape (M, n_draws, P), float64.

        ``scale`` multiplies the covariance (1: the covariance Sigma above);
        with fewer than two deviations the low-rank part is left out.
        """
        self._check()
        m, p = self.mean.shape
        k = self.deviations.shape[1]
        z1 = standard_normal((m, n_draws, p), self.mean, generator)
        draws = self.mean[:, None] + math.sqrt(scale / 2) * self.diagonal_variance().sqrt()[:, None] * z1
        if k > 1:
            z2 = standard_normal((m, n_draws, k), self.mean, generator)
            draws = draws + math.sqrt(scale / (2 * (k - 1))) * z2 @ self.deviations
        return draws

    def _check(self):
        if self.n_collected == 0:
            raise ValueError("No iterate has been recorded: call update first.")
