"""The Bayesian autoencoder: its reconstruction log-likelihood against a brute-force continuous-Bernoulli mixture,
reconstructions, codes, samples, reproducibility and refusals."""

import numpy as np
import pytest
from sklearn.datasets import load_digits

from skbayes import BayesianAutoencoder
from skbayes.inference import SGHMC, DSWPrior, MeanFieldVI

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _digits():
    X = load_digits().data / 16.0
    return X[:1000], X[1000:1200]


@pytest.fixture(scope="module")
def fitted():
    # the sampler and the prior at their defaults; a small network
    X, _ = _digits()
    return BayesianAutoencoder(n_components=4, hidden_layer_sizes=(64,), random_state=0).fit(X)


def _cb_log_density(x, f):
    """log of C(lam) lam^x (1 - lam)^(1 - x) at lam = sigmoid(f), by numpy.

    C(lam) = 2 artanh(1 - 2 lam) / (1 - 2 lam) = f / tanh(f / 2) (artanh(1 - 2 lam) = -f / 2), 2 at f = 0.
    """
    small = np.abs(f) < 1e-6
    c = np.where(small, 2.0, f / np.tanh(np.where(small, 1.0, f) / 2))
    return np.log(c) - x * np.logaddexp(0, -f) - (1 - x) * np.logaddexp(0, f)


def test_score_is_the_mixture_of_the_kept_networks(fitted):
    X, X_test = _digits()
    bae = fitted
    network = bae.network_.module_["network"]
    import torch

    x = bae.scaler_.transform(X_test[:20])
    with torch.no_grad():
        logits = network.forward_with(torch.as_tensor(x, dtype=network.layers[0].weight.dtype),
                                      network.member_parameters()).numpy()  # (S, n, d)
    per_network = _cb_log_density(x[None], logits).sum(-1)  # (S, n)
    expected = np.log(np.mean(np.exp(per_network - per_network.max(0)), 0)) + per_network.max(0)
    np.testing.assert_allclose(bae.score_samples(X_test[:20]), expected, rtol=1e-4)


def test_codes_reconstructions_and_samples(fitted):
    X, X_test = _digits()
    bae = fitted
    codes = bae.transform(X_test)
    assert codes.shape == (200, 4) and np.all(np.isfinite(codes))
    # four numbers per image reconstruct it far better than the mean image: the code network's, and the
    # posterior predictive's (by hand on 1,200 training images: 0.38-0.46 of the mean image's error)
    baseline = np.mean((X.mean(0) - X_test) ** 2)
    assert np.mean((bae.inverse_transform(codes) - X_test) ** 2) < 0.6 * baseline
    mean, std = bae.reconstruct(X_test, return_std=True)
    assert np.mean((mean - X_test) ** 2) < 0.6 * baseline
    assert std.shape == (200, 64) and np.all(std >= 0) and std.mean() > 0
    samples = bae.sample(50, random_state=0)
    assert samples.shape == (50, 64) and samples.min() >= 0 and samples.max() <= 1
    np.testing.assert_array_equal(samples, bae.sample(50, random_state=0))
    assert bae.get_feature_names_out().tolist() == [f"bayesianautoencoder{i}" for i in range(4)]
    hyper = bae.inference_diagnostics_["prior_hyperparameters"]
    assert len(hyper["weight_scale"]) == 4 and bae.inference_diagnostics_["dsw_trace"].shape == (200,)


def test_reproducible():
    X, X_test = _digits()
    kwargs = {"n_components": 2, "hidden_layer_sizes": (8,), "random_state": 3,
              "inference": SGHMC(burn_in=20, thinning=2, n_kept_samples=4, prior=DSWPrior(max_iter=20))}
    first = BayesianAutoencoder(**kwargs).fit(X[:200])
    second = BayesianAutoencoder(**kwargs).fit(X[:200])
    np.testing.assert_array_equal(first.transform(X_test), second.transform(X_test))
    np.testing.assert_array_equal(first.score_samples(X_test), second.score_samples(X_test))


def test_refusals(fitted):
    X, _ = _digits()
    with pytest.raises(ValueError, match="SGHMC"):
        BayesianAutoencoder(inference=MeanFieldVI()).fit(X)
    with pytest.raises(ValueError):
        BayesianAutoencoder().fit(X[:1])
    with pytest.raises(ValueError, match="NaN|infinity"):
        BayesianAutoencoder().fit(np.full((5, 3), np.nan))
    with pytest.raises(ValueError):
        fitted.transform(X[:, :10])
