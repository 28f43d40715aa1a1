"""mypy follows only the aws-cdk-lib modules the stack imports (pyproject.toml): one the stack
starts to import must join that list, or its constructs would be checked as Any."""

from __future__ import annotations

import ast
import importlib.util
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECKED = [ROOT / "app.py", *sorted((ROOT / "infra").rglob("*.py"))]


def cdk_modules_imported(paths: list[Path], package_dir: Path) -> set[str]:
    """Every aws_cdk module the files import: `import aws_cdk.x`, `from aws_cdk.x import ...`,
    and `from aws_cdk import x` where x is a submodule (not a class such as Duration)."""
    found: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.split(".")[0] == "aws_cdk"}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.split(".")[0] != "aws_cdk":
                    continue
                found.add(node.module)
                if node.module == "aws_cdk":
                    found |= {
                        f"aws_cdk.{a.name}" for a in node.names if (package_dir / a.name).is_dir()
                    }
    return found


def followed_cdk_modules() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    return {
        module
        for override in config["overrides"]
        if override.get("follow_imports") == "normal"
        for module in override["module"]
    }


def cdk_package_dir() -> Path:
    spec = importlib.util.find_spec("aws_cdk")  # finds it without importing it
    assert spec is not None
    assert spec.origin is not None
    return Path(spec.origin).parent


def test_every_aws_cdk_module_the_stack_imports_is_followed_by_mypy() -> None:
    imported = cdk_modules_imported(CHECKED, cdk_package_dir())
    assert "aws_cdk.aws_lambda" in imported  # the scan sees the stack's imports at all
    assert imported - followed_cdk_modules() == set()


def test_the_check_names_a_module_missing_from_the_list(tmp_path: Path) -> None:
    stack = tmp_path / "stack.py"
    stack.write_text("from aws_cdk import Duration, aws_ec2\nimport aws_cdk.aws_s3 as s3\n")
    imported = cdk_modules_imported([stack], cdk_package_dir())
    assert imported - followed_cdk_modules() == {"aws_cdk.aws_ec2", "aws_cdk.aws_s3"}
