"""``contextvec train-mt``: train CoVe's attentional translation model (its encoder is CoVe)."""

from __future__ import annotations

import argparse
import time

import torch

from contextvec.training.mt import MTTrainConfig, MTTrainer

HELP = "train CoVe's attentional seq2seq translation model (MT-LSTM encoder) on parallel files"
OVERRIDES = ("hidden_size", "num_layers", "target_dim", "dropout", "trainable_unk", "lowercase",
             "max_word_vectors", "min_count", "max_vocab", "batch_size", "max_length", "optimizer",
             "lr", "lr_halving", "clip", "epochs", "max_steps", "checkpoint_every", "valid_beam",
             "select", "bleu_tokenize", "tokenizer", "seed")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    d = MTTrainConfig()
    p = subparsers.add_parser("train-mt", help=HELP, description=HELP)
    p.add_argument("--train-src", required=True, help="source (English) training file, plain or .gz")
    p.add_argument("--train-tgt", required=True, help="target (German) training file, line-aligned")
    p.add_argument("--valid-src", help="source validation file (perplexity and BLEU after each epoch)")
    p.add_argument("--valid-tgt", help="target validation file")
    p.add_argument("--word-vectors", required=True,
                   help="fixed source word vectors (GloVe or word2vec text/binary)")
    p.add_argument("--output-dir", required=True,
                   help="checkpoint.pt, vocabularies and model/ (the best model on valid)")
    p.add_argument("--resume", action="store_true", help="continue from the output's checkpoint")
    p.add_argument("--threads", type=int, help="torch CPU threads")
    p.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda:0")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    g = p.add_argument_group("model")
    g.add_argument("--hidden-size", type=int, help=f"MT-LSTM units per direction ({d.hidden_size}); "
                   "the decoder has twice as many")
    g.add_argument("--num-layers", type=int, help=f"encoder and decoder layers ({d.num_layers})")
    g.add_argument("--target-dim", type=int, help=f"target embedding size ({d.target_dim})")
    g.add_argument("--dropout", type=float, help=f"dropout ({d.dropout})")
    g.add_argument("--trainable-unk", action=argparse.BooleanOptionalAction, default=None,
                   help="learn the vector of source words without a word vector (default: zero, fixed)")
    g.add_argument("--lowercase", action=argparse.BooleanOptionalAction, default=None,
                   help="look source words up lower-cased (default: if the vectors are all lower-case)")
    g.add_argument("--max-word-vectors", type=int, help="read only the first N word vectors")
    g.add_argument("--min-count", type=int, help=f"target vocabulary: minimum count ({d.min_count})")
    g.add_argument("--max-vocab", type=int, help="target vocabulary: maximum size")
    g = p.add_argument_group("training")
    g.add_argument("--batch-size", type=int, help=f"sentence pairs per step ({d.batch_size})")
    g.add_argument("--max-length", type=int, help="leave out training pairs with a longer side")
    g.add_argument("--optimizer", choices=("adam", "sgd"), help="adam (default, lr 0.001) or sgd "
                   "(lr 1.0, halved when valid perplexity rises)")
    g.add_argument("--lr", type=float)
    g.add_argument("--lr-halving", action=argparse.BooleanOptionalAction, default=None,
                   help="halve the lr after an epoch whose valid perplexity rose (default: with sgd)")
    g.add_argument("--clip", type=float, help=f"gradient norm clipping, 0: off ({d.clip})")
    g.add_argument("--epochs", type=int, help=f"({d.epochs})")
    g.add_argument("--max-steps", type=int)
    g.add_argument("--checkpoint-every", type=int, help=f"steps between checkpoints ({d.checkpoint_every})")
    g.add_argument("--valid-beam", type=int, help="beam for the valid BLEU (1: greedy, the default)")
    g.add_argument("--select", choices=("bleu", "perplexity"),
                   help="what 'best on valid' means for model/ (default: bleu)")
    g.add_argument("--bleu-tokenize", choices=("none", "13a"),
                   help="sacrebleu tokenization: none (default; tokenized BLEU of the given tokens) or 13a")
    g.add_argument("--tokenizer", choices=("whitespace", "moses"),
                   help="how lines become tokens (default: whitespace, for pre-tokenized files)")
    g.add_argument("--seed", type=int)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    if args.threads:
        torch.set_num_threads(args.threads)
    config = MTTrainConfig(**{k: getattr(args, k) for k in OVERRIDES if getattr(args, k) is not None})
    start = time.perf_counter()
    trainer = MTTrainer(config, args.train_src, args.train_tgt, args.word_vectors, args.output_dir,
                        args.valid_src, args.valid_tgt, progress=not args.quiet, device=args.device)
    history = trainer.train(resume=args.resume)
    print(f"trained {trainer.step} steps in {time.perf_counter() - start:.0f} s")
    chosen = [h for h in history if h.get("best")]  # the last one flagged is the best
    if chosen:
        best = chosen[-1]
        print(f"best on valid: epoch {best['epoch']}, perplexity {best['valid_perplexity']:.2f}, "
              f"BLEU {best['valid_bleu']:.2f}")
