"""SparseGPRegressor with scikit-learn kernel objects: translation, bounds, kernel_, and exact GP parity."""

import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, DotProduct, ExpSineSquared, Exponentiation, Matern, PairwiseKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.gaussian_process.kernels import RationalQuadratic, WhiteKernel
from sklearn.utils.estimator_checks import parametrize_with_checks

from skbayes import SparseGPRegressor
from skbayes.gaussian_process import from_sklearn_kernel, to_sklearn_kernel
from skbayes.inference import SparseVariational

KERNELS = [
    C(2.5),
    RBF(1.3),
    RBF([0.5, 1.0, 2.0]),
    Matern(0.7, nu=0.5),
    Matern([1.0, 2.0, 0.6], nu=1.5),
    Matern(2.0, nu=2.5),
    Matern(1.1, nu=np.inf),
    RationalQuadratic(length_scale=1.2, alpha=0.7),
    ExpSineSquared(length_scale=1.1, periodicity=2.5),
    DotProduct(sigma_0=0.4),
    WhiteKernel(0.3),
    C(2.0) * RBF([0.5, 1.0, 2.0]),
    C(0.5, "fixed") * Matern(1.0, nu=1.5) + DotProduct(1.0) * C(0.3) + RBF(2.0, length_scale_bounds="fixed"),
    C(1.5) * RationalQuadratic(0.8, 2.0) * ExpSineSquared(1.0, 3.0) + C(0.1) * Matern([0.5, 1.0, 1.5], nu=0.5),
]


@pytest.mark.parametrize("kernel", KERNELS, ids=repr)
def test_translation_reproduces_sklearn_covariance(kernel):
    rng = np.random.RandomState(0)
    X1, X2 = rng.randn(30, 3), rng.randn(20, 3)
    module = from_sklearn_kernel(kernel, dtype=torch.float64)
    with torch.no_grad():
        K = module(torch.from_numpy(X1), torch.from_numpy(X2)).numpy()
        diag = module.diag(torch.from_numpy(X1)).numpy()
    np.testing.assert_allclose(K, kernel(X1, X2), rtol=1e-10, atol=0)
    if not isinstance(kernel, WhiteKernel):  # the noise goes to the likelihood, not k(x, x)
        np.testing.assert_allclose(diag, kernel.diag(X1), rtol=1e-10, atol=0)
    back = to_sklearn_kernel(module, kernel)
    assert repr(back) == repr(kernel)
    np.testing.assert_allclose(back.theta, kernel.theta, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    "kernel, name",
    [
        (PairwiseKernel(metric="laplacian"), "PairwiseKernel"),
        (Exponentiation(RBF(1.0), 2.0), "Exponentiation"),
        (C(1.0) * Matern(1.0, nu=0.75), "nu=0.75"),
        (C(1.0) * (RBF(1.0) + WhiteKernel(0.1)), "WhiteKernel"),
    ],
)
def test_untranslatable_kernel_raises_naming_it(kernel, name):
    X, y = np.random.RandomState(0).randn(20, 2), np.zeros(20)
    with pytest.raises(ValueError, match=name):
        SparseGPRegressor(kernel=kernel, inference=SparseVariational(max_iter=2)).fit(X, y)


def _data(n=60, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    return X, 3.0 * np.sin(2 * X[:, 0]) + 0.3 * rng.randn(n) + 5


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_fixed_hyperparameters_stay_and_bounds_hold():
    X, y = _data()
    kernel = (
        C(0.7, "fixed") * RBF([1.0, 1.0], length_scale_bounds=(0.8, 1.2))
        + C(0.5, (0.4, 0.6)) * Matern(1.3, length_scale_bounds="fixed", nu=1.5)
        + WhiteKernel(0.05, noise_level_bounds=(0.04, 0.2))
    )
    model = SparseGPRegressor(
        kernel=kernel, n_inducing=20, random_state=0,
        inference=SparseVariational(learning_rate_init=0.1, max_iter=100),
    )
    model.fit(X, y)
    fitted = model.kernel_
    assert fitted.k1.k1.k1.constant_value == 0.7
    assert fitted.k1.k2.k2.length_scale == 1.3
    assert np.all((fitted.k1.k1.k2.length_scale >= 0.8) & (fitted.k1.k1.k2.length_scale <= 1.2))
    assert 0.4 <= fitted.k1.k2.k1.constant_value <= 0.6
    assert 0.04 <= fitted.k2.noise_level <= 0.2
    # The noise of the likelihood is the WhiteKernel's variance, in standardised units (normalize_y).
    assert model.noise_std_ == pytest.approx(np.sqrt(fitted.k2.noise_level) * y.std(), rel=1e-10)
    buffers = dict(model.module_.named_buffers())
    assert "gp.kernel.k1.k1.k1.constant_value.fixed_value" in buffers
    assert "gp.kernel.k1.k2.k2.length_scale.fixed_value" in buffers
    assert not any("fixed_value" in name for name, _ in model.module_.named_parameters())
    assert model.length_scale_ is None and model.signal_std_ is None
    # Something did move.
    assert not np.allclose(fitted.theta, kernel.theta)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_kernel_structure_printed_as_input():
    X, y = _data()
    kernel = C(1.0) * RBF(np.ones(2)) + WhiteKernel(0.1)
    model = SparseGPRegressor(
        kernel=kernel, n_inducing=20, random_state=0,
        inference=SparseVariational(max_iter=5),
    ).fit(X, y)
    strip = lambda s: "".join(ch for ch in s if not (ch.isdigit() or ch in ".e-+"))  # noqa: E731
    assert strip(str(model.kernel_)) == strip(str(kernel))
    assert type(model.kernel_.k1.k2) is RBF and model.kernel_.k1.k2.length_scale.shape == (2,)
    assert model.kernel_.n_dims == kernel.n_dims


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_no_white_kernel_uses_noise_std():
    X, y = _data()
    model = SparseGPRegressor(
        kernel=C(1.0) * RBF(1.0), noise_std=0.25, n_inducing=20, random_state=0,
        inference=SparseVariational(max_iter=5),
    )
    model.fit(X, y)
    assert model.noise_std_ == pytest.approx(0.25)
    assert isinstance(model.kernel_.k2.length_scale, float)  # stays isotropic


def test_matches_exact_gaussian_process_regressor():
    """With Z = X (fixed) the SVGP objective at the optimal q(u) is the exact log marginal likelihood."""
    rng = np.random.RandomState(0)
    n = 150
    X = rng.uniform(-2, 2, size=(n, 2))
    y = np.sin(2 * X[:, 0]) + np.cos(1.5 * X[:, 1]) + 0.15 * rng.randn(n) + 10
    kernel = C(1.0) * RBF(np.ones(2)) + WhiteKernel(0.1)
    gpr = GaussianProcessRegressor(kernel=kernel, normalize_y=True, random_state=0).fit(X, y)
    model = SparseGPRegressor(
        kernel=kernel, n_inducing=n, prior_mean="zero", random_state=0,
        inference=SparseVariational(optimizer="ngd", ngd_step_size=1.0, learn_inducing=False,
                                    learning_rate_init=0.05, max_iter=1500,
                                    tol=0.0, n_iter_no_change=1500),
    )
    with pytest.warns(ConvergenceWarning):  # fixed epoch budget: the convergence warning
        model.fit(X, y)
    # Both kernel_ are in standardised units (normalize_y=True): the same theta.
    theta = model.kernel_.theta.copy()
    reference = gpr.kernel_.theta
    np.testing.assert_allclose(theta[1:], reference[1:], atol=0.02)  # length-scales, noise: 2% in log
    assert abs(theta[0] - reference[0]) < 0.06  # the signal variance lies along a flat ridge
    assert gpr.log_marginal_likelihood(theta) == pytest.approx(gpr.log_marginal_likelihood_value_, abs=0.05)
    X_test = rng.uniform(-2, 2, size=(50, 2))
    mean, std = model.predict(X_test, return_std=True)
    mean_ref, std_ref = gpr.predict(X_test, return_std=True)
    np.testing.assert_allclose(mean, mean_ref, atol=0.01 * y.std())
    np.testing.assert_allclose(std, std_ref, rtol=0.02)


@parametrize_with_checks(
    [
        SparseGPRegressor(
            kernel=C(1.0) * RBF(1.0) + WhiteKernel(0.1), n_inducing=10, random_state=0,
            inference=SparseVariational(max_iter=50, learning_rate_init=0.05),
        )
    ]
)
def test_sklearn_compatible_with_kernel_object(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_grid_search_over_kernels_and_pickle():
    """GridSearchCV can choose between kernel objects and strings; the winner pickles with its kernel_."""
    import pickle

    from sklearn.model_selection import GridSearchCV

    rng = np.random.RandomState(3)
    X = rng.uniform(-3, 3, size=(120, 1))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.randn(120)  # periodic signal, period 2 pi / 3
    grid = {"kernel": [C(1.0) * DotProduct(1.0) + WhiteKernel(0.1), C(1.0) * RBF(0.5) + WhiteKernel(0.1), "rbf"]}
    base = SparseGPRegressor(
        n_inducing=30, random_state=0,
        inference=SparseVariational(max_iter=150, learning_rate_init=0.05),
    )
    search = GridSearchCV(base, grid, cv=3).fit(X, y)
    scores = search.cv_results_["mean_test_score"]
    assert scores[0] < 0.2 < scores[1]  # a linear kernel cannot fit a sine; the RBF can
    assert not isinstance(search.best_params_["kernel"], str) or search.best_params_["kernel"] == "rbf"
    restored = pickle.loads(pickle.dumps(search.best_estimator_))
    np.testing.assert_array_equal(restored.predict(X[:5]), search.best_estimator_.predict(X[:5]))
    if hasattr(search.best_estimator_, "kernel_"):
        assert repr(restored.kernel_) == repr(search.best_estimator_.kernel_)


@pytest.mark.parametrize("name, sk_class", [("rbf", RBF), ("matern32", Matern)])
def test_string_kernel_has_a_kernel_for_the_exact_gp(name, sk_class):
    """kernel_ of a string kernel, handed to GaussianProcessRegressor(optimizer=None), is the same GP.

    With Z = X and q(u) at its closed-form optimum the sparse GP is the exact GP with its fitted
    hyperparameters, so sklearn's independent implementation must predict the same.
    """
    rng = np.random.RandomState(1)
    X = rng.uniform(-2, 2, size=(80, 2))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.randn(80) + 3.0
    model = SparseGPRegressor(
        kernel=name, n_inducing=80, prior_mean="zero", random_state=0,
        # Adam for 60 steps: moderate hyperparameters, for which the tolerances below hold. (L-BFGS reaches the
        # maximum of the bound for matern32: signal std 41, length-scales 20 and 240, where the jitter of K_zz
        # against GPR's alpha=1e-10 moves the mean by 0.004, just above them.)
        inference=SparseVariational(optimizer="adam", learn_inducing=False, max_iter=60),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    kernel = model.kernel_
    assert isinstance(kernel.k1.k2, sk_class) and isinstance(kernel.k2, WhiteKernel)
    assert kernel.k1.k2.length_scale.shape == (2,)
    np.testing.assert_allclose(kernel.k1.k2.length_scale, model.length_scale_, rtol=1e-12)
    gpr = GaussianProcessRegressor(kernel=kernel, optimizer=None, normalize_y=True).fit(X, y)
    X_test = rng.uniform(-3, 3, size=(30, 2))
    mean, std = model.predict(X_test, return_std=True)
    mean_ref, std_ref = gpr.predict(X_test, return_std=True)
    # Agreement to the Cholesky jitter of K_zz (1e-6 of its diagonal, against a noise variance of
    # ~1e-2 standardised): ~1e-3 relative. Wrong units (the kernel in y's units, not standardised
    # ones) or hyperparameters would be off by far more.
    np.testing.assert_allclose(mean, mean_ref, atol=5e-3 * y.std())
    np.testing.assert_allclose(std, std_ref, rtol=2e-3)
