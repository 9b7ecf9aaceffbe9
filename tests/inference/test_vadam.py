"""Vadam (Khan et al. 2018): the optimiser's update and the fitted posterior."""

import numpy as np
import pytest
import torch
from _exact_blr import exact_blr_posterior, exact_blr_predictive, make_blr_data
from sklearn.datasets import make_blobs

from discovery import with_loop
from skbayes import BayesianMLPClassifier, BayesianMLPRegressor
from skbayes.inference import Vadam as VadamMethod
from skbayes.nn import BayesianMLP, DropoutLinear, MeanFieldLinear, Vadam

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

PRIOR, NOISE = 1.0, 0.3


@pytest.mark.parametrize("batch_size", [1, 8])
def test_one_step_follows_the_update_sequence(batch_size):
    # Cinelli 2019, Algorithm 6, written out by hand for two steps; with batch_size B the precision uses B v
    # (the step is the printed one).
    torch.manual_seed(0)
    layer = MeanFieldLinear(3, 2, prior_scale=0.5, dtype=torch.float64)
    mu0 = layer.mu.detach().clone()
    n_data, lr, (b1, b2) = 40, 0.1, (0.8, 0.9)
    opt = Vadam([layer], n_data, lr=lr, betas=(b1, b2), initial_precision=9.0, batch_size=batch_size)
    lam = 1 / 0.5**2
    s0 = (9.0 - lam) / n_data
    sigma = torch.nn.functional.softplus(layer.rho)
    torch.testing.assert_close(
        sigma, torch.full_like(sigma, 1 / 3)
    )  # (N s0 + lambda)^-1/2
    assert layer.rho.requires_grad  # Vadam writes rho under no_grad and leaves its flag alone
    m = torch.zeros_like(mu0)
    v = torch.zeros_like(mu0)
    mu = mu0.clone()
    for t, g in enumerate([torch.randn_like(mu0), torch.randn_like(mu0)], start=1):
        layer.mu.grad = g.clone()
        opt.step()
        m = b1 * m + (1 - b1) * (g + lam / n_data * mu)
        v = b2 * v + (1 - b2) * g * g
        mu = mu - lr * (m / (1 - b1**t)) / ((v / (1 - b2**t)).sqrt() + lam / n_data)
        torch.testing.assert_close(layer.mu.detach(), mu)
        expected_sigma = (n_data * (batch_size * v + b2**t * s0) + lam).rsqrt()
        torch.testing.assert_close(
            torch.nn.functional.softplus(layer.rho), expected_sigma
        )


def test_rejects_layers_it_cannot_train():
    with pytest.raises(TypeError, match="MeanFieldLinear"):
        Vadam([DropoutLinear(2, 1)], 10)
    net = BayesianMLP(2, [3], 1)
    with pytest.raises(ValueError, match="n_data"):
        Vadam(net, 0)
    with pytest.raises(ValueError, match="initial_precision"):
        Vadam(net, 10, initial_precision=-1.0)
    with pytest.raises(ValueError, match="batch_size"):
        Vadam(net, 10, batch_size=0)


@pytest.fixture(scope="module")
def blr():
    X, y, X_test = make_blr_data(
        n_samples=50, n_features=2, noise_std=NOISE, random_state=1
    )
    fits = {
        (batch, curvature): BayesianMLPRegressor(
            hidden_layer_sizes=(),
            inference=with_loop(VadamMethod(n_mc_train=1, curvature=curvature), learning_rate_init=2e-3, max_iter=epochs, tol=0.0, n_iter_no_change=10**6),
            noise_std=NOISE,
            normalize_y=False,
            prior_scale=PRIOR,
            batch_size=batch,
            random_state=0, noise="homoscedastic",
        ).fit(X, y)
        for batch, epochs, curvature in [(1, 120, "batch_scaled"), (10, 600, "batch_scaled"),
                                         (10, 600, "gradient_magnitude")]
    }
    return X, y, X_test, fits


def _q(model):
    layer = model.module_["network"].layers[0]
    return layer.mu.detach().numpy()[:, 0], torch.nn.functional.softplus(
        layer.rho
    ).detach().numpy()[:, 0]


def test_linear_model_with_batch_size_one_matches_the_exact_posterior(blr):
    # With one row per step, Adam's squared-gradient average is the Gauss-Newton
    # diagonal: for y ~ N(x'w, s^2), E[g_i^2] = x_i^2 E[(y_i - x_i'theta)^2] / s^4,
    # so N s + lambda ~ diag(A) and q has the exact mean and the mean-field
    # variances 1/diag(A). The residual at a perturbed theta also carries the
    # weight noise (epistemic variance), so s is slightly larger and sigma
    # slightly smaller (~5% here): the 15% tolerance covers that and the
    # Monte-Carlo noise of the average.
    X, y, X_test, fits = blr
    model = fits[1, "batch_scaled"]
    exact_mean, cov = exact_blr_posterior(X, y, PRIOR, NOISE)
    mf_std = 1 / np.sqrt(np.diag(np.linalg.inv(cov)))
    q_mean, q_std = _q(model)
    np.testing.assert_allclose(q_mean, exact_mean, atol=0.5 * mf_std.min())
    np.testing.assert_allclose(q_std, mf_std, rtol=0.15)
    # The inputs are independent, so mean field loses little and the
    # predictive (noise included) matches the closed form.
    mean, std = model.predict(X_test, return_std=True)
    exact_pred_mean, exact_std, exact_epistemic = exact_blr_predictive(
        X, y, X_test, PRIOR, NOISE
    )
    np.testing.assert_allclose(mean, exact_pred_mean, atol=0.1)
    np.testing.assert_allclose(std, exact_std, rtol=0.1)
    epistemic = model.predict_uncertainty(X_test).epistemic_std
    np.testing.assert_allclose(epistemic, exact_epistemic, rtol=0.35)


def test_minibatches_inflate_the_variance_unless_the_precision_is_batch_scaled(blr):
    # The printed Vadam squares the minibatch-mean gradient (Cinelli 2019, eq. 3.79,
    # curvature="gradient_magnitude"). Near the optimum its square is ~1/B of the per-example squared
    # gradients, so the posterior variances grow by up to a factor B (std by sqrt(B) = 3.2 for B = 10) where
    # the data dominate the prior, as here. The default scales it by B: the mean-field exact std again.
    X, y, _, fits = blr
    exact_mean, cov = exact_blr_posterior(X, y, PRIOR, NOISE)
    mf_std = 1 / np.sqrt(np.diag(np.linalg.inv(cov)))
    q_mean, q_std = _q(fits[10, "gradient_magnitude"])
    ratio = q_std / mf_std
    assert np.all(ratio > 1.8) and np.all(ratio < np.sqrt(10) * 1.2)
    np.testing.assert_allclose(q_mean, exact_mean, atol=0.5 * q_std.min())
    q_mean, q_std = _q(fits[10, "batch_scaled"])
    np.testing.assert_allclose(q_std, mf_std, rtol=0.2)
    np.testing.assert_allclose(q_mean, exact_mean, atol=0.5 * mf_std.min())


def test_uncertainty_grows_away_from_the_data(blr):
    _, _, X_test, fits = blr
    epistemic = fits[1, "batch_scaled"].predict_uncertainty(X_test).epistemic_std
    assert (
        epistemic[25:].mean() > 3 * epistemic[:25].mean()
    )  # rows 25: lie at |x| in [2, 4]


def test_same_random_state_gives_identical_predictions():
    X, y, X_test = make_blr_data(n_samples=60, random_state=2)
    kwargs = {"hidden_layer_sizes": (8,), "inference": VadamMethod(max_iter=5), "noise": "homoscedastic"}
    a = (
        BayesianMLPRegressor(random_state=3, **kwargs)
        .fit(X, y)
        .predict(X_test, return_std=True)
    )
    b = (
        BayesianMLPRegressor(random_state=3, **kwargs)
        .fit(X, y)
        .predict(X_test, return_std=True)
    )
    c = (
        BayesianMLPRegressor(random_state=4, **kwargs)
        .fit(X, y)
        .predict(X_test, return_std=True)
    )
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.allclose(a[0], c[0])


def test_noise_is_learned_and_rho_is_left_trainable():
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, (300, 1))
    y = np.sin(2 * X[:, 0]) + 0.2 * rng.randn(300)
    model = BayesianMLPRegressor(
        hidden_layer_sizes=(30,), inference=VadamMethod(max_iter=400), random_state=0, noise="homoscedastic"
    )
    model.fit(X, y)
    assert model.noise_std_[0] == pytest.approx(0.2, rel=0.25)
    assert model.score(X, y) > 0.85
    # loss_curve_ is the per-datum negative ELBO of the current q: it falls.
    assert model.loss_curve_[-1] < model.loss_curve_[0]
    assert all(layer.rho.requires_grad for layer in model.module_["network"].layers)
    # perturbed_nll holds sigma fixed: no gradient ever reached rho
    assert all(layer.rho.grad is None for layer in model.module_["network"].layers)


def test_classifier():
    X, y = make_blobs(
        200, centers=[[-2, 0], [2, 0], [0, 3]], cluster_std=0.7, random_state=0
    )
    clf = BayesianMLPClassifier(
        hidden_layer_sizes=(16,), inference=VadamMethod(max_iter=60), random_state=0
    )
    proba = clf.fit(X, y).predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-6)
    assert clf.score(X, y) > 0.95
