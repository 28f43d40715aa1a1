"""Every package of the domain library has a front (its `__init__.py`, whose `__all__` names what
outsiders use), and the layers above it (the CLI, the handlers, the devkit, the benchmarks)
import only fronts: a module inside a package can move, merge or split without their imports
changing. Read from the source with `ast`, imports inside functions included.

Inside the domain library the same holds between rooms. A room is a package of the library (a
directory with an `__init__.py`, that file its front): `index`, `store`, `store.dynamo`,
`sweeps`, `layout_change.record`, `layout_change.transitions`, `layout_change.lease`,
`layout_change.backfill`, `layout_change.checks` and each of its sub-packages, and the top
package itself. A module's room is the package it sits in; a sub-package is a room of its own.
A module importing another room imports only that room's front and the names in its
`__all__`; modules of one room import each other directly, never through their own front
(which imports them: that way lies a cycle).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LAMBDAS = REPO / "lambdas"
DOMAIN = "saga_index"
# The layers above the domain library that import it only through its fronts.
BOUND = (
    LAMBDAS / "saga_index_cli",
    LAMBDAS / "handlers",
    REPO / "devkit",
    REPO / "bench",
)


def front_names(package_dir: Path) -> list[str] | None:
    """The literal `__all__` of a package's __init__.py, or None when it declares none."""
    tree = ast.parse((package_dir / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value_node = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value_node = [node.target], node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            value = ast.literal_eval(value_node)
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{package_dir}/__init__.py: __all__ must be a list of names")
            return value
    return None


def bound_names(package_dir: Path) -> set[str]:
    """What a package's __init__.py binds at its top level (imports, definitions); with a module
    `__getattr__` (names loaded on first use, PEP 562), also what it imports for type checkers
    under `if TYPE_CHECKING:`."""
    tree = ast.parse((package_dir / "__init__.py").read_text(encoding="utf-8"))
    names: set[str] = set()
    body = list(tree.body)
    if any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in body):
        for node in tree.body:
            if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
                body += node.body
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            names.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def packages(root: Path, top: str) -> list[Path]:
    return sorted(path.parent for path in (root / top).rglob("__init__.py"))


def imports_of(path: Path, top: str) -> Iterator[tuple[int, str | None, list[str]]]:
    """Each import of `top` in a file: (line, module, the names taken from it); a relative
    import, which names no package of its own, as module None."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in sorted(ast.walk(tree), key=lambda n: getattr(n, "lineno", 0)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                yield node.lineno, None, [alias.name for alias in node.names]
            elif node.module and node.module.split(".")[0] == top:
                yield node.lineno, node.module, [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == top:
                    yield node.lineno, alias.name, []


def room_of(path: Path, root: Path) -> str:
    """The room of a file of the library: the package it sits in (the package's __init__.py
    is the room's front, and in the room)."""
    return ".".join(path.parent.relative_to(root).parts)


def deep_imports(files: Iterable[Path], root: Path, top: str, inside: bool = False) -> list[str]:
    """Each import of `top` in `files` that does not go through a front: 'file:line: why'.

    `inside`: the files are the library's own (under `root`): an import within a file's own
    room goes to the sibling module directly, never through the room's front, and an import of
    another room goes through that room's front."""
    found: list[str] = []
    for path in files:
        own = room_of(path, root) if inside else None
        for lineno, module, names in imports_of(path, top):
            where = f"{path}:{lineno}"
            if module is None:
                if inside:
                    found.append(f"{where}: a relative import; spell the module it imports")
                continue
            package_dir = root / module.replace(".", "/")
            is_front = (package_dir / "__init__.py").is_file()
            if is_front and module == own:
                found.extend(
                    f"{where}: {module} is this module's own front; import {name} from its module"
                    for name in names
                    if not (package_dir / f"{name}.py").is_file()
                    and not (package_dir / name / "__init__.py").is_file()
                )
            elif not is_front and own is not None and module.rpartition(".")[0] == own:
                continue  # a sibling module of the same room
            elif not is_front:
                found.append(f"{where}: {module} is a module inside a package, not a front")
            else:
                exported = front_names(package_dir) or []
                found.extend(
                    f"{where}: {module} does not export {name} (its __all__)"
                    for name in names
                    if name not in exported
                )
    return found


@pytest.mark.parametrize(
    "package", packages(LAMBDAS, DOMAIN), ids=lambda p: str(p.relative_to(LAMBDAS))
)
def test_every_package_of_the_domain_library_has_a_front(package: Path) -> None:
    exported = front_names(package)
    assert exported is not None, f"{package}/__init__.py declares no __all__"
    assert exported == sorted(set(exported), key=exported.index), "__all__ repeats a name"
    missing = set(exported) - bound_names(package)
    assert not missing, f"{package}/__init__.py names in __all__ what it never binds: {missing}"


def test_the_layers_above_the_domain_library_import_only_its_fronts() -> None:
    files = [path for directory in BOUND for path in sorted(directory.rglob("*.py"))]
    assert files, "no file found under the bound layers"
    found = deep_imports(files, LAMBDAS, DOMAIN)
    assert not found, "imports past a front:\n" + "\n".join(found)


def test_a_deep_import_or_an_unexported_name_is_named(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    (root / "lib" / "pkg").mkdir(parents=True)
    (root / "lib" / "__init__.py").write_text("__all__: list[str] = []\n")
    (root / "lib" / "pkg" / "__init__.py").write_text(
        'from lib.pkg.mod import Thing\n\n__all__ = ["Thing"]\n'
    )
    (root / "lib" / "pkg" / "mod.py").write_text("class Thing: ...\nclass Other: ...\n")
    user = tmp_path / "user.py"
    user.write_text(
        "from lib.pkg import Thing\n"
        "def later():\n"
        "    from lib.pkg.mod import Thing\n"
        "    from lib.pkg import Other\n"
        "import lib.pkg.mod\n"
    )
    assert deep_imports([user], root, "lib") == [
        f"{user}:3: lib.pkg.mod is a module inside a package, not a front",
        f"{user}:4: lib.pkg does not export Other (its __all__)",
        f"{user}:5: lib.pkg.mod is a module inside a package, not a front",
    ]


def test_imports_between_the_rooms_of_the_domain_library_go_through_fronts() -> None:
    files = sorted((LAMBDAS / DOMAIN).rglob("*.py"))
    found = deep_imports(files, LAMBDAS, DOMAIN, inside=True)
    assert not found, "imports past a front between rooms:\n" + "\n".join(found)


def test_a_room_crossing_past_a_front_is_named_and_a_sibling_import_is_not(
    tmp_path: Path,
) -> None:
    root = tmp_path / "lib"
    for room in ("lib", "lib/low", "lib/high", "lib/high/sub"):
        (root / room).mkdir(parents=True, exist_ok=True)
        (root / room / "__init__.py").write_text("__all__: list[str] = []\n")
    (root / "lib" / "low" / "__init__.py").write_text(
        'from lib.low.parts import Part\n\n__all__ = ["Part"]\n'
    )
    (root / "lib" / "low" / "parts.py").write_text("class Part: ...\nclass Hidden: ...\n")
    (root / "lib" / "high" / "helper.py").write_text("def helper() -> None: ...\n")
    (root / "lib" / "high" / "sub" / "deep.py").write_text("def deep() -> None: ...\n")
    user = root / "lib" / "high" / "use.py"
    user.write_text(
        "from lib.low import Part\n"
        "from lib.high.helper import helper\n"
        "from lib.high import helper as sibling\n"
        "from lib.low.parts import Part\n"
        "from lib.low import Hidden\n"
        "from lib.high import use\n"
        "from lib.high import Thing\n"
        "from lib.high.sub.deep import deep\n"
        "from lib.high.sub import deep\n"
        "from . import helper\n"
    )
    assert deep_imports([user], root, "lib", inside=True) == [
        f"{user}:4: lib.low.parts is a module inside a package, not a front",
        f"{user}:5: lib.low does not export Hidden (its __all__)",
        f"{user}:7: lib.high is this module's own front; import Thing from its module",
        f"{user}:8: lib.high.sub.deep is a module inside a package, not a front",
        f"{user}:9: lib.high.sub does not export deep (its __all__)",
        f"{user}:10: a relative import; spell the module it imports",
    ]
