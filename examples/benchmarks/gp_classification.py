"""Benchmark of SparseGPClassifier against scikit-learn's GaussianProcessClassifier and GPyTorch.

What it does
------------
Small-data mode (the default). For each dataset of ``--datasets`` (default:
breast_cancer, digits, moons) and each of ``--splits`` stratified 75/25
splits (``train_test_split(..., random_state=SPLIT)``), X is standardised
with the training rows' mean and std, and the methods are fitted one after
the other, INTERLEAVED (the order of the methods is rotated by one position
from one split to the next, so that slow drifts of the machine's load do
not favour one method):

``skbayes``       ``SparseGPClassifier(n_inducing=M, random_state=SPLIT)``,
                  defaults otherwise (RBF-ARD kernel starting at length-scale
                  ``sqrt(n_features)``, k-means inducing points, probit for two
                  classes and softmax for more, Adam, batch_size="auto" =
                  min(1024, N), float64 on the CPU).
``skbayes_same_kernel``  the same, with ``kernel=1.0 * RBF(sqrt(n_features))``,
                  the scikit-learn kernel object of the ``sklearn_gpc`` row
                  (one isotropic length-scale instead of one per feature).
``sklearn_gpc``   ``GaussianProcessClassifier(1.0 * RBF(sqrt(n_features)))``,
                  the Laplace approximation with the logit link, one L-BFGS
                  run (no restarts); for more than two classes one-vs-rest,
                  scikit-learn's default.
``gpytorch_svgp`` (two classes only, when GPyTorch is importable)
                  ``gpytorch.models.ApproximateGP`` with a whitened
                  ``VariationalStrategy(learn_inducing_locations=True)``,
                  ``CholeskyVariationalDistribution``,
                  ``ScaleKernel(RBFKernel(ard_num_dims=d))``, ``ConstantMean``
                  and ``BernoulliLikelihood`` (probit), GPyTorch's own initial
                  hyperparameters, on
                  ``VariationalELBO(num_data=N)``, Adam (lr 0.01) on all
                  parameters, float64, the SAME M, the SAME initial inducing
                  points as skbayes (``MiniBatchKMeans`` with the seed that
                  SparseGPClassifier derives from ``random_state=SPLIT``), the
                  SAME batch size, and the SAME WALL TIME: it trains epoch after
                  epoch until the fit time of the skbayes row of the same split
                  has passed.

``moons`` is ``make_moons(1000, noise=0.3, random_state=0)``; breast cancer
(569 x 30) and digits (1797 x 64, 10 classes) are the copies bundled with
scikit-learn. Metrics: test log-loss (nats per point), accuracy, fit time
(wall clock, one process, one fit at a time; k-means included). Aggregates
are mean ± standard error over splits, SE = np.std(ddof=0) / sqrt(n_splits).

Large mode (``--large-rows N``, 10^5 to 10^6). Fits ``SparseGPClassifier``
on N x 8 synthetic rows, X ~ N(0, I), y = 1[sum_j sin(x_j) + 0.3 e > 0],
for ``--max-iter`` epochs at most (default 20 in this mode), and reports
the fit time, epochs, seconds per epoch, the test log-loss and accuracy on
10,000 fresh rows, and the peak resident memory of the process
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``) before and after the fit.
scikit-learn's ``GaussianProcessClassifier`` is not run on N rows: it holds
N x N float64 matrices (the kernel matrix and the Cholesky factor of
I + W^1/2 K W^1/2, at least two at once), so the table reports that need,
2 * 8 N^2 bytes, and, measured, its fit time and peak memory on the random
subsets of ``--sklearn-rows`` rows (default 1000 2000; each must fit
within ``--sklearn-max-gb`` GB by that formula, default 4, or it is
skipped), from which the O(N^3) time at N rows is extrapolated.

How to run
----------
::

    python examples/benchmarks/gp_classification.py --threads 1 --tag small
    python examples/benchmarks/gp_classification.py --large-rows 1000000 --max-iter 5 --threads 2 \\
        --tag large_1m                            # about 70 s per epoch on one thread
    python examples/benchmarks/gp_classification.py --large-rows 100000 --threads 2 --tag large_100k
    python examples/benchmarks/gp_classification.py --datasets moons --splits 1 --n-inducing 16 \\
        --max-iter 5 --threads 1 --tag smoke      # a few seconds

Options: ``--datasets``, ``--splits`` (default 3), ``--n-inducing M``
(default 256), ``--max-iter`` (epoch cap; default 1000, the estimator's, and
20 in large mode), ``--methods`` (default: all), ``--large-rows N``,
``--sklearn-rows`` and ``--sklearn-max-gb`` (large mode), ``--threads``
(``torch.set_num_threads`` and the BLAS pools via threadpoolctl), ``--tag``
(default: a timestamp), ``--output-dir`` (default:
``examples/benchmarks/results/gp_classification/``).

What it prints
--------------
The environment line, one progress line per fit, the markdown table and the
paths of ``gp_classification_<tag>.json`` (settings, per-split raw numbers,
aggregates, environment: library versions, git commit, torch threads,
``os.getloadavg()`` at start and end, command line) and
``gp_classification_<tag>.md``, the table that ``doc/gp_classification.md``
quotes.
"""

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from sklearn.cluster import MiniBatchKMeans
from sklearn.datasets import load_breast_cancer, load_digits, make_moons
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.gaussian_process.kernels import RBF
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from skbayes import SparseGPClassifier
from skbayes.inference import SparseVariational

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    environment, limit_threads, loadavg, output_paths, peak_rss_mb, print_written, run_saving, write_atomic,
    results_dir,
)
from sparse_gp_benchmark import skbayes_init_seed  # noqa: E402

DATASETS = ("breast_cancer", "digits", "moons")
METHODS = ("skbayes", "skbayes_same_kernel", "sklearn_gpc", "gpytorch_svgp")
LARGE_FEATURES, LARGE_TEST_ROWS = 8, 10_000
AUTO_BATCH = 1024  # SparseGPClassifier's batch_size="auto" is min(1024, N)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS))
    parser.add_argument("--splits", type=int, default=3, help="Stratified 75/25 splits (default: 3).")
    parser.add_argument("--n-inducing", type=int, default=256, help="Inducing points M (default: 256).")
    parser.add_argument("--max-iter", type=int, default=None,
                        help="Epoch cap of SparseGPClassifier (default: 1000; 20 in large mode).")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--large-rows", type=int, default=None, help="Large mode: N x 8 synthetic rows.")
    parser.add_argument("--sklearn-rows", type=int, nargs="*", default=[1000, 2000],
                        help="Large mode: subset sizes for sklearn's GPC (default: 1000 2000).")
    parser.add_argument("--sklearn-max-gb", type=float, default=4.0,
                        help="Large mode: skip sklearn subsets needing more than this by 2 * 8 n^2 bytes.")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--tag", default=None)
    parser.add_argument("--output-dir", default=str(results_dir("gp_classification")))
    args = parser.parse_args(argv)
    if args.max_iter is None:
        args.max_iter = 20 if args.large_rows else 1000
    for name in ("splits", "n_inducing", "max_iter", "large_rows", "threads"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    return args


def load(name):
    if name == "breast_cancer":
        return load_breast_cancer(return_X_y=True)
    if name == "digits":
        return load_digits(return_X_y=True)
    return make_moons(1000, noise=0.3, random_state=0)


def scores(y_test, proba, classes):
    return {"log_loss": float(log_loss(y_test, proba, labels=classes)),
            "accuracy": float(accuracy_score(y_test, classes[np.argmax(proba, axis=1)]))}


def fit_skbayes(X_train, y_train, X_test, y_test, n_inducing, seed, max_iter, same_kernel=False):
    if same_kernel:  # scikit-learn's kernel object, the same expression as the sklearn_gpc row
        kernel = {"kernel": 1.0 * RBF(np.sqrt(X_train.shape[1]))}
    else:
        # the "rbf" string's expression, ARD, starting at the length-scale sqrt(d)
        kernel = {"kernel": 1.0 * RBF(np.full(X_train.shape[1], np.sqrt(X_train.shape[1])))}
    model = SparseGPClassifier(
        n_inducing=n_inducing, random_state=seed, **kernel,
        inference=SparseVariational(max_iter=max_iter),
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        start = time.perf_counter()
        model.fit(X_train, y_train)
        elapsed = time.perf_counter() - start
    hit = any(issubclass(w.category, ConvergenceWarning) for w in caught)
    return {**scores(y_test, model.predict_proba(X_test), model.classes_), "fit_time_s": elapsed,
            "n_iter": model.n_iter_, "hit_max_iter": hit, "likelihood": model.likelihood_}


def fit_sklearn(X_train, y_train, X_test, y_test, seed):
    model = GaussianProcessClassifier(1.0 * RBF(np.sqrt(X_train.shape[1])), random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        start = time.perf_counter()
        model.fit(X_train, y_train)
        elapsed = time.perf_counter() - start
    return {**scores(y_test, model.predict_proba(X_test), model.classes_), "fit_time_s": elapsed, "n_iter": None}


def fit_gpytorch(X_train, y_train, X_test, y_test, n_inducing, seed, wall_time):
    """GPyTorch's binary variational classifier for ``wall_time`` seconds (see the module docstring)."""
    try:
        import gpytorch
    except ImportError:
        return None
    dtype = torch.float64
    m = min(n_inducing, X_train.shape[0])
    if m >= X_train.shape[0]:
        z0 = X_train
    else:
        z0 = MiniBatchKMeans(n_clusters=m, n_init=1, random_state=skbayes_init_seed(seed)).fit(X_train).cluster_centers_

    class Model(gpytorch.models.ApproximateGP):
        def __init__(self, z):
            dist = gpytorch.variational.CholeskyVariationalDistribution(z.shape[0])
            strategy = gpytorch.variational.VariationalStrategy(self, z, dist, learn_inducing_locations=True)
            super().__init__(strategy)
            self.mean_module = gpytorch.means.ConstantMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(ard_num_dims=z.shape[1]))

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    start = time.perf_counter()
    model = Model(torch.tensor(z0, dtype=dtype)).to(dtype)
    likelihood = gpytorch.likelihoods.BernoulliLikelihood().to(dtype)
    x, y = torch.tensor(X_train, dtype=dtype), torch.tensor(y_train, dtype=dtype)
    n = x.shape[0]
    batch = min(AUTO_BATCH, n)
    mll = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=n)
    optimizer = torch.optim.Adam([*model.parameters(), *likelihood.parameters()], lr=0.01)
    generator = torch.Generator().manual_seed(seed)
    model.train(), likelihood.train()
    epochs = 0
    while time.perf_counter() - start < wall_time:
        for idx in torch.randperm(n, generator=generator).split(batch):
            optimizer.zero_grad()
            loss = -mll(model(x[idx]), y[idx])
            loss.backward()
            optimizer.step()
        epochs += 1
    elapsed = time.perf_counter() - start
    model.eval(), likelihood.eval()
    with torch.no_grad():
        p1 = likelihood(model(torch.tensor(X_test, dtype=dtype))).mean.numpy()
    proba = np.stack([1 - p1, p1], axis=1)
    return {**scores(y_test, proba, np.array([0, 1])), "fit_time_s": elapsed, "n_iter": epochs}


def aggregate(rows):
    out = {"n_splits": len(rows), "n_hit_max_iter": sum(bool(r.get("hit_max_iter")) for r in rows)}
    for key in ("log_loss", "accuracy", "fit_time_s", "n_iter"):
        values = np.array([np.nan if r[key] is None else r[key] for r in rows], dtype=float)
        out[key] = {"mean": float(np.mean(values)), "se": float(np.std(values) / np.sqrt(len(values)))}
    return out


def fmt(agg, key, digits=3):
    mean, se = agg[key]["mean"], agg[key]["se"]
    return "—" if np.isnan(mean) else f"{mean:.{digits}f} ± {se:.{digits}f}"


LABELS = {
    "skbayes": "skbayes SparseGPClassifier, RBF-ARD, M={m}",
    "skbayes_same_kernel": "skbayes SparseGPClassifier, kernel=1.0 * RBF(sqrt(d)) as sklearn's, M={m}",
    "sklearn_gpc": "sklearn GaussianProcessClassifier (Laplace; one-vs-rest for >2 classes)",
    "gpytorch_svgp": "GPyTorch SVGP + BernoulliLikelihood, M={m}, same wall time",
}


def markdown_small(report):
    s, env = report["settings"], report["environment"]
    lines = ["| dataset | method | n_splits | test log-loss | accuracy | fit time (s) | epochs |",
             "|---|---|---|---|---|---|---|"]
    for name, per_method in report["aggregates"].items():
        for method in METHODS:
            if method not in per_method:
                continue
            agg = per_method[method]
            epochs = "—" if np.isnan(agg["n_iter"]["mean"]) else f"{agg['n_iter']['mean']:.0f}"
            if agg["n_hit_max_iter"]:
                epochs += f" ({agg['n_hit_max_iter']}*)"
            lines.append(f"| {name} | {LABELS[method].format(m=s['n_inducing'])} | {agg['n_splits']} "
                         f"| {fmt(agg, 'log_loss')} | {fmt(agg, 'accuracy')} | {fmt(agg, 'fit_time_s', 2)} "
                         f"| {epochs} |")
    lines += [
        "",
        (f"Mean ± standard error over {s['splits']} stratified 75/25 splits (random_state = split), X "
         "standardised on the training rows; both GPs start from the length-scale sqrt(n_features). "
         f"skbayes: SparseGPClassifier defaults (max_iter={s['max_iter']}, '*': hit the cap). Fit times are "
         "wall clock, one process, one fit at a time, methods interleaved."),
        (f"Environment: torch {env['torch']}, scikit-learn {env['sklearn']}, gpytorch {env['gpytorch']}, "
         f"skbayes {env['skbayes']} (commit {env['git_commit']}), {env['torch_num_threads']} torch threads, "
         f"{env['cpu_count']} CPUs, load average {env['loadavg_start']} at start, {env.get('loadavg_end')} at "
         f"end; complete: {report['complete']}."),
    ]
    if report["skipped"]:
        lines.append("Skipped: " + "; ".join(report["skipped"]) + ".")
    return "\n".join(lines) + "\n"


def markdown_large(report):
    s, env, r = report["settings"], report["environment"], report.get("large", {})
    lines = ["| method | rows | epochs | fit time (s) | s / epoch | test log-loss | accuracy "
             "| peak RSS before / after fit (MB) |", "|---|---|---|---|---|---|---|---|"]
    if "skbayes" in r:
        k = r["skbayes"]
        lines.append(f"| skbayes SparseGPClassifier, M={s['n_inducing']} | {k['n_rows']} "
                     f"| {k['n_iter']}{'*' if k['hit_max_iter'] else ''} | {k['fit_time_s']:.1f} "
                     f"| {k['s_per_epoch']:.2f} | {k['log_loss']:.4f} | {k['accuracy']:.4f} "
                     f"| {k['peak_rss_before_fit_mb']:.0f} / {k['peak_rss_after_fit_mb']:.0f} |")
    for sub in r.get("sklearn_subsets", []):
        lines.append(f"| sklearn GaussianProcessClassifier (subset) | {sub['n_rows']} | — | {sub['fit_time_s']:.1f} "
                     f"| — | {sub['log_loss']:.4f} | {sub['accuracy']:.4f} "
                     f"| {sub['peak_rss_before_fit_mb']:.0f} / {sub['peak_rss_after_fit_mb']:.0f} |")
    need = r.get("sklearn_need", {})
    lines += [
        "",
        (f"Synthetic X ~ N(0, I_8), y = 1[sum_j sin(x_j) + 0.3 e > 0]; test on {LARGE_TEST_ROWS} fresh rows. "
         f"Epoch cap {s['max_iter']} ('*': hit it). Peak RSS is ru_maxrss of the whole process, a high-water "
         "mark (the sklearn subsets run after the skbayes fit)."),
    ]
    if need:
        text = (f"sklearn's GaussianProcessClassifier on all {need['n_rows']} rows: at least two N x N float64 "
                f"matrices, {need['gb']:.3g} GB (this machine: {need['machine_gb']:.3g} GB of RAM)")
        if need.get("extrapolated_fit_time_s"):
            text += (f", and, extrapolating the largest measured subset's time as N^3, about "
                     f"{need['extrapolated_fit_time_s']:.3g} s per fit")
        lines.append(text + ".")
    lines.append(f"Environment: torch {env['torch']}, skbayes {env['skbayes']} (commit {env['git_commit']}), "
                 f"{env['torch_num_threads']} torch threads, {env['cpu_count']} CPUs, load average "
                 f"{env['loadavg_start']} at start, {env.get('loadavg_end')} at end; complete: {report['complete']}.")
    if report["skipped"]:
        lines.append("Skipped: " + "; ".join(report["skipped"]) + ".")
    return "\n".join(lines) + "\n"


def large_data(n, seed):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, LARGE_FEATURES)
    return X, (np.sin(X).sum(axis=1) + 0.3 * rng.randn(n) > 0).astype(int)


def run_large(args, report, save):
    n = args.large_rows
    X, y = large_data(n, 0)
    X_test, y_test = large_data(LARGE_TEST_ROWS, 1)
    large = report["large"] = {}
    if "skbayes" in args.methods:
        before = peak_rss_mb()
        print(f"Large: skbayes, {n} x {LARGE_FEATURES}, M={args.n_inducing}", flush=True)
        res = fit_skbayes(X, y, X_test, y_test, args.n_inducing, 0, args.max_iter)
        res.update({"n_rows": n, "s_per_epoch": res["fit_time_s"] / res["n_iter"],
                    "peak_rss_before_fit_mb": before, "peak_rss_after_fit_mb": peak_rss_mb(), "loadavg": loadavg()})
        large["skbayes"] = res
        print(f"  fit {res['fit_time_s']:.1f} s, {res['n_iter']} epochs, log-loss {res['log_loss']:.4f}, "
              f"accuracy {res['accuracy']:.4f}, peak RSS {peak_rss_mb():.0f} MB", flush=True)
        save()
    machine_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    need = {"n_rows": n, "gb": 2 * 8 * n**2 / 1e9, "machine_gb": machine_gb}
    large["sklearn_need"] = need
    if "sklearn_gpc" in args.methods:
        subsets = large["sklearn_subsets"] = []
        rng = np.random.RandomState(0)
        for size in sorted(args.sklearn_rows):
            if size > n or 2 * 8 * size**2 / 1e9 > args.sklearn_max_gb:
                report["skipped"].append(f"sklearn GPC on {size} rows (over --sklearn-max-gb or N)")
                continue
            idx = rng.choice(n, size, replace=False)
            before = peak_rss_mb()
            res = fit_sklearn(X[idx], y[idx], X_test, y_test, 0)
            res.update({"n_rows": size, "peak_rss_before_fit_mb": before, "peak_rss_after_fit_mb": peak_rss_mb()})
            subsets.append(res)
            print(f"  sklearn GPC on {size} rows: {res['fit_time_s']:.1f} s, log-loss {res['log_loss']:.4f}, "
                  f"peak RSS {peak_rss_mb():.0f} MB", flush=True)
            save()
        if subsets:
            last = subsets[-1]
            need["extrapolated_fit_time_s"] = last["fit_time_s"] * (n / last["n_rows"]) ** 3


def run_small(args, report, save):
    for name in args.datasets:
        X, y = load(name)
        n_classes = len(np.unique(y))
        methods = [m for m in args.methods if not (m == "gpytorch_svgp" and n_classes > 2)]
        if len(methods) < len(args.methods):
            report["skipped"].append(f"gpytorch_svgp on {name} (binary only here)")
        print(f"\n{name}: {X.shape[0]} rows, {X.shape[1]} features, {n_classes} classes", flush=True)
        rows = report["splits"].setdefault(name, {})
        for split in range(args.splits):
            X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, stratify=y, random_state=split)
            scaler = StandardScaler().fit(X_train)
            X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
            # skbayes first within a split when GPyTorch runs: its wall time is GPyTorch's budget
            order = [m for m in methods if m != "gpytorch_svgp"]
            shift = split % len(order)
            order = order[shift:] + order[:shift] + [m for m in methods if m == "gpytorch_svgp"]
            for method in order:
                if method in ("skbayes", "skbayes_same_kernel"):
                    res = fit_skbayes(X_train, y_train, X_test, y_test, args.n_inducing, split, args.max_iter,
                                      same_kernel=method == "skbayes_same_kernel")
                elif method == "sklearn_gpc":
                    res = fit_sklearn(X_train, y_train, X_test, y_test, split)
                else:
                    budget = rows.get("skbayes", [{}])[-1].get("fit_time_s")
                    if budget is None:
                        report["skipped"].append(f"gpytorch_svgp on {name} (needs the skbayes row's time)")
                        continue
                    res = fit_gpytorch(X_train, y_train, X_test, y_test, args.n_inducing, split, budget)
                    if res is None:
                        if "gpytorch (not installed)" not in report["skipped"]:
                            print("Note: GPyTorch is not installed; skipping its rows.", flush=True)
                            report["skipped"].append("gpytorch (not installed)")
                        continue
                rows.setdefault(method, []).append({"split": split, "loadavg": loadavg(), **res})
                report["aggregates"].setdefault(name, {})[method] = aggregate(rows[method])
                epochs = "   —" if res["n_iter"] is None else f"{res['n_iter']:4d}"
                print(f"  {name:<14} {method:<14} split {split}: log-loss {res['log_loss']:.4f}  "
                      f"accuracy {res['accuracy']:.4f}  {epochs} epochs{'*' if res.get('hit_max_iter') else ' '} "
                      f"{res['fit_time_s']:7.2f} s  load {loadavg()[0]}", flush=True)
                save()


def main(argv=None):
    args = parse_args(argv)
    limit_threads(args.threads)
    json_path, md_path = output_paths(args, "gp_classification")
    large = bool(args.large_rows)
    report = {
        "settings": {"mode": "large" if large else "small", "methods": args.methods, "datasets": args.datasets,
                     "splits": args.splits, "n_inducing": args.n_inducing, "max_iter": args.max_iter,
                     "large_rows": args.large_rows, "sklearn_rows": args.sklearn_rows,
                     "estimator_defaults": SparseGPClassifier().get_params(),
                     "standard_error": "np.std(values, ddof=0) / sqrt(n_splits)"},
        "environment": environment(gpytorch=True), "splits": {}, "aggregates": {}, "skipped": [], "complete": False,
    }
    print(f"torch threads: {torch.get_num_threads()}; load average: {report['environment']['loadavg_start']}; "
          f"methods: {' '.join(args.methods)}; '*' after the epochs = stopped at the cap", flush=True)

    def save():
        write_atomic(json_path, json.dumps(report, indent=1, default=str))

    # Untimed warm-up: the first fit in a process pays one-off torch initialisation.
    warm_rng = np.random.RandomState(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        SparseGPClassifier(n_inducing=8, random_state=0, inference=SparseVariational(max_iter=2)).fit(
            warm_rng.randn(64, 3), np.arange(64) % 2)
    run_saving(report, lambda: (run_large if large else run_small)(args, report, save), save,
               lambda: write_atomic(md_path, markdown_large(report) if large else markdown_small(report)))
    print_written(json_path, md_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
