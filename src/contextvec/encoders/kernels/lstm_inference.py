"""The inference recurrence of :class:`contextvec.encoders.bilm.lstm.ProjectedLSTMLayer`: the
reference's products and gates, in fewer operations and on the CPU's kernels.

Each direction's products run on their own (oneDNN's packed float32 weights where they pay, or
the layer's bf16 and int8 weights after ``pack_weights``), or both directions share one ``bmm``;
where each direction has its own, one direction's whole sequence runs before the other's, so a
step re-reads the matrices the step before it read, which partly stay in the last-level cache.
A batch's repeated inputs (``distinct``) are projected once and copied to their steps, at once
for a small batch, step by step for a large one (a step's rows then stay in cache for its
product). The cell's functions run in place in one sigmoid over all four gates.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from contextvec.encoders.kernels.packed_float import PackedFloatWeights

# 2 as a tensor for the step's element-wise work: torch makes a tensor of a Python number on
# every call, which at batch 1 costs about as much as the operation it joins.
_TWO = torch.tensor(2.0)


def bmm(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None,
        add: torch.Tensor | None = None) -> torch.Tensor:
    """``x (directions, rows, in) @ w (directions, in, out)``, plus ``bias (directions, out)`` or
    ``add (directions, rows, out)``: one batched product for both directions."""
    if add is None and bias is None:
        return torch.bmm(x, w)
    return torch.baddbmm(bias.unsqueeze(1) if add is None else add, x, w)


def per_direction(layer: nn.Module, weight: torch.Tensor | None, rows: int) -> bool:
    """Whether products with ``weight`` run direction by direction: by the packed weights, or by
    oneDNN's layout of the float weights where that pays; otherwise one ``bmm`` serves both."""
    return layer.packed is not None or PackedFloatWeights.usable(weight, rows)


def matmul(
    layer: nn.Module, name: str, x: torch.Tensor, weight: torch.Tensor | None, by_direction: bool,
    bias: torch.Tensor | None = None, add: torch.Tensor | None = None, first: int = 0,
    float_output: bool = True,
) -> torch.Tensor:
    """``x (directions, rows, in)`` times each direction's ``weight (directions, out, in)``
    transposed (``name``'s packed weights after ``pack_weights``), plus ``bias (directions, out)``
    or ``add (directions, rows, out)``. Per direction, ``x`` holds the layer's directions
    ``first``, ``first + 1``, ... (``bmm`` always takes them all). ``float_output=False`` lets bf16
    weights hand over their bf16 products (the same values, half the bytes to read back)."""
    n = x.shape[0]
    if not by_direction:
        return bmm(x, layer._onednn.transposed(name, weight), bias, add)
    biases = [None] * n if bias is None else bias
    adds = [None] * n if add is None else add
    if layer.packed is not None and n == 1:
        # One direction's (1, rows, in) as it is: packed weights take any leading dimensions,
        # and add ``add`` in their own pass (bf16: inside the product).
        bias = None if bias is None else bias[0]
        return layer.packed[name][first](x, bias, float_output=float_output, add=add)
    if layer.packed is not None:
        parts = [layer.packed[name][first + d](x[d], biases[d], float_output=float_output, add=adds[d])
                 for d in range(n)]
    else:
        # oneDNN adds ``add`` to the product as it writes it: one pass over the gates.
        parts = [layer._onednn.packed_linear(f"{name}.{first + d}", x[d], weight[first + d], biases[d],
                                             add=adds[d])
                 for d in range(n)]
    # One direction's product as a view: stacking would copy it.
    return parts[0].unsqueeze(0) if n == 1 else torch.stack(parts)


def step_matmul(
    layer: nn.Module, name: str, weight: torch.Tensor | None, by_direction: bool, directions: slice,
) -> Callable[..., torch.Tensor]:
    """``product(x, add=None)``: :func:`matmul` of ``name`` for every step of one call over the
    layer's ``directions``, with what does not change between steps settled once: a batch-1
    step of the bundled model is a few microseconds of work per op."""
    if by_direction:
        first = directions.start
        if layer.packed is not None and directions.stop - first == 1:
            return layer.packed[name][first].step()
        return lambda x, add=None: layer._matmul(name, x, weight, True, add=add, first=first)
    w = layer._onednn.transposed(name, weight)[directions]
    return lambda x, add=None: bmm(x, w, add=add)


def cell_inference(gates: torch.Tensor, c: torch.Tensor,
                   cell_clip: float | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The cell and the unprojected output from ``gates`` (overwritten), in fewer ops than the
    reference (a batch-1 step is a few thousand entries, so each op's call costs more than its
    work): one sigmoid over all four gates, with ``j`` doubled first because
    ``tanh(j) = 2 sigmoid(2j) - 1``, and ``i tanh(j) = 2 i s - i``."""
    gates.chunk(4, dim=-1)[1].mul_(_TWO)
    i, s, f, o = gates.sigmoid_().chunk(4, dim=-1)
    c = torch.addcmul(torch.addcmul(i.neg(), i, s, value=2), f, c)
    if cell_clip:
        c.clamp_(-cell_clip, cell_clip)
    return c, torch.addcmul(o.neg(), o, torch.mul(c, _TWO).sigmoid_(), value=2)


def run(
    layer: nn.Module, inputs: torch.Tensor, lengths: torch.Tensor, h: torch.Tensor, c: torch.Tensor,
    bias: torch.Tensor, state_weight: torch.Tensor | None, zero_state: bool,
    distinct: tuple[torch.Tensor, torch.Tensor] | None,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """The layer's ``forward`` in inference (and for packed weights): the same arguments and
    results, ``bias`` with the forget bias added, ``zero_state`` where the initial state is zeros."""
    d, batch, steps, _ = inputs.shape
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
    input_weight = layer.input_weight
    if per_direction(layer, input_weight, time_major.shape[1]):
        # Each direction's input projections kept apart (a list), not stacked: a stack would copy
        # the layer's largest activation (tokens x 4 cell per direction) once more.
        x_proj = [layer._matmul("input_weight", time_major[i : i + 1], input_weight, True,
                                bias[i : i + 1], first=i, float_output=False) for i in range(d)]
        both = None
    else:  # one bmm: ``both`` serves a group of all directions without a copy
        both = layer._matmul("input_weight", time_major, input_weight, False, bias)
        x_proj = list(both.split(1))
    row_bytes = 4 * layer.cell_dim * x_proj[0].element_size()
    if where is not None and where.numel() * row_bytes <= layer.gather_at_once:
        # A small batch's rows gathered at once, one operation per direction: a step's
        # gathering is an operation of its own, which a small model's step feels.
        x_proj = [p[0].index_select(0, where[i]).unsqueeze(0) for i, p in enumerate(x_proj)]
        where = both = None

    final_h, final_c = torch.empty_like(h), torch.empty_like(c)
    outputs = inputs.new_zeros(d, steps, batch, layer.projection_dim)
    projection = layer.projection
    projected = projection is not None or (layer.packed is not None and "projection" in layer.packed)
    # Decided once: a step's rows only shrink from the batch size.
    state_by_direction = per_direction(layer, state_weight, batch)
    project_by_direction = projected and per_direction(layer, projection, batch)
    groups = [slice(i, i + 1) for i in range(d)] if state_by_direction else [slice(0, d)]
    for g in groups:
        state_product = step_matmul(layer, "state_weight", state_weight, state_by_direction, g)
        project = (step_matmul(layer, "projection", projection, project_by_direction, g)
                   if projected else None)
        x_g = x_proj[g.start] if g.stop - g.start == 1 else both if both is not None else torch.cat(x_proj)
        _recur(layer, x_g, (h[g], c[g]), active, state_product, project, outputs[g],
               (final_h[g], final_c[g]), zero_state, None if where is None else where[g])
    return outputs.transpose(1, 2), (final_h, final_c)


def _recur(
    layer: nn.Module, x_proj: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor], active: list[int],
    state_product: Callable[..., torch.Tensor], project: Callable[..., torch.Tensor] | None,
    outputs: torch.Tensor, final: tuple[torch.Tensor, torch.Tensor], zero_state: bool,
    where: torch.Tensor | None,
) -> None:
    """The step loop over the directions of ``state`` ``(h, c)``: writes step t's output into
    ``outputs[:, t]`` and each sequence's state after its last step into ``final``. ``x_proj``
    holds the input projections of the running (step, sequence) pairs, time-major; with
    ``where`` ``(directions, running pairs)``, those of the distinct inputs, ``where`` giving each
    pair's row among them. With ``zero_state`` the first step skips the state's product."""
    (h, c), (final_h, final_c) = state, final
    differentiable = torch.is_grad_enabled()
    batch = k_prev = h.shape[1]
    # Each step's input projections and (in inference) output slot as views made in one call
    # each: at batch 1 a step's tensor operations cost about what their Python costs.
    # (Autograd lets no one write into a view of ``unbind``.)
    active = active[: len(active) - active.count(0)]  # lengths sort longest first
    # With ``where`` each step gathers its rows as it runs: they stay in cache for its product.
    # ``index_select`` copies whole rows (tensor indexing, element by element, is slower).
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
            gates = x_t.float() if layer.packed is not None else x_t
        else:
            gates = state_product(h, x_t)
        if differentiable:  # packed weights with gradients on: the reference's cell
            c, h = layer.cell(gates, c)
            h = layer.clip_projected(project(h) if project is not None else h)
        else:
            c, h = cell_inference(gates, c, layer.cell_clip)
            h = project(h) if project is not None else h
            if layer.proj_clip:
                h.clamp_(-layer.proj_clip, layer.proj_clip)  # a fresh tensor: no one else holds it
        if slots is None:
            outputs[:, t, :k] = h
        else:
            (slots[t] if k == batch else slots[t][:, :k]).copy_(h)
    if k_prev:
        final_h[:, :k_prev], final_c[:, :k_prev] = h, c
