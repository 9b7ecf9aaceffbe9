"""skbayes.metrics: scoring rules checked against closed forms and brute force."""

import copy
import pickle
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy import integrate, stats
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.datasets import make_classification, make_regression
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.linear_model import BayesianRidge, LinearRegression, LogisticRegression
from sklearn.metrics import log_loss, r2_score
from sklearn.model_selection import GridSearchCV, KFold, cross_validate
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from discovery import with_loop
from skbayes.metrics import (
    crps_ensemble,
    crps_gaussian,
    expected_calibration_error,
    gaussian_nll,
    get_scorer,
    get_scorer_names,
    interval_coverage,
    interval_coverage_error,
    interval_score,
    make_probabilistic_scorer,
    mean_interval_width,
    miscalibration_area,
    regression_calibration_curve,
    regression_calibration_error,
    reliability_diagram,
    sharpness,
)
from skbayes.inference import DeepEnsemble, MCDropout


def _gaussian_data(n, seed, k=None, std_scale=1.0):
    """Observations really drawn from N(mu, sigma^2); returns y, mu, sigma."""
    rng = np.random.default_rng(seed)
    shape = (n,) if k is None else (n, k)
    mu = rng.normal(size=shape)
    sigma = rng.uniform(0.5, 2.0, size=shape)
    y = mu + sigma * rng.normal(size=shape)
    return y, mu, sigma * std_scale


def _brute_force_crps(y, samples, fair):
    """O(m^2) pair formula on one entry."""
    m = samples.size
    pairs = np.abs(samples[:, None] - samples[None, :]).sum()
    return np.mean(np.abs(samples - y)) - pairs / (2 * (m * (m - 1) if fair else m * m))


# ------------------------------------------------------------------ regression
@pytest.mark.parametrize("k", [None, 3])
def test_gaussian_nll_matches_scipy_logpdf(k):
    y, mu, sigma = _gaussian_data(50, 0, k=k)
    expected = -np.mean(stats.norm.logpdf(y, loc=mu, scale=sigma))
    assert gaussian_nll(y, mu, y_std=sigma) == pytest.approx(expected, rel=1e-12)


def test_gaussian_nll_scalar_std_and_column_vector():
    y, mu, _ = _gaussian_data(20, 1)
    expected = -np.mean(stats.norm.logpdf(y, loc=mu, scale=0.7))
    assert gaussian_nll(y, mu[:, None], y_std=0.7) == pytest.approx(expected)
    assert isinstance(gaussian_nll(y, mu, y_std=0.7), float)


@pytest.mark.parametrize("y, mu, sigma", [(0.3, -0.2, 0.8), (5.0, 0.0, 1.0), (-1.0, 2.0, 3.0)])
def test_crps_gaussian_matches_numerical_integral(y, mu, sigma):
    cdf = stats.norm(mu, sigma).cdf
    below, _ = integrate.quad(lambda x: cdf(x) ** 2, -np.inf, y)
    above, _ = integrate.quad(lambda x: (1 - cdf(x)) ** 2, y, np.inf)
    assert crps_gaussian([y], [mu], y_std=[sigma]) == pytest.approx(below + above, rel=1e-7)


def test_crps_gaussian_is_mean_over_entries_and_tends_to_absolute_error():
    y, mu, sigma = _gaussian_data(30, 2, k=2)
    entries = zip(y.ravel(), mu.ravel(), sigma.ravel())
    per_entry = [crps_gaussian([a], [b], y_std=[c]) for a, b, c in entries]
    assert crps_gaussian(y, mu, y_std=sigma) == pytest.approx(np.mean(per_entry))
    assert crps_gaussian(y, mu, y_std=1e-9) == pytest.approx(np.mean(np.abs(y - mu)), abs=1e-8)


@pytest.mark.parametrize("fair", [True, False])
def test_crps_ensemble_matches_brute_force(fair):
    rng = np.random.default_rng(3)
    y = rng.normal(size=6)
    samples = rng.normal(size=(6, 9))
    expected = np.mean([_brute_force_crps(y[i], samples[i], fair) for i in range(6)])
    assert crps_ensemble(y, samples, fair=fair) == pytest.approx(expected, rel=1e-12)


def test_crps_ensemble_multi_output_averages_entries():
    rng = np.random.default_rng(4)
    y = rng.normal(size=(5, 2))
    samples = rng.normal(size=(5, 2, 7))
    expected = np.mean(
        [_brute_force_crps(y[i, j], samples[i, j], True) for i in range(5) for j in range(2)]
    )
    assert crps_ensemble(y, samples) == pytest.approx(expected)
    # A single output may come as (n,) / (n, m) or (n, 1) / (n, 1, m).
    assert crps_ensemble(y[:, :1], samples[:, 0]) == crps_ensemble(y[:, 0], samples[:, :1])


def test_fair_crps_ensemble_converges_to_gaussian_crps():
    y, mu, sigma = _gaussian_data(200, 5)
    rng = np.random.default_rng(6)
    samples = mu[:, None] + sigma[:, None] * rng.normal(size=(200, 4000))
    exact = crps_gaussian(y, mu, y_std=sigma)
    assert crps_ensemble(y, samples) == pytest.approx(exact, rel=0.01)
    # The fair estimator is unbiased for few samples; the plain one is biased upwards.
    few = mu[:, None, None] + sigma[:, None, None] * rng.normal(size=(200, 300, 4))
    fair = np.mean([crps_ensemble(y, few[:, r]) for r in range(300)])
    plain = np.mean([crps_ensemble(y, few[:, r], fair=False) for r in range(300)])
    assert fair == pytest.approx(exact, rel=0.01)
    assert plain > exact * 1.05


_finite = st.floats(-100, 100, allow_nan=False, allow_infinity=False)


@settings(max_examples=50, deadline=None)
@given(
    y=_finite,
    samples=arrays(np.float64, st.integers(2, 12), elements=_finite),
    fair=st.booleans(),
)
def test_crps_ensemble_property_brute_force_and_non_negative(y, samples, fair):
    value = crps_ensemble([y], samples[None, :], fair=fair)
    assert value >= -1e-9
    assert value == pytest.approx(_brute_force_crps(y, samples, fair), rel=1e-9, abs=1e-9)


def test_interval_metrics_by_hand():
    y = np.array([0.0, 2.0, -3.0, 1.0])
    lower = np.array([-1.0, -1.0, -1.0, 1.0])
    upper = np.array([1.0, 1.0, 1.0, 1.0])
    # widths 2, 2, 2, 0; misses: y=2 above by 1, y=-3 below by 2; alpha = 0.2.
    expected = np.mean([2, 2 + 10 * 1, 2 + 10 * 2, 0])
    assert interval_score(y, lower, upper, coverage=0.8) == pytest.approx(expected)
    assert interval_coverage(y, lower, upper) == 0.5  # bounds are inclusive
    assert mean_interval_width(lower, upper) == 1.5


def test_interval_score_is_minimised_by_the_true_quantiles():
    y, mu, sigma = _gaussian_data(20000, 7)
    z = stats.norm.ppf(0.975)

    def score(scale):
        return interval_score(y, mu - scale * z * sigma, mu + scale * z * sigma)

    assert score(1.0) < min(score(0.8), score(1.25))


def test_regression_calibration_near_zero_when_calibrated_large_when_overconfident():
    y, mu, sigma = _gaussian_data(5000, 8, k=2)
    for method in ("quantile", "central"):
        assert regression_calibration_error(y, mu, y_std=sigma, method=method) < 0.02
        assert miscalibration_area(y, mu, y_std=sigma, method=method) < 0.02
        assert regression_calibration_error(y, mu, y_std=sigma / 3, method=method) > 0.15
        assert miscalibration_area(y, mu, y_std=sigma / 3, method=method) > 0.1
    # Too-narrow intervals cover less than nominal.
    expected, observed = regression_calibration_curve(
        y, mu, y_std=sigma / 3, n_levels=10, method="central"
    )
    assert expected.shape == observed.shape == (10,)
    assert np.all(np.diff(expected) > 0) and np.all(np.diff(observed) >= 0)
    assert np.all(observed < expected)


def test_regression_calibration_curve_by_hand():
    # z = -1, 0, 2: PIT values 0.159, 0.5, 0.977; central levels 0.683, 0, 0.954.
    y, mu = np.array([-1.0, 0.0, 2.0]), np.zeros(3)
    expected, observed = regression_calibration_curve(y, mu, y_std=1.0, n_levels=4)
    np.testing.assert_allclose(expected, [0.125, 0.375, 0.625, 0.875])
    np.testing.assert_allclose(observed, [0, 1 / 3, 2 / 3, 2 / 3])
    _, observed = regression_calibration_curve(y, mu, y_std=1.0, n_levels=4, method="central")
    np.testing.assert_allclose(observed, [1 / 3, 1 / 3, 1 / 3, 2 / 3])
    rmse = np.sqrt(np.mean((np.array([0, 1 / 3, 2 / 3, 2 / 3]) - expected) ** 2))
    assert regression_calibration_error(y, mu, y_std=1.0, n_levels=4) == pytest.approx(rmse)


def test_miscalibration_area_is_the_exact_integral():
    # One PIT value of 0.5: int_0^1 |1{p >= 0.5} - p| dp = 1/4.
    assert miscalibration_area([0.0], [0.0], y_std=1.0) == pytest.approx(0.25)
    # Agrees with a fine Riemann sum of the curve.
    y, mu, sigma = _gaussian_data(300, 9, std_scale=0.6)
    expected, observed = regression_calibration_curve(y, mu, y_std=sigma, n_levels=20000)
    area = miscalibration_area(y, mu, y_std=sigma)
    assert area == pytest.approx(np.mean(np.abs(observed - expected)), abs=1e-4)


def test_sharpness():
    assert sharpness([[1.0, 2.0], [2.0, 1.0]]) == pytest.approx(np.sqrt(2.5))


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: gaussian_nll([1, 2], [1, 2, 3], y_std=1.0), "same shape"),
        (lambda: gaussian_nll([1, 2], [1, 2], y_std=[1.0, 0.0]), "strictly positive"),
        (lambda: gaussian_nll([1, 2], [1, 2], y_std=[1.0]), "same shape"),
        (lambda: crps_gaussian([1, np.nan], [1, 2], y_std=1.0), "NaN"),
        (lambda: crps_gaussian([1, 2], [1, 2], y_std=-1.0), "strictly positive"),
        (lambda: crps_ensemble([1.0], [[1.0]]), "at least 2 samples"),
        (lambda: crps_ensemble([1.0, 2.0], [[1.0, 2.0]]), "must have shape"),
        (lambda: crps_ensemble(np.zeros((2, 3)), np.zeros((2, 5))), "must have shape"),
        (lambda: interval_score([0.0], [1.0], [-1.0]), "lower must not exceed upper"),
        (lambda: interval_score([0.0], [-1.0], [1.0], coverage=1.0), "coverage"),
        (lambda: interval_coverage([0.0, 1.0], [-1.0], [1.0]), "same shape"),
        (lambda: regression_calibration_error([0.0], [0.0], y_std=1.0, method="x"), "method"),
        (lambda: regression_calibration_curve([0.0], [0.0], y_std=1.0, n_levels=0), "n_levels"),
        (lambda: sharpness([1.0, np.inf]), "infinity"),
    ],
)
def test_regression_input_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# -------------------------------------------------------------- classification
def test_ece_hand_computed_example():
    y = np.array([0, 1, 0, 2])
    proba = np.array(
        [[0.9, 0.05, 0.05], [0.1, 0.8, 0.1], [0.3, 0.6, 0.1], [0.25, 0.35, 0.4]]
    )
    # Confidences 0.9 (right), 0.8 (right), 0.6 (wrong), 0.4 (right); bins of
    # width 0.25: (0.25, 0.5] {0.4}, (0.5, 0.75] {0.6}, (0.75, 1] {0.9, 0.8}.
    expected = (abs(1 - 0.4) + abs(0 - 0.6) + 2 * abs(1 - 0.85)) / 4
    assert expected_calibration_error(y, proba, n_bins=4) == pytest.approx(expected)
    diagram = reliability_diagram(y, proba, n_bins=4)
    np.testing.assert_allclose(diagram.bin_edges, [0, 0.25, 0.5, 0.75, 1])
    np.testing.assert_array_equal(diagram.count, [0, 1, 1, 2])
    np.testing.assert_allclose(diagram.confidence[1:], [0.4, 0.6, 0.85])
    np.testing.assert_allclose(diagram.accuracy[1:], [1, 0, 1])
    assert np.isnan(diagram.accuracy[0])


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
def test_ece_near_zero_when_labels_are_drawn_from_the_probabilities(strategy):
    rng = np.random.default_rng(10)
    proba = rng.dirichlet([0.5, 0.5, 0.5, 0.5], size=20000)
    y = (rng.uniform(size=(20000, 1)) > np.cumsum(proba, axis=1)).sum(axis=1)
    assert expected_calibration_error(y, proba, strategy=strategy) < 0.02
    # Sharpened (over-confident) probabilities are not calibrated.
    sharp = proba**3 / (proba**3).sum(axis=1, keepdims=True)
    assert expected_calibration_error(y, sharp, strategy=strategy) > 0.05
    diagram = reliability_diagram(y, proba, strategy=strategy, n_bins=10)
    assert diagram.count.sum() == 20000
    assert diagram.bin_edges.size == diagram.count.size + 1 <= 11
    if strategy == "quantile":
        assert diagram.count.min() > 1500


def test_ece_binary_1d_and_string_labels():
    rng = np.random.default_rng(11)
    p1 = rng.uniform(size=200)
    y = (rng.uniform(size=200) < p1).astype(int)
    two_columns = np.column_stack([1 - p1, p1])
    assert expected_calibration_error(y, p1) == expected_calibration_error(y, two_columns)
    names = np.array(["cat", "dog"])[y]
    assert expected_calibration_error(names, p1) == expected_calibration_error(y, p1)
    # Columns in a user-given order.
    flipped = expected_calibration_error(names, two_columns[:, ::-1], labels=["dog", "cat"])
    assert flipped == expected_calibration_error(y, p1)


def test_ece_labels_needed_when_a_class_is_missing():
    y = np.array([0, 2, 2])
    proba = np.array([[0.8, 0.1, 0.1], [0.1, 0.1, 0.8], [0.2, 0.2, 0.6]])
    with pytest.raises(ValueError, match="pass labels="):
        expected_calibration_error(y, proba)
    assert expected_calibration_error(y, proba, labels=[0, 1, 2], n_bins=5) == pytest.approx(
        (0.2 + 0.2 + 0.4) / 3
    )


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(y_true=[0, 1], y_proba=[[0.5, 0.5]]), "inconsistent numbers of samples"),
        (dict(y_true=[0, 1], y_proba=[[0.5, 0.6], [0.5, 0.5]]), "sum to 1"),
        (dict(y_true=[0, 1], y_proba=[1.5, 0.5]), r"\[0, 1\]"),
        (dict(y_true=[0, 1], y_proba=[[np.nan, 1], [0.5, 0.5]]), "NaN"),
        (dict(y_true=[0, 3], y_proba=[0.2, 0.7], labels=[0, 1]), "not in labels"),
        (dict(y_true=[0, 1], y_proba=[0.2, 0.7], labels=[0, 1, 2]), "one entry per column"),
        (dict(y_true=[0, 1], y_proba=[0.2, 0.7], n_bins=0), "n_bins"),
        (dict(y_true=[0, 1], y_proba=[0.2, 0.7], strategy="kmeans"), "strategy"),
    ],
)
def test_classification_input_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        expected_calibration_error(**kwargs)


# --------------------------------------------------------------------- scorers
@pytest.fixture(scope="module")
def regression_data():
    X, y = make_regression(n_samples=120, n_features=4, noise=10.0, random_state=0)
    return X, y


@pytest.mark.parametrize("pipeline", [False, True])
def test_cross_validate_scorers_match_manual_fold_computation(regression_data, pipeline):
    X, y = regression_data
    model = make_pipeline(StandardScaler(), BayesianRidge()) if pipeline else BayesianRidge()
    cv = KFold(3, shuffle=True, random_state=0)
    names = ["neg_gaussian_nll", "neg_crps", "neg_interval_score"]
    names.append("neg_regression_calibration_error")
    scoring = {name: get_scorer(name) for name in names}
    scoring["r2"] = get_scorer("r2")
    result = cross_validate(model, X, y, cv=cv, scoring=scoring, return_estimator=True)
    for fold, ((_, test), fitted) in enumerate(zip(cv.split(X), result["estimator"])):
        mean, std = fitted.predict(X[test], return_std=True)
        z = stats.norm.ppf(0.975)
        manual = {
            "neg_gaussian_nll": -gaussian_nll(y[test], mean, y_std=std),
            "neg_crps": -crps_gaussian(y[test], mean, y_std=std),
            "neg_interval_score": -interval_score(y[test], mean - z * std, mean + z * std),
            "neg_regression_calibration_error": -regression_calibration_error(
                y[test], mean, y_std=std
            ),
            "r2": r2_score(y[test], mean),
        }
        for name, value in manual.items():
            assert result[f"test_{name}"][fold] == pytest.approx(value, rel=1e-10)


def test_grid_search_selects_with_a_probabilistic_scorer(regression_data):
    X, y = regression_data
    search = GridSearchCV(
        make_pipeline(StandardScaler(), BayesianRidge()),
        {"bayesianridge__alpha_init": [None, 1e-6]},
        scoring=get_scorer("neg_gaussian_nll"),
        cv=3,
    ).fit(X, y)
    assert np.all(search.cv_results_["mean_test_score"] < 0)
    # A model without return_std cannot be scored this way.
    with pytest.raises(TypeError, match="return_std"):
        get_scorer("neg_crps")(LinearRegression().fit(X, y), X, y)


def test_classification_scorers_in_cross_validate():
    X, y = make_classification(n_samples=150, n_classes=3, n_informative=4, random_state=0)
    cv = KFold(3, shuffle=True, random_state=1)
    scoring = {
        "ece": get_scorer("neg_expected_calibration_error"),
        "ece5": make_probabilistic_scorer(
            expected_calibration_error, response="proba", n_bins=5, strategy="quantile"
        ),
        "log_loss": get_scorer("neg_log_loss"),
    }
    model = LogisticRegression(max_iter=500)
    result = cross_validate(model, X, y, cv=cv, scoring=scoring, return_estimator=True)
    for fold, ((_, test), fitted) in enumerate(zip(cv.split(X), result["estimator"])):
        proba = fitted.predict_proba(X[test])
        ece = expected_calibration_error(y[test], proba)
        assert result["test_ece"][fold] == pytest.approx(-ece)
        assert result["test_ece5"][fold] == pytest.approx(
            -expected_calibration_error(y[test], proba, n_bins=5, strategy="quantile")
        )
        assert result["test_log_loss"][fold] == pytest.approx(-log_loss(y[test], proba))
    search = GridSearchCV(model, {"C": [0.1, 1.0]}, scoring=scoring["ece"], cv=cv).fit(X, y)
    assert search.best_params_["C"] in (0.1, 1.0)


def test_proba_scorer_passes_classes_for_a_fold_missing_a_class():
    X, y = make_classification(n_samples=90, n_classes=3, n_informative=4, random_state=2)
    model = LogisticRegression(max_iter=500).fit(X, y)
    keep = y != 1
    proba = model.predict_proba(X[keep])
    score = get_scorer("neg_expected_calibration_error")(model, X[keep], y[keep])
    assert score == pytest.approx(-expected_calibration_error(y[keep], proba, labels=[0, 1, 2]))


def test_samples_scorer_with_sample_y():
    rng = np.random.default_rng(12)
    X = rng.uniform(-2, 2, size=(30, 1))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=30)
    model = GaussianProcessRegressor(alpha=0.01).fit(X, y)
    scorer = make_probabilistic_scorer(
        crps_ensemble, response="samples", response_params={"n_samples": 50, "random_state": 3}
    )
    samples = model.sample_y(X, n_samples=50, random_state=3)
    assert samples.shape == (30, 50)
    assert scorer(model, X, y) == pytest.approx(-crps_ensemble(y, samples))
    # a Pipeline has no sample_y: its last step draws, on the transformed X
    pipe = make_pipeline(StandardScaler(), GaussianProcessRegressor(alpha=0.01)).fit(X, y)
    samples = pipe[-1].sample_y(pipe[0].transform(X), n_samples=50, random_state=3)
    assert scorer(pipe, X, y) == pytest.approx(-crps_ensemble(y, samples))


def test_scorer_sign_repr_and_pickle(regression_data):
    X, y = regression_data
    model = BayesianRidge().fit(X, y)
    loss = make_probabilistic_scorer(gaussian_nll)
    gain = make_probabilistic_scorer(gaussian_nll, greater_is_better=True)
    assert gain(model, X, y) == -loss(model, X, y) > 0
    assert repr(loss) == "make_probabilistic_scorer(gaussian_nll, response='std')"
    assert repr(make_probabilistic_scorer(interval_score, response="std", coverage=0.9)) == (
        "make_probabilistic_scorer(interval_score, response='std', coverage=0.9)"
    )
    assert repr(get_scorer("neg_crps")) == "get_scorer('neg_crps')"
    restored = pickle.loads(pickle.dumps(get_scorer("neg_crps")))
    assert restored(model, X, y) == get_scorer("neg_crps")(model, X, y)
    with pytest.raises(ValueError, match="response"):
        make_probabilistic_scorer(gaussian_nll, response="mean")
    with pytest.raises(ValueError, match="callable"):
        make_probabilistic_scorer("gaussian_nll")


def test_get_scorer_names_and_sklearn_fallback():
    ours = get_scorer_names(probabilistic_only=True)
    for name in [
        "neg_gaussian_nll",
        "neg_crps",
        "neg_interval_score",
        "neg_regression_calibration_error",
        "neg_expected_calibration_error",
    ]:
        assert name in ours
    everything = get_scorer_names()
    assert set(ours) < set(everything) and "r2" in everything and "neg_log_loss" in everything
    assert get_scorer("neg_gaussian_nll") is not get_scorer("neg_gaussian_nll")
    assert repr(get_scorer("r2")) == "make_scorer(r2_score, response_method='predict')"
    with pytest.raises(ValueError, match="get_scorer_names"):
        get_scorer("neg_not_a_metric")


# ------------------------------------------- scorers of the model's own predictive
# Short fits that stop at max_iter are the point of these fast tests.
_short_fit = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _small_mlp(inference, **kwargs):
    from skbayes import BayesianMLPRegressor

    return BayesianMLPRegressor(
        (8,), inference=with_loop(inference, max_iter=20, learning_rate_init=0.01, n_mc_predict=20), random_state=0,
        **{"noise": "homoscedastic", **kwargs},
    )


def _sine_rows(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    return X, np.sin(2 * X[:, 0]) + 0.2 * rng.normal(size=n)


class _IntervalStub(RegressorMixin, BaseEstimator):
    """Test double: the interval [-coverage/2, coverage/2] for every row.

    Its predict(X, return_std=True) is N(0, 100^2), whose intervals cover
    everything: a scorer that used it instead of predict_interval would see
    coverage 1.
    """

    def fit(self, X, y):
        self.fitted_ = True
        return self

    def predict(self, X, return_std=False):
        mean = np.zeros(len(X))
        return (mean, np.full(len(X), 100.0)) if return_std else mean

    def predict_interval(self, X, coverage=0.95):
        self.last_X_, self.last_coverage_ = np.asarray(X), coverage
        half = np.full(len(X), coverage / 2)
        return -half, half


class _GaussianStub(RegressorMixin, BaseEstimator):
    """Test double with predictive N(x_0, (0.5 + |x_1|)^2) and its own sample_y.

    It has log_predictive_density and sample_y, as skbayes regressors do, so
    "neg_crps" scores it from draws; its rows are drawn independently.
    """

    def fit(self, X, y):
        self.fitted_ = True
        return self

    def _moments(self, X):
        X = np.asarray(X)
        return X[:, 0], 0.5 + np.abs(X[:, 1])

    def predict(self, X, return_std=False):
        mean, std = self._moments(X)
        return (mean, std) if return_std else mean

    def log_predictive_density(self, X, y):
        return stats.norm.logpdf(y, *self._moments(X))

    def sample_y(self, X, n_samples=1, random_state=0):
        self.max_rows_ = max(getattr(self, "max_rows_", 0), len(X))
        mean, std = self._moments(X)
        z = np.random.RandomState(random_state).standard_normal((len(X), n_samples))
        return mean[:, None] + std[:, None] * z


@pytest.fixture(scope="module")
def small_mlps():
    X, y = _sine_rows(80, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return {
            name: _small_mlp(inference).fit(X, y)
            for name, inference in [("mc_dropout", MCDropout(dropout_rate=0.1)), ("ensemble", DeepEnsemble(4))]
        }


@pytest.mark.parametrize("name", ["mc_dropout", "ensemble"])
def test_log_predictive_density_scorer_is_the_models_own_mean_density(small_mlps, name):
    model = small_mlps[name]
    X, y = _sine_rows(40, 1)
    scorer = get_scorer("log_predictive_density")
    assert scorer(model, X, y) == pytest.approx(np.mean(model.log_predictive_density(X, y)), rel=1e-12)
    # neg_gaussian_nll is another number: the Gaussian with the mixture's moments
    mean, std = model.predict(X, return_std=True)
    assert get_scorer("neg_gaussian_nll")(model, X, y) == pytest.approx(-gaussian_nll(y, mean, y_std=std))


@_short_fit
def test_log_predictive_density_scorer_unwraps_a_pipeline():
    X, y = _sine_rows(60, 2)
    pipe = make_pipeline(StandardScaler(), _small_mlp(MCDropout(dropout_rate=0.1))).fit(X, y)
    assert not hasattr(pipe, "log_predictive_density")
    expected = np.mean(pipe[-1].log_predictive_density(pipe[:-1].transform(X), y))
    assert get_scorer("log_predictive_density")(pipe, X, y) == pytest.approx(expected, rel=1e-12)
    # a pipeline nested in a pipeline: both prefixes are applied
    outer = make_pipeline(StandardScaler(), pipe)
    outer.fit(X, y)
    inner_X = outer[-1][:-1].transform(outer[:-1].transform(X))
    expected = np.mean(outer[-1][-1].log_predictive_density(inner_X, y))
    assert get_scorer("log_predictive_density")(outer, X, y) == pytest.approx(expected, rel=1e-12)


def test_log_predictive_density_of_a_bimodal_ensemble_is_the_mixture_not_the_gaussian(small_mlps):
    # Members pushed 3 standardised units up (two) and down (two) disagree:
    # the predictive has two modes. The scorer must give the mixture density
    # computed here member by member, which is far from the Gaussian NLL.
    model = copy.deepcopy(small_mlps["ensemble"])
    network = model.module_["network"]
    with torch.no_grad():
        network.layers[-1].weight[:2, -1] += 3.0  # the last row of a member's weight is its bias
        network.layers[-1].weight[2:, -1] -= 3.0
    X, _ = _sine_rows(50, 3)
    with torch.no_grad():
        f = network(torch.as_tensor(X, dtype=torch.float64))[..., 0].numpy()  # (4, 50), standardised
    f = f * model._y_scale[0] + model._y_mean[0]
    sigma = model.module_["likelihood"].noise_std.detach().numpy().ravel() * model._y_scale[0]  # (4,)
    # y drawn from the mixture: a random member per row, plus its noise
    rng = np.random.default_rng(4)
    member = rng.integers(0, 4, size=50)
    y = f[member, np.arange(50)] + sigma[member] * rng.normal(size=50)

    density = np.mean(np.exp(-0.5 * ((y - f) / sigma[:, None]) ** 2) / (np.sqrt(2 * np.pi) * sigma[:, None]), axis=0)
    log_lik = get_scorer("log_predictive_density")(model, X, y)
    assert log_lik == pytest.approx(np.mean(np.log(density)), rel=1e-8)
    # the Gaussian with the mixture's mean and variance (mean of sigma_m^2 + f_m^2, minus the squared mean)
    mean = f.mean(0)
    std = np.sqrt(np.mean(f**2 + sigma[:, None] ** 2, axis=0) - mean**2)
    gaussian = get_scorer("neg_gaussian_nll")(model, X, y)
    assert gaussian == pytest.approx(np.mean(stats.norm.logpdf(y, mean, std)), rel=1e-6)
    assert log_lik > gaussian + 0.5  # y lies at the modes, the Gaussian puts its mass between them


@pytest.mark.parametrize("pipeline", [False, True])
def test_log_predictive_density_scorer_falls_back_to_the_gaussian(regression_data, pipeline):
    X, y = regression_data
    model = make_pipeline(StandardScaler(), BayesianRidge()) if pipeline else BayesianRidge()
    model.fit(X[:80], y[:80])
    mean, std = model.predict(X[80:], return_std=True)
    expected = np.mean(stats.norm.logpdf(y[80:], loc=mean, scale=std))
    assert get_scorer("log_predictive_density")(model, X[80:], y[80:]) == pytest.approx(expected, rel=1e-12)
    assert get_scorer("neg_gaussian_nll")(model, X[80:], y[80:]) == pytest.approx(expected, rel=1e-12)


def test_log_predictive_density_scorer_sums_the_outputs_of_a_row():
    rng = np.random.default_rng(5)
    X = rng.uniform(-2, 2, size=(30, 1))
    Y = np.column_stack([np.sin(X[:, 0]), np.cos(X[:, 0])]) + 0.1 * rng.normal(size=(30, 2))
    model = GaussianProcessRegressor(alpha=0.01).fit(X[:20], Y[:20])
    mean, std = model.predict(X[20:], return_std=True)
    expected = np.mean(stats.norm.logpdf(Y[20:], mean, std).sum(axis=1))  # nats per row
    assert get_scorer("log_predictive_density")(model, X[20:], Y[20:]) == pytest.approx(expected, rel=1e-12)


# The 200 points +-(j + 0.25) / 100, j = 0..99. The interval [-c/2, c/2]
# holds those with j + 0.25 <= 50 c (no point on a bound): j <= 47, 96
# points, for c = 0.95; j <= 24, 50 points, for c = 0.5.
_GRID_Y = np.concatenate([-(np.arange(100) + 0.25) / 100, (np.arange(100) + 0.25) / 100])


def test_interval_coverage_error_metric():
    assert interval_coverage_error(_GRID_Y, -0.475 * np.ones(200), 0.475 * np.ones(200)) == pytest.approx(0.47)
    assert interval_coverage_error(_GRID_Y, -0.25 * np.ones(200), 0.25 * np.ones(200), coverage=0.5) == 0.25
    assert interval_coverage_error([0.0, 2.0], [-1, -1], [1, 1], coverage=0.5) == 0
    with pytest.raises(ValueError, match="coverage"):
        interval_coverage_error([0.0], [-1], [1], coverage=1.0)


def test_coverage_error_scorer_uses_the_estimators_own_interval():
    X = np.column_stack([np.linspace(0, 1, 200), np.ones(200)])
    stub = _IntervalStub().fit(X, _GRID_Y)
    assert get_scorer("neg_interval_coverage_error")(stub, X, _GRID_Y) == pytest.approx(-abs(96 / 200 - 0.95))
    assert stub.last_coverage_ == 0.95
    at_half = make_probabilistic_scorer(interval_coverage_error, response="interval", coverage=0.5)
    assert at_half(stub, X, _GRID_Y) == pytest.approx(-abs(50 / 200 - 0.5))
    assert stub.last_coverage_ == 0.5
    # the interval score of the same interval: width 0.95 plus 2/0.05 times the misses' distance
    miss = np.maximum(np.abs(_GRID_Y) - 0.475, 0)
    assert get_scorer("neg_interval_score")(stub, X, _GRID_Y) == pytest.approx(-np.mean(0.95 + 40 * miss))
    # in a pipeline, the last step gets the transformed X
    pipe = make_pipeline(StandardScaler(), _IntervalStub()).fit(X, _GRID_Y)
    assert get_scorer("neg_interval_coverage_error")(pipe, X, _GRID_Y) == pytest.approx(-abs(96 / 200 - 0.95))
    np.testing.assert_allclose(pipe[-1].last_X_, StandardScaler().fit_transform(X))
    with pytest.raises(ValueError, match="coverage"):
        make_probabilistic_scorer(interval_coverage_error, response="interval", coverage=95)


def test_coverage_error_scorer_falls_back_to_the_gaussian_interval(regression_data):
    X, y = regression_data
    model = BayesianRidge().fit(X[:80], y[:80])
    mean, std = model.predict(X[80:], return_std=True)
    for coverage in (0.95, 0.6):
        z = stats.norm.ppf(0.5 + coverage / 2)
        inside = np.mean(np.abs(y[80:] - mean) <= z * std)
        scorer = make_probabilistic_scorer(interval_coverage_error, response="interval", coverage=coverage)
        assert scorer(model, X[80:], y[80:]) == pytest.approx(-abs(inside - coverage))
    assert get_scorer("neg_interval_coverage_error")(model, X[80:], y[80:]) == pytest.approx(
        -abs(np.mean(np.abs(y[80:] - mean) <= stats.norm.ppf(0.975) * std) - 0.95)
    )


def test_crps_scorer_from_draws_matches_the_closed_form_of_a_gaussian_predictive():
    rng = np.random.default_rng(6)
    X = np.column_stack([rng.normal(size=2500), rng.uniform(-1, 1, size=2500)])
    stub = _GaussianStub().fit(X, None)
    y = X[:, 0] + (0.5 + np.abs(X[:, 1])) * rng.normal(size=2500)
    mean, std = stub.predict(X, return_std=True)
    exact = -crps_gaussian(y, mean, y_std=std)
    assert get_scorer("neg_gaussian_crps")(stub, X, y) == pytest.approx(exact, rel=1e-12)
    from_draws = get_scorer("neg_crps")(stub, X, y)
    assert stub.max_rows_ == 1000  # drawn in blocks of 1,000 rows
    # 100 draws per row, fair estimator: unbiased; the Monte-Carlo standard
    # error of the mean over 2,500 rows is about 0.0013 here (0.07 per row)
    assert from_draws == pytest.approx(exact, abs=0.01)
    assert from_draws != exact
    # exactly crps_ensemble of sample_y(X, n_samples=100, random_state=0) on one block
    assert get_scorer("neg_crps")(stub, X[:500], y[:500]) == -crps_ensemble(
        y[:500], stub.sample_y(X[:500], n_samples=100, random_state=0)
    )


def test_crps_scorer_uses_the_closed_form_without_a_predictive_density(regression_data):
    X, y = regression_data
    # BayesianRidge has no sample_y; GaussianProcessRegressor has one, but its predictive is Gaussian.
    for model in (BayesianRidge(), GaussianProcessRegressor(alpha=1.0, normalize_y=True)):
        model.fit(X[:80], y[:80])
        mean, std = model.predict(X[80:], return_std=True)
        assert get_scorer("neg_crps")(model, X[80:], y[80:]) == pytest.approx(
            -crps_gaussian(y[80:], mean, y_std=std), rel=1e-12
        )


def test_crps_scorer_draws_from_an_mlp(small_mlps):
    model = small_mlps["ensemble"]
    X, y = _sine_rows(40, 7)
    samples = model.sample_y(X, n_samples=100, random_state=0)
    assert get_scorer("neg_crps")(model, X, y) == pytest.approx(-crps_ensemble(y, samples), rel=1e-12)


@_short_fit
def test_multi_metric_grid_search_and_cross_validate_with_scorer_objects():
    X, y = _sine_rows(60, 8)
    scoring = {
        "ll": get_scorer("log_predictive_density"),
        "coverage": get_scorer("neg_interval_coverage_error"),
        "crps": get_scorer("neg_crps"),
        "r2": "r2",
    }
    pipe = make_pipeline(StandardScaler(), _small_mlp(MCDropout(dropout_rate=0.1)))
    cv = KFold(2, shuffle=True, random_state=0)
    grid = {"bayesianmlpregressor__prior_scale": [0.1, 10.0]}
    search = GridSearchCV(pipe, grid, scoring=scoring, refit="ll", cv=cv).fit(X, y)
    assert search.best_index_ == np.argmax(search.cv_results_["mean_test_ll"])
    assert search.best_score_ == search.cv_results_["mean_test_ll"][search.best_index_]
    assert np.all(search.cv_results_["mean_test_coverage"] <= 0)

    result = cross_validate(pipe, X, y, cv=cv, scoring=scoring, return_estimator=True)
    for fold, ((_, test), fitted) in enumerate(zip(cv.split(X), result["estimator"])):
        Xt = fitted[:-1].transform(X[test])
        lower, upper = fitted[-1].predict_interval(Xt)
        assert result["test_ll"][fold] == pytest.approx(np.mean(fitted[-1].log_predictive_density(Xt, y[test])))
        assert result["test_coverage"][fold] == pytest.approx(-abs(interval_coverage(y[test], lower, upper) - 0.95))
        samples = fitted[-1].sample_y(Xt, n_samples=100, random_state=0)
        assert result["test_crps"][fold] == pytest.approx(-crps_ensemble(y[test], samples))
    # scikit-learn does not know skbayes' names as strings
    with pytest.raises(ValueError, match="log_predictive_density"):
        GridSearchCV(pipe, grid, scoring="log_predictive_density", cv=cv).fit(X, y)


def test_new_scorers_pickle_and_repr(small_mlps):
    X, y = _sine_rows(30, 9)
    model = small_mlps["ensemble"]
    names = ["log_predictive_density", "neg_crps", "neg_gaussian_crps", "neg_interval_coverage_error"]
    for name in names:
        scorer = get_scorer(name)
        assert repr(scorer) == f"get_scorer({name!r})"
        assert pickle.loads(pickle.dumps(scorer))(model, X, y) == scorer(model, X, y)
        assert name in get_scorer_names(probabilistic_only=True)
    custom = make_probabilistic_scorer(interval_coverage_error, response="interval", coverage=0.9)
    assert repr(custom) == "make_probabilistic_scorer(interval_coverage_error, response='interval', coverage=0.9)"
    restored = pickle.loads(pickle.dumps(custom))
    assert restored(model, X, y) == custom(model, X, y)
