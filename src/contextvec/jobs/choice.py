"""The settings every task job shares: which encoder it loads (:class:`EncoderChoice`) and which
task files it reads (:class:`TaskFiles`); how it computes features is
:class:`~contextvec.features.FeatureSettings`. Each is validated once, when it is made."""

from __future__ import annotations

import os
from dataclasses import dataclass

from contextvec.api import DEFAULT_MODEL
from contextvec.encoders.base import Encoder
from contextvec.encoders.precision import Precision, as_precision
from contextvec.tasks.spec import TaskSpec, as_task
from contextvec.tasks.split import Split


@dataclass(frozen=True)
class EncoderChoice:
    """Which encoder a job loads: a bundled model's name or a model directory (``model``), or
    bilm-tf files (``options_file`` with ``weight_file``); none of them: the bundled default."""

    model: str | None = None
    options_file: str | None = None
    weight_file: str | None = None
    device: str = "cpu"
    precision: Precision = Precision.FP32
    """A :class:`~contextvec.encoders.precision.Precision` or its spelling."""

    def __post_init__(self) -> None:
        if self.model and (self.options_file or self.weight_file):
            raise ValueError("give either --model or --options-file/--weight-file, not both")
        object.__setattr__(self, "precision", as_precision(self.precision))

    @property
    def name(self) -> str:
        """The encoder as reports name it."""
        return self.model or self.options_file or f"bundled {DEFAULT_MODEL}"

    def load(self) -> Encoder:
        import contextvec

        return contextvec.load(self.model, options_file=self.options_file, weight_file=self.weight_file,
                               device=self.device, precision=self.precision)

    def reference(self) -> dict:
        """How a saved task model names the encoder to load it again (paths made absolute)."""
        from contextvec.tasks.saved import encoder_reference

        return encoder_reference(self.model or (None if self.options_file else DEFAULT_MODEL),
                                 self.options_file, self.weight_file)


@dataclass(frozen=True)
class TaskFiles:
    """A task's data files; ``max_sentences``: read only the first N sentences of each. Without
    ``dev``, a task that carves one takes a seeded 10% of train (:meth:`TaskSpec.load_splits`)."""

    train: str | os.PathLike
    dev: str | os.PathLike | None = None
    test: str | os.PathLike | None = None
    max_sentences: int | None = None

    def __post_init__(self) -> None:
        if self.max_sentences is not None and self.max_sentences < 1:
            raise ValueError(f"max_sentences must be >= 1, not {self.max_sentences}")

    def read(self, task: str | TaskSpec) -> tuple[Split, Split, Split | None]:
        """Train, dev and test (or None) as ``task``'s reader reads them."""
        return as_task(task).load_splits(self.train, self.dev, self.test, self.max_sentences)

    def as_dict(self) -> dict:
        """The files as reports record them (paths as given, as text)."""
        return {name: None if path is None else os.fspath(path)
                for name, path in (("train", self.train), ("dev", self.dev), ("test", self.test))}
