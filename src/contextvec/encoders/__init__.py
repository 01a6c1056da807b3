"""Contextual encoders, one subpackage each (``bilm`` = ELMo), behind :class:`Encoder`."""

from contextvec.encoders.base import Encoder, EncoderOutput

__all__ = ["Encoder", "EncoderOutput"]
