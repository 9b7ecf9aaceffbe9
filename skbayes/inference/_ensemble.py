"""Deep ensembles: M independently initialised networks trained jointly (Lakshminarayanan et al. 2017)."""

from numbers import Integral

import torch

from .._param_validation import Interval
from ..nn import StackedMLP
from ..nn.networks.module import StackedModuleNetwork
from ._base import InferenceMethod, Training, adam, module_seeds
from ._loop import ADAM_CONSTRAINTS, STOPPING_CONSTRAINTS, method_doc

__all__ = ["DeepEnsemble", "StackedMLPMethod"]


def member_row_orders(n_members, n_rows, generator):
    """One fixed random permutation of the training rows per member, shape (M, n).

    The training loop draws one minibatch of row positions ``idx`` per step;
    member m trains on the rows ``orders[m, idx]``. Each epoch every member
    still sees every row once, in a random partition of its own, so the
    members get different minibatches (as if trained separately) at the cost
    of one gather.
    """
    device = generator.device
    return torch.stack([torch.randperm(n_rows, generator=generator, device=device) for _ in range(n_members)])


def sum_gradient_mean_value(member_losses):
    """A scalar whose value is the mean of ``member_losses`` and whose gradient is their sum.

    Each member's parameters enter only its own loss, so the gradient of the
    sum is, for every member, the gradient of its own loss: the members train
    exactly as if each were alone, while the value reported in the loss curve
    stays on the per-member (per-datum) scale.
    """
    total = member_losses.sum()
    return total + (member_losses.detach().mean() - total.detach())


def member_losses(module, x, y, n_data):
    """Per-datum negative log posterior of each member, shape (M,).

    ``-mean_i log p(y_i | x_i, w_m) + (-log p(w_m)) / N``: the MAP loss of
    member m (weight decay from the N(0, prior_scale^2) prior), with the
    member's own noise level when the likelihood has one per member, and the
    prior of the likelihood's parameters when it has one
    (:meth:`skbayes.nn.StudentTLikelihood.neg_log_prior`; the noise level has
    a flat prior on its raw value).

    Parameters
    ----------
    x : torch.Tensor of shape (M, batch_size, n_features)
    y : torch.Tensor of shape (M, batch_size, n_outputs)
    """
    network, likelihood = module["network"], module["likelihood"]
    log_lik = likelihood.log_prob(y, network(x))  # (M, batch_size)
    neg_log_prior = network.member_neg_log_prior()
    if hasattr(likelihood, "neg_log_prior"):
        neg_log_prior = neg_log_prior + likelihood.neg_log_prior()
    return -log_lik.mean(dim=-1) + neg_log_prior / n_data


class StackedMLPMethod(InferenceMethod):
    """Base of the methods whose network is a :class:`~skbayes.nn.StackedMLP`.

    Its members (ensemble members, sampler chains) each have their own noise
    level and their own row order, and train on their own per-datum MAP loss
    (or potential energy / N). Subclasses say how many members to build.
    """

    def n_members(self):
        """Number of members to build."""
        raise NotImplementedError

    def build_network(self, n_features, n_outputs, settings, *, generator, device, dtype):
        return StackedMLP(
            n_features,
            settings.hidden_layer_sizes,
            n_outputs,
            n_members=self.n_members(),
            activation=settings.activation,
            prior_scale=settings.prior_scale,
            generator=generator,
            device=device,
            dtype=dtype,
        )

    def n_likelihood_members(self):
        return self.n_members()

    def build_module_network(self, n_features, n_outputs, settings, *, generator, device, dtype):
        modules = [
            settings.module(seed, n_features, n_outputs, device, dtype)
            for seed in module_seeds(generator, self.n_members())
        ]
        return StackedModuleNetwork(
            modules, n_features, n_outputs, input_shape=settings.input_shape, prior_scale=settings.prior_scale
        )

    @staticmethod
    def member_loss_fn(module, X, Y, n_data, generator):
        """``loss_fn(idx)`` for the shared loop: each member on its own rows of X (n, d), Y (n, k).

        The value is the members' mean per-datum loss, the gradient that of
        their sum, so every member trains as if alone.
        """
        orders = member_row_orders(module["network"].n_members, X.shape[0], generator)

        def loss_fn(idx):
            rows = orders[:, idx]  # (M, batch_size)
            return sum_gradient_mean_value(member_losses(module, X[rows], Y[rows], n_data))

        return loss_fn


@method_doc()
class DeepEnsemble(StackedMLPMethod):
    """Deep ensemble of MAP networks [Lakshminarayanan2017]_.

    Every member is a deterministic MLP with its own random initialisation
    (:class:`~skbayes.nn.StackedMLP`), its own noise parameters
    (regression) and its own minibatch order, trained by Adam on its own
    per-datum MAP loss: the negative log-likelihood of the noise model plus
    the N(0, ``prior_scale^2``) weight penalty (and, for Student-t noise,
    the prior of the degrees of freedom) divided by N. All members are
    trained together, in one shared training loop, one batched matrix
    product per layer; since each member's parameters enter only its own
    loss, this is the same as training them one after the other (Adam is
    per parameter), up to the shared stopping epoch: training stops when
    the members' *mean* loss stops improving.

    The predictive distribution is the uniform mixture of the members,
    p(y | x) = (1/M) sum_m p_m(y | f_m(x)), e.g. N(y | f_m(x), sigma_m^2)
    for Gaussian noise; its variance is the mean noise variance (aleatoric)
    plus the spread of the member means (epistemic). Each member has one
    noise scale per output: Student-t (with its own degrees of freedom)
    under ``BayesianMLPRegressor``'s default ``noise="auto"``, Gaussian with
    ``noise="homoscedastic"``; with ``noise="heteroscedastic"`` each member
    outputs its noise level too, the model of the paper (eq. 1). There is no
    adversarial training.
    ``inference_diagnostics_`` holds ``neg_log_prior``, the summed
    sum(w^2) / (2 prior_scale^2) of all members.

    Parameters
    ----------
    n_estimators : int, default=5
        Number M of independently initialised networks.
    %(adam_parameters)s
    %(stopping_parameters)s

    References
    ----------
    .. [Lakshminarayanan2017] B. Lakshminarayanan, A. Pritzel and C. Blundell,
       "Simple and scalable predictive uncertainty estimation using deep
       ensembles", NeurIPS 2017.
    """

    _parameter_constraints = {
        **ADAM_CONSTRAINTS,
        **STOPPING_CONSTRAINTS,
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(
        self, n_estimators=5, *, learning_rate_init=3e-3, beta_1=0.9, beta_2=0.999, max_iter=500,
        early_stopping="auto", validation_fraction=0.1, n_iter_no_change="auto", tol=1e-4,
    ):
        self.n_estimators = n_estimators
        self.learning_rate_init = learning_rate_init
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.max_iter = max_iter
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol

    def n_members(self):
        return self.n_estimators

    def can_warm_start(self, module):
        return module["network"].n_members == self.n_estimators

    def prepare(self, module, X, Y, settings, context):
        network = module["network"]
        return Training(
            self.member_loss_fn(module, X, Y, context.n_data, context.generator),
            adam(module.parameters(), self),
            finish=lambda: {"neg_log_prior": float(network.neg_log_prior().detach())},
        )
