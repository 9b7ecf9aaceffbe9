"""Streaming a sparse GP over a dask array larger than the process's memory budget, then predicting 10^7 rows.

What it does
------------
Data: a lazy ``dask.array`` of N x 8 inputs X ~ N(0, I) with targets
y = sum_j sin(x_j) + 0.1 noise, generated chunk by chunk from
``dask.array.random.default_rng(0)`` (``--chunk-rows`` rows a chunk); N is set
so that X and y take ``--data-factor`` times the memory budget
``--budget-mib`` in float64 (default 2 x 1,024 MiB: 29.8 million rows, 2 GiB).
No chunk is stored: each is generated when a task needs it and dropped after.

Training: ``dask_ml.wrappers.Incremental(SparseGPRegressor(...),
shuffle_blocks=False)`` calls ``partial_fit`` once per chunk, in order, on
dask's synchronous scheduler: one pass over the N rows in minibatches of
``--batch-size`` (the objective's N grows with the rows seen).

Prediction: ``dask_ml.wrappers.ParallelPostFit`` maps ``predict`` over the
blocks of ``--predict-rows`` (10^7) fresh rows generated the same way (seed
1), and ``dask.array.blockwise`` maps ``log_predictive_density`` over the
blocks of X and y; the test RMSE and mean log predictive density are dask
reductions of those (nothing of 10^7 rows is held at once), next to those of
the true function with the true noise (the best any model can do).

Memory: the process's peak resident set size (``ru_maxrss``) after the
imports, after training and after prediction, against the bytes of the
training set; the budget is not enforced by the OS (``RLIMIT_AS`` counts
torch's address-space reservations, not memory), the peak shows that the
data were never held. Times are wall clock; the load average is recorded
before and after each phase.

How to run
----------
::

    python examples/benchmarks/dask_larger_than_memory.py --threads 2 --out dask_larger_than_memory

``--out NAME`` writes ``examples/benchmarks/results/performance/NAME.json`` and ``.md``
(default: print only). ``--data-factor 0.01 --predict-rows 100000`` is a
smoke run of a few seconds.
"""

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import dask
import dask.array as da
from scipy.stats import norm
from sklearn.exceptions import ConvergenceWarning

from skbayes import SparseGPRegressor

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    environment,
    environment_sentence,
    limit_threads,
    loadavg,
    named_results,
    peak_rss_mb,
    run_saving,
)

NOISE = 0.1
N_FEATURES = 8
MIB = 2**20


def synthetic(n, chunk_rows, seed):
    """Lazy X ~ N(0, I) of shape (n, 8), f(X) = sum_j sin(x_j) and y = f + 0.1 noise, chunked by rows."""
    rng = da.random.default_rng(seed)
    X = rng.standard_normal((n, N_FEATURES), chunks=(chunk_rows, N_FEATURES))
    f = da.sin(X).sum(axis=1)
    return X, f, f + NOISE * rng.standard_normal(n, chunks=chunk_rows)


def train(args, report):
    from dask_ml.wrappers import Incremental

    n = int(args.data_factor * args.budget_mib * MIB / ((N_FEATURES + 1) * 8))
    X, _, y = synthetic(n, args.chunk_rows, seed=0)
    model = SparseGPRegressor(n_inducing=args.n_inducing, batch_size=args.batch_size, random_state=0)
    load = loadavg()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        incremental = Incremental(model, shuffle_blocks=False).fit(X, y)
    seconds = time.perf_counter() - start
    fitted = incremental.estimator_
    report["train"] = {
        "rows": n, "chunks": X.numblocks[0], "data_mib": round((X.nbytes + y.nbytes) / MIB, 1),
        "n_seen": int(fitted.n_seen_), "epochs": int(fitted.n_iter_), "seconds": round(seconds, 1),
        "rows_per_s": round(n / seconds), "noise_std": float(fitted.noise_std_),
        "peak_rss_mib": round(peak_rss_mb(), 1), "loadavg_before": load, "loadavg_after": loadavg(),
    }
    return incremental


def predict(args, report, incremental):
    X, f, y = synthetic(args.predict_rows, args.chunk_rows, seed=1)
    model = incremental.estimator_
    mean = incremental.predict(X)  # ParallelPostFit.predict: a lazy dask array, block by block
    log_density = da.blockwise(model.log_predictive_density, "i", X, "ij", y, "i", concatenate=True, dtype=float)
    rmse = da.sqrt(((mean - y) ** 2).mean())
    test_ll = log_density.mean()
    oracle_rmse = da.sqrt(((f - y) ** 2).mean())
    oracle_ll = da.blockwise(lambda y, f: norm.logpdf(y, f, NOISE), "i", y, "i", f, "i", dtype=float).mean()
    load = loadavg()
    start = time.perf_counter()
    rmse, test_ll, oracle_rmse, oracle_ll = dask.compute(rmse, test_ll, oracle_rmse, oracle_ll)
    seconds = time.perf_counter() - start
    report["predict"] = {
        "rows": args.predict_rows, "chunks": X.numblocks[0], "input_mib": round(X.nbytes / MIB, 1),
        "seconds": round(seconds, 1), "rows_per_s": round(args.predict_rows / seconds),
        "test_rmse": float(rmse), "test_ll": float(test_ll),
        "oracle_rmse": float(oracle_rmse), "oracle_ll": float(oracle_ll),
        "peak_rss_mib": round(peak_rss_mb(), 1), "loadavg_before": load, "loadavg_after": loadavg(),
    }


def markdown(report):
    s, t, p = report["settings"], report.get("train"), report.get("predict")
    lines = [
        "| phase | rows | data (MiB) | wall time (s) | rows/s | process peak RSS after it (MiB) "
        "| load average before / after |",
        "|---|---|---|---|---|---|---|",
        f"| imports | | | | | {report['peak_rss_after_imports_mib']:.0f} | |",
    ]
    if t:
        lines.append(
            f"| `partial_fit` stream, {t['chunks']} chunks | {t['rows']:,} | {t['data_mib']:,.0f} "
            f"| {t['seconds']:.1f} | {t['rows_per_s']:,} | {t['peak_rss_mib']:.0f} "
            f"| {t['loadavg_before'][0]} / {t['loadavg_after'][0]} |"
        )
    if p:
        lines.append(
            f"| predict + log density, {p['chunks']} chunks | {p['rows']:,} | {p['input_mib']:,.0f} (X) "
            f"| {p['seconds']:.1f} | {p['rows_per_s']:,} | {p['peak_rss_mib']:.0f} "
            f"| {p['loadavg_before'][0]} / {p['loadavg_after'][0]} |"
        )
    lines += [
        "",
        f"SparseGPRegressor(n_inducing={s['n_inducing']}, batch_size={s['batch_size']}, random_state=0) "
        f"streamed once over a lazy dask array of X ~ N(0, I) (8 features) and y = sum_j sin(x_j) + 0.1 noise, "
        f"{s['chunk_rows']:,} rows a chunk, {s['data_factor']} x the stated memory budget of "
        f"{s['budget_mib']:,} MiB (float64 X and y), through `dask_ml.wrappers.Incremental` on dask's "
        "synchronous scheduler; then predictions on fresh rows generated the same way, reduced lazily.",
    ]
    if t and p:
        lines.append(
            f"Fitted noise std {t['noise_std']:.4f} (true 0.1); test RMSE {p['test_rmse']:.4f} "
            f"(oracle {p['oracle_rmse']:.4f}), mean test log predictive density {p['test_ll']:.3f} nats "
            f"(oracle {p['oracle_ll']:.3f})."
        )
    lines.append(environment_sentence(report))
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget-mib", type=float, default=1024, help="Stated memory budget, MiB (default 1024).")
    parser.add_argument("--data-factor", type=float, default=2.0,
                        help="Training data (float64 X and y) as a multiple of the budget (default 2).")
    parser.add_argument("--chunk-rows", type=int, default=500_000, help="Rows per chunk (default 500000).")
    parser.add_argument("--n-inducing", type=int, default=32, help="Inducing points M (default 32).")
    parser.add_argument("--batch-size", type=int, default=16384, help="Minibatch rows (default 16384).")
    parser.add_argument("--predict-rows", type=int, default=10_000_000, help="Rows predicted (default 10^7).")
    parser.add_argument("--threads", type=int, default=2, help="Torch and BLAS threads (default 2).")
    parser.add_argument("--out", default=None, help="Write results/performance/NAME.json and NAME.md.")
    args = parser.parse_args(argv)
    limit_threads(args.threads)  # before dask starts any thread
    dask.config.set(scheduler="synchronous")
    report = {
        "settings": vars(args), "environment": environment(), "complete": False,
        "peak_rss_after_imports_mib": round(peak_rss_mb(), 1),
    }
    report["environment"]["dask"] = dask.__version__

    def body():
        incremental = train(args, report)
        print(json.dumps(report["train"]), flush=True)
        predict(args, report, incremental)
        print(json.dumps(report["predict"]), flush=True)

    save, finish = named_results(report, markdown, args.out, "performance")
    run_saving(report, body, save, finish)
    return 0


if __name__ == "__main__":
    sys.exit(main())
