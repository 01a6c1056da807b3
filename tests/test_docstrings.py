"""Every ``forward`` of a public module in ``src/contextvec`` states its shapes: a docstring with at
least one parenthesised shape such as ``(batch, timesteps, dim)`` and a ``Returns:`` section
(Google style, as mkdocstrings reads it)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "contextvec"

# A tuple of at least two entries (or one with a trailing comma): names, numbers, ``...`` and
# arithmetic on them, e.g. ``(batch,)``, ``(n, hidden)``, ``(num_layers + 1, batch, dim)``.
SHAPE = re.compile(r"\((?:\s*[\w.][\w. +*/-]*,)+(?:\s*[\w.][\w. +*/-]*)?\)")
RETURNS = re.compile(r"^\s*Returns:\s*$", re.MULTILINE)


def _public_modules() -> list[Path]:
    return sorted(path for path in SRC.rglob("*.py")
                  if not any(part.startswith("_") and part != "__init__.py"
                             for part in path.relative_to(SRC).parts))


def _forwards(path: Path) -> list[tuple[str, ast.FunctionDef]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(node.name, item) for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
            for item in node.body if isinstance(item, ast.FunctionDef) and item.name == "forward"]


def shapes_stated(docstring: str | None) -> bool:
    """Whether a docstring names a shape and has a Returns section."""
    return bool(docstring and SHAPE.search(docstring) and RETURNS.search(docstring))


def test_the_rule_tells_a_shape_from_prose():
    assert shapes_stated("Mix.\n\nArgs:\n    x: ``(batch, timesteps, dim)``.\n\nReturns:\n    ``(batch,)``.")
    assert shapes_stated("Run.\n\nArgs:\n    x: (n, 2 * hidden) float.\n\nReturns:\n    The same.")
    assert not shapes_stated("Run the layers (see the module docstring).\n\nReturns:\n    Vectors.")
    assert not shapes_stated("``(batch, timesteps)`` ids -> ``(batch, timesteps, dim)``.")
    assert not shapes_stated(None)


def test_the_walk_finds_the_models():
    found = {name for path in _public_modules() for name, _ in _forwards(path)}
    assert {"ElmoBiLM", "BertModel", "ScalarMix", "CharCNN"} <= found


def test_every_forward_states_its_shapes():
    missing = [f"{path.relative_to(SRC.parent)}:{function.lineno} {name}.forward"
               for path in _public_modules() for name, function in _forwards(path)
               if not shapes_stated(ast.get_docstring(function))]
    assert missing == [], "forward() without a shape and a Returns: section:\n" + "\n".join(missing)
