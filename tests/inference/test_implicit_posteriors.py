"""Implicit posteriors: the slice generator, the two KL estimators, Bayes by Hypernet and Bayes by GAN.

The KL estimators are checked against closed-form Gaussian KLs
(``torch.distributions``) and an independent nearest-neighbour search
(scipy's KD-tree); the estimators' behaviour on the cubic toy of Killingberg
2021 (section 5.1.3).
"""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from scipy.spatial import cKDTree
from scipy.special import digamma, gammaln
from torch.distributions import Normal, kl_divergence

from discovery import with_loop
from skbayes import BayesianMLPClassifier, BayesianMLPRegressor
from skbayes.inference import BayesByGAN, BayesByHypernet
from skbayes.inference._gan import MLEThenKLWarmup, discriminator_widths
from skbayes.nn import (
    ImplicitLinear,
    ImplicitMLP,
    SliceDiscriminator,
    discriminator_kl,
    discriminator_loss,
    gaussian_prior_kl_from_draws,
    knn_entropy,
    knn_kl,
    parameters_from_slices,
)

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _gaussian_kl(q_scale, p_scale, dim):
    """KL(N(0, q_scale^2 I) || N(0, p_scale^2 I)) by torch.distributions."""
    return float(kl_divergence(Normal(0.0, q_scale), Normal(0.0, p_scale))) * dim


# ---------------------------------------------------------------- the layer
@torch.no_grad()
def test_implicit_linear_draws_slices_into_weights_and_biases():
    layer = ImplicitLinear(3, 4, noise_dim=5, hidden_sizes=(8,), generator=torch.Generator().manual_seed(0),
                           device="cpu", dtype=torch.float64)
    slices = layer.slice_draws(6, torch.Generator().manual_seed(1))
    assert slices.shape == (6, 4, 4)
    weight, bias = layer.sample_parameters(6, torch.Generator().manual_seed(1))
    assert weight.shape == (6, 3, 4) and bias.shape == (6, 1, 4)
    # slice j of draw s: the weights into unit j, then its bias
    np.testing.assert_array_equal(weight[2, :, 1], slices[2, 1, :3])
    assert bias[2, 0, 1] == slices[2, 1, 3]
    # independent noise per slice and per draw: no two slices coincide
    flat = slices.reshape(-1, 4)
    assert torch.cdist(flat, flat).add(torch.eye(24, dtype=flat.dtype)).min() > 0


@torch.no_grad()
def test_implicit_linear_forward_uses_one_draw_per_monte_carlo_index():
    layer = ImplicitLinear(3, 2, generator=torch.Generator().manual_seed(0), device="cpu", dtype=torch.float64)
    x = torch.randn(4, 5, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    out = layer(x, generator=torch.Generator().manual_seed(7))
    weight, bias = layer.sample_parameters(4, torch.Generator().manual_seed(7))
    # (an output near 0 has no relative precision: the absolute tolerance covers the order of the sums)
    np.testing.assert_allclose(out, x @ weight + bias, rtol=1e-12, atol=1e-14)
    # sample=False: the generator at z = 0, the same weights for every index
    mean_out = layer(x, sample=False)
    centre = layer.generator_net(torch.cat([torch.zeros(2, 10, dtype=torch.float64), torch.eye(2, dtype=torch.float64)], 1))
    w0, b0 = parameters_from_slices(centre[None])
    np.testing.assert_allclose(mean_out, x @ w0 + b0, rtol=1e-12, atol=1e-14)


# ------------------------------------------------------ nearest-neighbour KL
def test_knn_kl_equals_a_kd_tree_computation_of_the_estimator():
    rng = np.random.RandomState(0)
    x, y = rng.randn(7, 3), 2 * rng.randn(9, 3)
    rho = cKDTree(x).query(x, k=2)[0][:, 1]  # nearest other draw of q
    nu = cKDTree(y).query(x, k=1)[0]  # nearest draw of p
    expected = 3 * np.mean(np.log(nu / rho)) + np.log(9 / 6)  # Wang et al. 2009, eq. 5: + log(m / (n - 1))
    np.testing.assert_allclose(float(knn_kl(torch.tensor(x), torch.tensor(y))), expected, rtol=1e-12)


def test_knn_kl_gradient_matches_finite_differences():
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, 3, generator=generator, dtype=torch.float64, requires_grad=True)
    y = torch.randn(2, 4, 3, generator=generator, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(knn_kl, (x, y))


def test_knn_kl_is_consistent_with_many_draws_in_1d():
    # q = N(0, 1), p = N(0, 2^2): KL = log 2 - 3/8 = 0.318. Four estimates from
    # 3,000 + 3,000 draws each; their spread (measured: 0.02-0.03 each) puts
    # the mean within about 0.015 of the truth.
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(4, 3000, 1, generator=generator, dtype=torch.float64)
    p = 2 * torch.randn(4, 3000, 1, generator=generator, dtype=torch.float64)
    assert float(knn_kl(q, p).mean()) == pytest.approx(_gaussian_kl(1.0, 2.0, 1), abs=0.04)


def test_knn_kl_with_five_draws_is_biased_in_9d():
    """Killingberg 2021, Figure 5.2: with Bayes by Hypernet's 5 + 5 draws the estimate is far off in 9-D.

    Averaged over 2,000 independent estimates (standard error about 0.03-0.04
    nats): when q is the wider Gaussian the estimate is biased low, negative on
    average although the KL is 7.26 nats (the thesis's "underestimates, even
    negative in 9-D"); when q is the narrower one it is biased *high* (3.7
    against 2.86), so the direction of the bias depends on the pair.
    """
    generator = torch.Generator().manual_seed(0)
    eps_q = torch.randn(2000, 5, 9, generator=generator, dtype=torch.float64)
    eps_p = torch.randn(2000, 5, 9, generator=generator, dtype=torch.float64)
    wide_q = float(knn_kl(2 * eps_q, eps_p).mean())
    assert _gaussian_kl(2.0, 1.0, 9) == pytest.approx(7.262, abs=1e-3)
    assert wide_q < 0.0
    narrow_q = float(knn_kl(eps_q, 2 * eps_p).mean())
    assert narrow_q > _gaussian_kl(1.0, 2.0, 9) + 0.5
    # many draws remove most of the bias of the narrow case in 1-D (test above) but not in 9-D quickly
    many = float(knn_kl(eps_q.reshape(20, 500, 9), 2 * eps_p.reshape(20, 500, 9)).mean())
    assert abs(many - _gaussian_kl(1.0, 2.0, 9)) < abs(narrow_q - _gaussian_kl(1.0, 2.0, 9))


# ------------------------------------------- entropy-based KL (Kozachenko-Leonenko)
def test_knn_entropy_equals_a_kd_tree_computation_of_the_estimator():
    rng = np.random.RandomState(0)
    x = rng.randn(7, 3)
    rho = cKDTree(x).query(x, k=2)[0][:, 1]
    # Kraskov et al. 2004, eq. 20 with k = 1: psi(n) - psi(1) + log V_d + d mean log rho
    expected = digamma(7) - digamma(1) + 1.5 * np.log(np.pi) - gammaln(2.5) + 3 * np.mean(np.log(rho))
    np.testing.assert_allclose(float(knn_entropy(torch.tensor(x))), expected, rtol=1e-12)


def test_knn_entropy_is_consistent_in_the_full_space_and_on_a_plane():
    generator = torch.Generator().manual_seed(0)
    x = 2.0 * torch.randn(4, 4000, 3, generator=generator, dtype=torch.float64)
    assert float(knn_entropy(x).mean()) == pytest.approx(1.5 * np.log(2 * np.pi * np.e * 4.0), abs=0.05)
    # a 2-D Gaussian of std 0.5 embedded in 6-D by an orthonormal map: the entropy on the plane
    basis = torch.linalg.qr(torch.randn(6, 2, generator=generator, dtype=torch.float64))[0]
    plane = 0.5 * torch.randn(4, 4000, 2, generator=generator, dtype=torch.float64) @ basis.T
    assert float(knn_entropy(plane, intrinsic_dim=2).mean()) == pytest.approx(
        np.log(2 * np.pi * np.e * 0.25), abs=0.05)
    with pytest.raises(ValueError, match="intrinsic_dim"):
        knn_entropy(plane, intrinsic_dim=7)


def test_gaussian_prior_kl_from_draws_matches_the_closed_form():
    generator = torch.Generator().manual_seed(1)
    q = 0.5 * torch.randn(4, 4000, 2, generator=generator, dtype=torch.float64) + 0.3
    # KL(N(0.3, 0.5^2 I_2) || N(0, 2^2 I_2)) in closed form, scipy-free: 2 (log(2/0.5) + (0.25 + 0.09) / 8 - 1/2)
    exact = 2 * (np.log(2 / 0.5) + (0.25 + 0.09) / 8 - 0.5)
    assert float(gaussian_prior_kl_from_draws(q, 2.0).mean()) == pytest.approx(exact, abs=0.05)


def test_entropy_kl_has_its_minimum_at_the_prior_width_where_the_two_sample_estimate_does_not():
    # 5 draws of q = N(0, s^2 I) in 785-D, the first layer of an MNIST MLP: averaged over 40 estimates, the
    # entropy-based estimate is smallest at s = 1 (the prior's width), the two-sample one keeps falling as q
    # widens (to -785/2 log 2): Bayes by Hypernet's generators learned to spread the weights on MNIST.
    generator = torch.Generator().manual_seed(0)
    eps, prior = (torch.randn(40, 5, 785, generator=generator, dtype=torch.float64) for _ in range(2))
    widths = [0.5, 1.0, 2.0, 4.0]
    entropy_based = [float(gaussian_prior_kl_from_draws(s * eps, 1.0).mean()) for s in widths]
    two_sample = [float(knn_kl(s * eps, prior).mean()) for s in widths]
    assert int(np.argmin(entropy_based)) == 1
    assert all(a > b for a, b in zip(two_sample, two_sample[1:]))


# ------------------------------------------------- discriminator (Prop. 1)
def test_discriminator_kl_matches_the_closed_form():
    """Killingberg 2021, section 5.1.1: q = N(0, 1), p = N(0, 4^2), a 1-5-1 discriminator.

    KL = 2 log 2 - 15/32 = 0.9175. The estimate (mean logit on fresh q draws)
    is averaged over the last 500 of 2,000 Adam steps on 256 + 256 fresh draws
    each. Over seeds 0-4 the error of that average was at most 0.009 (a 5-unit
    ReLU net approximates the quadratic log-ratio closely; a single step's
    estimate has a spread of about 0.05), so 0.03 leaves a margin of 3.
    """
    generator = torch.Generator().manual_seed(0)
    discriminator = SliceDiscriminator(1, 1, (5,), generator=generator, device="cpu")
    optimizer = torch.optim.Adam(discriminator.parameters(), lr=1e-2)
    estimates = []
    for step in range(2000):
        q = torch.randn(256, 1, 1, generator=generator)
        p = 4 * torch.randn(256, 1, 1, generator=generator)
        optimizer.zero_grad()
        discriminator_loss(discriminator(q), discriminator(p)).backward()
        optimizer.step()
        if step >= 1500:
            with torch.no_grad():
                fresh = torch.randn(256, 1, 1, generator=generator)
                estimates.append(float(discriminator_kl(discriminator(fresh)).sum()))
    truth = _gaussian_kl(1.0, 4.0, 1)
    assert truth == pytest.approx(2 * math.log(2) - 15 / 32)
    assert np.mean(estimates) == pytest.approx(truth, abs=0.03)


def test_discriminator_loss_is_the_binary_cross_entropy_with_posterior_label_one():
    logits_q, logits_p = torch.tensor([2.0, -1.0]), torch.tensor([0.5])
    sigmoid = torch.sigmoid
    expected = -torch.log(sigmoid(logits_q)).mean() - torch.log(1 - sigmoid(logits_p)).mean()
    np.testing.assert_allclose(float(discriminator_loss(logits_q, logits_p)), float(expected), rtol=1e-6)


def test_generator_learns_the_prior_when_the_likelihood_is_off():
    """Killingberg 2021, section 5.1.2: trained on the discriminator's KL alone, q becomes the prior.

    A layer with 1 input and 2 outputs (2 slices of weight and bias) and a
    N(0, 2^2) prior; generator and discriminator alternate (3 discriminator
    steps per generator step). At the start q's KL (kNN, 2,000 draws) is
    about 8 nats; after training the mean of every weight is within 0.4
    prior_scale of 0, every standard deviation within 15% of prior_scale
    (measured: 0.36 and 0.87-1.13 prior_scale over seeds 0-2), the kNN KL
    (an estimator independent of the discriminator, consistent with many
    draws) below 0.3 and the discriminator's own estimate within 0.25 of 0.
    """
    generator = torch.Generator().manual_seed(2)
    network = ImplicitMLP(1, (), 2, prior_scale=2.0, discriminator_hidden_sizes=[(32, 32, 32)], generator=generator,
                          device="cpu")
    g_opt = torch.optim.Adam(network.layers.parameters(), lr=2e-3)
    d_opt = torch.optim.Adam(network.discriminators.parameters(), lr=5e-3)

    def knn_estimate():
        with torch.no_grad():
            return float(network.kl_knn(network.slice_draws(2000, generator), 2000, generator))

    assert knn_estimate() > 4.0
    estimates = []
    for step in range(1000):
        for _ in range(3):
            slices = network.slice_draws(32, generator)
            d_opt.zero_grad()
            network.discriminator_loss(slices, network.prior_slice_draws(32, generator)).backward()
            d_opt.step()
        g_opt.zero_grad()
        kl = network.kl_discriminator(slices)
        kl.backward()
        g_opt.step()
        if step >= 800:
            estimates.append(kl.item())
    with torch.no_grad():
        draws = network.slice_draws(5000, generator)[0]
    assert draws.mean(0).abs().max() < 0.4 * 2.0
    np.testing.assert_allclose(draws.std(0), 2.0, rtol=0.15)
    assert knn_estimate() < 0.3
    assert abs(np.mean(estimates)) < 0.25


def test_kl_discriminator_does_not_train_the_discriminator():
    generator = torch.Generator().manual_seed(0)
    network = ImplicitMLP(2, (3,), 1, discriminator_hidden_sizes=[(4,), (4,)], generator=generator, device="cpu")
    network.kl_discriminator(network.slice_draws(3, generator)).backward()
    assert all(p.grad is None for p in network.discriminators.parameters())
    assert all(p.grad is not None for p in network.layers.parameters())


def test_mle_then_kl_warmup_schedule():
    schedule = MLEThenKLWarmup(mle_epochs=2, n_epochs=4)
    weights = []
    for step in range(10 * 3):
        schedule.on_batch_end(SimpleNamespace(n_batches=3, step=step))
        weights.append(schedule.weight)
    # 0 over the first 2 epochs (6 steps), then linear over 4 epochs (12 steps), then 1
    np.testing.assert_allclose(weights, [0.0] * 6 + [i / 12 for i in range(12)] + [1.0] * 12)
    assert discriminator_widths(1, 50) == (25, 25, 25) and discriminator_widths(3, 4) == (16, 16, 16)


# --------------------------------------------------------------- estimators
@pytest.fixture(scope="module")
def cubic():
    """The toy of Killingberg 2021, section 5.1.3: 20 points, x ~ U(-4, 4), y = x^3 + N(0, 3^2)."""
    rng = np.random.RandomState(0)
    X = rng.uniform(-4, 4, (20, 1))
    return X, X[:, 0] ** 3 + 3 * rng.randn(20)


METHODS = [
    BayesByHypernet(),
    BayesByGAN(mle_warmup_epochs=20, kl_warmup_epochs=50),
]


@pytest.mark.parametrize("method", METHODS, ids=lambda m: type(m).__name__)
def test_predictive_std_grows_away_from_the_data(method, cubic):
    X, y = cubic
    # 300 epochs at a step size of 0.01: far from the thesis's 70,000 (Bayes by GAN's growth is the weaker)
    model = BayesianMLPRegressor(
        (32,), inference=with_loop(method, max_iter=300, learning_rate_init=0.01, n_iter_no_change=1000), random_state=0, noise="homoscedastic"
    ).fit(X, y)
    _, std_in = model.predict(X, return_std=True)
    _, std_out = model.predict(np.array([[-8.0], [8.0]]), return_std=True)
    assert std_out.min() > std_in.max() and std_out.mean() > 1.5 * std_in.mean()


@pytest.mark.parametrize("method", METHODS, ids=lambda m: type(m).__name__)
def test_same_random_state_same_fit(method, cubic):
    X, y = cubic
    params = {"hidden_layer_sizes": (8,), "inference": with_loop(method, max_iter=5, n_mc_predict=10),
              "noise": "homoscedastic"}
    a = BayesianMLPRegressor(**params, random_state=3).fit(X, y)
    b = BayesianMLPRegressor(**params, random_state=3).fit(X, y)
    c = BayesianMLPRegressor(**params, random_state=4).fit(X, y)
    np.testing.assert_array_equal(a.predict(X, return_std=True), b.predict(X, return_std=True))
    assert a.loss_curve_ == b.loss_curve_ and a.inference_diagnostics_ == b.inference_diagnostics_
    assert a.loss_curve_ != c.loss_curve_


def test_the_classifier_takes_both_methods():
    rng = np.random.RandomState(0)
    X = rng.randn(60, 2)
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    for method in METHODS:
        # early_stopping=False: on the 6 rows the classifier's default early stopping holds out, the
        # hypernetwork's validation score stays flat for its first 20 epochs and patience 10 ends the fit
        model = BayesianMLPClassifier((8,), inference=with_loop(method, early_stopping=False, max_iter=150), random_state=0)
        assert model.fit(X, y).score(X, y) > 0.85


def test_bbg_warm_start_keeps_the_discriminators(cubic):
    X, y = cubic
    model = BayesianMLPRegressor((8,), inference=BayesByGAN(max_iter=3), warm_start=True, random_state=0, noise="homoscedastic").fit(X, y)
    discriminators = model.module_["network"].discriminators
    before = [p.detach().clone() for p in discriminators.parameters()]
    model.fit(X, y)
    assert model.module_["network"].discriminators is discriminators
    assert any(not torch.equal(a, b) for a, b in zip(before, discriminators.parameters()))
