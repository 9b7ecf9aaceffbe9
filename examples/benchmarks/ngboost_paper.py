"""NGBoost under its paper's protocol on the sets and splits of stacking.py: the peer at its best, beside ours.

What it does
------------
Fits ``NGBoostPaperProtocol()`` (``skbayes._cli.baselines``, the baseline
``skbayes evaluate`` prints: Duan et al. 2020's UCI protocol, a Normal
predictive, trees of depth 3, learning rate 0.01, up to 2,000 iterations,
the number chosen on a 20% validation split with early stopping after 50
iterations without improvement, then refitted on all the training rows)
behind a ``StandardScaler`` on the sets and splits of
``examples/benchmarks/stacking.py`` and records its test log predictive
density (nats per row, units of y), RMSE, 90% coverage, the chosen number
of iterations and the fit time. Needs ``ngboost`` (``pip install ngboost``).

How to run
----------
::

    python examples/benchmarks/ngboost_paper.py --out ngboost_paper

Results go to ``examples/benchmarks/results/stacking/<out>.json`` and ``.md``.
"""

import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    environment_lines, loadavg, rows_script, run_saving,
)
from stacking import add_set_arguments, benchmark_sets, scores  # noqa: E402

from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from skbayes._cli.baselines import NGBoostPaperProtocol  # noqa: E402


def markdown(report):
    lines = [
        "# NGBoost under its paper's protocol (test log-likelihood, nats per row)",
        "",
        "Command: `python examples/benchmarks/ngboost_paper.py " + " ".join(report["argv"]) + "`. "
        "`NGBoostPaperProtocol()` behind a `StandardScaler`: up to 2,000 iterations at rate 0.01, the number "
        "chosen on a 20% validation split (early stopping after 50), then refitted on all the training rows.",
        "",
        "| set | split | NGBoost LL | RMSE | 90% cover | iterations | fit s |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in report["rows"]:
        lines.append(f"| {row['set']} | {row['split']} | {row['log_likelihood']:.3f} | {row['rmse']:.3f} | "
                     f"{row['coverage_90']:.3f} | {row['n_estimators']} | {row['fit_seconds']:.1f} |")
    lines += ["", *environment_lines(report)]
    return "\n".join(lines) + "\n"


def main(argv=None):
    args, report, save, finish = rows_script(argv, __doc__, markdown, "stacking", add_set_arguments)

    def body():
        for name, split, X_train, X_test, y_train, y_test in benchmark_sets(args, report["skipped"]):
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = make_pipeline(StandardScaler(), NGBoostPaperProtocol(random_state=0)).fit(X_train, y_train)
            row = {"set": name, "split": split, **scores(model, X_test, y_test, time.perf_counter() - start),
                   "n_estimators": int(model[-1].n_estimators_), "loadavg": loadavg()}
            report["rows"].append(row)
            print(f"{name} {split}: {row['log_likelihood']:.3f} ({row['n_estimators']} iterations)", flush=True)
            save()

    run_saving(report, body, save, finish)


if __name__ == "__main__":
    main()
