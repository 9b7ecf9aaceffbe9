"""The Bayesian MLP estimators around any torch module (``module=``, ``module_params=``).

Covers the sklearn glue of ``module_params`` (clone, set_params,
GridSearchCV), N-D inputs and ``input_shape``, pickling,
reproducibility, the errors of the methods that cannot handle a layer, and
the networks themselves against independent computations: MC dropout's
predictive mean by enumerating the dropout masks, its KL condition as a hand
computed weight decay, the stacked ensemble members as plain copies of the
module, and a 1-D regression with a gap.
"""

import itertools
import pickle
from collections import OrderedDict

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV
from torch import nn

from discovery import with_loop
from skbayes import BayesianMLPClassifier, BayesianMLPRegressor
from skbayes.inference import MNF, PBP, WHVI, BayesByGAN, BayesByHypernet, SGHMC, DeepEnsemble, GPInducedPrior, MCDropout, MeanFieldVI, Vadam
from skbayes.nn import MCDropoutLayer
from skbayes.nn.networks import BayesianModuleNetwork, StackedModuleNetwork
from skbayes.nn.networks.module import build_module, to_mc_dropout, to_mean_field

# Short fits that stop at max_iter are the point of these fast tests.
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


class MLP(nn.Sequential):
    """One hidden layer of ``width`` ReLU units."""

    def __init__(self, n_features, n_outputs, width=8):
        super().__init__(nn.Linear(n_features, width), nn.ReLU(), nn.Linear(width, n_outputs))


class ConvNet(nn.Module):
    """(B, 1, 8, 8) -> conv 3x3 -> ReLU -> max-pool 2 -> dense: the smallest LeNet."""

    def __init__(self, n_outputs, n_filters=2):
        super().__init__()
        self.conv = nn.Conv2d(1, n_filters, 3)
        self.head = nn.Linear(9 * n_filters, n_outputs)

    def forward(self, x):
        return self.head(nn.functional.max_pool2d(torch.relu(self.conv(x)), 2).flatten(1))


def _regression(n=40, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, 3)
    return X, np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.randn(n)


def _images(n=30, seed=0):
    """(n, 1, 8, 8) images and a regression target of their mean brightness."""
    rng = np.random.RandomState(seed)
    X = rng.randn(n, 1, 8, 8)
    return X, X.mean(axis=(1, 2, 3)) * 4 + 0.1 * rng.randn(n)


def _small(**params):
    return {"random_state": 0, **params}


def _short(method):
    """The method trained for 5 epochs without early stopping (SGHMC keeps its own schedule), 10 draws at prediction.

    (``n_mc_predict`` for the methods that draw weights; those with members predict with all of them.)
    """
    return with_loop(method, max_iter=5, early_stopping=False, n_iter_no_change=50, n_mc_predict=10)


def _linear_layers(model):
    return [m for m in model.module_["network"].module.modules() if type(m) is nn.Linear]


# ------------------------------------------------------------ module_params
def test_grid_search_over_a_module_hyperparameter():
    X, y = _regression()
    model = BayesianMLPRegressor(module=MLP, inference=_short(MCDropout()), noise="homoscedastic", **_small())
    grid = {"module_params": [{"width": 4}, {"width": 16}]}
    search = GridSearchCV(model, grid, cv=2, error_score="raise").fit(X, y)
    assert [p["module_params"] for p in search.cv_results_["params"]] == grid["module_params"]
    # the width reached the module: the two candidates are different networks
    scores = search.cv_results_["mean_test_score"]
    assert np.all(np.isfinite(scores)) and scores[0] != scores[1]
    best = search.best_estimator_
    assert _linear_layers(best)[0].out_features == best.module_params["width"]
    assert model.module_params is None  # the estimator given to the search is untouched


def test_clone_and_set_params_keep_the_module_parameters():
    X, y = _regression()
    model = BayesianMLPRegressor(
        module=MLP, module_params={"width": 16}, inference=_short(MCDropout()), noise="homoscedastic", **_small()
    )
    assert model.get_params()["module_params"] == {"width": 16}
    copy = clone(model)
    assert copy.module_params == {"width": 16}
    assert _linear_layers(copy.fit(X, y))[0].out_features == 16
    copy.set_params(module_params={"width": 5})
    assert _linear_layers(copy.fit(X, y))[0].out_features == 5
    assert model.module_params == {"width": 16}


def test_unexpected_arguments_raise():
    X, y = _regression()
    # a parameter of neither the estimator nor the module: scikit-learn's TypeError at construction
    with pytest.raises(TypeError, match="widht"):
        BayesianMLPRegressor(module=MLP, widht=4)
    with pytest.raises(ValueError, match="Invalid parameter 'widht'"):
        BayesianMLPRegressor(module=MLP).set_params(widht=4)
    # module_params must be a dict
    with pytest.raises(ValueError, match="module_params"):
        BayesianMLPRegressor(module=MLP, module_params=[("width", 4)], **_small()).fit(X, y)
    # a module parameter the factory does not take: the factory's own TypeError, at fit
    model = BayesianMLPRegressor(
        module=MLP, module_params={"depth": 2}, inference=_short(MeanFieldVI()), noise="homoscedastic", **_small()
    )
    with pytest.raises(TypeError, match="depth"):
        model.fit(X, y)


def test_module_parameters_with_an_instance_raise_type_error():
    X, y = _regression()
    model = BayesianMLPRegressor(
        module=MLP(3, 1), module_params={"width": 4}, inference=_short(MeanFieldVI()), noise="homoscedastic",
        **_small(),
    )
    with pytest.raises(TypeError, match="class or factory"):
        model.fit(X, y)


def test_an_instance_is_copied_and_reinitialised_per_member():
    X, y = _regression()
    module = MLP(3, 1)
    before = {k: v.clone() for k, v in module.state_dict().items()}
    model = BayesianMLPRegressor(module=module, inference=_short(DeepEnsemble(n_estimators=3)), **_small(), noise="homoscedastic").fit(X, y)
    for name, value in module.state_dict().items():  # the user's module is untouched
        torch.testing.assert_close(value, before[name])
    weights = model.module_["network"].stacked[0]
    assert not torch.equal(weights[0], weights[1])  # members start from different initialisations


# ------------------------------------------------------------------------ pickling
@pytest.mark.parametrize(
    "method", [MCDropout(dropout_rate=0.1), DeepEnsemble(n_estimators=2), MNF(), WHVI(), BayesByGAN()],
    ids=lambda m: type(m).__name__,
)
def test_a_fitted_convolutional_model_pickles(method):
    X, y = _images()
    model = BayesianMLPRegressor(module=ConvNet, inference=_short(method), **_small(), noise="homoscedastic").fit(X, y)
    restored = pickle.loads(pickle.dumps(model))
    for a, b in zip(model.predict(X, return_std=True), restored.predict(X, return_std=True)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(model.sample_y(X[:5], n_samples=3), restored.sample_y(X[:5], n_samples=3))
    # a second round trip after predicting: no generator left on the layers
    pickle.loads(pickle.dumps(restored))


def test_a_fitted_convolutional_classifier_pickles():
    X, y = _images()
    labels = (y > np.median(y)).astype(int)
    model = BayesianMLPClassifier(module=ConvNet, inference=_short(MCDropout(dropout_rate=0.1)), **_small(), prior_scale=1.0).fit(X, labels)
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(model.predict_proba(X), restored.predict_proba(X))


# ----------------------------------------------------------------- reproducibility
@pytest.mark.parametrize(
    "method",
    [MCDropout(dropout_rate=0.1), MeanFieldVI(), MNF(), WHVI(), BayesByHypernet(), BayesByGAN(),
     DeepEnsemble(n_estimators=2)],
    ids=lambda m: type(m).__name__,
)
def test_random_state_fixes_the_predictions_and_the_global_rng_is_untouched(method):
    X, y = _regression()
    state = torch.get_rng_state()
    first = BayesianMLPRegressor(module=MLP, inference=_short(method), **_small(), noise="homoscedastic").fit(X, y)
    mean, std = first.predict(X, return_std=True)
    first.sample_y(X, n_samples=2)
    assert torch.equal(torch.get_rng_state(), state)
    # the result does not depend on the global seed either
    torch.manual_seed(12345)
    second = BayesianMLPRegressor(module=MLP, inference=_short(method), **_small(), noise="homoscedastic").fit(X, y)
    np.testing.assert_array_equal(second.predict(X), mean)
    np.testing.assert_array_equal(second.predict(X, return_std=True)[1], std)
    assert first.loss_curve_ == second.loss_curve_
    other = BayesianMLPRegressor(module=MLP, inference=_short(method), **_small(random_state=1), noise="homoscedastic").fit(X, y)
    assert not np.array_equal(other.predict(X), mean)


def test_an_instance_module_leaves_the_global_rng_untouched():
    X, y = _regression()
    module = MLP(3, 1)
    state = torch.get_rng_state()
    BayesianMLPRegressor(module=module, inference=_short(DeepEnsemble(n_estimators=2)), **_small(), noise="homoscedastic").fit(X, y)
    assert torch.equal(torch.get_rng_state(), state)


# ------------------------------------------------------------------------ N-D input
@pytest.mark.parametrize(
    "method", [MCDropout(dropout_rate=0.1), DeepEnsemble(n_estimators=2), MNF(), BayesByHypernet()],
    ids=lambda m: type(m).__name__,
)
def test_nd_input_equals_flattened_rows_with_input_shape(method):
    X, y = _images()
    rows = X.reshape(len(X), -1)
    images = BayesianMLPRegressor(module=ConvNet, inference=_short(method), **_small(), noise="homoscedastic").fit(X, y)
    flat = BayesianMLPRegressor(module=ConvNet, inference=_short(method), input_shape=(1, 8, 8), **_small(), noise="homoscedastic").fit(rows, y)
    assert images.input_shape_ == flat.input_shape_ == (1, 8, 8)
    assert images.n_features_in_ == 64
    expected = flat.predict(rows, return_std=True)
    for got in (images.predict(X, return_std=True), images.predict(rows, return_std=True)):
        for a, b in zip(got, expected):
            np.testing.assert_array_equal(a, b)
    # the other methods taking X reshape it too
    np.testing.assert_array_equal(images.log_predictive_density(X, y), flat.log_predictive_density(rows, y))
    np.testing.assert_array_equal(images.sample_y(X, n_samples=2), flat.sample_y(rows, n_samples=2))
    assert images.score(X, y) == flat.score(rows, y)


def test_nd_input_of_the_classifier():
    X, y = _images()
    labels = (y > np.median(y)).astype(int)
    images = BayesianMLPClassifier(module=ConvNet, inference=_short(MCDropout(dropout_rate=0.1)), **_small(), prior_scale=1.0).fit(X, labels)
    flat = BayesianMLPClassifier(
        module=ConvNet, inference=_short(MCDropout(dropout_rate=0.1)), input_shape=(1, 8, 8), **_small(), prior_scale=1.0
    ).fit(X.reshape(len(X), -1), labels)
    np.testing.assert_array_equal(images.predict_proba(X), flat.predict_proba(X.reshape(len(X), -1)))
    np.testing.assert_array_equal(images.predict(X), flat.predict(X))


def test_wrong_shapes_raise_value_error():
    X, y = _images()
    with pytest.raises(NotFittedError):
        BayesianMLPRegressor(module=ConvNet, inference=MeanFieldVI(), noise="homoscedastic").predict(X)
    model = BayesianMLPRegressor(module=ConvNet, inference=_short(MCDropout()), **_small(), noise="homoscedastic").fit(X, y)
    with pytest.raises(ValueError, match=r"shape \(1, 4, 16\).*\(1, 8, 8\)"):
        model.predict(X.reshape(len(X), 1, 4, 16))
    with pytest.raises(ValueError, match="features"):
        model.predict(X.reshape(len(X), -1)[:, :60])
    rows = X.reshape(len(X), -1)
    with pytest.raises(ValueError, match=r"input_shape \(1, 7, 7\) holds 49 values, but X has 64 features"):
        BayesianMLPRegressor(module=ConvNet, input_shape=(1, 7, 7), **_small(), inference=_short(MeanFieldVI()), noise="homoscedastic").fit(rows, y)
    with pytest.raises(ValueError, match="input_shape"):
        BayesianMLPRegressor(module=ConvNet, input_shape=(1, 4, 16), **_small(), inference=_short(MeanFieldVI()), noise="homoscedastic").fit(X, y)
    # fitted on plain rows: images are refused
    plain = BayesianMLPRegressor(module=MLP, **_small(), inference=_short(MeanFieldVI()), noise="homoscedastic").fit(rows, y)
    with pytest.raises(ValueError, match=r"fitted on inputs of shape \(64,\)"):
        plain.predict(X)


# -------------------------------------------------------------------------- errors
class _Recurrent(nn.Module):
    def __init__(self, n_features, n_outputs):
        super().__init__()
        self.lstm = nn.LSTM(1, 4, batch_first=True)
        self.head = nn.Linear(4, n_outputs)

    def forward(self, x):
        return self.head(self.lstm(x.unsqueeze(-1))[0][:, -1])


class _Embedded(nn.Module):
    def __init__(self, n_features, n_outputs):
        super().__init__()
        self.embedding = nn.Embedding(10, 4)
        self.head = nn.Linear(4 * n_features, n_outputs)

    def forward(self, x):
        return self.head(self.embedding(x.long().clamp(0, 9)).flatten(1))


@pytest.mark.parametrize("module, layer", [(_Recurrent, "LSTM"), (_Embedded, "Embedding")])
def test_mean_field_names_the_layers_it_cannot_handle(module, layer):
    X, y = _regression()
    with pytest.raises(ValueError, match=f"MeanFieldVI cannot make these layers Bayesian: {layer}"):
        BayesianMLPRegressor(module=module, inference=_short(MeanFieldVI()), **_small(), noise="homoscedastic").fit(X, y)


@pytest.mark.parametrize("method", [PBP(), Vadam()], ids=lambda m: type(m).__name__)
def test_methods_without_a_module_form_refuse_one(method):
    X, y = _regression()
    with pytest.raises(ValueError, match=f"{type(method).__name__} works on the MLP only.*MCDropout"):
        BayesianMLPRegressor(module=MLP, inference=_short(method), **_small(), noise="homoscedastic").fit(X, y)


def test_sghmc_samples_a_module_but_not_with_a_functional_prior():
    X, y = _regression()
    model = BayesianMLPRegressor(module=MLP, inference=_short(SGHMC(burn_in=6, thinning=2, n_kept_samples=3)), **_small(), noise="homoscedastic")
    model.fit(X, y)
    assert model.module_["network"].n_members == 2 * 3  # chains x kept samples
    _, std = model.predict(X, return_std=True)
    assert np.all(std > 0)
    prior = GPInducedPrior(n_measurement_points=8, n_function_draws=16, n_critic_steps=1, max_iter=2)
    with pytest.raises(ValueError, match="prior=None"):
        BayesianMLPRegressor(module=MLP, inference=_short(SGHMC(prior=prior)), **_small(), noise="homoscedastic").fit(X, y)


def test_other_unsupported_settings_raise():
    X, y = _regression()
    with pytest.raises(ValueError, match="init='xavier'.*init='default' or init='iblm'"):
        BayesianMLPRegressor(module=MLP, inference=_short(MeanFieldVI(init="xavier")), **_small(), noise="homoscedastic").fit(X, y)
    images, target = _images()

    def dropout2d(n_outputs):
        return nn.Sequential(nn.Conv2d(1, 2, 3), nn.Dropout2d(0.2), nn.Flatten(), nn.Linear(72, n_outputs))

    with pytest.raises(ValueError, match="handles torch.nn.Dropout only.*Dropout2d"):
        BayesianMLPRegressor(module=dropout2d, inference=_short(MCDropout()), **_small(), noise="homoscedastic").fit(images, target)
    with pytest.raises(TypeError, match="must build a torch.nn.Module"):
        BayesianMLPRegressor(module=lambda n_features, n_outputs: "not a module", **_small(), inference=_short(MeanFieldVI()), noise="homoscedastic").fit(X, y)


# ---------------------------------------------- MC dropout: the mixture over masks
def _masks(k):
    """All 2^k dropout masks of k units (1 = kept), shape (2^k, k)."""
    return torch.tensor(list(itertools.product([0.0, 1.0], repeat=k)), dtype=torch.float64)


def _mixture_moments(outputs, masks, p):
    """Mean and variance of the mixture that puts (1-p)^kept p^dropped on each mask's output (M, n)."""
    kept = masks.sum(1)
    weight = (1 - p) ** kept * p ** (masks.shape[1] - kept)
    assert torch.isclose(weight.sum(), torch.tensor(1.0, dtype=torch.float64))
    mean = (weight[:, None] * outputs).sum(0)
    return mean, (weight[:, None] * (outputs - mean) ** 2).sum(0)


def _draws(network, x, n_draws, seed=0):
    parameters = network.sample_parameters(n_draws, torch.Generator().manual_seed(seed))
    with torch.no_grad():
        return network.forward_with(x, parameters)[..., 0]  # (S, n)


def _assert_mc_matches(draws, mean, var):
    se = draws.std(0) / np.sqrt(len(draws))
    assert torch.all(se > 0)
    assert torch.all((draws.mean(0) - mean).abs() < 4 * se), (draws.mean(0), mean, se)
    torch.testing.assert_close(draws.var(0), var, rtol=0.1, atol=1e-12)
    return se


def test_mc_dropout_after_a_convolution_averages_over_masks_and_weight_scaling_does_not():
    # Gal 2016, section 3.2.7: dropout after a convolution, before max-pooling.
    # The 2x2 feature map has 4 units, 16 masks; max-pooling does not commute
    # with the masks, so the mean (weight-scaling) pass is not the model average.
    p = 0.5
    torch.manual_seed(0)
    conv, head = nn.Conv2d(1, 1, 2).double(), nn.Linear(1, 1).double()
    with torch.no_grad():
        conv.bias.fill_(1.0)  # every unit active on these images: no row is constant
    module = nn.Sequential(conv, nn.ReLU(), MCDropoutLayer(p), nn.MaxPool2d(2), nn.Flatten(), head)
    network = BayesianModuleNetwork(module, 9, 1, input_shape=(1, 3, 3))
    x = torch.randn(3, 9, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    # the brute-force mixture, with plain tensor ops
    images, kernel = x.reshape(3, 3, 3), conv.weight.detach()[0, 0]
    features = torch.stack(
        [(images[:, i : i + 2, j : j + 2] * kernel).sum((1, 2)) + conv.bias.detach() for i in (0, 1) for j in (0, 1)],
        dim=1,
    ).clamp(min=0)  # (3 rows, 4 units)
    masks = _masks(4)
    pooled = (masks[:, None, :] * features[None] / (1 - p)).amax(-1)  # (16, 3)
    outputs = head.weight.detach()[0, 0] * pooled + head.bias.detach()[0]
    mean, var = _mixture_moments(outputs, masks, p)
    se = _assert_mc_matches(_draws(network, x, 4000), mean, var)
    with torch.no_grad():
        scaled = network(x, sample=False)[:, 0]
    torch.testing.assert_close(scaled, head.weight.detach()[0, 0] * features.amax(-1) + head.bias.detach()[0])
    assert torch.all((scaled - mean).abs() > 10 * se)


def test_mc_dropout_before_a_linear_map_averages_to_weight_scaling():
    # Linear -> dropout -> ReLU -> Linear: the masks enter the output
    # linearly (ReLU commutes with a non-negative mask), so the exact mixture
    # mean is the weight-scaling pass; the variance is not zero.
    p = 0.3
    torch.manual_seed(0)
    first, second = nn.Linear(2, 3).double(), nn.Linear(3, 1).double()
    network = BayesianModuleNetwork(nn.Sequential(first, MCDropoutLayer(p), nn.ReLU(), second), 2, 1)
    x = torch.randn(4, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        hidden = x @ first.weight.T + first.bias
        masks = _masks(3)
        outputs = (masks[:, None, :] * hidden.clamp(min=0) / (1 - p)) @ second.weight[0] + second.bias  # (8, 4)
    mean, var = _mixture_moments(outputs, masks, p)
    _assert_mc_matches(_draws(network, x, 4000), mean, var)
    with torch.no_grad():
        torch.testing.assert_close(network(x, sample=False)[:, 0], mean)
    assert torch.all(var > 0)


def test_a_prediction_draw_shares_its_mask_across_rows_and_training_does_not():
    torch.manual_seed(0)
    network = BayesianModuleNetwork(nn.Sequential(MCDropoutLayer(0.5), nn.Linear(6, 1).double()), 6, 1)
    x = torch.randn(1, 6, dtype=torch.float64).repeat(50, 1)
    draws = _draws(network, x, 20)
    torch.testing.assert_close(draws, draws[:, :1].expand(-1, 50))  # one mask per draw
    assert draws[:, 0].unique().numel() > 1  # different masks across draws
    with torch.no_grad():
        training = network(x, torch.Generator().manual_seed(0))[:, 0]
    assert training.unique().numel() > 1  # a mask per row


# ---------------------------------------------- MC dropout: the KL condition
def _dropout_cnn():
    torch.manual_seed(0)
    conv, dense, out = nn.Conv2d(1, 2, 2), nn.Linear(8, 3), nn.Linear(3, 1)
    module = nn.Sequential(conv, nn.ReLU(), nn.Flatten(), dense, nn.ReLU(), nn.Dropout(0.5), out).double()
    return module, conv, dense, out


@pytest.mark.parametrize(
    "placement, n_dropout, dropped",
    [
        # after the conv (the mask zeroes its kernels patch by patch, Gal 2016 section 3.4.1, so
        # the 1/(1-p) goes on `conv`; `dense` gets no second mask, Gal's lenet-all) and the
        # module's own before `out` (not doubled)
        ("all", 2, {"conv", "out"}),
        ("dense", 2, {"dense", "out"}),
        ("existing", 1, {"out"}),
    ],
)
def test_the_kl_of_mc_dropout_is_the_weight_decay_of_the_kl_condition(placement, n_dropout, dropped):
    p, prior_scale = 0.3, 0.7
    module, conv, dense, out = _dropout_cnn()
    converted, names = to_mc_dropout(module, p, placement=placement)
    assert sum(isinstance(m, MCDropoutLayer) for m in converted.modules()) == n_dropout
    assert all(m.dropout_rate == p for m in converted.modules() if isinstance(m, MCDropoutLayer))
    network = BayesianModuleNetwork(
        converted, 9, 1, input_shape=(1, 3, 3), prior_scale=prior_scale, dropped_weights=names
    )
    # Gal 2016, eq. 3.13 in the inverted-dropout form: l^2/(2(1-p)) ||W||^2 for the
    # weights of a layer whose input is dropped, l^2/2 ||theta||^2 for the rest.
    l2 = 1 / prior_scale**2
    layers = {"conv": conv, "dense": dense, "out": out}
    expected = sum(
        l2 / (2 * (1 - p) if name in dropped else 2) * layer.weight.detach().pow(2).sum()
        + l2 / 2 * layer.bias.detach().pow(2).sum()
        for name, layer in layers.items()
    )
    torch.testing.assert_close(network.kl().detach(), expected)


def test_placement_of_mc_dropout_in_a_convolutional_network():
    module, conv, dense, _ = _dropout_cnn()
    converted, _ = to_mc_dropout(module, 0.1, placement="all")
    # the convolution is followed by dropout; the dense layer after it gets no second mask
    assert isinstance(converted[0], nn.Sequential) and converted[0][0] is conv
    assert isinstance(converted[0][1], MCDropoutLayer)
    assert converted[3] is dense
    with pytest.raises(ValueError, match="Unknown placement"):
        to_mc_dropout(_dropout_cnn()[0], 0.1, placement="everywhere")
    # named layers: the dropped inputs are named as in the converted module
    named = nn.Sequential(OrderedDict(fc=nn.Linear(3, 4), act=nn.ReLU(), drop=nn.Dropout(), out=nn.Linear(4, 1)))
    converted, dropped = to_mc_dropout(named, 0.1, placement="dense")
    assert dropped == {"fc.1.weight": 0.1, "out.weight": 0.1}
    assert dropped.keys() <= dict(converted.named_parameters()).keys()


def test_mc_dropout_placement_existing_without_dropout_is_deterministic():
    X, y = _regression()
    model = BayesianMLPRegressor(module=MLP, inference=_short(MCDropout(placement="existing")), **_small(), noise="homoscedastic").fit(X, y)
    assert not any(isinstance(m, MCDropoutLayer) for m in model.module_.modules())
    _, std = model.predict(X, return_std=True)
    np.testing.assert_allclose(std, model.noise_std_[0], rtol=1e-12)


def test_placement_does_not_change_the_mlp():
    X, y = _regression()
    params = {"hidden_layer_sizes": (8,), "noise": "homoscedastic", **_small()}
    default = BayesianMLPRegressor(inference=MCDropout(dropout_rate=0.1, n_mc_predict=10), **params).fit(X, y)
    existing = BayesianMLPRegressor(
        inference=MCDropout(dropout_rate=0.1, placement="existing", n_mc_predict=10), **params
    ).fit(X, y)
    np.testing.assert_array_equal(default.predict(X, return_std=True)[1], existing.predict(X, return_std=True)[1])


# ------------------------------------------------------------- mean-field modules
def test_mean_field_module_starts_at_the_module_and_has_the_gaussian_kl():
    torch.manual_seed(0)
    plain = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double()
    x = torch.randn(5, 3, dtype=torch.float64)
    with torch.no_grad():
        expected = plain(x)
    prior_scale = 0.8
    network = BayesianModuleNetwork(
        to_mean_field(plain, prior_scale=prior_scale, posterior_init_scale=0.05), 3, 2, prior_scale=prior_scale
    )
    with torch.no_grad():
        torch.testing.assert_close(network(x, sample=False), expected)
    assert network.decay == {}  # every parameter belongs to q
    layers = [m.layer for m in network.module.modules() if hasattr(m, "layer")]
    assert len(layers) == 2
    prior = torch.distributions.Normal(0.0, prior_scale)
    kl = sum(
        torch.distributions.kl_divergence(torch.distributions.Normal(mu, sigma), prior).sum()
        for layer in layers
        for mu, sigma in ((layer.weight_mu, layer.weight_sigma), (layer.bias_mu, layer.bias_sigma))
    )
    torch.testing.assert_close(network.kl(), kl)
    # draws of the weights: f is linear in the last layer's weights, so the
    # mean of many draws of a linear network is the mean pass
    linear = BayesianModuleNetwork(to_mean_field(nn.Linear(3, 2).double(), posterior_init_scale=0.3), 3, 2)
    draws = _draws(linear, x, 4000)
    with torch.no_grad():
        mean = linear(x, sample=False)[:, 0]
    assert torch.all((draws.mean(0) - mean).abs() < 4 * draws.std(0) / np.sqrt(4000))


# ------------------------------------------------------------ StackedModuleNetwork
def _stacked(n_members=3):
    modules = [build_module(ConvNet, {"n_outputs": 2}, seed=s, dtype=torch.float64) for s in range(n_members)]
    network = StackedModuleNetwork(modules, 64, 2, input_shape=(1, 8, 8), prior_scale=0.5)
    with torch.no_grad():  # move away from the modules it was built from
        for p in network.stacked:
            p.add_(0.01 * torch.randn(p.shape, dtype=p.dtype, generator=torch.Generator().manual_seed(3)))
    return network


def _member_module(network, m):
    module = ConvNet(2).double()
    module.load_state_dict({name: p[m].detach() for name, p in zip(network.names, network.stacked)})
    return module


def test_each_stacked_member_is_a_plain_copy_of_the_module():
    network = _stacked()
    x = torch.randn(5, 64, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        f = network(x)
        assert f.shape == (3, 5, 2)
        for m in range(3):
            torch.testing.assert_close(f[m], _member_module(network, m)(x.reshape(5, 1, 8, 8)))
        # members on their own rows
        rows = torch.randn(3, 4, 64, dtype=torch.float64)
        own = network(rows)
        for m in range(3):
            torch.testing.assert_close(own[m], _member_module(network, m)(rows[m].reshape(4, 1, 8, 8)))
    # sum(w^2) / (2 s^2) per member
    expected = torch.stack(
        [sum(v.pow(2).sum() for v in _member_module(network, m).state_dict().values()) / (2 * 0.5**2) for m in range(3)]
    )
    torch.testing.assert_close(network.member_neg_log_prior().detach(), expected)
    torch.testing.assert_close(network.neg_log_prior().detach(), expected.sum())


def test_stacked_draws_are_members_and_select_copies_them():
    network = _stacked()
    x = torch.randn(4, 64, dtype=torch.float64)
    with torch.no_grad():
        members = network(x)
        drawn = network.forward_with(x, network.sample_parameters(300, torch.Generator().manual_seed(0)))
    which = [int(torch.argmin((members - d).abs().amax((1, 2)))) for d in drawn]
    for d, m in zip(drawn, which):
        torch.testing.assert_close(d, members[m])  # every draw is exactly one member
    counts = np.bincount(which, minlength=3)
    assert np.all(np.abs(counts - 100) < 4 * np.sqrt(300 * (1 / 3) * (2 / 3)))  # uniform
    selected = network.select(torch.tensor([2, 0]))
    assert selected.n_members == 2 and network.n_members == 3
    with torch.no_grad():
        torch.testing.assert_close(selected(x), members[[2, 0]])
        selected.stacked[0].add_(1.0)  # a copy: the original is unchanged
        torch.testing.assert_close(network(x), members)


def test_stacked_members_refuse_buffers():
    modules = [nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 1)) for _ in range(2)]
    with pytest.raises(ValueError, match="buffers.*running_mean"):
        StackedModuleNetwork(modules, 3, 1)


# ----------------------------------------------------- a regression with meaning
def _gap_data(n=200, seed=0):
    rng = np.random.RandomState(seed)
    x = np.concatenate([rng.uniform(-3, -1, n // 2), rng.uniform(1, 3, n // 2)])
    return x[:, None], np.sin(x) + 0.1 * rng.randn(n)


def _relu_net(n_features, n_outputs, width=64, depth=1, dropout=False):
    layers, d = [], n_features
    for _ in range(depth):
        layers += [nn.Linear(d, width), nn.ReLU()] + ([nn.Dropout()] if dropout else [])
        d = width
    return nn.Sequential(*layers, nn.Linear(d, n_outputs))


@pytest.mark.parametrize(
    "method, module_params",
    [
        # dropout on the hidden units only: dropping the one input of a 1-D
        # problem would make the prediction at x that at 0
        (MCDropout(dropout_rate=0.02, placement="existing", max_iter=300), {"dropout": True}),
        (DeepEnsemble(n_estimators=5, max_iter=200), {"depth": 2}),
    ],
    ids=["MCDropout", "DeepEnsemble"],
)
def test_gap_regression_recovers_the_noise_and_is_unsure_away_from_the_data(method, module_params):
    # y = sin(x) + N(0, 0.1^2) on [-3, -1] u [1, 3]. Measured over seeds 0-4
    # (the one of this test: 0), the std outside the data is 1.5-2x that on
    # it. Not asserted: a larger std *in* the gap, which these methods do not
    # give reliably here (sin is nearly linear across it and the members
    # agree; MC dropout's std there is below that on the data, the
    # "in-between" failure of Foong et al. 2019).
    X, y = _gap_data()
    method = with_loop(method, learning_rate_init=1e-2, tol=0.0, n_iter_no_change=10**4, n_mc_predict=200)
    model = BayesianMLPRegressor(
        module=_relu_net, module_params=module_params, inference=method, noise="homoscedastic", batch_size=50,
        random_state=0,
    ).fit(X, y)
    assert abs(model.noise_std_[0] - 0.1) < 0.3 * 0.1
    rmse = np.sqrt(np.mean((model.predict(X) - np.sin(X[:, 0])) ** 2))
    assert rmse < 0.1
    on_data = np.r_[np.linspace(-2.8, -1.2, 9), np.linspace(1.2, 2.8, 9)][:, None]
    outside = np.array([-5.0, -4.5, -4.0, 4.0, 4.5, 5.0])[:, None]
    std_data = model.predict(on_data, return_std=True)[1].mean()
    std_outside = model.predict(outside, return_std=True)[1].mean()
    assert std_outside > 1.3 * std_data
    assert std_data < 0.15  # close to the noise on the data


# ------------------------------------------------- review: contracts of the module networks
class _ThreeOutputs(nn.Sequential):
    def __init__(self, n_features):  # ignores n_outputs
        super().__init__(nn.Linear(n_features, 3))


@pytest.mark.parametrize("method", [MCDropout(), DeepEnsemble(n_estimators=2)], ids=lambda m: type(m).__name__)
def test_a_module_with_the_wrong_number_of_outputs_is_refused(method):
    X, y = _regression()
    with pytest.raises(ValueError, match="returns 3 values per input.*n_outputs=1"):
        BayesianMLPRegressor(module=_ThreeOutputs, inference=_short(method), **_small(), noise="homoscedastic").fit(X, y)
    with pytest.raises(ValueError, match="returns 3 values per input.*n_outputs=2"):
        BayesianMLPClassifier(module=_ThreeOutputs, inference=_short(method), **_small(), prior_scale=1.0).fit(X, (y > 0).astype(int))


class _TwoLayerLSTM(nn.Module):
    def __init__(self, n_features, n_outputs, dropout=0.0):
        super().__init__()
        self.lstm = nn.LSTM(1, 4, num_layers=2, batch_first=True, dropout=dropout)
        self.head = nn.Linear(4, n_outputs)

    def forward(self, x):
        return self.head(self.lstm(x.unsqueeze(-1))[0][:, -1])


def test_conversions_and_fits_leave_the_global_generator_alone():
    conv, recurrent, embedded = ConvNet(1), _Recurrent(3, 1), _Embedded(3, 1)  # torch's init draws globally
    state = torch.get_rng_state()
    to_mean_field(conv)
    to_mc_dropout(recurrent, 0.1, placement="all")
    to_mc_dropout(embedded, 0.1, placement="all")
    X, y = _regression()
    BayesianMLPRegressor(module=_TwoLayerLSTM, inference=_short(DeepEnsemble(n_estimators=2)),
                               **_small(), module_params={"dropout": 0.5}, noise="homoscedastic").fit(X, y).predict(X)
    assert torch.equal(torch.get_rng_state(), state)


def test_torch_inter_layer_rnn_dropout_is_refused_or_removed():
    X, y = _regression()
    with pytest.raises(ValueError, match="dropout=0.5 between its layers"):
        BayesianMLPRegressor(module=_TwoLayerLSTM, inference=_short(MCDropout(placement="dense")),
                                   **_small(), module_params={"dropout": 0.5}, noise="homoscedastic").fit(X, y)
    # an ensemble's members are deterministic: the same predictions whatever the global seed
    model = BayesianMLPRegressor(module=_TwoLayerLSTM, inference=_short(DeepEnsemble(n_estimators=2)),
                                       **_small(), module_params={"dropout": 0.5}, noise="homoscedastic")
    torch.manual_seed(1)
    first = model.fit(X, y).predict(X)
    torch.manual_seed(2)
    np.testing.assert_array_equal(clone(model).fit(X, y).predict(X), first)


def test_warm_start_continues_only_the_same_network():
    X, y = _regression()
    model = BayesianMLPRegressor(module=MLP, inference=_short(MCDropout()), warm_start=True, **_small(), noise="homoscedastic").fit(X, y)
    network = model.module_["network"]
    model.fit(X, y)
    assert model.module_["network"] is network  # continued
    model.set_params(module_params={"width": 5}).fit(X, y)
    assert model.module_["network"] is not network  # rebuilt: another architecture
    network = model.module_["network"]
    model.set_params(inference=_short(MCDropout(placement="existing"))).fit(X, y)
    assert model.module_["network"] is not network


def test_early_stopping_scores_the_module_in_evaluation_mode():
    seen = []

    class Probe(nn.Module):
        def forward(self, x):
            seen.append(self.training)
            return x

    class Net(nn.Sequential):
        def __init__(self, n_features, n_outputs):
            super().__init__(nn.Linear(n_features, n_outputs), Probe())

    X, y = _regression(n=60)
    model = BayesianMLPRegressor(
        module=Net, inference=MCDropout(early_stopping=True, max_iter=3, n_mc_predict=10), **_small(), noise="homoscedastic"
    )
    model.fit(X, y)
    # training passes, then the validation passes of each epoch (min(n_mc_predict, 20) draws, in evaluation mode)
    assert True in seen and False in seen
    assert not model.module_.training


class _TiedEmbedding(nn.Module):
    """A language-model head tied to the embedding (the same (10, 4) weight)."""

    def __init__(self, n_features, n_outputs):
        super().__init__()
        self.embedding = nn.Embedding(10, 4)
        self.decoder = nn.Linear(4, 10)
        self.decoder.weight = self.embedding.weight
        self.head = nn.Linear(10 * n_features, n_outputs)

    def forward(self, x):
        return self.head(self.decoder(self.embedding(x.long().clamp(0, 9))).flatten(1))


def test_converting_tied_weights_is_refused():
    with pytest.raises(ValueError, match="untie the weights.*Embedding, Linear"):
        to_mc_dropout(_TiedEmbedding(3, 1), 0.1, placement="all")
    with pytest.raises(ValueError, match="untie the weights"):
        to_mean_field(_TiedEmbedding(3, 1))
    to_mc_dropout(_TiedEmbedding(3, 1), 0.1, placement="existing")  # nothing converted: the tie stays


class _Scale(nn.Module):
    """A layer with a raw parameter and no reset_parameters."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, x):
        return x * self.scale


def test_an_instance_with_layers_that_cannot_be_reset_warns():
    X, y = _regression()
    instance = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1), _Scale())
    with pytest.warns(UserWarning, match="without reset_parameters \\(_Scale\\)"):
        BayesianMLPRegressor(module=instance, inference=_short(DeepEnsemble(n_estimators=2)), **_small(), noise="homoscedastic").fit(X, y)


class _DenseNet(nn.Module):
    def __init__(self, n_outputs):
        super().__init__()
        self.hidden, self.out = nn.LazyLinear(8), nn.Linear(8, n_outputs)

    def forward(self, x):
        return self.out(torch.relu(self.hidden(x.flatten(1))))


def test_mc_dropout_auto_rate_is_higher_for_convolutional_modules():
    # dropout_rate="auto": 0.25 for a module with convolutions (at 0.01 a LeNet on MNIST was almost deterministic:
    # mutual information 0.001 nats, doc page "Bayesian networks"), 0.01 for the MLPs and dense modules
    X, y = _images()
    conv = BayesianMLPRegressor(module=ConvNet, inference=_short(MCDropout()), **_small(), noise="homoscedastic").fit(X, y)
    rates = {m.dropout_rate for m in conv.module_["network"].modules() if isinstance(m, MCDropoutLayer)}
    assert rates == {0.25}
    rows = X.reshape(len(X), -1)
    dense = BayesianMLPRegressor(module=_DenseNet, inference=_short(MCDropout()), **_small(),
                                 noise="homoscedastic").fit(rows, y)
    rates = {m.dropout_rate for m in dense.module_["network"].modules() if isinstance(m, MCDropoutLayer)}
    assert rates == {0.01}
    mlp = BayesianMLPRegressor(hidden_layer_sizes=(8,), inference=_short(MCDropout()), noise="homoscedastic").fit(rows, y)
    assert {layer.dropout_rate for layer in mlp.module_["network"].layers} == {0.01}
