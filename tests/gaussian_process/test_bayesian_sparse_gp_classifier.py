"""The Bayesian sparse GP for classification: SparseGPClassifier(inference=SGHMC(...)) (Rossi 2022, section 6.3)."""

import pickle
import warnings

import numpy as np
import pytest
import torch
from scipy import integrate, stats
from scipy.linalg import cholesky, solve_triangular
from sklearn.datasets import load_iris, make_moons
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process.kernels import RBF
from sklearn.model_selection import GridSearchCV
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import check_estimator

from skbayes import SparseGPClassifier
from skbayes.inference import PBP, SGHMC, MCDropout, SampledSparseGP, SparseVariational
from skbayes.nn import BinaryLikelihood, RobustMaxLikelihood
from skbayes.nn.gp.bayesian_sparse_gp import SparseGPPriors, neg_log_posterior


def _sghmc(**params):
    settings = {"n_chains": 2, "burn_in": 30, "thinning": 2, "n_kept_samples": 5, "step_size": 1e-2,
                "friction": 0.3, **params}
    return SGHMC(**settings)


def _small(max_iter=40, sampler=None, **params):
    """A sampled classifier: SGHMC after a short variational start of ``max_iter`` epochs."""
    start = SparseVariational(max_iter=max_iter, learning_rate_init=0.05)
    settings = {"n_inducing": 8, "random_state": 0,
                "inference": SampledSparseGP(sampler or _sghmc(), start=start), **params}
    return SparseGPClassifier(**settings)


def _moons(n=120, seed=0):
    X, y = make_moons(n, noise=0.3, random_state=seed)
    return X, y


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        yield


@pytest.fixture(scope="module")
def binary_fit():
    X, y = _moons()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return X, y, _small().fit(X, y)


# ------------------------------------------------------------ independent numpy versions
def _softplus(x):
    return np.logaddexp(0.0, x)


def _rbf(a, b, length_scale, variance):
    d = (a[:, None, :] - b[None, :, :]) / length_scale
    return variance * np.exp(-0.5 * np.square(d).sum(-1))


def _fitc(x, z, v, c, length_scale, variance, jitter):
    """FITC conditional mean (n,) or (n, L) and variance (n,) of f given whitened v (Rossi 2022, eqs. 6.9-6.10).

    ``jitter`` is relative to the signal variance (the mean diagonal of K_zz), as the model adds it.
    """
    chol = cholesky(_rbf(z, z, length_scale, variance) + jitter * variance * np.eye(len(z)), lower=True)
    a = solve_triangular(chol, _rbf(z, x, length_scale, variance), lower=True)
    mean = a.T @ (v if v.ndim == 1 else v.T) + c
    return mean, np.maximum(variance - np.square(a).sum(0), 0.0)


def _log_expected_probit(sign, mean, var):
    """log int Phi(sign f) N(f | mean, var) df by adaptive quadrature."""
    sd = np.sqrt(var)

    def integrand(f):
        return stats.norm.cdf(sign * f) * stats.norm.pdf(f, mean, sd)

    value, _ = integrate.quad(integrand, mean - 12 * sd, mean + 12 * sd, epsabs=0, epsrel=1e-11, limit=200)
    return np.log(value)


def _log_lognormal_raw(raw, loc, scale):
    """log density of the raw (softplus) coordinate of a log-normal variable: p(softplus(raw)) softplus'(raw)."""
    value = _softplus(raw)
    return stats.lognorm.logpdf(value, s=scale, scale=np.exp(loc)) + np.log(1.0 / (1.0 + np.exp(-raw)))


# ------------------------------------------------------------ the energy (eq. 6.17 with eq. 6.14)
def test_probit_energy_against_quadrature_and_scipy_priors(binary_fit):
    X, y, model = binary_fit
    gp, likelihood = model.module_["gp"], model.module_["likelihood"]
    assert likelihood.link == "probit" and gp.q_mean.requires_grad and gp.inducing_points.requires_grad
    priors = SparseGPPriors()
    rows = np.arange(0, 120, 7)
    n_data = X.shape[0]
    x_t, y_t = torch.as_tensor(X[rows]), torch.as_tensor(y[rows], dtype=torch.float64)
    with torch.no_grad():
        energy = float(neg_log_posterior(gp, likelihood, x_t, y_t, n_data, priors))
    # The same quantity from the stored tensors, with numpy, scipy and 1-D adaptive quadrature.
    z = gp.inducing_points.detach().numpy()
    v = gp.q_mean.detach().numpy()
    raw_ls = gp.kernel.raw_length_scale.detach().numpy()
    raw_var = float(gp.kernel.raw_variance.detach())
    mean, var = _fitc(X[rows], z, v, float(gp.mean_constant), _softplus(raw_ls), _softplus(raw_var), gp.jitter)
    data = np.mean([_log_expected_probit(2.0 * label - 1.0, m, s2) for label, m, s2 in zip(y[rows], mean, var)])
    log_prior = (
        stats.norm.logpdf(v).sum() + stats.norm.logpdf(z).sum()
        + _log_lognormal_raw(raw_ls, 0.0, 1.0).sum() + _log_lognormal_raw(raw_var, np.log(0.05), 1.0)
    )
    np.testing.assert_allclose(energy, -data - log_prior / n_data, rtol=1e-9)


def test_logit_and_robustmax_log_expectations_against_quadrature():
    rng = np.random.RandomState(0)
    mean, var = rng.randn(6) * 2, rng.uniform(0.01, 3.0, 6)
    y = np.array([0, 1, 1, 0, 1, 0])
    got = BinaryLikelihood("logit", n_quadrature=60).log_predictive_prob(
        torch.as_tensor(y), torch.as_tensor(mean), torch.as_tensor(var)).numpy()
    for n in range(6):
        sign, sd = 2.0 * y[n] - 1.0, np.sqrt(var[n])
        value, _ = integrate.quad(lambda f: stats.norm.pdf(f, mean[n], sd) / (1.0 + np.exp(-sign * f)),
                                  mean[n] - 12 * sd, mean[n] + 12 * sd, epsrel=1e-11)
        np.testing.assert_allclose(got[n], np.log(value), rtol=1e-7)
    # Robust-max: Pr(f_y is the largest) by 1-D quadrature over f_y, then the mislabelling mixture.
    mean, var = rng.randn(4, 3), rng.uniform(0.1, 2.0, (4, 3))
    y = np.array([0, 2, 1, 2])
    eps = 1e-3
    got = RobustMaxLikelihood(3, epsilon=eps, n_quadrature=60).log_predictive_prob(
        torch.as_tensor(y), torch.as_tensor(mean), torch.as_tensor(var)).numpy()
    for n in range(4):
        c, sd = y[n], np.sqrt(var[n])
        others = [k for k in range(3) if k != c]

        def integrand(f):
            return stats.norm.pdf(f, mean[n, c], sd[c]) * np.prod([stats.norm.cdf((f - mean[n, k]) / sd[k])
                                                                     for k in others])

        p_max, _ = integrate.quad(integrand, mean[n, c] - 12 * sd[c], mean[n, c] + 12 * sd[c], epsrel=1e-11)
        np.testing.assert_allclose(got[n], np.log((1 - eps) * p_max + eps / 2 * (1 - p_max)), rtol=1e-6)


# ------------------------------------------------------------ prediction
def _per_sample_probit(model, X):
    """Phi(mu_s / sqrt(1 + v_s)) of every kept sample, from the stored samples with numpy, shape (S, n)."""
    module = model.module_
    samples = module["samples"]

    def stacked(name):
        if name in samples.names:
            return samples.stacked(name).numpy()
        value = dict(module.named_parameters()) | dict(module.named_buffers())
        return np.repeat(value[name].detach().numpy()[None], samples.n_samples, axis=0)

    v, z = stacked("gp.q_mean"), stacked("gp.inducing_points")
    ls, var = _softplus(stacked("gp.kernel.raw_length_scale")), _softplus(stacked("gp.kernel.raw_variance"))
    c = float(module["gp"].mean_constant)
    out = []
    for s in range(samples.n_samples):
        mean, cond_var = _fitc(X, z[s], v[s], c, ls[s], var[s], module["gp"].jitter)
        out.append(stats.norm.cdf(mean / np.sqrt(1.0 + cond_var)))
    return np.stack(out)


def test_predict_proba_is_the_average_of_per_sample_probabilities(binary_fit):
    X, y, model = binary_fit
    samples = model.module_["samples"]
    assert samples.n_samples == 10 and model.inference_diagnostics_["n_kept_samples"] == 10
    assert len(set(samples.names) & {"gp.q_mean", "gp.inducing_points", "gp.kernel.raw_length_scale"}) == 3
    assert np.ptp(samples.stacked("gp.q_mean").numpy(), axis=0).max() > 0  # the samples differ
    Xq = np.random.RandomState(3).randn(25, 2)
    p1 = _per_sample_probit(model, Xq)  # (S, n)
    proba = model.predict_proba(Xq)
    np.testing.assert_allclose(proba[:, 1], p1.mean(0), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(proba.sum(1), 1.0)
    np.testing.assert_array_equal(model.predict(Xq), model.classes_[(p1.mean(0) > 0.5).astype(int)])
    # The shared measures: the kept samples are the draws.
    draws = np.stack([1 - p1, p1], axis=-1)
    mean_p = draws.mean(0)
    total = -(mean_p * np.log(mean_p)).sum(-1)
    expected = -(draws * np.log(draws)).sum(-1).mean(0)
    unc = model.predict_uncertainty(Xq)
    np.testing.assert_allclose(unc.predictive_entropy, total, rtol=1e-9)
    np.testing.assert_allclose(unc.expected_entropy, expected, rtol=1e-9)
    np.testing.assert_allclose(unc.mutual_information, np.maximum(total - expected, 0), atol=1e-12)
    np.testing.assert_allclose(model.score_ood(Xq), unc.mutual_information)
    decision = model.decision_function(Xq)
    np.testing.assert_allclose(decision, np.log(proba[:, 1] / proba[:, 0]), rtol=1e-9)
    mean, std = model.predict_latent(Xq)
    assert mean.shape == std.shape == (25,) and np.all(std > 0)


def test_accuracy_on_moons_close_to_the_variational_classifier():
    X, y = _moons(300, seed=0)
    X_test, y_test = _moons(1000, seed=1)
    scaler = StandardScaler().fit(X)
    X, X_test = scaler.transform(X), scaler.transform(X_test)
    fit = SparseVariational(max_iter=200, learning_rate_init=0.05)
    settings = {"n_inducing": 20, "random_state": 0}
    variational = SparseGPClassifier(**settings, inference=fit).fit(X, y)
    sampled = SparseGPClassifier(
        **settings,
        inference=SampledSparseGP(SGHMC(n_chains=2, burn_in=100, thinning=2, n_kept_samples=20), start=fit),
    ).fit(X, y)
    acc_v, acc_s = variational.score(X_test, y_test), sampled.score(X_test, y_test)
    assert acc_s > 0.85 and abs(acc_s - acc_v) < 0.03
    np.testing.assert_allclose(sampled.predict_proba(X_test), variational.predict_proba(X_test), atol=0.25)


def test_multiclass_uses_robustmax_with_one_sampled_latent_per_class():
    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    model = _small(n_inducing=10).fit(X, y)
    assert model.likelihood_ == "robustmax" and model.module_["samples"].stacked("gp.q_mean").shape == (10, 3, 10)
    proba = model.predict_proba(X)
    np.testing.assert_allclose(proba.sum(1), 1.0)
    assert model.score(X, y) > 0.8
    assert model.predict_uncertainty(X).mutual_information.shape == (150,)
    assert model.predict_latent(X)[0].shape == (150, 3)
    with pytest.raises(ValueError, match="softmax"):
        _small(likelihood="softmax").fit(X, y)


# ------------------------------------------------------------ estimator behaviour
def test_same_random_state_same_result(binary_fit):
    X, y, a = binary_fit
    b = _small().fit(X, y)
    c = _small(random_state=1).fit(X, y)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    np.testing.assert_array_equal(a.inducing_points_, b.inducing_points_)
    assert not np.allclose(a.predict_proba(X), c.predict_proba(X))


def test_warm_start_starts_afresh(binary_fit):
    X, y, model = binary_fit
    again = _small(warm_start=True).fit(X, y).fit(X, y)
    np.testing.assert_array_equal(again.predict_proba(X), model.predict_proba(X))


def test_check_estimator():
    check_estimator(_small(n_inducing=5, max_iter=10, sampler=_sghmc(burn_in=6, n_kept_samples=4, thinning=1)))


def test_fitted_attributes_and_pickle(binary_fit):
    X, y, model = binary_fit
    assert isinstance(model.inference_, SampledSparseGP) and model.inference_ is not model.inference
    assert isinstance(model.inference_.sampling_method("SparseGPClassifier"), SGHMC)
    assert {"rhat", "rhat_log_lik", "rhat_hyperparameters"} <= set(model.inference_diagnostics_)
    assert model.length_scale_.shape == (2,) and model.signal_std_ > 0 and model.inducing_points_.shape == (8, 2)
    # The sampler's epochs: the burn-in, then `thinning` per kept sample.
    assert len(model.loss_curve_) == model.n_iter_ == 30 + 2 * 5
    loaded = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))


def test_grid_search_over_inference():
    X, y = _moons(80)
    search = GridSearchCV(
        SparseGPClassifier(n_inducing=8, random_state=0),
        {"inference": [SparseVariational(max_iter=20), SampledSparseGP(
            _sghmc(burn_in=10, n_kept_samples=4), start=SparseVariational(max_iter=20))]}, cv=2,
    ).fit(X, y)
    assert len(search.cv_results_["mean_test_score"]) == 2


@pytest.mark.parametrize("method", [MCDropout(), PBP()])
def test_refused_inference(method):
    X, y = _moons(40)
    with pytest.raises(ValueError, match=type(method).__name__):
        SparseGPClassifier(inference=SampledSparseGP(method)).fit(X, y)


def test_refused_kernel_object_and_default_is_variational():
    X, y = _moons(60)
    with pytest.raises(ValueError, match="string kernel"):
        _small(kernel=RBF()).fit(X, y)
    default = SparseGPClassifier(n_inducing=8, random_state=0).fit(X, y)
    explicit = SparseGPClassifier(n_inducing=8, random_state=0, inference=SparseVariational()).fit(X, y)
    assert default.inference == "variational" and isinstance(default.inference_, SparseVariational)
    np.testing.assert_array_equal(default.predict_proba(X), explicit.predict_proba(X))
    assert "samples" not in default.module_ and not hasattr(default, "inference_diagnostics_")
