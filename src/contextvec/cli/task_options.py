"""Options and steps shared by the task commands (``train-task``, ``experiment``, ``probe``), so that
each is spelled, range-checked and documented the same way everywhere.

One vocabulary: ``--embed-batch-size`` is the encoder's batch (sentences) when computing features,
``--batch-size`` the task model's training batch; ``--output`` is a JSON file, ``--output-dir`` a
folder of several outputs; layer combinations are spelled as in Python (``sum_last_4``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from contextvec.cli.common import (
    add_overwrite_argument,
    check_output,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    probability,
)
from contextvec.cli.common import seed as seed_type
from contextvec.features import CACHE_ENV, DTYPES
from contextvec.io.atomic import atomic_path
from contextvec.io.text_lines import read_once
from contextvec.io.word_vectors import FORMATS
from contextvec.tasks.models import CLASSIFIERS, LAYERS, MIX_PLACEMENTS, Placement
from contextvec.tasks.schemes import SCHEMES
from contextvec.tasks.spec import TASK_SPECS


def fraction(text: str) -> float:
    """argparse type: a number in (0, 1] (a share of the training set)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1], got {text!r}") from None
    if not 0 < value <= 1:  # NaN fails too
        raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1], got {text}")
    return value


fraction.__name__ = "a fraction in (0, 1]"


def add_data_arguments(p: argparse.ArgumentParser, test_help: str, dev_required: bool = False) -> None:
    """``--train``, ``--dev``, ``--test`` and ``--max-sentences``."""
    p.add_argument("--train", required=True, help="training file (plain or .gz; required)")
    carving = ", ".join(name for name, spec in TASK_SPECS.items() if spec.carves_dev)
    p.add_argument("--dev", required=dev_required,
                   help="dev file: selects the epoch" + (" (required)" if dev_required else
                                                         f" (required except for {carving}; default: none)"))
    p.add_argument("--test", help=test_help + " (default: none)")
    p.add_argument("--max-sentences", type=positive_int,
                   help="read only the first N sentences of each file (default: all)")


def add_feature_arguments(group: argparse._ActionsContainer, embed_batch: bool = True) -> None:
    """``--cache-dir``, ``--feature-dtype`` and (``embed_batch``) ``--embed-batch-size``."""
    group.add_argument("--cache-dir",
                       help=f"feature cache (default: ${CACHE_ENV} or ~/.cache/contextvec/features)")
    group.add_argument("--feature-dtype", choices=DTYPES, default="float32",
                       help="stored (and in-memory) precision of the features (default: float32)")
    if embed_batch:
        add_embed_batch_argument(group)


def add_embed_batch_argument(group: argparse._ActionsContainer, old_name: str | None = None) -> None:
    """``--embed-batch-size``; ``old_name``: an earlier spelling, still read but not shown."""
    group.add_argument("--embed-batch-size", type=positive_int, default=64,
                       help="sentences per encoder batch when computing features (default: 64)")
    if old_name:
        group.add_argument(old_name, type=positive_int, dest="embed_batch_size", help=argparse.SUPPRESS)


def add_training_arguments(
    group: argparse._ActionsContainer, *, epochs: int | None, lr: float | None, batch_size: int, seed: int,
    epochs_help: str, lr_help: str, batch_help: str,
) -> None:
    """``--epochs``, ``--lr``, ``--batch-size`` and ``--seed`` (helps name their defaults; a default
    of None is decided later, by the mode)."""
    group.add_argument("--epochs", type=positive_int, default=epochs, help=epochs_help)
    group.add_argument("--lr", type=positive_float, default=lr, help=lr_help)
    group.add_argument("--batch-size", type=positive_int, default=batch_size, help=batch_help)
    group.add_argument("--seed", type=seed_type, default=seed, help=f"random seed (default: {seed})")


def add_output_arguments(p: argparse.ArgumentParser, what: str = "the results as JSON") -> None:
    """``--output`` (a file), ``--overwrite`` and ``--quiet``."""
    p.add_argument("--output", help=f"write {what} here, atomically (default: not written)")
    add_overwrite_argument(p)
    p.add_argument("--quiet", action="store_true", help="no progress bars (default: shown)")


def check_inputs(args: argparse.Namespace, *names: str) -> list[str]:
    """The input files named by options ``names`` that were given, each checked to be a file
    (a one-line error for a directory or a missing file, before any work); returns them."""
    given = []
    for name in names:
        path = getattr(args, name, None)
        if path is None:
            continue
        option = "--" + name.replace("_", "-")
        if os.fspath(path) == "":
            raise ValueError(f"{option} is an empty path; give a file")
        if read_once(path):  # its size says nothing, and it may be read more than once
            raise ValueError(f"{option} {path} is a pipe, FIFO or device; copy it to a file first")
        if Path(path).is_dir():
            raise ValueError(f"{option} {path} is a directory; give a file")
        if not Path(path).exists():
            raise FileNotFoundError(f"{option} {path} does not exist")
        if Path(path).stat().st_size == 0:
            raise ValueError(f"{option} {path} is an empty file")
        given.append(path)
    return given


def check_outputs(args: argparse.Namespace, inputs: Sequence[str | os.PathLike | None],
                  *files: str | os.PathLike | None) -> None:
    """Refuse each given output file that exists (without ``--overwrite``) or is an input."""
    for output in files:
        if output is not None:
            check_output(output, inputs=inputs, overwrite=args.overwrite)


def write_json(path: str | os.PathLike, result: dict) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {path}")


@contextmanager
def resumable_features(
    what: str = "finished feature chunks are kept, rerun the same command",
) -> Iterator[None]:
    """Ctrl-C during a feature pass: say what is kept (the cache resumes by itself), exit 130."""
    try:
        yield
    except KeyboardInterrupt:
        print(f"\ncontextvec: interrupted; {what}", file=sys.stderr)
        raise SystemExit(130) from None


def layer_combination(text: str) -> str:
    """argparse type of ``--layers``: the Python spelling (``sum_last_4``); the earlier
    ``sum-last-4`` is still read."""
    return text.replace("-", "_")


def _defaults_by_task(field: str) -> str:
    """``field``'s default per task, the most common value as "others" (``ner 50, others 100``)."""
    values = {name: spec.model_defaults[field] for name, spec in TASK_SPECS.items()}
    common = Counter(values.values()).most_common(1)[0][0]
    return ", ".join([f"{name} {value}" for name, value in values.items() if value != common]
                     + [f"others {common}"])


DEFAULTS_BY_TASK = _defaults_by_task("word_dim")


def add_contextual_arguments(p: argparse.ArgumentParser) -> None:
    """``train-task``'s contextual-vector options (which layers, where, how mixed) and the features'."""
    ctx = p.add_argument_group("contextual vectors")
    ctx.add_argument("--no-contextual", action="store_true",
                     help="baseline without contextual vectors (no encoder is loaded)")
    ctx.add_argument("--placement", choices=MIX_PLACEMENTS,
                     default=Placement.INPUT.value,
                     help="where the mixes enter: [x; ELMo] at the biLSTM input, and [h; ELMo'] at "
                     "its output (default: input)")
    ctx.add_argument("--layer-norm", action="store_true",
                     help="layer-normalise each layer before mixing (default: off)")
    ctx.add_argument("--l2", type=non_negative_float, default=0.001,
                     help="lambda of the L2 penalty on the mix weights "
                     "(default: 0.001; 1.0 ~ equal average)")
    ctx.add_argument("--mix-dropout", type=probability, default=0.5,
                     help="dropout on each mix (default: 0.5)")
    ctx.add_argument("--layers", type=layer_combination, choices=LAYERS,
                     help="mix: learned scalar mixes of all layers (default); last, sum_last_4, "
                     "concat_last_4: that fixed combination (BERT paper Table 7), no mix weights")
    ctx.add_argument("--last-layer-only", action="store_true", help="the same as --layers last")
    add_feature_arguments(ctx)


def add_task_model_arguments(p: argparse.ArgumentParser) -> None:
    """``train-task``'s frozen-feature task model options (defaults depend on the task)."""
    m = p.add_argument_group("task model (defaults depend on the task)")
    m.add_argument("--word-vectors", help="initialise word embeddings from a GloVe/word2vec file "
                   "(looked up lowercased; default: random init)")
    m.add_argument("--word-vectors-format", choices=FORMATS, default="auto",
                   help="format of --word-vectors (default: auto)")
    m.add_argument("--word-dim", type=positive_int,
                   help=f"random word embedding size (default: {DEFAULTS_BY_TASK})")
    m.add_argument("--char-cnn", action=argparse.BooleanOptionalAction,
                   help="char CNN in the token representation (default: ner on, others off)")
    m.add_argument("--char-ngrams", type=non_negative_int, default=0, metavar="DIM",
                   help="add character n-gram embeddings of this size to each word (the mean of its 1- to "
                   "4-grams, trained with the task; Hashimoto et al. 2016, CoVe's 'Char': 100) "
                   "(default: 0, none)")
    m.add_argument("--hidden", type=positive_int,
                   help="biLSTM units per direction (default: 100; --classifier bcn: 300)")
    m.add_argument("--lstm-layers", type=positive_int, help="biLSTM layers (default: ner 2, others 1)")
    m.add_argument("--dropout", type=probability, default=0.5,
                   help="dropout in the task model (default: 0.5)")
    m.add_argument("--classifier", choices=CLASSIFIERS, default="pool",
                   help="single-sentence classification: pool = biLSTM + max/mean pooling + MLP; bcn = "
                   "CoVe's biattentive "
                   "classification network (hidden 300 unless --hidden; contextual vectors at its input) "
                   "(default: pool)")
    m.add_argument("--tag-scheme", choices=SCHEMES, default="bio",
                   help="NER tags the model predicts (bio = IOB2; bioul = BIOES, as allennlp's NER); "
                   "scoring is on IOB2 always (default: bio)")
    m.add_argument("--no-constraints", action="store_true",
                   help="NER: no transition constraints in the CRF (default: constrained)")
