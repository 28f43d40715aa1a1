"""The traffic mix of ADR-0085, as a plan of events on a virtual clock, replayed or priced.

mix        the rates of the mix (TrafficMix) and of each sweep (SweepSpec)
events     the event kinds a plan holds, and the row a cohort opens
plan       build_plan(): a mix over a dataset as ticks, one per virtual second
replay     the plan sent to a server through a repository and a writer, metered
synthetic  the plan priced without a server, from item sizes (SyntheticTable)
"""
