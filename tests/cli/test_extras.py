"""Optional extras: a command whose extra is missing says in one line which extra to install
(exit code 2, no traceback); the base commands run with no extra installed.

A missing package is simulated by ``sys.modules[name] = None`` in a fresh interpreter, which
makes every import of it fail as if it were not installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from contextvec.extras import EXTRAS, MissingExtra, needs

SRC = Path(__file__).resolve().parents[2] / "src"

# Every package each extra brings that contextvec imports (pyproject.toml's extras).
PACKAGES = {
    "tasks": ("seqeval", "conllu", "nltk", "matplotlib", "sklearn", "scipy"),
    "mt": ("sacrebleu",),
    "word-vectors": ("gensim",),
    "server": ("fastapi", "uvicorn", "prometheus_client", "orjson", "pybase64"),
    "ray": ("ray",),
    "flair": ("flair",),
    "onnx": ("onnx",),
    "hub": ("httpx", "huggingface_hub"),
    "spacy": ("spacy", "thinc"),
    "sentence-transformers": ("sentence_transformers",),
}


def _run(blocked: tuple[str, ...], code: str, *args: str) -> subprocess.CompletedProcess:
    script = f"import sys\nfor name in {blocked!r}:\n    sys.modules[name] = None\n{code}"
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(SRC)})


def _cli(blocked: tuple[str, ...], *args: str) -> subprocess.CompletedProcess:
    return _run(blocked, "from contextvec.cli.main import main\nsys.exit(main(sys.argv[1:]))", *args)


def test_every_extra_is_listed():
    import tomllib

    declared = tomllib.loads((SRC.parent / "pyproject.toml").read_text(encoding="utf-8"))
    # every extra a message names exists (pyproject also has tool-only extras: test, bench, ...)
    assert set(PACKAGES) == set(EXTRAS) and set(EXTRAS) <= set(declared["project"]["optional-dependencies"])


@pytest.mark.parametrize(("module", "extra", "args"), [
    ("seqeval", "tasks", ["train-task", "--help"]),
    ("conllu", "tasks", ["probe", "--help"]),
    ("seqeval", "tasks", ["experiment", "--help"]),
    ("seqeval", "tasks", ["predict", "model", "in.txt"]),
    ("sacrebleu", "mt", ["train-mt", "--help"]),
    ("sacrebleu", "mt", ["bleu", "--help"]),
    ("gensim", "word-vectors", ["train-word-vectors", "--help"]),
    ("fastapi", "server", ["serve", "--port", "1"]),
    ("uvicorn", "server", ["serve", "--port", "1"]),
    ("ray", "ray", ["embed", "in.txt", "out.h5", "--top", "--engine", "ray"]),
    ("onnx", "onnx", ["export", "elmo-en-small", "out.onnx"]),
    ("httpx", "hub", ["pull", "elmo-original"]),
])
def test_a_command_without_its_extra_names_the_extra(tmp_path, module, extra, args):
    (tmp_path / "in.txt").write_text("a b\n", encoding="utf-8")
    args = [str(tmp_path / a) if a in ("in.txt", "out.h5", "model", "out.onnx") else a for a in args]
    result = _cli((module,), *args)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith("contextvec: error: ")
    assert f"{module} is not installed" in lines[0] and f"pip install 'contextvec[{extra}]'" in lines[0]


@pytest.mark.parametrize(("module", "extra", "code"), [
    ("flair", "flair", "import contextvec.flair"),
    ("sentence_transformers", "sentence-transformers", "import contextvec.sentence_transformers"),
    ("spacy", "spacy", "import contextvec.spacy"),
    ("nltk", "tasks", "from contextvec.probes.wordnet import WordNet\nWordNet('/nonexistent')"),
    ("matplotlib", "tasks", "import contextvec.experiments.plots"),
    ("orjson", "server", "import contextvec.server.app"),
])
def test_python_imports_without_their_extra_raise_one_line(module, extra, code):
    result = _run((module,), "from contextvec.extras import MissingExtra\ntry:\n"
                  + "".join(f"    {line}\n" for line in code.splitlines())
                  + "except MissingExtra as e:\n    print(e.extra, e.name, str(e), sep='|')\n    sys.exit(3)")
    assert result.returncode == 3, result.stderr
    got_extra, got_module, message = result.stdout.strip().split("|")
    assert (got_extra, got_module) == (extra, module)
    assert "\n" not in message and f"pip install 'contextvec[{extra}]'" in message


def test_base_commands_need_no_extra(tmp_path, own_tiny_dir):
    """embed, convert and the Python API with every extra's package missing."""
    blocked = tuple(name for names in PACKAGES.values() for name in names)
    (tmp_path / "in.txt").write_text("The bank was robbed .\nWe sat on the bank .\n", encoding="utf-8")
    code = (
        "from contextvec.cli.main import main\n"
        "model, folder = sys.argv[1], sys.argv[2]\n"
        "assert main(['embed', folder + '/in.txt', folder + '/out.h5', '--all', '--model', model,"
        " '--quiet']) == 0\n"
        "assert main(['convert', folder + '/tf', '--model', model, '--to', 'bilm-tf']) == 0\n"
        "import contextvec\n"
        "assert contextvec.load(model).embed(['a b'])[0].shape[1] == 2\n"
        f"assert not {{n for n in {blocked!r} if sys.modules.get(n) is not None}}\n"
    )
    result = _run(blocked, code, str(own_tiny_dir), str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out.h5").is_file() and (tmp_path / "tf").is_dir()


def test_needs_passes_other_errors_through():
    with pytest.raises(ValueError, match="unknown extra"), needs("nosuch"):
        pass
    # a missing module of contextvec itself is a broken install, not a missing extra
    with pytest.raises(ModuleNotFoundError) as caught, needs("tasks"):
        import contextvec.nosuch  # noqa: F401
    assert not isinstance(caught.value, MissingExtra)
