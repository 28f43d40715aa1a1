"""No code outside the tests swaps a collaborator by patching: a strategy that differs (a fence's
check, a probe, a clock) is a parameter. Read from the source with `ast`: any use of
`unittest.mock`'s `patch` (`mock.patch`, `mock.patch.object`, `patch(...)`, `patch.object`,
`patch.dict`) under lambdas/, devkit/ or bench/ fails, naming the file and line.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TREES = ("lambdas", "devkit", "bench")


def _names_patch(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr == "patch"
    return isinstance(node, ast.Name) and node.id == "patch"


def patch_uses(source: str) -> list[int]:
    """The lines of `source` that import or call unittest.mock's patch."""
    lines: list[int] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("unittest.mock"):
            if any(alias.name == "patch" for alias in node.names):
                lines.append(node.lineno)
        elif (isinstance(node, ast.Attribute) and node.attr == "patch") or (
            isinstance(node, ast.Name) and node.id == "patch"
        ):
            lines.append(node.lineno)
    return sorted(set(lines))


def test_the_scan_finds_each_way_of_patching() -> None:
    assert patch_uses("from unittest import mock\nmock.patch.object(a, 'b', c)\n") == [2]
    assert patch_uses("from unittest.mock import patch\nwith patch('x'):\n    pass\n") == [1, 2]
    assert patch_uses("import unittest.mock\nunittest.mock.patch.dict({}, {})\n") == [2]
    assert patch_uses("def patched(): return 1\n") == []


def test_no_mock_patch_outside_the_tests() -> None:
    found = {
        f"{path.relative_to(REPO)}:{line}"
        for tree in TREES
        for path in sorted((REPO / tree).rglob("*.py"))
        for line in patch_uses(path.read_text(encoding="utf-8"))
    }
    assert found == set()
