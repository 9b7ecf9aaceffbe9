"""The deterministic multi-layer perceptron, below both the layers and the networks.

:class:`MLP` is the generator of the implicit layers
(:class:`~skbayes.nn.layers.ImplicitLinear`), the generator and discriminator
of the implicit networks, the VAE's encoder and decoder and the functional
priors' networks. It lives here, importing nothing of ``skbayes.nn`` but its
functions, so that ``layers`` need not import ``networks`` (which imports
``layers``); ``skbayes.nn``, ``skbayes.nn.networks`` and
``skbayes.nn.networks.mlp`` export it.
"""

import torch
from torch import nn

from .functional import feed_forward, uniform_init

__all__ = ["MLP"]


def _linear(n_in, n_out, generator, factory):
    # torch.nn.Linear with its default scale drawn from an explicit generator;
    # skip_init avoids touching the global RNG; it needs a device (None would leave the layer on "meta").
    factory = {**factory, "device": torch.get_default_device() if factory["device"] is None else factory["device"]}
    layer = torch.nn.utils.skip_init(nn.Linear, n_in, n_out, **factory)
    with torch.no_grad():
        layer.weight.copy_(uniform_init(layer.weight.shape, n_in, generator, **factory))
        layer.bias.copy_(uniform_init(layer.bias.shape, n_in, generator, **factory))
    return layer


class MLP(nn.Module):
    """Deterministic multi-layer perceptron, a non-linearity between layers.

    Parameters
    ----------
    sizes : sequence of int
        Widths ``[n_in, *hidden, n_out]``.
    activation : {"relu", "tanh", "logistic", "identity"}, default="relu"
    generator : torch.Generator, optional
        Source of the random initial weights.
    device, dtype : optional
    """

    def __init__(self, sizes, activation="relu", *, generator=None, device=None, dtype=None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.layers = nn.ModuleList(
            _linear(a, b, generator, factory) for a, b in zip(sizes[:-1], sizes[1:])
        )
        self.activation = activation

    def forward(self, h):
        """Map (..., n_in) to (..., n_out)."""
        return feed_forward(h, self.layers, self.activation)
