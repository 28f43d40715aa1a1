"""No file of lambdas/ imports itself back through others: the module import graph, read from
the source with `ast` (imports at module level and inside functions, relative ones resolved),
has no cycle. A cycle is named file by file, so the failure says which import to move.

Import-linter orders packages; this catches what it cannot: two modules of one package that
import each other (one of them often inside a function, to dodge the import-time failure).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

LAMBDAS = Path(__file__).resolve().parents[2] / "lambdas"


def module_names(root: Path) -> dict[str, Path]:
    """Every module under `root` by its dotted name (a package by its own name)."""
    modules: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if parts:
            modules[".".join(parts)] = path
    return modules


def _known(name: str, modules: Mapping[str, Path]) -> str | None:
    # `import a.b.c` of a name that is not a module (an attribute) lands on the longest module
    # prefix of it.
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def imports_of(module: str, path: Path, modules: Mapping[str, Path]) -> set[str]:
    """The modules of `modules` that `module` imports, wherever in the file the import sits."""
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".") if package else []
                if node.level - 1 > len(base_parts):
                    raise ValueError(f"{path}: relative import beyond the top package")
                base = ".".join(base_parts[: len(base_parts) - (node.level - 1)])
                source = ".".join(part for part in (base, node.module) if part)
            else:
                source = node.module or ""
            # `from pkg import name` imports the submodule pkg.name when there is one, else
            # reads an attribute of pkg.
            targets = [
                f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            known = _known(target, modules)
            if known is not None and known != module:
                found.add(known)
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    modules = module_names(root)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[set[str]]:
    """Tarjan's components with more than one module: each holds at least one cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        # Iterative, so a deep import chain cannot hit the recursion limit.
        work: list[tuple[str, list[str]]] = [(start, sorted(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, pending = work[-1]
            if pending:
                nxt = pending.pop(0)
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(component)
    return components


def one_cycle(graph: Mapping[str, Iterable[str]], component: set[str]) -> list[str]:
    """A shortest cycle through the component's first module, as the chain of imports."""
    start = min(component)
    paths: dict[str, list[str]] = {start: [start]}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for nxt in sorted(graph[node]):
                if nxt == start:
                    return [*paths[node], start]
                if nxt in component and nxt not in paths:
                    paths[nxt] = [*paths[node], nxt]
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no cycle through {start} in {sorted(component)}")


def cycles(root: Path) -> list[str]:
    """Every import cycle under `root` not temporarily allowed, each as 'a -> b -> a'."""
    graph = import_graph(root)
    return [" -> ".join(one_cycle(graph, component)) for component in strongly_connected(graph)]


def test_no_module_under_lambdas_imports_itself_back() -> None:
    found = cycles(LAMBDAS)
    assert not found, "import cycles (move one import so the graph runs one way):\n" + "\n".join(
        found
    )


def _write(root: Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_a_cycle_through_a_function_level_relative_import_is_named(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from pkg.sub import b\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/b.py": "def later():\n    from ..c import thing\n    return thing\n",
            "pkg/c.py": "import pkg.a\nthing = 1\n",
            "pkg/d.py": "from . import c\n",
        },
    )
    assert cycles(tmp_path) == ["pkg.a -> pkg.sub.b -> pkg.c -> pkg.a"]


def test_a_front_that_imports_its_modules_is_no_cycle(tmp_path: Path) -> None:
    # A package's __init__ re-exporting its modules, whose modules import each other directly
    # (never through the front), runs one way.
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.a import A\nfrom pkg.b import B\n",
            "pkg/a.py": "A = 1\n",
            "pkg/b.py": "from pkg.a import A\nB = A\n",
            "user.py": "from pkg import A, B\n",
        },
    )
    assert cycles(tmp_path) == []


def test_a_module_importing_its_own_front_is_a_cycle(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.a import A\nfrom pkg.b import B\n",
            "pkg/a.py": "A = 1\n",
            "pkg/b.py": "from pkg import A\nB = A\n",
        },
    )
    assert cycles(tmp_path) == ["pkg -> pkg.b -> pkg"]


def test_a_relative_import_beyond_the_top_package_is_refused(tmp_path: Path) -> None:
    _write(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "from ... import x\n"})
    with pytest.raises(ValueError, match="beyond the top package"):
        import_graph(tmp_path)
