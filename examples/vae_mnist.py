"""Bernoulli VAE on binarised MNIST: test ELBO, IWAE bound and epoch time.

What it does
------------
Loads the 10,000 unlabelled MNIST images of 28 x 28 uint8
(``skbayes.datasets.load_mnist("unlabeled")``, bundled with skbayes), takes the first 8,000 images for training and the
last 2,000 for testing, scales them to [0, 1] and binarises at 0.5. It fits
``VAE(n_components=20, hidden_layer_sizes=(400,), likelihood="bernoulli",
batch_size=128, learning_rate_init=1e-3)`` (784-400-20-400-784, ReLU, Adam,
one latent draw per image; the architecture of Kingma & Welling 2014 with the
training settings of Cinelli 2019, section 5) for ``--epochs`` epochs, and
reports, in nats per image,

* the train and test ELBO (``score``, 128 quasi-Monte-Carlo latent points);
* the test importance-weighted bound (``log_likelihood_iwae``, Burda et al.
  2016) with ``--iwae-k`` samples, on the first ``--n-test`` test images.

Then it times epochs of the estimator against a bare PyTorch loop of the same
model and objective (same layers, Bernoulli likelihood with logits, analytic
KL, Adam, batch 128, a fresh permutation per epoch, float32), run alternately
(estimator, bare, estimator, bare, ...) ``--timing-repeats`` times with
``--timing-epochs`` epochs each, and prints the medians and their ratio (the
estimator's overhead; target < 10%). Finally it saves a PNG with 64 samples
and 16 test images beside their reconstructions when matplotlib is available.

How to run
----------
::

    python examples/vae_mnist.py
    python examples/vae_mnist.py --data-home /path/to/data --epochs 30 --iwae-k 1000
    python examples/vae_mnist.py --epochs 1 --iwae-k 10 --n-test 200   # smoke test

``--data-home`` (else ``$SKBAYES_DATA_HOME``) may name a folder holding
``mnist/mnist_test_10k.npz`` to read instead of the bundled copy. Torch uses
``--threads`` threads (default 1, so that timings are stable on a shared
machine).
"""

import argparse
import os
import statistics
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning

from skbayes import VAE
from skbayes.datasets import load_mnist

N_TRAIN = 8000
HIDDEN = 400
LATENT = 20
BATCH = 128
LEARNING_RATE = 1e-3


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-home", default=None, help="Folder holding mnist/ (default: $SKBAYES_DATA_HOME/mnist/ if it exists, else the bundled copy).")
    parser.add_argument("--epochs", type=int, default=30, help="Training epochs (default: 30).")
    parser.add_argument("--iwae-k", type=int, default=1000, help="Importance samples of the IWAE bound (default: 1000).")
    parser.add_argument("--n-test", type=int, default=2000, help="Test images for the IWAE bound (default: all 2000).")
    parser.add_argument("--timing-epochs", type=int, default=2, help="Epochs per timed run (default: 2).")
    parser.add_argument("--timing-repeats", type=int, default=3, help="Timed runs of each loop (default: 3; 0 skips).")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default: 1).")
    parser.add_argument("--device", default="cpu", help="Torch device (default: cpu).")
    parser.add_argument("--output-dir", default=str(Path(__file__).parent / "output"),
                        help="Where the PNG goes (default: examples/output/).")
    args = parser.parse_args(argv)
    for name in ("epochs", "iwae_k", "n_test", "timing_epochs", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    return args


def load_binarised_mnist(data_home=None):
    """The first 8,000 and the last 2,000 unlabelled images, binarised at 0.5, as float32 rows of 784 pixels."""
    home = data_home or os.environ.get("SKBAYES_DATA_HOME")
    if home and (data_home or (Path(home) / "mnist").is_dir()):
        images = np.load(Path(home) / "mnist" / "mnist_test_10k.npz")["data"]
    else:
        images = load_mnist("unlabeled").images
    images = images.reshape(-1, 28 * 28).astype(np.float32) / 255.0
    X = (images > 0.5).astype(np.float32)
    return X[:N_TRAIN], X[N_TRAIN:]


def make_vae(epochs, device, random_state=0):
    return VAE(
        n_components=LATENT,
        hidden_layer_sizes=(HIDDEN,),
        likelihood="bernoulli",
        batch_size=BATCH,
        learning_rate_init=LEARNING_RATE,
        max_iter=epochs,
        n_iter_no_change=10**9,  # run exactly `epochs` epochs
        random_state=random_state,
        device=device,
    )


def fit_quietly(model, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X)


def time_estimator(X, epochs, device):
    start = time.perf_counter()
    model = fit_quietly(make_vae(epochs, device), X)
    elapsed = time.perf_counter() - start
    assert model.n_iter_ == epochs
    return elapsed / epochs


def time_bare_torch(X, epochs, device):
    """The same model and objective written as a plain PyTorch loop."""
    start = time.perf_counter()
    torch.manual_seed(0)
    x_all = torch.tensor(X, device=device)
    d = x_all.shape[1]
    encoder = torch.nn.Sequential(torch.nn.Linear(d, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, 2 * LATENT))
    decoder = torch.nn.Sequential(torch.nn.Linear(LATENT, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, d))
    encoder.to(device), decoder.to(device)
    optimizer = torch.optim.Adam([*encoder.parameters(), *decoder.parameters()], lr=LEARNING_RATE)
    generator = torch.Generator().manual_seed(0)
    n = len(x_all)
    for _ in range(epochs):
        perm = torch.randperm(n, generator=generator).to(device)
        total = 0.0
        for i in range(0, n, BATCH):
            x = x_all[perm[i : i + BATCH]]
            optimizer.zero_grad(set_to_none=True)
            mu, raw = encoder(x).chunk(2, dim=-1)
            sigma = torch.nn.functional.softplus(raw) + 1e-6
            z = mu + sigma * torch.randn_like(mu)
            log_lik = -torch.nn.functional.binary_cross_entropy_with_logits(decoder(z), x, reduction="none").sum(-1)
            kl = (-torch.log(sigma) + 0.5 * (mu**2 + sigma**2 - 1)).sum(-1)
            loss = (kl - log_lik).mean()
            loss.backward()
            optimizer.step()
            total += loss.detach() * len(x)
        float(total)  # one sync per epoch, as the estimator's loop does
    return (time.perf_counter() - start) / epochs


def save_figure(model, X_test, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no figure.")
        return
    samples = model.sample(64, random_state=0).reshape(8, 8, 28, 28)
    originals = X_test[:16]
    reconstructions = model.inverse_transform(model.transform(originals))
    fig, axes = plt.subplots(1, 2, figsize=(10, 5.4))
    grid = samples.transpose(0, 2, 1, 3).reshape(8 * 28, 8 * 28)
    axes[0].imshow(grid, cmap="gray_r", vmin=0, vmax=1)
    axes[0].set_title("64 samples (decoder means at z ~ N(0, I))")
    pairs = np.stack([originals.reshape(16, 28, 28), reconstructions.reshape(16, 28, 28)], axis=1)
    pairs = pairs.reshape(4, 4, 2, 28, 28).transpose(0, 3, 1, 2, 4).reshape(4 * 28, 4 * 2 * 28)
    axes[1].imshow(pairs, cmap="gray_r", vmin=0, vmax=1)
    axes[1].set_title("16 test images | reconstructions")
    for ax in axes:
        ax.axis("off")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"saved {path}")


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    X_train, X_test = load_binarised_mnist(args.data_home)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, device {args.device}, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"train {X_train.shape}, test {X_test.shape}, binarised at 0.5")

    start = time.perf_counter()
    model = fit_quietly(make_vae(args.epochs, args.device), X_train)
    fit_time = time.perf_counter() - start
    print(f"fit: {model.n_iter_} epochs in {fit_time:.1f} s; last epoch loss {model.loss_curve_[-1]:.2f} nats/image")
    n_test = min(args.n_test, len(X_test))
    start = time.perf_counter()
    iwae = model.log_likelihood_iwae(X_test[:n_test], n_importance=args.iwae_k).mean()
    iwae_time = time.perf_counter() - start
    print(f"train ELBO            {model.score(X_train):9.2f} nats/image")
    print(f"test ELBO             {model.score(X_test):9.2f} nats/image ({len(X_test)} images)")
    print(f"test ELBO (subset)    {model.score(X_test[:n_test]):9.2f} nats/image ({n_test} images)")
    print(f"test IWAE, K={args.iwae_k:<6d}  {iwae:9.2f} nats/image ({n_test} images, {iwae_time:.1f} s)")

    if args.timing_repeats:
        times = {"VAE estimator": [], "bare PyTorch": []}
        time_estimator(X_train, 1, args.device), time_bare_torch(X_train, 1, args.device)  # warm-up
        for _ in range(args.timing_repeats):
            times["VAE estimator"].append(time_estimator(X_train, args.timing_epochs, args.device))
            times["bare PyTorch"].append(time_bare_torch(X_train, args.timing_epochs, args.device))
        medians = {name: statistics.median(t) for name, t in times.items()}
        for name, t in times.items():
            print(f"{name:14s} s/epoch: median {medians[name]:.3f}, runs {', '.join(f'{v:.3f}' for v in t)}")
        overhead = medians["VAE estimator"] / medians["bare PyTorch"] - 1
        print(f"estimator overhead: {100 * overhead:+.1f}% (target < 10%)")
    print(f"load average at end {os.getloadavg()[0]:.2f}")
    save_figure(model, X_test, Path(args.output_dir) / "vae_mnist.png")


if __name__ == "__main__":
    main()
