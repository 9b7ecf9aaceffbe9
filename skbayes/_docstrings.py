"""Numpydoc fragments shared by several docstrings, each written once, and the decorator that inserts them.

A docstring names a fragment with a ``%(name)s`` placeholder. :func:`fill_doc`
replaces every placeholder when the module is imported (in a class, in the
docstrings of the class and of its methods) and indents the
continuation lines of the inserted text like the line that holds the
placeholder, so a placeholder alone on its line inserts whole numpydoc
entries at the indentation of its section (4 spaces in a class or module-level
function, 8 in a method). A fragment may hold placeholders itself, for the
values that differ from one use to the next (e.g. a default): they are filled
from the keywords given to :func:`fill_doc`, which also add or override
fragments for that docstring alone.
"""

import re

_PLACEHOLDER = re.compile(r"%\((\w+)\)s")

# Entries of the training-loop parameters (class docstrings, "Parameters").
_PARAMETERS = {
    "activation": '''\
activation : {"relu", "tanh", "logistic", "identity"}, default="relu"
    Non-linearity of the hidden layers.''',
    "validation_fraction": """\
validation_fraction : float, default=0.1
    Fraction of rows held out when ``early_stopping``.""",
    "n_iter_no_change": """\
n_iter_no_change : int, default=%(n_iter_no_change_default)s
    Epochs without an improvement of at least ``tol`` before stopping.""",
    "max_iter_auto": """\
max_iter : int or "auto", default="auto"
    Maximum number of epochs (passes over the data). ``"auto"``: 1,000
    epochs or 4,000 optimiser steps (minibatches), whichever ends first,
    so that the budget stops growing with the number of rows. With
    n_batches = ceil(n_samples / batch_size) steps per epoch, that is all
    1,000 epochs while n_batches <= 4 (up to 4,096 rows with the default
    batch size), then 4,000 / n_batches epochs, the last one cut short:
    500 on 7,373 rows, about 20 on 200,000, about 4 on 1,000,000. Each
    step costs the same whatever the number of rows. When the step budget
    ends training before the stopping rule, a ``ConvergenceWarning`` says
    so. An int runs up to that many whole epochs, without a step budget.""",
    "verbose": """\
verbose : bool, default=False
    Show a progress bar over epochs with the loss.""",
    "device": """\
device : str, default="auto"
    Torch device; ``"auto"`` picks CUDA when available.""",
}

# Entries of the fitted attributes (class docstrings, "Attributes").
_ATTRIBUTES = {
    "n_iter_": """\
n_iter_ : int
    Number of epochs run (``partial_fit`` calls count one each).""",
    "best_validation_score_": """\
best_validation_score_ : float or None
    Best of ``validation_scores_``.""",
    "device_": """\
device_ : torch.device
    Device the model lives on.""",
    "dtype_": """\
dtype_ : str
    ``"float32"`` or ``"float64"``.""",
    "n_features_in_": """\
n_features_in_ : int
    Number of features seen during fit.""",
    "feature_names_in_": """\
feature_names_in_ : ndarray of shape (`n_features_in_`,)
    Names of features seen during fit, when X has string column names.""",
}
# The attributes every estimator on TorchEstimatorMixin ends its list with.
_ATTRIBUTES["torch_estimator_attributes"] = "\n".join(
    f"%({name})s" for name in ("device_", "dtype_", "n_features_in_", "feature_names_in_")
)

# Sections of the estimators' methods.
_METHODS = {
    "parameters_X": """\
Parameters
----------
X : array-like of shape (n_samples, n_features)""",
    "returns_self": """\
Returns
-------
self : %(class_name)s""",
    "not_fitted_error": """\
sklearn.exceptions.NotFittedError
    If called before ``fit``.""",
    "coverage": """\
coverage : float, default=0.95
    Nominal probability in (0, 1) that a new y falls inside.""",
    "predict_raises": """\
Raises
------
%(not_fitted_error)s
ValueError
    If X has NaN/inf or the wrong number of features.""",
    # log_predictive_density: the targets' shape and how y can mismatch are the estimator's.
    "log_predictive_density_sections": """\
Parameters
----------
X : array-like of shape (n_samples, n_features)
y : array-like of shape %(target_shape)s

Returns
-------
log_density : ndarray of shape (n_samples,)

Raises
------
%(not_fitted_error)s
ValueError
    If X or y has NaN/inf, X the wrong number of features, %(target_mismatch)s""",
}

# Parameters and sections of the regression metrics (skbayes.metrics).
_METRICS = {
    "y_true": """\
y_true : array-like of shape (n_samples,) or (n_samples, n_outputs)
    Observed targets.""",
    "y_pred": """\
y_pred : array-like of the shape of y_true
    Predictive means mu.""",
    "y_std": """\
y_std : array-like of the shape of y_true, or float
    Predictive standard deviations sigma > 0.""",
    "lower_upper": """\
lower, upper : array-like of the shape of y_true
    Interval bounds, ``lower <= upper``.""",
    "calibration_method": """\
method : {"quantile", "central"}, default="quantile"
    Predictive sets: one-sided quantiles or central intervals.""",
    "gaussian_raises": """\
Raises
------
ValueError
    If the shapes differ, an input holds NaN or inf, or y_std <= 0.""",
    "calibration_raises": """\
Raises
------
ValueError
    If the shapes differ, an input holds NaN or inf, y_std <= 0,
    n_levels < 1 or method is unknown.""",
    "ref_gneiting2007": """\
.. [1] T. Gneiting and A. E. Raftery, "Strictly proper scoring rules,
   prediction, and estimation", JASA 102(477), 359-378, 2007.""",
    "ref_kuleshov2018": """\
.. [1] V. Kuleshov, N. Fenner and S. Ermon, "Accurate uncertainties for
   deep learning using calibrated regression", ICML 2018.""",
}
# The three parameters of a Gaussian prediction, in this order.
_METRICS["gaussian_predictions"] = "%(y_true)s\n%(y_pred)s\n%(y_std)s"

# References cited by more than one docstring.
_REFERENCES = {
    "ref_kingma2014": """\
.. [Kingma2014] D. P. Kingma and M. Welling, "Auto-encoding variational
   Bayes", ICLR 2014.""",
    "ref_gal2016": """\
.. [Gal2016] Y. Gal, "Uncertainty in deep learning", PhD thesis, 2016,
   chapter 3 (section 3.3.1 for the uncertainty measures).""",
    "ref_houlsby2011": """\
.. [Houlsby2011] N. Houlsby et al., "Bayesian active learning for
   classification and preference learning", 2011 (BALD).""",
    "ref_sohn2015": """\
.. [Sohn2015] K. Sohn, H. Lee and X. Yan, "Learning structured output
   representation using deep conditional generative models", NeurIPS 2015.""",
}

FRAGMENTS = {**_PARAMETERS, **_ATTRIBUTES, **_METHODS, **_METRICS, **_REFERENCES}


def fill(text, **fields):
    """``text`` with its ``%(name)s`` placeholders replaced by ``fields`` or :data:`FRAGMENTS`.

    Parameters
    ----------
    text : str or None
        A docstring; None (docstrings stripped by ``python -OO``) is returned as is.
    **fields
        Values of the placeholders, before the fragments of the same name;
        converted with ``str``.

    Returns
    -------
    text : str or None
        The inserted text indented like the line of its placeholder, blank
        lines left empty.

    Raises
    ------
    KeyError
        If a placeholder names neither a field nor a fragment.
    """
    if text is None:
        return None
    return _fill(text, {**FRAGMENTS, **{name: str(value) for name, value in fields.items()}})


def _fill(text, values):
    def replace(match):
        line = text[text.rfind("\n", 0, match.start()) + 1 : match.start()]
        indent = line[: len(line) - len(line.lstrip(" "))]
        first, *rest = _fill(values[match[1]], values).split("\n")
        return "\n".join([first, *(indent + part if part else part for part in rest)])

    return _PLACEHOLDER.sub(replace, text)


def fill_doc(obj=None, /, **fields):
    """Decorator filling the placeholders of a function or class docstring (see :func:`fill`).

    ``@fill_doc`` uses the fragments alone; ``@fill_doc(name=value, ...)``
    adds fields, the per-estimator values. On a class it fills the class
    docstring and those of the methods defined in its body, through their
    wrappers (``functools.wraps``, ``available_if``), with the extra field
    ``class_name``.
    """

    def decorate(target):
        if not isinstance(target, type):
            target.__doc__ = fill(target.__doc__, **fields)
            return target
        values = {"class_name": target.__name__, **fields}
        for member in [target, *vars(target).values()]:
            while member is not None:  # the wrapper, then what it wraps
                if isinstance(getattr(member, "__doc__", None), str) and _PLACEHOLDER.search(member.__doc__):
                    member.__doc__ = fill(member.__doc__, **values)
                member = getattr(member, "__wrapped__", None)
        return target

    return decorate if obj is None else decorate(obj)
