"""Embedding a corpus across machines on Ray: resumable, fault tolerant, byte-identical to the
local engine (:func:`contextvec.bulk.embed_to_hdf5`), with the same settings
(:class:`contextvec.bulk.BulkSettings`) plus the cluster's own (:class:`RaySettings`).

Ray is an optional extra (``pip install -e ".[ray]"``) and is imported only when a run starts.
Modules: ``spec`` (the model as workers load it), ``inputs`` (several files as one corpus, cut
into blocks), ``worker`` (the actor's work), ``schedule`` (dealing blocks, retrying lost ones),
``outputs`` (shard folder or merged file), ``engine`` (:func:`embed_ray`).
"""

from contextvec.api import ModelSpec
from contextvec.distributed.engine import RayNotInstalled, RunSummary, embed_ray, require_ray
from contextvec.distributed.spec import RaySettings

__all__ = ["ModelSpec", "RayNotInstalled", "RaySettings", "RunSummary", "embed_ray", "require_ray"]
