r"""Convergence diagnostics of Markov chain Monte Carlo.

:func:`split_rhat` compares the halves of several chains (e.g. the SGHMC
chains of the Bayesian MLP estimators).

References
----------
.. [Gelman2013] A. Gelman, J. B. Carlin, H. S. Stern, D. B. Dunson,
   A. Vehtari and D. B. Rubin, "Bayesian data analysis", 3rd edition, 2013,
   section 11.4 (split R-hat).
"""

import math

import torch

__all__ = ["split_rhat"]


def split_rhat(draws):
    r"""Classic split R-hat of scalar draws from several chains.

    Each chain is cut into its first and second halves (the middle draw is
    dropped when the length is odd), giving m = 2 n_chains sequences of
    length n; with B the between-sequence and W the mean within-sequence
    variance ([Gelman2013]_, section 11.4, eqs. 11.2-11.4):

    .. math::

        \widehat{\mathrm{var}}^+ = \frac{n - 1}{n} W + \frac{B}{n}, \qquad
        \hat R = \sqrt{\widehat{\mathrm{var}}^+ / W}.

    R-hat near 1 says the sequences look like draws from one distribution;
    values above about 1.1 (1.05 in Rossi 2022, chapter 4) flag chains
    that have not mixed or are still drifting. This is the rank-free form
    (no rank normalisation or folding).

    Parameters
    ----------
    draws : torch.Tensor of shape (n_chains, n_draws) or (n_chains, n_draws, ...)
        Draws of one or several scalars; trailing axes are separate scalars.
        One chain is allowed (its two halves are compared).

    Returns
    -------
    rhat : torch.Tensor of shape () or (...)
        NaN for a scalar with no within-sequence variance (W = 0), except
        1 when B = 0 as well (all draws equal).

    Raises
    ------
    ValueError
        If there are fewer than 4 draws per chain.
    """
    draws = torch.as_tensor(draws)
    if not draws.is_floating_point():
        draws = draws.double()
    if draws.dim() < 2:
        raise ValueError(f"draws must have shape (n_chains, n_draws, ...); got {tuple(draws.shape)}.")
    n_draws = draws.shape[1]
    if n_draws < 4:
        raise ValueError(f"split R-hat needs at least 4 draws per chain; got {n_draws}.")
    n = n_draws // 2
    halves = torch.cat([draws[:, :n], draws[:, n_draws - n :]], dim=0)
    chain_means = halves.mean(dim=1)
    between = n * chain_means.var(dim=0, unbiased=True)
    within = halves.var(dim=1, unbiased=True).mean(dim=0)
    var_plus = (n - 1) / n * within + between / n
    rhat = torch.sqrt(var_plus / within)
    constant = (within == 0) & (between == 0)
    rhat = torch.where(constant, torch.ones_like(rhat), rhat)
    return torch.where((within == 0) & ~constant, torch.full_like(rhat, math.nan), rhat)
