"""L-BFGS with a strong Wolfe line search, driven one iteration at a time by the shared training loop.

For a deterministic full-batch objective, such as the collapsed bound of a
sparse GP regression ([Titsias2009]_, eq. 9), a quasi-Newton method reaches
the optimum in tens of iterations where Adam needs thousands of steps. The
shared loop (``skbayes._training.fit_loop``) evaluates the loss, back-
propagates and calls ``step()`` once per epoch; :class:`LoopLBFGS` makes that
step one L-BFGS iteration of :class:`torch.optim.LBFGS` ([NocedalWright2006]_,
algorithm 7.5, with the strong Wolfe line search of algorithm 3.5), reusing
the loop's evaluation as the iteration's first, so that the loop's callbacks,
progress bar, divergence check and stopping rule apply per iteration.

References
----------
.. [NocedalWright2006] J. Nocedal and S. J. Wright, "Numerical
   optimization", 2nd ed., Springer, 2006, chapters 3 and 7.
.. [Titsias2009] M. Titsias, "Variational learning of inducing variables
   in sparse Gaussian processes", AISTATS 2009.
"""

import math

import torch

__all__ = ["LoopLBFGS"]

# How far above the start a line-search point whose objective fails (or is not finite) is taken to be.
_FAILED_STEP_PENALTY = 1e10


class LoopLBFGS(torch.optim.LBFGS):
    """One L-BFGS iteration (strong Wolfe line search) per ``step()`` of a deterministic objective.

    The loop's loss must be :meth:`evaluate` (the objective at the current
    parameters, whatever rows it is asked for): ``step()`` takes its
    value and the gradients that the loop's backward pass left in ``.grad``
    as the iteration's start, searches along the L-BFGS direction with
    further evaluations of the objective, and leaves the parameters at the
    accepted point. ``converged`` becomes True, and ``step()`` does nothing
    more, once one of the tests of :class:`torch.optim.LBFGS` holds: the
    largest absolute gradient at most ``tolerance_grad``, or a change of the
    loss or of every parameter below ``tolerance_change`` over an iteration
    ([NocedalWright2006]_, section 7.2). A trial point of the line search
    where the objective raises a ValueError or LinAlgError (a failed
    Cholesky) or is not finite counts as a point far above the start (1e10
    more, zero gradient), so that the search steps back; the loop's own
    evaluation is not guarded (the loop raises as for any other loss).

    Parameters
    ----------
    params : iterable of torch.nn.Parameter
    objective : callable
        ``objective() -> torch.Tensor``, a differentiable scalar that does
        not depend on any randomness.
    tolerance_grad : float, default=1e-7
    tolerance_change : float, default=1e-9
    history_size : int, default=100
        Correction pairs kept (the memory of the inverse-Hessian estimate).
    max_line_search : int, default=25
        Objective evaluations per line search at most.

    Attributes
    ----------
    converged : bool
    n_evaluations : int
        Evaluations of the objective so far (the loop's included).
    """

    def __init__(self, params, objective, *, tolerance_grad=1e-7, tolerance_change=1e-9, history_size=100,
                 max_line_search=25):
        super().__init__(params, lr=1.0, max_iter=1, max_eval=1 + max_line_search, tolerance_grad=tolerance_grad,
                         tolerance_change=tolerance_change, history_size=history_size, line_search_fn="strong_wolfe")
        self._objective = objective
        self._loss = None
        self._previous_loss = None
        self.converged = False
        self.n_evaluations = 0

    def evaluate(self, *_):
        """The objective at the current parameters (arguments ignored), kept as the next iteration's start."""
        self._loss = self._objective()
        self.n_evaluations += 1
        return self._loss

    def step(self, closure=None):
        """One iteration from the last :meth:`evaluate`, whose gradients are in ``.grad``; returns its loss.

        ``closure`` is not used (the objective was given at construction).
        """
        if self._loss is None:
            raise RuntimeError("LoopLBFGS.step() needs the loss of evaluate() and its backward pass first.")
        start, self._loss = self._loss, None
        loss = float(start.detach())
        group = self.param_groups[0]
        if self.converged or not math.isfinite(loss):  # the loop raises on a non-finite loss
            return start
        grad_max = max((float(p.grad.abs().max()) for p in self._params if p.grad is not None), default=0.0)
        if grad_max <= group["tolerance_grad"] or (
                self._previous_loss is not None and abs(loss - self._previous_loss) < group["tolerance_change"]):
            self.converged = True
            return start
        self._previous_loss = loss
        first = [start]

        def closure_():
            if first:  # the loop's evaluation at the current point, gradients already in .grad
                return first.pop()
            self.zero_grad(set_to_none=True)
            try:
                value = self.evaluate()
            except (ValueError, torch.linalg.LinAlgError):  # e.g. a failed Cholesky: no model there
                value = None
            if value is None or not torch.isfinite(value):
                # A value far above the start, with zero gradients: the line search's cubic step then
                # backtracks towards the start (a tenth of the way in), as at any point too high.
                self.zero_grad(set_to_none=True)
                return torch.tensor(loss + _FAILED_STEP_PENALTY, dtype=torch.float64)
            value.backward()
            return value

        before = [p.detach().clone() for p in self._params]
        super().step(closure_)
        self._loss = None  # the line search's evaluations are not the loop's
        moved = max(float((p.detach() - b).abs().max()) for p, b in zip(self._params, before))
        if moved <= group["tolerance_change"]:
            self.converged = True
        return start
