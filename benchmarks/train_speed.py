"""Training tokens/s of biLM presets, fp32 vs bf16 autocast, and the fraction of fp32 matmul peak.

    python benchmarks/train_speed.py --presets kim-small,elmo-small --steps 10
    python benchmarks/train_speed.py --presets kim-small --bf16 off,softmax,all --steps 60
    python benchmarks/train_speed.py --presets my_config.json      # a BiLMTrainSettings JSON file
    python benchmarks/train_speed.py --presets elmo-en-small --init elmo-en-small --negatives 0

Data: PTB train from ../shared/data unless ``--train`` names files; each row is the median step
time over ``--steps`` steps after 3 warm-up steps. ``--bf16`` lists the training config's
autocast modes to time (``off``: float32; ``softmax``; ``all``); the matmul peak is also measured
in bf16, and the fraction of peak is always of the fp32 one. FLOPs per token = 3 x the forward pass
(forward + backward): char-CNN, LSTMs, and the softmax over the full vocabulary or the sampled
negatives. The char-CNN is counted as it runs: once per distinct token of a step, over the
character columns it keeps. Run on an idle machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch
from flops import CnnWork, lstm_flops, matmul_peak

from contextvec.encoders.bilm.config import BiLMConfig
from contextvec.training.bilm.batcher import StreamBatcher
from contextvec.training.bilm.config import PRESETS, BiLMTrainSettings
from contextvec.training.bilm.trainer import Trainer
from contextvec.training.corpus import read_sentences

PTB = Path(__file__).resolve().parents[2] / "shared" / "data" / "corpora" / "ptb"


def position_flops(c: BiLMConfig, softmax_width: int) -> float:
    """Forward FLOPs per position after the char-CNN: the LSTMs and the softmax."""
    directions = 2 if c.bidirectional else 1
    return lstm_flops(c) + 2.0 * directions * c.projection_dim * softmax_width


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--presets", default="kim-small,elmo-small")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rows", type=int, help="override the presets' rows")
    parser.add_argument("--negatives", type=int,
                        help="override the presets' sampled-softmax negatives (0: full softmax)")
    parser.add_argument("--train", nargs="+", type=Path, default=[PTB / "ptb.train.txt.gz"],
                        help="corpus files (the vocabulary is built from them; default PTB)")
    parser.add_argument("--init", help="start from this model and its vocabulary, e.g. "
                        "elmo-en-small (the bundled run's 50,000 words)")
    parser.add_argument("--bf16", default="off,softmax,all",
                        help="the training config's bf16 autocast modes to time (slow without "
                        "native bf16 matmuls: AVX-512 BF16 or AMX)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    peak = matmul_peak()
    print(f"fp32 matmul peak (2048^3, {args.threads} threads): {peak:.1f} GFLOP/s; "
          f"bf16: {matmul_peak(torch.bfloat16):.1f} GFLOP/s")
    print(f"{'preset':<12} {'bf16':<9} {'rows x unroll':>13} {'vocab':>6} {'tokens/s':>9} "
          f"{'GFLOP/s':>8} {'of peak':>7}")
    paths = args.train
    for name in args.presets.split(","):
        base = BiLMTrainSettings.from_file(name) if name.endswith(".json") else PRESETS[name]
        config = dataclasses.replace(base, checkpoint_every=0, dropout=0.1)
        if args.rows:
            config = dataclasses.replace(config, rows=args.rows)
        if args.negatives is not None:
            config = dataclasses.replace(config, negatives=args.negatives)
        out = Path(tempfile.mkdtemp())
        try:
            trainer = Trainer(config, [str(p) for p in paths], out, init=args.init,
                              progress=False, log=lambda m: None)
        finally:
            shutil.rmtree(out)
        width = config.negatives + 1 if config.negatives else len(trainer.vocab)
        per_position = position_flops(config.model, width)
        cnn_work = CnnWork(trainer.model.bilm.token_encoder, config.model)
        for mode in args.bf16.split(","):
            trainer.config = dataclasses.replace(config, bf16=mode)
            batcher = StreamBatcher(lambda: read_sentences(paths), trainer.vocab, config.rows,
                                    config.unroll, config.model.bidirectional)
            times, tokens, flops = [], 0, 0.0
            for step in range(3 + args.steps):
                cnn_work.flops = 0.0
                start = time.perf_counter()
                _, n = trainer.train_step(batcher)
                if step >= 3:
                    times.append(time.perf_counter() - start)
                    tokens += n
                    flops += 3 * (cnn_work.flops + n * per_position)
            rate = tokens / len(times) / statistics.median(times)
            gflops = flops / len(times) / statistics.median(times) / 1e9
            print(f"{name:<12} {mode:<9} {config.rows:>6} x {config.unroll:<4} "
                  f"{len(trainer.vocab):>6} {rate:>9.0f} {gflops:>8.1f} {gflops / peak:>7.1%}",
                  flush=True)


if __name__ == "__main__":
    main()
