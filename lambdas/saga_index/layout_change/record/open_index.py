"""The sparse open-saga index's state: the record's second dimension beside the layout
(docs/control-contract.md, "The open-saga index"). Pure, no I/O.

  off       no open index in use: readers enumerate open sagas over GSI4; writers never stamp
            OpenSagaPK (and remove it from every row they write)
  adding    writers stamp OpenSagaPK on every open saga they write (from effectiveAt); a
            backfill stamps the older open rows; readers still enumerate over GSI4
  open      enumerations of open sagas read the open index (completes `adding`; the end: no
            rollback after it)
  removing  the rollback of `adding`: writers stop stamping at effectiveAt, stamps are removed,
            readers enumerate over GSI4

Whatever the state, a writer that closes a saga removes its OpenSagaPK, so a closed saga never
stays in the open index. The open index has its own shard count N (`openIndexShardCount`),
present whenever the state is not `off`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from saga_index.index import InvalidInputError, Person, all_open_index_pks, validate_shard_count


class OpenIndexState(StrEnum):
    OFF = "off"
    ADDING = "adding"
    OPEN = "open"
    REMOVING = "removing"

    @classmethod
    def parse(cls, value: object) -> OpenIndexState:
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            allowed = ", ".join(s.value for s in cls)
            raise InvalidInputError(
                f"open index state must be one of {allowed}; got {value!r}"
            ) from None

    @property
    def stamps(self) -> bool:
        """Writers stamp OpenSagaPK on the open sagas they write (from effectiveAt)."""
        return self in (OpenIndexState.ADDING, OpenIndexState.OPEN)

    @property
    def reads(self) -> bool:
        """Enumerations of open sagas read the open index instead of GSI4."""
        return self is OpenIndexState.OPEN


OPEN_INDEX_STATES: tuple[str, ...] = tuple(s.value for s in OpenIndexState)


@dataclass(frozen=True)
class OpenIndex:
    """The open index's state and its N (None exactly when `off`)."""

    state: OpenIndexState = OpenIndexState.OFF
    shard_count: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.state, OpenIndexState):
            raise InvalidInputError(f"open index state must be an OpenIndexState: {self.state!r}")
        if self.state is OpenIndexState.OFF:
            if self.shard_count is not None:
                raise InvalidInputError("the open index has no shard count while it is off")
        else:
            validate_shard_count(self.shard_count)

    @classmethod
    def off(cls) -> OpenIndex:
        return cls()

    @classmethod
    def of(cls, state: OpenIndexState | str, shard_count: int | None) -> OpenIndex:
        return cls(OpenIndexState.parse(state), shard_count)

    @property
    def is_off(self) -> bool:
        return self.state is OpenIndexState.OFF

    @property
    def stamps(self) -> bool:
        return self.state.stamps

    @property
    def reads(self) -> bool:
        return self.state.reads

    def key_for(self, person: str | Person) -> str:
        """The OpenSagaPK this index's N gives the person's open sagas."""
        if self.shard_count is None:
            raise InvalidInputError("the open index is off: it gives no OpenSagaPK")
        return Person.of(person).open_index_pk(self.shard_count)

    def partitions(self) -> tuple[str, ...]:
        """Every OpenSagaPK of this index's N, shard 0 first (none while off)."""
        return () if self.shard_count is None else tuple(all_open_index_pks(self.shard_count))

    def __str__(self) -> str:
        return self.state.value if self.shard_count is None else f"{self.state}({self.shard_count})"


OPEN_INDEX_OFF = OpenIndex.off()


def check_one_dimension(
    layouts: tuple[object, object], previous_layouts: tuple[object, object], changed: bool
) -> None:
    """A transition changes the layout or the open index, never both: a reader that learns of
    one change at a time can then never meet a state that mixes two unsettled switches."""
    if changed and layouts != previous_layouts:
        raise InvalidInputError(
            "a transition changes the layout or the open index, never both: this one changes "
            "the open index and the layout together"
        )
