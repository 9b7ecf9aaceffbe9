"""BayesianMLPClassifier: a Bayesian neural network for classification."""

import numpy as np
import torch
from sklearn.base import ClassifierMixin
from sklearn.utils import Bunch
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data

from .._param_validation import _fit_context
from ..nn import CategoricalLikelihood
from ._base import BaseBayesianMLP


def _entropy(p):
    """Entropy in nats along the last axis, with 0 log 0 = 0."""
    return -torch.special.xlogy(p, p).sum(-1)


class BayesianMLPClassifier(ClassifierMixin, BaseBayesianMLP):
    """Bayesian multi-layer perceptron classifier trained by variational inference.

    The same network, priors, inference methods and training loop as
    :class:`BayesianMLPRegressor`, with a categorical likelihood (softmax of
    the network's C outputs). Class probabilities are the Bayesian model
    average: the mean over ``n_samples_predict`` weight draws of the softmax
    (Gal 2016, section 3.3.1), not the softmax of the mean logits.

    Parameters
    ----------
    hidden_layer_sizes : array-like of int or int, default=(50,)
        Width of each hidden layer; ``()`` gives Bayesian logistic regression.
    inference : {"mfvi", "mc_dropout", "vadam", "sghmc", "ensemble"}, default="mfvi"
        ``"mfvi"``: mean-field Gaussian q with local reparameterisation and
        closed-form KL [Blundell2015]_ [Kingma2015]_. ``"mc_dropout"``:
        dropout before every layer, kept on at prediction [Gal2016]_.
        ``"vadam"``: variational Adam [Khan2018]_. ``"sghmc"``:
        stochastic-gradient HMC [Chen2014]_ (kept samples averaged).
        ``"ensemble"``: deep ensemble [Lakshminarayanan2017]_. ``"pbp"`` is
        regression-only and raises a ValueError here.
    activation : {"relu", "tanh", "logistic", "identity"}, default="relu"
        Non-linearity of the hidden layers.
    prior_scale : float, default=1.0
        Standard deviation of the Gaussian prior on every weight and bias.
    posterior_init_scale : float, default=1e-3
        Initial standard deviation of q for ``"mfvi"``.
    dropout_rate : float, default=0.01
        Probability of dropping a unit, for ``"mc_dropout"``.
    init : {"default", "iblm", "uninformative", "heuristic", "xavier", "orthogonal", "lsuv"}, default="default"
        Initialisation of the mean-field posterior, for ``"mfvi"`` and
        ``"vadam"`` (see :data:`skbayes.nn.initialization.INITIALIZATIONS`):
        ``"default"`` keeps uniform random means and ``posterior_init_scale``
        standard deviations; ``"iblm"`` fits Bayesian linear regression layer
        by layer (I-BLM, Rossi 2022, chapter 3), which keeps VI from
        collapsing to the prior; the others are the alternatives compared
        there (section 3.3). ``"vadam"`` always starts its variances at the
        prior's and uses only the means.
    kl_warmup_epochs : int, default=0
        Linear warm-up of the KL weight from 0 to 1 over this many epochs
        (KL annealing; ``"mfvi"`` and ``"mc_dropout"``; ``"vadam"`` has no KL
        gradient to anneal). The stopping rule starts counting after the
        warm-up.
    n_estimators : int, default=5
        Number of independently initialised networks of ``"ensemble"``.
    n_chains : int, default=2
        Number of parallel chains of ``"sghmc"``, run batched; their split
        R-hat is stored in ``rhat_``.
    burn_in : int, default=300
        Epochs of ``"sghmc"`` before samples are kept (the sampler also
        adapts its mass matrix during them). ``"sghmc"`` runs exactly
        ``burn_in + thinning * n_kept_samples`` epochs: ``max_iter``, ``tol``,
        ``n_iter_no_change`` and ``early_stopping`` do not apply to it.
    thinning : int, default=10
        Epochs of ``"sghmc"`` between two kept samples.
    n_kept_samples : int, default=20
        Samples kept per chain by ``"sghmc"``; predictions use all
        ``n_chains * n_kept_samples`` of them.
    friction : float in (0, 1], default=0.05
        Friction (momentum decay per step, alpha of Chen et al. 2014,
        section 3.3) of ``"sghmc"``.
    step_size : float, default=3e-4
        Step size of ``"sghmc"`` (epsilon^2 of the scale-adapted sampler,
        Springenberg et al. 2016; Rossi 2022, eq. 2.36). ``learning_rate_init``
        is Adam's step size and does not apply to ``"sghmc"`` or ``"pbp"``.
    batch_size : int or "auto", default="auto"
        ``"auto"`` is ``min(32, n_samples)`` up to 2,000 rows and 128 above.
    learning_rate_init : float, default=3e-3
        Adam step size (also Vadam's); not used by ``"sghmc"``.
    beta_1, beta_2 : float, default=0.9, 0.999
        Decay rates of the first and second moment estimates of Adam (and of
        Vadam).
    max_iter : int or "auto", default="auto"
        Maximum number of epochs; ``"auto"`` is 500. ``"sghmc"`` ignores it
        (see ``burn_in``).
    n_samples_train : int, default=1
        Monte-Carlo draws per datum and step.
    n_samples_predict : int, default=100
        Weight draws averaged at prediction. ``"ensemble"`` and ``"sghmc"``
        predict with all their members (kept samples) instead, the exact
        mixture.
    early_stopping : bool, default=False
        Stop on the held-out mean log predictive probability and restore the
        best weights; otherwise stop on the training loss.
    validation_fraction : float, default=0.1
        Fraction of rows held out when ``early_stopping``.
    n_iter_no_change : int, default=50
        Epochs without an improvement of at least ``tol`` before stopping.
    tol : float, default=1e-4
        Minimum improvement of the per-datum loss (or validation score).
    warm_start : bool, default=False
        Reuse the fitted network as the starting point of the next ``fit``.
    random_state : int, RandomState instance or None, default=None
        Seeds initialisation, minibatch order, training noise and the
        prediction draws; the global torch seed is never touched.
    verbose : bool, default=False
        Show a progress bar over epochs with the loss.
    device : str, default="auto"
        Torch device; ``"auto"`` picks CUDA when available.
    dtype : {"float32", "float64"} or None, default=None
        Precision; None keeps float32 input as float32 and uses float64
        otherwise on the CPU, float32 on accelerators.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    module_ : torch.nn.ModuleDict
        The fitted ``"network"`` and ``"likelihood"``.
    loss_curve_ : list of float
        Per-datum negative ELBO (nats) of each epoch.
    n_iter_ : int
        Number of epochs run.
    best_loss_ : float or None
        Lowest epoch loss (None when ``early_stopping``).
    validation_scores_ : list of float or None
        Mean validation log predictive probability per epoch.
    best_validation_score_ : float or None
        Best of ``validation_scores_``.
    kl_ : float
        KL(q || prior) of the fitted weights, in nats (for ``"ensemble"`` and
        ``"sghmc"``, which have no q, the summed negative log prior
        sum(w^2) / (2 prior_scale^2) of all members, up to a constant).
    rhat_ : float
        Only for ``"sghmc"``: the largest split R-hat (Gelman et al. 2013,
        section 11.4) over the chains' kept samples of the mean training
        log-likelihood and of the log-likelihood of a few training rows;
        values above ~1.1 say the chains have not mixed. NaN with fewer than
        4 kept samples per chain.
    device_ : torch.device
        Device the model lives on.
    dtype_ : str
        ``"float32"`` or ``"float64"``.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of features seen during fit, when X has string column names.

    See Also
    --------
    BayesianMLPRegressor : the regression counterpart.
    sklearn.neural_network.MLPClassifier : the deterministic counterpart.

    References
    ----------
    .. [Blundell2015] C. Blundell et al., "Weight uncertainty in neural
       networks", ICML 2015.
    .. [Kingma2015] D. P. Kingma, T. Salimans and M. Welling, "Variational
       dropout and the local reparameterization trick", NeurIPS 2015.
    .. [Gal2016] Y. Gal, "Uncertainty in deep learning", PhD thesis, 2016,
       chapter 3 (section 3.3.1 for the uncertainty measures).
    .. [Houlsby2011] N. Houlsby et al., "Bayesian active learning for
       classification and preference learning", 2011 (BALD).
    .. [Khan2018] M. E. Khan et al., "Fast and scalable Bayesian deep
       learning by weight-perturbation in Adam", ICML 2018 (Cinelli 2019,
       section 3.6).
    .. [Chen2014] T. Chen, E. B. Fox and C. Guestrin, "Stochastic gradient
       Hamiltonian Monte Carlo", ICML 2014 (Rossi 2022, section 2.4).
    .. [Lakshminarayanan2017] B. Lakshminarayanan, A. Pritzel and C. Blundell,
       "Simple and scalable predictive uncertainty estimation using deep
       ensembles", NeurIPS 2017.

    Examples
    --------
    >>> from sklearn.datasets import make_moons
    >>> from skbayes import BayesianMLPClassifier
    >>> X, y = make_moons(200, noise=0.1, random_state=0)
    >>> clf = BayesianMLPClassifier(max_iter=50, random_state=0).fit(X, y)
    >>> clf.predict_proba(X[:2]).shape
    (2, 2)
    """

    def __init__(
        self,
        hidden_layer_sizes=(50,),
        *,
        inference="mfvi",
        activation="relu",
        prior_scale=1.0,
        posterior_init_scale=1e-3,
        dropout_rate=0.01,
        init="default",
        kl_warmup_epochs=0,
        n_estimators=5,
        n_chains=2,
        burn_in=300,
        thinning=10,
        n_kept_samples=20,
        friction=0.05,
        step_size=3e-4,
        batch_size="auto",
        learning_rate_init=3e-3,
        beta_1=0.9,
        beta_2=0.999,
        max_iter="auto",
        n_samples_train=1,
        n_samples_predict=100,
        early_stopping=False,
        validation_fraction=0.1,
        n_iter_no_change=50,
        tol=1e-4,
        warm_start=False,
        random_state=None,
        verbose=False,
        device="auto",
        dtype=None,
    ):
        super().__init__(
            hidden_layer_sizes,
            inference=inference,
            activation=activation,
            prior_scale=prior_scale,
            posterior_init_scale=posterior_init_scale,
            dropout_rate=dropout_rate,
            init=init,
            kl_warmup_epochs=kl_warmup_epochs,
            n_estimators=n_estimators,
            n_chains=n_chains,
            burn_in=burn_in,
            thinning=thinning,
            n_kept_samples=n_kept_samples,
            friction=friction,
            step_size=step_size,
            batch_size=batch_size,
            learning_rate_init=learning_rate_init,
            beta_1=beta_1,
            beta_2=beta_2,
            max_iter=max_iter,
            n_samples_train=n_samples_train,
            n_samples_predict=n_samples_predict,
            early_stopping=early_stopping,
            validation_fraction=validation_fraction,
            n_iter_no_change=n_iter_no_change,
            tol=tol,
            warm_start=warm_start,
            random_state=random_state,
            verbose=verbose,
            device=device,
            dtype=dtype,
        )

    def _make_likelihood(self, n_outputs, device, dtype, n_members=None):
        return CategoricalLikelihood()

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit the variational posterior to labelled data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs (standardise them for the prior to be meaningful).
        y : array-like of shape (n_samples,)
            Class labels (any hashable, sortable type; at least two classes).

        Returns
        -------
        self : BayesianMLPClassifier

        Raises
        ------
        ValueError
            On NaN/inf or wrongly shaped input, a continuous target, a single
            class, or a diverging loss.
        """
        X, y = validate_data(self, X, y, dtype=(np.float64, np.float32))
        check_classification_targets(y)
        self.classes_, encoded = np.unique(y, return_inverse=True)
        if len(self.classes_) < 2:
            raise ValueError(
                "BayesianMLPClassifier needs samples of at least 2 classes; got 1 class "
                f"({self.classes_[0]!r})."
            )
        return self._fit_network(X, encoded[:, None].astype(X.dtype), len(self.classes_))

    def _probability_draws(self, X):
        """Yield (rows, softmax probabilities of shape (T, n_rows, C))."""
        X = self._validate_X_predict(X)
        for rows, f in self._function_draws(X, self.n_samples_predict, self._predict_seed):
            yield rows, torch.softmax(f, dim=-1)

    def predict_proba(self, X):
        """Class probabilities: the Monte-Carlo average of the softmax.

        p(y = c | x, D) ~= (1/T) sum_t softmax(f_t(x))_c over T =
        ``n_samples_predict`` weight draws (Gal 2016, section 3.3.1).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Columns in the order of ``classes_``; rows sum to 1.
        """
        return torch.cat([p.mean(0) for _, p in self._probability_draws(X)]).cpu().numpy()

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`, shape (n_samples, n_classes)."""
        return np.log(self.predict_proba(X))

    def predict(self, X):
        """Most probable class under :meth:`predict_proba`, shape (n_samples,)."""
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]

    def predict_uncertainty(self, X):
        r"""Per-sample uncertainty measures of the Bayesian model average.

        With p_t = softmax(f_t(x)) for T weight draws and \bar p their mean
        (Gal 2016, section 3.3.1):

        - ``predictive_entropy`` (total) = H[\bar p] = -sum_c \bar p_c log \bar p_c;
        - ``expected_entropy`` (aleatoric) = (1/T) sum_t H[p_t];
        - ``mutual_information`` (epistemic, BALD [Houlsby2011]_) =
          predictive_entropy - expected_entropy >= 0;
        - ``variation_ratio`` = 1 - max_c \bar p_c, the T -> infinity limit of
          Freeman's variation ratio (eq. 3.19), which does not need sampled
          labels.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        result : Bunch
            ``proba`` of shape (n_samples, n_classes) and the four measures
            above, each of shape (n_samples,), entropies in nats.
        """
        parts = {"proba": [], "predictive_entropy": [], "expected_entropy": []}
        for _, p in self._probability_draws(X):
            mean = p.mean(0)
            parts["proba"].append(mean)
            parts["predictive_entropy"].append(_entropy(mean))
            parts["expected_entropy"].append(_entropy(p).mean(0))
        out = Bunch(**{k: torch.cat(v).cpu().numpy() for k, v in parts.items()})
        # Clip round-off: the mutual information is >= 0 by Jensen's inequality.
        out.mutual_information = np.maximum(out.predictive_entropy - out.expected_entropy, 0.0)
        out.variation_ratio = 1.0 - out.proba.max(axis=1)
        return out

    def score_ood(self, X):
        """Out-of-distribution score: the mutual information (epistemic part).

        Higher means the weight draws disagree more about x, i.e. x is less
        like the training data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        score : ndarray of shape (n_samples,)
            Mutual information in nats, in [0, log n_classes].
        """
        return self.predict_uncertainty(X).mutual_information
