"""UCI regression benchmark of BayesianMLPRegressor on the fixed splits.

What it does
------------
Runs the protocol of Hernández-Lobato & Adams (2015) and Gal & Ghahramani
(2016) with the library's DEFAULT settings (no per-dataset tuning): for each
UCI dataset found in the data folder (``skbayes.datasets.UCI_DATASETS``;
absent ones are skipped with a note) and each of its fixed 90/10 train/test
splits, it fits

    Pipeline([("scaler", StandardScaler()),
              ("model", BayesianMLPRegressor(inference=METHOD,
                                             hidden_layer_sizes=(50,),
                                             noise="homoscedastic",
                                             random_state=SPLIT))])

(``(100,)`` hidden units for protein-tertiary-structure, as in the reference
rows) on the training split; X is standardised with the training split's
statistics by the scaler, y by the estimator's ``normalize_y=True`` default.
It then measures, in the ORIGINAL units of y, the test RMSE of the predictive
mean and the mean test log-likelihood ``log_predictive_density`` (the
Monte-Carlo mixture density of the protocol), plus the 95% interval coverage,
the fit time, the number of epochs run (``n_iter_``) and seconds per epoch.
Results are aggregated as mean ± standard error over splits, with
SE = std / sqrt(n_splits) and std with ddof=0 (``np.std``, as in the
reference code, DropoutUncertaintyExps/experiment.py).

Splits are processed one at a time in a single process; the JSON results file
is rewritten after every fit, so an interrupted run (Ctrl-C) keeps what it
measured. The estimator's default ``device="auto"`` is kept, so on a machine
with CUDA the fits run on the GPU in float32 (recorded per split). On a
shared or small CPU machine, ``--threads 1`` keeps the timings stable: torch
uses one thread per core by default and slows down badly when another process
competes for the cores.

How to run
----------
::

    python examples/benchmarks/uci_benchmark.py
    python examples/benchmarks/uci_benchmark.py --data-home /path/to/data \\
        --datasets concrete energy --splits 5 --methods mfvi --tag quick

Options: ``--datasets`` (names or aliases; default: all present),
``--splits N`` (first N splits; default: all), ``--methods`` (default:
``mfvi mc_dropout``; any of ``mfvi mc_dropout pbp vadam sghmc ensemble``),
``--max-iter`` (the inference method's ``max_iter``; default: the method's
default; ``sghmc`` has its own schedule and no ``max_iter``),
``--params NAME=VALUE ...`` (other parameters: those of the inference method,
e.g. ``burn_in=500``, ``init=iblm`` or the training loop's
``learning_rate_init=0.01``, go to its object in
``skbayes.inference``, e.g. ``SGHMC(burn_in=500)``, and are skipped, with a
note, for the methods that do not have them; the others go to the estimator,
e.g. ``batch_size=8``),
``--threads`` (``torch.set_num_threads``; default: torch's default),
``--tag`` (file name; default: a timestamp), ``--output-dir`` (default:
``examples/benchmarks/results/uci/``).

What it prints
--------------
A note for every skipped dataset, one progress line per fit (dataset, method,
split, RMSE, test LL, epochs, seconds), the final markdown table and the paths
of the two files written: ``uci_<tag>.json`` (per-split raw numbers,
aggregates, published reference numbers and the environment: library
versions, torch threads, ``os.getloadavg()`` at start and end, command line)
and ``uci_<tag>.md`` (a table with columns dataset, method, n_splits, RMSE,
test LL, fit time per split, epochs and the published reference LLs for comparison).
"""

import argparse
import ast
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from skbayes import BayesianMLPRegressor
from skbayes.datasets import UCI_DATASETS, fetch_uci, get_data_home, get_uci_split
from skbayes.inference import ALIASES

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    environment, limit_threads, output_paths, print_written, run_saving, write_atomic, results_dir,
)

# Published reference numbers, (mean, standard error):
# * "gal": MC dropout with a grid search over dropout rate and tau on an inner
#   80/20 split, 400 epochs, 1x50 ReLU (1x100 for protein); Gal,
#   DropoutUncertaintyExps, 2018 re-run.
# * "bbb", "mcd40", "pbp", "vadam": Bayes by Backprop, MC dropout at 40
#   epochs, probabilistic backpropagation and variational Adam, 1x50,
#   hyperparameters by Bayesian optimisation with 5-fold CV inside the training
#   split (Cinelli 2019, Tables 3.2 and 3.3).
#   There are no protein rows in that table.
REFERENCE = {
    "bostonHousing": {
        "gal_rmse": (2.90, 0.18), "gal_ll": (-2.40, 0.04),
        "bbb_rmse": (3.630, 0.2262), "bbb_ll": (-2.751, 0.057),
        "mcd40_rmse": (3.700, 0.1806), "mcd40_ll": (-2.747, 0.039),
        "pbp_rmse": (2.965, 0.1704), "pbp_ll": (-2.558, 0.084),
        "vadam_rmse": (3.852, 0.2689), "vadam_ll": (-2.840, 0.074),
    },
    "concrete": {
        "gal_rmse": (4.82, 0.16), "gal_ll": (-2.93, 0.02),
        "bbb_rmse": (6.183, 0.1052), "bbb_ll": (-3.242, 0.017),
        "mcd40_rmse": (10.031, 0.1847), "mcd40_ll": (-3.729, 0.017),
        "pbp_rmse": (5.683, 0.1098), "pbp_ll": (-3.164, 0.022),
        "vadam_rmse": (6.846, 0.0712), "vadam_ll": (-3.408, 0.012),
    },
    "energy": {
        "gal_rmse": (0.54, 0.06), "gal_ll": (-1.21, 0.01),
        "bbb_rmse": (2.747, 0.0609), "bbb_ll": (-2.460, 0.023),
        "mcd40_rmse": (1.697, 0.0663), "mcd40_ll": (-1.968, 0.040),
        "pbp_rmse": (1.817, 0.0525), "pbp_ll": (-2.049, 0.022),
        "vadam_rmse": (1.722, 0.1364), "vadam_ll": (-2.220, 0.078),
    },
    "kin8nm": {
        "gal_rmse": (0.08, 0.00), "gal_ll": (1.14, 0.01),
        "bbb_rmse": (0.096, 0.0005), "bbb_ll": (0.939, 0.007),
        "mcd40_rmse": (0.163, 0.0001), "mcd40_ll": (0.379, 0.011),
        "pbp_rmse": (0.092, 0.0000), "pbp_ll": (0.957, 0.000),
        "vadam_rmse": (0.106, 0.0012), "vadam_ll": (0.737, 0.006),
    },
    "naval-propulsion-plant": {
        "gal_rmse": (0.00, 0.00), "gal_ll": (4.45, 0.00),
        "bbb_rmse": (0.004, 0.0002), "bbb_ll": (4.210, 0.048),
        "mcd40_rmse": (0.011, 0.0001), "mcd40_ll": (3.050, 0.020),
        "pbp_rmse": (0.006, 0.0000), "pbp_ll": (3.667, 0.005),
        "vadam_rmse": (0.002, 0.0001), "vadam_ll": (5.131, 0.065),
    },
    "power-plant": {
        "gal_rmse": (4.01, 0.04), "gal_ll": (-2.80, 0.01),
        "bbb_rmse": (4.258, 0.0352), "bbb_ll": (-2.866, 0.009),
        "mcd40_rmse": (7.041, 0.0380), "mcd40_ll": (-3.372, 0.006),
        "pbp_rmse": (4.132, 0.0327), "pbp_ll": (-2.839, 0.008),
        "vadam_rmse": (4.290, 0.0303), "vadam_ll": (-2.878, 0.008),
    },
    "protein-tertiary-structure": {
        "gal_rmse": (4.27, 0.02), "gal_ll": (-2.87, 0.00),
    },
    "wine-quality-red": {
        "gal_rmse": (0.62, 0.01), "gal_ll": (-0.93, 0.01),
        "bbb_rmse": (0.660, 0.0084), "bbb_ll": (-1.053, 0.044),
        "mcd40_rmse": (0.654, 0.0080), "mcd40_ll": (-0.998, 0.013),
        "pbp_rmse": (0.635, 0.0078), "pbp_ll": (-0.968, 0.014),
        "vadam_rmse": (0.653, 0.0085), "vadam_ll": (-1.042, 0.029),
    },
    "yacht": {
        "gal_rmse": (0.67, 0.05), "gal_ll": (-1.25, 0.01),
        "bbb_rmse": (2.342, 0.0927), "bbb_ll": (-2.482, 0.015),
        "mcd40_rmse": (1.612, 0.0883), "mcd40_ll": (-1.952, 0.033),
        "pbp_rmse": (1.071, 0.0512), "pbp_ll": (-1.645, 0.016),
        "vadam_rmse": (1.432, 0.1025), "vadam_ll": (-1.738, 0.042),
    },
}

METHODS = ("mfvi", "mc_dropout", "pbp", "vadam", "sghmc", "ensemble")
METRICS = ("rmse", "test_ll", "coverage_95", "fit_time_s", "n_iter", "s_per_epoch")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--datasets", nargs="+", default=None,
                        help="UCI names or aliases (default: every dataset present in the data folder).")
    parser.add_argument("--splits", type=int, default=None,
                        help="Use only the first N fixed splits (default: all).")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=["mfvi", "mc_dropout"],
                        help="Inference methods (default: mfvi mc_dropout).")
    parser.add_argument("--max-iter", type=int, default=None,
                        help="max_iter of the inference method (default: the method's default; "
                             "sghmc has its own schedule and no max_iter).")
    parser.add_argument("--params", nargs="+", default=[], metavar="NAME=VALUE",
                        help="Other parameters, e.g. batch_size=8 init=iblm burn_in=500: those of an "
                             "inference method go to its object (skipped for the methods without them), "
                             "the others to the estimator (values parsed as Python literals when "
                             "possible; default: none).")
    parser.add_argument("--data-home", default=None,
                        help="Folder holding uci/<name>/ (a copy that overrides the bundled sets; default: $SKBAYES_DATA_HOME, else ~/.cache/skbayes, else the bundled copy).")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch.set_num_threads(N) (default: leave torch's default).")
    parser.add_argument("--tag", default=None, help="Results file name uci_<tag>.* (default: a timestamp).")
    parser.add_argument("--output-dir", default=str(results_dir("uci")),
                        help="Folder for the results (default: examples/benchmarks/results/uci/).")
    args = parser.parse_args(argv)
    if args.splits is not None and args.splits < 1:
        parser.error("--splits must be >= 1")
    if args.max_iter is not None and args.max_iter < 1:
        parser.error("--max-iter must be >= 1")
    if args.threads is not None and args.threads < 1:
        parser.error("--threads must be >= 1")
    extra = {}
    for item in args.params:
        name, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--params takes NAME=VALUE pairs; got {item!r}")
        try:
            extra[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            extra[name] = value
    args.params = extra
    return args


def hidden_layer_sizes(name):
    return (100,) if name == "protein-tertiary-structure" else (50,)


# Parameters of any inference method (e.g. burn_in, dropout_rate, init).
METHOD_PARAMETERS = {name for cls in ALIASES.values() for name in cls().get_params()}


def split_params(method, params):
    """Route ``--params`` between the inference object of ``method`` and the estimator.

    Returns ``(method_params, estimator_params, skipped)``: the parameters of
    ``method``'s class (e.g. ``SGHMC``'s ``burn_in``), the estimator's, and
    those that belong to other inference methods only.
    """
    own = set(ALIASES[method]().get_params())
    method_params = {k: v for k, v in params.items() if k in own}
    skipped = sorted(k for k in params if k in METHOD_PARAMETERS and k not in own)
    estimator_params = {k: v for k, v in params.items() if k not in METHOD_PARAMETERS}
    return method_params, estimator_params, skipped


def make_model(method, hidden, seed, max_iter=None, extra=None):
    """BayesianMLPRegressor with ``inference=<method object>`` and the routed ``extra`` parameters.

    ``max_iter`` goes to the inference object, for the methods that have it
    (not SGHMC, whose schedule is its own).
    """
    method_params, params, _ = split_params(method, extra or {})
    if max_iter is not None and "max_iter" in ALIASES[method]().get_params():
        method_params["max_iter"] = max_iter
    inference = ALIASES[method](**method_params)
    params = {"noise": "homoscedastic", **params}  # the noise model of the published comparisons
    return BayesianMLPRegressor(inference=inference, hidden_layer_sizes=hidden, random_state=seed, **params)


def run_one(X_train, X_test, y_train, y_test, method, hidden, seed, max_iter, extra=None):
    pipe = Pipeline([
        ("scaler", StandardScaler()),
        ("model", make_model(method, hidden, seed, max_iter, extra)),
    ])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        start = time.perf_counter()
        pipe.fit(X_train, y_train)
        fit_time = time.perf_counter() - start
    model = pipe["model"]
    start = time.perf_counter()
    Xt = pipe["scaler"].transform(X_test)
    pred = model.predict_uncertainty(Xt)
    test_ll = float(np.mean(model.log_predictive_density(Xt, y_test)))
    predict_time = time.perf_counter() - start
    z = 1.959963984540054  # central 95% interval, as predict_interval(coverage=0.95)
    return {
        "rmse": float(np.sqrt(np.mean((pred.mean - y_test) ** 2))),
        "test_ll": test_ll,
        "coverage_95": float(np.mean(np.abs(y_test - pred.mean) <= z * pred.std)),
        "mean_epistemic_std": float(np.mean(pred.epistemic_std)),
        "noise_std": float(model.noise_std_[0]),
        "fit_time_s": fit_time,
        "predict_time_s": predict_time,
        "n_iter": int(model.n_iter_),
        "s_per_epoch": fit_time / model.n_iter_,
        "hit_max_iter": any(issubclass(w.category, ConvergenceWarning) for w in caught),
        "final_loss": float(model.loss_curve_[-1]),
        "device": str(model.device_),
        "dtype": model.dtype_,
    }


def aggregate(rows):
    out = {"n_splits": len(rows)}
    for key in METRICS:
        values = np.array([r[key] for r in rows], dtype=float)
        out[key] = {"mean": float(values.mean()), "se": float(values.std() / np.sqrt(len(values)))}
    out["n_hit_max_iter"] = int(sum(r["hit_max_iter"] for r in rows))
    return out


def fmt(pair, digits=3):
    if pair is None:
        return "—"
    mean, se = pair
    return f"{mean:.{digits}f} ± {se:.{digits}f}"


def markdown_table(report):
    lines = [
        "| dataset | method | n_splits | RMSE | test LL | fit time (s) | epochs | "
        "ref Gal MC dropout RMSE | ref Gal MC dropout LL | ref BBB LL | ref MCD40 LL | ref PBP LL | ref Vadam LL |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, per_method in report["aggregates"].items():
        ref = REFERENCE.get(name, {})
        for method, agg in per_method.items():
            lines.append(
                f"| {name} | {method} | {agg['n_splits']} "
                f"| {fmt((agg['rmse']['mean'], agg['rmse']['se']))} "
                f"| {fmt((agg['test_ll']['mean'], agg['test_ll']['se']))} "
                f"| {fmt((agg['fit_time_s']['mean'], agg['fit_time_s']['se']), 1)} "
                f"| {agg['n_iter']['mean']:.0f} "
                f"| {fmt(ref.get('gal_rmse'), 2)} | {fmt(ref.get('gal_ll'), 2)} "
                f"| {fmt(ref.get('bbb_ll'))} | {fmt(ref.get('mcd40_ll'))} "
                f"| {fmt(ref.get('pbp_ll'))} | {fmt(ref.get('vadam_ll'))} |"
            )
    s = report["settings"]
    env = report["environment"]
    notes = [
        "",
        "BayesianMLPRegressor with default parameters except hidden_layer_sizes, random_state=split"
        + ("" if s["max_iter"] is None else f", the inference method's max_iter={s['max_iter']}")
        + "".join(f", {k}={v!r}" for k, v in s.get("params", {}).items())
        + "; mean ± standard error "
        "(np.std / sqrt(n_splits)) over the splits; RMSE and test LL (nats per point) in the original "
        "units of y; fit time per split in seconds (wall clock, one fit at a time). Reference columns: "
        "Gal's grid-searched MC dropout (400 epochs) and BBB / MCD40 / PBP / Vadam (40 epochs, "
        "Cinelli 2019, Tables 3.2-3.3), as published; they were tuned per dataset, these rows "
        "were not.",
        f"Environment: torch {env['torch']}, scikit-learn {env['sklearn']}, skbayes {env['skbayes']}, "
        f"{env['torch_num_threads']} torch threads, load average {env['loadavg_start']} at start, "
        f"{env.get('loadavg_end')} at end; complete: {report['complete']}.",
    ]
    return "\n".join(lines + notes) + "\n"


def main(argv=None):
    args = parse_args(argv)
    limit_threads(args.threads, blas=False)
    json_path, md_path = output_paths(args, "uci")

    data_home = get_data_home(args.data_home)
    report = {
        "settings": {
            "datasets_requested": args.datasets, "splits": args.splits, "methods": args.methods,
            "max_iter": args.max_iter, "params": args.params, "data_home": str(data_home),
            "estimator_defaults": {k: (list(v) if isinstance(v, tuple) else v)
                                   for k, v in BayesianMLPRegressor().get_params().items()},
            "hidden_layer_sizes": "(100,) for protein-tertiary-structure, else (50,)",
            "standard_error": "np.std(values, ddof=0) / sqrt(n_splits)",
        },
        "environment": environment(interop_threads=True),
        "reference": REFERENCE,
        "splits": {},
        "aggregates": {},
        "skipped": [],
        "complete": False,
    }

    names = args.datasets or list(UCI_DATASETS)
    print(f"Data home: {data_home}; torch threads: {torch.get_num_threads()}; "
          f"load average: {report['environment']['loadavg_start']}; "
          "'*' after the epochs = stopped at max_iter", flush=True)

    def save():
        write_atomic(json_path, json.dumps(report, indent=1))

    # Untimed warm-up fit: the first fit in a process pays ~1 s of one-off torch
    # initialisation, which would otherwise inflate the first split's timing.
    warm_rng = np.random.RandomState(0)
    for method in args.methods:
        skipped = split_params(method, args.params)[2]
        if skipped:
            print(f"Note: {method} ({ALIASES[method].__name__}) has no parameter {', '.join(skipped)}; "
                  "skipped for it.", flush=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            warm = ALIASES[method]()
            if "max_iter" in warm.get_params():  # two epochs (SGHMC: its own schedule)
                warm.set_params(max_iter=2)
            BayesianMLPRegressor(inference=warm, random_state=0).fit(warm_rng.randn(64, 3), warm_rng.randn(64))

    def run():
        for requested in names:
            try:
                bunch = fetch_uci(requested, data_home=args.data_home, download_if_missing=False)
            except FileNotFoundError:
                print(f"Skipping {requested}: not found under {data_home / 'uci'}", flush=True)
                report["skipped"].append(requested)
                continue
            name = bunch.name
            n_splits = bunch.n_splits if args.splits is None else min(args.splits, bunch.n_splits)
            hidden = hidden_layer_sizes(name)
            print(f"\n{name}: {bunch.data.shape[0]} rows, {bunch.data.shape[1]} features, "
                  f"{n_splits} of {bunch.n_splits} splits, hidden_layer_sizes={hidden}", flush=True)
            rows = report["splits"].setdefault(name, {m: [] for m in args.methods})
            for split in range(n_splits):
                X_train, X_test, y_train, y_test = get_uci_split(bunch, split)
                for method in args.methods:
                    res = run_one(X_train, X_test, y_train, y_test, method, hidden, split, args.max_iter,
                                  args.params)
                    rows[method].append({"split": split, **res})
                    report["aggregates"].setdefault(name, {})[method] = aggregate(rows[method])
                    save()
                    print(f"  {name:<27} {method:<10} split {split:>2}: RMSE {res['rmse']:8.4f}  "
                          f"LL {res['test_ll']:8.4f}  cov95 {res['coverage_95']:.3f}  "
                          f"{res['n_iter']:4d} epochs{'*' if res['hit_max_iter'] else ' '} "
                          f"{res['fit_time_s']:7.2f} s ({res['s_per_epoch']:.4f} s/epoch)", flush=True)

    run_saving(report, run, save, lambda: write_atomic(md_path, markdown_table(report)))

    print_written(json_path, md_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
