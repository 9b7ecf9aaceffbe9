"""BayesianGaussianMixture: parity with scikit-learn's CAVI, the SVI step, the Student-t predictive, streaming."""

import warnings

import numpy as np
import pytest
import torch
from scipy import stats
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import BayesianGaussianMixture as SklearnBGM

from skbayes import BayesianGaussianMixture
from skbayes.nn.variational import gaussian_mixture as gm

COVARIANCE_TYPES = ["full", "diag"]
WEIGHT_PRIORS = ["dirichlet_process", "dirichlet_distribution"]

_rng = np.random.RandomState(0)
X_SMALL = np.r_[_rng.randn(60, 3) * 0.5 + 2, _rng.randn(50, 3) - 1, _rng.randn(40, 3) * 0.7]
CENTRES = np.array([[-6.0, 0.0], [0.0, 6.0], [6.0, -2.0]])
X_BLOBS = np.vstack([c + 0.5 * np.random.RandomState(i).randn(1000, 2) for i, c in enumerate(CENTRES)])
X_BLOBS = X_BLOBS[np.random.RandomState(9).permutation(len(X_BLOBS))]


def _fit_quietly(model, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X)


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
@pytest.mark.parametrize("weight_prior", WEIGHT_PRIORS)
@pytest.mark.parametrize("init_params", ["random", "kmeans", "k-means++", "random_from_data"])
def test_batch_reproduces_sklearn(covariance_type, weight_prior, init_params):
    """Same priors and the same initial responsibilities (same seed, same draws): same CAVI iterates."""
    params = dict(n_components=4, covariance_type=covariance_type, weight_concentration_prior_type=weight_prior,
                  init_params=init_params, random_state=3, max_iter=25, tol=1e-9)
    ours = _fit_quietly(BayesianGaussianMixture(**params, device="cpu"), X_SMALL)
    ref = _fit_quietly(SklearnBGM(**params), X_SMALL)
    assert ours.n_iter_ == ref.n_iter_ and ours.converged_ == ref.converged_
    np.testing.assert_allclose(ours.lower_bounds_, ref.lower_bounds_, rtol=1e-10, atol=1e-8)
    assert ours.lower_bound_ == pytest.approx(ref.lower_bound_, abs=1e-8)
    for name in ["weights_", "means_", "covariances_", "precisions_", "precisions_cholesky_", "mean_precision_",
                 "degrees_of_freedom_", "mean_prior_", "covariance_prior_"]:
        np.testing.assert_allclose(getattr(ours, name), getattr(ref, name), rtol=1e-8, atol=1e-8, err_msg=name)
    np.testing.assert_allclose(ours.weight_concentration_, ref.weight_concentration_, rtol=1e-8)
    np.testing.assert_allclose(ours.predict_proba(X_SMALL), ref.predict_proba(X_SMALL), atol=1e-8)
    np.testing.assert_array_equal(ours.predict(X_SMALL), ref.predict(X_SMALL))


def test_warm_start_continues_like_sklearn():
    params = dict(n_components=3, init_params="random", random_state=2, max_iter=3, warm_start=True)
    ours, ref = BayesianGaussianMixture(**params, device="cpu"), SklearnBGM(**params)
    for _ in range(3):
        _fit_quietly(ours, X_SMALL)
        _fit_quietly(ref, X_SMALL)
        np.testing.assert_allclose(ours.lower_bounds_, ref.lower_bounds_, rtol=1e-10)
    np.testing.assert_allclose(ours.means_, ref.means_, rtol=1e-8)


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
def test_user_priors_reproduce_sklearn(covariance_type):
    d = X_SMALL.shape[1]
    cov_prior = np.eye(d) * 2.0 if covariance_type == "full" else np.full(d, 2.0)
    params = dict(n_components=3, covariance_type=covariance_type, init_params="random", random_state=1, max_iter=5,
                  weight_concentration_prior=0.5, mean_precision_prior=0.3, mean_prior=np.ones(d),
                  degrees_of_freedom_prior=d + 1.5, covariance_prior=cov_prior, reg_covar=1e-4)
    ours = _fit_quietly(BayesianGaussianMixture(**params, device="cpu"), X_SMALL)
    ref = _fit_quietly(SklearnBGM(**params), X_SMALL)
    np.testing.assert_allclose(ours.lower_bounds_, ref.lower_bounds_, rtol=1e-10)
    np.testing.assert_allclose(ours.covariances_, ref.covariances_, rtol=1e-8)


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
@pytest.mark.parametrize("weight_prior", WEIGHT_PRIORS)
def test_svi_with_all_rows_and_unit_step_is_one_cavi_step(covariance_type, weight_prior):
    """One minibatch of all N rows (scale N/B = 1) and rho_1 = (1 + 0)^-delta = 1: the CAVI update."""
    params = dict(n_components=3, covariance_type=covariance_type, weight_concentration_prior_type=weight_prior,
                  init_params="random", random_state=0, max_iter=1, device="cpu")
    cavi = _fit_quietly(BayesianGaussianMixture(**params), X_SMALL)
    svi = _fit_quietly(BayesianGaussianMixture(**params, learning_method="online", batch_size=len(X_SMALL),
                                               learning_offset=0.0), X_SMALL)
    for name in ["weights_", "means_", "covariances_", "precisions_cholesky_", "degrees_of_freedom_"]:
        np.testing.assert_allclose(getattr(svi, name), getattr(cavi, name), rtol=1e-10, atol=1e-12, err_msg=name)
    assert svi.n_steps_ == 1


def _bishop_update(X, resp, beta0, m0, nu0, w0_inv):
    """CAVI global update in moment form (Bishop 2006, eqs. 10.58-10.63)."""
    nk = resp.sum(0)
    xbar = resp.T @ X / nk[:, None]
    beta = beta0 + nk
    means = (beta0 * m0 + nk[:, None] * xbar) / beta[:, None]
    w_inv = []
    for k in range(resp.shape[1]):
        diff = X - xbar[k]
        s = (resp[:, k, None] * diff).T @ diff
        dm = xbar[k] - m0
        w_inv.append(w0_inv + s + beta0 * nk[k] / (beta0 + nk[k]) * np.outer(dm, dm))
    return beta, means, np.array(w_inv), nu0 + nk


def test_natural_parameter_averaging_recovers_the_full_update():
    """With fixed responsibilities, rho_t = 1/t over B-row minibatches that partition the rows averages the
    lambda_hat, which is zeta + all statistics: Bishop's update. Averaging m_k and W_k^-1 instead is not."""
    rng = np.random.RandomState(4)
    X = rng.randn(120, 2) * [1.0, 2.0] + [3.0, -1.0]
    resp = rng.dirichlet(np.ones(3), size=120)
    m0, w0_inv = np.array([0.5, 0.0]), np.array([[2.0, 0.3], [0.3, 1.0]])
    to = lambda a: torch.tensor(a, dtype=torch.float64)  # noqa: E731
    prior = gm.prior_natural_parameters(3, 0.2, 0.7, to(m0), 2.5, to(w0_inv), "full", "dirichlet_distribution")
    params = None
    naive_m, naive_w = [], []
    for t, rows in enumerate(np.split(np.arange(120), 4), start=1):
        stats_b = gm.sufficient_statistics(to(X[rows]), to(resp[rows]), "full")
        lambda_hat = gm.posterior_natural_parameters(prior, stats_b, scale=120 / 30)
        params = lambda_hat if params is None else gm.blend(params, lambda_hat, 1.0 / t)
        m_hat, w_hat = gm.moment_parameters(lambda_hat, "full")
        naive_m.append(m_hat.numpy())
        naive_w.append(w_hat.numpy())
    beta, means, w_inv, nu = _bishop_update(X, resp, 0.7, m0, 2.5, w0_inv)
    got_means, got_w_inv = gm.moment_parameters(params, "full")
    np.testing.assert_allclose(params.mean_precision.numpy(), beta, rtol=1e-10)
    np.testing.assert_allclose(params.degrees_of_freedom.numpy(), nu, rtol=1e-10)
    np.testing.assert_allclose(got_means.numpy(), means, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(got_w_inv.numpy(), w_inv, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(params.concentration.numpy(), 0.2 + resp.sum(0), rtol=1e-10)
    # The pitfall: averaging moment parameters gives a different W^-1.
    assert np.abs(np.mean(naive_w, axis=0) - w_inv).max() > 1.0


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
@pytest.mark.parametrize("weight_prior", WEIGHT_PRIORS)
def test_elbo_is_the_reduced_bound_plus_a_constant_after_cavi(covariance_type, weight_prior):
    """Right after each M-step the full ELBO and scikit-learn's reduced bound differ by a constant
    (reg_covar = 0: the regularisation is not a statistic of the data); CAVI never lowers the ELBO."""
    model = _fit_quietly(BayesianGaussianMixture(
        n_components=4, covariance_type=covariance_type, weight_concentration_prior_type=weight_prior,
        init_params="random", random_state=3, max_iter=1, reg_covar=0.0, device="cpu"), X_SMALL)
    Xc, params = model._centred(X_SMALL), model._params()
    differences, elbos = [], []
    for _ in range(6):
        _, log_resp = gm.e_step(Xc, params, covariance_type)
        params = model._m_step(Xc, log_resp.exp())
        elbo = float(gm.elbo(Xc, log_resp, params, model._prior, covariance_type))
        differences.append(elbo - float(gm.reduced_lower_bound(log_resp, params, covariance_type)))
        elbos.append(elbo)
    assert np.ptp(differences) < 1e-9
    assert np.all(np.diff(elbos) > -1e-9)


def test_gauss_wishart_kl_matches_monte_carlo():
    """KL(q(mu, Lambda) || p(mu, Lambda)) of the ELBO against draws from scipy's Wishart and a normal."""
    to = lambda a: torch.tensor(a, dtype=torch.float64)  # noqa: E731
    prior = gm.prior_natural_parameters(1, 1.0, 0.5, to([0.2, -0.1]), 3.0, to([[1.5, 0.2], [0.2, 0.8]]), "full",
                                        "dirichlet_distribution")
    X = to(np.random.RandomState(0).randn(12, 2) + [1.0, 0.5])
    resp = torch.ones(12, 1, dtype=torch.float64)
    q = gm.posterior_natural_parameters(prior, gm.sufficient_statistics(X, resp, "full"))
    exact = float(gm._kl_gauss_wishart(q, prior, "full"))

    def moments(params):
        mean, w_inv = gm.moment_parameters(params, "full")
        return mean[0].numpy(), np.linalg.inv(w_inv[0].numpy()), float(params.degrees_of_freedom[0]), float(
            params.mean_precision[0])

    def log_density(params, mus, lams):
        mean, w, nu, beta = moments(params)
        diff = mus - mean
        quad = np.einsum("si,sij,sj->s", diff, beta * lams, diff)
        log_normal = 0.5 * np.linalg.slogdet(beta * lams)[1] - np.log(2 * np.pi) - 0.5 * quad
        return stats.wishart(df=nu, scale=w).logpdf(lams.transpose(1, 2, 0)) + log_normal

    n = 20_000
    rng = np.random.RandomState(0)
    mean, w, nu, beta = moments(q)
    lams = stats.wishart(df=nu, scale=w).rvs(n, random_state=rng)
    chol = np.linalg.cholesky(np.linalg.inv(beta * lams))
    mus = mean + np.einsum("sij,sj->si", chol, rng.standard_normal((n, 2)))
    log_ratio = log_density(q, mus, lams) - log_density(prior, mus, lams)
    assert log_ratio.mean() == pytest.approx(exact, abs=4 * log_ratio.std() / np.sqrt(n))


def _student_t_mixture(model, X):
    """log sum_k w_k St(x | m_k, (1 + beta_k) / ((nu_k + 1 - D) beta_k) W_k^-1, nu_k + 1 - D) with scipy."""
    d = X.shape[1]
    density = np.zeros(len(X))
    for k in range(model.n_components):
        nu, beta = model.degrees_of_freedom_[k], model.mean_precision_[k]
        w_inv = nu * model.covariances_[k]
        if model.covariance_type == "diag":
            w_inv = np.diag(w_inv)
        dof = nu + 1 - d
        dist = stats.multivariate_t(loc=model.means_[k], shape=(1 + beta) / (dof * beta) * w_inv, df=dof)
        density += model.weights_[k] * dist.pdf(X)
    return np.log(density)


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
@pytest.mark.parametrize("weight_prior", WEIGHT_PRIORS)
def test_score_samples_is_the_student_t_mixture(covariance_type, weight_prior):
    model = _fit_quietly(BayesianGaussianMixture(
        n_components=3, covariance_type=covariance_type, weight_concentration_prior_type=weight_prior,
        random_state=0, max_iter=5, device="cpu"), X_SMALL[:25])  # few rows: heavy tails
    X_test = np.random.RandomState(1).randn(40, 3) * 2
    np.testing.assert_allclose(model.score_samples(X_test), _student_t_mixture(model, X_test), rtol=1e-10)
    assert model.score(X_test) == pytest.approx(_student_t_mixture(model, X_test).mean(), rel=1e-10)


@pytest.mark.parametrize("weight_prior", WEIGHT_PRIORS)
def test_predictive_density_integrates_to_one(weight_prior):
    x = np.r_[np.random.RandomState(2).randn(8) - 2, np.random.RandomState(3).randn(6) + 3][:, None]
    model = _fit_quietly(BayesianGaussianMixture(n_components=2, weight_concentration_prior_type=weight_prior,
                                                 random_state=0, device="cpu"), x)
    grid = np.linspace(-400, 400, 400_001)[:, None]
    mass = np.trapezoid(np.exp(model.score_samples(grid)), grid[:, 0])
    assert mass == pytest.approx(1.0, abs=2e-4)


def test_sample_moments_match_the_predictive():
    model = _fit_quietly(BayesianGaussianMixture(n_components=3, random_state=0, device="cpu"), X_SMALL)
    X, labels = model.sample(40_000)
    assert X.shape == (40_000, 3) and set(np.unique(labels)) <= {0, 1, 2}
    d = 3
    dof = model.degrees_of_freedom_ + 1 - d
    assert np.abs(X.mean(0) - model.weights_ @ model.means_).max() < 0.03
    for k in range(3):
        # Student-t covariance: shape * dof / (dof - 2), shape = (1 + beta) / (dof beta) W^-1.
        beta, nu = model.mean_precision_[k], model.degrees_of_freedom_[k]
        cov = (1 + beta) / (dof[k] * beta) * nu * model.covariances_[k] * dof[k] / (dof[k] - 2)
        rows = X[labels == k]
        np.testing.assert_allclose(np.cov(rows.T), cov, atol=0.05 * np.abs(cov).max() + 5 / np.sqrt(len(rows)) * 0.1)


def _sorted_means(model):
    return model.means_[np.argsort(model.means_[:, 0])]


@pytest.mark.parametrize("learning_rate", ["robbins_monro", "adaptive"])
def test_partial_fit_over_chunks_recovers_the_blobs(learning_rate):
    def stream():
        model = BayesianGaussianMixture(n_components=3, batch_size=100, learning_rate=learning_rate,
                                        random_state=0, device="cpu")
        for _ in range(2):
            for chunk in np.array_split(X_BLOBS, 10):
                model.partial_fit(chunk)
        return model

    model = stream()
    np.testing.assert_allclose(_sorted_means(model), CENTRES, atol=0.1)
    np.testing.assert_allclose(np.sort(model.weights_), [1 / 3] * 3, atol=0.03)
    for k in range(3):  # E[Lambda_k]^-1 = W_k^-1 / nu_k near the blob covariance 0.25 I
        np.testing.assert_allclose(model.covariances_[k], 0.25 * np.eye(2), atol=0.05)
    assert model.n_seen_ == 2 * len(X_BLOBS) and model.n_iter_ == 20 and model.n_steps_ == 60
    assert len(model.lower_bounds_) == 20 and model.lower_bound_ == model.lower_bounds_[-1]
    np.testing.assert_array_equal(stream().means_, model.means_)


def test_partial_fit_chunk_elbos_estimate_the_full_elbo():
    """With N = total_samples = the rows of the stream, the chunk ELBOs of the second pass (a partition of the
    rows, eq. 2.52) average to about the ELBO of all rows; the posterior moves a little between chunks."""
    model = BayesianGaussianMixture(n_components=3, batch_size=100, total_samples=len(X_BLOBS), random_state=0,
                                    device="cpu")
    for _ in range(2):
        for chunk in np.array_split(X_BLOBS, 10):
            model.partial_fit(chunk)
    Xc, params = model._centred(X_BLOBS), model._params()
    full = float(gm.elbo(Xc, gm.e_step(Xc, params, "full")[1], params, model._prior, "full"))
    assert abs(np.mean(model.lower_bounds_[-10:]) - full) < 0.01 * abs(full)
    assert model.lower_bound_ == model.lower_bounds_[-1]


@pytest.mark.parametrize("learning_rate", ["robbins_monro", "adaptive"])
def test_online_fit_recovers_the_blobs_and_tracks_the_elbo(learning_rate):
    model = _fit_quietly(BayesianGaussianMixture(n_components=3, learning_method="online", batch_size=200,
                                                 learning_rate=learning_rate, max_iter=10,
                                                 random_state=1, device="cpu"), X_BLOBS)
    np.testing.assert_allclose(_sorted_means(model), CENTRES, atol=0.1)
    assert model.converged_ and len(model.lower_bounds_) == model.n_iter_
    assert model.n_steps_ == model.n_iter_ * 15
    assert abs(model.lower_bounds_[-1] - model.lower_bounds_[-2]) / len(X_BLOBS) < model.tol


def test_partial_fit_with_total_samples_uses_it_as_n():
    """The first call with total_samples=N and one all-rows minibatch at rho=1 is one CAVI step on N scaled rows."""
    X = X_SMALL
    svi = BayesianGaussianMixture(n_components=3, init_params="random", random_state=0, batch_size=len(X),
                                  learning_offset=0.0, total_samples=2 * len(X), device="cpu").partial_fit(X)
    doubled = _fit_quietly(BayesianGaussianMixture(n_components=3, init_params="random", random_state=0, max_iter=1,
                                                   device="cpu"), X)
    # The same rows twice: the same statistics times 2 (up to the eps of N_k).
    np.testing.assert_allclose(svi.degrees_of_freedom_ - svi.degrees_of_freedom_prior_,
                               2 * (doubled.degrees_of_freedom_ - doubled.degrees_of_freedom_prior_), rtol=1e-10)


def test_errors():
    with pytest.raises(ValueError, match="n_samples >= n_components"):
        BayesianGaussianMixture(n_components=5, device="cpu").fit(X_SMALL[:4])
    with pytest.raises(ValueError, match="degrees_of_freedom_prior"):
        BayesianGaussianMixture(degrees_of_freedom_prior=1.5, device="cpu").fit(X_SMALL)
    with pytest.raises(ValueError, match="n_init"):
        BayesianGaussianMixture(n_init=2).fit(X_SMALL)
    with pytest.raises(ValueError, match="covariance_prior"):
        BayesianGaussianMixture(covariance_prior=np.ones(2), device="cpu").fit(X_SMALL)
    with pytest.raises(ValueError, match="n_samples"):
        BayesianGaussianMixture(device="cpu").fit(X_SMALL).sample(0)


def test_float32_and_pickle_round_trip():
    import pickle

    model = _fit_quietly(BayesianGaussianMixture(n_components=3, random_state=0, device="cpu"),
                         X_SMALL.astype(np.float32))
    assert model.dtype_ == "float32"
    clone = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(clone.score_samples(X_SMALL), model.score_samples(X_SMALL))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu():
    params = dict(n_components=3, init_params="random", random_state=0, max_iter=10, dtype="float64")
    cpu = _fit_quietly(BayesianGaussianMixture(**params, device="cpu"), X_SMALL)
    gpu = _fit_quietly(BayesianGaussianMixture(**params, device="cuda"), X_SMALL)
    np.testing.assert_allclose(gpu.means_, cpu.means_, rtol=1e-8)
    np.testing.assert_allclose(gpu.score_samples(X_SMALL), cpu.score_samples(X_SMALL), rtol=1e-8)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs CUDA"))])
@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
def test_float32_streaming_recovers_offset_blobs(device, covariance_type):
    model = BayesianGaussianMixture(n_components=3, covariance_type=covariance_type, batch_size=100, random_state=0,
                                    device=device, dtype="float32")
    for chunk in np.array_split(X_BLOBS + 100.0, 10):  # an offset: the data are centred at mean_prior_
        model.partial_fit(chunk)
    assert model.dtype_ == "float32" and model.device_.type == device
    np.testing.assert_allclose(_sorted_means(model), CENTRES + 100.0, atol=0.1)
    assert np.isfinite(model.score_samples(X_BLOBS[:50] + 100.0)).all()
