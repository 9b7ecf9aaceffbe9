"""Bayesian neural network estimators."""

from ._regressor import BayesianMLPRegressor

__all__ = ["BayesianMLPRegressor"]
