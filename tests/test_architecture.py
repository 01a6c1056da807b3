"""The import graph of ``src/contextvec``: imports only go down the layers, and no room imports
another that imports it back (ARCHITECTURE.md draws the layers)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "contextvec"

# Lower number = lower layer. A module may import its own layer or any lower one.
LAYERS = {
    "allocator": 0, "choices": 0, "renamed": 0, "progress": 0, "extras": 0, "logs": 0, "text": 0,
    "io": 1, "hub": 1,
    "encoders": 2,
    "api": 3, "resolve": 3, "embedder": 3,
    "bulk": 4, "files": 4, "engine": 4, "export": 4, "features": 4, "documents": 4,
    "tasks": 5, "training": 5, "allennlp": 5, "flair": 5, "distributed": 5, "spacy": 5,
    "sentence_transformers": 5,
    "probes": 6, "experiments": 6, "explore": 6, "jobs": 7,
    "client": 8, "server": 8, "cli": 9,
}


def _room(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "contextvec" else None


def _imports() -> dict[str, set[str]]:
    """room -> rooms it imports (module-level and function-level imports, TYPE_CHECKING too)."""
    graph: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC.parent).with_suffix("")
        module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        room = _room(module)
        if room is None:  # contextvec/__init__.py: the lazy top-level names
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            for name in names:
                target = _room(name)
                if target and target != room:
                    graph.setdefault(room, set()).add(target)
    return graph


def test_every_room_has_a_layer():
    rooms = {p.stem if p.is_file() else p.name for p in SRC.iterdir()
             if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}
    assert rooms - {"data", "models"} <= set(LAYERS), rooms - set(LAYERS)


def test_imports_only_go_down():
    upward = sorted(f"{a} -> {b}" for a, targets in _imports().items() for b in targets
                    if LAYERS.get(b, 99) > LAYERS.get(a, -1))
    assert upward == []


def test_no_import_circles_between_rooms():
    graph = _imports()
    circles = sorted(f"{a} <-> {b}" for a in graph for b in graph[a] if a < b and a in graph.get(b, set()))
    assert circles == []


def _module_graph() -> dict[str, set[str]]:
    modules = {}
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC.parent).with_suffix("")
        modules[".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)] = path
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        if module == "contextvec":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for target in targets:
                # A package's __init__ re-exporting its modules is not a circle of its own.
                if target in modules and target != module and not module.startswith(target + "."):
                    graph.setdefault(module, set()).add(target)
    return graph


def test_no_import_circles_between_modules():
    graph = _module_graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in list(graph):
        if node not in index:
            visit(node)
    assert circles == []
