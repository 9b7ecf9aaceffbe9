r"""Closed-form divergences that :mod:`torch.distributions` does not provide cheaply.

The KL divergence between two univariate Gaussians is
``torch.distributions.kl_divergence(Normal(...), Normal(...))`` (used by the
mean-field layers, the PBP layer and the VAE). What is left here is the KL of
a full-covariance Gaussian, stored by its Cholesky factor, to the standard
normal: the KL term of a whitened sparse GP, which
``kl_divergence(MultivariateNormal, MultivariateNormal)`` would compute with
an extra factorisation of the identity.

References
----------
.. [Kullback1951] S. Kullback and R. A. Leibler, "On information and
   sufficiency", Annals of Mathematical Statistics 22(1), 1951.
.. [RW2006] C. E. Rasmussen and C. K. I. Williams, "Gaussian processes for
   machine learning", MIT Press, 2006, appendix A.5 (KL of two Gaussians).
"""

__all__ = ["kl_standard_normal_mvn"]


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
