r"""Initialisations of the mean-field posterior of a Bayesian MLP.

``INITIALIZATIONS`` maps a name to ``fn(network, X, Y, *, prior_scale,
noise_std, generator) -> None``, which sets the ``mu``/``rho`` (sigma =
softplus(rho)) of the :class:`~skbayes.nn.MeanFieldLinear` layers of a
:class:`~skbayes.nn.BayesianMLP` in place, from the training tensors X of shape
(n, d) and Y of shape (n, k). A ``noise_std`` of None means classification: Y
then holds class indices, shape (n, 1), and the classes are the network's
outputs.

``"default"``
    Keep the layers' own initialisation: means uniform in
    +-1/sqrt(fan_in), standard deviations ``posterior_init_scale``.
``"iblm"``
    Iterative Bayesian linear modelling (Rossi 2022, chapter 3, Algorithm 2):
    each layer, from the first, is fitted by Bayesian linear regression from
    its (sampled) inputs to the targets; see :func:`iblm_init`.
``"uninformative"``, ``"heuristic"``, ``"xavier"``, ``"orthogonal"``, ``"lsuv"``
    The data-independent (and LSUV) competitors of Rossi 2022, section 3.3,
    in their variational form: mean 0 and variance 1; mean 0 and variance
    1/D_in; mean 0 and variance 2/(D_in + D_out) (Glorot & Bengio 2010);
    orthogonal mean (Saxe et al. 2013) and variance 1/D_in; orthogonal mean
    rescaled to unit output variance layer by layer (Mishkin & Matas 2016) and
    variance 1/D_in. Biases get mean 0 and the layer's variance. The MAP
    initialisation of the thesis (a MAP fit trained as long as I-BLM takes) is
    not provided: it is a training run, which belongs to an estimator.

References
----------
.. [Rossi2022] S. Rossi, "Improving scalability and inference in
   probabilistic deep models", PhD thesis, Sorbonne Université / EURECOM,
   2022, chapter 3 (Rossi, Michiardi & Filippone, ICML 2019).
.. [Milios2018] D. Milios, R. Camoriano, P. Michiardi, L. Rosasco and
   M. Filippone, "Dirichlet-based Gaussian processes for large-scale
   calibrated classification", NeurIPS 2018.
.. [Bishop2006] C. M. Bishop, "Pattern recognition and machine learning",
   2006, section 3.3 (Bayesian linear regression).
"""

import math

import torch

from .functional import ACTIVATIONS, inverse_softplus

__all__ = ["INITIALIZATIONS", "blr_mean_field", "iblm_init"]

# Dirichlet label smoothing of the classification targets (Rossi 2022, Algorithm 2).
_DIRICHLET_ALPHA = 0.01
# Rows of each hidden unit's own minibatch (Rossi 2022, section 3.4: 64-128 suffice).
_IBLM_BATCH = 128
# Rows used for the output layer, subsampled beyond this.
_IBLM_MAX_ROWS = 2000
# Elements held at once by the batched regressions (~32 MB in float64).
_BLOCK = 2**22


def _set_layer(layer, mean, std):
    """Write mean (in+1, out) and std (broadcastable) into a mean-field layer."""
    with torch.no_grad():
        layer.mu.copy_(mean)
        std = torch.as_tensor(
            std, dtype=layer.mu.dtype, device=layer.mu.device
        ).expand_as(layer.mu)
        layer.rho.copy_(inverse_softplus(std))


def _propagate(network, x, n_layers, generator):
    """Inputs of layer ``n_layers``: x through the first layers, weights sampled per row."""
    act = ACTIVATIONS[network.activation]
    with torch.no_grad():
        for layer in network.layers[:n_layers]:
            x = act(layer(x, generator=generator, sample=True))
    return x


def blr_mean_field(features, targets, noise_var, prior_var):
    r"""Bayesian linear regressions and their reverse-KL mean-field projections.

    For each of U independent problems, prior w ~ N(0, prior_var I) and
    likelihood y ~ N(Phi w, diag(noise_var)): the posterior is N(m, S) with
    S^{-1} = I / prior_var + Phi^T diag(1/noise_var) Phi and
    m = S Phi^T diag(1/noise_var) y (Rossi 2022, eqs. 3.1-3.3; heteroscedastic
    for classification targets). The mean-field q minimising KL(q || p) has
    mean m and variances 1 / diag(S^{-1}) (Rossi 2022, eqs. 3.5-3.7), which
    underestimates the marginal variances diag(S) when the features are
    correlated.

    Parameters
    ----------
    features : torch.Tensor of shape (U, b, p)
        Design matrix Phi of each problem (include a column of ones for a bias).
    targets : torch.Tensor of shape (U, b)
    noise_var : torch.Tensor broadcastable to (U, b)
        Noise variance of each observation (> 0).
    prior_var : float
        Prior variance of every coefficient (> 0).

    Returns
    -------
    mean : torch.Tensor of shape (U, p)
        Posterior means m.
    std : torch.Tensor of shape (U, p)
        Mean-field standard deviations diag(S^{-1})^{-1/2}.
    """
    weighted = features / noise_var.unsqueeze(-1)
    precision = weighted.transpose(-1, -2) @ features
    precision.diagonal(dim1=-2, dim2=-1).add_(1.0 / prior_var)
    rhs = weighted.transpose(-1, -2) @ targets.unsqueeze(-1)
    chol = torch.linalg.cholesky(precision)
    mean = torch.cholesky_solve(rhs, chol).squeeze(-1)
    return mean, precision.diagonal(dim1=-2, dim2=-1).rsqrt()


def _targets(network, Y, noise_std):
    """Regression targets T (n, c) and noise variances (n, c) or (c,) for the regressions."""
    if noise_std is None:
        # Classification: one-hot labels through the Dirichlet transform of
        # Milios et al. 2018 (Rossi 2022, Algorithm 2), a heteroscedastic regression.
        n_classes = network.layers[-1].out_features
        onehot = torch.nn.functional.one_hot(Y[:, 0].long(), n_classes).to(Y.dtype)
        var = torch.log(1.0 / (onehot + _DIRICHLET_ALPHA) + 1.0)
        return torch.log(onehot + _DIRICHLET_ALPHA) - var / 2, var
    noise = torch.as_tensor(noise_std, dtype=Y.dtype, device=Y.device).reshape(-1)
    return Y, (noise**2).expand(Y.shape[1])


def iblm_init(
    network, X, Y, *, prior_scale, noise_std, generator, batch_size=_IBLM_BATCH
):
    """I-BLM: initialise a mean-field network layer by layer from Bayesian linear regression.

    Rossi 2022, chapter 3, Algorithm 2. From the first layer to the last, each
    output unit j of a layer is a Bayesian linear regression (with a bias
    column and the network's N(0, ``prior_scale``^2) prior) from the layer's
    inputs, X propagated through the layers already initialised with weights
    sampled from their q, to a target column; the unit's q is the reverse-KL
    mean-field projection of its posterior (:func:`blr_mean_field`).

    * Output layer: unit j regresses target column j on at most 2,000 rows
      (all of them when n <= 2,000), shared by the units. With no hidden layer
      this is the exact Bayesian linear regression posterior mean and the
      mean-field variances 1/diag(precision).
    * Hidden units: each regresses on its own bootstrap minibatch of
      min(``batch_size``, n) rows (the thesis draws a fresh minibatch per
      unit; the differences between minibatches are what make the units
      differ), onto target column j mod k with the sign (-1)^(j // k). The
      alternating sign is a library choice not in the thesis: it flips the
      sign of the solution only, and after a ReLU keeps the positive part of
      the target in half of the units and the negative part in the other half.
    * Targets: Y for regression, with noise variance ``noise_std``^2 per
      column. For classification, the one-hot labels transformed as
      log(Y + a) - v/2 with per-entry noise variance v = log(1/(Y + a) + 1),
      a = 0.01 (Milios et al. 2018), a heteroscedastic regression.

    Parameters
    ----------
    network : BayesianMLP
        With :class:`~skbayes.nn.MeanFieldLinear` layers; modified in place.
    X : torch.Tensor of shape (n, d)
    Y : torch.Tensor of shape (n, k)
        Regression targets, or (n, 1) class indices when ``noise_std`` is None.
    prior_scale : float
        Prior standard deviation of every weight and bias of the regressions.
    noise_std : float, torch.Tensor of shape (k,), or None
        Noise standard deviation of each target column (the likelihood's
        current noise); None for classification.
    generator : torch.Generator
        Source of the row draws and of the weights sampled while propagating.
    batch_size : int, default=128
        Rows per hidden unit.

    Raises
    ------
    TypeError
        If a layer has no ``mu``/``rho`` (not a mean-field layer).
    """
    _check_mean_field(network)
    prior_var = float(prior_scale) ** 2
    targets, noise_var = _targets(network, Y, noise_std)
    n, k = targets.shape
    device = X.device
    n_layers = len(network.layers)
    for index, layer in enumerate(network.layers):
        units = layer.out_features
        if index == n_layers - 1:
            rows = torch.arange(n, device=device)
            if n > _IBLM_MAX_ROWS:
                rows = torch.randperm(n, generator=generator, device=generator.device)[
                    :_IBLM_MAX_ROWS
                ].to(device)
            rows = rows.expand(units, -1)
            column = torch.arange(units, device=device)
            sign = torch.ones(units, dtype=X.dtype, device=device)
        else:
            b = min(batch_size, n)
            rows = torch.randint(
                n, (units, b), generator=generator, device=generator.device
            ).to(device)
            column = torch.arange(units, device=device) % k
            sign = 1.0 - 2.0 * ((torch.arange(units, device=device) // k) % 2).to(
                X.dtype
            )
        mean = torch.empty_like(layer.mu)
        std = torch.empty_like(layer.mu)
        p = layer.in_features + 1
        chunk = max(1, _BLOCK // (rows.shape[1] * p + p * p))
        for start in range(0, units, chunk):
            part = slice(start, start + chunk)
            idx = rows[part]
            h = _propagate(network, X[idx], index, generator)
            phi = torch.cat([h, torch.ones_like(h[..., :1])], dim=-1).double()
            t = targets[idx, column[part, None]] * sign[part, None]
            var = (
                noise_var[idx, column[part, None]]
                if noise_var.dim() == 2
                else noise_var[column[part, None]]
            )
            m, s = blr_mean_field(phi, t.double(), var.double().expand_as(t), prior_var)
            mean[:, part] = m.T.to(mean.dtype)
            std[:, part] = s.T.to(std.dtype)
        _set_layer(layer, mean, std)


def _check_mean_field(network):
    for layer in network.layers:
        if not (hasattr(layer, "mu") and hasattr(layer, "rho")):
            raise TypeError(
                f"Posterior initialisations need mean-field layers (mu, rho); got {type(layer).__name__}."
            )


def _default(network, X, Y, *, prior_scale, noise_std, generator):
    """Keep the layers' own initialisation (uniform means, small stds)."""


def _zero_mean(std_fn):
    """Data-independent initialisation: mean 0, std ``std_fn(d_in, d_out)`` everywhere."""

    def init(network, X, Y, *, prior_scale, noise_std, generator):
        _check_mean_field(network)
        for layer in network.layers:
            _set_layer(
                layer,
                torch.zeros_like(layer.mu),
                std_fn(layer.in_features, layer.out_features),
            )

    return init


def _orthogonal_mean(layer, generator):
    """An (in+1, out) mean whose weight block has orthonormal rows or columns, bias 0 (Saxe et al. 2013)."""
    gauss = torch.randn(
        (layer.in_features, layer.out_features),
        generator=generator,
        device=layer.mu.device,
        dtype=layer.mu.dtype,
    )
    tall = gauss if layer.in_features >= layer.out_features else gauss.T
    q, r = torch.linalg.qr(tall)
    q = q * torch.sign(torch.diagonal(r)).where(
        torch.diagonal(r) != 0, torch.ones_like(torch.diagonal(r))
    )
    weight = q if layer.in_features >= layer.out_features else q.T
    return torch.cat([weight, torch.zeros_like(weight[:1])], dim=0)


def _orthogonal(network, X, Y, *, prior_scale, noise_std, generator):
    """Orthogonal means, variance 1/D_in (Rossi 2022, section 3.3)."""
    _check_mean_field(network)
    for layer in network.layers:
        _set_layer(
            layer,
            _orthogonal_mean(layer, generator),
            1.0 / math.sqrt(max(layer.in_features, 1)),
        )


def _lsuv(network, X, Y, *, prior_scale, noise_std, generator, batch_size=_IBLM_BATCH):
    """Orthogonal means rescaled so that each layer's mean output has unit variance (Mishkin & Matas 2016)."""
    _check_mean_field(network)
    act = ACTIVATIONS[network.activation]
    rows = torch.randint(
        X.shape[0],
        (min(batch_size, X.shape[0]),),
        generator=generator,
        device=generator.device,
    )
    h = X[rows.to(X.device)]
    for index, layer in enumerate(network.layers):
        mean = _orthogonal_mean(layer, generator)
        with torch.no_grad():
            if index:
                h = act(h)
            out = h @ mean[:-1]
            scale = out.std()
            if torch.isfinite(scale) and scale > 0:
                mean = mean / scale
                out = out / scale
            h = out
        _set_layer(layer, mean, 1.0 / math.sqrt(max(layer.in_features, 1)))


INITIALIZATIONS = {
    "default": _default,
    "iblm": iblm_init,
    "uninformative": _zero_mean(lambda d_in, d_out: 1.0),
    "heuristic": _zero_mean(lambda d_in, d_out: 1.0 / math.sqrt(max(d_in, 1))),
    "xavier": _zero_mean(lambda d_in, d_out: math.sqrt(2.0 / (d_in + d_out))),
    "orthogonal": _orthogonal,
    "lsuv": _lsuv,
}
