r"""Observation models p(y | f).

Every likelihood has ``log_prob(y, f)``, the log-density of each row summed
over outputs, for function values f of shape (..., n, k) (e.g. one slice per
Monte-Carlo draw). The Gaussian likelihood also owns its expectation under a
Gaussian q(f), :meth:`GaussianLikelihood.expected_log_prob`, the data term of
a sparse GP's evidence lower bound.

The regression likelihoods of the Bayesian MLP regressors
(:class:`GaussianLikelihood`, :class:`HeteroscedasticGaussianLikelihood`,
:class:`StudentTLikelihood`) share one protocol for the network's outputs f
of shape (..., n, w), w = ``output_width(k)`` columns for k targets:

- ``location(f)``: the location of y given f, shape (..., n, k);
- ``noise_variance(f)``: the variance of y given f (the aleatoric
  variance), broadcastable to (..., n, k); ``f`` may be None when it does
  not depend on f (``heteroscedastic`` False);
- ``distribution(f)``: y given f as a :mod:`torch.distributions` object,
  per output;
- ``sample(f, random_state)``: draws of y given f, with numpy's generator;
- ``member_tensors()``, ``with_member_tensors(tensors)`` and
  ``select(index)``: the per-member noise parameters of a model with a finite
  set of members (ensemble members, kept Monte-Carlo samples).

The classification likelihoods of a variational GP classifier
(:class:`BinaryLikelihood`, :class:`SoftmaxLikelihood`,
:class:`RobustMaxLikelihood`; [Hensman2015c]_) share one protocol for the
latent values f(x) of each row, independent Gaussians q(f) = N(mu, s^2):

- ``expected_log_prob(y, f_mean, f_var)``: E_q(f)[log p(y | f)] per row, the
  data term of the evidence lower bound (Rossi 2022, eq. 6.2);
- ``predictive_proba(f_mean, f_var)``: the class probabilities
  E_q(f)[p(y = c | f)], shape (n, n_classes);
- ``conditional_proba(f)``: p(y = c | f) for draws of f, shape
  (..., n, n_classes).

:class:`BinaryLikelihood` and :class:`RobustMaxLikelihood` also give
``log_predictive_prob(y, f_mean, f_var)``, log E_q(f)[p(y | f)] at the
observed class, the data term of the Bayesian sparse GP (Rossi 2022, eqs.
6.13-6.14); the softmax has no cheap form of it (a Monte-Carlo average
inside the log would be biased).

One-dimensional expectations use Gauss-Hermite quadrature,
int exp(-x^2) g(x) dx ~= sum_i w_i g(x_i), i.e. E_{N(mu, s^2)}[g(f)] ~=
pi^{-1/2} sum_i w_i g(mu + sqrt(2) s x_i) ([Abramowitz1964]_, 25.4.46), with
nodes and weights from :func:`numpy.polynomial.hermite.hermgauss`.

References
----------
.. [Gal2016] Y. Gal, "Uncertainty in deep learning", PhD thesis, 2016,
   section 3.3.1 (Gal 2016): homoscedastic Gaussian noise with precision tau.
.. [Hensman2013] J. Hensman, N. Fusi and N. D. Lawrence, "Gaussian processes
   for big data", UAI 2013.
.. [Kingma2014] D. P. Kingma and M. Welling, "Auto-encoding variational
   Bayes", ICLR 2014 (Bernoulli decoder, appendix C.1).
.. [Hensman2015c] J. Hensman, A. G. de G. Matthews and Z. Ghahramani,
   "Scalable variational Gaussian process classification", AISTATS 2015.
.. [Abramowitz1964] M. Abramowitz and I. A. Stegun, "Handbook of
   mathematical functions", 1964, eq. 25.4.46 (Gauss-Hermite quadrature).
.. [RW2006] C. E. Rasmussen and C. K. I. Williams, "Gaussian processes for
   machine learning", MIT Press, 2006, section 3.9 (eq. 3.80).
.. [HernandezLobato2011] D. Hernandez-Lobato, J. M. Hernandez-Lobato and
   P. Dupont, "Robust multi-class Gaussian process classification", NeurIPS
   2011.
.. [Nix1994] D. A. Nix and A. S. Weigend, "Estimating the mean and variance
   of the target probability distribution", ICNN 1994.
.. [Lakshminarayanan2017] B. Lakshminarayanan, A. Pritzel and C. Blundell,
   "Simple and scalable predictive uncertainty estimation using deep
   ensembles", NeurIPS 2017, eq. 1.
.. [Lange1989] K. L. Lange, R. J. A. Little and J. M. G. Taylor, "Robust
   statistical modeling using the t distribution", JASA 84(408), 1989.
.. [Juarez2010] M. A. Juárez and M. F. J. Steel, "Model-based clustering of
   non-Gaussian panel data based on skew-t distributions", JBES 28(1), 2010
   (the Gamma(2, 0.1) prior on the degrees of freedom).

The likelihoods live one family per module (``gaussian``, ``student_t``,
``bernoulli``, ``categorical``, ``robust_max``) on the base of ``_base.py``.
"""

from ._base import Likelihood, RegressionLikelihood, gauss_hermite
from .bernoulli import BernoulliLikelihood, BinaryLikelihood, ContinuousBernoulliLikelihood
from .categorical import CategoricalLikelihood, SoftmaxLikelihood
from .gaussian import GaussianLikelihood, HeteroscedasticGaussianLikelihood
from .robust_max import RobustMaxLikelihood
from .student_t import StudentTLikelihood

__all__ = [
    "BernoulliLikelihood",
    "ContinuousBernoulliLikelihood",
    "BinaryLikelihood",
    "CategoricalLikelihood",
    "GaussianLikelihood",
    "HeteroscedasticGaussianLikelihood",
    "Likelihood",
    "RegressionLikelihood",
    "RobustMaxLikelihood",
    "SoftmaxLikelihood",
    "StudentTLikelihood",
    "gauss_hermite",
]
