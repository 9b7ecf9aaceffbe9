"""Bayesian neural network estimators: MLPs, or any torch module (``module=``)."""

from ._classifier import BayesianMLPClassifier
from ._regressor import BayesianMLPRegressor

__all__ = ["BayesianMLPClassifier", "BayesianMLPRegressor"]
