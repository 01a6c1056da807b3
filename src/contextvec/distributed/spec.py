"""What a worker needs to load the model itself (names and paths, never a pickled model), and
the settings of the cluster a run uses."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from contextvec.encoders.base import Encoder


def _absolute(path: str | None) -> str | None:
    """Workers may run in another folder: an existing relative path is made absolute here."""
    if path is None or not Path(path).exists():
        return path  # a bundled model's name, or a path only the workers' nodes have
    return str(Path(path).resolve())


@dataclass(frozen=True)
class ModelSpec:
    """``contextvec.load`` arguments plus the worker's torch thread count."""

    model: str | None = None
    options_file: str | None = None
    weight_file: str | None = None
    device: str = "cpu"
    threads: int = 1
    precision: str = "fp32"

    def __post_init__(self) -> None:
        if self.model and (self.options_file or self.weight_file):
            raise ValueError("give either --model or --options-file/--weight-file, not both")
        if self.threads < 1:
            raise ValueError(f"threads must be >= 1, not {self.threads}")

    def resolved(self) -> ModelSpec:
        """The same spec with local relative paths made absolute (call on the driver)."""
        return ModelSpec(_absolute(self.model), _absolute(self.options_file),
                         _absolute(self.weight_file), self.device, self.threads, self.precision)

    @property
    def gpus(self) -> int:
        """GPUs one worker asks Ray for."""
        return 1 if self.device.startswith("cuda") else 0

    def load(self) -> Encoder:
        """The encoder, with torch limited to :attr:`threads` threads in this process."""
        import torch

        import contextvec

        torch.set_num_threads(self.threads)
        return contextvec.load(self.model, options_file=self.options_file,
                               weight_file=self.weight_file, device=self.device,
                               precision=self.precision)


@dataclass(frozen=True)
class RaySettings:
    """Where and how wide a Ray run goes (``contextvec embed --engine ray``'s own options; what
    the vectors are is the same [`BulkSettings`][contextvec.bulk.BulkSettings] as a local run's).

    Attributes:
        workers: Ray actors, each loading the model once (None: as many as the cluster's CPUs,
            or GPUs, allow).
        address: a running cluster, e.g. ``10.0.0.1:6379`` or ``auto`` (None: Ray is started
            here, or the session already initialised in this process is used).
        merge: write one HDF5 file in the local engine's layout instead of a folder of shards.

    Raises:
        ValueError: ``workers`` below 1.
    """

    workers: int | None = None
    address: str | None = None
    merge: bool = False

    def __post_init__(self) -> None:
        if self.workers is not None and (isinstance(self.workers, bool) or not isinstance(self.workers, int)
                                         or self.workers < 1):
            raise ValueError(f"workers must be an integer >= 1, not {self.workers!r}")
