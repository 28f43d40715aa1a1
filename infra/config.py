"""Typed project context: the only place that reads cdk.json / `-c` values.

The CLI passes `-c key=value` overrides as strings, while cdk.json carries JSON types, so every
reader here accepts both spellings and rejects anything else with the key and value named:
a typo in a deploy command must stop synth, not deploy a table with a surprising setting.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from constructs import Node

from saga_index.names import PHASE_NAMES, PhaseName
from saga_index.shard import MAX_SHARD_COUNT, validate_shard_count

REPO_ROOT = Path(__file__).resolve().parent.parent
CDK_JSON_PATH = REPO_ROOT / "cdk.json"

TABLE_NAME_KEY = "tableName"
IMPORT_EXISTING_TABLE_KEY = "importExistingTable"
PHASE_KEY = "phase"
SHARD_COUNT_KEY = "shardCount"
# Optional: Powertools issue #7689 showed a release's public SSM parameter can be missing; this
# override lets a deploy name the layer version ARN directly instead of resolving it.
POWERTOOLS_LAYER_ARN_KEY = "powertoolsLayerArn"
# Optional: the EventBridge bus the sweeps publish to; absent, the stack creates one.
EVENT_BUS_NAME_KEY = "eventBusName"
# Optional pager subscriptions of the alarm topic (infra/observability/pager.py); absent, nobody
# subscribes.
PAGER_EMAIL_KEY = "pagerEmail"
PAGER_HTTPS_URL_KEY = "pagerHttpsUrl"
CONTEXT_KEYS = (
    TABLE_NAME_KEY,
    IMPORT_EXISTING_TABLE_KEY,
    PHASE_KEY,
    SHARD_COUNT_KEY,
    POWERTOOLS_LAYER_ARN_KEY,
    EVENT_BUS_NAME_KEY,
    PAGER_EMAIL_KEY,
    PAGER_HTTPS_URL_KEY,
)

# DynamoDB's own table-name rule; checking it here fails in seconds instead of mid-deploy.
_TABLE_NAME = re.compile(r"[A-Za-z0-9_.-]{3,255}")
_DECIMAL = re.compile(r"[0-9]+")
_LAYER_VERSION_ARN = re.compile(
    r"arn:aws[a-z-]*:lambda:[a-z0-9-]+:[0-9]{12}:layer:[A-Za-z0-9_-]+:[0-9]+"
)


class ConfigError(ValueError):
    """A context value is missing or invalid; the message names the key and the value."""


@dataclass(frozen=True)
class StackConfig:
    table_name: str
    import_existing_table: bool
    phase: PhaseName
    shard_count: int
    powertools_layer_arn: str | None = None
    event_bus_name: str | None = None
    pager_email: str | None = None
    pager_https_url: str | None = None

    @classmethod
    def from_context(cls, context: Mapping[str, Any]) -> StackConfig:
        """Parse the project keys of a context mapping (cdk.json "context" or node context)."""
        return cls(
            table_name=_table_name(_required(context, TABLE_NAME_KEY)),
            import_existing_table=_boolean(
                IMPORT_EXISTING_TABLE_KEY, _required(context, IMPORT_EXISTING_TABLE_KEY)
            ),
            phase=_phase(_required(context, PHASE_KEY)),
            shard_count=_shard_count(_required(context, SHARD_COUNT_KEY)),
            powertools_layer_arn=_layer_arn(context.get(POWERTOOLS_LAYER_ARN_KEY)),
            event_bus_name=_event_bus_name(context.get(EVENT_BUS_NAME_KEY)),
            pager_email=_optional_match(PAGER_EMAIL_KEY, context.get(PAGER_EMAIL_KEY)),
            pager_https_url=_optional_match(PAGER_HTTPS_URL_KEY, context.get(PAGER_HTTPS_URL_KEY)),
        )

    @classmethod
    def from_node(cls, node: Node) -> StackConfig:
        """Parse from a construct's node context, where CLI `-c` values have been merged in."""
        return cls.from_context({key: node.try_get_context(key) for key in CONTEXT_KEYS})


def load_cdk_json_context(path: Path = CDK_JSON_PATH) -> dict[str, Any]:
    """The "context" block of cdk.json.

    `cdk.App()` reads it only when launched by the CLI; `python app.py` and tests must pass it in
    themselves, or they would synthesise without the feature flags that deploy.
    """
    with path.open(encoding="utf-8") as handle:
        document = json.load(handle)
    context = document.get("context", {})
    if not isinstance(context, dict):
        raise ConfigError(f'{path}: "context" must be a JSON object, got {context!r}')
    return context


def _required(context: Mapping[str, Any], key: str) -> Any:
    value = context.get(key)
    if value is None:
        raise ConfigError(
            f"context key {key!r} is missing: set it in cdk.json or with -c {key}=..."
        )
    return value


def _table_name(value: Any) -> str:
    if not isinstance(value, str) or not _TABLE_NAME.fullmatch(value):
        raise ConfigError(
            f"context key {TABLE_NAME_KEY!r} must be a DynamoDB table name "
            f"(3-255 characters of A-Z a-z 0-9 _ . -), got {value!r}"
        )
    return value


def _boolean(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    # `-c key=false` arrives as the string "false"; bool("false") would be True.
    if value in ("true", "false"):
        return bool(value == "true")
    raise ConfigError(f"context key {key!r} must be true or false, got {value!r}")


def _phase(value: Any) -> PhaseName:
    if value not in PHASE_NAMES:
        raise ConfigError(
            f"context key {PHASE_KEY!r} must be one of {list(PHASE_NAMES)}, got {value!r}"
        )
    return cast(PhaseName, value)


def _shard_count(value: Any) -> int:
    number: object = value
    if isinstance(value, str) and _DECIMAL.fullmatch(value):
        number = int(value)
    try:
        # One validator for infra and the domain library, so they cannot disagree on N.
        return validate_shard_count(number)
    except ValueError as err:  # InvalidShardCountError, the only error it raises
        raise ConfigError(
            f"context key {SHARD_COUNT_KEY!r} must be a power of two from 1 to "
            f"{MAX_SHARD_COUNT}, got {value!r}"
        ) from err


def _layer_arn(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not _LAYER_VERSION_ARN.fullmatch(value):
        raise ConfigError(
            f"context key {POWERTOOLS_LAYER_ARN_KEY!r} must be a Lambda layer version ARN "
            f"(arn:aws:lambda:<region>:<account>:layer:<name>:<version>), got {value!r}"
        )
    return value


# EventBridge's event-bus name rule (a name, not an ARN: the bus is in this stack's account).
_EVENT_BUS_NAME = re.compile(r"[A-Za-z0-9._-]{1,256}")


def _event_bus_name(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not _EVENT_BUS_NAME.fullmatch(value):
        raise ConfigError(
            f"context key {EVENT_BUS_NAME_KEY!r} must be an EventBridge bus name "
            f"(1-256 characters of A-Z a-z 0-9 . _ -), got {value!r}"
        )
    return value


# Deliberately simple: SNS itself confirms the address; this only stops typos at synth time.
_OPTIONAL_FORMATS = {
    PAGER_EMAIL_KEY: (re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+"), "an e-mail address"),
    PAGER_HTTPS_URL_KEY: (re.compile(r"https://[^\s/]+\S*"), "an https:// URL"),
}


def _optional_match(key: str, value: Any) -> str | None:
    if value is None or value == "":
        return None
    pattern, what = _OPTIONAL_FORMATS[key]
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise ConfigError(f"context key {key!r} must be {what}, got {value!r}")
    return value
