"""Shared glue of the Bayesian MLP estimators: parameters, fitting, MC draws."""

from abc import ABCMeta, abstractmethod
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from .._param_validation import EARLY_STOPPING_CONSTRAINTS, TRAINING_CONSTRAINTS, Interval, StrOptions
from .._training import fit_loop
from ..base import TorchEstimatorMixin
from ..nn import BayesianMLP, negative_elbo
from ..nn.mlp import ACTIVATIONS

# Rows x Monte-Carlo draws x units held at once when predicting (~32 MB in float64).
_PREDICT_BLOCK = 2**22
# Weight draws used for the validation score when early stopping.
_N_SAMPLES_VALIDATION = 20


def minibatch_loss(module, x, y, n_data, n_mc=1, generator=None):
    """Per-datum negative ELBO of one minibatch (Gal 2016, eq. 3.2 over N).

    Parameters
    ----------
    module : torch.nn.ModuleDict
        With a ``"network"`` (:class:`~skbayes.nn.BayesianMLP`) and a
        ``"likelihood"``.
    x : torch.Tensor of shape (batch_size, n_features)
    y : torch.Tensor of shape (batch_size, n_outputs)
        Encoded targets, as the likelihood expects them.
    n_data : int
        Number of training rows N; the KL is divided by N, not batch_size.
    n_mc : int, default=1
        Monte-Carlo draws per row.
    generator : torch.Generator, optional

    Returns
    -------
    loss : torch.Tensor, scalar
    """
    network, likelihood = module["network"], module["likelihood"]
    f = network(x.expand(n_mc, *x.shape), generator=generator)
    return negative_elbo(likelihood.log_prob(y, f), network.kl(), n_data)


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
        "inference": [StrOptions({"mfvi", "mc_dropout"})],
        "activation": [StrOptions(set(ACTIVATIONS))],
        "prior_scale": [Interval(Real, 0, None, closed="neither")],
        "posterior_init_scale": [Interval(Real, 0, None, closed="neither")],
        "dropout_rate": [Interval(Real, 0, 1, closed="left")],
        "n_samples_train": [Interval(Integral, 1, None, closed="left")],
        "n_samples_predict": [Interval(Integral, 1, None, closed="left")],
        "warm_start": ["boolean"],
        **TRAINING_CONSTRAINTS,
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
        batch_size,
        learning_rate_init,
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
        self.batch_size = batch_size
        self.learning_rate_init = learning_rate_init
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
    def _make_likelihood(self, n_outputs, device, dtype):
        """The likelihood module: ``log_prob(Y, f) -> (..., n)`` in nats."""

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

    def _build_module(self, n_features, n_outputs, seed, device, dtype):
        factory = {"device": device, "dtype": dtype}
        network = BayesianMLP(
            n_features,
            self._hidden_sizes(),
            n_outputs,
            inference=self.inference,
            activation=self.activation,
            prior_scale=self.prior_scale,
            posterior_init_scale=self.posterior_init_scale,
            dropout_rate=self.dropout_rate,
            generator=self._generator(seed),
            **factory,
        ).to(device)
        likelihood = self._make_likelihood(n_outputs, **factory)
        return torch.nn.ModuleDict({"network": network, "likelihood": likelihood})

    def _can_warm_start(self, n_features, n_outputs):
        if not (self.warm_start and hasattr(self, "module_")):
            return False
        first, last = self.module_["network"].layers[0], self.module_["network"].layers[-1]
        return first.in_features == n_features and last.out_features == n_outputs

    def _fit_network(self, X, Y, n_outputs):
        """Fit ``module_`` to validated X (n, d) and encoded targets Y (n, k).

        ``n_outputs`` is the network's output width (k for regression, the
        number of classes for classification).
        """
        n_samples, n_features = X.shape
        rng = check_random_state(self.random_state)
        init_seed, noise_seed, shuffle_seed, predict_seed, split_seed = self._seeds(rng, 5)
        device = self._resolve_device()
        dtype = self._resolve_dtype(X.dtype, device)
        if not self._can_warm_start(n_features, n_outputs):
            self.module_ = self._build_module(n_features, n_outputs, init_seed, device, dtype)
        self.device_ = device
        self.dtype_ = str(dtype).removeprefix("torch.")
        self._predict_seed = predict_seed

        train_idx, val_idx = np.arange(n_samples), None
        if self.early_stopping:
            train_idx, val_idx = self._validation_split(n_samples, split_seed)
        X_train, Y_train = self._to_tensor(X[train_idx]), self._to_tensor(Y[train_idx])
        n_train = len(train_idx)
        network = self.module_["network"]
        noise_generator = self._generator(noise_seed, device)

        def loss_fn(idx):
            return minibatch_loss(
                self.module_, X_train[idx], Y_train[idx], n_train, self.n_samples_train, noise_generator
            )

        validation_score_fn = None
        if val_idx is not None:
            X_val, Y_val = X[val_idx], self._to_tensor(Y[val_idx])

            def validation_score_fn():
                n_draws = min(self.n_samples_predict, _N_SAMPLES_VALIDATION)
                return float(self._log_predictive(X_val, Y_val, n_draws, predict_seed).mean())

        optimizer = torch.optim.Adam(self.module_.parameters(), lr=self.learning_rate_init)
        batch_size = _auto_batch_size(n_train) if self.batch_size == "auto" else self.batch_size
        batch_size = min(batch_size, n_train)
        self.module_.train()
        result = fit_loop(
            loss_fn,
            optimizer,
            n_train,
            batch_size=batch_size,
            max_iter=self.max_iter,
            generator=self._generator(shuffle_seed),
            device=device,
            tol=self.tol,
            n_iter_no_change=self.n_iter_no_change,
            validation_score_fn=validation_score_fn,
            module=self.module_,
            verbose=self.verbose,
            estimator_name=type(self).__name__,
        )
        self.module_.eval()
        self._store_training_result(result)
        self.kl_ = float(network.kl().detach())
        return self

    # --------------------------------------------------------------- prediction
    def _validate_X_predict(self, X):
        check_is_fitted(self)
        return validate_data(self, X, reset=False, dtype=(np.float64, np.float32))

    def _function_draws(self, X, n_samples, seed):
        """Yield ``(rows, f)`` with f of shape (n_samples, len(rows), n_outputs).

        The ``n_samples`` weight draws come from a generator seeded with
        ``seed`` and are shared by all rows, so a row's values do not depend on
        the other rows; rows are processed in blocks to bound memory.
        """
        network = self.module_["network"]
        width = max(layer.out_features for layer in network.layers)
        block = max(1, _PREDICT_BLOCK // (n_samples * width))
        with torch.no_grad():
            parameters = network.sample_parameters(n_samples, self._generator(seed, self.device_))
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
                out.append(torch.logsumexp(log_p, dim=0) - np.log(n_samples))
        return torch.cat(out)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags
