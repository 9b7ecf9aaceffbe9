"""Optimisers and samplers: each turns the gradients of a loss into an update of a posterior.

* :mod:`.sghmc`: :class:`SGHMC`, stochastic-gradient Hamiltonian Monte Carlo.
* :mod:`.vadam`: :class:`Vadam`, variational Adam, and its loss :func:`perturbed_nll`.
* :mod:`.natural_gradient`: :class:`NaturalGradient` for a Gaussian q(v) = N(m, L L^T).
* :mod:`.adf`: :class:`PBPOptimizer`, the assumed-density-filtering step of
  probabilistic backpropagation, and its moment-matching updates.
* :mod:`.chain`: :class:`OptimizerChain`, several optimisers driven as one.
* :mod:`.lbfgs`: :class:`LoopLBFGS`, L-BFGS one iteration per step of the training loop.
"""

from .adf import PBPOptimizer, adf_gaussian_update, gamma_moment_update
from .chain import OptimizerChain
from .lbfgs import LoopLBFGS
from .natural_gradient import NaturalGradient, covariance_gradient
from .sghmc import SGHMC
from .vadam import Vadam, perturbed_nll

__all__ = [
    "LoopLBFGS",
    "NaturalGradient",
    "OptimizerChain",
    "PBPOptimizer",
    "SGHMC",
    "Vadam",
    "adf_gaussian_update",
    "covariance_gradient",
    "gamma_moment_update",
    "perturbed_nll",
]
