"""What the common tests run over, found by looking, so that a new estimator or inference method cannot be left out.

:func:`public_estimators` lists the estimator classes that ``skbayes``
exports; :func:`inference_methods` makes one object of every inference
method that ``skbayes.inference`` exports, with the test file's small
settings where it gives them and the method's defaults otherwise (a new
method is tested at its defaults until a file says otherwise). By default
those are the Bayesian MLPs' methods (:class:`~skbayes.inference.InferenceMethod`);
``inference_methods(settings, estimator=cls)`` gives instead every inference
object that ``cls`` accepts, read from its ``inference`` constraint (the GP
estimators take :class:`~skbayes.inference.SparseVariational` and
:class:`~skbayes.inference.SampledSparseGP`, which the MLPs do not).
"""

import inspect

from sklearn.base import BaseEstimator

import skbayes
import skbayes.inference


def public_estimators():
    """Every estimator class of ``skbayes``'s top level, sorted by name."""
    return sorted(
        (obj for _, obj in inspect.getmembers(skbayes, inspect.isclass) if issubclass(obj, BaseEstimator)),
        key=lambda cls: cls.__name__,
    )


def inference_method_classes():
    """Every concrete inference method exported by ``skbayes.inference``, sorted by name."""
    module = skbayes.inference
    classes = {obj for obj in (getattr(module, name) for name in module.__all__) if inspect.isclass(obj)}
    return sorted(
        (cls for cls in classes if issubclass(cls, module.InferenceMethod)
         and cls is not module.InferenceMethod and not inspect.isabstract(cls)),
        key=lambda cls: cls.__name__,
    )


def inference_object_classes():
    """Every concrete inference object exported by ``skbayes.inference`` (MLP and GP), sorted by name."""
    module = skbayes.inference
    classes = {obj for obj in (getattr(module, name) for name in module.__all__) if inspect.isclass(obj)}
    return sorted(
        (cls for cls in classes if issubclass(cls, BaseEstimator) and not cls.__name__.startswith("_")
         and cls is not module.InferenceMethod and not inspect.isabstract(cls)),
        key=lambda cls: cls.__name__,
    )


def accepts(estimator_class, method):
    """Whether ``estimator_class``'s ``inference`` constraint admits the object ``method``."""
    from sklearn.utils._param_validation import make_constraint

    constraints = estimator_class._parameter_constraints.get("inference", [])
    return any(make_constraint(c).is_satisfied_by(method) for c in constraints if isinstance(c, type))


def inference_methods(settings=None, estimator=None, **loop):
    """One object per entry of ``settings`` (class name -> list of parameter dicts), defaults for the others.

    Without ``estimator``: every method of the Bayesian MLPs
    (:func:`inference_method_classes`); with an estimator class: every
    inference object of :func:`inference_object_classes` that it accepts.
    A parameter value that is callable is called, to give each object a fresh
    sub-object (e.g. a prior that is fitted with the estimator). ``loop``
    (e.g. ``max_iter=3``, ``n_mc_predict=10``) sets the loop settings and the
    prediction draws of the methods that have them (:func:`with_loop`), under
    those of ``settings``.
    """
    settings = settings or {}
    unknown = set(settings) - {cls.__name__ for cls in inference_object_classes()}
    assert not unknown, f"settings for methods skbayes.inference does not export: {sorted(unknown)}"
    classes = inference_method_classes() if estimator is None else inference_object_classes()
    methods = [
        with_loop(cls(), **loop).set_params(**fresh(params))
        for cls in classes for params in settings.get(cls.__name__, [{}])
    ]
    return methods if estimator is None else [method for method in methods if accepts(estimator, method)]


def fresh(params):
    """``params`` with each callable value replaced by what it returns (a fresh sub-object per estimator)."""
    return {key: value() if callable(value) else value for key, value in params.items()}


def with_loop(method, **settings):
    """A copy of the inference ``method`` (an object or an alias) with those ``settings`` it has.

    The loop settings (``max_iter``, ``learning_rate_init``, ``tol``...) are the
    gradient-trained methods' own; a method with a schedule of its own
    (``SGHMC``) has none of them and is returned as it is. Likewise the weight
    draws at prediction, ``n_mc_predict``, belong to the methods that draw
    weights; those with members (``SGHMC``, ``DeepEnsemble``) predict with all
    of them and have no such setting.
    """
    from sklearn.base import clone

    method = skbayes.inference.resolve_inference(method) if isinstance(method, str) else clone(method)
    own = method.get_params(deep=False)
    return method.set_params(**{key: value for key, value in settings.items() if key in own})
