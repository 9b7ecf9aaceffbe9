"""The calibration curve of a regressor's predictive: :class:`RegressionCalibrationDisplay`."""

import numpy as np

from ..._docstrings import fill_doc
from .._regression import _CALIBRATION_METHODS, _area_between, _calibration_scores, _expected_levels, _observed_fractions, interval_coverage
from .._scorer import _accepts, _step_with
from .._validation import _check_same_shape
from ._base import _Display, _check_regressor, _estimator_name, _predict_with_std

__all__ = ["RegressionCalibrationDisplay"]


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
class RegressionCalibrationDisplay(_Display):
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

    _default_name = "predictive"

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
        ax, label = self._plot_axes(ax, name)
        if show_area and self.miscalibration_area is not None:
            label = f"{label} (miscalibration area = {self.miscalibration_area:.3f})"
        self._draw_diagonal(ax, ref_line)
        (self.line_,) = ax.plot(self.expected, self.observed, **{"marker": "o", "label": label, **kwargs})
        if self.method == "central":
            xlabel, ylabel = "nominal coverage of the central interval", "observed fraction inside"
        else:
            xlabel, ylabel = "quantile level p", "observed fraction below the p-quantile"
        ax.set(xlabel=xlabel, ylabel=ylabel, xlim=(-0.02, 1.02), ylim=(-0.02, 1.02))
        ax.legend(loc="upper left")
        return self._plotted(ax)

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
