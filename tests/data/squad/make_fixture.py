"""Make the SQuAD v1.1 metric fixture: predictions built from the data, scored by the official script.

The official ``evaluate-v1.1.py`` is not committed. The copy used is git blob
``0137fbca04cf93b3dbb5744832d25723420a4861`` (3,419 bytes, sha256
``f5a673dbbd173e29e9ea38f1b2091d883583b77b3a4c17144b223fb0f2f9bd09``), the
copy in ``allenai/bi-att-flow`` (BiDAF, a SQuAD v1.1 leaderboard entry) at ``squad/evaluate-v1.1.py``,
commit ``498c8026d92a8bcf0286e2d216d092d444d02d76`` ("v1.1 evaluator", September 2016), byte for
byte the one in ``yhc1/QANet``; the other public copies compared are this text with local edits
(a silenced message, a renamed argument, an unanswered count). ``rajpurkar/SQuAD-explorer`` holds
only ``evaluate-v2.0.py``. The fixture was made
with Python 3.11.7::

    git -C bi-att-flow show 498c8026d92a8bcf0286e2d216d092d444d02d76:squad/evaluate-v1.1.py \\
        > /tmp/evaluate-v1.1.py
    python tests/data/squad/make_fixture.py /tmp/evaluate-v1.1.py \\
        ../shared/data/tasks/squad-v1.1/dev-v1.1-even-articles.json.gz tests/data/squad

It checks both inputs' sha256, then writes into the output folder:

- ``excerpt.json``: the first paragraph of the first article and the first twelve paragraphs of
  the second, unchanged, in the official layout (CC BY-SA 4.0, as the dataset);
- ``predictions.json`` and ``excerpt-predictions.json``: one prediction per question, made
  from the data with a fixed seed (:func:`build_predictions`), of every kind the metric treats
  differently, some questions left out and two ids that are no questions;
- ``expected.json`` and ``excerpt-expected.json``: what the official script prints on stdout,
  verbatim; ``expected-stderr.txt`` and ``excerpt-expected-stderr.txt``: what it prints on
  stderr (one line per question without a prediction).

The script runs in a virtual environment of its own under /tmp (it needs nothing beyond the
standard library), on the dataset decompressed into a temporary folder (it reads plain JSON),
with ``PYTHONUTF8=1`` (it opens files in the locale's encoding).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import unicodedata
from pathlib import Path

OFFICIAL_SHA256 = "f5a673dbbd173e29e9ea38f1b2091d883583b77b3a4c17144b223fb0f2f9bd09"
DATASET_SHA256 = "bc2f6f6838a1219cbccb7f4336e08c14e57ac7db50829f413d9542753f35c5d7"
SEED = 11
EXCERPT_PARAGRAPHS = (1, 12)  # how many paragraphs of the first and the second article
KINDS = ("gold", "other_reference", "decorated", "spaced", "first_half", "extended", "wrong", "empty",
         "only_articles", "unicode", "missing", "repeated", "glued_article", "context_span")
NOT_QUESTIONS = {"0000000000000000000000aa": "Denver Broncos", "not a question id": ""}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def excerpt(dataset: dict) -> dict:
    articles = []
    for article, keep in zip(dataset["data"], EXCERPT_PARAGRAPHS, strict=False):
        articles.append({**article, "paragraphs": article["paragraphs"][:keep]})
    return {**dataset, "data": articles}


def predict(kind: str, answers: list[str], context: str, start: int, others: list[str],
            rng: random.Random) -> str | None:
    """One prediction of ``kind`` for a question whose references are ``answers`` (the first at
    ``start`` in ``context``); None leaves the question out."""
    gold = answers[0]
    words = gold.split()
    if kind == "gold":
        return gold
    if kind == "other_reference":
        return answers[-1]
    if kind == "decorated":
        return rng.choice(["The ", "a ", "An "]) + gold.upper() + rng.choice([".", "!", "?\"", ")"])
    if kind == "spaced":
        return "  " + ", \t ".join(words) + " \n"
    if kind == "first_half":
        return " ".join(words[:(len(words) + 1) // 2]) if len(words) > 1 else gold[:(len(gold) + 1) // 2]
    if kind == "extended":
        return gold + " " + " ".join(context[start + len(gold):].split()[:rng.randint(1, 4)])
    if kind == "wrong":
        return rng.choice(others)
    if kind == "empty":
        return ""
    if kind == "only_articles":
        return rng.choice(["the", "A.", " an ...", "!?", "The a an"])
    if kind == "unicode":
        return rng.choice([unicodedata.normalize("NFD", gold + " café"), "\u201c" + gold + "\u201d",
                           "\u00a0".join(words), gold + " \u2014 Ünïcödé ΣΊΣΥΦΟΣ", "İ " + gold])
    if kind == "missing":
        return None
    if kind == "repeated":
        return gold + " " + gold
    if kind == "glued_article":
        return rng.choice(["the-" + gold, gold + " another anthem", "a" + gold, gold + " the.a"])
    assert kind == "context_span"
    tokens = context.split()
    first = rng.randrange(len(tokens))
    return " ".join(tokens[first:first + rng.randint(1, 6)])


def build_predictions(dataset: dict) -> dict[str, str]:
    """Predictions for ``dataset``'s questions in file order: each run of ``len(KINDS)`` questions
    gets every kind once, in a seeded order."""
    rng = random.Random(SEED)
    questions = [(qa, paragraph["context"]) for article in dataset["data"]
                 for paragraph in article["paragraphs"] for qa in paragraph["qas"]]
    others = [qa["answers"][0]["text"] for qa, _ in questions]
    predictions: dict[str, str] = {}
    kinds: list[str] = []
    for qa, context in questions:
        if not kinds:
            kinds = list(KINDS)
            rng.shuffle(kinds)
        answers = [answer["text"] for answer in qa["answers"]]
        answer = predict(kinds.pop(), answers, context, qa["answers"][0]["answer_start"], others, rng)
        if answer is not None:
            predictions[qa["id"]] = answer
    return {**predictions, **NOT_QUESTIONS}


def run_official(python: Path, official: Path, dataset: Path, predictions: Path, out: Path,
                 name: str) -> None:
    """Score the ``predictions`` file on the ``dataset`` file (plain JSON) with the official
    script; write what it prints on stdout and stderr, verbatim."""
    command = [str(python), *(str(path.resolve()) for path in (official, dataset, predictions))]
    done = subprocess.run(command, capture_output=True, check=True, cwd=tempfile.gettempdir(),
                          env={"PATH": os.environ.get("PATH", ""), "PYTHONUTF8": "1"})
    (out / f"{name}expected.json").write_bytes(done.stdout)
    (out / f"{name}expected-stderr.txt").write_bytes(done.stderr)
    print(f"{name}expected.json: {done.stdout.decode().strip()}")


def write_json(path: Path, value: dict, indent: int | None = None) -> None:
    path.write_text(json.dumps(value, ensure_ascii=False, indent=indent) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("official", type=Path, help="the official evaluate-v1.1.py")
    parser.add_argument("dataset", type=Path, help="dev-v1.1-even-articles.json.gz")
    parser.add_argument("out", type=Path, help="the fixture folder (tests/data/squad)")
    args = parser.parse_args()
    text = gzip.decompress(args.dataset.read_bytes())
    for path, data, want in ((args.official, args.official.read_bytes(), OFFICIAL_SHA256),
                             (args.dataset, text, DATASET_SHA256)):
        if sha256(data) != want:
            sys.exit(f"{path}: sha256 {sha256(data)}, expected {want}")
    dataset = json.loads(text)

    write_json(args.out / "excerpt.json", excerpt(dataset))
    with tempfile.TemporaryDirectory(prefix="squad-official-") as tmp:
        python = Path(tmp, "venv", "bin", "python")
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(Path(tmp, "venv"))], check=True)
        plain = Path(tmp, "dataset.json")
        plain.write_bytes(text)
        for name, data_file in (("", plain), ("excerpt-", args.out / "excerpt.json")):
            predictions = args.out / f"{name}predictions.json"
            data = json.loads(data_file.read_text(encoding="utf-8"))
            write_json(predictions, build_predictions(data), indent=0)
            run_official(python, args.official, data_file, predictions, args.out, name)


if __name__ == "__main__":
    main()
