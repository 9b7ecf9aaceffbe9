"""Latent-variable transformers."""

from ._bae import BayesianAutoencoder
from ._vae import VAE

__all__ = ["BayesianAutoencoder", "VAE"]
