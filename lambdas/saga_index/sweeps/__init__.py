"""The four periodic sweeps over open sagas (issue 5).

rules.py   pure rules: (open sagas, now, policy) -> findings; no I/O, no clock of their own
claims.py  the retry sweep's conditional UpdateItems (claim a retry, record exhaustion once)
events.py  the EventBridge publisher (batches of 10, failed entries retried, loud on failure)
runner.py  one domain function per sweep: read every open saga, apply the rule, act
"""
