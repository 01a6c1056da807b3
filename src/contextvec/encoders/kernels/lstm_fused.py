"""PyTorch's fused LSTM kernel for a plain LSTM layer (no projection, no clipping): LM training
windows, where every sequence spans the whole batch, run much faster on it than a step loop."""

from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call


def run_fused(
    shape_donor: nn.LSTM, gate_order: list[int], input_weight: torch.Tensor, state_weight: torch.Tensor,
    bias: torch.Tensor, inputs: torch.Tensor, h: torch.Tensor, c: torch.Tensor,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """The recurrence of every direction on ``nn.LSTM``'s kernel.

    ``input_weight (d, 4*cell, in)``, ``state_weight (d, 4*cell, cell)``, ``bias (d, 4*cell)`` in
    the layer's gate order, ``gate_order`` the layer's gate blocks in PyTorch's order (i, f, g, o);
    ``inputs (d, batch, steps, in)``, ``h``, ``c`` ``(d, batch, cell)``. Returns the outputs
    ``(d, batch, steps, cell)`` and the final ``(h, c)``. ``shape_donor``'s own parameters are
    never used (it may live on the meta device)."""
    cell = input_weight.shape[1] // 4

    def torch_order(w: torch.Tensor) -> torch.Tensor:
        return w.unflatten(1, (4, cell))[:, gate_order].flatten(1, 2)

    w_in, w_state, b = torch_order(input_weight), torch_order(state_weight), torch_order(bias)
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
                shape_donor, weights, (inputs[d].transpose(0, 1), (h[d : d + 1], c[d : d + 1])),
            )
            outputs.append(out.transpose(0, 1))
            finals_h.append(h_d[0])
            finals_c.append(c_d[0])
    return torch.stack(outputs), (torch.stack(finals_h), torch.stack(finals_c))
