"""The collapsed bound of the sparse GP, and the default fit (L-BFGS on it) against the exact GP.

The closed forms: with Z = X the collapsed bound is the exact log marginal
likelihood and the optimal q(u) the exact posterior of f(X); for any Z it is
the uncollapsed objective at the optimal q, and its gradient that objective's
gradient there (the envelope theorem). Then the regressor at its defaults
(``SparseVariational(optimizer="auto")``: L-BFGS on that bound for a
full-batch Gaussian fit) with as many inducing points as rows against
scikit-learn's exact GP (an independent computation) on small sets of
examples/benchmarks/sparse_gp_vs_exact.py, where it applies and where not.
"""

import pickle
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning

from skbayes import SparseGPRegressor
from skbayes._training import fit_loop
from skbayes.gaussian_process._sparse_gp import _StopWhenConverged
from skbayes.inference import SparseVariational
from skbayes.nn import SVGP, GaussianLikelihood, LoopLBFGS
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
    np.testing.assert_allclose(float(collapsed.detach()), float(uncollapsed.detach()), rtol=1e-10)
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


# Small sets of different kinds (examples/benchmarks/sparse_gp_vs_exact.py): nearly noise-free and smooth in 5-D,
# where Adam on q(u) ended 0.16-0.36 nats below the exact GP; 1-D with a gap; noisy 2-D, where Adam on the
# collapsed bound ended 0.53 below; nearly linear in 3-D, with long length-scales.
SETS = {"sines5d": lambda: bench.sines5d(n=150, seed=1), "gap": lambda: bench.gap(n=60),
        "noisy": lambda: bench.noisy(n=100, seed=2), "linear": lambda: bench.linear(n=100, seed=1)}


@pytest.mark.parametrize("name", sorted(SETS))
def test_the_default_fit_with_every_row_inducing_is_within_005_nats_of_the_exact_gp(name):
    X_train, X_test, y_train, y_test = SETS[name]()
    exact = bench.exact_lpd(bench.exact_gp(X_train, y_train, restarts=2), X_test, y_test)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # L-BFGS meets its own tolerances
        model = SparseGPRegressor(n_inducing=len(X_train)).fit(X_train, y_train)
    assert model._fits_collapsed(len(X_train))
    assert model.n_iter_ < 200
    assert abs(model.log_predictive_density(X_test, y_test).mean() - exact) <= 0.05


def _small(n=40):
    rng = np.random.RandomState(0)
    X = rng.randn(n, 2)
    return X, np.sin(X[:, 0]) + 0.1 * rng.randn(n)


def test_auto_is_adam_on_the_elbo_for_minibatches_student_t_nothing_to_learn_and_adam():
    X, y = _small()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        short = SparseVariational(max_iter=2)
        for params in ({"batch_size": 16, "inference": short}, {"noise": "student_t", "inference": short},
                       {"learn_hyperparameters": False, "noise_std": 0.1,
                        "inference": SparseVariational(learn_inducing=False, max_iter=2)},
                       {"inference": SparseVariational(optimizer="adam", max_iter=2)}):
            model = SparseGPRegressor(n_inducing=10, random_state=0, **params).fit(X, y)
            assert not model._fits_collapsed(len(X)), params
            assert isinstance(model._optimizer, torch.optim.Adam)
            assert np.isfinite(model.predict(X)).all()
    with pytest.raises(ValueError, match="optimizer"):
        SparseGPRegressor(inference=SparseVariational(optimizer="collapsed")).fit(X, y)


def test_an_lbfgs_fit_sets_the_optimal_q_and_continues_with_adam_after_a_pickle():
    X, y = _small()
    model = SparseGPRegressor(n_inducing=10, random_state=0).fit(X, y)
    assert model._fits_collapsed(len(X)) and 0 < model.n_iter_ == len(model.loss_curve_) < 200
    assert model.module_["gp"].jitter == 1e-8
    X_t, y_t = model._to_tensor(X), model._to_tensor((y - model._y_mean) / model._y_scale)
    with torch.no_grad():  # q(u) at its optimum: the ELBO equals the collapsed bound
        elbo = model._minibatch_loss(X_t, y_t, len(X))
        np.testing.assert_allclose(float(elbo), float(model._collapsed_loss(X_t, y_t)), rtol=1e-8)
    assert isinstance(model._optimizer, torch.optim.Adam) and not model._optimizer.state  # fresh
    twin = pickle.loads(pickle.dumps(model))
    np.testing.assert_allclose(twin.predict(X), model.predict(X))
    for m in (model, twin):
        m.partial_fit(X[:20], y[:20])
    np.testing.assert_allclose(twin.predict(X), model.predict(X), rtol=1e-10)
    assert model.n_iter_ == len(model.loss_curve_) and model.n_seen_ == 60


def test_loop_lbfgs_minimises_a_quadratic_in_the_training_loop_and_stops_when_converged():
    target = torch.tensor([1.0, -2.0, 0.5], dtype=DT)
    scales = torch.tensor([1.0, 10.0, 100.0], dtype=DT)
    x = torch.nn.Parameter(torch.zeros(3, dtype=DT))
    optimizer = LoopLBFGS([x], lambda: (scales * (x - target) ** 2).sum())
    result = fit_loop(optimizer.evaluate, optimizer, 1, batch_size=1, max_iter=100, generator=torch.Generator(),
                      n_iter_no_change=None, callbacks=[_StopWhenConverged()])
    assert optimizer.converged and result.stopped_early and result.n_iter < 20
    np.testing.assert_allclose(x.detach().numpy(), target.numpy(), atol=1e-7)
    before = x.detach().clone()  # once converged, a step moves nothing
    optimizer.zero_grad()
    optimizer.evaluate().backward()
    optimizer.step()
    assert torch.equal(x.detach(), before)
