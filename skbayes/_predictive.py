r"""A regressor's predictive distributions of y, one per row, as numpy objects.

The predictive distribution F_i of y given x_i in three forms:

- :class:`MixturePredictive`: the uniform mixture (1/T) sum_t p_t(y) of T
  Gaussian or Student-t components per row, the predictive of every Bayesian
  regressor over its draws (weight draws, kept samples, ensemble members, a
  deep GP's propagated draws), with its mean, its epistemic and aleatoric
  variances, density, CDF, quantiles and draws.

Two of them also give the moments of their recalibration (see
:mod:`skbayes.calibration`):

- :class:`GaussianPredictive`: N(mu_i, sigma_i^2), from
  ``predict(X, return_std=True)``; it also has a density.
- :class:`DrawsPredictive`: the distribution of S draws from the predictive
  (``sample_y``), its CDF the linear interpolation of the sorted draws
  y_(1) <= ... <= y_(S) at the levels (j - 1/2) / S, constant beyond the
  extreme draws; a consistent estimate of F_i as S grows.
- :class:`ModelPredictive`: the regressor's own predictive, through its
  ``predict_cdf``, ``predict_quantiles`` and ``log_predictive_density`` (a
  Student-t mixture, a heteroscedastic mixture, a Gaussian: whatever the
  regressor's intervals and test log-likelihood use).

A recalibration map R: [0, 1] -> [0, 1] is given by its knots
0 = p_0 < p_1 < ... < p_J = 1 and non-decreasing values 0 = r_0 <= ... <=
r_J = 1, linear in between (the fitted function of scikit-learn's
``IsotonicRegression``). The recalibrated distribution has CDF R(F_i(y))
([Kuleshov2018]_, section 3.2); its quantile at level q is
F_i^{-1}(R^{-1}(q)).

:func:`bisect_quantile` inverts any non-decreasing CDF row by row (an
ensemble of recalibrated regressors); :func:`mixture_quantile` inverts the CDF
of a uniform mixture of Gaussian or Student-t components (the predictive of a
Bayesian network's weight draws, of the deep GP's draws) by Newton's method
safeguarded by bisection, in a few evaluations of the CDF instead of 50-60.

References
----------
.. [Abramowitz1964] M. Abramowitz and I. A. Stegun, "Handbook of
   mathematical functions", 1964, eq. 25.4.46 (Gauss-Hermite quadrature).
.. [Lange1989] K. L. Lange, R. J. A. Little and J. M. G. Taylor, "Robust
   statistical modeling using the t distribution", JASA 84(408), 1989
   (the Student-t as a scale mixture of Gaussians).
.. [Kuleshov2018] V. Kuleshov, N. Fenner and S. Ermon, "Accurate
   uncertainties for deep learning using calibrated regression", ICML 2018.
"""

import numpy as np
from numpy.polynomial.legendre import leggauss
from scipy.special import gammainccinv, gammaincinv, gammaln, logsumexp, ndtr, ndtri, stdtr, stdtrit
from scipy.stats import norm, t

__all__ = [
    "DrawsPredictive",
    "GaussianPredictive",
    "MixturePredictive",
    "ModelPredictive",
    "bisect_quantile",
    "map_inverse",
    "map_slope",
    "mixture_quantile",
    "student_t_scale_mixture",
]


def bisect_quantile(cdf, q, lo, hi, n_bisections=60):
    """Quantile of each row's distribution, by bisection of its CDF.

    Parameters
    ----------
    cdf : callable
        ``cdf(y) -> array of the shape of y``, non-decreasing in y, for y of
        the shape of ``lo``.
    q : float or ndarray broadcastable to the shape of ``lo``
        Probability levels in (0, 1).
    lo, hi : ndarray of shape (n,) or (n, n_levels)
        Finite brackets with cdf(lo) <= q <= cdf(hi).
    n_bisections : int, default=60
        Halvings of the bracket.

    Returns
    -------
    quantile : ndarray of the shape of ``lo``
        y with cdf(y) = q (the smallest such y where the CDF is flat), to
        2^-n_bisections of the bracket's width.
    """
    lo, hi = np.array(lo, dtype=float), np.array(hi, dtype=float)
    for _ in range(n_bisections):
        mid = 0.5 * (lo + hi)
        below = cdf(mid) < q
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return 0.5 * (lo + hi)


def mixture_quantile(prob, loc, scale, df=None, rtol=1e-8, max_iter=100, weights=None):
    r"""Quantile of each uniform (or weighted) mixture of Gaussian or Student-t components.

    The mixture's CDF is F(y) = (1/T) sum_t F_t((y - loc_t) / scale_t)
    (sum_t w_t F_t with ``weights``), F_t
    the standard normal CDF (``df`` None) or Student-t CDF with df_t degrees
    of freedom. F(y) = ``prob`` is solved by Newton's method on F with its
    density, safeguarded by bisection: the root lies between the smallest
    and the largest component quantile, the bracket shrinks at every
    iteration to the side on which F - prob changes sign, and a Newton step
    that leaves the bracket is replaced by its midpoint. The iteration
    starts from the (weighted) average of the component quantiles, the
    root itself for identical components and close to it where they
    overlap. Each iteration
    evaluates the T component CDFs and densities once; Newton converges
    quadratically near the root, so a handful of iterations reach the
    tolerance where bisection needs one per bit (50-60).

    Parameters
    ----------
    prob : float
        Probability level in (0, 1).
    loc, scale : ndarray of shape (T, ...)
        Components' locations and scales (> 0), components on the first axis.
    df : ndarray of shape (T, ...) or None, default=None
        Degrees of freedom (> 0) of Student-t components; None for Gaussian
        components.
    rtol : float, default=1e-8
        Iterations stop where Newton's step is at most ``rtol`` times the
        components' mean scale (scipy's Student-t CDF is accurate to about
        1e-10, which bounds what any root finder can resolve).
    max_iter : int, default=100
        Most iterations (each at least halves the bracket when Newton's step
        is rejected, so 100 reach the float64 resolution of any bracket).
    weights : ndarray of shape (T,) or None, default=None
        Component weights (>= 0, summing to 1); None for the uniform mixture.
        Components below 1e-10 of the largest weight do not bound the root
        (they move F by less than that).

    Returns
    -------
    quantile : ndarray of shape (...)
        y with F(y) = ``prob``.
    """
    loc, scale = np.asarray(loc, dtype=float), np.asarray(scale, dtype=float)
    shape = loc.shape[1:]
    loc, scale = loc.reshape(len(loc), -1), scale.reshape(len(scale), -1)  # (T, m): one column per mixture
    if weights is not None:  # a component of no weight does not bound the root
        keep = np.asarray(weights, dtype=float) > 0
        weights = np.asarray(weights, dtype=float)[keep]
        loc, scale = loc[keep], scale[keep]
        if df is not None:
            df = np.broadcast_to(np.asarray(df, dtype=float), (len(keep), *shape))[keep]
    if df is not None:
        df = np.broadcast_to(np.asarray(df, dtype=float), shape=(len(loc), *shape)).reshape(loc.shape)
    # From here on one row per mixture, its T components along the row: the sums over the components run
    # row by row (numpy's pairwise sum of a contiguous row), so a mixture's quantile does not depend on the
    # other mixtures of the call, e.g. on the block of rows it is predicted in, not even in the last bit.
    loc, scale = np.ascontiguousarray(loc.T), np.ascontiguousarray(scale.T)  # (m, T)
    if df is None:
        quantiles = loc + scale * ndtri(prob)
        columns = (loc, scale)
    else:
        df = np.ascontiguousarray(df.T)
        per_component = df[:1] if (df == df[:1]).all() else df  # one df per component: one quantile each
        quantiles = loc + scale * stdtrit(per_component, prob)
        # Student-t density: Gamma((v+1)/2) / (Gamma(v/2) sqrt(v pi)) (1 + z^2/v)^(-(v+1)/2)
        log_norm = gammaln(0.5 * (per_component + 1)) - gammaln(0.5 * per_component) - 0.5 * np.log(per_component * np.pi)
        log_norm = np.broadcast_to(log_norm, loc.shape)
        columns = (loc, scale, df, log_norm)

    def average(values):  # over the components, (m', T) -> (m',), each row's pairwise sum: C order needed
        values = np.ascontiguousarray(values)
        return values.mean(axis=1) if weights is None else (values * weights).sum(axis=1)

    def excess_and_density(y, loc, scale, df=None, log_norm=None):
        z = (y[:, None] - loc) / scale
        if df is None:
            cdf, pdf = ndtr(z), np.exp(-0.5 * z * z) / np.sqrt(2 * np.pi)
        else:
            cdf, pdf = stdtr(df, z), np.exp(log_norm - 0.5 * (df + 1) * np.log1p(z * z / df))
        return average(cdf) - prob, average(pdf / scale)

    tol = rtol * average(scale)
    if weights is None:
        low, high = quantiles.min(axis=1), quantiles.max(axis=1)
        y = quantiles.mean(axis=1)
    else:
        # components below 1e-10 of the largest weight move F by less than that: they do not bound the root
        # (a scale mixture's widest components have vanishing weight and scales of 1e10 and more)
        heavy = weights >= 1e-10 * weights.max()
        bounding = np.ascontiguousarray(quantiles[:, heavy])  # a column mask gives Fortran order
        low, high = bounding.min(axis=1), bounding.max(axis=1)
        y = (bounding * weights[heavy]).sum(axis=1) / weights[heavy].sum()
    # inside the bracket, also where the average rounds outside it (identical components)
    y = np.clip(y, low, high)
    active = np.arange(y.size)  # the mixtures not converged yet
    for _ in range(max_iter):
        y_a, low_a, high_a = y[active], low[active], high[active]
        excess, density = excess_and_density(y_a, *(c[active] for c in columns))
        below = excess < 0
        low_a, high_a = np.where(below, y_a, low_a), np.where(below, high_a, y_a)
        with np.errstate(divide="ignore", invalid="ignore"):
            newton = y_a - excess / density
        done = (np.abs(newton - y_a) <= tol[active]) | (excess == 0)
        inside = (newton >= low_a) & (newton <= high_a)
        y[active] = np.where(done | inside, np.where(excess == 0, y_a, newton), 0.5 * (low_a + high_a))
        low[active], high[active] = low_a, high_a
        active = active[~done]
        if not active.size:
            break
    return y.reshape(shape)


def student_t_scale_mixture(df, n_nodes=100, power=8.0):
    r"""Precisions and weights of the Student-t as a scale mixture of Gaussians.

    St(e | 0, sigma, nu) = E_lambda[N(e | 0, sigma^2 / lambda)] with lambda ~
    Gamma(nu / 2, rate nu / 2) ([Lange1989]_, section 2), so an expectation
    over the t is a weighted sum over precisions, E[g(lambda)] ~= sum_j W_j
    g(lambda_j). The expectation is an integral over the Gamma law's
    probability q in (0, 1), lambda = (2 / nu) P^{-1}(nu / 2, q) (the
    inverse regularised incomplete gamma function), with
    q = v^p / (v^p + (1 - v)^p) and Gauss-Legendre nodes in v
    ([Abramowitz1964]_, eq. 25.4.29): the power p clusters the nodes at both
    ends of q, the small precisions (the t's tails) and the large ones.
    The weights are normalised to sum to 1.

    With the defaults the density of the t is reproduced to a relative
    1e-7 out to 30 scales for nu < 30 and to 1e-12 out to 10 scales for
    any nu (checked against scipy in the tests). The mixture's variance
    sum_j W_j / lambda_j is accurate for nu >= 3 but falls short of
    nu / (nu - 2) as nu approaches 2, where the variance lies in the
    farthest tails: use the closed form for moments.

    Parameters
    ----------
    df : float
        Degrees of freedom nu > 2 (> 0 suffices for the density).
    n_nodes : int, default=100
    power : float, default=8.0

    Returns
    -------
    precision, weights : ndarray of shape (n_nodes,)
    """
    v, w = leggauss(n_nodes)
    v, w = 0.5 * (v + 1.0), 0.5 * w
    low, high = v**power, (1.0 - v) ** power
    q, q_upper = low / (low + high), high / (low + high)  # q and 1 - q, each accurate where it is small
    shape = 0.5 * float(df)
    x = np.where(q < 0.5, gammaincinv(shape, q), gammainccinv(shape, q_upper))
    weights = w * power * (v * (1.0 - v)) ** (power - 1.0) / (low + high) ** 2  # w dq/dv
    return 2.0 * x / float(df), weights / weights.sum()


def map_inverse(q, knots, values):
    """Generalised inverse R^{-1}(q) = min {p : R(p) >= q} of a piecewise-linear map.

    Parameters
    ----------
    q : ndarray
        Levels in [0, 1].
    knots, values : ndarray of shape (n_knots,)
        The map's knots p_j (increasing) and values r_j (non-decreasing).

    Returns
    -------
    p : ndarray of the shape of q
        Linear between knots; on a flat part of R (r_j = r_{j+1}) the
        smallest p, so that F^{-1}(R^{-1}(q)) is the left-continuous quantile
        of the recalibrated distribution.
    """
    q = np.clip(q, values[0], values[-1])
    # first knot with r_j >= q; q lies in (r_{j-1}, r_j] after the last knot of a flat part at r_{j-1}
    j = np.clip(np.searchsorted(values, q, side="left"), 1, len(values) - 1)
    r0, r1, p0, p1 = values[j - 1], values[j], knots[j - 1], knots[j]
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = np.where(r1 > r0, (q - r0) / (r1 - r0), 1.0)
    return np.where(q <= values[0], knots[0], p0 + frac * (p1 - p0))


def map_slope(p, knots, values):
    """Derivative R'(p) of a piecewise-linear map (the right derivative at a knot).

    Parameters
    ----------
    p : ndarray
        Points in [knots[0], knots[-1]].
    knots, values : ndarray of shape (n_knots,)

    Returns
    -------
    slope : ndarray of the shape of p
        (r_{j+1} - r_j) / (p_{j+1} - p_j) on [p_j, p_{j+1}).
    """
    j = np.clip(np.searchsorted(knots, p, side="right") - 1, 0, len(knots) - 2)
    return (values[j + 1] - values[j]) / (knots[j + 1] - knots[j])


def _per_row(a, like):
    """A per-row array of shape (n,) reshaped to broadcast against ``like`` of shape (n,) or (n, m)."""
    return a.reshape(a.shape + (1,) * (np.ndim(like) - 1))


class GaussianPredictive:
    """N(mean_i, std_i^2) for each row.

    Parameters
    ----------
    mean, std : ndarray of shape (n,)
        Predictive means and standard deviations (> 0), in the units of y.
    """

    def __init__(self, mean, std):
        self.mean, self.std = mean, std

    def cdf(self, y):
        """F_i(y) = Phi((y - mean_i) / std_i) for y of shape (n,) or (n, m)."""
        return ndtr((y - _per_row(self.mean, y)) / _per_row(self.std, y))

    def ppf(self, level):
        """F_i^{-1}(level) = mean_i + std_i Phi^{-1}(level) for levels of shape (n,) or (n, m)."""
        return _per_row(self.mean, level) + _per_row(self.std, level) * ndtri(level)

    def logpdf(self, y):
        """log N(y_i | mean_i, std_i^2) for y of shape (n,), in nats."""
        return norm.logpdf(y, self.mean, self.std)

    def recalibrated_moments(self, knots, values):
        r"""Mean and variance of the distribution with CDF R(F_i(y)), in closed form.

        With V = F_i(Y) = Phi(Z), the level V has density R'(v) = s_j on
        [p_j, p_{j+1}), so with z_j = Phi^{-1}(p_j) and the antiderivatives
        int Phi^{-1}(v) dv = -phi(Phi^{-1}(v)) and
        int z^2 phi(z) dz = Phi(z) - z phi(z):

        .. math::

            E[Z] = \sum_j s_j (\phi(z_j) - \phi(z_{j+1})), \quad
            E[Z^2] = \sum_j s_j \left(p_{j+1} - p_j - z_{j+1}\phi(z_{j+1}) + z_j\phi(z_j)\right),

        and Y = mean_i + std_i Z.

        Parameters
        ----------
        knots, values : ndarray of shape (n_knots,)
            The map R (knots from 0 to 1).

        Returns
        -------
        mean, var : ndarray of shape (n,)
        """
        z = ndtri(knots)
        phi = norm.pdf(z)  # 0 at z = -inf, +inf
        z_phi = np.where(np.isfinite(z), z, 0.0) * phi
        slope = np.diff(values) / np.diff(knots)
        e_z = np.sum(slope * -np.diff(phi))
        e_z2 = np.sum(slope * (np.diff(knots) - np.diff(z_phi)))
        return self.mean + self.std * e_z, self.std**2 * max(e_z2 - e_z**2, 0.0)


class DrawsPredictive:
    """The distribution of S draws from each row's predictive.

    Its CDF interpolates the sorted draws y_(1) <= ... <= y_(S) linearly at
    the levels (j - 1/2) / S and is constant beyond the extreme draws (so
    its levels lie in [1/(2S), 1 - 1/(2S)]); its quantile function is the
    inverse interpolation, clamped to [y_(1), y_(S)].

    Parameters
    ----------
    draws : ndarray of shape (n, S)
        Draws of y for each row (S >= 2), in any order.
    """

    def __init__(self, draws):
        self.draws = np.sort(draws, axis=1)

    def cdf(self, y):
        """Interpolated empirical CDF at y of shape (n,) or (n, m)."""
        d, n_draws = self.draws, self.draws.shape[1]
        y2 = y.reshape(len(y), -1)
        count = np.stack([np.searchsorted(row, at, side="right") for row, at in zip(d, y2)])  # (n, m): draws <= y
        lo, hi = np.clip(count - 1, 0, n_draws - 1), np.clip(count, 0, n_draws - 1)
        d_lo, d_hi = np.take_along_axis(d, lo, 1), np.take_along_axis(d, hi, 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            frac = np.where(d_hi > d_lo, np.clip((y2 - d_lo) / (d_hi - d_lo), 0.0, 1.0), 0.0)
        return ((lo + frac + 0.5) / n_draws).reshape(y.shape)

    def ppf(self, level):
        """Interpolated quantile of the draws at levels of shape (n,) or (n, m)."""
        d, n_draws = self.draws, self.draws.shape[1]
        level2 = level.reshape(len(level), -1)
        position = np.clip(level2 * n_draws - 0.5, 0.0, n_draws - 1.0)
        j = np.minimum(np.floor(position).astype(int), n_draws - 2)
        d0, d1 = np.take_along_axis(d, j, 1), np.take_along_axis(d, j + 1, 1)
        return (d0 + (position - j) * (d1 - d0)).reshape(level.shape)

    def recalibrated_moments(self, knots, values):
        """Mean and variance of the distribution with CDF R(F_i(y)), by the midpoint rule.

        The mean is int_0^1 F_i^{-1}(R^{-1}(u)) du, estimated on the S
        midpoints u = (j - 1/2) / S (the quantile function is bounded by the
        extreme draws); the variance likewise.

        Parameters
        ----------
        knots, values : ndarray of shape (n_knots,)

        Returns
        -------
        mean, var : ndarray of shape (n,)
        """
        n, n_draws = self.draws.shape
        levels = map_inverse((np.arange(n_draws) + 0.5) / n_draws, knots, values)
        quantiles = self.ppf(np.broadcast_to(levels, (n, n_draws)))
        return quantiles.mean(axis=1), quantiles.var(axis=1)


# Gauss-Hermite nodes and weights for the moments of ModelPredictive (probabilists' weight exp(-z^2 / 2)).
_N_MOMENT_NODES = 32


class ModelPredictive:
    r"""A fitted regressor's own predictive distribution of y, for each row of X.

    Its CDF, quantiles and log density are the regressor's ``predict_cdf``,
    ``predict_quantiles`` and ``log_predictive_density`` (those of the
    final step of a :class:`~sklearn.pipeline.Pipeline`, after its
    transformers): for the skbayes regressors one distribution (the
    Gaussian, or the mixture over weight draws, kept samples or members)
    whose three functions agree.

    Parameters
    ----------
    regressor : fitted regressor
        With ``predict_cdf(X, y)`` and ``predict_quantiles(X, quantiles)``
        (and ``log_predictive_density(X, y)`` for :meth:`logpdf`), each
        giving one output.
    X : array-like of shape (n, n_features)
        The rows, as ``regressor`` takes them (already transformed).
    """

    def __init__(self, regressor, X):
        self.regressor, self.X = regressor, X

    def _rows(self, values):
        values = np.asarray(values, dtype=np.float64)
        if values.ndim == 2 and values.shape[1] == 1:
            values = values[:, 0]
        return values

    def cdf(self, y):
        """F_i(y) by ``predict_cdf``, for y of shape (n,) or (n, m) (one call per column)."""
        y = np.asarray(y, dtype=np.float64)
        if y.ndim == 1:
            return self._rows(self.regressor.predict_cdf(self.X, y))
        return np.stack([self._rows(self.regressor.predict_cdf(self.X, column)) for column in y.T], axis=1)

    def ppf(self, level):
        """F_i^{-1}(level) by ``predict_quantiles``, for levels of shape (n,) or (n, m).

        Levels shared by all rows (the recalibrated levels R^{-1}(q) are) take
        one call; others one call per row. Levels are kept in [1e-300, 1 - 1e-16].
        """
        level = np.clip(np.asarray(level, dtype=np.float64), 1e-300, 1.0 - 1e-16)
        flat = level.reshape(len(level), -1)
        if np.all(flat == flat[:1]):
            quantiles = np.asarray(self.regressor.predict_quantiles(self.X, flat[0]), dtype=np.float64)
        else:
            quantiles = np.concatenate([
                np.asarray(self.regressor.predict_quantiles(self.X[i:i + 1], row), dtype=np.float64)
                for i, row in enumerate(flat)
            ])
        return quantiles.reshape(level.shape)

    def logpdf(self, y):
        """log f_i(y_i) by ``log_predictive_density``, y of shape (n,), in nats."""
        return np.asarray(self.regressor.log_predictive_density(self.X, y), dtype=np.float64)

    def recalibrated_moments(self, knots, values):
        r"""Mean and variance of the distribution with CDF R(F_i(y)), by Gauss-Hermite quadrature.

        The recalibrated quantile function is Q(u) = F_i^{-1}(R^{-1}(u))
        ([Kuleshov2018]_, section 3.2), so with u = Phi(z)

        .. math::

            \mathbb{E}[Y] = \int_0^1 Q(u) \, du = \int Q(\Phi(z)) \varphi(z) \, dz
            \approx \sum_k w_k Q(\Phi(z_k)),

        and likewise the variance, with the 32 Gauss-Hermite nodes z_k and
        weights w_k of the weight phi ([Abramowitz1964]_, eq. 25.4.46),
        exact for a Gaussian base that R leaves unchanged. (The midpoint
        rule of :class:`DrawsPredictive` would need hundreds of levels, each
        a root search of the base's mixture CDF.) Heavy tails (Student-t
        components with few degrees of freedom) make the variance, a far-tail
        integral, approximate.

        Parameters
        ----------
        knots, values : ndarray of shape (n_knots,)

        Returns
        -------
        mean, var : ndarray of shape (n,)
        """
        z, w = np.polynomial.hermite_e.hermegauss(_N_MOMENT_NODES)
        w = w / w.sum()
        levels = map_inverse(ndtr(z), knots, values)
        quantiles = self.ppf(np.broadcast_to(levels, (self.X.shape[0], levels.size)))
        mean = quantiles @ w
        return mean, ((quantiles - mean[:, None]) ** 2) @ w


class MixturePredictive:
    r"""The uniform mixture (1/T) sum_t p_t(y) of Gaussian or Student-t components, for each row.

    With ``weights`` the mixture is sum_t w_t p_t(y) instead (e.g. the
    Student-t noise of a GP as a scale mixture of Gaussians,
    sum_j W_j N(y | mu, s^2 + sigma^2 / lambda_j), see
    :func:`student_t_scale_mixture`), and every mean over the components
    below (1/T sum_t) is the weighted one (sum_t w_t).

    Component t of row i is N(loc_ti, scale_ti^2), or the Student-t with
    df_ti degrees of freedom, location loc_ti and scale scale_ti. Its
    variance v_ti (scale^2, or scale^2 df / (df - 2)) splits into a latent
    part (``latent_var``: the uncertainty about f, e.g. a GP's posterior
    variance at x) and noise. The mixture's variance is then, by the law of
    total variance (Gal 2016, section 3.3.1; Salimbeni & Deisenroth 2017,
    eq. 12), Var_t[loc_t] + mean_t[latent_t] (epistemic) + mean_t[v_t -
    latent_t] (aleatoric).

    Parameters
    ----------
    loc, scale : ndarray of shape (T, n) or (T, n, k)
        Component locations and scales (> 0), components on the first axis.
    df : ndarray broadcastable to ``loc``, or None, default=None
        Student-t degrees of freedom (> 2 for a finite variance); None for
        Gaussian components.
    latent_var : ndarray broadcastable to ``loc`` or float, default=0.0
        The epistemic part of each component's variance.
    weights : ndarray of shape (T,) or None, default=None
        Component weights (>= 0, summing to 1), shared by the rows; None for
        the uniform mixture.

    Raises
    ------
    ValueError
        If ``weights`` is not of shape (T,), has a negative entry or does
        not sum to 1 (to 1e-8).
    """

    def __init__(self, loc, scale, df=None, latent_var=0.0, weights=None):
        self.loc, self.scale = np.asarray(loc, dtype=float), np.asarray(scale, dtype=float)
        self.df = None if df is None else np.broadcast_to(np.asarray(df, dtype=float), self.loc.shape)
        self.latent_var = np.broadcast_to(np.asarray(latent_var, dtype=float), self.loc.shape)
        self.weights = None if weights is None else np.asarray(weights, dtype=float)
        if self.weights is not None and (
            self.weights.shape != (self.loc.shape[0],) or np.any(self.weights < 0)
            or abs(self.weights.sum() - 1.0) > 1e-8
        ):
            raise ValueError(
                f"weights must be {self.loc.shape[0]} non-negative numbers summing to 1, one per component; got "
                f"shape {self.weights.shape}, sum {self.weights.sum():.6g}."
            )

    def _average(self, values):
        """The (weighted) mean over the components of ``values`` (T, ...)."""
        if self.weights is None:
            return values.mean(axis=0)
        return np.tensordot(self.weights, values, axes=1)

    @property
    def n_components(self):
        """T, the number of components."""
        return self.loc.shape[0]

    def mean(self):
        """Mixture mean, shape (n,) or (n, k)."""
        return self._average(self.loc)

    def component_variance(self):
        """Variance of every component, shape (T, n) or (T, n, k)."""
        if self.df is None:
            return self.scale**2
        return self.scale**2 * self.df / (self.df - 2)

    def epistemic_variance(self):
        """Var_t[loc_t] + mean_t[latent_t], shape (n,) or (n, k)."""
        if self.weights is None:
            return self.loc.var(axis=0) + self.latent_var.mean(axis=0)
        return self._average((self.loc - self.mean()) ** 2) + self._average(self.latent_var)

    def aleatoric_variance(self):
        """mean_t[v_t - latent_t], shape (n,) or (n, k)."""
        return self._average(self.component_variance() - self.latent_var)

    def variance(self):
        """The mixture's variance: epistemic plus aleatoric."""
        return self.epistemic_variance() + self.aleatoric_variance()

    def _component_logpdf(self, y):
        if self.df is None:
            return norm.logpdf(y, self.loc, self.scale)
        return t.logpdf(y, self.df, self.loc, self.scale)

    def logpdf(self, y):
        """log (1/T) sum_t p_t(y) in nats (log sum_t w_t p_t(y) with weights), y of one component's loc's shape."""
        component = self._component_logpdf(np.asarray(y, dtype=float))
        if self.weights is None:
            return logsumexp(component, axis=0) - np.log(self.n_components)
        return logsumexp(component, axis=0, b=self.weights.reshape((-1,) + (1,) * (component.ndim - 1)))

    def cdf(self, y):
        """(1/T) sum_t F_t(y) (sum_t w_t F_t(y) with weights), for y of the shape of one component's loc."""
        z = (np.asarray(y, dtype=float) - self.loc) / self.scale
        return self._average(ndtr(z) if self.df is None else stdtr(self.df, z))

    def ppf(self, levels):
        """Quantiles at ``levels`` (1-D, in (0, 1)), on a last axis: shape (n, n_levels) or (n, k, n_levels).

        By :func:`mixture_quantile` (Newton's method on the mixture's CDF,
        safeguarded by bisection).
        """
        return np.stack(
            [mixture_quantile(q, self.loc, self.scale, self.df, weights=self.weights) for q in levels], axis=-1
        )

    def sample(self, n_draws, random_state):
        """``n_draws`` draws of y per row: a component chosen (uniformly, or by weight), then its noise.

        Parameters
        ----------
        n_draws : int
        random_state : numpy.random.RandomState

        Returns
        -------
        y : ndarray of shape (n_draws, n) or (n_draws, n, k)
            Each draw picks one component for all rows (with probability
            ``weights``, if any).
        """
        if self.weights is None:
            index = random_state.randint(self.n_components, size=n_draws)
        else:
            index = random_state.choice(self.n_components, size=n_draws, p=self.weights)
        loc, scale = self.loc[index], self.scale[index]
        if self.df is None:
            return loc + scale * random_state.standard_normal(loc.shape)
        return loc + scale * random_state.standard_t(self.df[index])
