"""LSTM with a projected, clipped state: the recurrent layer of ELMo's biLM.

The layer's own code is the reference: differentiable, one step at a time, shapes inline. In
inference, and once ``pack_weights`` has given it bf16 or int8 matrices, the same recurrence
runs on :mod:`contextvec.encoders.kernels.lstm_inference` (the CPU's kernels, fewer operations
per step); a plain LSTM's training windows run on PyTorch's fused kernel
(:mod:`contextvec.encoders.kernels.lstm_fused`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from contextvec.encoders.kernels import lstm_inference
from contextvec.encoders.kernels.lstm_fused import run_fused
from contextvec.encoders.precision import Int8Role, Pack, PackedFloatWeights

# The gates' blocks of the stacked weight matrices, in bilm-tf (TensorFlow LSTMCell) order.
GATE_I, GATE_J, GATE_F, GATE_O = range(4)


class ProjectedLSTMLayer(nn.Module):
    """One layer of the forward and of the backward LSTM, with separate weights, run together.

    Direction 0 is the forward LM and direction 1 the backward LM; the backward direction
    receives its sequences already reversed, so both run the same left-to-right recurrence and
    one batched matmul per time step serves both. Per direction::

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
    """``precision="int8"`` runs this layer's matrices on the int8 path's kernels for recurrences."""

    gather_at_once = 4 << 20
    """In inference, given ``distinct`` rows, input projections of up to this many bytes are
    copied to their steps at once; larger ones step by step, while a step's rows stay in cache."""

    def __init__(
        self, input_dim: int, cell_dim: int, projection_dim: int, cell_clip: float | None = None,
        proj_clip: float | None = None, forget_bias: float = 1.0, n_directions: int = 2,
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

    def reset_parameters(self) -> None:
        for w in (self.input_weight, self.state_weight, self.projection):
            if w is not None:
                nn.init.uniform_(w, -(w.shape[-1] ** -0.5), w.shape[-1] ** -0.5)
        nn.init.zeros_(self.bias)

    def pack_weights(self, pack: Pack) -> None:
        """Replace the float matrices by ``pack(matrix)`` per direction, for lower-precision
        inference (:func:`contextvec.encoders.precision.apply_precision`); the bias stays float."""
        matrices = {"input_weight": self.input_weight, "state_weight": self.state_weight}
        if self.projection is not None:
            matrices["projection"] = self.projection
        self.packed = nn.ModuleDict({name: nn.ModuleList(map(pack, m)) for name, m in matrices.items()})
        for name in matrices:
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

    def cell(self, gates: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One step's cell ``(d, k, cell)`` and unprojected output ``(d, k, cell)`` from its
        ``gates (d, k, 4*cell)`` and the cell before it ``c (d, k, cell)``."""
        i, j, f, o = gates.chunk(4, dim=-1)
        c = self.clip(torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(j), self.cell_clip)
        return c, torch.sigmoid(o) * torch.tanh(c)

    def clip_projected(self, h: torch.Tensor) -> torch.Tensor:
        return self.clip(h, self.proj_clip)

    @staticmethod
    def clip(x: torch.Tensor, value: float | None) -> torch.Tensor:
        return x.clamp(-value, value) if value else x

    def _matmul(self, name: str, x: torch.Tensor, weight: torch.Tensor | None, by_direction: bool,
                bias: torch.Tensor | None = None, add: torch.Tensor | None = None, first: int = 0,
                float_output: bool = True) -> torch.Tensor:
        """The inference path's products with ``name``'s matrices (:func:`lstm_inference.matmul`)."""
        return lstm_inference.matmul(self, name, x, weight, by_direction, bias, add, first, float_output)

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
        if (self._fused and not self.cell_clip and not self.proj_clip
                and bool((lengths == steps).all())):
            return run_fused(self._fused[0], [GATE_I, GATE_F, GATE_J, GATE_O], self.input_weight,
                             state_weight, bias, inputs, h, c)
        if self.packed is None and torch.is_grad_enabled():
            return self._steps(inputs, lengths, h, c, bias, state_weight, state is None, distinct)
        return lstm_inference.run(self, inputs, lengths, h, c, bias, state_weight, state is None, distinct)

    def _steps(
        self, inputs: torch.Tensor, lengths: torch.Tensor, h: torch.Tensor, c: torch.Tensor,
        bias: torch.Tensor, state_weight: torch.Tensor, zero_state: bool,
        distinct: tuple[torch.Tensor, torch.Tensor] | None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """The reference recurrence: :meth:`forward`'s arguments and results, ``bias`` with the
        forget bias added, ``zero_state`` where the initial state is zeros (the first step then
        skips the state's product, which adds exactly nothing)."""
        d, batch, steps, _ = inputs.shape
        # Lengths sort longest first: step t runs the first active[t] sequences. The input
        # projections of every running (step, sequence) pair are one matmul, time-major (step
        # t's rows follow those of the steps before it), padding left out.
        running = lengths.view(1, -1) > torch.arange(steps, device=lengths.device).view(-1, 1)
        active = [k for k in running.sum(1).tolist() if k]
        pairs = running.flatten().nonzero().squeeze(1)                      # (pairs,)

        def time_major(x: torch.Tensor) -> torch.Tensor:                    # (d, batch, steps, ...)
            return x.transpose(1, 2).flatten(1, 2)[:, pairs]                # (d, pairs, ...)

        w_in = self.input_weight.transpose(1, 2)                            # (d, in, 4 cell)
        if distinct is None:
            x_proj = torch.baddbmm(bias.unsqueeze(1), time_major(inputs), w_in)  # (d, pairs, 4 cell)
        else:
            rows, index = distinct                                          # (n, in), (d, batch, steps)
            projected = torch.baddbmm(bias.unsqueeze(1), rows.unsqueeze(0).expand(d, -1, -1), w_in)
            where = time_major(index)
            x_proj = torch.stack([projected[i].index_select(0, where[i]) for i in range(d)])
        w_state = state_weight.transpose(1, 2)                              # (d, proj, 4 cell)
        w_proj = None if self.projection is None else self.projection.transpose(1, 2)  # (d, cell, proj)

        outputs = inputs.new_zeros(d, steps, batch, self.projection_dim)
        final_h, final_c = torch.empty_like(h), torch.empty_like(c)
        k_prev = batch
        for t, (k, x_t) in enumerate(zip(active, x_proj.split(active, dim=1), strict=True)):
            if k < k_prev:  # sequences k.. ended at the step before
                final_h[:, k:k_prev], final_c[:, k:k_prev] = h[:, k:], c[:, k:]
                h, c = h[:, :k], c[:, :k]
                k_prev = k
            gates = x_t if t == 0 and zero_state else torch.baddbmm(x_t, h, w_state)  # (d, k, 4 cell)
            c, h = self.cell(gates, c)
            h = self.clip_projected(h if w_proj is None else torch.bmm(h, w_proj))  # (d, k, proj)
            outputs[:, t, :k] = h
        if k_prev:
            final_h[:, :k_prev], final_c[:, :k_prev] = h, c
        return outputs.transpose(1, 2), (final_h, final_c)
