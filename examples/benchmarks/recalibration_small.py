"""Coverage of recalibrated 90% intervals of the default BayesianMLPRegressor on small data sets (issue 28).

What it does
------------
On small training sets of several kinds (sklearn's diabetes, three
synthetic sets, the bundled UCI boston and energy splits 0-1), it fits
``make_pipeline(StandardScaler(), BayesianMLPRegressor(random_state=0))``
and ``CalibratedRegressorCV(base, cv=5)`` and reports the coverage and mean
width of the central 90% interval on the test rows for:

- ``base``: the fitted pipeline alone (its own ``predict_interval``, the
  quantiles of its Student-t mixture);
- ``gauss_ens``: ``CalibratedRegressorCV(base, cv=5, predictive="gaussian",
  pooling="linear")``, the default before issue 28 (Gaussian N(mean, std^2)
  PIT values, one map per fold, the average of the 5 recalibrated CDFs);
- ``gauss_members``: the mean over the 5 folds of the coverage of each
  recalibrated fold model alone (its own map, no averaging);
- ``gauss_pooled``: one map on the PIT values of all 5 folds, applied to the
  pipeline fitted on all rows (``ensemble=False``);
- ``gauss_ens_allknots``: as ``gauss_ens`` with ``n_knots=None``;
- ``model_ens``, ``model_members``, ``model_pooled``: the same with the
  model's own predictive CDF (``predictive="model"``);
- ``model_ambiguity``: the 5 recalibrated fold models of ``model_ens``
  pooled with ``pooling="ambiguity"`` (centred on their mean, spread scaled
  by the factor measured on the training rows) instead of averaged;
- ``default``: ``CalibratedRegressorCV(base, cv=5)`` at the library's
  current defaults, fitted for real.

The variants other than ``gauss_ens`` and ``default`` reuse the 5 fold
models of ``gauss_ens`` (and the pipeline of ``base``) and refit only the
maps (with the library's private ``_pit`` and ``_fit_calibrator``), so
they differ from each other by the recalibration alone.

Also: the 10-bin histograms (density, 1 = uniform) of the calibration PIT
values (the 5 folds pooled) and of the test PIT values of the same 5 fold
models, Gaussian and model CDF.

Data: diabetes ``train_test_split(test_size=0.25, random_state=s)``; the
synthetic sets are drawn with seed s (training) and 1000 + s (1,000 test
rows of the same law): ``linear`` (300 rows, 5 features, y = X w + 0.3
sin(2 x_0) + N(0, 0.5^2)), ``gap`` (200 rows, x in [-3, -1] U [1, 3], y =
sin(2 x) + N(0, 0.1^2)), ``smooth`` (300 rows, 5-D, sum_j sin(x_j) + 0.5
x_0 x_1 + N(0, 0.02^2)); s = 0, 1, 2. UCI: splits 0 and 1.

How to run
----------
::

    python examples/benchmarks/recalibration_small.py --tag v1

Writes ``results/calibration/recalibration_small_<tag>.json`` and ``.md``.
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import KFold, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import end_environment, environment, limit_threads, results_dir, save_json, write_atomic  # noqa: E402

from skbayes import BayesianMLPRegressor  # noqa: E402
from skbayes.calibration import CalibratedRegressorCV  # noqa: E402
from skbayes.calibration._regressor import (  # noqa: E402
    _ambiguity_scale, _fit_calibrator, _pit, _prediction_step,
)
from skbayes.datasets import fetch_uci, get_uci_split  # noqa: E402

COVERAGE = 0.9
VARIANTS = ("base", "gauss_ens", "gauss_members", "gauss_qavg", "gauss_pooled", "gauss_ens_allknots", "model_ens",
            "model_members", "model_qavg", "model_pooled", "model_ambiguity", "default")


def synthetic(kind, seed, n):
    rng = np.random.RandomState(seed)
    if kind == "linear":
        X = rng.randn(n, 5)
        w = np.array([1.0, -0.5, 0.25, 0.0, 2.0])
        return X, X @ w + 0.3 * np.sin(2 * X[:, 0]) + 0.5 * rng.randn(n)
    if kind == "gap":
        x = rng.uniform(1, 3, n) * rng.choice([-1, 1], n)
        return x[:, None], np.sin(2 * x) + 0.1 * rng.randn(n)
    X = rng.uniform(-2, 2, (n, 5))  # smooth
    return X, np.sin(X).sum(1) + 0.5 * X[:, 0] * X[:, 1] + 0.02 * rng.randn(n)


def datasets(data_home=None):
    """Yield (name, split, X_train, X_test, y_train, y_test)."""
    X, y = load_diabetes(return_X_y=True)
    for s in range(3):
        yield ("diabetes", s, *train_test_split(X, y, test_size=0.25, random_state=s))
    for kind, n in (("linear", 300), ("gap", 200), ("smooth", 300)):
        for s in range(3):
            (X_train, y_train), (X_test, y_test) = synthetic(kind, s, n), synthetic(kind, 1000 + s, 1000)
            yield kind, s, X_train, X_test, y_train, y_test
    for name in ("boston", "energy"):
        bunch = fetch_uci(name, data_home=data_home, download_if_missing=False)
        for s in range(2):
            yield (bunch.name, s, *get_uci_split(bunch, s))


def interval_stats(lower, upper, y):
    return float(np.mean((y >= lower) & (y <= upper))), float(np.mean(upper - lower))


def with_maps(template, fitted, pits, predictive, n_knots, n_features, X_ambiguity=None):
    """A CalibratedRegressorCV with given fitted estimators and maps fitted on the given PIT values.

    The linear pool of the members, or with ``X_ambiguity`` (the training rows) the ambiguity pool.
    """
    pooling = "linear" if X_ambiguity is None else "ambiguity"
    model = CalibratedRegressorCV(template, predictive=predictive, n_knots=n_knots, pooling=pooling)
    model.estimators_, model.predictive_, model.n_features_in_ = list(fitted), predictive, n_features
    model.calibrators_ = [_fit_calibrator(pit, n_knots) for pit in pits]
    model.spread_scale_ = None
    if X_ambiguity is not None:
        model.spread_scale_ = _ambiguity_scale(*model._member_moments(X_ambiguity))
    return model


def histogram(pit):
    return (np.histogram(pit, bins=10, range=(0, 1))[0] / len(pit) * 10).round(2).tolist()


def run_one(X, X_test, y, y_test):
    base = make_pipeline(StandardScaler(), BayesianMLPRegressor(random_state=0))
    row, times = {}, {}
    t = time.perf_counter()
    fitted_all = clone(base).fit(X, y)
    transform, final = _prediction_step(fitted_all)
    row["base"] = interval_stats(*final.predict_interval(transform(X_test), coverage=COVERAGE), y_test)
    t1 = time.perf_counter()
    gauss = CalibratedRegressorCV(base, cv=5, predictive="gaussian", pooling="linear").fit(X, y)
    times["fit_base_s"], times["fit_cv5_s"] = t1 - t, time.perf_counter() - t1
    row["gauss_ens"] = interval_stats(*gauss.predict_interval(X_test, coverage=COVERAGE), y_test)
    folds = [test for _, test in KFold(5).split(X)]
    fitted = gauss.estimators_
    diag = {}
    for predictive in ("gaussian", "model"):
        short = predictive[:5]
        pits = [_pit(e, X[te], y[te], predictive, 0) for e, te in zip(fitted, folds)]
        test_pits = [_pit(e, X_test, y_test, predictive, 0) for e in fitted]
        diag[f"cal_pit_hist_{short}"] = histogram(np.concatenate(pits))
        diag[f"test_pit_hist_{short}"] = histogram(np.concatenate(test_pits))
        ens = with_maps(base, fitted, pits, predictive, "auto", X.shape[1])
        if predictive == "gaussian":  # the manual construction reproduces the fitted one
            np.testing.assert_allclose(ens.predict_interval(X_test[:20], COVERAGE),
                                       gauss.predict_interval(X_test[:20], COVERAGE), rtol=1e-9)
            allk = with_maps(base, fitted, pits, predictive, None, X.shape[1])
            row["gauss_ens_allknots"] = interval_stats(*allk.predict_interval(X_test, coverage=COVERAGE), y_test)
        else:
            row["model_ens"] = interval_stats(*ens.predict_interval(X_test, coverage=COVERAGE), y_test)
            ambiguity = with_maps(base, fitted, pits, predictive, "auto", X.shape[1], X_ambiguity=X)
            row["model_ambiguity"] = interval_stats(*ambiguity.predict_interval(X_test, coverage=COVERAGE), y_test)
            diag["spread_scale"] = ambiguity.spread_scale_
        members = [with_maps(base, [e], [p], predictive, "auto", X.shape[1]) for e, p in zip(fitted, pits)]
        bounds = np.array([m.predict_interval(X_test, coverage=COVERAGE) for m in members])  # (5, 2, n)
        row[f"{short}_members"] = np.mean([interval_stats(*b, y_test) for b in bounds], axis=0).tolist()
        row[f"{short}_qavg"] = interval_stats(*bounds.mean(axis=0), y_test)
        pooled = with_maps(base, [fitted_all], [np.concatenate(pits)], predictive, "auto", X.shape[1])
        row[f"{short}_pooled"] = interval_stats(*pooled.predict_interval(X_test, coverage=COVERAGE), y_test)
    t = time.perf_counter()
    default = CalibratedRegressorCV(base, cv=5).fit(X, y)
    times["fit_default_s"] = time.perf_counter() - t
    row["default"] = interval_stats(*default.predict_interval(X_test, coverage=COVERAGE), y_test)
    diag["default_settings"] = {"predictive_": default.predictive_, "ensemble": default.ensemble,
                                "pooling": default.pooling, "n_estimators": len(default.estimators_)}
    return row, diag, times


def markdown(report):
    header = "| dataset | rows (train/test) | " + " | ".join(VARIANTS) + " |"
    lines = [header, "|" + "---|" * (len(VARIANTS) + 2)]
    by_name = {}
    for r in report["runs"]:
        by_name.setdefault(r["dataset"], []).append(r)
    for name, runs in by_name.items():
        cells = []
        for v in VARIANTS:
            cov = np.array([r["coverage"][v][0] for r in runs])
            cells.append(f"{cov.mean():.3f} ({' '.join(f'{c:.2f}' for c in cov)})")
        rows = f"{runs[0]['n_train']}/{runs[0]['n_test']}"
        lines.append(f"| {name} ({len(runs)} splits) | {rows} | " + " | ".join(cells) + " |")
    lines += ["", "Coverage of the central 90% interval on the test rows: mean over splits (each split). "
              "base: the default pipeline's own interval; gauss_*: Gaussian N(mean, std^2) PIT (the default "
              "before issue 28); model_*: the model's own predictive CDF; *_ens: the average of the 5 fold "
              "models' recalibrated CDFs (ensemble=True, pooling='linear'); model_ambiguity: the same models "
              "and maps pooled with pooling='ambiguity'; *_members: mean coverage of the 5 recalibrated "
              "fold models alone; *_pooled: one map on the PIT values of all folds, applied to the pipeline "
              "fitted on all rows (ensemble=False); allknots: n_knots=None; default: CalibratedRegressorCV(base, "
              f"cv=5) at the current defaults ({report['default_settings']}).",
              "", f"Environment: {report['environment']['git_commit']}, torch {report['environment']['torch']}, "
              f"{report['environment']['torch_num_threads']} thread(s), load {report['environment']['loadavg_start']} "
              f"at start, {report['environment'].get('loadavg_end')} at end."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tag", default="v1")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--data-home", default=None)
    parser.add_argument("--only", nargs="*", default=None, help="data set names to run (default: all)")
    parser.add_argument("--merge", nargs="*", default=None,
                        help="instead of running: merge the result files of these tags into <tag>'s, in order")
    args = parser.parse_args(argv)
    out = results_dir("calibration")
    if args.merge:
        import json
        parts = [json.loads((out / f"recalibration_small_{tag}.json").read_text()) for tag in args.merge]
        report = {"environment": parts[0]["environment"], "merged_from": args.merge,
                  "environments": [part["environment"] for part in parts],
                  "default_settings": parts[0]["default_settings"], "runs": [r for p in parts for r in p["runs"]]}
        save_json(out / f"recalibration_small_{args.tag}.json", report)
        write_atomic(out / f"recalibration_small_{args.tag}.md", markdown(report))
        print(markdown(report))
        return
    limit_threads(args.threads)
    warnings.filterwarnings("ignore", category=ConvergenceWarning)
    report = {"environment": environment(argv=argv), "runs": []}
    json_path, md_path = out / f"recalibration_small_{args.tag}.json", out / f"recalibration_small_{args.tag}.md"
    for name, split, X, X_test, y, y_test in datasets(args.data_home):
        if args.only and name not in args.only:
            continue
        row, diag, times = run_one(np.asarray(X, float), np.asarray(X_test, float), np.asarray(y, float),
                                   np.asarray(y_test, float))
        report["default_settings"] = diag.pop("default_settings")
        report["runs"].append({"dataset": name, "split": split, "n_train": len(y), "n_test": len(y_test),
                               "coverage": row, "pit": diag, "times": times})
        print(name, split, {k: round(v[0], 3) for k, v in row.items()}, flush=True)
        save_json(json_path, report)
    end_environment(report["environment"])
    save_json(json_path, report)
    write_atomic(md_path, markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
