"""Plotting displays of the probabilistic metrics (see skbayes.metrics).

Each display follows scikit-learn's visualisation API
(:class:`~sklearn.calibration.CalibrationDisplay`,
:class:`~sklearn.metrics.PredictionErrorDisplay`): the class methods
``from_estimator`` and ``from_predictions`` compute the arrays with the
metric functions of :mod:`skbayes.metrics`, store them as public attributes,
and call :meth:`plot`, which draws on a matplotlib Axes and stores it
(``ax_``), its figure (``figure_``) and the artists. matplotlib is the
optional ``plot`` extra, imported only when a display draws.
"""

from numbers import Integral

import numpy as np
import torch
from scipy.stats import norm
from sklearn.base import is_classifier
from sklearn.pipeline import Pipeline
from sklearn.utils import _safe_indexing
from sklearn.utils.validation import check_is_fitted

from .._docstrings import fill_doc
from .._uncertainty import entropy
from ._classification import _bin_means, _ece, _reliability_bins
from ._regression import (
    _CALIBRATION_METHODS,
    _area_between,
    _calibration_scores,
    _expected_levels,
    _observed_fractions,
    interval_coverage,
)
from ._scorer import _accepts, _step_with
from ._validation import _as_2d, _as_float_array, _check_coverage, _check_same_shape

__all__ = [
    "PredictionIntervalDisplay",
    "RegressionCalibrationDisplay",
    "ReliabilityDisplay",
    "TrainingCurveDisplay",
]

# The per-row measures of ClassifierUncertaintyMixin.predict_uncertainty.
_CLASSIFIER_MEASURES = ("predictive_entropy", "expected_entropy", "mutual_information", "variation_ratio")
_MEASURE_LABELS = {
    "predictive_entropy": "predictive entropy (nats)",
    "expected_entropy": "expected entropy (nats)",
    "mutual_information": "mutual information (nats)",
    "variation_ratio": "variation ratio",
}


# ------------------------------------------------------------------ helpers
def _pyplot(caller):
    """``matplotlib.pyplot``, or an ImportError that says how to install it."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(
            f'{caller} requires matplotlib, the optional "plot" extra of skbayes; '
            'install it with: pip install "skbayes[plot]"'
        ) from exc
    return plt


def _axes(ax, caller):
    """``ax``, or the Axes of a new figure when ax is None."""
    plt = _pyplot(caller)
    if ax is None:
        _, ax = plt.subplots()
    return ax


def _final_step(estimator):
    """The last step of a (nested) Pipeline, else the estimator itself."""
    while isinstance(estimator, Pipeline):
        estimator = estimator.steps[-1][1]
    return estimator


def _estimator_name(estimator):
    return type(_final_step(estimator)).__name__


def _check_regressor(estimator, caller):
    if is_classifier(estimator):
        raise ValueError(
            f"{caller} needs a regressor; got the classifier {_estimator_name(estimator)}. "
            "Use ReliabilityDisplay for classifiers."
        )
    check_is_fitted(estimator)


def _predict_with_std(estimator, X, caller):
    """``estimator.predict(X, return_std=True)``, or a ValueError when predict has no return_std."""
    if not _accepts(_final_step(estimator).predict, "return_std"):
        raise ValueError(
            f"{caller}.from_estimator needs a regressor with predict(X, return_std=True) "
            f"(or predict_interval / predict_uncertainty); {_estimator_name(estimator)}.predict "
            "takes no return_std."
        )
    return estimator.predict(X, return_std=True)


def _check_one_output(name, a):
    if a.shape[1] != 1:
        raise ValueError(f"{name} must have one output, shape (n_samples,); got shape {a.shape}. Plot one column.")
    return a[:, 0]


def _check_nonnegative(a, name, shape):
    a = _as_2d(_as_float_array(a, name)) if np.ndim(a) else np.full(shape, float(a))
    if a.shape != shape:
        raise ValueError(f"{name} must have the shape of y_pred {shape} (or be a scalar); got {a.shape}.")
    if not (np.isfinite(a).all() and (a >= 0).all()):
        raise ValueError(f"{name} must be finite and non-negative; its minimum is {np.nanmin(a)!r}.")
    return a


def _legend_has(ax, label):
    return label in ax.get_legend_handles_labels()[1]


# ------------------------------------------------ regression calibration curve
def _interval_calibration_curve(step, X, y, n_levels, method):
    """Calibration curve of the estimator's own predictive from ``predict_interval``.

    ``"central"``: the fraction of y inside ``predict_interval(X,
    coverage=p)`` for each level p. ``"quantile"``: the fraction of y at or
    below the p-quantile, the lower end of the central interval of coverage
    1 - 2p when p < 1/2 and the upper end of that of coverage 2p - 1 when
    p > 1/2.
    """
    if method not in _CALIBRATION_METHODS:
        raise ValueError(f"method must be one of {_CALIBRATION_METHODS}; got {method!r}.")
    expected = _expected_levels(n_levels)
    observed = np.empty_like(expected)
    if method == "quantile" and np.any(expected == 0.5):
        raise ValueError(
            "method='quantile' through predict_interval needs an even n_levels: the level 1/2 (the "
            f"median) is not an end of a central interval; got n_levels={n_levels}."
        )
    for j, p in enumerate(expected):
        if method == "central":
            observed[j] = interval_coverage(y, *step.predict_interval(X, coverage=p))
        else:
            lower, upper = step.predict_interval(X, coverage=abs(2.0 * p - 1.0))
            y_true, quantile = _check_same_shape(y, "y", quantile=lower if p < 0.5 else upper)
            observed[j] = np.mean(y_true <= quantile)
    return expected, observed


@fill_doc
class RegressionCalibrationDisplay:
    r"""Calibration curve of a regressor's predictive distribution.

    For each nominal level p, the observed fraction of the observations that
    fall in the level-p predictive set ([1]_):

    * ``method="central"`` (default): inside the central interval of
      coverage p, :math:`\mu_i \pm \Phi^{-1}((1 + p)/2) \sigma_i` for a
      Gaussian predictive;
    * ``method="quantile"``: at or below the predicted p-quantile.

    Calibrated predictions lie on the diagonal. For ``"central"``, a curve
    below it means over-confident (too narrow) intervals, above it
    under-confident (too wide) ones. Multi-output entries are pooled. Use
    :meth:`from_estimator` or :meth:`from_predictions` to build it; see
    :func:`~skbayes.metrics.regression_calibration_curve`.

    Parameters
    ----------
    expected : ndarray of shape (n_levels,)
        Nominal levels p, increasing, in (0, 1).
    observed : ndarray of shape (n_levels,)
        Observed fractions, in [0, 1].
    method : {"central", "quantile"}, default="central"
        Which predictive sets the levels are of (sets the axis labels).
    miscalibration_area : float, default=None
        Area between the curve and the diagonal, shown in the legend label.
    estimator_name : str, default=None
        Name of the curve in the legend.

    Attributes
    ----------
    line_ : matplotlib Line2D
        The calibration curve.
    ref_line_ : matplotlib Line2D or None
        The diagonal, None when not drawn (``ref_line=False``, or already
        on the Axes).
    ax_ : matplotlib Axes
        Axes with the curve.
    figure_ : matplotlib Figure
        Figure holding ``ax_``.

    See Also
    --------
    skbayes.metrics.regression_calibration_curve : The arrays of the curve.
    skbayes.metrics.miscalibration_area : The area in the legend.
    PredictionIntervalDisplay : The intervals themselves against the truth.

    References
    ----------
    %(ref_kuleshov2018)s

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from skbayes.metrics import RegressionCalibrationDisplay
    >>> rng = np.random.default_rng(0)
    >>> y_pred = rng.normal(size=500)
    >>> y_true = y_pred + rng.normal(size=500)  # the truth is N(y_pred, 1)
    >>> display = RegressionCalibrationDisplay.from_predictions(y_true, y_pred, y_std=0.5, n_levels=4)
    >>> display.expected
    array([0.125, 0.375, 0.625, 0.875])
    >>> bool((display.observed < display.expected).all())  # too narrow: over-confident
    True
    """

    def __init__(self, expected, observed, *, method="central", miscalibration_area=None, estimator_name=None):
        self.expected = expected
        self.observed = observed
        self.method = method
        self.miscalibration_area = miscalibration_area
        self.estimator_name = estimator_name

    def plot(self, ax=None, *, name=None, ref_line=True, show_area=True, **kwargs):
        """Draw the curve and the diagonal.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes to draw on; None makes a new figure.
        name : str, default=None
            Legend name of the curve; defaults to ``estimator_name``.
        ref_line : bool, default=True
            Draw the diagonal (once per Axes: not again when a curve is
            added to an Axes that already has it).
        show_area : bool, default=True
            Add ``miscalibration_area`` to the legend label (when known).
        **kwargs : dict
            Keyword arguments of ``matplotlib.axes.Axes.plot`` for the curve.

        Returns
        -------
        display : RegressionCalibrationDisplay
            This object, with ``ax_``, ``figure_``, ``line_`` and
            ``ref_line_`` set.

        Raises
        ------
        ImportError
            If matplotlib is not installed.
        """
        ax = _axes(ax, "RegressionCalibrationDisplay.plot")
        label = name if name is not None else (self.estimator_name or "predictive")
        if show_area and self.miscalibration_area is not None:
            label = f"{label} (miscalibration area = {self.miscalibration_area:.3f})"
        self.ref_line_ = None
        if ref_line and not _legend_has(ax, "perfectly calibrated"):
            (self.ref_line_,) = ax.plot([0, 1], [0, 1], "k:", label="perfectly calibrated")
        (self.line_,) = ax.plot(self.expected, self.observed, **{"marker": "o", "label": label, **kwargs})
        if self.method == "central":
            xlabel, ylabel = "nominal coverage of the central interval", "observed fraction inside"
        else:
            xlabel, ylabel = "quantile level p", "observed fraction below the p-quantile"
        ax.set(xlabel=xlabel, ylabel=ylabel, xlim=(-0.02, 1.02), ylim=(-0.02, 1.02))
        ax.legend(loc="upper left")
        self.ax_, self.figure_ = ax, ax.figure
        return self

    @classmethod
    def from_predictions(
        cls, y_true, y_pred, *, y_std, n_levels=20, method="central", name=None, ref_line=True, show_area=True,
        ax=None, **kwargs,
    ):
        """Calibration curve of the Gaussian predictions N(y_pred, y_std**2).

        ``expected, observed`` are
        :func:`~skbayes.metrics.regression_calibration_curve` and the area
        in the legend is the exact :func:`~skbayes.metrics.miscalibration_area`.

        Parameters
        ----------
        y_true : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Observed targets.
        y_pred : array-like of the shape of y_true
            Predictive means.
        y_std : array-like of the shape of y_true, or float
            Predictive standard deviations > 0.
        n_levels : int, default=20
            Number of levels, the midpoints ``(j + 0.5) / n_levels`` of an
            even grid on (0, 1).
        method : {"central", "quantile"}, default="central"
            Central intervals or quantiles (see the class description).
        name : str, default=None
            Legend name of the curve.
        ref_line : bool, default=True
            Draw the diagonal.
        show_area : bool, default=True
            Show the miscalibration area in the legend.
        ax : matplotlib Axes, default=None
            Axes to draw on; None makes a new figure.
        **kwargs : dict
            Keyword arguments of ``matplotlib.axes.Axes.plot`` for the curve.

        Returns
        -------
        display : RegressionCalibrationDisplay

        Raises
        ------
        ValueError
            If the shapes differ, an input holds NaN or inf, y_std <= 0,
            n_levels < 1 or method is unknown.
        ImportError
            If matplotlib is not installed.
        """
        # regression_calibration_curve and miscalibration_area, from one computation of the scores
        expected = _expected_levels(n_levels)
        scores = np.sort(_calibration_scores(y_true, y_pred, y_std, method))
        observed, area = _observed_fractions(scores, expected), _area_between(scores)
        display = cls(expected, observed, method=method, miscalibration_area=area, estimator_name=name)
        return display.plot(ax=ax, ref_line=ref_line, show_area=show_area, **kwargs)

    @classmethod
    def from_estimator(
        cls, estimator, X, y, *, n_levels=20, method="central", name=None, ref_line=True, show_area=True,
        ax=None, **kwargs,
    ):
        """Calibration curve of a fitted regressor's own predictive distribution.

        When the estimator (or the last step of a Pipeline, on X transformed
        through the other steps) has ``predict_interval(X, coverage=...)``,
        the curve is that of its own predictive, a mixture or Student-t
        one included: for ``"central"`` the fraction of y inside
        ``predict_interval(X, coverage=p)``
        (:func:`~skbayes.metrics.interval_coverage`), for ``"quantile"`` the
        fraction at or below the p-quantile, the lower end of the central
        interval of coverage 1 - 2p (p < 1/2) or the upper end of that of
        coverage 2p - 1 (p > 1/2); one ``predict_interval`` call per level.
        The area in the legend is then the midpoint-rule estimate
        ``mean(|observed - expected|)`` over the levels. Otherwise the curve
        is that of the Gaussian of ``predict(X, return_std=True)``, as in
        :meth:`from_predictions`.

        Parameters
        ----------
        estimator : fitted regressor or Pipeline ending in one
            With ``predict_interval(X, coverage=...)`` or
            ``predict(X, return_std=True)``.
        X : array-like of shape (n_samples, n_features)
            Inputs.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Observed targets.
        n_levels : int, default=20
            Number of levels (even for ``method="quantile"`` through
            ``predict_interval``).
        method : {"central", "quantile"}, default="central"
            Central intervals or quantiles.
        name : str, default=None
            Legend name; defaults to the class name of the (last step's)
            estimator.
        ref_line : bool, default=True
            Draw the diagonal.
        show_area : bool, default=True
            Show the miscalibration area in the legend.
        ax : matplotlib Axes, default=None
            Axes to draw on; None makes a new figure.
        **kwargs : dict
            Keyword arguments of ``matplotlib.axes.Axes.plot`` for the curve.

        Returns
        -------
        display : RegressionCalibrationDisplay

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If the estimator is not fitted.
        ValueError
            If the estimator is a classifier or has neither
            ``predict_interval`` nor ``predict(X, return_std=True)``, the
            shapes differ, n_levels < 1, method is unknown, or
            ``method="quantile"`` through ``predict_interval`` with an odd
            n_levels.
        ImportError
            If matplotlib is not installed.
        """
        _check_regressor(estimator, "RegressionCalibrationDisplay")
        name = _estimator_name(estimator) if name is None else name
        step, Xt = _step_with(estimator, X, "predict_interval")
        if step is None or not _accepts(step.predict_interval, "coverage"):
            y_pred, y_std = _predict_with_std(estimator, X, "RegressionCalibrationDisplay")
            return cls.from_predictions(
                y, y_pred, y_std=y_std, n_levels=n_levels, method=method, name=name, ref_line=ref_line,
                show_area=show_area, ax=ax, **kwargs,
            )
        expected, observed = _interval_calibration_curve(step, Xt, y, n_levels, method)
        area = float(np.mean(np.abs(observed - expected)))
        display = cls(expected, observed, method=method, miscalibration_area=area, estimator_name=name)
        return display.plot(ax=ax, ref_line=ref_line, show_area=show_area, **kwargs)


# --------------------------------------------------------- prediction intervals
class PredictionIntervalDisplay:
    r"""Prediction intervals against the truth, epistemic and total bands shaded apart.

    With z the (1 + coverage) / 2 standard normal quantile (1.96 for
    coverage=0.95), the display shades two bands around the predictive mean:

    * the inner band ``y_pred -/+ z * epistemic_std`` (when epistemic_std
      is known): the model's (epistemic) uncertainty alone;
    * the outer band ``y_pred -/+ z * y_std``, with the total predictive
      std ``y_std = sqrt(epistemic_std**2 + aleatoric_std**2)``: the
      central interval of nominal coverage ``coverage`` of the Gaussian
      with the predictive mean and std. The part of it outside the inner
      band is what the observation noise (aleatoric uncertainty) adds;
      since variances, not stds, add, it is not a band of width
      ``z * aleatoric_std``.

    The mean is a line and the observations are points. The x-axis is
    either one input feature or, when none is given, the rank of the
    prediction (rows sorted by y_pred, so the mean is an increasing line).
    All arrays are stored sorted by x.

    Parameters
    ----------
    x : ndarray of shape (n_samples,)
        Positions on the x-axis, increasing.
    y_true, y_pred, y_std : ndarray of shape (n_samples,)
        Observations, predictive means and total predictive stds, in the
        order of x.
    epistemic_std : ndarray of shape (n_samples,), default=None
        Epistemic stds, in the order of x; None for no inner band.
    aleatoric_std : ndarray of shape (n_samples,), default=None
        Aleatoric stds, in the order of x (stored for reference; the bands
        use y_std and epistemic_std).
    coverage : float, default=0.95
        Nominal coverage c of the bands, in (0, 1).
    x_label : str, default=None
        Label of the x-axis.
    estimator_name : str, default=None
        Name shown in the legend of the mean line.

    Attributes
    ----------
    z : float
        ``scipy.stats.norm.ppf((1 + coverage) / 2)``.
    lower, upper : ndarray of shape (n_samples,)
        Edges of the outer (total) band, ``y_pred -/+ z * y_std``.
    epistemic_lower, epistemic_upper : ndarray of shape (n_samples,) or None
        Edges of the inner band, ``y_pred -/+ z * epistemic_std``.
    order : ndarray of int of shape (n_samples,) or None
        Set by ``from_*``: the permutation that sorted the input rows
        (``display.y_true == y_true[display.order]``).
    line_ : matplotlib Line2D
        The predictive mean.
    scatter_ : matplotlib PathCollection
        The observations.
    band_ : matplotlib PolyCollection
        The outer (total) band.
    epistemic_band_ : matplotlib PolyCollection or None
        The inner (epistemic) band.
    ax_ : matplotlib Axes
    figure_ : matplotlib Figure

    Raises
    ------
    ValueError
        If coverage is not in (0, 1).

    See Also
    --------
    RegressionCalibrationDisplay : Whether the intervals' coverage is right
        at every level.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from skbayes.metrics import PredictionIntervalDisplay
    >>> x = np.linspace(0.0, 1.0, 5)
    >>> display = PredictionIntervalDisplay.from_predictions(
    ...     np.sin(x), x, epistemic_std=[0.1, 0.1, 0.2, 0.3, 0.1], aleatoric_std=0.2, x=x, coverage=0.9
    ... )
    >>> round(display.z, 4)
    1.6449
    >>> np.allclose(display.upper, x + display.z * np.hypot([0.1, 0.1, 0.2, 0.3, 0.1], 0.2))
    True
    """

    def __init__(
        self, x, y_true, y_pred, y_std, *, epistemic_std=None, aleatoric_std=None, coverage=0.95, x_label=None,
        estimator_name=None,
    ):
        self.x = x
        self.y_true = y_true
        self.y_pred = y_pred
        self.y_std = y_std
        self.epistemic_std = epistemic_std
        self.aleatoric_std = aleatoric_std
        self.coverage = coverage
        self.x_label = x_label
        self.estimator_name = estimator_name
        self.order = None
        self.z = float(norm.ppf(0.5 + _check_coverage(coverage) / 2.0))
        self.lower, self.upper = y_pred - self.z * y_std, y_pred + self.z * y_std
        self.epistemic_lower = self.epistemic_upper = None
        if epistemic_std is not None:
            self.epistemic_lower = y_pred - self.z * epistemic_std
            self.epistemic_upper = y_pred + self.z * epistemic_std

    def plot(self, ax=None, *, name=None, line_kwargs=None, scatter_kwargs=None, band_kwargs=None,
             epistemic_band_kwargs=None):
        """Draw the bands, the mean and the observations.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes to draw on; None makes a new figure.
        name : str, default=None
            Legend name of the mean; defaults to ``estimator_name``.
        line_kwargs, scatter_kwargs, band_kwargs, epistemic_band_kwargs : dict, default=None
            Keyword arguments of ``Axes.plot`` (mean), ``Axes.scatter``
            (observations) and ``Axes.fill_between`` (outer and inner
            bands), over the defaults.

        Returns
        -------
        display : PredictionIntervalDisplay
            This object, with the artists, ``ax_`` and ``figure_`` set.

        Raises
        ------
        ImportError
            If matplotlib is not installed.
        """
        ax = _axes(ax, "PredictionIntervalDisplay.plot")
        percent = f"{100 * self.coverage:g}%"
        self.band_ = ax.fill_between(
            self.x, self.lower, self.upper,
            **{"alpha": 0.25, "color": "C0", "linewidth": 0,
               "label": f"{percent} total: mean ± {self.z:.2f} std", **(band_kwargs or {})},
        )
        self.epistemic_band_ = None
        if self.epistemic_std is not None:
            self.epistemic_band_ = ax.fill_between(
                self.x, self.epistemic_lower, self.epistemic_upper,
                **{"alpha": 0.45, "color": "C0", "linewidth": 0,
                   "label": f"{percent} epistemic: mean ± {self.z:.2f} epistemic std",
                   **(epistemic_band_kwargs or {})},
            )
        label = name if name is not None else (self.estimator_name or "predictive")
        (self.line_,) = ax.plot(self.x, self.y_pred, **{"color": "C0", "label": f"{label} mean", **(line_kwargs or {})})
        self.scatter_ = ax.scatter(
            self.x, self.y_true, **{"s": 10, "color": "k", "alpha": 0.7, "label": "observed", **(scatter_kwargs or {})}
        )
        ax.set(xlabel=self.x_label or "rank of the prediction", ylabel="y")
        ax.legend(loc="best")
        self.ax_, self.figure_ = ax, ax.figure
        return self

    @classmethod
    def from_predictions(
        cls, y_true, y_pred, *, y_std=None, epistemic_std=None, aleatoric_std=None, x=None, coverage=0.95,
        x_label=None, name=None, ax=None, **kwargs,
    ):
        """Prediction intervals from the predictive means and stds.

        The total std is y_std when given, else ``sqrt(epistemic_std**2 +
        aleatoric_std**2)``; the bands are described in the class
        docstring.

        Parameters
        ----------
        y_true : array-like of shape (n_samples,)
            Observed targets (one output; an (n_samples, 1) array is
            accepted).
        y_pred : array-like of shape (n_samples,)
            Predictive means.
        y_std : array-like of shape (n_samples,) or float, default=None
            Total predictive stds (noise included), >= 0. Required unless
            both epistemic_std and aleatoric_std are given.
        epistemic_std : array-like of shape (n_samples,) or float, default=None
            Epistemic stds >= 0: the inner band. Without it, only the total
            band is drawn.
        aleatoric_std : array-like of shape (n_samples,) or float, default=None
            Aleatoric (noise) stds >= 0, composing the total std with
            epistemic_std; only when y_std is None.
        x : array-like of shape (n_samples,), default=None
            Position of each row on the x-axis (e.g. a 1-D input feature);
            None sorts the rows by y_pred and plots them against their rank
            0, ..., n_samples - 1.
        coverage : float, default=0.95
            Nominal coverage of the bands, in (0, 1).
        x_label : str, default=None
            Label of the x-axis; defaults to "x" when x is given, else "rank
            of the prediction".
        name : str, default=None
            Legend name of the mean.
        ax : matplotlib Axes, default=None
            Axes to draw on; None makes a new figure.
        **kwargs : dict
            ``line_kwargs``, ``scatter_kwargs``, ``band_kwargs`` or
            ``epistemic_band_kwargs`` of :meth:`plot`.

        Returns
        -------
        display : PredictionIntervalDisplay

        Raises
        ------
        ValueError
            If the shapes differ or hold more than one output, an input
            holds NaN or inf, a std is negative, y_std is missing without
            both epistemic_std and aleatoric_std, y_std and aleatoric_std
            are both given, or coverage is not in (0, 1).
        ImportError
            If matplotlib is not installed.
        """
        y_true, y_pred = _check_same_shape(y_true, "y_true", y_pred=y_pred)
        shape = y_pred.shape
        if y_std is None:
            if epistemic_std is None or aleatoric_std is None:
                raise ValueError("Pass y_std (the total predictive std), or both epistemic_std and aleatoric_std.")
            epistemic_std = _check_nonnegative(epistemic_std, "epistemic_std", shape)
            aleatoric_std = _check_nonnegative(aleatoric_std, "aleatoric_std", shape)
            y_std = np.sqrt(epistemic_std**2 + aleatoric_std**2)
        elif aleatoric_std is not None:
            raise ValueError(
                "aleatoric_std only composes the total std when y_std is None; pass y_std or aleatoric_std, not both."
            )
        else:
            y_std = _check_nonnegative(y_std, "y_std", shape)
            if epistemic_std is not None:
                epistemic_std = _check_nonnegative(epistemic_std, "epistemic_std", shape)
        columns = {"y_true": y_true, "y_pred": y_pred, "y_std": y_std, "epistemic_std": epistemic_std,
                   "aleatoric_std": aleatoric_std}
        columns = {key: None if a is None else _check_one_output(key, a) for key, a in columns.items()}
        if x is None:
            order = np.argsort(columns["y_pred"], kind="stable")
            x = np.arange(order.size, dtype=np.float64)
        else:
            x = _check_one_output("x", _as_2d(_as_float_array(x, "x")))
            if x.shape[0] != y_pred.shape[0]:
                raise ValueError(f"x must have one entry per row of y_pred ({y_pred.shape[0]}); got {x.shape[0]}.")
            order = np.argsort(x, kind="stable")
            x = x[order]
            x_label = "x" if x_label is None else x_label
        columns = {key: None if a is None else a[order] for key, a in columns.items()}
        display = cls(x, **columns, coverage=coverage, x_label=x_label, estimator_name=name)
        display.order = order
        return display.plot(ax=ax, **kwargs)

    @classmethod
    def from_estimator(cls, estimator, X, y, *, feature=None, coverage=0.95, name=None, ax=None, **kwargs):
        """Prediction intervals of a fitted regressor.

        The means and stds come from ``predict_uncertainty(X)`` when the
        estimator (or the last step of a Pipeline, on X transformed through
        the other steps) has it (``mean``, ``epistemic_std``,
        ``aleatoric_std``: both bands), else from ``predict(X,
        return_std=True)`` (the total band only).

        Parameters
        ----------
        estimator : fitted regressor or Pipeline ending in one
            With ``predict_uncertainty`` or ``predict(X, return_std=True)``;
            one output.
        X : array-like of shape (n_samples, n_features)
            Inputs.
        y : array-like of shape (n_samples,)
            Observed targets.
        feature : int or str, default=None
            Column of X (index, or name for a DataFrame) on the x-axis; None
            plots the rows sorted by prediction against their rank.
        coverage : float, default=0.95
            Nominal coverage of the bands, in (0, 1).
        name : str, default=None
            Legend name; defaults to the class name of the (last step's)
            estimator.
        ax : matplotlib Axes, default=None
            Axes to draw on; None makes a new figure.
        **kwargs : dict
            ``line_kwargs``, ``scatter_kwargs``, ``band_kwargs`` or
            ``epistemic_band_kwargs`` of :meth:`plot`.

        Returns
        -------
        display : PredictionIntervalDisplay

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If the estimator is not fitted.
        ValueError
            If the estimator is a classifier or has neither
            ``predict_uncertainty`` nor ``predict(X, return_std=True)``, the
            shapes differ or hold more than one output, or coverage is not
            in (0, 1).
        ImportError
            If matplotlib is not installed.
        """
        _check_regressor(estimator, "PredictionIntervalDisplay")
        name = _estimator_name(estimator) if name is None else name
        step, Xt = _step_with(estimator, X, "predict_uncertainty")
        uncertainty = step.predict_uncertainty(Xt) if step is not None else None
        if uncertainty is not None and {"mean", "epistemic_std", "aleatoric_std"} <= set(uncertainty):
            stds = {"epistemic_std": uncertainty.epistemic_std, "aleatoric_std": uncertainty.aleatoric_std}
            y_pred = uncertainty.mean
        else:
            y_pred, y_std = _predict_with_std(estimator, X, "PredictionIntervalDisplay")
            stds = {"y_std": y_std}
        x, x_label = None, None
        if feature is not None:
            x = _safe_indexing(X, feature, axis=1)
            columns = getattr(X, "columns", None)
            if isinstance(feature, str):
                x_label = feature
            elif columns is not None and isinstance(feature, Integral):
                x_label = str(columns[feature])
            else:
                x_label = f"feature {feature}"
        return cls.from_predictions(
            y, y_pred, **stds, x=x, coverage=coverage, x_label=x_label, name=name, ax=ax, **kwargs
        )


# ------------------------------------------------------------ reliability diagram
def _per_row_measures(uncertainty, n_rows):
    """Validate the mapping of per-row uncertainty measures."""
    measures = {}
    for key, values in (uncertainty or {}).items():
        values = _as_float_array(values, str(key))
        if values.ndim != 1 or values.shape[0] != n_rows:
            raise ValueError(
                f"uncertainty[{key!r}] must have shape (n_samples,) = ({n_rows},); got {values.shape}."
            )
        measures[str(key)] = values
    return measures


def _classifier_measures(estimator, X, measures):
    """Class probabilities and the chosen per-row measures of a fitted classifier."""
    step, Xt = _step_with(estimator, X, "predict_uncertainty")
    if step is not None:
        result = step.predict_uncertainty(Xt)
        y_proba = result.proba
        available = {key: result[key] for key in _CLASSIFIER_MEASURES if key in result}
    elif hasattr(estimator, "predict_proba"):
        y_proba = estimator.predict_proba(X)
        available = {"predictive_entropy": entropy(torch.as_tensor(y_proba, dtype=torch.float64)).numpy()}
    else:
        raise ValueError(
            f"ReliabilityDisplay.from_estimator needs a classifier with predict_proba or predict_uncertainty; "
            f"{_estimator_name(estimator)} has neither."
        )
    if isinstance(measures, str) and measures == "auto":
        measures = [key for key in ("predictive_entropy", "mutual_information") if key in available]
    missing = [key for key in measures if key not in available]
    if missing:
        raise ValueError(
            f"{_estimator_name(estimator)} does not give the measures {missing}; available: {sorted(available)} "
            "(the measures beyond predictive_entropy need predict_uncertainty)."
        )
    return y_proba, {key: available[key] for key in measures}


@fill_doc
class ReliabilityDisplay:
    """Reliability diagram of a classifier, with its uncertainty per confidence bin.

    The predictions are binned by confidence, the largest class
    probability; the curve shows each non-empty bin's accuracy of the
    arg-max class against its mean confidence
    (:func:`~skbayes.metrics.reliability_diagram`, [1]_), and the legend the
    top-label expected calibration error
    (:func:`~skbayes.metrics.expected_calibration_error`). A calibrated
    classifier lies on the diagonal; below it is over-confident.

    Per-row uncertainty measures (by default the predictive entropy and
    the mutual information of ``predict_uncertainty``, [Gal2016]_) are
    averaged over the rows of each bin and drawn against the same mean
    confidence on a secondary y-axis: for a Bayesian classifier the total
    uncertainty (entropy) should fall as confidence rises, and the
    epistemic part (mutual information) shows where the posterior draws
    disagree.

    Parameters
    ----------
    bin_edges : ndarray of shape (n_bins' + 1,)
        Increasing bin edges, n_bins' the number of bins.
    confidence, accuracy : ndarray of shape (n_bins',)
        Mean confidence and accuracy per bin (NaN for an empty bin).
    count : ndarray of int of shape (n_bins',)
        Predictions per bin.
    ece : float
        Expected calibration error over these bins.
    uncertainty : dict of str to ndarray of shape (n_bins',), default=None
        Mean of each per-row measure over the rows of each bin (NaN for an
        empty bin).
    estimator_name : str, default=None
        Name of the curve in the legend.

    Attributes
    ----------
    line_ : matplotlib Line2D
        Accuracy against confidence over the non-empty bins.
    ref_line_ : matplotlib Line2D or None
        The diagonal (None when not drawn).
    uncertainty_lines_ : dict of str to matplotlib Line2D
        One line per measure, on ``uncertainty_ax_``.
    uncertainty_ax_ : matplotlib Axes or None
        The secondary y-axis of the measures (``ax_.twinx()``); None
        without measures.
    ax_ : matplotlib Axes
    figure_ : matplotlib Figure

    See Also
    --------
    skbayes.metrics.reliability_diagram : The per-bin arrays.
    skbayes.metrics.expected_calibration_error : The ECE in the legend.

    References
    ----------
    .. [1] C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger, "On calibration of
       modern neural networks", ICML 2017.
    %(ref_gal2016)s

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from skbayes.metrics import ReliabilityDisplay
    >>> y_true = [0, 1, 1, 0, 1, 1]
    >>> y_proba = [0.9, 0.6, 0.8, 0.3, 0.2, 0.7]  # P(class 1)
    >>> display = ReliabilityDisplay.from_predictions(
    ...     y_true, y_proba, uncertainty={"spread": [0.1, 0.5, 0.2, 0.1, 0.4, 0.3]}, n_bins=4
    ... )
    >>> display.count  # confidences 0.9, 0.6, 0.8, 0.7, 0.8, 0.7
    array([0, 0, 3, 3])
    >>> display.uncertainty["spread"][2:].round(4)  # means over rows 1, 3, 5 and rows 0, 2, 4
    array([0.3   , 0.2333])
    """

    def __init__(self, bin_edges, confidence, accuracy, count, *, ece, uncertainty=None, estimator_name=None):
        self.bin_edges = bin_edges
        self.confidence = confidence
        self.accuracy = accuracy
        self.count = count
        self.ece = ece
        self.uncertainty = {} if uncertainty is None else uncertainty
        self.estimator_name = estimator_name

    def plot(self, ax=None, *, name=None, ref_line=True, **kwargs):
        """Draw the reliability curve, the diagonal and the uncertainty measures.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes to draw on; None makes a new figure.
        name : str, default=None
            Legend name of the curve; defaults to ``estimator_name``.
        ref_line : bool, default=True
            Draw the diagonal (once per Axes).
        **kwargs : dict
            Keyword arguments of ``matplotlib.axes.Axes.plot`` for the curve.

        Returns
        -------
        display : ReliabilityDisplay
            This object, with the artists, ``ax_`` and ``figure_`` set.

        Raises
        ------
        ImportError
            If matplotlib is not installed.
        """
        ax = _axes(ax, "ReliabilityDisplay.plot")
        filled = self.count > 0
        label = name if name is not None else (self.estimator_name or "classifier")
        self.ref_line_ = None
        if ref_line and not _legend_has(ax, "perfectly calibrated"):
            (self.ref_line_,) = ax.plot([0, 1], [0, 1], "k:", label="perfectly calibrated")
        (self.line_,) = ax.plot(
            self.confidence[filled], self.accuracy[filled],
            **{"marker": "s", "label": f"{label} (ECE = {self.ece:.3f})", **kwargs},
        )
        ax.set(xlabel="confidence (mean top-label probability)", ylabel="accuracy")
        ax.set(xlim=(-0.02, 1.02), ylim=(-0.02, 1.02))
        handles, labels = ax.get_legend_handles_labels()
        self.uncertainty_lines_, self.uncertainty_ax_ = {}, None
        if self.uncertainty:
            self.uncertainty_ax_ = ax.twinx()
            for j, (key, values) in enumerate(self.uncertainty.items()):
                (self.uncertainty_lines_[key],) = self.uncertainty_ax_.plot(
                    self.confidence[filled], values[filled], linestyle="--", marker=".", color=f"C{j + 1}",
                    label=f"mean {_MEASURE_LABELS.get(key, key)}",
                )
            self.uncertainty_ax_.set_ylabel("uncertainty (mean over the bin)")
            self.uncertainty_ax_.set_ylim(bottom=0)
            extra_handles, extra_labels = self.uncertainty_ax_.get_legend_handles_labels()
            handles, labels = handles + extra_handles, labels + extra_labels
        ax.legend(handles, labels, loc="upper left")
        self.ax_, self.figure_ = ax, ax.figure
        return self

    @classmethod
    def from_predictions(
        cls, y_true, y_proba, *, uncertainty=None, n_bins=15, strategy="uniform", labels=None, name=None,
        ref_line=True, ax=None, **kwargs,
    ):
        """Reliability diagram from class probabilities and per-row uncertainty measures.

        Parameters
        ----------
        y_true : array-like of shape (n_samples,)
            True labels.
        y_proba : array-like of shape (n_samples, n_classes) or (n_samples,)
            Class probabilities, rows summing to 1; 1-D means binary with
            the probability of ``labels[1]``.
        uncertainty : dict of str to array-like of shape (n_samples,), default=None
            Per-row measures to average per bin, e.g. ``{"predictive_entropy":
            u.predictive_entropy, "mutual_information":
            u.mutual_information}`` with ``u =
            classifier.predict_uncertainty(X)``.
        n_bins : int, default=15
            Number of bins.
        strategy : {"uniform", "quantile"}, default="uniform"
            Equal-width or equal-mass bins.
        labels : array-like of shape (n_classes,), default=None
            The class of each column of y_proba; defaults to the sorted
            distinct values of y_true.
        name : str, default=None
            Legend name of the curve.
        ref_line : bool, default=True
            Draw the diagonal.
        ax : matplotlib Axes, default=None
            Axes to draw on; None makes a new figure.
        **kwargs : dict
            Keyword arguments of ``matplotlib.axes.Axes.plot`` for the curve.

        Returns
        -------
        display : ReliabilityDisplay

        Raises
        ------
        ValueError
            As :func:`~skbayes.metrics.reliability_diagram`, or if a measure
            is not of shape (n_samples,) or holds NaN or inf.
        ImportError
            If matplotlib is not installed.
        """
        diagram, bins = _reliability_bins(y_true, y_proba, n_bins, strategy, labels)
        measures = _per_row_measures(uncertainty, bins.shape[0])
        ece = _ece(diagram)  # expected_calibration_error of the same bins, without binning twice
        means = {key: _bin_means(bins, values, diagram.count) for key, values in measures.items()}
        display = cls(
            diagram.bin_edges, diagram.confidence, diagram.accuracy, diagram.count, ece=ece, uncertainty=means,
            estimator_name=name,
        )
        return display.plot(ax=ax, ref_line=ref_line, **kwargs)

    @classmethod
    def from_estimator(
        cls, estimator, X, y, *, measures="auto", n_bins=15, strategy="uniform", name=None, ref_line=True,
        ax=None, **kwargs,
    ):
        """Reliability diagram of a fitted classifier.

        The probabilities and the measures come from one
        ``predict_uncertainty(X)`` call when the classifier (or the last
        step of a Pipeline, on X transformed through the other steps) has
        it; otherwise from ``predict_proba(X)``, whose only measure is the
        entropy of the predicted probabilities (``"predictive_entropy"``).
        The columns are ``estimator.classes_``.

        Parameters
        ----------
        estimator : fitted classifier or Pipeline ending in one
            With ``predict_uncertainty`` or ``predict_proba``.
        X : array-like of shape (n_samples, n_features)
            Inputs.
        y : array-like of shape (n_samples,)
            True labels.
        measures : "auto" or sequence of str, default="auto"
            Names of the per-row measures of ``predict_uncertainty`` to
            show (``"predictive_entropy"``, ``"expected_entropy"``,
            ``"mutual_information"``, ``"variation_ratio"``). ``"auto"``:
            ``predictive_entropy`` and ``mutual_information``, those of
            them available. An empty sequence shows none.
        n_bins : int, default=15
            Number of bins.
        strategy : {"uniform", "quantile"}, default="uniform"
            Equal-width or equal-mass bins.
        name : str, default=None
            Legend name; defaults to the class name of the (last step's)
            estimator.
        ref_line : bool, default=True
            Draw the diagonal.
        ax : matplotlib Axes, default=None
            Axes to draw on; None makes a new figure.
        **kwargs : dict
            Keyword arguments of ``matplotlib.axes.Axes.plot`` for the curve.

        Returns
        -------
        display : ReliabilityDisplay

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If the estimator is not fitted.
        ValueError
            If the estimator is not a classifier, has neither
            ``predict_uncertainty`` nor ``predict_proba``, does not give a
            requested measure, or the inputs are invalid (see
            :meth:`from_predictions`).
        ImportError
            If matplotlib is not installed.
        """
        if not is_classifier(estimator):
            raise ValueError(
                f"ReliabilityDisplay needs a classifier; got {_estimator_name(estimator)}. For a regressor use "
                "RegressionCalibrationDisplay."
            )
        check_is_fitted(estimator)
        y_proba, uncertainty = _classifier_measures(estimator, X, measures)
        return cls.from_predictions(
            y, y_proba, uncertainty=uncertainty, n_bins=n_bins, strategy=strategy, labels=estimator.classes_,
            name=_estimator_name(estimator) if name is None else name, ref_line=ref_line, ax=ax, **kwargs,
        )


# --------------------------------------------------------------- training curves
def _curve(values, name):
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence of floats; got shape {values.shape}.")
    return values


class TrainingCurveDisplay:
    """Training loss and validation score per epoch.

    The loss curve is the estimator's ``loss_curve_`` (the per-datum
    training loss of each epoch, lower is better) against the epoch
    1, ..., n_epochs. The validation scores, ``validation_scores_`` when the
    estimator recorded them (``early_stopping=True``), are a held-out score
    where higher is better (the mean validation log predictive density of
    the Bayesian MLPs, the validation ELBO of the VAE), in other units than
    the loss, so by default they are drawn on a secondary y-axis. When there
    are fewer validation scores than epochs (the VAE scores only after its
    KL warm-up), they belong to the last epochs.

    Parameters
    ----------
    loss_curve : ndarray of shape (n_epochs,)
        Training loss of each epoch.
    validation_scores : ndarray of shape (n_scores,), default=None
        Validation score of each of the last n_scores <= n_epochs epochs.
    estimator_name : str, default=None
        Name in the legend.

    Attributes
    ----------
    epochs : ndarray of int of shape (n_epochs,)
        1, ..., n_epochs.
    validation_epochs : ndarray of int of shape (n_scores,) or None
        The epochs of the validation scores, n_epochs - n_scores + 1, ...,
        n_epochs.
    line_ : matplotlib Line2D
        The loss curve.
    validation_line_ : matplotlib Line2D or None
        The validation scores.
    validation_ax_ : matplotlib Axes or None
        Axes of the validation scores: ``ax_.twinx()``, or ``ax_`` with
        ``secondary_axis=False``.
    ax_ : matplotlib Axes
    figure_ : matplotlib Figure

    Raises
    ------
    ValueError
        If a curve is not 1-D and non-empty, or there are more validation
        scores than epochs.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from skbayes.metrics import TrainingCurveDisplay
    >>> display = TrainingCurveDisplay.from_predictions([3.0, 2.0, 1.5], validation_scores=[-2.5, -2.1])
    >>> display.validation_epochs
    array([2, 3])
    >>> display.line_.get_ydata().tolist()
    [3.0, 2.0, 1.5]
    """

    def __init__(self, loss_curve, *, validation_scores=None, estimator_name=None):
        self.loss_curve = _curve(loss_curve, "loss_curve")
        self.validation_scores = None if validation_scores is None else _curve(validation_scores, "validation_scores")
        self.estimator_name = estimator_name
        n_epochs = self.loss_curve.size
        self.epochs = np.arange(1, n_epochs + 1)
        self.validation_epochs = None
        if self.validation_scores is not None:
            n_scores = self.validation_scores.size
            if n_scores > n_epochs:
                raise ValueError(
                    f"There are more validation scores ({n_scores}) than epochs of the loss curve ({n_epochs})."
                )
            self.validation_epochs = self.epochs[n_epochs - n_scores :]

    def plot(self, ax=None, *, name=None, secondary_axis=True, line_kwargs=None, validation_line_kwargs=None):
        """Draw the loss curve and the validation scores.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes to draw on; None makes a new figure.
        name : str, default=None
            Name in the legend; defaults to ``estimator_name``.
        secondary_axis : bool, default=True
            Draw the validation scores on a secondary y-axis
            (``ax.twinx()``); False draws them on ``ax``.
        line_kwargs, validation_line_kwargs : dict, default=None
            Keyword arguments of ``Axes.plot`` for the loss and the
            validation curves, over the defaults.

        Returns
        -------
        display : TrainingCurveDisplay
            This object, with the artists, ``ax_`` and ``figure_`` set.

        Raises
        ------
        ImportError
            If matplotlib is not installed.
        """
        ax = _axes(ax, "TrainingCurveDisplay.plot")
        name = name if name is not None else self.estimator_name
        prefix = f"{name}: " if name else ""
        (self.line_,) = ax.plot(
            self.epochs, self.loss_curve, **{"color": "C0", "label": f"{prefix}training loss", **(line_kwargs or {})}
        )
        ax.set(xlabel="epoch", ylabel="training loss")
        handles, labels = ax.get_legend_handles_labels()
        self.validation_line_ = self.validation_ax_ = None
        if self.validation_scores is not None:
            self.validation_ax_ = ax.twinx() if secondary_axis else ax
            (self.validation_line_,) = self.validation_ax_.plot(
                self.validation_epochs, self.validation_scores,
                **{"color": "C1", "label": f"{prefix}validation score", **(validation_line_kwargs or {})},
            )
            if secondary_axis:
                self.validation_ax_.set_ylabel("validation score (higher is better)")
                extra_handles, extra_labels = self.validation_ax_.get_legend_handles_labels()
                handles, labels = handles + extra_handles, labels + extra_labels
            else:
                handles, labels = ax.get_legend_handles_labels()
        ax.legend(handles, labels, loc="best")
        self.ax_, self.figure_ = ax, ax.figure
        return self

    @classmethod
    def from_predictions(cls, loss_curve, *, validation_scores=None, name=None, ax=None, **kwargs):
        """Display recorded training curves.

        For this display the "predictions" are the curves an estimator
        recorded while training (its ``loss_curve_`` and
        ``validation_scores_``), e.g. saved from an earlier fit or from a
        model trained elsewhere; the name keeps the scikit-learn pattern.

        Parameters
        ----------
        loss_curve : array-like of shape (n_epochs,)
            Training loss of each epoch.
        validation_scores : array-like of shape (n_scores,), default=None
            Validation score of each of the last n_scores <= n_epochs epochs.
        name : str, default=None
            Name in the legend.
        ax : matplotlib Axes, default=None
            Axes to draw on; None makes a new figure.
        **kwargs : dict
            ``secondary_axis``, ``line_kwargs`` or
            ``validation_line_kwargs`` of :meth:`plot`.

        Returns
        -------
        display : TrainingCurveDisplay

        Raises
        ------
        ValueError
            If a curve is not 1-D and non-empty, or there are more
            validation scores than epochs.
        ImportError
            If matplotlib is not installed.
        """
        display = cls(loss_curve, validation_scores=validation_scores, estimator_name=name)
        return display.plot(ax=ax, **kwargs)

    @classmethod
    def from_estimator(cls, estimator, *, name=None, ax=None, **kwargs):
        """Display the training curves a fitted estimator recorded.

        Parameters
        ----------
        estimator : fitted estimator or Pipeline ending in one
            With ``loss_curve_`` (and ``validation_scores_``, used when not
            None); for a Pipeline, its last step's.
        name : str, default=None
            Name in the legend; defaults to the class name of the (last
            step's) estimator.
        ax : matplotlib Axes, default=None
            Axes to draw on; None makes a new figure.
        **kwargs : dict
            ``secondary_axis``, ``line_kwargs`` or
            ``validation_line_kwargs`` of :meth:`plot`.

        Returns
        -------
        display : TrainingCurveDisplay

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If the estimator is not fitted.
        ValueError
            If the estimator has no ``loss_curve_``.
        ImportError
            If matplotlib is not installed.
        """
        step = _final_step(estimator)
        check_is_fitted(step)
        if not hasattr(step, "loss_curve_"):
            raise ValueError(
                f"TrainingCurveDisplay needs an estimator that records loss_curve_ (one trained by epochs); "
                f"{type(step).__name__} has none."
            )
        return cls.from_predictions(
            step.loss_curve_, validation_scores=getattr(step, "validation_scores_", None),
            name=type(step).__name__ if name is None else name, ax=ax, **kwargs,
        )
