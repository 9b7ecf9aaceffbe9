"""Pure-PyTorch building blocks of the skbayes estimators.

Nothing in this sub-package imports scikit-learn: the modules take tensors of
documented shapes and implement one piece of math each, with the paper and
equation cited in their docstrings. The files are laid out by role:

=========================  ===============================================
``functional.py``          small pure functions: inverse softplus, Gaussian
                           log-density, initial weights, activations, ReLU
                           moments
``linalg.py``              Cholesky factorisation with jitter
``divergences.py``         KL divergences torch.distributions lacks
``likelihoods.py``         observation models p(y | f)
``objectives.py``          minibatch negative ELBO, KL warm-up
``diagnostics.py``         split R-hat of MCMC chains
``kernels.py``             covariance functions
``init.py``                initialisations of a mean-field posterior
``layers/``                linear layers, one file per posterior
``networks/``              MLPs, stacked MLPs, PBP network, VAE
``variational/``           sparse variational GP
``optim/``                 SGHMC, Vadam, natural gradient, ADF, chain
=========================  ===============================================
"""

from .diagnostics import split_rhat
from .divergences import kl_standard_normal_mvn
from .functional import ACTIVATIONS, LOG_2PI, gaussian_log_prob, inverse_softplus, relu_moments, uniform_init
from .init import INITIALIZATIONS, blr_mean_field, iblm_init
from .kernels import MaternKernel, RBFKernel
from .layers import (
    DropoutLinear,
    MeanFieldLinear,
    PBPLinear,
    StackedLinear,
    gaussian_weight_draws,
    local_reparameterization,
)
from .likelihoods import (
    BernoulliLikelihood,
    BinaryLikelihood,
    CategoricalLikelihood,
    GaussianLikelihood,
    RobustMaxLikelihood,
    SoftmaxLikelihood,
    gauss_hermite,
)
from .linalg import cholesky
from .networks import (
    MLP,
    BayesianLayerStack,
    BayesianMLP,
    PBPNetwork,
    RowMoments,
    StackedMLP,
    VAEModule,
    forward_with_parameters,
)
from .objectives import kl_warmup_weight, negative_elbo
from .optim import (
    SGHMC,
    NaturalGradient,
    OptimizerChain,
    PBPOptimizer,
    Vadam,
    adf_gaussian_update,
    covariance_gradient,
    gamma_moment_update,
    perturbed_nll,
)
from .variational import OBJECTIVES, SVGP, raw_from_scale_tril, scale_tril_from_raw

__all__ = [
    "ACTIVATIONS",
    "INITIALIZATIONS",
    "LOG_2PI",
    "MLP",
    "OBJECTIVES",
    "SGHMC",
    "SVGP",
    "BayesianLayerStack",
    "BayesianMLP",
    "BernoulliLikelihood",
    "BinaryLikelihood",
    "CategoricalLikelihood",
    "DropoutLinear",
    "GaussianLikelihood",
    "MaternKernel",
    "MeanFieldLinear",
    "NaturalGradient",
    "OptimizerChain",
    "PBPLinear",
    "PBPNetwork",
    "PBPOptimizer",
    "RBFKernel",
    "RobustMaxLikelihood",
    "RowMoments",
    "SoftmaxLikelihood",
    "StackedLinear",
    "StackedMLP",
    "VAEModule",
    "Vadam",
    "adf_gaussian_update",
    "blr_mean_field",
    "cholesky",
    "covariance_gradient",
    "forward_with_parameters",
    "gamma_moment_update",
    "gaussian_log_prob",
    "gauss_hermite",
    "gaussian_weight_draws",
    "iblm_init",
    "inverse_softplus",
    "kl_standard_normal_mvn",
    "kl_warmup_weight",
    "local_reparameterization",
    "negative_elbo",
    "perturbed_nll",
    "raw_from_scale_tril",
    "relu_moments",
    "scale_tril_from_raw",
    "split_rhat",
    "uniform_init",
]
