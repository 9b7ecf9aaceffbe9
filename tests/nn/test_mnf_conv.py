"""MNFConv2d and MNF around a torch module: each pass against a hand-built convolution, the KL in closed form.

Louizos & Welling 2017: one multiplicative variable z per feature map,
W_ji | z ~ N(z_j mu_ji, sigma_ji^2). The passes are checked against
torch's ``F.conv2d`` with kernels built here from the layer's parameters,
the conditional KL against ``torch.distributions``, and the converted module
against the module it came from.
"""

import numpy as np
import pytest
import torch
from torch import nn
from torch.distributions import Normal, kl_divergence
from torch.nn import functional as F

from skbayes.nn import MNFConv2d, MNFLinear, noise_context
from skbayes.nn.networks import BayesianModuleNetwork
from skbayes.nn.networks.module import to_mnf

DTYPE = torch.float64


def _layer(n_flows=0, posterior_init_scale=0.2, seed=0, **kwargs):
    layer = MNFConv2d(
        2, 3, 3, padding=1, n_flows=n_flows, prior_scale=0.7, posterior_init_scale=posterior_init_scale,
        generator=torch.Generator().manual_seed(seed), dtype=DTYPE, **kwargs,
    )
    return layer


def _images(n, seed=1):
    return torch.randn((n, 2, 5, 5), generator=torch.Generator().manual_seed(seed), dtype=DTYPE)


def test_the_mean_pass_is_the_convolution_with_each_feature_map_scaled_by_its_z():
    layer = _layer()
    with torch.no_grad():
        layer.z_mu.copy_(torch.tensor([0.5, -1.0, 2.0], dtype=DTYPE))
    x = _images(4)
    kernel = layer.weight_mu.detach() * torch.tensor([0.5, -1.0, 2.0], dtype=DTYPE)[:, None, None, None]
    expected = F.conv2d(x, kernel, layer.bias_mu.detach(), padding=1)
    with noise_context(layer, "mean"):
        got = layer(x)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


def test_a_training_pass_draws_one_z_per_image_and_feature_map_and_keeps_it_for_the_kl():
    # kernels and biases nearly certain: each output map is z_j times the mean convolution plus the bias
    layer = _layer(posterior_init_scale=1e-9)
    x = _images(4000)
    with torch.no_grad(), noise_context(layer, "sample", torch.Generator().manual_seed(2)):
        out = layer(x)
    mean = F.conv2d(x, layer.weight_mu.detach(), None, padding=1)
    ratio = (out - layer.bias_mu.detach()[:, None, None]) / mean  # (n, 3, 5, 5)
    z = ratio.flatten(2).median(-1).values
    # the same z at every position of an image: one kernel per image
    np.testing.assert_allclose(
        (out - layer.bias_mu.detach()[:, None, None]).numpy(), (z[:, :, None, None] * mean).numpy(), atol=1e-6
    )
    # ... which are the z kept for kl()
    torch.testing.assert_close(layer._pending[0], z, rtol=1e-6, atol=1e-6)
    # q(z) = N(1, 0.1) per feature map, independent across images and maps
    assert np.all(np.abs(z.mean(0).numpy() - 1.0) < 4 * np.sqrt(0.1 / 4000))
    np.testing.assert_allclose(z.std(0).numpy(), np.sqrt(0.1), rtol=0.05)
    assert abs(np.corrcoef(z[:, 0].numpy(), z[:, 1].numpy())[0, 1]) < 0.06


def test_a_shared_pass_convolves_every_image_with_one_kernel_draw():
    layer = _layer(n_flows=2)
    x = _images(6)
    with torch.no_grad():
        with noise_context(layer, "shared", torch.Generator().manual_seed(3)):
            got = layer(x)
        weight, bias = layer.sample_parameters(1, torch.Generator().manual_seed(3))
        alone = torch.cat([layer_row for layer_row in (F.conv2d(x[i : i + 1], weight[0], bias[0], padding=1) for i in range(6))])
    torch.testing.assert_close(got, alone, rtol=1e-12, atol=1e-12)
    # kernel draws given z: N(z_j mu, sigma^2) around the scaled means
    weights, _ = layer.sample_parameters(20000, torch.Generator().manual_seed(4))
    z, _ = layer.draw_z((20000,), torch.Generator().manual_seed(4))
    residual = (weights - z[:, :, None, None, None] * layer.weight_mu).detach()
    np.testing.assert_allclose(residual.std(0).numpy(), layer.weight_sigma.detach().numpy(), rtol=0.05)


def test_the_conditional_kl_is_the_gaussian_kl_of_the_scaled_kernels():
    layer = _layer(n_flows=2)
    z = torch.randn((5, 3), generator=torch.Generator().manual_seed(5), dtype=DTYPE)
    prior = Normal(torch.zeros((), dtype=DTYPE), torch.tensor(0.7, dtype=DTYPE))
    with torch.no_grad():
        got = layer.conditional_kl(z)
        bias = kl_divergence(Normal(layer.bias_mu, layer.bias_sigma), prior).sum()
        for s in range(5):
            q = Normal(z[s, :, None, None, None] * layer.weight_mu, layer.weight_sigma)
            assert float(got[s]) == pytest.approx(float(kl_divergence(q, prior).sum() + bias), rel=1e-10)


class _LeNetLike(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 3, 3)
        self.head = nn.Linear(3 * 3 * 3, 2)

    def forward(self, x):
        return self.head(F.max_pool2d(torch.relu(self.conv(x)), 2).flatten(1))


def test_to_mnf_converts_linear_and_conv_layers_and_starts_at_the_module():
    torch.manual_seed(0)
    module = _LeNetLike().double()
    x = torch.randn((7, 1, 8, 8), dtype=DTYPE)
    expected = module(x).detach()
    converted = to_mnf(module, prior_scale=0.5, n_flows=0)
    assert isinstance(converted.conv, MNFConv2d) and isinstance(converted.head.layer, MNFLinear)
    assert converted.conv.prior_scale == converted.head.layer.prior_scale == 0.5
    # q(z_0) starts at mean 1: with no flow the mean pass is the module it came from
    network = BayesianModuleNetwork(converted, 64, 2, input_shape=(1, 8, 8), prior_scale=0.5)
    torch.testing.assert_close(network(x.reshape(7, 64), sample=False).detach(), expected, rtol=1e-10, atol=1e-10)
    # the network's KL sums the layers' bounds; with n_draws it draws afresh from the generator
    kl = network.kl(torch.Generator().manual_seed(0), n_draws=64)
    by_layer = converted.conv.kl(torch.Generator().manual_seed(0), n_draws=64)
    assert torch.isfinite(kl) and float(kl.detach()) > float(by_layer.detach()) > 0
    with pytest.raises(ValueError, match="MNF cannot make these layers Bayesian: BatchNorm1d"):
        to_mnf(nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 1)))


def test_to_whvi_gives_the_dense_layers_whvi_and_the_convolutions_mc_dropout():
    # Rossi 2022, section 4.5: WHVI on the fully connected layers, MC dropout on the convolutional filters
    from skbayes.nn import MCDropoutLayer, MeanFieldLinear, WHVILinear
    from skbayes.nn.networks.module import to_whvi

    torch.manual_seed(0)
    module = nn.Sequential(
        nn.Conv2d(1, 3, 3), nn.ReLU(), nn.Flatten(), nn.Linear(3 * 6 * 6, 16), nn.ReLU(), nn.Linear(16, 2)
    ).double()
    last_weight = module[5].weight.detach().clone()
    converted, dropped = to_whvi(module, 0.25, prior_scale=0.5, generator=torch.Generator().manual_seed(1))
    conv, mask = converted[0]
    assert isinstance(mask, MCDropoutLayer) and mask.dropout_rate == 0.25
    assert isinstance(converted[3].layer, WHVILinear) and isinstance(converted[5].layer, MeanFieldLinear)
    torch.testing.assert_close(converted[5].layer.mu[:-1].T.detach(), last_weight)  # starts at the module
    assert dropped == {"0.0.weight": 0.25}
    network = BayesianModuleNetwork(converted, 64, 2, input_shape=(1, 8, 8), prior_scale=0.5, dropped_weights=dropped)
    # the KL: the WHVI layer's and the mean-field layer's, and the convolution's weight decay of the KL
    # condition, l^2 / (2 (1 - p)) ||W||^2 + l^2 / 2 ||b||^2 with l = 1 / prior_scale
    decay = (conv.weight.detach().square().sum() / (1 - 0.25) + conv.bias.detach().square().sum()) / (2 * 0.5**2)
    expected = converted[3].layer.kl() + converted[5].layer.kl() + decay
    torch.testing.assert_close(network.kl().detach(), expected.detach())
    with pytest.raises(ValueError, match="at least one torch.nn.Linear"):
        to_whvi(nn.Sequential(nn.Conv2d(1, 2, 3)), 0.25)
