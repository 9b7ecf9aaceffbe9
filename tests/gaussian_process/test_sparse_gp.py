"""Behaviour of SparseGPRegressor and its engines: exactness, uncertainty, API contract."""

import pickle
import warnings

import joblib
import numpy as np
import pytest
import torch
from scipy.stats import norm
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, DataConversionWarning, NotFittedError
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, Matern, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import skbayes.base
import skbayes.gaussian_process._sparse_gp as sparse_gp_module
from conftest import SINE_NOISE, sine
from skbayes import DeviceWarning, SparseGPRegressor
from skbayes.gaussian_process._sparse_gp import minibatch_loss
from skbayes.nn import (
    SVGP,
    GaussianLikelihood,
    MaternKernel,
    NaturalGradient,
    OptimizerChain,
    RBFKernel,
    cholesky,
    covariance_gradient,
)
from skbayes._training import Callback
from skbayes.inference import SparseVariational

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

SKLEARN_KERNELS = {
    "rbf": lambda ls: RBF(ls),
    "matern12": lambda ls: Matern(ls, nu=0.5),
    "matern32": lambda ls: Matern(ls, nu=1.5),
    "matern52": lambda ls: Matern(ls, nu=2.5),
}


@pytest.fixture(scope="module")
def fitted(sine_data):
    (X, y), _ = sine_data
    return SparseGPRegressor(n_inducing=20, random_state=0).fit(X, y)


@pytest.fixture(scope="module")
def small_problem():
    """30 rows in 2-D and the hyperparameters of a fixed GP: those a string kernel starts at (``"rbf"`` is
    ``ConstantKernel(1.0) * RBF(np.ones(2))``), and a noise."""
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, size=(30, 2))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.3 * rng.randn(30)
    return X, y, rng.uniform(-3, 3, size=(25, 2)), {"length_scale": np.ones(2), "signal_var": 1.0, "noise": 0.3}


# ------------------------------------------------------------------- engines
@pytest.mark.parametrize("name", sorted(SKLEARN_KERNELS))
def test_kernels_match_scikit_learn(name):
    rng = np.random.RandomState(0)
    x1, x2 = rng.randn(7, 3), rng.randn(5, 3)
    ls = np.array([0.5, 1.0, 2.0])
    nu = {"rbf": None, "matern12": 0.5, "matern32": 1.5, "matern52": 2.5}[name]
    ours = RBFKernel(3, ls, 1.7, dtype=torch.float64) if nu is None else MaternKernel(3, nu, ls, 1.7, dtype=torch.float64)
    reference = C(1.7) * SKLEARN_KERNELS[name](ls)
    with torch.no_grad():
        np.testing.assert_allclose(ours(torch.tensor(x1), torch.tensor(x2)).numpy(), reference(x1, x2), rtol=1e-10)
        # On the diagonal the squared distance is a cancellation, |x|^2 + |x|^2 - 2 x.x, of order
        # 1e-16 on some BLAS builds; Matern-1/2 takes its square root, so k(x, x) may be off by ~1e-8.
        np.testing.assert_allclose(ours(torch.tensor(x1), torch.tensor(x1)).numpy(), reference(x1), rtol=1e-7, atol=1e-12)
        np.testing.assert_allclose(ours.diag(torch.tensor(x1)).numpy(), reference.diag(x1), rtol=1e-12)
    np.testing.assert_allclose(ours.length_scale.detach().numpy(), ls, rtol=1e-12)


def test_matern_rejects_other_smoothness():
    with pytest.raises(ValueError, match=r"nu in \{0.5, 1.5, 2.5\}"):
        MaternKernel(2, nu=1.0)


def test_cholesky_adds_jitter_then_explains_the_fix():
    singular = torch.ones(3, 3, dtype=torch.float64)  # rank one: needs jitter
    chol = cholesky(singular)
    np.testing.assert_allclose((chol @ chol.T).numpy(), singular.numpy() + 1e-6 * np.eye(3), rtol=1e-10)
    with pytest.raises(ValueError, match="not positive definite.*dtype='float64'.*n_inducing"):
        cholesky(-torch.eye(3, dtype=torch.float64))


# ---------------------------------------------------------------- exactness
@pytest.mark.parametrize("kernel", sorted(SKLEARN_KERNELS))
@pytest.mark.parametrize("inducing_init", ["kmeans", "random"])
def test_inducing_points_at_the_data_give_exact_gp_regression(small_problem, kernel, inducing_init):
    # Z = X and the hyperparameters of a fixed GaussianProcessRegressor: the
    # optimal q(u) makes the SVGP predictive the exact GP posterior, and the
    # ELBO the log marginal likelihood (Titsias 2009). The remaining gap is the
    # relative jitter 1e-6 on K_zz (3.5e-4 on the RBF mean, 7e-6 with 1e-8).
    X, y, X_test, hyper = small_problem
    ls, signal_var, noise = hyper["length_scale"], hyper["signal_var"], hyper["noise"]
    exact = GaussianProcessRegressor(
        C(signal_var) * SKLEARN_KERNELS[kernel](ls) + WhiteKernel(noise**2), optimizer=None
    ).fit(X, y)
    model = SparseGPRegressor(
        kernel, n_inducing=len(X), inducing_init=inducing_init, learn_hyperparameters=False,
        noise_std=noise, prior_mean="zero", normalize_y=False, random_state=0,
        inference=SparseVariational(learn_inducing=False, max_iter=20),
    ).fit(X, y)
    np.testing.assert_array_equal(model.inducing_points_, X)
    mean, std = exact.predict(X_test, return_std=True)
    _, cov = exact.predict(X_test, return_cov=True)
    np.testing.assert_allclose(model.predict(X_test), mean, atol=1e-3 * np.abs(mean).max())
    np.testing.assert_allclose(model.predict_std(X_test), std, rtol=1e-3)
    np.testing.assert_allclose(model.predict(X_test, return_cov=True)[1], cov, atol=1e-3 * np.abs(cov).max())
    # loss_curve_[0] is the full-batch loss before the first step: -ELBO(q*) / N
    assert model.loss_curve_[0] * len(X) == pytest.approx(-exact.log_marginal_likelihood_value_, rel=1e-4)
    # the hyperparameters were not touched
    np.testing.assert_allclose(model.length_scale_, ls, rtol=1e-12)
    assert model.signal_std_ == pytest.approx(np.sqrt(signal_var), rel=1e-12)
    assert model.noise_std_ == pytest.approx(noise, rel=1e-12)


def test_closed_form_q_is_a_stationary_point_of_the_training_loss(fitted, sine_data):
    # fit ends by setting q(u) to its closed-form optimum; the gradient of the
    # loss that Adam minimised must vanish there (and only there for q).
    (X, y), _ = sine_data
    module = fitted.module_
    y_std = torch.tensor((y - fitted._y_mean) / fitted._y_scale)
    module.zero_grad()
    minibatch_loss(module, torch.tensor(X), y_std, len(X)).backward()
    gp = module["gp"]
    assert gp.q_mean.grad.abs().max() < 1e-8
    assert gp.raw_q_scale_tril.grad.abs().max() < 1e-8
    # while the hyperparameters and Z still have a gradient
    for name, p in module.named_parameters():
        if not name.startswith("gp.q_") and not name.startswith("gp.raw_q"):
            assert p.grad.abs().max() > 0, name
    module.zero_grad()


def _tiny_module(n_inducing=4):
    rng = np.random.RandomState(1)
    X, y = rng.randn(12, 2), rng.randn(12)
    model = SparseGPRegressor(n_inducing=n_inducing, random_state=0, inference=SparseVariational(max_iter=1)).fit(X, y)
    with torch.no_grad():  # move q away from its optimum so that every term matters
        for p in model.module_.parameters():
            p.add_(0.1 * torch.tensor(rng.randn(*p.shape)))
    return model.module_, torch.tensor(X), torch.tensor(y)


@pytest.mark.parametrize("which", ["vfe", "fitc"])
def test_objective_gradient_matches_finite_differences(which):
    module, X, y = _tiny_module()
    names, values = zip(*[(n, p.detach().clone().requires_grad_(True)) for n, p in module.named_parameters()])

    class Loss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.module = module

        def forward(self):
            return minibatch_loss(self.module, X, y, 12, which)

    loss = Loss()

    def objective(*tensors):
        return torch.func.functional_call(loss, {f"module.{n}": t for n, t in zip(names, tensors)}, ())

    assert torch.autograd.gradcheck(objective, values, eps=1e-6, atol=1e-6)


@pytest.mark.parametrize("objective", ["vfe", "fitc"])
def test_every_parameter_gets_a_gradient(objective):
    module, X, y = _tiny_module()
    minibatch_loss(module, X, y, 12, objective).backward()
    for name, p in module.named_parameters():
        assert p.grad.abs().max() > 0, name
    # the upper triangle of the raw scale is unused
    assert module["gp"].raw_q_scale_tril.grad.triu(1).abs().max() == 0


def test_kl_weight_does_not_depend_on_the_batch_size():
    # -(1/B) sum_batch E_q[log p] + KL/N averaged over equal batches is the
    # full-batch loss for every B; a KL divided by B would not be.
    module, X, y = _tiny_module()
    with torch.no_grad():
        kl = float(module["gp"].kl())
        full = float(minibatch_loss(module, X, y, 12))
        for batch in (1, 3, 4, 12):
            losses = [float(minibatch_loss(module, X[i : i + batch], y[i : i + batch], 12)) for i in range(0, 12, batch)]
            assert np.mean(losses) == pytest.approx(full, rel=1e-10)
        assert kl > 0
        one_row = float(minibatch_loss(module, X[:1], y[:1], 12))
        mean, var = module["gp"].predict_f(X[:1])
        sigma = float(module["likelihood"].noise_std)
        expected = -norm.logpdf(float(y[0]), float(mean), sigma) + float(var) / (2 * sigma**2) + kl / 12
        assert one_row == pytest.approx(expected, rel=1e-10)


# ------------------------------------------------------- uncertainty quality
def test_recovers_the_noise_level(fitted):
    assert fitted.noise_std_ == pytest.approx(SINE_NOISE, rel=0.2)


def test_intervals_cover_at_the_stated_rate(fitted, sine_data):
    _, (X_test, y_test) = sine_data
    lower, upper = fitted.predict_interval(X_test, coverage=0.95)
    assert 0.90 <= np.mean((y_test >= lower) & (y_test <= upper)) <= 0.99


def test_latent_uncertainty_grows_away_from_the_data(fitted):
    inside = np.linspace(-2.5, 2.5, 50)[:, None]
    outside = np.r_[np.linspace(-9, -6, 10), np.linspace(6, 9, 10)][:, None]
    far = fitted.predict_uncertainty(outside).epistemic_std
    near = fitted.predict_uncertainty(inside).epistemic_std
    assert far.mean() >= 3 * near.mean()
    # far from every inducing point q(f) falls back to the prior
    np.testing.assert_allclose(far, fitted.signal_std_, rtol=0.05)


def test_predictive_std_decomposes_and_matches_the_covariance(fitted, sine_data):
    _, (X_test, _) = sine_data
    X = X_test[:40]
    u = fitted.predict_uncertainty(X)
    np.testing.assert_allclose(u.std**2, u.epistemic_std**2 + u.aleatoric_std**2, rtol=1e-12)
    np.testing.assert_allclose(u.aleatoric_std, fitted.noise_std_)
    assert np.all(u.std >= fitted.noise_std_)
    mean, std = fitted.predict(X, return_std=True)
    np.testing.assert_array_equal(mean, u.mean)
    np.testing.assert_array_equal(std, fitted.predict_std(X))
    mean_cov, cov = fitted.predict(X, return_cov=True)
    np.testing.assert_allclose(mean_cov, mean, rtol=1e-10)
    np.testing.assert_allclose(np.diag(cov), std**2, rtol=1e-8)
    np.testing.assert_allclose(cov, cov.T, rtol=0, atol=1e-14)


def test_elbo_increases_during_training(fitted):
    curve = np.asarray(fitted.loss_curve_)
    assert curve[-1] < curve[0] - 0.3
    # the default fit here is L-BFGS on the collapsed bound, whose line search lowers the loss every iteration
    assert np.all(np.diff(curve) <= 1e-12)
    assert fitted.best_loss_ == min(curve)


def test_sample_y_matches_the_predictive_moments(fitted, sine_data):
    _, (X_test, _) = sine_data
    X = X_test[:20]
    samples = fitted.sample_y(X, n_samples=4000, random_state=1)
    assert samples.shape == (20, 4000)
    mean, cov = fitted.predict(X, return_cov=True)
    std = np.sqrt(np.diag(cov))
    np.testing.assert_allclose(samples.mean(axis=1), mean, atol=4 * std.max() / np.sqrt(4000))
    np.testing.assert_allclose(np.cov(samples), cov, atol=0.1 * cov.max())
    np.testing.assert_array_equal(samples, fitted.sample_y(X, n_samples=4000, random_state=1))
    assert fitted.sample_y(X[:1]).shape == (1, 1)


def test_log_predictive_density_is_the_gaussian_density(fitted, sine_data):
    _, (X_test, y_test) = sine_data
    mean, std = fitted.predict(X_test[:50], return_std=True)
    np.testing.assert_allclose(fitted.log_predictive_density(X_test[:50], y_test[:50]), norm.logpdf(y_test[:50], mean, std))


def test_large_inputs_are_predicted_in_blocks(fitted, monkeypatch):
    X = np.linspace(-3, 3, 1000)[:, None]
    mean, std = fitted.predict(X, return_std=True)
    itemsize = np.dtype(fitted.dtype_).itemsize
    monkeypatch.setattr(skbayes.base, "PREDICT_BLOCK_BYTES", 20 * 7 * itemsize)  # 7 rows per block
    blocked_mean, blocked_std = fitted.predict(X, return_std=True)
    # The same float64 arithmetic, but BLAS may sum in another order for a 7-row block than for 1,000
    # rows (it does with one thread): equal to rounding of the O(1) values, amplified by L_zz (the default
    # L-BFGS fit's K_zz has a relative jitter of 1e-8, not 1e-6: 4e-14 seen), hence atol 1e-12.
    np.testing.assert_allclose(blocked_mean, mean, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(blocked_std, std, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------- parameters
def test_fixed_values_are_given_in_the_units_of_y(sine_data):
    (X, y), _ = sine_data
    model = SparseGPRegressor(
        n_inducing=10, noise_std=0.7, learn_hyperparameters=False, random_state=0,
        inference=SparseVariational(max_iter=3),
    ).fit(X, 5 * y)
    assert model.noise_std_ == pytest.approx(0.7, rel=1e-6)
    # the string kernel's signal variance 1 is in standardised units: the standard deviation of y
    assert model.signal_std_ == pytest.approx(np.std(5 * y), rel=1e-12)
    np.testing.assert_allclose(model.length_scale_, [1.0], rtol=1e-12)


def test_learn_inducing_controls_whether_z_moves(sine_data):
    (X, y), _ = sine_data
    params = {"n_inducing": 8, "random_state": 0}
    fixed = SparseGPRegressor(inference=SparseVariational(learn_inducing=False, max_iter=30), **params).fit(X, y)
    moved = SparseGPRegressor(inference=SparseVariational(max_iter=30), **params).fit(X, y)
    assert "gp.inducing_points" not in dict(fixed.module_.named_parameters())
    assert "gp.inducing_points" in dict(moved.module_.named_parameters())
    # same k-means start (same random_state); only the learned one moved away
    assert not np.allclose(moved.inducing_points_, fixed.inducing_points_)
    assert fixed.n_inducing_ == moved.n_inducing_ == 8


def test_n_inducing_is_capped_at_the_number_of_rows():
    X, y = sine(40, 0)
    model = SparseGPRegressor(random_state=0, inference=SparseVariational(max_iter=2)).fit(X, y)
    assert model.n_inducing_ == 40 and model.inducing_points_.shape == (40, 1)


def test_constant_mean_is_learned_without_normalize_y(sine_data):
    (X, y), _ = sine_data
    model = SparseGPRegressor(
        n_inducing=10, normalize_y=False, random_state=0,
        inference=SparseVariational(max_iter=50),
    ).fit(X, y + 100)
    far = np.array([[50.0]])
    assert model.predict(far)[0] == pytest.approx(100, abs=0.5)
    zero = SparseGPRegressor(
        n_inducing=10, normalize_y=False, prior_mean="zero", random_state=0,
        inference=SparseVariational(max_iter=5),
    ).fit(X, y + 100)
    assert abs(zero.predict(far)[0]) < 1


def test_float32_input_is_computed_in_float64_on_the_cpu(sine_data):
    (X, y), _ = sine_data
    X32, y32 = X.astype(np.float32), y.astype(np.float32)
    model = SparseGPRegressor(n_inducing=10, random_state=0, inference=SparseVariational(max_iter=5)).fit(X32, y32)
    assert model.dtype_ == "float64" and model.predict(X32).dtype == np.float64
    single = SparseGPRegressor(
        n_inducing=10, dtype="float32", random_state=0,
        inference=SparseVariational(max_iter=5),
    ).fit(X, y)
    assert single.dtype_ == "float32" and single.predict(X).dtype == np.float32
    np.testing.assert_allclose(single.predict(X), model.predict(X), atol=0.05)


# ---------------------------------------------------------- reproducibility
def test_same_random_state_gives_identical_predictions_without_global_seed(sine_data):
    (X, y), (X_test, _) = sine_data
    state = torch.random.get_rng_state()
    params = {"n_inducing": 10, "inference": SparseVariational(max_iter=20)}
    a = SparseGPRegressor(random_state=3, **params).fit(X, y).predict(X_test, return_std=True)
    b = SparseGPRegressor(random_state=3, **params).fit(X, y).predict(X_test, return_std=True)
    c = SparseGPRegressor(random_state=4, **params).fit(X, y).predict(X_test)
    assert torch.equal(state, torch.random.get_rng_state())
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c)


@pytest.mark.parametrize("dump_load", ["pickle", "joblib"])
def test_pickle_round_trip_gives_identical_predictions(fitted, sine_data, tmp_path, dump_load):
    _, (X_test, _) = sine_data
    if dump_load == "pickle":
        loaded = pickle.loads(pickle.dumps(fitted))
    else:
        joblib.dump(fitted, tmp_path / "model.joblib")
        loaded = joblib.load(tmp_path / "model.joblib")
    for method in ("predict", "predict_std"):
        np.testing.assert_array_equal(getattr(loaded, method)(X_test), getattr(fitted, method)(X_test))
    np.testing.assert_array_equal(loaded.sample_y(X_test[:5], 3), fitted.sample_y(X_test[:5], 3))


def test_pickle_holds_no_training_data():
    rng = np.random.RandomState(0)
    X = rng.randn(20_000, 5)
    y = X[:, 0] + 0.1 * rng.randn(20_000)
    model = SparseGPRegressor(n_inducing=16, random_state=0, inference=SparseVariational(max_iter=2)).fit(X, y)
    size = len(pickle.dumps(model))
    # The module, the fitted attributes and the optimiser's state (for partial_fit): about 20 kB, a 40th of the data.
    assert size < (X.nbytes + y.nbytes) / 25, size


def test_model_fitted_on_cuda_loads_on_a_cpu_only_machine(fitted, sine_data, monkeypatch):
    _, (X_test, _) = sine_data
    state = fitted.__getstate__()
    assert all(t.device.type == "cpu" for t in state["module_"].state_dict().values())
    state["device_"] = torch.device("cuda", 0)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    loaded = SparseGPRegressor.__new__(SparseGPRegressor)
    with pytest.warns(DeviceWarning, match="not available here"):
        loaded.__setstate__(state)
    assert loaded.device_.type == "cpu"
    np.testing.assert_array_equal(loaded.predict(X_test), fitted.predict(X_test))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_fit_matches_the_cpu_fit(sine_data):
    (X, y), (X_test, _) = sine_data
    params = {"n_inducing": 20, "inference": SparseVariational(max_iter=100), "random_state": 0}
    cpu = SparseGPRegressor(device="cpu", **params).fit(X, y)
    gpu = SparseGPRegressor(device="cuda", **params).fit(X, y)
    assert gpu.dtype_ == "float32"
    np.testing.assert_allclose(gpu.predict(X_test), cpu.predict(X_test), atol=0.05)
    loaded = pickle.loads(pickle.dumps(gpu))
    np.testing.assert_allclose(loaded.predict(X_test), gpu.predict(X_test), rtol=1e-6)


# --------------------------------------------------------------- sklearn API
def test_works_in_pipeline_and_grid_search_over_n_inducing(sine_data):
    (X, y), _ = sine_data
    pipe = make_pipeline(StandardScaler(), SparseGPRegressor(
        random_state=0,
        inference=SparseVariational(max_iter=100),
    ))
    assert clone(pipe).set_params(sparsegpregressor__n_inducing=10).fit(X, y).score(X, y) > 0.8
    search = GridSearchCV(pipe, {"sparsegpregressor__n_inducing": [2, 15]}, cv=2).fit(X, y)
    assert search.best_params_ == {"sparsegpregressor__n_inducing": 15}
    # ... and by the held-out Gaussian NLL, over the kernel too
    from skbayes.metrics import get_scorer

    grid = {"sparsegpregressor__n_inducing": [2, 15], "sparsegpregressor__kernel": ["rbf", "matern32"]}
    search = GridSearchCV(pipe, grid, cv=2, scoring=get_scorer("neg_gaussian_nll")).fit(X, y)
    assert search.best_params_["sparsegpregressor__n_inducing"] == 15
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))


def test_column_vector_y_is_ravelled(sine_data):
    (X, y), _ = sine_data
    params = {"n_inducing": 5, "inference": SparseVariational(max_iter=3), "random_state": 0}
    with pytest.warns(DataConversionWarning):
        column = SparseGPRegressor(**params).fit(X, y[:, None])
    np.testing.assert_array_equal(column.predict(X), SparseGPRegressor(**params).fit(X, y).predict(X))


def test_verbose_shows_a_progress_bar(capsys):
    X, y = sine(50, 0)
    SparseGPRegressor(n_inducing=5, verbose=True, random_state=0, inference=SparseVariational(max_iter=3)).fit(X, y)
    assert "SparseGPRegressor" in capsys.readouterr().err


# ----------------------------------------------------------------- bad input
def test_predict_before_fit_raises():
    with pytest.raises(NotFittedError, match="not fitted yet"):
        SparseGPRegressor().predict(np.zeros((2, 2)))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_input_is_rejected(bad):
    X = np.ones((10, 2))
    X[3, 1] = bad
    with pytest.raises(ValueError, match="NaN|infinity"):
        SparseGPRegressor(inference=SparseVariational(max_iter=1)).fit(X, np.ones(10))
    with pytest.raises(ValueError, match="NaN|infinity"):
        SparseGPRegressor(inference=SparseVariational(max_iter=1)).fit(np.ones((10, 2)), np.r_[np.ones(9), bad])


def test_feature_count_mismatch_is_reported(fitted):
    with pytest.raises(ValueError, match="X has 2 features, but SparseGPRegressor is expecting 1"):
        fitted.predict(np.zeros((3, 2)))


def test_several_targets_are_rejected():
    with pytest.raises(ValueError, match="single target, but y has 2 columns.*MultiOutputRegressor"):
        SparseGPRegressor(inference=SparseVariational(max_iter=1)).fit(np.zeros((5, 2)), np.zeros((5, 2)))


@pytest.mark.parametrize(
    "params, match",
    [
        ({"kernel": "linear"}, "'kernel' parameter"),
        ({"inducing_init": "grid"}, "'inducing_init' parameter"),
        ({"n_inducing": 0}, "'n_inducing' parameter"),
        ({"noise_std": "fixed"}, "'noise_std' parameter"),
        ({"prior_mean": "linear"}, "'prior_mean' parameter"),
        ({"warm_start": "yes"}, "'warm_start' parameter"),
        ({"callbacks": "early"}, "'callbacks' parameter"),
        ({"inference": "mfvi"}, "'inference' parameter"),
        ({"inference": SparseVariational(objective="dtc")}, "'objective' parameter"),
        ({"inference": SparseVariational(optimizer="sgd")}, "'optimizer' parameter"),
        ({"inference": SparseVariational(ngd_step_size=0.0)}, "'ngd_step_size' parameter"),
        ({"inference": SparseVariational(ngd_step_size=1.5)}, "'ngd_step_size' parameter"),
        ({"inference": SparseVariational(max_iter=0)}, "'max_iter' parameter"),
        ({"inference": SparseVariational(n_mc_train=4)}, "closed form"),
        ({"device": "tpu"}, "not a valid torch device"),
    ],
)
def test_bad_parameters_are_reported(params, match):
    params = {"inference": SparseVariational(max_iter=1), **params}
    with pytest.raises(ValueError, match=match):
        SparseGPRegressor(**params).fit(np.random.RandomState(0).randn(6, 2), np.arange(6.0))


def test_prediction_argument_errors(fitted, monkeypatch):
    X = np.zeros((3, 1))
    with pytest.raises(ValueError, match="At most one of return_std and return_cov"):
        fitted.predict(X, return_std=True, return_cov=True)
    with pytest.raises(ValueError, match="'coverage' parameter of .*predict_interval"):
        fitted.predict_interval(X, coverage=1.5)
    monkeypatch.setattr(sparse_gp_module, "_MAX_JOINT_ROWS", 2)
    for call in (lambda: fitted.sample_y(X), lambda: fitted.predict(X, return_cov=True)):
        with pytest.raises(ValueError, match="at most 2 rows.*smaller chunks"):
            call()


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda m, X: m.sample_y(X, n_samples=0), "n_samples"),
        (lambda m, X: m.sample_y(X, n_samples=-2), "n_samples"),
        (lambda m, X: m.sample_y(X, n_samples=1.5), "n_samples"),
        (lambda m, X: m.sample_y(X, random_state="seed"), "random_state"),
        (lambda m, X: m.predict(X, return_std="yes"), "return_std"),
        (lambda m, X: m.predict(X, return_cov=2), "return_cov"),
        (lambda m, X: m.predict_interval(X, coverage=0.0), "coverage"),
    ],
)
def test_bad_method_arguments_are_reported(fitted, call, name):
    with pytest.raises(ValueError, match=rf"The '{name}' parameter of [A-Za-z]+\.[a-z_]+ must be"):
        call(fitted, np.zeros((3, 1)))


def test_convergence_warning_at_max_iter():
    X, y = sine(40, 0)
    with pytest.warns(ConvergenceWarning, match="maximum number of epochs"):
        SparseGPRegressor(n_inducing=5, random_state=0, inference=SparseVariational(max_iter=2)).fit(X, y)


# ------------------------------------------------------------ FITC objective
def _dense_rbf(hyper):
    return C(hyper["signal_var"]) * RBF(hyper["length_scale"])


def _fixed_gp(objective, n_inducing, noise_std, **variational):
    """The string RBF kernel at its initial values, fixed; Z fixed; ``variational``: SparseVariational's settings."""
    return SparseGPRegressor(
        n_inducing=n_inducing, learn_hyperparameters=False, prior_mean="zero",
        normalize_y=False, random_state=0, noise_std=noise_std,
        inference=SparseVariational(objective=objective, learn_inducing=False, **variational),
    )


def test_expected_log_lik_is_the_log_of_the_expectation_for_fitc():
    # Gauss-Hermite quadrature of both definitions at a few points: FITC is
    # E_q(v)[log E_{p(f|v)} N(y | f, s2)] (Rossi 2022, eqs. 6.12 and 6.16),
    # VFE is E_q(v) E_{p(f|v)}[log N(y | f, s2)].
    nodes, weights = np.polynomial.hermite_e.hermegauss(60)
    weights = weights / weights.sum()
    y, mu, cond, qvar, noise = 0.7, -0.2, 0.3, 0.5, 0.04
    f_given_v = mu + np.sqrt(qvar) * nodes  # mean of p(f | v) for v ~ q
    log_expectation = [np.log(np.sum(weights * norm.pdf(y, m + np.sqrt(cond) * nodes, np.sqrt(noise)))) for m in f_given_v]
    expectation_of_log = [np.sum(weights * norm.logpdf(y, m + np.sqrt(cond) * nodes, np.sqrt(noise))) for m in f_given_v]
    # The SVGP chooses which variances enter (its marginals are set here), the
    # Gaussian likelihood computes the expectation.
    gp = SVGP(RBFKernel(1, dtype=torch.float64), 2, 1, dtype=torch.float64)
    gp.marginals = lambda x, **_: tuple(torch.tensor([v], dtype=torch.float64) for v in (mu, cond, qvar))
    likelihood = GaussianLikelihood(1, np.sqrt(noise), learn_noise=False, dtype=torch.float64)
    x, y_t = torch.zeros(1, 1, dtype=torch.float64), torch.tensor([y], dtype=torch.float64)
    fitc = float(gp.expected_log_lik(x, y_t, likelihood, "fitc"))
    vfe = float(gp.expected_log_lik(x, y_t, likelihood, "vfe"))
    assert fitc == pytest.approx(np.sum(weights * np.array(log_expectation)), rel=1e-8)
    assert vfe == pytest.approx(np.sum(weights * np.array(expectation_of_log)), rel=1e-8)
    assert fitc > vfe + 1.0  # Jensen, and far apart with this conditional variance
    with pytest.raises(ValueError, match="objective must be one of"):
        gp.expected_log_lik(x, y_t, likelihood, "dtc")


def test_fitc_at_the_optimal_q_is_the_fitc_marginal_likelihood_and_predictive(small_problem):
    # M = 8 < N = 30, fixed Z and hyperparameters: the loss before the first
    # step (q at its closed-form optimum) is -log N(y | 0, Q + diag(K - Q) +
    # s2 I) / N (Snelson & Ghahramani 2006), and the predictive is Rossi 2022,
    # eq. 6.11. The same relative jitter as the model's (1e-6 * mean diag of
    # K_zz) makes the dense reference exact.
    X, y, X_test, hyper = small_problem
    params = {"noise_std": hyper["noise"], "max_iter": 3}
    model = _fixed_gp("fitc", 8, **params).fit(X, y)
    kernel, Z, noise_var = _dense_rbf(hyper), model.inducing_points_, hyper["noise"] ** 2
    kzz = kernel(Z) + 1e-6 * hyper["signal_var"] * np.eye(8)
    kxz, ksz = kernel(X, Z), kernel(X_test, Z)
    q = kxz @ np.linalg.solve(kzz, kxz.T)
    lam = np.diag(kernel(X)) - np.diag(q) + noise_var
    fitc_lml = -0.5 * (len(X) * np.log(2 * np.pi) + np.linalg.slogdet(q + np.diag(lam))[1]
                       + y @ np.linalg.solve(q + np.diag(lam), y))
    assert model.loss_curve_[0] * len(X) == pytest.approx(-fitc_lml, rel=1e-8)
    sigma = np.linalg.inv(kzz + kxz.T @ (kxz / lam[:, None]))
    mean = ksz @ sigma @ kxz.T @ (y / lam)
    var_f = np.diag(kernel(X_test)) - np.sum(ksz * np.linalg.solve(kzz, ksz.T).T, 1) + np.sum(ksz * (ksz @ sigma), 1)
    np.testing.assert_allclose(model.predict(X_test), mean, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(model.predict_uncertainty(X_test).epistemic_std ** 2, var_f, rtol=1e-6, atol=1e-8)
    # the VFE fit of the same model is a different (DTC) predictive
    vfe = _fixed_gp("vfe", 8, **params).fit(X, y)
    assert np.abs(vfe.predict(X_test) - mean).max() > 1e-2


def test_fitc_and_vfe_coincide_when_the_inducing_points_are_the_data(small_problem):
    X, y, X_test, hyper = small_problem
    params = {"noise_std": hyper["noise"], "max_iter": 3}
    fitc = _fixed_gp("fitc", len(X), **params).fit(X, y)
    vfe = _fixed_gp("vfe", len(X), **params).fit(X, y)
    # equal up to the 1e-6 relative jitter on K_zz, which leaves k_nn - Q_nn ~ 1e-6, not 0
    assert fitc.loss_curve_[0] == pytest.approx(vfe.loss_curve_[0], rel=1e-4)
    np.testing.assert_allclose(fitc.predict_std(X_test), vfe.predict_std(X_test), rtol=1e-4)
    np.testing.assert_allclose(fitc.predict(X_test), vfe.predict(X_test), atol=1e-4)


def test_fitc_objective_fits_the_sine(sine_data):
    (X, y), (X_test, y_test) = sine_data
    model = SparseGPRegressor(n_inducing=20, random_state=0, inference=SparseVariational(objective="fitc")).fit(X, y)
    assert model.noise_std_ == pytest.approx(SINE_NOISE, rel=0.2)
    lower, upper = model.predict_interval(X_test, coverage=0.95)
    assert 0.90 <= np.mean((y_test >= lower) & (y_test <= upper)) <= 0.99


# --------------------------------------------------------- natural gradients
def test_covariance_gradient_matches_autograd_through_the_cholesky_factor():
    rng = np.random.RandomState(0)
    tril = torch.tensor(np.tril(rng.randn(5, 5)) + 3 * np.eye(5))
    weight = torch.tensor(rng.randn(5, 5))

    def loss(cov):
        return (weight * cov).sum() + torch.logdet(cov) + cov[0] @ cov[:, 1]

    leaf = tril.clone().requires_grad_(True)
    loss(leaf @ leaf.T).backward()
    cov = (tril @ tril.T).requires_grad_(True)
    loss(cov).backward()
    np.testing.assert_allclose(covariance_gradient(tril, leaf.grad).numpy(), (0.5 * (cov.grad + cov.grad.T)).numpy(), atol=1e-12)


def _natural_parameters(gp):
    with torch.no_grad():
        precision = torch.cholesky_inverse(gp.q_scale_tril)
        return (precision @ gp.q_mean).numpy(), (-0.5 * precision).numpy()


@pytest.mark.parametrize("objective", ["vfe", "fitc"])
def test_one_natural_gradient_step_of_size_one_reaches_the_optimal_q(objective):
    # Conjugate objective + full batch + gamma = 1: theta_new = theta_prior +
    # theta_lik, the closed form of set_optimal_q_ (Salimbeni et al. 2018).
    module, X, y = _tiny_module(n_inducing=5)
    gp, noise_var = module["gp"], float(module["likelihood"].noise_std[0].detach() ** 2)
    ngd = NaturalGradient(gp.q_mean, gp.raw_q_scale_tril, lr=1.0, loss_scale=len(X))
    ngd.zero_grad()
    minibatch_loss(module, X, y, len(X), objective).backward()
    ngd.step()
    mean, tril = gp.q_mean.detach().clone(), gp.q_scale_tril.detach().clone()
    gp.set_optimal_q_(X, y, noise_var, objective=objective)
    np.testing.assert_allclose(mean.numpy(), gp.q_mean.detach().numpy(), atol=1e-10)
    np.testing.assert_allclose(tril.numpy(), gp.q_scale_tril.detach().numpy(), atol=1e-10)
    # and nothing but q was touched by the natural-gradient optimiser
    assert ngd.state[gp.q_mean]["n_backtracks"] == 0


def test_natural_gradient_steps_move_along_the_line_to_the_optimum():
    # For a conjugate objective theta_k = theta* + (1 - gamma)^k (theta_0 - theta*).
    module, X, y = _tiny_module(n_inducing=5)
    gp, noise_var = module["gp"], float(module["likelihood"].noise_std[0].detach() ** 2)
    start = _natural_parameters(gp)
    state = {k: v.clone() for k, v in gp.state_dict().items()}
    gp.set_optimal_q_(X, y, noise_var)
    optimum = _natural_parameters(gp)
    gp.load_state_dict(state)
    ngd = NaturalGradient(gp.q_mean, gp.raw_q_scale_tril, lr=0.5, loss_scale=len(X))
    for _ in range(3):
        ngd.zero_grad()
        minibatch_loss(module, X, y, len(X)).backward()
        ngd.step()
    for got, first, best in zip(_natural_parameters(gp), start, optimum):
        np.testing.assert_allclose(got, best + 0.125 * (first - best), atol=1e-9)


def test_natural_gradient_halves_a_step_that_breaks_positive_definiteness():
    mean = torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))
    raw = torch.nn.Parameter(torch.eye(3, dtype=torch.float64))
    ngd = NaturalGradient(mean, raw, lr=1.0, loss_scale=1.0)
    mean.grad = torch.zeros(3, dtype=torch.float64)
    raw.grad = -10.0 * torch.eye(3, dtype=torch.float64)  # lowers the precision far below 0 at full step
    ngd.step()
    assert ngd.state[mean]["n_backtracks"] > 0
    tril = torch.tril(raw.detach(), -1) + torch.diag(torch.nn.functional.softplus(raw.detach().diagonal()))
    assert torch.isfinite(tril).all() and (tril.diagonal() > 0).all()
    # the step still moved q (here: to a larger variance, as the gradient asked)
    assert (tril.diagonal() > torch.nn.functional.softplus(torch.ones(3, dtype=torch.float64))).all()
    with pytest.raises(ValueError, match="lr must be in"):
        NaturalGradient(mean, raw, lr=1.5)


def test_ngd_estimator_trains_q_with_natural_gradients_and_the_rest_with_adam(sine_data, monkeypatch):
    (X, y), (X_test, y_test) = sine_data
    adam = SparseGPRegressor(n_inducing=20, random_state=0).fit(X, y)
    ngd = SparseGPRegressor(n_inducing=20, random_state=0, inference=SparseVariational(optimizer="ngd")).fit(X, y)
    chain = ngd._optimizer
    assert isinstance(chain, OptimizerChain) and isinstance(chain.optimizers[1], NaturalGradient)
    gp = ngd.module_["gp"]
    adam_params = {id(p) for p in chain.optimizers[0].param_groups[0]["params"]}
    assert id(gp.q_mean) not in adam_params and id(gp.raw_q_scale_tril) not in adam_params
    assert id(gp.inducing_points) in adam_params
    assert chain.optimizers[1].param_groups[0]["loss_scale"] == len(X)
    assert ngd.noise_std_ == pytest.approx(SINE_NOISE, rel=0.2)
    lpd_adam = adam.log_predictive_density(X_test, y_test).mean()
    lpd_ngd = ngd.log_predictive_density(X_test, y_test).mean()
    assert lpd_ngd == pytest.approx(lpd_adam, abs=0.03)


def test_ngd_with_step_one_keeps_q_at_its_optimum_during_training(small_problem):
    # Fixed hyperparameters and Z, full batch, gamma = 1: every step lands on
    # the optimum again, so the loss stays at -ELBO(q*) / N to round-off,
    # while Adam on q wanders by about learning_rate_init.
    X, y, _, hyper = small_problem
    params = {"noise_std": hyper["noise"], "max_iter": 10, "learning_rate_init": 0.05}
    ngd = _fixed_gp("vfe", 8, optimizer="ngd", ngd_step_size=1.0, **params).fit(X, y)
    adam = _fixed_gp("vfe", 8, **params).fit(X, y)
    assert np.ptp(ngd.loss_curve_) < 1e-10
    assert np.ptp(adam.loss_curve_) > 1e-4
    assert isinstance(ngd._optimizer, OptimizerChain) and len(ngd._optimizer.optimizers) == 1  # nothing for Adam


# ---------------------------------------------------------------- partial_fit
def test_first_partial_fit_initialises_from_the_batch_like_fit(sine_data):
    (X, y), _ = sine_data
    batch_X, batch_y = X[:100], y[:100]
    streamed = SparseGPRegressor(n_inducing=20, random_state=0).partial_fit(batch_X, batch_y)
    assert streamed.n_seen_ == 100 and streamed.n_iter_ == 1 and len(streamed.loss_curve_) == 1
    assert streamed.n_inducing_ == 20 and streamed.n_features_in_ == 1
    # same seeds: the same k-means inducing points and the same first epoch as fit with Adam (partial_fit's
    # optimiser; the default fit of 100 rows is L-BFGS on the collapsed bound)
    once = SparseGPRegressor(n_inducing=20, random_state=0,
                             inference=SparseVariational(optimizer="adam", max_iter=1)).fit(batch_X, batch_y)
    np.testing.assert_array_equal(streamed.inducing_points_, once.inducing_points_)
    np.testing.assert_array_equal(streamed.length_scale_, once.length_scale_)
    assert streamed.loss_curve_ == once.loss_curve_
    assert streamed._y_mean == pytest.approx(batch_y.mean()) and streamed._y_scale == pytest.approx(batch_y.std())
    small = SparseGPRegressor(n_inducing=50, random_state=0).partial_fit(X[:30], y[:30])
    assert small.n_inducing_ == 30


def test_partial_fit_scales_the_objective_by_the_rows_seen_so_far(sine_data, monkeypatch):
    (X, y), _ = sine_data
    seen = []

    def recording_loss(module, x, y, n_data, objective):
        seen.append((len(x), n_data))
        return minibatch_loss(module, x, y, n_data, objective)

    monkeypatch.setattr(sparse_gp_module, "minibatch_loss", recording_loss)
    model = SparseGPRegressor(n_inducing=10, batch_size=40, random_state=0)
    for start, stop in [(0, 100), (100, 250), (250, 300)]:
        model.partial_fit(X[start:stop], y[start:stop])
    # one pass over each call's rows in batches of 40, N = running total
    assert seen == [(40, 100), (40, 100), (20, 100), (40, 250), (40, 250), (40, 250), (30, 250), (40, 300), (10, 300)]
    assert model.n_seen_ == 300 and model.n_iter_ == 3 and len(model.loss_curve_) == 3


def test_streaming_partial_fit_learns_the_function(sine_data):
    (X, y), (X_test, y_test) = sine_data
    model = SparseGPRegressor(
        n_inducing=20, random_state=0,
        inference=SparseVariational(optimizer="ngd", learning_rate_init=0.05),
    )
    model.partial_fit(X[:100], y[:100])
    first = model.log_predictive_density(X_test, y_test).mean()
    for _ in range(30):  # a stream of 30 x 500 rows, 100 per call
        for start in range(0, 500, 100):
            model.partial_fit(X[start : start + 100], y[start : start + 100])
    assert model.n_seen_ == 100 + 30 * 500
    last = model.log_predictive_density(X_test, y_test).mean()
    # fit on the 500 rows reaches 0.178 nats and R^2 0.926; the first call alone -2.66
    assert first < -1 and last > 0.15
    assert model.score(X_test, y_test) > 0.9
    assert model.noise_std_ == pytest.approx(SINE_NOISE, rel=0.2)


def test_partial_fit_continues_fit_and_fit_starts_afresh(sine_data):
    (X, y), _ = sine_data
    model = SparseGPRegressor(n_inducing=10, random_state=0, inference=SparseVariational(max_iter=5)).fit(X, y)
    z_fitted = model.inducing_points_.copy()
    model.partial_fit(X[:50], y[:50])
    assert model.n_seen_ == len(X) + 50 and model.n_iter_ == 6 and len(model.loss_curve_) == 6
    assert not np.array_equal(model.inducing_points_, z_fitted)  # one more step moved Z
    with pytest.raises(ValueError, match="X has 2 features, but SparseGPRegressor is expecting 1"):
        model.partial_fit(np.zeros((5, 2)), np.zeros(5))
    model.fit(X[:200], y[:200])
    assert model.n_seen_ == 200 and model.n_iter_ == 5


def test_partial_fit_after_pickling_rebuilds_the_optimiser_with_its_state(sine_data):
    (X, y), _ = sine_data
    model = SparseGPRegressor(n_inducing=10, random_state=0, inference=SparseVariational(optimizer="ngd")).partial_fit(X[:100], y[:100])
    loaded = pickle.loads(pickle.dumps(model))
    assert not hasattr(loaded, "_optimizer")
    loaded.partial_fit(X[100:200], y[100:200])
    assert loaded.n_seen_ == 200 and isinstance(loaded._optimizer, OptimizerChain)
    assert loaded._optimizer.optimizers[-1].param_groups[0]["loss_scale"] == 200
    # Adam's moments survived the pickle: the same model as without one (a fresh Adam would differ).
    model.partial_fit(X[100:200], y[100:200])
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    fresh = pickle.loads(pickle.dumps(model))
    del fresh._optimizer_state
    assert not np.array_equal(fresh.partial_fit(X[:100], y[:100]).predict(X), model.partial_fit(X[:100], y[:100]).predict(X))


def test_partial_fit_is_one_epoch_without_a_convergence_warning(sine_data):
    (X, y), _ = sine_data
    model = SparseGPRegressor(
        n_inducing=10, random_state=0,
        inference=SparseVariational(n_iter_no_change=1, tol=1e9),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model.partial_fit(X[:100], y[:100]).partial_fit(X[100:200], y[100:200])
    assert model.n_iter_ == 2 and len(model.loss_curve_) == 2


class _EpochRecorder(Callback):
    def __init__(self):
        self.epochs = []

    def on_train_begin(self, state):
        self.epochs = []

    def on_epoch_end(self, state):
        self.epochs.append(state.epoch_loss)


def test_callbacks_see_every_epoch_of_fit_and_partial_fit(sine_data):
    (X, y), _ = sine_data
    recorder = _EpochRecorder()
    model = SparseGPRegressor(
        n_inducing=10, callbacks=[recorder], random_state=0,
        inference=SparseVariational(max_iter=4),
    ).fit(X, y)
    assert recorder.epochs == model.loss_curve_
    model.partial_fit(X[:100], y[:100])
    assert recorder.epochs == model.loss_curve_[-1:]


# --------------------------------------------------------------- warm_start
@pytest.mark.parametrize("optimizer, max_iter", [("adam", 30), ("auto", 3)])
def test_warm_start_continues_from_the_fitted_model(sine_data, optimizer, max_iter):
    (X, y), _ = sine_data
    # Adam, and L-BFGS on the collapsed bound (the default here) stopped before it converges
    model = SparseGPRegressor(
        n_inducing=20, warm_start=True, random_state=0,
        inference=SparseVariational(optimizer=optimizer, max_iter=max_iter),
    ).fit(X, y)
    first_curve, module, y_scaling = list(model.loss_curve_), model.module_, (model._y_mean, model._y_scale)
    z_fitted = model.inducing_points_.copy()
    model.fit(X, y)
    assert model.module_ is module and (model._y_mean, model._y_scale) == y_scaling
    # the second fit starts where the first ended (q(u) at its optimum can only lower the loss)
    assert model.loss_curve_[0] <= first_curve[-1]
    assert model.loss_curve_[0] < first_curve[0] - 0.1
    assert not np.array_equal(model.inducing_points_, z_fitted)
    assert model.n_iter_ == len(model.loss_curve_) and model.n_seen_ == len(X)
    # a cold start begins from the initial model again
    cold = clone(model).set_params(warm_start=False).fit(X, y)
    assert cold.loss_curve_[0] == first_curve[0]


def test_warm_start_keeps_the_y_scaling_of_the_first_fit(sine_data):
    (X, y), _ = sine_data
    model = SparseGPRegressor(
        n_inducing=10, warm_start=True, random_state=0,
        inference=SparseVariational(max_iter=5),
    ).fit(X, y)
    model.fit(X[:100], y[:100] + 10)
    assert model._y_mean == pytest.approx(y.mean()) and model.n_seen_ == 100


def test_warm_start_starts_afresh_when_the_model_changes(sine_data):
    (X, y), _ = sine_data
    model = SparseGPRegressor(
        n_inducing=10, warm_start=True, random_state=0,
        inference=SparseVariational(max_iter=5),
    ).fit(X, y)
    module = model.module_
    model.set_params(n_inducing=12).fit(X, y)
    assert model.module_ is not module and model.n_inducing_ == 12
    module = model.module_
    X2 = np.column_stack([X, X])
    model.fit(X2, y)
    assert model.module_ is not module and model.n_features_in_ == 2


# ------------------------------------------------------------ small contracts
def test_fitted_scales_are_python_floats(fitted):
    assert type(fitted.noise_std_) is float and type(fitted.signal_std_) is float


def test_log_predictive_density_validates_x_once(fitted, sine_data, monkeypatch):
    _, (X_test, y_test) = sine_data
    calls = []
    original = sparse_gp_module.validate_data

    def counting(*args, **kwargs):
        calls.append(kwargs)
        return original(*args, **kwargs)

    monkeypatch.setattr(sparse_gp_module, "validate_data", counting)
    fitted.log_predictive_density(X_test[:10], y_test[:10])
    assert len(calls) == 1


@pytest.mark.parametrize("n_samples", [200, 2000])
def test_auto_max_iter_is_a_step_budget_independent_of_n(monkeypatch, n_samples):
    # max_iter="auto" is AUTO_MAX_EPOCHS epochs or AUTO_MAX_STEPS optimiser steps, whichever ends
    # first: with the step budget lowered to 7 and 10-row batches, 7 steps on 200 rows (20 per epoch)
    # as on 2,000 (200 per epoch); an int max_iter runs whole epochs.
    from skbayes._training import Callback
    from skbayes.gaussian_process import _base

    class CountSteps(Callback):
        def on_train_begin(self, state):
            self.steps = 0

        def on_batch_end(self, state):
            self.steps += 1

    monkeypatch.setattr(_base, "AUTO_MAX_STEPS", 7)
    X, y = sine(n_samples, 0)
    counter = CountSteps()
    params = {"n_inducing": 4, "batch_size": 10, "random_state": 0, "callbacks": [counter]}
    model = SparseGPRegressor(**params)
    assert SparseVariational().max_iter == "auto" and model.inference == "variational"
    with pytest.warns(ConvergenceWarning, match=r"optimiser steps \(7\)"):
        model.fit(X, y)
    assert counter.steps == 7 and model.n_iter_ == 1
    with pytest.warns(ConvergenceWarning, match=r"maximum number of epochs \(1\)"):
        SparseGPRegressor(**params, inference=SparseVariational(max_iter=1)).fit(X[:200], y[:200])
    assert counter.steps == 20  # a whole epoch of 20 batches, no step budget
