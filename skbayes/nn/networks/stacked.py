"""A stack of M independent deterministic MLPs evaluated in one batched pass.

Deep ensembles (Lakshminarayanan et al. 2017) and the samples kept by a
Markov chain Monte Carlo sampler are both *finite* sets of weight settings.
:class:`StackedMLP` holds M of them as batched tensors, so that every layer of
all M networks is one ``torch.baddbmm`` call: on a CPU the cost of a small
ensemble is then close to the cost of one network, because small networks
are dominated by the per-operation overhead, not by the arithmetic.

It implements the finite-member protocol of the Bayesian MLP estimators:

``n_members``
    The number M of networks.
``member_parameters(index=None)``
    The weights of the given members (all of them, in order, by default), a
    list of ``(W, b)`` per layer with W of shape (S, n_in, n_out) and b of
    shape (S, 1, n_out): the structure of
    :meth:`skbayes.nn.networks.BayesianMLP.sample_parameters`.
``sample_parameters(n_samples, generator)``
    Members drawn uniformly with replacement, in the same structure.
``forward_with(x, parameters)``
    The networks given by such parameters evaluated at x.

References
----------
.. [Lakshminarayanan2017] B. Lakshminarayanan, A. Pritzel and C. Blundell,
   "Simple and scalable predictive uncertainty estimation using deep
   ensembles", NeurIPS 2017.
.. [Chen2014] T. Chen, E. B. Fox and C. Guestrin, "Stochastic gradient
   Hamiltonian Monte Carlo", ICML 2014 (Rossi 2022, section 2.4).
"""

import torch
from torch import nn

from ..functional import ACTIVATIONS, feed_forward, generator_device
from ..layers import StackedLinear
from .mlp import _affine, forward_with_parameters

__all__ = ["StackedMLP"]


class StackedMLP(nn.Module):
    r"""M independent deterministic MLPs (an ensemble, or kept MCMC samples).

    Member m computes
    f_m(x) = W_L^m a(... a(W_1^m x + b_1^m) ...) + b_L^m with its own weights;
    all members are evaluated together, one batched matrix product per layer.
    The weights have the prior N(0, ``prior_scale^2``) on every weight and
    bias, and :meth:`neg_log_prior` returns its negative log-density (up to a
    constant), so that ``negative_elbo(log_lik, neg_log_prior(), N)`` is the
    per-datum negative log posterior: the maximum a posteriori (MAP)
    objective of [Lakshminarayanan2017]_ with weight decay, and the energy
    U(w) / N sampled by SGHMC ([Chen2014]_).

    Parameters
    ----------
    n_features : int
        Input width d.
    hidden_layer_sizes : sequence of int
        Widths of the hidden layers; empty gives M linear models.
    n_outputs : int
        Output width k.
    n_members : int, default=5
        Number M of networks.
    activation : {"relu", "tanh", "logistic", "identity"}, default="relu"
        Non-linearity after each hidden layer.
    prior_scale : float, default=1.0
        Standard deviation s of the Gaussian prior on each weight (> 0).
    generator : torch.Generator, optional
        Source of the initial weights; the members are initialised
        independently of each other.
    device, dtype : optional
        Where and in which precision the parameters live.

    Attributes
    ----------
    layers : torch.nn.ModuleList of StackedLinear
        ``layers[0].in_features`` is d and ``layers[-1].out_features`` is k.
    n_members : int
        M.

    Raises
    ------
    ValueError
        On an unknown ``activation`` or a ``prior_scale`` <= 0; in
        :meth:`from_weights`, on weight shapes that do not chain layer to
        layer.
    """

    def __init__(
        self,
        n_features,
        hidden_layer_sizes,
        n_outputs,
        *,
        n_members=5,
        activation="relu",
        prior_scale=1.0,
        generator=None,
        device=None,
        dtype=None,
    ):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"Unknown activation {activation!r}; choose one of {sorted(ACTIVATIONS)}.")
        if not prior_scale > 0:
            raise ValueError(f"prior_scale must be > 0; got {prior_scale}.")
        sizes = [n_features, *hidden_layer_sizes, n_outputs]
        self.layers = nn.ModuleList(
            StackedLinear(n_members, n_in, n_out, generator=generator, device=device, dtype=dtype)
            for n_in, n_out in zip(sizes[:-1], sizes[1:])
        )
        self.n_members = int(n_members)
        self.activation = activation
        self.prior_scale = float(prior_scale)
        # Per-member, per-layer prior scales (set_layer_prior_scales); None: prior_scale everywhere.
        self.register_buffer("weight_prior_scales", None)
        self.register_buffer("bias_prior_scales", None)
        # Per-layer maps of the stored weights to the weights computed with (set_weight_transform).
        self.weight_transform = None

    def set_layer_prior_scales(self, weight_scales, bias_scales):
        """Give every layer its own prior scales, per member or shared (e.g. a GP-induced prior).

        Member m's prior becomes W_l ~ N(0, weight_scales[m, l]^2 I) and
        b_l ~ N(0, bias_scales[m, l]^2 I) for each layer l, in place of
        N(0, ``prior_scale^2``) on everything (Tran et al. 2022, GPI-G and,
        with per-member scales drawn by Gibbs steps, GPI-H).

        Parameters
        ----------
        weight_scales, bias_scales : torch.Tensor of shape (L,) or (n_members, L)
            Standard deviations (> 0), L = ``len(self.layers)``; a (L,)
            tensor is shared by all members. Copied.

        Raises
        ------
        ValueError
            On a shape that is neither.
        """
        n_layers = len(self.layers)
        scales = []
        for value in (weight_scales, bias_scales):
            value = torch.as_tensor(value, dtype=self.layers[0].weight.dtype, device=self.layers[0].weight.device)
            if value.shape not in ((n_layers,), (self.n_members, n_layers)):
                raise ValueError(
                    f"Layer prior scales must have shape ({n_layers},) or ({self.n_members}, {n_layers}); "
                    f"got {tuple(value.shape)}."
                )
            scales.append(value.detach().expand(self.n_members, n_layers).clone())
        self.weight_prior_scales, self.bias_prior_scales = scales

    def set_weight_transform(self, transform):
        """Compute with transformed weights: layer l uses ``transform[l](W_l)`` instead of its stored W_l.

        The stored tensors (what a sampler moves and :meth:`neg_log_prior`
        scores) are then the base variables w_0 of a reparameterised prior
        w = T(w_0): sampling w_0 from p_0(w_0) p(y | T(w_0)) and computing with
        T(w_0) samples the posterior under the prior T#p_0, with no need for
        the density of T (used by the GP-induced flow prior, GPI-NF, Rossi
        2022, eqs. 5.7-5.9).

        Parameters
        ----------
        transform : torch.nn.ModuleList or None
            One module per layer mapping a tensor of shape (S, n_in + 1,
            n_out) (the :class:`~skbayes.nn.StackedLinear` layout, bias
            last) to one of the same shape; its parameters are frozen.
            None computes with the stored weights.

        Raises
        ------
        ValueError
            If ``transform`` does not have one module per layer.
        """
        if transform is not None:
            if len(transform) != len(self.layers):
                raise ValueError(f"transform must have one module per layer ({len(self.layers)}); "
                                 f"got {len(transform)}.")
            for p in transform.parameters():
                p.requires_grad_(False)
        self.weight_transform = transform

    @classmethod
    def from_weights(cls, weights, *, activation="relu", prior_scale=1.0, layer_prior_scales=None,
                     weight_transform=None):
        """A StackedMLP holding given weights (copied).

        Parameters
        ----------
        weights : list of torch.Tensor
            One tensor per layer of shape (M, n_in + 1, n_out), the bias as
            the last row (the layout of ``StackedLinear.weight``), with the
            same M for every layer.
        activation, prior_scale : see the class.
        layer_prior_scales : (weight_scales, bias_scales) or None, default=None
            Passed to :meth:`set_layer_prior_scales` when given.
        weight_transform : torch.nn.ModuleList or None, default=None
            Passed to :meth:`set_weight_transform` (shared, not copied).

        Returns
        -------
        network : StackedMLP
        """
        first = weights[0]
        sizes = [first.shape[1] - 1, *(w.shape[2] for w in weights)]
        n_members = first.shape[0]
        if any(w.shape[0] != n_members or w.shape[1] != n_in + 1 for w, n_in in zip(weights, sizes[:-1])):
            raise ValueError("weights must have shapes (M, n_in + 1, n_out) chaining layer to layer.")
        network = cls(
            sizes[0],
            sizes[1:-1],
            sizes[-1],
            n_members=n_members,
            activation=activation,
            prior_scale=prior_scale,
            device=first.device,
            dtype=first.dtype,
        )
        with torch.no_grad():
            for layer, w in zip(network.layers, weights):
                layer.weight.copy_(w)
        if layer_prior_scales is not None:
            network.set_layer_prior_scales(*layer_prior_scales)
        if weight_transform is not None:
            network.set_weight_transform(weight_transform)
        return network

    def member_tensors(self):
        """The tensors holding all members' weights, each with the members on its first axis."""
        return [layer.weight for layer in self.layers]

    def with_member_tensors(self, tensors, layer_prior_scales=None):
        """A new network of this architecture holding ``tensors`` (as :meth:`member_tensors`), copied.

        ``layer_prior_scales`` as in :meth:`from_weights`; the weight
        transform is kept.
        """
        return type(self).from_weights(tensors, activation=self.activation, prior_scale=self.prior_scale,
                                       layer_prior_scales=layer_prior_scales, weight_transform=self.weight_transform)

    def layer_prior_scales(self):
        """The per-member, per-layer (weight, bias) prior scales, each (n_members, L), or None."""
        if self.weight_prior_scales is None:
            return None
        return self.weight_prior_scales, self.bias_prior_scales

    def select(self, index):
        """A new StackedMLP with the members ``index`` (a LongTensor), copied."""
        weights = [layer.weight.detach()[index] for layer in self.layers]
        scales = self.layer_prior_scales()
        if scales is not None:
            scales = tuple(s[index] for s in scales)
        return type(self).from_weights(weights, activation=self.activation, prior_scale=self.prior_scale,
                                       layer_prior_scales=scales, weight_transform=self.weight_transform)

    def forward(self, x, generator=None, sample=True):
        """Every member at its inputs.

        Parameters
        ----------
        x : torch.Tensor of shape (n, n_features) or (n_members, n, n_features)
            The same rows for every member, or one set of rows per member
            (e.g. a different minibatch for each). A leading axis of size 1
            is broadcast to all members.
        generator, sample : ignored
            Accepted for the protocol of :class:`~skbayes.nn.BayesianMLP`;
            the members are deterministic.

        Returns
        -------
        f : torch.Tensor of shape (n_members, n, n_outputs)
            ``f[m]`` depends only on member m's weights and on ``x[m]``.
        """
        if x.dim() == 2 or x.shape[0] == 1:
            x = x.expand(self.n_members, *x.shape[-2:])
        elif x.dim() != 3 or x.shape[0] != self.n_members:
            raise ValueError(
                f"x must have shape (n, {self.layers[0].in_features}) or "
                f"({self.n_members}, n, {self.layers[0].in_features}); got {tuple(x.shape)}."
            )
        if self.weight_transform is None:
            return feed_forward(x, self.layers, self.activation)
        return feed_forward(x, self.member_parameters(), self.activation, _affine)

    def member_parameters(self, index=None):
        """Weights of the members ``index``, all of them in order if None.

        Parameters
        ----------
        index : torch.LongTensor of shape (S,), optional

        Returns
        -------
        parameters : list of (W, b)
            Per layer, W of shape (S, n_in, n_out) and b of shape (S, 1, n_out)
            (S = n_members when ``index`` is None); the weights computed
            with, i.e. after the weight transform if one is set.
        """
        if self.weight_transform is None:
            return [layer.parameters_of(index) for layer in self.layers]
        out = []
        for i, layer in enumerate(self.layers):
            w = self.weight_transform[i](layer.weight if index is None else layer.weight[index])
            out.append((w[:, :-1], w[:, -1:]))
        return out

    def sample_parameters(self, n_samples, generator=None):
        """``n_samples`` members drawn uniformly with replacement.

        Parameters
        ----------
        n_samples : int
        generator : torch.Generator, optional
            On the device of the weights.

        Returns
        -------
        parameters : list of (W, b)
            As :meth:`member_parameters`, with S = n_samples.
        """
        device = self.layers[0].weight.device
        index = torch.randint(self.n_members, (n_samples,), generator=generator, device=generator_device(generator, device))
        index = index.to(device)
        return self.member_parameters(index)

    def forward_with(self, x, parameters):
        """Evaluate the networks given by ``parameters``.

        Parameters
        ----------
        x : torch.Tensor of shape (n, n_features)
        parameters : list of (W, b)
            As returned by :meth:`member_parameters` or :meth:`sample_parameters`.

        Returns
        -------
        f : torch.Tensor of shape (S, n, n_outputs)
            Row i depends only on x[i].
        """
        return forward_with_parameters(x, parameters, self.activation)

    def member_neg_log_prior(self):
        """Negative log prior of each member, tensor of shape (n_members,).

        sum(w^2) / (2 s^2) over the member's weights and biases: the
        negative log-density of N(0, s^2 I) up to its normalising constant.
        With per-layer scales (:meth:`set_layer_prior_scales`), the sum over
        layers of sum(W_l^2) / (2 s_{w,l}^2) + sum(b_l^2) / (2 s_{b,l}^2),
        each member with its own scales. Always of the stored weights (the
        base variables of a weight transform, :meth:`set_weight_transform`).
        """
        if self.weight_prior_scales is None:
            scale = 0.5 / self.prior_scale**2
            return scale * sum((layer.weight * layer.weight).sum(dim=(1, 2)) for layer in self.layers)
        total = 0.0
        for l, layer in enumerate(self.layers):
            weight, bias = layer.parameters_of()
            total = total + (weight * weight).sum(dim=(1, 2)) / (2 * self.weight_prior_scales[:, l] ** 2)
            total = total + (bias * bias).sum(dim=(1, 2)) / (2 * self.bias_prior_scales[:, l] ** 2)
        return total

    def neg_log_prior(self):
        """Negative log prior of all members together (their sum), a scalar in nats.

        Not a KL divergence: the members are point estimates, and this is the
        penalty that makes ``negative_elbo(log_lik, neg_log_prior(), N)`` the MAP
        objective (weight decay 1 / (2 N s^2) per member).
        """
        return self.member_neg_log_prior().sum()

    def extra_repr(self):
        return f"n_members={self.n_members}, activation={self.activation!r}, prior_scale={self.prior_scale}"
