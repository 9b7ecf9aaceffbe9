"""Laplace's evidence tuning in one fit against GridSearchCV over prior_scale: fit time and test log-likelihood.

What it does
------------
On the first ``--splits`` splits of each UCI set (``--datasets``) it fits, at
the estimator's other defaults with ``noise="homoscedastic"`` and
``random_state=0``:

* ``Laplace()``: the last-layer Laplace, its prior precision chosen by the
  evidence and its noise by the held-out rows, in one fit;
* ``Laplace(subset="all")``: the KFAC Laplace of all weights, tuned the same way;
* ``grid``: ``GridSearchCV`` over ``prior_scale`` in ``--prior-scales``
  (default 0.1 0.3 1 3 10) of ``Laplace(prior_tuning=None)`` (the same
  last-layer posterior with delta = 1 / prior_scale^2 and the MAP fit's
  noise), ``--cv`` folds (default 3), scored by
  ``skbayes.metrics.get_scorer("log_predictive_density")`` (the mean log
  predictive density of the held-out fold), refitting the best scale on all
  training rows: what a user without evidence tuning would run.

For each it records the wall-clock time of the whole fit (the search with its
refit for ``grid``), the test log-likelihood (mean ``log_predictive_density``
of the test rows, nats per row), the RMSE and the 90% interval coverage, and
for ``grid`` the chosen ``prior_scale``. Both run at the same thread count,
one after the other on the same split.

How to run
----------
::

    python examples/benchmarks/laplace_vs_grid_search.py --threads 1 --out laplace_vs_grid_search

Writes ``results/bnn_methods/NAME.json`` and ``NAME.md``.
"""

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import environment_lines, loadavg, rows_script, run_saving, uci_splits  # noqa: E402

from skbayes import BayesianMLPRegressor  # noqa: E402
from skbayes.inference import Laplace  # noqa: E402
from skbayes.metrics import get_scorer  # noqa: E402

VARIANTS = ("Laplace()", 'Laplace(subset="all")', "grid")


def add_arguments(parser):
    parser.add_argument("--datasets", nargs="*", default=["boston", "concrete", "energy", "wine"])
    parser.add_argument("--splits", type=int, default=3)
    parser.add_argument("--prior-scales", nargs="*", type=float, default=[0.1, 0.3, 1.0, 3.0, 10.0])
    parser.add_argument("--cv", type=int, default=3)
    parser.add_argument("--data-home", default=None)


def fit_variant(variant, X, y, args):
    from sklearn.model_selection import GridSearchCV

    kwargs = {"noise": "homoscedastic", "random_state": 0}
    if variant == "grid":
        search = GridSearchCV(BayesianMLPRegressor(inference=Laplace(prior_tuning=None), **kwargs),
                              {"prior_scale": args.prior_scales}, cv=args.cv,
                              scoring=get_scorer("log_predictive_density"))
        return search.fit(X, y).best_estimator_, {"prior_scale": search.best_params_["prior_scale"]}
    inference = Laplace() if variant == "Laplace()" else Laplace(subset="all")
    return BayesianMLPRegressor(inference=inference, **kwargs).fit(X, y), {}


def markdown(report):
    lines = ["# Laplace's evidence tuning against a grid search over `prior_scale`", "",
             f"Command: `python examples/benchmarks/laplace_vs_grid_search.py {' '.join(report['argv'])}`. "
             "Fit seconds include the grid search's cross-validation and refit.", "",
             "| set | split | measure | " + " | ".join(f"`{v}`" for v in VARIANTS) + " |",
             "|---|---|---|" + "---|" * len(VARIANTS)]
    by_split = {}
    for row in report["rows"]:
        by_split.setdefault((row["set"], row["split"]), {})[row["variant"]] = row
    for (name, split), rows in by_split.items():
        for measure, fmt in (("log_likelihood", "{:.3f}"), ("rmse", "{:.3f}"), ("coverage_90", "{:.2f}"),
                             ("fit_seconds", "{:.1f}")):
            cells = [fmt.format(rows[v][measure]) if v in rows else "" for v in VARIANTS]
            lines.append(f"| {name} | {split} | {measure} | " + " | ".join(cells) + " |")
        if "grid" in rows:
            lines.append(f"| {name} | {split} | chosen prior_scale | | | {rows['grid']['prior_scale']:g} |")
    complete = [rows for rows in by_split.values() if all(v in rows for v in VARIANTS)]
    if complete:
        lines += ["", f"Means over the {len(complete)} sets and splits every variant ran:", "",
                  "| measure | " + " | ".join(f"`{v}`" for v in VARIANTS) + " |", "|---|" + "---|" * len(VARIANTS)]
        for measure in ("log_likelihood", "fit_seconds"):
            cells = [f"{np.mean([rows[v][measure] for rows in complete]):.3f}" for v in VARIANTS]
            lines.append(f"| {measure} | " + " | ".join(cells) + " |")
        ahead = sum(rows["Laplace()"]["log_likelihood"] >= rows["grid"]["log_likelihood"] for rows in complete)
        lines.append("")
        lines.append(f"`Laplace()` at or above the grid search's test log-likelihood on {ahead} of {len(complete)}.")
    lines += [""] + environment_lines(report)
    return "\n".join(lines) + "\n"


def main(argv=None):
    args, report, save, finish = rows_script(argv, __doc__, markdown, "bnn_methods", add_arguments)

    def body():
        for name, split, X_train, X_test, y_train, y_test in uci_splits(args.datasets, args.splits, args.data_home,
                                                                        report["skipped"]):
            for variant in VARIANTS:
                start = time.perf_counter()
                model, extra = fit_variant(variant, X_train, y_train, args)
                seconds = time.perf_counter() - start
                low, high = model.predict_interval(X_test, coverage=0.9)
                row = {"set": name, "split": split, "variant": variant, "fit_seconds": seconds,
                       "log_likelihood": float(model.log_predictive_density(X_test, y_test).mean()),
                       "rmse": float(np.sqrt(np.mean((model.predict(X_test) - y_test) ** 2))),
                       "coverage_90": float(np.mean((y_test >= low) & (y_test <= high))),
                       "loadavg": loadavg(), **extra}
                report["rows"].append(row)
                print(name, split, variant, f"LL {row['log_likelihood']:.3f}", f"{seconds:.1f} s", extra, flush=True)
                save()

    run_saving(report, body, save, finish)


if __name__ == "__main__":
    main()
