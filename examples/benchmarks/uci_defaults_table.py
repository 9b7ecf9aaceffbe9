"""One table of the default skbayes regressor, NGBoost, the MLP and the exact GP from uci_defaults.py runs.

What it does
------------
Reads the JSON files written by ``uci_defaults.py`` (several processes may
each have run some of the models), and prints a markdown table: per dataset
and model, the number of splits, test log-likelihood, RMSE, 90% and 95%
interval coverage (mean ± standard error over the splits) and the mean fit
time per split, with NGBoost's published test LL (Duan et al. 2020, Table 1)
beside it. Then the two targets of the default model, checked split by
split on the splits both models ran:

* test LL at least NGBoost's (run here on the same splits, under its
  paper's protocol, ``ngboost_paper``, where that ran, else at its
  defaults), dataset by dataset: the mean paired difference skbayes -
  NGBoost and its standard error, and the number of splits where skbayes
  is at least NGBoost;
* not more than one standard error below the exact GP where it runs: the
  mean paired difference skbayes - exact GP against the exact GP's standard
  error (on kin8nm both fit the same random subset of training rows,
  ``skbayes_subset``).

and whether any split's RMSE of the default is above 1.5 times the median
split's (a diverged fit).

The rows of a dataset and model are pooled over the files by split (the
later file on the command line wins a split that two files hold), so that
processes may share a dataset. The run files' environments (load average, threads, commit) are
listed at the end.

With ``--before FILE ...`` it adds a table of the default against an
earlier default: the ``skbayes`` rows of those files paired split by split
with the ``skbayes`` rows of the main files (test LL difference, splits
where the new one is at least the old, RMSE and fit time of both).

With ``--candidates`` it prints instead one row per skbayes configuration
(one results file each, e.g. the runs that chose the defaults) and one
test-LL column per dataset.

How to run
----------
::

    python examples/benchmarks/uci_defaults_table.py examples/benchmarks/results/defaults/uci_defaults_{baselines,default_*}.json \\
        > examples/benchmarks/results/defaults/uci_defaults_summary.md
    python examples/benchmarks/uci_defaults_table.py --candidates examples/benchmarks/results/defaults/uci_defaults_explore_*.json \\
        > examples/benchmarks/results/defaults/uci_defaults_candidates.md
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import aggregate_splits, mean_se  # noqa: E402

# Duan et al. 2020 (NGBoost), Table 1, test NLL (negated here to a log-likelihood), as published.
NGBOOST_PUBLISHED_LL = {
    "bostonHousing": -2.43, "concrete": -3.04, "energy": -0.60, "kin8nm": 0.49, "naval-propulsion-plant": 5.34,
    "power-plant": -2.79, "protein-tertiary-structure": -2.81, "wine-quality-red": -0.91, "yacht": -0.20,
}
ORDER = ("skbayes", "skbayes_subset", "ngboost_paper", "ngboost", "mlp", "exact_gp")


KEYS = ("test_ll", "rmse", "coverage_90", "coverage_95", "fit_time_s")


def collect(paths):
    """``{dataset: {model: (per-split rows, aggregate)}}`` and the runs' environments.

    The rows of one dataset and model are pooled over the files, by split
    (a later file on the command line wins a split both hold), so that a
    dataset may be shared between processes (``uci_defaults.py --first-split``).
    """
    pooled, runs = {}, []
    for path in paths:
        report = json.loads(Path(path).read_text())
        runs.append((Path(path).name, report))
        for name, per_model in report["splits"].items():
            for model, rows in per_model.items():
                by_split = pooled.setdefault(name, {}).setdefault(model, {})
                by_split.update({r["split"]: r for r in rows})
    table = {}
    for name, per_model in pooled.items():
        for model, by_split in per_model.items():
            rows = [by_split[k] for k in sorted(by_split)]
            table.setdefault(name, {})[model] = (rows, aggregate_splits(rows, KEYS))
    return table, runs


def paired(rows_a, rows_b, key="test_ll"):
    """Mean and standard error over the common splits of a - b, and the number of common splits."""
    a = {r["split"]: r[key] for r in rows_a}
    b = {r["split"]: r[key] for r in rows_b}
    common = sorted(set(a) & set(b))
    if not common:
        return None
    d = np.array([a[s] - b[s] for s in common])
    return float(d.mean()), float(d.std() / np.sqrt(len(d))), len(common)


def paired_wins(rows_a, rows_b, key="test_ll"):
    """The number of common splits where a >= b."""
    b = {r["split"]: r[key] for r in rows_b}
    return sum(r[key] >= b[r["split"]] for r in rows_a if r["split"] in b)


def candidates_table(paths):
    """The exploration table: one row per skbayes configuration (one file each), test LL per dataset."""
    reports = [(Path(p).name, json.loads(Path(p).read_text())) for p in paths]
    names = []
    for _, report in reports:
        names += [n for n in report["aggregates"] if n not in names]
    lines = ["| parameters | " + " | ".join(names) + " | file |", "|---|" + "---|" * (len(names) + 1)]
    for file, report in reports:
        cells = []
        for name in names:
            agg = report["aggregates"].get(name, {}).get("skbayes")
            cells.append("—" if agg is None else f"{mean_se(agg, 'test_ll')} ({agg['n_splits']})")
        given = ", ".join(f"{k}={v}" for k, v in report["settings"]["skbayes_params"].items())
        lines.append(f"| {given} | " + " | ".join(cells) + f" | `{file}` |")
    lines += ["", "Parameters given to `BayesianMLPRegressor`; the others at the defaults of the commit the run "
              "names (before the defaults changed: `inference='mfvi'`, `hidden_layer_sizes=(50,)`, "
              "`noise='homoscedastic'`, `prior_scale=1.0`). "
              "Test LL (nats per point), mean ± standard error over the first splits (their number in "
              "brackets); each run ran alone in its process with 1 torch thread, beside other jobs (load average "
              "3-5 on 2 cores), so no fit times here. Runs stopped early hold the splits they finished."]
    return "\n".join(lines)


def before_table(table, paths, runs):
    """Markdown lines: the default (``skbayes`` rows of ``table``) against the earlier one in ``paths``."""
    earlier, earlier_runs = collect(paths)
    runs.extend(earlier_runs)
    lines = ["", "The default against the earlier default (`--before`; test LL in nats per point, paired over the "
             "common splits; fit times from separate runs):", "",
             "| dataset | splits | earlier test LL | test LL | difference | splits at least the earlier | "
             "RMSE earlier / now | fit time (s) earlier / now |", "|---|---|---|---|---|---|---|---|"]
    for name in table:
        if "skbayes" not in table[name] or "skbayes" not in earlier.get(name, {}):
            continue
        now, old = table[name]["skbayes"][0], earlier[name]["skbayes"][0]
        common = {r["split"] for r in now} & {r["split"] for r in old}
        now, old = [r for r in now if r["split"] in common], [r for r in old if r["split"] in common]
        d = paired(now, old)

        def mean(rows, key):
            return float(np.mean([r[key] for r in rows]))

        lines.append(f"| {name} | {d[2]} | {mean(old, 'test_ll'):.3f} | {mean(now, 'test_ll'):.3f} | "
                     f"{d[0]:+.3f} ± {d[1]:.3f} | {paired_wins(now, old)} of {d[2]} | "
                     f"{mean(old, 'rmse'):.3f} / {mean(now, 'rmse'):.3f} | "
                     f"{mean(old, 'fit_time_s'):.1f} / {mean(now, 'fit_time_s'):.1f} |")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--before", nargs="+", default=[],
                        help="Result files of an earlier default, paired with this one's skbayes rows.")
    parser.add_argument("--candidates", action="store_true",
                        help="One row per skbayes configuration (one file each) instead: the exploration table.")
    args = parser.parse_args(argv)
    if args.candidates:
        print(candidates_table(args.files))
        return 0
    table, runs = collect(args.files)
    lines = ["| dataset | model | splits | test LL | RMSE | 90% coverage | 95% coverage | fit time (s) | "
             "NGBoost LL published |", "|---|---|---|---|---|---|---|---|---|"]
    for name in table:
        models = sorted(table[name], key=lambda m: ORDER.index(m) if m in ORDER else len(ORDER))
        for model in models:
            _, agg = table[name][model]
            label = "skbayes (same rows as the GP)" if model == "skbayes_subset" else model
            if model == "exact_gp" and "skbayes_subset" in table[name]:
                label = f"exact_gp ({table[name][model][0][0]['n_train']} training rows)"
            lines.append(f"| {name} | {label} | {agg['n_splits']} | {mean_se(agg, 'test_ll')} | {mean_se(agg, 'rmse')} | "
                         f"{mean_se(agg, 'coverage_90')} | {mean_se(agg, 'coverage_95')} | {mean_se(agg, 'fit_time_s', 1)} | "
                         f"{NGBOOST_PUBLISHED_LL.get(name, '—')} |")
    lines += ["", "Targets of the default model (test LL, nats per point; paired over the common splits):", "",
              "| dataset | NGBoost run | skbayes - NGBoost | at least NGBoost | splits at least NGBoost | "
              "skbayes - exact GP | exact GP's SE | within 1 SE of the exact GP | splits with RMSE > 1.5x median |",
              "|---|---|---|---|---|---|---|---|---|"]
    wins = n_ngb = 0
    for name in table:
        if "skbayes" not in table[name]:
            continue
        cells = [name]
        peer = next((m for m in ("ngboost_paper", "ngboost") if m in table[name]), None)
        if peer:
            d = paired(table[name]["skbayes"][0], table[name][peer][0])
            split_wins = paired_wins(table[name]["skbayes"][0], table[name][peer][0])
            n_ngb += 1
            wins += d[0] >= 0
            cells += [peer, f"{d[0]:+.3f} ± {d[1]:.3f} ({d[2]} splits)", "yes" if d[0] >= 0 else "**no**",
                      f"{split_wins} of {d[2]}"]
        else:
            cells += ["—", "—", "—", "—"]
        ours = "skbayes_subset" if "skbayes_subset" in table[name] else "skbayes"
        if "exact_gp" in table[name]:
            d = paired(table[name][ours][0], table[name]["exact_gp"][0])
            se = table[name]["exact_gp"][1]["test_ll"]["se"]
            ok = d[0] >= -se
            cells += [f"{d[0]:+.3f} ± {d[1]:.3f}" + (" (same rows)" if ours == "skbayes_subset" else ""),
                      f"{se:.3f}", "yes" if ok else f"**no** ({-d[0] / se:.1f} SE below)"]
        else:
            cells += ["—", "—", "—"]
        rmse = np.array([r["rmse"] for r in table[name]["skbayes"][0]])
        outliers = [r["split"] for r in table[name]["skbayes"][0] if r["rmse"] > 1.5 * np.median(rmse)]
        cells.append(f"{len(outliers)}" + (f" (split {', '.join(map(str, outliers))})" if outliers else ""))
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"At least NGBoost's test LL on {wins} of {n_ngb} datasets."]
    if args.before:
        lines += before_table(table, args.before, runs)
    lines += ["",
              "Mean ± standard error (np.std(ddof=0) / sqrt(n_splits)) over the fixed splits; test LL in nats per "
              "point and RMSE in the units of y; fit time is the wall clock of one fit, including the scaler. "
              "Runs:"]
    for file, report in runs:
        env, s = report["environment"], report["settings"]
        lines.append(f"- `{file}`: models {', '.join(s['models'])}; skbayes `{s['skbayes_estimator']}`; "
                     f"git {str(env['git_commit'])[:7]}, torch {env['torch']}, scikit-learn {env['sklearn']}, "
                     f"{env['torch_num_threads']} torch thread(s), load average {env['loadavg_start']} at start, "
                     f"{env.get('loadavg_end')} at end; complete: {report['complete']}; command: "
                     f"`{' '.join(Path(c).name if i < 2 else c for i, c in enumerate(env['command']))}`.")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
