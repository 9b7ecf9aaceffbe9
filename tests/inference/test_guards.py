"""Guards that speak: each ConvergenceWarning fires on a case that triggers it and stays silent otherwise.

The diverged-chain guard is tested with the chains, in tests/inference/test_sghmc.py.
"""

import warnings

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_regression
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler

from skbayes import BayesianMLPClassifier, BayesianMLPRegressor, SparseGPRegressor
from skbayes.inference import SGHMC, MeanFieldVI, SampledSparseGP, SparseVariational
from skbayes.inference._guards import (
    RHAT_THRESHOLD, collapse_scores, warn_if_chains_not_mixed, warn_if_collapsed, warn_if_kl_underestimated,
)

from _exact_blr import make_blr_data


def _silent(fn, *args, **kw):
    """``fn(*args, **kw)`` with every ConvergenceWarning an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        return fn(*args, **kw)


# ------------------------------------------------------------------ R-hat
@pytest.mark.parametrize("rhat", [float("nan"), 1.0, 1.05, RHAT_THRESHOLD])
def test_the_rhat_guard_is_silent_up_to_the_threshold(rhat):
    assert _silent(warn_if_chains_not_mixed, rhat, "x") is False


def test_the_rhat_guard_gives_the_value_and_the_fix():
    with pytest.warns(ConvergenceWarning, match=r"split R-hat 1\.23 > 1\.1.*burn_in.*n_kept_samples.*n_chains"):
        assert warn_if_chains_not_mixed(1.234, "x")


def _blr_sghmc(**sghmc):
    return BayesianMLPRegressor(
        hidden_layer_sizes=(), noise="homoscedastic", noise_std=0.3, normalize_y=False, batch_size=20,
        random_state=0, inference=SGHMC(**sghmc),
    )


def test_stuck_mlp_chains_warn_once_with_their_rhat():
    X, y, _ = make_blr_data(n_samples=100)
    # a vanishing step size leaves every chain at its own random initialisation
    model = _blr_sghmc(step_size=1e-12, n_chains=4, burn_in=0, thinning=1, n_kept_samples=8)
    with pytest.warns(ConvergenceWarning, match="split R-hat") as caught:
        model.fit(X, y)
    rhat = model.inference_diagnostics_["rhat"]
    assert rhat > RHAT_THRESHOLD
    messages = [str(w.message) for w in caught if "split R-hat" in str(w.message)]
    assert len(messages) == 1 and f"{rhat:.3g}" in messages[0]


def test_mixed_mlp_chains_do_not_warn():
    # Bayesian linear regression, chains long enough to mix (test_sghmc.py checks them against the exact posterior)
    X, y, _ = make_blr_data(n_samples=100)
    model = _silent(_blr_sghmc(n_chains=16, burn_in=100, thinning=2, n_kept_samples=40).fit, X, y)
    assert model.inference_diagnostics_["rhat"] <= RHAT_THRESHOLD


def test_the_sampled_sparse_gp_warns_when_its_chains_have_not_mixed():
    # a vanishing step size leaves each chain where it started; the silent case is the exact-posterior
    # fit of tests/gaussian_process/test_bayesian_sparse_gp.py (its fixture turns the warning into an error)
    rng = np.random.RandomState(1)
    X = np.sort(rng.uniform(-3, 3, (15, 1)), axis=0)
    y = np.sin(X[:, 0]) + 0.3 * rng.randn(15)
    model = SparseGPRegressor(
        n_inducing=15, random_state=0,
        inference=SampledSparseGP(SGHMC(n_chains=4, burn_in=0, thinning=1, n_kept_samples=8, step_size=1e-12),
                                  start=SparseVariational(max_iter=5)),
    )
    with pytest.warns(ConvergenceWarning, match="split R-hat.*sparse GP"):
        model.fit(X, y)
    assert model.inference_diagnostics_["rhat"] > RHAT_THRESHOLD


# ------------------------------------------------------------- collapse
def _one_informative_feature(seed=0):
    X, y = make_regression(200, 10, n_informative=1, noise=20, random_state=seed)
    return StandardScaler().fit_transform(X), (y - y.mean()) / y.std()


def test_mean_field_vi_collapsed_onto_its_prior_says_so():
    # One informative feature among ten: a linear model explains about three quarters of held-out rows;
    # mean-field VI under its earlier defaults (Student-t noise, N(0, 1) on every weight of two layers of
    # 50) stays at the prior (training R^2 ~0.1). Its defaults now fit it (tests/neural_network/
    # test_quality_at_defaults.py); the guard is for the settings that still collapse.
    X, y = _one_informative_feature()
    model = BayesianMLPRegressor(inference=MeanFieldVI(prior_scaling=None), noise="student_t", random_state=0)
    with pytest.warns(ConvergenceWarning, match=r"collapsed onto.*prior_scale.*hidden_layer_sizes"):
        model.fit(X, y)


def test_no_collapse_warning_on_targets_without_signal():
    # y independent of X: the prior's predictive is the right answer, whatever the fit did
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(200, 10)), rng.normal(size=200)
    model = BayesianMLPRegressor(inference=MeanFieldVI(max_iter=30), random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X, y)
    assert not [w for w in caught if "collapsed" in str(w.message)]
    assert collapse_scores(model, X, y, classification=False)[1] < 0.2


def test_no_collapse_warning_when_the_fit_explains_the_signal():
    # a strong linear signal that mean-field VI fits (its I-BLM start is the linear fit itself)
    X, y = make_regression(200, 3, noise=10, random_state=0)
    X = StandardScaler().fit_transform(X)
    model = BayesianMLPRegressor(inference=MeanFieldVI(init="iblm", max_iter=50), random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X, y)
    assert not [w for w in caught if "collapsed" in str(w.message)]
    assert model.score(X, y) > 0.8


def test_classifiers_at_their_defaults_warn_when_collapsed_and_not_when_they_fit():
    # one informative feature: Vadam at its defaults stays near the majority rate (a share of the possible gain of
    # 0.16 where LogisticRegression reaches 0.61 held out); mean-field VI fits it (0.67)
    X, y = make_classification(200, 10, n_informative=1, n_redundant=0, n_clusters_per_class=1, class_sep=0.7,
                               random_state=0)
    with pytest.warns(ConvergenceWarning, match=r"inference=Vadam.*collapsed onto.*majority rate"):
        BayesianMLPClassifier(inference="vadam", random_state=0).fit(X, y)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        BayesianMLPClassifier(inference="mfvi", random_state=0).fit(X, y)
    assert not [w for w in caught if "collapsed" in str(w.message)]


class _Constant:
    """A fitted classifier or regressor stand-in that predicts ``value`` for every row (or the truth)."""

    def __init__(self, value=None, truth=None):
        self.value, self.truth = value, truth
        self.inference_ = MeanFieldVI()

    def predict(self, X):
        return self.truth if self.value is None else np.full(X.shape[0], self.value)


def _labels(signal, n=300, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.normal(size=(n, 5))
    logits = 3 * X[:, 0] if signal else np.zeros(n)
    return X, (rng.uniform(size=n) < 1 / (1 + np.exp(-logits))).astype(int)


def test_a_classifier_at_the_majority_rate_warns_when_a_linear_model_does_much_better():
    X, y = _labels(signal=True)
    majority = np.bincount(y).argmax()
    with pytest.warns(ConvergenceWarning, match=r"majority rate.*0\.00.*prior_scale"):
        assert warn_if_collapsed(_Constant(majority), X, y, classification=True)
    assert not _silent(warn_if_collapsed, _Constant(truth=y), X, y, classification=True)


def test_a_classifier_at_the_majority_rate_is_silent_on_labels_without_signal():
    X, y = _labels(signal=False)
    assert not _silent(warn_if_collapsed, _Constant(np.bincount(y).argmax()), X, y, classification=True)


def test_methods_outside_the_elbo_family_are_not_checked():
    X, y = _one_informative_feature()
    assert MeanFieldVI.collapse_guard and not SGHMC.collapse_guard
    model = BayesianMLPRegressor(inference="ensemble", random_state=0)
    model.inference_ = SGHMC()
    model._warn_if_collapsed(X, y)  # returns before predicting: the unfitted model would raise


# ------------------------------------------------- a discriminator's KL, checked
class _Diagnosed:
    """A fitted estimator stand-in with Bayes by GAN's diagnostics of the KL check."""

    def __init__(self, discriminator, nearest_neighbour, n_layers=1):
        from skbayes.inference import BayesByGAN

        self.inference_ = BayesByGAN()
        self.inference_diagnostics_ = {"n_kl_checked_layers": n_layers, "kl_checked_discriminator": discriminator,
                                       "kl_checked_knn": nearest_neighbour}


def test_a_discriminator_far_below_the_nearest_neighbour_kl_warns():
    # the values measured on Bayesian linear regression (test_linear_model_posteriors.py)
    with pytest.warns(ConvergenceWarning, match=r"underestimate KL.*4\.41 nats on 1 layer\(s\).*18\.2"):
        assert warn_if_kl_underestimated(_Diagnosed(4.41, 18.2))
    assert not _silent(warn_if_kl_underestimated, _Diagnosed(7.7, 8.05))  # agreeing estimates
    assert not _silent(warn_if_kl_underestimated, _Diagnosed(0.4, 1.9))  # half, but within the 2-nat margin
    assert not _silent(warn_if_kl_underestimated, _Diagnosed(1.0, 50.0, n_layers=0))  # no layer could be checked
    model = BayesianMLPRegressor()
    model.inference_diagnostics_ = {"kl": 3.0}
    assert not _silent(warn_if_kl_underestimated, model)  # the other methods report no such check
