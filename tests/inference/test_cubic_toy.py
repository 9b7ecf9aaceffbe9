"""The cubic toy of seed 004 (examples/benchmarks/cubic_toy.py): every BNN method is less sure away from the data.

The methods are those of the benchmarks' registry (``bnn_methods`` in
``examples/benchmarks/_common.py``), so a method added there is tested here.
"""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("cubic_toy", ROOT / "examples" / "benchmarks" / "cubic_toy.py")
cubic_toy = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cubic_toy)  # puts examples/benchmarks on sys.path for _common
from _common import bnn_methods, select_methods, sghmc_schedule  # noqa: E402

# 1,000 full-batch epochs (one step each on 20 rows): about a second per method on one thread.
EPOCHS = 1000


def test_cubic_toy_data():
    X, y = cubic_toy.cubic_toy_data()
    assert X.shape == (20, 1) and y.shape == (20,)
    assert np.all(np.abs(X) < 4)
    residual = y - X[:, 0] ** 3
    assert 1.5 < residual.std() < 4.5  # N(0, 3^2) noise on 20 points
    np.testing.assert_array_equal(cubic_toy.cubic_toy_data()[1], y)  # fixed seed


@pytest.mark.parametrize("epochs", [2, 3, 10, 99, 100, 3000, 3001])
@pytest.mark.parametrize("n_kept", [1, 5, 20])
def test_sghmc_schedule_fills_the_budget(epochs, n_kept):
    s = sghmc_schedule(epochs, n_kept)
    assert s["burn_in"] + s["thinning"] * s["n_kept_samples"] == epochs
    assert s["burn_in"] >= epochs // 2 and s["thinning"] >= 1 and 1 <= s["n_kept_samples"] <= n_kept


def test_registry():
    regression, classification = bnn_methods(10), bnn_methods(10, task="classification")
    assert list(regression)[0] == "MeanFieldVI"  # the reference of the epoch costs
    assert "PBP" in regression and "PBP" not in classification
    assert set(classification) == {n for n, (m, _) in regression.items() if m.supports_classification}
    assert list(select_methods(regression, ["sghmc", "MeanFieldVI"])) == ["MeanFieldVI", "SGHMC"]
    with pytest.raises(ValueError, match="unknown method"):
        select_methods(regression, ["nope"])


@pytest.mark.parametrize("name", list(bnn_methods(EPOCHS)))
def test_predictive_std_grows_outside_the_data(name):
    """The mean predictive std on each side at 5 <= |x| <= 6 exceeds the mean over |x| <= 3 (data: |x| < 4)."""
    method, kwargs = bnn_methods(EPOCHS, quick=True)[name]
    X, y = cubic_toy.cubic_toy_data()
    pred = cubic_toy.fit_on_grid(method, kwargs, X, y)
    grid, std = cubic_toy.GRID, pred["std"]
    inside = std[np.abs(grid) <= 3].mean()
    for side in (grid <= -5, grid >= 5):
        assert std[side].mean() > inside, (name, std[side].mean(), inside)
