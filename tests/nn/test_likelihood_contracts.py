"""Contracts that every likelihood of skbayes.nn.likelihoods meets, found by looking at the package.

Each is checked against a computation that does not use the likelihood's own
formula: its expectation under a Gaussian q(f) against a Monte-Carlo average
of its log-density over 200,000 draws of f; its density against scipy's
quadrature over y (it integrates to 1) or a sum over the classes (the
probabilities add to 1); its draws of y against its location and noise
variance. A likelihood added to the package is picked up here and fails
until :data:`CASES` says how to build it.
"""

import inspect

import numpy as np
import pytest
import torch
from scipy import integrate

from skbayes.nn import likelihoods

N_MC = 200_000


def _latent(shape, seed):
    rng = np.random.default_rng(seed)
    return torch.as_tensor(rng.normal(0.0, 1.0, shape)), torch.as_tensor(rng.uniform(0.05, 1.5, shape))


# class name -> (factory, observed values of 4 rows, latent shape of those rows, the classes or None)
CASES = {
    "GaussianLikelihood": (lambda: likelihoods.GaussianLikelihood(1, noise_std=0.7, dtype=torch.float64),
                           torch.tensor([[0.3], [2.0], [-0.5], [1.2]], dtype=torch.float64), (4, 1), None),
    "HeteroscedasticGaussianLikelihood": (lambda: likelihoods.HeteroscedasticGaussianLikelihood(1),
                                          torch.tensor([[0.3], [2.0], [-0.5], [1.2]], dtype=torch.float64),
                                          (4, 2), None),
    "StudentTLikelihood": (lambda: likelihoods.StudentTLikelihood(1, scale=0.5, df=5.0, dtype=torch.float64),
                           torch.tensor([[0.3], [2.0], [4.0], [1.2]], dtype=torch.float64), (4, 1), None),
    "BernoulliLikelihood": (likelihoods.BernoulliLikelihood,
                            torch.tensor([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0], [0.0, 1.0]], dtype=torch.float64),
                            (4, 2), None),
    "ContinuousBernoulliLikelihood": (likelihoods.ContinuousBernoulliLikelihood,
                                      torch.tensor([[0.3, 0.9], [0.0, 0.5], [1.0, 0.2], [0.7, 0.01]],
                                                   dtype=torch.float64), (4, 2), None),
    "BinaryLikelihood": (lambda: likelihoods.BinaryLikelihood("probit"),
                         torch.tensor([1.0, 0.0, 1.0, 0.0], dtype=torch.float64), (4,), (0, 1)),
    "CategoricalLikelihood": (lambda: likelihoods.CategoricalLikelihood(n_mc=N_MC),
                              torch.tensor([0, 2, 1, 2]), (4, 3), (0, 1, 2)),
    "SoftmaxLikelihood": (lambda: likelihoods.SoftmaxLikelihood(n_mc=N_MC),
                          torch.tensor([0, 2, 1, 2]), (4, 3), (0, 1, 2)),
    "RobustMaxLikelihood": (lambda: likelihoods.RobustMaxLikelihood(3, epsilon=0.05),
                            torch.tensor([0, 2, 1, 2]), (4, 3), (0, 1, 2)),
}


def _likelihood_classes():
    found = [getattr(likelihoods, name) for name in likelihoods.__all__]
    return sorted(
        (cls for cls in found if inspect.isclass(cls) and issubclass(cls, likelihoods.Likelihood)
         and cls not in (likelihoods.Likelihood, likelihoods.RegressionLikelihood)),
        key=lambda cls: cls.__name__,
    )


def _names():
    return [cls.__name__ for cls in _likelihood_classes()]


def test_every_likelihood_has_a_case():
    assert set(_names()) == set(CASES), "add the new likelihood to CASES"


@pytest.mark.parametrize("name", _names())
def test_expected_log_prob_is_the_monte_carlo_average_of_log_prob(name):
    factory, y, shape, _ = CASES[name]
    likelihood = factory()
    f_mean, f_var = _latent(shape, 0)
    if name == "HeteroscedasticGaussianLikelihood":  # two network outputs per target: no q of one value
        with pytest.raises(NotImplementedError, match="two network outputs"):
            likelihood.expected_log_prob(y, f_mean, f_var)
        return
    generator = torch.Generator().manual_seed(1)
    kwargs = {"generator": generator} if "generator" in inspect.signature(likelihood.expected_log_prob).parameters else {}
    with torch.no_grad():
        expected = likelihood.expected_log_prob(y, f_mean, f_var, **kwargs)
        draws = f_mean + f_var.sqrt() * torch.randn((N_MC, *shape), generator=torch.Generator().manual_seed(2),
                                                    dtype=f_mean.dtype)
        log_p = likelihood.log_prob(y, draws)
    assert expected.shape == log_p.shape[1:] == (4,)
    mc_mean, mc_se = log_p.mean(0), log_p.std(0) / np.sqrt(N_MC)
    # the likelihood's own Monte Carlo (the softmax's, N_MC draws) adds its own error of the same size
    np.testing.assert_array_less((expected - mc_mean).abs(), 6 * mc_se * (1 + bool(kwargs)) + 1e-6)


@pytest.mark.parametrize("name", _names())
def test_the_density_integrates_to_one(name):
    factory, y, shape, classes = CASES[name]
    likelihood = factory()
    f, _ = _latent(shape, 3)
    with torch.no_grad():
        if classes is not None:  # probabilities of the classes add to 1, row by row
            total = sum(likelihood.log_prob(torch.full_like(y, c), f).exp() for c in classes)
            np.testing.assert_allclose(total, 1.0, rtol=1e-10 if total.dtype == torch.float64 else 1e-6)
        elif name == "ContinuousBernoulliLikelihood":  # a density on [0, 1] per feature, and its mean by quadrature
            for row in range(4):
                for col in range(2):
                    def density(value, row=row, col=col):
                        point = torch.full((1, 1), value, dtype=torch.float64)
                        return float(likelihood.log_prob(point, f[row:row + 1, col:col + 1]).exp())

                    total, _ = integrate.quad(density, 0.0, 1.0, epsabs=1e-12, epsrel=1e-11)
                    mean, _ = integrate.quad(lambda v: v * density(v), 0.0, 1.0, epsabs=1e-12, epsrel=1e-11)
                    assert total == pytest.approx(1.0, abs=1e-8)
                    assert mean == pytest.approx(float(likelihood.mean(f[row, col])), abs=1e-8)
            draws = likelihood.rsample(f.expand(N_MC, 4, 2), torch.Generator().manual_seed(6))
            np.testing.assert_allclose(draws.mean(0), likelihood.mean(f), atol=6 * 0.3 / np.sqrt(N_MC))
            np.testing.assert_allclose(draws.var(0), likelihood.variance(f), rtol=0.05)
        elif name == "BernoulliLikelihood":  # 0/1 per feature: the 2^d outcomes of a row add to 1
            outcomes = [torch.tensor([[a, b]], dtype=torch.float64).expand(4, 2) for a in (0, 1) for b in (0, 1)]
            np.testing.assert_allclose(sum(likelihood.log_prob(x, f).exp() for x in outcomes), 1.0, rtol=1e-10)
        else:  # one target: integrate its density over y, row by row
            for row in range(4):
                def density(value, row=row):
                    point = torch.full((1, 1), value, dtype=torch.float64)
                    return float(likelihood.log_prob(point, f[row:row + 1]).exp())

                # over +-200 noise std around the location (the Student-t tails beyond hold < 1e-9 of the mass)
                centre = float(likelihood.location(f[row:row + 1]).reshape(()))
                width = 200 * float(likelihood.noise_variance(f[row:row + 1]).sqrt().reshape(()))
                total, _ = integrate.quad(density, centre - width, centre + width, points=[centre],
                                          epsabs=1e-11, epsrel=1e-10, limit=500)
                assert total == pytest.approx(1.0, abs=1e-7)


@pytest.mark.parametrize("name", [n for n in _names() if issubclass(getattr(likelihoods, n), likelihoods.RegressionLikelihood)])
def test_draws_of_y_have_the_location_and_the_noise_variance(name):
    factory, y, shape, _ = CASES[name]
    likelihood = factory()
    f, _ = _latent(shape, 4)
    with torch.no_grad():
        draws = likelihood.sample(f.expand(N_MC, *shape), np.random.default_rng(5))
        location, variance = likelihood.location(f), likelihood.noise_variance(f).expand_as(likelihood.location(f))
    np.testing.assert_allclose(draws.mean(0), location, atol=6 * float(variance.max().sqrt()) / np.sqrt(N_MC))
    np.testing.assert_allclose(draws.var(0), variance, rtol=0.05)
