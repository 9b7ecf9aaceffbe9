"""CalibratedRegressorCV: recalibration of a regressor's predictive distribution."""

import inspect
import math
from numbers import Integral

import numpy as np
from scipy.special import logsumexp, ndtri
from sklearn.base import BaseEstimator, MetaEstimatorMixin, RegressorMixin, clone
from sklearn.frozen import FrozenEstimator
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import BayesianRidge
from sklearn.model_selection import check_cv
from sklearn.pipeline import Pipeline
from sklearn.utils.metaestimators import available_if
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from .._docstrings import fill_doc
from .._param_validation import (
    COVERAGE,
    HasMethods,
    Interval,
    StrOptions,
    _fit_context,
    check_quantile_levels,
    validate_method_params,
)
from .._predictive import (
    DrawsPredictive, GaussianPredictive, ModelPredictive, _per_row, bisect_quantile, map_inverse, map_slope,
)

__all__ = ["CalibratedRegressorCV"]

# PIT values are kept in [eps, 1 - eps], so that they never tie with the anchors
# (0, 0) and (1, 1) of the map: R(0) = 0 and R(1) = 1 exactly.
_PIT_EPS = 1e-12
# Seed of sample_y for predictive="draws" (scikit-learn's sample_y default):
# the same draws at every call, so the predictions are deterministic.
_DRAWS_SEED = 0


def _prediction_step(estimator):
    """The estimator that predicts, under FrozenEstimator and Pipeline, and a function applying the steps before it."""

    def transform(X):
        return X

    while True:
        if isinstance(estimator, FrozenEstimator):
            estimator = estimator.estimator
        elif isinstance(estimator, Pipeline):
            head, before = estimator[:-1], transform

            def transform(X, head=head, before=before):
                return head.transform(before(X))

            estimator = estimator[-1]
        else:
            return transform, estimator


def _has_own_predictive(final):
    """Whether the final step gives its own predictive CDF and quantiles (every skbayes regressor does)."""
    return hasattr(final, "predict_cdf") and hasattr(final, "predict_quantiles")


def _resolve_predictive(estimator, predictive):
    """``predictive`` with "auto" resolved: "model" where the final step has its own predictive, else "gaussian"."""
    if predictive != "auto":
        return predictive
    return "model" if _has_own_predictive(_prediction_step(estimator)[1]) else "gaussian"


def _check_predictive_api(estimator, predictive):
    """Raise a ValueError before any fit if ``estimator`` cannot give the requested predictive."""
    _, final = _prediction_step(estimator)
    name = type(final).__name__
    if predictive == "gaussian":
        parameters = inspect.signature(final.predict).parameters
        if "return_std" not in parameters and not any(p.kind == p.VAR_KEYWORD for p in parameters.values()):
            raise ValueError(
                f"predictive='gaussian' needs predict(X, return_std=True), which {name} does not have. Use a "
                "regressor with a predictive standard deviation (an skbayes regressor, BayesianRidge, "
                "GaussianProcessRegressor, ...), or predictive='draws' with one that has sample_y."
            )
    elif predictive == "model":
        if not _has_own_predictive(final):
            raise ValueError(
                f"predictive='model' needs predict_cdf(X, y) and predict_quantiles(X, quantiles), which {name} "
                "does not have (every skbayes regressor has them); use predictive='gaussian' with a regressor "
                "that has predict(X, return_std=True)."
            )
    elif not hasattr(final, "sample_y"):
        raise ValueError(
            f"predictive='draws' needs sample_y(X, n_samples, random_state), which {name} does not have; "
            "use predictive='gaussian' with a regressor that has predict(X, return_std=True)."
        )


def _has_density(calibrated):
    """Whether ``calibrated`` (a CalibratedRegressorCV) has a density: its base predictive is Gaussian, or the model's own with log_predictive_density."""
    estimator = calibrated._get_estimator()
    predictive = getattr(calibrated, "predictive_", None) or _resolve_predictive(estimator, calibrated.predictive)
    if predictive == "model":
        return hasattr(_prediction_step(estimator)[1], "log_predictive_density")
    return predictive == "gaussian"


def _one_output(values, what, shape):
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == len(shape) + 1 and values.shape[1] == 1:
        values = values[:, 0]
    if values.shape != shape:
        raise ValueError(
            f"The base estimator's {what} has shape {values.shape}; CalibratedRegressorCV handles one output, "
            f"shape {shape}."
        )
    return values


def _base_predictive(estimator, X, predictive, n_mc_predict):
    """The fitted base estimator's predictive distribution for the rows of X."""
    n = X.shape[0]
    if predictive == "gaussian":
        mean, std = estimator.predict(X, return_std=True)
        mean, std = _one_output(mean, "mean", (n,)), _one_output(std, "std", (n,))
        if not np.all(np.isfinite(std) & (std >= 0)):
            raise ValueError("The base estimator predicted a negative or non-finite standard deviation.")
        return GaussianPredictive(mean, np.maximum(std, np.finfo(np.float64).tiny))
    transform, final = _prediction_step(estimator)
    if predictive == "model":
        return ModelPredictive(final, transform(X))
    draws = final.sample_y(transform(X), n_samples=n_mc_predict, random_state=_DRAWS_SEED)
    return DrawsPredictive(_one_output(draws, "sample_y draws", (n, n_mc_predict)))


def _pit(estimator, X, y, predictive, n_mc_predict):
    """Probability integral transform F_i(y_i) of the held-out rows, in [eps, 1 - eps]."""
    pit = _base_predictive(estimator, X, predictive, n_mc_predict).cdf(y)
    return np.clip(pit, _PIT_EPS, 1.0 - _PIT_EPS)


def _fit_fold(estimator, X, y, train, test, predictive, n_mc_predict, keep_estimator):
    estimator.fit(X[train], y[train])
    return (estimator if keep_estimator else None), _pit(estimator, X[test], y[test], predictive, n_mc_predict)


def _knot_ranks(pit, levels, n_knots):
    """Indices of the sorted PIT values kept as knots of the smoothed map.

    The raw map runs through the points (Phi^{-1}(p_(i)), Phi^{-1}(i / (n + 1)))
    in probit coordinates; the indices are those nearest to ``n_knots``
    points evenly spaced along the length of that polyline, from the first
    point to the last (fewer where two of them meet the same index).
    """
    x, y = ndtri(pit), ndtri(levels)
    # arc length at each point, strictly increasing (so is y)
    length = np.concatenate(([0.0], np.cumsum(np.hypot(np.diff(x), np.diff(y)))))
    targets = np.linspace(0.0, length[-1], n_knots)
    return np.unique(np.rint(np.interp(targets, length, np.arange(pit.size))).astype(int))


def _resolve_n_knots(n_knots, n):
    """The number K of knots for n calibration rows; K >= n keeps all the PIT values."""
    if n_knots is None:
        return n
    if n_knots == "auto":
        return max(2, math.ceil(math.sqrt(n)))
    return n_knots


def _fit_calibrator(pit, n_knots):
    """The map R of Kuleshov et al. 2018 (Algorithm 1), smoothed to ``n_knots`` knots.

    The data of the isotonic regression are (p_(i), i / (n + 1)) for the
    sorted PIT values p_(1..n), plus the anchors (0, 0) and (1, 1). The level
    i / (n + 1) is the mean of the i-th of n uniform order statistics (the
    paper's i / n would give R = 1 from the largest PIT value on, a zero
    density above it). With fewer knots than PIT values, the isotonic fit is
    kept at the PIT values of ``_knot_ranks`` and at the anchors, linear in
    between (an IsotonicRegression fitted to these points, which it
    interpolates).
    """
    pit = np.sort(pit)
    levels = np.arange(1, pit.size + 1) / (pit.size + 1)
    knots = np.concatenate(([0.0], pit, [1.0]))
    values = np.concatenate(([0.0], levels, [1.0]))
    isotonic = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip").fit(knots, values)
    n_knots = _resolve_n_knots(n_knots, pit.size)
    if n_knots >= pit.size:
        return isotonic
    # tied PIT values (clipped ones) give one knot; the isotonic fit averages their levels
    knots = np.concatenate(([0.0], np.unique(pit[_knot_ranks(pit, levels, n_knots)]), [1.0]))
    return clone(isotonic).fit(knots, isotonic.predict(knots))


def _single_output(y):
    """Validated y as a float64 vector; a column vector is flattened with a DataConversionWarning."""
    if y.ndim == 2 and y.shape[1] > 1:
        raise ValueError(
            f"CalibratedRegressorCV handles one target; got y with {y.shape[1]} columns. Recalibrate "
            "each output separately (one CalibratedRegressorCV per column of y)."
        )
    return column_or_1d(y, warn=True).astype(np.float64, copy=False)


class _RecalibratedPool:
    r"""The combined predictive of K recalibrated members G_k(y) = R_k(F_{k,x}(y)), for each row.

    Each member is moved to Y = a_k + s Y_k (Y_k ~ G_k) and the pool is the
    average of the moved CDFs, G(y) = (1/K) sum_k G_k((y - a_k) / s):
    with ``scale=None`` the linear pool (a_k = 0, s = 1); with a scale s,
    every member centred on the members' mean, a_k = m - s m_k, where m_k is
    G_k's mean and m = (1/K) sum_k m_k (``CalibratedRegressorCV``'s
    ``pooling="ambiguity"``, s from :func:`_ambiguity_scale`). One member is
    G_1 either way.

    Parameters
    ----------
    members : list of (predictive, knots, values)
        Each member's base predictive (``GaussianPredictive``,
        ``ModelPredictive`` or ``DrawsPredictive`` of n rows) and its map R_k.
    scale : float in (0, 1] or None
    n_rows : int
    """

    def __init__(self, members, scale, n_rows):
        self.members, self.n_rows = members, n_rows
        self._member_moments = None
        self.linear = scale is None or len(members) == 1
        if self.linear:
            self.shifts, self.scale = [None] * len(members), 1.0
            return
        means, _ = self.member_moments()
        self.scale = float(scale)
        self.shifts = list(means.mean(axis=0) - self.scale * means)

    def member_moments(self):
        """Means and variances of the recalibrated members G_k, arrays of shape (K, n)."""
        if self._member_moments is None:
            self._member_moments = tuple(
                map(np.array, zip(*(base.recalibrated_moments(k, v) for base, k, v in self.members)))
            )
        return self._member_moments

    def _standardised(self, y, shift):
        """(y - a_k) / s for y of shape (n,) or (n, m); y itself for the linear pool."""
        if self.linear:
            return y
        return (y - _per_row(shift, y)) / self.scale

    def _moved(self, values, shift):
        """a_k + s values for values of shape (n,) or (n, m); the values themselves for the linear pool."""
        if self.linear:
            return values
        return _per_row(shift, values) + self.scale * values

    def cdf(self, y):
        """G(y) for y of shape (n,) or (n, m)."""
        return np.mean([
            np.interp(base.cdf(self._standardised(y, shift)), knots, values)
            for (base, knots, values), shift in zip(self.members, self.shifts, strict=True)
        ], axis=0)

    def logpdf(self, y):
        """log g(y) for y of shape (n,), in nats: log (1/K) sum_k f_k(z_k) R_k'(F_k(z_k)) / s, z_k = (y - a_k) / s."""
        terms = []
        with np.errstate(divide="ignore"):  # a flat part of R (tied PIT values) has density 0
            for (base, knots, values), shift in zip(self.members, self.shifts, strict=True):
                z = self._standardised(y, shift)
                terms.append(base.logpdf(z) + np.log(map_slope(base.cdf(z), knots, values)))
        return logsumexp(terms, axis=0) - np.log(len(terms)) - np.log(self.scale)

    def quantiles(self, levels):
        """G^{-1}(q) for the levels of shape (n_levels,): array of shape (n, n_levels), by bisection for K > 1."""
        shape = (self.n_rows, levels.size)
        bounds = np.stack([
            self._moved(base.ppf(np.broadcast_to(map_inverse(levels, knots, values), shape)), shift)
            for (base, knots, values), shift in zip(self.members, self.shifts, strict=True)
        ])
        if len(bounds) == 1:
            return bounds[0]
        # The pool's q-quantile lies between its moved members' q-quantiles.
        return bisect_quantile(self.cdf, levels, bounds.min(axis=0), bounds.max(axis=0))

    def moments(self):
        """Mean and variance of G, arrays of shape (n,)."""
        means, variances = self.member_moments()
        centres = np.array([self._moved(m, shift) for m, shift in zip(means, self.shifts, strict=True)])
        mean = centres.mean(axis=0)
        return mean, np.mean(self.scale**2 * variances + (centres - mean) ** 2, axis=0)


# Rows per block when the members' moments are measured on the training rows (bounds the memory of
# predictive="draws" to K members x 2,048 rows x n_mc_predict draws).
_MOMENT_BLOCK_ROWS = 2048


def _ambiguity_scale(means, variances):
    r"""The spread scale s = sqrt(max(1 - A / V, 1 / K)) of K members, from their means and variances.

    A = mean over rows and members of (m_k - m)^2, the members'
    disagreement, V = mean of their variances v_k (``means`` and
    ``variances`` of shape (K, n)). By the ambiguity decomposition
    ([Krogh1995]_), for every y, (m - y)^2 = (1/K) sum_k (m_k - y)^2 -
    (1/K) sum_k (m_k - m)^2: if each member's variance is its expected
    squared error (each is calibrated), the mean m of the members has
    expected squared error V - A, the variance s^2 V of the members centred
    on m and scaled by s. The floor V / K is that of K equally good members
    with independent errors. Averages over the rows, as the map R_k is an
    average over its calibration rows. V = 0 (members without spread) gives 1.

    Raises
    ------
    ValueError
        If a member's mean or variance is not finite.
    """
    if not (np.all(np.isfinite(means)) and np.all(np.isfinite(variances))):
        raise ValueError(
            "pooling='ambiguity': a recalibrated fold model has a non-finite predictive mean or variance on the "
            "training rows; check the base estimator's predictions, or use pooling='linear'."
        )
    variance = variances.mean()
    if not variance > 0:
        return 1.0
    ratio = 1.0 - ((means - means.mean(axis=0)) ** 2).mean() / variance
    return float(np.sqrt(np.clip(ratio, 1.0 / len(means), 1.0)))


@fill_doc(target_shape="(n_samples,)", target_mismatch="or y\nseveral columns.")
class CalibratedRegressorCV(RegressorMixin, MetaEstimatorMixin, BaseEstimator):
    r"""Recalibrated predictive distribution of a regressor, by isotonic regression of its PIT values.

    The base regressor's predictive CDF F_x is recalibrated as R(F_x(y))
    ([Kuleshov2018]_): on held-out rows, the probability integral transform
    (PIT) values p_i = F_{x_i}(y_i) are computed, and R: [0, 1] -> [0, 1] is
    the isotonic regression of their empirical CDF, so that the recalibrated
    levels are uniform on held-out data, i.e. the recalibrated q-quantile
    falls above y with frequency q at every level q. By default R is kept
    at about sqrt(n) of its n knots (``n_knots``), so that its slope, a
    factor of the recalibrated density, is not noisy. The recalibrated
    quantile at level q is the base quantile at level R^{-1}(q). This is
    average (marginal) calibration: it corrects a miscalibration common to
    all x (intervals too narrow or too wide, skew), not one that varies
    with x.

    The name and the cross-validation follow scikit-learn's
    :class:`~sklearn.calibration.CalibratedClassifierCV`.

    Read more in ``doc/calibration.md``.

    Parameters
    ----------
    estimator : estimator instance, default=None
        The regressor to recalibrate (it is cloned, except with
        ``cv="prefit"``); it may be a :class:`~sklearn.pipeline.Pipeline`
        or a :class:`~sklearn.frozen.FrozenEstimator`. None means
        :class:`~sklearn.linear_model.BayesianRidge`. It must have
        ``predict(X, return_std=True)`` for ``predictive="gaussian"``,
        ``predict_cdf`` and ``predict_quantiles`` (on its final step) for
        ``predictive="model"``, and ``sample_y`` (on its final step) for
        ``predictive="draws"``.
    predictive : {"auto", "model", "gaussian", "draws"}, default="auto"
        The base predictive CDF F_x:

        - ``"auto"``: ``"model"`` when the base regressor (the final step of
          a :class:`~sklearn.pipeline.Pipeline`, under a
          :class:`~sklearn.frozen.FrozenEstimator`) has ``predict_cdf`` and
          ``predict_quantiles`` (every skbayes regressor), else
          ``"gaussian"``. The resolved choice is ``predictive_``.
        - ``"model"``: the model's own predictive, through its
          ``predict_cdf`` (the PIT values), ``predict_quantiles`` (the
          recalibrated quantiles F_x^{-1}(R^{-1}(q))) and
          ``log_predictive_density`` (the density f_x(y) R'(F_x(y))): the
          Student-t or heteroscedastic mixture of an skbayes network, not
          a Gaussian of its mean and standard deviation. The recalibrated
          mean and standard deviation are by Gauss-Hermite quadrature of
          the recalibrated quantile function
          (``ModelPredictive.recalibrated_moments``). Deterministic; each
          prediction costs the base's quantiles at the recalibrated levels.
        - ``"gaussian"``: N(mean, std^2) from ``predict(X, return_std=True)``
          (for the skbayes regressors whose predictive is a mixture, such as
          MC dropout, deep ensembles, SGHMC or a deep GP, the Gaussian with
          the mixture's mean and standard deviation). Deterministic and
          cheap; the recalibrated mean and standard deviation are in closed
          form and the density is available.
        - ``"draws"``: the distribution of ``n_mc_predict`` draws of
          ``sample_y(X, n_samples=n_mc_predict, random_state=0)``, the model's
          own predictive (a mixture, skewed, multimodal), its CDF the
          linear interpolation of the sorted draws. Costs ``n_mc_predict``
          draws per prediction and ``n_samples * n_mc_predict`` floats of
          memory; no density.
    n_mc_predict : int, default=1000
        Number S >= 2 of draws per row with ``predictive="draws"``; levels
        below 1/(2S) or above 1 - 1/(2S) give the extreme draws.
    n_knots : int >= 2, "auto" or None, default="auto"
        Smoothing of the map R fitted to n PIT values (per fold with
        ``ensemble=True``). The isotonic fit is kept at K of the PIT values
        (the first and the last included) and at (0, 0) and (1, 1), and
        linear in between, so that each slope of R is estimated from about
        n / (K - 1) PIT values; the K PIT values are those nearest to K
        points evenly spaced along the fitted map drawn in probit
        coordinates (fewer than K where two meet the same value). An int:
        that K. ``"auto"``: K = max(2, ceil(sqrt(n))). None, or K >= n: all
        the PIT values are knots, the map of [Kuleshov2018]_. See Notes.
    cv : int, cross-validation generator, iterable, "prefit" or None, default=None
        How the PIT values are held out of the fit:

        - None or an int k: k-fold cross-validation (``KFold``, no
          shuffling; 5 folds for None);
        - a splitter or an iterable of (train, test) index arrays;
        - ``"prefit"``: ``estimator`` is already fitted and is used as it
          is; all of (X, y) is the calibration set, which should be
          disjoint from the data it was fitted on. The same as
          ``FrozenEstimator(estimator)`` with ``ensemble="auto"``, the
          current scikit-learn idiom, which also works.
    ensemble : bool or "auto", default="auto"
        As in :class:`~sklearn.calibration.CalibratedClassifierCV`. True: a
        clone of ``estimator`` is fitted on the training part of each split
        and a map R_k on its PIT values on the test part; the predictive
        pools the K recalibrated CDFs R_k(F_{k,x}(y)) as ``pooling`` says
        (its quantiles by bisection). False: the PIT values of all test parts
        (cross-validated predictions, as ``cross_val_predict``) fit one map,
        applied to a clone fitted on all of (X, y). "auto" is False for a
        :class:`~sklearn.frozen.FrozenEstimator` and True otherwise. Ignored
        with ``cv="prefit"``.
    pooling : {"ambiguity", "linear"}, default="ambiguity"
        How the K recalibrated members G_k = R_k(F_{k,x}) of
        ``ensemble=True`` are combined (one member: G_1 either way):

        - ``"ambiguity"``: the average of the members, each centred on
          their mean at x, m = (1/K) sum_k m_k (m_k the mean of G_k), and
          with its spread about its mean scaled by one factor
          ``spread_scale_`` s = sqrt(max(1 - A / V, 1 / K)), where A is the
          members' disagreement (m_k - m)^2 and V their variance v_k, both
          averaged over the members and the training rows: by the ambiguity
          decomposition ([Krogh1995]_), the squared error of the mean of
          calibrated members is V - A on average, s^2 V. The floor V / K is
          that of K equally good members with independent errors. See
          Notes.
        - ``"linear"``: the average of the K CDFs, (1/K) sum_k G_k(y) (the
          linear pool), which is wider than calibrated where the members
          disagree.
    n_jobs : int, default=None
        Number of jobs fitting the cross-validation clones in parallel
        (joblib; None means 1).

    Attributes
    ----------
    predictive_ : {"model", "gaussian", "draws"}
        The base predictive used, ``predictive`` with ``"auto"`` resolved.
    estimators_ : list of estimator
        The fitted base regressors: one per split with ``ensemble=True``,
        else one (fitted on all of X, or ``estimator`` itself with
        ``cv="prefit"``).
    spread_scale_ : float or None
        The factor s of ``pooling="ambiguity"`` (in [1 / sqrt(K), 1]); None
        with ``pooling="linear"`` or one member.
    calibrators_ : list of sklearn.isotonic.IsotonicRegression
        The maps R, one per entry of ``estimators_``: piecewise linear with
        knots ``X_thresholds_`` (PIT values, from 0 to 1) and values
        ``y_thresholds_`` (from 0 to 1). With ``n_knots`` smoothing, the
        isotonic regression of the kept knots, which it interpolates.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when X has string column names.

    See Also
    --------
    sklearn.calibration.CalibratedClassifierCV : the classification counterpart.
    skbayes.metrics.regression_calibration_curve : the diagnostic this corrects.

    Notes
    -----
    The data of the isotonic regression are (p_(i), i / (n + 1)) for the
    sorted held-out PIT values p_(1) <= ... <= p_(n), plus (0, 0) and
    (1, 1) ([Kuleshov2018]_, Algorithm 1, which uses i / n). The fit
    interpolates them (tied PIT values share the mean of their levels): R
    is continuous and strictly increasing, R(0) = 0 and R(1) = 1, so the
    recalibrated distribution is proper and has a density,
    f_x(y) R'(F_x(y)) (piecewise, from the slopes of R). Keeping R at a
    subset of its knots keeps all of this.

    **Why smooth.** With all n knots R' is a histogram with one PIT value
    per bin. For a base that is already calibrated (PIT values uniform) and
    knots at ranks fixed in advance, 0 = i_0 < i_1 < ... < i_K <
    i_{K+1} = n + 1 (the anchors at 0 and n + 1), the widths of the
    segments are Dirichlet(m_1, ..., m_{K+1}) with m_j = i_j - i_{j-1}; a
    test PIT value lands in segment j with probability its width, where
    log R' = log(m_j / (n + 1)) - log(width), so the expected loss of test
    log-likelihood against the base is

    .. math::

        \sum_j \frac{m_j}{n + 1} \left(\psi(m_j + 1) - \log m_j\right)
        - \left(\psi(n + 2) - \log(n + 1)\right)
        < \frac{K + 1}{2 (n + 1)}

    nats per point (psi the digamma function; psi(m + 1) - log m <
    1 / (2 m)). With all n knots it is 1 - gamma - O(1/n), about 0.42 nats
    (gamma Euler's constant), whatever n; with K knots it falls as K / n,
    and depends on the number of segments, not on where they lie (the
    ranks chosen here depend on the data, which changes this little).
    Their place is chosen for the bias: for a Gaussian base N(m, s^2) whose
    standardized error is the same at every x (the truth N(m + b s,
    (c s)^2)), Phi^{-1}(R(Phi(z))) = (z - b) / c is a straight line in
    probit coordinates, and a map close to one is approximated by chords of
    equal length there about equally well everywhere, whether R stretches
    the levels (a base too wide) or the PIT values (a base too narrow, whose
    PIT values crowd near 0 and 1, where evenly spaced levels would leave
    segments spanning orders of magnitude of p). The rule
    K = ceil(sqrt(n)) keeps the cost for a calibrated base below about
    1 / (2 sqrt(n)) nats while K grows without bound, so that the smoothed
    map still converges to the true R. The n^(1/3) rate that balances the
    bias and variance of a histogram of a smooth density leaves too few
    knots when R' is unbounded (a base too narrow has R' -> infinity at 0
    and 1).

    ``predict`` returns the mean of the recalibrated distribution and
    ``return_std`` its standard deviation: in closed form for a Gaussian
    base (``GaussianPredictive.recalibrated_moments`` in
    ``skbayes/_predictive.py``), by the midpoint rule over S levels for
    draws, by Gauss-Hermite quadrature of the recalibrated quantile
    function for the model's own predictive. Sample weights and fit
    parameters are not routed to the base estimator.

    **Pooling the folds' models.** With ``ensemble=True`` each fold's
    recalibrated model G_k = R_k(F_{k,x}) is calibrated on its own held-out
    rows, but their average (the linear pool) is not: a linear pool of
    distinct calibrated forecasts is over-dispersed ([Gneiting2013]_,
    section 3), because the mean of the members is a better prediction
    than each member while the pool keeps each member's width and adds
    their disagreement. It matters where the error is mostly the model's
    (a small, nearly noise-free set): on a 300-row noise-free set the five
    recalibrated fold models each cover about 0.90 of the test rows with
    their 90% interval, their linear pool 0.98. ``pooling="ambiguity"``
    gives the pool the width of the error of the members' mean instead:
    Y = m + s (Y_k - m_k) for a draw Y_k of a member picked at random, so
    the pool keeps the members' shapes (skew, tails), has mean m and
    variance s^2 V on average over the rows. s is one number, like the map
    R_k an average over rows (the members are calibrated on average over x,
    not at each x). It is measured on the training rows, where the members
    disagree less than on new rows (each row trained K - 1 of them), so s
    errs towards 1, the wider side. There are no held-out rows to calibrate
    the pool itself on: every row trained K - 1 of the members.
    ``examples/benchmarks/recalibration_small.py`` measures both.
    ``ensemble=False`` (one map on all the folds' PIT values, applied to a
    model fitted on all rows) is narrower but is not calibrated either: its
    map is that of models fitted on fewer rows.

    References
    ----------
    .. [Kuleshov2018] V. Kuleshov, N. Fenner and S. Ermon, "Accurate
       uncertainties for deep learning using calibrated regression", ICML
       2018.
    .. [Gneiting2013] T. Gneiting and R. Ranjan, "Combining predictive
       distributions", Electronic Journal of Statistics 7, 2013.
    .. [Krogh1995] A. Krogh and J. Vedelsby, "Neural network ensembles,
       cross validation, and active learning", NeurIPS 7, 1995.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import BayesianRidge
    >>> from skbayes.calibration import CalibratedRegressorCV
    >>> rng = np.random.RandomState(0)
    >>> X = rng.randn(400, 2)
    >>> y = X[:, 0] + rng.standard_t(2, 400)  # heavy-tailed noise: Gaussian intervals miss
    >>> model = CalibratedRegressorCV(BayesianRidge(), cv=5).fit(X, y)
    >>> lower, upper = model.predict_interval(X[:3], coverage=0.9)
    >>> model.predict_quantiles(X[:3], [0.05, 0.5, 0.95]).shape
    (3, 3)
    """

    _parameter_constraints = {
        "estimator": [HasMethods(["fit", "predict"]), None],
        "predictive": [StrOptions({"auto", "model", "gaussian", "draws"})],
        "n_mc_predict": [Interval(Integral, 2, None, closed="left")],
        "n_knots": [Interval(Integral, 2, None, closed="left"), StrOptions({"auto"}), None],
        "cv": ["cv_object", StrOptions({"prefit"})],
        "ensemble": ["boolean", StrOptions({"auto"})],
        "pooling": [StrOptions({"ambiguity", "linear"})],
        "n_jobs": [Integral, None],
    }

    def __init__(
        self, estimator=None, *, predictive="auto", n_mc_predict=1000, n_knots="auto", cv=None, ensemble="auto",
        pooling="ambiguity", n_jobs=None,
    ):
        self.estimator = estimator
        self.predictive = predictive
        self.n_mc_predict = n_mc_predict
        self.n_knots = n_knots
        self.cv = cv
        self.ensemble = ensemble
        self.pooling = pooling
        self.n_jobs = n_jobs

    def _get_estimator(self):
        return BayesianRidge() if self.estimator is None else self.estimator

    @_fit_context(prefer_skip_nested_validation=False)  # the base estimator validates its own parameters
    def fit(self, X, y):
        """Fit the base regressor(s) and the recalibration map(s).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        %(returns_self)s

        Raises
        ------
        ValueError
            If X or y has NaN/inf, y has several columns, the base estimator
            lacks ``predict(X, return_std=True)`` (``predictive="gaussian"``),
            ``predict_cdf`` and ``predict_quantiles`` (``predictive="model"``)
            or ``sample_y`` (``predictive="draws"``), there are fewer rows
            than folds, or the base estimator's predictions are not of one
            output.
        sklearn.exceptions.NotFittedError
            With ``cv="prefit"`` and an unfitted ``estimator``.
        """
        X, y = validate_data(self, X, y, multi_output=True, y_numeric=True, dtype=(np.float64, np.float32))
        y = _single_output(y)
        estimator = self._get_estimator()
        self.predictive_ = _resolve_predictive(estimator, self.predictive)
        _check_predictive_api(estimator, self.predictive_)
        settings = (self.predictive_, self.n_mc_predict)
        if self.cv == "prefit":
            check_is_fitted(estimator, msg="cv='prefit' needs a fitted estimator; %(name)s is not fitted yet.")
            pairs = [(estimator, _pit(estimator, X, y, *settings))]
        else:
            pairs = self._cross_fit(estimator, X, y, settings)
        self.estimators_ = [fitted for fitted, _ in pairs]
        self.calibrators_ = [_fit_calibrator(pit, self.n_knots) for _, pit in pairs]
        self.spread_scale_ = None
        if self.pooling == "ambiguity" and len(pairs) > 1:
            self.spread_scale_ = _ambiguity_scale(*self._member_moments(X))
        return self

    def _member_moments(self, X):
        """Means and variances of each recalibrated member on the rows X, arrays of shape (K, n), by blocks of rows."""
        blocks = [X[start:start + _MOMENT_BLOCK_ROWS] for start in range(0, X.shape[0], _MOMENT_BLOCK_ROWS)]
        blocks = [_RecalibratedPool(self._members(rows), None, rows.shape[0]).member_moments() for rows in blocks]
        return tuple(np.concatenate(parts, axis=1) for parts in zip(*blocks))

    def __setstate__(self, state):
        # a model pickled before ``pooling`` (issue 28) pooled its folds linearly
        state.setdefault("pooling", "linear")
        if "calibrators_" in state:
            state.setdefault("spread_scale_", None)
        super().__setstate__(state)

    def _cross_fit(self, estimator, X, y, settings):
        """(fitted estimator, held-out PIT values) pairs: one per split, or one in all with ensemble=False."""
        cv = check_cv(self.cv, y, classifier=False)
        n_splits = cv.get_n_splits(X, y)
        if n_splits > X.shape[0]:
            raise ValueError(
                f"cv={self.cv!r} makes {n_splits} folds, which needs at least {n_splits} rows; got "
                f"n_samples={X.shape[0]}. Use fewer folds, or cv='prefit' with a calibration set."
            )
        ensemble = not isinstance(estimator, FrozenEstimator) if self.ensemble == "auto" else self.ensemble
        folds = Parallel(n_jobs=self.n_jobs)(
            delayed(_fit_fold)(clone(estimator), X, y, train, test, *settings, keep_estimator=ensemble)
            for train, test in cv.split(X, y)
        )
        if ensemble:
            return folds
        return [(clone(estimator).fit(X, y), np.concatenate([pit for _, pit in folds]))]

    # --------------------------------------------------------------- prediction
    def _pool(self, X):
        """The recalibrated predictive distribution of the validated rows X (one member per fitted estimator)."""
        return _RecalibratedPool(self._members(X), self.spread_scale_, X.shape[0])

    def _members(self, X):
        return [
            (_base_predictive(fitted, X, self.predictive_, self.n_mc_predict), iso.X_thresholds_, iso.y_thresholds_)
            for fitted, iso in zip(self.estimators_, self.calibrators_, strict=True)
        ]

    def _validate_X(self, X):
        check_is_fitted(self)
        return validate_data(self, X, reset=False, dtype=(np.float64, np.float32))

    def _validate_X_y(self, X, y):
        check_is_fitted(self)
        X, y = validate_data(self, X, y, reset=False, multi_output=True, y_numeric=True, dtype=(np.float64, np.float32))
        return X, _single_output(y)

    def _quantiles(self, X, levels):
        return self._pool(self._validate_X(X)).quantiles(levels)

    @validate_method_params(return_std=["boolean"])
    def predict(self, X, return_std=False):
        """Mean of the recalibrated predictive distribution, and optionally its standard deviation.

        For ``ensemble=True`` the mean and standard deviation of the pool of
        the recalibrated distributions (``pooling``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        return_std : bool, default=False
            Also return the standard deviation of the recalibrated
            distribution (not the base estimator's).

        Returns
        -------
        y_mean : ndarray of shape (n_samples,)
        y_std : ndarray of shape (n_samples,)
            Only returned when ``return_std`` is True.

        %(predict_raises)s
        """
        mean, variance = self._pool(self._validate_X(X)).moments()
        return (mean, np.sqrt(variance)) if return_std else mean

    @validate_method_params(quantiles=["array-like"])
    def predict_quantiles(self, X, quantiles):
        """Quantiles of the recalibrated predictive distribution.

        The quantile at level q is F_x^{-1}(R^{-1}(q)), the base quantile at
        the recalibrated level (R^{-1} the generalised inverse, the smallest
        level where R reaches q); with ``ensemble=True``, the quantile of the
        pool of the recalibrated CDFs (``pooling``), by bisection.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        quantiles : array-like of shape (n_quantiles,)
            Levels in (0, 1).

        Returns
        -------
        y_quantiles : ndarray of shape (n_samples, n_quantiles)
            In the units of y, non-decreasing in the level.

        Raises
        ------
        %(not_fitted_error)s
        ValueError
            If a level is not in (0, 1), or as :meth:`predict`.
        """
        return self._quantiles(X, check_quantile_levels(quantiles))

    @validate_method_params(coverage=COVERAGE)
    def predict_interval(self, X, coverage=0.95):
        """Central interval of the recalibrated predictive: its (1 -/+ coverage) / 2 quantiles.

        %(parameters_X)s
        %(coverage)s

        Returns
        -------
        lower, upper : ndarray of shape (n_samples,)
            In the units of y.

        Raises
        ------
        ValueError
            If ``coverage`` is not in (0, 1), or as :meth:`predict`.
        """
        bounds = self._quantiles(X, np.array([0.5 - coverage / 2, 0.5 + coverage / 2]))
        return bounds[:, 0], bounds[:, 1]

    def predict_cdf(self, X, y):
        """Recalibrated predictive CDF at y: R(F_x(y)) (pooled over the ensemble, see ``pooling``).

        At held-out targets these are the recalibrated PIT values, uniform
        on (0, 1) when the recalibration holds.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            One value per row.

        Returns
        -------
        cdf : ndarray of shape (n_samples,)
            In [0, 1].

        Raises
        ------
        %(not_fitted_error)s
        ValueError
            If X or y has NaN/inf, X the wrong number of features, or y
            several columns.
        """
        X, y = self._validate_X_y(X, y)
        return self._pool(X).cdf(y)

    @available_if(_has_density)
    def log_predictive_density(self, X, y):
        """Log density of the recalibrated predictive at each observation, in nats.

        log f_x(y) + log R'(F_x(y)) ([Kuleshov2018]_, section 3.2) for the
        base density f_x (the Gaussian's, or the model's own
        ``log_predictive_density`` with ``predictive="model"``; the log of
        the pool's density over the ensemble, see ``pooling``); R' is the slope of the
        piecewise-linear map, so the density is piecewise (see Notes of the
        class). Not with ``predictive="draws"``, nor with a ``"model"`` base
        that has no ``log_predictive_density``.

        %(log_predictive_density_sections)s
        """
        X, y = self._validate_X_y(X, y)
        return self._pool(X).logpdf(y)
