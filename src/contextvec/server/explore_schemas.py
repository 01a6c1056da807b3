"""Request and response bodies of the explorer's endpoints (``/v1/explore...``), strict like the
rest of the API (:mod:`contextvec.server.schemas`)."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, NamedTuple, get_type_hints

from pydantic import BaseModel, Field, StrictBool, StrictStr, create_model

from contextvec.explore import contexts
from contextvec.server.schemas import (
    NOT_SPACE,
    Integer,
    NonBlank,
    Sentences,
    Strict,
    TokenizerName,
    restated,
    sentence_list,
    stated,
)

Word = Annotated[StrictStr, Field(min_length=1, max_length=100, pattern=f"^{NOT_SPACE}+$")]
"""One token: no spaces (the server's tokenizers never make a token with one)."""

MAX_OCCURRENCES = 64
"""Occurrences compared at most: a matrix of 64 x 64 per layer is as much as a page shows."""

MAX_TOP_K = 50


class ExploreModelInfo(BaseModel):
    id: str
    num_layers: int
    dim: int
    layer_names: list[str]


class CorpusInfo(BaseModel):
    source: str
    sentences: int
    tokens: int


class ReportInfo(BaseModel):
    """A run's learned mixes and per-layer scores (``contextvec.explore.layer_report``)."""

    source: str
    kind: str
    title: str
    metric: str | None
    mixes: list[dict]
    scores: list[dict]
    baselines: dict[str, float]


class ExploreInfo(BaseModel):
    models: list[ExploreModelInfo]
    corpus: CorpusInfo
    reports: list[ReportInfo]


def model_id(ids: list[str] | None = None) -> Any:
    """An optional model id, stated: one of ``ids``."""
    return Annotated[StrictStr, stated(enum=ids)] | None


def sentence(tokens: int | None = None) -> Any:
    """A sentence: a string with a word, or a list of at most ``tokens`` tokens (stated)."""
    return NonBlank | Annotated[list[StrictStr], Field(min_length=1), stated(maxItems=tokens)]


ModelId, Sentence = model_id(), sentence()


class SimilarityRequest(BaseModel):
    """``POST /v1/explore/similarity``: one word's occurrences in a few sentences, compared."""

    model_config = Strict
    sentences: Sentences = Field(min_length=1, description="strings (split by `tokenizer`) or token lists")
    word: Word = Field(description=f"the token to compare (at least 2, at most {MAX_OCCURRENCES} "
                                   "occurrences)")
    model: ModelId = Field(None, description="a model id of GET /v1/explore (default: the first)")
    ignore_case: StrictBool = False
    tokenizer: TokenizerName | None = None
    senses: list[Word] | None = Field(None, description=(
        "the word's sense in each sentence (a label such as `river` or `money`): the response then "
        "says per layer whether same-sense pairs are closer than different-sense pairs. As many as "
        "`sentences`, a bound no JSON Schema can state (another count is a 422 naming `senses`)"))


class Occurrence(BaseModel):
    sentence: int
    position: int
    tokens: list[str]


class SenseOccurrence(Occurrence):
    sense: str | None


class PairOut(BaseModel):
    first: int
    second: int
    similarity: float


class LayerSimilarity(BaseModel):
    layer: int
    name: str
    matrix: list[list[float]]
    closest: PairOut
    farthest: PairOut


def _fields_of(cls: type) -> dict[str, Any]:
    """A dataclass's fields as required pydantic fields, in its order (a response that is the
    dataclass's ``asdict``)."""
    hints = get_type_hints(cls)
    return {f.name: (hints[f.name], ...) for f in dataclasses.fields(cls)}


LayerSeparation = create_model(
    "LayerSeparation", __module__=__name__, **_fields_of(contexts.LayerSeparation), verdict=(str, ...),
    __doc__="""One layer's same-sense pairs against its different-sense pairs
    (``contextvec.explore.contexts.LayerSeparation``; ``verdict``: its numbers in words).""")


class SenseSeparation(BaseModel):
    """``best``: the layer that separates the senses by the largest margin (null: none does)."""

    layers: list[LayerSeparation]
    best: int | None


class SimilarityResponse(BaseModel):
    """``occurrences``: the first ``MAX_OCCURRENCES`` compared (of ``total``); ``layers`` is
    empty when the word occurs fewer than twice (nothing to compare). With ``senses``:
    ``separation`` per layer, and ``summary``, which layer separates the senses best and by how
    much, or that none does, or why it cannot be measured (null without ``senses``)."""

    model: str
    word: str
    total: int
    occurrences: list[SenseOccurrence]
    layers: list[LayerSimilarity]
    separation: SenseSeparation | None
    summary: str | None


class NearestRequest(BaseModel):
    """``POST /v1/explore/nearest``: a word of a sentence, its nearest contexts in the corpus."""

    model_config = Strict
    sentence: Sentence = Field(
        description="a string with a word (split by `tokenizer`) or a token list")
    position: Integer = Field(ge=0, description=(
        "the word's token index: below the sentence's token count, a bound no JSON Schema can "
        "state (one past it is a 422 naming `position`)"))
    top_k: Integer = Field(5, ge=1, le=MAX_TOP_K, description="contexts per layer")
    model: ModelId = None
    ignore_case: StrictBool = False
    tokenizer: TokenizerName | None = None


class ExploreContext(Occurrence):
    similarity: float


class LayerContexts(BaseModel):
    layer: int
    name: str
    contexts: list[ExploreContext]


class NearestResponse(BaseModel):
    """``occurrences``: the word's in the corpus; ``layers`` is empty when it has none (but in
    the query's own sentence)."""

    model: str
    tokens: list[str]
    position: int
    word: str
    occurrences: int
    layers: list[LayerContexts]


class ExploreRequests(NamedTuple):
    """A server's explorer request models (:func:`request_models`)."""

    similarity: type[SimilarityRequest]
    nearest: type[NearestRequest]


def request_models(ids: list[str], max_sentences: int, max_sentence_tokens: int) -> ExploreRequests:
    """The explorer's request models of a server with these limits (``ServerSettings``' names)
    comparing the models ``ids``: the classes above with the bounds stated in their schemas
    (``contextvec.server.schemas.request_models`` says why)."""
    similarity = restated(SimilarityRequest, model=model_id(ids), sentences=Annotated[
        sentence_list(max_sentence_tokens), stated(maxItems=max_sentences)])
    nearest = restated(NearestRequest, model=model_id(ids), sentence=sentence(max_sentence_tokens),
                       position=Annotated[Integer, stated(maximum=max_sentence_tokens - 1)])
    return ExploreRequests(similarity, nearest)
