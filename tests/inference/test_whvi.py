"""WHVI: the layer against dense Walsh-Hadamard algebra, its KLs, the thesis's parameter counts, the estimator."""

import math

import numpy as np
import pytest
import torch
from scipy.linalg import hadamard
from sklearn.model_selection import GridSearchCV

from discovery import with_loop
from skbayes import BayesianMLPClassifier, BayesianMLPRegressor
from skbayes.inference import ALIASES, WHVI, MCDropout, MeanFieldVI
from skbayes.nn import WHVILinear, WHVIMLP, whvi_dimensions

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

DTYPE = torch.float64


def _layer(in_features, out_features, seed=0, **kwargs):
    """A layer with random S_1, S_2, mu and sigma of unit scale (far from the initial values)."""
    layer = WHVILinear(in_features, out_features, generator=torch.Generator().manual_seed(seed), dtype=DTYPE, **kwargs)
    rng = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in (layer.s1, layer.s2, layer.g_mu, layer.bias_mu):
            p.copy_(torch.randn(p.shape, generator=rng, dtype=DTYPE))
        layer.g_rho.copy_(2 * torch.randn(layer.g_rho.shape, generator=rng, dtype=DTYPE))
        layer.bias_rho.copy_(torch.randn(layer.bias_rho.shape, generator=rng, dtype=DTYPE) - 2)
    return layer


def _dense_blocks(layer):
    """Per block k: the D x D factors of W_k = S1 Hn diag(g) Hn S2 as numpy arrays (thesis's D_out x D_in)."""
    size = layer.block_size
    hn = hadamard(size) / math.sqrt(size)
    s1, s2 = layer.s1.detach().numpy(), layer.s2.detach().numpy()
    return hn, s1, s2


def _dense_weight(layer, g):
    """The thesis's D_out x D_in matrix for g, by dense matrix products, padded columns and extra rows dropped."""
    hn, s1, s2 = _dense_blocks(layer)
    blocks = [np.diag(s1[k]) @ hn @ np.diag(g) @ hn @ np.diag(s2[k]) for k in range(layer.n_blocks)]
    return np.vstack(blocks)[: layer.out_features, : layer.in_features]


def _closed_form_moments(layer, h):
    """Mean and covariance of W h + b, eq. 4.14: N(W(mu) h, A Sigma A^T) with A = S1 Hn diag(Hn S2 h), stacked."""
    hn, s1, s2 = _dense_blocks(layer)
    mu, sigma = layer.g_mu.detach().numpy(), layer.g_sigma.detach().numpy()
    hp = np.concatenate([h, np.zeros(layer.padding)])
    a = np.vstack([np.diag(s1[k]) @ hn @ np.diag(hn @ (s2[k] * hp)) for k in range(layer.n_blocks)])
    a = a[: layer.out_features] * sigma
    mean = _dense_weight(layer, mu) @ h + layer.bias_mu.detach().numpy()
    cov = a @ a.T + np.diag(layer.bias_sigma.detach().numpy() ** 2)
    return mean, cov


def _assert_gaussian_moments(draws, mean, cov):
    """Sample mean and covariance of ``draws`` (n, k) within 5 standard errors of N(mean, cov)'s."""
    n = draws.shape[0]
    var = np.diag(cov)
    np.testing.assert_array_less(np.abs(draws.mean(0) - mean), 5 * np.sqrt(var / n))
    cov_stderr = np.sqrt((np.outer(var, var) + cov**2) / n)  # of a Gaussian sample covariance
    np.testing.assert_array_less(np.abs(np.cov(draws.T) - cov), 5 * cov_stderr)
    # and the test can tell: some outputs are correlated far beyond the noise (WHVI is not mean field on W h)
    off_diagonal = ~np.eye(len(mean), dtype=bool)
    assert (np.abs(cov) / cov_stderr)[off_diagonal].max() > 10


# ----------------------------------------------------------------- Algorithm 3


@pytest.mark.parametrize(
    "d_in, d_out, expected",
    [
        (8, 8, (8, 1, 0)),  # power of two: no padding (the thesis's test never fires here)
        (8, 32, (8, 4, 0)),
        (1, 128, (1, 128, 0)),  # a 1-D input: 128 blocks of 1 x 1
        (128, 128, (128, 1, 0)),
        (5, 8, (8, 1, 3)),  # not a power of two: pad to 8
        (13, 50, (16, 4, 3)),  # and D_out not a multiple: 4 blocks, 64 rows, 14 dropped
        (4, 10, (4, 3, 0)),
        (128, 1, (128, 1, 0)),
    ],
)
def test_algorithm_3_dimensions(d_in, d_out, expected):
    assert whvi_dimensions(d_in, d_out) == expected
    layer = WHVILinear(d_in, d_out)
    assert layer(torch.randn(3, d_in)).shape == (3, d_out)
    weight, bias = layer.sample_parameters(2)
    assert weight.shape == (2, d_in, d_out) and bias.shape == (2, 1, d_out)


def test_algorithm_3_rejects_empty_widths():
    with pytest.raises(ValueError, match="in_features and out_features >= 1"):
        whvi_dimensions(0, 4)


# ---------------------------------------------------------- the layer's algebra


@pytest.mark.parametrize("d_in, d_out", [(4, 4), (5, 11), (8, 3)])
def test_structured_product_equals_the_dense_hadamard_matrix(d_in, d_out):
    layer = _layer(d_in, d_out)
    g = torch.randn(layer.block_size, dtype=DTYPE)
    x = torch.randn(6, d_in, dtype=DTYPE)
    expected = x.numpy() @ _dense_weight(layer, g.numpy()).T
    np.testing.assert_allclose(layer.structured_product(x, g).detach().numpy(), expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("d_in, d_out", [(4, 4), (3, 6)])
def test_local_reparameterisation_moments_match_eq_4_14(d_in, d_out):
    # forward draws one g per row: the rows of W h + b for a fixed h are draws of N(m, A A^T + diag s_b^2)
    layer = _layer(d_in, d_out)
    h = np.random.default_rng(0).standard_normal(d_in)
    n = 40_000
    x = torch.as_tensor(h).expand(n, d_in)
    out = layer(x, generator=torch.Generator().manual_seed(0)).detach().numpy()
    _assert_gaussian_moments(out, *_closed_form_moments(layer, h))


def test_sample_parameters_agree_with_the_training_pass():
    layer = _layer(3, 6, seed=3)
    h = np.random.default_rng(1).standard_normal(3)
    n = 40_000
    weight, bias = layer.sample_parameters(n, generator=torch.Generator().manual_seed(1))
    out = (torch.as_tensor(h) @ weight + bias[:, 0]).detach().numpy()
    _assert_gaussian_moments(out, *_closed_form_moments(layer, h))


def test_mean_pass_uses_the_mean_weights():
    layer = _layer(5, 7)
    x = torch.randn(4, 5, dtype=DTYPE)
    expected = x.numpy() @ _dense_weight(layer, layer.g_mu.detach().numpy()).T + layer.bias_mu.detach().numpy()
    np.testing.assert_allclose(layer(x, sample=False).detach().numpy(), expected, rtol=1e-10, atol=1e-12)


def test_initial_mean_weights_have_the_default_scale():
    # Var(W_ij) = 1 / (3 in_features), PyTorch's uniform initialisation
    # (in expectation over the initial mu: one layer's 64 values of mu give a spread of about 18 %)
    variances = []
    for seed in range(20):
        layer = WHVILinear(64, 128, generator=torch.Generator().manual_seed(seed), dtype=DTYPE)
        variances.append(np.mean(_dense_weight(layer, layer.g_mu.detach().numpy()) ** 2))
    assert np.mean(variances) == pytest.approx(1 / (3 * 64), rel=0.1)


# ------------------------------------------------------------------------- KL


def test_gaussian_kl_matches_torch_distributions():
    from torch.distributions import MultivariateNormal, kl_divergence

    layer = _layer(5, 6, g_prior_variance=0.3, prior_scale=2.0)
    d = layer.block_size
    q_g = MultivariateNormal(layer.g_mu, torch.diag(layer.g_sigma**2))
    p_g = MultivariateNormal(torch.zeros(d, dtype=DTYPE), 0.3 * torch.eye(d, dtype=DTYPE))
    q_b = MultivariateNormal(layer.bias_mu, torch.diag(layer.bias_sigma**2))
    p_b = MultivariateNormal(torch.zeros(6, dtype=DTYPE), 4.0 * torch.eye(6, dtype=DTYPE))
    expected = kl_divergence(q_g, p_g) + kl_divergence(q_b, p_b)
    assert float(layer.kl().detach()) == pytest.approx(float(expected.detach()), rel=1e-10)


def test_flow_kl_matches_a_brute_force_monte_carlo():
    # brute force: log q(g_K) by the change of variables with the autograd Jacobian of the whole map g0 -> g
    from torch.func import jacrev, vmap

    layer = _layer(4, 4, seed=5, n_flows=3, g_prior_variance=0.5)
    with torch.no_grad():
        layer.g_rho.fill_(math.log(math.expm1(0.4)))
        for flow in layer.flow.flows:
            flow.b.fill_(0.3)
    n = 20_000
    g0 = layer.g_mu + layer.g_sigma * torch.randn(n, 4, generator=torch.Generator().manual_seed(3), dtype=DTYPE)
    g = layer._flow(g0)[0]
    jac = vmap(jacrev(lambda z: layer._flow(z)[0]))(g0)
    log_q = (
        torch.distributions.Normal(layer.g_mu, layer.g_sigma).log_prob(g0).sum(-1) - torch.linalg.slogdet(jac)[1]
    )
    log_p = torch.distributions.Normal(0.0, math.sqrt(0.5)).log_prob(g).sum(-1)
    terms = (log_q - log_p).detach()
    brute, stderr = float(terms.mean()), float(terms.std() / math.sqrt(n))
    layer_estimate = _flow_kl_from_forward(layer, n)
    assert layer_estimate == pytest.approx(brute, abs=6 * stderr)


def _flow_kl_from_forward(layer, n):
    """The layer's Monte-Carlo KL of g from a training pass of n rows, the biases' closed form removed."""
    layer(torch.zeros(n, layer.in_features, dtype=DTYPE), generator=torch.Generator().manual_seed(7))
    total = layer.kl()
    q_b = torch.distributions.Normal(layer.bias_mu, layer.bias_sigma)
    bias = torch.distributions.kl_divergence(q_b, torch.distributions.Normal(0.0, layer.prior_scale)).sum()
    return float((total - bias).detach())


def test_flow_kl_is_consumed_and_the_layer_stays_copyable():
    import copy

    layer = WHVILinear(4, 4, n_flows=2)
    layer(torch.randn(5, 4))
    layer.kl().backward()
    assert layer._kl_terms is None
    copy.deepcopy(layer)


# ----------------------------------------------------------- parameter counts


def _n_parameters(inference, n_features=1):
    X = np.linspace(-1, 2, 16)[:, None].repeat(n_features, 1)
    model = BayesianMLPRegressor(hidden_layer_sizes=(128, 128), inference=with_loop(inference, max_iter=1), random_state=0, noise="homoscedastic")
    model.fit(X, X[:, 0])
    return sum(p.numel() for p in model.module_.parameters())


def test_the_thesis_toy_parameter_counts():
    # Rossi 2022, Fig. 4.5 (2 x 128, 1-D input): G-WHVI 1,541 and NF-WHVI (10 planar flows) 4,141. The count that
    # reproduces both: one g per layer shared by its stacked blocks (the 1 -> 128 layer: 128 blocks of 1 x 1
    # with their own s1, s2 and one scalar g), Gaussian biases (mean and scale), a mean-field last layer and the
    # noise variance: (2 + 2*128 + 2*128) + (2*128 + 2*128 + 2*128) + 2*(128 + 1) + 1 = 1,541, and each planar
    # flow adds 2D + 1 on a D-vector g: 10 * (3 + 257) = 2,600.
    assert _n_parameters(WHVI()) == 1541
    assert _n_parameters(WHVI(n_flows=10)) == 4141
    # MCD "17k": 16,897 weights and biases + noise; mean field "35k": 33,794 means and scales + noise (34k)
    assert _n_parameters(MCDropout()) == 16_898
    assert _n_parameters(MeanFieldVI()) == 33_795


# ------------------------------------------------------------- the estimators

X_TOY = np.random.default_rng(0).uniform(-1, 1, (40, 1))
Y_TOY = np.sin(3 * X_TOY[:, 0]) + 0.1 * np.random.default_rng(1).standard_normal(40)


def test_alias_and_reproducibility():
    assert ALIASES["whvi"] is WHVI
    fits = [
        BayesianMLPRegressor(hidden_layer_sizes=(16,), inference=with_loop(inference, max_iter=20), random_state=3, noise="homoscedastic").fit(X_TOY, Y_TOY)
        for inference in ("whvi", WHVI(), WHVI())
    ]
    predictions = [model.predict(X_TOY, return_std=True) for model in fits]
    for mean, std in predictions[1:]:
        np.testing.assert_array_equal(mean, predictions[0][0])
        np.testing.assert_array_equal(std, predictions[0][1])
    other = BayesianMLPRegressor(hidden_layer_sizes=(16,), inference=WHVI(max_iter=20), random_state=4, noise="homoscedastic")
    assert not np.array_equal(other.fit(X_TOY, Y_TOY).predict(X_TOY), predictions[0][0])


def test_predictive_std_grows_away_from_the_data():
    model = BayesianMLPRegressor(
        hidden_layer_sizes=(32, 32), inference=WHVI(max_iter=150, n_mc_predict=200), random_state=0, noise="homoscedastic"
    ).fit(X_TOY, Y_TOY)
    std = model.predict_uncertainty(np.array([[-4.0], [0.0], [4.0]]))["epistemic_std"]
    assert std[0] > 2 * std[1] and std[2] > 2 * std[1]
    assert np.sqrt(np.mean((model.predict(X_TOY) - Y_TOY) ** 2)) < 0.4


def test_every_layer_whvi_and_the_classifier():
    network = WHVIMLP(3, (8,), 2, last_layer="whvi")
    assert all(isinstance(layer, WHVILinear) for layer in network.layers)
    y = (X_TOY[:, 0] > 0).astype(int)
    model = BayesianMLPClassifier(
        hidden_layer_sizes=(8,), inference=WHVI(last_layer="whvi", n_flows=1, max_iter=60), random_state=0
    ).fit(X_TOY, y)
    assert model.score(X_TOY, y) > 0.8
    assert set(model.inference_diagnostics_) == {"kl"}


def test_grid_search_over_the_number_of_flows():
    search = GridSearchCV(
        BayesianMLPRegressor(hidden_layer_sizes=(8,), inference=WHVI(max_iter=5), random_state=0, noise="homoscedastic"),
        {"inference__n_flows": [0, 1]},
        cv=2,
    ).fit(X_TOY, Y_TOY)
    assert search.best_params_["inference__n_flows"] in (0, 1)
    assert search.best_estimator_.inference_.n_flows == search.best_params_["inference__n_flows"]


def test_warm_start_needs_the_same_structure():
    model = BayesianMLPRegressor(hidden_layer_sizes=(8,), inference=WHVI(max_iter=3), warm_start=True, random_state=0, noise="homoscedastic")
    network = model.fit(X_TOY, Y_TOY).module_["network"]
    assert model.fit(X_TOY, Y_TOY).module_["network"] is network
    model.set_params(inference=WHVI(n_flows=1)).fit(X_TOY, Y_TOY)
    assert model.module_["network"] is not network and model.module_["network"].layers[0].n_flows == 1
