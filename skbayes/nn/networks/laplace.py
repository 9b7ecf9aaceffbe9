"""An MLP with its hidden layers at the MAP and a Gaussian posterior over its last layer (last-layer Laplace).

The network of :class:`skbayes.inference.Laplace` after its fit: the
posterior of :func:`skbayes.nn.laplace.last_layer_posterior` attached to the
MAP network's hidden layers (Daxberger et al. 2021, "Laplace Redux",
section 3.2, the last-layer subset of weights).
"""

import torch
from torch import nn

from ..functional import ACTIVATIONS, feed_forward, standard_normal
from .mlp import forward_with_parameters

__all__ = ["LastLayerLaplaceMLP", "last_hidden_features"]


def last_hidden_features(x, hidden_weights, activation="relu"):
    """phi(x) = [h(x), 1] of an MLP's hidden layers: the last hidden activations and a constant for the bias.

    Parameters
    ----------
    x : torch.Tensor of shape (n, n_features)
    hidden_weights : list of torch.Tensor
        The hidden layers, each of shape (n_in + 1, n_out), the bias as the
        last row; empty for no hidden layer (then h(x) = x).
    activation : str, default="relu"
        Applied after every hidden layer.

    Returns
    -------
    phi : torch.Tensor of shape (n, P)
        P = the last hidden width (or n_features) + 1.
    """
    h = feed_forward(x, hidden_weights, activation, lambda w, h: torch.addmm(w[-1:], h, w[:-1]))
    if hidden_weights:
        h = ACTIVATIONS[activation](h)
    return torch.cat([h, torch.ones_like(h[:, :1])], dim=1)


class LastLayerLaplaceMLP(nn.Module):
    """An MLP whose last layer's weights have a Gaussian posterior, one per output.

    Parameters
    ----------
    hidden_weights : list of torch.Tensor
        The fixed hidden layers, each of shape (n_in + 1, n_out), the bias as
        the last row (the :class:`~skbayes.nn.StackedLinear` layout of one member).
    mean : torch.Tensor of shape (P, k)
        Posterior mean of the last layer (P = last hidden width + 1, the bias last).
    cov_factor : torch.Tensor of shape (k, P, P)
        A square root S_j of each output's posterior covariance, S_j S_j^T = Sigma_j.
    activation : str
        Between layers, as in the MAP network.
    """

    def __init__(self, hidden_weights, mean, cov_factor, activation="relu"):
        super().__init__()
        self.activation = activation
        self.n_hidden = len(hidden_weights)
        for i, w in enumerate(hidden_weights):
            self.register_buffer(f"hidden_{i}", w.detach().clone())
        self.register_buffer("mean", mean.detach().clone())
        self.register_buffer("cov_factor", cov_factor.detach().clone())

    def hidden_weights(self):
        """The fixed hidden layers, a list of tensors of shape (n_in + 1, n_out), the bias as the last row."""
        return [getattr(self, f"hidden_{i}") for i in range(self.n_hidden)]

    def features(self, x):
        """phi(x) = [h(x), 1], shape (n, P): the last hidden layer's activations and the bias's constant."""
        return last_hidden_features(x, self.hidden_weights(), self.activation)

    def predictive_moments(self, x):
        """The linearised (GLM) predictive of f, exact for a linear last layer: mean and variance, each (n, k).

        mean_j = phi^T m_j and var_j = ||S_j^T phi||^2 with S_j S_j^T the
        posterior covariance of output j (Immer et al. 2021, eq. 5).
        """
        phi = self.features(x)
        return phi @ self.mean, (phi @ self.cov_factor).square().sum(-1).T

    def sample_parameters(self, n_samples, generator=None):
        """``n_samples`` networks: the hidden layers repeated, the last layer drawn from its posterior.

        Returns
        -------
        parameters : list of (W, b)
            Per layer, W of shape (n_samples, n_in, n_out) and b of shape (n_samples, 1, n_out).
        """
        out = []
        for w in self.hidden_weights():
            w = w.expand(n_samples, *w.shape)
            out.append((w[:, :-1], w[:, -1:]))
        k, p = self.cov_factor.shape[0], self.cov_factor.shape[1]
        eps = standard_normal((n_samples, k, p, 1), self.mean, generator)
        last = self.mean.T[None] + (self.cov_factor[None] @ eps)[..., 0]  # (n_samples, k, P)
        last = last.transpose(1, 2)
        out.append((last[:, :-1], last[:, -1:]))
        return out

    def prediction_row_size(self, parameters):
        """Values held per input row when predicting under ``parameters``: a layer's input and output per draw."""
        widths = [w.shape[0] - 1 for w in self.hidden_weights()] + [self.mean.shape[0] - 1, self.mean.shape[1]]
        return 2 * parameters[0][0].shape[0] * max(widths)

    def forward_with(self, x, parameters):
        """The networks given by ``parameters`` at x (n, n_features): shape (S, n, k)."""
        return forward_with_parameters(x, parameters, self.activation)

    def forward(self, x, generator=None, sample=True):
        """One draw of the network (``sample=True``) or its posterior mean, shape (1, n, k)."""
        if not sample:
            return (self.features(x) @ self.mean)[None]
        return self.forward_with(x, self.sample_parameters(1, generator))

    def extra_repr(self):
        return f"n_hidden={self.n_hidden}, n_outputs={self.mean.shape[1]}, activation={self.activation!r}"
