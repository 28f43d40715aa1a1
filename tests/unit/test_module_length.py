"""No module under lambdas/ or infra/ is longer than 400 lines: a longer one holds more than one
idea, and is split along them (not by line count). Names each module over the limit."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TREES = ("lambdas", "infra")
MAX_LINES = 400


def long_modules(root: Path = ROOT) -> list[str]:
    """ "path (lines)" of every module of TREES over MAX_LINES."""
    found = []
    for tree in TREES:
        for path in sorted((root / tree).rglob("*.py")):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > MAX_LINES:
                found.append(f"{path.relative_to(root).as_posix()} ({lines} lines)")
    return found


def test_the_rule_names_a_module_over_the_limit(tmp_path: Path) -> None:
    (tmp_path / "infra").mkdir()
    (tmp_path / "lambdas").mkdir()
    (tmp_path / "lambdas" / "fits.py").write_text("x = 1\n" * MAX_LINES)
    (tmp_path / "infra" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert long_modules(tmp_path) == [f"infra/long.py ({MAX_LINES + 1} lines)"]


def test_no_module_is_longer_than_400_lines() -> None:
    over = long_modules()
    assert not over, "modules over 400 lines: " + ", ".join(over)
