"""Black-box VI with Gaussian families beyond mean field and the score-function or reparameterisation gradient."""

from numbers import Integral, Real

from .._param_validation import Interval, StrOptions
from ..nn.bbvi import FAMILIES, linear_surrogate, n_family_parameters, score_function_gradient
from ..nn.networks.flat import FlatGaussianMLP
from ._base import InferenceMethod, Training, adam
from ._loop import ADAM_CONSTRAINTS, PREDICT_CONSTRAINTS, STOPPING_CONSTRAINTS, method_doc

__all__ = ["BlackBoxVI"]

# Most variational parameters of a fit: the full-rank family of a network with m weights has m + m(m+1)/2.
_MAX_VARIATIONAL_PARAMETERS = 2_000_000
# family="auto": full rank up to this many weights, low rank above.
_AUTO_FULL_RANK_WEIGHTS = 500


@method_doc()
class BlackBoxVI(InferenceMethod):
    r"""Black-box variational inference over all weights jointly, with a full-rank or low-rank Gaussian.

    q(z) is a Gaussian over the flattened weights and biases z of the whole
    network, of the family ``family``: mean field (eq. 2.74), full rank
    N(mu, L L\ :sup:`T`) (eq. 2.75) or low rank plus diagonal
    N(mu, B B\ :sup:`T` + diag(c\ :sup:`2`)) (eq. 2.76), so that the
    posterior correlations between weights are kept (Bruno 2021, section
    2.3; see :mod:`skbayes.nn.bbvi`). It is fitted by Adam on a minibatch
    estimate of the negative ELBO per datum, the likelihood term scaled by
    N / B ("doubly stochastic"), with one of two gradients:

    - ``gradient="reparameterization"`` (default): z = mu + L eps, the
      pathwise gradient (eq. 2.73), with the KL to the N(0,
      ``prior_scale``\ :sup:`2` I) prior in closed form;
    - ``gradient="score"``: the score-function (REINFORCE) gradient of
      Algorithm 7 (eqs. 2.63-2.64), which needs only log p(x, z), with the
      per-coordinate control variate of eqs. 2.65-2.70
      (:func:`skbayes.nn.bbvi.score_function_gradient`). Its variance is
      far larger (``examples/benchmarks/bbvi_gradient_variance.py``): it is
      here to measure that, and for models whose log-density has no
      gradient in z.

    The noise level (regression) is learned by its own pathwise gradient in
    both cases (type-II maximum likelihood). For small networks and linear
    models: the full-rank family holds m(m + 1)/2 values for m weights and
    is refused beyond 2,000,000 variational parameters. Prediction draws
    ``n_mc_predict`` weight vectors from q. ``inference_diagnostics_``
    holds ``kl`` (KL(q || prior), nats) and ``n_variational_parameters``.

    Parameters
    ----------
    family : {"auto", "full_rank", "low_rank", "mean_field"}, default="auto"
        The Gaussian family of q; ``"auto"``: full rank for networks of up
        to 500 weights (a linear model, a small MLP), low rank above (the
        default 50 x 50 MLP of 8 features has 3,101).
    gradient : {"reparameterization", "score"}, default="reparameterization"
        The Monte-Carlo estimator of the ELBO's gradient.
    rank : int, default=5
        Columns f of the low-rank factor B (``family="low_rank"``).
    n_mc_train : int, default=10
        Draws of z per minibatch step (S of eq. 2.64; at least 3 for the
        control variate, which is estimated leaving each draw out).
    control_variate : bool, default=True
        Use the control variate with ``gradient="score"``.
    posterior_init_scale : float, default=1e-2
        Initial standard deviation of every coordinate of q.
    %(adam_parameters)s
    %(stopping_parameters)s
    %(predict_parameters)s

    Raises
    ------
    ValueError
        At fit: for a torch ``module=``, when the family would have more
        than 2,000,000 variational parameters (use ``"low_rank"``), and for
        the score gradient's control variate with ``n_mc_train`` < 3.

    References
    ----------
    .. [Ranganath2014] R. Ranganath, S. Gerrish and D. M. Blei, "Black box
       variational inference", AISTATS 2014.
    .. [Ong2018] V. M.-H. Ong, D. J. Nott and M. S. Smith, "Gaussian
       variational approximation with a factor covariance structure", JCGS
       2018.

    Examples
    --------
    >>> from skbayes import BayesianMLPRegressor
    >>> from skbayes.inference import BlackBoxVI
    >>> BayesianMLPRegressor(hidden_layer_sizes=(10,), inference=BlackBoxVI(family="full_rank"))
    BayesianMLPRegressor(hidden_layer_sizes=(10,),
                         inference=BlackBoxVI(family='full_rank'))
    """

    auto_noise = "homoscedastic"

    _parameter_constraints = {
        **ADAM_CONSTRAINTS,
        **STOPPING_CONSTRAINTS,
        **PREDICT_CONSTRAINTS,
        "family": [StrOptions({"auto", *FAMILIES})],
        "gradient": [StrOptions({"reparameterization", "score"})],
        "rank": [Interval(Integral, 1, None, closed="left")],
        "n_mc_train": [Interval(Integral, 1, None, closed="left")],
        "control_variate": ["boolean"],
        "posterior_init_scale": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(
        self, family="auto", gradient="reparameterization", *, rank=5, n_mc_train=10, control_variate=True,
        posterior_init_scale=1e-2, learning_rate_init=3e-3, beta_1=0.9, beta_2=0.999, max_iter=500,
        early_stopping="auto", validation_fraction=0.1, n_iter_no_change="auto", tol=1e-4, n_mc_predict=100,
    ):
        self.family = family
        self.gradient = gradient
        self.rank = rank
        self.n_mc_train = n_mc_train
        self.control_variate = control_variate
        self.posterior_init_scale = posterior_init_scale
        self.learning_rate_init = learning_rate_init
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.max_iter = max_iter
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.n_mc_predict = n_mc_predict

    def _family(self, n_weights):
        """The family in use: ``family``, ``"auto"`` resolved by the number of weights."""
        if self.family == "auto":
            return "full_rank" if n_weights <= _AUTO_FULL_RANK_WEIGHTS else "low_rank"
        return self.family

    def build_network(self, n_features, n_outputs, settings, *, generator, device, dtype):
        sizes = [n_features, *settings.hidden_layer_sizes, n_outputs]
        m = sum((a + 1) * b for a, b in zip(sizes[:-1], sizes[1:]))
        family = self._family(m)
        count = n_family_parameters(family, m, self.rank)
        if count > _MAX_VARIATIONAL_PARAMETERS:
            raise ValueError(f"BlackBoxVI(family={family!r}) would hold {count} variational parameters for "
                             f"{m} weights (at most {_MAX_VARIATIONAL_PARAMETERS}); use family='low_rank' or a "
                             "smaller network.")
        return FlatGaussianMLP(n_features, settings.hidden_layer_sizes, n_outputs, family=family,
                               rank=self.rank, activation=settings.activation, prior_scale=settings.prior_scale,
                               init_scale=self.posterior_init_scale, generator=generator, device=device,
                               dtype=dtype)

    def can_warm_start(self, module):
        posterior = module["network"].posterior
        return (posterior.family == self._family(posterior.n_params)
                and getattr(posterior, "rank", self.rank) == self.rank)

    def prepare(self, module, X, Y, settings, context):
        if self.gradient == "score" and self.control_variate and self.n_mc_train < 3:
            raise ValueError("BlackBoxVI(gradient='score', control_variate=True) estimates the control variate of "
                             f"each draw on the others: n_mc_train must be at least 3; got {self.n_mc_train}.")
        network, likelihood = module["network"], module["likelihood"]
        n_mc, n_data, generator = self.n_mc_train, context.n_data, context.generator
        posterior = network.posterior

        def reparameterization_loss(idx):
            f = network.forward_with(X[idx], network.sample_parameters(n_mc, generator))
            return -likelihood.log_prob(Y[idx], f).mean() + network.kl() / n_data

        def score_loss(idx):
            z = posterior.rsample(n_mc, generator).detach()
            log_lik = likelihood.log_prob(Y[idx], network.forward_with(X[idx], network.unflatten(z)))  # (S, B)
            prior = posterior.prior(settings.prior_scale).log_prob(z)  # (S,)
            log_joint = log_lik.detach().mean(-1) * n_data + prior
            gradient, elbo = score_function_gradient(posterior, z, log_joint, control_variate=self.control_variate)
            # the noise by its pathwise gradient (z fixed); the posterior by the score estimate; the value is
            # the negative ELBO estimate per datum
            surrogate = -log_lik.mean() - linear_surrogate(posterior.parameters(), gradient) / n_data
            return surrogate + (-elbo / n_data - surrogate.detach())

        loss_fn = score_loss if self.gradient == "score" else reparameterization_loss
        return Training(
            loss_fn,
            adam(module.parameters(), self),
            finish=lambda: {"kl": float(network.kl().detach()),
                            "n_variational_parameters": n_family_parameters(posterior.family, posterior.n_params,
                                                                            self.rank)},
        )
