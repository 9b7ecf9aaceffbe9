r"""The base of the observation models and the Gauss-Hermite rule of their Gaussian expectations.

References
----------
.. [Abramowitz1964] M. Abramowitz and I. A. Stegun, "Handbook of
   mathematical functions", 1964, eq. 25.4.46 (Gauss-Hermite quadrature).
"""

import copy

import numpy as np
import torch
from torch import nn

__all__ = ["N_QUADRATURE", "Likelihood", "RegressionLikelihood", "gauss_hermite"]


# Default number of Gauss-Hermite nodes of the one-dimensional expectations.
N_QUADRATURE = 20


def gauss_hermite(n_points, device=None, dtype=None):
    r"""Nodes and weights for Gaussian expectations, E_{N(0, 1)}[g(z)] ~= sum_i w_i g(z_i).

    The Gauss-Hermite rule of :func:`numpy.polynomial.hermite.hermgauss`
    (weight exp(-x^2), [Abramowitz1964]_, eq. 25.4.46), rescaled to the
    standard normal: z_i = sqrt(2) x_i, w_i = w^H_i / sqrt(pi). It is exact
    for polynomials g of degree up to 2 n_points - 1.

    Parameters
    ----------
    n_points : int
        Number of nodes (>= 1).
    device, dtype : optional
        Of the returned tensors.

    Returns
    -------
    nodes, weights : torch.Tensor of shape (n_points,)
        The weights sum to 1.
    """
    x, w = np.polynomial.hermite.hermgauss(int(n_points))
    factory = {"device": device, "dtype": dtype}
    return torch.as_tensor(np.sqrt(2.0) * x, **factory), torch.as_tensor(w / np.sqrt(np.pi), **factory)


def _quadrature(fn, f_mean, f_var, n_points):
    """E_{N(f_mean, f_var)}[fn(f)] by Gauss-Hermite quadrature; fn maps ``(q, *shape)`` to ``(q, *shape[...])``."""
    nodes, weights = gauss_hermite(n_points, device=f_mean.device, dtype=f_mean.dtype)
    shape = (-1,) + (1,) * f_mean.ndim
    f = f_mean + f_var.clamp_min(0.0).sqrt() * nodes.reshape(shape)
    values = fn(f)
    return (weights.reshape((-1,) + (1,) * (values.ndim - 1)) * values).sum(0)


class Likelihood(nn.Module):
    r"""Base of every observation model p(y | f): the expectation of its log-density under a Gaussian q(f).

    Subclasses give ``log_prob(y, f)``, the log-density of each row summed
    over its outputs, for f of shape (..., n, k) with one latent value per
    output. :meth:`expected_log_prob` is then E_q[log p(y | f)] under
    independent q(f_k) = N(m_k, s_k^2), by Gauss-Hermite quadrature with
    :attr:`n_quadrature` nodes per output (the sum over outputs makes the
    expectation a sum of one-dimensional ones); a likelihood with a closed
    form (:class:`~skbayes.nn.likelihoods.GaussianLikelihood`) or another
    rule (the softmax's Monte Carlo) overrides it, and one whose rows do not
    have one latent value per output
    (:class:`~skbayes.nn.likelihoods.HeteroscedasticGaussianLikelihood`)
    refuses it.
    """

    #: Gauss-Hermite nodes of :meth:`expected_log_prob`.
    n_quadrature = N_QUADRATURE

    def log_prob(self, y, f):
        """Log-density of each row of ``y`` given ``f``, summed over outputs: (..., n)."""
        raise NotImplementedError

    def expected_log_prob(self, y, f_mean, f_var):
        r"""E_q[log p(y | f)] of each row under independent Gaussians q(f) = N(f_mean, f_var).

        By Gauss-Hermite quadrature ([Abramowitz1964]_, eq. 25.4.46):
        sum_i w_i log p(y | f_mean + sqrt(f_var) z_i) with the nodes z_i and
        weights w_i of :func:`gauss_hermite`, exact for log-densities that
        are polynomials of degree < 2 :attr:`n_quadrature` in f.

        Parameters
        ----------
        y : torch.Tensor of shape (n, k)
        f_mean, f_var : torch.Tensor of shape (..., n, k)
            Mean and variance (>= 0) of q(f).

        Returns
        -------
        expected_log_prob : torch.Tensor of shape (..., n)
            In nats, summed over the k outputs.
        """
        return _quadrature(lambda f: self.log_prob(y, f), f_mean, f_var, self.n_quadrature)


class RegressionLikelihood(Likelihood):
    """Base of the regression likelihoods of the Bayesian MLP regressors; not for direct use.

    Holds what the three share: the output width, the location, the
    per-member parameters (see the module docstring for the protocol).
    Subclasses give ``log_prob``, ``noise_variance``, ``distribution`` and
    ``sample``.
    """

    #: Whether the noise depends on the network's output (one level per row).
    heteroscedastic = False
    #: Network output columns per target.
    _columns_per_output = 1

    @classmethod
    def output_width(cls, n_outputs):
        """Number of network outputs for ``n_outputs`` targets (k, or 2k with a scale per row)."""
        return cls._columns_per_output * int(n_outputs)

    def location(self, f):
        """Location of y given the network's outputs: (..., n, w) -> (..., n, k)."""
        return f

    def member_tensors(self):
        """The per-member parameters and buffers, name -> tensor of shape (n_members, 1, k); empty without members."""
        tensors = {**dict(self.named_parameters(recurse=False)), **dict(self.named_buffers(recurse=False))}
        return {name: tensor for name, tensor in tensors.items() if tensor.dim() == 3}

    def with_member_tensors(self, tensors):
        """A copy with the per-member tensors ``tensors`` (name -> tensor); learned ones stay learned."""
        likelihood = copy.deepcopy(self)
        for name, value in tensors.items():
            if isinstance(getattr(likelihood, name), nn.Parameter):
                setattr(likelihood, name, nn.Parameter(value))
            else:
                setattr(likelihood, name, value)
        return likelihood

    def select(self, index):
        """The likelihood of the members ``index`` (a LongTensor), in that order; itself without members."""
        members = self.member_tensors()
        if not members:
            return self
        return self.with_member_tensors({name: tensor.detach()[index] for name, tensor in members.items()})
