"""Behaviour of BayesianMLPClassifier: the model average and its uncertainty."""

import pickle

import numpy as np
import pytest
import torch
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import make_blobs
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skbayes import BayesianMLPClassifier

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(scope="module")
def blobs():
    X, y = make_blobs(400, centers=[[-2, 0], [2, 0], [0, 3]], cluster_std=0.8, random_state=0)
    return X, np.array(["ant", "bee", "cat"])[y]


@pytest.fixture(scope="module", params=["mfvi", "mc_dropout"])
def fitted(request, blobs):
    X, y = blobs
    return BayesianMLPClassifier(inference=request.param, max_iter=150, random_state=0).fit(X, y)


def test_learns_string_labelled_classes(fitted, blobs):
    X, y = blobs
    assert list(fitted.classes_) == ["ant", "bee", "cat"]
    assert fitted.score(X, y) > 0.9
    assert set(fitted.predict(X)) <= set(fitted.classes_)


def test_predict_proba_is_the_average_of_the_softmax_not_of_the_logits(fitted, blobs):
    X = blobs[0][:25]
    draws = [f for _, f in fitted._function_draws(X, fitted.n_samples_predict, fitted._predict_seed)]
    logits = torch.cat(draws, dim=1).numpy()  # (T, n, C)
    softmax = np.exp(logits - logits.max(-1, keepdims=True))
    softmax /= softmax.sum(-1, keepdims=True)
    proba = fitted.predict_proba(X)
    np.testing.assert_allclose(proba, softmax.mean(0), rtol=1e-10)
    np.testing.assert_allclose(proba.sum(1), 1.0)
    np.testing.assert_allclose(fitted.predict_log_proba(X), np.log(proba))


def test_uncertainty_measures_satisfy_their_identities(fitted, blobs):
    u = fitted.predict_uncertainty(blobs[0][:50])
    np.testing.assert_allclose(u.predictive_entropy, u.expected_entropy + u.mutual_information, atol=1e-12)
    assert np.all(u.mutual_information >= 0)
    assert np.all(u.predictive_entropy <= np.log(3) + 1e-12)
    np.testing.assert_allclose(u.variation_ratio, 1 - u.proba.max(1))
    np.testing.assert_array_equal(fitted.score_ood(blobs[0][:50]), u.mutual_information)


def test_epistemic_uncertainty_is_higher_far_from_the_data(fitted, blobs, request):
    # Measured here: mfvi's mutual information is 4.5x higher far away; MC
    # dropout at the default rate of 0.01 gives only 1.25x (ReLU networks
    # extrapolate confidently): a known weakness, kept visible as a strict xfail.
    if fitted.inference != "mfvi":
        request.applymarker(pytest.mark.xfail(strict=True, reason="MC dropout at p=0.01 barely raises MI off the data"))
    X = blobs[0]
    far = np.random.RandomState(1).uniform(-1, 1, size=(200, 2)) * 4 + np.array([0, -12])
    far = np.r_[far, far * [-1, 1] + [14, 14]]
    assert fitted.score_ood(far).mean() > 3 * fitted.score_ood(X).mean()


def test_binary_problem_with_integer_labels():
    X, y = make_blobs(200, centers=[[-2, 0], [2, 0]], random_state=0)
    clf = BayesianMLPClassifier(max_iter=60, random_state=0).fit(X, y + 5)
    assert list(clf.classes_) == [5, 6]
    assert clf.predict_proba(X).shape == (200, 2)
    assert clf.score(X, y + 5) > 0.95


def test_same_random_state_gives_identical_probabilities(blobs):
    X, y = blobs
    a = BayesianMLPClassifier(max_iter=10, random_state=7).fit(X, y).predict_proba(X)
    b = BayesianMLPClassifier(max_iter=10, random_state=7).fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(a, b)


def test_pickle_round_trip(fitted, blobs):
    loaded = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(loaded.predict_proba(blobs[0]), fitted.predict_proba(blobs[0]))


def test_works_with_calibration_grid_search_and_pipelines(blobs):
    X, y = blobs
    pipe = make_pipeline(StandardScaler(), BayesianMLPClassifier(max_iter=20, random_state=0))
    search = GridSearchCV(pipe, {"bayesianmlpclassifier__prior_scale": [0.3, 1.0]}, cv=2, scoring="neg_log_loss")
    assert search.fit(X, y).best_estimator_.score(X, y) > 0.8
    calibrated = CalibratedClassifierCV(BayesianMLPClassifier(max_iter=20, random_state=0), cv=2).fit(X, y)
    np.testing.assert_allclose(calibrated.predict_proba(X).sum(1), 1.0)


def test_single_class_and_continuous_targets_are_rejected():
    X = np.random.RandomState(0).randn(10, 2)
    with pytest.raises(ValueError, match="at least 2 classes"):
        BayesianMLPClassifier(max_iter=1).fit(X, np.zeros(10))
    with pytest.raises(ValueError, match="Unknown label type"):
        BayesianMLPClassifier(max_iter=1).fit(X, np.linspace(0, 1, 10))
