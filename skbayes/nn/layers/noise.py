"""The noise protocol of the Bayesian layers that sit inside any torch module.

The linear layers of :mod:`skbayes.nn.layers` take the generator as an
argument of ``forward``; a layer inside a user's network (a convolution, an
LSTM, a dropout layer between a user's own layers) is called by that
network's ``forward(x)``, which knows nothing of generators. Such layers
derive from :class:`StochasticLayer`, and the network that holds them
(:class:`~skbayes.nn.networks.BayesianModuleNetwork`) sets their noise for
one pass with :func:`noise_context`:

``"sample"``
    Fresh noise for every row (every leading index of the layer's input:
    an image, a sequence), the training-time pass: one Monte-Carlo draw of
    the weights per datum (Gal 2016, eq. 3.7), or local reparameterisation
    where it applies (Kingma et al. 2015).
``"shared"``
    One draw of the weights (or dropout masks) shared by every row of the
    pass, the prediction-time pass: a row's prediction does not depend on
    which other rows are in the batch. One pass is one draw; the network
    runs one pass per draw, each with its own generator.
``"mean"``
    No noise: the mean weights, or for dropout the weight-scaling
    approximation of standard dropout (Gal 2016, section 3.4.1).

The mode and generator are plain attributes, reset to ``"mean"`` and None
after each pass, so a fitted network pickles (a :class:`torch.Generator`
does not).
"""

from contextlib import contextmanager

from torch import nn

__all__ = ["NOISE_MODES", "StochasticLayer", "noise_context"]

#: The noise modes of :class:`StochasticLayer`.
NOISE_MODES = ("sample", "shared", "mean")


class StochasticLayer(nn.Module):
    """Base of the Bayesian layers driven by :func:`noise_context`.

    Subclasses implement ``forward(x)`` reading ``noise_mode`` and
    ``noise_generator``, and :meth:`kl`. :meth:`noise_rows` gives the
    leading size of a noise tensor: ``n`` fresh draws in ``"sample"`` mode,
    one shared draw in ``"shared"`` mode.

    Attributes
    ----------
    noise_mode : {"sample", "shared", "mean"}
        The mode of the current pass (``"mean"`` outside a pass).
    noise_generator : torch.Generator or None
        The source of the current pass's noise.
    """

    noise_mode = "mean"
    noise_generator = None

    @property
    def sampling(self):
        """Whether this pass draws noise (mode ``"sample"`` or ``"shared"``)."""
        return self.noise_mode != "mean"

    def noise_rows(self, n):
        """Leading size of a noise tensor for an input of ``n`` rows: n when sampling per row, else 1."""
        return n if self.noise_mode == "sample" else 1

    def kl(self):
        """KL(q || p) of the layer's parameters, a scalar in nats (0 for a layer without parameters)."""
        raise NotImplementedError


@contextmanager
def noise_context(module, mode, generator=None):
    """Set the noise of every :class:`StochasticLayer` in ``module`` for one pass.

    Parameters
    ----------
    module : torch.nn.Module
    mode : {"sample", "shared", "mean"}
    generator : torch.Generator, optional
        Source of the noise (on the device of the module's parameters).

    Raises
    ------
    ValueError
        On an unknown ``mode``.
    """
    if mode not in NOISE_MODES:
        raise ValueError(f"Unknown noise mode {mode!r}; choose one of {NOISE_MODES}.")
    layers = [m for m in module.modules() if isinstance(m, StochasticLayer)]
    for layer in layers:
        layer.noise_mode, layer.noise_generator = mode, generator
    try:
        yield
    finally:
        for layer in layers:
            # back to the class defaults: nothing unpicklable stays on the instance
            layer.__dict__.pop("noise_mode", None)
            layer.__dict__.pop("noise_generator", None)
