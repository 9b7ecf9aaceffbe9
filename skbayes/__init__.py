"""skbayes: scikit-learn compatible Bayesian deep learning estimators on PyTorch.

The estimators and the subpackages are imported on first use (PEP 562's
module ``__getattr__``), so that ``import skbayes`` and the ``skbayes``
command's ``--help`` do not pay for importing torch and scikit-learn:
``from skbayes import BayesianMLPRegressor`` imports what that estimator
needs, ``skbayes.inference`` imports the inference subpackage.
"""

from ._lazy import lazy_attributes as _lazy_attributes

__version__ = "0.1.0.dev0"

# public name -> the submodule that defines it
_LAZY_ATTRIBUTES = {
    "BayesianAutoencoder": ".decomposition",
    "BayesianGaussianMixture": ".mixture",
    "BayesianMLPClassifier": ".neural_network",
    "BayesianMLPRegressor": ".neural_network",
    "CalibratedRegressorCV": ".calibration",
    "DeepGPRegressor": ".gaussian_process",
    "DeviceWarning": ".base",
    "PredictiveStackingRegressor": ".ensemble",
    "SparseGPClassifier": ".gaussian_process",
    "SparseGPRegressor": ".gaussian_process",
    "VAE": ".decomposition",
}
_SUBPACKAGES = frozenset({
    "base", "calibration", "callbacks", "datasets", "decomposition", "ensemble", "gaussian_process", "inference",
    "metrics", "mixture", "neural_network", "nn",
})

__all__ = [*_LAZY_ATTRIBUTES, "__version__"]


__getattr__, __dir__ = _lazy_attributes(__name__, _LAZY_ATTRIBUTES, _SUBPACKAGES)
