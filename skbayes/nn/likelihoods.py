r"""Observation models p(y | f).

Every likelihood has ``log_prob(y, f)``, the log-density of each row summed
over outputs, for function values f of shape (..., n, k) (e.g. one slice per
Monte-Carlo draw). The Gaussian likelihood also owns its expectation under a
Gaussian q(f), :meth:`GaussianLikelihood.expected_log_prob`, the data term of
a sparse GP's evidence lower bound.

References
----------
.. [Gal2016] Y. Gal, "Uncertainty in deep learning", PhD thesis, 2016,
   section 3.3.1 (Gal 2016): homoscedastic Gaussian noise with precision tau.
.. [Hensman2013] J. Hensman, N. Fusi and N. D. Lawrence, "Gaussian processes
   for big data", UAI 2013.
.. [Kingma2014] D. P. Kingma and M. Welling, "Auto-encoding variational
   Bayes", ICLR 2014 (Bernoulli decoder, appendix C.1).
"""

import torch
from torch import nn
from torch.nn import functional as F

from .functional import gaussian_log_prob, inverse_softplus

__all__ = ["BernoulliLikelihood", "CategoricalLikelihood", "GaussianLikelihood"]


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
        raw = inverse_softplus(noise_std - self._floor)
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
        return gaussian_log_prob(y, f, self.noise_std.square()).sum(-1)

    def expected_log_prob(self, y, f_mean, f_var, added_noise_var=None):
        r"""E_q[log p(y | f)] of each row under independent Gaussians q(f) = N(f_mean, f_var).

        In closed form ([Hensman2013]_, section 3; Rossi 2022, eq. 6.2):

        .. math::

            \mathbb E_{\mathcal N(f \mid m, s^2)}[\log \mathcal N(y \mid f, v)]
            = \log \mathcal N(y \mid m, v) - \frac{s^2}{2 v},

        with v = sigma^2, or sigma^2 + ``added_noise_var`` when the model adds
        its own per-row variance to the noise (the FITC objective of a sparse
        GP, see :class:`~skbayes.nn.variational.SVGP`).

        Parameters
        ----------
        y : torch.Tensor of shape (n, k)
        f_mean, f_var : torch.Tensor of shape (..., n, k)
            Mean and variance (>= 0) of q(f).
        added_noise_var : torch.Tensor of shape (..., n, k), optional
            Variance (>= 0) added to sigma^2 row by row.

        Returns
        -------
        expected_log_prob : torch.Tensor of shape (..., n)
            In nats, summed over the k outputs.
        """
        var = self.noise_std.square()
        if added_noise_var is not None:
            var = var + added_noise_var
        return (gaussian_log_prob(y, f_mean, var) - 0.5 * f_var / var).sum(-1)


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


class BernoulliLikelihood(nn.Module):
    """Independent Bernoulli pixels with logits f: log p(x | f) = -BCE(f, x).

    For x in [0, 1] that is not binary this is the usual cross-entropy
    objective, not a normalised density on [0, 1].
    """

    def log_prob(self, x, f):
        """Log-probability of each row, summed over features.

        Parameters
        ----------
        x : torch.Tensor of shape (n, d)
            Observations in [0, 1].
        f : torch.Tensor of shape (..., n, d)
            Logits.

        Returns
        -------
        log_prob : torch.Tensor of shape (..., n)
            In nats.
        """
        x = x.expand_as(f)
        return -F.binary_cross_entropy_with_logits(f, x, reduction="none").sum(-1)

    @staticmethod
    def mean(f):
        """Success probabilities sigmoid(f)."""
        return torch.sigmoid(f)
