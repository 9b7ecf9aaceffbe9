"""Probabilistic backpropagation (Hernández-Lobato & Adams 2015) as an inference method."""

import torch

from .._training import Callback
from ..nn import PBPNetwork, PBPOptimizer, inverse_softplus
from ._base import InferenceMethod, Training

__all__ = ["PBP"]


class PBP(InferenceMethod):
    """Probabilistic backpropagation: assumed density filtering through ReLU layers.

    Hernández-Lobato & Adams 2015 [HernandezLobato2015]_ (Cinelli 2019,
    section 3.4, Algorithm 3). q(w) is a factorised Gaussian, the prior
    precision lambda and the noise precision gamma have Gamma posteriors
    (hyperpriors Ga(6, 6) on both, for standardised targets, as in the
    authors' code), and there is no learning rate: each training row is
    included by an ADF moment-matching step, and the prior factors are
    refined by EP after every pass over the data. The math is in
    :class:`skbayes.nn.PBPNetwork` and :class:`skbayes.nn.PBPOptimizer`.

    PBP infers its own prior scale and noise level and has no step size, so
    it reads only these of the estimator's settings: ``hidden_layer_sizes``,
    ``activation`` (``"relu"`` when there are hidden layers), ``noise_std``
    (``"learn"`` infers q(gamma) and predicts with the noise
    E[1/gamma]^(1/2); a float keeps the noise fixed), ``batch_size``
    (``"auto"`` includes one row per ADF step, the paper's schedule; an
    integer includes that many rows per step as one factor, faster but
    approximate), ``max_iter`` (passes over the data; ``"auto"`` is the
    paper's 40; the authors advise fewer than 100, since every pass counts
    the data again and shrinks the variances), ``early_stopping`` and the
    stopping rule (without ``early_stopping`` all passes run: -log Z keeps
    falling with every pass), ``random_state``, ``device`` and ``dtype``.

    Regression only, with homoscedastic Gaussian noise (``noise="homoscedastic"``:
    the moment matching of the likelihood factor is in closed form for it
    only). ``warm_start=True`` runs more passes over the data,
    which counts it again; to add new rows, use ``partial_fit``: one ADF pass
    over them (the streaming use of ADF) followed by a refinement of the
    prior factors.

    After fitting, the network's layers hold the Gaussian posterior of each
    (scaled) weight, so prediction samples weights from q like
    :class:`MeanFieldVI`; ``inference_diagnostics_`` holds ``prior_std``
    (E[1/lambda]^(1/2), the inferred prior scale of the unscaled weights),
    ``n_rejected`` (weight updates skipped by the variance safeguard) and
    ``kl`` (KL(q || prior) at the inferred prior scale).

    References
    ----------
    .. [HernandezLobato2015] J. M. Hernández-Lobato and R. P. Adams,
       "Probabilistic backpropagation for scalable learning of Bayesian
       neural networks", ICML 2015.
    """

    supports_classification = False
    #: Moment matching is for the homoscedastic Gaussian likelihood only.
    noise_models = frozenset({"homoscedastic"})
    #: The authors' 40 passes (Hernández-Lobato & Adams 2015, section 5).
    default_max_iter = 40

    def build_network(self, n_features, n_outputs, settings, *, generator, device, dtype):
        if settings.hidden_layer_sizes and settings.activation != "relu":
            raise ValueError(
                f"PBP propagates moments through ReLU units only; got "
                f"activation={settings.activation!r}. Use activation='relu' or another inference method."
            )
        return PBPNetwork(
            n_features, settings.hidden_layer_sizes, n_outputs, generator=generator, device=device, dtype=dtype
        )

    def prepare(self, module, X, Y, settings, context):
        network, likelihood = module["network"], module["likelihood"]
        learn_noise = settings.learn_noise
        loop = {"batch_size": 1} if settings.batch_size == "auto" else {}
        if not context.early_stopping:
            # -log Z keeps falling with every pass (each pass counts the data
            # again), so the passes are a fixed schedule, not a stopping rule.
            loop["n_iter_no_change"] = None

        def sync_noise():
            # The likelihood predicts with the inferred noise E[1/gamma]^(1/2)
            # (Cinelli 2019, eq. 3.38, aleatoric term), also for early stopping.
            std = network.expected_noise_var().sqrt().to(likelihood.raw_noise.dtype)
            with torch.no_grad():
                likelihood.raw_noise.copy_(inverse_softplus(std - likelihood._floor))

        rows = []  # the moments of the last minibatch, from the loss to the ADF step

        def loss_fn(idx):
            noise_var = None if learn_noise else likelihood.noise_std.detach() ** 2
            log_z, batch_rows = network.log_z(X[idx], Y[idx], noise_var)
            rows.append(batch_rows)
            return -log_z.mean()

        optimizer = _ADFSteps(PBPOptimizer(network, update_noise=learn_noise), rows)
        refine = _RefinePrior(network, sync_noise if learn_noise else None)

        def finish():
            if learn_noise:
                sync_noise()
            return {
                "prior_std": float(network.expected_prior_var().sqrt()),
                "n_rejected": optimizer.optimizer.n_rejected,
                "kl": float(network.kl().detach()),
            }

        return Training(loss_fn, optimizer, callbacks=[refine], loop=loop, finish=finish)


class _ADFSteps:
    """The optimiser the shared loop drives: one ADF step with the moments of each minibatch.

    ``step()`` hands the row moments that the last loss evaluation appended
    to ``rows`` to :meth:`skbayes.nn.PBPOptimizer.step`.
    """

    def __init__(self, optimizer, rows):
        self.optimizer, self.rows = optimizer, rows

    def zero_grad(self, set_to_none=True):
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def step(self):
        self.optimizer.step(self.rows.pop())

    def state_dict(self):
        return self.optimizer.state_dict()

    def load_state_dict(self, state_dict):
        self.optimizer.load_state_dict(state_dict)


class _RefinePrior(Callback):
    """After every pass: EP refinement of the prior factors, then the likelihood's noise follows q(gamma).

    As an epoch-end hook it runs after the pass's last ADF step and before
    the validation score (Cinelli 2019, Algorithm 3).
    """

    def __init__(self, network, sync_noise=None):
        self.network, self.sync_noise = network, sync_noise

    def on_epoch_end(self, state):
        self.network.refine_prior()
        if self.sync_noise is not None:
            self.sync_noise()
