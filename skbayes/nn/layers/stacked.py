"""M independent deterministic affine maps held in one tensor.

The layer of :class:`~skbayes.nn.networks.StackedMLP` (whose docstring has
the references): every member of a deep ensemble (Lakshminarayanan et al.
2017) or every kept sample of a Markov chain (Chen et al. 2014) is one slice,
so that one ``torch.baddbmm`` applies all of them.
"""

import torch
from torch import nn

from ..functional import uniform_init

__all__ = ["StackedLinear"]


class StackedLinear(nn.Module):
    """M independent affine maps held in one tensor.

    The weights of member m are ``weight[m, :-1]`` (in_features, out_features)
    and its bias is the last row ``weight[m, -1:]`` (1, out_features), the
    layout of :class:`~skbayes.nn.MeanFieldLinear`: one tensor per layer means
    one optimiser slot and one kernel per step for all members.

    Parameters
    ----------
    n_members : int
        Number M of independent maps (>= 1).
    in_features, out_features : int
        Input and output widths.
    generator : torch.Generator, optional
        Source of the initial weights. Every member is drawn independently
        from U(-1/sqrt(in_features), 1/sqrt(in_features)), the scale of
        :class:`torch.nn.Linear`'s default initialisation, for the weights
        and the bias alike.
    device, dtype : optional
        Where and in which precision the parameters live.

    Raises
    ------
    ValueError
        If ``n_members`` < 1.
    """

    def __init__(self, n_members, in_features, out_features, *, generator=None, device=None, dtype=None):
        super().__init__()
        if n_members < 1:
            raise ValueError(f"n_members must be >= 1; got {n_members}.")
        self.n_members = int(n_members)
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        weight = uniform_init((n_members, in_features + 1, out_features), in_features, generator, device, dtype)
        self.weight = nn.Parameter(weight)

    def parameters_of(self, index=None):
        """Weights and biases of the members ``index`` (all members if None).

        Returns
        -------
        weight : torch.Tensor of shape (S, in_features, out_features)
        bias : torch.Tensor of shape (S, 1, out_features)
        """
        w = self.weight if index is None else self.weight[index]
        return w[:, :-1], w[:, -1:]

    def forward(self, h):
        """Apply member m's map to ``h[m]``.

        Parameters
        ----------
        h : torch.Tensor of shape (n_members, n, in_features)

        Returns
        -------
        out : torch.Tensor of shape (n_members, n, out_features)
        """
        return torch.baddbmm(self.weight[:, -1:], h, self.weight[:, :-1])

    def extra_repr(self):
        return f"n_members={self.n_members}, in_features={self.in_features}, out_features={self.out_features}"
