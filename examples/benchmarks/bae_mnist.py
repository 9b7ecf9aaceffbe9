"""The Bayesian autoencoder's DSW-chosen prior against N(0, 1) and against the VAE, on MNIST at equal code size.

What it does
------------
On the repository's MNIST split (4,000 training and 1,000 test images, 784 pixels in [0, 1];
``_common.load_mnist``), for each training size in ``--train-sizes`` (the first rows of the training split),
it fits at code size ``--n-components`` and one hidden layer of ``--hidden`` units:

* ``BAE, DSW prior``: ``BayesianAutoencoder()`` at its defaults (SGHMC under the prior chosen by DSW);
* ``BAE, N(0, 1) prior``: ``BayesianAutoencoder(inference=SGHMC())`` (``prior_scale=1``);
* ``VAE``: ``VAE(likelihood="bernoulli")`` at its defaults with the same code size and hidden layer.

and reports on the test images:

* ``recon_ll``: the reconstruction log-likelihood per image under the continuous Bernoulli (nats; the
  BAE's ``score``; for the VAE, of the test image under the decoder's logits at its encoder's mean code,
  the Bernoulli cross-entropy being no density on [0, 1]);
* ``recon_mse``: the mean squared error of the reconstructions (the BAE's posterior predictive
  ``reconstruct(X)``; the VAE's ``inverse_transform(transform(X))``);
* ``sample_sw``: the sliced 2-Wasserstein distance between 1,000 generated images (``sample``) and the
  1,000 test images, along 2,000 fixed random directions (lower is better);
* ``prior_sw``: for the BAEs, the same distance between 1,000 draws of the prior predictive (at training
  images) and the training images: what the DSW prior minimises;
* the fit time.

It saves a grid of generated images of each model to ``doc/images/bae_samples.png``.

How to run
----------
::

    python examples/benchmarks/bae_mnist.py --threads 2 --out bae_mnist

Writes ``results/decomposition/NAME.json`` and ``NAME.md``.
"""

import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import environment_lines, load_mnist, rows_script, run_saving  # noqa: E402

from skbayes import VAE, BayesianAutoencoder  # noqa: E402
from skbayes.inference import SGHMC  # noqa: E402
from skbayes.nn import ContinuousBernoulliLikelihood, LayerGaussianPrior  # noqa: E402
from skbayes.nn.networks.mlp import forward_with_parameters  # noqa: E402
from skbayes.nn.priors import sliced_wasserstein  # noqa: E402

MODELS = ("BAE, DSW prior", "BAE, N(0, 1) prior", "VAE")
ROOT = Path(__file__).resolve().parents[2]


def add_arguments(parser):
    parser.add_argument("--train-sizes", nargs="*", type=int, default=[500, 4000])
    parser.add_argument("--n-components", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--data-home", default=None)
    parser.add_argument("--no-figure", action="store_true")


def directions(dim, n=2000, seed=0):
    theta = torch.randn(n, dim, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return theta / theta.norm(dim=1, keepdim=True)


def sw(a, b, dirs):
    n = min(len(a), len(b))
    return float(sliced_wasserstein(torch.as_tensor(a[:n], dtype=torch.float64),
                                    torch.as_tensor(b[:n], dtype=torch.float64), dirs))


def prior_predictive_sw(bae, X, dirs, prior_scales=None):
    """The sliced distance between 1,000 prior-predictive draws at training images and 1,000 training images."""
    network = bae.network_.module_["network"]
    sizes = [network.layers[0].in_features, *(layer.out_features for layer in network.layers)]
    prior = LayerGaussianPrior(sizes, weight_scale=1.0, bias_scale=1.0, dtype=torch.float64)
    if prior_scales is not None:
        with torch.no_grad():
            prior.log_weight_scale.copy_(torch.tensor(prior_scales["weight_scale"]).log())
            prior.log_bias_scale.copy_(torch.tensor(prior_scales["bias_scale"]).log())
    generator = torch.Generator().manual_seed(1)
    x = torch.as_tensor(bae.scaler_.transform(X[:1000]), dtype=torch.float64)
    with torch.no_grad():
        draws = []
        for start in range(0, len(x), 100):  # one weight draw per row, in blocks of 100
            block = x[start:start + 100]
            f = forward_with_parameters(block, prior.sample_parameters(len(block), generator), bae.activation)
            diagonal = torch.arange(len(block))
            draws.append(ContinuousBernoulliLikelihood().rsample(f[diagonal, diagonal], generator))
    return sw(torch.cat(draws).numpy(), x.numpy(), dirs)


def vae_recon_ll(vae, X):
    """Continuous-Bernoulli log-likelihood of X under the VAE decoder's logits at the encoder's mean code."""
    mean = np.clip(vae.inverse_transform(vae.transform(X)), 1e-6, 1 - 1e-6)
    logits = torch.as_tensor(np.log(mean) - np.log1p(-mean), dtype=torch.float64)
    return float(ContinuousBernoulliLikelihood().log_prob(torch.as_tensor(X, dtype=torch.float64), logits).mean())


def fit_model(name, X, args):
    if name == "VAE":
        return VAE(n_components=args.n_components, hidden_layer_sizes=(args.hidden,), likelihood="bernoulli",
                   random_state=0).fit(X)
    inference = None if name == "BAE, DSW prior" else SGHMC()
    return BayesianAutoencoder(n_components=args.n_components, hidden_layer_sizes=(args.hidden,), inference=inference,
                               random_state=0).fit(X)


def markdown(report):
    lines = ["# The Bayesian autoencoder's prior and the VAE on MNIST", "",
             f"Command: `python examples/benchmarks/bae_mnist.py {' '.join(report['argv'])}`. Test images: 1,000. "
             "recon_ll: continuous-Bernoulli log-likelihood per image (nats, higher is better); recon_mse: pixels' "
             "mean squared reconstruction error; sample_sw: sliced 2-Wasserstein distance of 1,000 generated "
             "images to the test images; prior_sw: of 1,000 prior-predictive draws to training images (lower is "
             "better).", "",
             "| training images | model | recon_ll | recon_mse | sample_sw | prior_sw | R-hat | fit seconds |",
             "|---|---|---|---|---|---|---|---|"]
    for r in report["rows"]:
        prior = "" if r.get("prior_sw") is None else f"{r['prior_sw']:.3f}"
        rhat = "" if r.get("rhat") is None else f"{r['rhat']:.2f}"
        lines.append(f"| {r['n_train']} | {r['model']} | {r['recon_ll']:.1f} | {r['recon_mse']:.4f} | "
                     f"{r['sample_sw']:.4f} | {prior} | {rhat} | {r['fit_seconds']:.0f} |")
    lines += [""] + environment_lines(report)
    return "\n".join(lines) + "\n"


def main(argv=None):
    args, report, save, finish = rows_script(argv, __doc__, markdown, "decomposition", add_arguments)
    X_train, X_test, *_ = load_mnist(args.data_home)
    X_train, X_test = X_train.astype(np.float64), X_test.astype(np.float64)
    dirs = directions(X_train.shape[1])
    figures = {}

    def body():
        for n_train in args.train_sizes:
            X = X_train[:n_train]
            for name in MODELS:
                start = time.perf_counter()
                model = fit_model(name, X, args)
                seconds = time.perf_counter() - start
                samples = model.sample(1000, random_state=0)
                samples = samples[0] if isinstance(samples, tuple) else samples
                reconstruction = (model.inverse_transform(model.transform(X_test)) if name == "VAE"
                                  else model.reconstruct(X_test))
                row = {"n_train": n_train, "model": name, "fit_seconds": seconds,
                       "recon_mse": float(np.mean((reconstruction - X_test) ** 2)),
                       "sample_sw": sw(samples, X_test, dirs)}
                if name == "VAE":
                    row["recon_ll"] = vae_recon_ll(model, X_test)
                else:
                    row["recon_ll"] = model.score(X_test)
                    row["rhat"] = float(model.inference_diagnostics_["rhat"])
                    scales = model.inference_diagnostics_.get("prior_hyperparameters")
                    row["prior_sw"] = prior_predictive_sw(model, X, dirs, scales)
                    row["prior_hyperparameters"] = scales
                report["rows"].append(row)
                figures[(n_train, name)] = samples[:10]
                print(n_train, name, {k: v for k, v in row.items() if k != "prior_hyperparameters"}, flush=True)
                save()

    def finish_and_draw():
        finish()
        if args.no_figure or not figures:
            return
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        keys = list(figures)
        fig, axes = plt.subplots(len(keys), 10, figsize=(10, 1.1 * len(keys)))
        for i, key in enumerate(keys):
            for j in range(10):
                ax = axes[i, j]
                ax.imshow(figures[key][j].reshape(28, 28), cmap="gray_r", vmin=0, vmax=1)
                ax.set_xticks([])
                ax.set_yticks([])
            axes[i, 0].set_ylabel(f"{key[1]}\n{key[0]}", rotation=0, ha="right", va="center", fontsize=7)
        fig.tight_layout()
        fig.savefig(ROOT / "doc" / "images" / "bae_samples.png", dpi=80)

    run_saving(report, body, save, finish_and_draw)


if __name__ == "__main__":
    main()
