r"""Classes under a softmax link: the VAE's and the networks' :class:`CategoricalLikelihood`, the GP classifier's :class:`SoftmaxLikelihood`.

References
----------
.. [Hensman2015c] J. Hensman, A. G. de G. Matthews and Z. Ghahramani,
   "Scalable variational Gaussian process classification", AISTATS 2015.
"""

import torch

from ._base import Likelihood

__all__ = ["CategoricalLikelihood", "SoftmaxLikelihood"]


class CategoricalLikelihood(Likelihood):
    r"""Categorical likelihood with a softmax link over C latent functions (logits).

    p(y = c | f) = softmax(f)_c, so log p(y | f) = f_y - logsumexp(f): the
    likelihood of the Bayesian network classifiers and, as
    :class:`SoftmaxLikelihood`, of the variational GP classifier. Its
    expectation under independent Gaussians q(f_c) = N(mu_c, s_c^2) has no
    closed form; as E_q[f_y] = mu_y, only the log-sum-exp is estimated, by
    Monte Carlo with reparameterised draws f = mu + s * eps
    ([Hensman2015c]_, section 4, uses the same unbiased estimator of the
    whole term):

    .. math::

        \mathbb E_q[\log p(y \mid f)] \approx \mu_y
        - \frac1T \sum_{t=1}^T \operatorname{logsumexp}(\mu + s \odot \epsilon_t).

    Parameters
    ----------
    n_mc : int, default=8
        Number T of draws per row in :meth:`expected_log_prob`.
    """

    def __init__(self, n_mc=8):
        super().__init__()
        self.n_mc = int(n_mc)

    def log_prob(self, y, f):
        """Log-probability of each observed class.

        Parameters
        ----------
        y : torch.Tensor of shape (n,) or (..., n, 1)
            Class indices 0..C-1 (any dtype; they are cast to integers).
        f : torch.Tensor of shape (..., n, C)
            Logits (e.g. one slice per Monte-Carlo draw).

        Returns
        -------
        log_prob : torch.Tensor of shape (..., n)
            log softmax(f)[y] in nats.
        """
        index = (y.reshape(-1, 1) if y.ndim == 1 else y).long().expand(*f.shape[:-1], 1)
        return torch.log_softmax(f, dim=-1).gather(-1, index).squeeze(-1)

    def expected_log_prob(self, y, f_mean, f_var, generator=None):
        """Unbiased Monte-Carlo estimate of E_q[log p(y | f)] of each row.

        Parameters
        ----------
        y : torch.Tensor of shape (n,)
            Class indices 0..C-1.
        f_mean, f_var : torch.Tensor of shape (n, C)
            Mean and variance of q(f), independent across classes.
        generator : torch.Generator, optional
            Of the draws (on the device of ``f_mean``).

        Returns
        -------
        expected_log_prob : torch.Tensor of shape (n,)
            In nats; differentiable in f_mean and f_var.
        """
        eps = torch.randn(
            (self.n_mc, *f_mean.shape), generator=generator, device=f_mean.device, dtype=f_mean.dtype
        )
        f = f_mean + f_var.clamp_min(0.0).sqrt() * eps
        mean_y = f_mean.gather(-1, y.long().reshape(-1, 1)).squeeze(-1)
        return mean_y - torch.logsumexp(f, dim=-1).mean(0)


class SoftmaxLikelihood(CategoricalLikelihood):
    """The variational GP classifier's name for :class:`CategoricalLikelihood`, with its predictive.

    The same log-probability and Monte-Carlo expectation; adds the class
    probabilities under q(f) (:meth:`predictive_proba`) and given draws of f
    (:meth:`conditional_proba`) of the GP classifiers' protocol.

    Parameters
    ----------
    n_mc : int, default=8
        Number T of draws per row in :meth:`expected_log_prob`.
    """

    def predictive_proba(self, f_mean, f_var, eps):
        """Monte-Carlo class probabilities (1/T) sum_t softmax(mu + s * eps_t).

        Parameters
        ----------
        f_mean, f_var : torch.Tensor of shape (n, C)
        eps : torch.Tensor of shape (T, C) or (T, n, C)
            Standard normal draws; shape (T, C) shares them across the rows
            (common random numbers: a row's result does not depend on the
            other rows).

        Returns
        -------
        proba : torch.Tensor of shape (n, C)
        """
        if eps.ndim == 2:
            eps = eps[:, None, :]
        return torch.softmax(f_mean + f_var.clamp_min(0.0).sqrt() * eps, dim=-1).mean(0)

    def conditional_proba(self, f):
        """softmax(f) for draws of f: shape (..., n, C)."""
        return torch.softmax(f, dim=-1)
