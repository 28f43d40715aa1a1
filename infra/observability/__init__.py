"""What on-call sees: the pager topic (pager.py), the alarms that page through it (alarms.py)
and the dashboard (dashboard.py); docs/observability.md is the on-call guide.

The three add their resources to ONE scope the stack names "Observability" instead of each
being a construct node of its own: a resource's logical ID is derived from its construct path,
and these IDs (and the stack outputs the runbook names, e.g. ObservabilityDashboardName) predate
the split. A new path would make CloudFormation create a second pager topic (a new ARN, the
e-mail subscribers confirming again) and a second dashboard of the same name, then delete the old
ones.
"""
