"""Every estimator and inference method on a CUDA device (skipped without one).

A model fitted on the GPU must train (finite losses), predict finite values of
the right shapes and dtype (float32 by default on accelerators), agree with
the same model moved to the CPU (the Monte-Carlo draws of prediction come from
a CPU generator, so only float32 round-off differs), stream with
``partial_fit``, and pickle to CPU tensors.
"""

import pickle

import numpy as np
import pytest
import torch

from skbayes import VAE, BayesianMLPClassifier, BayesianMLPRegressor, SparseGPRegressor
from discovery import inference_methods, with_loop
from skbayes.inference import (
    SGHMC, DeepEnsemble, GPInducedPrior, MCDropout, MeanFieldVI, SampledSparseGP, SparseVariational,
)

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),
]

# Every method skbayes.inference exports (tests/discovery.py), with small settings.
METHODS = inference_methods({
    "MeanFieldVI": [{"init": "iblm", "kl_warmup_epochs": 2}],
    "MCDropout": [{"dropout_rate": 0.1}],
    "SGHMC": [
        {"burn_in": 4, "thinning": 1, "n_kept_samples": 4},
        {"burn_in": 4, "thinning": 1, "n_kept_samples": 4, "prior": lambda: GPInducedPrior(
            n_measurement_points=8, n_function_draws=16, n_critic_steps=1, max_iter=3)},
    ],
    "DeepEnsemble": [{"n_estimators": 3}],
    "WHVI": [{"n_flows": 1}],
    "MNF": [{"flow": "realnvp", "hidden_size": 8}],
    "BayesByHypernet": [{"generator_hidden_sizes": (8,)}],
    "BayesByGAN": [{"generator_hidden_sizes": (8,), "discriminator_hidden_sizes": (8,)}],
})


@pytest.fixture(scope="module")
def data():
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, size=(120, 3))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.randn(120)
    return X, y


def _on_cpu(model):
    loaded = pickle.loads(pickle.dumps(model))  # pickles hold CPU tensors and remember the device
    loaded.__dict__["device_"] = torch.device("cpu")
    loaded.module_ = loaded.module_.to("cpu")
    return loaded


@pytest.mark.parametrize("method", METHODS, ids=lambda m: type(m).__name__)
def test_regressor_on_cuda(method, data):
    X, y = data
    model = BayesianMLPRegressor((16,), inference=with_loop(method, max_iter=6, n_mc_predict=20), device="cuda", random_state=0, noise="homoscedastic")
    model.fit(X, y)
    assert model.device_.type == "cuda" and model.dtype_ == "float32"
    assert next(model.module_.parameters()).is_cuda
    assert np.all(np.isfinite(model.loss_curve_))
    mean, std = model.predict(X, return_std=True)
    assert mean.shape == std.shape == (120,)  # float64 X: outputs in float64, computed in float32
    assert np.all(np.isfinite(mean)) and np.all(std > 0)
    assert model.sample_y(X[:5], n_samples=4).shape == (5, 4)
    assert np.all(np.isfinite(model.log_predictive_density(X, y)))
    cpu_mean, cpu_std = _on_cpu(model).predict(X, return_std=True)
    np.testing.assert_allclose(cpu_mean, mean, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(cpu_std, std, rtol=1e-4, atol=1e-4)
    state = model.__getstate__()
    assert all(not t.is_cuda for t in state["module_"].state_dict().values())


@pytest.mark.parametrize("noise", ["heteroscedastic", "student_t"])
@pytest.mark.parametrize("method", [MeanFieldVI(), DeepEnsemble(n_estimators=3), SGHMC(burn_in=4, thinning=1,
                                    n_kept_samples=4)], ids=lambda m: type(m).__name__)
def test_noise_models_on_cuda(method, noise, data):
    X, y = data
    model = BayesianMLPRegressor((16,), inference=with_loop(method, max_iter=6, n_mc_predict=20), noise=noise, device="cuda",
                                 random_state=0).fit(X, y)
    assert next(model.module_["network"].parameters()).is_cuda
    parts = model.predict_uncertainty(X)
    lower, upper = model.predict_interval(X)
    assert np.all(np.isfinite(parts.std)) and np.all(lower < parts.mean) and np.all(parts.mean < upper)
    assert model.sample_y(X[:5], n_samples=4).shape == (5, 4)
    assert np.all(np.isfinite(model.log_predictive_density(X, y)))
    cpu = _on_cpu(model)
    np.testing.assert_allclose(cpu.predict_uncertainty(X).std, parts.std, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(cpu.predict_interval(X)), np.asarray((lower, upper)), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("method", [m for m in METHODS if m.supports_classification], ids=lambda m: type(m).__name__)
def test_classifier_on_cuda(method, data):
    X, y = data
    labels = (y > 0).astype(int)
    clf = BayesianMLPClassifier((16,), inference=with_loop(method, max_iter=6, n_mc_predict=20), device="cuda", random_state=0)
    proba = clf.fit(X, labels).predict_proba(X)
    assert proba.shape == (120, 2)
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-5)
    parts = clf.predict_uncertainty(X)
    assert np.all(parts.mutual_information >= 0)
    np.testing.assert_allclose(_on_cpu(clf).predict_proba(X), proba, atol=1e-4)


@pytest.mark.parametrize("method", [m for m in METHODS if m.supports_partial_fit], ids=lambda m: type(m).__name__)
def test_partial_fit_on_cuda(method, data):
    X, y = data
    model = BayesianMLPRegressor((16,), inference=with_loop(method, n_mc_predict=10), device="cuda", random_state=0, noise="homoscedastic")
    for rows in np.array_split(np.arange(120), 3):
        model.partial_fit(X[rows], y[rows])
    assert model.n_iter_ == 3 and model.n_seen_ == 120
    assert np.all(np.isfinite(model.predict(X)))


def test_sparse_gp_and_vae_on_cuda(data):
    X, y = data
    gp = SparseGPRegressor(n_inducing=16, device="cuda", random_state=0, inference=SparseVariational(max_iter=20)).fit(X, y)
    mean, std = gp.predict(X, return_std=True)
    assert gp.device_.type == "cuda" and np.all(np.isfinite(mean)) and np.all(std > 0)
    gp.partial_fit(X[:40], y[:40])
    vae = VAE(n_components=2, hidden_layer_sizes=(16,), max_iter=5, device="cuda", random_state=0).fit(X)
    assert vae.transform(X).shape == (120, 2)
    assert np.all(np.isfinite(vae.score_samples(X)))
    vae.partial_fit(X)


def test_sparse_gp_with_a_scikit_learn_kernel_on_cuda(data):
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    X, y = data
    kernel = C(1.0) * RBF(np.ones(3), length_scale_bounds=(0.1, 10.0)) + WhiteKernel(0.1)
    gp = SparseGPRegressor(
        kernel=kernel, n_inducing=16, device="cuda", random_state=0,
        inference=SparseVariational(max_iter=20),
    ).fit(X, y)
    mean, std = gp.predict(X, return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(std > 0)
    assert type(gp.kernel_) is type(kernel) and np.all(np.isfinite(gp.kernel_.theta))
    ls = gp.kernel_.k1.k2.length_scale
    assert np.all((ls >= 0.1) & (ls <= 10.0))


def test_gp_family_on_cuda_and_back_on_cpu(data):
    """The GP classifier, the deep GP and the sampled sparse GP fit on CUDA and pickle to the CPU."""
    from skbayes import DeepGPRegressor, SparseGPClassifier

    X, y = data
    labels = np.where(y > np.median(y), "high", "low")
    clf = SparseGPClassifier(
        n_inducing=16, device="cuda", random_state=0,
        inference=SparseVariational(max_iter=20),
    ).fit(X, labels)
    proba = clf.predict_proba(X)
    assert clf.device_.type == "cuda" and np.allclose(proba.sum(1), 1.0)
    np.testing.assert_allclose(_on_cpu(clf).predict_proba(X), proba, rtol=1e-3, atol=1e-4)
    dgp = DeepGPRegressor(
        n_inducing=16, n_mc_predict=8, device="cuda", random_state=0,
        inference=SparseVariational(max_iter=10),
    ).fit(X, y)
    mean, std = dgp.predict(X, return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(std > 0)
    np.testing.assert_allclose(_on_cpu(dgp).predict(X), mean, rtol=1e-3, atol=1e-3)
    clf.partial_fit(X[:40], labels[:40])  # streaming continues on the device
    dgp.partial_fit(X[:40], y[:40])
    assert np.isfinite(clf.loss_curve_[-1]) and np.isfinite(dgp.loss_curve_[-1])
    bsgp = SparseGPRegressor(
        n_inducing=16, device="cuda", random_state=0,
        inference=SampledSparseGP(
            SGHMC(burn_in=4, thinning=1, n_kept_samples=4), start=SparseVariational(max_iter=10),
        ),
    ).fit(X, y)
    mean, std = bsgp.predict(X, return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(std > 0)
    np.testing.assert_allclose(_on_cpu(bsgp).predict(X), mean, rtol=1e-3, atol=1e-3)


class _TinyCNN(torch.nn.Sequential):
    def __init__(self, n_outputs):
        super().__init__(
            torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
            torch.nn.Linear(36, 16), torch.nn.ReLU(), torch.nn.Linear(16, n_outputs),
        )


class _TinyLSTM(torch.nn.Module):
    def __init__(self, n_outputs):
        super().__init__()
        self.lstm = torch.nn.LSTM(1, 8, batch_first=True)
        self.out = torch.nn.Linear(8, n_outputs)

    def forward(self, x):
        return self.out(self.lstm(x)[0][:, -1])


MODULE_METHODS = [MCDropout(dropout_rate=0.1), MeanFieldVI(), MeanFieldVI(init="iblm"), DeepEnsemble(n_estimators=3),
                  SGHMC(burn_in=4, thinning=1, n_kept_samples=4)]


@pytest.mark.parametrize("method", MODULE_METHODS, ids=lambda m: type(m).__name__)
def test_convolutional_classifier_on_cuda_pickles_to_the_cpu(method):
    from sklearn.datasets import load_digits

    from skbayes import BayesianMLPClassifier

    X, y = load_digits(return_X_y=True)
    X, y = X[:300] / 16, y[:300]
    clf = BayesianMLPClassifier(module=_TinyCNN, input_shape=(1, 8, 8), inference=with_loop(method, max_iter=4, early_stopping=False, n_iter_no_change=50, n_mc_predict=10), device="cuda", random_state=0, prior_scale=1.0).fit(X, y)
    assert clf.device_.type == "cuda" and next(clf.module_.parameters()).is_cuda
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-5)
    state = clf.__getstate__()
    assert all(not t.is_cuda for t in state["module_"].state_dict().values())
    np.testing.assert_allclose(_on_cpu(clf).predict_proba(X), proba, atol=1e-4)


@pytest.mark.parametrize("method", [MCDropout(dropout_rate=0.1), DeepEnsemble(n_estimators=2)],
                         ids=lambda m: type(m).__name__)
def test_recurrent_regressor_on_cuda(method):
    from skbayes import BayesianMLPRegressor

    rng = np.random.RandomState(0)
    X = rng.randn(80, 6)
    y = X.sum(1) + 0.1 * rng.randn(80)
    model = BayesianMLPRegressor(module=_TinyLSTM, input_shape=(6, 1), inference=with_loop(method, max_iter=4, n_mc_predict=10), device="cuda", random_state=0, noise="homoscedastic").fit(X, y)
    mean, std = model.predict(X, return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(std > 0)
    cpu_mean, cpu_std = _on_cpu(model).predict(X, return_std=True)
    np.testing.assert_allclose(cpu_mean, mean, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(cpu_std, std, rtol=1e-4, atol=1e-4)
