"""Every module path the docs name (`record/history.py`, `lambdas/handlers/runtime.py`) is a file
of the repository: a module that moved or merged leaves no pointer behind to a file that is
gone. A path may be written from any folder down (`store/plan.py` for
lambdas/saga_index/store/plan.py), so it is looked up as the tail of a path in the tree."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# What the docs are: the pages under docs/ and every README.
DOCS = ("docs/*.md", "README.md", "*/README.md", "*/*/README.md")
# Trees that are no source of the project's own.
NOT_SOURCE = {".git", ".venv", "node_modules", "build", "cdk.out", "dist"}
# A module path: one folder at least, then a file ending in .py, not part of a longer path or URL.
MODULE_PATH = re.compile(r"(?<![\w./:-])((?:[\w-]+/)+[\w-]+\.py)\b")


def source_files(root: Path) -> list[str]:
    return [
        path.relative_to(root).as_posix()
        for path in root.rglob("*.py")
        if not NOT_SOURCE.intersection(path.relative_to(root).parts)
    ]


def missing_paths(root: Path, docs: Iterable[Path]) -> list[str]:
    """'doc: path' for each module path a doc names that no file of `root` ends with."""
    tails = {"/" + name for name in source_files(root)}
    missing = []
    for doc in docs:
        for named in sorted(set(MODULE_PATH.findall(doc.read_text(encoding="utf-8")))):
            if not any(tail.endswith("/" + named) for tail in tails):
                missing.append(f"{doc.relative_to(root).as_posix()}: {named}")
    return missing


def test_a_path_to_a_module_that_is_gone_is_named(tmp_path: Path) -> None:
    (tmp_path / "lambdas" / "pkg" / "record").mkdir(parents=True)
    (tmp_path / "lambdas" / "pkg" / "record" / "history.py").write_text("")
    doc = tmp_path / "page.md"
    doc.write_text(
        "`record/history.py` holds it; `lambdas/pkg/record/history.py` too; "
        "record/store.py, `restore_point`, and https://example.com/x/y.py are elsewhere.\n"
    )
    assert missing_paths(tmp_path, [doc]) == ["page.md: record/store.py"]


def test_every_module_path_the_docs_name_exists() -> None:
    docs = sorted({doc for pattern in DOCS for doc in ROOT.glob(pattern)})
    assert any(doc.name == "architecture.md" for doc in docs)
    missing = missing_paths(ROOT, docs)
    assert not missing, "the docs name modules that do not exist:\n" + "\n".join(missing)
