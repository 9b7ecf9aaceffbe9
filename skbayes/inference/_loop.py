"""The settings of the gradient loop that an inference object owns: constraints and docstring entries, written once.

An inference method trained by the shared loop (``skbayes._training.fit_loop``)
holds its step size and its stopping rule itself, so that the estimator
carries no setting that its default method ignores. A method object that
takes them declares ``**LOOP_CONSTRAINTS`` in its ``_parameter_constraints``,
documents them with the ``%(loop_parameters)s`` entry of :data:`LOOP_PARAMETERS_DOC`
(through :func:`skbayes._docstrings.fill_doc`), and returns them to the
estimator's ``_loop_settings`` hook with :func:`loop_settings`.
"""

from numbers import Integral, Real

from .._param_validation import Interval, StrOptions

__all__ = ["LOOP_CONSTRAINTS", "LOOP_PARAMETERS_DOC", "loop_settings"]

#: Constraints of ``learning_rate_init``, ``max_iter`` (an int, or ``"auto"`` for the
#: estimator's epoch and step budget), ``tol`` and ``n_iter_no_change``.
LOOP_CONSTRAINTS = {
    "learning_rate_init": [Interval(Real, 0, None, closed="neither")],
    "max_iter": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
    "tol": [Interval(Real, 0, None, closed="left")],
    "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
}

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
%(n_iter_no_change)s""",
}


def loop_settings(method):
    """``max_iter``, ``tol`` and ``n_iter_no_change`` of ``method``, the dict of the estimators' ``_loop_settings``."""
    return {"max_iter": method.max_iter, "tol": method.tol, "n_iter_no_change": method.n_iter_no_change}
