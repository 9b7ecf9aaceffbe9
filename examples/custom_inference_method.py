"""A new inference method in 40 lines: a snapshot ensemble.

Adam trains one network on its MAP loss (the negative log-likelihood of the
estimator's noise model, Student-t under the regressor's default
``noise="auto"``, plus the N(0, prior_scale^2) weight penalty, divided by N) for
``burn_in`` epochs, then keeps a copy of the weights at the end of each of the
next ``n_snapshots`` epochs; the estimator predicts with the uniform mixture
of the snapshots, like a deep ensemble of one run (Huang et al. 2017,
"Snapshot ensembles: train 1, get M for free", without the cyclic learning
rate). It shows the three parts of the interface of
``skbayes.inference.InferenceMethod``: ``build_network``, ``prepare`` (a loss,
an optimiser, callbacks and loop overrides) and ``finish`` (diagnostics).
``doc/adding_an_inference_method.md`` explains each step.

Run: ``python examples/custom_inference_method.py``.
"""

from numbers import Integral

import numpy as np
import torch

from skbayes import BayesianMLPRegressor
from skbayes._param_validation import Interval
from skbayes.callbacks import Callback
from skbayes.inference import InferenceMethod, Training
from skbayes.inference._base import adam
from skbayes.inference._loop import ADAM_CONSTRAINTS
from skbayes.nn import StackedMLP, negative_elbo


class KeepWeights(Callback):
    """Copy the network's weights at the end of every epoch after ``burn_in``."""

    def __init__(self, network, burn_in):
        self.network, self.burn_in, self.snapshots = network, burn_in, []

    def on_epoch_end(self, state):
        if state.epoch + 1 > self.burn_in:
            self.snapshots.append([layer.weight.detach().clone() for layer in self.network.layers])


class SnapshotEnsemble(InferenceMethod):
    """Snapshots of one Adam run, predicted as a uniform mixture.

    Parameters
    ----------
    n_snapshots : int, default=5
        Epochs (after the burn-in) whose weights are kept.
    burn_in : int, default=100
        Epochs before the first snapshot.
    learning_rate_init : float, default=3e-3
        Step size of Adam.
    beta_1, beta_2 : float in [0, 1), default=0.9, 0.999
        Decay rates of Adam's moment estimates.
    """

    _parameter_constraints = {
        **ADAM_CONSTRAINTS,  # learning_rate_init, beta_1, beta_2, validated like the built-in methods'
        "n_snapshots": [Interval(Integral, 1, None, closed="left")],
        "burn_in": [Interval(Integral, 0, None, closed="left")],
    }
    supports_early_stopping = False  # the schedule is fixed

    def __init__(self, n_snapshots=5, burn_in=100, *, learning_rate_init=3e-3, beta_1=0.9, beta_2=0.999):
        self.n_snapshots = n_snapshots
        self.burn_in = burn_in
        self.learning_rate_init = learning_rate_init
        self.beta_1 = beta_1
        self.beta_2 = beta_2

    def build_network(self, n_features, n_outputs, settings, *, generator, device, dtype):
        # One member now; finish() replaces it by the snapshots.
        return StackedMLP(
            n_features, settings.hidden_layer_sizes, n_outputs, n_members=1, activation=settings.activation,
            prior_scale=settings.prior_scale, generator=generator, device=device, dtype=dtype,
        )

    def prepare(self, module, X, Y, settings, context):
        network, likelihood = module["network"], module["likelihood"]
        keep = KeepWeights(network, self.burn_in)

        def loss_fn(idx):  # per-datum negative log posterior of the minibatch
            return negative_elbo(likelihood.log_prob(Y[idx], network(X[idx])), network.neg_log_prior(), context.n_data)

        def finish():
            weights = [torch.cat([s[i] for s in keep.snapshots]) for i in range(len(network.layers))]
            module["network"] = StackedMLP.from_weights(
                weights, activation=network.activation, prior_scale=network.prior_scale
            )
            return {"n_snapshots": len(keep.snapshots)}

        # A fixed schedule: the method has no max_iter / n_iter_no_change parameters, so its loop says it.
        loop = {"max_iter": self.burn_in + self.n_snapshots, "n_iter_no_change": None}
        optimizer = adam(module.parameters(), self)  # Adam with this method's learning_rate_init, beta_1, beta_2
        return Training(loss_fn, optimizer, callbacks=[keep], loop=loop, finish=finish)


def main():
    rng = np.random.RandomState(0)
    X = rng.uniform(-3, 3, size=(200, 1))
    y = np.sin(X[:, 0]) + 0.1 * rng.randn(200)
    model = BayesianMLPRegressor(inference=SnapshotEnsemble(n_snapshots=10, burn_in=200), random_state=0)
    model.fit(X, y)
    mean, std = model.predict(np.array([[0.0], [6.0]]), return_std=True)
    print(f"snapshots kept: {model.inference_diagnostics_['n_snapshots']}")
    print(f"x = 0 (in the data):  mean {mean[0]:+.3f}, std {std[0]:.3f}")
    print(f"x = 6 (outside):      mean {mean[1]:+.3f}, std {std[1]:.3f}")


if __name__ == "__main__":
    main()
