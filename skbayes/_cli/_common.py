"""Constants and small helpers of the command's modules."""

# --estimator: short name -> (regressor, classifier) class names in skbayes. "auto", the default: the
# stacking of Bayesian linear regression, a GP and the Bayesian MLP for a regression target, the Bayesian
# MLP classifier for classes.
ESTIMATORS = {
    "auto": ("PredictiveStackingRegressor", "BayesianMLPClassifier"),
    "mlp": ("BayesianMLPRegressor", "BayesianMLPClassifier"),
    "sparse-gp": ("SparseGPRegressor", "SparseGPClassifier"),
    "deep-gp": ("DeepGPRegressor", None),
    "stacking": ("PredictiveStackingRegressor", None),
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


def _estimator_names():
    """The class names --estimator may give, sorted (without importing the classes)."""
    return sorted({name for pair in ESTIMATORS.values() for name in pair if name is not None})


def _estimator_classes():
    """Every class --estimator may name, by class name."""
    import skbayes

    return {name: getattr(skbayes, name) for name in _estimator_names()}


def _count(n, noun):
    return f"{int(n)} {noun}" + ("" if n == 1 else "s")


def _rows(index):
    """'row 3' or 'rows 3, 5, 8 and 2 more'."""
    return ("row " if len(index) == 1 else "rows ") + _quote_list(list(index), 3)


def _quote_list(values, limit=5):
    values = [repr(v) if not isinstance(v, str) else f"'{v}'" for v in values]
    more = f" and {len(values) - limit} more" if len(values) > limit else ""
    return ", ".join(values[:limit]) + more


def _first_line(exc):
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
