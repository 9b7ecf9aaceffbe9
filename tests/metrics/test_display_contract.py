"""What every plotting display of skbayes.metrics does, found by looking: a display added there is checked here.

Each is a :class:`skbayes.metrics._plot._base._Display` with scikit-learn's
visualisation API: ``from_predictions`` (and ``from_estimator``) build it and
draw, ``plot(ax=..., name=...)`` draws on the given Axes and returns the
display with ``ax_`` and ``figure_`` set, and the name given appears in the
legend.
"""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from skbayes import metrics  # noqa: E402
from skbayes.metrics._plot._base import _Display  # noqa: E402

_rng = np.random.default_rng(0)
_Y, _MU, _STD = _rng.normal(size=60), _rng.normal(size=60), _rng.uniform(0.5, 1.5, size=60)
_LABELS, _PROBA = _rng.integers(0, 3, size=60), _rng.dirichlet(np.ones(3), size=60)

# display name -> the arguments of its from_predictions (a new display must be added here)
CASES = {
    "PredictionIntervalDisplay": lambda cls: cls.from_predictions(_Y, _MU, y_std=_STD),
    "RegressionCalibrationDisplay": lambda cls: cls.from_predictions(_Y, _MU, y_std=_STD),
    "ReliabilityDisplay": lambda cls: cls.from_predictions(_LABELS, _PROBA),
    "TrainingCurveDisplay": lambda cls: cls.from_predictions(np.linspace(3.0, 1.0, 20)),
}


def _displays():
    return sorted(name for name in metrics.__all__ if name.endswith("Display"))


def test_every_display_has_a_case():
    assert set(_displays()) == set(CASES), "add the new display to CASES"


@pytest.mark.parametrize("name", _displays())
def test_display_follows_the_visualisation_api(name):
    cls = getattr(metrics, name)
    assert issubclass(cls, _Display)
    assert callable(getattr(cls, "from_estimator", None)) and callable(getattr(cls, "from_predictions", None))
    display = CASES[name](cls)
    assert isinstance(display, cls) and display.ax_.figure is display.figure_
    fig, ax = plt.subplots()
    try:
        assert display.plot(ax=ax, name="my model") is display
        assert display.ax_ is ax and display.figure_ is fig
        assert any("my model" in label for label in ax.get_legend_handles_labels()[1])
    finally:
        plt.close("all")
