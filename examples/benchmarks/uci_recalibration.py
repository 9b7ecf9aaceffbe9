"""Recalibration (CalibratedRegressorCV) of the default BayesianMLPRegressor on the UCI regression splits.

What it does
------------
For each UCI dataset found in the data folder (``--datasets``; absent ones
are skipped with a note), each of its first ``--splits`` fixed 90/10
train/test splits and each model of ``--methods`` (default ``default``:
``BayesianMLPRegressor(random_state=SPLIT)``, every other parameter at its
default; an inference alias such as ``mfvi`` gives
``BayesianMLPRegressor(inference=METHOD, hidden_layer_sizes=(50,),
random_state=SPLIT)``, ``(100,)`` for protein-tertiary-structure, as in
``uci_benchmark.py``), it holds out ``--calibration-fraction`` (default 20%)
of the training rows (``train_test_split(random_state=split)``), fits the
model behind a ``StandardScaler`` on the other rows, and recalibrates it on the held-out rows:
``CalibratedRegressorCV(fitted, cv="prefit", predictive=--predictive,
n_knots=--n-knots)`` (Kuleshov et al. 2018). One fit per split: a held-out calibration set costs
20% of the training rows but no extra fit, where ``cv=5`` would cost five.
"Before" is the fitted pipeline itself, "after" the same pipeline
recalibrated, so the two differ by the recalibration alone; both are
trained on 80% of the training rows, so their RMSE and test LL are not
those of ``uci_benchmark.py`` (trained on all of it).

Metrics on the test rows, in the ORIGINAL units of y: RMSE of the
predictive mean (after: the mean of the recalibrated distribution), mean
test log-likelihood (before: ``log_predictive_density``, the Monte-Carlo
mixture of the protocol, and ``test_ll_gaussian_before``, the Gaussian with
the predictive mean and std that the recalibration starts from; after: the
recalibrated density, with ``--predictive gaussian`` only), coverage and
mean width of the central 90% and 95% intervals (before: the model's own
``predict_interval``, the quantiles of its predictive mixture for Student-t
or heteroscedastic noise, mean -/+ z std for Gaussian noise; after: the
recalibrated quantiles), the calibration
error (RMS over the levels (j + 0.5) / 20 of the gap between the fraction of
test PIT values below the level and the level, as
``skbayes.metrics.regression_calibration_error``), the fit time of the base
and the time of the recalibration. Aggregates: mean ± standard error over
splits (np.std(ddof=0) / sqrt(n_splits)).

How to run
----------
::

    python examples/benchmarks/uci_recalibration.py --tag full
    python examples/benchmarks/uci_recalibration.py --datasets boston --splits 1 --max-iter 20 --tag smoke

Options: ``--datasets`` (names or aliases; default: all present),
``--splits N`` (default: all), ``--methods`` (``default`` or inference
aliases; default ``default``), ``--max-iter`` (default: the estimator's), ``--predictive``
(``gaussian`` or ``draws``), ``--n-draws`` (with ``draws``, default 1000),
``--n-knots`` (``auto``, the default, ``none`` for the raw isotonic map
with all the calibration rows as knots, or an integer),
``--calibration-fraction`` (default 0.2), ``--threads``, ``--data-home``,
``--tag``, ``--output-dir`` (default ``examples/benchmarks/results/calibration/``).

What it prints
--------------
One progress line per fit and the markdown table; it writes
``uci_recalibration_<tag>.json`` (settings, per-split numbers, aggregates,
environment with the load average at start and end) and
``uci_recalibration_<tag>.md``.
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.special import ndtr
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    environment_lines, fit_uci_splits, limit_threads, loadavg, mean_se, output_paths, print_written, run_saving,
    start_uci_report, write_atomic, results_dir,
)
from uci_benchmark import hidden_layer_sizes  # noqa: E402

from skbayes import BayesianMLPRegressor  # noqa: E402
from skbayes.calibration import CalibratedRegressorCV  # noqa: E402
from skbayes.datasets import UCI_DATASETS  # noqa: E402
from skbayes.inference import ALIASES  # noqa: E402
from skbayes.metrics import gaussian_nll  # noqa: E402

COVERAGES = (0.9, 0.95)
# (column header, key, decimals) of the Markdown table; the keys are the aggregated metrics.
COLUMNS = (
    ("cov. 90% before", "coverage_90_before", 3), ("cov. 90% after", "coverage_90_after", 3),
    ("cov. 95% before", "coverage_95_before", 3), ("cov. 95% after", "coverage_95_after", 3),
    ("width 95% before", "width_95_before", 3), ("width 95% after", "width_95_after", 3),
    ("cal. error before", "calibration_error_before", 3), ("cal. error after", "calibration_error_after", 3),
    ("RMSE before", "rmse_before", 3), ("RMSE after", "rmse_after", 3),
    ("test LL before (mixture)", "test_ll_before", 3), ("test LL before (Gaussian)", "test_ll_gaussian_before", 3),
    ("test LL after", "test_ll_after", 3),
    ("fit (s)", "fit_time_s", 2), ("recalibration (s)", "calibration_time_s", 2),
)
METRICS = tuple(key for _, key, _ in COLUMNS)


def n_knots(text):
    """CalibratedRegressorCV's n_knots from the command line: "auto", "none" (None) or an integer."""
    if text.lower() in ("auto", "none"):
        return None if text.lower() == "none" else "auto"
    return int(text)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--datasets", nargs="+", default=list(UCI_DATASETS))
    parser.add_argument("--splits", type=int, default=20, help="first N fixed splits (default: 20, all)")
    parser.add_argument("--methods", nargs="+", default=["default"], choices=["default", *sorted(ALIASES)])
    parser.add_argument("--max-iter", type=int, default=None,
                        help="max_iter of the inference method, for the methods that have one (default: the "
                             "method's; the default SGHMC runs its own schedule)")
    parser.add_argument("--predictive", choices=("gaussian", "draws"), default="gaussian")
    parser.add_argument("--n-draws", type=int, default=1000)
    parser.add_argument("--n-knots", type=n_knots, default="auto",
                        help="knots of the recalibration map: auto (default), none (all), or an integer")
    parser.add_argument("--calibration-fraction", type=float, default=0.2)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--data-home", default=None)
    parser.add_argument("--tag", default=None)
    parser.add_argument("--output-dir", default=str(results_dir("calibration")))
    args = parser.parse_args(argv)
    if not 0 < args.calibration_fraction < 1:
        parser.error("--calibration-fraction must be in (0, 1)")
    return args


def calibration_error(pit, n_levels=20):
    """RMS gap between the fraction of PIT values below each level (j + 0.5) / n_levels and the level."""
    levels = (np.arange(n_levels) + 0.5) / n_levels
    observed = np.searchsorted(np.sort(pit), levels, side="right") / pit.size
    return float(np.sqrt(np.mean((observed - levels) ** 2)))


def fit_one(method, args, name, X_train, y_train, X_test, y_test, split):
    X_fit, X_cal, y_fit, y_cal = train_test_split(
        X_train, y_train, test_size=args.calibration_fraction, random_state=split)
    if method == "default":  # BayesianMLPRegressor() as it comes (SGHMC: its own schedule, no max_iter)
        model = BayesianMLPRegressor(random_state=split)
    else:
        inference = ALIASES[method]()
        if args.max_iter is not None and "max_iter" in inference.get_params():  # the method's loop setting
            inference.set_params(max_iter=args.max_iter)
        model = BayesianMLPRegressor(inference=inference, hidden_layer_sizes=hidden_layer_sizes(name),
                                     random_state=split)
    pipe = Pipeline([("scaler", StandardScaler()), ("model", model)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        start = time.perf_counter()
        pipe.fit(X_fit, y_fit)
        fit_time = time.perf_counter() - start
    start = time.perf_counter()
    recalibrated = CalibratedRegressorCV(pipe, cv="prefit", predictive=args.predictive, n_mc_predict=args.n_draws,
                                         n_knots=args.n_knots)
    recalibrated.fit(X_cal, y_cal)
    calibration_time = time.perf_counter() - start

    mean, std = pipe.predict(X_test, return_std=True)
    res = {
        "rmse_before": float(np.sqrt(np.mean((mean - y_test) ** 2))),
        "rmse_after": float(np.sqrt(np.mean((recalibrated.predict(X_test) - y_test) ** 2))),
        "test_ll_before": float(np.mean(model.log_predictive_density(pipe["scaler"].transform(X_test), y_test))),
        "test_ll_gaussian_before": -gaussian_nll(y_test, mean, y_std=std),
        "test_ll_after": float("nan"),  # no density with predictive="draws"
        "calibration_error_before": calibration_error(ndtr((y_test - mean) / std)),
        "calibration_error_after": calibration_error(recalibrated.predict_cdf(X_test, y_test)),
        "fit_time_s": fit_time,
        "calibration_time_s": calibration_time,
        "n_fit": int(len(y_fit)), "n_calibration": int(len(y_cal)),
        "n_iter": int(model.n_iter_), "device": str(model.device_),
    }
    if args.predictive == "gaussian":
        res["test_ll_after"] = float(np.mean(recalibrated.log_predictive_density(X_test, y_test)))
    for coverage in COVERAGES:
        intervals = {"before": model.predict_interval(pipe["scaler"].transform(X_test), coverage=coverage),
                     "after": recalibrated.predict_interval(X_test, coverage=coverage)}
        for when, (lower, upper) in intervals.items():
            res[f"coverage_{round(100 * coverage)}_{when}"] = float(np.mean((y_test >= lower) & (y_test <= upper)))
            res[f"width_{round(100 * coverage)}_{when}"] = float(np.mean(upper - lower))
    return res


def markdown(report):
    s = report["settings"]
    lines = [
        "| dataset | method | splits | " + " | ".join(header for header, _, _ in COLUMNS) + " |",
        "|---|---|---|" + "---|" * len(COLUMNS),
    ]
    for name, per_method in report["aggregates"].items():
        for method, agg in per_method.items():
            cells = " | ".join(mean_se(agg, key, digits) for _, key, digits in COLUMNS)
            lines.append(f"| {name} | {method} | {agg['n_splits']} | {cells} |")
    fraction = s["calibration_fraction"]
    lines += [
        "",
        (f"Default BayesianMLPRegressor in a Pipeline with StandardScaler, fitted on {1 - fraction:.0%} of each "
         f"training split and recalibrated by CalibratedRegressorCV(cv='prefit', predictive='{s['predictive']}', "
         f"n_knots={s.get('n_knots', 'auto')!r}) "
         f"on the other {fraction:.0%}" + ("" if s["max_iter"] is None else f"; max_iter={s['max_iter']}")
         + ". Before: the fitted pipeline; after: the same, recalibrated. Coverage and mean width of the central "
         "intervals, calibration error (RMS gap of the PIT values' empirical CDF at 20 levels), RMSE and test LL "
         "(nats per point) in the original units of y on the test split; mean ± standard error "
         "(np.std / sqrt(n_splits)) over the splits."),
    ]
    lines += environment_lines(report)
    return "\n".join(lines) + "\n"


def main(argv=None):
    args = parse_args(argv)
    limit_threads(args.threads)
    json_path, md_path = output_paths(args, "uci_recalibration")
    report, save = start_uci_report(args, json_path, cpu_count=True, coverages=list(COVERAGES))

    def progress(name, method, split, res):
        return (f"  {name:<27} {method:<10} split {split:>2}: cov95 {res['coverage_95_before']:.3f} -> "
                f"{res['coverage_95_after']:.3f}  cov90 {res['coverage_90_before']:.3f} -> "
                f"{res['coverage_90_after']:.3f}  LL {res['test_ll_before']:.3f} -> {res['test_ll_after']:.3f}  "
                f"RMSE {res['rmse_before']:.3f} -> {res['rmse_after']:.3f}  {res['fit_time_s']:.1f} s  "
                f"load {loadavg()[0]}")

    def run():
        fit_uci_splits(
            report, args.datasets, args.splits, args.data_home, order=lambda split: list(args.methods),
            fit=lambda method, X_train, y_train, X_test, y_test, split, name: fit_one(
                method, args, name, X_train, y_train, X_test, y_test, split),
            keys=METRICS, progress=progress, save=save, pass_name=True,
        )

    run_saving(report, run, save, lambda: write_atomic(md_path, markdown(report)))
    print_written(json_path, md_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
