"""The embedding engine: sentences from many callers batched together on one torch thread.

[`Engine`][contextvec.engine.Engine] is the front door (``contextvec.Engine``); the server, any
Python program with many concurrent callers, and bulk embedding (``contextvec embed``, locally
and on each Ray worker, one call per chunk, cut into its own batches) embed through it.
"""

from contextvec.engine.batcher import QueueFull, ShuttingDown
from contextvec.engine.engine import Engine, EngineSettings, EngineStats

__all__ = ["Engine", "EngineSettings", "EngineStats", "QueueFull", "ShuttingDown"]
