"""Linear layer with a fully factorised Gaussian posterior over its weights (Bayes by Backprop).

Also the two ways of sampling a factorised-Gaussian layer that the other
Gaussian layers share: per-row noise on the pre-activations
(:func:`local_reparameterization`) and weight draws shared by all rows
(:func:`gaussian_weight_draws`). The layer protocol is described in
:mod:`skbayes.nn.layers`.

References
----------
.. [Blundell2015] C. Blundell, J. Cornebise, K. Kavukcuoglu and D. Wierstra,
   "Weight uncertainty in neural networks", ICML 2015 (Cinelli 2019, section 3.3.3).
.. [Kingma2015] D. P. Kingma, T. Salimans and M. Welling, "Variational dropout
   and the local reparameterization trick", NeurIPS 2015.
"""

import torch
from torch import nn
from torch.distributions import Normal, kl_divergence
from torch.nn import functional as F

from ..functional import inverse_softplus, standard_normal, uniform_init

__all__ = ["MeanFieldLinear", "gaussian_kl", "gaussian_weight_draws", "local_reparameterization"]


def local_reparameterization(x, mean, var, generator=None, sample=True, *, z=None):
    r"""Pre-activations of a factorised-Gaussian linear layer, fresh noise per row.

    With weights and bias stored as one (in_features + 1, out_features) tensor,
    the bias as the last row ([Kingma2015]_, eq. 6):
    b = x M + m_b + eps * sqrt(x^2 V + v_b), eps ~ N(0, 1). With
    multiplicative noise ``z`` on the weight means, W_ij ~ N(z_i M_ij, V_ij)
    (Louizos & Welling 2017, eq. 4 and Algorithm 1; Killingberg 2021,
    Algorithm 5), the mean becomes (x * z) M + m_b and the variance stays.

    Parameters
    ----------
    x : torch.Tensor of shape (..., n, in_features)
    mean, var : torch.Tensor of shape (in_features + 1, out_features)
        Mean and variance of each weight (last row: the biases).
    generator : torch.Generator, optional
        Source of the noise.
    sample : bool, default=True
        If False, return the mean pre-activations (no noise).
    z : torch.Tensor broadcastable to x, optional
        Multiplicative noise on the inputs of the mean (one value per row and
        input unit); None for none.

    Returns
    -------
    out : torch.Tensor of shape (..., n, out_features)
    """
    in_features, out_features = mean.shape[0] - 1, mean.shape[1]
    shape = (*x.shape[:-1], out_features)
    x_mean = x if z is None else x * z
    x = x.reshape(-1, in_features)
    out = torch.addmm(mean[-1], x_mean.reshape(-1, in_features), mean[:-1])
    if sample:
        pre_var = torch.addmm(var[-1], x * x, var[:-1])
        out = out + pre_var.sqrt() * standard_normal(out.shape, out, generator)
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
    # drawn on the generator's device: a CPU generator gives the same draws on any device
    params = mean + std * standard_normal((n_samples, *mean.shape), mean, generator)
    return params[:, :-1], params[:, -1:]


def gaussian_kl(mean, std, prior_std):
    """Closed-form KL(N(mean, std^2) || N(0, prior_std^2)), summed over all entries, in nats.

    sum [log(prior_std / std) + (std^2 + mean^2) / (2 prior_std^2) - 1/2]
    (``torch.distributions.kl_divergence`` of two ``Normal``).

    Parameters
    ----------
    mean, std : torch.Tensor of the same shape
        Means and standard deviations (> 0) of the factorised Gaussian q.
    prior_std : float or torch.Tensor
        Standard deviation of the zero-mean prior (> 0), broadcast.

    Returns
    -------
    kl : torch.Tensor, scalar
    """
    if not isinstance(prior_std, torch.Tensor):
        return _GaussianKL.apply(mean, std, float(prior_std))
    q = Normal(mean, std, validate_args=False)
    return kl_divergence(q, Normal(0.0, prior_std, validate_args=False)).sum()


class _GaussianKL(torch.autograd.Function):
    """:func:`gaussian_kl` for a fixed (float) prior scale, one autograd node.

    ``forward(mean, std, prior_std, rho=False)``; with ``rho=True`` the second
    argument is rho and std = softplus(rho) is computed (and differentiated)
    inside the node.

    Forward and backward are the operations autograd records for
    ``kl_divergence(Normal(mean, std), Normal(0, prior_std)).sum()``, in the
    same order (the same numbers), without building that graph of about
    a dozen nodes at every step.
    """

    @staticmethod
    def forward(ctx, mean, std, prior_std, rho=False):
        if rho:  # the second argument is rho, std = softplus(rho)
            ctx.rho, std = std, F.softplus(std)
        ratio = std / prior_std
        var_ratio = ratio * ratio  # products and float literals: no scalar conversion per operation
        scaled_mean = mean / prior_std
        ctx.ratio, ctx.var_ratio, ctx.scaled_mean, ctx.prior_std = ratio, var_ratio, scaled_mean, prior_std
        return (0.5 * (var_ratio + scaled_mean * scaled_mean - 1.0 - var_ratio.log())).sum()

    @staticmethod
    def backward(ctx, grad):
        ratio, var_ratio, scaled_mean = ctx.ratio, ctx.var_ratio, ctx.scaled_mean
        half = grad * 0.5
        grad_var_ratio = half + (-half) / var_ratio
        grad_mean = grad_std = None
        if ctx.needs_input_grad[0]:
            grad_mean = half * (2.0 * scaled_mean) / ctx.prior_std
        if ctx.needs_input_grad[1]:
            grad_std = grad_var_ratio * (2.0 * ratio) / ctx.prior_std
            if hasattr(ctx, "rho"):
                grad_std = torch.ops.aten.softplus_backward(grad_std, ctx.rho, 1, 20)
        return grad_mean, grad_std, None, None


class _MeanFieldLinearFunction(torch.autograd.Function):
    """The training pass of :class:`MeanFieldLinear`, one autograd node with a hand-written backward.

    ``forward(x, mu, rho, eps)``: :func:`local_reparameterization` of ``x``
    (..., n, in_features) with ``var = softplus(rho)^2`` and the standard
    normal draws ``eps`` (one row per row of ``x``, out_features columns). Forward and backward
    are the operations autograd records for that expression, in the same
    order (the same numbers); one node instead of about fifteen makes the
    step of a small network several times cheaper to differentiate.
    """

    @staticmethod
    def forward(ctx, x, mu, rho, eps):
        rows = x.reshape(-1, mu.shape[0] - 1)
        sigma = F.softplus(rho)
        var = sigma * sigma
        x_sq = rows * rows
        out = torch.addmm(mu[-1], rows, mu[:-1])
        std = torch.addmm(var[-1], x_sq, var[:-1]).sqrt()
        ctx.save_for_backward(mu, rho, eps)
        # intermediates (not inputs or outputs) are kept on ctx, cheaper than saved tensors
        ctx.rows, ctx.x_sq, ctx.sigma, ctx.var, ctx.std, ctx.shape = rows, x_sq, sigma, var, std, x.shape
        return (out + std * eps).view(*x.shape[:-1], mu.shape[1])

    @staticmethod
    def backward(ctx, grad):
        mu, rho, eps = ctx.saved_tensors
        rows, x_sq, sigma, var, std = ctx.rows, ctx.x_sq, ctx.sigma, ctx.var, ctx.std
        grad = grad.reshape(-1, mu.shape[1])
        grad_x = grad_mu = grad_rho = None
        # d out / d pre_var, pre_var = x^2 V + v_b and std = sqrt(pre_var)
        grad_pre_var = (grad * eps) / (2.0 * std)
        if ctx.needs_input_grad[0]:
            grad_x_sq = grad_pre_var.mm(var[:-1].t()) * rows
            grad_x = (grad.mm(mu[:-1].t()) + (grad_x_sq + grad_x_sq)).view(ctx.shape)
        if ctx.needs_input_grad[1]:
            grad_mu = torch.cat([rows.t().mm(grad), grad.sum(0, keepdim=True)])
        if ctx.needs_input_grad[2]:
            grad_var = torch.cat([x_sq.t().mm(grad_pre_var), grad_pre_var.sum(0, keepdim=True)])
            grad_rho = torch.ops.aten.softplus_backward(grad_var * (2.0 * sigma), rho, 1, 20)
        return grad_x, grad_mu, grad_rho, None


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
        self, in_features, out_features, *, prior_scale=1.0, posterior_init_scale=1e-3, generator=None, device=None,
        dtype=None,
    ):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.in_features = in_features
        self.out_features = out_features
        self.prior_scale = float(prior_scale)
        # Weights and bias in one tensor, the bias as the last row, so that one
        # softplus, one KL and one optimiser slot serve both (fewer small ops
        # per training step, which dominate the cost of small networks).
        self.mu = nn.Parameter(uniform_init((in_features + 1, out_features), in_features, generator, **factory))
        self.rho = nn.Parameter(
            torch.full((in_features + 1, out_features), inverse_softplus(posterior_init_scale), **factory)
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
        """Training-time pass with fresh noise for every row (:func:`local_reparameterization`)."""
        if not sample:
            return local_reparameterization(x, self.mu, None, generator, sample)
        eps = standard_normal((x.numel() // self.in_features, self.out_features), self.mu, generator)
        return _MeanFieldLinearFunction.apply(x, self.mu, self.rho, eps)

    def sample_parameters(self, n_samples, generator=None):
        """``n_samples`` weight draws from q shared by all rows (:func:`gaussian_weight_draws`)."""
        return gaussian_weight_draws(self.mu, F.softplus(self.rho), n_samples, generator)

    def kl(self):
        """Closed-form KL(q || N(0, prior_scale^2)) of weights and biases, a scalar in nats."""
        # gaussian_kl(self.mu, F.softplus(self.rho), self.prior_scale), the softplus inside the one node
        return _GaussianKL.apply(self.mu, self.rho, self.prior_scale, True)
