"""Heteroscedastic noise: intervals that cover in every region of x, where one noise level cannot.

What it does
------------
Draws x ~ U(0, 1) and y = 0.5 sin(2 pi x) + sigma(x) eps, eps ~ N(0, 1), with a
noise standard deviation that grows tenfold across the range,
sigma(x) = 0.05 + 0.5 x: 800 training rows and 4,000 test rows (seeds 0 and
1). It fits ``BayesianMLPRegressor`` three times with the same network and
inference (a two-member ``DeepEnsemble``, one hidden layer of 32, 200
epochs), changing only ``noise``: ``"heteroscedastic"`` (the network predicts
a noise level per row), ``"homoscedastic"`` (one learned level) and
``"student_t"``. These are the settings of
``tests/neural_network/test_heteroscedastic.py::test_heteroscedastic_noise_tracks_sigma_x_and_covers_in_every_bin``,
which asserts what this script prints.

It writes a table with, for each model, the coverage of the central 95%
predictive interval (``predict_interval``) in five equal bins of x, the
learned aleatoric standard deviation against the true sigma(x) at x = 0.05,
0.5 and 0.95, and the test log-likelihood (``log_predictive_density``, nats
per point).

How to run
----------
::

    python examples/heteroscedastic_noise.py            # prints the table
    python examples/heteroscedastic_noise.py --output examples/benchmarks/results/defaults/heteroscedastic_noise.md

It takes a few seconds.
"""

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np
import sklearn
import torch

from skbayes import BayesianMLPRegressor
from skbayes.inference import DeepEnsemble

N_BINS = 5
GRID = np.array([0.05, 0.5, 0.95])


def noisy_data(n, seed):
    rng = np.random.RandomState(seed)
    x = rng.uniform(0, 1, n)
    return x[:, None], 0.5 * np.sin(2 * np.pi * x) + (0.05 + 0.5 * x) * rng.randn(n)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default=None, help="Also write the table to this Markdown file.")
    args = parser.parse_args(argv)
    X, y = noisy_data(800, 0)
    X_test, y_test = noisy_data(4000, 1)
    bins = np.minimum((X_test[:, 0] * N_BINS).astype(int), N_BINS - 1)
    params = {"hidden_layer_sizes": (32,),
              "inference": DeepEnsemble(n_estimators=2, max_iter=200, learning_rate_init=0.02),
              "batch_size": 200, "random_state": 0}
    header = (["noise"] + [f"95% coverage, x in [{b / N_BINS:.1f}, {(b + 1) / N_BINS:.1f})" for b in range(N_BINS)]
              + [f"aleatoric std at x={x:g} (true {0.05 + 0.5 * x:.3f})" for x in GRID] + ["test LL"])
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    start = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    for noise in ("heteroscedastic", "homoscedastic", "student_t"):
        model = BayesianMLPRegressor(noise=noise, **params).fit(X, y)
        lower, upper = model.predict_interval(X_test, coverage=0.95)
        inside = (y_test >= lower) & (y_test <= upper)
        coverage = [inside[bins == b].mean() for b in range(N_BINS)]
        aleatoric = model.predict_uncertainty(GRID[:, None]).aleatoric_std
        ll = model.log_predictive_density(X_test, y_test).mean()
        lines.append(f"| {noise} | " + " | ".join(f"{c:.3f}" for c in coverage) + " | "
                     + " | ".join(f"{a:.3f}" for a in aleatoric) + f" | {ll:.3f} |")
    lines += ["", "Test rows per bin: " + ", ".join(str(int((bins == b).sum())) for b in range(N_BINS))
              + " (binomial standard deviation of a 95% coverage about 0.008). For Student-t noise the aleatoric "
              "std is the scale times sqrt(nu / (nu - 2)).",
              f"Command: `python examples/heteroscedastic_noise.py`; torch {torch.__version__}, scikit-learn "
              f"{sklearn.__version__}, Python {platform.python_version()}, started {start}."]
    table = "\n".join(lines) + "\n"
    print(table)
    if args.output:
        Path(args.output).write_text(table)
        print(f"Wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
