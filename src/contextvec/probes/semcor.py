"""Sense-annotated corpora for word sense disambiguation: SemCor 3.0 and Raganato's XML format.

Both readers give a :class:`WsdCorpus`: sentences of tokens, with :class:`SenseSpan` s marking the
sense-annotated words.

**Multiword expressions** are split into tokens and the sense belongs to the whole span. SemCor
joins the words of an expression with ``_`` (``<wf ... lemma=take_place>took_place</wf>``,
``New_York``); Raganato's files use spaces (``<instance lemma="take_place">took place</instance>``).
Either way the encoder sees ordinary tokens (``took``, ``place``), and a span's vector is the
mean of its tokens' vectors, so training and evaluation treat expressions alike.

**SemCor 3.0** (the ``.tar.gz`` of ``semcor3.0/{brown1,brown2,brownv}/tagfiles/br-*``, an extracted
directory, or one tag file) is an SGML-like format, one element per line::

    <s snum=1>
    <wf cmd=done pos=VB lemma=say wnsn=1 lexsn=2:32:00::>said</wf>
    <wf cmd=done sep="-" pos=JJ lemma=west wnsn=1 lexsn=3:00:00::>West</wf>
    <punc>.</punc>
    </s>

Attribute values may be unquoted or quoted. A word's WordNet 3.0 sense key is
``lemma%lexsn``, lower-cased, without the syntactic marker that SemCor 3.0 leaves on some adjective
satellites' head words (``previous%5:00:00:preceding(a):00`` -> ``previous%5:00:00:preceding:00``,
as in WordNet's ``index.sense``). ``wnsn=0`` marks a sense lost in the mapping to WordNet 3.0:
that key is dropped. A word with several senses (``wnsn=1;2 lexsn=1:06:01::;1:06:00::``) gets
every key whose ``wnsn`` is not 0; a word left with none is not a span (it is counted in
:attr:`WsdCorpus.unmapped`).
Anything the reader does not understand (text outside ``<wf>``/``<punc>``, an unknown tag, a
``<wf>`` outside ``<s>``, mismatched ``wnsn``/``lexsn`` counts) is an error naming the file and line.

**Raganato et al. (2017)** evaluation data: ``*.data.xml`` (``corpus/text/sentence`` of ``<wf>``
and ``<instance id lemma pos>``) and ``*.gold.key.txt`` (``id key1 [key2 ...]``), plain or ``.gz``.
"""

from __future__ import annotations

import gzip
import itertools
import os
import re
import tarfile
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from contextvec.io.text_lines import open_text


@dataclass(frozen=True)
class SenseSpan:
    """Tokens ``start:end`` of a sentence: one word or expression, with its sense keys.

    ``pos`` is the corpus's tag (PTB in SemCor, universal in Raganato's files); ``id`` is the
    instance id of evaluation data (None in SemCor). ``keys`` are the gold sense keys (empty for
    evaluation data read without a key file).
    """

    start: int
    end: int
    lemma: str
    pos: str
    keys: tuple[str, ...]
    id: str | None = None


@dataclass(frozen=True)
class WsdSentence:
    """A tokenized sentence and its sense-annotated spans."""

    id: str
    tokens: list[str]
    spans: list[SenseSpan]


@dataclass
class WsdCorpus:
    """Sentences with sense spans. ``unmapped``: SemCor words whose every sense had ``wnsn=0``."""

    sentences: list[WsdSentence]
    source: str = "<string>"
    unmapped: int = 0

    def __len__(self) -> int:
        return len(self.sentences)

    @property
    def num_tokens(self) -> int:
        return sum(len(s.tokens) for s in self.sentences)

    @property
    def num_spans(self) -> int:
        return sum(len(s.spans) for s in self.sentences)

    def spans(self) -> Iterator[tuple[int, SenseSpan]]:
        """``(sentence index, span)`` for every span, in order."""
        for i, sentence in enumerate(self.sentences):
            for span in sentence.spans:
                yield i, span


# ---------------------------------------------------------------------------------------------
# SemCor 3.0

_TAG = re.compile(r"<\s*(/?)\s*([A-Za-z]+)([^<>]*)>")
_ATTR = re.compile(r"""([A-Za-z_][\w-]*)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""")
# Adjective syntactic markers (attributive, predicative, immediately postnominal): not in sense keys.
_MARKER = re.compile(r"\((?:a|p|ip)\)")
# Structure around the sentences: skipped. Any other tag is an error.
_STRUCTURE = frozenset({"contextfile", "context", "p"})


def parse_attributes(text: str) -> dict[str, str]:
    """``name=value`` pairs of an SGML tag (values unquoted, or in double or single quotes)."""
    return {m.group(1).lower(): next(g for g in m.groups()[1:] if g is not None)
            for m in _ATTR.finditer(text)}


def _sense_keys(attrs: dict[str, str], where: str) -> tuple[str, ...] | None:
    """Sense keys of a ``<wf>`` (empty tuple: all wnsn=0), or None if it has no sense tag."""
    lexsn = attrs.get("lexsn")
    if lexsn is None:
        return None
    lemma = attrs.get("lemma")
    if not lemma:
        raise ValueError(f"{where}: lexsn={lexsn} without a lemma")
    lexsns = lexsn.split(";")
    wnsns = attrs.get("wnsn", "").split(";")
    if len(wnsns) != len(lexsns) or not all(w.isdigit() for w in wnsns):
        raise ValueError(f"{where}: wnsn={attrs.get('wnsn')!r} does not pair with lexsn={lexsn!r}")
    keys = (f"{lemma.lower()}%{_MARKER.sub('', lex.lower())}"
            for wn, lex in zip(wnsns, lexsns, strict=True) if int(wn) != 0)
    return tuple(dict.fromkeys(keys))


def parse_semcor(
    text: str, source: str = "<string>", stats: Counter[str] | None = None
) -> Iterator[WsdSentence]:
    """Sentences of one SemCor tag file (see the module docstring). Sentence ids are
    ``source.s<snum>`` (e.g. ``brown1/br-a01.s1``). ``stats["unmapped"]`` counts the words whose
    every sense has ``wnsn=0``."""
    stats = Counter() if stats is None else stats
    sentence: tuple[str, list[str], list[SenseSpan]] | None = None
    element: tuple[str, dict[str, str], int] | None = None  # open <wf>/<punc>: name, attrs, position
    position = 0

    def where(at: int) -> str:
        return f"{source}, line {text.count(chr(10), 0, at) + 1}"

    for match in _TAG.finditer(text):
        between = text[position:match.start()]
        position = match.end()
        closing, name = match.group(1) == "/", match.group(2).lower()
        if element is None and between.strip():
            raise ValueError(f"{where(match.start())}: text {between.strip()[:40]!r} outside <wf>/<punc>")
        if name in ("wf", "punc"):
            if not closing:
                if element is not None:
                    raise ValueError(f"{where(match.start())}: <{name}> inside <{element[0]}>")
                if sentence is None:
                    raise ValueError(f"{where(match.start())}: <{name}> outside a sentence <s>")
                element = (name, parse_attributes(match.group(3)), match.start())
                continue
            if element is None or element[0] != name:
                raise ValueError(f"{where(match.start())}: </{name}> without <{name}>")
            assert sentence is not None
            _, tokens, spans = sentence
            tag, attrs, start = element
            element = None
            word = between.strip()
            pieces = [p for p in word.split("_") if p] if tag == "wf" else [word]
            if not word or not pieces:
                raise ValueError(f"{where(start)}: empty <{tag}>")
            keys = _sense_keys(attrs, where(start)) if tag == "wf" else None
            if keys is not None:
                if keys:
                    spans.append(SenseSpan(len(tokens), len(tokens) + len(pieces), attrs["lemma"].lower(),
                                           attrs.get("pos", ""), keys))
                else:
                    stats["unmapped"] += 1
            tokens.extend(pieces)
        elif element is not None:
            raise ValueError(f"{where(match.start())}: tag <{match.group(0)[1:-1]}> inside <{element[0]}>")
        elif name == "s":
            if closing:
                if sentence is None:
                    raise ValueError(f"{where(match.start())}: </s> without <s>")
                if sentence[1]:  # an empty <s></s> has nothing to embed
                    yield WsdSentence(*sentence)
                sentence = None
            else:
                if sentence is not None:
                    raise ValueError(f"{where(match.start())}: <s> inside a sentence")
                snum = parse_attributes(match.group(3)).get("snum", "?")
                sentence = (f"{source}.s{snum}", [], [])
        elif name not in _STRUCTURE:
            raise ValueError(f"{where(match.start())}: unknown tag <{match.group(0)[1:-1]}>")
    if text[position:].strip() or element is not None:
        raise ValueError(f"{where(position)}: text or an open <wf>/<punc> at the end of the file")
    if sentence is not None:
        raise ValueError(f"{where(len(text))}: sentence {sentence[0]} is not closed by </s>")



def _is_tag_file(name: str) -> bool:
    parts = name.split("/")
    return len(parts) >= 2 and parts[-2] == "tagfiles" and parts[-1].startswith("br-")


def _short_name(name: str) -> str:
    """``semcor3.0/brown1/tagfiles/br-a01`` -> ``brown1/br-a01``."""
    parts = name.split("/")
    return f"{parts[-3]}/{parts[-1]}" if len(parts) >= 3 and parts[-2] == "tagfiles" else parts[-1]


def _semcor_files(path: Path) -> Iterator[tuple[str, str]]:
    """``(name, text)`` of each tag file: archive order in a tar, sorted paths in a directory."""
    if path.is_dir():
        files = sorted(p for p in path.rglob("br-*") if p.is_file() and p.parent.name == "tagfiles")
        if not files:
            raise ValueError(f"{path}: no SemCor tag files (*/tagfiles/br-*)")
        for file in files:
            yield _short_name(file.relative_to(path).as_posix()), file.read_text(encoding="utf-8")
    elif tarfile.is_tarfile(path):
        found = False
        # Stream mode: read the archive once, front to back, stopping as early as the caller does.
        with tarfile.open(path, mode="r|*") as archive:
            for member in archive:
                if member.isfile() and _is_tag_file(member.name):
                    found = True
                    data = archive.extractfile(member)
                    assert data is not None
                    yield _short_name(member.name), data.read().decode("utf-8")
        if not found:
            raise ValueError(f"{path}: no SemCor tag files (*/tagfiles/br-*) in the archive")
    else:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            yield path.name, f.read()


def iter_semcor(path: str | os.PathLike, stats: Counter[str] | None = None) -> Iterator[WsdSentence]:
    """Stream the sentences of SemCor: a ``.tar.gz`` of the release, a directory holding its
    ``*/tagfiles/br-*`` files, or one tag file (plain or ``.gz``). ``stats``: see :func:`parse_semcor`."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"SemCor not found: {path}")
    for name, text in _semcor_files(path):
        yield from parse_semcor(text, name, stats)


def read_semcor(path: str | os.PathLike, max_sentences: int | None = None) -> WsdCorpus:
    """SemCor (see :func:`iter_semcor`) -> :class:`WsdCorpus`: the first ``max_sentences``
    sentences (all by default; the rest of the archive is not read)."""
    if max_sentences is not None and max_sentences < 1:
        raise ValueError(f"max_sentences must be >= 1, not {max_sentences}")
    stats: Counter[str] = Counter()
    sentences = list(itertools.islice(iter_semcor(path, stats), max_sentences))
    if not sentences:
        raise ValueError(f"{path}: no sentences")
    return WsdCorpus(sentences, str(path), unmapped=stats["unmapped"])


# ---------------------------------------------------------------------------------------------
# Raganato et al. (2017) XML + gold keys


def parse_gold_keys(lines: Iterable[str], source: str = "<string>") -> dict[str, tuple[str, ...]]:
    """``id key1 [key2 ...]`` lines -> id -> keys (a repeated id or a line without keys is an error)."""
    gold: dict[str, tuple[str, ...]] = {}
    for number, line in enumerate(lines, 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) < 2:
            raise ValueError(f"{source}, line {number}: instance {fields[0]!r} has no sense key")
        if fields[0] in gold:
            raise ValueError(f"{source}, line {number}: instance {fields[0]!r} repeated")
        gold[fields[0]] = tuple(fields[1:])
    return gold


def read_gold_keys(path: str | os.PathLike) -> dict[str, tuple[str, ...]]:
    """A Raganato gold key file (plain or ``.gz``) -> id -> keys."""
    with open_text(path) as f:
        return parse_gold_keys(f, str(path))


def parse_raganato(
    root: ET.Element, gold: dict[str, tuple[str, ...]] | None = None, source: str = "<string>"
) -> WsdCorpus:
    """A parsed ``*.data.xml`` (its ``<corpus>`` element) -> :class:`WsdCorpus`.

    With ``gold``, every instance must have keys there and every gold id must be an instance.
    """
    sentences: list[WsdSentence] = []
    seen: set[str] = set()
    for element in root.iter("sentence"):
        sid = element.get("id", f"s{len(sentences)}")
        tokens: list[str] = []
        spans: list[SenseSpan] = []
        for item in element:
            if item.tag not in ("wf", "instance"):
                raise ValueError(f"{source}: sentence {sid}: unexpected <{item.tag}>")
            words = (item.text or "").split()
            if not words:
                raise ValueError(f"{source}: sentence {sid}: empty <{item.tag}>")
            if item.tag == "instance":
                iid, lemma, pos = item.get("id"), item.get("lemma"), item.get("pos")
                if not iid or not lemma or not pos:
                    raise ValueError(f"{source}: sentence {sid}: <instance> without id, lemma or pos")
                if iid in seen:
                    raise ValueError(f"{source}: instance {iid} repeated")
                seen.add(iid)
                keys: tuple[str, ...] = ()
                if gold is not None:
                    if iid not in gold:
                        raise ValueError(f"{source}: instance {iid} has no gold key")
                    keys = gold[iid]
                spans.append(SenseSpan(len(tokens), len(tokens) + len(words), lemma, pos, keys, iid))
            tokens.extend(words)
        sentences.append(WsdSentence(sid, tokens, spans))
    if gold is not None and (extra := set(gold) - seen):
        raise ValueError(f"{source}: {len(extra)} gold ids are not instances of the data, e.g. {min(extra)}")
    if not seen:
        raise ValueError(f"{source}: no <instance> elements")
    return WsdCorpus(sentences, source)


def read_raganato(data: str | os.PathLike, gold: str | os.PathLike | None = None) -> WsdCorpus:
    """Raganato evaluation data (``*.data.xml``, plain or ``.gz``) with its gold keys if given."""
    data = Path(data)
    keys = read_gold_keys(gold) if gold is not None else None
    with gzip.open(data, "rb") if data.suffix == ".gz" else open(data, "rb") as f:
        try:
            root = ET.parse(f).getroot()
        except ET.ParseError as e:
            raise ValueError(f"{data}: not well-formed XML ({e})") from e
    return parse_raganato(root, keys, str(data))
