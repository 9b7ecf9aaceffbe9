"""Latent-variable transformers."""

from ._vae import VAE

__all__ = ["VAE"]
