"""Helpers shared by the benchmark scripts of this folder.

The scripts are run as files (``python examples/benchmarks/NAME.py``), so they
import this module after putting their own folder on ``sys.path``::

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _common import loadavg, write_atomic  # noqa: E402
"""

import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import sklearn
import torch
from sklearn.preprocessing import StandardScaler

import skbayes
from skbayes.datasets import get_uci_split

TIME_FORMAT = "%Y-%m-%dT%H:%M:%S%z"


def git_commit():
    """The commit checked out in this folder's repository, or None (no git, not a checkout)."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent,
                             capture_output=True, text=True, timeout=10, check=False)
        return (out.stdout.strip() or None) if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def loadavg():
    """``os.getloadavg()`` rounded to two decimals, as a list of three floats (1, 5 and 15 minutes)."""
    return [round(v, 2) for v in os.getloadavg()]


def peak_rss_mb():
    """Peak resident memory of this process so far, in MB (``ru_maxrss`` is in kilobytes on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def gpytorch_version():
    """GPyTorch's version string, or None when it is not installed."""
    try:
        import gpytorch
        return gpytorch.__version__
    except ImportError:
        return None


def environment(gpytorch=False, cpu_count=True, interop_threads=False):
    """The ``"environment"`` entry of a results file, taken at the start of a run.

    Parameters
    ----------
    gpytorch : bool, default=False
        Add ``"gpytorch"``: GPyTorch's version, or None when not installed.
    cpu_count : bool, default=True
        Add ``"cpu_count"``: ``os.cpu_count()``.
    interop_threads : bool, default=False
        Add ``"torch_num_interop_threads"``.

    Returns
    -------
    env : dict
        Command line, Python, platform, library versions, git commit, torch
        threads, load average (``"loadavg_start"``) and start time.
    """
    env = {
        "command": [sys.executable, *sys.argv],
        "python": platform.python_version(), "platform": platform.platform(),
        "torch": torch.__version__, "sklearn": sklearn.__version__, "numpy": np.__version__,
        "skbayes": skbayes.__version__,
    }
    if gpytorch:
        env["gpytorch"] = gpytorch_version()
    env["git_commit"] = git_commit()
    if cpu_count:
        env["cpu_count"] = os.cpu_count()
    env["torch_num_threads"] = torch.get_num_threads()
    if interop_threads:
        env["torch_num_interop_threads"] = torch.get_num_interop_threads()
    env["loadavg_start"] = loadavg()
    env["started"] = time.strftime(TIME_FORMAT)
    return env


def limit_threads(threads, blas=True):
    """``torch.set_num_threads(threads)`` and, with ``blas``, the BLAS pools via threadpoolctl.

    Does nothing when ``threads`` is None (the defaults are left alone).
    """
    if threads is None:
        return
    torch.set_num_threads(threads)
    if blas:
        try:
            from threadpoolctl import threadpool_limits
            threadpool_limits(threads)
        except ImportError:
            print("Note: threadpoolctl missing; BLAS threads not limited.", flush=True)


def output_paths(args, prefix):
    """``(json_path, md_path)`` = ``<output_dir>/<prefix>_<tag>.json`` and ``.md``; the folder is created.

    The tag is ``args.tag``, or a timestamp when it is None.
    """
    tag = args.tag or time.strftime("%Y%m%d-%H%M%S")
    out_dir = Path(args.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return out_dir / f"{prefix}_{tag}.json", out_dir / f"{prefix}_{tag}.md"


def write_atomic(path, text):
    """Write ``text`` to ``path`` through a temporary file and a rename, so a reader never sees half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def standardised_split(bunch, split):
    """Fixed UCI split ``split`` of ``bunch`` with X standardised by the training rows' mean and std.

    Returns ``X_train, X_test, y_train, y_test`` (y untouched).
    """
    X_train, X_test, y_train, y_test = get_uci_split(bunch, split)
    scaler = StandardScaler().fit(X_train)
    return scaler.transform(X_train), scaler.transform(X_test), y_train, y_test


def run_saving(report, body, save, finish=None):
    """Run ``body()`` and keep what it measured, even when interrupted.

    ``report["complete"]`` becomes True when ``body`` returns; on Ctrl-C a note
    is printed instead. In every case ``report["environment"]`` gets
    ``"loadavg_end"`` and ``"finished"``, then ``save()`` and ``finish()``
    (when given, e.g. writing the Markdown) are called. Other exceptions
    propagate after that.
    """
    try:
        body()
        report["complete"] = True
    except KeyboardInterrupt:
        print("\nInterrupted; writing what was measured so far.", flush=True)
    finally:
        report["environment"]["loadavg_end"] = loadavg()
        report["environment"]["finished"] = time.strftime(TIME_FORMAT)
        save()
        if finish is not None:
            finish()


def print_written(json_path, md_path):
    """Print the Markdown table (when it was written) and the paths of the results files."""
    if md_path.exists():
        print()
        print(md_path.read_text())
    print(f"Wrote {json_path}" + (f"\nWrote {md_path}" if md_path.exists() else ""))


def uci_splits(datasets, n_splits, data_home, skipped):
    """Yield ``(name, split, X_train, X_test, y_train, y_test)`` over the first ``n_splits`` splits of each dataset.

    Datasets absent from ``data_home`` are skipped with a printed note and a
    line appended to ``skipped``; X is standardised by :func:`standardised_split`.
    """
    from skbayes.datasets import fetch_uci

    for requested in datasets:
        try:
            bunch = fetch_uci(requested, data_home=data_home, download_if_missing=False)
        except FileNotFoundError:
            print(f"Skipping {requested}: not found", flush=True)
            skipped.append(f"{requested} (not found)")
            continue
        name, n = bunch.name, min(n_splits, bunch.n_splits)
        print(f"\n{name}: {bunch.data.shape[0]} rows, {bunch.data.shape[1]} features, {n} splits", flush=True)
        for split in range(n):
            yield (name, split, *standardised_split(bunch, split))
