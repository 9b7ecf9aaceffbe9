"""The GP-induced flow prior (GPI-NF; Rossi 2022, eqs. 5.7-5.9): its planar maps, the stacked network that
computes with flowed weights, and SGHMC's posterior under it against a brute-force grid."""

import numpy as np
import pytest
import torch
from sklearn.gaussian_process.kernels import ConstantKernel, DotProduct

from skbayes import BayesianMLPRegressor
from skbayes.inference import SGHMC, GPInducedPrior
from skbayes.nn import LayerFlowPrior, StackedMLP
from skbayes.nn.priors.functional import LayerGaussianPrior

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

FAST_PRIOR = {"n_measurement_points": 8, "n_function_draws": 32, "n_critic_steps": 2, "max_iter": 10}


def _softplus(a):
    return np.log1p(np.exp(-abs(a))) + max(a, 0.0)


def _planar_numpy(z, flows):
    """Rezende & Mohamed (2015), eq. 10 with the u of their appendix A.1, flow after flow, in numpy."""
    z = np.array(z, dtype=np.float64)
    for flow in flows:
        u, w, b = (flow.u.detach().double().numpy(), flow.w.detach().double().numpy(), float(flow.b.detach()))
        wu = w @ u
        u_hat = u + (_softplus(wu) - 1.0 - wu) * w / (w @ w)
        z = z + np.tanh(z @ w + b)[..., None] * u_hat
    return z


def _stacked_forward_numpy(x, weights, activation=np.tanh):
    """Each member's MLP in numpy; weights (M, n_in + 1, n_out) with the bias last."""
    h = np.broadcast_to(x, (weights[0].shape[0], *x.shape))
    for i, w in enumerate(weights):
        if i:
            h = activation(h)
        h = h @ w[:, :-1] + w[:, -1:]
    return h


def test_layer_flow_and_its_frozen_copy_are_the_planar_maps():
    torch.manual_seed(0)
    prior = LayerFlowPrior([3, 4, 2], n_flows=3, dtype=torch.float64)
    base = torch.randn(5, 4, 4, dtype=torch.float64)  # 5 draws of layer 0: (3 + 1) x 4
    expected = _planar_numpy(base.reshape(5, -1).numpy(), prior.flows[0].flow.flows).reshape(5, 4, 4)
    np.testing.assert_allclose(prior.flows[0](base).detach().numpy(), expected, rtol=1e-12, atol=1e-12)
    frozen = prior.weight_transform()
    np.testing.assert_allclose(frozen[0](base).numpy(), expected, rtol=1e-12, atol=1e-12)
    assert not any(p.requires_grad for p in frozen.parameters())


def test_prior_draws_are_the_gaussian_draws_through_the_flows_and_differentiable():
    prior = LayerFlowPrior([3, 4, 2], n_flows=2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    gaussian = LayerGaussianPrior([3, 4, 2], dtype=torch.float64)
    flowed = prior.sample_parameters(6, torch.Generator().manual_seed(2))
    base = gaussian.sample_parameters(6, torch.Generator().manual_seed(2))  # same scales at the start
    for (w, b), (w0, b0), flow in zip(flowed, base, prior.flows):
        stacked = torch.cat([w0, b0], dim=1).reshape(6, -1).detach().numpy()
        expected = _planar_numpy(stacked, flow.flow.flows).reshape(6, -1, w.shape[-1])
        np.testing.assert_allclose(torch.cat([w, b], dim=1).detach().numpy(), expected, rtol=1e-12, atol=1e-12)
    sum(w.sum() + b.sum() for w, b in flowed).backward()
    for flow in prior.flows:
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in flow.parameters())
    assert prior.log_weight_scale.grad.abs().sum() > 0
    assert prior.hyperparameters()["n_flows"] == 2


def test_stacked_network_computes_with_the_transformed_weights():
    torch.manual_seed(0)
    network = StackedMLP(3, (5,), 2, n_members=4, activation="tanh", dtype=torch.float64)
    prior = LayerFlowPrior([3, 5, 2], n_flows=2, dtype=torch.float64)
    base = [layer.weight.detach().clone() for layer in network.layers]
    plain_prior = network.neg_log_prior().detach()
    network.set_weight_transform(prior.weight_transform())
    flowed = [_planar_numpy(w.reshape(4, -1).numpy(), f.flow.flows).reshape(w.shape) for w, f in zip(base, prior.flows)]
    x = torch.randn(7, 3, dtype=torch.float64)
    np.testing.assert_allclose(network(x).detach().numpy(), _stacked_forward_numpy(x.numpy(), flowed), rtol=1e-10)
    for (w, b), expected in zip(network.member_parameters(), flowed):
        np.testing.assert_allclose(torch.cat([w, b], dim=1).detach().numpy(), expected, rtol=1e-12)
    # the prior term stays that of the stored (base) weights
    assert float(network.neg_log_prior()) == pytest.approx(float(plain_prior))
    # copies keep the transform
    index = torch.tensor([2, 0])
    np.testing.assert_allclose(network.select(index)(x).detach().numpy(),
                               _stacked_forward_numpy(x.numpy(), [f[[2, 0]] for f in flowed]), rtol=1e-10)
    copy = network.with_member_tensors([w.detach() for w in network.member_tensors()])
    np.testing.assert_allclose(copy(x).detach().numpy(), network(x).detach().numpy(), rtol=1e-12)
    network.set_weight_transform(None)
    np.testing.assert_allclose(network(x).detach().numpy(), _stacked_forward_numpy(x.numpy(), [w.numpy() for w in base]),
                               rtol=1e-10)
    with pytest.raises(ValueError, match="one module per layer"):
        network.set_weight_transform(prior.weight_transform()[:1])


def test_sghmc_samples_the_posterior_under_the_flowed_prior():
    # Bayesian linear regression in one feature: w = T(w_0), w_0 ~ N(0, diag(s_w^2, s_b^2)), T the fitted
    # planar flows. The exact predictive comes from a 2-D grid over w_0 (posterior weight
    # p_0(w_0) prod_i N(y_i | x_i T(w_0)_1 + T(w_0)_2, noise^2)), with T rebuilt in numpy from the flows'
    # parameters; SGHMC moves w_0 and computes with T(w_0). Few rows, so the prior's shape matters; one step per
    # epoch, so the schedule is long (with burn_in=300, thinning=3 the chains had not mixed, R-hat 1.9-2.4, for
    # GPI-G as for GPI-NF). Seeds 0 and 1: means within 0.17 epistemic std of the grid's, std ratio 0.99-1.14.
    rng = np.random.RandomState(0)
    noise = 0.5
    X = rng.uniform(-1, 1, (6, 1))
    X = (X - X.mean()) / X.std()  # the estimator standardises X: make that the identity
    y = 0.8 * X[:, 0] - 0.3 + noise * rng.randn(6)
    X_test = np.linspace(-3, 3, 7)[:, None]
    kernel = ConstantKernel(0.5, "fixed") * DotProduct(sigma_0=1.0, sigma_0_bounds="fixed")
    model = BayesianMLPRegressor(
        hidden_layer_sizes=(), noise_std=noise, normalize_y=False, batch_size=6, random_state=0, noise="homoscedastic",
        inference=SGHMC(prior=GPInducedPrior(kernel, n_flows=2, max_iter=100), n_chains=16, burn_in=2000,
                        thinning=20, n_kept_samples=40),
    ).fit(X, y)
    network = model.module_["network"]
    assert network.weight_transform is not None
    fitted = model.inference_diagnostics_["prior_hyperparameters"]
    (s_w,), (s_b,) = fitted["weight_scale"], fitted["bias_scale"]
    frozen = network.weight_transform[0]

    grid_w, grid_b = np.meshgrid(np.linspace(-7 * s_w, 7 * s_w, 501), np.linspace(-7 * s_b, 7 * s_b, 501))
    base = np.stack([grid_w.ravel(), grid_b.ravel()], axis=1)
    flowed = base
    for u, w, b in zip(frozen.u.double().numpy(), frozen.w.double().numpy(), frozen.b.double().numpy()):
        flowed = flowed + np.tanh(flowed @ w + b)[:, None] * u  # u is already the constrained one
    log_post = -0.5 * (base[:, 0] / s_w) ** 2 - 0.5 * (base[:, 1] / s_b) ** 2
    log_post += -0.5 * (((y[None] - X[:, 0][None] * flowed[:, :1] - flowed[:, 1:]) / noise) ** 2).sum(axis=1)
    weight = np.exp(log_post - log_post.max())
    weight /= weight.sum()
    f = X_test[:, 0][None] * flowed[:, :1] + flowed[:, 1:]  # (grid, n_test)
    mean = weight @ f
    epistemic = np.sqrt(weight @ (f - mean) ** 2)

    parts = model.predict_uncertainty(X_test)
    assert np.all(np.abs(parts.mean - mean) < 0.25 * epistemic)
    np.testing.assert_allclose(parts.epistemic_std, epistemic, rtol=0.25)


def test_flows_with_hierarchical_are_refused_and_diagnostics_name_them():
    rng = np.random.RandomState(0)
    X, y = rng.randn(30, 2), rng.randn(30)
    method = SGHMC(burn_in=3, thinning=1, n_kept_samples=4, prior=GPInducedPrior(hierarchical=True, n_flows=1,
                                                                                 **FAST_PRIOR))
    with pytest.raises(ValueError, match="hierarchical"):
        BayesianMLPRegressor(hidden_layer_sizes=(8,), inference=method, noise="homoscedastic").fit(X, y)
    method = SGHMC(burn_in=3, thinning=1, n_kept_samples=4, prior=GPInducedPrior(n_flows=2, **FAST_PRIOR))
    kwargs = {"hidden_layer_sizes": (8,), "inference": method, "noise": "homoscedastic", "random_state": 0}
    first = BayesianMLPRegressor(**kwargs).fit(X, y)
    assert first.inference_diagnostics_["prior_hyperparameters"]["n_flows"] == 2
    second = BayesianMLPRegressor(**kwargs).fit(X, y)
    np.testing.assert_array_equal(first.predict(X, return_std=True), second.predict(X, return_std=True))
    # a warm start keeps computing with the (refitted) flows
    first.set_params(warm_start=True).fit(X, y)
    assert first.module_["network"].weight_transform is not None
