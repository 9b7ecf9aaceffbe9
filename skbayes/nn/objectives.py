r"""Minibatch objectives.

The evidence lower bound (ELBO) of a model with global latent variables w and
N conditionally independent observations is (Gal 2016, eq. 3.1)

.. math::

    \mathcal L = \sum_{i=1}^N \mathbb E_q[\log p(y_i \mid x_i, w)]
                 - \mathrm{KL}(q(w)\,\|\,p(w)).

A minibatch S of size B gives the unbiased estimate (Gal 2016, eq. 3.2)
(N/B) * sum_{i in S} E_q[log p(y_i | x_i, w)] - KL. skbayes minimises that
estimate divided by N, so that the loss is per datum and comparable across
batch sizes and data sizes: the likelihood term is a *mean* over the batch and
the KL is divided by N, never by B.
"""

__all__ = ["kl_warmup_weight", "negative_elbo"]


def negative_elbo(log_lik, kl, n_data):
    """Per-datum negative ELBO of one minibatch.

    Parameters
    ----------
    log_lik : torch.Tensor of shape (n_mc, batch_size) or (batch_size,)
        Log-likelihood of each observation of the batch (summed over output
        dimensions) under each Monte-Carlo draw of the weights, in nats.
    kl : torch.Tensor, scalar
        KL(q || p) of the whole model, in nats (not divided by anything).
    n_data : int
        Number N of training observations (not the batch size).

    Returns
    -------
    loss : torch.Tensor, scalar
        ``-(mean of log_lik) + kl / n_data``: an unbiased estimate of
        ``-ELBO / N`` (Gal 2016, eq. 3.2 divided by N).
    """
    return -log_lik.mean() + kl / n_data


def kl_warmup_weight(step, warmup_steps):
    """Weight of the KL term at optimiser step ``step`` under a linear warm-up.

    The weight rises linearly from 0 at step 0 to 1 at ``warmup_steps`` and
    stays at 1 afterwards (deterministic warm-up, Sønderby et al. 2016; used
    against posterior collapse in VAEs, Cinelli 2019, section 4.4, and as the
    KL annealing of Bayesian neural networks).

    Parameters
    ----------
    step : int
        Number of optimiser steps taken so far (0-based).
    warmup_steps : int
        Length of the warm-up in steps; 0 disables it (weight 1).

    Returns
    -------
    weight : float in [0, 1]
    """
    return min(1.0, step / warmup_steps) if warmup_steps > 0 else 1.0
