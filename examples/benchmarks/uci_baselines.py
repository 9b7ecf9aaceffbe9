"""Quickstart: the default Bayesian MLP regressor against the tools a tabular user already has.

What it does
------------
Fits ``make_pipeline(StandardScaler(), BayesianMLPRegressor(random_state=0))``
(every other parameter at its default) on a real regression dataset and
compares it, in the same pipeline and on the same rows, with the models a
user who wants a predictive distribution reaches for today:

* scikit-learn's exact ``GaussianProcessRegressor`` (kernel ``ConstantKernel
  * RBF(one length scale per feature) + WhiteKernel``, ``normalize_y=True``);
* NGBoost's ``NGBRegressor()`` (skipped with a note when ngboost is not
  installed: ``pip install ngboost``);
* ``MLPRegressor(max_iter=2000, random_state=0)`` with a Gaussian predictive whose standard
  deviation is the root mean square of its residuals on 10% of the training
  rows held out of its fit;
* ``BayesianRidge``.

Data: by default the UCI concrete compressive strength data (1030 rows, 8
features), fixed split 0 of the benchmark protocol (927 training rows, 103
test rows), the copy bundled with skbayes (``skbayes.datasets.fetch_uci``:
a folder ``<data home>/uci/concrete`` given by ``--data-home`` or the
``SKBAYES_DATA_HOME`` environment variable overrides it; the sets that are not
bundled, naval and yacht, are downloaded there unless ``--no-download``).
``--dataset NAME`` takes any UCI benchmark name or alias (``energy``,
``boston``, ``wine``...) or ``diabetes`` (scikit-learn's bundled data,
``train_test_split(test_size=0.2, random_state=0)``, no download).

How to run
----------
::

    python examples/benchmarks/uci_baselines.py
    python examples/benchmarks/uci_baselines.py --dataset energy
    python examples/benchmarks/uci_baselines.py --dataset diabetes --output-dir /tmp/skbayes-plots

It takes about a minute on an idle 2-core CPU. If other processes are busy
on the same cores, add ``--threads 1``: torch's default of one thread per
core can make these small networks tens of times slower under contention.

What it prints
--------------
The dataset and its split sizes, then one table row per model with the test
RMSE, the mean test log-likelihood per point (nats, in the units of y; for
BayesianMLPRegressor its ``log_predictive_density``, the density of its
Monte-Carlo predictive mixture; for the others their own predictive
densities), the empirical coverage of the central 95% predictive interval,
the mean width of that interval and the fit time in seconds. If matplotlib
is installed it saves two PNGs (predicted vs true with 95% error bars, and a
calibration curve of observed vs nominal interval coverage at levels 0.1 ...
0.9) into ``--output-dir`` (default ``examples/output/``) and prints their
paths.
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from scipy.stats import norm
from sklearn.exceptions import ConvergenceWarning
from sklearn.datasets import load_diabetes
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
from sklearn.linear_model import BayesianRidge
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skbayes import BayesianMLPRegressor
from skbayes.datasets import fetch_uci, get_uci_split
from skbayes.metrics import gaussian_nll, interval_coverage

NOMINAL_LEVELS = np.round(np.arange(0.1, 1.0, 0.1), 2)  # 0.1 ... 0.9 for the calibration curve
COVERAGE = 0.95


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--dataset",
        default="concrete",
        help="A UCI benchmark name or alias (default: concrete; fixed split 0, read from the data home and "
        "downloaded there when absent) or 'diabetes' (scikit-learn's bundled data).",
    )
    parser.add_argument(
        "--data-home",
        default=None,
        help="Folder holding uci/<name>/ (a copy that overrides the bundled sets; default: $SKBAYES_DATA_HOME, else ~/.cache/skbayes, else the bundled copy).",
    )
    parser.add_argument("--no-download", action="store_true", help="Never download a UCI dataset.")
    parser.add_argument(
        "--output-dir",
        default=str(Path(__file__).resolve().parents[1] / "output"),
        help="Where the PNG figures go (default: examples/output/).",
    )
    parser.add_argument("--threads", type=int, default=None,
                        help="torch.set_num_threads(N) (default: torch's default, one per core).")
    parser.add_argument("--no-plots", action="store_true", help="Do not draw the figures.")
    return parser.parse_args(argv)


def load_data(name, data_home, download=True):
    """Return X_train, X_test, y_train, y_test and a description."""
    if name.lower() == "diabetes":
        X, y = load_diabetes(return_X_y=True)
        X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, random_state=0)
        return X_train, X_test, y_train, y_test, "diabetes (sklearn.datasets.load_diabetes), 80/20 split, random_state=0"
    bunch = fetch_uci(name, data_home=data_home, download_if_missing=download)
    X_train, X_test, y_train, y_test = get_uci_split(bunch, 0)
    return X_train, X_test, y_train, y_test, f"UCI {bunch.name}, fixed split 0 of {bunch.n_splits}"


def gaussian_summary(mean, std, y):
    """Metrics of a Gaussian predictive N(mean, std^2) on the test targets."""
    z = norm.ppf(0.5 + COVERAGE / 2)
    lower, upper = mean - z * std, mean + z * std
    return {
        "ll": -gaussian_nll(y, mean, y_std=std),
        "lower": lower,
        "upper": upper,
        "observed": [
            interval_coverage(y, mean - norm.ppf(0.5 + p / 2) * std, mean + norm.ppf(0.5 + p / 2) * std)
            for p in NOMINAL_LEVELS
        ],
    }


def ngboost_regressor():
    """``NGBRegressor(random_state=0, verbose=False)``, or None when ngboost is not installed."""
    try:
        from ngboost import NGBRegressor
    except ImportError:
        return None
    return NGBRegressor(random_state=0, verbose=False)


def evaluate_ngboost(pipe, X_test, y_test):
    """Metrics of a fitted StandardScaler + NGBRegressor pipeline, from its predictive distribution."""
    dist = pipe[-1].pred_dist(pipe[:-1].transform(X_test))
    return {
        "mean": dist.loc,
        "std": dist.scale,
        "ll": float(np.mean(dist.logpdf(y_test))),
        "lower": dist.ppf(0.5 - COVERAGE / 2),
        "upper": dist.ppf(0.5 + COVERAGE / 2),
        "observed": [interval_coverage(y_test, dist.ppf(0.5 - p / 2), dist.ppf(0.5 + p / 2)) for p in NOMINAL_LEVELS],
    }


def evaluate_bayesian(pipe, X_test, y_test):
    """Metrics of a fitted StandardScaler + BayesianMLPRegressor pipeline."""
    model = pipe[-1]
    Xt = pipe[:-1].transform(X_test)  # the estimator's own methods are not routed by Pipeline
    mean, std = model.predict(Xt, return_std=True)
    lower, upper = model.predict_interval(Xt, coverage=COVERAGE)
    observed = []
    for p in NOMINAL_LEVELS:
        lo, hi = model.predict_interval(Xt, coverage=p)
        observed.append(interval_coverage(y_test, lo, hi))
    return {
        "mean": mean,
        "std": std,
        "ll": float(np.mean(model.log_predictive_density(Xt, y_test))),
        "lower": lower,
        "upper": upper,
        "observed": observed,
    }


def main(argv=None):
    args = parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    try:
        X_train, X_test, y_train, y_test, descr = load_data(args.dataset, args.data_home, not args.no_download)
    except (FileNotFoundError, ValueError, OSError) as exc:  # dataset absent, or unknown name
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"Dataset: {descr}")
    print(f"  {X_train.shape[0]} training rows, {X_test.shape[0]} test rows, {X_train.shape[1]} features\n")

    models = {
        "BayesianMLPRegressor()": BayesianMLPRegressor(random_state=0),
        "exact GP (scikit-learn)": GaussianProcessRegressor(
            ConstantKernel() * RBF(np.ones(X_train.shape[1])) + WhiteKernel(), normalize_y=True, random_state=0
        ),
        "NGBoost": ngboost_regressor(),
        "MLPRegressor + held-out residual std": MLPRegressor(max_iter=2000, random_state=0),
        "BayesianRidge": BayesianRidge(),
    }

    results = {}
    for name, model in models.items():
        if model is None:
            print(f"  skipped {name}: not installed (pip install ngboost)", flush=True)
            continue
        pipe = make_pipeline(StandardScaler(), model)
        with warnings.catch_warnings(record=True) as caught:  # counted and reported, not printed
            warnings.simplefilter("always", ConvergenceWarning)
            start = time.perf_counter()
            if isinstance(model, MLPRegressor):  # a residual std from rows the network did not see
                X_fit, X_held, y_fit, y_held = train_test_split(X_train, y_train, test_size=0.1, random_state=0)
                pipe.fit(X_fit, y_fit)
                sigma = float(np.sqrt(np.mean((pipe.predict(X_held) - y_held) ** 2)))
            else:
                pipe.fit(X_train, y_train)
            fit_time = time.perf_counter() - start
        for w in caught:
            if not issubclass(w.category, ConvergenceWarning):
                warnings.showwarning(w.message, w.category, w.filename, w.lineno)
        n_convergence = sum(issubclass(w.category, ConvergenceWarning) for w in caught)
        if isinstance(model, BayesianMLPRegressor):
            res = evaluate_bayesian(pipe, X_test, y_test)
            res["extra"] = f"{model.n_iter_} epochs"
        elif isinstance(model, MLPRegressor):
            mean = pipe.predict(X_test)
            std = np.full_like(mean, sigma)
            res = {"mean": mean, "std": std, **gaussian_summary(mean, std, y_test)}
            res["extra"] = f"{model.n_iter_} epochs, residual std={sigma:.3g}"
        elif hasattr(model, "pred_dist"):  # NGBoost: its own predictive distribution
            res = evaluate_ngboost(pipe, X_test, y_test)
            res["extra"] = ""
        else:
            mean, std = pipe.predict(X_test, return_std=True)
            res = {"mean": mean, "std": std, **gaussian_summary(mean, std, y_test)}
            res["extra"] = ""
        res["rmse"] = float(np.sqrt(np.mean((res["mean"] - y_test) ** 2)))
        res["coverage"] = interval_coverage(y_test, res["lower"], res["upper"])
        res["width"] = float(np.mean(res["upper"] - res["lower"]))
        res["fit_time"] = fit_time
        if n_convergence:
            res["extra"] = ", ".join(filter(None, [res["extra"], f"{n_convergence} ConvergenceWarning"]))
        results[name] = res
        print(f"  fitted {name} in {fit_time:.2f} s {('(' + res['extra'] + ')') if res['extra'] else ''}", flush=True)

    header = f"{'model':<40}{'RMSE':>10}{'test LL':>10}{'95% cov':>9}{'95% width':>11}{'fit (s)':>9}"
    print("\n" + header)
    print("-" * len(header))
    for name, r in results.items():
        print(
            f"{name:<40}{r['rmse']:>10.3f}{r['ll']:>10.3f}{r['coverage']:>9.3f}"
            f"{r['width']:>11.3f}{r['fit_time']:>9.2f}"
        )
    print(
        "\nRMSE and interval width in the units of y; test LL = mean log p(y | x) per test point "
        "(nats, higher is better);\n95% cov = fraction of test targets inside the central 95% "
        "predictive interval (ideal 0.95)."
    )

    if not args.no_plots:
        save_plots(results, y_test, Path(args.output_dir), args.dataset)
    return 0


def save_plots(results, y_test, output_dir, dataset):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("\nNote: matplotlib is not installed; skipping the figures (pip install matplotlib).")
        return
    output_dir.mkdir(parents=True, exist_ok=True)
    tag = dataset.lower()

    # Predicted vs true, with the 95% predictive intervals as error bars.
    names = list(results)
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 4.2), sharex=True, sharey=True)
    lo_lim = min(y_test.min(), *(r["lower"].min() for r in results.values()))
    hi_lim = max(y_test.max(), *(r["upper"].max() for r in results.values()))
    for ax, name in zip(axes, names):
        r = results[name]
        yerr = np.vstack([r["mean"] - r["lower"], r["upper"] - r["mean"]])
        ax.errorbar(y_test, r["mean"], yerr=yerr, fmt="o", ms=3, alpha=0.6, elinewidth=0.8, capsize=0)
        ax.plot([lo_lim, hi_lim], [lo_lim, hi_lim], "k--", lw=1)
        ax.set_title(f"{name}\nRMSE {r['rmse']:.2f}, LL {r['ll']:.2f}, cov {r['coverage']:.2f}", fontsize=9)
        ax.set_xlabel("true y")
    axes[0].set_ylabel("predicted y (95% interval)")
    fig.suptitle(f"{dataset}: predicted vs true on the test set")
    fig.tight_layout()
    path = output_dir / f"quickstart_{tag}_predictions.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"\nSaved {path}")

    # Calibration curve: observed vs nominal coverage of central intervals.
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.plot([0, 1], [0, 1], "k--", lw=1, label="ideal")
    for name, r in results.items():
        ax.plot(NOMINAL_LEVELS, r["observed"], "o-", ms=4, label=name)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("nominal coverage of the central interval")
    ax.set_ylabel("observed coverage on the test set")
    ax.set_title(f"{dataset}: calibration")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    path = output_dir / f"quickstart_{tag}_calibration.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"Saved {path}")


if __name__ == "__main__":
    sys.exit(main())
