r"""PredictiveStackingRegressor: stacking of predictive distributions by held-out log density."""

import warnings
from numbers import Integral

import numpy as np
from scipy.special import logsumexp
from scipy.stats import norm
from sklearn.base import BaseEstimator, MetaEstimatorMixin, RegressorMixin, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, Sum, WhiteKernel
from sklearn.linear_model import ARDRegression, BayesianRidge
from sklearn.model_selection import KFold, check_cv
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils import Bunch, check_random_state
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from .._docstrings import fill_doc
from .._param_validation import N_DRAWS, _fit_context, validate_method_params
from .._predictive import bisect_quantile
from ..calibration._regressor import _prediction_step
from ..base import PredictiveRegressorMixin, check_target_values
from ..metrics._scorer import _step_with

__all__ = ["PredictiveStackingRegressor", "stacking_weights"]

# The default Gaussian-process member is scikit-learn's exact GP up to this many training rows
# (O(n^3) per optimiser step), skbayes' SparseGPRegressor above.
EXACT_GP_MAX_ROWS = 2000
# Members whose stacking weight falls below this are dropped (and the others renormalised): they are
# not refitted on all the rows, and predict nothing.
MIN_WEIGHT = 1e-3
# Halvings of the bracket (the members' quantiles) in the stacked quantile's bisection.
_N_BISECTIONS = 40


def stacking_weights(log_density, *, max_iter=10000, tol=1e-10):
    r"""The stacking weights of K predictive distributions: the maximiser of their held-out log score.

    Solves (Yao, Vehtari, Simpson and Gelman 2018, eq. 4, with the log score)

    .. math::

        \max_{w \in S_K} \frac1n \sum_{i=1}^n \log \sum_{k=1}^K w_k\, p_k(y_i \mid x_i),

    S_K the simplex, p_k(y_i | x_i) member k's predictive density at the
    held-out row i, by the EM iteration of a mixture's weights
    (Dempster, Laird and Rubin 1977): r_ik = w_k p_ik / sum_j w_j p_ij,
    w_k <- mean_i r_ik. The objective is concave in w, and each iteration
    increases it, so the iteration reaches its maximum (a unique one unless
    two members' densities are proportional on the rows). It stops when an
    iteration raises the objective by at most ``tol`` nats per row.

    Parameters
    ----------
    log_density : array-like of shape (n_rows, n_members)
        log p_k(y_i | x_i), nats, of rows the members were not fitted on.
        Rows where every member has density 0 (-inf) are left out.
    max_iter : int, default=10000
        Most EM iterations; a ``ConvergenceWarning`` says when they run out.
    tol : float, default=1e-10
        The iteration stops when it raises the mean log score by at most
        ``tol`` (nats per row).

    Returns
    -------
    weights : ndarray of shape (n_members,)
        Non-negative, summing to 1.

    Raises
    ------
    ValueError
        If ``log_density`` has NaN or +inf, is not 2-D, or no row has a
        finite density under some member.
    """
    log_density = np.asarray(log_density, dtype=np.float64)
    if log_density.ndim != 2 or log_density.shape[1] == 0:
        raise ValueError(f"log_density must be of shape (n_rows, n_members); got {log_density.shape}.")
    if np.any(np.isnan(log_density)) or np.any(log_density == np.inf):
        raise ValueError("log_density has NaN or +inf values.")
    log_density = log_density[np.isfinite(log_density).any(axis=1)]
    if log_density.shape[0] == 0:
        raise ValueError("No row has a non-zero density under any member.")
    # p_ik / max_k p_ik, once: the row's factor cancels in the responsibilities and shifts the objective
    density = np.exp(log_density - log_density.max(axis=1, keepdims=True))
    n_members = density.shape[1]
    weights = np.full(n_members, 1.0 / n_members)
    mixture = density @ weights
    objective = np.mean(np.log(mixture))
    for _ in range(max_iter):
        weights = weights * np.mean(density / mixture[:, None], axis=0)
        weights /= weights.sum()
        mixture = density @ weights
        new = np.mean(np.log(mixture))
        if new - objective <= tol:
            return weights
        objective = new
    warnings.warn(
        f"stacking_weights: the EM iteration did not converge in max_iter={max_iter} iterations (last gain "
        f"{new - objective:.2g} nats per row); the weights may be off by a small amount.",
        ConvergenceWarning, stacklevel=2,
    )
    return weights


def exact_gaussian_process(n_features, random_state=None):
    """scikit-learn's exact GP regressor with the kernel a tabular user would pick: C * ARD RBF + white noise.

    ``GaussianProcessRegressor(ConstantKernel(1) * RBF(np.ones(n_features))
    + WhiteKernel(1e-2), normalize_y=True, n_restarts_optimizer=2)``: one
    length scale per feature (for standardised features), the noise level
    learned, y standardised; the marginal likelihood maximised from 3
    starts.
    """
    kernel = ConstantKernel(1.0) * RBF(np.ones(n_features)) + WhiteKernel(1e-2)
    return GaussianProcessRegressor(kernel, normalize_y=True, n_restarts_optimizer=2, random_state=random_state)


def _default_estimators(n_samples, n_features, seed):
    """The default members (name, unfitted regressor), each behind a StandardScaler."""
    from ..gaussian_process import SparseGPRegressor
    from ..neural_network import BayesianMLPRegressor

    if n_samples <= EXACT_GP_MAX_ROWS:
        gp = exact_gaussian_process(n_features, seed)
    else:
        gp = SparseGPRegressor(random_state=seed)
    return [
        ("bayesian_ridge", make_pipeline(StandardScaler(), BayesianRidge())),
        ("gaussian_process", make_pipeline(StandardScaler(), gp)),
        ("bayesian_mlp", make_pipeline(StandardScaler(), BayesianMLPRegressor(random_state=seed))),
    ]


def _mean_std(member, X):
    mean, std = member.predict(X, return_std=True)
    return column_or_1d(mean).astype(np.float64), column_or_1d(std).astype(np.float64)


def _member_predictive(member, X, method, *args, gaussian):
    """``method`` of the member's predictive at the rows X (its own where it has it, else ``gaussian(mean, std)``).

    The member's own ``method`` is looked up on it and, for a Pipeline, on
    its last step (X transformed by the steps before); the result is
    float64, of shape (n,) or (n, n_levels).
    """
    step, Xt = _step_with(member, X, method)
    if step is not None:
        values = getattr(step, method)(Xt, *args)
    else:
        values = gaussian(*_mean_std(member, X))
    values = np.asarray(values, dtype=np.float64)
    return values if values.ndim == 1 else values.reshape(X.shape[0], -1)


def _member_log_density(member, X, y):
    """log p(y_i | x_i) of the member: its ``log_predictive_density``, else of N(mean, std^2)."""
    return _member_predictive(member, X, "log_predictive_density", y, gaussian=lambda m, s: norm.logpdf(y, m, s))


def _member_cdf(member, X, y):
    """F(y_i | x_i) of the member: its ``predict_cdf``, else of N(mean, std^2)."""
    return _member_predictive(member, X, "predict_cdf", y, gaussian=lambda m, s: norm.cdf(y, m, s))


def _member_quantiles(member, X, levels):
    """The member's quantiles at ``levels``, shape (n, n_levels): its ``predict_quantiles``, else N(mean, std^2)'s."""
    return _member_predictive(member, X, "predict_quantiles", levels,
                              gaussian=lambda m, s: m[:, None] + s[:, None] * norm.ppf(levels))


def _noise_variance(final):
    """The observation-noise variance (units of y squared) of a scikit-learn regressor, or None if unknown."""
    if isinstance(final, (BayesianRidge, ARDRegression)):
        return 1.0 / final.alpha_
    if isinstance(final, GaussianProcessRegressor):
        # a WhiteKernel added at the top level (k + WhiteKernel, WhiteKernel + k, or alone) is the noise
        kernel = final.kernel_
        terms = [kernel.k1, kernel.k2] if isinstance(kernel, Sum) else [kernel]
        white = [k for k in terms if isinstance(k, WhiteKernel)]
        if not white:
            return None
        scale = np.asarray(getattr(final, "_y_train_std", 1.0), dtype=np.float64).ravel()[0]
        return sum(k.noise_level for k in white) * scale**2
    return None


def _member_uncertainty(member, X):
    """(mean, epistemic variance, aleatoric variance, variance) of the member; the split NaN where unknown."""
    step, Xt = _step_with(member, X, "predict_uncertainty")
    if step is not None:
        result = step.predict_uncertainty(Xt)
        epistemic, aleatoric = column_or_1d(result.epistemic_std) ** 2, column_or_1d(result.aleatoric_std) ** 2
        return column_or_1d(result.mean).astype(np.float64), epistemic, aleatoric, epistemic + aleatoric
    mean, std = _mean_std(member, X)
    noise = _noise_variance(_prediction_step(member)[1])
    if noise is None:
        return mean, np.full_like(mean, np.nan), np.full_like(mean, np.nan), std**2
    epistemic, aleatoric = np.maximum(std**2 - noise, 0.0), np.full_like(mean, noise)
    return mean, epistemic, aleatoric, epistemic + aleatoric


def _fit_and_score(estimator, X, y, train, test):
    with warnings.catch_warnings():
        # a fold's convergence notes repeat the refit's, which are shown
        warnings.simplefilter("ignore", ConvergenceWarning)
        estimator.fit(X[train], y[train])
    return _member_log_density(estimator, X[test], y[test])


@fill_doc(target_shape="(n_samples,)", target_mismatch="or y not\none value per row.")
class PredictiveStackingRegressor(PredictiveRegressorMixin, RegressorMixin, MetaEstimatorMixin, BaseEstimator):
    r"""Stacking of predictive distributions: the mixture of a few regressors' that predicts held-out rows best.

    The predictive distribution is the mixture sum_k w_k p_k(y | x) of the
    members' predictive distributions, with the weights w that maximise the
    log predictive density of rows each member was not fitted on (inner
    cross-validation on the training rows): *stacking of predictive
    distributions* ([Yao2018]_, eq. 4 with the log score; the weights by
    :func:`stacking_weights`). It chooses among the families (a weight near
    1 for the one that predicts best) or combines them where each predicts
    some rows better. Measured on 16 splits of small and UCI sets
    (``doc/stacking.md``), its test log-likelihood is within 0.02 nats of
    the best member's or above on 13; below on energy (by 0.03-0.07), where
    the members fitted on 80% of the rows rank the GP above the MLP that
    wins with all of them. The
    members are then refitted on all the rows; a member whose weight falls
    below 1e-3 is dropped and the others renormalised. The members'
    ``ConvergenceWarning`` notes are shown for the refits, not for the
    cross-validation's fits.

    Read more in ``doc/stacking.md``.

    Parameters
    ----------
    estimators : list of (str, estimator), default=None
        The members, by name, given as to
        :class:`~sklearn.ensemble.StackingRegressor` (but their parameters
        are not reached through ``set_params``, and they receive X as the
        validated float array, so a member cannot select DataFrame columns
        by name).
        Each needs ``predict(X, return_std=True)``; its density, CDF and
        quantiles are its own where it has ``log_predictive_density``,
        ``predict_cdf`` and ``predict_quantiles`` (the skbayes regressors,
        also as the last step of a :class:`~sklearn.pipeline.Pipeline`),
        and those of N(mean, std^2) otherwise (scikit-learn's
        :class:`~sklearn.linear_model.BayesianRidge`,
        :class:`~sklearn.gaussian_process.GaussianProcessRegressor`). None
        means three families, each behind a
        :class:`~sklearn.preprocessing.StandardScaler`: Bayesian linear
        regression (``BayesianRidge()``), a Gaussian process (scikit-learn's
        exact ``GaussianProcessRegressor`` with a constant times an ARD RBF
        kernel plus a white-noise kernel, ``normalize_y=True`` and 2
        optimiser restarts, for at most 2,000 training rows;
        :class:`~skbayes.SparseGPRegressor` above) and the Bayesian MLP
        (:class:`~skbayes.BayesianMLPRegressor` at its defaults), each with
        ``random_state``.
    cv : int, cross-validation generator or iterable, default=5
        The inner cross-validation whose held-out rows score the members:
        an int k is k-fold (``KFold`` with k folds, shuffled with
        ``random_state``); a splitter or an iterable of
        (train, test) index arrays is used as it is (None: unshuffled
        5-fold). A row may be held out at most once (K-fold; repeated or
        overlapping test sets are refused): the weights are fitted to the
        held-out rows, and rows never held out do not count.
    n_jobs : int, default=None
        Number of jobs fitting the (member, fold) pairs and the refits in
        parallel (joblib; None means 1). With more than one, the refits'
        warnings stay in the worker processes.
    random_state : int, RandomState instance or None, default=None
        Seed of the folds' shuffle and of the default members.

    Attributes
    ----------
    estimators_ : list of estimator
        The members refitted on all the rows, one per name of
        ``named_estimators_`` (the members with a non-zero weight).
    named_estimators_ : sklearn.utils.Bunch
        The fitted members by name.
    weights_ : ndarray of shape (n_members_kept,)
        The stacking weights of ``estimators_``, summing to 1.
    stacking_weights_ : dict of str to float
        The weight of every member, by name, dropped members at 0.
    cv_log_predictive_density_ : dict of str to float
        Each member's mean held-out log predictive density over the inner
        cross-validation (nats per row); the stacked mixture's, on the
        same rows, under ``"stacked"`` (optimistic: the weights were
        fitted to these rows).
    cv_log_density_ : ndarray of shape (n_samples, n_members)
        The held-out log density of every row under every member (nats);
        NaN for the rows ``cv`` never holds out.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when X has string column names.

    See Also
    --------
    skbayes.ensemble.stacking_weights : the weights of given held-out log densities.
    sklearn.ensemble.StackingRegressor : stacking of point predictions.

    Notes
    -----
    The fit costs (k + 1) fits of every member for k folds. The mixture's
    mean and variance are exact (law of total variance); its CDF and
    density are the weighted sums of the members'; its quantiles are found
    by bisection of the CDF between the members' quantiles. The
    epistemic/aleatoric split of :meth:`predict_uncertainty` needs each
    member's: the skbayes regressors give it, and so do scikit-learn's
    ``BayesianRidge``/``ARDRegression`` (noise 1 / ``alpha_``) and
    ``GaussianProcessRegressor`` (its ``WhiteKernel``); for other members
    the split is NaN.

    References
    ----------
    .. [Yao2018] Y. Yao, A. Vehtari, D. Simpson and A. Gelman, "Using
       stacking to average Bayesian predictive distributions (with
       discussion)", Bayesian Analysis 13(3), 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import BayesianRidge
    >>> from sklearn.gaussian_process import GaussianProcessRegressor
    >>> from skbayes import PredictiveStackingRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.uniform(-3, 3, (120, 1))
    >>> y = np.sin(2 * X[:, 0]) + 0.1 * rng.randn(120)
    >>> model = PredictiveStackingRegressor(
    ...     [("linear", BayesianRidge()), ("gp", GaussianProcessRegressor(normalize_y=True))], random_state=0
    ... ).fit(X, y)
    >>> max(model.stacking_weights_, key=model.stacking_weights_.get)
    'gp'
    """

    _parameter_constraints = {
        "estimators": [list, None],
        "cv": ["cv_object"],
        "n_jobs": [Integral, None],
        "random_state": ["random_state"],
    }

    def __init__(self, estimators=None, *, cv=5, n_jobs=None, random_state=None):
        self.estimators = estimators
        self.cv = cv
        self.n_jobs = n_jobs
        self.random_state = random_state

    def _members(self, n_samples, n_features, seed):
        if self.estimators is None:
            return _default_estimators(n_samples, n_features, seed)
        members = list(self.estimators)
        if not members:
            raise ValueError("estimators is empty; give at least one (name, regressor) pair, or None.")
        for pair in members:
            if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)):
                raise ValueError(f"estimators must be (name, regressor) pairs; got {pair!r}.")
            if not (hasattr(pair[1], "fit") and hasattr(pair[1], "predict")):
                raise ValueError(f"estimator '{pair[0]}' has no fit/predict: {pair[1]!r}.")
        names = [name for name, _ in members]
        if len(set(names)) != len(names):
            raise ValueError(f"estimator names must be unique; got {names}.")
        return members

    def _splits(self, X, y, rng):
        if isinstance(self.cv, Integral):
            return KFold(self.cv, shuffle=True, random_state=rng.randint(np.iinfo(np.int32).max))
        return check_cv(self.cv, y, classifier=False)

    @_fit_context(prefer_skip_nested_validation=False)  # the members validate their own parameters
    def fit(self, X, y):
        """Score every member by inner cross-validation, fit the weights, and refit the weighted members.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        %(returns_self)s

        Raises
        ------
        ValueError
            If X or y has NaN/inf, y has several columns, there are fewer
            rows than folds, ``estimators`` is empty, has duplicate names or
            a member without ``fit``/``predict``, ``cv`` holds a row out more
            than once, or a member's held-out log density is NaN.
        """
        X, y = validate_data(self, X, y, multi_output=True, y_numeric=True, dtype=(np.float64, np.float32))
        if y.ndim == 2 and y.shape[1] > 1:
            raise ValueError(f"PredictiveStackingRegressor handles one target; got y with {y.shape[1]} columns.")
        y = column_or_1d(y, warn=True).astype(np.float64, copy=False)
        rng = check_random_state(self.random_state)
        seed = rng.randint(np.iinfo(np.int32).max)
        members = self._members(X.shape[0], X.shape[1], seed)
        cv = self._splits(X, y, rng)
        splits = list(cv.split(X, y))
        held = np.concatenate([np.asarray(test).ravel() for _, test in splits]) if splits else np.empty(0, int)
        if np.unique(held).size != held.size:
            raise ValueError(
                "cv holds some rows out more than once (repeated or overlapping test sets); the stacking weights "
                "are fitted to one held-out density per row. Use a K-fold splitter."
            )
        if len(splits) > X.shape[0] or any(len(test) == 0 for _, test in splits):
            raise ValueError(
                f"cv={self.cv!r} makes {len(splits)} folds, which needs at least {len(splits)} rows; got "
                f"n_samples={X.shape[0]}."
            )
        scores = Parallel(n_jobs=self.n_jobs)(
            delayed(_fit_and_score)(clone(member), X, y, train, test)
            for _, member in members for train, test in splits
        )
        held_out = np.full((X.shape[0], len(members)), np.nan)
        for k in range(len(members)):
            for (_, test), score in zip(splits, scores[k * len(splits):(k + 1) * len(splits)], strict=True):
                held_out[test, k] = score
        scored = ~np.isnan(held_out).all(axis=1)  # rows held out at least once
        if np.isnan(held_out[scored]).any():
            raise ValueError("A member's held-out log predictive density is NaN.")
        weights = stacking_weights(held_out[scored])
        weights = np.where(weights < MIN_WEIGHT, 0.0, weights)
        weights /= weights.sum()
        self.cv_log_density_ = held_out
        names = [name for name, _ in members]
        self.cv_log_predictive_density_ = {name: float(np.mean(held_out[scored, k])) for k, name in enumerate(names)}
        with np.errstate(divide="ignore"):
            stacked = logsumexp(held_out[scored] + np.log(weights), axis=1)
        self.cv_log_predictive_density_["stacked"] = float(np.mean(stacked))
        self.stacking_weights_ = {name: float(w) for name, w in zip(names, weights, strict=True)}
        kept = [k for k in range(len(members)) if weights[k] > 0]
        fitted = Parallel(n_jobs=self.n_jobs)(delayed(clone(members[k][1]).fit)(X, y) for k in kept)
        self.estimators_ = fitted
        self.named_estimators_ = Bunch(**{names[k]: est for k, est in zip(kept, fitted, strict=True)})
        self.weights_ = weights[kept]
        return self

    # --------------------------------------------------------------- prediction
    def _validate_X(self, X):
        check_is_fitted(self)
        return validate_data(self, X, reset=False, dtype=(np.float64, np.float32))

    def predict_uncertainty(self, X):
        """Mean and standard deviations of the stacked mixture, split by source.

        With member means m_k, epistemic variances e_k and aleatoric
        variances a_k: mean sum_k w_k m_k; epistemic variance sum_k w_k e_k
        plus the variance of the members' means, sum_k w_k (m_k - mean)^2
        (the law of total variance over the members: disagreement between
        the families is model uncertainty); aleatoric sum_k w_k a_k.

        %(parameters_X)s

        Returns
        -------
        result : Bunch
            ``mean``, ``std``, ``epistemic_std``, ``aleatoric_std``, each of
            shape (n_samples,), in the units of y; the last two NaN where a
            member does not split its variance (see Notes of the class),
            ``std`` always defined.

        %(predict_raises)s
        """
        X = self._validate_X(X)
        means, epistemic, aleatoric, variances = map(
            np.array, zip(*(_member_uncertainty(member, X) for member in self.estimators_), strict=True))
        w = self.weights_[:, None]
        mean = np.sum(w * means, axis=0)
        spread = np.sum(w * (means - mean) ** 2, axis=0)
        epistemic_var = np.sum(w * epistemic, axis=0) + spread
        aleatoric_var = np.sum(w * aleatoric, axis=0)
        total = np.sum(w * variances, axis=0) + spread
        return Bunch(mean=mean, std=np.sqrt(total), epistemic_std=np.sqrt(epistemic_var),
                     aleatoric_std=np.sqrt(aleatoric_var))

    @validate_method_params(return_std=["boolean"])
    def predict(self, X, return_std=False):
        """Mean of the stacked predictive mixture, and optionally its standard deviation.

        %(parameters_X)s
        return_std : bool, default=False
            Also return the mixture's standard deviation (noise included).

        Returns
        -------
        y_mean : ndarray of shape (n_samples,)
        y_std : ndarray of shape (n_samples,)
            Only returned when ``return_std`` is True.

        %(predict_raises)s
        """
        if not return_std:
            X = self._validate_X(X)
            return np.sum(self.weights_[:, None] * np.array([_mean_std(m, X)[0] for m in self.estimators_]), axis=0)
        result = self.predict_uncertainty(X)
        return result.mean, result.std

    def log_predictive_density(self, X, y):
        """Log density of the stacked mixture at each observation, in nats.

        log sum_k w_k p_k(y_i | x_i), each member's own density (see
        ``estimators``), in the units of y.

        %(log_predictive_density_sections)s
        """
        X = self._validate_X(X)
        y = check_target_values(y, (X.shape[0],))
        terms = np.array([_member_log_density(m, X, y) for m in self.estimators_])
        return logsumexp(terms, axis=0, b=self.weights_[:, None])

    def _predictive_cdf(self, X, y):
        """sum_k w_k F_k(y): the members' CDFs (see ``estimators``)."""
        X = self._validate_X(X)
        return self._mixture_cdf(X, check_target_values(y, (X.shape[0],)))

    def _mixture_cdf(self, X, y):
        """sum_k w_k F_k(y) at validated X and y of shape (n,)."""
        return np.sum(self.weights_[:, None] * np.array([_member_cdf(m, X, y) for m in self.estimators_]), axis=0)

    def _predictive_quantiles(self, X, levels):
        """Quantiles of the mixture: bisection of its CDF between the members' quantiles at each level."""
        X = self._validate_X(X)
        bounds = np.array([_member_quantiles(m, X, levels) for m in self.estimators_])  # (K, n, n_levels)
        if len(self.estimators_) == 1:
            return bounds[0]

        def cdf(y):
            return np.stack([self._mixture_cdf(X, y[:, j]) for j in range(y.shape[1])], axis=1)

        # the mixture's q-quantile lies between its members' q-quantiles
        return bisect_quantile(cdf, levels, bounds.min(axis=0), bounds.max(axis=0), n_bisections=_N_BISECTIONS)

    @validate_method_params(n_samples=N_DRAWS, random_state=["random_state"])
    def sample_y(self, X, n_samples=1, random_state=0):
        """Draw targets from the stacked predictive mixture.

        Each draw picks a member with probability its weight (one member
        for all rows of the draw) and takes that member's draw: its
        ``sample_y`` where it has one, else a draw of N(mean, std^2)
        independent across rows.

        Parameters
        ----------
        X : array-like of shape (n_samples_X, n_features)
        n_samples : int, default=1
            Number of draws per row (>= 1).
        random_state : int, RandomState instance or None, default=0
            Seed of the draws.

        Returns
        -------
        y_samples : ndarray of shape (n_samples_X, n_samples)
            In the units of y.

        %(predict_raises)s
        """
        X = self._validate_X(X)
        rng = check_random_state(random_state)
        members = rng.choice(len(self.estimators_), size=n_samples, p=self.weights_)
        draws = np.empty((X.shape[0], n_samples))
        for k in np.unique(members):
            columns = np.flatnonzero(members == k)
            step, Xt = _step_with(self.estimators_[k], X, "sample_y")
            if step is not None:
                values = step.sample_y(Xt, n_samples=columns.size, random_state=rng.randint(np.iinfo(np.int32).max))
                draws[:, columns] = np.asarray(values).reshape(X.shape[0], columns.size)
            else:
                mean, std = _mean_std(self.estimators_[k], X)
                draws[:, columns] = mean[:, None] + std[:, None] * rng.standard_normal((X.shape[0], columns.size))
        return draws

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags
