"""Raw storage of a Cholesky factor: the parameterisation of a Gaussian q(v) = N(m, L L^T).

L is lower-triangular with a positive diagonal; it is stored as a raw square
matrix whose strict lower triangle is that of L and whose diagonal is
softplus^{-1} of L's, so that an optimiser works on unconstrained values
(the whitened q(u) of :class:`~skbayes.nn.gp.SVGP` and the
:class:`~skbayes.nn.optim.NaturalGradient` steps on it; [Hensman2015]_,
section 3).

References
----------
.. [Hensman2015] J. Hensman, A. G. de G. Matthews, M. Filippone and
   Z. Ghahramani, "MCMC for variationally sparse Gaussian processes",
   NeurIPS 2015.
"""

import torch
from torch.nn import functional as F

from ..functional import inverse_softplus

__all__ = ["raw_from_scale_tril", "scale_tril_from_raw"]


def scale_tril_from_raw(raw):
    """L from its raw storage: strict lower triangle as is, softplus of the diagonal.

    Parameters
    ----------
    raw : torch.Tensor of shape (..., M, M)
        The upper triangle is ignored; leading dimensions are a batch.

    Returns
    -------
    scale_tril : torch.Tensor of shape (..., M, M)
        Lower-triangular with a positive diagonal.
    """
    return torch.tril(raw, -1) + torch.diag_embed(F.softplus(raw.diagonal(dim1=-2, dim2=-1)))


def raw_from_scale_tril(scale_tril):
    """Inverse of :func:`scale_tril_from_raw` (upper triangle set to 0).

    Parameters
    ----------
    scale_tril : torch.Tensor of shape (..., M, M)
        Lower-triangular with a positive diagonal.

    Returns
    -------
    raw : torch.Tensor of shape (..., M, M)
    """
    raw = torch.tril(scale_tril, -1)
    raw.diagonal(dim1=-2, dim2=-1).copy_(
        inverse_softplus(scale_tril.diagonal(dim1=-2, dim2=-1).double()).to(raw.dtype)
    )
    return raw
