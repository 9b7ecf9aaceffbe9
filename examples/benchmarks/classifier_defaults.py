"""The defaults of BayesianMLPClassifier against MLPClassifier(): accuracy, calibration, OOD detection, fit time.

What it does
------------
For scikit-learn's bundled digits (1,797 8x8 images, 64 pixels, 10 classes)
and breast-cancer (569 rows, 30 features, 2 classes) sets and each of their
stratified 80/20 splits (``train_test_split(test_size=0.2, stratify=y,
random_state=SPLIT)``, SPLIT = 0, 1, ...; 10 for digits and 20 for breast
cancer, whose 114 test rows make one error 0.9 points of accuracy and the ECE
noisy, or ``--n-splits`` for both), three classifiers are
fitted on the training rows, each in ``make_pipeline(StandardScaler(), ...)``
with ``random_state=SPLIT`` and nothing else set:

``BayesianMLPClassifier()``   the defaults: ``DeepEnsemble`` of five networks
                              with one hidden layer of 100 ReLU units,
                              ``prior_scale=3.0``, early stopping on the log
                              predictive density of a held-out tenth of the
                              rows, ``n_iter_no_change=10``.
``previous defaults``         ``BayesianMLPClassifier(hidden_layer_sizes=(50,),
                              inference=MeanFieldVI(early_stopping=False,
                              n_iter_no_change=50), prior_scale=1.0)``:
                              mean-field VI, the classifier's earlier defaults.
``MLPClassifier()``           scikit-learn's defaults (100 hidden units,
                              Adam, up to 200 epochs).

The order of the three is rotated by one from one split to the next, so that
a drift of the machine's load does not favour one of them.

Measured on the test rows: accuracy, the top-label expected calibration error
(``skbayes.metrics.expected_calibration_error``, its default 15 equal-width
bins), the log loss (nats per row); and the area under the ROC curve
(``sklearn.metrics.roc_auc_score``, positives = out-of-distribution rows) of
telling the test rows from as many out-of-distribution (OOD) rows, made from
the raw features before the scaler (seeded by the split):

``shuffled``   each feature of the test rows permuted across the rows on its
               own: draws from the product of the features' marginals, every
               value a realistic one, the joint structure gone (for digits,
               pixel noise with the intensities of digits).
``uniform``    uniform noise within each feature's training range [min, max].

The OOD scores are the predictive entropy H[p] and 1 - max_c p_c of the
predicted probabilities p (for the Bayesian models the model average; their
mutual information, ``score_ood``, is in the JSON). Also the fit time (wall
clock, one process, one fit at a time), the epochs run and the number of
``ConvergenceWarning`` raised by the fit.

The targets the defaults were chosen for, checked in the second table per
dataset on the paired per-split differences (mean ± standard error):
``BayesianMLPClassifier()``'s ECE <= ``MLPClassifier()``'s; its accuracy
within 0.5 points; its OOD AUROC by predictive entropy >= the MLP's by
1 - max softmax; no ``ConvergenceWarning``.

How to run
----------
::

    OMP_NUM_THREADS=1 python examples/benchmarks/classifier_defaults.py --threads 1     # about 5 min
    OMP_NUM_THREADS=1 python examples/benchmarks/classifier_defaults.py --quick --threads 1

Outputs ``examples/benchmarks/results/defaults/classifier_defaults.{json,md}``
(``classifier_defaults_quick`` with ``--quick``, ``classifier_defaults_<tag>``
with ``--tag``). Standard error = ``np.std(ddof=0) / sqrt(n_splits)``.
"""

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import log_loss, roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skbayes import BayesianMLPClassifier
from skbayes.inference import MeanFieldVI
from skbayes.metrics import expected_calibration_error

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    aggregate_splits, environment, limit_threads, loadavg, mean_se, run_saving, write_atomic, results_dir,
)

DATASETS = {"digits": load_digits, "breast_cancer": load_breast_cancer}
N_SPLITS = {"digits": 10, "breast_cancer": 20}
OOD_SETS = ("shuffled", "uniform")
# The classifier's defaults before this benchmark chose the present ones: the estimator's,
# and the training loop's (now parameters of the inference method).
PREVIOUS_DEFAULTS = {"hidden_layer_sizes": (50,), "prior_scale": 1.0}
PREVIOUS_LOOP = {"early_stopping": False, "n_iter_no_change": 50}
MODELS = {
    "BayesianMLPClassifier()": lambda seed: BayesianMLPClassifier(random_state=seed),
    "previous defaults (mfvi)": lambda seed: BayesianMLPClassifier(
        inference=MeanFieldVI(**PREVIOUS_LOOP), random_state=seed, **PREVIOUS_DEFAULTS),
    "MLPClassifier()": lambda seed: MLPClassifier(random_state=seed),
}
REFERENCE, CHOSEN = "MLPClassifier()", "BayesianMLPClassifier()"
KEYS = ["accuracy", "ece", "log_loss", "fit_time_s", "n_iter", "convergence_warnings",
        *(f"auroc_{ood}_{score}" for ood in OOD_SETS for score in ("entropy", "max_prob", "mutual_information"))]


def ood_rows(X_train, X_test, seed):
    """The two OOD sets of a split, as many rows as X_test, in raw feature units."""
    rng = np.random.default_rng(1000 + seed)
    shuffled = np.column_stack([rng.permutation(column) for column in X_test.T])
    uniform = rng.uniform(X_train.min(0), X_train.max(0), size=X_test.shape)
    return {"shuffled": shuffled, "uniform": uniform}


def entropy(p):
    """Entropy in nats of each row of p (0 log 0 = 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.where(p > 0, p * np.log(p), 0.0).sum(1)


def scores(pipe, X):
    """Probabilities and OOD scores (entropy, 1 - max p, mutual information or NaN) of a fitted pipeline on X."""
    estimator = pipe[-1]
    if isinstance(estimator, BayesianMLPClassifier):
        u = estimator.predict_uncertainty(pipe[:-1].transform(X))
        p, mi = u.proba, u.mutual_information
    else:
        p = pipe.predict_proba(X)
        mi = np.full(len(X), np.nan)
    return p, {"entropy": entropy(p), "max_prob": 1.0 - p.max(1), "mutual_information": mi}


def evaluate(name, seed, X_train, X_test, y_train, y_test, classes):
    pipe = make_pipeline(StandardScaler(), MODELS[name](seed))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        start = time.perf_counter()
        pipe.fit(X_train, y_train)
        fit_time = time.perf_counter() - start
    p, s_in = scores(pipe, X_test)
    row = {
        "accuracy": float(np.mean(classes[p.argmax(1)] == y_test)),
        "ece": expected_calibration_error(y_test, p, labels=classes),
        "log_loss": float(log_loss(y_test, p, labels=classes)),
        "fit_time_s": fit_time,
        "n_iter": int(pipe[-1].n_iter_),
        "convergence_warnings": sum(issubclass(w.category, ConvergenceWarning) for w in caught),
    }
    labels = np.r_[np.zeros(len(X_test)), np.ones(len(X_test))]
    for ood, X_ood in ood_rows(X_train, X_test, seed).items():
        _, s_out = scores(pipe, X_ood)
        for score in s_in:
            both = np.r_[s_in[score], s_out[score]]
            finite = np.isfinite(both).all()  # the MLP has no mutual information
            row[f"auroc_{ood}_{score}"] = float(roc_auc_score(labels, both)) if finite else float("nan")
    return row


def paired(rows, key, other_key=None):
    """Mean ± SE over splits of rows[CHOSEN][key] - rows[REFERENCE][other_key or key]."""
    a = np.array([r[key] for r in rows[CHOSEN]])
    b = np.array([r[other_key or key] for r in rows[REFERENCE]])
    d = a - b
    return {"mean": float(d.mean()), "se": float(d.std() / np.sqrt(len(d)))}


def targets(rows):
    """The targets of the defaults on one dataset: value, paired difference and whether the mean meets it."""
    out = {}
    ece = paired(rows, "ece")
    out["ECE <= MLPClassifier's"] = {**ece, "met": ece["mean"] <= 0}
    acc = paired(rows, "accuracy")
    out["accuracy within 0.5 points"] = {**acc, "met": acc["mean"] >= -0.005}
    for ood in OOD_SETS:
        auc = paired(rows, f"auroc_{ood}_entropy", f"auroc_{ood}_max_prob")
        out[f"AUROC {ood}: H >= MLP's 1-max p"] = {**auc, "met": auc["mean"] >= 0}
    warned = sum(r["convergence_warnings"] for r in rows[CHOSEN])
    out["no ConvergenceWarning"] = {"mean": float(warned), "se": 0.0, "met": warned == 0}
    return out


def markdown(report):
    s = report["settings"]
    lines = [
        "`BayesianMLPClassifier()` against `MLPClassifier()`, each after `StandardScaler`, on stratified 80/20 "
        f"splits (`random_state` = split) of scikit-learn's digits ({s['n_splits']['digits']} splits; 1,437 "
        f"training / 360 test rows) and breast-cancer ({s['n_splits']['breast_cancer']} splits; 455 / 114) sets; "
        "mean ± standard error over the splits. ECE: top-label, 15 bins; "
        "log loss in nats; AUROC of test rows against as many OOD rows (`shuffled`: each feature permuted "
        "across the test rows; `uniform`: uniform noise in each feature's training range), scored by the "
        "predictive entropy H / by 1 - max p; fit time on one CPU thread; CW: ConvergenceWarnings over all "
        "splits. `previous defaults`: mean-field VI, (50,), prior_scale=1, no early stopping.",
        "",
        "| data | model | accuracy % | ECE | log loss | AUROC shuffled H / 1-max p | AUROC uniform H / 1-max p "
        "| fit s | epochs | CW |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for data, models in report["aggregates"].items():
        for name, a in models.items():
            acc = f"{100 * a['accuracy']['mean']:.2f} ± {100 * a['accuracy']['se']:.2f}"
            aucs = [f"{mean_se(a, f'auroc_{ood}_entropy')} / {a[f'auroc_{ood}_max_prob']['mean']:.3f}"
                    for ood in OOD_SETS]
            warned = sum(r["convergence_warnings"] for r in report["splits"][data][name])
            lines.append(f"| {data} | {name} | {acc} | {mean_se(a, 'ece', 4)} | {mean_se(a, 'log_loss')} | {aucs[0]} "
                         f"| {aucs[1]} | {mean_se(a, 'fit_time_s', 2)} | {a['n_iter']['mean']:.0f} | {warned} |")
    lines += ["", "Targets of `BayesianMLPClassifier()` (paired per-split difference to `MLPClassifier()`, mean ± SE; "
              "met when the mean meets the target):", "",
              "| data | target | difference | met |", "|---|---|---|---|"]
    for data, checks in report["targets"].items():
        for target, c in checks.items():
            value = (f"{c['mean']:.0f} warnings" if target.startswith("no ") else
                     f"{100 * c['mean']:+.2f} ± {100 * c['se']:.2f} points" if target.startswith("accuracy") else
                     f"{c['mean']:+.4f} ± {c['se']:.4f}")
            lines.append(f"| {data} | {target} | {value} | {'yes' if c['met'] else 'no'} |")
    ratios = []
    for data, models in report["aggregates"].items():
        ratio = models[CHOSEN]["fit_time_s"]["mean"] / models[REFERENCE]["fit_time_s"]["mean"]
        ratios.append(f"{ratio:.1f}x on {data}")
    env = report["environment"]
    lines += ["", f"Fit time of `BayesianMLPClassifier()` relative to `MLPClassifier()`: {', '.join(ratios)}.", "",
              f"Environment: torch {env['torch']}, scikit-learn {env['sklearn']}, skbayes {env['skbayes']}, git "
              f"{env['git_commit']}, {env['torch_num_threads']} torch thread(s), load average {env['loadavg_start']} "
              f"at start, {env.get('loadavg_end')} at end; complete: {report['complete']}."]
    return "\n".join(lines) + "\n"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-splits", type=int, default=None,
                        help="Splits of each dataset (default: 10 for digits, 20 for breast cancer; quick: 2).")
    parser.add_argument("--quick", action="store_true", help="Smoke run: 2 splits.")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads(N) and the BLAS pools.")
    parser.add_argument("--output-dir", default=str(results_dir("defaults")))
    parser.add_argument("--tag", default=None, help="Results file suffix (default: none; quick with --quick).")
    args = parser.parse_args(argv)
    n = args.n_splits or (2 if args.quick else None)
    args.n_splits = {data: n or N_SPLITS[data] for data in DATASETS}
    args.tag = args.tag or ("quick" if args.quick else None)
    return args


def main(argv=None):
    args = parse_args(argv)
    limit_threads(args.threads)
    out_dir = Path(args.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = "classifier_defaults" + (f"_{args.tag}" if args.tag else "")
    json_path, md_path = out_dir / f"{stem}.json", out_dir / f"{stem}.md"
    report = {
        "settings": {"n_splits": args.n_splits, "test_size": 0.2, "models": list(MODELS),
                     "previous_defaults": {**PREVIOUS_DEFAULTS, "inference": repr(MeanFieldVI(**PREVIOUS_LOOP))},
                     "ood_sets": list(OOD_SETS), "standard_error": "np.std(values, ddof=0) / sqrt(n_splits)"},
        "environment": environment(), "splits": {}, "aggregates": {}, "targets": {}, "complete": False,
    }
    print(f"torch threads: {report['environment']['torch_num_threads']}; load average: {loadavg()}", flush=True)

    def save():
        write_atomic(json_path, json.dumps(report, indent=1))

    def body():
        names = list(MODELS)
        for data, load in DATASETS.items():
            X, y = load(return_X_y=True)
            classes = np.unique(y)
            rows = report["splits"].setdefault(data, {name: [] for name in names})
            for seed in range(args.n_splits[data]):
                X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, stratify=y, random_state=seed)
                for name in names[seed % len(names):] + names[:seed % len(names)]:
                    row = evaluate(name, seed, X_train, X_test, y_train, y_test, classes)
                    rows[name].append({"split": seed, "loadavg": loadavg(), **row})
                    print(f"{data:<13} split {seed}  {name:<26} acc {row['accuracy']:.4f}  ECE {row['ece']:.4f}  "
                          f"AUROC H {row['auroc_shuffled_entropy']:.3f} / {row['auroc_uniform_entropy']:.3f}  "
                          f"fit {row['fit_time_s']:.2f} s", flush=True)
                for name in names:
                    rows[name].sort(key=lambda r: r["split"])
                report["aggregates"][data] = {name: aggregate_splits(rows[name], KEYS) for name in names}
                report["targets"][data] = targets(rows)
                save()

    def finish():
        if report["aggregates"]:
            write_atomic(md_path, markdown(report))

    run_saving(report, body, save, finish)
    if md_path.exists():
        print("\n" + md_path.read_text())
    print(f"Wrote {json_path}\nWrote {md_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
