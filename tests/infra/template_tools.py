"""Reading a synthesised CloudFormation template: intrinsics rendered as text, policies per role,
and EventBridge Scheduler cron expressions expanded into the minutes they fire."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from saga_index.index.names import CONTROL_PK

Template = Mapping[str, Any]
# The condition of every grant on the control record: only items of the control partition.
CONTROL_CONDITION = {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [CONTROL_PK]}}
CONTROL_READ = frozenset({"dynamodb:GetItem", "dynamodb:Query"})
CONTROL_WRITE = frozenset({"dynamodb:PutItem", "dynamodb:UpdateItem"})

WEEK_START = datetime(2026, 7, 6, tzinfo=UTC)  # a Monday, 00:00 UTC
MINUTES_PER_WEEK = 7 * 24 * 60


def resources(template: Template, resource_type: str) -> dict[str, dict[str, Any]]:
    return {
        logical_id: resource
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == resource_type
    }


def render(value: Any) -> Any:
    """Intrinsics as readable text: {"Ref": "X"} -> "${X}", GetAtt -> "${X.Arn}", Join joined."""
    if isinstance(value, Mapping) and len(value) == 1:
        ((key, arg),) = value.items()
        if key == "Ref":
            return "${" + str(arg) + "}"
        if key == "Fn::GetAtt":
            parts = arg if isinstance(arg, list) else str(arg).split(".", 1)
            return "${" + ".".join(str(p) for p in parts) + "}"
        if key == "Fn::Join":
            separator, items = arg
            return separator.join(str(render(item)) for item in items)
        if key == "Fn::Sub" and isinstance(arg, str):
            return arg
    if isinstance(value, list):
        return [render(v) for v in value]
    if isinstance(value, Mapping):
        return {k: render(v) for k, v in value.items()}
    return value


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def role_statements(template: Template, role_logical_id: str) -> list[dict[str, Any]]:
    """Every statement of every inline AWS::IAM::Policy attached to the role, rendered."""
    statements = []
    for policy in resources(template, "AWS::IAM::Policy").values():
        roles = [render(r) for r in policy["Properties"].get("Roles", [])]
        if "${" + role_logical_id + "}" in roles:
            statements.extend(render(policy["Properties"]["PolicyDocument"]["Statement"]))
    return statements


def function_statements(template: Template, handler: str, action: str) -> list[dict[str, Any]]:
    """The statements granting `action` to the role of the one function with `handler`."""
    [function_id] = [
        logical_id
        for logical_id, r in resources(template, "AWS::Lambda::Function").items()
        if r["Properties"]["Handler"] == handler
    ]
    role_id = str(render(template["Resources"][function_id]["Properties"]["Role"]))
    role_id = role_id.removeprefix("${").removesuffix(".Arn}")
    return [s for s in role_statements(template, role_id) if action in as_list(s["Action"])]


def grants(statements: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """(action, resource) pairs of the Allow statements; a statement with a Condition or a
    Deny would not fit this shape and fails loudly instead of being flattened."""
    pairs = set()
    for statement in statements:
        assert statement["Effect"] == "Allow", statement
        assert "Condition" not in statement, statement
        assert "NotResource" not in statement, statement
        assert "NotAction" not in statement, statement
        for action in as_list(statement["Action"]):
            for resource in as_list(statement["Resource"]):
                pairs.add((str(action), str(resource)))
    return pairs


def split_control(
    statements: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], set[tuple[str, str]]]:
    """(the statements that are not control-record grants, the (action, resource) pairs of those
    that are). A control grant is an Allow with exactly CONTROL_CONDITION."""
    rest: list[dict[str, Any]] = []
    control: set[tuple[str, str]] = set()
    for statement in statements:
        if statement.get("Condition") == CONTROL_CONDITION and statement["Effect"] == "Allow":
            for action in as_list(statement["Action"]):
                for resource in as_list(statement["Resource"]):
                    control.add((str(action), str(resource)))
        else:
            rest.append(statement)
    return rest, control


# ---- EventBridge Scheduler cron ----------------------------------------------------------------

_CRON = re.compile(r"cron\((?P<fields>[^)]*)\)")
_DAYS = {"SUN": 1, "MON": 2, "TUE": 3, "WED": 4, "THU": 5, "FRI": 6, "SAT": 7}


class CronError(ValueError):
    pass


def _field(spec: str, low: int, high: int, names: Mapping[str, int] | None = None) -> set[int]:
    """One cron field: *, ?, n, a-b, a,b, */s, a/s, a-b/s (names allowed for days of week)."""
    values: set[int] = set()

    def number(text: str) -> int:
        if names and text.upper() in names:
            return names[text.upper()]
        if not text.isdigit():
            raise CronError(f"cannot read {text!r} in cron field {spec!r}")
        return int(text)

    for part in spec.split(","):
        step = 1
        stepped = "/" in part
        if stepped:
            part, step_text = part.split("/", 1)
            step = number(step_text)
            if step <= 0:
                raise CronError(f"step must be positive in {spec!r}")
        if part in ("*", "?"):
            start, end = low, high
        elif "-" in part:
            a, b = part.split("-", 1)
            start, end = number(a), number(b)
        else:
            start = number(part)
            end = high if stepped else start  # "a/s": from a to the top, every s
        if not low <= start <= end <= high:
            raise CronError(f"{spec!r} is outside {low}-{high}")
        values.update(range(start, end + 1, step))
    return values


def firing_minutes(expression: str, start: datetime = WEEK_START) -> set[int]:
    """Minutes (offsets from `start`) of one full week at which a Scheduler cron fires (UTC).

    Only cron() is accepted: rate() schedules fire relative to their creation time, so no
    stagger can be guaranteed for them.
    """
    match = _CRON.fullmatch(expression.strip())
    if not match:
        raise CronError(f"{expression!r} is not a cron() expression; rate() cannot be staggered")
    fields = match.group("fields").split()
    if len(fields) != 6:
        raise CronError(f"{expression!r}: Scheduler cron has 6 fields, got {len(fields)}")
    minute, hour, dom, month, dow, year = fields
    minutes = _field(minute, 0, 59)
    hours = _field(hour, 0, 23)
    days_of_month = _field(dom, 1, 31)
    months = _field(month, 1, 12)
    days_of_week = _field(dow, 1, 7, _DAYS)
    if year not in ("*", "?"):
        raise CronError(f"{expression!r}: a year field would make the week check meaningless")
    if dom != "?" and dow != "?":
        raise CronError(f"{expression!r}: one of day-of-month and day-of-week must be '?'")
    fired = set()
    for offset in range(MINUTES_PER_WEEK):
        moment = start + timedelta(minutes=offset)
        cron_dow = moment.isoweekday() % 7 + 1  # cron: 1 = Sunday
        if (
            moment.minute in minutes
            and moment.hour in hours
            and moment.month in months
            and moment.day in days_of_month
            and cron_dow in days_of_week
        ):
            fired.add(offset)
    return fired


def coincidences(expressions: Mapping[str, str]) -> Iterator[tuple[str, str, list[str]]]:
    """(job, job, first few shared minutes as timestamps) for every pair that ever coincides."""
    fired = {job: firing_minutes(expression) for job, expression in expressions.items()}
    jobs = sorted(fired)
    for i, a in enumerate(jobs):
        for b in jobs[i + 1 :]:
            shared = sorted(fired[a] & fired[b])
            if shared:
                yield (
                    a,
                    b,
                    [(WEEK_START + timedelta(minutes=m)).strftime("%a %H:%M") for m in shared[:3]],
                )
