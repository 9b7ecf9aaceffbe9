"""Probabilistic backpropagation (Hernández-Lobato & Adams 2015) as an inference method."""

import torch

from .._param_validation import StrOptions
from .._training import Callback
from ..nn import PBPNetwork, PBPOptimizer, inverse_softplus
from ._base import InferenceMethod, Training
from ._loop import PREDICT_CONSTRAINTS, STOPPING_CONSTRAINTS, method_doc

__all__ = ["PBP"]


@method_doc(epoch="ADF passes over the training rows")
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
    One step of the training loop is a whole ADF pass over the shuffled rows
    (:meth:`~skbayes.nn.PBPOptimizer.adf_pass`), so a callback's
    ``on_batch_end`` runs once per pass.

    PBP infers its own prior scale and noise level and has no step size, so
    it reads only these of the estimator's settings: ``hidden_layer_sizes``,
    ``activation`` (``"relu"`` when there are hidden layers), ``noise_std``
    (``"learn"`` infers q(gamma) and predicts with the noise
    E[1/gamma]^(1/2); a float keeps the noise fixed), ``batch_size``
    (``"auto"`` includes one row per ADF step, the paper's schedule; an
    integer includes that many rows per step as one factor, faster but
    approximate), ``random_state``, ``device`` and ``dtype``. Its own
    ``max_iter`` counts passes over the data (the paper's 40; the authors
    advise fewer than 100, since every pass counts the data again and
    shrinks the variances); without ``early_stopping`` all passes run
    (-log Z keeps falling with every pass).

    Regression only, with homoscedastic Gaussian noise (``noise="homoscedastic"``:
    the moment matching of the likelihood factor is in closed form for it
    only). ``warm_start=True`` runs more passes over the data,
    which counts it again; to add new rows, use ``partial_fit``: one ADF pass
    over them (the streaming use of ADF) followed by a refinement of the
    prior factors.

    After fitting, the network's layers hold the Gaussian posterior of each
    (scaled) weight. With ``predictive="moments"`` (the default) the
    prediction is PBP's own: the Gaussian N(m(x), v(x) + E[1/gamma]) whose
    m and v are propagated through the layers by moment matching (Cinelli
    2019, eqs. 3.38-3.43; :meth:`skbayes.nn.PBPNetwork.moments`), as the
    authors' code predicts. The estimators average over ``n_mc_predict``
    equally weighted quadrature nodes of N(m, v) instead of weight draws
    (``skbayes.nn.networks.pbp.gaussian_quadrature_nodes``), so
    ``predict``, ``return_std`` and ``predict_uncertainty`` give m, v and
    the noise exactly; the log density and the quantiles are those of the
    nodes' mixture (within 5e-3 nats of the Gaussian's on the tests'
    data, ``tests/inference/test_pbp.py``). ``sample_y`` draws f = m + v^(1/2) xi, xi ~ N(0, 1).
    ``predictive="sampling"`` samples weights from q like
    :class:`MeanFieldVI` and propagates each draw (the ReLU units then
    see q's non-Gaussian pre-activations). ``inference_diagnostics_`` holds ``prior_std``
    (E[1/lambda]^(1/2), the inferred prior scale of the unscaled weights),
    ``n_rejected`` (weight updates skipped by the variance safeguard) and
    ``kl`` (KL(q || prior) at the inferred prior scale).

    Parameters
    ----------
    predictive : {"moments", "sampling"}, default="moments"
        The prediction: PBP's moment-matched Gaussian, or weight draws
        from q (above).
    %(stopping_parameters)s
    %(predict_parameters)s

    References
    ----------
    .. [HernandezLobato2015] J. M. Hernández-Lobato and R. P. Adams,
       "Probabilistic backpropagation for scalable learning of Bayesian
       neural networks", ICML 2015.
    """

    supports_classification = False
    #: Moment matching is for the homoscedastic Gaussian likelihood only.
    noise_models = frozenset({"homoscedastic"})
    _parameter_constraints = {
        **STOPPING_CONSTRAINTS, **PREDICT_CONSTRAINTS, "predictive": [StrOptions({"moments", "sampling"})],
    }

    # max_iter=40: the authors' 40 passes (Hernández-Lobato & Adams 2015, section 5)
    def __init__(
        self, predictive="moments", *, max_iter=40, early_stopping="auto", validation_fraction=0.1,
        n_iter_no_change="auto", tol=1e-4, n_mc_predict=100,
    ):
        self.predictive = predictive
        self.max_iter = max_iter
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.n_mc_predict = n_mc_predict

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
        network.predictive = self.predictive  # every fit (a warm start too) predicts as the method says
        learn_noise = settings.learn_noise
        # One step of the training loop is one ADF pass over the shuffled
        # rows (PBPOptimizer.adf_pass), which includes them one after another
        # (or batch_size at a time); the loop's per-step work would otherwise
        # cost more than the step itself.
        rows_per_step = 1 if settings.batch_size == "auto" else context.batch_size
        loop = {"batch_size": X.shape[0]}
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

        optimizer = PBPOptimizer(network, update_noise=learn_noise)

        def loss_fn(idx):
            # -log Z per row, each row's before its own step; no gradient: the pass already updated q
            noise_var = None if learn_noise else likelihood.noise_std.detach() ** 2
            return -optimizer.adf_pass(X[idx], Y[idx], batch_size=rows_per_step, noise_var=noise_var).mean()

        refine = _RefinePrior(network, sync_noise if learn_noise else None)

        def finish():
            if learn_noise:
                sync_noise()
            return {
                "prior_std": float(network.expected_prior_var().sqrt()),
                "n_rejected": optimizer.n_rejected,
                "kl": float(network.kl().detach()),
            }

        return Training(loss_fn, _ADFPasses(optimizer), callbacks=[refine], loop=loop, finish=finish)


class _ADFPasses:
    """The optimiser the shared loop drives: nothing to do, the loss evaluation was the ADF pass."""

    def __init__(self, optimizer):
        self.optimizer = optimizer

    def zero_grad(self, set_to_none=True):
        pass

    def step(self):
        pass

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
