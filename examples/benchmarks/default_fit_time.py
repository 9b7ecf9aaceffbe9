"""Where the seconds of a small-table fit go: start-up, the first fit in a process, later fits, ``skbayes evaluate``.

What it does
------------
On the main job's data (scikit-learn's diabetes, the fixed 75/25 split of
``skbayes evaluate``: 331 training rows, 10 features) it times, each in a
fresh Python process as a user would meet it, ``--repeats`` times in turn:

* ``import torch``, ``import skbayes`` (which imports the estimators, and
  torch, on first use), ``from skbayes import BayesianMLPRegressor`` after
  it, and ``import torch._dynamo`` after ``import torch`` (torch.optim's
  optimisers import it on their first use, through
  ``torch._compile._disable_dynamo``);
* the default ``BayesianMLPRegressor().fit`` three times in one process
  (the first pays the one-time costs of the process, the later two are
  what a cross-validation or a grid search pays per fit), its test
  log-likelihood, and ``BayesianRidge().fit`` beside it;
* ``skbayes evaluate --help``, and ``skbayes evaluate`` end to end
  (``python -m skbayes evaluate``, the README's main job without figures),
  with and without its baselines.

Medians over the repeats, wall clock, with the number of torch threads and
the load average at start and end.

How to run
----------
::

    python examples/benchmarks/default_fit_time.py --repeats 3 --out default_fit_time

Writes ``examples/benchmarks/results/performance/NAME.json`` and ``NAME.md``.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import sklearn
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, loadavg, named_results  # noqa: E402

FIT = r"""
import json, time, warnings
t0 = time.perf_counter()
import skbayes
t1 = time.perf_counter()
from skbayes import BayesianMLPRegressor
t2 = time.perf_counter()
from sklearn.datasets import load_diabetes
from sklearn.linear_model import BayesianRidge
from sklearn.model_selection import train_test_split
X, y = load_diabetes(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)
fits = []
for _ in range(3):
    start = time.perf_counter()
    model = BayesianMLPRegressor(random_state=0).fit(X_train, y_train)
    fits.append(time.perf_counter() - start)
start = time.perf_counter()
BayesianRidge().fit(X_train, y_train)
ridge = time.perf_counter() - start
print(json.dumps({"import_skbayes": t1 - t0, "import_estimator": t2 - t1, "fits": fits, "bayesian_ridge": ridge,
                  "log_likelihood": float(model.log_predictive_density(X_test, y_test).mean()),
                  "n_epochs": int(model.n_iter_)}))
"""


def _python(code, threads):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS=str(threads), MPLBACKEND="Agg")
    start = time.perf_counter()
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return time.perf_counter() - start, run.stdout


def _command(threads, *args):
    """Seconds of ``python -m skbayes ARGS`` end to end, in a temporary folder."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS=str(threads), MPLBACKEND="Agg")
    command = [sys.executable, "-m", "skbayes", *args]
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, check=True)
        return time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    env = {"python": platform.python_version(), "torch": torch.__version__, "sklearn": sklearn.__version__,
           "threads": args.threads, "cpu_count": os.cpu_count(), "loadavg_start": loadavg(),
           "command": [sys.executable, *sys.argv]}
    runs = {key: [] for key in ("import_torch", "import_dynamo", "process_fit", "help", "evaluate",
                                "evaluate_no_baselines")}
    for repeat in range(args.repeats):
        runs["import_torch"].append(_python("import torch", args.threads)[0])
        _, out = _python("import time, torch; t = time.perf_counter(); import torch._dynamo; "
                         "print(time.perf_counter() - t)", args.threads)
        runs["import_dynamo"].append(float(out))
        runs["process_fit"].append(json.loads(_python(FIT, args.threads)[1]))
        runs["help"].append(_command(args.threads, "evaluate", "--help"))
        runs["evaluate"].append(_command(args.threads, "evaluate"))
        runs["evaluate_no_baselines"].append(_command(args.threads, "evaluate", "--no-baselines"))
        print(f"repeat {repeat}: " + ", ".join(f"{k}={v[-1]}" for k, v in runs.items()), flush=True)
    env["loadavg_end"] = loadavg()
    fits = runs["process_fit"]
    summary = {
        "import_torch": float(np.median(runs["import_torch"])),
        "import_skbayes": float(np.median([f["import_skbayes"] for f in fits])),
        "import_estimator": float(np.median([f["import_estimator"] for f in fits])),
        "help": float(np.median(runs["help"])),
        "import_dynamo": float(np.median(runs["import_dynamo"])),
        "first_fit": float(np.median([f["fits"][0] for f in fits])),
        "later_fit": float(np.median([f["fits"][1:] for f in fits])),
        "bayesian_ridge": float(np.median([f["bayesian_ridge"] for f in fits])),
        "log_likelihood": fits[0]["log_likelihood"],
        "n_epochs": fits[0]["n_epochs"],
        "evaluate": float(np.median(runs["evaluate"])),
        "evaluate_no_baselines": float(np.median(runs["evaluate_no_baselines"])),
    }
    result = {"settings": vars(args), "environment": env, "runs": runs, "summary": summary}
    save, finish = named_results(result, markdown, args.out, "performance")
    save()
    finish()
    return 0


def markdown(result):
    env, s = result["environment"], result["summary"]
    rows = [
        ("`import torch` (a fresh process, start-up included)", s["import_torch"]),
        ("`import skbayes` (the estimators and torch are imported on first use)", s["import_skbayes"]),
        ("`from skbayes import BayesianMLPRegressor` after it (torch included)", s["import_estimator"]),
        ("`import torch._dynamo` after `import torch` (torch.optim's first use)", s["import_dynamo"]),
        ("`BayesianMLPRegressor().fit`, the first in a process", s["first_fit"]),
        ("`BayesianMLPRegressor().fit`, the second and third", s["later_fit"]),
        ("`BayesianRidge().fit`", s["bayesian_ridge"]),
        ("`skbayes evaluate --help` end to end", s["help"]),
        ("`skbayes evaluate` end to end, with its baselines", s["evaluate"]),
        ("`skbayes evaluate --no-baselines` end to end", s["evaluate_no_baselines"]),
    ]
    lines = [
        "# The default fit on a small table, and the main job",
        "",
        f"scikit-learn's diabetes, 331 training rows (the fixed split of `skbayes evaluate`), medians of "
        f"{result['settings']['repeats']} fresh processes, wall clock, {env['threads']} torch threads, torch "
        f"{env['torch']}, scikit-learn {env['sklearn']}, load average {env['loadavg_start'][0]} at start and "
        f"{env['loadavg_end'][0]} at end. Command: `{' '.join(['python', *env['command'][1:]])}`. The default "
        f"fit ran {s['n_epochs']} epochs; its test log-likelihood is {s['log_likelihood']:.4f} nats per row.",
        "",
        "| what | seconds |",
        "|---|---|",
        *[f"| {name} | {value:.2f} |" for name, value in rows],
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
