"""Scoring rules and calibration diagnostics for regression (see skbayes.metrics)."""

import numpy as np
from scipy.special import ndtr
from scipy.stats import norm

from .._docstrings import fill_doc
from ._validation import (
    _INV_SQRT_PI,
    _as_2d,
    _as_float_array,
    _check_coverage,
    _check_interval,
    _check_n,
    _check_regression,
    _check_std,
)


@fill_doc
def gaussian_nll(y_true, y_pred, *, y_std):
    r"""Mean negative log-likelihood of a Gaussian predictive distribution.

    .. math::

        \mathrm{NLL} = \frac{1}{N} \sum_{i} \left[ \tfrac12 \log(2\pi\sigma_i^2)
        + \frac{(y_i - \mu_i)^2}{2\sigma_i^2} \right]

    the logarithmic score of [1]_ (strictly proper), averaged over all N
    entries (samples times outputs).

    Parameters
    ----------
    %(y_true)s
    %(y_pred)s
    y_std : array-like of the shape of y_true, or float
        Predictive standard deviations sigma > 0, in the units of y (a scalar
        for one shared sigma).

    Returns
    -------
    nll : float
        Nats per entry; lower is better. It can be negative (a density can
        exceed 1) and it changes by ``log(c)`` when y is rescaled by c.

    %(gaussian_raises)s

    References
    ----------
    %(ref_gneiting2007)s
    """
    y_true, y_pred, y_std = _check_regression(y_true, y_pred, y_std)
    return float(-np.mean(norm.logpdf(y_true, loc=y_pred, scale=y_std)))


@fill_doc
def crps_gaussian(y_true, y_pred, *, y_std):
    r"""Mean continuous ranked probability score of Gaussian predictions.

    The CRPS of a predictive CDF F at y is
    :math:`\int (F(x) - 1\{x \ge y\})^2 dx = E|X - y| - \tfrac12 E|X - X'|`
    with X, X' independent draws from F. For F = N(mu, sigma^2) it has the
    closed form ([1]_, eq. 21)

    .. math::

        \mathrm{CRPS} = \sigma \left[ z (2\Phi(z) - 1) + 2\varphi(z)
        - \frac{1}{\sqrt{\pi}} \right], \qquad z = \frac{y - \mu}{\sigma},

    with Phi and phi the standard normal CDF and density. Averaged over all
    entries.

    Parameters
    ----------
    %(gaussian_predictions)s

    Returns
    -------
    crps : float
        Non-negative, in the units of y; lower is better. It reduces to the
        absolute error as sigma -> 0.

    %(gaussian_raises)s

    See Also
    --------
    crps_ensemble : The CRPS from samples of any predictive distribution.

    References
    ----------
    %(ref_gneiting2007)s
    """
    y_true, y_pred, y_std = _check_regression(y_true, y_pred, y_std)
    z = (y_true - y_pred) / y_std
    pdf = np.exp(-0.5 * z**2) / np.sqrt(2.0 * np.pi)
    crps = y_std * (z * (2.0 * ndtr(z) - 1.0) + 2.0 * pdf - _INV_SQRT_PI)
    return float(np.mean(crps))


@fill_doc
def crps_ensemble(y_true, y_samples, *, fair=True):
    r"""Mean CRPS estimated from samples of the predictive distribution.

    With m samples :math:`x_1, \dots, x_m` for an observation y,

    .. math::

        \mathrm{CRPS} = \frac{1}{m} \sum_{j} |x_j - y|
        - \frac{1}{2 D} \sum_{j} \sum_{l} |x_j - x_l|,

    where D = m(m - 1) for the fair estimator ([1]_, [2]_), unbiased for the
    CRPS of the distribution the samples come from, and D = m^2 for the CRPS
    of the empirical distribution of the samples, which overestimates the
    former by :math:`E|X - X'| / (2m)`. The pair sum is computed in
    O(m log m) per entry from the sorted samples,
    :math:`\sum_{j,l} |x_j - x_l| = 2 \sum_{j=1}^m (2j - m - 1) x_{(j)}`.
    Averaged over all entries.

    Parameters
    ----------
    %(y_true)s
    y_samples : array-like of shape (n_samples, m) or (n_samples, n_outputs, m)
        m draws per entry, samples on the last axis (the ``sample_y``
        convention of scikit-learn's ``GaussianProcessRegressor``).
    fair : bool, default=True
        Use the unbiased (fair) estimator with D = m(m - 1); needs m >= 2.

    Returns
    -------
    crps : float
        Non-negative (both estimators), in the units of y; lower is better.

    Raises
    ------
    ValueError
        If y_samples does not have one axis more than y_true with matching
        leading dimensions, an input holds NaN or inf, or fair=True with
        m < 2.

    See Also
    --------
    crps_gaussian : Closed form for Gaussian predictions.

    References
    ----------
    .. [1] C. A. T. Ferro, "Fair scores for ensemble forecasts", QJRMS
       140(683), 1917-1923, 2014.
    .. [2] M. Zamo and P. Naveau, "Estimation of the continuous ranked
       probability score with limited information and applications to
       ensemble weather forecasts", Mathematical Geosciences 50(2), 209-234,
       2018.
    """
    y_true = _as_float_array(y_true, "y_true")
    y_samples = _as_float_array(y_samples, "y_samples", allow_nd=True)
    shapes = f"{y_true.shape} and {y_samples.shape}"
    y_true = _as_2d(y_true)
    if y_samples.ndim == 2:
        y_samples = y_samples[:, None, :]
    if y_samples.shape[:2] != y_true.shape:
        raise ValueError(
            "y_samples must have shape (n_samples, m) or (n_samples, n_outputs, m) "
            f"matching y_true; got shapes {shapes}."
        )
    m = y_samples.shape[-1]
    if fair and m < 2:
        raise ValueError(f"The fair CRPS estimator needs at least 2 samples per entry; got {m}.")
    abs_error = np.mean(np.abs(y_samples - y_true[..., None]), axis=-1)
    weights = 2.0 * np.arange(1, m + 1) - m - 1.0
    pair_sum = 2.0 * (np.sort(y_samples, axis=-1) @ weights)
    denominator = m * (m - 1) if fair else m * m
    return float(np.mean(abs_error - pair_sum / (2.0 * denominator)))


@fill_doc
def interval_coverage(y_true, lower, upper):
    """Fraction of observations inside their predictive interval.

    The empirical coverage ``mean(lower <= y_true <= upper)`` over all
    entries, to compare with the nominal coverage of the intervals.

    Parameters
    ----------
    %(y_true)s
    %(lower_upper)s

    Returns
    -------
    coverage : float
        In [0, 1]; closed intervals, so an observation on a bound counts.

    Raises
    ------
    ValueError
        If the shapes differ, an input holds NaN or inf, or lower > upper
        anywhere.

    References
    ----------
    %(ref_gneiting2007)s
    """
    y_true, lower, upper = _check_interval(y_true, lower, upper)
    return float(np.mean((lower <= y_true) & (y_true <= upper)))


@fill_doc
def interval_coverage_error(y_true, lower, upper, *, coverage=0.95):
    r"""Absolute gap between the empirical and the nominal coverage of intervals.

    ``|interval_coverage(y_true, lower, upper) - coverage|``: 0 when the
    intervals cover exactly the nominal fraction of the observations, up to
    sampling noise of order :math:`\sqrt{c (1 - c) / N}`. Like
    :func:`interval_coverage` it ignores the width of the intervals (a
    diagnostic, not a proper scoring rule: pair it with
    :func:`mean_interval_width` or use :func:`interval_score`).

    Parameters
    ----------
    %(y_true)s
    %(lower_upper)s
    coverage : float, default=0.95
        Nominal coverage c of the intervals, in (0, 1).

    Returns
    -------
    error : float
        In [0, max(c, 1 - c)] (a difference of probabilities); lower is
        better.

    Raises
    ------
    ValueError
        If the shapes differ, an input holds NaN or inf, lower > upper
        anywhere, or coverage is not in (0, 1).
    """
    coverage = _check_coverage(coverage)
    return abs(interval_coverage(y_true, lower, upper) - coverage)


def mean_interval_width(lower, upper):
    """Mean width ``upper - lower`` of predictive intervals.

    Parameters
    ----------
    lower, upper : array-like of shape (n_samples,) or (n_samples, n_outputs)
        Interval bounds, ``lower <= upper``.

    Returns
    -------
    width : float
        Non-negative, in the units of y; narrower is sharper (at equal
        coverage).

    Raises
    ------
    ValueError
        If the shapes differ, an input holds NaN or inf, or lower > upper
        anywhere.
    """
    _, lower, upper = _check_interval(None, lower, upper)
    return float(np.mean(upper - lower))


@fill_doc
def interval_score(y_true, lower, upper, *, coverage=0.95):
    r"""Mean interval score of central predictive intervals.

    For the central interval [l, u] with nominal coverage 1 - alpha ([1]_,
    eq. 43),

    .. math::

        S_\alpha(l, u; y) = (u - l) + \frac{2}{\alpha} (l - y)_+
        + \frac{2}{\alpha} (y - u)_+,

    a proper scoring rule, minimised in expectation by the alpha/2 and
    1 - alpha/2 quantiles of the predictive distribution: it rewards narrow
    intervals and penalises misses in proportion to their distance.
    Averaged over all entries.

    Parameters
    ----------
    %(y_true)s
    %(lower_upper)s
    coverage : float, default=0.95
        Nominal coverage 1 - alpha of the intervals, in (0, 1).

    Returns
    -------
    score : float
        Non-negative, in the units of y; lower is better.

    Raises
    ------
    ValueError
        If the shapes differ, an input holds NaN or inf, lower > upper
        anywhere, or coverage is not in (0, 1).

    References
    ----------
    %(ref_gneiting2007)s
    """
    alpha = 1.0 - _check_coverage(coverage)
    y_true, lower, upper = _check_interval(y_true, lower, upper)
    below = np.maximum(lower - y_true, 0.0)
    above = np.maximum(y_true - upper, 0.0)
    return float(np.mean((upper - lower) + (2.0 / alpha) * (below + above)))


_CALIBRATION_METHODS = ("quantile", "central")


def _calibration_scores(y_true, y_pred, y_std, method):
    """Per-entry level at which the observation enters the predictive set.

    ``"quantile"``: the PIT value F(y) = Phi(z); ``"central"``: the smallest
    central-interval coverage containing y, 2 Phi(|z|) - 1. Both are
    Uniform(0, 1) when the Gaussian predictions are calibrated.
    """
    if method not in _CALIBRATION_METHODS:
        raise ValueError(f"method must be one of {_CALIBRATION_METHODS}; got {method!r}.")
    y_true, y_pred, y_std = _check_regression(y_true, y_pred, y_std)
    z = ((y_true - y_pred) / y_std).ravel()
    return ndtr(z) if method == "quantile" else 2.0 * ndtr(np.abs(z)) - 1.0


def _expected_levels(n_levels):
    n_levels = _check_n(n_levels, "n_levels", 1)
    return (np.arange(n_levels) + 0.5) / n_levels


@fill_doc
def regression_calibration_curve(y_true, y_pred, *, y_std, n_levels=20, method="quantile"):
    r"""Calibration curve of Gaussian regression predictions.

    For each expected level p, the observed fraction of observations inside
    the level-p predictive set:

    * ``method="quantile"`` ([1]_): the fraction with
      :math:`F_i(y_i) \le p`, F_i the predictive CDF N(mu_i, sigma_i^2), i.e.
      below the predicted p-quantile;
    * ``method="central"``: the fraction inside the central interval
      :math:`\mu_i \pm \Phi^{-1}((1 + p)/2) \sigma_i` of coverage p.

    Calibrated predictions give observed = expected (the diagonal); a curve
    below the diagonal for ``"central"`` means over-confident (too narrow)
    intervals. Multi-output entries are pooled.

    Parameters
    ----------
    %(gaussian_predictions)s
    n_levels : int, default=20
        Number of levels, the midpoints ``(j + 0.5) / n_levels`` of an even
        grid on (0, 1).
    %(calibration_method)s

    Returns
    -------
    expected : ndarray of shape (n_levels,)
        The nominal levels p, increasing.
    observed : ndarray of shape (n_levels,)
        The observed fractions, in [0, 1].

    %(calibration_raises)s

    See Also
    --------
    regression_calibration_error, miscalibration_area

    References
    ----------
    %(ref_kuleshov2018)s
    """
    expected = _expected_levels(n_levels)
    scores = np.sort(_calibration_scores(y_true, y_pred, y_std, method))
    return expected, _observed_fractions(scores, expected)


def _observed_fractions(scores, expected):
    """Fraction of the sorted calibration ``scores`` at or below each level of ``expected``."""
    return np.searchsorted(scores, expected, side="right") / scores.size


@fill_doc
def regression_calibration_error(y_true, y_pred, *, y_std, n_levels=20, method="quantile"):
    r"""Root-mean-squared calibration error of Gaussian regression predictions.

    .. math::

        \mathrm{CE} = \sqrt{\frac{1}{L} \sum_{j=1}^{L} (\hat p_j - p_j)^2}

    over the L levels p_j of :func:`regression_calibration_curve`, with
    observed fractions :math:`\hat p_j`: the (unweighted, square-rooted)
    calibration error of [1]_. It is 0 for perfectly calibrated predictions
    up to sampling noise of order :math:`1/\sqrt{N}` and it ignores
    sharpness, so it is a diagnostic, not a proper scoring rule.

    Parameters
    ----------
    %(gaussian_predictions)s
    n_levels : int, default=20
        Number of levels.
    %(calibration_method)s

    Returns
    -------
    error : float
        In [0, 1] (a difference of probabilities); lower is better.

    %(calibration_raises)s

    See Also
    --------
    miscalibration_area : The L1 area between curve and diagonal.

    References
    ----------
    %(ref_kuleshov2018)s
    """
    expected, observed = regression_calibration_curve(
        y_true, y_pred, y_std=y_std, n_levels=n_levels, method=method
    )
    return float(np.sqrt(np.mean((observed - expected) ** 2)))


@fill_doc
def miscalibration_area(y_true, y_pred, *, y_std, method="quantile"):
    r"""Area between the regression calibration curve and the diagonal.

    .. math::

        A = \int_0^1 |\hat F(p) - p| \, dp,

    where :math:`\hat F(p)` is the observed fraction at level p of
    :func:`regression_calibration_curve`, a step function of p. The integral
    is computed exactly (no level grid): it is the Wasserstein-1 distance
    between the empirical distribution of the PIT values
    :math:`\Phi((y_i - \mu_i)/\sigma_i)` (``"quantile"``) or of the central
    levels :math:`2\Phi(|z_i|) - 1` (``"central"``) and Uniform(0, 1).

    Parameters
    ----------
    %(gaussian_predictions)s
    %(calibration_method)s

    Returns
    -------
    area : float
        In [0, 1/2]; lower is better.

    Raises
    ------
    ValueError
        If the shapes differ, an input holds NaN or inf, y_std <= 0 or
        method is unknown.

    References
    ----------
    %(ref_kuleshov2018)s
    """
    return _area_between(np.sort(_calibration_scores(y_true, y_pred, y_std, method)))


def _area_between(scores):
    """Exact area between the diagonal and the step curve of the sorted calibration ``scores``."""
    n = scores.size
    # On [t_i, t_{i+1}) the observed fraction is the constant c_i = i / n, and
    # int_a^b |p - c| dp = G(b) - G(a) with G(t) = (t - c) |t - c| / 2.
    knots = np.concatenate(([0.0], scores, [1.0]))
    c = np.arange(n + 1) / n

    def G(t):
        return 0.5 * (t - c) * np.abs(t - c)

    return float(np.sum(G(knots[1:]) - G(knots[:-1])))


@fill_doc
def sharpness(y_std):
    r"""Root mean predictive variance, :math:`\sqrt{\frac1N \sum_i \sigma_i^2}`.

    A property of the predictions alone (it ignores y): smaller is sharper,
    which is only desirable subject to calibration ([1]_).

    Parameters
    ----------
    y_std : array-like of shape (n_samples,) or (n_samples, n_outputs)
        Predictive standard deviations sigma > 0.

    Returns
    -------
    sharpness : float
        Positive, in the units of y.

    Raises
    ------
    ValueError
        If y_std holds NaN, inf or values <= 0.

    References
    ----------
    %(ref_kuleshov2018)s
    """
    y_std = _as_float_array(y_std, "y_std")
    y_std = _check_std(y_std, _as_2d(y_std).shape)
    return float(np.sqrt(np.mean(y_std**2)))
