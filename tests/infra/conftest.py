"""Session-scoped synthesis: the first synth in a process costs seconds (jsii start-up)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from infra.stack import STACK_NAME, RenewalSagaIndexStack, build_app

# Dev and test stacks, the demo and local tables: the stack creates the table. cdk.json commits
# the production choice (attach to the existing table), so this is always passed explicitly.
OWNED_TABLE: dict[str, Any] = {"importExistingTable": False}
NOBODY_PAGED: dict[str, Any] = {"email": [], "https": []}


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


def write_pager_config(directory: Path, document: dict[str, Any]) -> Path:
    path = directory / "pager.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def _synthesise(
    outdir: Path,
    overrides: dict[str, Any] | None = None,
    pager_config: Path | None = None,
) -> Synthesised:
    """Synthesise into outdir. Without pager_config, nobody is subscribed (so the tests do not
    depend on what the committed pager.json lists)."""
    if pager_config is None:
        pager_config = write_pager_config(outdir, NOBODY_PAGED)
    app, stack = build_app(context_overrides=overrides, outdir=outdir, pager_config=pager_config)
    # Template.from_stack raises on any unacknowledged cdk-nag finding, so an unclean stack
    # fails every infra test at fixture set-up, with the report in outdir.
    template = Template.from_stack(stack)
    app.synth()
    return Synthesised(app=app, stack=stack, outdir=outdir, template=template)


@pytest.fixture(scope="session")
def owned_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesised:
    """The stack that creates its table (importExistingTable=false, passed explicitly)."""
    return _synthesise(tmp_path_factory.mktemp("cdk-owned"), OWNED_TABLE)


@pytest.fixture(scope="session")
def import_mode_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesised:
    """cdk.json as committed: attached to the existing table by name (production)."""
    return _synthesise(tmp_path_factory.mktemp("cdk-import"))


@pytest.fixture(scope="session")
def owned_template(owned_synth: Synthesised) -> Template:
    return owned_synth.template


@pytest.fixture(scope="session")
def import_mode_template(import_mode_synth: Synthesised) -> Template:
    return import_mode_synth.template
