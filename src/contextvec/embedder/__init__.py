"""Scalar mix and the task-model embedder built on any encoder."""

from contextvec.embedder.module import ContextualEmbedder, EmbedderOutput
from contextvec.embedder.scalar_mix import ScalarMix

__all__ = ["ContextualEmbedder", "EmbedderOutput", "ScalarMix"]
