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

A front is also narrow: it exports what an importer outside its room uses (another room, the
layers above, infra), and nothing else. A name only the room itself or the tests use stays in
its module, and the tests import it from there. The top package's front is the public API for
other Python services, and the few names docs/architecture.md lists as public ("Names a front
keeps with no importer") are kept whatever imports them.
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
# Every importer a front serves: the library's own rooms, the layers above it and infra (the
# tests are no importer: a name only they use stays in its module).
IMPORTERS = (LAMBDAS, REPO / "devkit", REPO / "bench", REPO / "infra")
ARCHITECTURE = REPO / "docs" / "architecture.md"
# Names a front exports with no importer outside its room, because the docs list them as public:
# the open-saga index's key scheme, the keys every writer of that index stamps and every reader
# of it queries, taken from the key scheme's front as a whole; and that index's readiness, what
# adding it to an attached table takes and whether it is ready for the move that starts its key.
PUBLIC: dict[str, frozenset[str]] = {
    "saga_index.index": frozenset({"OPEN_INDEX_SORT_KEY", "all_open_index_pks", "open_index_pk"}),
    "saga_index.store": frozenset(
        {
            "OpenIndexReadiness",
            "add_open_index_command",
            "open_index_attribute_definitions",
            "open_index_create",
            "open_index_readiness",
            "open_index_status_command",
        }
    ),
}


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


def names_taken(files: Iterable[Path], root: Path, top: str) -> dict[str, set[str]]:
    """Per front (a package of `top` under `root`), the names files outside its room import
    from it."""
    taken: dict[str, set[str]] = {}
    for path in files:
        own = room_of(path, root) if path.is_relative_to(root / top) else None
        for _, module, names in imports_of(path, top):
            if module is None or module == own:
                continue
            if (root / module.replace(".", "/") / "__init__.py").is_file():
                taken.setdefault(module, set()).update(names)
    return taken


def unused_exports(
    files: Iterable[Path], root: Path, top: str, public: dict[str, frozenset[str]]
) -> list[str]:
    """'front: name' for each name a front of `top` exports that no file of `files` outside its
    room imports, the top package's front (the public API) and `public` aside."""
    taken = names_taken(files, root, top)
    found = []
    for package_dir in packages(root, top):
        front = ".".join(package_dir.relative_to(root).parts)
        if front == top:
            continue
        kept = taken.get(front, set()) | public.get(front, frozenset())
        found.extend(
            f"{front}: {name}" for name in front_names(package_dir) or [] if name not in kept
        )
    return found


def test_a_name_a_front_exports_for_no_importer_is_named(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    (root / "lib" / "pkg").mkdir(parents=True)
    (root / "lib" / "__init__.py").write_text('__all__ = ["Api"]\nApi = 1\n')
    (root / "lib" / "pkg" / "__init__.py").write_text(
        "from lib.pkg.mod import Inner, Kept, Used\n\n"
        '__all__ = ["Inner", "Kept", "Unused", "Used"]\nUnused = 1\n'
    )
    (root / "lib" / "pkg" / "mod.py").write_text("Inner = Kept = Used = 1\n")
    (root / "lib" / "pkg" / "sibling.py").write_text("from lib.pkg import Inner\n")
    user = tmp_path / "user.py"
    user.write_text("from lib.pkg import Used\nfrom lib.pkg.mod import Unused\n")
    files = [user, *sorted(root.rglob("*.py"))]
    public = {"lib.pkg": frozenset({"Kept"})}
    assert unused_exports(files, root, "lib", public) == ["lib.pkg: Inner", "lib.pkg: Unused"]
    assert unused_exports(files, root, "lib", {}) == [
        "lib.pkg: Inner",
        "lib.pkg: Kept",
        "lib.pkg: Unused",
    ]


def test_every_name_a_front_exports_has_an_importer_outside_its_room() -> None:
    files = [path for directory in IMPORTERS for path in sorted(directory.rglob("*.py"))]
    found = unused_exports(files, LAMBDAS, DOMAIN, PUBLIC)
    assert not found, (
        "names a front exports that no importer outside its room uses (import them from their "
        "module, or drop them from __all__):\n" + "\n".join(found)
    )


def test_the_names_kept_with_no_importer_are_the_ones_the_docs_list_as_public() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("Names a front keeps with no importer", 1)[1].split("\n#", 1)[0]
    for front, names in PUBLIC.items():
        assert f"`{front}`" in section, front
        missing = sorted(name for name in names if f"`{name}`" not in section)
        assert not missing, f"{front}: {missing} not listed as public in docs/architecture.md"
