"""Domain library for the sharded renewal-saga index (ADR-0085).

Pure where it can be; every AWS client is injected by the caller. Nothing here reads os.environ.

What another Python service uses is exported here (README, "Python services"): `SagaIndex`,
which follows the control record and reads and keys the index the way it says, the shard
contract, and the errors a caller can tell apart. Everything else is the library's own.

The names load on first use (PEP 562): every module of the library is imported through this
package, and infra and the key scheme's users (`saga_index.index.names`) must not pay for boto3
and the record machinery that SagaIndex needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from saga_index.api import KeyUpdate, PersonKeys, SagaIndex, WriteKeys
    from saga_index.index import (
        DEFAULT_SHARD_COUNT,
        INDEX_NAME,
        MAX_SHARD_COUNT,
        OPEN_STATES,
        EnumerationError,
        InvalidInputError,
        InvalidKeyError,
        InvalidPersonIdError,
        SagaIndexError,
        shard,
        validate_person_id,
    )
    from saga_index.layout_change.record import (
        ControlItemInvalidError,
        ControlRecordInvalidError,
        ControlRecordUnavailableError,
        ControlState,
    )
    from saga_index.store import (
        CursorLayoutChangedError,
        InvalidCursorError,
        PagingDuringMoveError,
        SagaPage,
    )

__all__ = [
    "DEFAULT_SHARD_COUNT",
    "INDEX_NAME",
    "MAX_SHARD_COUNT",
    "OPEN_STATES",
    "ControlItemInvalidError",
    "ControlRecordInvalidError",
    "ControlRecordUnavailableError",
    "ControlState",
    "CursorLayoutChangedError",
    "EnumerationError",
    "InvalidCursorError",
    "InvalidInputError",
    "InvalidKeyError",
    "InvalidPersonIdError",
    "KeyUpdate",
    "PagingDuringMoveError",
    "PersonKeys",
    "SagaIndex",
    "SagaIndexError",
    "SagaPage",
    "WriteKeys",
    "shard",
    "validate_person_id",
]

# Where each name of __all__ lives: `from saga_index import X` imports that module then.
_HOMES = {
    "DEFAULT_SHARD_COUNT": "saga_index.index",
    "INDEX_NAME": "saga_index.index",
    "MAX_SHARD_COUNT": "saga_index.index",
    "OPEN_STATES": "saga_index.index",
    "InvalidInputError": "saga_index.index",
    "InvalidKeyError": "saga_index.index",
    "SagaIndexError": "saga_index.index",
    "shard": "saga_index.index",
    "EnumerationError": "saga_index.index.errors",
    "InvalidPersonIdError": "saga_index.index.errors",
    "validate_person_id": "saga_index.index.keys",
    "ControlItemInvalidError": "saga_index.layout_change.record",
    "ControlRecordInvalidError": "saga_index.layout_change.record",
    "ControlRecordUnavailableError": "saga_index.layout_change.record",
    "ControlState": "saga_index.layout_change.record",
    "CursorLayoutChangedError": "saga_index.store",
    "InvalidCursorError": "saga_index.store",
    "PagingDuringMoveError": "saga_index.store",
    "SagaPage": "saga_index.store",
    "KeyUpdate": "saga_index.api",
    "PersonKeys": "saga_index.api",
    "SagaIndex": "saga_index.api",
    "WriteKeys": "saga_index.api",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'saga_index' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
