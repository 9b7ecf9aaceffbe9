"""SWAG and MultiSWAG: Gaussians fitted to the optimiser's iterates after the MAP fit (Maddox et al. 2019)."""

from numbers import Integral, Real

import torch

from .._param_validation import Interval
from .._training import Callback
from ..nn.functional import unflatten
from ..nn.swag import SWAGMoments, flatten_members
from ._base import Training, adam
from ._ensemble import StackedMLPMethod
from ._loop import ADAM_CONSTRAINTS, STOPPING_CONSTRAINTS, method_doc

__all__ = ["SWAG"]


class RecordIterates(Callback):
    """Record every member's weights (and the likelihood's per-member tensors) at the end of each epoch."""

    def __init__(self, module, rank):
        self.module = module
        self.moments = SWAGMoments(rank)
        self.noise = {}

    def on_epoch_end(self, state):
        self.moments.update(flatten_members(self.module["network"].member_tensors()))
        likelihood = self.module["likelihood"]
        members = likelihood.member_tensors() if hasattr(likelihood, "member_tensors") else {}
        n = self.moments.n_collected
        for name, value in members.items():  # the noise at the mean of its iterates (not drawn)
            value = value.detach()
            self.noise[name] = value.clone() if n == 1 else ((n - 1) * self.noise[name] + value) / n


@method_doc()
class SWAG(StackedMLPMethod):
    r"""SWA-Gaussian (SWAG) and MultiSWAG: a Gaussian over all weights from the iterates of SGD [Maddox2019]_.

    Each of ``n_models`` networks is first trained to its maximum a
    posteriori (MAP) weights through the shared loop, as a member of
    :class:`DeepEnsemble` (Adam on the per-datum negative log posterior
    with the N(0, ``prior_scale``\ :sup:`2`) prior, its own initialisation,
    noise and row order; ``early_stopping`` True by default). Then a fresh
    Adam runs on at the constant step size ``swa_learning_rate`` for
    ``swa_epochs`` epochs and each network's weights are recorded at the end
    of every epoch. (Maddox et al. run SGD; with SGD, momentum 0.9 and step
    1e-2 or 1e-3, the iterates left the MAP fit's optimum on the nearly
    noise-free energy set and the test log-likelihood fell below the MAP
    network's, where Adam's rose above it: doc/swag.md.) Their mean, their variance and their last ``rank``
    deviations from the running mean define the network's Gaussian, with
    the covariance 1/2 (Sigma_diag + D D^T / (K - 1)) (the diagonal plus
    low-rank SWAG of section 4.2; the mathematics is in
    :mod:`skbayes.nn.swag`). The noise level (regression) is the mean of its
    iterates, not drawn.

    ``n_draws`` weights are drawn from each network's Gaussian at the end of
    the fit (the fit's ``random_state``) and kept, so that prediction is
    the uniform mixture of the ``n_models`` x ``n_draws`` kept networks, as
    for :class:`DeepEnsemble`'s members and :class:`SGHMC`'s samples.
    ``n_models`` > 1 is MultiSWAG [Wilson2020]_, the ensemble of SWAG
    Gaussians. Regression with every noise model and classification; the
    MLPs and a torch ``module=`` (all its parameters; buffers such as batch
    normalisation's running statistics stay those of the last epoch).

    ``inference_diagnostics_`` holds ``n_collected`` (iterates recorded per
    network), ``rank`` (deviations kept, min(``rank``, ``swa_epochs``)) and
    ``mean_std`` (the root mean of Sigma_diag over all weights, weight units).

    Parameters
    ----------
    n_models : int, default=1
        Independently trained networks, each with its own Gaussian
        (MultiSWAG when > 1).
    rank : int, default=20
        K, the deviations kept for the low-rank part of the covariance;
        1 gives the diagonal SWAG.
    swa_epochs : int, default=40
        Epochs of constant-step Adam after the MAP fit, one recorded
        iterate each.
    swa_learning_rate : float, default=3e-3
        Step size of that Adam (``beta_1`` and ``beta_2`` are the MAP fit's).
    n_draws : int, default=30
        Weight draws kept per network for prediction (30 in Maddox et al.).
    %(adam_parameters)s
    %(stopping_parameters)s

    References
    ----------
    .. [Maddox2019] W. J. Maddox, T. Garipov, P. Izmailov, D. Vetrov and
       A. G. Wilson, "A simple baseline for Bayesian uncertainty in deep
       learning", NeurIPS 2019.
    .. [Wilson2020] A. G. Wilson and P. Izmailov, "Bayesian deep learning and
       a probabilistic perspective of generalization", NeurIPS 2020.

    Examples
    --------
    >>> from skbayes import BayesianMLPRegressor
    >>> from skbayes.inference import SWAG
    >>> BayesianMLPRegressor(inference=SWAG(n_models=3))
    BayesianMLPRegressor(inference=SWAG(n_models=3))
    """

    supports_partial_fit = False

    _parameter_constraints = {
        **ADAM_CONSTRAINTS,
        **STOPPING_CONSTRAINTS,
        "n_models": [Interval(Integral, 1, None, closed="left")],
        "rank": [Interval(Integral, 1, None, closed="left")],
        "swa_epochs": [Interval(Integral, 1, None, closed="left")],
        "swa_learning_rate": [Interval(Real, 0, None, closed="neither")],
        "n_draws": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(
        self, n_models=1, *, rank=20, swa_epochs=40, swa_learning_rate=3e-3, n_draws=30, learning_rate_init=3e-3,
        beta_1=0.9, beta_2=0.999, max_iter=500, early_stopping=True, validation_fraction=0.1,
        n_iter_no_change="auto", tol=1e-4,
    ):
        self.n_models = n_models
        self.rank = rank
        self.swa_epochs = swa_epochs
        self.swa_learning_rate = swa_learning_rate
        self.n_draws = n_draws
        self.learning_rate_init = learning_rate_init
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.max_iter = max_iter
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol

    def n_members(self):
        return self.n_models

    def can_warm_start(self, module):
        return False  # the fitted network holds the kept draws, not the MAP networks: refit

    def prepare(self, module, X, Y, settings, context):
        loss_fn = self.member_loss_fn(module, X, Y, context.n_data, context.generator)

        def collect():
            record = RecordIterates(module, self.rank)
            optimizer = adam(module.parameters(), self, learning_rate=self.swa_learning_rate)

            def finish():
                return self._keep_draws(module, record, context.generator)

            # a fixed schedule, without the validation score and the stopping rule of the MAP fit
            loop = {"max_iter": self.swa_epochs, "n_iter_no_change": None, "validation_score_fn": None}
            return Training(loss_fn, optimizer, callbacks=[record], loop=loop, finish=finish)

        return Training(loss_fn, adam(module.parameters(), self), then=collect)

    def _keep_draws(self, module, record, generator):
        """Replace the networks by the StackedMLP of ``n_draws`` draws of each one's Gaussian, model-major."""
        network, moments = module["network"], record.moments
        tensors = network.member_tensors()
        draws = moments.sample(self.n_draws, generator)  # (M, n_draws, P)
        flat = draws.reshape(-1, draws.shape[-1]).to(tensors[0].dtype)
        module["network"] = network.with_member_tensors(unflatten(flat, [t.shape[1:] for t in tensors]))
        if record.noise:
            index = torch.arange(self.n_models, device=flat.device).repeat_interleave(self.n_draws)
            likelihood = module["likelihood"].with_member_tensors(record.noise)
            module["likelihood"] = likelihood.select(index)
        return {
            "n_collected": int(moments.n_collected),
            "rank": int(moments.deviations.shape[1]),
            "mean_std": float(moments.diagonal_variance().mean().sqrt()),
        }
