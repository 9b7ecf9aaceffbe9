"""Closed-form Bayesian linear regression: the reference posterior for the BNN methods.

A Bayesian MLP with no hidden layer (``hidden_layer_sizes=()``) is Bayesian
linear regression with a bias: y = [x, 1] w + eps, w ~ N(0, s^2 I),
eps ~ N(0, sigma^2). Its posterior and predictive are Gaussian in closed form
(Bishop 2006, eqs. 3.53-3.54 and 3.58-3.59), so every inference method can be
checked against them.
"""

import numpy as np


def make_blr_data(n_samples=200, n_features=2, noise_std=0.3, random_state=0):
    """Standardised inputs and a linear target with known noise.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    X_test : ndarray of shape (50, n_features)
        Test inputs, half of them outside the training range (|x| up to 4).
    """
    rng = np.random.RandomState(random_state)
    X = rng.standard_normal((n_samples, n_features))
    w = rng.uniform(-1.0, 1.0, n_features)
    y = X @ w + 0.5 + noise_std * rng.standard_normal(n_samples)
    X_test = np.vstack([rng.standard_normal((25, n_features)), rng.uniform(2.0, 4.0, (25, n_features))])
    return X, y, X_test


def exact_blr_posterior(X, y, prior_scale, noise_std):
    """Posterior N(mean, cov) of w = [weights, bias], shapes (d+1,) and (d+1, d+1)."""
    Phi = np.hstack([X, np.ones((len(X), 1))])
    precision = Phi.T @ Phi / noise_std**2 + np.eye(Phi.shape[1]) / prior_scale**2
    cov = np.linalg.inv(precision)
    mean = cov @ Phi.T @ y / noise_std**2
    return mean, cov


def exact_blr_predictive(X, y, X_test, prior_scale, noise_std):
    """Predictive mean and standard deviation (noise included) at X_test.

    Returns
    -------
    mean : ndarray of shape (n_test,)
    std : ndarray of shape (n_test,)
        sqrt(phi^T cov phi + noise_std^2).
    epistemic_std : ndarray of shape (n_test,)
        sqrt(phi^T cov phi), the weight uncertainty alone.
    """
    mean_w, cov = exact_blr_posterior(X, y, prior_scale, noise_std)
    Phi = np.hstack([X_test, np.ones((len(X_test), 1))])
    epistemic_var = np.einsum("ij,jk,ik->i", Phi, cov, Phi)
    return Phi @ mean_w, np.sqrt(epistemic_var + noise_std**2), np.sqrt(epistemic_var)
