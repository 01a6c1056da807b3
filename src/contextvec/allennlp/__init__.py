"""allennlp's ELMo API on contextvec: change the import, keep the code.

>>> from contextvec.allennlp import Elmo, batch_to_ids, ElmoEmbedder   # doctest: +SKIP

``Elmo`` and ``batch_to_ids`` replace ``allennlp.modules.elmo``'s, ``ElmoEmbedder`` replaces
``allennlp.commands.elmo``'s (allennlp 0.9). The deliberate differences are listed in
``docs/migration.md``.
"""

from contextvec.allennlp.bilm import BiLmActivations
from contextvec.allennlp.elmo import Elmo, batch_to_ids, remove_sentence_boundaries
from contextvec.allennlp.embedder import ElmoEmbedder
from contextvec.allennlp.models import load_elmo_encoder

__all__ = [
    "BiLmActivations",
    "Elmo",
    "ElmoEmbedder",
    "batch_to_ids",
    "load_elmo_encoder",
    "remove_sentence_boundaries",
]
