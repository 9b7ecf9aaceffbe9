"""scikit-learn's learning checks on every inference method at the Bayesian MLPs' defaults.

What it does
------------
Runs ``check_regressors_train`` (``BayesianMLPRegressor(inference=METHOD(),
random_state=0)``: training R^2 above 0.5 on scikit-learn's
``make_regression(200, 10, n_informative=1, noise=20)``, standardised) and
``check_classifiers_train`` (``BayesianMLPClassifier``) for every inference
method that ``skbayes.inference`` exports, every other parameter at its
default (two hidden layers of 50 for the regressor, the method's
``auto_noise`` under ``noise="auto"``, its own loop settings), and records pass or fail, the training R^2 of
the regressor on that check's data, and the time. This is what a user gets
who picks a method by name; ``tests/test_common.py`` runs the same checks on
shorter settings.

How to run
----------
::

    python examples/benchmarks/checks_at_defaults.py --threads 1 --out checks_at_defaults

Results go to ``examples/benchmarks/results/defaults/<out>.json`` and ``.md``.
"""

import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from _common import environment_lines, rows_script, run_saving  # noqa: E402
from discovery import inference_method_classes  # noqa: E402

from sklearn.datasets import make_regression  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from sklearn.utils.estimator_checks import check_classifiers_train, check_regressors_train  # noqa: E402

import skbayes  # noqa: E402


def regression_data():
    """The data of scikit-learn's ``check_regressors_train`` (its ``_regression_dataset``)."""
    X, y = make_regression(n_samples=200, n_features=10, n_informative=1, bias=5.0, noise=20, random_state=42)
    return StandardScaler().fit_transform(X), StandardScaler().fit_transform(y[:, None])[:, 0]


def markdown(report):
    lines = [
        "# scikit-learn's learning checks at the Bayesian MLPs' defaults, every inference method",
        "",
        "Command: `python examples/benchmarks/checks_at_defaults.py " + " ".join(report["argv"]) + "`. "
        "`check_regressors_train` asks for a training R² above 0.5; the R² column is the default regressor's "
        "on that check's data (a linear model reaches about 0.9).",
        "",
        "| method | regressor | training R² | classifier | seconds (reg / clf) |",
        "|---|---|---|---|---|",
    ]
    for row in report["rows"]:
        lines.append(f"| {row['method']} | {row['regressor']} | {row['r2']:.3f} | {row.get('classifier', '—')} | "
                     f"{row['regressor_seconds']:.0f} / {row.get('classifier_seconds', float('nan')):.0f} |")
    lines += ["", *environment_lines(report)]
    return "\n".join(lines) + "\n"


def run_check(check, estimator):
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            check(type(estimator).__name__, estimator)
        status = "pass"
    except AssertionError as exc:
        status = "fail" + (f": {str(exc).splitlines()[0][:80]}" if str(exc) else "")
    return status, time.perf_counter() - start


def main(argv=None):
    args, report, save, finish = rows_script(argv, __doc__, markdown, "defaults")

    def body():
        X, y = regression_data()
        for cls in inference_method_classes():
            row = {"method": cls.__name__}
            regressor = skbayes.BayesianMLPRegressor(inference=cls(), random_state=0)
            row["regressor"], row["regressor_seconds"] = run_check(check_regressors_train, regressor)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                row["r2"] = float(skbayes.BayesianMLPRegressor(inference=cls(), random_state=0).fit(X, y).score(X, y))
            if getattr(cls(), "supports_classification", True):
                classifier = skbayes.BayesianMLPClassifier(inference=cls(), random_state=0)
                row["classifier"], row["classifier_seconds"] = run_check(check_classifiers_train, classifier)
            report["rows"].append(row)
            print(row, flush=True)
            save()

    run_saving(report, body, save, finish)


if __name__ == "__main__":
    main()
