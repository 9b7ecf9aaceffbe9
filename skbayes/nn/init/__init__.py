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

``MODULE_INITIALIZATIONS`` holds those of a
:class:`~skbayes.nn.networks.BayesianModuleNetwork` (the mean-field layers of
any torch module): ``"default"`` and ``"iblm"``, the latter with
convolutions fitted on their input patches (:func:`iblm_init_module`).

The references are in :mod:`skbayes.nn.init.iblm` (I-BLM, Rossi 2022, chapter 3)
and :mod:`skbayes.nn.init.baselines` (the alternatives, section 3.3).
"""


import math

from .baselines import default, lsuv, orthogonal, zero_mean
from .iblm import blr_mean_field, iblm_init, iblm_init_module

__all__ = ["INITIALIZATIONS", "MODULE_INITIALIZATIONS", "blr_mean_field", "iblm_init", "iblm_init_module"]

#: The initialisations of a :class:`~skbayes.nn.BayesianMLP` by name
#: (``fn(network, X, Y, *, prior_scale, noise_std, generator)``; the module
#: docstring describes each).
INITIALIZATIONS = {
    "default": default,
    "iblm": iblm_init,
    "uninformative": zero_mean(lambda d_in, d_out: 1.0),
    "heuristic": zero_mean(lambda d_in, d_out: 1.0 / math.sqrt(max(d_in, 1))),
    "xavier": zero_mean(lambda d_in, d_out: math.sqrt(2.0 / (d_in + d_out))),
    "orthogonal": orthogonal,
    "lsuv": lsuv,
}

#: The initialisations of a :class:`~skbayes.nn.networks.BayesianModuleNetwork`
#: (``fn(network, X, Y, *, prior_scale, noise_std, generator)``).
MODULE_INITIALIZATIONS = {
    "default": default,
    "iblm": iblm_init_module,
}
