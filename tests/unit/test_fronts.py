"""Every package of the domain library has a front (its `__init__.py`, whose `__all__` names what
outsiders use), and the layers above it (the CLI, the handlers, the devkit, the benchmarks)
import only fronts: a module inside a package can move, merge or split without their imports
changing. Read from the source with `ast`, imports inside functions included.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
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


def deep_imports(files: Iterable[Path], root: Path, top: str) -> list[str]:
    """Each import of `top` in `files` that does not go through a front: 'file:line: why'."""
    found: list[str] = []
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in sorted(ast.walk(tree), key=lambda n: getattr(n, "lineno", 0)):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [(node.module, [alias.name for alias in node.names])]
            elif isinstance(node, ast.Import):
                modules = [(alias.name, []) for alias in node.names]
            else:
                continue
            for module, names in modules:
                if module.split(".")[0] != top:
                    continue
                where = f"{path}:{node.lineno}"
                package_dir = root / module.replace(".", "/")
                if not (package_dir / "__init__.py").is_file():
                    found.append(f"{where}: {module} is a module inside a package, not a front")
                    continue
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
