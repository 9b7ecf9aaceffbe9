"""SparseGPRegressor: sparse variational Gaussian process regression (SVGP)."""

from numbers import Real

import numpy as np
import torch
from scipy.stats import norm
from sklearn.base import RegressorMixin
from sklearn.gaussian_process.kernels import Sum, WhiteKernel
from sklearn.utils import Bunch, check_random_state
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from .._docstrings import fill_doc
from .._param_validation import N_DRAWS, Interval, StrOptions, _fit_context, validate_method_params
from ..base import PredictiveRegressorMixin, target_scaling
from .._predictive import MixturePredictive, student_t_scale_mixture
from ..nn import GaussianLikelihood, StudentTLikelihood, cholesky
from .._sklearn_kernels import from_sklearn_kernel
from .._training import Callback
from ..nn.gp.kernels import WhiteNoise
from . import _bsgp
from ._base import SPARSE_GP_CONSTRAINTS, BaseSparseGP

# Largest X for the joint (n, n) covariance of return_cov and sample_y (~200 MB in float64).
_MAX_JOINT_ROWS = 5000
# Initial noise standard deviation, in standardised target units, when learned.
_NOISE_INIT = 0.1
# Relative jitter of the Cholesky of K_zz (SVGP.jitter, 1e-6 in float64) of a fit on the collapsed bound. The
# jitter is a nugget in Q_xx = K_xz (K_zz + jitter I)^-1 K_zx: it lowers the bound by about
# tr(K_xx - Q_xx) / (2 sigma^2), which pushed the learned noise up on nearly noise-free data (277 x 5 rows,
# noise std 0.01, Z = X: the bound at the exact GP's hyperparameters is 412.9 with 1e-6, 427.2 with 1e-8,
# and the exact log marginal likelihood 427.4; test log density 0.033 nats per row below the exact GP's with
# 1e-6, 0.0004 with 1e-8). Where the Cholesky fails it still escalates tenfold up to 1e-3 (SVGP.max_jitter).
_COLLAPSED_JITTER = {torch.float64: 1e-8}
# Rows per block of the Student-t predictive (100 precisions x rows per array: 8 MB in float64).
_T_BLOCK_ROWS = 10_000


def _white_terms(kernel):
    """The WhiteKernel summands of ``kernel`` (it may be a sum of sums); raises for one elsewhere."""
    if isinstance(kernel, Sum):
        return _white_terms(kernel.k1) + _white_terms(kernel.k2)
    if isinstance(kernel, WhiteKernel):
        return [kernel]
    for name, value in kernel.get_params().items():
        if isinstance(value, WhiteKernel):
            raise ValueError(
                f"A WhiteKernel is supported only as a term added to the kernel (the observation "
                f"noise); got it inside {type(kernel).__name__} in {kernel!r}."
            )
    return []


class _WhiteNoiseLikelihood(GaussianLikelihood):
    """Gaussian likelihood whose noise variance is a WhiteKernel's noise_level (in the model's units)."""

    def __init__(self, white):
        torch.nn.Module.__init__(self)
        self.white = white  # shared with the kernel; parameters() lists it once

    @property
    def noise_std(self):
        return self.white.noise_level().sqrt().reshape(1)


class _StopWhenConverged(Callback):
    """Ends the loop once the :class:`skbayes.nn.LoopLBFGS` it drives has converged."""

    def on_epoch_end(self, state):
        if state.optimizer.converged:
            state.stop = True


def minibatch_loss(module, x, y, n_data, objective="vfe"):
    """Per-datum negative objective of one minibatch (Hensman et al. 2013, divided by N).

    Parameters
    ----------
    module : torch.nn.ModuleDict
        With a ``"gp"`` (:class:`skbayes.nn.SVGP`) and a
        ``"likelihood"`` (:class:`skbayes.nn.GaussianLikelihood`).
    x : torch.Tensor of shape (batch_size, n_features)
    y : torch.Tensor of shape (batch_size,)
    n_data : int
        Number of training rows N; the KL is divided by N, not batch_size.
    objective : {"vfe", "fitc"}, default="vfe"
        See :meth:`skbayes.nn.SVGP.expected_log_lik`.

    Returns
    -------
    loss : torch.Tensor, scalar
        ``-(mean over the batch of the per-point data term) + KL / N``
        (:meth:`skbayes.nn.SVGP.loss`).
    """
    return module["gp"].loss(x, y, module["likelihood"], n_data, objective)


@fill_doc(target_shape="(n_samples,)", target_mismatch="or X and\ny different lengths.")
class SparseGPRegressor(RegressorMixin, PredictiveRegressorMixin, BaseSparseGP):
    """Sparse variational Gaussian process regression (SVGP).

    A Gaussian process f ~ GP(c, k) with Gaussian (or Student-t) observation noise, made
    scalable by M inducing points Z: the posterior is approximated by
    q(u) = N(m, S) over u = f(Z), whitened [Hensman2015]_, and q, Z, the kernel
    hyperparameters and the noise are fitted by maximising the evidence
    lower bound [Hensman2013]_ (or the FITC objective, [Rossi2022]_) on
    minibatches, with Adam or natural-gradient steps for q, so the cost per
    step is O(batch_size M^2 + M^3) whatever the number of rows. By default,
    when every row fits in one batch (up to 1024 rows) and the noise is
    Gaussian, q is instead kept at its closed-form optimum and the
    resulting collapsed bound ([Titsias2009]_, eq. 9) is maximised over Z,
    the hyperparameters and the noise by L-BFGS ([NocedalWright2006]_), at
    O(N M^2 + M^3) per evaluation. With ``Z = X`` the collapsed bound is
    the exact log marginal likelihood, so ``n_inducing >= n_samples`` gives
    exact GP regression with type-II maximum-likelihood hyperparameters,
    as ``GaussianProcessRegressor``.

    Read more in ``doc/sparse_gp.md``.

    Parameters
    ----------
    kernel : {"rbf", "matern12", "matern32", "matern52"} or sklearn kernel, default="rbf"
        Covariance function. A string is an alias of a scikit-learn kernel
        expression at its initial values: ``"rbf"`` is ``ConstantKernel(1.0)
        * RBF(np.ones(n_features))``, one length-scale per feature (ARD, 1 in
        the units of X) and a signal variance of 1 in the units the model
        works in (the variance of y with ``normalize_y``), and the Matérn
        strings replace ``RBF`` by ``Matern(np.ones(n_features), nu)`` with
        nu = 1/2, 3/2, 5/2 ([RW2006]_, eqs. 4.9 and 4.14); its values are
        softplus-parameterised, without bounds, and the sampled sparse GP
        (``inference="sghmc"``) puts its hyperpriors on them. For other
        initial values pass the expression itself (e.g.
        ``ConstantKernel(2.0) * RBF(0.5)``). A
        ``sklearn.gaussian_process.kernels.Kernel``, as for
        ``GaussianProcessRegressor``: sums and products of
        ``ConstantKernel``, ``RBF``, ``Matern`` (nu 0.5, 1.5, 2.5, inf),
        ``RationalQuadratic``, ``ExpSineSquared`` and ``DotProduct``, with
        isotropic or per-feature length-scales, plus at most one added
        ``WhiteKernel``, which is the observation noise (its
        ``noise_level`` is the noise variance; it then sets the noise and
        ``noise_std`` is ignored). Training starts at the kernel's
        hyperparameter values; ``*_bounds="fixed"`` keeps a hyperparameter
        fixed, and other bounds (lo, hi) are kept by a sigmoid between
        log(lo) and log(hi) (softplus above lo when hi is infinite, see
        :class:`skbayes.nn.gp.kernels.BoundedPositive`). As in
        ``GaussianProcessRegressor``, values and bounds are in the units of X
        and of the targets the model works in: standardised y with
        ``normalize_y=True`` (``ConstantKernel(1.0)`` is then the variance of
        y), y itself otherwise. The fitted kernel is ``kernel_``; with a
        kernel object ``length_scale_`` and ``signal_std_`` are None. Any
        other kernel class raises a ValueError that names it.
    n_inducing : int, default=256
        Number M of inducing points; capped at the number of rows. Cost per
        step grows as M^2 (M^3 for the Cholesky of K_zz).
    inducing_init : {"kmeans", "random"}, default="kmeans"
        Initial Z: the centres of ``MiniBatchKMeans`` on X, or M rows of X
        drawn without replacement. When ``n_inducing >= n_samples`` both use
        X itself, and the model can be exact.
    learn_hyperparameters : bool, default=True
        Optimise the kernel's hyperparameters and the constant mean. False
        keeps them at their initial values, like
        ``GaussianProcessRegressor(optimizer=None)`` (a ``WhiteKernel``'s
        noise included; ``noise_std="learn"`` is still learned); q(u) is
        then still fitted.
    noise : {"homoscedastic", "student_t"}, default="homoscedastic"
        The observation noise model p(y | f):

        - ``"homoscedastic"``: Gaussian, N(y | f, sigma^2); every objective
          and both inference objects.
        - ``"student_t"``: robust GP regression, St(y | f, sigma, nu) with
          the scale sigma of ``noise_std`` and nu > 2 degrees of freedom
          learned from 4 ([Lange1989]_; :class:`skbayes.nn.StudentTLikelihood`).
          Its expected log-likelihood under q(f) is taken by Gauss-Hermite
          quadrature (no closed form), so it takes the ELBO
          (``SparseVariational(objective="vfe")``) and not the FITC
          objective, no ``WhiteKernel`` (the noise is the likelihood's) and
          no sampled posterior; q(u) is left where the optimiser ends (the
          closed-form optimum of ``"homoscedastic"`` is Gaussian-only). The
          predictive distribution of y is the Gaussian q(f) convolved with
          the t, computed as a mixture of Gaussians over the t's precisions
          (``skbayes._predictive.student_t_scale_mixture``): its
          log density, quantiles and intervals are exact to ~1e-7.
    noise_std : "learn" or float, default="learn"
        Observation noise standard deviation sigma (the Student-t's scale
        with ``noise="student_t"``). ``"learn"`` learns it (starting at 0.1
        in standardised units); a float fixes it, in the units of y.
    prior_mean : {"constant", "zero"}, default="constant"
        Prior mean c of f: a learned constant (starting at the mean of the
        targets the model sees) or zero. With ``normalize_y`` zero is the
        mean of y.
    normalize_y : bool, default=True
        Standardise y before fitting; every output is in the units of y.
    inference : {"variational", "sghmc"}, SparseVariational or SampledSparseGP, default="variational"
        How the posterior is approximated. ``"variational"``
        (:class:`skbayes.inference.SparseVariational` at its defaults): the
        variational sparse GP described above; the object holds the
        objective (``"vfe"``, the bound of [Hensman2013]_, or ``"fitc"``,
        the log-of-expectation objective of [Rossi2022]_, eqs. 6.5, 6.12 and
        6.16, whose optimum over q(u) is the FITC marginal likelihood
        [Snelson2006]_), the optimiser (``"auto"``: L-BFGS on the collapsed
        bound, [Titsias2009]_, eq. 9, where every row is in one batch and
        the noise is Gaussian, else Adam; ``"adam"``; or natural gradients
        for q(u), [Salimbeni2018]_) and the training loop's
        ``learning_rate_init``, ``max_iter``, ``tol`` and
        ``n_iter_no_change``; an L-BFGS fit counts one L-BFGS iteration as
        an epoch of ``max_iter``, ``n_iter_`` and ``loss_curve_`` and stops
        at L-BFGS's own tolerances (see
        :class:`~skbayes.inference.SparseVariational`). Its ``n_mc_train``
        must stay ``"auto"``: both objectives are in closed form.
        ``"sghmc"`` (:class:`skbayes.inference.SampledSparseGP` at its
        defaults): the Bayesian sparse GP (BSGP) of [Rossi2022]_, section
        6.3: the whitened inducing values, the length-scales, the signal
        variance, the inducing inputs (with ``start``'s ``learn_inducing``) and the
        noise (with ``noise_std="learn"``) are sampled jointly from the
        posterior of eq. 6.17 (the FITC log-of-expectation likelihood) with
        log-normal hyperpriors, and predictions average the FITC
        conditionals of the kept samples (see ``doc/bayesian_sparse_gp.md``).
        The chains start from the object's variational ``start``, each with v
        drawn from the optimal q(v), then follow the sampler's own schedule
        of epochs. It needs a string kernel; ``learn_hyperparameters=False``
        keeps the kernel fixed; ``warm_start`` and ``partial_fit`` do not
        apply. The object is cloned, never changed; the clone is
        ``inference_``.
    batch_size : int or "auto", default="auto"
        Minibatch size; ``"auto"`` is ``min(1024, n_samples)``.
    warm_start : bool, default=False
        Make the next ``fit`` continue from the fitted model instead of
        initialising a new one: the module (q(u), the inducing points, the
        hyperparameters and the noise) and the y standardisation are kept,
        and only the optimiser starts afresh (with the current
        ``inference``'s settings). The parameters that shape the model
        (``kernel``, ``n_inducing``, ``learn_hyperparameters``, ``noise``,
        ``noise_std``, ``prior_mean``, ``normalize_y``, the ``objective``
        and ``learn_inducing`` of ``inference``, ``device``,
        ``dtype``) and the number of features must be those of the fit it
        continues; otherwise ``fit`` starts afresh. ``loss_curve_`` and
        ``n_iter_`` then describe the latest ``fit`` only.
    callbacks : list of skbayes._training.Callback or None, default=None
        Called during training, after the stopping rule (see
        :class:`skbayes._training.Callback`); ``partial_fit`` calls them too,
        for its one epoch.
    random_state : int, RandomState instance or None, default=None
        Seeds the inducing-point initialisation and the minibatch order; the
        global torch seed is never touched.
    %(verbose)s
    %(device)s
    dtype : {"float32", "float64"} or None, default=None
        Precision of the computation. None is float64 on the CPU, whatever
        the dtype of X (GP linear algebra needs it), and float32 on
        accelerators.

    Attributes
    ----------
    module_ : torch.nn.ModuleDict
        The fitted ``"gp"`` (:class:`skbayes.nn.SVGP`) and
        ``"likelihood"`` (:class:`skbayes.nn.GaussianLikelihood`, or
        :class:`skbayes.nn.StudentTLikelihood` with ``noise="student_t"``),
        which work in standardised target units.
    inducing_points_ : ndarray of shape (`n_inducing_`, n_features)
        Fitted inducing inputs Z, in the units of X.
    n_inducing_ : int
        Number of inducing points used, ``min(n_inducing, n_samples)``.
    kernel_ : sklearn kernel
        With a kernel object: a kernel of the same structure with the
        fitted hyperparameter values (units of X and y, the ``WhiteKernel``
        holding the fitted noise variance), so that ``print(model.kernel_)``
        reads as for ``GaussianProcessRegressor``. With a string kernel:
        ``ConstantKernel(s^2) * RBF(l) + WhiteKernel(sigma^2)`` (``Matern``
        for the Matérn strings) with the fitted values, in the units the
        model works in (standardised y with ``normalize_y``, as
        ``GaussianProcessRegressor``'s ``kernel_``), so that
        ``GaussianProcessRegressor(kernel=model.kernel_, optimizer=None)``
        is the exact GP with the fitted hyperparameters. With
        ``noise="student_t"`` the string kernel's ``kernel_`` has no
        ``WhiteKernel`` (the noise is not Gaussian: no exact GP matches
        it). Absent after a fit with a sampled posterior (the
        hyperparameters are a mixture).
    length_scale_ : ndarray of shape (n_features,) or None
        Fitted length-scales, in the units of X (None with a kernel object).
    signal_std_ : float or None
        Fitted standard deviation of f, in the units of y (None with a
        kernel object).
    noise_std_ : float
        Fitted observation noise standard deviation (the Student-t's scale
        with ``noise="student_t"``), in the units of y. A Python float,
        because the model has a single output (the multi-output
        ``BayesianMLPRegressor.noise_std_`` is an ndarray of shape
        (n_outputs,)).
    noise_df_ : float or None
        Fitted degrees of freedom nu of the Student-t noise; None with
        ``noise="homoscedastic"``.
    loss_curve_ : list of float
        Per-datum negative objective (nats) of each epoch, in standardised
        units (of each L-BFGS iteration, at its start, for a fit on the
        collapsed bound); each ``partial_fit`` call appends one value.
    %(n_iter_)s
    n_seen_ : int
        Training rows seen: ``n_samples`` after ``fit``, the running total
        over ``partial_fit`` calls. It is the N of the objective.
    best_loss_ : float
        Lowest epoch loss.
    inference_ : SparseVariational or SampledSparseGP
        The inference object of the last fit (a clone of ``inference``, or
        the object an alias stands for).
    inference_diagnostics_ : dict
        Only with a ``SampledSparseGP``: ``"rhat"``, the largest split
        R-hat over the chains of the training log-likelihoods and the log
        hyperparameters, ``"rhat_log_lik"`` and ``"rhat_hyperparameters"``
        (the same split over those two groups), and ``"n_kept_samples"``
        (all chains). With a sampled posterior ``length_scale_``, ``signal_std_`` and
        ``noise_std_`` are posterior means (of the length-scales, of the
        variances), and ``inducing_points_`` is the last kept sample of Z.
    %(torch_estimator_attributes)s

    See Also
    --------
    sklearn.gaussian_process.GaussianProcessRegressor : exact GP, O(n^3).
    skbayes.BayesianMLPRegressor : Bayesian neural network regression.

    Notes
    -----
    The minibatch loss is the negative ELBO divided by N:
    ``-(1/B) sum_batch E_q[log N(y_i | f_i, sigma^2)] + KL(q(v) || p(v)) / N``,
    with the expectation in closed form, log N(y_i | mu_i, sigma^2) -
    s_i^2 / (2 sigma^2). Before training, q(u) is set to its optimum for the
    initial Z and hyperparameters, and after training to its optimum for the
    fitted ones ([Titsias2009]_, one O(N M^2) pass each): the last step can
    only raise the ELBO, and removes the jitter of about ``learning_rate_init``
    that Adam leaves in q(u). With ``noise="student_t"`` the expectation is
    taken by Gauss-Hermite quadrature, q(u) starts at the Gaussian optimum
    with the t's scale as the noise, and is left where the optimiser ends.

    With ``SparseVariational(optimizer="auto")`` (the default), Gaussian
    noise and every row in one batch, ``fit`` does not move q(u) during
    training: the loss is the negative collapsed bound divided by N, the
    ELBO at the optimal q(u) ([Titsias2009]_, eq. 9; the FITC log marginal
    likelihood for ``objective="fitc"``), whose gradient is the ELBO's at
    that q. Adam on (m, L) moves q(u) about ``learning_rate_init`` per
    step, so q lags its optimum and the learned noise stays too large on
    nearly noise-free data; the deterministic collapsed bound is instead
    maximised by L-BFGS with a strong Wolfe line search
    ([NocedalWright2006]_, algorithms 7.5 and 3.5), typically in tens of
    iterations, and q(u) is then set to its optimum. A ``partial_fit``
    after such a fit continues with a fresh Adam on the ELBO. The
    variational start of a sampled posterior (``inference="sghmc"``) keeps
    Adam on the ELBO: its chains follow the FITC likelihood with
    hyperpriors, not the bound's maximum.

    Standardise X (e.g. ``StandardScaler`` in a pipeline): the initial
    length-scales and the k-means initialisation assume comparable features.

    ``partial_fit`` streams minibatches: its first call on an unfitted
    estimator initialises everything from that batch, the y
    standardisation and the k-means inducing points included, and every
    call takes one pass over its rows, with the N of the objective set to
    ``n_seen_``, the running total of rows seen. The closed-form q(u) is
    only used at initialisation there (it would need all rows).

    Not implemented yet: multi-output y.

    References
    ----------
    .. [Titsias2009] M. Titsias, "Variational learning of inducing variables
       in sparse Gaussian processes", AISTATS 2009.
    .. [Hensman2013] J. Hensman, N. Fusi and N. D. Lawrence, "Gaussian
       processes for big data", UAI 2013.
    .. [NocedalWright2006] J. Nocedal and S. J. Wright, "Numerical
       optimization", 2nd ed., Springer, 2006, chapters 3 and 7.
    .. [Hensman2015] J. Hensman, A. G. de G. Matthews, M. Filippone and
       Z. Ghahramani, "MCMC for variationally sparse Gaussian processes",
       NeurIPS 2015.
    .. [RW2006] C. E. Rasmussen and C. K. I. Williams, "Gaussian processes
       for machine learning", MIT Press, 2006.
    .. [Rossi2022] S. Rossi, "Improving scalability and inference in
       probabilistic deep models", PhD thesis, 2022, chapter 6.
    .. [Snelson2006] E. Snelson and Z. Ghahramani, "Sparse Gaussian
       processes using pseudo-inputs", NeurIPS 2006.
    .. [Lange1989] K. L. Lange, R. J. A. Little and J. M. G. Taylor,
       "Robust statistical modeling using the t distribution", JASA 84(408),
       1989.
    .. [Salimbeni2018] H. Salimbeni, S. Eleftheriadis and J. Hensman,
       "Natural gradients in practice: non-conjugate variational inference
       in Gaussian process models", AISTATS 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from skbayes import SparseGPRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.uniform(-3, 3, size=(500, 1))
    >>> y = np.sin(2 * X[:, 0]) + 0.1 * rng.randn(500)
    >>> from skbayes.inference import SparseVariational
    >>> model = SparseGPRegressor(
    ...     n_inducing=20, inference=SparseVariational(max_iter=100), random_state=0).fit(X, y)
    >>> mean, std = model.predict(X[:3], return_std=True)
    >>> mean.shape, std.shape
    ((3,), (3,))
    """

    _parameter_constraints = {
        **SPARSE_GP_CONSTRAINTS,
        "noise": [StrOptions({"homoscedastic", "student_t"})],
        "noise_std": [StrOptions({"learn"}), Interval(Real, 0, None, closed="neither")],
        "prior_mean": [StrOptions({"constant", "zero"})],
        "normalize_y": ["boolean"],
    }
    # the objectives are in closed form: no Monte-Carlo draws
    _variational_forms = {"monte_carlo": False}

    def __init__(
        self,
        kernel="rbf",
        *,
        n_inducing=256,
        inducing_init="kmeans",
        learn_hyperparameters=True,
        noise="homoscedastic",
        noise_std="learn",
        prior_mean="constant",
        normalize_y=True,
        inference="variational",
        batch_size="auto",
        warm_start=False,
        callbacks=None,
        random_state=None,
        verbose=False,
        device="auto",
        dtype=None,
    ):
        self.kernel = kernel
        self.n_inducing = n_inducing
        self.inducing_init = inducing_init
        self.learn_hyperparameters = learn_hyperparameters
        self.noise = noise
        self.noise_std = noise_std
        self.prior_mean = prior_mean
        self.normalize_y = normalize_y
        self.inference = inference
        self.batch_size = batch_size
        self.warm_start = warm_start
        self.callbacks = callbacks
        self.random_state = random_state
        self.verbose = verbose
        self.device = device
        self.dtype = dtype

    # ------------------------------------------------------------------ fitting
    def _build_module(self, X, n_inducing, seed, y):
        """The SVGP and likelihood, with Z initialised and q(u) at its optimum."""
        factory = {"device": self.device_, "dtype": self._dtype}
        if not isinstance(self.kernel, str):
            return self._build_module_from_kernel(X, n_inducing, seed, y, factory)
        kernel = self._string_kernel(X.shape[1], factory)
        return self._finish_module(X, n_inducing, seed, y, kernel, self._noise_likelihood(factory), factory)

    def _noise_likelihood(self, factory):
        learn_noise = self.noise_std == "learn"
        noise = _NOISE_INIT if learn_noise else max(self.noise_std / self._y_scale, 1e-5)
        if self.noise == "student_t":
            return StudentTLikelihood(1, scale=noise, learn_scale=learn_noise, **factory)
        return GaussianLikelihood(1, noise, learn_noise=learn_noise, **factory)

    @property
    def _student_t(self):
        return isinstance(self.module_["likelihood"], StudentTLikelihood)

    def _resolve_inference(self):
        method = super()._resolve_inference()
        if self.noise == "student_t":
            if _bsgp.is_sampling(method):
                raise ValueError(
                    "noise='student_t' has no sampled posterior (the chains' FITC likelihood is Gaussian); use "
                    "inference='variational'."
                )
            self._variational().check_supported(type(self).__name__ + " with noise='student_t'", objectives=("vfe",),
                                                monte_carlo=False)
            if not isinstance(self.kernel, str) and _white_terms(self.kernel):
                raise ValueError(
                    "noise='student_t' puts the noise in the likelihood; a WhiteKernel would add Gaussian noise "
                    f"too. Remove it from kernel={self.kernel!r} (noise_std sets or learns the t's scale)."
                )
        return method

    def _build_module_from_kernel(self, X, n_inducing, seed, y, factory):
        """The SVGP and likelihood for a scikit-learn kernel object (see ``kernel``)."""
        whites = _white_terms(self.kernel)
        if len(whites) > 1:
            raise ValueError(f"At most one WhiteKernel term is supported; got {len(whites)} in {self.kernel!r}.")
        if whites and not isinstance(self.kernel, Sum):
            raise ValueError(f"The kernel needs a term besides the WhiteKernel; got {self.kernel!r}.")
        module = from_sklearn_kernel(self.kernel, learn=self.learn_hyperparameters, **factory)
        white = [m for m in module.modules() if isinstance(m, WhiteNoise)]
        likelihood = _WhiteNoiseLikelihood(white[0]) if white else self._noise_likelihood(factory)
        return self._finish_module(X, n_inducing, seed, y, module, likelihood, factory)

    def _finish_module(self, X, n_inducing, seed, y, kernel, likelihood, factory):
        """The SVGP of ``kernel``, Z initialised and q(u) at its optimum; the ModuleDict."""
        gp = self._svgp(X, n_inducing, seed, kernel, factory, mean=self.prior_mean)
        with torch.no_grad():
            if self.prior_mean == "constant":
                gp.mean_constant.fill_(float(y.mean()))
            # q(u) starts at the Gaussian optimum (with the t's scale as the noise for noise="student_t")
            noise_std = likelihood.scale if isinstance(likelihood, StudentTLikelihood) else likelihood.noise_std
            gp.set_optimal_q_(
                self._to_tensor(X), self._to_tensor(y), noise_std[0] ** 2,
                objective=self._variational().objective,
            )
        return torch.nn.ModuleDict({"gp": gp, "likelihood": likelihood})

    def _validate_training_data(self, X, y, reset):
        X, y = validate_data(self, X, y, reset=reset, multi_output=True, y_numeric=True, dtype=(np.float64, np.float32))
        if y.ndim == 2 and y.shape[1] != 1:
            raise ValueError(
                f"SparseGPRegressor supports a single target, but y has {y.shape[1]} "
                "columns; fit one model per column (e.g. with "
                "sklearn.multioutput.MultiOutputRegressor)."
            )
        return X, column_or_1d(y, warn=True).astype(np.float64)

    _warm_start_params = ("kernel", "n_inducing", "learn_hyperparameters", "noise", "noise_std",
                          "prior_mean", "normalize_y", "device", "dtype")

    @property
    def _signal_scale(self):
        return self._y_scale

    def _string_kernel_as_sklearn(self, module):
        """ConstantKernel * RBF / Matern + WhiteKernel(noise variance), in the model's (standardised) units.

        Without the WhiteKernel for Student-t noise, which is not a kernel term.
        """
        if self._student_t:
            return super()._string_kernel_as_sklearn(module)
        noise_var = float(self.module_["likelihood"].noise_std[0]) ** 2
        return super()._string_kernel_as_sklearn(module) + WhiteKernel(noise_var)

    def _prepare_targets(self, y, reset):
        """Standardised y; ``reset`` fits the scaling (Python floats, so that float32 predictions stay float32)."""
        if reset:
            y_mean, y_scale = target_scaling(y[:, None], self.normalize_y)
            self._y_mean, self._y_scale = float(y_mean[0]), float(y_scale[0])
        return (y - self._y_mean) / self._y_scale

    def _minibatch_loss(self, x, y, n_data):
        return minibatch_loss(self.module_, x, y, n_data, self._variational().objective)

    def _collapsed_loss(self, x, y):
        """-(collapsed bound) / N of all N rows: the objective at the optimal q(u) (:meth:`skbayes.nn.SVGP.collapsed_loss`)."""
        noise_var = self.module_["likelihood"].noise_std[0] ** 2
        return self.module_["gp"].collapsed_loss(x, y, noise_var, self._variational().objective)

    def _collapsed_parameters(self):
        """The trained parameters other than q(u): those of the collapsed bound."""
        gp = self.module_["gp"]
        q = {id(gp.q_mean), id(gp.raw_q_scale_tril)}
        return [p for p in self.module_.parameters() if p.requires_grad and id(p) not in q]

    def _fits_collapsed(self, n_samples):
        """Whether ``fit`` maximises the collapsed bound by L-BFGS (``SparseVariational(optimizer="auto")``).

        It applies with Gaussian noise, every row in one batch (the optimal
        q(u) needs all of them) and something besides q(u) to learn (else
        the closed-form q(u) set at the end of ``fit`` is the whole answer,
        and the loop runs Adam on the ELBO as with ``"adam"``).
        """
        return (self._variational().optimizer == "auto" and not self._student_t
                and self._batch_size(n_samples) >= n_samples and bool(self._collapsed_parameters()))

    def _train_variational(self, X_t, y_t):
        """``fit``'s variational training over all rows: L-BFGS on the collapsed bound, or the loop's optimiser.

        L-BFGS (Nocedal and Wright 2006) on -(collapsed bound) / N of
        Titsias (2009, eq. 9; the FITC evidence for ``"fitc"``), one
        iteration per epoch of the shared loop (its callbacks, divergence
        check and ``tol`` / ``n_iter_no_change`` rule apply per iteration),
        stopped by :class:`skbayes.nn.LoopLBFGS`'s tests. q(u) is not among
        its parameters: ``fit`` sets it to its optimum afterwards. The
        optimiser kept for ``partial_fit`` is then a fresh one of
        ``make_optimizer`` (Adam). The SVGP's relative jitter is lowered to
        :data:`_COLLAPSED_JITTER` (float64) first. Returns the loop's result.
        """
        n_samples = X_t.shape[0]
        if not self._fits_collapsed(n_samples):
            return self._train(X_t, y_t, n_samples, self._shuffle_seed)
        gp = self.module_["gp"]
        jitter = _COLLAPSED_JITTER.get(gp.inducing_points.dtype, gp.jitter)
        if jitter < gp.jitter:  # escalating where the Cholesky fails up to the default's 1000 x, as before
            gp.max_jitter, gp.jitter = gp.jitter * 1e3, jitter
        lbfgs = self._variational().make_lbfgs(self._collapsed_parameters(),
                                               lambda: self._collapsed_loss(X_t, y_t))
        try:
            return self._fit_loop(lbfgs.evaluate, lbfgs, n_samples, shuffle_seed=self._shuffle_seed,
                                  batch_size=n_samples, callbacks=[_StopWhenConverged()])
        finally:
            self._optimizer = self._make_optimizer()

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit q(u), the inducing points and the hyperparameters to the data.

        With ``warm_start=True`` and a fitted model, training continues from
        it (see ``warm_start``); otherwise the model is initialised afresh.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs (standardise them, e.g. with ``StandardScaler``).
        y : array-like of shape (n_samples,)
            Targets; a single column of shape (n_samples, 1) is ravelled.

        Returns
        -------
        self : SparseGPRegressor
            The fitted estimator.

        Raises
        ------
        ValueError
            On NaN/inf or wrongly shaped input, y with several columns, a
            diverging loss or a failed Cholesky (the message says what to
            change).

        Warns
        -----
        ConvergenceWarning
            If the stopping rule is not met in ``max_iter`` epochs; with a
            ``SampledSparseGP(SGHMC(...))``, if the chains have not mixed
            (``inference_diagnostics_["rhat"]`` above 1.1; the message names
            the fix).
        """
        X, y = self._validate_training_data(X, y, reset=True)
        if _bsgp.is_sampling(self._resolve_inference()):
            method = _bsgp.check_sampling_method(self)
            y = self._initialise(X, y)  # device, dtype, y scaling, n_inducing_, the initial model
            X_t, y_t = self._to_tensor(X), self._to_tensor(y)
            # The chains start from the variational fit (the thesis collects its samples after an optimisation):
            # the loop's optimiser on the ELBO (Adam for "auto" too), not L-BFGS on the collapsed bound.
            self._train(X_t, y_t, X.shape[0], self._shuffle_seed)
            self.noise_df_ = None
            return self._sample_posterior(method, X_t, y_t)
        y = self._continue(y) if self._can_warm_start(X, y) else self._initialise(X, y)
        n_samples = X.shape[0]
        X_t, y_t = self._to_tensor(X), self._to_tensor(y)
        result = self._train_variational(X_t, y_t)
        if not self._student_t:
            with torch.no_grad():  # the exact maximiser over q for the final Z and hyperparameters
                noise_var = self.module_["likelihood"].noise_std[0] ** 2
                self.module_["gp"].set_optimal_q_(X_t, y_t, noise_var, objective=self._variational().objective)
        self._store_training_result(result, n_seen=n_samples)
        self._set_fitted_hyperparameters()
        return self

    @available_if(_bsgp.streams)
    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y):
        """Update the model with one pass over a batch of rows (streaming).

        The first call (on an estimator that was never fitted, or whose fit
        was sampled) initialises the model from this batch as ``fit`` does:
        the y standardisation
        (``normalize_y``), the inducing points (k-means or random rows of
        this batch; ``n_inducing_ = min(n_inducing, len(X))``) and q(u) at
        its closed-form optimum for this batch. Every call, the first
        included, then takes one pass over its rows in minibatches of
        ``batch_size`` with the objective's N set to ``n_seen_``, the running
        total of rows seen so far (this call's included): each minibatch
        loss estimates the objective of all rows seen, divided by N,
        assuming the stream is exchangeable. The optimiser state (Adam's
        moments) carries over between calls. After ``fit``, ``partial_fit``
        continues from the fitted model with N = n_samples + len(X).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            A batch of training inputs (standardised like the others).
        y : array-like of shape (n_samples,)
            Its targets.

        Returns
        -------
        self : SparseGPRegressor
            The updated estimator.

        Raises
        ------
        ValueError
            On NaN/inf or wrongly shaped input, a feature count that differs
            from earlier calls, y with several columns or a diverging loss.
        """
        first = not hasattr(self, "module_") or _bsgp.is_sampled(self)
        X, y = self._validate_training_data(X, y, reset=first)
        if first:  # later calls continue with the first call's inference object and optimiser
            self._resolve_inference()
            y = self._initialise(X, y)
        else:
            y = self._prepare_targets(y, reset=False)
        return self._stream(X, y)

    def _set_fitted_hyperparameters(self):
        super()._set_fitted_hyperparameters()
        likelihood = self.module_["likelihood"]
        with torch.no_grad():
            if self._student_t:
                self.noise_std_ = float(likelihood.scale[0]) * self._y_scale
                self.noise_df_ = float(likelihood.df[0])
                self._aleatoric_std = float(likelihood.noise_variance()[0].sqrt()) * self._y_scale
            else:
                self.noise_std_ = float(likelihood.noise_std[0]) * self._y_scale
                self.noise_df_ = None
                self._aleatoric_std = self.noise_std_

    # --------------------------------------------------------------- prediction
    def _latent_marginals(self, X):
        """Mean and variance of q(f) at validated X, numpy, standardised units."""
        if _bsgp.is_sampled(self):
            return _bsgp.latent_marginals(self, X)
        return super()._latent_marginals(X)

    def _joint(self, X):
        """Mean (n,) and covariance (n, n) of y at validated X, standardised units, tensors."""
        self._check_joint_rows(X)
        if _bsgp.is_sampled(self):
            return _bsgp.joint(self, X)
        gp = self.module_["gp"]
        with torch.no_grad():
            mean, cov = gp.predict_f(self._to_tensor(X), full_cov=True)
            noise_var = self._noise_variance()
            return mean, cov + noise_var * torch.eye(X.shape[0], dtype=cov.dtype, device=cov.device)

    @staticmethod
    def _check_joint_rows(X):
        """Refuse a joint (n, n) covariance of more than ``_MAX_JOINT_ROWS`` rows (ValueError)."""
        if X.shape[0] > _MAX_JOINT_ROWS:
            raise ValueError(
                f"The joint predictive covariance of {X.shape[0]} rows is an "
                f"{X.shape[0]}x{X.shape[0]} matrix; return_cov and sample_y accept at most "
                f"{_MAX_JOINT_ROWS} rows. Pass X in smaller chunks (samples are then joint "
                "only within a chunk) or use predict(X, return_std=True) for the marginals."
            )

    def _noise_variance(self):
        """The noise variance in standardised units, a tensor of shape (): sigma^2, or s^2 nu / (nu - 2) for the t."""
        likelihood = self.module_["likelihood"]
        return likelihood.noise_variance()[0] if self._student_t else likelihood.noise_std[0] ** 2

    def _student_t_predictive(self, X, reduce):
        """``reduce(mixture, rows)`` of the predictive of y at validated X under Student-t noise, row block by block.

        p(y) = int N(f | mu, s^2) St(y | f, sigma, nu) df = E_lambda[N(y | mu,
        s^2 + sigma^2 / lambda)], lambda ~ Gamma(nu / 2, rate nu / 2) (the t
        as a scale mixture of Gaussians, [Lange1989]_): a weighted mixture of
        Gaussians over the precisions of :func:`student_t_scale_mixture`,
        every component centred at mu with latent variance s^2, a
        :class:`~skbayes._predictive.MixturePredictive` in standardised units.
        Blocks of ``_T_BLOCK_ROWS`` rows keep the (precisions, rows) arrays
        bounded; the results come back concatenated over the rows.
        """
        mean, var = self._latent_marginals(X)
        likelihood = self.module_["likelihood"]
        with torch.no_grad():
            scale, df = float(likelihood.scale[0]), float(likelihood.df[0])
        precision, weights = student_t_scale_mixture(df)
        noise_var = scale**2 / precision[:, None]
        results = []
        for start in range(0, len(mean), _T_BLOCK_ROWS):
            rows = slice(start, start + _T_BLOCK_ROWS)
            component_var = var[None, rows] + noise_var
            mixture = MixturePredictive(np.broadcast_to(mean[rows], component_var.shape), np.sqrt(component_var),
                                        latent_var=var[None, rows], weights=weights)
            results.append(reduce(mixture, rows))
        return np.concatenate(results, axis=0)

    def predict_uncertainty(self, X):
        """Predictive mean and standard deviations, split by source.

        The predictive distribution of y at x is N(mu(x), s^2(x) + sigma^2),
        with q(f(x)) = N(mu, s^2) (Rossi 2022, eq. 6.7): s is the epistemic
        (model) uncertainty, which grows away from the inducing points, and
        sigma the aleatoric noise. With ``noise="student_t"`` it is q(f)
        convolved with St(0, sigma, nu), whose aleatoric standard deviation
        is sigma sqrt(nu / (nu - 2)).

        %(parameters_X)s

        Returns
        -------
        result : Bunch
            ``mean``, ``std``, ``epistemic_std`` (latent std of f, no noise)
            and ``aleatoric_std``, each of shape (n_samples,), in the units
            of y; ``std**2 == epistemic_std**2 + aleatoric_std**2``.
        """
        return self._uncertainty(self._validate_X_predict(X))

    def _uncertainty(self, X):
        """predict_uncertainty's Bunch for already validated X."""
        mean, var = self._latent_marginals(X)
        epistemic = np.sqrt(var) * self._y_scale
        aleatoric = np.full_like(epistemic, self.noise_std_ if _bsgp.is_sampled(self) else self._aleatoric_std)
        return Bunch(
            mean=mean * self._y_scale + self._y_mean,
            std=np.sqrt(epistemic**2 + aleatoric**2),
            epistemic_std=epistemic,
            aleatoric_std=aleatoric,
        )

    @validate_method_params(return_std=["boolean"], return_cov=["boolean"])
    def predict(self, X, return_std=False, return_cov=False):
        """Predictive mean, and optionally its standard deviation or covariance.

        Same semantics as ``GaussianProcessRegressor.predict``: the standard
        deviation and the covariance are those of y, noise included (see
        :meth:`predict_uncertainty` for the latent part alone).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        return_std : bool, default=False
            Also return the predictive standard deviation.
        return_cov : bool, default=False
            Also return the joint predictive covariance (at most 5,000 rows).

        Returns
        -------
        y_mean : ndarray of shape (n_samples,)
        y_std : ndarray of shape (n_samples,)
            Only returned when ``return_std`` is True.
        y_cov : ndarray of shape (n_samples, n_samples)
            Only returned when ``return_cov`` is True; sigma^2 on the diagonal.

        Raises
        ------
        %(not_fitted_error)s
        ValueError
            If X has NaN/inf or the wrong number of features, if
            ``return_std`` or ``return_cov`` is not a bool, if both are set,
            or ``return_cov`` with too many rows.
        """
        if return_std and return_cov:
            raise ValueError("At most one of return_std and return_cov can be requested; got both.")
        if return_cov:
            mean, cov = self._joint(self._validate_X_predict(X))
            mean = mean.cpu().numpy() * self._y_scale + self._y_mean
            return mean, cov.cpu().numpy() * self._y_scale**2
        if return_std:
            result = self._uncertainty(self._validate_X_predict(X))
            return result.mean, result.std
        mean, _ = self._latent_marginals(self._validate_X_predict(X))
        return mean * self._y_scale + self._y_mean

    @validate_method_params(n_samples=N_DRAWS, random_state=["random_state"])
    def sample_y(self, X, n_samples=1, random_state=0):
        """Draw joint samples of y from the predictive distribution.

        The draws are from N(mean, cov) with the full (n, n) predictive
        covariance of y (noise included), so they are coherent across the
        rows of X; at most 5,000 rows. With ``noise="student_t"``: joint
        draws of f from q(f) plus independent Student-t noise per row.

        Parameters
        ----------
        X : array-like of shape (n_samples_X, n_features)
        n_samples : int, default=1
            Number of draws.
        random_state : int, RandomState instance or None, default=0
            Seed of the draws (``GaussianProcessRegressor``'s convention:
            deterministic by default).

        Returns
        -------
        y_samples : ndarray of shape (n_samples_X, n_samples)
            In the units of y; samples on the last axis.

        Raises
        ------
        ValueError
            If ``n_samples`` is not a positive integer, ``random_state`` is
            not a seed, or X has more than 5,000 rows.
        """
        X = self._validate_X_predict(X)
        rng = check_random_state(random_state)
        if not _bsgp.is_sampled(self) and self._student_t:
            # joint draws of f (the latent covariance, jittered as a kernel matrix), then independent t noise
            self._check_joint_rows(X)
            likelihood = self.module_["likelihood"]
            with torch.no_grad():
                mean, cov = self.module_["gp"].predict_f(self._to_tensor(X), full_cov=True)
                chol = cholesky(cov).cpu().numpy()
                scale, df = float(likelihood.scale[0]), float(likelihood.df[0])
            f = mean.cpu().numpy()[:, None] + chol @ rng.standard_normal((chol.shape[0], n_samples))
            samples = f + scale * rng.standard_t(df, size=f.shape)
            return samples * self._y_scale + self._y_mean
        mean, cov = self._joint(X)
        with torch.no_grad():
            chol = cholesky(cov, jitter=0.0).cpu().numpy()
        z = rng.standard_normal((chol.shape[0], n_samples))
        samples = mean.cpu().numpy()[:, None] + chol @ z
        return samples * self._y_scale + self._y_mean

    def _predictive_quantiles(self, X, levels):
        """The quantiles of :meth:`predict_quantiles` and :meth:`predict_interval`.

        The variational GP's predictive is Gaussian: those of N(mean, std^2)
        of :meth:`predict`; with Student-t noise, those of the scale mixture
        of :meth:`_student_t_predictive`. A sampled GP's is the mixture over its kept
        samples of N(mu_s(x), v_s(x) + sigma_s^2): its exact quantiles, by
        Newton's method safeguarded by bisection on its CDF.
        """
        if hasattr(self, "module_") and _bsgp.is_sampled(self):
            return _bsgp.predictive_quantiles(self, self._validate_X_predict(X), levels)
        if hasattr(self, "module_") and self._student_t:  # the Gaussian q(f) convolved with the t
            quantiles = self._student_t_predictive(self._validate_X_predict(X), lambda mixture, rows: mixture.ppf(levels))
            return quantiles * self._y_scale + self._y_mean
        return super()._predictive_quantiles(X, levels)

    def _predictive_cdf(self, X, y):
        """The CDF of :meth:`predict_cdf`: of the distribution whose quantiles :meth:`_predictive_quantiles` gives."""
        check_is_fitted(self)
        X, y = validate_data(self, X, y, reset=False, y_numeric=True, dtype=(np.float64, np.float32))
        y = np.asarray(y, dtype=np.float64)
        if _bsgp.is_sampled(self):
            return _bsgp.predictive_cdf(self, X, y)
        if self._student_t:
            y_model = (y - self._y_mean) / self._y_scale
            return self._student_t_predictive(X, lambda mixture, rows: mixture.cdf(y_model[rows]))
        result = self._uncertainty(X)
        return norm.cdf(y, result.mean, result.std)

    def log_predictive_density(self, X, y):
        """Log predictive density of each observation, in nats.

        log N(y_i | mean(x_i), std(x_i)^2) in the units of y: the per-point
        test log-likelihood of the UCI benchmark protocol. With a sampled
        posterior (SGHMC), the log of the mixture over kept samples,
        log (1/S) sum_s N(y_i | mu_s(x_i), v_s(x_i) + sigma_s^2), instead;
        with ``noise="student_t"``, the log density of q(f) convolved with
        the t (a weighted mixture of Gaussians over the t's precisions, exact
        to about 1e-7).

        %(log_predictive_density_sections)s
        """
        check_is_fitted(self)
        X, y = validate_data(self, X, y, reset=False, y_numeric=True, dtype=(np.float64, np.float32))
        if _bsgp.is_sampled(self):  # the mixture over kept samples
            return _bsgp.log_predictive_density(self, X, y)
        if self._student_t:
            y_model = (np.asarray(y, dtype=np.float64) - self._y_mean) / self._y_scale
            log_p = self._student_t_predictive(X, lambda mixture, rows: mixture.logpdf(y_model[rows]))
            return log_p - np.log(self._y_scale)
        result = self._uncertainty(X)  # X is validated once, here
        return norm.logpdf(y, result.mean, result.std)
