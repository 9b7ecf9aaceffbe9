"""A Bayesian MLP of multiplicative normalising flow layers (Louizos & Welling 2017).

References
----------
.. [Louizos2017] C. Louizos and M. Welling, "Multiplicative normalizing flows
   for variational Bayesian neural networks", ICML 2017.
"""

from torch import nn

from ..functional import layer_prior_scale
from ..layers import MNFLinear
from .mlp import BayesianLayerStack

__all__ = ["MNFMLP"]


class MNFMLP(BayesianLayerStack):
    """A stack of :class:`~skbayes.nn.layers.MNFLinear` layers with a non-linearity between them.

    Each layer has its own auxiliary z, flows and reverse model; the layers
    are independent under q, so the network's auxiliary KL bound is the sum
    of the layers' ([Louizos2017]_, section 3.3).

    Parameters
    ----------
    n_features : int
        Input width d.
    hidden_layer_sizes : sequence of int
        Widths of the hidden layers; empty gives a Bayesian linear model.
    n_outputs : int
        Output width k.
    activation : {"relu", "tanh", "logistic", "identity"}, default="relu"
        Non-linearity after each hidden layer.
    flow : {"planar", "realnvp"}, default="planar"
    n_flows, n_flows_reverse, hidden_size : int, default=2, 2, 50
    prior_scale : float, default=1.0
    posterior_init_scale : float, default=1e-3
        See :class:`~skbayes.nn.layers.MNFLinear`.
    prior_scaling : {"fan_in"} or None, default=None
        The scale of each layer's prior: ``prior_scale`` (None) or
        prior_scale / sqrt(fan_in) (:func:`skbayes.nn.functional.layer_prior_scale`).
    generator : torch.Generator, optional
        Source of the random initial values.
    device, dtype : optional
    """

    def __init__(
        self,
        n_features,
        hidden_layer_sizes,
        n_outputs,
        *,
        activation="relu",
        flow="planar",
        n_flows=2,
        n_flows_reverse=2,
        hidden_size=50,
        prior_scale=1.0,
        posterior_init_scale=1e-3,
        prior_scaling=None,
        generator=None,
        device=None,
        dtype=None,
    ):
        super().__init__()
        sizes = [n_features, *hidden_layer_sizes, n_outputs]
        self.flow_settings = {"flow": flow, "n_flows": n_flows, "n_flows_reverse": n_flows_reverse, "hidden_size": hidden_size}
        self.layers = nn.ModuleList(
            MNFLinear(
                n_in, n_out, **self.flow_settings, prior_scale=layer_prior_scale(prior_scale, n_in, prior_scaling),
                posterior_init_scale=posterior_init_scale, generator=generator, device=device, dtype=dtype,
            )
            for n_in, n_out in zip(sizes[:-1], sizes[1:])
        )
        self.activation = activation
        self.prior_scaling = prior_scaling

    def kl(self, generator=None, n_draws=None):
        """Monte-Carlo estimate of the auxiliary bound on KL(q || p), a scalar in nats.

        The sum of the layers' :meth:`~skbayes.nn.layers.MNFLinear.kl`:
        after a training forward, over the z it drew; else over ``n_draws``
        new draws from ``generator``.
        """
        return sum(layer.kl(generator, n_draws) for layer in self.layers)
