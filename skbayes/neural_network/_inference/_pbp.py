"""Probabilistic backpropagation (Hernández-Lobato & Adams 2015) as an inference method.

The math lives in :class:`skbayes.nn.PBPNetwork` and :class:`skbayes.nn.PBPOptimizer`; this adapter builds the network,
runs the ADF updates through the shared training loop (one row per step by
default) and copies the inferred noise level into the estimator's likelihood.
"""

import math

import torch

from ..._training import fit_loop
from ...nn import PBPNetwork, PBPOptimizer, inverse_softplus
from ._base import InferenceMethod

__all__ = ["ProbabilisticBackpropagation"]


class _ADFSteps:
    """The optimiser the shared loop drives: one ADF step with the rows of each minibatch.

    ``step()`` hands the rows that the last ``loss_fn`` call put in ``rows``
    to :meth:`PBPOptimizer.step`, and after the last step of every pass over
    the data (``steps_per_epoch`` steps) calls ``end_of_epoch()``, before the
    loop computes the validation score.
    """

    def __init__(self, optimizer, rows, steps_per_epoch, end_of_epoch):
        self.optimizer, self.rows = optimizer, rows
        self.steps_per_epoch, self.end_of_epoch = steps_per_epoch, end_of_epoch
        self.n_steps = 0

    def zero_grad(self, set_to_none=True):
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def step(self):
        self.optimizer.step(self.rows.pop())
        self.n_steps += 1
        if self.n_steps % self.steps_per_epoch == 0:
            self.end_of_epoch()


class ProbabilisticBackpropagation(InferenceMethod):
    """PBP: assumed density filtering with moment matching through ReLU layers.

    Hernández-Lobato & Adams 2015 (Cinelli 2019, section 3.4, Algorithm 3).
    q(w) is a factorised Gaussian, the prior precision lambda and the noise
    precision gamma have Gamma posteriors (hyperpriors Ga(6, 6) on both, for
    standardised targets, as in the authors' code), and there is no learning
    rate: each training row is included by an ADF moment-matching step, and
    the prior factors are refined by EP after every pass over the data.

    Estimator parameters used: ``hidden_layer_sizes``, ``activation`` (must
    be ``"relu"`` when there are hidden layers), ``noise`` (``"learn"``
    infers q(gamma) and sets the likelihood's noise to E[1/gamma]^(1/2); a
    float keeps it fixed and skips the gamma updates), ``batch_size``
    (``"auto"`` means one row per ADF step, the paper's schedule; an integer
    includes that many rows per step as one factor, faster but approximate),
    ``max_iter`` (passes over the data, ``"auto"``: 40 as in the paper; the
    authors advise fewer than 100, since repeated ADF over-counts the data
    and shrinks the variances; without ``early_stopping`` all passes run),
    ``random_state``, ``early_stopping`` and the stopping rule of the shared
    loop. ``prior_scale``, ``posterior_init_scale``, ``learning_rate_init``,
    ``beta_1``, ``beta_2``, ``n_samples_train``, ``init`` and
    ``kl_warmup_epochs`` do not apply: PBP infers the prior scale and the
    noise, and has no learning rate.

    After fitting, the network's layers hold the Gaussian posterior of each
    (scaled) weight, so prediction samples weights from q like mean-field
    VI; the fitted attributes ``pbp_prior_std_`` (E[1/lambda]^(1/2), the
    inferred prior scale of the unscaled weights) and ``pbp_n_rejected_``
    (weight updates skipped by the variance safeguard) are diagnostics.
    """

    supports_classification = False
    #: The authors' 40 passes (Hernández-Lobato & Adams 2015, section 5).
    default_max_iter = 40

    def build_network(
        self, n_features, hidden_sizes, n_outputs, *, generator, device, dtype
    ):
        est = self.estimator
        if hidden_sizes and est.activation != "relu":
            raise ValueError(
                f"inference='pbp' propagates moments through ReLU units only; got "
                f"activation={est.activation!r}. Use activation='relu' or another inference method."
            )
        return PBPNetwork(
            n_features,
            hidden_sizes,
            n_outputs,
            generator=generator,
            device=device,
            dtype=dtype,
        )

    def fit(self, module, X, Y, *, noise_generator, loop):
        network, likelihood = module["network"], module["likelihood"]
        learn_noise = self.estimator.noise == "learn"
        n_data = X.shape[0]
        batch_size = 1 if self.estimator.batch_size == "auto" else loop["batch_size"]
        loop = {**loop, "batch_size": batch_size}
        if loop["validation_score_fn"] is None:
            # -log Z keeps falling with every pass (each pass counts the data
            # again), so the passes are a fixed schedule, not a stopping rule.
            loop["n_iter_no_change"] = None

        def sync_noise():
            # The likelihood predicts with the inferred noise E[1/gamma]^(1/2)
            # (Cinelli 2019, eq. 3.38, aleatoric term), also for early stopping.
            std = network.expected_noise_var().sqrt().to(likelihood.raw_noise.dtype)
            with torch.no_grad():
                likelihood.raw_noise.copy_(inverse_softplus(std - likelihood._floor))

        def end_of_epoch():
            # EP refinement of the prior factors after each pass (Cinelli 2019, Algorithm 3)
            network.refine_prior()
            if learn_noise:
                sync_noise()

        optimizer = PBPOptimizer(network, update_noise=learn_noise)
        rows = []

        def loss_fn(idx):
            noise_var = None if learn_noise else likelihood.noise_std.detach() ** 2
            log_z, batch_rows = network.log_z(X[idx], Y[idx], noise_var)
            rows.append(batch_rows)
            return -log_z.mean()

        steps = _ADFSteps(optimizer, rows, math.ceil(n_data / batch_size), end_of_epoch)
        result = fit_loop(loss_fn, steps, **loop)
        if learn_noise:
            sync_noise()
        self.diagnostics["pbp_prior_std"] = float(network.expected_prior_var().sqrt())
        self.diagnostics["pbp_n_rejected"] = optimizer.n_rejected
        return result
