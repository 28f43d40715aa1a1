"""botocore's event hooks registered without working out the same answers again per session.

Every botocore Session registers about 130 built-in handlers, and every client copies them and
registers its own; moto gives every test a fresh default session and the code under test makes
a client per command. Each registration first renames the event by botocore's alias table
(`EventAliaser._alias_event_name`: a loop over every alias, splitting the name each time) and
then asks `inspect` whether the handler takes **kwargs (`accepts_kwargs`). Both answers depend
only on their input, yet each session and client starts with an empty alias cache and asks
`inspect` again: a fifth of the CPU of making a moto table and its client.

Here the aliasers that use botocore's own alias table (or a copy of it: a client's) share one
cache (an event name always renames to the same name under the same table), and whether a plain
function (or a bound method's function) takes **kwargs is remembered while the function lives;
any other callable is asked as before. tests/unit/test_botocore_hooks.py checks both agree with
botocore's own.
"""

from __future__ import annotations

import types
import weakref
from collections.abc import Callable
from typing import Any

from botocore import hooks

_aliaser_init = hooks.EventAliaser.__init__
_accepts_kwargs: Callable[[Any], Any] = hooks.accepts_kwargs

# Event name -> its name under botocore's EVENT_ALIASES, for every aliaser using that table.
_SHARED_ALIAS_NAMES: dict[str, str] = {}
# Function -> whether it takes **kwargs; weak, so a session's closures are not kept alive.
_TAKES_KWARGS: weakref.WeakKeyDictionary[types.FunctionType, Any] = weakref.WeakKeyDictionary()


def _aliaser_init_sharing(
    self: hooks.EventAliaser, event_emitter: Any, event_aliases: Any = None
) -> None:
    _aliaser_init(self, event_emitter, event_aliases)
    # A client's aliaser is a copy of its session's, with a copy of the table: equal, not the same.
    if self._event_aliases == hooks.EVENT_ALIASES:
        self._alias_name_cache = _SHARED_ALIAS_NAMES


def accepts_kwargs(func: Any) -> Any:
    """botocore's accepts_kwargs (inspect's varkw of `func`), remembered per function."""
    target = getattr(func, "__func__", func)  # a bound method's varkw is its function's
    if type(target) is not types.FunctionType:
        return _accepts_kwargs(func)
    try:
        return _TAKES_KWARGS[target]
    except KeyError:
        answer = _accepts_kwargs(target)
        _TAKES_KWARGS[target] = answer
        return answer


def install() -> None:
    """Use these from now on, in this process (idempotent)."""
    hooks.EventAliaser.__init__ = _aliaser_init_sharing
    hooks.accepts_kwargs = accepts_kwargs


def botocore_own() -> tuple[Any, Any]:
    """botocore's own aliaser __init__ and accepts_kwargs (for the test that compares)."""
    return _aliaser_init, _accepts_kwargs
