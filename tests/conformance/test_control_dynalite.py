"""The control record on a real DynamoDB-compatible server (dynalite): the same contract as on
moto (transitions, compare-and-set, lease, history).

Node reading a record Python wrote, in every state and for every person of
docs/shard-vectors.json, is tests/conformance/test_typescript_client.py (the TypeScript package).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.component.test_control_store import ControlContract
from tests.support.backends import Backend, make_backend
from tests.support.control_history_contract import HistoryContract

pytestmark = pytest.mark.conformance


class TestControlOnDynalite(ControlContract):
    @pytest.fixture
    def dynamo(self, synthesized_template: dict[str, Any], dynalite_endpoint: str) -> Backend:
        return make_backend("dynalite", synthesized_template, endpoint_url=dynalite_endpoint)


class TestHistoryFirstOnDynalite(HistoryContract):
    """The intent, settle, take-over and abandon conditions, evaluated by dynalite."""

    @pytest.fixture
    def dynamo(self, synthesized_template: dict[str, Any], dynalite_endpoint: str) -> Backend:
        return make_backend("dynalite", synthesized_template, endpoint_url=dynalite_endpoint)
