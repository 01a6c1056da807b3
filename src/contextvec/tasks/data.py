"""The CoNLL-U reader under its earlier name; it lives in :mod:`contextvec.tasks.readers.conllu`."""

from contextvec.io.text_lines import open_text
from contextvec.tasks.readers.conllu import TAG_COLUMNS, iter_conllu, parse_conllu, read_conllu
from contextvec.tasks.split import TaggedCorpus

__all__ = ["TAG_COLUMNS", "TaggedCorpus", "iter_conllu", "open_text", "parse_conllu", "read_conllu"]
