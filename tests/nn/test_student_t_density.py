"""The Student-t likelihood's log-density against scipy and torch.distributions (value for value)."""

import numpy as np
import torch
from scipy.stats import t as student_t

from skbayes.nn import StudentTLikelihood


def test_log_prob_matches_scipy_and_torch_distributions():
    likelihood = StudentTLikelihood(n_outputs=2, n_members=3, df=5.0, dtype=torch.float64)
    with torch.no_grad():
        likelihood.raw_df.add_(torch.tensor([[[-1.0, 0.5]], [[0.0, 2.0]], [[1.5, -0.5]]], dtype=torch.float64))
        likelihood.raw_scale.add_(torch.tensor([[[0.3, -0.2]], [[0.0, 0.1]], [[-0.4, 0.6]]], dtype=torch.float64))
    gen = torch.Generator().manual_seed(0)
    f = torch.randn(3, 7, 2, generator=gen, dtype=torch.float64)
    y = torch.randn(7, 2, generator=gen, dtype=torch.float64) * 3
    log_prob = likelihood.log_prob(y, f)  # (3, 7), summed over the two outputs
    df, scale = likelihood.df.detach().numpy(), likelihood.scale.detach().numpy()
    expected = student_t.logpdf(y.numpy(), df, loc=f.numpy(), scale=scale).sum(-1)
    np.testing.assert_allclose(log_prob.detach().numpy(), expected, rtol=1e-12)
    # the same values, bit for bit, as the distribution object the predictive uses
    np.testing.assert_array_equal(log_prob.detach().numpy(), likelihood.distribution(f).log_prob(y).sum(-1).detach().numpy())
