"""The one place that imports scikit-learn's private validation helpers.

``Interval``, ``StrOptions`` and ``_fit_context`` are private in scikit-learn;
importing them here only keeps a future rename to a one-line fix.
"""

from sklearn.base import _fit_context
from sklearn.utils._param_validation import Interval, StrOptions

__all__ = ["Interval", "StrOptions", "_fit_context"]
