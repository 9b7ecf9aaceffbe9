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
``likelihoods/``           observation models p(y | f), one file each
``objectives.py``          minibatch negative ELBO, KL warm-up
``diagnostics.py``         split R-hat of MCMC chains
``flows.py``               normalising flows (planar, RealNVP coupling)
``laplace.py``             last-layer Laplace posterior and its evidence
``ggn.py``                 an MLP's Gauss-Newton matrix (diag, KFAC, full) and
                           its Laplace posterior over all weights
``swag.py``                SWAG moments of the iterates and their Gaussian
``bbvi.py``                black-box VI: full-rank and low-rank Gaussian
                           families, the score-function gradient
``init/``                  initialisations of a mean-field posterior (I-BLM,
                           the data-independent ones)
``layers/``                linear layers, one file per posterior; drop-in
                           convolution, LSTM, GRU and embedding layers and
                           their noise protocol (``noise_context``)
``networks/``              MLPs, stacked MLPs, PBP network, VAE (MLP or
                           conv), any torch module (``BayesianModuleNetwork``)
``gp/``                    covariance functions; sparse variational, deep
                           and sampled sparse GP engines
``variational/``           the Gaussian mixture's conjugate updates; the
                           storage of a Cholesky factor
``priors/``                log-densities of the Bayesian sparse GP priors;
                           GP-induced weight priors fitted by Wasserstein
``optim/``                 SGHMC, Vadam, natural gradient, ADF, chain
=========================  ===============================================
"""

from .gp import OBJECTIVES, SVGP, DeepGP, KeptStates, SparseGPPriors, linear_mean_weights
from .diagnostics import rank_normalized_split_rhat, split_rhat
from .divergences import (
    discriminator_kl, discriminator_loss, gaussian_prior_kl_from_draws, kl_standard_normal_mvn, knn_entropy, knn_kl,
)
from .flows import AffineCoupling, FlowSequence, PlanarFlow, make_flow
from .priors import LayerFlowPrior, LayerGaussianPrior, LayerInverseGammaPrior, WassersteinCritic, fit_functional_prior
from .functional import ACTIVATIONS, LOG_2PI, gaussian_log_prob, inverse_softplus, relu_moments, uniform_init
from .init import INITIALIZATIONS, MODULE_INITIALIZATIONS, blr_mean_field, iblm_init, iblm_init_module
from .gp.kernels import (
    BoundedPositive,
    ConstantKernel,
    DotProduct,
    HalfIntegerMatern,
    MaternKernel,
    Periodic,
    ProductKernel,
    RationalQuadratic,
    RBFKernel,
    SquaredExponential,
    SumKernel,
    WhiteNoise,
    half_integer_matern,
)
from .layers import (
    DropoutLinear,
    EmbeddingDropout,
    ImplicitLinear,
    MeanFieldConv2d,
    MCDropoutLayer,
    MeanFieldLinear,
    MNFConv2d,
    MNFLinear,
    PBPLinear,
    StackedLinear,
    StochasticLayer,
    VariationalGRU,
    VariationalLSTM,
    WHVILinear,
    gaussian_weight_draws,
    local_reparameterization,
    noise_context,
    parameters_from_slices,
    whvi_dimensions,
)
from .likelihoods import (
    BernoulliLikelihood,
    BinaryLikelihood,
    CategoricalLikelihood,
    ContinuousBernoulliLikelihood,
    GaussianLikelihood,
    HeteroscedasticGaussianLikelihood,
    RegressionLikelihood,
    RobustMaxLikelihood,
    SoftmaxLikelihood,
    StudentTLikelihood,
    gauss_hermite,
)
from .linalg import cholesky, fast_walsh_hadamard
from .networks import (
    MLP,
    BayesianLayerStack,
    BayesianMLP,
    ConvDecoder,
    ConvEncoder,
    ImplicitMLP,
    MNFMLP,
    ModuleDecoder,
    ModuleEncoder,
    PBPNetwork,
    RowMoments,
    SliceDiscriminator,
    StackedMLP,
    VAEModule,
    WHVIMLP,
    forward_with_parameters,
)
from .objectives import kl_warmup_weight, negative_elbo
from .optim import (
    SGHMC,
    LoopLBFGS,
    NaturalGradient,
    OptimizerChain,
    PBPOptimizer,
    Vadam,
    adf_gaussian_update,
    covariance_gradient,
    gamma_moment_update,
    perturbed_nll,
)
from .variational import raw_from_scale_tril, scale_tril_from_raw

__all__ = [
    "ACTIVATIONS",
    "INITIALIZATIONS",
    "LOG_2PI",
    "MLP",
    "MODULE_INITIALIZATIONS",
    "OBJECTIVES",
    "SGHMC",
    "SVGP",
    "AffineCoupling",
    "BayesianLayerStack",
    "BayesianMLP",
    "BernoulliLikelihood",
    "BinaryLikelihood",
    "BoundedPositive",
    "CategoricalLikelihood",
    "ContinuousBernoulliLikelihood",
    "ConstantKernel",
    "ConvDecoder",
    "ConvEncoder",
    "DeepGP",
    "DotProduct",
    "DropoutLinear",
    "EmbeddingDropout",
    "FlowSequence",
    "GaussianLikelihood",
    "HalfIntegerMatern",
    "HeteroscedasticGaussianLikelihood",
    "ImplicitLinear",
    "ImplicitMLP",
    "KeptStates",
    "LayerFlowPrior",
    "LayerGaussianPrior",
    "LayerInverseGammaPrior",
    "MCDropoutLayer",
    "MaternKernel",
    "MeanFieldConv2d",
    "MeanFieldLinear",
    "MNFConv2d",
    "MNFLinear",
    "MNFMLP",
    "ModuleDecoder",
    "ModuleEncoder",
    "LoopLBFGS",
    "NaturalGradient",
    "OptimizerChain",
    "PBPLinear",
    "PBPNetwork",
    "PBPOptimizer",
    "Periodic",
    "PlanarFlow",
    "ProductKernel",
    "RBFKernel",
    "RationalQuadratic",
    "RegressionLikelihood",
    "RobustMaxLikelihood",
    "RowMoments",
    "SliceDiscriminator",
    "SoftmaxLikelihood",
    "SquaredExponential",
    "StackedLinear",
    "SparseGPPriors",
    "StackedMLP",
    "StochasticLayer",
    "StudentTLikelihood",
    "SumKernel",
    "VAEModule",
    "Vadam",
    "VariationalGRU",
    "VariationalLSTM",
    "WassersteinCritic",
    "WHVILinear",
    "WHVIMLP",
    "WhiteNoise",
    "adf_gaussian_update",
    "blr_mean_field",
    "cholesky",
    "discriminator_kl",
    "discriminator_loss",
    "fit_functional_prior",
    "fast_walsh_hadamard",
    "covariance_gradient",
    "forward_with_parameters",
    "gamma_moment_update",
    "gaussian_log_prob",
    "gauss_hermite",
    "gaussian_weight_draws",
    "half_integer_matern",
    "iblm_init",
    "iblm_init_module",
    "inverse_softplus",
    "kl_standard_normal_mvn",
    "kl_warmup_weight",
    "knn_entropy",
    "knn_kl",
    "gaussian_prior_kl_from_draws",
    "linear_mean_weights",
    "local_reparameterization",
    "make_flow",
    "negative_elbo",
    "noise_context",
    "parameters_from_slices",
    "perturbed_nll",
    "raw_from_scale_tril",
    "relu_moments",
    "scale_tril_from_raw",
    "rank_normalized_split_rhat",
    "split_rhat",
    "uniform_init",
    "whvi_dimensions",
]
