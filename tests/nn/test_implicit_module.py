"""Implicit posteriors around a torch module (Bayes by Hypernet and Bayes by GAN with ``module=``).

The converted convolution is checked against ``F.conv2d`` with kernels
rebuilt here, index by index, from the generated slices; a dense module
against :class:`~skbayes.nn.ImplicitMLP` with the same generators (the MLP
path, a separate implementation of the same model); prediction draws share
their weights across rows.
"""

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from skbayes.nn import ImplicitMLP
from skbayes.nn.networks import ImplicitModuleNetwork
from skbayes.nn.networks.implicit import implicit_layers, to_implicit

DTYPE = torch.float64


class _ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, (2, 3), padding=1)
        self.head = nn.Linear(3 * 3 * 3, 2)

    def forward(self, x):
        return self.head(F.max_pool2d(torch.relu(self.conv(x)), 2).flatten(1))


def _network(module, n_features, n_outputs, input_shape=None, **kwargs):
    converted = to_implicit(module.double(), noise_dim=4, hidden_sizes=(8,), generator=torch.Generator().manual_seed(0))
    return ImplicitModuleNetwork(converted, n_features, n_outputs, input_shape=input_shape, **kwargs)


def test_a_generated_kernel_is_one_slice_per_output_channel():
    network = _network(_ConvNet(), 2 * 5 * 6, 2, input_shape=(2, 5, 6))
    conv, head = network.layers
    assert (conv.in_features, conv.out_features) == (2 * 2 * 3, 3)
    assert (head.in_features, head.out_features) == (27, 2)
    slices = network.slice_draws(2, torch.Generator().manual_seed(1))
    x = torch.randn((4, 2 * 5 * 6), generator=torch.Generator().manual_seed(2), dtype=DTYPE)
    with torch.no_grad():
        got = network.forward_slices(x, slices)
        for s in range(2):
            kernel = torch.empty((3, 2, 2, 3), dtype=DTYPE)
            for j in range(3):
                for c in range(2):
                    for a in range(2):
                        for b in range(3):
                            kernel[j, c, a, b] = slices[0][s, j, c * 6 + a * 3 + b]
            h = F.conv2d(x.reshape(4, 2, 5, 6), kernel, slices[0][s, :, -1], padding=1)
            h = F.max_pool2d(torch.relu(h), 2).flatten(1)
            expected = h @ slices[1][s, :, :-1].T + slices[1][s, :, -1]
            torch.testing.assert_close(got[s], expected, rtol=1e-12, atol=1e-12)


def test_a_dense_module_is_the_implicit_mlp_with_the_same_generators():
    network = _network(nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)), 3, 2, prior_scale=0.5)
    mlp = ImplicitMLP(3, (4,), 2, prior_scale=0.5, noise_dim=4, generator_hidden_sizes=(8,), dtype=DTYPE)
    for mine, theirs in zip(network.layers, mlp.layers):
        theirs.load_state_dict(mine.state_dict())
    slices = network.slice_draws(6, torch.Generator().manual_seed(3))
    torch.testing.assert_close(slices[1], mlp.slice_draws(6, torch.Generator().manual_seed(3))[1])
    x = torch.randn((5, 3), generator=torch.Generator().manual_seed(4), dtype=DTYPE)
    with torch.no_grad():
        torch.testing.assert_close(network.forward_slices(x, slices), mlp.forward_slices(x, slices))
        torch.testing.assert_close(network.kl_entropy(slices), mlp.kl_entropy(slices))
        prior = network.prior_slice_draws(6, torch.Generator().manual_seed(5))
        for mine, theirs in zip(prior, mlp.prior_slice_draws(6, torch.Generator().manual_seed(5))):
            torch.testing.assert_close(mine, theirs)


def test_a_prediction_draw_shares_its_weights_across_rows():
    network = _network(_ConvNet(), 2 * 5 * 6, 2, input_shape=(2, 5, 6))
    x = torch.randn((5, 60), generator=torch.Generator().manual_seed(6), dtype=DTYPE)
    draws = network.sample_parameters(3, torch.Generator().manual_seed(7))
    with torch.no_grad():
        together = network.forward_with(x, draws)
        alone = torch.cat([network.forward_with(x[i : i + 1], draws) for i in range(5)], dim=1)
    torch.testing.assert_close(together, alone)
    assert not torch.allclose(together[0], together[1])  # the draws differ


def test_discriminators_follow_the_converted_layers_and_other_layers_are_refused():
    network = _network(_ConvNet(), 60, 2, input_shape=(2, 5, 6), discriminator_hidden_sizes=[(5,), (7,)])
    assert [(d.slice_size, d.n_slices) for d in network.discriminators] == [(13, 3), (28, 2)]
    with pytest.raises(NotImplementedError, match="no closed-form KL"):
        network.kl()
    with pytest.raises(ValueError, match="An implicit posterior cannot make these layers Bayesian: LayerNorm"):
        to_implicit(nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 1)))
    assert len(implicit_layers(to_implicit(nn.Linear(3, 1)))) == 1
    np.testing.assert_equal(network.prior_scales, [1.0, 1.0])
