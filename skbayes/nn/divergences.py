r"""Divergences that :mod:`torch.distributions` does not provide: closed forms and estimates from draws.

The KL divergence between two univariate Gaussians is
``torch.distributions.kl_divergence(Normal(...), Normal(...))`` (used by the
mean-field layers, the PBP layer and the VAE). What is left here is

* the KL of a full-covariance Gaussian, stored by its Cholesky factor, to
  the standard normal: the KL term of a whitened sparse GP, which
  ``kl_divergence(MultivariateNormal, MultivariateNormal)`` would compute
  with an extra factorisation of the identity;
* two estimates of KL(q || p) from draws, for implicit posteriors q that
  can be sampled but have no density (:class:`~skbayes.nn.ImplicitLinear`):
  the 1-nearest-neighbour estimator [Wang2009]_ [PerezCruz2008]_ of Bayes by
  Hypernet (:func:`knn_kl`), the KL to a Gaussian prior from the
  Kozachenko-Leonenko entropy estimate [Kozachenko1987]_ and the exact
  cross-entropy (:func:`knn_entropy`, :func:`gaussian_prior_kl_from_draws`),
  and the density-ratio estimate of Bayes by GAN,
  the mean logit of a discriminator trained to tell q's draws from p's
  ([Killingberg2021]_, Proposition 1: :func:`discriminator_kl` and
  :func:`discriminator_loss`; the discriminator itself is
  :class:`skbayes.nn.SliceDiscriminator`).

References
----------
.. [Kullback1951] S. Kullback and R. A. Leibler, "On information and
   sufficiency", Annals of Mathematical Statistics 22(1), 1951.
.. [RW2006] C. E. Rasmussen and C. K. I. Williams, "Gaussian processes for
   machine learning", MIT Press, 2006, appendix A.5 (KL of two Gaussians).
.. [Wang2009] Q. Wang, S. R. Kulkarni and S. Verdú, "Divergence estimation
   for multidimensional densities via k-nearest-neighbor distances", IEEE
   Transactions on Information Theory 55(5), 2009, eq. (5).
.. [PerezCruz2008] F. Pérez-Cruz, "Kullback-Leibler divergence estimation of
   continuous distributions", IEEE ISIT 2008.
.. [Kozachenko1987] L. F. Kozachenko and N. N. Leonenko, "Sample estimate of
   the entropy of a random vector", Problems of Information Transmission
   23(2), 1987; with k = 1 neighbour as in A. Kraskov, H. Stögbauer and
   P. Grassberger, "Estimating mutual information", Physical Review E 69,
   2004, eq. (20).
.. [Killingberg2021] L. Killingberg, "Generative adversarial networks for
   flexible variational posteriors in Bayesian neural networks", MSc
   thesis, NTNU, 2021 (eq. 3.6, Proposition 1, eq. 4.1).
"""

import math

import torch
from torch.nn import functional as F

__all__ = [
    "discriminator_kl", "discriminator_loss", "gaussian_prior_kl_from_draws", "kl_standard_normal_mvn", "knn_entropy",
    "knn_kl",
]

#: Euler-Mascheroni constant, -psi(1).
EULER_GAMMA = 0.5772156649015329


def kl_standard_normal_mvn(mean, scale_tril):
    r"""KL(N(m, L L^T) || N(0, I)) in nats, a scalar.

    .. math::

        \tfrac12 \left(\mathrm{tr}\, S + m^\top m - M - \log\det S\right),
        \qquad S = L L^\top, \quad \log\det S = 2 \textstyle\sum_i \log L_{ii}

    ([RW2006]_, eq. A.23 with a standard-normal second argument).

    Parameters
    ----------
    mean : torch.Tensor of shape (..., M)
        m; leading dimensions index independent Gaussians (e.g. one per
        latent function), whose KLs are summed.
    scale_tril : torch.Tensor of shape (..., M, M)
        L, lower-triangular with a positive diagonal.

    Returns
    -------
    kl : torch.Tensor, scalar
    """
    log_det = 2.0 * scale_tril.diagonal(dim1=-2, dim2=-1).log().sum()
    return 0.5 * (scale_tril.square().sum() + mean.square().sum() - mean.numel() - log_det)


def _min_squared_distance(a, b, exclude_diagonal=False):
    """Squared distance of each row of ``a`` (..., n, d) to its nearest row of ``b`` (..., m, d), shape (..., n).

    The neighbours are found without gradient in O(n m) memory per leading
    index (never the (..., n, m, d) differences); the squared distance to
    them is then differentiable (no sqrt: no infinite gradient at 0).
    """
    b = b.expand(*a.shape[:-2], *b.shape[-2:])
    with torch.no_grad():
        dist = torch.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist")
        if exclude_diagonal:
            dist.diagonal(dim1=-2, dim2=-1).fill_(math.inf)
        index = dist.argmin(dim=-1)
    nearest = torch.gather(b, -2, index.unsqueeze(-1).expand(*index.shape, b.shape[-1]))
    return (a - nearest).square().sum(-1)


def knn_kl(draws, prior_draws):
    r"""1-nearest-neighbour estimate of KL(q || p) from n draws of q and m draws of p.

    .. math::

        \widehat{\mathrm{KL}} = \frac dn \sum_{i=1}^n
            \log\frac{\nu_i}{\rho_i} + \log\frac{m}{n - 1},
        \qquad \rho_i = \min_{j \ne i} \lVert x_i - x_j \rVert, \quad
        \nu_i = \min_j \lVert x_i - y_j \rVert

    ([Wang2009]_, eq. 5 with k = 1; [PerezCruz2008]_), asymptotically
    unbiased and consistent as n, m grow. Killingberg 2021, eq. 3.6 prints
    the constant as ``- log(m / (n - 1))``, a sign slip; it does not change
    gradients. With few draws in many dimensions the estimate is biased
    (low, for the Gaussians of Killingberg 2021, Figure 5.2).

    Parameters
    ----------
    draws : torch.Tensor of shape (..., n, d)
        Draws x_i of q, n >= 2; leading dimensions index independent
        estimates (e.g. the slices of a layer).
    prior_draws : torch.Tensor of shape (..., m, d)
        Draws y_j of p.

    Returns
    -------
    kl : torch.Tensor of shape (...)
        In nats; differentiable in both arguments (the nearest neighbours
        are chosen without gradient). A zero distance is clamped to the
        smallest positive number of the dtype.

    Raises
    ------
    ValueError
        If n < 2 (no nearest neighbour among q's draws).
    """
    n, d = draws.shape[-2], draws.shape[-1]
    if n < 2:
        raise ValueError(f"knn_kl needs at least 2 draws of q; got {n}.")
    m = prior_draws.shape[-2]
    tiny = torch.finfo(draws.dtype).tiny
    log_rho = 0.5 * _min_squared_distance(draws, draws, exclude_diagonal=True).clamp_min(tiny).log()
    log_nu = 0.5 * _min_squared_distance(draws, prior_draws).clamp_min(tiny).log()
    return d * (log_nu - log_rho).mean(dim=-1) + math.log(m / (n - 1))


def knn_entropy(draws, intrinsic_dim=None):
    r"""Kozachenko-Leonenko (1-nearest-neighbour) estimate of the entropy of q from n draws.

    .. math::

        \hat H = \frac kn \sum_{i=1}^n \log \rho_i + \log V_k
                 + \psi(n) - \psi(1),
        \qquad \rho_i = \min_{j \ne i} \lVert x_i - x_j \rVert,
        \quad V_k = \frac{\pi^{k/2}}{\Gamma(k/2 + 1)}

    ([Kozachenko1987]_; Kraskov et al. 2004, eq. 20), with k the dimension of
    q's support. For draws x = g(z) of a generator with noise z of length
    k < d, q lives on a k-dimensional manifold of R^d: its entropy relative
    to the d-dimensional volume is minus infinity, and the nearest-neighbour
    distances scale as n^(-1/k), so k (``intrinsic_dim``) is the dimension
    that makes the estimate consistent on the manifold. With d in its
    place the estimate would reward spreading the draws d / k times more
    strongly than their entropy grows.

    Parameters
    ----------
    draws : torch.Tensor of shape (..., n, d)
        Draws of q, n >= 2; leading dimensions index independent estimates.
    intrinsic_dim : int, optional
        k; default d.

    Returns
    -------
    entropy : torch.Tensor of shape (...)
        In nats; differentiable in ``draws`` (the neighbours are chosen
        without gradient). A zero distance is clamped to the smallest
        positive number of the dtype.

    Raises
    ------
    ValueError
        If n < 2 or ``intrinsic_dim`` is not in [1, d].
    """
    n, d = draws.shape[-2], draws.shape[-1]
    if n < 2:
        raise ValueError(f"knn_entropy needs at least 2 draws; got {n}.")
    k = d if intrinsic_dim is None else int(intrinsic_dim)
    if not 1 <= k <= d:
        raise ValueError(f"intrinsic_dim must lie in [1, {d}]; got {intrinsic_dim}.")
    tiny = torch.finfo(draws.dtype).tiny
    log_rho = 0.5 * _min_squared_distance(draws, draws, exclude_diagonal=True).clamp_min(tiny).log()
    log_unit_ball = 0.5 * k * math.log(math.pi) - math.lgamma(0.5 * k + 1.0)
    digamma_n = float(torch.special.digamma(torch.tensor(float(n), dtype=torch.float64)))
    return k * log_rho.mean(dim=-1) + log_unit_ball + digamma_n + EULER_GAMMA


def gaussian_prior_kl_from_draws(draws, prior_scale, intrinsic_dim=None):
    r"""KL(q || N(0, prior_scale^2 I)) from draws of q: the exact cross-entropy minus :func:`knn_entropy`.

    .. math::

        \widehat{\mathrm{KL}} = \frac1n \sum_{i=1}^n
            \frac{\lVert x_i \rVert^2}{2 s^2} + \frac k2 \log(2 \pi s^2)
            - \hat H_k,

    the Monte-Carlo estimate of -E_q[log p] (exact in expectation) less the
    Kozachenko-Leonenko entropy of :func:`knn_entropy` in k =
    ``intrinsic_dim`` dimensions. With k = d it estimates KL(q || p);
    with k < d (q on a k-dimensional manifold, where the KL is infinite)
    it is the KL on the manifold to a k-dimensional N(0, s^2) that gives
    the same squared norms: zero when q spreads its k directions as the
    prior does. Unlike the two-sample :func:`knn_kl`, whose estimate from a
    few draws in many dimensions keeps falling as q widens past the prior
    (it tends to -d/2 log 2), this one is minimised, in expectation over
    isotropic Gaussian q, at q's width equal to the prior's: its entropy
    part grows as k log(width) and its cross-entropy part as width^2.

    Parameters
    ----------
    draws : torch.Tensor of shape (..., n, d)
        Draws of q, n >= 2.
    prior_scale : float
        s, the prior's standard deviation per coordinate.
    intrinsic_dim : int, optional
        k; default d.

    Returns
    -------
    kl : torch.Tensor of shape (...)
        In nats; differentiable in ``draws``.

    Raises
    ------
    ValueError
        If n < 2 or ``intrinsic_dim`` is not in [1, d] (:func:`knn_entropy`).
    """
    k = draws.shape[-1] if intrinsic_dim is None else int(intrinsic_dim)
    cross_entropy = draws.square().sum(-1).mean(-1) / (2.0 * prior_scale**2) + 0.5 * k * math.log(
        2.0 * math.pi * prior_scale**2)
    return cross_entropy - knn_entropy(draws, intrinsic_dim)


def discriminator_loss(logits_q, logits_p):
    r"""Binary cross-entropy of a discriminator: draws of q labelled 1, draws of p labelled 0.

    .. math::

        \ell(D) = -\mathbb E_{x \sim q}[\log D(x)]
                  - \mathbb E_{x \sim p}[\log(1 - D(x))],
        \qquad D = \sigma(\mathrm{logit})

    ([Killingberg2021]_, Proposition 1 and eq. 4.1; the sentence that
    introduces the proposition swaps p and q). Its minimiser is
    D*(x) = q(x) / (q(x) + p(x)), whose logit is log q(x)/p(x).
    Computed from logits (``binary_cross_entropy_with_logits``).

    Parameters
    ----------
    logits_q : torch.Tensor
        Discriminator logits at draws of q (any shape); mean over entries.
    logits_p : torch.Tensor
        Discriminator logits at draws of p.

    Returns
    -------
    loss : torch.Tensor, scalar
    """
    loss_q = F.binary_cross_entropy_with_logits(logits_q, torch.ones_like(logits_q))
    return loss_q + F.binary_cross_entropy_with_logits(logits_p, torch.zeros_like(logits_p))


def discriminator_kl(logits_q):
    r"""Density-ratio estimate of KL(q || p): the mean discriminator logit over draws of q.

    With the optimal discriminator D* of :func:`discriminator_loss`,
    log D*(x) - log(1 - D*(x)) = log q(x)/p(x), so

    .. math::

        \mathrm{KL}(q \,\|\, p) = \mathbb E_{x \sim q}\big[\log D^*(x)
            - \log(1 - D^*(x))\big]

    ([Killingberg2021]_, Proposition 1). With a trained, not optimal,
    discriminator it is an estimate; a single batch of draws may give a
    negative value.

    Parameters
    ----------
    logits_q : torch.Tensor of shape (n_draws, ...)
        Logits at n_draws draws of q.

    Returns
    -------
    kl : torch.Tensor of shape (...)
        One estimate per trailing index (e.g. per slice of a layer), in nats.
    """
    return logits_q.mean(dim=0)
