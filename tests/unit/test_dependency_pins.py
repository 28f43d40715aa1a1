"""The installable package's dependencies (pyproject.toml [project]): the library declares
ranges that hold constraints.txt's pins, every extra pins exactly what constraints.txt pins (the
one home of pins), and the wheel declares exactly what its code imports at run time: the
library's imports as [project].dependencies, the operator CLI's behind the `cli` extra."""

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


def declared_extras() -> list[tuple[str, Requirement]]:
    """(where, requirement) for every optional extra."""
    found: list[tuple[str, Requirement]] = []
    for extra, requirements in PROJECT.get("optional-dependencies", {}).items():
        found += [(f"optional-dependencies.{extra}", Requirement(r)) for r in requirements]
    return found


def library_requirements() -> list[Requirement]:
    return [Requirement(r) for r in PROJECT["dependencies"]]


@pytest.mark.parametrize(
    ("where", "requirement"), declared_extras(), ids=[str(r) for _, r in declared_extras()]
)
def test_every_extra_pins_exactly_as_constraints_txt_pins(
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


@pytest.mark.parametrize("requirement", library_requirements(), ids=str)
def test_the_library_declares_a_bounded_range_holding_the_pinned_version(
    requirement: Requirement,
) -> None:
    operators = {spec.operator for spec in requirement.specifier}
    assert operators == {">=", "<"}, (
        f"{requirement}: the library declares a range (>= the oldest tested, < the next major), "
        "so a service can install it beside its own versions"
    )
    pinned = constraint_pins()[canonicalize_name(requirement.name)]
    assert requirement.specifier.contains(pinned), (
        f"{requirement} excludes constraints.txt's {requirement.name}=={pinned}"
    )


def test_the_cli_extra_pins_the_librarys_dependencies_and_the_demo_is_apart() -> None:
    extras = PROJECT["optional-dependencies"]
    cli = {canonicalize_name(Requirement(r).name) for r in extras["cli"]}
    demo = {canonicalize_name(Requirement(r).name) for r in extras["demo"]}
    library = {canonicalize_name(r.name) for r in library_requirements()}

    assert library <= cli, "the CLI runs on the library at the versions the tests ran with"
    assert {"click", "rich"} <= cli
    assert not {"click", "rich"} & library, "the library alone does not bring the CLI's"
    assert "matplotlib" in demo
    assert not demo & (cli | library), "the demo's chart libraries are nobody else's"


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


def shipped_modules(top: str | None = None) -> Iterator[Path]:
    for name, directory in shipped_packages().items():
        if top is None or name.split(".")[0] == top:
            yield from sorted(directory.glob("*.py"))


def imported_third_party(top: str | None = None) -> dict[str, set[str]]:
    """Third-party top-level module -> the shipped modules (of package `top`) importing it."""
    found: dict[str, set[str]] = {}
    for path in shipped_modules(top):
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


def distributions_imported(top: str) -> set[str]:
    providers = importlib.metadata.packages_distributions()
    imported = {
        name: where for name, where in imported_third_party(top).items() if name not in FIRST_PARTY
    }
    unknown = {name: where for name, where in imported.items() if name not in providers}
    assert not unknown, f"imported but not installed here: {unknown}"
    return {canonicalize_name(dist) for name in imported for dist in providers[name]}


def test_the_librarys_dependencies_are_exactly_what_the_library_imports() -> None:
    needed = distributions_imported("saga_index")
    runtime = {canonicalize_name(r.name) for r in library_requirements()}

    assert needed - runtime == set(), (
        f"imported at run time but not in [project].dependencies: {sorted(needed - runtime)}"
    )
    assert runtime - needed == set(), (
        f"declared but never imported by the library: {sorted(runtime - needed)}"
    )


def test_the_cli_extra_is_exactly_what_the_cli_and_the_library_import() -> None:
    needed = distributions_imported("saga_index_cli") | distributions_imported("saga_index")
    cli = {canonicalize_name(Requirement(r).name) for r in PROJECT["optional-dependencies"]["cli"]}

    assert needed - cli == set(), f"the CLI imports, the cli extra lacks: {sorted(needed - cli)}"
    assert cli - needed == set(), f"in the cli extra, never imported: {sorted(cli - needed)}"
