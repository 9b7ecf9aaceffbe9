r"""Stochastic-gradient Hamiltonian Monte Carlo (SGHMC).

SGHMC (Chen et al. 2014) samples from p(w | D) ∝ exp(-U(w)) with the
minibatch energy

.. math::

    \tilde U(w) = -\frac{N}{|B|} \sum_{i \in B} \log p(y_i \mid x_i, w) - \log p(w)

(Rossi 2022, eq. 2.27), using Hamiltonian dynamics with a friction term that
cancels the noise of the minibatch gradient. In the momentum / learning-rate
parameterisation of Chen et al. (2014, section 3.3, eq. 15), with
v = ε M⁻¹ r, η = ε² M⁻¹, α = ε M⁻¹ C and β̂ = ε M⁻¹ B̂:

.. math::

    v &\leftarrow v - \eta \nabla \tilde U(w) - \alpha v
         + \mathcal N(0, 2 (\alpha - \hat\beta) \eta), \\
    w &\leftarrow w + v.

This is Rossi 2022, eqs. 2.29-2.30, in which the gradient term must carry a
*minus* sign (the thesis prints +ε∇Ũ in eq. 2.30; with a plus the chain
climbs the energy instead of sampling exp(-U)).

The estimators minimise a *per-datum* loss L = Ũ / N (see
:func:`~skbayes.nn.negative_elbo`), so the gradient handed to the optimiser is
∇L = ∇Ũ / N, and :class:`SGHMC` takes N to rebuild ∇Ũ. Two mass matrices:

* plain SGHMC (unit mass, β̂ = 0 as in the experiments of Chen et al. 2014,
  section 4), with the per-datum learning rate ``lr`` = η N, the step size
  that SGD with momentum 1 - α would use on L:

  .. math::

      v \leftarrow (1 - \alpha) v - \mathrm{lr}\, \nabla L(w)
          + \sqrt{2 \alpha\, \mathrm{lr} / N}\; \xi, \qquad
      w \leftarrow w + v, \qquad \xi \sim \mathcal N(0, I).

  It is exact as lr -> 0; otherwise the minibatch noise, whose variance
  relative to the injected noise is about ``lr N Var[∇l_i] / (2 α |B|)``, heats
  the chains.

* scale-adapted SGHMC (Springenberg et al. 2016; the sampler of Rossi 2022,
  eqs. 2.31-2.36): the mass is the running root mean square sqrt(V̂) of
  ∇Ũ, adapted during burn-in and then frozen, η = ``lr`` / sqrt(V̂), and the
  minibatch noise is estimated as B̂ = V̂ ε / 2, which removes lr² from the
  variance of the injected noise. Every coordinate then moves at a rate set
  by ``lr`` whatever the scale of its gradient, and the minibatch noise is
  accounted for; this is what the estimators use.

References
----------
.. [Chen2014] T. Chen, E. B. Fox and C. Guestrin, "Stochastic gradient
   Hamiltonian Monte Carlo", ICML 2014.
.. [Rossi2022] S. Rossi, "Improving scalability and inference in
   probabilistic deep models", PhD thesis, 2022, section 2.4.
.. [Springenberg2016] J. T. Springenberg, A. Klein, S. Falkner and F. Hutter,
   "Bayesian optimization with robust Bayesian neural networks", NeurIPS 2016.
"""

import math
import operator

import torch

from ._closure import evaluate_closure

__all__ = ["SGHMC"]


class SGHMC(torch.optim.Optimizer):
    r"""Stochastic-gradient HMC (Chen et al. 2014) on a per-datum loss, optionally scale-adapted.

    Each :meth:`step` reads ``p.grad`` = ∇L, with L = Ũ / N the per-datum
    energy (negative log posterior divided by N), forms G = N ∇L = ∇Ũ and
    applies, coordinate-wise, the update of [Chen2014]_ eq. 15 with a
    diagonal mass (Rossi 2022, eqs. 2.29-2.30 with the sign of the gradient
    term corrected to minus):

    ``v <- (1 - friction) v - eta * G + sqrt(max(2 * friction * eta - c, 0)) * xi``,
    ``p <- p + v``,   ``xi ~ N(0, I)``,

    where, with ``scale_adapted=False`` (plain SGHMC, unit mass),
    eta = ``lr`` / N and c = 0 (β̂ = 0, as in the experiments of Chen et al.
    2014), so that ``eta * G = lr * grad``: ``lr`` is the step size that SGD
    with momentum 1 - friction would use on L.

    With ``scale_adapted=True`` (the adaptive SGHMC of Springenberg et al.
    2016, used in Rossi 2022, eqs. 2.31-2.36) the mass is the running root
    mean square of G: eta = ``lr`` / sqrt(V̂) and c = ``lr^2``, the noise
    of the minibatch gradient estimated as B̂ = V̂ eta / 2. During the first
    ``n_adapt_steps`` steps V̂ follows G² with the adaptive window τ of
    Rossi 2022, eqs. 2.32-2.34 (τ <- τ - τ g²/V̂ + 1, g <- g + (G - g)/(τ+1),
    V̂ <- V̂ + (G² - V̂)/(τ+1), the window read before its update), then it
    is frozen, so that the samples after the adaptation come from a
    sampler with a fixed mass. ``lr`` is then ε² in the notation of
    Rossi 2022, eq. 2.36: every coordinate moves by about
    ``lr / friction`` per step whatever the scale of its gradient (as with
    Adam's step size), which makes one default work across data sets.

    The momentum v starts at zero; on the first step g and τ start at 0
    and 1, and V̂ at the mean of G² over the parameter tensor (a coordinate
    whose first gradient is zero by chance would otherwise get an unbounded
    step). For small ``lr`` the iterates are (correlated) samples of
    p(w | D) ∝ exp(-N L(w)).

    Parameters
    ----------
    params : iterable of torch.Tensor or dicts
        Parameters to sample (as for any :class:`torch.optim.Optimizer`).
    lr : float
        Step size (> 0): the per-datum learning rate eta N of plain SGHMC,
        or ε² of scale-adapted SGHMC (see above). The stationary
        distribution is exact only as lr -> 0; plain SGHMC is stable for
        about lr * λ_max < 4, λ_max the largest eigenvalue of the Hessian
        of L.
    n_data : int
        Number N of training rows, the factor between L and the energy Ũ.
    friction : float, default=0.05
        α in (0, 1]: the fraction of the momentum removed at each step
        (1 - α is the momentum coefficient of SGD with momentum). Also sets
        the injected noise variance 2 α eta.
    scale_adapted : bool, default=False
        Use the running root mean square of the gradient as the mass.
    n_adapt_steps : int, default=0
        Steps during which the mass is adapted (``scale_adapted`` only),
        typically (part of) the burn-in; afterwards it stays fixed.
    gradient_noise : bool, default=True
        ``scale_adapted`` only: whether the gradients are minibatch
        estimates, whose noise B̂ = V̂ ε / 2 is then subtracted from the
        injected noise (the c = ``lr^2`` above). Pass False when every
        step sees all N rows: the gradient is exact, B̂ = 0 and c = 0.
        Subtracting c from exact gradients makes the chain too cold, and
        where 2 ``friction`` eta < ``lr^2`` it injects no noise at all (the
        coordinate is then optimised, not sampled).
    generator : torch.Generator, optional
        Source of the injected noise, on the parameters' device; with a
        seeded generator the chain is reproducible.

    Raises
    ------
    ValueError
        If ``lr`` <= 0, ``n_data`` < 1, ``friction`` is not in (0, 1] or
        ``n_adapt_steps`` < 0.
    """

    _tiny = 1e-16

    def __init__(
        self, params, lr, n_data, friction=0.05, *, scale_adapted=False, n_adapt_steps=0, gradient_noise=True,
        generator=None,
    ):
        if not lr > 0:
            raise ValueError(f"lr must be > 0; got {lr}.")
        if not n_data >= 1:
            raise ValueError(f"n_data must be >= 1; got {n_data}.")
        if not 0 < friction <= 1:
            raise ValueError(f"friction must be in (0, 1]; got {friction}.")
        if not n_adapt_steps >= 0:
            raise ValueError(f"n_adapt_steps must be >= 0; got {n_adapt_steps}.")
        defaults = {
            "lr": float(lr),
            "n_data": int(n_data),
            "friction": float(friction),
            "scale_adapted": bool(scale_adapted),
            "n_adapt_steps": int(n_adapt_steps),
            "gradient_noise": bool(gradient_noise),
        }
        super().__init__(params, defaults)
        self.generator = generator

    def add_param_group(self, param_group):
        """:meth:`torch.optim.Optimizer.add_param_group`, without the first call's import of ``torch._dynamo``.

        torch wraps the method in ``torch._compile._disable_dynamo``, whose
        first call imports ``torch._dynamo`` (0.8-0.9 s on the project's 2-core
        CPU: ``examples/benchmarks/results/performance/default_fit_time*.md``)
        to keep the method out of compiled graphs. This optimiser is not
        compiled, so the method itself (the wrapper's ``__wrapped__``) is
        called; the wrapped method where torch has no ``__wrapped__``.
        """
        method = getattr(torch.optim.Optimizer.add_param_group, "__wrapped__", None)
        if method is None:
            return super().add_param_group(param_group)
        return method(self, param_group)

    @torch.no_grad()
    def step(self, closure=None):
        """One SGHMC step with the gradients in ``p.grad``.

        Once every parameter of a group has its state (after the first step),
        the group's update runs on one flat buffer per state quantity (the
        per-parameter state entries are views of those buffers): about thirty
        operations per step instead of thirty per parameter tensor, with the
        same numbers (the same element-wise operations, and the injected
        noise drawn parameter by parameter in the same order).

        Parameters
        ----------
        closure : callable, optional
            Re-evaluates the loss and its gradients, returns the loss, which
            the step returns too (None without a closure).
        """
        loss = evaluate_closure(closure)
        for index, group in enumerate(self.param_groups):
            flat = self._flat_state(index, group)
            if flat is None:
                self._step_per_tensor(group)
            else:
                self._step_flat(group, flat)
        return loss

    def __getstate__(self):
        """torch's optimiser state (defaults, state, groups) and the noise generator, for copies and pickles."""
        return {**super().__getstate__(), "generator": self.generator}

    def state_dict(self):
        """:meth:`torch.optim.Optimizer.state_dict`, each state tensor its own copy (not a view of the flat buffers)."""
        state_dict = super().state_dict()  # its per-parameter dicts are the live ones: copied, not changed
        state_dict["state"] = {
            index: {
                key: value.clone() if isinstance(value, torch.Tensor) and value._base is not None else value
                for key, value in state.items()
            }
            for index, state in state_dict["state"].items()
        }
        return state_dict

    def _flat_state(self, index, group):
        """The group's flat buffers (a dict), built on first use; None where the per-tensor step must run.

        The per-tensor step runs on a group that is empty, lists a parameter
        twice, or whose parameters are not all at the same step with their
        state built (the first step), lack a gradient, or differ in dtype or
        device.
        """
        params = group["params"]
        keys = ("momentum", "v_hat", "g", "tau") if group["scale_adapted"] else ("momentum",)
        flats = self.__dict__.setdefault("_flat", {})
        flat = flats.get(index)
        if (
            flat is not None and flat["keys"] == keys and len(flat["params"]) == len(params)
            and all(map(operator.is_, flat["params"], params)) and all(p.grad is not None for p in params)
            and all(self.state[p].get(key) is flat["views"][key][i] for key in keys for i, p in enumerate(params))
        ):
            return flat
        flats.pop(index, None)  # rebuilt below, or the per-tensor step runs (and may change the state)
        if not params or len(set(map(id, params))) != len(params):  # empty, or a parameter listed twice
            return None
        first = params[0]
        steps = {self.state[p].get("step") for p in params}
        if (
            None in steps or len(steps) != 1
            or any(p.grad is None or p.dtype != first.dtype or p.device != first.device for p in params)
            or any(key not in self.state[p] for p in params for key in keys)
        ):
            return None
        sizes = [p.numel() for p in params]

        def views_of(buffer):  # one view of the flat buffer per parameter, of its shape
            return [part.view(p.shape) for part, p in zip(buffer.split(sizes), params)]

        # a state replaced wholesale (load_state_dict) has new tensors, not these views: rebuilt by the check above
        flat = {"params": list(params), "keys": keys, "views": {}}
        for key in keys:
            buffer = torch.cat([self.state[p][key].reshape(-1) for p in params])
            flat[key], flat["views"][key] = buffer, views_of(buffer)
            for p, view in zip(params, flat["views"][key]):
                self.state[p][key] = view
                self.state[p].pop("step_scales", None)
        flat["noise"] = torch.empty_like(flat["momentum"])
        flat["noise_views"] = views_of(flat["noise"])
        flats[index] = flat
        return flat

    def _step_flat(self, group, flat):
        """One step of the group on its flat buffers (:meth:`_update` once, for all its tensors)."""
        params = flat["params"]
        step = self.state[params[0]]["step"] + 1
        for p in params:
            self.state[p]["step"] = step
        for xi in flat["noise_views"]:  # the draws of torch.randn(p.shape), parameter by parameter
            xi.normal_(generator=self.generator)
        grad = torch.cat([p.grad.reshape(-1) for p in params])
        self._update(group, flat, grad, flat["noise"], step)
        torch._foreach_add_(params, flat["views"]["momentum"])

    def _step_per_tensor(self, group):
        """One step of the group, tensor by tensor (the first step, and groups :meth:`_flat_state` declines)."""
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["momentum"] = torch.zeros_like(p)
            state["step"] += 1
            xi = torch.randn(p.shape, generator=self.generator, device=p.device, dtype=p.dtype)
            self._update(group, state, p.grad, xi, state["step"])
            p.add_(state["momentum"])

    def _update(self, group, state, grad, xi, step):
        """The momentum update, in place, of one parameter tensor or of a group's flat buffer.

        ``state`` holds the momentum (and V̂, g, τ, the cached step scales),
        ``grad`` is ∇L and ``xi`` the standard normal draws, all of one shape.
        """
        lr, alpha, n_data = group["lr"], group["friction"], group["n_data"]
        v = state["momentum"]
        if not group["scale_adapted"]:
            # eta = lr / N, eta * G = lr * grad, noise variance 2 alpha eta.
            v.mul_(1.0 - alpha).add_(grad, alpha=-lr).add_(xi, alpha=math.sqrt(2.0 * alpha * lr / n_data))
            return
        grad = grad * n_data  # G, the gradient of the energy
        if "v_hat" not in state:
            # The tensor's mean square as the first estimate: a coordinate
            # whose first gradient happens to be ~0 must not get a huge step.
            state["v_hat"] = (grad * grad).mean().expand_as(grad).clone()
            # g = 0 keeps g^2 <= V-hat at every step (both are averages with
            # the same weights), hence tau >= 1.
            state["g"], state["tau"] = torch.zeros_like(grad), torch.ones_like(grad)
        elif step <= group["n_adapt_steps"]:
            v_hat, g, tau = state["v_hat"], state["g"], state["tau"]
            rate = 1.0 / (tau + 1.0)
            tau.add_(1.0 - tau * g * g / (v_hat + self._tiny))
            g.add_(rate * (grad - g))
            v_hat.add_(rate * (grad * grad - v_hat))
            state.pop("step_scales", None)
        correction = lr * lr if group["gradient_noise"] else 0.0  # B-hat term
        settings = (lr, alpha, correction)
        cached = state.get("step_scales")
        if cached is not None and cached[0] == settings:
            # V-hat no longer adapts: eta and the noise's std are those of the step before
            eta, noise_std = cached[1], cached[2]
        else:
            eta = lr / (state["v_hat"].sqrt() + self._tiny)
            noise_std = (2.0 * alpha * eta - correction).clamp_(min=self._tiny).sqrt()
            if step > group["n_adapt_steps"]:
                state["step_scales"] = (settings, eta, noise_std)
        v.mul_(1.0 - alpha).sub_(eta * grad).add_(xi * noise_std)
