"""Inference methods of the Bayesian MLPs, as parameter objects.

Pass one to ``BayesianMLPRegressor(inference=...)`` or
``BayesianMLPClassifier(inference=...)``, the way
``GaussianProcessRegressor`` takes ``kernel=RBF()``; the strings ``"mfvi"``,
``"mc_dropout"``, ``"pbp"``, ``"vadam"``, ``"sghmc"``, ``"ensemble"``, ``"whvi"``,
``"mnf"``, ``"laplace"``, ``"swag"``, ``"bbvi"``, ``"bbh"`` (Bayes by Hypernet) and ``"bbg"`` (Bayes by GAN) are
aliases of the default-configured objects. Each object holds the settings
of its own method only, is cloned and grid-searched like any estimator
(``inference__burn_in``), and never changes when the estimator is fitted.
Each estimator documents its own default: ``BayesianMLPRegressor``'s is
``SGHMC()``, chosen by measurement on the UCI regression benchmark
(``doc/defaults.md``); ``doc/inference_methods.md`` compares all of them.
``doc/adding_an_inference_method.md`` shows how to write a new one.

The Gaussian-process estimators take their own objects:
:class:`SparseVariational` (their default, ``inference="variational"``) and
:class:`SampledSparseGP` (``inference="sghmc"``: SGHMC, or another method that
can sample GPs, after a variational start); their aliases are
:data:`GP_ALIASES`, not :data:`ALIASES`.
"""

from ._base import FitContext, InferenceMethod, ModelSettings, Training
from ._bbvi import BlackBoxVI
from ._dsw_prior import DSWPrior
from ._ensemble import DeepEnsemble
from ._gan import BayesByGAN
from ._gp import GP_ALIASES, SampledSparseGP, SparseVariational, resolve_gp_inference
from ._gpi_prior import GPInducedPrior
from ._hypernet import BayesByHypernet
from ._laplace import Laplace
from ._mnf import MNF
from ._pbp import PBP
from ._sghmc import SGHMC
from ._swag import SWAG
from ._vadam import Vadam
from ._variational import MCDropout, MeanFieldVI
from ._whvi import WHVI

__all__ = [
    "ALIASES",
    "BayesByGAN",
    "BayesByHypernet",
    "BlackBoxVI",
    "DSWPrior",
    "DeepEnsemble",
    "FitContext",
    "GP_ALIASES",
    "GPInducedPrior",
    "InferenceMethod",
    "Laplace",
    "MCDropout",
    "MNF",
    "MeanFieldVI",
    "ModelSettings",
    "PBP",
    "SGHMC",
    "SWAG",
    "SampledSparseGP",
    "SparseVariational",
    "Training",
    "Vadam",
    "WHVI",
    "resolve_gp_inference",
    "resolve_inference",
]

#: The string aliases of ``inference=`` and the class each stands for.
ALIASES = {
    "mfvi": MeanFieldVI,
    "mc_dropout": MCDropout,
    "pbp": PBP,
    "vadam": Vadam,
    "sghmc": SGHMC,
    "ensemble": DeepEnsemble,
    "whvi": WHVI,
    "bbh": BayesByHypernet,
    "bbg": BayesByGAN,
    "mnf": MNF,
    "laplace": Laplace,
    "swag": SWAG,
    "bbvi": BlackBoxVI,
}


def resolve_inference(inference):
    """The inference method an estimator's ``inference`` parameter stands for.

    Parameters
    ----------
    inference : str or InferenceMethod
        A key of :data:`ALIASES` or a method object.

    Returns
    -------
    method : InferenceMethod
        A fresh default object for an alias, else an unfitted clone of
        ``inference`` with its parameters validated (the estimator never
        changes the object it was given).

    Raises
    ------
    ValueError
        On an unknown alias or an invalid parameter of the method.
    """
    from sklearn.base import clone

    if isinstance(inference, str):
        try:
            return ALIASES[inference]()
        except KeyError:
            raise ValueError(f"Unknown inference {inference!r}; choose one of {sorted(ALIASES)}.") from None
    method = clone(inference)
    method._validate_params()
    return method
