"""Generate docs/cursor-vectors.json, the cross-language vectors of the paging cursor.

    python -m devkit.cursor_vectors            rewrite the file
    python -m devkit.cursor_vectors --check    exit 1 if the file is not what this would write

What the Python library does (saga_index.store.cursor and paging): the fingerprint of a key plan's
stages, cursors and the fields each holds (written byte for byte alike by every language),
cursors every reader refuses, and whole paged enumerations of a small table: the table's items,
each page's cursor in, its rows and its cursor out. The TypeScript package
(clients/typescript/test/paging.test.ts) resumes the Python pages from their cursors and must get
the same rows and the same next cursor, so a cursor one language made is accepted by the other.

Top-level keys: fingerprints, cursors, invalid, pages.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from devkit.contract_states import STATES, dynamo_json
from devkit.vectors_file import vectors_main
from saga_index.index import OPEN_STATES, keys
from saga_index.layout_change.record import Routing, routing_for, state_item
from saga_index.store import Position, encode_cursor, plan_fingerprint, read_page
from saga_index.store.dynamo import deserialize, serialize

DEFAULT_PATH = Path(__file__).resolve().parent.parent / "docs" / "cursor-vectors.json"

DESCRIPTION = (
    "Vectors of the paging cursor (docs/data-model.md, 'Pages and cursors'), generated from the "
    "Python code by `python -m devkit.cursor_vectors`; do not edit by hand. A cursor is "
    "base64url (no padding) of the UTF-8 compact JSON "
    '{"v":1,"of":"all"|"open","plan":FINGERPRINT,"at":GSI4PK,"after":null|{"GSI4PK","GSI4SK",'
    '"PK","SK"}}, keys in that order; the fingerprint is the first 16 hex digits of SHA-256 of '
    "the stages as compact JSON. Items are DynamoDB JSON."
)

_PLANS: tuple[tuple[str, Routing], ...] = (
    ("legacy", Routing.for_phase("legacy", 16)),
    ("sharded(1)", Routing.for_phase("sharded", 1)),
    ("sharded(4)", Routing.for_phase("sharded", 4)),
    ("sharded(16)", Routing.for_phase("sharded", 16)),
    ("sharded(32)", Routing.for_phase("sharded", 32)),
    ("migrating(16): two stages", Routing.for_phase("migrating", 16)),
    ("rolling-back(16): two stages", Routing.for_phase("rolling-back", 16)),
)


def fingerprint_cases() -> list[dict[str, Any]]:
    cases = []
    for name, routing in _PLANS:
        stages = [list(stage) for stage in routing.enumeration_stages()]
        cases.append({"name": name, "stages": stages, "fingerprint": plan_fingerprint(stages)})
    return cases


_S16 = plan_fingerprint(Routing.for_phase("sharded", 16).enumeration_stages())
_AFTER = {
    "GSI4PK": "RenewalSaga#14",
    "GSI4SK": "p-1#2026-07-10T12:00:00.000Z",
    "PK": "RSAGA#s-1",
    "SK": "META",
}
# Characters JSON escapes (quote, backslash, a control character) and text beyond ASCII, in
# the two-byte, three-byte and four-byte (astral) forms of UTF-8.
_ODD_PERSON = 'Jos\u00e9 "q" \\ \n \u20ac \U0001f600'
_CURSORS: tuple[tuple[str, str, str, Position], ...] = (
    ("first page of sharded(16), nothing read yet", "all", _S16, Position("RenewalSaga#0")),
    ("open sagas, mid-partition", "open", _S16, Position("RenewalSaga#14", _AFTER)),
    (
        "a personId with escaped and non-ASCII characters",
        "all",
        _S16,
        Position(
            "RenewalSaga#3",
            {**_AFTER, "GSI4PK": "RenewalSaga#3", "GSI4SK": f"{_ODD_PERSON}#2026-01-01"},
        ),
    ),
    (
        "legacy",
        "all",
        plan_fingerprint(Routing.for_phase("legacy", 16).enumeration_stages()),
        Position("RenewalSaga", {**_AFTER, "GSI4PK": "RenewalSaga"}),
    ),
)


def cursor_cases() -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "of": of,
            "plan": plan,
            "at": position.at,
            "after": None if position.after is None else dict(position.after),
            "cursor": encode_cursor(of, plan, position),  # type: ignore[arg-type]
        }
        for name, of, plan, position in _CURSORS
    ]


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode("utf-8")).decode("ascii").rstrip("=")


_FULL = '"v":1,"of":"all","plan":"' + _S16 + '","at":"RenewalSaga#3"'
INVALID: tuple[tuple[str, str], ...] = (
    ("empty", ""),
    ("not base64url", "not a cursor!"),
    ("standard base64 padding", _b64("{}") + "=="),
    ("truncated base64url", "A"),
    ("not UTF-8", _b64("x") + "_w"),
    ("not JSON", _b64("cursor")),
    ("a JSON array", _b64("[]")),
    ("an empty object", _b64("{}")),
    ("another version", _b64("{" + _FULL.replace('"v":1', '"v":2') + ',"after":null}')),
    ("a missing field", _b64("{" + _FULL + "}")),
    ("an extra field", _b64("{" + _FULL + ',"after":null,"x":1}')),
    ("another enumeration", _b64("{" + _FULL.replace('"all"', '"closed"') + ',"after":null}')),
    ("a plan that is no fingerprint", _b64("{" + _FULL.replace(_S16, "xyz") + ',"after":null}')),
    ("an empty partition", _b64("{" + _FULL.replace("RenewalSaga#3", "") + ',"after":null}')),
    (
        "a position under another partition",
        _b64("{" + _FULL + ',"after":{"GSI4PK":"RenewalSaga#4","GSI4SK":"a","PK":"b","SK":"c"}}'),
    ),
    (
        "a position missing the sort key",
        _b64("{" + _FULL + ',"after":{"GSI4PK":"RenewalSaga#3","PK":"b","SK":"c"}}'),
    ),
    (
        "a position value that is not a string",
        _b64("{" + _FULL + ',"after":{"GSI4PK":"RenewalSaga#3","GSI4SK":1,"PK":"b","SK":"c"}}'),
    ),
)


# ---- whole enumerations, paged ----------------------------------------------------------------


def _fetch(items: Sequence[Mapping[str, Any]], open_only: bool) -> Any:
    """A Query of a GSI4 partition as DynamoDB answers it: rows in (GSI4SK, PK, SK) order after
    ExclusiveStartKey, at most Limit evaluated, the open filter after the Limit, and the key of
    the last row evaluated as LastEvaluatedKey when more rows follow."""

    def order(row: Mapping[str, Any]) -> tuple[str, str, str]:
        return (row["GSI4SK"], row["PK"], row["SK"])

    def fetch(
        partition: str, start: Mapping[str, Any] | None, limit: int
    ) -> tuple[list[dict[str, Any]], Mapping[str, Any] | None]:
        rows = sorted((dict(i) for i in items if i.get("GSI4PK") == partition), key=order)
        if start is not None:
            after = order(deserialize(dict(start)))
            rows = [r for r in rows if order(r) > after]
        evaluated, more = rows[:limit], len(rows) > limit
        returned = [r for r in evaluated if not open_only or r["state"] in OPEN_STATES]
        if not more or not evaluated:
            return returned, None
        last = evaluated[-1]
        return returned, serialize({k: last[k] for k in ("GSI4PK", "GSI4SK", "PK", "SK")})

    return fetch


def _saga(n: int, person: str, state: str, shard_count: int) -> dict[str, Any]:
    opened_at = "2026-07-10T12:00:00.000Z"
    return {
        **keys.saga_table_key(f"s-{n:02d}"),
        "entityType": keys.ENTITY_TYPE,
        "sagaId": f"s-{n:02d}",
        "personId": person,
        "state": state,
        "openedAt": opened_at,
        "GSI4PK": keys.shard_gsi4pk_for_person(person, shard_count),
        "GSI4SK": f"{person}#{opened_at}",
    }


def page_cases() -> list[dict[str, Any]]:
    state = STATES[2][1]()  # sharded(16)
    stages = routing_for(state, state.transition.effective_at if state.transition else None)
    persons = ("p-1", "alice", "Jos\u00e9", "tenant#42", "bob", "\U0001f600")
    states = ("OPENED", "SIGNED", "NEGOTIATING", "EXPIRED")
    items = [_saga(n, persons[n % 6], states[n % 4], 16) for n in range(14)]
    cases = []
    for of, limit in (("all", 3), ("open", 2)):
        pages = []
        cursor: str | None = None
        while True:
            page = read_page(
                stages.enumeration_stages(),
                of,  # type: ignore[arg-type]
                limit=limit,
                cursor=cursor,
                fetch=_fetch(items, of == "open"),
            )
            pages.append(
                {"cursor": cursor, "sagaIds": [r["sagaId"] for r in page.rows], "next": page.cursor}
            )
            if page.cursor is None:
                break
            cursor = page.cursor
        cases.append(
            {
                "name": f"sharded(16), the {of} sagas, {limit} a page",
                "stateItem": dynamo_json(state_item(state)),
                "items": [dynamo_json(i) for i in items],
                "of": of,
                "limit": limit,
                "pages": pages,
            }
        )
    return cases


def build() -> dict[str, Any]:
    return {
        "description": DESCRIPTION,
        "fingerprints": fingerprint_cases(),
        "cursors": cursor_cases(),
        "invalid": [{"name": name, "cursor": cursor} for name, cursor in INVALID],
        "pages": page_cases(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    return vectors_main(
        argv,
        module="devkit.cursor_vectors",
        description=__doc__,
        default_path=DEFAULT_PATH,
        build=build,
        summary=lambda document: f"{len(document['cursors'])} cursors",
    )


if __name__ == "__main__":
    raise SystemExit(main())
