"""Local tables built FROM the synthesised CloudFormation, never from a hand-copied schema.

Component tests (moto), conformance tests (dynalite) and the local demo all call create_table(),
so a key or index change in infra/ reaches every local table on the next run instead of
silently drifting from what deploys.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from hashlib import sha256
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
# Not cdk.out: `make synth` writes the committed configuration there, which attaches to the existing
# table (importExistingTable=true) and so holds no table definition to copy.
CDK_OUT = REPO_ROOT / "build" / "owned-table-synth"
TEMPLATE_PATH = CDK_OUT / "RenewalSagaIndex.template.json"
# Local tables need the stack that OWNS its table, whatever cdk.json commits (production attaches).
_OWNED_TABLE_CONTEXT = {"importExistingTable": False}
TABLE_RESOURCE_TYPE = "AWS::DynamoDB::Table"
# Infra takes every shared name (the GSI's among them), the shard rule and the job specification
# from the domain library's key scheme (saga_index.index): a change there must also trigger a
# fresh synth.
_DOMAIN_SOURCES = tuple(sorted((REPO_ROOT / "lambdas" / "saga_index" / "index").glob("*.py")))
_SYNTH_TIMEOUT_SECONDS = 300


class SchemaError(RuntimeError):
    """The template cannot be synthesised, or holds no single table to copy."""


def template_sources() -> list[Path]:
    """Files whose change makes a synthesised template stale."""
    return [
        REPO_ROOT / "app.py",
        REPO_ROOT / "cdk.json",
        *sorted((REPO_ROOT / "infra").rglob("*.py")),
        *_DOMAIN_SOURCES,
    ]


def assembly_sources() -> list[Path]:
    """Files whose change makes any file of the synthesised cloud assembly stale: the template's
    sources, the pager's subscriptions (pager.json) and every file of the functions' asset
    (lambdas/ as infra/functions.py packs it: no CLI, no bytecode, no build metadata)."""
    asset = [
        source
        for package in ("handlers", "saga_index")
        for source in sorted((REPO_ROOT / "lambdas" / package).rglob("*"))
        if source.is_file() and "__pycache__" not in source.parts and source.suffix != ".pyc"
    ]
    return [*template_sources(), REPO_ROOT / "pager.json", *asset]


def is_stale(path: Path, sources: list[Path] | None = None) -> bool:
    """True when the template is missing or older than any file it is synthesised from
    (`sources`: template_sources() unless given)."""
    if not path.exists():
        return True
    built = path.stat().st_mtime
    return any(
        source.exists() and source.stat().st_mtime > built
        for source in (template_sources() if sources is None else sources)
    )


def load_template(path: Path | None = None) -> dict[str, Any]:
    """The synthesised RenewalSagaIndex template, synthesising first when it is stale.

    A custom path synthesises into that path's directory; the file name must still be the
    stack's template name.
    """
    template_path = TEMPLATE_PATH if path is None else Path(path)
    # Read under the lock too: synth_assembly() may be rewriting this directory for a change
    # only the assets see, and a template read half written is no template.
    with _synth_lock(template_path.parent):
        _synthesise_if_stale(template_path, template_sources())
        with template_path.open(encoding="utf-8") as handle:
            template: dict[str, Any] = json.load(handle)
    return template


def synth_assembly() -> Path:
    """The directory of the owned-table synthesis (load_template's), synthesised first when any
    file of it is stale, assets included: what starts the functions from their assets (the
    deploy rehearsal) needs them as `python app.py` would write them now. The caller reads the
    directory while no source changes (a test session)."""
    with _synth_lock(CDK_OUT):
        _synthesise_if_stale(TEMPLATE_PATH, assembly_sources())
    return CDK_OUT


def _synthesise_if_stale(template_path: Path, sources: list[Path]) -> None:
    """Under the caller's _synth_lock: parallel test workers would otherwise synthesise into the
    same directory at once."""
    if not is_stale(template_path, sources):
        return
    _synthesise(template_path.parent)
    if not template_path.exists():
        raise SchemaError(
            f"synthesis succeeded but wrote no {template_path.name} in {template_path.parent}"
        )


def synth_warnings(path: Path | None = None) -> list[str]:
    """The warnings synthesis attached to the stack's constructs (aws:cdk:warning in the cloud
    assembly beside the template), each once, without its acknowledgement tag."""
    template_path = TEMPLATE_PATH if path is None else Path(path)
    metadata = template_path.with_name(
        template_path.name.replace(".template.json", ".metadata.json")
    )
    if not metadata.exists():
        return []
    entries = json.loads(metadata.read_text(encoding="utf-8"))
    found: list[str] = []
    for records in entries.values():
        for record in records:
            if record.get("type") == "aws:cdk:warning":
                text = str(record.get("data", "")).split(" [ack: ")[0].strip()
                if text and text not in found:
                    found.append(text)
    return found


def table_create_kwargs(template: Mapping[str, Any], table_name: str) -> dict[str, Any]:
    """boto3 `create_table` kwargs for the template's single table, under another name."""
    properties = _single_table(template).get("Properties", {})
    billing_mode = properties.get("BillingMode")
    if billing_mode != "PAY_PER_REQUEST":
        # create_table would then need ProvisionedThroughput the template may not carry.
        raise SchemaError(
            f"expected BillingMode PAY_PER_REQUEST, the template has {billing_mode!r}"
        )
    kwargs: dict[str, Any] = {
        "TableName": table_name,
        "KeySchema": _copy(properties["KeySchema"]),
        "AttributeDefinitions": _copy(properties["AttributeDefinitions"]),
        "BillingMode": billing_mode,
    }
    indexes = properties.get("GlobalSecondaryIndexes")
    if indexes:
        kwargs["GlobalSecondaryIndexes"] = [
            {
                "IndexName": index["IndexName"],
                "KeySchema": _copy(index["KeySchema"]),
                "Projection": _copy(index["Projection"]),
            }
            for index in indexes
        ]
    return kwargs


def create_table(client: Any, table_name: str, template: Mapping[str, Any] | None = None) -> None:
    """Create the table on the client's endpoint (moto, dynalite, AWS) and wait until ACTIVE."""
    kwargs = table_create_kwargs(load_template() if template is None else template, table_name)
    client.create_table(**kwargs)
    # The waiter's default 20 s delay would dominate a local run; local servers are ACTIVE
    # within milliseconds, and 120 polls still cover a real table.
    client.get_waiter("table_exists").wait(
        TableName=table_name, WaiterConfig={"Delay": 1, "MaxAttempts": 120}
    )


def delete_table(client: Any, table_name: str) -> None:
    """Delete the table and wait until it is gone. DynamoDB answers DeleteTable with the table
    DELETING, and so does dynalite even with --deleteTableMs 0 (it removes the table on a later
    tick): a CreateTable of the same name before then is refused with ResourceInUseException."""
    client.delete_table(TableName=table_name)
    # Polled every 50 ms (botocore's waiter sleeps the Delay as given): a local server's table
    # is gone within a tick or two, and 2,400 polls still cover a real table's two minutes.
    client.get_waiter("table_not_exists").wait(
        TableName=table_name, WaiterConfig={"Delay": 0.05, "MaxAttempts": 2400}
    )


def _single_table(template: Mapping[str, Any]) -> Mapping[str, Any]:
    tables = [
        (logical_id, resource)
        for logical_id, resource in template.get("Resources", {}).items()
        if resource.get("Type") == TABLE_RESOURCE_TYPE
    ]
    if not tables:
        raise SchemaError(
            f"the template defines no {TABLE_RESOURCE_TYPE}: it was synthesised with "
            "importExistingTable=true, so there is no table definition to copy; "
            "synthesise with importExistingTable=false"
        )
    if len(tables) > 1:
        names = ", ".join(logical_id for logical_id, _ in tables)
        raise SchemaError(f"expected one {TABLE_RESOURCE_TYPE}, the template defines: {names}")
    return tables[0][1]


def _copy(value: Any) -> Any:
    # A deep copy through JSON: callers may mutate kwargs without touching the template.
    return json.loads(json.dumps(value))


def _synthesise(outdir: Path) -> None:
    outdir.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "CDK_OUTDIR": str(outdir),
        # How the CDK CLI hands `-c` values to the app: they win over cdk.json.
        "CDK_CONTEXT_JSON": json.dumps(_OWNED_TABLE_CONTEXT),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "CDK_DISABLE_VERSION_CHECK": "1",
    }
    try:
        result = subprocess.run(
            [sys.executable, "app.py"],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=_SYNTH_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired as err:
        raise SchemaError(
            f"CDK synthesis did not finish in {_SYNTH_TIMEOUT_SECONDS} s:\n"
            f"--- stdout ---\n{err.stdout!s}\n--- stderr ---\n{err.stderr!s}"
        ) from err
    if result.returncode != 0:
        raise SchemaError(
            f"CDK synthesis failed (exit {result.returncode}) running {sys.executable} app.py "
            f"in {REPO_ROOT}:\n--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}"
        )


@contextmanager
def _synth_lock(outdir: Path) -> Iterator[None]:
    # The lock lives outside the repository so it never shows up in `git status`.
    digest = sha256(str(outdir.resolve()).encode("utf-8")).hexdigest()[:16]
    lock_path = Path(tempfile.gettempdir()) / f"devkit-synth-{digest}.lock"
    with lock_path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
