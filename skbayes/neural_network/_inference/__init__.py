"""Inference methods of the Bayesian MLPs, one small adapter module each.

An estimator selects a method by name (its ``inference`` parameter); the
method builds the network, trains it through the shared training loop and
leaves a network that the shared prediction code samples from. The math of
each method lives in :mod:`skbayes.nn`.
"""

from importlib import import_module

__all__ = ["INFERENCE_METHODS", "get_inference_method"]

# name -> "module:class", imported on first use.
INFERENCE_METHODS = {
    "mfvi": "._variational:MeanFieldVI",
    "mc_dropout": "._variational:MCDropout",
    "pbp": "._pbp:ProbabilisticBackpropagation",
    "vadam": "._vadam:VariationalAdam",
    "sghmc": "._sghmc:SGHMCSampler",
    "ensemble": "._ensemble:DeepEnsemble",
}


def get_inference_method(name):
    """The :class:`~._base.InferenceMethod` subclass registered as ``name``."""
    try:
        target = INFERENCE_METHODS[name]
    except KeyError:
        raise ValueError(f"Unknown inference {name!r}; choose one of {sorted(INFERENCE_METHODS)}.") from None
    module, cls = target.split(":")
    return getattr(import_module(module, __name__), cls)
