"""The one training loop shared by every skbayes estimator.

An estimator hands :func:`fit_loop` a loss closure over minibatch indices and
the optimiser; the loop owns shuffling, epochs, the loss curve, early stopping,
the progress bar, divergence detection and Ctrl-C.
"""

import copy
import math
import warnings
from dataclasses import dataclass, field

import torch
from sklearn.exceptions import ConvergenceWarning
from tqdm.auto import tqdm

from .nn import OptimizerChain

__all__ = ["OptimizerChain", "TrainingResult", "fit_loop"]


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


def _run_epoch(loss_fn, optimizer, n_samples, batch_size, generator, device):
    """One pass over a fresh permutation; returns the mean per-datum loss."""
    perm = torch.randperm(n_samples, generator=generator).to(device)
    total = 0.0
    for start in range(0, n_samples, batch_size):
        idx = perm[start : start + batch_size]
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(idx)
        loss.backward()
        optimizer.step()
        total += loss.detach() * len(idx)
    return float(total) / n_samples


def _diverged_error(epoch, loss):
    return ValueError(
        f"The training loss became {loss} at epoch {epoch}. Lower "
        "learning_rate_init, standardise X (e.g. with StandardScaler) and keep "
        "normalize_y=True, or raise prior_scale / a fixed noise level if the "
        "noise or the weights collapsed."
    )


def fit_loop(
    loss_fn,
    optimizer,
    n_samples,
    *,
    batch_size,
    max_iter,
    generator,
    device="cpu",
    tol=1e-4,
    n_iter_no_change=10,
    min_iter=0,
    validation_score_fn=None,
    module=None,
    verbose=False,
    estimator_name="estimator",
):
    """Minimise a minibatch loss with the given optimiser.

    Parameters
    ----------
    loss_fn : callable
        ``loss_fn(idx) -> torch.Tensor`` (scalar): the per-datum loss of the
        training rows ``idx`` (a LongTensor on ``device``), differentiable.
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
    device : torch.device or str, default="cpu"
        Where ``idx`` should live.
    tol : float, default=1e-4
        Minimum improvement of the loss (or validation score) per epoch.
    n_iter_no_change : int or None, default=10
        Stop after this many consecutive epochs without an improvement of at
        least ``tol`` (scikit-learn's MLP rule). None runs exactly
        ``max_iter`` epochs, a fixed schedule (e.g. the passes of assumed
        density filtering or the epochs of a sampler), and then does not warn.
    min_iter : int, default=0
        Epochs that run before the stopping rule starts counting, e.g. a KL
        warm-up during which the loss is expected to rise.
    validation_score_fn : callable, optional
        ``validation_score_fn() -> float`` (higher is better). When given,
        stopping follows the validation score and ``module`` is restored to
        its best-scoring state at the end.
    module : torch.nn.Module, optional
        The module whose state is restored when early stopping.
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
        If ``max_iter`` epochs ran without meeting the stopping criterion.
    UserWarning
        If training was interrupted with Ctrl-C (the model keeps its current
        parameters and stays usable).
    """
    result = TrainingResult()
    early = validation_score_fn is not None
    if early:
        result.validation_scores = []
    best = -math.inf if early else math.inf
    best_state = None
    no_improvement = 0
    epochs = tqdm(range(max_iter), disable=not verbose, desc=estimator_name, unit="epoch")
    try:
        for epoch in epochs:
            loss = _run_epoch(loss_fn, optimizer, n_samples, batch_size, generator, device)
            if not math.isfinite(loss):
                raise _diverged_error(epoch + 1, loss)
            result.loss_curve.append(loss)
            result.n_iter = epoch + 1
            if early:
                score = float(validation_score_fn())
                result.validation_scores.append(score)
                improved = score > best + tol
                if score > best:
                    best = score
                    best_state = copy.deepcopy(module.state_dict())
                epochs.set_postfix(loss=f"{loss:.4f}", val=f"{score:.4f}", refresh=False)
            else:
                improved = loss < best - tol
                # during the first min_iter epochs the reference is the latest loss
                best = loss if epoch < min_iter else min(best, loss)
                epochs.set_postfix(loss=f"{loss:.4f}", refresh=False)
            no_improvement = 0 if improved or epoch < min_iter else no_improvement + 1
            if n_iter_no_change is not None and no_improvement > n_iter_no_change:
                result.stopped_early = True
                break
        else:
            if n_iter_no_change is not None:
                warnings.warn(
                    f"{estimator_name}: maximum number of epochs ({max_iter}) reached and "
                    "the optimisation has not converged yet.",
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
    return _finish(result, early, best, best_state, module)


def _finish(result, early, best, best_state, module):
    """Record the best loss or score, and restore the best state when early stopping."""
    if early:
        result.best_validation_score = best if result.validation_scores else None
        if best_state is not None:
            module.load_state_dict(best_state)
    else:
        result.best_loss = best if result.loss_curve else None
    return result
