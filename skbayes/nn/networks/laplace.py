"""The networks of the Laplace approximation: the last layer's posterior, or all weights' with the linearised MLP.

The networks of :class:`skbayes.inference.Laplace` after its fit:
:class:`LastLayerLaplaceMLP`, the posterior of
:func:`skbayes.nn.laplace.last_layer_posterior` attached to the MAP network's
hidden layers (Daxberger et al. 2021, "Laplace Redux", section 3.2, the
last-layer subset of weights), and :class:`LinearizedLaplaceMLP`, the MAP
network linearised in all its weights under the GGN posterior of
:mod:`skbayes.nn.ggn` (Immer et al. 2021, eq. 5).
"""

import torch
from torch import nn

from ..functional import ACTIVATIONS, feed_forward, standard_normal, unflatten
from ..ggn import LayerEigenbasis, activation_derivative, glm_predictive_variance, mlp_jacobian_factors
from .mlp import forward_with_parameters

__all__ = ["LastLayerLaplaceMLP", "LinearizedLaplaceMLP", "ModuleLastLayerLaplace", "last_hidden_features",
           "last_linear", "module_last_layer_features"]


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


def _store_bases(module, bases, prior_precision):
    """Register the eigenbases (:class:`skbayes.nn.ggn.LayerEigenbasis`) and their prior precisions as buffers."""
    module.n_bases = len(bases)
    for i, basis in enumerate(bases):
        module.register_buffer(f"eigenvalues_{i}", basis.eigenvalues.detach().clone())
        module.register_buffer(f"q_in_{i}", None if basis.q_in is None else basis.q_in.detach().clone())
        module.register_buffer(f"q_out_{i}", None if basis.q_out is None else basis.q_out.detach().clone())
    module.register_buffer("prior_precision", prior_precision.detach().clone())


def _stored_bases(module):
    """The eigenbases registered by :func:`_store_bases`, on the module's device."""
    return [LayerEigenbasis(getattr(module, f"eigenvalues_{i}"), getattr(module, f"q_in_{i}"),
                            getattr(module, f"q_out_{i}")) for i in range(module.n_bases)]


class LinearizedLaplaceMLP(nn.Module):
    """An MLP linearised at its MAP weights with a Gaussian posterior over all of them (Laplace, all weights).

    f_lin(x; theta) = f(x; theta_*) + J(x) (theta - theta_*), with
    theta - theta_* ~ N(0, (H + delta)^{-1}) for the GGN H in one of the
    structures of :mod:`skbayes.nn.ggn`: the linearised (GLM) predictive of
    Immer et al. (2021, eq. 5), whose draws are exact draws of that
    Gaussian process, and whose closed-form moments are
    :meth:`predictive_moments`.

    Parameters
    ----------
    weights : list of torch.Tensor
        The MAP layers, each (n_in + 1, n_out), the bias as the last row.
    bases : list of skbayes.nn.ggn.LayerEigenbasis
        The GGN in its eigenbases (one per layer, or one for ``"full"``).
    prior_precision : torch.Tensor
        delta of each basis.
    activation : str
        Between layers, as in the MAP network.
    n_fixed : int, default=0
        The first layers, without a posterior (they stay at the MAP); the
        bases are those of the layers after them (the last layer alone:
        ``n_fixed = len(weights) - 1``).
    """

    def __init__(self, weights, bases, prior_precision, activation="relu", n_fixed=0):
        super().__init__()
        self.activation = activation
        self.n_layers, self.n_fixed = len(weights), n_fixed
        for i, w in enumerate(weights):
            self.register_buffer(f"weight_{i}", w.detach().clone())
        _store_bases(self, bases, prior_precision)

    def weights(self):
        """The MAP layers, a list of tensors of shape (n_in + 1, n_out)."""
        return [getattr(self, f"weight_{i}") for i in range(self.n_layers)]

    def bases(self):
        """The posterior's eigenbases (:class:`skbayes.nn.ggn.LayerEigenbasis`)."""
        return _stored_bases(self)

    def predictive_moments(self, x):
        """Mean f(x; theta_*) and variance J (H + delta)^{-1} J^T of the linearised predictive of f, each (n, k)."""
        f, inputs, grads = mlp_jacobian_factors(x, self.weights(), self.activation)
        first = self.n_fixed
        return f, glm_predictive_variance(inputs[first:], grads[first:], self.bases(), self.prior_precision)

    def sample_parameters(self, n_samples, generator=None):
        """``n_samples`` draws of theta - theta_*: per layer dW (S, n_in, n_out) and db (S, 1, n_out)."""
        weights = self.weights()
        free = weights[self.n_fixed:]
        draws = [basis.sample(n_samples, delta, generator) for basis, delta in zip(self.bases(), self.prior_precision)]
        if draws[0].dim() == 2:  # "full": one flat draw of the layers, split
            draws = unflatten(draws[0], [w.shape for w in free])
        draws = [w.new_zeros(n_samples, *w.shape) for w in weights[:self.n_fixed]] + draws
        return [(d[:, :-1], d[:, -1:]) for d in draws]

    def prediction_row_size(self, parameters):
        """Values held per input row: a layer's value and tangent per draw."""
        n_draws = parameters[0][0].shape[0]
        return 2 * (n_draws + 1) * max(max(w.shape[0] - 1, w.shape[1]) for w in self.weights())

    def forward_with(self, x, parameters):
        """f_lin at x (n, n_features) for each draw of ``parameters``: shape (S, n, k), one tangent pass."""
        act = ACTIVATIONS[self.activation]
        h, dh = x, None
        weights = self.weights()
        for l, (w, (dw, db)) in enumerate(zip(weights, parameters)):
            s = torch.addmm(w[-1:], h, w[:-1])
            ds = torch.baddbmm(db, h.expand(dw.shape[0], *h.shape), dw)
            if dh is not None:
                ds = ds + dh @ w[:-1]
            if l < len(weights) - 1:
                h, dh = act(s), activation_derivative(self.activation, s) * ds
        return s + ds

    def forward(self, x, generator=None, sample=True):
        """One draw of the linearised network (``sample=True``) or f(x; theta_*), shape (1, n, k)."""
        if not sample:
            return mlp_jacobian_factors(x, self.weights(), self.activation)[0][None]
        return self.forward_with(x, self.sample_parameters(1, generator))

    def extra_repr(self):
        n_outputs = getattr(self, f"weight_{self.n_layers - 1}").shape[1]
        return f"n_layers={self.n_layers}, n_outputs={n_outputs}, activation={self.activation!r}"


def last_linear(module):
    """The last :class:`torch.nn.Linear` of ``module`` (in the order of ``named_modules``): (name, layer).

    Raises
    ------
    ValueError
        If the module has none.
    """
    linears = [(name, layer) for name, layer in module.named_modules() if isinstance(layer, nn.Linear)]
    if not linears:
        raise ValueError("Laplace on a torch module puts its posterior on the module's last nn.Linear; the module "
                         "has none.")
    return linears[-1]


def module_last_layer_features(network, x):
    """phi(x) = [input of the module's last nn.Linear, 1] under member 0, shape (n, P), and the output (n, k).

    ``network`` is a :class:`~skbayes.nn.networks.module.StackedModuleNetwork`; its first member's
    parameters are used.

    Raises
    ------
    ValueError
        If the module's output is not that layer's output, one row per input row (then the last
        layer is not the module's last operation).
    """
    _, layer = last_linear(network._base)
    store = {}
    handle = layer.register_forward_hook(lambda module, inputs, output: store.update(inputs=inputs[0], output=output))
    try:
        out = network._call([tensor[0] for tensor in network.stacked], x)
    finally:
        handle.remove()
    h, last = store["inputs"].reshape(-1, layer.in_features), store["output"].reshape(-1, layer.out_features)
    if h.shape[0] != x.shape[0] or last.shape != out.shape or not torch.equal(last, out):
        raise ValueError("Laplace on a torch module needs the module's output to be its last nn.Linear's output, one "
                         "row per input row; this module does more after that layer.")
    return torch.cat([h, torch.ones_like(h[:, :1])], dim=1), out


class ModuleLastLayerLaplace(nn.Module):
    """A torch module at its MAP with a Gaussian posterior over its last :class:`torch.nn.Linear` (last-layer Laplace).

    f(x) = phi(x)^T (W_* + dW), phi the input of the last linear layer with a constant for its bias, dW ~ N(0,
    (H + delta)^{-1}) for the layer's GGN H in one of the structures of :mod:`skbayes.nn.ggn`: the
    last-layer Laplace of Daxberger et al. (2021, section 3.2) on any module whose output is that layer's.

    Parameters
    ----------
    network : StackedModuleNetwork
        The MAP module (its first member); it computes phi.
    last_weight : torch.Tensor of shape (P, k)
        The last layer's MAP weights, the bias as the last row.
    bases : list of skbayes.nn.ggn.LayerEigenbasis
        One basis over the (P, k) layer (its eigenvalues of that shape, or of shape (P k,) for ``"full"``).
    prior_precision : torch.Tensor of shape (1,)

    Raises
    ------
    ValueError
        If ``bases`` does not hold exactly one basis.
    """

    def __init__(self, network, last_weight, bases, prior_precision):
        super().__init__()
        self.network = network
        self.register_buffer("last_weight", last_weight.detach().clone())
        if len(bases) != 1:
            raise ValueError(f"One basis over the last layer is expected; got {len(bases)}.")
        _store_bases(self, bases, prior_precision)

    def bases(self):
        """The posterior's eigenbasis, as a one-element list."""
        return _stored_bases(self)

    def features(self, x):
        """phi(x), shape (n, P)."""
        return module_last_layer_features(self.network, x)[0]

    def predictive_moments(self, x):
        """Mean phi^T W_* and variance of the last layer's Gaussian predictive of f, each (n, k)."""
        phi = self.features(x)
        k = self.last_weight.shape[1]
        eye = torch.eye(k, dtype=phi.dtype, device=phi.device).expand(phi.shape[0], k, k)
        return phi @ self.last_weight, glm_predictive_variance([phi], [eye], self.bases(), self.prior_precision)

    def sample_parameters(self, n_samples, generator=None):
        """``n_samples`` draws of the last layer's deviation dW, a one-element list of shape (S, P, k)."""
        (basis,) = self.bases()
        return [basis.sample(n_samples, self.prior_precision[0], generator).reshape(n_samples,
                                                                                      *self.last_weight.shape)]

    def prediction_row_size(self, parameters):
        """Values held per input row: the module's widest layer and one output per draw."""
        return 2 * self.network.widest + parameters[0].shape[0] * self.last_weight.shape[1]

    def forward_with(self, x, parameters):
        """f at x (n, n_features) for each draw: shape (S, n, k)."""
        phi = self.features(x)
        return phi @ self.last_weight + torch.matmul(phi, parameters[0])

    def forward(self, x, generator=None, sample=True):
        """One draw (``sample=True``) or the MAP, shape (1, n, k)."""
        if not sample:
            return (self.features(x) @ self.last_weight)[None]
        return self.forward_with(x, self.sample_parameters(1, generator))
