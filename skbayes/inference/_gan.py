"""Bayes by GAN: an implicit posterior whose KL is a discriminator's density-ratio estimate.

Killingberg 2021, Proposition 1, eqs. 4.1-4.3 and Algorithm 7.
"""

import math
from numbers import Real

import torch

from .._param_validation import Interval, StrOptions
from .._training import KLWarmup
from ..base import hidden_layer_sizes
from ..nn import OptimizerChain, kl_warmup_weight, negative_elbo
from ._base import InferenceMethod, Training, adam
from ._loop import ADAM_CONSTRAINTS, PREDICT_CONSTRAINTS, STOPPING_CONSTRAINTS, method_doc
from ._hypernet import (
    _NON_NEGATIVE, _POSITIVE, _WIDTHS, N_DIAGNOSTIC_DRAWS, implicit_mlp, implicit_module_network, same_generators,
)

__all__ = ["BayesByGAN", "MLEThenKLWarmup", "discriminator_widths"]

# Smallest hidden width of an "auto" discriminator (0.5 max(N_in, N_out) is tiny for narrow layers).
_MIN_DISCRIMINATOR_WIDTH = 16


def discriminator_widths(in_features, out_features):
    """Killingberg 2021, Table 4.1: three hidden layers of 0.5 max(N_in, N_out) units (at least 16).

    Parameters
    ----------
    in_features, out_features : int
        N_in and N_out of the Bayesian layer the discriminator serves.

    Returns
    -------
    widths : tuple of int
        Three equal hidden widths, max(16, ceil(0.5 max(N_in, N_out))).
    """
    width = max(_MIN_DISCRIMINATOR_WIDTH, math.ceil(0.5 * max(in_features, out_features)))
    return (width, width, width)


class MLEThenKLWarmup(KLWarmup):
    """KL weight 0 for the first ``mle_epochs`` epochs, then :class:`KLWarmup`'s linear rise to 1.

    The MLE warm-up then KL annealing of Killingberg 2021, section 4.2.5:
    the generator first approaches a maximum-likelihood point while the
    discriminator learns, then the KL weight eta grows from 0 to 1 over
    ``n_epochs`` epochs.

    Parameters
    ----------
    mle_epochs : int
        Epochs with weight 0.
    n_epochs : int
        Length of the linear rise in epochs; 0 jumps to 1.
    start_epoch : int, default=0
        Epochs already run (``partial_fit``).
    """

    def __init__(self, mle_epochs, n_epochs, start_epoch=0):
        super().__init__(n_epochs, start_epoch)
        self.mle_epochs = mle_epochs

    def _update(self, state):
        step = (self.start_epoch - self.mle_epochs) * state.n_batches + state.step
        self.weight = 0.0 if step < 0 else kl_warmup_weight(step, state.n_batches * self.n_epochs)


@method_doc()
class BayesByGAN(InferenceMethod):
    r"""Bayes by GAN: weights generated from noise, the KL estimated by a discriminator.

    The posterior is the implicit one of :class:`BayesByHypernet` (per
    layer, a generator maps U(-1/2, 1/2)^noise_dim noise and the one-hot
    code of an output unit to the unit's weights and bias,
    :class:`skbayes.nn.ImplicitLinear`), and each layer has a discriminator
    D over its slices (:class:`skbayes.nn.SliceDiscriminator`) trained to
    tell generated slices (label 1) from N(0, prior_scale^2) prior draws
    (label 0) by the binary cross-entropy of Killingberg 2021, eq. 4.1. By
    Proposition 1 the optimal D's logit is log q/p, so the KL is the mean
    logit over q's draws, summed over slices and layers (eq. 4.3). Each
    step (Algorithm 7, with step 7's sign fixed so that the NLL is
    minimised):

    1. draw ``n_mc_train`` weight settings w_s from the generators;
    2. ``n_discriminator_steps`` Adam steps of the discriminators (rate
       ``discriminator_learning_rate``) on the binary cross-entropy of the
       detached w_s (a fresh draw for each step after the first) against
       ``n_prior_draws`` fresh prior draws;
    3. one Adam step of the generators (and of a learned noise) on

    .. math::

        -\frac1{S B}\sum_{s, i} \log p(y_i \mid x_i, w_s)
        + \frac{\eta}{N} \sum_{\text{layers, slices}} \frac1S \sum_s
          \operatorname{logit} D(w_s),

    the per-datum loss of :func:`skbayes.nn.negative_elbo` (the KL divided
    by N: Killingberg 2021, section 4.2.3), with the discriminators' weights
    held fixed. eta is 0 for ``mle_warmup_epochs`` (the discriminators
    already learn), then rises linearly to 1 over ``kl_warmup_epochs``
    (section 4.2.5). The discriminators are trained inside the loss, so the
    shared loop sees one loss per step; ``loss_curve_`` holds the
    generator's loss, whose KL part is an estimate (it may be negative on a
    batch). Prediction uses the generators only.

    Adversarial training is slow: the thesis ran 70,000 epochs on its
    20-point toy and found its MNIST error the worst of the methods it
    compared; the discriminator must be stronger than the generator and
    calibrated, and batch normalisation in it (absent here) underestimates
    the KL.

    Reads the estimator's ``hidden_layer_sizes``, ``activation``,
    ``prior_scale``; its own ``learning_rate_init`` is the generators' step
    size, ``beta_1`` and ``beta_2`` serve both optimisers. ``warm_start`` continues
    from the fitted generators and discriminators when the generator
    settings are unchanged; ``partial_fit`` runs one epoch per call and
    keeps both optimisers' states. ``inference_diagnostics_`` holds
    ``"kl_discriminator"``, the density-ratio estimate of KL(q || p) in
    nats from 200 draws of q after training, and ``"discriminator_loss"``,
    the discriminators' cross-entropy on 200 draws of q and of the prior
    (2 log 2 = 1.386 summed over layers means the discriminators cannot
    tell q from the prior). It also holds ``"kl_knn"``, the nearest-neighbour
    estimate of :class:`BayesByHypernet`'s default from the same draws, and
    the check of the discriminators: ``"n_kl_checked_layers"`` layers have
    slices no longer than the noise, where that estimate is consistent;
    ``"kl_checked_discriminator"`` and ``"kl_checked_knn"`` are both
    estimates summed over them. When the first is below half the second
    (and 2 nats below it) the fit warns (``ConvergenceWarning``) that q has
    collapsed towards a maximum-likelihood point: on Bayesian linear
    regression q's epistemic std is 3-6 % of the exact posterior's, and the
    estimates 3.6-5.8 against 18-20 nats (doc page "Implicit posteriors").

    Parameters
    ----------
    noise_dim : int, default=10
        Noise length per slice (Killingberg 2021, Table 4.1: at most 10).
    generator_hidden_sizes : tuple of int, default=(32, 64)
        Hidden widths of each layer's generator (appendix A).
    discriminator_hidden_sizes : "auto" or tuple of int, default="auto"
        Hidden widths of each layer's discriminator; ``"auto"``: three
        layers of max(16, ceil(0.5 max(N_in, N_out))) units (Table 4.1, with
        a floor for narrow layers).
    discriminator_learning_rate : float, default=1e-3
        Adam step size of the discriminators (Table 4.1).
    n_discriminator_steps : int, default=1
        Discriminator steps per generator step.
    n_mc_train : int, default=5
        Weight settings drawn per step.
    n_prior_draws : int, default=5
        Prior draws per discriminator step.
    mle_warmup_epochs : int, default=0
        Epochs with KL weight 0 (maximum likelihood) before the annealing.
    kl_warmup_epochs : int, default=0
        Epochs of the linear rise of the KL weight from 0 to 1 after them.
    %(adam_parameters)s
    %(stopping_parameters)s
    %(predict_parameters)s

    References
    ----------
    .. [Killingberg2021] L. Killingberg, "Generative adversarial networks
       for flexible variational posteriors in Bayesian neural networks",
       MSc thesis, NTNU, 2021, chapter 4.

    Examples
    --------
    >>> from skbayes import BayesianMLPRegressor
    >>> from skbayes.inference import BayesByGAN
    >>> BayesByGAN(mle_warmup_epochs=50, kl_warmup_epochs=100)
    BayesByGAN(kl_warmup_epochs=100, mle_warmup_epochs=50)
    >>> BayesianMLPRegressor(inference="bbg")
    BayesianMLPRegressor(inference='bbg')
    """

    # The discriminator's KL estimate is an ELBO's KL: the fit can stay at (or return to) the prior's
    # predictive. At its defaults on scikit-learn's check_regressors_train data the training R^2 is 0.57 with
    # random_state=0 but 0.02, 0.04 and 0.00 with 1, 2 and 3 (examples/benchmarks/results/defaults/
    # vi_defaults_bbg.md), so the estimators check its fits too.
    collapse_guard = True

    _parameter_constraints = {
        **ADAM_CONSTRAINTS,
        **STOPPING_CONSTRAINTS,
        **PREDICT_CONSTRAINTS,
        "noise_dim": _POSITIVE,
        "generator_hidden_sizes": _WIDTHS,
        "discriminator_hidden_sizes": [StrOptions({"auto"}), *_WIDTHS],
        "discriminator_learning_rate": [Interval(Real, 0, None, closed="neither")],
        "n_discriminator_steps": _POSITIVE,
        "n_mc_train": _POSITIVE,
        "n_prior_draws": _POSITIVE,
        "mle_warmup_epochs": _NON_NEGATIVE,
        "kl_warmup_epochs": _NON_NEGATIVE,
    }

    def __init__(
        self, noise_dim=10, generator_hidden_sizes=(32, 64), discriminator_hidden_sizes="auto",
        discriminator_learning_rate=1e-3, n_discriminator_steps=1, n_mc_train=5, n_prior_draws=5,
        mle_warmup_epochs=0, kl_warmup_epochs=0, *, learning_rate_init=3e-3, beta_1=0.9, beta_2=0.999, max_iter=500,
        early_stopping="auto", validation_fraction=0.1, n_iter_no_change="auto", tol=1e-4, n_mc_predict=100,
    ):
        self.noise_dim = noise_dim
        self.generator_hidden_sizes = generator_hidden_sizes
        self.discriminator_hidden_sizes = discriminator_hidden_sizes
        self.discriminator_learning_rate = discriminator_learning_rate
        self.n_discriminator_steps = n_discriminator_steps
        self.n_mc_train = n_mc_train
        self.n_prior_draws = n_prior_draws
        self.mle_warmup_epochs = mle_warmup_epochs
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

    def _layer_discriminator_sizes(self, in_features, out_features):
        """Hidden widths of the discriminator of a layer with ``in_features`` inputs and ``out_features`` outputs."""
        if isinstance(self.discriminator_hidden_sizes, str):
            return discriminator_widths(in_features, out_features)
        return tuple(hidden_layer_sizes(self.discriminator_hidden_sizes, "a linear discriminator"))

    def _discriminator_sizes(self, n_features, n_outputs, settings):
        sizes = [n_features, *settings.hidden_layer_sizes, n_outputs]
        return [self._layer_discriminator_sizes(n_in, n_out) for n_in, n_out in zip(sizes[:-1], sizes[1:])]

    def build_network(self, n_features, n_outputs, settings, **factory):
        discriminators = self._discriminator_sizes(n_features, n_outputs, settings)
        return implicit_mlp(self, n_features, n_outputs, settings, factory, discriminators)

    def build_module_network(self, n_features, n_outputs, settings, **factory):
        return implicit_module_network(
            self, n_features, n_outputs, settings, **factory, discriminator_sizes=self._layer_discriminator_sizes
        )

    def can_warm_start(self, module):
        network = module["network"]
        return same_generators(self, network) and network.discriminators is not None

    def prepare(self, module, X, Y, settings, context):
        network, likelihood = module["network"], module["likelihood"]
        schedule = MLEThenKLWarmup(self.mle_warmup_epochs, self.kl_warmup_epochs, start_epoch=context.epochs_done)
        generator, n_data = context.generator, context.n_data
        discriminator_optimizer = torch.optim.Adam(
            network.discriminators.parameters(), lr=self.discriminator_learning_rate, betas=(self.beta_1, self.beta_2)
        )

        def train_discriminators(slices):
            for step in range(self.n_discriminator_steps):
                if step:
                    with torch.no_grad():
                        slices = network.slice_draws(self.n_mc_train, generator)
                discriminator_optimizer.zero_grad(set_to_none=True)
                prior = network.prior_slice_draws(self.n_prior_draws, generator)
                network.discriminator_loss(slices, prior).backward()
                discriminator_optimizer.step()
            # the generator's backward leaves the discriminators' gradients None: the chain skips them
            discriminator_optimizer.zero_grad(set_to_none=True)

        def loss_fn(idx):
            slices = network.slice_draws(self.n_mc_train, generator)
            train_discriminators(slices)
            f = network.forward_slices(X[idx], slices)
            kl = network.kl_discriminator(slices)
            return negative_elbo(likelihood.log_prob(Y[idx], f), schedule.weight * kl, n_data)

        @torch.no_grad()
        def finish():
            slices = network.slice_draws(N_DIAGNOSTIC_DRAWS, generator)
            prior = network.prior_slice_draws(N_DIAGNOSTIC_DRAWS, generator)
            by_discriminator = network.kl_discriminator(slices, per_layer=True)
            by_neighbours = network.kl_entropy(slices, per_layer=True)
            # the layers whose slices have no more coordinates than the noise: there the nearest-neighbour
            # estimate is consistent for KL(q || p) itself, an independent check of the discriminators'
            checked = [i for i, layer in enumerate(network.layers) if layer.in_features + 1 <= layer.noise_dim]
            return {
                "kl_discriminator": float(sum(by_discriminator)),
                "discriminator_loss": float(network.discriminator_loss(slices, prior)),
                "kl_knn": float(sum(by_neighbours)),
                "n_kl_checked_layers": len(checked),
                "kl_checked_discriminator": float(sum(by_discriminator[i] for i in checked)),
                "kl_checked_knn": float(sum(by_neighbours[i] for i in checked)),
            }

        generator_parameters = [p for layer in network.layers for p in layer.parameters()] + list(likelihood.parameters())
        return Training(
            loss_fn,
            OptimizerChain(adam(generator_parameters, self), discriminator_optimizer),
            callbacks=[schedule],
            loop={"min_iter": self.mle_warmup_epochs + self.kl_warmup_epochs},
            finish=finish,
        )
