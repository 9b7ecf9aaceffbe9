"""Scorers for GridSearchCV and cross_validate (see skbayes.metrics)."""

import copy
import inspect

from sklearn.metrics import get_scorer as _sklearn_get_scorer
from sklearn.metrics import get_scorer_names as _sklearn_get_scorer_names

from ._classification import expected_calibration_error
from ._regression import (
    crps_gaussian,
    gaussian_nll,
    miscalibration_area,
    regression_calibration_error,
    _gaussian_interval_score,
)

_RESPONSES = ("std", "proba", "samples")


def _accepts(func, name):
    try:
        parameters = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False
    return name in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )


class _ProbabilisticScorer:
    """``scorer(estimator, X, y) -> float``; see :func:`make_probabilistic_scorer`."""

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
        else:
            y_samples = estimator.sample_y(X, **self._response_params)
            value = self._metric(y_true, y_samples, **kwargs)
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
      ``Pipeline`` has no ``sample_y``, so this needs the bare estimator.

    Parameters
    ----------
    metric : callable
        Metric with signature ``metric(y_true, prediction, ..., **kwargs)``
        as above, e.g. :func:`gaussian_nll`, :func:`expected_calibration_error`
        or :func:`crps_ensemble`.
    greater_is_better : bool, default=False
        Whether larger metric values are better. When False (scoring rules
        are losses) the scorer returns the negated metric, scikit-learn's
        ``neg_`` convention, so larger scores are always better.
    response : {"std", "proba", "samples"}, default="std"
        Which predictive output the metric takes.
    response_params : dict, default=None
        Extra keyword arguments of the prediction method. For
        ``"samples"`` it defaults to ``{"n_samples": 100}``.
    **kwargs
        Extra keyword arguments of the metric.

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y) -> float``, picklable when the metric is.

    Raises
    ------
    ValueError
        If metric is not callable or response is unknown.

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
    if response_params is None:
        response_params = {"n_samples": 100} if response == "samples" else {}
    sign = 1.0 if greater_is_better else -1.0
    return _ProbabilisticScorer(metric, sign, response, dict(response_params), kwargs)


def _named_scorer(name, metric, response="std", **kwargs):
    scorer = make_probabilistic_scorer(metric, response=response, **kwargs)
    scorer._name = name
    return scorer


_SCORERS = {
    "neg_gaussian_nll": _named_scorer("neg_gaussian_nll", gaussian_nll),
    "neg_crps": _named_scorer("neg_crps", crps_gaussian),
    "neg_interval_score": _named_scorer("neg_interval_score", _gaussian_interval_score),
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

    skbayes scorers (all negated losses, so larger is better; the regression
    ones evaluate the Gaussian ``N(mean, std**2)`` of
    ``estimator.predict(X, return_std=True)``):

    * ``"neg_gaussian_nll"``: :func:`gaussian_nll`;
    * ``"neg_crps"``: :func:`crps_gaussian`;
    * ``"neg_interval_score"``: :func:`interval_score` of the central 95%
      interval ``mean -/+ 1.96 std``;
    * ``"neg_regression_calibration_error"``:
      :func:`regression_calibration_error`;
    * ``"neg_miscalibration_area"``: :func:`miscalibration_area`;
    * ``"neg_expected_calibration_error"``: :func:`expected_calibration_error`
      of ``estimator.predict_proba(X)``.

    Any other name goes to :func:`sklearn.metrics.get_scorer` (e.g.
    ``"neg_log_loss"``, ``"neg_brier_score"``, ``"r2"``).

    Parameters
    ----------
    scoring : str or callable
        A scorer name, or a scorer callable (returned unchanged by
        scikit-learn's convention).

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y) -> float``; a fresh copy for skbayes names.

    Raises
    ------
    ValueError
        If the name is neither a skbayes nor a scikit-learn scorer.
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
