"""An MLP whose weights, flattened into one vector, have a Gaussian posterior of a chosen family (black-box VI).

The network of :class:`skbayes.inference.BlackBoxVI`: the weights and biases
of every layer are one vector z of m values with q(z) a
:class:`skbayes.nn.bbvi.GaussianFamily` (mean field, full rank or low rank
plus diagonal; Bruno 2021, eqs. 2.74-2.76), so that posterior correlations
between any two weights can be represented.
"""

import torch
from torch import nn

from ..bbvi import GaussianFamily
from ..functional import unflatten
from .mlp import forward_with_parameters

__all__ = ["FlatGaussianMLP"]


class FlatGaussianMLP(nn.Module):
    """An MLP with q(z) over its flattened weights z (each layer's (n_in + 1) x n_out, the bias row last).

    Parameters
    ----------
    n_features : int
    hidden_layer_sizes : tuple of int
    n_outputs : int
    family : {"mean_field", "full_rank", "low_rank"}
    rank : int
        Columns of the low-rank factor.
    activation : str
    prior_scale : float
        The N(0, prior_scale^2 I) prior of every weight.
    init_scale : float
        Initial posterior standard deviation.
    generator : torch.Generator
        For the initial means (Glorot-uniform per layer) and the low-rank factor.
    """

    def __init__(self, n_features, hidden_layer_sizes, n_outputs, family="full_rank", rank=5, activation="relu",
                 prior_scale=1.0, init_scale=1e-2, generator=None, device=None, dtype=None):
        super().__init__()
        sizes = [n_features, *hidden_layer_sizes, n_outputs]
        self.shapes = [(a + 1, b) for a, b in zip(sizes[:-1], sizes[1:])]
        self.activation, self.prior_scale = activation, prior_scale
        loc = []
        for a, b in self.shapes:
            bound = (6.0 / (a - 1 + b)) ** 0.5
            w = (torch.rand(a, b, generator=generator, dtype=dtype) * 2 - 1) * bound
            w[-1] = 0.0  # biases start at 0
            loc.append(w.reshape(-1))
        self.posterior = GaussianFamily(sum(a * b for a, b in self.shapes), family, rank=rank,
                                        init_loc=torch.cat(loc), init_scale=init_scale, generator=generator,
                                        dtype=dtype, device=device)

    @property
    def n_params(self):
        """m, the number of weights and biases."""
        return self.posterior.n_params

    def unflatten(self, z):
        """Per layer (W of shape (S, n_in, n_out), b of shape (S, 1, n_out)) from draws z of shape (S, m)."""
        return [(w[:, :-1], w[:, -1:]) for w in unflatten(z, self.shapes)]

    def sample_parameters(self, n_samples, generator=None):
        """``n_samples`` reparameterised draws of q, as per-layer (W, b) stacks."""
        return self.unflatten(self.posterior.rsample(n_samples, generator))

    def forward_with(self, x, parameters):
        """The networks of ``parameters`` at x (n, n_features): shape (S, n, k)."""
        return forward_with_parameters(x, parameters, self.activation)

    def forward(self, x, generator=None, sample=True):
        """One draw of the network (``sample=True``) or the network at q's mean, shape (1, n, k)."""
        z = self.posterior.rsample(1, generator) if sample else self.posterior.loc[None]
        return self.forward_with(x, self.unflatten(z))

    def kl(self):
        """KL(q || N(0, prior_scale^2 I)) in closed form."""
        return self.posterior.kl(self.prior_scale)

    def prediction_row_size(self, parameters):
        """Values held per input row: a layer's input and output per draw."""
        return 2 * parameters[0][0].shape[0] * max(max(a - 1, b) for a, b in self.shapes)

    def extra_repr(self):
        return f"family={self.posterior.family!r}, n_params={self.n_params}, activation={self.activation!r}"
