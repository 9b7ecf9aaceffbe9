r"""Linear layer with a Walsh-Hadamard variational posterior (WHVI).

Each square block of the weight matrix is W = S_1 H diag(g) H S_2 with H the
normalised D x D Walsh-Hadamard matrix (D = 2^d), S_1 and S_2 diagonal point
estimates and a variational posterior over the D-vector g only
([Rossi2020]_; Rossi 2022, section 4.3, eq. 4.7): O(D) parameters and
O(D log D) time per row for a D x D matrix, through
:func:`skbayes.nn.fast_walsh_hadamard`. q(g) is N(mu, diag sigma^2), or that
Gaussian pushed through planar flows (NF-WHVI, section 4.4.1, eq. 4.15).

Non-square matrices follow Algorithm 3 of the thesis, "SetupDimensions", with
its slip fixed (:func:`whvi_dimensions`): the input is zero-padded to the
next power of two D and the D_out x D matrix is a vertical stack of
ceil(D_out / D) square blocks, each with its own S_1 and S_2 and all sharing
the one g of the layer (the author's implementation; it is the convention
that reproduces the thesis's parameter counts, see :meth:`WHVILinear.n_parameters`);
the rows beyond D_out are dropped.

References
----------
.. [Rossi2020] S. Rossi, S. Marmin and M. Filippone, "Walsh-Hadamard
   variational inference for Bayesian deep learning", NeurIPS 2020 (Rossi
   2022, "Improving scalability and inference in probabilistic deep models",
   PhD thesis, chapter 4).
.. [Rezende2015] D. J. Rezende and S. Mohamed, "Variational inference with
   normalizing flows", ICML 2015.
"""

import math

import torch
from torch import nn
from torch.distributions import Normal
from torch.nn import functional as F

from ..flows import make_flow
from ..functional import inverse_softplus, standard_normal
from ..linalg import fast_walsh_hadamard
from .mean_field import gaussian_kl, gaussian_weight_draws

__all__ = ["WHVILinear", "whvi_dimensions"]


def whvi_dimensions(in_features, out_features):
    """Algorithm 3 of Rossi 2022 ("SetupDimensions"), with its padding test fixed.

    The thesis tests ``next_power == 2 D_in`` before padding; with
    ``next_power = 2^ceil(log2 D_in)`` that never holds (the author's code
    computes the next power as ``2^(floor(log2 D_in) + 1)``, for which it
    means "D_in is a power of two"). Here: no padding when D_in is a power of
    two, else pad to the next one.

    Parameters
    ----------
    in_features, out_features : int
        D_in and D_out of the layer, both >= 1.

    Returns
    -------
    block_size : int
        D, the smallest power of two >= D_in (the padded input width).
    n_blocks : int
        ceil(D_out / D), the number of stacked D x D blocks.
    padding : int
        D - D_in zero inputs appended to each row.

    Raises
    ------
    ValueError
        If a width is smaller than 1.
    """
    if in_features < 1 or out_features < 1:
        raise ValueError(f"WHVI needs in_features and out_features >= 1; got {in_features} and {out_features}.")
    block_size = 1 << (in_features - 1).bit_length()  # 2^ceil(log2 D_in)
    padding = block_size - in_features  # 0 when D_in is a power of two
    return block_size, -(-out_features // block_size), padding


class WHVILinear(nn.Module):
    r"""Linear layer with the Walsh-Hadamard variational posterior of [Rossi2020]_.

    The weights are a stack of ``n_blocks`` square blocks (:func:`whvi_dimensions`)

    .. math::

        W_k = S_1^{(k)} H \,\mathrm{diag}(g)\, H S_2^{(k)}, \qquad
        g \sim q(g),

    with H the orthonormal D x D Walsh-Hadamard matrix, S_1^{(k)}, S_2^{(k)}
    diagonal and optimised (point estimates), and q(g) = N(mu, diag sigma^2),
    sigma = softplus(rho) (Rossi 2022, eq. 4.7). Given g, W h costs
    2 n_blocks fast transforms of size D per row: W h = S_1 H (g * H S_2 h).

    Training pass (``forward``): the local reparameterisation of eq. 4.14,
    W̄(mu) h + W̄(sigma * eps) h with W̄(u) = S_1 H diag(u) H S_2 and
    eps ~ N(0, I_D) drawn for each row; W̄ is linear in u, so this is W̄(g) h
    with one g = mu + sigma * eps per row, an exact draw of W h ~ N(m, A A^T).
    With planar flows (``n_flows > 0``, NF-WHVI) g is the flow's output for
    each row; the pass stays O(D log D) per row.

    KL: only g has a prior, p(g) = N(0, ``g_prior_variance`` I) (lambda =
    1e-5 in the thesis, section 4.3); S_1 and S_2 have none. Gaussian q: the
    closed form. Flows: the Monte-Carlo estimate of E_q[log q(g_K) - log
    p(g_K)] with log q(g_K) = log N(g_0; mu, sigma^2) - sum_k log|det J_k|
    (eq. 4.15), on the draws of the last training pass.

    Biases: a mean-field Gaussian N(m_b, s_b^2) per output with the
    N(0, prior_scale^2) prior and the closed-form KL, as in the author's
    implementation (D_out variances are cheap next to the D_out x D_in
    weights, and a point-estimated bias would escape the KL).

    Parameters
    ----------
    in_features, out_features : int
        Input and output widths.
    g_prior_variance : float, default=1e-5
        Variance lambda of the N(0, lambda I) prior on g. S_1 and S_2 have no
        prior, so lambda only fixes the scale g lives on (and hence Adam's
        relative step sizes between g and S): rescaling g by c and S_1 S_2 by
        1/c leaves W unchanged.
    prior_scale : float, default=1.0
        Standard deviation of the N(0, prior_scale^2) prior on each bias.
    posterior_init_scale : float, default=1e-3
        Initial standard deviation of q(g), relative to sqrt(g_prior_variance),
        and initial standard deviation of the biases.
    n_flows : int, default=0
        Planar flows ([Rezende2015]_) on g (NF-WHVI); 0 keeps q(g) Gaussian.
    generator : torch.Generator, optional
        Source of the initial values.
    device, dtype : optional

    Notes
    -----
    Initialisation: mu ~ N(0, lambda) and S_1, S_2 of random signs and a
    common magnitude chosen so that each mean weight has variance
    1 / (3 in_features), the variance of PyTorch's default uniform
    initialisation.
    """

    def __init__(
        self, in_features, out_features, *, g_prior_variance=1e-5, prior_scale=1.0, posterior_init_scale=1e-3,
        n_flows=0, generator=None, device=None, dtype=None,
    ):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.in_features, self.out_features = in_features, out_features
        self.block_size, self.n_blocks, self.padding = whvi_dimensions(in_features, out_features)
        self.g_prior_variance = float(g_prior_variance)
        self.prior_scale = float(prior_scale)
        size, lam = self.block_size, self.g_prior_variance

        def draw(shape):  # on the CPU generator, then moved: the same values on any device
            return torch.randn(shape, generator=generator, dtype=dtype).to(device)

        def signs(shape):
            return torch.where(draw(shape) < 0, -1.0, 1.0).to(dtype=dtype)

        # Var(W_ij) = s^4 lambda / D for mu ~ N(0, lambda) and an orthonormal H
        magnitude = (size / (3.0 * lam * in_features)) ** 0.25
        self.s1 = nn.Parameter(magnitude * signs((self.n_blocks, size)))
        self.s2 = nn.Parameter(magnitude * signs((self.n_blocks, size)))
        self.g_mu = nn.Parameter(math.sqrt(lam) * draw(size))
        self.g_rho = nn.Parameter(torch.full((size,), inverse_softplus(posterior_init_scale * math.sqrt(lam)), **factory))
        self.bias_mu = nn.Parameter(torch.zeros(out_features, **factory))
        self.bias_rho = nn.Parameter(torch.full((out_features,), inverse_softplus(posterior_init_scale), **factory))
        self.n_flows = int(n_flows)
        if self.n_flows:
            self.flow = make_flow("planar", size, self.n_flows, generator=generator, **factory)  # see _flow
        self._kl_terms = None  # log q(g) - log p(g) of the last training pass (flows)

    @property
    def g_sigma(self):
        """Standard deviation of the Gaussian q(g) (the flows' base), (D,)."""
        return F.softplus(self.g_rho)

    @property
    def bias_sigma(self):
        """Standard deviation of the biases, (out_features,)."""
        return F.softplus(self.bias_rho)

    def n_parameters(self):
        """Number of scalars of the variational family: S_1, S_2, q(g) (and flows), biases."""
        return sum(p.numel() for p in self.parameters())

    def structured_product(self, h, g):
        r"""W(g) h for rows h and one g per row, by fast Walsh-Hadamard transforms.

        Parameters
        ----------
        h : torch.Tensor of shape (..., in_features)
        g : torch.Tensor of shape (..., D) or (D,)
            Broadcast against the leading axes of ``h``.

        Returns
        -------
        out : torch.Tensor of shape (..., out_features)
            x @ W with W the (in_features, out_features) matrix of the layer
            (the transposed D_out x D_in matrix of the thesis).
        """
        if self.padding:
            h = F.pad(h, (0, self.padding))
        u = fast_walsh_hadamard(h.unsqueeze(-2) * self.s2, normalized=True)  # (..., n_blocks, D): H S_2 h
        out = self.s1 * fast_walsh_hadamard(g.unsqueeze(-2) * u, normalized=True)  # S_1 H diag(g) H S_2 h
        return out.flatten(-2)[..., : self.out_features]

    def _flow(self, g0):
        """The flows applied to g0 in prior-standardised units, g = sqrt(lambda) f(g0 / sqrt(lambda)).

        The planar flows are built for variables of unit scale; g lives on the
        scale sqrt(lambda). Scaling in and out leaves the log-determinant
        that of f, and the KL to N(0, lambda I) that of f's output to N(0, I).
        """
        scale = math.sqrt(self.g_prior_variance)
        z, log_det = self.flow(g0 / scale)
        return scale * z, log_det

    def _draw_g(self, shape, generator):
        """g of shape ``(*shape, D)`` from q and its log q(g) - log p(g) (None for a Gaussian q)."""
        mu = self.g_mu
        g0 = mu + self.g_sigma * standard_normal((*shape, self.block_size), mu, generator)
        if not self.n_flows:
            return g0, None
        g, log_det = self._flow(g0)
        base = Normal(mu, self.g_sigma, validate_args=False).log_prob(g0).sum(-1)
        prior = Normal(0.0, math.sqrt(self.g_prior_variance), validate_args=False).log_prob(g).sum(-1)
        return g, base - log_det - prior

    def forward(self, x, generator=None, sample=True):
        """Training-time pass, a fresh g per row (local reparameterisation, eq. 4.14)."""
        if sample:
            g, kl_terms = self._draw_g(x.shape[:-1], generator)
            if kl_terms is not None:
                self._kl_terms = kl_terms
        else:
            g = self.g_mu if not self.n_flows else self._flow(self.g_mu)[0]
        bias = self.bias_mu
        if sample:
            bias = bias + self.bias_sigma * standard_normal((*x.shape[:-1], self.out_features), bias, generator)
        return self.structured_product(x, g) + bias

    def sample_parameters(self, n_samples, generator=None):
        """``n_samples`` draws of (W, b) from q, shared by all rows.

        Returns
        -------
        weight : torch.Tensor of shape (n_samples, in_features, out_features)
        bias : torch.Tensor of shape (n_samples, 1, out_features)
        """
        g, _ = self._draw_g((n_samples,), generator)
        eye = torch.eye(self.in_features, dtype=g.dtype, device=g.device)
        weight = self.structured_product(eye, g.unsqueeze(-2))  # row i: e_i @ W
        _, bias = gaussian_weight_draws(self.bias_mu[None], self.bias_sigma[None], n_samples, generator)
        return weight, bias

    def kl(self):
        """KL(q || p) of g and the biases, a scalar in nats.

        Closed form for a Gaussian q(g); with flows, the mean of
        log q(g) - log p(g) over the draws of the last training pass (eq.
        4.15; consumed by this call), or over 256 draws of a fixed seed when
        there was none.
        """
        kl = gaussian_kl(self.bias_mu, self.bias_sigma, self.prior_scale)
        if not self.n_flows:
            lam = torch.as_tensor(self.g_prior_variance, dtype=self.g_mu.dtype, device=self.g_mu.device)
            return kl + gaussian_kl(self.g_mu, self.g_sigma, lam.sqrt())
        terms, self._kl_terms = self._kl_terms, None
        if terms is None:
            terms = self._draw_g((256,), torch.Generator(device=self.g_mu.device).manual_seed(0))[1]
        return kl + terms.mean()
