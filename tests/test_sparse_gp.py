"""Behaviour of SparseGPRegressor and its engines: exactness, uncertainty, API contract."""

import pickle

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

import skbayes.gaussian_process._sparse_gp as sparse_gp_module
from skbayes import DeviceWarning, SparseGPRegressor
from skbayes.gaussian_process._sparse_gp import minibatch_loss
from skbayes.nn.kernels import MaternKernel, RBFKernel
from skbayes.nn.sparse_gp import cholesky

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

NOISE = 0.2
SKLEARN_KERNELS = {
    "rbf": lambda ls: RBF(ls),
    "matern12": lambda ls: Matern(ls, nu=0.5),
    "matern32": lambda ls: Matern(ls, nu=1.5),
    "matern52": lambda ls: Matern(ls, nu=2.5),
}


def _sine(n, seed, low=-3.0, high=3.0):
    rng = np.random.RandomState(seed)
    X = rng.uniform(low, high, size=(n, 1))
    return X, np.sin(2 * X[:, 0]) + NOISE * rng.randn(n)


@pytest.fixture(scope="module")
def sine_data():
    return _sine(500, 0), _sine(2000, 1)


@pytest.fixture(scope="module")
def fitted(sine_data):
    (X, y), _ = sine_data
    return SparseGPRegressor(n_inducing=20, random_state=0).fit(X, y)


@pytest.fixture(scope="module")
def small_problem():
    """30 rows in 2-D and the hyperparameters of a fixed GP."""
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, size=(30, 2))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.3 * rng.randn(30)
    return X, y, rng.uniform(-3, 3, size=(25, 2)), {"length_scale": np.array([0.8, 1.5]), "signal_var": 2.0, "noise": 0.3}


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
        np.testing.assert_allclose(ours(torch.tensor(x1), torch.tensor(x1)).numpy(), reference(x1), rtol=1e-10, atol=1e-12)
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
        kernel, n_inducing=len(X), inducing_init=inducing_init, learn_inducing=False,
        learn_hyperparameters=False, length_scale=ls, signal_std=np.sqrt(signal_var), noise=noise,
        mean="zero", normalize_y=False, max_iter=20, random_state=0,
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
    model = SparseGPRegressor(n_inducing=n_inducing, max_iter=1, random_state=0).fit(X, y)
    with torch.no_grad():  # move q away from its optimum so that every term matters
        for p in model.module_.parameters():
            p.add_(0.1 * torch.tensor(rng.randn(*p.shape)))
    return model.module_, torch.tensor(X), torch.tensor(y)


def test_objective_gradient_matches_finite_differences():
    module, X, y = _tiny_module()
    names, values = zip(*[(n, p.detach().clone().requires_grad_(True)) for n, p in module.named_parameters()])

    class Loss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.module = module

        def forward(self):
            return minibatch_loss(self.module, X, y, 12)

    loss = Loss()

    def objective(*tensors):
        return torch.func.functional_call(loss, {f"module.{n}": t for n, t in zip(names, tensors)}, ())

    assert torch.autograd.gradcheck(objective, values, eps=1e-6, atol=1e-6)


def test_every_parameter_gets_a_gradient():
    module, X, y = _tiny_module()
    minibatch_loss(module, X, y, 12).backward()
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
    assert fitted.noise_std_ == pytest.approx(NOISE, rel=0.2)


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
    assert curve[-10:].mean() < curve[:10].mean() - 0.3
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
    monkeypatch.setattr(sparse_gp_module, "_PREDICT_BLOCK", 20 * 7)  # 7 rows per block
    blocked_mean, blocked_std = fitted.predict(X, return_std=True)
    np.testing.assert_allclose(blocked_mean, mean, rtol=1e-12)
    np.testing.assert_allclose(blocked_std, std, rtol=1e-12)


# --------------------------------------------------------------- parameters
def test_fixed_values_are_given_in_the_units_of_y(sine_data):
    (X, y), _ = sine_data
    model = SparseGPRegressor(
        n_inducing=10, noise=0.7, signal_std=3.0, length_scale=0.4, learn_hyperparameters=False, max_iter=3, random_state=0
    ).fit(X, 5 * y)
    assert model.noise_std_ == pytest.approx(0.7, rel=1e-6)
    assert model.signal_std_ == pytest.approx(3.0, rel=1e-12)
    np.testing.assert_allclose(model.length_scale_, [0.4], rtol=1e-12)


def test_learn_inducing_controls_whether_z_moves(sine_data):
    (X, y), _ = sine_data
    params = {"n_inducing": 8, "max_iter": 30, "random_state": 0}
    fixed = SparseGPRegressor(learn_inducing=False, **params).fit(X, y)
    moved = SparseGPRegressor(**params).fit(X, y)
    assert "gp.inducing_points" not in dict(fixed.module_.named_parameters())
    assert "gp.inducing_points" in dict(moved.module_.named_parameters())
    # same k-means start (same random_state); only the learned one moved away
    assert not np.allclose(moved.inducing_points_, fixed.inducing_points_)
    assert fixed.n_inducing_ == moved.n_inducing_ == 8


def test_n_inducing_is_capped_at_the_number_of_rows():
    X, y = _sine(40, 0)
    model = SparseGPRegressor(max_iter=2, random_state=0).fit(X, y)
    assert model.n_inducing_ == 40 and model.inducing_points_.shape == (40, 1)


def test_constant_mean_is_learned_without_normalize_y(sine_data):
    (X, y), _ = sine_data
    model = SparseGPRegressor(n_inducing=10, normalize_y=False, max_iter=50, random_state=0).fit(X, y + 100)
    far = np.array([[50.0]])
    assert model.predict(far)[0] == pytest.approx(100, abs=0.5)
    zero = SparseGPRegressor(n_inducing=10, normalize_y=False, mean="zero", max_iter=5, random_state=0).fit(X, y + 100)
    assert abs(zero.predict(far)[0]) < 1


def test_float32_input_is_computed_in_float64_on_the_cpu(sine_data):
    (X, y), _ = sine_data
    X32, y32 = X.astype(np.float32), y.astype(np.float32)
    model = SparseGPRegressor(n_inducing=10, max_iter=5, random_state=0).fit(X32, y32)
    assert model.dtype_ == "float64" and model.predict(X32).dtype == np.float64
    single = SparseGPRegressor(n_inducing=10, max_iter=5, dtype="float32", random_state=0).fit(X, y)
    assert single.dtype_ == "float32" and single.predict(X).dtype == np.float32
    np.testing.assert_allclose(single.predict(X), model.predict(X), atol=0.05)


# ---------------------------------------------------------- reproducibility
def test_same_random_state_gives_identical_predictions_without_global_seed(sine_data):
    (X, y), (X_test, _) = sine_data
    state = torch.random.get_rng_state()
    params = {"n_inducing": 10, "max_iter": 20}
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
    model = SparseGPRegressor(n_inducing=16, max_iter=2, random_state=0).fit(X, y)
    size = len(pickle.dumps(model))
    assert size < (X.nbytes + y.nbytes) / 50, size


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
    params = {"n_inducing": 20, "max_iter": 100, "random_state": 0}
    cpu = SparseGPRegressor(device="cpu", **params).fit(X, y)
    gpu = SparseGPRegressor(device="cuda", **params).fit(X, y)
    assert gpu.dtype_ == "float32"
    np.testing.assert_allclose(gpu.predict(X_test), cpu.predict(X_test), atol=0.05)
    loaded = pickle.loads(pickle.dumps(gpu))
    np.testing.assert_allclose(loaded.predict(X_test), gpu.predict(X_test), rtol=1e-6)


# --------------------------------------------------------------- sklearn API
def test_works_in_pipeline_and_grid_search_over_n_inducing(sine_data):
    (X, y), _ = sine_data
    pipe = make_pipeline(StandardScaler(), SparseGPRegressor(max_iter=100, random_state=0))
    assert clone(pipe).set_params(sparsegpregressor__n_inducing=10).fit(X, y).score(X, y) > 0.8
    search = GridSearchCV(pipe, {"sparsegpregressor__n_inducing": [2, 15]}, cv=2).fit(X, y)
    assert search.best_params_ == {"sparsegpregressor__n_inducing": 15}


def test_column_vector_y_is_ravelled(sine_data):
    (X, y), _ = sine_data
    params = {"n_inducing": 5, "max_iter": 3, "random_state": 0}
    with pytest.warns(DataConversionWarning):
        column = SparseGPRegressor(**params).fit(X, y[:, None])
    np.testing.assert_array_equal(column.predict(X), SparseGPRegressor(**params).fit(X, y).predict(X))


def test_verbose_shows_a_progress_bar(capsys):
    X, y = _sine(50, 0)
    SparseGPRegressor(n_inducing=5, max_iter=3, verbose=True, random_state=0).fit(X, y)
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
        SparseGPRegressor(max_iter=1).fit(X, np.ones(10))
    with pytest.raises(ValueError, match="NaN|infinity"):
        SparseGPRegressor(max_iter=1).fit(np.ones((10, 2)), np.r_[np.ones(9), bad])


def test_feature_count_mismatch_is_reported(fitted):
    with pytest.raises(ValueError, match="X has 2 features, but SparseGPRegressor is expecting 1"):
        fitted.predict(np.zeros((3, 2)))


def test_several_targets_are_rejected():
    with pytest.raises(ValueError, match="single target, but y has 2 columns.*MultiOutputRegressor"):
        SparseGPRegressor(max_iter=1).fit(np.zeros((5, 2)), np.zeros((5, 2)))


@pytest.mark.parametrize(
    "params, match",
    [
        ({"kernel": "linear"}, "'kernel' parameter"),
        ({"inducing_init": "grid"}, "'inducing_init' parameter"),
        ({"n_inducing": 0}, "'n_inducing' parameter"),
        ({"noise": "fixed"}, "'noise' parameter"),
        ({"mean": "linear"}, "'mean' parameter"),
        ({"length_scale": [1.0, 2.0, 3.0]}, "one value per feature; got shape \\(3,\\) for X with 2"),
        ({"length_scale": [1.0, -2.0]}, "length_scale must be finite and > 0"),
        ({"device": "tpu"}, "not a valid torch device"),
    ],
)
def test_bad_parameters_are_reported(params, match):
    with pytest.raises(ValueError, match=match):
        SparseGPRegressor(max_iter=1, **params).fit(np.random.RandomState(0).randn(6, 2), np.arange(6.0))


def test_prediction_argument_errors(fitted, monkeypatch):
    X = np.zeros((3, 1))
    with pytest.raises(ValueError, match="At most one of return_std and return_cov"):
        fitted.predict(X, return_std=True, return_cov=True)
    with pytest.raises(ValueError, match="coverage must be in"):
        fitted.predict_interval(X, coverage=1.5)
    monkeypatch.setattr(sparse_gp_module, "_MAX_JOINT_ROWS", 2)
    for call in (lambda: fitted.sample_y(X), lambda: fitted.predict(X, return_cov=True)):
        with pytest.raises(ValueError, match="at most 2 rows.*smaller chunks"):
            call()


def test_convergence_warning_at_max_iter():
    X, y = _sine(40, 0)
    with pytest.warns(ConvergenceWarning, match="maximum number of epochs"):
        SparseGPRegressor(n_inducing=5, max_iter=2, random_state=0).fit(X, y)
