"""Engine modules on tensors: closed forms and Monte-Carlo moments."""

import math

import pytest
import torch

from skbayes.nn import (
    BayesianMLP,
    CategoricalLikelihood,
    DropoutLinear,
    GaussianLikelihood,
    MeanFieldLinear,
    gaussian_log_prob,
    inverse_softplus,
    kl_standard_normal_mvn,
    negative_elbo,
)


def test_inverse_softplus_takes_floats_and_tensors():
    for value in (1e-6, 1e-3, 0.5, 3.0, 40.0):
        raw = inverse_softplus(value)
        assert isinstance(raw, float)
        assert float(torch.nn.functional.softplus(torch.tensor(raw, dtype=torch.float64))) == pytest.approx(value, rel=1e-12)
    t = torch.tensor([1e-6, 0.5, 800.0], dtype=torch.float64)
    torch.testing.assert_close(torch.nn.functional.softplus(inverse_softplus(t)), t)


def test_gaussian_log_prob_matches_torch_distributions():
    g = torch.Generator().manual_seed(0)
    x, mean = torch.randn(20, generator=g, dtype=torch.float64), torch.randn(20, generator=g, dtype=torch.float64)
    var = torch.rand(20, generator=g, dtype=torch.float64) + 0.1
    expected = torch.distributions.Normal(mean, var.sqrt()).log_prob(x)
    torch.testing.assert_close(gaussian_log_prob(x, mean, var), expected)
    torch.testing.assert_close(gaussian_log_prob(x), torch.distributions.Normal(0.0, 1.0).log_prob(x))


def test_kl_standard_normal_mvn_matches_torch_distributions():
    g = torch.Generator().manual_seed(0)
    mean = torch.randn(4, generator=g, dtype=torch.float64)
    tril = torch.tril(torch.randn(4, 4, generator=g, dtype=torch.float64), -1) + torch.diag(torch.rand(4, generator=g, dtype=torch.float64) + 0.5)
    mvn = torch.distributions.MultivariateNormal
    expected = torch.distributions.kl_divergence(mvn(mean, scale_tril=tril), mvn(torch.zeros(4, dtype=torch.float64), scale_tril=torch.eye(4, dtype=torch.float64)))
    torch.testing.assert_close(kl_standard_normal_mvn(mean, tril), expected)


def _layer(cls, **kw):
    return cls(3, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64, **kw)


def test_local_reparameterisation_has_the_moments_of_weight_sampling():
    layer = _layer(MeanFieldLinear, posterior_init_scale=0.3)
    x = torch.tensor([[0.5, -1.0, 2.0]], dtype=torch.float64)
    g = torch.Generator().manual_seed(1)
    local = layer(x.expand(200_000, 3), generator=g).detach()
    weight, bias = layer.sample_parameters(200_000, generator=g)
    global_ = (x @ weight + bias).squeeze(1).detach()
    exact_mean = (x @ layer.weight_mu + layer.bias_mu).detach()[0]
    exact_var = ((x**2) @ layer.weight_sigma**2 + layer.bias_sigma**2).detach()[0]
    for draws in (local, global_):
        torch.testing.assert_close(draws.mean(0), exact_mean, atol=0.01, rtol=0)
        torch.testing.assert_close(draws.var(0), exact_var, rtol=0.02, atol=0)


def test_mean_field_kl_is_the_sum_over_weights_and_biases():
    layer = _layer(MeanFieldLinear, prior_scale=0.7, posterior_init_scale=0.2)
    expected = sum(
        float(torch.distributions.kl_divergence(torch.distributions.Normal(m, s), torch.distributions.Normal(0.0, 0.7)).sum())
        for m, s in ((layer.weight_mu, layer.weight_sigma), (layer.bias_mu, layer.bias_sigma))
    )
    assert float(layer.kl()) == pytest.approx(expected, rel=1e-7)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_mean_field_training_pass_and_kl_match_autograd_of_the_plain_expressions(dtype):
    # The layer's one-node pass and KL (hand-written backward) against autograd
    # through local_reparameterization(x, mu, softplus(rho)^2) and
    # torch.distributions' KL, the same draws: values and gradients agree
    # bit for bit (the same operations in the same order).
    from torch.distributions import Normal, kl_divergence

    from skbayes.nn import local_reparameterization

    layer = MeanFieldLinear(3, 4, prior_scale=0.7, posterior_init_scale=0.2, dtype=dtype,
                            generator=torch.Generator().manual_seed(0))
    x = torch.randn(2, 5, 3, dtype=dtype, generator=torch.Generator().manual_seed(1), requires_grad=True)
    weights = torch.randn(2, 5, 4, dtype=dtype, generator=torch.Generator().manual_seed(2))
    fused = (layer(x, generator=torch.Generator().manual_seed(3)) * weights).sum() + 3.0 * layer.kl()
    fused_grads = torch.autograd.grad(fused, [x, layer.mu, layer.rho])

    var = torch.nn.functional.softplus(layer.rho) ** 2
    out = local_reparameterization(x, layer.mu, var, torch.Generator().manual_seed(3))
    kl = kl_divergence(Normal(layer.mu, torch.nn.functional.softplus(layer.rho)), Normal(0.0, torch.tensor(0.7, dtype=dtype)))
    plain = (out * weights).sum() + 3.0 * kl.sum()
    plain_grads = torch.autograd.grad(plain, [x, layer.mu, layer.rho])
    torch.testing.assert_close(fused, plain, rtol=0, atol=0)
    for a, b in zip(fused_grads, plain_grads):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_dropout_masks_keep_the_stated_fraction_and_rescale():
    layer = _layer(DropoutLinear, dropout_rate=0.25)
    weight, _ = layer.sample_parameters(40_000, generator=torch.Generator().manual_seed(0))
    kept = (weight != 0).double().mean()
    assert float(kept) == pytest.approx(0.75, abs=0.01)
    # kept rows are scaled by 1/(1-p), so the expected weight is the stored one
    torch.testing.assert_close(weight.mean(0), layer.weight.detach(), atol=0.02, rtol=0)


def test_forward_with_evaluates_each_row_independently():
    net = BayesianMLP(3, [8], 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    params = net.sample_parameters(5, generator=torch.Generator().manual_seed(1))
    x = torch.randn(7, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    together = net.forward_with(x, params)
    one_by_one = torch.cat([net.forward_with(x[i : i + 1], params) for i in range(7)], dim=1)
    assert together.shape == (5, 7, 2)
    torch.testing.assert_close(together, one_by_one)


def test_gaussian_likelihood_log_prob():
    lik = GaussianLikelihood(2, noise_std=0.5, dtype=torch.float64)
    y, f = torch.tensor([[1.0, 2.0]], dtype=torch.float64), torch.tensor([[0.0, 2.5]], dtype=torch.float64)
    expected = sum(-0.5 * ((a - b) / 0.5) ** 2 - math.log(0.5) - 0.5 * math.log(2 * math.pi) for a, b in ((1, 0), (2, 2.5)))
    assert float(lik.log_prob(y, f)) == pytest.approx(expected, rel=1e-10)
    assert float(lik.noise_std[0]) == pytest.approx(0.5, rel=1e-10)


def test_categorical_likelihood_broadcasts_over_draws():
    f = torch.randn(4, 6, 3, generator=torch.Generator().manual_seed(0))
    y = torch.tensor([[0.0], [2.0], [1.0], [1.0], [0.0], [2.0]])
    log_p = CategoricalLikelihood().log_prob(y, f)
    assert log_p.shape == (4, 6)
    torch.testing.assert_close(log_p[2, 1], torch.log_softmax(f[2, 1], -1)[2])


def test_negative_elbo_scales_the_kl_by_the_data_size():
    log_lik = torch.tensor([[-1.0, -2.0, -3.0]])
    assert float(negative_elbo(log_lik, torch.tensor(50.0), 100)) == pytest.approx(2.0 + 0.5)


def test_gaussian_kl_matches_the_closed_form():
    from skbayes.nn.layers.mean_field import gaussian_kl

    gen = torch.Generator().manual_seed(0)
    mean = torch.randn(4, 3, generator=gen, dtype=torch.float64)
    std = torch.rand(4, 3, generator=gen, dtype=torch.float64) + 0.1
    s = 0.7
    expected = (math.log(s) - std.log() + (std**2 + mean**2) / (2 * s**2) - 0.5).sum()
    assert torch.allclose(gaussian_kl(mean, std, s), expected)
    assert torch.allclose(gaussian_kl(mean, std, torch.tensor(s, dtype=torch.float64)), expected)


def test_standard_normal_is_the_generators_draws_in_the_dtype_of_like():
    from skbayes.nn.functional import standard_normal

    like = torch.zeros(2, dtype=torch.float64)
    eps = standard_normal((5, 3), like, torch.Generator().manual_seed(3))
    assert eps.dtype == torch.float64 and eps.shape == (5, 3)
    assert torch.equal(eps, torch.randn((5, 3), generator=torch.Generator().manual_seed(3), dtype=torch.float64))


def test_standard_uniform_is_the_generators_draws_in_the_dtype_of_like():
    from skbayes.nn.functional import standard_uniform

    like = torch.zeros(2, dtype=torch.float32)
    u = standard_uniform((4, 6), like, torch.Generator().manual_seed(5))
    assert u.dtype == torch.float32 and u.shape == (4, 6)
    assert torch.equal(u, torch.rand((4, 6), generator=torch.Generator().manual_seed(5), dtype=torch.float32))
    assert float(u.min()) >= 0.0 and float(u.max()) < 1.0
