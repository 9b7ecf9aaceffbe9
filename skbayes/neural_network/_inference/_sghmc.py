"""Stochastic-gradient HMC over the weights (Chen et al. 2014; Rossi 2022, section 2.4)."""

import copy
import math
import warnings

import torch

from ..._training import fit_loop
from ...nn import SGHMC, StackedMLP, split_rhat
from ._ensemble import StackedMLPMethod

__all__ = ["SGHMCSampler"]

# Training rows whose log-likelihood under every kept sample feeds R-hat.
_N_RHAT_ROWS = 8
_N_RHAT_MEAN_ROWS = 512


def _select_likelihood_members(likelihood, index):
    """A copy of ``likelihood`` keeping the per-member noise levels ``index``."""
    raw = getattr(likelihood, "raw_noise", None)
    if raw is None or raw.dim() != 3:
        return likelihood
    selected = raw.detach()[index].clone()
    likelihood = copy.deepcopy(likelihood)
    if isinstance(likelihood.raw_noise, torch.nn.Parameter):
        likelihood.raw_noise = torch.nn.Parameter(selected)
    else:
        likelihood.raw_noise = selected
    return likelihood


class SGHMCSampler(StackedMLPMethod):
    r"""Stochastic-gradient Hamiltonian Monte Carlo over the weights and the noise.

    ``n_chains`` chains run in parallel as the members of one
    :class:`~skbayes.nn.ensemble.StackedMLP` (one batched matrix product per
    layer for all chains), each from its own random initialisation and with
    its own minibatch order. The scale-adapted
    :class:`~skbayes.nn.sghmc.SGHMC` sampler (Chen et al. 2014, eq. 15, with
    the adaptive mass and gradient-noise estimate of Springenberg et al.
    2016, as in Rossi 2022, eqs. 2.29-2.36, the sign of the gradient term of
    eq. 2.30 corrected) samples p(w, sigma | D) with the energy
    U = -sum_i log p(y_i | x_i, w, sigma) + sum(w^2) / (2 prior_scale^2),
    step size ``step_size`` (ε² of eq. 2.36; 3e-4 when the estimator has no
    such parameter) and friction ``friction`` (the momentum decay per
    step, in (0, 1]). The mass is adapted during the burn-in only, so that
    the kept samples come from a fixed sampler.

    The schedule is counted in epochs: ``burn_in`` epochs are discarded,
    then one snapshot of every chain is kept at the end of every
    ``thinning``-th epoch until ``n_kept_samples`` per chain are kept, so the
    sampler runs exactly ``burn_in + thinning * n_kept_samples`` epochs
    (``max_iter``, ``n_iter_no_change``, ``tol`` and ``early_stopping`` do
    not apply). The fitted network holds the ``n_chains * n_kept_samples``
    kept weight settings (chain-major: member ``c * n_kept_samples + j`` is
    the j-th sample of chain c) and the prediction averages all of them.

    With ``noise="learn"`` the noise level of each chain is *sampled* with
    the weights: its unconstrained parameter r (sigma = softplus(r)) is one
    more coordinate of the dynamics under a flat prior, i.e. the prior
    p(sigma) ∝ 1/sigma for small sigma. This is the fully Bayesian treatment at
    no extra cost, and it keeps one optimiser in the shared loop; with N rows
    the posterior of log sigma has a standard deviation of about
    1/sqrt(2N), so it differs little from a point estimate. Each kept sample
    keeps its own noise level.

    After ``fit``, ``diagnostics["rhat"]`` is the largest classic split
    R-hat (Gelman et al. 2013, section 11.4) over the kept samples of the
    chains, of the mean log-likelihood of (up to) 512 training rows and of
    the log-likelihood of each of the first 8 training rows; NaN when fewer
    than 4 samples per chain are kept. Values above about 1.1 mean the
    chains have not mixed (raise ``burn_in``/``thinning``, or the step size).

    ``warm_start=True`` restarts every chain from its last kept sample (with
    zero momentum) and runs the whole schedule again.
    """

    #: Use the scale-adapted sampler (Springenberg et al. 2016; Rossi 2022, eqs. 2.31-2.36).
    scale_adapted = True
    supports_early_stopping = False

    def n_members(self):
        return self.estimator.n_chains

    def step_size(self):
        """The sampler's ``lr``: the estimator's ``step_size``."""
        return self.estimator.step_size

    def _restart_from_last_samples(self, module):
        """Replace a fitted sample set by the last kept sample of each chain."""
        network, n_chains = module["network"], self.estimator.n_chains
        if network.n_members == n_chains and not hasattr(network, "n_chains"):
            return
        old_chains = getattr(network, "n_chains", network.n_members)
        n_kept = network.n_members // old_chains
        last = torch.arange(1, old_chains + 1, device=network.layers[0].weight.device) * n_kept - 1
        index = last[torch.arange(n_chains, device=last.device) % old_chains]
        module["network"] = network.select(index)
        module["likelihood"] = _select_likelihood_members(module["likelihood"], index)

    def fit(self, module, X, Y, *, noise_generator, loop):
        est = self.estimator
        if self.warm_started:
            self._restart_from_last_samples(module)
        network = module["network"]
        n_chains, n_data = network.n_members, X.shape[0]
        burn_in, thinning, n_kept = est.burn_in, est.thinning, est.n_kept_samples
        n_epochs = burn_in + thinning * n_kept
        steps_per_epoch = math.ceil(n_data / loop["batch_size"])

        params = [p for p in module.parameters() if p.requires_grad]
        optimizer = SGHMC(
            params,
            lr=self.step_size(),
            n_data=n_data,
            friction=est.friction,
            scale_adapted=self.scale_adapted,
            n_adapt_steps=burn_in * steps_per_epoch,
            generator=noise_generator,
        )
        snapshots, n_steps = [], [0]

        def keep_snapshot(optimizer, args, kwargs):
            n_steps[0] += 1
            epoch, end_of_epoch = divmod(n_steps[0], steps_per_epoch)
            if end_of_epoch == 0 and epoch > burn_in and (epoch - burn_in) % thinning == 0:
                snapshots.append(self._state(module))

        # Gradient of the sum over chains (each chain feels its own energy U_c / N).
        loss_fn = self.member_loss_fn(module, X, Y, noise_generator)

        loop = {
            **loop,
            "max_iter": n_epochs,
            "n_iter_no_change": None,  # a fixed schedule: no stopping rule, no warning
            "validation_score_fn": None,
            "module": None,
        }
        handle = optimizer.register_step_post_hook(keep_snapshot)
        try:
            result = fit_loop(loss_fn, optimizer, **loop)
        finally:
            handle.remove()
        if not snapshots:  # interrupted (Ctrl-C) before the first kept sample
            warnings.warn(
                f"{loop['estimator_name']}: SGHMC stopped before keeping a sample; the "
                "current state of each chain is used as its only sample.",
                UserWarning,
            )
            snapshots.append(self._state(module))
        self._store_samples(module, snapshots)
        self.diagnostics = {"rhat": self._rhat(module, X, Y, n_chains, len(snapshots))}
        return result

    @staticmethod
    def _state(module):
        """Copies of the chains' weights (per layer) and raw noise, at this step."""
        weights = [layer.weight.detach().clone() for layer in module["network"].layers]
        raw = getattr(module["likelihood"], "raw_noise", None)
        return weights, None if raw is None or raw.dim() != 3 else raw.detach().clone()

    def _store_samples(self, module, snapshots):
        """Replace the chains by the StackedMLP of all kept samples, chain-major."""
        network = module["network"]
        n_layers = len(network.layers)

        def chain_major(tensors):
            stacked = torch.stack(tensors, dim=1)  # (n_chains, n_kept, ...)
            return stacked.reshape(-1, *stacked.shape[2:])

        weights = [chain_major([s[0][i] for s in snapshots]) for i in range(n_layers)]
        samples = StackedMLP.from_weights(weights, activation=network.activation, prior_scale=network.prior_scale)
        samples.n_chains = network.n_members
        module["network"] = samples
        if snapshots[0][1] is not None:
            likelihood = copy.deepcopy(module["likelihood"])
            raw = chain_major([s[1] for s in snapshots])
            if isinstance(likelihood.raw_noise, torch.nn.Parameter):
                likelihood.raw_noise = torch.nn.Parameter(raw)
            else:
                likelihood.raw_noise = raw
            module["likelihood"] = likelihood

    @staticmethod
    def _rhat(module, X, Y, n_chains, n_kept):
        """Largest split R-hat of the training log-likelihoods over the kept samples."""
        if n_kept < 4:
            return float("nan")
        rows = slice(0, min(_N_RHAT_MEAN_ROWS, X.shape[0]))
        with torch.no_grad():
            log_lik = module["likelihood"].log_prob(Y[rows], module["network"](X[rows]))
        log_lik = log_lik.reshape(n_chains, n_kept, -1)
        quantities = torch.cat([log_lik.mean(dim=-1, keepdim=True), log_lik[..., :_N_RHAT_ROWS]], dim=-1)
        return float(split_rhat(quantities.double()).max())
