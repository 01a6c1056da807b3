"""``contextvec experiment representations`` (CoVe's Table 2) on a few TREC/SST sentences with
tiny models: a seeded tiny CoVe, the tiny ELMo and MiniLM, one epoch."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import need_shared, shared_file

import contextvec.experiments.workers as workers
from contextvec.cli.main import main
from contextvec.encoders.cove import MTLSTM, CoveContext, CoveEncoder, MTLSTMConfig, save_cove_encoder
from contextvec.encoders.fingerprint import model_identity
from contextvec.experiments.rep_table import best_representation, results_markdown, table_records
from contextvec.experiments.representations import (
    REPRESENTATIONS,
    pool_plan,
    representations_plan,
)
from contextvec.experiments.store import ResultStore
from contextvec.tasks.models import ModelSettings, TokenEmbedder, Vocabulary
from contextvec.tasks.readers import read_trec
from contextvec.tasks.train import TrainSettings

TREC = shared_file("tasks/trec/train_5500.label.gz")  # the first 60 lines serve
SST = shared_file("tasks/sst/trees")  # the first 50 SST-2 sentences of each split serve
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def cove_dir(tmp_path_factory):
    """A seeded tiny CoVe (8-d word vectors, 4 units) over the first TREC questions' words."""
    need_shared(TREC)
    words = sorted({w.lower() for s in read_trec(TREC, 60).sentences for w in s})
    generator = torch.Generator().manual_seed(0)
    mt_lstm = MTLSTM(MTLSTMConfig(input_dim=8, hidden_size=4, lowercase=True), words,
                     torch.randn(len(words), 8, generator=generator))
    for p in mt_lstm.parameters():
        torch.nn.init.uniform_(p, -0.5, 0.5, generator=generator)
    return save_cove_encoder(mt_lstm, tmp_path_factory.mktemp("cove") / "cove")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("features")


def _run(out, cove_dir, cache_dir, own_tiny_dir, minilm_dir, task: str, *argv: str) -> int:
    data = (["--train", str(TREC)] if task.startswith("trec") else
            ["--train", str(SST / "train.txt.gz"), "--dev", str(SST / "dev.txt.gz")])
    return main(["experiment", "representations", task, *data, "--max-sentences", "50",
                 "--output-dir", str(out), "--cove", str(cove_dir), "--elmo", str(own_tiny_dir),
                 "--bert", str(minilm_dir), "--cache-dir", str(cache_dir), "--hidden", "8",
                 "--char-ngrams", "4", "--epochs", "1", "--lr", "0.01", "--threads", "1", "--quiet", *argv])


def _count(monkeypatch) -> list[str]:
    calls: list[str] = []
    real = workers.train_task

    def counted(*args, **kwargs):
        settings = args[4]
        calls.append(f"{settings.classifier} {settings.placement} {settings.char_ngram_dim}")
        return real(*args, **kwargs)

    monkeypatch.setattr(workers, "train_task", counted)
    return calls


def _outputs(out) -> tuple[list[dict], str, dict]:
    data = (out / "representations.png").read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 1000
    with (out / "results.csv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    document = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert not list(out.glob(".*tmp*"))
    return rows, (out / "results.md").read_text(encoding="utf-8"), document


def test_all_representations_the_table_the_plot_and_a_resume(tmp_path, cove_dir, cache_dir, own_tiny_dir,
                                                              minilm_dir, monkeypatch, capsys):
    need_shared(TREC)
    out = tmp_path / "reps"
    calls = _count(monkeypatch)
    assert _run(out, cove_dir, cache_dir, own_tiny_dir, minilm_dir, "trec", "--seeds", "0", "1",
                "--pool-baseline") == 0
    assert capsys.readouterr().out.startswith(
        "experiment representations trec: BCN hidden 8, dropout 0.3; --max-train 1000: 45 of the 45 "
        "training sentences; --epochs 1, Adam lr 0.01, seeds 0 1\n")
    assert len(calls) == 2 * len(REPRESENTATIONS) + 2 and calls[-1].startswith("pool ")
    rows, markdown, document = _outputs(out)
    assert [r["config"] for r in rows[::2]][:6] == list(REPRESENTATIONS)
    assert {r["train_sentences"] for r in rows} == {"45"}  # 50 read, 10% carved as dev
    by_config = {run["config"]: run["report"] for run in document["runs"]}
    settings = {c: r["model_settings"] for c, r in by_config.items()}
    assert all(s["classifier"] == "bcn" and s["fixed_word_vectors"] for c, s in settings.items()
               if not c.startswith("pool"))
    assert settings["words+char"]["char_ngram_dim"] == 4 and settings["words"]["placement"] == "none"
    assert settings["words+cove"]["layers"] == "last" and settings["words+bert"]["layers"] == "sum_last_4"
    assert len(by_config["words+elmo"]["mixes"][0]["weights"]) == 3  # a learned mix of ELMo's layers
    # CoVe enters once: the BCN reads [words (8); CoVe (2 x 4)], not the CoVe layer's own word half.
    words_only = by_config["words"]["parameters"]["trainable"]
    assert by_config["words+cove"]["parameters"]["trainable"] - words_only == 8 * 8  # feedforward rows
    for config in REPRESENTATIONS:
        assert f"| {config} | " in markdown
    assert "| words+cove − words | words+cove > words | " in markdown
    assert "## BCN with its best representation vs the pooling classifier" in markdown
    assert "BCN hidden 8" in markdown and "--max-train 1000" in markdown
    assert document["hidden"] == 8 and document["max_train"] == 1000

    calls.clear()
    assert _run(out, cove_dir, cache_dir, own_tiny_dir, minilm_dir, "trec", "--seeds", "0", "1",
                "--pool-baseline", "--resume") == 0
    assert calls == []  # every run is found in results.json
    assert _outputs(out)[0] == rows


def test_a_subset_then_the_rest_and_another_task_make_one_table(tmp_path, cove_dir, cache_dir, own_tiny_dir,
                                                                 minilm_dir, monkeypatch):
    need_shared(TREC, SST)
    out = tmp_path / "reps"
    calls = _count(monkeypatch)
    first = ["--representations", "words", "words+cove", "--seeds", "3"]
    assert _run(out, cove_dir, cache_dir, own_tiny_dir, minilm_dir, "trec", *first) == 0
    assert _run(out, cove_dir, cache_dir, own_tiny_dir, minilm_dir, "trec", "--resume", "--seeds", "3",
                "--representations", "words+char", "words+cove+char", "words") == 0
    assert len(calls) == 4  # words is not trained twice
    assert _run(out, cove_dir, cache_dir, own_tiny_dir, minilm_dir, "sst2", "--resume", *first) == 0
    rows, markdown, _ = _outputs(out)
    assert [(r["task"], r["config"]) for r in rows] == [
        ("sst2", "words"), ("sst2", "words+cove"), ("trec", "words"), ("trec", "words+char"),
        ("trec", "words+cove"), ("trec", "words+cove+char")]
    assert "| representation | sst2 | trec |" in markdown
    assert "| words+char |  | " in markdown  # not run on sst2: an empty cell
    assert "not run" in markdown  # sst2 has no +char runs to compare


@pytest.mark.slow  # two worker processes start (spawn), each importing torch
def test_jobs_2_gives_the_runs_of_jobs_1(tmp_path, cove_dir, cache_dir, own_tiny_dir, minilm_dir):
    need_shared(TREC)
    argv = ["--representations", "words", "words+cove", "--seeds", "0"]
    assert _run(tmp_path / "one", cove_dir, cache_dir, own_tiny_dir, minilm_dir, "trec", *argv) == 0
    assert _run(tmp_path / "two", cove_dir, cache_dir, own_tiny_dir, minilm_dir, "trec", *argv,
                "--jobs", "2") == 0
    one, two = (_outputs(tmp_path / d)[0] for d in ("one", "two"))
    assert [r["dev_accuracy"] for r in one] == [r["dev_accuracy"] for r in two]


@pytest.mark.parametrize(("argv", "message"), [
    (["--representations", "words", "--resume", "--overwrite"], "give one"),
    (["--representations", "words", "--seeds", "1", "1"], "--seeds names one twice"),
    (["--representations", "words", "--cove", "no-such-cove"], "--cove: no model directory"),
])
def test_bad_options_give_one_line_errors(tmp_path, cove_dir, cache_dir, own_tiny_dir, minilm_dir, capsys,
                                          argv, message):
    need_shared(TREC)
    # A --cove in argv comes after the fixture's and wins.
    assert _run(tmp_path / "o", cove_dir, cache_dir, own_tiny_dir, minilm_dir, "trec", *argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_unknown_representation_and_task_are_refused(capsys):
    assert main(["experiment", "representations", "ner", "--train", "x", "--output-dir", "o"]) == 2
    assert main(["experiment", "representations", "trec", "--train", "x", "--output-dir", "o",
                 "--representations", "words+glove"]) == 2
    assert "invalid choice: 'words+glove'" in capsys.readouterr().err


def test_cove_context_drops_the_word_vectors():
    generator = torch.Generator().manual_seed(1)
    vectors = torch.randn(2, 6, generator=generator)
    mt_lstm = MTLSTM(MTLSTMConfig(input_dim=6, hidden_size=3), ["a", "b"], vectors)
    cove = CoveEncoder(mt_lstm).eval()
    context = CoveContext(cove)
    assert (context.num_layers, context.output_dim) == (2, 6)
    full, _ = cove([["a", "b", "a"]])
    layers, _ = context([["a", "b", "a"]])
    assert torch.equal(layers, full[1:, :, :, 6:])


def test_plans_and_fixed_word_vectors():
    base, train = ModelSettings(), TrainSettings()
    plan = representations_plan(["words+bert", "words"], base, train, [0, 1])
    assert [(spec.config, spec.train_settings.seed) for spec in plan] == [
        ("words", 0), ("words", 1), ("words+bert", 0), ("words+bert", 1)]
    assert {spec.config for spec in pool_plan("words+elmo", base, train, [0])} == {"pool: words+elmo"}
    with pytest.raises(ValueError, match="unknown representation 'glove'"):
        representations_plan(["glove"], base, train, [0])
    words = Vocabulary(["x", "y"])
    fixed = ModelSettings(fixed_word_vectors=True, char_cnn=False)
    embedder = TokenEmbedder(words, Vocabulary([]), fixed, np.ones((len(words), 3), dtype=np.float32))
    assert not embedder.words.weight.requires_grad
    with pytest.raises(ValueError, match="fixed_word_vectors needs pretrained"):
        TokenEmbedder(words, Vocabulary([]), fixed)


def test_the_table_takes_each_runs_last_finished_record_and_the_best_representation(tmp_path):
    store = ResultStore(tmp_path, "representations", {})

    def record(config: str, dev: float, finished: str, table: str = "t") -> dict:
        return {"task": "trec", "config": config, "seed": 0, "dev": dev, "finished": finished, "table": table}

    store.records = [record("words", 0.5, "2026-01-02"), record("words", 0.7, "2026-01-01"),
                     record("words+cove", 0.6, "2026-01-01"), record("words", 0.9, "2026-01-03", "u")]
    kept = table_records(store, "t")
    assert sorted((r["config"], r["dev"]) for r in kept) == [("words", 0.5), ("words+cove", 0.6)]
    assert best_representation(kept, "trec") == "words+cove"
    assert best_representation(kept, "sst2") is None


def _records(devs: dict[tuple[str, str], list[float]], hidden: int = 64) -> list[dict]:
    report = {"model_settings": {"hidden": hidden, "dropout": 0.3},
              "train_settings": {"lr": 0.002, "batch_size": 32, "epochs": 10, "patience": 3},
              "splits": {"train": {"sentences": 1000}, "dev": {"sentences": 500}}}
    return [{"task": task, "config": config, "seed": seed, "dev": dev, "report": report}
            for (task, config), values in devs.items() for seed, dev in enumerate(values)]


def test_results_md_states_results_and_the_papers_directions_from_the_runs():
    """No goals, no fixed paragraphs: what the paper reports, the differences measured, the settings."""
    devs = {("sst2", "words"): [0.80, 0.82], ("sst2", "words+cove"): [0.83, 0.85],
            ("trec", "words"): [0.90, 0.90], ("trec", "words+cove"): [0.88, 0.88],
            ("trec", "words+char"): [0.91], ("trec", "words+cove+char"): [0.93]}
    markdown = results_markdown(_records(devs), {"max_train": 1000, "char_ngrams": 100})
    assert "| words+cove − words | words+cove > words | +3.0 (same direction) | -2.0 (opposite direction) |" \
        in markdown
    assert ("| words+cove+char − words+char | words+cove+char > words+char | not run "
            "| +2.0 (same direction) |") in markdown
    assert ("Here: words+cove > words on 1 of the 2 task(s) with both (sst2); words+cove+char > words+char "
            "on 1 of the 1 task(s) with both (trec).") in markdown
    assert "BCN hidden 64, dropout 0.3" in markdown
    assert "--max-train 1000 (a seeded subsample of train)" in markdown
    for word in ("seed's", "as the seed", "Goal", "MET", "Scale", "project"):
        assert word not in markdown
    other = results_markdown(_records({("trec", "words"): [0.9], ("trec", "words+cove"): [0.95]}, hidden=300),
                             {"max_train": None})
    assert "+5.0 (same direction)" in other and "BCN hidden 300" in other and "--max-train all" in other


def test_two_commands_saving_into_one_directory_keep_each_others_runs(tmp_path):
    """One command per task, run at once into one --output-dir: each save adopts the runs the
    other saved meanwhile; a fresh (--overwrite) store never takes back the runs it discarded."""
    def record(task: str) -> dict:
        return {"task": task, "config": "words", "seed": 0, "key": {"task": task}}

    old = ResultStore(tmp_path, "representations", {})
    old.add(record("sst5"))
    old.save([])
    first = ResultStore(tmp_path, "representations", {})
    second = ResultStore(tmp_path, "representations", {}, fresh=True)
    first.add(record("trec"))
    first.save([{"task": "trec"}])
    second.add(record("sst2"))
    second.save([{"task": "sst2"}])
    document = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert [r["task"] for r in document["runs"]] == ["sst2"]
    assert [r["task"] for r in document["other_runs"]] == ["trec"]  # sst5 was discarded
    first.save([{"task": "trec"}])
    assert sorted(r["task"] for r in first.records) == ["sst2", "sst5", "trec"]  # first read sst5 itself
    with first.locked(), first.locked():  # re-entrant
        first.save([])
    assert not [p for p in tmp_path.iterdir() if p.name != "results.json"]


def test_workers_get_the_encoders_on_the_cpu():
    mt_lstm = MTLSTM(MTLSTMConfig(input_dim=4, hidden_size=2), ["a"], torch.ones(1, 4))
    cove = CoveContext(CoveEncoder(mt_lstm).eval())
    assert workers.encoders_on_cpu({"cove": cove})["cove"] is cove  # on the CPU already: not copied
    if not torch.cuda.is_available():
        return
    shipped = workers.encoders_on_cpu({"cove": cove.to("cuda")})["cove"]
    assert shipped is not cove and {t.device.type for t in shipped.state_dict().values()} == {"cpu"}
    assert next(cove.parameters()).is_cuda  # the parent's encoder stays on the GPU


def test_jobs_sharing_a_gpu_get_the_mps_hint_until_mps_runs(tmp_path, monkeypatch):
    from contextvec.experiments.workers import shared_gpu_hint

    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(tmp_path))
    assert "nvidia-cuda-mps-control -d" in shared_gpu_hint("cuda", 4)
    assert shared_gpu_hint("cuda:0", 1) is None  # one process has the GPU to itself
    assert shared_gpu_hint("cpu", 4) is None
    (tmp_path / "control").touch()  # the MPS daemon's control pipe
    assert shared_gpu_hint("cuda", 4) is None


WORKERS_SCRIPT = """
import multiprocessing, os, time
from contextvec.experiments.workers import exit_with_parent

def init(parent):
    exit_with_parent(parent, 0.1)

def work(_):
    time.sleep(120)

if __name__ == "__main__":
    pool = multiprocessing.get_context("spawn").Pool(2, init, (os.getpid(),))
    pool.map_async(work, range(2))
    time.sleep(1)
    print(*(p.pid for p in multiprocessing.active_children()), flush=True)
    time.sleep(120)
"""


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_workers_end_when_their_parent_is_killed(tmp_path):
    """A parent killed by SIGKILL runs no clean-up; its workers must not train on for nothing."""
    script = tmp_path / "workers.py"
    script.write_text(WORKERS_SCRIPT)
    # stderr: the killed pool's resource tracker warns of the semaphores it leaked.
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    workers = [int(pid) for pid in parent.stdout.readline().split()]
    try:
        assert len(workers) == 2 and all(map(_running, workers))
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 30  # a worker may still be importing torch
        while any(map(_running, workers)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(map(_running, workers))
    finally:
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_cove_context_keeps_the_fingerprint_stored_runs_and_caches_know():
    # The digest contextvec 0.2.0 gave this model, when CoveContext lived in tasks/experiments:
    # results.json keys and feature caches made then must still match.
    torch.manual_seed(0)
    vectors = torch.randn(2, 6, generator=torch.Generator().manual_seed(1))
    cove = CoveEncoder(MTLSTM(MTLSTMConfig(input_dim=6, hidden_size=3), ["a", "b"], vectors)).eval()
    assert model_identity(CoveContext(cove)) == (
        "d5861a2672dae7262977c2d9d83dd7b1b4e6d87f975e1ae6ef7395d1613a9d86")
