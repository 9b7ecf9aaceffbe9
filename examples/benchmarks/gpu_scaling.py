"""GPU against CPU on the same machine: fit and prediction time of the default estimators from 10^4 to 10^6 rows.

What it does
------------
Fits, on synthetic data of ``--rows`` rows (default 10,000, 100,000 and
1,000,000), each estimator at its defaults, with only ``device=`` (and
``random_state=0``) set:

``BayesianMLPRegressor()``
    SGHMC, 2 chains, its default step budget (1,200 steps up to 30,720 rows,
    10 epochs' worth beyond, at most 12,000; 256 rows per step).
``BayesianMLPClassifier()``
    DeepEnsemble of 5 MAP networks, early stopping on 10% of the rows.
``SparseGPRegressor()``
    256 inducing points, variational, ``max_iter="auto"`` (1,000 epochs or
    4,000 steps of 1,024 rows, whichever ends first, unless the training
    loss stops improving for 20 epochs).
``DeepGPRegressor()``
    two GP layers (an inner one of width 8) of 100 inducing points each,
    100 draws per prediction, variational, the same budget.
``BayesianMLPClassifier(module=LeNet, input_shape=(1, 28, 28), inference=MCDropout())``
    the CNN path: :class:`LeNet` (the LeNet-like network of
    ``mnist_cnn.py``, 10 logits) made Bayesian by MC dropout at its defaults
    (``--cnn-inference mfvi``: ``MeanFieldVI()``), on ``--cnn-rows`` (default
    10,000 and 60,000) synthetic 28 x 28 images.

on each of ``--devices`` (default ``cuda cpu`` when CUDA is available, else
``cpu``), and records per estimator x size x device:

* the fit time (wall clock; ``torch.cuda.synchronize()`` before the clock
  stops on CUDA), after an untimed warm-up fit with a budget of one or two
  epochs on 256 rows of the same estimator and device (CUDA context,
  kernels, vmap: the one-off costs), its time recorded apart;
* the time of ``predict(X, return_std=True)`` (regressors) or
  ``predict_proba(X)`` (classifiers) on the training rows, as rows/s (the
  estimators predict in blocks of bounded memory);
* the test scores on ``--test-rows`` (2,000) held-out rows of the same
  distribution: R^2 and the mean log predictive density
  (``log_predictive_density``, nats per row, y in its own units) for the
  regressors; the accuracy and the mean log probability of the true class
  for the classifiers; so that the GPU fit can be seen to learn what the CPU
  fit learns;
* ``n_iter_``, the dtype and device the estimator used, the warnings it
  raised, the peak GPU memory (``torch.cuda.max_memory_allocated``) and the
  process's peak RSS so far;

and then the speed-up, CPU time / GPU time, of the fit and of the
prediction where both devices ran.

The data: 8 standard-normal features; the regression target
``sin(2 x0) + 0.5 x1 x2 + cos(x3) x4 + 0.3 x5^2 + tanh(x6 - x7)`` plus
N(0, 0.3^2) noise; the 3 classes are that function plus another N(0, 0.3^2)
cut at its terciles. The images: 10 classes, each a fixed random pattern of
three Gaussian blobs; an image is its class's pattern at a random strength,
a weaker pattern of another class and Gaussian pixel noise, clipped to
[0, 1]. Training rows of a smaller size are the first rows of the larger
ones. The tabular X is float64 (what numpy gives), so the CPU computes in
float64 and CUDA in float32 (both the estimators' defaults for float64
input); ``--x-dtype float32`` gives float32 on both. The images are float32
pixels (as in ``mnist_cnn.py``): float32 on both devices.

Order and time guards
---------------------
Every estimator at the first size on every device (per estimator: the
devices in the order given, so a pair is complete before the next
estimator), then every estimator at the second size, and so on. After a
configuration at n rows, the larger sizes of that estimator and device are
skipped (and recorded with the reason) when its fit took more than
``--max-seconds-per-fit`` (30), or when the projected fit + prediction at the
next size exceeds 3 times that. The projection scales the fit by the ratio of
optimiser steps where the defaults fix them (SGHMC's step budget; the GPs'
4,000-step budget against the steps they ran) and linearly in the rows
otherwise (the early-stopped methods: their epochs are not known in advance),
and the prediction linearly. A configuration still running after
``--max-seconds-per-config`` (default 4 x ``--max-seconds-per-fit``) or at
``--deadline-seconds`` (330, counted from the start of the script, imports
included) is aborted and recorded so; no configuration starts after the
deadline.
An exception in a configuration (e.g. CUDA out of memory) is recorded with
its text, and the larger sizes of that estimator and device are skipped.
The results (JSON and Markdown) are rewritten after every configuration, so
a run killed from outside keeps what it measured; SIGTERM ends the run after
writing them.

How to run
----------
::

    # on the GPU machine (one H200, 16 cores), from the repository root: at most about 5.7 minutes
    # (the 330 s deadline, imports included, then writing the files)
    PYTHONPATH=. python3 examples/benchmarks/gpu_scaling.py --max-seconds-per-fit 30 \
        --max-seconds-per-config 120 --deadline-seconds 330 --out-dir "$OUT"
    # only the largest sizes on the GPU, e.g. in a second call
    PYTHONPATH=. python3 examples/benchmarks/gpu_scaling.py --devices cuda --rows 1000000 --cnn-rows 60000 \
        --tag device_cuda_1m --out-dir "$OUT"
    # smoke run of the script, CPU only: sizes 300 and 600 (CNN 200), 1 torch thread and short budgets,
    # not the defaults (about 15 s)
    PYTHONPATH=. python examples/benchmarks/gpu_scaling.py --quick --devices cpu --out-dir /tmp/gpu_smoke

The first command is the defaults spelled out. Within 330 s it is expected
to measure every estimator at 10,000 rows on both devices and, as far as the
guards and the deadline allow, the larger sizes: on a CPU of 16 cores the
default sparse and deep GP fits (4,000 steps in float64) should take some
tens of seconds each, and a fit over 30 s keeps its estimator from the larger
sizes on that device. What the deadline cut is listed as skipped.

Outputs ``<out-dir>/gpu_scaling_<tag>.{json,md}``; ``--out-dir`` defaults to
``examples/benchmarks/results/performance``, the tag to ``device_cuda`` when CUDA is among
the devices, else ``device_cpu`` (``quick_`` in front with ``--quick``).
Only numpy, scipy, scikit-learn and torch are needed; nothing is downloaded.
"""

import time

T0 = time.monotonic()  # the deadline counts from here, before the imports of torch and skbayes

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from skbayes import BayesianMLPClassifier, BayesianMLPRegressor, DeepGPRegressor, SparseGPRegressor  # noqa: E402
from skbayes.inference import SGHMC, DeepEnsemble, MCDropout, MeanFieldVI, SparseVariational  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    environment, limit_threads, loadavg, output_paths, peak_rss_mb, print_written, results_dir, run_saving, write_atomic,
)

RESULTS = results_dir("performance")
N_FEATURES = 8
NOISE_STD = 0.3
IMAGE_SHAPE = (1, 28, 28)
N_IMAGE_CLASSES = 10
WARM_UP_ROWS = 256
GP_BATCH, GP_MAX_EPOCHS, GP_MAX_STEPS = 1024, 1000, 4000  # the GPs' batch_size and max_iter="auto" budget


class LeNet(nn.Module):
    """A LeNet-like CNN from plain torch layers (the network of ``mnist_cnn.py``).

    conv(5x5, 6) - ReLU - maxpool(2) - conv(5x5, 16) - ReLU - maxpool(2) -
    flatten (16 x 4 x 4 = 256 on 28 x 28 images) - dense(256) - ReLU -
    dense(n_outputs).
    """

    def __init__(self, input_shape=IMAGE_SHAPE, n_outputs=N_IMAGE_CLASSES):
        super().__init__()
        side_h, side_w = (((s - 4) // 2 - 4) // 2 for s in input_shape[1:])
        self.features = nn.Sequential(
            nn.Conv2d(input_shape[0], 6, 5), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        )
        self.classifier = nn.Sequential(nn.Linear(16 * side_h * side_w, 256), nn.ReLU(), nn.Linear(256, n_outputs))

    def forward(self, x):
        return self.classifier(self.features(x))


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------


def regression_function(X):
    """The smooth non-linear function of the 8 features that the targets are made from."""
    return (np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] * X[:, 2] + np.cos(X[:, 3]) * X[:, 4] + 0.3 * X[:, 5] ** 2
            + np.tanh(X[:, 6] - X[:, 7]))


def tabular(n, seed, thresholds=None, dtype=np.float64):
    """``X, y_regression, y_class`` of n rows; the classes cut ``f + noise`` at ``thresholds`` (terciles if None)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, N_FEATURES))
    f = regression_function(X)
    y = f + NOISE_STD * rng.standard_normal(n)
    score = f + NOISE_STD * rng.standard_normal(n)
    if thresholds is None:
        thresholds = np.quantile(score, [1 / 3, 2 / 3])
    return X.astype(dtype), y, np.digitize(score, thresholds), thresholds


def image_templates(seed=0):
    """One fixed pattern per class: three Gaussian blobs of random centre and width, scaled to a maximum of 1."""
    rng = np.random.default_rng(seed)
    grid = np.arange(28.0)
    templates = np.zeros((N_IMAGE_CLASSES, 28, 28))
    for c in range(N_IMAGE_CLASSES):
        for _ in range(3):
            cy, cx = rng.uniform(5, 23, size=2)
            width = rng.uniform(1.5, 4.0)
            templates[c] += np.exp(-((grid[:, None] - cy) ** 2 + (grid[None, :] - cx) ** 2) / (2 * width ** 2))
        templates[c] /= templates[c].max()
    return templates.reshape(N_IMAGE_CLASSES, -1).astype(np.float32)


def images(n, seed, dtype=np.float32, chunk=20000):
    """``X (n, 784), y``: the class pattern at strength U(0.4, 1), another class's at U(0, 0.4), noise N(0, 0.25^2)."""
    rng = np.random.default_rng(seed)
    templates = image_templates()
    y = rng.integers(N_IMAGE_CLASSES, size=n)
    other = (y + rng.integers(1, N_IMAGE_CLASSES, size=n)) % N_IMAGE_CLASSES
    X = np.empty((n, 28 * 28), dtype=dtype)
    for start in range(0, n, chunk):
        s = slice(start, min(start + chunk, n))
        m = s.stop - s.start
        part = (rng.uniform(0.4, 1.0, (m, 1)).astype(np.float32) * templates[y[s]]
                + rng.uniform(0.0, 0.4, (m, 1)).astype(np.float32) * templates[other[s]]
                + 0.25 * rng.standard_normal((m, 28 * 28), dtype=np.float32))
        X[s] = np.clip(part, 0.0, 1.0)
    return X, y


class Data:
    """The training rows of the largest size (smaller sizes: their first rows) and the held-out rows."""

    def __init__(self, max_rows, max_images, test_rows, x_dtype, seed):
        X, y, c, thresholds = tabular(max_rows, seed, dtype=x_dtype)
        Xt, yt, ct, _ = tabular(test_rows, seed + 1, thresholds, dtype=x_dtype)
        self.train = {"regression": (X, y), "classification": (X, c)}
        self.test = {"regression": (Xt, yt), "classification": (Xt, ct)}
        if max_images:
            self.train["images"] = images(max_images, seed + 2)  # float32 pixels, as in mnist_cnn.py
            self.test["images"] = images(test_rows, seed + 3)
        self.class_counts = np.bincount(c, minlength=3).tolist()

    def training(self, task, n):
        X, y = self.train[task]
        return X[:n], y[:n]


# ---------------------------------------------------------------------------
# The estimators, their warm-up and their projected cost
# ---------------------------------------------------------------------------


def sghmc_steps(n, batch_size=256):
    """Optimiser steps of the default SGHMC schedule on n rows (256 rows per step)."""
    steps_per_epoch = -(-n // batch_size)
    loop = SGHMC()._schedule(steps_per_epoch).loop
    return loop["max_steps"] or loop["max_iter"] * steps_per_epoch


def gp_budget_steps(n):
    """Most optimiser steps of the GPs' ``max_iter="auto"`` on n rows."""
    return min(GP_MAX_EPOCHS * -(-n // min(GP_BATCH, n)), GP_MAX_STEPS)


def gp_steps_run(n, n_iter):
    """Optimiser steps the GP ran: ``n_iter`` epochs of ``min(1024, n)`` rows, within the budget."""
    return min(n_iter * -(-n // min(GP_BATCH, n)), GP_MAX_STEPS)


def fit_ratio(cost, n, n_next, n_iter):
    """Projected fit time at ``n_next`` over the fit time at ``n`` (see the module docstring).

    ``cost``: ``"sghmc"`` (the default SGHMC step budget), ``"gp"`` (the
    GPs' ``max_iter="auto"`` budget against the steps of the ``n_iter``
    epochs run) or ``"linear"`` (in the rows).
    """
    if cost == "sghmc":
        return sghmc_steps(n_next) / sghmc_steps(n)
    if cost == "gp" and n_iter:
        return gp_budget_steps(n_next) / max(gp_steps_run(n, n_iter), 1)
    return n_next / n


def estimators(cnn_inference):
    """``{name: spec}``: the task, the cost model, the estimator per device and the settings of its warm-up fit.

    ``spec["make"](device, **kwargs)`` builds the estimator (kwargs: settings
    that replace its defaults); ``spec["warm"]`` are those of the untimed
    warm-up fit, ``spec["quick"]`` those of ``--quick`` (short budgets: a
    smoke run of the script, not a measurement of the defaults).
    """
    cnn_method = {"mcdropout": MCDropout, "mfvi": MeanFieldVI}[cnn_inference]
    cnn_name = f"BayesianMLPClassifier(module=LeNet, input_shape=(1, 28, 28), inference={cnn_method.__name__}())"
    return {
        "BayesianMLPRegressor()": {
            "task": "regression", "cost": "sghmc",
            "make": lambda device, **kw: BayesianMLPRegressor(device=device, random_state=0, **kw),
            "warm": {"inference": SGHMC(burn_in=2, thinning=1, n_kept_samples=2)},
            "quick": {"inference": SGHMC(burn_in=4, thinning=1, n_kept_samples=4)},
        },
        "BayesianMLPClassifier()": {
            "task": "classification", "cost": "linear",
            "make": lambda device, **kw: BayesianMLPClassifier(device=device, random_state=0, **kw),
            "warm": {"inference": DeepEnsemble(max_iter=2)},
            "quick": {"inference": DeepEnsemble(n_estimators=3, max_iter=5)},
        },
        "SparseGPRegressor()": {
            "task": "regression", "cost": "gp",
            "make": lambda device, **kw: SparseGPRegressor(device=device, random_state=0, **kw),
            "warm": {"inference": SparseVariational(max_iter=2)},
            "quick": {"inference": SparseVariational(max_iter=10)},
        },
        "DeepGPRegressor()": {
            "task": "regression", "cost": "gp",
            "make": lambda device, **kw: DeepGPRegressor(device=device, random_state=0, **kw),
            "warm": {"inference": SparseVariational(max_iter=2)},
            "quick": {"inference": SparseVariational(max_iter=10), "n_mc_predict": 10},
        },
        cnn_name: {
            "task": "images", "cost": "linear",
            "make": lambda device, inference=None, **kw: BayesianMLPClassifier(
                module=LeNet, input_shape=IMAGE_SHAPE, inference=inference or cnn_method(), device=device,
                random_state=0, **kw),
            "warm": {"inference": cnn_method(max_iter=1)},
            "quick": {"inference": cnn_method(max_iter=2, n_mc_predict=10)},
        },
    }


# ---------------------------------------------------------------------------
# One configuration
# ---------------------------------------------------------------------------


class ConfigTimeout(BaseException):
    """Raised by the alarm when a configuration outlives its time (not an Exception: nothing in between catches it)."""


class Terminated(BaseException):
    """Raised on SIGTERM."""


def _raise_timeout(signum, frame):
    raise ConfigTimeout()


def _raise_terminated(signum, frame):
    raise Terminated()


def synchronize(device):
    if device == "cuda":
        torch.cuda.synchronize()


def free(device):
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def warning_texts(caught):
    """Distinct ``Category: message`` of the warnings caught, each cut to 160 characters."""
    out = []
    for w in caught:
        text = f"{w.category.__name__}: {str(w.message)[:160]}"
        if text not in out:
            out.append(text)
    return out


def warm_up(spec, device, data):
    """Fit and predict once on 256 rows with a budget of one or two epochs; returns the seconds."""
    X, y = data.training(spec["task"], WARM_UP_ROWS)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = spec["make"](device, **spec["warm"]).fit(X, y)
        if spec["task"] == "regression":
            model.predict(X, return_std=True)
        else:
            model.predict_proba(X)
    synchronize(device)
    del model
    free(device)
    return time.perf_counter() - start


def measure(spec, n, device, data, quick=False):
    """Fit on the first n rows, predict on them and score the held-out rows: a dict of results."""
    X, y = data.training(spec["task"], n)
    X_test, y_test = data.test[spec["task"]]
    regression = spec["task"] == "regression"
    model = spec["make"](device, **(spec["quick"] if quick else {}))
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        model.fit(X, y)
        synchronize(device)
        fit_s = time.perf_counter() - start
        start = time.perf_counter()
        if regression:
            model.predict(X, return_std=True)
        else:
            model.predict_proba(X)
        synchronize(device)
        predict_s = time.perf_counter() - start
        if regression:
            mean = model.predict(X_test)
            resid = y_test - mean
            scores = {"r2": float(1 - resid @ resid / np.sum((y_test - y_test.mean()) ** 2)),
                      "mean_lpd": float(np.mean(model.log_predictive_density(X_test, y_test)))}
        else:
            proba = model.predict_proba(X_test)
            index = np.searchsorted(model.classes_, y_test)
            scores = {"accuracy": float(np.mean(proba.argmax(1) == index)),
                      "mean_log_proba": float(np.mean(np.log(np.clip(proba[np.arange(len(y_test)), index],
                                                                      1e-300, None))))}
    row = {
        "fit_s": fit_s, "predict_s": predict_s, "predict_rows_per_s": n / max(predict_s, 1e-9), **scores,
        "n_iter": int(getattr(model, "n_iter_", 0) or 0) or None,
        "dtype": str(getattr(model, "dtype_", None)), "device_used": str(getattr(model, "device_", None)),
        "warnings": warning_texts(caught),
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }
    if device == "cuda":
        row["peak_gpu_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    del model
    return row


# ---------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------


def fmt(value, spec=".3f", missing="—"):
    return missing if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def speedups(report):
    """CPU time / GPU time of the fit and the prediction, per estimator and size where both devices ran."""
    ok = {(r["estimator"], r["rows"], r["device"]): r for r in report["configurations"] if r["status"] == "ok"}
    out = []
    for (name, rows, device), gpu in ok.items():
        cpu = ok.get((name, rows, "cpu"))
        if device != "cuda" or cpu is None:
            continue
        score = "r2" if "r2" in gpu else "accuracy"
        out.append({"estimator": name, "rows": rows, "fit_speedup": cpu["fit_s"] / gpu["fit_s"],
                    "predict_speedup": cpu["predict_s"] / gpu["predict_s"], "score": score,
                    "score_cuda": gpu[score], "score_cpu": cpu[score]})
    return out


def score_text(r):
    if "r2" in r:
        return f"R² {r['r2']:.3f}, LPD {r['mean_lpd']:.3f}"
    return f"acc {r['accuracy']:.3f}, log p {r['mean_log_proba']:.3f}"


def markdown(report):
    env, s = report["environment"], report["settings"]
    command = " ".join(Path(a).name if i == 0 else a for i, a in enumerate(env["command"]))
    lines = [
        f"`{command}`; git {(env.get('git_commit') or '?')[:7]}; machine: {env['machine']}; "
        f"{env['torch_num_threads']} torch thread(s); torch {env['torch']} (CUDA {env.get('cuda_version')}), "
        f"scikit-learn {env['sklearn']}; {env['started']} to {env.get('finished', '?')}; load average "
        f"{env['loadavg_start']} at start, {env.get('loadavg_end', '?')} at end; complete: {report['complete']}.",
        "",
        ("**Quick smoke run: short training budgets, not the defaults.** " if s["quick"] else "")
        + f"Estimators at their defaults (only `device=` and `random_state=0` set), X {s['x_dtype']}; synthetic data: "
        f"{N_FEATURES} standard-normal features, a smooth non-linear target plus N(0, {NOISE_STD}²) noise (3 "
        "classes: its terciles), 28 x 28 images of 10 classes for the CNN. Fit: wall clock after an untimed "
        "warm-up fit on 256 rows (CUDA synchronised). Predict: `predict(X, return_std=True)` / `predict_proba(X)` "
        f"on the training rows. Scores on {s['test_rows']:,} held-out rows: R² and mean log predictive density "
        "(nats) for regressors, accuracy and mean log probability of the true class for classifiers. Guards: "
        f"{s['max_seconds_per_fit']} s per fit (3x for the projected next size), {s['max_seconds_per_config']} s per "
        f"configuration, deadline {s['deadline_seconds']} s.",
        "",
        "| estimator | rows | device | fit s | predict s | predict rows/s | test scores | n_iter | dtype | "
        "peak GPU MiB | status |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["configurations"]:
        if r["status"] == "ok":
            lines.append(
                f"| {r['estimator']} | {r['rows']:,} | {r['device']} | {r['fit_s']:.2f} | {r['predict_s']:.2f} | "
                f"{r['predict_rows_per_s']:,.0f} | {score_text(r)} | {fmt(r['n_iter'], 'd')} | "
                f"{r['dtype']} | {fmt(r.get('peak_gpu_mb'), '.0f')} | ok |")
        else:
            reason = (r.get("reason") or "").replace("|", "/").replace("\n", " ")
            lines.append(f"| {r['estimator']} | {r['rows']:,} | {r['device']} | — | — | — | — | — | — | — | "
                         f"{r['status']}: {reason} |")
    pairs = speedups(report)
    if pairs:
        lines += ["", "Speed-up, CPU time / GPU time (same machine):", "",
                  "| estimator | rows | fit | predict | test score CUDA | test score CPU |", "|---|---|---|---|---|---|"]
        for p in pairs:
            lines.append(f"| {p['estimator']} | {p['rows']:,} | {p['fit_speedup']:.2f}x | "
                         f"{p['predict_speedup']:.2f}x | {p['score']} {p['score_cuda']:.3f} | "
                         f"{p['score']} {p['score_cpu']:.3f} |")
    warm = [f"{w['estimator']} on {w['device']} {w['seconds']:.1f} s" for w in report["warm_up"]]
    if warm:
        lines += ["", "Warm-up fits (untimed above): " + "; ".join(warm) + "."]
    if report.get("cuda_init_s") is not None:
        lines.append(f"CUDA initialisation: {report['cuda_init_s']:.1f} s.")
    return "\n".join(lines) + "\n"


def machine():
    text = f"{platform.platform()}, {os.cpu_count()} CPUs"
    if torch.cuda.is_available():
        text += f", {torch.cuda.get_device_name()}"
    return text


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def parse_args(argv=None):
    cuda = torch.cuda.is_available()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=None,
                        help="Training rows of the tabular estimators (default 10000 100000 1000000; quick 300 600).")
    parser.add_argument("--cnn-rows", type=int, nargs="*", default=None,
                        help="Training images of the CNN (default 10000 60000; quick 200; none: no CNN).")
    parser.add_argument("--devices", nargs="+", choices=["cuda", "cpu"], default=["cuda", "cpu"] if cuda else ["cpu"],
                        help="Devices, in this order per estimator (default: cuda cpu with CUDA, else cpu).")
    parser.add_argument("--estimators", nargs="+", default=None, metavar="NAME",
                        help="Run only the estimators whose name contains one of these (case-insensitive), "
                             "e.g. Regressor SparseGP LeNet.")
    parser.add_argument("--cnn-inference", choices=["mcdropout", "mfvi"], default="mcdropout",
                        help="The CNN's inference method, at its defaults (default: mcdropout).")
    parser.add_argument("--max-seconds-per-fit", type=float, default=30.0,
                        help="Skip the larger sizes of an estimator and device after a fit longer than this, or "
                             "when the next size is projected to take over 3x this (default 30).")
    parser.add_argument("--max-seconds-per-config", type=float, default=None,
                        help="Abort a configuration (warm-up, fit, predict, scores) after this long "
                             "(default 4 x --max-seconds-per-fit).")
    parser.add_argument("--deadline-seconds", type=float, default=330.0,
                        help="No configuration starts after this many seconds from the start, and a running one "
                             "is aborted then (default 330).")
    parser.add_argument("--test-rows", type=int, default=None, help="Held-out rows (default 2000; quick 500).")
    parser.add_argument("--x-dtype", choices=["float64", "float32"], default="float64",
                        help="dtype of the tabular X (default float64: the CPU computes in float64, CUDA in "
                             "float32); the images are float32.")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch.set_num_threads(N) (default: torch's, one per core; 1 with --quick).")
    parser.add_argument("--seed", type=int, default=0, help="Seed of the synthetic data (default 0).")
    parser.add_argument("--quick", action="store_true",
                        help="Smoke run: rows 300 600, CNN 200, 500 test rows, 1 torch thread, and short training budgets "
                             "and 10 prediction draws instead of the defaults (e.g. SparseVariational(max_iter=10)).")
    parser.add_argument("--out-dir", "--output-dir", dest="output_dir", default=str(RESULTS),
                        help="Folder of the results (default examples/benchmarks/results/performance).")
    parser.add_argument("--tag", default=None, help="Results file tag (default device_cuda or device_cpu, "
                                                    "quick_ in front with --quick).")
    args = parser.parse_args(argv)
    args.rows = args.rows or ([300, 600] if args.quick else [10_000, 100_000, 1_000_000])
    if args.cnn_rows is None:
        args.cnn_rows = [200] if args.quick else [10_000, 60_000]
    args.test_rows = args.test_rows or (500 if args.quick else 2000)
    if args.quick and args.threads is None:
        args.threads = 1  # a smoke run on a shared machine: several threads on busy cores run 10-50x slower
    args.max_seconds_per_config = args.max_seconds_per_config or 4 * args.max_seconds_per_fit
    if args.tag is None:
        args.tag = ("quick_" if args.quick else "") + ("device_cuda" if "cuda" in args.devices else "device_cpu")
    return args


def schedule(specs, args):
    """``[(name, level, n, device), ...]`` in the order of the runs: size by size, estimator by estimator."""
    sizes = {name: (args.cnn_rows if spec["task"] == "images" else args.rows) for name, spec in specs.items()}
    out = []
    for level in range(max(len(v) for v in sizes.values())):
        for name in specs:
            if level < len(sizes[name]):
                out += [(name, level, sizes[name][level], device) for device in args.devices]
    return out, sizes


def main(argv=None, t0=None):
    """Run the benchmark; the deadline counts from ``t0`` (``time.monotonic()``; default: this module's import)."""
    t0 = T0 if t0 is None else t0
    args = parse_args(argv)
    limit_threads(args.threads)
    specs = estimators(args.cnn_inference)
    if not args.cnn_rows:
        specs = {k: v for k, v in specs.items() if v["task"] != "images"}
    if args.estimators:
        wanted = [w.lower() for w in args.estimators]
        specs = {k: v for k, v in specs.items() if any(w in k.lower() for w in wanted)}
    json_path, md_path = output_paths(args, "gpu_scaling")
    runs, sizes = schedule(specs, args)

    env = environment()
    env["machine"] = machine()
    env["gpu"] = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    env["cuda_version"] = torch.version.cuda
    report = {
        "settings": {**{k: v for k, v in vars(args).items() if k != "output_dir"}, "n_features": N_FEATURES,
                     "noise_std": NOISE_STD, "estimators": list(specs)},
        "environment": env, "complete": False, "cuda_init_s": None, "warm_up": [], "configurations": [],
        "speedups": [],
    }
    print(f"torch threads: {torch.get_num_threads()}; load average: {env['loadavg_start']}; devices: "
          f"{', '.join(args.devices)}; machine: {env['machine']}", flush=True)

    def save():
        report["speedups"] = speedups(report)
        write_atomic(json_path, json.dumps(report, indent=1) + "\n")
        write_atomic(md_path, markdown(report))

    def body():
        start = time.monotonic()
        max_images = max(args.cnn_rows, default=0) if any(s["task"] == "images" for s in specs.values()) else 0
        data = Data(max(args.rows), max_images, args.test_rows, np.dtype(args.x_dtype), args.seed)
        report["settings"]["class_counts"] = data.class_counts
        report["data_seconds"] = time.monotonic() - start
        print(f"data made in {report['data_seconds']:.1f} s", flush=True)
        if "cuda" in args.devices and torch.cuda.is_available():
            start = time.monotonic()
            torch.zeros(1, device="cuda") @ torch.zeros(1, device="cuda")
            torch.cuda.synchronize()
            report["cuda_init_s"] = time.monotonic() - start
        blocked, warmed = {}, set()
        signal.signal(signal.SIGALRM, _raise_timeout)
        for name, level, n, device in runs:
            spec, key = specs[name], (name, device)
            row = {"estimator": name, "rows": n, "device": device, "loadavg": loadavg()}
            left = args.deadline_seconds - (time.monotonic() - t0)
            if device == "cuda" and not torch.cuda.is_available():
                row.update(status="skipped", reason="CUDA not available")
            elif key in blocked:
                row.update(status="skipped", reason=blocked[key])
            elif left <= 0:
                row.update(status="skipped", reason=f"deadline of {args.deadline_seconds:g} s reached")
            else:
                limit = min(args.max_seconds_per_config, left)
                print(f"{name} | {n:,} rows | {device} ... (at most {limit:.3g} s)", flush=True)
                started = time.monotonic()
                try:
                    signal.setitimer(signal.ITIMER_REAL, limit)
                    try:
                        if key not in warmed:
                            seconds = warm_up(spec, device, data)
                            warmed.add(key)
                            report["warm_up"].append({"estimator": name, "device": device, "seconds": seconds})
                        row.update(status="ok", **measure(spec, n, device, data, args.quick))
                    finally:
                        signal.setitimer(signal.ITIMER_REAL, 0)  # before any handler below runs
                except ConfigTimeout:
                    why = "deadline" if limit < args.max_seconds_per_config else "--max-seconds-per-config"
                    row.update(status="aborted", reason=f"still running after {limit:.3g} s ({why})")
                except Terminated:
                    row.update(status="aborted", reason="SIGTERM")
                    report["configurations"].append(row)
                    raise KeyboardInterrupt from None  # run_saving writes what was measured
                except Exception as exc:  # a failure (e.g. CUDA out of memory) is a finding, not a crash
                    tb = traceback.extract_tb(exc.__traceback__)[-1]
                    row.update(status="error", reason=f"{type(exc).__name__}: {str(exc)[:400]} "
                                                      f"({Path(tb.filename).name}:{tb.lineno})")
                row["config_s"] = time.monotonic() - started
                free(device)
                if row["status"] != "ok":
                    blocked[key] = f"{row['status']} at {n:,} rows ({row['reason'][:120]})"
                elif level + 1 < len(sizes[name]):
                    n_next = sizes[name][level + 1]
                    cost = "linear" if args.quick else spec["cost"]  # the step budgets are those of the defaults
                    projected = (row["fit_s"] * fit_ratio(cost, n, n_next, row["n_iter"])
                                 + row["predict_s"] * n_next / n)
                    row["projected_next_s"] = projected
                    if row["fit_s"] > args.max_seconds_per_fit:
                        blocked[key] = (f"fit at {n:,} rows took {row['fit_s']:.0f} s > "
                                        f"{args.max_seconds_per_fit:g} s")
                    elif projected > 3 * args.max_seconds_per_fit:
                        blocked[key] = (f"projected {projected:.0f} s at {n_next:,} rows (from {n:,}) > "
                                        f"3 x {args.max_seconds_per_fit:g} s")
                if row["status"] == "ok":
                    print(f"    fit {row['fit_s']:.2f} s, predict {row['predict_s']:.2f} s "
                          f"({row['predict_rows_per_s']:,.0f} rows/s), {score_text(row)}, n_iter {row['n_iter']}, "
                          f"{row['dtype']}" + (f", next size projected {row['projected_next_s']:.0f} s"
                                               if "projected_next_s" in row else ""), flush=True)
                else:
                    print(f"    {row['status']}: {row['reason']}", flush=True)
            if row["status"] == "skipped":
                print(f"{name} | {n:,} rows | {device}: skipped ({row['reason']})", flush=True)
            report["configurations"].append(row)
            save()

    def guarded_body():
        try:
            body()
        except Terminated:  # between two configurations
            raise KeyboardInterrupt from None

    signal.signal(signal.SIGTERM, _raise_terminated)
    run_saving(report, guarded_body, save)
    report["elapsed_s"] = time.monotonic() - t0
    save()
    print_written(json_path, md_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
