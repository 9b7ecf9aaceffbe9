"""float32 against float64 training of the Bayesian MLPs at their defaults, on a matrix of synthetic data.

What it does
------------
For each regression data set (``--functions`` x ``--noise`` x ``--rows``) it
fits ``BayesianMLPRegressor(inference=METHOD, random_state=SEED)``, every
other parameter at its default, twice: with ``dtype="float64"`` and with
``dtype="float32"``, back to back, and records the fit time, the epochs, and
on 5,000 fresh test rows the RMSE, the mean test log-likelihood and the
coverage of the central 90% interval, beside the true process's RMSE and
log-likelihood. X ~ N(0, I_8); the functions are

``linear``
    f(x) = x . w, w ~ N(0, I_8) drawn once (seed 0): signal std about 2.8;
``sines``
    f(x) = sum_j sin(x_j): signal std about 1.9;

and y = f(x) + ``noise`` N(0, 1): 1.0 is noisy, 0.001 nearly noise-free.
With ``--classifier`` it fits ``BayesianMLPClassifier`` the same way on
y = 1[sines(x) + ``noise`` N(0, 1) > 0] and records test accuracy and log
loss beside the Bayes classifier's.

The load average is recorded before and after every pair of fits, with the
number of torch threads (``--threads``). Run it alone on the machine.

How to run
----------
::

    python examples/benchmarks/precision_default.py --threads 2 --out precision_default_sghmc
    python examples/benchmarks/precision_default.py --threads 2 --classifier --noise 0.3 0.01 \\
        --out precision_default_classifier
    python examples/benchmarks/precision_default.py --threads 2 --methods mfvi mc_dropout laplace \\
        --rows 200 2000 --out precision_default_methods

``--out NAME`` writes ``examples/benchmarks/results/defaults/NAME.json`` and ``.md``
(default: print only).
"""

import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.stats import norm
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import log_loss

from skbayes import BayesianMLPClassifier, BayesianMLPRegressor

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment_sentence, loadavg, rows_script, run_saving  # noqa: E402

N_FEATURES, TEST_ROWS = 8, 5000
DTYPES = ("float64", "float32")


def _arguments(parser):
    parser.add_argument("--methods", nargs="+", default=["default"],
                        help="Inference aliases (skbayes.inference.ALIASES); 'default' is the estimator's default.")
    parser.add_argument("--functions", nargs="+", default=["linear", "sines"], choices=["linear", "sines"])
    parser.add_argument("--noise", nargs="+", type=float, default=[1.0, 0.1, 0.001])
    parser.add_argument("--rows", nargs="+", type=int, default=[200, 2000, 20000])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--classifier", action="store_true")


def data(function, noise, n, seed):
    """(X, f, y) for training (n rows) and testing (TEST_ROWS rows), from one seeded generator."""
    rng = np.random.default_rng(seed)
    w = np.random.default_rng(0).standard_normal(N_FEATURES)
    out = []
    for rows in (n, TEST_ROWS):
        X = rng.standard_normal((rows, N_FEATURES))
        f = X @ w if function == "linear" else np.sin(X).sum(axis=1)
        out.append((X, f, f + noise * rng.standard_normal(rows)))
    return out


def fit_pair(args, method, function, noise, n, seed):
    """One row: the float64 and the float32 fit on the same data and seed."""
    (X, f, y), (X_test, f_test, y_test) = data(function, noise, n, seed)
    if args.classifier:
        y, y_test = (y > 0).astype(int), (y_test > 0).astype(int)
    row = {"method": method, "function": function, "noise": noise, "rows": n, "seed": seed,
           "loadavg_before": loadavg()}
    for dtype in DTYPES:
        params = {"random_state": seed, "dtype": dtype}
        if method != "default":
            params["inference"] = method
        model = (BayesianMLPClassifier if args.classifier else BayesianMLPRegressor)(**params)
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.fit(X, y)
        out = {"fit_time_s": round(time.perf_counter() - start, 3), "epochs": int(model.n_iter_),
               "warnings": sorted({w.category.__name__ for w in caught})}
        if args.classifier:
            proba = model.predict_proba(X_test)[:, 1]
            bayes = norm.cdf(f_test / noise)
            out.update(test_accuracy=float(np.mean((proba > 0.5) == y_test)),
                       test_log_loss=float(log_loss(y_test, proba, labels=[0, 1])),
                       oracle_accuracy=float(np.mean((bayes > 0.5) == y_test)),
                       oracle_log_loss=float(log_loss(y_test, np.clip(bayes, 1e-15, 1 - 1e-15), labels=[0, 1])))
        else:
            mean = model.predict(X_test)
            low, high = model.predict_interval(X_test, coverage=0.9)
            out.update(test_rmse=float(np.sqrt(np.mean((mean - y_test) ** 2))),
                       test_ll=float(model.log_predictive_density(X_test, y_test).mean()),
                       coverage_90=float(np.mean((y_test >= low) & (y_test <= high))),
                       oracle_rmse=float(np.sqrt(np.mean((f_test - y_test) ** 2))),
                       oracle_ll=float(norm.logpdf(y_test, f_test, noise).mean()))
        row[dtype] = out
    row["loadavg_after"] = loadavg()
    return row


def markdown(report):
    classifier = any("test_accuracy" in r["float64"] for r in report["rows"])
    if classifier:
        head = ("| method | function | noise | rows | seed | accuracy f64 / f32 (Bayes) | log loss f64 / f32 (Bayes) "
                "| fit s f64 / f32 | time ratio | load |")
    else:
        head = ("| method | function | noise | rows | seed | test LL f64 / f32 (true) | RMSE f64 / f32 (true) "
                "| 90% coverage f64 / f32 | fit s f64 / f32 | time ratio | load |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in report["rows"]:
        a, b = r["float64"], r["float32"]
        if classifier:
            quality = (f"{a['test_accuracy']:.4f} / {b['test_accuracy']:.4f} ({a['oracle_accuracy']:.4f}) | "
                       f"{a['test_log_loss']:.4f} / {b['test_log_loss']:.4f} ({a['oracle_log_loss']:.4f})")
        else:
            quality = (f"{a['test_ll']:.3f} / {b['test_ll']:.3f} ({a['oracle_ll']:.3f}) | "
                       f"{a['test_rmse']:.4f} / {b['test_rmse']:.4f} ({a['oracle_rmse']:.4f}) | "
                       f"{a['coverage_90']:.3f} / {b['coverage_90']:.3f}")
        lines.append(f"| {r['method']} | {r['function']} | {r['noise']:g} | {r['rows']:,} | {r['seed']} | {quality} | "
                     f"{a['fit_time_s']:.2f} / {b['fit_time_s']:.2f} | {b['fit_time_s'] / a['fit_time_s']:.2f} | "
                     f"{r['loadavg_before'][0]:.2f} / {r['loadavg_after'][0]:.2f} |")
    lines += ["", "Each row: the same data, seed and estimator at its defaults, fitted with dtype=\"float64\" "
              "then dtype=\"float32\" back to back; 5,000 fresh test rows. Time ratio: float32 / float64. "
              "Load: 1-minute load average before / after the pair.",
              environment_sentence(report)]
    return "\n".join(lines) + "\n"


def main(argv=None):
    args, report, save, finish = rows_script(argv, __doc__, markdown, "defaults", _arguments)
    report["settings"] = {"n_features": N_FEATURES, "test_rows": TEST_ROWS, "classifier": args.classifier}

    def body():
        for method in args.methods:
            for function in (["sines"] if args.classifier else args.functions):
                for noise in args.noise:
                    for n in args.rows:
                        for seed in args.seeds:
                            row = fit_pair(args, method, function, noise, n, seed)
                            report["rows"].append(row)
                            print({k: row[k] for k in ("method", "function", "noise", "rows", "seed")},
                                  {d: {k: v for k, v in row[d].items() if k != "warnings"} for d in DTYPES},
                                  flush=True)
                            save()

    run_saving(report, body, save, finish)


if __name__ == "__main__":
    main()
