"""The worked example of doc/adding_an_inference_method.md works as the page says."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.base import clone

from skbayes import BayesianMLPRegressor

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "custom_inference_method.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("custom_inference_method", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_snapshot_ensemble_predicts_with_the_mixture_of_its_snapshots(example):
    rng = np.random.RandomState(0)
    X = rng.uniform(-3, 3, size=(80, 1))
    y = np.sin(X[:, 0]) + 0.1 * rng.randn(80)
    method = example.SnapshotEnsemble(n_snapshots=4, burn_in=6)
    model = BayesianMLPRegressor((8,), inference=method, random_state=0, dtype="float64", noise="homoscedastic").fit(X, y)
    assert model.n_iter_ == 10  # the fixed schedule: burn_in + n_snapshots epochs
    assert model.inference_diagnostics_ == {"n_snapshots": 4}
    network = model.module_["network"]
    assert network.n_members == 4
    # The prediction is the uniform mixture of the snapshots: its mean is the average of
    # the members' outputs, computed here member by member.
    x = torch.tensor(X[:5])
    with torch.no_grad():
        members = [network.forward_with(x, network.member_parameters(torch.tensor([m])))[0, :, 0] for m in range(4)]
    expected = torch.stack(members).mean(0).numpy() * model._y_scale[0] + model._y_mean[0]
    np.testing.assert_allclose(model.predict(X[:5]), expected, rtol=1e-12)
    # snapshots of different epochs differ, so the mixture has epistemic spread
    assert np.all(model.predict_uncertainty(X[:5]).epistemic_std > 0)
    assert method.get_params() == {"n_snapshots": 4, "burn_in": 6, "learning_rate_init": 3e-3, "beta_1": 0.9, "beta_2": 0.999}  # unchanged
    assert clone(method).get_params() == method.get_params()


def test_a_bad_parameter_of_the_new_method_is_named(example):
    model = BayesianMLPRegressor(inference=example.SnapshotEnsemble(n_snapshots=0), noise="homoscedastic", hidden_layer_sizes=(50,))
    with pytest.raises(ValueError, match="n_snapshots"):
        model.fit(np.zeros((10, 1)), np.arange(10.0))
