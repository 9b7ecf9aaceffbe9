"""The loss curve and validation scores of a fit: :class:`TrainingCurveDisplay`."""

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ._base import _Display, _final_step

__all__ = ["TrainingCurveDisplay"]


def _curve(values, name):
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence of floats; got shape {values.shape}.")
    return values


class TrainingCurveDisplay(_Display):
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
        ax, name = self._plot_axes(ax, name)
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
        return self._plotted(ax)

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
