"""Helpers shared by the benchmark scripts of this folder.

The scripts are run as files (``python examples/benchmarks/NAME.py``), so they
import this module after putting their own folder on ``sys.path``::

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _common import loadavg, write_atomic  # noqa: E402
"""

import argparse
import importlib
import json
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
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

import skbayes
from skbayes.datasets import get_uci_split
from skbayes.inference import PBP, SGHMC, SWAG, BlackBoxVI, DeepEnsemble, Laplace, MCDropout, MeanFieldVI, Vadam

TIME_FORMAT = "%Y-%m-%dT%H:%M:%S%z"
ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parent / "results"


def results_dir(topic):
    """``examples/benchmarks/results/<topic>/``: where a script writes its result files by default.

    The committed results are grouped by topic (``uci``, ``sparse_gp``,
    ``performance``, ...); ``results/README.md`` lists the folders.
    """
    return RESULTS / topic


def git_commit():
    """The commit checked out in this folder's repository, or None (no git, not a checkout)."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent,
                             capture_output=True, text=True, timeout=10, check=False)
        return (out.stdout.strip() or None) if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def loadavg():
    """``os.getloadavg()`` rounded to two decimals, as a list of three floats (1, 5 and 15 minutes).

    None where the platform has no load average (``os.getloadavg`` raises OSError).
    """
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def fit_noting_collapse(estimator, X, y):
    """Fit ``estimator`` on X, y: ``(estimator, fit seconds, whether it warned that its posterior collapsed)``."""
    import warnings

    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        estimator.fit(X, y)
    collapsed = any("collapsed" in str(w.message) for w in caught)
    return estimator, time.perf_counter() - start, collapsed


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


def environment(gpytorch=False, cpu_count=True, interop_threads=False, argv=None):
    """The ``"environment"`` entry of a results file, taken at the start of a run.

    Shared by the benchmark scripts and the longer example scripts of
    ``examples/`` (``digits_ood.py``, ``vae_tabular.py``); :func:`end_environment`
    adds the load average and the time at the end.

    Parameters
    ----------
    gpytorch : bool, default=False
        Add ``"gpytorch"``: GPyTorch's version, or None when not installed.
    cpu_count : bool, default=True
        Add ``"cpu_count"``: ``os.cpu_count()``.
    interop_threads : bool, default=False
        Add ``"torch_num_interop_threads"``.
    argv : list of str, default=None
        The arguments the script's ``main(argv)`` was given, recorded in
        ``"command"`` after the script's path; None: ``sys.argv[1:]``.

    Returns
    -------
    env : dict
        Command line (a list: the interpreter, the script, its arguments),
        Python, platform, library versions, git commit, torch threads, load
        average (``"loadavg_start"``) and start time.
    """
    env = {
        "command": [sys.executable, *sys.argv[:1], *(sys.argv[1:] if argv is None else argv)],
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


def end_environment(env):
    """Add ``"loadavg_end"`` and ``"finished"`` to ``env`` (an :func:`environment` dict) at the end of a run.

    Returns ``env``.
    """
    env["loadavg_end"] = loadavg()
    env["finished"] = time.strftime(TIME_FORMAT)
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


def save_json(path, report):
    """Write ``report`` as indented JSON (values json cannot hold as their ``str``) to ``path``, folders created.

    Written with :func:`write_atomic`; returns the path as a ``Path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(report, indent=2, default=str) + "\n")
    return path


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
        end_environment(report["environment"])
        save()
        if finish is not None:
            finish()


def environment_sentence(report):
    """The environment line of a results table: versions, commit, threads, CPUs, load average, completeness."""
    env = report["environment"]
    return (
        f"Environment: torch {env['torch']}, skbayes {env['skbayes']}, git {env['git_commit']}, "
        f"{env['torch_num_threads']} torch threads, {env['cpu_count']} CPUs, load average "
        f"{env['loadavg_start']} at start, {env.get('loadavg_end')} at end; complete: {report['complete']}."
    )


def rows_report(argv):
    """The results dict of a script that appends one row per measurement: ``argv``, environment, rows.

    ``argv`` is the script's ``main(argv)`` argument (None: ``sys.argv[1:]``);
    ``skipped`` and ``complete`` are filled by :func:`uci_splits` and
    :func:`run_saving`.
    """
    return {"argv": sys.argv[1:] if argv is None else list(argv), "environment": environment(),
            "rows": [], "skipped": [], "complete": False}


def named_results(report, markdown, out, topic):
    """``(save, finish)`` for :func:`run_saving` of a script with ``--out NAME``.

    ``save()`` writes ``report`` to ``results/<topic>/NAME.json``
    (:func:`results_dir`; call it after every measurement to keep what was
    measured); ``finish()`` prints ``markdown(report)`` and writes it to
    ``NAME.md`` beside it. With ``out`` None both only print.
    """
    folder = results_dir(topic)

    def save():
        if out:
            folder.mkdir(parents=True, exist_ok=True)
            write_atomic(folder / f"{out}.json", json.dumps(report, indent=2) + "\n")

    def finish():
        text = markdown(report)
        print("\n" + text)
        if out:
            write_atomic(folder / f"{out}.md", text)

    return save, finish


def rows_script(argv, doc, markdown, topic, add_arguments=None):
    """The start of a row-per-measurement script: ``(args, report, save, finish)``.

    Parses ``argv`` (None: ``sys.argv[1:]``) with the script's own options
    (``add_arguments(parser)``) and the shared ``--threads`` and ``--out``,
    limits torch's threads (:func:`limit_threads`), and returns the results
    dict of :func:`rows_report` with the ``save`` and ``finish`` of
    :func:`named_results` in ``results/<topic>/``. ``doc`` is the script's
    module docstring; its first line describes the command.
    """
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    if add_arguments is not None:
        add_arguments(parser)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", default=None, help=f"Name of the results files (results/{topic}/NAME.json/.md).")
    args = parser.parse_args(argv)
    limit_threads(args.threads)
    report = rows_report(argv)
    return (args, report, *named_results(report, markdown, args.out, topic))


def print_written(json_path, md_path):
    """Print the Markdown table (when it was written) and the paths of the results files."""
    if md_path.exists():
        print()
        print(md_path.read_text())
    print(f"Wrote {json_path}" + (f"\nWrote {md_path}" if md_path.exists() else ""))


def mnist_images(data_home=None):
    """The labelled MNIST images, their labels and the unlabelled images, as uint8 arrays of 28 x 28.

    From ``<data_home>/mnist/`` (``mnist_5k_labeled.npz``, ``mnist_test_10k.npz``)
    when ``data_home`` is given or ``$SKBAYES_DATA_HOME/mnist/`` exists, else
    the copy bundled with skbayes (:func:`skbayes.datasets.load_mnist`).
    """
    from skbayes.datasets import load_mnist as load_bundled

    home = data_home or os.environ.get("SKBAYES_DATA_HOME")
    if home and (data_home or (Path(home) / "mnist").is_dir()):
        labeled = np.load(Path(home) / "mnist" / "mnist_5k_labeled.npz")
        unlabeled = np.load(Path(home) / "mnist" / "mnist_test_10k.npz")["data"]
        return labeled["images"], labeled["labels"], unlabeled
    labeled = load_bundled("labeled")
    return labeled.images, labeled.target, load_bundled("unlabeled").images


def load_mnist(data_home=None):
    """The fixed stratified 4,000/1,000 split of the 5k labeled images and the 10k unlabeled ones.

    Returns ``X_train, X_test, y_train, y_test, X_unlabeled``; images as
    float32 rows of 784 pixels in [0, 1] (``X_test`` etc. keep the row order
    of the split: ``train_test_split(test_size=1000, stratify=labels,
    random_state=0)``). The files: :func:`mnist_images`.
    """
    images, labels, unlabeled = mnist_images(data_home)
    images = images.reshape(len(images), -1).astype(np.float32) / 255.0
    X_train, X_test, y_train, y_test = train_test_split(
        images, labels, test_size=1000, stratify=labels, random_state=0)
    return X_train, X_test, y_train, y_test, unlabeled.reshape(len(unlabeled), -1).astype(np.float32) / 255.0


def rotated(X, angle):
    """The 784-pixel rows of X rotated by ``angle`` degrees about the image centre (bilinear, same frame)."""
    from scipy.ndimage import rotate

    images = X.reshape(-1, 28, 28)
    out = rotate(images, angle, axes=(2, 1), reshape=False, order=1, mode="constant", cval=0.0)
    return np.clip(out, 0.0, 1.0).reshape(len(X), -1).astype(X.dtype)


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


def aggregate_splits(rows, keys):
    """Mean and standard error over splits of each of ``keys`` in ``rows`` (one dict per split).

    Returns ``{"n_splits": len(rows), key: {"mean": ..., "se": ...}, ...}``
    with se = ``np.std(values, ddof=0) / sqrt(n_splits)``; a key missing
    from a row counts as NaN (so its mean is NaN).
    """
    out = {"n_splits": len(rows)}
    for key in keys:
        values = np.array([r.get(key, np.nan) for r in rows], dtype=float)
        out[key] = {"mean": float(values.mean()), "se": float(values.std() / np.sqrt(len(values)))}
    return out


def mean_se(agg, key, digits=3):
    """``"mean ± se"`` of ``agg[key]`` (an entry of :func:`aggregate_splits`) with ``digits`` decimals.

    ``"—"`` when ``agg`` is None or empty (the method was not run) or the
    mean is NaN (the metric does not apply).
    """
    if not agg or np.isnan(agg[key]["mean"]):
        return "—"
    return f"{agg[key]['mean']:.{digits}f} ± {agg[key]['se']:.{digits}f}"


def environment_lines(report):
    """The closing lines of a results table: the environment sentence, then the skipped datasets if any."""
    env = report["environment"]
    lines = [
        f"Environment: torch {env['torch']}, scikit-learn {env['sklearn']}, skbayes {env['skbayes']}, git "
        f"{env['git_commit']}, {env['torch_num_threads']} torch threads, load average {env['loadavg_start']} at "
        f"start, {env.get('loadavg_end')} at end; complete: {report['complete']}."
    ]
    if report["skipped"]:
        lines.append("Skipped: " + "; ".join(report["skipped"]) + ".")
    return lines


def start_uci_report(args, json_path, *, cpu_count, **settings):
    """The results dict of a UCI benchmark and its ``save()``; prints the threads and load average.

    ``report["settings"]`` is ``vars(args)``, the resolved ``data_home``,
    ``settings`` and the definition of the standard error; the other
    entries (``environment``, empty ``splits``, ``aggregates``,
    ``skipped``, ``complete=False``) are filled by :func:`fit_uci_splits`
    and :func:`run_saving`. ``save()`` writes the report as JSON to
    ``json_path`` (:func:`write_atomic`).
    """
    from skbayes.datasets import get_data_home

    report = {
        "settings": {**vars(args), "data_home": str(get_data_home(args.data_home)), **settings,
                     "standard_error": "np.std(values, ddof=0) / sqrt(n_splits)"},
        "environment": environment(cpu_count=cpu_count),
        "splits": {}, "aggregates": {}, "skipped": [], "complete": False,
    }
    print(f"torch threads: {torch.get_num_threads()}; load average: {loadavg()}", flush=True)

    def save():
        write_atomic(json_path, json.dumps(report, indent=1, default=str))

    return report, save


def fit_uci_splits(report, datasets, n_splits, data_home, order, fit, keys, progress, save, after=None,
                   pass_name=False):
    """The loop of the UCI benchmarks: every method on every split, recorded in ``report`` as it goes.

    For each ``(name, split, X_train, X_test, y_train, y_test)`` of
    :func:`uci_splits` and each method of ``order(split)``:
    ``res = fit(method, X_train, y_train, X_test, y_test, split)`` (with
    ``name=name`` as well when ``pass_name``) is appended (with ``"split"`` and ``"loadavg"``) to
    ``report["splits"][name][method]``, ``report["aggregates"][name][method]``
    becomes :func:`aggregate_splits` of those rows over ``keys``,
    ``after(name, rows)`` is called when given (e.g. paired differences),
    ``progress(name, method, split, res)`` is printed and ``save()`` called.
    Skipped datasets go to ``report["skipped"]``.
    """
    for name, split, X_train, X_test, y_train, y_test in uci_splits(datasets, n_splits, data_home, report["skipped"]):
        rows = report["splits"].setdefault(name, {})
        for method in order(split):
            res = fit(method, X_train, y_train, X_test, y_test, split, **({"name": name} if pass_name else {}))
            rows.setdefault(method, []).append({"split": split, "loadavg": loadavg(), **res})
            report["aggregates"].setdefault(name, {})[method] = aggregate_splits(rows[method], keys)
            if after is not None:
                after(name, rows)
            print(progress(name, method, split, res), flush=True)
            save()


# ---------------------------------------------------------------------------
# The registry of the Bayesian MLPs' inference methods, shared by the BNN
# benchmarks (cubic_toy.py, mnist_bnn.py, epoch_time.py --registry) and by
# tests/inference/test_cubic_toy.py.
# ---------------------------------------------------------------------------


def _optional(name, modules=("skbayes.inference",)):
    """The class ``name`` from the first of ``modules`` that has it, or None (not on this branch yet)."""
    for module in modules:
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    return None


# Methods of issue 12, picked up as soon as they exist (None until then).
WHVI = _optional("WHVI")
MNF = _optional("MNF")
BayesByHypernet = _optional("BayesByHypernet")
BayesByGAN = _optional("BayesByGAN")
GPInducedPrior = _optional("GPInducedPrior", ("skbayes.inference",))


def sghmc_schedule(epochs, n_kept_samples=20):
    """SGHMC settings that run ``epochs`` epochs in all: half burn-in, then ``n_kept_samples`` per chain.

    Returns a dict of :class:`skbayes.inference.SGHMC` parameters with
    ``burn_in + thinning * n_kept_samples == epochs`` for ``epochs >= 2``
    (at least one epoch of burn-in and one of thinning).
    """
    n_kept_samples = max(1, min(n_kept_samples, epochs // 2))
    burn_in = max(1, epochs - (epochs // 2 // n_kept_samples) * n_kept_samples)
    thinning = max(1, (epochs - burn_in) // n_kept_samples)
    return {"burn_in": burn_in, "thinning": thinning, "n_kept_samples": n_kept_samples}


def with_prediction_draws(method, n_mc_predict):
    """A copy of the inference ``method`` that averages ``n_mc_predict`` weight draws at prediction.

    The draws are a setting of the methods that draw weights (``MeanFieldVI``,
    ``MCDropout``, ...); a method with members (``SGHMC``, ``DeepEnsemble``)
    predicts with all of them, has no such setting and comes back unchanged.
    """
    from sklearn.base import clone

    method = clone(method)
    return method.set_params(n_mc_predict=n_mc_predict) if "n_mc_predict" in method.get_params() else method


def bnn_methods(epochs, *, task="regression", quick=False):
    """Every inference method of the Bayesian MLPs, with the settings the BNN benchmarks give it.

    Parameters
    ----------
    epochs : int
        Training budget in epochs. The gradient-trained methods run exactly
        this many (the stopping rule is switched off: both are the
        methods' own settings); SGHMC's schedule
        (:func:`sghmc_schedule`) fills it; PBP runs ``min(epochs, 40)``
        passes (the paper's 40; more passes count the data again).
    task : {"regression", "classification"}, default="regression"
        ``"classification"`` leaves out the methods whose
        ``supports_classification`` is False (PBP).
    quick : bool, default=False
        Smaller sets of networks (3 ensemble members, 5 kept SGHMC samples
        per chain) for smoke runs.

    Returns
    -------
    methods : dict
        ``{name: (inference object, estimator keyword arguments)}``, in a
        fixed order (MeanFieldVI first: the reference of the epoch costs);
        the keyword arguments are empty (the budget is the method's).
        Pass both to ``BayesianMLPRegressor`` / ``BayesianMLPClassifier``:
        ``Estimator(inference=method, **kwargs, ...)``.
    """
    if task not in ("regression", "classification"):
        raise ValueError(f"task must be 'regression' or 'classification', got {task!r}")
    fixed = {"max_iter": epochs, "n_iter_no_change": 10**9}
    n_kept = 5 if quick else 20
    methods = {
        "MeanFieldVI": (MeanFieldVI(**fixed), {}),
        "MCDropout": (MCDropout(**fixed), {}),
        "Vadam": (Vadam(**fixed), {}),
        "SGHMC": (SGHMC(n_chains=2, **sghmc_schedule(epochs, n_kept)), {}),
        "DeepEnsemble": (DeepEnsemble(n_estimators=3 if quick else 5, **fixed), {}),
        "PBP": (PBP(max_iter=min(epochs, 40), n_iter_no_change=10**9), {}),
    }
    # ---- Issue 12's methods: one line each; they join every BNN benchmark once they exist. ----
    # Give them their default settings here; change a line if a method needs its own budget.
    if WHVI is not None:
        methods["WHVI"] = (WHVI(**fixed), {})
    if MNF is not None:
        methods["MNF"] = (MNF(**fixed), {})
    if BayesByHypernet is not None:
        methods["BayesByHypernet"] = (BayesByHypernet(**fixed), {})
    if BayesByGAN is not None:
        methods["BayesByGAN"] = (BayesByGAN(**fixed), {})
    if GPInducedPrior is not None:  # the GP-induced prior (Tran et al. 2022) sampled by SGHMC
        methods["SGHMC+GPInducedPrior"] = (
            SGHMC(n_chains=2, prior=GPInducedPrior(), **sghmc_schedule(epochs, n_kept)), {})
    # ---- end of issue 12's methods ----
    # Issue 30's: the Laplace approximations (last layer, KFAC over all weights), SWAG and black-box VI.
    methods["Laplace"] = (Laplace(**fixed), {})
    methods["Laplace(subset='all')"] = (Laplace(subset="all", **fixed), {})
    methods["SWAG"] = (SWAG(n_models=1, **fixed), {})
    methods["BlackBoxVI"] = (BlackBoxVI(**fixed), {})
    if task == "classification":
        methods = {name: entry for name, entry in methods.items() if entry[0].supports_classification}
    return methods


def select_methods(methods, names):
    """The entries of ``methods`` named in ``names`` (case-insensitive), in registry order; all when None.

    Raises ValueError naming the unknown names and the available ones.
    """
    if not names:
        return methods
    wanted = {n.lower() for n in names}
    unknown = wanted - {n.lower() for n in methods}
    if unknown:
        raise ValueError(f"unknown method(s) {sorted(unknown)}; available: {list(methods)}")
    return {name: entry for name, entry in methods.items() if name.lower() in wanted}


def registry_parser(doc, quick_help, default_output_dir):
    """An argument parser with the options shared by the registry benchmarks.

    ``--quick``, ``--methods``, ``--threads``, ``--output-dir`` and ``--tag``;
    its description is the first paragraph of ``doc`` (the script's
    docstring). A missing ``--tag`` is for the caller to resolve (``full``
    or ``quick``).
    """
    import argparse

    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--methods", nargs="+", default=None, metavar="NAME",
                        help="Registry names to run, case-insensitive (default: every method of the registry).")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads(N).")
    parser.add_argument("--output-dir", default=str(default_output_dir))
    parser.add_argument("--tag", default=None, help="Results file tag (default: full, or quick with --quick).")
    return parser
