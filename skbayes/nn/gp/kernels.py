r"""Covariance functions: stationary kernels with ARD length-scales, and the
torch modules of the scikit-learn kernel classes (built from such a kernel
object, whose values they start at; the translation of a whole kernel
expression, which imports scikit-learn, is the estimators' side:
:func:`skbayes.gaussian_process.from_sklearn_kernel`).

All kernels share one protocol, used by :class:`~skbayes.nn.gp.SVGP`:

``forward(x1, x2)``
    Covariance matrix of shape (n1, n2) between the rows of ``x1`` (n1, d)
    and ``x2`` (n2, d).
``diag(x)``
    Its diagonal k(x_i, x_i), shape (n,), without forming the matrix.

In :class:`RBFKernel` and :class:`MaternKernel` the length-scales l (one
per input dimension: automatic relevance determination) and the signal
variance s^2 are stored raw and mapped through softplus, so the optimiser
works on unconstrained values; the translated kernels keep each
hyperparameter within its scikit-learn bounds (:class:`BoundedPositive`).
The stationary ones are functions of the scaled distance

.. math::

    r^2(x, x') = \sum_{j=1}^d \frac{(x_j - x'_j)^2}{l_j^2}.

References
----------
.. [RW2006] C. E. Rasmussen and C. K. I. Williams, "Gaussian processes for
   machine learning", MIT Press, 2006, chapter 4.
"""

import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ..functional import inverse_softplus

__all__ = [
    "BoundedPositive",
    "ConstantKernel",
    "DotProduct",
    "HalfIntegerMatern",
    "MaternKernel",
    "Periodic",
    "ProductKernel",
    "RBFKernel",
    "RationalQuadratic",
    "SquaredExponential",
    "SumKernel",
    "WhiteNoise",
    "half_integer_matern",
]


def scaled_sqdist(x1, x2, length_scale):
    """r^2 between every row of ``x1`` (n1, d) and ``x2`` (n2, d), shape (n1, n2).

    ``length_scale`` is a scalar tensor (isotropic) or one value per column.
    """
    a, b = _centred_scaled(x1, x2, length_scale)
    sq = a.square().sum(-1, keepdim=True) + b.square().sum(-1) - 2.0 * a @ b.T
    return sq.clamp_min(0.0)


def _centred_scaled(x1, x2, length_scale):
    """Both sets shifted by the mean of ``x1`` and divided by the length-scales.

    Centring first makes ||a||^2 + ||b||^2 - 2 a.b lose less precision.
    """
    shift = x1.mean(0) if x1.shape[0] else 0.0
    return (x1 - shift) / length_scale, (x2 - shift) / length_scale


def half_integer_matern(r2, nu):
    r"""Matérn correlation of smoothness nu in {1/2, 3/2, 5/2} at squared scaled distances ``r2``.

    The half-integer forms of [RW2006]_, eq. 4.14 (section 4.2.1): exp(-r),
    (1 + sqrt(3) r) exp(-sqrt(3) r) and (1 + sqrt(5) r + 5 r^2 / 3)
    exp(-sqrt(5) r), with unit variance.

    Parameters
    ----------
    r2 : torch.Tensor
        Squared ARD-scaled distances (any shape, >= 0).
    nu : {0.5, 1.5, 2.5}

    Returns
    -------
    k : torch.Tensor, shape of ``r2``
    """
    # The floor keeps the gradient of sqrt finite at r = 0 (k is flat there
    # for nu > 1/2, and the clamp's zero gradient is the right one-sided limit).
    r = r2.clamp_min(1e-36).sqrt()
    if nu == 0.5:
        return torch.exp(-r)
    if nu == 1.5:
        rate = math.sqrt(3.0)
        poly = 1.0 + rate * r
    else:
        rate = math.sqrt(5.0)
        poly = 1.0 + rate * r + (5.0 / 3.0) * r.square()
    return poly * torch.exp(-rate * r)


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
        return scaled_sqdist(x1, x2, self.length_scale)

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
        a, b = _centred_scaled(x1, x2, self.length_scale)
        log_var = self.variance.log()
        # s^2 exp(-r^2 / 2) = exp(log s^2 - ||a||^2 / 2 - ||b||^2 / 2 + a.b), the product added in
        # place (addmm) and r^2 >= 0 kept as exponent <= log s^2: three passes over the (n1, n2)
        # matrix instead of six, forward and backward (the SVGP step's largest elementwise cost)
        offset = (log_var - 0.5 * a.square().sum(-1, keepdim=True)) - 0.5 * b.square().sum(-1)
        return torch.addmm(offset, a, b.T).clamp_max(log_var).exp()


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
        return self.variance * half_integer_matern(self.scaled_sqdist(x1, x2), self.nu)

    def extra_repr(self):
        return f"nu={self.nu}"


# ---------------------------------------------------------------------------
# Kernels translated from scikit-learn kernel objects
# ---------------------------------------------------------------------------
# Each module below mirrors one class of ``sklearn.gaussian_process.kernels``:
# the same formula and the same hyperparameters (each a :class:`BoundedPositive`),
# and ``sklearn_params()`` returns their current values under scikit-learn's
# names, so a fitted module can be written back into a clone of the kernel.


class BoundedPositive(nn.Module):
    r"""A positive hyperparameter (scalar or vector) kept within its bounds.

    ``forward()`` returns its value. With bounds ``(lo, hi)``, ``0 < lo`` and
    ``hi`` finite (scikit-learn's usual case), the value is a sigmoid
    between the log-bounds,

    .. math::

        \theta = \exp\!\left(\log lo + w\,\sigma(4 \rho / w)\right),
        \quad w = \log hi - \log lo,

    the bounds scikit-learn's optimiser enforces on log theta, scaled so
    that mid-range a unit step in rho is a unit step in log theta (the
    parametrisation scikit-learn optimises); with
    ``hi = inf`` it is ``lo + softplus(rho)`` (``lo`` clipped at 0); with
    ``lo <= 0`` and a finite ``hi`` it is ``hi * sigmoid(rho)``. The raw
    value rho is unconstrained. ``bounds="fixed"`` (or ``learn=False``)
    stores the value as a buffer that the optimiser never sees.

    Parameters
    ----------
    value : float or array-like
        Initial (or fixed) value, > 0; clipped into the bounds.
    bounds : "fixed" or pair of float or array-like of shape (n, 2)
        As scikit-learn's ``*_bounds``.
    learn : bool, default=True
        False keeps the value fixed whatever the bounds.
    device, dtype : optional
    """

    _edge = 1e-12  # keeps the inverse sigmoid finite for a value on a bound

    def __init__(self, value, bounds="fixed", learn=True, *, device=None, dtype=None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        value = torch.as_tensor(np.asarray(value, dtype=np.float64))
        self.fixed = not learn or (isinstance(bounds, str) and bounds == "fixed")
        if self.fixed:
            self.register_buffer("fixed_value", value.to(**factory))
            return
        bounds = np.broadcast_to(np.asarray(bounds, dtype=np.float64), (*value.shape, 2))
        lo, hi = (torch.as_tensor(bounds[..., i].copy()) for i in (0, 1))
        if not torch.all(lo < hi):
            raise ValueError(f"Hyperparameter bounds need lower < upper; got {bounds.tolist()}.")
        if torch.all(lo > 0) and torch.all(torch.isfinite(hi)):
            self.mode = "log-sigmoid"
            lo, hi = lo.log(), hi.log()
            t = ((value.log() - lo) / (hi - lo)).clamp(self._edge, 1 - self._edge)
            raw = torch.logit(t) * (hi - lo) / 4.0
        elif not torch.any(torch.isfinite(hi)):
            self.mode = "softplus"
            lo = lo.clamp_min(0.0)
            raw = inverse_softplus((value - lo).clamp_min(self._edge * value.clamp_min(1.0)))
        elif torch.all(torch.isfinite(hi)):
            self.mode = "sigmoid"
            raw = torch.logit((value / hi).clamp(self._edge, 1 - self._edge))
        else:
            raise ValueError(f"Hyperparameter bounds must be all finite or all infinite above; got {bounds.tolist()}.")
        self.register_buffer("lower", lo.to(**factory))
        self.register_buffer("upper", hi.to(**factory))
        self.raw = nn.Parameter(raw.to(**factory))

    def forward(self):
        if self.fixed:
            return self.fixed_value
        if self.mode == "log-sigmoid":
            width = self.upper - self.lower
            return torch.exp(self.lower + width * torch.sigmoid(4.0 * self.raw / width))
        if self.mode == "softplus":
            return self.lower + F.softplus(self.raw)
        return self.upper * torch.sigmoid(self.raw)

    def numpy(self):
        """The value as a float (scalar) or a float64 ndarray."""
        value = self().detach().cpu().double().numpy()
        return float(value) if value.ndim == 0 else value.copy()

    def extra_repr(self):
        return "fixed" if self.fixed else self.mode


def _hyper(kernel, name, learn, factory):
    """BoundedPositive for ``kernel.<name>`` with ``kernel.<name>_bounds``."""
    return BoundedPositive(getattr(kernel, name), getattr(kernel, f"{name}_bounds"), learn, **factory)


class ConstantKernel(nn.Module):
    r"""k(x, x') = c, the variance of a constant function ([RW2006]_, section 4.2.4:
    multiplying a kernel by c > 0 scales it, adding c adds a random offset).

    Built from a ``sklearn.gaussian_process.kernels.ConstantKernel``
    (``constant_value``, ``constant_value_bounds``).
    """

    def __init__(self, kernel, learn=True, **factory):
        super().__init__()
        self.constant_value = _hyper(kernel, "constant_value", learn, factory)

    def forward(self, x1, x2):
        return self.constant_value().expand(x1.shape[0], x2.shape[0])

    def diag(self, x):
        return self.constant_value().expand(x.shape[0])

    def sklearn_params(self):
        return {"constant_value": self.constant_value.numpy()}


class SquaredExponential(nn.Module):
    r"""k(x, x') = exp(-r^2 / 2), r^2 = sum_j (x_j - x'_j)^2 / l_j^2 ([RW2006]_, eq. 4.9;
    one length-scale per dimension, section 5.1, or one for all).

    Built from a ``sklearn.gaussian_process.kernels.RBF`` (no signal variance:
    multiply by a :class:`ConstantKernel` for one, as in scikit-learn).
    """

    def __init__(self, kernel, learn=True, **factory):
        super().__init__()
        self.length_scale = _hyper(kernel, "length_scale", learn, factory)

    def forward(self, x1, x2):
        return torch.exp(-0.5 * scaled_sqdist(x1, x2, self.length_scale()))

    def diag(self, x):
        return torch.ones(x.shape[0], dtype=x.dtype, device=x.device)

    def sklearn_params(self):
        return {"length_scale": self.length_scale.numpy()}


class HalfIntegerMatern(SquaredExponential):
    r"""Matérn kernel, nu in {1/2, 3/2, 5/2} ([RW2006]_, eq. 4.14, and its
    half-integer forms eqs. 4.16 and 4.17; see :class:`MaternKernel`), unit variance.

    Built from a ``sklearn.gaussian_process.kernels.Matern`` with ``nu`` 0.5,
    1.5 or 2.5 (``nu=inf`` is the :class:`SquaredExponential`).
    """

    def __init__(self, kernel, learn=True, **factory):
        if kernel.nu not in (0.5, 1.5, 2.5):
            raise ValueError(f"Matern kernels are supported for nu in {{0.5, 1.5, 2.5, inf}}; got nu={kernel.nu!r}.")
        super().__init__(kernel, learn, **factory)
        self.nu = kernel.nu

    def forward(self, x1, x2):
        return half_integer_matern(scaled_sqdist(x1, x2, self.length_scale()), self.nu)

    def extra_repr(self):
        return f"nu={self.nu}"


class RationalQuadratic(nn.Module):
    r"""k(x, x') = (1 + r^2 / (2 alpha))^(-alpha), ``r = |x - x'| / l`` ([RW2006]_, eq. 4.19):
    a scale mixture of squared exponentials.

    Built from a ``sklearn.gaussian_process.kernels.RationalQuadratic``
    (``length_scale`` and ``alpha``, each with its bounds).
    """

    def __init__(self, kernel, learn=True, **factory):
        super().__init__()
        self.length_scale = _hyper(kernel, "length_scale", learn, factory)
        self.alpha = _hyper(kernel, "alpha", learn, factory)

    def forward(self, x1, x2):
        alpha = self.alpha()
        return (1.0 + scaled_sqdist(x1, x2, self.length_scale()) / (2.0 * alpha)) ** (-alpha)

    def diag(self, x):
        return torch.ones(x.shape[0], dtype=x.dtype, device=x.device)

    def sklearn_params(self):
        return {"length_scale": self.length_scale.numpy(), "alpha": self.alpha.numpy()}


class Periodic(nn.Module):
    r"""``k(x, x') = exp(-2 sin^2(pi |x - x'| / p) / l^2)``: the periodic kernel of
    MacKay ([RW2006]_, eq. 4.31, with the period 2 pi generalised to p).

    Built from a ``sklearn.gaussian_process.kernels.ExpSineSquared``
    (``length_scale`` and ``periodicity``, each with its bounds).
    """

    def __init__(self, kernel, learn=True, **factory):
        super().__init__()
        self.length_scale = _hyper(kernel, "length_scale", learn, factory)
        self.periodicity = _hyper(kernel, "periodicity", learn, factory)

    def forward(self, x1, x2):
        one = torch.ones((), dtype=x1.dtype, device=x1.device)
        dist = scaled_sqdist(x1, x2, one).clamp_min(1e-36).sqrt()
        return torch.exp(-2.0 * (torch.sin(math.pi * dist / self.periodicity()) / self.length_scale()).square())

    def diag(self, x):
        return torch.ones(x.shape[0], dtype=x.dtype, device=x.device)

    def sklearn_params(self):
        return {"length_scale": self.length_scale.numpy(), "periodicity": self.periodicity.numpy()}


class DotProduct(nn.Module):
    r"""k(x, x') = sigma_0^2 + x . x', the (inhomogeneous) linear kernel
    ([RW2006]_, section 4.2.2), Bayesian linear regression with a N(0, sigma_0^2)
    bias and N(0, I) weights.

    Built from a ``sklearn.gaussian_process.kernels.DotProduct``
    (``sigma_0`` and its bounds).
    """

    def __init__(self, kernel, learn=True, **factory):
        super().__init__()
        self.sigma_0 = _hyper(kernel, "sigma_0", learn, factory)

    def forward(self, x1, x2):
        return x1 @ x2.T + self.sigma_0().square()

    def diag(self, x):
        return x.square().sum(-1) + self.sigma_0().square()

    def sklearn_params(self):
        return {"sigma_0": self.sigma_0.numpy()}


class WhiteNoise(nn.Module):
    r"""Independent noise, k(x, x') = nu * [x is x'] ([RW2006]_, section 4.2: the
    covariance of the noise term of eq. 2.20), held here for a likelihood.

    Built from a ``sklearn.gaussian_process.kernels.WhiteKernel``
    (``noise_level`` nu, a variance, and its bounds). The noise is not part
    of the latent function, so ``forward`` and ``diag`` are zero, as
    scikit-learn's ``WhiteKernel(X, Y)`` is for two sets of rows; a model
    reads the variance from ``noise_level()`` and puts it in its likelihood.
    """

    def __init__(self, kernel, learn=True, **factory):
        super().__init__()
        self.noise_level = _hyper(kernel, "noise_level", learn, factory)

    def forward(self, x1, x2):
        return torch.zeros(x1.shape[0], x2.shape[0], dtype=x1.dtype, device=x1.device)

    def diag(self, x):
        return torch.zeros(x.shape[0], dtype=x.dtype, device=x.device)

    def sklearn_params(self):
        return {"noise_level": self.noise_level.numpy()}


class SumKernel(nn.Module):
    """k = k1 + k2: a sum of kernels is a kernel ([RW2006]_, section 4.2.4)."""

    def __init__(self, k1, k2):
        super().__init__()
        self.k1, self.k2 = k1, k2

    def forward(self, x1, x2):
        return self.k1(x1, x2) + self.k2(x1, x2)

    def diag(self, x):
        return self.k1.diag(x) + self.k2.diag(x)


class ProductKernel(SumKernel):
    """k = k1 * k2: a product of kernels is a kernel ([RW2006]_, section 4.2.4)."""

    def forward(self, x1, x2):
        return self.k1(x1, x2) * self.k2(x1, x2)

    def diag(self, x):
        return self.k1.diag(x) * self.k2.diag(x)
