"""Input validation shared by the metrics."""

from numbers import Integral, Real

import numpy as np
from sklearn.utils import check_array

_INV_SQRT_PI = 1.0 / np.sqrt(np.pi)
_PROBA_SUM_ATOL = 1e-3


def _as_float_array(a, name, *, allow_nd=False):
    """Finite float64 array of 1 or 2 dimensions (3 with ``allow_nd``)."""
    a = check_array(
        a,
        ensure_2d=False,
        allow_nd=allow_nd,
        dtype=np.float64,
        ensure_all_finite=True,
        ensure_min_samples=1,
        input_name=name,
    )
    max_ndim = 3 if allow_nd else 2
    if a.ndim == 0 or a.ndim > max_ndim:
        raise ValueError(f"{name} must have 1 to {max_ndim} dimensions; got shape {a.shape}.")
    return a


def _as_2d(a):
    return a.reshape(-1, 1) if a.ndim == 1 else a


def _check_same_shape(reference, reference_name, **arrays):
    """Validate arrays against ``reference``; return them all as 2-D float arrays.

    A 1-D array and an ``(n, 1)`` array are interchangeable.
    """
    ref = _as_2d(_as_float_array(reference, reference_name))
    out = [ref]
    for name, a in arrays.items():
        a2 = _as_2d(_as_float_array(a, name))
        if a2.shape != ref.shape:
            raise ValueError(
                f"{reference_name} and {name} must have the same shape; got "
                f"{np.shape(reference)} and {np.shape(a)}."
            )
        out.append(a2)
    return out


def _check_std(y_std, shape):
    """Positive finite std, broadcast from a scalar or matching ``shape``."""
    if np.ndim(y_std) == 0:
        y_std = np.full(shape, y_std, dtype=np.float64)
        if not np.isfinite(y_std).all():
            raise ValueError(f"y_std must be finite; got {y_std.flat[0]!r}.")
    else:
        y_std = _as_2d(_as_float_array(y_std, "y_std"))
        if y_std.shape != shape:
            raise ValueError(
                f"y_pred and y_std must have the same shape (or y_std a scalar); got "
                f"{shape} and {y_std.shape} (after reshaping 1-D to (n, 1))."
            )
    if not (y_std > 0).all():
        raise ValueError(f"y_std must be strictly positive; its minimum is {y_std.min()!r}.")
    return y_std


def _check_regression(y_true, y_pred, y_std):
    y_true, y_pred = _check_same_shape(y_true, "y_true", y_pred=y_pred)
    return y_true, y_pred, _check_std(y_std, y_pred.shape)


def _check_interval(y_true, lower, upper):
    if y_true is None:
        lower, upper = _check_same_shape(lower, "lower", upper=upper)
    else:
        y_true, lower, upper = _check_same_shape(y_true, "y_true", lower=lower, upper=upper)
    if (lower > upper).any():
        raise ValueError(
            f"lower must not exceed upper; it does in {int((lower > upper).sum())} entries."
        )
    return y_true, lower, upper


def _check_coverage(coverage):
    if not isinstance(coverage, Real) or isinstance(coverage, bool) or not 0 < coverage < 1:
        raise ValueError(f"coverage must be a float in (0, 1); got {coverage!r}.")
    return float(coverage)


def _check_n(value, name, minimum):
    if not isinstance(value, Integral) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}.")
    return int(value)


# ---------------------------------------------------------------- regression
