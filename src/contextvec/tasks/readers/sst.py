"""Stanford Sentiment Treebank: one PTB-style tree per line, every node labelled 0-4; the root
label is the sentence label and the leaves are the tokens. ``sst5`` keeps the five classes;
``sst2`` maps 0,1 -> ``negative`` and 3,4 -> ``positive`` and drops root label 2 (neutral).

The treebank's PTB escapes are undone so that tokens look like the raw text an encoder was
trained on: ``-LRB-`` -> ``(``, ``-RRB-`` -> ``)``, ``-LSB-``/``-RSB-`` -> ``[``/``]``,
``-LCB-``/``-RCB-`` -> ``{``/``}``, ``\\/`` -> ``/``, ``\\*`` -> ``*``. The quote tokens
`````` and ``''`` are kept (they are also how PTB-tokenized news, ELMo's training text, writes
quotes).
"""

from __future__ import annotations

import os
import re
from functools import partial

from contextvec.tasks.readers.lines import line_items
from contextvec.tasks.split import LabeledSentences

SST_VARIANTS = ("sst5", "sst2")
FORMAT = "SST trees: UTF-8, one labelled PTB tree per line, e.g. (3 (2 a) (4 fine) (2 film))"
SST2_LABELS = {"0": "negative", "1": "negative", "3": "positive", "4": "positive"}
_PTB_UNESCAPE = {
    "-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}",
}
_TREE_TOKEN = re.compile(r"\(|\)|[^\s()]+")


def parse_tree(line: str, where: str = "<string>") -> tuple[str, list[str]]:
    """A PTB-style SST tree -> (root label, leaf tokens with PTB escapes undone)."""
    items = _TREE_TOKEN.findall(line)
    if len(items) < 4 or items[0] != "(" or items[-1] != ")":
        raise ValueError(f"{where}: not a tree: {line[:80]!r}")
    depth = 0
    leaves: list[str] = []
    for i, item in enumerate(items):
        if item == "(":
            depth += 1
            if i + 1 >= len(items) or items[i + 1] in ("(", ")"):
                raise ValueError(f"{where}: a node without a label at item {i}")
        elif item == ")":
            depth -= 1
            if depth < 0 or (depth == 0 and i != len(items) - 1):
                raise ValueError(f"{where}: unbalanced brackets")
        elif items[i - 1] != "(":  # not a label: a leaf
            leaves.append(unescape_ptb(item))
    if depth != 0:
        raise ValueError(f"{where}: unbalanced brackets")
    if not leaves:
        raise ValueError(f"{where}: a tree without leaves")
    return items[1], leaves


def unescape_ptb(token: str) -> str:
    """Undo the PTB escapes of SST leaves (see the module docstring)."""
    token = _PTB_UNESCAPE.get(token, token)
    return token.replace("\\/", "/").replace("\\*", "*")


def _sentence(variant: str, line: str, where: str) -> tuple[str, list[str]] | None:
    label, tokens = parse_tree(line, where)
    if label not in ("0", "1", "2", "3", "4"):
        raise ValueError(f"{where}: root label {label!r} is not 0-4")
    if variant == "sst2":
        if label == "2":
            return None
        label = SST2_LABELS[label]
    return label, tokens


def read_sst(
    path: str | os.PathLike, variant: str = "sst5", max_sentences: int | None = None
) -> LabeledSentences:
    """SST trees (plain or ``.gz``) -> sentences with their root labels.

    ``sst5``: labels ``"0"`` .. ``"4"``; ``sst2``: ``negative``/``positive``, neutral roots dropped
    (``max_sentences`` counts the kept sentences).
    """
    if variant not in SST_VARIANTS:
        raise ValueError(f"variant must be one of {SST_VARIANTS}, not {variant!r}")
    return line_items(path, partial(_sentence, variant), max_sentences, FORMAT)
