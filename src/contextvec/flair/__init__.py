"""flair's ``ELMoEmbeddings`` on contextvec (needs the optional extra: ``pip install "contextvec[flair]"``).

>>> from contextvec.flair import ELMoEmbeddings     # doctest: +SKIP
"""

try:
    import flair  # noqa: F401
except ImportError as error:  # only this optional package needs flair
    raise ImportError(
        'contextvec.flair needs flair: pip install "contextvec[flair]" (or pip install flair)'
    ) from error

from contextvec.flair.embeddings import ELMoEmbeddings

__all__ = ["ELMoEmbeddings"]
