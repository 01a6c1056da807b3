"""Does allennlp's ``Elmo`` load a contextvec export and give the same embeddings?

Run with a Python that has both allennlp and contextvec (see docs/allennlp-check.md for the
environment; allennlp cannot be a test dependency: it pins torch < 1.13)::

    contextvec convert export --to bilm-tf            # the bundled model, as bilm-tf files
    python benchmarks/allennlp_parity.py export sentences.txt

It compares, sentence by sentence, every biLM layer of allennlp's ``Elmo`` (its ``_ElmoBiLm``
activations with the sentence boundaries removed, as ``Elmo.forward`` does) and its default
output (equal-weight scalar mix, gamma 1) with contextvec's layers and their mean, and prints
the largest absolute difference of each. Both run on one batch holding every sentence, so
allennlp's state carried across batches plays no part.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch


def allennlp_layers(model_dir: Path, sentences: list[list[str]]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per sentence: allennlp's (layers, tokens, dim) activations and ``Elmo``'s output."""
    from allennlp.modules.elmo import Elmo, batch_to_ids
    from allennlp.nn.util import remove_sentence_boundaries

    elmo = Elmo(str(model_dir / "options.json"), str(model_dir / "weights.hdf5"),
                num_output_representations=1, dropout=0.0)
    elmo.eval()
    ids = batch_to_ids(sentences)
    with torch.no_grad():
        out = elmo(ids)
        # Elmo.forward consumes the biLM's state; run it again from zero for the raw layers.
        elmo._elmo_lstm._elmo_lstm.reset_states()
        bilm = elmo._elmo_lstm(ids)
    layers = [remove_sentence_boundaries(a, bilm["mask"])[0] for a in bilm["activations"]]
    stacked = torch.stack(layers).numpy()
    mixed = out["elmo_representations"][0].numpy()
    lengths = [len(s) for s in sentences]
    return ([stacked[:, i, :n] for i, n in enumerate(lengths)],
            [mixed[i, :n] for i, n in enumerate(lengths)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", type=Path, help="bilm-tf export: options.json + weights.hdf5")
    parser.add_argument("sentences", type=Path, help="one whitespace-tokenized sentence per line")
    parser.add_argument("--tolerance", type=float, default=1e-4)
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    torch.set_num_threads(2)
    import allennlp

    import contextvec

    lines = args.sentences.read_text(encoding="utf-8").splitlines()
    sentences = [line.split() for line in lines if line.split()]
    n_tokens = sum(map(len, sentences))
    print(f"allennlp {allennlp.__version__}, contextvec {contextvec.__version__}, torch {torch.__version__}")
    print(f"{len(sentences)} sentences, {n_tokens} tokens, longest {max(map(len, sentences))}")

    start = time.perf_counter()
    theirs, their_mix = allennlp_layers(args.model_dir, sentences)
    print(f"allennlp Elmo: {time.perf_counter() - start:.1f} s")
    start = time.perf_counter()
    ours = contextvec.load(args.model_dir).embed(sentences, batch_size=len(sentences), max_tokens=None)
    print(f"contextvec: {time.perf_counter() - start:.1f} s")

    worst = 0.0
    for k in range(ours[0].shape[0]):
        diff = max(float(np.abs(o[k] - t[k]).max()) for o, t in zip(ours, theirs, strict=True))
        scale = max(float(np.abs(t[k]).max()) for t in theirs)
        print(f"layer {k}: max |contextvec - allennlp| = {diff:.2e} (largest |value| {scale:.2f})")
        worst = max(worst, diff)
    diff = max(float(np.abs(o.mean(0) - m).max()) for o, m in zip(ours, their_mix, strict=True))
    print(f"Elmo output (equal-weight mix, gamma 1) vs the mean of contextvec's layers: {diff:.2e}")
    worst = max(worst, diff)
    ok = worst <= args.tolerance
    print(f"{'same' if ok else 'DIFFERENT'}: largest difference {worst:.2e} (tolerance {args.tolerance:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
