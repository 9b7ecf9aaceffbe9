"""Any torch module behind the prediction protocols of the Bayesian estimators.

A user builds a network from plain torch layers; the inference method turns
it Bayesian where that is well defined:

* :func:`to_mc_dropout` keeps the module's :class:`torch.nn.Dropout` layers
  on at prediction and, depending on ``placement``, adds dropout before every
  dense layer and after every convolution (the Bayesian CNN of Gal 2016,
  section 3.4.1) and swaps LSTM/GRU layers and embeddings for their
  variational forms (section 3.4.2);
* :func:`to_mean_field` swaps every :class:`torch.nn.Linear` and
  :class:`torch.nn.Conv2d` for a factorised-Gaussian layer (Bayes by
  Backprop with local reparameterisation, Kingma et al. 2015);
* :func:`to_mnf` swaps them for multiplicative normalising flow layers
  (Louizos & Welling 2017);
* :func:`to_whvi` gives the dense layers Walsh-Hadamard posteriors and the
  convolutions MC dropout (the thesis's recipe for CNNs, Rossi 2022,
  section 4.5);
* :class:`StackedModuleNetwork` holds M copies of any module as stacked
  tensors (deep ensembles, kept SGHMC samples) and evaluates them with
  :func:`torch.func.vmap`.

:class:`BayesianModuleNetwork` is the network the estimators fit and predict
with: the single-network protocol of :class:`~skbayes.nn.BayesianLayerStack`
(``forward(x, generator, sample)``, ``kl()``, ``sample_parameters``,
``forward_with``) for a module whose stochastic layers follow
:mod:`skbayes.nn.layers.noise`. The estimators pass rows of shape
(n, n_features); the networks reshape them to ``(n, *input_shape)`` for the
module, which returns (n, n_outputs).
"""

import copy
import functools
import inspect
import math
import warnings

import torch
from torch import nn

from ..functional import dropout_weight_decay, layer_prior_scale
from ..layers import (
    EmbeddingDropout, MeanFieldConv2d, MeanFieldLinear, MNFConv2d, MNFLinear, VariationalGRU, VariationalLSTM,
    WHVILinear,
)
from ..layers.dropout import MCDropoutLayer
from ..layers.noise import StochasticLayer, noise_context

__all__ = [
    "BayesianModuleNetwork",
    "StackedModuleNetwork",
    "build_module",
    "check_module_output",
    "probe_widths",
    "to_mc_dropout",
    "to_mean_field",
    "to_mnf",
    "to_whvi",
]

def build_module(factory, kwargs=None, *, seed, device=None, dtype=None, name="module"):
    """Build a module from a class/factory (or copy an instance), initialised from ``seed``.

    The module's own initialisation (``torch.nn.init``) draws from the global
    CPU generator; it runs under :func:`torch.random.fork_rng` seeded with
    ``seed``, so the result depends on ``seed`` only and the global state is
    left as it was. An instance is deep-copied and its layers re-initialised
    by their ``reset_parameters`` (so that ensemble members differ) when
    ``reset`` is asked for through ``kwargs=None`` and ``seed`` is not None.

    Parameters
    ----------
    factory : type or callable or torch.nn.Module
        ``factory(**kwargs)`` returns the module; an instance is copied.
    kwargs : dict, optional
        Keyword arguments of the factory.
    seed : int
    device, dtype : optional
        Where and in which precision the module's parameters end up.
    name : str, default="module"
        The estimator's parameter holding ``factory``, for the error messages.

    Returns
    -------
    module : torch.nn.Module

    Raises
    ------
    TypeError
        If the factory does not return a :class:`torch.nn.Module`, or if
        keyword arguments come with an instance.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        if isinstance(factory, nn.Module):
            if kwargs:
                raise TypeError(
                    f"{name} is an instance of {type(factory).__name__}; {name}_params "
                    f"({sorted(kwargs)}) need a class or factory."
                )
            module = copy.deepcopy(factory)
            kept = set()
            for layer in module.modules():
                if hasattr(layer, "reset_parameters"):
                    layer.reset_parameters()
                elif _own_parameters(layer):
                    kept.add(type(layer).__name__)
            if kept:
                warnings.warn(
                    f"The {name} instance has layers without reset_parameters ({', '.join(sorted(kept))}): they "
                    "keep the instance's weights, so every ensemble member or chain starts from the same values "
                    "there. Pass the class (or a factory) instead.",
                    UserWarning,
                    stacklevel=3,
                )
        else:
            module = factory(**(kwargs or {}))
    if not isinstance(module, nn.Module):
        raise TypeError(f"{name} must build a torch.nn.Module; {factory!r} returned {type(module).__name__}.")
    return module.to(device=device, dtype=dtype)


def probe_widths(body, input_shape):
    """Output width and widest layer output of a module, per input, from one forward pass on zeros.

    The pass runs in evaluation mode without gradients (so batch
    normalisation statistics are left alone) and the module's mode is
    restored afterwards.

    Parameters
    ----------
    body : torch.nn.Module
        Maps ``(B, *input_shape)`` to (B, ...).
    input_shape : tuple of int

    Returns
    -------
    n_outputs : int
        Number of values of one output (its trailing dimensions flattened).
    widest : int
        Largest number of values any of the module's layers outputs for one
        input (sizes the prediction blocks).
    """
    widths = []

    def record(module, inputs, output):
        widths.append(output.numel() if torch.is_tensor(output) else 0)

    first = next(body.parameters(), None)
    options = {} if first is None else {"device": first.device, "dtype": first.dtype}
    hooks = [module.register_forward_hook(record) for module in body.modules()]
    training = body.training
    try:
        body.eval()
        with torch.no_grad():
            out = body(torch.zeros((1, *input_shape), **options))
    finally:
        body.train(training)
        for hook in hooks:
            hook.remove()
    return out.numel(), max(widths, default=0)


def check_module_output(module, input_shape, n_outputs):
    """Probe ``module`` on one input of ``input_shape``: the widest layer output, after checking the output width.

    Returns
    -------
    widest : int
        Largest number of values one of the module's layers outputs for one input.

    Raises
    ------
    ValueError
        If the module does not return ``n_outputs`` values per input.
    """
    width, widest = probe_widths(module, input_shape)
    if width != n_outputs:
        raise ValueError(
            f"The module returns {width} values per input of shape {tuple(input_shape)}; the estimator needs "
            f"n_outputs={n_outputs} (the number of targets, twice that with heteroscedastic noise, or of classes). "
            "A factory taking n_outputs gets it from the data."
        )
    return widest


def factory_accepts(factory, name):
    """Whether ``factory`` (a class or callable, not an instance) takes a keyword argument ``name``."""
    if isinstance(factory, nn.Module):
        return False
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return False
    return name in signature.parameters


def _replace_children(module, replace):
    """Replace, depth first, every child c with ``replace(c)`` when that is not None."""
    for name, child in list(module.named_children()):
        new = replace(child)
        if new is None:
            _replace_children(child, replace)
        else:
            setattr(module, name, new)
    return module


def _refuse_tied_parameters(module, converted_types, method):
    """Raise if a layer ``method`` would convert shares a parameter with another layer (weight tying).

    Converting copies the weights into new parameters, which would silently
    untie them.
    """
    owners = {}
    for layer in module.modules():
        for parameter in layer.parameters(recurse=False):
            owners.setdefault(id(parameter), []).append(layer)
    for layers in owners.values():
        if len(layers) > 1 and any(type(layer) in converted_types for layer in layers):
            names = ", ".join(sorted({type(layer).__name__ for layer in layers}))
            raise ValueError(
                f"{method} would untie the weights the module's {names} layers share (weight tying); "
                "use DeepEnsemble or SGHMC, or untie them."
            )


def _own_parameters(module):
    return any(True for _ in module.parameters(recurse=False))


def _unsupported(module, handled, method):
    """Raise for parametric layers outside the stochastic layers: ``method`` cannot make them Bayesian."""
    inside = {id(m) for layer in module.modules() if isinstance(layer, StochasticLayer) for m in layer.modules()}
    bad = sorted({type(m).__name__ for m in module.modules() if id(m) not in inside and _own_parameters(m)})
    if bad:
        raise ValueError(
            f"{method} cannot make these layers Bayesian: {', '.join(bad)}. It handles {handled} "
            "(and any layer without parameters); use MCDropout or DeepEnsemble for other layers."
        )


class _VariationalLinearLayer(StochasticLayer):
    """A variational linear layer (:class:`~skbayes.nn.MeanFieldLinear`, :class:`~skbayes.nn.MNFLinear`) inside a module.

    Driven by the noise protocol: ``"sample"``: the layer's training pass
    (local reparameterisation per row); ``"shared"``: one weight draw
    (``sample_parameters``) for all rows; ``"mean"``: the layer without
    noise. Inputs (..., in) as :class:`torch.nn.Linear`.
    """

    def __init__(self, layer):
        super().__init__()
        self.layer = layer
        self.in_features, self.out_features = layer.in_features, layer.out_features

    @classmethod
    def from_module(cls, linear, *, layer_cls=MeanFieldLinear, prior_scale=1.0, posterior_init_scale=1e-3,
                    generator=None, **kwargs):
        """Start q's means at a :class:`torch.nn.Linear`'s weights (a missing bias starts at 0 and is learned).

        ``kwargs`` go to ``layer_cls`` (e.g. the flow settings of :class:`~skbayes.nn.MNFLinear`);
        ``generator`` draws the layer's other initial values (MNF's flows), a fixed-seed one when None (the
        random initial means are overwritten, and the global generator is left alone).
        """
        factory = {"device": linear.weight.device, "dtype": linear.weight.dtype}
        layer = layer_cls(
            linear.in_features, linear.out_features, prior_scale=prior_scale,
            posterior_init_scale=posterior_init_scale, generator=generator or torch.Generator(), **kwargs,
            **factory,
        )
        with torch.no_grad():
            layer.mu[:-1].copy_(linear.weight.T)
            layer.mu[-1].copy_(linear.bias if linear.bias is not None else torch.zeros_like(layer.mu[-1]))
        return cls(layer)

    def forward(self, x):
        if self.noise_mode == "shared":
            weight, bias = self.layer.sample_parameters(1, self.noise_generator)
            return torch.matmul(x, weight[0]) + bias[0, 0]
        return self.layer(x, self.noise_generator, sample=self.noise_mode == "sample")

    @property
    def monte_carlo_kl(self):
        """Whether the layer's ``kl`` is a Monte-Carlo estimate taking ``generator`` and ``n_draws`` (MNF)."""
        return getattr(self.layer, "monte_carlo_kl", False)

    def kl(self, *args, **kwargs):
        """The layer's ``kl`` (MNF's Monte-Carlo bound takes ``generator`` and ``n_draws``)."""
        return self.layer.kl(*args, **kwargs)


def convert_layers(module, conversions, method):
    """Replace, in place, every layer whose exact type is a key of ``conversions`` by ``conversions[type](layer)``.

    Refuses weights shared by a converted layer (:func:`_refuse_tied_parameters`) and, after the
    conversion, layers with parameters outside the stochastic layers (:func:`_unsupported`), naming
    ``method``. Returns the converted module (a new object when ``module`` itself is converted).
    """

    def replace(child):
        convert = conversions.get(type(child))
        return None if convert is None else convert(child)

    _refuse_tied_parameters(module, tuple(conversions), method)
    if type(module) in conversions:
        module = replace(module)
    else:
        _replace_children(module, replace)
    _unsupported(module, " and ".join(f"torch.nn.{cls.__name__}" for cls in conversions), method)
    return module


def _to_variational(module, conversions, method, *, prior_scale, posterior_init_scale, prior_scaling, **kwargs):
    """:func:`convert_layers` with each layer's prior scale (``prior_scaling``) and ``posterior_init_scale``."""

    def with_prior(convert):
        def scaled(child):
            fan_in = nn.init._calculate_fan_in_and_fan_out(child.weight)[0]
            scale = layer_prior_scale(prior_scale, fan_in, prior_scaling)
            return convert(child, prior_scale=scale, posterior_init_scale=posterior_init_scale, **kwargs)
        return scaled

    return convert_layers(module, {cls: with_prior(convert) for cls, convert in conversions.items()}, method)


def to_mean_field(module, *, prior_scale=1.0, posterior_init_scale=1e-3, prior_scaling=None):
    """Swap a module's Linear and Conv2d layers for factorised-Gaussian layers, in place.

    Each :class:`torch.nn.Linear` becomes a mean-field linear layer and each
    :class:`torch.nn.Conv2d` a :class:`~skbayes.nn.MeanFieldConv2d`, their
    posterior means starting at the layer's initial weights, standard
    deviations at ``posterior_init_scale``, with a N(0, prior_scale^2) prior
    (Blundell et al. 2015; local reparameterisation, Kingma et al. 2015), or
    with ``prior_scaling="fan_in"`` N(0, prior_scale^2 / fan_in) on a layer
    whose outputs each see ``fan_in`` inputs (``in_features``; for a
    convolution ``in_channels / groups`` times the kernel area),
    :func:`skbayes.nn.functional.layer_prior_scale`.

    Parameters
    ----------
    module : torch.nn.Module
    prior_scale, posterior_init_scale : float
    prior_scaling : {"fan_in"} or None, default=None

    Returns
    -------
    module : torch.nn.Module
        The same object, converted.

    Raises
    ------
    ValueError
        If the module has layers with parameters other than Linear and
        Conv2d (LSTM, embeddings, normalisation layers, ...): mean-field VI
        has no form for them here.
    """
    conversions = {nn.Linear: _VariationalLinearLayer.from_module, nn.Conv2d: MeanFieldConv2d.from_module}
    return _to_variational(
        module, conversions, "MeanFieldVI", prior_scale=prior_scale, posterior_init_scale=posterior_init_scale,
        prior_scaling=prior_scaling,
    )


def to_mnf(module, *, prior_scale=1.0, posterior_init_scale=1e-3, prior_scaling=None, generator=None, **flow_settings):
    """Swap a module's Linear and Conv2d layers for multiplicative normalising flow layers, in place.

    Each :class:`torch.nn.Linear` becomes a :class:`~skbayes.nn.MNFLinear`
    (one multiplicative variable per input unit) and each
    :class:`torch.nn.Conv2d` a :class:`~skbayes.nn.MNFConv2d` (one per
    feature map), Louizos & Welling 2017; the means start at the layer's
    initial weights, the priors as in :func:`to_mean_field`.

    Parameters
    ----------
    module : torch.nn.Module
    prior_scale, posterior_init_scale : float
    prior_scaling : {"fan_in"} or None, default=None
    generator : torch.Generator, optional
        Source of the initial flows and reverse models, layer by layer.
    **flow_settings
        ``flow``, ``n_flows``, ``n_flows_reverse``, ``hidden_size`` of the layers.

    Returns
    -------
    module : torch.nn.Module
        The converted module (a new object when ``module`` is itself a Linear or Conv2d).

    Raises
    ------
    ValueError
        If the module has layers with parameters other than Linear and Conv2d.
    """
    conversions = {
        nn.Linear: functools.partial(_VariationalLinearLayer.from_module, layer_cls=MNFLinear),
        nn.Conv2d: MNFConv2d.from_module,
    }
    return _to_variational(
        module, conversions, "MNF", prior_scale=prior_scale, posterior_init_scale=posterior_init_scale,
        prior_scaling=prior_scaling, generator=generator, **flow_settings,
    )


def to_whvi(module, dropout_rate, *, last_layer="mean_field", prior_scale=1.0, posterior_init_scale=1e-3,
            g_prior_variance=1e-5, n_flows=0, generator=None):
    """WHVI on a module's dense layers and MC dropout after its convolutions, in place.

    Rossi 2022 (section 4.5) fits CNNs with WHVI on every fully connected
    layer and MC dropout on the convolutional filters (WHVI on the filters
    left too few parameters). Each :class:`torch.nn.Linear` becomes a
    :class:`~skbayes.nn.WHVILinear` with its own initialisation (the module's
    weights have no W = S_1 H diag(g) H S_2 form), except the last one with
    ``last_layer="mean_field"``, a factorised Gaussian starting at the
    module's weights (the thesis's output layer); then
    :func:`to_mc_dropout` with ``placement="all"`` puts dropout of
    ``dropout_rate`` after every convolution (its KL condition a weight
    decay of the convolutions), makes the module's own
    :class:`torch.nn.Dropout` layers MC dropout of that rate, and swaps
    LSTM, GRU and embedding layers for their variational forms.

    Parameters
    ----------
    module : torch.nn.Module
    dropout_rate : float in [0, 1)
        Rate of the masks after the convolutions.
    last_layer : {"mean_field", "whvi"}, default="mean_field"
    prior_scale : float, default=1.0
        Prior standard deviation of the biases, the mean-field weights and
        the point-estimated parameters.
    posterior_init_scale, g_prior_variance, n_flows
        As in :class:`~skbayes.nn.WHVILinear`.
    generator : torch.Generator, optional
        Source of the WHVI layers' initial values, layer by layer.

    Returns
    -------
    module : torch.nn.Module
        The converted module.
    dropped_weights : dict of str to float
        As :func:`to_mc_dropout` returns them.

    Raises
    ------
    ValueError
        If the module has no Linear layer, or as :func:`to_mc_dropout`.
    """
    linears = [m for m in module.modules() if type(m) is nn.Linear]
    if not linears:
        raise ValueError("WHVI needs a module with at least one torch.nn.Linear layer (its dense layers).")
    _refuse_tied_parameters(module, (nn.Linear,), "WHVI")
    last = linears[-1] if last_layer == "mean_field" else None

    def replace(child):
        if type(child) is not nn.Linear:
            return None
        if child is last:
            return _VariationalLinearLayer.from_module(
                child, prior_scale=prior_scale, posterior_init_scale=posterior_init_scale
            )
        layer = WHVILinear(
            child.in_features, child.out_features, g_prior_variance=g_prior_variance, prior_scale=prior_scale,
            posterior_init_scale=posterior_init_scale, n_flows=n_flows, generator=generator,
            dtype=child.weight.dtype,
        ).to(child.weight.device)
        return _VariationalLinearLayer(layer)

    module = replace(module) or _replace_children(module, replace)
    return to_mc_dropout(module, dropout_rate, placement="all", prior_scale=prior_scale)


#: Where :func:`to_mc_dropout` puts dropout.
DROPOUT_PLACEMENTS = ("all", "dense", "existing")


def to_mc_dropout(module, dropout_rate, *, placement="all", prior_scale=1.0, recurrent=None):
    """Make a module's dropout MC dropout, adding dropout where ``placement`` says, in place.

    Every :class:`torch.nn.Dropout` becomes an
    :class:`~skbayes.nn.MCDropoutLayer` with ``dropout_rate`` (kept on at
    prediction). ``placement="dense"`` adds dropout on the input of every
    :class:`torch.nn.Linear` (dropout before the fully connected layers, the
    usual practice); ``"all"`` also adds it after every convolution, before
    pooling (the Bayesian CNN, Gal 2016, section 3.4.1; a dense layer whose
    input is already dropped, e.g. the first one after the last
    convolution, gets no second mask: conv-drop-pool-conv-drop-pool-dense-
    drop-dense, Gal's "lenet-all"), and swaps
    :class:`torch.nn.LSTM`, :class:`torch.nn.GRU` and
    :class:`torch.nn.Embedding` for their variational forms, one mask per
    sequence tied across time steps (section 3.4.2); ``"existing"`` adds
    nothing. The layers are visited in definition order (the order of a
    :class:`torch.nn.Sequential`), taken for the order in which they run.
    The KL condition becomes a weight decay
    (:meth:`BayesianModuleNetwork.kl`).

    Parameters
    ----------
    module : torch.nn.Module
    dropout_rate : float in [0, 1)
    placement : {"all", "dense", "existing"}, default="all"
    prior_scale : float, default=1.0
        Prior standard deviation of the recurrent layers' weights.
    recurrent : dict, optional
        Keyword arguments of the variational recurrent layers' ``from_module``
        (``gates``, ``masks``).

    Returns
    -------
    module : torch.nn.Module
        The converted module.
    dropped_weights : dict of str to float
        Names of the weights (in the returned module) a dropout mask acts on
        (the layer whose input is dropped, also through activations and
        pooling; the convolution whose output is dropped), each with the
        mask's rate p: their weight decay carries the 1/(1-p) of the
        inverted-dropout KL condition.

    Raises
    ------
    ValueError
        On an unknown ``placement``, dropout types other than
        :class:`torch.nn.Dropout` (their masks are not the Bernoulli q of MC
        dropout here), or an LSTM/GRU with torch's own ``dropout`` between
        its layers that ``placement`` does not replace.
    """
    if placement not in DROPOUT_PLACEMENTS:
        raise ValueError(f"Unknown placement {placement!r}; choose one of {DROPOUT_PLACEMENTS}.")
    convs = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
    recurrent_layers = {}
    if placement == "all":
        for torch_cls, cls in ((nn.LSTM, VariationalLSTM), (nn.GRU, VariationalGRU)):
            recurrent_layers[torch_cls] = lambda m, cls=cls: cls.from_module(
                m, dropout_rate=dropout_rate, prior_scale=prior_scale, **(recurrent or {})
            )
        recurrent_layers[nn.Embedding] = lambda m: EmbeddingDropout.from_module(
            m, dropout_rate=dropout_rate, prior_scale=prior_scale
        )

    # Walking the layers in definition order (the order of a Sequential):
    # whether the output of the last layer is already dropped, so that a
    # dense layer after a dropped convolution gets no second mask.
    pending = False

    def replace(child):
        nonlocal pending
        if type(child) is nn.Dropout:
            pending = True
            return MCDropoutLayer(dropout_rate)
        if isinstance(child, nn.modules.dropout._DropoutNd):
            raise ValueError(
                f"MC dropout handles torch.nn.Dropout only; the module has {type(child).__name__}."
            )
        if isinstance(child, MCDropoutLayer):
            pending = not getattr(child, "drops_output_of_previous", False)
            return child
        if isinstance(child, nn.RNNBase) and child.dropout > 0 and type(child) not in recurrent_layers:
            raise ValueError(
                f"The module's {type(child).__name__} has dropout={child.dropout} between its layers: torch draws "
                "those masks from the global generator, per step, and turns them off at prediction. Set "
                "dropout=0 and use placement='all' (or skbayes.nn.VariationalLSTM/VariationalGRU)."
            )
        if type(child) is nn.Linear and placement in ("all", "dense") and not pending:
            return nn.Sequential(MCDropoutLayer(dropout_rate), child)
        if _own_parameters(child) or isinstance(child, StochasticLayer):
            pending = False
        if type(child) in convs and placement == "all":
            pending = True
            mask = MCDropoutLayer(dropout_rate)
            # the mask zeroes the convolution's kernels patch by patch (Gal 2016, section 3.4.1):
            # the KL condition's 1/(1-p) goes on the convolution, not on the next layer
            mask.drops_output_of_previous = True
            return nn.Sequential(child, mask)
        if type(child) in recurrent_layers:
            return recurrent_layers[type(child)](child)
        return None

    _refuse_tied_parameters(module, tuple(recurrent_layers), "MCDropout")
    wrapper = nn.Sequential(module)
    _replace_children(wrapper, replace)
    return wrapper[0], _dropped_weights(wrapper[0])


def _dropped_weights(module):
    """The weights the dropout masks act on, each with the mask's rate (in definition order).

    A mask on a layer's input reaches the next layer with parameters through
    any parameter-free layers (activations, pooling, reshapes); a mask that
    :func:`to_mc_dropout` puts after a convolution acts on that convolution's
    kernels.
    """
    dropped, pending, previous = {}, None, None
    for name, sub in module.named_modules():
        if isinstance(sub, MCDropoutLayer):
            if getattr(sub, "drops_output_of_previous", False):
                if previous is not None:
                    dropped[previous] = sub.dropout_rate
            else:
                pending = sub.dropout_rate
        elif _own_parameters(sub) or isinstance(sub, StochasticLayer):
            plain = not isinstance(sub, StochasticLayer) and "weight" in sub._parameters
            previous = f"{name}.weight" if plain else None
            if pending is not None and plain:
                dropped[previous] = pending
            pending = None
    return dropped


def _rows_to_inputs(x, input_shape):
    """(..., n, d) rows -> ``(B, *input_shape)`` module inputs, and the leading shape."""
    lead = x.shape[:-1]
    shape = input_shape if input_shape is not None else (x.shape[-1],)
    return x.reshape(-1, *shape), lead


def _outputs_to_rows(out, lead):
    """(B, k) or (B,) module outputs -> (..., n, k)."""
    if out.dim() == 1:
        out = out.unsqueeze(-1)
    return out.reshape(*lead, out.shape[-1])


class BayesianModuleNetwork(nn.Module):
    r"""A torch module with stochastic layers, behind the estimators' single-network protocol.

    The module's :class:`~skbayes.nn.layers.noise.StochasticLayer` layers
    (mean-field, MC-dropout, variational recurrent layers) carry q(w); its
    other parameters are point estimates with a N(0, s^2) prior, i.e. the
    weight decay of MC dropout's KL condition (Gal 2016, eq. 3.13, in the
    inverted-dropout form of :class:`~skbayes.nn.DropoutLinear`):

    .. math::

        \mathrm{KL} \approx \sum_{\text{stochastic layers}} \mathrm{KL}_\ell
            + \sum_{\theta} \frac{c_\theta}{2 s^2} \lVert \theta \rVert^2,

    with c = 1/(1-p) for the weights that a dropout mask of rate p acts on
    (the layer whose input is dropped, or the convolution whose output is,
    Gal 2016, section 3.4.1) and 1 otherwise.

    Parameters
    ----------
    module : torch.nn.Module
        Maps inputs of shape ``(B, *input_shape)`` to (B, n_outputs) (or (B,)).
    n_features, n_outputs : int
        Widths of the estimator's rows and of the module's output.
    input_shape : tuple of int, optional
        Shape of one input (prod = ``n_features``); None feeds the rows as
        they are.
    prior_scale : float, default=1.0
        Prior standard deviation s of the point-estimated parameters.
    dropped_weights : dict of str to float, optional
        Names of the parameters a dropout mask acts on, and the mask's rate p
        (:func:`to_mc_dropout` returns them).

    Raises
    ------
    ValueError
        If ``input_shape`` does not hold ``n_features`` values, or the module
        does not return ``n_outputs`` values per input.
    """

    def __init__(self, module, n_features, n_outputs, *, input_shape=None, prior_scale=1.0, dropped_weights=None):
        super().__init__()
        if input_shape is not None and math.prod(input_shape) != n_features:
            raise ValueError(f"input_shape {tuple(input_shape)} does not hold {n_features} features.")
        self.module = module
        self.n_features, self.n_outputs = int(n_features), int(n_outputs)
        self.input_shape = None if input_shape is None else tuple(int(s) for s in input_shape)
        self.prior_scale = float(prior_scale)
        stochastic = {
            f"{name}.{p}".lstrip(".")
            for name, m in module.named_modules()
            if isinstance(m, StochasticLayer)
            for p, _ in m.named_parameters()
        }
        dropped_weights = dropped_weights or {}
        # point-estimated parameter name -> the rate of the mask acting on it (0: none)
        self.decay = {
            name: dropped_weights.get(name, 0.0) for name, _ in module.named_parameters() if name not in stochastic
        }
        self.widest = check_module_output(module, self.input_shape or (self.n_features,), self.n_outputs)

    def _module_pass(self, x):
        h, lead = _rows_to_inputs(x, self.input_shape)
        return _outputs_to_rows(self.module(h), lead)

    def forward(self, x, generator=None, sample=True):
        """Training-time pass, fresh noise for every row.

        Parameters
        ----------
        x : torch.Tensor of shape (..., n, n_features)
        generator : torch.Generator, optional
        sample : bool, default=True
            If False, the mean pass (no noise).

        Returns
        -------
        f : torch.Tensor of shape (..., n, n_outputs)
        """
        with noise_context(self.module, "sample" if sample else "mean", generator):
            return self._module_pass(x)

    def kl(self, generator=None, n_draws=None):
        """KL(q || p) of the stochastic layers plus the weight decay of the other parameters (nats).

        Parameters
        ----------
        generator : torch.Generator, optional
        n_draws : int, optional
            Layers whose KL is a Monte-Carlo estimate (``monte_carlo_kl``:
            the MNF layers) estimate it from ``n_draws`` new draws from
            ``generator``; None: from the draws of the last training pass.
        """
        options = {} if n_draws is None else {"generator": generator, "n_draws": n_draws}
        total = sum(
            m.kl(**options) if getattr(m, "monte_carlo_kl", False) else m.kl()
            for m in self.module.modules()
            if isinstance(m, StochasticLayer)
        )
        parameters = dict(self.module.named_parameters())
        return total + sum(
            dropout_weight_decay(parameters[name], self.prior_scale, rate) for name, rate in self.decay.items()
        )

    def sample_parameters(self, n_samples, generator=None):
        """``n_samples`` draws, each a seed of the generator of one prediction pass.

        Returns
        -------
        seeds : torch.LongTensor of shape (n_samples,)
            Pass s draws every stochastic layer's weights (or masks) once,
            shared by all rows, from a CPU generator seeded with
            ``seeds[s]``: the same draws on every device.
        """
        return torch.randint(2**62, (n_samples,), generator=generator, device="cpu")

    def forward_with(self, x, parameters):
        """Evaluate the network under the draws ``parameters`` (from :meth:`sample_parameters`).

        Parameters
        ----------
        x : torch.Tensor of shape (n, n_features)
        parameters : torch.LongTensor of shape (S,)

        Returns
        -------
        f : torch.Tensor of shape (S, n, n_outputs)
            Row i depends only on x[i].
        """
        out = []
        for seed in parameters.tolist():
            generator = torch.Generator().manual_seed(seed)
            with noise_context(self.module, "shared", generator):
                out.append(self._module_pass(x))
        return torch.stack(out)

    def prediction_row_size(self, parameters):
        """Values held per row by :meth:`forward_with` (sizes the prediction blocks)."""
        # one pass at a time: two consecutive layer outputs, and the outputs of all passes
        return 2 * self.widest + len(parameters) * self.n_outputs


class StackedModuleNetwork(nn.Module):
    """M copies of any torch module held as stacked tensors (ensembles, kept samples).

    The members share the module's structure (a copy of the first member)
    and have their own parameters, stacked along a first axis of
    size M and evaluated together with :func:`torch.func.vmap` over
    :func:`torch.func.functional_call` (one member after the other for
    torch's recurrent layers). The members are deterministic: the module's
    dropout layers, and the ``dropout`` between stacked LSTM/GRU layers, are
    removed from them. Implements the
    finite-member protocol of :class:`~skbayes.nn.StackedMLP`, with the
    N(0, prior_scale^2) prior on every parameter.

    Parameters
    ----------
    modules : list of torch.nn.Module
        The M members, identical in structure (copied).
    n_features, n_outputs : int
    input_shape : tuple of int, optional
    prior_scale : float, default=1.0

    Raises
    ------
    ValueError
        If the members hold buffers (e.g. batch normalisation's running
        statistics), which the members cannot share here, if there are no
        members, or if the module does not return ``n_outputs`` values per
        input.
    """

    def __init__(self, modules, n_features, n_outputs, *, input_shape=None, prior_scale=1.0):
        super().__init__()
        if not modules:
            raise ValueError("A StackedModuleNetwork needs at least one member.")
        buffers = [name for name, _ in modules[0].named_buffers()]
        if buffers:
            raise ValueError(
                f"The module holds buffers ({', '.join(buffers)}), e.g. batch normalisation statistics; "
                "ensembles and SGHMC need modules whose state is their parameters."
            )
        self.names = [name for name, _ in modules[0].named_parameters()]
        self.stacked = nn.ParameterList(
            nn.Parameter(torch.stack([dict(m.named_parameters())[name].detach() for m in modules]).clone())
            for name in self.names
        )
        self.n_members = len(modules)
        self.n_features, self.n_outputs = int(n_features), int(n_outputs)
        self.input_shape = None if input_shape is None else tuple(int(s) for s in input_shape)
        self.prior_scale = float(prior_scale)
        # the structure only, not a registered submodule (its parameters are the
        # stacked ones); real tensors, not "meta" ones: torch.nn.LSTM reads the
        # storage of its weights on CUDA
        base = _replace_children(
            nn.Sequential(copy.deepcopy(modules[0])),
            lambda m: nn.Identity() if isinstance(m, nn.modules.dropout._DropoutNd) else None,
        )[0]
        for layer in base.modules():
            if isinstance(layer, nn.RNNBase):
                layer.dropout = 0.0  # torch's dropout between stacked recurrent layers, off as well
        object.__setattr__(self, "_base", base)
        self.widest = check_module_output(base, self.input_shape or (self.n_features,), self.n_outputs)

    def train(self, mode=True):
        # the structure follows the network's mode (cuDNN's LSTM backward needs training mode)
        super().train(mode)
        self._base.train(mode)
        return self

    def _apply(self, fn, *args, **kwargs):
        # .to(), .cuda(), .double() move the structure along with the stacked parameters
        result = super()._apply(fn, *args, **kwargs)
        self._base._apply(fn)
        return result

    def _call(self, tensors, x):
        """Member ``tensors`` (one per name) at rows x (n, d) -> (n, k)."""
        h, lead = _rows_to_inputs(x, self.input_shape)
        out = torch.func.functional_call(self._base, dict(zip(self.names, tensors)), (h,))
        return _outputs_to_rows(out, lead)

    def member_parameters(self, index=None):
        """The parameters of the members ``index`` (all, in order, if None): a list of (S, ...) tensors."""
        return [p if index is None else p[index] for p in self.stacked]

    def sample_parameters(self, n_samples, generator=None):
        """``n_samples`` members drawn uniformly with replacement (as :meth:`member_parameters`)."""
        index = torch.randint(self.n_members, (n_samples,), generator=generator, device="cpu")
        return self.member_parameters(index.to(self.stacked[0].device))

    def _over_members(self, tensors, x, shared_x):
        """``_call`` for each member (vmapped; a loop for layers without a batching rule, e.g. ``nn.LSTM``)."""
        # torch's recurrent layers have no batching rule on the CPU and read their
        # weights' storage on CUDA: one member after the other
        if not getattr(self, "_loop_members", False) and not any(
            isinstance(m, nn.RNNBase) for m in self._base.modules()
        ):
            try:
                return torch.func.vmap(self._call, in_dims=(0, None if shared_x else 0))(tensors, x)
            except RuntimeError as error:
                if "atching rule" not in str(error):
                    raise
                self._loop_members = True
        n = tensors[0].shape[0]
        return torch.stack([self._call([t[m] for t in tensors], x if shared_x else x[m]) for m in range(n)])

    def forward_with(self, x, parameters):
        """The members given by ``parameters`` at x (n, n_features) -> (S, n, n_outputs)."""
        return self._over_members(list(parameters), x, shared_x=True)

    def forward(self, x, generator=None, sample=True):
        """Every member at its own rows.

        Parameters
        ----------
        x : torch.Tensor of shape (n, n_features) or (n_members, n, n_features)
        generator, sample : ignored (the members are deterministic)

        Returns
        -------
        f : torch.Tensor of shape (n_members, n, n_outputs)
        """
        if x.dim() == 2:
            return self.forward_with(x, self.member_parameters())
        return self._over_members(list(self.stacked), x, shared_x=False)

    def prediction_row_size(self, parameters):
        """Values held per row by :meth:`forward_with` (sizes the prediction blocks)."""
        # every member at once: two consecutive layer outputs and the output of each
        return len(parameters[0]) * (2 * self.widest + self.n_outputs)

    def member_neg_log_prior(self):
        """sum(w^2) / (2 s^2) over each member's parameters, shape (n_members,)."""
        scale = 0.5 / self.prior_scale**2
        return scale * sum(p.pow(2).flatten(1).sum(1) for p in self.stacked)

    def neg_log_prior(self):
        """The members' summed negative log prior, a scalar in nats (the MAP penalty)."""
        return self.member_neg_log_prior().sum()

    def member_tensors(self):
        """The stacked parameters, each with the members on its first axis."""
        return list(self.stacked)

    def layer_prior_scales(self):
        """None: one prior scale for every parameter."""
        return None

    def with_member_tensors(self, tensors, layer_prior_scales=None):
        """A new network of this module holding ``tensors`` (as :meth:`member_tensors`), copied.

        Raises
        ------
        ValueError
            If ``layer_prior_scales`` is given (per-layer priors are for MLPs).
        """
        if layer_prior_scales is not None:
            raise ValueError("Per-layer prior scales are defined for MLPs only.")
        network = copy.copy(self)
        network._parameters, network._modules = dict(self._parameters), dict(self._modules)
        object.__setattr__(network, "_base", self._base)
        network.__dict__.pop("n_chains", None)  # set by SGHMC on its kept samples
        network.stacked = nn.ParameterList(nn.Parameter(t.detach().clone()) for t in tensors)
        network.n_members = int(tensors[0].shape[0])
        return network

    def select(self, index):
        """A new network with the members ``index`` (a LongTensor), copied."""
        return self.with_member_tensors([p.detach()[index] for p in self.stacked])

    def extra_repr(self):
        return f"n_members={self.n_members}, prior_scale={self.prior_scale}"
