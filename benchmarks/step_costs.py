"""What one ELMo step costs beside its matrix products, per precision, on the original dims.

    python benchmarks/step_costs.py                  # add --compiled-cell to time torch.compile's cell too

Run it on an idle machine. Prints, per precision (bf16 only on a CPU with native bf16):

1. **products**: one row times the LSTM's state matrix (512 -> 16384), its projection
   (4096 -> 512) and a 64 x 64 matrix (what a call costs whatever its work), through
   ``LowPrecisionWeight`` (bf16, int8; int8's row quantization included) or oneDNN's packed fp32;
2. **step**: one ``ProjectedLSTMLayer`` at batch 1 over 50 steps, microseconds per step and
   direction, with the original dims (512 input and projection, 4096 cells) and with matrices of
   16 x 8 (the calls and operations alone), and the torch operations one step and direction runs;
3. **cell**: the cell's element-wise work (``_cell_inference``) at 1, 8 and 32 rows, and with
   ``--compiled-cell`` the same function through ``torch.compile`` (CPU inductor; its first call,
   compiling included, is reported apart);
4. **char-CNN**: the original dims' CharCNN (random weights, seed 0) on the distinct tokens of
   the reference elmo-small sentences in one call, in length groups and as one group;
5. **int8 kernels by rows** (where fbgemm is there): oneDNN's int8 GEMM and fbgemm's on the same
   codes (the two kernels ``precision="int8"`` chooses between by rows,
   ``contextvec.encoders.cpu.FEW_ROWS``), 1 to 48 rows times the state and projection matrices,
   each call on the next of six copies: the state matrices then come from memory, as a
   sentence's input projections do, and the projections partly from the last-level cache.

Each timing is the median of repeated calls after a warm-up; freed memory is kept for reuse, as
the ``contextvec`` command does.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from contextvec.allocator import keep_freed_memory
from contextvec.encoders.bilm import PRESETS, ElmoBiLM, ProjectedLSTMLayer
from contextvec.encoders.cpu import fbgemm_available, fbgemm_prepack
from contextvec.encoders.precision import LowPrecisionWeight, PackedFloatWeights, apply_precision, native_bf16
from contextvec.text.chars import token_to_char_ids

SENTENCES = Path(__file__).resolve().parents[2] / "shared/data/reference/elmo-small/sentences.txt"


def micros(run: Callable[[], object], calls: int) -> float:
    """Median microseconds of ``run`` over 5 rounds of ``calls`` calls, after a warm-up."""
    for _ in range(3):
        run()
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            run()
        rounds.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(rounds)


def product(precision: str, weight: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    """``x @ weight.T`` as ``precision`` runs it in inference."""
    if precision == "fp32":
        packing = PackedFloatWeights()
        return lambda x: packing.packed_linear("w", x, weight)
    return LowPrecisionWeight(weight, precision)


def int8_kernels(out: int, inp: int, copies: int) -> Callable[[int, str], torch.Tensor]:
    """``run(rows, library)``: ``rows`` rows of int8 codes times the next of ``copies`` random
    ``(out, inp)`` int8 matrices, on oneDNN's kernel (``"onednn"``) or fbgemm's (``"fbgemm"``),
    from the same float codes made beforehand, each with what ``precision="int8"`` does around
    it (oneDNN's takes the codes through uint8; the row scales follow either alike)."""
    weights = [LowPrecisionWeight(torch.randn(out, inp) * 0.04, "int8") for _ in range(copies)]
    onednn = [torch.ops.onednn.qlinear_prepack(w.weight, None) for w in weights]
    fbgemm = [fbgemm_prepack(w.weight, w.scales) for w in weights]
    codes = {rows: torch.randint(-63, 64, (rows, inp)).float() for rows in range(1, 65)}
    ones, zeros = torch.ones(out), torch.zeros(out, dtype=torch.long)
    turn = itertools.count()

    def run(rows: int, library: str) -> torch.Tensor:
        i = next(turn) % copies
        if library == "fbgemm":
            return torch.ops.quantized.linear_with_input_q_dq_qweight_dq_output_fp32(
                codes[rows], 1.0, 64, fbgemm[i])
        return torch.ops.onednn.qlinear_pointwise(
            codes[rows].to(torch.int8).view(torch.uint8).add_(64), 1.0, 64, onednn[i], ones, zeros,
            None, 1.0, 0, torch.float32, "none", [], "")

    return run


class CountOps(TorchDispatchMode):
    """Counts the torch operations run inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


def layer(precision: str, cell: int, projection: int) -> ProjectedLSTMLayer:
    torch.manual_seed(0)
    lstm = ProjectedLSTMLayer(projection, cell, projection, cell_clip=3.0, proj_clip=3.0).eval()
    if precision != "fp32":
        lstm.pack_weights(lambda w: LowPrecisionWeight(w, precision))
    return lstm


def step_micros(precision: str, cell: int, projection: int, steps: int) -> tuple[float, float]:
    """(microseconds, torch operations) per step and direction of one layer at batch 1."""
    lstm = layer(precision, cell, projection)
    x, lengths = torch.randn(2, 1, steps, projection), torch.tensor([steps])
    seconds = micros(lambda: lstm(x, lengths), 3)
    with CountOps() as ops:
        lstm(x, lengths)
    return seconds / steps / 2, ops.count / steps / 2


def cell_micros(cell: Callable, gates: torch.Tensor, c: torch.Tensor) -> float:
    """Microseconds of ``cell`` on a copy of ``gates`` (it overwrites them) and ``c``."""
    return micros(lambda: cell(gates.clone(), c), 100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--compiled-cell", action="store_true", help="also time torch.compile's cell")
    args = parser.parse_args()
    keep_freed_memory()
    torch.set_num_threads(args.threads)
    precisions = [p for p in ("fp32", "bf16", "int8") if p != "bf16" or native_bf16()]
    steps = 50
    with torch.inference_mode():
        print("products, one row (us):")
        shapes = {"state 512->16384": (16384, 512), "projection 4096->512": (512, 4096), "64->64": (64, 64)}
        for precision in precisions:
            times = []
            for name, (out, inp) in shapes.items():
                f, x = product(precision, torch.randn(out, inp) * 0.04), torch.randn(1, inp)
                times.append(f"{name} {micros(lambda f=f, x=x: f(x), 200):.0f}")
            print(f"  {precision}: " + ", ".join(times))

        print(f"step, batch 1, {steps} steps (us per step and direction; torch operations per step"
              " and direction):")
        for precision in precisions:
            full, alone = (step_micros(precision, cell, proj, steps) for cell, proj in ((4096, 512), (16, 8)))
            print(f"  {precision}: 4096 x 512 {full[0]:.0f}, 16 x 8 {alone[0]:.0f}; {full[1]:.1f} operations")

        print("cell, element-wise work (us):")
        cell = layer("fp32", 4096, 512)._cell_inference
        compiled = torch.compile(cell, dynamic=True) if args.compiled_cell else None
        for rows in (1, 8, 32):
            gates, c = torch.randn(rows, 4 * 4096), torch.randn(rows, 4096)
            line = f"  {rows:>2} rows: eager {cell_micros(cell, gates, c):.0f}"
            if compiled is not None:
                start = time.perf_counter()
                compiled(gates.clone(), c)
                first = time.perf_counter() - start
                line += f", compiled {cell_micros(compiled, gates, c):.0f} (first call {first:.1f} s)"
            print(line)

        lines = SENTENCES.read_text("utf-8").splitlines()
        words = list(dict.fromkeys(w for line in lines for w in line.split()))
        ids = torch.from_numpy(np.stack([token_to_char_ids(w) for w in words]))
        print(f"char-CNN, {len(words)} distinct tokens in one call (ms):")
        for precision in (p for p in precisions if p != "int8"):  # int8 keeps the CNN in bf16
            torch.manual_seed(0)
            cnn = ElmoBiLM(PRESETS["elmo-original"]).eval().token_encoder
            apply_precision(cnn, precision)
            grouped = micros(lambda cnn=cnn: cnn(ids), 1) / 1e3
            cnn.min_group = len(words) + 1
            whole = micros(lambda cnn=cnn: cnn(ids), 1) / 1e3
            print(f"  {precision}: length groups {grouped:.1f}, one group {whole:.1f}")

        if fbgemm_available():
            print("int8 kernels by rows, six copies of each matrix in turn (us, oneDNN / fbgemm):")
            for name, (out, inp) in list(shapes.items())[:2]:
                run = int8_kernels(out, inp, copies=6)
                line = [f"{rows} {micros(lambda r=rows, run=run: run(r, 'onednn'), 20):.0f} / "
                        f"{micros(lambda r=rows, run=run: run(r, 'fbgemm'), 20):.0f}"
                        for rows in (1, 2, 4, 8, 12, 16, 24, 32, 48)]
                print(f"  {name}: " + ", ".join(line))


if __name__ == "__main__":
    main()
