"""Documents, not just sentences: document context, long texts in bounded memory, character
offsets, and late chunking (span vectors pooled after the whole document's pass).

The front door is :func:`embed_document` / :func:`embed_documents` with a
:class:`DocumentSettings`; ``contextvec embed --documents`` and ``/v1/embed``'s ``context``,
``spans`` and ``chunk_tokens`` fields go through it.
"""

from contextvec.documents.embed import DocumentVectors, embed_document, embed_documents
from contextvec.documents.settings import Context, DocumentSettings

__all__ = ["Context", "DocumentSettings", "DocumentVectors", "embed_document", "embed_documents"]
