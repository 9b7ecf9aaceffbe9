"""Out-of-distribution detection on the digits data: train on 0-4, test on 5-9.

What it does
------------
Uses scikit-learn's bundled 8x8 digits images (``load_digits``, no download).
The images of classes 0-4 are split once, stratified, into a training and an
in-distribution test part (``--test-size``, default 0.3, ``random_state=0``,
``--split-seed`` to change it);
every image of classes 5-9 is the out-of-distribution (OOD) set. The pixels
are standardised by a ``StandardScaler`` fitted on the training rows only
(constant pixels are left at 0). Three classifiers are fitted on the training
rows:

* ``BayesianMLPClassifier(inference=MeanFieldVI(**LOOP), random_state=0, **MLP50)``
  (mean-field VI);
* ``BayesianMLPClassifier(inference=MCDropout(**LOOP), random_state=0, **MLP50)``;
* ``MLPClassifier(hidden_layer_sizes=(50,), max_iter=2000, random_state=0)``,
  the deterministic baseline of the same width.

``MLP50`` and ``LOOP`` hold the classifier's earlier defaults, under which the
results in ``doc/uncertainty_examples_results.md`` were measured: one hidden
layer of 50 units and ``prior_scale=1.0`` (``MLP50``, the estimator's), no early
stopping and ``n_iter_no_change=50`` (``LOOP``, the training loop's settings,
which belong to the inference method; ``--max-iter`` adds ``max_iter``)
(the defaults are now a deep ensemble of 100-unit networks, see
``examples/benchmarks/classifier_defaults.py``).

For each model it measures, on the held-out 0-4 images, the accuracy, the
top-label expected calibration error (``skbayes.metrics.
expected_calibration_error``, 15 equal-width bins) and the log loss; and the
area under the ROC curve (``sklearn.metrics.roc_auc_score``, positives = OOD
images) of telling the OOD images from the held-out 0-4 images by

* the mutual information between label and weights (BALD, the epistemic
  part; ``BayesianMLPClassifier.score_ood``), for the Bayesian models only;
* the predictive entropy of the predicted class probabilities;
* 1 - the largest predicted class probability ("max softmax").

Nothing is tuned on the test or OOD images.

How to run
----------
::

    python examples/digits_ood.py --threads 1
    python examples/digits_ood.py --max-iter 100 --output /tmp/digits_ood.json

It takes about 15 s on one idle CPU core (the two Bayesian fits dominate).
Use ``--threads 1`` when other processes share the cores: torch's default of
one thread per core makes these small networks much slower under contention.

What it prints
--------------
The split sizes, the fit time and epochs of each model, then a markdown table
with one row per model: held-out 0-4 accuracy, mean top-label probability
(lower than the accuracy means underconfident), ECE, log loss (nats), the OOD
AUROC of each score (``-`` where a model has no such score) and the mean
mutual information on the held-out 0-4 and on the OOD images. The same
numbers, with the package versions, the load average, the date and the
command line, go as JSON to ``--output`` (default
``examples/output/digits_ood.json``).
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.metrics import accuracy_score, log_loss, roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler

from skbayes import BayesianMLPClassifier
from skbayes.inference import MCDropout, MeanFieldVI
from skbayes.metrics import expected_calibration_error

# The "environment" entry of the JSON is the benchmarks' (examples/benchmarks/_common.py).
sys.path.insert(0, str(Path(__file__).resolve().parent / "benchmarks"))
from _common import end_environment, environment, save_json  # noqa: E402

IN_CLASSES = (0, 1, 2, 3, 4)
N_BINS = 15
SCORES = ("mutual_information", "predictive_entropy", "one_minus_max_proba")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--test-size", type=float, default=0.3,
                        help="Fraction of the 0-4 images held out as the in-distribution test set (default 0.3).")
    parser.add_argument("--split-seed", type=int, default=0,
                        help="random_state of the stratified 0-4 train/test split (default 0).")
    parser.add_argument("--max-iter", type=int, default=None,
                        help="max_iter (epochs) of the inference methods of BayesianMLPClassifier "
                             "(default: the method's default).")
    parser.add_argument("--mlp-max-iter", type=int, default=2000,
                        help="max_iter of the MLPClassifier baseline (default 2000).")
    parser.add_argument("--output", default=str(Path(__file__).resolve().parent / "output" / "digits_ood.json"),
                        help="JSON file for the results (default: examples/output/digits_ood.json).")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch.set_num_threads(N) (default: torch's default, one per core).")
    return parser.parse_args(argv)


# The settings of the Bayesian MLPs (the classifier's defaults when the results were measured):
# the estimator's, and the training loop's (parameters of the inference method).
MLP50 = {"hidden_layer_sizes": (50,), "prior_scale": 1.0}
LOOP = {"early_stopping": False, "n_iter_no_change": 50}


def entropy(proba):
    """Entropy in nats of each row of a probability matrix (0 log 0 = 0)."""
    p = np.clip(proba, 0.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * np.log(p), 0.0)
    return -terms.sum(axis=1)


def load_data(test_size, split_seed):
    X, y = load_digits(return_X_y=True)
    inside = np.isin(y, IN_CLASSES)
    X_train, X_test, y_train, y_test = train_test_split(
        X[inside], y[inside], test_size=test_size, stratify=y[inside], random_state=split_seed
    )
    X_ood, y_ood = X[~inside], y[~inside]
    scaler = StandardScaler().fit(X_train)
    return scaler.transform(X_train), scaler.transform(X_test), y_train, y_test, scaler.transform(X_ood), y_ood


def uncertainty_scores(model, X):
    """Class probabilities and the OOD scores of one fitted model on X."""
    if isinstance(model, BayesianMLPClassifier):
        u = model.predict_uncertainty(X)
        return u.proba, {
            "mutual_information": u.mutual_information,
            "predictive_entropy": u.predictive_entropy,
            "one_minus_max_proba": u.variation_ratio,
        }
    proba = model.predict_proba(X)
    return proba, {"predictive_entropy": entropy(proba), "one_minus_max_proba": 1.0 - proba.max(axis=1)}


def fmt(value, spec=".3f"):
    return "-" if value is None else format(value, spec)


def main(argv=None):
    args = parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    env = environment(argv=argv)
    X_train, X_test, y_train, y_test, X_ood, y_ood = load_data(args.test_size, args.split_seed)
    print("Data: sklearn.datasets.load_digits (8x8 images, 64 standardised pixels)")
    print(f"  train on classes 0-4: {len(y_train)} images; held-out 0-4 test: {len(y_test)} images; "
          f"OOD (classes 5-9): {len(y_ood)} images\n")

    loop = {**LOOP, **({} if args.max_iter is None else {"max_iter": args.max_iter})}
    models = {
        "BayesianMLPClassifier (mfvi)": BayesianMLPClassifier(inference=MeanFieldVI(**loop), random_state=0, **MLP50),
        "BayesianMLPClassifier (mc_dropout)": BayesianMLPClassifier(
            inference=MCDropout(**loop), random_state=0, **MLP50
        ),
        "MLPClassifier (50,)": MLPClassifier(hidden_layer_sizes=(50,), max_iter=args.mlp_max_iter, random_state=0),
    }

    is_ood = np.r_[np.zeros(len(y_test)), np.ones(len(y_ood))]
    results = {}
    for name, model in models.items():
        start = time.perf_counter()
        model.fit(X_train, y_train)
        fit_time = time.perf_counter() - start
        proba_test, scores_test = uncertainty_scores(model, X_test)
        _, scores_ood = uncertainty_scores(model, X_ood)
        pred = model.classes_[np.argmax(proba_test, axis=1)]
        res = {
            "params": {k: v for k, v in model.get_params().items() if not callable(v)},
            "fit_time_s": fit_time,
            "n_iter": int(model.n_iter_),
            "accuracy": float(accuracy_score(y_test, pred)),
            "ece": expected_calibration_error(y_test, proba_test, n_bins=N_BINS, labels=model.classes_),
            "log_loss": float(log_loss(y_test, proba_test, labels=model.classes_)),
            "mean_confidence": float(np.mean(proba_test.max(axis=1))),
            "auroc": {},
            "mean_score_in": {},
            "mean_score_ood": {},
        }
        for score in SCORES:
            if score in scores_test:
                both = np.r_[scores_test[score], scores_ood[score]]
                res["auroc"][score] = float(roc_auc_score(is_ood, both))
                res["mean_score_in"][score] = float(np.mean(scores_test[score]))
                res["mean_score_ood"][score] = float(np.mean(scores_ood[score]))
        results[name] = res
        print(f"  fitted {name} in {fit_time:.1f} s ({model.n_iter_} epochs)", flush=True)

    print("\n| model | acc 0-4 | mean max p 0-4 | ECE 0-4 | log loss 0-4 | AUROC MI | AUROC entropy | AUROC 1-max p "
          "| mean MI 0-4 | mean MI OOD | fit (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        a = r["auroc"]
        print(
            f"| {name} | {r['accuracy']:.3f} | {r['mean_confidence']:.3f} | {r['ece']:.3f} | {r['log_loss']:.3f} "
            f"| {fmt(a.get('mutual_information'))} | {fmt(a.get('predictive_entropy'))} "
            f"| {fmt(a.get('one_minus_max_proba'))} "
            f"| {fmt(r['mean_score_in'].get('mutual_information'), '.4f')} "
            f"| {fmt(r['mean_score_ood'].get('mutual_information'), '.4f')} | {r['fit_time_s']:.1f} |"
        )
    print(
        f"\nacc, mean max p (mean top-label probability; below acc = underconfident), ECE ({N_BINS} "
        f"equal-width bins, top label) and log loss (nats)\non the {len(y_test)} held-out images of classes 0-4;\nAUROC: area under the ROC curve of each score for OOD (classes 5-9, "
        "positives) vs held-out 0-4 (0.5 = chance, 1 = perfect);\nMI = mutual information (nats), "
        "entropy = predictive entropy, 1-max p = 1 - largest class probability."
    )

    out = {
        "description": "Train on digits 0-4, held-out 0-4 test, OOD = digits 5-9 (sklearn load_digits).",
        "split": {"test_size": args.test_size, "random_state": args.split_seed, "n_train": len(y_train),
                  "n_test_in": len(y_test), "n_ood": len(y_ood)},
        "ece_bins": N_BINS,
        "results": results,
        "environment": end_environment(env),
    }
    path = save_json(args.output, out)
    print(f"\nSaved {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
