"""Numerical linear algebra: the Cholesky factor of the Gaussian-process
modules and the fast Walsh-Hadamard transform of structured weight matrices.

References
----------
.. [RW2006] C. E. Rasmussen and C. K. I. Williams, "Gaussian processes for
   machine learning", MIT Press, 2006, appendix A.4 (Cholesky decomposition)
   and section 3.4.3 (jitter).
.. [Fino1976] B. J. Fino and V. R. Algazi, "Unified matrix treatment of the
   fast Walsh-Hadamard transform", IEEE Transactions on Computers C-25(11),
   1976.
.. [Rossi2020] S. Rossi, S. Marmin and M. Filippone, "Walsh-Hadamard
   variational inference for Bayesian deep learning", NeurIPS 2020 (Rossi
   2022, chapter 4).
"""

import torch

__all__ = ["cholesky", "fast_walsh_hadamard"]


def cholesky(matrix, jitter=1e-6, max_tries=4):
    """Lower Cholesky factor of a symmetric positive (semi-)definite matrix.

    Adds ``jitter * mean(diag(matrix))`` to the diagonal, and if the
    factorisation still fails retries with ten times more, ``max_tries``
    times in all (the psd-safe Cholesky of GPyTorch and GPflow).

    Parameters
    ----------
    matrix : torch.Tensor of shape (n, n)
    jitter : float, default=1e-6
        First relative jitter. 0 first tries the matrix as it is, then the
        relative jitters 1e-6, 1e-5, ...
    max_tries : int, default=4
        Number of factorisations tried.

    Returns
    -------
    chol : torch.Tensor of shape (n, n)
        Lower-triangular, ``chol @ chol.T = matrix + j * mean(diag) * I``
        with j the first relative jitter that worked.

    Raises
    ------
    ValueError
        If the matrix is not positive definite even with the largest jitter;
        the message names the usual fixes.
    """
    scale = matrix.diagonal().mean().detach().clamp_min(torch.finfo(matrix.dtype).tiny)
    eye = torch.eye(matrix.shape[-1], dtype=matrix.dtype, device=matrix.device)
    if jitter > 0:
        jitters = [jitter * 10**k for k in range(max_tries)]
    else:
        jitters = [0.0] + [1e-6 * 10**k for k in range(max_tries - 1)]
    for relative in jitters:
        chol, info = torch.linalg.cholesky_ex(matrix + relative * scale * eye)
        if not info.any():
            return chol
    raise ValueError(
        f"The {matrix.shape[-1]}x{matrix.shape[-1]} covariance matrix is not positive "
        f"definite even with a jitter of {relative:.0e} x its mean diagonal "
        f"(dtype {str(matrix.dtype).removeprefix('torch.')}). Inducing points that "
        "(nearly) coincide, or length-scales far longer than the spread of X, cause "
        "this: use dtype='float64', fewer inducing points (n_inducing), or "
        "standardise X (e.g. with StandardScaler)."
    )


def fast_walsh_hadamard(x, normalized=False):
    r"""Product H x with the Walsh-Hadamard matrix, in O(D log D), along the last axis.

    H is the D x D Sylvester-Hadamard matrix, H_1 = [1] and
    H_{2n} = [[H_n, H_n], [H_n, -H_n]] (the order of
    ``scipy.linalg.hadamard``), so that H H = D I. The product is taken by
    log2(D) butterfly stages, each adding and subtracting the pairs of
    entries i and i + h within blocks of 2h ([Fino1976]_): O(D log D)
    operations and O(D) memory per row instead of the O(D^2) of a dense
    product, the transform that makes the structured weights
    W = S_1 H diag(g) H S_2 of WHVI cheap ([Rossi2020]_; Rossi 2022, section
    4.2). Built from torch operations only, so it is differentiable, batched
    over the leading axes, and runs on any device.

    Parameters
    ----------
    x : torch.Tensor of shape (..., D)
        D a power of two.
    normalized : bool, default=False
        Return H x / sqrt(D) (H / sqrt(D) is orthogonal and its own inverse).

    Returns
    -------
    y : torch.Tensor of shape (..., D)

    Raises
    ------
    ValueError
        If D is not a power of two.
    """
    size = x.shape[-1]
    if size < 1 or size & (size - 1):
        raise ValueError(f"The last axis of x must have a power-of-two length; got {size}.")
    batch = x.shape[:-1]
    h = 1
    while h < size:
        pairs = x.reshape(*batch, size // (2 * h), 2, h)
        first, second = pairs[..., 0, :], pairs[..., 1, :]
        x = torch.stack((first + second, first - second), dim=-2).reshape(*batch, size)
        h *= 2
    return x / size**0.5 if normalized else x
