"""Linear layer with dropout on its inputs, read as variational inference (MC dropout).

The layer protocol is described in :mod:`skbayes.nn.layers`; the KL term is
the KL-condition weight penalty of [Gal2016]_.

References
----------
.. [Gal2016] Y. Gal, "Uncertainty in deep learning", PhD thesis, 2016, chapter 3
   (Gal 2016).
"""

import torch
from torch import nn

from ..functional import dropout_mask, dropout_weight_decay, uniform_init
from .noise import StochasticLayer

__all__ = ["DropoutLinear", "MCDropoutLayer", "check_dropout_rate"]


def check_dropout_rate(name, rate):
    """``rate`` as a float, checked to be a drop probability in [0, 1).

    Raises
    ------
    ValueError
        If ``rate`` is outside [0, 1); the message names the parameter ``name``.
    """
    rate = float(rate)
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"{name} must be in [0, 1) (the probability of dropping a unit); got {rate}.")
    return rate


class DropoutLinear(nn.Module):
    r"""Linear layer with dropout on its inputs, read as variational inference.

    Dropping input unit i zeroes row i of W, so dropout is a Bernoulli
    variational distribution over the rows of W ([Gal2016]_, section 3.2.3).
    With a N(0, l^{-2}) prior (``prior_scale`` = 1/l) the KL term is, up to a
    constant, (1-p) l^2/2 ||M||^2 for the unscaled mean weights M
    ([Gal2016]_, eqs. 3.12-3.13). PyTorch-style *inverted* dropout stores
    M' = (1-p) M and scales kept units by 1/(1-p), so in terms of the stored
    weights the penalty is

    .. math::

        \mathrm{KL} \approx \frac{l^2}{2(1-p)} \lVert M' \rVert^2
                          + \frac{l^2}{2} \lVert b \rVert^2,

    a factor 1/(1-p)^2 away from the unscaled form (Gal 2016, section 3.2.3, with the inverted-dropout
    scaling). Divided by N, as in :func:`~skbayes.nn.negative_elbo`, this
    is the weight decay lambda = l^2 / (2 N (1-p)) of the Gaussian
    log-likelihood objective (eq. 3.14 with the likelihood's own precision).

    Parameters
    ----------
    in_features, out_features : int
        Input and output widths.
    dropout_rate : float, default=0.01
        Probability p in [0, 1) of *dropping* an input unit.
    prior_scale : float, default=1.0
        Prior standard deviation 1/l of the weights.
    generator : torch.Generator, optional
        Source of the random initial weights.
    device, dtype : optional
        Where and in which precision the parameters live.
    """

    def __init__(
        self, in_features, out_features, *, dropout_rate=0.01, prior_scale=1.0, generator=None, device=None, dtype=None
    ):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.in_features = in_features
        self.out_features = out_features
        self.dropout_rate = float(dropout_rate)
        self.prior_scale = float(prior_scale)
        self.weight = nn.Parameter(uniform_init((in_features, out_features), in_features, generator, **factory))
        self.bias = nn.Parameter(uniform_init((out_features,), in_features, generator, **factory))

    def _mask(self, shape, generator, like):
        return dropout_mask(shape, self.dropout_rate, like, generator)

    def forward(self, x, generator=None, sample=True):
        """Training-time pass, a fresh dropout mask for every row (``sample=False``: no dropout).

        Shapes as in the layer protocol of :mod:`skbayes.nn.layers`.
        """
        if sample and self.dropout_rate > 0:
            x = x * self._mask(x.shape, generator, x)
        return torch.matmul(x, self.weight) + self.bias

    def sample_parameters(self, n_samples, generator=None):
        """``n_samples`` dropout masks applied to the weights, each shared by all rows (layer protocol)."""
        weight = self.weight.expand(n_samples, *self.weight.shape)
        if self.dropout_rate > 0:
            weight = weight * self._mask((n_samples, self.in_features, 1), generator, self.weight)
        bias = self.bias.expand(n_samples, 1, self.out_features)
        return weight, bias

    def kl(self):
        """KL-condition penalty l^2/(2(1-p)) ||W||^2 + l^2/2 ||b||^2 ([Gal2016]_ eq. 3.13,
        inverted-dropout form), a scalar in nats up to a constant."""
        return dropout_weight_decay(self.weight, self.prior_scale, self.dropout_rate) + dropout_weight_decay(
            self.bias, self.prior_scale
        )


class MCDropoutLayer(StochasticLayer):
    r"""Element-wise dropout kept on at prediction (MC dropout), inside any torch module.

    A drop-in replacement of :class:`torch.nn.Dropout` driven by the noise
    protocol of :mod:`skbayes.nn.layers.noise`: in ``"sample"`` mode every
    row draws its own mask, in ``"shared"`` mode one mask (shape
    ``(1, *x.shape[1:])``) is shared by all rows of the pass, and in
    ``"mean"`` mode the layer is the identity, the weight-scaling
    approximation of standard dropout (the masks are inverted, kept units
    scaled by 1/(1-p)). After a convolution the mask is element-wise over
    channels and positions: a separate Bernoulli variable for every
    kernel-patch pair, the Bayesian CNN of Gal 2016, section 3.4.1. The
    layer has no parameters; the KL condition is a weight decay on the
    layers it feeds (:class:`~skbayes.nn.networks.BayesianModuleNetwork`).

    Parameters
    ----------
    dropout_rate : float in [0, 1), default=0.5
        Probability p of dropping a unit.

    Raises
    ------
    ValueError
        If ``dropout_rate`` is outside [0, 1).
    """

    def __init__(self, dropout_rate=0.5):
        super().__init__()
        self.dropout_rate = check_dropout_rate("dropout_rate", dropout_rate)

    def forward(self, x):
        """Mask ``x`` of shape (n, ...) (the same shape out)."""
        if not self.sampling or self.dropout_rate == 0:
            return x
        shape = (self.noise_rows(x.shape[0]), *x.shape[1:])
        return x * dropout_mask(shape, self.dropout_rate, x, self.noise_generator)

    def kl(self):
        """0: the layer has no parameters."""
        return 0.0

    def extra_repr(self):
        return f"dropout_rate={self.dropout_rate}"
