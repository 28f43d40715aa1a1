"""The same drift contract against a real DynamoDB-compatible server process (dynalite)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.backends import Backend, make_backend
from tests.support.drift_contract import DriftContract

pytestmark = pytest.mark.conformance


class TestDriftOnDynalite(DriftContract):
    @pytest.fixture
    def dynamo(self, synthesized_template: dict[str, Any], dynalite_endpoint: str) -> Backend:
        return make_backend("dynalite", synthesized_template, endpoint_url=dynalite_endpoint)
