"""Prediction intervals against the truth: :class:`PredictionIntervalDisplay`."""

from numbers import Integral

import numpy as np
from scipy.stats import norm
from sklearn.utils import _safe_indexing

from .._scorer import _step_with
from .._validation import _as_2d, _as_float_array, _check_coverage, _check_same_shape
from ._base import _Display, _check_nonnegative, _check_one_output, _check_regressor, _estimator_name, _predict_with_std

__all__ = ["PredictionIntervalDisplay"]


class PredictionIntervalDisplay(_Display):
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

    _default_name = "predictive"

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
        ax, label = self._plot_axes(ax, name)
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
        (self.line_,) = ax.plot(self.x, self.y_pred, **{"color": "C0", "label": f"{label} mean", **(line_kwargs or {})})
        self.scatter_ = ax.scatter(
            self.x, self.y_true, **{"s": 10, "color": "k", "alpha": 0.7, "label": "observed", **(scatter_kwargs or {})}
        )
        ax.set(xlabel=self.x_label or "rank of the prediction", ylabel="y")
        ax.legend(loc="best")
        return self._plotted(ax)

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
