r"""Variational autoencoder: amortised Gaussian encoder, N(0, I) prior, MLP decoder.

The model (Kingma & Welling 2014, [Kingma2014]_; Cinelli 2019, section 4.3) is

.. math::

    p(z) = \mathcal N(0, I_k), \qquad p_\theta(x \mid z, c), \qquad
    q_\phi(z \mid x, c) = \mathcal N(\mu_\phi(x, c), \operatorname{diag}\sigma^2_\phi(x, c)),

with an optional one-hot condition c concatenated to the encoder input and to
the decoder input (conditional VAE, [Sohn2015]_; Cinelli 2019, section 4.3.1). The
per-datum evidence lower bound with the analytic KL is (Cinelli 2019, eq. 4.9)

.. math::

    \mathcal L(x) = \mathbb E_q[\log p(x \mid z, c)] - \beta\,
    \mathrm{KL}(q(z \mid x, c)\,\|\,\mathcal N(0, I)),

estimated with the reparameterisation z = mu + sigma * eps, eps ~ N(0, I)
([Kingma2014]_, eq. 10; beta = 1 is the ELBO, beta != 1 the beta-VAE
objective of [Higgins2017]_). The importance-weighted bound of [Burda2016]_
(eq. 8) is log (1/K) sum_k p(x, z_k | c) / q(z_k | x, c) with z_k ~ q; it is
>= the ELBO and tends to log p(x | c) as K grows.

Every method takes the noise ``eps`` from the caller, so the caller decides
how draws are shared between rows (skbayes shares one set of draws across all
rows at prediction time, so that a row's value does not depend on its batch).

References
----------
%(ref_kingma2014)s
%(ref_sohn2015)s
.. [Burda2016] Y. Burda, R. Grosse and R. Salakhutdinov, "Importance weighted
   autoencoders", ICLR 2016.
.. [Higgins2017] I. Higgins et al., "beta-VAE: learning basic visual concepts
   with a constrained variational framework", ICLR 2017.
"""

import torch
from torch import nn
from torch.distributions import Normal, kl_divergence
from torch.nn import functional as F

from ..._docstrings import fill
from ..functional import gaussian_log_prob
from ..likelihoods import BernoulliLikelihood, GaussianLikelihood
from .mlp import MLP

__doc__ = fill(__doc__)

__all__ = ["VAEModule", "kl_standard_normal"]

# Floor on the encoder's standard deviation, so that log sigma stays finite.
_STD_FLOOR = 1e-6


def kl_standard_normal(mu, sigma):
    """KL(N(mu, diag sigma^2) || N(0, I)) of each row, in nats.

    Cinelli 2019, section 4.3: sum_j [-log sigma_j + (mu_j^2 + sigma_j^2 - 1) / 2].

    Parameters
    ----------
    mu, sigma : torch.Tensor of shape (..., n, k)
        Mean and standard deviation (> 0) of the diagonal Gaussian.

    Returns
    -------
    kl : torch.Tensor of shape (..., n)
    """
    standard = Normal(torch.zeros((), dtype=mu.dtype, device=mu.device), 1.0, validate_args=False)
    return kl_divergence(Normal(mu, sigma, validate_args=False), standard).sum(-1)


def _with_condition(h, c):
    if c is None:
        return h
    return torch.cat([h, c.expand(*h.shape[:-1], c.shape[-1])], dim=-1)


class VAEModule(nn.Module):
    """Encoder, decoder and likelihood of a (conditional) VAE.

    Parameters
    ----------
    n_features : int
        Data dimension d.
    n_components : int
        Latent dimension k.
    hidden_layer_sizes : sequence of int
        Encoder hidden widths; the decoder mirrors them (Cinelli 2019, section 5).
    n_conditions : int, default=0
        Width C of the one-hot condition (0: unconditional VAE).
    likelihood : {"gaussian", "bernoulli"}, default="gaussian"
        ``"gaussian"``: N(x | f(z), diag sigma^2) with one learned noise
        standard deviation per feature (:class:`GaussianLikelihood`, initial
        ``noise_std``); ``"bernoulli"``: logits f(z).
    activation : {"relu", "tanh", "logistic", "identity"}, default="relu"
    noise_std : float, default=1.0
        Initial Gaussian noise standard deviation (model units).
    generator : torch.Generator, optional
        Source of the random initial weights.
    device, dtype : optional
    """

    def __init__(
        self,
        n_features,
        n_components,
        hidden_layer_sizes,
        *,
        n_conditions=0,
        likelihood="gaussian",
        activation="relu",
        noise_std=1.0,
        generator=None,
        device=None,
        dtype=None,
    ):
        super().__init__()
        hidden = list(hidden_layer_sizes)
        factory = {"generator": generator, "device": device, "dtype": dtype}
        self.encoder = MLP([n_features + n_conditions, *hidden, 2 * n_components], activation, **factory)
        self.decoder = MLP([n_components + n_conditions, *hidden[::-1], n_features], activation, **factory)
        if likelihood == "gaussian":
            self.likelihood = GaussianLikelihood(n_features, noise_std, device=device, dtype=dtype)
        elif likelihood == "bernoulli":
            self.likelihood = BernoulliLikelihood()
        else:
            raise ValueError(f"Unknown likelihood {likelihood!r}.")
        self.likelihood_name = likelihood
        self.n_components = n_components

    def encode(self, x, c=None):
        """Parameters of q(z | x, c).

        Parameters
        ----------
        x : torch.Tensor of shape (n, d)
        c : torch.Tensor of shape (n, C), optional
            One-hot condition.

        Returns
        -------
        mu, sigma : torch.Tensor of shape (n, k)
            Mean and standard deviation (softplus of the raw output plus 1e-6).
        """
        out = self.encoder(_with_condition(x, c))
        mu, raw = out[..., : self.n_components], out[..., self.n_components :]
        return mu, F.softplus(raw) + _STD_FLOOR

    def decode(self, z, c=None):
        """Decoder output f(z, c): the Gaussian mean or the Bernoulli logits.

        Parameters
        ----------
        z : torch.Tensor of shape (..., n, k)
        c : torch.Tensor of shape (n, C), optional

        Returns
        -------
        f : torch.Tensor of shape (..., n, d)
        """
        return self.decoder(_with_condition(z, c))

    def mean(self, f):
        """E[x | z] from the decoder output f, in model units."""
        return torch.sigmoid(f) if self.likelihood_name == "bernoulli" else f

    def log_likelihood(self, x, f):
        """log p(x | z) of each row, shape (..., n), in nats."""
        return self.likelihood.log_prob(x, f)

    def elbo_terms(self, x, eps, c=None):
        """Monte-Carlo expected log-likelihood and analytic KL of each row.

        Parameters
        ----------
        x : torch.Tensor of shape (n, d)
        eps : torch.Tensor of shape (S, n, k) or (S, 1, k)
            Standard normal draws; (S, 1, k) shares them across rows.
        c : torch.Tensor of shape (n, C), optional

        Returns
        -------
        expected_log_lik : torch.Tensor of shape (n,)
            (1/S) sum_s log p(x | mu + sigma * eps_s, c) (Cinelli 2019, eq. 4.9).
        kl : torch.Tensor of shape (n,)
            KL(q(z | x, c) || N(0, I)), in closed form.
        """
        mu, sigma = self.encode(x, c)
        z = mu + sigma * eps  # reparameterisation, [Kingma2014]_ eq. 10
        expected_log_lik = self.log_likelihood(x, self.decode(z, c)).mean(0)
        return expected_log_lik, kl_standard_normal(mu, sigma)

    def elbo(self, x, eps, c=None, beta=1.0):
        """Per-row (beta-)ELBO estimate, shape (n,), in nats."""
        expected_log_lik, kl = self.elbo_terms(x, eps, c)
        return expected_log_lik - beta * kl

    def log_importance_weights(self, x, eps, c=None):
        """log p(x, z_s | c) - log q(z_s | x, c) for z_s = mu + sigma * eps_s.

        Parameters
        ----------
        x : torch.Tensor of shape (n, d)
        eps : torch.Tensor of shape (S, n, k) or (S, 1, k)
        c : torch.Tensor of shape (n, C), optional

        Returns
        -------
        log_w : torch.Tensor of shape (S, n)
            Their log-mean-exp over S is the IWAE bound ([Burda2016]_, eq. 8);
            their mean is the ELBO estimator of Cinelli 2019, eq. 4.8.
        """
        mu, sigma = self.encode(x, c)
        z = mu + sigma * eps
        # log N(z | mu, sigma^2) with (z - mu) / sigma = eps, and log N(z | 0, I)
        log_q = (gaussian_log_prob(eps) - torch.log(sigma)).sum(-1)
        log_prior = gaussian_log_prob(z).sum(-1)
        return self.log_likelihood(x, self.decode(z, c)) + log_prior - log_q
