"""The synthesised stack (an owned table; no migration state: a deploy carries none) and its
assets from cdk.out, and the stand-in names and ARNs its references resolve to."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devkit import schema

REPO_ROOT = Path(__file__).resolve().parents[3]
STACK = "RenewalSagaIndex"
REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's account: ARNs it returns carry it
PARTITION = "aws"


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


def synthesise() -> Synth:
    """Exactly what `cdk synth -c importExistingTable=false` produces (a stack that owns its
    table; the committed default attaches to production's; the migration state is the control
    record's, planted by the scenario, never context): devkit.schema's owned-table synthesis
    (build/owned-table-synth, the demo's and the local tables' template), synthesised again
    first when any file of it, the functions' assets included, is older than its sources. One
    `python app.py` (~18 s of CPU) serves the session's local tables and this rehearsal."""
    outdir = schema.synth_assembly()
    template = json.loads((outdir / f"{STACK}.template.json").read_text(encoding="utf-8"))
    assets = json.loads((outdir / f"{STACK}.assets.json").read_text(encoding="utf-8"))
    return Synth(outdir=outdir, template=template, assets=assets)


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
            elif kind == "AWS::StepFunctions::StateMachine":
                name = props.get("StateMachineName", f"{STACK}-{logical_id}")
                self.refs[logical_id] = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{name}"
                self.arns[logical_id] = self.refs[logical_id]

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

    def execution_arn(self, execution_name: str) -> str:
        """What `$$.Execution.Id` is in an execution of the stack's state machine."""
        (logical_id,) = self.synth.of_type("AWS::StepFunctions::StateMachine")
        machine = self.refs[logical_id].rpartition(":")[2]
        return f"arn:aws:states:{REGION}:{ACCOUNT}:execution:{machine}:{execution_name}"

    @property
    def bus_name(self) -> str:
        (logical_id,) = self.synth.of_type("AWS::Events::EventBus")
        return self.refs[logical_id]
