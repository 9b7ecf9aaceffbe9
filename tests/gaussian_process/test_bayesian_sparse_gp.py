"""The Bayesian sparse GP: SparseGPRegressor(inference=SGHMC(...)) (Rossi 2022, section 6.3)."""

import math
import pickle
import warnings

import numpy as np
import pytest
import torch
from scipy import integrate, stats
from scipy.linalg import cholesky, solve_triangular
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel
from sklearn.model_selection import GridSearchCV
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import check_estimator

from skbayes import SparseGPRegressor
from skbayes.inference import PBP, SGHMC, MCDropout, SampledSparseGP, SparseVariational
from skbayes.nn.gp.bayesian_sparse_gp import SparseGPPriors, mixture_moments
from skbayes.nn.priors import dpp_log_prob, log_normal_log_prob, log_normal_raw_log_prob, standard_normal_log_prob

NOISE = 0.3
N_CHAINS, N_KEPT = 8, 100


def _toy(n=15, seed=1):
    rng = np.random.RandomState(seed)
    X = np.sort(rng.uniform(-3, 3, (n, 1)), axis=0)
    return X, np.sin(X[:, 0]) + NOISE * rng.randn(n)


def _exact_sampler(random_state=0, **sghmc):
    """Only u sampled: fixed RBF(1) kernel with unit variance, Z = X, fixed noise, zero mean."""
    settings = {"n_chains": N_CHAINS, "burn_in": 300, "thinning": 5, "n_kept_samples": N_KEPT,
                "step_size": 0.03, "friction": 0.5, **sghmc}
    return SparseGPRegressor(
        n_inducing=100, learn_hyperparameters=False, noise_std=NOISE, prior_mean="zero", normalize_y=False,
        random_state=random_state,
        inference=SampledSparseGP(SGHMC(**settings), start=SparseVariational(learn_inducing=False)),
    )


@pytest.fixture(scope="module")
def exact_fit():
    X, y = _toy()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # mixed chains: no R-hat warning
        return X, y, _exact_sampler().fit(X, y)


def test_sampling_u_reproduces_the_exact_gp_posterior(exact_fit):
    """Z = X and fixed hyperparameters: the kept samples' f(x*) has the exact GP posterior's mean and variance.

    Tolerance: the chains are independent, so the Monte-Carlo standard error
    of a mixture mean (variance) is the standard deviation across chains of
    the per-chain estimates divided by sqrt(n_chains) (batch means with one
    batch per chain). We allow 4 standard errors plus a bias for the
    sampler's finite step (SGHMC's stationary distribution is exact only as
    step_size -> 0): 0.15 posterior standard deviations on the mean, 10% on
    the variance; and we check that the standard errors are small enough
    for the test to have power.
    """
    X, y, model = exact_fit
    X_test = np.linspace(-4, 4, 9)[:, None]
    exact = GaussianProcessRegressor(
        ConstantKernel(1.0, "fixed") * RBF(1.0, "fixed"), alpha=NOISE**2, optimizer=None
    ).fit(X, y)
    exact_mean, exact_std = exact.predict(X_test, return_std=True)

    # Per-sample FITC conditionals, recomputed in numpy from the kept whitened values v_s (u_s = L v_s).
    v = model.module_["samples"].stacked("gp.q_mean").numpy()  # (n_chains * n_kept, M), chain-major
    assert v.shape == (N_CHAINS * N_KEPT, len(X))
    rbf = RBF(1.0)
    k_zz = rbf(X) + model.module_["gp"].jitter * np.eye(len(X))  # the model's relative jitter (mean diag 1)
    chol = cholesky(k_zz, lower=True)
    a = solve_triangular(chol, rbf(X, X_test), lower=True)  # (M, n*)
    means = v @ a  # (S, n*)
    cond_var = 1.0 - (a**2).sum(0)
    per_chain_mean = means.reshape(N_CHAINS, N_KEPT, -1).mean(1)
    per_chain_var = cond_var + means.reshape(N_CHAINS, N_KEPT, -1).var(1)
    mean, var = means.mean(0), cond_var + means.var(0)

    se_mean = per_chain_mean.std(0, ddof=1) / math.sqrt(N_CHAINS)
    se_var = per_chain_var.std(0, ddof=1) / math.sqrt(N_CHAINS)
    assert np.all(se_mean < 0.25 * exact_std) and np.all(se_var < 0.25 * exact_std**2)
    assert np.all(np.abs(mean - exact_mean) < 4 * se_mean + 0.15 * exact_std)
    assert np.all(np.abs(var - exact_std**2) < 4 * se_var + 0.1 * exact_std**2)

    # The estimator's predictive is that mixture, plus the noise.
    result = model.predict_uncertainty(X_test)
    np.testing.assert_allclose(result.mean, mean, atol=1e-8)
    np.testing.assert_allclose(result.epistemic_std**2, var, rtol=1e-6, atol=1e-10)
    np.testing.assert_allclose(result.aleatoric_std, NOISE, rtol=1e-6)
    _, std = model.predict(X_test, return_std=True)
    np.testing.assert_allclose(std**2, var + NOISE**2, rtol=1e-6)


def test_rhat_near_one_on_an_easy_problem(exact_fit):
    _, _, model = exact_fit
    assert model.inference_diagnostics_["n_kept_samples"] == N_CHAINS * N_KEPT
    assert 0.99 < model.inference_diagnostics_["rhat"] < 1.1


def test_return_cov_is_the_mixture_covariance(exact_fit):
    X, _, model = exact_fit
    X_test = np.linspace(-2, 2, 5)[:, None]
    mean, cov = model.predict(X_test, return_cov=True)
    mean2, std = model.predict(X_test, return_std=True)
    np.testing.assert_allclose(mean, mean2, atol=1e-10)
    np.testing.assert_allclose(np.diag(cov), std**2, rtol=1e-8)
    assert model.sample_y(X_test, 3).shape == (5, 3)


def test_mixture_moments_against_the_pooled_draws():
    rng = np.random.RandomState(0)
    mu, sd = rng.randn(4), rng.uniform(0.5, 2, 4)
    draws = mu[:, None] + sd[:, None] * rng.randn(4, 200_000)
    mean, var = mixture_moments(torch.tensor(mu), torch.tensor(sd**2))
    assert abs(float(mean) - draws.mean()) < 4 * draws.std() / math.sqrt(draws.size)
    assert abs(float(var) / draws.var() - 1) < 0.01


# ---------------------------------------------------------------- priors
def test_log_normal_against_scipy():
    x = torch.tensor([0.01, 0.3, 1.0, 4.0], dtype=torch.float64)
    for loc, scale in [(0.0, 1.0), (math.log(0.05), 1.0), (0.7, 0.4)]:
        expected = stats.lognorm(s=scale, scale=math.exp(loc)).logpdf(x.numpy())
        np.testing.assert_allclose(log_normal_log_prob(x, loc, scale).numpy(), expected, rtol=1e-12)
        dist = torch.distributions.LogNormal(torch.tensor(loc, dtype=torch.float64), torch.tensor(scale, dtype=torch.float64))
        np.testing.assert_allclose(log_normal_log_prob(x, loc, scale).numpy(), dist.log_prob(x).numpy(), rtol=1e-12)


@pytest.mark.parametrize("transform", ["softplus", "softplus_squared"])
def test_raw_density_is_the_pushforward(transform):
    """The density of the raw coordinate integrates to 1 and gives the log-normal's CDF (change of variables)."""
    loc, scale, floor = math.log(0.05), 1.0, 1e-6

    def density(r):
        return math.exp(float(log_normal_raw_log_prob(torch.tensor(r, dtype=torch.float64), loc, scale,
                                                      transform=transform, floor=floor)))

    total, _ = integrate.quad(density, -60, 60, points=[-5, 0, 5], limit=400)
    assert abs(total - 1) < 1e-6
    r0 = 0.3
    below, _ = integrate.quad(density, -60, r0, points=[-5, 0], limit=400)
    value = math.log1p(math.exp(r0)) if transform == "softplus" else (math.log1p(math.exp(r0)) + floor) ** 2
    assert abs(below - stats.lognorm(s=scale, scale=math.exp(loc)).cdf(value)) < 1e-6


def test_normal_and_dpp_priors():
    z = torch.randn(5, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    np.testing.assert_allclose(float(standard_normal_log_prob(z)), stats.norm.logpdf(z.numpy()).sum(), rtol=1e-12)
    k = torch.exp(-0.5 * torch.cdist(z, z) ** 2) + 1e-6 * torch.eye(5, dtype=torch.float64)
    np.testing.assert_allclose(float(dpp_log_prob(torch.linalg.cholesky(k))), np.linalg.slogdet(k.numpy())[1],
                               rtol=1e-10)
    with pytest.raises(ValueError, match="inducing"):
        SparseGPPriors(inducing="strauss")


# ---------------------------------------------------------------- estimator contract
def _small(inducing_prior="normal", **params):
    return SparseGPRegressor(
        n_inducing=8, random_state=0, **params,
        inference=SampledSparseGP(
            SGHMC(n_chains=2, burn_in=40, thinning=2, n_kept_samples=4, step_size=1e-2, friction=0.3),
            inducing_prior=inducing_prior, start=SparseVariational(max_iter=50, learning_rate_init=0.05),
        ),
    )


def _data(n=60, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, 2)
    return X, np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.randn(n)


def test_same_random_state_same_result():
    X, y = _data()
    a, b = _small().fit(X, y), _small().fit(X, y)
    c = clone(_small()).set_params(random_state=1).fit(X, y)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    np.testing.assert_array_equal(a.inducing_points_, b.inducing_points_)
    assert not np.allclose(a.predict(X), c.predict(X))


def test_check_estimator():
    check_estimator(_small())


def test_fitted_attributes_pickle_and_dpp_prior():
    X, y = _data()
    model = _small(inducing_prior="dpp", batch_size=20).fit(X, y)
    assert isinstance(model.inference_, SampledSparseGP) and model.inference_ is not model.inference
    assert isinstance(model.inference_.sampling_method("SparseGPRegressor"), SGHMC)
    assert model.length_scale_.shape == (2,) and model.signal_std_ > 0 and model.noise_std_ > 0
    assert model.inducing_points_.shape == (8, 2)
    assert len(model.loss_curve_) == model.n_iter_ == 40 + 2 * 4
    loaded = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


def test_grid_search_over_inference():
    X, y = _data(80)
    search = GridSearchCV(
        SparseGPRegressor(n_inducing=8, random_state=0),
        {"inference": [SparseVariational(max_iter=20), SampledSparseGP(
            SGHMC(n_chains=2, burn_in=10, thinning=2, n_kept_samples=4, step_size=1e-3),
            start=SparseVariational(max_iter=20))]},
        cv=2,
    ).fit(X, y)
    assert len(search.cv_results_["mean_test_score"]) == 2


@pytest.mark.parametrize("method", [MCDropout(), PBP()])
def test_refused_inference(method):
    X, y = _data()
    with pytest.raises(ValueError, match=type(method).__name__):
        SparseGPRegressor(inference=SampledSparseGP(method)).fit(X, y)


def test_refused_kernel_object_and_partial_fit():
    X, y = _data()
    with pytest.raises(ValueError, match="string kernel"):
        _small(kernel=RBF()).fit(X, y)
    assert not hasattr(_small(), "partial_fit") and hasattr(SparseGPRegressor(), "partial_fit")


def test_default_inference_is_the_variational_model():
    X, y = _data()
    default = SparseGPRegressor(n_inducing=8, random_state=0).fit(X, y)
    explicit = SparseGPRegressor(n_inducing=8, random_state=0, inference=SparseVariational()).fit(X, y)
    assert default.inference == "variational" and isinstance(default.inference_, SparseVariational)
    np.testing.assert_array_equal(default.predict(X), explicit.predict(X))
    assert "samples" not in default.module_ and not hasattr(default, "inference_diagnostics_")


# ---------------------------------------------------------------- real data
def test_boston_predictive_is_sane():
    """On a Boston split the BSGP's test log-likelihood is within 0.3 nats of the variational GP's at M = 32.

    The margin: over the fixed splits of this set the test LL of sparse GPs
    varies by about 0.2-0.3 nats between splits; a broken sampler (wrong
    sign, wrong scaling of N) is off by far more than that.
    """
    from skbayes.datasets import get_uci_split, load_uci

    bunch = load_uci("bostonHousing")
    X_train, X_test, y_train, y_test = get_uci_split(bunch, 0)
    scaler = StandardScaler().fit(X_train)
    X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
    variational = SparseGPRegressor(n_inducing=32, random_state=0).fit(X_train, y_train)
    sampled = SparseGPRegressor(
        n_inducing=32, random_state=0, batch_size=128,
        inference=SampledSparseGP(
            SGHMC(n_chains=2, burn_in=200, thinning=5, n_kept_samples=20, step_size=3e-3, friction=0.3),
        ),
    ).fit(X_train, y_train)
    ll_v = variational.log_predictive_density(X_test, y_test).mean()
    ll_s = sampled.log_predictive_density(X_test, y_test).mean()
    rmse_s = np.sqrt(np.mean((sampled.predict(X_test) - y_test) ** 2))
    assert np.isfinite(ll_s) and ll_s > ll_v - 0.3, (ll_s, ll_v)
    assert rmse_s < 0.5 * y_test.std() + 2.0


def test_log_predictive_density_is_the_mixture_over_kept_samples():
    """Brute force: per kept sample, the FITC conditional in numpy from the stored u, Z, hyperparameters, noise."""
    from scipy.special import logsumexp
    from scipy.stats import norm

    from skbayes.inference import SGHMC

    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, size=(60, 1))
    y = np.sin(2 * X[:, 0]) + 0.2 * rng.randn(60)
    model = SparseGPRegressor(
        n_inducing=8, random_state=0,
        inference=SampledSparseGP(
            SGHMC(n_chains=2, burn_in=20, thinning=2, n_kept_samples=5), start=SparseVariational(max_iter=30),
        ),
    ).fit(X, y)
    X_test = np.linspace(-3, 3, 9)[:, None]
    y_test = np.sin(2 * X_test[:, 0])
    samples = model.module_["samples"]
    softplus = lambda t: np.log1p(np.exp(t))  # noqa: E731
    params = dict(model.module_.named_parameters()) | dict(model.module_.named_buffers())

    def per_sample(name):
        if name in samples.names:
            return samples.stacked(name).detach().numpy()
        return np.repeat(params[name].detach().numpy()[None], samples.n_samples, axis=0)

    v, z = per_sample("gp.q_mean"), per_sample("gp.inducing_points")
    ls, var = softplus(per_sample("gp.kernel.raw_length_scale")), softplus(per_sample("gp.kernel.raw_variance"))
    noise = softplus(per_sample("likelihood.raw_noise")).reshape(samples.n_samples, -1)[:, 0] + 1e-6
    c = per_sample("gp.mean_constant").reshape(samples.n_samples)
    jitter = model.module_["gp"].jitter
    log_pdf = []
    for s in range(samples.n_samples):
        def k(a, b):
            d2 = (((a[:, None, :] - b[None, :, :]) / ls[s]) ** 2).sum(-1)
            return var[s] * np.exp(-0.5 * d2)

        kzz = k(z[s], z[s])
        chol = np.linalg.cholesky(kzz + jitter * np.mean(np.diag(kzz)) * np.eye(len(kzz)))
        a = np.linalg.solve(chol, k(z[s], X_test))
        mu = c[s] + a.T @ v[s]
        cond = np.clip(var[s] - (a**2).sum(0), 0, None)
        scale = model._y_scale
        log_pdf.append(norm.logpdf(y_test, mu * scale + model._y_mean, np.sqrt(cond + noise[s] ** 2) * scale))
    expected = logsumexp(np.array(log_pdf), axis=0) - np.log(samples.n_samples)
    np.testing.assert_allclose(model.log_predictive_density(X_test, y_test), expected, rtol=1e-5, atol=1e-6)
    # A mixture of Gaussians, not the Gaussian with its moments.
    mean, std = model.predict(X_test, return_std=True)
    assert not np.allclose(model.log_predictive_density(X_test, y_test), norm.logpdf(y_test, mean, std))


# ---------------------------------------------------------------- energy gradient and sampler noise
def _numpy_log_posterior(v, z, raw_ls, raw_var, raw_noise, c, x, y, n_data, floor):
    """An independent float64 numpy log posterior of the BSGP in its raw coordinates (Rossi 2022, eq. 6.17)."""
    def softplus(r):
        return np.logaddexp(0.0, r)

    def log_sigmoid(r):
        return -np.logaddexp(0.0, -r)

    ls, s2, std = softplus(raw_ls), softplus(raw_var), softplus(raw_noise) + floor

    def k(a, b):
        d2 = (((a[:, None, :] - b[None, :, :]) / ls) ** 2).sum(-1)
        return s2 * np.exp(-0.5 * d2)

    chol = cholesky(k(z, z), lower=True)
    a = solve_triangular(chol, k(z, x), lower=True)
    mean, var = c + a.T @ v, s2 - (a ** 2).sum(0)
    log_lik = stats.norm.logpdf(y, mean, np.sqrt(var + std ** 2)).sum() * n_data / len(y)
    lognormal = stats.lognorm
    log_prior = (stats.norm.logpdf(v).sum() + stats.norm.logpdf(z).sum()
                 + (lognormal(s=1.0, scale=1.0).logpdf(ls) + log_sigmoid(raw_ls)).sum()
                 + lognormal(s=1.0, scale=0.05).logpdf(s2) + log_sigmoid(raw_var)
                 + lognormal(s=1.0, scale=0.05).logpdf(std ** 2) + np.log(2 * std) + log_sigmoid(raw_noise))
    return log_lik + log_prior


def test_energy_gradient_against_finite_differences_of_an_independent_log_posterior():
    """N x the gradient of ``neg_log_posterior`` on a minibatch = minus the gradient of the log posterior.

    The reference is a numpy recomputation of eq. 6.17 with the N/|B| scaling
    of eq. 2.27, the log-normal and N(0, I) priors and the Jacobians of the
    softplus coordinates, differentiated by central finite differences: it
    checks the energy's scaling, its priors and their Jacobians.
    """
    from skbayes.nn.gp.bayesian_sparse_gp import neg_log_posterior

    X, y = _data(n=40)
    model = _small().fit(X, y)
    gp, likelihood = model.module_["gp"].double(), model.module_["likelihood"].double()
    gp.jitter = 0.0
    x, yt = torch.as_tensor(X[:10]), torch.as_tensor((y[:10] - y.mean()) / y.std())
    n_data = 40
    params = [gp.q_mean, gp.inducing_points, gp.kernel.raw_length_scale, gp.kernel.raw_variance, likelihood.raw_noise]
    for p in params:
        p.requires_grad_(True)
    energy = neg_log_posterior(gp, likelihood, x, yt, n_data, SparseGPPriors()) * n_data
    grads = torch.autograd.grad(energy, params)
    values = [p.detach().numpy().astype(np.float64).copy() for p in params]
    c = float(gp.mean_constant.detach().reshape(-1)[0])

    def log_post(vals):
        v, z, raw_ls, raw_var, raw_noise = vals
        return _numpy_log_posterior(v.reshape(-1), z, raw_ls.reshape(-1), float(raw_var.reshape(-1)[0]),
                                    float(raw_noise.reshape(-1)[0]), c, X[:10], yt.numpy(), n_data, likelihood._floor)

    h = 1e-6
    for i, (value, grad) in enumerate(zip(values, grads)):
        flat = value.reshape(-1)
        fd = np.empty_like(flat)
        for j in range(flat.size):
            up = [w.copy() for w in values]
            down = [w.copy() for w in values]
            up[i].reshape(-1)[j] += h
            down[i].reshape(-1)[j] -= h
            fd[j] = (log_post(up) - log_post(down)) / (2 * h)
        np.testing.assert_allclose(-grad.numpy().reshape(-1), fd, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("gradient_noise", [True, False])
def test_exact_gradients_sample_the_target_only_without_the_noise_correction(gradient_noise):
    """Scale-adapted SGHMC on N(0, diag(1, 0.1^2)) with exact gradients.

    The variance is checked against the target. Subtracting the minibatch-noise
    estimate (``gradient_noise=True``) from exact gradients makes the chains
    too cold (no injected noise at all on the narrow coordinate here); the full-batch
    setting ``gradient_noise=False`` samples the right variances (to the finite step's bias).
    """
    from skbayes.nn import SGHMC as SGHMCOptimizer

    scale = torch.tensor([1.0, 0.1], dtype=torch.float64)
    generator = torch.Generator().manual_seed(0)
    # 2000 independent chains, started at draws of the target.
    x = (torch.randn(2000, 2, dtype=torch.float64, generator=generator) * scale).requires_grad_(True)
    opt = SGHMCOptimizer([x], lr=0.05, n_data=1, friction=0.1, scale_adapted=True, n_adapt_steps=300,
                         gradient_noise=gradient_noise, generator=generator)
    draws = []
    for step in range(1500):
        opt.zero_grad()
        (0.5 * (x / scale).square().sum()).backward()
        opt.step()
        if step >= 700 and step % 20 == 0:
            draws.append(x.detach().clone())
    ratio = torch.cat(draws).var(0) / scale.square()
    if gradient_noise:
        assert ratio[1] < 0.5
    else:
        np.testing.assert_allclose(ratio.numpy(), 1.0, atol=0.15)


def test_rhat_is_split_into_log_likelihoods_and_hyperparameters():
    X, y = _data()
    diagnostics = _small().fit(X, y).inference_diagnostics_
    assert diagnostics["rhat"] == max(diagnostics["rhat_log_lik"], diagnostics["rhat_hyperparameters"])
