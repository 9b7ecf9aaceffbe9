"""PredictiveStackingRegressor against its members, paired, on small sets of several kinds and on UCI splits.

What it does
------------
Fits ``PredictiveStackingRegressor(random_state=0)`` (its default members:
``BayesianRidge``, scikit-learn's exact ``GaussianProcessRegressor`` with a
constant times ARD RBF plus white-noise kernel, and the default
``BayesianMLPRegressor``, each behind a ``StandardScaler``; 5-fold inner
cross-validation) and, on the same rows, every member alone, and records
each one's test log predictive density (mean over test rows, nats, units of
y), RMSE, 90% interval coverage and fit time. The stacker is to be no worse
than the best of its members by more than 0.02 nats on every set, and no
worse than ``BayesianRidge`` on diabetes.

Data:

* ``diabetes``: scikit-learn's, the split of the ``skbayes`` command
  (``train_test_split(test_size=0.25, random_state=0)``);
* ``nearly_linear``: 300 rows, 5 features N(0, 1), y = X w + 0.3 sin(2 x_0)
  + N(0, 0.5^2), 75/25;
* ``gap``: 1-D, x uniform on [-3, -1] and [1, 3], y = sin(2x) + N(0, 0.1^2),
  200 rows, test rows from the same two intervals and the gap [-1, 1];
* ``smooth_noise_free``: 300 rows, 5 features uniform on [-2, 2], y = sum of
  sin(x_j) + 0.5 x_0 x_1 + N(0, 0.02^2), 75/25;
* the bundled UCI sets (``--uci``, default boston, concrete, energy,
  wine), their first ``--splits`` splits.

How to run
----------
::

    python examples/benchmarks/stacking.py --out stacking            # the committed run
    python examples/benchmarks/stacking.py --uci --splits 1 --out quick

Results go to ``examples/benchmarks/results/stacking/<out>.json`` and
``.md``; each row records the load average (timings are comparable only
between rows of one run on an idle machine).
"""

import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.base import clone
from sklearn.datasets import load_diabetes
from sklearn.model_selection import train_test_split

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    environment_lines, loadavg, rows_script, run_saving, uci_splits,
)

from skbayes import PredictiveStackingRegressor  # noqa: E402
from skbayes.ensemble._stacking import _default_estimators  # noqa: E402
from skbayes.metrics._scorer import _central_interval, _mean_log_predictive_density  # noqa: E402

MARGIN = 0.02


def small_sets():
    """(name, X_train, X_test, y_train, y_test) of the synthetic and scikit-learn sets."""
    X, y = load_diabetes(return_X_y=True)
    yield ("diabetes", *train_test_split(X, y, test_size=0.25, random_state=0))
    rng = np.random.RandomState(0)
    X = rng.randn(300, 5)
    y = X @ np.array([1.0, -0.5, 0.3, 0.0, 0.8]) + 0.3 * np.sin(2 * X[:, 0]) + 0.5 * rng.randn(300)
    yield ("nearly_linear", *train_test_split(X, y, test_size=0.25, random_state=0))
    rng = np.random.RandomState(1)
    x = np.concatenate([rng.uniform(-3, -1, 100), rng.uniform(1, 3, 100)])
    x_test = rng.uniform(-3, 3, 100)
    yield ("gap", x[:, None], x_test[:, None], np.sin(2 * x) + 0.1 * rng.randn(200),
           np.sin(2 * x_test) + 0.1 * rng.randn(100))
    rng = np.random.RandomState(2)
    X = rng.uniform(-2, 2, (300, 5))
    y = np.sin(X).sum(axis=1) + 0.5 * X[:, 0] * X[:, 1] + 0.02 * rng.randn(300)
    yield ("smooth_noise_free", *train_test_split(X, y, test_size=0.25, random_state=0))


def add_set_arguments(parser):
    """The options choosing the sets: ``--uci``, ``--splits``, ``--no-small``, ``--data-home``."""
    parser.add_argument("--uci", nargs="*", default=["boston", "concrete", "energy", "wine"])
    parser.add_argument("--splits", type=int, default=3)
    parser.add_argument("--no-small", action="store_true", help="Skip the synthetic and scikit-learn sets.")
    parser.add_argument("--data-home", default=None)


def benchmark_sets(args, skipped):
    """(name, split, X_train, X_test, y_train, y_test) of the small sets, then of the UCI splits, one at a time."""
    if not args.no_small:
        for name, *data in small_sets():
            yield (name, 0, *data)
    yield from uci_splits(args.uci, args.splits, args.data_home, skipped)


def scores(model, X_test, y_test, seconds):
    lower, upper = _central_interval(model, X_test, 0.9)
    return {
        "log_likelihood": float(_mean_log_predictive_density(model, X_test, y_test)),
        "rmse": float(np.sqrt(np.mean((model.predict(X_test) - y_test) ** 2))),
        "coverage_90": float(np.mean((y_test >= lower) & (y_test <= upper))),
        "fit_seconds": seconds,
    }


def run_one(X_train, X_test, y_train, y_test):
    """Scores of the stacker and of each member alone (members it kept are its refitted copies)."""
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stack = PredictiveStackingRegressor(random_state=0).fit(X_train, y_train)
    row = {"stacked": scores(stack, X_test, y_test, time.perf_counter() - start),
           "weights": stack.stacking_weights_, "cv_log_predictive_density": stack.cv_log_predictive_density_}
    seed = np.random.RandomState(0).randint(np.iinfo(np.int32).max)  # the stacker's first draw: its members' seed
    for name, member in _default_estimators(*X_train.shape, seed):
        if name in stack.named_estimators_:  # the stacker's own refit on all the rows: the member alone
            row[name] = scores(stack.named_estimators_[name], X_test, y_test, float("nan"))
        else:
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fitted = clone(member).fit(X_train, y_train)
            row[name] = scores(fitted, X_test, y_test, time.perf_counter() - start)
    members = [k for k in row if k not in ("stacked", "weights", "cv_log_predictive_density")]
    best = max(row[k]["log_likelihood"] for k in members)
    row["gap_to_best_member"] = row["stacked"]["log_likelihood"] - best
    row["loadavg"] = loadavg()
    return row


def markdown(report):
    members = ["bayesian_ridge", "gaussian_process", "bayesian_mlp"]
    lines = [
        "# PredictiveStackingRegressor against its members (test log-likelihood, nats per row)",
        "",
        "Command: `python examples/benchmarks/stacking.py " + " ".join(report["argv"]) + "`. Each row is one "
        "split; \"weights\" are the stacker's (ridge / GP / MLP); \"gap\" is the stacker's test "
        f"log-likelihood minus the best member's on that split (the target is ≥ −{MARGIN}).",
        "",
        "| set | split | stacked | BayesianRidge | exact GP | Bayesian MLP | gap | weights | stacked 90% cover | "
        "stacked fit s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in report["rows"]:
        w = " / ".join(f"{row['weights'][m]:.2f}" for m in members)
        lines.append(
            f"| {row['set']} | {row['split']} | {row['stacked']['log_likelihood']:.3f} | "
            + " | ".join(f"{row[m]['log_likelihood']:.3f}" for m in members)
            + f" | {row['gap_to_best_member']:+.3f} | {w} | {row['stacked']['coverage_90']:.3f} | "
            f"{row['stacked']['fit_seconds']:.1f} |"
        )
    gaps = [row["gap_to_best_member"] for row in report["rows"]]
    if gaps:
        lines += ["", f"Smallest gap {min(gaps):+.3f} nats; splits within {MARGIN} of the best member or above: "
                  f"{sum(g >= -MARGIN for g in gaps)} of {len(gaps)}."]
    lines += ["", *environment_lines(report)]
    return "\n".join(lines) + "\n"


def main(argv=None):
    args, report, save, finish = rows_script(argv, __doc__, markdown, "stacking", add_set_arguments)

    def body():
        for name, split, X_train, X_test, y_train, y_test in benchmark_sets(args, report["skipped"]):
            row = {"set": name, "split": split, **run_one(X_train, X_test, y_train, y_test)}
            report["rows"].append(row)
            print(f"{name} {split}: stacked {row['stacked']['log_likelihood']:.3f}, gap {row['gap_to_best_member']:+.3f}, "
                  f"weights {row['weights']}", flush=True)
            save()

    run_saving(report, body, save, finish)


if __name__ == "__main__":
    main()
