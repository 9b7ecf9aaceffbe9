"""``compile=True``: the training loss compiled by torch.compile gives the uncompiled fit's numbers up to round-off,
and a compiler failure falls back to the uncompiled loss with a warning and the same numbers bit for bit."""

import warnings

import numpy as np
import pytest
import torch

from skbayes import BayesianMLPClassifier, BayesianMLPRegressor
from skbayes.inference import DeepEnsemble

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _data():
    rng = np.random.RandomState(0)
    X = rng.randn(64, 2)
    return X, np.sin(X[:, 0]) + 0.1 * rng.randn(64)


def _model(**kwargs):
    return BayesianMLPRegressor(hidden_layer_sizes=(8,), inference=DeepEnsemble(n_estimators=2, max_iter=2),
                                noise="homoscedastic", batch_size=32, random_state=0, **kwargs)


def test_compiled_fit_matches_the_uncompiled_one():
    X, y = _data()
    eager = _model().fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no fallback: the compiled loss ran
        compiled = _model(compile=True).fit(X, y)
    mean, std = compiled.predict(X, return_std=True)
    eager_mean, eager_std = eager.predict(X, return_std=True)
    np.testing.assert_allclose(mean, eager_mean, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(std, eager_std, rtol=1e-9)
    assert not np.array_equal(eager_mean, _model().set_params(random_state=1).fit(X, y).predict(X))  # not vacuous


def test_a_failing_compiler_falls_back_with_a_warning(monkeypatch):
    X, y = _data()
    eager = _model().fit(X, y).predict(X, return_std=True)

    def broken(fn, *args, **kwargs):
        def call(*a, **k):
            raise RuntimeError("no C++ compiler\nmore")
        return call

    monkeypatch.setattr(torch, "compile", broken)
    with pytest.warns(RuntimeWarning, match="torch.compile failed .RuntimeError: no C.. compiler.; training"):
        model = _model(compile=True).fit(X, y)
    np.testing.assert_array_equal(model.predict(X, return_std=True), eager)
    classifier = BayesianMLPClassifier(hidden_layer_sizes=(8,), inference=DeepEnsemble(n_estimators=2, max_iter=2),
                                       compile=True, random_state=0)
    with pytest.warns(RuntimeWarning, match="torch.compile failed"):
        classifier.fit(X, (y > 0).astype(int))
    assert classifier.compile is True  # a parameter, unchanged by the fit


def test_compiled_loss_fallbacks(monkeypatch):
    from skbayes._training import compiled_loss

    def loss(idx):
        if idx.numel() == 0:
            raise ValueError("the loss's own error")
        return idx.double().sum()

    def unsupported(fn, *args, **kwargs):  # torch.compile refusing at wrap time (an unsupported Python)
        raise RuntimeError("not supported on this Python")

    monkeypatch.setattr(torch, "compile", unsupported)
    with pytest.warns(RuntimeWarning, match="not supported on this Python"):
        wrapped = compiled_loss(loss, "Est")
    assert float(wrapped(torch.arange(3))) == 3.0

    def failing(fn, *args, **kwargs):  # the compiled call failing: the loss's own error wins, with no warning
        def call(idx):
            raise RuntimeError("compiler")
        return call

    monkeypatch.setattr(torch, "compile", failing)
    wrapped = compiled_loss(loss, "Est")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(ValueError, match="the loss's own error"):
            wrapped(torch.arange(0))
    with pytest.warns(RuntimeWarning, match="Est: torch.compile failed .RuntimeError: compiler."):
        assert float(wrapped(torch.arange(4))) == 6.0
    assert float(wrapped(torch.arange(5))) == 10.0  # uncompiled from then on
