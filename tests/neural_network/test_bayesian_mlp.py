"""Behaviour of BayesianMLPRegressor: uncertainty, objective, API contract."""

import copy
import pickle

import joblib
import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from conftest import SINE_NOISE, sine
from discovery import with_loop
from skbayes import BayesianMLPRegressor, DeviceWarning
from skbayes._training import Callback, KLWarmup, TrainingState
from skbayes.datasets import get_uci_split, load_uci
from skbayes.inference import FitContext, MCDropout, MeanFieldVI

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")



def _draws(model, X):
    """The network outputs (T, n, k) under the weight draws that prediction uses."""
    parameters, _ = model._draw_parameters(model._n_mc_predict(), model._predict_seed)
    with torch.no_grad():
        return model.module_["network"].forward_with(model._to_tensor(X), parameters).numpy()


@pytest.fixture(scope="module")
def fitted(sine_data):
    (X, y), _ = sine_data
    return {
        inference: BayesianMLPRegressor(inference=inference, random_state=0, noise="homoscedastic", hidden_layer_sizes=(50,)).fit(X, y)
        for inference in ("mfvi", "mc_dropout")
    }


# ----------------------------------------------------------- uncertainty quality
def test_mfvi_recovers_the_noise_level(fitted):
    assert fitted["mfvi"].noise_std_[0] == pytest.approx(SINE_NOISE, rel=0.25)


@pytest.mark.parametrize("inference", ["mfvi", "mc_dropout"])
def test_intervals_cover_at_the_stated_rate(fitted, sine_data, inference):
    _, (X_test, y_test) = sine_data
    lower, upper = fitted[inference].predict_interval(X_test, coverage=0.95)
    coverage = np.mean((y_test >= lower) & (y_test <= upper))
    assert 0.90 <= coverage <= 0.99


@pytest.mark.parametrize("inference", ["mfvi", "mc_dropout"])
def test_epistemic_uncertainty_grows_away_from_the_data(fitted, inference):
    inside = np.linspace(-2.5, 2.5, 50)[:, None]
    outside = np.r_[np.linspace(-9, -6, 10), np.linspace(6, 9, 10)][:, None]
    model = fitted[inference]
    ratio = model.predict_uncertainty(outside).epistemic_std.mean() / (
        model.predict_uncertainty(inside).epistemic_std.mean()
    )
    assert ratio >= 3


def test_predictive_std_matches_a_brute_force_mixture(fitted, sine_data):
    # Independent computations of each part: the noise from the likelihood's
    # raw parameter (softplus + floor, by hand), the epistemic spread from
    # 4000 fresh weight draws of the network's posterior (another seed than
    # prediction's), and the total from 20,000 draws of y by sample_y.
    _, (X_test, _) = sine_data
    X = X_test[:50]
    model = copy.deepcopy(fitted["mfvi"])
    model.inference_.set_params(n_mc_predict=4000)  # the fitted method's draws, without refitting
    u = model.predict_uncertainty(X)
    raw = float(model.module_["likelihood"].raw_noise.detach().reshape(-1)[0])
    noise = (np.log1p(np.exp(raw)) + 1e-6) * model._y_scale[0]
    np.testing.assert_allclose(u.aleatoric_std, noise, rtol=1e-10)
    network = model.module_["network"]
    with torch.no_grad():
        params = network.sample_parameters(4000, torch.Generator().manual_seed(123))
        f = network.forward_with(torch.tensor(X), params)[..., 0].numpy() * model._y_scale[0]
    # 4000 draws each: the two spreads agree to a few per cent
    np.testing.assert_allclose(u.epistemic_std, f.std(0), rtol=0.08)
    np.testing.assert_allclose(u.mean, f.mean(0) + model._y_mean[0], atol=0.05 * u.std.min())
    samples = model.sample_y(X, n_samples=20_000, random_state=2)
    np.testing.assert_allclose(u.std, samples.std(axis=1), rtol=0.03)
    mean, std = model.predict(X, return_std=True)
    np.testing.assert_array_equal(mean, u.mean)
    np.testing.assert_array_equal(std, model.predict_std(X))


def test_sample_y_matches_the_predictive_moments(fitted, sine_data):
    _, (X_test, _) = sine_data
    model = fitted["mfvi"]
    samples = model.sample_y(X_test[:20], n_samples=4000, random_state=1)
    assert samples.shape == (20, 4000)
    mean, std = model.predict(X_test[:20], return_std=True)
    # 4000 draws: Monte-Carlo error of the mean ~ std / 63; predict uses 100 draws.
    np.testing.assert_allclose(samples.mean(axis=1), mean, atol=0.06)
    np.testing.assert_allclose(samples.std(axis=1), std, rtol=0.15)
    np.testing.assert_array_equal(samples, model.sample_y(X_test[:20], n_samples=4000, random_state=1))


def test_elbo_increases_during_training(fitted):
    curve = np.asarray(fitted["mfvi"].loss_curve_)
    assert curve[-10:].mean() < curve[:10].mean() - 0.5


def test_log_predictive_density_matches_a_direct_mixture(fitted, sine_data):
    # Independent computation: draws from the network, mixture density by hand.
    from scipy.special import logsumexp
    from scipy.stats import norm

    _, (X_test, y_test) = sine_data
    model = fitted["mfvi"]
    X, y = X_test[:30], y_test[:30]
    f = _draws(model, X)[..., 0] * model._y_scale[0] + model._y_mean[0]
    expected = logsumexp(norm.logpdf(y, f, model.noise_std_[0]), axis=0) - np.log(len(f))
    np.testing.assert_allclose(model.log_predictive_density(X, y), expected, rtol=1e-8)


# ------------------------------------------------------------ closed-form checks
def test_mean_field_vi_of_a_linear_model_matches_the_exact_posterior():
    # With no hidden layer and a fixed noise, the model is Bayesian linear
    # regression. Its posterior is Gaussian with precision A = X'X/s^2 + I/p^2;
    # the optimal mean-field q has the exact posterior mean and variances
    # 1/diag(A) (Bishop, PRML, section 10.1.2).
    rng = np.random.RandomState(0)
    n, noise, prior = 40, 0.5, 1.0
    X = rng.randn(n, 2)
    y = X @ np.array([1.0, -0.5]) + 0.3 + noise * rng.randn(n)
    model = BayesianMLPRegressor(
        hidden_layer_sizes=(), inference=MeanFieldVI(n_mc_train=8, learning_rate_init=0.01, max_iter=3000, tol=0.0, n_iter_no_change=3000), noise_std=noise, normalize_y=False,
        prior_scale=prior, batch_size=n, random_state=0, noise="homoscedastic",
    ).fit(X, y)
    Phi = np.c_[X, np.ones(n)]
    A = Phi.T @ Phi / noise**2 + np.eye(3) / prior**2
    exact_mean = np.linalg.solve(A, Phi.T @ y / noise**2)
    layer = model.module_["network"].layers[0]
    q_mean = np.r_[layer.weight_mu.detach().numpy()[:, 0], layer.bias_mu.detach().numpy()]
    q_std = np.r_[layer.weight_sigma.detach().numpy()[:, 0], layer.bias_sigma.detach().numpy()]
    np.testing.assert_allclose(q_mean, exact_mean, atol=0.02)
    np.testing.assert_allclose(q_std, 1 / np.sqrt(np.diag(A)), rtol=0.1)


def test_kl_weight_does_not_depend_on_the_batch_size():
    # The per-datum loss is -(1/B) sum_batch log p + KL/N. Averaged over a
    # partition of the data into equal batches it must equal the full-batch
    # loss for every batch size; a KL divided by B would not. A dropout rate of
    # 0 makes the forward pass deterministic so the identity is exact.
    rng = np.random.RandomState(0)
    X, y = rng.randn(120, 3), rng.randn(120)
    model = BayesianMLPRegressor(inference=MCDropout(dropout_rate=0.0, max_iter=1), random_state=0, noise="homoscedastic", hidden_layer_sizes=(50,))
    model.fit(X, y)
    module = model.module_
    x_t, y_t = torch.tensor(X), torch.tensor(y[:, None])
    kl = float(module["network"].kl().detach())
    # the loss the training loop minimises, built by the fitted method
    context = FitContext(generator=torch.Generator(), n_data=120, batch_size=120)
    loss_fn = model.inference_.prepare(module, x_t, y_t, model._settings(), context).loss_fn

    def minibatch_loss(start, stop):
        return float(loss_fn(torch.arange(start, stop)))

    with torch.no_grad():
        full = minibatch_loss(0, 120)
        for batch in (1, 8, 40, 120):
            losses = [minibatch_loss(i, i + batch) for i in range(0, 120, batch)]
            assert np.mean(losses) == pytest.approx(full, rel=1e-10)
            # the KL enters each minibatch loss with weight 1/N
            nll = -float(module["likelihood"].log_prob(y_t[:batch], module["network"](x_t[:batch])).mean())
            assert losses[0] == pytest.approx(nll + kl / 120, rel=1e-10)


class _SetWeights(Callback):
    """At the end of training, give the one layer the stored weights W' = [[3], [4]] and bias b = [2]."""

    def on_train_end(self, state):
        layer = self.model.module_["network"].layers[0]
        with torch.no_grad():
            layer.weight.copy_(torch.tensor([[3.0], [4.0]], dtype=layer.weight.dtype))
            layer.bias.fill_(2.0)


def test_mc_dropout_weight_decay_follows_the_kl_condition():
    # Gal (2016) eq. 3.13: KL ~ (1-p) l^2/2 ||M||^2 + l^2/2 ||b||^2 for the
    # unscaled means M. Inverted dropout stores M' = (1-p) M. A linear model
    # (2 inputs, 1 output) with p = 0.2, prior_scale = 0.5 (l^2 = 4), stored
    # W' = [[3], [4]] (||M'||^2 = 25, so ||M||^2 = 25 / 0.64 = 39.0625) and
    # b = [2]:  0.8 * 2 * 39.0625 + 2 * 4 = 62.5 + 8 = 70.5 nats, worked by hand.
    # The callback sets the weights before the method reports its KL.
    set_weights = _SetWeights()
    model = BayesianMLPRegressor(
        hidden_layer_sizes=(), inference=MCDropout(dropout_rate=0.2, max_iter=1), prior_scale=0.5, callbacks=[set_weights], random_state=0, noise="homoscedastic",
    )
    set_weights.model = model
    model.fit(np.random.RandomState(0).randn(20, 2), np.arange(20.0))
    assert model.module_["network"].layers[0].weight.shape == (2, 1)
    assert model.inference_diagnostics_["kl"] == pytest.approx(70.5, rel=1e-12)


# ------------------------------------------------------------- reproducibility
def test_same_random_state_gives_identical_predictions_without_global_seed(sine_data):
    (X, y), (X_test, _) = sine_data
    state = torch.random.get_rng_state()
    params = {"inference": MeanFieldVI(max_iter=20), "noise": "homoscedastic", "hidden_layer_sizes": (50,), "random_state": 3}
    a = BayesianMLPRegressor(**params).fit(X, y).predict(X_test, return_std=True)
    b = BayesianMLPRegressor(**params).fit(X, y).predict(X_test, return_std=True)
    c = BayesianMLPRegressor(inference=MeanFieldVI(max_iter=20), random_state=4, noise="homoscedastic", hidden_layer_sizes=(50,)).fit(X, y).predict(X_test)
    assert torch.equal(state, torch.random.get_rng_state())
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.allclose(a[0], c)


@pytest.mark.parametrize("dump_load", ["pickle", "joblib"])
def test_pickle_round_trip_gives_identical_predictions(fitted, sine_data, tmp_path, dump_load):
    _, (X_test, y_test) = sine_data
    model = fitted["mc_dropout"]
    if dump_load == "pickle":
        loaded = pickle.loads(pickle.dumps(model))
    else:
        joblib.dump(model, tmp_path / "model.joblib")
        loaded = joblib.load(tmp_path / "model.joblib")
    for method in ("predict_std", "predict"):
        np.testing.assert_array_equal(getattr(model, method)(X_test), getattr(loaded, method)(X_test))
    np.testing.assert_array_equal(model.sample_y(X_test[:5], 3), loaded.sample_y(X_test[:5], 3))


def test_model_fitted_on_cuda_loads_on_a_cpu_only_machine(fitted, sine_data, monkeypatch):
    # Pickles always hold CPU tensors and remember the device. Here we state
    # that a model comes from a CUDA device, and hide CUDA while loading.
    _, (X_test, _) = sine_data
    model = fitted["mfvi"]
    state = model.__getstate__()
    assert all(p.device.type == "cpu" for p in state["module_"].parameters())
    state["device_"] = torch.device("cuda", 0)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    loaded = BayesianMLPRegressor.__new__(BayesianMLPRegressor)
    with pytest.warns(DeviceWarning, match="not available here"):
        loaded.__setstate__(state)
    assert loaded.device_.type == "cpu"
    np.testing.assert_array_equal(loaded.predict(X_test), model.predict(X_test))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_fit_pickles_to_cpu_tensors(sine_data):
    (X, y), (X_test, _) = sine_data
    model = BayesianMLPRegressor(inference=MeanFieldVI(max_iter=5), device="cuda", random_state=0, noise="homoscedastic", hidden_layer_sizes=(50,)).fit(X, y)
    assert model.device_.type == "cuda" and model.dtype_ == "float32"
    state = model.__getstate__()
    assert all(p.device.type == "cpu" for p in state["module_"].parameters())
    loaded = pickle.loads(pickle.dumps(model))
    np.testing.assert_allclose(loaded.predict(X_test), model.predict(X_test), rtol=1e-6)


# ------------------------------------------------------------------ API shapes
@pytest.mark.parametrize("inference", ["mfvi", "mc_dropout"])
def test_multi_output_shapes(inference):
    rng = np.random.RandomState(0)
    X = rng.randn(60, 3)
    Y = np.c_[X[:, 0], 10 * X[:, 1], -X[:, 2]] + 0.1 * rng.randn(60, 3)
    model = BayesianMLPRegressor(inference=with_loop(inference, max_iter=5), random_state=0, noise="homoscedastic", hidden_layer_sizes=(50,)).fit(X, Y)
    mean, std = model.predict(X[:7], return_std=True)
    assert mean.shape == std.shape == (7, 3)
    assert model.noise_std_.shape == (3,)
    assert model.sample_y(X[:7], n_samples=4).shape == (7, 3, 4)
    assert model.log_predictive_density(X[:7], Y[:7]).shape == (7,)
    lower, upper = model.predict_interval(X[:7])
    assert lower.shape == (7, 3) and np.all(lower < upper)
    # a (n, 1) target keeps its second axis, like GaussianProcessRegressor
    assert BayesianMLPRegressor(inference=MeanFieldVI(max_iter=2), random_state=0, noise="homoscedastic", hidden_layer_sizes=(50,)).fit(X, Y[:, :1]).predict(X).shape == (60, 1)


def test_float32_input_is_computed_and_returned_in_float32():
    rng = np.random.RandomState(0)
    X, y = rng.randn(40, 2).astype(np.float32), rng.randn(40).astype(np.float32)
    model = BayesianMLPRegressor(inference=MeanFieldVI(max_iter=2), random_state=0, noise="homoscedastic", hidden_layer_sizes=(50,)).fit(X, y)
    assert model.dtype_ == "float32"
    assert model.predict(X).dtype == np.float32


def test_large_inputs_are_predicted_in_blocks(fitted):
    model = fitted["mfvi"]
    X = np.linspace(-3, 3, 60_000)[:, None]
    mean = model.predict(X)
    assert mean.shape == (60_000,)
    np.testing.assert_allclose(mean[::7919], model.predict(X[::7919]), rtol=1e-12)


def test_fixed_noise_is_kept_in_the_units_of_y(sine_data):
    (X, y), _ = sine_data
    model = BayesianMLPRegressor(inference=MeanFieldVI(max_iter=3), noise_std=0.7, random_state=0, noise="homoscedastic", hidden_layer_sizes=(50,)).fit(X, 5 * y)
    np.testing.assert_allclose(model.noise_std_, [0.7])


def test_early_stopping_restores_the_best_validation_state(sine_data):
    (X, y), _ = sine_data
    model = BayesianMLPRegressor(inference=MeanFieldVI(early_stopping=True, n_iter_no_change=5, max_iter=300), random_state=0, noise="homoscedastic", hidden_layer_sizes=(50,)).fit(X, y)
    assert model.n_iter_ < 300
    assert len(model.validation_scores_) == model.n_iter_
    assert model.best_validation_score_ == max(model.validation_scores_)
    assert model.best_loss_ is None


def test_warm_start_continues_from_the_fitted_network(sine_data):
    (X, y), _ = sine_data
    model = BayesianMLPRegressor(inference=MeanFieldVI(max_iter=5), warm_start=True, random_state=0, noise="homoscedastic", hidden_layer_sizes=(50,)).fit(X, y)
    first = model.module_
    loss_after_first = model.loss_curve_[-1]
    model.fit(X, y)
    assert model.module_ is first
    assert model.loss_curve_[0] < loss_after_first + 0.5
    cold = BayesianMLPRegressor(inference=MeanFieldVI(max_iter=5), random_state=0, noise="homoscedastic", hidden_layer_sizes=(50,)).fit(X, y)
    assert cold.loss_curve_[0] > model.loss_curve_[0]


def test_verbose_shows_a_progress_bar(capsys):
    X, y = sine(50, 0)
    BayesianMLPRegressor(inference=MeanFieldVI(max_iter=3), verbose=True, random_state=0, noise="homoscedastic", hidden_layer_sizes=(50,)).fit(X, y)
    assert "BayesianMLPRegressor" in capsys.readouterr().err


def test_works_in_pipeline_grid_search_and_cross_validation(sine_data):
    (X, y), _ = sine_data
    pipe = make_pipeline(StandardScaler(), BayesianMLPRegressor(inference=MeanFieldVI(max_iter=30), random_state=0, noise="homoscedastic", hidden_layer_sizes=(50,)))
    assert clone(pipe).fit(X, y).score(X, y) > 0.5
    scores = cross_val_score(pipe, X, y, cv=3)
    assert scores.shape == (3,) and np.all(scores > 0.3)
    search = GridSearchCV(pipe, {"bayesianmlpregressor__prior_scale": [0.1, 1.0]}, cv=2).fit(X, y)
    assert search.best_params_["bayesianmlpregressor__prior_scale"] in (0.1, 1.0)


# ------------------------------------------------------------------- bad input
def test_predict_before_fit_raises():
    with pytest.raises(NotFittedError):
        BayesianMLPRegressor(inference="mfvi", noise="homoscedastic", hidden_layer_sizes=(50,)).predict(np.zeros((2, 2)))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_input_is_rejected(bad):
    X = np.ones((10, 2))
    X[3, 1] = bad
    with pytest.raises(ValueError, match="NaN|infinity"):
        BayesianMLPRegressor(inference=MeanFieldVI(max_iter=1), noise="homoscedastic", hidden_layer_sizes=(50,)).fit(X, np.ones(10))
    with pytest.raises(ValueError, match="NaN|infinity"):
        BayesianMLPRegressor(inference=MeanFieldVI(max_iter=1), noise="homoscedastic", hidden_layer_sizes=(50,)).fit(np.ones((10, 2)), np.r_[np.ones(9), bad])


def test_feature_count_mismatch_is_reported(fitted):
    with pytest.raises(ValueError, match="X has 2 features, but BayesianMLPRegressor is expecting 1"):
        fitted["mfvi"].predict(np.zeros((3, 2)))


@pytest.mark.parametrize(
    "params, match",
    [
        ({"hidden_layer_sizes": (10, 0)}, "hidden_layer_sizes must hold positive integers"),
        ({"inference": "no_such_method"}, "'inference' parameter"),
        ({"inference": MCDropout(dropout_rate=1.0)}, "'dropout_rate' parameter"),
        ({"prior_scale": 0}, "'prior_scale' parameter"),
        ({"noise_std": "fixed"}, "'noise_std' parameter"),
        ({"device": "tpu"}, "not a valid torch device"),
    ],
)
def test_bad_parameters_are_reported(params, match):
    with pytest.raises(ValueError, match=match):
        BayesianMLPRegressor(**{"inference": MeanFieldVI(max_iter=1), "noise": "homoscedastic", **params}).fit(np.zeros((4, 2)), np.arange(4.0))


def test_diverging_training_stops_with_advice():
    X, y = sine(64, 0)
    with pytest.raises(ValueError, match="Lower learning_rate_init"):
        BayesianMLPRegressor(inference=MeanFieldVI(learning_rate_init=1e12, max_iter=50), random_state=0, noise="homoscedastic", hidden_layer_sizes=(50,)).fit(X * 1e6, y * 1e6)


def test_early_stopping_needs_rows_for_validation():
    with pytest.raises(ValueError, match="early_stopping needs at least one training"):
        BayesianMLPRegressor(inference=MeanFieldVI(early_stopping=True, max_iter=1), noise="homoscedastic", hidden_layer_sizes=(50,)).fit(np.zeros((1, 2)), np.ones(1))


def test_convergence_warning_at_max_iter():
    X, y = sine(40, 0)
    with pytest.warns(ConvergenceWarning, match="maximum number of epochs"):
        BayesianMLPRegressor(inference=MeanFieldVI(max_iter=2), random_state=0, noise="homoscedastic", hidden_layer_sizes=(50,)).fit(X, y)


# ------------------------------------------------------------------- real data
@pytest.mark.slow
@pytest.mark.parametrize("inference", ["mfvi", "mc_dropout"])
def test_uci_concrete_split_reaches_a_sane_test_log_likelihood(inference):
    # Published rows on concrete (Cinelli 2019, Table 3.3): Bayes by Backprop
    # -3.24, MC dropout at 40 epochs -3.73.
    X_train, X_test, y_train, y_test = get_uci_split(load_uci("concrete"), 0)
    model = make_pipeline(StandardScaler(), BayesianMLPRegressor(inference=inference, random_state=0, noise="homoscedastic", hidden_layer_sizes=(50,)))
    model.fit(X_train, y_train)
    log_lik = model[-1].log_predictive_density(model[:-1].transform(X_test), y_test).mean()
    rmse = np.sqrt(np.mean((model.predict(X_test) - y_test) ** 2))
    assert log_lik > -3.3
    assert rmse < 7.0


def test_grid_search_with_an_uncertainty_aware_scorer(sine_data):
    from skbayes.metrics import gaussian_nll, get_scorer

    (X, y), (X_test, y_test) = sine_data
    pipe = make_pipeline(StandardScaler(), BayesianMLPRegressor(inference=MeanFieldVI(max_iter=40), random_state=0, noise="homoscedastic", hidden_layer_sizes=(50,)))
    grid = {"bayesianmlpregressor__noise_std": [0.05, 0.2, 2.0]}
    search = GridSearchCV(pipe, grid, cv=2, scoring=get_scorer("neg_gaussian_nll")).fit(X, y)
    # The noise level the data were generated with wins on held-out NLL.
    assert search.best_params_ == {"bayesianmlpregressor__noise_std": 0.2}
    mean, std = search.best_estimator_.predict(X_test, return_std=True)
    assert search.score(X_test, y_test) == pytest.approx(-gaussian_nll(y_test, mean, y_std=std))


def test_kl_warmup_starts_from_the_likelihood_alone():
    # With kl_warmup_epochs the first step's loss carries no KL, the KL weight
    # then rises linearly to 1 (the shared schedule of the VAE), and stopping
    # waits for the warm-up to end.
    from skbayes.nn import kl_warmup_weight

    assert kl_warmup_weight(0, 10) == 0.0
    assert kl_warmup_weight(5, 10) == 0.5
    assert kl_warmup_weight(25, 10) == 1.0
    assert kl_warmup_weight(0, 0) == 1.0
    rng = np.random.RandomState(0)
    X, y = rng.randn(64, 2), rng.randn(64)
    model = BayesianMLPRegressor(inference=MeanFieldVI(kl_warmup_epochs=3, max_iter=3), batch_size=64, random_state=0, noise="homoscedastic", hidden_layer_sizes=(50,))
    # the callback the method trains with: one step per epoch here
    warmup = KLWarmup(3)
    state = TrainingState(module=None, optimizer=None, n_batches=1)
    warmup.on_train_begin(state)
    assert warmup.weight == 0.0
    for step, expected in [(1, 1 / 3), (3, 1.0)]:
        state.step = step
        warmup.on_batch_end(state)
        assert warmup.weight == pytest.approx(expected)
    # The KL of the prior-far initial posterior is large, so the first epochs'
    # losses (little KL) are far below the same model's loss without warm-up.
    with_warmup = model.fit(X, y).loss_curve_[0]
    without = clone(model).set_params(inference__kl_warmup_epochs=0).fit(X, y).loss_curve_[0]
    assert with_warmup < without - 1.0
