"""The one place that imports scikit-learn's private validation helpers.

``HasMethods``, ``Interval``, ``Options``, ``StrOptions``, ``validate_params``
and ``_fit_context`` are private in scikit-learn; importing them here only
keeps a future rename to a one-line fix. The constraints of the parameters
that every estimator hands to the shared training loop live here too, so that
they are declared once, and :func:`validate_method_params` gives every public
method (``sample_y``, ``predict_interval``, ...) the same checks and error
messages as the constructor parameters; :func:`check_quantile_levels` checks the
levels of every ``predict_quantiles``.
"""

import functools
from numbers import Integral, Real

import numpy as np
from sklearn.base import _fit_context
from sklearn.utils._param_validation import HasMethods, Interval, Options, StrOptions, validate_params

__all__ = [
    "EARLY_STOPPING_CONSTRAINTS",
    "HasMethods",
    "Interval",
    "Options",
    "StrOptions",
    "TRAINING_CONSTRAINTS",
    "_fit_context",
    "check_quantile_levels",
    "validate_method_params",
]

# Parameters of skbayes._training.fit_loop and of the torch mixin, shared by
# every estimator.
TRAINING_CONSTRAINTS = {
    "batch_size": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
    "learning_rate_init": [Interval(Real, 0, None, closed="neither")],
    "max_iter": [Interval(Integral, 1, None, closed="left")],
    "tol": [Interval(Real, 0, None, closed="left")],
    "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
    "callbacks": [list, None],
    "random_state": ["random_state"],
    "verbose": ["verbose"],
    "device": [str],
    "dtype": [StrOptions({"float32", "float64"}), None],
}

# Estimators that can hold out a validation split for early stopping.
EARLY_STOPPING_CONSTRAINTS = {
    "early_stopping": ["boolean"],
    "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
}

# Arguments of the public prediction methods, shared by every estimator.
N_DRAWS = [Interval(Integral, 1, None, closed="left")]
COVERAGE = [Interval(Real, 0, 1, closed="neither")]


def validate_method_params(**constraints):
    """Validate the named arguments of a public method against scikit-learn constraints.

    Wraps :func:`sklearn.utils._param_validation.validate_params`: a bad value
    raises ``InvalidParameterError`` (a ``ValueError`` and a ``TypeError``)
    naming the method, the argument and the accepted values, before the
    method runs. The constraints are kept on the method as
    ``_parameter_constraints`` so that a test can check that every argument
    of every public method has one.

    Parameters
    ----------
    **constraints : list
        Argument name -> list of constraints (as in ``_parameter_constraints``).
    """

    def decorate(method):
        wrapped = validate_params(constraints, prefer_skip_nested_validation=True)(method)
        wrapped = functools.wraps(method)(wrapped)
        wrapped._parameter_constraints = constraints
        return wrapped

    return decorate


def check_quantile_levels(quantiles):
    """``quantiles`` as a 1-D float64 array of levels in (0, 1); ValueError otherwise."""
    levels = np.asarray(quantiles, dtype=np.float64)
    if levels.ndim != 1 or levels.size == 0 or not np.all((levels > 0) & (levels < 1)):
        raise ValueError(f"quantiles must be a non-empty 1-D array of levels in (0, 1); got {quantiles!r}.")
    return levels
