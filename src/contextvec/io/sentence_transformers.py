"""A sentence-transformers model directory's sentence embedding, as declared by its files.

sentence-transformers stores a pipeline of modules beside the HF checkpoint: ``modules.json``
lists them in order (``Transformer``, then ``Pooling``, often ``Normalize``), the ``Pooling``
module's folder holds ``config.json`` with its ``pooling_mode_*`` flags, and
``sentence_bert_config.json`` holds the transformer's ``max_seq_length`` and ``do_lower_case``.
These functions read that declaration; running it is
:class:`contextvec.encoders.bert.sentence.BertSentenceEncoder`'s job.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from contextvec.io.untrusted import UntrustedFileError, model_file, read_json

MODULES_NAME = "modules.json"
SENTENCE_BERT_CONFIG = "sentence_bert_config.json"

POOLING_MODES = ("cls_token", "max_tokens", "mean_tokens", "mean_sqrt_len_tokens",
                 "weightedmean_tokens", "lasttoken")
"""The ``pooling_mode_*`` flags, in the order sentence-transformers concatenates their vectors."""

RUN_MODULES = ("Transformer", "Pooling", "Normalize")
"""The module classes contextvec runs; a pipeline with any other (``Dense``, ...) is refused."""


class SentencePipelineError(ValueError):
    """A sentence-transformers declaration that cannot be read or that contextvec cannot run."""


@dataclass(frozen=True)
class SentencePooling:
    """How a sentence vector is made of the top layer's word-piece vectors ([CLS] and [SEP]
    included): the ``modes`` concatenated in that order, then unit length if ``normalize``.

    ``max_seq_length``: the most pieces (with [CLS] and [SEP]) the model takes, None for the
    position embeddings' limit; ``lowercase``: lower-case the text first (``do_lower_case``).
    The default is what sentence-transformers builds for a plain BERT checkpoint: mean pooling,
    no normalisation.
    """

    modes: tuple[str, ...] = ("mean_tokens",)
    normalize: bool = False
    max_seq_length: int | None = None
    lowercase: bool = False


def _read(directory: Path, name: str) -> object:
    """A JSON file the pipeline names: a regular file inside ``directory``, read with a cap."""
    try:
        return read_json(model_file(directory, name))
    except UntrustedFileError as e:
        raise SentencePipelineError(f"{e.path}: cannot read it ({e.problem})") from None
    except OSError as e:
        raise SentencePipelineError(f"{directory / name}: cannot read it ({e})") from None


def read_sentence_pooling(directory: str | os.PathLike) -> SentencePooling | None:
    """The sentence embedding declared in ``directory`` (None without ``modules.json``).

    Raises :class:`SentencePipelineError` for unreadable files and for pipelines with modules
    other than :data:`RUN_MODULES` or without a ``Pooling`` module.
    """
    directory = Path(directory)
    modules_path = directory / MODULES_NAME
    if not modules_path.is_file():
        return None
    modules = _read(directory, MODULES_NAME)
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise SentencePipelineError(f"{modules_path}: expected a list of modules")
    pooling: dict | None = None
    normalize = False
    for module in modules:
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        if kind not in RUN_MODULES:
            raise SentencePipelineError(
                f"{modules_path}: the model's sentence embedding needs the module "
                f"{module.get('type')!r} ({module.get('path') or module.get('name')}), which contextvec "
                f"does not run (it runs {', '.join(RUN_MODULES)})")
        if kind == "Pooling":
            config = _read(directory, os.path.join(str(module.get("path", "")), "config.json"))
            pooling = config if isinstance(config, dict) else {}
        normalize = normalize or kind == "Normalize"
    if pooling is None:
        raise SentencePipelineError(f"{modules_path}: no Pooling module")
    modes = tuple(mode for mode in POOLING_MODES if pooling.get(f"pooling_mode_{mode}"))
    unknown = sorted(key for key, value in pooling.items() if key.startswith("pooling_mode_")
                     and value is True and key.removeprefix("pooling_mode_") not in POOLING_MODES)
    if unknown or not modes:
        raise SentencePipelineError(f"{modules_path}: the Pooling module's modes "
                                    f"{unknown or 'none'} are not ones contextvec runs "
                                    f"({', '.join(POOLING_MODES)})")
    settings: object = {}
    if (directory / SENTENCE_BERT_CONFIG).is_file():
        settings = _read(directory, SENTENCE_BERT_CONFIG)
    settings = settings if isinstance(settings, dict) else {}
    longest = settings.get("max_seq_length")
    return SentencePooling(modes=modes, normalize=normalize,
                           max_seq_length=longest if isinstance(longest, int) and longest > 0 else None,
                           lowercase=settings.get("do_lower_case") is True)
