"""Make ``minilm_sentence_vectors.npz``: all-MiniLM-L6-v2's sentence embeddings as
sentence-transformers computes them, for the half of the shared reference sentences at even
line numbers, with each one's count of word pieces ([CLS] and [SEP] included).

sentence-transformers runs this checkpoint as its ``modules.json`` declares: HF ``BertModel``,
then ``Pooling`` with ``pooling_mode_mean_tokens`` (the mean of the top layer over every word
piece its attention mask covers, [CLS] and [SEP] included), then ``Normalize`` (unit length).
The top layers here are HF transformers' own (``../shared/data/reference/bert-minilm``, made
without truncation; every sentence is shorter than the model's ``max_seq_length``), pooled
in float64.

    python tests/server/data/make_minilm_sentence_vectors.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REFERENCE = HERE.parents[2].parent / "shared" / "data" / "reference" / "bert-minilm" / "expected.npz"


def main() -> None:
    reference = np.load(REFERENCE)
    chosen = range(0, len(reference["sentences"]), 2)
    vectors = []
    for i in chosen:
        top = reference[f"hidden_states_{i:03d}"][-1].astype(np.float64)  # (pieces, hidden)
        assert top.shape[0] == reference["lengths"][i] == reference["attention_mask"][i].sum()
        mean = top.mean(axis=0)
        vectors.append(mean / np.linalg.norm(mean))
    np.savez_compressed(HERE / "minilm_sentence_vectors.npz",
                        sentences=np.array([str(reference["sentences"][i]) for i in chosen]),
                        vectors=np.array(vectors, dtype=np.float32),
                        pieces=np.array([reference["lengths"][i] for i in chosen], dtype=np.int32))


if __name__ == "__main__":
    main()
