"""The closure argument of :meth:`torch.optim.Optimizer.step`, shared by the optimisers."""

import torch


def evaluate_closure(closure):
    """``closure()`` with gradients enabled (inside a ``no_grad`` step), or None without a closure."""
    if closure is None:
        return None
    with torch.enable_grad():
        return closure()
