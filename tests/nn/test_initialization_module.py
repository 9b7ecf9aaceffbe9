"""I-BLM for the mean-field layers of a torch module, convolutions by their patches (Rossi 2022, chapter 3)."""

import numpy as np
import pytest
import torch
from _exact_blr import exact_blr_posterior, make_blr_data
from torch import nn

from skbayes import BayesianMLPClassifier, BayesianMLPRegressor
from skbayes.inference import MeanFieldVI
from skbayes.nn import MeanFieldConv2d, iblm_init_module
from skbayes.nn.networks import BayesianModuleNetwork
from skbayes.nn.networks.module import to_mean_field

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _network(module, n_features, n_outputs, input_shape=None, prior_scale=0.7):
    # I-BLM regresses under each layer's own prior: the network's N(0, prior_scale^2)
    module = to_mean_field(module.double(), prior_scale=prior_scale, posterior_init_scale=1e-3)
    return BayesianModuleNetwork(module, n_features, n_outputs, input_shape=input_shape)


def _init(network, X, Y, noise_std, prior_scale=0.7, seed=0, **kwargs):
    iblm_init_module(
        network, torch.as_tensor(X), torch.as_tensor(Y), prior_scale=prior_scale, noise_std=noise_std,
        generator=torch.Generator().manual_seed(seed), **kwargs,
    )


def _sigma(rho):
    return torch.nn.functional.softplus(rho).detach().numpy()


def _blr(Phi, y, prior, noise):
    """Closed-form posterior mean and reverse-KL mean-field std on a design Phi (bias column included)."""
    precision = Phi.T @ Phi / noise**2 + np.eye(Phi.shape[1]) / prior**2
    return np.linalg.solve(precision, Phi.T @ y / noise**2), 1 / np.sqrt(np.diag(precision))


def test_a_single_linear_layer_gets_the_exact_posterior():
    X, y, _ = make_blr_data(n_samples=150, n_features=3, noise_std=0.4, random_state=0)
    network = _network(nn.Linear(3, 1), 3, 1)
    _init(network, X, y[:, None], torch.tensor([0.4]))
    mean, cov = exact_blr_posterior(X, y, 0.7, 0.4)
    layer = network.module.layer
    np.testing.assert_allclose(layer.mu.detach().numpy()[:, 0], mean, rtol=1e-8)
    np.testing.assert_allclose(_sigma(layer.rho)[:, 0], 1 / np.sqrt(np.diag(np.linalg.inv(cov))), rtol=1e-6)


def test_iblm_of_a_module_through_the_estimator_before_training():
    X, y, _ = make_blr_data(n_samples=80, n_features=2, noise_std=0.3, random_state=3)
    model = BayesianMLPRegressor(
        module=lambda n_features, n_outputs: nn.Linear(n_features, n_outputs), inference=MeanFieldVI(init="iblm", learning_rate_init=1e-12, max_iter=1),
        noise_std=0.3, normalize_y=False, random_state=0, dtype="float64", noise="homoscedastic"
    ).fit(X, y)
    mean, _ = exact_blr_posterior(X, y, 1.0, 0.3)
    np.testing.assert_allclose(model.module_["network"].module.layer.mu.detach().numpy()[:, 0], mean, atol=1e-6)


def test_a_convolution_covering_the_image_is_linear_regression_on_the_flattened_image():
    rng = np.random.RandomState(0)
    n, shape, noise = 120, (2, 4, 5), np.array([0.4, 0.2])
    images = rng.randn(n, *shape)
    flat = images.reshape(n, -1)
    Y = flat @ rng.randn(flat.shape[1], 2) * 0.3 + noise * rng.randn(n, 2)
    network = _network(nn.Sequential(nn.Conv2d(2, 2, (4, 5)), nn.Flatten()), 40, 2, input_shape=shape)
    _init(network, flat, Y, torch.tensor(noise))
    conv = network.module[0]
    Phi = np.hstack([flat, np.ones((n, 1))])  # (channel, row, column)-major, the kernel's layout
    for j in range(2):
        mean, std = _blr(Phi, Y[:, j], 0.7, noise[j])
        np.testing.assert_allclose(conv.weight_mu[j].detach().numpy().ravel(), mean[:-1], rtol=1e-7, atol=1e-10)
        np.testing.assert_allclose(conv.bias_mu[j].item(), mean[-1], rtol=1e-7)
        np.testing.assert_allclose(_sigma(conv.weight_rho[j]).ravel(), std[:-1], rtol=1e-6)
        np.testing.assert_allclose(_sigma(conv.bias_rho[j]), std[-1], rtol=1e-6)


def _patches(images, kernel, stride, padding, dilation):
    """Brute-force im2col: one row per (image, output position), (channel, i, j)-major; explicit pads."""
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    top, bottom, left, right = padding
    padded = np.pad(images, ((0, 0), (0, 0), (top, bottom), (left, right)))
    H = (padded.shape[2] - dh * (kh - 1) - 1) // sh + 1
    W = (padded.shape[3] - dw * (kw - 1) - 1) // sw + 1
    rows = []
    for x in padded:
        for a in range(H):
            for b in range(W):
                rows.append(x[:, a * sh:a * sh + dh * kh:dh, b * sw:b * sw + dw * kw:dw].ravel())
    return np.array(rows), H * W


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize(
    "options, explicit",
    [
        ({"kernel_size": 3, "stride": 2, "padding": 1}, ((3, 3), (2, 2), (1, 1, 1, 1), (1, 1))),
        # torch's "same" puts the odd pixel of padding after the image
        ({"kernel_size": (2, 3), "padding": "same", "dilation": (1, 2)}, ((2, 3), (1, 1), (0, 1, 2, 2), (1, 2))),
    ],
)
def test_a_convolution_regresses_its_patches_on_the_image_targets(options, explicit):
    rng = np.random.RandomState(1)
    n, shape, noise = 25, (2, 5, 6), 0.3
    images = rng.randn(n, *shape)
    y = images.mean(axis=(1, 2, 3)) * 3 + noise * rng.randn(n)
    kernel, stride, padding, dilation = explicit
    patches, positions = _patches(images, kernel, stride, padding, dilation)
    # the brute-force patches are torch's: patches @ kernel is the convolution
    weight = rng.randn(3, 2, *kernel)
    torch_conv = nn.functional.conv2d(torch.tensor(images), torch.tensor(weight), **{
        k: v for k, v in options.items() if k != "kernel_size"})
    np.testing.assert_allclose(
        (patches @ weight.reshape(3, -1).T).reshape(n, -1, 3), torch_conv.flatten(2).transpose(1, 2).numpy(),
        atol=1e-12,
    )
    module = nn.Sequential(nn.Conv2d(2, 1, **options), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    network = _network(module, 60, 1, input_shape=shape)
    _init(network, images.reshape(n, -1), y[:, None], torch.tensor([noise]))
    # every patch of an image regresses on the image's target
    mean, std = _blr(np.hstack([patches, np.ones((len(patches), 1))]), np.repeat(y, positions), 0.7, noise)
    conv = network.module[0]
    np.testing.assert_allclose(conv.weight_mu.detach().numpy().ravel(), mean[:-1], rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(conv.bias_mu.item(), mean[-1], rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(_sigma(conv.weight_rho).ravel(), std[:-1], rtol=1e-6)


class TinyCNN(nn.Module):
    """(B, 1, 8, 8) -> conv 3x3 (3) -> ReLU -> pool 2 -> conv 2x2 (4) -> ReLU -> dense 6 (from 16) -> ReLU -> dense."""

    def __init__(self, n_outputs):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 3, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(3, 4, 2), nn.ReLU(), nn.Flatten()
        )
        self.head = nn.Sequential(nn.Linear(16, 6), nn.ReLU(), nn.Linear(6, n_outputs))

    def forward(self, x):
        return self.head(self.features(x))


def _classes(n=90, seed=0):
    """Images whose class is the quadrant holding a bright blob."""
    rng = np.random.RandomState(seed)
    y = rng.randint(3, size=n)
    X = 0.3 * rng.randn(n, 1, 8, 8)
    for i, c in enumerate(y):
        X[i, 0, 4 * (c // 2):4 * (c // 2) + 4, 4 * (c % 2):4 * (c % 2) + 4] += 1.0
    return X, y


def _states(network):
    return {name: p.detach().clone() for name, p in network.named_parameters()}


def test_a_small_cnn_is_initialised_reproducibly_and_away_from_the_initial_scale():
    X, y = _classes()
    rows, labels = torch.tensor(X.reshape(len(X), -1)), torch.tensor(y[:, None], dtype=torch.float64)

    def init(seed):
        torch.manual_seed(123)
        network = _network(TinyCNN(3), 64, 3, input_shape=(1, 8, 8), prior_scale=1.0)
        before = torch.get_rng_state()
        # max_rows below the conv layers' patch counts: the subsampling is exercised
        _init(network, rows, labels, None, prior_scale=1.0, seed=seed, batch_size=16, max_rows=300)
        assert torch.equal(torch.get_rng_state(), before)  # the global generator is left alone
        assert network.training  # the mode is restored
        return network, _states(network)

    network, a = init(0)
    _, b = init(0)
    _, c = init(1)
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=0)
    assert all(not torch.equal(a[name], c[name]) for name in a)
    for name, value in a.items():
        if name.endswith("rho"):
            sigma = torch.nn.functional.softplus(value)
            assert torch.all((sigma - 1e-3).abs() > 1e-4), name
    # before any training the posterior-mean network is well above chance (1/3; 0.4 at the default init)
    with torch.no_grad():
        logits = network(rows, sample=False).numpy()
    assert np.mean(logits.argmax(1) == y) > 0.5


def test_iblm_cnn_classifier_fits_and_is_reproducible():
    X, y = _classes(60)

    def fit():
        return BayesianMLPClassifier(
            module=TinyCNN, input_shape=(1, 8, 8), inference=MeanFieldVI(init="iblm", max_iter=2, early_stopping=False, n_iter_no_change=50, n_mc_predict=5),
            random_state=0, prior_scale=1.0
        ).fit(X.reshape(len(X), -1), y)

    a, b = fit(), fit()
    np.testing.assert_array_equal(a.predict_proba(X.reshape(len(X), -1)), b.predict_proba(X.reshape(len(X), -1)))
    conv = a.module_["network"].module.features[0]
    assert isinstance(conv, MeanFieldConv2d)
    assert torch.all((torch.nn.functional.softplus(conv.weight_rho) - 1e-3).abs() > 1e-4)


def test_grouped_convolutions_and_other_initialisations_are_refused():
    network = _network(nn.Sequential(nn.Conv2d(2, 2, 3, groups=2), nn.AdaptiveAvgPool2d(1), nn.Flatten()), 50, 2,
                       input_shape=(2, 5, 5))
    X = torch.randn(10, 50, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="groups=1 only.*groups=2"):
        _init(network, X, torch.zeros(10, 2, dtype=torch.float64), torch.tensor([1.0, 1.0]))
    images, target = _classes(20)
    with pytest.raises(ValueError, match="init='lsuv'.*init='default' or init='iblm'"):
        BayesianMLPClassifier(module=TinyCNN, input_shape=(1, 8, 8), inference=MeanFieldVI(init="lsuv", max_iter=1, early_stopping=False, n_iter_no_change=50), prior_scale=1.0).fit(images.reshape(20, -1), target)
