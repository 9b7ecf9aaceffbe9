"""Variational LSTM/GRU and word-type embedding dropout: torch equivalence, the masks they draw and apply, the KL."""

import numpy as np
import pytest
import torch
from torch import nn

from skbayes.nn import EmbeddingDropout, StochasticLayer, VariationalGRU, VariationalLSTM, noise_context

DTYPE = torch.float64
KINDS = {"lstm": (VariationalLSTM, nn.LSTM, 4), "gru": (VariationalGRU, nn.GRU, 3)}


def _torch_rnn(kind, input_size=3, hidden_size=5, num_layers=2, bias=True, seed=0, **kwargs):
    torch.manual_seed(seed)
    return KINDS[kind][1](input_size, hidden_size, num_layers, bias=bias, batch_first=True, dtype=DTYPE, **kwargs)


def _inputs(*shape, seed=1):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=DTYPE)


def _sigmoid(a):
    return 1.0 / (1.0 + np.exp(-a))


def _reference(layer, x, masks):
    """Output of ``layer`` on x (n, T, in) written gate by gate (Gal 2016, eq. 3.22) in NumPy.

    ``masks``: per layer (input mask, recurrent mask), arrays of shape
    (rows, T', G', width) with T' in {1, T} and G' in {1, n_gates}, or None.
    """
    kind = "lstm" if isinstance(layer, VariationalLSTM) else "gru"
    n_gates, hidden = KINDS[kind][2], layer.hidden_size
    params = {name: p.detach().numpy() for name, p in layer.named_parameters()}
    inp = x.numpy()
    n, steps = inp.shape[:2]

    def mask_at(mask, t, g, width):
        if mask is None:
            return np.ones((n, width))
        return np.broadcast_to(mask[:, t if mask.shape[1] > 1 else 0, g if mask.shape[2] > 1 else 0], (n, width))

    for k in range(layer.num_layers):
        w_ih = params[f"weight_ih_l{k}"].reshape(n_gates, hidden, -1)
        w_hh = params[f"weight_hh_l{k}"].reshape(n_gates, hidden, hidden)
        zero = np.zeros((n_gates, hidden))
        b_ih = params.get(f"bias_ih_l{k}", zero).reshape(n_gates, hidden)
        b_hh = params.get(f"bias_hh_l{k}", zero).reshape(n_gates, hidden)
        mask_x, mask_h = (None if m is None else m.numpy() for m in masks[k])
        h, c, outputs = np.zeros((n, hidden)), np.zeros((n, hidden)), []
        for t in range(steps):
            a = [(inp[:, t] * mask_at(mask_x, t, g, inp.shape[2])) @ w_ih[g].T + b_ih[g] for g in range(n_gates)]
            u = [(h * mask_at(mask_h, t, g, hidden)) @ w_hh[g].T + b_hh[g] for g in range(n_gates)]
            if kind == "lstm":  # torch's gate order i, f, g, o
                i, f, g, o = _sigmoid(a[0] + u[0]), _sigmoid(a[1] + u[1]), np.tanh(a[2] + u[2]), _sigmoid(a[3] + u[3])
                c = f * c + i * g
                h = o * np.tanh(c)
            else:  # r, z, n
                r, z = _sigmoid(a[0] + u[0]), _sigmoid(a[1] + u[1])
                h = (1 - z) * np.tanh(a[2] + r * u[2]) + z * h
            outputs.append(h)
        inp = np.stack(outputs, axis=1)
    return inp


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("gates", ["tied", "untied"])
@pytest.mark.parametrize("bias", [True, False])
def test_mean_mode_and_rate_zero_equal_torch(kind, gates, bias):
    rnn = _torch_rnn(kind, bias=bias)
    x = _inputs(4, 6, 3)
    h0 = _inputs(2, 4, 5, seed=2)
    hx = (h0, _inputs(2, 4, 5, seed=3)) if kind == "lstm" else h0
    expected = rnn(x, hx)
    layer = KINDS[kind][0].from_module(rnn, dropout_rate=0.3, gates=gates)
    assert isinstance(layer, StochasticLayer)
    zero_rate = KINDS[kind][0].from_module(rnn, dropout_rate=0.0, gates=gates, masks="step")
    for module, mode in ((layer, "mean"), (zero_rate, "sample"), (zero_rate, "shared")):
        with noise_context(module, mode, torch.Generator().manual_seed(0)):
            torch.testing.assert_close(module(x, hx), expected, rtol=0, atol=1e-10)
            torch.testing.assert_close(module(x), rnn(x), rtol=0, atol=1e-10)
            # unbatched input, as torch accepts it
            unbatched_hx = tuple(p[:, 0] for p in hx) if kind == "lstm" else h0[:, 0]
            torch.testing.assert_close(module(x[0], unbatched_hx), rnn(x[0], unbatched_hx), rtol=0, atol=1e-10)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("gates", ["tied", "untied"])
@pytest.mark.parametrize("masks", ["sequence", "step"])
@pytest.mark.parametrize("mode", ["sample", "shared"])
def test_forward_applies_the_drawn_masks_gate_by_gate(kind, gates, masks, mode):
    layer = KINDS[kind][0].from_module(
        _torch_rnn(kind), dropout_rate=0.4, recurrent_dropout_rate=0.3, gates=gates, masks=masks
    )
    x = _inputs(5, 4, 3)
    with noise_context(layer, mode, torch.Generator().manual_seed(7)):
        drawn = layer.draw_masks(5, 4, x)
    with torch.no_grad(), noise_context(layer, mode, torch.Generator().manual_seed(7)):
        out, _ = layer(x)
    np.testing.assert_allclose(out.numpy(), _reference(layer, x, drawn), rtol=0, atol=1e-12)
    assert not np.allclose(out.numpy(), _reference(layer, x, [(None, None)] * 2))  # something was dropped


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("gates", ["tied", "untied"])
@pytest.mark.parametrize("masks", ["sequence", "step"])
def test_mask_shapes_values_and_rates(kind, gates, masks):
    p, p_r, n, steps, n_gates = 0.4, 0.25, 400, 6, KINDS[kind][2]
    layer = KINDS[kind][0](8, 16, 2, dropout_rate=p, recurrent_dropout_rate=p_r, gates=gates, masks=masks, dtype=DTYPE)
    like = torch.empty(0, dtype=DTYPE)
    with noise_context(layer, "sample", torch.Generator().manual_seed(0)):
        drawn = layer.draw_masks(n, steps, like)
    with noise_context(layer, "shared", torch.Generator().manual_seed(0)):
        shared = layer.draw_masks(n, steps, like)
    with noise_context(layer, "mean"):
        assert layer.draw_masks(n, steps, like) == [(None, None)] * 2
    t_dim = 1 if masks == "sequence" else steps
    g_dim = 1 if gates == "tied" else n_gates
    for k, ((mask_x, mask_h), (shared_x, shared_h)) in enumerate(zip(drawn, shared)):
        in_k = 8 if k == 0 else 16
        assert mask_x.shape == (n, t_dim, g_dim, in_k) and mask_h.shape == (n, t_dim, g_dim, 16)
        assert shared_x.shape == (1, t_dim, g_dim, in_k) and shared_h.shape == (1, t_dim, g_dim, 16)
        for mask, rate in ((mask_x, p), (mask_h, p_r)):
            assert set(mask.unique().tolist()) == {0.0, 1.0 / (1.0 - rate)}
            dropped = (mask == 0).double()
            assert abs(dropped.mean().item() - rate) < 5 * np.sqrt(rate * (1 - rate) / mask.numel())
            # different sequences draw different masks
            assert (dropped[0] != dropped[1]).any()
            if masks == "step":  # fresh masks at every step: the mask of step 0 is not that of step 1
                agree = (dropped[:, 0] == dropped[:, 1]).double().mean().item()
                assert abs(agree - (rate**2 + (1 - rate) ** 2)) < 0.03
            if gates == "untied":  # the gates' masks are independent draws
                agree = (dropped[:, :, 0] == dropped[:, :, 1]).double().mean().item()
                assert abs(agree - (rate**2 + (1 - rate) ** 2)) < 0.03


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("gates", ["tied", "untied"])
@pytest.mark.parametrize("masks", ["sequence", "step"])
def test_dropped_inputs_seen_through_the_gradient(kind, gates, masks):
    """An input unit that no gate sees has zero gradient: the pattern is the mask, as observed from outside.

    Tied: a unit is cut with probability p, the same units at every step
    for ``masks="sequence"``. Untied: only if every gate's mask drops it,
    probability p^G. (A non-zero initial state, so that the LSTM's forget
    gate matters at the first step.)
    """
    p, n, steps, in_size, n_gates = 0.5, 300, 3, 8, KINDS[kind][2]
    layer = KINDS[kind][0](in_size, 6, dropout_rate=p, gates=gates, masks=masks, dtype=DTYPE)
    x = _inputs(n, steps, in_size).requires_grad_(True)
    h0 = _inputs(1, n, 6, seed=2)
    hx = (h0, _inputs(1, n, 6, seed=3)) if kind == "lstm" else h0
    with noise_context(layer, "sample", torch.Generator().manual_seed(1)):
        layer(x, hx)[0].sum().backward()
    cut = x.grad == 0  # (n, T, in)
    rate = p if gates == "tied" else p**n_gates
    assert abs(cut.double().mean().item() - rate) < 5 * np.sqrt(rate * (1 - rate) / cut.numel())
    same_across_steps = (cut[:, 1:] == cut[:, :1]).all()
    assert bool(same_across_steps) == (masks == "sequence")
    assert (cut[0] != cut[1]).any()  # each sequence its own mask


@pytest.mark.parametrize("kind", KINDS)
def test_shared_mode_rows_do_not_depend_on_the_batch(kind):
    layer = KINDS[kind][0].from_module(_torch_rnn(kind), dropout_rate=0.5, gates="untied", masks="step")
    x = _inputs(4, 5, 3)
    with torch.no_grad():
        with noise_context(layer, "shared", torch.Generator().manual_seed(2)):
            batch = layer(x)[0]
        with noise_context(layer, "shared", torch.Generator().manual_seed(2)):
            alone = layer(x[2:3])[0]
        torch.testing.assert_close(batch[2:3], alone, rtol=0, atol=1e-12)
        repeated = x[:1].expand(3, -1, -1)
        with noise_context(layer, "shared", torch.Generator().manual_seed(2)):
            shared = layer(repeated)[0]
        with noise_context(layer, "sample", torch.Generator().manual_seed(2)):
            sampled = layer(repeated)[0]
    assert torch.equal(shared[0], shared[1]) and torch.equal(shared[0], shared[2])
    assert not torch.allclose(sampled[0], sampled[1])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bias", [True, False])
def test_kl_is_the_inverted_dropout_weight_decay(kind, bias):
    p, p_r, scale = 0.3, 0.2, 0.5
    layer = KINDS[kind][0].from_module(
        _torch_rnn(kind, bias=bias), dropout_rate=p, recurrent_dropout_rate=p_r, prior_scale=scale
    )
    l2 = 1 / scale**2
    expected = 0.0
    for name, param in layer.named_parameters():
        sq = float((param.detach().numpy() ** 2).sum())
        factor = {"weight_ih": 1 / (1 - p), "weight_hh": 1 / (1 - p_r)}.get(name[:9], 1.0)
        expected += 0.5 * l2 * factor * sq
    assert layer.kl().item() == pytest.approx(expected, rel=1e-12)
    assert len(list(layer.parameters())) == (8 if bias else 4)


@pytest.mark.parametrize("kind", KINDS)
def test_from_module_and_constructor_errors(kind):
    cls = KINDS[kind][0]
    with pytest.raises(ValueError, match="batch_first=False"):
        cls.from_module(KINDS[kind][1](3, 4), dropout_rate=0.1)
    with pytest.raises(ValueError, match="bidirectional"):
        cls.from_module(_torch_rnn(kind, bidirectional=True), dropout_rate=0.1)
    with pytest.raises(TypeError, match="expects a torch.nn"):
        cls.from_module(nn.RNN(3, 4, batch_first=True), dropout_rate=0.1)
    with pytest.raises(ValueError, match=r"dropout_rate must be in \[0, 1\)"):
        cls(3, 4, dropout_rate=1.0)
    with pytest.raises(ValueError, match="recurrent_dropout_rate"):
        cls(3, 4, dropout_rate=0.1, recurrent_dropout_rate=-0.1)
    with pytest.raises(ValueError, match="gates must be one of"):
        cls(3, 4, dropout_rate=0.1, gates="per-gate")
    with pytest.raises(ValueError, match="masks must be one of"):
        cls(3, 4, dropout_rate=0.1, masks="time")
    if kind == "lstm":
        with pytest.raises(ValueError, match="proj_size=2"):
            cls.from_module(_torch_rnn(kind, proj_size=2), dropout_rate=0.1)


def test_recurrent_dropout_rate_defaults_to_the_input_rate():
    layer = VariationalGRU(3, 4, dropout_rate=0.35)
    assert layer.recurrent_dropout_rate == 0.35 and layer.batch_first
    assert VariationalGRU(3, 4, dropout_rate=0.35, recurrent_dropout_rate=0.0).recurrent_dropout_rate == 0.0


# ----------------------------------------------------------------------------- embedding dropout

VOCAB, DIM = 12, 5


def _embedding(p=0.5, padding_idx=None):
    torch.manual_seed(0)
    emb = nn.Embedding(VOCAB, DIM, padding_idx=padding_idx, dtype=DTYPE)
    return emb, EmbeddingDropout.from_module(emb, dropout_rate=p)


def test_embedding_mean_mode_is_the_torch_embedding():
    emb, layer = _embedding(padding_idx=0)
    assert layer.padding_idx == 0
    idx = torch.randint(0, VOCAB, (3, 7), generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(layer(idx), emb(idx), rtol=0, atol=0)
    with noise_context(layer, "sample", torch.Generator().manual_seed(0)):
        assert layer(idx).shape == (3, 7, DIM)
    # the padding row gets no gradient, as in torch
    layer(torch.tensor([[0, 1]])).sum().backward()
    assert layer.weight.grad[0].abs().sum() == 0 and layer.weight.grad[1].abs().sum() > 0


@pytest.mark.parametrize("mode", ["sample", "shared"])
def test_embedding_drops_word_types_not_tokens(mode):
    """Every occurrence of a word in a sequence is dropped or kept together; rate p over many (sequence, type) pairs."""
    p, n = 0.4, 600
    emb, layer = _embedding(p)
    idx = torch.randint(0, VOCAB, (n, 20), generator=torch.Generator().manual_seed(1))  # words repeat in a sequence
    with torch.no_grad(), noise_context(layer, mode, torch.Generator().manual_seed(2)):
        out = layer(idx)
    looked_up = emb(idx).detach()
    kept = out.abs().sum(-1) > 0  # (n, T): a dropped token's embedding is all zeros
    torch.testing.assert_close(out[kept], looked_up[kept] / (1 - p), rtol=0, atol=1e-14)
    present = torch.zeros(n, VOCAB, dtype=torch.bool)
    dropped = torch.zeros(n, VOCAB, dtype=torch.bool)
    for row in range(n):
        for word in idx[row].unique():
            at = idx[row] == word
            assert kept[row, at].all() or not kept[row, at].any()  # a type, not a token
            present[row, word] = True
            dropped[row, word] = not kept[row, at][0]
    if mode == "shared":  # one mask over the vocabulary for every sequence
        for word in range(VOCAB):
            assert dropped[present[:, word], word].unique().numel() == 1
    else:
        rate = dropped[present].double().mean().item()
        assert abs(rate - p) < 5 * np.sqrt(p * (1 - p) / present.sum().item())
        # a word present in many sequences is dropped in some and kept in others
        assert dropped[present[:, 3], 3].unique().numel() == 2


def test_embedding_shared_rows_do_not_depend_on_the_batch_and_rate_zero_is_identity():
    _, layer = _embedding(0.5)
    idx = torch.randint(0, VOCAB, (4, 6), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        with noise_context(layer, "shared", torch.Generator().manual_seed(4)):
            batch = layer(idx)
        with noise_context(layer, "shared", torch.Generator().manual_seed(4)):
            alone = layer(idx[1:2])
    torch.testing.assert_close(batch[1:2], alone, rtol=0, atol=0)
    _, none_dropped = _embedding(0.0)
    with noise_context(none_dropped, "sample", torch.Generator().manual_seed(4)):
        torch.testing.assert_close(none_dropped(idx), none_dropped.weight[idx], rtol=0, atol=0)


def test_embedding_kl_and_errors():
    _, layer = _embedding(0.25)
    layer.prior_scale = 2.0
    expected = 0.5 / (4.0 * 0.75) * float((layer.weight.detach().numpy() ** 2).sum())
    assert layer.kl().item() == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match="max_norm"):
        EmbeddingDropout.from_module(nn.Embedding(4, 2, max_norm=1.0), dropout_rate=0.1)
    with pytest.raises(TypeError, match="torch.nn.Embedding"):
        EmbeddingDropout.from_module(nn.Linear(4, 2), dropout_rate=0.1)
    with pytest.raises(ValueError, match=r"dropout_rate must be in \[0, 1\)"):
        EmbeddingDropout(4, 2, 1.5)
