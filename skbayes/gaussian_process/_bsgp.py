"""The sampled sparse GP (BSGP, Rossi 2022, section 6.3) behind ``SparseGPRegressor(inference=SampledSparseGP(...))``
and ``SparseGPClassifier(inference=SampledSparseGP(...))``.

The estimators keep their variational code; with ``inference=SampledSparseGP(...)``
(``"sghmc"``) their ``fit`` first runs their own variational fit with the object's
``start`` (a :class:`~skbayes.inference.SparseVariational`: its ``max_iter``,
``learning_rate_init``, ``objective``, ...), then ``BaseSparseGP._sample_posterior``
calls :func:`sample_posterior`, which copies the fitted model once per chain with v
drawn from the optimal q(v) (regression) or from the fitted q(v) (classification),
lets the object's ``sampler`` sample them
(:meth:`skbayes.inference.InferenceMethod.prepare_gp`, under the priors with its
``inducing_prior``) in the estimator's shared training loop, and returns the module
holding the kept samples (``"samples"``) with the diagnostics; the estimator stores
them and the posterior means of :func:`posterior_means`. These functions take tensors,
modules and callables and change no estimator, but for :func:`run_sampler`, which both GP
estimators call. Prediction then averages over the kept
samples of the fitted estimator: the per-sample FITC conditionals
(:func:`latent_marginals`, :func:`joint`) or the per-sample class probabilities
(:func:`class_probability_draws`). The math is in :mod:`skbayes.nn.gp.bayesian_sparse_gp`.
"""

import copy

import numpy as np
import torch

from .._predictive import MixturePredictive
from ..inference import GP_ALIASES, FitContext, SampledSparseGP
from ..nn.functional import gaussian_log_prob
from ..nn.gp import SparseGPPriors
from ..nn.gp.bayesian_sparse_gp import (
    conditional, data_log_lik, deep_conditional, deep_neg_log_posterior, mixture_moments, neg_log_posterior,
)

__all__ = ["check_sampling_method", "class_probability_draws", "is_sampled", "is_sampling", "joint",
           "latent_marginals", "noise_std_samples", "posterior_means", "run_sampler", "sample_deep_posterior", "sample_posterior",
           "streams"]

# Training rows whose log-likelihood under every kept sample feeds R-hat (as for the MLP chains).
_N_RHAT_ROWS = 8
_N_RHAT_MEAN_ROWS = 512


def is_sampling(inference):
    """Whether ``inference`` (an estimator's parameter or ``inference_``) samples the posterior."""
    if isinstance(inference, str):
        return GP_ALIASES[inference] is SampledSparseGP
    return isinstance(inference, SampledSparseGP)


def streams(estimator):
    """Whether ``partial_fit`` applies: only to the variational model (``SparseVariational``).

    Used with :func:`sklearn.utils.metaestimators.available_if`; for a
    sampled posterior the AttributeError raised here says why (it is shown
    as the cause of the one ``available_if`` raises). An unknown alias keeps
    the method available, so that ``fit``-time validation reports it.
    """
    inference = estimator.inference
    if (inference in GP_ALIASES if isinstance(inference, str) else True) and is_sampling(inference):
        raise AttributeError(
            f"{type(estimator).__name__} with a SampledSparseGP does not support partial_fit: its chains run "
            "over all the rows at once. Use fit, or inference='variational' to stream."
        )
    return True


def is_sampled(estimator):
    """Whether the fitted ``estimator`` holds kept samples (an inference method was used)."""
    return "samples" in estimator.module_


def check_sampling_method(estimator):
    """The validated sampler of ``estimator.inference_`` (a SampledSparseGP), or a ValueError naming what it cannot use."""
    name = type(estimator).__name__
    method = estimator.inference_.sampling_method(name)
    if not isinstance(estimator.kernel, str):
        raise ValueError(
            f"{name} with inference={type(method).__name__}(...) needs a string kernel (the priors of "
            f"Rossi 2022, section 6.3.1, are set on its length-scales and signal variance); got "
            f"kernel={estimator.kernel!r}."
        )
    return method


def _gaussian(likelihood):
    """Whether ``likelihood`` is the Gaussian noise of the regressor (it has a noise to sample)."""
    return hasattr(likelihood, "noise_std")


def _chains(first, X_t, y_t, n_chains, generator):
    """One model per chain, each a copy of the fitted variational model ``first`` with v drawn from q(v).

    Regression: the optimal Gaussian q(v) of the FITC objective for the
    fitted Z and theta. Classification: the fitted variational q(v), one
    independent draw per latent function.
    """
    chains = [first, *(copy.deepcopy(first) for _ in range(n_chains - 1))]  # copies of the fit, not of chain 0
    for chain in chains:
        gp, likelihood = chain["gp"], chain["likelihood"]
        with torch.no_grad():
            if _gaussian(likelihood):
                gp.set_optimal_q_(X_t, y_t, likelihood.noise_std[0] ** 2, objective="fitc")
            noise = torch.randn(gp.q_mean.shape, generator=generator, dtype=gp.q_mean.dtype, device=gp.q_mean.device)
            if gp.q_mean.ndim == 1:
                gp.q_mean.add_(gp.q_scale_tril @ noise)
            else:  # (L, M, M) @ (L, M, 1)
                gp.q_mean.add_((gp.q_scale_tril @ noise[..., None])[..., 0])
        # v lives in q_mean; q's scale and the constant mean c are not sampled.
        gp.raw_q_scale_tril.requires_grad_(False)
        gp.mean_constant.requires_grad_(False)
    return torch.nn.ModuleList(chains)


def sample_posterior(variational, method, X_t, y_t, priors, generator, batch_size, run_loop):
    """Sample (v, theta, Z[, sigma]) of a sparse GP, starting from its variational fit.

    Parameters
    ----------
    variational : torch.nn.ModuleDict
        The fitted variational model (``"gp"`` and ``"likelihood"``); the
        first chain starts from it (it is not copied), the others from copies.
    method : InferenceMethod
        The validated sampler (:func:`check_sampling_method`).
    X_t : torch.Tensor of shape (n, d)
    y_t : torch.Tensor of shape (n,)
        Targets as the model sees them (standardised, or class indices).
    priors : skbayes.nn.gp.bayesian_sparse_gp.SparseGPPriors
        The priors of eq. 6.17 (``inducing`` from ``SampledSparseGP.inducing_prior``).
    generator : torch.Generator
        Source of v's initial draws and of the sampler's noise.
    batch_size : int
        Rows per step.
    run_loop : callable
        ``run_loop(loss_fn, optimizer, callbacks=..., module=..., **loop)``:
        the estimator's shared training loop over the n rows.

    Returns
    -------
    module : torch.nn.ModuleDict
        ``"gp"`` and ``"likelihood"`` (holding the last kept sample) and
        ``"samples"`` (:class:`~skbayes.nn.KeptStates`, chain-major).
    diagnostics : dict
        The sampler's diagnostics (``inference_diagnostics_``), with the
        largest split R-hat of the training log-likelihoods and of the log
        hyperparameters.
    result : skbayes._training.FitResult
        The loop's loss curve and number of epochs.
    """
    n_samples = X_t.shape[0]
    chains = _chains(variational, X_t, y_t, method.n_members(), generator)
    rhat_rows = slice(0, min(_N_RHAT_MEAN_ROWS, n_samples))

    def energy(chain, rows):
        return neg_log_posterior(chain["gp"], chain["likelihood"], X_t[rows], y_t[rows], n_samples, priors)

    def trace(chain):
        gp, likelihood = chain["gp"], chain["likelihood"]
        log_lik = data_log_lik(gp, likelihood, X_t[rhat_rows], y_t[rhat_rows])
        return torch.cat([log_lik.mean().reshape(1), log_lik[:_N_RHAT_ROWS], *_log_hyperparameters([gp], likelihood)])

    return _run_chains(chains, "gp", method, energy, trace, n_samples, generator, batch_size, run_loop)


def _log_hyperparameters(gps, likelihood):
    """The log length-scales and signal variance of each GP, and the log noise variance of a Gaussian likelihood."""
    extra = [likelihood.noise_std[0].square().log().reshape(1)] if _gaussian(likelihood) else []
    return [t for gp in gps for t in (gp.kernel.length_scale.log(), gp.kernel.variance.log().reshape(1))] + extra


def _run_chains(chains, key, method, energy, trace, n_samples, generator, batch_size, run_loop,
                stochastic_energy=False):
    """Sample ``chains`` (a ModuleList of models with ``key`` and ``"likelihood"``) by ``method``'s GP hook.

    ``trace(chain)`` returns the training log-likelihoods (their mean, then
    up to ``_N_RHAT_ROWS`` rows) followed by the log hyperparameters; the
    largest split R-hat of each part is reported. Returns the fitted module
    (``key``, ``"likelihood"`` and ``"samples"``, holding the last kept
    sample), the diagnostics and the loop's result.
    """
    module = torch.nn.ModuleDict({"chains": chains})
    context = FitContext(generator=generator, n_data=n_samples, batch_size=batch_size)
    training = method.prepare_gp(module, energy, n_samples, context, trace=trace,
                                 stochastic_energy=stochastic_energy)
    chains.train()
    result = run_loop(training.loss_fn, training.optimizer, callbacks=training.callbacks, module=module,
                      **training.loop)
    diagnostics = training.finish()
    # Split the largest R-hat into the predictive quantities (training log-likelihoods, the first
    # first scalars of ``trace``) and the log hyperparameters (the rest).
    per_trace = diagnostics.pop("rhat_per_trace")
    n_log_lik = 1 + min(_N_RHAT_ROWS, n_samples)
    for name, part in (("rhat_log_lik", per_trace[:n_log_lik]), ("rhat_hyperparameters", per_trace[n_log_lik:])):
        diagnostics[name] = float(np.max(part)) if part.size else float("nan")
    samples = module["samples"]
    fitted = torch.nn.ModuleDict({key: chains[0][key], "likelihood": chains[0]["likelihood"], "samples": samples})
    samples.load_(samples.n_samples - 1, fitted)
    return fitted, diagnostics, result


def _deep_chains(first, n_chains, generator):
    """One deep GP per chain, copies of the DSVI fit ``first``, each layer's v drawn from its fitted q(v)."""
    chains = [first, *(copy.deepcopy(first) for _ in range(n_chains - 1))]  # copies of the fit, not of chain 0
    for chain in chains:
        for gp in chain["dgp"].layers:
            with torch.no_grad():
                noise = torch.randn(gp.q_mean.shape, generator=generator, dtype=gp.q_mean.dtype,
                                    device=gp.q_mean.device)
                if gp.q_mean.ndim == 1:
                    gp.q_mean.add_(gp.q_scale_tril @ noise)
                else:  # (H, M, M) @ (H, M, 1)
                    gp.q_mean.add_((gp.q_scale_tril @ noise[..., None])[..., 0])
            gp.raw_q_scale_tril.requires_grad_(False)
            if isinstance(gp.mean_constant, torch.nn.Parameter):
                gp.mean_constant.requires_grad_(False)
    return torch.nn.ModuleList(chains)


def sample_deep_posterior(variational, method, X_t, y_t, priors, generator, batch_size, run_loop):
    """Sample every layer's (v, theta, Z) and the noise of a deep GP, starting from its DSVI fit.

    The sampled deep GP of Rossi 2022, section 6.3.2 (eqs. 6.21-6.23): the
    energy :func:`~skbayes.nn.gp.bayesian_sparse_gp.deep_neg_log_posterior`
    with one propagated draw per row and step. Parameters and returns as
    :func:`sample_posterior`, with ``"dgp"`` in place of ``"gp"``; the last
    layer's constant mean is not sampled.
    """
    n_samples = X_t.shape[0]
    chains = _deep_chains(variational, method.n_members(), generator)
    rhat_rows = slice(0, min(_N_RHAT_MEAN_ROWS, n_samples))
    # The trace propagates the same numbers for every kept sample (fixed draws, shared by the rows), so that
    # its log-likelihoods vary with the sample only.
    trace_noise = chains[0]["dgp"].draw_noise(4, 1, torch.Generator().manual_seed(0))

    def energy(chain, rows):
        dgp = chain["dgp"]
        noise = dgp.draw_noise(1, len(rows), generator)
        return deep_neg_log_posterior(dgp, chain["likelihood"], X_t[rows], y_t[rows], n_samples, priors, noise)

    def trace(chain):
        dgp, likelihood = chain["dgp"], chain["likelihood"]
        mean, var = deep_conditional(dgp, X_t[rhat_rows], trace_noise)
        log_lik = gaussian_log_prob(y_t[rhat_rows], mean, var + likelihood.noise_std[0] ** 2).mean(0)
        return torch.cat([log_lik.mean().reshape(1), log_lik[:_N_RHAT_ROWS],
                          *_log_hyperparameters(dgp.layers, likelihood)])

    # with inner layers the energy propagates fresh draws: its gradient is noisy even on all the rows
    return _run_chains(chains, "dgp", method, energy, trace, n_samples, generator, batch_size, run_loop,
                       stochastic_energy=chains[0]["dgp"].n_layers > 1)


def run_sampler(estimator, sample, method, X_t, y_t):
    """Sample a fitted GP estimator's posterior in place: ``module_``, ``inference_diagnostics_`` and the loop's result.

    ``sample`` is :func:`sample_posterior` or :func:`sample_deep_posterior`;
    the chains start from ``estimator.module_`` (its variational fit), the
    sampler's noise from a seed derived from the estimator's shuffling seed,
    and the loop is the estimator's own (``_fit_loop``) over the rows of
    X_t (n, d) and y_t (n,). The only function here that changes an
    estimator: the GP estimators share it.
    """
    n_samples = X_t.shape[0]
    estimator._optimizer = None
    noise_seed = estimator._seeds(np.random.RandomState(estimator._shuffle_seed + 1), 1)[0]

    def run_loop(loss_fn, optimizer, **loop):
        return estimator._fit_loop(loss_fn, optimizer, n_samples, shuffle_seed=estimator._shuffle_seed, **loop)

    estimator.module_, estimator.inference_diagnostics_, result = sample(
        estimator.module_, method, X_t, y_t, SparseGPPriors(inducing=estimator.inference_.inducing_prior),
        estimator._generator(noise_seed, estimator.device_), estimator._batch_size(n_samples), run_loop,
    )
    estimator._store_training_result(result, n_seen=n_samples)


def _per_sample(module, name):
    """The kept samples of ``name`` as a tensor (n_samples, ...), or its fixed value repeated."""
    samples = module["samples"]
    if name in samples.names:
        return samples.stacked(name)
    value = dict(module.named_parameters()) | dict(module.named_buffers())
    return value[name].detach()[None].expand(samples.n_samples, *value[name].shape)


def noise_std_samples(module):
    """The noise standard deviation of every kept sample, shape (n_samples_kept, ...), standardised units."""
    likelihood = module["likelihood"]
    return torch.nn.functional.softplus(_per_sample(module, "likelihood.raw_noise")) + likelihood._floor


def posterior_means(module):
    """Posterior means of the hyperparameters over the kept samples of ``module``, in the model's units.

    Returns
    -------
    means : dict
        ``"length_scale"`` (ndarray of shape (d,), the mean length-scales),
        ``"signal_std"`` (float, sqrt of the mean signal variance),
        ``"noise_std"`` (float, sqrt of the mean noise variance; regression
        only) and ``"inducing_points"`` (ndarray, the last kept sample of Z).
    """
    softplus = torch.nn.functional.softplus
    means = {}
    with torch.no_grad():
        length_scale = softplus(_per_sample(module, "gp.kernel.raw_length_scale"))
        variance = softplus(_per_sample(module, "gp.kernel.raw_variance"))
        means["length_scale"] = length_scale.mean(0).cpu().numpy().copy()
        means["signal_std"] = float(variance.mean().sqrt())
        if _gaussian(module["likelihood"]):
            means["noise_std"] = float(noise_std_samples(module).square().mean().sqrt())
        means["inducing_points"] = module["gp"].inducing_points.cpu().numpy().copy()
    return means


def latent_marginals(estimator, X):
    """Mixture mean and variance of f at validated X over the kept samples, numpy, standardised units.

    Per sample the FITC conditional (Rossi 2022, eqs. 6.9-6.10); mixture
    mean avg_s mu_s and variance avg_s v_s + var_s mu_s
    (:func:`~skbayes.nn.gp.bayesian_sparse_gp.mixture_moments`).
    """
    return _over_samples(estimator, X, lambda means, variances, rows: mixture_moments(means, variances))


def _over_samples(estimator, X, reduce, row_size=None):
    """``reduce`` of every kept sample's FITC conditional at validated X, block of rows by block of rows.

    ``reduce(means, variances, rows)`` receives the conditional means and
    variances of f of a block's rows under each kept sample, tensors of
    shape (n_samples_kept, n_block_rows) in standardised units, and returns
    a tensor (or a tuple of tensors) with those rows on the first axis; the
    results are gathered over the blocks, so the (n_samples_kept, n) values
    of all rows are never held at once. ``row_size`` sizes the blocks
    (values held per row, see ``_predict_in_blocks``); by default the cross
    terms of one sample and the stacked means and variances.
    """
    module = estimator.module_
    samples, gp = module["samples"], module["gp"]
    with torch.no_grad():
        chols = []
        for s in range(samples.n_samples):
            samples.load_(s, module)
            chols.append(gp.chol_zz())

    def block(x, rows):
        per_sample = []
        for s, chol_zz in enumerate(chols):
            samples.load_(s, module)
            per_sample.append(conditional(gp, x, chol_zz))
        means, variances = (torch.stack(values) for values in zip(*per_sample))
        return reduce(means, variances, rows)

    try:
        if row_size is None:  # the cross terms of one sample (a few M values), and 2 S means and variances
            row_size = 3 * gp.n_inducing + 2 * samples.n_samples
        return estimator._predict_in_blocks(X, block, row_size=row_size)
    finally:
        samples.load_(samples.n_samples - 1, module)


def class_probability_draws(estimator, X, fn):
    """``fn(p)`` for the per-sample class probabilities p, shape (n_samples_kept, n_block_rows, n_classes).

    For each kept sample s, p_s(x) = E_{N(f | mu_s(x), v_s(x))}[p(y | f)],
    the FITC conditional of that sample (Rossi 2022, eqs. 6.9-6.10) pushed
    through the likelihood's ``predictive_proba`` (eq. 6.14 for the probit
    link, quadrature otherwise); their average over the samples is the
    Monte-Carlo estimate of the posterior predictive (eq. 6.13 averaged
    over the posterior of eq. 6.17).

    Parameters
    ----------
    estimator : SparseGPClassifier
        Fitted with a sampling inference method.
    X : ndarray of shape (n, d)
        Validated inputs.
    fn : callable
        Maps a tensor p of shape (S, n_block_rows, n_classes) to a tensor
        or a tuple of tensors with the rows on their first axis.

    Returns
    -------
    out : ndarray or tuple of ndarray
        ``fn``'s results gathered over the blocks of rows.
    """
    module = estimator.module_
    gp, likelihood, n_samples = module["gp"], module["likelihood"], module["samples"].n_samples

    def probabilities(means, variances, rows):
        return fn(torch.stack([likelihood.predictive_proba(mean, var) for mean, var in zip(means, variances)]))

    # Per row: M values of the cross term of one sample, and the S * C probabilities.
    row_size = gp.n_inducing * (gp.n_latent or 1) + n_samples * len(estimator.classes_)
    return _over_samples(estimator, X, probabilities, row_size=row_size)


def log_predictive_density(estimator, X, y):
    r"""Log density of y under the mixture over kept samples, in nats per row (units of y).

    .. math::

        \log p(y \mid x) \approx \log \frac1S \sum_{s=1}^S
        \mathcal N(y \mid \mu_s(x), v_s(x) + \sigma_s^2),

    with the FITC conditional (mu_s, v_s) and the noise sigma_s of sample s
    (Rossi 2022, eqs. 6.9-6.10): the Monte-Carlo estimate of the posterior
    predictive density over (u, theta, Z, sigma), not a Gaussian with the
    mixture's moments.

    Parameters
    ----------
    estimator : SparseGPRegressor
        Fitted with a sampling inference method.
    X : ndarray of shape (n, d)
        Validated inputs.
    y : ndarray of shape (n,)
        Targets, in the units of y.

    Returns
    -------
    log_density : ndarray of shape (n,)
    """
    y = np.asarray(y, dtype=np.float64)
    return _over_mixtures(estimator, X, lambda mixture, rows: mixture.logpdf(y[rows]))


def predictive_quantiles(estimator, X, levels):
    """Quantiles of the mixture over kept samples (see :func:`log_predictive_density`), units of y.

    Returns
    -------
    quantiles : ndarray of shape (n, n_levels)
    """
    return _over_mixtures(estimator, X, lambda mixture, rows: mixture.ppf(levels))


def predictive_cdf(estimator, X, y):
    """CDF at y of the mixture over kept samples (see :func:`log_predictive_density`), y in the units of y.

    Returns
    -------
    cdf : ndarray of shape (n,)
    """
    return _over_mixtures(estimator, X, lambda mixture, rows: mixture.cdf(y[rows]))


def _over_mixtures(estimator, X, reduce):
    """``reduce(mixture, rows)`` of the predictive mixtures of y (a :class:`MixturePredictive`, units of y).

    Component s of a row is N(mu_s(x), v_s(x) + sigma_s^2), the FITC
    conditional of kept sample s and its noise (Rossi 2022, eqs. 6.9-6.10).
    """
    with torch.no_grad():
        noise = noise_std_samples(estimator.module_)
    noise_var = noise.reshape(noise.shape[0], -1)[:, :1].double().cpu().numpy() ** 2  # (S, 1)
    scale = estimator._y_scale

    def block(means, variances, rows):
        means, variances = means.double().cpu().numpy(), variances.double().cpu().numpy()
        mixture = MixturePredictive(means * scale + estimator._y_mean, np.sqrt(variances + noise_var) * scale,
                                    latent_var=variances * scale**2)
        return torch.as_tensor(reduce(mixture, rows))

    return _over_samples(estimator, X, block)


def joint(estimator, X):
    """Mixture mean (n,) and covariance (n, n) of y at validated X over the kept samples, tensors.

    Per sample the joint conditional N(c + A^T v, K_xx - A^T A); the
    mixture covariance is avg_s (C_s + mu_s mu_s^T) - mu mu^T, plus the
    average noise variance on the diagonal.
    """
    module = estimator.module_
    samples, gp, likelihood = module["samples"], module["gp"], module["likelihood"]
    x = estimator._to_tensor(X)
    mean_sum, second, noise = 0.0, 0.0, 0.0
    with torch.no_grad():
        for s in range(samples.n_samples):
            samples.load_(s, module)
            chol_zz = gp.chol_zz()
            a = gp.whitened_cross(x, chol_zz)
            mean = a.T @ gp.q_mean + gp.mean_constant
            cov = gp.kernel(x, x) - a.T @ a
            mean_sum = mean_sum + mean
            second = second + cov + torch.outer(mean, mean)
            noise = noise + likelihood.noise_std[0] ** 2
        samples.load_(samples.n_samples - 1, module)
        n = samples.n_samples
        mean = mean_sum / n
        cov = second / n - torch.outer(mean, mean)
        return mean, cov + (noise / n) * torch.eye(x.shape[0], dtype=cov.dtype, device=cov.device)
