"""SVGP with several latent functions (n_latent) and the batched natural gradient.

Each batched computation is checked against the same computation done one
latent function at a time with the unbatched module.
"""

import numpy as np
import pytest
import torch

from skbayes.nn import SVGP, NaturalGradient, RBFKernel
from skbayes.nn.divergences import kl_standard_normal_mvn
from skbayes.nn.variational import raw_from_scale_tril, scale_tril_from_raw


def _random_tril(gen, n_latent, m):
    tril = torch.randn(n_latent, m, m, generator=gen, dtype=torch.float64).tril(-1) * 0.3
    return tril + torch.diag_embed(torch.rand(n_latent, m, generator=gen, dtype=torch.float64) + 0.5)


@pytest.fixture
def batched_and_single():
    gen = torch.Generator().manual_seed(0)
    n_latent, m, d = 3, 5, 2
    kernel = RBFKernel(d, length_scale=np.array([0.7, 1.3]), variance=1.5, dtype=torch.float64)
    batched = SVGP(kernel, m, d, n_latent=n_latent, dtype=torch.float64)
    z = torch.randn(m, d, generator=gen, dtype=torch.float64)
    means = torch.randn(n_latent, m, generator=gen, dtype=torch.float64)
    trils = _random_tril(gen, n_latent, m)
    consts = torch.randn(n_latent, generator=gen, dtype=torch.float64)
    with torch.no_grad():
        batched.inducing_points.copy_(z)
        batched.q_mean.copy_(means)
        batched.raw_q_scale_tril.copy_(raw_from_scale_tril(trils))
        batched.mean_constant.copy_(consts)
    singles = []
    for latent in range(n_latent):
        single = SVGP(kernel, m, d, dtype=torch.float64)
        with torch.no_grad():
            single.inducing_points.copy_(z)
            single.q_mean.copy_(means[latent])
            single.raw_q_scale_tril.copy_(raw_from_scale_tril(trils[latent]))
            single.mean_constant.fill_(float(consts[latent]))
        singles.append(single)
    x = torch.randn(7, d, generator=gen, dtype=torch.float64)
    return batched, singles, x


def test_batched_marginals_match_one_latent_at_a_time(batched_and_single):
    batched, singles, x = batched_and_single
    assert batched.n_latent == 3 and singles[0].n_latent is None
    mean, var = batched.predict_f(x)
    assert mean.shape == var.shape == (7, 3)
    mean_full, cov = batched.predict_f(x, full_cov=True)
    assert cov.shape == (3, 7, 7)
    for latent, single in enumerate(singles):
        m1, v1 = single.predict_f(x)
        torch.testing.assert_close(mean[:, latent], m1)
        torch.testing.assert_close(var[:, latent], v1)
        _, c1 = single.predict_f(x, full_cov=True)
        torch.testing.assert_close(cov[latent], c1)
        torch.testing.assert_close(mean_full[:, latent], m1)
    torch.testing.assert_close(batched.kl(), sum(s.kl() for s in singles))


def test_batched_kl_matches_torch_distributions():
    gen = torch.Generator().manual_seed(1)
    means = torch.randn(4, 6, generator=gen, dtype=torch.float64)
    trils = _random_tril(gen, 4, 6)
    prior = torch.distributions.MultivariateNormal(torch.zeros(6, dtype=torch.float64), torch.eye(6, dtype=torch.float64))
    expected = sum(
        torch.distributions.kl_divergence(torch.distributions.MultivariateNormal(m, scale_tril=t), prior)
        for m, t in zip(means, trils)
    )
    torch.testing.assert_close(kl_standard_normal_mvn(means, trils), expected)


def test_batched_natural_gradient_matches_separate_steps():
    gen = torch.Generator().manual_seed(2)
    n_latent, m = 3, 4
    targets = torch.randn(n_latent, m, generator=gen, dtype=torch.float64)
    weights = torch.rand(n_latent, m, generator=gen, dtype=torch.float64) + 0.2

    def loss_of(mean, raw, target, weight):  # a non-quadratic (quartic) expected loss in v plus the KL
        tril = scale_tril_from_raw(raw)
        var = (tril.square()).sum(-1)
        fit = (weight * ((mean - target).square() + var)).sum() + 0.1 * ((mean - target) ** 4).sum()
        return fit + kl_standard_normal_mvn(mean, tril)

    mean_b = torch.nn.Parameter(0.3 * torch.randn(n_latent, m, generator=gen, dtype=torch.float64))
    raw_b = torch.nn.Parameter(raw_from_scale_tril(_random_tril(gen, n_latent, m)))
    singles = [(torch.nn.Parameter(mean_b.detach()[i].clone()), torch.nn.Parameter(raw_b.detach()[i].clone()))
               for i in range(n_latent)]
    ngd_b = NaturalGradient(mean_b, raw_b, lr=0.3)
    ngds = [NaturalGradient(mu, raw, lr=0.3) for mu, raw in singles]
    for _ in range(3):
        ngd_b.zero_grad()
        loss_of(mean_b, raw_b, targets, weights).backward()
        ngd_b.step()
        for i, ((mu, raw), ngd) in enumerate(zip(singles, ngds)):
            ngd.zero_grad()
            loss_of(mu, raw, targets[i], weights[i]).backward()
            ngd.step()
    for i, (mu, raw) in enumerate(singles):
        torch.testing.assert_close(mean_b.detach()[i], mu.detach())
        torch.testing.assert_close(scale_tril_from_raw(raw_b.detach()[i]), scale_tril_from_raw(raw.detach()))


def test_natural_gradient_rejects_mismatched_batch_shapes():
    with pytest.raises(ValueError, match="raw_scale_tril"):
        NaturalGradient(torch.nn.Parameter(torch.zeros(2, 3)), torch.nn.Parameter(torch.zeros(3, 3)))
