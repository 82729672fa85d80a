"""Reading the fleet's scopes from Kafka, for ``streamguard fleet``: no group joined.

Each scope's windows come from its latest snapshot on the fleet state topic
(at most one fleet-stage checkpoint old), its circuit from the circuits topic.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
from aiokafka import AIOKafkaConsumer, TopicPartition
from msgspec import Struct

from ..fleet_windows import CircuitRecord, ScopeState, Totals, decode_circuit, decode_scope
from .changelog import iter_to_end


class ScopeView(Struct, kw_only=True):
    """One scope as ``streamguard fleet`` shows it."""

    scope: str
    rule: str
    circuit: str  # open, closed, or unknown (no circuit record yet)
    generation: int = 0
    opened_at: float | None = None
    until: float | None = None
    reason: str = ""
    watermark: float | None = None
    spend_usd: float = 0.0
    tokens: int = 0
    sessions_started: int = 0
    sessions_tripped: int = 0
    sessions_halted: int = 0
    tripped_share: float = 0.0
    sessions_tracked: int = 0


def totals_of(state: ScopeState) -> Totals:
    """The sums of a snapshot's buckets: the fleet stage keeps only those inside the window."""
    totals = Totals()
    for bucket in state.buckets:
        totals.spend_usd += bucket.usd
        totals.tokens += bucket.tokens
        totals.sessions_started += bucket.started
        totals.sessions_tripped += bucket.tripped
        totals.sessions_halted += bucket.halted
    return totals


async def _latest(consumer: AIOKafkaConsumer, topic: str) -> dict[bytes, tuple[int, int, bytes | None]]:
    partitions = consumer.partitions_for_topic(topic)
    if partitions is None:
        await consumer.topics()
        partitions = consumer.partitions_for_topic(topic) or set()
    latest: dict[bytes, tuple[int, int, bytes | None]] = {}
    tps = [TopicPartition(topic, p) for p in sorted(partitions)]
    async for tp, records in iter_to_end(consumer, tps):
        for record in records:
            if record.key is not None:
                latest[record.key] = (tp.partition, record.offset, record.value)
    return latest


async def read_scopes(
    consumer: AIOKafkaConsumer,
    state_topic: str,
    circuits_topic: str,
    *,
    on_unreadable: Callable[[str, int, int, str], None] = lambda topic, p, o, why: None,
) -> list[ScopeView]:
    """Every scope with a snapshot or a circuit record, sorted by scope."""
    states: dict[str, ScopeState] = {}
    for key, (partition, offset, value) in (await _latest(consumer, state_topic)).items():
        if value is None:
            continue
        try:
            states[key.decode()] = decode_scope(value)
        except (msgspec.DecodeError, ValueError, UnicodeDecodeError) as exc:
            on_unreadable(state_topic, partition, offset, str(exc))
    circuits: dict[str, CircuitRecord] = {}
    for key, (partition, offset, value) in (await _latest(consumer, circuits_topic)).items():
        if value is None:
            continue
        try:
            circuits[key.decode()] = decode_circuit(value)
        except (msgspec.DecodeError, ValueError, UnicodeDecodeError) as exc:
            on_unreadable(circuits_topic, partition, offset, str(exc))
    views = []
    for scope in sorted(set(states) | set(circuits)):
        state = states.get(scope)
        circuit = circuits.get(scope)
        fields: dict[str, Any] = {"scope": scope, "rule": scope.partition(":")[0]}
        if state is not None:
            totals = totals_of(state)
            fields.update(
                watermark=state.watermark or None,
                spend_usd=totals.spend_usd,
                tokens=totals.tokens,
                sessions_started=totals.sessions_started,
                sessions_tripped=totals.sessions_tripped,
                sessions_halted=totals.sessions_halted,
                tripped_share=totals.tripped_share,
                sessions_tracked=len(state.sessions),
            )
        # The circuits topic is what every instance applies; the snapshot may be older.
        source = circuit if circuit is not None else (state.circuit if state is not None else None)
        if source is None:
            fields["circuit"] = "unknown"
        else:
            fields.update(
                circuit=source.state,
                generation=source.generation,
                opened_at=source.opened_at,
                until=source.until,
                reason=source.reason,
            )
        views.append(ScopeView(**fields))
    return views
