"""`saga-index repair-anomaly`: give one anomalous saga row its person, its GSI4SK, and the
GSI4PK the record's current state stamps for that person; and any saga row the OpenSagaPK the
state's writers write (set on an open saga, removed from a closed one).

The runbook's repair step for the rows the backfill lists as anomalies (exit 3), and for the
rows the drift guard's OpenIndexMissingRows / OpenIndexStrayRows name (their repairCommand).
The domain rule, its conditional write and its outcomes are in saga_index/store/repair.py.
"""

from __future__ import annotations

import sys

import click

from saga_index.index import keys
from saga_index.store import repair_anomaly
from saga_index_cli.context import CliContext, pass_cli
from saga_index_cli.exit_codes import ExitCode
from saga_index_cli.output import JSON, emit, format_options

# Exit 2 (bad usage or input) is main's, for every command.
EXIT_DONE, EXIT_NOT_DONE = ExitCode.OK, ExitCode.FOUND


def _table_key(saga_id: str | None, pk: str | None, sk: str | None) -> dict[str, str]:
    if saga_id is not None:
        if pk is not None or sk is not None:
            raise click.UsageError("give the row as --saga-id ID or as --pk PK --sk SK, not both")
        return keys.saga_table_key(saga_id)
    if pk is None or sk is None:
        raise click.UsageError(
            "give the row as --saga-id ID, or as --pk PK --sk SK (both, as the backfill lists "
            "anomalies: PK=... SK=...)"
        )
    return {"PK": pk, "SK": sk}


@click.command("repair-anomaly")
@click.option("--saga-id", help="The saga's id (its row is PK=RSAGA#<id>, SK=META).")
@click.option("--pk", help="The row's PK, as the backfill lists it (with --sk).")
@click.option("--sk", help="The row's SK, as the backfill lists it (with --pk).")
@click.option("--person-id", help="The person the saga belongs to.")
@click.option(
    "--from-lease",
    "from_tenancy",
    is_flag=True,
    help="Take the person from the saga's rental lease (LEASE#<leaseId>/META names its tenant).",
)
@click.option(
    "--apply", is_flag=True, help="Write the repair. Without it: a dry run that writes nothing."
)
@format_options(default=JSON)
@pass_cli
def repair_anomaly_command(
    cli: CliContext,
    saga_id: str | None,
    pk: str | None,
    sk: str | None,
    person_id: str | None,
    from_tenancy: bool,
    apply: bool,
    as_json: bool,
) -> None:
    """Rebuild personId, GSI4SK AND GSI4PK of one anomalous saga row (dry run unless --apply).

    GSI4PK is the key the record's current state writes for the person (its routing), so
    `sagas by-person` finds the repaired row at once. OpenSagaPK too, of any saga row (an
    anomaly or not): set on an open saga while the state's writers stamp it, removed where they
    would remove it (a closed saga), so the open-saga index holds the row exactly when it
    should; a row whose person is fine keeps its person and GSI4 keys. The write is
    conditional: it holds only if the row still exists and its personId, GSI4SK, GSI4PK,
    openedAt, state and OpenSagaPK are still what was read. Prints one JSON object on stdout
    (the default), or with --output text its outcome.

    \b
    Exit codes:
      0  repaired; or would be repaired (dry run); or nothing to repair
      1  not repaired: the row is gone or changed since it was read, it belongs to another
         person, or its rental lease does not name a usable tenant (the message says what to do)
      2  bad usage or input (the key, the person, the options)
    """
    key = _table_key(saga_id, pk, sk)
    if (person_id is None) == (not from_tenancy):
        raise click.UsageError("give the person as --person-id P, or --from-lease (not both)")
    # Checked before the record is read: bad input is exit 2 whatever the table's state.
    if person_id is not None:
        keys.Person.of(person_id)
    if not key["PK"] or not key["SK"]:
        raise click.UsageError("--pk and --sk must not be empty")
    cli.require_table()
    result = repair_anomaly(
        cli.client,
        cli.require_table(),
        key,
        plan=cli.routing(),
        person_id=person_id,
        dry_run=not apply,
    )
    if as_json:
        emit(result.to_json())
    else:
        click.echo(f"{result.status.value}: {result.message}")
    if result.status.done:
        click.echo(f"saga-index: {result.message}", err=True)
        sys.exit(EXIT_DONE)
    click.echo(f"saga-index: not repaired ({result.status.value}): {result.message}", err=True)
    sys.exit(EXIT_NOT_DONE)
