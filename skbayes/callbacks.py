"""Callbacks of the shared training loop, for ``callbacks=[...]`` of every estimator.

A callback is an object with hooks that the training loop calls at train
begin, epoch begin, batch end, epoch end and train end, each with the
:class:`TrainingState` (the epoch, the step, the losses, the module, and a
``stop`` flag). The estimators' own machinery uses the same hooks: the KL
warm-up, the samples SGHMC keeps, PBP's prior refinement, the validation
score and the stopping rule built from ``n_iter_no_change`` and ``tol``.
The user's callbacks run last, so they see each epoch's final state.

Examples
--------
A log of the epoch losses of a short mean-field VI fit (three epochs: the
method's ``max_iter``):

>>> import numpy as np
>>> from skbayes import BayesianMLPRegressor
>>> from skbayes.callbacks import Callback
>>> from skbayes.inference import MeanFieldVI
>>> class LossLog(Callback):
...     def on_train_begin(self, state):
...         self.losses = []
...     def on_epoch_end(self, state):
...         self.losses.append(state.epoch_loss)
>>> log = LossLog()
>>> X, y = np.random.RandomState(0).randn(40, 2), np.arange(40.0)
>>> model = BayesianMLPRegressor(inference=MeanFieldVI(max_iter=3), callbacks=[log], random_state=0).fit(X, y)
>>> len(log.losses)
3
"""

import math

import torch

from ._training import Callback, EarlyStopping, TrainingState

__all__ = ["Callback", "Checkpoint", "EarlyStopping", "TrainingState"]


class Checkpoint(Callback):
    """Save the module's parameters whenever the monitored quantity improves.

    The monitored quantity is the validation score when the estimator holds
    rows out (``early_stopping=True``; higher is better), else the epoch's
    training loss (lower is better). The file holds the
    :meth:`torch.nn.Module.state_dict` of the estimator's ``module_`` at its
    best epoch so far, moved to the CPU; load it with
    ``model.module_.load_state_dict(torch.load(path))``.

    Parameters
    ----------
    path : str or path-like
        File written with :func:`torch.save`.

    Attributes
    ----------
    best_epoch : int or None
        0-based epoch of the saved state.
    best : float
        The monitored value at that epoch.
    """

    def __init__(self, path):
        self.path = path

    def on_train_begin(self, state):
        self._validation = state.result.validation_scores is not None
        self.best = -math.inf if self._validation else math.inf
        self.best_epoch = None

    def on_epoch_end(self, state):
        value = state.validation_score if self._validation else state.epoch_loss
        improved = value > self.best if self._validation else value < self.best
        if improved and state.module is not None:
            self.best, self.best_epoch = value, state.epoch
            torch.save({k: v.detach().cpu() for k, v in state.module.state_dict().items()}, self.path)
