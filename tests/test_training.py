"""The shared training loop on a toy objective."""

import warnings

import pytest
import torch
from sklearn.exceptions import ConvergenceWarning

from skbayes._training import fit_loop


def _problem(target=3.0):
    param = torch.nn.Parameter(torch.zeros(1))
    module = torch.nn.Module()
    module.param = param
    data = torch.full((64,), target)

    def loss_fn(idx):
        return ((param - data[idx]) ** 2).mean()

    return module, loss_fn


def _fit(loss_fn, trained, **kw):
    options = dict(batch_size=16, max_iter=200, generator=torch.Generator().manual_seed(0), tol=1e-6, n_iter_no_change=5)
    options.update(kw)
    return fit_loop(loss_fn, torch.optim.Adam(trained.parameters(), lr=0.1), 64, **options)


def test_minimises_and_stops_when_the_loss_stops_improving():
    module, loss_fn = _problem()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        result = _fit(loss_fn, module)
    assert result.stopped_early and result.n_iter < 200
    assert len(result.loss_curve) == result.n_iter
    assert float(module.param) == pytest.approx(3.0, abs=0.15)
    assert result.best_loss == min(result.loss_curve)


def test_warns_when_max_iter_is_reached():
    module, loss_fn = _problem()
    with pytest.warns(ConvergenceWarning, match=r"maximum number of epochs \(3\)"):
        result = _fit(loss_fn, module, max_iter=3)
    assert result.n_iter == 3 and not result.stopped_early


def test_non_finite_loss_raises_with_the_epoch():
    module, _ = _problem()
    with pytest.raises(ValueError, match="became nan at epoch 1"):
        _fit(lambda idx: module.param.sum() * float("nan"), module)


def test_early_stopping_restores_the_best_state():
    module, loss_fn = _problem()
    scores = iter([1.0, 5.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0])
    snapshots = []

    def validation_score_fn():
        snapshots.append(float(module.param))
        return next(scores)

    result = _fit(loss_fn, module, validation_score_fn=validation_score_fn, module=module, n_iter_no_change=3)
    assert result.best_validation_score == 5.0 and result.n_iter == 6
    assert float(module.param) == snapshots[1]


def test_keyboard_interrupt_keeps_a_usable_model():
    module, loss_fn = _problem()
    calls = {"n": 0}

    def interrupted(idx):
        calls["n"] += 1
        if calls["n"] == 10:
            raise KeyboardInterrupt
        return loss_fn(idx)

    with pytest.warns(UserWarning, match="interrupted by the user after 2 epochs"):
        result = _fit(interrupted, module)
    assert result.n_iter == 2 and float(module.param) != 0.0


def _warming_up_problem():
    # the loss rises for the first 6 epochs (4 batches each), as under a KL warm-up
    module, loss_fn = _problem()
    steps = {"n": 0}

    def warming_up(idx):
        steps["n"] += 1
        return loss_fn(idx) + 10.0 * min(steps["n"], 24) / 24

    return module, warming_up


def test_min_iter_delays_the_stopping_rule():
    module, loss_fn = _warming_up_problem()
    assert _fit(loss_fn, module, n_iter_no_change=2, min_iter=6).n_iter > 6
    module, loss_fn = _warming_up_problem()
    assert _fit(loss_fn, module, n_iter_no_change=2).n_iter <= 6  # stops during the warm-up


def test_a_fixed_schedule_runs_every_epoch_without_warning():
    # n_iter_no_change=None: the loss converges long before max_iter, yet all
    # epochs run (a sampler's or ADF's schedule) and nothing is reported as
    # non-convergence.
    module, loss_fn = _problem()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        result = _fit(loss_fn, module, max_iter=80, n_iter_no_change=None)
    assert result.n_iter == 80 and not result.stopped_early
    assert result.best_loss == min(result.loss_curve)


@pytest.mark.parametrize("n_samples", [40, 400, 4000])
def test_max_steps_bounds_the_steps_whatever_the_number_of_rows(n_samples):
    # A budget of 25 steps of 16 rows: 3 whole epochs then 1 of 40 rows, 2 epochs with 400 rows cut in
    # the second, or part of one epoch with 4,000; the last epoch's loss is the mean over the rows it saw.
    param = torch.nn.Parameter(torch.zeros(1))
    data = torch.arange(n_samples, dtype=torch.float32)
    batches = []

    def loss_fn(idx):
        batches.append(idx.clone())
        return (param * 0.0 + data[idx]).mean()  # depends on the rows only: checkable by hand

    with pytest.warns(ConvergenceWarning, match=r"maximum number of optimiser steps \(25\)"):
        result = fit_loop(loss_fn, torch.optim.SGD([param], lr=0.0), n_samples, batch_size=16, max_iter=1000,
                          max_steps=25, generator=torch.Generator().manual_seed(0), n_iter_no_change=2000)
    n_batches = -(-n_samples // 16)
    assert len(batches) == 25
    assert result.n_iter == -(-25 // n_batches) and not result.stopped_early
    last = torch.cat(batches[(result.n_iter - 1) * n_batches :])
    assert result.loss_curve[-1] == pytest.approx(float(data[last].mean()), rel=1e-6)


def test_max_steps_beyond_max_iter_changes_nothing():
    module, loss_fn = _problem()
    with pytest.warns(ConvergenceWarning, match=r"maximum number of epochs \(3\)"):
        result = _fit(loss_fn, module, max_iter=3, max_steps=1000)
    assert result.n_iter == 3 and len(result.loss_curve) == 3
