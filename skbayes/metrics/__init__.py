"""Proper scoring rules and calibration diagnostics for probabilistic predictions.

Regression metrics take a point prediction and a predictive standard deviation
(the Gaussian ``N(y_pred, y_std**2)`` of ``predict(X, return_std=True)``),
samples from the predictive distribution (``sample_y``), or predictive
intervals. Classification metrics take class probabilities
(``predict_proba``). Every metric is a plain function of numpy arrays that
returns a Python float, in scikit-learn's argument order ``(y_true, y_pred,
...)``; lower is better for all of them except :func:`interval_coverage`,
which is a diagnostic and has no better direction.

Regression targets may be 1-D of shape ``(n_samples,)`` or multi-output of
shape ``(n_samples, n_outputs)``; a 1-D array and an ``(n_samples, 1)`` array
are interchangeable. Unless stated otherwise a metric is the mean over all
``n_samples * n_outputs`` entries. Log-likelihoods are in nats; every other
regression metric is in the units of y.

For the Brier score and the log loss use scikit-learn's
:func:`sklearn.metrics.brier_score_loss` (multiclass since scikit-learn 1.7;
its ``scale_by_half="auto"`` halves the binary score only) and
:func:`sklearn.metrics.log_loss`; :func:`get_scorer` returns their scorers
(``"neg_brier_score"``, ``"neg_log_loss"``).

:func:`make_probabilistic_scorer` and :func:`get_scorer` wrap the metrics as
``scorer(estimator, X, y) -> float`` callables for the ``scoring`` argument of
:class:`~sklearn.model_selection.GridSearchCV` and
:func:`~sklearn.model_selection.cross_validate`.

References
----------
.. [1] T. Gneiting and A. E. Raftery, "Strictly proper scoring rules,
   prediction, and estimation", Journal of the American Statistical
   Association 102(477), 359-378, 2007.
.. [2] V. Kuleshov, N. Fenner and S. Ermon, "Accurate uncertainties for deep
   learning using calibrated regression", ICML 2018.
.. [3] C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger, "On calibration of
   modern neural networks", ICML 2017.
.. [4] M. P. Naeini, G. F. Cooper and M. Hauskrecht, "Obtaining well
   calibrated probabilities using Bayesian binning", AAAI 2015.
.. [5] C. A. T. Ferro, "Fair scores for ensemble forecasts", Quarterly
   Journal of the Royal Meteorological Society 140(683), 1917-1923, 2014.
.. [6] M. Zamo and P. Naveau, "Estimation of the continuous ranked
   probability score with limited information and applications to ensemble
   weather forecasts", Mathematical Geosciences 50(2), 209-234, 2018.
"""

from ._classification import expected_calibration_error, reliability_diagram
from ._regression import (
    crps_ensemble,
    crps_gaussian,
    gaussian_nll,
    interval_coverage,
    interval_score,
    mean_interval_width,
    miscalibration_area,
    regression_calibration_curve,
    regression_calibration_error,
    sharpness,
)
from ._scorer import get_scorer, get_scorer_names, make_probabilistic_scorer

__all__ = [
    "crps_ensemble",
    "crps_gaussian",
    "expected_calibration_error",
    "gaussian_nll",
    "get_scorer",
    "get_scorer_names",
    "interval_coverage",
    "interval_score",
    "make_probabilistic_scorer",
    "mean_interval_width",
    "miscalibration_area",
    "regression_calibration_curve",
    "regression_calibration_error",
    "reliability_diagram",
    "sharpness",
]
