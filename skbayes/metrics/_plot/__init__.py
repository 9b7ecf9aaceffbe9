"""Plotting displays of the probabilistic metrics (see skbayes.metrics).

Each display follows scikit-learn's visualisation API
(:class:`~sklearn.calibration.CalibrationDisplay`,
:class:`~sklearn.metrics.PredictionErrorDisplay`): the class methods
``from_estimator`` and ``from_predictions`` compute the arrays with the
metric functions of :mod:`skbayes.metrics`, store them as public attributes,
and call :meth:`plot`, which draws on a matplotlib Axes and stores it
(``ax_``), its figure (``figure_``) and the artists. matplotlib is the
optional ``plot`` extra, imported only when a display draws.

One module per display, as in scikit-learn's ``metrics/_plot/``; their
helpers and the base of the displays are in ``_base.py``.
"""

from .prediction_interval import PredictionIntervalDisplay
from .regression_calibration import RegressionCalibrationDisplay
from .reliability import ReliabilityDisplay
from .training_curve import TrainingCurveDisplay

__all__ = [
    "PredictionIntervalDisplay",
    "RegressionCalibrationDisplay",
    "ReliabilityDisplay",
    "TrainingCurveDisplay",
]
