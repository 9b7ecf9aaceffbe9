r"""The layer of probabilistic backpropagation: Gaussian weights stored as means and variances.

Scaling. PBP (Hernández-Lobato & Adams 2015, [HernandezLobato2015]_) scales
each pre-activation by 1/sqrt(V + 1), V the number of inputs of the layer
(Cinelli 2019, eq. 3.39). Here that scaling is absorbed into the stored
weights: a layer holds the moments of w' = w / sqrt(V + 1), so it is a plain
linear layer at prediction time. ADF is invariant under this linear
reparameterisation; only the prior is affected: N(w | 0, 1/lambda) becomes
N(w' | 0, 1/(lambda (V + 1))), and the prior-factor updates
(:meth:`~skbayes.nn.networks.PBPNetwork.refine_prior`) work in the paper's
units. The layer protocol is described in :mod:`skbayes.nn.layers`.

References
----------
.. [HernandezLobato2015] J. M. Hernández-Lobato and R. P. Adams, "Probabilistic
   backpropagation for scalable learning of Bayesian neural networks", ICML 2015
   (Cinelli 2019, section 3.4).
"""

import torch
from torch import nn
from torch.distributions import Normal, kl_divergence

from ..functional import generator_device
from .mean_field import gaussian_weight_draws, local_reparameterization

__all__ = ["PBPLinear"]


class PBPLinear(nn.Module):
    r"""Linear layer with a factorised Gaussian posterior stored as means and variances.

    Holds the moments of the *scaled* weights w' = w / sqrt(in_features + 1)
    of PBP (Cinelli 2019, eq. 3.39), bias as the last row, plus the EP site
    parameters of its prior factors N(w | 0, 1/lambda) in the paper's units.
    It follows the layer protocol of :mod:`skbayes.nn.layers`
    (``forward``, ``sample_parameters``, ``kl``), so a trained PBP network
    predicts like any mean-field network.

    Parameters
    ----------
    in_features, out_features : int
        Input and output widths.
    init_mean_std : float, default=1.0
        The initial means of the unscaled weights are N(0, init_mean_std^2 /
        (in_features + 1)), as in the reference implementation.
    init_var : float, default=1.2
        Initial variance of each unscaled weight, the prior variance
        E[1/lambda] = beta_0 / (alpha_0 - 1) of the default hyperprior.
    generator : torch.Generator, optional
        Source of the random initial means.
    device, dtype : optional
        Where and in which precision the tensors live.

    Attributes
    ----------
    mean, var : torch.nn.Parameter of shape (in_features + 1, out_features)
        Posterior means and variances of the scaled weights, bias last.
    scale2 : float
        in_features + 1: unscaled moments are ``mean * sqrt(scale2)`` and
        ``var * scale2``.
    site_precision, site_mean_precision, site_alpha, site_beta : buffers
        Natural parameters of the EP approximation of each weight's prior
        factor (Gaussian precision, precision x mean, and the Gamma's
        alpha - 1 and -beta contributions), in unscaled units.
    """

    def __init__(
        self, in_features, out_features, *, init_mean_std=1.0, init_var=1.2, generator=None, device=None, dtype=None
    ):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.in_features = in_features
        self.out_features = out_features
        self.scale2 = float(in_features + 1)
        shape = (in_features + 1, out_features)
        # drawn on the generator's device, then moved: a CPU generator seeds any device
        mean = torch.randn(shape, generator=generator, device=generator_device(generator, device), dtype=dtype)
        mean = mean.to(device) * (init_mean_std / self.scale2)
        self.mean = nn.Parameter(mean)
        self.var = nn.Parameter(torch.full(shape, init_var / self.scale2, **factory))
        # The prior site starts as N(0, init_var) with no Gamma contribution
        # (reference implementation).
        self.register_buffer(
            "site_precision", torch.full(shape, 1.0 / init_var, **factory)
        )
        self.register_buffer("site_mean_precision", torch.zeros(shape, **factory))
        self.register_buffer("site_alpha", torch.zeros(shape, **factory))
        self.register_buffer("site_beta", torch.zeros(shape, **factory))

    def moments(self, mean, var):
        r"""Propagate independent Gaussian inputs through the layer (Cinelli 2019, eq. 3.40).

        Parameters
        ----------
        mean : torch.Tensor of shape (n, in_features)
            Means of the inputs.
        var : torch.Tensor of shape (n, in_features) or None
            Their variances; None for observed inputs (variance 0).

        Returns
        -------
        mean, var : torch.Tensor of shape (n, out_features)
            m_a = m_z M + m_b and
            v_a = v_z (M * M) + (m_z^2 + v_z) V + v_b, with M, V the weights'
            means and variances.
        """
        # The bias enters as an input of mean 1 and variance 0; appending it to
        # the inputs (rather than slicing the parameters) keeps the backward pass
        # to one matrix product per term.
        ones = mean.new_ones((mean.shape[0], 1))
        mean_1 = torch.cat([mean, ones], dim=1)
        out_mean = mean_1 @ self.mean
        if var is None:  # observed inputs: skip the terms that vanish
            return out_mean, (mean_1 * mean_1) @ self.var
        zeros = mean.new_zeros((mean.shape[0], 1))
        var_0 = torch.cat([var, zeros], dim=1)
        out_var = (mean_1 * mean_1 + var_0) @ self.var + var_0 @ (self.mean * self.mean)
        return out_mean, out_var

    def forward(self, x, generator=None, sample=True):
        """Training-time pass with fresh weight noise for every row (local reparameterisation).

        Parameters
        ----------
        x : torch.Tensor of shape (..., n, in_features)
        generator : torch.Generator, optional
        sample : bool, default=True
            If False, use the mean weights.

        Returns
        -------
        out : torch.Tensor of shape (..., n, out_features)
        """
        return local_reparameterization(x, self.mean, self.var, generator, sample)

    def sample_parameters(self, n_samples, generator=None):
        """``n_samples`` weight draws from q, shared by all rows.

        Returns
        -------
        weight : torch.Tensor of shape (n_samples, in_features, out_features)
        bias : torch.Tensor of shape (n_samples, 1, out_features)
        """
        return gaussian_weight_draws(self.mean, self.var.sqrt(), n_samples, generator)

    def kl(self, prior_var=1.0):
        """KL(q || N(0, prior_var / scale2)) of the scaled weights, a scalar in nats.

        Parameters
        ----------
        prior_var : float or torch.Tensor, default=1.0
            Prior variance 1/lambda of the unscaled weights.
        """
        p = (
            torch.as_tensor(prior_var, dtype=self.var.dtype, device=self.var.device)
            / self.scale2
        )
        q = Normal(self.mean, self.var.sqrt(), validate_args=False)
        return kl_divergence(q, Normal(0.0, p.sqrt(), validate_args=False)).sum()
