"""Convolutional VAE against the MLP VAE on 10,000 unlabeled MNIST images: test ELBO and fit time.

What it does
------------
Loads ``mnist/mnist_test_10k.npz`` (key ``data``, the 10,000 MNIST test
images, 28 x 28 uint8, no labels; ``skbayes.datasets.load_mnist("unlabeled")``,
the copy bundled with skbayes, or ``--data-home``/``$SKBAYES_DATA_HOME`` holding ``mnist/``), takes
the first 8,000 images for training and the last 2,000 for testing (the
split of ``examples/vae_mnist.py``), scales them to [0, 1] and binarises at
0.5, as rows of 784 pixels (float32).

Two Bernoulli VAEs with the same latent dimension (``--n-components``,
default 20), the same Adam (1e-3, batch 128), one latent draw per image,
``random_state=0``, and the same number of epochs (``--epochs``, the
stopping rule off) are fitted on the training images:

* ``MLP``: ``VAE(hidden_layer_sizes=(400,))``, 784-400-20-400-784 ReLU
  (Kingma & Welling 2014; ``examples/vae_mnist.py``);
* ``conv``: ``VAE(encoder="conv", decoder="conv", input_shape=(1, 28, 28))``,
  stride-2 4x4 convolutions with ``--channels`` (default 32, 64: 28 -> 14 -> 7),
  a linear head to the latent means and standard deviations, a linear layer
  back to 64 x 7 x 7 maps and transposed convolutions 64 -> 32 -> 1 (the
  convolutional VAE of Bruno 2022, section 4.4, without batch
  normalisation and with two of its five layers, for 28 x 28 images).

Reported per model, in nats per image: the test ELBO (``score``, 128
quasi-Monte-Carlo latent points; higher is better), the mean training loss
of the last epoch (the negative ELBO estimate of training, one draw per
image) and, with ``--iwae-k K``, the importance-weighted bound on the first
``--n-iwae`` test images; the fit time and seconds per epoch (wall clock,
one fit at a time) and the number of parameters.

How to run
----------
::

    python examples/benchmarks/vae_conv_mnist.py
    python examples/benchmarks/vae_conv_mnist.py --quick              # smoke run, under a minute
    python examples/benchmarks/vae_conv_mnist.py --device cuda --epochs 100 --iwae-k 1000 --tag cuda_100ep

Defaults: 20 epochs, one torch thread, the CPU; a few minutes on a 2-core
CPU (the convolutional VAE takes most of it). Outputs
``examples/benchmarks/results/vae/vae_conv_mnist_<tag>.{json,md}`` (tag ``full``,
``quick`` with ``--quick``, or ``--tag``).
"""

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning

from skbayes import VAE

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    environment, limit_threads, mnist_images, output_paths, print_written, run_saving, write_atomic, results_dir,
)

ROOT = Path(__file__).resolve().parents[2]
N_TRAIN = 8000
IMAGE = (1, 28, 28)
QUICK = {"n_train": 1000, "n_test": 500, "epochs": 2}


def load_binarised_mnist(data_home=None):
    """The 8,000 / 2,000 split of the 10,000 unlabelled images, binarised at 0.5, as float32 rows of 784 pixels."""
    images = mnist_images(data_home)[2]
    X = (images.reshape(len(images), -1).astype(np.float32) / 255.0 > 0.5).astype(np.float32)
    return X[:N_TRAIN], X[N_TRAIN:]


def make_models(args):
    """The two VAEs, by name, with everything but their networks in common."""
    common = {
        "n_components": args.n_components, "likelihood": "bernoulli", "batch_size": 128,
        "learning_rate_init": 1e-3, "max_iter": args.epochs, "n_iter_no_change": 10**9,  # exactly `epochs` epochs
        "random_state": 0, "device": args.device,
    }
    conv = {
        "encoder": "conv", "decoder": "conv", "input_shape": IMAGE,
        "encoder_params": {"channels": args.channels}, "decoder_params": {"channels": args.channels[::-1]},
    }
    return {"MLP": VAE(hidden_layer_sizes=(400,), **common), "conv": VAE(**conv, **common)}


def architecture(name, args):
    if name == "MLP":
        return f"784-400-{args.n_components}-400-784"
    down = " -> ".join(str(c) for c in args.channels)
    return f"conv 1 -> {down} (28 -> {28 >> len(args.channels)} px), transposed conv back, k={args.n_components}"


def evaluate(name, model, X_train, X_test, args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        start = time.perf_counter()
        model.fit(X_train)
        fit_time = time.perf_counter() - start
    start = time.perf_counter()
    row = {
        "architecture": architecture(name, args),
        "params": model.get_params(),
        "n_parameters": int(sum(p.numel() for p in model.module_.parameters())),
        "epochs_run": int(model.n_iter_),
        "fit_time_s": fit_time,
        "s_per_epoch": fit_time / model.n_iter_,
        "train_loss_last_epoch": float(model.loss_curve_[-1]),
        "loss_curve": [float(v) for v in model.loss_curve_],
        "test_elbo": model.score(X_test),
    }
    row["score_time_s"] = time.perf_counter() - start
    if args.iwae_k:
        start = time.perf_counter()
        n = min(args.n_iwae, len(X_test))
        row["test_iwae"] = float(model.log_likelihood_iwae(X_test[:n], n_importance=args.iwae_k).mean())
        row["test_elbo_iwae_images"] = model.score(X_test[:n])
        row["iwae_time_s"] = time.perf_counter() - start
    return row


def markdown(report):
    s, env = report["settings"], report["environment"]
    iwae = s["iwae_k"] > 0
    subset = iwae and s["n_iwae"] < s["n_test"]  # then the ELBO of the same images beside the IWAE bound
    lines = [
        f"Binarised MNIST (the 10,000 unlabeled test images at 0.5), {s['n_train']} training / {s['n_test']} test "
        f"images (the first and the last), Bernoulli VAEs with k = {s['n_components']}, Adam 1e-3, batch 128, one "
        f"latent draw per image, {s['epochs']} epochs, random_state=0, {s['dtype']} on {s['device']}. Test ELBO: "
        "`score`, nats per image (128 quasi-Monte-Carlo points; higher is better); train loss: the last epoch's "
        "mean negative ELBO estimate."
        + (f" IWAE: `log_likelihood_iwae`, K = {s['iwae_k']}, on the first {s['n_iwae']} test images." if iwae else ""),
        "",
        "| model | architecture | parameters | fit s | s/epoch | train loss, last epoch | test ELBO |"
        + (f" test ELBO, first {s['n_iwae']} |" if subset else "") + (" test IWAE |" if iwae else ""),
        "|---|---|---:|---:|---:|---:|---:|" + ("---:|" if subset else "") + ("---:|" if iwae else ""),
    ]
    for name, r in report["models"].items():
        lines.append(
            f"| {name} | {r['architecture']} | {r['n_parameters']:,} | {r['fit_time_s']:.1f} | {r['s_per_epoch']:.2f} "
            f"| {r['train_loss_last_epoch']:.2f} | {r['test_elbo']:.2f} |"
            + (f" {r['test_elbo_iwae_images']:.2f} |" if subset else "") + (f" {r['test_iwae']:.2f} |" if iwae else "")
        )
    command = " ".join(["python", *env["command"][1:]])
    lines += [
        "",
        f"Command: `{command}`. Environment: torch {env['torch']}, scikit-learn {env['sklearn']}, skbayes "
        f"{env['skbayes']}, git {env['git_commit']}, {env['torch_num_threads']} torch thread(s), {env['cpu_count']} "
        f"CPUs, load average {env['loadavg_start']} at start, {env.get('loadavg_end')} at end; started "
        f"{env['started']}, finished {env.get('finished')}; complete: {report['complete']}.",
    ]
    return "\n".join(lines) + "\n"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="Smoke run: 1,000 training and 500 test images, 2 epochs.")
    parser.add_argument("--epochs", type=int, default=None, help="Epochs per model (default: 20; quick: 2).")
    parser.add_argument("--n-components", type=int, default=20, help="Latent dimension k (default: 20).")
    parser.add_argument("--channels", default="32,64",
                        help="Channels of the encoder's convolutions, comma-separated (default: 32,64).")
    parser.add_argument("--iwae-k", type=int, default=0, help="Importance samples of the IWAE bound (default: 0, off).")
    parser.add_argument("--n-iwae", type=int, default=2000, help="Test images of the IWAE bound (default: 2000).")
    parser.add_argument("--data-home", default=None,
                        help="Folder holding mnist/ (default: $SKBAYES_DATA_HOME/mnist/ if it exists, else the copy bundled with skbayes).")
    parser.add_argument("--device", default="cpu", help="Torch device (default: cpu).")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default: 1).")
    parser.add_argument("--output-dir", default=str(results_dir("vae")))
    parser.add_argument("--tag", default=None, help="Results file tag (default: full, or quick with --quick).")
    args = parser.parse_args(argv)
    args.epochs = args.epochs or (QUICK["epochs"] if args.quick else 20)
    args.channels = tuple(int(c) for c in args.channels.split(","))
    args.tag = args.tag or ("quick" if args.quick else "full")
    for name in ("epochs", "n_components", "n_iwae", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    limit_threads(args.threads)
    X_train, X_test = load_binarised_mnist(args.data_home)
    if args.quick:
        X_train, X_test = X_train[: QUICK["n_train"]], X_test[: QUICK["n_test"]]
    json_path, md_path = output_paths(args, "vae_conv_mnist")
    report = {
        "settings": {"n_train": len(X_train), "n_test": len(X_test), "n_components": args.n_components,
                     "channels": list(args.channels), "epochs": args.epochs, "iwae_k": args.iwae_k,
                     "n_iwae": min(args.n_iwae, len(X_test)), "dtype": "float32", "device": args.device,
                     "quick": args.quick},
        "environment": environment(), "complete": False, "models": {},
    }
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), device {args.device}, load average "
          f"{report['environment']['loadavg_start']}; train {X_train.shape}, test {X_test.shape}", flush=True)

    def save():
        write_atomic(json_path, json.dumps(report, indent=1, default=str))

    def body():
        for name, model in make_models(args).items():
            row = evaluate(name, model, X_train, X_test, args)
            report["models"][name] = row
            print(f"  {name:<5} {row['n_parameters']:>9,} parameters  fit {row['fit_time_s']:.1f} s "
                  f"({row['s_per_epoch']:.2f} s/epoch)  train loss {row['train_loss_last_epoch']:.2f}  "
                  f"test ELBO {row['test_elbo']:.2f}" + (f"  IWAE {row['test_iwae']:.2f}" if args.iwae_k else ""),
                  flush=True)
            save()

    def finish():
        if report["models"]:
            write_atomic(md_path, markdown(report))

    run_saving(report, body, save, finish)
    print_written(json_path, md_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
