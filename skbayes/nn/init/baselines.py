"""The data-independent (and LSUV) initialisations of a mean-field posterior compared with I-BLM (Rossi 2022, section 3.3).

Each is ``fn(network, X, Y, *, prior_scale, noise_std, generator) -> None`` on
a :class:`~skbayes.nn.BayesianMLP`, in its variational form (a mean and a
standard deviation per weight); see the package docstring for the list.
"""

import math

import torch

from ..functional import ACTIVATIONS
from .iblm import _IBLM_BATCH, _check_mean_field, _set_layer

__all__ = ["default", "lsuv", "orthogonal", "zero_mean"]


def default(network, X, Y, *, prior_scale, noise_std, generator):
    """Keep the layers' own initialisation (uniform means, small stds)."""


def zero_mean(std_fn):
    """Data-independent initialisation: mean 0, std ``std_fn(d_in, d_out)`` everywhere."""

    def init(network, X, Y, *, prior_scale, noise_std, generator):
        _check_mean_field(network)
        for layer in network.layers:
            _set_layer(
                layer,
                torch.zeros_like(layer.mu),
                std_fn(layer.in_features, layer.out_features),
            )

    return init


def _orthogonal_mean(layer, generator):
    """An (in+1, out) mean whose weight block has orthonormal rows or columns, bias 0 (Saxe et al. 2013)."""
    gauss = torch.randn(
        (layer.in_features, layer.out_features),
        generator=generator,
        device=layer.mu.device,
        dtype=layer.mu.dtype,
    )
    tall = gauss if layer.in_features >= layer.out_features else gauss.T
    q, r = torch.linalg.qr(tall)
    q = q * torch.sign(torch.diagonal(r)).where(
        torch.diagonal(r) != 0, torch.ones_like(torch.diagonal(r))
    )
    weight = q if layer.in_features >= layer.out_features else q.T
    return torch.cat([weight, torch.zeros_like(weight[:1])], dim=0)


def orthogonal(network, X, Y, *, prior_scale, noise_std, generator):
    """Orthogonal means, variance 1/D_in (Rossi 2022, section 3.3)."""
    _check_mean_field(network)
    for layer in network.layers:
        _set_layer(
            layer,
            _orthogonal_mean(layer, generator),
            1.0 / math.sqrt(max(layer.in_features, 1)),
        )


def lsuv(network, X, Y, *, prior_scale, noise_std, generator, batch_size=_IBLM_BATCH):
    """Orthogonal means rescaled so that each layer's mean output has unit variance (Mishkin & Matas 2016)."""
    _check_mean_field(network)
    act = ACTIVATIONS[network.activation]
    rows = torch.randint(
        X.shape[0],
        (min(batch_size, X.shape[0]),),
        generator=generator,
        device=generator.device,
    )
    h = X[rows.to(X.device)]
    for index, layer in enumerate(network.layers):
        mean = _orthogonal_mean(layer, generator)
        with torch.no_grad():
            if index:
                h = act(h)
            out = h @ mean[:-1]
            scale = out.std()
            if torch.isfinite(scale) and scale > 0:
                mean = mean / scale
                out = out / scale
            h = out
        _set_layer(layer, mean, 1.0 / math.sqrt(max(layer.in_features, 1)))
