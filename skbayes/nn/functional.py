r"""Small pure functions shared by the layers, networks, likelihoods and optimisers.

Nothing here holds state: each function maps tensors (or floats) to tensors.

* :func:`inverse_softplus` maps a positive value to the unconstrained value
  that softplus maps back to it (every positive quantity of the package is
  stored raw and read through softplus).
* :data:`LOG_2PI` and :func:`gaussian_log_prob`: the univariate Gaussian
  log-density.
* :func:`uniform_init`: :class:`torch.nn.Linear`'s default initial scale,
  drawn from an explicit generator; :func:`standard_normal` and
  ``standard_uniform``: N(0, 1) and U[0, 1) draws from an explicit
  generator, the same on any device.
* :data:`ACTIVATIONS` and :func:`feed_forward`: the non-linearities by name
  and the layer-activation-layer pass of every multi-layer perceptron.
* :func:`relu_moments`: mean and variance of a rectified Gaussian (the moment
  propagation of probabilistic backpropagation, Hernández-Lobato & Adams,
  ICML 2015; Cinelli 2019, section 3.4).
"""

import functools
import math

import numpy as np
import scipy.special
import torch

__all__ = [
    "ACTIVATIONS",
    "FLOAT_OPS",
    "NUMPY_OPS",
    "TORCH_OPS",
    "ArrayOps",
    "array_ops",
    "LOG_2PI",
    "feed_forward",
    "gaussian_log_prob",
    "inverse_softplus",
    "layer_prior_scale",
    "PRIOR_SCALINGS",
    "relu_moments",
    "relu_moments_backward",
    "relu_moments_forward",
    "random_signs",
    "standard_normal",
    "uniform_init",
    "unflatten",
]

#: log(2 pi), the constant of the Gaussian log-density.
LOG_2PI = math.log(2.0 * math.pi)
_LOG_SQRT_2PI = 0.5 * LOG_2PI

#: Hidden-layer non-linearities by name (the names of scikit-learn's MLPs).
ACTIVATIONS = {
    "relu": torch.relu,
    "tanh": torch.tanh,
    "logistic": torch.sigmoid,
    "identity": lambda x: x,
}


#: The values of ``prior_scaling`` besides None (:func:`layer_prior_scale`).
PRIOR_SCALINGS = ("fan_in",)


def unflatten(flat, shapes):
    """Split the rows of ``flat`` (S, P) into tensors of shape ``(S, *shape)``, one per shape, in order.

    The inverse of concatenating each tensor's values row-major: the P columns
    are the shapes' sizes in turn.

    Parameters
    ----------
    flat : torch.Tensor of shape (S, P)
    shapes : sequence of tuple of int
        P = the sum of their sizes.

    Returns
    -------
    tensors : list of torch.Tensor

    Raises
    ------
    ValueError
        If the shapes' sizes do not add up to P.
    """
    sizes = [math.prod(shape) for shape in shapes]
    if sum(sizes) != flat.shape[-1]:
        raise ValueError(f"The shapes hold {sum(sizes)} values; the rows have {flat.shape[-1]}.")
    return [part.reshape(flat.shape[0], *shape) for part, shape in zip(flat.split(sizes, dim=1), shapes)]


def inverse_softplus(x):
    """log(exp(x) - 1), the inverse of softplus, for x > 0.

    Written as x + log(-expm1(-x)), which neither overflows for large x nor
    loses precision for small x.

    Parameters
    ----------
    x : float or torch.Tensor
        Positive value(s).

    Returns
    -------
    raw : float or torch.Tensor
        A float for a float, a tensor of the same shape and dtype for a tensor.
    """
    if isinstance(x, torch.Tensor):
        return x + torch.log(-torch.expm1(-x))
    return x + math.log(-math.expm1(-x))


def gaussian_log_prob(x, mean=0.0, var=None):
    r"""Elementwise log N(x | mean, var), in nats.

    .. math::

        \log \mathcal N(x \mid \mu, v) = -\tfrac12 \Big(\log 2\pi + \log v
                                         + \frac{(x - \mu)^2}{v}\Big).

    Parameters
    ----------
    x : torch.Tensor
    mean : torch.Tensor or float, default=0.0
    var : torch.Tensor, optional
        Variance (> 0), broadcastable with ``x``; None for unit variance.

    Returns
    -------
    log_prob : torch.Tensor
        Broadcast shape of the inputs (not summed).
    """
    diff = x - mean
    sq = diff * diff  # the value and gradient of diff ** 2, without pow's scalar conversion
    if var is None:
        return -0.5 * (LOG_2PI + sq)
    return -0.5 * (LOG_2PI + torch.log(var) + sq / var)


def uniform_init(shape, fan_in, generator=None, device=None, dtype=None):
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)) draws, the default scale of :class:`torch.nn.Linear`.

    Drawn from an explicit generator, so that no global seed is involved, on
    the generator's device and then moved to ``device``: a CPU generator seeds
    a model on any device, with the same initial values everywhere.

    Parameters
    ----------
    shape : tuple of int
    fan_in : int
        Number of inputs of the layer; 0 gives zeros.
    generator : torch.Generator, optional
    device, dtype : optional

    Returns
    -------
    values : torch.Tensor of shape ``shape``
    """
    bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
    values = torch.empty(shape, device=generator_device(generator, device), dtype=dtype)
    return values.uniform_(-bound, bound, generator=generator).to(device)


def generator_device(generator, default=None):
    """The device random numbers from ``generator`` are drawn on (``default`` without one)."""
    return default if generator is None else generator.device


def standard_normal(shape, like, generator=None):
    """N(0, 1) draws of ``shape`` in ``like``'s dtype, on ``like``'s device.

    Drawn on the generator's device and then moved, so that a CPU generator
    gives the same draws whatever the device of ``like``.

    Parameters
    ----------
    shape : tuple of int
    like : torch.Tensor
        Gives the dtype and the device of the result.
    generator : torch.Generator, optional

    Returns
    -------
    eps : torch.Tensor of shape ``shape``
    """
    eps = torch.randn(shape, generator=generator, device=generator_device(generator, like.device), dtype=like.dtype)
    return eps.to(like.device)


def standard_uniform(shape, like, generator=None):
    """U[0, 1) draws of ``shape`` in ``like``'s dtype, on ``like``'s device.

    The uniform counterpart of :func:`standard_normal`: drawn on the
    generator's device and then moved, so that a CPU generator gives the
    same draws whatever the device of ``like``.

    Parameters
    ----------
    shape : tuple of int
    like : torch.Tensor
        Gives the dtype and the device of the result.
    generator : torch.Generator, optional

    Returns
    -------
    u : torch.Tensor of shape ``shape``
    """
    u = torch.rand(shape, generator=generator, device=generator_device(generator, like.device), dtype=like.dtype)
    return u.to(like.device)


def random_signs(shape, like, generator=None):
    """Independent random signs, +1 or -1 with probability 1/2 each, in ``like``'s dtype and device.

    The sign vectors of Flipout (Wen et al. 2018), drawn by
    ``standard_uniform``.

    Parameters
    ----------
    shape : tuple of int
    like : torch.Tensor
    generator : torch.Generator, optional

    Returns
    -------
    signs : torch.Tensor of shape ``shape``
    """
    return torch.where(standard_uniform(shape, like, generator) < 0.5, -1.0, 1.0).to(like.dtype)


def dropout_mask(shape, rate, like, generator=None):
    """Inverted-dropout mask of ``shape``: 1/(1-rate) with probability 1-rate, else 0.

    Kept units are scaled by 1/(1-rate), PyTorch's convention, so that the
    mean pass needs no rescaling (Gal 2016, section 3.2.3, with the inverted
    scaling). Drawn by ``standard_uniform``: a CPU generator gives the
    same mask on every device.

    Parameters
    ----------
    shape : tuple of int
    rate : float in [0, 1)
        Drop probability.
    like : torch.Tensor
        Gives the dtype and the device of the mask.
    generator : torch.Generator, optional

    Returns
    -------
    mask : torch.Tensor of shape ``shape``
    """
    keep = 1.0 - rate
    return (standard_uniform(shape, like, generator) < keep).to(like.dtype) / keep


def dropout_weight_decay(tensor, prior_scale, rate=0.0):
    r"""The KL condition of MC dropout for one weight tensor: l^2 / (2(1-p)) ||W||^2, l = 1/prior_scale.

    Gal 2016, eq. 3.13, in the inverted-dropout form (kept units scaled by
    1/(1-p), so the stored weights are (1-p) times the unscaled ones): the
    KL(q || p) of a Bernoulli q over the rows of W and a N(0, l^{-2}) prior,
    up to a constant, in nats. ``rate=0`` gives the plain Gaussian weight
    decay l^2/2 ||W||^2 of a parameter no mask acts on (biases, point
    estimates).

    Parameters
    ----------
    tensor : torch.Tensor
    prior_scale : float
        Prior standard deviation 1/l (> 0).
    rate : float in [0, 1), default=0.0
        Drop probability p of the mask acting on ``tensor``.

    Returns
    -------
    penalty : torch.Tensor, scalar
    """
    return 0.5 * (1.0 / prior_scale**2) / (1.0 - rate) * (tensor * tensor).sum()


def layer_prior_scale(prior_scale, fan_in, scaling=None):
    r"""Standard deviation of the Gaussian prior on the weights and bias of a layer with ``fan_in`` inputs.

    With ``scaling=None`` every weight and bias has the prior N(0, s^2)
    whatever the layer's width, so the prior variance of a pre-activation
    grows with the number of inputs (N(0, 1) weights on a layer of 50 inputs
    give pre-activations of about 50 times the inputs' variance). With
    ``scaling="fan_in"`` the layer's prior is N(0, s^2 / fan_in), which keeps
    the prior over functions the same when the layers widen: Neal (1996,
    section 2.2)'s scaling of the hidden-to-output weights, and the 1/fan-in
    prior variance of Rossi (2022, eq. 3.1, the "standard parameterisation"
    of the layer f_l = W_l a(f_{l-1}) / sqrt(D_{l-1}) + b_l). Both scale the
    weights only; here the bias shares its layer's scale (the weight of a
    constant input), this library's choice, so that one number per layer
    serves the layers that keep weights and bias in one tensor.

    Parameters
    ----------
    prior_scale : float
        The network's prior scale s (> 0).
    fan_in : int
        Inputs per output unit: ``in_features`` of a linear layer,
        ``in_channels / groups`` times the kernel area of a convolution.
    scaling : {"fan_in"} or None, default=None
        None: s; ``"fan_in"``: s / sqrt(fan_in).

    Returns
    -------
    scale : float

    Raises
    ------
    ValueError
        On an unknown ``scaling``, a ``prior_scale`` not above 0 or a
        ``fan_in`` below 1.
    """
    if not prior_scale > 0:
        raise ValueError(f"prior_scale must be > 0; got {prior_scale!r}.")
    if scaling is None:
        return float(prior_scale)
    if scaling not in PRIOR_SCALINGS:
        raise ValueError(f"Unknown prior scaling {scaling!r}; choose one of {PRIOR_SCALINGS} or None.")
    if not fan_in >= 1:
        raise ValueError(f"fan_in must be at least 1; got {fan_in!r}.")
    return float(prior_scale) / math.sqrt(fan_in)


def feed_forward(x, layers, activation="relu", apply=None):
    """Pass ``x`` through ``layers`` with the activation between consecutive layers.

    The activation is applied before every layer but the first, i.e. after
    every hidden layer and not after the output layer.

    Parameters
    ----------
    x : torch.Tensor
    layers : iterable
        Layers (callables), or anything ``apply`` knows how to apply.
    activation : str, default="relu"
        Key of :data:`ACTIVATIONS`.
    apply : callable, optional
        ``apply(layer, h) -> h``; by default ``layer(h)``.

    Returns
    -------
    out : torch.Tensor
    """
    act = ACTIVATIONS[activation]
    h = x
    for i, layer in enumerate(layers):
        if i:
            h = act(h)
        h = layer(h) if apply is None else apply(layer, h)
    return h


class ArrayOps:
    """The few array functions the hand-differentiated moment code needs, for torch or NumPy.

    The assumed-density-filtering pass of PBP (:mod:`skbayes.nn.optim.adf`)
    runs one tiny step per training row; on the CPU NumPy's per-call
    overhead is several times smaller than torch's eager dispatch, so the
    same formulas run on NumPy views of the CPU parameters and on the
    tensors themselves elsewhere. Arithmetic operators and ``@`` are shared;
    the rest is here. :func:`array_ops` picks the instance for an array.

    Attributes
    ----------
    exp, log, sqrt, log_ndtr : callable
        Elementwise functions (``log_ndtr`` = log Phi, the log of the
        standard normal CDF, computed without underflow).
    clamp_min : callable
        ``clamp_min(a, lo)``, elementwise max(a, lo) with a scalar ``lo``.
    where : callable
        ``where(cond, a, b)``, ``b`` may be a scalar.
    assign_where : callable
        ``assign_where(dst, cond, src)``: dst[cond] = src[cond], in place.
    finfo : callable
        ``finfo(dtype)``, with ``tiny`` and ``max``.
    """

    def __init__(self, exp, log, sqrt, log_ndtr, clamp_min, where, assign_where, finfo):
        self.exp, self.log, self.sqrt, self.log_ndtr = exp, log, sqrt, log_ndtr
        self.clamp_min, self.where, self.assign_where, self.finfo = clamp_min, where, assign_where, finfo


def _torch_assign_where(dst, cond, src):
    dst.copy_(torch.where(cond, src, dst))


def _numpy_assign_where(dst, cond, src):
    np.copyto(dst, src, where=cond)


#: On torch tensors (any device and dtype).
TORCH_OPS = ArrayOps(torch.exp, torch.log, torch.sqrt, torch.special.log_ndtr, torch.clamp_min, torch.where, _torch_assign_where, torch.finfo)
#: On NumPy arrays (the CPU fast path of PBP's assumed-density filtering).
NUMPY_OPS = ArrayOps(np.exp, np.log, np.sqrt, scipy.special.log_ndtr, np.maximum, np.where, _numpy_assign_where, functools.cache(np.finfo))


#: On Python floats (``math``; an overflow or a division by zero raises ArithmeticError).
FLOAT_OPS = ArrayOps(math.exp, math.log, math.sqrt, None, max, None, None, np.finfo)


def array_ops(array):
    """:data:`NUMPY_OPS` for a NumPy array, :data:`FLOAT_OPS` for a Python float, else :data:`TORCH_OPS`."""
    if isinstance(array, np.ndarray):
        return NUMPY_OPS
    return FLOAT_OPS if isinstance(array, float) else TORCH_OPS


def relu_moments_forward(mean, var, ops=TORCH_OPS):
    """Forward half of :func:`relu_moments` (eqs. 3.42-3.43), on torch tensors or NumPy arrays.

    Parameters
    ----------
    mean, var : array of shape (...)
        Moments of the Gaussian pre-activations (var > 0).
    ops : ArrayOps, default=TORCH_OPS
        :data:`NUMPY_OPS` for NumPy arrays.

    Returns
    -------
    mean_z, var_z : array of shape (...)
        Moments of the rectified variable.
    saved : tuple of arrays
        What :func:`relu_moments_backward` needs: Phi(alpha),
        phi(alpha) / sigma and mean_z.
    """
    std = ops.sqrt(ops.clamp_min(var, ops.finfo(var.dtype).tiny))
    alpha = mean / std
    log_pdf = -0.5 * alpha * alpha - _LOG_SQRT_2PI
    log_cdf = ops.log_ndtr(alpha)
    kappa = ops.exp(log_pdf - log_cdf)
    cdf = ops.exp(log_cdf)
    shifted = mean + std * kappa  # E[a | a > 0]
    mean_z = cdf * shifted
    var_z = mean_z * shifted * (1.0 - cdf) + cdf * var * (1.0 - kappa * (kappa + alpha))
    return mean_z, ops.clamp_min(var_z, 0.0), (cdf, ops.exp(log_pdf) / std, mean_z)


def relu_moments_backward(saved, grad_mean, grad_var):
    """Vector-Jacobian product of :func:`relu_moments` (Price's theorem, Cinelli 2019, appendix B.2).

    With m_z = E[relu(a)], s_z = E[relu(a)^2]: dm_z/dmu = Phi(alpha),
    dm_z/dv = phi(alpha) / (2 sigma), ds_z/dmu = 2 m_z, ds_z/dv = Phi(alpha),
    so d var_z/dmu = 2 m_z (1 - Phi(alpha)) and
    d var_z/dv = Phi(alpha) - m_z phi(alpha) / sigma.

    Parameters
    ----------
    saved : tuple
        The third output of :func:`relu_moments_forward`.
    grad_mean, grad_var : array
        Gradients with respect to mean_z and var_z.

    Returns
    -------
    d_mean, d_var : array
        Gradients with respect to the pre-activations' mean and variance.
    """
    cdf, pdf_over_std, mean_z = saved
    d_mean = grad_mean * cdf + grad_var * (2.0 * mean_z * (1.0 - cdf))
    d_var = grad_mean * (0.5 * pdf_over_std) + grad_var * (cdf - mean_z * pdf_over_std)
    return d_mean, d_var


class _ReluMoments(torch.autograd.Function):
    """relu_moments with a hand-written backward (one autograd node instead of ~20):
    :func:`relu_moments_forward` and :func:`relu_moments_backward`."""

    @staticmethod
    def forward(ctx, mean, var):
        mean_z, var_z, saved = relu_moments_forward(mean, var)
        ctx.save_for_backward(*saved)
        return mean_z, var_z

    @staticmethod
    def backward(ctx, grad_mean, grad_var):
        return relu_moments_backward(ctx.saved_tensors, grad_mean, grad_var)


def relu_moments(mean, var):
    r"""Mean and variance of max(0, a) for a ~ N(mean, var), elementwise.

    Cinelli 2019, eqs. 3.42-3.43 (the rectified Gaussian of PBP,
    Hernández-Lobato & Adams 2015): with alpha = mean / sqrt(var) and
    kappa = phi(alpha) / Phi(alpha),

    .. math::

        \mu_z = \Phi(\alpha)\,(\mu + \sigma\kappa), \qquad
        \sigma_z^2 = \mu_z(\mu + \sigma\kappa)\,\Phi(-\alpha)
                     + \Phi(\alpha)\,\sigma^2\,(1 - \kappa(\kappa + \alpha)).

    kappa is computed as exp(log phi(alpha) - log Phi(alpha)), which stays
    finite for very negative alpha, where phi and Phi both underflow. The
    result is differentiable (closed-form gradients, by Price's theorem).

    Parameters
    ----------
    mean : torch.Tensor
        Means of the Gaussian pre-activations.
    var : torch.Tensor
        Their variances, > 0; same shape as ``mean``.

    Returns
    -------
    mean_z, var_z : torch.Tensor
        Mean and variance of the rectified variable, same shape as ``mean``.
    """
    return _ReluMoments.apply(mean, var)
