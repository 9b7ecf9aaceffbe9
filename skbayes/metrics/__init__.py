"""Proper scoring rules, calibration diagnostics and their plots for probabilistic predictions.

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
:func:`~sklearn.model_selection.cross_validate`. The named regression
scorers of :func:`get_scorer` (larger is better for all):

* ``"log_predictive_density"``: the mean over rows of
  ``estimator.log_predictive_density(X, y)``, the log-density of each
  observation under the estimator's own predictive distribution (nats per
  row). For the Bayesian MLPs (MC dropout, deep ensembles, SGHMC, ...), the
  deep GP and a sparse GP fitted by sampling it is the log of the Monte-Carlo
  mixture (1/S) sum_s p(y | theta_s) over weight draws, members or samples
  (Gaussian components N(y | mu_s, sigma_s^2), or Student-t ones under
  ``BayesianMLPRegressor``'s default ``noise="auto"``), not of a Gaussian
  with the mixture's mean and std. An estimator
  without that method (scikit-learn's ``BayesianRidge``,
  ``GaussianProcessRegressor``) is scored by the Gaussian ``N(mean, std**2)``
  of ``predict(X, return_std=True)``; a Pipeline by its last step, on X
  transformed through the other steps.
* ``"neg_gaussian_nll"``: minus :func:`gaussian_nll` of that Gaussian for
  every estimator, the mixture's mean and std included: it ranks models by
  how well a Gaussian summary of their predictive fits, and for a skewed or
  multi-modal predictive it differs from ``"log_predictive_density"``, the
  test log-likelihood that papers report.
* ``"neg_crps"``: minus the CRPS of the estimator's own predictive, the fair
  estimator :func:`crps_ensemble` on 100 ``sample_y`` draws per row for
  skbayes estimators, the closed form :func:`crps_gaussian` otherwise;
  ``"neg_gaussian_crps"``: always the closed form of the Gaussian.
* ``"neg_interval_score"`` and ``"neg_interval_coverage_error"``:
  :func:`interval_score` and :func:`interval_coverage_error` (the gap
  ``|empirical - nominal|`` coverage) of the central 95% interval from
  ``predict_interval(X, coverage=0.95)`` where the estimator has one (the
  deep GP's, and the Bayesian MLP regressor's with Student-t or
  heteroscedastic noise, are mixture quantiles), else ``mean -/+ 1.96 std``.
* ``"neg_regression_calibration_error"``, ``"neg_miscalibration_area"`` (of
  the Gaussian) and, for classifiers, ``"neg_expected_calibration_error"``.

These names work only through :func:`get_scorer`. scikit-learn resolves a
string ``scoring="..."`` with :func:`sklearn.metrics.get_scorer`, which
looks it up in scikit-learn's own registry of scorers; scikit-learn offers no
public way to add names to it, and skbayes does not patch the private one,
so ``GridSearchCV(..., scoring="log_predictive_density")`` raises a
ValueError. Pass the scorer objects instead: ``scoring=get_scorer(name)``,
or for several metrics at once a dict ``{label: scorer}`` (scikit-learn's
own names may appear in it as strings) with ``refit=label`` naming the one
that picks ``best_params_``:

>>> from sklearn.datasets import make_regression
>>> from sklearn.linear_model import BayesianRidge
>>> from sklearn.model_selection import GridSearchCV
>>> from skbayes.metrics import get_scorer
>>> X, y = make_regression(n_samples=60, n_features=3, noise=5.0, random_state=0)
>>> scoring = {
...     "ll": get_scorer("log_predictive_density"),
...     "coverage": get_scorer("neg_interval_coverage_error"),
...     "r2": "r2",
... }
>>> search = GridSearchCV(
...     BayesianRidge(), {"alpha_init": [None, 1e-3]}, scoring=scoring, refit="ll", cv=3
... ).fit(X, y)
>>> sorted(key for key in search.cv_results_ if key.startswith("mean_test_"))
['mean_test_coverage', 'mean_test_ll', 'mean_test_r2']

:func:`~sklearn.model_selection.cross_validate` takes the same dict.

Four displays in scikit-learn's visualisation style draw these diagnostics
with matplotlib (the optional ``plot`` extra, ``pip install
"skbayes[plot]"``, imported only when a display draws). Each has
``from_estimator`` and ``from_predictions`` constructors that compute the
arrays with the functions above and store them as attributes, and a
``plot(ax=None, ...)`` method that sets ``ax_``, ``figure_`` and the artists:

* :class:`RegressionCalibrationDisplay`: observed against nominal coverage
  of the central intervals (or quantiles), from the estimator's own
  ``predict_interval`` where it has one, else the Gaussian;
* :class:`PredictionIntervalDisplay`: the intervals against the truth, the
  epistemic band ``mean -/+ z * epistemic_std`` inside the total one
  ``mean -/+ z * std``, along a feature or the rank of the prediction;
* :class:`ReliabilityDisplay`: a classifier's accuracy against confidence
  per bin, its ECE, and the mean predictive entropy and mutual information
  per bin;
* :class:`TrainingCurveDisplay`: ``loss_curve_`` and ``validation_scores_``
  per epoch.

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
from ._plot import (
    PredictionIntervalDisplay,
    RegressionCalibrationDisplay,
    ReliabilityDisplay,
    TrainingCurveDisplay,
)
from ._regression import (
    crps_ensemble,
    crps_gaussian,
    gaussian_nll,
    interval_coverage,
    interval_coverage_error,
    interval_score,
    mean_interval_width,
    miscalibration_area,
    regression_calibration_curve,
    regression_calibration_error,
    sharpness,
)
from ._scorer import get_scorer, get_scorer_names, make_probabilistic_scorer

__all__ = [
    "PredictionIntervalDisplay",
    "RegressionCalibrationDisplay",
    "ReliabilityDisplay",
    "TrainingCurveDisplay",
    "crps_ensemble",
    "crps_gaussian",
    "expected_calibration_error",
    "gaussian_nll",
    "get_scorer",
    "get_scorer_names",
    "interval_coverage",
    "interval_coverage_error",
    "interval_score",
    "make_probabilistic_scorer",
    "mean_interval_width",
    "miscalibration_area",
    "regression_calibration_curve",
    "regression_calibration_error",
    "reliability_diagram",
    "sharpness",
]
