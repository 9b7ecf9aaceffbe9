"""BayesianMLPRegressor: a Bayesian neural network for regression."""

from numbers import Real

import numpy as np
import torch
from sklearn.base import RegressorMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils import Bunch, check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from .._param_validation import N_DRAWS, Interval, StrOptions, _fit_context, validate_method_params
from ..base import PredictiveRegressorMixin, target_scaling
from ..nn import GaussianLikelihood, inverse_softplus
from ._base import BaseBayesianMLP, method_streams, mlp_doc

# Initial noise standard deviation, in standardised target units, when learned.
_NOISE_INIT = 0.1


@mlp_doc(target_shape="(n_samples,) or (n_samples, n_outputs)", target_mismatch="or y the\nwrong number of outputs.")
class BayesianMLPRegressor(RegressorMixin, PredictiveRegressorMixin, BaseBayesianMLP):
    """Bayesian multi-layer perceptron regressor.

    The weights get a zero-mean Gaussian prior and the ``inference`` method
    approximates their posterior (mean-field variational inference by
    default: Bayes by Backprop, fitted by Adam on minibatches); the
    observation noise is Gaussian and learned. Predictions average
    ``n_mc_predict`` weight draws from the posterior, and the predictive
    variance is the variance of those draws (epistemic) plus the noise
    variance (aleatoric).

    Parameters
    ----------
    %(shared_parameters)s
    noise_std : "learn" or float, default="learn"
        Observation noise standard deviation: ``"learn"`` fits it (type-II
        maximum likelihood, or its posterior for ``PBP`` and ``SGHMC``),
        starting at 0.1 in standardised units; a float fixes it, in the
        units of y.
    normalize_y : bool, default=True
        Standardise y before fitting (recommended: the prior and the noise
        initialisation assume unit-scale targets); outputs are always in the
        units of y.

    Attributes
    ----------
    %(shared_attributes)s
    noise_std_ : ndarray of shape (n_outputs,)
        Observation noise standard deviation, in the units of y (for methods
        whose members each have a noise level, ``DeepEnsemble`` and
        ``SGHMC``, the root mean square over the members).
    n_outputs_ : int
        Number of outputs.

    See Also
    --------
    sklearn.neural_network.MLPRegressor : the deterministic counterpart.
    sklearn.linear_model.BayesianRidge : Bayesian linear regression.
    skbayes.inference : the inference methods and their settings.

    Notes
    -----
    The minibatch loss of the variational methods is the negative ELBO
    divided by N (Gal 2016, eq. 3.2 over N):
    ``-(1/B) sum_batch E_q[log p(y_i | x_i, w)] + KL(q || p) / N``; the KL
    weight does not depend on the batch size.

    Standardise X (e.g. ``StandardScaler`` in a pipeline): the prior is
    placed on the weights, so its meaning depends on the scale of X.

    ``partial_fit`` streams minibatches: its first call on an unfitted
    estimator initialises everything from that batch (the y standardisation
    included), and every call takes one epoch over its rows with the N of
    the objective set to ``n_seen_``; the optimiser's state carries over
    between calls. It holds no rows out: ``early_stopping`` is for ``fit``.

    References
    ----------
    .. [Gal2016] Y. Gal, "Uncertainty in deep learning", PhD thesis,
       University of Cambridge, 2016, chapter 3.

    Examples
    --------
    >>> import numpy as np
    >>> from skbayes import BayesianMLPRegressor
    >>> from skbayes.inference import DeepEnsemble
    >>> rng = np.random.RandomState(0)
    >>> X = rng.uniform(-3, 3, size=(200, 1))
    >>> y = np.sin(X[:, 0]) + 0.1 * rng.randn(200)
    >>> model = BayesianMLPRegressor(max_iter=100, random_state=0).fit(X, y)
    >>> mean, std = model.predict(X[:3], return_std=True)
    >>> mean.shape, std.shape
    ((3,), (3,))
    >>> ensemble = BayesianMLPRegressor(inference=DeepEnsemble(n_estimators=3), max_iter=20).fit(X, y)
    """

    _parameter_constraints = {
        **BaseBayesianMLP._parameter_constraints,
        "noise_std": [StrOptions({"learn"}), Interval(Real, 0, None, closed="neither")],
        "normalize_y": ["boolean"],
    }

    def __init__(
        self,
        hidden_layer_sizes=(50,),
        *,
        inference="mfvi",
        activation="relu",
        prior_scale=1.0,
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
    ):
        super().__init__(
            hidden_layer_sizes,
            inference=inference,
            activation=activation,
            prior_scale=prior_scale,
            batch_size=batch_size,
            learning_rate_init=learning_rate_init,
            beta_1=beta_1,
            beta_2=beta_2,
            max_iter=max_iter,
            n_mc_predict=n_mc_predict,
            early_stopping=early_stopping,
            validation_fraction=validation_fraction,
            n_iter_no_change=n_iter_no_change,
            tol=tol,
            warm_start=warm_start,
            callbacks=callbacks,
            random_state=random_state,
            verbose=verbose,
            device=device,
            dtype=dtype,
        )
        self.noise_std = noise_std
        self.normalize_y = normalize_y

    def _learn_noise(self):
        return self.noise_std == "learn"

    def _make_likelihood(self, n_outputs, device, dtype, n_members=None):
        factory = {"n_members": n_members, "device": device, "dtype": dtype}
        if self.noise_std == "learn":
            return GaussianLikelihood(n_outputs, _NOISE_INIT, learn_noise=True, **factory)
        # A fixed noise is given in y units; the model works in standardised units.
        likelihood = GaussianLikelihood(n_outputs, 1.0, learn_noise=False, **factory)
        scale = torch.as_tensor(self.noise_std / self._y_scale, device=device, dtype=dtype)
        likelihood.raw_noise.copy_(inverse_softplus(scale - likelihood._floor))
        return likelihood

    def _validate_training_data(self, X, y, reset):
        X, y = validate_data(
            self, X, y, reset=reset, multi_output=True, y_numeric=True, dtype=(np.float64, np.float32)
        )
        Y = y.reshape(len(y), -1).astype(X.dtype, copy=False)
        if not reset and Y.shape[1] != self.n_outputs_:
            raise ValueError(f"y has {Y.shape[1]} outputs, but the model was fitted with {self.n_outputs_}.")
        return X, y, Y

    def _set_output_scaling(self, y, Y):
        self._y_1d = y.ndim == 1
        self.n_outputs_ = Y.shape[1]
        self._y_mean, self._y_scale = target_scaling(Y, self.normalize_y)

    def _set_noise_std(self):
        # Root mean square over the members when each member has its own noise:
        # the aleatoric variance of the uniform mixture.
        noise = self.module_["likelihood"].noise_std.detach().cpu().numpy()
        noise = np.sqrt((noise**2).reshape(-1, self.n_outputs_).mean(axis=0))
        self.noise_std_ = noise * self._y_scale

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit the posterior over the weights (and the noise) to the data.

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
            On NaN/inf or wrongly shaped input, an invalid parameter of the
            inference method, or if the training loss diverges (the message
            says what to change).
        """
        X, y, Y = self._validate_training_data(X, y, reset=True)
        method = self._inference_method()
        if not self._can_warm_start(X.shape[1], Y.shape[1], method):
            # a warm start keeps the scaling the fitted likelihood works in
            self._set_output_scaling(y, Y)
        self._y_1d = y.ndim == 1
        self.n_outputs_ = Y.shape[1]
        self._fit_network(X, (Y - self._y_mean) / self._y_scale, self.n_outputs_, method)
        self._set_noise_std()
        return self

    @available_if(method_streams)
    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y):
        """Update the model with one epoch over a batch of rows (streaming).

        The first call on an unfitted estimator initialises the model from
        this batch as ``fit`` does (the y standardisation included); every
        call then takes one epoch over its rows, with the N of the objective
        set to ``n_seen_``, the running total of rows seen so far. After
        ``fit``, ``partial_fit`` continues from the fitted model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)

        %(returns_self)s

        Raises
        ------
        ValueError
            On NaN/inf or wrongly shaped input, a feature or output count that
            differs from earlier calls, a method that cannot stream
            (``SGHMC``), or a diverging loss.
        """
        first = not hasattr(self, "module_")
        X, y, Y = self._validate_training_data(X, y, reset=first)
        method = self._inference_method()
        if first:
            self._set_output_scaling(y, Y)
        self._partial_fit_network(X, (Y - self._y_mean) / self._y_scale, self.n_outputs_, method, first)
        self._set_noise_std()
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

        %(parameters_X)s

        Returns
        -------
        result : Bunch
            ``mean``, ``std``, ``epistemic_std``, ``aleatoric_std``, each of
            shape (n_samples,) or (n_samples, n_outputs), in the units of y;
            ``std**2 == epistemic_std**2 + aleatoric_std**2``.

        %(predict_raises)s
        """
        X = self._validate_X_predict(X)
        mean, variance = self._over_draws(
            X, lambda f, rows: (f.mean(0), f.var(0, correction=0)), self.n_mc_predict, self._predict_seed
        )
        mean = mean * self._y_scale + self._y_mean
        epistemic = np.sqrt(variance) * self._y_scale
        aleatoric = np.broadcast_to(self.noise_std_, mean.shape).astype(mean.dtype)
        return Bunch(
            mean=self._output(mean),
            std=self._output(np.sqrt(epistemic**2 + aleatoric**2)),
            epistemic_std=self._output(epistemic),
            aleatoric_std=self._output(aleatoric.copy()),
        )

    @validate_method_params(return_std=["boolean"])
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

        %(predict_raises)s
        """
        if not return_std:
            X = self._validate_X_predict(X)
            mean = self._over_draws(X, lambda f, rows: f.mean(0), self.n_mc_predict, self._predict_seed)
            return self._output(mean * self._y_scale + self._y_mean)
        result = self.predict_uncertainty(X)
        return result.mean, result.std

    @validate_method_params(n_samples=N_DRAWS, random_state=["random_state"])
    def sample_y(self, X, n_samples=1, random_state=0):
        """Draw targets from the posterior predictive distribution.

        Each draw takes one weight setting from the posterior (shared by all
        rows, so the function is coherent across X; for methods with a finite
        set of members, a member chosen at random, with its own noise level)
        and adds Gaussian noise.

        Parameters
        ----------
        X : array-like of shape (n_samples_X, n_features)
        n_samples : int, default=1
            Number of draws per row (>= 1).
        random_state : int, RandomState instance or None, default=0
            Seed of the draws (scikit-learn's ``GaussianProcessRegressor``
            convention: deterministic by default).

        Returns
        -------
        y_samples : ndarray of shape (n_samples_X, n_samples) or (n_samples_X, n_outputs, n_samples)
            In the units of y; draws on the last axis.

        Raises
        ------
        %(not_fitted_error)s
        ValueError
            If X has NaN/inf or the wrong number of features, or
            ``n_samples`` < 1.
        """
        X = self._validate_X_predict(X)
        seed, noise_seed = self._seeds(check_random_state(random_state), 2)
        parameters, index = self._draw_parameters(n_samples, seed, all_members=False)
        f = self._over_draws(X, lambda f, rows: f.transpose(0, 1), parameters=parameters)
        f = np.moveaxis(f, 1, 0)  # (S, n, k)
        sigma = self.module_["likelihood"].noise_std.detach()
        if index is not None and sigma.dim() == 3:  # one noise level per member: follow the drawn members
            sigma = sigma[index]
        noise = np.random.RandomState(noise_seed).standard_normal(f.shape)
        y = (f + noise * sigma.cpu().numpy()) * self._y_scale + self._y_mean
        y = np.moveaxis(y, 0, -1)  # (n, k, S)
        return y[:, 0, :] if self._y_1d else y

    def log_predictive_density(self, X, y):
        """Log predictive density of each observation, in nats.

        ``log (1/T) sum_t N(y_i | f_t(x_i), sigma^2)`` over the T =
        ``n_mc_predict`` weight draws (Gal 2016, eq. 3.18), in the units
        of y and summed over outputs: the per-point test log-likelihood of the
        UCI benchmark protocol.

        %(log_predictive_density_sections)s
        """
        check_is_fitted(self)
        X, y, Y = self._validate_training_data(X, y, reset=False)
        Y = self._to_tensor((Y - self._y_mean) / self._y_scale)
        log_p = self._log_predictive(X, Y, self.n_mc_predict, self._predict_seed)
        return log_p - np.log(self._y_scale).sum()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags
