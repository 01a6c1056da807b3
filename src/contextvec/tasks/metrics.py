"""Task scores.

NER: entity precision/recall/F1 from seqeval on **IOB2** tags: gold and predicted tags are
converted from IOB1 (the CoNLL-2003 files) first. ``f1`` is seqeval's default mode, which scores
chunks as the CoNLL ``conlleval`` script does (the standard for CoNLL-2003); ``f1_strict`` is its
strict IOB2 mode. With the default constrained CRF every prediction is a well-formed sequence, so
the two agree. ``by_mention`` splits the entities into those whose words were annotated as an
entity somewhere in the training split (``seen``) and the rest (``unseen``), with P/R/F1 for
each: pretrained representations help most on unseen mentions, and held-out sets differ in how
many they have (Augenstein et al. 2017). Classification: accuracy.

GLUE (Wang et al. 2018), with scikit-learn and scipy: CoLA Matthews correlation
(:func:`mcc_scores`), MRPC accuracy and the F1 of the positive class (:func:`f1_scores`), STS-B
Pearson and Spearman correlation (:func:`correlation_scores`), the other tasks accuracy. All are
fractions. A correlation with constant predictions (or constant gold scores) is undefined; it is
reported as 0, as scikit-learn reports Matthews correlation then, so model selection and the
JSON report always see a number.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from contextvec.extras import needs
from contextvec.tasks.schemes import iob1_to_iob2, to_scheme

with needs("tasks"):
    from scipy.stats import pearsonr, spearmanr
    from seqeval.metrics import classification_report, f1_score
    from seqeval.metrics.sequence_labeling import get_entities
    from seqeval.scheme import IOB2
    from sklearn.metrics import f1_score as binary_f1
    from sklearn.metrics import matthews_corrcoef


def entity_mentions(sentences: Sequence[Sequence[str]], tags_iob1: Sequence[Sequence[str]]) -> set[str]:
    """The word strings of every entity annotated in a split (any type)."""
    return {" ".join(words[start:end + 1]) for words, tags in zip(sentences, tags_iob1, strict=True)
            for _, start, end in get_entities(iob1_to_iob2(tags))}


def _seen_unseen(sentences: Sequence[Sequence[str]], gold: Sequence[Sequence[str]],
                 pred: Sequence[Sequence[str]], seen: set[str]) -> dict:
    counts = {group: {"gold": 0, "predicted": 0, "correct": 0} for group in ("seen", "unseen")}
    for words, g, p in zip(sentences, gold, pred, strict=True):
        gold_spans, pred_spans = set(get_entities(list(g))), set(get_entities(list(p)))
        for spans, key in ((gold_spans, "gold"), (pred_spans, "predicted"),
                           (gold_spans & pred_spans, "correct")):
            for _, start, end in spans:
                group = "seen" if " ".join(words[start:end + 1]) in seen else "unseen"
                counts[group][key] += 1
    for c in counts.values():
        c["precision"] = c["correct"] / c["predicted"] if c["predicted"] else 0.0
        c["recall"] = c["correct"] / c["gold"] if c["gold"] else 0.0
        total = c["precision"] + c["recall"]
        c["f1"] = 2 * c["precision"] * c["recall"] / total if total else 0.0
    return counts


def ner_scores(gold_iob1: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]], scheme: str,
               sentences: Sequence[Sequence[str]] | None = None, seen: set[str] | None = None) -> dict:
    """Entity P/R/F1 (seqeval on IOB2; see the module docstring) and per-type F1.

    With the split's ``sentences`` and the ``seen`` mentions of the training split
    (:func:`entity_mentions`), also ``by_mention``: the scores of seen and unseen mentions.
    """
    gold = [iob1_to_iob2(t) for t in gold_iob1]
    pred = [list(t) if scheme == "bio" else to_scheme(t, "bio", scheme) for t in predicted]
    with warnings.catch_warnings():  # numpy's empty-mean warnings when no entity exists at all
        warnings.simplefilter("ignore", RuntimeWarning)
        report = classification_report(gold, pred, output_dict=True, zero_division=0)
        strict = f1_score(gold, pred, mode="strict", scheme=IOB2, zero_division=0)
    micro = report.get("micro avg", {"f1-score": 0.0, "precision": 0.0, "recall": 0.0})
    return {
        "f1": float(micro["f1-score"]),
        "precision": float(micro["precision"]),
        "recall": float(micro["recall"]),
        "f1_strict": float(strict),
        "per_type": {k: {"f1": float(v["f1-score"]), "support": int(v["support"])}
                     for k, v in report.items() if not k.endswith(" avg")},
        "sentences": len(gold),
        **({"by_mention": _seen_unseen(sentences, gold, pred, seen)}
           if sentences is not None and seen is not None else {}),
    }


def accuracy(gold: Sequence[str], predicted: Sequence[str]) -> dict:
    """Classification accuracy (and the counts behind it)."""
    correct = sum(g == p for g, p in zip(gold, predicted, strict=True))
    return {"accuracy": correct / len(gold), "correct": correct, "sentences": len(gold)}


def mcc_scores(gold: Sequence[str], predicted: Sequence[str]) -> dict:
    """Matthews correlation (CoLA's metric) and accuracy."""
    return {"mcc": float(matthews_corrcoef(gold, predicted)), **accuracy(gold, predicted)}


def f1_scores(gold: Sequence[str], predicted: Sequence[str], positive: str) -> dict:
    """Accuracy and the F1 of class ``positive`` (MRPC's: the paraphrases, ``"1"``)."""
    f1 = binary_f1(list(gold), list(predicted), pos_label=positive, average="binary", zero_division=0.0)
    return {"f1": float(f1), **accuracy(gold, predicted)}


def correlation_scores(gold: Sequence[float], predicted: Sequence[float]) -> dict:
    """Pearson and Spearman correlation of predicted and gold scores (STS-B's metrics); 0 where
    either side is constant (undefined)."""
    gold_array, predicted_array = np.asarray(gold, dtype=np.float64), np.asarray(predicted, dtype=np.float64)
    if len(gold_array) != len(predicted_array):
        raise ValueError(f"{len(gold_array)} gold scores but {len(predicted_array)} predictions")
    constant = len(gold_array) < 2 or np.ptp(gold_array) == 0 or np.ptp(predicted_array) == 0
    pearson = 0.0 if constant else float(pearsonr(gold_array, predicted_array).statistic)
    spearman = 0.0 if constant else float(spearmanr(gold_array, predicted_array).statistic)
    return {"pearson": pearson, "spearman": spearman, "sentences": len(gold_array)}
