"""Seeded mutations of real model directories: every case loads, or is refused with one
ValueError/OSError line naming a file of the directory; no other exception, no hang.

Each reader gets a bounded number of cases (bytes flipped, files cut short, JSON numbers and
types replaced) over its own tiny model, so each test runs in a few seconds.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from helpers_io import tiny_copy

import contextvec
from contextvec.encoders.cove.loader import save_cove_encoder
from contextvec.encoders.cove.mt_lstm import MTLSTM, MTLSTMConfig

EFML = Path(__file__).resolve().parents[1] / "data" / "efml"
CASES = 40
BUDGET_S = 15.0
MEMORY_SLACK = 32 * 2**20
ODD_VALUES = (0, -1, 1, 10**12, 2**63, 1.5, "x", None, [], {}, True)


def _json_values(value: object, path: tuple = ()) -> list[tuple]:
    """The paths of every value inside a JSON document."""
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _json_values(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _json_values(item, (*path, index))
    return found


def _mutate_json(file: Path, rng: random.Random) -> None:
    document = json.loads(file.read_text(encoding="utf-8"))
    where = rng.choice(_json_values(document)[1:] or [()])
    if not where:
        file.write_text(json.dumps(rng.choice(ODD_VALUES)), encoding="utf-8")
        return
    parent = document
    for step in where[:-1]:
        parent = parent[step]
    parent[where[-1]] = rng.choice(ODD_VALUES)
    file.write_text(json.dumps(document), encoding="utf-8")


def _mutate_bytes(file: Path, rng: random.Random) -> None:
    data = bytearray(file.read_bytes())
    how = rng.randrange(3)
    if how == 0 and data:  # flip a few bytes
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif how == 1:  # cut short
        data = data[: rng.randrange(len(data) + 1)]
    else:  # bytes inserted
        at = rng.randrange(len(data) + 1)
        data[at:at] = rng.randbytes(rng.randint(1, 64))
    file.write_bytes(bytes(data))


def _resident(key: str) -> int:
    """The process's ``VmHWM`` (peak) or ``VmRSS`` (current) resident memory, in bytes (Linux)."""
    return int(Path("/proc/self/status").read_text().split(f"{key}:")[1].split()[0]) * 1024


def _held(loaded: object) -> int:
    """Bytes of the tensors a loaded model (an encoder or a task model) holds."""
    modules = [m for m in (loaded, getattr(loaded, "model", None)) if isinstance(m, torch.nn.Module)]
    return sum(t.numel() * t.element_size() for m in modules for t in (*m.parameters(), *m.buffers()))


def _fuzz(source: Path, tmp_path: Path, load: Callable[[Path], object], seed: int) -> int:
    """Mutate one file of a copy of ``source`` per case; returns how many cases were refused.
    A case's resident memory may grow by at most twice the model's files, plus the model it
    loads, plus a fixed allowance for what a first call sets up."""
    rng = random.Random(seed)
    files = sorted(p.name for p in source.iterdir() if p.is_file())
    load(source)  # imports and first-call setup, before memory is counted
    size = sum(p.stat().st_size for p in source.rglob("*") if p.is_file())
    refused, start = 0, time.monotonic()
    for case in range(CASES):
        directory = tmp_path / f"case{case}"
        shutil.copytree(source, directory)
        name = rng.choice(files)
        if name.endswith(".json") and rng.random() < 0.6:
            _mutate_json(directory / name, rng)
        else:
            _mutate_bytes(directory / name, rng)
        Path("/proc/self/clear_refs").write_text("5")  # the peak starts again here
        before, held = _resident("VmRSS"), 0
        try:
            held = _held(load(directory))
        except (ValueError, OSError) as error:
            message = str(error)
            assert "\n" not in message, (name, message)
            assert str(directory) in message, (name, message)
            refused += 1
        grown = _resident("VmHWM") - before
        assert grown < 2 * size + held + MEMORY_SLACK, f"case {case} ({name}): {grown:,} bytes resident"
        shutil.rmtree(directory)
        assert time.monotonic() - start < BUDGET_S, f"case {case} ({name}): over the time budget"
    return refused


def test_fuzz_bilm_tf(tmp_path):
    (tmp_path / "source").mkdir()
    source = tiny_copy(tmp_path / "source")
    assert _fuzz(source, tmp_path, contextvec.load, seed=1) > 0


@pytest.mark.parametrize("kind", ["words", "chars"])
def test_fuzz_elmoformanylangs(tmp_path, kind):
    assert _fuzz(EFML / kind, tmp_path, contextvec.load, seed=2) > 0


def test_fuzz_hf_bert(tmp_path, own_tiny_bert_dir):
    assert _fuzz(own_tiny_bert_dir, tmp_path, contextvec.load, seed=3) > 0


def test_fuzz_native(tmp_path, own_tiny_dir):
    assert _fuzz(own_tiny_dir, tmp_path, contextvec.load, seed=4) > 0


def test_fuzz_cove(tmp_path):
    torch.manual_seed(0)
    config = MTLSTMConfig(input_dim=4, hidden_size=3, num_layers=2)
    mt_lstm = MTLSTM(config, ["a", "b", "c"], torch.randn(3, 4))
    source = save_cove_encoder(mt_lstm, tmp_path / "source")
    assert _fuzz(source, tmp_path, contextvec.load, seed=5) > 0


def _sst_lines(n: int, seed: int) -> str:
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        label = rng.choice("0134")
        words = [rng.choice(["a", "film", "it", "was", "plot"]) for _ in range(rng.randint(2, 6))]
        words.insert(rng.randrange(len(words) + 1), "good" if label in "34" else "bad")
        lines.append(f"({label} " + " ".join(f"(2 {w})" for w in words) + ")")
    return "\n".join(lines) + "\n"


def _saved_task_model(tmp_path: Path, model: list[str], hidden: int = 4) -> Path:
    """A tiny SST-2 model saved by ``train-task --save-model`` (one epoch: only its files matter)."""
    from contextvec.cli.main import main

    (tmp_path / "train.txt").write_text(_sst_lines(40, 1), encoding="utf-8")
    (tmp_path / "dev.txt").write_text(_sst_lines(12, 2), encoding="utf-8")
    assert main(["train-task", "sst2", "--train", str(tmp_path / "train.txt"),
                 "--dev", str(tmp_path / "dev.txt"),
                 "--epochs", "1", "--hidden", str(hidden), "--word-dim", "4", "--quiet", "--threads", "1",
                 "--cache-dir", str(tmp_path / "cache"), "--output", str(tmp_path / "report.json"),
                 *model, "--save-model", str(tmp_path / "source")]) == 0
    return tmp_path / "source"


@pytest.mark.parametrize("encoder", ["none", "elmo"])
def test_fuzz_saved_task_model(tmp_path, own_tiny_dir, encoder):
    from contextvec.tasks import load_task_model

    model = ["--no-contextual"] if encoder == "none" else ["--model", str(own_tiny_dir)]
    assert _fuzz(_saved_task_model(tmp_path, model), tmp_path, load_task_model, seed=6) > 0


def test_a_saved_task_model_declaring_large_sizes_allocates_nothing(tmp_path):
    """task.json's sizes are checked against the weights the file holds on the meta device: a
    small model whose settings declare a large LSTM is refused before any of it is allocated."""
    from contextvec.tasks import load_task_model

    saved = _saved_task_model(tmp_path, ["--no-contextual"])
    config = json.loads((saved / "task.json").read_text(encoding="utf-8"))
    config["model_settings"]["hidden"] = 4096  # two directions of 4 x 4096 x 4096 floats: 0.5 GiB
    (saved / "task.json").write_text(json.dumps(config), encoding="utf-8")
    def resident(key: str) -> int:
        return int(Path("/proc/self/status").read_text().split(f"{key}:")[1].split()[0]) * 1024

    Path("/proc/self/clear_refs").write_text("5")  # the peak resident memory starts again here
    before = resident("VmRSS")
    with pytest.raises(ValueError, match=r"model\.safetensors does not fit task\.json: .* has shape "):
        load_task_model(saved)
    grown = resident("VmHWM") - before
    assert grown < 64 * 2**20, f"{grown / 2**20:.0f} MiB allocated before the refusal"
