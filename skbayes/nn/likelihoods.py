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
"""

import copy
import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from .functional import gaussian_log_prob, inverse_softplus

__all__ = [
    "BernoulliLikelihood",
    "BinaryLikelihood",
    "CategoricalLikelihood",
    "GaussianLikelihood",
    "HeteroscedasticGaussianLikelihood",
    "RegressionLikelihood",
    "RobustMaxLikelihood",
    "SoftmaxLikelihood",
    "StudentTLikelihood",
    "gauss_hermite",
]

# Default number of Gauss-Hermite nodes of the one-dimensional expectations.
N_QUADRATURE = 20


def gauss_hermite(n_points, device=None, dtype=None):
    r"""Nodes and weights for Gaussian expectations, E_{N(0, 1)}[g(z)] ~= sum_i w_i g(z_i).

    The Gauss-Hermite rule of :func:`numpy.polynomial.hermite.hermgauss`
    (weight exp(-x^2), [Abramowitz1964]_, eq. 25.4.46), rescaled to the
    standard normal: z_i = sqrt(2) x_i, w_i = w^H_i / sqrt(pi). It is exact
    for polynomials g of degree up to 2 n_points - 1.

    Parameters
    ----------
    n_points : int
        Number of nodes (>= 1).
    device, dtype : optional
        Of the returned tensors.

    Returns
    -------
    nodes, weights : torch.Tensor of shape (n_points,)
        The weights sum to 1.
    """
    x, w = np.polynomial.hermite.hermgauss(int(n_points))
    factory = {"device": device, "dtype": dtype}
    return torch.as_tensor(np.sqrt(2.0) * x, **factory), torch.as_tensor(w / np.sqrt(np.pi), **factory)


def _quadrature(fn, f_mean, f_var, n_points):
    """E_{N(f_mean, f_var)}[fn(f)] by Gauss-Hermite quadrature; fn maps ``(q, *shape)`` to ``(q, *shape[...])``."""
    nodes, weights = gauss_hermite(n_points, device=f_mean.device, dtype=f_mean.dtype)
    shape = (-1,) + (1,) * f_mean.ndim
    f = f_mean + f_var.clamp_min(0.0).sqrt() * nodes.reshape(shape)
    values = fn(f)
    return (weights.reshape((-1,) + (1,) * (values.ndim - 1)) * values).sum(0)


class RegressionLikelihood(nn.Module):
    """Base of the regression likelihoods of the Bayesian MLP regressors; not for direct use.

    Holds what the three share: the output width, the location, the
    per-member parameters (see the module docstring for the protocol).
    Subclasses give ``log_prob``, ``noise_variance``, ``distribution`` and
    ``sample``.
    """

    #: Whether the noise depends on the network's output (one level per row).
    heteroscedastic = False
    #: Network output columns per target.
    _columns_per_output = 1

    @classmethod
    def output_width(cls, n_outputs):
        """Number of network outputs for ``n_outputs`` targets (k, or 2k with a scale per row)."""
        return cls._columns_per_output * int(n_outputs)

    def location(self, f):
        """Location of y given the network's outputs: (..., n, w) -> (..., n, k)."""
        return f

    def member_tensors(self):
        """The per-member parameters and buffers, name -> tensor of shape (n_members, 1, k); empty without members."""
        tensors = {**dict(self.named_parameters(recurse=False)), **dict(self.named_buffers(recurse=False))}
        return {name: tensor for name, tensor in tensors.items() if tensor.dim() == 3}

    def with_member_tensors(self, tensors):
        """A copy with the per-member tensors ``tensors`` (name -> tensor); learned ones stay learned."""
        likelihood = copy.deepcopy(self)
        for name, value in tensors.items():
            if isinstance(getattr(likelihood, name), nn.Parameter):
                setattr(likelihood, name, nn.Parameter(value))
            else:
                setattr(likelihood, name, value)
        return likelihood

    def select(self, index):
        """The likelihood of the members ``index`` (a LongTensor), in that order; itself without members."""
        members = self.member_tensors()
        if not members:
            return self
        return self.with_member_tensors({name: tensor.detach()[index] for name, tensor in members.items()})


class GaussianLikelihood(RegressionLikelihood):
    r"""Homoscedastic Gaussian likelihood, one noise level per output.

    p(y | f) = prod_k N(y_k | f_k, sigma_k^2). The noise standard deviation is
    stored raw and mapped through softplus (plus a floor of 1e-6) so that the
    optimiser works on an unconstrained value.

    Parameters
    ----------
    n_outputs : int
        Number k of output dimensions.
    noise_std : float, default=0.1
        Initial (or fixed) noise standard deviation, in the units of f.
    learn_noise : bool, default=True
        Learn the noise by maximising the ELBO (type-II maximum likelihood);
        otherwise keep it fixed at ``noise_std``.
    n_members : int, optional
        For models made of a finite set of members (ensemble members, kept
        Monte-Carlo samples): one noise level per member, so that
        ``noise_std`` has shape (n_members, 1, n_outputs) and broadcasts
        against function values of shape (n_members, n, n_outputs).
    device, dtype : optional
        Where and in which precision the parameters live.
    """

    _floor = 1e-6

    def __init__(self, n_outputs, noise_std=0.1, learn_noise=True, *, n_members=None, device=None, dtype=None):
        super().__init__()
        raw = inverse_softplus(noise_std - self._floor)
        shape = (n_outputs,) if n_members is None else (n_members, 1, n_outputs)
        raw = torch.full(shape, raw, device=device, dtype=dtype)
        if learn_noise:
            self.raw_noise = nn.Parameter(raw)
        else:
            self.register_buffer("raw_noise", raw)

    @property
    def noise_std(self):
        """Noise standard deviation, shape (n_outputs,) or (n_members, 1, n_outputs)."""
        return F.softplus(self.raw_noise) + self._floor

    def noise_variance(self, f=None):
        """sigma^2, shape (n_outputs,) or (n_members, 1, n_outputs); ``f`` is not used."""
        return self.noise_std.square()

    def distribution(self, f):
        """N(f, sigma^2) per output, a :class:`torch.distributions.Normal` of batch shape (..., n, k)."""
        return torch.distributions.Normal(f, self.noise_std.expand_as(f), validate_args=False)

    def sample(self, f, random_state):
        """Draws y = f + sigma eps of shape (..., n, k), eps ~ N(0, 1) from ``random_state`` (numpy).

        The standard normal draws are numpy's float64 ones, so the result is
        float64 and the same on every device.
        """
        eps = torch.as_tensor(random_state.standard_normal(tuple(f.shape)), device=f.device)
        return f + eps * self.noise_std

    def log_prob(self, y, f):
        """Log-density of each observation, summed over outputs.

        Parameters
        ----------
        y : torch.Tensor of shape (n, k)
            Observed targets.
        f : torch.Tensor of shape (..., n, k)
            Function values (e.g. one slice per Monte-Carlo draw).

        Returns
        -------
        log_prob : torch.Tensor of shape (..., n)
            log N(y | f, sigma^2) in nats, summed over the k outputs.
        """
        return gaussian_log_prob(y, f, self.noise_std.square()).sum(-1)

    def expected_log_prob(self, y, f_mean, f_var, added_noise_var=None):
        r"""E_q[log p(y | f)] of each row under independent Gaussians q(f) = N(f_mean, f_var).

        In closed form ([Hensman2013]_, section 3; Rossi 2022, eq. 6.2):

        .. math::

            \mathbb E_{\mathcal N(f \mid m, s^2)}[\log \mathcal N(y \mid f, v)]
            = \log \mathcal N(y \mid m, v) - \frac{s^2}{2 v},

        with v = sigma^2, or sigma^2 + ``added_noise_var`` when the model adds
        its own per-row variance to the noise (the FITC objective of a sparse
        GP, see :class:`~skbayes.nn.variational.SVGP`).

        Parameters
        ----------
        y : torch.Tensor of shape (n, k)
        f_mean, f_var : torch.Tensor of shape (..., n, k)
            Mean and variance (>= 0) of q(f).
        added_noise_var : torch.Tensor of shape (..., n, k), optional
            Variance (>= 0) added to sigma^2 row by row.

        Returns
        -------
        expected_log_prob : torch.Tensor of shape (..., n)
            In nats, summed over the k outputs.
        """
        var = self.noise_std.square()
        if added_noise_var is not None:
            var = var + added_noise_var
        return (gaussian_log_prob(y, f_mean, var) - 0.5 * f_var / var).sum(-1)


class HeteroscedasticGaussianLikelihood(RegressionLikelihood):
    r"""Gaussian likelihood whose noise level is a second output of the network.

    The network has 2k outputs per row: the first k are the mean, the last k
    a raw scale r mapped to the noise standard deviation ([Nix1994]_;
    [Lakshminarayanan2017]_, eq. 1),

    .. math::

        p(y \mid f) = \prod_{j=1}^k \mathcal N(y_j \mid f_j, \sigma_j(f)^2), \qquad
        \sigma_j(f) = \operatorname{softplus}(f_{k+j} + c) + \sigma_{\min},

    with c = softplus^{-1}(``init_std`` - ``min_std``), so that a raw output
    of 0 means a noise of ``init_std``. The floor ``min_std`` keeps the
    density bounded when the network would shrink the noise of a row to 0.
    The likelihood has no parameters of its own.

    Parameters
    ----------
    n_outputs : int
        Number k of targets.
    init_std : float, default=0.1
        Noise standard deviation at raw output 0, in the units of f.
    min_std : float, default=1e-3
        Smallest noise standard deviation, in the units of f.

    Raises
    ------
    ValueError
        If ``init_std <= min_std`` or ``min_std < 0``.
    """

    heteroscedastic = True
    _columns_per_output = 2

    def __init__(self, n_outputs, init_std=0.1, min_std=1e-3):
        super().__init__()
        if min_std < 0 or init_std <= min_std:
            raise ValueError(f"Need 0 <= min_std < init_std; got min_std={min_std!r}, init_std={init_std!r}.")
        self.n_outputs = int(n_outputs)
        self.init_std = float(init_std)
        self.min_std = float(min_std)
        self.shift = float(inverse_softplus(init_std - min_std))

    def location(self, f):
        """The mean columns f[..., :k], shape (..., n, k)."""
        return f[..., : self.n_outputs]

    def noise_std(self, f):
        """sigma(f) of each row and target, shape (..., n, k), in the units of f."""
        return F.softplus(f[..., self.n_outputs :] + self.shift) + self.min_std

    def noise_variance(self, f):
        """sigma(f)^2 of each row and target, shape (..., n, k)."""
        return self.noise_std(f).square()

    def log_prob(self, y, f):
        """Log-density of each observation, summed over outputs.

        Parameters
        ----------
        y : torch.Tensor of shape (n, k)
        f : torch.Tensor of shape (..., n, 2k)
            Means and raw scales (e.g. one slice per Monte-Carlo draw).

        Returns
        -------
        log_prob : torch.Tensor of shape (..., n)
            log N(y | f[:k], sigma(f)^2) in nats, summed over the k outputs.
        """
        return gaussian_log_prob(y, self.location(f), self.noise_variance(f)).sum(-1)

    def distribution(self, f):
        """N(f[:k], sigma(f)^2) per output, a :class:`torch.distributions.Normal` of batch shape (..., n, k)."""
        return torch.distributions.Normal(self.location(f), self.noise_std(f), validate_args=False)

    def sample(self, f, random_state):
        """Draws y = f[:k] + sigma(f) eps of shape (..., n, k), eps ~ N(0, 1) from ``random_state`` (numpy, float64)."""
        loc = self.location(f)
        eps = torch.as_tensor(random_state.standard_normal(tuple(loc.shape)), device=f.device)
        return loc + eps * self.noise_std(f)


class StudentTLikelihood(RegressionLikelihood):
    r"""Student-t likelihood: homoscedastic, heavy-tailed noise, one scale and one df per output.

    p(y | f) = prod_k St(y_k | f_k, s_k, nu_k), the Student-t density with
    location f, scale s and nu degrees of freedom ([Lange1989]_; by
    :class:`torch.distributions.StudentT`), robust to outlying targets: the
    log-density falls like ``-(nu + 1) log |y - f|`` instead of ``-(y - f)^2``. The
    scale and the degrees of freedom are stored raw,
    s = softplus(r_s) + 1e-6 and nu = 2 + softplus(r_nu) + 1e-6, so that
    nu > 2 and the noise variance s^2 nu / (nu - 2) exists.

    Parameters
    ----------
    n_outputs : int
        Number k of outputs.
    scale : float, default=0.1
        Initial (or fixed) scale s, in the units of f.
    learn_scale : bool, default=True
        Learn the scale; otherwise keep it fixed at ``scale``.
    df : float, default=4.0
        Initial degrees of freedom nu (> 2); 4 is the robust choice of
        [Lange1989]_. Always learned.
    n_members : int, optional
        One scale and one nu per member (as :class:`GaussianLikelihood`):
        shapes (n_members, 1, n_outputs).
    device, dtype : optional

    Raises
    ------
    ValueError
        If ``df <= 2`` or ``scale <= 0``.
    """

    _floor = 1e-6
    _min_df = 2.0

    def __init__(self, n_outputs, scale=0.1, learn_scale=True, df=4.0, *, n_members=None, device=None, dtype=None):
        super().__init__()
        if not df > self._min_df + self._floor or not scale > self._floor:
            raise ValueError(f"Need df > 2 and scale > 0; got df={df!r}, scale={scale!r}.")
        shape = (n_outputs,) if n_members is None else (n_members, 1, n_outputs)
        factory = {"device": device, "dtype": dtype}
        raw_scale = torch.full(shape, inverse_softplus(scale - self._floor), **factory)
        if learn_scale:
            self.raw_scale = nn.Parameter(raw_scale)
        else:
            self.register_buffer("raw_scale", raw_scale)
        self.raw_df = nn.Parameter(torch.full(shape, inverse_softplus(df - self._min_df - self._floor), **factory))

    @property
    def scale(self):
        """Scale s, shape (n_outputs,) or (n_members, 1, n_outputs)."""
        return F.softplus(self.raw_scale) + self._floor

    @property
    def df(self):
        """Degrees of freedom nu > 2, shape (n_outputs,) or (n_members, 1, n_outputs)."""
        return F.softplus(self.raw_df) + self._min_df + self._floor

    def neg_log_prior(self):
        r"""-log p(r_nu) of the raw degrees of freedom: nu - 2 ~ Gamma(2, 0.1), per member.

        The weakly informative Gamma(2, 0.1) prior of [Juarez2010]_ (mean
        20), put on nu - 2 and carried to the raw value r_nu (nu - 2 =
        softplus(r_nu) + 1e-6) with its Jacobian sigmoid(r_nu):
        log p(r_nu) = log(0.01 x e^{-0.1 x}) + log sigmoid(r_nu), x = nu - 2.
        A flat prior on r_nu would be improper in both directions (the
        likelihood tends to a constant as nu -> 2 and as nu -> infinity), so
        the methods that sample or penalise the likelihood's parameters with
        the weights (``SGHMC``, ``DeepEnsemble``) add this term; the
        variational methods fit nu by type-II maximum likelihood.

        Returns
        -------
        neg_log_prior : torch.Tensor of shape () or (n_members,)
            In nats, summed over the outputs.
        """
        x = self.df - self._min_df
        log_p = math.log(0.01) + torch.log(x) - 0.1 * x + F.logsigmoid(self.raw_df)
        return -(log_p.flatten(1).sum(-1) if log_p.dim() == 3 else log_p.sum())

    def noise_variance(self, f=None):
        """The variance s^2 nu / (nu - 2) of the noise, shape (n_outputs,) or (n_members, 1, n_outputs)."""
        df = self.df
        return self.scale.square() * df / (df - 2.0)

    def distribution(self, f):
        """St(f, s, nu) per output, a :class:`torch.distributions.StudentT` of batch shape (..., n, k)."""
        return torch.distributions.StudentT(self.df.expand_as(f), f, self.scale.expand_as(f), validate_args=False)

    def log_prob(self, y, f):
        """Log-density of each observation, summed over outputs.

        Parameters
        ----------
        y : torch.Tensor of shape (n, k)
        f : torch.Tensor of shape (..., n, k)

        Returns
        -------
        log_prob : torch.Tensor of shape (..., n)
            log St(y | f, s, nu) in nats, summed over the k outputs.
        """
        return self.distribution(f).log_prob(y).sum(-1)

    def sample(self, f, random_state):
        """Draws y = f + s t of shape (..., n, k), t ~ St(0, 1, nu) from ``random_state`` (numpy, float64)."""
        df = torch.broadcast_to(self.df.detach(), f.shape).cpu().double().numpy()
        t = torch.as_tensor(random_state.standard_t(df), device=f.device)
        return f + t * self.scale


class CategoricalLikelihood(nn.Module):
    """Categorical likelihood with softmax link, p(y = c | f) = softmax(f)_c.

    Has no parameters; it exists so that classifiers and regressors share the
    ``log_prob(y, f)`` protocol of the objective and the training loop.
    """

    def log_prob(self, y, f):
        """Log-probability of each observed class.

        Parameters
        ----------
        y : torch.Tensor of shape (n, 1)
            Class indices 0..C-1 (any dtype; they are cast to integers).
        f : torch.Tensor of shape (..., n, C)
            Logits (e.g. one slice per Monte-Carlo draw).

        Returns
        -------
        log_prob : torch.Tensor of shape (..., n)
            log softmax(f)[y] in nats.
        """
        index = y.long().expand(*f.shape[:-1], 1)
        return torch.log_softmax(f, dim=-1).gather(-1, index).squeeze(-1)


class BernoulliLikelihood(nn.Module):
    """Independent Bernoulli pixels with logits f: log p(x | f) = -BCE(f, x).

    For x in [0, 1] that is not binary this is the usual cross-entropy
    objective, not a normalised density on [0, 1].
    """

    def log_prob(self, x, f):
        """Log-probability of each row, summed over features.

        Parameters
        ----------
        x : torch.Tensor of shape (n, d)
            Observations in [0, 1].
        f : torch.Tensor of shape (..., n, d)
            Logits.

        Returns
        -------
        log_prob : torch.Tensor of shape (..., n)
            In nats.
        """
        x = x.expand_as(f)
        return -F.binary_cross_entropy_with_logits(f, x, reduction="none").sum(-1)

    @staticmethod
    def mean(f):
        """Success probabilities sigmoid(f)."""
        return torch.sigmoid(f)


class BinaryLikelihood(nn.Module):
    r"""Bernoulli likelihood of a binary class through a link function of one latent f.

    p(y = 1 | f) = Phi(f) (``link="probit"``, the standard normal CDF) or
    sigma(f) = 1 / (1 + e^-f) (``link="logit"``), and p(y = 0 | f) = 1 -
    p(y = 1 | f), so that log p(y | f) = log link((2y - 1) f).

    The expected log-likelihood E_{N(f | mu, s^2)}[log p(y | f)] is a
    one-dimensional Gauss-Hermite quadrature ([Hensman2015c]_, section 3;
    Rossi 2022, eq. 6.13). The predictive probability is in closed form for
    the probit link ([RW2006]_, eq. 3.80; Rossi 2022, eq. 6.14),

    .. math::

        \int \Phi(f)\, \mathcal N(f \mid \mu, s^2)\, df
        = \Phi\!\left(\frac{\mu}{\sqrt{1 + s^2}}\right),

    and by quadrature for the logit link.

    Parameters
    ----------
    link : {"probit", "logit"}, default="probit"
    n_quadrature : int, default=20
        Gauss-Hermite nodes of the expectations.

    Raises
    ------
    ValueError
        If ``link`` is not ``"probit"`` or ``"logit"``.
    """

    n_classes = 2

    def __init__(self, link="probit", n_quadrature=N_QUADRATURE):
        super().__init__()
        if link not in ("probit", "logit"):
            raise ValueError(f"link must be 'probit' or 'logit'; got {link!r}.")
        self.link = link
        self.n_quadrature = int(n_quadrature)

    def _log_link(self, f):
        return torch.special.log_ndtr(f) if self.link == "probit" else F.logsigmoid(f)

    def log_prob(self, y, f):
        """log p(y | f) of each row.

        Parameters
        ----------
        y : torch.Tensor of shape (n,)
            Labels 0 or 1 (any dtype).
        f : torch.Tensor of shape (..., n)
            Latent values.

        Returns
        -------
        log_prob : torch.Tensor of shape (..., n)
            In nats.
        """
        return self._log_link((2.0 * y.to(f.dtype) - 1.0) * f)

    def expected_log_prob(self, y, f_mean, f_var):
        """E_{N(f | f_mean, f_var)}[log p(y | f)] of each row, by Gauss-Hermite quadrature.

        Parameters
        ----------
        y : torch.Tensor of shape (n,)
            Labels 0 or 1.
        f_mean, f_var : torch.Tensor of shape (n,)
            Mean and variance (>= 0) of q(f).

        Returns
        -------
        expected_log_prob : torch.Tensor of shape (n,)
            In nats.
        """
        return _quadrature(lambda f: self.log_prob(y, f), f_mean, f_var, self.n_quadrature)

    def predictive_proba(self, f_mean, f_var):
        """Class probabilities E_q[p(y | f)], closed form (probit) or quadrature (logit).

        Parameters
        ----------
        f_mean, f_var : torch.Tensor of shape (n,)

        Returns
        -------
        proba : torch.Tensor of shape (n, 2)
            Columns p(y = 0), p(y = 1).
        """
        if self.link == "probit":
            p1 = torch.special.ndtr(f_mean / torch.sqrt(1.0 + f_var.clamp_min(0.0)))
        else:
            p1 = _quadrature(torch.sigmoid, f_mean, f_var, self.n_quadrature)
        return torch.stack([1.0 - p1, p1], dim=-1)

    def log_predictive_prob(self, y, f_mean, f_var):
        r"""log E_{N(f | f_mean, f_var)}[p(y | f)] of each row, the log of the expected likelihood.

        The data term of the Bayesian sparse GP (Rossi 2022, eq. 6.13, the
        log of the expectation, not the expectation of the log of
        :meth:`expected_log_prob`). Probit: log Phi(y~ mu / sqrt(1 + s^2))
        with y~ = 2y - 1 (eq. 6.14), by ``log_ndtr`` (accurate in the far
        tail); logit: log sum_i w_i sigma(y~ f_i) over the Gauss-Hermite
        nodes f_i, as a log-sum-exp.

        Parameters
        ----------
        y : torch.Tensor of shape (n,)
            Labels 0 or 1.
        f_mean, f_var : torch.Tensor of shape (n,)
            Mean and variance (>= 0) of f.

        Returns
        -------
        log_prob : torch.Tensor of shape (n,)
            In nats; differentiable in f_mean and f_var.
        """
        sign = 2.0 * y.to(f_mean.dtype) - 1.0
        if self.link == "probit":
            return torch.special.log_ndtr(sign * f_mean / torch.sqrt(1.0 + f_var.clamp_min(0.0)))
        nodes, weights = gauss_hermite(self.n_quadrature, device=f_mean.device, dtype=f_mean.dtype)
        f = f_mean + f_var.clamp_min(0.0).sqrt() * nodes[:, None]
        return torch.logsumexp(weights.log()[:, None] + F.logsigmoid(sign * f), dim=0)

    def conditional_proba(self, f):
        """p(y | f) for draws of f: shape (..., n) -> (..., n, 2)."""
        p1 = torch.special.ndtr(f) if self.link == "probit" else torch.sigmoid(f)
        return torch.stack([1.0 - p1, p1], dim=-1)


class SoftmaxLikelihood(nn.Module):
    r"""Categorical likelihood with a softmax link over C latent functions.

    p(y = c | f) = softmax(f)_c, so log p(y | f) = f_y - logsumexp(f). Its
    expectation under independent Gaussians q(f_c) = N(mu_c, s_c^2) has no
    closed form; as E_q[f_y] = mu_y, only the log-sum-exp is estimated, by
    Monte Carlo with reparameterised draws f = mu + s * eps
    ([Hensman2015c]_, section 4, uses the same unbiased estimator of the
    whole term):

    .. math::

        \mathbb E_q[\log p(y \mid f)] \approx \mu_y
        - \frac1T \sum_{t=1}^T \operatorname{logsumexp}(\mu + s \odot \epsilon_t).

    Parameters
    ----------
    n_mc : int, default=8
        Number T of draws per row in :meth:`expected_log_prob`.
    """

    def __init__(self, n_mc=8):
        super().__init__()
        self.n_mc = int(n_mc)

    def log_prob(self, y, f):
        """log softmax(f)_y of each row; y of shape (n,), f of shape (..., n, C)."""
        index = y.long().reshape(-1, 1).expand(*f.shape[:-1], 1)
        return torch.log_softmax(f, dim=-1).gather(-1, index).squeeze(-1)

    def expected_log_prob(self, y, f_mean, f_var, generator=None):
        """Unbiased Monte-Carlo estimate of E_q[log p(y | f)] of each row.

        Parameters
        ----------
        y : torch.Tensor of shape (n,)
            Class indices 0..C-1.
        f_mean, f_var : torch.Tensor of shape (n, C)
            Mean and variance of q(f), independent across classes.
        generator : torch.Generator, optional
            Of the draws (on the device of ``f_mean``).

        Returns
        -------
        expected_log_prob : torch.Tensor of shape (n,)
            In nats; differentiable in f_mean and f_var.
        """
        eps = torch.randn(
            (self.n_mc, *f_mean.shape), generator=generator, device=f_mean.device, dtype=f_mean.dtype
        )
        f = f_mean + f_var.clamp_min(0.0).sqrt() * eps
        mean_y = f_mean.gather(-1, y.long().reshape(-1, 1)).squeeze(-1)
        return mean_y - torch.logsumexp(f, dim=-1).mean(0)

    def predictive_proba(self, f_mean, f_var, eps):
        """Monte-Carlo class probabilities (1/T) sum_t softmax(mu + s * eps_t).

        Parameters
        ----------
        f_mean, f_var : torch.Tensor of shape (n, C)
        eps : torch.Tensor of shape (T, C) or (T, n, C)
            Standard normal draws; shape (T, C) shares them across the rows
            (common random numbers: a row's result does not depend on the
            other rows).

        Returns
        -------
        proba : torch.Tensor of shape (n, C)
        """
        if eps.ndim == 2:
            eps = eps[:, None, :]
        return torch.softmax(f_mean + f_var.clamp_min(0.0).sqrt() * eps, dim=-1).mean(0)

    def conditional_proba(self, f):
        """softmax(f) for draws of f: shape (..., n, C)."""
        return torch.softmax(f, dim=-1)


class RobustMaxLikelihood(nn.Module):
    r"""Robust-max likelihood: the class of the largest latent, mislabelled with probability epsilon.

    p(y = c | f) = 1 - epsilon if c = argmax_k f_k, else epsilon / (C - 1)
    ([HernandezLobato2011]_; [Hensman2015c]_, section 4, as in GPflow's
    ``RobustMax``). With P_c = Pr_q[f_c = max_k f_k] for independent q(f_k)
    = N(mu_k, s_k^2),

    .. math::

        P_c = \int \mathcal N(f_c \mid \mu_c, s_c^2)
              \prod_{k \ne c} \Phi\!\left(\frac{f_c - \mu_k}{s_k}\right) df_c,

    a one-dimensional integral done by Gauss-Hermite quadrature over f_c,
    and then exactly

    .. math::

        \mathbb E_q[\log p(y \mid f)] = P_y \log(1 - \epsilon)
            + (1 - P_y) \log\frac{\epsilon}{C - 1}, \qquad
        p(y = c) = (1 - \epsilon) P_c + \frac{\epsilon}{C - 1} (1 - P_c).

    Parameters
    ----------
    n_classes : int
        C >= 2.
    epsilon : float, default=1e-3
        Mislabelling probability, in (0, 1); fixed (GPflow's default).
    n_quadrature : int, default=20
        Gauss-Hermite nodes.

    Raises
    ------
    ValueError
        If ``n_classes < 2`` or ``epsilon`` is not in (0, 1).
    """

    def __init__(self, n_classes, epsilon=1e-3, n_quadrature=N_QUADRATURE):
        super().__init__()
        if n_classes < 2:
            raise ValueError(f"n_classes must be >= 2; got {n_classes!r}.")
        if not 0.0 < epsilon < 1.0:
            raise ValueError(f"epsilon must be in (0, 1); got {epsilon!r}.")
        self.n_classes = int(n_classes)
        self.epsilon = float(epsilon)
        self.n_quadrature = int(n_quadrature)

    def _wrong(self):
        return self.epsilon / (self.n_classes - 1)

    def prob_max(self, f_mean, f_var):
        """P_c = Pr_q[f_c is the largest], shape (n, C), by quadrature over f_c."""
        nodes, weights = gauss_hermite(self.n_quadrature, device=f_mean.device, dtype=f_mean.dtype)
        std = f_var.clamp_min(1e-12).sqrt()  # (n, C)
        f_c = f_mean[None] + std[None] * nodes[:, None, None]  # (Q, n, C): node q for class c
        # log Phi((f_c - mu_k) / s_k) for every pair (c, k): (Q, n, C, C)
        log_cdf = torch.special.log_ndtr((f_c[..., :, None] - f_mean[None, :, None, :]) / std[None, :, None, :])
        eye = torch.eye(self.n_classes, dtype=torch.bool, device=f_mean.device)
        log_cdf = log_cdf.masked_fill(eye, 0.0)  # the product runs over k != c
        return (weights[:, None, None] * log_cdf.sum(-1).exp()).sum(0).clamp(0.0, 1.0)

    def log_prob(self, y, f):
        """log p(y | f) of each row; y of shape (n,), f of shape (..., n, C)."""
        hit = f.argmax(-1) == y.long()
        return torch.where(hit, math.log1p(-self.epsilon), math.log(self._wrong()))

    def expected_log_prob(self, y, f_mean, f_var):
        """E_q[log p(y | f)] of each row (exact up to the quadrature), shape (n,).

        Parameters
        ----------
        y : torch.Tensor of shape (n,)
            Class indices.
        f_mean, f_var : torch.Tensor of shape (n, C)
        """
        p_y = self.prob_max(f_mean, f_var).gather(-1, y.long().reshape(-1, 1)).squeeze(-1)
        return p_y * math.log1p(-self.epsilon) + (1.0 - p_y) * math.log(self._wrong())

    def predictive_proba(self, f_mean, f_var):
        """Class probabilities (1 - eps) P_c + eps / (C - 1) (1 - P_c), shape (n, C)."""
        p = self.prob_max(f_mean, f_var)
        p = p / p.sum(-1, keepdim=True)  # remove the quadrature error from the normalisation
        return (1.0 - self.epsilon) * p + self._wrong() * (1.0 - p)

    def log_predictive_prob(self, y, f_mean, f_var):
        """log p(y) of :meth:`predictive_proba` at the observed class, the log of the expected likelihood.

        The data term of the Bayesian sparse GP (Rossi 2022, eq. 6.13); it
        is at least log(epsilon / (C - 1)), so the log needs no care.

        Parameters
        ----------
        y : torch.Tensor of shape (n,)
            Class indices.
        f_mean, f_var : torch.Tensor of shape (n, C)

        Returns
        -------
        log_prob : torch.Tensor of shape (n,)
            In nats.
        """
        proba = self.predictive_proba(f_mean, f_var)
        return proba.gather(-1, y.long().reshape(-1, 1)).squeeze(-1).log()

    def conditional_proba(self, f):
        """p(y = c | f) for draws of f: shape (..., n, C)."""
        hit = F.one_hot(f.argmax(-1), self.n_classes).to(f.dtype)
        return (1.0 - self.epsilon) * hit + self._wrong() * (1.0 - hit)
