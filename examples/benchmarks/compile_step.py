"""Does ``torch.compile`` pay for the Bayesian MLPs' training step on the CPU? Compile time, step time, same numbers.

What it does
------------
On the training rows of UCI ``concrete`` split 0 (927 rows, standardised; the
setting of ``epoch_time.py``: one hidden layer of 50 units, batch 32,
homoscedastic noise, float64) it fits ``BayesianMLPRegressor`` with each
gradient-trained method (``--methods``; default mfvi, mc_dropout, vadam,
sghmc, ensemble) for ``--epochs`` epochs, three ways:

* **eager**: the package as it is;
* **compiled loss**: the method's ``loss_fn(idx)`` (the minibatch forward
  pass, likelihood, KL or prior) wrapped in ``torch.compile`` (Inductor's CPU
  C++/OpenMP code generation, ``mode="default"``; AOTAutograd compiles its
  backward too), the optimiser eager;
* **compiled loss and step**: the optimiser's ``step`` compiled as well.

The wrapping is done from outside the package, by replacing the
``fit_loop`` that :mod:`skbayes.base` calls, so that the estimator's code
runs unchanged. For each it records the first fit's wall time (which
includes compilation; Inductor's on-disk cache is cleared before, so this
is a cold compile), the median seconds per epoch of ``--repeats`` further
fits of the same shapes in the same process (compiled code reused), the
ratio to eager, the number of graph breaks Dynamo reported, and the largest
relative difference of the fitted model's predictive mean and standard
deviation from eager's at the same ``random_state`` (a compiled kernel may
reorder floating-point sums, and where the graph breaks on the method's
``torch.Generator`` draws the random stream is unchanged).

How to run
----------
::

    python examples/benchmarks/compile_step.py --threads 1 --out compile_step_1thread

Writes ``examples/benchmarks/results/performance/NAME.json`` and ``NAME.md``.
Run on an otherwise idle machine, nothing else running.
"""

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import sklearn
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parent))
import epoch_time  # noqa: E402
from _common import limit_threads, loadavg, named_results  # noqa: E402

import skbayes.base as skbayes_base  # noqa: E402
from skbayes import BayesianMLPRegressor  # noqa: E402
from skbayes.datasets import fetch_uci, get_uci_split  # noqa: E402
from skbayes.inference import ALIASES, SGHMC  # noqa: E402

HIDDEN = 50
EAGER_FIT_LOOP = skbayes_base.fit_loop


def _inference(method, epochs):
    if method == "sghmc":
        return SGHMC(burn_in=epochs - 1, thinning=1, n_kept_samples=1)
    return ALIASES[method](max_iter=epochs, n_iter_no_change=10**9)


def _install(mode):
    """Make skbayes.base call fit_loop with the loss (and the step) compiled, or eager."""
    if mode == "eager":
        skbayes_base.fit_loop = EAGER_FIT_LOOP
        return

    def compiled_fit_loop(loss_fn, optimizer, *args, **kwargs):
        loss_fn = torch.compile(loss_fn)
        if mode == "loss+step":
            optimizer.step = torch.compile(optimizer.step)
        return EAGER_FIT_LOOP(loss_fn, optimizer, *args, **kwargs)

    skbayes_base.fit_loop = compiled_fit_loop


def _fit(X, y, method, epochs):
    model = BayesianMLPRegressor(hidden_layer_sizes=(HIDDEN,), inference=_inference(method, epochs),
                                 noise="homoscedastic", random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        start = time.perf_counter()
        model.fit(X, y)
        elapsed = time.perf_counter() - start
    return model, elapsed


def _graph_breaks():
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return None
    return int(sum(counters["graph_break"].values()))


def run(X, y, method, mode, epochs, repeats):
    torch._dynamo.reset()
    try:
        from torch._dynamo.utils import counters
        counters.clear()
    except ImportError:
        pass
    _install(mode)
    try:
        model, first = _fit(X, y, method, epochs)
        per_epoch = []
        for _ in range(repeats):
            _, elapsed = _fit(X, y, method, epochs)
            per_epoch.append(elapsed / epochs)
    finally:
        _install("eager")
    mean, std = model.predict(X[:200], return_std=True)
    return {"first_fit_seconds": first, "per_epoch": per_epoch, "median_per_epoch": float(np.median(per_epoch)),
            "graph_breaks": _graph_breaks(), "mean": mean.tolist(), "std": std.tolist()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--methods", nargs="+", default=["mfvi", "mc_dropout", "vadam", "sghmc", "ensemble"])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--data-home", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    limit_threads(args.threads, blas=False)
    cache = tempfile.mkdtemp(prefix="inductor_cache_")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache  # a cold compile: nothing cached from earlier runs
    bunch = fetch_uci("concrete", data_home=args.data_home, download_if_missing=False)
    X_train, _, y_train, _ = get_uci_split(bunch, 0)
    X = StandardScaler().fit_transform(X_train)
    y = (y_train - y_train.mean()) / y_train.std()
    env = {"python": platform.python_version(), "torch": torch.__version__, "sklearn": sklearn.__version__,
           "torch_num_threads": torch.get_num_threads(), "cpu_count": os.cpu_count(), "loadavg_start": loadavg(),
           "command": [sys.executable, *sys.argv]}
    # the yardsticks of epoch_time.py, in the same run: a bare PyTorch MLP (torch's default Adam) and scikit-learn's
    epoch_time.CLOCK = time.perf_counter
    bare = [epoch_time.time_torch_mlp(X, y, "float64", args.epochs, 32, "cpu") for _ in range(args.repeats + 1)][1:]
    numpy_mlp = [epoch_time.time_sklearn_mlp(X, y, args.epochs, 32) for _ in range(args.repeats + 1)][1:]
    yardsticks = {"bare_pytorch": float(np.median(bare)), "sklearn": float(np.median(numpy_mlp))}
    rows = []
    for method in args.methods:
        eager = None
        for mode in ("eager", "loss", "loss+step"):
            try:
                result = run(X, y, method, mode, args.epochs, args.repeats)
                error = None
            except Exception as exc:  # a compile failure is a result too
                result, error = None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            row = {"method": method, "mode": mode, "error": error}
            if result is not None:
                row.update({k: result[k] for k in ("first_fit_seconds", "per_epoch", "median_per_epoch",
                                                   "graph_breaks")})
                row["ratio_to_bare_pytorch"] = result["median_per_epoch"] / yardsticks["bare_pytorch"]
                row["ratio_to_sklearn"] = result["median_per_epoch"] / yardsticks["sklearn"]
                if mode == "eager":
                    eager = result
                elif eager is not None:
                    row["ratio_to_eager"] = result["median_per_epoch"] / eager["median_per_epoch"]
                    scale = np.maximum(np.abs(eager["mean"]), 1e-12)
                    row["max_rel_diff_mean"] = float(np.max(np.abs(np.subtract(result["mean"], eager["mean"])) / scale))
                    row["max_rel_diff_std"] = float(np.max(np.abs(np.subtract(result["std"], eager["std"]))
                                                           / np.abs(eager["std"])))
            rows.append(row)
            print(method, mode, {k: v for k, v in row.items() if k not in ("per_epoch",)}, flush=True)
    env["loadavg_end"] = loadavg()
    shutil.rmtree(cache, ignore_errors=True)
    result = {"settings": vars(args), "environment": env, "yardsticks": yardsticks, "rows": rows}
    save, finish = named_results(result, markdown, args.out, "performance")
    save()
    finish()
    return 0


def markdown(result):
    env, s = result["environment"], result["settings"]
    lines = [
        "# torch.compile on the training step",
        "",
        f"concrete split 0 (927 rows, batch 32), one hidden layer of {HIDDEN}, float64, {s['epochs']} epochs per "
        f"fit, median of {s['repeats']} fits after the first, wall clock, {env['torch_num_threads']} torch "
        f"thread(s), torch {env['torch']}, scikit-learn {env['sklearn']}, load average {env['loadavg_start'][0]} "
        f"at start and {env['loadavg_end'][0]} at end. Command: `{' '.join(['python', *env['command'][1:]])}`.",
        "",
        f"Yardsticks in the same run (medians of {s['repeats']} fits after one untimed): a bare PyTorch MLP of the "
        f"same size and loop (torch's default Adam) {result['yardsticks']['bare_pytorch']:.5f} s/epoch, "
        f"scikit-learn's `MLPRegressor` {result['yardsticks']['sklearn']:.5f} s/epoch.",
        "",
        "| method | compiled | first fit (s, with compiling) | s/epoch after | × eager | × bare PyTorch | "
        "× sklearn | graph breaks | max rel. diff of mean / std |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        if row["error"]:
            lines.append(f"| {row['method']} | {row['mode']} | failed: {row['error']} | | | | | | |")
            continue
        ratio = f"{row['ratio_to_eager']:.2f}" if "ratio_to_eager" in row else "1"
        diff = (f"{row['max_rel_diff_mean']:.1e} / {row['max_rel_diff_std']:.1e}" if "max_rel_diff_mean" in row
                else "")
        lines.append(f"| {row['method']} | {row['mode']} | {row['first_fit_seconds']:.2f} | "
                     f"{row['median_per_epoch']:.5f} | {ratio} | {row['ratio_to_bare_pytorch']:.2f} | "
                     f"{row['ratio_to_sklearn']:.2f} | {row['graph_breaks']} | {diff} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
