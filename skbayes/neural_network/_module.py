"""The torch-module path of the Bayesian MLP estimators (``module=``): input shapes and the module factory."""

import math

import numpy as np
from sklearn.utils.validation import check_is_fitted
from torch import nn

from ..inference._loop import ADAM_CONSTRAINTS, STOPPING_CONSTRAINTS
from ..nn.networks.module import build_module, factory_accepts

__all__ = ["MODULE_CONSTRAINTS", "MODULE_PARAMETERS_DOC", "ModuleInputMixin"]

# The names a module factory may take to learn the data's widths.
_DATA_ARGUMENTS = ("n_features", "n_outputs", "input_shape")

MODULE_PARAMETERS_DOC = """\
module : torch.nn.Module class, callable or instance, default=None
    A network built from plain torch layers instead of the MLP of
    ``hidden_layer_sizes`` and ``activation`` (both unused then):
    ``module(**module_params)`` must return a :class:`torch.nn.Module`
    mapping inputs of shape ``(B, *input_shape)`` (or ``(B, n_features)``)
    to ``(B, n_outputs)`` (the number of targets, or of classes: the
    logits). A factory that takes ``n_features``, ``n_outputs`` or
    ``input_shape`` and is not given them receives the data's values. An
    instance is copied (and re-initialised by its layers'
    ``reset_parameters`` for each ensemble member). The inference method
    makes it Bayesian: ``MCDropout`` keeps its dropout on and adds more
    (``placement``), ``MeanFieldVI`` swaps its Linear and Conv2d layers for
    mean-field ones, ``DeepEnsemble`` trains copies of it and ``SGHMC``
    samples copies of it; another method, or a layer a method cannot
    handle, raises ValueError in ``fit``. None: the MLP.
module_params : dict or None, default=None
    Keyword arguments of ``module`` (e.g. ``{"n_filters": 16}``), tuned by
    ``GridSearchCV`` as whole dicts (``{"module_params": [{"n_filters":
    8}, {"n_filters": 16}]}``); a name the module does not take raises
    TypeError in ``fit``.
input_shape : tuple of int, default=None
    Shape of one input of ``module``: the rows of a 2-D X (scikit-learn's
    contract) are reshaped to it, e.g. ``(1, 28, 28)`` for flattened
    images. None: with a module, X may also be 3-D or 4-D
    (``(n_samples, *input_shape)``), and is then flattened to rows and its
    trailing shape used; 2-D rows are fed as they are."""

MODULE_CONSTRAINTS = {
    "module": [None, callable, nn.Module],
    "module_params": [dict, None],
    "input_shape": [None, tuple, list],
}


class ModuleInputMixin:
    """The glue of the ``module=`` path of the Bayesian MLPs.

    Reshapes N-D input to rows (and rows to ``input_shape``), builds the
    :class:`~skbayes.inference.ModelSettings` whose ``module`` the inference
    methods turn Bayesian, and records what a warm start must find
    unchanged. With ``module=None`` every method here leaves the MLP path as
    it is.
    """

    def _as_rows(self, X, reset):
        """N-D array-like X -> 2-D rows, recording (``reset``) or checking the input shape (module path only)."""
        if self.module is None or (not hasattr(X, "shape") and not isinstance(X, (list, tuple))):
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
        if self.module is not None:
            check_is_fitted(self)  # before _as_rows, which reads the fitted input shape
            X = self._as_rows(X, reset=False)
        return super()._validate_X_predict(X)

    def _module_architecture(self):
        """The :class:`ModelSettings` fields of the module path (after the validation of X)."""
        input_shape = self._resolved_input_shape()
        if input_shape is not None and math.prod(input_shape) != self.n_features_in_:
            raise ValueError(
                f"input_shape {input_shape} holds {math.prod(input_shape)} values, but X has "
                f"{self.n_features_in_} features."
            )
        self.input_shape_ = input_shape
        factory, kwargs = self.module, dict(self.module_params or {})

        def build(seed, n_features, n_outputs, device, dtype):
            given = dict(kwargs)
            data = {"n_features": n_features, "n_outputs": n_outputs, "input_shape": input_shape}
            for name in _DATA_ARGUMENTS:
                if name not in given and factory_accepts(factory, name):
                    given[name] = data[name]
            return build_module(factory, given, seed=seed, device=device, dtype=dtype)

        # the MLP fields are unused: the method builds the network from the module
        return {"hidden_layer_sizes": (), "activation": "relu", "module": build, "input_shape": input_shape}

    def _network_signature(self, method):
        """What a module's network was built from: a warm start needs it unchanged (the loop settings may change)."""
        method_params = {
            key: value for key, value in method.get_params(deep=False).items()
            if key not in ADAM_CONSTRAINTS and key not in STOPPING_CONSTRAINTS
        }
        return repr((self.module, sorted((self.module_params or {}).items()), self._resolved_input_shape(),
                     type(method).__name__, sorted(method_params.items())))
