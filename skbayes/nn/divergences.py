"""Closed-form divergences between distributions.

References
----------
.. [Kullback1951] S. Kullback and R. A. Leibler, "On information and
   sufficiency", Annals of Mathematical Statistics 22(1), 1951.
"""

import torch

__all__ = ["kl_normal_normal"]


def kl_normal_normal(mu_q, sigma_q, mu_p, sigma_p):
    r"""Elementwise KL divergence between two univariate Gaussians.

    .. math::

        \mathrm{KL}(\mathcal N(\mu_q,\sigma_q^2)\,\|\,\mathcal N(\mu_p,\sigma_p^2))
        = \log\frac{\sigma_p}{\sigma_q}
          + \frac{\sigma_q^2 + (\mu_q-\mu_p)^2}{2\sigma_p^2} - \frac12

    (Cinelli 2019, eq. 2.x; the analytic KL used by Bayes by Backprop,
    Blundell et al. 2015, section 3.)

    Parameters
    ----------
    mu_q, sigma_q : torch.Tensor
        Mean and standard deviation (> 0) of q; any broadcastable shapes.
    mu_p, sigma_p : torch.Tensor or float
        Mean and standard deviation (> 0) of p.

    Returns
    -------
    kl : torch.Tensor
        Broadcast shape of the inputs, in nats, >= 0. Sum it yourself for a
        fully factorised distribution.
    """
    sigma_p = torch.as_tensor(sigma_p, dtype=sigma_q.dtype, device=sigma_q.device)
    var_ratio = (sigma_q / sigma_p) ** 2
    mean_term = ((mu_q - mu_p) / sigma_p) ** 2
    return 0.5 * (var_ratio + mean_term - 1.0 - torch.log(var_ratio))
