"""The default SGHMC's split R-hat: across its chains, within each chain, and under the longer epoch schedule.

What it does
------------
Fits ``BayesianMLPRegressor()`` (SGHMC's default step budget) and, on the
sets given with ``--long``, ``BayesianMLPRegressor(inference=SGHMC(burn_in=300,
thinning=10))`` (the 500-epoch schedule at 32 rows per step), on the sets and
splits of ``examples/benchmarks/stacking.py``. For each fit it records the
test log predictive density (nats per row, units of y), the R-hat the
estimator reports (``inference_diagnostics_["rhat"]``: the rank-normalised
split R-hat over the chains of the kept samples' mean training
log-likelihood) and the largest *within-chain* split R-hat of the same
quantity (each chain's first half of kept samples against its second half,
chain by chain): a chain still drifting shows in the second, chains settled
at different levels of fit only in the first.

How to run
----------
::

    python examples/benchmarks/sghmc_rhat.py --splits 2 --long concrete energy --threads 1 --out sghmc_rhat

Results go to ``examples/benchmarks/results/defaults/<out>.json`` and ``.md``.
"""

import sys
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    environment_lines, loadavg, rows_script, run_saving,
)
from stacking import add_set_arguments, benchmark_sets, scores  # noqa: E402

from skbayes import BayesianMLPRegressor  # noqa: E402
from skbayes.inference import SGHMC  # noqa: E402
from skbayes.inference._sghmc import chains_rhat  # noqa: E402


def within_chain_rhat(model, X, y):
    """Largest split R-hat of each chain alone (its two halves) of the estimator's R-hat quantity."""
    method, module = model.inference_, model.module_
    Y = torch.as_tensor(((y - model._y_mean[0]) / model._y_scale[0])[:, None])
    log_lik = method._kept_log_lik(module, torch.as_tensor(X), Y)
    n_chains = method.n_chains
    mean_log_lik = log_lik.mean(dim=-1).reshape(n_chains, -1)
    return max(chains_rhat(mean_log_lik[c:c + 1]) for c in range(n_chains))


def markdown(report):
    lines = [
        "# The default SGHMC's split R-hat: across chains, within chains, and under the longer schedule",
        "",
        "Command: `python examples/benchmarks/sghmc_rhat.py " + " ".join(report["argv"]) + "`. `default`: "
        "`BayesianMLPRegressor()` (SGHMC's step budget, 2 chains of 20 kept samples); `500 epochs`: "
        "`SGHMC(burn_in=300, thinning=10)`. R-hat: the estimator's (across the 2 chains); within: the largest "
        "of each chain's own split R-hat. 1.1 is the warning's threshold.",
        "",
        "| set | split | schedule | test LL | R-hat | within-chain R-hat | fit s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in report["rows"]:
        lines.append(f"| {r['set']} | {r['split']} | {r['schedule']} | {r['log_likelihood']:.3f} | {r['rhat']:.2f} | "
                     f"{r['within_chain_rhat']:.2f} | {r['fit_seconds']:.1f} |")
    rows = [r for r in report["rows"] if r["schedule"] == "default"]
    if rows:
        above = sum(r["rhat"] > 1.1 for r in rows)
        within = sum(r["within_chain_rhat"] > 1.1 for r in rows)
        lines += ["", f"Default fits with R-hat above 1.1: {above} of {len(rows)}; within-chain above 1.1: "
                      f"{within} of {len(rows)}."]
    lines += ["", *environment_lines(report)]
    return "\n".join(lines) + "\n"


def main(argv=None):
    def add_arguments(parser):
        add_set_arguments(parser)
        parser.add_argument("--long", nargs="*", default=[], help="Sets also fitted with the 500-epoch schedule.")

    args, report, save, finish = rows_script(argv, __doc__, markdown, "defaults", add_arguments)

    def body():
        for name, split, X_train, X_test, y_train, y_test in benchmark_sets(args, report["skipped"]):
            schedules = {"default": SGHMC()}
            if any(name.lower().startswith(s.lower()) for s in args.long):
                schedules["500 epochs"] = SGHMC(burn_in=300, thinning=10)
            for schedule, method in schedules.items():
                start = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    model = BayesianMLPRegressor(inference=method, random_state=0).fit(X_train, y_train)
                row = {"set": name, "split": split, "schedule": schedule,
                       **scores(model, X_test, y_test, time.perf_counter() - start),
                       "rhat": float(model.inference_diagnostics_["rhat"]),
                       "within_chain_rhat": within_chain_rhat(model, X_train, y_train), "loadavg": loadavg()}
                report["rows"].append(row)
                print(f"{name} {split} {schedule}: R-hat {row['rhat']:.2f}, within {row['within_chain_rhat']:.2f}",
                      flush=True)
                save()

    run_saving(report, body, save, finish)


if __name__ == "__main__":
    main()
