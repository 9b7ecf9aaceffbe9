"""Behaviour of BayesianMLPClassifier: the model average and its uncertainty."""

import inspect
import pickle
import warnings

import numpy as np
import pytest
import torch
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import load_breast_cancer, make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from discovery import with_loop
from skbayes import BayesianMLPClassifier, BayesianMLPRegressor
from skbayes.inference import DeepEnsemble
from skbayes.nn import StackedMLP

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(scope="module")
def blobs():
    X, y = make_blobs(400, centers=[[-2, 0], [2, 0], [0, 3]], cluster_std=0.8, random_state=0)
    return X, np.array(["ant", "bee", "cat"])[y]


@pytest.fixture(scope="module", params=["mfvi", "mc_dropout"])
def fitted(request, blobs):
    X, y = blobs
    return BayesianMLPClassifier(inference=with_loop(request.param, max_iter=150), random_state=0).fit(X, y)


def test_learns_string_labelled_classes(fitted, blobs):
    X, y = blobs
    assert list(fitted.classes_) == ["ant", "bee", "cat"]
    assert fitted.score(X, y) > 0.9
    assert set(fitted.predict(X)) <= set(fitted.classes_)


def test_predict_proba_is_the_average_of_the_softmax_not_of_the_logits(fitted, blobs):
    X = blobs[0][:25]
    parameters, _ = fitted._draw_parameters(fitted._n_mc_predict(), fitted._predict_seed)
    with torch.no_grad():
        logits = fitted.module_["network"].forward_with(torch.tensor(X), parameters).numpy()  # (T, n, C)
    softmax = np.exp(logits - logits.max(-1, keepdims=True))
    softmax /= softmax.sum(-1, keepdims=True)
    proba = fitted.predict_proba(X)
    np.testing.assert_allclose(proba, softmax.mean(0), rtol=1e-10)
    np.testing.assert_allclose(proba.sum(1), 1.0)
    np.testing.assert_allclose(fitted.predict_log_proba(X), np.log(proba))


@pytest.fixture(scope="module")
def cat_dog():
    """A cat/dog classifier whose two weight draws are set by hand (Gal 2016, section 3.3.1).

    Linear members on one-hot inputs, logits (+-L) with L = 50, so each
    draw's softmax is (1, 0), (0, 1) or (1/2, 1/2) to within e^-100:

    - row 0: both draws say p = (1/2, 1/2) (a model unsure of the label);
    - row 1: one draw says (1, 0), the other (0, 1) (draws that disagree);
    - row 2: both draws say (1, 0) (a confident model).
    """
    X = np.eye(3)
    clf = BayesianMLPClassifier(hidden_layer_sizes=(), random_state=0, inference=DeepEnsemble(max_iter=1)).fit(X, ["cat", "dog", "cat"])
    L = 50.0
    logits = torch.tensor(
        [
            [[0, 0], [L, -L], [L, -L]],  # draw 1: rows 0, 1, 2
            [[0, 0], [-L, L], [L, -L]],  # draw 2
        ],
        dtype=torch.float64,
    )
    weight = torch.cat([logits, torch.zeros(2, 1, 2, dtype=torch.float64)], dim=1)  # bias row 0
    clf.module_["network"] = StackedMLP.from_weights([weight])
    return clf, X


def test_uncertainty_measures_match_gals_three_cases(cat_dog):
    # Hand-derived (Gal 2016, section 3.3.1), entropies in nats:
    #   unsure:    H[p] = log 2, E[H] = log 2, MI = 0,     variation ratio 1/2
    #   disagree:  H[p] = log 2, E[H] = 0,     MI = log 2, variation ratio 1/2
    #   confident: H[p] = 0,     E[H] = 0,     MI = 0,     variation ratio 0
    clf, X = cat_dog
    u = clf.predict_uncertainty(X)
    log2 = np.log(2)
    np.testing.assert_allclose(u.proba, [[0.5, 0.5], [0.5, 0.5], [1.0, 0.0]], atol=1e-12)
    np.testing.assert_allclose(u.predictive_entropy, [log2, log2, 0.0], atol=1e-12)
    np.testing.assert_allclose(u.expected_entropy, [log2, 0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(u.mutual_information, [0.0, log2, 0.0], atol=1e-12)
    np.testing.assert_allclose(u.variation_ratio, [0.5, 0.5, 0.0], atol=1e-12)
    np.testing.assert_allclose(clf.score_ood(X), [0.0, log2, 0.0], atol=1e-12)
    assert clf.predict(X[2:]).tolist() == ["cat"]


def test_uncertainty_of_uneven_draws_matches_a_hand_computation(cat_dog):
    # Three draws on one row: p = (1, 0), (0, 1), (1/2, 1/2). Mean p = (1/2, 1/2):
    # H[p] = log 2; E[H] = (0 + 0 + log 2) / 3; MI = 2/3 log 2.
    clf, _ = cat_dog
    L = 50.0
    logits = torch.tensor([[[L, -L]], [[-L, L]], [[0.0, 0.0]]], dtype=torch.float64)
    weight = torch.cat([torch.zeros(3, 3, 2, dtype=torch.float64), logits], dim=1)  # bias only
    uneven = pickle.loads(pickle.dumps(clf))
    uneven.module_["network"] = StackedMLP.from_weights([weight])
    u = uneven.predict_uncertainty(np.zeros((1, 3)))
    np.testing.assert_allclose(u.predictive_entropy, [np.log(2)], atol=1e-12)
    np.testing.assert_allclose(u.expected_entropy, [np.log(2) / 3], atol=1e-12)
    np.testing.assert_allclose(u.mutual_information, [2 * np.log(2) / 3], atol=1e-12)


def test_epistemic_uncertainty_is_higher_far_from_the_data(fitted, blobs, request):
    # Measured here: mfvi's mutual information is 4.5x higher far away; MC
    # dropout at the default rate of 0.01 gives only 1.25x (ReLU networks
    # extrapolate confidently), and a higher rate does not cure it (at the
    # classifier's defaults, 1.2x at p=0.01, 1.4x at 0.1, 1.7x at 0.5:
    # examples/benchmarks/results/defaults/mc_dropout_rate.md): a known
    # weakness of the method, kept visible as a strict xfail.
    if type(fitted.inference).__name__ != "MeanFieldVI":
        request.applymarker(pytest.mark.xfail(
            strict=True, reason="MC dropout barely raises MI off the data, at p=0.01 and at any rate up to 0.5"))
    X = blobs[0]
    far = np.random.RandomState(1).uniform(-1, 1, size=(200, 2)) * 4 + np.array([0, -12])
    far = np.r_[far, far * [-1, 1] + [14, 14]]
    assert fitted.score_ood(far).mean() > 3 * fitted.score_ood(X).mean()


def test_binary_problem_with_integer_labels():
    X, y = make_blobs(200, centers=[[-2, 0], [2, 0]], random_state=0)
    clf = BayesianMLPClassifier(random_state=0, inference=DeepEnsemble(max_iter=60)).fit(X, y + 5)
    assert list(clf.classes_) == [5, 6]
    assert clf.predict_proba(X).shape == (200, 2)
    assert clf.score(X, y + 5) > 0.95


def test_same_random_state_gives_identical_probabilities(blobs):
    X, y = blobs
    a = BayesianMLPClassifier(random_state=7, inference=DeepEnsemble(max_iter=10)).fit(X, y).predict_proba(X)
    b = BayesianMLPClassifier(random_state=7, inference=DeepEnsemble(max_iter=10)).fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(a, b)


def test_pickle_round_trip(fitted, blobs):
    loaded = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(loaded.predict_proba(blobs[0]), fitted.predict_proba(blobs[0]))


def test_works_with_calibration_grid_search_and_pipelines(blobs):
    X, y = blobs
    pipe = make_pipeline(StandardScaler(), BayesianMLPClassifier(random_state=0, inference=DeepEnsemble(max_iter=20)))
    search = GridSearchCV(pipe, {"bayesianmlpclassifier__prior_scale": [0.3, 1.0]}, cv=2, scoring="neg_log_loss")
    assert search.fit(X, y).best_estimator_.score(X, y) > 0.8
    calibrated = CalibratedClassifierCV(BayesianMLPClassifier(random_state=0, inference=DeepEnsemble(max_iter=20)), cv=2).fit(X, y)
    np.testing.assert_allclose(calibrated.predict_proba(X).sum(1), 1.0)


def test_single_class_and_continuous_targets_are_rejected():
    X = np.random.RandomState(0).randn(10, 2)
    with pytest.raises(ValueError, match="at least 2 classes"):
        BayesianMLPClassifier(inference=DeepEnsemble(max_iter=1)).fit(X, np.zeros(10))
    with pytest.raises(ValueError, match="Unknown label type"):
        BayesianMLPClassifier(inference=DeepEnsemble(max_iter=1)).fit(X, np.linspace(0, 1, 10))


def test_default_fit_on_breast_cancer_converges_without_warning():
    # The defaults (a deep ensemble with early stopping, patience 10) were chosen on this set and on
    # digits (examples/benchmarks/classifier_defaults.py); their fit must stop by itself, as MLPClassifier's
    # does not here (200 epochs, a ConvergenceWarning).
    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, stratify=y, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        pipe = make_pipeline(StandardScaler(), BayesianMLPClassifier(random_state=0)).fit(X_train, y_train)
    clf = pipe[-1]
    assert isinstance(clf.inference_, DeepEnsemble) and clf.n_iter_ < 500
    assert pipe.score(X_test, y_test) > 0.94


@pytest.mark.parametrize("cls", [BayesianMLPClassifier, BayesianMLPRegressor])
def test_documented_defaults_are_those_of_the_signature(cls):
    # the classifier's defaults differ from the regressor's; each docstring shows its own
    for name, parameter in inspect.signature(cls).parameters.items():
        if name in ("hidden_layer_sizes", "inference", "prior_scale", "early_stopping", "n_iter_no_change"):
            default = parameter.default
            shown = f'"{default}"' if isinstance(default, str) else repr(default)
            (line,) = [line for line in cls.__doc__.splitlines() if line.strip().startswith(f"{name} : ")]
            assert line.endswith(f"default={shown}"), line
