"""A weight prior whose predictive matches the data in distributional sliced Wasserstein distance (Rossi 2022, §5.5-5.6)."""

from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import BaseEstimator

from .._param_validation import Interval
from ..nn.functional import standard_normal
from ..nn.priors import LayerGaussianPrior, fit_dsw_prior

__all__ = ["DSWPrior"]


class DSWPrior(BaseEstimator):
    r"""Per-layer Gaussian prior scales chosen by the DSW_2 distance between the prior predictive and the data.

    Pass it to :class:`SGHMC` (``SGHMC(prior=DSWPrior())``), as the
    :class:`~skbayes.BayesianAutoencoder` does by default. Before sampling,
    the scales psi of p(W_l) = N(0, sigma_{w,l}^2), p(b_l) = N(0,
    sigma_{b,l}^2) (one pair per layer, :class:`skbayes.nn.LayerGaussianPrior`,
    starting at 1/sqrt(fan-in) and 1) are set to minimise the distributional
    sliced 2-Wasserstein distance between draws of the prior predictive
    y ~ p(y | f(x; w)), w ~ p_psi(w), at training inputs x and the training
    targets (Rossi 2022, eqs. 5.11-5.19; :mod:`skbayes.nn.priors.sliced`):
    an empirical-Bayes choice of the prior from the data's distribution,
    made before and apart from the posterior. The chains then sample under
    the fitted scales.

    The prior predictive is drawn by the likelihood's reparameterised
    sampler (``rsample``: the continuous Bernoulli of the autoencoder) or,
    for Gaussian noise, f + sigma epsilon at the noise's initial level; the
    other likelihoods are refused.

    Parameters
    ----------
    n_slices : int, default=100
        K, the slices per step.
    n_rows, n_weight_draws : int, default=64, 8
        Rows of X and weight draws per step (n_rows x n_weight_draws predictive draws against as many data rows).
    n_critic_steps : int, default=2
        Ascent steps of the slice distribution per step of psi.
    max_iter : int, default=200
        Steps of psi.
    learning_rate_init : float, default=0.02
        Adam's step size on log psi and on the slice map.
    penalty, max_cosine : float, default=1.0, 0.5
        lambda_C and C of eq. 5.15: the slices' mean absolute cosine is held near at most C.

    References
    ----------
    .. [Nguyen2021] K. Nguyen, N. Ho, T. Pham and H. Bui, "Distributional
       sliced-Wasserstein and applications to generative modeling", ICLR
       2021.
    """

    _parameter_constraints = {
        "n_slices": [Interval(Integral, 1, None, closed="left")],
        "n_rows": [Interval(Integral, 2, None, closed="left")],
        "n_weight_draws": [Interval(Integral, 1, None, closed="left")],
        "n_critic_steps": [Interval(Integral, 0, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "learning_rate_init": [Interval(Real, 0, None, closed="neither")],
        "penalty": [Interval(Real, 0, None, closed="left")],
        "max_cosine": [Interval(Real, 0, 1, closed="both")],
    }

    def __init__(self, *, n_slices=100, n_rows=64, n_weight_draws=8, n_critic_steps=2, max_iter=200,
                 learning_rate_init=0.02, penalty=1.0, max_cosine=0.5):
        self.n_slices = n_slices
        self.n_rows = n_rows
        self.n_weight_draws = n_weight_draws
        self.n_critic_steps = n_critic_steps
        self.max_iter = max_iter
        self.learning_rate_init = learning_rate_init
        self.penalty = penalty
        self.max_cosine = max_cosine

    def fit_prior(self, layer_sizes, activation, X, Y, *, classification, generator, likelihood=None):
        """Fit the per-layer scales; :class:`SGHMC` calls this before sampling.

        Parameters as :meth:`GPInducedPrior.fit_prior`; ``likelihood`` draws the prior predictive.

        Returns
        -------
        prior : skbayes.nn.LayerGaussianPrior
        diagnostics : dict
            ``prior_hyperparameters`` and ``dsw_trace`` (the distance at every step).

        Raises
        ------
        ValueError
            For classification, or a likelihood without a reparameterised draw.
        """
        self._validate_params()
        if classification or likelihood is None:
            raise ValueError("DSWPrior draws the prior predictive of a regression or autoencoder likelihood; "
                             "classification is not supported.")
        if hasattr(likelihood, "rsample"):
            def draw_y(f, generator):
                return likelihood.rsample(f, generator)
        elif hasattr(likelihood, "noise_std") and not getattr(likelihood, "heteroscedastic", False):
            noise_std = likelihood.noise_std.detach().reshape(-1, int(layer_sizes[-1]))[0]  # the first chain's

            def draw_y(f, generator):
                return f + noise_std.to(f) * standard_normal(f.shape, f, generator)
        else:
            raise ValueError(f"DSWPrior needs a likelihood it can draw from; {type(likelihood).__name__} is not "
                             "one (Gaussian noise with noise='homoscedastic', or the continuous Bernoulli).")
        prior = LayerGaussianPrior(layer_sizes, device=X.device, dtype=X.dtype)
        trace = fit_dsw_prior(prior, X, Y.to(X.dtype), draw_y, activation=activation, n_rows=self.n_rows,
                              n_weight_draws=self.n_weight_draws, n_slices=self.n_slices, max_iter=self.max_iter,
                              n_critic_steps=self.n_critic_steps, learning_rate=self.learning_rate_init,
                              penalty=self.penalty, max_cosine=self.max_cosine, generator=generator)
        for p in prior.parameters():
            p.requires_grad_(False)
        prior = prior.to(torch.float32) if X.dtype != torch.float64 else prior
        return prior, {"prior_hyperparameters": prior.hyperparameters(), "dsw_trace": np.asarray(trace)}
