"""``predict_quantiles(X, quantiles)``: one method on every regressor, ``predict_interval`` its central pair, and ``predict_cdf``.

The quantiles are checked against computations that do not invert the
predictive's CDF: scipy's normal quantiles of the predictive mean and
standard deviation where the predictive is Gaussian, and the empirical
quantiles of 40,000 draws of ``sample_y`` where it is a mixture (the
Bayesian MLP's, every noise model; the sampled sparse GP's over its kept
samples), and scipy's CDF of the deep GP's
mixture components at the returned quantiles. ``predict_cdf`` is checked
against the quantiles (it inverts them) and against the density
``log_predictive_density`` (its derivative, by central differences), so that
the three views of the predictive are one distribution.
"""

import warnings

import numpy as np
import pytest
from scipy.stats import norm
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from sklearn.linear_model import BayesianRidge

from skbayes import BayesianMLPRegressor, DeepGPRegressor, PredictiveStackingRegressor, SparseGPRegressor
from skbayes.inference import SGHMC, DeepEnsemble, MeanFieldVI, SampledSparseGP, SparseVariational

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

LEVELS = [0.05, 0.25, 0.5, 0.75, 0.95]

# name -> (estimator, whether its quantiles are the Gaussian's of the predictive mean and std)
REGRESSORS = {
    "mlp_homoscedastic": (lambda: BayesianMLPRegressor((8,), inference=MeanFieldVI(max_iter=20), noise="homoscedastic",
                                                       random_state=0), False),
    "mlp_ensemble_homoscedastic": (lambda: BayesianMLPRegressor(
        (8,), inference=DeepEnsemble(n_estimators=3, max_iter=20), noise="homoscedastic", random_state=0), False),
    "mlp_student_t": (lambda: BayesianMLPRegressor((8,), inference=MeanFieldVI(max_iter=20), noise="student_t",
                                                   random_state=0), False),
    "mlp_heteroscedastic": (lambda: BayesianMLPRegressor((8,), inference=MeanFieldVI(max_iter=20), noise="heteroscedastic",
                                                         random_state=0), False),
    "sparse_gp": (lambda: SparseGPRegressor(n_inducing=8, random_state=0, inference=SparseVariational(max_iter=10)), True),
    "sampled_sparse_gp": (lambda: SparseGPRegressor(
        n_inducing=8, batch_size=40, random_state=0,
        inference=SampledSparseGP(
            SGHMC(burn_in=3, thinning=2, n_kept_samples=4), start=SparseVariational(max_iter=10),
        ),
    ), False),
    "sparse_gp_student_t": (lambda: SparseGPRegressor(n_inducing=8, noise="student_t", random_state=0,
                                                      inference=SparseVariational(max_iter=10)), False),
    "deep_gp": (lambda: DeepGPRegressor(n_inducing=8, random_state=0, inference=SparseVariational(max_iter=5)), False),
    "stacking": (lambda: PredictiveStackingRegressor(
        [("linear", BayesianRidge()),
         ("mlp", BayesianMLPRegressor((8,), inference=MeanFieldVI(max_iter=20), noise="student_t", random_state=0))],
        cv=2, random_state=0), False),
}


@pytest.fixture(scope="module")
def data():
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, (80, 2))
    return X, np.sin(X[:, 0]) + 0.1 * rng.randn(80)


@pytest.fixture(scope="module")
def fitted(data):
    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return {name: make().fit(X, y) for name, (make, _) in REGRESSORS.items()}


@pytest.mark.parametrize("name", sorted(REGRESSORS))
def test_quantiles_are_those_of_the_predictive(name, fitted, data):
    model, X = fitted[name], data[0][:6]
    quantiles = model.predict_quantiles(X, LEVELS)
    assert quantiles.shape == (6, len(LEVELS))
    assert np.all(np.diff(quantiles, axis=1) > 0)
    if REGRESSORS[name][1]:
        mean, std = model.predict(X, return_std=True)
        np.testing.assert_allclose(quantiles, mean[:, None] + std[:, None] * norm.ppf(LEVELS), rtol=1e-12)
    elif name == "deep_gp":  # the mixture of its n_mc_predict components: scipy's CDF there is the level
        mean, var = model._mixture(model._validate_X_predict(X), lambda m, v, noise_var, rows: (m, v))
        std = np.sqrt(np.asarray(var) + (model.noise_std_ / model._y_scale) ** 2) * model._y_scale
        mean = np.asarray(mean) * model._y_scale + model._y_mean
        cdf = norm.cdf(quantiles[:, None, :], mean[:, :, None], std[:, :, None]).mean(axis=1)
        np.testing.assert_allclose(cdf, np.broadcast_to(LEVELS, cdf.shape), atol=1e-7)
    else:  # a mixture over fixed draws or kept samples: the empirical quantiles of many draws from it
        draws = model.sample_y(X, n_samples=40_000, random_state=1)
        empirical = np.quantile(draws, LEVELS, axis=1).T
        spread = quantiles[:, -1] - quantiles[:, 0]
        error = np.abs(quantiles - empirical) / spread[:, None]
        assert error.max() < 0.03, error.max()


@pytest.mark.parametrize("name", sorted(REGRESSORS))
def test_the_interval_is_the_central_pair_of_quantiles(name, fitted, data):
    model, X = fitted[name], data[0][:6]
    lower, upper = model.predict_interval(X, coverage=0.8)
    quantiles = model.predict_quantiles(X, [0.1, 0.9])
    np.testing.assert_allclose(lower, quantiles[:, 0], rtol=1e-12)
    np.testing.assert_allclose(upper, quantiles[:, 1], rtol=1e-12)


def test_several_outputs_give_a_quantile_axis_last(data):
    X, y = data
    Y = np.column_stack([y, 2 * y + 1])
    model = BayesianMLPRegressor((8,), inference=MeanFieldVI(max_iter=10), noise="student_t", random_state=0)
    quantiles = model.fit(X, Y).predict_quantiles(X[:4], [0.1, 0.5, 0.9])
    assert quantiles.shape == (4, 2, 3)
    lower, upper = model.predict_interval(X[:4], coverage=0.8)
    np.testing.assert_allclose(lower, quantiles[..., 0], rtol=1e-12)
    np.testing.assert_allclose(upper, quantiles[..., 2], rtol=1e-12)


@pytest.mark.parametrize("levels", [[0.0, 0.5], [0.5, 1.0], [], [[0.1, 0.9]], [np.nan], "0.5"])
def test_bad_levels_are_refused(levels, fitted, data):
    # a string is refused by the argument's constraint (array-like), the others by the level check
    match = "'quantiles' parameter" if isinstance(levels, str) else "quantiles must be a non-empty 1-D array of levels in"
    with pytest.raises(ValueError, match=match):
        fitted["sparse_gp"].predict_quantiles(data[0][:3], levels)


@pytest.mark.parametrize("name", sorted(REGRESSORS))
def test_before_fit_both_methods_say_so(name, data):
    model = REGRESSORS[name][0]()
    with pytest.raises(NotFittedError):
        model.predict_quantiles(data[0][:3], [0.5])
    with pytest.raises(NotFittedError):
        model.predict_interval(data[0][:3])


@pytest.mark.parametrize("name", sorted(REGRESSORS))
def test_the_cdf_inverts_the_quantiles(name, fitted, data):
    model, X = fitted[name], data[0][:6]
    quantiles = model.predict_quantiles(X, LEVELS)
    cdf = np.column_stack([model.predict_cdf(X, quantiles[:, j]) for j in range(len(LEVELS))])
    np.testing.assert_allclose(cdf, np.broadcast_to(LEVELS, cdf.shape), atol=1e-6)


@pytest.mark.parametrize("name", sorted(REGRESSORS))
def test_the_cdf_s_derivative_is_the_density(name, fitted, data):
    model, X = fitted[name], data[0][:6]
    y = model.predict_quantiles(X, [0.2, 0.5, 0.9])
    for j in range(y.shape[1]):
        h = 1e-4 * (1 + np.abs(y[:, j]))
        slope = (model.predict_cdf(X, y[:, j] + h) - model.predict_cdf(X, y[:, j] - h)) / (2 * h)
        np.testing.assert_allclose(slope, np.exp(model.log_predictive_density(X, y[:, j])), rtol=1e-4)


def test_the_cdf_refuses_a_target_of_another_shape(fitted, data):
    X = data[0][:6]
    for name in ("mlp_homoscedastic", "sparse_gp", "stacking"):
        with pytest.raises(ValueError):
            fitted[name].predict_cdf(X, np.zeros(5))
        with pytest.raises(ValueError):
            fitted[name].predict_cdf(X, np.full(6, np.nan))
