"""The deploy rehearsal's world: the synthesised stack (phase=migrating, where every function
has work), its assets from cdk.out, the layer and runtime directories (devkit.layer), a moto
server on loopback holding the stand-in table, bus, topic and queue, and a runner that starts a
function the way Lambda would (tests/rehearsal/bootstrap.py in a fresh interpreter)."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest

from devkit import layer
from devkit.schema import create_table
from saga_index.dynamo import deserialize
from tests.support.backends import Backend

REPO_ROOT = Path(__file__).resolve().parents[2]
BOOTSTRAP = Path(__file__).resolve().parent / "bootstrap.py"
STACK = "RenewalSagaIndex"
REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's account: ARNs it returns carry it
PARTITION = "aws"
# The phase in which every function has work to do (the backfill runs only while migrating).
REHEARSAL_CONTEXT = {"phase": "migrating"}
MARKER = "@@rehearsal-invocation@@"
# Importable from the project's .venv, never from a deployed function.
DEV_ONLY_MODULES = ("click", "rich", "moto", "pytest", "aws_cdk", "pydantic_settings", "devkit")
STAND_IN_QUEUE = "rehearsal-bus-tap"


class UnresolvableError(ValueError):
    pass


@dataclass(frozen=True)
class Synth:
    outdir: Path
    template: dict[str, Any]
    assets: dict[str, Any]

    @property
    def resources(self) -> dict[str, Any]:
        return dict(self.template["Resources"])

    def of_type(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.resources.items() if v["Type"] == kind}

    def asset_dir(self, function_id: str) -> Path:
        key = self.resources[function_id]["Properties"]["Code"]["S3Key"]
        for entry in self.assets["files"].values():
            for destination in entry["destinations"].values():
                if destination["objectKey"] == key:
                    return self.outdir / entry["source"]["path"]
        raise LookupError(f"{function_id}: no asset in the manifest has object key {key}")


def _synthesise(outdir: Path) -> Synth:
    # Exactly what `cdk synth -c phase=migrating` produces: the CLI hands -c values to the
    # app through CDK_CONTEXT_JSON.
    env = {
        **os.environ,
        "CDK_OUTDIR": str(outdir),
        "CDK_CONTEXT_JSON": json.dumps(REHEARSAL_CONTEXT),
    }
    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, f"synth failed:\n{result.stdout}\n{result.stderr}"
    template = json.loads((outdir / f"{STACK}.template.json").read_text(encoding="utf-8"))
    assets = json.loads((outdir / f"{STACK}.assets.json").read_text(encoding="utf-8"))
    return Synth(outdir=outdir, template=template, assets=assets)


@pytest.fixture(scope="session")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return _synthesise(tmp_path_factory.mktemp("cdk-rehearsal"))


@pytest.fixture(scope="session")
def dependency_paths() -> tuple[Path, Path]:
    """(layer, runtime boto3): built by `make test` first; built here if missing."""
    return layer.ensure_all()


# ---- the stand-in stack: logical ids -> local names and ARNs -----------------------------------


@dataclass
class StandIn:
    """Resolves the template's references to the local stand-in resources."""

    synth: Synth
    refs: dict[str, str] = field(default_factory=dict)
    arns: dict[str, str] = field(default_factory=dict)
    pseudo: dict[str, str] = field(
        default_factory=lambda: {
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT,
            "AWS::Partition": PARTITION,
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": STACK,
        }
    )

    def __post_init__(self) -> None:
        for logical_id, resource in self.synth.resources.items():
            props = resource.get("Properties", {})
            kind = resource["Type"]
            if kind == "AWS::DynamoDB::Table":
                name = props.get("TableName", f"{STACK}-{logical_id}")
                self.refs[logical_id] = name
                self.arns[logical_id] = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}"
            elif kind == "AWS::Events::EventBus":
                name = props["Name"]
                self.refs[logical_id] = name
                self.arns[logical_id] = f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/{name}"
            elif kind == "AWS::SNS::Topic":
                arn = f"arn:aws:sns:{REGION}:{ACCOUNT}:{STACK}-{logical_id}"
                self.refs[logical_id] = arn
            elif kind == "AWS::Lambda::Function":
                name = props.get("FunctionName", f"{STACK}-{logical_id}")
                self.refs[logical_id] = name
                self.arns[logical_id] = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"

    def resolve(self, value: Any) -> Any:
        if isinstance(value, str | int | float | bool):
            return value
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            raise UnresolvableError(f"cannot resolve {value!r}")
        if len(value) == 1:
            ((fn, arg),) = value.items()
            if fn == "Ref":
                if arg in self.pseudo:
                    return self.pseudo[arg]
                if arg in self.refs:
                    return self.refs[arg]
                raise UnresolvableError(f"no stand-in for Ref {arg}")
            if fn == "Fn::GetAtt":
                logical_id, attribute = arg
                if attribute == "Arn" and logical_id in self.arns:
                    return self.arns[logical_id]
                raise UnresolvableError(f"no stand-in for GetAtt {logical_id}.{attribute}")
            if fn == "Fn::Join":
                separator, parts = arg
                return separator.join(str(self.resolve(p)) for p in parts)
            if fn.startswith("Fn::"):
                raise UnresolvableError(f"the rehearsal does not resolve {fn}: {arg!r}")
        return {k: self.resolve(v) for k, v in value.items()}

    @property
    def table_name(self) -> str:
        (logical_id,) = self.synth.of_type("AWS::DynamoDB::Table")
        return self.refs[logical_id]

    @property
    def bus_name(self) -> str:
        (logical_id,) = self.synth.of_type("AWS::Events::EventBus")
        return self.refs[logical_id]


# ---- the moto server -----------------------------------------------------------------------


@dataclass
class World:
    endpoint_url: str
    stand_in: StandIn
    dynamodb: Any
    events: Any
    sqs: Any
    queue_url: str
    xray: socket.socket  # where the X-Ray SDK sends segments (AWS_XRAY_DAEMON_ADDRESS)

    @property
    def xray_port(self) -> int:
        return int(self.xray.getsockname()[1])

    def drain_xray(self) -> list[dict[str, Any]]:
        """Segment documents received so far (UDP datagrams: a JSON header line, then JSON)."""
        documents: list[dict[str, Any]] = []
        self.xray.setblocking(False)
        while True:
            try:
                datagram = self.xray.recv(65536)
            except BlockingIOError:
                return documents
            _, _, body = datagram.decode("utf-8").partition("\n")
            documents.append(json.loads(body))

    def drain_bus(self) -> list[dict[str, Any]]:
        received: list[dict[str, Any]] = []
        while True:
            page = self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10)
            messages = page.get("Messages", [])
            if not messages:
                return received
            for message in messages:
                received.append(json.loads(message["Body"]))
                self.sqs.delete_message(
                    QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"]
                )


@pytest.fixture(scope="session")
def world(synth: Synth) -> Iterator[World]:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        stand_in = StandIn(synth)
        kwargs: dict[str, Any] = {"region_name": REGION, "endpoint_url": endpoint}
        dynamodb = boto3.client("dynamodb", **kwargs)
        create_table(dynamodb, stand_in.table_name, synth.template)
        events = boto3.client("events", **kwargs)
        events.create_event_bus(Name=stand_in.bus_name)
        sns = boto3.client("sns", **kwargs)
        for logical_id in synth.of_type("AWS::SNS::Topic"):
            sns.create_topic(Name=stand_in.refs[logical_id].rsplit(":", 1)[1])
        sqs = boto3.client("sqs", **kwargs)
        queue_url = sqs.create_queue(QueueName=STAND_IN_QUEUE)["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        events.put_rule(
            Name="everything",
            EventBusName=stand_in.bus_name,
            EventPattern=json.dumps({"account": [ACCOUNT]}),
        )
        events.put_targets(
            Rule="everything",
            EventBusName=stand_in.bus_name,
            Targets=[{"Id": "tap", "Arn": queue_arn}],
        )
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as xray:
            xray.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
            xray.bind(("127.0.0.1", 0))
            yield World(
                endpoint_url=endpoint,
                stand_in=stand_in,
                dynamodb=dynamodb,
                events=events,
                sqs=sqs,
                queue_url=queue_url,
                xray=xray,
            )
    finally:
        server.stop()


# ---- starting a function the way Lambda does ---------------------------------------------------


@dataclass
class Invocation:
    ok: bool
    result: Any
    error: str | None
    calls: list[dict[str, Any]]
    modules: dict[str, str]
    log: list[str]

    @property
    def emf(self) -> list[dict[str, Any]]:
        docs = []
        for line in self.log:
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict) and "_aws" in doc:
                docs.append(doc)
        return docs

    def metric(self, name: str, **dimensions: str) -> list[float]:
        values: list[float] = []
        for doc in self.emf:
            declared = {m["Name"] for d in doc["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]}
            if name in declared and all(doc.get(k) == v for k, v in dimensions.items()):
                value = doc[name]
                values.extend(value if isinstance(value, list) else [value])
        return values


@dataclass
class FunctionUnderTest:
    logical_id: str
    properties: dict[str, Any]
    asset: Path
    environment: dict[str, str]


def function_under_test(synth: Synth, stand_in: StandIn, logical_id: str) -> FunctionUnderTest:
    props = synth.resources[logical_id]["Properties"]
    variables = props.get("Environment", {}).get("Variables", {})
    return FunctionUnderTest(
        logical_id=logical_id,
        properties=props,
        asset=synth.asset_dir(logical_id),
        environment={k: str(stand_in.resolve(v)) for k, v in variables.items()},
    )


class LambdaProcess:
    """One execution environment: a fresh interpreter, warm across its invocations."""

    def __init__(
        self, function: FunctionUnderTest, world: World, dependencies: tuple[Path, Path]
    ) -> None:
        self.function = function
        name = world.stand_in.refs[function.logical_id]
        self.context_base = {
            "function_name": name,
            "invoked_function_arn": world.stand_in.arns[function.logical_id],
            "memory_limit_in_mb": function.properties.get("MemorySize", 128),
            "timeout_seconds": function.properties.get("Timeout", 3),
        }
        trace = f"Root=1-{uuid.uuid4().hex[:8]}-{uuid.uuid4().hex[:24]};Parent={uuid.uuid4().hex[:16]};Sampled=1"  # noqa: E501
        # Exactly the template's variables, plus what Lambda itself sets and the local endpoint.
        self.env = {
            **function.environment,
            "AWS_ENDPOINT_URL": world.endpoint_url,
            "AWS_ACCESS_KEY_ID": "rehearsal",
            "AWS_SECRET_ACCESS_KEY": "rehearsal",
            "AWS_SESSION_TOKEN": "rehearsal",
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_LAMBDA_FUNCTION_NAME": name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(self.context_base["memory_limit_in_mb"]),
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_EXECUTION_ENV": f"AWS_Lambda_{function.properties['Runtime']}",
            "AWS_LAMBDA_LOG_FORMAT": function.properties.get("LoggingConfig", {}).get(
                "LogFormat", "Text"
            ),
            "LAMBDA_TASK_ROOT": str(function.asset),
            "LAMBDA_RUNTIME_DIR": str(dependencies[1]),
            "_HANDLER": function.properties["Handler"],
            "_X_AMZN_TRACE_ID": trace,
            "AWS_XRAY_DAEMON_ADDRESS": f"127.0.0.1:{world.xray_port}",
            "AWS_XRAY_CONTEXT_MISSING": "LOG_ERROR",
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "TZ": ":UTC",
        }
        self._log = tempfile.TemporaryFile(mode="w+", encoding="utf-8")  # noqa: SIM115
        read_fd, write_fd = os.pipe()
        layer_dir, runtime_dir = dependencies
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-I",
                "-S",
                "-B",  # /var/task is read-only in Lambda: never write __pycache__ into the asset
                str(BOOTSTRAP),
                str(write_fd),
                str(function.asset),
                str(layer_dir),
                str(runtime_dir),
            ],
            stdin=subprocess.PIPE,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=self.env,
            pass_fds=(write_fd,),
            text=True,
            cwd=str(function.asset),
        )
        os.close(write_fd)
        self._responses = os.fdopen(read_fd, "r", encoding="utf-8")

    def _request(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        line = self._responses.readline()
        if not line:
            self._log.seek(0)
            raise AssertionError(f"the function's process died:\n{self._log.read()}")
        response: dict[str, Any] = json.loads(line)
        return response

    def probe(self, modules: tuple[str, ...]) -> dict[str, str | None]:
        return dict(self._request({"probe": list(modules)})["probe"])

    def invoke(self, event: Any) -> Invocation:
        request_id = str(uuid.uuid4())
        response = self._request(
            {
                "handler": self.function.properties["Handler"],
                "event": event,
                "context": {**self.context_base, "aws_request_id": request_id},
            }
        )
        self._log.seek(0)
        lines = self._log.read().splitlines()
        self._log.seek(0, os.SEEK_END)
        marker = f"{MARKER} {request_id}"
        start = lines.index(marker) + 1 if marker in lines else 0
        log = [line for line in lines[start:] if not line.startswith(MARKER)]
        error = None
        if not response["ok"]:
            error = f"{response['errorType']}: {response['errorMessage']}\n{response['trace']}"
        return Invocation(
            ok=response["ok"],
            result=response.get("result"),
            error=error,
            calls=response["calls"],
            modules=response["modules"],
            log=log,
        )

    def close(self) -> str:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=30)
        self._responses.close()
        self._log.seek(0)
        output = self._log.read()
        self._log.close()
        return output


# ---- the scenario: every function invoked as its trigger would, in a deployable order ----


DAY = datetime(2026, 7, 10, tzinfo=UTC)
# The sweeps' schedule payload, as infra/schedules.py builds it (Scheduler's context
# attributes arrive as strings).
SCHEDULED = {
    "drift-guard": DAY.replace(hour=12, minute=0),
    "workflow-health-sweep": DAY.replace(hour=12, minute=1),
    "retry-failed-prepare": DAY.replace(hour=12, minute=2),
    "stuck-saga-sweep": DAY.replace(hour=12, minute=3),
    "agent-metrics-snapshot": DAY.replace(hour=12, minute=4),
}
BACKFILL_HANDLERS = {
    "plan": "handlers.backfill_plan.handler",
    "worker": "handlers.backfill_worker.handler",
    "verify": "handlers.backfill_verify.handler",
}


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def scheduler_event(job: str, attempt: int = 1) -> dict[str, Any]:
    return {
        "job": job,
        "scheduledTime": SCHEDULED[job].strftime("%Y-%m-%dT%H:%M:%SZ"),
        "executionId": f"rehearsal-{job}-{attempt}",
        "attempt": str(attempt),
    }


@dataclass
class Rehearsal:
    functions: dict[str, FunctionUnderTest]  # by logical id
    by_handler: dict[str, str]  # handler string -> logical id
    invocations: dict[str, list[Invocation]] = field(default_factory=dict)
    probes: dict[str, dict[str, str | None]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    segments: list[dict[str, Any]] = field(default_factory=list)
    rows_before: list[dict[str, Any]] = field(default_factory=list)
    rows_after: list[dict[str, Any]] = field(default_factory=list)
    shard_count: int = 16


def _seed(backend: Backend, shard_count: int) -> None:
    health = SCHEDULED["workflow-health-sweep"]
    retry = SCHEDULED["retry-failed-prepare"]
    backend.put_saga(
        "stale-heartbeat",
        "person-1",
        workflowHeartbeatAt=iso(health - timedelta(minutes=31)),
        updatedAt=iso(health - timedelta(minutes=31)),
    )
    backend.put_saga(
        "failed-prepare",
        "person-2",
        state="PREPARE_FAILED",
        updatedAt=iso(retry - timedelta(minutes=11)),
    )
    backend.put_saga(
        "stuck",
        "person-3",
        state="PREPARING",
        updatedAt=iso(DAY - timedelta(days=3)),
        workflowHeartbeatAt=iso(health - timedelta(minutes=1)),
    )
    for n in range(12):
        backend.put_saga(
            f"fresh-{n}",
            f"person-{10 + n}",
            updatedAt=iso(health - timedelta(minutes=1)),
            workflowHeartbeatAt=iso(health - timedelta(minutes=1)),
        )
    # A row the backfill must leave on the legacy key (no personId to shard on): the verifier
    # re-reads it with a consistent GetItem before it counts it as left behind on purpose.
    backend.put_saga("no-person", None, updatedAt=iso(health - timedelta(minutes=1)))
    for n in range(3):  # already moved by the application's writers (migrating phase)
        backend.put_saga(
            f"sharded-{n}",
            f"person-{40 + n}",
            gsi4pk="shard",
            shard_count=shard_count,
            updatedAt=iso(health - timedelta(minutes=1)),
            workflowHeartbeatAt=iso(health - timedelta(minutes=1)),
        )


def _by_handler(synth: Synth) -> dict[str, str]:
    return {
        resource["Properties"]["Handler"]: logical_id
        for logical_id, resource in synth.of_type("AWS::Lambda::Function").items()
    }


@pytest.fixture(scope="session")
def rehearsal(
    synth: Synth, world: World, dependency_paths: tuple[Path, Path]
) -> Iterator[Rehearsal]:
    functions = {
        logical_id: function_under_test(synth, world.stand_in, logical_id)
        for logical_id in synth.of_type("AWS::Lambda::Function")
    }
    by_handler = _by_handler(synth)
    shard_count = int(next(iter(functions.values())).environment["SAGA_INDEX_SHARDS"])
    result = Rehearsal(functions=functions, by_handler=by_handler, shard_count=shard_count)
    backend = Backend("rehearsal", world.dynamodb, world.stand_in.table_name, world.endpoint_url)
    _seed(backend, shard_count)
    result.rows_before = [deserialize(i) for i in backend.scan_all()]
    processes: dict[str, LambdaProcess] = {}

    def process(handler: str) -> LambdaProcess:
        logical_id = by_handler[handler]
        if logical_id not in processes:
            processes[logical_id] = LambdaProcess(functions[logical_id], world, dependency_paths)
            result.probes[logical_id] = processes[logical_id].probe(DEV_ONLY_MODULES)
        return processes[logical_id]

    def invoke(handler: str, event: Any) -> Any:
        invocation = process(handler).invoke(event)
        result.invocations.setdefault(by_handler[handler], []).append(invocation)
        assert invocation.ok, f"{handler} failed:\n{invocation.error}\n" + "\n".join(invocation.log)
        return invocation.result

    try:
        invoke("handlers.drift_guard.handler", scheduler_event("drift-guard"))
        for job, function in (
            ("workflow-health-sweep", "workflow_health_sweep"),
            ("retry-failed-prepare", "retry_failed_prepare"),
            ("stuck-saga-sweep", "stuck_saga_sweep"),
            ("agent-metrics-snapshot", "agent_metrics_snapshot"),
        ):
            invoke(f"handlers.sweeps.{function}", scheduler_event(job))
        result.events = world.drain_bus()
        # The state machine's task inputs (infra/backfill.py): the execution input to the plan,
        # the ItemSelector's template + segment to the worker, looped with cursor and totals,
        # then {"request", "segments"} to the verifier.
        plan = invoke(
            BACKFILL_HANDLERS["plan"],
            {"direction": "forward", "totalSegments": 2, "maxWritesPerSecond": 40, "dryRun": False},
        )
        segment_results = []
        for segment in plan["segments"]:
            worker_input = {**plan["template"], "segment": segment}
            while True:
                output = invoke(BACKFILL_HANDLERS["worker"], worker_input)
                if output["cursor"] is None:
                    segment_results.append(output)
                    break
                worker_input = {**worker_input, "cursor": output["cursor"], "totals": output}
        verify_input = {"request": plan["request"], "segments": segment_results}
        invoke(BACKFILL_HANDLERS["verify"], verify_input)
        # A writer still on the old phase puts a row on the legacy key after the Scan passed:
        # the verifier must see it, confirm it with a consistent GetItem and fail the run.
        late = backend.put_saga("late-writer", "person-99")
        invoke(BACKFILL_HANDLERS["verify"], verify_input)
        world.dynamodb.delete_item(
            TableName=backend.table_name, Key={"PK": {"S": late["PK"]}, "SK": {"S": late["SK"]}}
        )
        drift_event = scheduler_event("drift-guard", attempt=2)
        invoke("handlers.drift_guard.handler", drift_event)
        result.rows_after = [deserialize(i) for i in backend.scan_all()]
        result.segments = world.drain_xray()
        yield result
    finally:
        for running in processes.values():
            running.close()
