"""The parts shared by the sparse variational GP estimators.

:class:`BaseSparseGP` holds what :class:`~skbayes.SparseGPRegressor` and
:class:`~skbayes.SparseGPClassifier` do alike: the kernel (a string name or
a scikit-learn kernel object translated by
:func:`skbayes.gaussian_process.from_sklearn_kernel`), the inducing-point
initialisation, the warm-start bookkeeping, the inference object
(``inference_``, a :class:`~skbayes.inference.SparseVariational` or the
variational start of a :class:`~skbayes.inference.SampledSparseGP`, which
gives the optimiser and the loop's settings), the training run through the
one shared loop (``TorchEstimatorMixin._fit_loop``), the fitted
hyperparameters (``inducing_points_``, ``kernel_``, ``length_scale_``,
``signal_std_``) and the latent marginals q(f(x)) at prediction time.
"""

from numbers import Integral

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.cluster import MiniBatchKMeans
from sklearn.gaussian_process.kernels import Kernel
from sklearn.utils import check_random_state

from ..base import TorchEstimatorMixin
from .._param_validation import TRAINING_CONSTRAINTS, Interval, StrOptions
from ..inference import GP_ALIASES, SampledSparseGP, SparseVariational, resolve_gp_inference
from ..nn import SVGP, MaternKernel, RBFKernel
from .._sklearn_kernels import stationary_to_sklearn_kernel, to_sklearn_kernel
from . import _bsgp

# Minibatch size of batch_size="auto" (the size used for SVGP in Rossi 2022, chapter 6).
_AUTO_BATCH = 1024
# Budget of max_iter="auto": this many epochs or optimiser steps, whichever ends first. Every step
# costs O(batch_size M^2 + M^3) whatever n, so the steps, not the epochs, bound the fit time on
# large data (a default fit on 200,000 x 8 rows, M = 256, B = 1024: 4,000 steps, 162 s on one
# busy CPU core; see examples/benchmarks/results/sparse_gp/sparse_gp_defaults_scaling_*.md).
AUTO_MAX_EPOCHS = 1000
AUTO_MAX_STEPS = 4000


def auto_budget():
    """``max_iter="auto"`` of the GP estimators: :data:`AUTO_MAX_EPOCHS` epochs or :data:`AUTO_MAX_STEPS` steps."""
    return AUTO_MAX_EPOCHS, AUTO_MAX_STEPS
#: The string kernels: each stands for the scikit-learn expression ``ConstantKernel(1.0) * RBF(np.ones(d))``
#: (``Matern(np.ones(d), nu)`` for the Matérn ones) on d features, with one softplus-parameterised positive
#: value per length-scale and for the variance, which the sampled sparse GP puts its priors on. Other initial
#: values: pass the scikit-learn expression itself (e.g. ``ConstantKernel(2.0) * RBF(0.5)``).
KERNELS = {
    "rbf": (RBFKernel, {}),
    "matern12": (MaternKernel, {"nu": 0.5}),
    "matern32": (MaternKernel, {"nu": 1.5}),
    "matern52": (MaternKernel, {"nu": 2.5}),
}


#: The constraints of the parameters that SparseGPRegressor and SparseGPClassifier share.
SPARSE_GP_CONSTRAINTS = {
    "kernel": [StrOptions(set(KERNELS)), Kernel],
    "n_inducing": [Interval(Integral, 1, None, closed="left")],
    "inducing_init": [StrOptions({"kmeans", "random"})],
    "learn_hyperparameters": ["boolean"],
    "inference": [StrOptions(set(GP_ALIASES)), SparseVariational, SampledSparseGP],
    "warm_start": ["boolean"],
    **{name: TRAINING_CONSTRAINTS[name]
       for name in ("batch_size", "callbacks", "random_state", "verbose", "device", "dtype")},
}


class BaseSparseGP(TorchEstimatorMixin, BaseEstimator):
    """Kernel, inducing points, optimiser, training run and fitted kernel of an SVGP estimator.

    Subclasses provide:

    - ``_warm_start_params``: the names of the parameters that shape the
      fitted module (a warm start needs them unchanged);
    - ``_prepare_targets(y, reset)``: the targets as the model sees them
      (``reset=True`` at initialisation, where it may fit a scaling);
    - ``_build_module(X, n_inducing, seed, y)``: the ``torch.nn.ModuleDict``
      holding the ``"gp"`` (:class:`skbayes.nn.SVGP`) and its likelihood;
    - ``_minibatch_loss(x, y, n_data)``: the per-datum negative objective of
      one minibatch;
    - ``_signal_scale``: the factor from the model's units of f to the
      user's (the y scale of a regressor, 1 for a classifier).
    """

    _warm_start_params = ()
    _keeps_validation_scores = False  # no early stopping: every row trains the GP
    _signal_scale = 1.0
    #: The keywords of :meth:`~skbayes.inference.SparseVariational.check_supported`: the settings the model has a form for.
    _variational_forms = {}

    # ------------------------------------------------------------ inference
    def _resolve_inference(self):
        """Validate ``inference`` and store the object of this fit as ``inference_``; returns it."""
        self.inference_ = resolve_gp_inference(self.inference)
        self._variational().check_supported(type(self).__name__, **self._variational_forms)
        return self.inference_

    def _variational(self):
        """The :class:`~skbayes.inference.SparseVariational` of this fit (a sampled fit's start)."""
        method = self.inference_
        return method.variational() if isinstance(method, SampledSparseGP) else method

    def _loop_settings(self, steps_per_epoch=None):
        """``max_iter``, ``tol`` and ``n_iter_no_change`` of the variational fit (``inference_``)."""
        return self._variational().loop_settings(steps_per_epoch)

    # ------------------------------------------------------------ model parts
    def _string_kernel(self, n_features, factory):
        """The kernel module named by the string ``kernel``, at its initial values.

        ARD length-scales all 1 (units of X) and signal variance 1 (the
        model's units): the covariance of ``ConstantKernel(1.0) *
        RBF(np.ones(n_features))`` (``Matern(..., nu)`` for the Matérn
        strings), parameterised without bounds (see :data:`KERNELS`).
        """
        kernel_class, kernel_params = KERNELS[self.kernel]
        return kernel_class(
            n_features,
            length_scale=np.ones(n_features),
            variance=1.0,
            learn=self.learn_hyperparameters,
            **kernel_params,
            **factory,
        )

    def _initial_inducing_points(self, X, n_inducing, seed):
        if n_inducing >= X.shape[0]:
            return X
        if self.inducing_init == "random":
            return X[np.random.RandomState(seed).choice(X.shape[0], n_inducing, replace=False)]
        kmeans = MiniBatchKMeans(n_clusters=n_inducing, n_init=1, random_state=seed)
        return kmeans.fit(X).cluster_centers_

    def _svgp(self, X, n_inducing, seed, kernel, factory, *, mean, n_latent=None):
        """The SVGP of ``kernel`` with Z initialised (k-means or random rows of X); q(u) is the prior."""
        gp = SVGP(
            kernel,
            n_inducing,
            X.shape[1],
            n_latent=n_latent,
            mean=mean,
            learn_inducing=self._variational().learn_inducing,
            learn_mean=self.learn_hyperparameters,
            **factory,
        )
        with torch.no_grad():
            gp.inducing_points.copy_(self._to_tensor(self._initial_inducing_points(X, n_inducing, seed)))
        return gp

    def _auto_batch_size(self, n_samples):
        """``batch_size="auto"``: min(1024, n_samples), the size used for SVGP in Rossi 2022, chapter 6."""
        return min(_AUTO_BATCH, n_samples)

    # ------------------------------------------------------- initialisation
    def _model_settings(self, n_features):
        """What a warm start needs unchanged: the parameters that shape the fitted module."""
        variational = self._variational()
        return (n_features, variational.objective, variational.learn_inducing,
                *(repr(getattr(self, name)) for name in self._warm_start_params))

    def _initialise(self, X, y):
        """Device, dtype, targets, the module and the optimiser (a sampled fit's diagnostics dropped).

        Returns the targets as the model sees them (``_prepare_targets``).
        """
        self.__dict__.pop("inference_diagnostics_", None)
        init_seed, self._shuffle_seed = self._seeds(check_random_state(self.random_state), 2)
        self.device_ = self._resolve_device()
        # GP linear algebra: float64 on the CPU even for float32 X, unless dtype says otherwise.
        self.dtype_ = str(self._resolve_dtype(np.float64, self.device_)).removeprefix("torch.")
        y = self._prepare_targets(y, reset=True)
        self.n_inducing_ = min(self.n_inducing, X.shape[0])
        self.module_ = self._build_module(X, self.n_inducing_, init_seed, y)
        self._optimizer = self._make_optimizer()
        self._fitted_settings = self._model_settings(X.shape[1])
        self.loss_curve_, self.n_iter_, self.n_seen_ = [], 0, 0
        return y

    def _continue(self, y):
        """Warm start: keep the module (and any target scaling), draw the seeds, start a new optimiser.

        Returns the targets as in the fit it continues.
        """
        _, self._shuffle_seed = self._seeds(check_random_state(self.random_state), 2)
        self._optimizer = self._make_optimizer()
        return self._prepare_targets(y, reset=False)

    # ------------------------------------------------------------ training
    def _make_optimizer(self):
        """Adam over everything, or Adam over all but q(u) chained with natural gradients for q(u)."""
        gp = self.module_["gp"]
        return self._variational().make_optimizer(self.module_.parameters(), (gp.q_mean, gp.raw_q_scale_tril))

    def _optimizer_for(self, n_data):
        """The stored optimiser (rebuilt with its state after unpickling), with the natural-gradient scale set to N."""
        optimizer = self._stored_optimizer()
        for group in optimizer.param_groups:
            if "loss_scale" in group:
                group["loss_scale"] = float(n_data)  # loss = -objective / N
        return optimizer

    def _train(self, X_t, y_t, n_data, shuffle_seed, **overrides):
        """Run the shared training loop over the rows of (X_t, y_t) with the objective's N = n_data.

        ``overrides`` replace loop settings (e.g. ``max_iter=1`` for ``partial_fit``).
        """
        return self._fit_loop(
            lambda idx: self._minibatch_loss(X_t[idx], y_t[idx], n_data),
            self._optimizer_for(n_data),
            X_t.shape[0],
            shuffle_seed=shuffle_seed,
            **overrides,
        )

    def _stream(self, X, y):
        """``partial_fit``'s pass: one epoch over validated X and y (as the model sees them), N = ``n_seen_``.

        The objective's N is the running total of rows seen (this call's
        included); the loop runs a fixed schedule of one epoch, and the
        optimiser's state carries over from the previous call.
        """
        X_t, y_t = self._to_tensor(X), self._to_tensor(y)
        self._stream_epoch(
            lambda n_data, offset, **loop: self._train(X_t, y_t, n_data, self._shuffle_seed + offset, **loop),
            X.shape[0],
        )
        self._set_fitted_hyperparameters()
        return self

    def _auto_budget(self):
        return auto_budget()

    def _set_fitted_hyperparameters(self):
        """``inducing_points_``, and ``kernel_`` (kernel object) or ``length_scale_`` and ``signal_std_``."""
        gp = self.module_["gp"]
        with torch.no_grad():
            self.inducing_points_ = gp.inducing_points.cpu().numpy().copy()
            if not isinstance(self.kernel, str):
                self.kernel_ = to_sklearn_kernel(gp.kernel, self.kernel)
                self.length_scale_ = self.signal_std_ = None
                return
            self.kernel_ = self._string_kernel_as_sklearn(gp.kernel)
            self.length_scale_ = gp.kernel.length_scale.cpu().numpy().copy()
            self.signal_std_ = float(gp.kernel.variance.sqrt()) * self._signal_scale

    def _string_kernel_as_sklearn(self, module):
        """``kernel_`` for a string kernel: ConstantKernel * RBF / Matern in the model's units."""
        return stationary_to_sklearn_kernel(module)

    # ------------------------------------------------------ sampled posterior
    def _sample_posterior(self, method, X_t, y_t):
        """Sample (v, theta, Z[, sigma]) from the variational fit in ``module_`` with ``method`` (Rossi 2022, section 6.3).

        ``method`` is the validated sampler of ``inference_`` (a
        :class:`~skbayes.inference.SampledSparseGP`); X_t (n, d) and y_t (n,)
        are the training tensors as the model sees them. Stores the kept
        samples in ``module_["samples"]``, the diagnostics and the posterior
        means, and returns the estimator.
        """
        self._fitted_settings = None  # a later warm_start fit starts afresh
        _bsgp.run_sampler(self, _bsgp.sample_posterior, method, X_t, y_t)
        means = _bsgp.posterior_means(self.module_)
        self.length_scale_ = means["length_scale"]
        self.signal_std_ = means["signal_std"] * self._signal_scale
        if "noise_std" in means:
            self.noise_std_ = means["noise_std"] * self._y_scale
        self.inducing_points_ = means["inducing_points"]
        self.__dict__.pop("kernel_", None)  # the hyperparameters are a mixture
        return self

    # ---------------------------------------------------------- prediction
    def _latent_marginals(self, X):
        """Mean and variance of q(f) at validated X, numpy, in the model's units.

        Shapes (n,) for one latent function, (n, L) for L of them.
        """
        gp = self.module_["gp"]
        with torch.no_grad():
            chol_zz = gp.chol_zz()
        # Per row, K_zx, A = L_zz^-1 K_zx and L_v^T A hold M values each (L M with L latents).
        return self._predict_in_blocks(
            X, lambda x, rows: gp.predict_f(x, chol_zz=chol_zz), row_size=3 * gp.n_inducing * (gp.n_latent or 1)
        )
