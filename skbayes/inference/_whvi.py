"""Walsh-Hadamard variational inference (WHVI) for the Bayesian MLPs.

Rossi et al. 2020; Rossi 2022, chapter 4, eqs. 4.7 and 4.14-4.15.
"""

from numbers import Integral, Real

from .._param_validation import Interval, StrOptions
from ..nn import WHVIMLP
from ..nn.networks.module import BayesianModuleNetwork, to_whvi
from ._base import InferenceMethod, module_seeds
from ._loop import ADAM_CONSTRAINTS, PREDICT_CONSTRAINTS, STOPPING_CONSTRAINTS, method_doc
from ._variational import _KL_WARMUP, _N_MC_TRAIN, AUTO_DROPOUT_RATE_CONV

__all__ = ["WHVI"]


@method_doc()
class WHVI(InferenceMethod):
    """Walsh-Hadamard variational inference [Rossi2020]_.

    Each hidden weight matrix is a stack of blocks S_1 H diag(g) H S_2
    (H the Walsh-Hadamard matrix, S_1 and S_2 diagonal point estimates) with
    a Gaussian posterior over the D-vector g only, optionally pushed through
    planar flows (NF-WHVI): O(D) parameters and O(D log D) time per row for
    a D x D matrix instead of mean field's O(D^2) (Rossi 2022, chapter 4,
    eqs. 4.7 and 4.14-4.15); see :class:`skbayes.nn.WHVILinear` and
    :class:`skbayes.nn.WHVIMLP`. Trained like :class:`MeanFieldVI`: Adam on
    the per-datum negative ELBO with one fresh g per row (the local
    reparameterisation of eq. 4.14) and the KL of g to N(0,
    ``g_prior_variance`` I) plus the KL of the biases (and of a mean-field
    last layer) to the estimator's N(0, prior_scale^2).

    A torch module (``module=`` of the Bayesian MLP estimators) gets the
    thesis's recipe for CNNs (Rossi 2022, section 4.5): WHVI on every
    :class:`torch.nn.Linear` (the last one mean-field with
    ``last_layer="mean_field"``) and MC dropout of rate 0.25 (MCDropout's
    rate for modules with convolutions) after every convolution, their KL
    condition a weight decay (``skbayes.nn.networks.module.to_whvi``).

    Reads the estimator's ``hidden_layer_sizes``, ``activation``,
    ``prior_scale`` and the optimiser settings; ``warm_start`` and
    ``partial_fit`` continue from the current posterior.
    ``inference_diagnostics_`` holds ``"kl"``, the KL of the fitted
    posterior in nats (a Monte-Carlo estimate with flows).

    Parameters
    ----------
    n_flows : int, default=0
        Planar flows on each WHVI layer's g (NF-WHVI); 0 keeps q(g)
        Gaussian and its KL in closed form.
    g_prior_variance : float, default=1e-5
        Variance lambda of the N(0, lambda I) prior on g (the thesis's 1e-5,
        section 4.3).
    last_layer : {"mean_field", "whvi"}, default="mean_field"
        The output layer's posterior: fully factorised Gaussian, as in the
        thesis's regression experiments, or WHVI like the hidden layers.
    posterior_init_scale : float, default=1e-3
        Initial standard deviation of q(g) relative to sqrt(lambda), and of
        the biases and the mean-field weights.
    n_mc_train : int, default=1
        Monte-Carlo draws per row and step (the thesis uses 1).
    kl_warmup_epochs : int, default=0
        Linear warm-up of the KL weight from 0 to 1 over this many epochs.
    %(adam_parameters)s
    %(stopping_parameters)s
    %(predict_parameters)s

    References
    ----------
    .. [Rossi2020] S. Rossi, S. Marmin and M. Filippone, "Walsh-Hadamard
       variational inference for Bayesian deep learning", NeurIPS 2020.

    Examples
    --------
    >>> from skbayes import BayesianMLPRegressor
    >>> from skbayes.inference import WHVI
    >>> BayesianMLPRegressor(hidden_layer_sizes=(128, 128), inference=WHVI(n_flows=2))
    BayesianMLPRegressor(hidden_layer_sizes=(128, 128), inference=WHVI(n_flows=2))
    """

    collapse_guard = True

    _parameter_constraints = {
        **ADAM_CONSTRAINTS,
        **STOPPING_CONSTRAINTS,
        **PREDICT_CONSTRAINTS,
        "n_flows": [Interval(Integral, 0, None, closed="left")],
        "g_prior_variance": [Interval(Real, 0, None, closed="neither")],
        "last_layer": [StrOptions({"mean_field", "whvi"})],
        "posterior_init_scale": [Interval(Real, 0, None, closed="neither")],
        "n_mc_train": _N_MC_TRAIN,
        "kl_warmup_epochs": _KL_WARMUP,
    }

    def __init__(
        self, n_flows=0, g_prior_variance=1e-5, last_layer="mean_field", posterior_init_scale=1e-3, n_mc_train=1,
        kl_warmup_epochs=0, *, learning_rate_init=3e-3, beta_1=0.9, beta_2=0.999, max_iter=500, early_stopping="auto",
        validation_fraction=0.1, n_iter_no_change="auto", tol=1e-4, n_mc_predict=100,
    ):
        self.n_flows = n_flows
        self.g_prior_variance = g_prior_variance
        self.last_layer = last_layer
        self.posterior_init_scale = posterior_init_scale
        self.n_mc_train = n_mc_train
        self.kl_warmup_epochs = kl_warmup_epochs
        self.learning_rate_init = learning_rate_init
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.max_iter = max_iter
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.n_mc_predict = n_mc_predict

    def build_network(self, n_features, n_outputs, settings, *, generator, device, dtype):
        network = WHVIMLP(
            n_features, settings.hidden_layer_sizes, n_outputs, last_layer=self.last_layer,
            activation=settings.activation, prior_scale=settings.prior_scale,
            g_prior_variance=self.g_prior_variance, posterior_init_scale=self.posterior_init_scale,
            n_flows=self.n_flows, generator=generator, device=device, dtype=dtype,
        )
        return network.to(device)

    def build_module_network(self, n_features, n_outputs, settings, *, generator, device, dtype):
        (seed,) = module_seeds(generator, 1)
        module, dropped_weights = to_whvi(
            settings.module(seed, n_features, n_outputs, device, dtype), AUTO_DROPOUT_RATE_CONV,
            last_layer=self.last_layer, prior_scale=settings.prior_scale,
            posterior_init_scale=self.posterior_init_scale, g_prior_variance=self.g_prior_variance,
            n_flows=self.n_flows, generator=generator,
        )
        network = BayesianModuleNetwork(
            module, n_features, n_outputs, input_shape=settings.input_shape, prior_scale=settings.prior_scale,
            dropped_weights=dropped_weights,
        )
        network.whvi_settings = (self.n_flows, self.last_layer)
        return network

    def can_warm_start(self, module):
        """Whether the fitted network has this object's structure (last layer and flows)."""
        if isinstance(module["network"], BayesianModuleNetwork):
            return getattr(module["network"], "whvi_settings", None) == (self.n_flows, self.last_layer)
        layers = module["network"].layers
        return getattr(layers[0], "n_flows", self.n_flows) == self.n_flows and (
            (self.last_layer == "whvi") == hasattr(layers[-1], "g_mu")
        )
