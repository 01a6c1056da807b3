"""Word sense disambiguation by 1-nearest-neighbour sense centroids (ELMo, Peters et al. 2018, 5.3).

For each encoder layer separately:

1. **Centroids.** Every sense-annotated span of the training corpus (SemCor) is embedded in its
   sentence; a span's vector is the mean of its tokens' vectors (multiword expressions, see
   :mod:`contextvec.probes.semcor`). A sense key's centroid is the mean of the vectors of its spans
   (a span with several gold keys counts for each).
2. **Prediction.** An evaluation instance (lemma + POS) is embedded the same way; among its lemma's
   WordNet senses *that have a centroid*, the one of highest cosine similarity wins (ties: the
   earlier WordNet sense). If none of its senses was seen in training, WordNet's first sense is
   the answer; if WordNet has no sense for it, there is no answer.
3. **Scoring** as Raganato et al.'s scorer (:func:`~contextvec.probes.scoring.wsd_score`): an
   answer is correct if it is one of the gold keys;
   precision = correct / answered, recall = correct / instances, F1 their harmonic mean. With the
   fallback nearly every instance is answered, so P, R and F1 nearly coincide.

The WordNet first-sense baseline alone is scored beside the layers.

Vectors come from the feature cache of :mod:`contextvec.features` (the encoder runs once per
model and data; later runs read the cache) or straight from the encoder (``VectorSource.cache``
False: nothing stored). Either way they are streamed in blocks of sentences and summed into the
centroids with ``index_add``, so memory holds the centroids, not the corpus's vectors. Prediction
gathers each instance's candidate scores from matmuls of the instance vectors with the candidate
centroid matrix, then takes a segmented argmax.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from contextvec.encoders.base import Encoder
from contextvec.encoders.fingerprint import model_identity
from contextvec.features import FeatureFile, FeatureSettings, cached_features
from contextvec.probes.scoring import Score, wsd_score
from contextvec.probes.semcor import SenseSpan, WsdCorpus
from contextvec.probes.wordnet import SenseInventory

BLOCK_TOKENS = 16384  # tokens per block of vectors summed at once: bounds memory
SCORE_ROWS = 1024  # instances per similarity matmul: bounds the (rows, candidate senses) matrix


@dataclass(frozen=True)
class VectorSource:
    """Where vectors come from: the feature cache (``cache``) or the encoder directly; either way
    computed as ``features`` says (its cache folder and dtype, the encoder's batching)."""

    features: FeatureSettings = FeatureSettings()
    cache: bool = True
    progress: bool = True


# ---------------------------------------------------------------------------------------------
# Span vectors, summed per row (a sense key, or an evaluation instance)


@dataclass(frozen=True)
class SpanEntries:
    """What to add where, grouped by sentence (CSR): the entries of sentence ``s`` are
    ``ptr[s]:ptr[s + 1]``; entry ``e`` adds ``weight[e]`` x the vector of token ``token[e]`` of its
    sentence to row ``row[e]``."""

    ptr: np.ndarray
    token: np.ndarray
    row: np.ndarray
    weight: np.ndarray

    @classmethod
    def build(cls, per_sentence: Sequence[Sequence[tuple[SenseSpan, Sequence[int]]]]) -> SpanEntries:
        """From ``(span, rows)`` pairs per sentence: each token of the span adds 1/len to each row,
        so a row summed over one span is the span's mean vector."""
        token, row, weight, ptr = [], [], [], [0]
        for spans in per_sentence:
            for span, rows in spans:
                length = span.end - span.start
                for r in rows:
                    token.extend(range(span.start, span.end))
                    row.extend([r] * length)
                    weight.extend([1.0 / length] * length)
            ptr.append(len(token))
        return cls(np.array(ptr, np.int64), np.array(token, np.int64), np.array(row, np.int64),
                   np.array(weight, np.float32))


def iter_blocks(
    encoder: Encoder,
    sentences: Sequence[Sequence[str]],
    options: VectorSource,
    label: str = "",
    model_id: str | None = None,
) -> Iterator[tuple[list[int], np.ndarray]]:
    """Yield ``(sentence indices, layers)``: ``layers`` (num_layers, tokens, dim) float32 are those
    sentences' token vectors, concatenated in the order of the indices. Every sentence comes once."""
    if options.cache:
        path = cached_features(encoder, sentences, options.features, progress=options.progress, label=label,
                               model_id=model_id)
        with FeatureFile.open(path) as features:
            yield from features.blocks(BLOCK_TOKENS)
        return
    ids: list[int] = []
    arrays: list[np.ndarray] = []
    tokens = 0
    with tqdm(total=len(sentences), unit="sent", desc=f"embed {label}".strip(),
              disable=not options.progress) as bar:
        for index, array in encoder.embed_batches(sentences, options.features.batch_size,
                                                  options.features.max_tokens):
            ids.append(index)
            arrays.append(array)
            tokens += array.shape[1]
            bar.update(1)
            if tokens >= BLOCK_TOKENS:
                yield ids, np.concatenate(arrays, axis=1)
                ids, arrays, tokens = [], [], 0
    if ids:
        yield ids, np.concatenate(arrays, axis=1)


def sum_spans(
    blocks: Iterator[tuple[list[int], np.ndarray]],
    lengths: Sequence[int],
    entries: SpanEntries,
    n_rows: int,
    num_layers: int,
    dim: int,
) -> torch.Tensor:
    """Weighted sums of token vectors per row: ``(num_layers, n_rows, dim)`` float32 (see
    :class:`SpanEntries`)."""
    sums = torch.zeros(n_rows, num_layers, dim)
    for ids, layers in blocks:
        starts = np.concatenate([[0], np.cumsum([lengths[i] for i in ids])[:-1]])
        parts = [(entries.ptr[s], entries.ptr[s + 1], start) for s, start in zip(ids, starts, strict=True)]
        token = np.concatenate([entries.token[a:b] + start for a, b, start in parts])
        if not len(token):
            continue
        row = np.concatenate([entries.row[a:b] for a, b, _ in parts])
        weight = np.concatenate([entries.weight[a:b] for a, b, _ in parts])
        source = torch.from_numpy(np.ascontiguousarray(layers[:, token].transpose(1, 0, 2)))
        sums.index_add_(0, torch.from_numpy(row), source * torch.from_numpy(weight)[:, None, None])
    return sums.permute(1, 0, 2).contiguous()


def _normalize(vectors: torch.Tensor) -> np.ndarray:
    """Rows scaled to unit length (a zero row stays zero: cosine 0 with everything)."""
    return torch.nn.functional.normalize(vectors, dim=-1, eps=1e-12).numpy()


@dataclass
class SenseCentroids:
    """``vectors[l, i]``: the unit-length centroid of sense ``keys[i]`` at layer ``l``;
    ``counts[i]`` its number of training spans."""

    keys: list[str]
    vectors: np.ndarray
    counts: np.ndarray

    def __post_init__(self) -> None:
        self.index = {k: i for i, k in enumerate(self.keys)}


def _embedded_subset(corpus: WsdCorpus) -> list[int]:
    """Sentences with at least one span: the others add nothing and are not embedded."""
    return [i for i, s in enumerate(corpus.sentences) if s.spans]


def sense_centroids(
    encoder: Encoder,
    train: WsdCorpus,
    options: VectorSource = VectorSource(),
    model_id: str | None = None,
) -> SenseCentroids:
    """Per-layer sense centroids of the training corpus (see the module docstring)."""
    keep = _embedded_subset(train)
    keys: dict[str, int] = {}
    counts: list[int] = []
    per_sentence = []
    for i in keep:
        pairs = []
        for span in train.sentences[i].spans:
            rows = [keys.setdefault(k, len(keys)) for k in span.keys]
            counts.extend([0] * (len(keys) - len(counts)))
            for r in rows:
                counts[r] += 1
            pairs.append((span, rows))
        per_sentence.append(pairs)
    if not keys:
        raise ValueError(f"{train.source}: no sense-annotated words to train on")
    sentences = [train.sentences[i].tokens for i in keep]
    blocks = iter_blocks(encoder, sentences, options, f"{Path(train.source).name} (train)", model_id)
    sums = sum_spans(blocks, [len(s) for s in sentences], SpanEntries.build(per_sentence), len(keys),
                     encoder.num_layers, encoder.output_dim)
    count_array = np.array(counts, np.int64)
    return SenseCentroids(list(keys), _normalize(sums / torch.from_numpy(count_array)[:, None].float()),
                          count_array)


def instance_vectors(
    encoder: Encoder,
    data: WsdCorpus,
    options: VectorSource = VectorSource(),
    model_id: str | None = None,
) -> tuple[list[SenseSpan], np.ndarray]:
    """The evaluation instances (spans, in order) and their unit vectors ``(num_layers, n, dim)``."""
    keep = _embedded_subset(data)
    instances: list[SenseSpan] = []
    per_sentence = []
    for i in keep:
        pairs = []
        for span in data.sentences[i].spans:
            pairs.append((span, [len(instances)]))
            instances.append(span)
        per_sentence.append(pairs)
    sentences = [data.sentences[i].tokens for i in keep]
    blocks = iter_blocks(encoder, sentences, options, f"{Path(data.source).name} (eval)", model_id)
    sums = sum_spans(blocks, [len(s) for s in sentences], SpanEntries.build(per_sentence), len(instances),
                     encoder.num_layers, encoder.output_dim)
    return instances, _normalize(sums)


# ---------------------------------------------------------------------------------------------
# 1-NN prediction


def nearest_candidates(
    vectors: np.ndarray, centroids: np.ndarray, candidates: Sequence[Sequence[int]]
) -> np.ndarray:
    """For each instance ``i``, the row of ``centroids`` among ``candidates[i]`` of highest dot
    product with ``vectors[i]`` (unit vectors: cosine); ties go to the earlier candidate; -1 where
    ``candidates[i]`` is empty. ``vectors`` (n, dim), ``centroids`` (m, dim)."""
    n = len(candidates)
    counts = np.array([len(c) for c in candidates], np.int64)
    chosen = np.full(n, -1, np.int64)
    if not counts.sum():
        return chosen
    inst = np.repeat(np.arange(n), counts)
    cols = np.concatenate([np.asarray(c, np.int64) for c in candidates])
    rank = np.arange(len(cols)) - np.repeat(np.cumsum(counts) - counts, counts)  # position in its list
    used, local = np.unique(cols, return_inverse=True)
    matrix = centroids[used]  # only the senses some instance can choose
    scores = np.empty(len(cols), np.float32)
    bounds = np.searchsorted(inst, np.arange(0, n + SCORE_ROWS, SCORE_ROWS))
    for a, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        if lo == hi:
            continue
        first = a * SCORE_ROWS
        block = vectors[first:first + SCORE_ROWS] @ matrix.T
        scores[lo:hi] = block[inst[lo:hi] - first, local[lo:hi]]
    order = np.lexsort((rank, -scores, inst))  # by instance, best score first, earlier sense on ties
    starts = np.cumsum(counts) - counts
    has = counts > 0
    chosen[has] = cols[order[starts[has]]]
    return chosen


@dataclass
class LayerResult:
    """One layer's 1-NN scores, and how its answers were made."""

    layer: int
    score: Score
    nearest: int  # instances answered by a centroid
    first_sense_fallback: int  # no sense with a centroid: WordNet's first sense
    no_sense: int  # WordNet has no sense for the lemma + POS: unanswered


@dataclass
class WsdReport:
    """Scores per layer and of the first-sense baseline, with data sizes and timings."""

    layers: list[LayerResult]
    first_sense: Score
    train: dict
    eval: dict
    runtime_s: dict = field(default_factory=dict)
    predictions: dict[int, dict[str, str | None]] = field(default_factory=dict)
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            **self.extra,
            "train": self.train,
            "eval": self.eval,
            "first_sense": asdict(self.first_sense),
            "layers": [{"layer": r.layer, **asdict(r.score), "nearest": r.nearest,
                        "first_sense_fallback": r.first_sense_fallback, "no_sense": r.no_sense}
                       for r in self.layers],
            "runtime_s": self.runtime_s,
        }


def predict(
    vectors: np.ndarray,
    instances: Sequence[SenseSpan],
    centroids: SenseCentroids,
    inventory: SenseInventory,
) -> tuple[list[dict[str, str | None]], dict[str, str | None], list[np.ndarray]]:
    """1-NN answers per layer (id -> key or None), the first-sense answers, and per layer a bool
    array of which instances a centroid decided. ``vectors``: (num_layers, n, dim) unit rows."""
    ids = [s.id or str(i) for i, s in enumerate(instances)]
    senses = [tuple(inventory.sense_keys(s.lemma, s.pos)) for s in instances]
    candidates = [[centroids.index[k] for k in keys if k in centroids.index] for keys in senses]
    first = {iid: keys[0] if keys else None for iid, keys in zip(ids, senses, strict=True)}
    per_layer, decided = [], []
    for layer in range(vectors.shape[0]):
        rows = nearest_candidates(vectors[layer], centroids.vectors[layer], candidates)
        per_layer.append({iid: centroids.keys[row] if row >= 0 else first[iid]
                          for iid, row in zip(ids, rows, strict=True)})
        decided.append(rows >= 0)
    return per_layer, first, decided


def evaluate_wsd(
    encoder: Encoder,
    train: WsdCorpus,
    data: WsdCorpus,
    inventory: SenseInventory,
    options: VectorSource = VectorSource(),
) -> WsdReport:
    """Train sense centroids on ``train``, predict and score ``data`` (instances with gold keys)."""
    gold = {span.id or f"{i}": span.keys for i, (_, span) in enumerate(data.spans())}
    if missing := [i for i, keys in gold.items() if not keys]:
        raise ValueError(f"{data.source}: {len(missing)} instances have no gold keys, e.g. {missing[0]}")
    timings: dict[str, float] = {}
    started = time.perf_counter()
    model_id = model_identity(encoder) if options.cache else None
    centroids = sense_centroids(encoder, train, options, model_id)
    timings["train_features"] = time.perf_counter() - started
    mark = time.perf_counter()
    instances, vectors = instance_vectors(encoder, data, options, model_id)
    timings["eval_features"] = time.perf_counter() - mark
    mark = time.perf_counter()
    per_layer, first, decided = predict(vectors, instances, centroids, inventory)
    layers = []
    for layer, (answers, nn) in enumerate(zip(per_layer, decided, strict=True)):
        unanswered = sum(a is None for a in answers.values())
        layers.append(LayerResult(layer, wsd_score(answers, gold), int(nn.sum()),
                                  int((~nn).sum()) - unanswered, unanswered))
    timings["predict"] = time.perf_counter() - mark
    timings["total"] = time.perf_counter() - started
    train_info = {
        "source": train.source, "sentences": len(train), "embedded_sentences": len(_embedded_subset(train)),
        "tokens": train.num_tokens, "spans": train.num_spans, "sense_keys": len(centroids.keys),
        "unmapped_wnsn0": train.unmapped,
    }
    eval_info = {
        "source": data.source, "sentences": len(data), "instances": len(instances),
        "instances_with_a_trained_sense": int(decided[0].sum()) if decided else 0,
    }
    return WsdReport(layers, wsd_score(first, gold), train_info, eval_info,
                     {k: round(v, 3) for k, v in timings.items()}, dict(enumerate(per_layer)))


def format_table(report: WsdReport) -> str:
    """The scores as a text table: one row per layer and one for the first-sense baseline."""
    lines = [f"{'system':<22} {'P':>6} {'R':>6} {'F1':>6}  {'1-NN':>6} {'MFS':>6} {'none':>5}"]
    for r in report.layers:
        s = r.score
        lines.append(f"{f'layer {r.layer} 1-NN':<22} {100 * s.precision:6.1f} {100 * s.recall:6.1f} "
                     f"{100 * s.f1:6.1f}  {r.nearest:6d} {r.first_sense_fallback:6d} {r.no_sense:5d}")
    s = report.first_sense
    lines.append(f"{'WordNet first sense':<22} {100 * s.precision:6.1f} {100 * s.recall:6.1f} "
                 f"{100 * s.f1:6.1f}")
    return "\n".join(lines)

