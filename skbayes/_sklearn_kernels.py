r"""Translation of scikit-learn kernel expressions into the torch kernels of :mod:`skbayes.nn.gp.kernels`, and back.

The estimators' side of the kernels (the sparse and deep GPs, the GP-induced
prior): ``skbayes.nn`` computes with torch modules and never imports
scikit-learn; these functions map a ``sklearn.gaussian_process.kernels``
expression onto those modules and their fitted values back onto a clone of
the expression. Public as :func:`skbayes.gaussian_process.from_sklearn_kernel`
and its two companions.

References
----------
.. [RW2006] C. E. Rasmussen and C. K. I. Williams, "Gaussian processes for
   machine learning", MIT Press, 2006, chapter 4.
"""

import numpy as np
import torch

from .nn.gp.kernels import (
    ConstantKernel,
    DotProduct,
    HalfIntegerMatern,
    MaternKernel,
    Periodic,
    ProductKernel,
    RationalQuadratic,
    RBFKernel,
    SquaredExponential,
    SumKernel,
    WhiteNoise,
)

__all__ = ["SKLEARN_KERNELS", "from_sklearn_kernel", "stationary_to_sklearn_kernel", "to_sklearn_kernel"]


def _leaf_classes():
    from sklearn.gaussian_process import kernels as sk

    return {
        sk.ConstantKernel: ConstantKernel,
        sk.RBF: SquaredExponential,
        sk.RationalQuadratic: RationalQuadratic,
        sk.ExpSineSquared: Periodic,
        sk.DotProduct: DotProduct,
        sk.WhiteKernel: WhiteNoise,
    }


SKLEARN_KERNELS = ("ConstantKernel", "RBF", "Matern", "RationalQuadratic", "ExpSineSquared", "DotProduct",
                   "WhiteKernel", "Sum", "Product")


def from_sklearn_kernel(kernel, learn=True, *, device=None, dtype=None):
    """Translate a scikit-learn kernel object into a torch kernel module.

    Supported: sums and products of ``ConstantKernel``, ``RBF``, ``Matern``
    (nu 0.5, 1.5, 2.5 or inf), ``RationalQuadratic``, ``ExpSineSquared`` and
    ``DotProduct``, with isotropic or per-feature length-scales, and
    ``WhiteKernel``, which becomes a :class:`~skbayes.nn.WhiteNoise` (zero latent
    covariance; the model puts its variance into the likelihood). The modules
    start at the kernel's hyperparameter values; ``*_bounds="fixed"`` (or
    ``learn=False``) makes a hyperparameter a buffer, other bounds are kept
    by :class:`~skbayes.nn.BoundedPositive`. Each module cites the equation of [RW2006]_
    it implements.

    Parameters
    ----------
    kernel : sklearn.gaussian_process.kernels.Kernel
        The kernel expression, its values in the units of X and of the
        targets the model works in.
    learn : bool, default=True
        Make the hyperparameters that are not ``"fixed"`` trainable
        parameters; False makes them all buffers.
    device, dtype : optional
        Where and in which precision the hyperparameters live.

    Returns
    -------
    module : torch.nn.Module
        With ``forward(x1, x2) -> (n1, n2)`` and ``diag(x) -> (n,)`` for
        inputs of shape (n, d), equal to ``kernel(x1, x2)`` and
        ``kernel.diag(x)``.

    Raises
    ------
    ValueError
        For any other kernel class, naming it.
    """
    from sklearn.gaussian_process import kernels as sk

    factory = {"device": device, "dtype": dtype}
    if type(kernel) in (sk.Sum, sk.Product):
        pair = (from_sklearn_kernel(kernel.k1, learn, **factory), from_sklearn_kernel(kernel.k2, learn, **factory))
        return SumKernel(*pair) if type(kernel) is sk.Sum else ProductKernel(*pair)
    if type(kernel) is sk.Matern:
        return (SquaredExponential if kernel.nu == np.inf else HalfIntegerMatern)(kernel, learn, **factory)
    leaf = _leaf_classes().get(type(kernel))
    if leaf is None:
        raise ValueError(
            f"Cannot translate the scikit-learn kernel {type(kernel).__name__} ({kernel!r}); supported: "
            f"{', '.join(SKLEARN_KERNELS)}."
        )
    return leaf(kernel, learn, **factory)


def to_sklearn_kernel(module, kernel):
    """A scikit-learn kernel like ``kernel``, with the hyperparameter values of ``module``.

    Parameters
    ----------
    module : torch.nn.Module
        ``from_sklearn_kernel(kernel)``, possibly trained.
    kernel : sklearn.gaussian_process.kernels.Kernel
        The expression it was translated from; it is not modified.

    Returns
    -------
    fitted : sklearn.gaussian_process.kernels.Kernel
        A clone of ``kernel`` (same structure, bounds and printed form) with
        the module's current values, in the same units ([RW2006]_, chapter 4).
    """
    from sklearn.base import clone

    if isinstance(module, SumKernel):
        return type(kernel)(to_sklearn_kernel(module.k1, kernel.k1), to_sklearn_kernel(module.k2, kernel.k2))
    return clone(kernel).set_params(**module.sklearn_params())


def stationary_to_sklearn_kernel(module):
    """The scikit-learn kernel equal to an :class:`~skbayes.nn.RBFKernel` or :class:`~skbayes.nn.MaternKernel`.

    ``ConstantKernel(s^2) * RBF(l)`` or ``ConstantKernel(s^2) * Matern(l, nu)``
    with the module's current signal variance s^2 and per-feature
    length-scales l, so that the two compute the same covariance
    ([RW2006]_, eqs. 4.9 and 4.14).

    Parameters
    ----------
    module : RBFKernel or MaternKernel

    Returns
    -------
    kernel : sklearn.gaussian_process.kernels.Product

    Raises
    ------
    TypeError
        For any other module.
    """
    from sklearn.gaussian_process import kernels

    if not isinstance(module, (RBFKernel, MaternKernel)):
        raise TypeError(f"Expected an RBFKernel or a MaternKernel; got {type(module).__name__}.")
    with torch.no_grad():
        length_scale = module.length_scale.detach().cpu().double().numpy().copy()
        variance = float(module.variance)
    if isinstance(module, MaternKernel):
        stationary = kernels.Matern(length_scale=length_scale, nu=module.nu)
    else:
        stationary = kernels.RBF(length_scale=length_scale)
    return kernels.ConstantKernel(variance) * stationary
