"""The control items as read: deserialised items back into states and transitions, strictly
(docs/control-contract.md: a reader refuses what does not parse). The attributes and what each
holds come from record/schema.py; anything malformed is ControlItemInvalidError, naming the
attribute and the kind of refusal (the contract vectors hold both for every refused item).

The attributes of a part are read in the table's order; then the checks across attributes
(the version, each state's two layouts, the prior write layout), then `phase` against its
layouts. A NULL attribute deserialises to None and counts as absent. Every value is checked
under record/grammar.py, the grammar the TypeScript package applies too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, NoReturn, TypeVar

from saga_index.index import (
    CONTROL_PK,
    LEGACY_KIND,
    SHARDED_KIND,
    TABLE_PARTITION_KEY,
    TABLE_SORT_KEY,
    InvalidInputError,
    Layout,
)
from saga_index.layout_change.record.errors import ControlItemInvalidError, Refusal
from saga_index.layout_change.record.grammar import DIRECTIONS, MAX_INTEGER, NumberText
from saga_index.layout_change.record.items import (
    ENTITY_HISTORY,
    ENTITY_STATE,
    ENTITY_TYPE,
    HISTORY_SK_PREFIX,
    HISTORY_VERSION_DIGITS,
    MOVING_TO_LAYOUT,
    OPEN_INDEX,
    PHASE,
    PREVIOUS_MOVING_TO_LAYOUT,
    PRIOR_WRITE_LAYOUT,
    VERSION,
)
from saga_index.layout_change.record.open_index import (
    OPEN_INDEX_OFF,
    OPEN_INDEX_STATES,
    OpenIndex,
    OpenIndexState,
    check_one_dimension,
)
from saga_index.layout_change.record.phase import phase_of
from saga_index.layout_change.record.schema import (
    COMPLETION,
    CONTROLS,
    HISTORY_FLAGS,
    LEASE,
    TRANSITION,
    Attribute,
    Part,
    Value,
)
from saga_index.layout_change.record.state import (
    BackfillCompletion,
    BackfillDirection,
    ControlState,
    Lease,
    RecordCondition,
    Transition,
    check_prior_write,
    check_version,
)
from saga_index.layout_change.record.times import parse_time

T = TypeVar("T")


def parse_state_item(item: Mapping[str, Any]) -> ControlState:
    _expect_entity(item, ENTITY_STATE)
    transition = parse_transition(item)
    lease = read_part(item, LEASE)
    controls = read_part(item, CONTROLS) or {}
    completion = read_part(item, COMPLETION)
    return ControlState(
        transition=transition,
        condition=RecordCondition.PRESENT,
        lease=None if lease is None else Lease(**lease),
        last_backfill=None if completion is None else BackfillCompletion(**completion),
        **controls,
    )


def parse_history_item(item: Mapping[str, Any]) -> Transition:
    _expect_entity(item, ENTITY_HISTORY)
    transition = parse_transition(item)
    # Formatted, not history_sk: a version too wide for any written key is refused as a key
    # that does not hold it, as every reader formats it, rather than failing the read.
    expected = f"{HISTORY_SK_PREFIX}{transition.version:0{HISTORY_VERSION_DIGITS}d}"
    if item.get(TABLE_SORT_KEY) != expected:
        _refuse(
            f"history item {item.get(TABLE_SORT_KEY)!r} holds version {transition.version}",
            Refusal.INCONSISTENT,
            TABLE_SORT_KEY,
        )
    return transition


def parse_history_flags(item: Mapping[str, Any]) -> dict[str, bool]:
    """A HISTORY item's `applied` and `abandoned` (record/history.py)."""
    return read_part(item, HISTORY_FLAGS) or {}


def parse_transition(item: Mapping[str, Any]) -> Transition:
    fields = read_part(item, TRANSITION)
    assert fields is not None  # the transition has no presence attribute: always read
    _check(lambda: check_version(fields["version"]), VERSION, Refusal.INVALID_VALUE)
    _check(lambda: phase_of(fields["layout"], fields["moving_to"]), MOVING_TO_LAYOUT)
    _check(
        lambda: phase_of(fields["previous_layout"], fields["previous_moving_to"]),
        PREVIOUS_MOVING_TO_LAYOUT,
    )
    _check(
        lambda: check_prior_write(fields["prior_write"], fields["layout"], fields["moving_to"]),
        PRIOR_WRITE_LAYOUT,
    )
    _check(
        lambda: check_one_dimension(
            (fields["layout"], fields["moving_to"]),
            (fields["previous_layout"], fields["previous_moving_to"]),
            fields["open_index"] != fields["previous_open_index"],
        ),
        OPEN_INDEX,
    )
    transition = Transition(**fields)
    stored_phase = item.get(PHASE)
    if stored_phase != transition.phase.value:
        _refuse(
            f"{PHASE} {stored_phase!r} disagrees with its layouts ({transition.phase.value!r})",
            Refusal.MISSING if stored_phase is None else Refusal.INCONSISTENT,
            PHASE,
        )
    return transition


def read_part(item: Mapping[str, Any], part: Part) -> dict[str, Any] | None:
    """The part's fields as its dataclass takes them; None when the part is not on the item.

    Derived attributes (the phases) are not read; a shard count is read with its layout."""
    if part.present_if is not None and item.get(part.present_if) is None:
        return None
    fields: dict[str, Any] = {}
    for attribute in part.attributes:
        if attribute.field is None or attribute.value is Value.SHARD_COUNT:
            continue
        # A part on the item has all its attributes but those optional within it too.
        required = not attribute.optional
        fields[attribute.field] = _read(item, attribute, required=required)
    return fields


def _read(item: Mapping[str, Any], attribute: Attribute, *, required: bool) -> Any:
    name = attribute.name
    if attribute.value is Value.LAYOUT:
        assert attribute.count is not None
        layout = _layout(item, name, attribute.count)
        if layout is None and required:
            _refuse(f"{name} is missing", Refusal.MISSING, name)
        return layout
    if attribute.value is Value.OPEN_INDEX:
        assert attribute.count is not None
        return _open_index(item, name, attribute.count)
    value = item.get(name)
    if value is None and not required:
        return attribute.absent
    reader = _READERS[attribute.value]
    return reader(value, name)


def _expect_entity(item: Mapping[str, Any], entity: str) -> None:
    if item.get(TABLE_PARTITION_KEY) != CONTROL_PK or item.get(ENTITY_TYPE) != entity:
        wrong = TABLE_PARTITION_KEY if item.get(TABLE_PARTITION_KEY) != CONTROL_PK else ENTITY_TYPE
        _refuse(
            f"not a {entity} item: PK={item.get(TABLE_PARTITION_KEY)!r}, "
            f"{ENTITY_TYPE}={item.get(ENTITY_TYPE)!r}",
            Refusal.WRONG_ITEM,
            wrong,
        )


def _layout(item: Mapping[str, Any], kind_name: str, count_name: str) -> Layout | None:
    kind = item.get(kind_name)
    if kind is None:
        if item.get(count_name) is not None:
            _refuse(f"{count_name} is set but {kind_name} is not", Refusal.UNEXPECTED, count_name)
        return None
    if kind == LEGACY_KIND:
        if item.get(count_name) is not None:
            _refuse(
                f"{count_name} must be absent for a legacy layout", Refusal.UNEXPECTED, count_name
            )
        return Layout.legacy()
    if kind == SHARDED_KIND:
        count = _int(item.get(count_name), count_name)
        try:
            return Layout.sharded(count)
        except InvalidInputError as err:
            _refuse(f"{count_name}: {err}", Refusal.INVALID_VALUE, count_name, err)
    _refuse(
        f"{kind_name} must be 'legacy' or 'sharded', got {kind!r}",
        Refusal.INVALID_VALUE if isinstance(kind, str) else Refusal.WRONG_TYPE,
        kind_name,
    )


def _open_index(item: Mapping[str, Any], kind_name: str, count_name: str) -> OpenIndex:
    """The open index's state and N; an item without the state reads as `off`."""
    kind = item.get(kind_name)
    count = item.get(count_name)
    if kind is None or kind == OpenIndexState.OFF.value:
        if count is not None:
            _refuse(
                f"{count_name} must be absent while {kind_name} is off",
                Refusal.UNEXPECTED,
                count_name,
            )
        return OPEN_INDEX_OFF
    # Exactly a word writers write: no trimming or case folding.
    if not isinstance(kind, str) or kind not in OPEN_INDEX_STATES:
        _refuse(
            f"{kind_name} must be one of {', '.join(OPEN_INDEX_STATES)}, got {kind!r}",
            Refusal.INVALID_VALUE if isinstance(kind, str) else Refusal.WRONG_TYPE,
            kind_name,
        )
    shard_count = _int(count, count_name)
    try:
        return OpenIndex(OpenIndexState(kind), shard_count)
    except InvalidInputError as err:
        _refuse(f"{count_name}: {err}", Refusal.INVALID_VALUE, count_name, err)


def _int(value: Any, name: str) -> int:
    number = _number(value, name)
    if isinstance(number, Decimal) and number != number.to_integral_value():
        _refuse(f"{name} must be an integer, got {number}", Refusal.INVALID_VALUE, name)
    if number > MAX_INTEGER or number < -MAX_INTEGER:
        _refuse(
            f"{name} must be an integer of magnitude at most 2^53 - 1, got {number}",
            Refusal.INVALID_VALUE,
            name,
        )
    return int(number)


def _number(value: Any, name: str) -> int | Decimal:
    """An N under the grammar (record/grammar.py): its exact value, finite."""
    if isinstance(value, NumberText) or (isinstance(value, Decimal) and not value.is_finite()):
        _refuse(f"{name} must be a decimal number, got {value!r}", Refusal.INVALID_VALUE, name)
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        _refuse(f"{name} must be a number, got {value!r}", _absent_or_wrong(value), name)
    return value


def _rate(value: Any, name: str) -> float:
    rate = float(_number(value, name))
    if not math.isfinite(rate):
        _refuse(f"{name} must be a finite number, got {value!r}", Refusal.INVALID_VALUE, name)
    return rate


def _typed(expected: type[T], what: str) -> Callable[[Any, str], T]:
    def read(value: Any, name: str) -> T:
        if not isinstance(value, expected):
            _refuse(f"{name} must be {what}, got {value!r}", _absent_or_wrong(value), name)
        return value

    return read


def _strings(value: Any, name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        _refuse(f"{name} must be a list of strings, got {value!r}", _absent_or_wrong(value), name)
    return tuple(value)


def _direction(value: Any, name: str) -> BackfillDirection:
    # Exactly a word writers write: no trimming or case folding, which languages do differently.
    if isinstance(value, str) and value in DIRECTIONS:
        return BackfillDirection(value)
    kind = Refusal.INVALID_VALUE if isinstance(value, str) else _absent_or_wrong(value)
    _refuse(f"{name} must be 'forward' or 'rollback', got {value!r}", kind, name)


_READERS: dict[Value, Callable[[Any, str], Any]] = {
    Value.STRING: _typed(str, "a string"),
    Value.INTEGER: _int,
    Value.NUMBER: _rate,
    Value.BOOLEAN: _typed(bool, "a boolean"),
    Value.TIME: parse_time,
    Value.STRINGS: _strings,
    Value.DIRECTION: _direction,
}


def _absent_or_wrong(value: Any) -> Refusal:
    return Refusal.MISSING if value is None else Refusal.WRONG_TYPE


def _check(
    check: Callable[[], object], attribute: str, kind: Refusal = Refusal.INCONSISTENT
) -> None:
    """A rule the state's dataclass enforces, refused as a contract breach at `attribute`."""
    try:
        check()
    except InvalidInputError as err:
        _refuse(f"control item does not parse: {err}", kind, attribute, err)


def _refuse(
    message: str, kind: Refusal, attribute: str, cause: BaseException | None = None
) -> NoReturn:
    raise ControlItemInvalidError(message, kind=kind, attribute=attribute) from cause
