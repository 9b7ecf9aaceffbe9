"""Tests of the VAE with convolutional and other torch-module networks (encoder=, decoder=, input_shape=)."""

import pickle

import numpy as np
import pytest
import torch
from numpy.polynomial.hermite_e import hermegauss
from scipy.special import log_expit, logsumexp, softplus
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV
from sklearn.utils.estimator_checks import parametrize_with_checks
from torch import nn
from torch.nn import functional as F

from skbayes import VAE
from skbayes.nn import ConvDecoder, ConvEncoder, ModuleDecoder, ModuleEncoder

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

SIDE = 8
SMALL = {"encoder_params": {"channels": (4, 8)}, "decoder_params": {"channels": (8, 4)}}


def _bars(n, seed=0, side=SIDE, flip=0.02):
    """Binary side x side images with two full bars, horizontal (class 0) or vertical (class 1), as rows."""
    rng = np.random.RandomState(seed)
    y = rng.randint(2, size=n)
    images = np.zeros((n, side, side))
    for i in range(n):
        lines = rng.choice(side, size=2, replace=False)
        if y[i] == 0:
            images[i, lines, :] = 1.0
        else:
            images[i, :, lines] = 1.0
    images = np.abs(images - (rng.uniform(size=images.shape) < flip))
    return images.reshape(n, -1), y


X_BARS, Y_BARS = _bars(240)


def _conv_vae(n_components=2, **kwargs):
    params = {
        "encoder": "conv", "decoder": "conv", "input_shape": (1, SIDE, SIDE), "likelihood": "bernoulli",
        "learning_rate_init": 1e-2, "batch_size": 32, "device": "cpu", **SMALL,
    }
    return VAE(n_components, **{**params, **kwargs})


@pytest.fixture(scope="module")
def fitted():
    # without a KL warm-up, the latent of this small model collapses (q = the prior)
    return _conv_vae(2, max_iter=40, kl_warmup_epochs=10, random_state=0).fit(X_BARS)


# ------------------------------------------------------------------ engine
def _spatial_outputs(module, x):
    """(H, W) of the output of every Conv2d / ConvTranspose2d of ``module`` on x, in call order."""
    sizes = []
    hooks = [m.register_forward_hook(lambda m, i, o: sizes.append(tuple(o.shape[-2:])))
             for m in module.modules() if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d))]
    out = module(x)
    for hook in hooks:
        hook.remove()
    return out, sizes


@pytest.mark.parametrize(
    "shape, channels, kernel_size",
    [((1, 28, 28), (32, 64), 4), ((3, 9, 13), (4, 8), 3), ((2, 7, 5), (4,), 5), ((1, 8, 8), (2, 4, 8), 4)],
)
def test_conv_decoder_mirrors_the_encoder_for_any_image_size(shape, channels, kernel_size):
    encoder = ConvEncoder(shape, channels, kernel_size)
    decoder = ConvDecoder(3, shape, channels[::-1], kernel_size)
    features, down = _spatial_outputs(encoder, torch.zeros(2, *shape))
    images, up = _spatial_outputs(decoder, torch.zeros(2, 3))
    # each stride-2 convolution halves the side (rounding up for odd kernels) ...
    expected, sizes = [], np.array(shape[1:])
    for _ in channels:
        sizes = (sizes + 2 * ((kernel_size - 1) // 2) - kernel_size) // 2 + 1
        expected.append(tuple(int(s) for s in sizes))
    assert down == expected
    assert features.shape == (2, channels[-1] * expected[-1][0] * expected[-1][1]) == (2, encoder.n_outputs)
    # ... and the transposed convolutions retrace the same sizes back to the image
    assert up == [*expected[::-1][1:], tuple(shape[1:])]
    assert images.shape == (2, *shape)
    assert decoder.feature_shape == (channels[-1], *expected[-1])


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: ConvEncoder((28, 28)), "channels, height, width"),
        (lambda: ConvDecoder(2, (1, 4, 4), channels=(8, 8, 8, 8)), "too small"),
        (lambda: ConvEncoder((1, 8, 8), channels=()), "at least one"),
        (lambda: ConvEncoder((1, 8, 8), activation="gelu"), "Unknown activation"),
    ],
)
def test_conv_networks_reject_bad_settings(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_module_wrappers_check_their_widths():
    body = nn.Sequential(nn.Flatten(), nn.Linear(16, 5))
    encoder = ModuleEncoder(body, 16, 6, n_conditions=2, input_shape=(1, 4, 4))
    assert encoder.n_hidden == 5 and encoder.head.layers[0].in_features == 7
    assert encoder(torch.zeros(3, 4, 18)).shape == (3, 4, 6)  # leading dims kept, condition split off
    with pytest.raises(ValueError, match="does not hold 15 features"):
        ModuleEncoder(body, 15, 6, input_shape=(1, 4, 4))
    with pytest.raises(ValueError, match="returns 7 values per latent row, but the data have 16"):
        ModuleDecoder(nn.Linear(2, 7), 2, 16)
    assert ModuleDecoder(nn.Linear(2, 16), 2, 16)(torch.zeros(5, 3, 2)).shape == (5, 3, 16)


# ------------------------------------------------------- the model, by hand
def _encode_by_hand(state, U, c, shape):
    h = torch.from_numpy(U).reshape(-1, *shape)
    for i in range(2):
        h = torch.relu(F.conv2d(h, state[f"encoder.body.convs.{i}.weight"], state[f"encoder.body.convs.{i}.bias"],
                                stride=2, padding=1))
    features = torch.cat([h.flatten(1), torch.from_numpy(c)], dim=1).numpy()
    out = features @ state["encoder.head.layers.0.weight"].numpy().T + state["encoder.head.layers.0.bias"].numpy()
    k = out.shape[1] // 2
    return out[:, :k], softplus(out[:, k:]) + 1e-6


def _decode_by_hand(state, z, c, feature_shape):
    """Decoder logits f(z) of z (..., n, k) with the condition c (n, C) concatenated."""
    lead = z.shape[:-1]
    zc = np.concatenate([z, np.broadcast_to(c, (*lead, c.shape[1]))], axis=-1).reshape(-1, z.shape[-1] + c.shape[1])
    h = np.maximum(zc @ state["decoder.body.linear.weight"].numpy().T + state["decoder.body.linear.bias"].numpy(), 0)
    h = torch.from_numpy(h).reshape(-1, *feature_shape)
    h = F.conv_transpose2d(h, state["decoder.body.deconvs.0.weight"], state["decoder.body.deconvs.0.bias"],
                           stride=2, padding=1)
    h = F.conv_transpose2d(torch.relu(h), state["decoder.body.deconvs.1.weight"],
                           state["decoder.body.deconvs.1.bias"], stride=2, padding=1)
    return h.flatten(1).numpy().reshape(*lead, -1) + state["decoder.bias"].numpy()


@pytest.mark.parametrize("conditional", [False, True])
def test_score_samples_transform_and_decoding_match_a_computation_by_hand(conditional):
    X, y = X_BARS[:40], Y_BARS[:40]
    labels = y if conditional else None
    vae = _conv_vae(2, conditional=conditional, max_iter=3, random_state=0).fit(X, labels)
    state = {name: value.detach() for name, value in vae.module_.state_dict().items()}
    c = np.eye(2)[y] if conditional else np.zeros((len(X), 0))
    mu, sigma = _encode_by_hand(state, X, c, (1, SIDE, SIDE))
    points = torch.quasirandom.SobolEngine(2, scramble=True, seed=vae._score_seed).draw(128, dtype=torch.float64)
    eps = torch.special.ndtri(points).numpy()[:, None, :]
    f = _decode_by_hand(state, mu + sigma * eps, c, (8, 2, 2))  # (128, n, 64)
    log_lik = (X * log_expit(f) + (1 - X) * log_expit(-f)).sum(-1).mean(0)
    kl = (-np.log(sigma) + 0.5 * (mu**2 + sigma**2 - 1)).sum(-1)
    np.testing.assert_allclose(vae.score_samples(X, labels), log_lik - kl, rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(vae.transform(X, labels), mu, rtol=1e-10, atol=1e-12)
    decoded = 1 / (1 + np.exp(-_decode_by_hand(state, mu, c, (8, 2, 2))))
    np.testing.assert_allclose(vae.inverse_transform(mu, labels), decoded, rtol=1e-10, atol=1e-12)


def test_elbo_and_iwae_bound_the_marginal_likelihood_computed_by_quadrature():
    # A 1-D latent: log p(x) = log int p(x | z) N(z | 0, 1) dz by quadrature on a fine grid.
    X = X_BARS[:30]
    vae = _conv_vae(1, max_iter=30, kl_warmup_epochs=10, random_state=0).fit(X_BARS)  # warm-up: no collapse
    state = {name: value.detach() for name, value in vae.module_.state_dict().items()}
    none = np.zeros((len(X), 0))

    def log_lik(z):  # z (G, n, 1) -> log p(x | z) (G, n)
        f = _decode_by_hand(state, z, none, (8, 2, 2))
        return (X * log_expit(f) + (1 - X) * log_expit(-f)).sum(-1)

    grid = np.linspace(-10, 10, 2001)
    log_prior = -0.5 * grid**2 - 0.5 * np.log(2 * np.pi)
    log_joint = log_lik(np.broadcast_to(grid[:, None, None], (len(grid), len(X), 1))) + log_prior[:, None]
    log_px = logsumexp(log_joint, axis=0) + np.log(grid[1] - grid[0])
    # the exact ELBO: E_q[log p(x | z)] by 80-point Gauss-Hermite quadrature, minus the KL
    mu, sigma = _encode_by_hand(state, X, none, (1, SIDE, SIDE))
    nodes, weights = hermegauss(80)
    expected_log_lik = (weights[:, None] * log_lik(mu + sigma * nodes[:, None, None])).sum(0) / np.sqrt(2 * np.pi)
    elbo = expected_log_lik - (-np.log(sigma) + 0.5 * (mu**2 + sigma**2 - 1)).sum(-1)
    assert np.all(elbo < log_px)
    assert np.mean(log_px - elbo) > 0.05  # a real gap, not rounding
    np.testing.assert_allclose(vae.score_samples(X), elbo, atol=0.02)  # 128 Sobol points
    iwae = vae.log_likelihood_iwae(X, n_importance=5000)
    assert np.all(iwae > vae.score_samples(X))
    assert np.abs(iwae - log_px).mean() < 0.03 and np.abs(iwae - log_px).max() < 0.15


# ---------------------------------------------------------------- training
def test_training_improves_the_elbo(fitted):
    # one epoch: about the pixel-mean model, 36.7 nats per image; measured after 40, 32.1 (train), -31.4 (test)
    curve = np.asarray(fitted.loss_curve_)
    assert curve[-5:].mean() < curve[:3].mean() - 3.0
    early = _conv_vae(2, max_iter=1, random_state=0).fit(X_BARS)
    X_test, _ = _bars(100, seed=1)
    assert fitted.score(X_test) > early.score(X_test) + 3.0


def test_shapes_and_feature_names(fitted):
    Z, Z_std = fitted.transform(X_BARS[:7], return_std=True)
    assert Z.shape == Z_std.shape == (7, 2) and np.all(Z_std > 0)
    assert fitted.inverse_transform(Z).shape == (7, SIDE * SIDE)
    assert fitted.sample(5, random_state=0).shape == (5, SIDE * SIDE)
    assert fitted.score_samples(X_BARS[:7]).shape == fitted.log_likelihood_iwae(X_BARS[:7], n_importance=10).shape
    assert list(fitted.get_feature_names_out()) == ["vae0", "vae1"]
    assert isinstance(fitted.module_.encoder.body, ConvEncoder)
    assert isinstance(fitted.module_.decoder.body, ConvDecoder)
    # a row's values do not depend on the other rows
    np.testing.assert_allclose(fitted.score_samples(X_BARS[:50])[10:20], fitted.score_samples(X_BARS[10:20]),
                               rtol=1e-12)


def test_conditional_conv_vae_models_each_class():
    vae = _conv_vae(2, conditional=True, max_iter=40, kl_warmup_epochs=10, random_state=0).fit(X_BARS, Y_BARS)
    assert vae.module_.encoder.head.layers[0].in_features == 8 * 2 * 2 + 2  # features, then the one-hot label
    assert vae.module_.decoder.body.linear.in_features == 2 + 2  # z, then the one-hot label
    # the bound on log p(x | y) is higher under an image's own orientation (measured: 99%, by 8.6 nats)
    X_test, y_test = _bars(100, seed=1)
    margin = vae.score_samples(X_test, y_test) - vae.score_samples(X_test, 1 - y_test)
    assert np.mean(margin > 0) > 0.9 and margin.mean() > 3.0
    assert not np.allclose(vae.sample(5, y=0, random_state=0), vae.sample(5, y=1, random_state=0), atol=0.05)


def test_conv_encoder_with_an_mlp_decoder():
    vae = VAE(2, encoder="conv", input_shape=(1, SIDE, SIDE), encoder_params={"channels": (4, 8)},
              hidden_layer_sizes=(16,), likelihood="bernoulli", max_iter=2, random_state=0, device="cpu").fit(X_BARS)
    assert isinstance(vae.module_.encoder, ModuleEncoder)
    assert [layer.out_features for layer in vae.module_.decoder.layers] == [16, SIDE * SIDE]
    assert vae.sample(3, random_state=0).shape == (3, SIDE * SIDE)


# --------------------------------------------------- seeds, pickles, warm start
def test_reproducible_without_touching_the_global_torch_rng():
    X = X_BARS[:60]
    before = torch.random.get_rng_state()
    torch.manual_seed(1)
    a = _conv_vae(2, max_iter=2, random_state=0).fit(X)
    torch.manual_seed(2)
    b = _conv_vae(2, max_iter=2, random_state=0).fit(X)
    torch.manual_seed(1)
    after_seed = torch.random.get_rng_state()
    _conv_vae(2, max_iter=2, random_state=0).fit(X).score_samples(X)
    assert torch.equal(torch.random.get_rng_state(), after_seed)  # fit and score drew nothing from it
    torch.random.set_rng_state(before)
    np.testing.assert_array_equal(a.transform(X), b.transform(X))
    np.testing.assert_array_equal(a.score_samples(X), b.score_samples(X))
    np.testing.assert_array_equal(a.sample(3, random_state=1), b.sample(3, random_state=1))
    c = _conv_vae(2, max_iter=2, random_state=1).fit(X)
    assert not np.allclose(a.transform(X), c.transform(X))


def test_pickle_round_trip_then_partial_fit(fitted):
    loaded = pickle.loads(pickle.dumps(fitted))
    X = X_BARS[:20]
    np.testing.assert_array_equal(loaded.transform(X), fitted.transform(X))
    np.testing.assert_array_equal(loaded.score_samples(X), fitted.score_samples(X))
    np.testing.assert_array_equal(loaded.sample(4, random_state=0), fitted.sample(4, random_state=0))
    loaded.partial_fit(X)
    assert loaded.n_iter_ == fitted.n_iter_ + 1
    assert not np.array_equal(loaded.transform(X), fitted.transform(X))


def test_warm_start_keeps_the_networks_unless_they_change():
    model = _conv_vae(2, max_iter=3, warm_start=True, random_state=0).fit(X_BARS)
    module = model.module_
    model.fit(X_BARS)
    assert model.module_ is module
    model.set_params(encoder_params={"channels": (4, 4)}).fit(X_BARS)
    assert model.module_ is not module
    assert model.module_.encoder.body.convs[1].out_channels == 4


def test_float32_input_stays_float32():
    X = X_BARS[:40].astype(np.float32)
    vae = _conv_vae(2, max_iter=2, random_state=0).fit(X)
    assert vae.dtype_ == "float32" and vae.transform(X).dtype == np.float32
    assert vae.module_.encoder.body.convs[0].weight.dtype == torch.float32
    assert vae.score_samples(X).dtype == np.float32


# -------------------------------------------------------------- custom modules
class _Features(nn.Module):
    """Encoder body recording the data sizes it is given."""

    def __init__(self, input_shape, width=6):
        super().__init__()
        self.input_shape, self.width = input_shape, width
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(int(np.prod(input_shape)), width), nn.Tanh())

    def forward(self, x):
        return self.net(x)


class _Images(nn.Module):
    """Decoder returning (B, *output_shape), recording its sizes."""

    def __init__(self, n_inputs, output_shape, width=6):
        super().__init__()
        self.n_inputs, self.output_shape, self.width = n_inputs, output_shape, width
        self.net = nn.Sequential(nn.Linear(n_inputs, width), nn.Tanh(), nn.Linear(width, int(np.prod(output_shape))))

    def forward(self, z):
        return self.net(z).reshape(-1, *self.output_shape)


def test_custom_modules_receive_the_data_sizes_and_their_keyword_arguments():
    vae = VAE(3, encoder=_Features, decoder=_Images, input_shape=(1, SIDE, SIDE), conditional=True,
              encoder_params={"width": 5}, decoder_params={"width": 7}, max_iter=2, random_state=0, device="cpu")
    copy = clone(vae)
    assert copy.get_params()["decoder_params"] == {"width": 7}
    vae.fit(X_BARS, Y_BARS)
    encoder, decoder = vae.module_.encoder.body, vae.module_.decoder.body
    assert encoder.input_shape == (1, SIDE, SIDE) and encoder.width == 5
    assert decoder.n_inputs == 3 + 2 and decoder.output_shape == (1, SIDE, SIDE) and decoder.width == 7
    assert vae.module_.encoder.n_hidden == 5
    assert vae.inverse_transform(np.zeros((2, 3)), y=[0, 1]).shape == (2, SIDE * SIDE)
    assert vae.encoder_params == {"width": 5}  # the parameter is left as it was given
    copy.set_params(encoder_params={"width": 4}).fit(X_BARS, Y_BARS)
    assert copy.module_.encoder.body.width == 4


def test_a_module_instance_is_copied_and_reinitialised():
    body = _Features((1, SIDE, SIDE))
    weight = body.net[1].weight.detach().clone()
    vae = VAE(2, encoder=body, decoder=_Images, input_shape=(1, SIDE, SIDE), max_iter=2, random_state=0,
              device="cpu").fit(X_BARS)
    assert vae.module_.encoder.body is not body
    assert torch.equal(body.net[1].weight, weight)  # the user's module is left alone
    same = VAE(2, encoder=body, decoder=_Images, input_shape=(1, SIDE, SIDE), max_iter=2, random_state=0,
               device="cpu").fit(X_BARS)
    np.testing.assert_array_equal(vae.transform(X_BARS), same.transform(X_BARS))


def test_grid_search_over_the_encoder_channels():
    grid = {"encoder_params": [{"channels": (2, 4)}, {"channels": (4, 8)}]}
    search = GridSearchCV(_conv_vae(2, max_iter=2, random_state=0), grid, cv=2).fit(X_BARS[:80])
    assert search.best_params_["encoder_params"] in grid["encoder_params"]
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))


class _NormalisedFeatures(nn.Sequential):
    def __init__(self, input_shape):
        super().__init__(nn.Conv2d(input_shape[0], 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten())


def test_batch_normalisation_uses_its_running_statistics_outside_training():
    vae = VAE(2, encoder=_NormalisedFeatures, decoder="conv", input_shape=(1, SIDE, SIDE), likelihood="bernoulli",
              decoder_params={"channels": (4,)}, early_stopping=True, max_iter=3, random_state=0,
              device="cpu").fit(X_BARS)
    norm = vae.module_.encoder.body[1]
    stats = norm.running_mean.clone(), int(norm.num_batches_tracked)
    # 216 training rows in batches of 128: 2 steps per epoch update the statistics, validation does not
    assert stats[1] == 2 * vae.n_iter_
    full = vae.transform(X_BARS)
    np.testing.assert_allclose(vae.transform(X_BARS[5:9]), full[5:9], rtol=1e-12)
    vae.score_samples(X_BARS)
    assert torch.equal(norm.running_mean, stats[0]) and int(norm.num_batches_tracked) == stats[1]


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize(
    "params, error, match",
    [
        ({"encoder": "conv"}, ValueError, r"encoder='conv' needs input_shape=\(channels, height, width\)"),
        ({"decoder": "conv", "input_shape": (64,)}, ValueError, "decoder='conv' needs input_shape"),
        ({"encoder": "conv", "input_shape": (1, 8, 7)}, ValueError, "product is the number of features, 64"),
        ({"encoder_params": {"width": 3}}, ValueError, "encoder_params={'width': 3} needs a module encoder"),
        ({"decoder": lambda n_inputs: nn.Linear(n_inputs, 10)}, ValueError, "returns 10 values per latent row"),
        ({"encoder": _Features((1, 8, 8)), "encoder_params": {"width": 3}}, TypeError,
         "encoder is an instance of _Features; encoder_params"),
        ({"encoder": lambda: "features"}, TypeError, "encoder must build a torch.nn.Module"),
        ({"encoder": lambda: nn.LazyLinear(3)}, ValueError, "The encoder has lazy layers"),
        ({"encoder": "lstm"}, ValueError, "The 'encoder' parameter of VAE must be"),
        ({"decoder_params": [("channels", 4)]}, ValueError, "The 'decoder_params' parameter of VAE must be"),
    ],
)
def test_bad_network_settings_are_reported(params, error, match):
    with pytest.raises(error, match=match):
        VAE(2, max_iter=1, device="cpu", **params).fit(X_BARS[:20])


# ------------------------------------------------------ scikit-learn checks
class _DenseFeatures(nn.Sequential):
    def __init__(self, n_features, width=4):
        super().__init__(nn.Linear(n_features, width), nn.ReLU())


class _DenseDecoder(nn.Sequential):
    def __init__(self, n_inputs, n_features):
        super().__init__(nn.Linear(n_inputs, 8), nn.ReLU(), nn.Linear(8, n_features))


@parametrize_with_checks(
    [VAE(encoder=_DenseFeatures, decoder=_DenseDecoder, encoder_params={"width": 8}, max_iter=20, random_state=0)]
)
def test_a_vae_of_torch_modules_passes_the_sklearn_checks(estimator, check):
    check(estimator)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_conv_vae_fits_on_cuda_and_pickles_on_the_cpu():
    vae = _conv_vae(2, max_iter=3, device="cuda", random_state=0).fit(X_BARS)
    assert vae.device_.type == "cuda" and vae.dtype_ == "float32"
    state = vae.__getstate__()
    assert all(p.device.type == "cpu" for p in state["module_"].parameters())
    assert np.all(np.isfinite(vae.score_samples(X_BARS))) and np.all(np.isfinite(vae.log_likelihood_iwae(X_BARS)))
    loaded = pickle.loads(pickle.dumps(vae))
    np.testing.assert_allclose(loaded.transform(X_BARS), vae.transform(X_BARS), rtol=1e-6)
    # the initial weights come from CPU seeds: the same on every device
    cpu = _conv_vae(2, max_iter=3, device="cpu", dtype="float32", random_state=0)
    cpu._initialise(X_BARS.astype(np.float32), None)
    vae.set_params(max_iter=1)._initialise(X_BARS.astype(np.float32), None)
    for a, b in zip(cpu.module_.parameters(), vae.module_.parameters()):
        torch.testing.assert_close(a, b.cpu())
