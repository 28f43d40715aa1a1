"""Conditional writes: how DynamoDB refuses one whose condition is false.

The conditions themselves, their fragments and the "still what I read" condition, are built in
saga_index.store.dynamo.expressions.
"""

from __future__ import annotations

from typing import Final

from saga_index.store.dynamo.client import error_code

# DynamoDB's answer when a ConditionExpression is false: the row changed, or never existed.
CONDITION_FAILED: Final = "ConditionalCheckFailedException"


def is_condition_failed(err: BaseException) -> bool:
    """True when `err` is DynamoDB refusing a write because its condition was false: an
    expected outcome (someone else changed the row), never a failure to retry."""
    return error_code(err) == CONDITION_FAILED
