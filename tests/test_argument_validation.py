"""Every argument of every public method is validated, the way constructor parameters are.

Arrays (X, y, Z, classes) are checked by scikit-learn's ``validate_data``
inside the method; every other argument must carry a constraint declared
with ``skbayes._param_validation.validate_method_params``, so that a bad
value raises a ValueError naming it before any work is done. The test walks
the public methods of every public estimator, so an estimator added later is
covered without editing it.
"""

import inspect

import numpy as np
import pytest
from sklearn.base import BaseEstimator

from skbayes.inference import MeanFieldVI
import skbayes

ARRAYS = {"self", "X", "y", "Y", "Z", "classes"}


def _public_methods():
    for _, cls in inspect.getmembers(skbayes, inspect.isclass):
        if not issubclass(cls, BaseEstimator):
            continue
        for name, fn in inspect.getmembers(cls, inspect.isfunction):
            if name.startswith("_") or name in {"get_params", "set_params", "fit", "fit_transform"}:
                continue
            if not fn.__module__.startswith("skbayes"):
                continue  # inherited from scikit-learn
            yield pytest.param(cls, name, fn, id=f"{cls.__name__}.{name}")


@pytest.mark.parametrize("cls, name, fn", list(_public_methods()))
def test_every_argument_has_a_constraint(cls, name, fn):
    parameters = inspect.signature(fn).parameters
    needed = {
        p for p, spec in parameters.items()
        if p not in ARRAYS and spec.kind not in (spec.VAR_POSITIONAL, spec.VAR_KEYWORD)
    }
    declared = set(getattr(fn, "_parameter_constraints", {}))
    assert needed <= declared, f"{cls.__name__}.{name}: no constraint for {sorted(needed - declared)}"


def test_sample_y_with_no_draws_names_the_argument():
    rng = np.random.RandomState(0)
    X, y = rng.randn(20, 2), rng.randn(20)
    model = skbayes.BayesianMLPRegressor((4,), inference=MeanFieldVI(max_iter=2), random_state=0, noise="homoscedastic").fit(X, y)
    with pytest.raises(ValueError, match="'n_samples' parameter of BayesianMLPRegressor.sample_y"):
        model.sample_y(X, n_samples=0)
    with pytest.raises(ValueError, match="'coverage' parameter"):
        model.predict_interval(X, coverage=1.5)
    with pytest.raises(ValueError, match="'return_std' parameter"):
        model.predict(X, return_std="yes")
