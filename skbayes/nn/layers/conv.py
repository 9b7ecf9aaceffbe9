r"""2-d convolution with a fully factorised Gaussian posterior over its kernels.

A drop-in replacement of :class:`torch.nn.Conv2d` (same input and output
shapes, the same weight layout) driven by the noise protocol of
:mod:`skbayes.nn.layers.noise`. A convolution is a linear map of the image
patches (Gal 2016, section 3.4.1: the patches form the rows of a matrix, the
kernels its columns), so everything said of :class:`~skbayes.nn.layers.MeanFieldLinear`
holds patch by patch. Training draws one kernel per row (Flipout,
[Wen2018]_), so that the network trained is the one that predicts: one
kernel draw convolved over every position of an image.

References
----------
.. [Blundell2015] C. Blundell, J. Cornebise, K. Kavukcuoglu and D. Wierstra,
   "Weight uncertainty in neural networks", ICML 2015.
.. [Kingma2015] D. P. Kingma, T. Salimans and M. Welling, "Variational dropout
   and the local reparameterization trick", NeurIPS 2015.
.. [Gal2016] Y. Gal, "Uncertainty in deep learning", PhD thesis, 2016, section 3.4.1.
.. [Wen2018] Y. Wen, P. Vicol, J. Ba, D. Tran and R. Grosse, "Flipout:
   efficient pseudo-independent weight perturbations on mini-batches", ICLR
   2018, eq. 3.
"""

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.modules.utils import _pair

from ..functional import inverse_softplus, random_signs, standard_normal, uniform_init
from .mean_field import gaussian_kl
from .noise import StochasticLayer

__all__ = ["MeanFieldConv2d"]


class MeanFieldConv2d(StochasticLayer):
    r"""2-d convolution with a factorised Gaussian posterior over kernels and biases.

    q(W) = prod N(mu, sigma^2) with sigma = softplus(rho) over every kernel
    entry and bias [Blundell2015]_, a N(0, prior_scale^2) prior on each, and
    the closed-form KL. The pass depends on ``noise_mode``:

    ``"sample"``
        One kernel draw per row, by Flipout ([Wen2018]_, eq. 3): a
        perturbation Delta = sigma_W * epsilon, epsilon ~ N(0, 1), is drawn
        once per call and row i convolves with mu_W + Delta * (s_i r_i^T),
        s_i and r_i independent random signs per output and per input
        channel,

        .. math::

            y_i = x_i \star \mu_W
                  + \left[(x_i \odot r_i) \star \Delta\right] \odot s_i
                  + \mu_b + \sigma_b \odot \epsilon_i,

        two convolutions per call. Each row's kernel is an exact draw of q
        (sign flips keep the symmetric perturbation's distribution), the
        same kernel at every position of the image, which is the model that
        prediction (``"shared"``) evaluates; the signs decorrelate the rows'
        draws, which lowers the gradient variance of a shared draw. (Local
        reparameterisation on the output, [Kingma2015]_ eq. 6, would draw
        every output element independently: a different model, with a
        different kernel at every position.)
    ``"shared"``
        One kernel tensor (and bias) drawn from q, convolved with every row.
    ``"mean"``
        The posterior means, a plain convolution.

    Parameters
    ----------
    in_channels, out_channels : int
    kernel_size, stride, padding, dilation : int or tuple of int
        As in :class:`torch.nn.Conv2d` (``padding`` may also be ``"same"`` or
        ``"valid"``); zero padding only.
    groups : int, default=1
    bias : bool, default=True
    prior_scale : float, default=1.0
        Standard deviation of the zero-mean Gaussian prior on each weight.
    posterior_init_scale : float, default=1e-3
        Initial posterior standard deviation of each weight.
    generator : torch.Generator, optional
        Source of the random initial means (torch's default scale,
        U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = in_channels / groups
        * kernel area).
    device, dtype : optional
        Where and in which precision the parameters live.

    Attributes
    ----------
    weight_mu, weight_rho : torch.nn.Parameter of shape (out_channels, in_channels / groups, kh, kw)
    bias_mu, bias_rho : torch.nn.Parameter of shape (out_channels,) or None
        None when ``bias=False``.

    Raises
    ------
    ValueError
        If the channels are not divisible by ``groups``.

    Notes
    -----
    Input (n, in_channels, H, W) or unbatched (in_channels, H, W), output
    (n, out_channels, H', W') with torch's H', W'.
    """

    def __init__(
        self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True, *,
        prior_scale=1.0, posterior_init_scale=1e-3, generator=None, device=None, dtype=None,
    ):
        super().__init__()
        if in_channels % groups or out_channels % groups:
            raise ValueError(
                f"in_channels ({in_channels}) and out_channels ({out_channels}) must both be divisible by "
                f"groups ({groups})."
            )
        factory = {"device": device, "dtype": dtype}
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _pair(kernel_size)
        self.stride = _pair(stride)
        self.padding = padding if isinstance(padding, str) else _pair(padding)
        self.dilation = _pair(dilation)
        self.groups = groups
        self.prior_scale = float(prior_scale)
        shape = (out_channels, in_channels // groups, *self.kernel_size)
        fan_in = shape[1] * shape[2] * shape[3]
        raw_scale = inverse_softplus(posterior_init_scale)
        self.weight_mu = nn.Parameter(uniform_init(shape, fan_in, generator, **factory))
        self.weight_rho = nn.Parameter(torch.full(shape, raw_scale, **factory))
        if bias:
            self.bias_mu = nn.Parameter(uniform_init((out_channels,), fan_in, generator, **factory))
            self.bias_rho = nn.Parameter(torch.full((out_channels,), raw_scale, **factory))
        else:
            self.register_parameter("bias_mu", None)
            self.register_parameter("bias_rho", None)

    @classmethod
    def from_module(cls, conv, *, prior_scale=1.0, posterior_init_scale=1e-3, generator=None, **kwargs):
        """A layer whose posterior means are the weights and bias of a :class:`torch.nn.Conv2d`.

        Parameters
        ----------
        conv : torch.nn.Conv2d
        prior_scale, posterior_init_scale : float
            As in the constructor.
        generator : torch.Generator, optional
            Source of a subclass's other initial values (MNF's flows); a
            fixed-seed one when None (the initial means are overwritten, and
            the global generator is left alone).
        **kwargs
            Further keyword arguments of a subclass's constructor.

        Returns
        -------
        layer : MeanFieldConv2d
            On ``conv``'s device and dtype, with its stride, padding, dilation
            and groups; in mode ``"mean"`` it computes ``conv(x)`` (an
            :class:`~skbayes.nn.MNFConv2d` scales each feature map by its z at
            the mean of q(z_0)).

        Raises
        ------
        TypeError
            If ``conv`` is not a :class:`torch.nn.Conv2d`.
        ValueError
            If ``conv.padding_mode`` is not ``"zeros"``.
        """
        if not isinstance(conv, nn.Conv2d):
            raise TypeError(f"from_module expects a torch.nn.Conv2d, got {type(conv).__name__}.")
        if conv.padding_mode != "zeros":
            raise ValueError(
                f"MeanFieldConv2d supports zero padding only; the convolution has padding_mode="
                f"{conv.padding_mode!r}. Pad the input explicitly (torch.nn.functional.pad) and use padding=0."
            )
        layer = cls(
            conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding, conv.dilation,
            conv.groups, conv.bias is not None, prior_scale=prior_scale, posterior_init_scale=posterior_init_scale,
            device=conv.weight.device, dtype=conv.weight.dtype, generator=generator or torch.Generator(), **kwargs,
        )
        with torch.no_grad():
            layer.weight_mu.copy_(conv.weight)
            if conv.bias is not None:
                layer.bias_mu.copy_(conv.bias)
        return layer

    @property
    def weight_sigma(self):
        """Posterior standard deviation of the kernels, the shape of ``weight_mu``."""
        return F.softplus(self.weight_rho)

    @property
    def bias_sigma(self):
        """Posterior standard deviation of the biases, (out_channels,), or None without bias."""
        return None if self.bias_rho is None else F.softplus(self.bias_rho)

    def _conv(self, x, weight, bias):
        return F.conv2d(x, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def _channel_scale(self, n, like, generator):
        """Multipliers of the output channels' mean kernels, (n, out_channels) for n rows, or None (all 1).

        Called once per pass, before any other draw (``n`` is 1 in the
        ``"shared"`` and ``"mean"`` modes). Mean-field kernels have none;
        :class:`~skbayes.nn.MNFConv2d` returns its multiplicative noise z.
        """
        return None

    def forward(self, x):
        """Convolve ``x`` (n, in_channels, H, W) as set by ``noise_mode`` (see the class docstring)."""
        generator = self.noise_generator
        batched = x if x.dim() == 4 else x.unsqueeze(0)
        n = batched.shape[0] if self.noise_mode == "sample" else 1
        scale = self._channel_scale(n, batched, generator)
        if self.noise_mode == "sample":
            mean = self._conv(batched, self.weight_mu, None)
            if scale is not None:
                mean = mean * scale[:, :, None, None]
            delta = self.weight_sigma * standard_normal(self.weight_mu.shape, self.weight_mu, generator)
            signs_in = random_signs((n, self.in_channels, 1, 1), batched, generator)
            signs_out = random_signs((n, self.out_channels, 1, 1), batched, generator)
            out = mean + self._conv(batched * signs_in, delta, None) * signs_out
            if self.bias_mu is not None:
                eps = standard_normal((n, self.out_channels), batched, generator)
                out = out + (self.bias_mu + self.bias_sigma * eps)[:, :, None, None]
            return out if x.dim() == 4 else out.squeeze(0)
        weight = self.weight_mu if scale is None else self.weight_mu * scale[0, :, None, None, None]
        bias = self.bias_mu
        if self.noise_mode == "shared":
            weight = weight + self.weight_sigma * standard_normal(self.weight_mu.shape, self.weight_mu, generator)
            if bias is not None:
                bias = bias + self.bias_sigma * standard_normal(bias.shape, bias, generator)
        return self._conv(x, weight, bias)

    def kl(self):
        """Closed-form KL(q || N(0, prior_scale^2)) of kernels and biases, a scalar in nats (:func:`gaussian_kl`)."""
        kl = gaussian_kl(self.weight_mu, self.weight_sigma, self.prior_scale)
        if self.bias_mu is not None:
            kl = kl + gaussian_kl(self.bias_mu, self.bias_sigma, self.prior_scale)
        return kl

    def extra_repr(self):
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
            f"padding={self.padding}, dilation={self.dilation}, groups={self.groups}, "
            f"bias={self.bias_mu is not None}, prior_scale={self.prior_scale}"
        )
