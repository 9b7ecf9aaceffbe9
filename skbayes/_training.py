"""The one training loop shared by every skbayes estimator, and its callbacks.

An estimator hands :func:`fit_loop` a loss closure over minibatch indices and
the optimiser; the loop owns shuffling, epochs, the loss curve, divergence
detection, the progress bar and Ctrl-C. Everything else that happens during
training is a :class:`Callback` with hooks at train begin, epoch begin, batch
end, epoch end and train end (skorch's pattern, kept small): the linear KL
warm-up, the samples an MCMC method keeps, the prior refinement of PBP, the
validation score and the stopping rule itself. Callbacks run in the order
given: the inference method's own first, then the validation score and the
stopping rule, then the user's, so that a user's callback sees the epoch's
final state.
"""

import copy
import math
import warnings
from dataclasses import dataclass, field

import torch
from sklearn.exceptions import ConvergenceWarning
from tqdm.auto import tqdm

from .nn import OptimizerChain, kl_warmup_weight

__all__ = [
    "Callback",
    "EarlyStopping",
    "KLWarmup",
    "OptimizerChain",
    "TrainingResult",
    "TrainingState",
    "ValidationScore",
    "fit_loop",
]


@dataclass
class TrainingResult:
    """What :func:`fit_loop` measured.

    Attributes
    ----------
    loss_curve : list of float
        Mean training loss of each epoch (per datum).
    n_iter : int
        Number of epochs run.
    validation_scores : list of float or None
        Validation score of each epoch (higher is better), when early stopping.
    best_loss : float or None
        Lowest epoch loss, when not early stopping.
    best_validation_score : float or None
        Highest validation score, when early stopping.
    stopped_early : bool
        True if a stopping criterion ended training before ``max_iter``.
    """

    loss_curve: list = field(default_factory=list)
    n_iter: int = 0
    validation_scores: list = None
    best_loss: float = None
    best_validation_score: float = None
    stopped_early: bool = False


@dataclass
class TrainingState:
    """What the callbacks see (and may change) while ``fit_loop`` runs.

    Attributes
    ----------
    module : torch.nn.Module or None
        The module being trained (what the stopping rule restores).
    optimizer : torch.optim.Optimizer
    n_batches : int
        Optimiser steps per epoch.
    epoch : int
        0-based index of the current epoch (the one that just ended, in
        ``on_epoch_end``).
    step : int
        Optimiser steps taken since the loop started (after the step, in
        ``on_batch_end``).
    batch_loss : torch.Tensor or None
        Loss of the last minibatch (detached), in ``on_batch_end``.
    epoch_loss : float or None
        Mean per-datum loss of the epoch that just ended, in ``on_epoch_end``.
    validation_score : float or None
        Score of the epoch that just ended, set by ``ValidationScore``.
    result : TrainingResult
        The loss curve and validation scores so far.
    stop : bool
        Set to True in a hook to end training after this epoch.
    """

    module: object
    optimizer: object
    n_batches: int
    epoch: int = 0
    step: int = 0
    batch_loss: object = None
    epoch_loss: float = None
    validation_score: float = None
    result: TrainingResult = field(default_factory=TrainingResult)
    stop: bool = False


class Callback:
    """Base class of the training-loop callbacks: override the hooks you need.

    Every hook receives the :class:`TrainingState`; set ``state.stop = True``
    to end training after the current epoch. A callback passed to an
    estimator (``callbacks=[...]``) is deep-copied by ``clone``, like any
    parameter, and is reused by every ``fit``: reset its state in
    :meth:`on_train_begin`.
    """

    def on_train_begin(self, state):
        """Before the first epoch."""

    def on_epoch_begin(self, state):
        """Before the first minibatch of epoch ``state.epoch``."""

    def on_batch_end(self, state):
        """After the optimiser step of every minibatch."""

    def on_epoch_end(self, state):
        """After the last minibatch of an epoch, with ``state.epoch_loss`` set."""

    def on_train_end(self, state):
        """After the last epoch (also after Ctrl-C)."""


class KLWarmup(Callback):
    """Linear warm-up of the KL weight over the first ``n_epochs`` epochs, per optimiser step.

    ``weight`` rises from 0 at the first step to 1 after ``n_epochs`` epochs
    (:func:`skbayes.nn.kl_warmup_weight`, Sønderby et al. 2016); the loss
    reads it before each step.

    Parameters
    ----------
    n_epochs : int
        Length of the warm-up in epochs; 0 keeps the weight at 1.
    start_epoch : int, default=0
        Epochs already run (by earlier ``partial_fit`` calls): the warm-up
        continues from there.
    """

    def __init__(self, n_epochs, start_epoch=0):
        self.n_epochs = n_epochs
        self.start_epoch = start_epoch
        self.weight = 1.0

    def _update(self, state):
        steps_per_epoch = state.n_batches
        step = self.start_epoch * steps_per_epoch + state.step
        self.weight = kl_warmup_weight(step, steps_per_epoch * self.n_epochs)

    def on_train_begin(self, state):
        self._update(state)

    def on_batch_end(self, state):
        self._update(state)


class ValidationScore(Callback):
    """Score the model on held-out rows at the end of every epoch.

    Parameters
    ----------
    score_fn : callable
        ``score_fn() -> float``, higher is better (e.g. the mean held-out log
        predictive density).
    """

    def __init__(self, score_fn):
        self.score_fn = score_fn

    def on_train_begin(self, state):
        state.result.validation_scores = []

    def on_epoch_end(self, state):
        state.validation_score = float(self.score_fn())
        state.result.validation_scores.append(state.validation_score)


class EarlyStopping(Callback):
    """Stop when the training loss (or the validation score) stops improving.

    scikit-learn's MLP rule: training stops after ``patience`` + 1
    consecutive epochs without an improvement of at least ``tol``. The
    monitored quantity is the validation score when a
    ``ValidationScore`` callback runs before this one (higher is
    better; the module is then restored to its best-scoring state at the
    end), else the epoch's training loss (lower is better). The estimators
    build this rule from their ``n_iter_no_change`` and ``tol``; pass
    another one in ``callbacks`` for a second, e.g. stricter, rule.

    Parameters
    ----------
    patience : int, default=10
        Epochs without improvement tolerated.
    tol : float, default=1e-4
        Minimum improvement.
    min_epochs : int, default=0
        Epochs that run before the rule starts counting, e.g. a KL warm-up
        during which the loss is expected to rise.
    restore_best : bool, default=True
        When monitoring a validation score, load the best-scoring state of
        the module at the end.

    Attributes
    ----------
    best : float
        Best monitored value so far.
    stopped_epoch : int or None
        0-based epoch after which this rule stopped training.
    """

    def __init__(self, patience=10, tol=1e-4, *, min_epochs=0, restore_best=True):
        self.patience = patience
        self.tol = tol
        self.min_epochs = min_epochs
        self.restore_best = restore_best

    def on_train_begin(self, state):
        self._validation = state.result.validation_scores is not None
        self.best = -math.inf if self._validation else math.inf
        self._best_state = None
        self._no_improvement = 0
        self.stopped_epoch = None

    def on_epoch_end(self, state):
        epoch = state.epoch
        if self._validation:
            score = state.validation_score
            improved = score > self.best + self.tol
            if score > self.best:
                self.best = score
                if self.restore_best and state.module is not None:
                    self._best_state = copy.deepcopy(state.module.state_dict())
        else:
            loss = state.epoch_loss
            improved = loss < self.best - self.tol
            # during the first min_epochs epochs the reference is the latest loss
            self.best = loss if epoch < self.min_epochs else min(self.best, loss)
        self._no_improvement = 0 if improved or epoch < self.min_epochs else self._no_improvement + 1
        if self._no_improvement > self.patience:
            state.stop = True
            self.stopped_epoch = epoch

    def on_train_end(self, state):
        if self._best_state is not None:
            state.module.load_state_dict(self._best_state)


def _diverged_error(epoch, loss):
    return ValueError(
        f"The training loss became {loss} at epoch {epoch}. Lower "
        "learning_rate_init, standardise X (e.g. with StandardScaler) and keep "
        "normalize_y=True, or raise prior_scale / a fixed noise level if the "
        "noise or the weights collapsed."
    )


def _gradient_clearer(optimizer):
    """``clear()`` doing ``optimizer.zero_grad(set_to_none=True)``, without its first call's import of ``torch._dynamo``.

    torch wraps ``Optimizer.zero_grad`` in ``torch._compile._disable_dynamo``,
    which imports ``torch._dynamo`` (0.8-0.9 s) on its first call; setting
    the gradients to None is all that it does with ``set_to_none=True``,
    and all that :class:`OptimizerChain`'s does. Any other ``zero_grad``
    (an optimiser that overrides it, PBP's passes) is called. Decided once
    per fit, from the optimiser's type.
    """
    if type(optimizer).zero_grad not in (torch.optim.Optimizer.zero_grad, OptimizerChain.zero_grad):
        return lambda: optimizer.zero_grad(set_to_none=True)

    def clear():
        for group in optimizer.param_groups:
            for parameter in group["params"]:
                parameter.grad = None

    return clear


def compiled_loss(loss_fn, estimator_name="estimator"):
    """``loss_fn`` compiled by :func:`torch.compile`, falling back to ``loss_fn`` itself when compiling fails.

    The minibatch loss (forward pass, likelihood, KL or prior) is compiled
    with Inductor's defaults (C++/OpenMP code on the CPU, Triton on CUDA);
    AOTAutograd compiles its backward pass too. Compiling happens at the
    first call and again for each new batch shape (the last, smaller batch
    of an epoch), and is counted in the fit's time; Inductor caches the
    generated code on disk, so later fits of the same shapes compile
    faster. Where ``torch.compile`` is unsupported, the compiler is missing
    (no C++ toolchain) or the forward graph cannot be built, the error is
    caught, a ``RuntimeWarning`` names it, and training continues
    uncompiled from that step; an error of the loss itself is raised by the
    uncompiled call, without the warning. The backward graph is compiled
    at the first backward pass, outside this function: a failure there is
    not caught and ends the fit.

    Parameters
    ----------
    loss_fn : callable
        ``loss_fn(idx) -> torch.Tensor``, as :func:`fit_loop` takes.
    estimator_name : str, default="estimator"
        Name used in the warning.

    Returns
    -------
    loss_fn : callable
    """
    state = {"fn": None}

    def fall_back(exc):
        state["fn"] = loss_fn
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        warnings.warn(f"{estimator_name}: torch.compile failed ({type(exc).__name__}: {first}); training "
                      "continues uncompiled.", RuntimeWarning, stacklevel=3)

    try:
        state["fn"] = torch.compile(loss_fn)
    except Exception as exc:  # noqa: BLE001 - torch.compile unsupported here (e.g. this Python version)
        fall_back(exc)

    def call(idx):
        if state["fn"] is loss_fn:
            return loss_fn(idx)
        try:
            return state["fn"](idx)
        except Exception as exc:  # noqa: BLE001 - any compiler failure falls back to eager
            loss = loss_fn(idx)  # an error of the loss itself is raised here, uncompiled, without the warning
            fall_back(exc)
            return loss

    return call


def fit_loop(
    loss_fn,
    optimizer,
    n_samples,
    *,
    batch_size,
    max_iter,
    generator,
    max_steps=None,
    device="cpu",
    tol=1e-4,
    n_iter_no_change=10,
    min_iter=0,
    validation_score_fn=None,
    module=None,
    callbacks=(),
    user_callbacks=(),
    verbose=False,
    estimator_name="estimator",
):
    """Minimise a minibatch loss with the given optimiser.

    Parameters
    ----------
    loss_fn : callable
        ``loss_fn(idx) -> torch.Tensor`` (scalar): the per-datum loss of the
        training rows ``idx`` (a LongTensor on ``device``), differentiable;
        or, for a method whose update needs no gradients and is made by
        ``loss_fn`` itself (the ADF pass of PBP), a loss that does not
        require grad, which is then not back-propagated.
    optimizer : torch.optim.Optimizer
        Already holding the parameters to train.
    n_samples : int
        Number of training rows.
    batch_size : int
        Minibatch size (the last batch of an epoch may be smaller).
    max_iter : int
        Maximum number of epochs.
    generator : torch.Generator
        CPU generator for the shuffling.
    max_steps : int or None, default=None
        Maximum number of optimiser steps (minibatches) over all epochs, a
        budget that does not grow with ``n_samples``: training ends after
        ``max_iter`` epochs or ``max_steps`` steps, whichever comes first
        (the last epoch may then be cut short; its loss is the mean over the
        rows it saw, and it counts in ``n_iter``). None: no step budget.
    device : torch.device or str, default="cpu"
        Where ``idx`` should live.
    tol : float, default=1e-4
        Minimum improvement of the loss (or validation score) per epoch.
    n_iter_no_change : int or None, default=10
        Stop after this many consecutive epochs without an improvement of at
        least ``tol`` (:class:`EarlyStopping`, scikit-learn's MLP rule). None
        runs exactly ``max_iter`` epochs, a fixed schedule (e.g. the passes
        of assumed density filtering or the epochs of a sampler), and then
        does not warn.
    min_iter : int, default=0
        Epochs that run before the stopping rule starts counting, e.g. a KL
        warm-up during which the loss is expected to rise.
    validation_score_fn : callable, optional
        ``validation_score_fn() -> float`` (higher is better). When given,
        stopping follows the validation score and ``module`` is restored to
        its best-scoring state at the end.
    module : torch.nn.Module, optional
        The module whose state is restored when early stopping.
    callbacks : sequence of Callback, default=()
        The model's own callbacks (the inference method's: KL warm-up, kept
        samples...), run before the validation score and the stopping rule.
    user_callbacks : sequence of Callback, default=()
        The user's callbacks (the estimator's ``callbacks``), run after them,
        so that they see this epoch's validation score and stopping
        decision.
    verbose : bool, default=False
        Show a tqdm progress bar over epochs with the current loss.
    estimator_name : str
        Name used in warnings.

    Returns
    -------
    result : TrainingResult

    Raises
    ------
    ValueError
        If the loss becomes NaN or infinite; the message says what to change.

    Warns
    -----
    ConvergenceWarning
        If ``max_iter`` epochs or ``max_steps`` steps ran without meeting the
        stopping criterion.
    UserWarning
        If training was interrupted with Ctrl-C (the model keeps its current
        parameters and stays usable).
    """
    loop_callbacks = []
    if validation_score_fn is not None:
        loop_callbacks.append(ValidationScore(validation_score_fn))
    if n_iter_no_change is not None:
        loop_callbacks.append(EarlyStopping(n_iter_no_change, tol, min_epochs=min_iter))
    callbacks = [*callbacks, *loop_callbacks, *user_callbacks]

    n_batches = -(-n_samples // batch_size)
    clear_gradients = _gradient_clearer(optimizer)
    state = TrainingState(module=module, optimizer=optimizer, n_batches=n_batches)
    result = state.result
    epochs = tqdm(range(max_iter), disable=not verbose, desc=estimator_name, unit="epoch")
    try:
        for callback in callbacks:
            callback.on_train_begin(state)
        for epoch in epochs:
            state.epoch = epoch
            for callback in callbacks:
                callback.on_epoch_begin(state)
            perm = torch.randperm(n_samples, generator=generator).to(device)
            total, n_seen = 0.0, 0
            for start in range(0, n_samples, batch_size):
                if max_steps is not None and state.step >= max_steps:
                    break
                idx = perm[start : start + batch_size]
                clear_gradients()
                loss = loss_fn(idx)
                if loss.requires_grad:  # not for a method that updated its posterior in loss_fn (PBP)
                    loss.backward()
                optimizer.step()
                state.step += 1
                state.batch_loss = loss.detach()
                total += state.batch_loss * len(idx)
                n_seen += len(idx)
                for callback in callbacks:
                    callback.on_batch_end(state)
            loss = float(total) / n_seen
            if not math.isfinite(loss):
                raise _diverged_error(epoch + 1, loss)
            state.epoch_loss = loss
            result.loss_curve.append(loss)
            result.n_iter = epoch + 1
            for callback in callbacks:
                callback.on_epoch_end(state)
            if state.validation_score is None:
                epochs.set_postfix(loss=f"{loss:.4f}", refresh=False)
            else:
                epochs.set_postfix(loss=f"{loss:.4f}", val=f"{state.validation_score:.4f}", refresh=False)
            if state.stop:
                result.stopped_early = True
                break
            if max_steps is not None and state.step >= max_steps:
                budget = f"maximum number of optimiser steps ({max_steps})"
                break
        else:
            budget = f"maximum number of epochs ({max_iter})"
        if not result.stopped_early and n_iter_no_change is not None:
            warnings.warn(
                f"{estimator_name}: {budget} reached and the optimisation has not converged yet.",
                ConvergenceWarning,
            )
    except KeyboardInterrupt:
        warnings.warn(
            f"{estimator_name}: training interrupted by the user after {result.n_iter} "
            "epochs; the model keeps its current parameters.",
            UserWarning,
        )
    finally:
        epochs.close()
        for callback in callbacks:
            callback.on_train_end(state)
    if result.validation_scores is not None:
        result.best_validation_score = max(result.validation_scores, default=None)
    elif result.loss_curve:
        # the best loss after the min_iter epochs in which the loss may rise
        result.best_loss = min(result.loss_curve[max(min(min_iter, result.n_iter) - 1, 0) :])
    return result
