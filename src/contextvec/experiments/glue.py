"""The BERT paper's Table 1 on the GLUE tasks here (``contextvec experiment glue``): which runs
each task gets.

Per task (:func:`glue_plan`), for each of :data:`ENCODERS` chosen:

- ``bert-finetune``: the whole BERT fine-tuned with one new layer on ``[CLS]``
  (:func:`~contextvec.tasks.finetune.fine_tune`) as the paper's section 4.1 does it: batch 32,
  3 epochs, one run per learning rate of :data:`LEARNING_RATES` and seed; the table reports the
  learning rate with the best mean dev score;
- ``elmo``, ``cove``, ``bert-features``: the frozen-feature model (the pair model of GLUE's
  baseline for pair tasks, the sentence classifier for CoLA and SST-2) over the encoder's
  layers: ELMo's learned scalar mix, CoVe's top biLSTM layer, BERT's last four layers summed;
- ``none``: the same model without contextual vectors;

and, for classification tasks, the majority class of train (the paper's WNLI entry).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from contextvec.experiments.plans import RunKind, RunSpec
from contextvec.tasks.finetune import FineTuneSettings
from contextvec.tasks.models import ModelSettings
from contextvec.tasks.spec import get_task
from contextvec.tasks.train import TrainSettings

EXPERIMENT = "glue"
GLUE_TASKS = ("cola", "sst2-glue", "mrpc", "rte", "stsb", "wnli")
"""The GLUE tasks of the table (the data here has no MNLI, QQP or QNLI)."""
LEARNING_RATES = (5e-5, 4e-5, 3e-5, 2e-5)
"""The fine-tuning learning rates the BERT paper chooses from on dev (section 4.1)."""
FINE_TUNE, NONE, MAJORITY = "bert-finetune", "none", "majority"


@dataclass(frozen=True)
class FrozenRow:
    """A frozen-feature configuration: the encoder it reads (by the job's encoder names) and how."""

    encoder: str | None
    layers: str = "mix"


FROZEN: dict[str, FrozenRow] = {
    "elmo": FrozenRow("elmo"),
    "cove": FrozenRow("cove", "last"),
    "bert-features": FrozenRow("bert", "sum_last_4"),
    NONE: FrozenRow(None),
}
ENCODERS = (FINE_TUNE, *FROZEN)
"""The configurations ``--encoders`` chooses among, in table order."""
BERT = "bert"
"""The encoder name of the BERT model: fine-tuned and read as features."""


def check_encoders(names: Sequence[str]) -> tuple[str, ...]:
    """``names`` in table order, each known and given once (a one-line ValueError otherwise)."""
    unknown = [n for n in names if n not in ENCODERS]
    if unknown:
        raise ValueError(f"unknown encoder {unknown[0]!r}; choose from {', '.join(ENCODERS)}")
    if len(set(names)) != len(names) or not names:
        raise ValueError(f"--encoders names one twice or none: {' '.join(names)}")
    return tuple(n for n in ENCODERS if n in names)


def check_tasks(names: Sequence[str]) -> tuple[str, ...]:
    """``names`` in table order, each a GLUE task given once."""
    unknown = [n for n in names if n not in GLUE_TASKS]
    if unknown:
        raise ValueError(f"{unknown[0]!r} is not a GLUE task of the table; choose from "
                         f"{', '.join(GLUE_TASKS)}")
    if len(set(names)) != len(names) or not names:
        raise ValueError(f"--tasks names one twice or none: {' '.join(names)}")
    return tuple(n for n in GLUE_TASKS if n in names)


@dataclass(frozen=True)
class GluePlan:
    """What every task's runs share. ``encoders``: of :data:`ENCODERS`; ``seeds``: one run per
    seed (and, fine-tuning, per learning rate of ``lrs``); ``model``: the frozen-feature models'
    settings besides placement and layers (``hidden``, ``dropout``, ...), ``train``: their
    training; ``fine_tune``: the fine-tuning recipe (its ``lr`` and ``seed`` are each run's);
    ``table_id``: the shared settings' hash (runs of another stay in ``results.json``, not in
    the table)."""

    encoders: tuple[str, ...]
    seeds: tuple[int, ...]
    lrs: tuple[float, ...]
    model: dict
    train: TrainSettings
    fine_tune: FineTuneSettings
    table_id: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "encoders", check_encoders(self.encoders))
        for name, values in (("--seeds", self.seeds), ("--lrs", self.lrs)):
            if not values or len(set(values)) != len(values):
                raise ValueError(f"{name} names one twice or none: {' '.join(map(str, values))}")
        if any(not lr > 0 for lr in self.lrs):
            raise ValueError(f"--lrs must be > 0: {' '.join(map(str, self.lrs))}")


def frozen_settings(task: str, row: FrozenRow, model: dict) -> ModelSettings:
    """The frozen-feature model of ``task`` reading ``row``'s layers at its input."""
    placement = "input" if row.encoder else "none"
    return get_task(task).model_settings(**model, placement=placement, layers=row.layers)


def glue_plan(task: str, plan: GluePlan) -> list[RunSpec]:
    """One task's runs, in table order: fine-tuning per (lr, seed), each frozen configuration per
    seed, then the majority class (classification tasks)."""
    out: list[RunSpec] = []
    for name in plan.encoders:
        if name == FINE_TUNE:
            out += [RunSpec(FINE_TUNE, None, replace(plan.fine_tune, lr=lr, seed=seed), BERT,
                            RunKind.FINE_TUNE) for lr in plan.lrs for seed in plan.seeds]
        else:
            row = FROZEN[name]
            model = frozen_settings(task, row, plan.model)
            out += [RunSpec(name, model, replace(plan.train, seed=seed), row.encoder) for seed in plan.seeds]
    if not get_task(task).regression:
        out.append(RunSpec(MAJORITY, None, None, None, RunKind.MAJORITY))
    return out
