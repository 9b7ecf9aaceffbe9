"""Priors: the log-densities of the sampled sparse GP's priors, and the GP-induced weight priors of the MLPs.

=========================  ===============================================
``gaussian_process.py``    log-densities of the Bayesian sparse GP priors
                           (log-normal hyperparameters, DPP inducing inputs)
``functional.py``          GP-induced weight priors fitted by Wasserstein
                           distance (Tran et al. 2022; Rossi 2022, ch. 5)
``sliced.py``              priors fitted by the distributional sliced
                           Wasserstein distance to the data (ch. 5.5-5.6)
=========================  ===============================================
"""

from .functional import (
    FrozenLayerFlow,
    LayerFlow,
    LayerFlowPrior,
    LayerGaussianPrior,
    LayerInverseGammaPrior,
    WassersteinCritic,
    critic_loss,
    fit_functional_prior,
    gp_function_draws,
    gradient_penalty,
    inverse_gamma_conditional,
    seeded,
)
from .sliced import SlicePushforward, distributional_sliced_wasserstein, fit_dsw_prior, sliced_wasserstein
from .gaussian_process import dpp_log_prob, log_normal_log_prob, log_normal_raw_log_prob, standard_normal_log_prob

__all__ = [
    "FrozenLayerFlow",
    "LayerFlow",
    "LayerFlowPrior",
    "LayerGaussianPrior",
    "LayerInverseGammaPrior",
    "SlicePushforward",
    "WassersteinCritic",
    "critic_loss",
    "distributional_sliced_wasserstein",
    "dpp_log_prob",
    "fit_dsw_prior",
    "fit_functional_prior",
    "gp_function_draws",
    "gradient_penalty",
    "inverse_gamma_conditional",
    "log_normal_log_prob",
    "log_normal_raw_log_prob",
    "seeded",
    "sliced_wasserstein",
    "standard_normal_log_prob",
]
