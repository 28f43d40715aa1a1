"""TransactWriteItems served by the proxy on top of a server that has no transactions (dynalite).

One transaction, as DynamoDB runs it and as clients through the proxy see it:

  1  validated (1 to 100 actions, one item at most once, every table known);
  2  a repeated ClientRequestToken of a transaction that succeeded in the last 10 minutes is
     answered with that success, nothing applied again; the same token with other actions is
     refused (IdempotentParameterMismatchException);
  3  the conflict rules: cancelled (TransactionConflict) when another ongoing transaction holds
     one of its items; else its items are ongoing until it ends, and at least for the model's
     in-flight time, so a plain write of one of them meets TransactionConflictException;
  4  under the locks of its items: the items are read (one strongly consistent BatchGetItem),
     priced (each item twice, a ConditionCheck included, its GSI writes once) and admitted,
     or cancelled with ThrottlingError for the actions on a key past its ceiling;
  5  each ConditionCheck is evaluated by the server itself, with a write that changes nothing
     (an UpdateItem that removes an attribute no item has, conditioned on the item existing AND
     the check; when that fails, a DeleteItem conditioned on the item NOT existing AND the
     check, which deletes nothing): no condition language is re-implemented here;
  6  the writes run in order, each with its own condition; when one fails its condition, the
     writes before it are undone (each item put back as it was read), and every action's
     condition is evaluated (as in 5) so that CancellationReasons names each one that fails,
     `Item` included when the action asked for ReturnValuesOnConditionCheckFailure ALL_OLD;
  7  what it consumed is charged, and its items are released.

Atomic for clients of the proxy (the item locks, devkit.engine.proxy); a client of the server
itself can see or change an item between 5, 6 and an undo.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from devkit.engine.items import ItemLocks, TableModel
from devkit.engine.upstream import Reply, Upstream, UpstreamError, json_reply, refusal_reply
from devkit.semantics.model import CANCELED, ItemRef, Refusal, Transaction
from devkit.semantics.requests import Action, Touch, assigns_of, item_ref, write_cost

KINDS = ("ConditionCheck", "Put", "Update", "Delete")
MAX_ACTIONS = 100
# DynamoDB remembers a ClientRequestToken this long.
TOKEN_SECONDS = 600.0
# Placeholders the proxy adds to a client's condition: spelled so no client's collide.
_KEY_NAME = "#devkitEngineKey"
_NOOP_NAME = "#devkitEngineNoop"
_NOOP_ATTRIBUTE = "devkit.engine.noop"
_PLACEHOLDER = re.compile(r"[#:][A-Za-z0-9_]+")
_CONDITION_FAILED = {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"}
_THROTTLED = {
    "Code": "ThrottlingError",
    "Message": "Throughput exceeds the current capacity of your table or index.",
}


class ProxyState(Protocol):
    """What a transaction needs of the proxy (devkit.engine.proxy.SemanticsProxy)."""

    upstream: Upstream
    locks: ItemLocks
    tokens: TokenMemory
    clock: Callable[[], float]

    async def model(self, table_name: Any) -> TableModel | None: ...

    def real_seconds(self, engine_seconds: float) -> float: ...

    def refuse(self, refusal: Refusal) -> Reply: ...


@dataclass(frozen=True)
class _Step:
    index: int
    kind: str
    body: Mapping[str, Any]
    model: TableModel
    key: dict[str, Any]
    ref: ItemRef

    @property
    def table(self) -> str:
        return self.model.schema.name


@dataclass
class TokenMemory:
    """ClientRequestTokens of the transactions that succeeded, for TOKEN_SECONDS."""

    clock: Callable[[], float]
    _seen: dict[str, tuple[str, float]] = field(default_factory=dict)

    def recall(self, token: str) -> str | None:
        now = self.clock()
        self._seen = {t: seen for t, seen in self._seen.items() if seen[1] > now}
        remembered = self._seen.get(token)
        return remembered[0] if remembered else None

    def remember(self, token: str, fingerprint: str) -> None:
        self._seen[token] = (fingerprint, self.clock() + TOKEN_SECONDS)


def _error(code: str, message: str) -> Reply:
    return refusal_reply(Refusal(code, message))


def _validation(message: str) -> Reply:
    return _error("ValidationException", message)


def _cancelled(reasons: Sequence[Mapping[str, Any]]) -> Reply:
    codes = ", ".join(str(reason["Code"]) for reason in reasons)
    return refusal_reply(
        Refusal(
            CANCELED,
            "Transaction cancelled, please refer cancellation reasons for specific reasons "
            f"[{codes}]",
            {"CancellationReasons": list(reasons)},
        )
    )


async def _steps(proxy: ProxyState, params: Mapping[str, Any]) -> list[_Step] | Reply:
    """The request's actions, or the error DynamoDB answers a malformed one with."""
    entries = params.get("TransactItems")
    if not isinstance(entries, list) or not 1 <= len(entries) <= MAX_ACTIONS:
        return _validation(
            f"1 validation error detected: Value at 'transactItems' failed to satisfy "
            f"constraint: Member must have length between 1 and {MAX_ACTIONS}"
        )
    steps: list[_Step] = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or len(entry) != 1 or next(iter(entry)) not in KINDS:
            return _validation(f"TransactItems[{index}] must hold exactly one of {KINDS}")
        ((kind, body),) = entry.items()
        model = await proxy.model(body.get("TableName"))
        if model is None:
            return _error("ResourceNotFoundException", "Requested resource not found")
        schema = model.schema
        try:
            key = schema.key_of(body["Item"]) if kind == "Put" else dict(body["Key"])
            ref = item_ref(schema, schema.name, key)
        except (KeyError, TypeError, ValueError) as err:
            return _validation(f"TransactItems[{index}]: the item's key is missing ({err})")
        if kind == "ConditionCheck" and not body.get("ConditionExpression"):
            return _validation("A ConditionCheck needs a ConditionExpression")
        assert ref is not None
        steps.append(_Step(index, kind, body, model, key, ref))
    if len({step.ref for step in steps}) != len(steps):
        return _validation("Transaction request cannot include multiple operations on one item")
    return steps


async def transact_write(proxy: ProxyState, params: Mapping[str, Any]) -> Reply:
    """One TransactWriteItems (the module's docstring says how)."""
    steps = await _steps(proxy, params)
    if isinstance(steps, Reply):
        return steps
    token = params.get("ClientRequestToken")
    fingerprint = hashlib.sha256(
        json.dumps(params.get("TransactItems"), sort_keys=True).encode()
    ).hexdigest()
    if isinstance(token, str):
        known = proxy.tokens.recall(token)
        if known == fingerprint:
            return json_reply(200, {})
        if known is not None:
            return _error(
                "IdempotentParameterMismatchException",
                "The request uses the same client token as a previous, but non-identical request",
            )
    begun = _begin(steps)
    if isinstance(begun, Reply):
        return begun
    try:
        async with proxy.locks.hold(step.ref for step in steps):
            reply = await _run(proxy, steps)
        # An ongoing transaction holds its items at least for the model's in-flight time, in
        # the model's (engine) seconds: a dilated clock makes the hold longer in real ones.
        left = max(transaction.until for transaction in begun.values()) - proxy.clock()
        if left > 0:
            await asyncio.sleep(proxy.real_seconds(left))
    finally:
        for table, transaction in begun.items():
            _model_of(steps, table).semantics.finish(transaction)
    if reply.ok and isinstance(token, str):
        proxy.tokens.remember(token, fingerprint)
    return reply


def _model_of(steps: Sequence[_Step], table: str) -> TableModel:
    return next(step.model for step in steps if step.table == table)


def _begin(steps: Sequence[_Step]) -> dict[str, Transaction] | Reply:
    """The conflict rules, per table the transaction writes: its transactions, or the
    cancellation naming the actions whose item another ongoing transaction holds."""
    begun: dict[str, Transaction] = {}
    conflicts = [False] * len(steps)
    for table in dict.fromkeys(step.table for step in steps):
        semantics = _model_of(steps, table).semantics
        outcome = semantics.begin_transaction(
            [step.ref if step.table == table else None for step in steps]
        )
        if isinstance(outcome, Refusal):
            reasons = outcome.fields["CancellationReasons"]
            for index, reason in enumerate(reasons):
                conflicts[index] |= reason["Code"] == "TransactionConflict"
        else:
            begun[table] = outcome
    if any(conflicts):
        for table, transaction in begun.items():
            _model_of(steps, table).semantics.finish(transaction)
        message = {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}
        return _cancelled([message if hit else {"Code": "None"} for hit in conflicts])
    return begun


async def _run(proxy: ProxyState, steps: Sequence[_Step]) -> Reply:
    """Steps 4 to 7 of the module's docstring, under the items' locks."""
    ceilings = any(step.model.semantics.ceilings_on for step in steps)
    try:
        before = await _read(proxy.upstream, steps) if ceilings else {}
        if ceilings:
            throttled = _admit(proxy, steps, before)
            if throttled is not None:
                return throttled
        reasons: dict[int, Mapping[str, Any]] = {}
        for step in steps:
            if step.kind == "ConditionCheck":
                failed = await _check(proxy.upstream, step)
                if failed is not None:
                    reasons[step.index] = failed
        if reasons:
            reasons.update(await _check_all(proxy.upstream, steps, skip=reasons))
            return _cancelled([reasons.get(step.index, {"Code": "None"}) for step in steps])
        after = await _apply(proxy.upstream, steps, before, ceilings=ceilings)
    except UpstreamError as err:
        return err.reply
    if isinstance(after, Reply):
        return after
    if ceilings:
        _charge(steps, before, after)
    return json_reply(200, {})


async def _read(upstream: Upstream, steps: Sequence[_Step]) -> dict[ItemRef, Any]:
    """Every item of the transaction as it is (strongly consistent), None when absent."""
    request: dict[str, Any] = {}
    for step in steps:
        entry = request.setdefault(step.table, {"Keys": [], "ConsistentRead": True})
        entry["Keys"].append(step.key)
    found: dict[ItemRef, Any] = {step.ref: None for step in steps}
    while request:
        reply = await upstream.call("BatchGetItem", {"RequestItems": request})
        if not reply.ok:
            raise UpstreamError(reply)
        document = reply.json()
        for table, items in document.get("Responses", {}).items():
            schema = _model_of(steps, table).schema
            for item in items:
                ref = item_ref(schema, table, schema.key_of(item))
                if ref is not None:
                    found[ref] = item
        request = document.get("UnprocessedKeys") or {}
    return found


def _touch(steps: Sequence[_Step], table: str) -> Touch:
    # An Update's plain assignments go with it, as devkit.semantics.requests.touched gives them:
    # without them its estimate could not see a GSI key it moves, and the index key it leaves
    # would be charged after the fact but never refused.
    return Touch(
        "TransactWriteItems",
        tuple(
            Action(step.kind, step.ref, step.key, step.body.get("Item"), assigns_of(step.body))
            for step in steps
            if step.table == table
        ),
    )


def _admit(
    proxy: ProxyState, steps: Sequence[_Step], before: Mapping[ItemRef, Any]
) -> Reply | None:
    """The per-key ceilings: None when admitted, else the cancellation (ThrottlingError on
    every action that writes the key past its ceiling)."""
    for table in dict.fromkeys(step.table for step in steps):
        model = _model_of(steps, table)
        refusal = model.semantics.admit(write_cost(model.schema, _touch(steps, table), before))
        if refusal is None:
            continue
        proxy.refuse(refusal)  # counted as the key's throttle; answered as a cancellation
        reasons = []
        for step in steps:
            charges = write_cost(step.model.schema, _touch([step], step.table), before)
            hit = any((c.target, c.partition_key) == refusal.over for c in charges)
            reasons.append(_THROTTLED if hit else {"Code": "None"})
        return _cancelled(reasons)
    return None


def _condition(step: _Step) -> tuple[str, dict[str, Any], dict[str, Any]] | None:
    """The action's condition and the placeholders it uses (an Update's expression may use
    others, which a condition-only request must not carry)."""
    expression = step.body.get("ConditionExpression")
    if not expression:
        return None
    used = set(_PLACEHOLDER.findall(expression))
    names = step.body.get("ExpressionAttributeNames") or {}
    values = step.body.get("ExpressionAttributeValues") or {}
    names = {k: v for k, v in names.items() if k in used}
    values = {k: v for k, v in values.items() if k in used}
    return expression, names, values


async def _check(upstream: Upstream, step: _Step) -> Mapping[str, Any] | None:
    """Whether the action's condition holds now, asked of the server with writes that change
    nothing: None when it holds, else its cancellation reason."""
    condition = _condition(step)
    if condition is None:
        return None
    expression, names, values = condition
    hash_key = step.model.schema.hash_key
    common: dict[str, Any] = {"TableName": step.table, "Key": step.key}
    if values:
        common["ExpressionAttributeValues"] = values
    on_item = await upstream.call(
        "UpdateItem",
        {
            **common,
            "UpdateExpression": f"REMOVE {_NOOP_NAME}",
            "ConditionExpression": f"attribute_exists({_KEY_NAME}) AND ({expression})",
            "ExpressionAttributeNames": {
                **names,
                _KEY_NAME: hash_key,
                _NOOP_NAME: _NOOP_ATTRIBUTE,
            },
        },
    )
    if on_item.ok:
        return None
    if on_item.error_code != "ConditionalCheckFailedException":
        raise UpstreamError(on_item)
    # The item is absent, or the check fails on it: ask again of an absent item.
    on_absent = await upstream.call(
        "DeleteItem",
        {
            **common,
            "ConditionExpression": f"attribute_not_exists({_KEY_NAME}) AND ({expression})",
            "ExpressionAttributeNames": {**names, _KEY_NAME: hash_key},
        },
    )
    if on_absent.ok:
        return None
    if on_absent.error_code != "ConditionalCheckFailedException":
        raise UpstreamError(on_absent)
    if step.body.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD":
        current = await upstream.call(
            "GetItem", {"TableName": step.table, "Key": step.key, "ConsistentRead": True}
        )
        item = current.json().get("Item") if current.ok else None
        if item is not None:
            return {**_CONDITION_FAILED, "Item": item}
    return _CONDITION_FAILED


async def _check_all(
    upstream: Upstream, steps: Sequence[_Step], *, skip: Mapping[int, Any]
) -> dict[int, Mapping[str, Any]]:
    """Every write action's condition, for a transaction already cancelled: DynamoDB names
    each action that fails."""
    found: dict[int, Mapping[str, Any]] = {}
    for step in steps:
        if step.kind != "ConditionCheck" and step.index not in skip:
            failed = await _check(upstream, step)
            if failed is not None:
                found[step.index] = failed
    return found


async def _apply(
    upstream: Upstream,
    steps: Sequence[_Step],
    before: Mapping[ItemRef, Any],
    *,
    ceilings: bool,
) -> dict[ItemRef, Any] | Reply:
    """The writes in order, each under its own condition: the items after them, or (undone)
    the cancellation or the server's error."""
    after: dict[ItemRef, Any] = {}
    applied: list[tuple[_Step, Any]] = []
    for step in steps:
        if step.kind == "ConditionCheck":
            after[step.ref] = before.get(step.ref)
            continue
        request = {k: v for k, v in step.body.items() if k != "ReturnValuesOnConditionCheckFailure"}
        # ALL_OLD: what an undo puts back. With the ceilings on, the items were read already,
        # and an update answers with the item after it (its price).
        returned = "ALL_NEW" if ceilings and step.kind == "Update" else "ALL_OLD"
        reply = await upstream.call(f"{step.kind}Item", {**request, "ReturnValues": returned})
        if reply.ok:
            attributes = reply.json().get("Attributes")
            old = before.get(step.ref) if returned == "ALL_NEW" else attributes
            applied.append((step, old))
            after[step.ref] = {
                "Put": step.body.get("Item"),
                "Delete": None,
                "Update": attributes,
            }[step.kind]
            continue
        await _undo(upstream, applied)
        if reply.error_code != "ConditionalCheckFailedException":
            return reply
        reasons: dict[int, Mapping[str, Any]] = {step.index: _CONDITION_FAILED}
        if step.body.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD":
            reasons[step.index] = await _check(upstream, step) or _CONDITION_FAILED
        reasons.update(await _check_all(upstream, steps, skip=reasons))
        return _cancelled([reasons.get(s.index, {"Code": "None"}) for s in steps])
    return after


async def _undo(upstream: Upstream, applied: Sequence[tuple[_Step, Any]]) -> None:
    """Put every applied write's item back as it was, last first."""
    for step, old in reversed(applied):
        if old is None:
            reply = await upstream.call("DeleteItem", {"TableName": step.table, "Key": step.key})
        else:
            reply = await upstream.call("PutItem", {"TableName": step.table, "Item": old})
        if not reply.ok:
            raise UpstreamError(reply)


def _charge(
    steps: Sequence[_Step], before: Mapping[ItemRef, Any], after: Mapping[ItemRef, Any]
) -> None:
    for table in dict.fromkeys(step.table for step in steps):
        model = _model_of(steps, table)
        model.semantics.charge(
            write_cost(model.schema, _touch(steps, table), before, after),
            operation="TransactWriteItems",
        )
