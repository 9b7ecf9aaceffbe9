"""The Laplace approximation at the MAP, with its evidence tuning the prior and the noise (Daxberger et al. 2021)."""

import math
import warnings

import torch

from .._param_validation import StrOptions
from ..callbacks import Callback
from ..nn import GaussianLikelihood
from ..nn.functional import inverse_softplus
from ..nn.ggn import (
    fisher_root, ggn_eigenbases, glm_predictive_variance, laplace_log_evidence, maximize_prior_precision,
    mlp_jacobian_factors,
)
from ..nn.laplace import (
    held_out_noise_variance, last_layer_log_evidence, last_layer_posterior, maximize_last_layer_evidence, noise_floor,
)
from ..nn.networks.laplace import (
    LastLayerLaplaceMLP, LinearizedLaplaceMLP, ModuleLastLayerLaplace, last_hidden_features, last_linear,
    module_last_layer_features,
)
from ._base import Training, adam
from ._ensemble import StackedMLPMethod
from ._loop import ADAM_CONSTRAINTS, PREDICT_CONSTRAINTS, STOPPING_CONSTRAINTS, method_doc

__all__ = ["Laplace"]

# Rows per block when the features of the training rows are computed.
_FEATURE_BLOCK = 8192
# Fewest held-out rows the noise is estimated on; with fewer, the training rows' evidence sets it.
_MIN_TUNING_ROWS = 10
# Rounds of (delta by the evidence, noise by the held-out rows).
_NOISE_ROUNDS = 10
# Bisection steps of the noise of subset="all" (in log c over [-14, 0]: to 1e-8 of its range).
_NOISE_BISECTIONS = 40
# Most weights of hessian="full" over all weights (a P x P matrix and its eigendecomposition).
_MAX_FULL_WEIGHTS = 4000
# prior_tuning="online": the epochs before the first evidence update, and the epochs between two.
_ONLINE_BURN_IN = 10
_ONLINE_EVERY = 5


def _held_out_rows(context):
    """The stopping rule's held-out rows (X_val, Y_val) when there are enough to estimate the noise on, else None."""
    if context.validation is not None and context.validation[0].shape[0] >= _MIN_TUNING_ROWS:
        return context.validation
    return None


def _set_noise(likelihood, noise_var):
    """Write the noise variances (k,) into a Gaussian likelihood's raw parameter."""
    raw = likelihood.raw_noise
    raw.copy_(inverse_softplus(noise_var.sqrt() - likelihood._floor).to(raw.dtype))


def _ggn_factors(raw_factors, likelihood, classification):
    """``factors(rows) -> (f, inputs, grads)``, the output gradients weighted by the root of the likelihood's GGN.

    Categorical: Lambda_i = diag(p) - p p^T = M_i^T M_i with
    M_i = diag(sqrt p) - sqrt(p) p^T; Student-t and heteroscedastic noise:
    the diagonal Fisher of the outputs (:func:`skbayes.nn.ggn.fisher_root`);
    Gaussian: unweighted (its noise precision enters
    :func:`skbayes.nn.ggn.ggn_eigenbases`).
    """
    gaussian = not classification and isinstance(likelihood, GaussianLikelihood)

    def factors(rows):
        f, inputs, grads = raw_factors(rows)
        if classification:
            p = torch.softmax(f, dim=-1)
            root = torch.diag_embed(p.sqrt()) - p.sqrt()[:, :, None] * p[:, None, :]
            grads = [root @ g for g in grads]
        elif not gaussian:
            root = fisher_root(likelihood, f)  # (n, w)
            grads = [root[:, :, None] * g for g in grads]
        return f, inputs, grads

    return factors


def _row_blocks(factors, rows):
    """The (inputs, grads) of ``rows`` in blocks of _FEATURE_BLOCK rows, for :func:`skbayes.nn.ggn.ggn_eigenbases`."""
    for i in range(0, rows.shape[0], _FEATURE_BLOCK):
        yield factors(rows[i:i + _FEATURE_BLOCK])[1:]


def _outputs(factors, rows):
    """The network's outputs f of ``rows``, block by block."""
    return torch.cat([factors(rows[i:i + _FEATURE_BLOCK])[0] for i in range(0, rows.shape[0], _FEATURE_BLOCK)])


def _layer_precisions(network, settings):
    """delta_l = 1 / s_l^2 of each layer of the MLP's prior, shape (L,), float64 (s_l its layer prior scale)."""
    scales = network.weight_prior_scales
    if scales is None:
        return torch.full((len(network.layers),), 1.0 / settings.prior_scale**2, dtype=torch.float64,
                          device=network.layers[0].weight.device)
    return scales[0].detach().double().square().reciprocal()


class OnlineEvidence(Callback):
    """The online marginal-likelihood tuning of ``Laplace(prior_tuning="online")`` (Immer et al. 2021, Algorithm 1).

    After epoch ``_ONLINE_BURN_IN`` and every ``_ONLINE_EVERY`` epochs after
    it, at the current weights: the GGN of all the MLP's weights on the
    training rows (``hessian``) at the likelihood's current noise, then the
    prior precision of each layer that maximises the Laplace evidence
    (:func:`skbayes.nn.ggn.maximize_prior_precision`). They become the
    training objective's prior (``set_layer_prior_scales``) until the next
    update; the network's weights and noise keep training under them.
    """

    def __init__(self, module, X, settings, hessian):
        self.module, self.X, self.settings = module, X, settings
        self.hessian = hessian
        self.n_updates, self.n_iter = 0, 0

    def on_train_begin(self, state):
        network = self.module["network"]
        if network.weight_prior_scales is None:  # the buffers exist from the start: a restored state has them
            scales = torch.full((len(network.layers),), self.settings.prior_scale, dtype=network.layers[0].weight.dtype,
                                device=network.layers[0].weight.device)
            network.set_layer_prior_scales(scales, scales)

    def on_epoch_end(self, state):
        done = state.epoch + 1 - _ONLINE_BURN_IN
        if done >= 0 and done % _ONLINE_EVERY == 0:
            self.update()

    @torch.no_grad()
    def update(self):
        """One evidence maximisation at the current weights; sets the layer prior scales."""
        network, likelihood = self.module["network"], self.module["likelihood"]
        weights = [layer.weight.detach()[0].double() for layer in network.layers]
        factors = _ggn_factors(lambda rows: mlp_jacobian_factors(rows.double(), weights, self.settings.activation),
                               likelihood, self.settings.classification)
        precision = _layer_precisions(network, self.settings).to(weights[0].device)
        if self.hessian == "full":  # one precision for the network
            precision = precision[-1:]
        gaussian = not self.settings.classification and isinstance(likelihood, GaussianLikelihood)
        noise_precision = (likelihood.noise_variance().detach().double().reshape(-1).reciprocal() if gaussian
                           else torch.ones(weights[-1].shape[1], dtype=torch.float64, device=weights[-1].device))
        bases = ggn_eigenbases(_row_blocks(factors, self.X), noise_precision, self.hessian)
        precision, steps = maximize_prior_precision(weights, bases, precision)
        scales = precision.expand(len(weights)).rsqrt().to(network.layers[0].weight.dtype)
        network.set_layer_prior_scales(scales, scales)
        self.n_updates += 1
        self.n_iter += steps


@method_doc()
class Laplace(StackedMLPMethod):
    r"""Laplace approximation at the MAP network (last layer or all weights), the prior and noise tuned by the evidence.

    The network is trained to its maximum a posteriori (MAP) weights through
    the shared loop (Adam on the per-datum negative log posterior with the
    N(0, ``prior_scale``\ :sup:`2`) prior, as one member of
    :class:`DeepEnsemble`). Then the hidden layers are fixed and the last
    layer gets the Gaussian posterior of the Laplace approximation
    (Daxberger et al. 2021, eqs. 3-4, the last-layer subset of section 3.2):
    with phi(x) the last hidden activations and a constant, output j is
    linear in its weights, so the generalised Gauss-Newton matrix equals the
    Hessian, A_j = delta_j I + Phi^T Phi / sigma_j^2, and the approximation is
    exact given phi (see :mod:`skbayes.nn.laplace`).

    With ``prior_tuning="post_hoc"`` (the default) the prior precision
    delta (one for the layer) and the noise variance sigma_j^2 of each output
    (delta alone when ``noise_std`` is fixed) are set to the maximum of the
    Laplace evidence (post-hoc marginal-likelihood tuning, Immer et al.
    2021), found by MacKay's fixed point; the last layer's mean is then the
    posterior mean under the tuned prior. delta maximises the evidence of
    the training rows. When the stopping rule holds rows out
    (``validation_fraction``, at least 10 of them; ``early_stopping`` is
    True by default here), sigma_j^2 is instead the moment estimate on those
    rows, whose features the MAP fit was not trained on
    (:func:`skbayes.nn.laplace.held_out_noise_variance`), alternated with
    delta for ten rounds. The training rows' own estimate is too small, as
    the hidden layers have fitted their residuals (bostonHousing split 0,
    500 epochs: sigma 0.55 against a test RMSE of 2.5). With no hidden
    layer and ``early_stopping=False`` this is Bayesian linear regression at
    its evidence maximum, what :class:`~sklearn.linear_model.BayesianRidge`
    computes (on the standardised targets). The posterior is that of the
    training rows. With ``prior_tuning=None``, delta =
    1 / ``prior_scale``\ :sup:`2` and sigma_j is the MAP's noise.

    Prediction draws ``n_mc_predict`` last layers from the posterior (the
    linearised predictive is exact for a linear last layer; the draws give
    the estimators' mixture, quantiles and ``sample_y``).

    With ``subset="all"`` every weight gets a posterior: the generalised
    Gauss-Newton (GGN) matrix of the MAP network on the training rows, in
    the structure ``hessian`` (``"kron"``, KFAC, by default; ``"diag"``;
    ``"full"`` up to 4,000 weights), plus one prior precision per layer
    (one for ``"full"``), each set by the evidence's fixed point with the
    MAP weights held (post-hoc tuning, Immer et al. 2021), alternated with
    the noise of the held-out rows as above (``skbayes.nn.ggn``). It
    predicts by the linearised network f(x; theta_*) + J(x)(theta -
    theta_*) under draws of the posterior (the GLM predictive, Immer et al.
    2021, eq. 5), one tangent pass per draw. Without hidden layers the
    ``"kron"`` and ``"full"`` posteriors are exact Bayesian linear
    regression about the MAP weights.

    ``inference_diagnostics_`` holds ``prior_precision`` (delta, one for
    the layer, shared by the outputs; with ``subset="all"`` the mean over
    the layers; in standardised target units), ``log_evidence`` (the log
    marginal likelihood of the training rows, summed over the outputs,
    nats, standardised units: exact for the last layer, the Laplace
    approximation for all weights) and ``n_evidence_iter``.

    With :class:`~skbayes.BayesianMLPClassifier` the GGN is that of the
    softmax likelihood, Lambda_i = diag(p_i) - p_i p_i^T per row, over the
    last layer (the full matrix of its weights, the hidden layers at the
    MAP) or all weights; the predictive is the mean of the softmax of the
    linearised logits over ``n_mc_predict`` draws. A regressor's last layer
    in the ``"kron"`` or ``"diag"`` structure goes the same way.

    With a torch ``module=`` the posterior is on the module's last
    :class:`torch.nn.Linear` (``subset="last_layer"``; the module's output
    must be that layer's), by the same GGN route, the rest of the module at
    its MAP (:class:`~skbayes.nn.networks.laplace.ModuleLastLayerLaplace`).

    Regression takes every noise model. With Gaussian noise
    (``noise="homoscedastic"``, its ``noise="auto"``) the noise is tuned as
    above; with Student-t or heteroscedastic noise the GGN weighs the
    outputs by the likelihood's Fisher information at the MAP
    (:func:`skbayes.nn.ggn.fisher_root`) and the noise parameters stay those of the MAP
    fit.

    With ``prior_tuning="online"`` the evidence also tunes the prior
    during the MAP fit (Immer et al. 2021, Algorithm 1, with MacKay's fixed
    point in place of the hyperparameter gradient steps): after epoch 10
    and every 5 epochs after it, the GGN of all the MLP's weights on the
    training rows (in the structure ``hessian`` for ``subset="all"``,
    KFAC for the last layer), at the current weights and noise, gives one
    prior precision per layer, which the MAP loss then uses
    (``set_layer_prior_scales``) until the next update; the post-hoc step
    above follows the fit. The paper's online update of the noise by the
    training rows' evidence was tried and not kept: it was overconfident
    on the UCI sets (wine-quality-red, test log-likelihood -12 to -19
    against -1.0 post hoc). Not for torch ``module=`` networks (ValueError
    at fit). ``inference_diagnostics_`` adds ``n_online_updates``; a fit
    that ends before epoch 10 warns that it had none.

    Parameters
    ----------
    subset : {"last_layer", "all"}, default="last_layer"
        The weights that get a posterior; the others stay at the MAP.
    hessian : {"auto", "kron", "diag", "full"}, default="auto"
        Structure of the Hessian (GGN) of the subset. ``"auto"``: ``"full"``
        for the last layer (for regression the exact P x P matrix per
        output, with the closed-form tuning above), ``"kron"`` (per-layer
        Kronecker factors, KFAC) for all weights.
    prior_tuning : {"post_hoc", "online"} or None, default="post_hoc"
        Maximise the evidence over the prior precision and the noise after
        the MAP fit (``"post_hoc"``), during it (``"online"``), or keep
        ``prior_scale`` and the MAP's noise (None).
    %(adam_parameters)s
    %(stopping_parameters)s
    %(predict_parameters)s

    Raises
    ------
    ValueError
        At fit: for ``hessian="full"`` over more than 4,000 weights, and
        for a torch module: with
        ``subset="all"`` or ``prior_tuning="online"``, or whose output is not its last nn.Linear's, or
        whose last nn.Linear has no bias.

    References
    ----------
    .. [Daxberger2021] E. Daxberger, A. Kristiadi, A. Immer, R. Eschenhagen,
       M. Bauer and P. Hennig, "Laplace Redux - effortless Bayesian deep
       learning", NeurIPS 2021.
    .. [Immer2021] A. Immer, M. Bauer, V. Fortuin, G. Rätsch and M. E. Khan,
       "Scalable marginal likelihood estimation for model selection in deep
       learning", ICML 2021.

    Examples
    --------
    >>> from skbayes import BayesianMLPRegressor
    >>> from skbayes.inference import Laplace
    >>> BayesianMLPRegressor(inference=Laplace(), noise="homoscedastic")
    BayesianMLPRegressor(inference=Laplace(), noise='homoscedastic')
    """

    supports_partial_fit = False
    noise_models = frozenset({"homoscedastic", "student_t", "heteroscedastic"})
    auto_noise = "homoscedastic"

    _parameter_constraints = {
        **ADAM_CONSTRAINTS,
        **STOPPING_CONSTRAINTS,
        **PREDICT_CONSTRAINTS,
        "subset": [StrOptions({"last_layer", "all"})],
        "hessian": [StrOptions({"auto", "full", "kron", "diag"})],
        "prior_tuning": [StrOptions({"post_hoc", "online"}), None],
    }

    def __init__(
        self, subset="last_layer", hessian="auto", prior_tuning="post_hoc", *, learning_rate_init=3e-3, beta_1=0.9,
        beta_2=0.999, max_iter=500, early_stopping=True, validation_fraction=0.1, n_iter_no_change="auto", tol=1e-4,
        n_mc_predict=100,
    ):
        self.subset = subset
        self.hessian = hessian
        self.prior_tuning = prior_tuning
        self.learning_rate_init = learning_rate_init
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.max_iter = max_iter
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.n_mc_predict = n_mc_predict

    def n_members(self):
        return 1

    def n_likelihood_members(self):
        return None

    def can_warm_start(self, module):
        return False  # the fitted network is the Laplace posterior, not the MAP network: refit

    def _post_hoc(self):
        """Whether the evidence tunes the posterior after the MAP fit: post hoc, and after online tuning too."""
        return self.prior_tuning in ("post_hoc", "online")

    def _hessian(self):
        """The structure in use: ``hessian``, ``"auto"`` being "full" for the last layer and "kron" for all weights."""
        if self.hessian == "auto":
            return "full" if self.subset == "last_layer" else "kron"
        return self.hessian

    def prepare(self, module, X, Y, settings, context):
        loss_fn = self.member_loss_fn(module, X, Y, context.n_data, context.generator)
        online = None  # the OnlineEvidence callback of prior_tuning="online"
        if self.prior_tuning == "online":
            if settings.module is not None:
                raise ValueError("Laplace(prior_tuning='online') tunes the prior of each layer of the MLP; with a "
                                 "torch module use prior_tuning='post_hoc' or None.")
            if self.subset == "all":
                self._check_full(sum(layer.weight[0].numel() for layer in module["network"].layers))
            online = OnlineEvidence(module, X, settings, self._hessian() if self.subset == "all" else "kron")
        exact = (not settings.classification and isinstance(module["likelihood"], GaussianLikelihood)
                 and self.subset == "last_layer" and self._hessian() == "full" and settings.module is None)

        def training(finish):
            def finish_online():
                diagnostics = finish()
                if online is not None:
                    diagnostics["n_online_updates"] = online.n_updates
                    diagnostics["n_evidence_iter"] += online.n_iter
                    if online.n_updates == 0:
                        warnings.warn(f"Laplace(prior_tuning='online'): training ended before epoch {_ONLINE_BURN_IN}, "
                                      "the first online update of the prior; it was tuned post hoc only. Raise "
                                      "max_iter or n_iter_no_change.", UserWarning, stacklevel=2)
                return diagnostics

            return Training(loss_fn, adam(module.parameters(), self), callbacks=[] if online is None else [online],
                            finish=finish_online)

        if not exact:
            return training(lambda: self._linearized(module, X, Y, settings, context))

        def finish():
            network, likelihood = module["network"], module["likelihood"]
            dtype = network.layers[0].weight.dtype
            weights = [layer.weight.detach()[0] for layer in network.layers]

            def features(rows):
                return torch.cat([last_hidden_features(rows[i:i + _FEATURE_BLOCK], weights[:-1], settings.activation)
                                  for i in range(0, rows.shape[0], _FEATURE_BLOCK)]).double()

            with torch.no_grad():
                phi, y = features(X), Y.double()
                held_out = _held_out_rows(context)
                if held_out is not None:
                    held_out = features(held_out[0]), held_out[1].double()
                noise_var = likelihood.noise_variance().detach().double().reshape(-1)
                precision = _layer_precisions(network, settings)[-1].expand_as(noise_var).clone()
                n_iter = 0
                learn_noise = likelihood.raw_noise.requires_grad
                if self._post_hoc():
                    if held_out is not None and learn_noise:
                        # delta by the evidence of the training rows at a given noise; the noise by the held-out
                        # rows, whose residuals the hidden layers were not fitted to; alternated
                        for _ in range(_NOISE_ROUNDS):
                            _, precision, steps = maximize_last_layer_evidence(phi, y, noise_var, precision,
                                                                               learn_noise=False)
                            n_iter += steps
                            mean, chol = last_layer_posterior(phi, y, noise_var, precision)
                            noise_var = held_out_noise_variance(*held_out, mean, chol)
                    else:
                        noise_var, precision, n_iter = maximize_last_layer_evidence(phi, y, noise_var, precision,
                                                                                    learn_noise=learn_noise)
                    if learn_noise:
                        _set_noise(likelihood, noise_var)
                mean, chol = last_layer_posterior(phi, y, noise_var, precision)
                evidence = last_layer_log_evidence(phi, y, noise_var, precision)
            module["network"] = LastLayerLaplaceMLP(weights[:-1], mean.to(dtype), chol.to(dtype), settings.activation)
            return {
                "prior_precision": float(precision[0]),
                "log_evidence": float(evidence.sum()),
                "n_evidence_iter": int(n_iter),
            }

        return training(finish)

    def _linearized(self, module, X, Y, settings, context):
        """Replace the MAP network by the linearised network with the GGN Laplace posterior of the subset."""
        network, likelihood = module["network"], module["likelihood"]
        hessian = self._hessian()
        if settings.module is not None:
            weights, raw_factors, build = self._module_last_layer(network)
        else:
            weights, raw_factors, build = self._mlp_subset(network, settings)
        self._check_full(sum(w.numel() for w in weights))
        classification = settings.classification
        gaussian = not classification and isinstance(likelihood, GaussianLikelihood)
        factors = _ggn_factors(raw_factors, likelihood, classification)

        def blocks(rows):
            return _row_blocks(factors, rows)

        with torch.no_grad():
            f = _outputs(factors, X)
            precision = (torch.full((1,), 1.0 / settings.prior_scale**2, dtype=torch.float64, device=f.device)
                         if settings.module is not None else _layer_precisions(network, settings)[-len(weights):])
            if hessian == "full":  # one block for the subset
                precision = precision[-1:]
            n_iter = 0

            def tuned(ggn, precision):
                """The evidence's prior precisions for the GGN ``ggn`` (``precision`` itself without tuning)."""
                nonlocal n_iter
                if not self._post_hoc():
                    return precision
                precision, steps = maximize_prior_precision(weights, ggn, precision)
                n_iter += steps
                return precision

            if not gaussian:  # the GGN of the categorical or the Fisher of the likelihood: nothing to tune but delta
                bases = ggn_eigenbases(blocks(X), torch.ones(f.shape[1], dtype=f.dtype, device=f.device), hessian)
                precision = tuned(bases, precision)
                if classification:
                    log_lik = torch.distributions.Categorical(logits=f).log_prob(Y[:, 0].long()).sum()
                else:
                    log_lik = likelihood.log_prob(Y.double(), f).sum()
            else:
                bases, precision, log_lik = self._tuned_regression(
                    likelihood, blocks, factors, X, Y.double(), f, context, hessian, precision, tuned)
            evidence = laplace_log_evidence(log_lik, weights, bases, precision)
        module["network"] = build(bases, precision)
        return {
            "prior_precision": float(precision.mean()),
            "log_evidence": float(evidence),
            "n_evidence_iter": int(n_iter),
        }

    def _check_full(self, n_weights):
        """Refuse hessian="full" over more than _MAX_FULL_WEIGHTS weights."""
        if self._hessian() == "full" and n_weights > _MAX_FULL_WEIGHTS:
            raise ValueError(f"Laplace(hessian='full') needs a {n_weights} x {n_weights} matrix for subset="
                             f"{self.subset!r}; it is built for at most {_MAX_FULL_WEIGHTS} weights. Use "
                             "hessian='kron' or 'diag'.")

    def _mlp_subset(self, network, settings):
        """The MLP's posterior weights (all, or the last layer), their Jacobian factors and the network builder."""
        dtype = network.layers[0].weight.dtype
        all_weights = [layer.weight.detach()[0].double() for layer in network.layers]
        first = 0 if self.subset == "all" else len(all_weights) - 1  # the layers before it stay at the MAP

        def raw_factors(rows):
            f, inputs, grads = mlp_jacobian_factors(rows.double(), all_weights, settings.activation)
            return f, inputs[first:], grads[first:]

        def build(bases, precision):
            return LinearizedLaplaceMLP([w.to(dtype) for w in all_weights], [b.to(dtype) for b in bases],
                                        precision.to(dtype), settings.activation, n_fixed=first)

        return all_weights[first:], raw_factors, build

    def _module_last_layer(self, network):
        """A torch module's last nn.Linear: its weights (P, k), the factors of the rows and the network builder."""
        if self.subset != "last_layer":
            raise ValueError("Laplace on a torch module puts its posterior on the module's last nn.Linear: use "
                             "subset='last_layer' (subset='all' is built for the MLP).")
        name, layer = last_linear(network._base)
        tensors = dict(zip(network.names, network.stacked))
        if layer.bias is None:
            raise ValueError("Laplace on a torch module needs a bias in the module's last nn.Linear.")
        weight = tensors[f"{name}.weight"].detach()[0]  # (k, n_in)
        dtype = weight.dtype
        last = torch.cat([weight.T, tensors[f"{name}.bias"].detach()[0][None]]).double()  # (n_in + 1, k)

        def raw_factors(rows):
            phi, f = module_last_layer_features(network, rows)
            k = f.shape[1]
            eye = torch.eye(k, dtype=torch.float64, device=f.device).expand(f.shape[0], k, k)
            return f.double(), [phi.double()], [eye]

        def build(bases, precision):
            return ModuleLastLayerLaplace(network, last.to(dtype), [b.to(dtype) for b in bases], precision.to(dtype))

        return [last], raw_factors, build

    def _tuned_regression(self, likelihood, blocks, factors, X, y, f, context, hessian, precision, tuned):
        """The GGN bases, tuned prior precisions and log-likelihood of Gaussian regression; sets the noise."""
        noise_var = likelihood.noise_variance().detach().double().reshape(-1)
        learn_noise = likelihood.raw_noise.requires_grad
        unit = ggn_eigenbases(blocks(X), torch.ones_like(noise_var), hessian) if y.shape[1] == 1 else None

        def ggn_at(noise_var):  # one output: the GGN is 1 / sigma^2 times that of unit noise, no new factorisation
            if unit is not None:
                return [basis.scaled(1.0 / noise_var[0]) for basis in unit]
            return ggn_eigenbases(blocks(X), 1.0 / noise_var, hessian)

        validation = _held_out_rows(context)
        if self._post_hoc() and learn_noise and validation is not None:
            # sigma_j^2 = c s_j, s_j the held-out rows' mean squared error: c in (0, 1] such that the predictive
            # variance, epistemic (at that noise and its tuned delta) plus noise, matches s_j on average (eq. 4).
            # The epistemic part shrinks as the noise does, so c is found by bisection in log c; alternating the
            # two updates could end on the noise floor when the epistemic part alone exceeded the squared errors.
            f_val, inputs_val, grads_val = factors(validation[0])
            target = (validation[1].double() - f_val).square().mean(0)
            floor = noise_floor(y)
            low, high = -14.0, 0.0  # log c
            for _ in range(_NOISE_BISECTIONS):
                middle = 0.5 * (low + high)
                noise_var = torch.maximum(math.exp(middle) * target, floor)
                bases = ggn_at(noise_var)
                precision = tuned(bases, precision)
                epistemic = glm_predictive_variance(inputs_val, grads_val, bases, precision).mean(0)
                excess = ((epistemic + noise_var) / target).mean() - 1.0
                low, high = (low, middle) if excess > 0 else (middle, high)
            noise_var = torch.maximum(math.exp(low) * target, floor)
            _set_noise(likelihood, noise_var)
        bases = ggn_at(noise_var)
        precision = tuned(bases, precision)
        return bases, precision, torch.distributions.Normal(f, noise_var.sqrt()).log_prob(y).sum()
