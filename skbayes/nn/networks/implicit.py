r"""Networks of implicit-posterior layers, and the per-layer discriminator of Bayes by GAN.

:class:`ImplicitModuleNetwork` does the same for any torch module whose
Linear and Conv2d layers ``to_implicit`` has given generators.

:class:`ImplicitMLP` stacks :class:`~skbayes.nn.ImplicitLinear` layers
(one generator network per layer, mean-field across layers: Killingberg
2021, eq. 4.3) and estimates the KL of q to the Gaussian prior (N(0, prior_scale^2),
or N(0, prior_scale^2 / fan_in) per layer under ``prior_scaling="fan_in"``) from draws, summed over layers and over the independent slices of each
layer:

* by the exact prior cross-entropy less the 1-nearest-neighbour entropy
  estimate on each slice's manifold (:meth:`ImplicitMLP.kl_entropy`,
  :func:`~skbayes.nn.divergences.gaussian_prior_kl_from_draws`; Bayes by
  Hypernet's default), or
* by the two-sample 1-nearest-neighbour estimator (Bayes by Hypernet as in
  [Pawlowski2017]_ and Killingberg 2021, eq. 3.6,
  :func:`~skbayes.nn.divergences.knn_kl`), or
* by the mean logit of a :class:`SliceDiscriminator` per layer (Bayes by GAN
  [Killingberg2021]_, Proposition 1, Algorithm 7), trained on the binary
  cross-entropy of eq. 4.1 (:func:`~skbayes.nn.divergences.discriminator_loss`).

References
----------
.. [Pawlowski2017] N. Pawlowski, A. Brock, M. C. H. Lee, M. Rajchl and
   B. Glocker, "Implicit weight uncertainty in neural networks", arXiv
   1711.01297, 2017.
.. [Killingberg2021] L. Killingberg, "Generative adversarial networks for
   flexible variational posteriors in Bayesian neural networks", MSc
   thesis, NTNU, 2021, chapter 4.
"""

import torch
from torch import nn
from torch.nn import functional as F

from ..divergences import discriminator_kl, discriminator_loss, gaussian_prior_kl_from_draws, knn_kl
from ..functional import layer_prior_scale, standard_normal
from ..layers.implicit import ImplicitLinear, parameters_from_slices
from ..layers.noise import StochasticLayer
from .mlp import MLP, BayesianLayerStack
from .module import BayesianModuleNetwork, convert_layers

__all__ = ["ImplicitMLP", "ImplicitModuleNetwork", "SliceDiscriminator", "implicit_layers", "to_implicit"]

class SliceDiscriminator(nn.Module):
    """Discriminator between q's and p's draws of the slices of one layer, conditioned on the slice.

    One network per layer for all N_out slices, each input being the slice
    (N_in weights and a bias) and the one-hot code of its output unit
    ([Killingberg2021]_, section 4.2.2: "N_in + N_out" inputs). A
    :class:`~skbayes.nn.MLP` without batch normalisation (which the thesis
    found to underestimate the KL), one logit out.

    Parameters
    ----------
    slice_size : int
        Length of a slice, N_in + 1.
    n_slices : int
        Number of slices N_out (the width of the one-hot code).
    hidden_sizes : tuple of int
        Hidden widths; Killingberg 2021, Table 4.1 suggests three layers of
        0.5 max(N_in, N_out) units.
    activation : {"relu", "tanh", "logistic", "identity"}, default="relu"
    generator : torch.Generator, optional
        Source of the initial weights.
    device, dtype : optional
    """

    def __init__(self, slice_size, n_slices, hidden_sizes, activation="relu", *, generator=None, device=None,
                 dtype=None):
        super().__init__()
        self.slice_size = int(slice_size)
        self.n_slices = int(n_slices)
        sizes = [self.slice_size + self.n_slices, *hidden_sizes, 1]
        self.net = MLP(sizes, activation, generator=generator, device=device, dtype=dtype)

    def forward(self, slices):
        """Logits of D at ``slices`` of shape (..., n_slices, slice_size); returns (..., n_slices)."""
        codes = torch.eye(self.n_slices, device=slices.device, dtype=slices.dtype)
        codes = codes.expand(*slices.shape[:-1], self.n_slices)
        return self.net(torch.cat([slices, codes], dim=-1)).squeeze(-1)


class _ImplicitKL:
    """Slice draws and the KL estimates of a network of :class:`~skbayes.nn.ImplicitLinear` generators.

    Shared by :class:`ImplicitMLP` and :class:`ImplicitModuleNetwork`, which
    hold the generators in ``layers`` (in the order of the network), the
    prior scale of each in ``prior_scales`` and, for Bayes by GAN, one
    :class:`SliceDiscriminator` per layer in ``discriminators``.
    """

    def slice_draws(self, n_draws, generator=None):
        """Per layer, ``n_draws`` draws of its slices, (n_draws, out, in + 1) (differentiable)."""
        return [layer.slice_draws(n_draws, generator) for layer in self.layers]

    def prior_slice_draws(self, n_draws, generator=None):
        """Per layer, ``n_draws`` draws of its slices from the prior, N(0, ``prior_scales[l]^2``)."""
        draws = []
        for layer, scale in zip(self.layers, self.prior_scales):
            reference = layer.generator_net.layers[0].weight
            shape = (n_draws, layer.out_features, layer.in_features + 1)
            draws.append(scale * standard_normal(shape, reference, generator))
        return draws

    def kl_knn(self, slices, n_prior_draws, generator=None):
        """1-nearest-neighbour estimate of KL(q || p), summed over layers and slices, in nats.

        Each slice's KL is estimated from its n_draws draws and
        ``n_prior_draws`` fresh prior draws in dimension in + 1
        (:func:`~skbayes.nn.divergences.knn_kl`); the slices are independent
        under q and p, so their KLs add up.
        """
        prior = self.prior_slice_draws(n_prior_draws, generator)
        return sum(knn_kl(s.transpose(0, 1), p.transpose(0, 1)).sum() for s, p in zip(slices, prior))

    def kl_entropy(self, slices, per_layer=False):
        """KL(q || p) from the exact cross-entropy and the entropy of each slice on its manifold, in nats.

        Per slice, :func:`~skbayes.nn.divergences.gaussian_prior_kl_from_draws`
        of its n_draws draws against the layer's N(0, ``prior_scales[l]^2``)
        prior, in the intrinsic dimension k = min(``noise_dim``, in + 1): a
        slice is a function of the noise only (its one-hot code is fixed), so
        its draws lie on a k-dimensional manifold. Summed over slices and
        layers (``per_layer=True``: a list of each layer's sum). No prior
        draws are needed.
        """
        layers = [
            gaussian_prior_kl_from_draws(s.transpose(0, 1), scale, min(layer.noise_dim, s.shape[-1])).sum()
            for layer, s, scale in zip(self.layers, slices, self.prior_scales)
        ]
        return layers if per_layer else sum(layers)

    def kl_discriminator(self, slices, per_layer=False):
        """Density-ratio estimate of KL(q || p): per layer, the mean logit over draws summed over slices.

        The gradient reaches the slices (the generators), not the
        discriminators, whose parameters enter as constants.
        ``per_layer=True``: a list of each layer's estimate.
        """
        layers = []
        for discriminator, s in zip(self.discriminators, slices):
            constants = {name: p.detach() for name, p in discriminator.named_parameters()}
            logits = torch.func.functional_call(discriminator, constants, (s,))
            layers.append(discriminator_kl(logits).sum())
        return layers if per_layer else sum(layers)

    def discriminator_loss(self, slices, prior_slices):
        """Sum over layers of each discriminator's binary cross-entropy (slices detached from the generators)."""
        return sum(
            discriminator_loss(d(s.detach()), d(p)) for d, s, p in zip(self.discriminators, slices, prior_slices)
        )


class ImplicitMLP(_ImplicitKL, BayesianLayerStack):
    """A stack of :class:`~skbayes.nn.ImplicitLinear` layers, with the KL estimates of their posterior.

    Predicts through :meth:`sample_parameters` and :meth:`forward_with` (the
    protocol of :class:`~skbayes.nn.BayesianLayerStack`). Training draws the
    slices once per step (:meth:`slice_draws`) and uses the same draws for
    the likelihood (:meth:`forward_slices`) and the KL estimate
    (:meth:`kl_knn` or :meth:`kl_discriminator`), as in Killingberg 2021,
    Algorithm 7.

    Parameters
    ----------
    n_features : int
        Input width d.
    hidden_layer_sizes : sequence of int
        Widths of the hidden layers; empty gives a linear model.
    n_outputs : int
        Output width k.
    activation : {"relu", "tanh", "logistic", "identity"}, default="relu"
        Non-linearity after each hidden layer of the network.
    prior_scale : float, default=1.0
        Standard deviation of the N(0, prior_scale^2) prior on every weight
        and bias (divided by sqrt(fan_in) under ``prior_scaling="fan_in"``).
    noise_dim : int, default=10
        Noise length of each slice's generator input.
    generator_hidden_sizes : tuple of int, default=(32, 64)
        Hidden widths of each layer's generator.
    discriminator_hidden_sizes : list of tuple of int or None, default=None
        Hidden widths of each layer's :class:`SliceDiscriminator` (one tuple
        per layer), for :meth:`kl_discriminator`; None builds none.
    prior_scaling : {"fan_in"} or None, default=None
        None: the prior N(0, prior_scale^2) on every weight and bias;
        ``"fan_in"``: N(0, prior_scale^2 / fan_in) on a layer with
        ``fan_in`` inputs (:func:`skbayes.nn.functional.layer_prior_scale`),
        the scales in ``prior_scales`` (one per layer).
    generator : torch.Generator, optional
        Source of the initial weights of the generators and discriminators.
    device, dtype : optional
    """

    def __init__(
        self, n_features, hidden_layer_sizes, n_outputs, *, activation="relu", prior_scale=1.0, noise_dim=10,
        generator_hidden_sizes=(32, 64), discriminator_hidden_sizes=None, prior_scaling=None, generator=None,
        device=None, dtype=None,
    ):
        super().__init__()
        sizes = [n_features, *hidden_layer_sizes, n_outputs]
        factory = {"generator": generator, "device": device, "dtype": dtype}
        self.layers = nn.ModuleList(
            ImplicitLinear(n_in, n_out, noise_dim=noise_dim, hidden_sizes=generator_hidden_sizes, **factory)
            for n_in, n_out in zip(sizes[:-1], sizes[1:])
        )
        self.activation = activation
        self.prior_scale = float(prior_scale)
        self.prior_scaling = prior_scaling
        self.prior_scales = [layer_prior_scale(prior_scale, n_in, prior_scaling) for n_in in sizes[:-1]]
        self.discriminators = None
        if discriminator_hidden_sizes is not None:
            self.discriminators = nn.ModuleList(
                SliceDiscriminator(layer.in_features + 1, layer.out_features, hidden, **factory)
                for layer, hidden in zip(self.layers, discriminator_hidden_sizes, strict=True)
            )

    def __setstate__(self, state):
        # a network pickled before prior_scaling existed had the fixed prior N(0, prior_scale^2) on every layer
        super().__setstate__(state)
        if "prior_scales" not in self.__dict__:
            self.prior_scaling = None
            self.prior_scales = [self.prior_scale] * len(self.layers)

    def forward_slices(self, x, slices):
        """The network at x (n, d) under slice draws from :meth:`slice_draws`: (n_draws, n, k)."""
        return self.forward_with(x, [parameters_from_slices(s) for s in slices])



class _ImplicitLayer(StochasticLayer):
    """A Linear or Conv2d of a torch module whose weights an :class:`~skbayes.nn.ImplicitLinear` generates.

    Slice j of the generator is the weights into output unit (or output
    channel) j, flattened in torch's layout, and its bias: for a
    convolution the kernel of channel j, in_channels / groups * kh * kw
    values (a kernel is one slice, the same at every position). A torch
    layer without bias ignores the last entry of each slice. The weights
    used by a pass: the draw set by
    ``ImplicitModuleNetwork.forward_slices``, else one draw from the
    pass's generator shared by all rows (``"sample"``, ``"shared"``) or the
    generator at z = 0 (``"mean"``).
    """

    def __init__(self, implicit, weight_shape, has_bias, conv=None):
        super().__init__()
        self.implicit = implicit
        self.weight_shape = tuple(int(s) for s in weight_shape)
        self.has_bias = bool(has_bias)
        self.conv = conv
        self._slices = None

    @classmethod
    def from_module(cls, layer, *, noise_dim, hidden_sizes, generator):
        if isinstance(layer, nn.Conv2d) and layer.padding_mode != "zeros":
            raise ValueError(
                f"Implicit convolutions support zero padding only; the convolution has padding_mode="
                f"{layer.padding_mode!r}. Pad the input explicitly (torch.nn.functional.pad) and use padding=0."
            )
        weight = layer.weight
        implicit = ImplicitLinear(
            weight[0].numel(), weight.shape[0], noise_dim=noise_dim, hidden_sizes=hidden_sizes, generator=generator,
            dtype=weight.dtype,
        ).to(weight.device)
        conv = None
        if isinstance(layer, nn.Conv2d):
            conv = {"stride": layer.stride, "padding": layer.padding, "dilation": layer.dilation, "groups": layer.groups}
        return cls(implicit, weight.shape, layer.bias is not None, conv)

    def forward(self, x):
        slices = self._slices
        if slices is None:
            slices = self.implicit.slice_draws(1, self.noise_generator, sample=self.noise_mode != "mean")[0]
        weight = slices[:, :-1].reshape(self.weight_shape)
        bias = slices[:, -1] if self.has_bias else None
        if self.conv is None:
            return F.linear(x, weight, bias)
        return F.conv2d(x, weight, bias, **self.conv)

    def kl(self):
        raise NotImplementedError(
            "An implicit posterior has no closed-form KL; ImplicitModuleNetwork estimates it from slice draws "
            "(kl_entropy, kl_knn, kl_discriminator)."
        )


def to_implicit(module, *, noise_dim=10, hidden_sizes=(32, 64), generator=None):
    """Swap a module's Linear and Conv2d layers for layers whose weights a generator network outputs, in place.

    Each :class:`torch.nn.Linear` and :class:`torch.nn.Conv2d` gets an
    :class:`~skbayes.nn.ImplicitLinear` generator with one slice per output
    unit or channel (its fan-in weights and bias), the per-layer hypernetwork
    of Pawlowski et al. 2017 and Killingberg 2021 (section 4.2.2) applied to
    kernels as to dense weights. The module's own initial weights are not
    used: the generators start at slices of a LeCun scale
    (``ImplicitLinear._scale_initial_draws``).

    Parameters
    ----------
    module : torch.nn.Module
    noise_dim : int, default=10
        Noise length of each slice.
    hidden_sizes : tuple of int, default=(32, 64)
        Hidden widths of each generator.
    generator : torch.Generator, optional
        Source of the generators' initial weights, drawn layer by layer in
        the module's order.

    Returns
    -------
    module : torch.nn.Module
        The converted module (a new object when ``module`` is itself a Linear or Conv2d).

    Raises
    ------
    ValueError
        If the module has layers with parameters other than Linear and
        Conv2d, or shares weights between layers.
    """
    def convert(layer):
        return _ImplicitLayer.from_module(layer, noise_dim=noise_dim, hidden_sizes=hidden_sizes, generator=generator)

    return convert_layers(module, {nn.Linear: convert, nn.Conv2d: convert}, "An implicit posterior")


def implicit_layers(module):
    """The :class:`~skbayes.nn.ImplicitLinear` generators of a module converted by ``to_implicit``, in order."""
    return [m.implicit for m in module.modules() if isinstance(m, _ImplicitLayer)]


class ImplicitModuleNetwork(_ImplicitKL, BayesianModuleNetwork):
    """Any torch module whose Linear and Conv2d weights are generated from noise (Bayes by Hypernet, Bayes by GAN).

    The module comes converted by ``to_implicit``. Training draws the
    slices of every layer once per step (``slice_draws``), runs the
    module once per draw with those weights (``forward_slices``) and
    estimates the KL of q to the prior from the same draws, as
    :class:`ImplicitMLP` does (``kl_entropy``, ``kl_knn``,
    ``kl_discriminator``). Prediction follows
    :class:`~skbayes.nn.networks.BayesianModuleNetwork`: each draw is one
    pass whose layers draw their weights once from a seeded generator.

    Parameters
    ----------
    module : torch.nn.Module
        Converted by ``to_implicit``.
    n_features, n_outputs : int
    input_shape : tuple of int, optional
    prior_scale : float, default=1.0
        s of the N(0, s^2) prior on every weight and bias, or of
        N(0, s^2 / fan_in) under ``prior_scaling="fan_in"``.
    prior_scaling : {"fan_in"} or None, default=None
    discriminator_hidden_sizes : list of tuple of int, optional
        Hidden widths of one :class:`SliceDiscriminator` per layer (in the
        order of :attr:`layers`), for Bayes by GAN; None builds none.
    generator : torch.Generator, optional
        Source of the discriminators' initial weights.

    Raises
    ------
    ValueError
        As :class:`~skbayes.nn.networks.BayesianModuleNetwork`, or if the
        module has no converted layer.
    """

    def __init__(
        self, module, n_features, n_outputs, *, input_shape=None, prior_scale=1.0, prior_scaling=None,
        discriminator_hidden_sizes=None, generator=None,
    ):
        super().__init__(module, n_features, n_outputs, input_shape=input_shape, prior_scale=prior_scale)
        layers = self.layers
        if not layers:
            raise ValueError("The module has no Linear or Conv2d layer for an implicit posterior.")
        self.prior_scaling = prior_scaling
        self.prior_scales = [layer_prior_scale(prior_scale, layer.in_features, prior_scaling) for layer in layers]
        self.discriminators = None
        if discriminator_hidden_sizes is not None:
            reference = layers[0].generator_net.layers[0].weight
            self.discriminators = nn.ModuleList(
                SliceDiscriminator(
                    layer.in_features + 1, layer.out_features, hidden, generator=generator, dtype=reference.dtype,
                ).to(reference.device)
                for layer, hidden in zip(layers, discriminator_hidden_sizes, strict=True)
            )

    @property
    def layers(self):
        """The generators (:class:`~skbayes.nn.ImplicitLinear`), one per converted layer, in the module's order."""
        return implicit_layers(self.module)

    def forward_slices(self, x, slices):
        """The module at x (n, n_features) under slice draws from ``slice_draws``: (n_draws, n, n_outputs)."""
        wrappers = [m for m in self.module.modules() if isinstance(m, _ImplicitLayer)]
        out = []
        try:
            for s in range(slices[0].shape[0]):
                for wrapper, layer_slices in zip(wrappers, slices):
                    wrapper._slices = layer_slices[s]
                out.append(self._module_pass(x))
        finally:
            for wrapper in wrappers:
                wrapper._slices = None
        return torch.stack(out)

    def kl(self, generator=None, n_draws=None):
        """Not defined in closed form; raises NotImplementedError (see ``kl_entropy``)."""
        raise NotImplementedError(
            "An implicit posterior has no closed-form KL; estimate it from slice draws (kl_entropy, kl_knn, "
            "kl_discriminator)."
        )
