"""The README's commands run as written.

Every ``contextvec`` command line in the README's bash blocks must parse (its subcommand and
options exist, its numbers are in range); the blocks marked ``<!-- readme-test: run -->`` are run
whole, in a temporary folder, with the bundled model.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from contextvec.cli.main import COMMANDS, build_parser

README = Path(__file__).resolve().parents[2] / "README.md"
RUN_MARK = "<!-- readme-test: run -->"


def _blocks() -> list[tuple[bool, str]]:
    """(marked to run, text) of every bash block."""
    text = README.read_text(encoding="utf-8")
    return [(bool(mark), body) for mark, body in
            re.findall(r"(<!-- readme-test: run -->\n)?```bash\n(.*?)```", text, flags=re.S)]


def _commands(block: str) -> list[list[str]]:
    """The argument lists of the ``contextvec`` commands of a block (after pipes, torchrun)."""
    commands = []
    for line in block.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if "|" in line:
            words = shlex.split(line.split("|")[-1], comments=True)
        if words[:1] == ["torchrun"] and "contextvec.cli.main" in words:
            words = ["contextvec", *words[words.index("contextvec.cli.main") + 1:]]
        if words[:1] == ["contextvec"]:
            commands.append(words[1:])
        elif "&&" in words and "contextvec" in words:  # the quickstart's install && contextvec demo
            commands.append(words[words.index("contextvec") + 1:])
    return commands


ALL = [args for _, block in _blocks() for args in _commands(block)]


def test_the_readme_has_commands_and_a_runnable_block():
    assert len(ALL) >= 15
    assert any(run for run, _ in _blocks())


@pytest.mark.parametrize("args", ALL, ids=[" ".join(a)[:60] for a in ALL])
def test_every_readme_command_parses(args):
    assert args[0] in COMMANDS, args
    if args[0] == "serve":
        pytest.importorskip("fastapi", reason="the server extra is not installed")
    if args[0] == "embed" and "--engine" in args:
        pytest.importorskip("ray", reason="the ray extra is not installed")
    parsed = build_parser(args[0]).parse_args(args)
    assert callable(parsed.run)


@pytest.mark.slow
def test_the_runnable_blocks_run_as_written(tmp_path):
    for run, block in _blocks():
        if run:
            result = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=tmp_path,
                                    capture_output=True, text=True, timeout=300)
            assert result.returncode == 0, result.stderr[-2000:]
    assert (tmp_path / "vectors.hdf5").is_file()


@pytest.mark.slow
def test_the_serve_block_serves_what_the_readme_says():
    pytest.importorskip("fastapi", reason="the server extra is not installed")
    from contextvec.server.process import ServerProcess

    text = README.read_text(encoding="utf-8")
    block = text.split("<!-- readme-test: serve -->", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    [serve] = [args for args in _commands(block) if args[0] == "serve"]
    curl = block.replace("\\\n", " ").split("curl", 1)[1].splitlines()[0]
    with ServerProcess(serve[1:]) as server:
        port = server.url.rsplit(":", 1)[1]
        result = subprocess.run("curl --max-time 60" + curl.replace("8080", port), shell=True,
                                capture_output=True, text=True, timeout=90)
    import json

    body = json.loads(result.stdout)
    [embedding] = body["embeddings"]
    assert len(embedding["vectors"]) == 256  # --top, pooled: one 256-dim vector
