"""Last-layer Laplace (Daxberger et al. 2021) with evidence tuning: the closed forms of Bayesian linear regression,
scikit-learn's BayesianRidge, the evidence by scipy, and held-out coverage on a nonlinear toy."""

import numpy as np
import pytest
import torch
from _exact_blr import exact_blr_predictive, make_blr_data
from scipy.stats import multivariate_normal
from sklearn.linear_model import BayesianRidge

from skbayes import BayesianMLPClassifier, BayesianMLPRegressor
from skbayes.inference import Laplace
from skbayes.nn.laplace import last_layer_log_evidence, last_layer_posterior, maximize_last_layer_evidence

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _moments(model, X):
    network = model.module_["network"]
    return network.predictive_moments(torch.tensor(X, dtype=network.mean.dtype))


def _features(n=80, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, 3)
    y = X @ [1.0, -2.0, 0.5] + 0.7 + 0.4 * rng.randn(n)
    return X, y, torch.tensor(np.hstack([X, np.ones((n, 1))])), torch.tensor(y[:, None])


def _bayesian_ridge(phi, y, **hyperprior):
    # no intercept of its own and flat hyperpriors (unless given): the model of skbayes.nn.laplace on the features phi
    settings = {"alpha_1": 0, "alpha_2": 0, "lambda_1": 0, "lambda_2": 0, **hyperprior}
    return BayesianRidge(fit_intercept=False, tol=1e-12, max_iter=2000, compute_score=True, **settings).fit(phi, y)


def test_posterior_and_evidence_match_closed_forms():
    X, y, phi, Y = _features()
    noise_var, precision = torch.tensor([0.3], dtype=torch.float64), torch.tensor([2.0], dtype=torch.float64)
    mean, chol = last_layer_posterior(phi, Y, noise_var, precision)
    P = phi.numpy()
    cov = np.linalg.inv(2.0 * np.eye(4) + P.T @ P / 0.3)
    np.testing.assert_allclose((chol[0] @ chol[0].T).numpy(), cov, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(mean[:, 0].numpy(), cov @ P.T @ y / 0.3, rtol=1e-10)
    K = P @ P.T / 2.0 + 0.3 * np.eye(len(y))  # y ~ N(0, Phi Phi^T / delta + sigma^2 I)
    expected = multivariate_normal(np.zeros(len(y)), K).logpdf(y)
    assert float(last_layer_log_evidence(phi, Y, noise_var, precision)[0]) == pytest.approx(expected, rel=1e-10)


def test_evidence_maximum_is_bayesian_ridges():
    X, y, phi, Y = _features()
    one = torch.ones(1, dtype=torch.float64)
    noise_var, precision, n_iter = maximize_last_layer_evidence(phi, Y, one, one)
    ridge = _bayesian_ridge(phi.numpy(), y)
    assert 1.0 / float(noise_var) == pytest.approx(ridge.alpha_, rel=1e-6)
    assert float(precision) == pytest.approx(ridge.lambda_, rel=1e-6)
    assert float(last_layer_log_evidence(phi, Y, noise_var, precision)[0]) == pytest.approx(ridge.scores_[-1], rel=1e-8)
    # a maximum: nudging either value lowers the evidence
    best = float(last_layer_log_evidence(phi, Y, noise_var, precision)[0])
    for factor in (0.8, 1.25):
        assert float(last_layer_log_evidence(phi, Y, noise_var * factor, precision)[0]) < best
        assert float(last_layer_log_evidence(phi, Y, noise_var, precision * factor)[0]) < best
    # with the noise fixed, only delta moves
    fixed, precision_alone, _ = maximize_last_layer_evidence(phi, Y, 0.5 * one, one, learn_noise=False)
    assert float(fixed) == 0.5 and float(precision_alone) != pytest.approx(float(precision))


def test_no_hidden_layer_is_exact_bayesian_linear_regression():
    noise, scale = 0.3, 0.8
    X, y, X_test = make_blr_data(n_samples=40, noise_std=noise, random_state=2)
    model = BayesianMLPRegressor(hidden_layer_sizes=(), inference=Laplace(prior_tuning=None, early_stopping=False,
                                                                          n_mc_predict=4000),
                                 noise_std=noise, prior_scale=scale, normalize_y=False, random_state=0,
                                 noise="homoscedastic").fit(X, y)
    mean, std, epistemic = exact_blr_predictive(X, y, X_test, scale, noise)
    f_mean, f_var = _moments(model, X_test)
    np.testing.assert_allclose(f_mean[:, 0].numpy(), mean, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.sqrt(f_var[:, 0].numpy()), epistemic, rtol=1e-4)
    parts = model.predict_uncertainty(X_test)  # from 4,000 last-layer draws
    assert np.all(np.abs(parts.mean - mean) < 0.1 * epistemic)
    np.testing.assert_allclose(parts.epistemic_std, epistemic, rtol=0.05)
    np.testing.assert_allclose(parts.std, std, rtol=0.05)


def test_tuned_prior_and_noise_are_bayesian_ridges_on_a_linear_model():
    X, y, X_test = make_blr_data(n_samples=60, noise_std=0.3, random_state=3)
    # on the training rows (no held-out rows): the evidence of all of them, as BayesianRidge
    model = BayesianMLPRegressor(hidden_layer_sizes=(), inference=Laplace(early_stopping=False), normalize_y=False,
                                 random_state=0, noise="homoscedastic").fit(X, y)
    ridge = _bayesian_ridge(np.hstack([X, np.ones((len(y), 1))]), y)
    assert model.noise_std_[0] == pytest.approx(ridge.alpha_**-0.5, rel=1e-4)
    assert model.inference_diagnostics_["prior_precision"] == pytest.approx(ridge.lambda_, rel=1e-4)
    assert model.inference_diagnostics_["log_evidence"] == pytest.approx(ridge.scores_[-1], rel=1e-5)
    f_mean, _ = _moments(model, X_test)
    np.testing.assert_allclose(f_mean[:, 0].numpy(), ridge.predict(np.hstack([X_test, np.ones((50, 1))])),
                               rtol=1e-4, atol=1e-4)


def _sine(n, rng, low=-3, high=3):
    x = rng.uniform(low, high, (n, 1))
    return x, np.sin(2 * x[:, 0]) + 0.3 * rng.randn(n)


def test_defaults_cover_held_out_rows_and_widen_away_from_the_data():
    rng = np.random.RandomState(0)
    X, y = _sine(400, rng)
    X_test, y_test = _sine(2000, rng)
    model = BayesianMLPRegressor(inference=Laplace(), noise="homoscedastic", random_state=0).fit(X, y)
    assert model.noise_std_[0] == pytest.approx(0.3, rel=0.2)  # the known noise, recovered by the evidence
    low, high = model.predict_quantiles(X_test, [0.05, 0.95]).T
    coverage = np.mean((y_test >= low) & (y_test <= high))
    assert 0.85 <= coverage <= 0.95
    near = model.predict_uncertainty(np.linspace(-2, 2, 50)[:, None]).epistemic_std.mean()
    far = model.predict_uncertainty(np.linspace(6, 9, 50)[:, None]).epistemic_std.mean()
    assert far > 3 * near


def test_the_held_out_rows_recover_the_known_noise():
    # with early stopping (the default) the noise is estimated on the 10% held-out rows: the known noise 0.3
    X, y, _ = make_blr_data(n_samples=1000, noise_std=0.3, random_state=4)  # 100 held out
    model = BayesianMLPRegressor(hidden_layer_sizes=(), inference=Laplace(), normalize_y=False, random_state=0,
                                 noise="homoscedastic").fit(X, y)
    assert model.noise_std_[0] == pytest.approx(0.3, rel=0.25)


def test_reproducible_and_refusals():
    rng = np.random.RandomState(1)
    X, y = _sine(60, rng)
    kwargs = {"hidden_layer_sizes": (16,), "inference": Laplace(max_iter=30), "noise": "homoscedastic", "random_state": 4}
    first = BayesianMLPRegressor(**kwargs).fit(X, y)
    second = BayesianMLPRegressor(**kwargs).fit(X, y)
    np.testing.assert_array_equal(first.predict(X, return_std=True), second.predict(X, return_std=True))
    assert not hasattr(BayesianMLPRegressor(inference=Laplace()), "partial_fit")  # one epoch is no Laplace fit


@pytest.mark.parametrize("hessian", ["kron", "full", "diag"])
def test_all_weights_without_hidden_layer_is_exact_bayesian_linear_regression(hessian):
    # the GGN of a linear-Gaussian model is its Hessian and KFAC is exact for it (skbayes.nn.ggn); diag keeps the
    # exact diagonal of the precision only
    noise, scale = 0.3, 0.8
    X, y, X_test = make_blr_data(n_samples=40, noise_std=noise, random_state=2)
    method = Laplace(subset="all", hessian=hessian, prior_tuning=None, early_stopping=False, n_mc_predict=4000)
    model = BayesianMLPRegressor(hidden_layer_sizes=(), inference=method, noise_std=noise, prior_scale=scale,
                                 normalize_y=False, random_state=0, noise="homoscedastic").fit(X, y)
    mean, std, epistemic = exact_blr_predictive(X, y, X_test, scale, noise)
    network = model.module_["network"]
    f_mean, f_var = network.predictive_moments(torch.tensor(X_test, dtype=network.weight_0.dtype))
    # the mean is the MAP network's, trained by minibatch Adam and stopped on its tolerance: within a quarter of the
    # posterior std (0.2 of it at most, measured)
    assert np.all(np.abs(f_mean[:, 0].numpy() - mean) < 0.25 * epistemic)
    if hessian == "diag":
        Phi = np.hstack([X, np.ones((40, 1))])
        precision = np.diag(np.diag(Phi.T @ Phi / noise**2) + 1 / scale**2)
        Phi_test = np.hstack([X_test, np.ones((50, 1))])
        epistemic = np.sqrt(np.einsum("ij,jk,ik->i", Phi_test, np.linalg.inv(precision), Phi_test))
        std = np.sqrt(epistemic**2 + noise**2)
    np.testing.assert_allclose(np.sqrt(f_var[:, 0].numpy()), epistemic, rtol=1e-5)
    parts = model.predict_uncertainty(X_test)  # from 4,000 draws of the linearised network
    np.testing.assert_allclose(parts.epistemic_std, epistemic, rtol=0.06)
    np.testing.assert_allclose(parts.std, std, rtol=0.05)


@pytest.mark.parametrize("hessian", ["kron", "diag"])
def test_all_weights_defaults_cover_and_widen(hessian):
    rng = np.random.RandomState(0)
    X, y = _sine(400, rng)
    X_test, y_test = _sine(2000, rng)
    model = BayesianMLPRegressor(inference=Laplace(subset="all", hessian=hessian), noise="homoscedastic",
                                 random_state=0).fit(X, y)
    if hessian == "kron":  # diag overstates the epistemic part (below), which the held-out rows take from the noise
        assert model.noise_std_[0] == pytest.approx(0.3, rel=0.2)
    # the epistemic variance of the linearised predictive against the mean's actual squared error (the true f known)
    parts = model.predict_uncertainty(X_test)
    error = np.mean((parts.mean - np.sin(2 * X_test[:, 0])) ** 2)
    assert 0.5 < np.mean(parts.epistemic_std**2) / error < (2.0 if hessian == "kron" else 6.0)
    # 90% coverage: over data seeds 0-4, kron covered 0.81-0.86 and diag 0.80-0.84 (the noise is the moment
    # estimate of 40 held-out rows, ~20% noisy, minus the epistemic part): doc/laplace.md
    low, high = model.predict_quantiles(X_test, [0.05, 0.95]).T
    coverage = np.mean((y_test >= low) & (y_test <= high))
    assert 0.78 <= coverage <= 0.95, coverage
    near = model.predict_uncertainty(np.linspace(-2, 2, 50)[:, None]).epistemic_std.mean()
    far = model.predict_uncertainty(np.linspace(6, 9, 50)[:, None]).epistemic_std.mean()
    assert far > 2 * near, (near, far)


def test_full_hessian_of_all_weights_refuses_a_large_network():
    X, y = _sine(50, np.random.RandomState(0))
    model = BayesianMLPRegressor(hidden_layer_sizes=(100, 100), inference=Laplace(subset="all", hessian="full"),
                                 noise="homoscedastic", random_state=0)
    with pytest.raises(ValueError, match="hessian='kron'"):
        model.fit(X, y)


def test_classifier_posterior_is_the_exact_hessian_of_logistic_regression():
    # for the softmax GLM (no hidden layer) the GGN is the Hessian: sum_i x_i x_i^T (x) (diag p_i - p_i p_i^T)
    rng = np.random.RandomState(0)
    X = rng.randn(120, 2)
    y = np.argmax(X @ rng.randn(2, 3) + 0.5 * rng.randn(120, 3), axis=1)
    method = Laplace(hessian="full", prior_tuning=None, early_stopping=False)
    model = BayesianMLPClassifier(hidden_layer_sizes=(), inference=method, prior_scale=2.0, random_state=0).fit(X, y)
    network = model.module_["network"]
    W = network.weight_0.double().numpy()  # (3, 3): the inputs and the bias by the classes
    Phi = np.hstack([X, np.ones((120, 1))])
    logits = Phi @ W
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    hessian = sum(np.kron(np.outer(phi, phi), np.diag(q) - np.outer(q, q)) for phi, q in zip(Phi, p))
    basis = network.bases()[0]
    q = basis.q_in.double().numpy()
    np.testing.assert_allclose(q @ np.diag(basis.eigenvalues.double().numpy()) @ q.T, hessian, atol=1e-8)
    assert float(network.prior_precision[0]) == pytest.approx(1 / 2.0**2)
    # the predictive: the mean of softmax over draws of the linearised logits, against numpy's own draws
    cov = np.linalg.inv(hessian + np.eye(9) / 4.0)
    draws = W.reshape(-1) + np.random.RandomState(1).multivariate_normal(np.zeros(9), cov, 20000)
    X_new = np.array([[0.0, 0.0], [3.0, -3.0]])
    Phi_new = np.hstack([X_new, np.ones((2, 1))])
    f = np.einsum("ia,sab->sib", Phi_new, draws.reshape(-1, 3, 3))
    expected = (np.exp(f) / np.exp(f).sum(-1, keepdims=True)).mean(0)
    model.inference_.set_params(n_mc_predict=20000)
    np.testing.assert_allclose(model.predict_proba(X_new), expected, atol=0.01)


def test_classifier_at_defaults_is_accurate_and_less_confident_away_from_the_data():
    from sklearn.datasets import make_moons

    from skbayes.inference import DeepEnsemble

    X, y = make_moons(400, noise=0.2, random_state=0)
    X_test, y_test = make_moons(1000, noise=0.2, random_state=1)
    far = np.random.RandomState(2).uniform(-1, 1, (200, 2)) * 2 + np.array([[8.0, 8.0]])
    confidence = {}
    for name, method in {"laplace": Laplace(), "laplace_all": Laplace(subset="all"),
                         "map": DeepEnsemble(n_estimators=1, early_stopping=True)}.items():
        model = BayesianMLPClassifier(inference=method, random_state=0).fit(X, y)
        assert model.score(X_test, y_test) > 0.9, name
        confidence[name] = model.predict_proba(far).max(1).mean()
    # the MAP network's ReLU logits grow linearly away from the data (confidence ~1); the Laplace posterior's
    # spread grows as fast, so its mean probability stays below (Kristiadi et al. 2020)
    assert confidence["laplace"] < confidence["map"] - 0.05, confidence
    assert confidence["laplace_all"] < confidence["map"] - 0.05, confidence


def test_torch_module_last_layer():
    # any module whose output is its last nn.Linear's: the posterior of that layer, for the regressor (against the
    # exact Bayesian linear regression on the module's features) and the classifier
    from torch import nn

    from skbayes.nn.networks.laplace import module_last_layer_features

    class Net(nn.Sequential):
        def __init__(self, n_features, n_outputs):
            super().__init__(nn.Linear(n_features, 16), nn.Tanh(), nn.Linear(16, n_outputs))

    rng = np.random.RandomState(5)
    X, y = _sine(200, rng)
    method = Laplace(prior_tuning=None, early_stopping=False, max_iter=100)
    model = BayesianMLPRegressor(module=Net, inference=method, noise_std=0.3, normalize_y=False, prior_scale=1.0,
                                 noise="homoscedastic", random_state=0).fit(X, y)
    network = model.module_["network"]
    x_new = torch.tensor(np.linspace(-5, 5, 11)[:, None], dtype=network.last_weight.dtype)
    with torch.no_grad():
        phi = module_last_layer_features(network.network, torch.tensor(X, dtype=x_new.dtype))[0].double().numpy()
        phi_new = network.features(x_new).double().numpy()
        _, var = network.predictive_moments(x_new)
    cov = np.linalg.inv(phi.T @ phi / 0.3**2 + np.eye(phi.shape[1]))  # the layer's posterior given the features
    np.testing.assert_allclose(var[:, 0].double().numpy(), np.einsum("ij,jk,ik->i", phi_new, cov, phi_new),
                               rtol=1e-3)
    parts = model.predict_uncertainty(x_new.numpy())
    assert parts["epistemic_std"][[0, -1]].min() > parts["epistemic_std"][5]  # wider away from the data
    clf = BayesianMLPClassifier(module=Net, inference=Laplace(), random_state=0).fit(X, (y > 0).astype(int))
    assert clf.score(X, (y > 0).astype(int)) > 0.85
    with pytest.raises(ValueError, match="subset='last_layer'"):
        BayesianMLPRegressor(module=Net, inference=Laplace(subset="all"), noise="homoscedastic").fit(X, y)


def test_student_t_fisher_weighs_the_ggn():
    # the Fisher information of a Student-t location, (nu + 1) / ((nu + 3) s^2), against the mean squared score of
    # scipy's draws; then the posterior precision of a linear model under it, against numpy
    from scipy.stats import t as student_t

    from skbayes.nn.ggn import fisher_root

    nu, s = 4.5, 0.7
    y = student_t.rvs(nu, scale=s, size=400_000, random_state=0)
    score = (nu + 1) * y / (nu * s**2 + y**2)
    assert (nu + 1) / ((nu + 3) * s**2) == pytest.approx(np.mean(score**2), rel=0.01)
    X, y, _ = make_blr_data(n_samples=80, noise_std=0.3, random_state=6)
    model = BayesianMLPRegressor(hidden_layer_sizes=(), inference=Laplace(hessian="full", prior_tuning=None,
                                                                          early_stopping=False),
                                 noise="student_t", prior_scale=0.8, normalize_y=False, random_state=0).fit(X, y)
    likelihood, network = model.module_["likelihood"], model.module_["network"]
    fisher = float(fisher_root(likelihood, torch.zeros(1, 1))[0, 0]) ** 2
    df, scale = float(likelihood.df.reshape(())), float(likelihood.scale.reshape(()))
    assert fisher == pytest.approx((df + 1) / ((df + 3) * scale**2), rel=1e-5)
    Phi = np.hstack([X, np.ones((80, 1))])
    basis = network.bases()[0]
    q = basis.q_in.double().numpy()
    np.testing.assert_allclose(q @ np.diag(basis.eigenvalues.double().numpy()) @ q.T, fisher * Phi.T @ Phi,
                               rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("noise", ["student_t", "heteroscedastic"])
def test_other_noise_models_cover_at_the_defaults(noise):
    rng = np.random.RandomState(0)
    X = rng.uniform(-3, 3, (400, 1))
    X_test = rng.uniform(-3, 3, (2000, 1))
    sd = lambda x: 0.1 + 0.2 * np.abs(x[:, 0])  # noqa: E731
    y = np.sin(2 * X[:, 0]) + sd(X) * rng.randn(400)
    y_test = np.sin(2 * X_test[:, 0]) + sd(X_test) * rng.randn(2000)
    model = BayesianMLPRegressor(inference=Laplace(), noise=noise, random_state=0).fit(X, y)
    low, high = model.predict_quantiles(X_test, [0.05, 0.95]).T
    coverage = np.mean((y_test >= low) & (y_test <= high))
    assert 0.82 <= coverage <= 0.97, coverage
    if noise == "heteroscedastic":  # the noise it predicts follows the true one
        aleatoric = model.predict_uncertainty(np.array([[0.0], [2.5]])).aleatoric_std
        assert aleatoric[1] > 2 * aleatoric[0], aleatoric


def test_online_tuning_of_a_linear_model_trains_the_map_under_the_evidence_prior():
    # Immer et al. (2021), Algorithm 1: the MAP trains under the prior the evidence prefers, updated every few
    # epochs. Without a hidden layer (the GGN exact) and with the noise known, the joint fixed point of the
    # trained weights and delta is Bayesian linear regression at its evidence maximum over delta: BayesianRidge's
    # weights and lambda with alpha pinned. Read from the training loop, before the post-hoc step.
    from skbayes.callbacks import Callback

    class Record(Callback):
        def on_epoch_end(self, state):
            network = state.module["network"]
            self.scale = float(network.weight_prior_scales[0, 0])
            self.weights = network.layers[0].weight.detach()[0, :, 0].double().numpy().copy()

    X, y, _ = make_blr_data(n_samples=200, noise_std=0.3, random_state=3)
    record = Record()
    BayesianMLPRegressor(hidden_layer_sizes=(), inference=Laplace(prior_tuning="online", early_stopping=False),
                         noise_std=0.3, normalize_y=False, random_state=0, noise="homoscedastic",
                         callbacks=[record]).fit(X, y)
    phi = np.hstack([X, np.ones((len(y), 1))])
    ridge = _bayesian_ridge(phi, y, alpha_init=0.3**-2, alpha_1=1e12 * 0.3**-2, alpha_2=1e12)  # alpha pinned
    assert ridge.alpha_ == pytest.approx(0.3**-2, rel=1e-6)
    assert record.scale**-2 == pytest.approx(ridge.lambda_, rel=0.01)
    np.testing.assert_allclose(record.weights, ridge.coef_, rtol=0.01, atol=1e-3)
    assert record.scale**-2 != pytest.approx(1.0, rel=0.1)  # moved from the N(0, 1) prior it started from


@pytest.mark.parametrize("subset", ["last_layer", "all"])
def test_online_tuning_recovers_the_noise_and_covers(subset):
    rng = np.random.RandomState(0)
    X, y = _sine(400, rng)
    X_test, y_test = _sine(2000, rng)
    model = BayesianMLPRegressor(inference=Laplace(subset=subset, prior_tuning="online"), noise="homoscedastic",
                                 random_state=0).fit(X, y)
    assert model.inference_diagnostics_["n_online_updates"] > 0
    assert model.noise_std_[0] == pytest.approx(0.3, rel=0.2)  # the known noise
    low, high = model.predict_quantiles(X_test, [0.05, 0.95]).T
    assert 0.85 <= np.mean((y_test >= low) & (y_test <= high)) <= 0.95
    near = model.predict_uncertainty(np.linspace(-2, 2, 50)[:, None]).epistemic_std.mean()
    far = model.predict_uncertainty(np.linspace(6, 9, 50)[:, None]).epistemic_std.mean()
    assert far > 3 * near


def test_online_tuning_classifier_and_refusals():
    from sklearn.datasets import make_moons
    from torch import nn

    X, y = make_moons(300, noise=0.2, random_state=0)
    clf = BayesianMLPClassifier(inference=Laplace(prior_tuning="online"), random_state=0).fit(X, y)
    assert clf.inference_diagnostics_["n_online_updates"] > 0
    X_test, y_test = make_moons(1000, noise=0.2, random_state=1)
    assert clf.score(X_test, y_test) > 0.93
    X_reg = X[:, :1]
    with pytest.warns(UserWarning, match="before epoch 10, the first online update"):
        model = BayesianMLPRegressor(inference=Laplace(prior_tuning="online", max_iter=5), noise="homoscedastic",
                                     random_state=0).fit(X_reg, X[:, 1])
    assert model.inference_diagnostics_["n_online_updates"] == 0
    with pytest.raises(ValueError, match="prior_tuning='online'"):
        BayesianMLPRegressor(module=lambda n_features, n_outputs: nn.Linear(n_features, n_outputs),
                             inference=Laplace(prior_tuning="online"), noise="homoscedastic").fit(X, X[:, 0])
