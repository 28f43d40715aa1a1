"""The exit codes of `saga-index`: one enumeration, the single source of every exit the CLI
makes, of the table in docs/cli.md ("Exit codes", generated from `ExitCode.meaning` by
`python -m devkit.cli_reference`) and of the codes the runbook's tables name (checked against it
by tests/unit/test_cli_reference.py). A script branches on them; they never change meaning."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """What a `saga-index` run ended in, the same for every command."""

    OK = 0
    FOUND = 1
    USAGE = 2
    REFUSED = 3
    UNAVAILABLE = 4
    RETRY_LATER = 5
    PARTIAL = 6

    @property
    def meaning(self) -> str:
        """The meaning as docs/cli.md's exit-code table gives it (Markdown, one cell)."""
        return _MEANINGS[self]


_MEANINGS = {
    ExitCode.OK: (
        "success; a command that checks something found nothing: `drift` healthy, `verify` "
        "identical, `watch` no throttle, `preflight` every check passed. `phase set P` when the "
        "record already is exactly P (with `--shards`, its N) is 0 too, with "
        '`{"changed": false, "historySettled": ...}`: nothing written, unless its version\'s '
        "history item was not yet confirmed applied (an intent, or marked abandoned after a "
        "write whose answer was lost), which it settles from the STATE item "
        "(`historySettled: true`). A `phase set` whose STATE write got no answer but is found "
        "applied when read back is 0 (applied), its `warnings` saying so"
    ),
    ExitCode.FOUND: (
        "found, or refused for cause: drift, a parity mismatch, throttles (or, for `watch`, no "
        "data at all for the index), a preflight check that FAILED; a lost compare-and-set "
        "(read the record and decide again), a missing table, a missing record, a lost one (no "
        "STATE item, and no control item or only history that reads the legacy key, while rows "
        "sit on shard keys: `sagas` refuses to answer from the empty legacy key), a backfill "
        "whose read-back found rows left to move, a run stopped before it re-stamped anything "
        "(a backfill refused by a fence slot names the slot, its epoch and the record's "
        "`leaseEpoch`, releases its lease, and names `backfill clear-fence` for a slot no run "
        "holds), a command interrupted (Ctrl-C) before it wrote anything (the message says "
        "what to do); a write whose outcome is unknown: its answer was lost and reading it "
        "back failed too (`phase set`: unknown, run `saga-index phase show`; the lease "
        "acquire: run `saga-index status`)"
    ),
    ExitCode.USAGE: (
        "bad usage or invalid input, naming the value: a move that is not allowed, a table name "
        "DynamoDB would refuse, an endpoint that is not an http(s) URL, a value outside an "
        "option's choices or range (`--output` takes a format, `text` or `json`: a file name "
        "there is refused, naming `--report-file`), an empty person id, an existing report file "
        "that is not this command's own report without `--overwrite`, a global option given "
        "after the subcommand (the message says global options come first). All of these are "
        "refused **before any call to any service**. One exit 2 needs the record: a global "
        "`--phase`/`--shards` on a command that writes is an assertion about the record, "
        "checked after one read of it (GetItem) and before any write; one that disagrees is "
        "refused, nothing written"
    ),
    ExitCode.REFUSED: (
        "refused by a precondition: `phase set`'s checks "
        '(`{"refused": true, "failed": [...]}` on stdout); `backfill`: complete, but anomaly '
        "rows remain (the report prints the `repair-anomaly` command of each: "
        "`anomalyKeys[].repairCommand` in JSON)"
    ),
    ExitCode.UNAVAILABLE: (
        "could not complete: a service could not be reached (connection refused, DNS, "
        "timeouts, no region), refused the call (no or bad credentials, access denied) or does "
        "not support it (`UnknownOperationException`, e.g. a local server). The message names "
        "the service, its endpoint and the operation: `could not complete: CloudWatch at "
        "https://monitoring.eu-west-1.amazonaws.com could not be reached (GetMetricData): ...`. "
        "Nothing was judged or written"
    ),
    ExitCode.RETRY_LATER: (
        "not yet: the same command may succeed later, unchanged. A backfill before the state's "
        "`effectiveAt`, a backfill lease a live run holds (`another backfill run holds the "
        "lease`), `backfill --stop` of a local run whose heartbeat is still fresh, a write "
        "DynamoDB throttled or that met a transaction conflict past the retries (the control "
        "record's), and `phase set` of a completing move (`sharded` from `migrating` or "
        "`resharding`, `legacy` from `rolling-back`; `--force` too) before the state's "
        '`effectiveAt` plus the 15 s in-flight margin (docs/control-contract.md, "The settled '
        'switch"). Every command prints the refusal on stdout as data, '
        '`{"retryLater": true, "retryAt": ..., "message": ...}` (`retryAt` null when no time '
        "is known); `phase set` adds `failed`, the completion checks that already fail "
        "(`[{name, passed, detail}]`: fix them, waiting alone will not do). The message starts "
        "`saga-index: not yet (retry at TIME):` when a time is known, and a backfill's "
        "`--report-file` carries it as `retryAt` (UTC ISO-8601, the record's format). **What "
        "exit 5 promises about writes**: the refusal itself wrote nothing, and the message says "
        '"nothing was written" only when that is known: every attempt was refused before it '
        "ran (no request of it was resent by botocore, whose resend follows a timeout or a "
        "dropped connection as well as a throttle), or the command read the item back and found "
        'the write not there (`phase set`: "Read back, the record still holds version v: the '
        'move was NOT applied"; the lease acquire: "Read back, the backfill lease is not this '
        "run's\"). When a request of a refused write was resent and the command cannot read it "
        'back, the message says so instead ("one whose answer was lost may have landed: what '
        'is stored is not known here"). A `phase set` or lease acquire whose write did land is '
        "never exit 5: it goes on as applied (0)"
    ),
    ExitCode.PARTIAL: (
        "interrupted, partly done: a backfill that re-stamped rows, then failed, lost its "
        "lease, or was stopped (Ctrl-C, SIGTERM, the server gone). Its report says what it did "
        "(`restamped`, per segment where known), `completionRecorded: false`; what it "
        "re-stamped stays, nothing is half-written, and the same command again finishes the "
        "move. `phase set --wait` interrupted after its change was written: the change stands; "
        "`saga-index phase show --wait` waits for it"
    ),
}
