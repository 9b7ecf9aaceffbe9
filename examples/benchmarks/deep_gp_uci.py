"""Benchmark of DeepGPRegressor (2 and 3 layers) against SparseGPRegressor on UCI regression sets.

What it does
------------
For each requested UCI dataset (default: kin8nm, power-plant,
protein-tertiary-structure; absent ones are skipped with a note) and each of
the first ``--splits`` fixed 90/10 splits of ``skbayes.datasets.fetch_uci``,
X is standardised with the training rows' mean and std (``StandardScaler``)
and the methods of ``--methods`` are fitted one after the other on the
training rows, the order of the methods rotated by one position from one
split to the next (slow drifts of the machine's load then favour no method):

``sgp``    ``SparseGPRegressor(n_inducing=M)``
``dgp2``   ``DeepGPRegressor(("auto",), n_inducing=M)`` (2 layers, M per layer)
``dgp3``   ``DeepGPRegressor(("auto", "auto"), n_inducing=M)`` (3 layers)

all with ``random_state=SPLIT`` and the estimators' defaults otherwise: RBF-ARD
kernels, k-means inducing points, batch_size="auto" = min(1024, N), Adam with
step size 0.01, ``normalize_y=True``, float64 on the CPU; the deep GPs with
hidden width min(30, D), one propagated draw per row in training and
``n_mc_predict=100`` mixture components at test ([Salimbeni2017]_).

Budget: every method runs exactly ``--max-iter`` epochs (tol=0 and
n_iter_no_change=max_iter, so none stops earlier); the number of Adam steps
is epochs * ceil(N_train / 1024), reported per row.

Metrics, in the ORIGINAL units of y: test RMSE of the predictive mean; test
LL = mean over test points of ``log_predictive_density``: log N(y | mu,
sigma^2) for the sparse GP, the log of the mixture density
(1/S) sum_s N(y | mu_s, v_s + sigma^2) for the deep GPs; the fitted noise std;
the fit time (wall clock, k-means and the closed-form q(u) passes included)
and the prediction time. Aggregates are mean ± standard error over splits,
SE = np.std(ddof=0) / sqrt(n_splits).

How to run
----------
::

    python examples/benchmarks/deep_gp_uci.py \\
        --splits 3 --max-iter 100 --threads 1 --tag m100_3splits
    python examples/benchmarks/deep_gp_uci.py --datasets kin8nm --splits 1 --max-iter 2 \\
        --threads 1 --tag smoke
    python examples/benchmarks/deep_gp_uci.py --render results/deep_gp/deep_gp_m100_3splits.json

Options: ``--datasets`` (default: the three above), ``--splits N`` (default
1), ``--n-inducing M`` (default 100, the thesis' and Salimbeni and
Deisenroth's M), ``--methods`` (default: sgp dgp2 dgp3), ``--max-iter``
(epochs; default 100), ``--n-mc-predict`` (default 100), ``--threads``
(``torch.set_num_threads`` and the BLAS pools via threadpoolctl),
``--data-home``, ``--tag`` (default: a timestamp), ``--output-dir``
(default: ``examples/benchmarks/results/deep_gp/``), ``--render FILE.json`` (only
rewrite the Markdown table of an earlier results file and print it).

What it prints
--------------
The environment line, one progress line per fit (dataset, method, split,
RMSE, test LL, noise std, epochs, steps, seconds, load average), the final
Markdown table and the paths of ``deep_gp_<tag>.json`` (settings, per-split
raw numbers, aggregates, environment: library versions, torch threads,
``os.getloadavg()`` at start, per fit and at the end, git commit, command
line) and ``deep_gp_<tag>.md``. The JSON and the Markdown are rewritten
after every fit, so an interrupted run keeps the rows it measured.

References
----------
.. [Salimbeni2017] H. Salimbeni and M. Deisenroth, "Doubly stochastic
   variational inference for deep Gaussian processes", NeurIPS 2017.
"""

import argparse
import json
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning

from skbayes import DeepGPRegressor, SparseGPRegressor
from skbayes.inference import SparseVariational
from skbayes.datasets import fetch_uci, get_data_home

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    aggregate_splits, environment, limit_threads, loadavg, output_paths, run_saving, standardised_split, write_atomic,
    results_dir,
)

DATASETS = ("kin8nm", "power-plant", "protein-tertiary-structure")
METHODS = {
    "sgp": (SparseGPRegressor, {}),
    "dgp2": (DeepGPRegressor, {"hidden_layer_sizes": ("auto",)}),
    "dgp3": (DeepGPRegressor, {"hidden_layer_sizes": ("auto", "auto")}),
}
LABELS = {"sgp": "SparseGPRegressor", "dgp2": "DeepGPRegressor, 2 layers", "dgp3": "DeepGPRegressor, 3 layers"}
METRICS = ("test_ll", "rmse", "noise_std", "fit_time_s", "predict_time_s")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), help="UCI datasets (default: %(default)s).")
    parser.add_argument("--splits", type=int, default=1, help="Use the first N fixed splits (default: 1).")
    parser.add_argument("--first-split", type=int, default=0,
                        help="Index of the first split used (default: 0); with --splits N, splits first..first+N-1.")
    parser.add_argument("--n-inducing", type=int, default=100, help="Inducing points M per layer (default: 100).")
    parser.add_argument("--methods", nargs="+", choices=list(METHODS), default=list(METHODS))
    parser.add_argument("--max-iter", type=int, default=100, help="Epochs per fit, exactly (default: 100).")
    parser.add_argument("--n-mc-predict", type=int, default=100, help="Mixture components at test (default: 100).")
    parser.add_argument("--threads", type=int, default=None, help="torch and BLAS threads (default: unchanged).")
    parser.add_argument("--data-home", default=None, help="Folder holding uci/<name>/, a copy that overrides the bundled sets (default: $SKBAYES_DATA_HOME, else the bundled copy).")
    parser.add_argument("--tag", default=None, help="Results file name deep_gp_<tag>.* (default: a timestamp).")
    parser.add_argument("--output-dir", default=str(results_dir("deep_gp")))
    parser.add_argument("--render", nargs="+", default=None,
                        help="Only re-render: the Markdown of this results JSON, or, with several JSONs and --tag, "
                             "one table of their splits merged (written as deep_gp_<tag>.json/.md).")
    args = parser.parse_args(argv)
    for name in ("splits", "n_inducing", "max_iter", "n_mc_predict", "threads"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    return args


def fit_one(method, X_train, y_train, X_test, y_test, args, seed):
    cls, params = METHODS[method]
    if cls is DeepGPRegressor:
        params = {**params, "n_mc_predict": args.n_mc_predict}
    budget = SparseVariational(max_iter=args.max_iter, tol=0.0, n_iter_no_change=args.max_iter)
    model = cls(n_inducing=args.n_inducing, inference=budget, random_state=seed, **params)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X_train, y_train)
    fit_time = time.perf_counter() - start
    start = time.perf_counter()
    mean = model.predict(X_test)
    log_density = model.log_predictive_density(X_test, y_test)
    predict_time = time.perf_counter() - start
    return {
        "rmse": float(np.sqrt(np.mean((mean - y_test) ** 2))),
        "test_ll": float(np.mean(log_density)),
        "noise_std": float(model.noise_std_),
        "n_iter": int(model.n_iter_),
        "n_steps": int(model.n_iter_ * math.ceil(len(y_train) / min(1024, len(y_train)))),
        "final_loss": float(model.loss_curve_[-1]),
        "fit_time_s": fit_time,
        "predict_time_s": predict_time,
        "n_train": int(len(y_train)),
    }


def fmt(agg, key, digits=3):
    return f"{agg[key]['mean']:.{digits}f} ± {agg[key]['se']:.{digits}f}"


def markdown(report):
    s, env = report["settings"], report["environment"]
    lines = [
        f"# Deep GP vs sparse GP on UCI (M={s['n_inducing']} per layer)",
        "",
        "Test LL (nats per point, mixture density for the deep GPs) and RMSE in the units of y; "
        "mean ± standard error over splits. Fixed budget: every fit of a dataset runs exactly the same number of epochs "
        "(batch 1024, Adam 0.01) per dataset: the epochs column.",
        "",
        "| dataset | method | splits | epochs | test LL | RMSE | noise std | fit s | predict s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, methods in report["aggregates"].items():
        for method, agg in methods.items():
            epochs = sorted({r["n_iter"] for r in report["splits"][name][method]})
            epochs = str(epochs[0]) if len(epochs) == 1 else f"{epochs[0]}-{epochs[-1]}"
            lines.append(
                f"| {name} | {LABELS.get(method, method)} | {agg['n_splits']} | {epochs} | {fmt(agg, 'test_ll')} | "
                f"{fmt(agg, 'rmse')} | {fmt(agg, 'noise_std')} | {fmt(agg, 'fit_time_s', 1)} | "
                f"{fmt(agg, 'predict_time_s', 1)} |"
            )
    paired = []
    for name, methods in report["splits"].items():
        base = {r["split"]: r["test_ll"] for r in methods.get("sgp", [])}
        for method in ("dgp2", "dgp3"):
            diffs = [r["test_ll"] - base[r["split"]] for r in methods.get(method, []) if r["split"] in base]
            if diffs:
                paired.append(f"| {name} | {LABELS.get(method, method)} | {sum(d > 0 for d in diffs)} of {len(diffs)} "
                              f"| {np.mean(diffs):+.3f} | {min(diffs):+.3f} | {max(diffs):+.3f} |")
    if paired:
        lines += ["", "Paired by split, test LL of the deep GP minus the sparse GP's:", "",
                  "| dataset | method | splits where higher | mean | min | max |", "|---|---|---|---|---|---|",
                  *paired]
    lines += [
        "",
        f"Environment: torch {env['torch']}, {env['torch_num_threads']} torch threads, {env['cpu_count']} CPUs, "
        f"load average {env['loadavg_start']} at start, {env.get('loadavg_end')} at end; git commit "
        f"{env['git_commit']}; complete: {report['complete']}.",
    ]
    for run in report.get("runs", [])[1:]:
        e = run["environment"]
        lines.append(f"Merged run: git commit {e['git_commit']}, load average {e['loadavg_start']} at start, "
                     f"{e.get('loadavg_end')} at end; complete: {run['complete']}.")
    if report.get("merged_from"):
        lines.append(f"Merged from: {', '.join(report['merged_from'])}.")
    if report["skipped"]:
        lines.append(f"Skipped: {', '.join(report['skipped'])}.")
    return "\n".join(lines) + "\n"


def merge_reports(reports):
    """One report holding the split rows of several runs (e.g. different --first-split), aggregates recomputed."""
    merged = json.loads(json.dumps(reports[0]))
    merged["runs"] = [{"settings": r["settings"], "environment": r["environment"], "complete": r["complete"]}
                      for r in reports]
    for other in reports[1:]:
        for name, methods in other["splits"].items():
            for method, rows in methods.items():
                merged["splits"].setdefault(name, {}).setdefault(method, []).extend(rows)
        merged["skipped"] += [s for s in other["skipped"] if s not in merged["skipped"]]
    merged["aggregates"] = {
        name: {method: aggregate_splits(sorted(rows, key=lambda r: r["split"]), METRICS)
               for method, rows in methods.items()}
        for name, methods in merged["splits"].items()
    }
    merged["complete"] = all(r["complete"] for r in reports)
    return merged


def main(argv=None):
    args = parse_args(argv)
    if args.render:
        paths = [Path(p) for p in args.render]
        report = merge_reports([json.loads(p.read_text()) for p in paths]) if len(paths) > 1 else json.loads(
            paths[0].read_text())
        if len(paths) > 1:
            if not args.tag:
                raise SystemExit("--render with several JSONs needs --tag for the merged files.")
            report["merged_from"] = [p.name for p in paths]
            out = Path(args.output_dir) / f"deep_gp_{args.tag}.json"
            write_atomic(out, json.dumps(report, indent=1, default=str))
        else:
            out = paths[0]
        text = markdown(report)
        write_atomic(out.with_suffix(".md"), text)
        print(text)
        return
    limit_threads(args.threads)
    json_path, md_path = output_paths(args, "deep_gp")
    report = {
        "settings": {
            "datasets_requested": args.datasets, "methods": args.methods, "splits": args.splits, "first_split": args.first_split,
            "n_inducing": args.n_inducing, "max_iter": args.max_iter, "n_mc_predict": args.n_mc_predict,
            "data_home": str(get_data_home(args.data_home)),
            "deep_gp_defaults": DeepGPRegressor().get_params(),
            "standard_error": "np.std(values, ddof=0) / sqrt(n_splits)",
        },
        "environment": environment(),
        "splits": {}, "aggregates": {}, "skipped": [], "complete": False,
    }
    print(f"torch threads: {torch.get_num_threads()}; load average: {report['environment']['loadavg_start']}; "
          f"methods: {' '.join(args.methods)}", flush=True)

    def save():
        write_atomic(json_path, json.dumps(report, indent=1, default=str))
        write_atomic(md_path, markdown(report))

    # Untimed warm-up: the first fit in a process pays one-off torch initialisation.
    warm = np.random.RandomState(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        DeepGPRegressor(n_inducing=8, n_mc_predict=2, random_state=0, inference=SparseVariational(max_iter=2)).fit(
            warm.randn(64, 3), warm.randn(64))
    def run():
        for requested in args.datasets:
            try:
                bunch = fetch_uci(requested, data_home=args.data_home, download_if_missing=False)
            except FileNotFoundError:
                print(f"Skipping {requested}: not found under {get_data_home(args.data_home) / 'uci'}", flush=True)
                report["skipped"].append(f"{requested} (not found)")
                continue
            name = bunch.name
            split_ids = range(args.first_split, min(args.first_split + args.splits, bunch.n_splits))
            n_splits = len(split_ids)
            print(f"\n{name}: {bunch.data.shape[0]} rows, {bunch.data.shape[1]} features, "
                  f"{n_splits} of {bunch.n_splits} splits", flush=True)
            rows = report["splits"].setdefault(name, {})
            for split in split_ids:
                X_train, X_test, y_train, y_test = standardised_split(bunch, split)
                shift = split % len(args.methods)
                for method in args.methods[shift:] + args.methods[:shift]:
                    res = fit_one(method, X_train, y_train, X_test, y_test, args, split)
                    rows.setdefault(method, []).append({"split": split, "loadavg": loadavg(), **res})
                    report["aggregates"].setdefault(name, {})[method] = aggregate_splits(rows[method], METRICS)
                    print(f"  {name:<12} {method:<5} split {split:>2}: RMSE {res['rmse']:8.4f}  "
                          f"LL {res['test_ll']:8.4f}  noise {res['noise_std']:.4f}  {res['n_iter']} epochs "
                          f"({res['n_steps']} steps) {res['fit_time_s']:7.1f} s fit "
                          f"{res['predict_time_s']:5.1f} s predict  load {loadavg()[0]}", flush=True)
                    save()

    run_saving(report, run, save)
    print()
    print(md_path.read_text())
    print(f"Wrote {json_path} and {md_path}")


if __name__ == "__main__":
    main()
