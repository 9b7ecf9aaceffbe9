"""The fast Walsh-Hadamard transform against the dense Hadamard matrix (scipy.linalg.hadamard)."""

import numpy as np
import pytest
import torch
from scipy.linalg import hadamard

from skbayes.nn import fast_walsh_hadamard


@pytest.mark.parametrize("size", [1, 2, 4, 8, 64, 512])
def test_matches_the_dense_hadamard_matrix_batched(size):
    gen = torch.Generator().manual_seed(size)
    x = torch.randn(3, 5, size, generator=gen, dtype=torch.float64)
    expected = x.numpy() @ hadamard(size).T  # row-wise H x
    np.testing.assert_allclose(fast_walsh_hadamard(x).numpy(), expected, rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(
        fast_walsh_hadamard(x, normalized=True).numpy(), expected / np.sqrt(size), rtol=1e-12, atol=1e-10
    )


def test_normalized_transform_is_its_own_inverse_and_differentiable():
    x = torch.randn(4, 128, dtype=torch.float64, requires_grad=True)
    y = fast_walsh_hadamard(fast_walsh_hadamard(x, normalized=True), normalized=True)
    torch.testing.assert_close(y, x)
    # d/dx sum(w * Hx) = H^T w = H w (H is symmetric)
    w = torch.randn(4, 128, dtype=torch.float64)
    (fast_walsh_hadamard(x) * w).sum().backward()
    torch.testing.assert_close(x.grad, torch.from_numpy(w.numpy() @ hadamard(128)))


@pytest.mark.parametrize("size", [0, 3, 12, 100])
def test_rejects_lengths_that_are_not_powers_of_two(size):
    with pytest.raises(ValueError, match="power-of-two"):
        fast_walsh_hadamard(torch.zeros(2, size))
