"""The ELMo paper's analyses over the task models (``contextvec experiment``).

Each experiment is a list of task-model runs (:class:`RunSpec`) compared on one dataset:

- ``layers`` (ELMo Table 2): the top layer only, versus a learned mix of all layers with
  lambda = 1 (weights pushed towards an equal average) and lambda = 0.001;
- ``placement`` (ELMo Table 3): the mix at the biLSTM input, versus at its input and output;
- ``sample-efficiency`` (ELMo Figure 1): with and without contextual vectors on seeded random
  fractions of the training set.

``representations`` (CoVe's Table 2: the BCN on fixed word vectors alone, + char n-grams,
+ CoVe, + both, + ELMo, + BERT, over every task in one table) has its own plan, runner and table:
:mod:`.representations`, :mod:`.rep_runner` (``run_representations``), :mod:`.rep_table`.

Every configuration can be repeated with several seeds (mean and sample std reported), and
``layers``/``placement`` can add a baseline without contextual vectors.

**One feature pass.** The encoder's layers are computed once per split
(:func:`~contextvec.tasks.train.attach_features`, all layers, through the disk cache); each run
gets views of them: all layers for a learned mix, the top layer for ``last``, none for the
baseline. :func:`~contextvec.tasks.train.train_task` cuts train to the run's fraction itself.

**Resumable.** ``results.json`` in the output directory is rewritten atomically after every
finished run. Each run is stored with its key: task, hashes of the data splits (tokens and
labels), the encoder's weight hash (:func:`~contextvec.features.model_identity`; none for
baseline runs) and all model and training settings. A rerun with the same output directory
skips every run whose key is already there, so an interrupted experiment continues where it
stopped; runs stored under other keys (e.g. an earlier ``--epochs``) are kept in
``other_runs`` and reused if their settings come back.

Outputs (:mod:`.plots` draws the figures): ``results.csv`` (one row per run),
``results.md`` (the runs, then mean +- std per configuration), ``results.json``,
``<experiment>.png`` and ``layer_weights.png`` (ELMo Figure 2), all written atomically.
"""

from contextvec.experiments.plans import (
    BASELINE,
    DEFAULT_FRACTIONS,
    EXPERIMENTS,
    WITH,
    WITHOUT,
    RunSpec,
    layers_plan,
    percent,
    placement_plan,
    sample_efficiency_plan,
)
from contextvec.experiments.runner import (
    RESULTS_CSV,
    RESULTS_MD,
    WEIGHTS_PNG,
    ExperimentResult,
    run_experiment,
)
from contextvec.experiments.store import RESULTS_JSON, ResultStore, run_key, split_identity
from contextvec.experiments.summary import MIX_NAMES, ConfigSummary, FinishedRun, summarise
from contextvec.experiments.tables import results_markdown

__all__ = ["BASELINE", "DEFAULT_FRACTIONS", "EXPERIMENTS", "MIX_NAMES", "RESULTS_CSV", "RESULTS_JSON",
           "RESULTS_MD", "WEIGHTS_PNG", "WITH", "WITHOUT", "ConfigSummary", "ExperimentResult", "FinishedRun",
           "ResultStore", "RunSpec", "layers_plan", "percent", "placement_plan", "results_markdown",
           "run_experiment", "run_key", "sample_efficiency_plan", "split_identity", "summarise"]
