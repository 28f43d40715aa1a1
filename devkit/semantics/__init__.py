"""DynamoDB's documented behaviour under concurrency, for tests and benchmarks: what no local
engine models (moto serialises every request; dynalite has no transactions).

Two rules, answered as DynamoDB answers them:

  conflicts  a PutItem, UpdateItem or DeleteItem on an item that an ONGOING TransactWriteItems
             includes fails with TransactionConflictException; a TransactWriteItems (or a
             TransactGetItems) that includes an item another ongoing TransactWriteItems
             includes is cancelled (TransactionCanceledException, CancellationReasons with
             Code TransactionConflict for the conflicting actions, None for the others); a
             ConditionCheck includes its item; reads (GetItem, Query, Scan) are not affected.
             A transaction is ongoing for `in_flight` seconds from its start (default 10 ms,
             DynamoDB's usual latency for a small transaction), or until it finished if
             sooner.
             https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html#transaction-conflict-handling
  ceilings   per partition key, per second: 3,000 RCU and 1,000 WCU, for the base table (by its
             partition key) and for each GSI (by the index's partition key); an item in a
             transaction costs twice its units (prepare and commit), a ConditionCheck included,
             and the GSI writes it causes once, as a single write's (DynamoDB propagates a
             transaction's changes to its GSIs after it completes; the documentation prices the
             two writes per item and says nothing of the index: an assumption, the one
             docs/control-contract.md makes); units are sized by devkit.capacity (4 KB reads,
             halved when eventually consistent and on every GSI read; 1 KB writes; a GSI key
             change costs a delete under the old key and a put under the new one). Past a
             key's ceiling in the current second the request is refused before it runs:
             ThrottlingException (on-demand) or, as an option,
             ProvisionedThroughputExceededException, with ThrottlingReasons naming the
             key-range limit and the table's or index's ARN.
             https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html
             https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/throttling-key-range-limit-exceeded-mitigation.html
             https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_ThrottlingReason.html
             https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html#transaction-capacity-handling

What is NOT modelled (each said where it matters): BatchWriteItem's items take part in neither
rule; a single-item write is not itself ongoing (it is instantaneous here, so a TransactGetItems
never conflicts with one); a Query or Scan page is charged for the items it returned, not for
those a filter dropped; adaptive capacity and burst credit are ignored (the ceiling is hard, per
whole second).

  model     the pure core: ongoing transactions, per-key consumption, refusals (clock injected)
  requests  what a request includes (its items) and what it costs (devkit.capacity's pricing)
  wire      a refusal as the response body DynamoDB sends, and as botocore parses it
  hooks     the adapter for real threads: botocore hooks on a client (component tests, bench)
  lost      lost answers: a request applied, its answer lost, its resends throttled (per
            attempt, below botocore's retry handler)
  contended a local backfill under the layer with an operator at work; the fences it may use
  dilation  time dilation: an engine clock at a fraction of real time, and the waits on it (the
            fast engine's --time-scale, bench.fence --engine)
  moto_harness  in-process moto for threads: requests served in turn, cheap transaction rollback
The simulator's adapter lives with the simulator (tests/sim/table.py): it runs on virtual time.
"""
