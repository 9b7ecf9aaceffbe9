"""Gaussian process estimators."""

from ._deep_gp import DeepGPRegressor
from ._sparse_gp import SparseGPRegressor

__all__ = ["DeepGPRegressor", "SparseGPRegressor"]
