r"""Prior hyperparameters chosen by the distributional sliced 2-Wasserstein distance to the data (Rossi 2022, §5.5-5.6).

Type-II maximum likelihood picks the prior hyperparameters psi that bring the model's marginal p_psi(y)
closest to the data's distribution pi(y) in KL (eq. 5.11). Estimated from draws, the KL is replaced by the
distributional sliced Wasserstein distance (DSW; Nguyen et al. 2021; eqs. 5.12-5.15):

.. math::

    \mathrm{DSW}_2(\pi, p_\psi) = \max_\phi \Big[\frac1K \sum_{i=1}^K
        W_2^2\big(\theta_i^\phi{}_\# \pi, \theta_i^\phi{}_\# p_\psi\big)\Big]^{1/2}
        - \frac{\lambda_C}{K^2} \sum_{i,j} |\theta_i^{\phi\,T} \theta_j^\phi| + \lambda_C C,

with theta_i uniform on the unit sphere S^{D-1} pushed through h_phi onto it,
theta_i^phi = h_phi(theta_i) normalised to unit length, and the one-dimensional
W_2^2 of two equal-size samples the mean squared difference of their sorted
values. The penalty keeps the slices spread (their expected absolute cosine at most C).
The prior is then psi* = argmin_psi DSW_2(p_psi(y), pi(y)) (eqs. 5.16, 5.19):
draws y ~ p_psi are y ~ p(y | f(x; w)), w ~ p_psi(w), at data inputs x
(reparameterised in psi, so that psi follows the gradient), alternated with
ascent steps of phi. Here h_phi is one linear map of R^D (the thesis leaves
its architecture open).

References
----------
.. [Rossi2022] S. Rossi, PhD thesis (seed 003), sections 5.5-5.6.
.. [Nguyen2021] K. Nguyen, N. Ho, T. Pham and H. Bui, "Distributional sliced-Wasserstein and applications to
   generative modeling", ICLR 2021.
"""

import torch
from torch import nn

from ..functional import standard_normal
from ..networks.mlp import forward_with_parameters

__all__ = ["SlicePushforward", "distributional_sliced_wasserstein", "fit_dsw_prior", "sliced_wasserstein"]


def sliced_wasserstein(a, b, directions):
    """(1/K sum_i W_2^2 along direction i)^(1/2) between equal-size samples a, b (n, D); directions (K, D), unit."""
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same shape; got {tuple(a.shape)} and {tuple(b.shape)}.")
    pa, _ = torch.sort(a @ directions.T, dim=0)
    pb, _ = torch.sort(b @ directions.T, dim=0)
    return (pa - pb).square().mean().clamp_min(0).sqrt()


class SlicePushforward(nn.Module):
    """h_phi: a linear map of R^D whose outputs are normalised onto the sphere (the slice distribution's push-forward).

    Starts at the identity, so that the first slices are uniform.
    """

    def __init__(self, dim, device=None, dtype=None):
        super().__init__()
        self.linear = nn.Linear(dim, dim, device=device, dtype=dtype)
        with torch.no_grad():
            self.linear.weight.copy_(torch.eye(dim, device=device, dtype=dtype))
            self.linear.bias.zero_()

    def forward(self, theta):
        out = self.linear(theta)
        return out / out.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def distributional_sliced_wasserstein(a, b, pushforward, n_slices, generator=None, penalty=1.0, max_cosine=0.5):
    """The DSW objective of phi (to maximise) and the distance at the slices drawn, for samples a, b (n, D).

    Returns
    -------
    objective : torch.Tensor
        The bracket of the module's equation minus the penalty plus ``penalty * max_cosine``.
    distance : torch.Tensor
        The sliced distance at the pushed-forward slices (what psi minimises).
    """
    theta = standard_normal((n_slices, a.shape[1]), a, generator)
    theta = theta / theta.norm(dim=-1, keepdim=True)
    directions = pushforward(theta)
    distance = sliced_wasserstein(a, b, directions)
    spread = (directions @ directions.T).abs().sum() / n_slices**2
    return distance - penalty * spread + penalty * max_cosine, distance


def fit_dsw_prior(prior, X, Y, draw_y, *, activation, n_rows=64, n_weight_draws=8, n_slices=100, max_iter=200,
                  n_critic_steps=2, learning_rate=0.02, penalty=1.0, max_cosine=0.5, generator=None):
    """Fit ``prior``'s hyperparameters to minimise DSW_2 between its predictive draws and the targets Y.

    Parameters
    ----------
    prior : skbayes.nn.LayerGaussianPrior
        Its ``sample_parameters`` are differentiable in its hyperparameters.
    X : torch.Tensor of shape (n, d)
    Y : torch.Tensor of shape (n, D)
        The data whose distribution the prior predictive should match.
    draw_y : callable
        ``draw_y(f, generator) -> y`` of the shape of f: a reparameterised draw of the likelihood.
    activation : str
    n_rows, n_weight_draws : int
        Rows of X and weight draws per step: the prior predictive sample has n_rows * n_weight_draws
        values, compared with as many rows of Y drawn with replacement.
    n_slices : int
        K, the slices per step.
    max_iter : int
        Steps of psi (each after ``n_critic_steps`` ascent steps of phi).
    learning_rate : float
        Adam's step on psi and phi.
    penalty, max_cosine : float
        lambda_C and C.
    generator : torch.Generator

    Returns
    -------
    trace : list of float
        The distance at every step of psi.
    """
    n = X.shape[0]
    pushforward = SlicePushforward(Y.shape[1], device=Y.device, dtype=Y.dtype)
    prior_optimizer = torch.optim.Adam(prior.parameters(), lr=learning_rate)
    critic_optimizer = torch.optim.Adam(pushforward.parameters(), lr=learning_rate)
    device = getattr(generator, "device", "cpu")
    trace = []

    def samples():
        rows = torch.randint(n, (n_rows,), generator=generator, device=device).to(X.device)
        f = forward_with_parameters(X[rows], prior.sample_parameters(n_weight_draws, generator), activation)
        model = draw_y(f, generator).reshape(-1, Y.shape[1])
        data_rows = torch.randint(n, (model.shape[0],), generator=generator, device=device).to(Y.device)
        return model, Y[data_rows]

    for _ in range(int(max_iter)):
        for _ in range(int(n_critic_steps)):
            model, data = samples()
            objective, _ = distributional_sliced_wasserstein(model.detach(), data, pushforward, n_slices, generator,
                                                             penalty, max_cosine)
            critic_optimizer.zero_grad()
            (-objective).backward()
            critic_optimizer.step()
        model, data = samples()
        _, distance = distributional_sliced_wasserstein(model, data, pushforward, n_slices, generator, penalty,
                                                        max_cosine)
        prior_optimizer.zero_grad()
        distance.backward()
        prior_optimizer.step()
        trace.append(float(distance.detach()))
    return trace
