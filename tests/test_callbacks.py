"""The callback hooks of the shared training loop, and the public callbacks."""

import inspect
import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning

from skbayes.inference import MeanFieldVI
import skbayes
from skbayes import BayesianMLPRegressor
from skbayes.callbacks import Callback, Checkpoint, EarlyStopping


class Recorder(Callback):
    def on_train_begin(self, state):
        self.events = [("train_begin", state.epoch, state.step)]

    def on_epoch_begin(self, state):
        self.events.append(("epoch_begin", state.epoch, state.step))

    def on_batch_end(self, state):
        self.events.append(("batch_end", state.epoch, state.step))

    def on_epoch_end(self, state):
        self.events.append(("epoch_end", state.epoch, state.step, state.epoch_loss))

    def on_train_end(self, state):
        self.events.append(("train_end", state.epoch, state.step))


@pytest.fixture
def data():
    rng = np.random.RandomState(0)
    X = rng.randn(40, 2)
    return X, X[:, 0] + 0.1 * rng.randn(40)


def test_hooks_run_in_order_with_the_epoch_and_the_step(data):
    recorder = Recorder()
    # 40 rows in batches of 16: 3 steps per epoch
    model = BayesianMLPRegressor((4,), inference=MeanFieldVI(max_iter=2), batch_size=16, callbacks=[recorder], random_state=0, noise="homoscedastic")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(*data)
    kinds = [event[0] for event in recorder.events]
    assert kinds == ["train_begin"] + (["epoch_begin"] + ["batch_end"] * 3 + ["epoch_end"]) * 2 + ["train_end"]
    assert [e[2] for e in recorder.events if e[0] == "batch_end"] == [1, 2, 3, 4, 5, 6]
    assert [e[1] for e in recorder.events if e[0] == "epoch_end"] == [0, 1]
    assert [e[3] for e in recorder.events if e[0] == "epoch_end"] == model.loss_curve_


def test_a_user_callback_can_stop_training(data):
    class StopAfterTwo(Callback):
        def on_epoch_end(self, state):
            state.stop = state.epoch == 1

    with warnings.catch_warnings():
        # stopping early is not "not converged" (two epochs leave the posterior near the prior: the collapse
        # guard may speak, tests/inference/test_guards.py)
        warnings.filterwarnings("error", "maximum number", ConvergenceWarning)
        model = BayesianMLPRegressor((4,), inference=MeanFieldVI(max_iter=50), callbacks=[StopAfterTwo()], random_state=0, noise="homoscedastic").fit(*data)
    assert model.n_iter_ == 2


def test_a_second_stopping_rule_stops_as_soon_as_the_loss_fails_to_improve_by_tol(data):
    # An improvement of 1e9 nats is impossible after the first epoch (whose reference is +inf),
    # so patience 0 stops after the second epoch.
    model = BayesianMLPRegressor(
        (4,), inference=MeanFieldVI(max_iter=50), callbacks=[EarlyStopping(patience=0, tol=1e9)], random_state=0, noise="homoscedastic"
    ).fit(*data)
    assert model.n_iter_ == 2
    assert model.callbacks[0].stopped_epoch == 1


def test_user_callbacks_do_not_change_the_fit(data):
    plain = BayesianMLPRegressor((4,), inference=MeanFieldVI(max_iter=5), random_state=0, noise="homoscedastic").fit(*data)
    with_callback = BayesianMLPRegressor((4,), inference=MeanFieldVI(max_iter=5), callbacks=[Recorder()], random_state=0, noise="homoscedastic").fit(*data)
    np.testing.assert_array_equal(plain.predict(data[0]), with_callback.predict(data[0]))


def test_checkpoint_saves_the_state_of_the_best_epoch(data, tmp_path):
    path = tmp_path / "best.pt"
    checkpoint = Checkpoint(path)
    recorder = Recorder()
    model = BayesianMLPRegressor(
        (4,), inference=MeanFieldVI(max_iter=6), callbacks=[recorder, checkpoint], random_state=0, dtype="float64", noise="homoscedastic"
    ).fit(*data)
    assert checkpoint.best == min(model.loss_curve_)
    assert checkpoint.best_epoch == int(np.argmin(model.loss_curve_))
    saved = torch.load(path)
    if checkpoint.best_epoch == len(model.loss_curve_) - 1:  # the last epoch was the best: the final state
        for name, value in model.module_.state_dict().items():
            torch.testing.assert_close(saved[name], value.cpu())


def test_checkpoint_follows_the_validation_score_when_early_stopping(data, tmp_path):
    checkpoint = Checkpoint(tmp_path / "best.pt")
    model = BayesianMLPRegressor(
        (4,), inference=MeanFieldVI(max_iter=8, early_stopping=True), callbacks=[checkpoint], random_state=0, noise="homoscedastic"
    ).fit(*data)
    assert checkpoint.best == model.best_validation_score_
    # early stopping restores the best-scoring state: the checkpoint holds the same parameters
    saved = torch.load(checkpoint.path)
    for name, value in model.module_.state_dict().items():
        torch.testing.assert_close(saved[name], value.cpu())


def test_callbacks_are_cloned_with_the_estimator(data):
    from sklearn.base import clone

    recorder = Recorder()
    model = BayesianMLPRegressor((4,), inference=MeanFieldVI(max_iter=2), callbacks=[recorder], noise="homoscedastic")
    assert clone(model).callbacks[0] is not recorder


@pytest.mark.parametrize("name", ["BayesianMLPRegressor", "BayesianMLPClassifier", "SparseGPRegressor", "VAE"])
def test_every_estimator_takes_callbacks(name):
    assert "callbacks" in inspect.signature(getattr(skbayes, name)).parameters
