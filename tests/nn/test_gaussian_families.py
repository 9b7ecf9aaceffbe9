"""The Gaussian families of black-box VI against closed forms, and the score-function gradient's mean against the
exact gradient of the ELBO of a Gaussian target."""

import numpy as np
import pytest
import torch

from skbayes.nn.bbvi import GaussianFamily, n_family_parameters, score_function_gradient


def _family(name, m=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    family = GaussianFamily(m, name, rank=2, init_loc=torch.randn(m, generator=gen, dtype=torch.float64),
                            init_scale=0.5, generator=gen, dtype=torch.float64)
    with torch.no_grad():  # away from the initial values, so that every parameter matters
        for p in family.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen, dtype=torch.float64))
    return family


@pytest.mark.parametrize("name", ["mean_field", "full_rank", "low_rank"])
def test_draws_log_density_and_kl_match_closed_forms(name):
    family = _family(name)
    q = family.distribution()
    mean, cov = q.mean.detach().numpy(), q.covariance_matrix.detach().numpy() if name != "mean_field" else np.diag(
        q.variance.detach().numpy())
    draws = family.rsample(200_000, torch.Generator().manual_seed(1)).detach().numpy()
    np.testing.assert_allclose(draws.mean(0), mean, atol=0.02)
    np.testing.assert_allclose(np.cov(draws.T), cov, atol=0.03)
    # KL(N(mu, Sigma) || N(0, s^2 I)) = (tr Sigma / s^2 + |mu|^2 / s^2 - m + m log s^2 - log|Sigma|) / 2
    s2, m = 1.7**2, 4
    expected = 0.5 * (np.trace(cov) / s2 + mean @ mean / s2 - m + m * np.log(s2) - np.linalg.slogdet(cov)[1])
    assert float(family.kl(1.7)) == pytest.approx(expected, rel=1e-10)
    assert n_family_parameters(name, 10, 2) == {"mean_field": 20, "full_rank": 65, "low_rank": 40}[name]


@pytest.mark.parametrize("control_variate", [False, True])
@pytest.mark.parametrize("name", ["mean_field", "full_rank"])
def test_score_gradient_is_unbiased_for_a_gaussian_target(name, control_variate):
    # target log p(z) = log N(z | m, S): ELBO(mu, ...) = E_q log N(z | m, S) + H[q], whose gradient in mu is
    # -S^{-1} (mu - m) in closed form
    family = _family(name)
    m_target = torch.tensor([0.5, -1.0, 0.0, 2.0], dtype=torch.float64)
    A = torch.tensor(np.random.RandomState(2).randn(4, 4))
    S = A @ A.T + torch.eye(4, dtype=torch.float64)
    target = torch.distributions.MultivariateNormal(m_target, S)
    expected = -torch.linalg.solve(S, family.loc.detach() - m_target)
    gen = torch.Generator().manual_seed(3)
    estimates = []
    for _ in range(3000):
        z = family.rsample(10, gen).detach()
        gradient, _ = score_function_gradient(family, z, target.log_prob(z), control_variate=control_variate)
        estimates.append(gradient[0])
    estimates = torch.stack(estimates)
    error = estimates.std(0) / np.sqrt(len(estimates))
    assert torch.all((estimates.mean(0) - expected).abs() < 4 * error + 1e-3), (estimates.mean(0), expected, error)
