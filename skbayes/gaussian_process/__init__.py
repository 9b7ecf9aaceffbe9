"""Gaussian process estimators."""

from ._sparse_gp import SparseGPRegressor
from ._sparse_gp_classifier import SparseGPClassifier

__all__ = ["SparseGPClassifier", "SparseGPRegressor"]
