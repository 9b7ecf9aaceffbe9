r"""The Laplace approximation of a network's last layer, with its evidence (Daxberger et al. 2021; MacKay 1992).

At a maximum a posteriori (MAP) fit of an MLP, fix the hidden layers and
write the outputs as f(x) = W^T phi(x), phi(x) = [h(x), 1] the last hidden
layer's activations with a constant for the bias (P = width + 1 values), W
of shape (P, k). Under the Gaussian likelihood y_j | x ~ N(f_j(x),
sigma_j^2) and the prior W_{:, j} ~ N(0, delta_j^{-1} I), the log posterior of
column j is quadratic, so its Laplace approximation is exact
(Daxberger et al. 2021, eqs. 3-4, with the generalised Gauss-Newton equal
to the Hessian for a linear-Gaussian layer):

.. math::

    A_j = \delta_j I + \Phi^T \Phi / \sigma_j^2, \qquad
    m_j = A_j^{-1} \Phi^T y_j / \sigma_j^2, \qquad
    W_{:, j} \mid y \sim N(m_j, A_j^{-1}),

and the linearised (GLM) predictive is N(phi(x)^T m_j, phi(x)^T A_j^{-1}
phi(x) + sigma_j^2), exact given phi (Immer et al. 2021, eq. 5). The
log marginal likelihood of column j (the Laplace evidence, also exact here;
Bishop 2006, eq. 3.86) is

.. math::

    \log p(y_j \mid \delta_j, \sigma_j^2) = \frac{P}{2}\log\delta_j
      - \frac{n}{2}\log(2\pi\sigma_j^2) - \frac{\|y_j - \Phi m_j\|^2}{2\sigma_j^2}
      - \frac{\delta_j}{2}\|m_j\|^2 - \frac12 \log|A_j|,

maximised over (delta_j, sigma_j^2) post hoc (Immer et al. 2021,
"Scalable marginal likelihood estimation", section 3), which with no hidden
layer is the evidence maximum of Bayesian linear regression that
scikit-learn's :class:`~sklearn.linear_model.BayesianRidge` finds.

References
----------
.. [Daxberger2021] E. Daxberger, A. Kristiadi, A. Immer, R. Eschenhagen,
   M. Bauer and P. Hennig, "Laplace Redux - effortless Bayesian deep
   learning", NeurIPS 2021.
.. [Immer2021] A. Immer, M. Korzepa and M. Bauer, "Improving predictions of
   Bayesian neural nets via local linearization", AISTATS 2021.
.. [MacKay1992] D. J. C. MacKay, "Bayesian interpolation", Neural
   Computation 4(3), 1992.
.. [Bishop2006] C. M. Bishop, "Pattern recognition and machine learning",
   Springer 2006, section 3.5.
"""

import torch

from .linalg import cholesky

__all__ = ["held_out_noise_variance", "last_layer_log_evidence", "last_layer_posterior",
           "maximize_last_layer_evidence", "noise_floor"]

# Bounds of the evidence maximisation, which can run off to a degenerate end with few rows: the prior
# precision within [1e-8, 1e8], the noise variance at least 1e-6 of each output's variance and 1e-10.
_MIN_PRECISION, _MAX_PRECISION = 1e-8, 1e8
_NOISE_FLOOR = 1e-6
_MIN_NOISE = 1e-10
_TINY = 1e-300


def _check(phi, y):
    if phi.dim() != 2 or y.dim() != 2 or phi.shape[0] != y.shape[0]:
        raise ValueError(f"phi must be (n, P) and y (n, k) with the same n; got {tuple(phi.shape)} and {tuple(y.shape)}.")


def last_layer_posterior(phi, y, noise_var, prior_precision):
    """The Gaussian posterior of each output's last-layer weights: means (P, k) and square roots of the covariances.

    Parameters
    ----------
    phi : torch.Tensor of shape (n, P)
        Features of the training rows, a constant column included for the bias.
    y : torch.Tensor of shape (n, k)
    noise_var, prior_precision : torch.Tensor of shape (k,)
        sigma_j^2 and delta_j.

    Returns
    -------
    mean : torch.Tensor of shape (P, k)
        m_j = A_j^{-1} Phi^T y_j / sigma_j^2.
    cov_factor : torch.Tensor of shape (k, P, P)
        Square roots S_j of the covariances, S_j S_j^T = A_j^{-1}
        (S_j = L_j^{-T} with L_j the Cholesky factor of A_j, upper triangular).

    Raises
    ------
    ValueError
        If phi is not (n, P) and y (n, k) with the same n.
    """
    _check(phi, y)
    chol_a, mean = _factor_and_mean(phi, y, noise_var, prior_precision)
    mean = mean.T
    # A^{-1} = L^{-T} L^{-1}: S = L^{-T} is a square root, without inverting A itself
    eye = torch.eye(phi.shape[1], dtype=phi.dtype, device=phi.device).expand_as(chol_a)
    return mean, torch.linalg.solve_triangular(chol_a, eye, upper=False).transpose(-2, -1)


def _factor_and_mean(phi, y, noise_var, prior_precision):
    """Cholesky factors L_j of A_j = delta_j I + Phi^T Phi / sigma_j^2, shape (k, P, P), and m_j, shape (k, P).

    Exact when A_j factorises; a jitter on its diagonal only when round-off
    makes it fail (:func:`skbayes.nn.linalg.cholesky`, e.g. a single row).
    """
    gram = phi.T @ phi
    eye = torch.eye(phi.shape[1], dtype=phi.dtype, device=phi.device)
    chol_a = torch.stack([cholesky(gram / v + d * eye, jitter=0.0) for v, d in zip(noise_var, prior_precision)])
    rhs = (phi.T @ y).T[..., None] / noise_var[:, None, None]  # (k, P, 1)
    return chol_a, torch.cholesky_solve(rhs, chol_a)[..., 0]


def noise_floor(y):
    """The smallest noise variance of each output, shape (k,): 1e-6 of y's variance, and at least 1e-10."""
    return (_NOISE_FLOOR * y.var(dim=0, correction=0)).clamp_min(_MIN_NOISE)


def last_layer_log_evidence(phi, y, noise_var, prior_precision):
    """log p(y_j | delta_j, sigma_j^2) of each output, shape (k,) (the module's equation; Bishop 2006, eq. 3.86).

    Parameters and errors as :func:`last_layer_posterior`; the result is in nats, in the units of y.
    """
    _check(phi, y)
    n, p = phi.shape
    chol_a, mean = _factor_and_mean(phi, y, noise_var, prior_precision)  # mean (k, P)
    resid = (y - phi @ mean.T).square().sum(0)
    log_det_a = 2 * torch.diagonal(chol_a, dim1=-2, dim2=-1).log().sum(-1)
    return (0.5 * p * prior_precision.log() - 0.5 * n * torch.log(2 * torch.pi * noise_var)
            - 0.5 * resid / noise_var - 0.5 * prior_precision * mean.square().sum(-1) - 0.5 * log_det_a)


def maximize_last_layer_evidence(phi, y, noise_var, prior_precision, learn_noise=True, max_iter=300, tol=1e-8):
    """The evidence-maximising prior precision (one, shared by the outputs) and noise variances, by MacKay's fixed point.

    gamma_j = sum_i lambda_i / (delta + lambda_i) with lambda_i the eigenvalues
    of Phi^T Phi / sigma_j^2 (the number of well-determined weights of output
    j), then delta <- sum_j gamma_j / sum_j ||m_j||^2 (one prior for the
    layer) and sigma_j^2 <- ||y_j - Phi m_j||^2 / (n - gamma_j)
    (MacKay 1992; Bishop 2006, eqs. 3.91-3.95), iterated from the
    given values until both change by less than ``tol`` relatively; the
    updates of scikit-learn's ``BayesianRidge``.

    Parameters
    ----------
    phi, y : see :func:`last_layer_posterior`
    noise_var, prior_precision : torch.Tensor of shape (k,)
        Starting values (> 0); the returned precision has k equal entries.
    learn_noise : bool, default=True
        Update sigma^2 too; otherwise keep the given one and maximise over delta alone.
    max_iter : int, default=300
    tol : float, default=1e-8

    Returns
    -------
    noise_var, prior_precision : torch.Tensor of shape (k,)
    n_iter : int

    Raises
    ------
    ValueError
        If phi is not (n, P) and y (n, k) with the same n.
    """
    _check(phi, y)
    n = phi.shape[0]
    eigval, eigvec = torch.linalg.eigh(phi.T @ phi)
    eigval = eigval.clamp_min(0)
    proj = eigvec.T @ (phi.T @ y)  # (P, k): Phi^T y in the eigenbasis
    noise_var, prior_precision = noise_var.clone(), prior_precision.clone()
    for n_iter in range(1, int(max_iter) + 1):
        lam = eigval[:, None] / noise_var[None]  # (P, k)
        # m in the eigenbasis: (delta + lam)^{-1} Phi^T y / sigma^2
        m_eig = proj / noise_var[None] / (prior_precision[None] + lam)
        gamma = (lam / (prior_precision[None] + lam)).sum(0)
        mean = eigvec @ m_eig
        resid = (y - phi @ mean).square().sum(0)
        new_precision = (gamma.sum() / m_eig.square().sum().clamp_min(_TINY)).clamp(_MIN_PRECISION, _MAX_PRECISION)
        new_precision = new_precision.expand_as(prior_precision)
        new_noise = noise_var
        if learn_noise:  # floored: with n <= gamma the data leave no residual to estimate it from
            new_noise = torch.maximum(resid / (n - gamma).clamp_min(1.0), noise_floor(y))
        done = bool(((new_precision - prior_precision).abs() <= tol * prior_precision).all()
                    and ((new_noise - noise_var).abs() <= tol * noise_var).all())
        prior_precision, noise_var = new_precision, new_noise
        if done:
            break
    return noise_var, prior_precision, n_iter


def held_out_noise_variance(phi, y, mean, cov_factor):
    """The noise variance under which the predictive matches held-out rows' squared errors on average.

    Under the predictive N(phi^T m_j, phi^T Sigma_j phi + sigma_j^2), the
    expected squared error of a row is phi^T Sigma_j phi + sigma_j^2; the
    moment estimate over held-out rows is
    sigma_j^2 = mean_i [(y_ij - phi_i^T m_j)^2 - phi_i^T Sigma_j phi_i],
    floored at 1e-6 of the rows' variance of y_j.

    Parameters
    ----------
    phi : torch.Tensor of shape (n, P)
        Features of rows the posterior was not computed from.
    y : torch.Tensor of shape (n, k)
    mean, cov_factor : torch.Tensor
        As returned by :func:`last_layer_posterior`.

    Returns
    -------
    noise_var : torch.Tensor of shape (k,)

    Raises
    ------
    ValueError
        If phi is not (n, P) and y (n, k) with the same n.
    """
    _check(phi, y)
    epistemic = (phi @ cov_factor).square().sum(-1).T  # (n, k)
    estimate = ((y - phi @ mean).square() - epistemic).mean(0)
    return torch.maximum(estimate, noise_floor(y))
