"""Shared glue of the Bayesian MLP estimators: parameters, fitting, MC draws."""

from abc import ABCMeta, abstractmethod
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import BaseEstimator, is_classifier
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from .._param_validation import EARLY_STOPPING_CONSTRAINTS, TRAINING_CONSTRAINTS, Interval, StrOptions
from .._training import fit_loop
from ..base import TorchEstimatorMixin
from ..nn import ACTIVATIONS, INITIALIZATIONS
from ._inference import INFERENCE_METHODS, get_inference_method

# Rows x Monte-Carlo draws x units held at once when predicting (~32 MB in float64).
_PREDICT_BLOCK = 2**22
# Weight draws used for the validation score when early stopping.
_N_SAMPLES_VALIDATION = 20


def _auto_batch_size(n_samples):
    # 32 rows for the small UCI sets and 128 for the large ones, as in the
    # reference experiments (Cinelli 2019, section 3.7).
    return 32 if n_samples <= 2000 else 128


class BaseBayesianMLP(TorchEstimatorMixin, BaseEstimator, metaclass=ABCMeta):
    """Base class of the Bayesian MLPs; not for direct use.

    Subclasses provide the likelihood (:meth:`_make_likelihood`) and the target
    encoding; the network, the objective, the training loop and the Monte-Carlo
    prediction machinery live here.
    """

    _parameter_constraints = {
        "hidden_layer_sizes": ["array-like", Interval(Integral, 1, None, closed="left")],
        "inference": [StrOptions(set(INFERENCE_METHODS))],
        "init": [StrOptions(set(INITIALIZATIONS))],
        "kl_warmup_epochs": [Interval(Integral, 0, None, closed="left")],
        "beta_1": [Interval(Real, 0, 1, closed="left")],
        "beta_2": [Interval(Real, 0, 1, closed="left")],
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "n_chains": [Interval(Integral, 1, None, closed="left")],
        "burn_in": [Interval(Integral, 0, None, closed="left")],
        "thinning": [Interval(Integral, 1, None, closed="left")],
        "n_kept_samples": [Interval(Integral, 1, None, closed="left")],
        "friction": [Interval(Real, 0, 1, closed="right")],
        "step_size": [Interval(Real, 0, None, closed="neither")],
        "activation": [StrOptions(set(ACTIVATIONS))],
        "prior_scale": [Interval(Real, 0, None, closed="neither")],
        "posterior_init_scale": [Interval(Real, 0, None, closed="neither")],
        "dropout_rate": [Interval(Real, 0, 1, closed="left")],
        "n_samples_train": [Interval(Integral, 1, None, closed="left")],
        "n_samples_predict": [Interval(Integral, 1, None, closed="left")],
        "warm_start": ["boolean"],
        **TRAINING_CONSTRAINTS,
        "max_iter": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        **EARLY_STOPPING_CONSTRAINTS,
    }

    @abstractmethod
    def __init__(
        self,
        hidden_layer_sizes,
        *,
        inference,
        activation,
        prior_scale,
        posterior_init_scale,
        dropout_rate,
        init,
        kl_warmup_epochs,
        n_estimators,
        n_chains,
        burn_in,
        thinning,
        n_kept_samples,
        friction,
        step_size,
        batch_size,
        learning_rate_init,
        beta_1,
        beta_2,
        max_iter,
        n_samples_train,
        n_samples_predict,
        early_stopping,
        validation_fraction,
        n_iter_no_change,
        tol,
        warm_start,
        random_state,
        verbose,
        device,
        dtype,
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.inference = inference
        self.activation = activation
        self.prior_scale = prior_scale
        self.posterior_init_scale = posterior_init_scale
        self.dropout_rate = dropout_rate
        self.init = init
        self.kl_warmup_epochs = kl_warmup_epochs
        self.n_estimators = n_estimators
        self.n_chains = n_chains
        self.burn_in = burn_in
        self.thinning = thinning
        self.n_kept_samples = n_kept_samples
        self.friction = friction
        self.step_size = step_size
        self.batch_size = batch_size
        self.learning_rate_init = learning_rate_init
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.max_iter = max_iter
        self.n_samples_train = n_samples_train
        self.n_samples_predict = n_samples_predict
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.warm_start = warm_start
        self.random_state = random_state
        self.verbose = verbose
        self.device = device
        self.dtype = dtype

    # ----------------------------------------------------------- subclass hooks
    @abstractmethod
    def _make_likelihood(self, n_outputs, device, dtype, n_members=None):
        """The likelihood module: ``log_prob(Y, f) -> (..., n)`` in nats.

        ``n_members`` (when not None) asks for one noise level per member of
        a finite network (see :class:`~skbayes.nn.GaussianLikelihood`).
        """

    # ------------------------------------------------------------------ fitting
    def _hidden_sizes(self):
        sizes = self.hidden_layer_sizes
        sizes = [sizes] if isinstance(sizes, Integral) else list(sizes)
        if not all(isinstance(s, Integral) and s >= 1 for s in sizes):
            raise ValueError(
                "hidden_layer_sizes must hold positive integers (an empty tuple gives "
                f"a Bayesian linear model); got {self.hidden_layer_sizes!r}."
            )
        return [int(s) for s in sizes]

    def _inference_method(self):
        method = get_inference_method(self.inference)
        if is_classifier(self) and not method.supports_classification:
            raise ValueError(
                f"inference={self.inference!r} supports regression only; choose one of "
                f"{sorted(n for n in INFERENCE_METHODS if get_inference_method(n).supports_classification)} "
                f"for {type(self).__name__}."
            )
        return method(self)

    def _build_module(self, method, n_features, n_outputs, seed, device, dtype):
        factory = {"device": device, "dtype": dtype}
        network = method.build_network(
            n_features, self._hidden_sizes(), n_outputs, generator=self._generator(seed), **factory
        )
        likelihood = self._make_likelihood(n_outputs, n_members=method.n_likelihood_members(), **factory)
        return torch.nn.ModuleDict({"network": network, "likelihood": likelihood})

    def _can_warm_start(self, n_features, n_outputs, method=None):
        if not (self.warm_start and hasattr(self, "module_")):
            return False
        if getattr(self, "_fitted_inference", self.inference) != self.inference:
            return False
        if method is not None and not method.can_warm_start(self.module_):
            return False
        first, last = self.module_["network"].layers[0], self.module_["network"].layers[-1]
        return first.in_features == n_features and last.out_features == n_outputs

    def _fit_network(self, X, Y, n_outputs):
        """Fit ``module_`` to validated X (n, d) and encoded targets Y (n, k).

        ``n_outputs`` is the network's output width (k for regression, the
        number of classes for classification). The inference method named by
        ``inference`` builds and trains the network in the shared loop.
        """
        method = self._inference_method()
        n_samples, n_features = X.shape
        rng = check_random_state(self.random_state)
        init_seed, noise_seed, shuffle_seed, predict_seed, split_seed = self._seeds(rng, 5)
        device = self._resolve_device()
        dtype = self._resolve_dtype(X.dtype, device)
        method.warm_started = self._can_warm_start(n_features, n_outputs, method)
        if not method.warm_started:
            self.module_ = self._build_module(method, n_features, n_outputs, init_seed, device, dtype)
        self.device_ = device
        self.dtype_ = str(dtype).removeprefix("torch.")
        self._predict_seed = predict_seed
        self._fitted_inference = self.inference

        train_idx, val_idx = np.arange(n_samples), None
        if self.early_stopping and method.supports_early_stopping:
            train_idx, val_idx = self._validation_split(n_samples, split_seed)
        X_train, Y_train = self._to_tensor(X[train_idx]), self._to_tensor(Y[train_idx])
        n_train = len(train_idx)

        validation_score_fn = None
        if val_idx is not None:
            X_val, Y_val = X[val_idx], self._to_tensor(Y[val_idx])

            def validation_score_fn():
                n_draws = min(self.n_samples_predict, _N_SAMPLES_VALIDATION)
                return float(self._log_predictive(X_val, Y_val, n_draws, predict_seed).mean())

        batch_size = _auto_batch_size(n_train) if self.batch_size == "auto" else self.batch_size
        loop = {
            "n_samples": n_train,
            "batch_size": min(batch_size, n_train),
            "max_iter": method.default_max_iter if self.max_iter == "auto" else self.max_iter,
            "generator": self._generator(shuffle_seed),
            "device": device,
            "tol": self.tol,
            "n_iter_no_change": self.n_iter_no_change,
            "validation_score_fn": validation_score_fn,
            "module": self.module_,
            "verbose": self.verbose,
            "estimator_name": type(self).__name__,
        }
        self.module_.train()
        result = method.fit(
            self.module_, X_train, Y_train, noise_generator=self._generator(noise_seed, device), loop=loop
        )
        self.module_.eval()
        self._store_training_result(result)
        network = self.module_["network"]
        # StackedMLP members are point estimates: their penalty is a negative log prior, not a KL
        penalty = network.neg_log_prior if hasattr(network, "neg_log_prior") else network.kl
        self.kl_ = float(penalty().detach())
        for name, value in method.diagnostics.items():
            setattr(self, f"{name}_", value)
        return self

    # --------------------------------------------------------------- prediction
    def _validate_X_predict(self, X):
        check_is_fitted(self)
        return validate_data(self, X, reset=False, dtype=(np.float64, np.float32))

    def _draw_parameters(self, n_samples, seed, all_members=True):
        """Weight draws shared by all rows, and the member index of each draw.

        For a network with a finite set of members (``n_members``: an
        ensemble, kept Monte-Carlo samples) and ``all_members=True`` the draws
        are all members in order (the exact mixture) and the index is None;
        otherwise ``n_samples`` draws from a generator seeded with ``seed``
        (member indices drawn with replacement for a finite network, the
        index tensor returned so that per-member noise can follow).
        """
        network = self.module_["network"]
        finite = hasattr(network, "n_members")
        with torch.no_grad():
            if finite and all_members:
                return network.member_parameters(), None
            generator = self._generator(seed, self.device_)
            if finite:
                index = torch.randint(network.n_members, (n_samples,), generator=generator, device=self.device_)
                return network.member_parameters(index), index
            return network.sample_parameters(n_samples, generator), None

    def _function_draws(self, X, n_samples, seed, parameters=None):
        """Yield ``(rows, f)`` with f of shape (n_draws, len(rows), n_outputs).

        The weight draws (``parameters``, else :meth:`_draw_parameters` with
        ``n_samples`` and ``seed``) are shared by all rows, so a row's values
        do not depend on the other rows; rows are processed in blocks to
        bound memory.
        """
        network = self.module_["network"]
        if parameters is None:
            parameters, _ = self._draw_parameters(n_samples, seed)
        n_draws = parameters[0][0].shape[0]
        width = max(layer.out_features for layer in network.layers)
        block = max(1, _PREDICT_BLOCK // (n_draws * width))
        with torch.no_grad():
            for start in range(0, X.shape[0], block):
                rows = slice(start, start + block)
                yield rows, network.forward_with(self._to_tensor(X[rows]), parameters)

    def _log_predictive(self, X, Y, n_samples, seed):
        """log (1/T) sum_t p(y_i | f_t(x_i)) for each row, a tensor of shape (n,).

        The Monte-Carlo estimate of the log predictive density (Gal 2016,
        eq. 3.18), in the model's (encoded) units.
        """
        likelihood = self.module_["likelihood"]
        out = []
        with torch.no_grad():
            for rows, f in self._function_draws(X, n_samples, seed):
                log_p = likelihood.log_prob(Y[rows], f)
                out.append(torch.logsumexp(log_p, dim=0) - np.log(f.shape[0]))
        return torch.cat(out)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags
