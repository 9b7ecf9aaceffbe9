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
they are missing; so are the modules that import torch and the estimators
(by the command that runs), so that ``--help`` and a usage error answer
in a fraction of a second.
"""

from .._lazy import lazy_attributes as _lazy_attributes
from ._common import DATASETS, ESTIMATORS
from .commands import main, make_cli

# The functions that do the work, imported on first use (they import scikit-learn, pandas and torch):
# name -> module.
_LAZY_ATTRIBUTES = {
    "detect_task": ".pipeline", "fit_table": ".pipeline", "load_model": ".pipeline", "make_estimator": ".pipeline",
    "parse_param": ".pipeline", "evaluate_table": ".report", "format_metrics": ".report",
    "predict_table": ".report", "save_figures": ".report", "load_dataset": ".tables", "read_table": ".tables",
}

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


__getattr__, __dir__ = _lazy_attributes(__name__, _LAZY_ATTRIBUTES)
