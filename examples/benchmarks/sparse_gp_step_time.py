"""Seconds per SVGP training step: skbayes vs GPyTorch, same M, batch and data.

What it does
------------
On synthetic data (4,096 x 8 rows, y = sum_j sin(x_j) + 0.1 noise) it builds
the whitened SVGP of ``SparseGPRegressor(n_inducing=M)`` and GPyTorch's
``VariationalStrategy`` + ``CholeskyVariationalDistribution`` with an ARD RBF
kernel and a constant mean, both in float64, and times one Adam step (zero
grad, minibatch negative ELBO, backward, step) on the same batch of B rows,
round-robin over ``--repeats`` runs of 20 steps, one torch thread. It prints
the mean seconds per step of each run and the median ratio. GPyTorch is an
optional benchmark dependency (``pip install gpytorch``).

How to run
----------
::

    python examples/benchmarks/sparse_gp_step_time.py --n-inducing 256 --batch-size 1024 --repeats 5

``--threads T`` sets the torch threads (default 1); ``--out NAME`` writes
``examples/benchmarks/results/sparse_gp/NAME.json`` and ``.md``.
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

from skbayes import SparseGPRegressor
from skbayes.inference import SparseVariational
from skbayes.gaussian_process._sparse_gp import minibatch_loss

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment, loadavg, write_atomic, results_dir  # noqa: E402

RESULTS = results_dir("sparse_gp")


def skbayes_step(X, y, n_inducing, batch):
    model = SparseGPRegressor(n_inducing=n_inducing, random_state=0, inference=SparseVariational(max_iter=1)).fit(X, y)
    module = model.module_
    x, t = torch.tensor(X[:batch]), torch.tensor((y[:batch] - y.mean()) / y.std())
    optimizer = torch.optim.Adam(module.parameters(), lr=0.01)

    def step():
        optimizer.zero_grad()
        minibatch_loss(module, x, t, len(X)).backward()
        optimizer.step()

    return step


def gpytorch_step(X, y, n_inducing, batch):
    import gpytorch

    class SVGP(gpytorch.models.ApproximateGP):
        def __init__(self, inducing):
            q = gpytorch.variational.CholeskyVariationalDistribution(inducing.shape[0])
            strategy = gpytorch.variational.VariationalStrategy(self, inducing, q, learn_inducing_locations=True)
            super().__init__(strategy)
            self.mean_module = gpytorch.means.ConstantMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(ard_num_dims=X.shape[1]))

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    model = SVGP(torch.tensor(X[:n_inducing]).clone()).double()
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    mll = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=len(X))
    optimizer = torch.optim.Adam([*model.parameters(), *likelihood.parameters()], lr=0.01)
    x, t = torch.tensor(X[:batch]), torch.tensor((y[:batch] - y.mean()) / y.std())

    def step():
        optimizer.zero_grad()
        (-mll(model(x), t)).backward()
        optimizer.step()

    return step


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-inducing", type=int, default=256, help="M (default: 256).")
    parser.add_argument("--batch-size", type=int, default=1024, help="B (default: 1024).")
    parser.add_argument("--repeats", type=int, default=5, help="Runs of 20 steps each (default: 5).")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default: 1).")
    parser.add_argument("--out", default=None, metavar="NAME", help="Write results/sparse_gp/NAME.json and .md.")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    env = environment(gpytorch=True)
    rng = np.random.RandomState(0)
    X = rng.randn(4096, 8)
    y = np.sin(X).sum(1) + 0.1 * rng.randn(4096)
    steps = {"skbayes": skbayes_step(X, y, args.n_inducing, args.batch_size),
             "gpytorch": gpytorch_step(X, y, args.n_inducing, args.batch_size)}
    print(f"M={args.n_inducing}, B={args.batch_size}, d=8, float64, {args.threads} torch thread(s), "
          f"load average {loadavg()}")
    times = {name: [] for name in steps}
    for step in steps.values():  # warm-up
        step()
    for _ in range(args.repeats):
        for name, step in steps.items():
            start = time.perf_counter()
            for _ in range(20):
                step()
            times[name].append((time.perf_counter() - start) / 20)
            print(f"  {name:<9} {times[name][-1]:.4f} s/step", flush=True)
    ratio = statistics.median(times["skbayes"]) / statistics.median(times["gpytorch"])
    print(f"median s/step: skbayes {statistics.median(times['skbayes']):.4f}, "
          f"gpytorch {statistics.median(times['gpytorch']):.4f}, ratio {ratio:.2f}; "
          f"load average at end {loadavg()}")
    if args.out:
        env["loadavg_end"] = loadavg()
        medians = {name: statistics.median(t) for name, t in times.items()}
        report = {"settings": vars(args), "environment": env, "seconds_per_step": times, "median": medians,
                  "ratio": ratio}
        write_atomic(RESULTS / f"{args.out}.json", json.dumps(report, indent=1))
        write_atomic(RESULTS / f"{args.out}.md", (
            "| M | batch | threads | skbayes s/step | GPyTorch s/step | skbayes / GPyTorch |\n|---|---|---|---|---|---|\n"
            f"| {args.n_inducing} | {args.batch_size} | {args.threads} | {medians['skbayes']:.4f} | "
            f"{medians['gpytorch']:.4f} | {ratio:.2f} |\n\n"
            f"One Adam step on the same minibatch, float64, medians of {args.repeats} round-robin runs of 20 steps "
            f"(`sparse_gp_step_time.py`). Environment: torch {env['torch']}, gpytorch {env['gpytorch']}, git "
            f"{env['git_commit'][:7]}, load average {env['loadavg_start']} at start, {env['loadavg_end']} at end.\n"))
        print(f"Wrote {RESULTS / (args.out + '.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
