r"""Stationary covariance functions with ARD length-scales.

Both kernels share one protocol, used by :class:`~skbayes.nn.variational.SVGP`:

``forward(x1, x2)``
    Covariance matrix of shape (n1, n2) between the rows of ``x1`` (n1, d)
    and ``x2`` (n2, d).
``diag(x)``
    Its diagonal k(x_i, x_i), shape (n,), without forming the matrix.

The length-scales l (one per input dimension: automatic relevance
determination) and the signal variance s^2 are stored raw and mapped through
softplus, so the optimiser works on unconstrained values. Every kernel is a
function of the scaled distance

.. math::

    r^2(x, x') = \sum_{j=1}^d \frac{(x_j - x'_j)^2}{l_j^2}.

References
----------
.. [RW2006] C. E. Rasmussen and C. K. I. Williams, "Gaussian processes for
   machine learning", MIT Press, 2006, chapter 4.
"""

import math

import torch
from torch import nn
from torch.nn import functional as F

from .functional import inverse_softplus

__all__ = ["MaternKernel", "RBFKernel"]


class _StationaryKernel(nn.Module):
    """ARD length-scales and signal variance; subclasses map r^2 to k."""

    def __init__(self, n_features, length_scale=1.0, variance=1.0, learn=True, *, device=None, dtype=None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        length_scale = torch.as_tensor(length_scale, dtype=torch.float64).expand(n_features)
        variance = torch.as_tensor(variance, dtype=torch.float64)
        # computed in float64 whatever the dtype of the parameters
        raw = {
            "raw_length_scale": inverse_softplus(length_scale).to(**factory).clone(),
            "raw_variance": inverse_softplus(variance).to(**factory).reshape(()),
        }
        for name, value in raw.items():
            if learn:
                setattr(self, name, nn.Parameter(value))
            else:
                self.register_buffer(name, value)

    @property
    def length_scale(self):
        """Length-scales l, tensor of shape (n_features,)."""
        return F.softplus(self.raw_length_scale)

    @property
    def variance(self):
        """Signal variance s^2 = k(x, x), scalar tensor."""
        return F.softplus(self.raw_variance)

    def scaled_sqdist(self, x1, x2):
        """r^2 between every row of ``x1`` (n1, d) and ``x2`` (n2, d), shape (n1, n2)."""
        # Centre both sets first: ||a||^2 + ||b||^2 - 2 a.b loses less precision.
        shift = x1.mean(0) if x1.shape[0] else 0.0
        a = (x1 - shift) / self.length_scale
        b = (x2 - shift) / self.length_scale
        sq = a.square().sum(-1, keepdim=True) + b.square().sum(-1) - 2.0 * a @ b.T
        return sq.clamp_min(0.0)

    def diag(self, x):
        """k(x_i, x_i) = s^2 for each row of ``x`` (n, d); shape (n,)."""
        return self.variance.expand(x.shape[0])


class RBFKernel(_StationaryKernel):
    r"""Squared-exponential (RBF) kernel with ARD length-scales.

    .. math::

        k(x, x') = s^2 \exp\!\left(-\tfrac12 r^2(x, x')\right)

    ([RW2006]_, eq. 4.9, with one length-scale per dimension as in section 5.1).

    Parameters
    ----------
    n_features : int
        Input dimension d.
    length_scale : float or sequence of float, default=1.0
        Initial (or fixed) length-scales, > 0, in the units of x.
    variance : float, default=1.0
        Initial (or fixed) signal variance s^2 > 0.
    learn : bool, default=True
        Make the length-scales and the variance trainable parameters;
        otherwise they are buffers that keep their initial values.
    device, dtype : optional
        Where and in which precision the parameters live.
    """

    def forward(self, x1, x2):
        """Covariance matrix of shape (n1, n2) for ``x1`` (n1, d), ``x2`` (n2, d)."""
        return self.variance * torch.exp(-0.5 * self.scaled_sqdist(x1, x2))


class MaternKernel(_StationaryKernel):
    r"""Matérn kernel with half-integer smoothness and ARD length-scales.

    The general form ([RW2006]_, eq. 4.14) reduces, for half-integer
    smoothness nu, to a polynomial times an exponential (section 4.2.1):

    .. math::

        k_{1/2} &= s^2 e^{-r}, \\
        k_{3/2} &= s^2 (1 + \sqrt3\, r)\, e^{-\sqrt3\, r}, \\
        k_{5/2} &= s^2 (1 + \sqrt5\, r + \tfrac53 r^2)\, e^{-\sqrt5\, r},

    with r the ARD-scaled distance. nu = 1/2 is the exponential
    (Ornstein-Uhlenbeck) kernel; nu -> infinity recovers :class:`RBFKernel`.

    Parameters
    ----------
    n_features : int
        Input dimension d.
    nu : {0.5, 1.5, 2.5}, default=2.5
        Smoothness: sample paths are ceil(nu) - 1 times differentiable.
    length_scale : float or sequence of float, default=1.0
        Initial (or fixed) length-scales, > 0, in the units of x.
    variance : float, default=1.0
        Initial (or fixed) signal variance s^2 > 0.
    learn : bool, default=True
        Make the length-scales and the variance trainable parameters.
    device, dtype : optional
        Where and in which precision the parameters live.
    """

    def __init__(self, n_features, nu=2.5, length_scale=1.0, variance=1.0, learn=True, *, device=None, dtype=None):
        if nu not in (0.5, 1.5, 2.5):
            raise ValueError(f"MaternKernel supports nu in {{0.5, 1.5, 2.5}}; got nu={nu!r}.")
        super().__init__(n_features, length_scale, variance, learn, device=device, dtype=dtype)
        self.nu = nu

    def forward(self, x1, x2):
        """Covariance matrix of shape (n1, n2) for ``x1`` (n1, d), ``x2`` (n2, d)."""
        # The floor keeps the gradient of sqrt finite at r = 0 (k is flat there
        # for nu > 1/2, and the clamp's zero gradient is the right one-sided limit).
        r = self.scaled_sqdist(x1, x2).clamp_min(1e-36).sqrt()
        if self.nu == 0.5:
            poly, rate = 1.0, 1.0
        elif self.nu == 1.5:
            rate = math.sqrt(3.0)
            poly = 1.0 + rate * r
        else:
            rate = math.sqrt(5.0)
            poly = 1.0 + rate * r + (5.0 / 3.0) * r.square()
        return self.variance * poly * torch.exp(-rate * r)

    def extra_repr(self):
        return f"nu={self.nu}"
