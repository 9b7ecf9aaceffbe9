"""Robust GP regression: ``SparseGPRegressor(noise="student_t")`` against Gaussian noise and the exact GP, with outliers.

A sine, y = sin(2x) + N(0, 0.1^2) on x ~ U(-3, 3), with a fraction ``--outliers``
of the training targets moved by +-U(3, 8) (gross errors); the test rows are
clean. Per outlier rate and seed: ``SparseGPRegressor()`` at its defaults
with ``noise="homoscedastic"`` and with ``noise="student_t"``, and
scikit-learn's exact ``GaussianProcessRegressor`` with
``ConstantKernel * RBF + WhiteKernel`` (``normalize_y=True``, 3 optimiser
restarts), all standardising y. Recorded: test RMSE, mean log predictive
density (nats, clean test rows), the coverage of the 90% interval, the fitted
noise scale (and degrees of freedom), the fit time and ``n_iter_``.

    python examples/benchmarks/robust_gp.py --rows 300 --outliers 0 0.1 --seeds 2 --tag sine

(results in ``examples/benchmarks/results/sparse_gp/robust_gp_<tag>.{json,md}``).
"""

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.stats import norm
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment, environment_sentence, output_paths, print_written, results_dir, run_saving, write_atomic  # noqa: E402

from skbayes import SparseGPRegressor  # noqa: E402


def sine(n, seed, outliers=0.0):
    """n rows of the sine, a fraction ``outliers`` of them moved by +-U(3, 8)."""
    rng = np.random.RandomState(seed)
    X = rng.uniform(-3, 3, size=(n, 1))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.randn(n)
    gross = rng.rand(n) < outliers
    y[gross] += rng.choice([-1.0, 1.0], gross.sum()) * rng.uniform(3.0, 8.0, gross.sum())
    return X, y


def scores(model, X_test, y_test):
    mean, std = model.predict(X_test, return_std=True)
    if hasattr(model, "log_predictive_density"):
        lpd = model.log_predictive_density(X_test, y_test)
        lower, upper = model.predict_interval(X_test, coverage=0.9)
    else:  # the exact GP's Gaussian predictive
        lpd = norm.logpdf(y_test, mean, std)
        lower, upper = norm.ppf([[0.05], [0.95]], mean, std)
    return {
        "rmse": float(np.sqrt(np.mean((mean - y_test) ** 2))),
        "lpd": float(np.mean(lpd)),
        "coverage_90": float(np.mean((y_test >= lower) & (y_test <= upper))),
    }


def models(seed):
    return {
        "sparse GP, Gaussian noise": lambda: SparseGPRegressor(random_state=seed),
        "sparse GP, Student-t noise": lambda: SparseGPRegressor(noise="student_t", random_state=seed),
        "exact GP (scikit-learn)": lambda: GaussianProcessRegressor(
            C(1.0) * RBF(1.0) + WhiteKernel(0.1), normalize_y=True, n_restarts_optimizer=3, random_state=seed),
    }


def markdown(report):
    lines = [
        f"Sine with gross outliers in the training targets ({report['settings']['rows']} training rows, "
        f"{report['settings']['test_rows']} clean test rows, noise std 0.1); mean over {report['settings']['seeds']} "
        "seeds (min-max in brackets).",
        "",
        "| outliers | model | test RMSE | test LPD (nats) | 90% coverage | fitted noise scale | df | fit time (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    by_key = {}
    for row in report["rows"]:
        by_key.setdefault((row["outliers"], row["model"]), []).append(row)
    for (rate, name), rows in by_key.items():
        def cell(key, digits=3):
            values = np.array([r[key] for r in rows if r[key] is not None], dtype=float)
            if not len(values):
                return "—"
            return f"{values.mean():.{digits}f} [{values.min():.{digits}f}, {values.max():.{digits}f}]"
        lines.append(f"| {rate:.0%} | {name} | {cell('rmse')} | {cell('lpd')} | {cell('coverage_90')} | "
                     f"{cell('noise_std')} | {cell('noise_df', 2)} | {cell('fit_seconds', 1)} |")
    lines += ["", environment_sentence(report)]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--test-rows", type=int, default=2000)
    parser.add_argument("--outliers", type=float, nargs="+", default=[0.0, 0.1])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--tag", default=None)
    parser.add_argument("--output-dir", default=str(results_dir("sparse_gp")))
    args = parser.parse_args(argv)
    json_path, md_path = output_paths(args, "robust_gp")
    report = {"environment": environment(argv=argv), "complete": False, "rows": [],
              "settings": {"rows": args.rows, "test_rows": args.test_rows, "outliers": args.outliers,
                           "seeds": args.seeds}}

    def save():
        write_atomic(json_path, json.dumps(report, indent=1) + "\n")

    def body():
        for rate in args.outliers:
            for seed in range(args.seeds):
                X, y = sine(args.rows, seed, rate)
                X_test, y_test = sine(args.test_rows, 1000 + seed)
                for name, make in models(seed).items():
                    model = make()
                    start = time.perf_counter()
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        model.fit(X, y)
                    fit_seconds = time.perf_counter() - start
                    if hasattr(model, "noise_std_"):
                        noise_std, noise_df = model.noise_std_, model.noise_df_
                    else:  # WhiteKernel's variance, in the units of y
                        noise_std, noise_df = float(np.sqrt(model.kernel_.k2.noise_level) * model._y_train_std), None
                    row = {"outliers": rate, "seed": seed, "model": name, "fit_seconds": fit_seconds,
                           "noise_std": noise_std, "noise_df": noise_df,
                           "n_iter": getattr(model, "n_iter_", None), **scores(model, X_test, y_test)}
                    report["rows"].append(row)
                    print(row)
                    save()

    run_saving(report, body, save, lambda: write_atomic(md_path, markdown(report)))
    print_written(json_path, md_path)


if __name__ == "__main__":
    main()
