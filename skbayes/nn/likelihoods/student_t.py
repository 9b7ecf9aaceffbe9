r"""Heavy-tailed observation noise: :class:`StudentTLikelihood`.

References
----------
.. [Lange1989] K. L. Lange, R. J. A. Little and J. M. G. Taylor, "Robust
   statistical modeling using the t distribution", JASA 84(408), 1989.
.. [Juarez2010] M. A. Juárez and M. F. J. Steel, "Model-based clustering of
   non-Gaussian panel data based on skew-t distributions", JBES 28(1), 2010
   (the Gamma(2, 0.1) prior on the degrees of freedom).
"""

import math

import torch
from torch import nn
from torch.nn import functional as F

from ..functional import inverse_softplus
from ._base import RegressionLikelihood

__all__ = ["StudentTLikelihood"]


class StudentTLikelihood(RegressionLikelihood):
    r"""Student-t likelihood: homoscedastic, heavy-tailed noise, one scale and one df per output.

    p(y | f) = prod_k St(y_k | f_k, s_k, nu_k), the Student-t density with
    location f, scale s and nu degrees of freedom ([Lange1989]_; by
    :class:`torch.distributions.StudentT`), robust to outlying targets: the
    log-density falls like ``-(nu + 1) log |y - f|`` instead of ``-(y - f)^2``. The
    scale and the degrees of freedom are stored raw,
    s = softplus(r_s) + 1e-6 and nu = 2 + softplus(r_nu) + 1e-6, so that
    nu > 2 and the noise variance s^2 nu / (nu - 2) exists.

    Parameters
    ----------
    n_outputs : int
        Number k of outputs.
    scale : float, default=0.1
        Initial (or fixed) scale s, in the units of f.
    learn_scale : bool, default=True
        Learn the scale; otherwise keep it fixed at ``scale``.
    df : float, default=4.0
        Initial degrees of freedom nu (> 2); 4 is the robust choice of
        [Lange1989]_. Always learned.
    n_members : int, optional
        One scale and one nu per member (as :class:`GaussianLikelihood`):
        shapes (n_members, 1, n_outputs).
    device, dtype : optional

    Raises
    ------
    ValueError
        If ``df <= 2`` or ``scale <= 0``.
    """

    _floor = 1e-6
    _min_df = 2.0

    def __init__(self, n_outputs, scale=0.1, learn_scale=True, df=4.0, *, n_members=None, device=None, dtype=None):
        super().__init__()
        if not df > self._min_df + self._floor or not scale > self._floor:
            raise ValueError(f"Need df > 2 and scale > 0; got df={df!r}, scale={scale!r}.")
        shape = (n_outputs,) if n_members is None else (n_members, 1, n_outputs)
        factory = {"device": device, "dtype": dtype}
        raw_scale = torch.full(shape, inverse_softplus(scale - self._floor), **factory)
        if learn_scale:
            self.raw_scale = nn.Parameter(raw_scale)
        else:
            self.register_buffer("raw_scale", raw_scale)
        self.raw_df = nn.Parameter(torch.full(shape, inverse_softplus(df - self._min_df - self._floor), **factory))

    @property
    def scale(self):
        """Scale s, shape (n_outputs,) or (n_members, 1, n_outputs)."""
        return F.softplus(self.raw_scale) + self._floor

    @property
    def df(self):
        """Degrees of freedom nu > 2, shape (n_outputs,) or (n_members, 1, n_outputs)."""
        return F.softplus(self.raw_df) + self._min_df + self._floor

    def neg_log_prior(self):
        r"""-log p(r_nu) of the raw degrees of freedom: nu - 2 ~ Gamma(2, 0.1), per member.

        The weakly informative Gamma(2, 0.1) prior of [Juarez2010]_ (mean
        20), put on nu - 2 and carried to the raw value r_nu (nu - 2 =
        softplus(r_nu) + 1e-6) with its Jacobian sigmoid(r_nu):
        log p(r_nu) = log(0.01 x e^{-0.1 x}) + log sigmoid(r_nu), x = nu - 2.
        A flat prior on r_nu would be improper in both directions (the
        likelihood tends to a constant as nu -> 2 and as nu -> infinity), so
        the methods that sample or penalise the likelihood's parameters with
        the weights (``SGHMC``, ``DeepEnsemble``) add this term; the
        variational methods fit nu by type-II maximum likelihood.

        Returns
        -------
        neg_log_prior : torch.Tensor of shape () or (n_members,)
            In nats, summed over the outputs.
        """
        x = self.df - self._min_df
        log_p = math.log(0.01) + torch.log(x) - 0.1 * x + F.logsigmoid(self.raw_df)
        return -(log_p.flatten(1).sum(-1) if log_p.dim() == 3 else log_p.sum())

    def noise_variance(self, f=None):
        """The variance s^2 nu / (nu - 2) of the noise, shape (n_outputs,) or (n_members, 1, n_outputs)."""
        df = self.df
        return self.scale.square() * df / (df - 2.0)

    def distribution(self, f):
        """St(f, s, nu) per output, a :class:`torch.distributions.StudentT` of batch shape (..., n, k)."""
        return torch.distributions.StudentT(self.df.expand_as(f), f, self.scale.expand_as(f), validate_args=False)

    def log_prob(self, y, f):
        """Log-density of each observation, summed over outputs.

        Parameters
        ----------
        y : torch.Tensor of shape (n, k)
        f : torch.Tensor of shape (..., n, k)

        Returns
        -------
        log_prob : torch.Tensor of shape (..., n)
            log St(y | f, s, nu) in nats, summed over the k outputs.
        """
        # The expression of torch.distributions.StudentT.log_prob, value for value, without building the
        # distribution: its construction (a Chi2 and a Gamma, for sampling) cost more than the density, about
        # 60 microseconds a training step on the CPU.
        df, scale = self.df.expand_as(f), self.scale.expand_as(f)
        z = (y - f) / scale
        log_normalizer = (scale.log() + 0.5 * df.log() + 0.5 * math.log(math.pi) + torch.lgamma(0.5 * df)
                          - torch.lgamma(0.5 * (df + 1.0)))
        return (-0.5 * (df + 1.0) * torch.log1p(z * z / df) - log_normalizer).sum(-1)

    def sample(self, f, random_state):
        """Draws y = f + s t of shape (..., n, k), t ~ St(0, 1, nu) from ``random_state`` (numpy, float64)."""
        df = torch.broadcast_to(self.df.detach(), f.shape).cpu().double().numpy()
        t = torch.as_tensor(random_state.standard_t(df), device=f.device)
        return f + t * self.scale
