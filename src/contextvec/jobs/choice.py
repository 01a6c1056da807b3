"""The settings every task job shares: which encoder it loads (:class:`EncoderChoice`) and which
task files it reads (:class:`TaskFiles`); how it computes features is
:class:`~contextvec.features.FeatureSettings`. Each is validated once, when it is made."""

from __future__ import annotations

import os
from dataclasses import dataclass

from contextvec.api import DEFAULT_MODEL, ModelSpec
from contextvec.tasks.spec import TaskSpec, as_task
from contextvec.tasks.split import Split


@dataclass(frozen=True)
class EncoderChoice(ModelSpec):
    """Which encoder a job loads: a [`ModelSpec`][contextvec.api.ModelSpec] (a bundled model's
    name or a model directory, or bilm-tf files; none of them: the bundled default) that leaves
    torch's threads to the job (``threads`` None), named for its reports."""

    threads: int | None = None

    @property
    def name(self) -> str:
        """The encoder as reports name it."""
        return self.model or self.options_file or f"bundled {DEFAULT_MODEL}"

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
