"""Variational Gaussian processes.

* :mod:`.svgp`: :class:`SVGP`, the sparse variational GP with a whitened q(u),
  and its training :data:`OBJECTIVES`.
* :mod:`.scale_tril`: the raw storage of q's Cholesky factor,
  :func:`scale_tril_from_raw` and :func:`raw_from_scale_tril`.
"""

from .scale_tril import raw_from_scale_tril, scale_tril_from_raw
from .svgp import OBJECTIVES, SVGP

__all__ = ["OBJECTIVES", "SVGP", "raw_from_scale_tril", "scale_tril_from_raw"]
