"""Gaussian processes: covariance functions and the sparse, deep and sampled GP engines.

=========================  ===============================================
``kernels.py``             covariance functions (RBF, Matérn, sums and
                           products, ...) with positive hyperparameters
``svgp.py``                :class:`SVGP`, the sparse variational GP with a
                           whitened q(u), and its training :data:`OBJECTIVES`
``deep_gp.py``             :class:`DeepGP`, SVGP layers trained by doubly
                           stochastic VI, and :func:`linear_mean_weights`
``bayesian_sparse_gp.py``  the sampled sparse GP (BSGP): energy, priors,
                           kept states and the predictive mixture
=========================  ===============================================
"""

from .bayesian_sparse_gp import KeptStates, SparseGPPriors
from .deep_gp import DeepGP, linear_mean_weights
from .svgp import OBJECTIVES, SVGP

__all__ = ["OBJECTIVES", "SVGP", "DeepGP", "KeptStates", "SparseGPPriors", "linear_mean_weights"]
