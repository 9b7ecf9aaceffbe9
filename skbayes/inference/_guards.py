"""Guards that speak: the ``ConvergenceWarning`` of a fit whose posterior cannot be trusted, naming the fix.

Three checks, each shared by every estimator it applies to:

:func:`warn_if_chains_not_mixed`
    SGHMC (the Bayesian MLPs and the sampled sparse GPs): the stored split
    R-hat above :data:`RHAT_THRESHOLD`.
:func:`warn_if_collapsed`
    The methods trained by an ELBO (``collapse_guard`` of the inference
    method): the fit explains less than half of what a linear model
    explains of held-out rows, i.e. signal is there but the posterior
    stayed at (or went back to) the prior.
:func:`warn_if_kl_underestimated`
    The implicit posteriors whose KL is a discriminator's estimate (Bayes by
    GAN): on the layers where the nearest-neighbour estimate from the same
    draws is consistent, the discriminators' estimate is far below it, so
    the KL term cannot hold q's spread and q collapses towards a
    maximum-likelihood point.

(The diverged-chain guard lives with the chains, in
``skbayes.inference._sghmc.diverged_chains``.)
"""

import math
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..nn import StudentTLikelihood

__all__ = [
    "RHAT_THRESHOLD", "collapse_scores", "warn_if_chains_not_mixed", "warn_if_collapsed", "warn_if_kl_underestimated",
]

#: Split R-hat above which the chains are reported as not mixed (Gelman et al. 2013, section 11.4).
RHAT_THRESHOLD = 1.1
#: Training rows (at most) on which the collapse check scores the fit and the linear baseline.
COLLAPSE_MAX_ROWS = 1000
#: The linear baseline's held-out score from which the data count as having a signal.
COLLAPSE_MIN_SIGNAL = 0.2
#: The fit has collapsed when its training score is below this fraction of the baseline's held-out score.
COLLAPSE_FRACTION = 0.5
#: A discriminator's KL estimate is too low below this fraction of the nearest-neighbour estimate ...
KL_UNDERESTIMATE_FRACTION = 0.5
#: ... and this many nats below it (both near 0 is no finding).
KL_UNDERESTIMATE_MARGIN = 2.0


def warn_if_chains_not_mixed(rhat, what):
    """Warn (``ConvergenceWarning``) when the chains' split R-hat ``rhat`` exceeds :data:`RHAT_THRESHOLD`.

    Parameters
    ----------
    rhat : float
        ``inference_diagnostics_["rhat"]``; NaN (fewer than 4 kept samples
        per chain) is not reported.
    what : str
        What ``rhat`` is (which R-hat, of which quantities), for the message.

    Returns
    -------
    warned : bool
    """
    if not rhat > RHAT_THRESHOLD:  # NaN included
        return False
    warnings.warn(
        f"SGHMC: the chains have not mixed: split R-hat {rhat:.3g} > {RHAT_THRESHOLD} "
        f"(inference_diagnostics_['rhat'], {what}). Run longer chains, "
        "SGHMC(burn_in=..., thinning=...) above their defaults (300 and 10 epochs) or more n_kept_samples, "
        "or more chains (n_chains); treat the predictive uncertainty with care meanwhile.",
        ConvergenceWarning,
        stacklevel=2,
    )
    return True


def collapse_scores(estimator, X, y, classification):
    """The fit's training score and a linear model's held-out score on (at most 1,000 of) the rows X, y.

    Regression: R^2 (averaged over outputs) of ``estimator.predict`` on the
    training rows, and the mean 2-fold cross-validated R^2 of ordinary least
    squares. Classification: the share of the possible gain over always
    predicting the majority class, (accuracy - majority) / (1 - majority),
    of ``estimator.predict`` on the training rows and of a 2-fold
    cross-validated :class:`~sklearn.linear_model.LogisticRegression`
    (stratified). Inputs with more than two axes are flattened for the
    linear model. Data without a signal a linear model can find (pure
    noise) give a held-out score near or below 0.

    Returns
    -------
    fit_score, linear_score : float
        NaN for the linear score when it cannot be computed (a class with a
        single row).
    """
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.model_selection import KFold, StratifiedKFold, cross_val_predict

    X, y = np.asarray(X), np.asarray(y)
    if X.shape[0] > COLLAPSE_MAX_ROWS:
        rows = np.sort(np.random.RandomState(0).choice(X.shape[0], COLLAPSE_MAX_ROWS, replace=False))
        X, y = X[rows], y[rows]
    flat = X.reshape(X.shape[0], -1).astype(np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the baseline's own convergence is not the user's business
        if classification:
            _, counts = np.unique(y, return_counts=True)
            if counts.min() < 2:
                return float("nan"), float("nan")
            majority = counts.max() / counts.sum()
            cv = StratifiedKFold(2, shuffle=True, random_state=0)
            linear = cross_val_predict(LogisticRegression(max_iter=500), flat, y, cv=cv)

            def score(pred):
                return float((np.mean(pred == y) - majority) / (1 - majority))
        else:
            y2 = y.reshape(y.shape[0], -1)
            cv = KFold(2, shuffle=True, random_state=0)
            linear = np.empty_like(y2, dtype=np.float64)
            for train, test in cv.split(flat):
                linear[test] = LinearRegression().fit(flat[train], y2[train]).predict(flat[test])
            total = ((y2 - y2.mean(axis=0)) ** 2).sum(axis=0)
            total = np.where(total > 0, total, np.inf)

            def score(pred):
                pred = np.asarray(pred).reshape(y2.shape)
                return float(np.mean(1 - ((y2 - pred) ** 2).sum(axis=0) / total))

        return score(estimator.predict(X)), score(linear)


def warn_if_collapsed(estimator, X, y, classification, kl=None):
    """Warn (``ConvergenceWarning``) when a variational fit has collapsed onto its prior.

    The fit has collapsed when a linear model finds a signal in held-out rows
    (its score, see :func:`collapse_scores`, at least
    :data:`COLLAPSE_MIN_SIGNAL`: an R^2 of 0.2, or a fifth of the possible
    gain over the majority class) and the fitted model explains less than
    :data:`COLLAPSE_FRACTION` (half) of it on its own training rows. A
    Bayesian MLP can represent every linear function, so a training score
    that far below a linear model's held-out score means the ELBO chose
    the prior's predictive (its KL term outweighs what the data term
    would gain) or the optimiser never left it. On targets without a
    signal (y independent of X) the linear model scores about 0 or less and
    nothing is reported: there a posterior at the prior is the right answer.
    The KL itself is not part of the rule, only of the message: on the fits
    measured (``MeanFieldVI`` on the collapsed case of the tests, on pure
    noise, on diabetes and on the sine toy) KL / N was 35 to 75 % of the
    final negative ELBO per row whether the fit had collapsed or not.

    Parameters
    ----------
    estimator : fitted Bayesian MLP estimator
    X, y : ndarray
        The training rows (y in the units the estimator predicts in:
        targets, or class labels).
    classification : bool
    kl : float, optional
        KL(q || prior) in nats, for the message.

    Returns
    -------
    warned : bool
    """
    fit_score, linear_score = collapse_scores(estimator, X, y, classification)
    if not (linear_score >= COLLAPSE_MIN_SIGNAL and fit_score < COLLAPSE_FRACTION * linear_score):
        return False
    method = type(estimator.inference_).__name__
    measure = "(accuracy - majority rate) / (1 - majority rate)" if classification else "R^2"
    kl_text = "" if kl is None or not math.isfinite(kl) else f", KL(q || prior) {kl / len(y):.3g} nats per row"
    hints = []
    module = getattr(estimator, "module_", None)
    if module is not None and isinstance(module["likelihood"], StudentTLikelihood):
        hints.append("Gaussian noise (noise='homoscedastic'; heavy tails call the signal noise)")
    if getattr(estimator.inference_, "prior_scaling", "fan_in") is None:
        hints.append(f"{method}(prior_scaling='fan_in')")
    hints.append("a narrower prior (prior_scale below its default, e.g. 0.3) or fewer weights (hidden_layer_sizes)")
    warnings.warn(
        f"{type(estimator).__name__}(inference={method}): the posterior has collapsed onto (or never left) the "
        f"prior: the fit explains little of a signal a linear model finds; its "
        f"{measure} on the training rows is {fit_score:.2f}, a linear model's on held-out rows "
        f"{linear_score:.2f}{kl_text}. The KL term outweighs what fitting would gain: try "
        f"{', '.join(hints)}, or inference='sghmc' or 'ensemble'.",
        ConvergenceWarning,
        stacklevel=2,
    )
    return True


def warn_if_kl_underestimated(estimator):
    """Warn (``ConvergenceWarning``) when the discriminators' KL estimate is far below the nearest-neighbour one.

    Reads ``inference_diagnostics_`` (Bayes by GAN): ``"kl_checked_discriminator"``
    and ``"kl_checked_knn"``, over the ``"n_kl_checked_layers"`` layers whose slices have no more coordinates than the
    generator's noise (there the nearest-neighbour estimate of
    :meth:`skbayes.nn.ImplicitMLP.kl_entropy` from 200 draws is consistent
    for KL(q || p) itself), the discriminators' estimate and the
    nearest-neighbour one. The discriminators underestimate when theirs is
    below :data:`KL_UNDERESTIMATE_FRACTION` of the other and
    :data:`KL_UNDERESTIMATE_MARGIN` nats below it: their logit is then
    nearly flat over q, the KL term exerts too little force against the
    likelihood and q narrows towards a maximum-likelihood point. Measured on
    Bayesian linear regression (doc page "Implicit posteriors"): 3.6-5.8
    nats against 18-20, with q's epistemic std 3-6 % of the exact posterior's.
    No layer checked (every slice longer than the noise): nothing is
    reported.

    Returns
    -------
    warned : bool
    """
    diagnostics = getattr(estimator, "inference_diagnostics_", {})
    n_layers = diagnostics.get("n_kl_checked_layers", 0)
    if not n_layers:
        return False
    by_discriminator, by_neighbours = diagnostics["kl_checked_discriminator"], diagnostics["kl_checked_knn"]
    if not (by_discriminator < KL_UNDERESTIMATE_FRACTION * by_neighbours
            and by_neighbours - by_discriminator > KL_UNDERESTIMATE_MARGIN):
        return False
    method = type(estimator.inference_).__name__
    warnings.warn(
        f"{type(estimator).__name__}(inference={method}): the discriminators underestimate KL(q || p): "
        f"{by_discriminator:.3g} nats on {n_layers} layer(s) against {by_neighbours:.3g} from the "
        "nearest-neighbour estimate of the same draws, so the KL term cannot hold q's spread and the posterior has "
        "collapsed towards a maximum-likelihood point (its uncertainty is too narrow). Bayes by GAN does not reach "
        "its thesis's results at these settings (doc page 'Implicit posteriors'); use BayesByHypernet(), "
        "inference='mfvi', 'sghmc' or 'ensemble'.",
        ConvergenceWarning,
        stacklevel=2,
    )
    return True
