"""The interface of the inference methods of the Bayesian MLPs."""

from dataclasses import dataclass, field

import torch
from sklearn.base import BaseEstimator

from .._training import KLWarmup
from ..nn import negative_elbo
from ._loop import loop_settings

__all__ = ["FitContext", "InferenceMethod", "ModelSettings", "Training"]

@dataclass(frozen=True)
class ModelSettings:
    """The estimator's settings that every inference method may read.

    An inference method receives these and tensors, never the estimator.

    Attributes
    ----------
    hidden_layer_sizes : tuple of int
        Widths of the hidden layers.
    activation : str
        Non-linearity between layers, a key of :data:`skbayes.nn.ACTIVATIONS`.
    prior_scale : float
        Standard deviation of the N(0, prior_scale^2) prior on every weight.
    learn_noise : bool
        Whether the Gaussian noise is learned (False for a fixed noise level
        and for classification).
    batch_size : int or "auto"
        The estimator's ``batch_size`` as given.
    classification : bool
        True for a categorical likelihood (class indices in Y).
    module : callable or None
        For the estimators that take a torch module: ``module(seed, n_features,
        n_outputs, device, dtype) -> torch.nn.Module`` builds the user's plain
        network, initialised from ``seed``; None for the MLP estimators.
    input_shape : tuple of int or None
        Shape of one input of that module (the rows are reshaped to it).
    """

    hidden_layer_sizes: tuple
    activation: str
    prior_scale: float
    learn_noise: bool
    batch_size: object
    classification: bool
    module: object = None
    input_shape: tuple = None


@dataclass(frozen=True)
class FitContext:
    """What one call of :meth:`InferenceMethod.prepare` works with.

    Attributes
    ----------
    generator : torch.Generator
        Source of the training noise (weight draws, sampler noise), on the
        model's device.
    n_data : int
        Number N of training rows the objective is scaled by (the rows of
        this fit, or all rows seen so far by ``partial_fit``).
    batch_size : int
        Rows per optimiser step, after ``"auto"`` is resolved.
    warm_start : bool
        True when the module was fitted before and training continues from it.
    early_stopping : bool
        True when the loop stops on a held-out validation score.
    epochs_done : int
        Epochs already run on this module by earlier ``partial_fit`` calls.
    validation : tuple of torch.Tensor or None
        The held-out rows (X_val, Y_val) of the stopping rule, or None
        without early stopping.
    """

    generator: torch.Generator
    n_data: int
    batch_size: int
    warm_start: bool = False
    early_stopping: bool = False
    epochs_done: int = 0
    validation: tuple = None


@dataclass
class Training:
    """How the shared training loop runs one inference method.

    Attributes
    ----------
    loss_fn : callable
        ``loss_fn(idx) -> torch.Tensor``: the per-datum loss of the training
        rows ``idx``.
    optimizer : torch.optim.Optimizer
        Steps after each backward pass (``state_dict``/``load_state_dict``
        carry it over ``partial_fit`` calls).
    callbacks : list of skbayes.callbacks.Callback
        The method's own hooks (KL warm-up, kept samples, prior refinement),
        run before the stopping rule and the user's callbacks.
    loop : dict
        Overrides of the loop settings (``max_iter``, ``n_iter_no_change``,
        ``min_iter``, ``batch_size``, ...) for methods with a fixed schedule.
    finish : callable
        ``finish() -> dict``: runs after the loop (e.g. stores the kept
        samples in the module) and returns the method's diagnostics.
    then : callable or None
        ``then() -> Training``: a second phase that the same loop runs after
        this one has ended (and after this one's ``finish``), with its own
        loss, optimiser, callbacks and loop overrides (e.g. SWAG's
        constant-step epochs after the MAP fit); the diagnostics of both
        ``finish`` are merged and the loss curves joined.
    """

    loss_fn: object
    optimizer: object
    callbacks: list = field(default_factory=list)
    loop: dict = field(default_factory=dict)
    finish: object = None
    then: object = None


class InferenceMethod(BaseEstimator):
    """Base class of the inference methods of the Bayesian MLPs.

    An inference method is a parameter object, like a kernel of
    :class:`~sklearn.gaussian_process.GaussianProcessRegressor`: it holds
    the settings that belong to one way of approximating the posterior over
    the weights, is cloned and tuned like any estimator
    (``GridSearchCV(..., {"inference__burn_in": [...]})``), and is never
    changed by a fit. The estimator calls, in order:

    1. :meth:`build_network` (unless warm-starting) and
       :meth:`n_likelihood_members` for the likelihood;
    2. :meth:`prepare`, with the training tensors, the
       :class:`ModelSettings` and a :class:`FitContext`, which returns a
       :class:`Training`: the loss, the optimiser, callbacks and loop
       overrides;
    3. the shared training loop, then ``Training.finish()`` for the
       method's diagnostics (``inference_diagnostics_``).

    After fitting, the estimator predicts from ``module["network"]`` only,
    through ``sample_parameters(n_draws, generator)`` and
    ``forward_with(x, parameters)``, n_draws the method's ``n_mc_predict``
    (100 for a method without that parameter); a network with a finite set
    of members (an ensemble, kept samples) also has ``n_members`` and
    ``member_parameters(index=None)`` and is predicted with all members
    (its method has no ``n_mc_predict``).

    The default :meth:`prepare` is gradient-based variational inference:
    Adam on the per-datum negative ELBO with ``n_mc_train`` Monte-Carlo
    draws per row and the linear KL warm-up of ``kl_warmup_epochs``
    (subclasses that use it define both parameters). ``doc/adding_an_inference_method.md``
    walks through writing a new method.
    """

    _parameter_constraints = {}

    #: Whether :class:`~skbayes.BayesianMLPClassifier` can use the method.
    supports_classification = True
    #: Whether the method can stop on a validation score (``early_stopping``);
    #: if not, the estimator holds no rows out.
    supports_early_stopping = True
    #: Whether ``partial_fit`` (one epoch on new rows) is meaningful.
    supports_partial_fit = True
    #: Whether the method can infer the sparse Gaussian processes
    #: (:meth:`prepare_gp`); :class:`~skbayes.SparseGPRegressor` refuses the others.
    supports_gp = False
    #: The observation noise models (``noise`` of :class:`~skbayes.BayesianMLPRegressor`)
    #: the method can fit; the regressor refuses the others at fit.
    noise_models = frozenset({"homoscedastic", "heteroscedastic", "student_t"})
    #: The regressor's ``noise="auto"`` under this method: Student-t noise for the
    #: sampling methods and ensembles; Gaussian noise for the methods trained by
    #: an ELBO whose posterior can relax onto the prior (``MeanFieldVI``,
    #: ``Vadam``, ``MNF``, ``BayesByHypernet``): heavy tails start them in a fit that
    #: calls most of the signal noise (scikit-learn's ``check_regressors_train``,
    #: training R^2 0.36 for Vadam with Student-t noise, 0.76 with Gaussian noise;
    #: examples/benchmarks/results/defaults/vi_defaults_*.md).
    auto_noise = "student_t"
    #: Whether the estimators check a fit for a posterior collapsed onto the prior
    #: (``skbayes.inference._guards.warn_if_collapsed``): the methods trained by an ELBO.
    collapse_guard = False

    def stopping_rule(self, classification):
        """The loop's stopping settings under this method, ``"auto"`` resolved for the task.

        Read from the method's own parameters (``max_iter``, ``tol``,
        ``n_iter_no_change``, ``early_stopping``, ``validation_fraction``);
        a method with a fixed schedule of its own (``SGHMC``) has none of
        them and sets its loop in :meth:`prepare` (``Training.loop``).

        Parameters
        ----------
        classification : bool
            True for the classifiers: ``early_stopping="auto"`` is then True
            and ``n_iter_no_change="auto"`` 10 (False and 50 for regression).

        Returns
        -------
        rule : dict
            ``max_iter`` (int or None), ``tol``, ``n_iter_no_change`` (int or
            None), ``early_stopping`` (bool: only for a method that
            ``supports_early_stopping``) and ``validation_fraction``.
        """
        params = self.get_params(deep=False)
        early_stopping = params.get("early_stopping", False)
        if early_stopping == "auto":
            early_stopping = classification
        return {
            **loop_settings(self, classification),
            "early_stopping": bool(early_stopping) and self.supports_early_stopping,
            "validation_fraction": params.get("validation_fraction"),
        }

    def auto_batch_size(self):
        """Rows per optimiser step when the estimator's ``batch_size`` is ``"auto"``, or None.

        None (here) leaves the estimator's rule: 32 up to 2,000 training rows,
        128 above. The estimator uses at most the number of training rows.
        """
        return None

    def build_network(self, n_features, n_outputs, settings, *, generator, device, dtype):
        """The untrained network, a :class:`torch.nn.Module`.

        Parameters
        ----------
        n_features, n_outputs : int
            Input and output widths.
        settings : ModelSettings
        generator : torch.Generator
            Source of the initial weights (CPU).
        device, dtype
            Where and in which precision the parameters live.
        """
        raise NotImplementedError

    def build_module_network(self, n_features, n_outputs, settings, *, generator, device, dtype):
        """The untrained network around the user's module (``settings.module``).

        The method turns the plain torch module Bayesian (see
        :mod:`skbayes.nn.networks.module`) or says which layers it cannot
        handle. Parameters as :meth:`build_network`.

        Raises
        ------
        ValueError
            For a method with no form for a torch module, or for layers of the
            module it cannot make Bayesian.
        """
        raise ValueError(
            f"{type(self).__name__} works on the MLP only; a torch module takes MCDropout, MeanFieldVI, MNF, "
            "WHVI, BayesByHypernet, BayesByGAN, DeepEnsemble, SWAG, Laplace (its last layer) or SGHMC."
        )

    def n_likelihood_members(self):
        """None for one noise level shared by all draws, else the number of members."""
        return None

    def can_warm_start(self, module):
        """Whether a fitted ``module`` can continue under these settings."""
        return True

    def prepare(self, module, X, Y, settings, context):
        """The loss, optimiser and hooks that train ``module`` on X (n, d) and Y (n, k).

        Parameters
        ----------
        module : torch.nn.ModuleDict
            With ``"network"`` and ``"likelihood"``; a method may replace
            either entry (e.g. with its kept samples) in ``Training.finish``.
        X : torch.Tensor of shape (n, n_features)
        Y : torch.Tensor of shape (n, n_outputs)
            Standardised targets, or (n, 1) class indices.
        settings : ModelSettings
        context : FitContext

        Returns
        -------
        training : Training
        """
        network, likelihood = module["network"], module["likelihood"]
        warmup = KLWarmup(self.kl_warmup_epochs, start_epoch=context.epochs_done)
        n_mc, n_data = self.n_mc_train, context.n_data
        generator = context.generator

        def loss_fn(idx):
            x = X[idx]
            f = network(x.expand(n_mc, *x.shape), generator=generator)
            kl = network.kl() if warmup.weight == 1.0 else warmup.weight * network.kl()
            return negative_elbo(likelihood.log_prob(Y[idx], f), kl, n_data)

        return Training(
            loss_fn,
            adam(module.parameters(), self),
            callbacks=[warmup],
            # the loss rises while the KL weight warms up: stopping waits for it
            loop={"min_iter": self.kl_warmup_epochs},
            finish=lambda: {"kl": float(network.kl().detach())},
        )

    def prepare_gp(self, module, energy, n_rows, context, *, trace=None, stochastic_energy=False):
        """The loss, optimiser and hooks that sample a sparse GP's chains (the GP's hook).

        The GP estimators (regression, classification, deep GP) describe
        their model to the method by tensors and closures only, so that one
        implementation serves all of them:

        Parameters
        ----------
        module : torch.nn.ModuleDict
            With ``"chains"``, a :class:`torch.nn.ModuleList` of identical
            modules, one per chain (``n_members`` of them), whose
            parameters with ``requires_grad`` are the sampled coordinates.
            ``Training.finish`` adds ``"samples"``, a
            :class:`~skbayes.nn.KeptStates` of those coordinates (dotted
            names relative to a chain), chain-major.
        energy : callable
            ``energy(chain, rows) -> torch.Tensor``: the per-datum
            minibatch energy U / N of one chain on the training rows
            ``rows`` (a LongTensor), e.g.
            :func:`skbayes.nn.gp.bayesian_sparse_gp.neg_log_posterior`.
        n_rows : int
            Number of training rows.
        context : FitContext
        trace : callable, optional
            ``trace(chain) -> torch.Tensor of shape (q,)``: scalars of one
            chain whose split R-hat over the kept samples is reported.
        stochastic_energy : bool, default=False
            Whether ``energy`` draws noise of its own (the deep GP's
            propagated draws), so that its gradient is noisy even on all the
            training rows at once.

        Returns
        -------
        training : Training
            ``finish()`` returns the diagnostics (``inference_diagnostics_``).

        Raises
        ------
        NotImplementedError
            For a method that cannot sample a GP (``supports_gp`` False).
        """
        raise NotImplementedError(f"{type(self).__name__} has no Gaussian-process form.")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        return tags


def module_seeds(generator, n):
    """``n`` integer seeds for building torch modules, drawn from ``generator``."""
    return torch.randint(2**62, (n,), generator=generator).tolist()


def adam(parameters, method, learning_rate=None):
    """Adam with the method's ``learning_rate_init`` (or ``learning_rate``), ``beta_1`` and ``beta_2``.

    The fused implementation (one kernel for all parameters) where torch has
    one for the parameters' device: on the CPU it steps the few small tensors
    of an MLP about three times faster than the default per-tensor loop, with
    the same update up to floating-point round-off.
    """
    parameters = list(parameters)
    fused = all(p.device.type in _FUSED_ADAM_DEVICES and p.is_floating_point() for p in parameters)
    return torch.optim.Adam(
        parameters, lr=method.learning_rate_init if learning_rate is None else learning_rate, betas=(method.beta_1, method.beta_2), fused=fused or None
    )


_FUSED_ADAM_DEVICES = frozenset({"cpu", "cuda"})
