"""Variational Gaussian processes.

* :mod:`.svgp`: :class:`SVGP`, the sparse variational GP with a whitened q(u),
  and its training :data:`OBJECTIVES`.
* :mod:`.deep_gp`: :class:`DeepGP`, a deep GP of SVGP layers trained by
  doubly stochastic variational inference, and :func:`linear_mean_weights`.
* :mod:`.gaussian_mixture`: the conjugate Bayesian Gaussian mixture in
  natural parameters: CAVI, the SVI blend, the ELBO and the Student-t
  predictive.
* :mod:`.scale_tril`: the raw storage of q's Cholesky factor,
  :func:`scale_tril_from_raw` and :func:`raw_from_scale_tril`.
"""

from . import gaussian_mixture
from .deep_gp import DeepGP, linear_mean_weights
from .scale_tril import raw_from_scale_tril, scale_tril_from_raw
from .svgp import OBJECTIVES, SVGP

__all__ = ["OBJECTIVES", "gaussian_mixture", "SVGP", "DeepGP", "linear_mean_weights", "raw_from_scale_tril", "scale_tril_from_raw"]
