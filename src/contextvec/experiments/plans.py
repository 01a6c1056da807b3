"""The runs each experiment compares (:class:`RunSpec`): ELMo Tables 2 and 3, Figure 1."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from contextvec.choices import checked_choice
from contextvec.tasks.finetune import FineTuneSettings
from contextvec.tasks.models import ModelSettings
from contextvec.tasks.train import TrainSettings

EXPERIMENTS = ("layers", "placement", "sample-efficiency")
DEFAULT_FRACTIONS = (0.001, 0.01, 0.1, 0.5, 1.0)
BASELINE = "no contextual vectors"
WITH, WITHOUT = "with contextual vectors", "without contextual vectors"
MODEL = "model"
"""The name of the one encoder of the ELMo paper's analyses."""


class RunKind(StrEnum):
    """What a run trains: a frozen-feature task model (``train_task``), the whole of a BERT with a
    task head (``fine_tune``, from the model directory named by :attr:`RunSpec.encoder`), or
    nothing (``majority``: the most frequent training label predicted for every item)."""

    FROZEN = "frozen"
    FINE_TUNE = "fine-tune"
    MAJORITY = "majority"


@dataclass(frozen=True)
class RunSpec:
    """One task-model training. ``config``: the compared setting; runs of one config differ
    only in seed and training fraction (and a fine-tune run's learning rate), and are summarised
    together per fraction. ``encoder``: the name of the encoder whose layers a contextual run
    reads (the experiment's encoders by name, :class:`~contextvec.experiments.runner.ExperimentData`),
    or that a fine-tune run trains. ``kind``: :class:`RunKind`; a fine-tune run has no
    ``model_settings`` and :class:`~contextvec.tasks.finetune.FineTuneSettings`, a majority run
    neither."""

    config: str
    model_settings: ModelSettings | None
    train_settings: TrainSettings | FineTuneSettings | None
    encoder: str | None = MODEL
    kind: RunKind = RunKind.FROZEN

    def __post_init__(self) -> None:
        kind = checked_choice(RunKind, self.kind, "run kind")
        object.__setattr__(self, "kind", kind)
        none = type(None)
        wanted = {RunKind.FROZEN: (ModelSettings, TrainSettings), RunKind.FINE_TUNE: (none, FineTuneSettings),
                  RunKind.MAJORITY: (none, none)}[kind]
        given = (self.model_settings, self.train_settings)
        if not all(isinstance(value, cls) for value, cls in zip(given, wanted, strict=True)):
            names = " and ".join("None" if cls is none else cls.__name__ for cls in wanted)
            raise ValueError(f"{self.config}: a {kind.value} run's model and training settings are {names}")

    @property
    def contextual(self) -> bool:
        """The run reads an encoder (its layers, or its weights to fine-tune)."""
        if self.model_settings is None:
            return self.kind is RunKind.FINE_TUNE
        return self.model_settings.placement != "none"

    @property
    def learned_mix(self) -> bool:
        return self.kind is RunKind.FROZEN and self.contextual and self.model_settings.layers == "mix"

    @property
    def name(self) -> str:
        if self.train_settings is None:
            return self.config
        fraction = self.train_settings.train_fraction
        share = f", {percent(fraction)} of train" if fraction < 1 else ""
        lr = f", lr {self.train_settings.lr:g}" if self.kind is RunKind.FINE_TUNE else ""
        return f"{self.config}{share}{lr}, seed {self.train_settings.seed}"

    @property
    def setting(self) -> str:
        """The settings that vary between experiments' runs, in words."""
        m, t = self.model_settings, self.train_settings
        if m is None:
            return self.name.removeprefix(self.config).removeprefix(", ") or self.kind.value
        parts = [f"placement {m.placement}"]
        if self.contextual:
            parts.append(f"layers {m.layers}")
            if self.learned_mix:
                parts.append(f"lambda {t.l2:g}")
        return ", ".join(parts + [f"train {percent(t.train_fraction)}", f"seed {t.seed}"])


def percent(fraction: float) -> str:
    """0.001 -> '0.1%', 0.5 -> '50%'."""
    return f"{fraction * 100:.3g}%"


def _expand(configs: Sequence[tuple[str, ModelSettings, TrainSettings]], seeds: Sequence[int],
            fractions: Sequence[float] = (1.0,)) -> list[RunSpec]:
    if not seeds:
        raise ValueError("give at least one seed")
    return [RunSpec(config, model, replace(train, seed=seed, train_fraction=fraction))
            for fraction in fractions for config, model, train in configs for seed in seeds]


def _baseline(model: ModelSettings, train: TrainSettings) -> tuple[str, ModelSettings, TrainSettings]:
    return BASELINE, replace(model, placement="none", layers="mix", layer_norm=False), train


def layers_plan(model: ModelSettings, train: TrainSettings, seeds: Sequence[int],
                baseline: bool = False) -> list[RunSpec]:
    """ELMo Table 2: last layer only; all layers with lambda 1 and 0.001 (at ``model.placement``)."""
    if model.placement == "none":
        raise ValueError("the layers experiment needs contextual vectors (placement input or input+output)")
    mix = replace(model, layers="mix")
    configs = [("last layer", replace(model, layers="last"), train),
               ("all layers, lambda=1", mix, replace(train, l2=1.0)),
               ("all layers, lambda=0.001", mix, replace(train, l2=0.001))]
    return _expand(configs + ([_baseline(model, train)] if baseline else []), seeds)


def placement_plan(model: ModelSettings, train: TrainSettings, seeds: Sequence[int],
                   baseline: bool = False) -> list[RunSpec]:
    """ELMo Table 3: the mix at the biLSTM input, or at its input and output."""
    configs = [("input", replace(model, placement="input"), train),
               ("input+output", replace(model, placement="input+output"), train)]
    return _expand(configs + ([_baseline(model, train)] if baseline else []), seeds)


def sample_efficiency_plan(model: ModelSettings, train: TrainSettings, seeds: Sequence[int],
                           fractions: Sequence[float] = DEFAULT_FRACTIONS) -> list[RunSpec]:
    """ELMo Figure 1: with and without contextual vectors at each training fraction."""
    if model.placement == "none":
        raise ValueError("the sample-efficiency experiment needs a placement for the contextual runs")
    bad = [f for f in fractions if not 0 < f <= 1]
    if bad or not fractions:
        raise ValueError(f"fractions must be in (0, 1], got {list(fractions)}")
    _, without, _ = _baseline(model, train)
    return _expand([(WITH, model, train), (WITHOUT, without, train)], seeds, sorted(set(fractions)))
