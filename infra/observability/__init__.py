"""What on-call sees: the pager topic (pager.py), the alarms that page through it (alarms.py),
the Logs Insights saved queries each alarm names (queries.py), the dashboard (dashboard.py) and
the backfill's end on the pager (notifications.py); docs/observability.md is the on-call guide.

They add their resources to ONE scope the stack names "Observability" instead of each
being a construct node of its own: a resource's logical ID is derived from its construct path,
and these IDs (and the stack outputs the runbook names, e.g. ObservabilityDashboardName) predate
the split. A new path would make CloudFormation create a second pager topic (a new ARN, the
e-mail subscribers confirming again) and a second dashboard of the same name, then delete the old
ones.
"""
