"""The Bayesian autoencoder: SGHMC over an autoencoder's weights under a prior chosen by DSW (Rossi 2022, §5.5-5.6)."""

import copy
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin, _fit_context
from sklearn.preprocessing import MinMaxScaler
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from .._param_validation import N_DRAWS, Interval, StrOptions, validate_method_params
from ..inference import SGHMC, DSWPrior, InferenceMethod
from ..mixture import BayesianGaussianMixture
from ..neural_network import BayesianMLPRegressor
from ..nn import ACTIVATIONS, ContinuousBernoulliLikelihood
from ..nn.networks.mlp import forward_with_parameters

__all__ = ["BayesianAutoencoder"]


class _AutoencoderNetwork(BayesianMLPRegressor):
    """The regressor X -> X of the autoencoder's architecture with the continuous Bernoulli likelihood (private).

    The shared fit of the Bayesian MLPs (the inference method, the loop, the kept samples); only the
    likelihood differs: its outputs are logits of values in [0, 1], with no noise level.
    """

    def _make_likelihood(self, n_outputs, device, dtype, n_members=None):
        return ContinuousBernoulliLikelihood()

    def _set_noise_std(self, X):
        self.noise_std_ = None
        self._aleatoric_std = None


class BayesianAutoencoder(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Bayesian autoencoder: posterior samples of an autoencoder's weights, its prior chosen from the data.

    An encoder MLP (``hidden_layer_sizes``, then ``n_components`` linear
    outputs, the code z) and a decoder MLP (the activation of z, then the
    hidden sizes reversed, then one logit per feature) make one network
    x -> logits, whose weights are sampled by SGHMC (``inference``, by
    default ``SGHMC(prior=DSWPrior())``) under the continuous Bernoulli
    likelihood of X scaled to [0, 1] (Rossi 2022, eq. 5.18;
    :class:`skbayes.nn.ContinuousBernoulliLikelihood`). The prior of the
    weights is Gaussian with one scale per layer, chosen before sampling to
    minimise the distributional sliced 2-Wasserstein distance between the
    prior predictive reconstructions and the data (eqs. 5.11-5.19;
    :class:`skbayes.inference.DSWPrior`); ``SGHMC(prior=None)`` keeps the
    N(0, ``prior_scale``\\ :sup:`2`) prior instead.

    Each kept network has its own encoder, and the codes of two posterior
    samples live in different coordinates (two chains' latent spaces are
    rotated, permuted or reflected against each other), so codes are never
    averaged over samples. :meth:`transform`, :meth:`inverse_transform` and
    :meth:`sample` use one posterior sample, the last kept sample of the
    first chain (``code_network_``). :meth:`reconstruct` and
    :meth:`score_samples` use them all: each sample encodes and decodes with
    its own weights, and their reconstructions and densities are averaged
    (the posterior predictive), with the spread over samples as the
    reconstruction's epistemic uncertainty.

    The codes of the training rows get a density, the library's
    :class:`~skbayes.BayesianGaussianMixture` with ``n_mixture_components``
    components (the thesis leaves the density estimator open), and
    :meth:`sample` decodes draws of it: the autoencoder as a generative model.

    Each feature of X is scaled to [0, 1] by its training minimum and
    maximum (scikit-learn's ``MinMaxScaler(clip=True)``; pixels already in
    [0, 1] with both ends present are left as they are).

    Parameters
    ----------
    n_components : int, default=2
        Size of the code z.
    hidden_layer_sizes : tuple of int, default=(128,)
        The encoder's hidden widths; the decoder's are reversed.
    activation : {"relu", "tanh", "logistic", "identity"}, default="relu"
        Between layers, and applied to the code where the decoder starts.
        On 1,200 digits (8 x 8) at 4 codes, the test reconstruction
        log-likelihood was 115.8 with ReLU against 101.0 with tanh under the
        DSW prior (114.5 and 113.6 under N(0, 1); by hand).
    inference : SGHMC or None, default=None
        The sampler and its prior; None is ``SGHMC(prior=DSWPrior())``.
    prior_scale : float, default=1.0
        The weights' prior standard deviation when the sampler has no prior object.
    n_mixture_components : int, default=10
        Components of the latent density.
    batch_size : int or "auto", default="auto"
        Rows per sampler step (as :class:`~skbayes.BayesianMLPRegressor`).
    random_state : int, RandomState or None, default=None

    Attributes
    ----------
    network_ : BayesianMLPRegressor
        The fitted x -> x network; its ``module_["network"]`` holds the kept samples.
    code_network_ : int
        The kept sample whose encoder and decoder give the codes.
    latent_density_ : BayesianGaussianMixture
        Fitted to the training rows' codes.
    scaler_ : sklearn.preprocessing.MinMaxScaler
        The scaling of X to [0, 1].
    inference_diagnostics_ : dict
        The sampler's (``rhat``, ...) and the prior's (``prior_hyperparameters``, ``dsw_trace``).
    n_iter_ : int
        Epochs the sampler ran.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of the features seen during fit, when X has them (a pandas DataFrame).

    References
    ----------
    .. [Tran2021] B.-H. Tran, S. Rossi, D. Milios, P. Michiardi, E. V. Bonilla
       and M. Filippone, "Model selection for Bayesian autoencoders",
       NeurIPS 2021.
    .. [LoaizaGanem2019] G. Loaiza-Ganem and J. P. Cunningham, "The continuous
       Bernoulli: fixing a pervasive error in variational autoencoders",
       NeurIPS 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from skbayes import BayesianAutoencoder
    >>> from skbayes.inference import SGHMC, DSWPrior
    >>> X = np.random.RandomState(0).uniform(size=(60, 6))
    >>> bae = BayesianAutoencoder(n_components=2, hidden_layer_sizes=(8,), random_state=0,
    ...                           inference=SGHMC(burn_in=5, thinning=1, n_kept_samples=3,
    ...                                           prior=DSWPrior(max_iter=5)))
    >>> bae.fit_transform(X).shape
    (60, 2)
    """

    _parameter_constraints = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "hidden_layer_sizes": ["array-like", Interval(Integral, 1, None, closed="left")],
        "activation": [StrOptions(set(ACTIVATIONS))],
        "inference": [InferenceMethod, None],
        "prior_scale": [Interval(Real, 0, None, closed="neither")],
        "n_mixture_components": [Interval(Integral, 1, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "random_state": ["random_state"],
    }

    def __init__(self, n_components=2, *, hidden_layer_sizes=(128,), activation="relu", inference=None,
                 prior_scale=1.0, n_mixture_components=10, batch_size="auto", random_state=None):
        self.n_components = n_components
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.inference = inference
        self.prior_scale = prior_scale
        self.n_mixture_components = n_mixture_components
        self.batch_size = batch_size
        self.random_state = random_state

    def _hidden(self):
        sizes = self.hidden_layer_sizes
        return (int(sizes),) if np.isscalar(sizes) else tuple(int(s) for s in sizes)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Sample the autoencoder's posterior on X (n_samples, n_features) and fit the density of the codes.

        Raises
        ------
        ValueError
            On NaN/inf, fewer than 2 rows, or a sampler that is not SGHMC.
        """
        X = validate_data(self, X, dtype=[np.float64, np.float32], ensure_min_samples=2)
        inference = SGHMC(prior=DSWPrior()) if self.inference is None else self.inference
        if not isinstance(inference, SGHMC):
            raise ValueError(f"BayesianAutoencoder samples its weights with SGHMC; got {type(inference).__name__}.")
        rng = check_random_state(self.random_state)
        seeds = rng.randint(np.iinfo(np.int32).max, size=2)
        self.scaler_ = MinMaxScaler(clip=True).fit(X)
        X_scaled = self.scaler_.transform(X)
        hidden = self._hidden()
        self.network_ = _AutoencoderNetwork(
            hidden_layer_sizes=(*hidden, self.n_components, *hidden[::-1]), activation=self.activation,
            inference=inference, prior_scale=self.prior_scale, noise="homoscedastic", normalize_y=False,
            batch_size=self.batch_size, random_state=int(seeds[0]),
        ).fit(X_scaled, X_scaled)
        self.inference_diagnostics_ = self.network_.inference_diagnostics_
        self.n_iter_ = self.network_.n_iter_
        network = self.network_.module_["network"]
        self.code_network_ = network.n_members // getattr(network, "n_chains", 1) - 1
        codes = self._encode(X_scaled)
        self.latent_density_ = BayesianGaussianMixture(
            n_components=min(self.n_mixture_components, len(X)), random_state=int(seeds[1])).fit(codes)
        self._n_features_out = self.n_components
        return self

    def _parameters(self, index=None):
        """Per layer (W, b) of all kept networks, or of the networks ``index`` (a list of ints)."""
        parameters = self.network_.module_["network"].member_parameters()
        if index is None:
            return parameters
        return [(w[index], b[index]) for w, b in parameters]

    def _tensor(self, array):
        network = self.network_.module_["network"]
        weight = network.layers[0].weight
        return torch.as_tensor(np.asarray(array), dtype=weight.dtype, device=weight.device)

    def _encode(self, X_scaled):
        """The codes of scaled rows under the code network, (n, K)."""
        n_encoder = len(self._hidden()) + 1
        parameters = self._parameters([self.code_network_])[:n_encoder]
        with torch.no_grad():
            z = forward_with_parameters(self._tensor(X_scaled), parameters, self.activation)
        return z[0].cpu().numpy()

    def _decode(self, Z):
        """Codes Z (n, K) decoded by the code network: the continuous Bernoulli's mean, in X's units (n, d)."""
        n_encoder = len(self._hidden()) + 1
        with torch.no_grad():
            z = ACTIVATIONS[self.activation](self._tensor(Z))
            logits = forward_with_parameters(z, self._parameters([self.code_network_])[n_encoder:], self.activation)
            mean = ContinuousBernoulliLikelihood().mean(logits)[0].cpu().numpy()
        return self.scaler_.inverse_transform(mean)

    def transform(self, X):
        """The code of each row under the code network (``code_network_``): shape (n_samples, n_components)."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        return self._encode(self.scaler_.transform(X))

    def inverse_transform(self, X):
        """Rows decoded from codes X (n_samples, n_components) by the code network: its mean value, in X's units."""
        check_is_fitted(self)
        Z = np.asarray(X, dtype=float)
        if Z.ndim != 2 or Z.shape[1] != self.n_components:
            raise ValueError(f"Codes must have shape (n_samples, {self.n_components}); got {Z.shape}.")
        return self._decode(Z)

    @validate_method_params(return_std=["boolean"])
    def reconstruct(self, X, return_std=False):
        """The posterior predictive reconstruction of each row: every kept network encodes and decodes it.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        return_std : bool, default=False
            Also return the standard deviation over the kept networks of their mean value (the
            reconstruction's epistemic uncertainty).

        Returns
        -------
        mean : ndarray of shape (n_samples, n_features)
            The average over the kept networks of the continuous Bernoulli's mean, in X's units.
        std : ndarray of shape (n_samples, n_features)
            In X's units; with ``return_std``.
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        with torch.no_grad():
            logits = forward_with_parameters(self._tensor(self.scaler_.transform(X)), self._parameters(),
                                             self.activation)
            values = ContinuousBernoulliLikelihood().mean(logits)  # (S, n, d)
            mean = values.mean(0).cpu().numpy()
            std = values.std(0, correction=0).cpu().numpy()
        scale = self.scaler_.scale_
        mean = self.scaler_.inverse_transform(mean)
        return (mean, std / scale) if return_std else mean

    @validate_method_params(n_samples=N_DRAWS, random_state=["random_state"])
    def sample(self, n_samples=1, random_state=None):
        """New rows: codes drawn from the latent density, decoded by the code network.

        Returns
        -------
        X : ndarray of shape (n_samples, n_features)
            The decoder's mean value (the continuous Bernoulli's mean), in X's units.
        """
        check_is_fitted(self)
        rng = check_random_state(random_state)
        density = copy.copy(self.latent_density_)  # seeded here, without changing the fitted one
        density.random_state = rng.randint(np.iinfo(np.int32).max)
        Z, _ = density.sample(n_samples)
        return self._decode(Z[rng.permutation(n_samples)])  # sample() returns the codes grouped by component

    def score_samples(self, X):
        """log (1/S) sum_s p(x | f_s(x)) of each row: the reconstruction log-likelihood (nats, X scaled to [0, 1])."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        x = self._tensor(self.scaler_.transform(X))
        with torch.no_grad():
            logits = forward_with_parameters(x, self._parameters(), self.activation)  # (S, n, d)
            log_p = ContinuousBernoulliLikelihood().log_prob(x, logits)
            out = torch.logsumexp(log_p, 0) - np.log(log_p.shape[0])
        return out.cpu().numpy()

    def score(self, X, y=None):
        """Mean reconstruction log-likelihood per row (:meth:`score_samples`), nats."""
        return float(np.mean(self.score_samples(X)))
