"""Variational posteriors that are not networks' (the GP engines are in :mod:`skbayes.nn.gp`).

* :mod:`.gaussian_mixture`: the conjugate Bayesian Gaussian mixture in
  natural parameters: CAVI, the SVI blend, the ELBO and the Student-t
  predictive.
* :mod:`.scale_tril`: the raw storage of q's Cholesky factor,
  :func:`scale_tril_from_raw` and :func:`raw_from_scale_tril`.
"""

from . import gaussian_mixture
from .scale_tril import raw_from_scale_tril, scale_tril_from_raw

__all__ = ["gaussian_mixture", "raw_from_scale_tril", "scale_tril_from_raw"]
