"""``embed_ray``: embed a corpus on a Ray cluster into shards (a folder) or one merged HDF5 file.

The driver (this process) checks the inputs, starts or joins Ray, starts the workers (Ray
actors that load the model once each) and deals them blocks of lines; each worker writes its
block's shard atomically into the output folder, which must therefore be on a filesystem that
every node sees (one machine: any local folder). Resuming, the shards already there are
skipped once the manifest (input hashes, model fingerprint, settings) matches.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from contextvec.api import ModelSpec
from contextvec.bulk import BulkSettings, merge_shards
from contextvec.distributed.address import check_ray_address
from contextvec.distributed.inputs import Corpus
from contextvec.distributed.outputs import (
    check_settings_early,
    finish_folder,
    finished_already,
    output_path,
    prepare_ray_output,
)
from contextvec.distributed.schedule import MAX_ATTEMPTS, run_blocks
from contextvec.distributed.spec import RaySettings
from contextvec.distributed.worker import BlockDone, EmbedWorker
from contextvec.extras import MissingExtra, needs
from contextvec.io.atomic import output_lock
from contextvec.io.shards import ShardDir

RayNotInstalled = MissingExtra
"""``--engine ray`` without Ray installed (the name this module has always exported)."""


@dataclass(frozen=True)
class RunSummary:
    """What one call did: ``blocks_run`` of ``blocks`` computed now (the rest were finished
    earlier), ``tokens`` of them in ``seconds`` of dealing, on ``workers`` workers."""

    output: Path
    n_lines: int
    blocks: int
    blocks_run: int
    tokens: int
    seconds: float
    workers: int


def require_ray():
    """The ``ray`` module, or :class:`~contextvec.extras.MissingExtra` saying how to install it."""
    with needs("ray"):
        import ray
    return ray


def _start_workers(ray, spec: ModelSpec, settings: BulkSettings, count: int | None) -> tuple[list, str]:
    """``count`` actors (default: as many as the cluster's CPUs, or GPUs, allow) and the
    fingerprint of the model they all loaded."""
    resources = ray.cluster_resources()
    kind, need = ("GPU", spec.gpus) if spec.gpus else ("CPU", spec.threads)
    fits = int(resources.get(kind, 0) // need)
    count = count or fits
    if count < 1 or count > fits:
        raise ValueError(f"{count or 1} worker(s) need {(count or 1) * need} {kind}(s); "
                         f"the Ray cluster has {resources.get(kind, 0):g}")
    remote = ray.remote(num_cpus=spec.threads, num_gpus=spec.gpus, max_restarts=-1,
                        max_task_retries=MAX_ATTEMPTS - 1)(EmbedWorker)
    workers = [remote.remote(spec, settings) for _ in range(count)]
    try:
        identities = set(ray.get([w.model_identity.remote() for w in workers]))
    except ray.exceptions.RayTaskError as e:
        raise RuntimeError(str(e.cause if e.cause is not None else e).splitlines()[0]) from None
    if len(identities) != 1:
        raise RuntimeError("the workers loaded different models: the model files differ between nodes")
    return workers, identities.pop()


def _holding_output(embed: Callable[..., RunSummary]) -> Callable[..., RunSummary]:
    """``embed`` with its output (and ``OUTPUT.parts/``) held for the whole run: another process
    writing the same output meanwhile is refused at once (``OutputInUseError``)."""

    @functools.wraps(embed)
    def holding(inputs: Sequence[str | os.PathLike], output: str | os.PathLike,
                spec: ModelSpec | None = None, settings: BulkSettings | None = None,
                cluster: RaySettings | None = None, **options: Any) -> RunSummary:
        with output_lock(output_path(output, (cluster or RaySettings()).merge)):
            return embed(inputs, output, spec, settings, cluster, **options)

    return holding


@_holding_output
def embed_ray(
    inputs: Sequence[str | os.PathLike],
    output: str | os.PathLike,
    spec: ModelSpec | None = None,
    settings: BulkSettings | None = None,
    cluster: RaySettings | None = None,
    *,
    on_block: Callable[[BlockDone], None] | None = None,
) -> RunSummary:
    """Embed ``inputs`` (read as one corpus, see :mod:`.inputs`) on Ray.

    ``settings`` are a local run's ([`BulkSettings`][contextvec.bulk.BulkSettings]; default:
    its defaults), ``cluster`` the Ray run's own
    ([`RaySettings`][contextvec.distributed.spec.RaySettings]). Without ``cluster.merge``,
    ``output`` is a folder of ``shard-NNNNNN.h5`` (block ``n``: corpus lines
    ``n * chunk_lines`` onwards), ``manifest.json`` and, once complete, ``done.json``. With
    ``merge`` it is one HDF5 file laid out as the local engine's
    ([`embed_to_hdf5`][contextvec.bulk.embed_to_hdf5]), the shards kept in ``OUTPUT.parts/``
    until the merge. The datasets are the local engine's bytes for the same lines, settings and
    ``chunk_lines``. ``cluster.address``: a running cluster (else Ray is started here, or the
    Ray connection this process already opened is used); one where no Ray cluster answers is
    a :class:`ConnectionError` within seconds (:mod:`.address`). ``on_block`` is called after
    each finished block (in the driver).
    """
    ray = require_ray()
    spec = (spec or ModelSpec()).resolved()
    settings, cluster = settings or BulkSettings(), cluster or RaySettings()
    merge, resume, overwrite = cluster.merge, settings.resume, settings.overwrite
    output = prepare_ray_output(Path(output), inputs, merge=merge, resume=resume, overwrite=overwrite)
    if not ray.is_initialized():
        # before the corpus is read: Ray retries a dead address for minutes
        check_ray_address(cluster.address)
    corpus = Corpus.scan(inputs, settings.sentence_keys, settings.empty_lines, settings.invalid_utf8)
    run = {**corpus.manifest(), **settings.record()}
    parts_path = output.with_name(output.name + ".parts") if merge else output
    if resume:
        check_settings_early(parts_path, run)

    started = not ray.is_initialized()
    if started:
        # "local": a new Ray for this run, even where `ray start` left a cluster to join
        ray.init(address=cluster.address or "local", include_dashboard=False,
                 log_to_driver=settings.progress, logging_level="WARNING")
    actors: list = []
    try:
        actors, identity = _start_workers(ray, spec, settings, cluster.workers)
        parts = ShardDir(parts_path, {**run, "model": identity}, free={"chunk_lines"})
        if resume and finished_already(output, parts, merge, overwrite):
            n_blocks = -(-corpus.n_lines // parts.manifest["chunk_lines"])
            return RunSummary(output, corpus.n_lines, n_blocks, 0, 0, 0.0, len(actors))
        if resume:  # killed writers leave their temporary files behind
            for stale in [*parts.path.glob(".shard-*.tmp*"), *output.parent.glob(f".{output.name}.tmp*")]:
                stale.unlink()
        parts.start(resume, restart=overwrite)
        chunk_lines = parts.manifest["chunk_lines"]
        n_blocks = -(-corpus.n_lines // chunk_lines)
        done = parts.done(n_blocks)
        tokens, start = 0, time.perf_counter()

        with tqdm(total=corpus.n_lines, unit="sent", disable=not settings.progress, desc="embed") as bar:
            bar.update(sum(min(chunk_lines, corpus.n_lines - n * chunk_lines) for n in done))

            def finished(block: BlockDone) -> None:
                nonlocal tokens
                tokens += block.tokens
                bar.update(block.lines)
                bar.set_postfix_str(f"{tokens / max(time.perf_counter() - start, 1e-9):.0f} tok/s")
                if on_block is not None:
                    on_block(block)

            run_blocks(actors, corpus.blocks(chunk_lines, skip=done),
                       lambda actor, number, lines: actor.embed_block.remote(
                           number, lines, str(parts.shard(number)), identity),
                       corpus.describe, finished)
        seconds = time.perf_counter() - start
        missing = sorted(set(range(n_blocks)) - parts.done(n_blocks))
        if missing:
            raise RuntimeError(f"{len(missing)} shard(s) reported written are not in {parts.path} "
                               f"(first: {parts.shard(missing[0]).name}): the output must be on a "
                               "filesystem shared by every node")
    finally:
        for actor in actors:
            ray.kill(actor)
        # Wait until they are gone. A block already running may still land a moment later:
        # shards are written atomically, so a resume just finds it done.
        pings = [actor.model_identity.options(max_task_retries=0).remote() for actor in actors]
        ray.wait(pings, num_returns=len(pings), timeout=30)
        if started:
            ray.shutdown()

    if merge:
        _merge(corpus, parts, n_blocks, output, index=settings.index, progress=settings.progress)
    else:
        finish_folder(parts, corpus, n_blocks)
    return RunSummary(output, corpus.n_lines, n_blocks, n_blocks - len(done), tokens, seconds, len(actors))


def _merge(corpus: Corpus, parts: ShardDir, n_blocks: int, output: Path, index: bool,
           progress: bool) -> None:
    """The shards -> one HDF5 file; several inputs are indexed through their concatenation."""
    if not index or len(corpus.files) == 1:
        merge_shards(parts, n_blocks, output, corpus.files[0].path, index=index, progress=progress)
    else:
        lines = output.with_name(f".{output.name}.lines.tmp")
        try:
            corpus.write_concatenation(lines)
            merge_shards(parts, n_blocks, output, lines, index=index, progress=progress)
        finally:
            lines.unlink(missing_ok=True)
    parts.remove()


__all__ = ["RayNotInstalled", "RunSummary", "embed_ray", "require_ray"]
