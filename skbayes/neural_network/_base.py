"""Shared glue of the Bayesian MLP estimators: parameters, fitting, Monte-Carlo prediction."""

import inspect
from abc import ABCMeta, abstractmethod
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import BaseEstimator, is_classifier
from sklearn.utils import check_random_state

from .._docstrings import fill_doc
from .._param_validation import TRAINING_CONSTRAINTS, Interval, StrOptions
from ..base import TorchEstimatorMixin, evaluation_mode, hidden_layer_sizes
from ..inference import ALIASES, FitContext, InferenceMethod, ModelSettings, resolve_inference
from ..inference._guards import warn_if_collapsed, warn_if_kl_underestimated
from ..inference._loop import loop_settings
from ..nn import ACTIVATIONS
from ._module import MODULE_CONSTRAINTS, MODULE_PARAMETERS_DOC, ModuleInputMixin

# Weight draws used for the validation score when early stopping.
_N_DRAWS_VALIDATION = 20

# Weight draws at prediction for a method without ``n_mc_predict`` of its own: one with a finite set of
# members (``SGHMC``, ``DeepEnsemble``), which predicts with all of them, or a user's method that has none.
_N_MC_PREDICT = 100

# The parameters shared by both Bayesian MLPs, documented once (numpydoc; the
# placeholders are filled by skbayes._docstrings.fill_doc).
SHARED_PARAMETERS_DOC = """\
hidden_layer_sizes : array-like of int or int, default=%(hidden_layer_sizes_default)s
    Width of each hidden layer; ``()`` gives a Bayesian linear model.
%(module_parameters)s
inference : str or InferenceMethod, default=%(inference_default)s
    How the posterior over the weights is approximated: an object of
    :mod:`skbayes.inference` holding that method's own settings, its
    optimiser and stopping rule included, and for the methods that draw
    weights at prediction the number of draws averaged (``n_mc_predict``;
    ``DeepEnsemble`` and ``SGHMC`` predict with all members), e.g.
    ``MeanFieldVI(init="iblm", max_iter=200)``, ``MCDropout(dropout_rate=0.05)``,
    ``Vadam()``, ``SGHMC(burn_in=500)`` or ``DeepEnsemble(n_estimators=10)``
    (%(methods)s), or the name of one at its defaults: %(aliases)s. The
    object is cloned, never changed, and can be tuned by ``GridSearchCV``
    (``inference__burn_in``, ``inference__learning_rate_init``). The user
    guide compares the methods.
%(activation)s
prior_scale : float, default=%(prior_scale_default)s
    Standard deviation of the zero-mean Gaussian prior on every weight
    and bias (set by the data instead for ``PBP``, which infers it); a
    method with ``prior_scaling="fan_in"`` (``Vadam`` and ``BayesByHypernet``
    by default) divides it by sqrt(fan_in) in a layer of fan_in inputs.
batch_size : int or "auto", default="auto"
    Rows per optimiser step; ``"auto"`` is ``min(32, n_samples)`` up to
    2,000 rows and 128 above, except ``SGHMC()`` with its default
    schedule (a budget of optimiser steps, see
    :class:`~skbayes.inference.SGHMC`): ``min(256, n_samples)``; ``PBP``:
    one row per step.
warm_start : bool, default=False
    Continue the next ``fit`` from the fitted network when the method's
    type and the architecture are unchanged.
callbacks : list of skbayes.callbacks.Callback or None, default=None
    Extra hooks of the training loop (e.g. ``Checkpoint``), run after the
    method's own and the stopping rule.
random_state : int, RandomState instance or None, default=None
    Seeds initialisation, minibatch order, training noise and the
    prediction draws; the global torch seed is never touched.
%(verbose)s
%(device)s
dtype : {"float32", "float64"} or None, default=None
    Precision; None keeps float32 input as float32 and uses float64
    otherwise on the CPU, float32 on accelerators.
compile : bool, default=False
    Compile the training step's loss (forward pass, likelihood, KL or
    prior, and through AOTAutograd its backward pass) with
    :func:`torch.compile`. Its
    compile time (seconds to tens of seconds on a CPU, less when Inductor's
    on-disk cache has the graphs) counts in the fit, so it pays on long
    fits only: on one thread of a 2-core CPU a deep ensemble's epoch took 0.59x and
    SGHMC's 0.73x the uncompiled one, while mean-field VI, MC dropout and
    Vadam, whose steps break the graph, got slower (doc/performance.md).
    The fitted values agree with the uncompiled fit's to about 1e-13
    relatively, not bit for bit. Falls back to the uncompiled loss with a
    ``RuntimeWarning`` when compiling fails."""

# The fitted attributes shared by both Bayesian MLPs.
SHARED_ATTRIBUTES_DOC = """\
module_ : torch.nn.ModuleDict
    The fitted ``"network"`` and ``"likelihood"``.
input_shape_ : tuple of int or None
    Shape of one input the module received (with ``module`` only).
inference_ : InferenceMethod
    The inference method used by the last fit (a clone of ``inference``).
inference_diagnostics_ : dict
    What the method reports about the fit, rebuilt by every fit:
    ``"kl"`` (KL(q || prior) in nats) for ``MeanFieldVI``, ``MCDropout``,
    ``Vadam``, ``PBP`` and ``WHVI``, and its auxiliary upper bound for ``MNF``; ``"prior_std"`` and ``"n_rejected"`` for
    ``PBP``; ``"neg_log_prior"`` (sum(w^2) / (2 prior_scale^2) over all
    members) for ``DeepEnsemble`` and ``SGHMC``; ``"rhat"`` (the largest
    split R-hat of the chains) for ``SGHMC``; with
    ``SGHMC(prior=GPInducedPrior(...))`` also ``"prior_hyperparameters"``,
    ``"w1_trace"`` and ``"prior_kernel"``; ``"kl_knn"`` (the
    nearest-neighbour estimate of KL(q || prior)) for ``BayesByHypernet``;
    ``"kl_discriminator"`` (the discriminators' estimate of KL(q || prior))
    and ``"discriminator_loss"`` for ``BayesByGAN``.
loss_curve_ : list of float
    Per-datum training loss (nats) of each epoch.
%(n_iter_)s
n_seen_ : int
    Training rows the objective counts: ``n_samples`` after ``fit``, the
    running total over ``partial_fit`` calls.
best_loss_ : float or None
    Lowest epoch loss (None when the method stops early).
validation_scores_ : list of float or None
    Mean validation log predictive density per epoch (None unless the
    method's ``early_stopping``).
%(best_validation_score_)s
%(torch_estimator_attributes)s"""



def _doc_default(value):
    """A default value as the docstrings write it: ``"mfvi"`` for a string, else its repr."""
    return f'"{value}"' if isinstance(value, str) else repr(value)


def mlp_doc(**fields):
    """Class decorator inserting the shared sections (and ``fields``) into a Bayesian MLP's docstrings.

    The defaults shown by the shared sections (``%(<name>_default)s``) are read
    from the signature of the class's ``__init__``, so that the classifier and
    the regressor, whose defaults differ, each document their own.
    """

    def decorate(cls):
        defaults = {
            f"{name}_default": _doc_default(parameter.default)
            for name, parameter in inspect.signature(cls.__init__).parameters.items()
            if parameter.default is not inspect.Parameter.empty
        }
        return fill_doc(
            shared_parameters=SHARED_PARAMETERS_DOC,
            module_parameters=MODULE_PARAMETERS_DOC,
            shared_attributes=SHARED_ATTRIBUTES_DOC,
            methods=", ".join(f"``{c.__name__}``" for c in ALIASES.values()),
            aliases=", ".join(f'``"{name}"``' for name in ALIASES),
            **defaults,
            **fields,
        )(cls)

    return decorate


def method_streams(estimator):
    """Whether the estimator's inference method supports ``partial_fit``.

    Used with :func:`sklearn.utils.metaestimators.available_if`, the way
    scikit-learn's MLPs offer ``partial_fit`` only for stochastic solvers:
    with ``SGHMC`` the estimator has no ``partial_fit`` attribute. An unknown
    alias keeps the method available, so that ``fit``-time validation reports it.
    """
    inference = estimator.inference
    cls = ALIASES.get(inference) if isinstance(inference, str) else type(inference)
    if cls is not None and not getattr(cls, "supports_partial_fit", True):
        # raised here, shown as the cause of the AttributeError of available_if
        raise AttributeError(
            f"{cls.__name__} does not support partial_fit; use fit (warm_start=True continues "
            "from the fitted model)."
        )
    return True


def _auto_batch_size(n_samples):
    # 32 rows for the small UCI sets and 128 for the large ones, as in the
    # reference experiments (Cinelli 2019, section 3.7).
    return 32 if n_samples <= 2000 else 128


class BaseBayesianMLP(ModuleInputMixin, TorchEstimatorMixin, BaseEstimator, metaclass=ABCMeta):
    """Base class of the Bayesian MLPs; not for direct use.

    Subclasses provide the likelihood (:meth:`_make_likelihood`) and the
    target encoding; the inference method (:mod:`skbayes.inference`) builds
    and trains the network in the shared loop, and the Monte-Carlo
    prediction machinery lives here.
    """

    _parameter_constraints = {
        "hidden_layer_sizes": ["array-like", Interval(Integral, 1, None, closed="left")],
        **MODULE_CONSTRAINTS,
        "inference": [StrOptions(set(ALIASES)), InferenceMethod],
        "activation": [StrOptions(set(ACTIVATIONS))],
        "prior_scale": [Interval(Real, 0, None, closed="neither")],
        "warm_start": ["boolean"],
        **{
            key: TRAINING_CONSTRAINTS[key]
            for key in ("batch_size", "callbacks", "random_state", "verbose", "device", "dtype")
        },
        "compile": ["boolean"],
    }

    @abstractmethod
    def __init__(
        self,
        hidden_layer_sizes,
        *,
        module,
        module_params,
        input_shape,
        inference,
        activation,
        prior_scale,
        batch_size,
        warm_start,
        callbacks,
        random_state,
        verbose,
        device,
        dtype,
        compile,
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.module = module
        self.module_params = module_params
        self.input_shape = input_shape
        self.inference = inference
        self.activation = activation
        self.prior_scale = prior_scale
        self.batch_size = batch_size
        self.warm_start = warm_start
        self.callbacks = callbacks
        self.random_state = random_state
        self.verbose = verbose
        self.device = device
        self.dtype = dtype
        self.compile = compile

    # ----------------------------------------------------------- subclass hooks
    @abstractmethod
    def _make_likelihood(self, n_outputs, device, dtype, n_members=None):
        """The likelihood module: ``log_prob(Y, f) -> (..., n)`` in nats.

        ``n_members`` (when not None) asks for one noise level per member of
        a finite network (see :class:`~skbayes.nn.GaussianLikelihood`).
        """

    def _learn_noise(self):
        """Whether the likelihood's noise is learned."""
        return False

    def _network_width(self, n_outputs):
        """Number of network outputs for ``n_outputs`` targets (or classes): the same by default."""
        return n_outputs

    # ------------------------------------------------------------------ fitting
    def _auto_batch_size(self, n_samples):
        method = getattr(self, "inference_", None)  # set by fit and partial_fit before the loop asks
        if method is None:
            method = resolve_inference(self.inference)
        batch_size = method.auto_batch_size()
        return _auto_batch_size(n_samples) if batch_size is None else batch_size

    def _inference_method(self):
        """The validated inference method, refused with a clear message if it cannot classify."""
        method = resolve_inference(self.inference)
        if is_classifier(self) and not method.supports_classification:
            usable = sorted(name for name, cls in ALIASES.items() if cls.supports_classification)
            raise ValueError(
                f"{type(self).__name__} cannot use inference={self.inference!r}: "
                f"{type(method).__name__} supports regression only. Choose one of "
                f"{', '.join(c.__name__ for c in ALIASES.values() if c.supports_classification)} "
                f"(or the aliases {usable})."
            )
        return method

    def _architecture(self):
        """The :class:`ModelSettings` fields that describe the network (the MLP's, or the module's)."""
        if self.module is not None:
            return self._module_architecture()
        return {
            "hidden_layer_sizes": tuple(hidden_layer_sizes(self.hidden_layer_sizes, "a Bayesian linear model")),
            "activation": self.activation,
        }

    def _settings(self):
        return ModelSettings(
            **self._architecture(),
            prior_scale=float(self.prior_scale),
            learn_noise=self._learn_noise(),
            batch_size=self.batch_size,
            classification=is_classifier(self),
        )

    def _build_module(self, method, settings, n_features, n_outputs, seed, device, dtype):
        if self.module is not None:
            self._signature = self._network_signature(method)
        factory = {"device": device, "dtype": dtype}
        build = method.build_network if settings.module is None else method.build_module_network
        width = self._network_width(n_outputs)
        network = build(n_features, width, settings, generator=self._generator(seed), **factory)
        likelihood = self._make_likelihood(n_outputs, n_members=method.n_likelihood_members(), **factory)
        return torch.nn.ModuleDict({"network": network, "likelihood": likelihood})

    def _n_targets(self, Y):
        """The number of targets k of encoded targets Y (n, k): its columns (the classes for a classifier)."""
        return Y.shape[1]

    def _can_warm_start(self, X, Y):
        # The network is not rebuilt from settings stored at initialisation: a warm start needs the same
        # inference method (and its structure: flows, generators), input width and output width.
        if not (self.warm_start and hasattr(self, "module_")):
            return False
        method, n_features, n_outputs = self._inference_method(), X.shape[1], self._n_targets(Y)
        if type(getattr(self, "inference_", None)) is not type(method) or not method.can_warm_start(self.module_):
            return False
        network, width = self.module_["network"], self._network_width(n_outputs)
        if self.module is not None or hasattr(network, "n_features"):  # a torch module's network
            return (
                hasattr(network, "n_features") and network.n_features == n_features and network.n_outputs == width
                and getattr(self, "_signature", None) == self._network_signature(method)
            )
        return network.layers[0].in_features == n_features and network.layers[-1].out_features == width

    def _fit_network(self, X, Y, n_outputs, method):
        """Fit ``module_`` to validated X (n, d) and encoded targets Y (n, k).

        ``n_outputs`` is the number of targets k for regression (the network
        has ``_network_width(k)`` outputs), the number of classes for
        classification; ``method`` the resolved
        inference method, which builds and trains the network in the shared
        loop.
        """
        n_samples, n_features = X.shape
        settings = self._settings()
        rng = check_random_state(self.random_state)
        init_seed, noise_seed, shuffle_seed, predict_seed, split_seed = self._seeds(rng, 5)
        device = self._resolve_device()
        dtype = self._resolve_dtype(X.dtype, device)
        warm_start = self._can_warm_start(X, Y)
        if not warm_start:
            self.module_ = self._build_module(method, settings, n_features, n_outputs, init_seed, device, dtype)
        self.device_ = device
        self.dtype_ = str(dtype).removeprefix("torch.")
        self._predict_seed = predict_seed
        self.inference_ = method
        self._optimizer_state = None

        rule = method.stopping_rule(is_classifier(self))
        early_stopping = rule["early_stopping"]
        train_idx, val_idx = np.arange(n_samples), None
        if early_stopping:
            train_idx, val_idx = self._validation_split(n_samples, split_seed, rule["validation_fraction"])
        X_train, Y_train = self._to_tensor(X[train_idx]), self._to_tensor(Y[train_idx])
        n_train = len(train_idx)

        loop = {}
        if val_idx is not None:
            X_val, Y_val = self._to_tensor(X[val_idx]), self._to_tensor(Y[val_idx])
            n_draws = min(self._n_mc_predict(), _N_DRAWS_VALIDATION)

            def validation_score_fn():
                with evaluation_mode(self.module_):  # e.g. batch normalisation with its running statistics
                    return float(self._log_predictive(X_val, Y_val, n_draws, predict_seed).mean())

            loop["validation_score_fn"] = validation_score_fn
            loop["module"] = self.module_
        context = FitContext(
            generator=self._generator(noise_seed, device),
            n_data=n_train,
            batch_size=self._batch_size(n_train),
            warm_start=warm_start,
            early_stopping=early_stopping,
            validation=(X_val, Y_val) if val_idx is not None else None,
        )
        result, _ = self._train(method, settings, X_train, Y_train, context, shuffle_seed, loop)
        self._store_training_result(result, n_seen=n_train)
        return self

    def _warn_if_collapsed(self, X, y):
        """After ``fit``: the collapse guards of the ELBO-trained methods.

        See ``skbayes.inference._guards.warn_if_collapsed`` (the methods with
        ``collapse_guard`` only) and ``warn_if_kl_underestimated`` (the
        methods that report ``"n_kl_checked_layers"``).
        """
        warn_if_kl_underestimated(self)
        if getattr(self.inference_, "collapse_guard", False):
            diagnostics = self.inference_diagnostics_
            warn_if_collapsed(self, X, y, is_classifier(self), kl=diagnostics.get("kl", diagnostics.get("kl_knn")))

    def _loop_settings(self, steps_per_epoch=None):
        # the stopping settings are the inference method's (those of the fit under way)
        return loop_settings(self.inference_, is_classifier(self))

    def _train(self, method, settings, X, Y, context, shuffle_seed, loop):
        """Prepare the method, run the shared loop, store the results."""
        training = method.prepare(self.module_, X, Y, settings, context)
        if self._optimizer_state is not None:
            training.optimizer.load_state_dict(self._optimizer_state)
        result, diagnostics, phase = None, {}, training
        while phase is not None:  # the method's phases, one after the other (Training.then)
            self.module_.train()
            try:
                phase_result = self._fit_loop(
                    phase.loss_fn,
                    phase.optimizer,
                    X.shape[0],
                    shuffle_seed=shuffle_seed,
                    callbacks=phase.callbacks,
                    **{**loop, **phase.loop},
                )
            finally:
                self.module_.eval()
            if result is None:
                result = phase_result
            else:
                result.loss_curve += phase_result.loss_curve
                result.n_iter += phase_result.n_iter
            diagnostics.update(phase.finish() if phase.finish is not None else {})
            phase, shuffle_seed = (phase.then() if phase.then is not None else None), shuffle_seed + 1
        self.inference_diagnostics_ = diagnostics
        return result, training

    def _partial_fit_network(self, X, Y, n_outputs, method, first):
        """One epoch of ``method`` on the rows X, Y; the first call builds the module.

        Reached only for methods that stream: ``partial_fit`` exists only then
        (:func:`method_streams`).
        """
        settings = self._settings()
        if first:
            seeds = self._seeds(check_random_state(self.random_state), 5)
            device = self._resolve_device()
            dtype = self._resolve_dtype(X.dtype, device)
            self.module_ = self._build_module(method, settings, X.shape[1], n_outputs, seeds[0], device, dtype)
            self.device_, self.dtype_ = device, str(dtype).removeprefix("torch.")
            self._predict_seed, self._partial_seeds = seeds[3], (seeds[1], seeds[2])
            self.inference_ = method
            self._optimizer_state = None
            self.loss_curve_, self.n_iter_, self.n_seen_ = [], 0, 0
            self.best_loss_ = self.validation_scores_ = self.best_validation_score_ = None
        elif type(method) is not type(self.inference_):
            raise ValueError(
                f"partial_fit continues the fitted {type(self.inference_).__name__}; got "
                f"inference={self.inference!r}. Call fit to change the method."
            )
        noise_seed, shuffle_seed = getattr(self, "_partial_seeds", self._seeds(check_random_state(self.random_state), 2))
        X_t, Y_t = self._to_tensor(X), self._to_tensor(Y)

        def train(n_data, offset, **loop):
            context = FitContext(
                generator=self._generator(noise_seed + offset, self.device_),
                n_data=n_data,
                batch_size=self._batch_size(X.shape[0]),
                warm_start=not first,
                epochs_done=offset,
            )
            result, training = self._train(method, settings, X_t, Y_t, context, shuffle_seed + offset, loop)
            self._optimizer_state = training.optimizer.state_dict()
            return result

        self._stream_epoch(train, X.shape[0])
        return self

    # --------------------------------------------------------------- prediction
    def _n_mc_predict(self):
        """Weight draws per prediction: the fitted method's ``n_mc_predict``.

        The methods whose network draws its weights at prediction hold it
        (``MeanFieldVI(n_mc_predict=...)``, ...). A method with a finite set
        of members (``SGHMC``, ``DeepEnsemble``) has none: it predicts with
        all members and the count goes unused (:meth:`_draw_parameters`). The
        fallback, 100 (the estimators' own ``n_mc_predict`` before it moved
        to the methods), also serves a user's method without the parameter.
        """
        return getattr(self.inference_, "n_mc_predict", _N_MC_PREDICT)

    def _draw_parameters(self, n_draws, seed, all_members=True):
        """Weight draws shared by all rows, and the member index of each draw.

        For a network with a finite set of members (``n_members``: an
        ensemble, kept Monte-Carlo samples) and ``all_members=True`` the draws
        are all members in order (the exact mixture) and the index is None;
        for a network whose outputs are Gaussian (``quadrature_parameters``
        not None: PBP's moment-matched predictive) and ``all_members=True``,
        ``n_draws`` deterministic quadrature nodes of that Gaussian; otherwise ``n_draws`` draws from a generator seeded with ``seed``
        (member indices drawn with replacement for a finite network, the
        index tensor returned so that per-member noise can follow).
        """
        network = self.module_["network"]
        finite = hasattr(network, "n_members")
        with torch.no_grad():
            if finite and all_members:
                return network.member_parameters(), None
            if all_members and hasattr(network, "quadrature_parameters"):
                nodes = network.quadrature_parameters(n_draws)
                if nodes is not None:
                    return nodes, None
            # A CPU generator: the same draws on every device, so that a model
            # fitted on a GPU predicts the same after loading on a CPU.
            generator = self._generator(seed)
            if finite:
                index = torch.randint(network.n_members, (n_draws,), generator=generator).to(self.device_)
                return network.member_parameters(index), index
            return network.sample_parameters(n_draws, generator), None

    def _over_draws(self, X, fn, n_draws=None, seed=None, parameters=None):
        """Apply ``fn(f, rows)`` to the network's outputs under shared weight draws, row block by row block.

        ``f`` has shape (n_draws, n_block_rows, width), width the network's
        outputs (2k for heteroscedastic regression); the weight draws
        (``parameters``, else :meth:`_draw_parameters` with ``n_draws`` and
        ``seed``) are shared by all rows, so a row's values do not depend on
        the other rows. Memory is bounded by a constant (see
        :meth:`_predict_in_blocks`); the results come back as numpy arrays.
        """
        network = self.module_["network"]
        if parameters is None:
            parameters, _ = self._draw_parameters(n_draws, seed)
        row_size = network.prediction_row_size(parameters) if hasattr(network, "prediction_row_size") else None
        if row_size is None:  # weight draws of an MLP
            n_drawn = parameters[0][0].shape[0]
            width = max(max(layer.in_features, layer.out_features) for layer in network.layers)
            row_size = 2 * n_drawn * width  # the layer's input and output are held at once
        return self._predict_in_blocks(X, lambda x, rows: fn(network.forward_with(x, parameters), rows), row_size=row_size)

    def _log_predictive(self, X, Y, n_draws, seed):
        """log (1/T) sum_t p(y_i | f_t(x_i)) for each row, an array of shape (n,).

        The Monte-Carlo estimate of the log predictive density (Gal 2016,
        eq. 3.18), in the model's (encoded) units; Y is a tensor.
        """
        likelihood = self.module_["likelihood"]

        def log_mean_density(f, rows):
            return torch.logsumexp(likelihood.log_prob(Y[rows], f), dim=0) - np.log(f.shape[0])

        return self._over_draws(X, log_mean_density, n_draws, seed)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags
