"""skbayes: scikit-learn compatible Bayesian deep learning estimators on PyTorch.

The estimators and the subpackages are imported on first use (PEP 562's
module ``__getattr__``), so that ``import skbayes`` and the ``skbayes``
command's ``--help`` do not pay for importing torch and scikit-learn:
``from skbayes import BayesianMLPRegressor`` imports what that estimator
needs, ``skbayes.inference`` imports the inference subpackage.
"""

import importlib

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


def __getattr__(name):
    if name in _LAZY_ATTRIBUTES:
        value = getattr(importlib.import_module(_LAZY_ATTRIBUTES[name], __name__), name)
    elif name in _SUBPACKAGES:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__) | _SUBPACKAGES)
