"""Scorers for GridSearchCV and cross_validate (see skbayes.metrics)."""

import copy
import inspect

import numpy as np
from scipy.special import ndtri
from scipy.stats import norm
from sklearn.metrics import get_scorer as _sklearn_get_scorer
from sklearn.metrics import get_scorer_names as _sklearn_get_scorer_names
from sklearn.pipeline import Pipeline
from sklearn.utils import _safe_indexing

from ._classification import expected_calibration_error
from ._regression import (
    crps_ensemble,
    crps_gaussian,
    gaussian_nll,
    interval_coverage_error,
    interval_score,
    miscalibration_area,
    regression_calibration_error,
)
from ._validation import _check_coverage, _check_regression

_RESPONSES = ("std", "proba", "samples", "interval")

# Draws per row of the sample-based CRPS of "neg_crps".
_CRPS_DRAWS = 100
# Rows per sample_y call: bounds the memory of the draws and the joint
# (n, n) covariance of a Gaussian process's sample_y.
_SAMPLE_BLOCK_ROWS = 1000


def _accepts(func, name):
    try:
        parameters = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False
    return name in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )


def _step_with(estimator, X, method):
    """The estimator that has ``method``, and the X to pass it.

    ``estimator`` itself when it has the method; for a
    :class:`~sklearn.pipeline.Pipeline` (which has no ``sample_y``,
    ``predict_interval`` or ``log_predictive_density``) whose last step has
    it, that step and X transformed through the other steps; else
    ``(None, X)``.
    """
    if hasattr(estimator, method):
        return estimator, X
    last = estimator
    while isinstance(last, Pipeline) and not hasattr(last, method):
        last = last.steps[-1][1]
    if last is estimator or not hasattr(last, method):
        return None, X
    Xt = estimator[:-1].transform(X) if len(estimator.steps) > 1 else X
    return _step_with(estimator.steps[-1][1], Xt, method)


def _central_interval(estimator, X, coverage):
    """``estimator.predict_interval(X, coverage=coverage)``, else ``mean -/+ z * std``."""
    step, Xt = _step_with(estimator, X, "predict_interval")
    if step is not None and _accepts(step.predict_interval, "coverage"):
        return step.predict_interval(Xt, coverage=coverage)
    y_pred, y_std = estimator.predict(X, return_std=True)
    half_width = ndtri(0.5 + coverage / 2.0) * np.asarray(y_std)
    return y_pred - half_width, y_pred + half_width


def _mean_log_predictive_density(estimator, X, y_true):
    """Mean over rows of log p(y_i | x_i), nats per row (see ``"log_predictive_density"``)."""
    step, Xt = _step_with(estimator, X, "log_predictive_density")
    if step is not None:
        log_density = step.log_predictive_density(Xt, y_true)
    else:
        y_pred, y_std = estimator.predict(X, return_std=True)
        y_true, y_pred, y_std = _check_regression(y_true, y_pred, y_std)
        log_density = norm.logpdf(y_true, loc=y_pred, scale=y_std).sum(axis=1)
    return np.mean(log_density)


def _crps(estimator, X, y_true, n_draws=_CRPS_DRAWS):
    """CRPS of the estimator's own predictive (see ``"neg_crps"``)."""
    step, Xt = _step_with(estimator, X, "sample_y")
    if step is None or not hasattr(step, "log_predictive_density"):
        y_pred, y_std = estimator.predict(X, return_std=True)
        return crps_gaussian(y_true, y_pred, y_std=y_std)
    n_rows = np.shape(y_true)[0]
    y_samples = np.concatenate([
        step.sample_y(
            _safe_indexing(Xt, slice(start, start + _SAMPLE_BLOCK_ROWS)), n_samples=n_draws, random_state=0
        )
        for start in range(0, n_rows, _SAMPLE_BLOCK_ROWS)
    ])
    return crps_ensemble(y_true, y_samples)


class _ProbabilisticScorer:
    """``scorer(estimator, X, y) -> float``; see :func:`make_probabilistic_scorer`.

    The private response ``"estimator"`` calls ``metric(estimator, X, y,
    **kwargs)`` (the named scorers that pick the prediction method by what
    the estimator has).
    """

    def __init__(self, metric, sign, response, response_params, kwargs, name=None):
        self._metric = metric
        self._sign = sign
        self._response = response
        self._response_params = response_params
        self._kwargs = kwargs
        self._name = name

    def __call__(self, estimator, X, y_true):
        kwargs = dict(self._kwargs)
        if self._response == "std":
            y_pred, y_std = estimator.predict(X, return_std=True, **self._response_params)
            value = self._metric(y_true, y_pred, y_std=y_std, **kwargs)
        elif self._response == "proba":
            y_proba = estimator.predict_proba(X, **self._response_params)
            classes = getattr(estimator, "classes_", None)
            if classes is not None and "labels" not in kwargs and _accepts(self._metric, "labels"):
                kwargs["labels"] = classes
            value = self._metric(y_true, y_proba, **kwargs)
        elif self._response == "samples":
            step, Xt = _step_with(estimator, X, "sample_y")
            y_samples = (step or estimator).sample_y(Xt, **self._response_params)
            value = self._metric(y_true, y_samples, **kwargs)
        elif self._response == "interval":
            coverage = kwargs.pop("coverage", 0.95)
            lower, upper = _central_interval(estimator, X, coverage)
            if _accepts(self._metric, "coverage"):
                kwargs["coverage"] = coverage
            value = self._metric(y_true, lower, upper, **kwargs)
        else:
            value = self._metric(estimator, X, y_true, **kwargs)
        return self._sign * float(value)

    def __repr__(self):
        if self._name is not None:
            return f"get_scorer({self._name!r})"
        arguments = [getattr(self._metric, "__name__", repr(self._metric))]
        if self._sign > 0:
            arguments.append("greater_is_better=True")
        arguments.append(f"response={self._response!r}")
        if self._response_params:
            arguments.append(f"response_params={self._response_params!r}")
        arguments += [f"{key}={value!r}" for key, value in self._kwargs.items()]
        return f"make_probabilistic_scorer({', '.join(arguments)})"


def make_probabilistic_scorer(
    metric, *, greater_is_better=False, response="std", response_params=None, **kwargs
):
    """Make a scorer from a probabilistic metric.

    The scorer is a callable ``scorer(estimator, X, y) -> float`` for the
    ``scoring`` argument of :class:`~sklearn.model_selection.GridSearchCV`,
    :func:`~sklearn.model_selection.cross_validate` and
    :func:`~sklearn.model_selection.cross_val_score`. It asks the fitted
    estimator for a predictive distribution and evaluates the metric on it:

    * ``response="std"``: ``y_pred, y_std = estimator.predict(X,
      return_std=True)``, then ``metric(y, y_pred, y_std=y_std, **kwargs)``.
      Works for scikit-learn's ``BayesianRidge``, ``ARDRegression`` and
      ``GaussianProcessRegressor``, skbayes regressors, and a
      :class:`~sklearn.pipeline.Pipeline` ending in one (``Pipeline.predict``
      forwards ``return_std`` to its last step; with metadata routing enabled
      the last step must request it, e.g.
      ``BayesianRidge().set_predict_request(return_std=True)``).
    * ``response="proba"``: ``y_proba = estimator.predict_proba(X)``, then
      ``metric(y, y_proba, **kwargs)``, adding ``labels=estimator.classes_``
      when the metric takes ``labels`` and kwargs do not set it (so a fold
      missing a class still lines up with the columns).
    * ``response="samples"``: ``y_samples = estimator.sample_y(X,
      **response_params)``, then ``metric(y, y_samples, **kwargs)``.
      ``Pipeline`` has no ``sample_y``: for a Pipeline, its last step's, on
      X transformed through the other steps.
    * ``response="interval"``: the central predictive interval of nominal
      coverage ``coverage`` (a keyword of kwargs, default 0.95), then
      ``metric(y, lower, upper, **kwargs)``, passing ``coverage`` on when
      the metric takes it (:func:`interval_score`,
      :func:`interval_coverage_error`). The interval is
      ``estimator.predict_interval(X, coverage=coverage)`` when the
      estimator (or the last step of a Pipeline, X transformed through the
      others) has one, so a non-Gaussian predictive gives its own
      quantiles; else the Gaussian ``mean -/+ z * std`` of
      ``predict(X, return_std=True)``, z the (1 + coverage) / 2 normal
      quantile. response_params are not used.

    Parameters
    ----------
    metric : callable
        Metric with signature ``metric(y_true, prediction, ..., **kwargs)``
        as above, e.g. :func:`gaussian_nll`, :func:`expected_calibration_error`,
        :func:`crps_ensemble` or :func:`interval_coverage_error`.
    greater_is_better : bool, default=False
        Whether larger metric values are better. When False (scoring rules
        are losses) the scorer returns the negated metric, scikit-learn's
        ``neg_`` convention, so larger scores are always better.
    response : {"std", "proba", "samples", "interval"}, default="std"
        Which predictive output the metric takes.
    response_params : dict, default=None
        Extra keyword arguments of the prediction method. For
        ``"samples"`` it defaults to ``{"n_samples": 100}``.
    **kwargs
        Extra keyword arguments of the metric (and ``coverage`` for
        ``response="interval"``).

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y) -> float``, picklable when the metric is.

    Raises
    ------
    ValueError
        If metric is not callable, response is unknown, or ``coverage`` is
        not in (0, 1).

    Examples
    --------
    >>> from skbayes.metrics import crps_gaussian, make_probabilistic_scorer
    >>> scorer = make_probabilistic_scorer(crps_gaussian)
    >>> scorer
    make_probabilistic_scorer(crps_gaussian, response='std')
    """
    if not callable(metric):
        raise ValueError(f"metric must be callable; got {metric!r}.")
    if response not in _RESPONSES:
        raise ValueError(f"response must be one of {_RESPONSES}; got {response!r}.")
    if response == "interval" and "coverage" in kwargs:
        _check_coverage(kwargs["coverage"])
    if response_params is None:
        response_params = {"n_samples": 100} if response == "samples" else {}
    sign = 1.0 if greater_is_better else -1.0
    return _ProbabilisticScorer(metric, sign, response, dict(response_params), kwargs)


def _named_scorer(name, metric, response="std", greater_is_better=False):
    sign = 1.0 if greater_is_better else -1.0
    return _ProbabilisticScorer(metric, sign, response, {}, {}, name=name)


_SCORERS = {
    "log_predictive_density": _named_scorer(
        "log_predictive_density", _mean_log_predictive_density, response="estimator", greater_is_better=True
    ),
    "neg_gaussian_nll": _named_scorer("neg_gaussian_nll", gaussian_nll),
    "neg_crps": _named_scorer("neg_crps", _crps, response="estimator"),
    "neg_gaussian_crps": _named_scorer("neg_gaussian_crps", crps_gaussian),
    "neg_interval_score": _named_scorer("neg_interval_score", interval_score, response="interval"),
    "neg_interval_coverage_error": _named_scorer(
        "neg_interval_coverage_error", interval_coverage_error, response="interval"
    ),
    "neg_regression_calibration_error": _named_scorer(
        "neg_regression_calibration_error", regression_calibration_error
    ),
    "neg_miscalibration_area": _named_scorer("neg_miscalibration_area", miscalibration_area),
    "neg_expected_calibration_error": _named_scorer(
        "neg_expected_calibration_error", expected_calibration_error, response="proba"
    ),
}


def get_scorer(scoring):
    """Get a scorer by name: skbayes' probabilistic ones, else scikit-learn's.

    skbayes scorers, all oriented so that larger is better. In the
    descriptions, "the estimator" is the estimator itself or, for a
    :class:`~sklearn.pipeline.Pipeline`, its last step, called on X
    transformed through the other steps (``Pipeline`` does not forward
    ``log_predictive_density``, ``predict_interval`` or ``sample_y``); "the
    Gaussian" is ``N(mean, std**2)`` from ``estimator.predict(X,
    return_std=True)``.

    * ``"log_predictive_density"``: the mean over rows of
      ``estimator.log_predictive_density(X, y)``, the log-density of each
      observation under the estimator's own predictive distribution, in nats
      per row (summed over outputs): the test log-likelihood of the UCI
      benchmark protocol. For the skbayes models whose predictive is a
      Monte-Carlo mixture (MC dropout, deep ensembles, SGHMC, a deep GP, a
      sparse GP fitted by sampling) this is the log of the mixture density,
      not a Gaussian with its mean and std. An estimator without
      ``log_predictive_density`` (scikit-learn's ``BayesianRidge``,
      ``GaussianProcessRegressor``, a Pipeline ending in one) is scored
      by the log-density of the Gaussian. Not negated: it is a
      log-likelihood.
    * ``"neg_gaussian_nll"``: minus :func:`gaussian_nll` of the Gaussian,
      whatever the estimator's predictive is; per entry (averaged over
      outputs too). For single-output y it equals
      ``"log_predictive_density"`` when the predictive is Gaussian; for a
      mixture it scores the Gaussian with the mixture's mean and std
      instead, which misses its skewness and modes.
    * ``"neg_crps"``: minus the CRPS of the estimator's own predictive. An
      skbayes estimator (one with both ``sample_y`` and
      ``log_predictive_density``; its predictive need not be Gaussian) is
      scored from 100 draws per row, ``sample_y(X, n_samples=100,
      random_state=0)`` (in blocks of 1,000 rows), by :func:`crps_ensemble`
      with ``fair=True``: the fair estimator of Ferro (2014), unbiased for
      the CRPS of the distribution the draws come from, so the score is
      exact in expectation, its Monte-Carlo noise averages down over rows,
      and the fixed seed makes it reproducible. Any other estimator
      (scikit-learn's ``GaussianProcessRegressor`` included, although it
      has ``sample_y``: its predictive is Gaussian) is scored by the closed
      form :func:`crps_gaussian` of the Gaussian.
    * ``"neg_gaussian_crps"``: minus :func:`crps_gaussian` of the Gaussian.
    * ``"neg_interval_score"``: minus :func:`interval_score` of the central
      95% interval: ``estimator.predict_interval(X, coverage=0.95)`` when
      the estimator has one, else ``mean -/+ 1.96 std``.
    * ``"neg_interval_coverage_error"``: minus
      :func:`interval_coverage_error`, ``|empirical coverage - 0.95|`` of
      the same interval; ``make_probabilistic_scorer(interval_coverage_error,
      response="interval", coverage=0.9)`` scores another level.
    * ``"neg_regression_calibration_error"``:
      :func:`regression_calibration_error` of the Gaussian;
    * ``"neg_miscalibration_area"``: :func:`miscalibration_area` of the
      Gaussian;
    * ``"neg_expected_calibration_error"``: :func:`expected_calibration_error`
      of ``estimator.predict_proba(X)``.

    Any other name goes to :func:`sklearn.metrics.get_scorer` (e.g.
    ``"neg_log_loss"``, ``"neg_brier_score"``, ``"r2"``). The skbayes
    names are not known to scikit-learn, so ``GridSearchCV(...,
    scoring="log_predictive_density")`` raises: pass the scorer object this
    function returns, or a dict of them (see :mod:`skbayes.metrics`).

    Parameters
    ----------
    scoring : str or callable
        A scorer name, or a scorer callable (returned unchanged by
        scikit-learn's convention).

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y) -> float``, picklable; a fresh copy for
        skbayes names.

    Raises
    ------
    ValueError
        If the name is neither a skbayes nor a scikit-learn scorer.

    Examples
    --------
    >>> from sklearn.linear_model import BayesianRidge
    >>> from skbayes.metrics import get_scorer
    >>> X, y = [[0.0], [1.0], [2.0], [3.0]], [0.1, 0.9, 2.1, 2.9]
    >>> scorer = get_scorer("log_predictive_density")
    >>> scorer
    get_scorer('log_predictive_density')
    >>> round(scorer(BayesianRidge().fit(X, y), X, y), 2)
    0.9
    """
    if isinstance(scoring, str) and scoring in _SCORERS:
        return copy.deepcopy(_SCORERS[scoring])
    if isinstance(scoring, str) and scoring not in _sklearn_get_scorer_names():
        raise ValueError(
            f"{scoring!r} is not a valid scoring value. Use "
            "skbayes.metrics.get_scorer_names() to get the valid names."
        )
    return _sklearn_get_scorer(scoring)


def get_scorer_names(*, probabilistic_only=False):
    """Names accepted by :func:`get_scorer`.

    Parameters
    ----------
    probabilistic_only : bool, default=False
        Only the skbayes scorers, not scikit-learn's.

    Returns
    -------
    names : list of str
        Sorted.
    """
    names = set(_SCORERS)
    if not probabilistic_only:
        names.update(_sklearn_get_scorer_names())
    return sorted(names)
