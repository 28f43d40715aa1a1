"""Starting a function the way Lambda does: tests/rehearsal/bootstrap.py in a fresh interpreter
whose import path is the function's asset, the layer and the runtime's boto3, nothing else.

The interpreter is devkit.layer's `lambda_python()`: the functions' runtime Python where this
machine has it (the layer directories are built for the same one), else the running one."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devkit import layer
from tests.support.lambda_harness import emf_documents, metric
from tests.support.rehearsal.server import World
from tests.support.rehearsal.stack import REGION, StandIn, Synth

BOOTSTRAP = Path(__file__).resolve().parents[2] / "rehearsal" / "bootstrap.py"
MARKER = "@@rehearsal-invocation@@"
# Importable from the project's .venv, never from a deployed function.
DEV_ONLY_MODULES = ("click", "rich", "moto", "pytest", "aws_cdk", "pydantic_settings", "devkit")


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
        return emf_documents(self.log)

    def metric(self, name: str, **dimensions: str) -> list[float]:
        return metric(self.emf, name, **dimensions)


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
        runtime = function.properties["Runtime"]
        if runtime != f"python{layer.LAMBDA_PYTHON_VERSION}":
            raise AssertionError(
                f"{function.logical_id} runs on {runtime}, but the rehearsal's interpreter and "
                f"layer are for python{layer.LAMBDA_PYTHON_VERSION}: update "
                "devkit/layer.py LAMBDA_PYTHON_VERSION"
            )
        self.interpreter = layer.lambda_python()
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
                str(self.interpreter.path),
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
