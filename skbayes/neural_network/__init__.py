"""Bayesian neural network estimators."""

from ._classifier import BayesianMLPClassifier
from ._regressor import BayesianMLPRegressor

__all__ = ["BayesianMLPClassifier", "BayesianMLPRegressor"]
