"""The backfill contract on moto (in-process)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from tests.support.backends import Backend, make_backend
from tests.support.backfill_contract import BackfillContract
from tests.support.faults import instant_botocore_backoff


@pytest.fixture(autouse=True)
def _no_botocore_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    instant_botocore_backoff(monkeypatch)


class TestBackfillOnMoto(BackfillContract):
    injected_throttles_apply_the_write = True

    @pytest.fixture
    def dynamo(self, synthesized_template: dict[str, Any]) -> Iterator[Backend]:
        with mock_aws():
            yield make_backend("moto", synthesized_template, endpoint_url=None)
