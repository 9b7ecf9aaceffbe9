"""One table of every inference method from several ``uci_benchmark.py`` runs.

What it does
------------
Reads the JSON files written by ``uci_benchmark.py`` (each run may cover
different datasets, methods and numbers of splits), and prints one markdown
table: per dataset and method, the number of splits, test RMSE and test
log-likelihood (mean ± standard error over the splits, original units of y),
the mean fit time per split, and beside them the published rows of the
reference table (Gal's grid-searched MC dropout; PBP, Vadam and BBB from
Cinelli 2019, Tables 3.2-3.3). For each dataset it marks the method with the
highest mean test LL, and ends with the count of datasets on which that best
method beats Gal's published test LL, after a per-method summary (mean rank of
the test LL over the datasets, median fit time relative to mfvi). If two runs measured the same dataset
and method, the one with more splits is used; runs with non-default estimator
parameters (``--params``) get their own rows, labelled with them.

How to run
----------
::

    python examples/benchmarks/uci_summary.py examples/benchmarks/results/uci/uci_*.json \\
        > examples/benchmarks/results/uci/uci_all_methods.md
"""

import argparse
import json
import sys
from pathlib import Path


def fmt(pair, digits=3):
    if pair is None:
        return "—"
    mean, se = pair
    return f"{mean:.{digits}f} ± {se:.{digits}f}"


def collect(paths):
    """{dataset: {method: (aggregate, run environment)}} keeping the run with most splits."""
    table, reference, environments = {}, {}, []
    for path in paths:
        report = json.loads(Path(path).read_text())
        reference.update(report.get("reference", {}))
        env = report["environment"]
        environments.append((Path(path).name, env))
        params = report["settings"].get("params") or {}
        suffix = "".join(f", {k}={v}" for k, v in params.items())
        for name, per_method in report["aggregates"].items():
            for method, agg in per_method.items():
                method = f"{method} ({suffix[2:]})" if suffix else method
                old = table.setdefault(name, {}).get(method)
                if old is None or agg["n_splits"] > old[0]["n_splits"]:
                    table[name][method] = (agg, Path(path).name)
    return table, reference, environments


def method_summary(table):
    """Per method (default parameters only): mean rank of test LL over the datasets, and fit
    time relative to mfvi."""
    ranks, ratios = {}, {}
    for rows in table.values():
        rows = {m: r for m, r in rows.items() if " (" not in m}  # default parameters only
        order = sorted(rows, key=lambda m: -rows[m][0]["test_ll"]["mean"])
        for rank, method in enumerate(order, start=1):
            ranks.setdefault(method, []).append(rank)
            if "mfvi" in rows:
                ratio = rows[method][0]["fit_time_s"]["mean"] / rows["mfvi"][0]["fit_time_s"]["mean"]
                ratios.setdefault(method, []).append(ratio)
    lines = [
        "| method | datasets | mean rank of test LL (1 = best) | fit time per split / mfvi's (median over datasets) |",
        "|---|---|---|---|",
    ]
    for method in sorted(ranks, key=lambda m: sum(ranks[m]) / len(ranks[m])):
        values = sorted(ratios.get(method, []))
        median = values[len(values) // 2] if len(values) % 2 else sum(values[len(values) // 2 - 1:][:2]) / 2
        lines.append(
            f"| {method} | {len(ranks[method])} | {sum(ranks[method]) / len(ranks[method]):.1f} "
            f"| {median:.2f} |"
        )
    return lines


def markdown(table, reference, environments):
    lines = [
        "| dataset | method | splits | RMSE | test LL | fit time per split (s) | "
        "Gal MC dropout LL | PBP LL | Vadam LL | BBB LL |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    wins, compared = [], 0
    for name in sorted(table):
        ref = reference.get(name, {})
        rows = table[name]
        # the best with default parameters ("--params" variants are shown, not ranked)
        best = max((m for m in rows if " (" not in m), key=lambda m: rows[m][0]["test_ll"]["mean"])
        for method, (agg, _) in sorted(rows.items(), key=lambda kv: -kv[1][0]["test_ll"]["mean"]):
            ll = fmt((agg["test_ll"]["mean"], agg["test_ll"]["se"]))
            lines.append(
                f"| {name} | {'**' + method + '**' if method == best else method} | {agg['n_splits']} "
                f"| {fmt((agg['rmse']['mean'], agg['rmse']['se']))} | {ll} "
                f"| {agg['fit_time_s']['mean']:.1f} "
                f"| {fmt(ref.get('gal_ll'), 2)} | {fmt(ref.get('pbp_ll'))} "
                f"| {fmt(ref.get('vadam_ll'))} | {fmt(ref.get('bbb_ll'))} |"
            )
        if "gal_ll" in ref:
            compared += 1
            if rows[best][0]["test_ll"]["mean"] > ref["gal_ll"][0]:
                wins.append(f"{name} ({best})")
    lines += ["", *method_summary(table)]
    lines += [
        "",
        f"Best method (bold) above Gal's grid-searched MC dropout test LL on {len(wins)} of {compared} "
        f"datasets: {', '.join(wins) or 'none'}.",
        "",
        "Runs: " + "; ".join(
            f"{file}: torch threads {env['torch_num_threads']}, load average {env['loadavg_start']} at start, "
            f"{env.get('loadavg_end')} at end" for file, env in environments
        ) + ".",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", help="uci_<tag>.json files written by uci_benchmark.py")
    args = parser.parse_args(argv)
    sys.stdout.write(markdown(*collect(args.results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
