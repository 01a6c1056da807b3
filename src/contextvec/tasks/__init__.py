"""Downstream tasks on frozen or fine-tuned encoders: the task table, task data readers, task
models, the one fit loop and their saved form (:func:`load_task_model`)."""

from __future__ import annotations

_SAVED = ("TaskModel", "load_task_model")


def __getattr__(name: str) -> object:
    # Lazy: importing a light submodule (a reader) must not load torch-heavy model code.
    if name in _SAVED:
        from contextvec.tasks import saved

        return getattr(saved, name)
    raise AttributeError(f"module 'contextvec.tasks' has no attribute {name!r}")
