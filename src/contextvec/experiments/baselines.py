"""Runs that train nothing: the majority class, the reference the BERT paper gives for WNLI
(Devlin et al. 2019, appendix B.1: every system submitted to GLUE scored below it)."""

from __future__ import annotations

import time
from collections import Counter

from contextvec.tasks.fit import TaskReport
from contextvec.tasks.spec import TaskSpec, as_task
from contextvec.tasks.split import Split


def majority_class(task: str | TaskSpec, train: Split, dev: Split, test: Split | None = None) -> TaskReport:
    """Predict the most frequent training label for every item of dev (and test); a tie goes
    to the label that sorts first, so the choice does not depend on the file's order.

    A report like :func:`~contextvec.tasks.train.train_task`'s, with no epochs and no parameters.
    """
    spec = as_task(task)
    if spec.tagging or spec.regression:
        raise ValueError(f"the majority class is a baseline of classification tasks, not {spec.name}")
    started = time.perf_counter()
    counts = Counter(train.labels)
    label = min(counts, key=lambda c: (-counts[c], c))
    dev_scores = spec.score(dev, [label] * len(dev))
    test_scores = None if test is None or not test.labeled else spec.score(test, [label] * len(test))
    return TaskReport(
        task=spec.name, metric=spec.metric, best_epoch=0, dev=dev_scores, test=test_scores, curve=[],
        mixes=[], labels=sorted(counts),
        splits={name: {"source": s.source, "sentences": len(s), "tokens": s.num_tokens}
                for name, s in (("train", train), ("dev", dev), ("test", test)) if s is not None},
        parameters={"trainable": 0}, model_settings={"mode": "majority", "label": label}, train_settings={},
        runtime_s={"total": round(time.perf_counter() - started, 3)},
        extra={"label_counts": dict(sorted(counts.items()))},
    )
