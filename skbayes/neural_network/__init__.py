"""Bayesian neural network estimators: MLPs, and any torch module."""

from ._classifier import BayesianMLPClassifier
from ._module import BayesianNeuralNetClassifier, BayesianNeuralNetRegressor
from ._regressor import BayesianMLPRegressor

__all__ = ["BayesianMLPClassifier", "BayesianMLPRegressor", "BayesianNeuralNetClassifier", "BayesianNeuralNetRegressor"]
