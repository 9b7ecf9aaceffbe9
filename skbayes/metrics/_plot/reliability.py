"""The reliability diagram of a classifier, with its uncertainty measures: :class:`ReliabilityDisplay`."""

import torch
from sklearn.base import is_classifier
from sklearn.utils.validation import check_is_fitted

from ..._docstrings import fill_doc
from ..._uncertainty import entropy
from .._classification import _bin_means, _ece, _reliability_bins
from .._scorer import _step_with
from .._validation import _as_float_array
from ._base import _CLASSIFIER_MEASURES, _MEASURE_LABELS, _Display, _estimator_name

__all__ = ["ReliabilityDisplay"]


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
class ReliabilityDisplay(_Display):
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

    _default_name = "classifier"

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
        ax, label = self._plot_axes(ax, name)
        filled = self.count > 0
        self._draw_diagonal(ax, ref_line)
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
        return self._plotted(ax)

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
