"""The collapsed bound of the sparse GP and ``SparseVariational(optimizer="collapsed")`` against the exact GP.

The closed forms: with Z = X the collapsed bound is the exact log marginal
likelihood and the optimal q(u) the exact posterior of f(X); for any Z it is
the uncollapsed objective at the optimal q, and its gradient that objective's
gradient there (the envelope theorem). Then the regressor with as many
inducing points as rows against scikit-learn's exact GP (an independent
computation) on small sets of examples/benchmarks/sparse_gp_vs_exact.py.
"""

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning

from skbayes import SparseGPRegressor
from skbayes.inference import SparseVariational
from skbayes.nn import SVGP, GaussianLikelihood
from skbayes.nn.gp.kernels import RBFKernel
from skbayes.nn.gp.svgp import collapsed_bound

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "benchmarks"))
import sparse_gp_vs_exact as bench  # noqa: E402

DT = torch.float64


def _problem(n=25, m=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 2, generator=g, dtype=DT)
    y = torch.sin(2 * x[:, 0]) + x[:, 1] + 0.1 * torch.randn(n, generator=g, dtype=DT)
    kernel = RBFKernel(2, length_scale=[0.8, 1.4], variance=1.5, dtype=DT)
    gp = SVGP(kernel, n if m is None else m, 2, jitter=1e-12, dtype=DT)
    with torch.no_grad():
        gp.inducing_points.copy_(x if m is None else x[:m] + 0.05)
        gp.mean_constant.fill_(0.3)
    return x, y, gp, GaussianLikelihood(1, 0.2, dtype=DT)


def _exact(x, y, gp, noise_var):
    k = gp.kernel(x, x).detach()
    return k, k + noise_var * torch.eye(len(x), dtype=DT), y - gp.mean_constant.detach()


@pytest.mark.parametrize("objective", ["vfe", "fitc"])
def test_collapsed_bound_with_z_at_x_is_the_exact_log_marginal_likelihood(objective):
    x, y, gp, likelihood = _problem()
    noise_var = float(likelihood.noise_std[0].detach()) ** 2
    _, cov, residual = _exact(x, y, gp, noise_var)
    exact = torch.distributions.MultivariateNormal(torch.zeros(len(x), dtype=DT), cov).log_prob(residual)
    with torch.no_grad():
        a_t = gp.whitened_cross(x, gp.chol_zz()).T
        bound = collapsed_bound(a_t, residual, gp.kernel.diag(x), noise_var, objective)
    np.testing.assert_allclose(float(bound), float(exact), rtol=1e-8)


def test_optimal_q_with_z_at_x_is_the_exact_posterior():
    x, y, gp, likelihood = _problem()
    noise_var = float(likelihood.noise_std[0].detach()) ** 2
    k, cov, residual = _exact(x, y, gp, noise_var)
    gp.set_optimal_q_(x, y, noise_var)
    with torch.no_grad():
        chol_zz = gp.chol_zz()
        mean_u = chol_zz @ gp.q_mean + gp.mean_constant  # u = L_zz v + c
        scale_u = chol_zz @ gp.q_scale_tril
    solve = torch.linalg.solve(cov, torch.cat([residual[:, None], k], 1))
    np.testing.assert_allclose(mean_u.numpy(), (k @ solve[:, 0] + gp.mean_constant).detach().numpy(), atol=1e-8)
    np.testing.assert_allclose((scale_u @ scale_u.T).numpy(), (k - k @ solve[:, 1:]).numpy(), atol=1e-8)


@pytest.mark.parametrize("objective", ["vfe", "fitc"])
def test_collapsed_loss_is_the_loss_at_the_optimal_q_with_its_gradient(objective):
    x, y, gp, likelihood = _problem(n=30, m=8)
    gp.set_optimal_q_(x, y, likelihood.noise_std[0].detach() ** 2, objective=objective)
    params = [gp.inducing_points, gp.mean_constant, *gp.kernel.parameters(), *likelihood.parameters()]
    collapsed = gp.collapsed_loss(x, y, likelihood.noise_std[0] ** 2, objective)
    uncollapsed = gp.loss(x, y, likelihood, len(x), objective)
    np.testing.assert_allclose(float(collapsed), float(uncollapsed), rtol=1e-10)
    for g_c, g_u in zip(torch.autograd.grad(collapsed, params), torch.autograd.grad(uncollapsed, params)):
        np.testing.assert_allclose(g_c.numpy(), g_u.numpy(), rtol=1e-6, atol=1e-9)  # envelope theorem
    # and a q away from the optimum has a larger loss
    with torch.no_grad():
        gp.q_mean.add_(0.1)
    assert float(gp.loss(x, y, likelihood, len(x), objective)) > float(collapsed)


def test_collapsed_bound_rejects_an_unknown_objective():
    x, y, gp, _ = _problem(n=5)
    with pytest.raises(ValueError, match="objective"):
        collapsed_bound(gp.whitened_cross(x, gp.chol_zz()).T, y, gp.kernel.diag(x), 0.1, "elbo")


# Nearly noise-free sets, where Adam on q(u) (the default) ends 0.16-0.32 nats below the exact GP
# (examples/benchmarks/results/sparse_gp/sparse_gp_vs_exact_*.json), and a 1-D set with a gap.
SETS = {"sines5d": lambda: bench.sines5d(n=150, seed=1), "gap": lambda: bench.gap(n=60)}


@pytest.mark.parametrize("name", sorted(SETS))
def test_collapsed_fit_with_every_row_inducing_is_within_005_nats_of_the_exact_gp(name):
    X_train, X_test, y_train, y_test = SETS[name]()
    exact = bench.exact_lpd(bench.exact_gp(X_train, y_train, restarts=1), X_test, y_test)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = SparseGPRegressor(n_inducing=len(X_train), random_state=0,
                                  inference=SparseVariational(optimizer="collapsed")).fit(X_train, y_train)
    assert model.log_predictive_density(X_test, y_test).mean() >= exact - 0.05


def test_collapsed_falls_back_to_the_uncollapsed_bound_for_minibatches_and_student_t():
    rng = np.random.RandomState(0)
    X = rng.randn(40, 2)
    y = np.sin(X[:, 0]) + 0.1 * rng.randn(40)
    inference = SparseVariational(optimizer="collapsed", max_iter=2)
    full = SparseGPRegressor(n_inducing=10, inference=inference, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        full.fit(X, y)
        assert full._fit_loss(40) is not None
        for model in (SparseGPRegressor(n_inducing=10, inference=inference, batch_size=16, random_state=0),
                      SparseGPRegressor(n_inducing=10, inference=inference, noise="student_t", random_state=0),
                      SparseGPRegressor(n_inducing=10, inference=SparseVariational(max_iter=2), random_state=0)):
            model.fit(X, y)
            assert model._fit_loss(40) is None
            assert np.isfinite(model.predict(X)).all()
