"""The one place that imports scikit-learn's private validation helpers.

``Interval``, ``StrOptions`` and ``_fit_context`` are private in scikit-learn;
importing them here only keeps a future rename to a one-line fix. The
constraints of the parameters that every estimator hands to the shared
training loop live here too, so that they are declared once.
"""

from numbers import Integral, Real

from sklearn.base import _fit_context
from sklearn.utils._param_validation import Interval, StrOptions

__all__ = ["EARLY_STOPPING_CONSTRAINTS", "Interval", "StrOptions", "TRAINING_CONSTRAINTS", "_fit_context"]

# Parameters of skbayes._training.fit_loop and of the torch mixin, shared by
# every estimator.
TRAINING_CONSTRAINTS = {
    "batch_size": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
    "learning_rate_init": [Interval(Real, 0, None, closed="neither")],
    "max_iter": [Interval(Integral, 1, None, closed="left")],
    "tol": [Interval(Real, 0, None, closed="left")],
    "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
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
