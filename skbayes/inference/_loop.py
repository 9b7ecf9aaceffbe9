"""The settings of the gradient loop that an inference object owns: constraints and docstring entries, written once.

An inference method trained by the shared loop (``skbayes._training.fit_loop``)
holds its step size and its stopping rule itself, so that the estimator
carries no setting that its default method ignores. The Bayesian MLPs'
gradient-trained methods declare ``**ADAM_CONSTRAINTS, **STOPPING_CONSTRAINTS``
and are decorated with :func:`method_doc`; the estimator reads them through
:meth:`~skbayes.inference.InferenceMethod.stopping_rule`. The Gaussian
processes' variational fit declares ``**LOOP_CONSTRAINTS`` (built from the same
entries), documents them with the ``%(loop_parameters)s`` entry of
:data:`LOOP_PARAMETERS_DOC` (through :func:`skbayes._docstrings.fill_doc`), and
returns them to the estimator's ``_loop_settings`` hook with :func:`loop_settings`.

The methods whose fitted network has no finite set of members (it draws its
weights at prediction, see ``_draw_parameters`` of the Bayesian MLPs) also hold
the number of those draws, ``n_mc_predict``: they declare
``**PREDICT_CONSTRAINTS`` and place the ``%(predict_parameters)s`` entry that
:func:`method_doc` fills. The methods with members (``SGHMC``'s kept samples,
``DeepEnsemble``) predict with all of them and have no such setting.
"""

import inspect
from numbers import Integral, Real

from .._docstrings import fill_doc
from .._param_validation import EARLY_STOPPING_CONSTRAINTS, TRAINING_CONSTRAINTS, Interval, StrOptions

__all__ = [
    "ADAM_CONSTRAINTS",
    "LOOP_CONSTRAINTS",
    "LOOP_PARAMETERS_DOC",
    "PREDICT_CONSTRAINTS",
    "STOPPING_CONSTRAINTS",
    "loop_settings",
    "method_doc",
]

# The settings of the Bayesian MLPs' methods trained by Adam in the estimators' shared loop,
# documented and validated once; each method lists them in its own signature
# (scikit-learn reads the parameters from ``__init__``).
ADAM_CONSTRAINTS = {
    "learning_rate_init": TRAINING_CONSTRAINTS["learning_rate_init"],
    "beta_1": [Interval(Real, 0, 1, closed="left")],
    "beta_2": [Interval(Real, 0, 1, closed="left")],
}
STOPPING_CONSTRAINTS = {
    "max_iter": TRAINING_CONSTRAINTS["max_iter"],
    "early_stopping": [*EARLY_STOPPING_CONSTRAINTS["early_stopping"], StrOptions({"auto"})],
    "validation_fraction": EARLY_STOPPING_CONSTRAINTS["validation_fraction"],
    "n_iter_no_change": [*TRAINING_CONSTRAINTS["n_iter_no_change"], StrOptions({"auto"})],
    "tol": TRAINING_CONSTRAINTS["tol"],
}

# The weight draws of the methods that draw weights at prediction (their network has no finite set of
# members), validated and documented once; each such method lists ``n_mc_predict=100`` in its signature.
PREDICT_CONSTRAINTS = {"n_mc_predict": [Interval(Integral, 1, None, closed="left")]}

# The variational methods' per-layer prior scale (skbayes.nn.functional.layer_prior_scale), validated and
# documented once; each such method lists ``prior_scaling`` in its signature with the default measured for it.
PRIOR_SCALING_CONSTRAINTS = {"prior_scaling": [StrOptions({"fan_in"}), None]}


def same_prior_scaling(method, network):
    """Whether a fitted MLP ``network`` has the per-layer prior that ``method`` would build (for a warm start).

    A network that does not record its ``prior_scaling`` (a torch module's, whose warm start compares all the
    method's parameters, or one fitted before the parameter existed: the fixed prior) counts as None.
    """
    return getattr(network, "prior_scaling", None) == getattr(method, "prior_scaling", None)

_LOOP_DOC = {
    "adam_parameters": """\
learning_rate_init : float, default=3e-3
    Step size of Adam.
beta_1, beta_2 : float in [0, 1), default=0.9, 0.999
    Decay rates of Adam's first and second moment estimates.""",
    "stopping_parameters": """\
max_iter : int, default=%(max_iter_default)s
    Maximum number of epochs (%(epoch)s).
early_stopping : bool or "auto", default=%(early_stopping_default)s
    Stop on the mean log predictive density of held-out rows and restore
    the best weights; otherwise stop on the training loss. ``"auto"``:
    True for classification, False for regression.
validation_fraction : float in (0, 1), default=0.1
    Fraction of rows held out when ``early_stopping``.
n_iter_no_change : int or "auto", default="auto"
    Epochs without an improvement of at least ``tol`` before stopping;
    ``"auto"``: 10 for classification, 50 for regression.
tol : float, default=1e-4
    Minimum improvement of the per-datum loss (or validation score).""",
    "prior_scaling_parameter": """\
prior_scaling : {"fan_in"} or None, default=%(prior_scaling_default)s
    The prior of the weights and biases of a layer with ``fan_in`` inputs:
    N(0, prior_scale^2 / fan_in) (``"fan_in"``, Neal 1996's scaling: the
    prior over functions stays the same when the layers widen), or
    N(0, prior_scale^2) whatever the width (None, the prior of the
    sampling methods and the ensembles). The default is the one measured
    best for the method on the small sets and UCI splits of
    ``examples/benchmarks/vi_defaults.py`` (doc/defaults.md, "The
    variational methods' defaults").""",
    "predict_parameters": """\
n_mc_predict : int, default=100
    Monte-Carlo weight draws from the fitted posterior averaged at
    prediction (``predict``, ``predict_proba``, ``predict_uncertainty``,
    ``predict_quantiles``, ``log_predictive_density``): one forward pass
    per draw, the draws shared by all rows. The validation score of
    ``early_stopping`` uses min(n_mc_predict, 20) of them. A fitted
    estimator reads it from its fitted copy of the method (``inference_``):
    to change it without refitting, set it there
    (``model.inference_.set_params(n_mc_predict=500)``).""",
}


def method_doc(epoch="passes over the training rows"):
    """Class decorator inserting the loop settings' entries into an inference method's docstring.

    ``%(adam_parameters)s``, ``%(stopping_parameters)s``,
    ``%(predict_parameters)s`` and ``%(prior_scaling_parameter)s`` are replaced;
    the defaults of ``max_iter``, ``early_stopping`` and ``prior_scaling`` are read from the class's signature and
    ``epoch`` says what one iteration is.
    """

    def decorate(cls):
        parameters = inspect.signature(cls.__init__).parameters
        max_iter = parameters["max_iter"].default
        prior_scaling = parameters["prior_scaling"].default if "prior_scaling" in parameters else None
        prior_scaling_default = "None" if prior_scaling is None else f'"{prior_scaling}"'
        return fill_doc(
            **_LOOP_DOC, max_iter_default=repr(max_iter), prior_scaling_default=prior_scaling_default, epoch=epoch,
            early_stopping_default=repr(parameters["early_stopping"].default).replace("'", '"'),
        )(cls)

    return decorate


#: Constraints of the Gaussian processes' variational fit: ``learning_rate_init``, ``max_iter``
#: (an int, or ``"auto"`` for the estimator's epoch and step budget), ``tol`` and ``n_iter_no_change``.
LOOP_CONSTRAINTS = {
    "learning_rate_init": ADAM_CONSTRAINTS["learning_rate_init"],
    "max_iter": [*STOPPING_CONSTRAINTS["max_iter"], StrOptions({"auto"})],
    "tol": STOPPING_CONSTRAINTS["tol"],
    "n_iter_no_change": [*TRAINING_CONSTRAINTS["n_iter_no_change"], StrOptions({"auto"})],
}

#: Optimiser steps that the GPs' ``n_iter_no_change="auto"`` waits at least, and its epochs at least.
GP_PATIENCE_STEPS, GP_PATIENCE_EPOCHS = 200, 20

#: Numpydoc entries of the four loop parameters; fill ``learning_rate_init_default``,
#: ``tol_default`` and ``n_iter_no_change_default`` with :func:`skbayes._docstrings.fill_doc`.
LOOP_PARAMETERS_DOC = {
    "loop_parameters": """\
learning_rate_init : float, default=%(learning_rate_init_default)s
    Step size of Adam.
%(max_iter_auto)s
tol : float, default=%(tol_default)s
    Minimum improvement of the per-datum epoch loss that resets the
    ``n_iter_no_change`` counter.
n_iter_no_change : int or "auto", default="auto"
    Epochs without an improvement of at least ``tol`` before stopping.
    ``"auto"``: 20 epochs, or as many as make 200 optimiser steps when an
    epoch has fewer than 10 (a small set is one full-batch step per
    epoch). The fit starts at the optimal q(u) for the initial
    hyperparameters, and Adam's first steps move every coordinate by about
    ``learning_rate_init`` whatever its gradient, so the loss first rises;
    20 steps of patience ended such fits in that rise (after 22 epochs)
    far from the optimum.""",
}


def loop_settings(method, classification=False):
    """``max_iter``, ``tol`` and ``n_iter_no_change`` of ``method``, the dict of the estimators' ``_loop_settings``.

    Read from the method's own parameters; a setting it lacks is None
    (``tol``: 1e-4), and ``n_iter_no_change="auto"`` is 10 for
    classification, 50 for regression (``classification``).
    """
    params = method.get_params(deep=False)
    n_iter_no_change = params.get("n_iter_no_change")
    if n_iter_no_change == "auto":
        n_iter_no_change = 10 if classification else 50
    return {"max_iter": params.get("max_iter"), "tol": params.get("tol", 1e-4), "n_iter_no_change": n_iter_no_change}
