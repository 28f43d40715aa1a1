"""What tracing costs a function HERE, option by option, side by side in one run:

    python -m bench.tracing [--runs N]        (or: python -m bench --only tracing)

  none             no tracing code at all (the baseline)
  powertools-xray  Powertools Tracer on the X-Ray SDK: `Tracer()` patching botocore, the handler
                   wrapped in `capture_lambda_handler` (what lambdas/handlers/runtime.py did)
  adot             OpenTelemetry as AWS ships it for Lambda: the Python content of the managed
                   ADOT layer (aws-opentelemetry-distro), started the way its `otel-instrument`
                   wrapper starts a function, with our configuration (traces only, Application
                   Signals off); the function's code imports no tracer
  adot-fast-start  the same layer with OTEL_AWS_LAMBDA_FAST_START=true: the wrapper's "lite
                   mode" (the distro's own minimal SDK, botocore instrumented, no re-exec
                   through opentelemetry-instrument)

Each option is installed from its committed pins (bench/tracing_requirements/*.txt, every
transitive dependency listed, `uv pip install --no-deps --target build/bench-tracing/<option>`,
devkit.layer's installer)
for the running interpreter. Every option shares the runtime's boto3 (runtime.txt) and the
Powertools layer without its tracer extra (base.txt, the functions' Logger); what an option adds
is its own directory, whose installed size (bytes, files) is its package cost.

Cold start is one FRESH interpreter (a bare virtual environment: nothing on its path but the
directories named) from spawn to the first invocation's return: the stack imported and
initialised, then one handler call that creates a DynamoDB client and does one GetItem answered
by botocore's Stubber (no network). Exporters point at a UDP socket of this process standing in
for the X-Ray daemon Lambda runs with active tracing: the X-Ray SDK sends its segments there, and
the ADOT layer's configurator sends OTLP spans there too (in Lambda it does exactly that). The
run FAILS unless each traced option delivered a span for the DynamoDB call and the baseline
delivered nothing. Options run interleaved (one of each per round, rotating the order), after
one discarded warm-up each; medians are compared with the baseline's.

What it does not measure: Lambda's own init (the sandbox, the layer mount), the arm64 machines
the functions run on, or Python 3.13 (the runtime): the ratios between options are what carries
over, not the milliseconds.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.output import emit, num, progress, save
from devkit.dynalite import REPO_ROOT
from devkit.layer import DependencyDir, LayerBuildError, running_python

NAME = "tracing"
RUNS = 15
# One measured round: each option's warm-up and one cold start (the pins' stacks must be built).
TINY: dict[str, Any] = {"runs": 1}
BASELINE = "none"
OPTIONS = (BASELINE, "powertools-xray", "adot", "adot-fast-start")
# The directory each option adds to the import path (adot-fast-start is the same layer content).
OPTION_DIRS = {"powertools-xray": "powertools-xray", "adot": "adot", "adot-fast-start": "adot"}
REQUIREMENTS_DIR = Path(__file__).resolve().parent / "tracing_requirements"
BUILD_ROOT = REPO_ROOT / "build" / "bench-tracing"
SHARED = ("runtime", "base")  # every option's import path, after its own directory
TIMEOUT_SECONDS = 60.0
_PIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*==[A-Za-z0-9_.+!-]+")

# The two sources below run in the child process. Every os.environ[...] they read is set by
# environment() / adot_environment(), as Lambda sets its own variables: a missing one is a bug of
# this bench, the child exits non-zero and cold_start() raises TracingBenchError naming the option.
# The function every option runs (the asset, as /var/task holds it). The Powertools Logger is
# what every function of the stack imports anyway; only option powertools-xray adds a Tracer.
FUNCTION_MODULE = "bench_function"
FUNCTION_SOURCE = """\
import os

import boto3
from aws_lambda_powertools import Logger
from botocore.stub import Stubber

logger = Logger(service="bench-tracing")

if os.environ["BENCH_TRACING_OPTION"] == "powertools-xray":
    from aws_lambda_powertools import Tracer

    tracer = Tracer(service="bench-tracing")
    traced = tracer.capture_lambda_handler
else:
    def traced(handler):
        return handler

KEY = {"PK": {"S": "RSAGA#bench"}, "SK": {"S": "META"}}


@traced
def handler(event, context):
    client = boto3.client("dynamodb", region_name=os.environ["AWS_REGION"])
    stubber = Stubber(client)
    stubber.add_response("get_item", {"Item": KEY}, {"TableName": "bench", "Key": KEY})
    with stubber:
        item = client.get_item(TableName="bench", Key=KEY)
    logger.info("read one item", extra={"found": "Item" in item})
    return {"found": "Item" in item}
"""

# What Lambda's runtime does with _HANDLER, and for option adot what the layer's otel_wrapper.py
# does first (aws-otel-python-instrumentation, lambda-layer/src/otel_wrapper.py: instrument the
# handler named by ORIG_HANDLER with an extractor that takes the parent from _X_AMZN_TRACE_ID).
BOOTSTRAP_SOURCE = """\
import importlib
import json
import os
import sys


class Context:
    function_name = os.environ["AWS_LAMBDA_FUNCTION_NAME"]
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:" + function_name
    memory_limit_in_mb = 256
    aws_request_id = "bench-request"
    log_group_name = "/aws/lambda/" + function_name
    log_stream_name = "bench"

    def get_remaining_time_in_millis(self):
        return 60000


def otel_wrapper():
    if os.environ.get("OTEL_AWS_LAMBDA_FAST_START", "false").lower() == "true":
        from amazon.opentelemetry.distro.opentelemetry_lite_sdk import configure_lite_mode

        configure_lite_mode()
    from opentelemetry.context import Context as OtelContext
    from opentelemetry.instrumentation.aws_lambda import _X_AMZN_TRACE_ID, AwsLambdaInstrumentor
    from opentelemetry.propagate import get_global_textmap
    from opentelemetry.propagators.aws.aws_xray_propagator import TRACE_HEADER_KEY
    from opentelemetry.trace import get_current_span

    def extract(event):
        headers = {TRACE_HEADER_KEY: os.environ[_X_AMZN_TRACE_ID]}
        extracted = get_global_textmap().extract(headers)
        return extracted if get_current_span(extracted).get_span_context() else OtelContext()

    AwsLambdaInstrumentor().instrument(event_context_extractor=extract)
    return os.environ["ORIG_HANDLER"]


path = otel_wrapper() if "ORIG_HANDLER" in os.environ else os.environ["_HANDLER"]
module, _, name = path.rpartition(".")
result = getattr(importlib.import_module(module), name)({}, Context())
with os.fdopen(int(os.environ["BENCH_RESULT_FD"]), "w") as report:
    report.write(json.dumps({"result": result}) + "\\n")
"""

# The otel-instrument wrapper's defaults (lambda-layer/src/otel-instrument): the instrumentations
# it leaves on are botocore's (and a few that find nothing to patch here); aws-lambda is added by
# otel_wrapper instead.
ADOT_DISABLED_INSTRUMENTATIONS = (
    "aio-pika,aiohttp-client,aiohttp-server,aiopg,asgi,asyncio,asyncpg,boto,boto3,cassandra,"
    "celery,confluent_kafka,dbapi,django,falcon,fastapi,flask,grpc_client,grpc_server,"
    "grpc_aio_client,grpc_aio_server,httpx,jinja2,kafka,logging,mysql,mysqlclient,pika,psycopg,"
    "psycopg2,pymemcache,pymongo,pymysql,pyramid,redis,remoulade,requests,sklearn,sqlalchemy,"
    "sqlite3,starlette,system_metrics,threading,tornado,tortoiseorm,wsgi,openai_agents,"
    "aws_openai_agents,aws_crewai,aws_langchain,aws_mcp,aws_llama-index,aws-lambda"
)


class TracingBenchError(RuntimeError):
    """A pin file is malformed, pip failed, a run failed, or an option's spans were missing."""


def read_pins(path: Path) -> tuple[str, ...]:
    """The `name==version` lines of a pin file (comments and blank lines skipped); anything else
    is refused with the file and line named, so an unpinned requirement never slips in."""
    pins: list[str] = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if not _PIN.fullmatch(line):
            raise TracingBenchError(
                f"{path}:{number}: {line!r} is not an exact pin (name==version); every "
                "requirement here is pinned, transitive ones included"
            )
        pins.append(line)
    if not pins:
        raise TracingBenchError(f"{path}: no pins")
    return tuple(pins)


def stack_dir(name: str, build_root: Path) -> DependencyDir:
    """One directory of pinned packages, build/bench-tracing/<name>/python, from <name>.txt:
    installed exactly as pinned (every transitive package is in the file), for the running
    interpreter, rebuilt only when the interpreter or the pins change (devkit.layer's stamp)."""
    return DependencyDir(
        name=f"tracing stack {name}",
        root=build_root / name / "python",
        requirements=read_pins(REQUIREMENTS_DIR / f"{name}.txt"),
        python=running_python(),
        constraints=None,
        resolve_dependencies=False,
    )


def ensure_stack(directory: DependencyDir) -> Path:
    if not directory.is_current():
        progress(f"tracing: installing {directory.name} into {directory.root}")
        try:
            directory.build()
        except LayerBuildError as err:
            raise TracingBenchError(str(err)) from err
    return directory.root


def installed_size(root: Path) -> tuple[int, int]:
    """(bytes, files) under `root` (the build stamp lives beside it, not in it)."""
    total = files = 0
    for path in root.rglob("*"):
        if path.is_file():
            total += path.stat().st_size
            files += 1
    return total, files


def bare_python(build_root: Path) -> Path:
    """A virtual environment with nothing installed: a child's import path is then exactly the
    directories it is given, never this project's .venv."""
    home = build_root / "python"
    python = home / "bin" / "python"
    if not python.exists():
        shutil.rmtree(home, ignore_errors=True)
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", str(home)], check=True, timeout=120
        )
    return python


def write_task(build_root: Path) -> Path:
    task = build_root / "task"
    task.mkdir(parents=True, exist_ok=True)
    (task / f"{FUNCTION_MODULE}.py").write_text(FUNCTION_SOURCE, encoding="utf-8")
    (task / "bench_bootstrap.py").write_text(BOOTSTRAP_SOURCE, encoding="utf-8")
    return task


@dataclass(frozen=True)
class BuildLayout:
    python: Path
    task: Path
    dirs: dict[str, Path]  # every stack's directory: runtime, base and each option but none


def environment(option: str, layout: BuildLayout, daemon_port: int) -> dict[str, str]:
    """What Lambda sets for a function with active tracing, plus the option's own variables."""
    function_name = f"bench-tracing-{option}"
    own = [] if option == BASELINE else [str(layout.dirs[OPTION_DIRS[option]])]
    path = [str(layout.task), *own, *(str(layout.dirs[name]) for name in SHARED)]
    trace = f"Root=1-{uuid.uuid4().hex[:8]}-{uuid.uuid4().hex[:24]};Parent={uuid.uuid4().hex[:16]};Sampled=1"  # noqa: E501
    env = {
        "PATH": f"{layout.python.parent}:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "PYTHONPATH": os.pathsep.join(path),
        "PYTHONDONTWRITEBYTECODE": "1",
        "BENCH_TRACING_OPTION": option,
        "AWS_REGION": "eu-west-1",
        "AWS_DEFAULT_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_LAMBDA_FUNCTION_NAME": function_name,
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{function_name}",
        "AWS_LAMBDA_LOG_STREAM_NAME": "bench",
        "AWS_EXECUTION_ENV": "AWS_Lambda_python3.13",
        "LAMBDA_TASK_ROOT": str(layout.task),
        "LAMBDA_RUNTIME_DIR": str(layout.dirs["runtime"]),
        "_HANDLER": f"{FUNCTION_MODULE}.handler",
        "_X_AMZN_TRACE_ID": trace,
        "AWS_XRAY_DAEMON_ADDRESS": f"127.0.0.1:{daemon_port}",
        "AWS_XRAY_CONTEXT_MISSING": "LOG_ERROR",
        "POWERTOOLS_SERVICE_NAME": "bench-tracing",
    }
    if option in ("adot", "adot-fast-start"):
        env.update(adot_environment(function_name, env["_HANDLER"], option == "adot-fast-start"))
    return env


def adot_environment(function_name: str, handler: str, fast_start: bool) -> dict[str, str]:
    """What `otel-instrument` exports (lambda-layer/src/otel-instrument) when the function sets
    OTEL_AWS_APPLICATION_SIGNALS_ENABLED=false, OTEL_PYTHON_DISTRO=aws_distro and
    OTEL_PYTHON_CONFIGURATOR=aws_configurator, as infra/functions.py does (and, for
    adot-fast-start, OTEL_AWS_LAMBDA_FAST_START=true: then it sets no disabled list)."""
    disabled = (
        {}
        if fast_start
        else {"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": ADOT_DISABLED_INSTRUMENTATIONS}
    )
    return {
        **disabled,
        "OTEL_SERVICE_NAME": function_name,
        "OTEL_PROPAGATORS": "baggage,xray,tracecontext",
        "OTEL_AWS_APPLICATION_SIGNALS_RUNTIME_ENABLED": "false",
        "OTEL_AWS_APPLICATION_SIGNALS_ENABLED": "false",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_AWS_LAMBDA_FAST_START": "true" if fast_start else "false",
        "OTEL_PYTHON_DISTRO": "aws_distro",
        "OTEL_PYTHON_CONFIGURATOR": "aws_configurator",
        "OTEL_RESOURCE_ATTRIBUTES": (
            f"cloud.region=eu-west-1,cloud.platform=aws_lambda,cloud.provider=aws,"
            f"faas.name={function_name},faas.version=$LATEST,faas.instance=bench"
        ),
        "ORIG_HANDLER": handler,
        "_HANDLER": "otel_wrapper.lambda_handler",
    }


def command(option: str, layout: BuildLayout) -> list[str]:
    bootstrap = str(layout.task / "bench_bootstrap.py")
    if option == "adot":
        # The wrapper's last line, `exec python3 /opt/python/bin/opentelemetry-instrument "$@"`,
        # which sets up sitecustomize and execs the runtime's interpreter again (fast start
        # runs "$@" as it is).
        instrument = layout.dirs["adot"] / "bin" / "opentelemetry-instrument"
        return [str(layout.python), str(instrument), str(layout.python), bootstrap]
    return [str(layout.python), bootstrap]


@dataclass(frozen=True)
class ColdStart:
    seconds: float
    result: Any
    datagrams: list[bytes]


def cold_start(option: str, layout: BuildLayout) -> ColdStart:
    """One fresh interpreter, spawn to the first invocation's return, with a UDP socket of its
    own in place of the X-Ray daemon."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as daemon:
        daemon.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
        daemon.bind(("127.0.0.1", 0))
        # The result travels on a pipe of its own: the function's logs go to stdout.
        read_fd, write_fd = os.pipe()
        env = {
            **environment(option, layout, daemon.getsockname()[1]),
            "BENCH_RESULT_FD": str(write_fd),
        }
        started = time.perf_counter()
        child = subprocess.Popen(
            command(option, layout),
            env=env,
            cwd=str(layout.task),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            pass_fds=(write_fd,),
        )
        os.close(write_fd)
        with os.fdopen(read_fd, "r", encoding="utf-8") as results:
            line = results.readline()
        seconds = time.perf_counter() - started
        try:
            output, _ = child.communicate(timeout=TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            child.kill()
            raise TracingBenchError(f"{option}: the process did not exit") from None
        if child.returncode != 0 or not line:
            raise TracingBenchError(
                f"{option}: the function failed (exit {child.returncode}):\n{output}"
            )
        datagrams = _drain(daemon)
    return ColdStart(seconds, json.loads(line)["result"], datagrams)


def _drain(daemon: socket.socket) -> list[bytes]:
    daemon.setblocking(False)
    received: list[bytes] = []
    while True:
        try:
            received.append(daemon.recv(65536))
        except BlockingIOError:
            return received


def xray_documents(datagrams: Sequence[bytes]) -> list[dict[str, Any]]:
    """X-Ray daemon protocol: a JSON header line, then a segment document (JSON)."""
    documents: list[dict[str, Any]] = []
    for datagram in datagrams:
        header, _, body = datagram.decode("utf-8").partition("\n")
        if json.loads(header).get("format") == "json" and body.startswith("{"):
            documents.append(json.loads(body))
    return documents


def otlp_payloads(datagrams: Sequence[bytes]) -> list[bytes]:
    """ADOT's UDP exporter (amazon.opentelemetry.distro.otlp_udp_exporter): the daemon's JSON
    header line, then `T1S` and a base64 OTLP protobuf of sampled spans."""
    payloads: list[bytes] = []
    for datagram in datagrams:
        _, _, body = datagram.decode("utf-8").partition("\n")
        if body.startswith("T1S"):
            payloads.append(base64.b64decode(body[3:]))
    return payloads


def _walk(document: dict[str, Any]) -> list[dict[str, Any]]:
    found = [document]
    for sub in document.get("subsegments", []):
        found += _walk(sub)
    return found


def spans_seen(option: str, datagrams: Sequence[bytes]) -> dict[str, bool]:
    """Whether the daemon socket received a span for the handler and one for the GetItem."""
    if option == "powertools-xray":
        segments = [s for doc in xray_documents(datagrams) for s in _walk(doc)]
        return {
            "handler": any(s.get("name") == "## handler" for s in segments),
            "dynamodbGetItem": any(
                s.get("name") == "dynamodb" and s.get("aws", {}).get("operation") == "GetItem"
                for s in segments
            ),
        }
    if option in ("adot", "adot-fast-start"):
        # Names travel as plain UTF-8 strings inside the protobuf: the invocation's span is the
        # one span of the aws_lambda instrumentation's scope; botocore's is "DynamoDB.GetItem".
        payloads = otlp_payloads(datagrams)
        return {
            "handler": any(b"opentelemetry.instrumentation.aws_lambda" in p for p in payloads),
            "dynamodbGetItem": any(b"DynamoDB.GetItem" in p for p in payloads),
        }
    return {"handler": False, "dynamodbGetItem": False}


def check(option: str, run: ColdStart) -> None:
    """Fail loudly unless the call really ran and each option traced it (and none traced
    nothing)."""
    if run.result != {"found": True}:
        raise TracingBenchError(f"{option}: the handler returned {run.result!r}")
    seen = spans_seen(option, run.datagrams)
    if option == BASELINE:
        if run.datagrams:
            raise TracingBenchError(
                f"{option}: sent {len(run.datagrams)} datagrams to the daemon socket with no "
                "tracing installed"
            )
        return
    missing = [name for name, ok in seen.items() if not ok]
    if missing:
        raise TracingBenchError(
            f"{option}: no span for {missing} among {len(run.datagrams)} datagrams sent to the "
            "daemon socket: the option did not trace the call, so its timing means nothing"
        )


def build(build_root: Path = BUILD_ROOT) -> BuildLayout:
    dirs = {
        name: ensure_stack(stack_dir(name, build_root))
        for name in (*SHARED, *sorted(set(OPTION_DIRS.values())))
    }
    return BuildLayout(python=bare_python(build_root), task=write_task(build_root), dirs=dirs)


def run(runs: int = RUNS, build_root: Path = BUILD_ROOT) -> dict[str, Any]:
    if runs < 1:
        raise ValueError(f"runs must be at least 1, got {runs}")
    layout = build(build_root)
    seconds: dict[str, list[float]] = {option: [] for option in OPTIONS}
    seen: dict[str, dict[str, bool]] = {}
    for option in OPTIONS:  # warm-up: the file cache, not measured
        warm = cold_start(option, layout)
        check(option, warm)
        seen[option] = spans_seen(option, warm.datagrams)
    for round_number in range(runs):
        shift = round_number % len(OPTIONS)
        for option in OPTIONS[shift:] + OPTIONS[:shift]:
            measured = cold_start(option, layout)
            check(option, measured)
            seconds[option].append(measured.seconds)
        progress(f"tracing: round {round_number + 1}/{runs}")
    base_median = statistics.median(seconds[BASELINE])
    options: dict[str, Any] = {}
    for option in OPTIONS:
        median = statistics.median(seconds[option])
        size, files = (
            (0, 0) if option == BASELINE else installed_size(layout.dirs[OPTION_DIRS[option]])
        )
        options[option] = {
            "coldStartMedianMs": round(median * 1000, 1),
            "coldStartMinMs": round(min(seconds[option]) * 1000, 1),
            "coldStartMaxMs": round(max(seconds[option]) * 1000, 1),
            "addedMs": round((median - base_median) * 1000, 1),
            "ratioToBaseline": round(median / base_median, 3),
            "installedBytes": size,
            "installedFiles": files,
            "pins": (
                []
                if option == BASELINE
                else list(read_pins(REQUIREMENTS_DIR / f"{OPTION_DIRS[option]}.txt"))
            ),
            "spans": seen[option],
            "samplesMs": [round(s * 1000, 1) for s in seconds[option]],
        }
    shared_bytes = sum(installed_size(layout.dirs[name])[0] for name in SHARED)
    return {
        "runs": runs,
        "python": platform.python_version(),
        "sharedBytes": shared_bytes,
        "options": options,
        "ok": True,
    }


def render(result: dict[str, Any]) -> None:
    rows = []
    for option, row in result["options"].items():
        rows.append(
            [
                option,
                num(row["coldStartMedianMs"], 0, " ms"),
                f"{row['ratioToBaseline']:.2f}x",
                num(row["addedMs"], 0, " ms"),
                num(row["installedBytes"] / 1_000_000, 1, " MB"),
                num(row["installedFiles"], 0),
                "-" if option == BASELINE else ("yes" if all(row["spans"].values()) else "NO"),
            ]
        )
    emit(
        f"Tracing: cold start (spawn to first invocation's return, median of {result['runs']} "
        f"interleaved runs, Python {result['python']}) and what each option installs",
        (
            "option",
            "cold start",
            "vs none",
            "added",
            "installed",
            "files",
            "span for GetItem",
        ),
        rows,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tracing", description=__doc__)
    parser.add_argument("--runs", type=int, default=RUNS, help="interleaved rounds (>= 1)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, got {args.runs}")
    try:
        result = run(runs=args.runs)
    except TracingBenchError as err:
        print(f"bench.tracing: {err}", file=sys.stderr)
        return 1
    render(result)
    save(NAME, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
