"""History first (tests/support/control_history_contract.py) on moto."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.backends import Backend
from tests.support.control_fixtures import moto_backend
from tests.support.control_history_contract import HistoryContract


class TestHistoryOnMoto(HistoryContract):
    @pytest.fixture
    def dynamo(self, synthesized_template: dict[str, Any]) -> Iterator[Backend]:
        with moto_backend("history", synthesized_template) as backend:
            yield backend
