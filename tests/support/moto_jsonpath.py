"""moto's Step Functions interpreter reads each JSONPath with one parser per process.

moto's ASL interpreter evaluates every InputPath, OutputPath and Parameters path of a state
(`moto.stepfunctions.parser.asl.utils.json_path.extract_json`) by calling jsonpath_ng's
`ext.parse`, which builds a whole new parser each time: a lexer and the LALR tables, generated
again by ply (about 7 % of the state-machine component tests' CPU). A parsed path is used only
to `find` in the state's data, which reads the expression and never changes it, so the same
path string gives an equal expression every time: here each string is parsed once and its
expression reused. tests/unit/test_moto_jsonpath.py checks the cached expressions find what
fresh ones find.
"""

from __future__ import annotations

import functools
from typing import Any

from moto.stepfunctions.parser.asl.utils import json_path

_parse = json_path.parse


@functools.cache
def parse(path: str) -> Any:
    """jsonpath_ng.ext's parse of `path`, once per path (moto passes only the path)."""
    return _parse(path)


def install() -> None:
    """Use it from now on, in this process (idempotent)."""
    json_path.parse = parse


def jsonpath_own() -> Any:
    """jsonpath_ng.ext's own parse (for the test that compares)."""
    return _parse
