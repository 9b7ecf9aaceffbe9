"""Bayesian Gaussian mixtures of image colours: CAVI against stochastic variational inference, and a stream.

What it does
------------
Data: every pixel of the two photographs bundled with scikit-learn
(``sklearn.datasets.load_sample_images``: china.jpg and flower.jpg, 427 x 640
each, no download), 546,560 RGB rows. The 8-bit values are dequantised,
x = (pixel + u) / 256 with u ~ U[0, 1)^3 (NumPy seed 0), so that the rows
have a density on [0, 1]^3 and the held-out log predictive density is that
of continuous data (nats per pixel; subtract 3 log 256 = 16.64 for the
discrete pixels). The rows are shuffled once (seed 0); the first
``--n-test`` (50,000) are held out, the next ``--n-train`` (default 250,000;
``--n-train 0``: all 496,560 others) train.

Model: ``skbayes.mixture.BayesianGaussianMixture`` with K = 30 full
covariances and scikit-learn's default priors (truncated Dirichlet process,
alpha_0 = 1/K, beta_0 = 1, m_0 = the mean of X, nu_0 = D, W_0^-1 = the
covariance of X), the setting of the thesis's STL-10 experiment (K = 30,
B = 512, Robbins-Monro delta = 0.9, omega = 1, adaptive tau_0 = 500).
Metric: the mean held-out log predictive density (``score``: the Student-t
mixture of the posterior predictive) at checkpoints, against the fit time
(the scoring time is left off the clock).

Methods, all from the same k-means initialisation (``init_params="kmeans"``,
``random_state`` = seed; the initialisation is timed apart, not on the
curves):

* ``CAVI (skbayes)``: ``learning_method="batch"``, ``max_iter=1`` and
  ``warm_start=True``, one ``fit`` call per iteration (a checkpoint after
  each), at most ``--cavi-iter`` iterations or until the lower bound moves
  by less than ``tol``.
* ``CAVI (scikit-learn)``: ``sklearn.mixture.BayesianGaussianMixture``, the
  same loop; only its ``fit`` calls are timed, and the first call's k-means
  (timed on its own, the same ``KMeans(n_clusters=30, n_init=1,
  random_state=seed)``) is subtracted.
* ``SVI RM``: ``learning_method="online"``, Robbins-Monro
  rho_t = (t + 1)^-0.9, B = 512.
* ``SVI adaptive B=b``: the adaptive rate of Ranganath et al. (2013) with
  tau_0 = b, for b in ``--batch-sizes`` (64 ... 1024).

The SVI runs are initialised by ``fit`` with ``max_iter=0`` (k-means and one
M-step on all training rows, no iteration), then fed the rows of a
per-seed permutation of the training set, ``--svi-epochs`` passes, by
``partial_fit`` with ``total_samples`` = the number of training rows, in
chunks whose sizes grow geometrically (``4 B`` rows, then x1.5), one
checkpoint after each chunk. Each ``partial_fit`` call also evaluates the
stochastic ELBO of its chunk (one extra E-step over the chunk), which is on
the SVI clock. Step sizes: rho_t of the Robbins-Monro runs follows from
``n_steps_``; the estimator has no public attribute for the adaptive rate's
rho_t, so the script reads the last one from its private moving averages
(``_adaptive.gbar``, ``_adaptive.hbar``: rho = gbar^T gbar / hbar) at each
checkpoint, when they exist.

Table: the final held-out density of every method (seed 0), and, as Table
2.2 of the thesis, the adaptive rate's final density for each batch size,
mean and standard error (``np.std(ddof=0) / sqrt(n)``) over ``--seeds``
seeds (initialisation and minibatch order).

Stream: a separate process (so that its peak resident memory is its own)
fits ``--stream-rows`` (10^6) rows, never held together: chunks of
``--stream-chunk`` rows, each a fresh draw of training pixels with fresh
dequantisation noise, are made on the fly and passed to ``partial_fit``
(adaptive rate, B = 512, ``total_samples`` = the stream's length). Reported:
rows per second, the final held-out density, the process's peak RSS
(``ru_maxrss``) before and after the stream, and the size the full array
would have (rows x 3 x 8 bytes).

How to run
----------
::

    OMP_NUM_THREADS=1 python examples/benchmarks/gmm_svi.py --threads 1            # about 3 minutes on 2 CPU cores
    OMP_NUM_THREADS=1 python examples/benchmarks/gmm_svi.py --quick --threads 1    # smoke run, seconds
    python examples/benchmarks/gmm_svi.py --device cuda

Outputs ``examples/benchmarks/results/mixture/gmm_svi.{json,md}`` (``--quick``:
``gmm_svi_quick.*``; ``--tag X``: ``gmm_svi_X.*``) and the figure
``doc/images/gmm_svi.png`` (with a tag: ``gmm_svi_<tag>.png`` beside the
results).
"""

import argparse
import json
import math
import resource
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import load_sample_images
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import BayesianGaussianMixture as SklearnBGMM

from skbayes.mixture import BayesianGaussianMixture

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment, limit_threads, loadavg, run_saving, write_atomic, results_dir  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
K = 30
RM = {"learning_decay": 0.9, "learning_offset": 1.0}


# ----------------------------------------------------------------------------- data


def pixels():
    """The 546,560 RGB pixels of china.jpg and flower.jpg (uint8, shape (n, 3)), shuffled with seed 0."""
    images = load_sample_images().images
    rows = np.concatenate([im.reshape(-1, 3) for im in images])
    return rows[np.random.default_rng(0).permutation(len(rows))]


def dequantise(rows, rng):
    """(pixel + u) / 256 with u ~ U[0, 1) per value: rows with a density on [0, 1]^3 (float64)."""
    return (rows + rng.random(rows.shape)) / 256.0


def split(n_train, n_test):
    """Dequantised held-out rows, training rows, and the training pixels (uint8) of the fixed split."""
    raw = pixels()
    X = dequantise(raw, np.random.default_rng(0))
    n_train = n_train or len(raw) - n_test
    if n_test + n_train > len(raw):
        raise SystemExit(f"--n-train + --n-test must be at most {len(raw)}")
    return X[:n_test], X[n_test:n_test + n_train], raw[n_test:n_test + n_train]


# ----------------------------------------------------------------------------- runs


def model(args, seed, **params):
    return BayesianGaussianMixture(n_components=K, random_state=seed, device=args.device, **params)


def cavi_run(args, X_train, X_test, seed, library):
    """Held-out density after each CAVI iteration of skbayes or scikit-learn; the fit calls timed."""
    if library == "sklearn":
        est = SklearnBGMM(n_components=K, max_iter=1, warm_start=True, random_state=seed)
        start = time.perf_counter()
        KMeans(n_clusters=K, n_init=1, random_state=seed).fit(X_train)
        init_s = time.perf_counter() - start  # subtracted from the first call, which runs the same k-means
    else:
        est = model(args, seed, max_iter=0)
        start = time.perf_counter()
        est.fit(X_train)  # k-means and one M-step: the initialisation, timed apart
        init_s = time.perf_counter() - start
        est.set_params(max_iter=1, warm_start=True)
    elapsed, times, scores, previous = 0.0, [], [], -np.inf
    for it in range(args.cavi_iter):
        start = time.perf_counter()
        est.fit(X_train)
        dt = time.perf_counter() - start
        if it == 0 and library == "sklearn":
            dt = max(dt - init_s, 0.0)
        elapsed += dt
        times.append(elapsed)
        scores.append(float(np.mean(est.score_samples(X_test))) if library == "sklearn" else est.score(X_test))
        if abs(est.lower_bound_ - previous) < est.tol:
            break
        previous = est.lower_bound_
    out = {"times_s": times, "heldout_lpd": scores, "iterations": len(times), "final_lpd": scores[-1],
           "fit_time_s": times[-1]}
    out["init_s"] = init_s
    if library == "sklearn":
        out["kmeans_s_subtracted"] = init_s
        out["note"] = "plug-in Gaussian mixture density (scikit-learn's score_samples), not the Student-t predictive"
        # the same posterior scored by the Student-t predictive, for a like-for-like final number
    return out


def adaptive_rho(est):
    """The adaptive rate's last rho = gbar^T gbar / hbar, read from the estimator's private state (None if absent)."""
    state = getattr(est, "_adaptive", None)
    if state is None or getattr(state, "gbar", None) is None:
        return None
    hbar = float(state.hbar)
    return min(1.0, float(state.gbar.square().sum()) / hbar) if hbar > 0 else 1.0


def svi_run(args, X_train, X_test, seed, batch_size, rate, curve=True):
    """Held-out density of an SVI fit fed by ``partial_fit`` in growing chunks; see the module docstring."""
    n = len(X_train)
    params = {"learning_method": "online", "learning_rate": rate, "batch_size": batch_size, "total_samples": n}
    params.update(RM if rate == "robbins_monro" else {"tau0": float(args.tau0 or batch_size)})
    est = model(args, seed, max_iter=0, **params)
    start = time.perf_counter()
    est.fit(X_train)  # k-means and one M-step on all rows: the shared initialisation
    init_s = time.perf_counter() - start
    rng = np.random.default_rng(1000 + seed)
    total, chunk, seen = int(round(args.svi_epochs * n)), 4 * batch_size, 0
    order = np.concatenate([rng.permutation(n) for _ in range(math.ceil(args.svi_epochs))])[:total]
    elapsed, times, scores, steps, rhos = 0.0, [], [], [], []
    init_lpd = est.score(X_test)
    while seen < total:
        rows = X_train[order[seen:seen + int(chunk)]]
        start = time.perf_counter()
        est.partial_fit(rows)
        elapsed += time.perf_counter() - start
        seen += len(rows)
        chunk *= 1.5
        if curve or seen >= total:
            times.append(elapsed)
            scores.append(est.score(X_test))
            steps.append(int(est.n_steps_))
            if rate == "robbins_monro":
                rhos.append(min(1.0, (est.n_steps_ + RM["learning_offset"]) ** -RM["learning_decay"]))
            else:
                rhos.append(adaptive_rho(est))
    return {"batch_size": batch_size, "learning_rate": rate, "tau0": params.get("tau0"), "init_s": init_s,
            "initial_lpd": init_lpd, "rows_seen": seen, "times_s": times, "heldout_lpd": scores, "n_steps": steps,
            "rho": rhos, "final_lpd": scores[-1], "fit_time_s": times[-1]}


# ----------------------------------------------------------------------------- stream


def stream_child(args):
    """Runs in its own process: the streaming fit of ``--stream-rows`` rows; prints one JSON line."""
    limit_threads(args.threads)
    X_test, _, train_pixels = split(args.n_train, args.n_test)
    del _
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    rng = np.random.default_rng(7)
    est = model(args, 0, learning_method="online", learning_rate="adaptive", batch_size=512, tau0=500.0,
                total_samples=args.stream_rows)
    seen, elapsed = 0, 0.0
    while seen < args.stream_rows:
        m = min(args.stream_chunk, args.stream_rows - seen)
        chunk = dequantise(train_pixels[rng.integers(0, len(train_pixels), m)], rng)  # made on the fly
        start = time.perf_counter()
        est.partial_fit(chunk)
        elapsed += time.perf_counter() - start
        seen += m
        del chunk
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({
        "rows": seen, "chunk_rows": args.stream_chunk, "fit_time_s": elapsed, "rows_per_s": seen / elapsed,
        "n_steps": int(est.n_steps_), "final_lpd": est.score(X_test),
        "peak_rss_mb_before_stream": rss_before, "peak_rss_mb_after_stream": rss_after,
        "full_array_mb": seen * 3 * 8 / 2**20, "chunk_array_mb": args.stream_chunk * 3 * 8 / 2**20,
    }))


def stream(args):
    cmd = [sys.executable, str(Path(__file__).resolve()), "--stream-child", "--n-train", str(args.n_train),
           "--n-test", str(args.n_test), "--stream-rows", str(args.stream_rows), "--stream-chunk",
           str(args.stream_chunk), "--device", args.device]
    if args.threads is not None:
        cmd += ["--threads", str(args.threads)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- report


def mean_se(values):
    values = np.asarray(values, dtype=float)
    return {"mean": float(values.mean()), "se": float(values.std() / np.sqrt(len(values))), "n": len(values)}


def markdown(report):
    s, env = report["settings"], report["environment"]
    lines = [
        f"Colour density of the pixels of scikit-learn's two sample images (china.jpg, flower.jpg), dequantised "
        f"to [0, 1]^3: {s['n_train']} training rows, {s['n_test']} held-out rows (fixed split). Bayesian "
        f"Gaussian mixture, K = {K}, full covariances, scikit-learn's default priors, k-means initialisation "
        f"(timed apart). Held-out LPD: mean log predictive density (Student-t mixture; nats per pixel, "
        f"continuous data) after the fit; time: fit seconds without initialisation and scoring. SVI: "
        f"{s['svi_epochs']} pass(es) over the training rows through partial_fit; RM: rho_t = (t + 1)^-0.9; "
        f"adaptive: Ranganath et al. (2013), tau_0 = {s['tau0'] or 'B'}. Device {s['device']}.",
        "",
        "| method (seed 0) | held-out LPD | fit s | iterations / steps |",
        "|---|---|---|---|",
    ]
    for name, r in report["curves"].items():
        count = r["iterations"] if "iterations" in r else f"{r['n_steps'][-1]} steps"
        lpd = f"{r['final_lpd']:.4f}"
        if r.get("final_lpd_student_t") is not None:
            lpd += f" (Student-t: {r['final_lpd_student_t']:.4f})"
        lines.append(f"| {name} | {lpd} | {r['fit_time_s']:.2f} | {count} |")
    if report["curves"]:
        first = next(iter(report["svi_init"].values()), None)
        if first is not None:
            lines += ["", f"Held-out LPD at the k-means initialisation (seed 0): {first['initial_lpd']:.4f}; "
                          f"initialisation (k-means + one M-step) {first['init_s']:.2f} s."]
        if "CAVI (scikit-learn)" in report["curves"]:
            lines += ["scikit-learn's LPD is its own score_samples (plug-in Gaussian mixture); the Student-t "
                      "number in brackets is skbayes' predictive for the same number of CAVI iterations."]
    if report["batch_sizes"]:
        sizes = list(report["batch_sizes"])
        lines += ["", f"Adaptive SVI, final held-out LPD by batch size (mean ± s.e. over "
                      f"{len(s['seeds'])} seed(s), tau_0 = {s['tau0'] or 'B'}, {s['svi_epochs']} pass(es)):", "",
                  "| B | " + " | ".join(str(b) for b in sizes) + " |", "|---" * (len(sizes) + 1) + "|"]
        agg = [report["batch_sizes"][b]["aggregate"] for b in sizes]
        lines.append("| LPD | " + " | ".join(f"{a['mean']:.4f} ± {a['se']:.4f}" for a in agg) + " |")
        times = [mean_se([r["fit_time_s"] for r in report["batch_sizes"][b]["runs"]]) for b in sizes]
        lines.append("| fit s | " + " | ".join(f"{t['mean']:.2f}" for t in times) + " |")
    if report.get("stream"):
        st = report["stream"]
        lines += ["", f"Stream: {st['rows']:,} rows in chunks of {st['chunk_rows']:,} made on the fly (adaptive, "
                      f"B = 512), {st['rows_per_s']:,.0f} rows/s ({st['fit_time_s']:.1f} s), held-out LPD "
                      f"{st['final_lpd']:.4f}; peak RSS of the streaming process {st['peak_rss_mb_before_stream']:.0f}"
                      f" MB before the stream, {st['peak_rss_mb_after_stream']:.0f} MB after (+"
                      f"{st['peak_rss_mb_after_stream'] - st['peak_rss_mb_before_stream']:.0f} MB); the full array would "
                      f"take {st['full_array_mb']:.0f} MB (one chunk {st['chunk_array_mb']:.1f} MB)."]
    lines += [
        "",
        f"Command: `{' '.join(['python', *env['command'][1:]])}`; machine: {env['platform']}, "
        f"{env['cpu_count']} CPUs, {env['torch_num_threads']} torch thread(s), device {s['device']}; "
        f"torch {env['torch']}, scikit-learn {env['sklearn']}, skbayes {env['skbayes']}, git "
        f"{str(env['git_commit'])[:7]}; started {env['started']}, finished {env.get('finished')}; load average "
        f"{env['loadavg_start']} at start, {env.get('loadavg_end')} at end; complete: {report['complete']}.",
    ]
    return "\n".join(lines) + "\n"


def figure(report, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for i, (name, r) in enumerate(report["curves"].items()):
        t = np.maximum(np.asarray(r["times_s"]), 1e-3)
        style = {"marker": ".", "ms": 4, "lw": 1.2, "label": name, "color": f"C{i % 10}"}
        ax1.plot(t, r["heldout_lpd"], **style)
        if "rho" in r and any(v is not None for v in r["rho"]):
            ax2.plot(t, [np.nan if v is None else v for v in r["rho"]], **style)
    ax1.set_xscale("log")
    ax1.set_xlabel("fit time (s, log scale; initialisation and scoring excluded)")
    ax1.set_ylabel("held-out mean log predictive density (nats)")
    ax1.legend(fontsize=7)
    ax1.set_title("Pixel colours, K = 30: CAVI against SVI", fontsize=10)
    ax2.set_xscale("log")
    ax2.set_yscale("log")
    ax2.set_xlabel("fit time (s, log scale)")
    ax2.set_ylabel("step size rho_t (last step before the checkpoint)")
    ax2.legend(fontsize=7)
    ax2.set_title("SVI step sizes", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ----------------------------------------------------------------------------- main


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="Smoke run: 20,000 training rows, 5,000 held out, 5 CAVI iterations, batch sizes 64 "
                             "and 512, one seed, a stream of 10^5 rows.")
    parser.add_argument("--n-train", type=int, default=None,
                        help="Training rows (default 250,000; quick 20,000; 0: all but the held-out rows).")
    parser.add_argument("--n-test", type=int, default=None, help="Held-out rows (default 50,000; quick 5,000).")
    parser.add_argument("--cavi-iter", type=int, default=None, help="Most CAVI iterations (default 20; quick 5).")
    parser.add_argument("--svi-epochs", type=float, default=None,
                        help="Passes of every SVI run over the training rows (default 1).")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=None,
                        help="Batch sizes of the adaptive runs (default 64 128 256 512 1024; quick 64 512).")
    parser.add_argument("--tau0", type=float, default=None,
                        help="tau_0 of the adaptive rate (default: the batch size; the thesis's B = 512 run: 500).")
    parser.add_argument("--seeds", type=int, default=None, help="Seeds of the batch-size table (default 3; quick 1).")
    parser.add_argument("--methods", nargs="+", default=None, choices=["cavi", "sklearn", "rm", "adaptive", "stream"],
                        help="Parts to run (default: all).")
    parser.add_argument("--stream-rows", type=int, default=None, help="Rows of the stream (default 10^6; quick 10^5).")
    parser.add_argument("--stream-chunk", type=int, default=50_000, help="Rows per streamed chunk.")
    parser.add_argument("--device", default="cpu", help="Torch device of skbayes (default: cpu).")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads(N) (and BLAS threads).")
    parser.add_argument("--output-dir", default=str(results_dir("mixture")))
    parser.add_argument("--tag", default=None, help="Results files gmm_svi_<tag>.* (default gmm_svi, or gmm_svi_quick).")
    parser.add_argument("--figure", default=None,
                        help="Figure path (default doc/images/gmm_svi.png; with --quick or --tag, beside the results).")
    parser.add_argument("--stream-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    q = args.quick
    args.n_train = (20_000 if q else 250_000) if args.n_train is None else args.n_train
    args.n_test = args.n_test or (5_000 if q else 50_000)
    args.cavi_iter = args.cavi_iter or (5 if q else 20)
    args.svi_epochs = args.svi_epochs or 1.0
    args.batch_sizes = args.batch_sizes or ([64, 512] if q else [64, 128, 256, 512, 1024])
    args.seeds = args.seeds or (1 if q else 3)
    args.stream_rows = args.stream_rows or (100_000 if q else 1_000_000)
    args.methods = args.methods or ["cavi", "sklearn", "rm", "adaptive", "stream"]
    if args.tag is None and q:
        args.tag = "quick"
    name = "gmm_svi" + (f"_{args.tag}" if args.tag else "")
    out = Path(args.output_dir)
    args.json_path, args.md_path = out / f"{name}.json", out / f"{name}.md"
    if args.figure is None:
        args.figure = out / f"{name}.png" if args.tag else ROOT / "doc" / "images" / "gmm_svi.png"
    args.figure = Path(args.figure)
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.stream_child:
        stream_child(args)
        return
    limit_threads(args.threads)
    X_test, X_train, _ = split(args.n_train, args.n_test)
    args.json_path.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "settings": {
            "data": "china.jpg + flower.jpg pixels (sklearn.datasets.load_sample_images), (pixel + U[0,1)) / 256",
            "n_train": len(X_train), "n_test": len(X_test), "n_components": K, "covariance_type": "full",
            "cavi_iter": args.cavi_iter, "svi_epochs": args.svi_epochs, "batch_sizes": args.batch_sizes,
            "tau0": args.tau0, "robbins_monro": RM, "seeds": list(range(args.seeds)), "device": args.device,
            "stream_rows": args.stream_rows, "stream_chunk": args.stream_chunk, "quick": args.quick,
            "methods": args.methods, "standard_error": "np.std(values, ddof=0) / sqrt(n_seeds)",
        },
        "environment": environment(), "complete": False, "curves": {}, "svi_init": {}, "batch_sizes": {},
        "stream": None,
    }
    print(f"{len(X_train)} training rows, {len(X_test)} held out; torch threads "
          f"{report['environment']['torch_num_threads']}, load average {loadavg()}", flush=True)

    def save():
        write_atomic(args.json_path, json.dumps(report, indent=1))

    def done(name, r):
        print(f"{name}: held-out LPD {r['final_lpd']:.4f} after {r['fit_time_s']:.2f} s", flush=True)
        save()

    def body():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            if "cavi" in args.methods:
                done("CAVI (skbayes)", report["curves"].setdefault(
                    "CAVI (skbayes)", cavi_run(args, X_train, X_test, 0, "skbayes")))
            if "sklearn" in args.methods:
                r = cavi_run(args, X_train, X_test, 0, "sklearn")
                skb = report["curves"].get("CAVI (skbayes)")
                # skbayes reproduces scikit-learn's iterates: its Student-t score after as many iterations
                if skb and skb["iterations"] >= r["iterations"]:
                    r["final_lpd_student_t"] = skb["heldout_lpd"][r["iterations"] - 1]
                done("CAVI (scikit-learn)", report["curves"].setdefault("CAVI (scikit-learn)", r))
            if "rm" in args.methods:
                r = svi_run(args, X_train, X_test, 0, 512, "robbins_monro")
                report["svi_init"]["SVI RM B=512"] = {"init_s": r["init_s"], "initial_lpd": r["initial_lpd"]}
                done("SVI RM B=512", report["curves"].setdefault("SVI RM B=512", r))
            if "adaptive" in args.methods:
                for seed in range(args.seeds):
                    for b in args.batch_sizes:
                        r = svi_run(args, X_train, X_test, seed, b, "adaptive", curve=(seed == 0))
                        entry = report["batch_sizes"].setdefault(b, {"runs": []})
                        entry["runs"].append({"seed": seed, "loadavg": loadavg(), **{
                            k: r[k] for k in ("final_lpd", "fit_time_s", "init_s", "initial_lpd", "n_steps")}})
                        entry["aggregate"] = mean_se([x["final_lpd"] for x in entry["runs"]])
                        if seed == 0:
                            report["curves"][f"SVI adaptive B={b}"] = r
                            report["svi_init"][f"SVI adaptive B={b}"] = {"init_s": r["init_s"],
                                                                         "initial_lpd": r["initial_lpd"]}
                        done(f"SVI adaptive B={b} seed {seed}", r)
            if "stream" in args.methods:
                report["stream"] = stream(args)
                print(f"stream: {report['stream']}", flush=True)

    def finish():
        write_atomic(args.md_path, markdown(report))
        if report["curves"]:
            figure(report, args.figure)

    run_saving(report, body, save, finish)
    print()
    print(args.md_path.read_text())
    print(f"Wrote {args.json_path}\nWrote {args.md_path}" + (f"\nWrote {args.figure}" if report["curves"] else ""))


if __name__ == "__main__":
    main()
