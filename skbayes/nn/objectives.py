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

__all__ = ["negative_elbo"]


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
