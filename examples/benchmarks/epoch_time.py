"""Seconds per training epoch: BayesianMLPRegressor vs a bare PyTorch MLP.

What it does
------------
On the training rows of UCI ``concrete`` split 0 (927 rows, 8 features; X and
y standardised with the training statistics) it times full training runs of

* ``BayesianMLPRegressor`` with every gradient-trained method
  (``inference=`` ``"mfvi"``, ``"mc_dropout"``, ``"vadam"``, ``"sghmc"``,
  ``"ensemble"``, or those named by ``--methods``, ``"pbp"`` too), one
  hidden layer of 50 units, ``noise="homoscedastic"``, default settings except
  the inference method's ``max_iter=--epochs``, early stopping disabled (its
  ``n_iter_no_change=10**9``) and ``random_state=0`` (for ``sghmc``,
  ``inference=SGHMC(burn_in=epochs-1, thinning=1, n_kept_samples=1)``, the
  same number of epochs);
* a bare PyTorch deterministic MLP of the same size, Linear(d, 50) - ReLU -
  Linear(50, 1), MSE loss, Adam with the methods' default step size
  (3e-3), the same minibatch size as the estimator's ``batch_size="auto"``
  (32 up to 2,000 rows, else 128) and the same loop structure (fresh
  permutation each epoch, index the full tensors, accumulate the epoch loss);
  the reference of the ratios, with torch's default Adam (a loop over the
  parameters), and once more with ``Adam(fused=True)``;
* a bare PyTorch mean-field Bayes-by-Backprop loop of the same size (local
  reparameterisation, closed-form KL, learned noise), the same model and
  objective as ``inference="mfvi"`` written without the estimator, to tell
  the cost of the method from the cost of the wrapper;
* scikit-learn's ``MLPRegressor`` (50 hidden units, adam, same batch size and
  epochs, no early stopping; numpy, in the dtype of its input) as an outside
  reference point,

each in float64 (what the estimator uses for float64 input on the CPU) and
float32 (the estimator's ``dtype="float32"``), or the one ``--dtype`` names. After
one untimed warm-up run of every configuration, the configurations are run
round-robin (A B C ... A B C ...) ``--repeats`` times so that slow drifts of
the machine's load hit all of them alike, and the median and minimum of
(fit time / epochs) are reported, with the ratio of each median to the bare
PyTorch MLP's (default and fused Adam) and to scikit-learn's in the same
dtype. Fit time includes the estimator's per-fit overhead (input validation,
building the network), which is small next to ``--epochs`` epochs.
``--clock process`` times with ``time.process_time`` (the CPU time of this
process, which other busy processes disturb less than the wall clock; with
one torch thread the two agree on an idle machine).

How to run
----------
::

    python examples/benchmarks/epoch_time.py
    python examples/benchmarks/epoch_time.py --data-home /path/to/data \\
        --epochs 50 --repeats 7 --threads 1 --json /tmp/epoch_time.json
    python examples/benchmarks/epoch_time.py --epochs 20 --repeats 7 --threads 1 \\
        --dtype float32 --out epoch_time_float32

``--out NAME`` writes ``examples/benchmarks/results/performance/NAME.json`` (settings,
environment with the load average at start and end, raw times, summary) and
``NAME.md`` (the table).

Run it on an otherwise idle machine: other processes competing for the cores
inflate and scatter the times, and torch's default of one thread per core
makes this dramatic (on a 2-core machine with one other busy process, a
smoke run measured 10-50x slower epochs than with ``--threads 1``). The load
average at start and end is printed. ``--device cuda`` times the estimator and
the bare MLP on a GPU (the scikit-learn row stays on the CPU).

Every method of the registry, relative to mean-field VI
-------------------------------------------------------
``--registry`` (optionally followed by registry names) times instead every
inference method of the benchmarks' registry (``bnn_methods`` in
``_common.py``: MeanFieldVI, MCDropout, Vadam, SGHMC, DeepEnsemble, PBP and,
once they exist, the methods of issue 12) with the settings the registry
gives them for ``--epochs`` epochs (e.g. 5 ensemble members, 2 SGHMC chains),
on the same data and network (``BayesianMLPRegressor``, one hidden layer of
50 units, float64, batch 32), warm-up then round-robin as above, and reports
the median seconds per epoch (fit time / epochs run) and its ratio to
MeanFieldVI's median in the same run; the load average at start and end is
recorded. ``--json`` (default in this mode:
``examples/benchmarks/results/performance/epoch_time_registry.json``) gets the raw
times and a Markdown table beside it (same name, ``.md``)::

    python examples/benchmarks/epoch_time.py --registry --epochs 20 --repeats 5 --threads 1
    python examples/benchmarks/epoch_time.py --registry MeanFieldVI SGHMC --epochs 5 --repeats 2

What it prints
--------------
The environment (torch and scikit-learn versions, torch threads, load
average), one line per timed run, then a Markdown table with, per
configuration, the median and minimum seconds per epoch and the ratios of the
median to the medians of the bare PyTorch MLP (default and fused Adam) and of
scikit-learn's MLPRegressor in the same dtype. ``--json PATH`` (or ``--out``)
also writes the raw times.
"""

import argparse
import json
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

import sklearn
import torch
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPRegressor
from sklearn.preprocessing import StandardScaler

from skbayes import BayesianMLPRegressor
from skbayes.datasets import fetch_uci, get_uci_split
from skbayes.inference import ALIASES, SGHMC

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import bnn_methods, limit_threads, loadavg, select_methods, write_atomic, results_dir  # noqa: E402

HIDDEN = 50
LEARNING_RATE = 3e-3  # the default learning_rate_init of the gradient-trained inference methods
GRADIENT_METHODS = ("mfvi", "mc_dropout", "vadam", "sghmc", "ensemble")
CLOCK = time.perf_counter  # --clock process: time.process_time


def auto_batch_size(n_samples):
    """The estimator's batch_size="auto" rule."""
    return min(32 if n_samples <= 2000 else 128, n_samples)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--epochs", type=int, default=20, help="Epochs per timed run (default: 20).")
    parser.add_argument("--repeats", type=int, default=5, help="Timed runs per configuration (default: 5).")
    parser.add_argument("--dataset", default="concrete", help="UCI dataset, training rows of split 0 (default: concrete).")
    parser.add_argument("--data-home", default=None,
                        help="Folder holding uci/<name>/ (a copy that overrides the bundled sets; default: $SKBAYES_DATA_HOME, else ~/.cache/skbayes, else the bundled copy).")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch.set_num_threads(N) (default: leave torch's default).")
    parser.add_argument("--device", default="cpu",
                        help="Torch device of the estimator and the bare MLP (default: cpu; the estimator's "
                        "own default 'auto' would pick CUDA when available).")
    parser.add_argument("--json", default=None, help="Also write the raw times to this JSON file.")
    parser.add_argument("--methods", nargs="+", default=list(GRADIENT_METHODS),
                        choices=[*GRADIENT_METHODS, "pbp"],
                        help="Inference methods of the estimator to time (default: the gradient-trained "
                             f"ones, {' '.join(GRADIENT_METHODS)}).")
    parser.add_argument("--dtype", choices=["float64", "float32", "both"], default="both",
                        help="Precision of every configuration (default: both).")
    parser.add_argument("--clock", choices=["wall", "process"], default="wall",
                        help="wall: time.perf_counter; process: time.process_time, the CPU time of this "
                             "process (default: wall).")
    parser.add_argument("--out", default=None, metavar="NAME",
                        help="Write examples/benchmarks/results/performance/NAME.json and NAME.md.")
    parser.add_argument("--registry", nargs="*", default=None, metavar="NAME",
                        help="Time every method of the benchmarks' registry (or those named) relative to "
                             "MeanFieldVI instead of the configurations above.")
    args = parser.parse_args(argv)
    for name in ("epochs", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1")
    return args


# The inference object that runs exactly ``epochs`` epochs (the loop's settings are the method's).
def _run_length(inference, epochs):
    if inference == "sghmc":  # burn-in + thinning * kept samples epochs
        return SGHMC(burn_in=epochs - 1, thinning=1, n_kept_samples=1)
    return ALIASES[inference](max_iter=epochs, n_iter_no_change=10**9)


def time_estimator(X, y, inference, dtype, epochs, device):
    model = BayesianMLPRegressor(
        hidden_layer_sizes=(HIDDEN,),
        inference=_run_length(inference, epochs),
        noise="homoscedastic",
        random_state=0,
        dtype=dtype,
        device=device,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        start = CLOCK()
        model.fit(X, y)
        elapsed = CLOCK() - start
    if model.n_iter_ != epochs:
        raise RuntimeError(f"expected {epochs} epochs, the estimator ran {model.n_iter_}")
    return elapsed / epochs


def time_torch_mlp(X, y, dtype, epochs, batch_size, device, fused=False):
    torch_dtype = getattr(torch, dtype)
    start = CLOCK()
    torch.manual_seed(0)
    X_t = torch.tensor(X, dtype=torch_dtype, device=device)
    y_t = torch.tensor(y.reshape(-1, 1), dtype=torch_dtype, device=device)
    net = torch.nn.Sequential(
        torch.nn.Linear(X.shape[1], HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, 1)
    ).to(device=device, dtype=torch_dtype)
    optimizer = torch.optim.Adam(net.parameters(), lr=LEARNING_RATE, fused=fused or None)
    loss_fn = torch.nn.MSELoss()
    generator = torch.Generator().manual_seed(0)
    n = len(X_t)
    net.train()
    for _ in range(epochs):
        perm = torch.randperm(n, generator=generator).to(device)
        total = 0.0
        for i in range(0, n, batch_size):
            idx = perm[i : i + batch_size]
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(net(X_t[idx]), y_t[idx])
            loss.backward()
            optimizer.step()
            total += loss.detach() * len(idx)
        float(total)  # one sync per epoch, as the estimator's loop does
    return (CLOCK() - start) / epochs


def time_torch_bbb(X, y, dtype, epochs, batch_size, device):
    """A bare PyTorch mean-field BBB loop written from scratch, as a user would.

    Same size and data as the MLP; local reparameterisation, closed-form KL to
    N(0, 1) divided by N, learned Gaussian noise: the same model and objective
    as ``BayesianMLPRegressor(inference="mfvi")``, without the estimator.
    """
    torch_dtype = getattr(torch, dtype)
    start = CLOCK()
    torch.manual_seed(0)
    kw = {"dtype": torch_dtype, "device": device}
    X_t, y_t = torch.tensor(X, **kw), torch.tensor(y.reshape(-1, 1), **kw)
    sizes = [(X.shape[1], HIDDEN), (HIDDEN, 1)]
    mus = [torch.nn.Parameter(torch.empty(a, b, **kw).uniform_(-a**-0.5, a**-0.5)) for a, b in sizes]
    rhos = [torch.nn.Parameter(torch.full((a, b), -6.9, **kw)) for a, b in sizes]
    bias_mus = [torch.nn.Parameter(torch.zeros(b, **kw)) for _, b in sizes]
    bias_rhos = [torch.nn.Parameter(torch.full((b,), -6.9, **kw)) for _, b in sizes]
    raw_noise = torch.nn.Parameter(torch.tensor(-2.25, **kw))
    params = [*mus, *rhos, *bias_mus, *bias_rhos, raw_noise]
    optimizer = torch.optim.Adam(params, lr=LEARNING_RATE)
    normal = torch.distributions.Normal(torch.zeros((), **kw), torch.ones((), **kw))
    generator = torch.Generator().manual_seed(0)
    n = len(X_t)
    for _ in range(epochs):
        perm = torch.randperm(n, generator=generator).to(device)
        total = 0.0
        for i in range(0, n, batch_size):
            idx = perm[i : i + batch_size]
            optimizer.zero_grad(set_to_none=True)
            h = X_t[idx]
            kl = 0.0
            for layer, (mu, rho, b_mu, b_rho) in enumerate(zip(mus, rhos, bias_mus, bias_rhos)):
                if layer:
                    h = torch.relu(h)
                sigma, b_sigma = torch.nn.functional.softplus(rho), torch.nn.functional.softplus(b_rho)
                mean = h @ mu + b_mu
                std = ((h * h) @ sigma**2 + b_sigma**2).sqrt()
                h = mean + std * torch.randn_like(mean)
                for m, s in ((mu, sigma), (b_mu, b_sigma)):
                    kl = kl + torch.distributions.kl_divergence(torch.distributions.Normal(m, s), normal).sum()
            noise = torch.nn.functional.softplus(raw_noise)
            nll = -torch.distributions.Normal(h, noise).log_prob(y_t[idx]).mean()
            loss = nll + kl / n
            loss.backward()
            optimizer.step()
            total += loss.detach() * len(idx)
        float(total)
    return (CLOCK() - start) / epochs


def time_sklearn_mlp(X, y, epochs, batch_size):
    model = MLPRegressor(
        hidden_layer_sizes=(HIDDEN,), solver="adam", learning_rate_init=LEARNING_RATE,
        batch_size=batch_size, max_iter=epochs, n_iter_no_change=10**9, tol=0.0, random_state=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        start = CLOCK()
        model.fit(X, y)
        elapsed = CLOCK() - start
    return elapsed / model.n_iter_


def time_registry_method(X, y, inference, kwargs, device):
    """Seconds per epoch of one registry method: fit time / epochs run."""
    model = BayesianMLPRegressor(hidden_layer_sizes=(HIDDEN,), inference=inference, noise="homoscedastic",
                                 random_state=0, device=device, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        start = CLOCK()
        model.fit(X, y)
        elapsed = CLOCK() - start
    return elapsed / model.n_iter_, int(model.n_iter_)


def registry_markdown(result):
    s, env = result["settings"], result["environment"]
    lines = [
        f"{s['dataset']} split 0 ({s['n_rows']} rows, batch {s['batch_size']}), BayesianMLPRegressor with one hidden "
        f"layer of {HIDDEN} units, float64, {s['epochs']} epochs per run, median of {s['repeats']} interleaved runs, "
        f"{env['torch_num_threads']} torch thread(s), load average {env['loadavg_start'][0]} at start and "
        f"{env['loadavg_end'][0]} at end.",
        "",
        "| method | settings | epochs run | median s/epoch | min s/epoch | × MeanFieldVI |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in result["summary"].items():
        lines.append(f"| {name} | `{row['inference']}` | {row['epochs_run']} | {row['median_s_per_epoch']:.5f} "
                     f"| {row['min_s_per_epoch']:.5f} | {row['ratio_to_mfvi']:.2f} |")
    return "\n".join(lines) + "\n"


def main_registry(args, bunch, X, y, batch_size):
    """``--registry``: every registry method's seconds per epoch and its ratio to MeanFieldVI, one run."""
    methods = select_methods(bnn_methods(args.epochs), args.registry)
    if "MeanFieldVI" not in methods:
        methods = {"MeanFieldVI": bnn_methods(args.epochs)["MeanFieldVI"], **methods}
    env = {"python": platform.python_version(), "torch": torch.__version__, "sklearn": sklearn.__version__,
           "torch_num_threads": torch.get_num_threads(), "cpu_count": os.cpu_count(), "device": args.device,
           "loadavg_start": loadavg(), "command": [sys.executable, *sys.argv]}
    print(f"{bunch.name} split 0: {X.shape[0]} rows, batch {batch_size}, {args.epochs} epochs per run, "
          f"{args.repeats} repeats, {env['torch_num_threads']} torch threads, load average {env['loadavg_start']}",
          flush=True)
    for name, (method, kwargs) in methods.items():  # warm-up: one epoch where the method has max_iter
        warm = clone(method).set_params(max_iter=1) if "max_iter" in method.get_params() else method
        time_registry_method(X[:64], y[:64], warm, kwargs, args.device)
    times, epochs_run = {name: [] for name in methods}, {}
    for r in range(args.repeats):
        for name, (method, kwargs) in methods.items():
            t, epochs_run[name] = time_registry_method(X, y, method, kwargs, args.device)
            times[name].append(t)
            print(f"  repeat {r + 1}/{args.repeats}  {name:<24} {t:.5f} s/epoch ({epochs_run[name]} epochs)", flush=True)
    env["loadavg_end"] = loadavg()
    reference = statistics.median(times["MeanFieldVI"])
    summary = {name: {"inference": repr(methods[name][0]), "estimator_kwargs": methods[name][1],
                      "epochs_run": epochs_run[name], "median_s_per_epoch": statistics.median(t),
                      "min_s_per_epoch": min(t), "ratio_to_mfvi": statistics.median(t) / reference}
               for name, t in times.items()}
    result = {"settings": {"dataset": bunch.name, "n_rows": int(X.shape[0]), "batch_size": batch_size,
                           "hidden_layer_sizes": [HIDDEN], "epochs": args.epochs, "repeats": args.repeats},
              "environment": env, "times_s_per_epoch": times, "summary": summary}
    json_path = Path(args.json or results_dir("performance") / "epoch_time_registry.json")
    json_path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(json_path, json.dumps(result, indent=1))
    md_path = json_path.with_suffix(".md")
    write_atomic(md_path, registry_markdown(result))
    print("\n" + md_path.read_text() + f"Wrote {json_path}\nWrote {md_path}")
    return 0


def main(argv=None):
    global CLOCK
    args = parse_args(argv)
    CLOCK = time.process_time if args.clock == "process" else time.perf_counter
    limit_threads(args.threads, blas=False)
    try:
        bunch = fetch_uci(args.dataset, data_home=args.data_home, download_if_missing=False)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    X_train, _, y_train, _ = get_uci_split(bunch, 0)
    X = StandardScaler().fit_transform(X_train)
    y = (y_train - y_train.mean()) / y_train.std()
    batch_size = auto_batch_size(len(X))
    if args.registry is not None:
        return main_registry(args, bunch, X, y, batch_size)

    env = {
        "python": platform.python_version(), "torch": torch.__version__, "sklearn": sklearn.__version__,
        "torch_num_threads": torch.get_num_threads(), "cpu_count": os.cpu_count(), "device": args.device,
        "clock": args.clock, "loadavg_start": loadavg(),
        "command": [sys.executable, *sys.argv],
    }
    print(f"{bunch.name} split 0: {X.shape[0]} training rows, {X.shape[1]} features, batch size {batch_size}, "
          f"{args.epochs} epochs per run, {args.repeats} repeats, {args.clock} clock")
    print(f"torch {env['torch']}, scikit-learn {env['sklearn']}, {env['torch_num_threads']} torch threads, "
          f"{env['cpu_count']} CPUs, device {args.device}, load average {env['loadavg_start']}\n", flush=True)

    dtypes = ("float64", "float32") if args.dtype == "both" else (args.dtype,)
    configs = {}
    for dtype in dtypes:
        Xd, yd = X.astype(dtype), y.astype(dtype)
        for method in args.methods:
            configs[f"BayesianMLPRegressor {method} [{dtype}]"] = (
                dtype, lambda e, Xd=Xd, yd=yd, dt=dtype, m=method: time_estimator(Xd, yd, m, dt, e, args.device))
        configs[f"bare PyTorch mean-field BBB [{dtype}]"] = (
            dtype, lambda e, Xd=Xd, yd=yd, dt=dtype: time_torch_bbb(Xd, yd, dt, e, batch_size, args.device))
        configs[f"bare PyTorch MLP [{dtype}]"] = (
            dtype, lambda e, Xd=Xd, yd=yd, dt=dtype: time_torch_mlp(Xd, yd, dt, e, batch_size, args.device))
        configs[f"bare PyTorch MLP, fused Adam [{dtype}]"] = (
            dtype, lambda e, Xd=Xd, yd=yd, dt=dtype: time_torch_mlp(Xd, yd, dt, e, batch_size, args.device, True))
        configs[f"sklearn MLPRegressor [{dtype}]"] = (
            dtype, lambda e, Xd=Xd, yd=yd: time_sklearn_mlp(Xd, yd, e, batch_size))

    for _, fn in configs.values():  # warm-up: first-call costs (allocators, kernels, imports)
        fn(1)

    times = {name: [] for name in configs}
    for r in range(args.repeats):
        for name, (_, fn) in configs.items():
            t = fn(args.epochs)
            times[name].append(t)
            print(f"  repeat {r + 1}/{args.repeats}  {name:<44} {t:.5f} s/epoch", flush=True)
    env["loadavg_end"] = loadavg()

    def reference(label, dtype):
        return statistics.median(times[f"{label} [{dtype}]"])

    summary = {}
    for name, (dtype, _) in configs.items():
        med = statistics.median(times[name])
        summary[name] = {
            "dtype": dtype, "median_s_per_epoch": med, "min_s_per_epoch": min(times[name]),
            "ratio_to_bare_torch": med / reference("bare PyTorch MLP", dtype),
            "ratio_to_bare_torch_fused_adam": med / reference("bare PyTorch MLP, fused Adam", dtype),
            "ratio_to_sklearn": med / reference("sklearn MLPRegressor", dtype),
        }
    result = {"settings": {"dataset": bunch.name, "n_rows": int(X.shape[0]), "batch_size": batch_size,
                           "hidden_layer_sizes": [HIDDEN], "epochs": args.epochs, "repeats": args.repeats,
                           "methods": list(args.methods), "dtypes": list(dtypes)},
              "environment": env, "times_s_per_epoch": times, "summary": summary}
    table = epoch_markdown(result)
    print("\n" + table)
    if args.json:
        write_atomic(Path(args.json), json.dumps(result, indent=1))
        print(f"Wrote {args.json}")
    if args.out:
        json_path = results_dir("performance") / f"{args.out}.json"
        json_path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(json_path, json.dumps(result, indent=1))
        write_atomic(json_path.with_suffix(".md"), table)
        print(f"Wrote {json_path} and {json_path.with_suffix('.md')}")
    return 0


def epoch_markdown(result):
    """The summary of a run (not ``--registry``) as a Markdown table with its settings."""
    s, env = result["settings"], result["environment"]
    lines = [
        f"{s['dataset']} split 0 ({s['n_rows']} rows, batch {s['batch_size']}), one hidden layer of {HIDDEN} units, "
        f"{s['epochs']} epochs per run, median of {s['repeats']} interleaved runs, {env['clock']} clock, "
        f"{env['torch_num_threads']} torch thread(s), torch {env['torch']}, scikit-learn {env['sklearn']}, "
        f"load average {env['loadavg_start'][0]} at start and {env['loadavg_end'][0]} at end.",
        "",
        "Ratios: the configuration's median over the median, in the same dtype, of the bare PyTorch MLP "
        "(torch's default Adam), of the same with `Adam(fused=True)`, and of scikit-learn's `MLPRegressor`.",
        "",
        "| configuration | median s/epoch | min s/epoch | × bare PyTorch | × bare PyTorch, fused Adam | × sklearn |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in result["summary"].items():
        lines.append(f"| {name} | {row['median_s_per_epoch']:.5f} | {row['min_s_per_epoch']:.5f} "
                     f"| {row['ratio_to_bare_torch']:.2f} | {row['ratio_to_bare_torch_fused_adam']:.2f} "
                     f"| {row['ratio_to_sklearn']:.2f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
