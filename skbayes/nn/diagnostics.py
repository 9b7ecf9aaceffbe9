r"""Convergence diagnostics of Markov chain Monte Carlo.

:func:`split_rhat` compares the halves of several chains (e.g. the SGHMC
chains of the Bayesian MLP estimators); :func:`rank_normalized_split_rhat`
does so on the ranks of the draws, and of their distances to the median, so
that one outlying draw or heavy tails do not decide it ([Vehtari2021]_).

References
----------
.. [Gelman2013] A. Gelman, J. B. Carlin, H. S. Stern, D. B. Dunson,
   A. Vehtari and D. B. Rubin, "Bayesian data analysis", 3rd edition, 2013,
   section 11.4 (split R-hat).
.. [Vehtari2021] A. Vehtari, A. Gelman, D. Simpson, B. Carpenter and
   P.-C. Buerkner, "Rank-normalization, folding, and localization: an
   improved R-hat for assessing convergence of MCMC", Bayesian Analysis
   16(2), 2021, section 4 (eqs. 14-15 and the folded R-hat).
"""

import math

import torch
from scipy.stats import rankdata

__all__ = ["rank_normalized_split_rhat", "split_rhat"]


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


def rank_normalized_split_rhat(draws):
    r"""Rank-normalised, folded split R-hat of scalar draws from several chains.

    The draws of all chains (the middle draw of each chain dropped when
    their length is odd, as in :func:`split_rhat`) are pooled and replaced
    by their normal scores z = Phi^-1((r - 3/8) / (S + 1/4)), r the
    (average) rank among the S pooled draws ([Vehtari2021]_, eq. 14); :func:`split_rhat` of the scores
    is the *bulk* R-hat. The same on the folded draws ``|x - median(x)|`` is the
    *tail* R-hat (chains that differ in spread; the median is that of the
    pooled draws). The result is the larger of
    the two ([Vehtari2021]_, section 4.2). Ranks make it invariant to any
    increasing transformation of the draws and keep one outlying draw
    (e.g. a sampler's excursion) from dominating the variances, as it does
    in the classic form. Values above about 1.1 flag chains that have not
    mixed or are still drifting (1.01 in [Vehtari2021]_ for long runs).

    Parameters
    ----------
    draws : torch.Tensor of shape (n_chains, n_draws) or (n_chains, n_draws, ...)
        Draws of one or several scalars; trailing axes are separate scalars.

    Returns
    -------
    rhat : torch.Tensor of shape () or (...)
        float64; NaN where :func:`split_rhat` is NaN for either part (chains
        constant at different values), 1 for a scalar whose draws are all
        equal.

    Raises
    ------
    ValueError
        If there are fewer than 4 draws per chain.
    """
    draws = torch.as_tensor(draws)
    if draws.dim() < 2:
        raise ValueError(f"draws must have shape (n_chains, n_draws, ...); got {tuple(draws.shape)}.")
    if draws.shape[1] < 4:
        raise ValueError(f"split R-hat needs at least 4 draws per chain; got {draws.shape[1]}.")
    draws = draws.detach().double().cpu()
    n = draws.shape[1] // 2
    kept = torch.cat([draws[:, :n], draws[:, draws.shape[1] - n :]], dim=1)  # the halves split_rhat compares
    median = kept.reshape(2 * n * draws.shape[0], -1).quantile(0.5, dim=0).reshape(draws.shape[2:])

    def normal_scores(values):
        pooled = values.reshape(values.shape[0] * values.shape[1], -1).numpy()
        ranks = torch.as_tensor(rankdata(pooled, axis=0, method="average"))
        return torch.special.ndtri((ranks - 0.375) / (pooled.shape[0] + 0.25)).reshape(values.shape)

    bulk = split_rhat(normal_scores(kept))
    tail = split_rhat(normal_scores((kept - median).abs()))
    return torch.maximum(bulk, tail)
