"""The published models ``contextvec pull`` knows by name, and where each file comes from.

Every entry names the publisher's page or code its URLs were read from (``source``, with the
commit read). A file's ``size`` and ``sha256`` are there only where the publisher states them;
where it does not, the pull records what it downloaded and every later load is checked against
that record (:mod:`contextvec.hub.record`).

Besides the names here, ``hf:OWNER/NAME`` names any BERT-family checkpoint on the Hugging Face
Hub (fetched by ``huggingface_hub``), and an ``http(s)`` URL of a ``.zip``/``.tar.gz`` archive (or
a TF-Hub handle) names the model it holds. ``$CONTEXTVEC_REGISTRY`` may name a JSON file of
further entries (``{"models": [...]}`` with this module's field names), which replace the
built-in entries of the same names: a mirror, private models, or a test server.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

from contextvec.choices import checked_choice

REGISTRY_ENV = "CONTEXTVEC_REGISTRY"
HF_PREFIX = "hf:"

_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,79}")
_HF_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?")
_SHA256 = re.compile(r"[0-9a-f]{64}")


class UnknownModelError(KeyError):
    """A name that names no published model; ``str()`` is the one-line message (not its repr)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown model"


class ModelFormat(StrEnum):
    """How the files of a published model are laid out (what ``contextvec.load`` reads)."""

    BILM_TF = "bilm-tf"
    """allennlp's ``options.json`` + ``weights.hdf5``."""
    ELMOFORMANYLANGS = "elmoformanylangs"
    """An ELMoForManyLangs directory (``config.json``, ``*.pkl``, ``char.dic``, ``word.dic``)."""
    TF_HUB = "tf-hub"
    """A TF-Hub ELMo module (``tfhub_module.pb``, ``saved_model.pb``, ``variables/``)."""
    HF_BERT = "hf-bert"
    """A Hugging Face BERT-family checkpoint (``config.json`` + weights + tokenizer)."""


class ArchiveKind(StrEnum):
    """The format of a published archive."""

    ZIP = "zip"
    TAR_GZ = "tar.gz"
    TAR_BZ2 = "tar.bz2"


@dataclass(frozen=True)
class RemoteFile:
    """One file a publisher serves.

    Attributes:
        url: where it is served (``http://`` or ``https://``).
        name: its file name in the model directory (or the archive's name in the download folder).
        size: its size in bytes, where the publisher states it; None: recorded by the pull.
        sha256: its SHA-256 (hex), where the publisher publishes one; None: recorded by the pull.
    """

    url: str
    name: str
    size: int | None = None
    sha256: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.url, str) or urlsplit(self.url).scheme.lower() not in ("http", "https"):
            raise ValueError(f"url must be an http:// or https:// URL, not {self.url!r}")
        if not isinstance(self.name, str) or not self.name or "/" in self.name or "\\" in self.name \
                or self.name in (".", "..") or self.name.startswith("."):
            raise ValueError(f"{self.url}: name must be a plain file name, not {self.name!r}")
        if self.size is not None and (isinstance(self.size, bool) or not isinstance(self.size, int)
                                      or self.size < 0):
            raise ValueError(f"{self.url}: size must be a whole number of bytes >= 0, not {self.size!r}")
        if self.sha256 is not None:
            if not isinstance(self.sha256, str) or not _SHA256.fullmatch(self.sha256.lower()):
                raise ValueError(f"{self.url}: sha256 must be 64 hexadecimal digits, not {self.sha256!r}")
            object.__setattr__(self, "sha256", self.sha256.lower())


@dataclass(frozen=True)
class PublishedModel:
    """A model ``contextvec pull`` can fetch.

    Attributes:
        name: what ``contextvec pull`` and ``contextvec.load`` call it.
        format: how its files are laid out; None for an archive given by its URL, whose files
            say what it is.
        description: the model in a few words.
        language: the language of its training text (an ISO 639 code).
        source: the publisher's page or code the URLs were read from (the citation).
        files: the files to fetch: the model's own files, or one archive (``archive``).
        archive: the archive format of the one file of ``files``; None: the files are the model.
        hf_repo: a Hugging Face Hub id, fetched by ``huggingface_hub`` (``files`` empty).
        revision: the Hub revision (branch, tag or commit) of ``hf_repo``; None: its default.
        licence: the licence the publisher states for the weights; None: the page names none.
        parameters: the number of weights, where the publisher states it.
    """

    name: str
    format: ModelFormat | None
    description: str
    language: str
    source: str
    files: tuple[RemoteFile, ...] = ()
    archive: ArchiveKind | None = None
    hf_repo: str | None = None
    revision: str | None = None
    licence: str | None = None
    parameters: int | None = None

    def __post_init__(self) -> None:
        where = f"model {self.name!r}"
        if not isinstance(self.name, str) or not (_NAME.fullmatch(self.name) or _is_dynamic(self.name)):
            raise ValueError(f"{where}: a name is lowercase letters, digits, '.', '-' and '_'")
        if self.format is not None:
            object.__setattr__(self, "format", checked_choice(ModelFormat, self.format, f"{where}: format"))
        if self.archive is not None:
            archive = checked_choice(ArchiveKind, self.archive, f"{where}: archive")
            object.__setattr__(self, "archive", archive)
        object.__setattr__(self, "files", tuple(self.files))
        if self.hf_repo is not None:
            if not isinstance(self.hf_repo, str) or not _HF_ID.fullmatch(self.hf_repo):
                raise ValueError(f"{where}: hf_repo must be a Hugging Face Hub id, not {self.hf_repo!r}")
            if self.files or self.archive is not None:
                raise ValueError(f"{where}: a Hugging Face model takes no files or archive")
        elif not self.files:
            raise ValueError(f"{where}: give files or hf_repo")
        if self.archive is not None and len(self.files) != 1:
            raise ValueError(f"{where}: an archive is one file, not {len(self.files)}")
        if len({f.name for f in self.files}) != len(self.files):
            raise ValueError(f"{where}: two files of the same name")
        if self.parameters is not None and (isinstance(self.parameters, bool)
                                            or not isinstance(self.parameters, int) or self.parameters < 1):
            raise ValueError(f"{where}: parameters must be a whole number >= 1, not {self.parameters!r}")

    @property
    def size(self) -> int | None:
        """Bytes to download, where every file's size is known."""
        sizes = [f.size for f in self.files]
        return sum(sizes) if sizes and None not in sizes else None  # type: ignore[arg-type]


def _is_dynamic(name: str) -> bool:
    return name.startswith(HF_PREFIX) or urlsplit(name).scheme.lower() in ("http", "https")


# --------------------------------------------------------------------------- allennlp

# The ELMo page's source (https://allenai.org/allennlp/software/elmo, formerly allennlp.org/elmo):
# its table links each options and weights file.
_ALLENNLP_PAGE = "allenai/allennlp-website:elmo.html@8c27645d (https://allennlp.org/elmo)"
_S3 = "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo"
_ALLENNLP_LICENCE = None  # the page states no licence for the weights
_EXAWIZARDS = "https://exawizardsallenlp.blob.core.windows.net/data"


def _allennlp(name: str, description: str, language: str, folder: str, options: str, weights: str,
              parameters: int | None = None) -> PublishedModel:
    return PublishedModel(
        name=name, format=ModelFormat.BILM_TF, description=description, language=language,
        source=_ALLENNLP_PAGE, licence=_ALLENNLP_LICENCE, parameters=parameters,
        files=(RemoteFile(f"{_S3}/{folder}/{options}", "options.json"),
               RemoteFile(f"{_S3}/{folder}/{weights}", "weights.hdf5")))


def _allennlp_english(name: str, description: str, folder: str, parameters: int) -> PublishedModel:
    return _allennlp(name, description, "en", folder, f"elmo_{folder}_options.json",
                     f"elmo_{folder}_weights.hdf5", parameters)


# Parameters: the page's 13.6M / 28.0M / 93.6M, counted exactly from the weights' shapes.
_ALLENNLP = (
    _allennlp_english("elmo-small", "allennlp's small ELMo (LSTM 1024, output 256), 1 Billion Word "
                      "Benchmark", "2x1024_128_2048cnn_1xhighway", 13_593_296),
    _allennlp_english("elmo-medium", "allennlp's medium ELMo (LSTM 2048, output 512), 1 Billion Word "
                      "Benchmark", "2x2048_256_2048cnn_1xhighway", 28_027_728),
    _allennlp_english("elmo-original", "the ELMo of the paper (LSTM 4096, output 1024), 1 Billion Word "
                      "Benchmark", "2x4096_512_2048cnn_2xhighway", 93_600_848),
    _allennlp_english("elmo-original-5.5b", "the original ELMo trained on 5.5B tokens (Wikipedia and WMT "
                      "2008-2012 news crawl); the page's recommended default",
                      "2x4096_512_2048cnn_2xhighway_5.5B", 93_600_848),
    _allennlp("elmo-pt-wikipedia", "Portuguese ELMo on Wikipedia (Federal University of Goiás), contributed",
              "pt", "contributed/pt/wikipedia", "options.json", "elmo_pt_weights.hdf5"),
    _allennlp("elmo-pt-brwac", "Portuguese ELMo on the brWaC corpus (Federal University of Goiás), "
              "contributed",
              "pt", "contributed/pt/brwac", "options.json", "elmo_pt_weights_dgx1.hdf5"),
    _allennlp("elmo-pubmed", "ELMo trained on PubMed (biomedical English), contributed by Matthew Peters",
              "en", "contributed/pubmed", "elmo_2x4096_512_2048cnn_2xhighway_options.json",
              "elmo_2x4096_512_2048cnn_2xhighway_weights_PubMed_only.hdf5"),
    PublishedModel(
        name="elmo-ja", format=ModelFormat.BILM_TF, language="ja", source=_ALLENNLP_PAGE,
        description="Japanese ELMo (ExaWizards Inc.), contributed",
        files=(RemoteFile(f"{_EXAWIZARDS}/options.json", "options.json"),
               RemoteFile(f"{_EXAWIZARDS}/weights.hdf5", "weights.hdf5"))),
)

# --------------------------------------------------------------------------- ELMoForManyLangs

_MANYLANGS_README = "HIT-SCIR/ELMoForManyLangs:README.md@b3de5f1d (Downloads)"
_NLPL = "http://vectors.nlpl.eu/repository/11"
# (ISO 639 code, language, NLPL repository id), in the README's table.
_MANYLANGS_TABLE = (
    ("ar", "Arabic", 136), ("bg", "Bulgarian", 137), ("ca", "Catalan", 138), ("cs", "Czech", 139),
    ("cu", "Old Church Slavonic", 140), ("da", "Danish", 141), ("de", "German", 142), ("el", "Greek", 143),
    ("en", "English", 144), ("es", "Spanish", 145), ("et", "Estonian", 146), ("eu", "Basque", 147),
    ("fa", "Persian", 148), ("fi", "Finnish", 149), ("fr", "French", 150), ("ga", "Irish", 151),
    ("gl", "Galician", 152), ("grc", "Ancient Greek", 153), ("he", "Hebrew", 154), ("hi", "Hindi", 155),
    ("hr", "Croatian", 156), ("hu", "Hungarian", 157), ("id", "Indonesian", 158), ("it", "Italian", 159),
    ("ja", "Japanese", 160), ("ko", "Korean", 161), ("la", "Latin", 162), ("lv", "Latvian", 163),
    ("nb", "Norwegian Bokmål", 165), ("nl", "Dutch", 164), ("nn", "Norwegian Nynorsk", 166),
    ("pl", "Polish", 167), ("pt", "Portuguese", 168), ("ro", "Romanian", 169), ("ru", "Russian", 170),
    ("sk", "Slovak", 171), ("sl", "Slovene", 172), ("sv", "Swedish", 173), ("tr", "Turkish", 174),
    ("ug", "Uyghur", 175), ("uk", "Ukrainian", 176), ("ur", "Urdu", 177), ("vi", "Vietnamese", 178),
    ("zh", "Chinese (traditional, Wikipedia)", 179),
)
_MANYLANGS = (
    *(PublishedModel(
        name=f"elmoformanylangs-{code}", format=ModelFormat.ELMOFORMANYLANGS, language=code,
        description=f"ELMoForManyLangs {language} (CoNLL 2018 raw text, 20M words), NLPL repository",
        source=_MANYLANGS_README, archive=ArchiveKind.ZIP,
        files=(RemoteFile(f"{_NLPL}/{nlpl}.zip", f"{nlpl}.zip"),))
      for code, language, nlpl in _MANYLANGS_TABLE),
    PublishedModel(
        name="elmoformanylangs-zh-hans", format=ModelFormat.ELMOFORMANYLANGS, language="zh",
        description="ELMoForManyLangs simplified Chinese (Xinhua part of Chinese Gigaword v5)",
        source=_MANYLANGS_README + " (ELMo for Simplified Chinese)", archive=ArchiveKind.TAR_BZ2,
        files=(RemoteFile("http://39.96.43.154/zhs.model.tar.bz2", "zhs.model.tar.bz2"),)),
)

# --------------------------------------------------------------------------- TF-Hub

# tfhub.dev now redirects to Kaggle Models; a handle + "?tf-hub-format=compressed" is the module
# as a tar.gz (tensorflow/hub: docs/hosting.md, tensorflow_hub/compressed_module_resolver.py).
_TF_HUB = (
    PublishedModel(
        name="tfhub-elmo-3", format=ModelFormat.TF_HUB, language="en", archive=ArchiveKind.TAR_GZ,
        description="TF-Hub's google/elmo/3: the original ELMo with its learned layer mix",
        source="tensorflow/tfhub.dev:assets/docs/google/models/elmo/3.md@0dda30a9; tensorflow/hub:"
               "docs/hosting.md (the compressed format); now at "
               "https://www.kaggle.com/models/google/elmo/tensorFlow1/elmo/3",
        files=(RemoteFile("https://tfhub.dev/google/elmo/3?tf-hub-format=compressed", "elmo-3.tar.gz"),)),
)

# --------------------------------------------------------------------------- Hugging Face

_GOOGLE_BERT = "google-research/bert:README.md@eedf5716; the checkpoints on the Hugging Face Hub"


def _hf(name: str, repo: str, description: str, language: str, licence: str | None,
        parameters: int | None = None, source: str = _GOOGLE_BERT) -> PublishedModel:
    return PublishedModel(name=name, format=ModelFormat.HF_BERT, description=description, language=language,
                          source=source, hf_repo=repo, licence=licence, parameters=parameters)


_HF = (
    _hf("bert-base-uncased", "google-bert/bert-base-uncased", "BERT-Base, uncased (12 layers, 768)", "en",
        "Apache-2.0", 110_000_000),
    _hf("bert-base-cased", "google-bert/bert-base-cased", "BERT-Base, cased (12 layers, 768)", "en",
        "Apache-2.0", 110_000_000),
    _hf("bert-large-uncased", "google-bert/bert-large-uncased", "BERT-Large, uncased (24 layers, 1024)", "en",
        "Apache-2.0", 340_000_000),
    _hf("bert-large-cased", "google-bert/bert-large-cased", "BERT-Large, cased (24 layers, 1024)", "en",
        "Apache-2.0", 340_000_000),
    _hf("bert-base-multilingual-cased", "google-bert/bert-base-multilingual-cased",
        "multilingual BERT-Base, cased (104 languages)", "mul", "Apache-2.0", 110_000_000),
    _hf("all-minilm-l6-v2", "sentence-transformers/all-MiniLM-L6-v2",
        "sentence-transformers' MiniLM-L6 (6 layers, 384) with its mean pooling", "en", "Apache-2.0",
        source="sentence-transformers/all-MiniLM-L6-v2's model card on the Hugging Face Hub"),
)

BUILT_IN: Mapping[str, PublishedModel] = MappingProxyType(
    {m.name: m for m in (*_ALLENNLP, *_MANYLANGS, *_TF_HUB, *_HF)})
"""The published models contextvec knows by name."""


def registry() -> Mapping[str, PublishedModel]:
    """The built-in entries, with those of the file ``$CONTEXTVEC_REGISTRY`` names (read on
    every call) put over them.

    Raises:
        ValueError: one line naming the file and the entry that is wrong.
        OSError: the file cannot be read.
    """
    given = os.environ.get(REGISTRY_ENV)
    if not given:
        return BUILT_IN
    return MappingProxyType({**BUILT_IN, **{m.name: m for m in read_registry(Path(given))}})


def read_registry(path: Path) -> list[PublishedModel]:
    """The entries of a registry file: ``{"models": [{"name": ..., "format": ..., "files":
    [{"url": ..., "name": ...}], ...}]}`` with :class:`PublishedModel`'s field names."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e})") from None
    entries = data.get("models") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise ValueError(f"{path}: expected {{\"models\": [...]}}")
    return [_entry(path, i, entry) for i, entry in enumerate(entries)]


_FIELDS = {f.name for f in fields(PublishedModel)}
_FILE_FIELDS = {f.name for f in fields(RemoteFile)}


def _entry(path: Path, index: int, entry: Any) -> PublishedModel:
    where = f"{path}: models[{index}]"
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: expected an object")
    if unknown := set(entry) - _FIELDS:
        raise ValueError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    files = entry.get("files", [])
    if not isinstance(files, list) or not all(isinstance(f, dict) and set(f) <= _FILE_FIELDS for f in files):
        raise ValueError(f"{where}: files must be a list of objects with {', '.join(sorted(_FILE_FIELDS))}")
    try:
        return PublishedModel(**{**entry, "files": tuple(RemoteFile(**f) for f in files)})
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: {e}") from None


def resolve(name: str, known: Mapping[str, PublishedModel] | None = None) -> PublishedModel:
    """The model ``name`` names: a registry entry, ``hf:OWNER/NAME`` (a Hugging Face Hub id), or
    an ``http(s)`` URL of a ``.zip``, ``.tar.gz``/``.tgz`` or ``.tar.bz2`` archive or a TF-Hub handle.

    Raises:
        UnknownModelError: none of those (a ``KeyError`` whose ``str()`` is one line).
    """
    known = registry() if known is None else known
    if name in known:
        return known[name]
    if name.startswith(HF_PREFIX):
        repo = name[len(HF_PREFIX):]
        if not _HF_ID.fullmatch(repo):
            raise UnknownModelError(f"{name!r}: after hf: comes a Hugging Face Hub id (OWNER/NAME)")
        return _hf(name, repo, f"{repo} from the Hugging Face Hub", "", None, source=f"https://huggingface.co/{repo}")
    if urlsplit(name).scheme.lower() in ("http", "https"):
        return _from_url(name)
    raise UnknownModelError(f"unknown model {name!r}: give a name `contextvec models` lists, hf:OWNER/NAME, "
                   "or the URL of a .zip or .tar.gz archive")


def _from_url(url: str) -> PublishedModel:
    parts = urlsplit(url)
    path = parts.path.lower().rstrip("/")
    kinds = {".zip": ArchiveKind.ZIP, ".tar.gz": ArchiveKind.TAR_GZ, ".tgz": ArchiveKind.TAR_GZ,
             ".tar.bz2": ArchiveKind.TAR_BZ2}
    kind = next((k for suffix, k in kinds.items() if path.endswith(suffix)), None)
    if kind is None and "tf-hub-format=compressed" in parts.query:
        kind = ArchiveKind.TAR_GZ
    if kind is None:
        raise UnknownModelError(f"{url}: a URL pulled by itself is an archive (.zip, .tar.gz, .tgz, "
                                ".tar.bz2) or a TF-Hub handle with ?tf-hub-format=compressed")
    file_name = f"{hashlib.sha256(url.encode()).hexdigest()[:16]}.{kind.value}"
    return PublishedModel(name=url, format=None, description="an archive given by its URL", language="",
                          source=url, archive=kind, files=(RemoteFile(url, file_name),))
