r"""Linear layer with an implicit posterior: a generator network maps noise to weight slices.

The weights of a layer are split into its ``out_features`` *slices*, slice j
being the ``in_features`` weights into output unit j and that unit's bias.
One small generator network per layer maps uniform noise and a one-hot code
of the slice to the slice (Pawlowski et al. 2017, the per-layer hypernetwork
split by output unit; Killingberg 2021, section 4.2.2 and Algorithm 7,
steps 1-3):

.. math::

    z_j \sim \mathcal U(-\tfrac12, \tfrac12)^{d_z}, \qquad
    \theta_j = G_\lambda([z_j, c_j]) \in \mathbb R^{N_\mathrm{in} + 1},
    \qquad j = 1, \dots, N_\mathrm{out},

with c_j the j-th unit vector of R^{N_out}. Every slice and every draw gets
its own noise, so the slices are independent under q (Killingberg 2021,
eq. 4.3 applied within the layer) and the KL of a layer is the sum of the
KLs of its slices. q has no density: it is sampled only, and its KL to the
prior is estimated from draws (:mod:`skbayes.nn.divergences`).

References
----------
.. [Pawlowski2017] N. Pawlowski, A. Brock, M. C. H. Lee, M. Rajchl and
   B. Glocker, "Implicit weight uncertainty in neural networks", arXiv
   1711.01297, 2017 (Killingberg 2021, section 3.3, Algorithm 6).
.. [Killingberg2021] L. Killingberg, "Generative adversarial networks for
   flexible variational posteriors in Bayesian neural networks", MSc
   thesis, NTNU, 2021, chapter 4.
"""

import torch
from torch import nn

from .._mlp import MLP
from ..functional import standard_uniform

__all__ = ["ImplicitLinear", "parameters_from_slices"]


def parameters_from_slices(slices):
    """Weights and biases of a layer from its slices.

    Parameters
    ----------
    slices : torch.Tensor of shape (S, out_features, in_features + 1)
        Per draw and output unit: the incoming weights, then the bias.

    Returns
    -------
    weight : torch.Tensor of shape (S, in_features, out_features)
    bias : torch.Tensor of shape (S, 1, out_features)
    """
    params = slices.transpose(-1, -2)
    return params[:, :-1], params[:, -1:]


class ImplicitLinear(nn.Module):
    r"""Linear layer whose weights are the output of a generator network fed with noise.

    Slice j of the layer (the weights into output unit j and its bias) is
    G([z, c_j]) with z ~ U(-1/2, 1/2)^noise_dim and c_j the one-hot code of
    unit j ([Killingberg2021]_, Algorithm 7, steps 1-3; the per-layer,
    per-output-unit hypernetwork of [Pawlowski2017]_). G is a
    :class:`~skbayes.nn.MLP` with ``hidden_sizes`` hidden layers and a linear
    output of width in_features + 1. The layer protocol is described in
    :mod:`skbayes.nn.layers`, except that a training-time pass shares one
    weight draw among the rows of each leading (Monte-Carlo) index instead of
    drawing per row: a draw costs one generator pass per slice; and it has no
    ``kl()``: the KL of an implicit q has no closed form and is estimated
    from draws of the whole network (:class:`~skbayes.nn.ImplicitMLP`).

    Parameters
    ----------
    in_features, out_features : int
        Input and output widths N_in and N_out.
    noise_dim : int, default=10
        Length d_z of the noise vector of each slice (Killingberg 2021,
        Table 4.1 recommends at most 10).
    hidden_sizes : tuple of int, default=(32, 64)
        Hidden widths of the generator (Killingberg 2021, appendix A).
    activation : {"relu", "tanh", "logistic", "identity"}, default="relu"
        Non-linearity of the generator.
    generator : torch.Generator, optional
        Source of the generator's initial weights.
    device, dtype : optional
        Where and in which precision the parameters live.
    """

    def __init__(
        self, in_features, out_features, *, noise_dim=10, hidden_sizes=(32, 64), activation="relu", generator=None,
        device=None, dtype=None,
    ):
        super().__init__()
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        self.noise_dim = int(noise_dim)
        sizes = [self.noise_dim + self.out_features, *hidden_sizes, self.in_features + 1]
        self.generator_net = MLP(sizes, activation, generator=generator, device=device, dtype=dtype)
        self._scale_initial_draws(generator)

    @torch.no_grad()
    def _scale_initial_draws(self, generator):
        """Start with slices of the scale of a fan-in initialisation, different for every unit.

        A generator with the default initialisation of its layers outputs
        nearly the same slice for every one-hot code: its last layer's bias,
        shared by all units, outweighs the code's contribution through the
        hidden layers. Every unit of the layer then starts with the same
        weights, and the network cannot break the symmetry (a Bayes by
        Hypernet MLP on MNIST stayed at the uniform prediction, loss log 10,
        for 20 epochs with the KL off). The last bias is set to 0 and the last
        weights scaled so that the entries of 8 initial draws have the
        standard deviation 1 / sqrt(in_features) of a LeCun initialisation.
        """
        last = self.generator_net.layers[-1]
        last.bias.zero_()
        spread = self.slice_draws(8, generator).std()
        if spread > 0:
            last.weight.mul_(self.in_features**-0.5 / spread)

    def _codes(self, like):
        return torch.eye(self.out_features, device=like.device, dtype=like.dtype)

    def slice_draws(self, n_draws, generator=None, sample=True):
        """``n_draws`` independent draws of every slice, differentiable in the generator.

        Parameters
        ----------
        n_draws : int
        generator : torch.Generator, optional
            Source of the noise.
        sample : bool, default=True
            If False, every draw uses z = 0 (the centre of the noise), a
            deterministic point of q (not its mean).

        Returns
        -------
        slices : torch.Tensor of shape (n_draws, out_features, in_features + 1)
            Slice j of draw s: the weights into unit j, then its bias.
        """
        codes = self._codes(self.generator_net.layers[0].weight)
        shape = (n_draws, self.out_features, self.noise_dim)
        if sample:
            z = standard_uniform(shape, codes, generator) - 0.5
        else:
            z = codes.new_zeros(shape)
        return self.generator_net(torch.cat([z, codes.expand(n_draws, -1, -1)], dim=-1))

    def sample_parameters(self, n_samples, generator=None):
        """``n_samples`` weight draws from q shared by all rows: W (S, in, out) and b (S, 1, out)."""
        return parameters_from_slices(self.slice_draws(n_samples, generator))

    def forward(self, x, generator=None, sample=True):
        """Training-time pass, one weight draw per leading index of ``x``.

        Parameters
        ----------
        x : torch.Tensor of shape (..., n, in_features)
            A 2-D ``x`` (n, in_features) gets one draw shared by its rows;
            ``x`` of shape (n_mc, n, in_features) gets n_mc draws.
        generator : torch.Generator, optional
        sample : bool, default=True
            If False, the generator at z = 0 (see :meth:`slice_draws`).

        Returns
        -------
        out : torch.Tensor of shape (..., n, out_features)
        """
        leading = x.shape[:-2]
        h = x.reshape(-1, *x.shape[-2:])
        weight, bias = parameters_from_slices(self.slice_draws(h.shape[0], generator, sample))
        return torch.baddbmm(bias, h, weight).reshape(*leading, x.shape[-2], self.out_features)
