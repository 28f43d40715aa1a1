"""moto's UpdateItem validation, the same verdicts in one walk of the expression.

moto validates an update expression by walking its tree once per check, and two checks (at most
one SET/ADD/REMOVE clause; no two actions on overlapping paths) run at EVERY node of the tree
that is an UpdateExpression (every action, path and value is one), each collecting the clauses
below it afresh (`Node.find_clauses`): the work grows with the number of actions times the size
of the tree. The control record's 25-action update took about 18 ms on moto, half of it in
these re-walks. Every walk also rebuilt its check's table of node types at every node.

Here the two checks visit the nodes in moto's order (children before their parent) and give
moto's own check methods each node's clauses, collected once from its children's exactly as
`find_clauses` collects them; the overlapping-paths check skips a node whose actions are the
very ones (the same objects, in the same order) of a node already passed, which it would pass
again. Every walk builds its table of node types once (the tables are constant: node classes
to bound methods). The first node to fail raises moto's own error, as before.
tests/unit/test_moto_validators.py checks the answers and errors against moto's own walk.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from moto.dynamodb.parsing import validators
from moto.dynamodb.parsing.ast_nodes import (
    DepthFirstTraverser,
    Expression,
    Node,
    UpdateExpression,
    UpdateExpressionFunction,
)

_Key = tuple[type, ...]
# The clause types each check asks find_clauses for, as it asks (the order of the list).
_ACTIONS: _Key = (
    validators.UpdateExpressionSetAction,
    validators.UpdateExpressionAddAction,
    validators.UpdateExpressionRemoveAction,
    validators.UpdateExpressionDeleteAction,
)
_CLAUSES: tuple[_Key, ...] = (
    (validators.UpdateExpressionAddClause,),
    (validators.UpdateExpressionRemoveClause,),
    (validators.UpdateExpressionSetClause,),
)
_DESCENDED = (Expression, UpdateExpressionFunction)  # the children find_clauses looks inside

_own_nodes_to_be_processed = DepthFirstTraverser.nodes_to_be_processed
_own_process = DepthFirstTraverser.process
_own_action_count_traverse = validators.ActionCountValidator.traverse
_own_overlapping_traverse = validators.OverlappingPathsValidator.traverse


class _Found:
    """A node as a check sees it: what its find_clauses answers, worked out already."""

    __slots__ = ("_found",)

    def __init__(self, found: dict[_Key, list[Any]]) -> None:
        self._found = found

    def find_clauses(self, clause_types: Sequence[type]) -> list[Any]:
        return self._found[tuple(clause_types)]


def _walk(
    node: Any, keys: Sequence[_Key], check: Callable[[Any, dict[_Key, list[Any]]], None]
) -> dict[_Key, list[Any]]:
    """find_clauses(node, key) for every key, after checking every node below (moto's order:
    each child's subtree, left to right, then the node); `check` runs on every UpdateExpression."""
    found: dict[_Key, list[Any]] = {key: [] for key in keys}
    if isinstance(node, Node) and node.children is not None:
        for child in node.children:
            if not isinstance(child, Node):
                continue
            below = _walk(child, keys, check)
            for key in keys:
                if type(child) in key:
                    found[key].append(child)
                elif isinstance(child, _DESCENDED):
                    found[key].extend(below[key])
    if isinstance(node, UpdateExpression):
        check(node, found)
    return found


def _action_count_traverse(self: validators.ActionCountValidator, node: Any) -> Any:
    if not isinstance(node, Node):
        return node
    _walk(node, _CLAUSES, lambda _node, found: self.verify_action_counts(_Found(found)))
    return node


def _overlapping_traverse(self: validators.OverlappingPathsValidator, node: Any) -> Any:
    if not isinstance(node, Node):
        return node
    passed: set[tuple[int, ...]] = set()

    def check(_node: Any, found: dict[_Key, list[Any]]) -> None:
        actions = found[_ACTIONS]
        same = tuple(id(action) for action in actions)
        if same in passed:
            return
        self.check_for_overlapping_paths(_Found(found))
        passed.add(same)

    _walk(node, (_ACTIONS,), check)
    return node


def _processing_map(self: DepthFirstTraverser) -> dict[type, Callable[[Any], Any]]:
    cached = self.__dict__.get("_moto_validators_map")
    if cached is None:
        cached = self._processing_map()
        self.__dict__["_moto_validators_map"] = cached
        self.__dict__["_moto_validators_types"] = tuple(cached)
    return cached


def nodes_to_be_processed(self: DepthFirstTraverser) -> tuple[type, ...]:
    types = self.__dict__.get("_moto_validators_types")
    if types is None:
        _processing_map(self)
        types = self.__dict__["_moto_validators_types"]
    return types


def process(self: DepthFirstTraverser, node: Any) -> Any:
    for class_key, processor in _processing_map(self).items():
        if isinstance(node, class_key):
            return processor(node)
    return None


def install() -> None:
    """Use these from now on, in this process (idempotent)."""
    DepthFirstTraverser.nodes_to_be_processed = nodes_to_be_processed
    DepthFirstTraverser.process = process
    validators.ActionCountValidator.traverse = _action_count_traverse
    validators.OverlappingPathsValidator.traverse = _overlapping_traverse


def uninstall() -> None:
    """moto's own walks again (for the test that compares)."""
    DepthFirstTraverser.nodes_to_be_processed = _own_nodes_to_be_processed
    DepthFirstTraverser.process = _own_process
    validators.ActionCountValidator.traverse = _own_action_count_traverse
    validators.OverlappingPathsValidator.traverse = _own_overlapping_traverse
