"""SWAG and MultiSWAG (Maddox et al. 2019; Wilson & Izmailov 2020): the moments against numpy, the kept draws against
the iterates recorded independently during a fit, held-out coverage and growth away from the data."""

import numpy as np
import pytest
import torch
from sklearn.datasets import make_classification

from skbayes import BayesianMLPClassifier, BayesianMLPRegressor
from skbayes.callbacks import Callback
from skbayes.inference import SWAG
from skbayes.nn.functional import unflatten
from skbayes.nn.swag import SWAGMoments, flatten_members

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _numpy_swag(iterates, rank):
    """Mean, diagonal variance and the last ``rank`` deviations from the running mean, by numpy; iterates (T, M, P)."""
    T = iterates.shape[0]
    running = np.cumsum(iterates, axis=0) / np.arange(1, T + 1)[:, None, None]
    deviations = (iterates - running)[-rank:]  # (K, M, P)
    return iterates.mean(0), iterates.var(0), np.moveaxis(deviations, 0, 1)  # (M, K, P)


def test_moments_match_numpy():
    rng = np.random.RandomState(0)
    iterates = rng.randn(30, 2, 5) * [0.1, 1.0, 2.0, 0.5, 0.3] + rng.randn(2, 5)
    moments = SWAGMoments(rank=10)
    for theta in iterates:
        moments.update(torch.tensor(theta))
    mean, var, dev = _numpy_swag(iterates, 10)
    np.testing.assert_allclose(moments.mean.numpy(), mean, rtol=1e-12)
    np.testing.assert_allclose(moments.diagonal_variance().numpy(), var, rtol=1e-9)
    np.testing.assert_allclose(moments.deviations.numpy(), dev, rtol=1e-9, atol=1e-12)
    expected = 0.5 * (np.stack([np.diag(v) for v in var]) + np.einsum("mkp,mkq->mpq", dev, dev) / 9)
    np.testing.assert_allclose(moments.covariance().numpy(), expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("rank", [1, 6])
def test_draws_have_the_stated_covariance(rank):
    rng = np.random.RandomState(1)
    moments = SWAGMoments(rank=rank)
    for theta in rng.randn(12, 1, 4) * [1.0, 0.2, 3.0, 1.0]:
        moments.update(torch.tensor(theta))
    draws = moments.sample(200_000, torch.Generator().manual_seed(0), scale=2.0)[0].numpy()
    expected = 2.0 * moments.covariance()[0].numpy()  # rank 1: the diagonal only
    if rank == 1:
        np.testing.assert_allclose(expected, np.diag(np.diag(expected)))
    np.testing.assert_allclose(np.cov(draws.T), expected, rtol=0.03, atol=0.01 * np.abs(expected).max())
    np.testing.assert_allclose(draws.mean(0), moments.mean[0].numpy(), atol=0.02 * np.sqrt(expected.max()))


def test_flatten_round_trip():
    tensors = [torch.randn(3, 4, 2), torch.randn(3, 5)]
    flat = flatten_members(tensors)
    assert flat.shape == (3, 13)
    for a, b in zip(unflatten(flat, [t.shape[1:] for t in tensors]), tensors):
        assert torch.equal(a, b)


class _RecordSWAIterates(Callback):
    """The weights at every epoch end of the constant-step phase (told by its step size), read from the optimiser."""

    def __init__(self, learning_rate):
        self.learning_rate, self.iterates = learning_rate, []

    def on_epoch_end(self, state):
        if state.optimizer.param_groups[0]["lr"] == self.learning_rate:
            self.iterates.append([p.detach().clone() for p in state.optimizer.param_groups[0]["params"]])


def test_kept_draws_follow_the_recorded_iterates():
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, (120, 2))
    y = np.sin(X[:, 0]) + X[:, 1] + 0.2 * rng.randn(120)
    record = _RecordSWAIterates(learning_rate=5e-2)
    method = SWAG(n_models=2, rank=8, swa_epochs=25, swa_learning_rate=5e-2, n_draws=3000, max_iter=30)
    model = BayesianMLPRegressor(hidden_layer_sizes=(3,), inference=method, noise="homoscedastic", callbacks=[record],
                                 random_state=0).fit(X, y)
    assert len(record.iterates) == 25
    network = model.module_["network"]
    n_weights = sum(t[0].numel() for t in network.member_tensors())
    iterates = np.stack([flatten_members(step[:-1]).numpy() for step in record.iterates])  # (T, M, P)
    mean, var, dev = _numpy_swag(iterates, 8)
    expected_var = 0.5 * (var + (dev**2).sum(1) / 7)  # the diagonal of the covariance
    draws = flatten_members(network.member_tensors()).numpy().reshape(2, 3000, n_weights)
    assert model.inference_diagnostics_["n_collected"] == 25 and model.inference_diagnostics_["rank"] == 8
    np.testing.assert_allclose(draws.mean(1), mean, atol=6 * np.sqrt(expected_var.max() / 3000))
    np.testing.assert_allclose(draws.var(1), expected_var, rtol=0.12, atol=1e-12)
    assert expected_var.max() > 1e-6  # the iterates moved: the check is not of a point mass
    # each draw's noise is its network's mean over the recorded iterates, model-major
    raw = np.stack([step[-1].numpy() for step in record.iterates]).mean(0)  # (M, 1, 1)
    np.testing.assert_allclose(model.module_["likelihood"].raw_noise.detach().numpy(),
                               np.repeat(raw, 3000, axis=0), rtol=1e-5)


def _sine(n, seed):
    rng = np.random.RandomState(seed)
    X = rng.uniform(-3, 3, (n, 1))
    return X, np.sin(X[:, 0]) + 0.3 * rng.randn(n)


@pytest.mark.parametrize("n_models", [1, 3])
def test_defaults_cover_held_out_rows_and_widen_away_from_data(n_models):
    X, y = _sine(300, 0)
    X_test, y_test = _sine(2000, 1)
    model = BayesianMLPRegressor(inference=SWAG(n_models=n_models), random_state=0).fit(X, y)
    lower, upper = model.predict_interval(X_test, coverage=0.9)
    coverage = np.mean((y_test >= lower) & (y_test <= upper))
    assert 0.85 <= coverage <= 0.96, coverage
    # the epistemic std averaged beyond the data (|x| in [5, 8]) against within it ([-3, 3]); SWAG's single Gaussian
    # need not widen at every point (at x = 7 it narrowed for data seed 0), but on average it does (1.3-3.9x over
    # data seeds 0, 1, 2, 5; MultiSWAG 4-12x)
    inside = np.linspace(-3, 3, 61)[:, None]
    outside = np.r_[np.linspace(-8, -5, 31), np.linspace(5, 8, 31)][:, None]
    near = model.predict_uncertainty(inside)["epistemic_std"].mean()
    far = model.predict_uncertainty(outside)["epistemic_std"].mean()
    assert far > (1.2 if n_models == 1 else 3.0) * near, (near, far)
    assert model.module_["network"].n_members == 30 * n_models


def test_same_random_state_same_predictions_and_classifier():
    X, y = _sine(150, 2)
    a = BayesianMLPRegressor(inference="swag", random_state=3).fit(X, y).predict(X[:20], return_std=True)
    b = BayesianMLPRegressor(inference="swag", random_state=3).fit(X, y).predict(X[:20], return_std=True)
    np.testing.assert_array_equal(a, b)
    Xc, yc = make_classification(300, 4, n_informative=3, n_redundant=0, random_state=0)
    clf = BayesianMLPClassifier(inference=SWAG(n_models=2), random_state=0).fit(Xc[:200], yc[:200])
    proba = clf.predict_proba(Xc[200:])
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-6)
    assert clf.score(Xc[200:], yc[200:]) > 0.8


def test_torch_module_network():
    # a user's torch module: every parameter gets the Gaussian of its iterates, draws kept model-major
    from torch import nn

    class Net(nn.Sequential):
        def __init__(self, n_features, n_outputs):
            super().__init__(nn.Linear(n_features, 8), nn.Tanh(), nn.Linear(8, n_outputs))

    X, y = _sine(120, 3)
    model = BayesianMLPRegressor(module=Net, inference=SWAG(n_models=2, swa_epochs=10, n_draws=7, max_iter=50),
                                 noise="homoscedastic", random_state=0).fit(X, y)
    network = model.module_["network"]
    assert network.n_members == 14
    first = network.member_tensors()[0]
    assert not torch.equal(first[0], first[1])  # draws of one model differ
    assert model.score(X, y) > 0.5
    parts = model.predict_uncertainty(X[:5])
    assert np.all(parts["epistemic_std"] > 0)
