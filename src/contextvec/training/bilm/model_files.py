"""A trained biLM's files (model + softmax + vocabulary), its perplexity, its starting point.

:func:`save_model`/:func:`load_model` read and write a contextvec model directory that keeps
the softmax and the vocabulary (for perplexity and fine-tuning); :func:`evaluate_perplexity` is the exact
full-softmax perplexity; :func:`init_weights` is bilm-tf's initialisation of a new model;
:func:`fine_tuning_config` gives the settings a model is continued with by default.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm import tqdm

from contextvec.encoders.bilm import MODEL_TYPE
from contextvec.encoders.bilm.config import BiLMConfig
from contextvec.encoders.registry import family_of
from contextvec.io.atomic import atomic_path
from contextvec.io.native import load_native, save_native
from contextvec.training.bilm.batcher import StreamBatcher, Window
from contextvec.training.bilm.config import BiLMTrainSettings
from contextvec.training.bilm.lm import LanguageModel, LSTMState
from contextvec.training.corpus import CorpusVocabulary
from contextvec.training.loop import TRAINING_RECORD

VOCAB_FILE = "vocab.txt"
FINE_TUNING_LR_FACTOR = 0.1
"""Fine-tuning's default learning rate is the recorded one times this: the optimizer restarts
from a fresh state, and at the full rate its first steps undo much of what the model knew:
held-out perplexity after them is worse than before, where at a tenth of the rate it is not."""


@dataclass
class Perplexity:
    forward: float
    backward: float | None
    tokens: int

    @property
    def average(self) -> float:
        """Mean of the two directions' perplexities (bilm-tf's figure); forward-only: forward."""
        return self.forward if self.backward is None else (self.forward + self.backward) / 2


def save_model(model: LanguageModel, vocab: CorpusVocabulary, directory: str | os.PathLike) -> Path:
    """A contextvec model directory with the softmax and vocabulary (for perplexity/fine-tuning)."""
    directory = Path(directory)
    state = {f"softmax.{k}": v for k, v in model.softmax.state_dict().items()}
    state.update(model.bilm.state_dict())
    save_native(directory, MODEL_TYPE, model.config.to_dict(), state)
    with atomic_path(directory / VOCAB_FILE) as tmp:
        vocab.save(tmp)
    return directory


def load_model(directory: str | os.PathLike) -> tuple[LanguageModel, CorpusVocabulary]:
    """A trained model directory (or a bundled model's name) -> (LM with softmax, vocabulary)."""
    from contextvec.api import bundled_models, resolve_model  # api imports the encoders, not the trainer

    given, directory = directory, resolve_model(directory)
    trained = [name for name, path in bundled_models().items() if (path / VOCAB_FILE).is_file()]
    wanted = "a biLM (ELMo) trained by train-bilm" + "".join(f" or {name}" for name in trained)
    if not directory.is_dir():
        raise FileNotFoundError(f"no model directory {given}: this command needs {wanted}")
    family = family_of(directory)
    if family is not None and family.name != MODEL_TYPE:
        softmax = " (bilm-tf files keep no softmax)" if family.name == "bilm-tf" else ""
        raise ValueError(f"this command needs {wanted}; {given} is {family.kind}{softmax}")
    if not (directory / VOCAB_FILE).is_file():
        raise FileNotFoundError(f"{given} has no {VOCAB_FILE} (its softmax's vocabulary): this "
                                f"command needs {wanted}, which keep it")
    _, config, state = load_native(directory)
    vocab = CorpusVocabulary.load(directory / VOCAB_FILE)
    model = LanguageModel(BiLMConfig.from_dict(config), len(vocab))
    softmax = {k.removeprefix("softmax."): v for k, v in state.items() if k.startswith("softmax.")}
    if not softmax:
        raise ValueError(f"{directory}: the model has no softmax weights")
    model.softmax.load_state_dict(softmax)
    model.bilm.load_state_dict({k: v for k, v in state.items() if not k.startswith("softmax.")})
    return model, vocab


def training_record(directory: str | os.PathLike) -> dict[str, Any]:
    """The ``training.json`` of a model directory (or bundled model), empty if it has none."""
    from contextvec.api import resolve_model

    path = resolve_model(directory) / TRAINING_RECORD
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def fine_tuning_config(init: str | os.PathLike, model: BiLMConfig) -> BiLMTrainSettings:
    """The default settings for continuing the model ``init`` (whose architecture is ``model``).

    Its recorded training settings (``training.json``), with the learning rate times
    :data:`FINE_TUNING_LR_FACTOR`, the full softmax (exact gradients: a domain corpus is small,
    and sampled negatives moved the bundled model away from its own text), one epoch, and
    nothing that belonged to the recorded run's own corpus or schedule (``max_steps``,
    ``skip_lines``, the epoch-numbered halving and averaging). A model without a record gets
    :class:`BiLMTrainSettings`'s defaults (bilm-tf's Adagrad recipe) on the same terms.
    """
    recorded = training_record(init).get("config")
    base = BiLMTrainSettings.from_dict(recorded) if recorded else BiLMTrainSettings()
    return dataclasses.replace(
        base, model=model, lr=base.lr * FINE_TUNING_LR_FACTOR, negatives=0, epochs=1, max_steps=None,
        skip_lines=0, halve_from_epoch=None, average_from_epoch=None,
    )


@torch.no_grad()
def evaluate_perplexity(
    model: LanguageModel,
    sentences: Callable[[], Iterator[list[str]]],
    vocab: CorpusVocabulary,
    rows: int = 32,
    unroll: int = 20,
    progress: bool = False,
    contiguous: bool = False,
) -> Perplexity:
    """Exact full-softmax perplexity, ``exp(mean NLL)`` with gold history, per direction.

    ``contiguous`` reads the file as ``rows`` contiguous streams (the PTB convention), so every
    sentence is scored after its real predecessors; otherwise sentences are dealt to the rows.
    """
    batcher = StreamBatcher(sentences, vocab, rows, unroll, model.config.bidirectional, contiguous=contiguous)
    return score_windows(model, ((window, []) for window in batcher), "perplexity", progress)


@torch.no_grad()
def score_windows(model: LanguageModel, windows: Iterable[tuple[Window, list[int]]], description: str,
                  progress: bool = False) -> Perplexity:
    """``exp(mean NLL)`` per direction of ``windows``, read in order with the LSTM states carried
    from each window to the next; each comes with the rows that start afresh there (their states
    zeroed first). The model runs in eval mode and is put back as it was.

    Raises:
        ValueError: no token to score.
    """
    was_training = model.training
    model.eval()
    bidirectional = model.config.bidirectional
    nll = torch.zeros(2 if bidirectional else 1, dtype=torch.float64)
    count = torch.zeros_like(nll)
    state: LSTMState | None = None
    bar = tqdm(desc=description, unit="tok", unit_scale=True, disable=not progress)
    for window, fresh in windows:
        if state is not None and fresh:
            _zero_rows(state, fresh)
        sums, counts, state = model(window, state)
        nll += sums.double().cpu()
        count += counts.double().cpu()
        bar.update(int(counts[0]))
    bar.close()
    model.train(was_training)
    if not count[0]:
        raise ValueError("no tokens to score: the text is empty")
    ppl = torch.exp(nll / count.clamp(min=1)).tolist()
    return Perplexity(ppl[0], ppl[1] if bidirectional else None, int(count[0]))


def _zero_rows(state: LSTMState, rows: list[int]) -> None:
    index = torch.tensor(rows, dtype=torch.long, device=state[0][0].device)
    for h, c in state:  # each (directions, rows, dim)
        h[:, index] = 0
        c[:, index] = 0


def init_weights(model: LanguageModel, seed: int) -> None:
    """bilm-tf's initialisation. The small, zero-centred char-CNN start matters: with
    PyTorch's default (random biases, larger conv weights) the max-pooled features share a large
    common offset, tanh saturates, and the token vectors of all words collapse into one (all
    pairwise cosines 1, the model stuck at unigram perplexity)."""
    torch.manual_seed(seed)
    cnn = model.bilm.token_encoder
    with torch.no_grad():
        nn.init.uniform_(cnn.char_embedding.weight, -1.0, 1.0)
        cnn.char_embedding.weight[0].zero_()
        for conv in cnn.convolutions:
            width, dim = conv.kernel_size[0], conv.in_channels
            if model.config.activation == "tanh":
                nn.init.uniform_(conv.weight, -0.05, 0.05)
            else:
                nn.init.normal_(conv.weight, 0.0, (1.0 / (width * dim)) ** 0.5)
            nn.init.zeros_(conv.bias)
        n_filters = model.config.n_filters
        for transform, gate in zip(cnn.highway.transform, cnn.highway.gate, strict=True):
            for linear in (transform, gate):
                nn.init.normal_(linear.weight, 0.0, (1.0 / n_filters) ** 0.5)
            nn.init.zeros_(transform.bias)
            nn.init.constant_(gate.bias, -2.0)  # carry the input at first
        if isinstance(cnn.projection, nn.Linear):
            nn.init.normal_(cnn.projection.weight, 0.0, (1.0 / n_filters) ** 0.5)
            nn.init.zeros_(cnn.projection.bias)
        for layer in model.bilm.layers:
            layer.reset_parameters()
        nn.init.normal_(model.softmax.weight, 0.0, model.config.projection_dim**-0.5)
        nn.init.zeros_(model.softmax.bias)
