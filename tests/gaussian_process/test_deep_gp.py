"""Behaviour of DeepGPRegressor and the DeepGP module: one-layer reduction, mixture, API contract."""

import pickle

import numpy as np
import pytest
import torch
from scipy.linalg import cho_factor, cho_solve
from scipy.stats import norm
from sklearn.decomposition import PCA
from sklearn.exceptions import NotFittedError
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skbayes import DeepGPRegressor, SparseGPRegressor
from skbayes.datasets import get_uci_split, load_uci
from skbayes.nn import linear_mean_weights
from skbayes.nn.gp.kernels import WhiteNoise
from skbayes.inference import SparseVariational

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

NOISE = 0.1


def _step(n, seed, low=-2.0, high=2.0):
    """A step function, which a two-layer deep GP fits and a stationary GP smooths over."""
    rng = np.random.RandomState(seed)
    X = rng.uniform(low, high, size=(n, 1))
    return X, np.sign(X[:, 0]) + NOISE * rng.randn(n)


@pytest.fixture(scope="module")
def step_data():
    return _step(400, 0), _step(2000, 1)


@pytest.fixture(scope="module")
def fitted(step_data):
    (X, y), _ = step_data
    return DeepGPRegressor(
        n_inducing=20, random_state=0,
        inference=SparseVariational(max_iter=300, n_iter_no_change=300),
    ).fit(X, y)


# ------------------------------------------------------------ one-layer case
def test_one_layer_is_the_sparse_gp():
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, size=(300, 2))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.2 * rng.randn(300)
    X_test = rng.uniform(-3, 3, size=(50, 2))
    settings = {"n_inducing": 15, "inference": SparseVariational(max_iter=40, n_iter_no_change=100), "batch_size": 100,
                "random_state": 3}
    sparse = SparseGPRegressor(**settings).fit(X, y)
    deep = DeepGPRegressor((), **settings).fit(X, y)
    # Same initial state (first epoch starts there) and the same training, step by step.
    np.testing.assert_allclose(deep.loss_curve_, sparse.loss_curve_, rtol=1e-10)
    np.testing.assert_allclose(deep.inducing_points_[0], sparse.inducing_points_, rtol=1e-9, atol=1e-12)
    assert deep.noise_std_ == pytest.approx(sparse.noise_std_, rel=1e-9)
    for ours, theirs in zip(deep.predict(X_test, return_std=True), sparse.predict(X_test, return_std=True)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12)
    y_test = np.sin(2 * X_test[:, 0]) + 0.5 * X_test[:, 1]
    np.testing.assert_allclose(
        deep.log_predictive_density(X_test, y_test), sparse.log_predictive_density(X_test, y_test), rtol=1e-9
    )
    lower, upper = deep.predict_interval(X_test, coverage=0.9)
    sparse_lower, sparse_upper = sparse.predict_interval(X_test, coverage=0.9)
    np.testing.assert_allclose(lower, sparse_lower, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(upper, sparse_upper, rtol=1e-7, atol=1e-9)


# ---------------------------------------------------------------- the module
def test_linear_mean_weights_are_salimbenis():
    rng = np.random.RandomState(0)
    h = rng.randn(200, 4) @ rng.randn(4, 4) + 3.0
    h_t = torch.tensor(h)
    np.testing.assert_array_equal(linear_mean_weights(h_t, 4).numpy(), np.eye(4))
    np.testing.assert_array_equal(linear_mean_weights(h_t, 6).numpy(), np.hstack([np.eye(4), np.zeros((4, 2))]))
    weight = linear_mean_weights(h_t, 2).numpy()
    components = PCA(2).fit(h).components_  # the top principal directions
    np.testing.assert_allclose(np.abs(np.sum(weight * components.T, axis=0)), 1.0, rtol=1e-8)


def _brute_force_components(model, X, n_draws, seed):
    """Component means and variances (standardised units) by explicit unwhitened GP algebra in numpy.

    Uses the same standard normals as the model (drawn here from the same
    CPU generator), so that the comparison is exact.
    """
    dgp = model.module_["dgp"]
    generator = torch.Generator().manual_seed(seed)
    eps = [torch.randn(n_draws, 1, gp.n_latent, generator=generator, dtype=torch.float64).numpy() for gp in dgp.layers[:-1]]

    def layer(gp, h):
        with torch.no_grad():
            z = gp.inducing_points.numpy()
            kzz = gp.kernel(gp.inducing_points, gp.inducing_points).numpy()
            kzx = gp.kernel(gp.inducing_points, torch.tensor(h)).numpy()
            kxx = gp.kernel.diag(torch.tensor(h)).numpy()
            chol = np.linalg.cholesky(kzz + gp.jitter * np.mean(np.diag(kzz)) * np.eye(len(z)))
            m = np.atleast_2d(gp.q_mean.numpy())
            lq = gp.q_scale_tril.numpy().reshape(m.shape[0], len(z), len(z))
            c = np.atleast_1d(gp.mean_constant.numpy())
        factor = cho_factor(kzz + gp.jitter * np.mean(np.diag(kzz)) * np.eye(len(z)), lower=True)
        proj = cho_solve(factor, kzx)  # K_zz^-1 K_zx
        means, variances = [], []
        for j in range(m.shape[0]):
            u_mean = chol @ m[j]  # u = L_zz v
            u_cov = chol @ lq[j] @ lq[j].T @ chol.T
            means.append(proj.T @ u_mean + c[j])
            variances.append(kxx - np.sum(kzx * proj, 0) + np.sum(proj * (u_cov @ proj), 0))
        return np.stack(means, -1), np.maximum(np.stack(variances, -1), 0)

    means, variances = [], []
    for s in range(n_draws):
        h = X
        for index, gp in enumerate(dgp.layers[:-1]):
            mean, var = layer(gp, h)
            h = h @ dgp.mean_weight(index).numpy() + mean + np.sqrt(var) * eps[index][s]
        mean, var = layer(dgp.layers[-1], h)
        means.append(mean[:, 0])
        variances.append(var[:, 0])
    return np.array(means).T, np.array(variances).T


def test_mixture_density_matches_brute_force(fitted, step_data):
    _, (X_test, y_test) = step_data
    X_test, y_test = X_test[:60], y_test[:60]
    model = fitted.set_params(n_mc_predict=25)
    means, variances = _brute_force_components(model, X_test, 25, model._predict_seed)
    means, variances = means * model._y_scale + model._y_mean, variances * model._y_scale**2
    stds = np.sqrt(variances + model.noise_std_**2)
    density = np.mean([norm.pdf(y_test, means[:, s], stds[:, s]) for s in range(25)], axis=0)
    np.testing.assert_allclose(model.log_predictive_density(X_test, y_test), np.log(density), rtol=1e-6)
    mean, std = model.predict(X_test, return_std=True)
    np.testing.assert_allclose(mean, means.mean(1), rtol=1e-6, atol=1e-9)
    second_moment = np.mean(stds**2 + means**2, axis=1)
    np.testing.assert_allclose(std, np.sqrt(second_moment - means.mean(1) ** 2), rtol=1e-6)
    lower, upper = model.predict_interval(X_test, coverage=0.8)
    cdf = lambda q: np.mean(norm.cdf((q[:, None] - means) / stds), axis=1)  # noqa: E731
    np.testing.assert_allclose(cdf(lower), 0.1, atol=1e-8)
    np.testing.assert_allclose(cdf(upper), 0.9, atol=1e-8)
    fitted.set_params(n_mc_predict=100)


def test_prediction_does_not_depend_on_the_other_rows(fitted, step_data):
    _, (X_test, _) = step_data
    full = fitted.predict(X_test[:40], return_std=True)
    part = fitted.predict(X_test[10:20], return_std=True)
    for a, b in zip(full, part):
        np.testing.assert_allclose(a[10:20], b, rtol=1e-12)
    np.testing.assert_array_equal(fitted.predict(X_test[:40]), full[0])  # the same draws every call


def test_blocks_share_each_layers_cholesky_and_give_the_one_block_predictions(fitted, step_data, monkeypatch):
    import skbayes.base
    from skbayes.nn.gp import SVGP

    _, (X_test, y_test) = step_data
    X_test, y_test = X_test[:90], y_test[:90]
    one_block = fitted.predict(X_test, return_std=True), fitted.log_predictive_density(X_test, y_test)
    calls = []
    original = SVGP.chol_zz
    monkeypatch.setattr(SVGP, "chol_zz", lambda gp: calls.append(gp) or original(gp))
    # blocks of 7 rows: a block holds PREDICT_BLOCK_BYTES, a row S x width x (3M + 2) float64 values
    width = max((*fitted.hidden_layer_sizes_, fitted.n_features_in_))
    row_bytes = 8 * fitted._n_components() * width * (3 * fitted.n_inducing_ + 2)
    monkeypatch.setattr(skbayes.base, "PREDICT_BLOCK_BYTES", 7 * row_bytes)
    blocks = fitted.predict(X_test, return_std=True), fitted.log_predictive_density(X_test, y_test)
    layers = fitted.module_["dgp"].layers
    assert len(calls) == 2 * len(layers)  # once per layer and prediction, not per block
    assert {id(gp) for gp in calls} == {id(gp) for gp in layers}
    for a, b in zip((*one_block[0], one_block[1]), (*blocks[0], blocks[1])):
        np.testing.assert_allclose(b, a, rtol=1e-10)  # matrix products of other sizes: round-off only


# --------------------------------------------------------------- behaviour
def test_same_random_state_same_results(step_data):
    (X, y), (X_test, _) = step_data
    params = {"n_inducing": 10, "inference": SparseVariational(max_iter=20), "n_mc_predict": 10}
    first = DeepGPRegressor(random_state=1, **params).fit(X, y)
    second = DeepGPRegressor(random_state=1, **params).fit(X, y)
    other = DeepGPRegressor(random_state=2, **params).fit(X, y)
    assert first.loss_curve_ == second.loss_curve_
    np.testing.assert_array_equal(first.predict(X_test), second.predict(X_test))
    np.testing.assert_array_equal(first.sample_y(X_test[:5], 3), second.sample_y(X_test[:5], 3))
    assert not np.allclose(first.predict(X_test), other.predict(X_test))


def test_noise_recovery_and_the_step_function(fitted, step_data):
    (X, y), (X_test, y_test) = step_data
    # The noise std is 0.1; a stationary GP must smear the step into extra noise.
    assert abs(fitted.noise_std_ - NOISE) < 0.03
    sparse = SparseGPRegressor(n_inducing=20, random_state=0, inference=SparseVariational(max_iter=300)).fit(X, y)
    assert sparse.noise_std_ > fitted.noise_std_
    assert fitted.log_predictive_density(X_test, y_test).mean() > sparse.log_predictive_density(X_test, y_test).mean()


def test_interval_coverage(fitted, step_data):
    _, (X_test, y_test) = step_data
    for coverage in (0.5, 0.9):
        lower, upper = fitted.predict_interval(X_test, coverage=coverage)
        assert np.all(lower < upper)
        # 2000 held-out points: the binomial std of the rate is at most 0.011; the fitted noise std
        # (about 0.11 for a true 0.1) widens the 50% interval to about 55% coverage.
        assert abs(np.mean((lower <= y_test) & (y_test <= upper)) - coverage) < 0.07


def test_uncertainty_grows_away_from_the_data(fitted):
    result = fitted.predict_uncertainty(np.array([[-1.0], [1.0], [-6.0], [6.0]]))
    assert np.all(result.epistemic_std[2:] > 3 * result.epistemic_std[:2].max())
    np.testing.assert_allclose(result.std**2, result.epistemic_std**2 + result.aleatoric_std**2)
    np.testing.assert_allclose(result.aleatoric_std, fitted.noise_std_)


def test_sample_y_draws_from_the_predictive(fitted):
    X = np.array([[-1.0], [0.05], [1.5]])
    draws = fitted.sample_y(X, n_samples=4000, random_state=0)
    assert draws.shape == (3, 4000)
    mean, std = fitted.predict(X, return_std=True)
    # Different draws than predict's (a fresh seed), so only to Monte-Carlo accuracy.
    np.testing.assert_allclose(draws.mean(1), mean, atol=5 * std.max() / np.sqrt(4000) + 0.05)
    np.testing.assert_allclose(draws.std(1), std, rtol=0.15)


def test_three_layers_and_width_and_kernel_object(step_data):
    (X, y), (X_test, _) = step_data
    X2 = np.hstack([X, np.cos(X)])
    model = DeepGPRegressor(
        (3, 3), n_inducing=10, n_mc_predict=5, random_state=0,
        inference=SparseVariational(max_iter=5),
    ).fit(X2, y)
    assert model.hidden_layer_sizes_ == (3, 3)
    assert [z.shape for z in model.inducing_points_] == [(10, 2), (10, 3), (10, 3)]
    kernel = 1.0 * RBF(1.0) + WhiteKernel(0.05)
    with_kernel = DeepGPRegressor(
        kernel=kernel, n_inducing=10, n_mc_predict=5, random_state=0,
        inference=SparseVariational(max_iter=5),
    ).fit(X, y)
    assert np.all(np.isfinite(with_kernel.predict(X_test[:5])))
    # The WhiteKernel term is the observation noise: noise_std_ is its fitted noise_level, in the units of y.
    white = [m for m in with_kernel.module_.modules() if isinstance(m, WhiteNoise)]
    assert len(white) == 2  # one per layer's copy of the kernel; the last layer's is the likelihood's
    noise_level = float(white[-1].noise_level().detach())
    assert with_kernel.noise_std_ == pytest.approx(np.sqrt(noise_level) * with_kernel._y_scale, rel=1e-6)


# ---------------------------------------------------------------- API contract
def test_pickle_round_trip(fitted, step_data):
    _, (X_test, y_test) = step_data
    loaded = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(loaded.predict(X_test[:50]), fitted.predict(X_test[:50]))
    np.testing.assert_array_equal(
        loaded.log_predictive_density(X_test[:50], y_test[:50]), fitted.log_predictive_density(X_test[:50], y_test[:50])
    )


def test_grid_search_over_depth(step_data):
    (X, y), _ = step_data
    pipe = make_pipeline(StandardScaler(), DeepGPRegressor(
        n_inducing=10, n_mc_predict=10, random_state=0,
        inference=SparseVariational(max_iter=30),
    ))
    search = GridSearchCV(pipe, {"deepgpregressor__hidden_layer_sizes": [(), ("auto",)]}, cv=2).fit(X, y)
    assert search.best_params_["deepgpregressor__hidden_layer_sizes"] in ((), ("auto",))
    assert search.predict(X[:3]).shape == (3,)


def test_bad_input():
    X, y = _step(30, 0)
    model = DeepGPRegressor(n_inducing=5, n_mc_predict=3, inference=SparseVariational(max_iter=2))
    with pytest.raises(NotFittedError):
        model.predict(X)
    with pytest.raises(ValueError, match="NaN"):
        model.fit(np.where(np.arange(30)[:, None] == 3, np.nan, X), y)
    with pytest.raises(ValueError, match="single target"):
        model.fit(X, np.column_stack([y, y]))
    with pytest.raises(ValueError, match="hidden_layer_sizes"):
        DeepGPRegressor(("wide",)).fit(X, y)
    with pytest.raises(ValueError, match="hidden_layer_sizes"):
        DeepGPRegressor((0,)).fit(X, y)
    for refused in (SparseVariational(objective="fitc"), SparseVariational(optimizer="ngd")):
        with pytest.raises(ValueError, match="DeepGPRegressor cannot use"):
            DeepGPRegressor(inference=refused).fit(X, y)
    with pytest.raises(ValueError, match="n_mc_predict"):
        DeepGPRegressor(n_mc_predict=0).fit(X, y)
    model.fit(X, y)
    with pytest.raises(ValueError, match="features"):
        model.predict(np.ones((3, 2)))
    with pytest.raises(ValueError, match="coverage"):
        model.predict_interval(X, coverage=1.5)
    with pytest.raises(ValueError, match="n_samples"):
        model.sample_y(X, n_samples=0)


def test_real_data_boston():
    X_train, X_test, y_train, y_test = get_uci_split(load_uci("bostonHousing"), 0)
    scaler = StandardScaler().fit(X_train)
    model = DeepGPRegressor(
        n_inducing=50, random_state=0,
        inference=SparseVariational(max_iter=150, n_iter_no_change=150, learning_rate_init=0.02),
    )
    model.fit(scaler.transform(X_train), y_train)
    mean = model.predict(scaler.transform(X_test))
    rmse = np.sqrt(np.mean((mean - y_test) ** 2))
    log_lik = model.log_predictive_density(scaler.transform(X_test), y_test).mean()
    # Predicting the training mean gives an RMSE of about 9 on this split; published deep GPs reach ~2.5-3.5.
    assert rmse < 0.5 * np.std(y_test)
    assert np.isfinite(log_lik) and log_lik > -3.5


# ---------------------------------------------------------------- partial_fit
def test_first_partial_fit_is_one_epoch_of_fit(step_data):
    (X, y), _ = step_data
    streamed = DeepGPRegressor(n_inducing=20, random_state=0).partial_fit(X[:200], y[:200])
    once = DeepGPRegressor(n_inducing=20, random_state=0, inference=SparseVariational(max_iter=1)).fit(X[:200], y[:200])
    assert streamed.n_iter_ == 1 and streamed.n_seen_ == 200
    assert streamed.loss_curve_ == once.loss_curve_  # same seeds, same first epoch
    for a, b in zip(streamed.inducing_points_[:-1], once.inducing_points_[:-1]):
        np.testing.assert_array_equal(a, b)


def test_streaming_partial_fit_learns_the_step_and_continues_across_a_pickle(step_data):
    (X, y), (X_test, y_test) = step_data
    model = DeepGPRegressor(n_inducing=20, random_state=0)
    before = None
    for epoch in range(40):
        for start in range(0, 400, 100):
            model.partial_fit(X[start:start + 100], y[start:start + 100])
        if epoch == 0:
            before = model.log_predictive_density(X_test, y_test).mean()
    assert model.n_iter_ == 160 and model.n_seen_ == 40 * 400
    after = model.log_predictive_density(X_test, y_test).mean()
    assert after > before + 0.3
    # the step is learned: mean error small away from the jump
    away = np.abs(X_test[:, 0]) > 0.3
    assert np.abs(model.predict(X_test[away]) - np.sign(X_test[away, 0])).mean() < 0.15
    # the optimiser's state travels with the pickle: one more call continues alike
    loaded = pickle.loads(pickle.dumps(model))
    model.partial_fit(X[:100], y[:100])
    loaded.partial_fit(X[:100], y[:100])
    assert loaded.loss_curve_[-1] == pytest.approx(model.loss_curve_[-1], rel=1e-10)
