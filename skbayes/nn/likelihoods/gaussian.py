r"""Gaussian observation noise: homoscedastic (:class:`GaussianLikelihood`) and one level per row (:class:`HeteroscedasticGaussianLikelihood`).

References
----------
.. [Hensman2013] J. Hensman, N. Fusi and N. D. Lawrence, "Gaussian processes
   for big data", UAI 2013.
.. [Nix1994] D. A. Nix and A. S. Weigend, "Estimating the mean and variance
   of the target probability distribution", ICNN 1994.
.. [Lakshminarayanan2017] B. Lakshminarayanan, A. Pritzel and C. Blundell,
   "Simple and scalable predictive uncertainty estimation using deep
   ensembles", NeurIPS 2017, eq. 1.
"""

import torch
from torch import nn
from torch.nn import functional as F

from ..functional import gaussian_log_prob, inverse_softplus
from ._base import RegressionLikelihood

__all__ = ["GaussianLikelihood", "HeteroscedasticGaussianLikelihood"]


class GaussianLikelihood(RegressionLikelihood):
    r"""Homoscedastic Gaussian likelihood, one noise level per output.

    p(y | f) = prod_k N(y_k | f_k, sigma_k^2). The noise standard deviation is
    stored raw and mapped through softplus (plus a floor of 1e-6) so that the
    optimiser works on an unconstrained value.

    Parameters
    ----------
    n_outputs : int
        Number k of output dimensions.
    noise_std : float, default=0.1
        Initial (or fixed) noise standard deviation, in the units of f.
    learn_noise : bool, default=True
        Learn the noise by maximising the ELBO (type-II maximum likelihood);
        otherwise keep it fixed at ``noise_std``.
    n_members : int, optional
        For models made of a finite set of members (ensemble members, kept
        Monte-Carlo samples): one noise level per member, so that
        ``noise_std`` has shape (n_members, 1, n_outputs) and broadcasts
        against function values of shape (n_members, n, n_outputs).
    device, dtype : optional
        Where and in which precision the parameters live.
    """

    _floor = 1e-6

    def __init__(self, n_outputs, noise_std=0.1, learn_noise=True, *, n_members=None, device=None, dtype=None):
        super().__init__()
        raw = inverse_softplus(noise_std - self._floor)
        shape = (n_outputs,) if n_members is None else (n_members, 1, n_outputs)
        raw = torch.full(shape, raw, device=device, dtype=dtype)
        if learn_noise:
            self.raw_noise = nn.Parameter(raw)
        else:
            self.register_buffer("raw_noise", raw)

    @property
    def noise_std(self):
        """Noise standard deviation, shape (n_outputs,) or (n_members, 1, n_outputs)."""
        return F.softplus(self.raw_noise) + self._floor

    def noise_variance(self, f=None):
        """sigma^2, shape (n_outputs,) or (n_members, 1, n_outputs); ``f`` is not used."""
        return self.noise_std.square()

    def distribution(self, f):
        """N(f, sigma^2) per output, a :class:`torch.distributions.Normal` of batch shape (..., n, k)."""
        return torch.distributions.Normal(f, self.noise_std.expand_as(f), validate_args=False)

    def sample(self, f, random_state):
        """Draws y = f + sigma eps of shape (..., n, k), eps ~ N(0, 1) from ``random_state`` (numpy).

        The standard normal draws are numpy's float64 ones, so the result is
        float64 and the same on every device.
        """
        eps = torch.as_tensor(random_state.standard_normal(tuple(f.shape)), device=f.device)
        return f + eps * self.noise_std

    def log_prob(self, y, f):
        """Log-density of each observation, summed over outputs.

        Parameters
        ----------
        y : torch.Tensor of shape (n, k)
            Observed targets.
        f : torch.Tensor of shape (..., n, k)
            Function values (e.g. one slice per Monte-Carlo draw).

        Returns
        -------
        log_prob : torch.Tensor of shape (..., n)
            log N(y | f, sigma^2) in nats, summed over the k outputs.
        """
        return gaussian_log_prob(y, f, self.noise_std.square()).sum(-1)

    def expected_log_prob(self, y, f_mean, f_var, added_noise_var=None):
        r"""E_q[log p(y | f)] of each row under independent Gaussians q(f) = N(f_mean, f_var).

        In closed form ([Hensman2013]_, section 3; Rossi 2022, eq. 6.2):

        .. math::

            \mathbb E_{\mathcal N(f \mid m, s^2)}[\log \mathcal N(y \mid f, v)]
            = \log \mathcal N(y \mid m, v) - \frac{s^2}{2 v},

        with v = sigma^2, or sigma^2 + ``added_noise_var`` when the model adds
        its own per-row variance to the noise (the FITC objective of a sparse
        GP, see :class:`~skbayes.nn.gp.SVGP`).

        Parameters
        ----------
        y : torch.Tensor of shape (n, k)
        f_mean, f_var : torch.Tensor of shape (..., n, k)
            Mean and variance (>= 0) of q(f).
        added_noise_var : torch.Tensor of shape (..., n, k), optional
            Variance (>= 0) added to sigma^2 row by row.

        Returns
        -------
        expected_log_prob : torch.Tensor of shape (..., n)
            In nats, summed over the k outputs.
        """
        var = self.noise_std.square()
        if added_noise_var is not None:
            var = var + added_noise_var
        return (gaussian_log_prob(y, f_mean, var) - 0.5 * f_var / var).sum(-1)


class HeteroscedasticGaussianLikelihood(RegressionLikelihood):
    r"""Gaussian likelihood whose noise level is a second output of the network.

    The network has 2k outputs per row: the first k are the mean, the last k
    a raw scale r mapped to the noise standard deviation ([Nix1994]_;
    [Lakshminarayanan2017]_, eq. 1),

    .. math::

        p(y \mid f) = \prod_{j=1}^k \mathcal N(y_j \mid f_j, \sigma_j(f)^2), \qquad
        \sigma_j(f) = \operatorname{softplus}(f_{k+j} + c) + \sigma_{\min},

    with c = softplus^{-1}(``init_std`` - ``min_std``), so that a raw output
    of 0 means a noise of ``init_std``. The floor ``min_std`` keeps the
    density bounded when the network would shrink the noise of a row to 0.
    The likelihood has no parameters of its own.

    Parameters
    ----------
    n_outputs : int
        Number k of targets.
    init_std : float, default=0.1
        Noise standard deviation at raw output 0, in the units of f.
    min_std : float, default=1e-3
        Smallest noise standard deviation, in the units of f.

    Raises
    ------
    ValueError
        If ``init_std <= min_std`` or ``min_std < 0``.
    """

    heteroscedastic = True
    _columns_per_output = 2

    def __init__(self, n_outputs, init_std=0.1, min_std=1e-3):
        super().__init__()
        if min_std < 0 or init_std <= min_std:
            raise ValueError(f"Need 0 <= min_std < init_std; got min_std={min_std!r}, init_std={init_std!r}.")
        self.n_outputs = int(n_outputs)
        self.init_std = float(init_std)
        self.min_std = float(min_std)
        self.shift = float(inverse_softplus(init_std - min_std))

    def location(self, f):
        """The mean columns f[..., :k], shape (..., n, k)."""
        return f[..., : self.n_outputs]

    def noise_std(self, f):
        """sigma(f) of each row and target, shape (..., n, k), in the units of f."""
        return F.softplus(f[..., self.n_outputs :] + self.shift) + self.min_std

    def noise_variance(self, f):
        """sigma(f)^2 of each row and target, shape (..., n, k)."""
        return self.noise_std(f).square()

    def log_prob(self, y, f):
        """Log-density of each observation, summed over outputs.

        Parameters
        ----------
        y : torch.Tensor of shape (n, k)
        f : torch.Tensor of shape (..., n, 2k)
            Means and raw scales (e.g. one slice per Monte-Carlo draw).

        Returns
        -------
        log_prob : torch.Tensor of shape (..., n)
            log N(y | f[:k], sigma(f)^2) in nats, summed over the k outputs.
        """
        return gaussian_log_prob(y, self.location(f), self.noise_variance(f)).sum(-1)

    def expected_log_prob(self, y, f_mean, f_var):
        """Not defined: each row's two outputs (location and scale) would need their joint q.

        Raises
        ------
        NotImplementedError
            Always; the Bayesian MLPs average :meth:`log_prob` over draws instead.
        """
        raise NotImplementedError(
            "HeteroscedasticGaussianLikelihood has two network outputs per target (location and scale): "
            "its expectation under a Gaussian q(f) of one value per output is not defined.")

    def distribution(self, f):
        """N(f[:k], sigma(f)^2) per output, a :class:`torch.distributions.Normal` of batch shape (..., n, k)."""
        return torch.distributions.Normal(self.location(f), self.noise_std(f), validate_args=False)

    def sample(self, f, random_state):
        """Draws y = f[:k] + sigma(f) eps of shape (..., n, k), eps ~ N(0, 1) from ``random_state`` (numpy, float64)."""
        loc = self.location(f)
        eps = torch.as_tensor(random_state.standard_normal(tuple(loc.shape)), device=f.device)
        return loc + eps * self.noise_std(f)
