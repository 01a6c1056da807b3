"""Inference against the machine's limits, every precision, in one run.

    python benchmarks/inference_limits.py                      # short run (shared machine)
    python benchmarks/inference_limits.py --n-sentences 500 --batch1-sentences 100 --passes 3

Prints, measured in the same run:

1. the CPU (model name, the /proc/cpuinfo flags that matter: AVX-512, BF16, VNNI, AMX) and each
   precision's path on it (``contextvec.encoders.cpu.inference_paths``: AMX tiles, AVX-512
   BF16/VNNI, AVX2, int8 activation bits);
2. the limits, per precision, through the kernels ``precision=`` uses (fp32 the faster of MKL's
   ``mm`` and oneDNN's packed GEMM, bf16 the faster of oneDNN's packed GEMM and ``torch.mm``, int8
   oneDNN's int8 GEMM alone on codes quantized beforehand, and where the int8 path runs LSTMs on
   fbgemm, the faster of that and fbgemm's dynamic GEMM, its input's quantization included, as
   fbgemm quantizes inside the call; for as few rows as the int8 path runs on fbgemm's kernel (one
   row, the GEMV, everywhere it does), the faster of oneDNN's and fbgemm's on the same codes): GEMV
   bandwidth (one vector times a weight of 16384 rows and 268 MB in each precision, 4096 fp32
   columns, 8192 bf16, 16384 int8: its bytes over the time; fewer bytes would be partly read from
   the last-level cache), a plain read of the fp32 weight, the square matmul (2048^3), and the
   LSTM's own products at batch 32 of each ELMo config (state ``32 x proj @ proj x 4 cell`` and
   projection ``32 x cell @ cell x proj`` per step, input ``2048 x proj @ proj x 4 cell`` once per
   batch), with the tokens/s those products alone allow;
3. ELMo small (reference weights) and original (random weights of the published
   2x4096_512_2048cnn_2xhighway dims) at batch 1 and 32 per precision: tokens/s, and the
   fraction of its own precision's limit: at batch 1 bandwidth (each token streams every LSTM's
   recurrent and projection matrices; input projections run as one matmul per sentence; beside
   it, the fraction counting every matrix a pass must stream, ``pass_weight_bytes``: the input
   projections' and the token encoder's once per sentence too), at
   batch 32 the LSTM products' tokens/s (and, beside it, the LSTM FLOPs as run over the square
   matmul: ``flops.LstmWork``, where a batch's repeated tokens are projected once; the char-CNN,
   run once per distinct token, is left out of the count);
   With allennlp importable (run under the environment of benchmarks/allennlp_env.sh with
   ``PYTHONPATH=src``), each row also gives x allennlp: allennlp 2.10.1's ``Elmo`` (fp32, its
   users' call ``elmo(batch_to_ids(batch))``, one representation, dropout 0) on the same weights
   (written as bilm-tf files) and the same length-sorted batches of the same size; with
   ``onnxruntime`` installed (``contextvec[onnx]``), ONNX Runtime rows follow each batch size's:
   the graph ``contextvec.export_onnx`` writes of the same fp32 weights, and that graph through
   ``onnxruntime.quantization.quantize_dynamic`` (int8 weights, dynamic activations; it leaves
   the products inside the LSTMs' ``Scan`` bodies in fp32), on the same batches, character ids
   made inside the timing;
4. BERT all-MiniLM-L6-v2: contextvec in each precision (all layers, word-aligned) against HF
   ``BertModel`` eager and ONNX Runtime fp32 and dynamic int8, on the same length-sorted batches,
   with each engine's agreement with HF (``bert_speed.compare``; needs ``transformers``, ``onnx``
   and ``onnxruntime``, else the section says what is missing), then each engine's matmul
   GFLOP/s as a fraction of its precision's square matmul (ONNX Runtime's fp32 and int8 against
   ours: the limits of the same instructions).

bf16 runs only on a CPU with native bf16 (otherwise ``contextvec.load`` refuses it; the row says
so). Sentences: ELMo's from ``--sentences`` (``sentences.py``: the reference elmo-small set, or
wikitext-103's for more than its 64), BERT's the reference bert-minilm ``sentences.txt`` cycled.
Each ELMo batch size runs its rows in ``--passes`` rounds (``interleaved_passes``), each running
allennlp, every precision and ONNX Runtime in turn, an untimed pass and then a timed one, so the
machine's drift falls on all alike; a row's tokens/s is its median pass, and its ratios the median
of the ratios within a round. The token cache is emptied before each pass.
Like the ``contextvec`` command, the run keeps freed memory for reuse
(``contextvec.allocator.keep_freed_memory``) unless given ``--default-malloc``.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from checkpoints import minilm_dir, original_elmo
from flops import LstmWork
from sentences import SOURCES, benchmark_sentences

import contextvec
from contextvec.allocator import keep_freed_memory
from contextvec.encoders.bilm import BiLMConfig, ElmoEncoder
from contextvec.encoders.bilm.loader import save_bilm_tf
from contextvec.encoders.precision import (
    BF16_FLAGS,
    INT8_FLAGS,
    PRECISIONS,
    Int8Library,
    LowPrecisionWeight,
    PackedFloatWeights,
    apply_precision,
    cpu_flags,
    fbgemm_prepack,
    inference_paths,
    native_bf16,
)
from contextvec.text.batching import length_batches

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "data" / "reference"
BYTES = {"fp32": 4, "bf16": 2, "int8": 1}


def best_seconds(run: Callable[[], object], repeats: int) -> float:
    run()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def print_cpu() -> None:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "unknown")
    wanted = ("avx", "amx", "vnni", "bf16", "fma")
    flags = sorted(f for f in cpu_flags() if any(w in f for w in wanted))
    print(f"CPU: {model}; threads: {torch.get_num_threads()}")
    print(f"flags: {' '.join(flags)}")
    print(f"native bf16 ({'/'.join(BF16_FLAGS)}): {native_bf16()}; "
          f"int8 dot products ({'/'.join(INT8_FLAGS)}): {any(f in cpu_flags() for f in INT8_FLAGS)}\n")


def products(precision: str, weight: torch.Tensor, rows: int) -> list[Callable[[], torch.Tensor]]:
    """The kernels of ``precision`` for ``rows`` rows times ``weight (out, in)`` transposed, their
    inputs made beforehand: fp32 MKL's ``mm`` and oneDNN's packed GEMM, bf16 oneDNN's packed GEMM
    (``precision="bf16"``'s) and ``torch.mm``, int8 oneDNN's int8 GEMM alone on codes quantized
    beforehand (``precision="int8"`` quantizes each call's input first), fbgemm's where the int8
    path runs LSTMs on it (quantizing inside the call), and for few rows fbgemm's on the codes where
    the int8 path runs that many rows on it. The limit is the fastest."""
    x = torch.randn(rows, weight.shape[1])
    if precision == "fp32":
        packing = PackedFloatWeights()
        return [lambda: x @ weight.T, lambda: packing.linear("w", x, weight)]
    if precision == "bf16":
        packed, x16, w16 = LowPrecisionWeight(weight, "bf16"), x.bfloat16(), weight.bfloat16()
        return [lambda: packed(x16, float_output=False), lambda: x16 @ w16.T]
    n = weight.shape[0]
    weight_codes = LowPrecisionWeight(weight, "int8").weight
    onednn = torch.ops.onednn.qlinear_prepack(weight_codes, None)
    codes = torch.randint(0, 256, x.shape, dtype=torch.uint8)
    scales, zeros = torch.ones(n), torch.zeros(n, dtype=torch.long)
    kernels = [lambda: torch.ops.onednn.qlinear_pointwise(codes, 1.0, 128, onednn, scales, zeros, None,
                                                          1.0, 0, torch.float32, "none", [], "")]
    path = inference_paths()["int8"]
    if path.int8_library is Int8Library.FBGEMM:
        fbgemm = LowPrecisionWeight(weight, "int8", Int8Library.FBGEMM)
        kernels.append(lambda: fbgemm(x))
    if path.few_rows_library is Int8Library.FBGEMM and rows <= path.few_rows:
        few_rows = fbgemm_prepack(weight_codes, scales)
        floats = codes.float() - 128
        kernels.append(lambda: torch.ops.quantized.linear_with_input_q_dq_qweight_dq_output_fp32(
            floats, 1.0, 128, few_rows))
    return kernels


def gemv_weight(precision: str, probe: torch.Tensor) -> torch.Tensor:
    """``probe (out, in)`` widened to as many bytes in ``precision`` as it has in fp32 (its columns
    repeated): a matrix of fewer bytes is partly read from the last-level cache between calls,
    and how much depends on the kernel's order of reads, not on memory."""
    return probe.repeat(1, BYTES["fp32"] // BYTES[precision])


def gemvs(precision: str, probe: torch.Tensor) -> list[Callable[[], torch.Tensor]]:
    """The GEMV kernels of ``precision`` (:func:`products` of one row) over ``gemv_weight``."""
    return products(precision, gemv_weight(precision, probe), 1)


def gemv_gbps(precision: str, probe: torch.Tensor, repeats: int,
              kernels: list[Callable[[], torch.Tensor]] | None = None) -> float:
    """GB/s of the fastest GEMV kernel of ``precision`` over ``gemv_weight(precision, probe)``
    (its bytes in that dtype); ``kernels``: ``gemvs(precision, probe)`` made beforehand."""
    with torch.no_grad():
        seconds = min(best_seconds(kernel, repeats) for kernel in kernels or gemvs(precision, probe))
    return probe.numel() * BYTES["fp32"] / seconds / 1e9


def product_gflops(precision: str, rows: int, inputs: int, outputs: int, repeats: int) -> float:
    """GFLOP/s of the fastest kernel of ``precision`` for ``(rows, inputs) @ (inputs, outputs)``."""
    kernels = products(precision, torch.randn(outputs, inputs), rows)
    with torch.no_grad():
        seconds = min(best_seconds(kernel, repeats) for kernel in kernels)
    return 2 * rows * inputs * outputs / seconds / 1e9


def lstm_shapes(c: BiLMConfig, batch: int) -> dict[str, tuple[int, int, int, float]]:
    """The LSTM's own products at ``batch`` sequences: name -> (rows, in, out, FLOPs per token
    through every layer and direction). Input projections run once over a whole batch's tokens
    (taken as 2048 rows); the state and projection products once per step, ``batch`` rows."""
    per_token = 2.0 * 2 * c.n_layers
    shapes = {
        "input": (2048, c.projection_dim, 4 * c.lstm_dim, per_token * c.projection_dim * 4 * c.lstm_dim),
        "state": (batch, c.projection_dim, 4 * c.lstm_dim, per_token * c.projection_dim * 4 * c.lstm_dim),
    }
    if c.lstm_projection:
        flops = per_token * c.lstm_dim * c.projection_dim
        shapes["projection"] = (batch, c.lstm_dim, c.projection_dim, flops)
    return shapes


@dataclass(frozen=True)
class Limits:
    """One precision's matmul limits: the square matmul's GFLOP/s and, per ELMo config, the
    tokens/s the LSTM's own products allow at batch 32 (each product at its measured rate)."""

    square: float
    lstm_tokens: dict[str, float]


def measure_limits(precisions: list[str], repeats: int, weight: torch.Tensor,
                   configs: dict[str, BiLMConfig], batch: int = 32) -> dict[str, Limits]:
    """Prints the GB/s of a GEMV over ``weight``, the GFLOP/s of a square matmul and of each
    config's LSTM products, per precision, through the kernels that precision uses, and returns
    the matmul limits (batch 1 reads its bandwidth again before each pass:
    :func:`interleaved_passes`)."""
    limits = {}
    read = best_seconds(lambda: weight.sum(), repeats)
    size_bytes = weight.numel() * 4
    print(f"plain read of a {size_bytes / 1e6:.0f} MB fp32 matrix: {size_bytes / read / 1e9:.1f} GB/s")
    paths = inference_paths()
    for precision in precisions:
        path = paths[precision]
        bits = f", {path.activation_bits}-bit activations" if path.activation_bits else ""
        print(f"{precision:>5}: {path.kernel}{bits} via {path.engine}")
        columns = weight.shape[1] * BYTES["fp32"] // BYTES[precision]
        print(f"       GEMV (1 x {columns} @ {columns} x {weight.shape[0]}) "
              f"{gemv_gbps(precision, weight, repeats):7.1f} GB/s")
        square = product_gflops(precision, 2048, 2048, 2048, repeats)
        print(f"       matmul 2048 x 2048 @ 2048 x 2048 {square:7.1f} GFLOP/s")
        lstm_tokens = {}
        for name, config in configs.items():
            seconds_per_token = 0.0
            for product, (rows, inputs, outputs, flops) in lstm_shapes(config, batch).items():
                rate = product_gflops(precision, rows, inputs, outputs, repeats)
                seconds_per_token += flops / (rate * 1e9)
                print(f"       {name} LSTM {product:<10} {rows:>4} x {inputs} @ {inputs} x {outputs}"
                      f" {rate:7.1f} GFLOP/s")
            lstm_tokens[name] = 1 / seconds_per_token
            print(f"       {name} LSTM products alone at batch {batch}: {lstm_tokens[name]:,.0f} tokens/s")
        limits[precision] = Limits(square, lstm_tokens)
    print()
    return limits


@dataclass
class Engine:
    """One row's runner: ``run`` makes a pass over the batches; ``before`` runs before each pass
    (untimed: emptying a token cache); ``probe``, where given, reads a limit right before it."""

    label: str
    run: Callable[[], object]
    before: Callable[[], None] = lambda: None
    probe: Callable[[], float] | None = None


def interleaved_passes(engines: list[Engine], passes: int) -> dict[str, list[tuple[float, float | None]]]:
    """Per engine, ``(seconds, probe() or None)`` of each of ``passes`` rounds; each round runs
    every engine in turn, an untimed pass and then the timed one. The machine's speed drifts over
    minutes (much on a shared machine): rounds put each engine's passes next to the others', so a
    ratio between two engines, or between a pass and the limit read right before it, is measured
    back to back; the untimed pass before each timed one leaves the caches and the allocator as a
    run of that engine alone would (right after another engine's pass, bf16's ran slower)."""
    results: dict[str, list[tuple[float, float | None]]] = {engine.label: [] for engine in engines}
    for _ in range(passes):
        for engine in engines:
            engine.before()
            engine.run()
            limit = engine.probe() if engine.probe else None
            engine.before()
            start = time.perf_counter()
            engine.run()
            results[engine.label].append((time.perf_counter() - start, limit))
    return results


def round_ratio(results: dict[str, list[tuple[float, float | None]]], base: str, label: str) -> float:
    """The median over rounds of ``base``'s seconds over ``label``'s in the same round: how many
    times faster ``label`` ran, back to back."""
    return statistics.median(b / s for (b, _), (s, _) in zip(results[base], results[label], strict=True))


def elmo(name: str) -> ElmoEncoder:
    if name == "small":
        return contextvec.load(REFERENCE / "elmo-small")
    return original_elmo()


def allennlp_runner(name: str, batches: list[list[list[str]]]) -> Callable[[], None] | None:
    """A pass of allennlp's ``Elmo`` over ``batches``, on the same weights as :func:`elmo`; None
    when allennlp is not importable here."""
    if importlib.util.find_spec("allennlp") is None:
        return None
    from allennlp.modules.elmo import Elmo, batch_to_ids

    with tempfile.TemporaryDirectory() as tmp:
        if name == "small":
            options, weights = (REFERENCE / "elmo-small" / name for name in ("options.json", "weights.hdf5"))
        else:
            options, weights = Path(tmp) / "options.json", Path(tmp) / "weights.hdf5"
            save_bilm_tf(elmo(name).bilm, options, weights)
        model = Elmo(str(options), str(weights), 1, dropout=0.0).eval()

    def run() -> None:
        with torch.inference_mode():
            for batch in batches:
                model(batch_to_ids(batch))

    return run


def ort_runners(name: str) -> dict[str, Callable[[list[list[str]]], object]] | None:
    """``{"ORT fp32": run, "ORT int8": run}``, each running one batch of token lists through ONNX
    Runtime on :func:`elmo` ``(name)``'s weights; None when ``onnxruntime`` is not importable."""
    if importlib.util.find_spec("onnxruntime") is None:
        return None
    from bert_speed import ort_runtime
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from contextvec.text.chars import batch_to_char_ids

    runners = {}
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = contextvec.export_onnx(elmo(name), Path(tmp) / "elmo.onnx")
        int8 = Path(tmp) / "elmo-int8.onnx"
        # (quantize_dynamic logs a hint about pre-processing on the root logger: not ours to show.)
        logging.disable(logging.WARNING)
        try:
            quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8)
        finally:
            logging.disable(logging.NOTSET)
        for label, path in (("ORT fp32", fp32), ("ORT int8", int8)):
            runtime = ort_runtime(path, torch.get_num_threads(), passive=False)

            def run(batch: list[list[str]], runtime=runtime) -> object:
                ids = batch_to_char_ids(batch).numpy()
                return runtime.run(None, {"char_ids": ids, "mask": (ids > 0).any(-1).astype("int64")})

            runners[label] = run
    return runners


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def matrix_bytes(module: torch.nn.Module) -> int:
    """Bytes of the matrices ``module`` multiplies by, in the dtypes they run in (after
    ``apply_precision``: int8 codes, bf16, or the float weights; int8 keeps ELMo's token encoder in
    bf16 or fp32). Embedding tables are left out: a call reads only its rows."""
    kinds = LowPrecisionWeight | torch.nn.Linear | torch.nn.Conv1d
    return sum(_nbytes(sub.weight) for sub in module.modules()
               if isinstance(sub, kinds) and sub.weight is not None)


def lstm_bytes(encoder: ElmoEncoder) -> dict[str, int]:
    """Bytes of every LSTM layer's ``state_weight``, ``projection`` and ``input_weight``
    matrices together, by name, in the dtypes they run in."""
    sizes = dict.fromkeys(("state_weight", "projection", "input_weight"), 0)
    for layer in encoder.bilm.layers:
        if layer.packed is not None:
            found = {name: sum(_nbytes(w.weight) for w in ws) for name, ws in layer.packed.items()}
        else:
            found = {name: _nbytes(w) for name in sizes if (w := getattr(layer, name)) is not None}
        for name in sizes:
            sizes[name] += found.get(name, 0)
    return sizes


def streamed_bytes_per_token(encoder: ElmoEncoder) -> float:
    """Weight bytes each token streams at batch 1: every LSTM's recurrent and projection matrices."""
    sizes = lstm_bytes(encoder)
    return sizes["state_weight"] + sizes["projection"]


def pass_weight_bytes(encoder: ElmoEncoder, sentences: list[list[str]]) -> int:
    """Weight bytes one batch-1 pass over ``sentences`` streams at the least, token cache emptied
    before it: per step (a token, ``<S>`` or ``</S>``), every LSTM's projection matrices, and its
    state matrices on every step but a sentence's first (whose state is zero); per sentence, every
    LSTM's input matrices (one product over the sentence) and, for a sentence with a token not
    seen before in the pass, the token encoder's matrices; the token encoder once more for the
    boundaries (kept with the token cache)."""
    sizes = lstm_bytes(encoder)
    token_encoder = matrix_bytes(encoder.bilm.token_encoder)
    seen: set[str] = set()
    total = token_encoder
    for sentence in sentences:
        steps = len(sentence) + 2
        total += steps * sizes["projection"] + (steps - 1) * sizes["state_weight"] + sizes["input_weight"]
        if not seen.issuperset(sentence):
            total += token_encoder
            seen.update(sentence)
    return total


def run_elmo(args: argparse.Namespace, precisions: list[str], limits: dict[str, Limits],
             probe: torch.Tensor) -> None:
    sentences = benchmark_sentences(args.sentences, args.n_sentences)
    print(f"{'ELMo':<9} {'batch':>5} {'precision':<9} {'sents':>5} {'tokens/s':>9} {'x fp32':>7} "
          f"{'x allennlp':>10} {'of limit':>8}  limit")
    print("occupancy: real LSTM steps / (batch size x longest sequence), over all batches: how full"
          " the per-step\nproducts are at batch 32 (input projections run on the real tokens only,"
          " at full width)")
    print("every row of a batch size runs in the same rounds (interleaved_passes): tokens/s is the"
          " median pass;\nx fp32 and x allennlp the median of the ratios within a round")
    for name in args.configs.split(","):
        ort = ort_runners(name) if "ort" not in args.skip.split(",") else {}
        for batch_size in (int(b) for b in args.batch_sizes.split(",")):
            subset = sentences if batch_size > 1 else sentences[: args.batch1_sentences]
            n_tokens = sum(map(len, subset))
            steps = n_tokens + 2 * len(subset)  # <S> and </S> run through the LSTMs too
            order = length_batches([len(s) for s in subset], batch_size, 10**9)
            batches = [[subset[i] for i in b] for b in order]
            slots = sum(batch_size * (max(map(len, b)) + 2) for b in batches)
            occupancy = steps / slots
            engines, encoders, works = [], {}, {}
            reference = allennlp_runner(name, batches)
            if reference:
                engines.append(Engine("allennlp", reference))
            for precision in precisions:
                if precision == "bf16" and not native_bf16():
                    print(f"{name:<9} {batch_size:>5} {precision:<9} refused: no native bf16 on this CPU")
                    continue
                encoder = elmo(name)
                apply_precision(encoder, precision)
                encoders[precision] = encoder
                works[precision] = LstmWork(encoder.bilm.layers, encoder.config)
                # The same batches as allennlp's; embed keeps each batch as it is.
                run = lambda e=encoder: [e.embed(b, batch_size=batch_size) for b in batches]  # noqa: B023,E731
                # At batch 1 each pass against the GEMV bandwidth read right before it.
                read_limit = None
                if batch_size == 1:
                    kernels = gemvs(precision, probe)
                    read_limit = lambda p=precision, k=kernels: gemv_gbps(p, probe, 3, k)  # noqa: E731
                engines.append(Engine(precision, run, encoder.clear_caches, read_limit))
            for label, run_batch in (ort or {}).items():
                engines.append(Engine(label, lambda r=run_batch: [r(b) for b in batches]))  # noqa: B023
            results = interleaved_passes(engines, args.passes)
            for engine in engines:
                if engine.label == "allennlp":
                    continue
                pairs = results[engine.label]
                seconds = statistics.median(s for s, _ in pairs)
                encoder = encoders.get(engine.label)
                if encoder is None:
                    fraction, what = "", "the same batches"
                elif batch_size == 1:
                    per_token = streamed_bytes_per_token(encoder)
                    every_weight = pass_weight_bytes(encoder, subset)
                    fractions = sorted(steps / s / (gbps * 1e9 / per_token) for s, gbps in pairs)
                    whole = statistics.median(every_weight / (gbps * 1e9) / s for s, gbps in pairs)
                    limit = statistics.median(gbps for _, gbps in pairs) * 1e9 / per_token
                    fraction = f"{statistics.median(fractions):.1%}"
                    what = (f"{limit:.0f} tokens/s (GEMV bandwidth read before each pass; passes "
                            f"{fractions[0]:.1%}-{fractions[-1]:.1%}); {whole:.1%} counting every "
                            f"matrix a pass streams ({every_weight / 1e6:,.0f} MB)")
                else:
                    # Against the LSTM's own products at this precision's rates; the square
                    # matmul's peak beside it, for the FLOPs of a pass as run (every pass, timed
                    # or not, ran the same batches).
                    limit = limits[engine.label].lstm_tokens[name]
                    fraction = f"{steps / seconds / limit:.1%}"
                    square = (works[engine.label].flops / (2 * args.passes) / seconds / 1e9
                              / limits[engine.label].square)
                    what = (f"{limit:,.0f} tokens/s (LSTM products at batch {batch_size}); "
                            f"{square:.1%} of the square matmul; occupancy {occupancy:.0%}")
                ratio = (f"{round_ratio(results, 'fp32', engine.label):6.2f}x" if "fp32" in results
                         else "      -")
                versus = (f"{round_ratio(results, 'allennlp', engine.label):9.2f}x" if reference
                          else f"{'-':>10}")
                print(f"{name:<9} {batch_size:>5} {engine.label:<9} {len(subset):>5} "
                      f"{n_tokens / seconds:>9.1f} {ratio} {versus} {fraction:>8}  {what}", flush=True)
        if ort is None:
            print(f"{name}: ONNX Runtime rows skipped (needs onnxruntime: pip install 'contextvec[onnx]')")
    print()


def run_bert(args: argparse.Namespace, limits: dict[str, Limits]) -> None:
    """BERT MiniLM in every precision against HF's ``BertModel`` and ONNX Runtime fp32/int8:
    ``bert_speed.compare`` on the reference sentences cycled to ``--n-sentences``."""
    missing = [m for m in ("transformers", "onnx", "onnxruntime") if importlib.util.find_spec(m) is None]
    if minilm_dir() is None or missing:
        print("BERT: skipped (needs " + ", ".join(missing or ["the MiniLM checkpoint"])
              + "; see benchmarks/bert_speed.py)")
        return
    from bert_speed import compare

    lines = (REFERENCE / "bert-minilm" / "sentences.txt").read_text("utf-8").splitlines()
    lines = (lines * (args.n_sentences // len(lines) + 1))[: args.n_sentences]
    rates, flops = compare([line.split() for line in lines], 32, args.threads, args.passes)
    print("each engine's useful matmul work (linear layers and attention products over the real "
          "pieces, padding left out) against its precision's square matmul:")
    engines = {"ORT fp32": "fp32", "ORT int8": "int8", **{f"contextvec {p}": p for p in limits}}
    for engine, precision in engines.items():
        if engine in rates and precision in limits:
            gflops = flops * rates[engine] / len(lines) / 1e9
            print(f"{engine:16s} {gflops:7.1f} GFLOP/s = {gflops / limits[precision].square:6.1%} "
                  f"of the {precision} square matmul ({limits[precision].square:.0f} GFLOP/s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", default="small,original")
    parser.add_argument("--batch-sizes", default="1,32")
    parser.add_argument("--precisions", default=",".join(PRECISIONS))
    parser.add_argument("--n-sentences", type=int, default=64)
    parser.add_argument("--sentences", choices=SOURCES, default="reference",
                        help="the 64 reference sentences (cycled past 64) or wikitext-103's (sentences.py)")
    parser.add_argument("--batch1-sentences", type=int, default=8)
    parser.add_argument("--passes", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5, help="repeats of each limit measurement")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--skip", default="", help="comma list of: elmo, bert, ort (ELMo's ONNX Runtime)")
    parser.add_argument("--default-malloc", action="store_true",
                        help="leave glibc's malloc settings as they are (default: keep freed "
                             "memory for reuse, as the contextvec command does)")
    args = parser.parse_args()
    kept = not args.default_malloc and keep_freed_memory()
    print(f"freed memory kept for reuse (contextvec.allocator): {'yes' if kept else 'no'}")
    torch.set_num_threads(args.threads)
    precisions = args.precisions.split(",")
    print_cpu()
    skip = set(args.skip.split(","))
    measured = [p for p in precisions if p != "bf16" or native_bf16()]
    probe = torch.randn(16384, 4096)
    configs = {name: elmo(name).config for name in args.configs.split(",")} if "elmo" not in skip else {}
    limits = measure_limits(measured, args.repeats, probe, configs)
    if "elmo" not in skip:
        run_elmo(args, precisions, limits, probe)
    if "bert" not in skip:
        run_bert(args, limits)


if __name__ == "__main__":
    main()
