"""Bayesian layers: linear layers, one module per kind of weight posterior, and drop-in torch layers.

The Bayesian linear layers share one protocol, used by
:class:`~skbayes.nn.networks.BayesianLayerStack`:

``forward(x, generator=None, sample=True)``
    Training-time pass, ``x`` of shape (..., in_features) -> (..., out_features),
    with fresh noise for every row (one Monte-Carlo draw per datum, Gal 2016
    eq. 3.7). ``sample=False`` propagates the mean weights.
``sample_parameters(n_samples, generator)``
    ``n_samples`` draws of the weights, shared by all rows: a weight tensor of
    shape (n_samples, in_features, out_features) and a bias of shape
    (n_samples, 1, out_features). Prediction uses these, so that a row's
    prediction does not depend on which other rows are in the batch.
``kl()``
    KL(q || p) of the layer's parameters, a scalar in nats.

Weights are stored as (in_features, out_features) so that ``x @ W`` maps rows.

* :mod:`.mean_field`: :class:`MeanFieldLinear`, a factorised Gaussian
  (Bayes by Backprop), and the Gaussian sampling helpers
  :func:`local_reparameterization` and :func:`gaussian_weight_draws`.
* :mod:`.dropout`: :class:`DropoutLinear`, MC dropout and its KL-condition
  penalty, and :class:`MCDropoutLayer`, dropout kept on at prediction inside
  any torch module.
* :mod:`.mnf`: :class:`MNFLinear` and :class:`MNFConv2d`, multiplicative normalising flows
  (Louizos & Welling 2017); its ``kl()`` is a Monte-Carlo estimate of the
  auxiliary bound, over the z drawn by the last training ``forward``.
* :mod:`.pbp`: :class:`PBPLinear`, the moment-storing layer of probabilistic
  backpropagation.
* :mod:`.stacked`: :class:`StackedLinear`, M deterministic affine maps in one
  tensor (deep ensembles, kept MCMC samples).
* :mod:`.whvi`: :class:`WHVILinear`, the Walsh-Hadamard posterior (WHVI) and
  the dimensions of its non-square layers (:func:`whvi_dimensions`).
* :mod:`.implicit`: :class:`ImplicitLinear`, weights generated slice by slice
  from noise by a small network (Bayes by Hypernet, Bayes by GAN).

Layers that replace torch layers inside any network take no generator in
``forward(x)``; they derive from :class:`StochasticLayer` and read the noise
of the pass that :func:`noise_context` sets (:mod:`.noise`):

* :mod:`.conv`: :class:`MeanFieldConv2d`, a factorised Gaussian posterior
  over the kernels of a :class:`torch.nn.Conv2d`.
* :mod:`.recurrent`: :class:`VariationalLSTM` and :class:`VariationalGRU`,
  per-sequence dropout masks on inputs and recurrent connections (Gal 2016,
  section 3.4.2), and :class:`EmbeddingDropout`, word-type dropout of a
  :class:`torch.nn.Embedding`.
"""

from .conv import MeanFieldConv2d
from .dropout import DropoutLinear, MCDropoutLayer
from .implicit import ImplicitLinear, parameters_from_slices
from .mean_field import MeanFieldLinear, gaussian_weight_draws, local_reparameterization
from .mnf import MNFConv2d, MNFLinear
from .noise import StochasticLayer, noise_context
from .pbp import PBPLinear
from .recurrent import EmbeddingDropout, VariationalGRU, VariationalLSTM
from .stacked import StackedLinear
from .whvi import WHVILinear, whvi_dimensions

__all__ = [
    "DropoutLinear",
    "EmbeddingDropout",
    "ImplicitLinear",
    "MCDropoutLayer",
    "MNFConv2d",
    "MNFLinear",
    "MeanFieldConv2d",
    "MeanFieldLinear",
    "PBPLinear",
    "StackedLinear",
    "StochasticLayer",
    "VariationalGRU",
    "VariationalLSTM",
    "WHVILinear",
    "gaussian_weight_draws",
    "parameters_from_slices",
    "local_reparameterization",
    "noise_context",
    "whvi_dimensions",
]
