"""Readers of the task datasets, one module per format: CoNLL-2003 NER (:mod:`.conll2003`), SST
trees (:mod:`.sst`), TREC questions (:mod:`.trec`), CoNLL-U (:mod:`.conllu`), GLUE's TSVs
(:mod:`.glue`).

Every reader takes a plain or ``.gz`` path, an optional ``max_sentences`` (the first N items of
the file, for quick runs), drops a UTF-8 byte-order mark, and raises a ``ValueError`` naming the
file and line for malformed input (an ``IsADirectoryError`` for a directory); nothing is skipped
silently. Tag-scheme conversions live in :mod:`contextvec.tasks.schemes`.
"""

from contextvec.tasks.readers.conll2003 import iter_conll2003, parse_conll2003, read_conll2003
from contextvec.tasks.readers.conllu import TAG_COLUMNS, iter_conllu, parse_conllu, read_conllu
from contextvec.tasks.readers.glue import GLUE_FORMATS, STSB_RANGE, GlueFormat, read_glue
from contextvec.tasks.readers.lines import open_task_file
from contextvec.tasks.readers.sst import SST2_LABELS, SST_VARIANTS, parse_tree, read_sst, unescape_ptb
from contextvec.tasks.readers.trec import TREC_COARSE, parse_trec_line, read_trec
from contextvec.tasks.schemes import bioul_to_iob2, iob1_to_iob2, iob2_to_bioul, iob2_to_iob1
from contextvec.tasks.split import DEV_SPLIT_SEED, LabeledSentences, TaggedCorpus, carve_dev

__all__ = [
    "DEV_SPLIT_SEED", "GLUE_FORMATS", "SST2_LABELS", "SST_VARIANTS", "STSB_RANGE", "TAG_COLUMNS",
    "TREC_COARSE", "GlueFormat", "LabeledSentences", "TaggedCorpus", "bioul_to_iob2", "carve_dev",
    "iob1_to_iob2", "iob2_to_bioul", "iob2_to_iob1", "iter_conll2003", "iter_conllu", "open_task_file",
    "parse_conll2003", "parse_conllu", "parse_tree", "parse_trec_line", "read_conll2003", "read_conllu",
    "read_glue", "read_sst", "read_trec", "unescape_ptb",
]
