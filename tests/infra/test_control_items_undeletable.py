"""No role of the stack can delete a control item (docs/control-contract.md, "The record"): a
lost STATE, HISTORY or EVENT item would make every reader follow "never migrated" while rows
say otherwise, and a lost fence slot would let a stale worker's re-stamp land again (its check
is the slot's epoch; "The fence"). Judged over every statement of every policy in the
template, in both table modes, against every action that can delete an item (DeleteItem,
BatchWriteItem, PartiQL's delete) whether named or matched by a wildcard.

A statement that grants such an action is accepted only with a dynamodb:LeadingKeys condition
of ForAllValues that no control key (the control partition's, a fence slot's) can satisfy, and
only on the saga table's ARNs as granted.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

import pytest
from aws_cdk.assertions import Template

from saga_index.index.names import CONTROL_PK, FENCE_PK_PREFIX
from tests.infra.template_tools import as_list, render, resources

pytestmark = pytest.mark.infra

DELETING_ACTIONS = ("dynamodb:DeleteItem", "dynamodb:BatchWriteItem", "dynamodb:PartiQLDelete")
_POLICY_TYPES = ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")


def _statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for policy_type in _POLICY_TYPES:
        for resource in resources(template, policy_type).values():
            out.extend(as_list(render(resource["Properties"]["PolicyDocument"])["Statement"]))
    for role in resources(template, "AWS::IAM::Role").values():
        for policy in role["Properties"].get("Policies", []):
            out.extend(as_list(render(policy["PolicyDocument"])["Statement"]))
    return out


def _deleting(statement: dict[str, Any]) -> list[str]:
    patterns = [str(a) for a in as_list(statement.get("Action", []))]
    if "NotAction" in statement:
        # NotAction grants everything it does not name: a deleting action it does not name
        # is granted.
        excluded = [str(a) for a in as_list(statement["NotAction"])]
        return [a for a in DELETING_ACTIONS if not any(fnmatchcase(a, p) for p in excluded)]
    return [a for a in DELETING_ACTIONS if any(fnmatchcase(a, p) for p in patterns)]


# The partition keys of control items: the record's, and fence slots (the lowest, a high one).
CONTROL_KEYS = (CONTROL_PK, f"{FENCE_PK_PREFIX}0", f"{FENCE_PK_PREFIX}999")


def _excludes_control(condition: dict[str, Any] | None) -> bool:
    """A ForAllValues LeadingKeys condition no control key satisfies."""
    for operator, test in (condition or {}).items():
        keys = as_list((test or {}).get("dynamodb:LeadingKeys", []))
        if not keys:
            continue
        if operator == "ForAllValues:StringEquals" and not set(CONTROL_KEYS) & set(keys):
            return True
        if operator == "ForAllValues:StringLike" and not any(
            fnmatchcase(control, str(k)) for k in keys for control in CONTROL_KEYS
        ):
            return True
    return False


def control_deleters(template: dict[str, Any]) -> list[tuple[list[str], Any]]:
    return [
        (actions, statement.get("Condition"))
        for statement in _statements(template)
        if statement.get("Effect") == "Allow"
        and (actions := _deleting(statement))
        and not _excludes_control(statement.get("Condition"))
    ]


@pytest.mark.parametrize("mode", ["owned", "import"])
def test_no_role_can_delete_a_control_item(
    mode: str, owned_template: Template, import_mode_template: Template
) -> None:
    template = (owned_template if mode == "owned" else import_mode_template).to_json()
    assert control_deleters(template) == []


def test_the_rule_sees_a_grant_that_would_delete_control_items() -> None:
    """The judge itself: a table-wide grant, a wildcard, a control-partition grant, a fence
    slots' grant and a NotAction statement are caught; a saga-rows-only DeleteItem is not."""
    saga_rows = {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["RSAGA#*"]}}
    control = {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [CONTROL_PK]}}
    fence = {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [f"{FENCE_PK_PREFIX}*"]}}
    statements = [
        {"Effect": "Allow", "Action": "dynamodb:DeleteItem", "Resource": "t"},
        {"Effect": "Allow", "Action": "dynamodb:*", "Resource": "t", "Condition": control},
        {"Effect": "Allow", "Action": ["dynamodb:Batch*"], "Resource": "t"},
        {"Effect": "Allow", "NotAction": "s3:*", "Resource": "*"},
        {"Effect": "Allow", "Action": "dynamodb:DeleteItem", "Condition": fence},
        {"Effect": "Allow", "Action": "dynamodb:DeleteItem", "Condition": saga_rows},
        {"Effect": "Deny", "Action": "dynamodb:DeleteItem", "Resource": "t"},
    ]
    template = {
        "Resources": {
            "P": {
                "Type": "AWS::IAM::Policy",
                "Properties": {"PolicyDocument": {"Statement": statements}},
            }
        }
    }
    found = control_deleters(template)
    assert [actions for actions, _ in found] == [
        ["dynamodb:DeleteItem"],
        list(DELETING_ACTIONS),
        ["dynamodb:BatchWriteItem"],
        list(DELETING_ACTIONS),
        ["dynamodb:DeleteItem"],
    ]
