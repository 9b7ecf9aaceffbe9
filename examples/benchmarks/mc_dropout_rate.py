"""MC dropout's rate in the classifier: out-of-distribution mutual information and held-out scores per rate.

What it does
------------
Fits ``BayesianMLPClassifier(inference=MCDropout(dropout_rate=p))`` at its
other defaults for each rate p given and records:

* on the three Gaussian blobs of
  ``tests/neural_network/test_bayesian_mlp_classifier.py`` (400 rows), the
  ratio of the mean mutual information (``score_ood``) on the test's 400 far
  rows to that on the training rows (the test asks for 3; mean-field VI
  reaches about 4.5);
* on scikit-learn's breast-cancer and digits sets (stratified 75/25 split,
  ``random_state=0``, X standardised on the training rows), the test log
  loss, accuracy and top-label ECE (15 bins).

How to run
----------
::

    python examples/benchmarks/mc_dropout_rate.py --threads 1 --out mc_dropout_rate

Results go to ``examples/benchmarks/results/defaults/<out>.json`` and ``.md``.
"""

import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    environment_lines, loadavg, rows_script, run_saving,
)

from sklearn.datasets import load_breast_cancer, load_digits, make_blobs  # noqa: E402
from sklearn.metrics import accuracy_score, log_loss  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from skbayes import BayesianMLPClassifier  # noqa: E402
from skbayes.inference import MCDropout  # noqa: E402
from skbayes.metrics import expected_calibration_error  # noqa: E402


def blobs():
    X, y = make_blobs(400, centers=[[-2, 0], [2, 0], [0, 3]], cluster_std=0.8, random_state=0)
    far = np.random.RandomState(1).uniform(-1, 1, size=(200, 2)) * 4 + np.array([0, -12])
    return X, y, np.r_[far, far * [-1, 1] + [14, 14]]


def split(loader):
    X, y = loader(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    scaler = StandardScaler().fit(X_train)
    return scaler.transform(X_train), scaler.transform(X_test), y_train, y_test


def fit(rate, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return BayesianMLPClassifier(inference=MCDropout(dropout_rate=rate), random_state=0).fit(X, y)


def markdown(report):
    lines = [
        "# MC dropout's rate in the classifier",
        "",
        "Command: `python examples/benchmarks/mc_dropout_rate.py " + " ".join(report["argv"]) + "`. "
        "`BayesianMLPClassifier(inference=MCDropout(dropout_rate=p))`, other settings at their defaults, "
        "`random_state=0`. MI ratio: mean mutual information on the far rows of the blobs test over that on "
        "its training rows (the test asks for 3). Test log loss (nats), accuracy, top-label ECE (15 bins) on "
        "stratified 75/25 splits.",
        "",
        "| p | blobs MI ratio | breast cancer log loss | accuracy | ECE | digits log loss | accuracy | ECE | fit s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["rows"]:
        lines.append(
            f"| {r['dropout_rate']} | {r['mi_ratio']:.2f} | {r['breast_cancer']['log_loss']:.4f} | "
            f"{r['breast_cancer']['accuracy']:.3f} | {r['breast_cancer']['ece']:.4f} | "
            f"{r['digits']['log_loss']:.4f} | {r['digits']['accuracy']:.3f} | {r['digits']['ece']:.4f} | "
            f"{r['fit_seconds']:.1f} |")
    lines += ["", *environment_lines(report)]
    return "\n".join(lines) + "\n"


def main(argv=None):
    def add_arguments(parser):
        parser.add_argument("--rates", nargs="+", type=float, default=[0.01, 0.05, 0.1, 0.2, 0.5])

    args, report, save, finish = rows_script(argv, __doc__, markdown, "defaults", add_arguments)
    sets = {"breast_cancer": split(load_breast_cancer), "digits": split(load_digits)}
    X_blobs, y_blobs, far = blobs()

    def body():
        for rate in args.rates:
            start = time.perf_counter()
            model = fit(rate, X_blobs, y_blobs)
            row = {"dropout_rate": rate,
                   "mi_ratio": float(model.score_ood(far).mean() / model.score_ood(X_blobs).mean())}
            for name, (X_train, X_test, y_train, y_test) in sets.items():
                model = fit(rate, X_train, y_train)
                proba = model.predict_proba(X_test)
                row[name] = {"log_loss": float(log_loss(y_test, proba, labels=model.classes_)),
                             "accuracy": float(accuracy_score(y_test, model.classes_[proba.argmax(1)])),
                             "ece": float(expected_calibration_error(y_test, proba))}
            row["fit_seconds"], row["loadavg"] = time.perf_counter() - start, loadavg()
            report["rows"].append(row)
            print(f"p={rate}: MI ratio {row['mi_ratio']:.2f}", flush=True)
            save()

    run_saving(report, body, save, finish)


if __name__ == "__main__":
    main()
