"""Inference methods of the Gaussian-process estimators, as parameter objects.

:class:`SparseVariational` is the variational fit of
:class:`~skbayes.SparseGPRegressor`, :class:`~skbayes.SparseGPClassifier`
and :class:`~skbayes.DeepGPRegressor` (their default,
``inference="variational"``); :class:`SampledSparseGP` samples the sparse
GPs' posterior with an MCMC method such as :class:`~skbayes.inference.SGHMC`
after a short variational start (``inference="sghmc"``). Like the MLPs'
methods they hold their own settings only, are cloned and grid-searched
(``inference__learning_rate_init``, ``inference__sampler__burn_in``) and never
change when the estimator is fitted. They are not methods of the Bayesian MLPs
and are not in :data:`skbayes.inference.ALIASES`; :data:`GP_ALIASES` holds the
GP estimators' string aliases.
"""

from numbers import Integral, Real

import torch
from sklearn.base import BaseEstimator, clone

from .._docstrings import fill_doc
from .._param_validation import Interval, StrOptions
from ..nn import OBJECTIVES, LoopLBFGS, NaturalGradient, OptimizerChain
from ..nn.gp.bayesian_sparse_gp import INDUCING_PRIORS
from ._base import InferenceMethod
from ._loop import GP_PATIENCE_EPOCHS, GP_PATIENCE_STEPS, LOOP_CONSTRAINTS, LOOP_PARAMETERS_DOC, loop_settings

__all__ = ["GP_ALIASES", "SampledSparseGP", "SparseVariational", "resolve_gp_inference"]


#: The aliases of :data:`skbayes.inference.ALIASES` whose method can sample a GP (``supports_gp``).
GP_SAMPLER_ALIASES = frozenset({"sghmc"})

#: The stopping tolerances of ``SparseVariational(optimizer="auto")``'s L-BFGS on the collapsed bound (per-row
#: loss): the largest absolute gradient, and the change of the loss or of every parameter over one iteration
#: (torch.optim.LBFGS's defaults).
LBFGS_TOLERANCE_GRAD, LBFGS_TOLERANCE_CHANGE = 1e-7, 1e-9


class _GPInference(BaseEstimator):
    """What the GP inference objects share: validated clones, deterministic tags."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        return tags


@fill_doc(learning_rate_init_default=0.01, tol_default="1e-5", **LOOP_PARAMETERS_DOC)
class SparseVariational(_GPInference):
    """Variational inference of a sparse (or deep) Gaussian process: the GP estimators' default.

    q(u) = N(m, S) over the (whitened) inducing values, the inducing inputs,
    the kernel hyperparameters and the noise are fitted together by
    maximising an evidence lower bound on minibatches ([Hensman2013]_;
    [Rossi2022]_, eq. 6.2) in the shared training loop, with Adam, or with
    natural-gradient steps for q(u) ([Salimbeni2018]_); on small data with
    Gaussian noise, by default, q(u) is kept at its optimum and the
    collapsed bound ([Titsias2009]_, eq. 9) maximised by L-BFGS
    ([NocedalWright2006]_; see ``optimizer``). The model and the
    bound are the estimator's (see :class:`~skbayes.SparseGPRegressor`,
    :class:`~skbayes.SparseGPClassifier`, :class:`~skbayes.DeepGPRegressor`);
    this object holds how the bound is optimised. ``inference="variational"``
    is this object at its defaults.

    Parameters
    ----------
    objective : {"vfe", "fitc"}, default="vfe"
        Training objective of :class:`~skbayes.SparseGPRegressor`.
        ``"vfe"``: the evidence lower bound ([Hensman2013]_; [Rossi2022]_,
        eq. 6.2). ``"fitc"``: the log-of-expectation objective of
        [Rossi2022]_ (eqs. 6.5, 6.12 and 6.16), whose optimum over q(u) is the
        FITC log marginal likelihood [Snelson2006]_. The classifier and the
        deep GP have the bound only: ``"fitc"`` makes their ``fit`` raise a
        ValueError.
    optimizer : {"auto", "adam", "ngd"}, default="auto"
        How the bound is optimised. ``"auto"``: where q(u) has a closed-form
        optimum given the rest, i.e. for :class:`~skbayes.SparseGPRegressor`
        with Gaussian noise whose ``fit`` sees every row in one batch (up to
        1024 rows with ``batch_size="auto"``), the bound at that optimum, a
        function of the inducing inputs, the hyperparameters and the noise
        only (the collapsed bound of [Titsias2009]_, eq. 9, or the FITC
        log marginal likelihood for ``"fitc"``;
        :func:`skbayes.nn.gp.svgp.collapsed_bound`), is maximised by
        full-batch L-BFGS with a strong Wolfe line search ([NocedalWright2006]_,
        algorithms 7.5 and 3.5; :class:`skbayes.nn.LoopLBFGS`), one iteration
        per epoch of the loop, and q(u) is then set to its optimum. The
        iterations stop when the largest absolute gradient of the per-row
        loss is at most 1e-7, when the loss or every parameter changes by
        less than 1e-9 in an iteration, by the ``tol`` / ``n_iter_no_change``
        rule below, or after ``max_iter`` iterations (``"auto"``: 1000; a
        ConvergenceWarning then says so); ``learning_rate_init`` is not used
        (L-BFGS's step is 1, scaled by the line search). Such a fit lowers
        the relative jitter of K_zz's Cholesky to 1e-8 in float64 (from
        1e-6; it still escalates to 1e-3 where the factorisation fails):
        the jitter lowers the collapsed bound by about tr(K_xx - Q_xx) /
        (2 sigma^2) and so biased the noise upwards on nearly noise-free
        data. Elsewhere
        (minibatches, Student-t noise, ``partial_fit``, which continues with
        a fresh Adam after such a fit, a fit with nothing but q(u) to learn,
        the classifier and the deep GP) ``"auto"`` is ``"adam"``. With as
        many inducing points as rows it reaches scikit-learn's exact
        ``GaussianProcessRegressor`` (within 0.01 nats of test log density
        per row on the ten small sets of
        ``examples/benchmarks/sparse_gp_vs_exact.py``), where Adam on q(u)
        lags its optimum and ends with too large a noise on nearly
        noise-free sets (0.36 nats below on one). Type-II maximum
        likelihood is not always the best test density: on UCI energy (691
        rows, M = 256) it also matches the exact GP, 0.17 nats per row below
        Adam's unconverged fit (``doc/sparse_gp.md``).
        ``"adam"``: Adam on (m, L) of q(u) with the other parameters, always.
        ``"ngd"``: natural-gradient steps of size
        ``ngd_step_size`` in the natural parameters of q(u)
        ([Salimbeni2018]_; :class:`skbayes.nn.NaturalGradient`), with Adam for
        the inducing inputs, the hyperparameters and the noise. The deep GP
        has no natural-gradient form (``fit`` raises a ValueError).
    ngd_step_size : float, default=0.1
        Natural-gradient step size gamma in (0, 1], used with
        ``optimizer="ngd"``. With gamma = 1 one full-batch step solves for the
        optimal q(u) of the conjugate regression bound; [Salimbeni2018]_ use
        about 0.1 for non-conjugate likelihoods and minibatches.
    learn_inducing : bool, default=True
        Optimise the inducing inputs Z with the rest (as GPyTorch's
        ``VariationalStrategy(learn_inducing_locations=True)``); False keeps
        them where the estimator's ``inducing_init`` put them. A
        :class:`SampledSparseGP` started from this fit samples Z only when
        they are learned.
    n_mc_train : int or "auto", default="auto"
        Monte-Carlo draws per row and step where the bound has no closed
        form: the softmax expectation of the classifier (``"auto"``: 8) and
        the propagated draws of the deep GP (``"auto"``: 1, as in
        [Salimbeni2017]_). The regressor's bounds are in closed form: an int
        makes its ``fit`` raise a ValueError.
    %(loop_parameters)s

    See Also
    --------
    SampledSparseGP : samples the sparse GP's posterior, starting from this fit.

    References
    ----------
    .. [Hensman2013] J. Hensman, N. Fusi and N. D. Lawrence, "Gaussian
       processes for big data", UAI 2013.
    .. [NocedalWright2006] J. Nocedal and S. J. Wright, "Numerical
       optimization", 2nd ed., Springer, 2006, chapters 3 and 7.
    .. [Salimbeni2017] H. Salimbeni and M. Deisenroth, "Doubly stochastic
       variational inference for deep Gaussian processes", NeurIPS 2017.
    .. [Salimbeni2018] H. Salimbeni, S. Eleftheriadis and J. Hensman,
       "Natural gradients in practice: non-conjugate variational inference
       in Gaussian process models", AISTATS 2018.
    .. [Snelson2006] E. Snelson and Z. Ghahramani, "Sparse Gaussian
       processes using pseudo-inputs", NeurIPS 2006.
    .. [Titsias2009] M. Titsias, "Variational learning of inducing variables
       in sparse Gaussian processes", AISTATS 2009.
    .. [Rossi2022] S. Rossi, "Improving scalability and inference in
       probabilistic deep models", PhD thesis, 2022, chapter 6.

    Examples
    --------
    >>> from skbayes import SparseGPRegressor
    >>> from skbayes.inference import SparseVariational
    >>> model = SparseGPRegressor(inference=SparseVariational(optimizer="ngd", max_iter=200))
    """

    _parameter_constraints = {
        "objective": [StrOptions(set(OBJECTIVES))],
        "optimizer": [StrOptions({"auto", "adam", "ngd"})],
        "ngd_step_size": [Interval(Real, 0, 1, closed="right")],
        "learn_inducing": ["boolean"],
        "n_mc_train": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        **LOOP_CONSTRAINTS,
    }

    def __init__(
        self,
        objective="vfe",
        *,
        optimizer="auto",
        ngd_step_size=0.1,
        learn_inducing=True,
        n_mc_train="auto",
        learning_rate_init=0.01,
        max_iter="auto",
        tol=1e-5,
        n_iter_no_change="auto",
    ):
        self.objective = objective
        self.optimizer = optimizer
        self.ngd_step_size = ngd_step_size
        self.learn_inducing = learn_inducing
        self.n_mc_train = n_mc_train
        self.learning_rate_init = learning_rate_init
        self.max_iter = max_iter
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change

    def check_supported(self, estimator_name, *, objectives=tuple(OBJECTIVES), optimizers=("adam", "ngd"),
                        monte_carlo=True):
        """Raise a ValueError naming a setting the estimator cannot use.

        Parameters
        ----------
        estimator_name : str
        objectives, optimizers : tuple of str
            The values of ``objective`` and ``optimizer`` the estimator has a form for
            (``"auto"``, Adam where no closed form applies, is always accepted).
        monte_carlo : bool
            Whether the estimator's bound has a Monte-Carlo term (else
            ``n_mc_train`` must be ``"auto"``).

        Raises
        ------
        ValueError
        """
        optimizers = ("auto", *optimizers)  # "auto" is Adam where no closed form applies
        for name, allowed in (("objective", objectives), ("optimizer", optimizers)):
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"{estimator_name} cannot use SparseVariational({name}={getattr(self, name)!r}); "
                    f"it takes {name} in {sorted(allowed)}."
                )
        if not monte_carlo and self.n_mc_train != "auto":
            raise ValueError(
                f"{estimator_name}'s variational bound has no Monte-Carlo term (a closed form or quadrature): leave "
                f"SparseVariational(n_mc_train='auto'); got n_mc_train={self.n_mc_train!r}."
            )

    def n_draws(self, default):
        """``n_mc_train``, with ``"auto"`` resolved to the estimator's ``default``."""
        return default if self.n_mc_train == "auto" else self.n_mc_train

    def loop_settings(self, steps_per_epoch=None):
        """``max_iter``, ``tol`` and ``n_iter_no_change`` of the shared training loop.

        ``n_iter_no_change="auto"`` is resolved for ``steps_per_epoch``
        optimiser steps per epoch (see the parameter; 20 epochs when None).
        """
        settings = loop_settings(self)
        if self.n_iter_no_change == "auto":
            steps = GP_PATIENCE_STEPS if steps_per_epoch is None else steps_per_epoch
            settings["n_iter_no_change"] = max(GP_PATIENCE_EPOCHS, -(-GP_PATIENCE_STEPS // steps))
        return settings

    def make_optimizer(self, parameters, q=None):
        """The optimiser of one fit: Adam, or Adam chained with natural-gradient steps for q(u).

        Parameters
        ----------
        parameters : iterable of torch.nn.Parameter
            Every parameter of the model; those without ``requires_grad`` are left out.
        q : tuple of torch.nn.Parameter, optional
            ``(q_mean, raw_q_scale_tril)`` of the SVGP whose q(u) the
            natural-gradient steps update (``optimizer="ngd"``).

        Returns
        -------
        optimizer : torch.optim.Optimizer or skbayes.nn.OptimizerChain
        """
        trainable = [p for p in parameters if p.requires_grad]
        if self.optimizer in ("auto", "adam"):  # "auto": Adam where q(u) has no closed form (see make_lbfgs)
            return torch.optim.Adam(trainable, lr=self.learning_rate_init)
        variational = {id(p) for p in q}
        others = [p for p in trainable if id(p) not in variational]
        ngd = NaturalGradient(*q, lr=self.ngd_step_size)
        if not others:
            return OptimizerChain(ngd)
        return OptimizerChain(torch.optim.Adam(others, lr=self.learning_rate_init), ngd)

    def collapses(self):
        """Whether ``optimizer`` asks for L-BFGS on the collapsed bound where it applies (``"auto"``)."""
        return self.optimizer == "auto"

    def make_lbfgs(self, parameters, objective):
        """The optimiser of a fit on the collapsed bound: L-BFGS, one iteration per epoch of the loop.

        Parameters
        ----------
        parameters : iterable of torch.nn.Parameter
            The parameters of the collapsed bound (not q(u)); those without
            ``requires_grad`` are left out.
        objective : callable
            ``objective() -> torch.Tensor``: the negative collapsed bound
            divided by N, of every row.

        Returns
        -------
        optimizer : skbayes.nn.LoopLBFGS
            With the tolerances of ``optimizer="auto"`` (see the parameter).
        """
        trainable = [p for p in parameters if p.requires_grad]
        return LoopLBFGS(trainable, objective, tolerance_grad=LBFGS_TOLERANCE_GRAD,
                         tolerance_change=LBFGS_TOLERANCE_CHANGE)


class SampledSparseGP(_GPInference):
    """Sampling of a sparse GP's posterior: the Bayesian sparse GP (BSGP) of [Rossi2022]_, section 6.3.

    The whitened inducing values v, the kernel's length-scales and signal
    variance, the inducing inputs (with ``start``'s ``learn_inducing``)
    and the regressor's noise (with ``noise_std="learn"``) are sampled
    jointly from the posterior of [Rossi2022]_, eq. 6.17 (the FITC
    log-of-expectation likelihood with log-normal hyperpriors) by
    ``sampler``, in the shared training loop on its own schedule of epochs.
    The chains start from a variational fit (``start``; the thesis collects
    its samples after an optimisation), each with v drawn from q(v).
    Predictions average over the kept samples. ``inference="sghmc"`` is this
    object at its defaults. Read more in ``doc/bayesian_sparse_gp.md``.

    The sampler's settings are those of the Bayesian MLPs'
    :class:`~skbayes.inference.SGHMC`; the settings below belong to the GP
    only, which is why they are here and not on the sampler.

    Parameters
    ----------
    sampler : str or InferenceMethod, default="sghmc"
        The MCMC method, an object that can sample GPs (``supports_gp``,
        e.g. ``SGHMC(burn_in=..., n_chains=...)``) or its alias in
        :data:`skbayes.inference.ALIASES`. Another method (e.g.
        ``MCDropout()``) makes the estimator's ``fit`` raise a ValueError.
    inducing_prior : {"normal", "dpp", "uniform"}, default="normal"
        Prior p(Z) of the sampled inducing inputs ([Rossi2022]_, section
        6.3.1): N(0, I) per point (assumes standardised X), the determinantal
        prior p(Z) ∝ det K_zz, or flat.
    start : "variational" or SparseVariational, default="variational"
        The variational fit the chains start from (its objective, optimiser,
        step size and stopping rule); ``"variational"`` is
        ``SparseVariational()``, a full default fit.

    See Also
    --------
    SparseVariational : the variational fit alone.

    References
    ----------
    .. [Rossi2022] S. Rossi, "Improving scalability and inference in
       probabilistic deep models", PhD thesis, 2022, section 6.3.

    Examples
    --------
    >>> from skbayes import SparseGPRegressor
    >>> from skbayes.inference import SGHMC, SampledSparseGP, SparseVariational
    >>> model = SparseGPRegressor(inference=SampledSparseGP(
    ...     SGHMC(burn_in=100, n_kept_samples=50), start=SparseVariational(max_iter=200)))
    """

    _parameter_constraints = {
        "sampler": [StrOptions(set(GP_SAMPLER_ALIASES)), InferenceMethod],
        "inducing_prior": [StrOptions(set(INDUCING_PRIORS))],
        "start": [StrOptions({"variational"}), SparseVariational],
    }

    def __init__(self, sampler="sghmc", *, inducing_prior="normal", start="variational"):
        self.sampler = sampler
        self.inducing_prior = inducing_prior
        self.start = start

    def sampling_method(self, estimator_name):
        """The validated sampler, a fresh object.

        Raises
        ------
        ValueError
            For a method with no Gaussian-process form (``supports_gp`` False).
        """
        from . import resolve_inference

        method = resolve_inference(self.sampler)
        if not method.supports_gp:
            raise ValueError(
                f"{estimator_name} cannot sample with {type(method).__name__}(...): it has no Gaussian-process "
                "form. Use SampledSparseGP(sampler=SGHMC(...)), or inference='variational'."
            )
        return method

    def variational(self):
        """The validated variational start, a fresh :class:`SparseVariational`."""
        return resolve_gp_inference(self.start)


#: The string aliases of the GP estimators' ``inference=`` and the class each stands for.
GP_ALIASES = {"variational": SparseVariational, "sghmc": SampledSparseGP}


def resolve_gp_inference(inference):
    """The GP inference object an estimator's ``inference`` parameter stands for.

    Parameters
    ----------
    inference : str or SparseVariational or SampledSparseGP
        A key of :data:`GP_ALIASES` or an object (the estimator's
        ``_parameter_constraints`` say which it accepts).

    Returns
    -------
    method : SparseVariational or SampledSparseGP
        A fresh default object for an alias, else an unfitted clone of
        ``inference`` with its parameters validated.

    Raises
    ------
    ValueError
        On an invalid parameter of the object (or of its sampler or start).
    """
    method = GP_ALIASES[inference]() if isinstance(inference, str) else clone(inference)
    method._validate_params()
    return method
