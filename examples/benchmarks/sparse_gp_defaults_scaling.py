"""Time and accuracy of a default ``SparseGPRegressor()`` fit as the number of rows grows.

What it does
------------
For each ``--rows`` N it draws N x 8 training rows and 10,000 test rows,
X ~ N(0, I) and y = sum_j sin(x_j) + 0.1 noise (seed 0), fits
``SparseGPRegressor(random_state=0)`` with every other parameter at its
default, and records the wall-clock fit time (k-means and the closed-form
q(u) included), the epochs and optimiser steps run, whether the step budget
ended training, the fitted noise standard deviation (the true one is 0.1),
and the test RMSE and mean test log-likelihood, next to those of the true
function with the true noise (the best any model can do, about 0.884 nats
and 0.1). The load average is recorded before and after every fit, with the
number of torch threads (``--threads``, default 1).

How to run
----------
::

    python examples/benchmarks/sparse_gp_defaults_scaling.py --rows 200000 1000000 --threads 2 \\
        --out sparse_gp_defaults_scaling

``--out NAME`` writes ``examples/benchmarks/results/sparse_gp/NAME.json`` and ``.md``
(default: print only).
"""

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.stats import norm
from sklearn.exceptions import ConvergenceWarning

from skbayes import SparseGPRegressor
from skbayes._training import Callback

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment, environment_sentence, limit_threads, loadavg, named_results, run_saving  # noqa: E402

NOISE = 0.1
N_FEATURES = 8


def synthetic(n, rng):
    """X ~ N(0, I) of shape (n, 8), the noiseless f(X) = sum_j sin(x_j), and y = f + 0.1 noise."""
    X = rng.standard_normal((n, N_FEATURES))
    f = np.sin(X).sum(1)
    return X, f, f + NOISE * rng.standard_normal(n)


class CountSteps(Callback):
    """Optimiser steps taken by the fit."""

    def on_train_begin(self, state):
        self.steps = 0

    def on_batch_end(self, state):
        self.steps += 1


def fit_one(n, test_rows):
    rng = np.random.default_rng(0)
    X, _, y = synthetic(n, rng)
    X_test, f_test, y_test = synthetic(test_rows, rng)
    counter = CountSteps()
    model = SparseGPRegressor(random_state=0, callbacks=[counter])
    load_before = loadavg()
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model.fit(X, y)
    fit_time = time.perf_counter() - start
    mean = model.predict(X_test)
    return {
        "rows": n, "n_features": N_FEATURES, "n_inducing": model.n_inducing_, "fit_time_s": round(fit_time, 2),
        "epochs": model.n_iter_, "steps": counter.steps,
        "budget_ended_training": any("optimiser steps" in str(w.message) for w in caught),
        "noise_std": model.noise_std_, "test_rmse": float(np.sqrt(np.mean((mean - y_test) ** 2))),
        "test_ll": float(model.log_predictive_density(X_test, y_test).mean()),
        "oracle_rmse": float(np.sqrt(np.mean((f_test - y_test) ** 2))),
        "oracle_ll": float(norm.logpdf(y_test, f_test, NOISE).mean()),
        "loadavg_before": load_before, "loadavg_after": loadavg(),
    }


def markdown(report):
    lines = [
        "| rows x features | M | fit time (s) | epochs | steps | budget ended it | noise std (true 0.1) "
        "| test RMSE (oracle) | test LL (oracle) | load average before / after |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["fits"]:
        lines.append(
            f"| {r['rows']} x {r['n_features']} | {r['n_inducing']} | {r['fit_time_s']:.1f} | {r['epochs']} "
            f"| {r['steps']} | {r['budget_ended_training']} | {r['noise_std']:.4f} "
            f"| {r['test_rmse']:.4f} ({r['oracle_rmse']:.4f}) | {r['test_ll']:.3f} ({r['oracle_ll']:.3f}) "
            f"| {r['loadavg_before'][0]} / {r['loadavg_after'][0]} |"
        )
    lines += [
        "",
        "SparseGPRegressor(random_state=0), every other parameter at its default, on X ~ N(0, I) and "
        "y = sum_j sin(x_j) + 0.1 noise; metrics on 10,000 fresh test rows in the units of y; oracle: the "
        "true function with the true noise. Fit time is wall clock (k-means and the closed-form q(u) "
        "included).",
        environment_sentence(report),
    ]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[200_000], help="Training rows N (default: 200000).")
    parser.add_argument("--test-rows", type=int, default=10_000, help="Test rows (default: 10000).")
    parser.add_argument("--threads", type=int, default=1, help="Torch and BLAS threads (default: 1).")
    parser.add_argument("--out", default=None, help="Write results/sparse_gp/NAME.json and NAME.md.")
    args = parser.parse_args(argv)
    limit_threads(args.threads)
    report = {"settings": vars(args), "environment": environment(), "fits": [], "complete": False}

    def body():
        for n in args.rows:
            print(f"fitting {n} x {N_FEATURES} rows ...", flush=True)
            report["fits"].append(fit_one(n, args.test_rows))
            print(json.dumps(report["fits"][-1]), flush=True)

    save, finish = named_results(report, markdown, args.out, "sparse_gp")
    run_saving(report, body, save, finish)
    return 0


if __name__ == "__main__":
    sys.exit(main())
