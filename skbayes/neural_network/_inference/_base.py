"""The interface every inference method of the Bayesian MLPs implements."""

import torch

from ..._training import fit_loop
from ...nn import kl_warmup_weight, negative_elbo

__all__ = ["InferenceMethod"]


class InferenceMethod:
    """How one inference method builds, trains and exposes a Bayesian MLP.

    The estimator creates one instance per ``fit`` and reads the method's
    settings from its own parameters (``self.estimator``). After :meth:`fit`
    the estimator predicts from ``module["network"]`` only, through its
    ``sample_parameters(n_samples, generator)`` and
    ``forward_with(x, parameters)``; a network with a finite set of members
    (an ensemble, kept Monte-Carlo samples) also has ``n_members`` and
    ``member_parameters(index=None)`` and is predicted with all its members.

    The default implementation is gradient-based variational inference:
    Adam on the per-datum negative ELBO (:meth:`loss`) in the shared
    training loop, with the optional linear KL warm-up of
    ``kl_warmup_epochs``.

    Parameters
    ----------
    estimator : BaseBayesianMLP
        The estimator being fitted (its parameters are already validated).
    """

    #: Whether :class:`~skbayes.BayesianMLPClassifier` can use the method.
    supports_classification = True
    #: Epochs run when the estimator's ``max_iter`` is ``"auto"``.
    default_max_iter = 500
    #: Whether the method stops on a validation score (``early_stopping``);
    #: if not, the estimator holds no rows out.
    supports_early_stopping = True

    def __init__(self, estimator):
        self.estimator = estimator
        #: Method-specific diagnostics set by :meth:`fit` (e.g. R-hat); the
        #: estimator stores each as a fitted attribute ``<name>_``.
        self.diagnostics = {}
        #: True when ``fit`` continues from a previous fit (``warm_start``).
        self.warm_started = False

    def build_network(self, n_features, hidden_sizes, n_outputs, *, generator, device, dtype):
        """The untrained network, a :class:`torch.nn.Module`."""
        raise NotImplementedError

    def can_warm_start(self, module):
        """Whether a fitted ``module`` can continue under the current settings."""
        return True

    def n_likelihood_members(self):
        """None for one noise level shared by all draws, else the number of members."""
        return None

    def make_optimizer(self, module):
        """Adam over all trainable parameters, with the estimator's settings."""
        est = self.estimator
        return torch.optim.Adam(
            module.parameters(), lr=est.learning_rate_init, betas=(est.beta_1, est.beta_2)
        )

    def kl_weight(self, step, n_batches):
        """Weight of the KL term at optimiser step ``step`` (linear warm-up)."""
        return kl_warmup_weight(step, n_batches * self.estimator.kl_warmup_epochs)

    def loss(self, module, x, y, n_data, kl_weight, generator):
        """Per-datum negative ELBO of one minibatch, the KL scaled by ``kl_weight``.

        Parameters
        ----------
        module : torch.nn.ModuleDict
            With ``"network"`` and ``"likelihood"``.
        x : torch.Tensor of shape (batch_size, n_features)
        y : torch.Tensor of shape (batch_size, n_outputs)
        n_data : int
            Number N of training rows; the KL is divided by N (Gal 2016, eq. 3.2).
        kl_weight : float
        generator : torch.Generator

        Returns
        -------
        loss : torch.Tensor, scalar
        """
        network, likelihood = module["network"], module["likelihood"]
        n_mc = self.estimator.n_samples_train
        f = network(x.expand(n_mc, *x.shape), generator=generator)
        return negative_elbo(likelihood.log_prob(y, f), kl_weight * network.kl(), n_data)

    def fit(self, module, X, Y, *, noise_generator, loop):
        """Train ``module`` on the tensors X (n, d) and Y (n, k) in the shared loop.

        ``loop`` holds the keyword arguments of
        :func:`skbayes._training.fit_loop` chosen by the estimator.

        Returns
        -------
        result : skbayes._training.TrainingResult
        """
        n_data = X.shape[0]
        n_batches = -(-n_data // loop["batch_size"])
        step = [0]

        def loss_fn(idx):
            weight = self.kl_weight(step[0], n_batches)
            step[0] += 1
            return self.loss(module, X[idx], Y[idx], n_data, weight, noise_generator)

        # the loss rises while the KL weight warms up: stopping waits for it
        return fit_loop(loss_fn, self.make_optimizer(module), min_iter=self.estimator.kl_warmup_epochs, **loop)
