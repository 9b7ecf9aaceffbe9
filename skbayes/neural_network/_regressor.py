"""BayesianMLPRegressor: a Bayesian neural network for regression."""

from numbers import Real

import numpy as np
import torch
from sklearn.base import RegressorMixin
from sklearn.utils import Bunch, check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from .._param_validation import Interval, StrOptions, _fit_context
from ..nn import GaussianLikelihood, inverse_softplus
from ..base import PredictiveRegressorMixin
from ._base import BaseBayesianMLP

# Initial noise standard deviation, in standardised target units, when learned.
_NOISE_INIT = 0.1


class BayesianMLPRegressor(RegressorMixin, PredictiveRegressorMixin, BaseBayesianMLP):
    """Bayesian multi-layer perceptron regressor trained by variational inference.

    The weights get a zero-mean Gaussian prior and an approximate posterior q
    fitted by maximising the evidence lower bound (ELBO) with Adam on
    minibatches; the observation noise is Gaussian and learned. Predictions
    average ``n_samples_predict`` weight draws from q, and the predictive
    variance is the variance of those draws (epistemic) plus the noise
    variance (aleatoric).

    Parameters
    ----------
    hidden_layer_sizes : array-like of int or int, default=(50,)
        Width of each hidden layer; ``()`` gives Bayesian linear regression.
    inference : {"mfvi", "mc_dropout", "pbp", "vadam", "sghmc", "ensemble"}, default="mfvi"
        How the posterior over the weights is approximated (the user guide
        compares them). ``"mfvi"``: mean-field Gaussian q (Bayes by Backprop
        [Blundell2015]_) with the local reparameterisation trick
        [Kingma2015]_ and the closed-form KL to the prior. ``"mc_dropout"``:
        Bernoulli q over the rows of each weight matrix, i.e. dropout before
        every layer, kept on at prediction time (MC dropout [Gal2016]_), with
        the weight decay derived from the prior, the dropout rate and N (see
        Notes). ``"pbp"``: probabilistic backpropagation
        [HernandezLobato2015]_, assumed density filtering with Gamma
        hyperpriors on the prior and noise precisions (no learning rate).
        ``"vadam"``: variational Adam [Khan2018]_, natural-gradient
        mean-field VI. ``"sghmc"``: stochastic-gradient Hamiltonian Monte
        Carlo [Chen2014]_; predictions average the kept samples.
        ``"ensemble"``: deep ensemble [Lakshminarayanan2017]_ of
        ``n_estimators`` networks, each with its own learned noise; the
        predictive is their uniform mixture.
    activation : {"relu", "tanh", "logistic", "identity"}, default="relu"
        Non-linearity of the hidden layers.
    prior_scale : float, default=1.0
        Standard deviation of the N(0, prior_scale^2) prior on every weight
        and bias (for ``"mc_dropout"``, 1 / the prior length-scale l). ``"pbp"``
        infers the prior scale instead (``pbp_prior_std_``).
    posterior_init_scale : float, default=1e-3
        Initial standard deviation of q for ``"mfvi"``.
    dropout_rate : float, default=0.01
        Probability of *dropping* a unit, for ``"mc_dropout"``.
    init : {"default", "iblm", "uninformative", "heuristic", "xavier", "orthogonal", "lsuv"}, default="default"
        Initialisation of the mean-field posterior, for ``"mfvi"`` and
        ``"vadam"`` (see :data:`skbayes.nn.initialization.INITIALIZATIONS`):
        ``"default"`` keeps uniform random means and ``posterior_init_scale``
        standard deviations; ``"iblm"`` fits Bayesian linear regression layer
        by layer (I-BLM, Rossi 2022, chapter 3), which keeps VI from
        collapsing to the prior; the others are the alternatives compared
        there (section 3.3). ``"vadam"`` always starts its variances at the
        prior's and uses only the means.
    kl_warmup_epochs : int, default=0
        Linear warm-up of the KL weight from 0 to 1 over this many epochs
        (KL annealing; ``"mfvi"`` and ``"mc_dropout"``; ``"vadam"`` has no KL
        gradient to anneal). The stopping rule starts counting after the
        warm-up.
    n_estimators : int, default=5
        Number of independently initialised networks of ``"ensemble"``.
    n_chains : int, default=2
        Number of parallel chains of ``"sghmc"``, run batched; their split
        R-hat is stored in ``rhat_``.
    burn_in : int, default=300
        Epochs of ``"sghmc"`` before samples are kept (the sampler also
        adapts its mass matrix during them). ``"sghmc"`` runs exactly
        ``burn_in + thinning * n_kept_samples`` epochs: ``max_iter``, ``tol``,
        ``n_iter_no_change`` and ``early_stopping`` do not apply to it.
    thinning : int, default=10
        Epochs of ``"sghmc"`` between two kept samples.
    n_kept_samples : int, default=20
        Samples kept per chain by ``"sghmc"``; predictions use all
        ``n_chains * n_kept_samples`` of them.
    friction : float in (0, 1], default=0.05
        Friction (momentum decay per step, alpha of Chen et al. 2014,
        section 3.3) of ``"sghmc"``.
    step_size : float, default=3e-4
        Step size of ``"sghmc"`` (epsilon^2 of the scale-adapted sampler,
        Springenberg et al. 2016; Rossi 2022, eq. 2.36). ``learning_rate_init``
        is Adam's step size and does not apply to ``"sghmc"`` or ``"pbp"``.
    noise : "learn" or float, default="learn"
        ``"learn"`` learns one homoscedastic noise standard deviation per
        output by maximising the ELBO; a float fixes it (units of y).
    normalize_y : bool, default=True
        Standardise y (per output) before fitting; all outputs are still in
        the units of y.
    batch_size : int or "auto", default="auto"
        Minibatch size; ``"auto"`` is ``min(32, n_samples)`` up to 2,000 rows
        and 128 above, the sizes of the reference UCI experiments (Cinelli 2019,
        section 3.7), and one row per step for ``"pbp"`` (the paper's ADF
        schedule; an integer there includes that many rows per step as one
        factor, faster but approximate).
    learning_rate_init : float, default=3e-3
        Adam step size (also Vadam's); not used by ``"pbp"`` and ``"sghmc"``.
    beta_1, beta_2 : float, default=0.9, 0.999
        Decay rates of the first and second moment estimates of Adam (and of
        Vadam).
    max_iter : int or "auto", default="auto"
        Maximum number of epochs (training usually stops earlier, see
        ``n_iter_no_change``). ``"auto"`` is 500, and for ``"pbp"`` 40
        passes over the data (the paper's schedule, run in full unless
        ``early_stopping``). ``"sghmc"`` ignores it (see ``burn_in``).
    n_samples_train : int, default=1
        Monte-Carlo draws per datum and step for the expected log-likelihood.
    n_samples_predict : int, default=100
        Weight draws averaged at prediction. ``"ensemble"`` and ``"sghmc"``
        predict with all their members (kept samples) instead, the exact
        mixture.
    early_stopping : bool, default=False
        Hold out ``validation_fraction`` of the training rows and stop when
        their log predictive density stops improving (the best weights are
        restored). Otherwise stop when the training loss stops improving.
    validation_fraction : float, default=0.1
        Fraction of rows held out when ``early_stopping``.
    n_iter_no_change : int, default=50
        Epochs without an improvement of at least ``tol`` before stopping.
        Longer than scikit-learn's 10 because the ELBO is a Monte-Carlo
        estimate: on the UCI concrete splits 0-2, 10 epochs stopped training
        after 90-280 epochs and lost 0.05-0.15 nats of test log-likelihood.
    tol : float, default=1e-4
        Minimum improvement of the per-datum loss (or validation score).
    warm_start : bool, default=False
        Reuse the fitted network as the starting point of the next ``fit``.
    random_state : int, RandomState instance or None, default=None
        Seeds the initial weights, minibatch order, training noise and the
        prediction draws; the global torch seed is never touched.
    verbose : bool, default=False
        Show a progress bar over epochs with the loss.
    device : str, default="auto"
        Torch device; ``"auto"`` picks CUDA when available.
    dtype : {"float32", "float64"} or None, default=None
        Precision of the computation; None keeps float32 input as float32
        and uses float64 otherwise on the CPU, float32 on accelerators.

    Attributes
    ----------
    module_ : torch.nn.ModuleDict
        The fitted ``"network"`` (:class:`skbayes.nn.BayesianMLP`) and
        ``"likelihood"`` (:class:`skbayes.nn.GaussianLikelihood`), which work
        in standardised target units.
    noise_std_ : ndarray of shape (n_outputs,)
        Observation noise standard deviation, in the units of y (for
        ``"ensemble"`` and ``"sghmc"``, whose members each have a noise level,
        the root mean square over the members).
    loss_curve_ : list of float
        Per-datum negative ELBO (nats) of each epoch, in standardised units.
    n_iter_ : int
        Number of epochs run.
    best_loss_ : float or None
        Lowest epoch loss (None when ``early_stopping``).
    validation_scores_ : list of float or None
        Mean validation log predictive density per epoch, in standardised
        units (None unless ``early_stopping``).
    best_validation_score_ : float or None
        Best of ``validation_scores_``.
    kl_ : float
        KL(q || prior) of the fitted weights, in nats (for ``"ensemble"`` and
        ``"sghmc"``, which have no q, the summed negative log prior
        sum(w^2) / (2 prior_scale^2) of all members, up to a constant).
    pbp_prior_std_ : float
        Only for ``"pbp"``: the inferred prior standard deviation
        E[1/lambda]^(1/2) of the (unscaled) weights, from the Gamma posterior
        of the prior precision.
    pbp_n_rejected_ : int
        Only for ``"pbp"``: ADF weight updates skipped because they would
        have made a variance non-positive (the paper's safeguard).
    rhat_ : float
        Only for ``"sghmc"``: the largest split R-hat (Gelman et al. 2013,
        section 11.4) over the chains' kept samples of the mean training
        log-likelihood and of the log-likelihood of a few training rows;
        values above ~1.1 say the chains have not mixed. NaN with fewer than
        4 kept samples per chain.
    n_outputs_ : int
        Number of outputs.
    device_ : torch.device
        Device the model lives on.
    dtype_ : str
        ``"float32"`` or ``"float64"``.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of features seen during fit, when X has string column names.

    See Also
    --------
    sklearn.neural_network.MLPRegressor : the deterministic counterpart.
    sklearn.linear_model.BayesianRidge : Bayesian linear regression.

    Notes
    -----
    The minibatch loss is the negative ELBO divided by N (Gal 2016, eq. 3.2
    over N): ``-(1/B) sum_batch E_q[log p(y_i | x_i, w)] + KL(q || p) / N``;
    the KL weight does not depend on the batch size.

    For ``"mc_dropout"`` PyTorch's inverted dropout scales kept units by
    1/(1-p), so the prior N(0, l^-2) gives the weight decay
    ``l^2 / (2 N (1 - p))`` on the stored weights (and ``l^2 / (2 N)`` on the
    biases), see :class:`skbayes.nn.DropoutLinear`.

    Standardise X (e.g. ``StandardScaler`` in a pipeline): the prior is
    placed on the weights, so its meaning depends on the scale of X.

    References
    ----------
    .. [Blundell2015] C. Blundell, J. Cornebise, K. Kavukcuoglu and D. Wierstra,
       "Weight uncertainty in neural networks", ICML 2015.
    .. [Kingma2015] D. P. Kingma, T. Salimans and M. Welling, "Variational
       dropout and the local reparameterization trick", NeurIPS 2015.
    .. [Gal2016] Y. Gal, "Uncertainty in deep learning", PhD thesis,
       University of Cambridge, 2016, chapter 3.
    .. [HernandezLobato2015] J. M. Hernández-Lobato and R. P. Adams,
       "Probabilistic backpropagation for scalable learning of Bayesian
       neural networks", ICML 2015 (Cinelli 2019, section 3.4).
    .. [Khan2018] M. E. Khan et al., "Fast and scalable Bayesian deep
       learning by weight-perturbation in Adam", ICML 2018 (Cinelli 2019,
       section 3.6).
    .. [Chen2014] T. Chen, E. B. Fox and C. Guestrin, "Stochastic gradient
       Hamiltonian Monte Carlo", ICML 2014 (Rossi 2022, section 2.4).
    .. [Lakshminarayanan2017] B. Lakshminarayanan, A. Pritzel and C. Blundell,
       "Simple and scalable predictive uncertainty estimation using deep
       ensembles", NeurIPS 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from skbayes import BayesianMLPRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.uniform(-3, 3, size=(200, 1))
    >>> y = np.sin(X[:, 0]) + 0.1 * rng.randn(200)
    >>> model = BayesianMLPRegressor(max_iter=100, random_state=0).fit(X, y)
    >>> mean, std = model.predict(X[:3], return_std=True)
    >>> mean.shape, std.shape
    ((3,), (3,))
    """

    _parameter_constraints = {
        **BaseBayesianMLP._parameter_constraints,
        "noise": [StrOptions({"learn"}), Interval(Real, 0, None, closed="neither")],
        "normalize_y": ["boolean"],
    }

    def __init__(
        self,
        hidden_layer_sizes=(50,),
        *,
        inference="mfvi",
        activation="relu",
        prior_scale=1.0,
        posterior_init_scale=1e-3,
        dropout_rate=0.01,
        init="default",
        kl_warmup_epochs=0,
        n_estimators=5,
        n_chains=2,
        burn_in=300,
        thinning=10,
        n_kept_samples=20,
        friction=0.05,
        step_size=3e-4,
        noise="learn",
        normalize_y=True,
        batch_size="auto",
        learning_rate_init=3e-3,
        beta_1=0.9,
        beta_2=0.999,
        max_iter="auto",
        n_samples_train=1,
        n_samples_predict=100,
        early_stopping=False,
        validation_fraction=0.1,
        n_iter_no_change=50,
        tol=1e-4,
        warm_start=False,
        random_state=None,
        verbose=False,
        device="auto",
        dtype=None,
    ):
        super().__init__(
            hidden_layer_sizes,
            inference=inference,
            activation=activation,
            prior_scale=prior_scale,
            posterior_init_scale=posterior_init_scale,
            dropout_rate=dropout_rate,
            init=init,
            kl_warmup_epochs=kl_warmup_epochs,
            n_estimators=n_estimators,
            n_chains=n_chains,
            burn_in=burn_in,
            thinning=thinning,
            n_kept_samples=n_kept_samples,
            friction=friction,
            step_size=step_size,
            batch_size=batch_size,
            learning_rate_init=learning_rate_init,
            beta_1=beta_1,
            beta_2=beta_2,
            max_iter=max_iter,
            n_samples_train=n_samples_train,
            n_samples_predict=n_samples_predict,
            early_stopping=early_stopping,
            validation_fraction=validation_fraction,
            n_iter_no_change=n_iter_no_change,
            tol=tol,
            warm_start=warm_start,
            random_state=random_state,
            verbose=verbose,
            device=device,
            dtype=dtype,
        )
        self.noise = noise
        self.normalize_y = normalize_y

    def _make_likelihood(self, n_outputs, device, dtype, n_members=None):
        factory = {"n_members": n_members, "device": device, "dtype": dtype}
        if self.noise == "learn":
            return GaussianLikelihood(n_outputs, _NOISE_INIT, learn_noise=True, **factory)
        # A fixed noise is given in y units; the model works in standardised units.
        likelihood = GaussianLikelihood(n_outputs, 1.0, learn_noise=False, **factory)
        scale = torch.as_tensor(self.noise / self._y_scale, device=device, dtype=dtype)
        likelihood.raw_noise.copy_(inverse_softplus(scale - likelihood._floor))
        return likelihood

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit the variational posterior to the data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs (standardise them for the prior to be meaningful).
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Targets.

        Returns
        -------
        self : BayesianMLPRegressor
            The fitted estimator.

        Raises
        ------
        ValueError
            On NaN/inf or wrongly shaped input, or if the training loss
            diverges (the message says what to change).
        """
        X, y = validate_data(
            self, X, y, multi_output=True, y_numeric=True, dtype=(np.float64, np.float32)
        )
        Y = y.reshape(len(y), -1).astype(X.dtype, copy=False)
        self._y_1d = y.ndim == 1
        self.n_outputs_ = Y.shape[1]
        if self._can_warm_start(X.shape[1], Y.shape[1]):
            pass  # keep the scaling the fitted likelihood works in
        elif self.normalize_y:
            self._y_mean = Y.mean(axis=0)
            scale = Y.std(axis=0)
            self._y_scale = np.where(scale > 0, scale, 1.0)
        else:
            self._y_mean = np.zeros(Y.shape[1], dtype=Y.dtype)
            self._y_scale = np.ones(Y.shape[1], dtype=Y.dtype)
        self._fit_network(X, (Y - self._y_mean) / self._y_scale, self.n_outputs_)
        # Root mean square over the members when each member has its own noise:
        # the aleatoric variance of the uniform mixture.
        noise = self.module_["likelihood"].noise_std.detach().cpu().numpy()
        noise = np.sqrt((noise**2).reshape(-1, self.n_outputs_).mean(axis=0))
        self.noise_std_ = noise * self._y_scale
        return self

    # --------------------------------------------------------------- prediction
    def _output(self, a):
        """(n, k) array in y units -> (n,) for 1-D training targets."""
        return a[:, 0] if self._y_1d else a

    def predict_uncertainty(self, X):
        """Predictive mean and standard deviations, split by source.

        The predictive distribution is the mixture of N(f_t(x), sigma^2) over
        the weight draws f_t; its variance is Var_t[f_t(x)] (epistemic, model
        uncertainty) + sigma^2 (aleatoric, observation noise), as in Gal 2016,
        section 3.3.1 (Prop. 3).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        result : Bunch
            ``mean``, ``std``, ``epistemic_std``, ``aleatoric_std``, each of
            shape (n_samples,) or (n_samples, n_outputs), in the units of y;
            ``std**2 == epistemic_std**2 + aleatoric_std**2``.
        """
        X = self._validate_X_predict(X)
        means, variances = [], []
        for _, f in self._function_draws(X, self.n_samples_predict, self._predict_seed):
            means.append(f.mean(0))
            variances.append(f.var(0, correction=0))
        mean = torch.cat(means).cpu().numpy() * self._y_scale + self._y_mean
        epistemic = np.sqrt(torch.cat(variances).cpu().numpy()) * self._y_scale
        aleatoric = np.broadcast_to(self.noise_std_, mean.shape).astype(mean.dtype)
        return Bunch(
            mean=self._output(mean),
            std=self._output(np.sqrt(epistemic**2 + aleatoric**2)),
            epistemic_std=self._output(epistemic),
            aleatoric_std=self._output(aleatoric.copy()),
        )

    def predict(self, X, return_std=False):
        """Predictive mean (Monte-Carlo average over weight draws).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        return_std : bool, default=False
            Also return the predictive standard deviation (noise included).

        Returns
        -------
        y_mean : ndarray of shape (n_samples,) or (n_samples, n_outputs)
        y_std : ndarray, same shape as y_mean
            Only returned when ``return_std`` is True.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If called before ``fit``.
        ValueError
            If X has NaN/inf or the wrong number of features.
        """
        if not return_std:
            X = self._validate_X_predict(X)
            means = [f.mean(0) for _, f in self._function_draws(X, self.n_samples_predict, self._predict_seed)]
            return self._output(torch.cat(means).cpu().numpy() * self._y_scale + self._y_mean)
        result = self.predict_uncertainty(X)
        return result.mean, result.std

    def sample_y(self, X, n_samples=1, random_state=0):
        """Draw targets from the posterior predictive distribution.

        Each sample draws one weight setting from the posterior (shared by all
        rows, so the function is coherent across X; for ``"ensemble"`` and
        ``"sghmc"`` a member chosen at random, with its own noise level) and
        adds Gaussian noise.

        Parameters
        ----------
        X : array-like of shape (n_samples_X, n_features)
        n_samples : int, default=1
            Number of draws per row.
        random_state : int, RandomState instance or None, default=0
            Seed of the draws (scikit-learn's ``GaussianProcessRegressor``
            convention: deterministic by default).

        Returns
        -------
        y_samples : ndarray of shape (n_samples_X, n_samples) or (n_samples_X, n_outputs, n_samples)
            In the units of y; samples on the last axis.
        """
        X = self._validate_X_predict(X)
        seed, noise_seed = self._seeds(check_random_state(random_state), 2)
        parameters, index = self._draw_parameters(n_samples, seed, all_members=False)
        draws = [f for _, f in self._function_draws(X, n_samples, seed, parameters)]
        f = torch.cat(draws, dim=1).cpu().numpy()  # (S, n, k)
        sigma = self.module_["likelihood"].noise_std.detach()
        if index is not None:  # one noise level per member: follow the drawn members
            sigma = sigma[index]
        noise = np.random.RandomState(noise_seed).standard_normal(f.shape)
        y = (f + noise * sigma.cpu().numpy()) * self._y_scale + self._y_mean
        y = np.moveaxis(y, 0, -1)  # (n, k, S)
        return y[:, 0, :] if self._y_1d else y

    def log_predictive_density(self, X, y):
        """Log predictive density of each observation, in nats.

        ``log (1/T) sum_t N(y_i | f_t(x_i), sigma^2)`` over the T =
        ``n_samples_predict`` weight draws (Gal 2016, eq. 3.18), in the units
        of y and summed over outputs: the per-point test log-likelihood of the
        UCI benchmark protocol.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)

        Returns
        -------
        log_density : ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        X, y = validate_data(
            self, X, y, reset=False, multi_output=True, y_numeric=True, dtype=(np.float64, np.float32)
        )
        Y = y.reshape(len(y), -1)
        if Y.shape[1] != self.n_outputs_:
            raise ValueError(f"y has {Y.shape[1]} outputs, but the model was fitted with {self.n_outputs_}.")
        Y = self._to_tensor((Y - self._y_mean) / self._y_scale)
        log_p = self._log_predictive(X, Y, self.n_samples_predict, self._predict_seed)
        return log_p.cpu().numpy() - np.log(self._y_scale).sum()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags
