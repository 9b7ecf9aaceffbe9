"""Bayesian linear layers.

Both layers share one protocol, used by :class:`~skbayes.nn.BayesianMLP`:

``forward(x, generator=None, sample=True)``
    Training-time pass, ``x`` of shape (..., in_features) -> (..., out_features),
    with fresh noise for every row (one Monte-Carlo draw per datum, Gal 2016
    eq. 3.7). ``sample=False`` propagates the mean weights.
``sample_parameters(n_samples, generator)``
    ``n_samples`` draws of the weights, shared by all rows: a weight tensor of
    shape (n_samples, in_features, out_features) and a bias of shape
    (n_samples, 1, out_features). Prediction uses these, so that a row's
    prediction does not depend on which other rows are in the batch.
``kl()``
    KL(q || p) of the layer's parameters, a scalar in nats.

Weights are stored as (in_features, out_features) so that ``x @ W`` maps rows.

References
----------
.. [Blundell2015] C. Blundell, J. Cornebise, K. Kavukcuoglu and D. Wierstra,
   "Weight uncertainty in neural networks", ICML 2015 (Cinelli 2019, section 3.3.3).
.. [Kingma2015] D. P. Kingma, T. Salimans and M. Welling, "Variational dropout
   and the local reparameterization trick", NeurIPS 2015.
.. [Gal2016] Y. Gal, "Uncertainty in deep learning", PhD thesis, 2016, chapter 3
   (Gal 2016).
"""

import math

import torch
from torch import nn
from torch.nn import functional as F

from .divergences import kl_normal_normal

__all__ = ["DropoutLinear", "MeanFieldLinear", "gaussian_weight_draws", "local_reparameterization"]


def _inverse_softplus(x):
    return math.log(math.expm1(x))


def _uniform_init(shape, bound, generator, factory):
    # torch.nn.Linear's default scale, U(-1/sqrt(fan_in), 1/sqrt(fan_in)), but
    # drawn from an explicit generator so that no global seed is involved.
    return torch.empty(shape, **factory).uniform_(-bound, bound, generator=generator)


def local_reparameterization(x, mean, var, generator=None, sample=True):
    r"""Pre-activations of a factorised-Gaussian linear layer, fresh noise per row.

    With weights and bias stored as one (in_features + 1, out_features) tensor,
    the bias as the last row ([Kingma2015]_, eq. 6):
    b = x M + m_b + eps * sqrt(x^2 V + v_b), eps ~ N(0, 1).

    Parameters
    ----------
    x : torch.Tensor of shape (..., n, in_features)
    mean, var : torch.Tensor of shape (in_features + 1, out_features)
        Mean and variance of each weight (last row: the biases).
    generator : torch.Generator, optional
        Source of the noise.
    sample : bool, default=True
        If False, return the mean pre-activations (no noise).

    Returns
    -------
    out : torch.Tensor of shape (..., n, out_features)
    """
    in_features, out_features = mean.shape[0] - 1, mean.shape[1]
    shape = (*x.shape[:-1], out_features)
    x = x.reshape(-1, in_features)
    out = torch.addmm(mean[-1], x, mean[:-1])
    if sample:
        pre_var = torch.addmm(var[-1], x * x, var[:-1])
        eps = torch.randn(out.shape, generator=generator, device=out.device, dtype=out.dtype)
        out = out + pre_var.sqrt() * eps
    return out.view(shape)


def gaussian_weight_draws(mean, std, n_samples, generator=None):
    """``n_samples`` draws of factorised-Gaussian weights stored with the bias as the last row.

    Parameters
    ----------
    mean, std : torch.Tensor of shape (in_features + 1, out_features)
    n_samples : int
    generator : torch.Generator, optional

    Returns
    -------
    weight : torch.Tensor of shape (n_samples, in_features, out_features)
    bias : torch.Tensor of shape (n_samples, 1, out_features)
    """
    eps = torch.randn((n_samples, *mean.shape), generator=generator, device=mean.device, dtype=mean.dtype)
    params = mean + std * eps
    return params[:, :-1], params[:, -1:]


class MeanFieldLinear(nn.Module):
    r"""Linear layer with a fully factorised Gaussian posterior over its weights.

    q(W) = prod N(mu, sigma^2) with sigma = softplus(rho) [Blundell2015]_, a
    N(0, prior_scale^2) prior on every weight and bias, and the closed-form KL.
    During training the pre-activations are sampled directly (local
    reparameterisation trick, [Kingma2015]_, eq. 6):

    .. math::

        b_j = \sum_i x_i \mu_{ij} + \mu_j + \epsilon_j
              \sqrt{\textstyle\sum_i x_i^2 \sigma_{ij}^2 + \sigma_j^2},
        \qquad \epsilon_j \sim \mathcal N(0, 1),

    which is exact for each row and has lower gradient variance than sampling
    one weight matrix per minibatch.

    Parameters
    ----------
    in_features, out_features : int
        Input and output widths.
    prior_scale : float, default=1.0
        Standard deviation of the zero-mean Gaussian prior on each weight.
    posterior_init_scale : float, default=1e-3
        Initial posterior standard deviation of each weight.
    generator : torch.Generator, optional
        Source of the random initial means.
    device, dtype : optional
        Where and in which precision the parameters live.
    """

    def __init__(
        self,
        in_features,
        out_features,
        *,
        prior_scale=1.0,
        posterior_init_scale=1e-3,
        generator=None,
        device=None,
        dtype=None,
    ):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        bound = 1.0 / math.sqrt(in_features) if in_features > 0 else 0.0
        self.in_features = in_features
        self.out_features = out_features
        self.prior_scale = float(prior_scale)
        # Weights and bias in one tensor, the bias as the last row, so that one
        # softplus, one KL and one optimiser slot serve both (fewer small ops
        # per training step, which dominate the cost of small networks).
        self.mu = nn.Parameter(_uniform_init((in_features + 1, out_features), bound, generator, factory))
        self.rho = nn.Parameter(
            torch.full((in_features + 1, out_features), _inverse_softplus(posterior_init_scale), **factory)
        )

    @property
    def weight_mu(self):
        """Posterior mean of the weights, (in_features, out_features)."""
        return self.mu[:-1]

    @property
    def bias_mu(self):
        """Posterior mean of the biases, (out_features,)."""
        return self.mu[-1]

    @property
    def weight_sigma(self):
        """Posterior standard deviation of the weights, (in_features, out_features)."""
        return F.softplus(self.rho[:-1])

    @property
    def bias_sigma(self):
        """Posterior standard deviation of the biases, (out_features,)."""
        return F.softplus(self.rho[-1])

    def forward(self, x, generator=None, sample=True):
        """Training-time pass with fresh noise for every row.

        Parameters
        ----------
        x : torch.Tensor of shape (..., n, in_features)
        generator : torch.Generator, optional
            Source of the noise.
        sample : bool, default=True
            If False, use the mean weights (no noise).

        Returns
        -------
        out : torch.Tensor of shape (..., n, out_features)
        """
        var = F.softplus(self.rho) ** 2 if sample else None
        return local_reparameterization(x, self.mu, var, generator, sample)

    def sample_parameters(self, n_samples, generator=None):
        """``n_samples`` weight draws shared by all rows.

        Parameters
        ----------
        n_samples : int
        generator : torch.Generator, optional

        Returns
        -------
        weight : torch.Tensor of shape (n_samples, in_features, out_features)
        bias : torch.Tensor of shape (n_samples, 1, out_features)
        """
        return gaussian_weight_draws(self.mu, F.softplus(self.rho), n_samples, generator)

    def kl(self):
        """Closed-form KL(q || N(0, prior_scale^2)) of weights and biases, a scalar in nats."""
        return kl_normal_normal(self.mu, F.softplus(self.rho), 0.0, self.prior_scale).sum()


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
        self,
        in_features,
        out_features,
        *,
        dropout_rate=0.01,
        prior_scale=1.0,
        generator=None,
        device=None,
        dtype=None,
    ):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        bound = 1.0 / math.sqrt(in_features) if in_features > 0 else 0.0
        self.in_features = in_features
        self.out_features = out_features
        self.dropout_rate = float(dropout_rate)
        self.prior_scale = float(prior_scale)
        self.weight = nn.Parameter(
            _uniform_init((in_features, out_features), bound, generator, factory)
        )
        self.bias = nn.Parameter(_uniform_init((out_features,), bound, generator, factory))

    def _mask(self, shape, generator, like):
        keep = 1.0 - self.dropout_rate
        u = torch.rand(shape, generator=generator, device=like.device, dtype=like.dtype)
        return (u < keep).to(like.dtype) / keep

    def forward(self, x, generator=None, sample=True):
        """Training-time pass with fresh noise for every row.

        Parameters
        ----------
        x : torch.Tensor of shape (..., n, in_features)
        generator : torch.Generator, optional
            Source of the noise.
        sample : bool, default=True
            If False, use the mean weights (no noise).

        Returns
        -------
        out : torch.Tensor of shape (..., n, out_features)
        """
        if sample and self.dropout_rate > 0:
            x = x * self._mask(x.shape, generator, x)
        return torch.matmul(x, self.weight) + self.bias

    def sample_parameters(self, n_samples, generator=None):
        """``n_samples`` weight draws shared by all rows.

        Parameters
        ----------
        n_samples : int
        generator : torch.Generator, optional

        Returns
        -------
        weight : torch.Tensor of shape (n_samples, in_features, out_features)
        bias : torch.Tensor of shape (n_samples, 1, out_features)
        """
        weight = self.weight.expand(n_samples, *self.weight.shape)
        if self.dropout_rate > 0:
            weight = weight * self._mask((n_samples, self.in_features, 1), generator, self.weight)
        bias = self.bias.expand(n_samples, 1, self.out_features)
        return weight, bias

    def kl(self):
        """KL-condition penalty l^2/(2(1-p)) ||W||^2 + l^2/2 ||b||^2 ([Gal2016]_ eq. 3.13,
        inverted-dropout form), a scalar in nats up to a constant."""
        l2 = 1.0 / self.prior_scale**2
        return 0.5 * l2 / (1.0 - self.dropout_rate) * self.weight.pow(2).sum() + (
            0.5 * l2 * self.bias.pow(2).sum()
        )
