"""stdout is the data channel: one JSON value per line there (`emit`), and each command's --json
that asks for it. Logs, warnings and progress go to stderr."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from saga_index.store.dynamo.codec import to_plain_json

# Every command's --json: stdout then carries one JSON object, the same data as the human report.
json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object on stdout instead."
)


def emit(obj: Any) -> None:
    """One JSON value per line on stdout: the data channel, nothing else goes there."""
    sys.stdout.write(json.dumps(to_plain_json(obj), ensure_ascii=False, sort_keys=True) + "\n")
