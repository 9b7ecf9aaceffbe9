"""BayesianMLPRegressor: a Bayesian neural network for regression."""

from numbers import Real

import numpy as np
import torch
from sklearn.base import RegressorMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils import Bunch, check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from .._param_validation import N_DRAWS, Interval, StrOptions, _fit_context, validate_method_params
from .._predictive import MixturePredictive
from ..base import PredictiveRegressorMixin, target_scaling
from ..nn import GaussianLikelihood, HeteroscedasticGaussianLikelihood, StudentTLikelihood, inverse_softplus
from ..inference import resolve_inference
from ._base import BaseBayesianMLP, method_streams, mlp_doc

# Initial noise standard deviation (or Student-t scale, or heteroscedastic
# noise at raw output 0), in standardised target units, when learned.
_NOISE_INIT = 0.1

#: The likelihood of each value of ``noise``.
NOISE_MODELS = {
    "homoscedastic": GaussianLikelihood,
    "heteroscedastic": HeteroscedasticGaussianLikelihood,
    "student_t": StudentTLikelihood,
}

def _component_moments(distribution):
    """loc, scale and df (None for a Gaussian) of a Normal or StudentT, as numpy arrays."""
    loc, scale = distribution.loc.cpu().numpy(), distribution.scale.cpu().numpy()
    df = distribution.df.cpu().numpy() if isinstance(distribution, torch.distributions.StudentT) else None
    return loc, scale, df


@mlp_doc(
    target_shape="(n_samples,) or (n_samples, n_outputs)",
    target_mismatch="or y the\nwrong number of outputs.",
)
class BayesianMLPRegressor(RegressorMixin, PredictiveRegressorMixin, BaseBayesianMLP):
    """Bayesian multi-layer perceptron regressor.

    The weights get a zero-mean Gaussian prior and the ``inference`` method
    approximates their posterior. The defaults, chosen by measurement on the
    UCI regression benchmark against NGBoost, scikit-learn's exact Gaussian
    process and the other methods (the user guide's "Defaults" page,
    ``doc/defaults.md``), are stochastic-gradient HMC (``SGHMC()``: two
    chains, 20 kept weight settings per chain, a fixed schedule of its own
    (:class:`~skbayes.inference.SGHMC`): 2,400 optimiser steps of 256 rows, 1,029 of
    them burn-in, up to 30,720 rows, 20 epochs' worth on more rows but at most
    24,000 steps, or 700 epochs where they take fewer steps, then up to two
    more sampling windows while the chains have not mixed), Student-t
    observation noise (``noise="auto"``) and two hidden layers of 50 units;
    ``"mfvi"`` (Bayes by Backprop) is the faster choice that streams
    (``partial_fit``) and stops early. The observation noise is learned:
    Student-t with one scale and one number of degrees of freedom per output
    by default, or Gaussian with one level per output, or Gaussian with a
    level per row predicted by the network (``noise``). Predictions average
    weight draws from the posterior, as many as the method's
    ``n_mc_predict`` (e.g. ``MeanFieldVI(n_mc_predict=100)``; all kept
    samples for ``SGHMC``, all members for ``DeepEnsemble``), and the predictive
    variance is the variance of the draws' means (epistemic) plus the mean
    noise variance (aleatoric).

    Parameters
    ----------
    %(shared_parameters)s
    noise : {"auto", "homoscedastic", "heteroscedastic", "student_t"}, default="auto"
        The observation noise model p(y | f). ``"auto"`` is the inference
        method's ``auto_noise``: ``"student_t"`` for ``SGHMC``, the
        ensembles, ``SWAG``, MC dropout, ``WHVI`` and ``BayesByGAN`` (measured with
        ``SGHMC`` on the UCI benchmark, Student-t noise gave a higher test
        log-likelihood than Gaussian noise on every dataset tried, see the
        user guide), ``"homoscedastic"`` for ``MeanFieldVI``, ``Vadam``,
        ``MNF``, ``BlackBoxVI`` and ``BayesByHypernet`` (heavy tails let their posteriors
        relax onto the prior and call the signal noise), and for ``PBP`` and
        ``Laplace``:

        - ``"homoscedastic"``: Gaussian, one noise level per output;
        - ``"heteroscedastic"``: Gaussian with a noise level per row: the
          network has two outputs per target, the mean and a raw scale
          mapped to sigma(x) = softplus(raw) + 1e-3 (in standardised units)
          (Nix & Weigend 1994; Lakshminarayanan et al. 2017, eq. 1; see
          :class:`skbayes.nn.HeteroscedasticGaussianLikelihood`);
        - ``"student_t"``: Student-t, one scale and one (learned) number of
          degrees of freedom nu > 2 per output, robust to outlying targets
          (:class:`skbayes.nn.StudentTLikelihood`).

        ``PBP`` fits ``"homoscedastic"`` only; every other method fits all
        three (``Laplace`` tunes the noise of the first only).
    noise_std : "learn" or float, default="learn"
        Observation noise standard deviation (the Student-t's scale with
        ``noise="student_t"``): ``"learn"`` fits it (type-II maximum
        likelihood, or its posterior for ``PBP`` and ``SGHMC``), starting at
        0.1 in standardised units; a float fixes it, in the units of y.
        ``noise="heteroscedastic"`` takes ``"learn"`` only: the network
        predicts the noise.
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
        ``SGHMC``, the root mean square over the members). For
        ``noise="student_t"`` the scale, not the standard deviation; for
        ``noise="heteroscedastic"`` the root mean square over the rows given
        to the last ``fit`` (or ``partial_fit``) of the predicted noise, the
        mean over the method's ``n_mc_predict`` draws (or the members) of
        sigma(x)^2 at each row (``predict_uncertainty(X).aleatoric_std``
        gives it row by row).
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
    between calls. It holds no rows out: a method's ``early_stopping`` is
    for ``fit``.

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
    >>> model = BayesianMLPRegressor(random_state=0).fit(X, y)  # SGHMC, 500 epochs
    >>> mean, std = model.predict(X[:3], return_std=True)
    >>> mean.shape, std.shape
    ((3,), (3,))
    >>> ensemble = BayesianMLPRegressor(inference=DeepEnsemble(n_estimators=3, max_iter=20)).fit(X, y)
    """

    _parameter_constraints = {
        **BaseBayesianMLP._parameter_constraints,
        "noise": [StrOptions({"auto", *NOISE_MODELS})],
        "noise_std": [StrOptions({"learn"}), Interval(Real, 0, None, closed="neither")],
        "normalize_y": ["boolean"],
    }

    def __init__(
        self,
        hidden_layer_sizes=(50, 50),
        *,
        module=None,
        module_params=None,
        input_shape=None,
        inference="sghmc",
        activation="relu",
        prior_scale=1.0,
        noise="auto",
        noise_std="learn",
        normalize_y=True,
        batch_size="auto",
        warm_start=False,
        callbacks=None,
        random_state=None,
        verbose=False,
        device="auto",
        dtype=None,
        compile=False,
    ):
        super().__init__(
            hidden_layer_sizes,
            module=module,
            module_params=module_params,
            input_shape=input_shape,
            inference=inference,
            activation=activation,
            prior_scale=prior_scale,
            batch_size=batch_size,
            warm_start=warm_start,
            callbacks=callbacks,
            random_state=random_state,
            verbose=verbose,
            device=device,
            dtype=dtype,
            compile=compile,
        )
        self.noise = noise
        self.noise_std = noise_std
        self.normalize_y = normalize_y

    def _learn_noise(self):
        return self.noise_std == "learn"

    def _noise_model(self, method=None):
        """The noise model fitted: ``noise``, with ``"auto"`` resolved for the inference method."""
        if self.noise != "auto":
            return self.noise
        method = resolve_inference(self.inference) if method is None else method
        return method.auto_noise if method.auto_noise in method.noise_models else "homoscedastic"

    def _network_width(self, n_outputs):
        return NOISE_MODELS[self._noise_model()].output_width(n_outputs)

    def _make_likelihood(self, n_outputs, device, dtype, n_members=None):
        factory = {"n_members": n_members, "device": device, "dtype": dtype}
        noise = self._noise_model()
        if noise == "heteroscedastic":
            return HeteroscedasticGaussianLikelihood(n_outputs, _NOISE_INIT)
        if noise == "student_t":
            if self.noise_std == "learn":
                return StudentTLikelihood(n_outputs, _NOISE_INIT, learn_scale=True, **factory)
            likelihood = StudentTLikelihood(n_outputs, 1.0, learn_scale=False, **factory)
            raw = likelihood.raw_scale
        elif self.noise_std == "learn":
            return GaussianLikelihood(n_outputs, _NOISE_INIT, learn_noise=True, **factory)
        else:
            likelihood = GaussianLikelihood(n_outputs, 1.0, learn_noise=False, **factory)
            raw = likelihood.raw_noise
        # A fixed noise is given in y units; the model works in standardised units.
        scale = torch.as_tensor(self.noise_std / self._y_scale, device=device, dtype=dtype)
        raw.copy_(inverse_softplus(scale - likelihood._floor))
        return likelihood

    def _inference_method(self):
        """The validated method, refused with a clear message if it cannot fit ``noise``."""
        method = super()._inference_method()
        if self._noise_model(method) not in method.noise_models:
            raise ValueError(
                f"{type(self).__name__} cannot use inference={self.inference!r} with noise={self.noise!r}: "
                f"{type(method).__name__} fits noise in {sorted(method.noise_models)} only."
            )
        if self._noise_model(method) == "heteroscedastic" and self.noise_std != "learn":
            raise ValueError(
                f"noise='heteroscedastic' predicts the noise level of every row; it takes noise_std='learn', "
                f"got noise_std={self.noise_std!r}."
            )
        return method

    def _can_warm_start(self, X, Y):
        # the noise model may have changed since the last fit
        return super()._can_warm_start(X, Y) and isinstance(
            self.module_["likelihood"], NOISE_MODELS[self._noise_model(self._inference_method())]
        )

    def _validate_training_data(self, X, y, reset):
        X, y = validate_data(
            self, self._as_rows(X, reset), y, reset=reset, multi_output=True, y_numeric=True, dtype=(np.float64, np.float32)
        )
        Y = y.reshape(len(y), -1).astype(X.dtype, copy=False)
        if not reset and Y.shape[1] != self.n_outputs_:
            raise ValueError(f"y has {Y.shape[1]} outputs, but the model was fitted with {self.n_outputs_}.")
        return X, y, Y

    def _set_output_scaling(self, y, Y):
        self._y_1d = y.ndim == 1
        self.n_outputs_ = Y.shape[1]
        self._y_mean, self._y_scale = target_scaling(Y, self.normalize_y)

    def _rms_over_members(self, value):
        """sqrt of the mean of value^2 over the members, (n_outputs,), times the y scale."""
        value = value.detach().cpu().numpy()
        return np.sqrt((value**2).reshape(-1, self.n_outputs_).mean(axis=0)) * self._y_scale

    def _set_noise_std(self, X):
        # Root mean square over the members when each member has its own noise:
        # the aleatoric variance of the uniform mixture.
        likelihood = self.module_["likelihood"]
        if likelihood.heteroscedastic:  # the RMS over the rows X of the predicted noise
            noise_var = self._over_draws(
                X, lambda f, rows: likelihood.noise_variance(f).mean(0), self._n_mc_predict(), self._predict_seed
            )
            self.noise_std_ = np.sqrt(noise_var.mean(axis=0)) * self._y_scale
            self._aleatoric_std = None
        elif isinstance(likelihood, StudentTLikelihood):
            self.noise_std_ = self._rms_over_members(likelihood.scale)
            self._aleatoric_std = self._rms_over_members(likelihood.noise_variance().sqrt())
        else:
            self.noise_std_ = self._rms_over_members(likelihood.noise_std)
            self._aleatoric_std = self.noise_std_

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

        Warns
        -----
        ConvergenceWarning
            Each with the fix in its message: the stopping rule not met in
            ``max_iter`` epochs; with ``SGHMC``, chains dropped because they
            diverged (``inference_diagnostics_["n_diverged_chains"]``) and
            chains that have not mixed (``inference_diagnostics_["rhat"]``
            above 1.1, see ``skbayes.inference._guards.warn_if_chains_not_mixed``);
            with the methods trained by an ELBO (``MeanFieldVI``, ``Vadam``,
            ``MNF``, ``WHVI``, ``BayesByHypernet``, ``BayesByGAN``), a posterior collapsed
            onto the prior: a training R^2 below half the held-out R^2 of a
            linear model that finds a signal (at least 0.2), see
            ``skbayes.inference._guards.warn_if_collapsed``.
        """
        X, y, Y = self._validate_training_data(X, y, reset=True)
        method = self._inference_method()
        if not self._can_warm_start(X, Y):
            # a warm start keeps the scaling the fitted likelihood works in
            self._set_output_scaling(y, Y)
        self._y_1d = y.ndim == 1
        self.n_outputs_ = Y.shape[1]
        self._fit_network(X, (Y - self._y_mean) / self._y_scale, self.n_outputs_, method)
        self._set_noise_std(X)
        self._warn_if_collapsed(X, y)
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
        self._set_noise_std(X)
        return self

    # --------------------------------------------------------------- prediction
    def _output(self, a):
        """(n, k) array in y units -> (n,) for 1-D training targets."""
        return a[:, 0] if self._y_1d else a

    def predict_uncertainty(self, X):
        """Predictive mean and standard deviations, split by source.

        The predictive distribution is the mixture over the weight draws w_t
        of p(y | f_t(x)), with mean m_t(x) and noise variance v_t(x) (v_t =
        sigma^2 for homoscedastic Gaussian noise, sigma_t(x)^2 for
        heteroscedastic noise, s^2 nu / (nu - 2) for Student-t noise); its
        variance is Var_t[m_t(x)] (epistemic, model uncertainty) +
        mean_t v_t(x) (aleatoric, observation noise), as in Gal 2016,
        section 3.3.1 (Prop. 3) and Lakshminarayanan et al. 2017, section 2.4.

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
        likelihood = self.module_["likelihood"]

        def moments(f, rows):
            loc = likelihood.location(f)
            if likelihood.heteroscedastic:
                return loc.mean(0), loc.var(0, correction=0), likelihood.noise_variance(f).mean(0)
            return loc.mean(0), loc.var(0, correction=0)

        mean, variance, *noise_var = self._over_draws(X, moments, self._n_mc_predict(), self._predict_seed)
        mean = mean * self._y_scale + self._y_mean
        epistemic = np.sqrt(variance) * self._y_scale
        if noise_var:
            aleatoric = np.sqrt(noise_var[0]) * self._y_scale
        else:
            aleatoric = getattr(self, "_aleatoric_std", None)
            aleatoric = np.broadcast_to(self.noise_std_ if aleatoric is None else aleatoric, mean.shape)
            aleatoric = aleatoric.astype(mean.dtype)
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
            location = self.module_["likelihood"].location
            mean = self._over_draws(X, lambda f, rows: location(f).mean(0), self._n_mc_predict(), self._predict_seed)
            return self._output(mean * self._y_scale + self._y_mean)
        result = self.predict_uncertainty(X)
        return result.mean, result.std

    @validate_method_params(n_samples=N_DRAWS, random_state=["random_state"])
    def sample_y(self, X, n_samples=1, random_state=0):
        """Draw targets from the posterior predictive distribution.

        Each draw takes one weight setting from the posterior (shared by all
        rows, so the function is coherent across X; for methods with a finite
        set of members, a member chosen at random, with its own noise level)
        and adds noise from the likelihood: Gaussian (with the row's own
        level for ``noise="heteroscedastic"``) or Student-t.

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
        f = np.moveaxis(f, 1, 0)  # (S, n, width)
        likelihood = self.module_["likelihood"]
        if index is not None:  # one noise level per member: follow the drawn members
            likelihood = likelihood.select(index)
        with torch.no_grad():
            y = likelihood.sample(torch.as_tensor(f, device=self.device_), np.random.RandomState(noise_seed))
        y = y.cpu().numpy() * self._y_scale + self._y_mean  # (S, n, k)
        y = np.moveaxis(y, 0, -1)  # (n, k, S)
        return y[:, 0, :] if self._y_1d else y

    def log_predictive_density(self, X, y):
        """Log predictive density of each observation, in nats.

        ``log (1/T) sum_t p(y_i | f_t(x_i))`` over the T weight draws (the
        method's ``n_mc_predict``, or all members) (Gal 2016, eq. 3.18), in
        the units of y and summed over outputs: the per-point test
        log-likelihood of the UCI benchmark protocol.

        %(log_predictive_density_sections)s
        """
        check_is_fitted(self)
        X, y, Y = self._validate_training_data(X, y, reset=False)
        Y = self._to_tensor((Y - self._y_mean) / self._y_scale)
        log_p = self._log_predictive(X, Y, self._n_mc_predict(), self._predict_seed)
        return log_p - np.log(self._y_scale).sum()

    def _predictive_quantiles(self, X, levels):
        """The quantiles of :meth:`predict_quantiles` and :meth:`predict_interval`.

        The exact quantiles of the Monte-Carlo mixture (1/T) sum_t p(y |
        f_t(x)) over the method's ``n_mc_predict`` draws (all members for
        ``DeepEnsemble`` and ``SGHMC``), for every noise model, found by
        Newton's method safeguarded by bisection on the mixture's CDF
        (``skbayes._predictive.mixture_quantile``), per output: the same
        mixture whose moments :meth:`predict` gives and whose density
        :meth:`log_predictive_density` scores.
        """
        check_is_fitted(self)
        likelihood = self.module_["likelihood"]
        X = self._validate_X_predict(X)

        def quantiles(f, rows):
            return torch.as_tensor(MixturePredictive(*_component_moments(likelihood.distribution(f))).ppf(levels))

        bounds = self._over_draws(X, quantiles, self._n_mc_predict(), self._predict_seed)  # (n, k, n_levels)
        return self._output(bounds * np.asarray(self._y_scale)[:, None] + np.asarray(self._y_mean)[:, None])

    def _predictive_cdf(self, X, y):
        """The CDF of :meth:`predict_cdf`: (1/T) sum_t F(y | f_t(x)), the mixture of :meth:`_predictive_quantiles`."""
        check_is_fitted(self)
        X, y, Y = self._validate_training_data(X, y, reset=False)
        Y = (Y - self._y_mean) / self._y_scale
        likelihood = self.module_["likelihood"]

        def cdf(f, rows):
            return torch.as_tensor(MixturePredictive(*_component_moments(likelihood.distribution(f))).cdf(Y[rows]))

        return self._output(self._over_draws(X, cdf, self._n_mc_predict(), self._predict_seed))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags
