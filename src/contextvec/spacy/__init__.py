"""contextvec in spaCy (needs the optional extra: ``pip install "contextvec[spacy]"``).

Installing the extra registers both through spaCy's entry points, so nothing here needs
importing: ``nlp.add_pipe("contextvec", config={...})`` and ``@architectures =
"contextvec.Listener.v1"`` in a training config (docs/spacy.md).

>>> nlp.add_pipe("contextvec", config={"model": "elmo-en-small", "layers": "top"})  # doctest: +SKIP
"""

from contextvec.extras import needs

with needs("spacy"):  # only this optional package needs spaCy and thinc
    import spacy  # noqa: F401
    import thinc  # noqa: F401

from contextvec.spacy.component import ContextvecComponent, make_contextvec  # noqa: E402
from contextvec.spacy.listener import build_listener  # noqa: E402
from contextvec.spacy.vectors import VectorSettings  # noqa: E402

__all__ = ["ContextvecComponent", "VectorSettings", "build_listener", "make_contextvec"]
