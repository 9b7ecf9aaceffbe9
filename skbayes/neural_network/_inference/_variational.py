"""Gradient-based variational inference: Bayes by Backprop and MC dropout."""

from ...nn import INITIALIZATIONS, BayesianMLP
from ._base import InferenceMethod

__all__ = ["MCDropout", "MeanFieldVI"]


class _BayesianMLPMethod(InferenceMethod):
    """Builds a :class:`~skbayes.nn.BayesianMLP` with the estimator's settings."""

    layer_type = None

    def build_network(self, n_features, hidden_sizes, n_outputs, *, generator, device, dtype):
        est = self.estimator
        return BayesianMLP(
            n_features,
            hidden_sizes,
            n_outputs,
            inference=self.layer_type,
            activation=est.activation,
            prior_scale=est.prior_scale,
            posterior_init_scale=est.posterior_init_scale,
            dropout_rate=est.dropout_rate,
            generator=generator,
            device=device,
            dtype=dtype,
        ).to(device)


def initialize_mean_field(estimator, module, X, Y, generator):
    """Apply ``estimator.init`` (a key of INITIALIZATIONS) to a mean-field network."""
    likelihood = module["likelihood"]
    noise_std = likelihood.noise_std.detach() if hasattr(likelihood, "noise_std") else None
    INITIALIZATIONS[estimator.init](
        module["network"], X, Y, prior_scale=estimator.prior_scale, noise_std=noise_std, generator=generator
    )


class MeanFieldVI(_BayesianMLPMethod):
    """Mean-field Gaussian VI, Bayes by Backprop with local reparameterisation.

    Blundell et al. 2015 (Cinelli 2019, section 3.3.3); the posterior can be
    initialised by ``estimator.init`` (e.g. layer-wise Bayesian linear
    regression, Rossi 2022, chapter 3) before Adam maximises the ELBO.
    """

    layer_type = "mfvi"

    def fit(self, module, X, Y, *, noise_generator, loop):
        if not self.warm_started:
            initialize_mean_field(self.estimator, module, X, Y, noise_generator)
        return super().fit(module, X, Y, noise_generator=noise_generator, loop=loop)


class MCDropout(_BayesianMLPMethod):
    """MC dropout: Bernoulli variational distribution over weight rows (Gal 2016, ch. 3)."""

    layer_type = "mc_dropout"
