"""The walks of ARCHITECTURE.md: a command's input goes down through the rooms, never back up,
and the task table is read once (``helpers_walk`` says what counts)."""

from __future__ import annotations

from helpers_tasks import write_trec
from helpers_walk import walk


def test_train_task_input_goes_down_in_under_20_stops_and_looks_the_task_up_once(tmp_path, own_tiny_dir):
    result = walk(["train-task", "trec", "--train", str(write_trec(tmp_path / "train.label", repeat=1)),
                   "--model", str(own_tiny_dir), "--epochs", "1", "--word-dim", "8", "--hidden", "8",
                   "--cache-dir", str(tmp_path / "cache"), "--quiet"], {"trec"})
    report = "\n".join(result.lines())
    assert result.exit_code == 0, report
    names = [stop.name for stop in result.stops]
    # The walk reaches the job's front door and the task model (it did follow the input) ...
    assert {"cli:run", "jobs:run_train_task", "tasks:train_task", "tasks:fit"} <= set(names), report
    # ... in under 20 stops, with no climb back up, and one look at the task table.
    assert len(result.stops) < 20 and not result.climbs and result.lookups == 1, report


def test_embed_input_goes_down_to_bulk_without_climbing_back(tmp_path, own_tiny_dir):
    text = tmp_path / "in.txt"
    text.write_text("the bank was robbed .\nwe sat on the river bank .\n", encoding="utf-8")
    result = walk(["embed", str(text), str(tmp_path / "out.h5"), "--model", str(own_tiny_dir), "--top",
                   "--quiet"], {str(text)})
    report = "\n".join(result.lines())
    assert result.exit_code == 0 and (tmp_path / "out.h5").is_file(), report
    assert "bulk:embed_to_hdf5" in [stop.name for stop in result.stops], report
    assert len(result.stops) < 10 and not result.climbs, report
