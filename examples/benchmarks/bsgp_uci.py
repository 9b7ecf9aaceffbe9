"""Benchmark of the Bayesian sparse GP (SGHMC) against the variational sparse GP on UCI sets.

What it does
------------
For each requested UCI dataset (default: bostonHousing concrete energy
kin8nm power-plant; absent ones are skipped with a note) and each of the
first ``--splits`` fixed 90/10 splits, X is standardised with the training
rows' mean and std, and two models with the SAME number M of inducing points
(``--n-inducing``, default 100 as in the prior ablation of Rossi 2022,
chapter 6) are fitted on the training rows, interleaved (the order is
swapped from one split to the next):

``variational``  ``SparseGPRegressor(n_inducing=M, random_state=SPLIT)``:
                 the SVGP with its defaults (VFE objective, Adam 0.01,
                 batch_size="auto" = min(1024, N), stopping rule of the
                 training loop, ``--max-iter`` epochs at most).
``bsgp``         the same estimator with ``inference=SGHMC(...)`` and
                 ``batch_size=--batch-size`` (default 100, the minibatch of
                 the authors' code): the variational fit first (the chains
                 start from it; same stopping rule, at the BSGP batch size),
                 then ``--n-chains`` SGHMC chains sampling (v, theta, Z,
                 sigma) from Rossi 2022, eq. 6.17, with ``--burn-in-steps``
                 optimiser steps of burn-in, then ``--n-kept`` samples per
                 chain ``--thinning-steps`` steps apart. The step counts are
                 turned into the epochs SGHMC counts with
                 ceil(steps / steps_per_epoch), steps_per_epoch =
                 ceil(N / batch_size), so that every dataset gets about the
                 same number of sampler steps.

Metrics, in the ORIGINAL units of y: test RMSE of the predictive mean, test
LL = mean over test points of log N(y_i | mu_i, sigma_i^2) with the
predictive mean and standard deviation (for the BSGP the mixture's moments,
noise included: ``log_predictive_density``), the fit time in seconds (wall
clock, the BSGP's including its variational start) and, for the BSGP, the
largest split R-hat over the chains (``inference_diagnostics_["rhat"]``) and
its two parts, over the training log-likelihoods (``"rhat_log_lik"``) and
over the log hyperparameters (``"rhat_hyperparameters"``).
Aggregates are mean ± standard error over splits (np.std(ddof=0) /
sqrt(n_splits)) and, per split, the paired difference of test LL (BSGP minus
variational). The JSON is rewritten after every fit, so an interrupted run
keeps what it measured.

How to run
----------
::

    python examples/benchmarks/bsgp_uci.py --threads 1 --tag m100
    python examples/benchmarks/bsgp_uci.py --datasets bostonHousing --splits 1 --n-inducing 16 \\
        --max-iter 20 --burn-in-steps 50 --thinning-steps 5 --n-kept 4 --threads 1 --tag smoke

Options: ``--datasets``, ``--splits N`` (default 5), ``--n-inducing M``
(default 100), ``--max-iter`` (variational epochs cap, default 1000),
``--batch-size`` (BSGP, default 100), ``--n-chains`` (default 4, as the
thesis reports R-hat over 4 chains),
``--burn-in-steps`` (default 2000), ``--thinning-steps`` (default 50),
``--n-kept`` (per chain, default 50), ``--step-size`` (default 3e-3),
``--friction`` (default 0.3), ``--inducing-prior`` (normal, dpp, uniform;
default normal), ``--threads``, ``--data-home``, ``--tag``, ``--output-dir``
(default ``examples/benchmarks/results/sparse_gp/``).

What it prints
--------------
The environment line, one progress line per fit, and the final markdown
table; it writes ``bsgp_uci_<tag>.json`` (settings, per-split raw numbers,
aggregates, paired differences, environment: versions, git commit, torch
threads, load average at start and end, command line) and
``bsgp_uci_<tag>.md`` (the table and those notes). ``doc/bayesian_sparse_gp.md``
includes the table.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    environment, environment_lines, fit_uci_splits, limit_threads, loadavg, mean_se, output_paths,
    print_written, run_saving, write_atomic, results_dir,
)

from skbayes import DeepGPRegressor, SparseGPRegressor  # noqa: E402
from skbayes.datasets import get_data_home  # noqa: E402
from skbayes.inference import SGHMC, SampledSparseGP, SparseVariational  # noqa: E402

METHODS = ("variational", "bsgp")
METRICS = ("rmse", "test_ll", "fit_time_s")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--datasets", nargs="+",
                        default=["bostonHousing", "concrete", "energy", "kin8nm", "power-plant"])
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--n-inducing", type=int, default=100)
    parser.add_argument("--max-iter", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--n-chains", type=int, default=4)
    parser.add_argument("--burn-in-steps", type=int, default=2000)
    parser.add_argument("--thinning-steps", type=int, default=50)
    parser.add_argument("--n-kept", type=int, default=50)
    parser.add_argument("--step-size", type=float, default=3e-3)
    parser.add_argument("--friction", type=float, default=0.3)
    parser.add_argument("--inducing-prior", default="normal", choices=["normal", "dpp", "uniform"])
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--data-home", default=None)
    parser.add_argument("--tag", default=None)
    parser.add_argument("--output-dir", default=str(results_dir("sparse_gp")))
    parser.add_argument("--model", default="sparse", choices=["sparse", "deep"],
                        help="sparse: SparseGPRegressor; deep: DeepGPRegressor(('auto',)), two layers (the sampled "
                             "deep GP of Rossi 2022, section 6.3.2, against DSVI).")
    parser.add_argument("--defaults", action="store_true",
                        help="Both models at the estimator's defaults: inference='variational' against "
                             "inference='sghmc' (ignores --max-iter, --batch-size and the SGHMC options).")
    return parser.parse_args(argv)


def schedule(args, n_train):
    """SGHMC's epochs from the step counts: ceil(steps / steps_per_epoch)."""
    steps_per_epoch = math.ceil(n_train / min(args.batch_size, n_train))
    return {
        "n_chains": args.n_chains,
        "burn_in": math.ceil(args.burn_in_steps / steps_per_epoch),
        "thinning": max(1, math.ceil(args.thinning_steps / steps_per_epoch)),
        "n_kept_samples": args.n_kept,
        "step_size": args.step_size,
        "friction": args.friction,
    }, steps_per_epoch


def fit_one(method, args, X_train, y_train, X_test, y_test, split):
    variational = SparseVariational(max_iter=args.max_iter)
    params = {"n_inducing": args.n_inducing, "random_state": split, "inference": variational}
    extra = {}
    if args.defaults:
        params["inference"] = "sghmc" if method == "bsgp" else "variational"
    elif method == "bsgp":
        sghmc, steps_per_epoch = schedule(args, X_train.shape[0])
        params.update(batch_size=args.batch_size, inference=SampledSparseGP(
            SGHMC(**sghmc), inducing_prior=args.inducing_prior, start=variational))
        extra = {"sghmc": sghmc, "steps_per_epoch": steps_per_epoch}
    model = SparseGPRegressor(**params) if args.model == "sparse" else DeepGPRegressor(("auto",), **params)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        start = time.perf_counter()
        model.fit(X_train, y_train)
        fit_time = time.perf_counter() - start
    extra["warned_not_mixed"] = any("have not mixed" in str(w.message) for w in caught)
    mean = model.predict(X_test)
    res = {
        "rmse": float(np.sqrt(np.mean((mean - y_test) ** 2))),
        "test_ll": float(model.log_predictive_density(X_test, y_test).mean()),
        "fit_time_s": fit_time,
        "n_iter": int(model.n_iter_),
        "warned_not_mixed": extra.pop("warned_not_mixed"),
        "noise_std": float(model.noise_std_),
        **extra,
    }
    if method == "bsgp":
        for key in ("rhat", "rhat_log_lik", "rhat_hyperparameters"):
            res[key] = model.inference_diagnostics_[key]
        res["n_kept_samples"] = model.inference_diagnostics_["n_kept_samples"]
    return res


def paired(rows):
    ref = {r["split"]: r for r in rows.get("variational", [])}
    pairs = [(r, ref[r["split"]]) for r in rows.get("bsgp", []) if r["split"] in ref]
    return {"splits": [a["split"] for a, _ in pairs], "test_ll_diff": [a["test_ll"] - b["test_ll"] for a, b in pairs]}


def markdown(report):
    """The results table, the per-split differences of the test LL and what was run."""
    s = report["settings"]
    defaults = bool(s.get("defaults"))
    label = {"variational": "variational", "bsgp": "sghmc"} if defaults else {
        m: f"{m}, M={s['n_inducing']}" for m in METHODS}
    warned_column = " warned (not mixed) |" if defaults else ""
    lines = [f"| dataset | {'inference' if defaults else 'method'} | n_splits | RMSE | test LL | fit time (s) | R-hat "
             f"| R-hat (log-lik) | R-hat (hyper) |{warned_column}",
             "|---|---|---|---|---|---|---|---|---|" + ("---|" if defaults else "")]
    for name, per_method in report["aggregates"].items():
        for method in METHODS:
            if method in per_method:
                agg = per_method[method]
                row = (f"| {name} | {label[method]} | {agg['n_splits']} "
                       f"| {mean_se(agg, 'rmse', 4)} | {mean_se(agg, 'test_ll')} "
                       f"| {mean_se(agg, 'fit_time_s', 1)} | {mean_se(agg, 'rhat', 2)} "
                       f"| {mean_se(agg, 'rhat_log_lik', 2)} | {mean_se(agg, 'rhat_hyperparameters', 2)} |")
                if defaults:
                    warned = sum(bool(r.get("warned_not_mixed")) for r in report["splits"][name].get(method, []))
                    row += f" {warned if method == 'bsgp' else '—'} of {agg['n_splits']} |"
                lines.append(row)
    lines += ["", f"| dataset | test LL, {'sghmc' if defaults else 'BSGP'} minus variational, per split |", "|---|---|"]
    for name, p in report["paired"].items():
        lines.append(f"| {name} | {', '.join(f'{d:+.3f}' for d in p['test_ll_diff'])} |")
    if defaults:
        estimator = "SparseGPRegressor(" if s.get("model", "sparse") == "sparse" else "DeepGPRegressor(('auto',), "
        note = (
            f"{estimator}n_inducing={s['n_inducing']}, random_state=SPLIT) at its defaults otherwise, with "
            "inference='variational' and with inference='sghmc' (SampledSparseGP(): the default variational fit, then "
            "SGHMC's default schedule from it). Mean ± standard error (np.std / sqrt(n_splits)) over the first "
            f"{s['splits']} fixed splits; RMSE and test LL (nats per point) in the original units of y; X standardised "
            "on the training rows; the sampled fit's time includes its variational start. R-hat: largest split R-hat "
            "of the training log-likelihoods and log hyperparameters of every layer; warned: fits whose "
            "ConvergenceWarning said the chains had not mixed.")
    else:
        note = (
            f"Mean ± standard error (np.std / sqrt(n_splits)) over the first {s['splits']} fixed splits; RMSE and "
            "test LL (nats per point; the variational model's Gaussian predictive, the BSGP's mixture over kept "
            "samples) in the original units "
            "of y; X standardised on the training rows. variational: SparseGPRegressor defaults. bsgp: "
            f"inference=SGHMC(n_chains={s['n_chains']}, step_size={s['step_size']}, friction={s['friction']}), "
            f"batch_size={s['batch_size']}, inducing_prior={s['inducing_prior']!r}, chains started from the "
            f"variational fit, {s['burn_in_steps']} burn-in steps, {s['n_kept']} samples per chain "
            f"{s['thinning_steps']} steps apart (rounded up to whole epochs); its fit time includes the variational "
            "start. R-hat: largest split R-hat of the training log-likelihoods and log hyperparameters; R-hat "
            "(log-lik): of the training log-likelihoods only (the predictive quantities); R-hat (hyper): of the log "
            "length-scales, signal and noise variances only.")
    lines += ["", note, *environment_lines(report)]
    return "\n".join(lines) + "\n"


def main(argv=None):
    args = parse_args(argv)
    limit_threads(args.threads)
    json_path, md_path = output_paths(args, "bsgp_uci")
    report = {
        "settings": {**vars(args), "data_home": str(get_data_home(args.data_home)),
                     "standard_error": "np.std(values, ddof=0) / sqrt(n_splits)"},
        "environment": environment(cpu_count=False),
        "splits": {}, "aggregates": {}, "paired": {}, "skipped": [], "complete": False,
    }
    print(f"torch threads: {torch.get_num_threads()}; load average: {loadavg()}", flush=True)

    def save():
        write_atomic(json_path, json.dumps(report, indent=1, default=str))

    def progress(name, method, split, res):
        rhat = (f"  R-hat {res['rhat']:.2f} (log-lik {res['rhat_log_lik']:.2f}, hyper "
                f"{res['rhat_hyperparameters']:.2f})" if "rhat" in res else "")
        return (f"  {name:<12} {method:<11} split {split:>2}: RMSE {res['rmse']:8.4f}  LL {res['test_ll']:8.4f}"
                f"  {res['fit_time_s']:7.1f} s{rhat}  load {loadavg()[0]}")

    def record_paired(name, rows):
        report["paired"][name] = paired(rows)

    def run():
        fit_uci_splits(
            report, args.datasets, args.splits, args.data_home,
            order=lambda split: METHODS if split % 2 == 0 else METHODS[::-1],
            fit=lambda method, X_train, y_train, X_test, y_test, split: fit_one(
                method, args, X_train, y_train, X_test, y_test, split),
            keys=(*METRICS, "rhat", "rhat_log_lik", "rhat_hyperparameters"), progress=progress, save=save,
            after=record_paired,
        )

    run_saving(report, run, save, lambda: write_atomic(md_path, markdown(report)))
    print_written(json_path, md_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
