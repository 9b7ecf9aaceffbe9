"""Multi-layer perceptrons: Bayesian (a stack of Bayesian layers) and deterministic.

:class:`BayesianLayerStack` is the prediction protocol shared by every network
of Bayesian layers (:class:`BayesianMLP`, :class:`~skbayes.nn.networks.PBPNetwork`);
:func:`forward_with_parameters` evaluates any MLP under a stack of weight
draws; :class:`MLP`, the plain deterministic network of the VAE's encoder
and decoder and of the generators, is defined below the layers (``skbayes/nn/_mlp.py``,
which the implicit layers import too) and exported here.

References
----------
.. [Blundell2015] C. Blundell et al., "Weight uncertainty in neural networks",
   ICML 2015 (Cinelli 2019, section 3.3.3).
.. [Gal2016] Y. Gal, "Uncertainty in deep learning", PhD thesis, 2016,
   chapter 3 (Gal 2016).
"""

import torch
from torch import nn

from .._mlp import MLP
from ..functional import feed_forward, layer_prior_scale
from ..layers import DropoutLinear, MeanFieldLinear

__all__ = ["MLP", "BayesianLayerStack", "BayesianMLP", "forward_with_parameters"]


def _affine(parameters, h):
    weight, bias = parameters
    return torch.baddbmm(bias, h, weight)


def forward_with_parameters(x, parameters, activation="relu"):
    """Evaluate an MLP under a stack of weight draws (one batched matmul per layer).

    Parameters
    ----------
    x : torch.Tensor of shape (n, n_features)
    parameters : list of (W, b)
        Per layer, W of shape (S, n_in, n_out) and b of shape (S, 1, n_out),
        e.g. from :meth:`BayesianMLP.sample_parameters`.
    activation : str, default="relu"
        Key of :data:`~skbayes.nn.functional.ACTIVATIONS`, applied between layers.

    Returns
    -------
    f : torch.Tensor of shape (S, n, n_outputs)
        One function evaluation per draw; row i depends only on x[i].
    """
    n_draws = parameters[0][0].shape[0]
    return feed_forward(x.expand(n_draws, *x.shape), parameters, activation, _affine)


class BayesianLayerStack(nn.Module):
    """Prediction protocol of a stack of Bayesian layers with ``activation`` between them.

    Subclasses set ``self.layers`` (an :class:`~torch.nn.ModuleList` of layers
    with ``forward(x, generator, sample)`` and ``sample_parameters(n,
    generator)``, see :mod:`skbayes.nn.layers`) and ``self.activation`` (a key
    of :data:`~skbayes.nn.functional.ACTIVATIONS`); the estimators predict through
    :meth:`sample_parameters` and :meth:`forward_with`.
    """

    def forward(self, x, generator=None, sample=True):
        """Training-time pass with per-row noise.

        Parameters
        ----------
        x : torch.Tensor of shape (..., n, n_features)
        generator : torch.Generator, optional
        sample : bool, default=True
            If False, propagate the posterior mean weights (no noise).

        Returns
        -------
        f : torch.Tensor of shape (..., n, n_outputs)
        """
        return feed_forward(
            x, self.layers, self.activation, lambda layer, h: layer(h, generator=generator, sample=sample)
        )

    def kl(self):
        """KL(q || p) of all the weights: the sum of the layers' ``kl()``, a scalar in nats.

        The layers are independent under q and p, so their KLs add up (a
        Monte-Carlo estimate for layers whose KL has no closed form).
        """
        kls = [layer.kl() for layer in self.layers]
        return sum(kls[1:], kls[0]) if kls else 0.0

    def sample_parameters(self, n_samples, generator=None):
        """Draw ``n_samples`` weight settings, a list of (W, b) per layer.

        W has shape (n_samples, n_in, n_out) and b (n_samples, 1, n_out).
        """
        return [layer.sample_parameters(n_samples, generator) for layer in self.layers]

    def forward_with(self, x, parameters):
        """Evaluate the network under given weight draws.

        Parameters
        ----------
        x : torch.Tensor of shape (n, n_features)
        parameters : list of (W, b)
            As returned by :meth:`sample_parameters`.

        Returns
        -------
        f : torch.Tensor of shape (n_samples, n, n_outputs)
            One function evaluation per weight draw; row i depends only on x[i].
        """
        return forward_with_parameters(x, parameters, self.activation)


class BayesianMLP(BayesianLayerStack):
    """A stack of Bayesian linear layers with a non-linearity between them.

    Parameters
    ----------
    n_features : int
        Input width d.
    hidden_layer_sizes : sequence of int
        Widths of the hidden layers; empty gives a Bayesian linear model.
    n_outputs : int
        Output width k.
    inference : {"mfvi", "mc_dropout"}, default="mfvi"
        ``"mfvi"`` uses :class:`MeanFieldLinear` layers (Bayes by Backprop with
        local reparameterisation, [Blundell2015]_); ``"mc_dropout"`` uses
        :class:`DropoutLinear` layers, i.e. dropout before every weight layer,
        the input layer included ([Gal2016]_, section 3.2.3).
    activation : {"relu", "tanh", "logistic", "identity"}, default="relu"
        Non-linearity after each hidden layer.
    prior_scale : float, default=1.0
        Standard deviation of the Gaussian prior on each weight (of a layer
        with one input under ``prior_scaling="fan_in"``).
    prior_scaling : {"fan_in"} or None, default=None
        None: the prior N(0, prior_scale^2) on every weight and bias;
        ``"fan_in"``: N(0, prior_scale^2 / fan_in) on those of a layer with
        ``fan_in`` inputs (:func:`skbayes.nn.functional.layer_prior_scale`).
    posterior_init_scale : float, default=1e-3
        Initial posterior standard deviation (``"mfvi"`` only).
    dropout_rate : float, default=0.01
        Drop probability (``"mc_dropout"`` only).
    generator : torch.Generator, optional
        Source of the random initial weights.
    device, dtype : optional
        Where and in which precision the parameters live.

    Raises
    ------
    ValueError
        On an unknown ``inference`` or ``prior_scaling``.
    """

    def __init__(
        self,
        n_features,
        hidden_layer_sizes,
        n_outputs,
        *,
        inference="mfvi",
        activation="relu",
        prior_scale=1.0,
        prior_scaling=None,
        posterior_init_scale=1e-3,
        dropout_rate=0.01,
        generator=None,
        device=None,
        dtype=None,
    ):
        super().__init__()
        sizes = [n_features, *hidden_layer_sizes, n_outputs]
        factory = {"generator": generator, "device": device, "dtype": dtype}
        if inference == "mfvi":
            extra = {"posterior_init_scale": posterior_init_scale}
            layer_cls = MeanFieldLinear
        elif inference == "mc_dropout":
            extra = {"dropout_rate": dropout_rate}
            layer_cls = DropoutLinear
        else:
            raise ValueError(f"Unknown inference {inference!r}.")
        self.layers = nn.ModuleList(
            layer_cls(n_in, n_out, prior_scale=layer_prior_scale(prior_scale, n_in, prior_scaling), **extra, **factory)
            for n_in, n_out in zip(sizes[:-1], sizes[1:])
        )
        self.activation = activation
        self.prior_scaling = prior_scaling
