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

With ``--all-checks`` it runs instead the whole of scikit-learn's
``check_estimator`` (every check, ``on_fail=None``) on each of the two
estimators with each inference method at the defaults, and records the
number of checks passed, failed and skipped, the names and first lines of
the failures, and the time: the full check at the defaults, which
``tests/test_common.py`` runs on short schedules to keep the test command
within its time budget.

How to run
----------
::

    python examples/benchmarks/checks_at_defaults.py --threads 1 --out checks_at_defaults
    python examples/benchmarks/checks_at_defaults.py --all-checks --threads 1 --out check_estimator_at_defaults

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
from sklearn.utils.estimator_checks import (  # noqa: E402
    check_classifiers_train, check_estimator, check_regressors_train,
)

import skbayes  # noqa: E402


def regression_data():
    """The data of scikit-learn's ``check_regressors_train`` (its ``_regression_dataset``)."""
    X, y = make_regression(n_samples=200, n_features=10, n_informative=1, bias=5.0, noise=20, random_state=42)
    return StandardScaler().fit_transform(X), StandardScaler().fit_transform(y[:, None])[:, 0]


def markdown(report):
    if report["settings"].get("all_checks"):
        return markdown_all_checks(report)
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


def markdown_all_checks(report):
    lines = [
        "# scikit-learn's check_estimator at the Bayesian MLPs' defaults, every inference method",
        "",
        "Command: `python examples/benchmarks/checks_at_defaults.py " + " ".join(report["argv"]) + "`. "
        "Every check of `check_estimator(estimator, on_fail=None)` on `BayesianMLPRegressor(inference=METHOD(), "
        "random_state=0)` and `BayesianMLPClassifier(...)`, nothing else set.",
        "",
        "| method | estimator | passed | failed | skipped | failures | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in report["rows"]:
        failures = "; ".join(f"`{name}`: {message}" for name, message in row["failures"]) or "—"
        lines.append(f"| {row['method']} | {row['estimator']} | {row['passed']} | {len(row['failures'])} | "
                     f"{row['skipped']} | {failures} | {row['seconds']:.0f} |")
    lines += ["", *environment_lines(report)]
    return "\n".join(lines) + "\n"


def run_all_checks(estimator):
    """(passed, skipped, [(check name, first line of its error)], seconds) of the whole check_estimator."""
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(estimator, on_fail=None, on_skip=None)
    failures = [(r["check_name"], str(r["exception"]).strip().splitlines()[0][:100] if str(r["exception"]).strip()
                 else type(r["exception"]).__name__) for r in results if r["status"] == "failed"]
    passed = sum(r["status"] == "passed" for r in results)
    skipped = sum(r["status"] == "skipped" for r in results)
    return passed, skipped, failures, time.perf_counter() - start


def all_checks_body(report, save):
    for cls in inference_method_classes():
        estimators = [skbayes.BayesianMLPRegressor]
        if getattr(cls(), "supports_classification", True):
            estimators.append(skbayes.BayesianMLPClassifier)
        for estimator_cls in estimators:
            passed, skipped, failures, seconds = run_all_checks(estimator_cls(inference=cls(), random_state=0))
            row = {"method": cls.__name__, "estimator": estimator_cls.__name__, "passed": passed,
                   "skipped": skipped, "failures": failures, "seconds": seconds}
            report["rows"].append(row)
            print(row, flush=True)
            save()


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


def add_arguments(parser):
    parser.add_argument("--all-checks", action="store_true",
                        help="Run the whole check_estimator on each estimator and method instead.")


def main(argv=None):
    args, report, save, finish = rows_script(argv, __doc__, markdown, "defaults", add_arguments)
    report["settings"] = {"all_checks": args.all_checks}
    if args.all_checks:
        run_saving(report, lambda: all_checks_body(report, save), save, finish)
        return

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
