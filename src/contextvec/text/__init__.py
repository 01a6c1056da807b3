"""Text processing: tokenization, ELMo character ids, length batching."""

from contextvec.text.batching import length_batches
from contextvec.text.chars import batch_to_char_ids, token_to_char_ids
from contextvec.text.tokenize import Sentence, as_tokens

__all__ = ["Sentence", "as_tokens", "batch_to_char_ids", "length_batches", "token_to_char_ids"]
