"""flair's ``ELMoEmbeddings`` on contextvec (needs the optional extra: ``pip install "contextvec[flair]"``).

>>> from contextvec.flair import ELMoEmbeddings     # doctest: +SKIP
"""

from contextvec.extras import needs

with needs("flair"):  # only this optional package needs flair
    import flair  # noqa: F401

from contextvec.flair.embeddings import ELMoEmbeddings  # noqa: E402 - after the check above

__all__ = ["ELMoEmbeddings"]
