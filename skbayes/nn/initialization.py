"""Initialisations of the mean-field posterior of a Bayesian MLP.

``INITIALIZATIONS`` maps a name to ``fn(network, X, Y, *, prior_scale,
noise_std, generator) -> None``, which sets the ``mu``/``rho`` of the
:class:`~skbayes.nn.MeanFieldLinear` layers of ``network`` in place from the
training tensors X (n, d) and Y (n, k).
"""

__all__ = ["INITIALIZATIONS"]


def _default(network, X, Y, *, prior_scale, noise_std, generator):
    """Keep the layers' own initialisation (uniform means, small stds)."""


INITIALIZATIONS = {"default": _default}
