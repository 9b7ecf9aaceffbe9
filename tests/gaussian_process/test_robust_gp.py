"""SparseGPRegressor(noise="student_t"): robust GP regression with a Student-t likelihood.

The predictive distribution (the Gaussian q(f) convolved with the t) is
checked against scipy's quadrature of that convolution and against draws;
the fit against data with gross outliers (where the Gaussian likelihood
inflates its noise) and data with known Student-t noise.
"""

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate, stats
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process.kernels import RBF, WhiteKernel

from skbayes import SparseGPRegressor
from skbayes.inference import SparseVariational

# the data of examples/benchmarks/robust_gp.py: a sine with a fraction of gross outliers
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "benchmarks"))
from robust_gp import sine as _sine  # noqa: E402


def _fit(X, y, noise, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return SparseGPRegressor(noise=noise, n_inducing=30, random_state=0,
                                 inference=SparseVariational(max_iter=300), **kwargs).fit(X, y)


@pytest.fixture(scope="module")
def outlier_data():
    return _sine(300, 0, outliers=0.1), _sine(1000, 1)


@pytest.fixture(scope="module")
def robust(outlier_data):
    (X, y), _ = outlier_data
    return _fit(X, y, "student_t")


def _convolution_pdf(y, mean, latent_std, scale, df):
    """int N(f | mean, latent_std^2) St(y | f, scale, df) df by scipy's adaptive quadrature."""
    def integrand(f):
        return stats.norm.pdf(f, mean, latent_std) * stats.t.pdf(y, df, f, scale)

    width = 40 * (latent_std + scale)
    return integrate.quad(integrand, mean - width, mean + width, points=[mean, y], limit=500)[0]


def test_predictive_density_quantiles_and_draws_against_quadrature(robust):
    X_test = np.array([[-2.5], [0.3], [4.5]])  # the last one away from the data: a wide latent
    result = robust.predict_uncertainty(X_test)
    scale, df = robust.noise_std_, robust.noise_df_
    y_grid = result.mean[:, None] + np.array([-1.5, -0.2, 0.0, 0.4, 3.0])
    for i in range(3):
        expected = [np.log(_convolution_pdf(y, result.mean[i], result.epistemic_std[i], scale, df)) for y in y_grid[i]]
        lpd = [robust.log_predictive_density(X_test[i:i + 1], [y])[0] for y in y_grid[i]]
        np.testing.assert_allclose(lpd, expected, atol=1e-6)
    levels = [0.05, 0.5, 0.95]
    quantiles = robust.predict_quantiles(X_test, levels)
    for i in range(3):
        mean, latent_std = result.mean[i], result.epistemic_std[i]
        for j, q in enumerate(levels):
            # P(y <= y_q) = int N(f | mean, latent_std^2) T_nu((y_q - f) / scale) df
            width = 40 * (latent_std + scale)
            cdf = integrate.quad(lambda f: stats.norm.pdf(f, mean, latent_std) * stats.t.cdf(quantiles[i, j], df, f, scale),
                                 mean - width, mean + width, points=[mean, quantiles[i, j]], limit=500)[0]
            assert cdf == pytest.approx(q, abs=1e-6)
    # the standard deviation is the closed form: latent variance + s^2 nu / (nu - 2)
    np.testing.assert_allclose(result.aleatoric_std, scale * np.sqrt(df / (df - 2)), rtol=1e-10)
    np.testing.assert_allclose(result.std**2, result.epistemic_std**2 + result.aleatoric_std**2, rtol=1e-12)
    # draws: their quantiles are the predictive's
    draws = robust.sample_y(X_test, n_samples=100_000, random_state=0)
    spread = quantiles[:, 2] - quantiles[:, 0]
    assert np.max(np.abs(np.quantile(draws, levels, axis=1).T - quantiles) / spread[:, None]) < 0.02


def test_outliers_do_not_inflate_the_noise_or_the_error(outlier_data, robust):
    (X, y), (X_test, y_test) = outlier_data
    gaussian = _fit(X, y, "homoscedastic")
    rmse = {name: np.sqrt(np.mean((model.predict(X_test) - y_test) ** 2)) for name, model in
            (("t", robust), ("gaussian", gaussian))}
    assert rmse["t"] < 0.6 * rmse["gaussian"] and rmse["t"] < 0.15  # noise 0.1 on the clean test rows
    assert gaussian.noise_std_ > 4 * robust.noise_std_  # the Gaussian explains the outliers with its noise
    assert robust.noise_std_ == pytest.approx(0.1, rel=0.35)  # the t's scale stays at the inliers' noise
    lpd_t = robust.log_predictive_density(X_test, y_test).mean()
    assert lpd_t > gaussian.log_predictive_density(X_test, y_test).mean() + 1.0


def test_known_student_t_noise_is_recovered():
    rng = np.random.RandomState(3)
    X = rng.uniform(-3, 3, size=(800, 1))
    y = np.sin(2 * X[:, 0]) + 0.2 * rng.standard_t(3.0, size=800)
    model = _fit(X, y, "student_t", normalize_y=False)
    assert model.noise_std_ == pytest.approx(0.2, rel=0.2)
    assert 2.0 < model.noise_df_ < 6.0
    X_test = rng.uniform(-3, 3, size=(2000, 1))
    y_test = np.sin(2 * X_test[:, 0]) + 0.2 * rng.standard_t(3.0, size=2000)
    lo, hi = model.predict_interval(X_test, coverage=0.9)
    assert 0.87 < np.mean((y_test > lo) & (y_test < hi)) < 0.93


def test_gaussian_data_gives_the_gaussian_model():
    X, y = _sine(300, 4)
    X_test, y_test = _sine(1000, 5)
    robust, gaussian = _fit(X, y, "student_t"), _fit(X, y, "homoscedastic")
    assert robust.noise_df_ > 4  # the degrees of freedom grow from their start: no heavy tails needed
    lpd = [m.log_predictive_density(X_test, y_test).mean() for m in (robust, gaussian)]
    assert lpd[0] == pytest.approx(lpd[1], abs=0.05)


@pytest.mark.parametrize("inference, match", [
    (SparseVariational(objective="fitc"), "objective"),
    ("sghmc", "sampled posterior"),
])
def test_settings_without_a_student_t_form_are_refused(inference, match):
    X, y = _sine(40, 7)
    with pytest.raises(ValueError, match=match):
        SparseGPRegressor(noise="student_t", inference=inference).fit(X, y)
    with pytest.raises(ValueError, match="WhiteKernel"):
        SparseGPRegressor(noise="student_t", kernel=RBF() + WhiteKernel()).fit(X, y)


def test_the_predictive_by_blocks_of_rows_is_the_whole(robust, monkeypatch):
    from skbayes.gaussian_process import _sparse_gp

    X_test, y_test = _sine(25, 8)
    whole_lpd = robust.log_predictive_density(X_test, y_test)
    whole_q = robust.predict_quantiles(X_test, [0.1, 0.9])
    monkeypatch.setattr(_sparse_gp, "_T_BLOCK_ROWS", 4)  # 7 blocks, the last one short
    np.testing.assert_array_equal(robust.log_predictive_density(X_test, y_test), whole_lpd)
    np.testing.assert_array_equal(robust.predict_quantiles(X_test, [0.1, 0.9]), whole_q)


def test_at_the_defaults_the_fit_is_not_stopped_in_adams_first_rise():
    """The seed on which 20 epochs of patience (one full-batch step each) ended the t model after 22 epochs."""
    (X, y), (X_test, y_test) = _sine(300, 1, outliers=0.1), _sine(2000, 1001)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = SparseGPRegressor(noise="student_t", random_state=1).fit(X, y)
    assert model.n_iter_ > 200
    assert np.sqrt(np.mean((model.predict(X_test) - y_test) ** 2)) < 0.15  # noise 0.1 on the clean test rows
