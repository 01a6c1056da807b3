"""The settings of the cluster a Ray run uses (what each worker loads is a
:class:`contextvec.api.ModelSpec`: names and paths, never a pickled model)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RaySettings:
    """Where and how wide a Ray run goes (``contextvec embed --engine ray``'s own options; what
    the vectors are is the same [`BulkSettings`][contextvec.bulk.BulkSettings] as a local run's).

    Attributes:
        workers: Ray actors, each loading the model once (None: as many as the cluster's CPUs,
            or GPUs, allow).
        address: a running cluster, e.g. ``10.0.0.1:6379`` or ``auto`` (None: Ray is started
            here, or the Ray connection this process already opened is used).
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
