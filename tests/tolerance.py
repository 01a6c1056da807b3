"""Tolerances for results that may be summed in another order, derived from dtype and magnitude.

The same float expression evaluated twice may sum its products in different orders: another
matmul kernel (MKL or oneDNN; AVX2, AVX-512 or AMX code), another blocking for another row count
or batch shape, another thread count, a fused kernel against its unfused steps. Each order is
correct and none is promised, so a test that compares two of them allows what reordering may
change, and no more.

Two orders of a sum of ``K`` terms differ by at most about ``K * eps * sum|terms|`` (Higham,
*Accuracy and Stability of Numerical Algorithms*, 2nd ed., section 4.2), ``eps`` the dtype's
machine epsilon (float32: 2**-23; bfloat16: 2**-7). For terms of mixed signs, as a layer's
products are, the partial sums grow like ``sqrt(k)`` times a term, which puts the worst case at
about ``K * eps * |sum| / 3`` and the typical case at ``sqrt(K / 8) * eps * |sum|``. The bound here
is ``K * eps * max|expected|``: the worst case, at the magnitude of the values compared. Through
a stack of layers the errors of each add up, so ``terms`` counts the products summed on the way
to one output: the sum of each layer's reduction length. A long recurrence may count one step
per layer: its state forgets (gates below 1), so an earlier step's error shrinks instead of
adding up. Where a lower precision rounds (bf16 products, float16 storage), another order may
flip each rounding by one step: ``terms`` counts the roundings and ``eps`` is that dtype's.

The bound is absolute and the same for every element: an element far below the tensor's
magnitude is the sum of terms as large as the others', so it carries as much absolute error,
which an elementwise ``rtol`` would refuse.
"""

from __future__ import annotations

import numpy as np
import torch

from contextvec.encoders.bert import BertConfig
from contextvec.encoders.bilm.config import BiLMConfig

FP32_EPS = float(torch.finfo(torch.float32).eps)  # 2**-23
BF16_EPS = float(torch.finfo(torch.bfloat16).eps)  # 2**-7
FP16_EPS = float(torch.finfo(torch.float16).eps)  # 2**-10

Values = torch.Tensor | np.ndarray


def _tensor(values: Values) -> torch.Tensor:
    return values.detach() if isinstance(values, torch.Tensor) else torch.from_numpy(np.array(values))


def reorder_bound(expected: Values, *, terms: int, eps: float = FP32_EPS) -> float:
    """The most two summation orders of ``expected`` may differ by: ``terms * eps * max|expected|``."""
    if terms < 1:
        raise ValueError(f"terms must be >= 1, not {terms}")
    values = _tensor(expected)
    return terms * eps * (float(values.abs().max()) if values.numel() else 0.0)


def assert_reordered_close(actual: Values, expected: Values, *, terms: int, eps: float = FP32_EPS,
                           msg: str | None = None) -> None:
    """``actual`` equals ``expected`` up to summing ``terms`` products in another order (see the
    module's docstring); shapes must match exactly."""
    expected_t = _tensor(expected)
    torch.testing.assert_close(
        _tensor(actual), expected_t, rtol=0, atol=reorder_bound(expected_t, terms=terms, eps=eps),
        check_dtype=False, msg=None if msg is None else lambda default: f"{msg}: {default}",
    )


def elmo_terms(config: BiLMConfig) -> int:
    """Products summed on the way to one ELMo output: a char-CNN filter, the highway's gate and
    transform and the token projection, then per LSTM layer one step's gates (input and state)
    and its projection."""
    widest = max(width for width, _ in config.filters)
    cnn = config.char_embed_dim * widest + (2 * config.n_highway + 1) * config.n_filters
    return cnn + config.n_layers * (config.token_dim + config.projection_dim + config.lstm_dim)


def bert_terms(config: BertConfig, pieces: int) -> int:
    """Products summed on the way to one BERT output over ``pieces`` positions, per layer: query,
    key and value, a head's scores, the softmax's sum and the weighted values (over ``pieces``),
    the attention output, two layer norms (mean and variance each), the intermediate and output
    products."""
    head = config.hidden_size // config.num_attention_heads
    per_layer = 7 * config.hidden_size + head + 2 * pieces + config.intermediate_size
    return config.num_hidden_layers * per_layer
