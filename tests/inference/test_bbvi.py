"""BlackBoxVI (seed 001, section 2.3): the full-rank family recovers the exact posterior of Bayesian linear
regression, the score-function gradient trains too, the classifier works at its defaults, and the refusals."""

import numpy as np
import pytest
import torch
from _exact_blr import exact_blr_posterior, make_blr_data
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from skbayes import BayesianMLPClassifier, BayesianMLPRegressor
from skbayes.inference import BlackBoxVI

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

NOISE, SCALE = 0.3, 0.8


def _kl_to_exact(model, X, y):
    mean, cov = exact_blr_posterior(X, y, SCALE, NOISE)
    q = model.module_["network"].posterior.distribution()
    if not hasattr(q, "covariance_matrix"):  # mean field
        q = torch.distributions.MultivariateNormal(q.mean, torch.diag(q.variance))
    exact = torch.distributions.MultivariateNormal(torch.tensor(mean), torch.tensor(cov))
    return float(torch.distributions.kl_divergence(q, exact)), q, mean, cov


def _blr_model(method, **kwargs):
    return BayesianMLPRegressor(hidden_layer_sizes=(), inference=method, noise_std=NOISE, prior_scale=SCALE,
                                normalize_y=False, random_state=0, noise="homoscedastic", dtype="float64", **kwargs)


def test_full_rank_family_recovers_the_exact_posterior():
    # the family holds the exact posterior, so the ELBO's maximum is it: optimised to convergence (full batch, 50
    # draws per step) q is within 0.02 nats of it (0.001 measured)
    X, y, _ = make_blr_data(n_samples=200, noise_std=NOISE, random_state=2)
    method = BlackBoxVI(n_mc_train=50, learning_rate_init=1e-3, max_iter=3000, n_iter_no_change=300)
    model = _blr_model(method, batch_size=200).fit(X, y)
    kl, q, mean, cov = _kl_to_exact(model, X, y)
    assert kl < 0.02, kl
    np.testing.assert_allclose(q.mean.detach().numpy(), mean, atol=0.1 * np.sqrt(np.diag(cov)).min())
    np.testing.assert_allclose(q.covariance_matrix.detach().numpy(), cov, atol=0.1 * np.diag(cov).min())


def test_defaults_and_score_gradient_come_close():
    X, y, _ = make_blr_data(n_samples=200, noise_std=NOISE, random_state=2)
    kl_default, *_ = _kl_to_exact(_blr_model(BlackBoxVI()).fit(X, y), X, y)
    kl_score, *_ = _kl_to_exact(_blr_model(BlackBoxVI(gradient="score")).fit(X, y), X, y)
    # measured: 0.19 and 0.63 nats; the prior alone is ~ 20 nats away
    prior = torch.distributions.MultivariateNormal(torch.zeros(3, dtype=torch.float64),
                                                   SCALE**2 * torch.eye(3, dtype=torch.float64))
    mean, cov = exact_blr_posterior(X, y, SCALE, NOISE)
    exact = torch.distributions.MultivariateNormal(torch.tensor(mean), torch.tensor(cov))
    assert float(torch.distributions.kl_divergence(prior, exact)) > 20
    assert kl_default < 0.5 and kl_score < 1.5, (kl_default, kl_score)


def test_classifier_at_defaults():
    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(StandardScaler().fit_transform(X), y, random_state=0)
    for family in ("full_rank", "low_rank"):
        model = BayesianMLPClassifier(hidden_layer_sizes=(), inference=BlackBoxVI(family=family),
                                      random_state=0).fit(X_train, y_train)
        assert model.score(X_test, y_test) > 0.93, family
        proba = model.predict_proba(X_test)
        np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-6)


def test_refusals():
    X, y, _ = make_blr_data(n_samples=30)
    with pytest.raises(ValueError, match="low_rank"):
        BayesianMLPRegressor(hidden_layer_sizes=(300, 300), inference=BlackBoxVI(family="full_rank")).fit(X, y)
    with pytest.raises(ValueError, match="n_mc_train"):
        BayesianMLPRegressor(inference=BlackBoxVI(gradient="score", n_mc_train=2)).fit(X, y)
    model = BayesianMLPRegressor(hidden_layer_sizes=(300, 300), inference=BlackBoxVI(max_iter=1)).fit(X, y)
    assert model.module_["network"].posterior.family == "low_rank"  # "auto" above 500 weights
