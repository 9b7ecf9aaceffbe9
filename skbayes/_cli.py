"""The ``skbayes`` command: fit, predict and evaluate on a CSV or Parquet table.

``skbayes fit TABLE --target COLUMN`` fits a scikit-learn
:class:`~sklearn.pipeline.Pipeline` (a
:class:`~sklearn.compose.ColumnTransformer` that one-hot encodes the
categorical columns and standardises the numeric ones, then an skbayes
estimator) on a table and saves it with joblib; ``skbayes predict`` writes
the predictive mean, std and central interval (or the class probabilities
and uncertainty measures) of each row to CSV; ``skbayes evaluate`` prints
the test log-likelihood, error, coverage and calibration on a held-out
table and saves calibration figures. Without a TABLE the commands run on a
dataset that ships with scikit-learn. See doc/command_line.md.

The work is done by plain functions (:func:`read_table`,
:func:`fit_table`, :func:`predict_table`, :func:`evaluate_table`, ...)
that raise ``ValueError`` with a one-line message on bad input; the click
commands built by :func:`make_cli` only parse the options and turn those
errors into click's one-line ``Error: ...``. click and pandas (the ``cli``
extra) are imported lazily, so that :func:`main` can say in one line that
they are missing.
"""

import ast
import sys
import time
import warnings
from pathlib import Path

import numpy as np

__all__ = [
    "DATASETS",
    "ESTIMATORS",
    "detect_task",
    "evaluate_table",
    "fit_table",
    "format_metrics",
    "load_dataset",
    "load_model",
    "main",
    "make_cli",
    "make_estimator",
    "parse_param",
    "predict_table",
    "read_table",
    "save_figures",
]

# --estimator: short name -> (regressor, classifier) class names in skbayes.
ESTIMATORS = {
    "mlp": ("BayesianMLPRegressor", "BayesianMLPClassifier"),
    "sparse-gp": ("SparseGPRegressor", "SparseGPClassifier"),
    "deep-gp": ("DeepGPRegressor", None),
}

# --dataset: name -> (sklearn.datasets loader, task). The data ship with
# scikit-learn: nothing is downloaded.
DATASETS = {
    "diabetes": ("load_diabetes", "regression"),
    "breast_cancer": ("load_breast_cancer", "classification"),
    "wine": ("load_wine", "classification"),
    "iris": ("load_iris", "classification"),
}
_DEFAULT_DATASET = {"regression": "diabetes", "classification": "breast_cancer"}
# The fixed split of a dataset: test fraction and seed.
_TEST_SIZE = 0.25
_SPLIT_SEED = 0

# A numeric target is a classification target when its values are integers
# with at most this many distinct values (else regression).
_MAX_INTEGER_CLASSES = 20
# Default of --max-categories: a non-numeric feature with more distinct
# values is refused (free text, identifiers, dates).
MAX_CATEGORIES = 50
# A non-numeric feature with a different value in each of at least this many
# rows is refused as an identifier (each category would be seen once).
_MIN_ROWS_FOR_IDENTIFIER = 10
# Format of the model file written by fit_table/save.
_MODEL_FORMAT = "skbayes-cli-model/1"


def _pandas():
    import pandas

    return pandas


def _estimator_classes():
    """Every class --estimator may name, by class name."""
    import skbayes

    names = {name for pair in ESTIMATORS.values() for name in pair if name is not None}
    return {name: getattr(skbayes, name) for name in sorted(names)}


def _count(n, noun):
    return f"{int(n)} {noun}" + ("" if n == 1 else "s")


def _rows(index):
    """'row 3' or 'rows 3, 5, 8 and 2 more'."""
    return ("row " if len(index) == 1 else "rows ") + _quote_list(list(index), 3)


def _quote_list(values, limit=5):
    values = [repr(v) if not isinstance(v, str) else f"'{v}'" for v in values]
    more = f" and {len(values) - limit} more" if len(values) > limit else ""
    return ", ".join(values[:limit]) + more


# --------------------------------------------------------------------------
# Reading tables and datasets


def read_table(path):
    """Read a CSV or Parquet table into a DataFrame.

    A name ending in ``.parquet`` or ``.pq`` is read with
    :func:`pandas.read_parquet` (which needs pyarrow or fastparquet), one
    ending in ``.tsv`` or ``.tab`` as tab-separated values, anything else
    with :func:`pandas.read_csv` (comma-separated, first line the header;
    ``.gz``, ``.bz2``, ``.zip``, ``.xz`` and ``.zst`` are decompressed).

    Parameters
    ----------
    path : str or os.PathLike
        The file.

    Returns
    -------
    frame : pandas.DataFrame
        At least one column and one row; the rows keep pandas' default
        index 0, 1, ... .

    Raises
    ------
    ValueError
        With a one-line message if the file does not exist, is a folder,
        is empty, has a header but no rows, cannot be parsed, or is Parquet
        with no Parquet engine installed.
    """
    pd = _pandas()
    path = Path(path)
    if not path.exists():
        raise ValueError(f"{path}: no such file")
    if path.is_dir():
        raise ValueError(f"{path}: is a folder, not a table")
    suffixes = [s.lower() for s in path.suffixes]
    try:
        if suffixes and suffixes[-1] in (".parquet", ".pq"):
            frame = pd.read_parquet(path)
        elif {".tsv", ".tab"} & set(suffixes):
            frame = pd.read_csv(path, sep="\t")
        else:
            frame = pd.read_csv(path)
    except ImportError as exc:
        if suffixes and suffixes[-1] in (".parquet", ".pq"):
            raise ValueError(
                f"{path}: reading Parquet needs pyarrow (pip install pyarrow) or fastparquet ({_first_line(exc)})"
            ) from exc
        raise ValueError(f"{path}: cannot read the file: {_first_line(exc)}") from exc
    except pd.errors.EmptyDataError as exc:
        raise ValueError(f"{path}: the file is empty") from exc
    except (pd.errors.ParserError, UnicodeDecodeError, OSError) as exc:
        raise ValueError(f"{path}: cannot be read as a table: {_first_line(exc)}") from exc
    except Exception as exc:  # pyarrow's errors for a file that is not Parquet
        if type(exc).__module__.startswith("pyarrow"):
            raise ValueError(f"{path}: cannot be read as Parquet: {_first_line(exc)}") from exc
        raise
    if frame.shape[1] == 0:
        raise ValueError(f"{path}: the file has no columns")
    if frame.shape[0] == 0:
        raise ValueError(f"{path}: the table has a header but no rows")
    return frame


def load_dataset(name, split):
    """A dataset that ships with scikit-learn, as a table with a ``target`` column.

    The rows are split once into a training part and a test part (a
    quarter of the rows) by :func:`~sklearn.model_selection.train_test_split`
    with ``random_state=0``, stratified by class for a classification
    dataset, so that ``skbayes fit`` and ``skbayes evaluate`` without a
    TABLE see complementary rows.

    Parameters
    ----------
    name : {"diabetes", "breast_cancer", "wine", "iris"}
        :func:`~sklearn.datasets.load_diabetes` (442 rows, 10 features,
        regression), :func:`~sklearn.datasets.load_breast_cancer` (569 rows,
        30 features, 2 classes), :func:`~sklearn.datasets.load_wine` (178
        rows, 13 features, 3 classes) or :func:`~sklearn.datasets.load_iris`
        (150 rows, 4 features, 3 classes).
    split : {"train", "test"}
        Which part.

    Returns
    -------
    frame : pandas.DataFrame
        The feature columns and ``target``, with the original row numbers
        of the dataset as index.

    Raises
    ------
    ValueError
        If ``name`` or ``split`` is unknown.
    """
    import sklearn.datasets
    from sklearn.model_selection import train_test_split

    if name not in DATASETS:
        raise ValueError(f"unknown dataset '{name}'; choose one of {_quote_list(DATASETS, limit=10)}")
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    loader, task = DATASETS[name]
    frame = getattr(sklearn.datasets, loader)(as_frame=True).frame
    stratify = frame["target"] if task == "classification" else None
    train, test = train_test_split(frame, test_size=_TEST_SIZE, random_state=_SPLIT_SEED, stratify=stratify)
    return (train if split == "train" else test).sort_index()


# --------------------------------------------------------------------------
# Task, estimator and pipeline


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
        A short name of :data:`ESTIMATORS` (``"mlp"``, ``"sparse-gp"``,
        ``"deep-gp"``), which picks the regressor or the classifier by
        ``task``, or a class name (``"SparseGPClassifier"``, any case).
    task : {"regression", "classification"}
    max_iter : int, default=None
        The estimator's ``max_iter`` (epochs); None keeps its default.
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
        classifier for a regression target, the deep GP for classes), or a
        parameter is not one of the estimator's. Parameter values are
        checked by the estimator at fit.
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
    return model.set_params(**{k: v for k, v in settings.items() if k in valid})


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


def fit_table(frame, target, *, features=None, exclude=(), categorical=(), task="auto", estimator="mlp",
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
    estimator : str, default="mlp"
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


# --------------------------------------------------------------------------
# Predicting and evaluating


def _features_of(model, frame, source):
    """The feature columns of a table to predict, checked against the model."""
    pd = _pandas()
    missing = [c for c in model["features"] if c not in frame.columns]
    if missing:
        raise ValueError(f"{source}: lacks the column(s) {_quote_list(missing)} that the model was fitted on")
    X = frame[model["features"]]
    _check_missing(frame, model["features"], source)
    encoder = dict(model["pipeline"].named_steps["preprocess"].named_transformers_).get("categorical")
    for column in model["features"]:
        values = X[column]
        if column in model["categorical"]:
            known = encoder.categories_[model["categorical"].index(column)]
            unseen = ~values.isin(known)
            if unseen.any():
                new = list(dict.fromkeys(values[unseen]))
                raise ValueError(
                    f"{source}: column '{column}' has categories not seen in fit: {_quote_list(new, 3)} "
                    f"({_rows(values.index[unseen])})"
                )
        elif not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
            bad = values[pd.to_numeric(values, errors="coerce").isna()]
            if bad.empty:  # true/false, or numbers stored as text
                raise ValueError(f"{source}: column '{column}' was numeric in fit but is of type {values.dtype} here")
            raise ValueError(
                f"{source}: column '{column}' was numeric in fit but holds {bad.iloc[0]!r} (row {bad.index[0]})"
            )
    return X


def _first_line(exc):
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def predict_table(model, frame, *, coverage=0.95, id_column=None, source="TABLE"):
    """Predictions for every row of a table, as a DataFrame for CSV.

    Parameters
    ----------
    model : dict
        From :func:`fit_table` or :func:`load_model`.
    frame : pandas.DataFrame
        The table; it must hold the model's feature columns (others, the
        target included, are ignored).
    coverage : float, default=0.95
        Nominal coverage of the central interval, in (0, 1).
    id_column : str, default=None
        A column of the table copied to the first output column; None
        writes ``row``, each row's index in the table (0, 1, ... for a
        file).

    Returns
    -------
    predictions : pandas.DataFrame
        One row per input row. Regression: ``mean`` and ``std`` (the
        predictive mean and standard deviation, noise included, units of
        y; ``predict(X, return_std=True)``) and ``lower``, ``upper`` (the
        central ``coverage`` interval of ``predict_interval``, the
        predictive's quantiles where the estimator has them, else ``mean
        -/+ z std``), ``epistemic_std`` and ``aleatoric_std`` (the model
        and noise parts of ``std`` from ``predict_uncertainty``, units of
        y). Classification: ``prediction`` (the most probable
        class), ``proba_<class>`` for each class (``predict_proba``, rows
        sum to 1) and the uncertainty measures of ``predict_uncertainty``
        in nats: ``predictive_entropy`` (total), ``expected_entropy``
        (aleatoric), ``mutual_information`` (epistemic) and
        ``variation_ratio``.

    Raises
    ------
    ValueError
        If a feature column is missing or has missing values, a numeric
        feature holds text, a categorical feature holds a category not
        seen in fit, or ``id_column`` is not a column.
    """
    from .metrics._scorer import _central_interval

    pd = _pandas()
    X = _features_of(model, frame, source)
    pipeline = model["pipeline"]
    if id_column is None:
        out = pd.DataFrame({"row": frame.index})
    elif id_column not in frame.columns:
        raise ValueError(f"{source}: no column '{id_column}' (--id)")
    else:
        out = pd.DataFrame({id_column: frame[id_column].to_numpy()})
    # X goes through the preprocessing once, and the estimator's predictive pass runs once: every
    # estimator of ESTIMATORS has predict_uncertainty, whose mean and std are predict(X, return_std=True)'s.
    estimator, Xt = pipeline[-1], pipeline[:-1].transform(X)
    parts = estimator.predict_uncertainty(Xt)
    if model["task"] == "regression":
        lower, upper = _central_interval(estimator, Xt, coverage)
        out["mean"], out["std"], out["lower"], out["upper"] = parts.mean, parts.std, lower, upper
        out["epistemic_std"], out["aleatoric_std"] = parts.epistemic_std, parts.aleatoric_std
        return out
    proba = estimator.predict_proba(Xt)
    out["prediction"] = estimator.classes_[proba.argmax(axis=1)]  # what predict returns, without a second pass
    for j, label in enumerate(model["classes"]):
        out[f"proba_{label}"] = proba[:, j]
    for name in ("predictive_entropy", "expected_entropy", "mutual_information", "variation_ratio"):
        out[name] = parts[name]
    return out


# Rows of evaluate's table: key -> description ({coverage} is filled in).
_METRICS = {
    "regression": {
        "log_likelihood": "test log-likelihood, mean log p(y | x) per row (nats)",
        "rmse": "root mean squared error of the mean (units of y)",
        "coverage": "fraction of y inside the central {coverage} interval",
        "interval_width": "mean width of the central {coverage} interval (units of y)",
        "calibration_error": "RMS gap of observed to nominal coverage, central intervals of N(mean, std^2), 20 levels",
    },
    "classification": {
        "log_likelihood": "test log-likelihood, mean log p(y | x) per row (nats) = -log loss",
        "accuracy": "fraction of rows whose most probable class is y",
        "calibration_error": "expected calibration error of the top-label probability, 15 bins",
        "mean_predictive_entropy": "mean predictive entropy (nats)",
        "mean_mutual_information": "mean mutual information, the epistemic part (nats)",
    },
}


def _target_of(model, frame, source):
    target = model["target"]
    if target not in frame.columns:
        raise ValueError(f"{source}: no target column '{target}' to evaluate against")
    _check_missing(frame, [target], source)
    y = frame[target]
    if model["task"] == "classification":
        unseen = ~y.isin(model["classes"])
        if unseen.any():
            new = list(dict.fromkeys(y[unseen]))
            raise ValueError(f"{source}: the target holds classes not seen in fit: {_quote_list(new, 3)}")
        return y.to_numpy()
    pd = _pandas()
    if not pd.api.types.is_numeric_dtype(y) or pd.api.types.is_bool_dtype(y):
        raise ValueError(f"{source}: the target '{target}' is not numeric")
    return y.to_numpy(dtype=float)


def evaluate_table(model, frame, *, coverage=0.95, source="TABLE"):
    """Scores of a fitted model on a held-out table.

    Parameters
    ----------
    model : dict
        From :func:`fit_table` or :func:`load_model`.
    frame : pandas.DataFrame
        The held-out table, with the target column and the feature columns.
    coverage : float, default=0.95
        Nominal coverage of the central interval (regression).

    Returns
    -------
    metrics : dict of str to float
        Regression: ``log_likelihood`` (the mean over rows of the
        estimator's ``log_predictive_density``, nats per row), ``rmse``,
        ``coverage`` (:func:`~skbayes.metrics.interval_coverage` of the
        ``lower``/``upper`` columns of :func:`predict_table`),
        ``interval_width`` (:func:`~skbayes.metrics.mean_interval_width`)
        and ``calibration_error``
        (:func:`~skbayes.metrics.regression_calibration_error` of the
        central intervals of N(mean, std^2), as in the calibration figure). Classification: ``log_likelihood`` (minus
        :func:`sklearn.metrics.log_loss`), ``accuracy``,
        ``calibration_error``
        (:func:`~skbayes.metrics.expected_calibration_error`) and the
        means of ``predictive_entropy`` and ``mutual_information``.
    predictions : pandas.DataFrame
        :func:`predict_table` of the table.
    y : ndarray of shape (n_rows,)
        The target column.

    Raises
    ------
    ValueError
        As :func:`predict_table`, and if the target column is missing,
        has missing values, is not numeric (regression) or holds classes
        not seen in fit.
    """
    from sklearn.metrics import accuracy_score, log_loss

    from .metrics import (
        expected_calibration_error,
        interval_coverage,
        mean_interval_width,
        regression_calibration_error,
    )
    from .metrics._scorer import _mean_log_predictive_density

    y = _target_of(model, frame, source)
    predictions = predict_table(model, frame, coverage=coverage, source=source)
    if model["task"] == "regression":
        mean, std = predictions["mean"].to_numpy(), predictions["std"].to_numpy()
        lower, upper = predictions["lower"].to_numpy(), predictions["upper"].to_numpy()
        X = frame[model["features"]]
        metrics = {
            "log_likelihood": float(_mean_log_predictive_density(model["pipeline"], X, y)),
            "rmse": float(np.sqrt(np.mean((y - mean) ** 2))),
            "coverage": interval_coverage(y, lower, upper),
            "interval_width": mean_interval_width(lower, upper),
            "calibration_error": regression_calibration_error(y, mean, y_std=std, method="central"),
        }
    else:
        classes = model["classes"]
        proba = predictions[[f"proba_{c}" for c in classes]].to_numpy()
        metrics = {
            "log_likelihood": -float(log_loss(y, proba, labels=classes)),
            "accuracy": float(accuracy_score(y, predictions["prediction"].to_numpy())),
            "calibration_error": expected_calibration_error(y, proba, labels=classes),
        }
        for name in ("predictive_entropy", "mutual_information"):
            if name in predictions:
                metrics[f"mean_{name}"] = float(predictions[name].mean())
    return metrics, predictions, y


def format_metrics(metrics, task, coverage):
    """evaluate's table: one line per metric, ``name  value  description``.

    Parameters
    ----------
    metrics : dict of str to float
        From :func:`evaluate_table`.
    task : {"regression", "classification"}
    coverage : float
        The nominal coverage, for the descriptions.

    Returns
    -------
    table : str
        A header line and one line per metric, values with 6 significant
        digits.
    """
    percent = f"{100 * coverage:g}%"
    rows = [("metric", "value", "description")]
    for key, value in metrics.items():
        description = _METRICS[task].get(key, "").format(coverage=percent)
        rows.append((key, f"{value:.6g}", description))
    width = [max(len(r[i]) for r in rows) for i in range(2)]
    return "\n".join(f"{r[0]:<{width[0]}}  {r[1]:>{width[1]}}  {r[2]}".rstrip() for r in rows)


def save_figures(model, y, predictions, directory, *, coverage=0.95, name=None):
    """Save evaluate's calibration figures as PNG files.

    Regression: ``calibration.png``
    (:class:`~skbayes.metrics.RegressionCalibrationDisplay` of N(mean,
    std^2)) and ``prediction_intervals.png``
    (:class:`~skbayes.metrics.PredictionIntervalDisplay`, rows sorted by
    the mean, the epistemic band shaded apart from the total where the
    predictions have ``epistemic_std``). Classification: ``reliability.png``
    (:class:`~skbayes.metrics.ReliabilityDisplay` with the mean predictive
    entropy and mutual information per bin).

    Parameters
    ----------
    model : dict
        From :func:`fit_table` or :func:`load_model`.
    y : ndarray of shape (n_rows,)
        The observed targets.
    predictions : pandas.DataFrame
        :func:`predict_table` of the rows.
    directory : str or os.PathLike
        Created if missing.
    coverage : float, default=0.95
        The interval's nominal coverage.
    name : str, default=None
        Legend name; defaults to the estimator's class name.

    Returns
    -------
    paths : list of pathlib.Path
        The files written.

    Raises
    ------
    ValueError
        If matplotlib is not installed.
    """
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ValueError("--figures needs matplotlib (pip install 'skbayes[plot]')") from exc
    from .metrics import PredictionIntervalDisplay, RegressionCalibrationDisplay, ReliabilityDisplay

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    name = name or type(model["pipeline"][-1]).__name__
    figures = {}
    if model["task"] == "regression":
        mean, std = predictions["mean"].to_numpy(), predictions["std"].to_numpy()
        figures["calibration.png"] = RegressionCalibrationDisplay.from_predictions(
            y, mean, y_std=std, name=name, ax=Figure().subplots()
        )
        if "epistemic_std" in predictions:
            bands = {"epistemic_std": predictions["epistemic_std"].to_numpy(),
                     "aleatoric_std": predictions["aleatoric_std"].to_numpy()}
        else:
            bands = {"y_std": std}
        figures["prediction_intervals.png"] = PredictionIntervalDisplay.from_predictions(
            y, mean, **bands, coverage=coverage, name=name, ax=Figure().subplots()
        )
    else:
        classes = model["classes"]
        proba = predictions[[f"proba_{c}" for c in classes]].to_numpy()
        uncertainty = {k: predictions[k].to_numpy() for k in ("predictive_entropy", "mutual_information")
                       if k in predictions}
        figures["reliability.png"] = ReliabilityDisplay.from_predictions(
            y, proba, uncertainty=uncertainty or None, labels=classes, name=name, ax=Figure().subplots()
        )
    paths = []
    for filename, display in figures.items():
        path = directory / filename
        display.figure_.savefig(path, dpi=120, bbox_inches="tight")
        paths.append(path)
    return paths


# --------------------------------------------------------------------------
# The click commands


def _split_names(values):
    """Column names from repeated and/or comma-separated option values."""
    return [name.strip() for value in values for name in value.split(",") if name.strip()]


def make_cli():
    """Build the ``skbayes`` click command group.

    Returns
    -------
    cli : click.Group
        With the commands ``fit``, ``predict`` and ``evaluate``; invoke it
        with ``cli.main(args)`` or test it with
        :class:`click.testing.CliRunner`.

    Raises
    ------
    ImportError
        If click is not installed.
    """
    import click

    import skbayes

    def run(function, *args, **kwargs):
        """function(...), a ValueError turned into click's one-line error."""
        try:
            return function(*args, **kwargs)
        except ValueError as exc:
            raise click.ClickException(_first_line(exc)) from None

    table_argument = click.argument("table", required=False, type=click.Path(dir_okay=True, path_type=Path))
    dataset_option = click.option(
        "--dataset", type=click.Choice(list(DATASETS)), default=None,
        help="Without TABLE: the scikit-learn dataset to use (default: diabetes for regression, "
             "breast_cancer for classification; evaluate and predict: the model's).",
    )
    coverage_option = click.option(
        "--coverage", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.95, show_default=True,
        help="Nominal coverage of the central prediction interval.",
    )
    fit_options = [
        click.option("--target", "-t", metavar="COLUMN", help="The target column (with a TABLE; required)."),
        click.option("--features", multiple=True, metavar="COLUMNS",
                     help="Feature columns, comma-separated or repeated (default: all but the target)."),
        click.option("--exclude", multiple=True, metavar="COLUMNS",
                     help="Columns to leave out of the features, comma-separated or repeated."),
        click.option("--categorical", multiple=True, metavar="COLUMNS",
                     help="Numeric columns to one-hot encode too (text, category and bool columns always are)."),
        click.option("--max-categories", type=click.IntRange(1), default=MAX_CATEGORIES, show_default=True,
                     help="Refuse a non-numeric column with more distinct values."),
        click.option("--task", type=click.Choice(["auto", "regression", "classification"]), default="auto",
                     show_default=True, help="auto: classes for text, bool, or at most 20 distinct integers."),
        click.option("--estimator", "-e", default="mlp", show_default=True,
                     help="mlp, sparse-gp or deep-gp (regressor or classifier by the task), or a class name: "
                          + ", ".join(_estimator_classes()) + "."),
        click.option("--max-iter", type=click.IntRange(1), default=None,
                     help="Epochs (the estimator's max_iter; default: its own)."),
        click.option("--random-state", type=int, default=0, show_default=True, help="Seed of the estimator."),
        click.option("--param", "-p", "params", multiple=True, metavar="KEY=VALUE",
                     help="Any other estimator parameter, e.g. -p 'hidden_layer_sizes=(50, 50)'; repeatable."),
        dataset_option,
    ]

    def with_options(options):
        def decorate(function):
            for option in reversed(options):
                function = option(function)
            return function
        return decorate

    def fit_model(table, target, features, exclude, categorical, max_categories, task, estimator, max_iter,
                  random_state, params, dataset):
        params = [run(parse_param, p) for p in params]
        if table is None:
            if dataset is None:
                if task == "auto" and estimator.lower() in {n.lower() for n in _estimator_classes()}:
                    task = "classification" if estimator.lower().endswith("classifier") else "regression"
                dataset = _DEFAULT_DATASET["classification" if task == "classification" else "regression"]
            frame, source = run(load_dataset, dataset, "train"), f"{dataset} (training split)"
            target = target or "target"
        else:
            if target is None:
                raise click.ClickException("--target COLUMN is required with a TABLE")
            frame, source = run(read_table, table), str(table)
        model = run(
            fit_table, frame, target, features=_split_names(features), exclude=_split_names(exclude),
            categorical=_split_names(categorical), task=task, estimator=estimator, max_iter=max_iter,
            random_state=random_state, params=params, max_categories=max_categories, source=source,
        )
        model["dataset"] = dataset if table is None else None
        return model, source

    def describe(model, source):
        what = "classes" if model["task"] == "classification" else "regression"
        return (f"{type(model['pipeline'][-1]).__name__} ({what} of '{model['target']}' on "
                f"{len(model['features'])} features, {model['n_rows']} rows of {source}, "
                f"{model['fit_seconds']:.1f} s)")

    def held_out(model, table, dataset):
        if table is not None:
            return run(read_table, table), str(table)
        dataset = dataset or model.get("dataset")
        if dataset is None:
            raise click.ClickException("give a TABLE (the model was not fitted on a built-in dataset)")
        return run(load_dataset, dataset, "test"), f"{dataset} (test split)"

    def write_csv(predictions, output):
        if str(output) == "-":
            predictions.to_csv(sys.stdout, index=False)
        else:
            try:
                predictions.to_csv(output, index=False)
            except OSError as exc:
                raise click.ClickException(f"{output}: cannot write: {_first_line(exc)}") from None

    @click.group(context_settings={"help_option_names": ["-h", "--help"]})
    @click.version_option(skbayes.__version__, prog_name="skbayes")
    @click.option("--threads", type=click.IntRange(1), default=None,
                  help="CPU threads of torch (torch.set_num_threads; default: torch's own).")
    def cli(threads):
        """Fit, predict and evaluate skbayes estimators on a CSV or Parquet table.

        Without a TABLE, the commands run on a dataset that ships with
        scikit-learn (--dataset), split into a training and a test part.
        """
        if threads is not None:
            import torch

            torch.set_num_threads(threads)

    @cli.command()
    @table_argument
    @with_options(fit_options)
    @click.option("--output", "-o", "output", type=click.Path(dir_okay=False, path_type=Path),
                  default="model.joblib", show_default=True, help="The model file to write (joblib).")
    def fit(table, output, **options):
        """Fit an estimator on TABLE and save the fitted pipeline.

        TABLE is a CSV file (or .parquet, .tsv); without it, the training
        split of --dataset.
        """
        import joblib

        model, source = fit_model(table, **options)
        try:
            joblib.dump(model, output)
        except OSError as exc:
            raise click.ClickException(f"{output}: cannot write: {_first_line(exc)}") from None
        click.echo(f"fitted {describe(model, source)}; saved {output}")

    @cli.command()
    @table_argument
    @click.option("--model", "-m", "model_path", type=click.Path(path_type=Path), default="model.joblib",
                  show_default=True, help="The model file written by skbayes fit.")
    @click.option("--output", "-o", default="-", show_default=True, help="The CSV file to write; - is stdout.")
    @coverage_option
    @click.option("--id", "id_column", metavar="COLUMN", help="Copy this column to the output instead of 'row'.")
    @dataset_option
    def predict(table, model_path, output, coverage, id_column, dataset):
        """Write the predictions for each row of TABLE as CSV.

        Regression: row, mean, std, lower, upper. Classification: row,
        prediction, proba_<class>..., predictive_entropy, expected_entropy,
        mutual_information, variation_ratio. Without TABLE: the test split
        of the model's dataset.
        """
        model = run(load_model, model_path)
        frame, source = held_out(model, table, dataset)
        predictions = run(predict_table, model, frame, coverage=coverage, id_column=id_column, source=source)
        write_csv(predictions, output)

    @cli.command(short_help="Print test log-likelihood, error, coverage and calibration on TABLE.")
    @table_argument
    @click.option("--model", "-m", "model_path", type=click.Path(path_type=Path), default=None,
                  help="The model file written by skbayes fit (default: model.joblib with a TABLE; without "
                       "TABLE and --model, a model is fitted on the training split of --dataset).")
    @coverage_option
    @click.option("--figures", type=click.Path(file_okay=False, path_type=Path), default=None,
                  help="Folder to save the calibration figures in (PNG).")
    @click.option("--predictions", type=click.Path(dir_okay=False, path_type=Path), default=None,
                  help="Also write the predictions to this CSV file.")
    @with_options(fit_options)
    @click.pass_context
    def evaluate(ctx, table, model_path, coverage, figures, predictions, **options):
        """Print the test log-likelihood, error, coverage and calibration on TABLE.

        TABLE is a held-out table with the target column. Without TABLE
        and --model, fits a model (with the fit options) on the training
        split of --dataset and evaluates it on the test split: one command
        that runs the whole job.
        """
        fitting = table is None and model_path is None
        if not fitting:
            given = [name for name in options if name != "dataset"
                     and ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT]
            if given:
                raise click.ClickException(
                    f"--{given[0].replace('_', '-')} is a fit option: evaluate fits only without TABLE and --model"
                )
        if fitting:
            model, source = fit_model(None, **options)
            click.echo(f"fitted {describe(model, source)}")
            frame, source = held_out(model, None, None)
        else:
            model = run(load_model, model_path or "model.joblib")
            frame, source = held_out(model, table, options["dataset"])
        metrics, rows, y = run(evaluate_table, model, frame, coverage=coverage, source=source)
        click.echo(f"{type(model['pipeline'][-1]).__name__} on {source}, {len(frame)} rows")
        click.echo(format_metrics(metrics, model["task"], coverage))
        if predictions is not None:
            write_csv(rows, predictions)
            click.echo(f"saved {predictions}")
        if figures is not None:
            for path in run(save_figures, model, y, rows, figures, coverage=coverage):
                click.echo(f"saved {path}")

    return cli


def _one_line_warning(message, category, filename, lineno, file=None, line=None):
    stream = sys.stderr if file is None else file
    stream.write(f"Warning: {_first_line(message)}\n")


def main(argv=None):
    """Run the ``skbayes`` command (the console script and ``python -m skbayes``).

    Parameters
    ----------
    argv : list of str, default=None
        The arguments; None reads ``sys.argv[1:]``.

    Returns
    -------
    None
        Exits the process with click's exit code: 0 on success, 1 with a
        one-line ``Error: ...`` on stderr for bad input, 2 for a usage
        error; 1 with a one-line error if click or pandas is missing.
    """
    try:
        import click  # noqa: F401
        import pandas  # noqa: F401
    except ImportError as exc:
        sys.stderr.write(f"Error: the skbayes command needs {exc.name}: pip install 'skbayes[cli]'\n")
        sys.exit(1)
    with warnings.catch_warnings():
        warnings.showwarning = _one_line_warning
        make_cli().main(args=argv, prog_name="skbayes")
