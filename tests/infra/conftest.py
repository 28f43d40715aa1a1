"""Session-scoped synthesis: the first synth in a process costs seconds (jsii start-up)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from infra.stack import STACK_NAME, RenewalSagaIndexStack, build_app

IMPORT_MODE: dict[str, Any] = {"importExistingTable": True}


@dataclass(frozen=True)
class Synthesised:
    app: cdk.App
    stack: RenewalSagaIndexStack
    outdir: Path
    template: Template

    @property
    def template_path(self) -> Path:
        return self.outdir / f"{STACK_NAME}.template.json"

    @property
    def template_json(self) -> dict[str, Any]:
        return dict(self.template.to_json())


def _synthesise(outdir: Path, overrides: dict[str, Any] | None = None) -> Synthesised:
    app, stack = build_app(context_overrides=overrides, outdir=outdir)
    # Template.from_stack raises on any unacknowledged cdk-nag finding, so an unclean stack
    # fails every infra test at fixture set-up, with the report in outdir.
    template = Template.from_stack(stack)
    app.synth()
    return Synthesised(app=app, stack=stack, outdir=outdir, template=template)


@pytest.fixture(scope="session")
def default_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesised:
    """What `cdk deploy` would use with cdk.json as committed (the stack owns the table)."""
    return _synthesise(tmp_path_factory.mktemp("cdk-default"))


@pytest.fixture(scope="session")
def import_mode_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesised:
    """The same app with importExistingTable=true (attached to the existing table by name)."""
    return _synthesise(tmp_path_factory.mktemp("cdk-import"), IMPORT_MODE)


@pytest.fixture(scope="session")
def default_template(default_synth: Synthesised) -> Template:
    return default_synth.template


@pytest.fixture(scope="session")
def import_mode_template(import_mode_synth: Synthesised) -> Template:
    return import_mode_synth.template
