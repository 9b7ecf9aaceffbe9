"""Multiplicative normalising flows: MNFLinear, MNFMLP and the MNF inference method.

The layer is checked against independent computations: brute-force weight
draws from q(W | z) for the local reparameterisation, draws of the training
pass against ``sample_parameters``, the mean-field layer when z is fixed at
1, ``torch.distributions`` and quadrature for the reverse model, and, with
no flows (where q(W) is Gaussian in closed form), the auxiliary bound
against KL(q(W) || p) plus the exact gap E_W KL(q(z | W) || r(z | W)).
The estimators: Bayesian linear regression, growth of the uncertainty away
from the data, seeding, the classifier and GridSearchCV.
"""

import copy
import pickle

import numpy as np
import pytest
import torch
from _exact_blr import exact_blr_predictive, make_blr_data
from scipy.stats import ks_2samp
from sklearn.datasets import make_blobs
from sklearn.model_selection import GridSearchCV
from torch.distributions import MultivariateNormal, Normal, kl_divergence

from skbayes import BayesianMLPClassifier, BayesianMLPRegressor
from skbayes.inference import MNF
from skbayes.nn import MeanFieldLinear, MNFLinear, MNFMLP

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

F64 = torch.float64


def _layer(in_features, out_features, *, seed=0, z_mean=None, z_std=0.5, sigma=0.3, perturb_flows=0.5, **kwargs):
    """An MNFLinear (float64) with non-trivial variances, z and flows."""
    g = torch.Generator().manual_seed(seed)
    layer = MNFLinear(in_features, out_features, generator=g, dtype=F64, **kwargs)
    with torch.no_grad():
        layer.mu.normal_(0.0, 1.0, generator=g)
        layer.rho.copy_(torch.log(torch.expm1(sigma * (0.5 + torch.rand(layer.rho.shape, generator=g, dtype=F64)))))
        if z_mean is not None:
            layer.z_mu.copy_(torch.as_tensor(z_mean, dtype=F64))
        layer.z_rho.copy_(torch.log(torch.expm1(torch.full_like(layer.z_rho, z_std))))
        for name in ("c", "b1", "b2"):
            getattr(layer, name).normal_(0.0, 1.0, generator=g)
        for flow in (layer.flow_q, layer.flow_r):
            for p in flow.parameters():
                p.add_(perturb_flows * torch.randn(p.shape, generator=g, dtype=F64))
    return layer


def _degenerate_z(layer, z):
    """Fix z: no flows and sigma_z = softplus(-40) ~ 4e-18."""
    with torch.no_grad():
        layer.z_mu.copy_(torch.as_tensor(z, dtype=F64))
        layer.z_rho.fill_(-40.0)
    return layer


# ------------------------------------------------------------------ the layer
def test_preactivations_given_z_match_brute_force_weight_draws():
    # Local reparameterisation (Louizos & Welling, Alg. 1): given z the
    # pre-activation of a row is N((x*z) M + m_b, x^2 Sigma + s_b^2).
    z = [0.5, -1.2, 2.0]
    layer = _degenerate_z(_layer(3, 2, n_flows=0), z)
    x = torch.tensor([[1.0, 2.0, -1.0], [0.3, -0.5, 0.8], [0.0, 0.0, 0.0], [-2.0, 1.0, 0.5]], dtype=F64)
    n = 40_000
    with torch.no_grad():
        out = layer(x.expand(n, *x.shape), generator=torch.Generator().manual_seed(1))
        mean = layer(x, sample=False)
    # brute force: W_ij = z_i mu_ij + sigma_ij eps_ij, b_j = m_j + s_j eps_j, drawn here
    g = torch.Generator().manual_seed(2)
    mu, sigma = layer.mu.detach(), torch.nn.functional.softplus(layer.rho.detach())
    W = torch.tensor(z, dtype=F64)[:, None] * mu[:-1] + sigma[:-1] * torch.randn((n, 3, 2), generator=g, dtype=F64)
    b = mu[-1] + sigma[-1] * torch.randn((n, 1, 2), generator=g, dtype=F64)
    brute = x @ W + b
    se = brute.std(0) / np.sqrt(n)
    assert torch.all((brute.mean(0) - mean).abs() < 5 * se)
    assert torch.all((out.mean(0) - mean).abs() < 5 * se)
    # sample variances agree to ~1.4% (s.e. of a variance ratio); 6% bound
    torch.testing.assert_close(out.var(0), brute.var(0), rtol=0.06, atol=0.0)


@pytest.mark.parametrize("flow", ["planar", "realnvp"])
def test_weight_draws_agree_in_distribution_with_the_training_pass(flow):
    # forward draws z per row, sample_parameters one z per weight draw: the
    # pre-activations of one row have the same law either way.
    layer = _layer(3, 2, flow=flow, hidden_size=8, seed=3)
    x = torch.tensor([[1.0, 2.0, -1.0], [0.3, -0.5, 0.8]], dtype=F64)
    n = 20_000
    with torch.no_grad():
        out = layer(x.expand(n, *x.shape), generator=torch.Generator().manual_seed(4))
        W, b = layer.sample_parameters(n, torch.Generator().manual_seed(5))
        via_weights = x @ W + b
    assert W.shape == (n, 3, 2) and b.shape == (n, 1, 2)
    for row in range(2):
        for unit in range(2):
            a, c = out[:, row, unit].numpy(), via_weights[:, row, unit].numpy()
            assert ks_2samp(a, c).pvalue > 1e-3
    # and the multiplicative noise matters: the law is not the z = 1 one
    z, _ = layer.draw_z((n,), torch.Generator().manual_seed(6))
    assert z.std(0).min() > 0.1


def test_with_no_flows_and_z_at_one_the_layer_is_mean_field():
    layer = _degenerate_z(_layer(4, 3, n_flows=0, n_flows_reverse=0), torch.ones(4))
    mean_field = MeanFieldLinear(4, 3, prior_scale=layer.prior_scale, dtype=F64)
    with torch.no_grad():
        mean_field.mu.copy_(layer.mu)
        mean_field.rho.copy_(layer.rho)
    ones = torch.ones(4, dtype=F64)
    torch.testing.assert_close(layer.conditional_kl(ones), mean_field.kl())
    x = torch.randn(5, 4, dtype=F64, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(layer(x, sample=False), mean_field(x, sample=False))
    # weight draws: z = 1 up to 4e-18, so W = M + Sigma eps with the same law
    W, _ = layer.sample_parameters(20_000, torch.Generator().manual_seed(1))
    W_mf, _ = mean_field.sample_parameters(20_000, torch.Generator().manual_seed(2))
    torch.testing.assert_close(W.std(0), W_mf.std(0), rtol=0.05, atol=0.0)


@pytest.mark.parametrize("prior_scale", [1.0, 0.4])
def test_conditional_kl_matches_torch_distributions(prior_scale):
    layer = _layer(3, 4, prior_scale=prior_scale)
    z = torch.randn(6, 3, dtype=F64, generator=torch.Generator().manual_seed(0))
    mu, sigma = layer.mu.detach(), torch.nn.functional.softplus(layer.rho.detach())
    p = Normal(torch.zeros((), dtype=F64), torch.tensor(prior_scale, dtype=F64))
    expected = [
        kl_divergence(Normal(zi[:, None] * mu[:-1], sigma[:-1]), p).sum() + kl_divergence(Normal(mu[-1], sigma[-1]), p).sum()
        for zi in z
    ]
    torch.testing.assert_close(layer.conditional_kl(z).detach(), torch.stack(expected))


@pytest.mark.parametrize("flow", ["planar", "realnvp"])
def test_reverse_model_log_density_matches_torch_distributions(flow):
    layer = _layer(3, 4, flow=flow, hidden_size=6)
    g = torch.Generator().manual_seed(1)
    z = torch.randn(5, 3, dtype=F64, generator=g)
    W = torch.randn(5, 3, 4, dtype=F64, generator=g)
    with torch.no_grad():
        log_r = layer.reverse_log_prob(z, W)
        for k in range(5):
            a = torch.tanh(layer.c @ W[k]).mean()  # (1/D_out) sum_j tanh(c^T W)_j
            z_b, log_det = layer.flow_r(z[k])
            r = Normal(layer.b1 * a, torch.sigmoid(layer.b2 * a))
            torch.testing.assert_close(log_r[k], r.log_prob(z_b).sum() + log_det)


@pytest.mark.parametrize("flow, dim", [("planar", 1), ("realnvp", 1), ("planar", 2), ("realnvp", 2)])
def test_reverse_model_is_a_normalised_density(flow, dim):
    # r(z | W) is a density in z for every W: its flow's log-determinant has the right sign and direction.
    layer = _layer(dim, 3, flow=flow, hidden_size=6, perturb_flows=0.8, seed=7)
    W = torch.randn(dim, 3, dtype=F64, generator=torch.Generator().manual_seed(8))
    grid = torch.linspace(-12.0, 12.0, 240_001 if dim == 1 else 1201, dtype=F64)
    points = grid[:, None] if dim == 1 else torch.cartesian_prod(grid, grid)
    with torch.no_grad():
        density = layer.reverse_log_prob(points, W.expand(len(points), dim, 3)).exp()
    step = float(grid[1] - grid[0])
    mass = density.sum() * step**dim
    assert abs(float(mass) - 1.0) < 2e-3


def test_auxiliary_bound_equals_the_kl_plus_the_reverse_gap():
    # With no flows q(W) is Gaussian: row i of W is z_i mu_i + sigma_i eps,
    # z_i ~ N(m_i, v_i), so W_i ~ N(m_i mu_i, v_i mu_i mu_i^T + diag sigma_i^2),
    # and q(z_i | W) is Gaussian too. The auxiliary bound is then exactly
    # KL(q(W) || p) + E_W[KL(q(z | W) || r(z | W))] >= KL(q(W) || p).
    in_f, out_f, s = 2, 3, 0.8
    layer = _layer(in_f, out_f, n_flows=0, n_flows_reverse=0, z_std=0.6, sigma=1.0, prior_scale=s, seed=11)
    mu, sigma = layer.mu.detach(), torch.nn.functional.softplus(layer.rho.detach())
    M, D = mu[:-1], sigma[:-1] ** 2
    m, v = layer.z_mu.detach(), torch.nn.functional.softplus(layer.z_rho.detach()) ** 2
    prior_w = MultivariateNormal(torch.zeros(out_f, dtype=F64), s**2 * torch.eye(out_f, dtype=F64))
    exact_kl = sum(
        kl_divergence(MultivariateNormal(m[i] * M[i], v[i] * torch.outer(M[i], M[i]) + torch.diag(D[i])), prior_w)
        for i in range(in_f)
    ) + kl_divergence(Normal(mu[-1], sigma[-1]), Normal(0.0, s)).sum()

    n = 100_000
    g = torch.Generator().manual_seed(12)
    z = m + v.sqrt() * torch.randn(n, in_f, dtype=F64, generator=g)
    W = z[:, :, None] * M + D.sqrt() * torch.randn(n, in_f, out_f, dtype=F64, generator=g)
    post_var = 1.0 / (1.0 / v + (M**2 / D).sum(1))  # q(z_i | W_i), (in,)
    post_mean = post_var * (m / v + (M / D * W).sum(-1))  # (n, in)
    with torch.no_grad():
        a = torch.tanh(torch.einsum("i,nio->no", layer.c, W)).mean(-1, keepdim=True)
        r = Normal(layer.b1 * a, torch.sigmoid(layer.b2 * a))
        gap = kl_divergence(Normal(post_mean, post_var.sqrt()), r).sum(-1)
        bound = layer.kl(torch.Generator().manual_seed(13), n_draws=n)
    expected = exact_kl + gap.mean()
    tolerance = 5 * gap.std() / np.sqrt(n) + 0.02  # MC of the gap; the bound's own draws (s.e. ~0.005)
    assert abs(float(bound - expected)) < float(tolerance)
    assert float(bound) > float(exact_kl) + 0.5 * float(gap.mean())


def test_kl_uses_the_draws_of_the_last_training_pass_then_releases_them():
    layer = _layer(3, 2, seed=2)
    x = torch.randn(4, 3, dtype=F64, generator=torch.Generator().manual_seed(0))
    layer(x, generator=torch.Generator().manual_seed(1))
    z, log_q, _ = layer._pending
    assert z.shape == (4, 3) and log_q.shape == (4,)
    assert copy.deepcopy(layer)._pending is None  # the graph is never copied
    pickle.loads(pickle.dumps(layer))
    kl = layer.kl()
    kl.backward()  # gradients reach q(z) through the pending draws
    assert layer.z_mu.grad is not None and layer.z_mu.grad.abs().sum() > 0
    assert layer._pending is None
    a = layer.kl(torch.Generator().manual_seed(3), n_draws=8)
    b = layer.kl(torch.Generator().manual_seed(3), n_draws=8)
    torch.testing.assert_close(a, b)


def test_network_sums_the_layers_and_predicts_through_the_protocol():
    g = torch.Generator().manual_seed(0)
    net = MNFMLP(3, (5,), 2, flow="realnvp", hidden_size=4, generator=g, dtype=F64)
    x = torch.randn(7, 3, dtype=F64, generator=g)
    f = net(x.expand(2, 7, 3), generator=g)
    assert f.shape == (2, 7, 2)
    parameters = net.sample_parameters(6, g)
    assert [w.shape for w, _ in parameters] == [(6, 3, 5), (6, 5, 2)]
    assert net.forward_with(x, parameters).shape == (6, 7, 2)
    total = net.kl(torch.Generator().manual_seed(1), n_draws=4)
    g1 = torch.Generator().manual_seed(1)
    torch.testing.assert_close(total, sum(layer.kl(g1, n_draws=4) for layer in net.layers))


# -------------------------------------------------------------- the estimators
def test_linear_model_predictive_mean_matches_bayesian_linear_regression():
    # No hidden layer: Bayesian linear regression. q(W) is a Gaussian mixture
    # (the flows make z and hence the weights correlated), so the predictive
    # mean should match the exact one; the std within the usual VI bias
    # (here the total std is within 6% and the epistemic part within 12%).
    noise = 0.3
    X, y, X_test = make_blr_data(n_samples=50, n_features=2, noise_std=noise, random_state=1)
    model = BayesianMLPRegressor(
        hidden_layer_sizes=(), inference=MNF(learning_rate_init=1e-2, max_iter=1500, tol=0.0, n_iter_no_change=10**6, n_mc_predict=400),
        noise_std=noise, normalize_y=False, batch_size=50, random_state=0, noise="homoscedastic",
    ).fit(X, y)
    mean, std = model.predict(X_test, return_std=True)
    exact_mean, exact_std, exact_epistemic = exact_blr_predictive(X, y, X_test, 1.0, noise)
    np.testing.assert_allclose(mean, exact_mean, atol=0.1)
    np.testing.assert_allclose(std, exact_std, rtol=0.15)
    epistemic = model.predict_uncertainty(X_test).epistemic_std
    np.testing.assert_allclose(epistemic, exact_epistemic, rtol=0.3)
    assert epistemic[25:].mean() > 2.5 * epistemic[:25].mean()  # rows 25: lie at |x| in [2, 4]; exact ratio 3.3


@pytest.mark.parametrize("flow", ["planar", "realnvp"])
def test_uncertainty_grows_away_from_the_data(flow):
    rng = np.random.RandomState(0)
    X = rng.uniform(-1.0, 1.0, (40, 1))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.randn(40)
    model = BayesianMLPRegressor(
        (16,), inference=MNF(flow=flow, hidden_size=8, max_iter=300, learning_rate_init=1e-2, n_mc_predict=200),
        random_state=0, noise="homoscedastic",
    ).fit(X, y)
    inside = model.predict_uncertainty(np.linspace(-0.8, 0.8, 9)[:, None]).epistemic_std
    outside = model.predict_uncertainty(np.array([[-4.0], [-3.5], [3.5], [4.0]])).epistemic_std
    assert outside.min() > 2 * inside.mean()


def test_same_random_state_gives_identical_fits():
    X, y, X_test = make_blr_data(n_samples=40, random_state=2)
    kwargs = {"hidden_layer_sizes": (8,), "inference": MNF(max_iter=5, n_mc_predict=20), "noise": "homoscedastic"}
    a = BayesianMLPRegressor(random_state=3, **kwargs).fit(X, y)
    b = BayesianMLPRegressor(random_state=3, **kwargs).fit(X, y)
    c = BayesianMLPRegressor(random_state=4, **kwargs).fit(X, y)
    assert a.loss_curve_ == b.loss_curve_
    assert a.inference_diagnostics_ == b.inference_diagnostics_
    np.testing.assert_array_equal(a.predict(X_test, return_std=True), b.predict(X_test, return_std=True))
    assert not np.allclose(a.predict(X_test), c.predict(X_test))


def test_classifier_fits_blobs():
    X, y = make_blobs(120, centers=3, cluster_std=0.6, random_state=0)  # logistic regression: 0.99
    model = BayesianMLPClassifier(
        (16,), inference=MNF(flow="realnvp", hidden_size=8, max_iter=100, learning_rate_init=1e-2, n_mc_predict=50),
        random_state=0,
    ).fit(X, y)
    proba = model.predict_proba(X)
    np.testing.assert_allclose(proba.sum(1), 1.0)
    assert model.score(X, y) > 0.95
    assert model.inference_diagnostics_["kl"] > 0


def test_grid_search_over_the_flow():
    X, y, _ = make_blr_data(n_samples=40, random_state=0)
    search = GridSearchCV(
        BayesianMLPRegressor((8,), inference=MNF(max_iter=5, n_mc_predict=10), random_state=0, noise="homoscedastic"),
        {"inference__flow": ["planar", "realnvp"], "inference__n_flows": [0, 2]},
        cv=2,
    ).fit(X, y)
    assert set(search.cv_results_["param_inference__flow"]) == {"planar", "realnvp"}
    best = search.best_estimator_
    assert best.inference_.flow == search.best_params_["inference__flow"]
    assert len(best.module_["network"].layers[0].flow_q) == search.best_params_["inference__n_flows"]


def test_warm_start_needs_the_same_flows():
    X, y, _ = make_blr_data(n_samples=30, random_state=0)
    model = BayesianMLPRegressor((4,), inference=MNF(max_iter=3), warm_start=True, random_state=0, noise="homoscedastic").fit(X, y)
    network = model.module_["network"]
    model.fit(X, y)
    assert model.module_["network"] is network  # continued
    model.set_params(inference=MNF(flow="realnvp")).fit(X, y)
    assert model.module_["network"] is not network  # rebuilt
    assert model.module_["network"].flow_settings["flow"] == "realnvp"


@pytest.mark.parametrize("flow", ["planar", "realnvp"])
def test_log_q_of_z_is_the_change_of_variables_with_the_autograd_jacobian(flow):
    layer = _layer(3, 2, flow=flow, hidden_size=5, perturb_flows=0.8, seed=5)
    z, log_q = layer.draw_z((4,), torch.Generator().manual_seed(0))
    eps = torch.randn((4, 3), generator=torch.Generator().manual_seed(0), dtype=F64)  # the same base draws
    with torch.no_grad():
        sigma_z = torch.nn.functional.softplus(layer.z_rho)
        z0 = layer.z_mu + sigma_z * eps
        for k in range(4):
            jacobian = torch.autograd.functional.jacobian(lambda v: layer.flow_q(v)[0], z0[k])
            torch.testing.assert_close(z[k], layer.flow_q(z0[k])[0])
            expected = Normal(layer.z_mu, sigma_z).log_prob(z0[k]).sum() - torch.linalg.slogdet(jacobian)[1]
            torch.testing.assert_close(log_q[k], expected)
