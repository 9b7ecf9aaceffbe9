"""The predictive mixture object (skbayes._predictive.MixturePredictive) against independent computations.

Quadrature of its density (it integrates to 1; its mean and variance are
the integrals of y and (y - m)^2 against it; its CDF is the integral up to
y), scipy's distributions for single components, and many draws of its
sampler for the moments and quantiles.
"""

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.stats import norm, t

from skbayes._predictive import MixturePredictive


def _mixture(df):
    rng = np.random.RandomState(0)
    loc = rng.normal(size=(7, 3)) * [0.5, 2.0, 0.1]  # 7 components, 3 rows of different spreads
    scale = rng.uniform(0.3, 1.5, size=(7, 3))
    return MixturePredictive(loc, scale, df=None if df is None else np.full((7, 3), df))


@pytest.mark.parametrize("df", [None, 4.5], ids=["gaussian", "student_t"])
def test_density_integrates_to_one_and_gives_the_moments(df):
    mixture = _mixture(df)
    mean, var = mixture.mean(), mixture.variance()
    for i in range(3):
        def pdf(y):
            return np.exp(mixture.logpdf(np.full(3, y))[i])

        assert quad(pdf, -np.inf, np.inf)[0] == pytest.approx(1.0, abs=1e-8)
        assert quad(lambda y: y * pdf(y), -np.inf, np.inf)[0] == pytest.approx(mean[i], abs=1e-7)
        second = quad(lambda y: (y - mean[i]) ** 2 * pdf(y), -np.inf, np.inf, limit=200)[0]
        assert second == pytest.approx(var[i], rel=1e-6)
        for y in (-1.0, 0.3, 2.0):
            assert mixture.cdf(np.full(3, y))[i] == pytest.approx(quad(pdf, -np.inf, y)[0], abs=1e-8)


@pytest.mark.parametrize("df", [None, 4.5], ids=["gaussian", "student_t"])
def test_quantiles_invert_the_cdf_and_match_many_draws(df):
    mixture = _mixture(df)
    levels = [0.025, 0.25, 0.5, 0.9, 0.975]
    quantiles = mixture.ppf(levels)
    assert quantiles.shape == (3, 5)
    for j, q in enumerate(levels):
        np.testing.assert_allclose(mixture.cdf(quantiles[:, j]), q, atol=1e-9)
    draws = mixture.sample(200_000, np.random.RandomState(1))
    assert draws.shape == (200_000, 3)
    spread = quantiles[:, -1] - quantiles[:, 0]
    assert np.max(np.abs(np.quantile(draws, levels, axis=0).T - quantiles) / spread[:, None]) < 0.01
    np.testing.assert_allclose(draws.mean(0), mixture.mean(), atol=5 * np.sqrt(mixture.variance() / 2e5).max())


def test_one_component_is_scipys_distribution():
    loc, scale = np.array([[0.5, -1.0]]), np.array([[2.0, 0.3]])
    y = np.array([1.0, -0.2])
    np.testing.assert_allclose(MixturePredictive(loc, scale).logpdf(y), norm.logpdf(y, loc[0], scale[0]), rtol=1e-12)
    student = MixturePredictive(loc, scale, df=3.0)
    np.testing.assert_allclose(student.logpdf(y), t.logpdf(y, 3.0, loc[0], scale[0]), rtol=1e-12)
    np.testing.assert_allclose(student.variance(), scale[0] ** 2 * 3.0, rtol=1e-12)


def test_the_latent_variance_moves_variance_from_aleatoric_to_epistemic():
    rng = np.random.RandomState(2)
    loc, latent = rng.normal(size=(5, 4, 2)), rng.uniform(0.1, 0.5, size=(5, 4, 2))
    noise = 0.2
    mixture = MixturePredictive(loc, np.sqrt(latent + noise**2), latent_var=latent)
    np.testing.assert_allclose(mixture.epistemic_variance(), loc.var(0) + latent.mean(0), rtol=1e-12)
    np.testing.assert_allclose(mixture.aleatoric_variance(), noise**2, rtol=1e-12)
    plain = MixturePredictive(loc, np.sqrt(latent + noise**2))
    np.testing.assert_allclose(mixture.variance(), plain.variance(), rtol=1e-12)  # the total does not move


@pytest.mark.parametrize("df", [None, 4.5], ids=["gaussian", "student_t"])
def test_a_weighted_mixture_against_quadrature_and_draws(df):
    rng = np.random.RandomState(3)
    loc, scale = rng.normal(size=(6, 3)), rng.uniform(0.3, 1.2, size=(6, 3))
    weights = np.array([0.05, 0.4, 0.0, 0.25, 0.2, 0.1])  # one component of no weight
    mixture = MixturePredictive(loc, scale, df=None if df is None else np.full((6, 3), df), weights=weights)
    component = norm if df is None else t(df)

    def pdf(y, i):  # written out from scipy's components
        return sum(w * component.pdf((y - loc[c, i]) / scale[c, i]) / scale[c, i] for c, w in enumerate(weights))

    mean, var = mixture.mean(), mixture.variance()
    for i in range(3):
        assert quad(lambda y: pdf(y, i), -np.inf, np.inf)[0] == pytest.approx(1.0, abs=1e-8)
        assert mixture.logpdf(np.full(3, 0.4))[i] == pytest.approx(np.log(pdf(0.4, i)), rel=1e-12)
        assert quad(lambda y: y * pdf(y, i), -np.inf, np.inf)[0] == pytest.approx(mean[i], abs=1e-7)
        second = quad(lambda y: (y - mean[i]) ** 2 * pdf(y, i), -np.inf, np.inf, limit=200)[0]
        assert second == pytest.approx(var[i], rel=1e-6)
        assert mixture.cdf(np.full(3, 0.4))[i] == pytest.approx(quad(lambda y: pdf(y, i), -np.inf, 0.4)[0], abs=1e-8)
    levels = [0.05, 0.5, 0.95]
    quantiles = mixture.ppf(levels)
    for j, q in enumerate(levels):
        np.testing.assert_allclose(mixture.cdf(quantiles[:, j]), q, atol=1e-9)
    draws = mixture.sample(200_000, np.random.RandomState(4))
    spread = quantiles[:, -1] - quantiles[:, 0]
    assert np.max(np.abs(np.quantile(draws, levels, axis=0).T - quantiles) / spread[:, None]) < 0.01
    # equal weights are the uniform mixture
    uniform = MixturePredictive(loc, scale, weights=np.full(6, 1 / 6))
    plain = MixturePredictive(loc, scale)
    np.testing.assert_allclose(uniform.logpdf(loc[0]), plain.logpdf(loc[0]), rtol=1e-12)
    np.testing.assert_allclose(uniform.ppf([0.1, 0.9]), plain.ppf([0.1, 0.9]), rtol=1e-9)
    np.testing.assert_allclose(uniform.epistemic_variance(), plain.epistemic_variance(), rtol=1e-12)


@pytest.mark.parametrize("weights", [[0.5, 0.5], [0.5, 0.6, -0.1], [0.2, 0.2, 0.2]], ids=["shape", "negative", "sum"])
def test_invalid_weights_are_refused(weights):
    with pytest.raises(ValueError, match="weights must be 3 non-negative numbers summing to 1"):
        MixturePredictive(np.zeros((3, 2)), np.ones((3, 2)), weights=np.array(weights))
