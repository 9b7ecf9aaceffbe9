"""Tune the prior scale and the inference method by NLL or by R^2 with GridSearchCV.

What it does
------------
On one fixed split of a UCI regression benchmark (default ``concrete``,
split 0 of ``skbayes.datasets.fetch_uci``; ``--dataset``, ``--split``) it
runs ``GridSearchCV`` over

    Pipeline([("scaler", StandardScaler()),
              ("model", BayesianMLPRegressor(hidden_layer_sizes=(50,), noise="homoscedastic",
                                             random_state=0))])

(one hidden layer of 50 units and homoscedastic Gaussian noise, the settings
of the results in ``doc/uncertainty_examples_results.md``; the estimator's
defaults are now two layers and Student-t noise, see ``doc/defaults.md``)
with the grid ``model__prior_scale`` in ``--prior-scales`` (default 0.1 0.3
1.0 3.0) and ``model__inference`` in ``[MeanFieldVI(), MCDropout()]``
(labelled ``mfvi`` and ``mc_dropout`` in the tables), 3-fold
cross-validation (``--cv``) on the training rows, twice:

* ``scoring=skbayes.metrics.get_scorer("neg_gaussian_nll")``, the negative
  Gaussian NLL of ``predict(X, return_std=True)`` (a proper scoring rule,
  sensitive to the predictive std);
* ``scoring="r2"``, which only looks at the predictive mean.

Each search refits its best grid point on all training rows. On the test
rows of the split the script then reports, for both selected models: the
chosen parameters, the RMSE, the test log-likelihood (mean of
``log_predictive_density`` on ``pipe[:-1].transform(X_test)``: the Monte-Carlo
mixture density of the UCI protocol, nats per point), the Gaussian NLL of the
predictive mean and std, the empirical coverage of the central 95% predictive
interval (``interval_coverage``), the mean width of that interval and the
regression calibration error (``regression_calibration_error``, RMS gap
between nominal and observed quantile levels, 20 levels). It also prints the
cross-validation table: mean (and std over folds) test score of every grid
point under both scorings. The point is to see whether tuning by NLL and by
R^2 pick differently calibrated models. Nothing is tuned on the test rows.

Data: the copy bundled with skbayes (``skbayes.datasets.fetch_uci``; a folder
``<data home>/uci/NAME`` given by ``--data-home`` or the ``SKBAYES_DATA_HOME``
environment variable overrides it); the script never downloads anything.

How to run
----------
::

    python examples/benchmarks/tune_prior_uci.py --threads 1
    python examples/benchmarks/tune_prior_uci.py --dataset energy --max-iter 200 --threads 1

With the defaults on concrete (8 grid points x 3 folds x 2 scorings = 48
fits of 500 epochs at most, plus 2 refits) it takes about 6 minutes on one
CPU core. ``--max-iter`` caps the epochs of every fit to make it cheaper
(it sets ``max_iter`` of both inference methods, where the training loop's
settings live).
Use ``--threads 1`` when other processes share the cores.

What it prints
--------------
The dataset and split sizes, the time of each search, then markdown tables:
the cross-validation scores of every grid point (mean +/- std over folds;
NLL in nats per point in the units of y, lower is better; R^2 higher is
better; the selected point of each search marked), and the test metrics of
the two selected models. The same numbers, with the package versions, the
load average, the date and the command line, go as JSON to ``--output``
(default ``examples/output/tune_prior_scale.json``, beside examples/).
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from skbayes import BayesianMLPRegressor
from skbayes.datasets import fetch_uci, get_uci_split
from skbayes.inference import MCDropout, MeanFieldVI
from skbayes.metrics import (
    gaussian_nll,
    get_scorer,
    interval_coverage,
    regression_calibration_error,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import end_environment, environment, save_json  # noqa: E402

COVERAGE = 0.95
# The inference methods of the grid, by the label the tables show.
INFERENCES = {"mfvi": MeanFieldVI, "mc_dropout": MCDropout}


def label(method):
    """The label of an inference method object of the grid."""
    return next(name for name, cls in INFERENCES.items() if type(method) is cls)


def labelled(params):
    """Grid parameters with the inference object replaced by its label."""
    return {k: label(v) if k == "model__inference" else v for k, v in params.items()}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", default="concrete",
                        help="UCI benchmark name or alias (default: concrete); never downloaded.")
    parser.add_argument("--split", type=int, default=0, help="Which fixed train/test split (default 0).")
    parser.add_argument("--data-home", default=None,
                        help="Folder holding uci/<name>/ (a copy that overrides the bundled sets; default: $SKBAYES_DATA_HOME, else ~/.cache/skbayes, else the bundled copy).")
    parser.add_argument("--prior-scales", type=float, nargs="+", default=[0.1, 0.3, 1.0, 3.0],
                        help="Grid of prior_scale values (default: 0.1 0.3 1.0 3.0).")
    parser.add_argument("--cv", type=int, default=3, help="Number of cross-validation folds (default 3).")
    parser.add_argument("--max-iter", type=int, default=None,
                        help="max_iter (epochs) of every fit, a parameter of the inference methods "
                             "(default: the methods' default).")
    parser.add_argument("--output",
                        default=str(Path(__file__).resolve().parents[1] / "output" / "tune_prior_scale.json"),
                        help="JSON file for the results (default: examples/output/tune_prior_scale.json).")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch.set_num_threads(N) (default: torch's default, one per core).")
    return parser.parse_args(argv)


def test_metrics(pipe, X_test, y_test):
    """Probabilistic test metrics of a fitted StandardScaler + BayesianMLPRegressor pipeline."""
    model = pipe[-1]
    Xt = pipe[:-1].transform(X_test)  # the estimator's own methods are not routed by Pipeline
    mean, std = model.predict(Xt, return_std=True)
    lower, upper = model.predict_interval(Xt, coverage=COVERAGE)
    return {
        "rmse": float(np.sqrt(np.mean((y_test - mean) ** 2))),
        "test_ll": float(np.mean(model.log_predictive_density(Xt, y_test))),
        "gaussian_nll": gaussian_nll(y_test, mean, y_std=std),
        "coverage_95": interval_coverage(y_test, lower, upper),
        "width_95": float(np.mean(upper - lower)),
        "calibration_error": regression_calibration_error(y_test, mean, y_std=std),
        "mean_std": float(np.mean(std)),
        "noise_std": float(model.noise_std_[0]),
        "n_iter": int(model.n_iter_),
    }


def main(argv=None):
    args = parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    env = environment(argv=argv)
    try:
        bunch = fetch_uci(args.dataset, data_home=args.data_home, download_if_missing=False)
        X_train, X_test, y_train, y_test = get_uci_split(bunch, args.split)
    except (FileNotFoundError, ValueError) as exc:  # dataset absent, unknown name or split
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"Dataset: UCI {bunch.name}, fixed split {args.split} of {bunch.n_splits}")
    print(f"  {X_train.shape[0]} training rows, {X_test.shape[0]} test rows, {X_train.shape[1]} features\n")

    # The settings of the published results (the estimator's defaults when they were measured).
    model_params = {"hidden_layer_sizes": (50,), "noise": "homoscedastic", "random_state": 0}
    loop = {} if args.max_iter is None else {"max_iter": args.max_iter}  # the inference methods' setting
    pipe = Pipeline([("scaler", StandardScaler()), ("model", BayesianMLPRegressor(**model_params))])
    grid = {"model__prior_scale": args.prior_scales, "model__inference": [cls(**loop) for cls in INFERENCES.values()]}
    cv = KFold(n_splits=args.cv, shuffle=True, random_state=0)  # the same folds for both searches
    scorings = {"neg_gaussian_nll": get_scorer("neg_gaussian_nll"), "r2": "r2"}

    searches, n_convergence_warnings = {}, {}
    for name, scoring in scorings.items():
        search = GridSearchCV(pipe, grid, scoring=scoring, cv=cv, refit=True, n_jobs=None)
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            search.fit(X_train, y_train)
        elapsed = time.perf_counter() - start
        n_convergence_warnings[name] = sum(issubclass(w.category, ConvergenceWarning) for w in caught)
        searches[name] = (search, elapsed)
        print(f"  GridSearchCV(scoring={name!r}): {len(search.cv_results_['params'])} grid points x "
              f"{args.cv} folds + refit in {elapsed:.0f} s; best {labelled(search.best_params_)}", flush=True)

    # Cross-validation table, one row per grid point, both scorings side by side.
    cv_rows = []
    ref = searches["neg_gaussian_nll"][0].cv_results_
    for i, params in enumerate(ref["params"]):
        row = {"inference": label(params["model__inference"]), "prior_scale": params["model__prior_scale"]}
        for name, (search, _) in searches.items():
            res = search.cv_results_
            j = res["params"].index(params)
            row[name] = {"mean": float(res["mean_test_score"][j]), "std": float(res["std_test_score"][j]),
                         "rank": int(res["rank_test_score"][j]),
                         "mean_fit_time_s": float(res["mean_fit_time"][j])}
        cv_rows.append(row)

    print("\nCross-validation on the training rows (mean +/- std over folds; * = selected):\n")
    print("| inference | prior_scale | CV NLL (nats) | CV R^2 | mean fit time (s) |")
    print("|---|---:|---:|---:|---:|")
    for row in cv_rows:
        nll, r2 = row["neg_gaussian_nll"], row["r2"]
        print(f"| {row['inference']} | {row['prior_scale']:g} "
              f"| {-nll['mean']:.3f} +/- {nll['std']:.3f}{' *' if nll['rank'] == 1 else ''} "
              f"| {r2['mean']:.3f} +/- {r2['std']:.3f}{' *' if r2['rank'] == 1 else ''} "
              f"| {nll['mean_fit_time_s']:.1f} |")

    selected = {}
    for name, (search, elapsed) in searches.items():
        selected[name] = {
            "best_params": {k.removeprefix("model__"): v for k, v in labelled(search.best_params_).items()},
            "best_cv_score": float(search.best_score_),
            "search_time_s": elapsed,
            "n_convergence_warnings": n_convergence_warnings[name],
            "test": test_metrics(search.best_estimator_, X_test, y_test),
        }

    print(f"\nSelected models refitted on the {len(y_train)} training rows, evaluated on the "
          f"{len(y_test)} test rows:\n")
    print("| tuned by | inference | prior_scale | RMSE | test LL | Gaussian NLL | 95% cov | 95% width "
          "| calib. error | noise std | epochs |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, s in selected.items():
        t, p = s["test"], s["best_params"]
        print(f"| {name} | {p['inference']} | {p['prior_scale']:g} | {t['rmse']:.3f} | {t['test_ll']:.3f} "
              f"| {t['gaussian_nll']:.3f} | {t['coverage_95']:.3f} | {t['width_95']:.2f} "
              f"| {t['calibration_error']:.3f} | {t['noise_std']:.3f} | {t['n_iter']} |")
    print(
        "\nRMSE, widths and noise std in the units of y. test LL = mean log_predictive_density (MC mixture, "
        "nats/point, higher is better);\nGaussian NLL = gaussian_nll of the predictive mean and std (the CV "
        "criterion, lower is better); 95% cov = fraction of test targets\ninside the central 95% interval "
        "(ideal 0.95); calib. error = regression_calibration_error (RMS over 20 quantile levels, ideal 0)."
    )

    out = {
        "description": "GridSearchCV over prior_scale x inference of StandardScaler + BayesianMLPRegressor, "
                       "scored by neg_gaussian_nll and by r2; selected models evaluated on the test split.",
        "dataset": bunch.name,
        "split": args.split,
        "n_train": len(y_train),
        "n_test": len(y_test),
        "grid": {"prior_scale": args.prior_scales, "inference": list(INFERENCES), **loop},
        "cv": {"n_splits": args.cv, "shuffle": True, "random_state": 0},
        "estimator_params": {k: v for k, v in pipe[-1].get_params().items() if not callable(v)},
        "cv_results": cv_rows,
        "selected": selected,
        "environment": end_environment(env),
    }
    path = save_json(args.output, out)
    print(f"\nSaved {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
