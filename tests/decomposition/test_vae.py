"""Tests of the VAE transformer and its engine (skbayes.nn.VAEModule)."""

import pickle
import warnings

import numpy as np
import pytest
import torch
from scipy.special import expit, log_expit, softplus
from sklearn.decomposition import FactorAnalysis
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import skbayes.decomposition._vae as vae_module
from skbayes import VAE
from skbayes._training import Callback

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _manifold_data(n=300, seed=0):
    """Rows on a curved 2-D manifold in 10-D plus small isotropic noise."""
    rng = np.random.RandomState(seed)
    t = rng.uniform(-2, 2, size=(n, 2))
    features = np.c_[np.sin(t[:, 0]), np.cos(t[:, 0]), t[:, 1], t[:, 0] * t[:, 1]]
    return features @ rng.randn(4, 10) + 0.05 * rng.randn(n, 10)


def _vae(*args, **kwargs):
    """A VAE on the CPU (float64 for float64 input), unless told otherwise."""
    return VAE(*args, **{"device": "cpu", **kwargs})


X_MANIFOLD = _manifold_data()
FAST = {"hidden_layer_sizes": (32,), "learning_rate_init": 1e-2, "batch_size": 64}


@pytest.fixture(scope="module")
def fitted():
    return _vae(2, max_iter=200, random_state=0, **FAST).fit(X_MANIFOLD)


def test_training_increases_the_elbo(fitted):
    curve = np.asarray(fitted.loss_curve_)
    assert len(curve) == fitted.n_iter_ > 10
    assert curve[-5:].mean() < curve[:5].mean() - 5.0
    early = _vae(2, max_iter=1, random_state=0, **FAST).fit(X_MANIFOLD)
    assert fitted.score(X_MANIFOLD) > early.score(X_MANIFOLD) + 5.0


def test_reconstruction_beats_the_mean_predictor(fitted):
    reconstruction = fitted.inverse_transform(fitted.transform(X_MANIFOLD))
    mse = ((reconstruction - X_MANIFOLD) ** 2).mean()
    mse_mean = ((X_MANIFOLD - X_MANIFOLD.mean(0)) ** 2).mean()
    assert mse < 0.05 * mse_mean


def test_shapes_feature_names_and_std(fitted):
    Z, Z_std = fitted.transform(X_MANIFOLD[:7], return_std=True)
    assert Z.shape == Z_std.shape == (7, 2)
    assert np.all(Z_std > 0)
    np.testing.assert_array_equal(Z, fitted.transform(X_MANIFOLD[:7]))
    assert fitted.sample(5, random_state=0).shape == (5, 10)
    assert fitted.noise_std_.shape == (10,) and fitted.classes_ is None
    assert list(fitted.get_feature_names_out()) == ["vae0", "vae1"]


def test_iwae_is_above_the_elbo_and_grows_with_k(fitted):
    X = X_MANIFOLD[:100]
    elbo = fitted.score_samples(X)
    iwae = {k: np.mean([fitted.log_likelihood_iwae(X, n_importance=k, random_state=s).mean() for s in range(8)])
            for k in (1, 10, 100)}
    iwae[1000] = fitted.log_likelihood_iwae(X, n_importance=1000).mean()
    assert iwae[1] < iwae[10] < iwae[100] < iwae[1000]
    assert iwae[1000] > elbo.mean() + 0.3
    assert np.mean(fitted.log_likelihood_iwae(X, n_importance=1000) >= elbo) > 0.95


def test_iwae_with_one_sample_is_the_elbo_in_expectation(fitted):
    X = X_MANIFOLD[:50]
    k1 = np.mean([fitted.log_likelihood_iwae(X, n_importance=1, random_state=s).mean() for s in range(300)])
    # 300 draws, each with a standard deviation of ~0.4 nats: standard error ~0.025.
    assert k1 == pytest.approx(fitted.score(X), abs=0.1)


def _numpy_forward(layers, h, relu=True):
    for i, (weight, bias) in enumerate(layers):
        if i and relu:
            h = np.maximum(h, 0.0)
        h = h @ weight.T + bias
    return h


@pytest.mark.parametrize("likelihood", ["gaussian", "bernoulli"])
def test_score_samples_matches_a_computation_by_hand(likelihood):
    rng = np.random.RandomState(1)
    X = rng.uniform(size=(12, 3))
    if likelihood == "bernoulli":
        X = (X > 0.5).astype(float)
    vae = _vae(2, hidden_layer_sizes=(4,), likelihood=likelihood, max_iter=5, random_state=0).fit(X)
    state = {name: value.numpy() for name, value in vae.module_.state_dict().items()}
    encoder = [(state[f"encoder.layers.{i}.weight"], state[f"encoder.layers.{i}.bias"]) for i in range(2)]
    decoder = [(state[f"decoder.layers.{i}.weight"], state[f"decoder.layers.{i}.bias"]) for i in range(2)]
    mean, scale = (X.mean(0), X.std(0)) if likelihood == "gaussian" else (0.0, 1.0)
    U = (X - mean) / scale
    out = _numpy_forward(encoder, U)
    mu, sigma = out[:, :2], softplus(out[:, 2:]) + 1e-6
    # The 128 scrambled Sobol points that score_samples uses (seeded at fit).
    points = torch.quasirandom.SobolEngine(2, scramble=True, seed=vae._score_seed).draw(128, dtype=torch.float64)
    eps = torch.special.ndtri(points).numpy()[:, None, :]
    f = _numpy_forward(decoder, mu + sigma * eps)  # (128, n, d)
    if likelihood == "gaussian":
        noise = softplus(state["likelihood.raw_noise"]) + 1e-6
        log_lik = (-0.5 * ((U - f) / noise) ** 2 - np.log(noise) - 0.5 * np.log(2 * np.pi)).sum(-1)
        np.testing.assert_allclose(vae.noise_std_, noise * scale)
    else:
        log_lik = (X * log_expit(f) + (1 - X) * log_expit(-f)).sum(-1)
        assert vae.noise_std_ is None
    kl = (-np.log(sigma) + 0.5 * (mu**2 + sigma**2 - 1)).sum(-1)
    expected = log_lik.mean(0) - kl - np.log(scale).sum()
    np.testing.assert_allclose(vae.score_samples(X), expected, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(vae.transform(X), mu, rtol=1e-10, atol=1e-12)
    decoded = _numpy_forward(decoder, mu)
    decoded = expit(decoded) if likelihood == "bernoulli" else decoded * scale + mean
    np.testing.assert_allclose(vae.inverse_transform(mu), decoded, rtol=1e-10, atol=1e-12)


def test_linear_gaussian_vae_reaches_the_factor_analysis_likelihood():
    # A linear VAE with per-feature noise is factor analysis; its optimum has a
    # tight ELBO (Lucas et al. 2019, "Don't blame the ELBO!").
    rng = np.random.RandomState(0)
    X = rng.randn(400, 2) @ rng.randn(2, 5) + rng.randn(400, 5) * [0.3, 0.5, 0.2, 0.4, 0.6]
    fa = FactorAnalysis(2, random_state=0).fit(X)
    vae = _vae(2, hidden_layer_sizes=(), max_iter=1000, learning_rate_init=1e-2, n_iter_no_change=50,
              random_state=0).fit(X)
    # Measured: FA -5.048, ELBO -5.060, IWAE(200) -5.046 nats per row.
    assert vae.score(X) == pytest.approx(fa.score(X), abs=0.05)
    assert vae.log_likelihood_iwae(X, n_importance=200).mean() == pytest.approx(fa.score(X), abs=0.03)
    np.testing.assert_allclose(vae.noise_std_, np.sqrt(fa.noise_variance_), rtol=0.15)


def test_bernoulli_likelihood_needs_data_in_unit_interval():
    rng = np.random.RandomState(0)
    X = (rng.uniform(size=(40, 6)) > 0.5).astype(float)
    vae = _vae(2, hidden_layer_sizes=(8,), likelihood="bernoulli", max_iter=5, random_state=0).fit(X)
    assert np.all((vae.sample(4, random_state=0) >= 0) & (vae.sample(4, random_state=0) <= 1))
    with pytest.raises(ValueError, match=r"likelihood='bernoulli' needs X in \[0, 1\]; got values in \[0, 2\]"):
        _vae(likelihood="bernoulli").fit(2 * X)
    with pytest.raises(ValueError, match=r"needs X in \[0, 1\]"):
        vae.score_samples(X - 0.5)


def test_conditional_vae_generates_the_requested_class():
    rng = np.random.RandomState(0)
    y = np.repeat(["a", "b"], 100)
    X = rng.randn(200, 4) * 0.3 + np.where(y[:, None] == "a", 0.0, 3.0)
    cvae = _vae(1, conditional=True, max_iter=150, random_state=0, **FAST).fit(X, y)
    np.testing.assert_array_equal(cvae.classes_, ["a", "b"])
    samples_a, samples_b = cvae.sample(50, y="a", random_state=0), cvae.sample(50, y="b", random_state=0)
    assert samples_a.shape == samples_b.shape == (50, 4)
    assert np.abs(samples_a.mean(0) - 0.0).max() < 0.5 and np.abs(samples_b.mean(0) - 3.0).max() < 0.5
    assert cvae.sample(3, y=["a", "b", "a"], random_state=0).shape == (3, 4)
    assert cvae.transform(X, y).shape == (200, 1) and cvae.fit_transform(X, y).shape == (200, 1)
    assert cvae.score_samples(X, y).shape == (200,)
    with pytest.raises(ValueError, match="conditional=True"):
        cvae.transform(X)
    with pytest.raises(ValueError, match="labels not seen in fit"):
        cvae.sample(2, y="c")
    with pytest.raises(ValueError, match="needs the class labels y"):
        _vae(conditional=True).fit(X)


def test_reproducible_with_random_state():
    X = X_MANIFOLD[:100]
    a, b, c = (_vae(2, hidden_layer_sizes=(8,), max_iter=5, random_state=s).fit(X) for s in (0, 0, 1))
    np.testing.assert_array_equal(a.transform(X), b.transform(X))
    np.testing.assert_array_equal(a.score_samples(X), b.score_samples(X))
    np.testing.assert_array_equal(a.sample(3, random_state=2), b.sample(3, random_state=2))
    assert not np.allclose(a.transform(X), c.transform(X))
    assert not np.allclose(a.sample(3, random_state=2), a.sample(3, random_state=3))


def test_pickle_round_trip(fitted):
    loaded = pickle.loads(pickle.dumps(fitted))
    X = X_MANIFOLD[:20]
    np.testing.assert_array_equal(loaded.transform(X), fitted.transform(X))
    np.testing.assert_array_equal(loaded.score_samples(X), fitted.score_samples(X))
    np.testing.assert_array_equal(loaded.sample(4, random_state=0), fitted.sample(4, random_state=0))


def test_float32_input_stays_float32():
    X = X_MANIFOLD[:60].astype(np.float32)
    vae = _vae(2, hidden_layer_sizes=(8,), max_iter=3, random_state=0).fit(X)
    assert vae.dtype_ == "float32"
    assert vae.transform(X).dtype == np.float32
    assert vae.inverse_transform(vae.transform(X)).dtype == np.float32


def test_kl_warmup_runs_before_the_stopping_rule():
    X = X_MANIFOLD[:100]
    vae = _vae(2, hidden_layer_sizes=(8,), kl_warmup_epochs=6, n_iter_no_change=1, tol=1e9, max_iter=50,
              random_state=0).fit(X)
    # 6 warm-up epochs always run; then, with an unreachable tol, two epochs
    # without improvement (n_iter_no_change + 1) end training.
    assert vae.n_iter_ == len(vae.loss_curve_) == 8
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _vae(2, hidden_layer_sizes=(8,), kl_warmup_epochs=3, max_iter=3, random_state=0).fit(X)
    assert any(issubclass(w.category, ConvergenceWarning) for w in caught)


def test_early_stopping_records_validation_scores():
    vae = _vae(2, early_stopping=True, max_iter=30, n_iter_no_change=3, random_state=0, **FAST).fit(X_MANIFOLD)
    assert len(vae.validation_scores_) == vae.n_iter_
    assert vae.best_validation_score_ == max(vae.validation_scores_)
    assert vae.best_loss_ is None


def test_in_a_pipeline_with_a_classifier():
    rng = np.random.RandomState(0)
    y = np.repeat([0, 1], 100)
    X = rng.randn(200, 8) + 2.0 * y[:, None] * np.r_[np.ones(4), np.zeros(4)]
    model = make_pipeline(StandardScaler(), _vae(2, max_iter=50, random_state=0, **FAST), LogisticRegression())
    assert model.fit(X, y).score(X, y) > 0.9


def test_grid_search_over_n_components():
    search = GridSearchCV(_vae(max_iter=60, random_state=0, **FAST), {"n_components": [1, 2]}, cv=3)
    search.fit(X_MANIFOLD[:240])
    assert search.best_params_ == {"n_components": 2}
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_fits_on_cuda_and_pickles_on_the_cpu():
    X = X_MANIFOLD[:100]
    vae = _vae(2, hidden_layer_sizes=(8,), max_iter=5, device="cuda", random_state=0).fit(X)
    assert vae.device_.type == "cuda" and vae.dtype_ == "float32"
    state = vae.__getstate__()
    assert all(p.device.type == "cpu" for p in state["module_"].parameters())
    assert vae.transform(X).dtype == np.float64
    assert np.all(np.isfinite(vae.score_samples(X))) and np.all(np.isfinite(vae.log_likelihood_iwae(X)))
    assert vae.sample(3, random_state=0).shape == (3, 10)


# ------------------------------------------------------------ method arguments
@pytest.mark.parametrize(
    "call, name",
    [
        (lambda m, X: m.sample(0), "n_samples"),
        (lambda m, X: m.sample(2.5), "n_samples"),
        (lambda m, X: m.sample(2, random_state="seed"), "random_state"),
        (lambda m, X: m.log_likelihood_iwae(X, n_importance=0), "n_importance"),
        (lambda m, X: m.log_likelihood_iwae(X, random_state=[1]), "random_state"),
        (lambda m, X: m.transform(X, return_std="yes"), "return_std"),
    ],
)
def test_bad_method_arguments_are_reported(fitted, call, name):
    with pytest.raises(ValueError, match=f"The '{name}' parameter of VAE.[a-z_]+ must be"):
        call(fitted, X_MANIFOLD[:5])


@pytest.mark.parametrize(
    "params, name",
    [({"n_mc_train": 0}, "n_mc_train"), ({"warm_start": 1}, "warm_start"), ({"callbacks": "log"}, "callbacks")],
)
def test_bad_parameters_are_reported(params, name):
    with pytest.raises(ValueError, match=f"The '{name}' parameter of VAE must be"):
        _vae(max_iter=1, **params).fit(X_MANIFOLD[:20])


# ----------------------------------------------------------------- partial_fit
def test_first_partial_fit_is_one_epoch_of_fit():
    X = X_MANIFOLD[:150]
    for params in ({}, {"likelihood": "bernoulli", "kl_warmup_epochs": 3, "n_mc_train": 2}):
        data = 1 / (1 + np.exp(-X)) if params else X
        streamed = _vae(random_state=0, **params).partial_fit(data)
        once = _vae(max_iter=1, random_state=0, **params).fit(data)
        np.testing.assert_array_equal(streamed.transform(data), once.transform(data))
        np.testing.assert_array_equal(streamed.score_samples(data), once.score_samples(data))
        assert streamed.loss_curve_ == once.loss_curve_ and streamed.n_iter_ == 1


def test_partial_fit_continues_with_the_optimiser_state():
    X = X_MANIFOLD
    model = _vae(2, random_state=0, **FAST)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # one epoch is a fixed schedule
        for _ in range(40):
            for start in range(0, len(X), 100):
                model.partial_fit(X[start : start + 100])
    assert model.n_iter_ == len(model.loss_curve_) == 120
    assert model.best_loss_ == min(model.loss_curve_)
    assert model.loss_curve_[-1] < model.loss_curve_[0] - 2
    state = model._optimizer.state_dict()["state"]
    assert state and all(int(s["step"]) == 40 * 3 * 2 for s in state.values())  # 2 minibatches of 64 per call
    with pytest.raises(ValueError, match="X has 3 features, but VAE is expecting 10"):
        model.partial_fit(np.zeros((5, 3)))


def test_partial_fit_after_fit_and_after_pickling():
    X = X_MANIFOLD[:100]
    model = _vae(2, max_iter=3, random_state=0, **FAST).fit(X)
    model.partial_fit(X)
    assert model.n_iter_ == 4 and len(model.loss_curve_) == 4
    loaded = pickle.loads(pickle.dumps(model))
    assert not hasattr(loaded, "_optimizer")
    loaded.partial_fit(X)
    assert loaded.n_iter_ == 5 and isinstance(loaded._optimizer, torch.optim.Adam)
    # Adam's moments survived the pickle: the same model as without one.
    steps = loaded._optimizer.state_dict()["state"][0]["step"] - model._optimizer.state_dict()["state"][0]["step"]
    assert steps == np.ceil(len(X) / FAST["batch_size"])  # one epoch more, not a new count
    np.testing.assert_array_equal(loaded.transform(X), model.partial_fit(X).transform(X))


def test_conditional_partial_fit_takes_the_classes_of_the_first_batch():
    rng = np.random.RandomState(0)
    y = np.tile(["a", "b"], 50)
    X = rng.randn(100, 4)
    model = _vae(1, conditional=True, random_state=0, **FAST).partial_fit(X, y)
    model.partial_fit(X[:10], y[:10])
    np.testing.assert_array_equal(model.classes_, ["a", "b"])
    with pytest.raises(ValueError, match="labels not seen in fit"):
        model.partial_fit(X[:2], ["a", "c"])


# ------------------------------------------------------------------ warm_start
def test_warm_start_continues_from_the_fitted_model():
    X = X_MANIFOLD
    model = _vae(2, max_iter=40, warm_start=True, random_state=0, **FAST).fit(X)
    first_curve, module, scaling = list(model.loss_curve_), model.module_, model._x_mean.copy()
    model.fit(X)
    assert model.module_ is module
    np.testing.assert_array_equal(model._x_mean, scaling)
    # the second fit starts about where the first ended (its new Adam's first
    # steps add a little), far below where the first started
    assert model.loss_curve_[0] < first_curve[-1] + 0.1 * (first_curve[0] - first_curve[-1])
    cold = _vae(2, max_iter=40, random_state=0, **FAST).fit(X)
    assert cold.loss_curve_ == first_curve
    model.set_params(hidden_layer_sizes=(16,)).fit(X)  # another network: starts afresh
    assert model.module_ is not module


def test_warm_start_continues_the_kl_warmup():
    X = X_MANIFOLD[:100]
    model = _vae(2, hidden_layer_sizes=(8,), kl_warmup_epochs=4, max_iter=2, warm_start=True, random_state=0)
    model.fit(X)
    model.set_params(n_iter_no_change=1, tol=1e9, max_iter=50).fit(X)
    # 2 warm-up epochs were left: they run, then two epochs without improvement stop training
    assert model.n_iter_ == 4


class _EpochRecorder(Callback):
    def on_train_begin(self, state):
        self.losses = []

    def on_epoch_end(self, state):
        self.losses.append(state.epoch_loss)


def test_callbacks_see_every_epoch():
    recorder = _EpochRecorder()
    X = X_MANIFOLD[:100]
    model = _vae(2, hidden_layer_sizes=(8,), max_iter=4, callbacks=[recorder], random_state=0).fit(X)
    assert recorder.losses == model.loss_curve_
    model.partial_fit(X)
    assert recorder.losses == model.loss_curve_[-1:]


class _CountSteps(Callback):
    def on_train_begin(self, state):
        self.steps = 0

    def on_batch_end(self, state):
        self.steps += 1


@pytest.mark.parametrize("n_rows", [100, 400])
def test_default_max_iter_is_a_step_budget_whatever_the_rows(n_rows, monkeypatch):
    # max_iter="auto" with the budget patched to 3 epochs or 7 steps: 100 rows at 64 per step
    # (2 steps per epoch) stop after 3 epochs (6 steps), 400 rows (7 per epoch) after 7 steps,
    # one epoch; an explicit max_iter=2 runs 2 whole epochs whatever the budget.
    monkeypatch.setattr(vae_module, "AUTO_MAX_EPOCHS", 3)
    monkeypatch.setattr(vae_module, "AUTO_MAX_STEPS", 7)
    X = _manifold_data(n_rows)
    counter = _CountSteps()
    model = _vae(2, n_iter_no_change=100, random_state=0, callbacks=[counter], **FAST)
    assert model.max_iter == "auto"
    model.fit(X)
    steps_per_epoch = -(-n_rows // 64)
    assert counter.steps == min(3 * steps_per_epoch, 7)
    assert model.n_iter_ == min(3, -(-7 // steps_per_epoch))
    model.set_params(max_iter=2).fit(X)
    assert (counter.steps, model.n_iter_) == (2 * steps_per_epoch, 2)
