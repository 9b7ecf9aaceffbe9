"""Peak memory and time of every estimator's prediction methods as the number of rows grows.

For each estimator at its default settings (trained briefly: the memory of a
prediction does not depend on how long the model trained; SGHMC keeps its
default 2 chains x 20 kept weight settings) and each prediction method, the
growth of the process's peak resident set size during the call, minus the
bytes of what it returned, at each ``--rows`` (Linux only: the peak is reset by
writing ``5`` to ``/proc/self/clear_refs``). A method whose memory is bounded
by a constant (``skbayes.base.PREDICT_MEMORY_BOUND``) shows the same growth at
every size. ``--time-rows`` times ``predict(X, return_std=True)`` (``predict_proba``
for classifiers) of the named models on that many rows and reports rows/s.

Run (results in ``examples/benchmarks/results/performance/predict_memory_<tag>.{json,md}``)::

    python examples/benchmarks/predict_memory.py --rows 10000 100000 --time-rows 1000000 --tag all

``tests/test_predict_memory.py`` uses :func:`peak_growth` and
:func:`prediction_call` on small models.
"""

import argparse
import gc
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    environment, limit_threads, loadavg, output_paths, print_written, results_dir, run_saving, write_atomic,
)

CLEAR_REFS = Path("/proc/self/clear_refs")


def status_bytes(field):
    """A ``/proc/self/status`` field (``VmRSS``, ``VmHWM``) in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def nbytes(out):
    """Bytes of the numpy arrays in a prediction's result (an array, a tuple of arrays, a Bunch)."""
    if isinstance(out, np.ndarray):
        return out.nbytes
    if isinstance(out, (tuple, list)):
        return sum(map(nbytes, out))
    if isinstance(out, dict):
        return sum(map(nbytes, out.values()))
    return 0


def peak_growth(call):
    """``(bytes, seconds)``: how far the peak RSS rose during ``call()`` beyond its result's bytes, and its time."""
    gc.collect()
    CLEAR_REFS.write_text("5")
    before = status_bytes("VmRSS")
    start = time.perf_counter()
    out = call()
    seconds = time.perf_counter() - start
    return status_bytes("VmHWM") - before - nbytes(out), seconds


def fix_mmap_threshold(nbytes=1 << 20):
    """Have glibc serve every allocation of ``nbytes`` or more by mmap, returned to the OS when freed.

    By default glibc raises that threshold as large buffers are freed, and then
    keeps freed buffers in its heap, so the resident set can grow by what the
    allocator caches rather than by what a prediction holds; with a fixed
    threshold the peak RSS follows the live allocations. Returns False where
    ``mallopt`` is unavailable (not glibc).
    """
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        return bool(libc.mallopt(-3, nbytes))  # M_MMAP_THRESHOLD (also ends its dynamic adjustment)
    except (OSError, AttributeError):
        return False


def prediction_call(model, method, X):
    """A no-argument callable making the prediction ``method`` of ``model`` on X.

    ``predict_std`` is ``predict(X, return_std=True)``, ``transform_std`` is
    ``transform(X, return_std=True)``; ``log_predictive_density`` scores
    targets 0; ``inverse_transform`` decodes latent rows of zeros.
    """
    if method == "predict_std":
        return lambda: model.predict(X, return_std=True)
    if method == "transform_std":
        return lambda: model.transform(X, return_std=True)
    if method == "log_predictive_density":
        return lambda: model.log_predictive_density(X, np.zeros(len(X)))
    if method == "inverse_transform":
        Z = np.zeros((len(X), model.n_components))
        return lambda: model.inverse_transform(Z)
    return lambda: getattr(model, method)(X)


REGRESSION = ["predict", "predict_std", "predict_interval", "predict_uncertainty", "sample_y", "log_predictive_density"]
CLASSIFICATION = ["predict", "predict_proba", "predict_log_proba", "predict_uncertainty"]


def models():
    """{name: (estimator, task, methods)} at default settings, briefly trained."""
    from skbayes import (
        VAE,
        BayesianGaussianMixture,
        BayesianMLPClassifier,
        BayesianMLPRegressor,
        DeepGPRegressor,
        SparseGPClassifier,
        SparseGPRegressor,
    )
    from skbayes.inference import PBP, SGHMC, DeepEnsemble, MeanFieldVI, SparseVariational

    return {
        "BayesianMLPRegressor()": (BayesianMLPRegressor(inference=SGHMC(burn_in=2, thinning=1)), "reg", REGRESSION),
        "BayesianMLPRegressor(inference='mfvi')": (BayesianMLPRegressor(inference=MeanFieldVI(max_iter=2)), "reg", REGRESSION),
        "BayesianMLPRegressor(inference='pbp')": (BayesianMLPRegressor(inference=PBP(max_iter=2)), "reg", REGRESSION),
        "BayesianMLPClassifier()": (BayesianMLPClassifier(inference=DeepEnsemble(max_iter=2)), "clf", CLASSIFICATION),
        "BayesianMLPClassifier(inference='mfvi')": (BayesianMLPClassifier(inference=MeanFieldVI(max_iter=2)), "clf",
                                                    CLASSIFICATION),
        # sample_y of the sparse GP draws jointly across rows and refuses more than 5,000
        "SparseGPRegressor()": (SparseGPRegressor(inference=SparseVariational(max_iter=2)), "reg",
                                [m for m in REGRESSION if m != "sample_y"]),
        "SparseGPClassifier()": (SparseGPClassifier(inference=SparseVariational(max_iter=2)), "clf",
                                 [*CLASSIFICATION, "predict_latent"]),
        "DeepGPRegressor()": (DeepGPRegressor(inference=SparseVariational(max_iter=2)), "reg", REGRESSION),
        "BayesianGaussianMixture(n_components=5)": (BayesianGaussianMixture(n_components=5, max_iter=2), "unsup",
                                                    ["predict", "predict_proba", "score_samples"]),
        "VAE()": (VAE(max_iter=2), "unsup", ["transform", "transform_std", "inverse_transform", "score_samples"]),
    }


def markdown(report):
    rows = report["settings"]["rows"]
    lines = [
        "Peak memory held by each prediction beyond its inputs and outputs (MiB; growth of the peak resident set "
        f"size during the call), and its time, on rows of 8 standard-normal features; models at their default "
        f"settings, trained on {report['settings']['n_fit']:,} rows. Bound "
        f"`PREDICT_MEMORY_BOUND` = {report['bound_mib']:.0f} MiB.",
        "",
        "| estimator | method | " + " | ".join(f"MiB at {n:,} rows" for n in rows) + f" | s at {rows[-1]:,} rows |",
        "|---|---|" + "---|" * (len(rows) + 1),
    ]
    for r in report["memory"]:
        cells = [f"{r['mib'][str(n)]:.0f}" if str(n) in r["mib"] else r.get("error", "") for n in rows]
        seconds = r["seconds"].get(str(rows[-1]))
        lines.append(f"| `{r['model']}` | {r['method']} | " + " | ".join(cells)
                     + f" | {'' if seconds is None else f'{seconds:.2f}'} |")
    if report["timing"]:
        lines += ["", f"Time of one prediction of {report['settings']['time_rows']:,} rows:", "",
                  "| estimator | method | s | rows/s | MiB held |", "|---|---|---|---|---|"]
        for r in report["timing"]:
            lines.append(f"| `{r['model']}` | {r['method']} | {r['seconds']:.1f} | {r['rows_per_s']:,.0f} | "
                         f"{r['mib']:.0f} |")
    env = report["environment"]
    lines += ["", f"Environment: torch {env['torch']}, git {env['git_commit']}, {env['torch_num_threads']} torch "
              f"threads, load average {env['loadavg_start']} at start, {env.get('loadavg_end')} at end; "
              f"complete: {report['complete']}. Command: `{' '.join(Path(a).name if i == 1 else a for i, a in enumerate(env['command'][1:], 1))}`."]
    return "\n".join(lines) + "\n"


def main():
    from skbayes.base import PREDICT_MEMORY_BOUND

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--time-rows", type=int, default=None, help="Also time predictions of this many rows.")
    parser.add_argument("--time-models", nargs="+", default=["BayesianMLPRegressor()",
                        "BayesianMLPRegressor(inference='mfvi')", "BayesianMLPClassifier()", "SparseGPRegressor()"])
    parser.add_argument("--models", nargs="+", default=None, help="Subset of the model names.")
    parser.add_argument("--n-fit", type=int, default=2000)
    parser.add_argument("--live", action="store_true",
                        help="Fix glibc's mmap threshold at 1 MiB (fix_mmap_threshold): measure live allocations, "
                             "not what the allocator caches.")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--tag", default=None)
    parser.add_argument("--output-dir", default=str(results_dir("performance")))
    args = parser.parse_args()
    if not CLEAR_REFS.exists():
        sys.exit("needs Linux's /proc/self/clear_refs to reset the peak RSS")
    limit_threads(args.threads)
    if args.live:
        fix_mmap_threshold()
    warnings.simplefilter("ignore")
    json_path, md_path = output_paths(args, "predict_memory")
    report = {"settings": {"rows": args.rows, "time_rows": args.time_rows, "n_fit": args.n_fit},
              "bound_mib": PREDICT_MEMORY_BOUND / 2**20, "environment": environment(), "memory": [], "timing": [],
              "complete": False}
    print(f"threads {report['environment']['torch_num_threads']}, load average {loadavg()}", flush=True)
    rng = np.random.RandomState(0)
    X_fit, y_fit = rng.randn(args.n_fit, 8), rng.randn(args.n_fit)

    def body():
        for name, (model, task, methods) in models().items():
            if args.models and name not in args.models:
                continue
            model.set_params(random_state=0)
            model.fit(X_fit) if task == "unsup" else model.fit(X_fit, y_fit > 0 if task == "clf" else y_fit)
            for method in methods:
                row = {"model": name, "method": method, "mib": {}, "seconds": {}}
                try:
                    prediction_call(model, method, X_fit[:50])()
                    for n in args.rows:
                        growth, seconds = peak_growth(prediction_call(model, method, rng.randn(n, 8)))
                        row["mib"][str(n)], row["seconds"][str(n)] = growth / 2**20, seconds
                except Exception as error:  # recorded, e.g. a method that refuses that many rows
                    row["error"] = f"{type(error).__name__}: {error}"[:120]
                report["memory"].append(row)
                print(row, flush=True)
            if args.time_rows and name in args.time_models:
                method = "predict_proba" if task == "clf" else "predict_std"
                growth, seconds = peak_growth(prediction_call(model, method, rng.randn(args.time_rows, 8)))
                report["timing"].append({"model": name, "method": method, "seconds": seconds,
                                         "rows_per_s": args.time_rows / seconds, "mib": growth / 2**20})
                print(report["timing"][-1], flush=True)

    run_saving(report, body, lambda: write_atomic(json_path, json.dumps(report, indent=1)),
               lambda: write_atomic(md_path, markdown(report)))
    print_written(json_path, md_path)


if __name__ == "__main__":
    main()
