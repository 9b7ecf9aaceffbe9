"""Observation models p(y | f).

References
----------
.. [Gal2016] Y. Gal, "Uncertainty in deep learning", PhD thesis, 2016,
   section 3.3.1 (Gal 2016): homoscedastic Gaussian noise with precision tau.
"""

import math

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["CategoricalLikelihood", "GaussianLikelihood"]

_LOG_2PI = math.log(2.0 * math.pi)


class GaussianLikelihood(nn.Module):
    r"""Homoscedastic Gaussian likelihood, one noise level per output.

    p(y | f) = prod_k N(y_k | f_k, sigma_k^2). The noise standard deviation is
    stored raw and mapped through softplus (plus a floor of 1e-6) so that the
    optimiser works on an unconstrained value.

    Parameters
    ----------
    n_outputs : int
        Number k of output dimensions.
    noise_std : float, default=0.1
        Initial (or fixed) noise standard deviation, in the units of f.
    learn_noise : bool, default=True
        Learn the noise by maximising the ELBO (type-II maximum likelihood);
        otherwise keep it fixed at ``noise_std``.
    n_members : int, optional
        For models made of a finite set of members (ensemble members, kept
        Monte-Carlo samples): one noise level per member, so that
        ``noise_std`` has shape (n_members, 1, n_outputs) and broadcasts
        against function values of shape (n_members, n, n_outputs).
    device, dtype : optional
        Where and in which precision the parameters live.
    """

    _floor = 1e-6

    def __init__(self, n_outputs, noise_std=0.1, learn_noise=True, *, n_members=None, device=None, dtype=None):
        super().__init__()
        raw = math.log(math.expm1(noise_std - self._floor))
        shape = (n_outputs,) if n_members is None else (n_members, 1, n_outputs)
        raw = torch.full(shape, raw, device=device, dtype=dtype)
        if learn_noise:
            self.raw_noise = nn.Parameter(raw)
        else:
            self.register_buffer("raw_noise", raw)

    @property
    def noise_std(self):
        """Noise standard deviation, shape (n_outputs,) or (n_members, 1, n_outputs)."""
        return F.softplus(self.raw_noise) + self._floor

    def log_prob(self, y, f):
        """Log-density of each observation, summed over outputs.

        Parameters
        ----------
        y : torch.Tensor of shape (n, k)
            Observed targets.
        f : torch.Tensor of shape (..., n, k)
            Function values (e.g. one slice per Monte-Carlo draw).

        Returns
        -------
        log_prob : torch.Tensor of shape (..., n)
            log N(y | f, sigma^2) in nats, summed over the k outputs.
        """
        sigma = self.noise_std
        z = (y - f) / sigma
        return (-0.5 * z * z - torch.log(sigma) - 0.5 * _LOG_2PI).sum(-1)


class CategoricalLikelihood(nn.Module):
    """Categorical likelihood with softmax link, p(y = c | f) = softmax(f)_c.

    Has no parameters; it exists so that classifiers and regressors share the
    ``log_prob(y, f)`` protocol of the objective and the training loop.
    """

    def log_prob(self, y, f):
        """Log-probability of each observed class.

        Parameters
        ----------
        y : torch.Tensor of shape (n, 1)
            Class indices 0..C-1 (any dtype; they are cast to integers).
        f : torch.Tensor of shape (..., n, C)
            Logits (e.g. one slice per Monte-Carlo draw).

        Returns
        -------
        log_prob : torch.Tensor of shape (..., n)
            log softmax(f)[y] in nats.
        """
        index = y.long().expand(*f.shape[:-1], 1)
        return torch.log_softmax(f, dim=-1).gather(-1, index).squeeze(-1)
