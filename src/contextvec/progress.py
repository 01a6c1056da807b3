"""One progress bar for the commands that embed: sentences, with tokens per second beside them."""

from __future__ import annotations

from tqdm import tqdm


class SentenceBar:
    """Moves ``bar`` by the sentences embedded, with the tokens per second beside it. With
    ``items`` (e.g. ``"doc"``), :meth:`item_done` counts finished items, shown before the rate.
    Safe to call from the engine's torch thread: tqdm updates under its own lock."""

    def __init__(self, bar: tqdm, items: str | None = None) -> None:
        self._bar = bar
        self._items = items
        self._tokens = self._done = 0

    def __call__(self, sentences: int, tokens: int) -> None:
        self._tokens += tokens
        self._postfix()
        self._bar.update(sentences)

    def item_done(self) -> None:
        self._done += 1
        self._postfix()
        self._bar.refresh()

    def _postfix(self) -> None:
        rate = f"{self._tokens / max(self._bar.format_dict['elapsed'], 1e-9):.0f} tok/s"
        self._bar.set_postfix_str(rate if self._items is None else f"{self._done} {self._items}, {rate}",
                                  refresh=False)
