"""A trained translation model: its files, perplexity, translation (greedy/beam), BLEU."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from tqdm import tqdm

from contextvec.choices import checked_choice
from contextvec.encoders.cove.loader import COVE, load_words, save_words
from contextvec.encoders.cove.mt_lstm import pad_ids
from contextvec.encoders.cove.seq2seq import MODEL_TYPE, Seq2Seq, Seq2SeqConfig
from contextvec.encoders.registry import refuse_other_kinds
from contextvec.extras import needs
from contextvec.io.atomic import atomic_path
from contextvec.io.native import is_native_dir, load_native, save_native
from contextvec.training.corpus import CorpusVocabulary
from contextvec.training.loop import MODEL_DIR, TRAINING_RECORD
from contextvec.training.mt.config import BleuTokenize
from contextvec.training.mt.data import SentencePair

with needs("mt"):
    import sacrebleu

TARGET_VOCAB = "target_vocab.txt"
IGNORE = -100  # cross_entropy's ignore_index: padding of the targets


def save_translator(model: Seq2Seq, target_vocab: CorpusVocabulary, directory: str | os.PathLike,
                    record: dict[str, Any] | None = None) -> Path:
    """A ``"cove-seq2seq"`` directory: config.json, model.safetensors, words.json (source
    words, row i of ``encoder.word_vectors``), target_vocab.txt and, if given, training.json.
    ``contextvec.encoders.cove.load_cove_encoder`` reads its encoder."""
    directory = save_native(directory, MODEL_TYPE, model.config.to_dict(), model.state_dict())
    save_words(model.encoder.words, directory)
    with atomic_path(directory / TARGET_VOCAB) as tmp:
        target_vocab.save(tmp)
    if record is not None:
        with atomic_path(directory / TRAINING_RECORD) as tmp:
            tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return directory


def resolve_model_dir(path: str | os.PathLike) -> Path:
    """A model directory, or a ``train-mt`` output directory (its ``model/``)."""
    path = Path(path)
    if path.is_dir():  # a translation model is recognised as CoVe (its encoder is one)
        refuse_other_kinds(path, (COVE,), "a translation model trained by train-mt")
    if not is_native_dir(path) and is_native_dir(path / MODEL_DIR):
        return path / MODEL_DIR
    if not is_native_dir(path):
        raise FileNotFoundError(f"{path}: no translation model (config.json + model.safetensors, "
                                f"or a train-mt output directory with {MODEL_DIR}/)")
    return path


def load_translator(path: str | os.PathLike, device: str | torch.device = "cpu"
                    ) -> tuple[Seq2Seq, CorpusVocabulary]:
    """A saved translation model (eval mode) and its target vocabulary."""
    directory = resolve_model_dir(path)
    model_type, config, state = load_native(directory)
    if model_type != MODEL_TYPE:
        raise ValueError(f"{directory}: model_type {model_type!r} is not a translation model")
    model = Seq2Seq(Seq2SeqConfig.from_dict(config), load_words(directory),
                    state["encoder.word_vectors"])
    model.load_state_dict(state)
    return model.to(device).eval(), CorpusVocabulary.load(directory / TARGET_VOCAB)


def batch_tensors(model: Seq2Seq, sources: Sequence[Sequence[int]],
                   targets: Sequence[Sequence[int]], vocab: CorpusVocabulary
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    device = model.encoder.word_vectors.device
    src, src_len = pad_ids(sources, device)
    tgt_in, _ = pad_ids([[vocab.bos, *t] for t in targets], device)
    tgt_out, _ = pad_ids([[*t, vocab.eos] for t in targets], device, pad=IGNORE)
    return src, src_len, tgt_in, tgt_out


def nll(model: Seq2Seq, batch: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, int]:
    src, src_len, tgt_in, tgt_out = batch
    logits = model(src, src_len, tgt_in)
    total = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=IGNORE,
                            reduction="sum")
    return total, int((tgt_out != IGNORE).sum())


@torch.no_grad()
def perplexity(model: Seq2Seq, vocab: CorpusVocabulary, pairs: Sequence[SentencePair],
               batch_size: int = 64) -> float:
    """Teacher-forced target perplexity, ``exp(mean NLL)`` over target tokens and ``</S>``."""
    was_training = model.training
    model.eval()
    sources = [model.encoder.token_ids(s) for s, _ in pairs]
    targets = [[vocab.id(w) for w in t] for _, t in pairs]
    order = sorted(range(len(pairs)), key=lambda i: len(sources[i]))
    total, count = 0.0, 0
    for k in range(0, len(order), batch_size):
        idx = order[k:k + batch_size]
        nll_sum, n = nll(model, batch_tensors(model, [sources[i] for i in idx],
                                            [targets[i] for i in idx], vocab))
        total += float(nll_sum)
        count += n
    model.train(was_training)
    return math.exp(total / max(count, 1))


@torch.no_grad()
def translate(model: Seq2Seq, vocab: CorpusVocabulary, sentences: Sequence[Sequence[str]],
              beam: int = 1, batch_size: int = 64, length_penalty: float = 0.0,
              max_len: int | None = None, progress: bool = False) -> list[list[str]]:
    """Target token lists for source token lists, in input order (an empty source gives an
    empty translation). ``beam`` 1 decodes greedily."""
    was_training = model.training
    model.eval()
    out: list[list[str]] = [[] for _ in sentences]
    nonempty = sorted((i for i, s in enumerate(sentences) if s), key=lambda i: -len(sentences[i]))
    rows = max(1, batch_size // beam) if beam > 1 else batch_size
    start, tokens = time.perf_counter(), 0  # source tokens, for the tokens/s figure
    bar = tqdm(total=len(nonempty), desc=f"translating (beam {beam})", unit="sent",
               disable=not progress, mininterval=0.5 if sys.stderr.isatty() else 30.0)
    for k in range(0, len(nonempty), rows):
        idx = nonempty[k:k + rows]
        src, src_len = model.encoder.batch_ids([sentences[i] for i in idx])
        if beam == 1:
            hyps = model.greedy(src, src_len, vocab.bos, vocab.eos, max_len)
        else:
            hyps = model.beam_search(src, src_len, vocab.bos, vocab.eos, beam, length_penalty, max_len)
        for i, hyp in zip(idx, hyps, strict=True):
            out[i] = [vocab.tokens[t] for t in hyp]
        bar.update(len(idx))
        tokens += sum(len(sentences[i]) for i in idx)
        bar.set_postfix(tok_s=f"{tokens / max(time.perf_counter() - start, 1e-9):.0f}", refresh=False)
    bar.close()
    model.train(was_training)
    return out


def bleu(hypotheses: Sequence[Sequence[str]], references: Sequence[Sequence[str]],
         tokenize: BleuTokenize | str = BleuTokenize.NONE) -> Any:
    """sacrebleu's corpus BLEU of token lists, uncased (``lowercase=True``). ``tokenize="none"``
    scores the given tokens (tokenized BLEU, as multi-bleu.perl); ``"13a"`` re-tokenizes the
    joined text the WMT way. Returns a ``sacrebleu`` ``BLEUScore`` (``.score``, ``str()``)."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    tokenize = checked_choice(BleuTokenize, tokenize, "tokenize")
    return sacrebleu.corpus_bleu([" ".join(h) for h in hypotheses],
                                 [[" ".join(r) for r in references]],
                                 tokenize=tokenize.value, lowercase=True,
                                 force=tokenize is BleuTokenize.NONE)  # tokenized input is intended there


def bleu_signature(tokenize: BleuTokenize | str = BleuTokenize.NONE) -> str:
    """sacrebleu's signature of :func:`bleu`'s settings (one reference)."""
    metric = sacrebleu.BLEU(tokenize=checked_choice(BleuTokenize, tokenize, "tokenize").value, lowercase=True)
    metric.corpus_score(["a"], [["a"]])  # the signature needs the number of references
    return str(metric.get_signature())
