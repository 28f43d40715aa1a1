"""Typed project configuration: the only place that reads cdk.json / `-c` values and pager.json.

The CLI passes `-c key=value` overrides as strings, while cdk.json carries JSON types, so every
reader here accepts both spellings and rejects anything else with the key and value named:
a typo in a deploy command must stop synth, not deploy a table with a surprising setting.

What the configuration never holds is the migration state: the phase and N live in the control
record in the table (docs/control-contract.md), so a deploy of the same code is the same
whatever the migration state. The keys that used to carry them are RETIRED: a deploy line that
still passes one stops synth and says where the value lives now, instead of being ignored.
The pager's subscriptions come from the committed pager.json only, so no deploy line can drop
them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from constructs import Node

REPO_ROOT = Path(__file__).resolve().parent.parent
CDK_JSON_PATH = REPO_ROOT / "cdk.json"
PAGER_JSON_PATH = REPO_ROOT / "pager.json"

TABLE_NAME_KEY = "tableName"
IMPORT_EXISTING_TABLE_KEY = "importExistingTable"
# Optional: Powertools issue #7689 showed a release's public SSM parameter can be missing; this
# override lets a deploy name the layer version ARN directly instead of resolving it.
POWERTOOLS_LAYER_ARN_KEY = "powertoolsLayerArn"
# Optional: the layer version ARN of AWS's managed ADOT layer (AWSOpenTelemetryDistroPython) in
# the deploy's region; its wrapper traces every function (docs/observability.md, "Tracing").
# Absent, the functions keep Lambda's own active-tracing segments and synth warns.
OTEL_LAYER_ARN_KEY = "otelLayerArn"
# Optional: the EventBridge bus the sweeps publish to; absent, the stack creates one.
EVENT_BUS_NAME_KEY = "eventBusName"
# Optional: the organisation's existing SNS topic every alarm publishes to; absent, the stack
# creates its own topic, subscribed as pager.json says (infra/observability/pager.py).
ALARM_TOPIC_ARN_KEY = "alarmTopicArn"
# Optional: where the alarms' descriptions and the dashboard link the on-call guide (the docs
# folder, observability.md inside it); absent, the repository's own docs path on GitHub.
RUNBOOK_BASE_URL_KEY = "runbookBaseUrl"
DEFAULT_RUNBOOK_BASE_URL = "https://github.com/propflow/renewal-saga-index/blob/main/docs"
# Every alarm description carries this URL plus an anchor, a command and a query name within
# CloudWatch's 1,024 characters (tests/infra/test_alarms_template.py checks the longest one).
MAX_RUNBOOK_BASE_URL_CHARS = 200
CONTEXT_KEYS = (
    TABLE_NAME_KEY,
    IMPORT_EXISTING_TABLE_KEY,
    POWERTOOLS_LAYER_ARN_KEY,
    EVENT_BUS_NAME_KEY,
    ALARM_TOPIC_ARN_KEY,
    RUNBOOK_BASE_URL_KEY,
    OTEL_LAYER_ARN_KEY,
)

# Keys a deploy line may still carry from before, and where their value lives now.
_SET_PHASE = (
    "the migration phase and the shard count now live in the control record in the table, "
    "not in the deploy: change them with `saga-index phase set PHASE --reason TEXT "
    "[--shards N]` and read them with `saga-index phase show` (docs/runbook.md)"
)
_EDIT_PAGER_JSON = (
    "pager subscriptions now come from the committed pager.json only, so that no deploy "
    "command can drop them: add the address there and commit it (docs/deploy.md)"
)
RETIRED_KEYS: dict[str, str] = {
    "phase": _SET_PHASE,
    "shardCount": _SET_PHASE,
    "pagerEmail": _EDIT_PAGER_JSON,
    "pagerHttpsUrl": _EDIT_PAGER_JSON,
}

# pager.json: {"email": [addresses], "https": [URLs]}; "$comment" is ignored.
PAGER_EMAIL_FIELD = "email"
PAGER_HTTPS_FIELD = "https"
_PAGER_COMMENT_FIELD = "$comment"

# DynamoDB's own table-name rule; checking it here fails in seconds instead of mid-deploy.
_TABLE_NAME = re.compile(r"[A-Za-z0-9_.-]{3,255}")
_LAYER_VERSION_ARN = re.compile(
    r"arn:aws[a-z-]*:lambda:[a-z0-9-]+:[0-9]{12}:layer:[A-Za-z0-9_-]+:[0-9]+"
)
# A standard topic: CloudWatch alarm actions cannot publish to a FIFO topic (".fifo").
_SNS_TOPIC_ARN = re.compile(r"arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}")


class ConfigError(ValueError):
    """A context value is missing or invalid; the message names the key and the value."""


@dataclass(frozen=True)
class PagerConfig:
    """The subscriptions of the stack's own pager topic, as committed in pager.json."""

    emails: tuple[str, ...] = ()
    https_urls: tuple[str, ...] = ()

    @property
    def subscribes_anyone(self) -> bool:
        return bool(self.emails or self.https_urls)

    @classmethod
    def from_document(cls, document: Any, source: str = "pager.json") -> PagerConfig:
        if not isinstance(document, dict):
            raise ConfigError(f"{source}: must be a JSON object, got {document!r}")
        known = {PAGER_EMAIL_FIELD, PAGER_HTTPS_FIELD, _PAGER_COMMENT_FIELD}
        unknown = sorted(set(document) - known)
        if unknown:
            raise ConfigError(
                f"{source}: unknown field(s) {unknown}; expected {PAGER_EMAIL_FIELD!r} and "
                f"{PAGER_HTTPS_FIELD!r} (lists)"
            )
        return cls(
            emails=_pager_list(source, PAGER_EMAIL_FIELD, document.get(PAGER_EMAIL_FIELD, [])),
            https_urls=_pager_list(source, PAGER_HTTPS_FIELD, document.get(PAGER_HTTPS_FIELD, [])),
        )


@dataclass(frozen=True)
class StackConfig:
    table_name: str
    import_existing_table: bool
    powertools_layer_arn: str | None = None
    event_bus_name: str | None = None
    alarm_topic_arn: str | None = None
    pager: PagerConfig = PagerConfig()
    runbook_base_url: str = DEFAULT_RUNBOOK_BASE_URL
    otel_layer_arn: str | None = None

    @classmethod
    def from_context(
        cls, context: Mapping[str, Any], pager: PagerConfig | None = None
    ) -> StackConfig:
        """Parse the project keys of a context mapping (cdk.json "context" or node context)
        and the pager's subscriptions (pager.json; none when not given)."""
        for key, where_now in RETIRED_KEYS.items():
            if context.get(key) is not None:
                raise ConfigError(
                    f"context key {key!r} is no longer read (got {context[key]!r}): {where_now}. "
                    f"Remove -c {key}=... from the command (and {key!r} from cdk.json)."
                )
        alarm_topic_arn = _alarm_topic_arn(context.get(ALARM_TOPIC_ARN_KEY))
        pager = pager or PagerConfig()
        if alarm_topic_arn is not None and pager.subscribes_anyone:
            raise ConfigError(
                f"context key {ALARM_TOPIC_ARN_KEY!r} sends the alarms to an existing topic "
                f"({alarm_topic_arn}), whose subscriptions are managed where it lives, but "
                "pager.json also lists subscriptions for the stack's own topic, which is then "
                "not created: empty pager.json or remove alarmTopicArn"
            )
        return cls(
            table_name=_table_name(_required(context, TABLE_NAME_KEY)),
            import_existing_table=_boolean(
                IMPORT_EXISTING_TABLE_KEY, _required(context, IMPORT_EXISTING_TABLE_KEY)
            ),
            powertools_layer_arn=_layer_arn(context.get(POWERTOOLS_LAYER_ARN_KEY)),
            event_bus_name=_event_bus_name(context.get(EVENT_BUS_NAME_KEY)),
            alarm_topic_arn=alarm_topic_arn,
            pager=pager,
            runbook_base_url=_runbook_base_url(context.get(RUNBOOK_BASE_URL_KEY)),
            otel_layer_arn=_layer_arn(context.get(OTEL_LAYER_ARN_KEY), OTEL_LAYER_ARN_KEY),
        )

    @classmethod
    def from_node(cls, node: Node, pager: PagerConfig | None = None) -> StackConfig:
        """Parse from a construct's node context, where CLI `-c` values have been merged in."""
        keys = (*CONTEXT_KEYS, *RETIRED_KEYS)
        return cls.from_context({key: node.try_get_context(key) for key in keys}, pager)


def load_pager_config(path: Path = PAGER_JSON_PATH) -> PagerConfig:
    """The committed pager.json. A missing file is an error, not "nobody is paged": the file is
    part of the repository, so its absence means a broken checkout."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as err:
        raise ConfigError(
            f"{path} is missing: it lists the pager subscriptions (commit it, even with empty "
            'lists: {"email": [], "https": []})'
        ) from err
    try:
        document = json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path}: not valid JSON: {err}") from err
    return PagerConfig.from_document(document, str(path))


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


def _layer_arn(value: Any, key: str = POWERTOOLS_LAYER_ARN_KEY) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not _LAYER_VERSION_ARN.fullmatch(value):
        raise ConfigError(
            f"context key {key!r} must be a Lambda layer version ARN "
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


def _alarm_topic_arn(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not _SNS_TOPIC_ARN.fullmatch(value):
        raise ConfigError(
            f"context key {ALARM_TOPIC_ARN_KEY!r} must be the ARN of a standard SNS topic "
            f"(arn:aws:sns:<region>:<account>:<name>), got {value!r}"
        )
    return value


# An https URL with a host and no query or fragment: pages are appended to it ("/<page>#...").
_RUNBOOK_BASE_URL = re.compile(
    r"https://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%!$&'()*+,;=:@-]+)*"
)


def _runbook_base_url(value: Any) -> str:
    if value is None or value == "":
        return DEFAULT_RUNBOOK_BASE_URL
    # One trailing slash is accepted and dropped, so "<base>/observability.md" never has "//".
    url = value[:-1] if isinstance(value, str) and value.endswith("/") else value
    if (
        not isinstance(url, str)
        or len(url) > MAX_RUNBOOK_BASE_URL_CHARS
        or not _RUNBOOK_BASE_URL.fullmatch(url)
    ):
        raise ConfigError(
            f"context key {RUNBOOK_BASE_URL_KEY!r} must be an https:// URL of the folder that "
            "holds observability.md, with no query, fragment or spaces and at most "
            f"{MAX_RUNBOOK_BASE_URL_CHARS} characters (e.g. {DEFAULT_RUNBOOK_BASE_URL}), "
            f"got {value!r}"
        )
    return url


# Deliberately simple: SNS itself confirms the address; this only stops typos at synth time.
_PAGER_FORMATS = {
    PAGER_EMAIL_FIELD: (re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+"), "an e-mail address"),
    PAGER_HTTPS_FIELD: (re.compile(r"https://[^\s/]+\S*"), "an https:// URL"),
}


def _pager_list(source: str, field: str, value: Any) -> tuple[str, ...]:
    pattern, what = _PAGER_FORMATS[field]
    if not isinstance(value, list):
        raise ConfigError(f"{source}: {field!r} must be a list of {what}s, got {value!r}")
    for entry in value:
        if not isinstance(entry, str) or not pattern.fullmatch(entry):
            raise ConfigError(f"{source}: every {field!r} entry must be {what}, got {entry!r}")
    if len(set(value)) != len(value):
        raise ConfigError(f"{source}: {field!r} lists an entry twice: {value!r}")
    return tuple(value)
