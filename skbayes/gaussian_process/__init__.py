"""Gaussian process estimators."""

from .._sklearn_kernels import from_sklearn_kernel, stationary_to_sklearn_kernel, to_sklearn_kernel
from ._deep_gp import DeepGPRegressor
from ._sparse_gp import SparseGPRegressor
from ._sparse_gp_classifier import SparseGPClassifier

__all__ = [
    "DeepGPRegressor",
    "SparseGPClassifier",
    "SparseGPRegressor",
    "from_sklearn_kernel",
    "stationary_to_sklearn_kernel",
    "to_sklearn_kernel",
]
