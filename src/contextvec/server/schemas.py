"""Request and response bodies of the HTTP API (pydantic v2; they make the OpenAPI schema).

Requests are strict: wrong types are not coerced (``"1"`` is not a layer index, ``1`` is not a
sentence) and unknown fields are refused, so a typo gives a 422 naming the field instead of a
silently ignored option.

A server validates with its own request models (:func:`request_models`): these classes with its
limits and its model's layers and dimensions stated in their schemas.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NamedTuple, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictInt, StrictStr, create_model
from pydantic.fields import FieldInfo

from contextvec.documents.settings import CONTEXTS
from contextvec.encoders.outputs import LAYER_MODES, POOL_MODES
from contextvec.text.tokenize import LINE_TOKENIZERS

Strict = ConfigDict(extra="forbid", strict=True)

LayerMode = Literal[LAYER_MODES]  # the spellings of encoders.outputs.Layers and Pooling
PoolMode = Literal[POOL_MODES]
Encoding = Literal["float", "base64"]
ContextName = Literal[CONTEXTS]  # the spellings of documents.settings.Context
TokenizerName = Literal[LINE_TOKENIZERS]  # the spellings of text.tokenize's one-sentence-a-line tokenizers
# Bounded so that the mixed vectors stay finite in float32 (JSON has no inf/NaN). A strict
# float takes integers too; its bounds appear in the schema as minimum and maximum.
FiniteFloat = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=-1e30, le=1e30)]


def _integral(value: object) -> object:
    """``2.0`` as ``2``: JSON Schema counts a number without a fraction as an integer (and JSON
    does not tell them apart); ``2.5``, ``true`` and ``"2"`` stay refused."""
    return int(value) if type(value) is float and value.is_integer() else value


Integer = Annotated[StrictInt, BeforeValidator(_integral)]
"""An integer as JSON Schema means it: ``2`` or ``2.0``."""

NOT_SPACE = r"[^\s\x1c-\x1f\x85\ufeff]"
r"""A character no regex engine here counts as a space: ``\s`` differs between JSON Schema's
(ECMAScript: ``\ufeff`` is one), Python's (``\x1c``-``\x1f`` and ``\x85`` are) and pydantic's
(Unicode's White_Space: ``\x85`` is), so a schema that says ``\S`` admits what the server refuses."""
NonBlank = Annotated[StrictStr, Field(json_schema_extra={"pattern": NOT_SPACE})]
"""A text with a word: the server answers a blank one with a 400 (as OpenAI does), not pydantic."""


Offset = Annotated[StrictInt, Field(ge=0), BeforeValidator(_integral)]
"""A character offset: an :data:`Integer` of at least 0 (the bound before the validator, so
that the schema states it as ``minimum``)."""
Count = Annotated[StrictInt, Field(ge=1), BeforeValidator(_integral)]
"""A positive :data:`Integer` (bounded as :data:`Offset` is)."""
CharacterSpan = Annotated[list[Offset], Field(min_length=2, max_length=2)]
"""``[start, end)``: character offsets, end exclusive."""


def stated(**bounds: object) -> FieldInfo:
    """JSON Schema keywords (``maxItems``, ``maximum``, ...) in the schema alone, the ones None
    left out: the server checks these bounds itself after validation (service.py), with the
    status and message it documents (a string over --max-sentence-tokens words is a 413, a
    request over --max-sentences names the option), which pydantic's checks would replace."""
    return Field(json_schema_extra={k: v for k, v in bounds.items() if v is not None} or None)


def sentence_list(tokens: int | None = None) -> Any:
    """Sentences as strings or token lists, a token list of at most ``tokens`` (stated)."""
    return list[StrictStr | Annotated[list[StrictStr], stated(maxItems=tokens)]]


Sentences = sentence_list()


Model = TypeVar("Model", bound=BaseModel)


def restated(model: type[Model], /, **fields: Any) -> type[Model]:
    """``model`` with each of ``fields`` (``name=annotation``) retyped, keeping the field's
    default, description and constraints: the annotations carry :func:`stated` bounds. The class
    keeps ``model``'s name and docstring, so its schema is the same component, bounded."""
    retyped = {}
    for name, annotation in fields.items():
        field = model.model_fields[name]
        kept = Field(field.default, description=field.description)
        kept.metadata = list(field.metadata)  # its constraints, applied as they were (ge before a validator)
        retyped[name] = (annotation, kept)
    return create_model(model.__name__, __base__=model, __doc__=model.__doc__,
                        __module__=model.__module__, **retyped)


class ScalarMixSpec(BaseModel):
    """``gamma * sum_k softmax(weights)_k * layer_k`` (ELMo's scalar mix, fixed weights)."""

    model_config = Strict
    weights: list[FiniteFloat] = Field(min_length=1, description="one raw weight per layer")
    gamma: FiniteFloat = 1.0


def layer_spec(layers: int | None = None, mix: type[ScalarMixSpec] = ScalarMixSpec) -> Any:
    """A mode, layer indices (stated: of a model of ``layers`` layers) or a scalar mix."""
    index = Annotated[Integer, stated(minimum=None if layers is None else -layers,
                                      maximum=None if layers is None else layers - 1)]
    return LayerMode | Annotated[list[index], Field(min_length=1)] | mix


LayerSpec = layer_spec()


class EmbedRequest(BaseModel):
    """``POST /v1/embed``: per-token vectors of chosen layers, or pooled sentence vectors."""

    model_config = Strict
    sentences: Sentences = Field(
        min_length=1,
        description="strings (split on whitespace, or by `tokenizer`) or token lists",
    )
    layers: LayerSpec = Field(
        "all",
        description='"all" (layers, tokens, dim), "top" or "average" (tokens, dim), a list of '
        "layer indices (len, tokens, dim; negative counts from the top) or a scalar mix "
        "{weights, gamma} (tokens, dim)",
    )
    pool: PoolMode | None = Field(None, description="one vector per sentence over its tokens")
    encoding: Encoding = Field("float", description='"base64": little-endian float32 bytes')
    tokenizer: TokenizerName | None = Field(
        None, description="how string sentences are split (default: the server's --tokenizer)"
    )
    context: ContextName = Field(
        "sentence", description='"document": the sentences are one document, in order, and each is read '
        "with it (docs/documents.md says what a sentence's vectors then depend on)"
    )
    offsets: bool = Field(
        False, description="each string sentence's tokens' (start, end) character offsets in it"
    )
    chunk_tokens: Count | None = Field(
        None, description="late chunking: pool every chunk_tokens consecutive tokens of the request "
        "(across sentences) after the pass; `chunks` replaces `embeddings`"
    )
    spans: Annotated[list[CharacterSpan], Field(min_length=1)] | None = Field(
        None, description="late chunking: (start, end) character offsets into the request's text (its "
        "string sentences joined by a newline), one pooled vector each; `chunks` replaces `embeddings`"
    )


class SentenceVectors(BaseModel):
    """One sentence's tokens and vectors (nested lists, or base64 of float32 in C order)."""

    index: int
    tokens: list[str]
    shape: list[int]
    vectors: list | str
    offsets: list[list[int]] | None = None


class ChunkVectors(BaseModel):
    """One late chunk: its tokens ``[first, stop)`` in request order, its characters where the
    sentences were strings, and its pooled vector."""

    index: int
    first: int
    stop: int
    start: int | None = None
    end: int | None = None
    shape: list[int]
    vector: list | str


class Usage(BaseModel):
    prompt_tokens: int
    total_tokens: int


class EmbedResponse(BaseModel):
    model: str
    encoding: Encoding
    embeddings: list[SentenceVectors]
    chunks: list[ChunkVectors] | None = None
    usage: Usage


def text_list(most: int | None = None) -> Any:
    """A text or a list of at most ``most`` texts (stated), each with a word."""
    return NonBlank | Annotated[list[NonBlank], Field(min_length=1), stated(maxItems=most)]


def dimension(dim: int | None = None) -> Any:
    """An optional number of dimensions, stated: ``dim`` (the model's) only."""
    return Annotated[Integer, stated(minimum=dim, maximum=dim)] | None


Texts, Dimensions = text_list(), dimension()


class EmbeddingsRequest(BaseModel):
    """``POST /v1/embeddings`` (OpenAI-compatible): pooled vectors with the server's mix."""

    model_config = ConfigDict(strict=True)  # OpenAI clients may send fields we do not use
    input: Texts = Field(
        description="a text or a list of texts, each with at least one word (token-id arrays "
        "are not supported); at most --openai-max-inputs texts (2048 by default)"
    )
    model: StrictStr | None = Field(None, description="ignored: the server serves one model")
    encoding_format: Encoding = "float"
    dimensions: Dimensions = Field(
        None, description="if given, must equal the model's (vectors are never cut)")
    user: StrictStr | None = None
    chunk_tokens: Count | None = Field(
        None, description="contextvec's extension, late chunking: each text is a document (its lines its "
        "sentences), read whole, then every chunk_tokens consecutive tokens pooled into one item")
    spans: Annotated[list[list[CharacterSpan]], Field(min_length=1)] | None = Field(
        None, description="contextvec's extension, late chunking: per text, the (start, end) character "
        "offsets to pool into one item each, after the text's pass")
    context: ContextName = Field(
        "sentence", description='contextvec\'s extension: "document" reads each text\'s lines (sentences) '
        "with each other (docs/documents.md)")


class EmbeddingItem(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str
    chunk: int | None = Field(None, description="with late chunking: the chunk's index in its text")
    start: int | None = Field(None, description="with late chunking: the chunk's first character")
    end: int | None = Field(None, description="with late chunking: the character after its last one")


class EmbeddingsResponse(BaseModel):
    object: Literal["list"] = "list"
    data: list[EmbeddingItem]
    model: str
    usage: Usage


MAX_QUESTION_CHARS = 2000
"""Characters of a question: a model reads only its first ``max_query`` word pieces."""
MAX_N_BEST = 20
"""Answers a request may ask for (the spans each window keeps while decoding)."""


class AnswerRequest(BaseModel):
    """``POST /v1/answer``: one question on one context, answered with spans of the context."""

    model_config = Strict
    question: NonBlank = Field(
        max_length=MAX_QUESTION_CHARS,
        description="the question; a model reads its first max_query word pieces (64 by default)")
    context: NonBlank = Field(
        description="the text to answer from; at most --max-context-chars characters (a long one is "
        "read in overlapping windows)")
    n_best: Integer = Field(1, ge=1, le=MAX_N_BEST,
                            description="answers to give, best first (fewer if the context has fewer spans)")


class AnswerSpan(BaseModel):
    """An answer: ``context[start:end]`` (offsets in characters, as Python counts them) and its
    score (the model's: BERT's start and end logits summed, a span model's log-probabilities)."""

    text: str
    start: int
    end: int
    score: float


class AnswerResponse(BaseModel):
    model: str
    answers: list[AnswerSpan]


class RequestModels(NamedTuple):
    """A server's request models (:func:`request_models`)."""

    embed: type[EmbedRequest]
    embeddings: type[EmbeddingsRequest]
    answer: type[AnswerRequest]


def request_models(*, max_sentences: int, max_sentence_tokens: int, num_layers: int,
                   openai_max_inputs: int, openai_dim: int, max_context_chars: int) -> RequestModels:
    """The request models of a server with these limits (``ServerSettings``' names) serving a
    model of ``num_layers`` layers whose ``/v1/embeddings`` vectors have ``openai_dim``
    dimensions: the classes above, each bound the server checks stated in their schemas, so
    that every request the schema allows is one the server takes. They validate as the classes
    above do (:func:`stated`)."""
    mix = restated(ScalarMixSpec, weights=Annotated[list[FiniteFloat],
                                                    stated(minItems=num_layers, maxItems=num_layers)])
    embed = restated(EmbedRequest, layers=layer_spec(num_layers, mix), sentences=Annotated[
        sentence_list(max_sentence_tokens), stated(maxItems=max_sentences)])
    embeddings = restated(EmbeddingsRequest, input=text_list(openai_max_inputs),
                          dimensions=dimension(openai_dim))
    answer = restated(AnswerRequest, context=Annotated[NonBlank, stated(maxLength=max_context_chars)])
    return RequestModels(embed, embeddings, answer)


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "contextvec"
    num_layers: int
    dim: int


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class Ready(BaseModel):
    status: Literal["ready"] = "ready"
    model: str


class ErrorBody(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: int


class ErrorResponse(BaseModel):
    """Every 4xx/5xx: OpenAI's error shape, ``param`` naming the offending field."""

    error: ErrorBody
