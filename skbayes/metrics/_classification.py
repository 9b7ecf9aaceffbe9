"""Calibration diagnostics for classification (see skbayes.metrics)."""

import numpy as np
from sklearn.utils import Bunch, check_array, check_consistent_length

from ._validation import _PROBA_SUM_ATOL, _as_float_array, _check_n

_BIN_STRATEGIES = ("uniform", "quantile")


def _check_classification(y_true, y_proba, labels):
    """Validate; return (column index of each y_true, (n, C) probabilities)."""
    y_proba = _as_float_array(y_proba, "y_proba")
    y_true = check_array(y_true, ensure_2d=False, dtype=None, input_name="y_true")
    if y_true.ndim != 1:
        raise ValueError(f"y_true must be 1-D; got shape {y_true.shape}.")
    check_consistent_length(y_true, y_proba)
    if y_proba.ndim == 1:
        y_proba = np.column_stack([1.0 - y_proba, y_proba])
    if y_proba.shape[1] < 2:
        raise ValueError(
            "y_proba must have shape (n_samples,) (binary P(class 1)) or "
            f"(n_samples, n_classes) with n_classes >= 2; got {y_proba.shape}."
        )
    if (y_proba < 0).any() or (y_proba > 1).any():
        raise ValueError("y_proba must hold probabilities in [0, 1].")
    row_sums = y_proba.sum(axis=1)
    if not np.allclose(row_sums, 1.0, rtol=0.0, atol=_PROBA_SUM_ATOL):
        raise ValueError(
            f"Each row of y_proba must sum to 1 (within {_PROBA_SUM_ATOL}); row sums range "
            f"over [{row_sums.min():.6g}, {row_sums.max():.6g}]."
        )
    n_classes = y_proba.shape[1]
    if labels is None:
        labels = np.unique(y_true)
        if labels.size != n_classes:
            raise ValueError(
                f"y_true holds {labels.size} distinct labels but y_proba has {n_classes} "
                "columns; pass labels= with the class of each column (e.g. "
                "estimator.classes_)."
            )
    else:
        labels = np.asarray(labels)
        if labels.ndim != 1 or labels.size != n_classes:
            raise ValueError(
                f"labels must be 1-D with one entry per column of y_proba ({n_classes}); "
                f"got shape {labels.shape}."
            )
        if np.unique(labels).size != labels.size:
            raise ValueError("labels must not contain duplicates.")
    order = np.argsort(labels, kind="stable")
    sorted_labels = labels[order]
    try:
        position = np.clip(np.searchsorted(sorted_labels, y_true), 0, n_classes - 1)
        unknown = np.asarray(sorted_labels[position] != y_true, dtype=bool)
    except TypeError as exc:
        raise ValueError(
            f"y_true and labels hold incomparable types ({y_true.dtype} and {labels.dtype})."
        ) from exc
    if unknown.any():
        raise ValueError(
            f"y_true contains labels not in labels: {np.unique(y_true[unknown])[:10].tolist()}."
        )
    return order[position], y_proba


def reliability_diagram(y_true, y_proba, *, n_bins=15, strategy="uniform", labels=None):
    """Per-bin confidence and accuracy of top-label class predictions.

    The predictions are binned by their confidence (the largest class
    probability); each bin reports its mean confidence and the accuracy of
    the predicted (arg-max) class ([1]_). A calibrated classifier has
    accuracy = confidence in every bin. Bins are right-closed,
    ``(edge[b], edge[b + 1]]``, the first one also holding its left edge.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels: values of ``labels``, which default to the sorted
        distinct values of y_true, column c of y_proba being ``labels[c]``
        (so class indices 0..C-1 when y_true holds every index).
    y_proba : array-like of shape (n_samples, n_classes) or (n_samples,)
        Class probabilities, rows summing to 1; 1-D means binary with the
        probability of ``labels[1]``.
    n_bins : int, default=15
        Number of bins.
    strategy : {"uniform", "quantile"}, default="uniform"
        ``"uniform"``: equal-width bins on [0, 1]; ``"quantile"``: edges at
        quantiles of the confidences, so bins hold about equally many
        predictions (ties can merge bins, giving fewer than n_bins).
    labels : array-like of shape (n_classes,), default=None
        The class of each column of y_proba. Needed when y_true does not
        hold every class (e.g. a cross-validation fold): pass
        ``estimator.classes_``.

    Returns
    -------
    result : :class:`~sklearn.utils.Bunch`
        With attributes, n_bins' the number of bins:

        bin_edges : ndarray of shape (n_bins' + 1,)
            Increasing bin edges.
        confidence : ndarray of shape (n_bins',)
            Mean top-label probability per bin (NaN for an empty bin).
        accuracy : ndarray of shape (n_bins',)
            Fraction of correct top-label predictions per bin (NaN if empty).
        count : ndarray of int of shape (n_bins',)
            Number of predictions per bin; sums to n_samples.

    Raises
    ------
    ValueError
        If the lengths differ, an input holds NaN or inf, y_proba has
        entries outside [0, 1] or rows not summing to 1, the labels do not
        match the columns, n_bins < 1 or strategy is unknown.

    See Also
    --------
    expected_calibration_error

    References
    ----------
    .. [1] C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger, "On calibration of
       modern neural networks", ICML 2017.
    """
    return _reliability_bins(y_true, y_proba, n_bins, strategy, labels)[0]


def _reliability_bins(y_true, y_proba, n_bins, strategy, labels):
    """:func:`reliability_diagram`'s Bunch, and the bin of each row (ndarray of int of shape (n_samples,))."""
    n_bins = _check_n(n_bins, "n_bins", 1)
    if strategy not in _BIN_STRATEGIES:
        raise ValueError(f"strategy must be one of {_BIN_STRATEGIES}; got {strategy!r}.")
    y_index, y_proba = _check_classification(y_true, y_proba, labels)
    predicted = np.argmax(y_proba, axis=1)
    confidence = y_proba[np.arange(y_proba.shape[0]), predicted]
    correct = (predicted == y_index).astype(np.float64)
    if strategy == "uniform":
        edges = np.linspace(0.0, 1.0, n_bins + 1)
    else:
        edges = np.unique(np.quantile(confidence, np.linspace(0.0, 1.0, n_bins + 1)))
        if edges.size == 1:  # every confidence equal: one bin
            edges = np.array([edges[0], edges[0]])
    bins = np.searchsorted(edges[1:-1], confidence, side="left")
    n_out = edges.size - 1
    count = np.bincount(bins, minlength=n_out)
    mean_confidence = _bin_means(bins, confidence, count)
    accuracy = _bin_means(bins, correct, count)
    return Bunch(bin_edges=edges, confidence=mean_confidence, accuracy=accuracy, count=count), bins


def expected_calibration_error(y_true, y_proba, *, n_bins=15, strategy="uniform", labels=None):
    r"""Top-label expected calibration error (ECE).

    .. math::

        \mathrm{ECE} = \sum_{b=1}^{B} \frac{n_b}{n}
        \left| \mathrm{acc}(b) - \mathrm{conf}(b) \right|

    over the non-empty confidence bins of :func:`reliability_diagram`, with
    n_b predictions, accuracy acc(b) of the arg-max class and mean top-label
    probability conf(b) ([1]_, [2]_). A binned estimate: it depends on the
    bins and is biased upwards for small n.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels (see :func:`reliability_diagram`).
    y_proba : array-like of shape (n_samples, n_classes) or (n_samples,)
        Class probabilities, rows summing to 1; 1-D means binary with the
        probability of ``labels[1]``.
    n_bins : int, default=15
        Number of bins (15 as in [1]_).
    strategy : {"uniform", "quantile"}, default="uniform"
        Equal-width or equal-mass bins.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of y_proba; defaults to the sorted distinct
        values of y_true.

    Returns
    -------
    ece : float
        In [0, 1] (a difference of probabilities); lower is better.

    Raises
    ------
    ValueError
        As :func:`reliability_diagram`.

    References
    ----------
    .. [1] C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger, "On calibration of
       modern neural networks", ICML 2017.
    .. [2] M. P. Naeini, G. F. Cooper and M. Hauskrecht, "Obtaining well
       calibrated probabilities using Bayesian binning", AAAI 2015.
    """
    return _ece(reliability_diagram(y_true, y_proba, n_bins=n_bins, strategy=strategy, labels=labels))


def _ece(diagram):
    """The expected calibration error of a :func:`reliability_diagram` Bunch: the count-weighted mean gap."""
    filled = diagram.count > 0
    gaps = np.abs(diagram.accuracy[filled] - diagram.confidence[filled])
    return float(np.sum(diagram.count[filled] * gaps) / diagram.count.sum())


def _bin_means(bins, values, count):
    """Mean of ``values`` (shape (n_samples,)) over the rows of each bin; NaN for an empty bin."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.bincount(bins, weights=values, minlength=count.size) / count
