r"""Deep Gaussian process with doubly stochastic variational inference (DSVI).

A deep GP composes L layers of GPs, DGP(x) = (f^L o ... o f^1)(x), each layer
a vector-valued GP of width H_l with independent components, its own
inducing inputs Z^l, whitened inducing values u^l and kernel
([Salimbeni2017]_, section 3; Rossi 2022, eq. 6.21):

.. math::

    p(y, \{f^l, u^l\}) = \prod_n p(y_n \mid f^L_n)
        \prod_{l=1}^L p(f^l \mid u^l, f^{l-1}) p(u^l),
    \qquad f^0 = x.

The variational posterior keeps the layer-wise conditionals and a Gaussian
q(u^l) = N(m^l, S^l) per layer ([Salimbeni2017]_, eq. 9). Given a draw of its
input f^{l-1}_n, layer l has the SVGP marginal
q(f^l_n | f^{l-1}_n) = N(mu^l(f^{l-1}_n), s^{l2}(f^{l-1}_n)) of
[Salimbeni2017]_, eqs. 7-8 (one :class:`~skbayes.nn.gp.SVGP` with
``n_latent=H_l`` per layer). The evidence lower bound ([Salimbeni2017]_,
eq. 10; Rossi 2022, eq. 6.22)

.. math::

    \mathcal L = \sum_{n=1}^N \mathbb E_{q(f^L_n)}[\log p(y_n \mid f^L_n)]
                 - \sum_{l=1}^L \mathrm{KL}(q(u^l) \,\|\, p(u^l))

is estimated *doubly stochastically*: over a minibatch, and over the layers
by propagating reparameterised draws of the marginals only,
f̂^l_n = mu^l(f̂^{l-1}_n) + s^l(f̂^{l-1}_n) * eps^l_n with eps ~ N(0, I)
([Salimbeni2017]_, eq. 11; Rossi 2022, eq. 6.22: "single Monte-Carlo samples"
layer by layer, each unbiased because the posterior factorises over layers).
The last layer's expectation is in closed form for Gaussian noise (Rossi 2022,
eq. 6.23; :meth:`~skbayes.nn.GaussianLikelihood.expected_log_prob`):
E log N(y | f, sigma^2) = log N(y | mu^L, sigma^2) - s^{L2} / (2 sigma^2).

The predictive is a mixture of S Gaussians, one per propagated draw
([Salimbeni2017]_, eq. 12): q(f^L_*) ~= (1/S) sum_s N(mu^L_s, s^{L2}_s).

The inner layers have a fixed linear mean function h W, as in
[Salimbeni2017]_ (section 3.1 and their code): identity when the width is
kept, the top principal directions of the layer's input when it shrinks,
zero padding when it grows. With one layer the model is exactly the SVGP
([Hensman2013]_).

References
----------
.. [Salimbeni2017] H. Salimbeni and M. Deisenroth, "Doubly stochastic
   variational inference for deep Gaussian processes", NeurIPS 2017.
.. [Hensman2013] J. Hensman, N. Fusi and N. D. Lawrence, "Gaussian processes
   for big data", UAI 2013.
.. [Rossi2022] S. Rossi, "Improving scalability and inference in
   probabilistic deep models", PhD thesis, 2022, section 6.3.2.
"""

import torch
from torch import nn

__all__ = ["DeepGP", "linear_mean_weights"]


def linear_mean_weights(h, width):
    """The fixed linear mean function of an inner layer, as in [Salimbeni2017]_.

    Parameters
    ----------
    h : torch.Tensor of shape (n, d)
        The layer's input at initialisation (X pushed through the mean
        functions of the layers below).
    width : int
        The layer's output width H.

    Returns
    -------
    weight : torch.Tensor of shape (d, H)
        The identity when H == d; the top H principal directions of h
        (right singular vectors of the centred h) when H < d; the identity
        padded with zero columns when H > d. The mean function is h @ weight.
    """
    d = h.shape[1]
    eye = torch.eye(d, dtype=h.dtype, device=h.device)
    if width == d:
        return eye
    if width > d:
        return torch.cat([eye, torch.zeros(d, width - d, dtype=h.dtype, device=h.device)], dim=1)
    _, _, vh = torch.linalg.svd(h - h.mean(0), full_matrices=False)
    return vh[:width].T.contiguous()


class DeepGP(nn.Module):
    r"""Deep GP of SVGP layers trained by doubly stochastic variational inference.

    See the module docstring for the model ([Salimbeni2017]_; Rossi 2022,
    eqs. 6.21-6.23).

    Parameters
    ----------
    layers : sequence of SVGP
        The L layers, input first. Inner layers have ``n_latent`` H_l (their
        output width, the input width of the next layer); the last layer is a
        single-output SVGP (``n_latent=None``).
    mean_weights : sequence of torch.Tensor
        L - 1 fixed matrices W_l of shape (d_l, H_l), the linear mean
        functions of the inner layers (see :func:`linear_mean_weights`); they
        are buffers, not learned.

    Raises
    ------
    ValueError
        If the number of mean weights is not L - 1 or the last layer has
        several latent functions.
    """

    def __init__(self, layers, mean_weights):
        super().__init__()
        layers, mean_weights = list(layers), list(mean_weights)
        if len(mean_weights) != len(layers) - 1:
            raise ValueError(f"Need one mean weight per inner layer; got {len(mean_weights)} for {len(layers)} layers.")
        if layers[-1].n_latent is not None:
            raise ValueError("The last layer must be a single-output SVGP (n_latent=None).")
        self.layers = nn.ModuleList(layers)
        for index, weight in enumerate(mean_weights):
            self.register_buffer(f"mean_weight_{index}", weight)

    @property
    def n_layers(self):
        """Number L of layers."""
        return len(self.layers)

    def mean_weight(self, index):
        """W of inner layer ``index`` (0-based), shape (d, H)."""
        return getattr(self, f"mean_weight_{index}")

    def chol_zz(self):
        """L_zz = chol(K_zz + jitter) of every layer (:meth:`SVGP.chol_zz`), a list of L (M_l, M_l) tensors.

        They depend on the inducing inputs and kernels only: prediction
        computes them once and shares them across its blocks of rows.

        Raises
        ------
        ValueError
            If a layer's K_zz is not positive definite even with its largest
            jitter (:func:`skbayes.nn.linalg.cholesky`).
        """
        return [gp.chol_zz() for gp in self.layers]

    def inner_marginals(self, index, h, chol_zz=None):
        """Marginals of inner layer ``index`` at inputs h ([Salimbeni2017]_, eqs. 7-8).

        Parameters
        ----------
        index : int
            0-based index of an inner layer (< L - 1).
        h : torch.Tensor of shape (..., n, d)
        chol_zz : torch.Tensor of shape (M, M), optional
            The layer's precomputed :meth:`SVGP.chol_zz`.

        Returns
        -------
        mean, var : torch.Tensor of shape (..., n, H)
            mean = h W + mu(h) (the SVGP mean, whose own constant is zero) and
            var = s^2(h), the SVGP marginal variance of each output.
        """
        gp = self.layers[index]
        flat = h.reshape(-1, h.shape[-1])
        mean, var = gp.predict_f(flat, chol_zz=chol_zz)
        mean = mean + flat @ self.mean_weight(index)
        return mean.reshape(*h.shape[:-1], -1), var.reshape(*h.shape[:-1], -1)

    def propagate(self, x, noise, chol_zz=None):
        r"""Reparameterised draws of the last inner layer's output f̂^{L-1}.

        f̂^l = mean^l(f̂^{l-1}) + sqrt(var^l(f̂^{l-1})) * eps^l, f̂^0 = x
        ([Salimbeni2017]_, eq. 11; Rossi 2022, eq. 6.22), one draw per
        leading index of the noise.

        Parameters
        ----------
        x : torch.Tensor of shape (n, d)
        noise : sequence of torch.Tensor
            L - 1 standard normal tensors eps^l of shape (S, n, H_l), or
            (S, 1, H_l) to use the same numbers for every row (each row's
            draw then still has the right marginal distribution).
        chol_zz : sequence of torch.Tensor, optional
            Precomputed L_zz of every layer (:meth:`chol_zz`); computed here if None.

        Returns
        -------
        h : torch.Tensor of shape (S, n, d_L)
            Draws of the last layer's input; x itself (S = 1) when L == 1.
        """
        h = x.unsqueeze(0)
        for index, eps in enumerate(noise):
            mean, var = self.inner_marginals(index, h, None if chol_zz is None else chol_zz[index])
            h = mean + var.sqrt() * eps
        return h

    def draw_noise(self, n_draws, n_rows, generator=None, device=None, dtype=None):
        """Standard normal eps^l for :meth:`propagate`, one tensor of shape (S, n_rows, H_l) per inner layer.

        Parameters
        ----------
        n_draws : int
            S.
        n_rows : int
            n, or 1 for numbers shared by all rows.
        generator : torch.Generator, optional
            Drawn on the generator's device, then moved to ``device``.
        device, dtype : optional
            Default: those of the model.
        """
        reference = self.layers[-1].q_mean
        device = reference.device if device is None else device
        dtype = reference.dtype if dtype is None else dtype
        where = generator.device if generator is not None else device
        return [
            torch.randn(n_draws, n_rows, gp.n_latent, generator=generator, device=where, dtype=dtype).to(device)
            for gp in self.layers[:-1]
        ]

    def forward(self, x, n_draws=1, generator=None, noise=None, chol_zz=None):
        """Marginals of q(f^L) for S propagated draws of the inner layers.

        Parameters
        ----------
        x : torch.Tensor of shape (n, d)
        n_draws : int, default=1
            S (ignored with ``noise``).
        generator : torch.Generator, optional
            For the draws (independent across rows and draws).
        noise : sequence of torch.Tensor, optional
            The eps^l of :meth:`propagate`; drawn from ``generator`` if None.
        chol_zz : sequence of torch.Tensor, optional
            Precomputed L_zz of every layer (:meth:`chol_zz`); computed here if None.

        Returns
        -------
        mean, var : torch.Tensor of shape (S, n)
            Mean and variance of q(f^L_n | f̂^{L-1}_n) for each draw
            ([Salimbeni2017]_, eqs. 7-8 for the last layer). With L == 1, S == 1.
        """
        if noise is None:
            noise = self.draw_noise(n_draws, x.shape[0], generator)
        h = self.propagate(x, noise, chol_zz)
        last = self.layers[-1]
        mean, var = last.predict_f(h.reshape(-1, h.shape[-1]), chol_zz=None if chol_zz is None else chol_zz[-1])
        return mean.reshape(h.shape[:-1]), var.reshape(h.shape[:-1])

    def kl(self):
        """Sum over the layers of KL(q(u^l) || p(u^l)), in nats ([Salimbeni2017]_, eq. 10)."""
        return sum(gp.kl() for gp in self.layers)

    def loss(self, x, y, likelihood, n_data, n_draws=1, generator=None):
        r"""Per-datum negative ELBO of one minibatch, estimated with S propagated draws.

        .. math::

            -\frac1{S|B|} \sum_{s=1}^S \sum_{n \in B}
              \mathbb E_{q(f^L_n \mid \hat f^{L-1}_{n,s})}[\log p(y_n \mid f^L_n)]
            + \frac1N \sum_l \mathrm{KL}(q(u^l) \,\|\, p(u^l)),

        unbiased for -ELBO / N ([Salimbeni2017]_, eqs. 10-11; Rossi 2022,
        eq. 6.22), the inner expectation in closed form (Rossi 2022, eq. 6.23;
        :meth:`~skbayes.nn.gp.SVGP.expected_log_lik`). With one
        layer it is :meth:`SVGP.loss` with the VFE objective, no Monte Carlo.

        Parameters
        ----------
        x : torch.Tensor of shape (B, d)
        y : torch.Tensor of shape (B,)
        likelihood : GaussianLikelihood
            One output; its noise variance is sigma^2.
        n_data : int
            N, the number of rows the ELBO sums over.
        n_draws : int, default=1
            S, draws propagated per row.
        generator : torch.Generator, optional
            For the draws.

        Returns
        -------
        loss : torch.Tensor, scalar
        """
        if self.n_layers == 1:
            data = self.layers[0].expected_log_lik(x, y, likelihood)
        else:
            h = self.propagate(x, self.draw_noise(n_draws, x.shape[0], generator))
            rows = h.reshape(-1, h.shape[-1])
            data = self.layers[-1].expected_log_lik(rows, y.repeat(h.shape[0]), likelihood)
        return -data.mean() + self.kl() / n_data

    def predict_mixture(self, x, n_draws, generator=None, shared_noise=True, chol_zz=None):
        """The S components of the predictive mixture of f^L ([Salimbeni2017]_, eq. 12).

        Parameters
        ----------
        x : torch.Tensor of shape (n, d)
        n_draws : int
            S.
        generator : torch.Generator, optional
            For the draws.
        shared_noise : bool, default=True
            Use the same standard normals eps^l for every row (shape
            (S, 1, H_l)): each row's S components are then draws from the
            same distribution as with independent numbers, and a row's
            result does not depend on the other rows of x (nor on how x is
            split into blocks).
        chol_zz : sequence of torch.Tensor, optional
            Precomputed L_zz of every layer (:meth:`chol_zz`), to share them
            across blocks of rows; computed here if None.

        Returns
        -------
        mean, var : torch.Tensor of shape (S, n)
            Component means and latent variances (add sigma^2 for y).
        """
        noise = self.draw_noise(n_draws, 1 if shared_noise else x.shape[0], generator)
        if self.n_layers == 1:
            mean, var = self.forward(x, noise=noise, chol_zz=chol_zz)
            return mean.expand(n_draws, -1), var.expand(n_draws, -1)
        return self.forward(x, noise=noise, chol_zz=chol_zz)
