"""The MNIST CNN benchmark (examples/benchmarks/mnist_cnn.py): seed 004's LeNet, its dropout and its mean pass."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from skbayes import BayesianMLPClassifier
from skbayes.inference import DeepEnsemble, MCDropout
from skbayes.nn.layers.dropout import MCDropoutLayer
from skbayes.nn.networks.module import to_mc_dropout

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("mnist_cnn", ROOT / "examples" / "benchmarks" / "mnist_cnn.py")
mnist_cnn = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mnist_cnn)  # puts examples/benchmarks on sys.path for _common
from _common import rotated  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def test_lenet_follows_table_5_1():
    """Activation shapes after each stage and the parameter count, from Table 5.1 of seed 004 by hand."""
    net = mnist_cnn.LeNet()
    shapes = []
    for stage in (*net.features, *net.classifier):
        stage.register_forward_hook(lambda module, args, out: shapes.append(tuple(out.shape[1:])))
    out = net(torch.zeros(3, 1, 28, 28))
    assert out.shape == (3, 10)
    assert shapes == [(6, 24, 24), (6, 24, 24), (6, 12, 12), (16, 8, 8), (16, 8, 8), (16, 4, 4), (256,),
                      (256,), (256,), (10,)]
    by_hand = (25 * 6 + 6) + (6 * 25 * 16 + 16) + (256 * 256 + 256) + (256 * 10 + 10)
    assert sum(p.numel() for p in net.parameters()) == by_hand == 70934
    with pytest.raises(ValueError, match="too small"):
        mnist_cnn.LeNet(input_shape=(1, 10, 10))


@pytest.mark.parametrize("placement, expected", [
    # Gal's lenet-all: the first dense layer's input is already dropped after the last convolution
    ("all", ["Conv2d", "drop", "ReLU", "MaxPool2d", "Conv2d", "drop", "ReLU", "MaxPool2d", "Flatten",
             "Linear", "ReLU", "drop", "Linear"]),
    ("dense", ["Conv2d", "ReLU", "MaxPool2d", "Conv2d", "ReLU", "MaxPool2d", "Flatten",
               "drop", "Linear", "ReLU", "drop", "Linear"]),
])
def test_dropout_placements_on_lenet(placement, expected):
    """The two dropout models of the benchmark: dropout after the convolutions (before pooling) only with "all"."""
    module, _ = to_mc_dropout(mnist_cnn.LeNet(), 0.25, placement=placement)
    order = ["drop" if isinstance(m, MCDropoutLayer) else type(m).__name__
             for m in module.modules() if not isinstance(m, (nn.Sequential, mnist_cnn.LeNet))]
    assert order == expected


def _digits(n=64, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.uniform(0, 1, size=(n, 784)).astype(np.float32)
    return X, rng.randint(0, 3, size=n)


def test_mean_pass_is_the_network_without_dropout():
    """Weight scaling (inverted dropout): the mean pass equals a plain LeNet with the fitted weights, dropout removed."""
    X, y = _digits()
    model = BayesianMLPClassifier(module=mnist_cnn.LeNet, input_shape=(1, 28, 28), inference=MCDropout(dropout_rate=0.5, placement="all", max_iter=2, early_stopping=False, n_iter_no_change=50), random_state=0, device="cpu", dtype="float32", module_params={"n_hidden": 16}, prior_scale=1.0).fit(X, y)
    plain = mnist_cnn.LeNet(n_outputs=3, n_hidden=16)
    fitted = model.module_["network"].module.state_dict()
    # the converted module's names carry the wrappers' ".0"/".1": map them onto the plain LeNet's
    renamed = {"features.0.weight": "features.0.0.weight", "features.0.bias": "features.0.0.bias",
               "features.3.weight": "features.3.0.weight", "features.3.bias": "features.3.0.bias",
               "classifier.0.weight": "classifier.0.weight", "classifier.0.bias": "classifier.0.bias",
               "classifier.2.weight": "classifier.2.1.weight", "classifier.2.bias": "classifier.2.1.bias"}
    plain.load_state_dict({name: fitted[source] for name, source in renamed.items()})
    with torch.no_grad():
        expected = torch.softmax(plain(torch.as_tensor(X).reshape(-1, 1, 28, 28)), -1).numpy()
    np.testing.assert_allclose(mnist_cnn.mean_pass_proba(model, X, block=10), expected, rtol=1e-5, atol=1e-6)
    # and it is not the MC average (the masks are on there)
    assert np.abs(model.predict_proba(X) - expected).max() > 1e-3


def test_mean_pass_none_for_ensembles_and_mc_equal_at_rate_zero():
    X, y = _digits()
    common = {"module": mnist_cnn.LeNet, "module_params": {"n_hidden": 8}, "input_shape": (1, 28, 28),
              "prior_scale": 1.0, "random_state": 0, "device": "cpu", "dtype": "float32"}
    loop = {"max_iter": 1, "early_stopping": False, "n_iter_no_change": 50}
    ensemble = BayesianMLPClassifier(inference=DeepEnsemble(n_estimators=2, **loop), **common).fit(X, y)
    assert mnist_cnn.mean_pass_proba(ensemble, X) is None
    no_dropout = BayesianMLPClassifier(inference=MCDropout(dropout_rate=0.0, n_mc_predict=4, **loop), **common).fit(X, y)
    np.testing.assert_allclose(mnist_cnn.mean_pass_proba(no_dropout, X), no_dropout.predict_proba(X), rtol=1e-5)


def test_rotated_digit_geometry():
    """A vertical bar turns horizontal at 90 degrees and comes back at 180 (the rotated-digit protocol)."""
    image = np.zeros((28, 28), dtype=np.float32)
    image[4:24, 13:15] = 1.0
    quarter, half = rotated(image.reshape(1, -1), 90).reshape(28, 28), rotated(image.reshape(1, -1), 180).reshape(28, 28)
    assert quarter[13:15, 4:24].mean() > 0.9 and quarter[4:24, 13:15].sum() < image.sum() / 4
    assert half[4:24, 13:15].mean() > 0.9
