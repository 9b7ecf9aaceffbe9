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

from ._common import DATASETS, ESTIMATORS
from .commands import main, make_cli
from .pipeline import detect_task, fit_table, load_model, make_estimator, parse_param
from .report import evaluate_table, format_metrics, predict_table, save_figures
from .tables import load_dataset, read_table

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
