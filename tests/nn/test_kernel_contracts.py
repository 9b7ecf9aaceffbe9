"""Contracts that every covariance function of skbayes.nn.gp.kernels meets, found by looking at the package.

Each kernel module is checked against scikit-learn's implementation of the
same kernel (``kernel(X, Y)`` and ``kernel.diag(X)``, an independent
computation in numpy): its covariance matrix, its diagonal, the symmetry and
positive semi-definiteness of k(X, X), that a block of rows does not depend on
the other rows, and that the learned hyperparameters receive gradients. A
kernel added to the module is picked up here and fails until :data:`CASES`
says how to build it and which scikit-learn kernel it must match.
"""

import inspect

import numpy as np
import pytest
import torch
from sklearn.gaussian_process import kernels as sk
from torch import nn

from skbayes.nn.gp import kernels

N_FEATURES = 3
LENGTH_SCALES = np.array([0.6, 1.3, 2.2])


def _translated(cls, sk_kernel):
    """(torch module from the scikit-learn kernel, the scikit-learn kernel) for a translated class."""
    return lambda: (cls(sk_kernel, learn=True, dtype=torch.float64), sk_kernel)


# class name -> factory returning (torch kernel module, the scikit-learn kernel it must equal)
CASES = {
    "RBFKernel": lambda: (
        kernels.RBFKernel(N_FEATURES, length_scale=LENGTH_SCALES, variance=1.7, dtype=torch.float64),
        sk.ConstantKernel(1.7) * sk.RBF(LENGTH_SCALES),
    ),
    "MaternKernel": lambda: (
        kernels.MaternKernel(N_FEATURES, nu=1.5, length_scale=LENGTH_SCALES, variance=0.8, dtype=torch.float64),
        sk.ConstantKernel(0.8) * sk.Matern(LENGTH_SCALES, nu=1.5),
    ),
    "ConstantKernel": _translated(kernels.ConstantKernel, sk.ConstantKernel(2.5)),
    "SquaredExponential": _translated(kernels.SquaredExponential, sk.RBF(LENGTH_SCALES)),
    "HalfIntegerMatern": _translated(kernels.HalfIntegerMatern, sk.Matern(0.9, nu=0.5)),
    "RationalQuadratic": _translated(kernels.RationalQuadratic, sk.RationalQuadratic(length_scale=1.1, alpha=0.7)),
    "Periodic": _translated(kernels.Periodic, sk.ExpSineSquared(length_scale=0.9, periodicity=2.5)),
    "DotProduct": _translated(kernels.DotProduct, sk.DotProduct(sigma_0=0.4)),
    # the noise is the likelihood's, not the latent function's: zero between two sets of rows
    "WhiteNoise": _translated(kernels.WhiteNoise, sk.WhiteKernel(0.3)),
    "SumKernel": lambda: (
        kernels.SumKernel(
            kernels.SquaredExponential(sk.RBF(0.8), dtype=torch.float64),
            kernels.DotProduct(sk.DotProduct(0.5), dtype=torch.float64),
        ),
        sk.RBF(0.8) + sk.DotProduct(0.5),
    ),
    "ProductKernel": lambda: (
        kernels.ProductKernel(
            kernels.ConstantKernel(sk.ConstantKernel(1.9), dtype=torch.float64),
            kernels.Periodic(sk.ExpSineSquared(1.2, 3.0), dtype=torch.float64),
        ),
        sk.ConstantKernel(1.9) * sk.ExpSineSquared(1.2, 3.0),
    ),
}


# Kernels that are positive semi-definite only on one-dimensional inputs: scikit-learn's
# ExpSineSquared (here Periodic) is a function of the Euclidean distance, and
# exp(-2 sin^2(pi r / p) / l^2) is not a covariance in more dimensions ([RW2006], section 4.2.3
# builds it for one input). They are checked on points along a line.
ONE_DIMENSIONAL = {"Periodic", "ProductKernel"}


def _kernel_classes():
    found = [getattr(kernels, name) for name in kernels.__all__]
    return sorted(
        # every torch module of the kernel module but the bounded hyperparameter
        (cls for cls in found if inspect.isclass(cls) and issubclass(cls, nn.Module) and cls is not kernels.BoundedPositive),
        key=lambda cls: cls.__name__,
    )


def _points(n, seed):
    return np.random.default_rng(seed).normal(size=(n, N_FEATURES))


def test_every_kernel_has_a_case_and_the_protocol():
    for cls in _kernel_classes():
        assert callable(getattr(cls, "diag", None)), f"{cls.__name__} has no diag(x)"
    names = {cls.__name__ for cls in _kernel_classes()}
    assert names <= set(CASES), f"add a case for {sorted(names - set(CASES))}"
    assert len(names) >= 11


@pytest.fixture(params=[cls.__name__ for cls in _kernel_classes()])
def case(request):
    module, sk_kernel = CASES[request.param]()
    return module, sk_kernel, request.param in ONE_DIMENSIONAL


def _sk_cross(sk_kernel, A, B):
    if isinstance(sk_kernel, sk.WhiteKernel):  # scikit-learn's WhiteKernel(X, Y) between two sets is zero
        return np.zeros((len(A), len(B)))
    return sk_kernel(A, B)


def test_matrix_and_diagonal_match_scikit_learn(case):
    module, sk_kernel, _ = case
    A, B = _points(7, 0), _points(5, 1)
    with torch.no_grad():
        cross = module(torch.as_tensor(A), torch.as_tensor(B)).numpy()
        diag = module.diag(torch.as_tensor(A)).numpy()
    np.testing.assert_allclose(cross, _sk_cross(sk_kernel, A, B), rtol=1e-10, atol=1e-12)
    expected_diag = np.zeros(len(A)) if isinstance(sk_kernel, sk.WhiteKernel) else sk_kernel.diag(A)
    np.testing.assert_allclose(diag, expected_diag, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    "name, on_a_line",
    [(cls.__name__, line) for cls in _kernel_classes() for line in (False, True)
     if line or cls.__name__ not in ONE_DIMENSIONAL],
)
def test_gram_matrix_is_symmetric_positive_semidefinite_with_its_diagonal(name, on_a_line):
    module, _ = CASES[name]()
    X = _points(30, 2)
    if on_a_line:  # points t * v along one direction: a one-dimensional input in R^3
        X = X[:, :1] * np.array([[0.5, -1.0, 2.0]])
    X = torch.as_tensor(X)
    with torch.no_grad():
        gram = module(X, X).numpy()
        diag = module.diag(X).numpy()
    np.testing.assert_allclose(gram, gram.T, atol=1e-12)
    scale = max(1.0, np.abs(gram).max())
    assert np.linalg.eigvalsh(gram).min() > -1e-9 * scale
    # r^2 by ||a||^2 + ||b||^2 - 2 a.b leaves ~1e-16 at x = x', which the Matern-1/2's infinite
    # slope at r = 0 turns into ~3e-8 on the diagonal
    np.testing.assert_allclose(np.diag(gram), diag, rtol=1e-7, atol=1e-12)


def test_a_block_of_rows_does_not_depend_on_the_other_rows(case):
    module, _, _ = case
    A, B = torch.as_tensor(_points(12, 3)), torch.as_tensor(_points(9, 4))
    with torch.no_grad():
        whole = module(A, B)
        np.testing.assert_allclose(module(A[3:8], B[2:6]).numpy(), whole[3:8, 2:6].numpy(), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(module.diag(A[3:8]).numpy(), module.diag(A)[3:8].numpy(), rtol=1e-12)


def test_learned_hyperparameters_receive_gradients(case):
    module, _, _ = case
    params = list(module.parameters())
    if isinstance(module, kernels.WhiteNoise):
        assert params  # learned, though it enters the likelihood rather than the latent covariance
        return
    assert params, f"{type(module).__name__} has no learned hyperparameter"
    A = torch.as_tensor(_points(6, 5))
    module(A, A + 0.3).sum().backward()
    for param in params:
        assert param.grad is not None and torch.all(torch.isfinite(param.grad))
        assert torch.any(param.grad != 0)
