#!/usr/bin/env python3
"""CDK entry point: cdk.json context in, RenewalSagaIndex template out. Nothing else."""

from __future__ import annotations

import sys
from pathlib import Path

# The stack takes its names (saga_index.names) and the shard rule from the domain library so infra
# and code cannot drift; the library lives under lambdas/ (the Lambda asset root), which is not on
# sys.path for `app.py`.
_LAMBDAS = str(Path(__file__).resolve().parent / "lambdas")
if _LAMBDAS not in sys.path:
    sys.path.insert(0, _LAMBDAS)

from infra.stack import build_app  # noqa: E402

if __name__ == "__main__":
    app, _stack = build_app()
    app.synth()
