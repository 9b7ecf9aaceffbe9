"""SGHMC: the sampler, split R-hat and inference="sghmc"."""

import copy
import operator
import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning

import skbayes.inference._sghmc as sghmc_module
from skbayes import BayesianMLPClassifier, BayesianMLPRegressor, SparseGPRegressor
from skbayes._training import Callback, TrainingState
from skbayes.inference import SGHMC as SGHMCMethod
from skbayes.inference import SampledSparseGP
from skbayes.nn import SGHMC, rank_normalized_split_rhat, split_rhat

from _exact_blr import exact_blr_predictive, make_blr_data


# ---------------------------------------------------------------- the sampler
def _run_gaussian(scale_adapted, lr, n_steps=2000, burn_in=500, seed=0, n_chains=1000, grad_noise=0.0):
    """Chains on the 2-D Gaussian N(mu, S) written as a per-datum loss U / N.

    ``grad_noise`` adds N(0, grad_noise^2) noise to the energy gradient, as a
    minibatch would.
    """
    n_data = 50
    mu = torch.tensor([1.0, -0.5], dtype=torch.float64)
    cov = torch.tensor([[0.30, 0.12], [0.12, 0.10]], dtype=torch.float64)
    precision = torch.linalg.inv(cov)
    theta = torch.nn.Parameter(torch.zeros(n_chains, 2, dtype=torch.float64))
    opt = SGHMC(
        [theta],
        lr=lr,
        n_data=n_data,
        friction=0.1,
        scale_adapted=scale_adapted,
        n_adapt_steps=burn_in,
        generator=torch.Generator().manual_seed(seed),
    )
    gradient_noise = torch.Generator().manual_seed(seed + 1)
    kept = []
    for t in range(n_steps):
        opt.zero_grad()
        d = theta - mu
        energy = 0.5 * torch.einsum("ci,ij,cj->", d, precision, d)
        (energy / n_data).backward()
        if grad_noise:
            theta.grad += grad_noise / n_data * torch.randn(theta.shape, generator=gradient_noise, dtype=theta.dtype)
        opt.step()
        if t >= burn_in and t % 50 == 0:
            kept.append(theta.detach().clone())
    return torch.cat(kept), mu, cov


def test_sghmc_samples_a_correlated_gaussian():
    # Exact gradients and a small step: the chains' stationary distribution is
    # the target up to a discretisation error of a few per cent. With the
    # gradient sign of Rossi 2022's eq. 2.30 as printed (+) the chains diverge.
    draws, mu, cov = _run_gaussian(False, 0.5)
    torch.testing.assert_close(draws.mean(0), mu, atol=0.02, rtol=0)
    torch.testing.assert_close(torch.cov(draws.T), cov, atol=0.01, rtol=0.05)


def test_scale_adapted_sghmc_subtracts_the_gradient_noise():
    # Gradient noise of variance 400 (about 20 times E[(dU)^2] at the target)
    # supplies about half of the noise the sampler needs; the adapted sampler
    # estimates it as lr^2 per step (Rossi 2022, eq. 2.36) and injects only
    # the rest, so the target is still sampled.
    draws, mu, cov = _run_gaussian(True, 5e-3, grad_noise=20.0)
    torch.testing.assert_close(draws.mean(0), mu, atol=0.02, rtol=0)
    torch.testing.assert_close(torch.cov(draws.T), cov, atol=0.01, rtol=0.05)
    # without the correction the same chains are too hot
    hot, _, _ = _run_gaussian(False, 5e-3 * 50 / 20, grad_noise=20.0)
    assert float(torch.cov(hot.T)[0, 0]) > 1.2 * float(cov[0, 0])


def test_sghmc_is_reproducible_with_a_seeded_generator():
    a, _, _ = _run_gaussian(False, 0.5, n_steps=600, n_chains=5)
    b, _, _ = _run_gaussian(False, 0.5, n_steps=600, n_chains=5)
    c, _, _ = _run_gaussian(False, 0.5, n_steps=600, n_chains=5, seed=1)
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert not torch.allclose(a, c)


def test_injected_noise_has_the_stated_variance():
    # One step from rest with a zero gradient: v = sqrt(2 alpha lr / N) xi.
    theta = torch.nn.Parameter(torch.zeros(200_000, dtype=torch.float64))
    theta.grad = torch.zeros_like(theta)
    SGHMC([theta], lr=0.3, n_data=40, friction=0.2, generator=torch.Generator().manual_seed(0)).step()
    assert float(theta.detach().var()) == pytest.approx(2 * 0.2 * 0.3 / 40, rel=0.01)


def _reference_sghmc(initial, weights, n_steps, lr, n_data, alpha, scale_adapted, n_adapt, gradient_noise, seed):
    """The SGHMC update written out in numpy, tensor by tensor, on the loss sum_i w_i sum((p_i - 1)^2) / N.

    The noise xi is drawn as the sampler draws it: ``torch.randn(p.shape)``
    from a generator seeded with ``seed``, parameter by parameter.
    """
    generator = torch.Generator().manual_seed(seed)
    ps = [p.copy() for p in initial]
    v = [np.zeros_like(p) for p in ps]
    v_hat, g, tau = [None] * len(ps), [None] * len(ps), [None] * len(ps)
    tiny = 1e-16
    for step in range(1, n_steps + 1):
        for i, p in enumerate(ps):
            xi = torch.randn(p.shape, generator=generator, dtype=torch.float64).numpy()
            grad = 2 * weights[i] * (p - 1) / n_data
            if not scale_adapted:
                v[i] = (1 - alpha) * v[i] - lr * grad + np.sqrt(2 * alpha * lr / n_data) * xi
            else:
                G = grad * n_data
                if step == 1:
                    v_hat[i], g[i], tau[i] = np.full_like(p, np.mean(G * G)), np.zeros_like(p), np.ones_like(p)
                elif step <= n_adapt:
                    rate = 1 / (tau[i] + 1)
                    tau[i] = tau[i] + 1 - tau[i] * g[i] ** 2 / (v_hat[i] + tiny)
                    g[i] = g[i] + rate * (G - g[i])
                    v_hat[i] = v_hat[i] + rate * (G * G - v_hat[i])
                eta = lr / (np.sqrt(v_hat[i]) + tiny)
                correction = lr**2 if gradient_noise else 0.0
                v[i] = (1 - alpha) * v[i] - eta * G + np.sqrt(np.maximum(2 * alpha * eta - correction, tiny)) * xi
            ps[i] = p + v[i]
    return ps


def _run_sampler(params, weights, n_steps, optimizer):
    for _ in range(n_steps):
        optimizer.zero_grad()
        loss = sum(w * ((p - 1) ** 2).sum() for w, p in zip(weights, params) if p.requires_grad)
        (loss / optimizer.param_groups[0]["n_data"]).backward()
        optimizer.step()


@pytest.mark.parametrize("scale_adapted", [False, True])
@pytest.mark.parametrize("gradient_noise", [False, True])
def test_sghmc_with_several_tensors_follows_the_written_out_update(scale_adapted, gradient_noise):
    # Tensors shorter and longer than a vector register, of several shapes: after the first step the
    # sampler updates them as one flat buffer; the numbers are those of the update done tensor by tensor.
    rng = np.random.default_rng(0)
    shapes, weights = [(3, 4), (5,), (2, 2, 2), (7, 9), (1,)], [1.0, 2.0, 0.5, 3.0, 1.5]
    initial = [rng.standard_normal(shape) for shape in shapes]
    params = [torch.nn.Parameter(torch.tensor(p)) for p in initial]
    settings = dict(lr=1e-3, n_data=100, scale_adapted=scale_adapted, n_adapt_steps=40, gradient_noise=gradient_noise)
    optimizer = SGHMC(params, **settings, generator=torch.Generator().manual_seed(3))
    _run_sampler(params, weights, 120, optimizer)
    expected = _reference_sghmc(initial, weights, 120, 1e-3, 100, 0.05, scale_adapted, 40, gradient_noise, seed=3)
    for p, e in zip(params, expected):
        np.testing.assert_allclose(p.detach().numpy(), e, rtol=1e-11, atol=1e-13)


@pytest.mark.parametrize("scale_adapted", [False, True])
def test_sghmc_state_dict_resumes_the_chain_exactly(scale_adapted):
    # Saving the sampler's state half way and loading it into a new sampler continues the same chain,
    # bit for bit; the saved state holds tensors of the parameters' shapes, not views of a shared buffer.
    def make():
        params = [torch.nn.Parameter(torch.linspace(-1, 1, n, dtype=torch.float64)) for n in (6, 20, 3)]
        generator = torch.Generator().manual_seed(0)
        return params, generator, SGHMC(params, lr=1e-2, n_data=50, scale_adapted=scale_adapted, n_adapt_steps=10,
                                        generator=generator)

    weights = [1.0, 2.0, 3.0]
    params, _, optimizer = make()
    _run_sampler(params, weights, 60, optimizer)
    params_b, generator_b, optimizer_b = make()
    _run_sampler(params_b, weights, 30, optimizer_b)
    live = [value for state in optimizer_b.state.values() for value in state.values()]
    saved = optimizer_b.state_dict()
    for state in saved["state"].values():
        assert all(value._base is None for value in state.values() if isinstance(value, torch.Tensor))
    # saving leaves the live state as it was
    assert all(map(operator.is_, live, [value for state in optimizer_b.state.values() for value in state.values()]))
    params_c = [torch.nn.Parameter(p.detach().clone()) for p in params_b]
    optimizer_c = SGHMC(params_c, lr=1e-2, n_data=50, scale_adapted=scale_adapted, n_adapt_steps=10,
                        generator=generator_b)
    optimizer_c.load_state_dict(saved)
    _run_sampler(params_c, weights, 30, optimizer_c)
    for a, c in zip(params, params_c):
        torch.testing.assert_close(a, c, rtol=0, atol=0)


def test_sghmc_skips_a_parameter_without_gradient():
    # A parameter outside the loss keeps its value; the others still move, step after step.
    params = [torch.nn.Parameter(torch.zeros(4, dtype=torch.float64)) for _ in range(3)]
    params[1].requires_grad_(False)
    frozen = params[1].detach().clone()
    optimizer = SGHMC(params, lr=1e-2, n_data=10, scale_adapted=True, n_adapt_steps=5,
                      generator=torch.Generator().manual_seed(0))
    before = [p.detach().clone() for p in params]
    _run_sampler(params, [1.0, 1.0, 1.0], 20, optimizer)
    torch.testing.assert_close(params[1].detach(), frozen, rtol=0, atol=0)
    assert not torch.equal(params[0].detach(), before[0]) and not torch.equal(params[2].detach(), before[2])


def test_sghmc_edge_groups_and_copies():
    # An empty group is skipped; a switch to the scale-adapted sampler mid-run builds its state; a deep copy
    # keeps the noise generator and continues the same chain as the original.
    a = torch.nn.Parameter(torch.zeros(5, dtype=torch.float64))
    optimizer = SGHMC([{"params": [a]}, {"params": []}], lr=1e-2, n_data=10,
                      generator=torch.Generator().manual_seed(0))
    _run_sampler([a], [1.0], 5, optimizer)
    optimizer.param_groups[0]["scale_adapted"] = True
    _run_sampler([a], [1.0], 5, optimizer)
    assert "v_hat" in optimizer.state[a] and torch.isfinite(a).all()
    twin = copy.deepcopy(optimizer)
    twin_param = twin.param_groups[0]["params"][0]
    _run_sampler([a], [1.0], 5, optimizer)
    _run_sampler([twin_param], [1.0], 5, twin)
    torch.testing.assert_close(a, twin_param, rtol=0, atol=0)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(lr=0.0, n_data=10), "lr"),
        (dict(lr=0.1, n_data=0), "n_data"),
        (dict(lr=0.1, n_data=10, friction=1.5), "friction"),
        (dict(lr=0.1, n_data=10, n_adapt_steps=-1), "n_adapt_steps"),
    ],
)
def test_sghmc_rejects_bad_settings(kw, match):
    with pytest.raises(ValueError, match=match):
        SGHMC([torch.nn.Parameter(torch.zeros(2))], **kw)


# ---------------------------------------------------------------- split R-hat
def test_split_rhat_matches_the_textbook_formula():
    draws = np.random.RandomState(0).standard_normal((3, 9)) + np.arange(3)[:, None] * 0.3
    halves = np.concatenate([draws[:, :4], draws[:, 5:]])  # odd length: middle draw dropped
    n = 4
    between = n * halves.mean(1).var(ddof=1)
    within = halves.var(1, ddof=1).mean()
    expected = np.sqrt(((n - 1) / n * within + between / n) / within)
    assert float(split_rhat(torch.tensor(draws))) == pytest.approx(expected, rel=1e-12)


def test_split_rhat_is_one_for_mixed_chains_and_large_for_stuck_ones():
    g = torch.Generator().manual_seed(0)
    mixed = torch.randn(4, 1000, generator=g, dtype=torch.float64)
    assert abs(float(split_rhat(mixed)) - 1) < 0.01
    stuck = mixed + torch.arange(4, dtype=torch.float64)[:, None]  # chains at different values
    assert float(split_rhat(stuck)) > 1.1
    # one chain drifting: only the split into halves can see it
    drifting = torch.randn(1, 1000, generator=g, dtype=torch.float64) + torch.linspace(0, 3, 1000)
    assert float(split_rhat(drifting)) > 1.1
    # several scalars at once (trailing axis)
    both = split_rhat(torch.stack([mixed, stuck], dim=-1))
    assert both.shape == (2,) and float(both[0]) < 1.01 < 1.1 < float(both[1])


def test_split_rhat_edge_cases():
    assert float(split_rhat(torch.ones(2, 10))) == 1.0
    assert np.isnan(float(split_rhat(torch.tensor([[0.0] * 6, [1.0] * 6]))))
    with pytest.raises(ValueError, match="at least 4 draws"):
        split_rhat(torch.zeros(2, 3))


def _rank_rhat_reference(draws):
    """Rank-normalised folded split R-hat (Vehtari et al. 2021, section 4) of one scalar, in numpy and scipy."""
    from scipy.stats import norm, rankdata

    def classic(x):  # x: (sequences, n), Gelman et al. 2013, eqs. 11.2-11.4
        n = x.shape[1]
        within = x.var(axis=1, ddof=1).mean()
        return np.sqrt(((n - 1) / n * within + n * x.mean(axis=1).var(ddof=1) / n) / within)

    def z(x):
        return norm.ppf((rankdata(x, method="average").reshape(x.shape) - 3 / 8) / (x.size + 1 / 4))

    half = draws.shape[1] // 2
    split = np.concatenate([draws[:, :half], draws[:, draws.shape[1] - half:]])
    return max(classic(z(split)), classic(z(np.abs(split - np.median(split)))))


@pytest.mark.parametrize("n_draws", [20, 21, 5])
def test_rank_normalized_split_rhat_matches_a_direct_computation(n_draws):
    rng = np.random.RandomState(n_draws)
    draws = rng.standard_normal((3, n_draws, 3))
    draws[1] += 0.5  # one chain shifted
    draws[2, :, 1] *= 3  # one chain wider
    draws[0, :, 2] = np.round(draws[0, :, 2])  # ties
    expected = [_rank_rhat_reference(draws[..., k]) for k in range(3)]
    np.testing.assert_allclose(rank_normalized_split_rhat(torch.tensor(draws)).numpy(), expected, rtol=1e-12)


def test_rank_normalized_split_rhat_sees_ranks_and_spread_only():
    g = torch.Generator().manual_seed(0)
    draws = torch.randn(2, 50, generator=g, dtype=torch.float64)
    # any increasing transformation of the draws leaves it unchanged
    assert float(rank_normalized_split_rhat(draws.exp() ** 3)) == pytest.approx(
        float(rank_normalized_split_rhat(draws)), rel=1e-12)
    # chains with one centre and different spreads: the classic form sees nothing, the folded part does
    spread = torch.randn(2, 1000, generator=g, dtype=torch.float64) * torch.tensor([[1.0], [3.0]], dtype=torch.float64)
    assert float(split_rhat(spread)) < 1.01 and float(rank_normalized_split_rhat(spread)) > 1.1
    # chains at different values, or one drifting, as for the classic form
    assert float(rank_normalized_split_rhat(draws + torch.tensor([[0.0], [3.0]], dtype=torch.float64))) > 1.1
    assert float(rank_normalized_split_rhat(draws[:1] + torch.linspace(0, 6, 50, dtype=torch.float64))) > 1.1


def test_rank_normalized_split_rhat_rarely_flags_independent_draws_of_the_default_shape():
    # SGHMC's default keeps 2 chains of 20 samples; independent draws of that shape pass 1.1 most of the time
    draws = torch.randn(2, 20, 4000, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    false_alarms = float((rank_normalized_split_rhat(draws) > 1.1).double().mean())
    assert false_alarms < 0.1


def test_rank_normalized_split_rhat_edge_cases():
    assert float(rank_normalized_split_rhat(torch.ones(2, 10))) == 1.0
    assert np.isnan(float(rank_normalized_split_rhat(torch.tensor([[0.0] * 6, [1.0] * 6]))))
    with pytest.raises(ValueError, match="at least 4 draws"):
        rank_normalized_split_rhat(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="n_chains, n_draws"):
        rank_normalized_split_rhat(torch.zeros(8))


# --------------------------------------------------------------- the estimator
_METHOD_PARAMS = set(SGHMCMethod().get_params())


def _sghmc(estimator=BayesianMLPRegressor, **kw):
    """The estimator with inference=SGHMC(...): the sampler's settings go to the method object."""
    method = SGHMCMethod(**{k: v for k, v in kw.items() if k in _METHOD_PARAMS})
    params = {k: v for k, v in kw.items() if k not in _METHOD_PARAMS}
    if estimator is BayesianMLPRegressor:  # these tests check the Gaussian model (the default noise is Student-t)
        params = {"noise": "homoscedastic", **params}
    return estimator(inference=method, **params)


def test_sghmc_on_a_linear_model_samples_the_exact_posterior():
    # Bayesian linear regression (no hidden layer, fixed noise): the posterior
    # is Gaussian in closed form. Minibatches of 20 of the 100 rows make the
    # gradient noisy; the scale-adapted sampler subtracts its estimate of
    # that noise (Rossi 2022, eq. 2.36), which is approximate, and 16 chains
    # x 40 correlated samples estimate a standard deviation to ~10%: hence
    # 25% on the epistemic standard deviation and a quarter of it on the mean.
    X, y, Xt = make_blr_data(n_samples=100)
    model = _sghmc(
        hidden_layer_sizes=(),
        noise_std=0.3,
        normalize_y=False,
        batch_size=20,
        n_chains=16,
        burn_in=100,
        thinning=2,
        n_kept_samples=40,
        random_state=0,
    ).fit(X, y)
    mean, std, epistemic = exact_blr_predictive(X, y, Xt, 1.0, 0.3)
    parts = model.predict_uncertainty(Xt)
    assert np.all(np.abs(parts.mean - mean) < 0.25 * epistemic)
    np.testing.assert_allclose(parts.epistemic_std, epistemic, rtol=0.25)
    np.testing.assert_allclose(parts.std, std, rtol=0.05)
    assert model.module_["network"].n_members == 16 * 40
    assert 1.0 <= model.inference_diagnostics_["rhat"] < 1.1  # well-mixed chains
    assert model.n_iter_ == 100 + 2 * 40  # the schedule, in epochs


def test_stuck_chains_are_flagged_by_rhat():
    X, y, _ = make_blr_data(n_samples=100)
    # a vanishing step size leaves every chain at its own random initialisation
    model = _sghmc(
        step_size=1e-12, hidden_layer_sizes=(), noise_std=0.3, n_chains=4, burn_in=0, thinning=1,
        n_kept_samples=8, random_state=0,
    ).fit(X, y)
    assert model.inference_diagnostics_["rhat"] > 1.1


@pytest.fixture(scope="module")
def sine_sghmc():
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, (200, 1))
    y = np.sin(2 * X[:, 0]) + 0.2 * rng.standard_normal(200)
    model = _sghmc(
        hidden_layer_sizes=(16,), n_chains=2, burn_in=150, thinning=2, n_kept_samples=20, random_state=0
    )
    return model.fit(X, y), X, y


def test_noise_is_sampled_per_chain_and_recovered(sine_sghmc):
    model, _, _ = sine_sghmc
    sigma = model.module_["likelihood"].noise_std.detach().numpy().ravel() * model._y_scale
    assert sigma.shape == (40,)  # one noise level per kept sample
    assert np.ptp(sigma) > 0  # sampled, not fixed
    np.testing.assert_allclose(model.noise_std_, 0.2, rtol=0.25)


def test_epistemic_uncertainty_grows_away_from_the_data(sine_sghmc):
    model, _, _ = sine_sghmc
    inside = model.predict_uncertainty(np.linspace(-1.5, 1.5, 20)[:, None]).epistemic_std.mean()
    outside = model.predict_uncertainty(np.array([[-5.0], [5.0]])).epistemic_std.mean()
    assert outside > 5 * inside


def test_same_random_state_gives_identical_samples():
    X, y, Xt = make_blr_data(n_samples=60)
    kw = dict(hidden_layer_sizes=(8,), burn_in=5, thinning=1, n_kept_samples=4)
    fits = [_sghmc(random_state=s, **kw).fit(X, y) for s in (0, 0, 1)]
    a, b, c = (m.predict(Xt, return_std=True)[1] for m in fits)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_warm_start_restarts_each_chain_from_its_last_sample():
    X, y, Xt = make_blr_data(n_samples=60)
    model = _sghmc(hidden_layer_sizes=(8,), n_chains=3, burn_in=5, thinning=1, n_kept_samples=4, random_state=0)
    model.fit(X, y)
    last = model.module_["network"].layers[0].weight.detach()[[3, 7, 11]]
    noise = model.module_["likelihood"].raw_noise.detach()[[3, 7, 11]]
    # with a vanishing step the restarted chains stay where they were
    model.set_params(warm_start=True, inference__burn_in=0, inference__n_kept_samples=2)
    model.set_params(inference__step_size=1e-12)
    model.fit(X, y)
    weight = model.module_["network"].layers[0].weight.detach()
    assert weight.shape[0] == 3 * 2
    torch.testing.assert_close(weight[1::2], last, atol=1e-6, rtol=0)
    torch.testing.assert_close(model.module_["likelihood"].raw_noise.detach()[1::2], noise, atol=1e-6, rtol=0)


def test_classifier_averages_the_kept_samples():
    rng = np.random.RandomState(0)
    X = np.vstack([rng.normal(-1.5, 1, (60, 2)), rng.normal(1.5, 1, (60, 2))])
    y = np.repeat([0, 1], 60)
    clf = _sghmc(
        estimator=BayesianMLPClassifier, hidden_layer_sizes=(8,), burn_in=30, thinning=2, n_kept_samples=5,
        random_state=0,
    ).fit(X, y)
    proba = clf.predict_proba(X)
    with torch.no_grad():
        logits = clf.module_["network"](torch.tensor(X, dtype=torch.float64))
    assert logits.shape[0] == 2 * 5
    np.testing.assert_allclose(proba, torch.softmax(logits, -1).mean(0).numpy(), rtol=1e-8)
    assert clf.score(X, y) > 0.85
    assert np.isfinite(clf.inference_diagnostics_["rhat"])


# ----------------------------------------------------------- the default schedule


class _RecordWeights(Callback):
    """The step count and the chains' first-layer weights after every optimiser step."""

    def __init__(self, model):
        self.model, self.weights = model, {}

    def on_batch_end(self, state):
        self.weights[state.step] = self.model.module_["network"].layers[0].weight.detach().clone()


@pytest.mark.parametrize("n_rows", [300, 3000])
def test_default_schedule_is_a_step_budget_whatever_the_rows(n_rows, monkeypatch):
    # With the budget patched down to 60 steps and 20 kept samples per chain, the burn-in is
    # round(60 * 300 / 700) = 26 steps and one sample is kept every (60 - 26) // 20 = 1 step:
    # 46 steps, the kept samples being the chains after steps 27, ..., 46, for 300 rows
    # (2 batches of the default 256 rows per epoch) as for 3,000 (12 per epoch).
    # (max_extensions=0: the budget alone; the windows that may follow are tested below)
    monkeypatch.setattr(sghmc_module, "AUTO_MAX_STEPS", 60)
    rng = np.random.RandomState(0)
    X = rng.standard_normal((n_rows, 2))
    y = X[:, 0] + 0.1 * rng.standard_normal(n_rows)
    model = BayesianMLPRegressor(hidden_layer_sizes=(4,), inference=SGHMCMethod(max_extensions=0), random_state=0)
    recorder = _RecordWeights(model)
    model.set_params(callbacks=[recorder]).fit(X, y)
    assert model.inference_.burn_in == model.inference_.thinning == "auto"
    assert max(recorder.weights) == 46
    steps_per_epoch = -(-n_rows // 256)
    assert model.n_iter_ == -(-46 // steps_per_epoch)
    kept = model.module_["network"].layers[0].weight.detach()  # chain-major: (2 chains * 20, 4, 2)
    assert kept.shape[0] == 2 * 20
    expected = torch.stack([recorder.weights[s] for s in range(27, 47)], dim=1).reshape(kept.shape)
    torch.testing.assert_close(kept, expected, rtol=0, atol=0)


def test_explicit_epochs_keep_the_epoch_schedule_and_the_batch_size(monkeypatch):
    # Giving burn_in (thinning then 10 epochs) or both: burn_in + thinning * n_kept_samples epochs
    # of the estimator's batch size (32 rows up to 2,000), whatever the step budget.
    monkeypatch.setattr(sghmc_module, "AUTO_MAX_STEPS", 5)
    X, y, _ = make_blr_data(n_samples=70)
    for method, epochs in [(SGHMCMethod(burn_in=2, thinning=3, n_kept_samples=2), 8),
                           (SGHMCMethod(burn_in=1, n_kept_samples=1), 11),
                           (SGHMCMethod(thinning=1, n_kept_samples=1), 301)]:
        model = BayesianMLPRegressor(inference=method, hidden_layer_sizes=(), random_state=0)
        recorder = _RecordWeights(model)
        model.set_params(callbacks=[recorder]).fit(X, y)
        assert model.n_iter_ == epochs
        assert max(recorder.weights) == epochs * 3  # ceil(70 / 32) = 3 steps per epoch
        assert model.inference_.auto_batch_size() is None


def test_the_default_budget_and_schedule():
    # The unpatched default on up to 30,720 rows: 2,400 steps in all, round(2400 * 300 / 700) = 1,029 of
    # burn-in, one kept sample every (2400 - 1029) // 20 = 68 steps; a small data set whose 700 epochs
    # (300 of burn-in, then 20 per kept sample) fit in the budget keeps that epoch schedule. The loop may
    # run two more sampling windows of the same length (max_extensions="auto" is 2 under the budget).
    method = SGHMCMethod()
    schedule = method._schedule(steps_per_epoch=40)
    assert (schedule.burn_in, schedule.thinning, schedule.per_step) == (1029, 68, True)
    assert schedule.max_extensions == 2
    assert schedule.loop["max_steps"] == 1029 + 68 * 20 * 3 and schedule.loop["max_iter"] == 128
    assert schedule.burn_in_steps == 1029
    # 20 epochs' worth of steps on more rows: 7,820 steps on 10^5 rows (391 batches of 256), burn-in
    # round(7820 * 3 / 7) = 3351, thinning (7820 - 3351) // 20 = 223; capped at 24,000 on 10^6 rows.
    large = method._schedule(steps_per_epoch=391)
    assert (large.burn_in, large.thinning, large.loop["max_steps"]) == (3351, 223, 3351 + 223 * 20 * 3)
    huge = method._schedule(steps_per_epoch=3907)
    assert (huge.burn_in, huge.thinning, huge.loop["max_steps"], huge.loop["max_iter"]) == (10286, 685, 51386, 14)
    small = method._schedule(steps_per_epoch=3)
    assert (small.burn_in, small.thinning, small.per_step, small.loop["max_iter"]) == (300, 20, False, 1500)
    assert small.burn_in_steps == 900
    # without the windows (the sparse GPs), and with an explicit schedule, which runs as given
    assert method._schedule(steps_per_epoch=40, extensions=False).loop["max_steps"] == 1029 + 68 * 20
    explicit = SGHMCMethod(burn_in=5)._schedule(steps_per_epoch=3)
    assert explicit.max_extensions == 0 and explicit.loop["max_iter"] == 5 + 10 * 20
    assert SGHMCMethod(burn_in=5, max_extensions=1)._schedule(steps_per_epoch=3).loop["max_iter"] == 5 + 10 * 20 * 2
    assert method.auto_batch_size() == 256


class _Windows(sghmc_module.KeepSamples):
    """KeepSamples with a scripted trace and snapshots that are the sample's number."""

    def __init__(self, traces, **kw):
        super().__init__(module=None, burn_in=0, thinning=1, per_step=True, trace=lambda: next(traces), **kw)
        self.count = 0

    def snapshot(self):
        self.count += 1
        return self.count


def _run_windows(keep, n_steps):
    state = TrainingState(module=None, optimizer=None, n_batches=1)
    for step in range(1, n_steps + 1):
        state.step = step
        keep.on_batch_end(state)
        if state.stop:
            return step
    return None


def test_a_window_that_has_not_mixed_is_dropped_and_sampled_again():
    g = torch.Generator().manual_seed(0)
    drifting = torch.linspace(0, 6, 20, dtype=torch.float64)[:, None] * torch.tensor([[1.0, -1.0]])
    mixed = torch.randn(20, 2, generator=g, dtype=torch.float64)
    keep = _Windows(iter([*drifting, *mixed]), n_kept=20, max_extensions=2)
    assert _run_windows(keep, 100) == 40  # the second window has mixed: the loop stops after its last sample
    assert keep.n_extensions == 1 and keep.samples == list(range(21, 41))  # the second window's samples only
    keep.on_batch_end(TrainingState(module=None, optimizer=None, n_batches=1, step=41))
    assert keep.samples == list(range(21, 41))  # nothing kept once done (the loop ends its epoch)


def test_windows_stop_after_max_extensions_even_if_not_mixed():
    drifting = torch.linspace(0, 6, 20, dtype=torch.float64)[:, None] * torch.tensor([[1.0, -1.0]])
    keep = _Windows(iter([*drifting] * 3), n_kept=20, max_extensions=2)
    assert _run_windows(keep, 100) == 60
    assert keep.n_extensions == 2 and keep.samples == list(range(41, 61))
    # no extension at all: the first window is kept whatever its R-hat
    keep = _Windows(iter([*drifting]), n_kept=20, max_extensions=0)
    assert _run_windows(keep, 20) is None and keep.n_extensions == 0 and len(keep.samples) == 20


def test_the_default_budget_samples_windows_until_mixed_and_reports_them():
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, (120, 1))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(120)
    model = BayesianMLPRegressor(hidden_layer_sizes=(16,), random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    n_extensions = model.inference_diagnostics_["n_extensions"]
    assert n_extensions in (0, 1, 2)
    # 120 rows are one batch of 256: the epoch schedule, 300 burn-in epochs then windows of 20 x 20 epochs
    assert model.n_iter_ == 300 + 400 * (1 + n_extensions)
    assert model.module_["network"].n_members == 2 * 20
    if n_extensions < 2:  # stopped because the last window mixed
        assert model.inference_diagnostics_["rhat"] <= 1.1


def test_a_sampled_sparse_gp_takes_no_extensions():
    X = np.linspace(-2, 2, 20)[:, None]
    y = np.sin(X[:, 0])
    model = SparseGPRegressor(n_inducing=5, inference=SampledSparseGP(SGHMCMethod(max_extensions=1)))
    with pytest.raises(ValueError, match="max_extensions"):
        model.fit(X, y)


# ------------------------------------------------------------ diverged chains
def test_diverged_chains_flags_non_finite_and_far_below_samples():
    rng = np.random.RandomState(0)
    healthy = -1.0 + 0.05 * rng.randn(3, 10)  # three chains of ten samples, mean log-likelihood per row
    assert not sghmc_module.diverged_chains(torch.tensor(healthy.ravel()), 3).any()
    runaway = healthy.copy()
    runaway[1, 7] = -1e6  # one sample of chain 1 ran off (outputs of order 1e4)
    np.testing.assert_array_equal(sghmc_module.diverged_chains(torch.tensor(runaway.ravel()), 3), [False, True, False])
    broken = healthy.copy()
    broken[2, 0] = np.nan
    np.testing.assert_array_equal(sghmc_module.diverged_chains(torch.tensor(broken.ravel()), 3), [False, False, True])
    # a chain 3 nats per row below the best (still in its burn-in, or a mode of its own) is kept
    shifted = healthy.copy()
    shifted[0] -= 3.0
    assert not sghmc_module.diverged_chains(torch.tensor(shifted.ravel()), 3).any()


def test_a_diverged_chain_is_dropped_with_a_warning(monkeypatch):
    from sklearn.exceptions import ConvergenceWarning

    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, size=(80, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.randn(80)
    method = SGHMCMethod(n_chains=3, burn_in=20, thinning=2, n_kept_samples=5)
    reference = BayesianMLPRegressor((16,), inference=method, noise="homoscedastic", random_state=0).fit(X, y)
    assert reference.inference_diagnostics_["n_diverged_chains"] == 0
    # the detection says chain 1 diverged: the fit keeps chains 0 and 2 and says so
    monkeypatch.setattr(sghmc_module, "diverged_chains", lambda mean_log_lik, n_chains: torch.tensor([False, True, False]))
    with pytest.warns(ConvergenceWarning, match="1 of 3 chains diverged"):
        model = BayesianMLPRegressor((16,), inference=method, noise="homoscedastic", random_state=0).fit(X, y)
    network = model.module_["network"]
    assert network.n_members == 10 and network.n_chains == 2
    assert model.inference_diagnostics_["n_diverged_chains"] == 1
    # the kept members are chains 0 and 2 of the same run, in order
    kept = [t.detach() for t in network.member_parameters()[0]]
    full = [t.detach() for t in reference.module_["network"].member_parameters()[0]]
    index = torch.tensor([*range(0, 5), *range(10, 15)])
    for a, b in zip(kept, full):
        np.testing.assert_array_equal(a.numpy(), b[index].numpy())
    assert np.all(np.isfinite(model.predict(X)))
    # every chain diverged: all are kept, and the warning says the posterior is not trustworthy
    monkeypatch.setattr(sghmc_module, "diverged_chains", lambda mean_log_lik, n_chains: torch.ones(n_chains, dtype=torch.bool))
    with pytest.warns(ConvergenceWarning, match="not trustworthy"):
        model = BayesianMLPRegressor((16,), inference=method, noise="homoscedastic", random_state=0).fit(X, y)
    assert model.module_["network"].n_members == 15 and model.inference_diagnostics_["n_diverged_chains"] == 3
