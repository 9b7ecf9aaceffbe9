"""The inference methods as parameter objects, and the estimator API built on them.

Covers: the objects as scikit-learn parameter objects (clone, get/set_params,
repr, validation at fit), that fitting never changes them, tuning them with
GridSearchCV, the string aliases, ``inference_diagnostics_``, ``partial_fit``,
argument validation of every public method, and the memory of prediction.
"""

import inspect
import pickle
import subprocess
import sys
import textwrap
import warnings

import joblib
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import FitFailedWarning
from sklearn.model_selection import GridSearchCV
from sklearn.utils import estimator_checks

from discovery import inference_methods, with_loop
from skbayes import BayesianMLPClassifier, BayesianMLPRegressor
from skbayes.inference import (
    ALIASES,
    MNF,
    PBP,
    SGHMC,
    BayesByGAN,
    BayesByHypernet,
    DeepEnsemble,
    InferenceMethod,
    MCDropout,
    MeanFieldVI,
    Vadam,
    WHVI,
)

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

ESTIMATORS = [BayesianMLPRegressor, BayesianMLPClassifier]


def _methods():
    """One object of every method skbayes.inference exports (tests/discovery.py), small enough for fast fits.

    (10 weight draws at prediction for the methods that draw them: ``n_mc_predict``.)
    """
    return inference_methods(max_iter=3, n_mc_predict=10, settings={
        "SGHMC": [{"n_chains": 2, "burn_in": 4, "thinning": 1, "n_kept_samples": 4}],
        "DeepEnsemble": [{"n_estimators": 2}],
        "BayesByHypernet": [{"generator_hidden_sizes": (8,)}],
        "BayesByGAN": [{"generator_hidden_sizes": (8,), "discriminator_hidden_sizes": (12,)}],
        "MNF": [{"hidden_size": 8}],
    })


def _ids(method):
    return type(method).__name__


def _pairs():
    """Every (estimator class, method) that applies: the classifier does not take PBP."""
    return [
        pytest.param(cls, method, id=f"{_ids(method)}-{cls.__name__}")
        for method in _methods()
        for cls in ESTIMATORS
        if cls is BayesianMLPRegressor or method.supports_classification
    ]


# The documented keys of inference_diagnostics_, per method (SHARED_ATTRIBUTES_DOC).
DIAGNOSTICS = {
    "MeanFieldVI": {"kl"},
    "MCDropout": {"kl"},
    "Vadam": {"kl"},
    "PBP": {"kl", "prior_std", "n_rejected"},
    "DeepEnsemble": {"neg_log_prior"},
    "Laplace": {"prior_precision", "log_evidence", "n_evidence_iter"},
    "SWAG": {"n_collected", "rank", "mean_std"},
    "BlackBoxVI": {"kl", "n_variational_parameters"},
    "SGHMC": {"neg_log_prior", "rhat", "n_extensions", "n_diverged_chains"},
    "WHVI": {"kl"},
    "BayesByHypernet": {"kl_knn"},
    "BayesByGAN": {"kl_discriminator", "discriminator_loss", "kl_knn", "n_kl_checked_layers", "kl_checked_discriminator",
                   "kl_checked_knn"},
    "MNF": {"kl"},
}

# One invalid value per method, and of the loop settings.
BAD_PARAMETERS = [
    (PBP, "max_iter", 0),
    (MeanFieldVI, "early_stopping", "sometimes"),
    (DeepEnsemble, "learning_rate_init", 0.0),
    (MCDropout, "n_iter_no_change", "never"),
    (Vadam, "beta_2", 1.0),
    (MeanFieldVI, "posterior_init_scale", 0.0),
    (MeanFieldVI, "init", "bogus"),
    (MCDropout, "dropout_rate", 1.0),
    (MCDropout, "placement", "everywhere"),
    (Vadam, "n_mc_train", 0),
    (Vadam, "curvature", "hessian"),
    (BayesByHypernet, "kl_estimator", "kernel"),
    (SGHMC, "burn_in", -1),
    (SGHMC, "friction", 1.5),
    (DeepEnsemble, "n_estimators", 0),
    (WHVI, "g_prior_variance", 0.0),
    (WHVI, "last_layer", "dense"),
    (BayesByHypernet, "n_mc_train", 1),
    (BayesByHypernet, "generator_hidden_sizes", 0),
    (BayesByGAN, "discriminator_hidden_sizes", "wide"),
    (BayesByGAN, "discriminator_learning_rate", 0.0),
    (MNF, "flow", "radial"),
    (MNF, "n_flows", -1),
    (MNF, "hidden_size", 0),
    (PBP, "n_mc_predict", 0),
    (MeanFieldVI, "n_mc_predict", 1.5),
]


@pytest.fixture(scope="module")
def data():
    rng = np.random.RandomState(0)
    X = rng.randn(60, 3)
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.randn(60)
    return X, y


def _fit(estimator_cls, method, X, y, **params):
    if estimator_cls is BayesianMLPClassifier:
        y = (y > np.median(y)).astype(int)
    params = {"hidden_layer_sizes": (8,), "random_state": 0, **params}
    return estimator_cls(inference=method, **params).fit(X, y)


# ------------------------------------------------------ the objects themselves
@pytest.mark.parametrize("method", _methods(), ids=_ids)
def test_objects_are_sklearn_parameter_objects(method):
    assert isinstance(method, InferenceMethod)
    params = method.get_params()
    assert set(params) == set(inspect.signature(type(method)).parameters)
    cloned = clone(method)
    assert cloned is not method and type(cloned) is type(method)
    assert cloned.get_params() == params
    assert joblib.hash(cloned) == joblib.hash(method)
    for name, value in params.items():  # set_params round-trips every parameter
        assert clone(method).set_params(**{name: value}).get_params()[name] == value
    # the repr is scikit-learn's: only the non-default parameters are shown
    assert repr(type(method)()) == f"{type(method).__name__}()"
    if isinstance(method, SGHMC):
        assert repr(method) == "SGHMC(burn_in=4, n_kept_samples=4, thinning=1)"
        assert method.set_params(burn_in=7).burn_in == 7


# scikit-learn's generic checks that need no fit (the objects have none).
# The others of check_estimator do not apply: they call fit/predict/transform,
# which a parameter object does not have; the property they test for fit
# ("fit does not change the parameters") is tested through the estimator in
# test_fitting_does_not_change_the_object_passed.
NON_FIT_CHECKS = [
    estimator_checks.check_get_params_invariance,
    estimator_checks.check_set_params,
    estimator_checks.check_parameters_default_constructible,
    estimator_checks.check_no_attributes_set_in_init,
    estimator_checks.check_estimator_repr,
    estimator_checks.check_estimator_cloneable,
    estimator_checks.check_do_not_raise_errors_in_init_or_set_params,
    estimator_checks.check_estimator_tags_renamed,
    estimator_checks.check_valid_tag_types,
    estimator_checks.check_mixin_order,
]


@pytest.mark.parametrize("check", NON_FIT_CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("method", _methods(), ids=_ids)
def test_sklearn_checks_that_need_no_fit(method, check):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. the checks' own warnings about the object
        check(type(method).__name__, method)


@pytest.mark.parametrize("cls, name, value", BAD_PARAMETERS, ids=lambda v: str(v) if isinstance(v, str) else None)
def test_a_bad_parameter_is_named_at_fit(cls, name, value, data):
    X, y = data
    method = cls(**{name: value})  # constructing it does not validate (scikit-learn's convention)
    with pytest.raises(ValueError, match=f"'{name}' parameter of {cls.__name__}"):
        BayesianMLPRegressor(inference=method, noise="homoscedastic", hidden_layer_sizes=(50,)).fit(X, y)


def test_an_unknown_alias_is_reported(data):
    X, y = data
    with pytest.raises(ValueError, match="'inference' parameter"):
        BayesianMLPRegressor(inference="no_such_method", noise="homoscedastic", hidden_layer_sizes=(50,)).fit(X, y)


@pytest.mark.parametrize("estimator_cls, method", _pairs())
def test_fitting_does_not_change_the_object_passed(estimator_cls, method, data):
    X, y = data
    params, digest = method.get_params(), joblib.hash(method)
    model = _fit(estimator_cls, method, X, y)
    assert model.inference is method
    assert method.get_params() == params
    assert joblib.hash(method) == digest
    assert model.inference_ is not method
    assert type(model.inference_) is type(method) and model.inference_.get_params() == params
    # a second fit does not change it either, and uses a new clone
    first = model.inference_
    model.fit(X, y if estimator_cls is BayesianMLPRegressor else (y > np.median(y)).astype(int))
    assert joblib.hash(method) == digest and model.inference_ is not first


# ------------------------------------------------------------------ GridSearch
def _small_sghmc(**params):
    return SGHMC(**{"n_chains": 2, "burn_in": 2, "thinning": 1, "n_kept_samples": 2, **params})


def test_grid_search_tunes_a_parameter_of_the_method(data):
    X, y = data
    model = BayesianMLPRegressor((8,), inference=_small_sghmc(), random_state=0, noise="homoscedastic")
    search = GridSearchCV(model, {"inference__burn_in": [2, 4]}, cv=2).fit(X, y)
    assert search.best_params_["inference__burn_in"] in (2, 4)
    assert search.best_estimator_.inference_.burn_in == search.best_params_["inference__burn_in"]
    assert search.best_estimator_.n_iter_ == search.best_params_["inference__burn_in"] + 2
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
    assert model.inference.burn_in == 2  # the estimator given to the search is untouched


def test_grid_search_over_the_methods(data):
    X, y = data
    candidates = [MeanFieldVI(n_mc_predict=10), _small_sghmc(), DeepEnsemble(n_estimators=2)]
    model = BayesianMLPRegressor((8,), inference=MeanFieldVI(max_iter=3, n_mc_predict=10), random_state=0, noise="homoscedastic")
    search = GridSearchCV(model, {"inference": candidates}, cv=2, error_score="raise").fit(X, y)
    assert len(search.cv_results_["params"]) == 3
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
    best = search.best_params_["inference"]
    assert any(best is c for c in candidates)
    assert type(search.best_estimator_.inference_) is type(best)


def test_grid_search_of_a_classifier_over_pbp_reports_regression_only(data):
    X, y = data
    labels = (y > np.median(y)).astype(int)
    model = BayesianMLPClassifier((8,), random_state=0, inference=DeepEnsemble(max_iter=3))
    grid = {"inference": [MeanFieldVI(n_mc_predict=10), PBP(n_mc_predict=10)]}
    with pytest.raises(ValueError, match="PBP supports regression only"):
        GridSearchCV(model, grid, cv=2, error_score="raise").fit(X, labels)
    with pytest.warns(FitFailedWarning, match="PBP supports regression only"):
        search = GridSearchCV(model, grid, cv=2).fit(X, labels)
    assert isinstance(search.best_params_["inference"], MeanFieldVI)
    assert np.isnan(search.cv_results_["mean_test_score"][1])


# --------------------------------------------------------------------- aliases
@pytest.mark.parametrize(
    "alias, estimator_cls",
    [
        (alias, est)
        for alias, cls in sorted(ALIASES.items())
        for est in ESTIMATORS
        if est is BayesianMLPRegressor or cls.supports_classification
    ],
)
def test_strings_are_aliases_of_the_default_objects(alias, estimator_cls):
    cls = ALIASES[alias]
    rng = np.random.RandomState(1)
    X = rng.randn(24, 2)  # tiny: the default SGHMC runs its 500 epochs
    y = X[:, 0] + 0.1 * rng.randn(24)
    if estimator_cls is BayesianMLPClassifier:
        y = (y > 0).astype(int)
    params = {"hidden_layer_sizes": (4,), "random_state": 0}  # the methods at their defaults
    by_name = estimator_cls(inference=alias, **params).fit(X, y)
    by_object = estimator_cls(inference=cls(), **params).fit(X, y)
    assert type(by_name.inference_) is cls
    assert by_name.inference_.get_params() == cls().get_params()
    predict = by_name.predict_proba if estimator_cls is BayesianMLPClassifier else by_name.predict
    other = by_object.predict_proba if estimator_cls is BayesianMLPClassifier else by_object.predict
    np.testing.assert_array_equal(predict(X), other(X))
    assert by_name.loss_curve_ == by_object.loss_curve_


# --------------------------------------------------------- inference_diagnostics_
@pytest.mark.parametrize("estimator_cls, method", _pairs())
def test_inference_diagnostics_hold_the_documented_keys(estimator_cls, method, data):
    X, y = data
    model = _fit(estimator_cls, method, X, y)
    diagnostics = model.inference_diagnostics_
    assert set(diagnostics) == DIAGNOSTICS[type(method).__name__]
    for name, value in diagnostics.items():
        assert isinstance(value, (int, float)), name
    for name in ("kl", "neg_log_prior", "prior_std"):
        if name in diagnostics:
            assert np.isfinite(diagnostics[name]) and diagnostics[name] > 0
    for removed in ("kl_", "rhat_", "pbp_prior_std_", "pbp_n_rejected_"):
        assert not hasattr(model, removed)


def test_a_refit_with_another_method_replaces_the_diagnostics(data):
    X, y = data
    model = _fit(BayesianMLPRegressor, _small_sghmc(n_kept_samples=4), X, y)
    assert set(model.inference_diagnostics_) == {"neg_log_prior", "rhat", "n_extensions", "n_diverged_chains"}
    model.set_params(inference=MeanFieldVI()).fit(X, y)
    assert set(model.inference_diagnostics_) == {"kl"}
    assert isinstance(model.inference_, MeanFieldVI)
    model.set_params(inference=PBP()).fit(X, y)
    assert set(model.inference_diagnostics_) == {"kl", "prior_std", "n_rejected"}


# ------------------------------------------------------------ draws at prediction
def _count_draws(network, monkeypatch):
    """The ``n_draws`` of every ``sample_parameters`` (or ``quadrature_parameters``) call of prediction, in order."""
    draws, original = [], network.sample_parameters
    monkeypatch.setattr(network, "sample_parameters", lambda n, generator: draws.append(n) or original(n, generator))
    if hasattr(network, "quadrature_parameters") and network.quadrature_parameters(2) is not None:
        nodes = network.quadrature_parameters  # PBP's moment-matched predictive: its quadrature nodes
        monkeypatch.setattr(network, "quadrature_parameters", lambda n: draws.append(n) or nodes(n))
    return draws


@pytest.mark.parametrize("method", _methods(), ids=_ids)
def test_the_methods_that_draw_weights_hold_their_number(method, data, monkeypatch):
    # n_mc_predict belongs to the methods whose fitted network has no finite set of members;
    # those with members (SGHMC, DeepEnsemble) predict with all of them and have no such setting.
    X, y = data
    model = BayesianMLPRegressor((8,), inference=with_loop(method, n_mc_predict=7), random_state=0,
                                 noise="homoscedastic").fit(X, y)
    network = model.module_["network"]
    assert ("n_mc_predict" in method.get_params()) is not hasattr(network, "n_members")
    if hasattr(network, "n_members"):
        return
    draws = _count_draws(network, monkeypatch)
    model.predict(X, return_std=True)
    model.log_predictive_density(X, y)
    model.predict_interval(X, coverage=0.9)
    assert draws == [7, 7, 7]


def test_the_number_of_draws_changes_the_prediction_not_the_fit(data, monkeypatch):
    X, y = data
    labels = (y > np.median(y)).astype(int)
    few, many = (
        BayesianMLPClassifier((8,), inference=MCDropout(max_iter=3, dropout_rate=0.2, n_mc_predict=n), random_state=0)
        .fit(X, labels) for n in (7, 200)
    )
    assert few.loss_curve_ == many.loss_curve_
    draws = _count_draws(few.module_["network"], monkeypatch)
    proba = few.predict_proba(X)
    assert draws == [7]
    assert not np.allclose(proba, many.predict_proba(X))


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_the_estimators_no_longer_take_n_mc_predict(cls):
    assert "n_mc_predict" not in cls().get_params()
    with pytest.raises(TypeError, match="n_mc_predict"):
        cls(n_mc_predict=5)


# ------------------------------------------------------------------ partial_fit
@pytest.mark.parametrize("method", [m for m in _methods() if m.supports_partial_fit], ids=_ids)
def test_first_partial_fit_equals_fit_with_one_epoch(method, data):
    X, y = data
    params = {"hidden_layer_sizes": (8,), "inference": method, "noise": "homoscedastic", "random_state": 0}
    fitted = BayesianMLPRegressor(**{**params, "inference": with_loop(method, max_iter=1)}).fit(X, y)
    streamed = BayesianMLPRegressor(**params).partial_fit(X, y)
    for a, b in zip(fitted.predict(X, return_std=True), streamed.predict(X, return_std=True)):
        np.testing.assert_array_equal(a, b)
    assert fitted.loss_curve_ == streamed.loss_curve_
    assert streamed.n_iter_ == 1 and streamed.n_seen_ == len(X)


def test_first_partial_fit_of_the_classifier_equals_fit_with_one_epoch(data):
    X, y = data
    labels = (y > np.median(y)).astype(int)
    # early_stopping=False: fit would otherwise hold rows out, which partial_fit never does
    params = {"hidden_layer_sizes": (8,), "random_state": 0}
    fitted = BayesianMLPClassifier(**params, inference=DeepEnsemble(max_iter=1, early_stopping=False)).fit(X, labels)
    streamed = BayesianMLPClassifier(**params).partial_fit(X, labels, classes=[0, 1])
    np.testing.assert_array_equal(fitted.predict_proba(X), streamed.predict_proba(X))


@pytest.mark.parametrize("method", [m for m in _methods() if m.supports_partial_fit], ids=_ids)
def test_repeated_partial_fit_lowers_the_loss_and_counts(method):
    rng = np.random.RandomState(0)
    X = rng.randn(400, 3)
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.randn(400)
    batches = np.array_split(np.arange(400), 4)
    model = BayesianMLPRegressor((16,), inference=method, random_state=0, noise="homoscedastic")
    for n_calls in range(1, 13):
        rows = batches[(n_calls - 1) % 4]
        model.partial_fit(X[rows], y[rows])
        if n_calls == 1:
            first_score = model.score(X, y)
        assert model.n_iter_ == n_calls
        assert model.n_seen_ == 100 * n_calls
        assert len(model.loss_curve_) == n_calls
    # the loss of the last pass over the four batches against the first
    assert np.mean(model.loss_curve_[-4:]) < np.mean(model.loss_curve_[:4])
    assert model.score(X, y) > first_score + 0.1


def test_partial_fit_after_fit_continues(data):
    X, y = data
    model = BayesianMLPRegressor((8,), inference=MeanFieldVI(max_iter=3), random_state=0, noise="homoscedastic").fit(X, y)
    module = model.module_
    model.partial_fit(X[:20], y[:20])
    assert model.module_ is module
    assert model.n_iter_ == 4 and model.n_seen_ == len(X) + 20
    assert len(model.loss_curve_) == 4


def test_partial_fit_continues_alike_across_a_pickle(data):
    # A stream whose chunks run in different processes (dask_ml's Incremental on a cluster) pickles the
    # model between partial_fit calls: the optimiser's moments travel with it.
    X, y = data
    model = BayesianMLPRegressor((8,), inference="mfvi", random_state=0, noise="homoscedastic")
    model.partial_fit(X[:40], y[:40])
    loaded = pickle.loads(pickle.dumps(model))
    loaded.partial_fit(X[40:], y[40:])
    model.partial_fit(X[40:], y[40:])
    assert loaded.loss_curve_ == model.loss_curve_
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


def test_sghmc_has_no_partial_fit(data):
    # scikit-learn's idiom (MLPClassifier offers partial_fit only for stochastic
    # solvers): with SGHMC the attribute is absent, the reason in the error's cause.
    for estimator_cls in (BayesianMLPRegressor, BayesianMLPClassifier):
        for inference in ("sghmc", _small_sghmc()):
            model = estimator_cls(inference=inference)
            assert not hasattr(model, "partial_fit")
            with pytest.raises(AttributeError) as error:
                model.partial_fit
            assert "SGHMC does not support partial_fit; use fit" in str(error.value.__cause__)
            assert hasattr(model.set_params(inference=MeanFieldVI()), "partial_fit")


def test_partial_fit_of_the_classifier_needs_classes_and_known_labels(data):
    X, y = data
    labels = np.where(y > 0, "dog", "cat")
    clf = BayesianMLPClassifier((8,), random_state=0)
    with pytest.raises(ValueError, match="classes must be passed on the first call"):
        clf.partial_fit(X, labels)
    assert not hasattr(clf, "module_")
    # a first batch may lack a class that ``classes`` names
    clf.partial_fit(X[labels == "cat"], labels[labels == "cat"], classes=["cat", "dog", "emu"])
    assert clf.classes_.tolist() == ["cat", "dog", "emu"]
    assert clf.predict_proba(X).shape == (len(X), 3)
    clf.partial_fit(X, labels)
    with pytest.raises(ValueError, match="labels not in classes_.*'bee'"):
        clf.partial_fit(X[:3], ["cat", "bee", "dog"])
    with pytest.raises(ValueError, match="differs from classes_"):
        clf.partial_fit(X[:3], labels[:3], classes=["cat", "dog"])
    assert clf.n_iter_ == 2


# ------------------------------------------------------ validation of arguments
@pytest.fixture(scope="module")
def small_models(data):
    X, y = data
    return {
        "regressor": BayesianMLPRegressor(
            (8,), inference=MeanFieldVI(max_iter=2, n_mc_predict=10), random_state=0, noise="homoscedastic"
        ).fit(X, y),
        "classifier": BayesianMLPClassifier((8,), random_state=0, inference=DeepEnsemble(max_iter=2)).fit(
            X, (y > 0).astype(int)
        ),
    }


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda m, X: m.sample_y(X, n_samples=0), "n_samples"),
        (lambda m, X: m.sample_y(X, n_samples=2.5), "n_samples"),
        (lambda m, X: m.sample_y(X, random_state="seed"), "random_state"),
        (lambda m, X: m.predict_interval(X, coverage=1.5), "coverage"),
        (lambda m, X: m.predict_interval(X, coverage=0.0), "coverage"),
        (lambda m, X: m.predict(X, return_std="yes"), "return_std"),
    ],
)
def test_public_methods_validate_their_arguments(small_models, data, call, name):
    X, _ = data
    with pytest.raises(ValueError, match=f"'{name}' parameter of "):
        call(small_models["regressor"], X[:5])


def _extra_arguments(method):
    """The arguments of a public method besides self, X, y and **kwargs."""
    return [
        p.name
        for p in inspect.signature(method).parameters.values()
        if p.name not in ("self", "X", "y") and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    ]


@pytest.mark.parametrize("estimator_cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_every_argument_of_every_public_method_has_a_constraint(estimator_cls):
    # Methods of skbayes' own (not scikit-learn's get_params, score, ...)
    # declare a constraint for every argument besides X and y. Exceptions:
    # fit/partial_fit validate X and y with the data; the classifier's
    # ``classes`` is checked against the labels (test above).
    exempt = {("partial_fit", "classes")}
    missing = []
    for name, method in inspect.getmembers(estimator_cls, inspect.isfunction):
        if name.startswith("_") or not method.__module__.startswith("skbayes"):
            continue
        constraints = getattr(method, "_parameter_constraints", {})
        missing += [(name, arg) for arg in _extra_arguments(method) if arg not in constraints and (name, arg) not in exempt]
    assert not missing, f"arguments without a constraint: {missing}"


# -------------------------------------------------------------- memory of predict
_MEMORY_SCRIPT = textwrap.dedent(
    """
    import resource, sys, warnings
    import numpy as np
    from skbayes import BayesianMLPRegressor

    warnings.simplefilter("ignore")
    rng = np.random.RandomState(0)
    model = BayesianMLPRegressor(random_state=0).fit(rng.randn(200, 8), rng.randn(200))
    X = rng.randn(100_000, 8)
    model.predict(X[:1000], return_std=True)  # warm up (lazy allocations of torch)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    mean, std = model.predict(X, return_std=True)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    print((after - before) * scale, mean.nbytes + std.nbytes)
    """
)


def test_memory_of_prediction_is_bounded():
    # Prediction runs in blocks of rows holding 32 MiB of values whatever the
    # number of rows, and writes each block's results into arrays allocated
    # once. The code before the redesign (blocks sized from the widest layer's
    # outputs only, results of every block gathered in lists) grew the peak by
    # 4.1 GB on exactly this prediction (100,000 rows, the default 100 draws);
    # now it grows by about 80-120 MB, and by 131 MB at 1,000,000 rows. A fresh
    # process, so that the peak is this prediction's.
    out = subprocess.run([sys.executable, "-c", _MEMORY_SCRIPT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    growth, output_bytes = map(int, out.stdout.split())
    assert output_bytes == 2 * 100_000 * 8
    assert growth < 300 * 2**20, f"peak memory grew by {growth / 2**20:.0f} MiB"


def test_discovery_finds_every_method_the_aliases_name():
    from discovery import inference_method_classes

    found = inference_method_classes()
    assert set(ALIASES.values()) <= set(found)
    assert [type(m) for m in _methods()] == found  # one object each, in the order found
