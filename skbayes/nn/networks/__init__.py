"""Networks: stacks of layers with the prediction protocols of the estimators.

* :mod:`.mlp`: :class:`BayesianLayerStack` (the protocol), :class:`BayesianMLP`
  (mean-field or MC-dropout layers), :func:`forward_with_parameters` and the
  deterministic :class:`MLP`.
* :mod:`.stacked`: :class:`StackedMLP`, M deterministic MLPs in one batched
  pass (deep ensembles, kept SGHMC samples).
* :mod:`.module`: :class:`BayesianModuleNetwork` and
  :class:`StackedModuleNetwork`, any torch module behind the estimators'
  protocols, and the conversions that make its layers Bayesian.
* :mod:`.laplace`: :class:`LastLayerLaplaceMLP`, an MLP at the MAP with a
  Gaussian posterior over its last layer (last-layer Laplace), and
  :class:`LinearizedLaplaceMLP`, the MAP MLP linearised in all its weights
  under their Gaussian posterior (Laplace over all weights).
* :mod:`.mnf`: :class:`MNFMLP`, multiplicative normalising flow layers.
* :mod:`.flat`: :class:`FlatGaussianMLP`, an MLP whose flattened weights have
  a full-rank, low-rank or mean-field Gaussian posterior (black-box VI).
* :mod:`.pbp`: :class:`PBPNetwork`, the ReLU network of probabilistic
  backpropagation with its Gamma hyper-posteriors.
* :mod:`.implicit`: :class:`ImplicitMLP`, a stack of implicit-posterior
  layers with their KL estimates, :class:`ImplicitModuleNetwork`, the same
  for any torch module, and :class:`SliceDiscriminator`.
* :mod:`.vae`: :class:`VAEModule`, encoder, decoder and likelihood of a
  (conditional) variational autoencoder; :class:`ModuleEncoder` and
  :class:`ModuleDecoder`, any torch modules in their place;
  :class:`ConvEncoder` and :class:`ConvDecoder`, the convolutional pair.
* :mod:`.whvi`: :class:`WHVIMLP`, Walsh-Hadamard hidden layers and a
  mean-field last layer (WHVI).
"""

from .implicit import ImplicitMLP, ImplicitModuleNetwork, SliceDiscriminator
from .flat import FlatGaussianMLP
from .laplace import LastLayerLaplaceMLP, LinearizedLaplaceMLP, last_hidden_features
from .mlp import MLP, BayesianLayerStack, BayesianMLP, forward_with_parameters
from .mnf import MNFMLP
from .module import BayesianModuleNetwork, StackedModuleNetwork
from .pbp import PBPNetwork, RowMoments
from .stacked import StackedMLP
from .vae import ConvDecoder, ConvEncoder, ModuleDecoder, ModuleEncoder, VAEModule
from .whvi import WHVIMLP

__all__ = [
    "MLP",
    "MNFMLP",
    "ModuleDecoder",
    "ModuleEncoder",
    "BayesianLayerStack",
    "BayesianMLP",
    "BayesianModuleNetwork",
    "ConvDecoder",
    "ConvEncoder",
    "ImplicitMLP",
    "ImplicitModuleNetwork",
    "FlatGaussianMLP",
    "LastLayerLaplaceMLP",
    "LinearizedLaplaceMLP",
    "PBPNetwork",
    "RowMoments",
    "SliceDiscriminator",
    "StackedMLP",
    "StackedModuleNetwork",
    "last_hidden_features",
    "VAEModule",
    "WHVIMLP",
    "forward_with_parameters",
]
