"""The task, the estimator and the saved pipeline (column selection, encoding, fit, load)."""

import ast
import time
from pathlib import Path

import numpy as np
from sklearn.base import clone

from ..inference import resolve_inference
from ._common import (
    _MAX_INTEGER_CLASSES, _MIN_ROWS_FOR_IDENTIFIER, _MODEL_FORMAT, ESTIMATORS, MAX_CATEGORIES, _count,
    _estimator_classes, _first_line, _pandas, _quote_list, _rows,
)


def detect_task(y):
    """Regression or classification, from the values of the target column.

    Like :func:`sklearn.utils.multiclass.type_of_target`, with one
    difference: integer values are a classification target only when there
    are at most 20 distinct ones (``type_of_target`` calls any integer
    target multiclass, so that counts or the diabetes progression score,
    stored as whole numbers, would be classes).

    Parameters
    ----------
    y : pandas.Series
        The target column, without missing values.

    Returns
    -------
    task : {"regression", "classification"}
        ``"classification"`` for a non-numeric (text, categorical, bool)
        column and for integers with at most 20 distinct values;
        ``"regression"`` otherwise.
    """
    pd = _pandas()
    if not pd.api.types.is_numeric_dtype(y) or pd.api.types.is_bool_dtype(y):
        return "classification"
    values = np.asarray(y, dtype=float)
    if np.all(np.isfinite(values)) and np.all(values == np.round(values)):
        return "classification" if len(np.unique(values)) <= _MAX_INTEGER_CLASSES else "regression"
    return "regression"


def parse_param(text):
    """Split a ``--param KEY=VALUE`` into the name and a Python value.

    The value is read as a Python literal where it is one
    (:func:`ast.literal_eval`: ``3``, ``1e-3``, ``True``, ``None``,
    ``(50, 50)``, ``'text'``) and is kept as a string otherwise
    (``inference=mc_dropout``).

    Parameters
    ----------
    text : str
        ``KEY=VALUE``.

    Returns
    -------
    key : str
    value : object

    Raises
    ------
    ValueError
        If there is no ``=`` or the key is empty.

    Examples
    --------
    >>> parse_param("hidden_layer_sizes=(50, 50)")
    ('hidden_layer_sizes', (50, 50))
    >>> parse_param("inference=mc_dropout")
    ('inference', 'mc_dropout')
    """
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ValueError(f"--param takes KEY=VALUE, got {text!r}")
    value = value.strip()
    try:
        return key, ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return key, value


def make_estimator(estimator, task, *, max_iter=None, random_state=0, params=()):
    """The skbayes estimator named by ``--estimator`` for a task, with its options set.

    Parameters
    ----------
    estimator : str
        A short name of :data:`ESTIMATORS` (``"auto"``: the
        :class:`~skbayes.PredictiveStackingRegressor` of Bayesian linear
        regression, a GP and the Bayesian MLP for regression, the Bayesian
        MLP classifier for classes; ``"stacking"``, ``"mlp"``,
        ``"sparse-gp"``, ``"deep-gp"``), which picks the regressor or the
        classifier by ``task``, or a class name (``"SparseGPClassifier"``, any case).
    task : {"regression", "classification"}
    max_iter : int, default=None
        The estimator's ``max_iter`` (epochs), or its inference method's
        where the loop settings live there: a Bayesian MLP's gradient-trained
        method (``SGHMC`` keeps its own schedule), a Gaussian process's
        variational fit (the start of a sampled fit); None keeps the default.
    random_state : int or None, default=0
        The estimator's ``random_state``.
    params : sequence of (str, object), default=()
        Further constructor parameters, set with ``set_params``.

    Returns
    -------
    estimator : estimator object
        Unfitted.

    Raises
    ------
    ValueError
        If the name is unknown, the estimator does not do ``task`` (a
        classifier for a regression target, the deep GP for classes), a
        parameter is not one of the estimator's, or ``max_iter`` is given
        for an estimator that has none (the stacking regressor). Parameter
        values are checked by the estimator at fit.
    """
    classes = _estimator_classes()
    by_lower = {name.lower(): cls for name, cls in classes.items()}
    key = estimator.lower()
    if key in ESTIMATORS:
        name = ESTIMATORS[key][task == "classification"]
        if name is None:
            raise ValueError(f"--estimator {estimator} does only regression, and the task is {task}")
        cls = classes[name]
    elif key in by_lower:
        cls = by_lower[key]
        cls_task = "classification" if cls.__name__.endswith("Classifier") else "regression"
        if cls_task != task:
            raise ValueError(f"{cls.__name__} does {cls_task}, and the task is {task}")
    else:
        names = list(ESTIMATORS) + list(classes)
        raise ValueError(f"unknown estimator '{estimator}'; choose one of {_quote_list(names, limit=20)}")
    model = cls()
    valid = model.get_params(deep=False)
    settings = {"random_state": random_state}
    if max_iter is not None:
        settings["max_iter"] = max_iter
    for key, value in params:
        if key not in valid:
            raise ValueError(
                f"unknown parameter '{key}' for {cls.__name__}; its parameters are {', '.join(sorted(valid))}"
            )
        settings[key] = value
    model.set_params(**{k: v for k, v in settings.items() if k in valid})
    if max_iter is not None and "max_iter" not in valid and "inference" in valid:
        model.set_params(inference=_with_max_iter(model.inference, max_iter, gp=_takes_sparse_variational(cls)))
    elif max_iter is not None and "max_iter" not in valid:
        raise ValueError(f"--max-iter does not apply to {cls.__name__}, whose members keep their defaults; "
                         "choose another --estimator (mlp, sparse-gp, deep-gp) to set it")
    return model


def _takes_sparse_variational(cls):
    """Whether ``cls``'s ``inference`` takes :class:`~skbayes.inference.SparseVariational` (the GP estimators)."""
    from ..inference import SparseVariational

    return SparseVariational in getattr(cls, "_parameter_constraints", {}).get("inference", ())


def _with_max_iter(inference, max_iter, gp):
    """The estimator's ``inference`` with its ``max_iter`` set, where it has one.

    The Bayesian MLPs' gradient-trained methods and the Gaussian processes'
    variational fit (:class:`~skbayes.inference.SparseVariational`, also the
    start of a sampled fit) hold their epochs; ``SGHMC`` runs its own
    schedule and is returned as it is.
    """
    from ..inference import SampledSparseGP, resolve_gp_inference

    if gp:
        method = resolve_gp_inference(inference)
    else:
        method = resolve_inference(inference) if isinstance(inference, str) else clone(inference)
    if isinstance(method, SampledSparseGP):
        return method.set_params(start=method.variational().set_params(max_iter=max_iter))
    if "max_iter" in method.get_params(deep=False):
        return method.set_params(max_iter=max_iter)
    return method


def _select_columns(frame, target, features, exclude, categorical, max_categories, source):
    """The feature columns and, among them, the categorical ones (see fit_table)."""
    pd = _pandas()
    columns = list(frame.columns)
    named = [(target, "--target")] + [(c, "--features") for c in features or ()]
    named += [(c, "--exclude") for c in exclude] + [(c, "--categorical") for c in categorical]
    for column, option in named:
        if column not in columns:
            raise ValueError(f"{source}: no column '{column}' ({option}); the columns are {_quote_list(columns, 8)}")
    if features:
        features = list(dict.fromkeys(features))
        if target in features:
            raise ValueError(f"the target '{target}' is also in --features")
    else:
        features = [c for c in columns if c != target and c not in exclude]
    if not features:
        raise ValueError(f"{source}: no feature columns besides the target '{target}'")
    for column in categorical:
        if column not in features:
            raise ValueError(f"--categorical column '{column}' is not a feature")
    categorical = list(dict.fromkeys(categorical))
    for column in features:
        values = frame[column]
        if column in categorical or pd.api.types.is_bool_dtype(values):
            pass
        elif pd.api.types.is_numeric_dtype(values):
            continue
        else:
            # Text: numbers with a few stray strings are a data error, not categories.
            numbers = pd.to_numeric(values, errors="coerce")
            stray = values[numbers.isna() & values.notna()]
            if numbers.notna().mean() >= 0.5 and len(stray):
                raise ValueError(
                    f"{source}: column '{column}' looks numeric but holds {_count(len(stray), 'non-numeric value')} "
                    f"such as {stray.iloc[0]!r} ({_rows(stray.index)}); clean it, or list it in --categorical"
                )
        n_distinct = values.nunique(dropna=True)
        if column not in categorical and n_distinct > max_categories:
            raise ValueError(
                f"{source}: column '{column}' is non-numeric with {n_distinct} distinct values, more than "
                f"--max-categories={max_categories}; leave it out with --exclude, or raise --max-categories"
            )
        if column not in categorical and n_distinct == len(values) >= _MIN_ROWS_FOR_IDENTIFIER:
            raise ValueError(
                f"{source}: column '{column}' is non-numeric with a different value in every row (an identifier "
                "or free text?); leave it out with --exclude, or list it in --categorical"
            )
        if column not in categorical:
            categorical.append(column)
    return features, [c for c in features if c in categorical]


def _check_missing(frame, columns, source):
    for column in columns:
        missing = frame[column].isna()
        if missing.any():
            raise ValueError(
                f"{source}: column '{column}' has {_count(missing.sum(), 'missing value')} "
                f"({_rows(frame.index[missing])}); fill or drop them first"
            )


def _make_pipeline(features, categorical, estimator):
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    numeric = [c for c in features if c not in categorical]
    transformers = []
    if numeric:
        transformers.append(("numeric", StandardScaler(), numeric))
    if categorical:
        transformers.append(("categorical", OneHotEncoder(handle_unknown="error", sparse_output=False), categorical))
    return Pipeline([("preprocess", ColumnTransformer(transformers)), ("estimator", estimator)])


def fit_table(frame, target, *, features=None, exclude=(), categorical=(), task="auto", estimator="auto",
              max_iter=None, random_state=0, params=(), max_categories=MAX_CATEGORIES, source="TABLE"):
    """Fit a preprocessing + skbayes pipeline on a table.

    The pipeline is ``Pipeline([("preprocess", ColumnTransformer(...)),
    ("estimator", estimator)])``: :class:`~sklearn.preprocessing.StandardScaler`
    on the numeric features and
    :class:`~sklearn.preprocessing.OneHotEncoder` (``handle_unknown="error"``)
    on the categorical ones. A regression target is not scaled here: the
    skbayes regressors standardise y themselves (``normalize_y=True``) and
    predict in its units.

    Parameters
    ----------
    frame : pandas.DataFrame
        The training table.
    target : str
        The target column.
    features : list of str, default=None
        The feature columns; None means every column but the target and
        ``exclude``.
    exclude : list of str, default=()
        Columns to leave out (identifiers, free text).
    categorical : list of str, default=()
        Features to one-hot encode besides the non-numeric ones (text,
        category and bool columns are always encoded), e.g. integer codes.
    task : {"auto", "regression", "classification"}, default="auto"
        ``"auto"`` uses :func:`detect_task`, or the task of an estimator
        named by its class.
    estimator : str, default="auto"
        See :func:`make_estimator`.
    max_iter, random_state, params
        See :func:`make_estimator`.
    max_categories : int, default=50
        A non-numeric feature with more distinct values is refused.
    source : str, default="TABLE"
        The table's name in error messages.

    Returns
    -------
    model : dict
        ``pipeline`` (the fitted Pipeline), ``target``, ``features``,
        ``categorical``, ``task``, ``classes`` (None for regression),
        ``n_rows``, ``fit_seconds``, ``dataset`` (None here) and ``format``;
        what :func:`predict_table` and :func:`evaluate_table` take and what
        ``skbayes fit`` saves with joblib.

    Raises
    ------
    ValueError
        With a one-line message for a missing column, a non-numeric column
        with too many distinct values, missing values in the target or the
        features, a non-numeric target for regression, an unknown estimator
        or parameter, or a parameter value the estimator rejects.
    """
    pd = _pandas()
    features, categorical = _select_columns(
        frame, target, features, list(exclude), list(categorical), max_categories, source
    )
    y = frame[target]
    _check_missing(frame, [target], source)
    _check_missing(frame, features, source)
    if task == "auto":
        cls_task = {name.lower(): ("classification" if name.endswith("Classifier") else "regression")
                    for name in _estimator_classes()}
        task = cls_task.get(estimator.lower()) or detect_task(y)
    if task == "regression":
        if not pd.api.types.is_numeric_dtype(y) or pd.api.types.is_bool_dtype(y):
            raise ValueError(f"{source}: the target '{target}' is not numeric, so it cannot be a regression target")
        y = y.astype(float)
    model = make_estimator(estimator, task, max_iter=max_iter, random_state=random_state, params=params)
    pipeline = _make_pipeline(features, categorical, model)
    start = time.perf_counter()
    pipeline.fit(frame[features], y.to_numpy())
    seconds = time.perf_counter() - start
    classes = list(pipeline.classes_) if task == "classification" else None
    return {
        "format": _MODEL_FORMAT,
        "pipeline": pipeline,
        "target": target,
        "features": features,
        "categorical": categorical,
        "task": task,
        "classes": classes,
        "n_rows": len(frame),
        "fit_seconds": seconds,
        "dataset": None,
    }


def load_model(path):
    """Load a model file written by ``skbayes fit``.

    joblib files are pickles: load only files you trust.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    model : dict
        See :func:`fit_table`.

    Raises
    ------
    ValueError
        If the file is missing or is not a model written by ``skbayes fit``.
    """
    import joblib

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such model file (write one with skbayes fit)")
    try:
        model = joblib.load(path)
    except Exception as exc:
        raise ValueError(f"{path}: cannot be loaded as a model: {_first_line(exc)}") from exc
    if not isinstance(model, dict) or model.get("format") != _MODEL_FORMAT:
        raise ValueError(f"{path}: not a model file written by skbayes fit")
    return model
