"""GP-induced functional priors for the sampled Bayesian MLPs (Tran et al. 2022; Rossi 2022, eq. 5.6, section 5.4)."""

from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import BaseEstimator, clone
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, Kernel, WhiteKernel

from .._param_validation import Interval
from .._training import Callback
from .._sklearn_kernels import from_sklearn_kernel
from ..nn.priors import LayerFlowPrior, LayerGaussianPrior, LayerInverseGammaPrior, fit_functional_prior

__all__ = ["GPInducedPrior"]

# Rows of the training set the kernel's hyperparameters are fitted on (fit_kernel=True).
_N_KERNEL_FIT_ROWS = 500


class GPInducedPrior(BaseEstimator):
    r"""A weight prior whose induced prior over functions matches a Gaussian process [Tran2022]_.

    Pass it to :class:`SGHMC` (``SGHMC(prior=GPInducedPrior())``): before
    sampling, the per-layer prior hyperparameters psi of the network are
    fitted so that the network's prior function values at
    ``n_measurement_points`` training inputs are distributed like those of
    GP(0, ``kernel``), by minimising their 1-Wasserstein distance with a
    WGAN-GP critic (Rossi 2022, eq. 5.6; see
    :mod:`skbayes.nn.priors.functional`); SGHMC then samples the posterior
    under that prior.

    * ``hierarchical=False`` (GPI-G): W_l ~ N(0, sigma_{w,l}^2),
      b_l ~ N(0, sigma_{b,l}^2), one scale per layer, fitted; the sampler's
      energy uses them in place of the estimator's ``prior_scale``.
    * ``hierarchical=True`` (GPI-H): sigma_{w,l}^2 ~ InvGamma(alpha_{w,l},
      beta_{w,l}) and sigma_{b,l}^2 ~ InvGamma(alpha_{b,l}, beta_{b,l}),
      alpha and beta fitted; every chain samples its own layer variances by
      a Gibbs step from InvGamma(alpha + n/2, beta + sum w^2 / 2) after each
      epoch, starting from a draw of the fitted hyperprior.
    * ``n_flows=K > 0`` (GPI-NF, Rossi 2022, eqs. 5.7-5.9): GPI-G's Gaussian
      pushed through K planar flows per layer on the layer's weights and
      biases, w_l = t_K o ... o t_1(w_{0,l}); the scales and the flows are
      fitted. SGHMC then samples the base weights w_0 under the Gaussian
      while the network computes with the flowed weights, which is the
      posterior under the flowed prior without the flows' inverse or density
      (:meth:`~skbayes.nn.StackedMLP.set_weight_transform`). Each flow adds
      2 (n_in + 1) n_out + 1 hyperparameters per layer, and every training
      step applies the flows to every chain's weights: the thesis calls the
      family too expensive for large networks.

    For classification the GP is the prior of each logit (independent per
    class). The fit costs ``max_iter * (n_critic_steps + 1)`` forward passes
    of ``n_function_draws`` networks at ``n_measurement_points`` inputs,
    whatever the size of the training set.

    The fitted hyperparameters, the W1 estimate of each prior step and the
    GP kernel go into the estimator's ``inference_diagnostics_`` as
    ``"prior_hyperparameters"`` (a dict of per-layer lists: ``weight_scale``
    and ``bias_scale`` (with GPI-NF the base scales, and ``n_flows``), or ``weight_shape``, ``weight_rate``,
    ``bias_shape`` and ``bias_rate``), ``"w1_trace"`` (ndarray of shape
    (max_iter,)) and ``"prior_kernel"`` (the scikit-learn kernel used).

    Parameters
    ----------
    kernel : sklearn.gaussian_process.kernels.Kernel or None, default=None
        The target GP's covariance, in the units of X and of the
        standardised targets; any expression :func:`skbayes.gaussian_process.from_sklearn_kernel`
        translates (a ``WhiteKernel`` term adds nothing to the function
        prior). None is ``ConstantKernel(1.0) * RBF(1.0)``, meant for
        standardised inputs.
    hierarchical : bool, default=False
        GPI-H (inverse-Gamma hyperpriors and Gibbs steps) instead of GPI-G.
    n_flows : int, default=0
        K planar flows per layer on top of GPI-G's Gaussian (GPI-NF); 0 is
        GPI-G. Not with ``hierarchical=True``.
    fit_kernel : bool, default=False
        First fit the kernel's hyperparameters to (up to 500 rows of) the
        training data with :class:`~sklearn.gaussian_process.GaussianProcessRegressor`
        (a ``WhiteKernel`` is added for the noise); regression only.
    n_measurement_points : int, default=32
        M, the inputs drawn from the training rows at every prior step
        (Rossi 2022 uses 32).
    n_function_draws : int, default=128
        Functions drawn from each of the GP and the network prior per step.
    n_critic_steps : int, default=5
        Critic steps per prior step.
    gradient_penalty : float, default=10.0
        lambda of the critic's gradient penalty (Gulrajani et al. 2017).
    max_iter : int, default=200
        Prior steps.
    learning_rate_init : float, default=0.02
        Adam's step size on the log hyperparameters.
    critic_learning_rate : float, default=0.01
        Adam's step size on the critic (decay rates 0.5, 0.9).

    Raises
    ------
    ValueError
        At fit, on an invalid value, on ``n_flows > 0`` with
        ``hierarchical=True``, on ``fit_kernel=True`` with a classifier, or on a kernel :func:`~skbayes.gaussian_process.from_sklearn_kernel`
        cannot translate.

    References
    ----------
    .. [Tran2022] B.-H. Tran, S. Rossi, D. Milios and M. Filippone, "All
       you need is a good functional prior for Bayesian deep learning",
       JMLR 23(74), 2022 (Rossi 2022, chapter 5, Table 5.1).
    """

    _parameter_constraints = {
        "kernel": [None, Kernel],
        "hierarchical": ["boolean"],
        "n_flows": [Interval(Integral, 0, None, closed="left")],
        "fit_kernel": ["boolean"],
        "n_measurement_points": [Interval(Integral, 1, None, closed="left")],
        "n_function_draws": [Interval(Integral, 2, None, closed="left")],
        "n_critic_steps": [Interval(Integral, 1, None, closed="left")],
        "gradient_penalty": [Interval(Real, 0, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "learning_rate_init": [Interval(Real, 0, None, closed="neither")],
        "critic_learning_rate": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(
        self,
        kernel=None,
        *,
        hierarchical=False,
        n_flows=0,
        fit_kernel=False,
        n_measurement_points=32,
        n_function_draws=128,
        n_critic_steps=5,
        gradient_penalty=10.0,
        max_iter=200,
        learning_rate_init=0.02,
        critic_learning_rate=0.01,
    ):
        self.kernel = kernel
        self.hierarchical = hierarchical
        self.n_flows = n_flows
        self.fit_kernel = fit_kernel
        self.n_measurement_points = n_measurement_points
        self.n_function_draws = n_function_draws
        self.n_critic_steps = n_critic_steps
        self.gradient_penalty = gradient_penalty
        self.max_iter = max_iter
        self.learning_rate_init = learning_rate_init
        self.critic_learning_rate = critic_learning_rate

    def _target_kernel(self, X, Y, classification, generator):
        """The scikit-learn kernel of the target GP, fitted to the data if asked."""
        kernel = ConstantKernel(1.0) * RBF(1.0) if self.kernel is None else clone(self.kernel)
        if not self.fit_kernel:
            return kernel
        if classification:
            raise ValueError(
                "GPInducedPrior(fit_kernel=True) fits the kernel to regression targets; a classifier has "
                "none. Give the kernel of the logits' prior (kernel=...) with fit_kernel=False."
            )
        rows = torch.randperm(X.shape[0], generator=generator, device=generator.device)[:_N_KERNEL_FIT_ROWS]
        rows = rows.cpu().numpy()
        x, y = X.detach().cpu().double().numpy()[rows], Y.detach().cpu().double().numpy()[rows]
        gpr = GaussianProcessRegressor(kernel + WhiteKernel(0.1), normalize_y=False)
        return gpr.fit(x, y[:, 0] if y.shape[1] == 1 else y).kernel_

    def fit_prior(self, layer_sizes, activation, X, Y, *, classification, generator, likelihood=None):
        """Fit the prior's hyperparameters to the GP; the estimator's SGHMC calls this.

        Parameters
        ----------
        layer_sizes : sequence of int
            ``[n_features, *hidden_layer_sizes, n_outputs]``.
        activation : str
        X : torch.Tensor of shape (n, n_features)
        Y : torch.Tensor of shape (n, n_outputs) or (n, 1)
            Standardised targets (used by ``fit_kernel`` only).
        classification : bool
        generator : torch.Generator
        likelihood : Likelihood or None
            The model's likelihood (not used: the GP prior is over functions).

        Returns
        -------
        prior : LayerGaussianPrior, LayerInverseGammaPrior or LayerFlowPrior
            Fitted, float32, on the device of X.
        diagnostics : dict
            ``prior_hyperparameters``, ``w1_trace`` and ``prior_kernel``.
        """
        self._validate_params()
        if self.hierarchical and self.n_flows:
            raise ValueError(
                "GPInducedPrior: the flows (n_flows > 0, GPI-NF) go on GPI-G's Gaussian base; "
                "they cannot be combined with hierarchical=True (GPI-H). Choose one."
            )
        sk_kernel = self._target_kernel(X, Y, classification, generator)
        kernel = from_sklearn_kernel(sk_kernel, learn=False, device=X.device, dtype=torch.float64)
        factory = {"device": X.device, "dtype": torch.float32}
        if self.n_flows:
            prior = LayerFlowPrior(layer_sizes, self.n_flows, generator=generator, **factory)
        elif self.hierarchical:
            prior = LayerInverseGammaPrior(layer_sizes, **factory)
        else:
            prior = LayerGaussianPrior(layer_sizes, **factory)
        trace = fit_functional_prior(
            prior,
            kernel,
            X,
            activation=activation,
            n_outputs=layer_sizes[-1],
            n_measurement_points=self.n_measurement_points,
            n_function_draws=self.n_function_draws,
            n_critic_steps=self.n_critic_steps,
            penalty_weight=self.gradient_penalty,
            max_iter=self.max_iter,
            learning_rate=self.learning_rate_init,
            critic_learning_rate=self.critic_learning_rate,
            generator=generator,
        )
        for p in prior.parameters():
            p.requires_grad_(False)
        diagnostics = {
            "prior_hyperparameters": prior.hyperparameters(),
            "w1_trace": np.asarray(trace),
            "prior_kernel": sk_kernel,
        }
        return prior, diagnostics


class GibbsLayerVariances(Callback):
    """After every epoch, draw each chain's layer variances from their conjugate inverse-Gamma (GPI-H).

    Parameters
    ----------
    module : torch.nn.ModuleDict
        With ``"network"``, a :class:`~skbayes.nn.StackedMLP` (one member per chain).
    prior : LayerInverseGammaPrior
        The fitted hyperpriors.
    generator : torch.Generator
    """

    def __init__(self, module, prior, generator):
        self.module, self.prior, self.generator = module, prior, generator

    def on_epoch_end(self, state):
        network = self.module["network"]
        scales = self.prior.gibbs_scales([layer.weight for layer in network.layers], self.generator)
        network.set_layer_prior_scales(*scales)


def apply_prior(prior, module, generator):
    """Put a fitted prior into the chains' energy; the GPI-H Gibbs callback, or None.

    GPI-G: every chain gets the fitted per-layer scales. GPI-H: every chain
    starts from its own draw of the layer variances from the fitted
    hyperpriors, and the returned callback resamples them each epoch.
    GPI-NF: the base scales as GPI-G's, and the network computes with the
    flowed weights (the chains move the base weights).
    """
    network = module["network"]
    with torch.no_grad():
        scales = prior.layer_scales(network.n_members, generator)
    network.set_layer_prior_scales(*(s.to(network.layers[0].weight.device) for s in scales))
    transform = None
    if isinstance(prior, LayerFlowPrior):
        weight = network.layers[0].weight
        transform = prior.weight_transform().to(device=weight.device, dtype=weight.dtype)
    network.set_weight_transform(transform)
    if isinstance(prior, LayerInverseGammaPrior):
        return GibbsLayerVariances(module, prior, generator)
    return None
