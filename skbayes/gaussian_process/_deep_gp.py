"""DeepGPRegressor: deep Gaussian process regression with doubly stochastic variational inference."""

from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.gaussian_process.kernels import Kernel
from sklearn.utils import Bunch, check_random_state
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from .._docstrings import fill_doc
from .._param_validation import (
    N_DRAWS,
    TRAINING_CONSTRAINTS,
    Interval,
    StrOptions,
    _fit_context,
    validate_method_params,
)
from ..inference import SampledSparseGP, SparseVariational, resolve_gp_inference
from .._predictive import MixturePredictive
from ..base import PredictiveRegressorMixin, TorchEstimatorMixin, target_scaling
from ..nn import SVGP, DeepGP, linear_mean_weights, raw_from_scale_tril
from ..nn.gp.bayesian_sparse_gp import deep_conditional
from .._sklearn_kernels import from_sklearn_kernel
from . import _bsgp
from ._base import _AUTO_BATCH, auto_budget
from ._base import KERNELS as _KERNELS
from ._sparse_gp import SparseGPRegressor

# Widest hidden layer of a width "auto" (Salimbeni and Deisenroth 2017, section 5: min(30, D)).
_MAX_AUTO_WIDTH = 30
# Initial scale of q(u) in the inner layers (whitened), as in Salimbeni and Deisenroth's code:
# the inner layers start close to their mean functions.
_INNER_Q_SCALE = 1e-5
# Propagated draws per row and step with SparseVariational(n_mc_train="auto") (1 in Salimbeni and Deisenroth 2017).
_TRAINING_DRAWS = 1


@fill_doc(target_shape="(n_samples,)", target_mismatch="or X and\ny different lengths.")
class DeepGPRegressor(RegressorMixin, PredictiveRegressorMixin, TorchEstimatorMixin, BaseEstimator):
    r"""Deep Gaussian process regression with doubly stochastic variational inference.

    A deep GP composes L = ``len(hidden_layer_sizes) + 1`` GP layers,
    y = f^L(... f^1(x)) + noise, each inner layer l a vector-valued GP of
    width H_l with independent
    components ([Salimbeni2017]_; [Rossi2022]_, eq. 6.21). Every layer is a
    sparse variational GP (:class:`skbayes.nn.SVGP`) with its own M inducing
    points, kernel and whitened q(u^l) = N(m^l, S^l). The evidence lower bound

    .. math::

        \mathcal L = \sum_n \mathbb E_{q(f^L_n)}[\log N(y_n \mid f^L_n, \sigma^2)]
                     - \sum_l \mathrm{KL}(q(u^l) \,\|\, p(u^l))

    is maximised with Adam on minibatches, its data term estimated by
    propagating reparameterised draws of each layer's marginals,
    f̂^l = mu^l(f̂^{l-1}) + s^l(f̂^{l-1}) eps ([Salimbeni2017]_, eqs. 10-11;
    [Rossi2022]_, eq. 6.22), with the last layer's Gaussian expectation in
    closed form ([Rossi2022]_, eq. 6.23). Predictions are a mixture of
    ``n_mc_predict`` Gaussians, one per propagated draw ([Salimbeni2017]_,
    eq. 12). With ``hidden_layer_sizes=()`` (one layer) the model, its
    initialisation and its training are those of
    :class:`skbayes.SparseGPRegressor`.

    Read more in ``doc/deep_gp.md``.

    Parameters
    ----------
    hidden_layer_sizes : int or tuple of (int or "auto"), default=("auto",)
        Widths H_l of the inner GP layers, one entry per inner layer (an int
        is one inner layer), as the MLPs' ``hidden_layer_sizes``: the model has
        ``len(hidden_layer_sizes) + 1`` layers, and ``()`` is the sparse GP.
        ``"auto"`` is min(30, n_features), the choice of [Salimbeni2017]_
        (section 5), which is the input dimension D used in [Rossi2022]_
        (section 6.3.2) whenever D <= 30; ``("auto", "auto")`` is a
        three-layer model of that width.
    n_inducing : int, default=100
        Number M of inducing points of each layer (100 in [Salimbeni2017]_
        and [Rossi2022]_); capped at the number of rows.
    kernel : {"rbf", "matern12", "matern32", "matern52"} or sklearn kernel, default="rbf"
        Covariance function of every layer. A string: one length-scale per
        input of the layer (ARD, starting at 1) and a signal variance
        (starting at 1 in standardised units), as in
        :class:`skbayes.SparseGPRegressor`; "rbf" is the RBF-ARD kernel of
        [Salimbeni2017]_ and [Rossi2022]_. A scikit-learn kernel object is
        converted for each layer as in ``SparseGPRegressor`` (length-scale
        arrays must then fit every layer's input width, so isotropic
        length-scales are the safe choice); an added ``WhiteKernel`` is the
        observation noise of the last layer and plays no part in the inner
        layers.
    inducing_init : {"kmeans", "random"}, default="kmeans"
        Initial Z of the first layer: ``MiniBatchKMeans`` centres of X, or M
        rows of X. The inner layers' Z start as that Z pushed through the
        mean functions below them ([Salimbeni2017]_'s initialisation).
    noise_std : "learn" or float, default="learn"
        Observation noise standard deviation sigma: learned (starting at 0.1
        in standardised units), or fixed at this value in the units of y.
    prior_mean : {"constant", "zero"}, default="constant"
        Prior mean of the last layer: a learned constant or zero. The inner
        layers have the fixed linear mean functions of [Salimbeni2017]_
        (identity when the width is kept, the top principal directions of the
        layer's input when it shrinks, zero padding when it grows).
    normalize_y : bool, default=True
        Standardise y before fitting; every output is in the units of y.
    n_mc_predict : int, default=100
        Number S of propagated draws (mixture components) at prediction
        ([Salimbeni2017]_ use 100). Ignored with one layer, whose
        predictive is a single Gaussian.
    inference : {"variational", "sghmc"}, SparseVariational or SampledSparseGP, default="variational"
        The doubly stochastic variational inference of [Salimbeni2017]_:
        ``"variational"`` is :class:`skbayes.inference.SparseVariational` at
        its defaults, which holds the propagated draws per row and step
        (``n_mc_train="auto"``: 1, as in [Salimbeni2017]_ and [Rossi2022]_),
        Adam's step size (``learning_rate_init``, 0.01 in [Salimbeni2017]_)
        and the stopping rule (``max_iter``, ``tol``: the loss is a
        Monte-Carlo estimate with more than one layer, so set
        ``n_iter_no_change`` generously or rely on ``max_iter``). Its
        ``objective`` must be ``"vfe"`` and its ``optimizer`` ``"auto"`` or
        ``"adam"``, both Adam here (the deep GP has no FITC, collapsed or
        natural-gradient form): other values make
        ``fit`` raise a ValueError. The clone used is ``inference_``.
        ``"sghmc"`` or ``SampledSparseGP(SGHMC(...), start=...)`` samples the
        posterior instead, the sampled deep GP of [Rossi2022]_ (section
        6.3.2, eqs. 6.21-6.23): after the DSVI fit of ``start``, every
        layer's whitened inducing values, kernel hyperparameters and (with
        ``start``'s ``learn_inducing``) inducing inputs, and the noise, are
        sampled jointly by SGHMC under the priors of the sampled sparse GP
        (``inducing_prior``), the inner layers propagated by one draw per
        row and step and the last layer's FITC conditional in closed form
        (:func:`skbayes.nn.gp.bayesian_sparse_gp.deep_neg_log_posterior`).
        Predictions are then the mixture over the kept samples, each with
        ``ceil(n_mc_predict / n_kept)`` propagated draws; ``partial_fit`` is
        not available.
    batch_size : int or "auto", default="auto"
        Minibatch size; ``"auto"`` is ``min(1024, n_samples)``.
    callbacks : list of skbayes._training.Callback or None, default=None
        Called during training, after the stopping rule.
    random_state : int, RandomState instance or None, default=None
        Seeds the inducing-point initialisation, the minibatch order, the
        training draws and the prediction draws (fixed at ``fit``, so every
        prediction call returns the same values); the global torch seed is
        never touched.
    %(verbose)s
    %(device)s
    dtype : {"float32", "float64"} or None, default=None
        Precision; None is float64 on the CPU and float32 on accelerators.

    Attributes
    ----------
    module_ : torch.nn.ModuleDict
        The fitted ``"dgp"`` (:class:`skbayes.nn.DeepGP`) and
        ``"likelihood"`` (:class:`skbayes.nn.GaussianLikelihood`), in
        standardised target units.
    n_inducing_ : int
        Inducing points per layer, ``min(n_inducing, n_samples)``.
    hidden_layer_sizes_ : tuple of int
        Widths H_l of the inner layers, ``"auto"`` resolved (``()`` with one layer).
    inference_ : SparseVariational or SampledSparseGP
        The inference object of the last fit (a clone of ``inference``, or
        the object an alias stands for).
    inference_diagnostics_ : dict
        Only after a sampled fit: the sampler's diagnostics, ``"rhat"`` (the
        largest split R-hat of the training log-likelihoods and the log
        hyperparameters of every layer), ``"rhat_log_lik"``,
        ``"rhat_hyperparameters"`` and ``"n_kept_samples"``.
    inducing_points_ : list of ndarray
        The fitted Z of each layer, of shape (`n_inducing_`, input width of
        the layer), the first in the units of X (a sampled fit: their
        posterior means).
    noise_std_ : float
        Fitted observation noise standard deviation, in the units of y (a
        sampled fit: the root mean square over the kept samples).
    loss_curve_ : list of float
        Per-datum negative ELBO (nats, standardised units) of each epoch.
    %(n_iter_)s
    n_seen_ : int
        Training rows seen: ``n_samples`` after ``fit``, the running total
        over ``partial_fit`` calls. It is the N of the objective.
    best_loss_ : float
        Lowest epoch loss.
    %(torch_estimator_attributes)s

    See Also
    --------
    skbayes.SparseGPRegressor : the one-layer model, with closed-form predictions.

    Notes
    -----
    Cost per step: O(n_mc_train * batch_size * L * M^2 + sum_l H_l * M^3) for
    the inner layers' sum_l H_l latent functions (each with its own M x M q
    covariance) and the Cholesky of K_zz per layer; prediction costs
    ``n_mc_predict`` times one forward pass.

    At initialisation the inner layers' q(u) have mean 0 and scale 1e-5
    (whitened), so each inner layer starts at its mean function plus the
    GP's conditional variance, and the last layer's q(u) is set to its
    closed-form optimum ([Titsias2009]_) for the inputs X pushed through the
    mean functions. With one layer, q(u) is also set to its optimum
    after training, as ``SparseGPRegressor`` does; for deeper models the
    optimum has no closed form and the trained q(u) is kept.

    The prediction draws use the same standard normals eps for every row
    (each row's components are still draws from its own predictive), so a
    row's prediction does not depend on the other rows passed with it.

    Standardise X (e.g. ``StandardScaler`` in a pipeline).

    Not implemented: natural-gradient steps for the last layer, warm starts,
    multi-output y.

    References
    ----------
    .. [Salimbeni2017] H. Salimbeni and M. Deisenroth, "Doubly stochastic
       variational inference for deep Gaussian processes", NeurIPS 2017.
    .. [Rossi2022] S. Rossi, "Improving scalability and inference in
       probabilistic deep models", PhD thesis, 2022, section 6.3.2.
    .. [Titsias2009] M. Titsias, "Variational learning of inducing variables
       in sparse Gaussian processes", AISTATS 2009.

    Examples
    --------
    >>> import numpy as np
    >>> from skbayes import DeepGPRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.uniform(-3, 3, size=(300, 1))
    >>> y = np.sign(X[:, 0]) + 0.1 * rng.randn(300)
    >>> from skbayes.inference import SparseVariational
    >>> model = DeepGPRegressor(n_inducing=20, inference=SparseVariational(max_iter=50), random_state=0).fit(X, y)
    >>> mean, std = model.predict(X[:3], return_std=True)
    >>> mean.shape, std.shape
    ((3,), (3,))
    """

    _keeps_validation_scores = False  # no early stopping: every row trains the GP

    _parameter_constraints = {
        "hidden_layer_sizes": ["array-like", Interval(Integral, 1, None, closed="left")],
        "n_inducing": [Interval(Integral, 1, None, closed="left")],
        "kernel": [StrOptions(set(_KERNELS)), Kernel],
        "inducing_init": [StrOptions({"kmeans", "random"})],
        "noise_std": [StrOptions({"learn"}), Interval(Real, 0, None, closed="neither")],
        "prior_mean": [StrOptions({"constant", "zero"})],
        "normalize_y": ["boolean"],
        "n_mc_predict": [Interval(Integral, 1, None, closed="left")],
        "inference": [StrOptions({"variational", "sghmc"}), SparseVariational, SampledSparseGP],
        **{name: TRAINING_CONSTRAINTS[name]
           for name in ("batch_size", "callbacks", "random_state", "verbose", "device", "dtype")},
    }

    def __init__(
        self,
        hidden_layer_sizes=("auto",),
        *,
        n_inducing=100,
        kernel="rbf",
        inducing_init="kmeans",
        noise_std="learn",
        prior_mean="constant",
        normalize_y=True,
        n_mc_predict=100,
        inference="variational",
        batch_size="auto",
        callbacks=None,
        random_state=None,
        verbose=False,
        device="auto",
        dtype=None,
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.n_inducing = n_inducing
        self.kernel = kernel
        self.inducing_init = inducing_init
        self.noise_std = noise_std
        self.prior_mean = prior_mean
        self.normalize_y = normalize_y
        self.n_mc_predict = n_mc_predict
        self.inference = inference
        self.batch_size = batch_size
        self.callbacks = callbacks
        self.random_state = random_state
        self.verbose = verbose
        self.device = device
        self.dtype = dtype

    # ------------------------------------------------------------------ fitting
    def _validate_training_data(self, X, y, reset):
        X, y = validate_data(self, X, y, reset=reset, multi_output=True, y_numeric=True, dtype=(np.float64, np.float32))
        if y.ndim == 2 and y.shape[1] != 1:
            raise ValueError(
                f"DeepGPRegressor supports a single target, but y has {y.shape[1]} columns; fit one "
                "model per column (e.g. with sklearn.multioutput.MultiOutputRegressor)."
            )
        return X, column_or_1d(y, warn=True).astype(np.float64)

    def _auto_batch_size(self, n_samples):
        """``batch_size="auto"``: min(1024, n_samples), as for SparseGPRegressor."""
        return min(_AUTO_BATCH, n_samples)

    def _sparse_gp(self, inducing_init):
        """A SparseGPRegressor set up like this model, whose construction builds the last layer."""
        sparse = SparseGPRegressor(
            self.kernel,
            n_inducing=self.n_inducing,
            inducing_init=inducing_init,
            noise_std=self.noise_std,
            prior_mean=self.prior_mean,
            normalize_y=self.normalize_y,
            device=self.device,
            dtype=self.dtype,
        )
        sparse.device_, sparse.dtype_, sparse.inference_ = self.device_, self.dtype_, self.inference_
        sparse._y_mean, sparse._y_scale = self._y_mean, self._y_scale
        return sparse

    def _inner_layer(self, z, width, factory):
        """An inner SVGP layer: H latent functions, zero constant mean, Z = z, q(u) scale 1e-5."""
        n_inducing, n_inputs = z.shape
        if isinstance(self.kernel, str):
            kernel_class, kernel_params = _KERNELS[self.kernel]
            kernel = kernel_class(n_inputs, **kernel_params, **factory)
        else:
            kernel = from_sklearn_kernel(self.kernel, **factory)
        gp = SVGP(kernel, n_inducing, n_inputs, n_latent=width, mean="zero",
                  learn_inducing=self._variational().learn_inducing, **factory)
        with torch.no_grad():
            gp.inducing_points.copy_(z)
            eye = torch.eye(n_inducing, **factory).expand(width, n_inducing, n_inducing)
            gp.raw_q_scale_tril.copy_(raw_from_scale_tril(_INNER_Q_SCALE * eye))
        return gp

    def _build_module(self, X, y, seed):
        """The DeepGP and the likelihood, initialised as in Salimbeni and Deisenroth (2017)."""
        factory = {"device": self.device_, "dtype": self._dtype}
        if not self.hidden_layer_sizes_:  # literally the SparseGPRegressor construction
            module = self._sparse_gp(self.inducing_init)._build_module(X, self.n_inducing_, seed, y)
            return torch.nn.ModuleDict({"dgp": DeepGP([module["gp"]], []), "likelihood": module["likelihood"]})
        sparse = self._sparse_gp(self.inducing_init)
        h = self._to_tensor(X)
        z = self._to_tensor(sparse._initial_inducing_points(X, self.n_inducing_, seed))
        layers, weights = [], []
        for width in self.hidden_layer_sizes_:
            weight = linear_mean_weights(h, width)
            layers.append(self._inner_layer(z, width, factory))
            weights.append(weight)
            h, z = h @ weight, z @ weight  # the mean function pushes X and Z up
        h_np = h.cpu().numpy()
        # Kernel, likelihood and constant mean as SparseGPRegressor builds them; then Z and q(u) for the pushed Z.
        last = self._sparse_gp("random")._build_module(h_np, self.n_inducing_, seed, y)
        gp, likelihood = last["gp"], last["likelihood"]
        with torch.no_grad():
            gp.inducing_points.copy_(z)
            gp.set_optimal_q_(h, self._to_tensor(y), likelihood.noise_std[0] ** 2)
        return torch.nn.ModuleDict({"dgp": DeepGP([*layers, gp], weights), "likelihood": likelihood})

    def _hidden_widths(self, n_features):
        """``hidden_layer_sizes`` validated, with ``"auto"`` resolved to min(30, n_features): a tuple of int."""
        sizes = (self.hidden_layer_sizes,) if isinstance(self.hidden_layer_sizes, Integral) \
            else tuple(self.hidden_layer_sizes)
        for size in sizes:
            if size != "auto" and not (isinstance(size, Integral) and not isinstance(size, bool) and size >= 1):
                raise ValueError(
                    f"hidden_layer_sizes must hold positive ints or 'auto', one per inner layer; got "
                    f"{self.hidden_layer_sizes!r}."
                )
        return tuple(min(_MAX_AUTO_WIDTH, n_features) if size == "auto" else int(size) for size in sizes)

    def _loop_settings(self, steps_per_epoch=None):
        """``max_iter``, ``tol`` and ``n_iter_no_change`` of the variational fit."""
        return self._variational().loop_settings(steps_per_epoch)

    def _initialise(self, X, y):
        """Seeds, device, dtype, y scaling and the module; returns the standardised y."""
        rng = check_random_state(self.random_state)
        init_seed, self._shuffle_seed = self._seeds(rng, 2)  # as SparseGPRegressor draws them
        self._noise_seed, self._predict_seed = self._seeds(rng, 2)
        self.device_ = self._resolve_device()
        self.dtype_ = str(self._resolve_dtype(np.float64, self.device_)).removeprefix("torch.")
        y_mean, y_scale = target_scaling(y[:, None], self.normalize_y)
        self._y_mean, self._y_scale = float(y_mean[0]), float(y_scale[0])
        y = (y - self._y_mean) / self._y_scale
        self.n_inducing_ = min(self.n_inducing, X.shape[0])
        self.hidden_layer_sizes_ = self._hidden_widths(X.shape[1])
        self.module_ = self._build_module(X, y, init_seed)
        self._optimizer = self._make_optimizer()
        return y

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit every layer's q(u), inducing points and kernel, and the noise.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs (standardise them, e.g. with ``StandardScaler``).
        y : array-like of shape (n_samples,)
            Targets; a single column of shape (n_samples, 1) is ravelled.

        Returns
        -------
        self : DeepGPRegressor
            The fitted estimator.

        Raises
        ------
        ValueError
            On NaN/inf or wrongly shaped input, y with several columns, a
            diverging loss or a failed Cholesky; with a ``SampledSparseGP``,
            for a kernel object (the priors are set on a string kernel's
            hyperparameters) or a sampler with no Gaussian-process form.

        Warns
        -----
        ConvergenceWarning
            If the DSVI fit does not meet its stopping rule in ``max_iter``
            epochs; with a ``SampledSparseGP``, if the chains have not mixed
            (``inference_diagnostics_["rhat"]`` above 1.1).
        """
        X, y = self._validate_training_data(X, y, reset=True)
        method = _bsgp.check_sampling_method(self) if _bsgp.is_sampling(self._resolve_inference()) else None
        y = self._initialise(X, y)
        n_samples = X.shape[0]
        X_t, y_t = self._to_tensor(X), self._to_tensor(y)
        result = self._train(X_t, y_t, n_samples, self._shuffle_seed, self._noise_seed)
        dgp, likelihood = self.module_["dgp"], self.module_["likelihood"]
        if not self.hidden_layer_sizes_:  # the exact maximiser over q(u), as SparseGPRegressor
            with torch.no_grad():
                dgp.layers[0].set_optimal_q_(X_t, y_t, likelihood.noise_std[0] ** 2)
        if method is not None:  # the chains start from this DSVI fit
            return self._sample_posterior(method, X_t, y_t)
        self.__dict__.pop("inference_diagnostics_", None)
        self._store_training_result(result, n_seen=n_samples)
        self._set_fitted_attributes()
        return self

    def _sample_posterior(self, method, X_t, y_t):
        """Sample every layer's (v, theta, Z) and the noise from the DSVI fit in ``module_`` (Rossi 2022, section 6.3.2)."""
        _bsgp.run_sampler(self, _bsgp.sample_deep_posterior, method, X_t, y_t)
        self._set_fitted_attributes()
        return self

    @available_if(_bsgp.streams)
    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y):
        """Update the model with one pass over a batch of rows (streaming).

        The first call (on an estimator that was never fitted) initialises
        the model from this batch as ``fit`` does: the y standardisation
        (``normalize_y``), the widths, every layer's inducing points (from
        this batch) and the linear mean functions. Every call, the first
        included, then takes one pass over its rows in minibatches of
        ``batch_size``, with the objective's N set to ``n_seen_``, the running
        total of rows seen so far (this call's included): each minibatch
        estimates the doubly stochastic ELBO of all rows seen
        ([Salimbeni2017]_, eq. 17), assuming the stream is exchangeable. The
        optimiser state (Adam's moments) carries over between calls. After
        ``fit``, ``partial_fit`` continues from the fitted model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            A batch of training inputs (standardised like the others).
        y : array-like of shape (n_samples,)
            Its targets.

        Returns
        -------
        self : DeepGPRegressor
            The updated estimator.

        Raises
        ------
        ValueError
            On NaN/inf or wrongly shaped input, a feature count that differs
            from earlier calls, y with several columns or a diverging loss.
        """
        first = not hasattr(self, "module_") or _bsgp.is_sampled(self)  # a sampled fit restarts from this batch
        X, y = self._validate_training_data(X, y, reset=first)
        if first:
            self._resolve_inference()
            y = self._initialise(X, y)
            self.__dict__.pop("inference_diagnostics_", None)
            self.loss_curve_, self.n_iter_, self.n_seen_ = [], 0, 0
        else:
            y = (y - self._y_mean) / self._y_scale
        X_t, y_t = self._to_tensor(X), self._to_tensor(y)
        self._stream_epoch(
            lambda n_data, offset, **loop: self._train(
                X_t, y_t, n_data, self._shuffle_seed + offset, self._noise_seed + offset, **loop),
            X.shape[0],
        )
        self._set_fitted_attributes()
        return self

    def _resolve_inference(self):
        self.inference_ = resolve_gp_inference(self.inference)
        self._variational().check_supported(type(self).__name__, objectives=("vfe",), optimizers=("adam",))
        return self.inference_

    def _variational(self):
        """The :class:`~skbayes.inference.SparseVariational` of this fit (a sampled fit's start)."""
        method = self.inference_
        return method.variational() if isinstance(method, SampledSparseGP) else method

    def _make_optimizer(self):
        return self._variational().make_optimizer(self.module_.parameters())

    def _train(self, X_t, y_t, n_data, shuffle_seed, noise_seed, **overrides):
        """Run the shared loop over the rows of (X_t, y_t) with the objective's N = n_data.

        The propagated draws of the layers come from a generator seeded with
        ``noise_seed``; ``overrides`` replace loop settings (e.g. ``max_iter=1``).
        """
        dgp, likelihood = self.module_["dgp"], self.module_["likelihood"]
        generator = self._generator(noise_seed, self.device_)
        n_draws = self._variational().n_draws(_TRAINING_DRAWS)
        return self._fit_loop(
            lambda idx: dgp.loss(X_t[idx], y_t[idx], likelihood, n_data, n_draws, generator),
            self._stored_optimizer(),
            X_t.shape[0],
            shuffle_seed=shuffle_seed,
            **overrides,
        )

    def _set_fitted_attributes(self):
        """``inducing_points_`` (one array per layer) and ``noise_std_`` (in the units of y)."""
        if _bsgp.is_sampled(self):
            # posterior means over the kept samples; the noise as the root mean square, so that the predictive
            # variance is the epistemic plus this aleatoric variance
            samples, layers = self.module_["samples"], self.module_["dgp"].layers
            self.inducing_points_ = [
                samples.stacked(f"dgp.layers.{i}.inducing_points").mean(0).cpu().numpy()
                if f"dgp.layers.{i}.inducing_points" in samples.names else gp.inducing_points.detach().cpu().numpy().copy()
                for i, gp in enumerate(layers)
            ]
            self.noise_std_ = float(self._sample_noise_var().mean().sqrt()) * self._y_scale
            return
        with torch.no_grad():
            self.inducing_points_ = [gp.inducing_points.cpu().numpy().copy() for gp in self.module_["dgp"].layers]
            self.noise_std_ = float(self.module_["likelihood"].noise_std[0]) * self._y_scale

    def _sample_noise_var(self):
        """The noise variance of every kept sample, shape (n_kept,), standardised units."""
        return _bsgp.noise_std_samples(self.module_).reshape(-1).square()

    # --------------------------------------------------------------- prediction
    def _auto_budget(self):
        return auto_budget()

    def _n_components(self):
        if _bsgp.is_sampled(self):  # the same number of draws from every kept sample
            n_kept = self.module_["samples"].n_samples
            per_sample = -(-self.n_mc_predict // n_kept) if self.hidden_layer_sizes_ else 1
            return n_kept * per_sample
        return self.n_mc_predict if self.hidden_layer_sizes_ else 1

    def _mixture(self, X, reduce, n_draws=None, seed=None):
        """``reduce`` of the mixture's components, block of rows by block of rows.

        ``reduce(mean, var, noise_var, rows)`` receives the component means
        and latent variances of q(f^L) of a block's rows, numpy arrays of
        shape (n_block_rows, S) in standardised units, and the noise variance
        of each component (a float, or an array of shape (S,) for a sampled
        fit, whose kept samples have their own noise), and returns an array
        (or a tuple of arrays) with those rows on the first axis; the results
        are gathered over the blocks, so the (n, S) components of all rows
        are never held at once. The draws come from a CPU generator seeded
        with ``seed`` (default: the prediction seed fixed at ``fit``) and are
        shared by all rows. A sampled fit's S components come from its K kept
        samples: component s from sample s mod K when S >= K, else from
        sample floor(s K / S) (spread over the chains), each component one
        propagated draw of its sample's layers.
        """
        dgp = self.module_["dgp"]
        n_draws = self._n_components() if n_draws is None else n_draws
        seed = self._predict_seed if seed is None else seed
        sampled = _bsgp.is_sampled(self)
        with torch.no_grad():  # the layers' L_zz, shared by every block (a sampled fit has one per kept sample)
            chol_zz = None if sampled else dgp.chol_zz()

        def components(x, rows):
            # The same generator state for every block: the same eps for every row.
            generator = self._generator(seed)
            if sampled:
                mean, var, noise_var = self._sampled_components(x, n_draws, generator)
            else:
                mean, var = dgp.predict_mixture(x, n_draws, generator, chol_zz=chol_zz)
                noise_var = (self.noise_std_ / self._y_scale) ** 2
            values = reduce(mean.T.cpu().numpy(), var.T.cpu().numpy(), noise_var, rows)
            return tuple(map(torch.as_tensor, values)) if isinstance(values, tuple) else torch.as_tensor(values)

        # per row and draw, an inner layer holds its (M, width) projections A and S^T A of the
        # inducing values onto the row's input, besides the layers' inputs and outputs
        width = max((*self.hidden_layer_sizes_, self.n_features_in_))
        return self._predict_in_blocks(X, components, row_size=n_draws * width * (3 * self.n_inducing_ + 2))

    def _sampled_components(self, x, n_draws, generator):
        """Components of a sampled fit at x (n, d): means and latent variances (S, n), noise variances (S,) numpy."""
        module, samples = self.module_, self.module_["samples"]
        dgp, n_kept = module["dgp"], samples.n_samples
        owners = np.arange(n_draws) % n_kept if n_draws >= n_kept else np.arange(n_draws) * n_kept // n_draws
        counts = np.bincount(owners, minlength=n_kept)
        means, variances, noise = [], [], []
        try:
            for k in np.flatnonzero(counts):
                count = int(counts[k])
                samples.load_(int(k), module)
                mean, var = deep_conditional(dgp, x, dgp.draw_noise(count, 1, generator))
                means.append(mean.expand(count, -1))
                variances.append(var.expand(count, -1))
                noise.append(np.full(count, float(module["likelihood"].noise_std[0] ** 2)))
        finally:
            samples.load_(n_kept - 1, module)
        return torch.cat(means), torch.cat(variances), np.concatenate(noise)

    def predict_uncertainty(self, X):
        """Predictive mean and standard deviations of the mixture, split by source.

        The predictive of y at x is (1/S) sum_s N(mu_s, v_s + sigma^2) over
        the S = ``n_mc_predict`` propagated draws ([Salimbeni2017]_, eq. 12).
        Its variance is mean_s(v_s) + var_s(mu_s) (epistemic: the layers'
        uncertainty) + sigma^2 (aleatoric).

        %(parameters_X)s

        Returns
        -------
        result : Bunch
            ``mean``, ``std``, ``epistemic_std`` and ``aleatoric_std``, each
            of shape (n_samples,), in the units of y;
            ``std**2 == epistemic_std**2 + aleatoric_std**2``.

        %(predict_raises)s
        """
        return self._uncertainty(self._validate_X_predict(X))

    def _uncertainty(self, X):
        mean, epistemic_var = self._predictive_mixtures(
            X, lambda mixture, rows: (mixture.mean(), mixture.epistemic_variance()))
        epistemic = np.sqrt(epistemic_var) * self._y_scale
        aleatoric = np.full_like(epistemic, self.noise_std_)
        return Bunch(
            mean=mean * self._y_scale + self._y_mean,
            std=np.sqrt(epistemic**2 + aleatoric**2),
            epistemic_std=epistemic,
            aleatoric_std=aleatoric,
        )

    @validate_method_params(return_std=["boolean"])
    def predict(self, X, return_std=False):
        """Mean of the predictive mixture, and optionally its standard deviation (noise included).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        return_std : bool, default=False
            Also return the predictive standard deviation of y.

        Returns
        -------
        y_mean : ndarray of shape (n_samples,)
        y_std : ndarray of shape (n_samples,)
            Only returned when ``return_std`` is True.

        %(predict_raises)s
        """
        result = self._uncertainty(self._validate_X_predict(X))
        return (result.mean, result.std) if return_std else result.mean

    def _predictive_quantiles(self, X, levels):
        """Quantiles of the predictive mixture (1/S) sum_s N(mu_s, v_s + sigma^2), units of y.

        By Newton's method safeguarded by bisection (with one layer, the
        Gaussian's); the quantiles of :meth:`predict_quantiles` and
        :meth:`predict_interval`.
        """
        X = self._validate_X_predict(X)  # first: NotFittedError before any fitted attribute is read
        bounds = np.asarray(self._predictive_mixtures(X, lambda mixture, rows: mixture.ppf(levels)))
        return bounds * self._y_scale + self._y_mean

    def _predictive_mixtures(self, X, reduce):
        """``reduce(mixture, rows)`` of the predictive mixtures (1/S) sum_s N(mu_s, v_s + sigma^2) of y.

        The :class:`~skbayes._predictive.MixturePredictive` of a block's rows,
        in standardised units, its latent part v_s (the layers' uncertainty).
        """
        return self._mixture(
            X, lambda mean, var, noise_var, rows: reduce(
                MixturePredictive(mean.T, np.sqrt(var + noise_var).T, latent_var=var.T), rows)
        )

    @validate_method_params(n_samples=N_DRAWS, random_state=["random_state"])
    def sample_y(self, X, n_samples=1, random_state=0):
        """Draw targets from each row's predictive distribution.

        Draw s propagates one draw through the layers (the inner layers'
        standard normals shared by the rows) and adds y = mu_s + sqrt(v_s +
        sigma^2) z with z independent per row. Each row's draws are exact
        draws from its predictive; they are not joint draws of the deep GP
        across rows.

        Parameters
        ----------
        X : array-like of shape (n_samples_X, n_features)
        n_samples : int, default=1
            Number of draws.
        random_state : int, RandomState instance or None, default=0
            Seed of the draws (deterministic by default).

        Returns
        -------
        y_samples : ndarray of shape (n_samples_X, n_samples)
            In the units of y.

        Raises
        ------
        ValueError
            If ``n_samples`` is not a positive integer or ``random_state``
            not a seed, or as :meth:`predict`.
        """
        X = self._validate_X_predict(X)
        seed, noise_seed = self._seeds(check_random_state(random_state), 2)
        noise = np.random.RandomState(noise_seed)  # blocks in order: the stream of one (n, S) draw

        def draw(mean, var, noise_var, rows):
            return mean + np.sqrt(var + noise_var) * noise.standard_normal(mean.shape)

        draws = self._mixture(X, draw, n_draws=n_samples, seed=seed)
        return draws * self._y_scale + self._y_mean

    def _predictive_cdf(self, X, y):
        """The CDF of :meth:`predict_cdf`: (1/S) sum_s Phi((y - mu_s) / sqrt(v_s + sigma^2))."""
        check_is_fitted(self)
        X, y = validate_data(self, X, y, reset=False, y_numeric=True, dtype=(np.float64, np.float32))
        y = (np.asarray(y, dtype=np.float64) - self._y_mean) / self._y_scale
        return self._predictive_mixtures(X, lambda mixture, rows: mixture.cdf(y[rows]))

    def log_predictive_density(self, X, y):
        """Log predictive density of each observation under the mixture, in nats.

        log (1/S) sum_s N(y_i | mu_s(x_i), v_s(x_i) + sigma^2) in the units
        of y (a log-sum-exp over the S = ``n_mc_predict`` components): the
        per-point test log-likelihood of the UCI protocol.

        %(log_predictive_density_sections)s
        """
        check_is_fitted(self)
        X, y = validate_data(self, X, y, reset=False, y_numeric=True, dtype=(np.float64, np.float32))
        y = (np.asarray(y, dtype=np.float64) - self._y_mean) / self._y_scale
        return self._predictive_mixtures(X, lambda mixture, rows: mixture.logpdf(y[rows])) - np.log(self._y_scale)
