"""Pure-PyTorch building blocks of the skbayes estimators.

Nothing in this sub-package imports scikit-learn: the modules take tensors of
documented shapes and implement one piece of math each (a Bayesian layer, a
likelihood, a divergence, an objective, an inference engine), with the paper
and equation cited in their docstrings.
"""

from .divergences import kl_normal_normal
from .ensemble import StackedLinear, StackedMLP
from .kernels import MaternKernel, RBFKernel
from .layers import DropoutLinear, MeanFieldLinear
from .likelihoods import CategoricalLikelihood, GaussianLikelihood
from .mlp import BayesianMLP
from .natural_gradient import NaturalGradient
from .objectives import kl_warmup_weight, negative_elbo
from .pbp import PBPLinear, PBPNetwork, PBPOptimizer
from .sghmc import SGHMC, split_rhat
from .sparse_gp import SVGP
from .vadam import Vadam

__all__ = [
    "BayesianMLP",
    "CategoricalLikelihood",
    "DropoutLinear",
    "GaussianLikelihood",
    "MaternKernel",
    "MeanFieldLinear",
    "NaturalGradient",
    "PBPLinear",
    "PBPNetwork",
    "PBPOptimizer",
    "RBFKernel",
    "SGHMC",
    "SVGP",
    "StackedLinear",
    "StackedMLP",
    "Vadam",
    "kl_normal_normal",
    "kl_warmup_weight",
    "negative_elbo",
    "split_rhat",
]
