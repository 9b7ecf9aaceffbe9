"""Gradient-based variational inference: Bayes by Backprop and MC dropout."""

from numbers import Integral, Real

import torch

from .._param_validation import Interval, StrOptions
from ..nn import INITIALIZATIONS, MODULE_INITIALIZATIONS, BayesianMLP, GaussianLikelihood
from ..nn.networks.module import DROPOUT_PLACEMENTS, BayesianModuleNetwork, to_mc_dropout, to_mean_field
from ._base import InferenceMethod, module_seeds
from ._loop import (
    ADAM_CONSTRAINTS, PREDICT_CONSTRAINTS, PRIOR_SCALING_CONSTRAINTS, STOPPING_CONSTRAINTS, method_doc,
    same_prior_scaling,
)

__all__ = ["MCDropout", "MeanFieldVI"]

_N_MC_TRAIN = [Interval(Integral, 1, None, closed="left")]
_KL_WARMUP = [Interval(Integral, 0, None, closed="left")]
_INIT = [StrOptions(set(INITIALIZATIONS))]


def bayesian_mlp(kind, n_features, n_outputs, settings, factory, **layer_options):
    """The :class:`~skbayes.nn.BayesianMLP` of the estimator's architecture and prior.

    ``kind`` is ``"mfvi"`` (mean-field layers) or ``"mc_dropout"`` (dropout
    layers); ``factory`` holds ``generator``, ``device`` and ``dtype``;
    ``layer_options`` the layers' own settings (``posterior_init_scale`` or
    ``dropout_rate``) and the method's ``prior_scaling``.
    """
    layers = {"activation": settings.activation, "prior_scale": settings.prior_scale, **layer_options}
    network = BayesianMLP(n_features, settings.hidden_layer_sizes, n_outputs, inference=kind, **layers, **factory)
    return network.to(factory["device"])


def initialize_mean_field(init, module, X, Y, settings, generator):
    """Apply the posterior initialisation ``init`` to a mean-field network.

    ``init`` is a key of INITIALIZATIONS, or of MODULE_INITIALIZATIONS for a
    network around a torch module. The initialisations that regress the
    targets (``"iblm"``) take the likelihood's noise standard deviation:
    for Student-t noise its standard deviation sqrt(s^2 nu / (nu - 2)), for
    heteroscedastic noise its initial level (the raw noise outputs then
    regress 0, see :func:`skbayes.nn.iblm_init`); classification passes None.
    """
    likelihood = module["likelihood"]
    if getattr(likelihood, "heteroscedastic", False):
        noise_std = torch.full((likelihood.n_outputs,), likelihood.init_std, device=X.device, dtype=X.dtype)
    elif isinstance(likelihood, GaussianLikelihood):
        noise_std = likelihood.noise_std.detach()
    elif hasattr(likelihood, "noise_variance"):  # Student-t
        noise_std = likelihood.noise_variance().detach().sqrt()
    else:  # classification
        noise_std = None
    table = MODULE_INITIALIZATIONS if isinstance(module["network"], BayesianModuleNetwork) else INITIALIZATIONS
    table[init](
        module["network"], X, Y, prior_scale=settings.prior_scale, noise_std=noise_std, generator=generator
    )


@method_doc()
class MeanFieldVI(InferenceMethod):
    """Mean-field Gaussian variational inference (Bayes by Backprop).

    q(w) = prod N(mu, sigma^2) over every weight and bias, sigma =
    softplus(rho) [Blundell2015]_, fitted by Adam on the minibatch estimate
    of the negative ELBO with the local reparameterisation trick
    [Kingma2015]_ and the closed-form KL to the N(0, prior_scale^2) prior
    (N(0, prior_scale^2 / fan_in) per layer with ``prior_scaling="fan_in"``)
    (Cinelli 2019, section 3.3.3); see :class:`skbayes.nn.MeanFieldLinear`.

    Parameters
    ----------
    posterior_init_scale : float, default=1e-3
        Initial standard deviation of q with ``init="default"``.
    init : {"default", "iblm", "uninformative", "heuristic", "xavier", "orthogonal", "lsuv"}, default="default"
        Initialisation of q (see :data:`skbayes.nn.INITIALIZATIONS`):
        ``"default"`` keeps uniform random means and ``posterior_init_scale``
        standard deviations; ``"iblm"`` fits Bayesian linear regression layer
        by layer (I-BLM, Rossi 2022, chapter 3), which keeps VI from
        collapsing to the prior; the others are the alternatives compared
        there (section 3.3). A torch module
        (``module=`` of :class:`~skbayes.BayesianMLPClassifier`, ...) takes
        ``"default"`` or ``"iblm"``, its convolutions initialised from their
        input patches (:func:`skbayes.nn.init.iblm_init_module`).
    n_mc_train : int, default=1
        Monte-Carlo draws of the weights per row and step.
    kl_warmup_epochs : int, default=0
        Linear warm-up of the KL weight from 0 to 1 over this many epochs
        (KL annealing); the stopping rule starts counting after it.
    %(adam_parameters)s
    %(stopping_parameters)s
    %(predict_parameters)s
    %(prior_scaling_parameter)s

    References
    ----------
    .. [Blundell2015] C. Blundell, J. Cornebise, K. Kavukcuoglu and D. Wierstra,
       "Weight uncertainty in neural networks", ICML 2015.
    .. [Kingma2015] D. P. Kingma, T. Salimans and M. Welling, "Variational
       dropout and the local reparameterization trick", NeurIPS 2015.

    Examples
    --------
    >>> from skbayes import BayesianMLPRegressor
    >>> from skbayes.inference import MeanFieldVI
    >>> BayesianMLPRegressor(inference=MeanFieldVI(init="iblm", kl_warmup_epochs=10))
    BayesianMLPRegressor(inference=MeanFieldVI(init='iblm', kl_warmup_epochs=10))
    """

    collapse_guard = True
    auto_noise = "homoscedastic"

    _parameter_constraints = {
        **ADAM_CONSTRAINTS,
        **STOPPING_CONSTRAINTS,
        **PREDICT_CONSTRAINTS,
        **PRIOR_SCALING_CONSTRAINTS,
        "posterior_init_scale": [Interval(Real, 0, None, closed="neither")],
        "init": _INIT,
        "n_mc_train": _N_MC_TRAIN,
        "kl_warmup_epochs": _KL_WARMUP,
    }

    def __init__(
        self, posterior_init_scale=1e-3, init="default", n_mc_train=1, kl_warmup_epochs=0, *, learning_rate_init=3e-3,
        beta_1=0.9, beta_2=0.999, max_iter=500, early_stopping="auto", validation_fraction=0.1,
        n_iter_no_change="auto", tol=1e-4, n_mc_predict=100, prior_scaling=None,
    ):
        self.posterior_init_scale = posterior_init_scale
        self.init = init
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

    def can_warm_start(self, module):
        return isinstance(module["network"], BayesianModuleNetwork) or same_prior_scaling(self, module["network"])

    def build_network(self, n_features, n_outputs, settings, **factory):
        return bayesian_mlp(
            "mfvi", n_features, n_outputs, settings, factory, posterior_init_scale=self.posterior_init_scale,
            prior_scaling=self.prior_scaling,
        )

    def build_module_network(self, n_features, n_outputs, settings, *, generator, device, dtype):
        if self.init not in MODULE_INITIALIZATIONS:
            raise ValueError(
                f"MeanFieldVI(init={self.init!r}) initialises MLPs only; a torch module takes init='default' or "
                "init='iblm'."
            )
        (seed,) = module_seeds(generator, 1)
        module = to_mean_field(
            settings.module(seed, n_features, n_outputs, device, dtype),
            prior_scale=settings.prior_scale,
            posterior_init_scale=self.posterior_init_scale,
            prior_scaling=self.prior_scaling,
        )
        return BayesianModuleNetwork(
            module, n_features, n_outputs, input_shape=settings.input_shape, prior_scale=settings.prior_scale
        )

    def prepare(self, module, X, Y, settings, context):
        if not context.warm_start:
            initialize_mean_field(self.init, module, X, Y, settings, context.generator)
        return super().prepare(module, X, Y, settings, context)


#: MC dropout's rate at ``dropout_rate="auto"`` for the MLPs and for modules without convolutions.
AUTO_DROPOUT_RATE = 0.01
#: ... and for ``module=`` networks with convolutions.
AUTO_DROPOUT_RATE_CONV = 0.25


@method_doc()
class MCDropout(InferenceMethod):
    """MC dropout: a Bernoulli variational distribution over the rows of every weight matrix.

    Dropout before every layer (the input layer included), kept on at
    prediction time, is variational inference with q over weight rows that
    are either kept or zeroed [Gal2016]_ (chapter 3); the N(0,
    prior_scale^2) prior becomes a weight decay, and the KL condition of Gal
    2016, eq. 3.13 is the penalty of :class:`skbayes.nn.DropoutLinear`.

    Parameters
    ----------
    dropout_rate : float in [0, 1) or "auto", default="auto"
        Probability of dropping a unit. ``"auto"``: 0.01
        (``AUTO_DROPOUT_RATE``) for the MLPs and for ``module=`` networks
        without convolutions, 0.25 (``AUTO_DROPOUT_RATE_CONV``) for
        ``module=`` networks with convolutions. On seed 004's LeNet (MNIST,
        4,000 / 1,000 images, 20 epochs, ``placement="all"``) 0.01 left the
        network almost deterministic (mutual information 0.001 nats on the
        test images, at most 0.03 on a rotated digit; error 3.7 %); 0.1,
        0.25 and 0.5 gave errors 3.8, 3.4 and 3.6 %, NLL 0.109, 0.111 and
        0.130, mutual information 0.011, 0.029 and 0.074, and at most 0.26,
        0.50 and 0.92 on the rotated digit (doc page "Bayesian networks",
        ``results/mnist/mnist_cnn_rate_*``).
    n_mc_train : int, default=1
        Dropout masks per row and step.
    kl_warmup_epochs : int, default=0
        Linear warm-up of the weight of the KL condition (the weight decay)
        from 0 to 1 over this many epochs.
    placement : {"all", "dense", "existing"}, default="all"
        Where a torch module (``module=`` of the Bayesian MLP estimators)
        gets dropout, besides
        its own ``torch.nn.Dropout`` layers (always kept on at prediction):
        ``"all"`` before every dense layer, after every convolution (before
        pooling: the Bayesian CNN, [Gal2016]_ section 3.4.1), and in LSTM,
        GRU and embedding layers, tied across time steps (section 3.4.2);
        ``"dense"`` before the dense layers only; ``"existing"`` nowhere
        else (see :func:`skbayes.nn.networks.module.to_mc_dropout`). The
        MLPs always drop the inputs of every layer.
    %(adam_parameters)s
    %(stopping_parameters)s
    %(predict_parameters)s

    References
    ----------
    .. [Gal2016] Y. Gal, "Uncertainty in deep learning", PhD thesis,
       University of Cambridge, 2016, chapter 3.
    """

    _parameter_constraints = {
        **ADAM_CONSTRAINTS,
        **STOPPING_CONSTRAINTS,
        **PREDICT_CONSTRAINTS,
        "dropout_rate": [StrOptions({"auto"}), Interval(Real, 0, 1, closed="left")],
        "n_mc_train": _N_MC_TRAIN,
        "kl_warmup_epochs": _KL_WARMUP,
        "placement": [StrOptions(set(DROPOUT_PLACEMENTS))],
    }

    def __init__(
        self, dropout_rate="auto", n_mc_train=1, kl_warmup_epochs=0, placement="all", *, learning_rate_init=3e-3,
        beta_1=0.9, beta_2=0.999, max_iter=500, early_stopping="auto", validation_fraction=0.1,
        n_iter_no_change="auto", tol=1e-4, n_mc_predict=100,
    ):
        self.dropout_rate = dropout_rate
        self.n_mc_train = n_mc_train
        self.kl_warmup_epochs = kl_warmup_epochs
        self.placement = placement
        self.learning_rate_init = learning_rate_init
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.max_iter = max_iter
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.n_mc_predict = n_mc_predict

    def build_network(self, n_features, n_outputs, settings, **factory):
        rate = AUTO_DROPOUT_RATE if self.dropout_rate == "auto" else self.dropout_rate
        return bayesian_mlp("mc_dropout", n_features, n_outputs, settings, factory, dropout_rate=rate)

    def build_module_network(self, n_features, n_outputs, settings, *, generator, device, dtype):
        (seed,) = module_seeds(generator, 1)
        network = settings.module(seed, n_features, n_outputs, device, dtype)
        rate = self.dropout_rate
        if rate == "auto":
            convolutions = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)
            has_conv = any(isinstance(m, convolutions) for m in network.modules())
            rate = AUTO_DROPOUT_RATE_CONV if has_conv else AUTO_DROPOUT_RATE
        module, dropped_weights = to_mc_dropout(
            network,
            rate,
            placement=self.placement,
            prior_scale=settings.prior_scale,
        )
        return BayesianModuleNetwork(
            module, n_features, n_outputs, input_shape=settings.input_shape, prior_scale=settings.prior_scale,
            dropped_weights=dropped_weights,
        )
