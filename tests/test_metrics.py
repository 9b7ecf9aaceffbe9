"""skbayes.metrics: scoring rules checked against closed forms and brute force."""

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy import integrate, stats
from sklearn.datasets import make_classification, make_regression
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.linear_model import BayesianRidge, LinearRegression, LogisticRegression
from sklearn.metrics import log_loss, r2_score
from sklearn.model_selection import GridSearchCV, KFold, cross_validate
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skbayes.metrics import (
    crps_ensemble,
    crps_gaussian,
    expected_calibration_error,
    gaussian_nll,
    get_scorer,
    get_scorer_names,
    interval_coverage,
    interval_score,
    make_probabilistic_scorer,
    mean_interval_width,
    miscalibration_area,
    regression_calibration_curve,
    regression_calibration_error,
    reliability_diagram,
    sharpness,
)


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
