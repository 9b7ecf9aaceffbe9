"""The variational methods' defaults: the fan-in prior and Gaussian noise, each alone and together, against the earlier ones.

What it does
------------
Fits ``BayesianMLPRegressor(inference=Method(prior_scaling=...), noise=...)``
at its other defaults for each method given (``MeanFieldVI``, ``Vadam``,
``MNF``, ``BayesByHypernet``; ``BayesByGAN``, which has no ``prior_scaling``,
under the two settings with the fixed prior) under four settings: ``before`` (Student-t
noise, the N(0, prior_scale^2) prior whatever the width: the defaults until
this change), ``fan_in`` (Student-t noise, the prior N(0, prior_scale^2 /
fan_in)), ``gaussian`` (homoscedastic Gaussian noise, the fixed prior) and
``gaussian_fan_in`` (both). The methods' defaults now are marked. On
scikit-learn's ``check_regressors_train`` data it records the training R^2
(the check asks for 0.5; ``--check-seeds N``: for each of ``random_state``
0 to N - 1), and on the sets and splits of
``examples/benchmarks/stacking.py`` (diabetes, three synthetic sets, the UCI
splits) the test log predictive density (nats per row, units of y), RMSE,
90% coverage, and whether the collapse guard warned.

How to run
----------
::

    python examples/benchmarks/vi_defaults.py --methods mfvi vadam --splits 2 --threads 1 --out vi_defaults

Results go to ``examples/benchmarks/results/defaults/<out>.json`` and ``.md``.
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    environment_lines, fit_noting_collapse, loadavg, rows_script, run_saving,
)
from stacking import add_set_arguments, benchmark_sets, scores  # noqa: E402

from checks_at_defaults import regression_data  # noqa: E402

from skbayes import BayesianMLPRegressor  # noqa: E402
from skbayes.inference import ALIASES  # noqa: E402

#: name -> (noise, prior_scaling)
SETTINGS = {
    "before": ("student_t", None),
    "fan_in": ("student_t", "fan_in"),
    "gaussian": ("homoscedastic", None),
    "gaussian_fan_in": ("homoscedastic", "fan_in"),
}


def method_settings(method):
    """The settings ``method`` runs: all four, or those with the fixed prior for a method without ``prior_scaling``."""
    if "prior_scaling" in ALIASES[method]().get_params():
        return list(SETTINGS)
    return [name for name, (_, scaling) in SETTINGS.items() if scaling is None]


def default_setting(method):
    """The setting that is ``method``'s default now (its ``auto_noise`` and ``prior_scaling``)."""
    cls = ALIASES[method]
    return next(name for name in method_settings(method)
                if SETTINGS[name] == (cls.auto_noise, getattr(cls(), "prior_scaling", None)))


def model(method, setting, random_state=0):
    noise, prior_scaling = SETTINGS[setting]
    params = {"prior_scaling": prior_scaling} if "prior_scaling" in ALIASES[method]().get_params() else {}
    return BayesianMLPRegressor(inference=ALIASES[method](**params), noise=noise, random_state=random_state)


def markdown(report):
    rows, methods = report["rows"], report["methods"]
    lines = [
        "# The variational methods' defaults: fan-in prior and Gaussian noise",
        "",
        "Command: `python examples/benchmarks/vi_defaults.py " + " ".join(report["argv"]) + "`. "
        "`before`: Student-t noise, N(0, 1) on every weight (the defaults until this change); `fan_in`: Student-t "
        "noise, N(0, 1/fan_in); `gaussian`: Gaussian noise, N(0, 1); `gaussian_fan_in`: Gaussian noise and "
        "N(0, 1/fan_in). **Bold**: the method's defaults now. Other settings at the regressor's defaults (two "
        "layers of 50, 500 epochs), `random_state=0` (on the check data: each of `random_state` 0 to "
        f"{report.get('check_seeds', 1) - 1}). A method without `prior_scaling` runs `before` and `gaussian` only.",
        "",
        "## Training R² on scikit-learn's `check_regressors_train` data (the check asks for 0.5)",
        "",
        "With several seeds: the smallest and the largest R² over them, and the number of fits the collapse "
        "guard warned on.",
        "",
        "| method | " + " | ".join(SETTINGS) + " |",
        "|---|" + "---|" * len(SETTINGS),
    ]
    for method in methods:
        cells = []
        for setting in SETTINGS:
            match = [r for r in rows if r["method"] == method and r["setting"] == setting and r["set"] == "check"]
            r2 = [r["train_r2"] for r in match]
            n_collapsed = sum(r["collapsed"] for r in match)
            if len(match) == 1:
                cell = f"{r2[0]:.3f}{' (C)' if n_collapsed else ''}"
            elif match:
                cell = f"{min(r2):.3f} to {max(r2):.3f}{f' ({n_collapsed} C)' if n_collapsed else ''}"
            else:
                cell = "—"
            cells.append(f"**{cell}**" if setting == default_setting(method) else cell)
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    lines += ["", "(C): the collapse guard warned.", "",
              "## Test log-likelihood (nats per row) per set and split", "",
              "| set | split | method | " + " | ".join(SETTINGS) + " |", "|---|---|---|" + "---|" * len(SETTINGS)]
    keys = sorted({(r["set"], r["split"]) for r in rows if r["set"] != "check"},
                  key=lambda k: [r["set"] for r in rows].index(k[0]) * 100 + k[1])
    for set_name, split in keys:
        for method in methods:
            cells = []
            for setting in SETTINGS:
                match = [r for r in rows if (r["set"], r["split"], r["method"], r["setting"])
                         == (set_name, split, method, setting)]
                cell = (f"{match[0]['log_likelihood']:.3f}{' (C)' if match[0]['collapsed'] else ''}"
                        if match else "—")
                cells.append(f"**{cell}**" if setting == default_setting(method) else cell)
            lines.append(f"| {set_name} | {split} | {method} | " + " | ".join(cells) + " |")
    lines += ["", "## Mean over the sets and splits measured for every setting", "",
              "| method | " + " | ".join(SETTINGS) + " | wins of the default over `before` |",
              "|---|" + "---|" * (len(SETTINGS) + 1)]
    for method in methods:
        table = {}
        for r in rows:
            if r["method"] == method and r["set"] != "check":
                table.setdefault((r["set"], r["split"]), {})[r["setting"]] = r["log_likelihood"]
        settings = method_settings(method)
        complete = [v for v in table.values() if set(settings) <= set(v)]
        if not complete:
            continue
        means = {s: f"{np.mean([v[s] for v in complete]):.3f}" if s in settings else "—" for s in SETTINGS}
        means[default_setting(method)] = f"**{means[default_setting(method)]}**"
        wins = sum(v[default_setting(method)] > v["before"] for v in complete)
        lines.append(f"| {method} | " + " | ".join(means.values()) + f" | {wins} of {len(complete)} |")
    lines += ["", *environment_lines(report)]
    return "\n".join(lines) + "\n"


def main(argv=None):
    def add_arguments(parser):
        add_set_arguments(parser)
        parser.add_argument("--methods", nargs="+", default=["mfvi", "vadam", "mnf", "bbh"])
        parser.add_argument("--check-seeds", type=int, default=1,
                            help="Fit the check data with random_state 0 to N - 1 (default 1).")

    args, report, save, finish = rows_script(argv, __doc__, markdown, "defaults", add_arguments)
    report["methods"], report["check_seeds"] = args.methods, args.check_seeds

    def body():
        X, y = regression_data()
        for method in args.methods:
            for setting in method_settings(method):
                for seed in range(args.check_seeds):
                    estimator, seconds, collapsed = fit_noting_collapse(model(method, setting, seed), X, y)
                    report["rows"].append({"set": "check", "split": 0, "seed": seed, "method": method,
                                           "setting": setting, "train_r2": float(estimator.score(X, y)),
                                           "fit_seconds": seconds, "collapsed": collapsed, "loadavg": loadavg()})
                    print(f"check {method} {setting} seed {seed}: R2 {report['rows'][-1]['train_r2']:.3f}", flush=True)
                    save()
        for name, split, X_train, X_test, y_train, y_test in benchmark_sets(args, report["skipped"]):
            for method in args.methods:
                for setting in method_settings(method):
                    estimator, seconds, collapsed = fit_noting_collapse(model(method, setting), X_train, y_train)
                    row = {"set": name, "split": split, "method": method, "setting": setting,
                           **scores(estimator, X_test, y_test, seconds), "collapsed": collapsed,
                           "loadavg": loadavg()}
                    report["rows"].append(row)
                    print(f"{name} {split} {method} {setting}: {row['log_likelihood']:.3f}", flush=True)
                    save()

    run_saving(report, body, save, finish)


if __name__ == "__main__":
    main()
