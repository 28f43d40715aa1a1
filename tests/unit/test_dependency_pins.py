"""The installable package's dependencies (pyproject.toml [project]): constraints.txt stays the
one home of pins, and the wheel declares exactly what its code imports at run time."""

from __future__ import annotations

import ast
import fnmatch
import importlib.metadata
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT: dict[str, Any] = PYPROJECT["project"]
# The repository's own top-level packages: shipped or not, never a dependency.
FIRST_PARTY = frozenset({"saga_index", "saga_index_cli", "handlers", "infra", "devkit", "bench"})


def constraint_pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            requirement = Requirement(line)
            (spec,) = requirement.specifier
            pins[canonicalize_name(requirement.name)] = spec.version
    return pins


def declared() -> list[tuple[str, Requirement]]:
    """(where, requirement) for [project].dependencies and every optional extra."""
    found = [("dependencies", Requirement(r)) for r in PROJECT.get("dependencies", [])]
    for extra, requirements in PROJECT.get("optional-dependencies", {}).items():
        found += [(f"optional-dependencies.{extra}", Requirement(r)) for r in requirements]
    return found


@pytest.mark.parametrize(("where", "requirement"), declared(), ids=[str(r) for _, r in declared()])
def test_every_declared_dependency_is_pinned_exactly_as_constraints_txt_pins_it(
    where: str, requirement: Requirement
) -> None:
    specs = list(requirement.specifier)
    exact = f"{where}: {requirement} must be pinned exactly (==), to constraints.txt's version"
    assert len(specs) == 1, exact
    assert specs[0].operator == "==", exact
    pins = constraint_pins()
    name = canonicalize_name(requirement.name)
    assert name in pins, f"{where}: {requirement.name} is not in constraints.txt (make lock)"
    assert specs[0].version == pins[name], (
        f"{where}: {requirement} differs from constraints.txt's {requirement.name}=={pins[name]}"
    )


def test_the_cli_declares_dependencies_and_a_demo_extra() -> None:
    assert PROJECT["dependencies"], "an installed CLI needs its runtime dependencies declared"
    demo = {
        canonicalize_name(Requirement(r).name) for r in PROJECT["optional-dependencies"]["demo"]
    }
    assert "matplotlib" in demo
    runtime = {canonicalize_name(Requirement(r).name) for r in PROJECT["dependencies"]}
    assert not demo & runtime, "the demo's chart libraries are not the CLI's dependencies"


# ---- what the wheel ships, and what that code imports ------------------------------------------


def shipped_packages() -> dict[str, Path]:
    """The packages setuptools puts in the wheel ([tool.setuptools.packages.find]), by name."""
    find = PYPROJECT["tool"]["setuptools"]["packages"]["find"]
    packages: dict[str, Path] = {}
    for where in find.get("where", ["."]):
        base = ROOT / where
        for init in base.rglob("__init__.py"):
            name = ".".join(init.parent.relative_to(base).parts)
            if any(fnmatch.fnmatchcase(name, pattern) for pattern in find["include"]):
                packages[name] = init.parent
    return packages


def test_the_wheel_ships_the_cli_and_the_domain_library_only() -> None:
    top_level = {name.split(".")[0] for name in shipped_packages()}

    assert top_level == {"saga_index", "saga_index_cli"}


class _RuntimeImports(ast.NodeVisitor):
    """Top-level module names imported when the module runs (not under `if TYPE_CHECKING:`)."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
        ):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.names.update(alias.name.split(".")[0] for alias in node.names)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module:
            self.names.add(node.module.split(".")[0])


def shipped_modules() -> Iterator[Path]:
    for directory in shipped_packages().values():
        yield from sorted(directory.glob("*.py"))


def imported_third_party() -> dict[str, set[str]]:
    """Third-party top-level module -> the shipped modules importing it."""
    found: dict[str, set[str]] = {}
    for path in shipped_modules():
        visitor = _RuntimeImports()
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        for name in visitor.names - set(sys.stdlib_module_names):
            found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return found


def test_shipped_code_imports_no_first_party_package_the_wheel_leaves_out() -> None:
    shipped = {name.split(".")[0] for name in shipped_packages()}
    imported = imported_third_party()

    left_out = {name: imported[name] for name in (FIRST_PARTY - shipped) & set(imported)}

    assert not left_out, f"the installed CLI would fail to import these: {left_out}"


def test_the_declared_dependencies_are_exactly_what_the_shipped_code_imports() -> None:
    providers = importlib.metadata.packages_distributions()
    imported = {
        name: where for name, where in imported_third_party().items() if name not in FIRST_PARTY
    }
    unknown = {name: where for name, where in imported.items() if name not in providers}
    assert not unknown, f"imported but not installed here: {unknown}"
    needed = {canonicalize_name(dist) for name in imported for dist in providers[name]}
    runtime = {canonicalize_name(Requirement(r).name) for r in PROJECT["dependencies"]}

    assert needed - runtime == set(), (
        f"imported at run time but not in [project].dependencies: {sorted(needed - runtime)}"
    )
    assert runtime - needed == set(), (
        f"declared but never imported by the shipped code: {sorted(runtime - needed)}"
    )
