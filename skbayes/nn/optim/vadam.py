r"""Variational Adam (Vadam): natural-gradient mean-field VI written as Adam.

Khan et al. 2018 show that natural-gradient variational inference for a
mean-field Gaussian q(w) = N(mu, diag sigma^2) and a N(0, 1/lambda) prior,
with the Hessian of the data term replaced by squared gradients, is Adam run
on weights perturbed by q's own noise (Cinelli 2019, section 3.6, Algorithm 6
and eqs. 3.57-3.81). With N training rows, lambda~ = lambda / N and g the
gradient of the minibatch *mean* negative log-likelihood at a weight draw, one
step is

.. math::

    \sigma &= 1 / \sqrt{N (s + \tilde\lambda)}, \qquad
    \theta = \mu + \sigma \odot \epsilon, \quad \epsilon \sim \mathcal N(0, I),\\
    m &\leftarrow \beta_1 m + (1 - \beta_1)\,(g + \tilde\lambda \mu), \qquad
    s \leftarrow \beta_2 s + (1 - \beta_2)\, g \odot g,\\
    \hat m &= m / (1 - \beta_1^t), \qquad \hat s = s / (1 - \beta_2^t), \qquad
    \mu \leftarrow \mu - \alpha\, \hat m / (\sqrt{\hat s} + \tilde\lambda),

and the posterior is q = N(mu, sigma^2) with sigma^{-2} = N s + lambda. The
prior enters only through lambda~ (in m, in the step's denominator and in
sigma), so the loss that is differentiated is the data term alone.

:class:`Vadam` runs this on the :class:`~skbayes.nn.MeanFieldLinear` layers of
a :class:`~skbayes.nn.BayesianMLP`: it optimises each layer's ``mu`` and, after
every step, writes sigma into the layer's ``rho`` (sigma = softplus(rho)) under
``torch.no_grad``, which it does not optimise and whose ``requires_grad`` it
leaves alone. The network's ``sample_parameters``/``forward_with``
(prediction) and ``kl`` therefore read the Vadam posterior directly.
:func:`perturbed_nll` is the matching loss: one weight draw theta per Monte-Carlo
sample, shared by every row of the minibatch, as in the paper.

Two choices differ from Algorithm 6 as printed, both documented on
:class:`Vadam`: the initial s_0 (from a given initial precision or the layer's
current sigma), and the bias correction of s, applied to its gradient part
only.

References
----------
.. [Khan2018] M. E. Khan, D. Nielsen, V. Tangkaratt, W. Lin, Y. Gal and
   A. Srivastava, "Fast and scalable Bayesian deep learning by
   weight-perturbation in Adam", ICML 2018 (Cinelli 2019, section 3.6).
"""

import torch
from torch import nn
from torch.nn import functional as F

from ..functional import inverse_softplus
from ..layers import MeanFieldLinear, gaussian_weight_draws
from ._closure import evaluate_closure

__all__ = ["Vadam", "perturbed_nll"]


class Vadam(torch.optim.Optimizer):
    r"""Variational Adam on the mean-field layers of a Bayesian MLP.

    Implements Algorithm 6 of Cinelli 2019 (section 3.6; [Khan2018]_): the
    parameters are the posterior means ``mu`` of each
    :class:`~skbayes.nn.MeanFieldLinear` layer (weights and bias), each layer
    with the prior precision lambda = 1 / ``layer.prior_scale``\ :sup:`2`. The
    gradient ``mu.grad`` must be that of the per-datum *mean* negative
    log-likelihood of a minibatch at a weight draw (see
    :func:`perturbed_nll`), with no KL term.

    After each :meth:`step` (and at construction) the posterior standard
    deviation sigma = (N s + lambda)^{-1/2} is written into each layer's
    ``rho`` (as softplus^{-1}(sigma), under ``torch.no_grad``): ``rho`` is
    Vadam's state, not a trained parameter, so no other optimiser should
    hold it. Its ``requires_grad`` flag is left as it is; :func:`perturbed_nll`
    does not differentiate through sigma.

    Differences from Algorithm 6 as printed:

    * Initial s. s_0 = max(p_0 - lambda, 0) / N for an initial precision
      p_0: ``initial_precision`` if given (``"prior"``: each layer's prior
      precision, i.e. s_0 = 0, as in the code of Cinelli 2019's experiments; its text, section 3.7, says
      precision 10), else the layer's current sigma^{-2} (sigma = softplus(rho)), so
      that a warm start continues from the posterior it left. An initial
      precision below the prior's starts at the prior.
    * Bias correction. s_t = beta_2^t s_0 + v_t, where v_t is Adam's
      zero-initialised squared-gradient average. sigma uses s_t itself, a
      convex blend that moves q from sigma_0 to the squared-gradient
      posterior over about 1 / (1 - beta_2) steps. The step uses
      s^_t = v_t / (1 - beta_2^t), Adam's bias correction of the gradient part:
      correcting s_t as a whole would multiply s_0 by beta_2 / (1 - beta_2)
      (999 for beta_2 = 0.999) and freeze mu for hundreds of steps when
      sigma_0 is small. With s_0 = 0 both read as in the paper.

    * Batch scaling (``batch_size`` = B > 1). The squared gradient g^2 of
      the *minibatch-mean* gradient (the gradient-magnitude approximation,
      Cinelli 2019, eq. 3.79) has expectation (E g)^2 + Var(g_i) / B: near the
      optimum, where the mean gradient vanishes, it is about 1/B of the
      per-example squared gradients (the generalised Gauss-Newton diagonal
      of eq. 3.78), so the printed algorithm inflates the posterior
      variances by up to a factor B where the data dominate the prior.
      With ``batch_size=B`` the precision uses B s (the step still uses s,
      so the step sizes are the paper's): near the optimum that is the
      per-example mean squared gradient; away from it, it overestimates the
      precision. ``batch_size=1`` is the printed algorithm.

    Parameters
    ----------
    layers : BayesianMLP or iterable of MeanFieldLinear
        The network (its ``layers`` are used) or the layers to train.
    n_data : int
        Number N of training rows (>= 1).
    lr : float, default=1e-3
        Step size alpha (> 0).
    betas : (float, float), default=(0.9, 0.999)
        Decay rates beta_1 of m and beta_2 of s, each in [0, 1).
    initial_precision : float, "prior" or None, default=None
        Initial posterior precision p_0 of every weight; ``"prior"`` is each
        layer's prior precision 1 / ``layer.prior_scale``\ :sup:`2`; None
        reads it from each layer's current sigma.
    batch_size : int, default=1
        B of the batch scaling above (>= 1): the rows of the minibatch whose
        mean gradient ``mu.grad`` is; 1 is the printed algorithm.

    Raises
    ------
    TypeError
        If a layer is not a :class:`~skbayes.nn.MeanFieldLinear`.
    ValueError
        If ``n_data``, ``lr``, ``betas``, ``initial_precision`` or ``batch_size`` are out of range.

    Notes
    -----
    State per layer: ``step`` t, ``exp_avg`` m, ``exp_avg_sq`` v and
    ``initial_sq`` s_0, each of the shape of ``mu``, (in_features + 1,
    out_features).
    """

    def __init__(
        self, layers, n_data, lr=1e-3, betas=(0.9, 0.999), initial_precision=None, batch_size=1
    ):
        layers = list(
            layers.layers
            if isinstance(layers, nn.Module) and hasattr(layers, "layers")
            else layers
        )
        for layer in layers:
            if not isinstance(layer, MeanFieldLinear):
                raise TypeError(
                    f"Vadam trains MeanFieldLinear layers; got {type(layer).__name__}."
                )
        if int(n_data) < 1:
            raise ValueError(
                f"n_data must be a positive number of training rows; got {n_data}."
            )
        if not lr > 0:
            raise ValueError(f"lr must be positive; got {lr}.")
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be a positive number of rows; got {batch_size}.")
        self.batch_size = int(batch_size)
        if isinstance(initial_precision, str):
            valid = initial_precision == "prior"
        else:
            valid = initial_precision is None or initial_precision > 0
        if not valid:
            raise ValueError(
                f"initial_precision must be positive, \"prior\" or None; got {initial_precision!r}."
            )
        if not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"betas must lie in [0, 1); got {betas}.")
        groups = [
            {"params": [layer.mu], "prior_precision": 1.0 / layer.prior_scale**2}
            for layer in layers
        ]
        super().__init__(groups, {"lr": lr, "betas": tuple(betas)})
        self.n_data = int(n_data)
        self._layers = layers
        with torch.no_grad():
            for group, layer in zip(self.param_groups, layers):
                if initial_precision is None:
                    precision = F.softplus(layer.rho).pow(-2)
                elif isinstance(initial_precision, str):  # "prior"
                    precision = torch.full_like(layer.mu, group["prior_precision"])
                else:
                    precision = torch.full_like(layer.mu, float(initial_precision))
                state = self.state[layer.mu]
                state["step"] = 0
                state["exp_avg"] = torch.zeros_like(layer.mu)
                state["exp_avg_sq"] = torch.zeros_like(layer.mu)
                state["initial_sq"] = (precision - group["prior_precision"]).clamp_min(
                    0.0
                ) / self.n_data
        self.sync_posterior()

    def _precision(self, group, layer):
        """Posterior precision N s_t + lambda of the layer, shape of ``mu``."""
        state = self.state[layer.mu]
        beta2 = group["betas"][1]
        s = self.batch_size * state["exp_avg_sq"] + beta2 ** state["step"] * state["initial_sq"]
        return self.n_data * s + group["prior_precision"]

    def load_state_dict(self, state_dict):
        """Load a state from :meth:`~torch.optim.Optimizer.state_dict`, then write its sigma into the layers' ``rho``.

        The posterior standard deviations are part of the optimiser's state
        (s and its initial value), so a loaded state also sets them.
        """
        super().load_state_dict(state_dict)
        self.sync_posterior()

    @torch.no_grad()
    def sync_posterior(self):
        """Write sigma = (N s + lambda)^{-1/2} into every layer's ``rho``."""
        for group, layer in zip(self.param_groups, self._layers):
            layer.rho.copy_(inverse_softplus(self._precision(group, layer).rsqrt()))

    @torch.no_grad()
    def step(self, closure=None):
        """One Vadam step on every layer's ``mu``, then :meth:`sync_posterior`.

        Parameters
        ----------
        closure : callable, optional
            Re-evaluates the loss (with gradients) and returns it; the
            step hands it back (None without a closure).
        """
        loss = evaluate_closure(closure)
        for group, layer in zip(self.param_groups, self._layers):
            mu = layer.mu
            if mu.grad is None:
                continue
            beta1, beta2 = group["betas"]
            prior = group["prior_precision"] / self.n_data  # lambda~
            state = self.state[mu]
            state["step"] += 1
            t = state["step"]
            grad = mu.grad
            state["exp_avg"].mul_(beta1).add_(grad + prior * mu, alpha=1.0 - beta1)
            state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
            m_hat = state["exp_avg"] / (1.0 - beta1**t)
            s_hat = state["exp_avg_sq"] / (1.0 - beta2**t)
            mu.addcdiv_(m_hat, s_hat.sqrt_().add_(prior), value=-group["lr"])
        self.sync_posterior()
        return loss


def perturbed_nll(network, likelihood, x, y, n_samples=1, generator=None):
    """Mean negative log-likelihood of a minibatch at weights drawn from q.

    Draws ``n_samples`` weight settings theta = mu + sigma * eps from the
    network's mean-field q (``network.sample_parameters``), each shared by all
    rows of the minibatch as in Vadam ([Khan2018]_; Cinelli 2019, Algorithm 6),
    and averages -log p(y_i | x_i, theta) over rows and draws. Its gradient
    with respect to ``mu`` is the g of :class:`Vadam` (averaged over the
    draws before it is squared). The local reparameterisation of
    :class:`~skbayes.nn.MeanFieldLinear` is not used: it would draw
    independent weights per row, a lower-variance g whose square is not the
    statistic the paper's s averages.

    Parameters
    ----------
    network : BayesianMLP
        With mean-field layers (``mu``, ``rho``) and ``forward_with``.
    likelihood : module with ``log_prob(y, f) -> (..., n)``
    x : torch.Tensor of shape (n, n_features)
    y : torch.Tensor of shape (n, k)
        Targets as the likelihood expects them ((n, 1) class indices for a
        categorical likelihood).
    n_samples : int, default=1
        Weight draws averaged.
    generator : torch.Generator, optional
        Source of the weight noise.

    Returns
    -------
    loss : torch.Tensor, scalar
        -(1 / (n_samples n)) sum_s sum_i log p(y_i | x_i, theta_s), in nats.
    """
    # sigma is Vadam's state: draw theta = mu + sigma * eps with sigma held
    # fixed, so that backward reaches mu only
    parameters = [
        gaussian_weight_draws(layer.mu, F.softplus(layer.rho).detach(), n_samples, generator)
        for layer in network.layers
    ]
    f = network.forward_with(x, parameters)
    return -likelihood.log_prob(y, f).mean()
