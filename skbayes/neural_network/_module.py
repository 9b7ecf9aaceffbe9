"""Bayesian estimators around any torch module: BayesianNeuralNetRegressor and BayesianNeuralNetClassifier."""

import math

import numpy as np
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted
from torch import nn

from ..nn.networks.module import build_module, factory_accepts
from ._base import method_streams, mlp_doc
from ._classifier import BayesianMLPClassifier
from ._regressor import BayesianMLPRegressor

__all__ = ["BayesianNeuralNetClassifier", "BayesianNeuralNetRegressor"]

# The names a module factory may take to learn the data's widths.
_DATA_ARGUMENTS = ("n_features", "n_outputs", "input_shape")

_MODULE_DOC = """\
module : torch.nn.Module class, callable or instance, default=None
    The network, built from plain torch layers: ``module(**module__kwargs)``
    must return a :class:`torch.nn.Module` mapping inputs of shape
    ``(B, *input_shape)`` (or ``(B, n_features)``) to ``(B, n_outputs)``
    (the number of targets, or of classes: the logits). A factory that takes
    ``n_features``, ``n_outputs`` or ``input_shape`` and is not given them
    receives the data's values. An instance is copied (and re-initialised
    by its layers' ``reset_parameters`` for each ensemble member). None: one
    hidden layer of 50 ReLU units. The inference method makes it Bayesian:
    ``MCDropout`` keeps its dropout on and adds more (``placement``),
    ``MeanFieldVI`` swaps its Linear and Conv2d layers for mean-field ones,
    ``DeepEnsemble`` trains copies of it and ``SGHMC`` samples copies of
    it; a method that cannot handle a layer says so in ``fit``.
module__<name> : any
    Keyword arguments of ``module`` (skorch's convention), tunable by
    ``GridSearchCV`` like any parameter (``{"module__n_filters": [8, 16]}``).
    Another unknown keyword argument is stored too and raises TypeError
    in ``fit`` (scikit-learn validates in ``fit``, not in ``__init__``).
input_shape : tuple of int, default=None
    Shape of one input: the rows of a 2-D X (scikit-learn's contract) are
    reshaped to it, e.g. ``(1, 28, 28)`` for flattened images. None: X may
    also be 3-D or 4-D (``(n_samples, *input_shape)``), and is then
    flattened to rows and its trailing shape used; 2-D rows are fed as
    they are."""


class NeuralNetModuleMixin:
    """The glue shared by the estimators that take a torch module.

    Handles the ``module__`` keyword arguments (``get_params``/``set_params``
    so that :func:`sklearn.base.clone` and ``GridSearchCV`` see them), the
    reshaping of rows to ``input_shape`` (and of N-D input to rows), and
    builds the :class:`~skbayes.inference.ModelSettings` whose ``module``
    the inference methods turn Bayesian.
    """

    def _set_module_kwargs(self, kwargs):
        """Store the extra keyword arguments as parameters (checked in ``fit``, scikit-learn's convention)."""
        for key, value in kwargs.items():
            if hasattr(type(self), key):
                raise TypeError(f"{type(self).__name__}.__init__() got an unexpected keyword argument {key!r}.")
            setattr(self, key, value)
        self._extra_keys = tuple(dict.fromkeys((*getattr(self, "_extra_keys", ()), *kwargs)))

    def _check_module_kwargs(self):
        """Raise TypeError for an extra keyword argument that is not a ``module__`` one."""
        bad = [key for key in self._extra_keys if not key.startswith("module__") or key == "module__"]
        if bad:
            raise TypeError(
                f"{type(self).__name__}.__init__() got unexpected keyword arguments {bad} "
                "(keyword arguments of the module start with 'module__')."
            )

    def _module_kwargs(self):
        return {key: getattr(self, key) for key in getattr(self, "_extra_keys", ())}

    def get_params(self, deep=True):
        return {**super().get_params(deep=deep), **self._module_kwargs()}

    def set_params(self, **params):
        extra = {
            key: params.pop(key) for key in list(params) if key.startswith("module__") or key in self._extra_keys
        }
        self._set_module_kwargs(extra)
        return super().set_params(**params)

    # ------------------------------------------------------------------ inputs
    def _as_rows(self, X, reset):
        """N-D array-like X -> 2-D rows, recording (``reset``) or checking the input shape."""
        if not hasattr(X, "shape") and not isinstance(X, (list, tuple)):
            return X
        if hasattr(X, "toarray") or hasattr(X, "iloc"):  # sparse, pandas: left to validation
            return X
        if np.ndim(X) <= 2:
            if reset:
                self._nd_shape = None
            return X
        X = np.asarray(X)
        shape = tuple(X.shape[1:])
        if reset:
            if self.input_shape is not None and tuple(self.input_shape) != shape:
                raise ValueError(f"X has inputs of shape {shape}, but input_shape is {tuple(self.input_shape)}.")
            self._nd_shape = shape
        elif tuple(self.input_shape_ or (self.n_features_in_,)) != shape:
            fitted = self.input_shape_ or (self.n_features_in_,)
            raise ValueError(f"X has inputs of shape {shape}, but the model was fitted on inputs of shape {fitted}.")
        return X.reshape(len(X), -1)

    def _resolved_input_shape(self):
        if self.input_shape is not None:
            return tuple(int(s) for s in self.input_shape)
        return getattr(self, "_nd_shape", None)

    def _validate_X_predict(self, X):
        check_is_fitted(self)
        return super()._validate_X_predict(self._as_rows(X, reset=False))

    def _architecture(self):
        # after the validation of X: n_features_in_ is the width of its rows
        self._check_input_shape(self.n_features_in_)
        input_shape = self._resolved_input_shape()
        self.input_shape_ = input_shape
        factory = self.module
        kwargs = {key.removeprefix("module__"): value for key, value in self._module_kwargs().items()}

        def build(seed, n_features, n_outputs, device, dtype):
            given = dict(kwargs)
            data = {"n_features": n_features, "n_outputs": n_outputs, "input_shape": input_shape}
            for name in _DATA_ARGUMENTS:
                if name not in given and factory_accepts(factory, name):
                    given[name] = data[name]
            if factory is None:
                return build_module(_default_module, {**data, **given}, seed=seed, device=device, dtype=dtype)
            return build_module(factory, given, seed=seed, device=device, dtype=dtype)

        # the MLP fields are unused: the method builds the network from the module
        return {"hidden_layer_sizes": (), "activation": "relu", "module": build, "input_shape": input_shape}

    def fit(self, X, y):
        """Fit the posterior over the module's weights; X of shape ``(n_samples, n_features)`` or ``(n_samples, *input_shape)``.

        Raises ValueError on NaN/inf, wrong shapes, an ``input_shape`` that
        does not hold the features, or layers the inference method cannot
        make Bayesian (the message names them); TypeError on a keyword
        argument that is not a ``module__`` one; otherwise as
        ``BayesianMLPRegressor.fit`` / ``BayesianMLPClassifier.fit``.
        """
        self._check_module_kwargs()
        return super().fit(self._as_rows(X, reset=True), y)

    def _network_signature(self, method):
        """What the fitted network was built from: a warm start needs it unchanged."""
        kwargs = sorted(self._module_kwargs().items())
        return repr((self.module, kwargs, self._resolved_input_shape(), type(method).__name__,
                     sorted(method.get_params(deep=False).items())))

    def _can_warm_start(self, n_features, n_outputs, method):
        return super()._can_warm_start(n_features, n_outputs, method) and (
            getattr(self, "_signature", None) == self._network_signature(method)
        )

    def _build_module(self, method, settings, *args, **kwargs):
        self._signature = self._network_signature(method)
        return super()._build_module(method, settings, *args, **kwargs)

    def _check_input_shape(self, n_features):
        shape = self._resolved_input_shape()
        if shape is not None and math.prod(shape) != n_features:
            raise ValueError(f"input_shape {shape} holds {math.prod(shape)} values, but X has {n_features} features.")


def store_init_arguments(estimator, arguments):
    """Set every argument of an ``__init__`` (its ``locals()``) as an attribute, the module__ ones included.

    scikit-learn reads the parameters back from the attributes named like
    the arguments of ``__init__``; the estimators taking a module have many
    and repeat none of them by hand.
    """
    arguments = dict(arguments)
    module_kwargs = arguments.pop("module_kwargs")
    for name, value in arguments.items():
        if name not in ("self", "__class__"):
            setattr(estimator, name, value)
    estimator._set_module_kwargs(module_kwargs)


def _default_module(n_features, n_outputs, input_shape=None):
    """One hidden layer of 50 ReLU units (``BayesianMLPClassifier``'s default architecture; ``BayesianMLPRegressor``'s has two)."""
    layers = [nn.Flatten()] if input_shape is not None else []
    return nn.Sequential(*layers, nn.Linear(n_features, 50), nn.ReLU(), nn.Linear(50, n_outputs))


_MODULE_CONSTRAINTS = {
    "module": [None, callable, nn.Module],
    "input_shape": [None, tuple, list],
}


@mlp_doc(module_parameters=_MODULE_DOC)
class BayesianNeuralNetRegressor(NeuralNetModuleMixin, BayesianMLPRegressor):
    """Bayesian neural network regressor around any torch module.

    The estimator of :class:`BayesianMLPRegressor` (the same noise models,
    learned noise, standardised targets, the same training loop and
    Monte-Carlo predictions) for a network the user builds from plain torch
    layers: convolutional, recurrent, anything. The inference method turns
    it Bayesian: ``MCDropout`` (any module; dropout after convolutions and
    tied across time steps in recurrent layers, Gal 2016, sections
    3.4.1-3.4.2), ``MeanFieldVI`` (Linear and Conv2d layers, local
    reparameterisation), ``DeepEnsemble`` and ``SGHMC`` (any module without
    buffers).

    Parameters
    ----------
    %(module_parameters)s
    inference : str or InferenceMethod, default="mfvi"
        ``MeanFieldVI``, ``MCDropout``, ``DeepEnsemble`` or ``SGHMC`` (or
        ``"mfvi"``, ``"mc_dropout"``, ``"ensemble"``, ``"sghmc"``); the
        others refuse a module.
    prior_scale, noise, noise_std, normalize_y, batch_size, learning_rate_init, beta_1, beta_2, max_iter, \
n_mc_predict, early_stopping, validation_fraction, n_iter_no_change, tol, warm_start, callbacks, \
random_state, verbose, device, dtype
        As in :class:`BayesianMLPRegressor`, except two defaults: this
        estimator keeps ``inference="mfvi"`` (above) and
        ``noise="homoscedastic"`` (Gaussian, one noise level per output),
        where ``BayesianMLPRegressor`` defaults to ``SGHMC`` and Student-t
        noise (``noise="auto"``). With ``noise="heteroscedastic"``
        the module must return two values per target (the mean and the raw
        noise scale): a factory taking ``n_outputs`` receives twice the
        number of targets.

    Attributes
    ----------
    input_shape_ : tuple of int or None
        Shape of one input the module received.
    %(shared_attributes)s
    noise_std_ : ndarray of shape (n_outputs,)
        Observation noise standard deviation, in the units of y (for
        ``DeepEnsemble``, the root mean square over the members; for the
        other noise models, as in :class:`BayesianMLPRegressor`).
    n_outputs_ : int
        Number of outputs.

    Notes
    -----
    ``module_["network"]`` is a
    :class:`~skbayes.nn.networks.BayesianModuleNetwork` (or, for
    ``DeepEnsemble``, a :class:`~skbayes.nn.networks.StackedModuleNetwork`)
    holding the converted module.

    scikit-learn's contract is kept: X is 2-D and ``input_shape`` reshapes
    its rows, so the estimator passes ``check_estimator``. N-D X is
    accepted too (flattened to rows, the shape recorded); the checks never
    pass one.

    Examples
    --------
    >>> import numpy as np
    >>> from torch import nn
    >>> from skbayes import BayesianNeuralNetRegressor
    >>> class Net(nn.Sequential):
    ...     def __init__(self, n_features, n_outputs, width=16):
    ...         super().__init__(nn.Linear(n_features, width), nn.Tanh(), nn.Linear(width, n_outputs))
    >>> rng = np.random.RandomState(0)
    >>> X = rng.uniform(-3, 3, size=(100, 1))
    >>> y = np.sin(X[:, 0]) + 0.1 * rng.randn(100)
    >>> model = BayesianNeuralNetRegressor(Net, module__width=8, inference="mc_dropout", max_iter=20, random_state=0)
    >>> model.fit(X, y).predict(X[:2], return_std=True)[1].shape
    (2,)
    """

    _parameter_constraints = {
        key: value
        for key, value in {**BayesianMLPRegressor._parameter_constraints, **_MODULE_CONSTRAINTS}.items()
        if key not in ("hidden_layer_sizes", "activation")
    }

    def __init__(
        self,
        module=None,
        *,
        input_shape=None,
        inference="mfvi",
        prior_scale=1.0,
        noise="homoscedastic",
        noise_std="learn",
        normalize_y=True,
        batch_size="auto",
        learning_rate_init=3e-3,
        beta_1=0.9,
        beta_2=0.999,
        max_iter="auto",
        n_mc_predict=100,
        early_stopping=False,
        validation_fraction=0.1,
        n_iter_no_change=50,
        tol=1e-4,
        warm_start=False,
        callbacks=None,
        random_state=None,
        verbose=False,
        device="auto",
        dtype=None,
        **module_kwargs,
    ):
        store_init_arguments(self, locals())


    def _validate_training_data(self, X, y, reset):
        # log_predictive_density passes N-D X too
        return super()._validate_training_data(X if reset else self._as_rows(X, reset=False), y, reset)


    @available_if(method_streams)
    def partial_fit(self, X, y):
        """One epoch over a batch of rows (see :meth:`BayesianMLPRegressor.partial_fit`); X may be N-D."""
        self._check_module_kwargs()
        first = not hasattr(self, "module_")
        return super().partial_fit(self._as_rows(X, reset=first), y)


@mlp_doc(module_parameters=_MODULE_DOC)
class BayesianNeuralNetClassifier(NeuralNetModuleMixin, BayesianMLPClassifier):
    """Bayesian neural network classifier around any torch module.

    The estimator of :class:`BayesianMLPClassifier` (categorical likelihood,
    probabilities averaged over weight draws, the uncertainty measures) for
    a network the user builds from plain torch layers; the module returns
    the logits, shape (B, n_classes). See
    :class:`BayesianNeuralNetRegressor` for how each inference method turns
    the module Bayesian.

    Parameters
    ----------
    %(module_parameters)s
    inference : str or InferenceMethod, default="mfvi"
        ``MeanFieldVI``, ``MCDropout``, ``DeepEnsemble`` or ``SGHMC`` (or
        ``"mfvi"``, ``"mc_dropout"``, ``"ensemble"``, ``"sghmc"``); the
        others refuse a module.
    prior_scale, batch_size, learning_rate_init, beta_1, beta_2, max_iter, n_mc_predict, \
early_stopping, validation_fraction, n_iter_no_change, tol, warm_start, callbacks, random_state, \
verbose, device, dtype
        As in :class:`BayesianMLPClassifier`, with this signature's defaults:
        ``prior_scale=%(prior_scale_default)s``, ``early_stopping=%(early_stopping_default)s`` and
        ``n_iter_no_change=%(n_iter_no_change_default)s`` (not the MLP classifier's).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    input_shape_ : tuple of int or None
        Shape of one input the module received.
    %(shared_attributes)s

    Notes
    -----
    ``module_["network"]`` is a
    :class:`~skbayes.nn.networks.BayesianModuleNetwork` (or, for
    ``DeepEnsemble``, a :class:`~skbayes.nn.networks.StackedModuleNetwork`)
    holding the converted module.

    Examples
    --------
    >>> from torch import nn
    >>> from sklearn.datasets import load_digits
    >>> from skbayes import BayesianNeuralNetClassifier
    >>> class LeNet(nn.Sequential):
    ...     def __init__(self, n_outputs):
    ...         super().__init__(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
    ...                          nn.Linear(36, n_outputs))
    >>> X, y = load_digits(return_X_y=True)
    >>> clf = BayesianNeuralNetClassifier(LeNet, input_shape=(1, 8, 8), inference="mc_dropout",
    ...                                   max_iter=2, random_state=0).fit(X / 16, y)
    >>> clf.predict_proba(X[:2] / 16).shape
    (2, 10)
    """

    _parameter_constraints = {
        key: value
        for key, value in {**BayesianMLPClassifier._parameter_constraints, **_MODULE_CONSTRAINTS}.items()
        if key not in ("hidden_layer_sizes", "activation")
    }

    def __init__(
        self,
        module=None,
        *,
        input_shape=None,
        inference="mfvi",
        prior_scale=1.0,
        batch_size="auto",
        learning_rate_init=3e-3,
        beta_1=0.9,
        beta_2=0.999,
        max_iter="auto",
        n_mc_predict=100,
        early_stopping=False,
        validation_fraction=0.1,
        n_iter_no_change=50,
        tol=1e-4,
        warm_start=False,
        callbacks=None,
        random_state=None,
        verbose=False,
        device="auto",
        dtype=None,
        **module_kwargs,
    ):
        store_init_arguments(self, locals())



    @available_if(method_streams)
    def partial_fit(self, X, y, classes=None):
        """One epoch over a batch of rows (see :meth:`BayesianMLPClassifier.partial_fit`); X may be N-D."""
        self._check_module_kwargs()
        first = not hasattr(self, "module_")
        return super().partial_fit(self._as_rows(X, reset=first), y, classes=classes)
