"""Seed 004's Table 5.2: its LeNet-like CNN on 5,000 labeled MNIST digits, made Bayesian ten ways: error, NLL, ECE, rotated digit.

What it does
------------
Reads ``mnist/mnist_5k_labeled.npz`` (``skbayes.datasets.load_mnist``: the copy
bundled with skbayes; or ``--data-home``/``$SKBAYES_DATA_HOME`` holding ``mnist/``) and
splits it as ``mnist_bnn.py`` does (``load_mnist`` in ``_common.py``: the
fixed stratified 4,000/1,000 split, ``random_state=0``, pixels in [0, 1]).
The network is :class:`LeNet`, Table 5.1 of seed 004 (Killingberg): a 5x5
convolution with 6 channels, ReLU, 2x2 max-pooling, a 5x5 convolution with
16 channels, ReLU, 2x2 max-pooling, flattened to 16 x 4 x 4 = 256 values, a
dense layer of 256 ReLU units and 10 output logits: a plain torch module
that ``BayesianMLPClassifier(module=LeNet, input_shape=(1, 28, 28))`` turns
Bayesian ten ways (the methods of seed 004's Table 5.2, dropout, BbB, MNF,
BbH and BbG, among them):

``MAP``
    ``DeepEnsemble(n_estimators=1)``: one deterministic network, the
    maximum a posteriori weights under the N(0, 1) prior (a weight decay),
    i.e. the plain CNN; its mutual information is 0 by construction.
``MCDropout-all``
    ``MCDropout(placement="all")``: dropout after both convolutions (before
    pooling) and before the last dense layer (the first one's input is
    already dropped by the second convolution's mask), kept on at
    prediction: the Bayesian CNN of Gal (2016, section 3.4.1; "lenet-all").
``MCDropout-dense``
    ``MCDropout(placement="dense")``: dropout before the two dense layers
    only, the convolutions deterministic (the usual practice).
``MeanFieldVI``
    ``MeanFieldVI()``: factorised Gaussian posterior over every kernel,
    weight and bias (Bayes by Backprop, local reparameterisation).
``MeanFieldVI-iblm``
    ``MeanFieldVI(init="iblm")``: the same, q initialised layer by layer by
    Bayesian linear regression, the convolutions on their input patches
    (I-BLM, Rossi 2022, chapter 3: on LeNet, mean-field VI from the
    uninformative, heuristic or Xavier initialisations collapses to the
    prior, and I-BLM was the best of those that converged).
``DeepEnsemble``
    ``DeepEnsemble(n_estimators=5)``: five MAP networks from independent
    initialisations, their uniform mixture.
``MNF``
    ``MNF()``: multiplicative normalising flows, one z per input unit of
    the dense layers and per feature map of the convolutions
    (:class:`skbayes.nn.MNFConv2d`), two planar flows each.
``BayesByHypernet``
    ``BayesByHypernet()``: every dense layer and convolution generated slice
    by slice (a kernel per output channel) from 10-dimensional noise, the KL
    by the prior cross-entropy less the nearest-neighbour entropy.
``BayesByGAN``
    ``BayesByGAN()``: the same generators, the KL by one discriminator per
    layer (seed 004's method).
``WHVI``
    ``WHVI()``: seed 003's recipe for CNNs (Rossi 2022, section 4.5): the
    dense layers Walsh-Hadamard (the last one mean-field), MC dropout after
    the convolutions. Not in Table 5.2 (another seed).

All fit with Adam (``--lr``, default 1e-3), minibatches of ``--batch-size``
(128), exactly ``--epochs`` epochs (20; the stopping rule off), float32,
``random_state=0``, and predict with ``--n-mc-predict`` (30) weight draws
(the ensembles: their members, exactly). Nothing is tuned. The fit time is
wall clock, after an untimed one-epoch fit of the same model on 256 rows
(the one-off costs of the first call).

Warnings of the fit (the collapse guards' ``ConvergenceWarning``: a
posterior left at its prior, or Bayes by GAN's discriminators far below
the nearest-neighbour KL) are recorded per model, not silenced; the
stopping rule's "maximum number of epochs reached" is expected here and
left out.

Measured per model, on the 1,000 test images: the error (%), the negative
log-likelihood (``sklearn.metrics.log_loss``, nats per image), the top-label
expected calibration error (``skbayes.metrics.expected_calibration_error``,
15 equal-width bins), the mean predictive entropy and mutual information
(``predict_uncertainty``), the fit time. For MC dropout (and mean-field VI)
also the *mean pass*, one deterministic pass through the network with the
noise off (``module_["network"](x, sample=False)``): for dropout this is
standard dropout's weight scaling (inverted dropout: the units are left
as they are), which Gal (2016, section 3.2.7 and section 4.4) finds worse
than MC dropout when dropout follows convolutions; for mean-field VI it is
the posterior-mean network.

The rotated digit (Gal & Ghahramani, "Dropout as a Bayesian approximation",
ICML 2016, Fig. 4, there for dropout LeNet on MNIST): the first
test image of class ``--digit`` (default 1), rotated by 0, 15, ..., 180
degrees (``scipy.ndimage.rotate``, bilinear, same 28 x 28 frame); per model
and angle the predictive entropy (total uncertainty), the mutual information
between the prediction and the weights (epistemic; BALD) and the predicted
class, plotted against the angle in ``doc/images/mnist_rotated_digit.png``
(``--figure``).

How it differs from seed 004's Table 5.2
----------------------------------------
Table 5.2 trains this network on all 60,000 MNIST training images and
tests on the 10,000 test images (errors 0.47-1.12 %); here 4,000 training
images (15x fewer), 1,000 test images (one error is 0.1 %; the standard
error of an error of 2 % is about 0.45 %) and a short, fixed epoch budget.
Compare the models with each other, not with Table 5.2: the second table
puts each method's gap to MC dropout beside the gap in Table 5.2 (to the
thesis's own dropout run, 0.89 %; BbB, MNF and BbH there are Pawlowski et
al.'s numbers, whose dropout had 0.47 %).

How to run
----------
::

    OMP_NUM_THREADS=1 python examples/benchmarks/mnist_cnn.py --threads 1      # a few minutes on one core
    python examples/benchmarks/mnist_cnn.py --quick --threads 1                # smoke run: 1 epoch, 500 rows
    python examples/benchmarks/mnist_cnn.py --device cuda --epochs 50 --tag cuda_50epochs
    python examples/benchmarks/mnist_cnn.py --methods MeanFieldVI --tag mfvi   # then --merge the JSON files

Outputs ``examples/benchmarks/results/mnist/mnist_cnn_<tag>.{json,md}`` (tag
``full``, ``quick`` with ``--quick``, or ``--tag``) and the figure
(``doc/images/mnist_rotated_digit.png`` for the tag ``full``, else
``mnist_cnn_<tag>_rotated_digit.png`` beside the results).
"""

import json
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import log_loss
from torch import nn

from skbayes import BayesianMLPClassifier
from skbayes.inference import MNF, WHVI, BayesByGAN, BayesByHypernet, DeepEnsemble, MCDropout, MeanFieldVI
from skbayes.metrics import expected_calibration_error
from skbayes.nn.networks import BayesianModuleNetwork

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    ROOT, environment, limit_threads, load_mnist, output_paths, print_written, registry_parser,
    results_dir, rotated, run_saving, select_methods, with_prediction_draws, write_atomic,
)

ANGLES = list(range(0, 181, 15))
MODEL_ORDER = (
    "MAP", "MCDropout-all", "MCDropout-dense", "MeanFieldVI", "MeanFieldVI-iblm", "DeepEnsemble", "MNF",
    "BayesByHypernet", "BayesByGAN", "WHVI",
)
#: Seed 004's Table 5.2 (test error %, 60,000/10,000 images), by the model here that runs the same method.
TABLE_5_2 = {
    "MCDropout-all": ("Dropout", 0.89), "MeanFieldVI": ("BbB*", 0.72), "MNF": ("MNF*", 0.63),
    "BayesByHypernet": ("BbH*", 0.56), "BayesByGAN": ("BbG", 1.12),
}
IMAGE_SHAPE = (1, 28, 28)
WARM_UP_ROWS = 256


class LeNet(nn.Module):
    """The LeNet-like CNN of seed 004's Table 5.1 (Killingberg), from plain torch layers.

    conv(k x k, c1) - ReLU - maxpool(2) - conv(k x k, c2) - ReLU - maxpool(2)
    - flatten - dense(n_hidden) - ReLU - dense(n_outputs); no padding,
    stride 1. With the defaults on 28 x 28 images: 6 x 24 x 24, 6 x 12 x 12,
    16 x 8 x 8, 16 x 4 x 4 = 256 features, 256 hidden units, 10 logits
    (70,934 parameters).

    Parameters
    ----------
    input_shape : tuple of int, default=(1, 28, 28)
        (channels, height, width) of one image.
    n_outputs : int, default=10
        Number of classes (logits out).
    channels : tuple of two int, default=(6, 16)
        Output channels of the two convolutions.
    kernel_size : int, default=5
    n_hidden : int, default=256
        Width of the dense hidden layer.

    Raises
    ------
    ValueError
        If the images are too small for the two convolutions and poolings.
    """

    def __init__(self, input_shape=IMAGE_SHAPE, n_outputs=10, channels=(6, 16), kernel_size=5, n_hidden=256):
        super().__init__()
        in_channels, height, width = input_shape
        c1, c2 = channels

        def side(n):
            return ((n - kernel_size + 1) // 2 - kernel_size + 1) // 2

        if side(height) < 1 or side(width) < 1:
            raise ValueError(f"Images of {height} x {width} are too small for two {kernel_size}x{kernel_size} "
                             "convolutions and poolings.")
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, c1, kernel_size), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c1, c2, kernel_size), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(),
        )
        self.classifier = nn.Sequential(
            nn.Linear(c2 * side(height) * side(width), n_hidden), nn.ReLU(), nn.Linear(n_hidden, n_outputs),
        )

    def forward(self, x):
        """Logits of shape (B, n_outputs) for images x of shape (B, *input_shape)."""
        return self.classifier(self.features(x))


def models(args):
    """``{name: (inference, description)}`` of the models."""
    out = {
        "MAP": (DeepEnsemble(n_estimators=1),
                "deterministic CNN: DeepEnsemble(n_estimators=1), one MAP network (N(0, 1) prior as weight decay)"),
        "MCDropout-all": (MCDropout(dropout_rate=args.dropout_rate, placement="all"),
                          "dropout after every convolution (before pooling) and before the last dense layer "
                          "(Gal's lenet-all)"),
        "MCDropout-dense": (MCDropout(dropout_rate=args.dropout_rate, placement="dense"),
                            "dropout before the dense layers only"),
        "MeanFieldVI": (MeanFieldVI(), "factorised Gaussian q over every kernel, weight and bias"),
        "MeanFieldVI-iblm": (MeanFieldVI(init="iblm"),
                             "the same, q initialised by I-BLM (convolutions on their input patches)"),
        "DeepEnsemble": (DeepEnsemble(n_estimators=args.n_estimators),
                         f"{args.n_estimators} MAP networks, independent initialisations"),
        "MNF": (MNF(), "multiplicative normalising flows: one z per input unit / feature map, 2 planar flows"),
        "BayesByHypernet": (BayesByHypernet(), "weights and kernels generated slice by slice, nearest-neighbour KL"),
        "BayesByGAN": (BayesByGAN(), "the same generators, the KL by one discriminator per layer"),
        "WHVI": (WHVI(), "WHVI on the first dense layer, mean-field last layer, MC dropout (0.25) after the convolutions"),
        # diagnostic variants (not in the default run): Bayes by Hypernet with the KL weight near 0 throughout
        # (a warm-up far longer than the run), and with 20 draws per step for the likelihood and the KL estimate
        "BayesByHypernet-kl-off": (BayesByHypernet(kl_warmup_epochs=10**6),
                                   "Bayes by Hypernet, KL weight below 2e-5 (kl_warmup_epochs=10**6)"),
        "BayesByHypernet-20-draws": (BayesByHypernet(n_mc_train=20), "Bayes by Hypernet, n_mc_train=20"),
    }
    return out


def mean_pass_proba(model, X, block=1000):
    """Softmax of one pass with the noise off (``network(x, sample=False)``), or None for an ensemble.

    For MC dropout this is standard dropout's weight scaling (inverted
    dropout: the units pass unscaled), for mean-field VI the posterior-mean
    network. Shape (n_samples, n_classes).
    """
    network = model.module_["network"]
    if not isinstance(network, BayesianModuleNetwork):
        return None
    dtype = next(network.parameters()).dtype
    parts = []
    with torch.no_grad():
        for start in range(0, len(X), block):
            x = torch.as_tensor(X[start:start + block], dtype=dtype, device=model.device_)
            parts.append(torch.softmax(network(x, sample=False), dim=-1).cpu().numpy())
    return np.concatenate(parts).astype(np.float64)


def scores(model, y, proba):
    """Error (%), NLL (nats per image) and top-label ECE (15 bins) of class probabilities ``proba``."""
    proba = proba / proba.sum(1, keepdims=True)  # float32 round-off
    return {
        "test_error_pct": 100.0 * float(np.mean(model.classes_[proba.argmax(1)] != y)),
        "nll": float(log_loss(y, proba, labels=model.classes_)),
        "ece": float(expected_calibration_error(y, proba, labels=model.classes_)),
    }


def evaluate(model, X_test, y_test, digit):
    """Test-set scores, the mean pass's scores and the rotated digit's entropy, MI and class per angle."""
    out = model.predict_uncertainty(X_test)
    row = {**scores(model, y_test, out.proba),
           "entropy_test": float(out.predictive_entropy.mean()),
           "mutual_information_test": float(out.mutual_information.mean())}
    mean_pass = mean_pass_proba(model, X_test)
    row["mean_pass"] = None if mean_pass is None else scores(model, y_test, mean_pass)
    images = np.concatenate([rotated(digit[None], angle) for angle in ANGLES])
    rot = model.predict_uncertainty(images)
    row["rotated_digit"] = {
        angle: {"entropy": float(rot.predictive_entropy[i]), "mutual_information": float(rot.mutual_information[i]),
                "predicted_class": int(model.classes_[rot.proba[i].argmax()]),
                "max_probability": float(rot.proba[i].max())}
        for i, angle in enumerate(ANGLES)
    }
    return row


def machine(device):
    """The machine in words: platform, CPUs and, on CUDA, the GPU."""
    text = f"{platform.platform()}, {os.cpu_count()} CPUs"
    if str(device).startswith("cuda") and torch.cuda.is_available():
        text += f", {torch.cuda.get_device_name(torch.device(device))}"
    return text


def header(report):
    """The first lines of the Markdown: command, commit, machine, threads, dates and load average of each run."""
    runs = report.get("merged_from") or [{"file": None, "environment": report["environment"]}]
    lines = []
    for run in runs:
        env = run["environment"]
        command = " ".join(Path(env["command"][0]).name if i == 0 else a for i, a in enumerate(env["command"]))
        prefix = f"Run {run['file']} ({', '.join(run['methods'])}): " if run["file"] else ""
        lines.append(
            f"{prefix}`{command}`; git {(env.get('git_commit') or '?')[:7]}; machine: {env.get('machine', '?')}; "
            f"{env.get('torch_num_threads', '?')} torch thread(s); {env.get('started', '?')} to "
            f"{env.get('finished', '?')}; load average {env.get('loadavg_start', '?')} at start, "
            f"{env.get('loadavg_end', '?')} at end."
        )
    return lines


def markdown(report):
    s = report["settings"]
    angles = s["angles"]
    lines = header(report) + [
        "",
        f"MNIST, {s['n_train']} training / {s['n_test']} test images (stratified, random_state=0); seed 004's "
        f"LeNet-like CNN (Table 5.1: conv 5x5x6, pool, conv 5x5x16, pool, dense {s['n_hidden']}, 10); "
        f"{s['epochs']} epoch(s), batch {s['batch_size']}, Adam {s['learning_rate']}, dropout rate "
        f"{s['dropout_rate']}, {s['n_mc_predict']} draws per prediction, {s['dtype']}, device {s['device']}. "
        "Error, NLL (nats per image) and ECE (15 bins) on the test images; H and MI: mean predictive entropy and "
        "mutual information (nats) on them. Mean pass: one pass with the noise off (for dropout: standard "
        "dropout's weight scaling; for mean-field VI: the posterior means). MAP is DeepEnsemble(n_estimators=1).",
        "",
        "| model | error % | NLL | ECE | mean pass error % | mean pass NLL | H | MI | fit s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in report["methods"].items():
        mp = r["mean_pass"]
        mean_cols = f"{mp['test_error_pct']:.1f} | {mp['nll']:.3f}" if mp else "— | —"
        lines.append(f"| {name} | {r['test_error_pct']:.1f} | {r['nll']:.3f} | {r['ece']:.3f} | {mean_cols} "
                     f"| {r['entropy_test']:.3f} | {r['mutual_information_test']:.3f} | {r['fit_time_s']:.1f} |")
    warned = {name: r["fit_warnings"] for name, r in report["methods"].items() if r.get("fit_warnings")}
    recorded = [name for name, r in report["methods"].items() if "fit_warnings" in r]
    if recorded:
        lines += ["", "Warnings of the fit (recorded for " + ", ".join(recorded) + "): "
                  + ("; ".join(f"{name}: " + " / ".join(w) for name, w in warned.items()) if warned else "none") + "."]
    diagnosed = {name: r["diagnostics"] for name, r in report["methods"].items() if r.get("diagnostics")}
    if diagnosed:
        lines += ["", "Fit diagnostics (`inference_diagnostics_`; KL estimates in nats over the whole network): "
                  + "; ".join(f"{name}: " + ", ".join(f"{k} {v:.4g}" for k, v in d.items())
                              for name, d in diagnosed.items()) + "."]
    lines += table_5_2(report)
    lines += [
        "",
        f"Test image {s['digit_index']} (a {s['digit']}) rotated by the angle: predictive entropy H, mutual "
        "information MI (nats) and predicted class.",
        "",
        "| model | | " + " | ".join(f"{a}°" for a in angles) + " |",
        "|---|---|" + "---|" * len(angles),
    ]
    for name, r in report["methods"].items():
        rot = r["rotated_digit"]
        lines.append(f"| {name} | H | " + " | ".join(f"{rot[a]['entropy']:.2f}" for a in angles) + " |")
        lines.append("| | MI | " + " | ".join(f"{rot[a]['mutual_information']:.2f}" for a in angles) + " |")
        lines.append("| | class | " + " | ".join(str(rot[a]["predicted_class"]) for a in angles) + " |")
    if report.get("skipped"):
        lines += ["", "Skipped: " + "; ".join(report["skipped"]) + "."]
    lines.append(f"Complete: {report['complete']}.")
    return "\n".join(lines) + "\n"


def short_warning(message):
    """A guard's warning without the estimator's name, and its first sentence (numbers and advice left out)."""
    return message.split("): ", 1)[-1].split(". ")[0]


def table_5_2(report):
    """Lines of the comparison with seed 004's Table 5.2: each method's error and gap to MC dropout, ours and the thesis's."""
    methods = report["methods"]
    if "MCDropout-all" not in methods:
        return []
    ours_dropout = methods["MCDropout-all"]["test_error_pct"]
    thesis_dropout = TABLE_5_2["MCDropout-all"][1]
    lines = [
        "",
        f"Seed 004's Table 5.2 beside this run: test error (%) and the gap to MC dropout (points; here "
        f"MCDropout-all, {ours_dropout:.1f} %; in the thesis its own dropout run, {thesis_dropout:.2f} %). "
        "* Table 5.2 quotes Pawlowski et al. 2017 (whose dropout had 0.47 %). Thesis: 60,000 training and 10,000 "
        f"test images; here {report['settings']['n_train']} and {report['settings']['n_test']}.",
        "",
        "| model | error % | gap to MC dropout | Table 5.2 method | Table 5.2 error % | Table 5.2 gap |",
        "|---|---|---|---|---|---|",
    ]
    for name, (thesis_name, thesis_error) in TABLE_5_2.items():
        if name not in methods:
            continue
        error = methods[name]["test_error_pct"]
        lines.append(f"| {name} | {error:.1f} | {error - ours_dropout:+.1f} | {thesis_name} | {thesis_error:.2f} "
                     f"| {thesis_error - thesis_dropout:+.2f} |")
    return lines


def plot(report, digit, path):
    """Entropy, mutual information and predicted class of each model against the angle, the rotated digit on top."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    angles = report["settings"]["angles"]
    fig = plt.figure(figsize=(9, 8.4))
    grid = fig.add_gridspec(4, len(angles), height_ratios=[0.45, 2, 2, 2], hspace=0.3)
    for i, angle in enumerate(angles):
        ax = fig.add_subplot(grid[0, i])
        ax.imshow(rotated(digit[None], angle).reshape(28, 28), cmap="gray_r", vmin=0, vmax=1)
        ax.set_axis_off()
        ax.set_title(f"{angle}°", fontsize=7)
    panels = [fig.add_subplot(grid[1, :])]
    panels += [fig.add_subplot(grid[k, :], sharex=panels[0]) for k in (2, 3)]
    n = len(report["methods"])
    for j, (name, r) in enumerate(report["methods"].items()):
        rot = r["rotated_digit"]
        style = {"marker": "o", "markersize": 3, "label": name}
        panels[0].plot(angles, [rot[a]["entropy"] for a in angles], **style)
        panels[1].plot(angles, [rot[a]["mutual_information"] for a in angles], **style)
        offset = (j - (n - 1) / 2) * 0.12  # keep the class markers of the models apart
        panels[2].plot(angles, [rot[a]["predicted_class"] + offset for a in angles], linestyle="none", **style)
    panels[0].axhline(np.log(10), color="grey", linewidth=0.8, linestyle=":")
    panels[0].set_ylabel("predictive entropy (nats)")
    panels[1].set_ylabel("mutual information (nats)")
    panels[2].set_ylabel("predicted class")
    panels[2].set_yticks(range(10))
    panels[2].set_xlabel("rotation (degrees)")
    panels[2].set_xticks(angles)
    for ax in panels:
        ax.grid(alpha=0.3)
    panels[0].legend(fontsize=8, ncol=min(n, 3))
    s = report["settings"]
    fig.suptitle(f"LeNet on {s['n_train']} MNIST digits, {s['epochs']} epoch(s): a rotated {s['digit']}", fontsize=11, y=0.94)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def parse_args(argv=None):
    results = results_dir("mnist")
    parser = registry_parser(__doc__, "Smoke run: 1 epoch on 500 training rows, 5 draws, 2 ensemble members.", results)
    for action in parser._actions:
        if action.dest == "methods":
            action.help = f"Models to run, case-insensitive: {', '.join(MODEL_ORDER)} (default: all)."
    parser.add_argument("--epochs", type=int, default=None, help="Epochs per model (default 20; quick 1).")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate (default 1e-3).")
    parser.add_argument("--dropout-rate", type=float, default=0.25, help="Dropout rate of MC dropout (default 0.25).")
    parser.add_argument("--n-mc-predict", type=int, default=None, help="Draws per prediction (default 30; quick 5).")
    parser.add_argument("--n-estimators", type=int, default=None, help="Ensemble members (default 5; quick 2).")
    parser.add_argument("--n-train", type=int, default=None, help="Training rows used (default all 4,000; quick 500).")
    parser.add_argument("--digit", type=int, default=1, help="Class of the rotated test digit (default 1).")
    parser.add_argument("--figure", default=None, help="Path of the figure (default: see the module docstring).")
    parser.add_argument("--data-home", default=None, help="Folder holding mnist/ (default: $SKBAYES_DATA_HOME/mnist/ if it exists, else the copy bundled with skbayes).")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="Torch device (default: cpu).")
    parser.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                        help="Merge the models of earlier runs (same settings) into one table and figure under --tag; "
                             "runs nothing.")
    args = parser.parse_args(argv)
    args.epochs = args.epochs or (1 if args.quick else 20)
    args.n_mc_predict = args.n_mc_predict or (5 if args.quick else 30)
    args.n_estimators = args.n_estimators or (2 if args.quick else 5)
    args.n_train = args.n_train or (500 if args.quick else None)
    args.tag = args.tag or ("quick" if args.quick else "full")
    return args


def figure_path(args):
    if args.figure:
        return Path(args.figure)
    if args.tag == "full":
        return ROOT / "doc" / "images" / "mnist_rotated_digit.png"
    return Path(args.output_dir) / f"mnist_cnn_{args.tag}_rotated_digit.png"


def the_digit(X_test, y_test, label):
    """Index and pixels (784,) of the first test image of class ``label``."""
    index = int(np.flatnonzero(y_test == label)[0])
    return index, X_test[index]


def with_int_angles(row):
    return {**row, "rotated_digit": {int(a): v for a, v in row["rotated_digit"].items()}}  # JSON keys are str


def merge(paths, json_path, md_path, fig_path, digit):
    """One report (table and figure) of the models of several runs with the same settings.

    Raises ValueError if the runs' settings differ or a model appears twice.
    """
    runs = [json.loads(Path(p).read_text()) for p in paths]
    settings = runs[0]["settings"]
    merged = {"settings": settings, "merged_from": [], "complete": all(r["complete"] for r in runs),
              "skipped": [], "methods": {}}
    for path, run in zip(paths, runs):
        if run["settings"] != settings:
            raise ValueError(f"{path} has other settings than {paths[0]}")
        for name, row in run["methods"].items():
            if name in merged["methods"]:
                raise ValueError(f"{name} is in more than one run")
            merged["methods"][name] = with_int_angles(row)
        merged["merged_from"].append({"file": Path(path).name, "methods": list(run["methods"]),
                                      "environment": run["environment"]})
    rank = {name: i for i, name in enumerate(MODEL_ORDER)}
    merged["methods"] = dict(sorted(merged["methods"].items(), key=lambda item: rank.get(item[0], len(rank))))
    merged["skipped"] = sorted({s for r in runs for s in r.get("skipped", [])
                                if s.split(" ")[0] not in merged["methods"]})
    write_atomic(json_path, json.dumps(merged, indent=1))
    write_atomic(md_path, markdown(merged))
    plot(merged, digit, fig_path)


def main(argv=None):
    args = parse_args(argv)
    X_train, X_test, y_train, y_test, _ = load_mnist(args.data_home)
    digit_index, digit = the_digit(X_test, y_test, args.digit)
    json_path, md_path = output_paths(args, "mnist_cnn")
    fig_path = figure_path(args)
    fig_path.parent.mkdir(parents=True, exist_ok=True)
    if args.merge:
        merge(args.merge, json_path, md_path, fig_path, digit)
        print_written(json_path, md_path)
        print(f"Wrote {fig_path}")
        return 0
    limit_threads(args.threads)
    if args.n_train is not None:
        X_train, y_train = X_train[: args.n_train], y_train[: args.n_train]
    chosen = select_methods(models(args), args.methods or list(MODEL_ORDER))
    env = environment()
    env["machine"] = machine(args.device)
    report = {
        "settings": {"n_train": len(y_train), "n_test": len(y_test), "epochs": args.epochs,
                     "batch_size": args.batch_size, "learning_rate": args.lr, "dropout_rate": args.dropout_rate,
                     "n_mc_predict": args.n_mc_predict, "n_estimators": args.n_estimators, "n_hidden": 256,
                     "dtype": "float32", "device": args.device, "angles": ANGLES, "digit": args.digit,
                     "digit_index": digit_index, "quick": args.quick},
        "environment": env, "complete": False,
        "skipped": [],
        "methods": {},
    }
    print(f"torch threads: {torch.get_num_threads()}; load average: {env['loadavg_start']}; "
          f"{len(y_train)} training images; models: {', '.join(chosen)}", flush=True)

    def save():
        write_atomic(json_path, json.dumps(report, indent=1))

    def estimator(inference, epochs):
        # the training loop's settings are the inference method's: exactly `epochs` epochs, no early stopping;
        # so are the draws at prediction (of the methods that draw weights: the ensembles predict with all members)
        method = clone(inference).set_params(learning_rate_init=args.lr, max_iter=epochs, early_stopping=False,
                                             n_iter_no_change=10**9)
        return BayesianMLPClassifier(
            module=LeNet, input_shape=IMAGE_SHAPE, inference=with_prediction_draws(method, args.n_mc_predict),
            prior_scale=1.0, batch_size=args.batch_size, random_state=0, device=args.device, dtype="float32",
        )

    def body():
        for name, (inference, description) in chosen.items():
            model = estimator(inference, args.epochs)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                # untimed: one epoch on a few rows takes the one-off costs (kernels, vmap, CUDA) out of fit_time
                estimator(inference, 1).fit(X_train[:WARM_UP_ROWS], y_train[:WARM_UP_ROWS])
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                start = time.perf_counter()
                model.fit(X_train, y_train)
                fit_time = time.perf_counter() - start
            # the fixed epoch budget's "not converged yet" is expected; the guards' warnings are not
            fit_warnings = sorted({short_warning(str(w.message)) for w in caught
                                   if issubclass(w.category, ConvergenceWarning) and "maximum number" not in str(w.message)})
            start = time.perf_counter()
            row = {"description": description, "inference": repr(inference), "epochs_run": int(model.n_iter_),
                   "final_loss": float(model.loss_curve_[-1]), "fit_time_s": fit_time, "fit_warnings": fit_warnings,
                   "diagnostics": {k: float(v) for k, v in getattr(model, "inference_diagnostics_", {}).items()
                                   if isinstance(v, (int, float))},
                   **evaluate(model, X_test, y_test, digit)}
            row["evaluate_time_s"] = time.perf_counter() - start
            report["methods"][name] = row
            mp = row["mean_pass"]
            print(f"  {name:<16} error {row['test_error_pct']:.1f} %  NLL {row['nll']:.3f}  ECE {row['ece']:.3f}  "
                  + (f"mean pass {mp['test_error_pct']:.1f} % / {mp['nll']:.3f}  " if mp else "")
                  + f"fit {fit_time:.1f} s  eval {row['evaluate_time_s']:.1f} s", flush=True)
            save()

    def finish():
        if report["methods"]:
            write_atomic(md_path, markdown(report))
            plot(report, digit, fig_path)

    run_saving(report, body, save, finish)
    print_written(json_path, md_path)
    if report["methods"]:
        print(f"Wrote {fig_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
