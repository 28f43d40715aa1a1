#!/usr/bin/env python3
"""CDK entry point: cdk.json context (and pager.json) in, RenewalSagaIndex template out."""

from __future__ import annotations

import sys
from pathlib import Path

# The stack takes its names (index.names) and the shard rule from the domain library so infra
# and code cannot drift; the library lives under lambdas/ (the Lambda asset root), which is not on
# sys.path for `app.py`.
_LAMBDAS = str(Path(__file__).resolve().parent / "lambdas")
if _LAMBDAS not in sys.path:
    sys.path.insert(0, _LAMBDAS)

from infra.config import ConfigError  # noqa: E402
from infra.stack import build_app  # noqa: E402

if __name__ == "__main__":
    try:
        app, _stack = build_app()
    except ConfigError as err:
        # The message names the key, the value and what to do; a traceback would bury it.
        sys.exit(f"synth refused: {err}")
    app.synth()
