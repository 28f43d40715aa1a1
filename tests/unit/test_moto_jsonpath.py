"""tests/support/moto_jsonpath.py: moto's extract_json finds with a path parsed once what it finds
with a path parsed afresh, call after call (the same expression reused on other data), and the
path is parsed only once."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from moto.stepfunctions.parser.asl.utils import json_path

from tests.support import moto_jsonpath

_DATA: list[Any] = [
    {"a": {"b": [1, 2, 3]}, "c": "x", "items": [{"id": 1, "ok": True}, {"id": 2, "ok": False}]},
    {"a": {"b": []}, "c": "y", "items": []},
    {"a": {"b": [{"c": 1}]}, "c": None, "items": [{"id": 3, "ok": True}]},
]
_PATHS = [
    "$",
    "$.a",
    "$.a.b",
    "$.a.b[0]",
    "$.a.b[*]",
    "$.c",
    "$.items[?(@.ok == true)].id",
    "$.missing",
]


def _found(path: str, data: Any) -> Any:
    try:
        return ("found", json_path.extract_json(path, data))
    except json_path.NoSuchJsonPathError as error:
        return ("missing", str(error))


@pytest.mark.parametrize("path", _PATHS)
def test_a_path_parsed_once_finds_what_a_fresh_parse_finds(path: str) -> None:
    with mock.patch.object(json_path, "parse", moto_jsonpath.jsonpath_own()):
        own = [_found(path, data) for data in _DATA]
    moto_jsonpath.install()

    assert [_found(path, data) for data in _DATA] == own
    assert [_found(path, data) for data in _DATA] == own  # the same expression, again


def test_each_path_is_parsed_once() -> None:
    moto_jsonpath.install()
    moto_jsonpath.parse.cache_clear()
    for data in _DATA * 3:
        _found("$.a.b", data)

    assert moto_jsonpath.parse.cache_info().misses == 1
    assert moto_jsonpath.parse.cache_info().hits == len(_DATA) * 3 - 1
