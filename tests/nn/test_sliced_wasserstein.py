"""The sliced Wasserstein distance against closed forms for Gaussians, and the DSW prior fit lowering it."""

import numpy as np
import pytest
import torch

from skbayes.nn import LayerGaussianPrior
from skbayes.nn.networks.mlp import forward_with_parameters
from skbayes.nn.priors import SlicePushforward, distributional_sliced_wasserstein, fit_dsw_prior, sliced_wasserstein


def test_one_dimensional_gaussians():
    # W_2(N(0, 1), N(1, 2^2)) = sqrt((0 - 1)^2 + (1 - 2)^2) (Dowson & Landau 1982)
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(200_000, 1, generator=gen, dtype=torch.float64)
    b = 1.0 + 2.0 * torch.randn(200_000, 1, generator=gen, dtype=torch.float64)
    one = torch.ones(1, 1, dtype=torch.float64)
    assert float(sliced_wasserstein(a, b, one)) == pytest.approx(np.sqrt(2.0), rel=0.01)


def test_shifted_isotropic_gaussians():
    # along a unit direction u the two differ by a shift u^T m: SW_2^2 = E_u (u^T m)^2 = |m|^2 / D
    gen = torch.Generator().manual_seed(1)
    D, m = 5, torch.tensor([1.0, -2.0, 0.5, 0.0, 1.5], dtype=torch.float64)
    a = torch.randn(50_000, D, generator=gen, dtype=torch.float64)
    b = torch.randn(50_000, D, generator=gen, dtype=torch.float64) + m
    directions = torch.randn(2000, D, generator=gen, dtype=torch.float64)
    directions = directions / directions.norm(dim=1, keepdim=True)
    assert float(sliced_wasserstein(a, b, directions)) == pytest.approx(float(m.norm()) / np.sqrt(D), rel=0.03)
    # the push-forward starts at the identity and its slices are unit vectors
    push = SlicePushforward(D, dtype=torch.float64)
    torch.testing.assert_close(push(directions), directions)
    objective, distance = distributional_sliced_wasserstein(a[:1000], b[:1000], push, 50, gen, penalty=0.0)
    assert float(objective) == pytest.approx(float(distance))


def test_fit_lowers_the_distance_to_the_data():
    # targets y = sin(3x) + noise in R^1 against a prior whose initial functions are far too flat
    gen = torch.Generator().manual_seed(2)
    X = torch.rand(256, 1, generator=gen, dtype=torch.float64) * 4 - 2
    Y = 3.0 * torch.sin(3 * X) + 0.1 * torch.randn(256, 1, generator=gen, dtype=torch.float64)
    prior = LayerGaussianPrior([1, 20, 1], weight_scale=0.05, bias_scale=0.05, dtype=torch.float64)

    def draw_y(f, generator):
        return f + 0.1 * torch.randn(f.shape, generator=generator, dtype=f.dtype)

    def distance():
        with torch.no_grad():
            f = forward_with_parameters(X, prior.sample_parameters(64, torch.Generator().manual_seed(3)), "tanh")
            model = draw_y(f, torch.Generator().manual_seed(4)).reshape(-1, 1)
            data = Y[torch.randint(256, (model.shape[0],), generator=torch.Generator().manual_seed(5))]
            return float(sliced_wasserstein(model, data, torch.ones(1, 1, dtype=torch.float64)))

    before = distance()
    trace = fit_dsw_prior(prior, X, Y, draw_y, activation="tanh", max_iter=150, generator=gen)
    after = distance()
    assert after < 0.5 * before, (before, after)
    assert np.mean(trace[-20:]) < np.mean(trace[:20])
