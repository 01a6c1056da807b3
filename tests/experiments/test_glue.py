"""``contextvec experiment glue`` (the BERT paper's Table 1) on a tiny GLUE folder written here
(RTE and STS-B layouts, 40 items each) with tiny models: a seeded 4-layer BERT with letters as
pieces, the seeded tiny ELMo and a seeded tiny CoVe; one epoch for the frozen models."""

from __future__ import annotations

import csv
import json
import random

import pytest
import torch
from safetensors.torch import save_file
from transformers import BertConfig, BertModel

import contextvec.experiments.workers as workers
from contextvec.cli.main import main
from contextvec.encoders.cove import MTLSTM, MTLSTMConfig, save_cove_encoder
from contextvec.experiments import RunKind, RunSpec, split_identity
from contextvec.experiments.baselines import majority_class
from contextvec.experiments.glue_table import best_lr, results_markdown
from contextvec.experiments.seed_scores import cell
from contextvec.tasks.finetune import FineTuneSettings
from contextvec.tasks.split import Split
from contextvec.tasks.train import TrainSettings

WORDS = ["a", "man", "woman", "dog", "cat", "is", "was", "runs", "sits", "eats", "plays", "on", "the", "mat",
         "park", "food", "ball", "red", "big", "small"]
STSB_HEADER = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 7))) + " ."


@pytest.fixture(scope="module")
def glue_dir(tmp_path_factory):
    """RTE/train.tsv and STS-B/train.tsv in GLUE's layouts, 40 seeded random pairs each."""
    rng = random.Random(0)
    root = tmp_path_factory.mktemp("glue")
    (root / "RTE").mkdir()
    (root / "STS-B").mkdir()
    rte = ["index\tsentence1\tsentence2\tlabel"] + [
        f"{i}\t{_sentence(rng)}\t{_sentence(rng)}\t{rng.choice(['entailment', 'not_entailment'])}"
        for i in range(40)]
    stsb = [STSB_HEADER] + [f"{i}\tmain-captions\tMSRvid\t2012test\t{i:04d}\tnone\tnone\t{_sentence(rng)}\t"
                            f"{_sentence(rng)}\t{rng.uniform(0, 5):.3f}" for i in range(40)]
    (root / "RTE" / "train.tsv").write_text("\n".join(rte) + "\n", encoding="utf-8")
    (root / "STS-B" / "train.tsv").write_text("\n".join(stsb) + "\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    """A seeded BERT of 4 layers (BERT features are its last 4 summed), 16 units, letters as pieces."""
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *letters, ".", *(f"##{c}" for c in letters)]
    config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=4, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=64)
    torch.manual_seed(0)
    directory = tmp_path_factory.mktemp("bert") / "model"
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(config.to_dict()), encoding="utf-8")
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    save_file({k: v.contiguous() for k, v in BertModel(config).state_dict().items()},
              str(directory / "model.safetensors"))
    return directory


@pytest.fixture(scope="module")
def cove_dir(tmp_path_factory):
    """A seeded tiny CoVe (8-d word vectors, 4 units) over the tiny GLUE folder's words."""
    generator = torch.Generator().manual_seed(0)
    words = sorted({*WORDS, "."})
    mt_lstm = MTLSTM(MTLSTMConfig(input_dim=8, hidden_size=4, lowercase=True), words,
                     torch.randn(len(words), 8, generator=generator))
    for p in mt_lstm.parameters():
        torch.nn.init.uniform_(p, -0.5, 0.5, generator=generator)
    return save_cove_encoder(mt_lstm, tmp_path_factory.mktemp("cove") / "cove")


def _run(glue_dir, out, tmp_path, own_tiny_dir, bert_dir, cove_dir, *argv: str) -> int:
    return main(["experiment", "glue", "--data-dir", str(glue_dir), "--output-dir", str(out),
                 "--bert", str(bert_dir), "--elmo", str(own_tiny_dir), "--cove", str(cove_dir),
                 "--cache-dir", str(tmp_path / "cache"), "--epochs", "1", "--hidden", "4", "--threads", "1",
                 "--lrs", "5e-5", "3e-5", "--seeds", "0", "1", "--quiet", *argv])


def _count(monkeypatch) -> list[str]:
    """The runs trained from now on, by kind."""
    calls: list[str] = []
    for name, kind in (("train_task", "frozen"), ("fine_tune", "fine-tune"), ("majority_class", "majority")):
        real = getattr(workers, name)

        def counted(*args, _real=real, _kind=kind, **kwargs):
            calls.append(_kind)
            return _real(*args, **kwargs)

        monkeypatch.setattr(workers, name, counted)
    return calls


def test_every_encoder_the_table_beside_the_paper_and_a_resume(glue_dir, tmp_path, own_tiny_dir,
                                                                bert_dir, cove_dir, monkeypatch,
                                                                capsys):
    out = tmp_path / "glue"
    calls = _count(monkeypatch)
    assert _run(glue_dir, out, tmp_path, own_tiny_dir, bert_dir, cove_dir, "--tasks", "rte") == 0
    # 2 lrs x 2 seeds fine-tuned, 4 frozen configurations x 2 seeds, the majority class
    assert sorted(calls) == ["fine-tune"] * 4 + ["frozen"] * 8 + ["majority"]
    markdown = (out / "results.md").read_text(encoding="utf-8")
    assert "| BiLSTM+ELMo+Attn (paper, GLUE test) | 56.8 |" in markdown
    assert "| BERT-base (paper, GLUE test) | 66.4 |" in markdown
    for row in ("BERT fine-tuned (ours, best lr)", "ELMo, frozen (ours)", "CoVe, frozen (ours)",
                "BERT features, frozen (ours)", "no contextual vectors (ours)", "majority class (ours)"):
        assert f"| {row} | " in markdown
    assert "(n=2, lr " in markdown and "**test**" in markdown
    document = json.loads((out / "results.json").read_text(encoding="utf-8"))
    runs = document["runs"]
    frozen = [r["report"]["model_settings"] for r in runs if r["kind"] == "frozen"]
    assert {m["placement"] for m in frozen} == {"input", "none"}
    assert {r["report"]["splits"]["train"]["sentences"] for r in runs} == {36}  # 10% carved as dev

    calls.clear()
    capsys.readouterr()
    assert _run(glue_dir, out, tmp_path, own_tiny_dir, bert_dir, cove_dir, "--tasks", "rte", "stsb",
                "--encoders", "bert-finetune", "none", "--resume") == 0
    assert sorted(calls) == ["fine-tune"] * 4 + ["frozen"] * 2  # stsb only: rte's runs are reused
    assert "6 runs trained, 7 reused from results.json" in capsys.readouterr().out
    with (out / "results.csv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 13 + 6 and {r["task"] for r in rows} == {"rte", "stsb"}
    assert sum(r["chosen_lr"] == "yes" for r in rows) == 4  # two seeds at one lr per task
    markdown = (out / "results.md").read_text(encoding="utf-8")
    assert "| system | STS-B (Spearman) | RTE (acc) |" in markdown and "| 73.3 | 56.8 |" in markdown
    assert "| majority class (ours) |  | " in markdown  # no majority class of a regression task


def _record(task: str, config: str, dev: float, lr: float | None = None, seed: int = 0) -> dict:
    kind = "fine-tune" if config == "bert-finetune" else "majority" if config == "majority" else "frozen"
    splits = {"train": {"sentences": 90}, "dev": {"sentences": 10}}
    return {"task": task, "config": config, "kind": kind, "lr": lr, "seed": seed, "metric": "accuracy",
            "dev": dev, "runtime_s": 1.0, "report": {"splits": splits, "dev": {"accuracy": dev}}}


HEADER = {"bert": "b", "elmo": "e", "cove": "c", "hidden": 4, "max_sentences": None,
          "fine_tune": {"batch_size": 32, "epochs": 3, "weight_decay": 0.01, "warmup": 0.1},
          "train": {"lr": 0.001, "batch_size": 32, "epochs": 10, "patience": 3}}


def test_the_learning_rate_with_the_best_mean_not_the_best_run_is_chosen():
    records = [_record("rte", "bert-finetune", 0.9, 5e-5, 0), _record("rte", "bert-finetune", 0.5, 5e-5, 1),
               _record("rte", "bert-finetune", 0.8, 3e-5, 0), _record("rte", "bert-finetune", 0.7, 3e-5, 1)]
    assert best_lr(records, "rte") == 3e-5
    markdown = results_markdown(records, HEADER)
    assert "| BERT fine-tuned (ours, best lr) | 75.0 ± 7.1 (n=2, lr 3e-05) |" in markdown
    assert "| rte | 3e-05 | 75.0 ± 7.1 (n=2) | chosen |" in markdown
    assert "| rte | 5e-05 | 70.0 ± 28.3 (n=2) |  |" in markdown


def test_the_reported_directions_are_measured_met_or_not():
    records = [_record("rte", "bert-finetune", 0.7, 2e-5), _record("rte", "elmo", 0.6),
               _record("rte", "none", 0.5),
               _record("mrpc", "bert-finetune", 0.6, 2e-5), _record("mrpc", "elmo", 0.65),
               _record("mrpc", "none", 0.7), _record("wnli", "elmo", 0.4), _record("wnli", "none", 0.6)]
    markdown = results_markdown(records, HEADER)
    assert ("| bert-finetune > elmo | Devlin et al. (2019), Table 1: BERT-base > BiLSTM+ELMo+Attn on every "
            "task | -5.0 (not met) | +10.0 (met) |") in markdown  # columns: MRPC, RTE (Table 1's order)
    assert ("| elmo > none | Peters et al. (2018), Table 1: adding ELMo improves every task measured "
            "| -5.0 (not met) | +10.0 (met) |") in markdown
    assert ("- ELMo, frozen (ours) > no contextual vectors (ours): met on 1 of 2 tasks (rte); not met on "
            "mrpc.") in markdown  # WNLI is left out, as Table 1 leaves it out


def test_a_missing_task_folder_is_one_line(glue_dir, tmp_path, capsys):
    assert main(["experiment", "glue", "--data-dir", str(glue_dir), "--output-dir", str(tmp_path / "o"),
                 "--tasks", "mrpc", "--encoders", "none", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--data-dir: no " in err and "MRPC" in err and len(err.splitlines()) == 1


def test_run_kinds_take_their_own_settings():
    RunSpec("ft", None, FineTuneSettings(), "bert", RunKind.FINE_TUNE)
    with pytest.raises(ValueError, match="a fine-tune run's model and training settings are None and "
                                         "FineTuneSettings"):
        RunSpec("ft", None, TrainSettings(), "bert", "fine-tune")
    with pytest.raises(ValueError, match="a majority run's"):
        RunSpec("m", None, FineTuneSettings(), None, RunKind.MAJORITY)


def test_the_second_sentences_are_part_of_a_split_identity():
    one = Split([["a"]], ["1"], second=[["b"]])
    assert split_identity(one) != split_identity(Split([["a"]], ["1"], second=[["c"]]))


def test_majority_class_ties_go_to_the_first_label():
    train = Split([["a"], ["b"], ["c"], ["d"]], ["1", "0", "0", "1"], second=[["x"]] * 4)
    dev = Split([["e"], ["f"]], ["0", "1"], second=[["y"]] * 2)
    report = majority_class("rte", train, dev)
    assert report.model_settings["label"] == "0" and report.dev["accuracy"] == 0.5
    with pytest.raises(ValueError, match="not stsb"):
        majority_class("stsb", Split([["a"]], [1.0]), Split([["b"]], [2.0]))


def test_one_run_has_no_standard_deviation_in_its_cell():
    """One seed printed as ``17.5 ± 0.0``: a sample std of one run is undefined, not zero."""
    assert cell([0.175], ", lr 2e-05") == "17.5 (n=1, lr 2e-05)"
    assert cell([0.1, 0.2]) == "15.0 ± 7.1 (n=2)"
    assert cell([]) == ""
