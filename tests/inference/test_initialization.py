"""Initialisations of the mean-field posterior (Rossi 2022, chapter 3)."""

import numpy as np
import pytest
import torch
from _exact_blr import exact_blr_posterior, make_blr_data
from sklearn.datasets import make_blobs

from discovery import with_loop
from skbayes import BayesianMLPClassifier, BayesianMLPRegressor
from skbayes.inference import MeanFieldVI, Vadam
from skbayes.nn import INITIALIZATIONS, BayesianMLP, GaussianLikelihood, iblm_init, negative_elbo

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _net(n_features, hidden, n_outputs, seed=0, **kwargs):
    gen = torch.Generator().manual_seed(seed)
    return BayesianMLP(
        n_features, hidden, n_outputs, generator=gen, dtype=torch.float64, **kwargs
    )


def _q(layer):
    return layer.mu.detach().numpy(), torch.nn.functional.softplus(
        layer.rho
    ).detach().numpy()


def test_iblm_of_a_linear_model_is_the_exact_posterior():
    # No hidden layer: the one regression is Bayesian linear regression with a
    # bias, so I-BLM gives its exact mean and the reverse-KL mean-field
    # variances 1/diag(precision) (Rossi 2022, eqs. 3.3 and 3.7), before training.
    X, y, _ = make_blr_data(n_samples=150, n_features=3, noise_std=0.4, random_state=0)
    prior, noise = 0.7, 0.4
    net = _net(3, [], 1, prior_scale=prior)  # I-BLM regresses under each layer's own prior
    iblm_init(
        net,
        torch.tensor(X),
        torch.tensor(y[:, None]),
        prior_scale=prior,
        noise_std=torch.tensor([noise]),
        generator=torch.Generator().manual_seed(0),
    )
    mean, cov = exact_blr_posterior(X, y, prior, noise)
    q_mean, q_std = _q(net.layers[0])
    np.testing.assert_allclose(q_mean[:, 0], mean, rtol=1e-8)
    np.testing.assert_allclose(
        q_std[:, 0], 1 / np.sqrt(np.diag(np.linalg.inv(cov))), rtol=1e-6
    )


def test_iblm_through_the_estimator_before_training():
    X, y, _ = make_blr_data(n_samples=80, n_features=2, noise_std=0.3, random_state=3)
    model = BayesianMLPRegressor(
        hidden_layer_sizes=(),
        inference=MeanFieldVI(init="iblm", learning_rate_init=1e-12, max_iter=1),
        noise_std=0.3,
        normalize_y=False,
        random_state=0, noise="homoscedastic",
    ).fit(X, y)
    mean, _ = exact_blr_posterior(X, y, 1.0, 0.3)
    np.testing.assert_allclose(
        _q(model.module_["network"].layers[0])[0][:, 0], mean, atol=1e-6
    )


def test_iblm_through_the_estimator_uses_the_fan_in_prior():
    # prior_scaling="fan_in" with no hidden layer: the prior of the one layer is N(0, 1/d), and I-BLM's
    # regression is Bayesian linear regression under that prior
    X, y, _ = make_blr_data(n_samples=40, n_features=4, noise_std=0.3, random_state=3)
    model = BayesianMLPRegressor(
        hidden_layer_sizes=(),
        inference=MeanFieldVI(init="iblm", prior_scaling="fan_in", learning_rate_init=1e-12, max_iter=1),
        noise_std=0.3,
        normalize_y=False,
        random_state=0, noise="homoscedastic",
    ).fit(X, y)
    mean, _ = exact_blr_posterior(X, y, 1.0 / np.sqrt(4), 0.3)
    wide, _ = exact_blr_posterior(X, y, 1.0, 0.3)
    assert np.abs(mean - wide).max() > 1e-3  # the two priors give different posteriors here
    np.testing.assert_allclose(
        _q(model.module_["network"].layers[0])[0][:, 0], mean, atol=1e-6
    )


def _sine(n=400, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.uniform(-3, 3, (n, 1))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 0] + 0.1 * rng.randn(n)
    return torch.tensor(X), torch.tensor((y - y.mean()) / y.std())[:, None]


def _initial_loss(init, seed):
    X, Y = _sine()
    net = _net(1, [50, 50], 1, seed=seed)
    likelihood = GaussianLikelihood(1, 0.1, learn_noise=False, dtype=torch.float64)
    gen = torch.Generator().manual_seed(seed)
    INITIALIZATIONS[init](
        net, X, Y, prior_scale=1.0, noise_std=likelihood.noise_std, generator=gen
    )
    with torch.no_grad():
        f = net(X.expand(8, *X.shape), generator=gen)
        log_lik = likelihood.log_prob(Y, f)
        return float(negative_elbo(log_lik, net.kl(), len(X))), float(-log_lik.mean())


@pytest.mark.parametrize("seed", [0, 1])
def test_iblm_starts_a_deep_network_with_a_lower_training_loss(seed):
    # A 2x50 ReLU network with the estimator's initial noise 0.1: the default
    # init predicts ~0 and pays ~y^2 / (2 * 0.1^2) ~ 50 nats per row; I-BLM
    # starts near a fit (Rossi 2022, section 3.2.1). Both start with small
    # standard deviations, so the KL / N (~40 nats here) is similar.
    (default, default_nll), (iblm, iblm_nll) = (
        _initial_loss("default", seed),
        _initial_loss("iblm", seed),
    )
    assert iblm_nll < 0.25 * default_nll
    assert iblm < default - 20


def test_iblm_is_reproducible_and_breaks_the_symmetry_of_hidden_units():
    X, Y = _sine()

    def init(seed):
        net = _net(1, [20], 1)
        iblm_init(
            net,
            X,
            Y,
            prior_scale=1.0,
            noise_std=0.1,
            generator=torch.Generator().manual_seed(seed),
        )
        return [_q(layer) for layer in net.layers]

    a, b, c = init(0), init(0), init(1)
    for (mu_a, sd_a), (mu_b, sd_b) in zip(a, b):
        np.testing.assert_array_equal(mu_a, mu_b)
        np.testing.assert_array_equal(sd_a, sd_b)
    assert not np.allclose(a[0][0], c[0][0])
    hidden_mu = a[0][0]  # (2, 20): weight row, bias row
    # Every unit fits its own bootstrap minibatch, so no two units are equal;
    # units alternate the sign of the target (ReLU keeps both halves).
    assert np.unique(hidden_mu.round(8), axis=1).shape[1] == 20
    assert np.all(np.sign(hidden_mu[0, 0::2]) == -np.sign(hidden_mu[0, 1::2]))


def test_iblm_for_classification_uses_the_dirichlet_label_transform():
    X, y = make_blobs(
        300, centers=[[-3, 0], [3, 0], [0, 4]], cluster_std=0.6, random_state=0
    )
    net = _net(2, [], 3)
    iblm_init(
        net,
        torch.tensor(X),
        torch.tensor(y[:, None], dtype=torch.float64),
        prior_scale=1.0,
        noise_std=None,
        generator=torch.Generator().manual_seed(0),
    )
    with torch.no_grad():
        logits = net(torch.tensor(X), sample=False).numpy()
    assert np.mean(logits.argmax(1) == y) > 0.95
    # Targets are log(1 + a) - v/2 ~ 0 for the true class and ~ log(a) - v/2 ~ -7 otherwise.
    assert -9 < np.median(logits.min(axis=1)) < -4


@pytest.mark.parametrize(
    "init, variance",
    [
        ("uninformative", lambda i, o: 1.0),
        ("heuristic", lambda i, o: 1 / i),
        ("xavier", lambda i, o: 2 / (i + o)),
    ],
)
def test_zero_mean_initialisations(init, variance):
    net = _net(4, [6], 2)
    INITIALIZATIONS[init](
        net, None, None, prior_scale=1.0, noise_std=None, generator=None
    )
    for layer in net.layers:
        mu, sd = _q(layer)
        np.testing.assert_array_equal(mu, 0.0)
        np.testing.assert_allclose(
            sd, np.sqrt(variance(layer.in_features, layer.out_features))
        )


def test_orthogonal_and_lsuv():
    X, Y = _sine()
    X = torch.cat([X, X**2], dim=1)
    net = _net(2, [8, 8], 1)
    INITIALIZATIONS["orthogonal"](
        net,
        X,
        Y,
        prior_scale=1.0,
        noise_std=0.1,
        generator=torch.Generator().manual_seed(0),
    )
    w = net.layers[1].weight_mu.detach().numpy()
    np.testing.assert_allclose(w.T @ w, np.eye(8), atol=1e-10)
    np.testing.assert_allclose(_q(net.layers[1])[1], np.sqrt(1 / 8))
    INITIALIZATIONS["lsuv"](
        net,
        X,
        Y,
        prior_scale=1.0,
        noise_std=0.1,
        generator=torch.Generator().manual_seed(0),
    )
    with torch.no_grad():
        h = X
        for i, layer in enumerate(net.layers):
            h = layer(torch.relu(h) if i else h, sample=False)
            assert float(h.std()) == pytest.approx(1.0, rel=0.1)


@pytest.mark.parametrize("init", sorted(INITIALIZATIONS))
@pytest.mark.parametrize("method", [MeanFieldVI, Vadam])
def test_every_initialisation_fits(init, method):
    X, y, _ = make_blr_data(n_samples=40, random_state=0)
    model = BayesianMLPRegressor(
        hidden_layer_sizes=(5,),
        inference=with_loop(method(init=init), max_iter=2),
        random_state=0, noise="homoscedastic",
    )
    assert np.all(np.isfinite(model.fit(X, y).predict(X)))


def test_iblm_classifier_fits():
    X, y = make_blobs(120, centers=2, random_state=0)
    clf = BayesianMLPClassifier(
        hidden_layer_sizes=(8,), inference=MeanFieldVI(init="iblm", max_iter=5), random_state=0
    ).fit(X, y)
    assert clf.score(X, y) > 0.9
