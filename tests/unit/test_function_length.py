"""No function outside the tests is longer than 100 lines: a longer one hides steps that
deserve names of their own. Walks every module of lambdas/, infra/, devkit/, bench/ and app.py
and names each function (or lambda) over the limit with its file and first line."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TREES = ("lambdas", "infra", "devkit", "bench", "app.py")
MAX_LINES = 100


def _modules() -> list[Path]:
    found: list[Path] = []
    for tree in TREES:
        path = ROOT / tree
        found.extend([path] if path.is_file() else sorted(path.rglob("*.py")))
    return found


@functools.cache
def _long_functions() -> list[tuple[str, int]]:
    """("path:name", lines) of every function over MAX_LINES."""
    long: list[tuple[str, int]] = []
    for path in _modules():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                assert node.end_lineno is not None
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_LINES:
                    name = getattr(node, "name", f"<lambda at line {node.lineno}>")
                    long.append((f"{path.relative_to(ROOT).as_posix()}:{name}", lines))
    return long


def test_the_walk_sees_every_tree() -> None:
    modules = _modules()
    for tree in TREES:
        assert any(m == ROOT / tree or (ROOT / tree) in m.parents for m in modules), tree


def test_no_function_is_longer_than_100_lines() -> None:
    over = [f"{name} ({lines} lines)" for name, lines in _long_functions()]
    assert not over, "functions over 100 lines: " + ", ".join(over)
