"""Benchmark of SparseGPRegressor against GPyTorch's SVGP and an exact GP.

What it does
------------
UCI mode (the default). For each requested UCI dataset (default: kin8nm and
power-plant; absent ones are skipped with a note) and each of the first
``--splits`` fixed 90/10 splits, X is standardised with the training rows'
mean and std (``StandardScaler``), and the methods of ``--methods`` are fitted
on the training rows, one after the other, INTERLEAVED: within a split every
method runs once, and the order of the methods is rotated by one position
from one split to the next, so that slow drifts of the machine's load do not
favour one method.

skbayes rows, ``SparseGPRegressor(n_inducing=M, random_state=SPLIT, ...)``
with the defaults otherwise (RBF-ARD kernel, k-means initial inducing points,
batch_size="auto" = min(1024, N), Adam lr 0.01 for the hyperparameters,
``normalize_y=True``, float64 on the CPU):

``skbayes``           inference=SparseVariational() (objective="vfe", optimizer="adam", the defaults)
``skbayes_fitc``      SparseVariational(objective="fitc")
``skbayes_ngd``       SparseVariational(optimizer="ngd") (ngd_step_size=0.1)
``skbayes_fitc_ngd``  SparseVariational(objective="fitc", optimizer="ngd")

GPyTorch rows (optional; skipped with a note when GPyTorch is not
installed): ``gpytorch.models.ApproximateGP`` with a whitened
``VariationalStrategy(learn_inducing_locations=True)``,
``ScaleKernel(RBFKernel(ard_num_dims=d))``, ``ConstantMean`` and a
``GaussianLikelihood``, trained on ``VariationalELBO(num_data=N)`` in
float64, on y standardised with the training mean and std, with GPyTorch's
own initial hyperparameters (standard, untuned use), the SAME M, the SAME
initial inducing points (``MiniBatchKMeans(n_clusters=M, n_init=1)`` with the
seed that SparseGPRegressor derives from ``random_state=SPLIT``), the SAME
batch size, a reshuffle every epoch (and torch's global generator, from
which GPyTorch draws the initial mean of q(u), seeded with SPLIT), and the
SAME stopping rule:

``gpytorch_svgp``      ``CholeskyVariationalDistribution``, Adam (lr 0.01) on
                       all parameters
``gpytorch_svgp_ngd``  ``NaturalVariationalDistribution`` with
                       ``gpytorch.optim.NGD(lr=0.1)``, Adam (lr 0.01) on the
                       hyperparameters and Z

``exact_gp``: scikit-learn's ``GaussianProcessRegressor(ConstantKernel() *
RBF(length_scale=np.ones(d)) + WhiteKernel(), normalize_y=True)`` (one
L-BFGS run, no restarts) on a random subset (seeded by the split) of at most
``--exact-max-rows`` training rows (the full exact GP does not fit: on
power-plant one likelihood evaluation on all 8611 rows took 33 s and 11 GB).

Budget (``--budget``), the same for every sparse method:

``converged`` (default)  each method runs until ITS OWN epoch loss stops
    improving: the stopping rule of skbayes' training loop (stop after more
    than ``--n-iter-no-change`` consecutive epochs without a decrease of the
    per-datum loss by at least ``--tol``), applied to GPyTorch's per-datum
    negative ELBO too, with ``--max-iter`` epochs as a cap (a fit that hits
    the cap is flagged with ``*``).
``fixed``  every sparse method runs exactly ``--max-iter`` epochs (skbayes
    with tol=0 and n_iter_no_change=max_iter, so it cannot stop earlier).
``default``  the skbayes rows run with the estimator's own stopping
    parameters, untouched (``max_iter="auto"``: at most 1000 epochs or 4000
    optimiser steps, whichever comes first; tol=1e-5, n_iter_no_change=20),
    as a user gets them; the GPyTorch rows keep the ``converged`` rule above.

Test-LL trace (``--trace-every K``). For the ``skbayes`` and
``gpytorch_svgp`` rows, the test LL is recorded every K epochs together
with the training wall time elapsed since the fit's clock started, the clock
paused while the test LL is evaluated (so the trace's times, and these rows'
fit times, exclude the evaluations). skbayes: a training-loop callback
(``skbayes._training.Callback``, passed in ``callbacks``) that sets the
fitted attributes from the module as it stands and calls
``log_predictive_density`` (q(u) as the optimiser has it; the fit then ends
with the closed-form q(u), which the trace's last point, the finished fit,
has); GPyTorch: its predictive distribution in eval mode, in the same
formula. Each trace ends with the finished fit's point (its epochs, fit time
and test LL). Per split, the JSON's ``time_to_reference`` and a markdown
table give the first traced time at which skbayes' test LL reaches
GPyTorch's FINAL test LL, and its ratio to GPyTorch's fit time ("not
reached" when no point does). K sets the resolution: a reach is only seen
at a traced epoch.

Metrics, in the ORIGINAL units of y: test RMSE of the predictive mean, test
LL = mean over test points of log N(y_i | mu_i, sigma_i^2), sigma_i including
the observation noise, and the fit time in seconds (wall clock; for the
sparse models it includes the k-means initialisation, for skbayes the two
closed-form q(u) passes, for GPyTorch the model construction). Aggregates
are mean ± standard error over splits, SE = np.std(ddof=0) / sqrt(n_splits),
and per split the paired differences (test LL, time ratio) of every skbayes
row against ``gpytorch_svgp``. Fits run one at a time in one process; the
JSON is rewritten after every fit so an interrupted run keeps what it
measured.

Synthetic mode (``--synthetic-rows N``, or ``--synthetic-1m`` for N =
1,000,000). Instead of the UCI runs, fits the skbayes rows of ``--methods``
(default: ``skbayes`` only) on N x 8 synthetic rows, X ~ N(0, I) and
y = sum_j sin(x_j) + 0.1 * noise, and reports the fit time, epochs, seconds
per epoch, the test LL and RMSE on 10,000 fresh rows, and the peak resident
memory of the process (``resource.getrusage(RUSAGE_SELF).ru_maxrss``,
kilobytes on Linux) after each fit, plus the peak before fitting (after
generating the data). ru_maxrss is a high-water mark of the whole process:
run one method per process to attribute it.

How to run
----------
::

    python examples/benchmarks/sparse_gp_benchmark.py \\
        --threads 1 --tag converged
    python examples/benchmarks/sparse_gp_benchmark.py --datasets kin8nm --splits 1 \\
        --n-inducing 64 --budget fixed --max-iter 5 --threads 1 --tag smoke
    python examples/benchmarks/sparse_gp_benchmark.py --datasets kin8nm power-plant --splits 1 \\
        --n-inducing 256 --methods skbayes gpytorch_svgp --budget default --trace-every 5 --threads 1 \\
        --tag trace_default_m256
    python examples/benchmarks/sparse_gp_benchmark.py --synthetic-1m --max-iter 5 \\
        --threads 2 --tag synthetic_1m

Options: ``--datasets`` (default: kin8nm power-plant), ``--splits N``
(default 3), ``--n-inducing M`` (default 256), ``--methods`` (default: all
of the above in UCI mode, ``skbayes`` in synthetic mode), ``--budget``
(converged, fixed or default), ``--max-iter`` (cap or exact number of epochs;
default 1000, the estimator's default), ``--tol`` (default 1e-5) and
``--n-iter-no-change`` (default 20), the estimator's defaults,
``--trace-every K`` (default: off),
``--exact-max-rows`` (default 2000; 0 skips the exact GP), ``--no-gpytorch``
(drop the GPyTorch rows), ``--synthetic-rows N``, ``--synthetic-1m``,
``--threads`` (``torch.set_num_threads`` and the BLAS thread pools via
threadpoolctl; default: leave the defaults), ``--data-home``, ``--tag``
(default: a timestamp), ``--output-dir`` (default:
``examples/benchmarks/results/sparse_gp/``).

What it prints
--------------
The environment line (threads, load average), a note for every skipped
dataset or method, one progress line per fit (dataset, method, split, rows
used, RMSE, test LL, epochs, seconds), the final markdown tables and the
paths of the two files written: ``sparse_gp_<tag>.json`` (settings, per-split
raw numbers, aggregates, paired differences, environment: library versions,
torch threads, ``os.getloadavg()`` at start and end, command line) and
``sparse_gp_<tag>.md`` (the tables and those notes).
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
from sklearn.cluster import MiniBatchKMeans
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
from sklearn.utils import check_random_state

from skbayes import SparseGPRegressor
from skbayes.inference import SparseVariational
from skbayes._training import Callback
from skbayes.datasets import fetch_uci, get_data_home

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    environment, limit_threads, loadavg, output_paths, peak_rss_mb,
    print_written, run_saving, standardised_split, write_atomic, results_dir,
)

SKBAYES_VARIANTS = {
    "skbayes": {},
    "skbayes_fitc": {"objective": "fitc"},
    "skbayes_ngd": {"optimizer": "ngd"},
    "skbayes_fitc_ngd": {"objective": "fitc", "optimizer": "ngd"},
}
GPYTORCH_VARIANTS = {"gpytorch_svgp": "adam", "gpytorch_svgp_ngd": "ngd"}
METHODS = (*SKBAYES_VARIANTS, *GPYTORCH_VARIANTS, "exact_gp")
TRACED = ("skbayes", "gpytorch_svgp")  # the rows --trace-every traces; the second is the reference
BUDGETS = ("converged", "fixed", "default")
METRICS = ("rmse", "test_ll", "fit_time_s", "n_iter", "n_train_used")
LOG_2PI = float(np.log(2 * np.pi))
AUTO_BATCH = 1024  # SparseGPRegressor's batch_size="auto" is min(1024, N)
SYNTHETIC_FEATURES, SYNTHETIC_TEST_ROWS = 8, 10_000


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--datasets", nargs="+", default=["kin8nm", "power-plant"],
                        help="UCI names or aliases (default: kin8nm power-plant).")
    parser.add_argument("--splits", type=int, default=3, help="Use the first N fixed splits (default: 3).")
    parser.add_argument("--n-inducing", type=int, default=256, help="Inducing points M (default: 256).")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=None,
                        help="Methods to run (default: all in UCI mode, skbayes in synthetic mode).")
    parser.add_argument("--budget", choices=BUDGETS, default="converged",
                        help="converged: each method stops by the shared rule, --max-iter as a cap; "
                             "fixed: exactly --max-iter epochs each; default: the skbayes rows with the "
                             "estimator's own stopping defaults (max_iter='auto'), GPyTorch by the converged "
                             "rule (default: converged).")
    parser.add_argument("--max-iter", type=int, default=1000,
                        help="Epoch cap (converged; GPyTorch's under --budget default) or exact epochs "
                             "(fixed) (default: 1000).")
    parser.add_argument("--trace-every", type=int, default=None, metavar="K",
                        help="Record the test LL of the skbayes and gpytorch_svgp rows every K epochs with "
                             "the training time elapsed, the clock paused while evaluating (default: off).")
    parser.add_argument("--tol", type=float, default=1e-5,
                        help="Stopping rule: minimum decrease of the per-datum loss (default: 1e-5).")
    parser.add_argument("--n-iter-no-change", type=int, default=20,
                        help="Stopping rule: epochs without that decrease (default: 20).")
    parser.add_argument("--exact-max-rows", type=int, default=2000,
                        help="Training rows for the exact GP, a random subset (default: 2000; 0 skips it).")
    parser.add_argument("--no-gpytorch", action="store_true", help="Drop the GPyTorch rows.")
    parser.add_argument("--synthetic-rows", type=int, default=None,
                        help="Synthetic mode: fit on N x 8 synthetic rows instead of UCI.")
    parser.add_argument("--synthetic-1m", action="store_true",
                        help="Synthetic mode with 1,000,000 x 8 rows (same as --synthetic-rows 1000000).")
    parser.add_argument("--data-home", default=None,
                        help="Folder holding uci/<name>/ (a copy that overrides the bundled sets; default: $SKBAYES_DATA_HOME, else ~/.cache/skbayes, else the bundled copy).")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch.set_num_threads(N) and BLAS threads (default: leave the defaults).")
    parser.add_argument("--tag", default=None, help="Results file name sparse_gp_<tag>.* (default: a timestamp).")
    parser.add_argument("--output-dir", default=str(results_dir("sparse_gp")),
                        help="Folder for the results (default: examples/benchmarks/results/sparse_gp/).")
    args = parser.parse_args(argv)
    if args.synthetic_1m:
        if args.synthetic_rows not in (None, 1_000_000):
            parser.error("--synthetic-1m and --synthetic-rows disagree")
        args.synthetic_rows = 1_000_000
    for name in ("splits", "n_inducing", "max_iter", "threads", "synthetic_rows", "n_iter_no_change",
                 "trace_every"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.exact_max_rows < 0 or args.tol < 0:
        parser.error("--exact-max-rows and --tol must be >= 0")
    if args.methods is None:
        args.methods = ["skbayes"] if args.synthetic_rows else list(METHODS)
    if args.no_gpytorch:
        args.methods = [m for m in args.methods if m not in GPYTORCH_VARIANTS]
    if args.exact_max_rows == 0:
        args.methods = [m for m in args.methods if m != "exact_gp"]
    if args.synthetic_rows and any(m not in SKBAYES_VARIANTS for m in args.methods):
        parser.error(f"synthetic mode runs only the skbayes rows: {', '.join(SKBAYES_VARIANTS)}")
    return args


def gaussian_ll(y, mean, std):
    return float(np.mean(-0.5 * LOG_2PI - np.log(std) - 0.5 * ((y - mean) / std) ** 2))


def metrics(y_test, mean, std):
    return {"rmse": float(np.sqrt(np.mean((mean - y_test) ** 2))), "test_ll": gaussian_ll(y_test, mean, std)}


def skbayes_init_seed(random_state):
    """The seed SparseGPRegressor.fit passes to MiniBatchKMeans for an integer random_state."""
    return int(check_random_state(random_state).randint(0, 2**31 - 1, size=2)[0])


def stopping_params(budget):
    """SparseVariational parameters that implement the budget (none: its defaults)."""
    if budget["mode"] == "default":
        return {}
    if budget["mode"] == "fixed":  # cannot stop before max_iter
        return {"max_iter": budget["max_iter"], "tol": 0.0, "n_iter_no_change": budget["max_iter"]}
    return {"max_iter": budget["max_iter"], "tol": budget["tol"], "n_iter_no_change": budget["n_iter_no_change"]}


class TestLLTrace(Callback):
    """The test LL every ``every`` epochs, against the training time elapsed, the clock paused while evaluating.

    A training-loop callback for the skbayes rows; GPyTorch's loop calls
    :meth:`record` itself. ``evaluate() -> float`` returns the mean test LL of
    the model as it stands. :meth:`start` starts the clock (before the
    initialisation, where the fit's clock starts); :meth:`elapsed` is the
    wall time since then minus the time spent in ``evaluate``.
    """

    def __init__(self, every, evaluate):
        self.every, self.evaluate = every, evaluate

    def start(self):
        self.points, self.paused, self.started = [], 0.0, time.perf_counter()

    def elapsed(self):
        return time.perf_counter() - self.started - self.paused

    def record(self, epoch):
        elapsed = self.elapsed()
        before = time.perf_counter()
        test_ll = float(self.evaluate())
        self.paused += time.perf_counter() - before
        self.points.append({"epoch": epoch, "time_s": elapsed, "test_ll": test_ll})

    def on_epoch_end(self, state):
        if (state.epoch + 1) % self.every == 0:
            self.record(state.epoch + 1)


def finish_trace(trace, res):
    """The trace's points plus the finished fit's (its epochs, fit time and test LL), for the JSON."""
    final = {"epoch": res["n_iter"], "time_s": res["fit_time_s"], "test_ll": res["test_ll"], "final": True}
    return {"every": trace.every, "eval_time_s": trace.paused, "points": [*trace.points, final]}


def fit_skbayes(variant, X_train, y_train, X_test, y_test, n_inducing, seed, budget, trace_every=None):
    params = {**SKBAYES_VARIANTS[variant], **stopping_params(budget)}  # of SparseVariational
    model = SparseGPRegressor(n_inducing=n_inducing, random_state=seed, inference=SparseVariational(**params))
    trace = None
    if trace_every is not None and variant in TRACED:

        def evaluate():
            # The fitted attributes that prediction reads (noise_std_, ...) from the module as it stands:
            # log_predictive_density of the model being trained, q(u) as Adam has it (fit ends with the
            # closed-form q(u), which the final point has).
            model._set_fitted_hyperparameters()
            return np.mean(model.log_predictive_density(X_test, y_test))

        trace = TestLLTrace(trace_every, evaluate)
        model.set_params(callbacks=[trace])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        if trace is not None:
            trace.start()
        start = time.perf_counter()
        model.fit(X_train, y_train)
        fit_time = time.perf_counter() - start if trace is None else trace.elapsed()
    mean, std = model.predict(X_test, return_std=True)
    res = metrics(y_test, mean, std)
    res["test_ll_log_predictive_density"] = float(np.mean(model.log_predictive_density(X_test, y_test)))
    budget_warnings = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    res.update({
        "fit_time_s": fit_time, "n_iter": int(model.n_iter_), "n_train_used": int(X_train.shape[0]),
        "s_per_epoch": fit_time / model.n_iter_,
        "hit_max_iter": budget["mode"] != "fixed" and bool(budget_warnings),
        "hit_max_steps": any("optimiser steps" in m for m in budget_warnings),
        "final_loss": float(model.loss_curve_[-1]), "noise_std": float(model.noise_std_),
        "batch_size": min(AUTO_BATCH, X_train.shape[0]) if model.batch_size == "auto" else int(model.batch_size),
        "device": str(model.device_), "dtype": model.dtype_, "params": params,
        "max_iter": model.inference.max_iter,
    })
    if trace is not None:
        res["trace"] = finish_trace(trace, res)
    return res


class _StoppingRule:
    """skbayes._training.fit_loop's rule, for loops that are not skbayes'."""

    def __init__(self, budget):
        self.fixed = budget["mode"] == "fixed"
        self.tol, self.patience = budget["tol"], budget["n_iter_no_change"]
        self.best, self.no_improvement = math.inf, 0

    def stop(self, loss):
        if self.fixed:
            return False
        improved = loss < self.best - self.tol
        self.best = min(self.best, loss)
        self.no_improvement = 0 if improved else self.no_improvement + 1
        return self.no_improvement > self.patience


def fit_gpytorch(variant, X_train, y_train, X_test, y_test, n_inducing, seed, budget, trace_every=None):
    """GPyTorch SVGP with the same M, initial Z, batch size and stopping rule; None if not installed."""
    try:
        import gpytorch
    except ImportError:
        return None
    natural = GPYTORCH_VARIANTS[variant] == "ngd"

    class SVGPModel(gpytorch.models.ApproximateGP):
        def __init__(self, inducing_points):
            size = inducing_points.size(0)
            if natural:
                distribution = gpytorch.variational.NaturalVariationalDistribution(size)
            else:
                distribution = gpytorch.variational.CholeskyVariationalDistribution(size)
            strategy = gpytorch.variational.VariationalStrategy(
                self, inducing_points, distribution, learn_inducing_locations=True)
            super().__init__(strategy)
            self.mean_module = gpytorch.means.ConstantMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(
                gpytorch.kernels.RBFKernel(ard_num_dims=inducing_points.size(1)))

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    dtype = torch.float64
    X_test_t = torch.as_tensor(X_test, dtype=dtype)

    def predict():
        """Predictive mean and std (noise included) at X_test, original units; leaves train mode on."""
        model.eval()
        likelihood.eval()
        with torch.no_grad():
            pred = likelihood(model(X_test_t))
            mean = pred.mean.numpy() * y_std + y_mean
            std = np.sqrt(pred.variance.numpy()) * y_std
        model.train()
        likelihood.train()
        return mean, std

    trace = None
    if trace_every is not None and variant in TRACED:
        trace = TestLLTrace(trace_every, lambda: gaussian_ll(y_test, *predict()))
        trace.start()
    start = time.perf_counter()
    y_mean, y_std = float(y_train.mean()), float(y_train.std()) or 1.0
    n, m = X_train.shape[0], min(n_inducing, X_train.shape[0])
    batch_size = min(AUTO_BATCH, n)
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
    if natural:
        optimizers = [
            gpytorch.optim.NGD(model.variational_parameters(), num_data=n, lr=0.1),
            torch.optim.Adam([*model.hyperparameters(), *likelihood.parameters()], lr=0.01),
        ]
    else:
        optimizers = [torch.optim.Adam([*model.parameters(), *likelihood.parameters()], lr=0.01)]
    mll = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=n)  # per-datum ELBO, like skbayes' loss
    generator = torch.Generator().manual_seed(int(seed))
    # GPyTorch draws the initial mean of q(u) from torch's global generator, whose seed differs per process.
    torch.manual_seed(int(seed))
    rule = _StoppingRule(budget)
    losses = []
    for epoch in range(budget["max_iter"]):
        perm = torch.randperm(n, generator=generator)
        total = 0.0
        for i in range(0, n, batch_size):
            idx = perm[i:i + batch_size]
            for optimizer in optimizers:
                optimizer.zero_grad()
            loss = -mll(model(X_t[idx]), y_t[idx])
            loss.backward()
            for optimizer in optimizers:
                optimizer.step()
            total += loss.item() * len(idx)
        losses.append(total / n)
        if not math.isfinite(losses[-1]):
            break
        if trace is not None and (epoch + 1) % trace.every == 0:
            trace.record(epoch + 1)
        if rule.stop(losses[-1]):
            break
    fit_time = time.perf_counter() - start if trace is None else trace.elapsed()
    n_epochs = len(losses)
    res = metrics(y_test, *predict())
    res.update({
        "fit_time_s": fit_time, "n_iter": n_epochs, "n_train_used": n, "s_per_epoch": fit_time / n_epochs,
        "hit_max_iter": budget["mode"] != "fixed" and n_epochs == budget["max_iter"],
        "final_loss": losses[-1], "noise_std": float(np.sqrt(likelihood.noise.item()) * y_std),
        "batch_size": batch_size, "gpytorch": gpytorch.__version__,
    })
    if trace is not None:
        res["trace"] = finish_trace(trace, res)
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


def paired(rows, reference="gpytorch_svgp"):
    """Per split: test LL of each skbayes row minus the reference's, and the fit-time ratio."""
    if reference not in rows:
        return {}
    ref = {r["split"]: r for r in rows[reference]}
    out = {}
    for method in SKBAYES_VARIANTS:
        pairs = [(r, ref[r["split"]]) for r in rows.get(method, []) if r["split"] in ref]
        if pairs:
            out[method] = {
                "splits": [a["split"] for a, _ in pairs],
                "test_ll_diff": [a["test_ll"] - b["test_ll"] for a, b in pairs],
                "time_ratio": [a["fit_time_s"] / b["fit_time_s"] for a, b in pairs],
            }
    return out


def time_to_reference(rows, method=TRACED[0], reference=TRACED[1]):
    """Per split: the training time at which ``method``'s traced test LL first reaches ``reference``'s final one.

    The trace's points are in the order of training time (the finished fit's
    point last); ``time_s`` and ``epoch`` are None when no point reaches it.
    ``time_ratio`` divides that time by the reference's fit time.
    """
    ref = {r["split"]: r for r in rows.get(reference, []) if "trace" in r}
    out = []
    for r in rows.get(method, []):
        if "trace" not in r or r["split"] not in ref:
            continue
        target, ref_time = ref[r["split"]]["test_ll"], ref[r["split"]]["fit_time_s"]
        hit = next((p for p in r["trace"]["points"] if p["test_ll"] >= target), None)
        out.append({
            "split": r["split"], "reference_test_ll": target, "reference_fit_time_s": ref_time,
            "reference_n_iter": ref[r["split"]]["n_iter"], "final_test_ll": r["test_ll"],
            "fit_time_s": r["fit_time_s"], "n_iter": r["n_iter"],
            "time_s": None if hit is None else hit["time_s"], "epoch": None if hit is None else hit["epoch"],
            "time_ratio": None if hit is None else hit["time_s"] / ref_time,
        })
    return out


def fmt(agg, key, digits=3):
    mean, se = agg[key]["mean"], agg[key]["se"]
    return "—" if np.isnan(mean) else f"{mean:.{digits}f} ± {se:.{digits}f}"


def method_label(method, m):
    labels = {
        "skbayes": f"skbayes SparseGPRegressor vfe/adam, M={m}",
        "skbayes_fitc": f"skbayes SparseGPRegressor fitc/adam, M={m}",
        "skbayes_ngd": f"skbayes SparseGPRegressor vfe/ngd, M={m}",
        "skbayes_fitc_ngd": f"skbayes SparseGPRegressor fitc/ngd, M={m}",
        "gpytorch_svgp": f"GPyTorch SVGP adam, M={m}",
        "gpytorch_svgp_ngd": f"GPyTorch SVGP ngd, M={m}",
        "exact_gp": "sklearn exact GP (random subset)",
    }
    return labels[method]


def budget_text(s):
    if s["budget"] == "default":
        return ("the skbayes rows ran with the estimator's stopping defaults (max_iter='auto': at most 1000 "
                "epochs or 4000 optimiser steps, whichever first; tol=1e-5, n_iter_no_change=20; '*': a budget "
                "ended the fit); GPyTorch ran until its epoch loss had not decreased by "
                f"{s['tol']:g} for more than {s['n_iter_no_change']} epochs, capped at {s['max_iter']} epochs "
                "('*': hit the cap)")
    if s["budget"] == "fixed":
        return f"every sparse method ran exactly {s['max_iter']} epochs"
    return (f"every sparse method ran until its epoch loss had not decreased by {s['tol']:g} for more than "
            f"{s['n_iter_no_change']} epochs, capped at {s['max_iter']} epochs ('*': hit the cap)")


def markdown_uci(report):
    s, env = report["settings"], report["environment"]
    lines = [
        "| dataset | method | n_splits | train rows used | RMSE | test LL | fit time (s) | epochs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, per_method in report["aggregates"].items():
        for method in METHODS:
            if method not in per_method:
                continue
            agg = per_method[method]
            epochs = "—" if np.isnan(agg["n_iter"]["mean"]) else f"{agg['n_iter']['mean']:.0f}"
            if agg["n_hit_max_iter"]:
                epochs += f" ({agg['n_hit_max_iter']}*)"
            lines.append(
                f"| {name} | {method_label(method, s['n_inducing'])} | {agg['n_splits']} "
                f"| {agg['n_train_used']['mean']:.0f} | {fmt(agg, 'rmse', 4)} | {fmt(agg, 'test_ll')} "
                f"| {fmt(agg, 'fit_time_s', 1)} | {epochs} |"
            )
    paired_lines = []
    for name, per_method in report["paired"].items():
        for method, p in per_method.items():
            diffs = ", ".join(f"{d:+.3f}" for d in p["test_ll_diff"])
            ratios = ", ".join(f"{r:.2f}" for r in p["time_ratio"])
            paired_lines.append(f"| {name} | {method} | {diffs} | {ratios} |")
    if paired_lines:
        lines += ["", "Paired per split against GPyTorch SVGP (adam):", "",
                  "| dataset | skbayes row | test LL minus GPyTorch's | fit time / GPyTorch's |", "|---|---|---|---|",
                  *paired_lines]
    reach_lines = []
    for name, per_split in report.get("time_to_reference", {}).items():
        for t in per_split:
            reached = ("not reached", "—") if t["time_s"] is None else (
                f"{t['time_s']:.1f} (epoch {t['epoch']})", f"{t['time_ratio']:.2f}")
            reach_lines.append(
                f"| {name} | {t['split']} | {t['reference_test_ll']:.3f} | {t['reference_fit_time_s']:.1f} "
                f"({t['reference_n_iter']} epochs) | {reached[0]} | {reached[1]} | {t['final_test_ll']:.3f} "
                f"| {t['fit_time_s']:.1f} ({t['n_iter']} epochs) |")
    if reach_lines:
        lines += ["", f"Time to GPyTorch's final test LL (test LL traced every {s['trace_every']} epochs, training "
                  "time with the clock paused while evaluating):", "",
                  "| dataset | split | GPyTorch SVGP final test LL | GPyTorch fit time (s) | skbayes time to "
                  "reach it (s) | / GPyTorch's fit time | skbayes final test LL | skbayes fit time (s) |",
                  "|---|---|---|---|---|---|---|---|", *reach_lines]
    notes = [
        "",
        ("Mean ± standard error (np.std / sqrt(n_splits)) over the first "
        f"{s['splits']} fixed splits; RMSE and test LL (nats per point) in the original units of y; X "
        f"standardised on the training rows. Budget: {budget_text(s)}. Methods ran interleaved (order rotated "
        "per split). skbayes: SparseGPRegressor defaults except the objective / variational optimiser named"
        + ("" if s["budget"] == "default" else " and the stopping parameters")
        + ". GPyTorch SVGP: same M, initial inducing points, batch size and stopping rule, Adam 0.01 (NGD 0.1 "
        "for q in the ngd row), float64, GPyTorch's initial hyperparameters. Exact GP: "
        "Constant*RBF(ARD)+White, normalize_y, on a random subset of at most "
        f"{s['exact_max_rows']} training rows. Fit times are wall clock, one process, one fit at a time, "
        "including the k-means initialisation for the sparse models"
        + ("; with the test-LL trace, the traced rows' fit times exclude the time spent evaluating it."
           if s.get("trace_every") else ".")),
        (f"Environment: torch {env['torch']}, scikit-learn {env['sklearn']}, gpytorch {env['gpytorch']}, "
         f"skbayes {env['skbayes']}, {env['torch_num_threads']} torch threads, {env['cpu_count']} CPUs, "
         f"load average {env['loadavg_start']} at start, {env.get('loadavg_end')} at end; "
         f"complete: {report['complete']}."),
    ]
    if report["skipped"]:
        notes.append("Skipped: " + "; ".join(report["skipped"]) + ".")
    return "\n".join(lines + notes) + "\n"


def markdown_synthetic(report):
    s, env = report["settings"], report["environment"]
    lines = [
        ("| method | rows x features | M | epochs | fit time (s) | s / epoch | test RMSE | test LL "
         "| peak RSS before fit (MB) | peak RSS after fit (MB) |"),
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for method, r in report["synthetic"].items():
        lines.append(
            f"| {method} | {r['n_rows']} x {r['n_features']} | {r['n_inducing']} "
            f"| {r['n_iter']}{'*' if r['hit_max_iter'] else ''} | {r['fit_time_s']:.1f} | {r['s_per_epoch']:.2f} "
            f"| {r['rmse']:.4f} | {r['test_ll']:.3f} | {r['peak_rss_before_fit_mb']:.0f} "
            f"| {r['peak_rss_after_fit_mb']:.0f} |"
        )
    lines += [
        "",
        (f"SparseGPRegressor(n_inducing=M, random_state=0, ...) on X ~ N(0, I), y = sum_j sin(x_j) + 0.1 noise; "
         f"budget: {budget_text(s)}. Test rows: {SYNTHETIC_TEST_ROWS} fresh draws. Peak RSS is ru_maxrss of the "
         "whole process (data included; a high-water mark over the fits run so far)."),
        (f"Environment: torch {env['torch']}, skbayes {env['skbayes']}, {env['torch_num_threads']} torch "
         f"threads, {env['cpu_count']} CPUs, load average {env['loadavg_start']} at start, "
         f"{env.get('loadavg_end')} at end; complete: {report['complete']}."),
    ]
    return "\n".join(lines) + "\n"


def synthetic_data(n, seed):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, SYNTHETIC_FEATURES)
    return X, np.sin(X).sum(axis=1) + 0.1 * rng.randn(n)


def run_synthetic(args, report, budget, save):
    n = args.synthetic_rows
    X, y = synthetic_data(n, 0)
    X_test, y_test = synthetic_data(SYNTHETIC_TEST_ROWS, 1)
    before = peak_rss_mb()
    report["synthetic"] = {}
    for method in args.methods:
        print(f"Synthetic: {method}, {n} x {SYNTHETIC_FEATURES}, M={args.n_inducing}", flush=True)
        res = fit_skbayes(method, X, y, X_test, y_test, args.n_inducing, 0, budget)
        res.update({"n_rows": n, "n_features": SYNTHETIC_FEATURES, "n_inducing": args.n_inducing,
                    "peak_rss_before_fit_mb": before, "peak_rss_after_fit_mb": peak_rss_mb(),
                    "loadavg": loadavg()})
        report["synthetic"][method] = res
        print(f"  fit {res['fit_time_s']:.1f} s, {res['n_iter']} epochs, test LL {res['test_ll']:.3f}, "
              f"peak RSS {peak_rss_mb():.0f} MB", flush=True)
        save()


def run_uci(args, report, budget, save):
    data_home = get_data_home(args.data_home)
    for requested in args.datasets:
        try:
            bunch = fetch_uci(requested, data_home=args.data_home, download_if_missing=False)
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
            X_train, X_test, y_train, y_test = standardised_split(bunch, split)
            shift = split % len(args.methods)
            for method in args.methods[shift:] + args.methods[:shift]:  # interleaved, order rotated per split
                if method in SKBAYES_VARIANTS:
                    res = fit_skbayes(method, X_train, y_train, X_test, y_test, args.n_inducing, split, budget,
                                      args.trace_every)
                elif method in GPYTORCH_VARIANTS:
                    res = fit_gpytorch(method, X_train, y_train, X_test, y_test, args.n_inducing, split, budget,
                                       args.trace_every)
                    if res is None:
                        if "gpytorch (not installed)" not in report["skipped"]:
                            print("Note: GPyTorch is not installed; skipping its rows (pip install gpytorch).",
                                  flush=True)
                            report["skipped"].append("gpytorch (not installed)")
                        continue
                else:
                    res = fit_exact(X_train, y_train, X_test, y_test, args.exact_max_rows, split)
                rows.setdefault(method, []).append({"split": split, "loadavg": loadavg(), **res})
                report["aggregates"].setdefault(name, {})[method] = aggregate(rows[method])
                report["paired"][name] = paired(rows)
                if args.trace_every is not None:
                    report["time_to_reference"][name] = time_to_reference(rows)
                epochs = "   —" if res["n_iter"] is None else f"{res['n_iter']:4d}"
                print(f"  {name:<12} {method:<17} split {split:>2}: rows {res['n_train_used']:5d}  "
                      f"RMSE {res['rmse']:8.4f}  LL {res['test_ll']:8.4f}  {epochs} epochs"
                      f"{'*' if res.get('hit_max_iter') else ' '} {res['fit_time_s']:7.1f} s  "
                      f"load {loadavg()[0]}", flush=True)
                save()


def main(argv=None):
    args = parse_args(argv)
    limit_threads(args.threads)
    json_path, md_path = output_paths(args, "sparse_gp")
    budget = {"mode": args.budget, "max_iter": args.max_iter, "tol": args.tol,
              "n_iter_no_change": args.n_iter_no_change}
    synthetic = bool(args.synthetic_rows)
    report = {
        "settings": {
            "mode": "synthetic" if synthetic else "uci", "methods": args.methods,
            "datasets_requested": args.datasets, "splits": args.splits, "n_inducing": args.n_inducing,
            "budget": args.budget, "max_iter": args.max_iter, "tol": args.tol,
            "n_iter_no_change": args.n_iter_no_change, "exact_max_rows": args.exact_max_rows,
            "trace_every": args.trace_every,
            "synthetic_rows": args.synthetic_rows, "data_home": str(get_data_home(args.data_home)),
            "estimator_defaults": SparseGPRegressor().get_params(),
            "standard_error": "np.std(values, ddof=0) / sqrt(n_splits)",
        },
        "environment": environment(gpytorch=True),
        "splits": {}, "aggregates": {}, "paired": {}, "time_to_reference": {}, "skipped": [], "complete": False,
    }
    print(f"torch threads: {torch.get_num_threads()}; load average: {report['environment']['loadavg_start']}; "
          f"methods: {' '.join(args.methods)}; '*' after the epochs = stopped at the cap", flush=True)

    def save():
        write_atomic(json_path, json.dumps(report, indent=1, default=str))

    # Untimed warm-up: the first fit in a process pays one-off torch initialisation.
    warm_rng = np.random.RandomState(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for params in SKBAYES_VARIANTS.values():
            SparseGPRegressor(n_inducing=8, random_state=0, inference=SparseVariational(max_iter=2, **params)).fit(
                warm_rng.randn(64, 3), warm_rng.randn(64))

    def write_markdown():
        if synthetic:
            if report.get("synthetic"):
                write_atomic(md_path, markdown_synthetic(report))
        else:
            write_atomic(md_path, markdown_uci(report))

    run_saving(report, lambda: (run_synthetic if synthetic else run_uci)(args, report, budget, save), save,
               write_markdown)
    print_written(json_path, md_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
