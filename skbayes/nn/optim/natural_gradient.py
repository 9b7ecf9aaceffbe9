r"""Natural-gradient steps for a Gaussian variational distribution.

For q(v) = N(m, S) the natural parameters are theta = (S^{-1} m, -S^{-1}/2)
and the expectation parameters eta = (m, S + m m^T). The natural gradient
with respect to theta (the gradient preconditioned by the inverse Fisher
information of q) is the ordinary gradient with respect to eta, so a step
of size gamma on an objective F to maximise is ([Salimbeni2018]_, eq. 6;
[Hensman2013]_, section 3.1)

.. math::

    \theta \leftarrow \theta + \gamma\, \nabla_\eta F.

Here F = -N * loss, with loss the per-datum minibatch loss that the training
loop back-propagates (``loss_scale`` = N). For a model whose log-likelihood
is quadratic in v (Gaussian likelihood, conjugate) and the prior N(0, I),
one step with gamma = 1 on the full data lands on the optimal q, the exact
posterior of the linear model ([Hensman2013]_, section 3.1; [Salimbeni2018]_,
section 2): theta_new = theta_prior + theta_likelihood. With gamma < 1 the
step moves theta along the straight line to that optimum, by the fraction
gamma, and with minibatches it is a stochastic version of it.

The gradient with respect to eta is obtained from the gradients with respect
to m and the Cholesky factor L of S (how the model stores q), without a
second backward pass: writing G = dF/dS (symmetric), the chain rule through
S = L L^T gives dF/dL = tril(2 G L), which inverts to

.. math::

    G = \tfrac12 L^{-\top} \big(\mathrm{tril}(B) + \mathrm{tril}(B, -1)^\top\big) L^{-1},
    \qquad B = L^\top \frac{\partial F}{\partial L},

and then dF/d eta_2 = G, dF/d eta_1 = dF/dm - 2 G m.

References
----------
.. [Salimbeni2018] H. Salimbeni, S. Eleftheriadis and J. Hensman, "Natural
   gradients in practice: non-conjugate variational inference in Gaussian
   process models", AISTATS 2018.
.. [Hensman2013] J. Hensman, N. Fusi and N. D. Lawrence, "Gaussian processes
   for big data", UAI 2013.
"""

import torch

from ..variational.scale_tril import raw_from_scale_tril, scale_tril_from_raw
from ._closure import evaluate_closure

__all__ = ["NaturalGradient", "covariance_gradient"]


def covariance_gradient(scale_tril, scale_tril_grad):
    """Symmetric gradient with respect to S = L L^T from the gradient with respect to L.

    Parameters
    ----------
    scale_tril : torch.Tensor of shape (..., M, M)
        L, lower-triangular with a non-zero diagonal; leading dimensions
        are a batch.
    scale_tril_grad : torch.Tensor of shape (..., M, M)
        d loss / d L; only its lower triangle (diagonal included) is read.

    Returns
    -------
    grad : torch.Tensor of shape (..., M, M)
        The symmetric G with d loss = tr(G dS) for symmetric dS, i.e.
        ``tril(2 G L) == tril(scale_tril_grad)`` (see the module docstring).
    """
    b = scale_tril.mT @ torch.tril(scale_tril_grad)
    y = torch.tril(b) + torch.tril(b, -1).mT
    left = torch.linalg.solve_triangular(scale_tril.mT, y, upper=True)  # L^-T Y
    grad = 0.5 * torch.linalg.solve_triangular(scale_tril, left, upper=False, left=False)  # (L^-T Y) L^-1
    return 0.5 * (grad + grad.mT)


def _inverse_scale_tril(precision):
    """Lower-triangular L with L L^T = precision^{-1}, or None if precision is not positive definite.

    Factorises the row-and-column-reversed precision, J P J = R R^T, so that
    P^{-1} = (J R^{-T} J)(J R^{-T} J)^T with J R^{-T} J lower-triangular.
    """
    flipped = precision.flip(-2, -1)
    chol, info = torch.linalg.cholesky_ex(flipped)
    if info.any():
        return None
    eye = torch.eye(precision.shape[-1], dtype=precision.dtype, device=precision.device)
    inv_t = torch.linalg.solve_triangular(chol.mT, eye.expand_as(chol), upper=True)  # R^-T
    return inv_t.flip(-2, -1)


def _matvec(matrix, vector):
    """Batched matrix-vector product: (..., M, M) times (..., M) -> (..., M)."""
    return (matrix @ vector.unsqueeze(-1)).squeeze(-1)


class NaturalGradient(torch.optim.Optimizer):
    r"""Natural-gradient descent for a Gaussian q(v) = N(m, L L^T).

    q is stored as the mean ``m`` and a raw matrix whose strict lower
    triangle is that of L and whose diagonal is softplus^{-1} of L's (as in
    :class:`~skbayes.nn.gp.SVGP`). :meth:`step` reads the gradients
    that ``loss.backward()`` left on both, turns them into the gradient with
    respect to the expectation parameters, takes the step
    theta <- theta - lr * loss_scale * d loss / d eta in the natural
    parameters ([Salimbeni2018]_) and writes m and L back.

    When the new precision S^{-1} is not positive definite (possible for
    non-conjugate objectives or large steps), the step is halved, up to 10
    times, and otherwise skipped; ``state["n_backtracks"]`` counts the
    halvings. With a batch of Gaussians the step size is halved for all of
    them together.

    Parameters
    ----------
    mean : torch.nn.Parameter of shape (..., M)
        m; leading dimensions index independent Gaussians (e.g. one q(v)
        per latent function), each stepped with its own natural gradient.
    raw_scale_tril : torch.nn.Parameter of shape (..., M, M)
        Raw storage of L (see :func:`~skbayes.nn.variational.scale_tril_from_raw`).
    lr : float, default=0.1
        Step size gamma in (0, 1]. 1 reaches the optimum of a conjugate
        objective in one full-batch step.
    loss_scale : float, default=1.0
        N when the loss is the objective divided by N, so that the step is
        taken on the objective itself. Can be changed between steps through
        ``param_groups[0]["loss_scale"]``.

    Raises
    ------
    ValueError
        If ``lr`` is not in (0, 1] or ``loss_scale`` is not > 0, or the
        shapes do not match.

    Examples
    --------
    One observation y = 2 of v_0 with unit noise, prior N(0, I) on v in R^2:
    one step of size 1 gives the posterior, m = (1, 0), S = diag(1/2, 1).

    >>> import torch
    >>> from skbayes.nn.variational import scale_tril_from_raw
    >>> mean = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
    >>> raw = torch.nn.Parameter(torch.eye(2, dtype=torch.float64))
    >>> ngd = NaturalGradient(mean, raw, lr=1.0)
    >>> def loss():  # -E_q[log N(2 | v_0, 1)] + KL(q || N(0, I)), constants dropped
    ...     tril = scale_tril_from_raw(raw)
    ...     cov = tril @ tril.T
    ...     kl = 0.5 * (cov.trace() + mean @ mean - 2 - 2 * tril.diagonal().log().sum())
    ...     return 0.5 * ((2.0 - mean[0]) ** 2 + cov[0, 0]) + kl
    >>> ngd.zero_grad()
    >>> loss().backward()
    >>> _ = ngd.step()
    >>> [round(v, 6) for v in mean.tolist()]
    [1.0, 0.0]
    >>> tril = scale_tril_from_raw(raw.detach())
    >>> [[round(v, 6) for v in row] for row in (tril @ tril.T).tolist()]
    [[0.5, 0.0], [0.0, 1.0]]
    """

    def __init__(self, mean, raw_scale_tril, lr=0.1, loss_scale=1.0):
        if not 0.0 < lr <= 1.0:
            raise ValueError(f"lr must be in (0, 1]; got {lr!r}.")
        if not loss_scale > 0:
            raise ValueError(f"loss_scale must be > 0; got {loss_scale!r}.")
        if mean.ndim < 1 or raw_scale_tril.shape != (*mean.shape, mean.shape[-1]):
            raise ValueError(
                f"mean must have shape (..., M) and raw_scale_tril (..., M, M); got {tuple(mean.shape)} "
                f"and {tuple(raw_scale_tril.shape)}."
            )
        super().__init__([mean, raw_scale_tril], {"lr": lr, "loss_scale": loss_scale})

    @torch.no_grad()
    def step(self, closure=None):
        """Take one natural-gradient step from the stored gradients.

        Parameters
        ----------
        closure : callable, optional
            Re-evaluates the loss (torch's optimiser protocol); its value is
            returned (None without a closure), and the step still uses the
            gradients already stored.
        """
        loss = evaluate_closure(closure)
        for group in self.param_groups:
            mean, raw = group["params"]
            if mean.grad is None and raw.grad is None:
                continue
            scale_tril = scale_tril_from_raw(raw)
            grad_m = torch.zeros_like(mean) if mean.grad is None else mean.grad
            if raw.grad is None:
                grad_s = torch.zeros_like(raw)
            else:
                # undo the softplus of the diagonal: dL_ii/draw_ii = sigmoid(raw_ii)
                diag = raw.grad.diagonal(dim1=-2, dim2=-1) / torch.sigmoid(raw.diagonal(dim1=-2, dim2=-1))
                grad_l = torch.tril(raw.grad, -1) + torch.diag_embed(diag)
                grad_s = covariance_gradient(scale_tril, grad_l)
            grad_eta1 = grad_m - 2.0 * _matvec(grad_s, mean)
            precision = torch.cholesky_inverse(scale_tril)
            theta1 = _matvec(precision, mean)
            step = group["lr"] * group["loss_scale"]
            state = self.state[mean]
            state.setdefault("n_backtracks", 0)
            for _ in range(11):
                # theta2 = -P / 2 moves by -step * G, so P moves by +2 step G
                new_precision = precision + 2.0 * step * grad_s
                new_tril = _inverse_scale_tril(0.5 * (new_precision + new_precision.mT))
                if (
                    new_tril is not None
                    and torch.isfinite(new_tril).all()
                    and (new_tril.diagonal(dim1=-2, dim2=-1) > 0).all()
                ):
                    break
                step *= 0.5
                state["n_backtracks"] += 1
            else:
                continue
            new_theta1 = theta1 - step * grad_eta1
            mean.copy_(_matvec(new_tril, _matvec(new_tril.mT, new_theta1)))
            raw.copy_(raw_from_scale_tril(new_tril))
        return loss
