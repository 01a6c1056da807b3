"""Tolerances for results that may be summed in another order, derived from dtype and magnitude.

The same float expression evaluated twice may sum its products in different orders: another
matmul kernel (MKL or oneDNN; AVX2, AVX-512 or AMX code), another blocking for another row count
or batch shape, another thread count, a fused kernel against its unfused steps. Each order is
correct and none is promised, so a test that compares two of them allows what reordering may
change, and no more.

Reordering a sum of ``K`` terms moves it by at most about ``K * eps * sum|terms|`` (Higham,
*Accuracy and Stability of Numerical Algorithms*, 2nd ed., section 4.2), ``eps`` the dtype's
machine epsilon (float32: 2**-23; bfloat16: 2**-7). The tests take ``sum|terms|`` to be of the
order of the largest value compared, ``max|expected|`` (their layers do not cancel their terms by
orders of magnitude; the worst-case factor ``K``, where ``sqrt(K)`` is typical, leaves room for
that). Through a stack of layers the errors of each add up, so ``terms`` counts the products
summed along the way to one output: the sum of each layer's reduction length.

The bound is absolute, ``terms * eps * max|expected|``, the same for every element: an element far
below the tensor's magnitude is the sum of terms as large as the others', so it carries as much
absolute error, which an elementwise ``rtol`` would refuse.
"""

from __future__ import annotations

import numpy as np
import torch

FP32_EPS = float(torch.finfo(torch.float32).eps)  # 2**-23
BF16_EPS = float(torch.finfo(torch.bfloat16).eps)  # 2**-7


def reorder_bound(expected: torch.Tensor | np.ndarray, *, terms: int, eps: float = FP32_EPS) -> float:
    """The most two summation orders of ``expected`` may differ by: ``terms * eps * max|expected|``."""
    if terms < 1:
        raise ValueError(f"terms must be >= 1, not {terms}")
    values = torch.as_tensor(np.asarray(expected) if not isinstance(expected, torch.Tensor) else expected)
    magnitude = float(values.detach().abs().max()) if values.numel() else 0.0
    return terms * eps * magnitude


def assert_reordered_close(actual: torch.Tensor | np.ndarray, expected: torch.Tensor | np.ndarray, *,
                           terms: int, eps: float = FP32_EPS, msg: str | None = None) -> None:
    """``actual`` equals ``expected`` up to summing ``terms`` products in another order (see the
    module's docstring); shapes must match exactly."""
    actual_t = torch.as_tensor(np.asarray(actual) if not isinstance(actual, torch.Tensor) else actual)
    expected_t = torch.as_tensor(np.asarray(expected) if not isinstance(expected, torch.Tensor) else expected)
    bound = reorder_bound(expected_t, terms=terms, eps=eps)
    torch.testing.assert_close(actual_t.detach(), expected_t.detach(), rtol=0, atol=bound,
                               check_dtype=False,
                               msg=None if msg is None else lambda default: f"{msg}: {default}")
