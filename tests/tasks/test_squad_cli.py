"""``train-task squad`` without --fine-tune: the span model over no contextual vectors, saved, then
predicted and scored by ``predict``."""

from __future__ import annotations

import json
from pathlib import Path

from contextvec.cli.main import main


def test_span_model_trains_saves_and_predicts_from_the_command_line(tmp_path: Path, capsys) -> None:
    contexts = ["bob ate a red apple at noon .", "ann swam in the cold lake .", "tom read a long book ."]
    asked = [("what did bob eat ?", "red apple"), ("where did ann swim ?", "cold lake"),
             ("what did tom read ?", "long book")]
    document = {"version": "1.1", "data": [
        {"title": f"t{i}", "paragraphs": [{"context": c, "qas": [
            {"id": f"q{i}", "question": q, "answers": [{"text": a, "answer_start": c.index(a)}]}]}]}
        for i, (c, (q, a)) in enumerate(zip(contexts, asked, strict=True))]}
    data = tmp_path / "squad.json"
    data.write_text(json.dumps(document))
    model = tmp_path / "model"
    code = main(["train-task", "squad", "--train", str(data), "--dev", str(data), "--no-contextual",
                 "--epochs", "2", "--hidden", "8", "--word-dim", "8", "--quiet", "--threads", "1",
                 "--save-model", str(model)])
    assert code == 0, capsys.readouterr().err
    assert "squad with no contextual vectors (no-contextual)" in capsys.readouterr().out
    assert main(["predict", str(model), str(data), str(tmp_path / "p.json"), "--score"]) == 0
    predictions = json.loads((tmp_path / "p.json").read_text())
    assert sorted(predictions) == ["q0", "q1", "q2"]
    assert all(predictions[f"q{i}"] in contexts[i] for i in range(3))
    assert "squad exact_match" in capsys.readouterr().out
    assert main(["train-task", "squad", "--train", str(data), "--dev", str(data), "--no-contextual",
                 "--classifier", "bcn"]) == 2
    assert "not options of the squad span model" in capsys.readouterr().err
