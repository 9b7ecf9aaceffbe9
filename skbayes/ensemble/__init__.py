"""Combinations of regressors' predictive distributions.

:class:`PredictiveStackingRegressor` stacks the predictive distributions of
a few families (Bayesian linear regression, a Gaussian process, the
Bayesian MLP, or any regressors with a predictive standard deviation) with
the weights that maximise their held-out log predictive density (Yao,
Vehtari, Simpson and Gelman 2018).
"""

from ._stacking import PredictiveStackingRegressor, stacking_weights

__all__ = ["PredictiveStackingRegressor", "stacking_weights"]
