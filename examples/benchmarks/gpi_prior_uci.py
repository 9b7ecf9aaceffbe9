"""GP-induced prior + SGHMC against the N(0, 1) prior + SGHMC on the small UCI regression sets.

Tran et al. 2022 (Rossi 2022, chapter 5) fit the per-layer prior scales of a
Bayesian MLP so that its prior over functions matches a GP (GPI-G), or the
inverse-Gamma hyperpriors of the layer variances (GPI-H), and then sample the
posterior with SGHMC. This script compares, on the fixed splits of
bostonHousing, concrete, energy, wine-quality-red and yacht (those present in
the data folder), three priors under the same sampler and architecture:

* ``normal``: N(0, 1) on every weight (``SGHMC()``, the estimator's default);
* ``gpi-g``: ``SGHMC(prior=GPInducedPrior(fit_kernel=True))``;
* ``gpi-h``: ``SGHMC(prior=GPInducedPrior(fit_kernel=True, hierarchical=True))``;
* ``gpi-nf``: ``SGHMC(prior=GPInducedPrior(fit_kernel=True, n_flows=K))``, GPI-G's Gaussian through K
  planar flows per layer (``--n-flows``, default 2); named only on request (``--methods``);
* ``target-gp``: the GP the priors are fitted to, scikit-learn's exact ``GaussianProcessRegressor``
  with ``ConstantKernel * RBF(ARD) + WhiteKernel`` fitted to all the training rows (y standardised);
  named only on request. It shows whether the target itself predicts better than the BNN.

The target GP is ``ConstantKernel * RBF`` with one length-scale per feature,
fitted to (up to 500) training rows first. X is standardised on the training
rows; RMSE and test log-likelihood (nats per point, the mixture over kept
samples) are in the original units of y. The fit time of the GP-induced
priors includes the kernel fit and the prior fit; ``prior_fit_s`` times the
prior fit alone (fit with ``burn_in=0``, one kept sample).

Usage
-----
::

    python examples/benchmarks/gpi_prior_uci.py --quick          # seconds: a smoke run
    python examples/benchmarks/gpi_prior_uci.py --n-splits 10 --threads 4

What it prints
--------------
One progress line per fit and the final markdown table; it writes
``gpi_prior_uci_<tag>.json`` (settings, per-split raw numbers, aggregates,
environment) and ``gpi_prior_uci_<tag>.md``.
"""

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from scipy.stats import norm
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    aggregate_splits, environment_lines, fit_uci_splits, limit_threads, mean_se, output_paths, print_written,
    run_saving, start_uci_report, write_atomic, results_dir,
)

from skbayes import BayesianMLPRegressor  # noqa: E402
from skbayes.inference import SGHMC, GPInducedPrior  # noqa: E402

DATASETS = ("bostonHousing", "concrete", "energy", "wine-quality-red", "yacht")
METHODS = ("normal", "gpi-g", "gpi-h")
ALL_METHODS = (*METHODS, "gpi-nf", "target-gp")
METRICS = ("rmse", "test_ll", "fit_time_s", "prior_fit_s", "rhat", "final_w1")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--render", default=None, metavar="JSON",
                        help="Rewrite the Markdown table of an earlier run's JSON file (beside it) and exit.")
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=ALL_METHODS)
    parser.add_argument("--n-flows", type=int, default=2, help="planar flows per layer of gpi-nf")
    parser.add_argument("--n-splits", type=int, default=10)
    parser.add_argument("--hidden", type=int, nargs="+", default=[50, 50])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--n-chains", type=int, default=2)
    parser.add_argument("--burn-in", type=int, default=300, help="epochs")
    parser.add_argument("--thinning", type=int, default=5, help="epochs")
    parser.add_argument("--n-kept", type=int, default=20, help="samples per chain")
    parser.add_argument("--step-size", type=float, default=3e-4)
    parser.add_argument("--prior-iter", type=int, default=200, help="prior steps of the W1 fit")
    parser.add_argument("--quick", action="store_true",
                        help="one split, tiny schedule and prior fit: checks the script, measures nothing")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--data-home", default=None)
    parser.add_argument("--tag", default=None)
    parser.add_argument("--output-dir", default=str(results_dir("bnn_methods")))
    args = parser.parse_args(argv)
    if args.quick:
        args.n_splits, args.burn_in, args.thinning, args.n_kept, args.prior_iter = 1, 5, 1, 4, 5
        args.tag = args.tag or "quick"
    return args


def make_prior(method, args, n_features):
    if method == "normal":
        return None
    kernel = ConstantKernel(1.0) * RBF(np.ones(n_features))
    return GPInducedPrior(kernel, fit_kernel=True, hierarchical=method == "gpi-h",
                          n_flows=args.n_flows if method == "gpi-nf" else 0, max_iter=args.prior_iter)


def make_model(prior, args, split, burn_in=None, n_kept=None):
    sghmc = SGHMC(n_chains=args.n_chains, burn_in=args.burn_in if burn_in is None else burn_in,
                  thinning=args.thinning, n_kept_samples=args.n_kept if n_kept is None else n_kept,
                  step_size=args.step_size, prior=prior)
    return BayesianMLPRegressor(hidden_layer_sizes=tuple(args.hidden), batch_size=args.batch_size, inference=sghmc,
                                noise="homoscedastic", random_state=split)


def fit_target_gp(X_train, y_train, X_test, y_test):
    kernel = ConstantKernel(1.0) * RBF(np.ones(X_train.shape[1])) + WhiteKernel(0.1)
    start = time.perf_counter()
    gp = GaussianProcessRegressor(kernel, normalize_y=True).fit(X_train, y_train)
    fit_time = time.perf_counter() - start
    mean, std = gp.predict(X_test, return_std=True)
    return {"rmse": float(np.sqrt(np.mean((mean - y_test) ** 2))),
            "test_ll": float(norm.logpdf(y_test, mean, std).mean()), "fit_time_s": fit_time, "prior_fit_s": np.nan,
            "rhat": np.nan, "final_w1": np.nan, "diverged": 0}


def fit_one(method, args, X_train, y_train, X_test, y_test, split):
    if method == "target-gp":
        return fit_target_gp(X_train, y_train, X_test, y_test)
    prior = make_prior(method, args, X_train.shape[1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        prior_fit = np.nan
        if prior is not None:  # the same prior fit alone (same seed), for its cost
            start = time.perf_counter()
            make_model(prior, args, split, burn_in=0, n_kept=1).fit(X_train, y_train)
            prior_fit = time.perf_counter() - start
        model = make_model(prior, args, split)
        start = time.perf_counter()
        try:
            model.fit(X_train, y_train)
        except ValueError as err:  # the sampler diverged (the loss became NaN): recorded, left out of the means
            if "became nan" not in str(err):
                raise
            return {**dict.fromkeys(METRICS, np.nan), "prior_fit_s": prior_fit, "diverged": 1}
        fit_time = time.perf_counter() - start
    diagnostics = model.inference_diagnostics_
    res = {
        "rmse": float(np.sqrt(np.mean((model.predict(X_test) - y_test) ** 2))),
        "test_ll": float(model.log_predictive_density(X_test, y_test).mean()),
        "fit_time_s": fit_time,
        "prior_fit_s": prior_fit,
        "rhat": float(diagnostics["rhat"]),
        "final_w1": float(np.mean(diagnostics["w1_trace"][-20:])) if "w1_trace" in diagnostics else np.nan,
        "diverged": 0,
    }
    if prior is not None:
        res["prior_hyperparameters"] = diagnostics["prior_hyperparameters"]
        res["prior_kernel"] = repr(diagnostics["prior_kernel"])
    return res


def markdown(report):
    s = report["settings"]
    lines = ["| dataset | prior | n_splits | diverged | RMSE | median RMSE | test LL | median test LL | fit time (s) "
             "| prior fit (s) | R-hat | final W1 |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, per_method in report["aggregates"].items():
        for method in ALL_METHODS:
            if method in per_method:
                agg = per_method[method]
                kept = [r for r in report["splits"][name][method] if not r.get("diverged")]
                median = {key: f"{np.median([r[key] for r in kept]):.3f}" if kept else "—" for key in ("rmse", "test_ll")}
                lines.append(f"| {name} | {method} | {agg['n_splits']} | {agg['n_diverged']} | {mean_se(agg, 'rmse')} "
                             f"| {median['rmse']} | {mean_se(agg, 'test_ll')} | {median['test_ll']} "
                             f"| {mean_se(agg, 'fit_time_s', 1)} "
                             f"| {mean_se(agg, 'prior_fit_s', 1)} | {mean_se(agg, 'rhat', 2)} "
                             f"| {mean_se(agg, 'final_w1', 2)} |")
    lines += [
        "",
        (f"Mean ± standard error (np.std / sqrt(n_splits)) over the first {s['n_splits']} fixed splits. "
         f"BayesianMLPRegressor(hidden_layer_sizes={tuple(s['hidden'])}, batch_size={s['batch_size']}), "
         f"SGHMC(n_chains={s['n_chains']}, burn_in={s['burn_in']}, thinning={s['thinning']}, "
         f"n_kept_samples={s['n_kept']}, step_size={s['step_size']}); GP-induced priors: "
         f"GPInducedPrior(ConstantKernel * RBF(ARD), fit_kernel=True, max_iter={s['prior_iter']})"
         + (f", gpi-nf with n_flows={s.get('n_flows', 2)}" if "gpi-nf" in s["methods"] else "") + ". "
         "final W1: mean of the last 20 W1 estimates of the prior fit (standardised y units). "
         "diverged: splits whose SGHMC run stopped with a NaN loss; the means are over the other splits."
         + (" QUICK RUN: a smoke test of the script, not a measurement." if s["quick"] else "")),
    ]
    lines += environment_lines(report)
    return "\n".join(lines) + "\n"


def main(argv=None):
    args = parse_args(argv)
    if args.render:
        json_path = Path(args.render)
        report = json.loads(json_path.read_text())
        md_path = json_path.with_suffix(".md")
        write_atomic(md_path, markdown(report))
        print_written(json_path, md_path)
        return 0
    limit_threads(args.threads)
    json_path, md_path = output_paths(args, "gpi_prior_uci")
    report, save = start_uci_report(args, json_path, cpu_count=False)

    def progress(name, method, split, res):
        return (f"  {name:<16} {method:<7} split {split:>2}: RMSE {res['rmse']:8.4f}  LL {res['test_ll']:8.4f}"
                f"  {res['fit_time_s']:7.1f} s (prior {res['prior_fit_s']:.1f} s)  R-hat {res['rhat']:.2f}")

    def run():
        fit_uci_splits(
            report, args.datasets, args.n_splits, args.data_home, order=lambda split: args.methods,
            fit=lambda method, X_train, y_train, X_test, y_test, split: fit_one(
                method, args, X_train, y_train, X_test, y_test, split),
            keys=METRICS, progress=progress, save=save, after=converged_aggregates,
        )

    def converged_aggregates(name, rows):
        # means over the splits that did not diverge, and how many did
        for method, method_rows in rows.items():
            kept = [r for r in method_rows if not r.get("diverged")]
            agg = aggregate_splits(kept, METRICS) if kept else {"n_splits": 0, **{k: {"mean": np.nan, "se": np.nan} for k in METRICS}}
            report["aggregates"][name][method] = {**agg, "n_diverged": len(method_rows) - len(kept)}

    run_saving(report, run, save, lambda: write_atomic(md_path, markdown(report)))
    print_written(json_path, md_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
