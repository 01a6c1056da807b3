"""What the ``experiment`` commands that add runs to one table in --output-dir share (``glue``,
``representations``): --device, --threads and --quiet, the runner's settings (--resume checked
against --overwrite), and the job run with its finished runs kept, then what it did printed."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from contextvec.cli import common
from contextvec.cli import task_options as opts
from contextvec.experiments.runner import ExperimentResult, RunnerSettings


def add_run_arguments(p: argparse.ArgumentParser, threads_help: str) -> None:
    """``--device``, ``--threads`` (``threads_help``: how the command spends them), ``--quiet``."""
    p.add_argument("--device", default="cpu", help="torch device (default: cpu)")
    p.add_argument("--threads", type=common.thread_count, help=threads_help)
    p.add_argument("--quiet", action="store_true", help="no progress bars (default: shown)")


def runner_settings(args: argparse.Namespace, jobs: int = 1) -> RunnerSettings:
    """How the runs are carried out, from --output-dir, the feature options, --quiet and
    --overwrite; --resume with --overwrite is refused (one keeps the finished runs, the other
    discards them)."""
    if args.resume and args.overwrite:
        raise ValueError("--resume reuses the finished runs in --output-dir, --overwrite discards them: "
                         "give one")
    return RunnerSettings(Path(args.output_dir), cache_dir=args.cache_dir, feature_dtype=args.feature_dtype,
                          jobs=jobs, progress=not args.quiet, overwrite=args.overwrite)


def run_table(output_dir: str, job: Callable[[], ExperimentResult]) -> None:
    """Run ``job`` (stopped, it says that its finished runs are kept and how to continue), then
    print the table, the runs trained and reused with the runtimes, and the files written."""
    with opts.resumable_features(f"finished runs are kept in {output_dir}/results.json, rerun the same "
                                 "command with --resume to continue"):
        result = job()
    print(result.markdown)
    rt = result.runtime_s
    print(f"{result.trained} runs trained, {result.reused} reused from results.json; runtime: features "
          f"{rt['features']:.1f} s, runs {rt['runs']:.1f} s, total {rt['total']:.1f} s")
    print("wrote " + ", ".join(str(path) for path in result.files))
