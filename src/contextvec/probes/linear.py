"""Linear probes: how much of a token-level task each frozen encoder layer encodes linearly.

One softmax classifier is trained per layer, plus one on a learned :class:`ScalarMix` of all
layers (the mix weights and gamma trained jointly with that classifier). All of them are one
module, :class:`LayerProbes`, trained in a single loop: the probes share no parameters, so the
sum of their losses gives each exactly its own gradient, and Adam's per-parameter updates keep
them independent. One pass over the shuffled token matrix therefore trains every probe at once
(as if each had been trained alone on the same minibatches).

Each probe keeps the epoch with the best dev accuracy (ties: the earlier one); its test accuracy
is the one at that epoch (test never influences the choice). Tags missing from train count as
errors on dev/test (a probe cannot predict a class it never saw).

Features are standardised per layer and dimension with the training split's mean and standard
deviation first (:func:`standardize`). This affine map does not change what a per-layer linear
probe can express, but it centres the large offsets that encoder features carry, so Adam
converges in a few epochs with one learning rate for any encoder (without it, it needs many
more epochs to reach the same accuracy).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from contextvec.embedder.scalar_mix import ScalarMix
from contextvec.encoders.base import Encoder
from contextvec.encoders.fingerprint import model_identity
from contextvec.features import FeatureSettings, load_features
from contextvec.tasks.split import TaggedCorpus

MIX = "mix"
EVAL_TOKENS = 65536  # tokens per evaluation step: bounds memory for large label sets


@dataclass(frozen=True)
class ProbeSettings:
    """Training settings shared by every probe. ``batch_size`` counts tokens; a value at least
    the number of training tokens means full-batch training."""

    epochs: int = 10
    lr: float = 1e-2
    batch_size: int = 1024
    seed: int = 0
    weight_decay: float = 0.0
    standardize: bool = True
    device: str = "cpu"

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1 or self.lr <= 0:
            raise ValueError(f"epochs and batch_size must be >= 1 and lr > 0: {self}")


@dataclass
class ProbeResult:
    """One probe: a layer (``layer`` = its index) or the scalar mix (``layer`` None)."""

    name: str
    layer: int | None
    best_epoch: int
    dev_accuracy: float
    test_accuracy: float | None
    dev_curve: list[float]
    mix_weights: list[float] | None = None
    mix_gamma: float | None = None


@dataclass
class SplitData:
    """One split as tensors: ``layers`` (num_layers, tokens, dim) float32, ``labels`` (tokens,)."""

    layers: torch.Tensor
    labels: torch.Tensor

    @property
    def num_tokens(self) -> int:
        return int(self.labels.shape[0])


@dataclass
class ProbeReport:
    """Everything a probe run found, ready for :meth:`to_dict` (JSON) or :func:`format_table`."""

    labels: list[str]
    results: list[ProbeResult]
    majority: dict[str, float]
    splits: dict[str, dict] = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    runtime_s: dict[str, float] = field(default_factory=dict)
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            **self.extra,
            "labels": self.labels,
            "splits": self.splits,
            "settings": self.settings,
            "majority_baseline": self.majority,
            "probes": [asdict(r) for r in self.results],
            "runtime_s": self.runtime_s,
        }


def standardize(reference: SplitData, *others: SplitData) -> None:
    """Standardise every split in place with ``reference``'s per-layer, per-dimension statistics."""
    std, mean = torch.std_mean(reference.layers, dim=1, keepdim=True)
    std = std.nan_to_num(1.0).clamp(min=1e-6)  # constant or single-token dimensions stay finite
    mean = mean.nan_to_num(0.0)
    for split in (reference, *others):
        split.layers.sub_(mean).div_(std)


def tag_vocabulary(tags: Sequence[Sequence[str]]) -> list[str]:
    """The sorted set of tags (the classes, from the training split)."""
    return sorted({t for sentence in tags for t in sentence})


def encode_tags(tags: Sequence[Sequence[str]], vocabulary: Sequence[str]) -> torch.Tensor:
    """All tokens' class ids, concatenated in order; -1 for a tag not in ``vocabulary``."""
    index = {t: i for i, t in enumerate(vocabulary)}
    return torch.tensor([index.get(t, -1) for sentence in tags for t in sentence], dtype=torch.long)


def majority_accuracy(train_labels: torch.Tensor, labels: torch.Tensor) -> float:
    """Accuracy of always predicting the most frequent training class."""
    if labels.numel() == 0:
        return 0.0
    majority = Counter(train_labels.tolist()).most_common(1)[0][0]
    return float((labels == majority).float().mean())


class LayerProbes(nn.Module):
    """``num_layers`` independent linear classifiers (one per layer) + one on a scalar mix.

    Input ``(num_layers, batch, dim)``; output logits ``(num_layers + 1, batch, classes)``, the
    mix probe last. Weights start at zero (the problem is convex; zero is a deterministic start).
    """

    def __init__(self, num_layers: int, dim: int, num_classes: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(num_layers, dim, num_classes))
        self.bias = nn.Parameter(torch.zeros(num_layers, 1, num_classes))
        self.mix = ScalarMix(num_layers)
        self.mix_classifier = nn.Linear(dim, num_classes)
        nn.init.zeros_(self.mix_classifier.weight)
        nn.init.zeros_(self.mix_classifier.bias)

    @property
    def num_probes(self) -> int:
        return self.weight.shape[0] + 1

    def forward(self, layers: torch.Tensor) -> torch.Tensor:
        """Logits of every probe for a batch of token vectors.

        Args:
            layers: ``(num_layers, tokens, dim)`` float, each token's vector at every layer.

        Returns:
            ``(num_layers + 1, tokens, classes)`` float logits, one probe per layer, the mix
            probe last.
        """
        per_layer = torch.baddbmm(self.bias, layers, self.weight)  # one batched matmul for all layers
        mixed = self.mix_classifier(self.mix(layers))
        return torch.cat([per_layer, mixed.unsqueeze(0)])


def probe_names(num_layers: int) -> list[str]:
    return [f"layer {k}" for k in range(num_layers)] + [MIX]


@torch.no_grad()
def accuracies(model: LayerProbes, split: SplitData) -> np.ndarray:
    """``(num_probes,)`` accuracy of every probe on ``split`` (evaluated in token chunks)."""
    correct = torch.zeros(model.num_probes, dtype=torch.long, device=split.labels.device)
    for start in range(0, split.num_tokens, EVAL_TOKENS):
        logits = model(split.layers[:, start:start + EVAL_TOKENS])
        correct += (logits.argmax(-1) == split.labels[start:start + EVAL_TOKENS]).sum(-1)
    return (correct.double() / max(split.num_tokens, 1)).cpu().numpy()


def train_probes(train: SplitData, dev: SplitData, num_classes: int, settings: ProbeSettings | None = None,
                 test: SplitData | None = None, progress: bool = True) -> list[ProbeResult]:
    """Train all probes jointly (see the module docstring); one result per layer, then the mix."""
    settings = settings or ProbeSettings()
    generator = torch.Generator().manual_seed(settings.seed)
    num_layers, _, dim = train.layers.shape
    model = LayerProbes(num_layers, dim, num_classes).to(train.layers.device)
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)
    n = train.num_tokens
    batch = min(settings.batch_size, n)
    # Tokens are shuffled once, then every minibatch is a contiguous view of the shuffled matrix
    # (no per-step gather, which costs about a third of a step) and the order of the minibatches
    # is reshuffled every epoch. Peak memory: twice the training features.
    perm = torch.randperm(n, generator=generator).to(train.layers.device)
    layers, labels = train.layers.index_select(1, perm), train.labels[perm]
    starts = torch.arange(0, n, batch)
    dev_curves, test_curves, mix_history = [], [], []
    for _ in tqdm(range(settings.epochs), desc="probes", unit="epoch", disable=not progress):
        model.train()
        for start in starts[torch.randperm(len(starts), generator=generator)].tolist():
            logits = model(layers[:, start:start + batch])
            target = labels[start:start + batch].repeat(model.num_probes)
            # mean over all probes' tokens x num_probes = the sum of each probe's mean loss
            loss = F.cross_entropy(logits.reshape(-1, num_classes), target) * model.num_probes
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        model.eval()
        dev_curves.append(accuracies(model, dev))
        if test is not None:
            test_curves.append(accuracies(model, test))
        with torch.no_grad():
            mix_history.append((model.mix.normalized_weights().tolist(), float(model.mix.gamma)))
    return _select_epochs(num_layers, np.stack(dev_curves),
                          np.stack(test_curves) if test is not None else None, mix_history)


def _select_epochs(
    num_layers: int,
    dev: np.ndarray,
    test: np.ndarray | None,
    mix_history: list[tuple[list[float], float]],
) -> list[ProbeResult]:
    """Per probe: the epoch of best dev accuracy (argmax takes the first of ties)."""
    results = []
    for p, name in enumerate(probe_names(num_layers)):
        best = int(np.argmax(dev[:, p]))
        is_mix = name == MIX
        results.append(ProbeResult(
            name=name,
            layer=None if is_mix else p,
            best_epoch=best + 1,
            dev_accuracy=float(dev[best, p]),
            test_accuracy=None if test is None else float(test[best, p]),
            dev_curve=[round(float(a), 6) for a in dev[:, p]],
            mix_weights=mix_history[best][0] if is_mix else None,
            mix_gamma=mix_history[best][1] if is_mix else None,
        ))
    return results


def split_data(
    encoder: Encoder,
    corpus: TaggedCorpus,
    vocabulary: Sequence[str],
    device: str = "cpu",
    features: FeatureSettings | None = None,
    **cache_kwargs,
) -> SplitData:
    """The corpus's cached features (computed on a miss) and class ids, as tensors; ``cache_kwargs``:
    :func:`~contextvec.features.cached_features`'s ``progress``, ``label`` and ``model_id``."""
    with load_features(encoder, corpus.sentences, features, **cache_kwargs) as stored:
        layers = torch.from_numpy(stored.all_layers())
    return SplitData(layers.to(device), encode_tags(corpus.tags, vocabulary).to(device))


def probe_tagging(
    encoder: Encoder,
    train: TaggedCorpus,
    dev: TaggedCorpus,
    test: TaggedCorpus | None = None,
    settings: ProbeSettings | None = None,
    features: FeatureSettings | None = None,
    progress: bool = True,
) -> ProbeReport:
    """Features (cached) -> linear probes per layer and on a scalar mix -> a :class:`ProbeReport`."""
    settings = settings or ProbeSettings()
    features = features or FeatureSettings()
    started = time.perf_counter()
    vocabulary = tag_vocabulary(train.tags)
    model_id = model_identity(encoder)
    splits = {"train": train, "dev": dev, **({"test": test} if test is not None else {})}
    data = {
        name: split_data(encoder, corpus, vocabulary, settings.device, features, progress=progress,
                         label=f"{name} {Path(corpus.source).name}", model_id=model_id)
        for name, corpus in splits.items()
    }
    if settings.standardize:
        standardize(data["train"], *(d for name, d in data.items() if name != "train"))
    features_done = time.perf_counter()
    results = train_probes(data["train"], data["dev"], len(vocabulary), settings, data.get("test"), progress)
    finished = time.perf_counter()
    return ProbeReport(
        labels=vocabulary,
        results=results,
        majority={name: majority_accuracy(data["train"].labels, d.labels)
                  for name, d in data.items() if name != "train"},
        splits={name: {"source": c.source, "sentences": len(c), "tokens": c.num_tokens,
                       "unknown_tags": int((data[name].labels < 0).sum())}
                for name, c in splits.items()},
        settings={**asdict(settings), "feature_dtype": features.dtype,
                  "num_layers": encoder.num_layers, "dim": encoder.output_dim},
        runtime_s={"features": round(features_done - started, 3),
                   "train": round(finished - features_done, 3),
                   "total": round(finished - started, 3)},
        extra={"model_identity": model_id},
    )


def format_table(report: ProbeReport) -> str:
    """A plain-text table: one row per probe, accuracies in percent."""
    has_test = any(r.test_accuracy is not None for r in report.results)
    header = f"{'probe':<10} {'dev acc':>8}" + (f" {'test acc':>8}" if has_test else "") + f" {'epoch':>5}"
    lines = [header, "-" * len(header)]
    for r in report.results:
        row = f"{r.name:<10} {100 * r.dev_accuracy:>8.2f}"
        if has_test:
            row += f" {100 * r.test_accuracy:>8.2f}" if r.test_accuracy is not None else f" {'-':>8}"
        row += f" {r.best_epoch:>5}"
        if r.mix_weights is not None:
            row += f"   weights {' '.join(f'{w:.2f}' for w in r.mix_weights)}, gamma {r.mix_gamma:.2f}"
        lines.append(row)
    majority = ", ".join(f"{k} {100 * v:.2f}" for k, v in report.majority.items())
    lines.append(f"majority-class baseline: {majority}")
    return "\n".join(lines)
