"""build_plan(): a traffic mix over a dataset as ticks of events, one per virtual second."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import dataclass

from devkit.seed import Dataset
from devkit.traffic.events import (
    CohortOpen,
    Event,
    InboundMessage,
    ListPageLoad,
    NewSaga,
    Sweep,
    Transition,
)
from devkit.traffic.mix import TrafficMix

# Where a transition sends a saga: every step stays open, so the open set (what the sweeps
# read) keeps the same size through both replays.
_NEXT_STATE = {
    "OPENED": "PREPARING",
    "PREPARING": "OFFER_SENT",
    "PREPARE_FAILED": "PREPARING",
    "OFFER_SENT": "NEGOTIATING",
    "NEGOTIATING": "AWAITING_SIGNATURE",
    "AWAITING_SIGNATURE": "NEGOTIATING",
}


@dataclass(frozen=True)
class Tick:
    second: int
    events: tuple[Event, ...]


@dataclass(frozen=True)
class Plan:
    mix: TrafficMix
    ticks: tuple[Tick, ...]

    def counts(self) -> dict[str, int]:
        return dict(Counter(event.kind for tick in self.ticks for event in tick.events))


def build_plan(mix: TrafficMix, dataset: Dataset) -> Plan:
    """The events of `mix` over `dataset`, deterministic in mix.seed."""
    mix.validate()
    rng = random.Random(mix.seed)
    events: dict[int, list[Event]] = defaultdict(list)

    managers = [m for m in dataset.managers if dataset.tenants.get(m)]
    for manager in managers[: mix.property_managers]:
        low, high = mix.poll_interval_s
        moment = rng.uniform(0, high)
        while moment < mix.duration_s:
            events[int(moment)].append(ListPageLoad(manager, dataset.tenants[manager]))
            moment += rng.uniform(low, high)

    for sweep in mix.sweeps:
        for second in range(sweep.offset_s, mix.duration_s, sweep.period_s):
            events[second].append(Sweep(sweep.name))

    open_sagas = [s for s in dataset.open_sagas if s.person_id is not None]
    states = {s.saga_id: s.state for s in open_sagas}
    if open_sagas and mix.transitions_per_s > 0:
        moment = rng.expovariate(mix.transitions_per_s)
        while moment < mix.duration_s:
            record = rng.choice(open_sagas)
            assert record.person_id is not None
            to_state = _NEXT_STATE[states[record.saga_id]]
            states[record.saga_id] = to_state
            events[int(moment)].append(Transition(record.saga_id, record.person_id, to_state))
            moment += rng.expovariate(mix.transitions_per_s)

    busy = set(dataset.persons_with_open_saga)
    idle = [p for p in dataset.persons if p not in busy]
    number = 0
    if mix.cohort_size > 0 and idle:
        for second in range(mix.cohort_offset_s, mix.duration_s, mix.cohort_period_s):
            batch = []
            for _ in range(mix.cohort_size):
                person = rng.choice(idle)
                batch.append(
                    NewSaga(
                        number=number,
                        person_id=person,
                        manager_id=dataset.person_manager[person],
                        size=rng.randint(dataset.spec.min_item_bytes, dataset.spec.max_item_bytes),
                        salt=rng.getrandbits(31),
                    )
                )
                number += 1
            events[second].append(CohortOpen(tuple(batch)))

    senders_open = sorted(busy)
    if mix.inbound_messages_per_s > 0 and mix.reads_per_message > 0:
        moment = rng.expovariate(mix.inbound_messages_per_s)
        while moment < mix.duration_s:
            if senders_open and rng.random() < mix.inbound_open_share:
                person = rng.choice(senders_open)
            else:
                person = rng.choice(dataset.persons)
            events[int(moment)].append(InboundMessage(person, mix.reads_per_message))
            moment += rng.expovariate(mix.inbound_messages_per_s)

    ticks = tuple(Tick(second, tuple(events[second])) for second in sorted(events))
    return Plan(mix=mix, ticks=ticks)
