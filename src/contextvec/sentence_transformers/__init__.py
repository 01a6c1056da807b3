"""contextvec's encoders as a sentence-transformers module (needs the optional extra:
``pip install "contextvec[sentence-transformers]"``; docs/sentence-transformers.md).

>>> from sentence_transformers import SentenceTransformer          # doctest: +SKIP
>>> from sentence_transformers.sentence_transformer.modules import Pooling  # doctest: +SKIP
>>> from contextvec.sentence_transformers import Encoder              # doctest: +SKIP
>>> encoder = Encoder("elmo-en-small", layers="average")             # doctest: +SKIP
>>> pooling = Pooling(encoder.get_embedding_dimension(), "mean")      # doctest: +SKIP
>>> model = SentenceTransformer(modules=[encoder, pooling])           # doctest: +SKIP
"""

from contextvec.extras import needs

with needs("sentence-transformers"):  # only this optional package needs sentence-transformers
    import sentence_transformers  # noqa: F401

from contextvec.sentence_transformers.module import CONFIG_FILE, Encoder  # noqa: E402 - after the check above

__all__ = ["CONFIG_FILE", "Encoder"]
