"""Domain library for the sharded renewal-saga index (ADR-0085).

Pure where it can be; every AWS client is injected by the caller. Nothing here reads os.environ.

What another Python service uses is exported here (README, "Python services"): `SagaIndex`,
which follows the control record and reads and keys the index the way it says, the shard
contract, and the errors a caller can tell apart. Everything else is the library's own.
"""

from saga_index.api import PersonKeys, SagaIndex, WriteKeys
from saga_index.index import (
    DEFAULT_SHARD_COUNT,
    INDEX_NAME,
    MAX_SHARD_COUNT,
    OPEN_STATES,
    InvalidInputError,
    InvalidKeyError,
    SagaIndexError,
    shard,
)
from saga_index.index.errors import EnumerationError, InvalidPersonIdError
from saga_index.index.keys import validate_person_id
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
    "PagingDuringMoveError",
    "PersonKeys",
    "SagaIndex",
    "SagaIndexError",
    "SagaPage",
    "WriteKeys",
    "shard",
    "validate_person_id",
]
