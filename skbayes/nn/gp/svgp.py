r"""Sparse variational Gaussian process (SVGP) with a whitened q(u).

The latent function f ~ GP(c, k) (constant mean c) is summarised by its values
u = f(Z) at M inducing inputs Z. With L_zz = chol(K_zz) the inducing values are
whitened, u = L_zz v with p(v) = N(0, I), and the variational distribution is
q(v) = N(m, S), S = L L^T, L lower-triangular with a positive diagonal
([Hensman2015]_, section 3; [Matthews2017]_, section 3.4). Conditioning
p(f | u) on q gives independent Gaussian marginals q(f(x)) = N(mu, s^2) with
(Rossi 2022, eq. 6.7, in whitened form)

.. math::

    A = L_{zz}^{-1} K_{zx}, \qquad
    \mu = c + A^\top m, \qquad
    s^2 = k(x, x) - \mathrm{diag}(A^\top A) + \mathrm{diag}(A^\top S A).

The evidence lower bound is ([Hensman2013]_, section 3; Rossi 2022, eq. 6.2)

.. math::

    \mathcal L = \sum_{n=1}^N \mathbb E_{q(f_n)}[\log p(y_n \mid f_n)]
                 - \mathrm{KL}(q(v) \,\|\, \mathcal N(0, I)),

which splits over data points, so that a minibatch gives an unbiased estimate
(:func:`~skbayes.nn.negative_elbo`). For Gaussian noise the expectation is in
closed form, E_q[log N(y | f, sigma^2)] = log N(y | mu, sigma^2) - s^2 /
(2 sigma^2) (:meth:`~skbayes.nn.GaussianLikelihood.expected_log_prob`), and so is the optimal q(v) for fixed hyperparameters
([Titsias2009]_; Rossi 2022, eq. 6.6), see :meth:`SVGP.set_optimal_q_`; the
objective at that optimum, a function of Z and the hyperparameters only, is
:func:`collapsed_bound`.

Two objectives are implemented (:meth:`SVGP.expected_log_lik`). ``"vfe"`` is the
bound above, the *expectation of the log* of the likelihood under q(f_n),
whose conditional p(f_n | u) has variance k_nn - Q_nn. ``"fitc"`` is the
*log of the expectation* over the FITC conditional (Rossi 2022, eqs. 6.5 and
6.12): for a given u,

.. math::

    \log \mathbb E_{p(f_n \mid u)}[\mathcal N(y_n \mid f_n, \sigma^2)]
    = \log \mathcal N(y_n \mid \tilde\mu_n(u), \tilde\sigma_n^2 + \sigma^2),
    \qquad \tilde\mu_n(u) = c + a_n^\top v,\;
    \tilde\sigma_n^2 = k_{nn} - a_n^\top a_n,

which decomposes over the points. u (here v) keeps its Gaussian q and the
KL term, so the objective is E_q(v)[sum_n log N(y_n | mu~_n(v), beta_n)] -
KL(q || p) with beta_n = sigma^2 + sigma~_n^2: the FITC model, i.e. GP
regression with the heteroskedastic noise sigma^2 + diag(K_xx - Q_xx)
(Rossi 2022, eqs. 6.15-6.16; [Titsias2009]_, appendix C). For the optimal q
it equals the FITC log marginal likelihood log N(y | c, Q_xx + diag(K_xx -
Q_xx) + sigma^2 I) of [Snelson2006]_, and the predictive of eq. 6.7 is then
the FITC predictive (Rossi 2022, eq. 6.11).

References
----------
.. [Titsias2009] M. Titsias, "Variational learning of inducing variables in
   sparse Gaussian processes", AISTATS 2009.
.. [Hensman2013] J. Hensman, N. Fusi and N. D. Lawrence, "Gaussian processes
   for big data", UAI 2013.
.. [Hensman2015] J. Hensman, A. G. de G. Matthews, M. Filippone and
   Z. Ghahramani, "MCMC for variationally sparse Gaussian processes",
   NeurIPS 2015.
.. [Matthews2017] A. G. de G. Matthews, "Scalable Gaussian process inference
   using variational methods", PhD thesis, University of Cambridge, 2017.
.. [Snelson2006] E. Snelson and Z. Ghahramani, "Sparse Gaussian processes
   using pseudo-inputs", Advances in Neural Information Processing Systems 18,
   2006.
.. [Rossi2022] S. Rossi, "Improving scalability and inference in
   probabilistic deep models", PhD thesis, 2022, chapter 6.
.. [RW2006] C. E. Rasmussen and C. K. I. Williams, "Gaussian processes
   for machine learning", MIT Press, 2006.
.. [Salimbeni2018] H. Salimbeni, S. Eleftheriadis and J. Hensman,
   "Natural gradients in practice: non-conjugate variational inference
   in Gaussian process models", AISTATS 2018.
"""

import math

import torch
from torch import nn

from ..divergences import kl_standard_normal_mvn
from ..functional import inverse_softplus
from ..linalg import cholesky
from ..variational.scale_tril import raw_from_scale_tril, scale_tril_from_raw

__all__ = ["OBJECTIVES", "SVGP", "collapsed_bound"]

#: The training objectives of :meth:`SVGP.expected_log_lik`.
OBJECTIVES = ("vfe", "fitc")

# Relative jitter added to K_zz before its Cholesky factorisation.
_JITTER = {torch.float64: 1e-6, torch.float32: 1e-4}


def collapsed_bound(a_t, residual, k_diag, noise_var, objective="vfe"):
    r"""The objective maximised over q(v) in closed form: the collapsed bound of [Titsias2009]_, or the FITC evidence.

    With Q = A^T A (A = L_zz^{-1} K_zx, the whitened cross-covariance, given
    as its transpose) and the residual r = y - c, the VFE data term plus
    -KL(q || p) at the optimal q of :meth:`SVGP.set_optimal_q_` is
    ([Titsias2009]_, eq. 9; Rossi 2022, eq. 6.6)

    .. math::

        \mathcal L^* = \log \mathcal N(r \mid 0, Q + \Lambda)
            - \frac{1}{2\sigma^2} \operatorname{tr}(K_{xx} - Q),
        \qquad \Lambda = \sigma^2 I,

    and the FITC objective's is the FITC log marginal likelihood
    ([Snelson2006]_; Rossi 2022, eqs. 6.11 and 6.16), the same Gaussian
    term with Lambda = diag(sigma^2 + k_nn - q_nn) and no trace term. The
    Gaussian term is computed in O(N M^2) with the matrix determinant lemma
    and the Woodbury identity ([RW2006]_, eqs. A.9 and A.10): with
    B = I + A Lambda^{-1} A^T = L_B L_B^T and c = L_B^{-1} A Lambda^{-1} r,

    .. math::

        \log \mathcal N(r \mid 0, Q + \Lambda) = -\frac N2 \log 2\pi
            - \sum_m \log (L_B)_{mm} - \frac12 \sum_n \log \beta_n
            - \frac12 \left(r^\top \Lambda^{-1} r - c^\top c\right).

    As a function of the hyperparameters and Z it is the maximum over q of
    the uncollapsed objective (:meth:`SVGP.loss` times -N), so its gradient
    is that objective's at the optimal q (the envelope theorem): a gradient
    step on it is a step on the uncollapsed objective after a
    natural-gradient step of size one on q(v) ([Salimbeni2018]_, section 3).
    With Z = X and no jitter, the VFE bound is the exact log marginal
    likelihood log N(y | c, K_xx + sigma^2 I).

    Parameters
    ----------
    a_t : torch.Tensor of shape (N, M)
        A^T = K_xz L_zz^{-T}.
    residual : torch.Tensor of shape (N,)
        y - c.
    k_diag : torch.Tensor of shape (N,)
        The prior variances k(x_n, x_n).
    noise_var : torch.Tensor or float
        sigma^2, a scalar.
    objective : {"vfe", "fitc"}, default="vfe"

    Returns
    -------
    bound : torch.Tensor, scalar
        In nats, summed over the N rows (not divided by N).

    Raises
    ------
    ValueError
        If ``objective`` is not one of :data:`OBJECTIVES`, or the Cholesky of B fails.

    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}; got {objective!r}.")
    n = a_t.shape[0]
    cond_var = (k_diag - a_t.square().sum(1)).clamp_min(0.0)  # diag(K_xx - Q), as in SVGP.marginals
    beta = torch.as_tensor(noise_var, dtype=a_t.dtype, device=a_t.device).expand(n)
    if objective == "fitc":
        beta = beta + cond_var
    scaled = a_t / beta[:, None]  # Lambda^{-1} A^T
    b = scaled.mT @ a_t
    b = b + torch.eye(b.shape[0], dtype=b.dtype, device=b.device)
    chol_b = cholesky(b, jitter=0.0)
    c = torch.linalg.solve_triangular(chol_b, (scaled.mT @ residual)[:, None], upper=False)[:, 0]
    bound = -0.5 * (n * math.log(2 * math.pi) + beta.log().sum() + (residual.square() / beta).sum() - c.square().sum())
    bound = bound - torch.diagonal(chol_b).log().sum()
    if objective == "vfe":
        bound = bound - cond_var.sum() / (2 * beta[0])
    return bound


class SVGP(nn.Module):
    r"""Whitened sparse variational GP over one latent function.

    See the module docstring for the model. The module is built from shapes
    only; copy the initial inducing inputs into ``inducing_points`` and,
    optionally, set q to its optimum with :meth:`set_optimal_q_`.

    Parameters
    ----------
    kernel : torch.nn.Module
        Covariance function with ``forward(x1, x2) -> (n1, n2)`` and
        ``diag(x) -> (n,)``, e.g. :class:`~skbayes.nn.gp.kernels.RBFKernel`.
    n_inducing : int
        Number M of inducing points.
    n_features : int
        Input dimension d.
    n_latent : int or None, default=None
        None: one latent function, q(v) of shapes (M,) and (M, M). An int L:
        L independent latent functions f_1..f_L sharing the kernel and Z,
        each with its own whitened q(v_l) (mean of shape (L, M), scale of
        shape (L, M, M)) and its own constant mean; marginals then have a
        last axis of size L (the multi-output SVGP of [Hensman2015]_ used
        for multiclass classification and deep GP layers).
    mean : {"constant", "zero"}, default="constant"
        Prior mean function c of f.
    learn_inducing : bool, default=True
        Make Z a trainable parameter (otherwise a buffer).
    learn_mean : bool, default=True
        Make the constant mean trainable (only with ``mean="constant"``).
    jitter : float, optional
        Relative jitter of the Cholesky of K_zz (see :func:`~skbayes.nn.linalg.cholesky`);
        default 1e-6 in float64 and 1e-4 in float32.
    device, dtype : optional
        Where and in which precision the parameters live.

    Attributes
    ----------
    inducing_points : torch.Tensor of shape (M, d)
        Z, zeros until set.
    q_mean : torch.nn.Parameter of shape (M,) or (L, M)
        m, the mean of q(v); starts at 0 (q = prior).
    raw_q_scale_tril : torch.nn.Parameter of shape (M, M) or (L, M, M)
        Its strictly lower triangle is that of L, its diagonal is mapped
        through softplus, its upper triangle is unused.
    mean_constant : torch.Tensor, scalar or of shape (L,)
        c, starts at 0.

    Raises
    ------
    ValueError
        If ``mean`` is not ``"constant"`` or ``"zero"``; :meth:`loss` and
        :meth:`set_optimal_q_` raise it for an ``objective`` outside
        ``OBJECTIVES``.
    """

    def __init__(
        self,
        kernel,
        n_inducing,
        n_features,
        *,
        n_latent=None,
        mean="constant",
        learn_inducing=True,
        learn_mean=True,
        jitter=None,
        device=None,
        dtype=None,
    ):
        super().__init__()
        if mean not in ("constant", "zero"):
            raise ValueError(f"mean must be 'constant' or 'zero'; got {mean!r}.")
        factory = {"device": device, "dtype": dtype}
        self.kernel = kernel
        self.jitter = _JITTER.get(dtype or torch.get_default_dtype(), 1e-6) if jitter is None else jitter
        inducing = torch.zeros(n_inducing, n_features, **factory)
        if learn_inducing:
            self.inducing_points = nn.Parameter(inducing)
        else:
            self.register_buffer("inducing_points", inducing)
        batch = () if n_latent is None else (n_latent,)
        self.q_mean = nn.Parameter(torch.zeros(*batch, n_inducing, **factory))
        raw_one = inverse_softplus(1.0)
        self.raw_q_scale_tril = nn.Parameter(torch.eye(n_inducing, **factory).repeat(*batch, 1, 1) * raw_one)
        constant = torch.zeros(batch, **factory)
        if mean == "constant" and learn_mean:
            self.mean_constant = nn.Parameter(constant)
        else:
            self.register_buffer("mean_constant", constant)

    @property
    def n_inducing(self):
        """Number M of inducing points."""
        return self.q_mean.shape[-1]

    @property
    def n_latent(self):
        """Number L of latent functions, or None for a single one (unbatched shapes)."""
        return None if self.q_mean.ndim == 1 else self.q_mean.shape[0]

    @property
    def q_scale_tril(self):
        """L, lower-triangular with a positive diagonal, shape (M, M); S = L L^T."""
        return scale_tril_from_raw(self.raw_q_scale_tril)

    def chol_zz(self):
        """L_zz = chol(K_zz + jitter), shape (M, M).

        Where it fails, the jitter grows tenfold per try, up to ``max_jitter``
        (default 1000 times the default jitter; see ``jitter``).
        """
        z = self.inducing_points
        tries = 4
        max_jitter = getattr(self, "max_jitter", None)
        if max_jitter is not None and 0 < self.jitter < max_jitter:
            tries = 1 + math.ceil(math.log10(max_jitter / self.jitter) - 1e-9)
        return cholesky(self.kernel(z, z), self.jitter, max_tries=tries)

    def whitened_cross(self, x, chol_zz):
        """The whitened cross-covariance A = L_zz^{-1} K_zx of the whitened parametrisation.

        The conditional of f at x given the whitened inducing values v is
        N(A^T v, K_xx - A^T A) (Hensman et al. 2015, section 3), shared by the
        variational marginals and by the sampled sparse GP's conditionals.

        Parameters
        ----------
        x : torch.Tensor of shape (n, d)
        chol_zz : torch.Tensor of shape (M, M)
            :meth:`chol_zz`.

        Returns
        -------
        a : torch.Tensor of shape (M, n)
            A view of the transpose of an (n, M) solve.
        """
        return self._whitened_cross_t(x, chol_zz).mT

    def _whitened_cross_t(self, x, chol_zz):
        # A^T = K_xz L_zz^{-T}, shape (n, M), solved from the right: with the n rows leading, the
        # triangular solve and the products that follow run on contiguous rows (faster than
        # L_zz^{-1} K_zx on an (M, n) matrix, the same numbers up to round-off)
        kxz = self.kernel(x, self.inducing_points)
        return torch.linalg.solve_triangular(chol_zz.mT, kxz, upper=True, left=False)

    def marginals(self, x, chol_zz=None, q_scale_tril=None):
        """The three parts of the marginals q(f_n) = N(mu_n, cond_var_n + q_var_n).

        Parameters
        ----------
        x : torch.Tensor of shape (n, d)
        chol_zz : torch.Tensor of shape (M, M), optional
            A precomputed :meth:`chol_zz`, to share it across row blocks.
        q_scale_tril : torch.Tensor of shape (M, M) or (L, M, M), optional
            A precomputed :attr:`q_scale_tril`, to share it with :meth:`kl`.

        Returns
        -------
        mean : torch.Tensor of shape (n,), or (n, L) with ``n_latent``
            mu_n = c + a_n^T m (Rossi 2022, eq. 6.7).
        cond_var : torch.Tensor of shape (n,)
            k_nn - a_n^T a_n, the variance of p(f_n | u) (Rossi 2022,
            eq. 6.10), clipped at 0 against round-off; the same for every
            latent function.
        q_var : torch.Tensor of shape (n,), or (n, L) with ``n_latent``
            a_n^T S a_n, the variance that q(v) adds.
        """
        if chol_zz is None:
            chol_zz = self.chol_zz()
        if q_scale_tril is None:
            q_scale_tril = self.q_scale_tril
        a_t = self._whitened_cross_t(x, chol_zz)  # A^T, (n, M)
        cond_var = (self.kernel.diag(x) - a_t.square().sum(1)).clamp_min(0.0)
        b_t = a_t @ q_scale_tril  # B^T = A^T L, (n, M) or (L, n, M): A^T S A = B^T B
        if self.q_mean.ndim == 1:
            return a_t @ self.q_mean + self.mean_constant, cond_var, b_t.square().sum(1)
        return a_t @ self.q_mean.T + self.mean_constant, cond_var, b_t.square().sum(-1).T

    def predict_f(self, x, full_cov=False, chol_zz=None):
        """Mean and (co)variance of q(f) at the rows of ``x``.

        Parameters
        ----------
        x : torch.Tensor of shape (n, d)
        full_cov : bool, default=False
            Return the (n, n) covariance instead of the marginal variances.
        chol_zz : torch.Tensor of shape (M, M), optional
            A precomputed :meth:`chol_zz`, to share it across row blocks.

        Returns
        -------
        mean : torch.Tensor of shape (n,), or (n, L) with ``n_latent``
        var : torch.Tensor of shape (n,) or (n, L), or cov of shape (n, n) or (L, n, n)
            Marginal variances (clipped at 0 against round-off), or the
            covariance when ``full_cov``.
        """
        if not full_cov:
            mean, cond_var, q_var = self.marginals(x, chol_zz)  # Rossi 2022, eq. 6.7
            return mean, (cond_var if q_var.ndim == 1 else cond_var[:, None]) + q_var
        if chol_zz is None:
            chol_zz = self.chol_zz()
        a = self.whitened_cross(x, chol_zz)
        b = self.q_scale_tril.mT @ a
        mean = a.T @ self.q_mean.mT + self.mean_constant if self.q_mean.ndim > 1 else a.T @ self.q_mean + self.mean_constant
        return mean, self.kernel(x, x) - a.T @ a + b.mT @ b

    def expected_log_lik(self, x, y, likelihood, objective="vfe"):
        r"""Per-point data term of the VFE or the FITC objective.

        With q(f_n) = N(mu_n, s_n^2), s_n^2 = cond_var_n + q_var_n, where
        cond_var_n = k_nn - a_n^T a_n is the variance of p(f_n | u) and
        q_var_n = a_n^T S a_n the part due to q(v) (:meth:`marginals`), both
        are the Gaussian expectation of a Gaussian log-density, which the
        likelihood computes (:meth:`~skbayes.nn.GaussianLikelihood.expected_log_prob`);
        the objective decides which variances enter:

        ``"vfe"`` (expectation of the log; [Hensman2013]_, section 3; Rossi 2022,
        eq. 6.2): the whole variance s_n^2 is averaged over,

        .. math::

            \mathbb E_{q(f_n)}[\log \mathcal N(y_n \mid f_n, \sigma^2)]
            = \log \mathcal N(y_n \mid \mu_n, \sigma^2)
              - \frac{s_n^2}{2\sigma^2};

        ``"fitc"`` (log of the expectation over p(f_n | u), Rossi 2022, eqs. 6.5
        and 6.12, then the expectation over q(v)): the conditional variance
        joins the noise and only q_var_n is averaged over,

        .. math::

            \mathbb E_{q(v)}\big[\log \mathcal N(y_n \mid \tilde\mu_n(v),
            \beta_n)\big] = \log \mathcal N(y_n \mid \mu_n, \beta_n)
              - \frac{q\_var_n}{2\beta_n}, \qquad
            \beta_n = \sigma^2 + cond\_var_n,

        i.e. Rossi 2022, eq. 6.16 (the heteroskedastic form of [Titsias2009]_,
        appendix C). Both are exact (no Monte Carlo) and split over points.

        Parameters
        ----------
        x : torch.Tensor of shape (n, d)
        y : torch.Tensor of shape (n,)
        likelihood : GaussianLikelihood
            With one output; its noise variance is sigma^2.
        objective : {"vfe", "fitc"}, default="vfe"

        Returns
        -------
        expected_log_lik : torch.Tensor of shape (n,)
            In nats.

        Raises
        ------
        ValueError
            If ``objective`` is not one of :data:`OBJECTIVES`.
        """
        return self._expected_log_lik(x, y, likelihood, objective, self.q_scale_tril)

    def _expected_log_lik(self, x, y, likelihood, objective, q_scale_tril):
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}; got {objective!r}.")
        mean, cond_var, q_var = (t[:, None] for t in self.marginals(x, q_scale_tril=q_scale_tril))
        if objective == "vfe":
            return likelihood.expected_log_prob(y[:, None], mean, cond_var + q_var)
        return likelihood.expected_log_prob(y[:, None], mean, q_var, added_noise_var=cond_var)

    def loss(self, x, y, likelihood, n_data, objective="vfe"):
        r"""Per-datum negative objective of one minibatch.

        .. math::

            -\frac1{|B|} \sum_{n \in B} \ell_n
            + \frac{\mathrm{KL}(q(v) \,\|\, \mathcal N(0, I))}{N},

        with l_n from :meth:`expected_log_lik`: an unbiased estimate of
        minus the objective divided by N, whatever the batch size B
        ([Hensman2013]_; Rossi 2022, eq. 6.2, and eq. 6.16 for ``"fitc"``).

        Parameters
        ----------
        x, y, likelihood, objective
            The minibatch (B rows), as for :meth:`expected_log_lik`.
        n_data : int
            N, the number of rows the objective sums over.

        Returns
        -------
        loss : torch.Tensor, scalar
        """
        q_scale_tril = self.q_scale_tril  # built once, for the data term and the KL
        data = self._expected_log_lik(x, y, likelihood, objective, q_scale_tril)
        return -data.mean() + kl_standard_normal_mvn(self.q_mean, q_scale_tril) / n_data

    def collapsed_loss(self, x, y, noise_var, objective="vfe"):
        """Per-datum negative objective at the optimal q(v): -:func:`collapsed_bound` / N over all N rows.

        q(v) itself is not read: its optimum is implied (set it with
        :meth:`set_optimal_q_` after optimising the rest). Only valid when
        ``x`` holds every training row (the optimum needs all of them).

        Parameters
        ----------
        x : torch.Tensor of shape (N, d)
        y : torch.Tensor of shape (N,)
        noise_var : torch.Tensor or float
            Noise variance sigma^2.
        objective : {"vfe", "fitc"}, default="vfe"

        Returns
        -------
        loss : torch.Tensor, scalar
            Never above :meth:`loss` for the same rows and N (equal at the optimal q).
        """
        a_t = self._whitened_cross_t(x, self.chol_zz())
        residual = y - self.mean_constant
        return -collapsed_bound(a_t, residual, self.kernel.diag(x), noise_var, objective) / x.shape[0]

    def kl(self):
        """KL(N(m, S) || N(0, I)) in nats, a scalar, summed over the latent functions.

        See :func:`~skbayes.nn.divergences.kl_standard_normal_mvn`.
        """
        return kl_standard_normal_mvn(self.q_mean, self.q_scale_tril)

    @torch.no_grad()
    def set_optimal_q_(self, x, y, noise_var, block_size=4096, objective="vfe"):
        r"""Set q(v) to the optimum of the objective for the current Z and hyperparameters.

        Both data terms are, as functions of v, Gaussian log-likelihoods of
        the linear model y_n = c + a_n^T v + e_n, e_n ~ N(0, beta_n), with
        beta_n = sigma^2 for ``"vfe"`` and beta_n = sigma^2 + k_nn - a_n^T a_n
        for ``"fitc"``. The objective is maximised by that model's posterior
        ([Titsias2009]_; Rossi 2022, eq. 6.6 in whitened form, and eq. 6.11
        for FITC, with Lambda = diag(beta)):

        .. math::

            S = \left(I + A \Lambda^{-1} A^\top\right)^{-1}, \qquad
            m = S A \Lambda^{-1} (y - c).

        A Lambda^-1 A^T is accumulated over row blocks: O(N M^2) time,
        O(M^2 + M * block_size) memory.

        Parameters
        ----------
        x : torch.Tensor of shape (N, d)
        y : torch.Tensor of shape (N,)
        noise_var : float or torch.Tensor
            Noise variance sigma^2.
        block_size : int, default=4096
            Rows per block.
        objective : {"vfe", "fitc"}, default="vfe"

        Returns
        -------
        self : SVGP

        Raises
        ------
        ValueError
            If ``objective`` is unknown, or a Cholesky fails.
        """
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}; got {objective!r}.")
        chol_zz = self.chol_zz()
        precision = torch.zeros_like(chol_zz)
        projection = torch.zeros_like(self.q_mean)
        for start in range(0, x.shape[0], block_size):
            rows = x[start : start + block_size]
            a = self.whitened_cross(rows, chol_zz)
            weight = 1.0 / torch.as_tensor(noise_var, dtype=a.dtype, device=a.device).expand(rows.shape[0])
            if objective == "fitc":
                weight = 1.0 / (noise_var + (self.kernel.diag(rows) - a.square().sum(0)).clamp_min(0.0))
            precision += (a * weight) @ a.T
            projection += a @ (weight * (y[start : start + block_size] - self.mean_constant))
        precision += torch.eye(self.n_inducing, dtype=precision.dtype, device=precision.device)
        chol_precision = cholesky(precision, jitter=0.0)
        mean = torch.cholesky_solve(projection[:, None], chol_precision)[:, 0]
        scale_tril = cholesky(torch.cholesky_inverse(chol_precision), jitter=0.0)
        self.q_mean.copy_(mean)
        self.raw_q_scale_tril.copy_(raw_from_scale_tril(scale_tril))
        return self
