"""PredictiveStackingRegressor: the weights, the mixture, the choice between families, and bad input.

The weights are checked against scipy's constrained optimiser of the same
objective; the mixture's density, moments and quantiles against the
members' Gaussians combined here by hand; the choice on data where one
family is the right model.
"""

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import brentq, minimize
from scipy.special import logsumexp
from scipy.stats import norm
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.linear_model import BayesianRidge, LinearRegression

from skbayes import BayesianMLPRegressor, PredictiveStackingRegressor
from skbayes.ensemble import stacking_weights
from skbayes.ensemble._stacking import EXACT_GP_MAX_ROWS, _default_estimators
from skbayes.inference import MeanFieldVI


def _gp():
    return GaussianProcessRegressor(RBF() + WhiteKernel(0.1), normalize_y=True)


def _members():
    return [("linear", BayesianRidge()), ("gp", _gp())]


@pytest.fixture(scope="module")
def sine():
    rng = np.random.RandomState(0)
    X = rng.uniform(-3, 3, (160, 1))
    y = np.sin(2 * X[:, 0]) + 0.2 * rng.randn(160)
    return X[:120], y[:120], X[120:], y[120:]


@pytest.fixture(scope="module")
def linear():
    rng = np.random.RandomState(1)
    X = rng.randn(160, 3)
    y = X @ [1.0, -2.0, 0.5] + 0.5 * rng.randn(160)
    return X[:120], y[:120], X[120:], y[120:]


@pytest.fixture(scope="module")
def fitted(sine):
    X, y, _, _ = sine
    return PredictiveStackingRegressor(_members(), random_state=0).fit(X, y)


@pytest.mark.parametrize("seed", range(4))
def test_the_weights_maximise_the_held_out_log_score(seed):
    rng = np.random.RandomState(seed)
    log_density = rng.randn(200, 3) * 2 + np.array([0.0, 0.3, -0.5])
    weights = stacking_weights(log_density)

    def objective(w):
        return -np.mean(logsumexp(log_density, axis=1, b=np.maximum(w, 0)[None, :]))

    scipy = minimize(objective, np.full(3, 1 / 3), method="SLSQP", bounds=[(0, 1)] * 3,
                     constraints=[{"type": "eq", "fun": lambda w: w.sum() - 1}], options={"ftol": 1e-14})
    assert weights.sum() == pytest.approx(1.0)
    assert objective(weights) <= scipy.fun + 1e-8
    np.testing.assert_allclose(weights, np.maximum(scipy.x, 0), atol=1e-3)


def test_a_member_that_is_best_everywhere_takes_all_the_weight():
    rng = np.random.RandomState(0)
    log_density = rng.randn(100, 2)
    log_density[:, 1] = log_density[:, 0] + 1.0  # member 1's density is e times member 0's on every row
    np.testing.assert_allclose(stacking_weights(log_density), [0.0, 1.0], atol=1e-6)


def test_the_weights_refuse_nan():
    with pytest.raises(ValueError, match="NaN"):
        stacking_weights(np.array([[0.0, np.nan]]))


def test_the_gp_takes_the_weight_on_a_sine_and_the_linear_model_on_a_line(sine, linear, fitted):
    assert fitted.stacking_weights_["gp"] > 0.95
    X, y, _, _ = linear
    model = PredictiveStackingRegressor(_members(), random_state=0).fit(X, y)
    assert model.cv_log_predictive_density_["linear"] >= model.cv_log_predictive_density_["gp"] - 0.05
    assert model.stacking_weights_["linear"] > 0.3


@pytest.mark.parametrize("data", ["sine", "linear"])
def test_held_out_density_is_at_least_the_best_member_s(data, request):
    X, y, X_test, y_test = request.getfixturevalue(data)
    model = PredictiveStackingRegressor(_members(), random_state=0).fit(X, y)
    best = max(np.mean(norm.logpdf(y_test, *clone(m).fit(X, y).predict(X_test, return_std=True)))
               for _, m in _members())
    assert np.mean(model.log_predictive_density(X_test, y_test)) >= best - 0.02


def test_density_moments_and_quantiles_are_those_of_the_weighted_mixture(fitted, sine):
    X = sine[2][:5]
    weights = fitted.weights_
    moments = [m.predict(X, return_std=True) for m in fitted.estimators_]
    means, stds = np.array([m for m, _ in moments]), np.array([s for _, s in moments])
    y = sine[3][:5]
    expected = np.log(np.sum(weights[:, None] * norm.pdf(y, means, stds), axis=0))
    np.testing.assert_allclose(fitted.log_predictive_density(X, y), expected, rtol=1e-10)
    mean = weights @ means
    second = weights @ (stds**2 + means**2)
    got_mean, got_std = fitted.predict(X, return_std=True)
    np.testing.assert_allclose(got_mean, mean, rtol=1e-10)
    np.testing.assert_allclose(got_std, np.sqrt(second - mean**2), rtol=1e-8)
    quantiles = fitted.predict_quantiles(X, [0.1, 0.9])
    for i in range(5):
        for j, q in enumerate([0.1, 0.9]):
            root = brentq(lambda v: weights @ norm.cdf(v, means[:, i], stds[:, i]) - q, -20, 20, xtol=1e-12)
            assert quantiles[i, j] == pytest.approx(root, abs=1e-8)


def test_uncertainty_splits_by_source(fitted, sine):
    X = sine[2][:5]
    result = fitted.predict_uncertainty(X)
    np.testing.assert_allclose(result.std**2, result.epistemic_std**2 + result.aleatoric_std**2, rtol=1e-8)
    # the GP's aleatoric part is its white-noise level (in y units, normalize_y)
    gp = fitted.named_estimators_["gp"]
    noise = gp.kernel_.k2.noise_level * gp._y_train_std**2
    linear = 1 / fitted.named_estimators_["linear"].alpha_ if "linear" in fitted.named_estimators_ else 0.0
    w = dict(zip(fitted.named_estimators_, fitted.weights_))
    expected = w["gp"] * noise + w.get("linear", 0.0) * linear
    np.testing.assert_allclose(result.aleatoric_std**2, expected, rtol=1e-8)


class _NoSplit(RegressorMixin, BaseEstimator):
    """BayesianRidge's predictive, from a regressor the stacker does not know."""

    def __init__(self, alpha_1=1e-6):
        self.alpha_1 = alpha_1

    def fit(self, X, y):
        self.model_ = BayesianRidge(alpha_1=self.alpha_1).fit(X, y)
        return self

    def predict(self, X, return_std=False):
        return self.model_.predict(X, return_std=return_std)


def test_a_member_without_a_variance_split_gives_nan(sine):
    X, y, X_test, _ = sine

    model = PredictiveStackingRegressor([("a", _NoSplit()), ("b", _NoSplit(1e-3))], random_state=0).fit(X, y)
    result = model.predict_uncertainty(X_test[:3])
    assert np.all(np.isfinite(result.std)) and np.all(np.isnan(result.epistemic_std))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_same_random_state_same_fit(sine):
    X, y, X_test, _ = sine
    members = [*_members(), ("mlp", BayesianMLPRegressor((8,), inference=MeanFieldVI(max_iter=20), random_state=0))]
    a = PredictiveStackingRegressor(members, cv=2, random_state=0).fit(X[:40], y[:40])
    b = PredictiveStackingRegressor(members, cv=2, random_state=0).fit(X[:40], y[:40])
    np.testing.assert_array_equal(a.predict(X_test), b.predict(X_test))
    np.testing.assert_array_equal(a.cv_log_density_, b.cv_log_density_)


def test_the_default_members_are_three_families():
    small = [type(m[-1]).__name__ for _, m in _default_estimators(100, 3, 0)]
    assert small == ["BayesianRidge", "GaussianProcessRegressor", "BayesianMLPRegressor"]
    large = [type(m[-1]).__name__ for _, m in _default_estimators(EXACT_GP_MAX_ROWS + 1, 3, 0)]
    assert large == ["BayesianRidge", "SparseGPRegressor", "BayesianMLPRegressor"]


def test_draws_follow_the_weights(fitted, sine):
    X = sine[2][:3]
    draws = fitted.sample_y(X, n_samples=20_000, random_state=0)
    assert draws.shape == (3, 20_000)
    np.testing.assert_allclose(draws.mean(axis=1), fitted.predict(X), atol=0.03)


@pytest.mark.parametrize("estimators, match", [
    ([], "empty"),
    ([("a", BayesianRidge()), ("a", BayesianRidge())], "unique"),
    ([("a", "not an estimator")], "fit/predict"),
    ([BayesianRidge()], "pairs"),
])
def test_bad_members_are_refused(estimators, match, sine):
    with pytest.raises(ValueError, match=match):
        PredictiveStackingRegressor(estimators).fit(sine[0], sine[1])


def test_a_member_without_a_predictive_std_is_refused(sine):
    with pytest.raises(TypeError):
        PredictiveStackingRegressor([("ols", LinearRegression())], cv=2).fit(sine[0], sine[1])


def test_several_targets_and_too_few_rows_are_refused(sine):
    X, y = sine[0], sine[1]
    with pytest.raises(ValueError, match="one target"):
        PredictiveStackingRegressor(_members()).fit(X, np.column_stack([y, y]))
    with pytest.raises(ValueError, match="n_samples=3"):
        PredictiveStackingRegressor(_members(), cv=5).fit(X[:3], y[:3])


def test_predict_before_fit_says_so(sine):
    with pytest.raises(NotFittedError):
        PredictiveStackingRegressor(_members()).predict(sine[2])


def test_the_weights_converge_fast_when_one_member_dominates():
    rng = np.random.RandomState(0)
    log_density = rng.randn(20_000, 3)
    log_density[:, 0] += 0.5  # member 0 is the better one on average: the optimum is on the simplex's edge
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        weights = stacking_weights(log_density)
    objective = np.mean(logsumexp(log_density, axis=1, b=weights[None, :]))
    assert objective >= np.mean(log_density[:, 0]) - 1e-9  # at least member 0 alone


def test_quantiles_of_a_dataframe_fit_do_not_warn_about_feature_names(sine):
    X, y, X_test, _ = sine
    frame, frame_test = pd.DataFrame(X, columns=["x"]), pd.DataFrame(X_test[:4], columns=["x"])
    model = PredictiveStackingRegressor(_members(), random_state=0).fit(frame, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.predict_interval(frame_test, coverage=0.9)


def test_rows_held_out_twice_are_refused(sine):
    X, y = sine[0], sine[1]
    splits = [(np.arange(60, 120), np.arange(60)), (np.arange(30, 120), np.arange(30))]
    with pytest.raises(ValueError, match="more than once"):
        PredictiveStackingRegressor(_members(), cv=splits).fit(X, y)


def test_a_gp_without_a_white_kernel_has_no_noise_split(sine):
    X, y, X_test, _ = sine
    model = PredictiveStackingRegressor([("gp", GaussianProcessRegressor(RBF(), alpha=0.05))], cv=2).fit(X, y)
    assert np.all(np.isnan(model.predict_uncertainty(X_test[:3]).aleatoric_std))
