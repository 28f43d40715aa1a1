"""The capacity meter: what DynamoDB would charge each partition key, computed from item sizes.

A local server has no partitions and its ConsumedCapacity is not realistic (moto returns fixed
values, dynalite has no per-index write breakdown), so nothing here reads what the engine
reports: requests are priced by DynamoDB's documented rules
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html,
.../read-write-operations.html and .../GSI.html#GSI.ThroughputConsiderations).

  sizing        the size of an item in the wire shape
  units         read and write units of a size; one partition's ceilings
  table_schema  the table's keys, its GSIs and what an item's entry in an index is
  pricing       the charges of one write, Query page or Scan page (pure)
  ledger        charges per (table or index, partition key, second) and their summary
  meter         botocore hooks that price every request of a client as it happens
  clock         the replay's virtual clock the meter reads
  errors        MeterError
"""
