"""Normalising flows: invertible maps with a tractable log-determinant.

A flow f maps a draw z of a simple base density q_0 to x = f(z), with
``log q(x) = log q_0(z) - log |det df/dz|`` (Rezende & Mohamed 2015, eq. 1;
Killingberg 2021, eq. 2.13); a composition f_K o ... o f_1 adds the
log-determinants. Every flow here returns ``(x, log_abs_det)`` from
``forward(z)`` so that the caller can keep the running sum. They serve the
variational posteriors that go beyond the Gaussian: planar flows on the
Walsh-Hadamard coefficients (NF-WHVI, Rossi 2022, section 4.3) and the flows
on the multiplicative noise of MNF (Louizos & Welling 2017).

* :class:`PlanarFlow`: f(z) = z + u tanh(w^T z + b) (Rezende & Mohamed 2015, eq. 10),
  with u constrained so that the map is invertible (their appendix A.1).
* :class:`AffineCoupling`: the RealNVP affine coupling layer (Dinh et al. 2017,
  eqs. 6-9), with an analytic inverse.
* :class:`FlowSequence` composes them; :func:`make_flow` builds K of a kind.

References
----------
.. [Rezende2015] D. J. Rezende and S. Mohamed, "Variational inference with
   normalizing flows", ICML 2015.
.. [Dinh2017] L. Dinh, J. Sohl-Dickstein and S. Bengio, "Density estimation
   using Real NVP", ICLR 2017.
"""

import torch
from torch import nn
from torch.nn import functional as F

from .functional import uniform_init

__all__ = ["AffineCoupling", "FlowSequence", "PlanarFlow", "make_flow", "planar_map"]


def planar_map(z, u, w, b):
    """The planar map z + u tanh(w^T z + b) [Rezende2015]_ (eq. 10), and the tanh.

    Parameters
    ----------
    z : torch.Tensor of shape (..., dim)
    u, w : torch.Tensor of shape (dim,)
        u already constrained (:meth:`PlanarFlow.u_hat`) if the map must be invertible.
    b : torch.Tensor, scalar

    Returns
    -------
    x : torch.Tensor of shape (..., dim)
    h : torch.Tensor of shape (...)
        tanh(w^T z + b), for the log-determinant.
    """
    h = torch.tanh(z @ w + b)
    return z + h.unsqueeze(-1) * u, h


class PlanarFlow(nn.Module):
    r"""Planar flow f(z) = z + \hat u \tanh(w^T z + b) [Rezende2015]_ (eq. 10).

    The map is invertible iff w^T \hat u >= -1; \hat u is the stored u
    moved along w so that this holds (appendix A.1):
    \hat u = u + (m(w^T u) - w^T u) w / ||w||^2 with m(a) = -1 + softplus(a).
    Its log-determinant is ``log |1 + \hat u^T w (1 - \tanh^2(w^T z + b))|`` (eq. 12).

    Parameters
    ----------
    dim : int
        Dimension of z.
    generator : torch.Generator, optional
        Source of the random initial u and w (U(-1/sqrt(dim), 1/sqrt(dim))).
    device, dtype : optional
    """

    def __init__(self, dim, *, generator=None, device=None, dtype=None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.dim = int(dim)
        self.u = nn.Parameter(uniform_init((self.dim,), self.dim, generator, **factory))
        self.w = nn.Parameter(uniform_init((self.dim,), self.dim, generator, **factory))
        self.b = nn.Parameter(torch.zeros((), **factory))

    def u_hat(self):
        """The constrained u, shape (dim,): w^T u_hat >= -1."""
        wu = self.w @ self.u
        return self.u + (F.softplus(wu) - 1.0 - wu) * self.w / (self.w @ self.w).clamp_min(1e-12)

    def forward(self, z):
        """Map z (..., dim) to (f(z) of shape (..., dim), ``log |det df/dz|`` of shape (...))."""
        u = self.u_hat()
        x, h = planar_map(z, u, self.w, self.b)
        # 1 + u^T w h'(.) >= 1 + min(0, u^T w) >= 0 by the constraint
        log_det = torch.log((1.0 + (1.0 - h * h) * (u @ self.w)).abs().clamp_min(1e-12))
        return x, log_det

    def extra_repr(self):
        return f"dim={self.dim}"


class AffineCoupling(nn.Module):
    r"""RealNVP affine coupling layer [Dinh2017]_ (eqs. 6-9).

    The coordinates i with ``i % 2 == parity`` pass through unchanged
    (z_m); the others become x = z exp(s(z_m)) + t(z_m), with s and t the
    two halves of the output of a one-hidden-layer tanh MLP of width
    ``hidden_size`` on z_m. s is bounded by a tanh for stability, and the
    last layer of the MLP starts at zero, so the layer starts as the
    identity. ``log |det dx/dz|`` = sum of s over the transformed coordinates
    (eq. 6); the inverse is z = (x - t(x_m)) exp(-s(x_m)) (eq. 8).

    Parameters
    ----------
    dim : int
        Dimension of z. With ``dim == 1`` one of the two parities has no
        conditioning input, and the layer is an elementwise affine map.
    hidden_size : int, default=50
        Width of the hidden layer of s and t.
    parity : {0, 1}, default=0
        Which coordinates pass through.
    generator : torch.Generator, optional
        Source of the random initial weights of the first layer.
    device, dtype : optional
    """

    def __init__(self, dim, hidden_size=50, *, parity=0, generator=None, device=None, dtype=None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.dim, self.hidden_size, self.parity = int(dim), int(hidden_size), int(parity)
        self.register_buffer("mask", (torch.arange(self.dim, device=device) % 2 == self.parity).to(dtype or torch.get_default_dtype()))
        self.hidden_weight = nn.Parameter(uniform_init((self.dim, self.hidden_size), self.dim, generator, **factory))
        self.hidden_bias = nn.Parameter(uniform_init((self.hidden_size,), self.dim, generator, **factory))
        self.out_weight = nn.Parameter(torch.zeros((self.hidden_size, 2 * self.dim), **factory))
        self.out_bias = nn.Parameter(torch.zeros((2 * self.dim,), **factory))

    def _scale_shift(self, kept):
        hidden = torch.tanh(kept @ self.hidden_weight + self.hidden_bias)
        scale, shift = (hidden @ self.out_weight + self.out_bias).chunk(2, dim=-1)
        free = 1.0 - self.mask
        return torch.tanh(scale) * free, shift * free

    def forward(self, z):
        """Map z (..., dim) to (x of shape (..., dim), ``log |det dx/dz|`` of shape (...))."""
        scale, shift = self._scale_shift(z * self.mask)
        return z * torch.exp(scale) + shift, scale.sum(-1)

    def inverse(self, x):
        """Map x (..., dim) back to (z of shape (..., dim), ``log |det dz/dx|`` of shape (...))."""
        scale, shift = self._scale_shift(x * self.mask)
        return (x - shift) * torch.exp(-scale), -scale.sum(-1)

    def extra_repr(self):
        return f"dim={self.dim}, hidden_size={self.hidden_size}, parity={self.parity}"


class FlowSequence(nn.Module):
    """The composition f_K o ... o f_1 of flows, applied in list order.

    Parameters
    ----------
    flows : sequence of nn.Module
        Each with ``forward(z) -> (x, log_abs_det)``; empty gives the identity.
    """

    def __init__(self, flows=()):
        super().__init__()
        self.flows = nn.ModuleList(flows)

    def __len__(self):
        return len(self.flows)

    def forward(self, z):
        """Map z (..., dim) to (z_K of shape (..., dim), the summed log-determinants of shape (...))."""
        log_det = torch.zeros(z.shape[:-1], device=z.device, dtype=z.dtype)
        for flow in self.flows:
            z, step = flow(z)
            log_det = log_det + step
        return z, log_det

    def inverse(self, x):
        """The inverse map, for flows that all have ``inverse``: (z_0, summed ``log |det dz_0/dx|``).

        Raises
        ------
        NotImplementedError
            If a flow has no analytic inverse (e.g. :class:`PlanarFlow`).
        """
        log_det = torch.zeros(x.shape[:-1], device=x.device, dtype=x.dtype)
        for flow in reversed(self.flows):
            if not hasattr(flow, "inverse"):
                raise NotImplementedError(f"{type(flow).__name__} has no analytic inverse.")
            x, step = flow.inverse(x)
            log_det = log_det + step
        return x, log_det


def make_flow(kind, dim, n_flows, *, hidden_size=50, generator=None, device=None, dtype=None):
    """``n_flows`` flows of one kind on a ``dim``-dimensional variable.

    Parameters
    ----------
    kind : {"planar", "realnvp"}
        :class:`PlanarFlow` or :class:`AffineCoupling` (alternating parity,
        so that every coordinate is transformed after two layers; Dinh et al.
        recommend at least three for all coordinates to interact).
    dim, n_flows : int
        ``n_flows=0`` gives the identity.
    hidden_size : int, default=50
        Width of the coupling networks (``"realnvp"`` only).
    generator, device, dtype : optional

    Returns
    -------
    flow : FlowSequence

    Raises
    ------
    ValueError
        On an unknown ``kind``.
    """
    factory = {"generator": generator, "device": device, "dtype": dtype}
    if kind == "planar":
        flows = [PlanarFlow(dim, **factory) for _ in range(n_flows)]
    elif kind == "realnvp":
        flows = [AffineCoupling(dim, hidden_size, parity=k % 2, **factory) for k in range(n_flows)]
    else:
        raise ValueError(f"Unknown flow {kind!r}; choose 'planar' or 'realnvp'.")
    return FlowSequence(flows)
