"""The GP estimators' inference objects: SparseVariational, SampledSparseGP, their aliases and discovery."""

import inspect
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.gaussian_process.kernels import RBF
from sklearn.exceptions import ConvergenceWarning

from discovery import inference_methods, public_estimators
from skbayes import BayesianMLPRegressor, DeepGPRegressor, SparseGPClassifier, SparseGPRegressor
from skbayes.inference import (
    ALIASES,
    GP_ALIASES,
    SGHMC,
    MCDropout,
    SampledSparseGP,
    SparseVariational,
    resolve_gp_inference,
)
from skbayes.inference._gp import GP_SAMPLER_ALIASES

GP_ESTIMATORS = [SparseGPRegressor, SparseGPClassifier, DeepGPRegressor]


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        yield


def _data(n=40, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    return X, np.sin(X[:, 0]) + 0.1 * rng.randn(n)


@pytest.mark.parametrize("cls", GP_ESTIMATORS, ids=lambda c: c.__name__)
def test_at_most_sixteen_constructor_parameters(cls):
    assert len(inspect.signature(cls).parameters) <= 16


def test_the_classifier_takes_the_shared_parameters_in_the_regressors_order():
    regressor = list(inspect.signature(SparseGPRegressor).parameters)
    classifier = list(inspect.signature(SparseGPClassifier).parameters)
    shared = [name for name in regressor if name in classifier]
    assert [name for name in classifier if name in regressor] == shared
    assert len(shared) >= 12


def test_aliases_are_the_default_objects():
    assert type(resolve_gp_inference("variational")) is SparseVariational
    assert type(resolve_gp_inference("sghmc")) is SampledSparseGP
    assert not set(GP_ALIASES.values()) & set(ALIASES.values())  # not offered to the MLPs
    assert GP_SAMPLER_ALIASES == {name for name, cls in ALIASES.items() if cls.supports_gp}
    method = SparseVariational(max_iter=3)
    resolved = resolve_gp_inference(method)
    assert resolved is not method and resolved.get_params() == method.get_params()


def test_discovery_offers_each_estimator_the_objects_it_accepts():
    for cls in public_estimators():
        offered = {type(method) for method in inference_methods(estimator=cls)}
        if cls in GP_ESTIMATORS:
            assert SparseVariational in offered
            assert SampledSparseGP in offered
            assert not offered - {SparseVariational, SampledSparseGP}
        else:
            assert not offered & {SparseVariational, SampledSparseGP}
    assert SGHMC in {type(method) for method in inference_methods(estimator=BayesianMLPRegressor)}


@pytest.mark.parametrize("cls", GP_ESTIMATORS, ids=lambda c: c.__name__)
def test_the_loop_settings_are_the_inference_objects(cls):
    X, y = _data()
    y = (y > 0).astype(int) if cls is SparseGPClassifier else y
    model = cls(n_inducing=5, random_state=0, inference=SparseVariational(max_iter=3)).fit(X, y)
    assert model.n_iter_ == 3 and len(model.loss_curve_) == 3
    assert model._loop_settings() == {"max_iter": 3, "tol": 1e-5, "n_iter_no_change": 20}
    assert isinstance(model.inference_, SparseVariational) and model.inference_ is not model.inference
    stopped = cls(n_inducing=5, random_state=0, inference=SparseVariational(tol=1e9, n_iter_no_change=1)).fit(X, y)
    # no epoch improves on the first by 1e9: it stops once more than n_iter_no_change epochs have not
    assert stopped.n_iter_ == 3


def test_the_sampled_start_is_its_variational_object():
    X, y = _data()
    start = SparseVariational(max_iter=4, learning_rate_init=0.05)
    model = SparseGPRegressor(n_inducing=5, random_state=0, inference=SampledSparseGP(
        SGHMC(n_chains=2, burn_in=3, thinning=1, n_kept_samples=2), start=start)).fit(X, y)
    assert model._variational().get_params() == start.get_params()
    assert model.n_iter_ == 3 + 2  # the sampler's own schedule
    # the same start by hand: the variational fit the chains begin from
    alone = SparseGPRegressor(n_inducing=5, random_state=0, inference=start).fit(X, y)
    assert alone.n_iter_ == 4


def test_settings_a_model_has_no_form_for_raise():
    X, y = _data()
    with pytest.raises(ValueError, match="closed form"):
        SparseGPRegressor(inference=SparseVariational(n_mc_train=2)).fit(X, y)
    with pytest.raises(ValueError, match="SparseGPClassifier cannot use SparseVariational\\(objective='fitc'\\)"):
        SparseGPClassifier(inference=SparseVariational(objective="fitc")).fit(X, (y > 0).astype(int))
    with pytest.raises(ValueError, match="MCDropout"):
        SparseGPRegressor(inference=SampledSparseGP(MCDropout())).fit(X, y)
    with pytest.raises(ValueError, match="'inference' parameter"):
        SparseGPRegressor(inference=SGHMC()).fit(X, y)  # a sampler is wrapped in SampledSparseGP
    with pytest.raises(ValueError, match="'inference' parameter"):
        DeepGPRegressor(inference=SGHMC()).fit(X, y)
    with pytest.raises(ValueError, match="DeepGPRegressor cannot sample with MCDropout"):
        DeepGPRegressor(inference=SampledSparseGP(MCDropout())).fit(X, y)
    with pytest.raises(ValueError, match="needs a string kernel"):
        DeepGPRegressor(kernel=RBF(), inference="sghmc").fit(X, y)


def test_n_mc_train_sets_the_softmax_draws():
    X, y = _data(60)
    labels = np.digitize(X[:, 0], [-0.7, 0.7])
    default = SparseGPClassifier(n_inducing=5, likelihood="softmax", random_state=0,
                                 inference=SparseVariational(max_iter=2)).fit(X, labels)
    assert default.module_["likelihood"].n_mc == 8
    two = clone(default).set_params(inference=SparseVariational(max_iter=2, n_mc_train=2)).fit(X, labels)
    assert two.module_["likelihood"].n_mc == 2
    assert not np.array_equal(two.loss_curve_, default.loss_curve_)


def test_deep_gp_hidden_layer_sizes():
    X, y = _data(50)
    model = DeepGPRegressor((3, "auto", 1), n_inducing=5, n_mc_predict=3, random_state=0,
                            inference=SparseVariational(max_iter=2)).fit(X, y)
    assert model.hidden_layer_sizes_ == (3, 2, 1) and len(model.inducing_points_) == 4
    assert [z.shape[1] for z in model.inducing_points_] == [2, 3, 2, 1]
    assert model.predict(X[:4]).shape == (4,)
    # an int is one inner layer; () is the sparse GP
    assert DeepGPRegressor(4, n_inducing=5, inference=SparseVariational(max_iter=1)).fit(X, y).hidden_layer_sizes_ == (4,)
    assert DeepGPRegressor((), n_inducing=5, inference=SparseVariational(max_iter=1)).fit(X, y).hidden_layer_sizes_ == ()


def test_auto_patience_counts_optimiser_steps_on_small_sets():
    # 200 steps at least, 20 epochs at least: one full-batch step per epoch waits 200 epochs
    assert SparseVariational().loop_settings(1)["n_iter_no_change"] == 200
    assert SparseVariational().loop_settings(5)["n_iter_no_change"] == 40
    assert SparseVariational().loop_settings(10)["n_iter_no_change"] == 20
    assert SparseVariational().loop_settings(98)["n_iter_no_change"] == 20
    assert SparseVariational(n_iter_no_change=7).loop_settings(1)["n_iter_no_change"] == 7
