"""WordNet 3.0 as a sense inventory: the sense keys of a lemma and part of speech, in WordNet order.

The database is read with nltk's :class:`~nltk.corpus.reader.wordnet.WordNetCorpusReader` from a
Princeton ``dict`` directory: ``$CONTEXTVEC_WORDNET`` if set, else ``/usr/share/wordnet``, where
Debian/Ubuntu's ``wordnet-base`` package puts it (``apt-get install wordnet-base``). Nothing is
downloaded. Debian's package has the ``data.*``, ``index.*`` and ``*.exc`` files that nltk needs but
not ``lexnames`` (the 45 fixed lexicographer file names, which nltk needs to build sense keys); when
the directory lacks it, the WordNet 3.0 table below is used. ``index.sense`` is not needed: sense keys
are built from the data files, as nltk's ``Lemma.key()`` does.

Senses come in WordNet order (the order of the ``index.*`` line, i.e. by decreasing SemCor tag
count), so the first key is WordNet's first sense (the "most frequent sense" baseline).
"""

from __future__ import annotations

import functools
import io
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from contextvec.extras import needs

WORDNET_ENV = "CONTEXTVEC_WORDNET"
DEFAULT_WORDNET_DIR = Path("/usr/share/wordnet")
REQUIRED_FILES = tuple(
    f"{kind}.{pos}" for kind in ("index", "data") for pos in ("noun", "verb", "adj", "adv")
)
INSTALL_HINT = (
    "install WordNet 3.0 with `apt-get install wordnet-base` (files in /usr/share/wordnet), or set "
    f"${WORDNET_ENV} to a WordNet 3.0 dict directory"
)

# WordNet 3.0's lexnames file (lexicographer file number -> name). Fixed since WordNet 1.5.
LEXNAMES = (
    "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal", "noun.artifact",
    "noun.attribute", "noun.body", "noun.cognition", "noun.communication", "noun.event",
    "noun.feeling", "noun.food", "noun.group", "noun.location", "noun.motive", "noun.object",
    "noun.person", "noun.phenomenon", "noun.plant", "noun.possession", "noun.process",
    "noun.quantity", "noun.relation", "noun.shape", "noun.state", "noun.substance", "noun.time",
    "verb.body", "verb.change", "verb.cognition", "verb.communication", "verb.competition",
    "verb.consumption", "verb.contact", "verb.creation", "verb.emotion", "verb.motion",
    "verb.perception", "verb.possession", "verb.social", "verb.stative", "verb.weather", "adj.ppl",
)
_LEXNAME_POS = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}

# Part-of-speech tags -> WordNet's n/v/a/r: Raganato's universal tags, PTB tag prefixes, letters.
_UPOS = {"NOUN": "n", "VERB": "v", "ADJ": "a", "ADV": "r"}
_PTB_PREFIX = (("NN", "n"), ("VB", "v"), ("JJ", "a"), ("RB", "r"))
# The ss_type digit of a sense key (lemma%ss_type:...); 5 = adjective satellite, an adjective.
_KEY_POS = {"1": "n", "2": "v", "3": "a", "4": "r", "5": "a"}


class WordNetMissingError(FileNotFoundError):
    """No usable WordNet 3.0 directory; the message says how to install one."""


class SenseInventory(Protocol):
    """Anything that lists a lemma's sense keys in WordNet order (tests use a dict-backed one)."""

    def sense_keys(self, lemma: str, pos: str) -> Sequence[str]: ...


def wordnet_pos(tag: str) -> str | None:
    """WordNet's part of speech (``n``, ``v``, ``a``, ``r``) for a tag, or None (no WordNet POS).

    Accepts universal tags (``NOUN``, ``VERB``, ``ADJ``, ``ADV``, as in Raganato's framework), PTB
    tags (``NN``, ``VBD``, ``JJR``, ``RB``, ...; SemCor's ``pos=``) and WordNet letters (``s`` =
    adjective satellite -> ``a``).
    """
    if tag in _UPOS:
        return _UPOS[tag]
    if tag in ("n", "v", "a", "r"):
        return tag
    if tag == "s":
        return "a"
    return next((p for prefix, p in _PTB_PREFIX if tag.startswith(prefix)), None)


def key_pos(sense_key: str) -> str:
    """WordNet's part of speech (``n``, ``v``, ``a``, ``r``) of a sense key ``lemma%ss_type:...``."""
    try:
        return _KEY_POS[sense_key.split("%", 1)[1][0]]
    except (IndexError, KeyError):
        raise ValueError(f"not a WordNet sense key: {sense_key!r}") from None


def wordnet_dir(directory: str | os.PathLike | None = None) -> Path:
    """The WordNet directory to use: ``directory``, else ``$CONTEXTVEC_WORDNET``, else
    ``/usr/share/wordnet``. Raises :class:`WordNetMissingError` if it lacks the database files."""
    if directory is None:
        directory = os.environ.get(WORDNET_ENV) or DEFAULT_WORDNET_DIR
    path = Path(directory).expanduser()
    missing = [name for name in REQUIRED_FILES if not (path / name).is_file()]
    if missing:
        what = "does not exist" if not path.is_dir() else f"lacks {', '.join(missing)}"
        raise WordNetMissingError(f"WordNet 3.0 not found: {path} {what}; {INSTALL_HINT}")
    return path


def _reader_class():
    # nltk is imported here only: it is slow to import and only the WSD commands need it.
    with needs("tasks"):
        from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class Reader(WordNetCorpusReader):
        """nltk's reader, with a built-in ``lexnames`` and no WordNet-version mapping."""

        def open(self, fileid):  # noqa: A003 - nltk's name
            if fileid == "lexnames" and not (Path(getattr(self._root, "path", "")) / "lexnames").is_file():
                return io.StringIO("".join(f"{i:02d}\t{name}\t{_LEXNAME_POS[name.split('.')[0]]}\n"
                                           for i, name in enumerate(LEXNAMES)))
            return super().open(fileid)

        def map_wn(self, version="wordnet"):
            # nltk maps synsets onto its own downloaded WordNet for the multilingual data (it reads
            # that copy's index.sense); we read WordNet 3.0 itself and use no multilingual data.
            return None

    return Reader


class WordNet:
    """WordNet 3.0 sense inventory (see the module docstring). Prefer :func:`load_wordnet`, which
    reads the database once per directory (reading it takes seconds)."""

    def __init__(self, directory: str | os.PathLike | None = None) -> None:
        with needs("tasks"):
            import nltk.data

        self.directory = wordnet_dir(directory)
        # nltk >= 3.9 opens corpus files only under its allowed data roots (nltk.data.path).
        root = str(self.directory.resolve())
        if root not in nltk.data.path:
            nltk.data.path.append(root)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*multilingual functions.*")
            self._reader = _reader_class()(root, None)
        self._keys: dict[tuple[str, str], tuple[str, ...]] = {}

    @property
    def version(self) -> str | None:
        """The version in the data files' license header (``"3.0"``)."""
        return self._reader.get_version()

    def sense_keys(self, lemma: str, pos: str) -> tuple[str, ...]:
        """Sense keys of ``lemma`` (words joined by ``_``, any case) as ``pos`` (see
        :func:`wordnet_pos`), in WordNet order; empty if WordNet does not have it."""
        wn_pos = wordnet_pos(pos)
        if wn_pos is None:
            return ()
        lemma = lemma.lower().replace(" ", "_")
        cached = self._keys.get((lemma, wn_pos))
        if cached is None:
            keys: dict[str, None] = {}
            # synsets() also looks up the morphological base forms of lemma; their synsets that do
            # not contain lemma itself are dropped, and lemma's own come first, in index order.
            for synset in self._reader.synsets(lemma, wn_pos):
                for entry in synset.lemmas():
                    if entry.name().lower() == lemma:
                        keys.setdefault(entry.key(), None)
            cached = self._keys[(lemma, wn_pos)] = tuple(keys)
        return cached

    def first_sense(self, lemma: str, pos: str) -> str | None:
        """WordNet's first sense of ``lemma`` as ``pos``, or None if it has none."""
        keys = self.sense_keys(lemma, pos)
        return keys[0] if keys else None


@functools.cache
def _load(directory: Path) -> WordNet:
    return WordNet(directory)


def load_wordnet(directory: str | os.PathLike | None = None) -> WordNet:
    """A :class:`WordNet` for ``directory`` (see :func:`wordnet_dir`), read once per process."""
    return _load(wordnet_dir(directory).resolve())
