r"""Black-box variational inference over a flat weight vector: Gaussian families and the two ELBO gradients.

The weights z (m of them) have the variational Gaussian q(z | psi) of one of
three families (Bruno 2021, section 2.3.2):

- ``"mean_field"``: prod_j N(z_j | mu_j, sigma_j^2) (eq. 2.74), 2m parameters;
- ``"full_rank"``: N(mu, L L^T), L lower triangular with a positive
  diagonal, z = mu + L eps (eq. 2.75), m + m(m + 1)/2 parameters;
- ``"low_rank"``: N(mu, B B^T + diag(c^2)), B of shape (m, f)
  (Ong et al. 2018; eq. 2.76), (f + 2) m parameters.

The ELBO(psi) = E_q[log p(x, z) - log q(z | psi)] (eq. 2.60) has two
Monte-Carlo gradients:

- the **reparameterisation** (pathwise) gradient (eq. 2.73): z = r(eps, psi),
  differentiate through the draws;
- the **score-function** gradient (eqs. 2.63-2.64),
  (1/S) sum_s grad_psi log q(z_s | psi) (log p(x, z_s) - log q(z_s | psi)),
  with the per-coordinate control variate of eqs. 2.65-2.70: with
  h_m[s] = d log q(z_s) / d psi_m (whose expectation is 0, eq. 2.62) and
  f_m[s] = h_m[s] w_s, w_s = log p(x, z_s) - log q(z_s),
  a_m = Cov(f_m, h_m) / Var(h_m) (eq. 2.69) and
  g_m = (1/S) sum_s h_m[s] (w_s - a_m) (eq. 2.70). Here a_m of draw s is
  estimated on the other S - 1 draws, which keeps the estimate unbiased; on
  the same draws, as eq. 2.69 has it, it is biased by O(1/S).

References
----------
.. [Bruno2021] the source thesis of these methods (seed 001), section 2.3.
.. [Ranganath2014] R. Ranganath, S. Gerrish and D. M. Blei, "Black box
   variational inference", AISTATS 2014.
.. [Ong2018] V. M.-H. Ong, D. J. Nott and M. S. Smith, "Gaussian variational
   approximation with a factor covariance structure", JCGS 2018.
"""

import torch
from torch import nn
from torch.distributions import Independent, LowRankMultivariateNormal, MultivariateNormal, Normal, kl_divergence

from .functional import inverse_softplus, standard_normal

__all__ = ["FAMILIES", "GaussianFamily", "linear_surrogate", "n_family_parameters", "score_function_gradient"]

#: The variational families of :class:`GaussianFamily`.
FAMILIES = ("mean_field", "full_rank", "low_rank")


class GaussianFamily(nn.Module):
    """A Gaussian q(z | psi) over ``n_params`` weights in one of :data:`FAMILIES`.

    Parameters
    ----------
    n_params : int
        m, the number of weights.
    family : {"mean_field", "full_rank", "low_rank"}
    rank : int, default=5
        f, the columns of the low-rank factor B (``"low_rank"`` only).
    init_loc : torch.Tensor of shape (m,), optional
        Initial mean (zeros if None).
    init_scale : float, default=1e-2
        Initial standard deviation of every coordinate.
    generator : torch.Generator, optional
        For the initial low-rank factor (small random values, so that its
        gradient is not zero).
    """

    def __init__(self, n_params, family="full_rank", rank=5, init_loc=None, init_scale=1e-2, generator=None,
                 dtype=None, device=None):
        super().__init__()
        if family not in FAMILIES:
            raise ValueError(f"family must be one of {FAMILIES}; got {family!r}.")
        self.family, self.n_params = family, int(n_params)
        options = {"dtype": dtype, "device": device}
        loc = torch.zeros(n_params, **options) if init_loc is None else init_loc.detach().clone().to(**options)
        self.loc = nn.Parameter(loc)
        raw = inverse_softplus(torch.tensor(init_scale, **options))
        if family == "mean_field":
            self.raw_scale = nn.Parameter(torch.full((n_params,), float(raw), **options))
        elif family == "full_rank":
            # the strictly lower part free, the diagonal through softplus
            self.raw_tril = nn.Parameter(torch.diag(torch.full((n_params,), float(raw), **options)))
        else:
            self.rank = int(rank)
            factor = torch.randn(n_params, self.rank, generator=generator, dtype=dtype) * (init_scale / 10)
            self.cov_factor = nn.Parameter(factor.to(device))
            self.raw_diag = nn.Parameter(torch.full((n_params,), float(raw), **options))

    def scale_tril(self):
        """L of the full-rank family, shape (m, m)."""
        return torch.tril(self.raw_tril, -1) + torch.diag(nn.functional.softplus(torch.diagonal(self.raw_tril)))

    def distribution(self):
        """q as a :mod:`torch.distributions` object (its ``log_prob`` and KL are torch's)."""
        if self.family == "mean_field":
            return Independent(Normal(self.loc, nn.functional.softplus(self.raw_scale)), 1)
        if self.family == "full_rank":
            return MultivariateNormal(self.loc, scale_tril=self.scale_tril())
        return LowRankMultivariateNormal(self.loc, self.cov_factor, nn.functional.softplus(self.raw_diag).square())

    def prior(self, prior_scale):
        """The N(0, prior_scale^2 I) prior in the family's own form (so that torch has the KL in closed form)."""
        zero = torch.zeros_like(self.loc)
        if self.family == "mean_field":
            return Independent(Normal(zero, torch.full_like(zero, prior_scale)), 1)
        if self.family == "full_rank":
            return MultivariateNormal(zero, scale_tril=torch.diag(torch.full_like(zero, prior_scale)))
        return LowRankMultivariateNormal(zero, torch.zeros_like(self.loc)[:, None], torch.full_like(zero, prior_scale**2))

    def kl(self, prior_scale):
        """KL(q || N(0, prior_scale^2 I)), closed form (``torch.distributions.kl_divergence``)."""
        return kl_divergence(self.distribution(), self.prior(prior_scale))

    def rsample(self, n_draws, generator=None):
        """``n_draws`` reparameterised draws z = r(eps, psi), shape (n_draws, m) (eqs. 2.74-2.76)."""
        eps = standard_normal((n_draws, self.n_params), self.loc, generator)
        if self.family == "mean_field":
            return self.loc + nn.functional.softplus(self.raw_scale) * eps
        if self.family == "full_rank":
            return self.loc + eps @ self.scale_tril().T
        eps_factor = standard_normal((n_draws, self.rank), self.loc, generator)
        return self.loc + eps_factor @ self.cov_factor.T + nn.functional.softplus(self.raw_diag) * eps


def score_function_gradient(family, z, log_joint, control_variate=True):
    """The score-function estimate of the ELBO's gradient at the draws ``z``, one tensor per parameter of ``family``.

    Parameters
    ----------
    family : GaussianFamily
    z : torch.Tensor of shape (S, m)
        Draws of q (no gradient flows through them).
    log_joint : torch.Tensor of shape (S,)
        log p(x, z_s) of each draw (any gradient is ignored).
    control_variate : bool, default=True
        Subtract the per-coordinate control variate a_m (eqs. 2.65-2.70,
        leave-one-out; needs S >= 3).

    Returns
    -------
    gradient : list of torch.Tensor
        The estimate of d ELBO / d psi for each of ``family.parameters()``.
    elbo : torch.Tensor
        The draws' mean of w_s = log p(x, z_s) - log q(z_s), the ELBO estimate.
    """
    params = list(family.parameters())
    z = z.detach()
    log_q = family.distribution().log_prob(z)  # (S,)
    w = (log_joint.detach() - log_q.detach())
    # h[s] = grad_psi log q(z_s | psi): one backward pass per draw
    scores = [torch.autograd.grad(log_q[s], params, retain_graph=s < len(z) - 1) for s in range(len(z))]
    gradient = []
    for i, p in enumerate(params):
        h = torch.stack([score[i] for score in scores])  # (S, *p.shape)
        shape = (-1,) + (1,) * p.dim()
        if control_variate:
            gradient.append((h * (w.reshape(shape) - _leave_one_out_coefficient(h, h * w.reshape(shape)))).mean(0))
        else:
            gradient.append((h * w.reshape(shape)).mean(0))  # eq. 2.64
    return gradient, w.mean()


def _leave_one_out_coefficient(h, f):
    """a_m = Cov(f_m, h_m) / Var(h_m) of eq. 2.69 for each draw s, estimated on the other S - 1 draws, shape of h.

    Estimated on the same draws (eq. 2.69 as written) the coefficient is correlated with the draw it
    multiplies, and the gradient is biased by O(1/S): at S = 10 it shrank the gradient of a Gaussian target
    by about 20% (the target of tests/nn/test_bbvi.py, measured by hand). Leaving the draw out keeps the
    estimate unbiased.
    """
    n = h.shape[0] - 1
    sum_h, sum_f = h.sum(0) - h, f.sum(0) - f
    sum_fh, sum_hh = (f * h).sum(0) - f * h, (h * h).sum(0) - h * h
    covariance = sum_fh - sum_f * sum_h / n
    variance = sum_hh - sum_h * sum_h / n
    return covariance / variance.clamp_min(1e-300)


def linear_surrogate(parameters, gradient):
    """A scalar whose gradient with respect to ``parameters`` is ``gradient`` (sum_m psi_m g_m, g detached)."""
    return sum((p * g.detach()).sum() for p, g in zip(parameters, gradient))


def n_family_parameters(family, m, rank=5):
    """The number of variational parameters of ``family`` over m weights (2m, m + m(m+1)/2 or (f + 2)m)."""
    return {"mean_field": 2 * m, "full_rank": m + m * (m + 1) // 2, "low_rank": (rank + 2) * m}[family]

