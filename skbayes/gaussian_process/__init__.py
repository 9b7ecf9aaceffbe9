"""Gaussian process estimators."""

from ._sparse_gp import SparseGPRegressor

__all__ = ["SparseGPRegressor"]
