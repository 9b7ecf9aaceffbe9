"""Run the main job, ``skbayes evaluate --figures figures``, and record what it prints.

What it does
------------
Runs ``python -m skbayes evaluate --figures DIR`` (the command README.md
gives: the default model fitted on scikit-learn's diabetes data, fixed 75/25
split, scored on the test rows beside the baselines fitted on the same rows)
in a subprocess from the repository root, with the load average before and
after and the versions, and writes its output verbatim to
``examples/benchmarks/results/ci/main_job_diabetes.md`` (pasted into
README.md by ``render_docs.py``).

How to run
----------
::

    python examples/benchmarks/main_job.py            # writes the results file
    python examples/benchmarks/main_job.py --print    # prints it only
"""

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import sklearn
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, loadavg, results_dir, write_atomic  # noqa: E402

COMMAND = ["evaluate", "--figures", "figures"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--print", action="store_true", help="Print the Markdown instead of writing it.")
    args = parser.parse_args(argv)
    before = loadavg()
    with tempfile.TemporaryDirectory() as folder:
        env = dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg")
        run = subprocess.run([sys.executable, "-m", "skbayes", *COMMAND], cwd=folder, env=env,
                             capture_output=True, text=True, check=False)
    after = loadavg()
    if run.returncode != 0:
        sys.exit(f"the command failed ({run.returncode}):\n{run.stderr}")
    try:
        import ngboost
        ngboost_version = ngboost.__version__
    except ImportError:
        ngboost_version = "not installed"
    warnings = [line for line in run.stderr.splitlines() if line.strip()]
    text = "\n".join([
        "# The main job: `skbayes evaluate --figures figures`",
        "",
        "Run from the repository root after `python -m pip install -e \".[cli,plot]\"` (the command is also "
        "`python -m skbayes evaluate --figures figures`; `python examples/benchmarks/main_job.py` reruns it and "
        "rewrites this file): the default model fitted on scikit-learn's diabetes data (fixed 75/25 split, seed 0), "
        f"{torch.get_num_threads()} torch threads, load average {before[0] if before else '?'} before, "
        f"{after[0] if after else '?'} after, torch {torch.__version__}, scikit-learn {sklearn.__version__}, "
        f"ngboost {ngboost_version}. The fit times depend on the machine and its load.",
        "",
        "```text",
        run.stdout.rstrip().replace(str(Path(folder)), "."),
        "```",
        *(["", f"On stderr ({len(warnings)} lines):", "", "```text", *warnings, "```"] if warnings else []),
        "",
    ])
    if args.print:
        print(text)
        return
    path = results_dir("ci") / "main_job_diabetes.md"
    write_atomic(path, text)
    print(text)
    print(f"Wrote {path}")


if __name__ == "__main__":
    main()
