"""Observation noise models of BayesianMLPRegressor: heteroscedastic Gaussian and Student-t."""

import pickle

import numpy as np
import pytest
import torch
from scipy import stats
from scipy.special import expit, logsumexp
from torch import nn

from discovery import with_loop
from skbayes import BayesianMLPRegressor
from skbayes.inference import (
    MNF,
    PBP,
    SGHMC,
    WHVI,
    BayesByGAN,
    BayesByHypernet,
    DeepEnsemble,
    GPInducedPrior,
    MCDropout,
    MeanFieldVI,
    Vadam,
)
from skbayes.nn import (
    BayesianMLP,
    GaussianLikelihood,
    HeteroscedasticGaussianLikelihood,
    StudentTLikelihood,
    iblm_init,
)

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _softplus(x):
    return np.logaddexp(0.0, x)


def _noisy_data(n, seed):
    """x ~ U(0, 1), y = 0.5 sin(2 pi x) + sigma(x) eps with sigma(x) = 0.05 + 0.5 x."""
    rng = np.random.RandomState(seed)
    x = rng.uniform(0, 1, n)
    return x[:, None], 0.5 * np.sin(2 * np.pi * x) + (0.05 + 0.5 * x) * rng.randn(n)


# ------------------------------------------------------------------ likelihoods
def test_heteroscedastic_log_prob_is_the_gaussian_with_the_predicted_scale():
    k, init_std, min_std = 2, 0.3, 1e-3
    likelihood = HeteroscedasticGaussianLikelihood(k, init_std=init_std, min_std=min_std)
    rng = np.random.RandomState(0)
    f, y = rng.randn(3, 5, 2 * k), rng.randn(5, k)
    log_p = likelihood.log_prob(torch.tensor(y), torch.tensor(f))
    assert log_p.shape == (3, 5)
    shift = np.log(np.expm1(init_std - min_std))  # softplus^-1
    sigma = _softplus(f[..., k:] + shift) + min_std
    np.testing.assert_allclose(log_p.numpy(), stats.norm.logpdf(y, f[..., :k], sigma).sum(-1), rtol=1e-12)
    # a raw output of 0 is the initial noise level
    assert likelihood.noise_std(torch.zeros(1, 2 * k)).numpy() == pytest.approx(init_std)
    assert likelihood.output_width(k) == 2 * k and GaussianLikelihood.output_width(k) == k
    np.testing.assert_array_equal(likelihood.location(torch.tensor(f)).numpy(), f[..., :k])
    np.testing.assert_allclose(likelihood.noise_variance(torch.tensor(f)).numpy(), sigma**2, rtol=1e-12)
    with pytest.raises(ValueError, match="min_std"):
        HeteroscedasticGaussianLikelihood(1, init_std=1e-4)


def test_student_t_log_prob_variance_and_prior_against_scipy():
    likelihood = StudentTLikelihood(2, scale=0.4, df=5.0, n_members=3, dtype=torch.float64)
    with torch.no_grad():
        likelihood.raw_df.add_(torch.linspace(-1.0, 1.0, 6, dtype=torch.float64).reshape(3, 1, 2))
    rng = np.random.RandomState(1)
    f, y = rng.randn(3, 4, 2), rng.randn(4, 2)
    df, scale = likelihood.df.detach().numpy(), likelihood.scale.detach().numpy()
    assert df.shape == scale.shape == (3, 1, 2) and (df > 2).all()
    np.testing.assert_allclose(scale, 0.4)
    log_p = likelihood.log_prob(torch.tensor(y), torch.tensor(f))
    np.testing.assert_allclose(log_p.detach().numpy(), stats.t.logpdf(y, df, f, scale).sum(-1), rtol=1e-12)
    np.testing.assert_allclose(likelihood.noise_variance().detach().numpy(), stats.t.var(df, 0, scale), rtol=1e-12)
    # Gamma(2, rate 0.1) on nu - 2, carried to the raw value by its Jacobian sigmoid(raw)
    raw = likelihood.raw_df.detach().numpy()
    log_prior = stats.gamma.logpdf(df - 2.0, 2.0, scale=10.0) + np.log(expit(raw))
    np.testing.assert_allclose(likelihood.neg_log_prior().detach().numpy(), -log_prior.sum((1, 2)), rtol=1e-10)
    with pytest.raises(ValueError, match="df > 2"):
        StudentTLikelihood(1, df=2.0)


def test_sampling_matches_the_likelihood():
    rng = np.random.RandomState(0)
    # Gaussian: the formula of the regressor's sample_y, bit for bit
    gauss = GaussianLikelihood(2, 0.3, n_members=3, dtype=torch.float64)
    f = torch.tensor(rng.randn(3, 4, 2))
    expected = f.numpy() + np.random.RandomState(5).standard_normal((3, 4, 2)) * gauss.noise_std.detach().numpy()
    np.testing.assert_array_equal(gauss.sample(f, np.random.RandomState(5)).detach().numpy(), expected)
    # heteroscedastic and Student-t draws against the distributions (KS test on 20,000 draws of one row)
    hetero = HeteroscedasticGaussianLikelihood(1)
    f = torch.tensor([[[0.5, 1.2]]]).expand(20000, 1, 2)
    draws = hetero.sample(f, rng).numpy().ravel()
    sigma = float(hetero.noise_std(f[:1]).ravel()[0])
    assert stats.kstest(draws, stats.norm(0.5, sigma).cdf).pvalue > 1e-3
    student = StudentTLikelihood(1, scale=0.7, df=3.0, dtype=torch.float64)
    draws = student.sample(torch.full((20000, 1, 1), -1.0, dtype=torch.float64), rng).detach().numpy().ravel()
    df = float(student.df.detach()[0])
    assert stats.kstest(draws, stats.t(df, -1.0, 0.7).cdf).pvalue > 1e-3


def test_member_tensors_select_and_replace():
    likelihood = StudentTLikelihood(2, n_members=4, dtype=torch.float64)
    assert set(likelihood.member_tensors()) == {"raw_scale", "raw_df"}
    with torch.no_grad():
        likelihood.raw_df.copy_(torch.arange(8.0).reshape(4, 1, 2))
    index = torch.tensor([2, 0, 2])
    chosen = likelihood.select(index)
    np.testing.assert_array_equal(chosen.raw_df.detach().numpy(), likelihood.raw_df.detach().numpy()[[2, 0, 2]])
    assert isinstance(chosen.raw_df, nn.Parameter) and chosen.raw_df.shape == (3, 1, 2)
    assert not StudentTLikelihood(2).member_tensors() and not HeteroscedasticGaussianLikelihood(2).member_tensors()


def test_iblm_output_units_beyond_the_targets_regress_zero():
    """With 2k outputs, the hidden layers are fitted as for k and the raw noise units start at their initial level."""
    X = torch.randn(60, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    Y = torch.sin(X[:, :1]) + X[:, 1:2]
    layers = []
    for width in (1, 2):
        network = BayesianMLP(3, [6], width, inference="mfvi", generator=torch.Generator().manual_seed(1),
                              dtype=torch.float64)
        iblm_init(network, X, Y, prior_scale=1.0, noise_std=torch.tensor([0.1], dtype=torch.float64),
                  generator=torch.Generator().manual_seed(2))
        layers.append(network.layers)
    torch.testing.assert_close(layers[1][0].mu, layers[0][0].mu)
    assert layers[1][1].mu[:, 1].abs().max() == 0  # zero targets: zero posterior mean
    assert layers[1][1].mu[:, 0].abs().max() > 0


# ------------------------------------------------------------- the estimator
def _coverage_by_bin(model, X, y, n_bins=5):
    lower, upper = model.predict_interval(X, coverage=0.95)
    inside = (y >= lower) & (y <= upper)
    bins = np.minimum((X[:, 0] * n_bins).astype(int), n_bins - 1)
    return np.array([inside[bins == b].mean() for b in range(n_bins)])


def test_heteroscedastic_noise_tracks_sigma_x_and_covers_in_every_bin():
    """Noise std growing with x: the heteroscedastic model learns sigma(x) and covers at 95% everywhere.

    Tolerances: the learned aleatoric std within 25% of sigma(x) on a grid
    of 10 points, the coverage of 95% intervals within 0.04 of 0.95 in each
    of 5 bins of x (800 held-out rows a bin, binomial sd 0.008). The
    homoscedastic model, whose single sigma is about the RMS 0.33 of
    sigma(x), over-covers the quiet bin (> 0.98) and under-covers the noisy
    one (< 0.85).
    """
    X, y = _noisy_data(800, 0)
    X_test, y_test = _noisy_data(4000, 1)
    grid = np.linspace(0.05, 0.95, 10)[:, None]
    params = {"hidden_layer_sizes": (32,), "inference": DeepEnsemble(n_estimators=2, max_iter=200, learning_rate_init=0.02),
              "batch_size": 200, "random_state": 0}
    hetero = BayesianMLPRegressor(noise="heteroscedastic", **params).fit(X, y)
    sigma = 0.05 + 0.5 * grid[:, 0]
    np.testing.assert_allclose(hetero.predict_uncertainty(grid).aleatoric_std, sigma, rtol=0.25)
    np.testing.assert_allclose(_coverage_by_bin(hetero, X_test, y_test), 0.95, atol=0.04)

    homo = BayesianMLPRegressor(noise="homoscedastic", **params).fit(X, y)
    coverage = _coverage_by_bin(homo, X_test, y_test)
    assert coverage[0] > 0.98 and coverage[-1] < 0.85
    lpd = {name: m.log_predictive_density(X_test, y_test).mean() for name, m in (("hetero", hetero), ("homo", homo))}
    assert lpd["hetero"] > lpd["homo"] + 0.2


def test_student_t_is_robust_to_outliers():
    """A few gross outliers pull the Gaussian fit far more than the Student-t fit."""
    rng = np.random.RandomState(0)
    X = rng.uniform(-1, 1, (300, 1))
    truth = np.sin(2 * X[:, 0])
    y = truth + 0.1 * rng.randn(300)
    y[:15] += 8.0  # 5% gross outliers
    grid = np.linspace(-0.9, 0.9, 20)[:, None]
    params = {"hidden_layer_sizes": (32,), "inference": DeepEnsemble(n_estimators=2, max_iter=200, learning_rate_init=0.01),
              "batch_size": 100, "random_state": 0}
    errors = {}
    for noise in ("homoscedastic", "student_t"):
        model = BayesianMLPRegressor(noise=noise, **params).fit(X, y)
        errors[noise] = np.sqrt(np.mean((model.predict(grid) - np.sin(2 * grid[:, 0])) ** 2))
    assert errors["student_t"] < 0.1 < errors["homoscedastic"] and errors["student_t"] < errors["homoscedastic"] / 3


SUPPORTED = [
    MeanFieldVI(),
    MeanFieldVI(init="iblm"),
    MCDropout(),
    Vadam(),
    DeepEnsemble(n_estimators=2),
    SGHMC(burn_in=2, thinning=1, n_kept_samples=3),
    SGHMC(burn_in=2, thinning=1, n_kept_samples=3,
          prior=GPInducedPrior(n_measurement_points=8, n_function_draws=16, n_critic_steps=1, max_iter=2)),
    WHVI(n_flows=1),
    MNF(hidden_size=8),
    BayesByHypernet(generator_hidden_sizes=(8,), n_mc_train=2, n_prior_draws=2),
    BayesByGAN(generator_hidden_sizes=(8,), discriminator_hidden_sizes=(8,), n_mc_train=2, n_prior_draws=2),
]


@pytest.mark.parametrize("noise", ["heteroscedastic", "student_t"])
@pytest.mark.parametrize("method", SUPPORTED, ids=repr)
def test_every_method_but_pbp_fits_both_noise_models(method, noise):
    X, y = _noisy_data(40, 0)
    Y = np.column_stack([y, -y])
    model = BayesianMLPRegressor((8,), inference=with_loop(method, max_iter=3, n_mc_predict=4), noise=noise,
                                 random_state=0).fit(X, Y)
    assert model.module_["network"](torch.as_tensor(X)).shape[-1] == (4 if noise == "heteroscedastic" else 2)
    parts = model.predict_uncertainty(X[:5])
    assert parts.mean.shape == parts.aleatoric_std.shape == (5, 2)
    assert np.isfinite(parts.std).all() and (parts.aleatoric_std > 0).all()
    np.testing.assert_allclose(parts.std**2, parts.epistemic_std**2 + parts.aleatoric_std**2, rtol=1e-10)
    lower, upper = model.predict_interval(X[:5])
    assert (lower < parts.mean).all() and (parts.mean < upper).all()
    assert model.sample_y(X[:5], n_samples=3).shape == (5, 2, 3)
    assert np.isfinite(model.log_predictive_density(X, Y)).all()


@pytest.mark.parametrize("noise", ["heteroscedastic", "student_t"])
def test_pbp_and_a_fixed_heteroscedastic_noise_are_refused(noise):
    X, y = _noisy_data(20, 0)
    with pytest.raises(ValueError, match=f"PBP.*noise='{noise}'|noise='{noise}'.*PBP"):
        BayesianMLPRegressor(inference=PBP(max_iter=1), noise=noise, hidden_layer_sizes=(50,)).fit(X, y)
    with pytest.raises(ValueError, match="noise_std='learn'"):
        BayesianMLPRegressor(inference=MeanFieldVI(max_iter=1), noise="heteroscedastic", noise_std=0.2, hidden_layer_sizes=(50,)).fit(X, y)


def test_sample_y_agrees_with_the_predictive_moments_and_interval():
    X, y = _noisy_data(200, 0)
    rows = np.array([[0.1], [0.5], [0.9]])
    params = {"hidden_layer_sizes": (16,), "inference": DeepEnsemble(n_estimators=3, max_iter=30, learning_rate_init=0.02),
              "batch_size": 50, "random_state": 0}
    hetero = BayesianMLPRegressor(noise="heteroscedastic", **params).fit(X, y)
    draws = hetero.sample_y(rows, n_samples=20000, random_state=1)
    mean, std = hetero.predict(rows, return_std=True)
    # Monte-Carlo: the mean within 4 standard errors, the std within 3%
    assert np.all(np.abs(draws.mean(1) - mean) < 4 * std / np.sqrt(20000))
    np.testing.assert_allclose(draws.std(1), std, rtol=0.03)
    # the interval holds the central 95% of the draws (all three: heteroscedastic, Student-t, Gaussian)
    for noise in ("heteroscedastic", "student_t", "homoscedastic"):
        model = hetero if noise == "heteroscedastic" else BayesianMLPRegressor(noise=noise, **params).fit(X, y)
        draws = model.sample_y(rows, n_samples=20000, random_state=2)
        lower, upper = model.predict_interval(rows)
        inside = ((draws >= lower[:, None]) & (draws <= upper[:, None])).mean(1)
        np.testing.assert_allclose(inside, 0.95, atol=0.01)


def test_interval_and_density_are_the_exact_mixture_of_the_members():
    """Brute force from the members' outputs with scipy: CDF at the interval ends, log predictive density."""
    X, y = _noisy_data(100, 0)
    for noise in ("heteroscedastic", "student_t"):
        model = BayesianMLPRegressor((8,), inference=DeepEnsemble(n_estimators=3, max_iter=20), noise=noise, random_state=0).fit(X, 3.0 * y + 1.0)
        likelihood = model.module_["likelihood"]
        with torch.no_grad():
            f = model.module_["network"](torch.as_tensor(X[:10])).numpy()  # (3, 10, width)
        mean, scale = model._y_mean, model._y_scale
        if noise == "heteroscedastic":
            dist = stats.norm(f[..., :1] * scale + mean, likelihood.noise_std(torch.tensor(f)).numpy() * scale)
        else:
            dist = stats.t(likelihood.df.detach().numpy(), f * scale + mean, likelihood.scale.detach().numpy() * scale)
        lower, upper = model.predict_interval(X[:10], coverage=0.9)
        np.testing.assert_allclose(dist.cdf(lower[None, :, None]).mean(0)[:, 0], 0.05, atol=1e-9)
        np.testing.assert_allclose(dist.cdf(upper[None, :, None]).mean(0)[:, 0], 0.95, atol=1e-9)
        target = (3.0 * y[:10] + 1.0)[None, :, None]
        expected = logsumexp(dist.logpdf(target)[..., 0], axis=0) - np.log(3)
        np.testing.assert_allclose(model.log_predictive_density(X[:10], 3.0 * y[:10] + 1.0), expected, rtol=1e-9)


def test_student_t_density_of_weight_draws_is_the_monte_carlo_mixture():
    X, y = _noisy_data(60, 0)
    model = BayesianMLPRegressor((8,), inference=MeanFieldVI(max_iter=5, n_mc_predict=7), noise="student_t", random_state=0).fit(X, y)
    parameters, _ = model._draw_parameters(7, model._predict_seed)
    with torch.no_grad():
        f = model.module_["network"].forward_with(torch.as_tensor(X), parameters).numpy()  # (7, n, 1)
    likelihood = model.module_["likelihood"]
    df, s = likelihood.df.detach().numpy(), likelihood.scale.detach().numpy()
    log_p = stats.t.logpdf(((y - model._y_mean) / model._y_scale)[:, None], df, f, s)[..., 0]
    expected = logsumexp(log_p, axis=0) - np.log(7) - np.log(model._y_scale[0])
    np.testing.assert_allclose(model.log_predictive_density(X, y), expected, rtol=1e-9)


def test_noise_std_attributes():
    X, y = _noisy_data(100, 0)
    hetero = BayesianMLPRegressor((8,), inference=MeanFieldVI(max_iter=5), noise="heteroscedastic", random_state=0).fit(X, y)
    # the RMS over the training rows of the predicted noise
    aleatoric = hetero.predict_uncertainty(X).aleatoric_std
    np.testing.assert_allclose(hetero.noise_std_, np.sqrt(np.mean(aleatoric**2)), rtol=1e-10)
    # Student-t with a fixed scale, in the units of y; the aleatoric std is the t's std
    student = BayesianMLPRegressor((8,), inference=MeanFieldVI(max_iter=5), noise="student_t", noise_std=0.3, random_state=0).fit(X, 2 * y)
    np.testing.assert_allclose(student.noise_std_, 0.3)
    df = float(student.module_["likelihood"].df.detach()[0])
    np.testing.assert_allclose(student.predict_uncertainty(X[:2]).aleatoric_std, 0.3 * np.sqrt(df / (df - 2)))


def test_sghmc_keeps_the_student_t_parameters_of_every_sample():
    X, y = _noisy_data(50, 0)
    model = BayesianMLPRegressor((8,), noise="student_t", inference=SGHMC(n_chains=2, burn_in=3, thinning=1,
                                 n_kept_samples=4), random_state=0).fit(X, y)
    likelihood = model.module_["likelihood"]
    assert likelihood.df.shape == likelihood.scale.shape == (8, 1, 1)
    assert len(np.unique(likelihood.df.detach().numpy())) == 8  # sampled, one value per kept sample
    # a warm start continues every chain from its last sample, noise parameters included
    last = likelihood.raw_df.detach()[[3, 7]]
    model.set_params(warm_start=True, inference=SGHMC(n_chains=2, burn_in=0, thinning=1, n_kept_samples=1))
    model.fit(X, y)
    assert model.module_["likelihood"].raw_df.shape == (2, 1, 1)
    assert not torch.equal(model.module_["likelihood"].raw_df.detach(), last)  # moved on from there


def test_reproducible_picklable_and_warm_start_follows_the_noise():
    X, y = _noisy_data(60, 0)
    for noise in ("heteroscedastic", "student_t"):
        params = {"hidden_layer_sizes": (8,), "noise": noise, "inference": MeanFieldVI(max_iter=5), "random_state": 3}
        a, b = BayesianMLPRegressor(**params).fit(X, y), BayesianMLPRegressor(**params).fit(X, y)
        np.testing.assert_array_equal(a.predict(X, return_std=True), b.predict(X, return_std=True))
        np.testing.assert_array_equal(a.sample_y(X, 3), b.sample_y(X, 3))
        c = pickle.loads(pickle.dumps(a))
        np.testing.assert_array_equal(np.asarray(c.predict_interval(X)), np.asarray(a.predict_interval(X)))
        np.testing.assert_array_equal(c.log_predictive_density(X, y), a.log_predictive_density(X, y))
    model = BayesianMLPRegressor((8,), inference=MeanFieldVI(max_iter=3), warm_start=True, random_state=0, noise="homoscedastic").fit(X, y)
    model.set_params(noise="heteroscedastic").fit(X, y)  # a new network: two outputs per target
    assert model.module_["network"].layers[-1].out_features == 2


def test_module_regressor_gets_twice_the_outputs():
    X, y = _noisy_data(40, 0)

    class Net(nn.Sequential):
        def __init__(self, n_features, n_outputs):
            super().__init__(nn.Linear(n_features, 8), nn.Tanh(), nn.Linear(8, n_outputs))

    model = BayesianMLPRegressor(module=Net, noise="heteroscedastic", random_state=0, inference=MeanFieldVI(max_iter=3)).fit(X, y)
    assert model.predict_uncertainty(X[:3]).aleatoric_std.shape == (3,)
    with pytest.raises(ValueError, match="twice that with heteroscedastic noise"):
        BayesianMLPRegressor(module=Net(1, 1), noise="heteroscedastic", inference=MeanFieldVI(max_iter=1)).fit(X, y)
