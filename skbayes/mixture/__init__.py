"""Mixture models."""

from ._bayesian_mixture import BayesianGaussianMixture

__all__ = ["BayesianGaussianMixture"]
