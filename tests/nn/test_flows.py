"""Normalising flows: log-determinants against autograd Jacobians, invertibility, and densities by quadrature."""

import math

import numpy as np
import pytest
import torch
from scipy.integrate import quad
from scipy.optimize import brentq

from skbayes.nn.flows import AffineCoupling, FlowSequence, PlanarFlow, make_flow


def _randomised(flow, seed, scale=1.0):
    """The flow with every parameter redrawn (the coupling starts as the identity)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in flow.parameters():
            p.copy_(scale * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    return flow


def _autograd_log_det(flow, z):
    jac = torch.autograd.functional.jacobian(lambda v: flow(v.unsqueeze(0))[0].squeeze(0), z)
    return torch.linalg.slogdet(jac)[1]


@pytest.mark.parametrize(
    "build",
    [
        lambda: PlanarFlow(5, dtype=torch.float64),
        lambda: AffineCoupling(5, 7, parity=0, dtype=torch.float64),
        lambda: AffineCoupling(5, 7, parity=1, dtype=torch.float64),
        lambda: make_flow("planar", 4, 3, dtype=torch.float64),
        lambda: make_flow("realnvp", 4, 3, hidden_size=6, dtype=torch.float64),
    ],
)
def test_log_det_matches_the_autograd_jacobian(build):
    flow = _randomised(build(), seed=0)
    z = torch.randn(6, flow(torch.zeros(1, _dim(flow), dtype=torch.float64))[0].shape[-1], dtype=torch.float64,
                    generator=torch.Generator().manual_seed(1))
    _, log_det = flow(z)
    assert log_det.shape == (6,)
    expected = torch.stack([_autograd_log_det(flow, row) for row in z])
    torch.testing.assert_close(log_det, expected, rtol=1e-9, atol=1e-9)


def _dim(flow):
    return flow.flows[0].dim if isinstance(flow, FlowSequence) else flow.dim


def test_planar_constraint_keeps_the_map_invertible():
    # u pointing against w: unconstrained, 1 + u^T w h' crosses zero and the map folds.
    flow = PlanarFlow(2, dtype=torch.float64)
    with torch.no_grad():
        flow.w.copy_(torch.tensor([3.0, 0.0]))
        flow.u.copy_(torch.tensor([-5.0, 0.0]))
        flow.b.zero_()
    assert float((flow.w @ flow.u_hat()).detach()) >= -1.0
    # monotone along w: the 1-D section is strictly increasing, so f is injective there
    t = torch.linspace(-4, 4, 2001, dtype=torch.float64)
    x = flow(torch.stack([t, torch.zeros_like(t)], dim=-1))[0][:, 0]
    assert bool((x.diff() > 0).all())


def test_coupling_inverse_undoes_forward_and_starts_as_identity():
    flow = make_flow("realnvp", 5, 4, hidden_size=8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    z = torch.randn(10, 5, dtype=torch.float64)
    x, log_det = flow(z)
    torch.testing.assert_close(x, z)  # zero-initialised output layers
    torch.testing.assert_close(log_det, torch.zeros(10, dtype=torch.float64))
    _randomised(flow, seed=3)
    x, log_det = flow(z)
    z_back, inv_log_det = flow.inverse(x)
    torch.testing.assert_close(z_back, z, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(inv_log_det, -log_det)
    with pytest.raises(NotImplementedError, match="PlanarFlow"):
        make_flow("planar", 3, 1).inverse(torch.zeros(1, 3))


@pytest.mark.parametrize("kind", ["planar", "realnvp"])
def test_transformed_density_integrates_to_one_and_matches_draws(kind):
    # 1-D: the density the flow's log-determinant defines integrates to one over x, and its mean
    # (by quadrature over the base density) matches the mean of pushed-forward draws.
    flow = _randomised(make_flow(kind, 1, 3, hidden_size=4, dtype=torch.float64), seed=5, scale=0.8)

    def f(z):
        with torch.no_grad():
            x, log_det = flow(torch.tensor([[z]], dtype=torch.float64))
        return float(x), float(log_det)

    def density(x):  # q(x) = N(f^{-1}(x)) / |f'(f^{-1}(x))|, the inverse found by bisection (f is monotone)
        z = brentq(lambda v: f(v)[0] - x, -40, 40, xtol=1e-13)
        return math.exp(-0.5 * z * z - 0.5 * math.log(2 * math.pi) - f(z)[1])

    lo, hi = f(-9.0)[0], f(9.0)[0]
    total, _ = quad(density, lo, hi, limit=400)
    assert abs(total - 1.0) < 1e-6
    # the mean of x by quadrature against Monte-Carlo draws
    mean_quad, _ = quad(lambda z: f(z)[0] * math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi), -12, 12, limit=200)
    z = torch.randn(200_000, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        x = flow(z)[0]
    assert abs(float(x.mean()) - mean_quad) < 4 * float(x.std()) / math.sqrt(len(x))
    # the log-density at x by a finite-difference derivative of the map
    z0, h = 0.3, 1e-6
    slope = (f(z0 + h)[0] - f(z0 - h)[0]) / (2 * h)
    assert np.isclose(f(z0)[1], math.log(abs(slope)), atol=1e-6)


def test_make_flow_validates_and_zero_flows_is_identity():
    flow = make_flow("planar", 3, 0)
    z = torch.randn(4, 3)
    x, log_det = flow(z)
    assert torch.equal(x, z) and torch.equal(log_det, torch.zeros(4))
    with pytest.raises(ValueError, match="Unknown flow"):
        make_flow("radial", 3, 1)
