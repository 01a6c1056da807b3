"""Char-CNN vectors of recently seen tokens, keyed by their 50 character ids.

allennlp's ``Elmo`` receives character ids, not strings, so the string-keyed cache of
:class:`~contextvec.encoders.bilm.ElmoEncoder` cannot serve it; this one keys on the id rows
themselves, which also covers tokens cut at 48 bytes exactly as the model sees them. It is used
only while no gradient flows into the CNN, and any change to the CNN's weights (an optimizer
step, ``load_state_dict``, ``.to(device)``) empties it.
"""

from __future__ import annotations

from collections import OrderedDict

import torch

from contextvec.encoders.bilm import CharCNN
from contextvec.encoders.torch_private import weights_key


class TokenVectorCache:
    """An LRU map from a row of character ids to its char-CNN vector (``size`` entries)."""

    def __init__(self, size: int = 50_000) -> None:
        self.size = size
        self._store: OrderedDict[bytes, torch.Tensor] = OrderedDict()
        self._weights_key: tuple = ()

    def vectors(self, cnn: CharCNN, char_ids: torch.Tensor) -> torch.Tensor:
        """CNN vectors ``(n, dim)`` for character ids ``(n, 50)``, computing only unseen rows."""
        key = weights_key(cnn.parameters())
        if key != self._weights_key:
            self._store.clear()
            self._weights_key = key
        rows = char_ids.cpu().numpy()
        keys = [row.tobytes() for row in rows]
        store = self._store
        missing: dict[bytes, int] = {}
        for index, k in enumerate(keys):
            if k not in store and k not in missing:
                missing[k] = index
        if missing:
            computed = cnn(char_ids[list(missing.values())])
            for k, vector in zip(missing, computed, strict=True):
                store[k] = vector
        out = torch.stack([store[k] for k in keys])
        for k in dict.fromkeys(keys):
            store.move_to_end(k)
        while len(store) > self.size:
            store.popitem(last=False)
        return out
