"""skbayes: scikit-learn compatible Bayesian deep learning estimators on PyTorch."""

from .base import DeviceWarning
from .calibration import CalibratedRegressorCV
from .decomposition import VAE, BayesianAutoencoder
from .ensemble import PredictiveStackingRegressor
from .gaussian_process import DeepGPRegressor, SparseGPClassifier, SparseGPRegressor
from .mixture import BayesianGaussianMixture
from .neural_network import BayesianMLPClassifier, BayesianMLPRegressor

__version__ = "0.1.0.dev0"

__all__ = [
    "BayesianAutoencoder",
    "BayesianGaussianMixture",
    "BayesianMLPClassifier",
    "BayesianMLPRegressor",
    "CalibratedRegressorCV",
    "DeepGPRegressor",
    "DeviceWarning",
    "PredictiveStackingRegressor",
    "SparseGPClassifier",
    "SparseGPRegressor",
    "VAE",
    "__version__",
]
