"""The conjugate Bayesian Gaussian mixture: CAVI and stochastic variational inference.

Model ([Bishop2006]_ section 10.2; [Bruno]_ section 1.2.2): weights
pi ~ Dir(alpha_0 1_K) (or a truncated stick-breaking Dirichlet process with
concentration alpha_0), and for each component a Gauss-Wishart
(mu_k, Lambda_k) ~ N(mu_k | m_0, (beta_0 Lambda_k)^-1) W(Lambda_k | W_0, nu_0).
The mean-field posterior q(Z) q(pi) prod_k q(mu_k, Lambda_k) stays in the same
families, with parameters (alpha_k, beta_k, m_k, W_k, nu_k).

The global parameters are stored in the natural-parameter coordinates of
[Bruno]_ eq. (2.16), ``lambda = [alpha - 1, beta, nu - D, beta m,
beta m m^T + W^-1]`` (the constant shifts -1 and -D are left out: they cancel
in every convex combination), as a :class:`NaturalParameters`. In these
coordinates the CAVI global update is ``lambda = zeta + sum_n E[t(x_n, z_n)]``
(eq. 2.11) and the stochastic natural-gradient step of SVI is the blend
``lambda_t = (1 - rho_t) lambda_{t-1} + rho_t lambda_hat`` with
``lambda_hat = zeta + (N / B) sum_b E[t(x_b, z_b)]`` (eqs. 2.46, 2.53).
Blending m_k and W_k^-1 directly instead is not a natural-gradient step.

Covariance types: ``"full"`` (W_k is D x D) and ``"diag"`` (W_k is
constrained to be diagonal and stored as its diagonal, shape (K, D); the
expectations are those of a Wishart with a diagonal scale matrix, as in
scikit-learn's ``BayesianGaussianMixture``).

Shapes: X (n, D); responsibilities (n, K); ``second_moment`` (K, D, D) for
"full" and (K, D) for "diag".

References
----------
.. [Bishop2006] C. M. Bishop, "Pattern Recognition and Machine Learning",
   Springer 2006, section 10.2 and appendix B.
.. [Bruno] The seed thesis 001, chapters 1-2: equations (1.42)-(1.73) (CAVI,
   ELBO, predictive), (2.11)-(2.16) (natural parameters), (2.46)-(2.58) (SVI,
   Robbins-Monro and adaptive steps).
.. [Ranganath2013] R. Ranganath, C. Wang, D. M. Blei and E. P. Xing, "An
   adaptive learning rate for stochastic variational inference", ICML 2013.
.. [Hoffman2013] M. D. Hoffman, D. M. Blei, C. Wang and J. Paisley,
   "Stochastic variational inference", JMLR 14, 2013.
"""

import math
from typing import NamedTuple

import torch

__all__ = [
    "AdaptiveStepSize",
    "NaturalParameters",
    "blend",
    "covariance_cholesky",
    "e_step",
    "elbo",
    "estimate_log_prob",
    "expected_log_weights",
    "expected_weights",
    "moment_parameters",
    "posterior_natural_parameters",
    "predictive_log_density",
    "prior_natural_parameters",
    "reduced_lower_bound",
    "robbins_monro_step_size",
    "sufficient_statistics",
]

WEIGHT_PRIOR_TYPES = ("dirichlet_process", "dirichlet_distribution")
COVARIANCE_TYPES = ("full", "diag")


class NaturalParameters(NamedTuple):
    """Global variational parameters of the mixture in natural coordinates ([Bruno]_ eq. 2.16).

    Attributes
    ----------
    concentration : torch.Tensor of shape (K,) or (2, K)
        Dirichlet alpha_k (``"dirichlet_distribution"``) or the Beta
        parameters (a_k, b_k) of the sticks (``"dirichlet_process"``).
    mean_precision : torch.Tensor of shape (K,)
        beta_k.
    scaled_mean : torch.Tensor of shape (K, D)
        beta_k m_k.
    second_moment : torch.Tensor of shape (K, D, D) or (K, D)
        beta_k m_k m_k^T + W_k^-1 (its diagonal for "diag").
    degrees_of_freedom : torch.Tensor of shape (K,)
        nu_k.
    """

    concentration: torch.Tensor
    mean_precision: torch.Tensor
    scaled_mean: torch.Tensor
    second_moment: torch.Tensor
    degrees_of_freedom: torch.Tensor


def _outer(v, covariance_type):
    """v v^T per row (full) or v * v (diag)."""
    return v.unsqueeze(-1) * v.unsqueeze(-2) if covariance_type == "full" else v * v


def prior_natural_parameters(n_components, weight_concentration, mean_precision, mean, degrees_of_freedom,
                             covariance, covariance_type, weight_prior_type):
    """The prior zeta in natural coordinates ([Bruno]_ eq. 2.16), repeated for the K components.

    Parameters
    ----------
    n_components : int
    weight_concentration : float
        alpha_0 (Dirichlet) or the stick-breaking concentration.
    mean_precision : float
        beta_0.
    mean : torch.Tensor of shape (D,)
        m_0.
    degrees_of_freedom : float
        nu_0 (> D - 1).
    covariance : torch.Tensor of shape (D, D) or (D,)
        W_0^-1 (scikit-learn's ``covariance_prior``).
    covariance_type : {"full", "diag"}
    weight_prior_type : {"dirichlet_process", "dirichlet_distribution"}

    Returns
    -------
    zeta : NaturalParameters
        With concentration (1, alpha_0) per stick or alpha_0 per component.
    """
    like = dict(dtype=mean.dtype, device=mean.device)
    k = n_components
    if weight_prior_type == "dirichlet_process":
        concentration = torch.stack([torch.ones(k, **like), torch.full((k,), float(weight_concentration), **like)])
    else:
        concentration = torch.full((k,), float(weight_concentration), **like)
    beta = torch.full((k,), float(mean_precision), **like)
    second = mean_precision * _outer(mean, covariance_type) + covariance
    return NaturalParameters(
        concentration, beta, (mean_precision * mean).expand(k, -1).clone(),
        second.expand(k, *second.shape).clone(), torch.full((k,), float(degrees_of_freedom), **like))


def sufficient_statistics(X, resp, covariance_type, reg_covar=0.0):
    """Expected sufficient statistics sum_n E[t(x_n, z_n)] ([Bruno]_ eq. 2.14).

    Parameters
    ----------
    X : torch.Tensor of shape (n, D)
    resp : torch.Tensor of shape (n, K)
        Responsibilities r_nk.
    covariance_type : {"full", "diag"}
    reg_covar : float, default=0.0
        Added to the diagonal of each x_n x_n^T (scikit-learn's
        regularisation: N_k S_k gains N_k reg_covar I).

    Returns
    -------
    counts : torch.Tensor of shape (K,)
        N_k = sum_n r_nk + 10 eps (the eps as in scikit-learn, eq. 1.45).
    first : torch.Tensor of shape (K, D)
        sum_n r_nk x_n.
    second : torch.Tensor of shape (K, D, D) or (K, D)
        sum_n r_nk (x_n x_n^T + reg_covar I) (the diagonal for "diag").
    """
    counts = resp.sum(0) + 10 * torch.finfo(resp.dtype).eps
    first = resp.T @ X
    if covariance_type == "full":
        second = torch.einsum("nk,ni,nj->kij", resp, X, X)
        second = second + reg_covar * counts[:, None, None] * torch.eye(X.shape[1], dtype=X.dtype, device=X.device)
    else:
        second = resp.T @ (X * X) + reg_covar * counts[:, None]
    return counts, first, second


def posterior_natural_parameters(prior, statistics, scale=1.0):
    """lambda_hat = zeta + scale * statistics ([Bruno]_ eqs. 2.11 and 2.53).

    ``scale=1`` with the statistics of all rows is the CAVI global update
    (eqs. 1.52-1.57); ``scale=N/B`` with those of a minibatch of B rows is
    the intermediate parameter of SVI (Algorithm 6).

    Parameters
    ----------
    prior : NaturalParameters
        zeta, from :func:`prior_natural_parameters`.
    statistics : tuple of torch.Tensor
        (counts, first, second) from :func:`sufficient_statistics`.
    scale : float, default=1.0

    Returns
    -------
    lambda_hat : NaturalParameters
        For the stick-breaking prior, a_k = 1 + s N_k and
        b_k = alpha_0 + s sum_{j>k} N_j.
    """
    counts, first, second = (scale * s for s in statistics)
    if prior.concentration.ndim == 2:
        tail = counts.flip(0).cumsum(0).flip(0) - counts
        concentration = prior.concentration + torch.stack([counts, tail])
    else:
        concentration = prior.concentration + counts
    return NaturalParameters(concentration, prior.mean_precision + counts, prior.scaled_mean + first,
                             prior.second_moment + second, prior.degrees_of_freedom + counts)


def blend(old, new, rho):
    """The natural-gradient step (1 - rho) lambda_old + rho lambda_hat ([Bruno]_ eq. 2.46).

    Parameters
    ----------
    old, new : NaturalParameters
    rho : float
        Step size in (0, 1]; rho = 1 returns ``new``.

    Returns
    -------
    NaturalParameters
    """
    return NaturalParameters(*((1.0 - rho) * a + rho * b for a, b in zip(old, new, strict=True)))


def moment_parameters(params, covariance_type):
    """m_k and W_k^-1 from the natural parameters.

    Returns
    -------
    means : torch.Tensor of shape (K, D)
        m_k = (beta m)_k / beta_k.
    scale_inverse : torch.Tensor of shape (K, D, D) or (K, D)
        W_k^-1 = (beta m m^T + W^-1)_k - beta_k m_k m_k^T.
    """
    means = params.scaled_mean / params.mean_precision[:, None]
    beta = params.mean_precision[:, None, None] if covariance_type == "full" else params.mean_precision[:, None]
    return means, params.second_moment - beta * _outer(means, covariance_type)


def covariance_cholesky(scale_inverse, degrees_of_freedom, covariance_type):
    """scikit-learn's ``covariances_`` and ``precisions_cholesky_``.

    Parameters
    ----------
    scale_inverse : torch.Tensor of shape (K, D, D) or (K, D)
        W_k^-1.
    degrees_of_freedom : torch.Tensor of shape (K,)

    Returns
    -------
    covariances : torch.Tensor
        W_k^-1 / nu_k = E[Lambda_k]^-1.
    precisions_cholesky : torch.Tensor
        Upper-triangular U_k with U_k U_k^T = nu_k W_k (the inverse transpose
        of the Cholesky factor of ``covariances``), or 1/sqrt of the diagonal.

    Raises
    ------
    ValueError
        If a covariance is not positive definite.
    """
    if covariance_type == "diag":
        covariances = scale_inverse / degrees_of_freedom[:, None]
        if not bool((covariances > 0).all()):
            raise ValueError("A component covariance is not positive; increase reg_covar or scale the data.")
        return covariances, covariances.rsqrt()
    covariances = scale_inverse / degrees_of_freedom[:, None, None]
    chol, info = torch.linalg.cholesky_ex(covariances)
    if bool((info > 0).any()):
        raise ValueError("A component covariance is not positive definite; increase reg_covar or scale the data.")
    eye = torch.eye(chol.shape[-1], dtype=chol.dtype, device=chol.device).expand_as(chol)
    return covariances, torch.linalg.solve_triangular(chol, eye, upper=False).mT


def _log_det_cholesky(precisions_cholesky, covariance_type):
    if covariance_type == "full":
        return precisions_cholesky.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    return precisions_cholesky.log().sum(-1)


def _expected_log_det(degrees_of_freedom, log_det_scale, n_features):
    """E[log |Lambda_k|] = sum_i psi((nu_k - i)/2) + D log 2 + log |W_k| ([Bruno]_ eq. 1.60)."""
    i = torch.arange(n_features, dtype=degrees_of_freedom.dtype, device=degrees_of_freedom.device)
    return torch.digamma(0.5 * (degrees_of_freedom[:, None] - i)).sum(-1) + n_features * math.log(2.0) + log_det_scale


def expected_log_weights(concentration):
    """E[log pi_k] under q(pi) ([Bruno]_ eq. 1.59; stick-breaking: [Blei2006]_).

    Parameters
    ----------
    concentration : torch.Tensor of shape (K,) or (2, K)

    Returns
    -------
    torch.Tensor of shape (K,)
        psi(alpha_k) - psi(sum alpha), or
        E[log v_k] + sum_{j<k} E[log(1 - v_j)] for the sticks v_k ~ Beta(a_k, b_k).

    References
    ----------
    .. [Blei2006] D. M. Blei and M. I. Jordan, "Variational inference for
       Dirichlet process mixtures", Bayesian Analysis 1(1), 2006.
    """
    if concentration.ndim == 1:
        return torch.digamma(concentration) - torch.digamma(concentration.sum())
    a, b = concentration
    digamma_sum = torch.digamma(a + b)
    log_rest = torch.cumsum(torch.digamma(b) - digamma_sum, 0)
    return torch.digamma(a) - digamma_sum + torch.cat([log_rest.new_zeros(1), log_rest[:-1]])


def expected_weights(concentration):
    """E[pi_k] under q(pi): alpha_k / sum alpha, or E[v_k] prod_{j<k} (1 - E[v_j]) for the sticks."""
    if concentration.ndim == 1:
        return concentration / concentration.sum()
    a, b = concentration
    v = a / (a + b)
    rest = torch.cumprod(1 - v, 0)
    weights = v * torch.cat([rest.new_ones(1), rest[:-1]])
    return weights / weights.sum()


def estimate_log_prob(X, params, covariance_type):
    """log rho_nk = E[log pi_k] + E[log N(x_n | mu_k, Lambda_k^-1)] ([Bruno]_ eqs. 1.42, 1.58-1.60).

    Parameters
    ----------
    X : torch.Tensor of shape (n, D)
    params : NaturalParameters
    covariance_type : {"full", "diag"}

    Returns
    -------
    torch.Tensor of shape (n, K)
        Unnormalised log responsibilities.
    """
    d = X.shape[1]
    means, scale_inverse = moment_parameters(params, covariance_type)
    nu, beta = params.degrees_of_freedom, params.mean_precision
    _, prec_chol = covariance_cholesky(scale_inverse, nu, covariance_type)
    diff = X.unsqueeze(1) - means  # (n, K, D)
    if covariance_type == "full":
        maha = torch.einsum("nki,kij->nkj", diff, prec_chol).square().sum(-1)  # nu (x - m)^T W (x - m)
    else:
        maha = (diff.square() * prec_chol.square()).sum(-1)
    log_det_w = 2 * _log_det_cholesky(prec_chol, covariance_type) - d * nu.log()  # log |W_k|
    e_log_det = _expected_log_det(nu, log_det_w, d)
    log_gauss = -0.5 * d * math.log(2 * math.pi) + 0.5 * e_log_det - 0.5 * d / beta - 0.5 * maha
    return log_gauss + expected_log_weights(params.concentration)


def e_step(X, params, covariance_type):
    """The local (variational E) step: normalised log responsibilities ([Bruno]_ eq. 1.61).

    Returns
    -------
    log_norm : torch.Tensor of shape (n,)
        logsumexp_k log rho_nk.
    log_resp : torch.Tensor of shape (n, K)
        log r_nk.
    """
    weighted = estimate_log_prob(X, params, covariance_type)
    log_norm = torch.logsumexp(weighted, dim=1)
    return log_norm, weighted - log_norm[:, None]


def _log_wishart_norm(nu, log_det_scale, d):
    """log B(W, nu) of [Bruno]_ eq. (A.30), W given by log |W|."""
    return -(0.5 * nu * log_det_scale + 0.5 * nu * d * math.log(2.0) + 0.25 * d * (d - 1) * math.log(math.pi)
             + torch.lgamma(0.5 * (nu[:, None] - torch.arange(d, dtype=nu.dtype, device=nu.device))).sum(-1))


def _log_beta_fn(a, b):
    return torch.lgamma(a) + torch.lgamma(b) - torch.lgamma(a + b)


def reduced_lower_bound(log_resp, params, covariance_type):
    """scikit-learn's simplified lower bound (``BayesianGaussianMixture._compute_lower_bound``).

    Equal to the ELBO (:func:`elbo`) up to an additive constant only when the
    global factors are at their CAVI optimum for ``log_resp`` (right after
    the M-step, eqs. 1.52-1.57): it is what scikit-learn monitors, kept for
    parity and for the stopping rule of the batch algorithm.

    Returns
    -------
    torch.Tensor, scalar
        -sum r log r - sum_k log B(W_k, nu_k) - log C(q(pi)) - (D/2) sum_k log beta_k,
        without the constant pi^{D(D-1)/4} of B.
    """
    d = params.scaled_mean.shape[1]
    nu = params.degrees_of_freedom
    _, scale_inverse = moment_parameters(params, covariance_type)
    _, prec_chol = covariance_cholesky(scale_inverse, nu, covariance_type)
    log_det_w = 2 * _log_det_cholesky(prec_chol, covariance_type) - d * nu.log()
    log_wishart = (_log_wishart_norm(nu, log_det_w, d) + 0.25 * d * (d - 1) * math.log(math.pi)).sum()
    if params.concentration.ndim == 2:
        log_norm_weight = -_log_beta_fn(*params.concentration).sum()
    else:
        alpha = params.concentration
        log_norm_weight = torch.lgamma(alpha.sum()) - torch.lgamma(alpha).sum()
    entropy_term = -(log_resp.exp() * log_resp).sum()
    return entropy_term - log_wishart - log_norm_weight - 0.5 * d * params.mean_precision.log().sum()


def _kl_gauss_wishart(params, prior, covariance_type):
    """sum_k KL(q(mu_k, Lambda_k) || p(mu_k, Lambda_k)) for Gauss-Wishart factors ([Bruno]_ eqs. 1.68, 1.71)."""
    d = params.scaled_mean.shape[1]
    nu, beta = params.degrees_of_freedom, params.mean_precision
    nu0, beta0 = prior.degrees_of_freedom, prior.mean_precision
    means, scale_inverse = moment_parameters(params, covariance_type)
    mean0, scale_inverse0 = moment_parameters(prior, covariance_type)
    _, prec_chol = covariance_cholesky(scale_inverse, nu, covariance_type)
    nu_w = prec_chol @ prec_chol.mT if covariance_type == "full" else prec_chol.square()  # nu W
    log_det_w = 2 * _log_det_cholesky(prec_chol, covariance_type) - d * nu.log()
    if covariance_type == "full":
        log_det_w0 = -torch.linalg.slogdet(scale_inverse0)[1]
        trace = (scale_inverse0 * nu_w).sum((-2, -1))  # nu tr(W_0^-1 W)
        diff = means - mean0
        quad = torch.einsum("ki,kij,kj->k", diff, nu_w, diff)
    else:
        log_det_w0 = -scale_inverse0.log().sum(-1)
        trace = (scale_inverse0 * nu_w).sum(-1)
        quad = ((means - mean0).square() * nu_w).sum(-1)
    e_log_det = _expected_log_det(nu, log_det_w, d)
    # KL of the Wisharts: E_q[log W(L | W, nu)] - E_q[log W(L | W_0, nu_0)]
    kl_wishart = (_log_wishart_norm(nu, log_det_w, d) - _log_wishart_norm(nu0, log_det_w0, d)
                  + 0.5 * (nu - nu0) * e_log_det - 0.5 * nu * d + 0.5 * trace)
    # E_q(Lambda)[KL(N(m, (beta Lambda)^-1) || N(m_0, (beta_0 Lambda)^-1))]
    kl_gauss = 0.5 * (d * beta0 / beta - d + d * torch.log(beta / beta0) + beta0 * quad)
    return (kl_wishart + kl_gauss).sum()


def _kl_weights(concentration, prior_concentration):
    if concentration.ndim == 1:
        p = torch.distributions.Dirichlet(concentration)
        q = torch.distributions.Dirichlet(prior_concentration)
    else:
        p = torch.distributions.Beta(*concentration)
        q = torch.distributions.Beta(*prior_concentration)
    return torch.distributions.kl_divergence(p, q).sum()


def elbo(X, log_resp, params, prior, covariance_type, scale=1.0):
    """The evidence lower bound with all constants ([Bruno]_ eqs. 1.63-1.71).

    ELBO = s sum_n sum_k r_nk (log rho_nk - log r_nk) - KL(q(pi) || p(pi))
    - sum_k KL(q(mu_k, Lambda_k) || p(mu_k, Lambda_k)), with log rho_nk of
    :func:`estimate_log_prob`. With a minibatch and ``scale=N/B`` it is the
    stochastic ELBO of eq. (2.52). Valid for any q: unlike
    :func:`reduced_lower_bound` it does not assume the global factors are at
    their CAVI optimum.

    Parameters
    ----------
    X : torch.Tensor of shape (n, D)
    log_resp : torch.Tensor of shape (n, K)
    params, prior : NaturalParameters
        q's lambda and the prior zeta.
    covariance_type : {"full", "diag"}
    scale : float, default=1.0

    Returns
    -------
    torch.Tensor, scalar
    """
    weighted = estimate_log_prob(X, params, covariance_type)
    resp = log_resp.exp()
    local = (resp * (weighted - log_resp)).sum()
    return scale * local - _kl_weights(params.concentration, prior.concentration) - _kl_gauss_wishart(
        params, prior, covariance_type)


def predictive_log_density(X, params, covariance_type):
    """log p(x | data) of the Student-t mixture posterior predictive ([Bruno]_ eq. 1.73).

    p(x) = sum_k E[pi_k] St(x | m_k, L_k, nu_k + 1 - D) with precision
    L_k = ((nu_k + 1 - D) beta_k / (1 + beta_k)) W_k (eq. A.27 for St).
    For "diag", W_k is diagonal and the Student-t is multivariate with a
    diagonal scale.

    Parameters
    ----------
    X : torch.Tensor of shape (n, D)
    params : NaturalParameters
    covariance_type : {"full", "diag"}

    Returns
    -------
    torch.Tensor of shape (n,)
    """
    d = X.shape[1]
    means, scale_inverse = moment_parameters(params, covariance_type)
    nu, beta = params.degrees_of_freedom, params.mean_precision
    dof = nu + 1 - d
    # Shape matrix Sigma_k = L_k^-1 = (1 + beta_k) / (dof_k beta_k) W_k^-1.
    factor = (1 + beta) / (dof * beta)
    diff = X.unsqueeze(1) - means
    if covariance_type == "full":
        chol = torch.linalg.cholesky(factor[:, None, None] * scale_inverse)
        z = torch.linalg.solve_triangular(chol.unsqueeze(0), diff.unsqueeze(-1), upper=False).squeeze(-1)
        maha = z.square().sum(-1)
        half_log_det = chol.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    else:
        shape = factor[:, None] * scale_inverse
        maha = (diff.square() / shape).sum(-1)
        half_log_det = 0.5 * shape.log().sum(-1)
    log_t = (torch.lgamma(0.5 * (dof + d)) - torch.lgamma(0.5 * dof) - 0.5 * d * torch.log(dof * math.pi)
             - half_log_det - 0.5 * (dof + d) * torch.log1p(maha / dof))
    return torch.logsumexp(log_t + expected_weights(params.concentration).log(), dim=1)


def robbins_monro_step_size(t, offset, decay):
    """rho_t = (t + omega)^-delta ([Bruno]_ eq. 2.51; [Hoffman2013]_).

    Parameters
    ----------
    t : int
        Step number, counted from 1 (the first step), as scikit-learn's
        ``LatentDirichletAllocation`` counts its minibatch updates.
    offset : float
        omega >= 0 (``learning_offset``).
    decay : float
        delta in (0.5, 1] (``learning_decay``).

    Returns
    -------
    float
        The step, capped at 1.
    """
    return min(1.0, float((t + offset) ** (-decay)))


class AdaptiveStepSize:
    """The adaptive learning rate of [Ranganath2013]_ ([Bruno]_ eqs. 2.55-2.58).

    rho* = gbar^T gbar / hbar with the moving averages
    gbar <- (1 - 1/tau) gbar + g / tau and hbar <- (1 - 1/tau) hbar + g^T g / tau
    of the noisy natural gradient g = lambda_hat - lambda, and the window
    tau <- tau (1 - rho*) + 1. The averages start from the mean over a few
    noisy gradients at the initial parameters (:meth:`initialise`).

    Parameters
    ----------
    tau0 : float
        The initial window tau_0 (>= 1).
    """

    def __init__(self, tau0):
        self.tau = float(tau0)
        self.gbar = None
        self.hbar = None

    @staticmethod
    def flat_gradient(lambda_hat, params):
        """g = lambda_hat - lambda as one vector (eq. 2.44)."""
        return torch.cat([(a - b).reshape(-1) for a, b in zip(lambda_hat, params, strict=True)])

    def initialise(self, gradients):
        """Start gbar and hbar from a list of flat noisy gradients taken at the same parameters."""
        stacked = torch.stack(gradients)
        self.gbar = stacked.mean(0)
        self.hbar = stacked.square().sum(1).mean()

    def step(self, gradient):
        """Update the averages with a flat gradient; return rho* in (0, 1]."""
        if self.gbar is None:
            self.initialise([gradient])
        w = 1.0 / self.tau
        self.gbar = (1 - w) * self.gbar + w * gradient
        self.hbar = (1 - w) * self.hbar + w * gradient.square().sum()
        rho = float(self.gbar.square().sum() / self.hbar) if float(self.hbar) > 0 else 1.0
        rho = min(max(rho, 0.0), 1.0)
        self.tau = self.tau * (1 - rho) + 1
        return rho
