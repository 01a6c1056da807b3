"""Full-softmax NLL, forward + backward: autograd's ``cross_entropy(linear(h))`` vs the blocked
version (which never holds the (targets, vocab) logits); ``softmax_nll`` picks between them.

    python benchmarks/softmax_speed.py            # the bundled model's and Kim-small's shapes

Each row: median milliseconds over ``--repeats`` runs after 2 warm-up runs, both versions back
to back in one process. Run on an idle machine.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from contextvec.training.bilm.lm import ChunkedSoftmaxNLL

# (name, targets per step, hidden width, vocabulary): the bundled elmo-en-small run (64 x 20
# windows, both directions) and Kim-small on PTB (20 x 35, forward only).
SHAPES = [("elmo-en-small", 2560, 128, 50_000), ("kim-small", 700, 300, 10_002)]


def _autograd(h, w, b, t):
    return F.cross_entropy(F.linear(h, w, b), t, reduction="none")


def _blocked(h, w, b, t):
    return ChunkedSoftmaxNLL.apply(h, w, b, t, max(1, (1 << 23) // w.shape[0]))


def _time(fn, h, w, b, t, repeats: int) -> float:
    times = []
    for i in range(2 + repeats):
        start = time.perf_counter()
        fn(h, w, b, t).sum().backward()
        if i >= 2:
            times.append(time.perf_counter() - start)
        h.grad = w.grad = b.grad = None
    return statistics.median(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{'shape':<14} {'targets x width -> vocab':>25} {'autograd ms':>12} "
          f"{'blocked ms':>11} {'speed-up':>9}")
    for name, n, d, v in SHAPES:
        g = torch.Generator().manual_seed(0)
        h = torch.randn(n, d, generator=g, requires_grad=True)
        w = (torch.randn(v, d, generator=g) * d**-0.5).requires_grad_()
        b = torch.zeros(v, requires_grad=True)
        t = torch.randint(0, v, (n,), generator=g)
        old = _time(_autograd, h, w, b, t, args.repeats)
        new = _time(_blocked, h, w, b, t, args.repeats)
        print(f"{name:<14} {f'{n} x {d} -> {v}':>25} {old:>12.1f} {new:>11.1f} {old / new:>8.2f}x",
              flush=True)


if __name__ == "__main__":
    main()
