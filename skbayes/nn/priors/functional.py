r"""GP-induced functional priors for Bayesian MLPs: weight priors fitted so that the
network's prior over functions matches a Gaussian process [Tran2022]_.

A weight prior p(w; psi) induces a prior over functions
p_nn(f; psi) = \int p(f | w) p(w; psi) dw. Its hyperparameters psi are chosen
so that, at measurement points X_M = [x_1, ..., x_M] drawn from the training
inputs, the function values f_M of the network are distributed like those of a
target GP(0, k), by minimising the 1-Wasserstein distance in its dual form
(Kantorovich-Rubinstein; Rossi 2022, section 5.3 and appendix A.2):

.. math::

    W_1(p_{gp}, p_{nn}) = \sup_{\|\phi\|_L \le 1}
        E_{p_{gp}}[\phi(f_M)] - E_{p_{nn}(\psi)}[\phi(f_M)],

with the critic phi a small MLP on the M function values, kept 1-Lipschitz by
the gradient penalty of [Gulrajani2017]_. The min-max problem (Rossi 2022,
eq. 5.6)

.. math::

    \min_\psi \max_\theta\; E_{p_{gp}}[\phi_\theta(f_M)] - E_{p_{nn}(\psi)}[\phi_\theta(f_M)]
        - \lambda\, E_{\hat f}\big[(\|\nabla_{\hat f} \phi_\theta(\hat f)\|_2 - 1)^2\big]

is solved by alternating ``n_critic_steps`` Adam steps on theta with one Adam
step on psi (:func:`fit_functional_prior`). The penalty is *subtracted* in the
critic's maximisation, i.e. added to the critic loss that is minimised (the
thesis prints "+lambda" inside the max, a slip). The prior step needs draws of
f_M that are differentiable in psi: the weights are reparameterised,
w = sigma_l epsilon.

Three prior families (Rossi 2022, section 5.4, Table 5.1):

* :class:`LayerGaussianPrior` (GPI-G): w ~ N(0, sigma_{w,l}^2) and
  b ~ N(0, sigma_{b,l}^2) per layer l, the scales optimised on the log scale.
* :class:`LayerInverseGammaPrior` (GPI-H): sigma_{w,l}^2 ~ InvGamma(alpha_{w,l},
  beta_{w,l}) (shape, rate) and w | sigma^2 ~ N(0, sigma^2), likewise for the
  biases; alpha and beta optimised on the log scale. SGHMC then samples the
  weights with a Gibbs step on each layer's variance from the conjugate
  conditional (:func:`inverse_gamma_conditional`)

  .. math::

      \sigma^2 \mid w \sim \mathrm{InvGamma}\!\left(\alpha + \tfrac{n}{2},\;
      \beta + \tfrac12 \textstyle\sum_{i=1}^n w_i^2\right).

* :class:`LayerFlowPrior` (GPI-NF): GPI-G's Gaussian as the base p_0 and K
  planar flows per layer on the layer's weights and biases together,
  w_l = t_K o ... o t_1(w_{0,l}) with t_k(w) = w + u_k tanh(theta_k^T w + b_k)
  (eqs. 5.7-5.9); the scales and the flows' u, theta, b are fitted. The
  density of the flowed prior is never needed: the prior fit only draws from
  it, and SGHMC samples the base variables w_0 under p_0 while the network
  computes with T(w_0) (:meth:`~skbayes.nn.StackedMLP.set_weight_transform`),
  which samples the same posterior over w without inverting the flows.

Weights use the layout of :class:`~skbayes.nn.StackedMLP` (f = W x + b, no
1/sqrt(fan-in) factor in the forward pass), so sigma_{w,l} is the standard
deviation of each weight itself.

References
----------
.. [Tran2022] B.-H. Tran, S. Rossi, D. Milios and M. Filippone, "All you need
   is a good functional prior for Bayesian deep learning", JMLR 23(74), 2022
   (Rossi 2022, chapter 5).
.. [Gulrajani2017] I. Gulrajani, F. Ahmed, M. Arjovsky, V. Dumoulin and
   A. Courville, "Improved training of Wasserstein GANs", NeurIPS 2017,
   algorithm 1.
"""

from contextlib import contextmanager

import torch
from torch import nn
from torch.distributions import InverseGamma

from ..flows import make_flow, planar_map
from ..functional import generator_device, standard_normal, standard_uniform
from ..linalg import cholesky
from ..networks import MLP, forward_with_parameters

__all__ = [
    "FrozenLayerFlow",
    "LayerFlow",
    "LayerFlowPrior",
    "LayerGaussianPrior",
    "LayerInverseGammaPrior",
    "WassersteinCritic",
    "critic_loss",
    "fit_functional_prior",
    "gp_function_draws",
    "gradient_penalty",
    "inverse_gamma_conditional",
    "seeded",
]

# Hidden widths of the critic (Tran et al. use two layers of 200 softplus units).
CRITIC_HIDDEN = (128, 128)


@contextmanager
def seeded(generator):
    """Run torch.distributions' samplers from ``generator``, leaving the global RNG as it was.

    The Gamma sampler of torch (and so :class:`~torch.distributions.InverseGamma`)
    takes no generator; inside this context the CPU's global RNG is forked,
    seeded from one draw of ``generator``, and restored on exit, so draws
    are reproducible from ``random_state`` and the user's global RNG state
    is unchanged. Sample on the CPU inside it.
    """
    seed = int(torch.randint(2**62, (1,), generator=generator, device=generator_device(generator)))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def _layer_shapes(layer_sizes):
    return list(zip(layer_sizes[:-1], layer_sizes[1:]))


class LayerGaussianPrior(nn.Module):
    """GPI-G: a Gaussian prior with one weight scale and one bias scale per layer [Tran2022]_.

    p(W_l) = N(0, sigma_{w,l}^2 I), p(b_l) = N(0, sigma_{b,l}^2 I); the
    scales are stored as log sigma (Rossi 2022, section 5.4, "GPI-G").

    Parameters
    ----------
    layer_sizes : sequence of int
        ``[n_features, *hidden_layer_sizes, n_outputs]``.
    weight_scale, bias_scale : float or None, default=None
        Initial scales; None starts the weights at 1/sqrt(fan-in) (the
        variance-preserving scale) and the biases at 1.
    device, dtype : optional
    """

    def __init__(self, layer_sizes, weight_scale=None, bias_scale=None, *, device=None, dtype=None):
        super().__init__()
        self.layer_sizes = [int(s) for s in layer_sizes]
        fan_in = torch.tensor([n_in for n_in, _ in _layer_shapes(self.layer_sizes)], dtype=torch.float64)
        w0 = fan_in.rsqrt() if weight_scale is None else torch.full_like(fan_in, float(weight_scale))
        b0 = torch.ones_like(fan_in) if bias_scale is None else torch.full_like(fan_in, float(bias_scale))
        self.log_weight_scale = nn.Parameter(w0.log().to(device=device, dtype=dtype))
        self.log_bias_scale = nn.Parameter(b0.log().to(device=device, dtype=dtype))

    def layer_scales(self, n_draws, generator=None):
        """Per-draw, per-layer standard deviations: two tensors of shape (n_draws, L)."""
        shape = (n_draws, len(self.layer_sizes) - 1)
        return self.log_weight_scale.exp().expand(shape), self.log_bias_scale.exp().expand(shape)

    def sample_parameters(self, n_draws, generator=None):
        """``n_draws`` networks from the prior, reparameterised (differentiable in the scales).

        Returns
        -------
        parameters : list of (W, b)
            Per layer, W of shape (n_draws, n_in, n_out) and b of shape
            (n_draws, 1, n_out): W = sigma_{w,l} epsilon, b = sigma_{b,l} epsilon'.
        """
        weight_scales, bias_scales = self.layer_scales(n_draws, generator)
        parameters = []
        ref = next(self.parameters())
        for layer, (n_in, n_out) in enumerate(_layer_shapes(self.layer_sizes)):
            eps_w = standard_normal((n_draws, n_in, n_out), ref, generator)
            eps_b = standard_normal((n_draws, 1, n_out), ref, generator)
            parameters.append((weight_scales[:, layer, None, None] * eps_w, bias_scales[:, layer, None, None] * eps_b))
        return parameters

    def hyperparameters(self):
        """The fitted scales, a dict of lists (one value per layer)."""
        return {
            "weight_scale": self.log_weight_scale.detach().exp().tolist(),
            "bias_scale": self.log_bias_scale.detach().exp().tolist(),
        }


class LayerInverseGammaPrior(LayerGaussianPrior):
    """GPI-H: inverse-Gamma hyperpriors on each layer's weight and bias variances [Tran2022]_.

    sigma_{w,l}^2 ~ InvGamma(alpha_{w,l}, beta_{w,l}) (shape, rate) and
    W_l | sigma_{w,l}^2 ~ N(0, sigma_{w,l}^2 I); likewise for the biases
    (Rossi 2022, section 5.4, "GPI-H"). alpha and beta are stored on the log
    scale. A function draw first draws the L variances, reparameterised
    through :class:`torch.distributions.InverseGamma` (implicit gradients of
    the Gamma sampler), then the weights.

    Parameters
    ----------
    layer_sizes : sequence of int
        ``[n_features, *hidden_layer_sizes, n_outputs]``.
    shape : float, default=2.0
        Initial alpha of every layer (> 0).
    device, dtype : optional

    Notes
    -----
    The initial rates put the prior mean of the variance, beta / (alpha - 1),
    at 1/fan-in for the weights and at 1 for the biases (for alpha > 1).
    """

    def __init__(self, layer_sizes, shape=2.0, *, device=None, dtype=None):
        nn.Module.__init__(self)
        self.layer_sizes = [int(s) for s in layer_sizes]
        fan_in = torch.tensor([n_in for n_in, _ in _layer_shapes(self.layer_sizes)], dtype=torch.float64)
        alpha = torch.full_like(fan_in, float(shape))
        mean_factor = max(float(shape) - 1.0, 1.0)
        factory = {"device": device, "dtype": dtype}
        self.log_weight_shape = nn.Parameter(alpha.log().to(**factory))
        self.log_weight_rate = nn.Parameter((mean_factor / fan_in).log().to(**factory))
        self.log_bias_shape = nn.Parameter(alpha.log().to(**factory))
        self.log_bias_rate = nn.Parameter(torch.full_like(fan_in, mean_factor).log().to(**factory))

    def hyperprior(self, kind):
        """InvGamma(alpha_l, beta_l) of the ``kind`` ("weight" or "bias") variances, batch shape (L,)."""
        return InverseGamma(getattr(self, f"log_{kind}_shape").exp(), getattr(self, f"log_{kind}_rate").exp())

    def layer_scales(self, n_draws, generator=None):
        """Per-draw, per-layer standard deviations drawn from the hyperpriors, shapes (n_draws, L).

        Differentiable in alpha and beta. The draws are made on the CPU from
        ``generator`` (see :class:`seeded`).
        """
        scales = []
        for kind in ("weight", "bias"):
            prior = self.hyperprior(kind)
            cpu = InverseGamma(prior.concentration.cpu(), prior.rate.cpu())
            with seeded(generator):
                variance = cpu.rsample((n_draws,))
            scales.append(variance.to(self.log_weight_shape.device).sqrt())
        return tuple(scales)

    def hyperparameters(self):
        """The fitted shapes and rates, a dict of lists (one value per layer)."""
        return {
            f"{kind}_{name}": getattr(self, f"log_{kind}_{name}").detach().exp().tolist()
            for kind in ("weight", "bias")
            for name in ("shape", "rate")
        }

    def gibbs_scales(self, weights, generator):
        """One Gibbs draw of every layer's weight and bias scale given the weights.

        Parameters
        ----------
        weights : list of torch.Tensor
            Per layer, shape (M, n_in + 1, n_out), the bias as the last row
            (:class:`~skbayes.nn.StackedLinear` layout), M chains.
        generator : torch.Generator

        Returns
        -------
        weight_scales, bias_scales : torch.Tensor of shape (M, L)
            sigma = sqrt(sigma^2), sigma^2 drawn from
            :func:`inverse_gamma_conditional` independently per chain and layer.
        """
        out = []
        for kind, part in (("weight", slice(None, -1)), ("bias", slice(-1, None))):
            sum_sq = torch.stack([w[:, part].detach().pow(2).sum(dim=(1, 2)) for w in weights], dim=1)
            sizes = torch.tensor([w[0, part].numel() for w in weights], dtype=sum_sq.dtype)
            prior = self.hyperprior(kind)
            conditional = inverse_gamma_conditional(
                prior.concentration.detach().cpu(), prior.rate.detach().cpu(), sum_sq.cpu(), sizes
            )
            with seeded(generator):
                variance = conditional.sample()
            out.append(variance.to(sum_sq.device).sqrt())
        return tuple(out)


class LayerFlow(nn.Module):
    """K planar flows on one layer's weights and biases together, in the stacked layout.

    Maps a tensor of shape (S, n_in + 1, n_out) (the bias as the last row, the
    layout of :class:`~skbayes.nn.StackedLinear`) to one of the same shape:
    each of the S slices is flattened to a vector of (n_in + 1) n_out values,
    passed through :class:`~skbayes.nn.flows.PlanarFlow` t_K o ... o t_1
    (Rossi 2022, eq. 5.7), and reshaped.

    Parameters
    ----------
    n_in, n_out : int
        The layer's input and output widths.
    n_flows : int
        K (>= 1).
    generator : torch.Generator, optional
        Source of the flows' initial u and theta.
    device, dtype : optional
    """

    def __init__(self, n_in, n_out, n_flows, *, generator=None, device=None, dtype=None):
        super().__init__()
        self.n_in, self.n_out = int(n_in), int(n_out)
        self.flow = make_flow("planar", (self.n_in + 1) * self.n_out, int(n_flows), generator=generator,
                              device=device, dtype=dtype)

    def forward(self, weight):
        """The flowed weights, shape (S, n_in + 1, n_out), of base weights ``weight`` of that shape."""
        w, _ = self.flow(weight.reshape(weight.shape[0], -1))
        return w.reshape(weight.shape)

    def frozen(self):
        """A :class:`FrozenLayerFlow`: the same map with its constrained u computed once, no gradients."""
        with torch.no_grad():
            flows = self.flow.flows
            return FrozenLayerFlow(torch.stack([f.u_hat() for f in flows]), torch.stack([f.w for f in flows]),
                                   torch.stack([f.b for f in flows]))


class FrozenLayerFlow(nn.Module):
    """A fitted :class:`LayerFlow` as fixed buffers, for the sampler's every step.

    The map of :class:`LayerFlow` without its log-determinants, with each
    flow's constrained u (:meth:`~skbayes.nn.flows.PlanarFlow.u_hat`) stored
    instead of recomputed.

    Parameters
    ----------
    u, w : torch.Tensor of shape (K, D)
    b : torch.Tensor of shape (K,)
    """

    def __init__(self, u, w, b):
        super().__init__()
        self.register_buffer("u", u.detach().clone())
        self.register_buffer("w", w.detach().clone())
        self.register_buffer("b", b.detach().clone())

    def forward(self, weight):
        """The flowed weights, shape (S, n_in + 1, n_out), of base weights ``weight`` of that shape."""
        z = weight.reshape(weight.shape[0], -1)
        for u, w, b in zip(self.u, self.w, self.b):
            z, _ = planar_map(z, u, w, b)
        return z.reshape(weight.shape)


class LayerFlowPrior(LayerGaussianPrior):
    """GPI-NF: GPI-G's per-layer Gaussian pushed through K planar flows per layer [Tran2022]_.

    w_{0,l} = (W_l, b_l) ~ N(0, diag(sigma_{w,l}^2, sigma_{b,l}^2)) and
    w_l = t_{l,K} o ... o t_{l,1}(w_{0,l}) with
    t_k(w) = w + u_k tanh(theta_k^T w + b_k) on the (n_in + 1) n_out values of
    layer l (Rossi 2022, eqs. 5.7-5.9, Table 5.1 "GPI-NF"). The scales and
    every flow's u, theta and b are the hyperparameters psi. The flows start
    near the identity (:class:`~skbayes.nn.flows.PlanarFlow`), so the prior
    starts as GPI-G's.

    Parameters
    ----------
    layer_sizes : sequence of int
        ``[n_features, *hidden_layer_sizes, n_outputs]``.
    n_flows : int
        K, per layer (>= 1).
    generator : torch.Generator, optional
        Source of the flows' initial parameters.
    device, dtype : optional
    """

    def __init__(self, layer_sizes, n_flows, *, generator=None, device=None, dtype=None):
        super().__init__(layer_sizes, device=device, dtype=dtype)
        self.n_flows = int(n_flows)
        dtype = self.log_weight_scale.dtype
        self.flows = nn.ModuleList(
            LayerFlow(n_in, n_out, self.n_flows, generator=generator, device=device, dtype=dtype)
            for n_in, n_out in _layer_shapes(self.layer_sizes)
        )

    def sample_parameters(self, n_draws, generator=None):
        """``n_draws`` networks from the flowed prior, differentiable in the scales and the flows.

        Returns
        -------
        parameters : list of (W, b)
            Per layer, W of shape (n_draws, n_in, n_out) and b of shape
            (n_draws, 1, n_out).
        """
        parameters = []
        for (w, b), flow in zip(super().sample_parameters(n_draws, generator), self.flows):
            flowed = flow(torch.cat([w, b], dim=1))
            parameters.append((flowed[:, :-1], flowed[:, -1:]))
        return parameters

    def weight_transform(self):
        """The per-layer maps from base to prior weights, frozen, for :meth:`~skbayes.nn.StackedMLP.set_weight_transform`.

        Returns
        -------
        transform : torch.nn.ModuleList of FrozenLayerFlow
        """
        return nn.ModuleList(flow.frozen() for flow in self.flows)

    def hyperparameters(self):
        """The fitted base scales (dict of per-layer lists) and ``n_flows``; the flows stay in the module."""
        return {**super().hyperparameters(), "n_flows": self.n_flows}


def inverse_gamma_conditional(shape, rate, sum_sq, n):
    """The conjugate conditional of a Gaussian variance: sigma^2 | w ~ InvGamma(alpha + n/2, beta + sum w^2 / 2).

    For sigma^2 ~ InvGamma(alpha, beta) and n weights w_i | sigma^2 ~ N(0,
    sigma^2) (the Gibbs step of GPI-H, Rossi 2022, section 5.4).

    Parameters
    ----------
    shape, rate : torch.Tensor
        alpha and beta (> 0), broadcastable with ``sum_sq``.
    sum_sq : torch.Tensor
        sum_i w_i^2.
    n : int or torch.Tensor
        Number of weights summed.

    Returns
    -------
    conditional : torch.distributions.InverseGamma
    """
    return InverseGamma(shape + 0.5 * n, rate + 0.5 * sum_sq)


def gp_function_draws(kernel, x, n_draws, n_outputs=1, generator=None):
    """Draws of a zero-mean GP at the rows of ``x``, independent per output.

    f = L epsilon with L L^T = K(x, x) (+ jitter, :func:`~skbayes.nn.cholesky`).

    Parameters
    ----------
    kernel : torch.nn.Module
        ``kernel(x1, x2) -> (n1, n2)`` (:mod:`skbayes.nn.gp.kernels`).
    x : torch.Tensor of shape (M, d)
        In the kernel's dtype (float64 is safest for the Cholesky).
    n_draws : int
    n_outputs : int, default=1
    generator : torch.Generator, optional

    Returns
    -------
    f : torch.Tensor of shape (n_draws, M, n_outputs)
    """
    with torch.no_grad():
        chol = cholesky(kernel(x, x))
        eps = standard_normal((n_draws, n_outputs, x.shape[0]), x, generator)
        return (eps @ chol.T).transpose(1, 2)


class WassersteinCritic(nn.Module):
    """The critic phi of the dual W1: an MLP from (..., n_inputs) function values to (...,) scores.

    Parameters
    ----------
    n_inputs : int
        Number of function values per draw (M measurement points times the outputs).
    hidden_layer_sizes : sequence of int, default=CRITIC_HIDDEN
    activation : str, default="relu"
    generator : torch.Generator, optional
        Source of the initial weights.
    device, dtype : optional
    """

    def __init__(self, n_inputs, hidden_layer_sizes=CRITIC_HIDDEN, activation="relu", *, generator=None,
                 device=None, dtype=None):
        super().__init__()
        self.mlp = MLP([n_inputs, *hidden_layer_sizes, 1], activation, generator=generator, device=device,
                       dtype=dtype)

    def forward(self, f):
        """Scores phi(f) of shape (...) for function values ``f`` of shape (..., n_inputs)."""
        return self.mlp(f).squeeze(-1)


def gradient_penalty(critic, real, fake, generator=None):
    """The WGAN-GP penalty E[(||grad phi(f_hat)||_2 - 1)^2] [Gulrajani2017]_ (algorithm 1, line 7).

    f_hat = eps real + (1 - eps) fake with eps ~ U[0, 1] per draw.

    Parameters
    ----------
    critic : callable
        (n, D) -> (n,).
    real, fake : torch.Tensor of shape (n, D)
    generator : torch.Generator, optional

    Returns
    -------
    penalty : torch.Tensor, scalar
        Differentiable in the critic's parameters (``create_graph=True``).
    """
    eps = standard_uniform((real.shape[0], 1), real, generator)
    f_hat = (eps * real.detach() + (1 - eps) * fake.detach()).requires_grad_(True)
    (grad,) = torch.autograd.grad(critic(f_hat).sum(), f_hat, create_graph=True)
    return (grad.norm(dim=-1) - 1).square().mean()


def critic_loss(critic, real, fake, penalty_weight, generator=None):
    """The critic's loss and the W1 estimate it gives (Rossi 2022, eq. 5.6; [Gulrajani2017]_).

    loss = E_fake[phi] - E_real[phi] + lambda GP, minimised over the critic,
    i.e. the dual objective maximised with the penalty subtracted.

    Parameters
    ----------
    critic : callable
        (n, D) -> (n,).
    real, fake : torch.Tensor of shape (n, D)
        Draws of the target (GP) and of the model (BNN prior).
    penalty_weight : float
        lambda (>= 0).
    generator : torch.Generator, optional

    Returns
    -------
    loss : torch.Tensor, scalar
    w1 : float
        E_real[phi] - E_fake[phi], the dual estimate of W1 (no penalty).
    """
    w1 = critic(real.detach()).mean() - critic(fake.detach()).mean()
    loss = -w1
    if penalty_weight > 0:
        loss = loss + penalty_weight * gradient_penalty(critic, real, fake, generator)
    return loss, float(w1.detach())


def fit_functional_prior(prior, kernel, X, *, activation="relu", n_outputs=1, n_measurement_points=32,
                         n_function_draws=128, n_critic_steps=5, penalty_weight=10.0, max_iter=200,
                         learning_rate=0.02, critic_learning_rate=1e-2, generator=None):
    """Fit a prior's hyperparameters to a GP by the Wasserstein min-max of Rossi 2022, eq. 5.6.

    Each prior step draws ``n_measurement_points`` rows of ``X`` (without
    replacement when there are enough), ``n_function_draws`` GP functions
    and BNN-prior functions there, takes ``n_critic_steps`` Adam steps on the
    critic (:func:`critic_loss`, fresh BNN draws each step) and one Adam step
    on the prior's parameters minimising -E_nn[phi(f_M)] (the part of the
    W1 estimate that depends on psi).

    Parameters
    ----------
    prior : LayerGaussianPrior or LayerInverseGammaPrior
        Fitted in place.
    kernel : torch.nn.Module
        The target GP's covariance (not trained), float64: the GP draws are
        made in float64 and then cast to the prior's dtype.
    X : torch.Tensor of shape (n, d)
        Training inputs, the empirical distribution of the measurement points.
    activation : str, default="relu"
        The BNN's non-linearity.
    n_outputs : int, default=1
        Outputs of the BNN; the GP is independent per output and the critic
        sees all M * n_outputs values of a draw.
    n_measurement_points : int, default=32
        M, the rows of ``X`` drawn at every prior step.
    n_function_draws : int, default=128
        Functions drawn from each of the GP and the BNN prior per step (>= 2).
    n_critic_steps : int, default=5
        Critic steps per prior step.
    penalty_weight : float, default=10.0
        lambda of the gradient penalty.
    max_iter : int, default=200
        Prior steps.
    learning_rate : float, default=0.02
        Adam step size of the prior (on its log parameters).
    critic_learning_rate : float, default=1e-2
        Adam step size of the critic (decay rates 0.5 and 0.9).
    generator : torch.Generator, optional

    Returns
    -------
    w1_trace : list of float
        The W1 estimate of each prior step, at the critic after its steps,
        on the draws of the prior step.
    """
    ref = next(prior.parameters())
    factory = {"device": ref.device, "dtype": ref.dtype}
    n_rows = X.shape[0]
    m = int(n_measurement_points)
    critic = WassersteinCritic(m * n_outputs, generator=generator, **factory)
    critic_optimizer = torch.optim.Adam(critic.parameters(), lr=critic_learning_rate, betas=(0.5, 0.9))
    prior_optimizer = torch.optim.Adam(prior.parameters(), lr=learning_rate)
    device = generator_device(generator, X.device)

    def bnn_draws(x):
        return forward_with_parameters(x, prior.sample_parameters(n_function_draws, generator), activation)

    trace = []
    for _ in range(int(max_iter)):
        if n_rows >= m:
            rows = torch.randperm(n_rows, generator=generator, device=device)[:m]
        else:
            rows = torch.randint(n_rows, (m,), generator=generator, device=device)
        x = X[rows.to(X.device)]
        real = gp_function_draws(kernel, x.double(), n_function_draws, n_outputs, generator).flatten(1)
        x, real = x.to(**factory), real.to(**factory)
        for _ in range(int(n_critic_steps)):
            with torch.no_grad():
                fake = bnn_draws(x).flatten(1)
            critic_optimizer.zero_grad()
            loss, _ = critic_loss(critic, real, fake, penalty_weight, generator)
            loss.backward()
            critic_optimizer.step()
        prior_optimizer.zero_grad()
        fake = bnn_draws(x).flatten(1)
        score_fake = critic(fake).mean()
        (-score_fake).backward()  # min over psi of E_gp[phi] - E_nn[phi]
        prior_optimizer.step()
        with torch.no_grad():
            trace.append(float(critic(real).mean() - score_fake.detach()))
    return trace
