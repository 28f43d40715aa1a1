"""Local tables (`make demo`, `make local`, the conformance suite) come from the synthesised
template on dynalite: they carry the open-saga index, ACTIVE, and the readiness check says so.
The status command it would print for a local table names the local endpoint."""

from __future__ import annotations

from typing import Any

import pytest

from saga_index.index import names
from saga_index.store import open_index_readiness, open_index_status_command
from tests.support.backends import make_backend

pytestmark = pytest.mark.conformance


def test_a_local_table_from_the_template_has_the_open_index_ready(
    synthesized_template: dict[str, Any], dynalite_endpoint: str
) -> None:
    backend = make_backend("dynalite", synthesized_template, endpoint_url=dynalite_endpoint)

    readiness = open_index_readiness(backend.client, backend.table_name)

    assert readiness.ready, readiness.problem
    assert readiness.index_status == "ACTIVE"
    indexes = backend.client.describe_table(TableName=backend.table_name)["Table"][
        "GlobalSecondaryIndexes"
    ]
    assert sorted(i["IndexName"] for i in indexes) == [names.OPEN_INDEX_NAME, names.INDEX_NAME]
    assert f"--endpoint-url {dynalite_endpoint}" in open_index_status_command(
        backend.table_name, region="us-east-1", endpoint_url=dynalite_endpoint
    )
