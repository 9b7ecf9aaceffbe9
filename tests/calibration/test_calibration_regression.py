"""CalibratedRegressorCV: recalibrated regression (Kuleshov et al. 2018), and skbayes regressors under MAPIE.

The base models of most tests are test doubles whose predictive is known
exactly: N(2 x_0, (c sigma(x))^2) for data y = 2 x_0 + sigma(x) eps, which is
the true conditional for c = 1 and too narrow (c < 1) or too wide (c > 1)
by the same factor at every x, a miscalibration that recalibration removes
exactly in the limit of many calibration rows.
"""

import pickle

import numpy as np
import pytest
from scipy.special import digamma, ndtr, ndtri
from scipy.stats import norm
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import BayesianRidge, LinearRegression
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils import check_random_state

from skbayes.inference import MeanFieldVI
from skbayes import BayesianMLPRegressor
from skbayes.calibration import CalibratedRegressorCV
from skbayes.calibration._regressor import _ambiguity_scale

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

LEVELS = (0.5, 0.8, 0.9, 0.95)


def noise_std(X):
    return 0.5 + 0.5 * np.abs(X[:, 1])


def make_data(n, seed):
    rng = np.random.RandomState(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    return X, 2 * X[:, 0] + noise_std(X) * rng.randn(n)


class GaussianDouble(RegressorMixin, BaseEstimator):
    """Predicts N(2 x_0, (std_factor * sigma(x))^2) whatever it is fitted on."""

    def __init__(self, std_factor=1.0):
        self.std_factor = std_factor

    def fit(self, X, y):
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X, return_std=False):
        mean = 2 * X[:, 0]
        return (mean, self.std_factor * noise_std(X)) if return_std else mean


class DrawsDouble(GaussianDouble):
    """GaussianDouble with ``sample_y``: draws of its Gaussian predictive, last axis."""

    def sample_y(self, X, n_samples=1, random_state=0):
        mean, std = self.predict(X, return_std=True)
        return mean[:, None] + std[:, None] * check_random_state(random_state).randn(len(X), n_samples)


X_TRAIN, Y_TRAIN = make_data(2000, 0)
X_TEST, Y_TEST = make_data(10000, 1)


def coverage(lower, upper, y):
    return np.mean((y >= lower) & (y <= upper))


@pytest.mark.parametrize("std_factor", [1 / 3, 3.0])
@pytest.mark.parametrize("ensemble", [True, False])
def test_recalibrated_intervals_cover_at_the_nominal_level(std_factor, ensemble):
    # 2,000 calibration rows: the coverage of a recalibrated interval has a
    # standard error of at most sqrt(0.25 / 2000) = 0.011, plus 0.005 from the
    # 10,000 test rows; 0.03 is about 2.5 of them. The default smoothing of the
    # maps (23 knots on each fold's 500 rows with ensemble, 45 on 2,000
    # without) biases the coverage, most for the base too narrow: by about
    # -0.015 at the 80% level with 500 rows per map (mean over calibration
    # sets, by simulation), less at the other levels and with more rows.
    model = CalibratedRegressorCV(GaussianDouble(std_factor), cv=4, ensemble=ensemble).fit(X_TRAIN, Y_TRAIN)
    assert len(model.estimators_) == len(model.calibrators_) == (4 if ensemble else 1)
    mean, std = GaussianDouble(std_factor).predict(X_TEST, return_std=True)
    for level in LEVELS:
        assert coverage(*model.predict_interval(X_TEST, coverage=level), Y_TEST) == pytest.approx(level, abs=0.03)
        z = ndtri(0.5 + level / 2)
        assert abs(coverage(mean - z * std, mean + z * std, Y_TEST) - level) > 0.04  # the base misses


class SlopeErrorDouble(RegressorMixin, BaseEstimator):
    """Predicts N(b x_0, 0.3^2) with a slope b ~ N(2, slope_error^2) drawn afresh by each fit (from its y).

    For data y = 2 x_0 + 0.3 eps, the fold models of a cross-validation err
    independently: each recalibrated one is calibrated on average over x, and
    the mean of several is a better prediction than each.
    """

    def __init__(self, slope_error=0.3):
        self.slope_error = slope_error

    def fit(self, X, y):
        self.n_features_in_ = X.shape[1]
        seed = int(np.abs(y).sum() * 1e3) % 2**32
        self.slope_ = 2.0 + self.slope_error * np.random.RandomState(seed).randn()
        return self

    def predict(self, X, return_std=False):
        mean = self.slope_ * X[:, 0]
        return (mean, np.full(len(X), 0.3)) if return_std else mean


def make_linear_data(n, seed):
    rng = np.random.RandomState(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    return X, 2 * X[:, 0] + 0.3 * rng.randn(n)


def test_ambiguity_pool_covers_where_the_linear_pool_of_disagreeing_members_is_too_wide():
    # Five fold models with independent slope errors (sd 0.3, as large as the
    # noise): each recalibrated member covers about 0.9, their linear pool
    # much more; the ambiguity pool about 0.9 on average (0.86 to 0.91 on these
    # calibration sets, whose spread scales s are 0.55 to 0.81; with s = 1,
    # the members only centred, the mean is about 0.945), with 10,000 test rows.
    X_test, y_test = make_linear_data(10000, 1)
    linear, ambiguity, scales = [], [], []
    for seed in range(102, 108):
        X, y = make_linear_data(2000, seed)
        model = CalibratedRegressorCV(SlopeErrorDouble(), cv=5, pooling="linear").fit(X, y)
        assert model.spread_scale_ is None
        linear.append(coverage(*model.predict_interval(X_test, coverage=0.9), y_test))
        pooled = clone(model).set_params(pooling="ambiguity").fit(X, y)
        assert 1 / np.sqrt(5) <= pooled.spread_scale_ < 1
        scales.append(pooled.spread_scale_)
        ambiguity.append(coverage(*pooled.predict_interval(X_test, coverage=0.9), y_test))
        # centring keeps the mean; the pool is narrower than the linear pool
        mean, std = pooled.predict(X_test[:100], return_std=True)
        linear_mean, linear_std = model.predict(X_test[:100], return_std=True)
        np.testing.assert_allclose(mean, linear_mean, rtol=1e-12, atol=1e-12)
        assert np.all(std < linear_std)
    assert np.mean(scales) < 0.8
    assert np.mean(linear) > 0.94
    assert np.mean(ambiguity) == pytest.approx(0.9, abs=0.02)
    assert np.all(np.abs(np.array(ambiguity) - 0.9) < 0.05)


def test_ambiguity_pool_moments_quantiles_and_density_agree():
    # seed 104: s = 0.55, far from the linear pool
    X, y = make_linear_data(2000, 104)
    model = CalibratedRegressorCV(SlopeErrorDouble(), cv=5).fit(X, y)
    assert model.spread_scale_ < 0.6
    rows = X_TEST[:3]
    mean, std = model.predict(rows, return_std=True)
    expected_mean, expected_std = quadrature_moments(model, rows)
    np.testing.assert_allclose(mean, expected_mean, atol=2e-3)
    np.testing.assert_allclose(std, expected_std, rtol=2e-3)
    levels = np.array([0.01, 0.05, 0.3, 0.5, 0.7, 0.95, 0.99])
    quantiles = model.predict_quantiles(rows, levels)
    cdf = model.predict_cdf(np.repeat(rows, levels.size, axis=0), quantiles.ravel()).reshape(quantiles.shape)
    np.testing.assert_allclose(cdf, np.broadcast_to(levels, cdf.shape), atol=1e-9)
    # the density integrates to the CDF (midpoint rule on a fine grid, between the 1% and 99% quantiles)
    for row, (low, high) in zip(rows, quantiles[:, [0, -1]], strict=True):
        grid = np.linspace(low, high, 400001)
        midpoints = (grid[1:] + grid[:-1]) / 2
        density = np.exp(model.log_predictive_density(np.repeat(row[None], midpoints.size, axis=0), midpoints))
        assert np.sum(np.diff(grid) * density) == pytest.approx(0.98, abs=1e-5)


def test_ambiguity_scale_from_means_and_variances():
    # two members: means +-1 about 0 on every row (A = 1), variances 4 (V = 4): s^2 = 1 - 1/4
    means, variances = np.array([[1.0, -1.0], [-1.0, 1.0]]), np.full((2, 2), 4.0)
    assert _ambiguity_scale(means, variances) == pytest.approx(np.sqrt(0.75))
    assert _ambiguity_scale(means, np.full((2, 2), 0.5)) == pytest.approx(np.sqrt(1 / 2))  # the floor 1/K
    assert _ambiguity_scale(means, np.zeros((2, 2))) == 1.0
    # a non-finite member (it would make every prediction NaN) is refused
    with pytest.raises(ValueError, match="non-finite predictive mean"):
        _ambiguity_scale(np.array([[np.nan, 1.0], [0.0, 1.0]]), variances)


def test_a_model_pickled_before_pooling_pools_linearly():
    model = CalibratedRegressorCV(GaussianDouble(2.0), cv=2, pooling="linear").fit(X_TRAIN[:300], Y_TRAIN[:300])
    state = model.__getstate__()
    del state["pooling"], state["spread_scale_"]
    old = CalibratedRegressorCV.__new__(CalibratedRegressorCV)
    old.__setstate__(state)
    assert old.get_params()["pooling"] == "linear" and old.spread_scale_ is None
    np.testing.assert_array_equal(old.predict_interval(X_TEST[:20]), model.predict_interval(X_TEST[:20]))
    clone(old)


def test_members_that_agree_are_pooled_as_they_are():
    # GaussianDouble ignores its data: every fold model predicts the same
    # mean, the maps differ only by their calibration rows
    model = CalibratedRegressorCV(GaussianDouble(2.0), cv=4).fit(X_TRAIN, Y_TRAIN)
    assert model.spread_scale_ > 0.995
    linear = clone(model).set_params(pooling="linear").fit(X_TRAIN, Y_TRAIN)
    np.testing.assert_allclose(model.predict_interval(X_TEST[:50], coverage=0.9),
                               linear.predict_interval(X_TEST[:50], coverage=0.9), atol=0.01)  # sigma(x) >= 0.5


def test_a_calibrated_base_keeps_its_quantiles():
    base = GaussianDouble(1.0).fit(X_TRAIN, Y_TRAIN)
    X_cal, y_cal = make_data(4000, 2)
    model = CalibratedRegressorCV(base, cv="prefit").fit(X_cal, y_cal)
    levels = np.array([0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95])
    mean, std = base.predict(X_TEST[:50], return_std=True)
    z = (model.predict_quantiles(X_TEST[:50], levels) - mean[:, None]) / std[:, None]
    # R^{-1}(q) - q has sd sqrt(q (1 - q) / 4000) <= 0.008, i.e. < 0.035 in z at these levels
    np.testing.assert_allclose(z, np.broadcast_to(ndtri(levels), z.shape), atol=0.1)


def test_prefit_map_is_the_interpolated_empirical_cdf_of_the_pit_values():
    base = GaussianDouble(0.5).fit(X_TRAIN, Y_TRAIN)
    X_cal, y_cal = make_data(300, 3)
    model = CalibratedRegressorCV(base, cv="prefit", n_knots=None).fit(X_cal, y_cal)
    assert model.estimators_[0] is base
    # By hand: R interpolates (0, 0), (p_(i), i / (n + 1)), (1, 1).
    mean, std = base.predict(X_cal, return_std=True)
    knots = np.concatenate(([0.0], np.sort(ndtr((y_cal - mean) / std)), [1.0]))
    values = np.concatenate(([0.0], np.arange(1, 301) / 301, [1.0]))
    levels = np.array([0.025, 0.3, 0.5, 0.9, 0.975])
    mean, std = base.predict(X_TEST[:20], return_std=True)
    expected = mean[:, None] + std[:, None] * ndtri(np.interp(levels, values, knots))
    np.testing.assert_allclose(model.predict_quantiles(X_TEST[:20], levels), expected, rtol=1e-10)
    expected_cdf = np.interp(ndtr((Y_TEST[:20] - mean) / std), knots, values)
    np.testing.assert_allclose(model.predict_cdf(X_TEST[:20], Y_TEST[:20]), expected_cdf, rtol=1e-10)


def pit_map(base, X_cal, y_cal):
    """By hand: the sorted PIT values p_(i) (clipped to [1e-12, 1 - 1e-12]) and their levels i / (n + 1)."""
    mean, std = base.predict(X_cal, return_std=True)
    pit = np.sort(np.clip(ndtr((y_cal - mean) / std), 1e-12, 1 - 1e-12))
    return pit, np.arange(1, pit.size + 1) / (pit.size + 1)


def test_smoothed_map_keeps_the_isotonic_fit_at_evenly_spaced_points_of_its_probit_curve():
    base = GaussianDouble(0.5).fit(X_TRAIN, Y_TRAIN)
    X_cal, y_cal = make_data(300, 3)
    model = CalibratedRegressorCV(base, cv="prefit").fit(X_cal, y_cal)
    raw = CalibratedRegressorCV(base, cv="prefit", n_knots=None).fit(X_cal, y_cal)
    knots, values = model.calibrators_[0].X_thresholds_, model.calibrators_[0].y_thresholds_
    # By hand: K = ceil(sqrt(300)) = 18 points evenly spaced along the polyline
    # (Phi^{-1}(p_(i)), Phi^{-1}(i / 301)), each taken to its nearest vertex.
    pit, levels = pit_map(base, X_cal, y_cal)
    vertices = np.c_[ndtri(pit), ndtri(levels)]
    arc = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(vertices, axis=0), axis=1))]
    ranks = sorted({int(np.argmin(np.abs(arc - t))) for t in np.linspace(0, arc[-1], 18)})
    assert ranks[0] == 0 and ranks[-1] == 299 and 10 < len(ranks) <= 18
    np.testing.assert_allclose(knots, np.r_[0.0, pit[ranks], 1.0], rtol=1e-12)
    np.testing.assert_allclose(values, np.r_[0.0, levels[ranks], 1.0], rtol=1e-12)
    # the values of the raw isotonic fit at those knots; R(0) = 0, R(1) = 1, increasing
    np.testing.assert_allclose(values, raw.calibrators_[0].predict(knots), rtol=1e-12)
    assert values[0] == knots[0] == 0.0 and values[-1] == knots[-1] == 1.0
    assert np.all(np.diff(knots) > 0) and np.all(np.diff(values) > 0)
    # the model uses that map: R(F(y)), F^{-1}(R^{-1}(q)) with linear interpolation
    mean, std = base.predict(X_TEST[:20], return_std=True)
    np.testing.assert_allclose(model.predict_cdf(X_TEST[:20], Y_TEST[:20]),
                               np.interp(ndtr((Y_TEST[:20] - mean) / std), knots, values), rtol=1e-10)
    levels = np.array([0.025, 0.3, 0.5, 0.9, 0.975])
    expected = mean[:, None] + std[:, None] * ndtri(np.interp(levels, values, knots))
    np.testing.assert_allclose(model.predict_quantiles(X_TEST[:20], levels), expected, rtol=1e-10)
    # n_knots >= n keeps all the PIT values
    every = CalibratedRegressorCV(base, cv="prefit", n_knots=300).fit(X_cal, y_cal).calibrators_[0]
    np.testing.assert_array_equal(every.X_thresholds_, raw.calibrators_[0].X_thresholds_)


def expected_loss_at_fixed_ranks(n, ranks):
    """E[log-likelihood loss] of a calibrated base, knots at PIT ranks fixed in advance (Notes of the class)."""
    m = np.diff(np.r_[0, ranks, n + 1])
    return np.sum(m / (n + 1) * (digamma(m + 1) - np.log(m))) - (digamma(n + 2) - np.log(n + 1))


# E[loss] of the raw map for a calibrated base, n -> infinity: a test PIT value
# falls in a spacing of (n + 1) times Gamma(2, 1) width (size-biased Exp(1)),
# where the slope is 1 / G: E[log G] = psi(2) = 1 - gamma for one map, and
# E[log(2 G1 G2 / (G1 + G2))] = 2 psi(2) + log 2 - psi(4) = 1/6 - gamma + log 2
# for the average of two maps fitted on independent rows (G1 + G2 ~ Gamma(4)).
RAW_LOSS = {"prefit": 1 - np.euler_gamma, 2: 1 / 6 - np.euler_gamma + np.log(2)}


@pytest.mark.parametrize("cv", ["prefit", 2])
def test_smoothing_keeps_the_log_likelihood_of_a_calibrated_base(cv):
    # The base is the true conditional, its PIT values uniform; the recalibrated
    # density loses E[log R'] per point against it. Each map has n = 500 rows.
    # Raw map: RAW_LOSS (sd over calibration sets about 0.025). K = ceil(sqrt(500))
    # = 23 knots at ranks fixed in advance: less than (K + 1) / (2 (n + 1)) = 0.024
    # (sd about 0.007); the ranks chosen from the data change that little. With
    # cv=2 the log of the average of two densities loses at most the average of
    # their losses (Jensen).
    base = GaussianDouble(1.0).fit(X_TRAIN, Y_TRAIN)
    X_cal, y_cal = make_data(500 if cv == "prefit" else 1000, 9)
    mean, std = base.predict(X_TEST, return_std=True)
    base_log_density = norm.logpdf(Y_TEST, mean, std)
    losses = {}
    for n_knots in ("auto", None):
        model = CalibratedRegressorCV(base, cv=cv, n_knots=n_knots).fit(X_cal, y_cal)
        assert all(iso.X_thresholds_.size <= (25 if n_knots else 502) for iso in model.calibrators_)
        losses[n_knots] = np.mean(base_log_density - model.log_predictive_density(X_TEST, Y_TEST))
    assert expected_loss_at_fixed_ranks(500, np.arange(1, 501)) == pytest.approx(RAW_LOSS["prefit"], abs=2e-3)
    assert expected_loss_at_fixed_ranks(500, np.linspace(1, 500, 23).round()) < 24 / 1002
    assert losses["auto"] < 0.06
    assert losses[None] == pytest.approx(RAW_LOSS[cv], abs=0.07)


def test_frozen_estimator_is_prefit():
    base = GaussianDouble(2.0).fit(X_TRAIN, Y_TRAIN)
    prefit = CalibratedRegressorCV(base, cv="prefit").fit(X_TRAIN[:500], Y_TRAIN[:500])
    frozen = CalibratedRegressorCV(FrozenEstimator(base), cv=5).fit(X_TRAIN[:500], Y_TRAIN[:500])
    assert len(frozen.estimators_) == 1  # ensemble="auto" is False for a FrozenEstimator
    np.testing.assert_allclose(frozen.predict_interval(X_TEST[:50]), prefit.predict_interval(X_TEST[:50]))
    with pytest.raises(NotFittedError, match="cv='prefit' needs a fitted estimator"):
        CalibratedRegressorCV(BayesianRidge(), cv="prefit").fit(X_TRAIN, Y_TRAIN)


def quadrature_moments(model, X, n_levels=40000):
    """Mean and std of the recalibrated distribution: int_0^1 Q(u) du by the midpoint rule over its quantiles Q."""
    quantiles = model.predict_quantiles(X, (np.arange(n_levels) + 0.5) / n_levels)
    return quantiles.mean(axis=1), quantiles.std(axis=1)


@pytest.mark.parametrize("ensemble", [False, True])
def test_mean_and_std_are_those_of_the_recalibrated_distribution(ensemble):
    model = CalibratedRegressorCV(GaussianDouble(0.4), cv=3, ensemble=ensemble).fit(X_TRAIN[:600], Y_TRAIN[:600])
    mean, std = model.predict(X_TEST[:3], return_std=True)
    expected_mean, expected_std = quadrature_moments(model, X_TEST[:3])
    np.testing.assert_allclose(mean, expected_mean, atol=2e-3)
    np.testing.assert_allclose(std, expected_std, rtol=2e-3)
    # the recalibration widened the too-narrow base
    assert np.all(std > 2 * GaussianDouble(0.4).predict(X_TEST[:3], return_std=True)[1])


def test_draws_predictive_matches_the_gaussian_one():
    # A base too wide by 1.5: the recalibrated 5% to 95% quantiles are base
    # quantiles at levels 0.14 to 0.86, where 4,000 draws are plenty (a
    # Monte-Carlo error of about 0.04 sigma). A base too narrow would need
    # the draws' far tails.
    X_cal, y_cal = make_data(500, 4)
    gaussian = CalibratedRegressorCV(GaussianDouble(1.5), cv=2).fit(X_cal, y_cal)
    draws = CalibratedRegressorCV(DrawsDouble(1.5), predictive="draws", n_mc_predict=4000, cv=2).fit(X_cal, y_cal)
    levels = np.array([0.05, 0.25, 0.5, 0.75, 0.95])
    quantiles = draws.predict_quantiles(X_TEST[:10], levels)
    assert np.all(np.diff(quantiles, axis=1) > 0)
    np.testing.assert_allclose(draws.predict_cdf(X_TEST[:10], quantiles[:, 2]), 0.5, atol=1e-9)
    sigma = noise_std(X_TEST[:10])[:, None]
    np.testing.assert_allclose(quantiles / sigma, gaussian.predict_quantiles(X_TEST[:10], levels) / sigma, atol=0.15)
    mean, std = draws.predict(X_TEST[:10], return_std=True)
    expected_mean, expected_std = quadrature_moments(draws, X_TEST[:10], n_levels=2000)
    np.testing.assert_allclose(mean, expected_mean, atol=1e-2)
    np.testing.assert_allclose(std, expected_std, rtol=1e-2)
    assert not hasattr(draws, "log_predictive_density")


@pytest.mark.parametrize("ensemble", [False, True])
def test_density_integrates_to_the_cdf(ensemble):
    model = CalibratedRegressorCV(GaussianDouble(0.5), cv=2, ensemble=ensemble).fit(X_TRAIN[:400], Y_TRAIN[:400])
    for row in X_TEST[:2]:
        mean, std = GaussianDouble(0.5).predict(row[None], return_std=True)
        # y where a member's base CDF meets a knot of its map, after the pool moves the member to
        # a_k + s Y_k (the private _pool's shifts a_k and scale s): the density is smooth in between
        pool = model._pool(row[None])
        kinks = [ndtri(iso.X_thresholds_[1:-1]) * std + mean for iso in model.calibrators_]
        if not pool.linear:
            kinks = [shift + pool.scale * kink for shift, kink in zip(pool.shifts, kinks, strict=True)]
        grid = np.sort(np.concatenate([np.linspace(-40, 40, 200001) * std + mean, *kinks]))
        midpoints = (grid[1:] + grid[:-1]) / 2
        density = np.exp(model.log_predictive_density(np.repeat(row[None], midpoints.size, axis=0), midpoints))
        cumulative = np.concatenate(([0.0], np.cumsum(np.diff(grid) * density)))  # midpoint rule
        assert cumulative[-1] == pytest.approx(1.0, abs=1e-6)
        points = np.arange(0, grid.size, 5000)
        cdf = model.predict_cdf(np.repeat(row[None], points.size, axis=0), grid[points])
        np.testing.assert_allclose(cumulative[points], cdf, atol=1e-6)


@pytest.mark.parametrize("ensemble", [False, True])
def test_quantiles_increase_with_the_level_and_invert_the_cdf(ensemble):
    model = CalibratedRegressorCV(GaussianDouble(2.0), cv=3, ensemble=ensemble).fit(X_TRAIN[:300], Y_TRAIN[:300])
    levels = np.sort(np.random.RandomState(0).uniform(0.001, 0.999, 50))
    quantiles = model.predict_quantiles(X_TEST[:30], levels)
    assert quantiles.shape == (30, 50)
    assert np.all(np.diff(quantiles, axis=1) > 0)
    cdf = model.predict_cdf(np.repeat(X_TEST[:30], 50, axis=0), quantiles.ravel()).reshape(30, 50)
    np.testing.assert_allclose(cdf, np.broadcast_to(levels, cdf.shape), atol=1e-9)
    lower, upper = model.predict_interval(X_TEST[:30], coverage=0.8)
    np.testing.assert_allclose(np.c_[lower, upper], model.predict_quantiles(X_TEST[:30], [0.1, 0.9]))


@pytest.fixture(scope="module")
def mlp_recalibrated():
    """A small BayesianMLPRegressor in a Pipeline, recalibrated on 2 folds."""
    X, y = make_data(300, 5)
    pipe = make_pipeline(StandardScaler(), BayesianMLPRegressor((16,), inference=MeanFieldVI(max_iter=30, n_mc_predict=20), random_state=0, noise="homoscedastic"))
    return CalibratedRegressorCV(pipe, cv=2).fit(X, y)


def test_skbayes_regressor_in_a_pipeline(mlp_recalibrated):
    assert all(isinstance(fitted, Pipeline) for fitted in mlp_recalibrated.estimators_)
    mean, std = mlp_recalibrated.predict(X_TEST[:40], return_std=True)
    lower, upper = mlp_recalibrated.predict_interval(X_TEST[:40], coverage=0.9)
    assert np.all((lower < mean) & (mean < upper) & (std > 0))
    assert np.all(np.isfinite(mlp_recalibrated.log_predictive_density(X_TEST[:40], Y_TEST[:40])))
    # the draws of the final step's sample_y, after the pipeline's scaler
    draws = CalibratedRegressorCV(mlp_recalibrated.estimators_[0], cv="prefit", predictive="draws", n_mc_predict=200)
    draws.fit(*make_data(200, 6))
    quantiles = draws.predict_quantiles(X_TEST[:40], [0.1, 0.5, 0.9])
    assert np.all(np.diff(quantiles, axis=1) > 0)


def test_pickle_round_trip(mlp_recalibrated):
    loaded = pickle.loads(pickle.dumps(mlp_recalibrated))
    np.testing.assert_array_equal(loaded.predict_quantiles(X_TEST[:20], [0.05, 0.95]),
                                  mlp_recalibrated.predict_quantiles(X_TEST[:20], [0.05, 0.95]))


def test_errors():
    X, y = X_TRAIN[:50], Y_TRAIN[:50]
    with pytest.raises(ValueError, match="return_std"):
        CalibratedRegressorCV(LinearRegression()).fit(X, y)
    with pytest.raises(ValueError, match="return_std"):  # inside a pipeline too
        CalibratedRegressorCV(make_pipeline(StandardScaler(), LinearRegression())).fit(X, y)
    with pytest.raises(ValueError, match="sample_y"):
        CalibratedRegressorCV(BayesianRidge(), predictive="draws").fit(X, y)
    with pytest.raises(ValueError, match="needs at least 5 rows; got n_samples=3"):
        CalibratedRegressorCV(BayesianRidge(), cv=5).fit(X[:3], y[:3])
    with pytest.raises(ValueError, match="NaN"):
        CalibratedRegressorCV(BayesianRidge()).fit(np.where(X > 1.9, np.nan, X), y)
    with pytest.raises(ValueError, match="one target; got y with 2 columns"):
        CalibratedRegressorCV(BayesianRidge()).fit(X, np.c_[y, y])
    with pytest.raises(ValueError, match="'n_mc_predict' parameter"):
        CalibratedRegressorCV(BayesianRidge(), n_mc_predict=1).fit(X, y)
    with pytest.raises(ValueError, match="'n_knots' parameter"):
        CalibratedRegressorCV(BayesianRidge(), n_knots=1).fit(X, y)
    model = CalibratedRegressorCV(BayesianRidge(), cv=2)
    with pytest.raises(NotFittedError):
        model.predict_interval(X)
    model.fit(X, y)
    with pytest.raises(ValueError, match=r"levels in \(0, 1\)"):
        model.predict_quantiles(X, [0.0, 0.5])
    with pytest.raises(ValueError, match="'coverage' parameter"):
        model.predict_interval(X, coverage=1.0)
    with pytest.raises(ValueError, match="features"):
        model.predict(X[:, :1])


def test_skbayes_regressor_under_mapie_split_conformal():
    """MAPIE's split conformal intervals, score |y - mean| / std from predict(X, return_std=True)."""
    pytest.importorskip("mapie")
    from mapie.regression import SplitConformalRegressor

    X_fit, y_fit = make_data(300, 7)
    X_cal, y_cal = make_data(1000, 8)
    model = BayesianMLPRegressor((16,), inference=MeanFieldVI(max_iter=30), random_state=0, noise="homoscedastic").fit(X_fit, y_fit)
    conformal = SplitConformalRegressor(model, confidence_level=0.9, conformity_score="std_normalized", prefit=True)
    conformal.conformalize(X_cal, y_cal)
    point, intervals = conformal.predict_interval(X_TEST)
    lower, upper = intervals[:, 0, 0], intervals[:, 1, 0]
    # coverage >= 0.9 in expectation over calibration sets; sd of a given one about
    # sqrt(0.09 / 1000) = 0.01, plus 0.003 from the test rows
    assert coverage(lower, upper, Y_TEST) == pytest.approx(0.9, abs=0.035)
    # the upper bound is mean + q std with q the ceil(0.9 (n + 1))-th smallest score (Lei et al. 2018)
    mean, std = model.predict(X_TEST, return_std=True)
    cal_mean, cal_std = model.predict(X_cal, return_std=True)
    q = np.sort(np.abs(y_cal - cal_mean) / cal_std)[int(np.ceil(0.9 * 1001)) - 1]
    np.testing.assert_allclose(point, mean)
    np.testing.assert_allclose(upper, mean + q * std, rtol=1e-6)
    assert np.ptp((mean - lower) / std) < 1e-6  # the lower bound: a constant score times std as well


@pytest.mark.parametrize("student_t", [False, True])
def test_mixture_quantile_solves_the_mixture_cdf_found_by_brentq(student_t):
    # Root of the mixture CDF found row by row by scipy's brentq on scipy.stats' CDFs (an independent
    # solver and CDF), for one-component mixtures (the component's own quantile), separated modes
    # (Newton's hard case, a flat CDF between them), heavy tails (df near 2) and extreme levels.
    from scipy.optimize import brentq
    from scipy.stats import norm, t

    from skbayes._predictive import mixture_quantile

    rng = np.random.RandomState(0)
    for n_components in (1, 2, 40):
        loc = rng.randn(n_components, 6) * np.array([0.1, 1, 10, 100, 1, 0.01])
        loc[:, 4] = np.where(np.arange(n_components) % 2, 50.0, -50.0)  # two modes far apart
        scale = np.exp(rng.randn(n_components, 6))
        df = 2.05 + rng.exponential(3.0, (n_components, 6)) if student_t else None
        for prob in (0.001, 0.025, 0.5, 0.975, 0.999):
            got = mixture_quantile(prob, loc, scale, df)
            for j in range(6):
                def excess(y):
                    z = (y - loc[:, j]) / scale[:, j]
                    return (t.cdf(z, df[:, j]) if student_t else norm.cdf(z)).mean() - prob

                assert abs(excess(got[j])) < 1e-8  # a root of the mixture's CDF ...
                expected = brentq(excess, -1e4, 1e4, xtol=1e-13, rtol=1e-14)
                z = (expected - loc[:, j]) / scale[:, j]
                density = ((t.pdf(z, df[:, j]) if student_t else norm.pdf(z)) / scale[:, j]).mean()
                if density > 1e-6 / scale[:, j].max():  # ... the root, where the CDF is not flat
                    assert got[j] == pytest.approx(expected, rel=1e-9, abs=1e-7 * scale[:, j].mean())


@pytest.mark.parametrize("student_t", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_mixture_quantile_of_a_mixture_does_not_depend_on_the_others_in_the_call(student_t, weighted):
    # Predictions go through blocks of rows: a row's quantile must be the same, to the last bit, whether
    # its mixture is solved alone, in a block of three or with all the others.
    from skbayes._predictive import mixture_quantile, student_t_scale_mixture

    rng = np.random.RandomState(1)
    n_components, n_mixtures = (100, 7) if weighted else (40, 7)
    loc = rng.randn(n_components, n_mixtures) * 3
    scale = np.exp(rng.randn(n_components, n_mixtures))
    df = 2.5 + rng.exponential(3.0, (n_components, n_mixtures)) if student_t else None
    weights = student_t_scale_mixture(4.0, n_nodes=n_components)[1] if weighted else None
    for prob in (0.05, 0.5, 0.99):
        whole = mixture_quantile(prob, loc, scale, df, weights=weights)
        for part in ([j] for j in range(n_mixtures)), ([0, 3, 6], [1, 2], [4, 5]):
            for columns in part:
                got = mixture_quantile(prob, loc[:, columns], scale[:, columns],
                                       None if df is None else df[:, columns], weights=weights)
                np.testing.assert_array_equal(got, whole[columns])


# ------------------------------------------------------------ predictive="model" (issue 28)
T_DF = 3.0


def make_t_data(n, seed):
    """y = 2 x_0 + sigma(x) t_3: heavy-tailed noise."""
    rng = np.random.RandomState(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    return X, 2 * X[:, 0] + noise_std(X) * rng.standard_t(T_DF, n)


class StudentTDouble(RegressorMixin, BaseEstimator):
    """Predictive Student-t(3) with location 2 x_0 and scale scale_factor * sigma(x), whatever it is fitted on.

    Its own predict_cdf / predict_quantiles / log_predictive_density are scipy's;
    predict(return_std=True) gives the t's standard deviation, sqrt(3) times its scale.
    """

    def __init__(self, scale_factor=1.0):
        self.scale_factor = scale_factor

    def fit(self, X, y):
        self.n_features_in_ = X.shape[1]
        return self

    def _dist(self, X):
        from scipy.stats import t
        return t(T_DF, loc=2 * X[:, 0], scale=self.scale_factor * noise_std(X))

    def predict(self, X, return_std=False):
        dist = self._dist(X)
        return (dist.mean(), dist.std()) if return_std else dist.mean()

    def predict_cdf(self, X, y):
        return self._dist(X).cdf(y)

    def predict_quantiles(self, X, quantiles):
        from scipy.stats import t
        X = np.asarray(X)
        scale = (self.scale_factor * noise_std(X))[:, None]
        return 2 * X[:, :1] + scale * t.ppf(np.asarray(quantiles)[None, :], T_DF)

    def log_predictive_density(self, X, y):
        return self._dist(X).logpdf(y)


def test_auto_uses_the_models_own_predictive():
    X, y = make_t_data(200, 7)
    assert CalibratedRegressorCV(StudentTDouble(), cv=2).fit(X, y).predictive_ == "model"
    assert CalibratedRegressorCV(make_pipeline(StandardScaler(), StudentTDouble()), cv=2).fit(X, y).predictive_ == "model"
    assert CalibratedRegressorCV(FrozenEstimator(StudentTDouble().fit(X, y))).fit(X, y).predictive_ == "model"
    assert CalibratedRegressorCV(GaussianDouble(), cv=2).fit(X, y).predictive_ == "gaussian"
    assert CalibratedRegressorCV(cv=2).fit(X, y).predictive_ == "gaussian"  # BayesianRidge: no predict_cdf
    with pytest.raises(ValueError, match="predictive='model' needs predict_cdf"):
        CalibratedRegressorCV(GaussianDouble(), predictive="model", cv=2).fit(X, y)


def test_model_predictive_matches_scipy_student_t_by_hand():
    from scipy.stats import t
    base = StudentTDouble(0.5).fit(X_TRAIN, Y_TRAIN)
    X_cal, y_cal = make_t_data(300, 8)
    model = CalibratedRegressorCV(base, cv="prefit", n_knots=None).fit(X_cal, y_cal)
    # R interpolates (0, 0), (p_(i), i / (n + 1)), (1, 1) for the t's PIT values p_i = T((y_i - m_i) / s_i)
    pit = t.cdf((y_cal - 2 * X_cal[:, 0]) / (0.5 * noise_std(X_cal)), T_DF)
    knots = np.concatenate(([0.0], np.sort(pit), [1.0]))
    values = np.concatenate(([0.0], np.arange(1, 301) / 301, [1.0]))
    X, y = X_TEST[:20], Y_TEST[:20]
    loc, scale = 2 * X[:, 0], 0.5 * noise_std(X)
    levels = np.array([0.025, 0.3, 0.5, 0.9, 0.975])
    expected = loc[:, None] + scale[:, None] * t.ppf(np.interp(levels, values, knots), T_DF)
    np.testing.assert_allclose(model.predict_quantiles(X, levels), expected, rtol=1e-9)
    p = t.cdf((y - loc) / scale, T_DF)
    np.testing.assert_allclose(model.predict_cdf(X, y), np.interp(p, knots, values), rtol=1e-9)
    j = np.searchsorted(knots, p, side="right") - 1
    slope = (values[j + 1] - values[j]) / (knots[j + 1] - knots[j])
    np.testing.assert_allclose(model.log_predictive_density(X, y), t.logpdf(y, T_DF, loc, scale) + np.log(slope),
                               rtol=1e-9)
    # mean and std: the midpoint rule over 200,000 levels of the recalibrated quantile function
    u = (np.arange(200_000) + 0.5) / 200_000
    q = loc[:5, None] + scale[:5, None] * t.ppf(np.interp(u, values, knots), T_DF)
    mean, std = model.predict(X[:5], return_std=True)
    np.testing.assert_allclose(mean, q.mean(axis=1), atol=0.01 * scale[:5].min())
    np.testing.assert_allclose(std, q.std(axis=1), rtol=0.05)


@pytest.mark.parametrize("ensemble", [True, False])
def test_heavy_tailed_noise_recalibrated_coverage(ensemble):
    # A t(3) base twice too narrow, recalibrated on 1,000 rows (2 folds of 500); 4,000 test rows.
    # Coverage standard errors: sqrt(0.09 / 500) = 0.013 from a map, 0.005 from the test rows.
    X, y = make_t_data(1000, 9)
    X_test, y_test = make_t_data(4000, 10)
    model = CalibratedRegressorCV(StudentTDouble(0.5), cv=2, ensemble=ensemble).fit(X, y)
    assert model.predictive_ == "model"
    for level in (0.5, 0.9):
        assert coverage(*model.predict_interval(X_test, coverage=level), y_test) == pytest.approx(level, abs=0.035)
    base = StudentTDouble(0.5)
    assert coverage(*base.predict_quantiles(X_test, [0.05, 0.95]).T, y_test) < 0.8  # the base misses
    # the model's own density beats the Gaussian of its mean and std, recalibrated alike
    gaussian = CalibratedRegressorCV(StudentTDouble(0.5), cv=2, ensemble=ensemble, predictive="gaussian").fit(X, y)
    assert np.mean(model.log_predictive_density(X_test, y_test)) > np.mean(gaussian.log_predictive_density(X_test, y_test)) + 0.02
