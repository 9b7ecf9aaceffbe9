"""MeanFieldConv2d: output moments against im2col algebra, both sampling modes, torch's Conv2d, the KL."""

import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from skbayes.nn import MeanFieldConv2d, StochasticLayer, noise_context

DTYPE = torch.float64
# (in, out, kernel, stride, padding, dilation, groups)
GEOMETRIES = [(2, 3, 3, 2, 1, 1, 1), (4, 2, (2, 3), 1, (1, 0), 2, 2)]


def _layer(in_c, out_c, kernel, stride, padding, dilation, groups, bias=True, seed=0):
    """A layer with means and standard deviations of unit scale, far from the initial values."""
    layer = MeanFieldConv2d(
        in_c, out_c, kernel, stride, padding, dilation, groups, bias, prior_scale=0.7,
        generator=torch.Generator().manual_seed(seed), dtype=DTYPE,
    )
    rng = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in layer.named_parameters():  # rho around -1: sigma around 0.3
            p.copy_(torch.randn(p.shape, generator=rng, dtype=DTYPE) - (1.0 if name.endswith("rho") else 0.0))
    return layer


def _im2col_moments(layer, x):
    """Mean and variance of each output element of one image x (C, H, W), by patches times kernels.

    Gal 2016, section 3.4.1: the patches form the rows of a matrix, the
    kernels its columns; with independent Gaussian weights the output element
    (k, p) is N(patch_p . mu_k + mu_b, patch_p^2 . sigma_k^2 + sigma_b^2).
    Also the covariance of the elements of one output channel (same kernel,
    different patches) under one shared kernel draw.
    """
    kh, kw = layer.kernel_size
    patches = F.unfold(x[None], (kh, kw), layer.dilation, layer.padding, layer.stride)[0].numpy()  # (C kh kw, L)
    mu, sigma = layer.weight_mu.detach().numpy(), layer.weight_sigma.detach().numpy()
    mu_b, sigma_b = layer.bias_mu.detach().numpy(), layer.bias_sigma.detach().numpy()
    c_in_group = layer.in_channels // layer.groups
    out_per_group = layer.out_channels // layer.groups
    rows = c_in_group * kh * kw
    n_patches = patches.shape[1]
    mean = np.empty((layer.out_channels, n_patches))
    var = np.empty_like(mean)
    cov = np.empty((layer.out_channels, n_patches, n_patches))
    for k in range(layer.out_channels):
        g = k // out_per_group
        pk = patches[g * rows : (g + 1) * rows]  # the group's channels, in unfold's (channel, kh, kw) order
        m, s2 = mu[k].reshape(-1), sigma[k].reshape(-1) ** 2
        mean[k] = pk.T @ m + mu_b[k]
        var[k] = (pk**2).T @ s2 + sigma_b[k] ** 2
        cov[k] = (pk.T * s2) @ pk + sigma_b[k] ** 2
    h_out = math.floor(
        (x.shape[1] + 2 * layer.padding[0] - layer.dilation[0] * (kh - 1) - 1) / layer.stride[0] + 1
    )
    return mean.reshape(layer.out_channels, h_out, -1), var.reshape(layer.out_channels, h_out, -1), cov


def _draws(layer, x, mode, n_draws, seed):
    """``n_draws`` outputs for one image, one pass each (each pass draws its own perturbation)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad(), noise_context(layer, mode, gen):
        return np.concatenate([layer(x[None]).numpy() for _ in range(n_draws)])


@pytest.mark.parametrize("geometry", GEOMETRIES)
@pytest.mark.parametrize("mode", ["sample", "shared"])
def test_output_moments_match_the_im2col_closed_form(geometry, mode):
    layer = _layer(*geometry)
    x = torch.randn(geometry[0], 6, 7, generator=torch.Generator().manual_seed(5), dtype=DTYPE)
    mean, var, _ = _im2col_moments(layer, x)
    n_draws = 3000
    draws = _draws(layer, x, mode, n_draws, seed=11)
    assert draws.shape[1:] == mean.shape
    # sample mean within 5 standard errors; sample variance within 5 standard errors of a Gaussian's (sqrt(2/n) v)
    np.testing.assert_array_less(np.abs(draws.mean(0) - mean), 5 * np.sqrt(var / n_draws))
    np.testing.assert_array_less(np.abs(draws.var(0) - var), 5 * np.sqrt(2.0 / n_draws) * var)


def test_sample_and_shared_modes_both_correlate_the_elements_as_one_kernel_does():
    """Flipout draws one kernel per row: the elements of a row are correlated like those of a shared kernel."""
    layer = _layer(*GEOMETRIES[0])
    x = torch.randn(2, 6, 7, generator=torch.Generator().manual_seed(6), dtype=DTYPE)
    _, _, cov = _im2col_moments(layer, x)
    k = 1
    corrs = cov[k] / np.sqrt(np.outer(np.diag(cov[k]), np.diag(cov[k])))
    np.fill_diagonal(corrs, 0.0)
    p, q = np.unravel_index(np.abs(corrs).argmax(), corrs.shape)  # the two most correlated patches of channel k
    corr = corrs[p, q]
    assert abs(corr) > 0.2  # independent elements (local reparameterisation) would give 0
    for mode in ("sample", "shared"):
        draws = _draws(layer, x, mode, 3000, seed=12).reshape(3000, layer.out_channels, -1)[:, k]
        sample_corr = np.corrcoef(draws[:, p], draws[:, q])[0, 1]
        assert abs(sample_corr - corr) < 5 * (1 - corr**2) / np.sqrt(3000), (mode, sample_corr, corr)


def test_sample_mode_convolves_each_row_with_its_flipout_kernel():
    # Wen et al. 2018, eq. 3: row i's kernel is mu + Delta * (s_i r_i^T) with one Delta per call; rebuilt here
    # from the same generator (its draw order: Delta's epsilon, input signs, output signs, bias epsilon) and
    # applied row by row by torch's own convolution.
    layer = _layer(*GEOMETRIES[1])
    x = torch.randn(3, 4, 6, 7, generator=torch.Generator().manual_seed(8), dtype=DTYPE)
    with torch.no_grad(), noise_context(layer, "sample", torch.Generator().manual_seed(4)):
        out = layer(x)
    gen = torch.Generator().manual_seed(4)
    with torch.no_grad():
        eps = torch.randn(layer.weight_mu.shape, generator=gen, dtype=DTYPE)
        r = torch.where(torch.rand(3, layer.in_channels, generator=gen, dtype=DTYPE) < 0.5, -1.0, 1.0)
        s = torch.where(torch.rand(3, layer.out_channels, generator=gen, dtype=DTYPE) < 0.5, -1.0, 1.0)
        eps_b = torch.randn(3, layer.out_channels, generator=gen, dtype=DTYPE)
        delta = layer.weight_sigma * eps
        group_in = layer.in_channels // layer.groups
        for i in range(3):
            signs = s[i][:, None] * torch.stack(
                [r[i][(o // (layer.out_channels // layer.groups)) * group_in:][:group_in]
                 for o in range(layer.out_channels)])
            kernel = layer.weight_mu + delta * signs[:, :, None, None]
            bias = layer.bias_mu + layer.bias_sigma * eps_b[i]
            expected = F.conv2d(x[i:i + 1], kernel, bias, layer.stride, layer.padding, layer.dilation, layer.groups)
            torch.testing.assert_close(out[i:i + 1], expected, rtol=1e-10, atol=1e-12)


def test_shared_mode_rows_do_not_depend_on_the_batch():
    layer = _layer(*GEOMETRIES[1])
    x = torch.randn(3, 4, 6, 7, generator=torch.Generator().manual_seed(7), dtype=DTYPE)
    outs = []
    for batch in (x, x[1:2]):
        with torch.no_grad(), noise_context(layer, "shared", torch.Generator().manual_seed(3)):
            outs.append(layer(batch))
    torch.testing.assert_close(outs[0][1:2], outs[1], rtol=0, atol=1e-12)
    assert not torch.allclose(outs[0], layer(x))  # and it is not the mean pass
    with torch.no_grad(), noise_context(layer, "sample", torch.Generator().manual_seed(3)):
        same_rows = layer(x[:1].expand(2, -1, -1, -1))
    assert not torch.allclose(same_rows[0], same_rows[1])  # "sample": fresh noise per row


def test_mean_mode_is_a_convolution_with_the_means_and_the_mode_resets():
    layer = _layer(*GEOMETRIES[1])
    assert isinstance(layer, StochasticLayer)
    x = torch.randn(3, 4, 6, 7, generator=torch.Generator().manual_seed(8), dtype=DTYPE)
    expected = F.conv2d(x, layer.weight_mu, layer.bias_mu, stride=1, padding=(1, 0), dilation=2, groups=2)
    torch.testing.assert_close(layer(x), expected, rtol=0, atol=0)
    with noise_context(layer, "sample", torch.Generator()):
        assert layer.noise_mode == "sample"
    assert layer.noise_mode == "mean" and layer.noise_generator is None
    torch.testing.assert_close(layer(x), expected, rtol=0, atol=0)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize(
    "kwargs",
    [
        {"stride": 2, "padding": 1, "dilation": 2, "groups": 2},
        {"padding": "same"},
        {"kernel_size": (1, 3), "stride": (2, 1)},
    ],
)
def test_from_module_reproduces_the_torch_convolution(bias, kwargs):
    kwargs = {"kernel_size": 3, **kwargs}
    torch.manual_seed(0)
    conv = nn.Conv2d(4, 6, bias=bias, dtype=DTYPE, **kwargs)
    layer = MeanFieldConv2d.from_module(conv, prior_scale=0.5, posterior_init_scale=0.01)
    x = torch.randn(2, 4, 9, 8, generator=torch.Generator().manual_seed(9), dtype=DTYPE)
    torch.testing.assert_close(layer(x), conv(x), rtol=0, atol=0)
    assert layer.weight_mu.shape == conv.weight.shape and layer.weight_mu.dtype == DTYPE
    assert (layer.bias_mu is None) == (not bias)
    torch.testing.assert_close(layer.weight_sigma, torch.full_like(layer.weight_mu, 0.01))
    with noise_context(layer, "shared", torch.Generator().manual_seed(0)):
        assert layer(x).shape == conv(x).shape
    unbatched = layer(x[0])
    torch.testing.assert_close(unbatched, conv(x[0]), rtol=0, atol=0)


def test_from_module_refuses_what_it_cannot_copy():
    with pytest.raises(ValueError, match="padding_mode='reflect'"):
        MeanFieldConv2d.from_module(nn.Conv2d(2, 2, 3, padding=1, padding_mode="reflect"))
    with pytest.raises(TypeError, match="torch.nn.Conv2d"):
        MeanFieldConv2d.from_module(nn.Conv1d(2, 2, 3))
    with pytest.raises(ValueError, match="divisible by groups"):
        MeanFieldConv2d(3, 4, 3, groups=2)


@pytest.mark.parametrize("bias", [True, False])
def test_kl_is_the_closed_form_gaussian_kl(bias):
    layer = _layer(*GEOMETRIES[0], bias=bias)
    params = [(layer.weight_mu, layer.weight_sigma)] + ([(layer.bias_mu, layer.bias_sigma)] if bias else [])
    s_p = 0.7
    expected = sum(
        float(np.sum(np.log(s_p / s) + (s**2 + m**2) / (2 * s_p**2) - 0.5))
        for m, s in ((m.detach().numpy(), s.detach().numpy()) for m, s in params)
    )
    assert layer.kl().item() == pytest.approx(expected, rel=1e-12)
    # and a Monte-Carlo estimate E_q[log q - log p] with torch.distributions' densities
    n_draws, rng = 20000, torch.Generator().manual_seed(4)
    estimate = 0.0
    for m, s in params:
        q = torch.distributions.Normal(m.detach(), s.detach())
        w = m.detach() + s.detach() * torch.randn((n_draws, *m.shape), generator=rng, dtype=DTYPE)
        estimate = estimate + (q.log_prob(w) - torch.distributions.Normal(0.0, s_p).log_prob(w)).flatten(1).sum(1)
    assert abs(estimate.mean().item() - layer.kl().item()) < 5 * estimate.std().item() / n_draws**0.5


def test_sample_mode_gradients_are_finite_without_bias_on_zero_patches():
    """Without bias, an all-zero patch has output variance 0; its gradient must not be NaN."""
    layer = _layer(2, 3, 3, 1, 1, 1, 1, bias=False)
    x = torch.zeros(2, 2, 5, 5, dtype=DTYPE)
    x[:, :, :2, :2] = 1.0  # the far corner's patches are all zeros
    with noise_context(layer, "sample", torch.Generator().manual_seed(0)):
        layer(x).square().sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in layer.parameters())
    assert layer.weight_rho.grad.abs().sum() > 0
