r"""The Gauss-Newton matrix of an MLP under a Gaussian likelihood, in three structures, and its Laplace posterior.

For an MLP f(x; theta) with k outputs and the likelihood
y_j ~ N(f_j(x), sigma_j^2), the generalised Gauss-Newton (GGN) matrix of the
negative log-likelihood of n rows is (Daxberger et al. 2021, eq. 5; Martens
2020)

.. math::

    H = \sum_i J_i^T \Lambda J_i, \qquad J_i = \partial f(x_i) / \partial\theta
    \ (k \times P), \quad \Lambda = \mathrm{diag}(1 / \sigma_j^2).

Write layer l as s_l = a_{l-1}^T W_l with a_{l-1} = [h_{l-1}, 1] its input
(the bias as a last row of W_l, shape (n_in + 1, n_out)) and
g_{l,ij} = \partial f_j(x_i) / \partial s_l its output gradient. Then the
Jacobian of f_j with respect to W_l is a_{l-1} g_{l,ij}^T, and the three
structures of the Laplace approximation are (Daxberger et al. 2021,
section 3.3):

- ``"diag"``: diag(H), per layer the (n_in + 1, n_out) matrix
  sum_i sum_j Lambda_j (a_i^2)(g_ij^2)^T;
- ``"kron"`` (KFAC; Martens & Grosse 2015, Ritter et al. 2018, eq. 5):
  the block of layer l is approximated by A_l (x) G_l, with
  A_l = sum_i a_i a_i^T and G_l = (1/n) sum_i sum_j Lambda_j g_ij g_ij^T,
  exact for a single row and for a linear model;
- ``"full"``: H itself, P x P (small networks).

With an isotropic prior N(0, delta_l^{-1} I) on layer l the posterior
precision is H + delta I. Each structure is held in an eigenbasis:
diag is its own; for KFAC, with A = Q_A diag(alpha) Q_A^T and
G = Q_G diag(beta) Q_G^T, A (x) G + delta I = (Q_A (x) Q_G)
diag(alpha beta^T + delta)(Q_A (x) Q_G)^T (the eigendecomposed KFAC
posterior of Ritter et al. 2018 and laplace-torch); full is diagonalised
by eigh. Draws, log-determinants and the GLM predictive variance
(Immer et al. 2021, eq. 5) then cost one rotation each.

References
----------
.. [Daxberger2021] E. Daxberger et al., "Laplace Redux - effortless Bayesian
   deep learning", NeurIPS 2021.
.. [Martens2015] J. Martens and R. Grosse, "Optimizing neural networks with
   Kronecker-factored approximate curvature", ICML 2015.
.. [Ritter2018] H. Ritter, A. Botev and D. Barber, "A scalable Laplace
   approximation for neural networks", ICLR 2018.
.. [Immer2021] A. Immer, M. Korzepa and M. Bauer, "Improving predictions of
   Bayesian neural nets via local linearization", AISTATS 2021.
"""

import math

import torch
from torch.nn import functional as F

from .functional import ACTIVATIONS, standard_normal

__all__ = ["LayerEigenbasis", "activation_derivative", "fisher_root", "ggn_eigenbases", "glm_predictive_variance",
           "laplace_log_evidence", "maximize_prior_precision", "mlp_jacobian_factors"]


def activation_derivative(activation, s):
    """The elementwise derivative of ``activation`` at the pre-activations ``s``, by autograd (detached)."""
    with torch.enable_grad():
        s = s.detach().requires_grad_(True)
        return torch.autograd.grad(ACTIVATIONS[activation](s).sum(), s)[0]


def mlp_jacobian_factors(x, weights, activation="relu"):
    """The MLP's outputs, each layer's inputs a_{l-1} and output gradients g_l of every row.

    Parameters
    ----------
    x : torch.Tensor of shape (n, n_features)
    weights : list of torch.Tensor
        Layer l of shape (n_in + 1, n_out), the bias as the last row.
    activation : str, default="relu"
        Applied after every hidden layer.

    Returns
    -------
    f : torch.Tensor of shape (n, k)
    inputs : list of torch.Tensor
        Per layer, a_{l-1} = [h_{l-1}, 1] of shape (n, n_in + 1).
    grads : list of torch.Tensor
        Per layer, g_{l,ij} = d f_j(x_i) / d s_l, shape (n, k, n_out).
    """
    inputs, pre = [], []
    h = x
    for l, w in enumerate(weights):
        a = torch.cat([h, torch.ones_like(h[:, :1])], dim=1)
        inputs.append(a)
        s = a @ w
        pre.append(s)
        h = ACTIVATIONS[activation](s) if l < len(weights) - 1 else s
    n, k = x.shape[0], weights[-1].shape[1]
    g = torch.eye(k, dtype=x.dtype, device=x.device).expand(n, k, k)
    grads = [g]
    for l in range(len(weights) - 1, 0, -1):
        g = (g @ weights[l][:-1].T) * activation_derivative(activation, pre[l - 1])[:, None]
        grads.append(g)
    return h, inputs, grads[::-1]


class LayerEigenbasis:
    """One block of a GGN in its eigenbasis: the precision Q diag(eigenvalues + delta) Q^T.

    For a layer's block under ``"diag"`` or ``"kron"``: ``eigenvalues`` of
    the layer's shape (n_in + 1, n_out), rotations ``q_in`` (Q_A) and
    ``q_out`` (Q_G), None for the identity (diag). For the whole network
    under ``"full"``: ``eigenvalues`` of shape (P,) and ``q_in`` the
    (P, P) eigenvectors, ``q_out`` None.
    """

    def __init__(self, eigenvalues, q_in=None, q_out=None):
        self.eigenvalues = eigenvalues.clamp_min(0.0)
        self.q_in, self.q_out = q_in, q_out

    def rotate(self, v):
        """Q v for coordinates v of shape ``(..., *eigenvalues.shape)`` in the eigenbasis."""
        if self.eigenvalues.dim() == 1:
            return v if self.q_in is None else v @ self.q_in.T
        if self.q_in is not None:
            v = self.q_in @ v
        return v if self.q_out is None else v @ self.q_out.T

    def to_eigenbasis(self, v):
        """Q^T v, the inverse of :meth:`rotate`."""
        if self.eigenvalues.dim() == 1:
            return v if self.q_in is None else v @ self.q_in
        if self.q_in is not None:
            v = self.q_in.T @ v
        return v if self.q_out is None else v @ self.q_out

    def log_det(self, delta):
        """The block's log-determinant, ``log det(H + delta I)``."""
        return torch.log(self.eigenvalues + delta).sum()

    def n_determined(self, delta):
        """gamma = sum lambda / (lambda + delta), the number of well-determined parameters (MacKay 1992)."""
        return (self.eigenvalues / (self.eigenvalues + delta)).sum()

    def sample(self, n_draws, delta, generator=None):
        """``n_draws`` draws of N(0, (H + delta I)^{-1}), shape ``(n_draws, *eigenvalues.shape)``."""
        z = standard_normal((n_draws, *self.eigenvalues.shape), self.eigenvalues, generator)
        return self.rotate(z * (self.eigenvalues + delta).rsqrt())

    def scaled(self, factor):
        """The block of ``factor`` times the matrix (e.g. the GGN at another noise level for one output)."""
        return LayerEigenbasis(self.eigenvalues * factor, self.q_in, self.q_out)

    def to(self, dtype):
        """A copy in ``dtype``."""
        cast = (lambda t: None if t is None else t.to(dtype))
        return LayerEigenbasis(self.eigenvalues.to(dtype), cast(self.q_in), cast(self.q_out))


def ggn_eigenbases(blocks, noise_precision, hessian="kron"):
    """The GGN of the rows of ``blocks`` in its eigenbases.

    Parameters
    ----------
    blocks : iterable of (inputs, grads)
        The rows in blocks, each as returned by :func:`mlp_jacobian_factors`
        (its ``inputs`` and ``grads``); their sums are accumulated, so that
        memory does not grow with the rows.
    noise_precision : torch.Tensor of shape (k,)
        Lambda_j = 1 / sigma_j^2.
    hessian : {"diag", "kron", "full"}, default="kron"

    Returns
    -------
    bases : list of LayerEigenbasis
        One per layer for ``"diag"`` and ``"kron"``, one for the whole
        network (the layers' weights flattened row-major and concatenated)
        for ``"full"``.

    Raises
    ------
    ValueError
        For another ``hessian``.
    """
    if hessian not in ("diag", "kron", "full"):
        raise ValueError(f"hessian must be 'diag', 'kron' or 'full'; got {hessian!r}.")
    root = noise_precision.sqrt()
    sums, n = None, 0
    for inputs, grads in blocks:
        scaled = [g * root[:, None] for g in grads]  # sqrt(Lambda_j) g_ij
        if hessian == "diag":
            terms = [torch.einsum("ia,ijb->ab", a.square(), g.square()) for a, g in zip(inputs, scaled)]
        elif hessian == "kron":
            terms = [t for a, g in zip(inputs, scaled)
                     for t in (a.T @ a, g.reshape(-1, g.shape[-1]).T @ g.reshape(-1, g.shape[-1]))]
        else:
            jac = _flat_jacobian(inputs, scaled)  # (n, k, P)
            jac = jac.reshape(-1, jac.shape[-1])
            terms = [jac.T @ jac]
        sums = terms if sums is None else [s + t for s, t in zip(sums, terms)]
        n += inputs[0].shape[0]
    if hessian == "diag":
        return [LayerEigenbasis(d) for d in sums]
    if hessian == "kron":
        bases = []
        for a_sum, g_sum in zip(sums[::2], sums[1::2]):
            alpha, q_a = torch.linalg.eigh(a_sum)
            beta, q_g = torch.linalg.eigh(g_sum / n)
            bases.append(LayerEigenbasis(alpha.clamp_min(0)[:, None] * beta.clamp_min(0)[None], q_a, q_g))
        return bases
    eigval, eigvec = torch.linalg.eigh(sums[0])
    return [LayerEigenbasis(eigval, eigvec)]


def _flat_jacobian(inputs, grads):
    """J_i of every output, the layers' vec(a_i g_ij^T) row-major and concatenated: shape (n, k, P)."""
    n, k = grads[0].shape[:2]
    return torch.cat([torch.einsum("ia,ijb->ijab", a, g).reshape(n, k, -1) for a, g in zip(inputs, grads)], dim=-1)


def _is_full(bases):
    """Whether ``bases`` is the one basis of ``hessian="full"`` (flat eigenvalues over all the weights)."""
    return len(bases) == 1 and bases[0].eigenvalues.dim() == 1


def _layer_blocks(bases, weights):
    """Each basis with the squared norm of its weights and its number of parameters."""
    if _is_full(bases):  # one block for the network
        return [(bases[0], sum(w.square().sum() for w in weights), bases[0].eigenvalues.numel())]
    return [(b, w.square().sum(), w.numel()) for b, w in zip(bases, weights)]


def laplace_log_evidence(log_likelihood, weights, bases, prior_precision):
    r"""The Laplace approximation of log p(y | delta, sigma) at the MAP weights (Immer et al. 2021, eq. 4).

    .. math::

        \log p(y \mid \theta_*) + \sum_l \Big[\frac{P_l}{2}\log\delta_l - \frac{\delta_l}{2}\|\theta_{*l}\|^2\Big]
        - \frac12 \log |H + \mathrm{diag}(\delta)|,

    the Gaussian prior's and the Laplace approximation's (2 pi)^{P/2} cancelling.

    Parameters
    ----------
    log_likelihood : torch.Tensor
        Scalar, log p(y | theta_*) of the rows the GGN was computed from (nats).
    weights : list of torch.Tensor
        The MAP layers, (n_in + 1, n_out) each.
    bases : list of LayerEigenbasis
        From :func:`ggn_eigenbases`.
    prior_precision : torch.Tensor
        delta_l, one per block (per layer for ``"diag"``/``"kron"``, one for ``"full"``).
    """
    total = log_likelihood
    for (basis, sq_norm, size), delta in zip(_layer_blocks(bases, weights), prior_precision):
        total = total + 0.5 * size * torch.log(delta) - 0.5 * delta * sq_norm - 0.5 * basis.log_det(delta)
    return total


def maximize_prior_precision(weights, bases, prior_precision, max_iter=300, tol=1e-8, bounds=(1e-8, 1e8)):
    """The prior precisions maximising :func:`laplace_log_evidence`, by MacKay's fixed point per block.

    The evidence's derivative in delta_l vanishes where delta_l
    times the squared norm of theta_l equals gamma_l = sum lambda / (lambda + delta_l) (MacKay 1992;
    Bishop 2006, eq. 3.92 with the MAP weights held fixed, the post-hoc
    tuning of Immer et al. 2021); iterated from ``prior_precision`` until
    the relative change is below ``tol``, within ``bounds``.

    Returns
    -------
    prior_precision : torch.Tensor, one per block
    n_iter : int
    """
    blocks = _layer_blocks(bases, weights)
    deltas = prior_precision.clone()
    for n_iter in range(1, int(max_iter) + 1):
        new = torch.stack([basis.n_determined(d) / sq.clamp_min(1e-300) for (basis, sq, _), d in zip(blocks, deltas)])
        new = new.clamp(*bounds)
        done = bool(((new - deltas).abs() <= tol * deltas).all())
        deltas = new
        if done:
            break
    return deltas, n_iter


def glm_predictive_variance(inputs, grads, bases, prior_precision):
    """The linearised (GLM) predictive's variance of f, J(x) (H + delta)^{-1} J(x)^T, shape (n, k).

    Immer et al. (2021), eq. 5.

    ``inputs`` and ``grads`` of the rows x (:func:`mlp_jacobian_factors`);
    ``bases`` and ``prior_precision`` as :func:`laplace_log_evidence`.
    """
    if _is_full(bases):  # J_j in the eigenbasis
        v = bases[0].to_eigenbasis(_flat_jacobian(inputs, grads))
        return (v.square() / (bases[0].eigenvalues + prior_precision[0])).sum(-1)
    total = 0.0
    for a, g, basis, delta in zip(inputs, grads, bases, prior_precision):
        a_rot = a if basis.q_in is None else a @ basis.q_in  # (n, n_in + 1): Q_A^T a
        g_rot = g if basis.q_out is None else g @ basis.q_out  # (n, k, n_out): Q_G^T g
        total = total + torch.einsum("ia,ab,ijb->ij", a_rot.square(), 1.0 / (basis.eigenvalues + delta), g_rot.square())
    return total


def fisher_root(likelihood, f):
    """The square root of the Fisher information of a regression likelihood's outputs, per row: shape (n, w).

    The Fisher information is diagonal in the network's outputs f (n, w) for
    the regression likelihoods, and is the Λ_i of the GGN (Daxberger et al.
    2021, eq. 5; Martens 2020):

    - Student-t with scale s and nu degrees of freedom, for its location:
      (nu + 1) / ((nu + 3) s^2) (Lange et al. 1989);
    - heteroscedastic Gaussian, outputs (mu, r) with sigma = softplus(r + c)
      + sigma_min: 1 / sigma^2 for mu and 2 sigmoid(r + c)^2 / sigma^2 for r
      (the Fisher of sigma, 2 / sigma^2, through d sigma / d r);
    - homoscedastic Gaussian: 1 / sigma^2.
    """
    n = f.shape[0]
    from .likelihoods import StudentTLikelihood

    if isinstance(likelihood, StudentTLikelihood):
        df, scale = likelihood.df.detach().reshape(-1).to(f), likelihood.scale.detach().reshape(-1).to(f)
        return ((df + 1) / ((df + 3) * scale**2)).sqrt().expand(n, -1)
    if getattr(likelihood, "heteroscedastic", False):
        k = likelihood.n_outputs
        raw = f[:, k:] + likelihood.shift
        sigma = F.softplus(raw) + likelihood.min_std
        return torch.cat([1.0 / sigma, math.sqrt(2.0) * torch.sigmoid(raw) / sigma], dim=1)
    return likelihood.noise_variance().detach().reshape(-1).to(f).rsqrt().expand(n, -1)
