r"""Variational recurrent layers and word-type embedding dropout (Gal 2016, section 3.4.2).

Dropout in a recurrent network read as variational inference [Gal2016]_,
[GalGhahramani2016]_: dropping an input unit of a weight matrix zeroes that
row of the matrix, and because the same weights act at every time step, a
draw of the weights is one dropout mask *per sequence*, reused at every step,
on the inputs x_t and on the recurrent connections h_{t-1} alike (eq. 3.21 and
the text after it). Fresh masks at every step are the naive dropout this
replaces; they are kept here (``masks="step"``) as the baseline to compare.

The layers are drop-in replacements of :class:`torch.nn.LSTM`,
:class:`torch.nn.GRU` (``batch_first=True``, one direction) and
:class:`torch.nn.Embedding`, with torch's parameter names and layouts, driven
by the noise protocol of :mod:`skbayes.nn.layers.noise`: in mode
``"sample"`` every row (sequence) draws its own masks, in mode ``"shared"``
one set of masks serves every row, in mode ``"mean"`` nothing is dropped
(masks use inverted dropout, kept units scaled by 1/(1-p), so the mean pass
is the plain torch layer: the standard dropout approximation).

References
----------
.. [Gal2016] Y. Gal, "Uncertainty in deep learning", PhD thesis, 2016,
   section 3.4.2 (eqs. 3.21-3.23 and the remark on word embeddings dropout).
.. [GalGhahramani2016] Y. Gal and Z. Ghahramani, "A theoretically grounded
   application of dropout in recurrent neural networks", NeurIPS 2016.
"""

import torch
from torch import nn
from torch.nn import functional as F

from ..functional import dropout_mask, dropout_weight_decay, standard_normal, standard_uniform, uniform_init
from .dropout import check_dropout_rate
from .noise import StochasticLayer

__all__ = ["EmbeddingDropout", "VariationalGRU", "VariationalLSTM"]

_GATES = ("tied", "untied")
_MASKS = ("sequence", "step")


class _VariationalRNN(StochasticLayer):
    """Shared machinery of :class:`VariationalLSTM` and :class:`VariationalGRU`.

    Subclasses set ``_n_gates``, ``_torch_class``, ``_fold_recurrent_bias``
    (whether b_hh can be added to the input projection) and ``_cell``.
    """

    _n_gates = None
    _torch_class = None
    _fold_recurrent_bias = True
    #: Inputs are (n, T, input_size), as with ``batch_first=True`` in torch.
    batch_first = True

    def __init__(
        self, input_size, hidden_size, num_layers=1, bias=True, *, dropout_rate, recurrent_dropout_rate=None,
        gates="tied", masks="sequence", prior_scale=1.0, generator=None, device=None, dtype=None,
    ):
        super().__init__()
        if gates not in _GATES:
            raise ValueError(f"gates must be one of {_GATES}; got {gates!r}.")
        if masks not in _MASKS:
            raise ValueError(f"masks must be one of {_MASKS}; got {masks!r}.")
        if int(num_layers) < 1:
            raise ValueError(f"num_layers must be at least 1; got {num_layers}.")
        self.input_size = int(input_size)
        self.hidden_size = int(hidden_size)
        self.num_layers = int(num_layers)
        self.bias = bool(bias)
        self.dropout_rate = check_dropout_rate("dropout_rate", dropout_rate)
        self.recurrent_dropout_rate = check_dropout_rate(
            "recurrent_dropout_rate", self.dropout_rate if recurrent_dropout_rate is None else recurrent_dropout_rate
        )
        self.gates = gates
        self.masks = masks
        self.prior_scale = float(prior_scale)
        factory = {"device": device, "dtype": dtype}
        width = self._n_gates * self.hidden_size
        # torch's initialisation, U(-1/sqrt(hidden), 1/sqrt(hidden)) for every tensor, in torch's order
        for k in range(self.num_layers):
            in_k = self.input_size if k == 0 else self.hidden_size
            shapes = {"weight_ih": (width, in_k), "weight_hh": (width, self.hidden_size)}
            if self.bias:
                shapes.update(bias_ih=(width,), bias_hh=(width,))
            for name, shape in shapes.items():
                value = uniform_init(shape, self.hidden_size, generator, **factory)
                self.register_parameter(f"{name}_l{k}", nn.Parameter(value))

    @classmethod
    def from_module(cls, rnn, *, dropout_rate, recurrent_dropout_rate=None, gates="tied", masks="sequence",
                    prior_scale=1.0):
        """A layer with the weights of a torch recurrent layer (``batch_first=True``, one direction).

        torch's own ``dropout`` (between stacked layers, fresh at every step)
        is not carried over: ``dropout_rate`` drops the inputs of every layer,
        the first one's included, with the masks set by ``masks``.

        Parameters
        ----------
        rnn : torch.nn.LSTM or torch.nn.GRU
            Of the class this layer replaces.
        dropout_rate, recurrent_dropout_rate, gates, masks, prior_scale
            As in the constructor.

        Returns
        -------
        layer
            On ``rnn``'s device and dtype; in mode ``"mean"`` it computes ``rnn(x)``.

        Raises
        ------
        TypeError
            If ``rnn`` is not of the replaced class.
        ValueError
            If ``rnn`` is bidirectional, not ``batch_first``, or (LSTM) has
            ``proj_size > 0``.
        """
        torch_name = cls._torch_class.__name__
        if not isinstance(rnn, cls._torch_class):
            raise TypeError(f"{cls.__name__}.from_module expects a torch.nn.{torch_name}, got {type(rnn).__name__}.")
        if not rnn.batch_first:
            raise ValueError(
                f"{cls.__name__} takes inputs of shape (n, T, input_size); the {torch_name} has batch_first=False. "
                f"Build it with batch_first=True (and transpose its inputs) before converting it."
            )
        if rnn.bidirectional:
            raise ValueError(f"{cls.__name__} runs one direction; the {torch_name} is bidirectional.")
        if getattr(rnn, "proj_size", 0):
            raise ValueError(f"{cls.__name__} has no projection; the {torch_name} has proj_size={rnn.proj_size}.")
        reference = rnn.weight_ih_l0
        layer = cls(
            rnn.input_size, rnn.hidden_size, rnn.num_layers, rnn.bias, dropout_rate=dropout_rate,
            recurrent_dropout_rate=recurrent_dropout_rate, gates=gates, masks=masks, prior_scale=prior_scale,
            device=reference.device, dtype=reference.dtype,
            generator=torch.Generator(),  # the initial values are overwritten: leave the global generator alone
        )
        with torch.no_grad():
            for name, param in layer.named_parameters():
                param.copy_(getattr(rnn, name))
        return layer

    def _layer_weights(self, k):
        names = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
        return [getattr(self, f"{name}_l{k}", None) for name in names]

    def draw_masks(self, n, steps, like):
        """The dropout masks of one pass over ``n`` sequences of ``steps`` steps, as set by the noise mode.

        ``forward`` draws exactly these (same calls on the generator, in the
        same order: layer by layer, input mask then recurrent mask), so a
        generator seeded alike reproduces them.

        Parameters
        ----------
        n, steps : int
            Rows (sequences) and time steps of the input.
        like : torch.Tensor
            Gives the dtype and device of the masks.

        Returns
        -------
        masks : list of (input_mask, recurrent_mask), one pair per layer
            ``input_mask`` of shape (rows, T', G', in_k) multiplies x_t (layer
            k's input), ``recurrent_mask`` of shape (rows, T', G', hidden_size)
            multiplies h_{t-1}, with rows = :meth:`noise_rows` (n), T' = 1 for
            ``masks="sequence"`` (one mask for every step) and ``steps`` for
            ``"step"``, G' = 1 for ``gates="tied"`` and the number of gates
            for ``"untied"``. Values are 0 or 1/(1-p). A mask is None where
            nothing is dropped (mode ``"mean"``, or a rate of 0).
        """
        rows = self.noise_rows(n)
        t_dim = 1 if self.masks == "sequence" else steps
        g_dim = 1 if self.gates == "tied" else self._n_gates
        out = []
        for k in range(self.num_layers):
            pair = []
            in_k = self.input_size if k == 0 else self.hidden_size
            for rate, width in ((self.dropout_rate, in_k), (self.recurrent_dropout_rate, self.hidden_size)):
                if self.sampling and rate > 0:
                    pair.append(dropout_mask((rows, t_dim, g_dim, width), rate, like, self.noise_generator))
                else:
                    pair.append(None)
            out.append(tuple(pair))
        return out

    def _project(self, x, weight, mask):
        """x W^T for x (n, ..., width) times a mask (rows, ..., G', width), per gate if untied: (n, ..., G * hidden)."""
        if mask is None:
            return x @ weight.T
        if self.gates == "tied":  # one mask for every gate: one matrix product
            return (x * mask.squeeze(-2)) @ weight.T
        g, h = self._n_gates, self.hidden_size
        per_gate = torch.einsum("...gi,ghi->...gh", x.unsqueeze(-2) * mask, weight.view(g, h, -1))
        return per_gate.flatten(-2)

    def _run_layer(self, k, x, state, masks):
        """One layer over all steps: (n, T, in_k) -> (n, T, hidden), final state."""
        w_ih, w_hh, b_ih, b_hh = self._layer_weights(k)
        mask_x, mask_h = masks
        steps = x.shape[1]
        # the input projection of every step at once (mask of shape (rows, T', G', in_k))
        gx = self._project(x, w_ih, mask_x)
        if b_ih is not None:
            gx = gx + (b_ih + b_hh if self._fold_recurrent_bias else b_ih)
        recurrent_bias = None if (b_hh is None or self._fold_recurrent_bias) else b_hh
        outputs = []
        for t in range(steps):
            m_h = None if mask_h is None else mask_h[:, t if mask_h.shape[1] > 1 else 0]
            hh = self._project(state[0], w_hh, m_h)
            if recurrent_bias is not None:
                hh = hh + recurrent_bias
            state = self._cell(gx[:, t], hh, state)
            outputs.append(state[0])
        return torch.stack(outputs, dim=1), state

    def _initial_state(self, hx, n, like):
        """Per-layer state tuples from torch's hx, (num_layers, n, hidden) each (zeros if None)."""
        n_parts = 2 if self._torch_class is nn.LSTM else 1
        if hx is None:
            zeros = like.new_zeros(self.num_layers, n, self.hidden_size)
            parts = (zeros,) * n_parts
        else:
            parts = tuple(hx) if n_parts == 2 else (hx,)
        return [tuple(p[k] for p in parts) for k in range(self.num_layers)]

    def forward(self, input, hx=None):
        """Run the layers over ``input`` (n, T, input_size) (or unbatched (T, input_size)).

        Returns
        -------
        output : torch.Tensor of shape (n, T, hidden_size)
            The last layer's h_t at every step.
        final
            torch's final state (see the subclass), each (num_layers, n, hidden_size).
        """
        batched = input.dim() == 3
        if not batched:
            input = input.unsqueeze(0)
            if hx is not None:
                hx = tuple(p.unsqueeze(1) for p in hx) if isinstance(hx, (tuple, list)) else hx.unsqueeze(1)
        n, steps = input.shape[:2]
        states = self._initial_state(hx, n, input)
        masks = self.draw_masks(n, steps, input)
        x, finals = input, []
        for k in range(self.num_layers):
            x, final = self._run_layer(k, x, states[k], masks[k])
            finals.append(final)
        final = tuple(torch.stack(parts) for parts in zip(*finals))
        if not batched:
            x, final = x.squeeze(0), tuple(p.squeeze(1) for p in final)
        return x, (final if len(final) == 2 else final[0])

    def kl(self):
        r"""KL-condition penalty of the weights, a scalar in nats up to a constant.

        In the inverted-dropout form of :meth:`~skbayes.nn.layers.DropoutLinear.kl`
        ([Gal2016]_ eq. 3.13 with kept units scaled by 1/(1-p)):
        l^2/(2(1-p)) ||W_ih||^2 + l^2/(2(1-p_r)) ||W_hh||^2 + l^2/2 (||b_ih||^2
        + ||b_hh||^2) summed over layers, with l = 1/prior_scale, p the
        ``dropout_rate`` (inputs of every layer) and p_r the
        ``recurrent_dropout_rate``.
        """
        total = 0.0
        for k in range(self.num_layers):
            w_ih, w_hh, b_ih, b_hh = self._layer_weights(k)
            total = total + dropout_weight_decay(w_ih, self.prior_scale, self.dropout_rate)
            total = total + dropout_weight_decay(w_hh, self.prior_scale, self.recurrent_dropout_rate)
            if b_ih is not None:
                total = total + dropout_weight_decay(b_ih, self.prior_scale) + dropout_weight_decay(b_hh, self.prior_scale)
        return total

    def extra_repr(self):
        return (
            f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}, bias={self.bias}, "
            f"dropout_rate={self.dropout_rate}, recurrent_dropout_rate={self.recurrent_dropout_rate}, "
            f"gates={self.gates!r}, masks={self.masks!r}, prior_scale={self.prior_scale}"
        )


_RNN_PARAMETERS = """
    Parameters
    ----------
    input_size, hidden_size : int
    num_layers : int, default=1
        Stacked layers; layer k > 0 takes layer k-1's h_t as its input.
    bias : bool, default=True
    dropout_rate : float in [0, 1)
        Probability p of dropping a unit of each layer's input x_t (the
        network's input for the first layer, the layer below's h_t for the
        others). The last layer's output is not dropped: the layer after it
        does that.
    recurrent_dropout_rate : float in [0, 1), optional
        Probability of dropping a unit of h_{t-1} in the recurrent product;
        ``dropout_rate`` if None.
    gates : {"tied", "untied"}, default="tied"
        ``"untied"`` (eq. 3.22): every gate has its own masks on x_t and on
        h_{t-1}; ``"tied"`` (eq. 3.23): one mask on x_t and one on h_{t-1}
        shared by all gates, so that all gate products are one matrix
        product (faster; slightly worse in [Gal2016]_, section 4.5).
    masks : {"sequence", "step"}, default="sequence"
        ``"sequence"``: one mask per sequence reused at every step (the
        variational RNN); ``"step"``: fresh masks at every step (naive
        dropout, not a draw of the weights; the baseline).
    prior_scale : float, default=1.0
        Prior standard deviation 1/l of the weights (:meth:`kl`).
    generator : torch.Generator, optional
        Source of the random initial weights (torch's scale,
        U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))).
    device, dtype : optional
        Where and in which precision the parameters live.

    Attributes
    ----------
    weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k} : torch.nn.Parameter
        torch's parameters, gates stacked along the first dimension in torch's
        order.

    Raises
    ------
    ValueError
        On a rate outside [0, 1), an unknown ``gates`` or ``masks``, or
        ``num_layers < 1``.
"""


class VariationalLSTM(_VariationalRNN):
    __doc__ = r"""LSTM with variational (per-sequence) dropout on inputs and recurrent connections.

    torch's LSTM (gates i, f, g, o in that order of ``weight_ih_l{k}``) with
    dropout masks m_x on x_t and m_h on h_{t-1}:

    .. math::

        (i, f, g, o) = (x_t \odot m_x) W_{ih}^T + b_{ih}
                        + (h_{t-1} \odot m_h) W_{hh}^T + b_{hh}, \qquad
        c_t = \sigma(f) \odot c_{t-1} + \sigma(i) \odot \tanh(g), \qquad
        h_t = \sigma(o) \odot \tanh(c_t),

    with one (m_x, m_h) pair for all gates (``gates="tied"``, [Gal2016]_
    eq. 3.23) or one per gate (``"untied"``, eq. 3.22), drawn once per
    sequence (``masks="sequence"``) or at every step (``"step"``). Called as
    torch's ``lstm(input, (h_0, c_0))``, it returns ``output, (h_n, c_n)``.
    """ + _RNN_PARAMETERS

    _n_gates = 4
    _torch_class = nn.LSTM
    _fold_recurrent_bias = True

    @staticmethod
    def _cell(gx, hh, state):
        i, f, g, o = (gx + hh).chunk(4, dim=-1)
        c = torch.sigmoid(f) * state[1] + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c


class VariationalGRU(_VariationalRNN):
    __doc__ = r"""GRU with variational (per-sequence) dropout on inputs and recurrent connections.

    torch's GRU (gates r, z, n in that order of ``weight_ih_l{k}``) with
    dropout masks m_x on x_t and m_h on h_{t-1}, a = (x_t ⊙ m_x) W_ih^T + b_ih
    and u = (h_{t-1} ⊙ m_h) W_hh^T + b_hh split by gate:

    .. math::

        r = \sigma(a_r + u_r), \quad z = \sigma(a_z + u_z), \quad
        n = \tanh(a_n + r \odot u_n), \quad h_t = (1 - z) \odot n + z \odot h_{t-1},

    the last h_{t-1} undropped (it is not multiplied by a weight). Masks are
    tied or untied across the three gates and drawn per sequence or per step
    as for :class:`VariationalLSTM`. Called as torch's ``gru(input, h_0)``, it
    returns ``output, h_n``.
    """ + _RNN_PARAMETERS

    _n_gates = 3
    _torch_class = nn.GRU
    _fold_recurrent_bias = False  # b_hn sits inside r * (.)

    @staticmethod
    def _cell(gx, hh, state):
        a_r, a_z, a_n = gx.chunk(3, dim=-1)
        u_r, u_z, u_n = hh.chunk(3, dim=-1)
        r, z = torch.sigmoid(a_r + u_r), torch.sigmoid(a_z + u_z)
        n = torch.tanh(a_n + r * u_n)
        return ((1.0 - z) * n + z * state[0],)


class EmbeddingDropout(StochasticLayer):
    r"""Word embedding that drops word *types*, the same ones at every step of a sequence.

    Dropout on the one-hot inputs zeroes rows of the embedding matrix
    W_E (V x D), a Bernoulli distribution over its rows, with one mask per
    sequence: every occurrence of a dropped word in a sequence is dropped
    ("the dog and the cat" may become "— dog and — cat", never "— dog and
    the cat"; [Gal2016]_, remark on word embeddings dropout). The embeddings
    are looked up first and then zeroed by type, drawing a Bernoulli only for
    the (sequence, word type) pairs present in the batch rather than V per
    sequence. In mode ``"shared"`` one mask over the V types serves every row,
    so that a row's output does not depend on the other rows. Kept embeddings
    are scaled by 1/(1-p); mode ``"mean"`` is :class:`torch.nn.Embedding`.

    Parameters
    ----------
    num_embeddings, embedding_dim : int
        Vocabulary size V and embedding width D.
    dropout_rate : float in [0, 1)
        Probability p of dropping a word type of a sequence.
    padding_idx : int, optional
        As in :class:`torch.nn.Embedding`: that row starts at zero and gets no
        gradient.
    prior_scale : float, default=1.0
        Prior standard deviation 1/l of the embeddings (:meth:`kl`).
    generator : torch.Generator, optional
        Source of the random initial embeddings (N(0, 1), torch's).
    device, dtype : optional

    Attributes
    ----------
    weight : torch.nn.Parameter of shape (num_embeddings, embedding_dim)

    Raises
    ------
    ValueError
        On a rate outside [0, 1).

    Notes
    -----
    Input: integer tensor of shape ``(n, *)`` whose leading index is the row (a
    sequence); output ``(n, *, embedding_dim)``.
    """

    def __init__(
        self, num_embeddings, embedding_dim, dropout_rate, *, padding_idx=None, prior_scale=1.0, generator=None,
        device=None, dtype=None,
    ):
        super().__init__()
        self.num_embeddings = int(num_embeddings)
        self.embedding_dim = int(embedding_dim)
        self.dropout_rate = check_dropout_rate("dropout_rate", dropout_rate)
        if padding_idx is not None and padding_idx < 0:
            padding_idx += self.num_embeddings
        self.padding_idx = padding_idx
        self.prior_scale = float(prior_scale)
        like = torch.empty((), device=device, dtype=dtype)
        weight = standard_normal((self.num_embeddings, self.embedding_dim), like, generator)
        if padding_idx is not None:
            weight[padding_idx] = 0.0
        self.weight = nn.Parameter(weight)

    @classmethod
    def from_module(cls, embedding, *, dropout_rate, prior_scale=1.0):
        """A layer with the weights (and ``padding_idx``) of a :class:`torch.nn.Embedding`.

        Raises
        ------
        TypeError
            If ``embedding`` is not a :class:`torch.nn.Embedding`.
        ValueError
            If it uses ``max_norm``, ``scale_grad_by_freq`` or ``sparse``.
        """
        if not isinstance(embedding, nn.Embedding):
            raise TypeError(f"from_module expects a torch.nn.Embedding, got {type(embedding).__name__}.")
        unsupported = [
            name for name, value in (("max_norm", embedding.max_norm is not None),
                                     ("scale_grad_by_freq", embedding.scale_grad_by_freq),
                                     ("sparse", embedding.sparse)) if value
        ]
        if unsupported:
            raise ValueError(f"EmbeddingDropout does not support the embedding's {', '.join(unsupported)}.")
        layer = cls(
            embedding.num_embeddings, embedding.embedding_dim, dropout_rate, padding_idx=embedding.padding_idx,
            prior_scale=prior_scale, device=embedding.weight.device, dtype=embedding.weight.dtype,
            generator=torch.Generator(),  # the initial values are overwritten: leave the global generator alone
        )
        with torch.no_grad():
            layer.weight.copy_(embedding.weight)
        return layer

    def type_mask(self, input):
        """The inverted-dropout factor of every token of ``input`` for one pass, by word type.

        Parameters
        ----------
        input : torch.Tensor of integers, shape ``(n, *)``

        Returns
        -------
        mask : torch.Tensor of the shape of ``input``, or None
            0 or 1/(1-p), equal for equal words of a row (of every row in
            mode ``"shared"``); None in mode ``"mean"`` or with a rate of 0.
        """
        if not self.sampling or self.dropout_rate == 0:
            return None
        keep = 1.0 - self.dropout_rate
        generator = self.noise_generator
        if self.noise_mode == "shared":
            kept = standard_uniform((self.num_embeddings,), self.weight, generator)[input] < keep
        else:
            n = input.shape[0] if input.dim() else 1
            offsets = torch.arange(n, device=input.device).view(-1, *([1] * max(input.dim() - 1, 0)))
            pairs = (input + offsets * self.num_embeddings).reshape(input.shape)
            unique, inverse = torch.unique(pairs, return_inverse=True)
            kept = (standard_uniform(unique.shape, self.weight, generator) < keep)[inverse]
        return kept.to(self.weight.dtype) / keep

    def forward(self, input):
        """Embeddings of ``input`` ``(n, *)`` -> ``(n, *, embedding_dim)``, word types dropped as set by the noise mode."""
        out = F.embedding(input, self.weight, self.padding_idx)
        mask = self.type_mask(input)
        return out if mask is None else out * mask.unsqueeze(-1)

    def kl(self):
        """KL-condition penalty l^2/(2(1-p)) ||W_E||^2, l = 1/prior_scale (inverted-dropout form of
        :meth:`~skbayes.nn.layers.DropoutLinear.kl`), a scalar in nats up to a constant."""
        return dropout_weight_decay(self.weight, self.prior_scale, self.dropout_rate)

    def extra_repr(self):
        return (
            f"{self.num_embeddings}, {self.embedding_dim}, dropout_rate={self.dropout_rate}, "
            f"padding_idx={self.padding_idx}, prior_scale={self.prior_scale}"
        )
