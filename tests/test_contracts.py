"""One protocol, checked the same way for every layer class and every optimiser of skbayes.nn.

Layers: the shared prediction path (weights drawn once and shared by the rows,
``sample_parameters`` + ``forward_with_parameters``) and the training path
(fresh noise per row, ``forward``) must describe the same distribution of a
row's output; the mean pass must be the mean of the draws; draws must be
reproducible from a seeded generator; ``kl()`` must be a finite, non-negative
scalar whose gradient reaches the trained parameters. Each expectation is
checked against a Monte-Carlo estimate from the *other* path, not against the
expression the code uses.

Optimisers: a step without gradients changes nothing; ``step(closure)``
returns the closure's loss; ``state_dict``/``load_state_dict`` let a fresh
optimiser continue exactly where the first one was (what ``partial_fit``
relies on).
"""

import copy

import pytest
import torch

from skbayes.nn import (
    SGHMC,
    BayesianMLP,
    DropoutLinear,
    GaussianLikelihood,
    MeanFieldLinear,
    NaturalGradient,
    OptimizerChain,
    PBPLinear,
    PBPNetwork,
    PBPOptimizer,
    StackedLinear,
    Vadam,
    forward_with_parameters,
    perturbed_nll,
)

DTYPE = torch.float64


def _generator(seed):
    return torch.Generator().manual_seed(seed)


LAYERS = {
    "MeanFieldLinear": lambda: MeanFieldLinear(3, 4, prior_scale=0.7, posterior_init_scale=0.3, generator=_generator(0), dtype=DTYPE),
    "DropoutLinear": lambda: DropoutLinear(3, 4, dropout_rate=0.3, prior_scale=0.7, generator=_generator(0), dtype=DTYPE),
    "PBPLinear": lambda: PBPLinear(3, 4, generator=_generator(0), dtype=DTYPE),
}


@pytest.fixture(params=sorted(LAYERS))
def layer(request):
    return LAYERS[request.param]()


def test_draws_have_the_documented_shapes_and_are_reproducible(layer):
    weight, bias = layer.sample_parameters(5, _generator(1))
    assert weight.shape == (5, 3, 4) and bias.shape == (5, 1, 4)
    again, _ = layer.sample_parameters(5, _generator(1))
    other, _ = layer.sample_parameters(5, _generator(2))
    torch.testing.assert_close(weight, again, rtol=0, atol=0)
    assert not torch.equal(weight, other)


def test_the_mean_pass_is_the_mean_of_the_draws(layer):
    x = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.2, -0.3]], dtype=DTYPE)
    draws = forward_with_parameters(x, [layer.sample_parameters(40000, _generator(3))])  # (S, 2, 4)
    mean, sem = draws.mean(0), draws.std(0) / 40000**0.5
    with torch.no_grad():
        exact = layer(x, sample=False)
    assert torch.all((mean - exact).abs() <= 5 * sem + 1e-12)


def test_per_row_noise_and_shared_draws_give_the_same_distribution_of_a_row(layer):
    # Training (local reparameterisation / per-row masks) and prediction (one weight
    # draw shared by the rows) must agree on the marginal distribution of each row.
    x = torch.tensor([[0.5, -1.0, 2.0]], dtype=DTYPE)
    n = 40000
    with torch.no_grad():
        per_row = layer(x.expand(n, 3), generator=_generator(4))  # (n, 4): one draw per row
    shared = forward_with_parameters(x, [layer.sample_parameters(n, _generator(5))])[:, 0]  # (n, 4)
    torch.testing.assert_close(per_row.var(0), shared.var(0), rtol=0.05, atol=1e-10)
    torch.testing.assert_close(per_row.mean(0), shared.mean(0), rtol=0, atol=5 * float(shared.detach().std(0).max()) / n**0.5)


def test_kl_is_a_finite_non_negative_scalar_with_gradients(layer):
    kl = layer.kl()
    assert kl.dim() == 0 and torch.isfinite(kl) and kl >= 0
    kl.backward()
    trained = [p for p in layer.parameters() if p.requires_grad]
    assert trained and all(p.grad is not None and torch.isfinite(p.grad).all() for p in trained)


def test_mean_field_kl_matches_a_monte_carlo_estimate():
    layer = LAYERS["MeanFieldLinear"]()
    weight, bias = layer.sample_parameters(200000, _generator(6))
    w = torch.cat([weight, bias], dim=1)  # (S, in + 1, out), the layer's layout
    q = torch.distributions.Normal(layer.mu.detach(), torch.nn.functional.softplus(layer.rho.detach()))
    p = torch.distributions.Normal(0.0, 0.7)
    estimate = (q.log_prob(w) - p.log_prob(w)).sum((1, 2))
    assert abs(float(estimate.mean() - layer.kl())) < 5 * float(estimate.std()) / 200000**0.5


def test_dropout_penalty_is_the_kl_condition_by_hand():
    # Gal 2016, eq. 3.13 with inverted dropout: l^2 / (2 (1 - p)) ||W||^2 + l^2 / 2 ||b||^2, l = 1 / prior_scale.
    layer = DropoutLinear(3, 4, dropout_rate=0.2, prior_scale=0.5, dtype=DTYPE)
    with torch.no_grad():
        layer.weight.fill_(1.0)
        layer.bias.fill_(2.0)
    # l^2 = 4: 4 / 1.6 * 12 weights of 1 + 4 / 2 * 4 biases of 4 = 30 + 32
    assert float(layer.kl()) == pytest.approx(62.0)


def test_stacked_layer_applies_each_members_own_map():
    layer = StackedLinear(3, 2, 4, generator=_generator(0), dtype=DTYPE)
    h = torch.randn(3, 5, 2, generator=_generator(1), dtype=DTYPE)
    out = layer(h)
    weight, bias = layer.parameters_of()
    for m in range(3):
        torch.testing.assert_close(out[m], h[m] @ weight[m] + bias[m])
    picked, _ = layer.parameters_of(torch.tensor([2, 0]))
    torch.testing.assert_close(picked, weight[[2, 0]])


# --------------------------------------------------------------------------- optimisers
def _quadratic(params):
    return sum(((p - 1.0) ** 2).sum() for p in params)


# Each factory returns (optimizer, parameters, loss function or None, generators used).
def _sghmc():
    params = [torch.nn.Parameter(torch.randn(3, 2, generator=_generator(0), dtype=DTYPE))]
    generator = _generator(1)
    return SGHMC(params, lr=1e-2, n_data=20, scale_adapted=True, n_adapt_steps=5, generator=generator), params, None, [generator]


def _vadam():
    network = BayesianMLP(2, [3], 1, generator=_generator(0), dtype=DTYPE)
    likelihood = GaussianLikelihood(1, 0.5, learn_noise=False, dtype=DTYPE)
    x = torch.randn(8, 2, generator=_generator(1), dtype=DTYPE)
    y = torch.randn(8, 1, generator=_generator(2), dtype=DTYPE)
    generator = _generator(3)

    def loss():
        return perturbed_nll(network, likelihood, x, y, 1, generator)

    return Vadam(network, n_data=8), [layer.mu for layer in network.layers], loss, [generator]


def _natural_gradient():
    mean = torch.nn.Parameter(torch.zeros(2, dtype=DTYPE))
    raw = torch.nn.Parameter(torch.eye(2, dtype=DTYPE))
    return NaturalGradient(mean, raw, lr=0.5), [mean, raw], None, []


def _chain():
    a = [torch.nn.Parameter(torch.zeros(2, dtype=DTYPE))]
    b = [torch.nn.Parameter(torch.ones(3, dtype=DTYPE))]
    generator = _generator(4)
    return OptimizerChain(torch.optim.Adam(a, lr=0.1), SGHMC(b, lr=1e-2, n_data=5, generator=generator)), a + b, None, [generator]


OPTIMIZERS = {"SGHMC": _sghmc, "Vadam": _vadam, "NaturalGradient": _natural_gradient, "OptimizerChain": _chain}


@pytest.fixture(params=sorted(OPTIMIZERS))
def optimizer_case(request):
    return request.param, OPTIMIZERS[request.param]()


def _backward(params, loss_fn):
    loss = loss_fn() if loss_fn is not None else _quadratic(params)
    loss.backward()
    return loss


def test_a_step_without_gradients_changes_nothing(optimizer_case):
    _, (optimizer, params, _, _) = optimizer_case
    before = [p.detach().clone() for p in params]
    optimizer.zero_grad()
    optimizer.step()
    for p, old in zip(params, before):
        torch.testing.assert_close(p.detach(), old, rtol=0, atol=0)


def test_step_returns_the_closure_loss(optimizer_case):
    _, (optimizer, params, loss_fn, _) = optimizer_case

    def closure():
        optimizer.zero_grad()
        return _backward(params, loss_fn)

    loss = optimizer.step(closure)
    assert torch.is_tensor(loss) and loss.dim() == 0


def test_a_fresh_optimizer_continues_from_the_state_dict(optimizer_case):
    # Two steps, then the state is copied into a second optimiser over a copy of the
    # parameters; the third step must be identical in both.
    name, (optimizer, params, loss_fn, generators) = optimizer_case
    for _ in range(2):
        optimizer.zero_grad()
        _backward(params, loss_fn)
        optimizer.step()
    twin_optimizer, twin_params, twin_loss_fn, twin_generators = OPTIMIZERS[name]()
    with torch.no_grad():
        for p, q in zip(params, twin_params):
            q.copy_(p)
    for generator, twin in zip(generators, twin_generators):
        twin.set_state(generator.get_state())
    twin_optimizer.load_state_dict(copy.deepcopy(optimizer.state_dict()))
    for opt, ps, fn in ((optimizer, params, loss_fn), (twin_optimizer, twin_params, twin_loss_fn)):
        opt.zero_grad()
        _backward(ps, fn)
        opt.step()
    for p, q in zip(params, twin_params):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=0, atol=0)


def test_the_adf_optimizer_follows_the_same_protocol():
    # PBPOptimizer.step takes the row moments of its minibatch as well.
    network = PBPNetwork(2, [3], 1, generator=_generator(0), dtype=DTYPE)
    optimizer = PBPOptimizer(network)
    x = torch.randn(4, 2, generator=_generator(1), dtype=DTYPE)
    y = torch.randn(4, 1, generator=_generator(2), dtype=DTYPE)
    before = [p.detach().clone() for p in network.parameters()]
    optimizer.zero_grad()
    _, rows = network.log_z(x, y)
    optimizer.step(rows)  # no backward: no gradients, no change of q(w)
    for p, old in zip(network.parameters(), before):
        torch.testing.assert_close(p.detach(), old, rtol=0, atol=0)

    def closure():
        optimizer.zero_grad()
        log_z, _ = network.log_z(x, y)
        loss = -log_z.mean()
        loss.backward()
        return loss

    loss = optimizer.step(rows, closure)
    assert torch.is_tensor(loss) and loss.dim() == 0
    assert any(not torch.equal(p.detach(), old) for p, old in zip(network.parameters(), before))
