"""The papers' analyses over the task models (``contextvec experiment``), in one framework:
a plan of task-model runs (:class:`RunSpec`) -> :func:`run_experiment` (the one runner) ->
``results.json`` (:class:`ResultStore`) -> the experiment's tables and figures. Every
experiment is an entry of it (:class:`~contextvec.experiments.entry.Experiment`):

- ``layers`` (ELMo Table 2): the top layer only, versus a learned mix of all layers with
  lambda = 1 (weights pushed towards an equal average) and lambda = 0.001;
- ``placement`` (ELMo Table 3): the mix at the biLSTM input, versus at its input and output;
- ``sample-efficiency`` (ELMo Figure 1): with and without contextual vectors on seeded random
  fractions of the training set;
- ``representations`` (CoVe's Table 2): the BCN on fixed word vectors alone, + char n-grams,
  + CoVe, + both, + ELMo, + BERT, over every task in one table (:mod:`.representations`,
  :mod:`.rep_table`);
- ``glue`` (the BERT paper's Table 1): BERT fine-tuned (learning rate chosen on dev) and the
  frozen-feature pair model over ELMo, CoVe, BERT features and no contextual vectors, with the
  majority class, on the GLUE tasks, beside the paper's rows (:mod:`.glue`, :mod:`.glue_table`).

The first three are :class:`ElmoAnalysis` entries (:mod:`.plans`, :mod:`.elmo_table`); the
fourth is :class:`RepresentationsTable`, the fifth :class:`GlueTable`. A run is of a
:class:`RunKind`: a frozen-feature task model, a BERT fine-tuned, or the majority class.
Every configuration can be repeated with several seeds (mean and sample std reported), and
``layers``/``placement`` can add a baseline without contextual vectors.

**One feature pass.** Each encoder's layers are computed once per split and layer choice
(:func:`~contextvec.tasks.train.attach_features`, through the disk cache, which always holds all
layers); baseline runs read none. :func:`~contextvec.tasks.train.train_task` cuts train to the
run's fraction itself.

**Resumable.** ``results.json`` in the output directory is rewritten atomically after every
finished run. Each run is stored with its key: task, hashes of the data splits (tokens and
labels), the encoder's weight hash (:func:`~contextvec.encoders.fingerprint.model_identity`;
none for baseline runs) and all model and training settings. A rerun with the same output
directory skips every run whose key is already there, so an interrupted experiment continues
where it stopped; runs stored under other keys (e.g. an earlier ``--epochs``) are kept in
``other_runs`` and reused if their settings come back.

Outputs, all written atomically (:mod:`.tables`: the one CSV and markdown writer): the ELMo
analyses write ``results.csv`` (one row per run), ``results.md`` (the runs, then mean +- std
per configuration), ``results.json``, ``<experiment>.png`` and ``layer_weights.png`` (ELMo
Figure 2, :mod:`.plots`); the representations table ``results.csv``, ``results.md`` and
``representations.png``.
"""

from contextvec.experiments.elmo_table import RESULTS_CSV, RESULTS_MD, WEIGHTS_PNG, ElmoAnalysis
from contextvec.experiments.entry import Experiment, RunContext, Tables
from contextvec.experiments.glue import ENCODERS, GLUE_TASKS, LEARNING_RATES, GluePlan, glue_plan
from contextvec.experiments.glue_table import GlueTable
from contextvec.experiments.plans import (
    BASELINE,
    DEFAULT_FRACTIONS,
    EXPERIMENTS,
    MODEL,
    WITH,
    WITHOUT,
    RunKind,
    RunSpec,
    layers_plan,
    percent,
    placement_plan,
    sample_efficiency_plan,
)
from contextvec.experiments.rep_table import RepresentationsTable
from contextvec.experiments.representations import REPRESENTATIONS, RepresentationsPlan
from contextvec.experiments.runner import ExperimentData, ExperimentResult, RunnerSettings, run_experiment
from contextvec.experiments.store import RESULTS_JSON, ResultStore, run_key, split_identity
from contextvec.experiments.summary import MIX_NAMES, ConfigSummary, FinishedRun, summarise

__all__ = ["BASELINE", "DEFAULT_FRACTIONS", "ENCODERS", "EXPERIMENTS", "GLUE_TASKS", "LEARNING_RATES",
           "MIX_NAMES", "MODEL", "REPRESENTATIONS", "RESULTS_CSV", "RESULTS_JSON", "RESULTS_MD",
           "WEIGHTS_PNG", "WITH", "WITHOUT", "ConfigSummary", "ElmoAnalysis", "Experiment", "ExperimentData",
           "ExperimentResult", "FinishedRun", "GluePlan", "GlueTable", "RepresentationsPlan",
           "RepresentationsTable", "ResultStore", "RunContext", "RunKind", "RunSpec", "RunnerSettings",
           "Tables",
           "glue_plan", "layers_plan", "percent", "placement_plan", "run_experiment", "run_key",
           "sample_efficiency_plan", "split_identity", "summarise"]
