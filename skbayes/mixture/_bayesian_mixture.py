"""Bayesian Gaussian mixture fitted by CAVI or by stochastic variational inference (streaming)."""

import warnings
from numbers import Integral, Real

import numpy as np
import torch
from sklearn import cluster
from sklearn.base import BaseEstimator, DensityMixin
from sklearn.cluster import kmeans_plusplus
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from .._param_validation import N_DRAWS, Interval, Options, StrOptions, _fit_context, validate_method_params
from ..base import TorchEstimatorMixin
from ..nn.variational import gaussian_mixture as gm

__all__ = ["BayesianGaussianMixture"]


class BayesianGaussianMixture(TorchEstimatorMixin, DensityMixin, BaseEstimator):
    """Variational Bayesian Gaussian mixture, by batch CAVI or by streaming SVI, in PyTorch.

    The conjugate model of scikit-learn's
    :class:`sklearn.mixture.BayesianGaussianMixture` (a Dirichlet or
    truncated Dirichlet-process prior on the weights, a Gauss-Wishart prior
    on each component; [Bishop2006]_ section 10.2) with the same parameter
    names, priors and fitted attributes. ``learning_method="batch"`` runs
    coordinate-ascent VI and reproduces scikit-learn's iterates.
    ``learning_method="online"`` runs stochastic variational inference
    ([Hoffman2013]_): each minibatch of ``batch_size`` rows gives a noisy
    natural gradient, and the global parameters take the step
    ``lambda <- (1 - rho) lambda + rho (zeta + (N / B) sum_b E[t(x_b, z_b)])``
    in natural-parameter coordinates (:mod:`skbayes.nn.variational.gaussian_mixture`).
    ``partial_fit`` takes one such pass over a chunk of a stream.

    ``score_samples`` is the log density of the posterior predictive, a
    mixture of Student-t distributions, not scikit-learn's plug-in Gaussian
    mixture.

    Read more in ``doc/gaussian_mixture.md``.

    Parameters
    ----------
    n_components : int, default=1
        Number of components K (an upper bound: the weight prior can switch
        components off).
    covariance_type : {"full", "diag"}, default="full"
        A full or a diagonal Wishart scale per component.
    tol : float, default=1e-3
        Batch: stop when the lower bound changes by less than ``tol``.
        Online: stop when the ELBO per sample changes by less than ``tol``
        between epochs.
    reg_covar : float, default=1e-6
        Added to the diagonal of each sample's second moment (as in
        scikit-learn: N_k S_k gains N_k reg_covar I).
    max_iter : int, default=100
        Batch: CAVI iterations. Online: epochs (passes over the data).
    n_init : int, default=1
        Only 1 (one initialisation) is supported.
    init_params : {"kmeans", "k-means++", "random", "random_from_data"}, default="kmeans"
        Initial responsibilities, drawn as in scikit-learn (KMeans labels,
        k-means++ seeds, uniform random rows, random rows as seeds); one
        M-step on all rows (on the first chunk for ``partial_fit``) then sets
        the posterior.
    weight_concentration_prior_type : {"dirichlet_process", "dirichlet_distribution"}, default="dirichlet_process"
        Stick-breaking (truncated at K) or finite Dirichlet weight prior.
    weight_concentration_prior : float or None, default=None
        alpha_0 (> 0); None is 1 / n_components.
    mean_precision_prior : float or None, default=None
        beta_0 (> 0); None is 1.
    mean_prior : array-like of shape (n_features,) or None, default=None
        m_0; None is the mean of X.
    degrees_of_freedom_prior : float or None, default=None
        nu_0 (> n_features - 1); None is n_features.
    covariance_prior : float or array-like, default=None
        W_0^-1: shape (n_features, n_features) for "full", (n_features,) for
        "diag"; None is the empirical covariance (variances) of X.
    learning_method : {"batch", "online"}, default="batch"
        CAVI on all rows, or SVI on minibatches (``fit``). ``partial_fit``
        always takes SVI steps.
    learning_rate : {"robbins_monro", "adaptive"}, default="robbins_monro"
        Step sizes of SVI: rho_t = (t + learning_offset)^-learning_decay, or
        the adaptive rate of [Ranganath2013]_ with window ``tau0``.
    learning_decay : float, default=0.7
        delta in (0.5, 1] of the Robbins-Monro schedule.
    learning_offset : float, default=10.0
        omega >= 0 of the Robbins-Monro schedule.
    tau0 : float or None, default=None
        Initial window of the adaptive rate (>= 1); None is the batch size.
        Its averages start from the noisy gradients of the first pass's
        minibatches at the initial parameters.
    batch_size : int, default=128
        Rows per SVI minibatch (at most the number of rows).
    total_samples : int or None, default=None
        N of the noisy gradients in ``partial_fit``; None uses ``n_seen_``,
        the rows seen so far. ``fit`` uses the number of rows of X.
    random_state : int, RandomState instance or None, default=None
        Seeds the initialisation, the minibatch order and ``sample``; the
        global torch seed is never touched.
    warm_start : bool, default=False
        Continue ``fit`` from the fitted posterior instead of initialising.
    verbose : int, default=0
        Print the bound after each iteration (batch) or epoch (online).
    device : str, default="auto"
        Torch device; ``"auto"`` picks CUDA when available.
    dtype : {"float32", "float64"} or None, default=None
        None is float64 on the CPU (float32 for float32 X) and float32 on
        accelerators.

    Attributes
    ----------
    weights_ : ndarray of shape (n_components,)
        Posterior mean weights E[pi_k].
    means_ : ndarray of shape (n_components, n_features)
        Posterior means m_k.
    covariances_ : ndarray of shape (n_components, n_features, n_features) or (n_components, n_features)
        W_k^-1 / nu_k, the inverse of E[Lambda_k].
    precisions_ : ndarray, same shape as ``covariances_``
        E[Lambda_k] = nu_k W_k.
    precisions_cholesky_ : ndarray, same shape as ``covariances_``
        Upper-triangular U_k with U_k U_k^T = ``precisions_`` (square root for "diag").
    converged_ : bool
        Whether the last ``fit`` met ``tol``.
    n_iter_ : int
        Iterations (batch) or epochs (online) of the last ``fit``;
        ``partial_fit`` adds one per call.
    lower_bound_ : float
        Batch: scikit-learn's lower bound (constants dropped) at the last
        iteration. Online: the full ELBO of the data after the last epoch.
        ``partial_fit``: the stochastic ELBO of its chunk scaled to N
        (eq. 2.52 of the thesis), after its pass.
    lower_bounds_ : list of float
        The bound after each iteration (epoch) of the last ``fit``;
        ``partial_fit`` appends its own.
    weight_concentration_prior_ : float
    weight_concentration_ : tuple of two ndarray of shape (n_components,) or ndarray of shape (n_components,)
        Beta parameters (a_k, b_k) of the sticks, or the Dirichlet alpha_k.
    mean_precision_prior_ : float
    mean_precision_ : ndarray of shape (n_components,)
        beta_k.
    mean_prior_ : ndarray of shape (n_features,)
    degrees_of_freedom_prior_ : float
    degrees_of_freedom_ : ndarray of shape (n_components,)
        nu_k.
    covariance_prior_ : ndarray of shape (n_features, n_features) or (n_features,)
    n_steps_ : int
        SVI steps taken so far (0 after a batch ``fit``).
    n_seen_ : int
        Rows seen by ``partial_fit`` (by ``fit``: the rows of X).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Only when X has string column names.
    device_ : torch.device
    dtype_ : str

    See Also
    --------
    sklearn.mixture.BayesianGaussianMixture : CAVI only, NumPy.

    References
    ----------
    .. [Bishop2006] C. M. Bishop, "Pattern Recognition and Machine Learning", 2006, section 10.2.
    .. [Hoffman2013] M. D. Hoffman, D. M. Blei, C. Wang and J. Paisley,
       "Stochastic variational inference", JMLR 14, 2013.
    .. [Ranganath2013] R. Ranganath, C. Wang, D. M. Blei and E. P. Xing, "An
       adaptive learning rate for stochastic variational inference", ICML 2013.

    Examples
    --------
    >>> import numpy as np
    >>> from skbayes.mixture import BayesianGaussianMixture
    >>> X = np.r_[np.random.RandomState(0).randn(100, 2) - 5, np.random.RandomState(1).randn(100, 2) + 5]
    >>> model = BayesianGaussianMixture(n_components=2, random_state=0).fit(X)
    >>> np.round(np.sort(model.means_[:, 0]))
    array([-5.,  5.])
    """

    _torch_attributes = ()

    _model_attribute = "weights_"

    _parameter_constraints = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "covariance_type": [StrOptions({"full", "diag"})],
        "tol": [Interval(Real, 0.0, None, closed="left")],
        "reg_covar": [Interval(Real, 0.0, None, closed="left")],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "n_init": [Options(Integral, {1})],
        "init_params": [StrOptions({"kmeans", "k-means++", "random", "random_from_data"})],
        "weight_concentration_prior_type": [StrOptions({"dirichlet_process", "dirichlet_distribution"})],
        "weight_concentration_prior": [None, Interval(Real, 0.0, None, closed="neither")],
        "mean_precision_prior": [None, Interval(Real, 0.0, None, closed="neither")],
        "mean_prior": [None, "array-like"],
        "degrees_of_freedom_prior": [None, Interval(Real, 0.0, None, closed="neither")],
        "covariance_prior": [None, "array-like", Interval(Real, 0.0, None, closed="neither")],
        "learning_method": [StrOptions({"batch", "online"})],
        "learning_rate": [StrOptions({"robbins_monro", "adaptive"})],
        "learning_decay": [Interval(Real, 0.5, 1.0, closed="right")],
        "learning_offset": [Interval(Real, 0.0, None, closed="left")],
        "tau0": [None, Interval(Real, 1.0, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "total_samples": [None, Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "warm_start": ["boolean"],
        "verbose": ["verbose"],
        "device": [str],
        "dtype": [StrOptions({"float32", "float64"}), None],
    }

    def __init__(
        self,
        *,
        n_components=1,
        covariance_type="full",
        tol=1e-3,
        reg_covar=1e-6,
        max_iter=100,
        n_init=1,
        init_params="kmeans",
        weight_concentration_prior_type="dirichlet_process",
        weight_concentration_prior=None,
        mean_precision_prior=None,
        mean_prior=None,
        degrees_of_freedom_prior=None,
        covariance_prior=None,
        learning_method="batch",
        learning_rate="robbins_monro",
        learning_decay=0.7,
        learning_offset=10.0,
        tau0=None,
        batch_size=128,
        total_samples=None,
        random_state=None,
        warm_start=False,
        verbose=0,
        device="auto",
        dtype=None,
    ):
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.tol = tol
        self.reg_covar = reg_covar
        self.max_iter = max_iter
        self.n_init = n_init
        self.init_params = init_params
        self.weight_concentration_prior_type = weight_concentration_prior_type
        self.weight_concentration_prior = weight_concentration_prior
        self.mean_precision_prior = mean_precision_prior
        self.mean_prior = mean_prior
        self.degrees_of_freedom_prior = degrees_of_freedom_prior
        self.covariance_prior = covariance_prior
        self.learning_method = learning_method
        self.learning_rate = learning_rate
        self.learning_decay = learning_decay
        self.learning_offset = learning_offset
        self.tau0 = tau0
        self.batch_size = batch_size
        self.total_samples = total_samples
        self.random_state = random_state
        self.warm_start = warm_start
        self.verbose = verbose
        self.device = device
        self.dtype = dtype

    # ------------------------------------------------------------ set-up
    def _validate_fit_data(self, X, reset):
        X = validate_data(self, X, reset=reset, dtype=(np.float64, np.float32), ensure_min_samples=2)
        if reset and X.shape[0] < self.n_components:
            raise ValueError(
                f"Expected n_samples >= n_components but got n_components = {self.n_components}, "
                f"n_samples = {X.shape[0]}"
            )
        return X

    def _set_priors(self, X):
        """The prior's fitted attributes (scikit-learn's defaults from X) and zeta, on the device."""
        n_features = X.shape[1]
        self.device_ = self._resolve_device()
        self.dtype_ = str(self._resolve_dtype(X.dtype, self.device_)).removeprefix("torch.")
        wcp = self.weight_concentration_prior
        self.weight_concentration_prior_ = 1.0 / self.n_components if wcp is None else float(wcp)
        self.mean_precision_prior_ = 1.0 if self.mean_precision_prior is None else float(self.mean_precision_prior)
        if self.mean_prior is None:
            self.mean_prior_ = X.mean(axis=0).astype(np.float64)
        else:
            self.mean_prior_ = np.asarray(self.mean_prior, dtype=np.float64).reshape(-1)
            if self.mean_prior_.shape != (n_features,):
                raise ValueError(f"mean_prior must have shape ({n_features},); got {np.shape(self.mean_prior)}.")
        dof = self.degrees_of_freedom_prior
        self.degrees_of_freedom_prior_ = float(n_features) if dof is None else float(dof)
        if self.degrees_of_freedom_prior_ <= n_features - 1:
            raise ValueError(
                f"degrees_of_freedom_prior must be greater than n_features - 1 = {n_features - 1}; "
                f"got {self.degrees_of_freedom_prior_}."
            )
        self.covariance_prior_ = self._covariance_prior(X)
        self._prior = gm.prior_natural_parameters(
            self.n_components, self.weight_concentration_prior_, self.mean_precision_prior_,
            torch.zeros(n_features, dtype=self._dtype, device=self.device_),  # data centred at mean_prior_
            self.degrees_of_freedom_prior_, self._to_tensor(self.covariance_prior_),
            self.covariance_type, self.weight_concentration_prior_type)

    def _covariance_prior(self, X):
        n_features = X.shape[1]
        full = self.covariance_type == "full"
        if self.covariance_prior is None:
            if full:
                return np.atleast_2d(np.cov(X.T.astype(np.float64)))
            return np.var(X.astype(np.float64), axis=0, ddof=1)
        prior = np.asarray(self.covariance_prior, dtype=np.float64)
        if prior.ndim == 0:
            prior = prior * (np.eye(n_features) if full else np.ones(n_features))
        expected = (n_features, n_features) if full else (n_features,)
        if prior.shape != expected:
            raise ValueError(f"covariance_prior must have shape {expected}; got {prior.shape}.")
        if full and (not np.allclose(prior, prior.T) or np.any(np.linalg.eigvalsh(prior) <= 0)):
            raise ValueError("covariance_prior must be symmetric positive definite.")
        if not full and np.any(prior <= 0):
            raise ValueError("covariance_prior must be positive.")
        return prior

    def _initial_resp(self, X, random_state):
        """Initial responsibilities, drawn as scikit-learn's ``BaseMixture._initialize_parameters``."""
        n_samples = X.shape[0]
        resp = np.zeros((n_samples, self.n_components))
        if self.init_params == "kmeans":
            labels = cluster.KMeans(n_clusters=self.n_components, n_init=1, random_state=random_state).fit(X).labels_
            resp[np.arange(n_samples), labels] = 1
        elif self.init_params == "random":
            resp = random_state.uniform(size=(n_samples, self.n_components))
            resp /= resp.sum(axis=1)[:, np.newaxis]
        elif self.init_params == "random_from_data":
            rows = random_state.choice(n_samples, size=self.n_components, replace=False)
            resp[rows, np.arange(self.n_components)] = 1
        else:
            _, indices = kmeans_plusplus(X, self.n_components, random_state=random_state)
            resp[indices, np.arange(self.n_components)] = 1
        return resp

    def _centred(self, X):
        return self._to_tensor(X) - self._to_tensor(self.mean_prior_)

    def _m_step(self, Xc, resp, scale=1.0):
        stats = gm.sufficient_statistics(Xc, resp, self.covariance_type, self.reg_covar)
        return gm.posterior_natural_parameters(self._prior, stats, scale)

    # ----------------------------------------------------- natural state
    def _params(self):
        return gm.NaturalParameters(*(self._to_tensor(v) for v in self._natural))

    def _store(self, params):
        """Keep lambda (NumPy, CPU) and set scikit-learn's fitted attributes from it."""
        self._natural = tuple(p.detach().cpu().numpy() for p in params)
        means, scale_inverse = gm.moment_parameters(params, self.covariance_type)
        covariances, prec_chol = gm.covariance_cholesky(scale_inverse, params.degrees_of_freedom, self.covariance_type)
        numpy = lambda t: t.detach().cpu().numpy()  # noqa: E731
        self.weights_ = numpy(gm.expected_weights(params.concentration))
        self.means_ = numpy(means) + self.mean_prior_
        self.covariances_ = numpy(covariances)
        self.precisions_cholesky_ = numpy(prec_chol)
        if self.covariance_type == "full":
            self.precisions_ = self.precisions_cholesky_ @ np.swapaxes(self.precisions_cholesky_, -1, -2)
        else:
            self.precisions_ = self.precisions_cholesky_**2
        conc = numpy(params.concentration)
        self.weight_concentration_ = (conc[0], conc[1]) if conc.ndim == 2 else conc
        self.mean_precision_ = numpy(params.mean_precision)
        self.degrees_of_freedom_ = numpy(params.degrees_of_freedom)

    # ----------------------------------------------------------- fitting
    def _n_batch(self, n_samples):
        return min(self.batch_size, n_samples)

    def _step_size(self, lambda_hat, params):
        """rho for the next SVI step, advancing the schedule."""
        self.n_steps_ += 1
        if self.learning_rate == "robbins_monro":
            return gm.robbins_monro_step_size(self.n_steps_, self.learning_offset, self.learning_decay)
        return self._adaptive.step(gm.AdaptiveStepSize.flat_gradient(lambda_hat, params))

    def _svi_pass(self, Xc, params, n_total, generator):
        """One pass over the rows of Xc in shuffled minibatches; returns the new lambda."""
        n_samples = Xc.shape[0]
        batch = self._n_batch(n_samples)
        order = torch.randperm(n_samples, generator=generator).to(Xc.device)
        batches = [order[i:i + batch] for i in range(0, n_samples, batch)]
        if self.learning_rate == "adaptive" and self._adaptive.gbar is None:
            self._adaptive.initialise([
                gm.AdaptiveStepSize.flat_gradient(self._intermediate(Xc[rows], params, n_total), params)
                for rows in batches
            ])
        for rows in batches:
            lambda_hat = self._intermediate(Xc[rows], params, n_total)
            params = gm.blend(params, lambda_hat, self._step_size(lambda_hat, params))
        return params

    def _intermediate(self, Xc_batch, params, n_total):
        """SVI's intermediate global parameters lambda-hat of one minibatch, its statistics scaled by N/B."""
        _, log_resp = gm.e_step(Xc_batch, params, self.covariance_type)
        return self._m_step(Xc_batch, log_resp.exp(), n_total / len(Xc_batch))

    def _start_svi(self, n_samples):
        self.n_steps_ = 0
        self._adaptive = gm.AdaptiveStepSize(self._n_batch(n_samples) if self.tau0 is None else self.tau0)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Fit the posterior by CAVI (``learning_method="batch"``) or SVI (``"online"``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        self : BayesianGaussianMixture

        Raises
        ------
        ValueError
            On NaN/inf input, fewer rows than components, a bad prior or a
            covariance that is not positive definite.
        """
        do_init = not (self.warm_start and hasattr(self, "converged_"))
        X = self._validate_fit_data(X, reset=do_init)
        random_state = check_random_state(self.random_state)
        if do_init:
            self._set_priors(X)
        Xc = self._centred(X)
        with torch.no_grad():
            if do_init:
                params = self._m_step(Xc, self._to_tensor(self._initial_resp(X, random_state)))
                self._start_svi(X.shape[0])
                self._stream_seed = self._seeds(random_state, 1)[0]
                bound = -np.inf
            else:
                params, bound = self._params(), self.lower_bound_
            if self.learning_method == "batch":
                params, bounds, converged = self._fit_batch(Xc, params, bound)
            else:
                generator = self._generator(self._stream_seed + self.n_steps_)
                params, bounds, converged = self._fit_online(Xc, params, bound, generator)
        self._store(params)
        self.n_iter_ = len(bounds)
        self.lower_bounds_ = bounds
        self.lower_bound_ = bounds[-1] if bounds else bound
        self.converged_ = converged
        self.n_seen_ = X.shape[0]
        if not converged and self.max_iter > 0:
            warnings.warn(
                "The fit did not converge. Try different init parameters, or increase max_iter, tol, "
                "or check for degenerate data.", ConvergenceWarning)
        return self

    def _fit_batch(self, Xc, params, bound):
        bounds, converged = [], False
        for n_iter in range(1, self.max_iter + 1):
            _, log_resp = gm.e_step(Xc, params, self.covariance_type)
            params = self._m_step(Xc, log_resp.exp())
            previous, bound = bound, float(gm.reduced_lower_bound(log_resp, params, self.covariance_type))
            bounds.append(bound)
            if self.verbose:
                print(f"Iteration {n_iter}: lower bound {bound:.6f}")
            if abs(bound - previous) < self.tol:
                converged = True
                break
        return params, bounds, converged

    def _fit_online(self, Xc, params, bound, generator):
        n_samples = Xc.shape[0]
        bounds, converged = [], False
        for epoch in range(1, self.max_iter + 1):
            params = self._svi_pass(Xc, params, n_samples, generator)
            _, log_resp = gm.e_step(Xc, params, self.covariance_type)
            previous, bound = bound, float(gm.elbo(Xc, log_resp, params, self._prior, self.covariance_type))
            bounds.append(bound)
            if self.verbose:
                print(f"Epoch {epoch}: ELBO {bound:.6f}")
            if abs(bound - previous) / n_samples < self.tol:
                converged = True
                break
        return params, bounds, converged

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y=None):
        """One SVI pass over a chunk of a stream, in minibatches of ``batch_size``.

        The first call (on an unfitted estimator) sets the priors from this
        chunk (their None defaults), draws the initial responsibilities on it
        and takes one M-step. Every call, the first included, then takes SVI
        steps on the chunk's shuffled minibatches with N = ``total_samples``
        or, if None, ``n_seen_`` (this chunk's rows included). The step
        counter and the adaptive rate's state carry over between calls.
        ``lower_bound_`` is then the chunk's stochastic ELBO, scaled to N.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        self : BayesianGaussianMixture
        """
        first = not hasattr(self, "_natural")
        X = self._validate_fit_data(X, reset=first)
        if first:
            random_state = check_random_state(self.random_state)
            self._set_priors(X)
            self._initial = self._initial_resp(X, random_state)
            self._stream_seed = self._seeds(random_state, 1)[0]
            self.n_seen_, self.n_iter_, self.converged_ = 0, 0, False
            self.lower_bounds_, self.lower_bound_ = [], -np.inf
            self._start_svi(X.shape[0])
        Xc = self._centred(X)
        self.n_seen_ += X.shape[0]
        n_total = self.n_seen_ if self.total_samples is None else self.total_samples
        with torch.no_grad():
            params = self._m_step(Xc, self._to_tensor(self._initial)) if first else self._params()
            generator = self._generator(self._stream_seed + self.n_iter_)
            params = self._svi_pass(Xc, params, n_total, generator)
            _, log_resp = gm.e_step(Xc, params, self.covariance_type)
            bound = float(gm.elbo(Xc, log_resp, params, self._prior, self.covariance_type, scale=n_total / len(X)))
        self._initial = None
        self._store(params)
        self.n_iter_ += 1
        self.lower_bounds_ = [*self.lower_bounds_, bound]
        self.lower_bound_ = bound
        return self

    # -------------------------------------------------------- prediction
    def _in_blocks(self, X, fn):
        """``fn(centred rows, params)`` over blocks of validated rows, with bounded memory."""
        params, shift = self._params(), self._to_tensor(self.mean_prior_)
        # the (rows, K, D) differences and the Student-t predictive's whitened copies of them (about 8 in all)
        row_size = 8 * self.n_components * X.shape[1]
        return self._predict_in_blocks(X, lambda x, rows: fn(x - shift, params), row_size=row_size)

    def _log_resp(self, X):
        X = self._validate_X_predict(X)
        return self._in_blocks(X, lambda x, params: gm.e_step(x, params, self.covariance_type)[1])

    def predict_proba(self, X):
        """Responsibilities E_q[z_nk] of each component for each row.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        resp : ndarray of shape (n_samples, n_components)
        """
        return np.exp(self._log_resp(X))

    def predict(self, X):
        """The component with the largest responsibility for each row.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        return self._log_resp(X).argmax(axis=1)

    def fit_predict(self, X, y=None):
        """Fit, then return the labels of X (as ``fit(X).predict(X)``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        return self.fit(X).predict(X)

    def score_samples(self, X):
        """Log density of the posterior predictive (a Student-t mixture) at each row.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        log_density : ndarray of shape (n_samples,)
        """
        X = self._validate_X_predict(X)
        return self._in_blocks(X, lambda x, params: gm.predictive_log_density(x, params, self.covariance_type))

    def score(self, X, y=None):
        """Mean log predictive density of the rows of X.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        score : float
        """
        return float(self.score_samples(X).mean())

    @validate_method_params(n_samples=N_DRAWS)
    def sample(self, n_samples=1):
        """Draw rows from the posterior predictive (the Student-t mixture).

        Uses a NumPy generator from ``random_state``, like scikit-learn's
        ``sample``.

        Parameters
        ----------
        n_samples : int, default=1

        Returns
        -------
        X : ndarray of shape (n_samples, n_features)
        y : ndarray of shape (n_samples,)
            The component of each row.

        Raises
        ------
        ValueError
            If ``n_samples`` is not a positive integer.
        """
        check_is_fitted(self)
        rng = check_random_state(self.random_state)
        d = self.means_.shape[1]
        counts = rng.multinomial(n_samples, self.weights_ / self.weights_.sum())
        dof = self.degrees_of_freedom_ + 1 - d
        factor = (1 + self.mean_precision_) / (dof * self.mean_precision_) * self.degrees_of_freedom_
        rows, labels = [], []
        for k, count in enumerate(counts):
            if count == 0:
                continue
            shape = factor[k] * self.covariances_[k]
            root = np.linalg.cholesky(shape) if self.covariance_type == "full" else np.diag(np.sqrt(shape))
            z = rng.standard_normal((count, d)) @ root.T
            rows.append(self.means_[k] + z / np.sqrt(rng.chisquare(dof[k], size=(count, 1)) / dof[k]))
            labels.append(np.full(count, k))
        return np.vstack(rows), np.concatenate(labels)
