"""SparseGPClassifier and the classification likelihoods: quadrature, accuracy against sklearn, uncertainty, API."""

import pickle
import warnings

import numpy as np
import pytest
import torch
from scipy import integrate, stats
from sklearn.datasets import load_breast_cancer, load_iris, make_moons
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skbayes import BayesianMLPClassifier, SparseGPClassifier
from skbayes.nn import BinaryLikelihood, RobustMaxLikelihood, SoftmaxLikelihood, gauss_hermite
from skbayes.inference import SparseVariational

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _t(values):
    return torch.tensor(values, dtype=torch.float64)


def _gauss_expect(g, mean, var):
    """E_{N(mean, var)}[g(f)] by adaptive quadrature (scipy), the independent reference."""
    sd = np.sqrt(var)
    return integrate.quad(lambda f: g(f) * stats.norm.pdf(f, mean, sd), mean - 12 * sd, mean + 12 * sd, limit=200)[0]


# ----------------------------------------------------------------- likelihoods
MEANS, VARS, LABELS = [0.3, -1.2, 2.0, -0.4], [0.5, 2.0, 0.1, 4.0], [1, 0, 1, 1]


def test_gauss_hermite_is_exact_for_polynomials():
    nodes, weights = gauss_hermite(5, dtype=torch.float64)
    moments = [(weights * nodes**k).sum().item() for k in range(10)]
    # E[z^k] of the standard normal: 0 for odd k, (k - 1)!! for even k, exact up to degree 2 * 5 - 1
    np.testing.assert_allclose(moments, [1, 0, 1, 0, 3, 0, 15, 0, 105, 0], atol=1e-10)


@pytest.mark.parametrize("link", ["probit", "logit"])
def test_binary_expected_log_prob_matches_scipy_quad(link):
    likelihood = BinaryLikelihood(link)
    got = likelihood.expected_log_prob(_t(LABELS), _t(MEANS), _t(VARS)).numpy()
    log_link = stats.norm.logcdf if link == "probit" else (lambda a: -np.logaddexp(0.0, -a))
    expected = [_gauss_expect(lambda f, y=y: log_link((2 * y - 1) * f), m, v) for y, m, v in zip(LABELS, MEANS, VARS)]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("link", ["probit", "logit"])
def test_binary_predictive_proba_matches_quadrature(link):
    # probit: the closed form Phi(mu / sqrt(1 + s^2)) against numerical integration of Phi(f) N(f | mu, s^2)
    likelihood = BinaryLikelihood(link)
    got = likelihood.predictive_proba(_t(MEANS), _t(VARS)).numpy()
    cdf = stats.norm.cdf if link == "probit" else (lambda a: 1.0 / (1.0 + np.exp(-a)))
    expected = [_gauss_expect(cdf, m, v) for m, v in zip(MEANS, VARS)]
    # probit is exact; the 20-node quadrature of the logistic is within 1e-5 here
    np.testing.assert_allclose(got[:, 1], expected, rtol=0, atol=1e-10 if link == "probit" else 1e-5)
    np.testing.assert_allclose(got.sum(1), 1.0)


def test_robustmax_matches_scipy_quad():
    means, vars_ = np.array([[0.2, -0.5, 1.0], [1.5, 1.4, -2.0]]), np.array([[0.3, 1.0, 0.5], [2.0, 0.1, 1.0]])
    # The second row pits a wide q(f_0) against a narrow q(f_1), where Gauss-Hermite converges slowly:
    # 200 nodes for 1e-6; the default 20 nodes are within 1e-2 there.
    likelihood = RobustMaxLikelihood(3, epsilon=0.01, n_quadrature=200)
    prob_max = likelihood.prob_max(_t(means), _t(vars_)).numpy()
    coarse = RobustMaxLikelihood(3, epsilon=0.01).prob_max(_t(means), _t(vars_)).numpy()
    np.testing.assert_allclose(coarse, prob_max, atol=1e-2)
    for i in range(2):
        for c in range(3):
            others = [k for k in range(3) if k != c]

            def integrand(f, i=i, others=others):
                return np.prod([stats.norm.cdf((f - means[i, k]) / np.sqrt(vars_[i, k])) for k in others])

            np.testing.assert_allclose(prob_max[i, c], _gauss_expect(integrand, means[i, c], vars_[i, c]), atol=1e-6)
    y = _t([2, 0])
    got = likelihood.expected_log_prob(y, _t(means), _t(vars_)).numpy()
    p_y = prob_max[[0, 1], [2, 0]]
    np.testing.assert_allclose(got, p_y * np.log(0.99) + (1 - p_y) * np.log(0.005), rtol=1e-10)
    proba = likelihood.predictive_proba(_t(means), _t(vars_)).numpy()
    np.testing.assert_allclose(proba.sum(1), 1.0)
    # brute-force Monte Carlo of p(y = c) = E[(1 - eps) 1{c = argmax} + eps / 2 1{c != argmax}]
    rng = np.random.RandomState(0)
    f = means + np.sqrt(vars_) * rng.standard_normal((200_000, 2, 3))
    hit = np.eye(3)[f.argmax(-1)]
    np.testing.assert_allclose(proba, (0.99 * hit + 0.005 * (1 - hit)).mean(0), atol=4e-3)


def test_softmax_expected_log_prob_two_classes_matches_quad():
    # With C = 2, log softmax(f)_0 = log sigmoid(f_0 - f_1) and f_0 - f_1 ~ N(m0 - m1, v0 + v1): a 1-D integral.
    means, vars_ = np.array([[0.5, -0.3], [-1.0, 1.0]]), np.array([[0.4, 0.9], [2.0, 0.5]])
    likelihood = SoftmaxLikelihood(n_mc=100_000)
    generator = torch.Generator().manual_seed(0)
    got = likelihood.expected_log_prob(_t([0, 1]), _t(means), _t(vars_), generator=generator).numpy()
    log_sigmoid = lambda a: -np.logaddexp(0.0, -a)  # noqa: E731
    expected = [
        _gauss_expect(log_sigmoid, means[0, 0] - means[0, 1], vars_[0].sum()),
        _gauss_expect(log_sigmoid, means[1, 1] - means[1, 0], vars_[1].sum()),
    ]
    np.testing.assert_allclose(got, expected, atol=5e-3)


# ----------------------------------------------------------------- estimator
@pytest.fixture(scope="module")
def moons():
    X, y = make_moons(400, noise=0.3, random_state=0)
    return train_test_split(StandardScaler().fit_transform(X), y, test_size=0.5, random_state=0)


@pytest.fixture(scope="module")
def moons_model(moons):
    X_train, _, y_train, _ = moons
    return SparseGPClassifier(
        n_inducing=200, random_state=0,
        inference=SparseVariational(max_iter=600, learning_rate_init=0.02),
    ).fit(X_train, y_train)


def test_matches_sklearn_gpc_on_moons(moons, moons_model):
    # Inducing points = the 200 training rows: the variational posterior with the probit link against
    # sklearn's Laplace approximation with the logit link, both with learned RBF hyperparameters.
    X_train, X_test, y_train, y_test = moons
    reference = GaussianProcessClassifier(1.0 * RBF(1.0), random_state=0).fit(X_train, y_train)
    ours = log_loss(y_test, moons_model.predict_proba(X_test))
    theirs = log_loss(y_test, reference.predict_proba(X_test))
    # measured: log-loss 0.243 against 0.269, accuracy 0.890 against 0.895 (one row of 200)
    assert ours <= theirs + 0.01, (ours, theirs)
    assert moons_model.score(X_test, y_test) >= reference.score(X_test, y_test) - 0.01


def test_matches_sklearn_gpc_on_breast_cancer():
    # Real data (bundled with scikit-learn): 300 standardised rows. Both start at the length-scale
    # sqrt(n_features) (from 1.0, sklearn's optimiser stays in a poor optimum: accuracy 0.63).
    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, train_size=150, test_size=150, random_state=0)
    scaler = StandardScaler().fit(X_train)
    X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
    length_scale = np.sqrt(X.shape[1])
    # the scikit-learn expression of the "rbf" string, starting at other length-scales
    model = SparseGPClassifier(
        ConstantKernel(1.0) * RBF(np.full(X.shape[1], length_scale)), n_inducing=150, random_state=0,
        inference=SparseVariational(max_iter=500, learning_rate_init=0.02),
    )
    model.fit(X_train, y_train)
    reference = GaussianProcessClassifier(1.0 * RBF(length_scale), random_state=0).fit(X_train, y_train)
    ours, theirs = log_loss(y_test, model.predict_proba(X_test)), log_loss(y_test, reference.predict_proba(X_test))
    assert ours <= theirs + 0.01, (ours, theirs)
    # measured: log-loss 0.086 against 0.109, accuracy 0.973 against 0.987 (two rows of 150)
    assert model.score(X_test, y_test) >= reference.score(X_test, y_test) - 0.02


def test_probit_decision_function_and_latent(moons, moons_model):
    X_test = moons[1]
    mean, std = moons_model.predict_latent(X_test)
    proba = moons_model.predict_proba(X_test)
    # independent: Phi(mu / sqrt(1 + s^2)) with scipy, and Phi^-1 of the probabilities
    np.testing.assert_allclose(proba[:, 1], stats.norm.cdf(mean / np.sqrt(1 + std**2)), rtol=1e-10)
    np.testing.assert_allclose(moons_model.decision_function(X_test), stats.norm.ppf(proba[:, 1]), atol=1e-6)
    assert moons_model.decision_function(X_test).shape == (len(X_test),)


def test_draws_average_to_the_closed_form(moons):
    X_train, X_test, y_train, _ = moons
    model = SparseGPClassifier(
        n_inducing=30, n_mc_predict=20_000, random_state=0,
        inference=SparseVariational(max_iter=200),
    )
    model.fit(X_train, y_train)
    result = model.predict_uncertainty(X_test[:20])
    np.testing.assert_allclose(result.proba, model.predict_proba(X_test[:20]), atol=0.02)


@pytest.mark.parametrize("likelihood", ["softmax", "robustmax"])
def test_multiclass_iris(likelihood):
    X, y = load_iris(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        StandardScaler().fit_transform(X), y, test_size=0.4, random_state=0, stratify=y
    )
    model = SparseGPClassifier(
        n_inducing=20, likelihood=likelihood, random_state=0,
        inference=SparseVariational(max_iter=400, learning_rate_init=0.03),
    ).fit(X_train, y_train)
    proba = model.predict_proba(X_test)
    assert proba.shape == (len(X_test), 3)
    np.testing.assert_allclose(proba.sum(1), 1.0)
    assert model.module_["gp"].n_latent == 3
    assert model.decision_function(X_test).shape == (len(X_test), 3)
    assert model.predict_latent(X_test)[0].shape == (len(X_test), 3)
    accuracy = accuracy_score(y_test, model.predict(X_test))
    assert accuracy >= 0.9
    # calibrated-ish: mean confidence within 0.1 of the accuracy, and a better log-loss than uniform guessing
    assert abs(proba.max(1).mean() - accuracy) < 0.1
    assert log_loss(y_test, proba) < 0.5 * np.log(3)


def test_string_labels_round_trip():
    X, y = make_moons(120, noise=0.2, random_state=1)
    labels = np.array(["left", "right"])[y]
    model = SparseGPClassifier(n_inducing=20, random_state=0, inference=SparseVariational(max_iter=150)).fit(X, labels)
    assert list(model.classes_) == ["left", "right"]
    assert set(model.predict(X)) <= {"left", "right"}
    assert model.score(X, labels) > 0.85
    X3 = np.vstack([X, X[:40] + 3.0])
    labels3 = np.concatenate([labels, np.full(40, "far")])
    model3 = SparseGPClassifier(n_inducing=20, random_state=0, inference=SparseVariational(max_iter=100)).fit(X3, labels3)
    assert list(model3.classes_) == ["far", "left", "right"] and model3.likelihood_ == "softmax"
    assert model3.predict(X3).dtype == labels3.dtype


@pytest.mark.parametrize("likelihood", ["probit", "softmax"])
def test_uncertainty_grows_away_from_the_data(moons, likelihood):
    X_train, _, y_train, _ = moons
    model = SparseGPClassifier(
        n_inducing=30, likelihood=likelihood, random_state=0,
        inference=SparseVariational(max_iter=300),
    )
    model.fit(X_train, y_train)
    near = model.predict_uncertainty(X_train[:50])
    far = model.predict_uncertainty(X_train[:50] + np.array([8.0, 8.0]))
    assert far.mutual_information.mean() > 2 * near.mutual_information.mean()
    assert far.predictive_entropy.mean() > near.predictive_entropy.mean()
    assert np.all(far.mutual_information >= 0) and np.all(near.variation_ratio <= 0.5 + 1e-12)
    np.testing.assert_array_equal(model.score_ood(X_train[:5]), model.predict_uncertainty(X_train[:5]).mutual_information)


def test_uncertainty_measures_are_shared_with_the_mlp():
    assert SparseGPClassifier.predict_uncertainty is BayesianMLPClassifier.predict_uncertainty
    assert SparseGPClassifier.score_ood is BayesianMLPClassifier.score_ood


def test_same_random_state_identical_and_row_independent(moons):
    X_train, X_test, y_train, _ = moons
    params = {"n_inducing": 15, "inference": SparseVariational(max_iter=60), "likelihood": "softmax", "batch_size": 64,
              "random_state": 3}
    a = SparseGPClassifier(**params).fit(X_train, y_train)
    b = SparseGPClassifier(**params).fit(X_train, y_train)
    np.testing.assert_array_equal(a.loss_curve_, b.loss_curve_)
    np.testing.assert_array_equal(a.predict_proba(X_test), b.predict_proba(X_test))
    u = a.predict_uncertainty(X_test)
    np.testing.assert_array_equal(u.mutual_information, b.predict_uncertainty(X_test).mutual_information)
    # a row's result does not depend on the other rows
    np.testing.assert_allclose(a.predict_proba(X_test[::-1])[::-1], a.predict_proba(X_test), rtol=1e-12)


def test_ngd_fits(moons):
    X_train, X_test, y_train, y_test = moons
    model = SparseGPClassifier(
        n_inducing=30, random_state=0,
        inference=SparseVariational(optimizer="ngd", max_iter=300),
    )
    model.fit(X_train, y_train)
    assert model.score(X_test, y_test) > 0.85
    assert model.loss_curve_[-1] < model.loss_curve_[0]


def test_pickle_and_sklearn_kernel(moons):
    X_train, X_test, y_train, _ = moons
    model = SparseGPClassifier(
        ConstantKernel(1.0) * RBF(1.0), n_inducing=15, random_state=0,
        inference=SparseVariational(max_iter=80),
    )
    model.fit(X_train, y_train)
    assert isinstance(model.kernel_, type(model.kernel)) and model.length_scale_ is None
    assert model.kernel_.k2.length_scale != 1.0  # learned
    loaded = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(loaded.predict_proba(X_test), model.predict_proba(X_test))
    np.testing.assert_array_equal(
        loaded.predict_uncertainty(X_test).expected_entropy, model.predict_uncertainty(X_test).expected_entropy
    )


def test_grid_search_in_pipeline(moons):
    X_train, _, y_train, _ = moons
    pipe = make_pipeline(StandardScaler(), SparseGPClassifier(
        random_state=0,
        inference=SparseVariational(max_iter=40),
    ))
    grid = {"sparsegpclassifier__n_inducing": [5, 20], "sparsegpclassifier__kernel": ["rbf", "matern32"]}
    search = GridSearchCV(pipe, grid, cv=2, scoring="neg_log_loss").fit(X_train, y_train)
    assert len(search.cv_results_["params"]) == 4
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))


def test_warm_start_continues(moons):
    X_train, _, y_train, _ = moons
    model = SparseGPClassifier(
        n_inducing=15, warm_start=True, random_state=0,
        inference=SparseVariational(max_iter=30),
    ).fit(X_train, y_train)
    first = model.loss_curve_[-1]
    module = model.module_
    model.fit(X_train, y_train)
    assert model.module_ is module and model.loss_curve_[0] <= first + 1e-3


def test_errors():
    X, y = make_moons(60, noise=0.2, random_state=0)
    with pytest.raises(ValueError, match="Unknown label type"):
        SparseGPClassifier(inference=SparseVariational(max_iter=2)).fit(X, y + np.linspace(0, 0.5, 60))
    with pytest.raises(ValueError, match="at least 2 classes"):
        SparseGPClassifier(inference=SparseVariational(max_iter=2)).fit(X, np.zeros(60))
    X_nan = X.copy()
    X_nan[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        SparseGPClassifier(inference=SparseVariational(max_iter=2)).fit(X_nan, y)
    with pytest.raises(ValueError, match="WhiteKernel"):
        SparseGPClassifier(RBF() + WhiteKernel(), inference=SparseVariational(max_iter=2)).fit(X, y)
    from sklearn.gaussian_process.kernels import DotProduct, Exponentiation

    with pytest.raises(ValueError, match="Exponentiation"):
        SparseGPClassifier(Exponentiation(DotProduct(), 2), inference=SparseVariational(max_iter=2)).fit(X, y)
    with pytest.raises(ValueError, match="two classes"):
        SparseGPClassifier(likelihood="probit", inference=SparseVariational(max_iter=2)).fit(X, np.arange(60) % 3)
    with pytest.raises(NotFittedError):
        SparseGPClassifier().predict_proba(X)
    model = SparseGPClassifier(n_inducing=5, inference=SparseVariational(max_iter=2)).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        model.predict(X[:, :1])
    with pytest.raises(ValueError, match="infinity|inf"):
        model.predict_proba(np.full((2, 2), np.inf))
    # score with labels that are not classes
    assert model.score(X, np.where(y == 1, 7, 0)) < 1.0


def test_no_convergence_warning_when_it_converges(moons):
    X_train, _, y_train, _ = moons
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        SparseGPClassifier(
            n_inducing=10, random_state=0,
            inference=SparseVariational(max_iter=2000, tol=1e-3, n_iter_no_change=5),
        ).fit(
            X_train, y_train
        )


# ---------------------------------------------------------------- partial_fit
def test_first_partial_fit_is_one_epoch_of_fit(moons):
    X_train, _, y_train, _ = moons
    streamed = SparseGPClassifier(n_inducing=20, random_state=0).partial_fit(X_train, y_train, classes=[0, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        once = SparseGPClassifier(n_inducing=20, random_state=0, inference=SparseVariational(max_iter=1)).fit(
            X_train, y_train
        )
    assert streamed.n_iter_ == 1 and streamed.n_seen_ == len(X_train)
    assert streamed.loss_curve_ == once.loss_curve_
    np.testing.assert_array_equal(streamed.inducing_points_, once.inducing_points_)
    np.testing.assert_array_equal(streamed.predict_proba(X_train), once.predict_proba(X_train))


@pytest.mark.parametrize("n_classes", [2, 3])
def test_streaming_partial_fit_learns_and_checks_its_classes(n_classes):
    rng = np.random.RandomState(0)
    X = rng.randn(1200, 2)
    y = np.digitize(X[:, 0] + 0.5 * X[:, 1], [0.0] if n_classes == 2 else [-0.5, 0.5])
    X_test, y_test, X, y = X[:400], y[:400], X[400:], y[400:]
    model = SparseGPClassifier(n_inducing=30, random_state=0)
    with pytest.raises(ValueError, match="classes must be passed"):
        model.partial_fit(X[:50], y[:50])
    labels = np.arange(n_classes)
    model.partial_fit(X[:50], np.zeros(50, dtype=int), classes=labels)  # a first batch with one class
    for epoch in range(10):
        for start in range(0, 800, 100):
            model.partial_fit(X[start:start + 100], y[start:start + 100])
    assert model.n_seen_ == 50 + 10 * 800 and model.n_iter_ == 81
    np.testing.assert_array_equal(model.classes_, labels)
    # a stationary GP on a linear boundary: near the Bayes classifier (the labels are noise-free)
    assert accuracy_score(y_test, model.predict(X_test)) > 0.93
    with pytest.raises(ValueError, match="not in classes_"):
        model.partial_fit(X[:10], np.full(10, 7))
    with pytest.raises(ValueError, match="differs from classes_"):
        model.partial_fit(X[:10], y[:10], classes=[0, 9])


def test_partial_fit_after_fit_and_pickle_continues(moons):
    X_train, X_test, y_train, y_test = moons
    model = SparseGPClassifier(n_inducing=20, random_state=0, inference=SparseVariational(max_iter=50)).fit(
        X_train, y_train
    )
    n_iter = model.n_iter_
    loaded = pickle.loads(pickle.dumps(model))
    model.partial_fit(X_test, y_test)
    loaded.partial_fit(X_test, y_test)
    assert model.n_iter_ == n_iter + 1 and model.n_seen_ == len(X_train) + len(X_test)
    assert loaded.loss_curve_[-1] == pytest.approx(model.loss_curve_[-1], rel=1e-10)


def test_sampled_classifier_says_why_it_cannot_stream():
    model = SparseGPClassifier(inference="sghmc")
    with pytest.raises(AttributeError) as info:
        model.partial_fit
    assert "chains run over all the rows" in str(info.value.__cause__)


def test_a_refused_first_partial_fit_leaves_no_fitted_state():
    rng = np.random.RandomState(0)
    X, y = rng.randn(30, 2), np.arange(30) % 3
    model = SparseGPClassifier(likelihood="probit", n_inducing=5)
    with pytest.raises(ValueError, match="probit"):
        model.partial_fit(X, y, classes=[0, 1, 2])
    assert not hasattr(model, "classes_") and not hasattr(model, "module_")
    with pytest.raises(NotFittedError):
        model.predict(X)
