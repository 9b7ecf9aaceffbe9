"""The WHVI multi-layer perceptron: Walsh-Hadamard hidden layers, a mean-field last layer.

References
----------
.. [Rossi2020] S. Rossi, S. Marmin and M. Filippone, "Walsh-Hadamard
   variational inference for Bayesian deep learning", NeurIPS 2020 (Rossi
   2022, PhD thesis, chapter 4; section 4.5 for the architecture of the UCI
   experiments).
"""

from torch import nn

from ..layers import MeanFieldLinear
from ..layers.whvi import WHVILinear
from .mlp import BayesianLayerStack

__all__ = ["WHVIMLP"]


class WHVIMLP(BayesianLayerStack):
    """A stack of :class:`~skbayes.nn.layers.whvi.WHVILinear` layers, the last one optionally mean-field.

    In the thesis's regression experiments the hidden layers are WHVI and
    the last layer is a fully factorised Gaussian (Rossi 2022, section
    4.5); ``last_layer="whvi"`` makes every layer WHVI.

    Parameters
    ----------
    n_features : int
    hidden_layer_sizes : sequence of int
        Widths of the hidden layers; empty gives one layer (of kind
        ``last_layer``).
    n_outputs : int
    last_layer : {"mean_field", "whvi"}, default="mean_field"
    activation : str, default="relu"
        Key of :data:`~skbayes.nn.functional.ACTIVATIONS`.
    prior_scale : float, default=1.0
        Standard deviation of the Gaussian prior on the biases and on the
        weights of a mean-field last layer.
    g_prior_variance : float, default=1e-5
        Variance of the N(0, lambda I) prior on each WHVI layer's g.
    posterior_init_scale : float, default=1e-3
        Initial posterior standard deviation (relative to sqrt(lambda) for g).
    n_flows : int, default=0
        Planar flows on each WHVI layer's g (NF-WHVI).
    generator : torch.Generator, optional
    device, dtype : optional

    Raises
    ------
    ValueError
        On an unknown ``last_layer``.
    """

    def __init__(
        self, n_features, hidden_layer_sizes, n_outputs, *, last_layer="mean_field", activation="relu",
        prior_scale=1.0, g_prior_variance=1e-5, posterior_init_scale=1e-3, n_flows=0, generator=None,
        device=None, dtype=None,
    ):
        super().__init__()
        if last_layer not in ("mean_field", "whvi"):
            raise ValueError(f"last_layer must be 'mean_field' or 'whvi'; got {last_layer!r}.")
        sizes = [n_features, *hidden_layer_sizes, n_outputs]
        factory = {"generator": generator, "device": device, "dtype": dtype}
        shared = {"prior_scale": prior_scale, "posterior_init_scale": posterior_init_scale, **factory}
        whvi = {"g_prior_variance": g_prior_variance, "n_flows": n_flows}
        layers = [WHVILinear(a, b, **whvi, **shared) for a, b in zip(sizes[:-2], sizes[1:-1])]
        if last_layer == "whvi":
            layers.append(WHVILinear(sizes[-2], sizes[-1], **whvi, **shared))
        else:
            layers.append(MeanFieldLinear(sizes[-2], sizes[-1], **shared))
        self.layers = nn.ModuleList(layers)
        self.activation = activation
