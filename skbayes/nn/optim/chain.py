"""Several optimisers over disjoint parameters, driven as one.

Natural-gradient steps for a sparse GP's q(u) next to Adam for its
hyperparameters ([Salimbeni2018]_, section 4), or Vadam for a network's
weights next to Adam for the noise, all from the gradients of one backward
pass.

References
----------
.. [Salimbeni2018] H. Salimbeni, S. Eleftheriadis and J. Hensman, "Natural
   gradients in practice: non-conjugate variational inference in Gaussian
   process models", AISTATS 2018.
"""

from ._closure import evaluate_closure

__all__ = ["OptimizerChain"]


class OptimizerChain:
    """Several optimisers over disjoint parameters, driven as one.

    The shared training loop calls ``zero_grad`` and ``step`` on one object;
    this forwards both to each optimiser in order, e.g. Adam for the
    hyperparameters and natural-gradient steps for q(u), or Vadam for the
    weights and Adam for the noise, all using the gradients of the same
    backward pass.

    Parameters
    ----------
    *optimizers : torch.optim.Optimizer
        Each with its own parameters (the sets must not overlap).
    """

    def __init__(self, *optimizers):
        self.optimizers = list(optimizers)

    @property
    def param_groups(self):
        """The parameter groups of every optimiser, in order (list of dict)."""
        return [group for optimizer in self.optimizers for group in optimizer.param_groups]

    def zero_grad(self, set_to_none=True):
        """Reset the gradients of every optimiser's parameters."""
        for optimizer in self.optimizers:
            optimizer.zero_grad(set_to_none=set_to_none)

    def step(self, closure=None):
        """Step every optimiser in order; returns ``closure()`` if given."""
        loss = evaluate_closure(closure)
        for optimizer in self.optimizers:
            optimizer.step()
        return loss

    def state_dict(self):
        """List of the optimisers' state dicts."""
        return [optimizer.state_dict() for optimizer in self.optimizers]

    def load_state_dict(self, state_dicts):
        """Load a list returned by :meth:`state_dict`."""
        for optimizer, state in zip(self.optimizers, state_dicts, strict=True):
            optimizer.load_state_dict(state)
