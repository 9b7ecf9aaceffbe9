"""Pure-PyTorch building blocks of the skbayes estimators.

Nothing in this sub-package imports scikit-learn: the modules take tensors of
documented shapes and implement one piece of math each (a Bayesian layer, a
likelihood, a divergence, an objective), with the paper and equation cited in
their docstrings.
"""

from .divergences import kl_normal_normal
from .layers import DropoutLinear, MeanFieldLinear
from .likelihoods import CategoricalLikelihood, GaussianLikelihood
from .mlp import BayesianMLP
from .objectives import negative_elbo

__all__ = [
    "BayesianMLP",
    "CategoricalLikelihood",
    "DropoutLinear",
    "GaussianLikelihood",
    "MeanFieldLinear",
    "kl_normal_normal",
    "negative_elbo",
]
