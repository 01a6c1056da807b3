"""LSTM with a projected, clipped state: the recurrent layer of ELMo's biLM."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from contextvec.encoders.precision import Int8Role, Pack, PackedFloatWeights

# Gate blocks of the packed weights, in bilm-tf (TensorFlow LSTMCell) order.
GATE_I, GATE_J, GATE_F, GATE_O = range(4)
# 2 as a tensor for the step's element-wise work: torch makes a tensor of a Python number on
# every call, which at batch 1 costs about as much as the operation it joins.
_TWO = torch.tensor(2.0)


def _clip(x: torch.Tensor, value: float | None) -> torch.Tensor:
    return x.clamp(-value, value) if value else x


def _tanh(x: torch.Tensor) -> torch.Tensor:
    """``tanh(x)``; without gradients as ``2 sigmoid(2x) - 1`` (equal up to float32 rounding):
    torch's CPU tanh is slower than that on large inputs, and an LSTM step takes two. (Whatever
    the size, so that a sentence's vectors do not depend on its batch.)"""
    if torch.is_grad_enabled():
        return torch.tanh(x)
    return torch.sigmoid(x * 2).mul_(2).sub_(1)


def _bmm(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None,
         add: torch.Tensor | None = None) -> torch.Tensor:
    """``x (directions, rows, in) @ w (directions, in, out)``, plus ``bias (directions, out)`` or
    ``add (directions, rows, out)``: one batched product for both directions."""
    if add is None and bias is None:
        return torch.bmm(x, w)
    return torch.baddbmm(bias.unsqueeze(1) if add is None else add, x, w)


class ProjectedLSTMLayer(nn.Module):
    """One layer of the forward and of the backward LSTM, with separate weights, run together.

    Direction 0 is the forward LM and direction 1 the backward LM; the backward direction
    receives its sequences already reversed, so both run the same left-to-right recurrence and
    one batched matmul per time step serves both; where each direction has its own products
    (oneDNN's packed or lower-precision weights, in inference), one direction's whole sequence
    runs before the other's, to keep its matrices in cache between steps. Per direction::

        i, j, f, o = split(W_in x_t + W_state h_{t-1} + b)          # bilm-tf gate order
        c_t = clip(sigmoid(f + forget_bias) * c_{t-1} + sigmoid(i) * tanh(j), cell_clip)
        h_t = clip(W_proj (sigmoid(o) * tanh(c_t)), proj_clip)

    The input projection of all time steps is one matmul; only the state recurrence loops.
    Shapes: ``input_weight`` (2, 4*cell, input), ``state_weight`` (2, 4*cell, proj),
    ``bias`` (2, 4*cell), ``projection`` (2, proj, cell).

    ``projection=False`` gives a plain LSTM (``h_t = sigmoid(o) * tanh(c_t)``, Kim et al.'s
    layer; ``projection_dim`` must equal ``cell_dim``). Without clipping, such a layer runs on
    PyTorch's fused LSTM kernel whenever every sequence spans the whole batch (LM training
    windows), much faster on CPU than the step loop.

    ``state_weight_dropout`` p > 0 drops entries of the recurrent weights ``state_weight`` in
    training, one mask per call shared by every time step (DropConnect, the weight drop of
    Merity et al.'s AWD-LSTM): it regularizes the recurrence yet keeps the fused kernel.
    """

    int8_role = Int8Role.RECURRENT
    """``precision="int8"`` runs this layer's matrices on the int8 path's kernels for
    recurrences (:func:`contextvec.encoders.precision.apply_precision`): a step multiplies a
    few rows by each matrix, which some CPUs' int8 kernels do slower than fp32."""

    gather_at_once = 4 << 20
    """Given ``distinct`` rows, input projections of up to this many bytes (for every running
    step) are copied to their steps at once; larger ones step by step, while a step's rows stay
    in cache for its product."""

    def __init__(
        self,
        input_dim: int,
        cell_dim: int,
        projection_dim: int,
        cell_clip: float | None = None,
        proj_clip: float | None = None,
        forget_bias: float = 1.0,
        n_directions: int = 2,
        projection: bool = True,
    ) -> None:
        super().__init__()
        if not projection and projection_dim != cell_dim:
            raise ValueError("an LSTM without projection has projection_dim == cell_dim")
        self.cell_dim = cell_dim
        self.projection_dim = projection_dim
        self.cell_clip = cell_clip
        self.proj_clip = proj_clip
        self.forget_bias = forget_bias
        self.state_weight_dropout = 0.0
        d, c = n_directions, cell_dim
        self.input_weight = nn.Parameter(torch.empty(d, 4 * c, input_dim))
        self.state_weight = nn.Parameter(torch.empty(d, 4 * c, projection_dim))
        self.bias = nn.Parameter(torch.zeros(d, 4 * c))
        self.projection = nn.Parameter(torch.empty(d, projection_dim, c)) if projection else None
        self.reset_parameters()
        # Shape donor for the fused kernel; its own parameters are never used or saved, so they
        # have no storage (as in a model built on the meta device).
        self._fused: list[nn.LSTM] = [nn.LSTM(input_dim, c, device="meta")] if not projection else []
        # Lower-precision weights per direction (see pack_weights); None runs the float ones.
        self.packed: nn.ModuleDict | None = None
        # oneDNN layouts of the float weights, for inference (remade when a weight changes).
        self._onednn = PackedFloatWeights()

    def pack_weights(self, pack: Pack) -> None:
        """Replace the float matrices by ``pack(matrix)`` per direction, for lower-precision
        inference (:func:`contextvec.encoders.precision.apply_precision`); the bias stays float."""
        names = ("input_weight", "state_weight") + (("projection",) if self.projection is not None else ())
        self.packed = nn.ModuleDict(
            {name: nn.ModuleList(pack(w) for w in getattr(self, name)) for name in names}
        )
        for name in names:
            setattr(self, name, None)
        self._fused = []

    def shares_repeated_inputs(self) -> bool:
        """Whether a row's input projections cost enough to project repeated inputs once (the
        ``distinct`` rows of :meth:`forward`): a matrix of ``PackedFloatWeights.min_size``
        entries or more per direction (ELMo's original dimensions). A small model's row is a few
        microseconds of work, less than gathering costs, and its products of fewer rows meet
        more row counts, each a kernel of its own for oneDNN's bf16 and int8 paths to make."""
        if self.packed is not None:
            weight = self.packed["input_weight"][0]
            return weight.in_features * weight.out_features >= PackedFloatWeights.min_size
        return self.input_weight[0].numel() >= PackedFloatWeights.min_size

    def _per_direction(self, weight: torch.Tensor | None, rows: int) -> bool:
        """Whether products with ``weight`` run direction by direction: by the packed weights
        after :meth:`pack_weights`, or by oneDNN's layout of the float weights where that pays
        (inference); otherwise one ``bmm`` serves both directions."""
        return self.packed is not None or PackedFloatWeights.usable(weight, rows)

    def _matmul(
        self, name: str, x: torch.Tensor, weight: torch.Tensor | None, per_direction: bool,
        bias: torch.Tensor | None = None, add: torch.Tensor | None = None, first: int = 0,
        float_output: bool = True,
    ) -> torch.Tensor:
        """``x (directions, rows, in)`` times each direction's ``weight (directions, out, in)``
        transposed (``name``'s packed weights after :meth:`pack_weights`), plus ``bias
        (directions, out)`` or ``add (directions, rows, out)``; ``per_direction`` from
        :meth:`_per_direction`. Per direction, ``x`` holds the layer's directions ``first``,
        ``first + 1``, ... (``bmm`` always takes them all). ``float_output=False`` lets bf16
        weights hand over their bf16 products (the same values, half the bytes to read back)."""
        n = x.shape[0]
        if not per_direction:
            return _bmm(x, self._onednn.transposed(name, weight), bias, add)
        biases = [None] * n if bias is None else bias
        adds = [None] * n if add is None else add
        if self.packed is not None and n == 1:
            # One direction's (1, rows, in) as it is: packed weights take any leading dimensions,
            # and add ``add`` in their own pass (bf16: inside the product).
            bias = None if bias is None else bias[0]
            return self.packed[name][first](x, bias, float_output=float_output, add=add)
        if self.packed is not None:
            parts = [self.packed[name][first + d](x[d], biases[d], float_output=float_output, add=adds[d])
                     for d in range(n)]
        else:
            # oneDNN adds ``add`` to the product as it writes it: one pass over the gates.
            parts = [self._onednn.packed_linear(f"{name}.{first + d}", x[d], weight[first + d], biases[d],
                                                add=adds[d])
                     for d in range(n)]
        # One direction's product as a view: stacking would copy it.
        return parts[0].unsqueeze(0) if n == 1 else torch.stack(parts)

    def _step_matmul(
        self, name: str, weight: torch.Tensor | None, per_direction: bool, directions: slice,
    ) -> Callable[..., torch.Tensor]:
        """``product(x, add=None)``: :meth:`_matmul` of ``name`` for every step of one call over
        the layer's ``directions``, with what does not change between steps (the route, the
        weights' layout for ``bmm``) settled once: a batch-1 step of the bundled model is a few
        microseconds of work per op."""
        if per_direction:
            first = directions.start
            if self.packed is not None and directions.stop - first == 1:
                return self.packed[name][first].step()
            return lambda x, add=None: self._matmul(name, x, weight, True, add=add, first=first)
        w = self._onednn.transposed(name, weight)[directions]
        return lambda x, add=None: _bmm(x, w, add=add)

    def _cell_inference(self, gates: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The cell and the unprojected output from ``gates`` (overwritten), in fewer ops than
        the differentiable form (a batch-1 step is a few thousand entries, so each op's call
        costs more than its work): one sigmoid over all four gates, with ``j`` doubled first
        because ``tanh(j) = 2 sigmoid(2j) - 1``, and ``i tanh(j) = 2 i s - i``."""
        c_dim = self.cell_dim
        gates[..., GATE_J * c_dim : (GATE_J + 1) * c_dim].mul_(_TWO)
        i, s, f, o = gates.sigmoid_().chunk(4, dim=-1)
        c = torch.addcmul(torch.addcmul(i.neg(), i, s, value=2), f, c)
        if self.cell_clip:
            c.clamp_(-self.cell_clip, self.cell_clip)
        return c, torch.addcmul(o.neg(), o, torch.mul(c, _TWO).sigmoid_(), value=2)

    def reset_parameters(self) -> None:
        for w in (self.input_weight, self.state_weight, self.projection):
            if w is not None:
                nn.init.uniform_(w, -(w.shape[-1] ** -0.5), w.shape[-1] ** -0.5)
        nn.init.zeros_(self.bias)

    def _run_fused(
        self, inputs: torch.Tensor, state_weight: torch.Tensor, bias: torch.Tensor,
        h: torch.Tensor, c: torch.Tensor,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        def torch_order(w: torch.Tensor) -> torch.Tensor:
            # bilm-tf packs the gates (i, j, f, o); PyTorch (i, f, g, o), with g == j.
            blocks = w.unflatten(1, (4, self.cell_dim))
            return blocks[:, [GATE_I, GATE_F, GATE_J, GATE_O]].flatten(1, 2)

        w_in, w_state, b = torch_order(self.input_weight), torch_order(state_weight), torch_order(bias)
        # The kernel wants one dtype. On CPU it runs in float32 even under bf16 autocast: oneDNN's
        # bf16 LSTM backward is many times slower than its float32 one.
        cpu = inputs.device.type == "cpu"
        dtype = torch.float32 if cpu else inputs.dtype
        inputs, h, c = inputs.to(dtype), h.to(dtype), c.to(dtype)
        outputs, finals_h, finals_c = [], [], []
        autocast = not cpu and torch.is_autocast_enabled(inputs.device.type)
        with torch.autocast(inputs.device.type, enabled=autocast):
            for d in range(inputs.shape[0]):
                weights = {"weight_ih_l0": w_in[d], "weight_hh_l0": w_state[d], "bias_ih_l0": b[d],
                           "bias_hh_l0": b.new_zeros(b.shape[1])}
                out, (h_d, c_d) = functional_call(
                    self._fused[0], weights,
                    (inputs[d].transpose(0, 1), (h[d : d + 1], c[d : d + 1])),
                )
                outputs.append(out.transpose(0, 1))
                finals_h.append(h_d[0])
                finals_c.append(c_d[0])
        return torch.stack(outputs), (torch.stack(finals_h), torch.stack(finals_c))

    def forward(
        self,
        inputs: torch.Tensor,
        lengths: torch.Tensor,
        state: tuple[torch.Tensor, torch.Tensor] | None = None,
        distinct: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Run the recurrence.

        Args:
            inputs: ``(directions, batch, timesteps, input_dim)`` float.
            lengths: ``(batch,)`` long, sorted in decreasing order; steps past a sequence's length
                are not computed and come out 0.
            state: the initial ``(h, c)``: ``h`` ``(directions, batch, projection_dim)``, ``c``
                ``(directions, batch, cell_dim)``; zeros if omitted.
            distinct: ``(rows, index)``: rows ``(n, input_dim)`` and ``index`` ``(directions,
                batch, timesteps)`` long with ``inputs[d, b, t] == rows[index[d, b, t]]`` at every
                step within a sequence's length (a batch's repeated tokens, in the first layer):
                the input projections then run once per row of ``rows``, and are copied to the
                steps that hold it. The outputs are the same.

        Returns:
            The outputs ``(directions, batch, timesteps, projection_dim)`` and the state ``(h, c)``
            after each sequence's last step, shaped as ``state``.
        """
        d, batch, steps, _ = inputs.shape
        c_dim = self.cell_dim
        bias = self.bias
        if self.forget_bias:
            bias = bias.clone()
            bias[:, GATE_F * c_dim : (GATE_F + 1) * c_dim] += self.forget_bias
        if state is None:
            h = inputs.new_zeros(d, batch, self.projection_dim)
            c = inputs.new_zeros(d, batch, c_dim)
        else:
            h, c = state
        state_weight = self.state_weight
        if self.packed is None:
            state_weight = F.dropout(state_weight, self.state_weight_dropout, self.training)
        fused = (self._fused and not self.cell_clip and not self.proj_clip
                 and bool((lengths == steps).all()))
        if fused:
            return self._run_fused(inputs, state_weight, bias, h, c)
        # Input projections of every running (step, sequence) at once, time-major: step t's
        # sequences are the first active[t] (lengths sort longest first), so they are one block
        # of rows, after the blocks of the steps before it; padding positions are left out of
        # the matmul.
        running = lengths.view(1, -1) > torch.arange(steps, device=lengths.device).view(-1, 1)
        active = running.sum(1).tolist()
        real = None if sum(active) == steps * batch else running.flatten().nonzero().squeeze(1)

        def running_pairs(x: torch.Tensor) -> torch.Tensor:
            """``x (d, batch, steps, ...)`` as ``(d, running pairs, ...)``, time-major."""
            x = x.transpose(1, 2).flatten(1, 2)
            return x if real is None else x[:, real]

        if distinct is None:
            time_major, where = running_pairs(inputs), None
        else:
            time_major, where = distinct[0].unsqueeze(0).expand(d, -1, -1), running_pairs(distinct[1])
        if self._per_direction(self.input_weight, time_major.shape[1]):
            # Each direction's input projections kept apart, not stacked: a stack would copy the
            # layer's largest activation (tokens x 4 cell per direction) once more.
            x_proj = [self._matmul("input_weight", time_major[i : i + 1], self.input_weight, True,
                                   bias[i : i + 1], first=i, float_output=False) for i in range(d)]
        else:
            x_proj = self._matmul("input_weight", time_major, self.input_weight, False, bias)
        if where is not None and where.numel() * 4 * c_dim * x_proj[0].element_size() <= self.gather_at_once:
            # A small batch's rows gathered at once, one operation per direction: a step's
            # gathering is an operation of its own, which a small model's step feels.
            if isinstance(x_proj, list):
                x_proj = [p[0].index_select(0, where[i]).unsqueeze(0) for i, p in enumerate(x_proj)]
            else:
                x_proj = torch.stack([x_proj[i].index_select(0, where[i]) for i in range(d)])
            where = None

        final_h, final_c = torch.empty_like(h), torch.empty_like(c)
        outputs = inputs.new_zeros(d, steps, batch, self.projection_dim)
        projected = self.projection is not None or (self.packed is not None and "projection" in self.packed)
        # Decided once: a step's rows only shrink from the batch size.
        state_per_direction = self._per_direction(state_weight, batch)
        project_per_direction = projected and self._per_direction(self.projection, batch)
        # Where each direction has its own products, the whole sequence of one direction runs
        # before the other's: a step then re-reads the matrices the step before it read, which
        # partly stay in the last-level cache (the original ELMo's matrices of one direction are
        # about the size of a server CPU's L3), instead of alternating with the other
        # direction's every step.
        groups = [slice(i, i + 1) for i in range(d)] if state_per_direction else [slice(0, d)]
        for g in groups:
            state_product = self._step_matmul("state_weight", state_weight, state_per_direction, g)
            project = (self._step_matmul("projection", self.projection, project_per_direction, g)
                       if projected else None)
            if isinstance(x_proj, list):
                x_g = x_proj[g.start] if g.stop - g.start == 1 else torch.cat(x_proj[g])
            else:
                x_g = x_proj[g]
            self._recur(x_g, (h[g], c[g]), active, state_product, project,
                        outputs[g], (final_h[g], final_c[g]), zero_state=state is None,
                        where=None if where is None else where[g])
        return outputs.transpose(1, 2), (final_h, final_c)

    def _recur(
        self, x_proj: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor], active: list[int],
        state_product: Callable[..., torch.Tensor],
        project: Callable[..., torch.Tensor] | None, outputs: torch.Tensor,
        final: tuple[torch.Tensor, torch.Tensor], zero_state: bool = False,
        where: torch.Tensor | None = None,
    ) -> None:
        """The step loop over the directions of the initial ``state`` ``(h, c)``: writes step t's
        output into ``outputs[:, t]`` and each sequence's state after its last step into
        ``final`` ``(final_h, final_c)``. ``x_proj`` holds the input projections of the running
        (step, sequence) pairs, time-major: step t's ``active[t]`` rows follow those of the steps
        before it; with ``where`` ``(directions, running pairs)``, the projections of distinct
        inputs, and ``where`` gives each pair's row among them. With ``zero_state`` (the initial
        state is zeros) the first step skips the state's product: a zero state adds exactly
        nothing to its gates."""
        (h, c), (final_h, final_c) = state, final
        differentiable = torch.is_grad_enabled()
        batch = k_prev = h.shape[1]
        # Each step's input projections and (in inference) output slot as views made in one
        # call each: at batch 1 a step's tensor operations cost about what their Python costs.
        # (Autograd lets no one write into a view of ``unbind``.)
        active = active[: len(active) - active.count(0)]  # lengths sort longest first
        # With ``where`` each step gathers its rows as it runs: they stay in cache for its
        # product, where gathering every step's at once would write them all out and read them
        # back. ``index_select`` copies whole rows (tensor indexing, element by element, is
        # several times slower).
        if where is None:
            inputs, flat = x_proj.split(active, dim=1), None
        else:
            d, n = x_proj.shape[:2]
            flat = x_proj.flatten(0, 1)
            inputs = (where + n * torch.arange(d, device=where.device).unsqueeze(1)).split(active, dim=1)
        slots = None if differentiable else outputs.unbind(1)
        for t, k in enumerate(active):
            if k < k_prev:
                final_h[:, k:k_prev], final_c[:, k:k_prev] = h[:, k:], c[:, k:]
                h, c = h[:, :k], c[:, :k]
                k_prev = k
            x_t = (inputs[t] if flat is None
                   else flat.index_select(0, inputs[t].flatten()).unflatten(0, (-1, k)))
            if t == 0 and zero_state:
                # In the dtype the product would give: float32 from packed weights (a copy of
                # bf16 projections); float32 projections are used in place, never read again.
                gates = x_t.float() if self.packed is not None else x_t
            else:
                gates = state_product(h, x_t)
            if differentiable:
                i, j, f, o = gates.chunk(4, dim=-1)
                c = _clip(torch.sigmoid(f) * c + torch.sigmoid(i) * _tanh(j), self.cell_clip)
                h = torch.sigmoid(o) * _tanh(c)
                h = _clip(project(h) if project is not None else h, self.proj_clip)
            else:
                c, h = self._cell_inference(gates, c)
                h = project(h) if project is not None else h
                if self.proj_clip:
                    h.clamp_(-self.proj_clip, self.proj_clip)  # a fresh tensor: no one else holds it
            if slots is None:
                outputs[:, t, :k] = h
            else:
                (slots[t] if k == batch else slots[t][:, :k]).copy_(h)
        if k_prev:
            final_h[:, :k_prev], final_c[:, :k_prev] = h, c
