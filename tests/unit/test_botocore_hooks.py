"""tests/support/botocore_hooks.py renames events and answers "takes **kwargs?" as botocore's own
code does: the same event names under every alias of botocore's table (and a table of its own
kept apart), and the same verdicts (or errors) for functions, methods and other callables."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

import pytest
from botocore import hooks

from tests.support import botocore_hooks

_OWN_INIT, _OWN_ACCEPTS_KWARGS = botocore_hooks.botocore_own()


def _event_names() -> list[str]:
    """Every alias of botocore's table in the places an event name carries a service (first,
    in the middle, before an operation), names no alias touches, and near misses."""
    names = ["before-call.dynamodb.Query", "needs-retry.dynamodb", "creating-client-class"]
    for old in hooks.EVENT_ALIASES:
        names += [
            f"before-call.{old}.AnOperation",
            f"provide-client-params.{old}",
            f"docs.request-params.{old}.AnOperation.complete-section",
            f"before-call.{old}x.AnOperation",
            f"before-call.x{old}",
        ]
    return names


def _renamed(aliaser: hooks.EventAliaser, names: list[str]) -> list[str]:
    return [aliaser._alias_event_name(name) for name in names]


def _botocore_aliaser(aliases: Any = None) -> hooks.EventAliaser:
    aliaser = hooks.EventAliaser.__new__(hooks.EventAliaser)
    _OWN_INIT(aliaser, hooks.HierarchicalEmitter(), aliases)
    return aliaser


def test_every_event_name_is_renamed_as_botocore_renames_it() -> None:
    botocore_hooks.install()
    names = _event_names()
    own = _renamed(_botocore_aliaser(), names)

    first = hooks.EventAliaser(hooks.HierarchicalEmitter())
    second = hooks.EventAliaser(hooks.HierarchicalEmitter())
    clients = copy.copy(second)  # as a client copies its session's (and its alias table)

    assert _renamed(first, names) == own
    assert _renamed(first, names) == own  # from the cache
    assert _renamed(second, names) == own  # from the cache the first filled
    assert _renamed(clients, names) == own
    assert clients._alias_name_cache is first._alias_name_cache
    assert "before-call.api-gateway.AnOperation" in own  # the table was used at all


def test_an_aliaser_with_its_own_table_keeps_its_own_names() -> None:
    botocore_hooks.install()
    shared = hooks.EventAliaser(hooks.HierarchicalEmitter())
    assert shared._alias_event_name("before-call.dynamodb.Query") == "before-call.dynamodb.Query"

    own_table = hooks.EventAliaser(hooks.HierarchicalEmitter(), {"dynamodb": "ddb"})

    assert own_table._alias_event_name("before-call.dynamodb.Query") == "before-call.ddb.Query"
    assert shared._alias_event_name("before-call.dynamodb.Query") == "before-call.dynamodb.Query"


class _Handler:
    def with_kwargs(self, a: Any, **kwargs: Any) -> None: ...

    def without_kwargs(self, a: Any) -> None: ...

    @staticmethod
    def static_with_kwargs(**kwargs: Any) -> None: ...

    def __call__(self, **kwargs: Any) -> None: ...


def _with_kwargs(a: Any, **kwargs: Any) -> None: ...


def _without_kwargs(a: Any, b: Any = 1) -> None: ...


_CALLABLES: list[Callable[..., Any]] = [
    _with_kwargs,
    _without_kwargs,
    lambda **kwargs: None,
    lambda a: None,
    _Handler().with_kwargs,
    _Handler().without_kwargs,
    _Handler.static_with_kwargs,
    _Handler(),
    functools.partial(_with_kwargs, 1),
    functools.partial(_without_kwargs, 1),
    len,
    object(),  # not callable at all: inspect's TypeError
]


def _verdict(accepts_kwargs: Callable[[Any], Any], func: Any) -> Any:
    try:
        return accepts_kwargs(func)
    except TypeError as error:
        return ("TypeError", str(error))


@pytest.mark.parametrize("func", _CALLABLES, ids=lambda f: getattr(f, "__name__", type(f).__name__))
def test_takes_kwargs_is_botocore_s_own_verdict_twice(func: Any) -> None:
    own = _verdict(_OWN_ACCEPTS_KWARGS, func)

    assert _verdict(botocore_hooks.accepts_kwargs, func) == own
    assert _verdict(botocore_hooks.accepts_kwargs, func) == own  # remembered


def test_a_registered_handler_without_kwargs_is_still_refused() -> None:
    botocore_hooks.install()
    emitter = hooks.HierarchicalEmitter()
    emitter.register("before-call.dynamodb.Query", _Handler().with_kwargs)

    with pytest.raises(ValueError, match="must accept keyword arguments"):
        emitter.register("before-call.dynamodb.Query", _Handler().without_kwargs)
