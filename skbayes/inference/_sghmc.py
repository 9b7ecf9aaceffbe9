"""Stochastic-gradient HMC over the weights (Chen et al. 2014; Rossi 2022, section 2.4)."""

import warnings
from numbers import Integral, Real

import torch
from sklearn.exceptions import ConvergenceWarning

from .._param_validation import Interval, StrOptions
from .._training import Callback
from ..base import evaluation_mode
from ..nn import SGHMC as SGHMCOptimizer
from ..nn import KeptStates, rank_normalized_split_rhat, split_rhat
from ._base import Training
from ._ensemble import StackedMLPMethod, member_row_orders, sum_gradient_mean_value
from ._dsw_prior import DSWPrior
from ._gpi_prior import GPInducedPrior, apply_prior
from ._guards import RHAT_THRESHOLD, warn_if_chains_not_mixed

__all__ = ["SGHMC"]

# Training rows whose log-likelihood under every kept sample feeds R-hat.
_N_RHAT_MEAN_ROWS = 512
# Fraction of the sparse GP's burn-in during which the mass is adapted; the rest equilibrates with it fixed.
_GP_ADAPT_FRACTION = 0.5
# burn_in and thinning="auto": the shape of 300 burn-in epochs, then one kept sample every 20 epochs, cut to
# a budget of optimiser steps in all: AUTO_BUDGET_EPOCHS epochs' worth of steps, at least AUTO_MIN_STEPS and
# at most AUTO_MAX_STEPS. Twice the budget of 10-epoch thinning and 1,200-12,000 steps, measured better on
# every UCI set (examples/benchmarks/results/defaults/uci_defaults_budget2x_*.md).
AUTO_BURN_IN_EPOCHS = 300
AUTO_THINNING_EPOCHS = 20
AUTO_MIN_STEPS = 2400
AUTO_BUDGET_EPOCHS = 20
AUTO_MAX_STEPS = 24000
# max_extensions="auto" under that budget: sampling windows that may follow the first while R-hat > 1.1.
AUTO_MAX_EXTENSIONS = 2
# The epoch schedule when only one of burn_in and thinning is given: the other is this many epochs.
EPOCH_BURN_IN, EPOCH_THINNING = 300, 10
# batch_size="auto" of the Bayesian MLPs under that budget.
AUTO_BATCH_SIZE = 256


def _member_tensors(likelihood):
    """The likelihood's per-member noise parameters, name -> (n_members, 1, k); empty without (classification).

    One noise level per chain (and for Student-t noise one number of degrees
    of freedom), see :meth:`skbayes.nn.RegressionLikelihood.member_tensors`.
    """
    return likelihood.member_tensors() if hasattr(likelihood, "member_tensors") else {}


class _KeepOnSchedule(Callback):
    """Call ``on_due(state)`` (``keep()``, unless overridden) every ``thinning``-th epoch (or step) after ``burn_in``.

    ``per_step=False`` counts ``burn_in`` and ``thinning`` in epochs,
    ``per_step=True`` in optimiser steps (minibatches).
    """

    def __init__(self, burn_in, thinning, per_step=False):
        self.burn_in = burn_in
        self.thinning = thinning
        self.per_step = per_step

    def _due(self, count):
        return count > self.burn_in and (count - self.burn_in) % self.thinning == 0

    def on_batch_end(self, state):
        if self.per_step and self._due(state.step):
            self.on_due(state)

    def on_epoch_end(self, state):
        if not self.per_step and self._due(state.epoch + 1):
            self.on_due(state)

    def on_due(self, state):
        self.keep()


class KeepSamples(_KeepOnSchedule):
    """Keep a snapshot of every chain at the end of every ``thinning``-th epoch (or step) after ``burn_in``.

    With ``max_extensions`` > 0 the samples are kept in windows of
    ``n_kept`` samples: when a window is full and the chains have not mixed
    over it (the rank-normalised split R-hat of ``trace()``, one scalar per
    chain per kept sample, above :data:`~skbayes.inference._guards.RHAT_THRESHOLD`),
    its samples are dropped (the window becomes burn-in) and a new window
    starts, at most ``max_extensions`` times; otherwise the loop is stopped
    (``state.stop``: at the end of the epoch; keeping stops at once).

    Parameters
    ----------
    module : torch.nn.ModuleDict
        With ``"network"`` (a :class:`~skbayes.nn.StackedMLP`, one member per
        chain) and ``"likelihood"``.
    burn_in, thinning : int
        Epochs (or optimiser steps) discarded, then between two kept samples.
    per_step : bool, default=False
        Count ``burn_in`` and ``thinning`` in optimiser steps, not epochs.
    n_kept : int or None, default=None
        Samples per window (with ``max_extensions``).
    max_extensions : int, default=0
        Windows that may follow the first.
    trace : callable or None, default=None
        ``trace() -> torch.Tensor of shape (n_chains,)``, recorded at every
        kept sample when ``max_extensions`` > 0.

    Attributes
    ----------
    samples : list
        Per kept sample: the chains' weights (one tensor per layer), their
        per-member noise parameters (a dict, empty for classification or a
        heteroscedastic likelihood) and their per-layer prior scales (or
        None).
    n_extensions : int
        Windows dropped for not having mixed.
    """

    def __init__(self, module, burn_in, thinning, per_step=False, n_kept=None, max_extensions=0, trace=None):
        super().__init__(burn_in, thinning, per_step)
        self.module = module
        self.n_kept, self.max_extensions, self.trace = n_kept, max_extensions, trace
        self.samples, self.traces = [], []
        self.n_extensions, self.done = 0, False

    def on_due(self, state):
        if self.done:  # the loop finishes its epoch after the last window
            return
        self.keep()
        if not self.max_extensions or len(self.samples) < self.n_kept:
            return
        if self.n_extensions < self.max_extensions and not self._mixed():
            self.samples, self.traces = [], []
            self.n_extensions += 1
        else:
            self.done = state.stop = True

    def _mixed(self):
        """Whether the window's traces have mixed (R-hat at most the threshold, or not computable)."""
        if not self.traces:  # no trace given: nothing to judge by
            return True
        return not chains_rhat(torch.stack(self.traces, dim=1)) > RHAT_THRESHOLD

    def keep(self):
        self.samples.append(self.snapshot())
        if self.max_extensions and self.trace is not None:
            self.traces.append(self.trace().detach().double().cpu())

    def snapshot(self):
        """Copies of the chains' weights (per layer), noise parameters and layer prior scales, now."""
        network = self.module["network"]
        weights = [tensor.detach().clone() for tensor in network.member_tensors()]
        noise = {name: t.detach().clone() for name, t in _member_tensors(self.module["likelihood"]).items()}
        scales = network.layer_prior_scales()
        scales = None if scales is None else tuple(s.clone() for s in scales)
        return weights, noise, scales


class KeepChainStates(_KeepOnSchedule):
    """Keep the sampled coordinates of every chain at the end of every ``thinning``-th epoch (or step) after ``burn_in``.

    The sparse-GP counterpart of :class:`KeepSamples` (see
    :meth:`SGHMC.prepare_gp`): ``module["chains"]`` is a ModuleList of
    chains, and the coordinates kept are the parameters with
    ``requires_grad``; ``trace(chain)``, when given, is recorded too.

    Attributes
    ----------
    samples : list of list of dict
        Per kept sample, per chain: name -> tensor.
    traces : list of torch.Tensor of shape (n_chains, q)
    """

    def __init__(self, module, burn_in, thinning, trace=None, per_step=False):
        super().__init__(burn_in, thinning, per_step)
        self.module = module
        self.trace = trace
        self.samples, self.traces = [], []

    def keep(self):
        self.snapshot()

    def snapshot(self):
        """Keep the chains' sampled coordinates (and traces) now."""
        chains = self.module["chains"]
        self.samples.append(
            [{n: p.detach().clone() for n, p in chain.named_parameters() if p.requires_grad} for chain in chains]
        )
        if self.trace is not None:
            with torch.no_grad():
                self.traces.append(torch.stack([self.trace(chain).detach() for chain in chains]))

    def kept_states(self):
        """A :class:`~skbayes.nn.KeptStates` of all kept samples, chain-major."""
        n_chains = len(self.samples[0])
        names = list(self.samples[0][0])
        stacked = {
            name: torch.stack([sample[c][name] for c in range(n_chains) for sample in self.samples])
            for name in names
        }
        return KeptStates(stacked, n_chains)


class _Schedule:
    """A resolved sampling schedule (see :meth:`SGHMC._schedule`).

    ``burn_in`` and ``thinning`` count epochs, or optimiser steps when
    ``per_step``; ``burn_in_steps`` is the burn-in in optimiser steps (the
    mass adaptation); ``max_extensions`` the sampling windows that may
    follow the first; ``loop`` the settings of the shared training loop
    (their length that of every window).
    """

    def __init__(self, burn_in, thinning, per_step, burn_in_steps, loop, max_extensions=0):
        self.burn_in, self.thinning, self.per_step = burn_in, thinning, per_step
        self.burn_in_steps = burn_in_steps
        self.max_extensions = max_extensions
        self.keep_args = (burn_in, thinning, per_step)
        self.loop = {**loop, "n_iter_no_change": None, "validation_score_fn": None}


class SGHMC(StackedMLPMethod):
    r"""Stochastic-gradient Hamiltonian Monte Carlo over the weights and the noise.

    ``n_chains`` chains run in parallel as the members of one
    :class:`~skbayes.nn.StackedMLP` (one batched matrix product per layer
    for all chains), each from its own random initialisation and with its
    own minibatch order. The scale-adapted :class:`skbayes.nn.SGHMC`
    sampler ([Chen2014]_, eq. 15, with the adaptive mass and gradient-noise
    estimate of Springenberg et al. 2016, as in Rossi 2022, eqs. 2.29-2.36,
    the sign of the gradient term of eq. 2.30 corrected) samples
    p(w, sigma | D) with the energy
    U = -sum_i log p(y_i | x_i, w, sigma) + sum(w^2) / (2 prior_scale^2).
    The mass is adapted during the burn-in only, so that the kept samples
    come from a fixed sampler.

    With ``prior=GPInducedPrior(...)`` the prior is fitted first so that
    the network's prior over functions matches a Gaussian process (Tran et
    al. 2022; Rossi 2022, chapter 5), and the energy uses its per-layer
    scales in place of ``prior_scale``:
    sum_l sum(W_l^2) / (2 sigma_{w,l}^2) + sum(b_l^2) / (2 sigma_{b,l}^2);
    with ``GPInducedPrior(hierarchical=True)`` each chain also resamples
    its layer variances by a Gibbs step after every epoch (see
    :class:`GPInducedPrior`, whose diagnostics are added to
    ``inference_diagnostics_``).

    With ``burn_in`` and ``thinning`` given, the schedule is counted in
    epochs: ``burn_in`` epochs are discarded, then one snapshot of every
    chain is kept at the end of every ``thinning``-th epoch until
    ``n_kept_samples`` per chain are kept, so the sampler runs exactly
    ``burn_in + thinning * n_kept_samples`` epochs. The default,
    ``burn_in="auto"`` and ``thinning="auto"``, is a budget in optimiser
    steps that grows far slower than the number of rows n: the epoch
    schedule of 300 burn-in epochs and one snapshot every 20 epochs, i.e.
    S = (300 + 20 * n_kept_samples) * ceil(n / batch_size) steps, as long as
    S is at most 2,400 steps (n up to 768 rows at the Bayesian MLPs'
    ``batch_size="auto"``, 256 rows with this schedule); beyond, the schedule is counted in
    steps: B = min(max(2,400, 20 epochs' worth of steps), 24,000) steps in
    all (2,400 up to 30,720 rows, 7,820 on 10^5 rows, 24,000 from 307,200
    rows on), of which the first 300 / (300 + 20 * n_kept_samples) (3/7 at
    the default 20 kept samples: 1,029 of 2,400) are the burn-in, then one
    snapshot every floor((B - burn-in) / n_kept_samples) steps (68 of
    2,400). Each step sees ``batch_size`` rows, so the fit's cost is bounded
    whatever n (24,000 steps, and at most two more sampling windows of
    13,700 each, below), and the chains see fewer passes over larger
    data: 2,400 steps of 256 rows are about 80 epochs of 7,500 rows, 24,000
    steps 6 epochs of 10^6 rows. This budget is twice the earlier one
    (10-epoch thinning, 1,200 to 12,000 steps): the chains were still
    improving their fit when it ended, and twice the steps gave a better
    test log-likelihood on every UCI regression set (by 0.02 to 0.13 nats,
    on 89 of 95 splits; ``doc/defaults.md``) at about twice the fit time.
    Giving either of ``burn_in`` and ``thinning`` gives the epoch schedule
    (the other at 300, resp. 10 epochs). Under the budget, sampling goes on
    while the chains have not mixed: up to two more windows of the same
    length (``max_extensions``), each replacing the one before, which then
    counts as burn-in; with ``burn_in`` or ``thinning`` given the schedule
    runs exactly as given. There is no early stopping, and the step is
    ``step_size``. The fitted network holds the
    ``n_chains * n_kept_samples`` kept weight settings (chain-major: member
    ``c * n_kept_samples + j`` is the j-th sample of chain c) and the
    prediction averages all of them.

    With a learned noise the noise level of each chain is *sampled* with the
    weights: its unconstrained parameter r (sigma = softplus(r)) is one more
    coordinate of the dynamics under a flat prior, i.e. the prior
    p(sigma) ∝ 1/sigma for small sigma. With N rows the posterior of log
    sigma has a standard deviation of about 1/sqrt(2N), so it differs little
    from a point estimate. Each kept sample keeps its own noise level. With
    ``noise="student_t"`` the scale and the degrees of freedom are sampled
    the same way (flat priors on their unconstrained values) and kept per
    sample; with ``noise="heteroscedastic"`` the noise is an output of the
    sampled network.

    ``inference_diagnostics_["rhat"]`` is the rank-normalised, folded split
    R-hat (:func:`skbayes.nn.rank_normalized_split_rhat`; Vehtari et al.
    2021) over the chains' kept samples of one scalar, the mean training
    log-likelihood of (up to) 512 rows: it rises when the chains are still
    drifting or one chain fits worse than the other. NaN when fewer than 4
    samples per chain are kept. Above 1.1 a ``ConvergenceWarning`` gives
    the value and the fix (raise ``burn_in``/``thinning``,
    ``n_kept_samples`` or ``n_chains``;
    ``skbayes.inference._guards.warn_if_chains_not_mixed``); a sampled
    sparse GP warns on the largest classic split R-hat of its traced
    quantities.
    ``neg_log_prior`` is the summed sum(w^2) / (2 prior_scale^2) of the
    kept samples. A chain that kept a diverged sample (a training
    log-likelihood per row not finite, or at least 10 nats below the best
    chain's median: ``skbayes.inference._sghmc.diverged_chains``) is dropped with a ``ConvergenceWarning`` naming
    the fix, and counted in ``"n_diverged_chains"``; when every chain
    diverged, all are kept and the warning says the posterior is not
    trustworthy.

    The same object samples a sparse GP: ``SparseGPRegressor(inference=SampledSparseGP(SGHMC(...)))``
    draws the whitened inducing values, hyperparameters, inducing inputs and
    noise of the Bayesian sparse GP (Rossi 2022, section 6.3) through
    :meth:`prepare_gp`, with this schedule and sampler.

    ``warm_start=True`` restarts every chain from its last kept sample (with
    zero momentum) and runs the whole schedule again. ``partial_fit`` is not
    supported: the kept samples follow a fixed schedule over the same data.

    Parameters
    ----------
    n_chains : int, default=2
        Number of parallel chains.
    burn_in : int or "auto", default="auto"
        Epochs before samples are kept (the sampler also adapts its mass
        during them). ``"auto"`` (with ``thinning="auto"``): the step budget
        above, 300 epochs' worth of steps but at most
        B * 300 / (300 + 20 * n_kept_samples) steps (1,029 of B = 2,400);
        with ``thinning`` given, 300 epochs.
    thinning : int or "auto", default="auto"
        Epochs between two kept samples. ``"auto"`` (with ``burn_in="auto"``):
        20 epochs' worth of steps, fewer when the step budget B is reached
        (68 steps of B = 2,400 at the defaults); with ``burn_in`` given, 10
        epochs.
    n_kept_samples : int, default=20
        Samples kept per chain.
    max_extensions : int or "auto", default="auto"
        Sampling windows that may follow the first while the chains have
        not mixed. When the ``n_kept_samples`` of a window are kept and the
        rank-normalised split R-hat of their mean training log-likelihood
        (``inference_diagnostics_["rhat"]``, below) is above 1.1, the
        window's samples are dropped (it becomes burn-in) and the chains
        sample a new window as long as the first (``thinning *
        n_kept_samples`` epochs or steps); otherwise sampling ends there.
        So the schedule follows convergence, up to ``1 + max_extensions``
        windows; ``inference_diagnostics_["n_extensions"]`` counts the
        windows dropped. ``"auto"``: 2 under the default step budget, 0
        (the schedule exactly as given) when ``burn_in`` or ``thinning`` is
        given. The Bayesian MLPs only: a sampled sparse GP takes "auto" or 0.
    friction : float in (0, 1], default=0.05
        Friction: the momentum decay per step (alpha of Chen et al. 2014,
        section 3.3).
    step_size : float, default=3e-4
        Step size: epsilon^2 of the scale-adapted sampler (Springenberg et
        al. 2016; Rossi 2022, eq. 2.36).
    prior : GPInducedPrior, DSWPrior or None, default=None
        The weight prior, fitted before sampling: to a Gaussian process's
        functions (:class:`GPInducedPrior`) or to the data's distribution
        (:class:`DSWPrior`); None is the estimator's N(0,
        ``prior_scale^2``) on every weight. Used by the Bayesian MLPs only (the sparse GPs have
        their own priors).

    References
    ----------
    .. [Chen2014] T. Chen, E. B. Fox and C. Guestrin, "Stochastic gradient
       Hamiltonian Monte Carlo", ICML 2014 (Rossi 2022, section 2.4).
    """

    _parameter_constraints = {
        "n_chains": [Interval(Integral, 1, None, closed="left")],
        "burn_in": [Interval(Integral, 0, None, closed="left"), StrOptions({"auto"})],
        "thinning": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "n_kept_samples": [Interval(Integral, 1, None, closed="left")],
        "max_extensions": [Interval(Integral, 0, None, closed="left"), StrOptions({"auto"})],
        "friction": [Interval(Real, 0, 1, closed="right")],
        "step_size": [Interval(Real, 0, None, closed="neither")],
        "prior": [None, GPInducedPrior, DSWPrior],
    }

    supports_early_stopping = False
    supports_partial_fit = False
    supports_gp = True
    #: Use the scale-adapted sampler (Springenberg et al. 2016; Rossi 2022, eqs. 2.31-2.36).
    scale_adapted = True

    def __init__(self, n_chains=2, burn_in="auto", thinning="auto", n_kept_samples=20, max_extensions="auto",
                 friction=0.05, step_size=3e-4, prior=None):
        self.n_chains = n_chains
        self.burn_in = burn_in
        self.thinning = thinning
        self.n_kept_samples = n_kept_samples
        self.max_extensions = max_extensions
        self.friction = friction
        self.step_size = step_size
        self.prior = prior

    def n_members(self):
        return self.n_chains

    def auto_batch_size(self):
        """256 rows per step under the default step budget (``burn_in`` and ``thinning`` "auto"), else None.

        Larger minibatches make each of the budget's steps less noisy; with
        an epoch schedule the estimator's rule holds as before (32 rows up to
        2,000 training rows, 128 above).
        """
        return AUTO_BATCH_SIZE if self._step_budget() else None

    def _step_budget(self):
        """Whether the schedule is the default step budget (``burn_in`` and ``thinning`` both "auto")."""
        return self.burn_in == "auto" and self.thinning == "auto"

    def build_module_network(self, n_features, n_outputs, settings, **factory):
        if self.prior is not None:
            raise ValueError("SGHMC(prior=...) is a prior over MLP weights; a torch module takes prior=None.")
        return super().build_module_network(n_features, n_outputs, settings, **factory)

    def _restart_from_last_samples(self, module):
        """Replace a fitted sample set by the last kept sample of each chain."""
        network, n_chains = module["network"], self.n_chains
        if network.n_members == n_chains and not hasattr(network, "n_chains"):
            return
        old_chains = getattr(network, "n_chains", network.n_members)
        n_kept = network.n_members // old_chains
        last = torch.arange(1, old_chains + 1, device=network.member_tensors()[0].device) * n_kept - 1
        index = last[torch.arange(n_chains, device=last.device) % old_chains]
        module["network"] = network.select(index)
        if _member_tensors(module["likelihood"]):
            module["likelihood"] = module["likelihood"].select(index)

    def prepare(self, module, X, Y, settings, context):
        if context.warm_start:
            self._restart_from_last_samples(module)
        callbacks, prior_diagnostics = self._fit_prior(module, X, Y, settings, context)
        n_chains, n_data = module["network"].n_members, context.n_data
        steps_per_epoch = -(-X.shape[0] // context.batch_size)
        schedule = self._schedule(steps_per_epoch)
        params = [p for p in module.parameters() if p.requires_grad]
        optimizer = self._sampler(params, n_data, schedule.burn_in_steps, context.generator)
        keep = KeepSamples(module, *schedule.keep_args, n_kept=self.n_kept_samples,
                           max_extensions=schedule.max_extensions, trace=self._mean_log_lik_trace(module, X, Y))
        # Gradient of the sum over chains (each chain feels its own energy U_c / N).
        loss_fn = self.member_loss_fn(module, X, Y, n_data, context.generator)

        def finish():
            if not keep.samples:  # interrupted (Ctrl-C) before the first kept sample
                _warn_no_sample()
                keep.samples.append(keep.snapshot())
            self._store_samples(module, keep.samples)
            n_kept = len(keep.samples)
            log_lik = self._kept_log_lik(module, X, Y)
            diverged = diverged_chains(log_lik.mean(dim=-1), n_chains)
            if diverged.any():
                log_lik = self._drop_chains(module, log_lik, diverged, n_chains)
            rhat = self._rhat(log_lik, n_chains - int(diverged.sum()) if not diverged.all() else n_chains, n_kept)
            warn_if_chains_not_mixed(rhat, "the rank-normalised split R-hat of the kept samples' mean training "
                                           "log-likelihood")
            return {
                "rhat": rhat,
                "n_extensions": keep.n_extensions,
                "n_diverged_chains": int(diverged.sum()),
                "neg_log_prior": float(module["network"].neg_log_prior().detach()),
                **prior_diagnostics,
            }

        return Training(loss_fn, optimizer, callbacks=[*callbacks, keep], loop=schedule.loop, finish=finish)

    def _fit_prior(self, module, X, Y, settings, context):
        """Fit ``prior`` and put it into the chains' energy: (callbacks, diagnostics); nothing without one."""
        if self.prior is None:
            return [], {}
        network = module["network"]
        if not hasattr(network, "layers"):  # e.g. a warm start from a torch module's chains
            raise ValueError("SGHMC(prior=...) is a prior over MLP weights; a torch module takes prior=None.")
        sizes = [network.layers[0].in_features, *(layer.out_features for layer in network.layers)]
        prior, diagnostics = self.prior.fit_prior(
            sizes, settings.activation, X, Y, classification=settings.classification, generator=context.generator,
            likelihood=module["likelihood"],
        )
        gibbs = apply_prior(prior, module, context.generator)
        return ([] if gibbs is None else [gibbs]), diagnostics

    def _sampler(self, params, n_data, n_adapt_steps, generator, **options):
        """The :class:`skbayes.nn.SGHMC` optimiser of this object's settings over ``params``.

        ``n_adapt_steps`` optimiser steps adapt the mass; ``options`` go to
        the optimiser as they are (``gradient_noise``).
        """
        return SGHMCOptimizer(
            params,
            lr=self.step_size,
            n_data=n_data,
            friction=self.friction,
            scale_adapted=self.scale_adapted,
            n_adapt_steps=n_adapt_steps,
            generator=generator,
            **options,
        )

    def _max_extensions(self):
        """``max_extensions`` resolved: "auto" is :data:`AUTO_MAX_EXTENSIONS` under the step budget, else 0."""
        if self.max_extensions == "auto":
            return AUTO_MAX_EXTENSIONS if self._step_budget() else 0
        return self.max_extensions

    def _schedule(self, steps_per_epoch, extensions=True):
        """The sampling schedule on data of ``steps_per_epoch`` minibatches: a :class:`_Schedule`.

        ``extensions=False``: without the windows of ``max_extensions`` (the sparse GPs).
        """
        n_kept, n_extensions = self.n_kept_samples, self._max_extensions() if extensions else 0
        if self._step_budget():
            burn_in, thinning = AUTO_BURN_IN_EPOCHS, AUTO_THINNING_EPOCHS
            n_epochs = burn_in + thinning * n_kept
            budget = min(max(AUTO_MIN_STEPS, AUTO_BUDGET_EPOCHS * steps_per_epoch), AUTO_MAX_STEPS)
            if n_epochs * steps_per_epoch > budget:  # counted in steps; else the epoch shape fits the budget
                burn_in = round(budget * burn_in / n_epochs)
                thinning = max((budget - burn_in) // n_kept, 1)
                n_steps = burn_in + thinning * n_kept * (1 + n_extensions)
                loop = {"max_iter": -(-n_steps // steps_per_epoch), "max_steps": n_steps}
                return _Schedule(burn_in, thinning, True, burn_in, loop, n_extensions)
        else:
            burn_in = EPOCH_BURN_IN if self.burn_in == "auto" else self.burn_in
            thinning = EPOCH_THINNING if self.thinning == "auto" else self.thinning
        loop = {"max_iter": burn_in + thinning * n_kept * (1 + n_extensions), "max_steps": None}
        return _Schedule(burn_in, thinning, False, burn_in * steps_per_epoch, loop, n_extensions)

    def prepare_gp(self, module, energy, n_rows, context, *, trace=None, stochastic_energy=False):
        """SGHMC over the chains of a sparse GP: the same sampler and schedule as for the MLPs.

        Every chain samples its own coordinates (the parameters with
        ``requires_grad`` of ``module["chains"][c]``) from exp(-U_c), on its
        own minibatch order (one fixed permutation of the rows per chain,
        as for the MLP chains), with one scale-adapted
        :class:`skbayes.nn.SGHMC` step per minibatch for all chains. The
        schedule is that of :meth:`prepare` (``burn_in`` epochs with the
        mass adapted, then one snapshot every ``thinning`` epochs,
        ``n_kept_samples`` per chain). See :meth:`InferenceMethod.prepare_gp`
        for the arguments.

        The mass is adapted during the first half of the burn-in only, and
        the second half lets the chains settle with the mass fixed: while
        it adapts, the mass follows the current gradient (the window tau of
        Rossi 2022, eq. 2.32, shrinks towards one step when the gradient
        keeps its sign), a state-dependent mass without the correction term
        that would keep exp(-U) invariant, and the chains run hot (on
        bostonHousing the per-datum energy stayed about 1.3 nats above its
        value after the freeze for the whole adaptation). When a minibatch
        is the whole training set (``batch_size >= n_rows``) and the energy
        draws no noise of its own (``stochastic_energy=False``) the gradient
        is exact and the sampler injects the full noise 2 alpha eta
        (``gradient_noise=False`` of :class:`skbayes.nn.SGHMC`).

        ``finish()`` stores the kept samples as ``module["samples"]`` and
        returns ``{"rhat": ..., "rhat_per_trace": ..., "n_kept_samples": ...}``:
        the largest split R-hat over the scalars of ``trace`` and the split
        R-hat of each of them, a float ndarray of shape (q,) (NaN, and an
        empty array, with fewer than 4 samples per chain or without
        ``trace``).
        """
        if self.prior is not None:
            raise ValueError(
                "SGHMC(prior=...) sets the weight prior of the Bayesian MLPs; the sparse GPs have their own "
                "priors. Use SGHMC(prior=None) here."
            )
        if self.max_extensions not in ("auto", 0):
            raise ValueError(
                f"SGHMC(max_extensions={self.max_extensions!r}) extends the Bayesian MLPs' chains; a sampled sparse "
                "GP runs its schedule as given. Use max_extensions='auto' or 0 here."
            )
        chains = module["chains"]
        n_chains, n_data = len(chains), context.n_data
        steps_per_epoch = -(-n_rows // context.batch_size)
        schedule = self._schedule(steps_per_epoch, extensions=False)
        params = [p for p in chains.parameters() if p.requires_grad]
        if not params:
            raise ValueError("Nothing to sample: every coordinate of the model is fixed.")
        optimizer = self._sampler(params, n_data, int(_GP_ADAPT_FRACTION * schedule.burn_in_steps),
                                  context.generator,
                                  gradient_noise=stochastic_energy or context.batch_size < n_rows)
        orders = member_row_orders(n_chains, n_rows, context.generator)
        keep = KeepChainStates(module, *schedule.keep_args[:2], trace, per_step=schedule.per_step)

        def loss_fn(idx):
            rows = orders[:, idx.to(orders.device)]
            energies = torch.stack([energy(chain, rows[c]) for c, chain in enumerate(chains)])
            return sum_gradient_mean_value(energies)

        def finish():
            if not keep.samples:  # interrupted before the first kept sample
                _warn_no_sample()
                keep.snapshot()
            module["samples"] = keep.kept_states()
            n_kept = len(keep.samples)
            rhat, per_trace = float("nan"), torch.empty(0, dtype=torch.float64)
            if keep.traces and n_kept >= 4:
                traces = torch.stack(keep.traces, dim=1)  # (n_chains, n_kept, q)
                per_trace = split_rhat(traces.double()).cpu()
                rhat = float(per_trace.max())
            warn_if_chains_not_mixed(rhat, "the largest classic split R-hat over the traced quantities of the kept "
                                           "samples: for a sparse GP their training log-likelihoods and log "
                                           "hyperparameters")
            return {"rhat": rhat, "rhat_per_trace": per_trace.numpy(), "n_kept_samples": n_kept * n_chains}

        return Training(loss_fn, optimizer, callbacks=[keep], loop=schedule.loop, finish=finish)

    @staticmethod
    def _store_samples(module, samples):
        """Replace the chains by the StackedMLP of all kept samples, chain-major."""
        network = module["network"]

        def chain_major(tensors):
            stacked = torch.stack(tensors, dim=1)  # (n_chains, n_kept, ...)
            return stacked.reshape(-1, *stacked.shape[2:])

        weights = [chain_major([s[0][i] for s in samples]) for i in range(len(samples[0][0]))]
        scales = None
        if samples[0][2] is not None:
            scales = tuple(chain_major([s[2][k] for s in samples]) for k in range(2))
        kept = network.with_member_tensors(weights, layer_prior_scales=scales)
        kept.n_chains = network.n_members
        module["network"] = kept
        if samples[0][1]:
            noise = {name: chain_major([s[1][name] for s in samples]) for name in samples[0][1]}
            module["likelihood"] = module["likelihood"].with_member_tensors(noise)

    @staticmethod
    def _mean_log_lik_trace(module, X, Y):
        """``trace() -> (n_chains,)``: each chain's mean log-likelihood of the rows :meth:`_kept_log_lik` uses, now.

        Computed in evaluation mode (e.g. a torch module's dropout off) and
        without gradients, so that it changes neither the chains nor the
        random streams.
        """
        def trace():
            with evaluation_mode(module):
                return SGHMC._kept_log_lik(module, X, Y).mean(dim=-1)

        return trace

    @staticmethod
    def _kept_log_lik(module, X, Y):
        """Training log-likelihoods of (up to) 512 rows under every kept sample, (n_members, rows), chain-major."""
        rows = slice(0, min(_N_RHAT_MEAN_ROWS, X.shape[0]))
        with torch.no_grad():
            return module["likelihood"].log_prob(Y[rows], module["network"](X[rows]))

    @staticmethod
    def _drop_chains(module, log_lik, diverged, n_chains):
        """Keep the chains not ``diverged`` (all of them, with a warning, when every one is); their log_lik."""
        n_diverged = int(diverged.sum())
        if diverged.all():
            warnings.warn(
                f"SGHMC: every one of the {n_chains} chains kept a diverged sample (a training log-likelihood "
                "not finite or far below the best chain's): the posterior is not trustworthy. Lower step_size "
                "or raise burn_in.", ConvergenceWarning,
            )
            return log_lik
        n_kept = log_lik.shape[0] // n_chains
        keep = torch.arange(n_chains * n_kept, device=log_lik.device).reshape(n_chains, n_kept)[~diverged.to(log_lik.device)]
        index = keep.reshape(-1)
        network = module["network"]
        module["network"] = network.select(index.to(network.member_tensors()[0].device))
        module["network"].n_chains = n_chains - n_diverged
        if _member_tensors(module["likelihood"]):
            module["likelihood"] = module["likelihood"].select(index)
        warnings.warn(
            f"SGHMC: {n_diverged} of {n_chains} chains diverged (a kept sample's training log-likelihood not "
            "finite or far below the best chain's) and were dropped; predictions use the others "
            f"(inference_diagnostics_['n_diverged_chains']). Lower step_size or raise burn_in.", ConvergenceWarning,
        )
        return log_lik[index]

    @staticmethod
    def _rhat(log_lik, n_chains, n_kept):
        """Rank-normalised split R-hat of the kept samples' mean training log-likelihood (``log_lik``: members, rows).

        One scalar per sample, the counterpart of the log density that Stan
        checks first: chains still drifting, or one chain fitting worse than
        the other, show in it. Per-row log-likelihoods are left out: their
        largest R-hat over several rows exceeds 1.1 by chance alone (with 2
        chains of 20 independent draws, 3 times in 10 for the largest of 9,
        4 in 100 for one), and chains that fit equally well with different
        functions are the modes whose mixture the prediction averages.
        """
        return chains_rhat(log_lik.mean(dim=-1).reshape(n_chains, n_kept))


def chains_rhat(values):
    """Rank-normalised split R-hat (a float) of one scalar per chain and kept sample, ``values`` (n_chains, n_kept).

    NaN with fewer than 4 kept samples per chain (:func:`skbayes.nn.rank_normalized_split_rhat`
    needs 4). The R-hat both the window check of :class:`KeepSamples` and
    ``inference_diagnostics_["rhat"]`` take of the mean training log-likelihood.
    """
    if values.shape[1] < 4:
        return float("nan")
    return float(rank_normalized_split_rhat(values))


def diverged_chains(mean_log_lik, n_chains, min_gap=10.0, n_mads=20.0):
    """Which chains kept a diverged sample, a bool tensor of shape (n_chains,).

    A kept sample has diverged when its mean training log-likelihood per
    row (``mean_log_lik``, shape (n_chains * n_kept,), chain-major) is not
    finite, or lies more than max(``min_gap``, ``n_mads`` x MAD) nats per row
    below the median of the best chain's samples (the chain of the highest
    median; MAD its median absolute deviation). 10 nats per row is a
    sample whose outputs are off by about 4.5 noise standard deviations
    on average under Gaussian noise, or 25 scales under Student-t noise
    with nu near 2 (a run-away sample, outputs of order 10^4, is far below
    that); the samples of a chain still in its burn-in lie within a few
    nats per row of the others (about 2 in the tests' shortest chains).
    """
    per_chain = mean_log_lik.double().reshape(n_chains, -1)
    finite = torch.isfinite(per_chain)
    medians = torch.where(finite, per_chain, torch.full_like(per_chain, -torch.inf)).median(dim=1).values
    best = per_chain[int(torch.argmax(medians))]
    best = best[torch.isfinite(best)]
    if not best.numel():
        return torch.ones(n_chains, dtype=torch.bool)
    centre = best.median()
    spread = (best - centre).abs().median()
    floor = centre - max(min_gap, n_mads * float(spread))
    return (~finite | (per_chain < floor)).any(dim=1).cpu()


def _warn_no_sample():
    """Warn that sampling stopped (Ctrl-C) before the first kept sample."""
    warnings.warn(
        "SGHMC stopped before keeping a sample; the current state of each chain is used as its only sample.",
        UserWarning,
    )
