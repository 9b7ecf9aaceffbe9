"""Gaussian process estimators."""

from ._deep_gp import DeepGPRegressor
from ._sparse_gp import SparseGPRegressor
from ._sparse_gp_classifier import SparseGPClassifier

__all__ = ["DeepGPRegressor", "SparseGPClassifier", "SparseGPRegressor"]
