"""Recalibration of predictive distributions.

:class:`CalibratedRegressorCV` recalibrates a regressor's predictive CDF by
isotonic regression of its probability integral transform on held-out data
(Kuleshov, Fenner and Ermon 2018), with scikit-learn's cross-validation
options of :class:`~sklearn.calibration.CalibratedClassifierCV`.
"""

from ._regressor import CalibratedRegressorCV

__all__ = ["CalibratedRegressorCV"]
