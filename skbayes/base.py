"""The scikit-learn mixin shared by the torch-backed estimators.

It owns the device and dtype policy, turns ``random_state`` into
``torch.Generator`` objects (the global torch seed is never touched), and makes
pickles portable: fitted modules are stored on the CPU and moved back to their
device on load, falling back to the CPU with a :class:`DeviceWarning` when the
device is missing.
"""

import copy
import warnings
from contextlib import contextmanager
from numbers import Integral

import numpy as np
import torch
from scipy.stats import norm
from sklearn.model_selection import train_test_split
from sklearn.utils.validation import check_array, check_is_fitted, column_or_1d, validate_data
from torch import nn

from ._docstrings import fill_doc
from ._param_validation import COVERAGE, check_quantile_levels, validate_method_params
from ._training import compiled_loss, fit_loop

__all__ = ["DeviceWarning", "PredictiveRegressorMixin", "TorchEstimatorMixin", "hidden_layer_sizes", "target_scaling"]

# Bytes of intermediate values one block of rows may hold when predicting.
PREDICT_BLOCK_BYTES = 2**25
# What a prediction may hold beyond its inputs and outputs, whatever the
# number of rows: a few blocks' intermediates at once (a layer's input and
# output, a kernel matrix and its solve); tests/test_predict_memory.py measures it.
PREDICT_MEMORY_BOUND = 4 * PREDICT_BLOCK_BYTES


def hidden_layer_sizes(value, empty_meaning):
    """The validated ``hidden_layer_sizes`` parameter as a list of int.

    Parameters
    ----------
    value : int or sequence of int
        The parameter as given.
    empty_meaning : str
        What an empty tuple builds, for the error message.

    Raises
    ------
    ValueError
        If a width is not a positive integer.
    """
    sizes = [value] if isinstance(value, Integral) else list(value)
    if not all(isinstance(s, Integral) and s >= 1 for s in sizes):
        raise ValueError(
            f"hidden_layer_sizes must hold positive integers (an empty tuple gives {empty_meaning}); got {value!r}."
        )
    return [int(s) for s in sizes]


def target_scaling(Y, normalize):
    """Mean and scale of each column of Y, for standardising targets (or features).

    Parameters
    ----------
    Y : ndarray of shape (n_samples, n_columns)
    normalize : bool
        If False, the mean is 0 and the scale 1 (no standardisation).

    Returns
    -------
    mean, scale : ndarray of shape (n_columns,)
        The column means and population standard deviations, a zero
        deviation (a constant column) replaced by 1, in the dtype of Y.
    """
    if not normalize:
        return np.zeros(Y.shape[1], dtype=Y.dtype), np.ones(Y.shape[1], dtype=Y.dtype)
    scale = Y.std(axis=0)
    return Y.mean(axis=0), np.where(scale > 0, scale, 1.0).astype(Y.dtype, copy=False)


def streamed_labels(estimator, y, classes, first):
    """The class indices of the labels ``y`` of a classifier's ``partial_fit`` call, shape (n,).

    The first call (``first``) needs every class in ``classes`` (a batch may
    lack some), checks them with ``estimator._check_classes`` and sets
    ``classes_``; a later call checks that ``classes``, when given, is the
    same. Raises ValueError for a missing ``classes`` on the first call, a
    different one later, or labels outside ``classes_``.
    """
    if first:
        if classes is None:
            raise ValueError("classes must be passed on the first call to partial_fit.")
        classes = np.unique(column_or_1d(classes))
        estimator._check_classes(classes)
        estimator.classes_ = classes
    elif classes is not None and not np.array_equal(np.unique(column_or_1d(classes)), estimator.classes_):
        raise ValueError(f"classes={classes!r} differs from classes_={estimator.classes_!r} of the first call.")
    index = np.minimum(np.searchsorted(estimator.classes_, y), len(estimator.classes_) - 1)
    unseen = estimator.classes_[index] != y
    if unseen.any():
        raise ValueError(
            f"y contains labels not in classes_: {np.unique(y[unseen])[:5].tolist()}; "
            f"the classes are {estimator.classes_.tolist()}."
        )
    return index


class DeviceWarning(UserWarning):
    """A fitted model could not be put back on the device it was fitted on."""


_DTYPES = {"float32": torch.float32, "float64": torch.float64}


@contextmanager
def evaluation_mode(module):
    """Run the block with ``module`` in evaluation mode, then back in training mode.

    For the validation scores computed inside the training loop: batch
    normalisation uses its running statistics and does not update them.
    """
    module.eval()
    try:
        yield module
    finally:
        module.train()


class TorchEstimatorMixin:
    """Device, dtype, seeding and pickling for estimators holding torch modules.

    Subclasses list the attributes that hold torch modules or tensors in
    ``_torch_attributes``.
    """

    _torch_attributes = ("module_",)
    #: The fitted attribute whose presence means fitted (``__sklearn_is_fitted__``).
    _model_attribute = "module_"
    #: Whether the loop can hold out a validation split (``early_stopping``): the fitted
    #: ``validation_scores_`` and ``best_validation_score_`` exist only then.
    _keeps_validation_scores = True

    def _resolve_device(self):
        device = self.device
        if device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        try:
            device = torch.device(device)
        except (RuntimeError, TypeError) as exc:
            raise ValueError(
                f"device={self.device!r} is not a valid torch device; use 'auto', "
                "'cpu', 'cuda' or 'cuda:N'."
            ) from exc
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(
                f"device={self.device!r} was requested but CUDA is not available "
                "here; use device='auto' or 'cpu'."
            )
        return device

    def _resolve_dtype(self, input_dtype, device):
        """torch dtype for the computation.

        ``dtype=None`` keeps float32 input as float32 and uses float64 for
        everything else on the CPU (scikit-learn's convention), and float32 on
        accelerators, where float64 is slow.
        """
        if self.dtype is not None:
            return _DTYPES[self.dtype]
        if device.type != "cpu" or input_dtype == np.float32:
            return torch.float32
        return torch.float64

    @staticmethod
    def _seeds(random_state, n):
        """``n`` independent integer seeds from a numpy RandomState."""
        return [int(s) for s in random_state.randint(0, 2**31 - 1, size=n)]

    @staticmethod
    def _generator(seed, device="cpu"):
        generator = torch.Generator(device=device)
        generator.manual_seed(int(seed))
        return generator

    def _to_tensor(self, array):
        """Copy a numpy array into a tensor on the fitted device and dtype."""
        return torch.tensor(np.ascontiguousarray(array), dtype=self._dtype, device=self.device_)

    @property
    def _dtype(self):
        return _DTYPES[self.dtype_]

    def _validation_split(self, n_samples, seed, validation_fraction):
        """Train and validation row indices for ``early_stopping``.

        Raises ValueError when either part would be empty.
        """
        n_val = int(np.ceil(validation_fraction * n_samples))
        if n_val < 1 or n_samples - n_val < 1:
            raise ValueError(
                f"early_stopping needs at least one training and one validation row; got "
                f"n_samples={n_samples} with validation_fraction={validation_fraction}."
            )
        return train_test_split(np.arange(n_samples), test_size=n_val, random_state=seed)

    def _auto_batch_size(self, n_samples):
        """Minibatch size of ``batch_size="auto"`` for ``n_samples`` training rows."""
        return min(128, n_samples)

    def _batch_size(self, n_samples):
        """Rows per step for ``n_samples`` training rows (``"auto"`` resolved, at most n_samples)."""
        batch_size = self._auto_batch_size(n_samples) if self.batch_size == "auto" else self.batch_size
        return min(batch_size, n_samples)

    def _fit_loop(self, loss_fn, optimizer, n_samples, *, shuffle_seed, callbacks=(), **settings):
        """Run :func:`skbayes._training.fit_loop` with the estimator's loop settings.

        The one place where the loop settings are read from the estimator
        (``batch_size``, ``verbose``, ``callbacks``, ``compile`` and :meth:`_loop_settings`) and the device, the
        shuffling generator and the name are filled in; ``settings`` overrides any of them (e.g.
        a fixed schedule, ``n_iter_no_change=None``). A ``max_iter`` still
        ``"auto"`` after them is the budget of :meth:`_auto_budget`. ``callbacks`` are the
        model's own and run before the validation score, the stopping rule
        and the user's ``callbacks``.
        """
        batch_size = min(settings.pop("batch_size", self._batch_size(n_samples)), n_samples)
        loop = {
            "batch_size": batch_size,
            **self._loop_settings(steps_per_epoch=-(-n_samples // batch_size)),
            "generator": self._generator(shuffle_seed),
            "device": self.device_,
            "verbose": self.verbose,
            "estimator_name": type(self).__name__,
            "module": getattr(self, "module_", None),
            **settings,
        }
        if loop["max_iter"] == "auto":  # an epoch and step budget (estimators whose max_iter takes "auto")
            loop["max_iter"], max_steps = self._auto_budget()
            loop.setdefault("max_steps", max_steps)
        user_callbacks = list(getattr(self, "callbacks", None) or ())
        if getattr(self, "compile", False):
            loss_fn = compiled_loss(loss_fn, loop["estimator_name"])
        return fit_loop(loss_fn, optimizer, n_samples, callbacks=callbacks, user_callbacks=user_callbacks, **loop)

    def _loop_settings(self, steps_per_epoch=None):
        """The stopping settings of the loop: ``max_iter``, ``tol`` and ``n_iter_no_change``.

        Read from the estimator by default; an estimator whose training
        settings belong to its inference object (the Bayesian MLPs, the
        sparse GPs) reads them from there instead. ``steps_per_epoch``, the
        optimiser steps of one epoch of this run, lets a rule count in steps
        (the GPs' ``n_iter_no_change="auto"``).
        """
        return {"max_iter": self.max_iter, "tol": self.tol, "n_iter_no_change": self.n_iter_no_change}

    def _auto_budget(self):
        """``(max_epochs, max_steps)`` of ``max_iter="auto"``: whichever ends first.

        Estimators whose ``max_iter`` accepts ``"auto"`` without resolving it
        themselves define it; a budget of optimiser steps keeps the cost of a
        default fit from growing with the number of rows.
        """
        raise NotImplementedError(f"{type(self).__name__} has no max_iter='auto' budget")

    def _validate_X_predict(self, X):
        """Check that the estimator is fitted and validate X as in ``fit`` (no reset)."""
        check_is_fitted(self)
        return validate_data(self, X, reset=False, dtype=(np.float64, np.float32))

    def _predict_in_blocks(self, X, fn, *, row_size):
        """Apply ``fn`` to blocks of rows of X and gather the results, with bounded memory.

        Parameters
        ----------
        X : ndarray of shape (n_rows, n_features) or torch.Tensor
            Validated rows (a tensor is used as it is, on the model's device).
        fn : callable
            ``fn(x, rows) -> tensor or tuple of tensors``, each with the rows
            of ``x`` (a tensor on the fitted device and dtype) on its first
            axis; ``rows`` is the slice of X that ``x`` holds.
        row_size : int
            Number of values that ``fn`` holds at once per row (e.g. the
            Monte-Carlo draws times the widest layer): a block has
            ``PREDICT_BLOCK_BYTES`` (32 MiB) of them, whatever the number of
            rows.

        Returns
        -------
        out : ndarray or tuple of ndarray
            The results for all rows, written into arrays allocated once, so
            that the memory held beyond the outputs does not grow with the
            number of rows.
        """
        n_rows = X.shape[0]
        itemsize = torch.empty((), dtype=self._dtype).element_size()
        block = max(1, PREDICT_BLOCK_BYTES // (max(1, int(row_size)) * itemsize))
        outputs, single = None, False
        with torch.no_grad():
            for start in range(0, n_rows, block):
                rows = slice(start, min(start + block, n_rows))
                x = X[rows] if torch.is_tensor(X) else self._to_tensor(X[rows])
                values = fn(x, rows)
                if outputs is None:
                    single = torch.is_tensor(values)
                if single:
                    values = (values,)
                if outputs is None:
                    outputs = [
                        np.empty((n_rows, *v.shape[1:]), dtype=str(v.dtype).removeprefix("torch.")) for v in values
                    ]
                for out, value in zip(outputs, values, strict=True):
                    out[rows] = value.cpu().numpy()
        return outputs[0] if single else tuple(outputs)

    def __sklearn_is_fitted__(self):
        """Fitted once the model exists: a ``fit`` refused after X was validated leaves ``n_features_in_``
        (and other attributes) but no model, and must not pass ``check_is_fitted``."""
        return hasattr(self, self._model_attribute)

    def _can_warm_start(self, X, y):
        """Whether ``fit`` continues from the fitted model rather than starting afresh.

        True when ``warm_start`` is set, a model is fitted and what shapes it
        is unchanged: :meth:`_model_settings` of the number of features, as
        stored at initialisation in ``_fitted_settings``. ``X`` (n, d) and
        ``y`` are the validated inputs and the targets as ``fit`` holds them
        when it decides; estimators whose model depends on more (the classes,
        the network's outputs, the inference method) extend this.
        """
        return (
            bool(self.warm_start)
            and hasattr(self, "module_")
            and getattr(self, "_fitted_settings", None) == self._model_settings(X.shape[1])
        )

    def _model_settings(self, n_features):
        """What a warm start needs unchanged: the parameters that shape the fitted module."""
        raise NotImplementedError

    def _stream_epoch(self, train, n_rows):
        """``partial_fit``'s epoch: ``n_rows`` more rows seen, one epoch of ``train``, its result appended.

        ``train(n_data, offset, **loop)`` runs the loop over the call's rows
        with the objective's N = ``n_data`` (the running total ``n_seen_``,
        this call's rows included), its seeds offset by ``offset`` (the
        epochs run so far, so that every call draws afresh) and the loop
        settings ``loop`` (a fixed schedule of one epoch: no step budget, no
        stopping rule), and returns the loop's result.
        """
        self.n_seen_ += n_rows
        result = train(self.n_seen_, self.n_iter_, max_iter=1, max_steps=None, n_iter_no_change=None)
        self._append_training_result(result)

    def _store_training_result(self, result, n_seen=None):
        """``fit``'s bookkeeping: the fitted attributes of a :class:`skbayes._training.TrainingResult`.

        ``loss_curve_``, ``n_iter_``, ``best_loss_``, and for an estimator
        that can hold out a validation split (``_keeps_validation_scores``)
        ``validation_scores_`` and ``best_validation_score_``; and
        ``n_seen_``, the rows trained on, when ``n_seen`` is given (the N
        that ``partial_fit`` continues from).
        """
        if n_seen is not None:
            self.n_seen_ = n_seen
        self.loss_curve_ = result.loss_curve
        self.n_iter_ = result.n_iter
        self.best_loss_ = result.best_loss
        if self._keeps_validation_scores:
            self.validation_scores_ = result.validation_scores
            self.best_validation_score_ = result.best_validation_score

    def _append_training_result(self, result, best_from=0):
        """``partial_fit``'s bookkeeping: the epochs of ``result`` appended to ``loss_curve_`` and ``n_iter_``.

        ``best_loss_`` becomes the lowest epoch loss from epoch ``best_from``
        (0-based) on: a model whose loss rises while a weight warms up skips
        those epochs.
        """
        self.loss_curve_ = [*self.loss_curve_, *result.loss_curve]
        self.n_iter_ += result.n_iter
        self.best_loss_ = min(self.loss_curve_[best_from:])

    def __getstate__(self):
        state = dict(super().__getstate__())
        for name in self._torch_attributes:
            value = state.get(name)
            if isinstance(value, (nn.Module, torch.Tensor)):
                state[name] = copy.deepcopy(value).to("cpu")
        # The optimiser itself is not pickled, its state is (Adam's moments, step counts), so that
        # partial_fit continues alike with or without a pickle in between (e.g. a stream of chunks
        # whose partial_fit calls run in different processes of a cluster); see _stored_optimizer.
        optimizer = state.pop("_optimizer", None)
        if optimizer is not None:
            state["_optimizer_state"] = optimizer.state_dict()
        if state.get("_optimizer_state") is not None:
            state["_optimizer_state"] = _on_cpu(state["_optimizer_state"])
        return state

    def _stored_optimizer(self):
        """The optimiser that ``partial_fit`` continues with.

        The one of the last ``fit``/``partial_fit`` call or, after unpickling, a
        new one from ``_make_optimizer()`` loaded with the state the pickle
        saved (``load_state_dict`` moves it to the parameters' device).
        """
        if getattr(self, "_optimizer", None) is None:
            self._optimizer = self._make_optimizer()
            saved = self.__dict__.pop("_optimizer_state", None)
            if saved is not None:
                self._optimizer.load_state_dict(saved)
        return self._optimizer

    def __setstate__(self, state):
        super().__setstate__(state)
        device = getattr(self, "device_", None)
        if device is None:
            return
        if device.type == "cuda" and not torch.cuda.is_available():
            warnings.warn(
                f"{type(self).__name__} was fitted on {device}, which is not "
                "available here; it was loaded on the CPU.",
                DeviceWarning,
            )
            device = torch.device("cpu")
            self.device_ = device
        for name in self._torch_attributes:
            value = getattr(self, name, None)
            if isinstance(value, (nn.Module, torch.Tensor)):
                setattr(self, name, value.to(device))


def _on_cpu(value):
    """``value`` (an optimiser's state dict: dicts and lists of tensors and numbers) with its tensors on the CPU."""
    if isinstance(value, torch.Tensor):
        return value.cpu()
    if isinstance(value, dict):
        return {key: _on_cpu(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_on_cpu(item) for item in value)
    return value


def check_target_values(y, shape):
    """y as a finite float64 array of ``shape`` (the predictions'), for :meth:`PredictiveRegressorMixin.predict_cdf`.

    A column vector is accepted for one output (shape (n,)).

    Raises
    ------
    ValueError
        If y has NaN/inf or another shape.
    """
    y = check_array(y, ensure_2d=False, dtype=np.float64, input_name="y")
    if y.ndim == 2 and y.shape[1] == 1 and len(shape) == 1:
        y = y[:, 0]
    if y.shape != tuple(shape):
        raise ValueError(f"y has shape {y.shape}; the predictions have shape {tuple(shape)}.")
    return y


@fill_doc
class PredictiveRegressorMixin:
    """Standard deviations and intervals for regressors with ``predict_uncertainty``.

    The regressor provides ``predict_uncertainty(X)`` returning a Bunch with
    ``mean`` and ``std`` (noise included) and ``predict(X, return_std=True)``.
    """

    def predict_std(self, X):
        """Predictive standard deviation (epistemic + aleatoric), units of y.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        y_std : ndarray of shape (n_samples,) or (n_samples, n_outputs)
        """
        return self.predict_uncertainty(X).std

    @validate_method_params(quantiles=["array-like"])
    def predict_quantiles(self, X, quantiles):
        """Quantiles of each row's predictive distribution of y.

        The quantile at level q of the predictive at x, F_x^{-1}(q), in the
        units of y: of the Gaussian with the predictive mean and standard
        deviation, or, for a regressor whose predictive is a mixture that is
        not treated as Gaussian (the Bayesian MLPs with heteroscedastic or
        Student-t noise, the deep GP), of that mixture, found by Newton's
        method safeguarded by bisection on its CDF
        (``skbayes._predictive.mixture_quantile``).

        %(parameters_X)s
        quantiles : array-like of shape (n_quantiles,)
            Levels in (0, 1), e.g. ``[0.05, 0.5, 0.95]``.

        Returns
        -------
        y_quantiles : ndarray of shape (n_samples, n_quantiles), or (n_samples, n_outputs, n_quantiles)
            For 1-D training targets, the first shape (as scikit-learn's
            quantile regressors and MAPIE expect); non-decreasing in the level.

        Raises
        ------
        %(not_fitted_error)s
        ValueError
            If ``quantiles`` is not a non-empty 1-D array of levels in (0, 1),
            or as ``predict``.
        """
        return self._predictive_quantiles(X, check_quantile_levels(quantiles))

    def _predictive_quantiles(self, X, levels):
        """:meth:`predict_quantiles` for checked ``levels``: here the Gaussian's, mean + Phi^{-1}(q) std."""
        mean, std = self.predict(X, return_std=True)
        return mean[..., None] + std[..., None] * norm.ppf(levels)

    def predict_cdf(self, X, y):
        """Predictive CDF at y: F_x(y) = P(Y <= y | x), for each row.

        The CDF of the same predictive distribution whose quantiles
        :meth:`predict_quantiles` gives and whose density
        ``log_predictive_density`` scores: the Gaussian with the predictive
        mean and standard deviation, or the mixture over weight draws,
        kept samples or members where the regressor's predictive is one. At
        held-out targets these are the probability integral transform (PIT)
        values, uniform on (0, 1) for a calibrated regressor (Gneiting,
        Balabdaoui and Raftery 2007, section 3.1).

        %(parameters_X)s
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            The values at which to evaluate each row's CDF, in the units of
            y, of the shape of ``predict``'s mean.

        Returns
        -------
        cdf : ndarray of the shape of y
            In [0, 1].

        Raises
        ------
        %(not_fitted_error)s
        ValueError
            If X or y has NaN/inf, X the wrong number of features, or y not
            the shape of the predictions.
        """
        return self._predictive_cdf(X, y)

    def _predictive_cdf(self, X, y):
        """:meth:`predict_cdf`; here the Gaussian's, Phi((y - mean) / std)."""
        mean, std = self.predict(X, return_std=True)
        return norm.cdf(check_target_values(y, mean.shape), mean, std)

    @validate_method_params(coverage=COVERAGE)
    def predict_interval(self, X, coverage=0.95):
        """Central predictive interval: the (1 -/+ coverage) / 2 quantiles of :meth:`predict_quantiles`.

        %(parameters_X)s
        %(coverage)s

        Returns
        -------
        lower, upper : ndarray of shape (n_samples,) or (n_samples, n_outputs)
            In the units of y.

        Raises
        ------
        %(not_fitted_error)s
        ValueError
            If ``coverage`` is not in (0, 1), or as ``predict``.
        """
        bounds = self._predictive_quantiles(X, np.array([0.5 - coverage / 2, 0.5 + coverage / 2]))
        return bounds[..., 0], bounds[..., 1]
