"""The Node.js example (examples/onnx-node) embeds with the exported bundled ELMo and matches
Python's vectors within 1e-5; it needs node and `npm ci --prefix examples/onnx-node`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from contextvec.cli.main import main

pytest.importorskip("onnx")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "onnx-node"
CHAR_IDS = ROOT / "examples" / "onnx" / "char_ids.json"


def test_node_example_matches_python(tmp_path):
    node = shutil.which("node")
    if node is None or not (EXAMPLE / "node_modules" / "onnxruntime-node").is_dir():
        pytest.skip("needs node and onnxruntime-node: npm ci --prefix examples/onnx-node")
    model = tmp_path / "elmo-en-small.onnx"
    assert main(["export", "elmo-en-small", str(model)]) == 0
    expected = tmp_path / "expected.json"
    subprocess.run([sys.executable, str(EXAMPLE / "python_vectors.py"), str(expected)], check=True)
    run = subprocess.run(
        [node, "embed.mjs", str(model), str(expected), str(CHAR_IDS)],
        cwd=EXAMPLE, capture_output=True, text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    vectors = json.loads(CHAR_IDS.read_text(encoding="utf-8"))["vectors"]
    assert f"character ids: {len(vectors)} test vectors match" in run.stdout
    assert "equal to Python within 1e-5" in run.stdout
