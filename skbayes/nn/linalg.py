"""Numerical linear algebra of the Gaussian-process modules.

References
----------
.. [RW2006] C. E. Rasmussen and C. K. I. Williams, "Gaussian processes for
   machine learning", MIT Press, 2006, appendix A.4 (Cholesky decomposition)
   and section 3.4.3 (jitter).
"""

import torch

__all__ = ["cholesky"]


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
