"""Conditional writes: the condition fragments more than one writer holds, and their failure.

A fragment is one clause of a ConditionExpression, named for what it keeps true; a write
combines its fragments with `all_of`. Every fragment here spells its attributes through these
placeholders, which the write must define in ExpressionAttributeNames / Values:

  #pk  -> "PK"         #personId -> "personId"      #gsi4sk -> "GSI4SK"
  :readPersonId, :readGsi4sk   the values the writer read, as typed attribute values

Fragments only one writer uses stay beside that write, named the same way.
"""

from __future__ import annotations

from typing import Final

from saga_index.store.dynamo.client import error_code

# DynamoDB's answer when a ConditionExpression is false: the row changed, or never existed.
CONDITION_FAILED: Final = "ConditionalCheckFailedException"

# UpdateItem creates a missing row; this turns a write to a deleted row into a failed condition
# instead, so nothing a writer read can be re-created after someone deleted it.
ROW_STILL_EXISTS: Final = "attribute_exists(#pk)"
# The row's person is the one the writer read (a shard is computed from the personId, and a
# repair decides from it): another person since the read means another decision.
STILL_THE_PERSON_READ: Final = "#personId = :readPersonId"
# The row's sort key is the one the writer read (it names the person the row is routed by).
STILL_THE_SORT_KEY_READ: Final = "#gsi4sk = :readGsi4sk"


def all_of(*fragments: str) -> str:
    """One ConditionExpression that holds when every fragment holds."""
    return " AND ".join(fragments)


def is_condition_failed(err: BaseException) -> bool:
    """True when `err` is DynamoDB refusing a write because its condition was false: an
    expected outcome (someone else changed the row), never a failure to retry."""
    return error_code(err) == CONDITION_FAILED
