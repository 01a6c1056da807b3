"""ELMo character ids: the byte-level scheme shared by bilm-tf and allennlp.

A token becomes 50 ids: beginning-of-word, its UTF-8 bytes (cut to 48 bytes, which may split a
multi-byte character), end-of-word, then in-word padding. Every id is shifted by +1 so that 0 can
mean "no token here" (sequence padding); a model trained with 261 characters therefore runs with
262 embedding rows. A token that is exactly ``<S>`` or ``</S>`` gets the sentence-boundary rows
instead of its characters, as allennlp's ``ELMoCharacterMapper`` and bilm-tf's vocabulary give it:
the biLM was trained with those rows for the boundaries.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import torch

MAX_CHARS_PER_TOKEN = 50
MAX_BYTES_PER_TOKEN = MAX_CHARS_PER_TOKEN - 2

# Raw (training) ids of the special characters; inference ids are these + 1.
BOS_CHAR = 256
EOS_CHAR = 257
BOW_CHAR = 258
EOW_CHAR = 259
PAD_CHAR = 260

BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"


def _special_token(char: int) -> np.ndarray:
    ids = np.full(MAX_CHARS_PER_TOKEN, PAD_CHAR + 1, dtype=np.int64)
    ids[:3] = (BOW_CHAR + 1, char + 1, EOW_CHAR + 1)
    return ids


BOS_IDS = _special_token(BOS_CHAR)
EOS_IDS = _special_token(EOS_CHAR)


@lru_cache(maxsize=100_000)
def _token_ids_cached(token: str) -> bytes:
    if token == BOS_TOKEN:
        return BOS_IDS.tobytes()
    if token == EOS_TOKEN:
        return EOS_IDS.tobytes()
    data = token.encode("utf-8", "ignore")[:MAX_BYTES_PER_TOKEN]
    ids = np.full(MAX_CHARS_PER_TOKEN, PAD_CHAR + 1, dtype=np.int64)
    ids[0] = BOW_CHAR + 1
    ids[1 : len(data) + 1] = np.frombuffer(data, dtype=np.uint8).astype(np.int64) + 1
    ids[len(data) + 1] = EOW_CHAR + 1
    return ids.tobytes()


def token_to_char_ids(token: str) -> np.ndarray:
    """The 50 inference-time character ids of one token.

    The model adds the sentence boundaries itself; a token that is literally ``<S>`` or ``</S>``
    gets their ids (:data:`BOS_IDS` / :data:`EOS_IDS`), as in allennlp and bilm-tf. Characters
    that cannot be encoded (lone surrogates) are dropped, as ``str.encode("utf-8", "ignore")``
    does.
    """
    return np.frombuffer(_token_ids_cached(token), dtype=np.int64).copy()


def batch_to_char_ids(sentences: Sequence[Sequence[str]]) -> torch.Tensor:
    """Character ids of a batch of tokenized sentences.

    Returns a ``(batch, max_tokens, 50)`` int64 tensor; rows past a sentence's end are all 0.
    Identical to allennlp's ``batch_to_ids``.
    """
    width = max((len(s) for s in sentences), default=0)
    out = np.zeros((len(sentences), width, MAX_CHARS_PER_TOKEN), dtype=np.int64)
    for i, sentence in enumerate(sentences):
        for j, token in enumerate(sentence):
            out[i, j] = np.frombuffer(_token_ids_cached(token), dtype=np.int64)
    return torch.from_numpy(out)
