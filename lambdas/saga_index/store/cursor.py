"""The cursor of a paged enumeration (docs/data-model.md, "Pages and cursors"): where the next
page of "all sagas" / "all open sagas" starts, as an opaque string a list page hands back.

One format for every language (the TypeScript package writes and reads the same strings;
docs/cursor-vectors.json holds both to it): base64url, without padding, of the UTF-8 JSON

    {"v":1,"of":"all"|"open","plan":FINGERPRINT,"at":GSI4PK,"after":null|{"GSI4PK":..,
     "GSI4SK":..,"PK":..,"SK":..}}

with the keys in that order and no spaces. `at` is the partition the next page starts in (the
partitions before it, in the plan's order, are done) and `after` the last key read in it (the
Query's ExclusiveStartKey), null when none of it was read yet. `plan` is the fingerprint of the
key plan the cursor was taken under: a cursor is only ever resumed under the same stages, so a
switch of layout (a new N, the end of a move) refuses it instead of skipping or repeating rows.
On the sparse open-saga index the "GSI4PK" slot holds the value of its partition key,
OpenSagaPK (the plan's "RenewalSagaOpen#<n>" keys tell the two indexes apart; the repository
renames the attribute in the Query's keys), so one format serves both.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from saga_index.index import InvalidInputError, SagaIndexError

CURSOR_VERSION = 1
# A GSI Query's LastEvaluatedKey: the index key and the table key, all strings in this table.
POSITION_ATTRIBUTES = ("GSI4PK", "GSI4SK", "PK", "SK")
# The longest cursor a position can make (GSI4SK <= 1 KB, PK and SK <= 2 KB and 1 KB, every
# character escaped at worst) stays far below this; anything longer is not one of ours.
MAX_CURSOR_CHARS = 32_768
_BASE64URL = re.compile(r"[A-Za-z0-9_-]*")

Enumeration = Literal["all", "open"]


class InvalidCursorError(InvalidInputError):
    """A cursor that does not parse as one this library wrote, or one of the other enumeration
    (an "open" cursor given to "all"): refused before any request."""


class CursorLayoutChangedError(SagaIndexError):
    """A cursor taken under another key plan (another layout, another N, the stages of a move):
    resuming it could skip or repeat sagas, so it is refused. Start the enumeration again
    without a cursor."""


class PagingDuringMoveError(SagaIndexError):
    """Paging is refused while rows move between layouts (two enumeration stages): a cursor
    cannot remember which rows an earlier page returned, so a row re-stamped between two pages
    would be returned twice. Use the full enumeration (get_all_sagas / get_all_open_sagas)."""


@dataclass(frozen=True)
class Position:
    """Where a paged enumeration resumes: partition `at`, after the key `after` (None: from
    the partition's first row)."""

    at: str
    after: Mapping[str, str] | None = None


def plan_fingerprint(stages: Sequence[Sequence[str]]) -> str:
    """16 hex digits of SHA-256 over the stages as compact JSON (`[["RenewalSaga#0",...]]`):
    the same string in every language for the same stages."""
    document = json.dumps([list(stage) for stage in stages], separators=(",", ":"))
    return hashlib.sha256(document.encode("utf-8")).hexdigest()[:16]


def encode_cursor(of: Enumeration, plan: str, position: Position) -> str:
    after = (
        None
        if position.after is None
        else {name: position.after[name] for name in POSITION_ATTRIBUTES}
    )
    document = {"v": CURSOR_VERSION, "of": of, "plan": plan, "at": position.at, "after": after}
    text = json.dumps(document, separators=(",", ":"), ensure_ascii=False)
    return base64.urlsafe_b64encode(text.encode("utf-8")).decode("ascii").rstrip("=")


@dataclass(frozen=True)
class Cursor:
    """A parsed cursor: which enumeration, the plan's fingerprint, and where to resume."""

    of: Enumeration
    plan: str
    position: Position


def decode_cursor(cursor: object) -> Cursor:
    """The cursor a string holds, or InvalidCursorError naming what is wrong with it."""
    if not isinstance(cursor, str):
        raise InvalidCursorError(f"a cursor is a string, got {type(cursor).__name__}")
    if not cursor or len(cursor) > MAX_CURSOR_CHARS or not _BASE64URL.fullmatch(cursor):
        raise InvalidCursorError(
            "not a cursor of this library: expected a non-empty base64url string of at most "
            f"{MAX_CURSOR_CHARS} characters (pass the `cursor` of the previous page as given)"
        )
    if len(cursor) % 4 == 1:
        raise InvalidCursorError("not a cursor of this library: truncated base64url")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        document = json.loads(raw.decode("utf-8"))
    except (binascii.Error, UnicodeDecodeError, ValueError) as err:
        raise InvalidCursorError(f"not a cursor of this library: {err}") from err
    return _parse(document)


def _parse(document: Any) -> Cursor:
    if not isinstance(document, dict):
        raise InvalidCursorError("not a cursor of this library: not a JSON object")
    version = document.get("v")
    if type(version) is not int or version != CURSOR_VERSION:
        raise InvalidCursorError(
            f"cursor version {version!r} is not {CURSOR_VERSION}: "
            "a cursor from another version of the library"
        )
    if set(document) != {"v", "of", "plan", "at", "after"}:
        raise InvalidCursorError(f"cursor fields {sorted(document)} are not v, of, plan, at, after")
    of, plan, at, after = document["of"], document["plan"], document["at"], document["after"]
    if of not in ("all", "open"):
        raise InvalidCursorError(f"cursor enumeration {of!r} is neither 'all' nor 'open'")
    if not isinstance(plan, str) or not re.fullmatch(r"[0-9a-f]{16}", plan):
        raise InvalidCursorError(f"cursor plan {plan!r} is not a fingerprint (16 hex digits)")
    if not isinstance(at, str) or not at:
        raise InvalidCursorError(f"cursor partition {at!r} is not a GSI4PK")
    if after is not None:
        if not isinstance(after, dict) or set(after) != set(POSITION_ATTRIBUTES):
            raise InvalidCursorError(
                f"cursor position must name exactly {', '.join(POSITION_ATTRIBUTES)}"
            )
        if not all(isinstance(after[name], str) for name in POSITION_ATTRIBUTES):
            raise InvalidCursorError("cursor position values must be strings")
        if after["GSI4PK"] != at:
            raise InvalidCursorError(
                f"cursor position is under {after['GSI4PK']!r}, not its partition {at!r}"
            )
    return Cursor(of=of, plan=plan, position=Position(at=at, after=after))


def position_of(last_evaluated_key: Mapping[str, Any]) -> dict[str, str]:
    """A Query's LastEvaluatedKey (DynamoDB JSON) as a cursor position."""
    position: dict[str, str] = {}
    for name in POSITION_ATTRIBUTES:
        value = last_evaluated_key.get(name)
        if not isinstance(value, dict) or not isinstance(value.get("S"), str):
            raise ValueError(f"LastEvaluatedKey {name} is not a string: {value!r}")
        position[name] = value["S"]
    return position


def start_key(position: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """A cursor position as a Query's ExclusiveStartKey (DynamoDB JSON)."""
    return {name: {"S": position[name]} for name in POSITION_ATTRIBUTES}
