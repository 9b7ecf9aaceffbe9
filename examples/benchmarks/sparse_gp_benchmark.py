"""Benchmark of SparseGPRegressor against GPyTorch's SVGP and an exact GP.

What it does
------------
UCI mode (the default). For each requested UCI dataset (default: kin8nm and
power-plant; absent ones are skipped with a note) and each of the first
``--splits`` fixed 90/10 splits, X is standardised with the training rows'
mean and std (``StandardScaler``), and three models are fitted on the
training rows:

(a) ``skbayes``: ``SparseGPRegressor(n_inducing=M, random_state=SPLIT)``,
    defaults otherwise (RBF-ARD kernel, k-means initial inducing points,
    batch_size="auto" = min(1024, N), Adam lr 0.01, ``normalize_y=True``,
    float64 on the CPU), except ``max_iter`` when ``--max-iter`` is given.
(b) ``gpytorch_svgp`` (optional; skipped with a note when GPyTorch is not
    installed): ``gpytorch.models.ApproximateGP`` with a
    ``CholeskyVariationalDistribution``, a
    ``VariationalStrategy(learn_inducing_locations=True)`` (whitened),
    ``ScaleKernel(RBFKernel(ard_num_dims=d))``, ``ConstantMean`` and a
    ``GaussianLikelihood``, trained on ``VariationalELBO(num_data=N)`` with
    Adam (lr 0.01) over all parameters, in float64, on y standardised with the
    training mean and std. It gets the SAME M, the SAME initial inducing
    points (``MiniBatchKMeans(n_clusters=M, n_init=1)`` with the seed that
    SparseGPRegressor derives from ``random_state=SPLIT``, so Z starts
    identical), the SAME batch size and the SAME number of epochs that (a)
    actually ran (its ``n_iter_``), reshuffling the rows every epoch.
    GPyTorch's own initial hyperparameters are kept (standard, untuned use).
(c) ``exact_gp``: scikit-learn's
    ``GaussianProcessRegressor(ConstantKernel() * RBF(length_scale=np.ones(d))
    + WhiteKernel(), normalize_y=True)`` (one L-BFGS run, no restarts) on a
    random subset (seeded by the split) of at most ``--exact-max-rows``
    training rows: the exact GP at the size where it fits in memory and time
    (on power-plant, one likelihood evaluation on all 8611 rows took 33 s and
    11 GB). The rows used are reported.

Metrics, in the ORIGINAL units of y: test RMSE of the predictive mean, test
LL = mean over test points of log N(y_i | mu_i, sigma_i^2), sigma_i including
the observation noise, and the fit time in seconds (wall clock; for (a) and
(b) it includes the k-means initialisation, for (b) the model construction).
Aggregates are mean ± standard error over splits, SE = np.std(ddof=0) /
sqrt(n_splits), as in uci_benchmark.py. Fits run one at a time in one
process; the JSON is rewritten after every fit so an interrupted run keeps
what it measured.

Synthetic mode (``--synthetic-rows N``). Instead of the UCI runs, fits
``SparseGPRegressor(n_inducing=M, random_state=0)`` (``max_iter`` from
``--max-iter``, else the default) on N x 8 synthetic data, X ~ N(0, I) and
y = sum_j sin(x_j) + 0.1 * noise, and reports the fit time, epochs, seconds
per epoch and the peak resident memory of the process
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``, kilobytes on Linux), plus the
peak before fitting (after generating the data) for reference.

How to run
----------
::

    SKBAYES_DATA_HOME=/path/to/data python examples/benchmarks/sparse_gp_benchmark.py \\
        --threads 1 --tag default
    python examples/benchmarks/sparse_gp_benchmark.py --datasets kin8nm --splits 1 \\
        --n-inducing 128 --max-iter 100 --threads 1 --tag quick
    python examples/benchmarks/sparse_gp_benchmark.py --synthetic-rows 200000 \\
        --max-iter 5 --threads 1 --tag synthetic_200k

Options: ``--datasets`` (default: kin8nm power-plant), ``--splits N``
(default 3), ``--n-inducing M`` (default 256), ``--max-iter`` (default: the
estimator's default, 1000), ``--exact-max-rows`` (default 2000; 0 skips the
exact GP), ``--no-gpytorch`` (skip (b)), ``--synthetic-rows N``,
``--threads`` (``torch.set_num_threads`` and the BLAS thread pools via
threadpoolctl; default: leave the defaults), ``--data-home``, ``--tag``
(default: a timestamp), ``--output-dir`` (default:
``examples/benchmarks/results/``).

What it prints
--------------
The environment line (threads, load average), a note for every skipped
dataset or method, one progress line per fit (dataset, method, split, rows
used, RMSE, test LL, epochs, seconds), the final markdown table and the paths
of the two files written: ``sparse_gp_<tag>.json`` (settings, per-split raw
numbers, aggregates, reference numbers, environment: library versions, torch
threads, ``os.getloadavg()`` at start and end, command line) and
``sparse_gp_<tag>.md`` (the table and those notes).
"""

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import sklearn
import torch
from sklearn.cluster import MiniBatchKMeans
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
from sklearn.preprocessing import StandardScaler
from sklearn.utils import check_random_state

import skbayes
from skbayes import SparseGPRegressor
from skbayes.datasets import get_data_home, get_uci_split, load_uci

METHODS = ("skbayes", "gpytorch_svgp", "exact_gp")
METRICS = ("rmse", "test_ll", "fit_time_s", "n_iter", "n_train_used")
LOG_2PI = float(np.log(2 * np.pi))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--datasets", nargs="+", default=["kin8nm", "power-plant"],
                        help="UCI names or aliases (default: kin8nm power-plant).")
    parser.add_argument("--splits", type=int, default=3, help="Use the first N fixed splits (default: 3).")
    parser.add_argument("--n-inducing", type=int, default=256, help="Inducing points M (default: 256).")
    parser.add_argument("--max-iter", type=int, default=None,
                        help="max_iter (epochs) of SparseGPRegressor (default: the estimator's default).")
    parser.add_argument("--exact-max-rows", type=int, default=2000,
                        help="Training rows for the exact GP, a random subset (default: 2000; 0 skips it).")
    parser.add_argument("--no-gpytorch", action="store_true", help="Skip the GPyTorch SVGP column.")
    parser.add_argument("--synthetic-rows", type=int, default=None,
                        help="Synthetic mode: fit SparseGPRegressor on N x 8 synthetic rows instead of UCI.")
    parser.add_argument("--data-home", default=None,
                        help="Folder holding uci/<name>/ (default: $SKBAYES_DATA_HOME, else ~/.cache/skbayes).")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch.set_num_threads(N) and BLAS threads (default: leave the defaults).")
    parser.add_argument("--tag", default=None, help="Results file name sparse_gp_<tag>.* (default: a timestamp).")
    parser.add_argument("--output-dir", default=str(Path(__file__).resolve().parent / "results"),
                        help="Folder for the results (default: examples/benchmarks/results/).")
    args = parser.parse_args(argv)
    for name in ("splits", "n_inducing", "max_iter", "threads", "synthetic_rows"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.exact_max_rows < 0:
        parser.error("--exact-max-rows must be >= 0")
    return args


def git_commit():
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent,
                             capture_output=True, text=True, timeout=10, check=False)
        return (out.stdout.strip() or None) if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def loadavg():
    return [round(v, 2) for v in os.getloadavg()]


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # kilobytes on Linux


def gaussian_ll(y, mean, std):
    return float(np.mean(-0.5 * LOG_2PI - np.log(std) - 0.5 * ((y - mean) / std) ** 2))


def metrics(y_test, mean, std):
    return {"rmse": float(np.sqrt(np.mean((mean - y_test) ** 2))), "test_ll": gaussian_ll(y_test, mean, std)}


def skbayes_init_seed(random_state):
    """The seed SparseGPRegressor.fit passes to MiniBatchKMeans for an integer random_state."""
    return int(check_random_state(random_state).randint(0, 2**31 - 1, size=2)[0])


def fit_skbayes(X_train, y_train, X_test, y_test, n_inducing, seed, max_iter):
    params = {} if max_iter is None else {"max_iter": max_iter}
    model = SparseGPRegressor(n_inducing=n_inducing, random_state=seed, **params)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        start = time.perf_counter()
        model.fit(X_train, y_train)
        fit_time = time.perf_counter() - start
    mean, std = model.predict(X_test, return_std=True)
    res = metrics(y_test, mean, std)
    res["test_ll_log_predictive_density"] = float(np.mean(model.log_predictive_density(X_test, y_test)))
    res.update({
        "fit_time_s": fit_time, "n_iter": int(model.n_iter_), "n_train_used": int(X_train.shape[0]),
        "s_per_epoch": fit_time / model.n_iter_,
        "hit_max_iter": any(issubclass(w.category, ConvergenceWarning) for w in caught),
        "final_loss": float(model.loss_curve_[-1]), "noise_std": float(model.noise_std_),
        "batch_size": min(1024, X_train.shape[0]) if model.batch_size == "auto" else int(model.batch_size),
        "device": str(model.device_), "dtype": model.dtype_,
    })
    return res


def fit_gpytorch(X_train, y_train, X_test, y_test, n_inducing, seed, n_epochs, batch_size):
    """GPyTorch SVGP with the same M, initial Z, batch size and epochs; None if not installed."""
    try:
        import gpytorch
    except ImportError:
        return None

    class SVGPModel(gpytorch.models.ApproximateGP):
        def __init__(self, inducing_points):
            distribution = gpytorch.variational.CholeskyVariationalDistribution(inducing_points.size(0))
            strategy = gpytorch.variational.VariationalStrategy(
                self, inducing_points, distribution, learn_inducing_locations=True)
            super().__init__(strategy)
            self.mean_module = gpytorch.means.ConstantMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(
                gpytorch.kernels.RBFKernel(ard_num_dims=inducing_points.size(1)))

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    dtype = torch.float64
    start = time.perf_counter()
    y_mean, y_std = float(y_train.mean()), float(y_train.std()) or 1.0
    n, m = X_train.shape[0], min(n_inducing, X_train.shape[0])
    if m >= n:
        Z = X_train.copy()
    else:
        Z = MiniBatchKMeans(n_clusters=m, n_init=1, random_state=skbayes_init_seed(seed)).fit(
            X_train).cluster_centers_
    X_t = torch.as_tensor(X_train, dtype=dtype)
    y_t = torch.as_tensor((y_train - y_mean) / y_std, dtype=dtype)
    model = SVGPModel(torch.as_tensor(Z, dtype=dtype)).to(dtype)
    likelihood = gpytorch.likelihoods.GaussianLikelihood().to(dtype)
    model.train()
    likelihood.train()
    optimizer = torch.optim.Adam([*model.parameters(), *likelihood.parameters()], lr=0.01)
    mll = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=n)
    generator = torch.Generator().manual_seed(int(seed))
    losses = []
    for _ in range(n_epochs):
        perm = torch.randperm(n, generator=generator)
        total = 0.0
        for i in range(0, n, batch_size):
            idx = perm[i:i + batch_size]
            optimizer.zero_grad()
            loss = -mll(model(X_t[idx]), y_t[idx])
            loss.backward()
            optimizer.step()
            total += loss.item() * len(idx)
        losses.append(total / n)
    fit_time = time.perf_counter() - start
    model.eval()
    likelihood.eval()
    with torch.no_grad():
        pred = likelihood(model(torch.as_tensor(X_test, dtype=dtype)))
        mean = pred.mean.numpy() * y_std + y_mean
        std = np.sqrt(pred.variance.numpy()) * y_std
    res = metrics(y_test, mean, std)
    res.update({
        "fit_time_s": fit_time, "n_iter": n_epochs, "n_train_used": n, "s_per_epoch": fit_time / n_epochs,
        "hit_max_iter": False, "final_loss": losses[-1] if losses else None,
        "noise_std": float(np.sqrt(likelihood.noise.item()) * y_std), "batch_size": batch_size,
        "gpytorch": gpytorch.__version__,
    })
    return res


def fit_exact(X_train, y_train, X_test, y_test, max_rows, seed):
    n = X_train.shape[0]
    if n > max_rows:
        idx = np.random.RandomState(seed).choice(n, max_rows, replace=False)
        X_train, y_train = X_train[idx], y_train[idx]
    d = X_train.shape[1]
    kernel = ConstantKernel() * RBF(length_scale=np.ones(d)) + WhiteKernel()
    model = GaussianProcessRegressor(kernel, normalize_y=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        start = time.perf_counter()
        model.fit(X_train, y_train)
        fit_time = time.perf_counter() - start
    mean, std = model.predict(X_test, return_std=True)  # WhiteKernel: std includes the noise
    res = metrics(y_test, mean, std)
    res.update({
        "fit_time_s": fit_time, "n_iter": None, "n_train_used": int(X_train.shape[0]),
        "hit_max_iter": any(issubclass(w.category, ConvergenceWarning) for w in caught),
        "kernel": str(model.kernel_), "log_marginal_likelihood": float(model.log_marginal_likelihood_value_),
    })
    return res


def aggregate(rows):
    out = {"n_splits": len(rows)}
    for key in METRICS:
        values = np.array([np.nan if r.get(key) is None else r[key] for r in rows], dtype=float)
        out[key] = {"mean": float(values.mean()), "se": float(values.std() / np.sqrt(len(values)))}
    out["n_hit_max_iter"] = int(sum(bool(r.get("hit_max_iter")) for r in rows))
    return out


def fmt(agg, key, digits=3):
    mean, se = agg[key]["mean"], agg[key]["se"]
    return "—" if np.isnan(mean) else f"{mean:.{digits}f} ± {se:.{digits}f}"


def environment():
    try:
        import gpytorch
        gpytorch_version = gpytorch.__version__
    except ImportError:
        gpytorch_version = None
    return {
        "command": [sys.executable, *sys.argv],
        "python": platform.python_version(), "platform": platform.platform(),
        "torch": torch.__version__, "sklearn": sklearn.__version__, "numpy": np.__version__,
        "skbayes": skbayes.__version__, "gpytorch": gpytorch_version, "git_commit": git_commit(),
        "cpu_count": os.cpu_count(), "torch_num_threads": torch.get_num_threads(),
        "loadavg_start": loadavg(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def markdown_uci(report):
    s, env = report["settings"], report["environment"]
    lines = [
        "| dataset | method | n_splits | train rows used | RMSE | test LL | fit time (s) | epochs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    labels = {
        "skbayes": f"skbayes SparseGPRegressor, M={s['n_inducing']}",
        "gpytorch_svgp": f"GPyTorch SVGP, M={s['n_inducing']}, same Z init/batch/epochs",
        "exact_gp": "sklearn exact GP (random subset)",
    }
    for name, per_method in report["aggregates"].items():
        for method, agg in per_method.items():
            epochs = "—" if np.isnan(agg["n_iter"]["mean"]) else f"{agg['n_iter']['mean']:.0f}"
            lines.append(
                f"| {name} | {labels[method]} | {agg['n_splits']} | {agg['n_train_used']['mean']:.0f} "
                f"| {fmt(agg, 'rmse', 4)} | {fmt(agg, 'test_ll')} | {fmt(agg, 'fit_time_s', 1)} | {epochs} |"
            )
    notes = [
        "",
        "Mean ± standard error (np.std / sqrt(n_splits)) over the first "
        f"{s['splits']} fixed splits; RMSE and test LL (nats per point) in the original units of y; X "
        "standardised on the training rows. skbayes: SparseGPRegressor defaults"
        + ("" if s["max_iter"] is None else f" except max_iter={s['max_iter']}")
        + ". GPyTorch SVGP: same M, same initial inducing points, batch size and number of epochs as "
        "skbayes ran, Adam 0.01, float64, GPyTorch's initial hyperparameters. Exact GP: "
        "Constant*RBF(ARD)+White, normalize_y, on a random subset of at most "
        f"{s['exact_max_rows']} training rows. Fit times are wall clock, one process, one fit at a time, "
        "including the k-means initialisation for the sparse models.",
        (f"Environment: torch {env['torch']}, scikit-learn {env['sklearn']}, gpytorch {env['gpytorch']}, "
        f"skbayes {env['skbayes']}, {env['torch_num_threads']} torch threads, {env['cpu_count']} CPUs, "
        f"load average {env['loadavg_start']} at start, {env.get('loadavg_end')} at end; "
        f"complete: {report['complete']}."),
    ]
    if report["skipped"]:
        notes.append("Skipped: " + "; ".join(report["skipped"]) + ".")
    return "\n".join(lines + notes) + "\n"


def markdown_synthetic(report):
    r, env = report["synthetic"], report["environment"]
    lines = [
        "| rows x features | M | epochs | fit time (s) | fit time / epochs (s) | peak RSS before fit (MB) | peak RSS after fit (MB) |",
        "|---|---|---|---|---|---|---|",
        (f"| {r['n_rows']} x {r['n_features']} | {r['n_inducing']} | {r['n_iter']} | {r['fit_time_s']:.1f} "
        f"| {r['s_per_epoch']:.2f} | {r['peak_rss_before_fit_mb']:.0f} | {r['peak_rss_after_fit_mb']:.0f} |"),
        "",
        "SparseGPRegressor(n_inducing=M, random_state=0"
        + ("" if report["settings"]["max_iter"] is None else f", max_iter={report['settings']['max_iter']}")
        + ") on X ~ N(0, I), y = sum_j sin(x_j) + 0.1 noise; peak RSS is ru_maxrss of the whole process "
        f"(data included). Stopped at max_iter: {r['hit_max_iter']}.",
        (f"Environment: torch {env['torch']}, skbayes {env['skbayes']}, {env['torch_num_threads']} torch "
        f"threads, load average {env['loadavg_start']} at start, {env.get('loadavg_end')} at end."),
    ]
    return "\n".join(lines) + "\n"


def write_atomic(path, text):
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def run_synthetic(args, report):
    n, d = args.synthetic_rows, 8
    rng = np.random.RandomState(0)
    X = rng.randn(n, d)
    y = np.sin(X).sum(axis=1) + 0.1 * rng.randn(n)
    before = peak_rss_mb()
    params = {} if args.max_iter is None else {"max_iter": args.max_iter}
    model = SparseGPRegressor(n_inducing=args.n_inducing, random_state=0, **params)
    print(f"Synthetic: {n} x {d}, M={args.n_inducing}, {params or 'default max_iter'}", flush=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        start = time.perf_counter()
        model.fit(X, y)
        fit_time = time.perf_counter() - start
    report["synthetic"] = {
        "n_rows": n, "n_features": d, "n_inducing": args.n_inducing, "n_iter": int(model.n_iter_),
        "fit_time_s": fit_time, "s_per_epoch": fit_time / model.n_iter_,
        "hit_max_iter": any(issubclass(w.category, ConvergenceWarning) for w in caught),
        "final_loss": float(model.loss_curve_[-1]), "noise_std": float(model.noise_std_),
        "peak_rss_before_fit_mb": before, "peak_rss_after_fit_mb": peak_rss_mb(),
    }
    print(f"  fit {fit_time:.1f} s, {model.n_iter_} epochs, peak RSS {peak_rss_mb():.0f} MB", flush=True)


def run_uci(args, report, save):
    data_home = get_data_home(args.data_home)
    for requested in args.datasets:
        try:
            bunch = load_uci(requested, data_home=args.data_home, download_if_missing=False)
        except FileNotFoundError:
            print(f"Skipping {requested}: not found under {data_home / 'uci'}", flush=True)
            report["skipped"].append(f"{requested} (not found)")
            continue
        name = bunch.name
        n_splits = min(args.splits, bunch.n_splits)
        print(f"\n{name}: {bunch.data.shape[0]} rows, {bunch.data.shape[1]} features, "
              f"{n_splits} of {bunch.n_splits} splits", flush=True)
        rows = report["splits"].setdefault(name, {})
        for split in range(n_splits):
            X_train, X_test, y_train, y_test = get_uci_split(bunch, split)
            scaler = StandardScaler().fit(X_train)
            X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
            results = {"skbayes": fit_skbayes(X_train, y_train, X_test, y_test, args.n_inducing, split,
                                              args.max_iter)}
            if not args.no_gpytorch:
                sk = results["skbayes"]
                res = fit_gpytorch(X_train, y_train, X_test, y_test, args.n_inducing, split,
                                   sk["n_iter"], sk["batch_size"])
                if res is None:
                    if "gpytorch_svgp (not installed)" not in report["skipped"]:
                        print("Note: GPyTorch is not installed; skipping the GPyTorch SVGP column "
                              "(pip install gpytorch).", flush=True)
                        report["skipped"].append("gpytorch_svgp (not installed)")
                else:
                    results["gpytorch_svgp"] = res
            if args.exact_max_rows > 0:
                results["exact_gp"] = fit_exact(X_train, y_train, X_test, y_test, args.exact_max_rows, split)
            for method, res in results.items():
                rows.setdefault(method, []).append({"split": split, "loadavg": loadavg(), **res})
                report["aggregates"].setdefault(name, {})[method] = aggregate(rows[method])
                epochs = "   —" if res["n_iter"] is None else f"{res['n_iter']:4d}"
                print(f"  {name:<12} {method:<14} split {split:>2}: rows {res['n_train_used']:5d}  "
                      f"RMSE {res['rmse']:8.4f}  LL {res['test_ll']:8.4f}  {epochs} epochs"
                      f"{'*' if res.get('hit_max_iter') else ' '} {res['fit_time_s']:7.1f} s  "
                      f"load {loadavg()[0]}", flush=True)
            save()


def main(argv=None):
    args = parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
        try:
            from threadpoolctl import threadpool_limits
            threadpool_limits(args.threads)
        except ImportError:
            print("Note: threadpoolctl missing; BLAS threads not limited.", flush=True)
    tag = args.tag or time.strftime("%Y%m%d-%H%M%S")
    out_dir = Path(args.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out_dir / f"sparse_gp_{tag}.json", out_dir / f"sparse_gp_{tag}.md"
    report = {
        "settings": {
            "mode": "synthetic" if args.synthetic_rows else "uci",
            "datasets_requested": args.datasets, "splits": args.splits, "n_inducing": args.n_inducing,
            "max_iter": args.max_iter, "exact_max_rows": args.exact_max_rows,
            "synthetic_rows": args.synthetic_rows, "data_home": str(get_data_home(args.data_home)),
            "estimator_defaults": SparseGPRegressor().get_params(),
            "standard_error": "np.std(values, ddof=0) / sqrt(n_splits)",
        },
        "environment": environment(),
        "splits": {}, "aggregates": {}, "skipped": [], "complete": False,
    }
    print(f"torch threads: {torch.get_num_threads()}; load average: {report['environment']['loadavg_start']}; "
          "'*' after the epochs = stopped at max_iter", flush=True)

    def save():
        write_atomic(json_path, json.dumps(report, indent=1, default=str))

    # Untimed warm-up: the first fit in a process pays one-off torch initialisation.
    warm_rng = np.random.RandomState(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        SparseGPRegressor(n_inducing=8, max_iter=2, random_state=0).fit(warm_rng.randn(64, 3), warm_rng.randn(64))
    try:
        if args.synthetic_rows:
            run_synthetic(args, report)
        else:
            run_uci(args, report, save)
        report["complete"] = True
    except KeyboardInterrupt:
        print("\nInterrupted; writing what was measured so far.", flush=True)
    finally:
        report["environment"]["loadavg_end"] = loadavg()
        report["environment"]["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        save()
        if args.synthetic_rows:
            if "synthetic" in report:
                write_atomic(md_path, markdown_synthetic(report))
        else:
            write_atomic(md_path, markdown_uci(report))
    if md_path.exists():
        print()
        print(md_path.read_text())
    print(f"Wrote {json_path}" + (f"\nWrote {md_path}" if md_path.exists() else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
