"""The `saga-index` console script: the CLI, or, when the package was installed without its
`cli` extra (a service's `pip install renewal-saga-index`), a message saying how to get it
instead of a traceback."""

from __future__ import annotations

import importlib.util
import sys

# The CLI's own libraries, which the library alone does not install.
CLI_MODULES = ("click", "rich")


def main() -> None:
    missing = [name for name in CLI_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        sys.stderr.write(
            f"saga-index: the operator CLI needs the package's `cli` extra ({', '.join(missing)} "
            "not installed). Install it as a tool: pipx install '.[cli]' (or "
            "uv tool install '.[cli]') from a checkout, or pip install "
            "'renewal-saga-index[cli]' into this environment\n"
        )
        raise SystemExit(1)
    from saga_index_cli.main import main as run

    run()
