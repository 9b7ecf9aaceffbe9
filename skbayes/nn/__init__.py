"""Pure-PyTorch building blocks of the skbayes estimators.

Nothing in this sub-package imports scikit-learn: the modules take tensors of
documented shapes and implement one piece of math each (a Bayesian layer, a
likelihood, a divergence, an objective), with the paper and equation cited in
their docstrings.
"""

from .divergences import kl_normal_normal
from .kernels import MaternKernel, RBFKernel
from .layers import DropoutLinear, MeanFieldLinear
from .likelihoods import CategoricalLikelihood, GaussianLikelihood
from .mlp import BayesianMLP
from .objectives import kl_warmup_weight, negative_elbo
from .sparse_gp import SVGP

__all__ = [
    "BayesianMLP",
    "CategoricalLikelihood",
    "DropoutLinear",
    "GaussianLikelihood",
    "MaternKernel",
    "MeanFieldLinear",
    "RBFKernel",
    "SVGP",
    "kl_normal_normal",
    "kl_warmup_weight",
    "negative_elbo",
]
