r"""Linear layer with a multiplicative normalising flow posterior (MNF).

Louizos & Welling (2017) make a factorised Gaussian over the weights
richer with one auxiliary multiplicative variable per input unit:

.. math::

    z_0 \sim \mathcal N(\mu_z, \operatorname{diag}\sigma_z^2), \quad
    z = f_{T_f} \circ \dots \circ f_1(z_0), \quad
    q(W \mid z) = \prod_{i,j} \mathcal N(z_i \mu_{ij}, \sigma_{ij}^2)

(their eq. 4; Killingberg 2021, eq. 3.3), so that the marginal
q(W) = \int q(W | z) q(z) dz (Killingberg eq. 3.4) is a flexible,
correlated and possibly multimodal mixture of Gaussians. Its entropy is
intractable; the KL term of the ELBO is replaced by the upper bound of the
auxiliary reverse model r(z | W) (Louizos & Welling, eqs. 14-15;
Killingberg eq. 3.5):

.. math::

    \mathrm{KL}(q(W) \,\|\, p(W)) \le \mathbb E_{q(z) q(W \mid z)}\big[
        \mathrm{KL}(q(W \mid z) \,\|\, p(W)) + \log q(z) - \log r(z \mid W)\big],

with equality when r(z | W) is the exact q(z | W). The reverse model
(Louizos & Welling, eqs. 11-13) is a Gaussian after a second flow g:

.. math::

    \log r(z \mid W) = \log \mathcal N\big(g(z); \tilde\mu(W),
        \operatorname{diag}\tilde\sigma^2(W)\big)
        + \log\Big|\det \frac{\partial g}{\partial z}\Big|,\qquad
    a(W) = \frac1{D_{out}} \sum_j \tanh\big((c^\top W)_j\big),\quad
    \tilde\mu = b_1 a(W),\quad \tilde\sigma = \operatorname{sigmoid}(b_2 a(W)),

i.e. r draws a Gaussian and maps it through g^{-1} (the "inverse flow"
on r's side); only g and its log-determinant are evaluated. Biases are
mean-field Gaussian, N(m_b, s_b^2), without multiplicative noise (as in
Louizos & Welling's code); every weight and bias has the N(0,
prior_scale^2) prior.

References
----------
.. [Louizos2017] C. Louizos and M. Welling, "Multiplicative normalizing flows
   for variational Bayesian neural networks", ICML 2017.
.. [Killingberg2021] L. Killingberg, "Generative adversarial networks for
   flexible variational posteriors in Bayesian neural networks", MSc thesis,
   NTNU, 2021, section 3.2 and Algorithm 5.
"""

import math

import torch
from torch import nn
from torch.nn import functional as F

from ..flows import make_flow
from ..functional import gaussian_log_prob, inverse_softplus, standard_normal, uniform_init
from .conv import MeanFieldConv2d
from .mean_field import MeanFieldLinear, gaussian_weight_draws, local_reparameterization

__all__ = ["MNFConv2d", "MNFLinear"]

#: Initial standard deviation of q(z_0) (variance 0.1, as in Louizos & Welling's code).
Z_INIT_STD = math.sqrt(0.1)


class _MultiplicativeFlow:
    """q(z), the reverse model r(z | W) and the auxiliary KL bound, shared by the MNF layers.

    The layer's weights, seen as a matrix of shape (n_z, m) by
    :meth:`_z_weights`, have one multiplicative variable z_i per row:
    W_ij ~ N(z_i mu_ij, sigma_ij^2) (the inputs of :class:`MNFLinear`, the
    output channels of :class:`MNFConv2d`). The layer calls
    :meth:`_init_multiplicative_flow` in its constructor and implements
    :meth:`_z_weights` and :meth:`_kl_at_one` (its mean-field KL, z = 1).
    """

    #: ``kl()`` is a Monte-Carlo estimate; it takes ``generator`` and ``n_draws``.
    monte_carlo_kl = True

    def _init_multiplicative_flow(self, n_z, flow, n_flows, n_flows_reverse, hidden_size, generator, factory):
        self.z_mu = nn.Parameter(torch.ones(n_z, **factory))
        self.z_rho = nn.Parameter(torch.full((n_z,), inverse_softplus(Z_INIT_STD), **factory))
        self.flow_q = make_flow(flow, n_z, n_flows, hidden_size=hidden_size, generator=generator, **factory)
        self.flow_r = make_flow(flow, n_z, n_flows_reverse, hidden_size=2 * hidden_size, generator=generator, **factory)
        self.c, self.b1, self.b2 = (nn.Parameter(uniform_init((n_z,), n_z, generator, **factory)) for _ in range(3))
        self._pending = None  # (z, log q(z), generator) of the last training forward, for kl()

    def _z_weights(self):
        """Means and standard deviations of the weights, each (n_z, m), row i scaled by z_i."""
        raise NotImplementedError

    def _kl_at_one(self):
        """KL(q(W | z = 1) q(b) || p) in closed form, a scalar in nats."""
        raise NotImplementedError

    def __getstate__(self):
        # the pending draws hold an autograd graph and a generator: never copied or pickled
        state = dict(super().__getstate__())
        state["_pending"] = None
        return state

    def draw_z(self, shape, generator=None):
        """Draws of z from q(z) and their log-density.

        Parameters
        ----------
        shape : tuple of int
            Leading shape of the draws.
        generator : torch.Generator, optional

        Returns
        -------
        z : torch.Tensor of shape ``(*shape, n_z)``
            z = f(z_0), z_0 ~ N(mu_z, sigma_z^2).
        log_q : torch.Tensor of shape ``shape``
            ``log q(z) = log N(z_0; mu_z, sigma_z^2) - log |det df/dz_0|`` (nats).
        """
        sigma_z = F.softplus(self.z_rho)
        z0 = self.z_mu + sigma_z * standard_normal((*shape, self.z_mu.shape[0]), self.z_mu, generator)
        z, log_det = self.flow_q(z0)
        return z, gaussian_log_prob(z0, self.z_mu, sigma_z**2).sum(-1) - log_det

    def conditional_kl(self, z):
        """Closed-form KL(q(W | z) q(b) || p(W) p(b)) for each z, in nats.

        Parameters
        ----------
        z : torch.Tensor of shape (..., n_z)

        Returns
        -------
        kl : torch.Tensor of shape (...)
            sum_ij [log(s / sigma_ij) + (sigma_ij^2 + z_i^2 mu_ij^2) / (2 s^2) - 1/2]
            plus the biases' term, s = prior_scale.
        """
        # the mean-field KL is the one at z = 1; z moves only the means' term z_i^2 mu_ij^2 / (2 s^2)
        mean, _ = self._z_weights()
        return self._kl_at_one() + (z**2 - 1.0) @ (mean**2).sum(-1) / (2 * self.prior_scale**2)

    def _reverse_log_prob(self, z, projection):
        """log r(z | W) given the projection c^T W of shape (..., m) (``_z_weights``' layout)."""
        a = torch.tanh(projection).mean(-1, keepdim=True)
        mean, std = self.b1 * a, torch.sigmoid(self.b2 * a)
        z_b, log_det = self.flow_r(z)
        return gaussian_log_prob(z_b, mean, std**2).sum(-1) + log_det

    def kl(self, generator=None, n_draws=None):
        """Monte-Carlo estimate of the auxiliary bound on KL(q(W, b) || p), a scalar in nats.

        The mean over draws of KL(q(W | z) || p) + KL(q(b) || p) + log q(z)
        - log r(z | W), W ~ q(W | z) drawn through its projection c^T W
        (see :class:`MNFLinear`).

        Parameters
        ----------
        generator : torch.Generator, optional
            Source of new draws (``n_draws`` given, or nothing pending).
        n_draws : int, optional
            None: use (and release) the z of the last training :meth:`forward`
            and its generator, or one new z if there are none; an int: that
            many new z, whatever is pending.

        Returns
        -------
        kl : torch.Tensor, scalar
            An unbiased estimate of an upper bound on KL(q || p); one
            estimate may be below it, or negative.
        """
        pending, self._pending = self._pending, None
        if n_draws is None and pending is not None:
            z, log_q, generator = pending
        else:
            z, log_q = self.draw_z((1 if n_draws is None else n_draws,), generator)
        mean, sigma = self._z_weights()
        projection_mean = (z * self.c) @ mean
        projection_std = ((self.c**2) @ sigma**2).sqrt()
        projection = projection_mean + projection_std * standard_normal(projection_mean.shape, z, generator)
        bound = self.conditional_kl(z) + log_q - self._reverse_log_prob(z, projection)
        return bound.mean()


class MNFLinear(_MultiplicativeFlow, MeanFieldLinear):
    r"""Linear layer with a multiplicative normalising flow posterior over its weights.

    q(W | z) = prod N(z_i mu_ij, sigma_ij^2) with z = f(z_0),
    z_0 ~ N(mu_z, sigma_z^2) and f ``n_flows`` planar or RealNVP flows
    (:func:`skbayes.nn.flows.make_flow`); the biases are mean-field Gaussian.
    See the module docstring for the auxiliary bound and the reverse model.
    The mean-field layer it extends is q(W | z = 1), whose ``mu`` and
    ``rho`` (and their properties) it shares.

    The layer follows the protocol of :mod:`skbayes.nn.layers`:

    * :meth:`forward` (training): one z per row, then the local
      reparameterisation of the pre-activations given z ([Louizos2017]_,
      Algorithm 1; [Killingberg2021]_, Algorithm 5): mean (x * z) M + m_b,
      variance x^2 Sigma + s_b^2. The z it draws are kept for :meth:`kl`.
    * :meth:`sample_parameters`: one z per draw, then W ~ q(W | z) and b.
    * :meth:`kl`: a Monte-Carlo estimate of the auxiliary KL bound above.
      **It is stochastic.** Called right after a training :meth:`forward`,
      it averages the bound over that forward's z (one per row and draw), so
      the loss ``-log_lik + kl() / N`` of the estimators is an unbiased
      estimate of the negative auxiliary ELBO; the W in log r(z | W) is
      drawn afresh for each z, through its projection c^T W ~ N((c * z)^T M,
      (c^2)^T Sigma) (local reparameterisation of c^T W, as in Louizos &
      Welling's code; the same distribution as drawing W). Otherwise it
      draws ``n_draws`` new z from ``generator``.

    Parameters
    ----------
    in_features, out_features : int
        Input and output widths.
    flow : {"planar", "realnvp"}, default="planar"
        Kind of the flows of q(z) and of r's flow g.
    n_flows : int, default=2
        Flows T_f of q(z); 0 gives a Gaussian q(z).
    n_flows_reverse : int, default=2
        Flows T_b of r(z | W); 0 gives a Gaussian r.
    hidden_size : int, default=50
        Width of the coupling networks of q's RealNVP flows; r's have twice
        this width (Louizos & Welling's code; Killingberg 2021, appendix A).
    prior_scale : float, default=1.0
        Standard deviation of the zero-mean Gaussian prior on each weight and bias.
    posterior_init_scale : float, default=1e-3
        Initial sigma of every weight and bias. q(z_0) starts at N(1, 0.1).
    generator : torch.Generator, optional
        Source of the random initial values.
    device, dtype : optional
        Where and in which precision the parameters live.

    Attributes
    ----------
    mu, rho : torch.nn.Parameter of shape (in_features + 1, out_features)
        Means M and softplus-inverse standard deviations of the weights, the
        bias as the last row.
    z_mu, z_rho : torch.nn.Parameter of shape (in_features,)
        Mean and softplus-inverse standard deviation of q(z_0).
    flow_q, flow_r : skbayes.nn.flows.FlowSequence
        f (of q) and g (of r).
    c, b1, b2 : torch.nn.Parameter of shape (in_features,)
        The reverse model's vectors.
    """

    def __init__(
        self, in_features, out_features, *, flow="planar", n_flows=2, n_flows_reverse=2, hidden_size=50,
        prior_scale=1.0, posterior_init_scale=1e-3, generator=None, device=None, dtype=None,
    ):
        factory = {"device": device, "dtype": dtype}
        super().__init__(
            in_features, out_features, prior_scale=prior_scale, posterior_init_scale=posterior_init_scale,
            generator=generator, **factory,
        )
        self._init_multiplicative_flow(in_features, flow, n_flows, n_flows_reverse, hidden_size, generator, factory)

    def forward(self, x, generator=None, sample=True):
        """Training-time pass, one z and fresh pre-activation noise per row.

        Parameters
        ----------
        x : torch.Tensor of shape (..., in_features)
        generator : torch.Generator, optional
        sample : bool, default=True
            If False, no noise: the mean weights at z = f(mu_z).

        Returns
        -------
        out : torch.Tensor of shape (..., out_features)
        """
        if not sample:
            z, _ = self.flow_q(self.z_mu)
            return local_reparameterization(x, self.mu, None, sample=False, z=z)
        z, log_q = self.draw_z(x.shape[:-1], generator)
        self._pending = (z, log_q, generator)
        return local_reparameterization(x, self.mu, F.softplus(self.rho) ** 2, generator, z=z)

    def sample_parameters(self, n_samples, generator=None):
        """``n_samples`` draws (W, b) from q, shared by all rows.

        Returns
        -------
        weight : torch.Tensor of shape (n_samples, in_features, out_features)
            W ~ q(W | z), one z ~ q(z) per draw.
        bias : torch.Tensor of shape (n_samples, 1, out_features)
        """
        z, _ = self.draw_z((n_samples,), generator)
        weight, bias = gaussian_weight_draws(self.mu, F.softplus(self.rho), n_samples, generator)
        # M + Sigma eps + (z - 1) M = z M + Sigma eps
        return weight + (z.unsqueeze(-1) - 1.0) * self.weight_mu, bias

    def reverse_log_prob(self, z, weight):
        """log r(z | W) of the reverse model (Louizos & Welling, eqs. 11-13), in nats.

        Parameters
        ----------
        z : torch.Tensor of shape (..., in_features)
        weight : torch.Tensor of shape (..., in_features, out_features)

        Returns
        -------
        log_r : torch.Tensor of shape (...)
        """
        return self._reverse_log_prob(z, (self.c.unsqueeze(-1) * weight).sum(-2))

    def _z_weights(self):
        return self.weight_mu, self.weight_sigma

    def _kl_at_one(self):
        return MeanFieldLinear.kl(self)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, prior_scale={self.prior_scale}"


class MNFConv2d(_MultiplicativeFlow, MeanFieldConv2d):
    r"""2-d convolution with a multiplicative normalising flow posterior over its kernels.

    One multiplicative variable per output channel (feature map): kernel
    entry (j, i) of output channel j has q(W_ji | z) = N(z_j mu_ji,
    sigma_ji^2), z = f(z_0) as in :class:`MNFLinear` ([Louizos2017]_,
    section 3: for convolutions z has the dimension of the number of
    feature maps), and the biases are mean-field Gaussian. Seen as the
    matrix (out_channels, in_channels / groups * kh * kw) of the patches
    (Gal 2016, section 3.4.1), the kernels have z on their rows, so the
    reverse model and the auxiliary KL bound are those of
    :class:`MNFLinear` with that matrix: c^T W has one value per patch
    entry, r(z | W) one mean and scale per output channel.

    The passes follow :class:`~skbayes.nn.MeanFieldConv2d`'s noise modes:

    ``"sample"``
        One z per row, then that row's kernel draw by Flipout (the kernel
        mean z_j mu_j and the sign-flipped perturbation): the same kernel at
        every position of an image. The z are kept for :meth:`kl`.
    ``"shared"``
        One z and one kernel tensor for every row.
    ``"mean"``
        The kernels z_j mu_j at z = f(mu_z), no noise.

    Parameters
    ----------
    in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias
        As in :class:`torch.nn.Conv2d` (zero padding only).
    flow, n_flows, n_flows_reverse, hidden_size
        As in :class:`MNFLinear`, for a z of ``out_channels`` values.
    prior_scale : float, default=1.0
        Standard deviation of the zero-mean Gaussian prior on each kernel entry and bias.
    posterior_init_scale : float, default=1e-3
        Initial sigma of every kernel entry and bias. q(z_0) starts at N(1, 0.1).
    generator : torch.Generator, optional
        Source of the random initial values.
    device, dtype : optional
        Where and in which precision the parameters live.

    Attributes
    ----------
    weight_mu, weight_rho : torch.nn.Parameter of shape (out_channels, in_channels / groups, kh, kw)
    bias_mu, bias_rho : torch.nn.Parameter of shape (out_channels,) or None
    z_mu, z_rho, c, b1, b2 : torch.nn.Parameter of shape (out_channels,)
    flow_q, flow_r : skbayes.nn.flows.FlowSequence

    Raises
    ------
    ValueError
        If the channels are not divisible by ``groups``.
    """

    def __init__(
        self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True, *,
        flow="planar", n_flows=2, n_flows_reverse=2, hidden_size=50, prior_scale=1.0, posterior_init_scale=1e-3,
        generator=None, device=None, dtype=None,
    ):
        factory = {"device": device, "dtype": dtype}
        super().__init__(
            in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, prior_scale=prior_scale,
            posterior_init_scale=posterior_init_scale, generator=generator, **factory,
        )
        self._init_multiplicative_flow(out_channels, flow, n_flows, n_flows_reverse, hidden_size, generator, factory)

    def _channel_scale(self, n, like, generator):
        if self.noise_mode == "mean":
            z, _ = self.flow_q(self.z_mu)
            return z.unsqueeze(0)
        z, log_q = self.draw_z((n,), generator)
        if self.noise_mode == "sample":
            self._pending = (z, log_q, generator)
        return z

    def sample_parameters(self, n_samples, generator=None):
        """``n_samples`` kernel draws from q: z ~ q(z), then W ~ q(W | z) and b.

        Returns
        -------
        weight : torch.Tensor of shape (n_samples, out_channels, in_channels / groups, kh, kw)
        bias : torch.Tensor of shape (n_samples, out_channels) or None
        """
        z, _ = self.draw_z((n_samples,), generator)
        eps = standard_normal((n_samples, *self.weight_mu.shape), self.weight_mu, generator)
        weight = z[:, :, None, None, None] * self.weight_mu + self.weight_sigma * eps
        if self.bias_mu is None:
            return weight, None
        eps = standard_normal((n_samples, self.out_channels), self.bias_mu, generator)
        return weight, self.bias_mu + self.bias_sigma * eps

    def _z_weights(self):
        return self.weight_mu.flatten(1), self.weight_sigma.flatten(1)

    def _kl_at_one(self):
        return MeanFieldConv2d.kl(self)
