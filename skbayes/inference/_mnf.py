"""Multiplicative normalising flows for the Bayesian MLPs.

Louizos & Welling 2017, eqs. 4 and 11-15; Killingberg 2021, eqs. 3.3-3.5 and Algorithm 5.
"""

from numbers import Integral, Real

import torch

from .._param_validation import Interval, StrOptions
from ..nn import MNFMLP
from ..nn.networks.module import BayesianModuleNetwork, to_mnf
from ._base import InferenceMethod, module_seeds
from ._loop import (
    ADAM_CONSTRAINTS, PREDICT_CONSTRAINTS, PRIOR_SCALING_CONSTRAINTS, STOPPING_CONSTRAINTS, method_doc,
    same_prior_scaling,
)
from ._variational import _KL_WARMUP, _N_MC_TRAIN

__all__ = ["MNF"]

# Draws of z (per layer) behind the "kl" diagnostic.
_N_KL_DRAWS = 256


@method_doc()
class MNF(InferenceMethod):
    r"""Variational inference with multiplicative normalising flows (MNF).

    Every layer's weights have the posterior q(W) = \int q(W | z) q(z) dz
    with q(W | z) = prod N(z_i mu_ij, sigma_ij^2), one multiplicative
    variable z_i per input unit, and q(z) a Gaussian pushed through
    ``n_flows`` normalising flows [Louizos2017]_ (eq. 4; Killingberg 2021,
    eqs. 3.3-3.4): a mixture of Gaussians whose weights into one unit are
    correlated and may be multimodal. The KL term of the ELBO is replaced by
    the auxiliary upper bound E[KL(q(W | z) || p) + log q(z) - log r(z | W)]
    with the reverse model r(z | W) of eqs. 11-13 (a Gaussian with
    ``n_flows_reverse`` flows of its own), so the objective is the auxiliary
    lower bound of eqs. 14-15; see :class:`skbayes.nn.MNFLinear`. The
    biases are mean-field Gaussian. Adam fits everything (means, variances,
    both flows, r) on the minibatch estimate, with the local
    reparameterisation of the pre-activations given z (Algorithm 1;
    Killingberg 2021, Algorithm 5) and the KL bound averaged over the z
    drawn for the minibatch; prediction draws z and then W.

    A torch module (``module=`` of :class:`~skbayes.BayesianMLPClassifier`,
    ...) has its :class:`torch.nn.Linear` layers swapped for
    :class:`~skbayes.nn.MNFLinear` and its :class:`torch.nn.Conv2d` layers
    for :class:`~skbayes.nn.MNFConv2d`, one z per feature map (Louizos &
    Welling 2017, section 3; a training pass draws one kernel per image,
    by Flipout), their means starting at the module's initial weights
    (``skbayes.nn.networks.module.to_mnf``); other layers with
    parameters are refused.

    Reads the estimator's ``hidden_layer_sizes``, ``activation``,
    ``prior_scale`` (the N(0, prior_scale^2) prior, or N(0, prior_scale^2 / fan_in) per layer under
    ``prior_scaling="fan_in"``, on every weight and
    bias); Adam's settings and the stopping rule are its own. ``warm_start``
    continues from the fitted posterior when the flow settings are
    unchanged; ``partial_fit`` runs one epoch on the new rows.
    ``inference_diagnostics_["kl"]`` is the auxiliary bound on
    KL(q || prior) (nats) at the end of the fit, averaged over 256 draws.

    Parameters
    ----------
    flow : {"planar", "realnvp"}, default="planar"
        Planar flows (Rezende & Mohamed 2015) or RealNVP affine couplings
        (Dinh et al. 2017), for q(z) and for r.
    n_flows : int, default=2
        Flows of q(z) per layer; 0 gives a Gaussian q(z).
    n_flows_reverse : int, default=2
        Flows of the reverse model r(z | W) per layer.
    hidden_size : int, default=50
        Width of q's RealNVP coupling networks (r's are twice as wide, as in
        Louizos & Welling's code); unused by planar flows.
    posterior_init_scale : float, default=1e-3
        Initial standard deviation of every weight and bias given z.
    n_mc_train : int, default=1
        Monte-Carlo draws of z and the pre-activations per row and step.
    kl_warmup_epochs : int, default=0
        Linear warm-up of the weight of the KL bound from 0 to 1 over this
        many epochs; the stopping rule starts counting after it.
    %(adam_parameters)s
    %(stopping_parameters)s
    %(predict_parameters)s
    %(prior_scaling_parameter)s

    References
    ----------
    .. [Louizos2017] C. Louizos and M. Welling, "Multiplicative normalizing
       flows for variational Bayesian neural networks", ICML 2017.

    Examples
    --------
    >>> from skbayes import BayesianMLPRegressor
    >>> from skbayes.inference import MNF
    >>> BayesianMLPRegressor(inference=MNF(flow="realnvp"))
    BayesianMLPRegressor(inference=MNF(flow='realnvp'))
    """

    collapse_guard = True
    auto_noise = "homoscedastic"

    _parameter_constraints = {
        **ADAM_CONSTRAINTS,
        **STOPPING_CONSTRAINTS,
        **PREDICT_CONSTRAINTS,
        **PRIOR_SCALING_CONSTRAINTS,
        "flow": [StrOptions({"planar", "realnvp"})],
        "n_flows": [Interval(Integral, 0, None, closed="left")],
        "n_flows_reverse": [Interval(Integral, 0, None, closed="left")],
        "hidden_size": [Interval(Integral, 1, None, closed="left")],
        "posterior_init_scale": [Interval(Real, 0, None, closed="neither")],
        "n_mc_train": _N_MC_TRAIN,
        "kl_warmup_epochs": _KL_WARMUP,
    }

    def __init__(
        self, flow="planar", n_flows=2, n_flows_reverse=2, hidden_size=50, posterior_init_scale=1e-3, n_mc_train=1,
        kl_warmup_epochs=0, *, learning_rate_init=3e-3, beta_1=0.9, beta_2=0.999, max_iter=500, early_stopping="auto",
        validation_fraction=0.1, n_iter_no_change="auto", tol=1e-4, n_mc_predict=100, prior_scaling=None,
    ):
        self.flow = flow
        self.n_flows = n_flows
        self.n_flows_reverse = n_flows_reverse
        self.hidden_size = hidden_size
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
        self.prior_scaling = prior_scaling

    def _flow_settings(self):
        return {
            "flow": self.flow, "n_flows": self.n_flows, "n_flows_reverse": self.n_flows_reverse,
            "hidden_size": self.hidden_size,
        }

    def build_network(self, n_features, n_outputs, settings, *, generator, device, dtype):
        network = MNFMLP(
            n_features, settings.hidden_layer_sizes, n_outputs, activation=settings.activation,
            prior_scale=settings.prior_scale, posterior_init_scale=self.posterior_init_scale,
            prior_scaling=self.prior_scaling, **self._flow_settings(), generator=generator, device=device, dtype=dtype,
        )
        return network.to(device)

    def build_module_network(self, n_features, n_outputs, settings, *, generator, device, dtype):
        (seed,) = module_seeds(generator, 1)
        module = to_mnf(
            settings.module(seed, n_features, n_outputs, device, dtype),
            prior_scale=settings.prior_scale,
            posterior_init_scale=self.posterior_init_scale,
            prior_scaling=self.prior_scaling,
            generator=generator,
            **self._flow_settings(),
        )
        network = BayesianModuleNetwork(
            module, n_features, n_outputs, input_shape=settings.input_shape, prior_scale=settings.prior_scale
        )
        network.flow_settings = self._flow_settings()
        return network

    def can_warm_start(self, module):
        network = module["network"]
        return getattr(network, "flow_settings", None) == self._flow_settings() and (
            isinstance(network, BayesianModuleNetwork) or same_prior_scaling(self, network)
        )

    def prepare(self, module, X, Y, settings, context):
        # the shared negative-ELBO loop: network.kl() after network(x) is the bound over that pass's z
        training = super().prepare(module, X, Y, settings, context)
        network = module["network"]

        def finish():
            with torch.no_grad():
                return {"kl": float(network.kl(context.generator, n_draws=_N_KL_DRAWS))}

        training.finish = finish
        return training
