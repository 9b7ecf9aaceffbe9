"""Variants of one inference method side by side: regression sets, scikit-learn's check data and MNIST.

What it does
------------
Each ``--variants`` entry is an inference object written as Python (e.g.
``'Vadam()'`` and ``'Vadam(curvature="gradient_magnitude")'``), evaluated
with the names of ``skbayes.inference`` in scope. Every variant fits, at
the estimators' other defaults and ``random_state=0``:

* ``BayesianMLPRegressor`` on scikit-learn's ``check_regressors_train``
  data (training R^2; the check asks for 0.5), for ``random_state`` 0 to
  ``--check-seeds`` - 1;
* ``BayesianMLPRegressor`` on the sets of ``examples/benchmarks/stacking.py``
  (diabetes, three synthetic sets, the first ``--splits`` UCI splits of
  ``--uci``): test log predictive density (nats per row, units of y),
  RMSE, 90% interval coverage;
* with ``--classification``, ``BayesianMLPClassifier`` at its defaults (its
  stopping rule on) on scikit-learn's iris, wine, breast-cancer and digits
  sets and a synthetic set with one informative feature of ten
  (``make_classification(600, 10, n_informative=1, class_sep=0.7)``), X
  standardised, the first ``--splits`` stratified 75/25 splits: test
  accuracy, NLL and the epochs run;
* with ``--mnist``, ``BayesianMLPClassifier(hidden_layer_sizes=(400, 400))``
  on the fixed stratified 4,000/1,000 split of the 5,000 labelled MNIST
  images for ``--mnist-epochs`` epochs (the stopping rule off): test error
  and NLL.

Each row records whether the fit warned that the posterior collapsed.

How to run
----------
::

    python examples/benchmarks/method_variants.py --variants 'Vadam()' 'Vadam(curvature="gradient_magnitude")' \
        --mnist --threads 1 --out vadam_curvature

Results go to ``examples/benchmarks/results/bnn_methods/<out>.json`` and ``.md``.
"""

import shlex
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    environment_lines, fit_noting_collapse, load_mnist, loadavg, rows_script, run_saving,
)
from checks_at_defaults import regression_data  # noqa: E402
from stacking import add_set_arguments, benchmark_sets, scores  # noqa: E402

import skbayes.inference  # noqa: E402
from skbayes import BayesianMLPClassifier, BayesianMLPRegressor  # noqa: E402


def variant(expression):
    """The inference object written as ``expression``."""
    return eval(expression, {name: getattr(skbayes.inference, name) for name in skbayes.inference.__all__})


def _cell(rows, key, fmt):
    if not rows:
        return "—"
    values = [r[key] for r in rows]
    text = fmt.format(values[0]) if len(values) == 1 else f"{fmt.format(min(values))} to {fmt.format(max(values))}"
    n_collapsed = sum(r["collapsed"] for r in rows)
    return text + (f" ({n_collapsed} C)" if len(rows) > 1 and n_collapsed else " (C)" if n_collapsed else "")


def classification_sets(n_splits):
    """``(name, split, X_train, X_test, y_train, y_test)`` of the classification sets, X standardised on the training rows."""
    from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine, make_classification
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    sets = {
        "iris": load_iris(return_X_y=True), "wine": load_wine(return_X_y=True),
        "breast_cancer": load_breast_cancer(return_X_y=True), "digits": load_digits(return_X_y=True),
        "one_informative": make_classification(600, 10, n_informative=1, n_redundant=0, n_clusters_per_class=1,
                                               class_sep=0.7, random_state=0),
    }
    for name, (X, y) in sets.items():
        for split in range(n_splits):
            X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, stratify=y, random_state=split)
            scaler = StandardScaler().fit(X_train)
            yield name, split, scaler.transform(X_train), scaler.transform(X_test), y_train, y_test


def markdown(report):
    rows, variants = report["rows"], report["variants"]
    header = "| " + " | ".join(f"`{v}`" for v in variants) + " |"
    lines = [
        "# Variants of an inference method",
        "",
        "Command: `python examples/benchmarks/method_variants.py " + shlex.join(report["argv"]) + "`. Each variant at "
        "the estimators' other defaults, `random_state=0` (the classification fits: `random_state=SPLIT`). (C): the fit "
        "warned that the posterior collapsed.",
        "",
        f"## Training R² on scikit-learn's `check_regressors_train` data (`random_state` 0 to "
        f"{report['check_seeds'] - 1}; the check asks for 0.5)",
        "",
        header,
        "|" + "---|" * len(variants),
        "| " + " | ".join(_cell([r for r in rows if r["set"] == "check" and r["variant"] == v], "train_r2", "{:.3f}")
                         for v in variants) + " |",
    ]
    classified = [r for r in rows if r["set"].startswith("classification:")]
    if classified:
        sets = list(dict.fromkeys(r["set"] for r in classified))
        lines += ["", "## Classification at the classifier's defaults (stopping rule on): test accuracy, NLL (nats) "
                  "and epochs, over the splits", "", "| set | measure " + header, "|---|---|" + "---|" * len(variants)]
        for set_name in sets:
            for key, fmt in (("accuracy", "{:.3f}"), ("nll", "{:.3f}"), ("epochs", "{:.0f}")):
                lines.append(f"| {set_name.split(':', 1)[1]} | {key} | " + " | ".join(
                    _cell([r for r in classified if r["set"] == set_name and r["variant"] == v], key, fmt)
                    for v in variants) + " |")
        means = [f"{np.mean([r['accuracy'] for r in classified if r['variant'] == v]):.3f}" for v in variants]
        lines += ["", "Mean test accuracy over every set and split:", "", header, "|" + "---|" * len(variants),
                  "| " + " | ".join(means) + " |"]
    mnist = [r for r in rows if r["set"] == "mnist"]
    if mnist:
        lines += ["", f"## MNIST, 4,000 / 1,000 images, MLP (400, 400), {mnist[0]['epochs']} epochs: test error % "
                  "and NLL (nats)", "", "| measure " + header, "|---|" + "---|" * len(variants)]
        for key, fmt in (("error_percent", "{:.1f}"), ("nll", "{:.3f}"), ("fit_seconds", "{:.0f}")):
            lines.append(f"| {key} | " + " | ".join(
                _cell([r for r in mnist if r["variant"] == v], key, fmt) for v in variants) + " |")
    keys = []
    for r in rows:
        if r["set"] not in ("check", "mnist") and not r["set"].startswith("classification:") \
                and (r["set"], r["split"]) not in keys:
            keys.append((r["set"], r["split"]))
    if keys:
        lines += ["", "## Test log-likelihood (nats per row), RMSE and 90% coverage", "",
                  "| set | split | measure " + header, "|---|---|---|" + "---|" * len(variants)]
        for set_name, split in keys:
            for key, fmt in (("log_likelihood", "{:.3f}"), ("rmse", "{:.3f}"), ("coverage_90", "{:.2f}")):
                lines.append(f"| {set_name} | {split} | {key} | " + " | ".join(
                    _cell([r for r in rows if (r["set"], r["split"], r["variant"]) == (set_name, split, v)], key, fmt)
                    for v in variants) + " |")
        complete = [k for k in keys if all(any((r["set"], r["split"], r["variant"]) == (*k, v) for r in rows)
                                           for v in variants)]
        if complete:
            means = []
            for v in variants:
                ll = [next(r["log_likelihood"] for r in rows if (r["set"], r["split"], r["variant"]) == (*k, v))
                      for k in complete]
                means.append(f"{np.mean(ll):.3f}")
            lines += ["", f"Mean test log-likelihood over the {len(complete)} sets and splits every variant ran:", "",
                      header, "|" + "---|" * len(variants), "| " + " | ".join(means) + " |"]
    lines += ["", *environment_lines(report)]
    return "\n".join(lines) + "\n"


def main(argv=None):
    def add_arguments(parser):
        add_set_arguments(parser)
        parser.add_argument("--variants", nargs="+", required=True, help="Inference objects written as Python.")
        parser.add_argument("--check-seeds", type=int, default=1)
        parser.add_argument("--mnist", action="store_true", help="Also fit the MNIST classifier.")
        parser.add_argument("--classification", action="store_true",
                            help="Also fit the classifier at its defaults on five classification sets.")
        parser.add_argument("--mnist-epochs", type=int, default=100)
        parser.add_argument("--no-regression", action="store_true", help="Skip the regression sets.")

    args, report, save, finish = rows_script(argv, __doc__, markdown, "bnn_methods", add_arguments)
    report["variants"], report["check_seeds"] = args.variants, args.check_seeds

    def body():
        X, y = regression_data()
        for seed in range(args.check_seeds):
            for expression in args.variants:
                estimator, seconds, collapsed = fit_noting_collapse(
                    BayesianMLPRegressor(inference=variant(expression), random_state=seed), X, y)
                report["rows"].append({"set": "check", "split": 0, "seed": seed, "variant": expression,
                                       "train_r2": float(estimator.score(X, y)), "fit_seconds": seconds,
                                       "collapsed": collapsed, "loadavg": loadavg()})
                print(f"check {expression} seed {seed}: R2 {report['rows'][-1]['train_r2']:.3f}", flush=True)
                save()
        if args.classification:
            from sklearn.metrics import log_loss

            for name, split, X_train, X_test, y_train, y_test in classification_sets(args.splits):
                for expression in args.variants:
                    estimator, seconds, collapsed = fit_noting_collapse(
                        BayesianMLPClassifier(inference=variant(expression), random_state=split), X_train, y_train)
                    proba = estimator.predict_proba(X_test)
                    report["rows"].append({
                        "set": f"classification:{name}", "split": split, "variant": expression,
                        "accuracy": float(np.mean(estimator.classes_[proba.argmax(1)] == y_test)),
                        "nll": float(log_loss(y_test, proba, labels=estimator.classes_)),
                        "epochs": int(estimator.n_iter_), "fit_seconds": seconds, "collapsed": collapsed,
                        "loadavg": loadavg()})
                    print(f"{name} {split} {expression}: accuracy {report['rows'][-1]['accuracy']:.3f}, "
                          f"{estimator.n_iter_} epochs", flush=True)
                    save()
        if args.mnist:
            from sklearn.metrics import log_loss

            X_train, X_test, y_train, y_test, _ = load_mnist(args.data_home)
            for expression in args.variants:
                method = variant(expression).set_params(max_iter=args.mnist_epochs, n_iter_no_change=10**9)
                estimator, seconds, collapsed = fit_noting_collapse(
                    BayesianMLPClassifier(hidden_layer_sizes=(400, 400), inference=method, random_state=0),
                    X_train, y_train)
                proba = estimator.predict_proba(X_test)
                report["rows"].append({
                    "set": "mnist", "split": 0, "variant": expression, "epochs": args.mnist_epochs,
                    "error_percent": float(100 * np.mean(estimator.classes_[proba.argmax(1)] != y_test)),
                    "nll": float(log_loss(y_test, proba, labels=estimator.classes_)), "fit_seconds": seconds,
                    "collapsed": collapsed, "loadavg": loadavg()})
                print(f"mnist {expression}: error {report['rows'][-1]['error_percent']:.1f} %", flush=True)
                save()
        if not args.no_regression:
            for name, split, X_train, X_test, y_train, y_test in benchmark_sets(args, report["skipped"]):
                for expression in args.variants:
                    estimator, seconds, collapsed = fit_noting_collapse(
                        BayesianMLPRegressor(inference=variant(expression), random_state=0), X_train, y_train)
                    row = {"set": name, "split": split, "variant": expression,
                           **scores(estimator, X_test, y_test, seconds), "collapsed": collapsed, "loadavg": loadavg()}
                    report["rows"].append(row)
                    print(f"{name} {split} {expression}: {row['log_likelihood']:.3f}", flush=True)
                    save()

    run_saving(report, body, save, finish)


if __name__ == "__main__":
    main()
