r"""Variational autoencoder: amortised Gaussian encoder, N(0, I) prior, MLP or convolutional decoder.

The model (Kingma & Welling 2014, [Kingma2014]_; Cinelli 2019, section 4.3) is

.. math::

    p(z) = \mathcal N(0, I_k), \qquad p_\theta(x \mid z, c), \qquad
    q_\phi(z \mid x, c) = \mathcal N(\mu_\phi(x, c), \operatorname{diag}\sigma^2_\phi(x, c)),

with an optional one-hot condition c concatenated to the encoder input and to
the decoder input (conditional VAE, [Sohn2015]_; Cinelli 2019, section 4.3.1). The
per-datum evidence lower bound with the analytic KL is (Cinelli 2019, eq. 4.9)

.. math::

    \mathcal L(x) = \mathbb E_q[\log p(x \mid z, c)] - \beta\,
    \mathrm{KL}(q(z \mid x, c)\,\|\,\mathcal N(0, I)),

estimated with the reparameterisation z = mu + sigma * eps, eps ~ N(0, I)
([Kingma2014]_, eq. 10; beta = 1 is the ELBO, beta != 1 the beta-VAE
objective of [Higgins2017]_). The importance-weighted bound of [Burda2016]_
(eq. 8) is log (1/K) sum_k p(x, z_k | c) / q(z_k | x, c) with z_k ~ q; it is
>= the ELBO and tends to log p(x | c) as K grows.

The encoder and decoder are MLPs by default. Any torch modules may take
their place (:class:`ModuleEncoder`, :class:`ModuleDecoder`), e.g. the
convolutional pair :class:`ConvEncoder` / :class:`ConvDecoder`: stride-2
convolutions down, a linear layer to the latent parameters, a linear layer
back up and stride-2 transposed convolutions to the image (the convolutional
VAE of Bruno 2022, section 4.4, after [Murphy2023]_; without
its batch normalisation, and scaled down to small images). The one-hot
condition goes after the encoder's convolutions (into its linear head) and
before the decoder (concatenated to z).

Every method takes the noise ``eps`` from the caller, so the caller decides
how draws are shared between rows (skbayes shares one set of draws across all
rows at prediction time, so that a row's value does not depend on its batch).

References
----------
%(ref_kingma2014)s
%(ref_sohn2015)s
.. [Burda2016] Y. Burda, R. Grosse and R. Salakhutdinov, "Importance weighted
   autoencoders", ICLR 2016.
.. [Higgins2017] I. Higgins et al., "beta-VAE: learning basic visual concepts
   with a constrained variational framework", ICLR 2017.
.. [Murphy2023] K. P. Murphy, "Probabilistic machine learning: advanced
   topics", MIT Press, 2023.
"""

import math

import torch
from torch import nn
from torch.distributions import Normal, kl_divergence
from torch.nn import functional as F

from ..._docstrings import fill
from ..functional import ACTIVATIONS, gaussian_log_prob
from ..likelihoods import BernoulliLikelihood, GaussianLikelihood
from .mlp import MLP
from .module import _outputs_to_rows, _rows_to_inputs, probe_widths

__doc__ = fill(__doc__)

__all__ = ["ConvDecoder", "ConvEncoder", "ModuleDecoder", "ModuleEncoder", "VAEModule", "kl_standard_normal"]

# Floor on the encoder's standard deviation, so that log sigma stays finite.
_STD_FLOOR = 1e-6


def kl_standard_normal(mu, sigma):
    """KL(N(mu, diag sigma^2) || N(0, I)) of each row, in nats.

    Cinelli 2019, section 4.3: sum_j [-log sigma_j + (mu_j^2 + sigma_j^2 - 1) / 2].

    Parameters
    ----------
    mu, sigma : torch.Tensor of shape (..., n, k)
        Mean and standard deviation (> 0) of the diagonal Gaussian.

    Returns
    -------
    kl : torch.Tensor of shape (..., n)
    """
    standard = Normal(torch.zeros((), dtype=mu.dtype, device=mu.device), 1.0, validate_args=False)
    return kl_divergence(Normal(mu, sigma, validate_args=False), standard).sum(-1)


def _with_condition(h, c):
    if c is None:
        return h
    return torch.cat([h, c.expand(*h.shape[:-1], c.shape[-1])], dim=-1)


def _check_activation(activation):
    if activation not in ACTIVATIONS:
        raise ValueError(f"Unknown activation {activation!r}; choose one of {sorted(ACTIVATIONS)}.")
    return activation


def _image_shape(shape, name):
    """(C, H, W) as a tuple of positive int, or ValueError."""
    shape = tuple(int(s) for s in shape)
    if len(shape) != 3 or min(shape) < 1:
        raise ValueError(f"{name} must be (channels, height, width) of positive sizes, e.g. (1, 28, 28); got {shape}.")
    return shape


def _channels(channels):
    channels = tuple(int(c) for c in channels)
    if not channels or min(channels) < 1:
        raise ValueError(f"channels must hold at least one positive number of channels; got {channels}.")
    return channels


def _halved_sizes(size, n_layers, kernel_size, padding):
    """Spatial sizes [s_0, ..., s_L] through L convolutions of stride 2 (ValueError if one falls below 1)."""
    sizes = [size]
    for _ in range(n_layers):
        sizes.append((sizes[-1] + 2 * padding - kernel_size) // 2 + 1)
    if sizes[-1] < 1:
        raise ValueError(
            f"An image side of {size} is too small for {n_layers} stride-2 convolutions of kernel_size={kernel_size} "
            f"(sizes {sizes}); use fewer channels entries or a smaller kernel_size."
        )
    return sizes


class ConvEncoder(nn.Module):
    """Stride-2 convolutions that halve the image: the body of a convolutional VAE's encoder.

    Layer l is ``Conv2d(c_{l-1}, c_l, kernel_size, stride=2,
    padding=(kernel_size - 1) // 2)`` followed by the activation, so that
    each halves the height and width (28 -> 14 -> 7 with the defaults); the
    output is flattened. The VAE's linear head then maps these features to
    the latent means and standard deviations (:class:`ModuleEncoder`). This
    is the encoder of Bruno 2022, section 4.4 (after [Murphy2023]_: no
    pooling, channels doubling) without its batch normalisation, scaled to
    small images. The layers keep torch's default initialisation (built
    under a seeded :func:`torch.random.fork_rng` by the VAE).

    Parameters
    ----------
    input_shape : tuple of int
        (channels, height, width) of one image.
    channels : sequence of int, default=(32, 64)
        Output channels of each convolution, in order.
    kernel_size : int, default=4
    activation : {"relu", "tanh", "logistic", "identity"}, default="relu"

    Attributes
    ----------
    output_shape : tuple of int
        (channels[-1], h_L, w_L), the shape of one image's features before flattening.
    n_outputs : int
        Width of the flattened features, prod(output_shape).

    Raises
    ------
    ValueError
        If ``input_shape`` is not 3-D, ``channels`` is empty, or the image is
        too small for the convolutions.
    """

    def __init__(self, input_shape, channels=(32, 64), kernel_size=4, activation="relu"):
        super().__init__()
        n_in, height, width = _image_shape(input_shape, "input_shape")
        channels, kernel_size = _channels(channels), int(kernel_size)
        padding = (kernel_size - 1) // 2
        heights = _halved_sizes(height, len(channels), kernel_size, padding)
        widths = _halved_sizes(width, len(channels), kernel_size, padding)
        self.convs = nn.ModuleList(
            nn.Conv2d(a, b, kernel_size, stride=2, padding=padding) for a, b in zip((n_in, *channels[:-1]), channels)
        )
        self.activation = _check_activation(activation)
        self.output_shape = (channels[-1], heights[-1], widths[-1])
        self.n_outputs = math.prod(self.output_shape)

    def forward(self, x):
        """Map images (B, C, H, W) to features (B, n_outputs)."""
        act = ACTIVATIONS[self.activation]
        for conv in self.convs:
            x = act(conv(x))
        return x.flatten(1)


class ConvDecoder(nn.Module):
    """A linear layer and stride-2 transposed convolutions: the mirror of :class:`ConvEncoder`.

    z (B, n_inputs) goes through ``Linear(n_inputs, c_0 * h * w)`` and the
    activation, is reshaped to (B, c_0, h, w), the size that
    ``len(channels)`` halvings of the image leave (as in
    :class:`ConvEncoder` with the same ``kernel_size``), and is doubled back
    by ``ConvTranspose2d(c_l, c_{l+1}, kernel_size, stride=2, padding)``
    layers, the activation between them, the last one with the image's
    channels and no activation. Its ``output_padding`` (0 or 1) makes each
    size exactly the encoder's, so any image size works. The output is the
    Gaussian mean or the Bernoulli logits of every pixel.

    Parameters
    ----------
    n_inputs : int
        Width of the decoder's input: the latent dimension, plus the number
        of classes for a conditional VAE.
    output_shape : tuple of int
        (channels, height, width) of one image.
    channels : sequence of int, default=(64, 32)
        Channels of the feature maps, in the decoder's order (the encoder's
        ``channels`` reversed): the linear layer's output, then each
        transposed convolution's but the last.
    kernel_size : int, default=4
    activation : {"relu", "tanh", "logistic", "identity"}, default="relu"

    Raises
    ------
    ValueError
        If ``output_shape`` is not 3-D, ``channels`` is empty, or the image
        is too small for the convolutions.
    """

    def __init__(self, n_inputs, output_shape, channels=(64, 32), kernel_size=4, activation="relu"):
        super().__init__()
        n_out, height, width = _image_shape(output_shape, "output_shape")
        channels, kernel_size = _channels(channels), int(kernel_size)
        padding = (kernel_size - 1) // 2
        heights = _halved_sizes(height, len(channels), kernel_size, padding)[::-1]
        widths = _halved_sizes(width, len(channels), kernel_size, padding)[::-1]
        self.feature_shape = (channels[0], heights[0], widths[0])
        self.linear = nn.Linear(int(n_inputs), math.prod(self.feature_shape))
        layers = []
        for i, (a, b) in enumerate(zip(channels, (*channels[1:], n_out))):
            # size (s - 1) * 2 - 2 * padding + kernel_size + output_padding = the encoder's
            extra = tuple(
                sizes[i + 1] - ((sizes[i] - 1) * 2 - 2 * padding + kernel_size) for sizes in (heights, widths)
            )
            layers.append(nn.ConvTranspose2d(a, b, kernel_size, stride=2, padding=padding, output_padding=extra))
        self.deconvs = nn.ModuleList(layers)
        self.activation = _check_activation(activation)

    def forward(self, z):
        """Map latent rows (B, n_inputs) to images (B, C, H, W)."""
        act = ACTIVATIONS[self.activation]
        h = act(self.linear(z)).reshape(-1, *self.feature_shape)
        for i, deconv in enumerate(self.deconvs):
            h = deconv(h if i == 0 else act(h))
        return h


class ModuleEncoder(nn.Module):
    """A torch module as the body of the VAE's encoder, followed by the VAE's linear head.

    The rows (..., n, d + C), the one-hot condition after the d features as
    for the MLP encoder, are split; the features are reshaped to
    ``(B, *input_shape)`` for ``body``, whose output is flattened to (B, h),
    the condition is concatenated, and a linear head maps (B, h + C) to the
    2k raw outputs (the latent means and raw standard deviations).

    Parameters
    ----------
    body : torch.nn.Module
        Maps ``(B, *input_shape)`` to features (B, ...).
    n_features : int
        Data dimension d.
    n_outputs : int
        Width of the head's output (2k).
    n_conditions : int, default=0
        Width C of the one-hot condition.
    input_shape : tuple of int, optional
        Shape of one input (prod = d); None feeds the rows (B, d) as they are.
    generator : torch.Generator, optional
        Source of the head's random initial weights (uniform, as :class:`MLP`).
    device, dtype : optional
        Of the head; ``body`` must already be on them.

    Attributes
    ----------
    n_hidden : int
        Width h of the body's flattened output.
    widest : int
        Largest layer output of the body per row.

    Raises
    ------
    ValueError
        If ``input_shape`` does not hold ``n_features`` values.
    """

    def __init__(self, body, n_features, n_outputs, *, n_conditions=0, input_shape=None, generator=None,
                 device=None, dtype=None):
        super().__init__()
        if input_shape is not None and math.prod(input_shape) != n_features:
            raise ValueError(f"input_shape {tuple(input_shape)} does not hold {n_features} features.")
        self.body = body
        self.n_features = int(n_features)
        self.input_shape = None if input_shape is None else tuple(int(s) for s in input_shape)
        self.n_hidden, self.widest = probe_widths(body, self.input_shape or (self.n_features,))
        self.head = MLP([self.n_hidden + n_conditions, n_outputs], generator=generator, device=device, dtype=dtype)

    def forward(self, h):
        """Map rows (..., n, d + C) to the raw outputs (..., n, n_outputs)."""
        x, c = h[..., : self.n_features], h[..., self.n_features :]
        inputs, lead = _rows_to_inputs(x, self.input_shape)
        features = _outputs_to_rows(self.body(inputs).flatten(1), lead)
        return self.head(torch.cat([features, c], dim=-1))


class ModuleDecoder(nn.Module):
    """A torch module as the VAE's decoder, plus a learned per-feature output bias.

    Latent rows (..., n, k + C) (the one-hot condition after z, as for the
    MLP decoder) go through ``body`` as (B, k + C); its output, (B, d) or
    ``(B, *input_shape)``, is flattened to (..., n, d) and a bias of shape (d,)
    is added: f(z), the Gaussian mean or the Bernoulli logits, as the MLP
    decoder's output. The bias (zero at first) is where the VAE puts the
    logits of the feature means for the Bernoulli likelihood.

    Parameters
    ----------
    body : torch.nn.Module
        Maps (B, n_inputs) to (B, d) or ``(B, *input_shape)``.
    n_inputs : int
        Latent dimension k plus the condition's width C.
    n_features : int
        Data dimension d.
    device, dtype : optional
        Of the bias; ``body`` must already be on them.

    Attributes
    ----------
    bias : torch.nn.Parameter of shape (n_features,)
    widest : int
        Largest layer output of the body per row.

    Raises
    ------
    ValueError
        If the body's output does not hold ``n_features`` values.
    """

    def __init__(self, body, n_inputs, n_features, *, device=None, dtype=None):
        super().__init__()
        self.body = body
        n_outputs, self.widest = probe_widths(body, (int(n_inputs),))
        if n_outputs != n_features:
            raise ValueError(
                f"The decoder returns {n_outputs} values per latent row, but the data have {n_features} features; "
                "it must map (B, n_inputs) to (B, n_features) or (B, *input_shape)."
            )
        self.bias = nn.Parameter(torch.zeros(int(n_features), device=device, dtype=dtype))

    def forward(self, z):
        """Map latent rows (..., n, k + C) to f(z) of shape (..., n, d)."""
        inputs, lead = _rows_to_inputs(z, None)
        return _outputs_to_rows(self.body(inputs).flatten(1), lead) + self.bias

class VAEModule(nn.Module):
    """Encoder, decoder and likelihood of a (conditional) VAE.

    Parameters
    ----------
    n_features : int
        Data dimension d.
    n_components : int
        Latent dimension k.
    hidden_layer_sizes : sequence of int
        Encoder hidden widths; the decoder mirrors them (Cinelli 2019, section
        5). Only for the MLP parts (``encoder`` or ``decoder`` None).
    n_conditions : int, default=0
        Width C of the one-hot condition (0: unconditional VAE).
    likelihood : {"gaussian", "bernoulli"}, default="gaussian"
        ``"gaussian"``: N(x | f(z), diag sigma^2) with one learned noise
        standard deviation per feature (:class:`GaussianLikelihood`, initial
        ``noise_std``); ``"bernoulli"``: logits f(z).
    activation : {"relu", "tanh", "logistic", "identity"}, default="relu"
    noise_std : float, default=1.0
        Initial Gaussian noise standard deviation (model units).
    encoder : torch.nn.Module, optional
        Body of the encoder, mapping ``(B, *input_shape)`` to features (B, ...),
        wrapped in a :class:`ModuleEncoder` (its linear head maps the
        features and the condition to the 2k outputs); None: the MLP.
    decoder : torch.nn.Module, optional
        Decoder mapping (B, k + C) to (B, d) or ``(B, *input_shape)``, wrapped
        in a :class:`ModuleDecoder`; None: the mirrored MLP.
    input_shape : tuple of int, optional
        Shape of one input of ``encoder`` (prod = d); None feeds it rows.
    generator : torch.Generator, optional
        Source of the random initial weights of the MLPs and of the
        encoder's head (``encoder`` and ``decoder`` come initialised).
    device, dtype : optional

    Attributes
    ----------
    encoder : MLP or ModuleEncoder
        Maps rows (..., n, d + C) to (..., n, 2k).
    decoder : MLP or ModuleDecoder
        Maps latent rows (..., n, k + C) to f(z), (..., n, d).
    likelihood : GaussianLikelihood or BernoulliLikelihood
    """

    def __init__(
        self,
        n_features,
        n_components,
        hidden_layer_sizes,
        *,
        n_conditions=0,
        likelihood="gaussian",
        activation="relu",
        noise_std=1.0,
        encoder=None,
        decoder=None,
        input_shape=None,
        generator=None,
        device=None,
        dtype=None,
    ):
        super().__init__()
        hidden = list(hidden_layer_sizes)
        factory = {"generator": generator, "device": device, "dtype": dtype}
        if encoder is None:
            self.encoder = MLP([n_features + n_conditions, *hidden, 2 * n_components], activation, **factory)
        else:
            self.encoder = ModuleEncoder(
                encoder, n_features, 2 * n_components, n_conditions=n_conditions, input_shape=input_shape, **factory
            )
        if decoder is None:
            self.decoder = MLP([n_components + n_conditions, *hidden[::-1], n_features], activation, **factory)
        else:
            self.decoder = ModuleDecoder(decoder, n_components + n_conditions, n_features, device=device, dtype=dtype)
        if likelihood == "gaussian":
            self.likelihood = GaussianLikelihood(n_features, noise_std, device=device, dtype=dtype)
        elif likelihood == "bernoulli":
            self.likelihood = BernoulliLikelihood()
        else:
            raise ValueError(f"Unknown likelihood {likelihood!r}.")
        self.likelihood_name = likelihood
        self.n_components = n_components

    @property
    def output_bias(self):
        """The decoder's last bias, shape (d,): f(z) is offset by it feature by feature."""
        if isinstance(self.decoder, ModuleDecoder):
            return self.decoder.bias
        return self.decoder.layers[-1].bias

    @property
    def widest(self):
        """Largest number of values a layer of the encoder or decoder outputs per row."""
        widths = []
        for network in (self.encoder, self.decoder):
            if isinstance(network, MLP):
                widths += [layer.out_features for layer in network.layers]
            else:
                widths.append(network.widest)
        if isinstance(self.encoder, ModuleEncoder):
            widths.append(self.encoder.n_hidden)
        return max(widths)

    def encode(self, x, c=None):
        """Parameters of q(z | x, c).

        Parameters
        ----------
        x : torch.Tensor of shape (n, d)
        c : torch.Tensor of shape (n, C), optional
            One-hot condition.

        Returns
        -------
        mu, sigma : torch.Tensor of shape (n, k)
            Mean and standard deviation (softplus of the raw output plus 1e-6).
        """
        out = self.encoder(_with_condition(x, c))
        mu, raw = out[..., : self.n_components], out[..., self.n_components :]
        return mu, F.softplus(raw) + _STD_FLOOR

    def decode(self, z, c=None):
        """Decoder output f(z, c): the Gaussian mean or the Bernoulli logits.

        Parameters
        ----------
        z : torch.Tensor of shape (..., n, k)
        c : torch.Tensor of shape (n, C), optional

        Returns
        -------
        f : torch.Tensor of shape (..., n, d)
        """
        return self.decoder(_with_condition(z, c))

    def mean(self, f):
        """E[x | z] from the decoder output f, in model units."""
        return torch.sigmoid(f) if self.likelihood_name == "bernoulli" else f

    def log_likelihood(self, x, f):
        """log p(x | z) of each row, shape (..., n), in nats."""
        return self.likelihood.log_prob(x, f)

    def elbo_terms(self, x, eps, c=None):
        """Monte-Carlo expected log-likelihood and analytic KL of each row.

        Parameters
        ----------
        x : torch.Tensor of shape (n, d)
        eps : torch.Tensor of shape (S, n, k) or (S, 1, k)
            Standard normal draws; (S, 1, k) shares them across rows.
        c : torch.Tensor of shape (n, C), optional

        Returns
        -------
        expected_log_lik : torch.Tensor of shape (n,)
            (1/S) sum_s log p(x | mu + sigma * eps_s, c) (Cinelli 2019, eq. 4.9).
        kl : torch.Tensor of shape (n,)
            KL(q(z | x, c) || N(0, I)), in closed form.
        """
        mu, sigma = self.encode(x, c)
        z = mu + sigma * eps  # reparameterisation, [Kingma2014]_ eq. 10
        expected_log_lik = self.log_likelihood(x, self.decode(z, c)).mean(0)
        return expected_log_lik, kl_standard_normal(mu, sigma)

    def elbo(self, x, eps, c=None, beta=1.0):
        """Per-row (beta-)ELBO estimate, shape (n,), in nats."""
        expected_log_lik, kl = self.elbo_terms(x, eps, c)
        return expected_log_lik - beta * kl

    def log_importance_weights(self, x, eps, c=None):
        """log p(x, z_s | c) - log q(z_s | x, c) for z_s = mu + sigma * eps_s.

        Parameters
        ----------
        x : torch.Tensor of shape (n, d)
        eps : torch.Tensor of shape (S, n, k) or (S, 1, k)
        c : torch.Tensor of shape (n, C), optional

        Returns
        -------
        log_w : torch.Tensor of shape (S, n)
            Their log-mean-exp over S is the IWAE bound ([Burda2016]_, eq. 8);
            their mean is the ELBO estimator of Cinelli 2019, eq. 4.8.
        """
        mu, sigma = self.encode(x, c)
        z = mu + sigma * eps
        # log N(z | mu, sigma^2) with (z - mu) / sigma = eps, and log N(z | 0, I)
        log_q = (gaussian_log_prob(eps) - torch.log(sigma)).sum(-1)
        log_prior = gaussian_log_prob(z).sum(-1)
        return self.log_likelihood(x, self.decode(z, c)) + log_prior - log_q
