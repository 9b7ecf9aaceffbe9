"""Bayes by Hypernet: an implicit posterior whose KL is estimated by nearest neighbours.

Pawlowski et al. 2017; Killingberg 2021, section 3.3, eq. 3.6 and Algorithm 6.
"""

from numbers import Integral

import torch

from .._param_validation import Interval, StrOptions
from .._training import KLWarmup
from ..base import hidden_layer_sizes
from ..nn import ImplicitMLP, negative_elbo
from ..nn.networks.implicit import ImplicitModuleNetwork, implicit_layers, to_implicit
from ._base import InferenceMethod, Training, adam, module_seeds
from ._loop import (
    ADAM_CONSTRAINTS, PREDICT_CONSTRAINTS, PRIOR_SCALING_CONSTRAINTS, STOPPING_CONSTRAINTS, method_doc,
    same_prior_scaling,
)

__all__ = ["BayesByHypernet"]

_POSITIVE = [Interval(Integral, 1, None, closed="left")]
_AT_LEAST_2 = [Interval(Integral, 2, None, closed="left")]
_NON_NEGATIVE = [Interval(Integral, 0, None, closed="left")]
_WIDTHS = ["array-like", Interval(Integral, 1, None, closed="left")]

# Draws of q and of the prior behind the reported KL estimate (inference_diagnostics_).
N_DIAGNOSTIC_DRAWS = 200


def implicit_mlp(method, n_features, n_outputs, settings, factory, discriminator_hidden_sizes=None):
    """The :class:`~skbayes.nn.ImplicitMLP` of the estimator's architecture, prior and the method's generator."""
    network = ImplicitMLP(
        n_features,
        settings.hidden_layer_sizes,
        n_outputs,
        activation=settings.activation,
        prior_scale=settings.prior_scale,
        noise_dim=method.noise_dim,
        generator_hidden_sizes=tuple(hidden_layer_sizes(method.generator_hidden_sizes, "a linear generator")),
        discriminator_hidden_sizes=discriminator_hidden_sizes,
        prior_scaling=getattr(method, "prior_scaling", None),
        **factory,
    )
    return network.to(factory["device"])


def implicit_module_network(method, n_features, n_outputs, settings, *, generator, device, dtype, discriminator_sizes=None):
    """The :class:`~skbayes.nn.networks.ImplicitModuleNetwork` of the estimator's module under ``method``.

    ``discriminator_sizes(n_in, n_out)``: the hidden widths of a layer's
    discriminator (Bayes by GAN), or None for none.
    """
    (seed,) = module_seeds(generator, 1)
    module = to_implicit(
        settings.module(seed, n_features, n_outputs, device, dtype),
        noise_dim=method.noise_dim,
        hidden_sizes=tuple(hidden_layer_sizes(method.generator_hidden_sizes, "a linear generator")),
        generator=generator,
    )
    discriminators = None
    if discriminator_sizes is not None:
        discriminators = [discriminator_sizes(layer.in_features, layer.out_features) for layer in implicit_layers(module)]
    return ImplicitModuleNetwork(
        module, n_features, n_outputs, input_shape=settings.input_shape, prior_scale=settings.prior_scale,
        prior_scaling=getattr(method, "prior_scaling", None), discriminator_hidden_sizes=discriminators,
        generator=generator,
    )


def same_generators(method, network):
    """Whether ``network`` has the generators ``method`` would build (for a warm start)."""
    if not isinstance(network, (ImplicitMLP, ImplicitModuleNetwork)):
        return False
    hidden = tuple(hidden_layer_sizes(method.generator_hidden_sizes, "a linear generator"))
    first = network.layers[0]
    widths = tuple(layer.out_features for layer in first.generator_net.layers[:-1])
    return first.noise_dim == method.noise_dim and widths == hidden and same_prior_scaling(method, network)


@method_doc()
class BayesByHypernet(InferenceMethod):
    r"""Bayes by Hypernet: weights generated from noise, the KL by the 1-nearest-neighbour estimator.

    q(w) is implicit: per layer, a generator network (a hypernetwork) maps
    noise z ~ U(-1/2, 1/2)^noise_dim and the one-hot code of an output unit
    to that unit's incoming weights and bias (:class:`skbayes.nn.ImplicitLinear`;
    the per-layer, per-output-unit variant of [Pawlowski2017]_, which they
    found the most accurate). Each step draws ``n_mc_train`` weight
    settings, evaluates the minibatch under each, and estimates KL(q || p)
    to the Gaussian prior (N(0, prior_scale^2 / fan_in) per layer at the default
    ``prior_scaling="fan_in"``, N(0, prior_scale^2) with None) from the same
    draws, slice by slice (the slices are independent under q and p, so
    their KLs add up). The loss is the per-datum negative ELBO
    :func:`skbayes.nn.negative_elbo`,

    .. math::

        -\frac1{S B}\sum_{s, i} \log p(y_i \mid x_i, w_s)
        + \frac{\eta}{N} \widehat{\mathrm{KL}}(q \,\|\, p),

    minimised by Adam over the generators (Killingberg 2021, Algorithm 6),
    with the KL weight eta rising linearly from 0 to 1 over
    ``kl_warmup_epochs``.

    The KL estimate (``kl_estimator``):

    ``"entropy"`` (default)
        The prior's cross-entropy, exact per draw, less the
        Kozachenko-Leonenko 1-nearest-neighbour entropy of each slice's
        draws in the dimension of its manifold, min(noise_dim, in + 1)
        (:func:`skbayes.nn.gaussian_prior_kl_from_draws`). Its expectation
        is minimised where q's spread matches the prior's.
    ``"two_sample"``
        The estimator of the thesis and of [Pawlowski2017]_: the
        1-nearest-neighbour distances of q's draws to each other and to
        ``n_prior_draws`` prior draws in in + 1 dimensions (Killingberg
        2021, eq. 3.6 with the sign of its constant fixed,
        :func:`skbayes.nn.knn_kl`). With 5 + 5 draws in many dimensions its
        expectation keeps falling as q widens past the prior (to -d/2 log 2
        per slice): on MNIST's 785-input slices the generators learned to
        spread the weights and the fit ended at chance level (measured with
        the generators' earlier initialisation; doc page "Implicit
        posteriors"). It suits slices of a few inputs only.

    Reads the estimator's ``hidden_layer_sizes``, ``activation``,
    ``prior_scale``; Adam's settings and the stopping rule are its own.
    ``warm_start`` continues from the fitted generators when the generator
    settings and ``prior_scaling`` are unchanged; ``partial_fit`` runs one epoch per call.
    ``inference_diagnostics_`` holds ``"kl_knn"``, the ``kl_estimator``'s
    nearest-neighbour estimate of KL(q || p) in nats from 200 draws of q
    (and, for ``"two_sample"``, of the prior) after training (less biased
    than the training-time estimate).

    Parameters
    ----------
    noise_dim : int, default=10
        Noise length per slice (Killingberg 2021, Table 4.1: at most 10).
    generator_hidden_sizes : tuple of int, default=(32, 64)
        Hidden widths of each layer's generator (Killingberg 2021,
        appendix A).
    n_mc_train : int, default=5
        Weight settings drawn per step (>= 2: the estimators need a nearest
        neighbour among them); the likelihood is averaged over them.
    n_prior_draws : int, default=5
        Prior draws per step for ``kl_estimator="two_sample"`` (unused by
        ``"entropy"``).
    kl_warmup_epochs : int, default=0
        Linear warm-up of the KL weight from 0 to 1 over this many epochs;
        the stopping rule waits for it.
    kl_estimator : {"entropy", "two_sample"}, default="entropy"
        The KL estimate (above).
    %(adam_parameters)s
    %(stopping_parameters)s
    %(predict_parameters)s
    %(prior_scaling_parameter)s

    References
    ----------
    .. [Pawlowski2017] N. Pawlowski, A. Brock, M. C. H. Lee, M. Rajchl and
       B. Glocker, "Implicit weight uncertainty in neural networks", arXiv
       1711.01297, 2017 (Killingberg 2021, section 3.3).

    Examples
    --------
    >>> from skbayes import BayesianMLPRegressor
    >>> from skbayes.inference import BayesByHypernet
    >>> BayesianMLPRegressor(inference=BayesByHypernet(n_mc_train=10))
    BayesianMLPRegressor(inference=BayesByHypernet(n_mc_train=10))
    """

    collapse_guard = True
    auto_noise = "homoscedastic"

    _parameter_constraints = {
        **ADAM_CONSTRAINTS,
        **STOPPING_CONSTRAINTS,
        **PREDICT_CONSTRAINTS,
        **PRIOR_SCALING_CONSTRAINTS,
        "noise_dim": _POSITIVE,
        "generator_hidden_sizes": _WIDTHS,
        "n_mc_train": _AT_LEAST_2,
        "n_prior_draws": _POSITIVE,
        "kl_warmup_epochs": _NON_NEGATIVE,
        "kl_estimator": [StrOptions({"entropy", "two_sample"})],
    }

    def __init__(
        self, noise_dim=10, generator_hidden_sizes=(32, 64), n_mc_train=5, n_prior_draws=5, kl_warmup_epochs=0,
        kl_estimator="entropy", *,
        learning_rate_init=3e-3, beta_1=0.9, beta_2=0.999, max_iter=500, early_stopping="auto",
        validation_fraction=0.1, n_iter_no_change="auto", tol=1e-4, n_mc_predict=100, prior_scaling="fan_in",
    ):
        self.noise_dim = noise_dim
        self.generator_hidden_sizes = generator_hidden_sizes
        self.n_mc_train = n_mc_train
        self.n_prior_draws = n_prior_draws
        self.kl_warmup_epochs = kl_warmup_epochs
        self.kl_estimator = kl_estimator
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

    def build_network(self, n_features, n_outputs, settings, **factory):
        return implicit_mlp(self, n_features, n_outputs, settings, factory)

    def build_module_network(self, n_features, n_outputs, settings, **factory):
        return implicit_module_network(self, n_features, n_outputs, settings, **factory)

    def can_warm_start(self, module):
        return same_generators(self, module["network"])

    def prepare(self, module, X, Y, settings, context):
        network, likelihood = module["network"], module["likelihood"]
        warmup = KLWarmup(self.kl_warmup_epochs, start_epoch=context.epochs_done)
        generator, n_data = context.generator, context.n_data

        def estimate_kl(slices, n_prior_draws):
            if self.kl_estimator == "entropy":
                return network.kl_entropy(slices)
            return network.kl_knn(slices, n_prior_draws, generator)

        def loss_fn(idx):
            slices = network.slice_draws(self.n_mc_train, generator)
            f = network.forward_slices(X[idx], slices)
            kl = estimate_kl(slices, self.n_prior_draws)
            return negative_elbo(likelihood.log_prob(Y[idx], f), warmup.weight * kl, n_data)

        @torch.no_grad()
        def finish():
            slices = network.slice_draws(N_DIAGNOSTIC_DRAWS, generator)
            return {"kl_knn": float(estimate_kl(slices, N_DIAGNOSTIC_DRAWS))}

        return Training(
            loss_fn,
            adam(module.parameters(), self),
            callbacks=[warmup],
            loop={"min_iter": self.kl_warmup_epochs},
            finish=finish,
        )
