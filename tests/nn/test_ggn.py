"""The GGN of an MLP in its three structures against autograd's Jacobians, the Laplace posterior it gives against dense
linear algebra, the evidence's maximum against scipy, and the linearised network against torch.func.jvp."""

import numpy as np
import pytest
import torch
from scipy.optimize import minimize_scalar
from scipy.stats import multivariate_normal

from skbayes.nn.ggn import (
    ggn_eigenbases, glm_predictive_variance, laplace_log_evidence, maximize_prior_precision, mlp_jacobian_factors,
)
from skbayes.nn.networks.laplace import LinearizedLaplaceMLP

# torch.func.jvp's first call scripts its decompositions
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")


@pytest.fixture(autouse=True)
def _float64():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


def _mlp(sizes, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(a + 1, b, generator=g) / np.sqrt(a + 1) for a, b in zip(sizes[:-1], sizes[1:])]


def _forward(x, weights, activation):
    act = {"tanh": torch.tanh, "relu": torch.relu}[activation]
    h = x
    for l, w in enumerate(weights):
        h = h @ w[:-1] + w[-1]
        if l < len(weights) - 1:
            h = act(h)
    return h


def _autograd_jacobian(x, weights, activation):
    """J_i of shape (n, k, P): autograd's Jacobian of f with respect to the flattened layers (row-major)."""
    shapes = [w.shape for w in weights]
    sizes = [w.numel() for w in weights]

    def f(flat):
        ws = [p.reshape(s) for p, s in zip(flat.split(sizes), shapes)]
        return _forward(x, ws, activation)

    flat = torch.cat([w.reshape(-1) for w in weights])
    return torch.autograd.functional.jacobian(f, flat)  # (n, k, P)


def _dense_precision(bases, prior, sizes):
    """The posterior precision of each structure as a dense P x P matrix, built from its definition."""
    if len(bases) == 1 and bases[0].eigenvalues.dim() == 1:
        q, lam = bases[0].q_in, bases[0].eigenvalues
        return q @ torch.diag(lam) @ q.T + prior[0] * torch.eye(q.shape[0])
    blocks = []
    for b, d in zip(bases, prior):
        if b.q_in is None:
            blocks.append(torch.diag(b.eigenvalues.reshape(-1)) + d * torch.eye(b.eigenvalues.numel()))
        else:  # (Q_A x Q_G) diag(vec E) (Q_A x Q_G)^T, row-major vec
            q = torch.kron(b.q_in, b.q_out)
            blocks.append(q @ torch.diag(b.eigenvalues.reshape(-1)) @ q.T + d * torch.eye(q.shape[0]))
    return torch.block_diag(*blocks)


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_jacobian_factors_match_autograd(activation):
    x = torch.randn(7, 3, generator=torch.Generator().manual_seed(1))
    weights = _mlp([3, 5, 4, 2])
    f, inputs, grads = mlp_jacobian_factors(x, weights, activation)
    torch.testing.assert_close(f, _forward(x, weights, activation))
    jac = torch.cat([torch.einsum("ia,ijb->ijab", a, g).reshape(7, 2, -1) for a, g in zip(inputs, grads)], -1)
    torch.testing.assert_close(jac, _autograd_jacobian(x, weights, activation))


def test_ggn_structures_against_the_exact_ggn():
    x = torch.randn(9, 3, generator=torch.Generator().manual_seed(2))
    weights = _mlp([3, 4, 2])
    lam = torch.tensor([2.0, 0.5])
    jac = _autograd_jacobian(x, weights, "tanh")
    exact = torch.einsum("ijp,j,ijq->pq", jac, lam, jac)  # sum_i J_i^T Lambda J_i
    _, inputs, grads = mlp_jacobian_factors(x, weights, "tanh")
    zero = torch.zeros(2)
    sizes = [w.numel() for w in weights]
    full = _dense_precision(ggn_eigenbases([(inputs, grads)], lam, "full"), zero[:1], sizes)
    torch.testing.assert_close(full, exact)
    diag = _dense_precision(ggn_eigenbases([(inputs, grads)], lam, "diag"), zero, sizes)
    torch.testing.assert_close(torch.diagonal(diag), torch.diagonal(exact))
    # rows in two blocks give the same sums
    halves = [([a[:4] for a in inputs], [g[:4] for g in grads]), ([a[4:] for a in inputs], [g[4:] for g in grads])]
    torch.testing.assert_close(_dense_precision(ggn_eigenbases(halves, lam, "full"), zero[:1], sizes), exact)
    # KFAC is exact for a single row, block by block
    one = ([a[:1] for a in inputs], [g[:1] for g in grads])
    exact_one = torch.einsum("ijp,j,ijq->pq", jac[:1], lam, jac[:1])
    kron = _dense_precision(ggn_eigenbases([one], lam, "kron"), zero, sizes)
    block = torch.block_diag(exact_one[:sizes[0], :sizes[0]], exact_one[sizes[0]:, sizes[0]:])
    torch.testing.assert_close(kron, block)


def test_kfac_is_exact_for_a_linear_model():
    x = torch.randn(30, 4, generator=torch.Generator().manual_seed(3))
    weights = _mlp([4, 3])
    lam = torch.tensor([1.0, 4.0, 0.25])
    jac = _autograd_jacobian(x, weights, "relu")
    exact = torch.einsum("ijp,j,ijq->pq", jac, lam, jac)
    _, inputs, grads = mlp_jacobian_factors(x, weights, "relu")
    kron = _dense_precision(ggn_eigenbases([(inputs, grads)], lam, "kron"), torch.zeros(1), None)
    torch.testing.assert_close(kron, exact)


@pytest.mark.parametrize("hessian", ["diag", "kron", "full"])
def test_predictive_variance_and_draws_match_dense_algebra(hessian):
    gen = torch.Generator().manual_seed(4)
    x, x_new = torch.randn(25, 2, generator=gen), torch.randn(6, 2, generator=gen)
    weights = _mlp([2, 6, 1], seed=5)
    _, inputs, grads = mlp_jacobian_factors(x, weights, "tanh")
    bases = ggn_eigenbases([(inputs, grads)], torch.tensor([3.0]), hessian)
    prior = torch.tensor([0.7] if hessian == "full" else [0.7, 1.3])
    sizes = [w.numel() for w in weights]
    cov = torch.linalg.inv(_dense_precision(bases, prior, sizes))
    jac = _autograd_jacobian(x_new, weights, "tanh")[:, 0]  # (n, P)
    expected = torch.einsum("ip,pq,iq->i", jac, cov, jac)
    _, inputs_new, grads_new = mlp_jacobian_factors(x_new, weights, "tanh")
    torch.testing.assert_close(glm_predictive_variance(inputs_new, grads_new, bases, prior)[:, 0], expected)
    # the network's draws: theta - theta_* with covariance cov, and f_lin's spread the GLM variance
    network = LinearizedLaplaceMLP(weights, bases, prior, "tanh")
    params = network.sample_parameters(100_000, torch.Generator().manual_seed(0))
    flat = torch.cat([torch.cat([dw, db], 1).reshape(dw.shape[0], -1) for dw, db in params], 1)
    torch.testing.assert_close(flat.T @ flat / flat.shape[0], cov, rtol=0.05, atol=0.03 * float(cov.diag().max()))
    f_lin = network.forward_with(x_new, [(dw[:20000], db[:20000]) for dw, db in params])
    mean, var = network.predictive_moments(x_new)
    torch.testing.assert_close(f_lin.var(0)[:, 0], var[:, 0], rtol=0.05, atol=1e-8)
    torch.testing.assert_close(f_lin.mean(0), mean, rtol=0, atol=4 * float(var.max().sqrt()) / np.sqrt(20000))


def test_tangent_pass_is_the_jacobian_vector_product():
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(8, 3, generator=gen)
    weights = _mlp([3, 5, 5, 2], seed=7)
    _, inputs, grads = mlp_jacobian_factors(x, weights, "tanh")
    network = LinearizedLaplaceMLP(weights, ggn_eigenbases([(inputs, grads)], torch.ones(2), "kron"),
                                   torch.ones(3), "tanh")
    params = network.sample_parameters(3, gen)
    for s in range(3):
        tangents = [torch.cat([dw[s], db[s]]) for dw, db in params]
        f, jvp = torch.func.jvp(lambda *ws: _forward(x, list(ws), "tanh"), tuple(weights), tuple(tangents))
        torch.testing.assert_close(network.forward_with(x, [(dw[s:s + 1], db[s:s + 1]) for dw, db in params])[0],
                                   f + jvp)


def test_prior_precision_maximises_the_evidence_per_layer():
    x = torch.randn(40, 2, generator=torch.Generator().manual_seed(8))
    weights = _mlp([2, 8, 1], seed=9)
    _, inputs, grads = mlp_jacobian_factors(x, weights, "tanh")
    bases = ggn_eigenbases([(inputs, grads)], torch.tensor([5.0]), "kron")
    deltas, _ = maximize_prior_precision(weights, bases, torch.ones(2))
    for l in range(2):
        def neg(log_d, l=l):
            d = deltas.clone()
            d[l] = float(np.exp(log_d))
            return -float(laplace_log_evidence(torch.tensor(0.0), weights, bases, d))
        best = minimize_scalar(neg, bounds=(-15, 15), method="bounded", options={"xatol": 1e-10})
        assert float(deltas[l]) == pytest.approx(np.exp(best.x), rel=1e-4)


def test_evidence_of_a_linear_model_is_the_exact_marginal_likelihood():
    # at the exact posterior mean the Laplace evidence of Bayesian linear regression is exact (Bishop 2006, eq. 3.86)
    gen = torch.Generator().manual_seed(10)
    x = torch.randn(50, 3, generator=gen)
    y = x @ torch.tensor([1.0, -1.0, 0.5]) + 0.3 + 0.5 * torch.randn(50, generator=gen)
    noise_var, delta = 0.25, 2.0
    phi = torch.cat([x, torch.ones(50, 1)], 1)
    mean = torch.linalg.solve(phi.T @ phi / noise_var + delta * torch.eye(4), phi.T @ y / noise_var)
    weights = [mean[:, None]]
    _, inputs, grads = mlp_jacobian_factors(x, weights)
    log_lik = torch.distributions.Normal(phi @ mean, noise_var**0.5).log_prob(y).sum()
    for hessian in ("kron", "full"):
        bases = ggn_eigenbases([(inputs, grads)], torch.tensor([1 / noise_var]), hessian)
        evidence = laplace_log_evidence(log_lik, weights, bases, torch.tensor([delta]))
        exact = multivariate_normal(np.zeros(50), (phi @ phi.T / delta + noise_var * torch.eye(50)).numpy()).logpdf(y)
        assert float(evidence) == pytest.approx(exact, rel=1e-10)
