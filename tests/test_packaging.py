"""The README's test command on a fresh machine: ``[test]`` installs every package the suite
imports, and CI runs that command first, in a fresh virtual environment (.ci/run), so that an
extra CI adds for other tests cannot hide a missing one."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
CI = ROOT / ".ci" / "run"
SECOND_STEP = {"ray": "ray", "flair": "flair", "spacy": "spacy", "thinc": "spacy",
               "sentence_transformers": "sentence-transformers"}
"""Modules of the extras .ci/run adds after the README's command, by extra: their tests skip
without them (thinc comes with spacy, so spacy's importorskip guards it)."""


def _suite_files() -> list[Path]:
    """The suite's modules (tests, conftest, helpers); the scripts under data/ that made its
    fixtures run elsewhere."""
    return [p for p in TESTS.rglob("*.py") if "data" not in p.relative_to(TESTS).parts[:-1]]


def _requested(extra: str) -> set[str]:
    """The distributions ``pip install .[extra]`` asks for by name (the base dependencies, and the
    extra's, this project's own extras expanded)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = {canonicalize_name(Requirement(r).name) for r in project["dependencies"]}
    todo, seen = [extra], set()
    while todo:
        name = todo.pop()
        seen.add(name)
        for requirement in map(Requirement, project["optional-dependencies"][name]):
            if canonicalize_name(requirement.name) == canonicalize_name(project["name"]):
                todo.extend(requirement.extras - seen)
            else:
                names.add(canonicalize_name(requirement.name))
    return names


def _imports(path: Path) -> tuple[set[str], set[str]]:
    """Top-level modules a file imports anywhere (functions included), and those it
    ``importorskip``s."""
    imported, skipped = set(), set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module.split(".")[0])
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "importorskip"
              and node.args and isinstance(node.args[0], ast.Constant)):
            skipped.add(node.args[0].value.split(".")[0])
    return imported, skipped


def test_the_test_extra_installs_every_package_the_suite_imports():
    """Without transformers (which the tiny BERT fixtures import), 10 tests erred on a fresh machine;
    CI's flair had brought it."""
    local = {p.stem for p in TESTS.rglob("*.py")} | {"contextvec"}
    requested = _requested("test")
    providers = importlib.metadata.packages_distributions()
    missing, unguarded = {}, []
    for path in _suite_files():
        imported, skipped = _imports(path)
        where = str(path.relative_to(ROOT))
        for module in sorted((imported | skipped) - local - set(sys.stdlib_module_names)):
            if module in SECOND_STEP:
                if not {module, SECOND_STEP[module]} & skipped:
                    unguarded.append(f"{where} imports {module} without pytest.importorskip")
            elif not {canonicalize_name(d) for d in providers.get(module, ())} & requested:
                missing.setdefault(module, []).append(where)
    assert not missing, f"imported by the suite, installed by no requirement of [test]: {missing}"
    assert not unguarded


def _code_lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def test_ci_runs_the_readme_test_command_first_in_a_fresh_environment():
    """.ci/run installed every extra first, so the README's command passed there and failed alone."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"^apt-get install -y ([^&]+?) && (.+ && python -m pytest)$", readme, re.M)
    apt, command = found.groups()
    lines = _code_lines(CI)
    installs = [i for i, line in enumerate(lines) if re.search(r"\b(pip3? (install|wheel)|npm ci)\b", line)]
    venv = next(i for i, line in enumerate(lines) if re.match(r"python3? -m venv ", line))
    first = installs[0]
    assert venv < first and command in lines[first], lines[first]
    # Before it only Debian's packages the README's command starts with, as CI installs them.
    assert all(apt.split() == re.search(r"apt-get install -y -qq (.+?) >", line).group(1).split()
               for line in lines[:first] if "apt-get install" in line)
    # The skips of step 1 are allowed (the extras' tests); step 2 adds the extras, then runs them all.
    no_skip = next(i for i, line in enumerate(lines) if "CONTEXTVEC_NO_SKIP=1" in line)
    extras = next(re.search(r'pip install -e "\.\[([^]]+)\]"', line).group(1).split(",")
                  for line in lines[first + 1:] if 'pip install -e ".[' in line)
    assert first < no_skip and set(extras) >= set(SECOND_STEP.values())
