"""VAE: a (conditional) variational autoencoder as a scikit-learn transformer."""

import math
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils import check_array, check_random_state, column_or_1d
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data
from torch import nn

from .._docstrings import fill_doc
from .._param_validation import (
    EARLY_STOPPING_CONSTRAINTS,
    N_DRAWS,
    TRAINING_CONSTRAINTS,
    Interval,
    StrOptions,
    _fit_context,
    validate_method_params,
)
from .._training import KLWarmup
from ..base import PREDICT_BLOCK_BYTES, TorchEstimatorMixin, evaluation_mode, hidden_layer_sizes, target_scaling
from ..nn import ACTIVATIONS, VAEModule, negative_elbo
from ..nn.networks.module import build_module, factory_accepts
from ..nn.networks.vae import ConvDecoder, ConvEncoder

# max_iter="auto": at most this many epochs and this many optimiser steps, whichever ends first
# (a budget that does not grow with the number of rows; 50,000 steps of 128 rows are 64 epochs of
# 100,000 rows and 107 of MNIST's 60,000).
AUTO_MAX_EPOCHS = 200
AUTO_MAX_STEPS = 50_000

# Quasi-Monte-Carlo latent points of the expected log-likelihood in score_samples
# (a power of two keeps the Sobol points balanced), and of the validation ELBO.
_N_QMC_SCORE = 128
_N_QMC_VALIDATION = 16
# Keeps the uniform Sobol coordinates away from 0 and 1 before the normal quantile.
_QMC_CLIP = 1e-12
# Clip of the pixel means whose logits initialise the Bernoulli decoder's bias.
_BERNOULLI_BIAS_CLIP = 1e-3
# The built-in networks of encoder="conv" / decoder="conv".
_CONV = {"encoder": ConvEncoder, "decoder": ConvDecoder}

# The entries of X and the class labels y shared by the VAE's methods (see skbayes._docstrings).
_DOC_FIELDS = {
    "y_fit": "y : array-like of shape (n_samples,), default=None\n    Class labels of a ``conditional`` VAE; ignored otherwise.",
    "y_labels": (
        "y : array-like of shape (n_samples,) or label, default=None\n"
        "    Class labels; required by a ``conditional`` VAE, ignored otherwise."
    ),
    "parameters_X_y_fit": "%(parameters_X)s\n%(y_fit)s",
    "X_y_labels": "X : array-like of shape (n_samples, n_features)\n%(y_labels)s",
}


def _is(value, string):
    """``value == string`` for a str ``value`` (None: ``value is None``), False for modules and classes."""
    return value is None if string is None else isinstance(value, str) and value == string


class _MappedRows:
    """Rows of an array passed through a function when they are read (``rows[i:j]``).

    Lets :meth:`TorchEstimatorMixin._predict_in_blocks` standardise X block by
    block, without a standardised copy of all of X.
    """

    def __init__(self, array, fn):
        self._array, self._fn = array, fn
        self.shape = array.shape

    def __getitem__(self, rows):
        return self._fn(self._array[rows])


@fill_doc(n_iter_no_change_default=10, **_DOC_FIELDS)
class VAE(ClassNamePrefixFeaturesOutMixin, TransformerMixin, TorchEstimatorMixin, BaseEstimator):
    """Variational autoencoder: a non-linear latent-variable model as a transformer.

    The data are modelled as x ~ p(x | z) with a latent z ~ N(0, I) of
    dimension ``n_components`` and a decoder network; an encoder network gives the
    approximate posterior q(z | x) = N(mu(x), diag sigma(x)^2). Both are
    fitted together by maximising the evidence lower bound (ELBO) with Adam
    on minibatches, with one reparameterised latent draw per row and the KL
    in closed form (AEVB, [Kingma2014]_). ``transform`` returns the posterior
    means, ``inverse_transform`` decodes, ``sample`` generates, and
    ``score_samples`` / ``log_likelihood_iwae`` give per-row lower bounds on
    log p(x) in nats.

    With ``conditional=True``, ``fit(X, y)`` fits a conditional VAE
    [Sohn2015]_: the one-hot class label is concatenated to the encoder's
    input and to the decoder's input, so that ``sample(y=...)`` generates
    examples of a given class.

    The networks are MLPs by default; ``encoder="conv", decoder="conv"``
    with ``input_shape=(1, 28, 28)`` gives a convolutional VAE on flattened
    images (stride-2 convolutions down, transposed convolutions up, Bruno
    2022, section 4.4), and any torch modules may be passed instead.

    Read more in the :doc:`User Guide </vae>` (``doc/vae.md``).

    Parameters
    ----------
    n_components : int, default=2
        Latent dimension k.
    hidden_layer_sizes : array-like of int or int, default=(200,)
        Encoder hidden widths; the decoder mirrors them (784-200-k-200-784 on
        MNIST in Cinelli 2019, section 5). ``()`` gives a linear encoder and
        decoder (with ``likelihood="gaussian"``, a factor-analysis model).
        Used by the MLP networks only (``encoder`` or ``decoder`` ``"mlp"``).
    encoder : {"mlp", "conv"}, torch.nn.Module class, callable or instance, default="mlp"
        The encoder's network, before the VAE's own linear head that maps its
        flattened output (with the one-hot label of a conditional VAE) to the
        latent means and raw standard deviations. ``"mlp"``: the MLP of
        ``hidden_layer_sizes`` and ``activation`` (its last layer is the
        head). ``"conv"``: :class:`skbayes.nn.ConvEncoder`, stride-2
        convolutions (channels ``(32, 64)``, kernel 4, ``activation``; set
        by ``encoder_params={"channels": ..., "kernel_size": ...}``) that
        halve the image, 28 x 28 -> 14 x 14 -> 7 x 7; needs ``input_shape``.
        A class or factory: ``encoder(**encoder_params)`` returns a
        :class:`torch.nn.Module` mapping inputs ``(B, *input_shape)`` (rows
        (B, n_features) without ``input_shape``) to features (B, ...) of any
        width; a factory that takes ``input_shape`` or ``n_features`` and is
        not given them receives the data's. An instance is copied and its
        layers re-initialised (``reset_parameters``). Torch modules are
        built under a :func:`torch.random.fork_rng` seeded from
        ``random_state``.
    decoder : {"mlp", "conv"}, torch.nn.Module class, callable or instance, default="mlp"
        The decoder's network, mapping latent rows to the Gaussian means or
        Bernoulli logits of the features. ``"mlp"``: the MLP of
        ``hidden_layer_sizes`` reversed. ``"conv"``:
        :class:`skbayes.nn.ConvDecoder`, a linear layer to 64 maps of 7 x 7
        and stride-2 transposed convolutions (channels ``(64, 32)``, in the
        decoder's order; ``decoder_params``) back to the image; needs
        ``input_shape``. A class or factory (``decoder(**decoder_params)``) returns
        a module mapping (B, n_inputs) to ``(B, *input_shape)`` or
        (B, n_features), where n_inputs is ``n_components`` plus, for a
        conditional VAE, the number of classes (the one-hot label is
        concatenated to z); a factory that takes ``n_inputs``,
        ``output_shape`` (the shape of one input) or ``n_features`` and is
        not given them receives them. A learned per-feature bias is added
        to the module's output. Built as ``encoder``.
    encoder_params, decoder_params : dict, default=None
        Keyword arguments of ``encoder`` and ``decoder`` (as
        ``kernel_params`` of :class:`sklearn.decomposition.KernelPCA`),
        e.g. ``{"channels": (16, 32)}``; ``GridSearchCV`` tunes them as whole
        dicts. Not for ``"mlp"`` or module instances.
    input_shape : tuple of int, default=None
        Shape of one row as the encoder's module takes it, e.g.
        ``(1, 28, 28)`` for flattened 28 x 28 grey images: X stays 2-D
        (scikit-learn's contract), its rows are reshaped to ``input_shape``
        for the encoder, and the decoder's output is flattened back to rows,
        so every method takes and returns rows. Needed by ``"conv"``; None
        feeds rows to a module encoder.
    likelihood : {"gaussian", "bernoulli"}, default="gaussian"
        ``"gaussian"``: N(x | f(z), diag sigma^2) with one learned noise
        standard deviation per feature; X is standardised internally (per
        feature, with the training mean and std) and every output is in the
        units of X. ``"bernoulli"``: independent Bernoulli features with
        logits f(z), for X in [0, 1] (binary data; for grey levels it is the
        usual cross-entropy objective, not a normalised density).
    %(activation)s
    beta : float, default=1.0
        Weight of the KL term in the training objective (beta-VAE
        [Higgins2017]_ for beta != 1). ``score_samples`` always reports the
        ELBO (beta = 1).
    kl_warmup_epochs : int, default=0
        Number of epochs over which the KL weight rises linearly (per step)
        from 0 to ``beta``, a remedy for posterior collapse (Cinelli 2019,
        section 4.4). The warm-up epochs always run; stopping rules apply
        after them.
    conditional : bool, default=False
        Fit a conditional VAE on the class labels ``y`` passed to ``fit``;
        ``transform``, ``inverse_transform``, ``sample``, ``score_samples``,
        ``score`` and ``log_likelihood_iwae`` then need ``y`` too. When False,
        ``y`` is ignored everywhere (so the VAE works inside a supervised
        ``Pipeline``, which passes y to ``fit`` but not to ``transform``).
    batch_size : int or "auto", default="auto"
        Minibatch size; ``"auto"`` is ``min(128, n_samples)`` (Cinelli 2019,
        section 5).
    learning_rate_init : float, default=1e-3
        Adam step size (Cinelli 2019, section 5).
    max_iter : int or "auto", default="auto"
        Maximum number of epochs. ``"auto"``: 200 epochs or 50,000 optimiser
        steps, whichever ends first, so that the time of a fit stops growing
        with the number of rows n beyond 50,000 * batch_size / 200 rows
        (32,000 at the default 128 rows per step); above, the budget is
        50,000 * batch_size / n epochs (6.4 on 10^6 rows). An int: that many
        epochs, however many steps they take.
    n_mc_train : int, default=1
        Monte-Carlo draws of the latent z per row and step (reparameterised).
    early_stopping : bool, default=False
        Hold out ``validation_fraction`` of the rows and stop when their
        (beta-)ELBO stops improving (the best weights are restored).
        Otherwise stop when the training loss stops improving.
    %(validation_fraction)s
    %(n_iter_no_change)s
    tol : float, default=1e-4
        Minimum improvement of the per-row loss (or validation score), nats.
    warm_start : bool, default=False
        Make the next ``fit`` continue from the fitted model instead of
        initialising a new one: the weights, the noise, the standardisation
        of X and the classes are kept, and only the optimiser starts afresh
        (with the current ``learning_rate_init``); a KL warm-up that was not
        over continues where it stopped.
        The parameters that shape the network (``n_components``,
        ``hidden_layer_sizes``, ``likelihood``, ``activation``,
        ``conditional``, ``encoder``, ``decoder``, ``input_shape``,
        ``encoder_params``, ``decoder_params``, ``device``, ``dtype``) and
        the number of features must be those of the fit it continues, and
        the labels among its classes; otherwise ``fit`` starts afresh.
        ``loss_curve_`` and ``n_iter_`` then describe the latest ``fit`` only.
    callbacks : list of skbayes._training.Callback or None, default=None
        Called during training, after the KL warm-up and the stopping rule
        (see :class:`skbayes._training.Callback`); ``partial_fit`` calls
        them too, for its one epoch.
    random_state : int, RandomState instance or None, default=None
        Seeds the initial weights, minibatch order, training noise and the
        fixed latent draws of ``score_samples``; the global torch seed is
        never touched.
    %(verbose)s
    %(device)s
    dtype : {"float32", "float64"} or None, default=None
        Precision of the computation; None keeps float32 input as float32
        and uses float64 otherwise on the CPU, float32 on accelerators.

    Attributes
    ----------
    module_ : skbayes.nn.VAEModule
        The fitted ``encoder``, ``decoder`` and ``likelihood``; they work in
        standardised units of X for ``likelihood="gaussian"``. Module
        networks sit in a :class:`skbayes.nn.ModuleEncoder` (as ``body``,
        beside the linear ``head``) and a :class:`skbayes.nn.ModuleDecoder`.
    noise_std_ : ndarray of shape (`n_features_in_`,) or None
        Gaussian observation noise standard deviation per feature, in the
        units of X; None for ``likelihood="bernoulli"``.
    classes_ : ndarray of shape (n_classes,) or None
        Class labels of the conditional VAE; None when not ``conditional``.
    loss_curve_ : list of float
        Training objective of each epoch: -(mean expected log-likelihood) +
        beta_t * (mean KL) per row, nats, in standardised units for the
        Gaussian likelihood; during the warm-up beta_t < beta.
    n_iter_ : int
        Number of epochs run, the warm-up included.
    best_loss_ : float or None
        Lowest epoch loss after the warm-up (None when ``early_stopping``).
    validation_scores_ : list of float or None
        Mean validation (beta-)ELBO per epoch after the warm-up, standardised
        units (None unless ``early_stopping``).
    %(best_validation_score_)s
    %(torch_estimator_attributes)s

    See Also
    --------
    sklearn.decomposition.PCA : linear, deterministic dimensionality reduction.
    sklearn.decomposition.FactorAnalysis : the linear-Gaussian latent model.

    Notes
    -----
    The per-row training objective on a minibatch B is::

        -(1/|B|) sum_{i in B} log p(x_i | mu_i + sigma_i * eps_i)
        + beta_t (1/|B|) sum_{i in B} KL(q(z | x_i) || N(0, I)),

    the negative ELBO of Cinelli 2019, eq. 4.9 per row (the latents are local,
    so the KL is averaged over the batch). ``score_samples`` (scrambled
    Sobol points [Owen1998]_, fixed at fit) and ``log_likelihood_iwae``
    (independent draws, seeded per call) share their latent noise across
    rows, so each row's value is a valid estimate for that row that depends
    neither on the other rows nor on their order; the errors of different
    rows are correlated, so averaging over rows does not shrink them.

    References
    ----------
    %(ref_kingma2014)s
    %(ref_sohn2015)s
    .. [Burda2016] Y. Burda, R. Grosse and R. Salakhutdinov, "Importance
       weighted autoencoders", ICLR 2016.
    .. [Higgins2017] I. Higgins et al., "beta-VAE: learning basic visual
       concepts with a constrained variational framework", ICLR 2017.
    .. [Owen1998] A. B. Owen, "Scrambling Sobol' and Niederreiter-Xing
       points", Journal of Complexity 14(4), 1998.

    Examples
    --------
    >>> import numpy as np
    >>> from skbayes import VAE
    >>> rng = np.random.RandomState(0)
    >>> X = rng.randn(200, 2) @ rng.randn(2, 6)
    >>> vae = VAE(n_components=2, hidden_layer_sizes=(32,), max_iter=50, random_state=0)
    >>> Z = vae.fit_transform(X)
    >>> Z.shape, vae.inverse_transform(Z).shape, vae.sample(3, random_state=0).shape
    ((200, 2), (200, 6), (3, 6))

    A convolutional VAE on 8 x 8 images given as rows of 64 pixels in [0, 1]:

    >>> images = (rng.rand(64, 64) > 0.5).astype(float)
    >>> conv = VAE(n_components=2, encoder="conv", decoder="conv", input_shape=(1, 8, 8),
    ...            encoder_params={"channels": (4, 8)}, decoder_params={"channels": (8, 4)},
    ...            likelihood="bernoulli", max_iter=2, random_state=0)
    >>> conv.fit(images).transform(images).shape, conv.sample(2, random_state=0).shape
    ((64, 2), (2, 64))
    """

    _parameter_constraints = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "hidden_layer_sizes": ["array-like", Interval(Integral, 1, None, closed="left")],
        "encoder": [StrOptions({"mlp", "conv"}), callable],
        "decoder": [StrOptions({"mlp", "conv"}), callable],
        "input_shape": [None, tuple, list],
        "encoder_params": [None, dict],
        "decoder_params": [None, dict],
        "likelihood": [StrOptions({"gaussian", "bernoulli"})],
        "activation": [StrOptions(set(ACTIVATIONS))],
        "beta": [Interval(Real, 0, None, closed="left")],
        "kl_warmup_epochs": [Interval(Integral, 0, None, closed="left")],
        "conditional": ["boolean"],
        "n_mc_train": [Interval(Integral, 1, None, closed="left")],
        "warm_start": ["boolean"],
        **TRAINING_CONSTRAINTS,
        "max_iter": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        **EARLY_STOPPING_CONSTRAINTS,
    }

    def __init__(
        self,
        n_components=2,
        *,
        hidden_layer_sizes=(200,),
        encoder="mlp",
        decoder="mlp",
        input_shape=None,
        encoder_params=None,
        decoder_params=None,
        likelihood="gaussian",
        activation="relu",
        beta=1.0,
        kl_warmup_epochs=0,
        conditional=False,
        batch_size="auto",
        learning_rate_init=1e-3,
        max_iter="auto",
        n_mc_train=1,
        early_stopping=False,
        validation_fraction=0.1,
        n_iter_no_change=10,
        tol=1e-4,
        warm_start=False,
        callbacks=None,
        random_state=None,
        verbose=False,
        device="auto",
        dtype=None,
    ):
        self.n_components = n_components
        self.hidden_layer_sizes = hidden_layer_sizes
        self.encoder = encoder
        self.decoder = decoder
        self.input_shape = input_shape
        self.encoder_params = encoder_params
        self.decoder_params = decoder_params
        self.likelihood = likelihood
        self.activation = activation
        self.beta = beta
        self.kl_warmup_epochs = kl_warmup_epochs
        self.conditional = conditional
        self.batch_size = batch_size
        self.learning_rate_init = learning_rate_init
        self.max_iter = max_iter
        self.n_mc_train = n_mc_train
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.warm_start = warm_start
        self.callbacks = callbacks
        self.random_state = random_state
        self.verbose = verbose
        self.device = device
        self.dtype = dtype

    # ------------------------------------------------------------ validation
    def _hidden_sizes(self):
        return hidden_layer_sizes(self.hidden_layer_sizes, "a linear encoder and decoder")

    def _check_range(self, X):
        if self.likelihood == "bernoulli" and X.size and (X.min() < 0 or X.max() > 1):
            raise ValueError(
                f"likelihood='bernoulli' needs X in [0, 1]; got values in [{X.min():.4g}, "
                f"{X.max():.4g}]. Rescale X (e.g. pixel intensities / 255, or MinMaxScaler) "
                "or use likelihood='gaussian'."
            )

    def _validate_X(self, X):
        X = self._validate_X_predict(X)
        self._check_range(X)
        return X

    def _condition(self, y, n_rows):
        """One-hot tensor (n_rows, n_classes) of the labels y, or None if unconditional."""
        if not self.conditional:
            return None
        if y is None:
            raise ValueError(
                "This VAE is conditional (conditional=True): pass the class labels y. A "
                "conditional VAE cannot be used where only X is passed (e.g. inside a Pipeline)."
            )
        y = np.asarray(y)
        y = np.full(n_rows, y.item()) if y.ndim == 0 else column_or_1d(y)
        if len(y) != n_rows:
            raise ValueError(f"y has {len(y)} labels but there are {n_rows} rows.")
        index = np.searchsorted(self.classes_, y)
        index = np.minimum(index, len(self.classes_) - 1)
        unknown = self.classes_[index] != y
        if unknown.any():
            raise ValueError(
                f"y contains labels not seen in fit: {np.unique(y[unknown])[:5].tolist()}; "
                f"the classes are {self.classes_.tolist()}."
            )
        return self._to_tensor(np.eye(len(self.classes_))[index])

    # --------------------------------------------------------------- fitting
    def _validate_training_data(self, X, y, reset):
        """Validated X (range-checked) and, for a conditional VAE, its class labels (else None)."""
        if self.conditional:
            if y is None:
                raise ValueError("conditional=True needs the class labels y in fit(X, y).")
            X, y = validate_data(self, X, y, reset=reset, dtype=(np.float64, np.float32))
            check_classification_targets(y)
        else:
            X, y = validate_data(self, X, reset=reset, dtype=(np.float64, np.float32)), None
        self._check_range(X)
        return X, y

    def _model_settings(self, n_features):
        """What a warm start needs unchanged: the parameters that shape the fitted module."""
        names = ("n_components", "hidden_layer_sizes", "likelihood", "activation", "conditional", "device", "dtype")
        settings = (n_features, *(repr(getattr(self, name)) for name in names))
        names = ("encoder", "decoder", "input_shape", "encoder_params", "decoder_params")
        defaults = {"encoder": "mlp", "decoder": "mlp"}
        if any(not _is(getattr(self, name), defaults.get(name)) for name in names):  # networks other than the MLPs
            settings += tuple(repr(getattr(self, name)) for name in names)
        return settings

    def _can_warm_start(self, X, y):
        # a conditional VAE continues only on the classes it was fitted with
        return super()._can_warm_start(X, y) and (y is None or bool(np.isin(np.unique(y), self.classes_).all()))

    def _initialise(self, X, y):
        """Classes, seeds, device, dtype, the scaling of X, the module and the optimiser."""
        self.classes_ = None if y is None else np.unique(y)
        rng = check_random_state(self.random_state)
        init_seed, self._noise_seed, self._shuffle_seed, self._score_seed, self._split_seed = self._seeds(rng, 5)
        device = self._resolve_device()
        dtype = self._resolve_dtype(X.dtype, device)
        self.device_, self.dtype_ = device, str(dtype).removeprefix("torch.")
        self._n_features_out = self.n_components
        self._set_scaling(X)
        self.module_ = self._build_module(X.shape[1], init_seed, device, dtype)
        self._init_output_bias(self._to_tensor(self._standardise(X)))
        self._optimizer = self._make_optimizer()
        self._fitted_settings = self._model_settings(X.shape[1])
        self.loss_curve_, self.n_iter_, self._epochs_trained = [], 0, 0

    def _continue(self):
        """Warm start: keep the module, the classes and the scaling; new seeds and optimiser."""
        rng = check_random_state(self.random_state)
        _, self._noise_seed, self._shuffle_seed, self._score_seed, self._split_seed = self._seeds(rng, 5)
        self._optimizer = self._make_optimizer()

    def _make_optimizer(self):
        return torch.optim.Adam(self.module_.parameters(), lr=self.learning_rate_init)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Fit the encoder, the decoder and the noise by maximising the ELBO.

        With ``warm_start=True`` and a fitted model, training continues from
        it (see ``warm_start``); otherwise the model is initialised afresh.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data; in [0, 1] for ``likelihood="bernoulli"``.
        y : array-like of shape (n_samples,), default=None
            Class labels conditioning a ``conditional`` VAE; ignored otherwise.

        Returns
        -------
        self : VAE
            The fitted estimator.

        Raises
        ------
        ValueError
            On NaN/inf or wrongly shaped input, X outside [0, 1] for the
            Bernoulli likelihood, missing or non-class y for a conditional
            VAE, or a diverging loss (the message says what to change).
        """
        X, y = self._validate_training_data(X, y, reset=True)
        if self._can_warm_start(X, y):
            self._continue()
        else:
            self._initialise(X, y)
        X_model = self._to_tensor(self._standardise(X))
        result = self._train(
            X_model,
            self._condition(y, len(X)),
            self._noise_seed,
            self._shuffle_seed,
            split_seed=self._split_seed if self.early_stopping else None,
            epochs_done=self._epochs_trained,
        )
        self._epochs_trained += result.n_iter
        self._store_training_result(result)
        self._set_noise_std()
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y=None):
        """Update the model with one epoch over a batch of rows (streaming).

        The first call on a VAE that was never fitted initialises everything
        from this batch as ``fit`` does (seeds, the standardisation of X for
        the Gaussian likelihood, the weights, the Bernoulli output bias and,
        when ``conditional``, the classes, so the first batch must hold every
        class); ``VAE(random_state=0).partial_fit(X)`` is then the same model
        as ``VAE(max_iter=1, random_state=0).fit(X)``. Every call takes one
        pass over its rows in minibatches of ``batch_size``, with Adam's
        moments carried over between calls (and from a previous ``fit``).
        The KL warm-up counts calls as epochs (continuing after ``fit``); ``early_stopping`` does not
        apply (every row is used for training). ``n_iter_`` counts calls and
        ``loss_curve_`` grows by one value per call.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            A batch of training rows; in [0, 1] for ``likelihood="bernoulli"``.
        %(y_fit)s

        Returns
        -------
        self : VAE
            The updated estimator.

        Raises
        ------
        ValueError
            On NaN/inf or wrongly shaped input, a feature count that differs
            from earlier calls, X outside [0, 1] for the Bernoulli
            likelihood, labels not seen in the first call, or a diverging
            loss.
        """
        first = not hasattr(self, "module_")
        X, y = self._validate_training_data(X, y, reset=first)
        if first:
            self._initialise(X, y)
        else:
            self._stored_optimizer()  # rebuilt with its state after unpickling
        result = self._train(
            self._to_tensor(self._standardise(X)),
            self._condition(y, len(X)),
            self._noise_seed + self.n_iter_,
            self._shuffle_seed + self.n_iter_,
            epochs_done=self._epochs_trained,
            max_iter=1,
            max_steps=None,
            n_iter_no_change=None,  # one epoch, a fixed schedule
        )
        self._epochs_trained += result.n_iter
        # the best loss after the warm-up epochs, in which the loss may rise
        n_epochs = self.n_iter_ + result.n_iter
        self._append_training_result(result, best_from=max(min(self.kl_warmup_epochs, n_epochs) - 1, 0))
        self.validation_scores_, self.best_validation_score_ = None, None
        self._set_noise_std()
        return self

    def _set_noise_std(self):
        self.noise_std_ = None
        if self.likelihood == "gaussian":
            self.noise_std_ = self.module_.likelihood.noise_std.detach().cpu().numpy() * self._x_scale

    def _set_scaling(self, X):
        # float64 whatever the dtype of X, as the model-unit data are computed from it
        mean, scale = target_scaling(X, self.likelihood == "gaussian")
        self._x_mean, self._x_scale = mean.astype(np.float64), scale.astype(np.float64)

    def _standardise(self, X):
        return (X - self._x_mean) / self._x_scale

    def _build_module(self, n_features, seed, device, dtype):
        n_conditions = 0 if self.classes_ is None else len(self.classes_)
        networks = self._build_networks(n_features, n_conditions, seed, device, dtype)
        module = VAEModule(
            n_features,
            self.n_components,
            self._hidden_sizes(),
            n_conditions=n_conditions,
            likelihood=self.likelihood,
            activation=self.activation,
            noise_std=1.0,  # the std of the standardised data
            generator=self._generator(seed),
            device=device,
            dtype=dtype,
            **networks,
        )
        # values held per row and latent draw, which sizes the prediction blocks
        widths = [n_features, 2 * self.n_components, *self._hidden_sizes(), *([module.widest] if networks else [])]
        self._width = max(widths)
        return module

    def _input_shape(self, n_features):
        """The validated ``input_shape`` as a tuple (None when not given)."""
        if self.input_shape is None:
            return None
        shape = tuple(self.input_shape)
        if not all(isinstance(s, Integral) and s >= 1 for s in shape) or math.prod(shape) != n_features:
            raise ValueError(
                f"input_shape must be positive integers whose product is the number of features, "
                f"{n_features}; got {shape}."
            )
        return tuple(int(s) for s in shape)

    def _build_networks(self, n_features, n_conditions, seed, device, dtype):
        """The torch modules of ``encoder`` and ``decoder`` that are not ``"mlp"``, by name (and ``input_shape``).

        Each is built by :func:`~skbayes.nn.networks.module.build_module` under
        its own seed, drawn from ``seed``, leaving the global torch RNG alone.
        """
        input_shape = self._input_shape(n_features)
        shape = input_shape or (n_features,)
        data = {
            "encoder": {"input_shape": shape, "n_features": n_features},
            "decoder": {"n_inputs": self.n_components + n_conditions, "output_shape": shape, "n_features": n_features},
        }
        seeds = dict(zip(data, self._seeds(np.random.RandomState(seed), 2)))
        networks = {}
        for name in data:
            factory, kwargs = getattr(self, name), dict(getattr(self, f"{name}_params") or {})
            if _is(factory, "mlp"):
                if kwargs:
                    raise ValueError(
                        f"{name}_params={kwargs!r} needs a module {name}; {name}='mlp' is shaped by "
                        "hidden_layer_sizes and activation."
                    )
                continue
            if isinstance(factory, nn.Module) and kwargs:
                raise TypeError(
                    f"{name} is an instance of {type(factory).__name__}; {name}_params={kwargs!r} need a class "
                    "or factory."
                )
            if isinstance(factory, str):  # "conv"
                if input_shape is None or len(input_shape) != 3:
                    raise ValueError(
                        f"{name}='conv' needs input_shape=(channels, height, width), e.g. (1, 28, 28) for rows of "
                        f"784 pixels; got input_shape={self.input_shape!r}."
                    )
                factory, kwargs = _CONV[name], {"activation": self.activation, **kwargs}
            if not isinstance(factory, nn.Module):  # the data's sizes, unless given
                kwargs.update({arg: value for arg, value in data[name].items()
                               if arg not in kwargs and factory_accepts(factory, arg)})
            networks[name] = build_module(factory, kwargs, seed=seeds[name], device=device, dtype=dtype, name=name)
            if any(nn.parameter.is_lazy(p) for p in networks[name].parameters()):
                raise ValueError(
                    f"The {name} has lazy layers (e.g. LazyLinear), which torch would initialise from its global "
                    "random state; give their sizes (the encoder's head takes features of any width)."
                )
        if "encoder" in networks:
            networks["input_shape"] = input_shape
        return networks

    def _init_output_bias(self, X_model):
        """Start the Bernoulli decoder at the logits of the pixel means."""
        if self.likelihood == "bernoulli":
            p = X_model.mean(0).clamp(_BERNOULLI_BIAS_CLIP, 1 - _BERNOULLI_BIAS_CLIP)
            with torch.no_grad():
                self.module_.output_bias.copy_(torch.log(p) - torch.log1p(-p))

    def _loss_fn(self, X, C, noise_seed, warmup):
        """Minibatch loss closure; the KL weight is ``beta`` times the warm-up's current weight."""
        generator = self._generator(noise_seed, self.device_)

        def loss_fn(idx):
            beta = self.beta * warmup.weight
            shape = (self.n_mc_train, len(idx), self.n_components)
            eps = torch.randn(shape, generator=generator, device=self.device_, dtype=self._dtype)
            c = None if C is None else C[idx]
            expected_log_lik, kl = self.module_.elbo_terms(X[idx], eps, c)
            # Local latents: the batch's KL is divided by the batch size.
            return negative_elbo(expected_log_lik, beta * kl.sum(), len(idx))

        return loss_fn

    def _auto_budget(self):
        return AUTO_MAX_EPOCHS, AUTO_MAX_STEPS

    def _train(self, X, C, noise_seed, shuffle_seed, *, split_seed=None, epochs_done=0, **overrides):
        """One run of the shared training loop on model-unit rows X (tensor) and conditions C.

        ``split_seed`` holds out a validation split (``early_stopping``);
        ``epochs_done`` is where the KL warm-up starts; ``overrides`` replace
        loop settings (``partial_fit``: one epoch, no stopping rule).
        """
        n_samples = X.shape[0]
        X_train, C_train, validation_score_fn = X, C, None
        if split_seed is not None:
            train_idx, val_idx = self._validation_split(n_samples, split_seed, self.validation_fraction)
            X_train, C_train = X[train_idx], None if C is None else C[train_idx]
            X_val, C_val = X[val_idx], None if C is None else C[val_idx]

            def validation_score_fn():
                eps = self._latent_qmc_points(_N_QMC_VALIDATION, self._score_seed)
                with evaluation_mode(self.module_):  # e.g. batch normalisation with its running statistics
                    return float(torch.as_tensor(self._elbo(X_val, C_val, eps, self.beta)).mean())

        warmup = KLWarmup(self.kl_warmup_epochs, start_epoch=epochs_done)
        warmup_left = max(0, self.kl_warmup_epochs - epochs_done)
        self.module_.train()
        try:
            # The loss rises while beta_t warms up, so stopping waits for it.
            return self._fit_loop(
                self._loss_fn(X_train, C_train, noise_seed, warmup),
                self._optimizer,
                X_train.shape[0],
                shuffle_seed=shuffle_seed,
                callbacks=[warmup],
                min_iter=warmup_left,
                validation_score_fn=validation_score_fn,
                module=self.module_,
                **overrides,
            )
        finally:
            self.module_.eval()

    # ---------------------------------------------------------- computation
    def _latent_draws(self, n_draws, seed):
        """Standard normal draws of shape (n_draws, 1, k), shared by all rows."""
        generator = self._generator(seed, self.device_)
        shape = (n_draws, 1, self.n_components)
        return torch.randn(shape, generator=generator, device=self.device_, dtype=self._dtype)

    def _latent_qmc_points(self, n_points, seed):
        """Randomised quasi-Monte-Carlo N(0, I) points, shape (n_points, 1, k).

        Scrambled Sobol points [Owen1998]_ mapped through the normal quantile:
        each point is marginally N(0, I), so averages are unbiased, with a far
        smaller error than as many independent draws (on a fitted 2-D VAE, the
        standard deviation of the mean ELBO of 50 rows was 0.007 nats with 128
        points against 0.07 with 128 independent draws).
        """
        engine = torch.quasirandom.SobolEngine(self.n_components, scramble=True, seed=seed)
        u = engine.draw(n_points, dtype=torch.float64).clamp(_QMC_CLIP, 1 - _QMC_CLIP)
        return torch.special.ndtri(u)[:, None, :].to(device=self.device_, dtype=self._dtype)

    def _model_rows(self, X):
        """The rows of validated X in model units, standardised block by block when read."""
        return _MappedRows(X, self._standardise)

    def _elbo(self, X, C, eps, beta=1.0):
        """Per-row (beta-)ELBO of model-unit rows X (tensor or mapped rows), ndarray of shape (n,)."""

        def elbo(x, rows):
            return self.module_.elbo(x, eps, None if C is None else C[rows], beta)

        return self._predict_in_blocks(X, elbo, row_size=eps.shape[0] * self._width)

    def _log_jacobian(self):
        """log |dx_model / dx| per row: the change of units of the Gaussian density."""
        return -float(np.log(self._x_scale).sum())

    # ------------------------------------------------------------ transform
    def fit_transform(self, X, y=None):
        """Fit to X (and y when ``conditional``), then return the posterior means.

        %(parameters_X_y_fit)s

        Returns
        -------
        Z : ndarray of shape (n_samples, n_components)
        """
        return self.fit(X, y).transform(X, y)

    @validate_method_params(return_std=["boolean"])
    def transform(self, X, y=None, return_std=False):
        """Posterior means E_q[z | x] of the rows of X.

        Deterministic: no latent noise is drawn.

        Parameters
        ----------
        %(X_y_labels)s
        return_std : bool, default=False
            Also return the posterior standard deviations.

        Returns
        -------
        Z : ndarray of shape (n_samples, n_components)
            Posterior means, in latent units (the prior is N(0, I)), in the
            dtype of X.
        Z_std : ndarray of shape (n_samples, n_components)
            Posterior standard deviations. Only returned when ``return_std``
            is True.
        """
        X = self._validate_X(X)
        C = self._condition(y, X.shape[0])

        def encode(x, rows):
            return self.module_.encode(x, None if C is None else C[rows])

        Z, Z_std = self._predict_in_blocks(self._model_rows(X), encode, row_size=self._width)
        Z = Z.astype(X.dtype, copy=False)
        if return_std:
            return Z, Z_std.astype(X.dtype, copy=False)
        return Z

    def inverse_transform(self, Z, y=None):
        """Decoder mean E[x | z] of each latent row, in the units of X.

        Parameters
        ----------
        Z : array-like of shape (n_samples, n_components)
        %(y_labels)s

        Returns
        -------
        X_mean : ndarray of shape (n_samples, `n_features_in_`)
            Gaussian: the decoder mean; Bernoulli: success probabilities in
            [0, 1]. In the dtype of Z.
        """
        check_is_fitted(self)
        Z = check_array(Z, dtype=(np.float64, np.float32))
        if Z.shape[1] != self.n_components:
            raise ValueError(f"Z has {Z.shape[1]} columns but n_components={self.n_components}.")
        C = self._condition(y, Z.shape[0])
        return self._decode_mean(self._to_tensor(Z), C).astype(Z.dtype, copy=False)

    def _decode_mean(self, Z, C):
        def decode(z, rows):
            return self.module_.mean(self.module_.decode(z, None if C is None else C[rows]))

        return self._predict_in_blocks(Z, decode, row_size=self._width) * self._x_scale + self._x_mean

    @validate_method_params(n_samples=N_DRAWS, random_state=["random_state"])
    def sample(self, n_samples=1, y=None, random_state=None):
        """Generate data: decoder means E[x | z] at draws z ~ N(0, I).

        These are the usual "VAE samples" (for images, the mean image; the
        observation noise or the Bernoulli coin flips are not added).

        Parameters
        ----------
        n_samples : int, default=1
            Number of rows to generate.
        y : array-like of shape (n_samples,) or label, default=None
            Classes to generate; required by a ``conditional`` VAE (a single
            label applies to every row), ignored otherwise.
        random_state : int, RandomState instance or None, default=None
            Seed of the latent draws; None uses numpy's global random state.

        Returns
        -------
        X_new : ndarray of shape (n_samples, `n_features_in_`)
            In the units of X.

        Raises
        ------
        ValueError
            If ``n_samples`` is not a positive integer or ``random_state`` is
            not a seed (the message names the argument).
        """
        check_is_fitted(self)
        C = self._condition(y, n_samples)
        (seed,) = self._seeds(check_random_state(random_state), 1)
        generator = self._generator(seed, self.device_)
        shape = (n_samples, self.n_components)
        Z = torch.randn(shape, generator=generator, device=self.device_, dtype=self._dtype)
        return self._decode_mean(Z, C).astype(self.dtype_, copy=False)

    # -------------------------------------------------------------- scoring
    def score_samples(self, X, y=None):
        """ELBO of each row: a lower bound on log p(x) (log p(x | y) if conditional).

        E_q[log p(x | z)] is estimated with 128 randomised quasi-Monte-Carlo
        latent points (scrambled Sobol, unbiased), shared by all rows and
        seeded at fit, so the result is deterministic and a row's value does
        not depend on the other rows; the KL is exact.

        Parameters
        ----------
        %(X_y_labels)s

        Returns
        -------
        elbo : ndarray of shape (n_samples,)
            In nats, as a density in the units of X (beta = 1 whatever
            ``beta``).
        """
        X = self._validate_X(X)
        C = self._condition(y, X.shape[0])
        eps = self._latent_qmc_points(_N_QMC_SCORE, self._score_seed)
        return self._elbo(self._model_rows(X), C, eps) + self._log_jacobian()

    def score(self, X, y=None):
        """Mean ELBO of the rows of X, nats per row (higher is better).

        %(parameters_X_y_fit)s

        Returns
        -------
        score : float
        """
        return float(np.mean(self.score_samples(X, y)))

    @validate_method_params(n_importance=N_DRAWS, random_state=["random_state"])
    def log_likelihood_iwae(self, X, y=None, *, n_importance=1000, random_state=0):
        """Importance-weighted lower bound on log p(x) of each row (IWAE).

        log (1/K) sum_k p(x, z_k) / q(z_k | x) with z_k ~ q(z | x)
        ([Burda2016]_, eq. 8): >= the ELBO in expectation, non-decreasing in
        K, and tending to log p(x) as K grows; K = 1 is the ELBO estimator of
        Cinelli 2019, eq. 4.8. The K draws are shared by all rows; the sum runs
        in chunks with a running logsumexp.

        Parameters
        ----------
        %(X_y_labels)s
        n_importance : int, default=1000
            Number K of importance samples.
        random_state : int, RandomState instance or None, default=0
            Seed of the draws (deterministic by default).

        Returns
        -------
        log_likelihood : ndarray of shape (n_samples,)
            In nats, as a density in the units of X.

        Raises
        ------
        ValueError
            If ``n_importance`` is not a positive integer or ``random_state``
            is not a seed (the message names the argument).
        """
        X = self._validate_X(X)
        C = self._condition(y, X.shape[0])
        (seed,) = self._seeds(check_random_state(random_state), 1)
        eps = self._latent_draws(n_importance, seed)
        # A block holds at most 256 draws per row at once, the draws' values of
        # the block's rows as many as a block of rows of predict-in-blocks.
        block_values = PREDICT_BLOCK_BYTES // eps.element_size()

        def log_likelihood(x, rows):
            c = None if C is None else C[rows]
            chunk = max(1, block_values // (x.shape[0] * self._width))
            total = None
            for k in range(0, n_importance, chunk):
                part = torch.logsumexp(self.module_.log_importance_weights(x, eps[k : k + chunk], c), dim=0)
                total = part if total is None else torch.logaddexp(total, part)
            return total - np.log(n_importance)

        row_size = min(n_importance, 256) * self._width
        return self._predict_in_blocks(self._model_rows(X), log_likelihood, row_size=row_size) + self._log_jacobian()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.target_tags.required = self.conditional
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
