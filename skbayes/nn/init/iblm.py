r"""Iterative Bayesian linear modelling (I-BLM): a mean-field posterior initialised layer by layer (Rossi 2022, chapter 3).

:func:`iblm_init` fits each :class:`~skbayes.nn.MeanFieldLinear` layer of a
:class:`~skbayes.nn.BayesianMLP`, from the first, by Bayesian linear
regression from its (sampled) inputs to the targets (Algorithm 2);
:func:`iblm_init_module` does the same for the mean-field layers of any torch
module, convolutions fitted on their input patches; :func:`blr_mean_field` is
the closed-form Bayesian linear regression both use.

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
import torch

from ..functional import ACTIVATIONS, inverse_softplus
from ..layers import MeanFieldConv2d, MeanFieldLinear

__all__ = ["blr_mean_field", "iblm_init", "iblm_init_module"]

# Dirichlet label smoothing of the classification targets (Rossi 2022, Algorithm 2).
_DIRICHLET_ALPHA = 0.01
# Rows of each hidden unit's own minibatch (Rossi 2022, section 3.4: 64-128 suffice).
_IBLM_BATCH = 128
# Rows used for the output layer, subsampled beyond this.
_IBLM_MAX_ROWS = 2000
# Elements held at once by the batched regressions (~32 MB in float64).
_BLOCK = 2**22
# Design rows (patches) per unit of a module's layer, subsampled beyond this.
_IBLM_MAX_PATCH_ROWS = 4096
# Images per forward pass while capturing a module layer's inputs.
_IBLM_PASS_IMAGES = 512


def _check_mean_field(network):
    for layer in network.layers:
        if not (hasattr(layer, "mu") and hasattr(layer, "rho")):
            raise TypeError(
                f"Posterior initialisations need mean-field layers (mu, rho); got {type(layer).__name__}."
            )


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


def _layer_prior_var(layer, prior_scale):
    """The prior variance of ``layer``'s weights: its own ``prior_scale`` (per layer under ``prior_scaling="fan_in"``), else ``prior_scale``."""
    return float(getattr(layer, "prior_scale", prior_scale)) ** 2


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


def _targets(n_outputs, Y, noise_std):
    """Regression targets T (n, c) and noise variances (n, c) or (c,) for the regressions."""
    if noise_std is None:
        # Classification: one-hot labels through the Dirichlet transform of
        # Milios et al. 2018 (Rossi 2022, Algorithm 2), a heteroscedastic regression.
        onehot = torch.nn.functional.one_hot(Y[:, 0].long(), n_outputs).to(Y.dtype)
        var = torch.log(1.0 / (onehot + _DIRICHLET_ALPHA) + 1.0)
        return torch.log(onehot + _DIRICHLET_ALPHA) - var / 2, var
    noise = torch.as_tensor(noise_std, dtype=Y.dtype, device=Y.device).reshape(-1)
    return Y, (noise**2).expand(Y.shape[1])


def _output_targets(targets, noise_var, n_units):
    """Targets and noise variances of an output layer of ``n_units`` units.

    The k target columns, then, for units beyond them (the raw noise scales
    of a heteroscedastic likelihood, whose raw value 0 is its initial noise
    level), the constant 0 with the noise variance of column j mod k.
    """
    n, k = targets.shape
    if n_units <= k:
        return targets, noise_var
    extra = torch.arange(n_units - k, device=targets.device) % k
    targets = torch.cat([targets, targets.new_zeros(n, n_units - k)], dim=1)
    return targets, torch.cat([noise_var, noise_var[..., extra]], dim=-1)


def _unit_rows(units, k, n, *, shared, batch_size, generator, device):
    """Rows (U, b) of X each unit regresses on, its target column (U,) and sign (U,).

    ``shared`` (the output layer): at most ``_IBLM_MAX_ROWS`` rows, the same
    for every unit. Otherwise each unit draws its own bootstrap minibatch of
    min(``batch_size``, n) rows. Unit j regresses target column j mod k with
    sign (-1)^(j // k) (column j, sign +1, for an output layer of k units).
    """
    if shared:
        rows = torch.arange(n, device=device)
        if n > _IBLM_MAX_ROWS:
            rows = torch.randperm(n, generator=generator, device=generator.device)[:_IBLM_MAX_ROWS].to(device)
        rows = rows.expand(units, -1)
    else:
        rows = torch.randint(n, (units, min(batch_size, n)), generator=generator, device=generator.device).to(device)
    j = torch.arange(units, device=device)
    return rows, j % k, 1.0 - 2.0 * ((j // k) % 2).to(torch.float64)


def _solve_units(features, image, column, sign, targets, noise_var, prior_var, offset=None):
    """The mean-field q of U units, each a Bayesian linear regression (:func:`blr_mean_field`).

    Parameters
    ----------
    features : torch.Tensor of shape (U, r, p)
        Design rows of each unit (bias column included).
    image : torch.LongTensor of shape (U, r)
        Row of ``targets`` each design row regresses on.
    column, sign : torch.Tensor of shape (U,)
        Target column of each unit and the sign it is multiplied by.
    targets, noise_var :
        From :func:`_targets`.
    prior_var : float
    offset : torch.Tensor of shape (k,), optional
        Subtracted from each target column before the sign (hidden units:
        the column means).

    Returns
    -------
    mean, std : torch.Tensor of shape (p, U), float64
    """
    col = column[:, None]
    t = targets[image, col].double()
    if offset is not None:
        t = t - offset[col].double()
    t = t * sign[:, None].to(targets.device)
    var = noise_var[image, col] if noise_var.dim() == 2 else noise_var[col]
    m, s = blr_mean_field(features.double(), t, var.double().expand_as(t), prior_var)
    return m.T, s.T


def iblm_init(
    network, X, Y, *, prior_scale, noise_std, generator, batch_size=_IBLM_BATCH
):
    """I-BLM: initialise a mean-field network layer by layer from Bayesian linear regression.

    Rossi 2022, chapter 3, Algorithm 2. From the first layer to the last, each
    output unit j of a layer is a Bayesian linear regression (with a bias
    column and the network's N(0, ``prior_scale^2``) prior) from the layer's
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
      alternating sign is a library choice not in the thesis (which leaves
      the hidden units' targets open): it flips the solution only, and after
      a ReLU keeps the positive part of the target in half of the units and
      the negative part in the other half. (:func:`iblm_init_module` also
      centres the hidden units' targets; this MLP path keeps its original
      targets.)
    * Targets: Y for regression, with noise variance ``noise_std^2`` per
      column. For classification, the one-hot labels transformed as
      log(Y + a) - v/2 with per-entry noise variance v = log(1/(Y + a) + 1),
      a = 0.01 (Milios et al. 2018), a heteroscedastic regression.
    * An output layer wider than the k targets (2k units: the means and the
      raw noise scales of a heteroscedastic likelihood) has its units
      beyond the k-th regress the constant 0 (the raw value of the
      likelihood's initial noise level); the hidden units regress the k
      targets only.

    Parameters
    ----------
    network : BayesianMLP
        With :class:`~skbayes.nn.MeanFieldLinear` layers; modified in place.
    X : torch.Tensor of shape (n, d)
    Y : torch.Tensor of shape (n, k)
        Regression targets, or (n, 1) class indices when ``noise_std`` is None.
    prior_scale : float
        Prior standard deviation of the weights and biases of the regressions
        of a layer without a ``prior_scale`` of its own; the mean-field layers
        have one (``prior_scale`` divided by sqrt(fan_in) under a method's
        ``prior_scaling="fan_in"``), and it is used.
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
    targets, noise_var = _targets(network.layers[-1].out_features, Y, noise_std)
    output = _output_targets(targets, noise_var, network.layers[-1].out_features)
    n = targets.shape[0]
    n_layers = len(network.layers)
    for index, layer in enumerate(network.layers):
        units = layer.out_features
        shared = index == n_layers - 1
        prior_var = _layer_prior_var(layer, prior_scale)
        layer_targets, layer_noise_var = output if shared else (targets, noise_var)
        rows, column, sign = _unit_rows(
            units, layer_targets.shape[1], n, shared=shared, batch_size=batch_size, generator=generator,
            device=X.device,
        )
        mean = torch.empty_like(layer.mu)
        std = torch.empty_like(layer.mu)
        p = layer.in_features + 1
        chunk = max(1, _BLOCK // (rows.shape[1] * p + p * p))
        for start in range(0, units, chunk):
            part = slice(start, start + chunk)
            idx = rows[part]
            h = _propagate(network, X[idx], index, generator)
            phi = torch.cat([h, torch.ones_like(h[..., :1])], dim=-1)
            m, s = _solve_units(phi, idx, column[part], sign[part], layer_targets, layer_noise_var, prior_var, None)
            mean[:, part] = m.to(mean.dtype)
            std[:, part] = s.to(std.dtype)
        _set_layer(layer, mean, std)


class _Captured(Exception):
    """Ends a forward pass once the input of the layer being initialised is held."""


def _mean_field_layers(module):
    """The mean-field layers of a module: linear (``.layer`` with mu/rho) and :class:`MeanFieldConv2d`."""
    return [
        m for m in module.modules()
        if isinstance(m, MeanFieldConv2d) or (hasattr(m, "layer") and isinstance(m.layer, MeanFieldLinear))
    ]


def _forward_order(network, x):
    """The mean-field layers of ``network.module`` in the order one pass of ``x`` calls them.

    Raises ValueError if a layer runs more than once in a pass (shared
    weights): its input is not one design matrix.
    """
    order = []

    def record(layer, args):
        if any(layer is seen for seen in order):
            raise ValueError(
                f"I-BLM initialises each layer from its input, but a {type(layer).__name__} runs more than once "
                "in one pass of the module; use init='default'."
            )
        order.append(layer)

    hooks = [layer.register_forward_pre_hook(record) for layer in _mean_field_layers(network.module)]
    try:
        with torch.no_grad():
            network(x, sample=False)
    finally:
        for hook in hooks:
            hook.remove()
    return order


def _layer_inputs(network, layer, x, generator):
    """The input of ``layer`` when rows x (B, n_features) pass through the network.

    The layers before it run with their weights sampled from q, a fresh draw
    per row (noise mode ``"sample"``); the pass stops at ``layer``.
    """
    held = []

    def capture(module, args):
        held.append(args[0])
        raise _Captured

    hook = layer.register_forward_pre_hook(capture)
    try:
        with torch.no_grad():
            network(x, generator=generator, sample=True)
    except _Captured:
        pass
    finally:
        hook.remove()
    return held[0]


def _conv_padding(layer):
    """(left, right, top, bottom) zero padding of a :class:`MeanFieldConv2d`, as torch pads."""
    if layer.padding == "valid":
        return (0, 0, 0, 0)
    if layer.padding == "same":
        pads = []
        for k, d in zip(reversed(layer.kernel_size), reversed(layer.dilation)):
            total = d * (k - 1)
            pads += [total // 2, total - total // 2]
        return tuple(pads)
    ph, pw = layer.padding
    return (pw, pw, ph, ph)


def _design_rows(layer, h):
    """Design rows (B, m, p) of each input: patches (im2col) of a convolution, or the rows of a linear layer.

    For a :class:`MeanFieldConv2d` the m = H'W' patches of each image
    (:func:`torch.nn.functional.unfold`, channel-major like the kernel),
    for a linear layer the input's trailing vectors; a column of ones is
    appended for the bias.
    """
    if isinstance(layer, MeanFieldConv2d):
        h = torch.nn.functional.pad(h, _conv_padding(layer))
        h = torch.nn.functional.unfold(h, layer.kernel_size, dilation=layer.dilation, stride=layer.stride)
        h = h.transpose(1, 2)
        with_bias = layer.bias_mu is not None
    else:
        h = h.reshape(h.shape[0], -1, h.shape[-1])
        with_bias = True
    if with_bias:
        h = torch.cat([h, torch.ones_like(h[..., :1])], dim=-1)
    return h


def _set_module_layer(layer, mean, std):
    """Write mean and std (p, U) into a mean-field convolution or linear layer of a module."""
    if not isinstance(layer, MeanFieldConv2d):
        _set_layer(layer.layer, mean, std)
        return
    with torch.no_grad():
        shape = layer.weight_mu.shape
        n_weights = shape[1] * shape[2] * shape[3]
        options = {"dtype": layer.weight_mu.dtype, "device": layer.weight_mu.device}
        mean, std = mean.to(**options), std.to(**options)
        layer.weight_mu.copy_(mean[:n_weights].T.reshape(shape))
        layer.weight_rho.copy_(inverse_softplus(std[:n_weights].T.reshape(shape)))
        if layer.bias_mu is not None:
            layer.bias_mu.copy_(mean[n_weights])
            layer.bias_rho.copy_(inverse_softplus(std[n_weights]))


def iblm_init_module(
    network, X, Y, *, prior_scale, noise_std, generator, batch_size=_IBLM_BATCH, max_rows=_IBLM_MAX_PATCH_ROWS,
):
    """I-BLM for the mean-field layers of any torch module, convolutions by their patches.

    Rossi 2022, chapter 3, Algorithm 2, as in :func:`iblm_init`, for a
    :class:`~skbayes.nn.networks.BayesianModuleNetwork` whose module holds
    mean-field linear layers and :class:`~skbayes.nn.MeanFieldConv2d`
    layers (:func:`~skbayes.nn.networks.module.to_mean_field`). The layers
    are visited in the order a forward pass calls them; each layer's input
    is captured (a forward pre-hook) on a pass of its rows through the
    layers already initialised, with their weights sampled from q per row.
    Every output unit (a dense unit, or a convolution's output channel) is
    then a Bayesian linear regression with a bias column and the
    N(0, ``prior_scale^2``) prior, its q the reverse-KL mean-field projection
    (:func:`blr_mean_field`); rows, target columns, the hidden units' centring
    and signs, and the Dirichlet transform of classification targets are
    those of :func:`iblm_init`.

    * Convolution: the design rows are the input's patches (im2col; the
      thesis: "the BLM then maps spatial patches to the output feature",
      Rossi 2022, section 3.2), one row per (image, position), the kernel
      and bias the regression's coefficients. Each patch regresses on its
      image's target: the image's target broadcast to all its positions, a
      library choice (the thesis does not say which targets the patches
      get). A unit keeps at most ``max_rows`` of its images' patch rows,
      drawn without replacement.
    * Linear layer: its input's rows; an input with extra leading axes
      (..., in) gives one row per vector, again with its image's target.
    * Output layer (the last layer called): at most 2,000 images shared by
      its units, unit j on column j; with no layer before it and at most
      ``max_rows`` design rows this is the exact Bayesian linear regression
      posterior mean with mean-field variances 1/diag(precision).

    Layers other than these (activations, pooling, reshapes) run as in the
    module's evaluation mode (torch dropout off); the module's mode is
    restored afterwards.

    Parameters
    ----------
    network : BayesianModuleNetwork
        Modified in place.
    X : torch.Tensor of shape (n, n_features)
        Rows, reshaped by the network to its input shape.
    Y : torch.Tensor of shape (n, k)
        Regression targets, or (n, 1) class indices when ``noise_std`` is None.
    prior_scale : float
        As in :func:`iblm_init`: each mean-field layer's own ``prior_scale`` is used.
    noise_std : float, torch.Tensor of shape (k,), or None
        Noise standard deviation of each target column; None for classification.
    generator : torch.Generator
        Source of the rows, the patch subsamples and the weights sampled
        while propagating.
    batch_size : int, default=128
        Images per hidden unit.
    max_rows : int, default=4096
        Design rows (patches) per unit at most.

    Raises
    ------
    ValueError
        If the module has no mean-field layer, a convolution has groups > 1
        (its units see only a slice of the input channels), or a layer runs
        more than once in a pass.
    """
    training = network.training
    network.eval()
    try:
        _iblm_module(network, X, Y, prior_scale, noise_std, generator, batch_size, max_rows)
    finally:
        network.train(training)


def _iblm_module(network, X, Y, prior_scale, noise_std, generator, batch_size, max_rows):
    layers = _forward_order(network, X[:1])
    if not layers:
        raise ValueError("The module has no mean-field layer to initialise.")
    for layer in layers:
        if isinstance(layer, MeanFieldConv2d) and layer.groups != 1:
            raise ValueError(
                f"I-BLM initialises convolutions with groups=1 only; the module has a MeanFieldConv2d with "
                f"groups={layer.groups}. Use init='default'."
            )
    targets, noise_var = _targets(network.n_outputs, Y, noise_std)
    output = _output_targets(targets, noise_var, network.n_outputs)
    center = targets.mean(dim=0)
    n = targets.shape[0]
    device = X.device
    for index, layer in enumerate(layers):
        units = layer.out_channels if isinstance(layer, MeanFieldConv2d) else layer.out_features
        shared = index == len(layers) - 1
        prior_var = _layer_prior_var(layer, prior_scale)
        layer_targets, layer_noise_var = output if shared else (targets, noise_var)
        rows, column, sign = _unit_rows(
            units, layer_targets.shape[1], n, shared=shared, batch_size=batch_size, generator=generator,
            device=device,
        )
        images = rows.shape[1]
        # units whose images pass together: at most _IBLM_PASS_IMAGES images a pass
        chunk = units if shared else max(1, _IBLM_PASS_IMAGES // images)
        means, stds = [], []
        for start in range(0, units, chunk):
            part = slice(start, start + chunk)
            idx = rows[part]
            u = idx.shape[0]
            if shared:
                passes = [X[idx[0, i:i + _IBLM_PASS_IMAGES]] for i in range(0, images, _IBLM_PASS_IMAGES)]
            else:
                passes = [X[idx.reshape(-1)]]
            design = torch.cat(
                [_design_rows(layer, _layer_inputs(network, layer, x, generator)) for x in passes]
            )
            positions, p = design.shape[1], design.shape[2]
            if shared:
                design = design.reshape(1, images * positions, p)
            else:
                design = design.reshape(u, images * positions, p)
            image = idx.repeat_interleave(positions, dim=1)
            if images * positions > max_rows:
                keep = torch.rand(
                    design.shape[0], images * positions, generator=generator, device=generator.device
                ).argsort(dim=1)[:, :max_rows].to(device)
                design = torch.gather(design, 1, keep[..., None].expand(-1, -1, p))
                image = torch.gather(image, 1, keep.expand(u, -1))
            design = design.expand(u, -1, -1)
            # bound the float64 solves held at once
            step = max(1, _BLOCK // (design.shape[1] * p + p * p))
            for s0 in range(0, u, step):
                sl = slice(s0, s0 + step)
                mean, std = _solve_units(
                    design[sl], image[sl], column[part][sl], sign[part][sl], layer_targets, layer_noise_var,
                    prior_var, None if shared else center,
                )
                means.append(mean)
                stds.append(std)
        _set_module_layer(layer, torch.cat(means, dim=1), torch.cat(stds, dim=1))


