"""Helpers of the displays: matplotlib on demand, estimator checks, argument checks."""

import numpy as np
from sklearn.base import is_classifier
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_is_fitted

from .._scorer import _accepts
from .._validation import _as_2d, _as_float_array


# The per-row measures of ClassifierUncertaintyMixin.predict_uncertainty.
_CLASSIFIER_MEASURES = ("predictive_entropy", "expected_entropy", "mutual_information", "variation_ratio")
_MEASURE_LABELS = {
    "predictive_entropy": "predictive entropy (nats)",
    "expected_entropy": "expected entropy (nats)",
    "mutual_information": "mutual information (nats)",
    "variation_ratio": "variation ratio",
}


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


class _Display:
    """What the ``plot`` of every display shares: its Axes, its legend name, the diagonal, and what it stores."""

    #: The legend name when neither ``name`` nor ``estimator_name`` is given.
    _default_name = None

    def _plot_axes(self, ax, name):
        """``(ax, label)``: ``ax`` or a new figure's Axes, and ``name``, else ``estimator_name``, else the default."""
        ax = _axes(ax, f"{type(self).__name__}.plot")
        return ax, name if name is not None else (self.estimator_name or self._default_name)

    def _draw_diagonal(self, ax, ref_line):
        """The line y = x, once per Axes (not again on an Axes that has it), stored as ``ref_line_`` or None."""
        self.ref_line_ = None
        if ref_line and not _legend_has(ax, "perfectly calibrated"):
            (self.ref_line_,) = ax.plot([0, 1], [0, 1], "k:", label="perfectly calibrated")

    def _plotted(self, ax):
        """Store the Axes (``ax_``) and its figure (``figure_``); return the display."""
        self.ax_, self.figure_ = ax, ax.figure
        return self
