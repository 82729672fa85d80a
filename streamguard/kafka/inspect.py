"""Read the fleet's session state from the changelog, without joining the group.

The changelog topic holds the latest snapshot of every live session
(``changelog.py``). Reading it with a group-less consumer is invisible to the
processors: no rebalance, no committed offset, no effect on what they do. That
is what ``streamguard sessions`` and ``streamguard session ID`` do, from any
machine that can reach the cluster.

What a snapshot can say is what the processor had checkpointed: a change is on
the changelog within one checkpoint interval (1 s by default) of the record that
caused it. A snapshot is read as it was written: a watchdog halt that a restore
would drop (the live policy is no longer ``enforce``) is still shown.

Only the fields an operator reads are decoded (not the signals' states), so a
view needs no policy and reads snapshots of every version.
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import msgspec
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.partitioner import murmur2
from msgspec import Struct

from .changelog import ChangelogError, decode_entry, iter_to_end


def home_partition(session: str, partitions: int) -> int:
    """The partition a session's records live on (the Java client's murmur2 hash)."""
    return (murmur2(session.encode()) & 0x7FFFFFFF) % partitions


class _Envelope(Struct, array_like=True):
    version: int
    first: msgspec.Raw
    second: msgspec.Raw


class _StateFields(Struct):
    """The operator-facing fields of a watchdog SessionState (others ignored)."""

    session: str
    agent: str | None = None
    last_seq: int = -1
    applied: int = 0
    last_ts: float | None = None
    turn_id: str | int | None = None
    in_turn: bool = False
    turn_cut: str | None = None
    cut_kind: str | None = None
    cut_streak: int = 0
    halted_by: list[str] = []
    halt_signal: str | None = None
    halt_reason: str | None = None
    halted_at: float | None = None
    feedback: list[tuple[str, str]] = []
    fleet_scope: str | None = None


_envelope_decoder = msgspec.msgpack.Decoder(_Envelope)
_fields_decoder = msgspec.msgpack.Decoder(_StateFields)


class SessionView(Struct, kw_only=True, omit_defaults=False):
    """One session as its latest changelog snapshot describes it."""

    session: str
    agent: str | None
    partition: int
    halted: bool
    halted_by: list[str]
    halt_signal: str | None
    halt_reason: str | None
    halted_at: float | None  # the event time of the halt (snapshots from before it: None)
    cut_streak: int
    cut_by: str | None
    in_turn: bool
    turn: str | int | None
    last_seq: int | None
    records_applied: int
    last_event_ts: float | None  # the event time of its last event
    last_seen: float  # the processor's clock when its last record was applied
    queued_feedback: list[dict[str, str]]
    changelog_offset: int
    events_offset: int
    control_offset: int
    fleet_scope: str | None = None  # the scope whose open circuit halts it (a fleet halt)


class SnapshotUnreadable(ValueError):
    """A changelog record this version cannot read."""


def decode_view(partition: int, offset: int, value: bytes) -> SessionView:
    """A :class:`SessionView` of one changelog record's value."""
    try:
        entry = decode_entry(value)
        envelope = _envelope_decoder.decode(entry.state)
        if envelope.version >= 2:
            body = envelope.second
        elif envelope.version == 1:
            body = envelope.first
        else:
            raise SnapshotUnreadable(f"snapshot version {envelope.version} is not supported")
        fields = _fields_decoder.decode(body)
    except (ChangelogError, msgspec.DecodeError) as exc:
        raise SnapshotUnreadable(str(exc)) from None
    return SessionView(
        session=fields.session,
        agent=fields.agent,
        partition=partition,
        halted=bool(fields.halted_by),
        halted_by=list(fields.halted_by),
        halt_signal=fields.halt_signal,
        halt_reason=fields.halt_reason,
        halted_at=fields.halted_at,
        cut_streak=fields.cut_streak,
        cut_by=fields.cut_kind,
        in_turn=fields.in_turn,
        turn=fields.turn_id,
        last_seq=fields.last_seq if fields.last_seq >= 0 else None,
        records_applied=fields.applied,
        last_event_ts=fields.last_ts,
        last_seen=entry.last_seen,
        queued_feedback=[{"signal": s, "text": t} for s, t in fields.feedback],
        changelog_offset=offset,
        events_offset=entry.events_offset,
        control_offset=entry.control_offset,
        fleet_scope=fields.fleet_scope,
    )


class ScanStats(Struct, kw_only=True):
    partitions: int = 0
    records_read: int = 0
    sessions: int = 0
    unreadable: int = 0
    seconds: float = 0.0


def session_filter(*, halted: bool = False, agent: str | None = None) -> Callable[[SessionView], bool]:
    """The predicate of ``streamguard sessions --halted --agent GLOB``."""

    def keep(view: SessionView) -> bool:
        if halted and not view.halted:
            return False
        return agent is None or fnmatch.fnmatchcase(view.agent or "", agent)

    return keep


async def partitions_of(consumer: AIOKafkaConsumer, topic: str) -> set[int] | None:
    """The partitions of ``topic`` (None: no such topic)."""
    names = await consumer.topics()
    if topic not in names:
        return None
    return set(consumer.partitions_for_topic(topic) or ())


async def scan_sessions(
    consumer: AIOKafkaConsumer,
    topic: str,
    partitions: Iterable[int],
    *,
    keep: Callable[[SessionView], bool] | None = None,
    stats: ScanStats | None = None,
    on_unreadable: Callable[[int, int, str], None] | None = None,
) -> AsyncIterator[SessionView]:
    """Every live session of the changelog ``topic`` (latest snapshot per key).

    One partition at a time, so memory holds one partition's latest records,
    not the whole topic. ``consumer`` must be group-less (``group_id=None``).
    """
    stats = stats if stats is not None else ScanStats()
    started = time.monotonic()
    for partition in sorted(set(partitions)):
        tp = TopicPartition(topic, partition)
        latest: dict[bytes, tuple[int, bytes | None]] = {}
        async for _, records in iter_to_end(consumer, [tp]):
            stats.records_read += len(records)
            for record in records:
                if record.key is not None:
                    latest[record.key] = (record.offset, record.value)
        stats.partitions += 1
        for offset, value in latest.values():
            if value is None:
                continue  # a tombstone: the session was evicted
            try:
                view = decode_view(partition, offset, value)
            except SnapshotUnreadable as exc:
                stats.unreadable += 1
                if on_unreadable is not None:
                    on_unreadable(partition, offset, str(exc))
                continue
            if keep is None or keep(view):
                stats.sessions += 1
                yield view
    stats.seconds = time.monotonic() - started


async def find_session(
    consumer: AIOKafkaConsumer, topic: str, partitions: int, session: str
) -> SessionView | None:
    """The latest snapshot of one session (None: not on the changelog)."""
    partition = home_partition(session, partitions)
    key = session.encode()
    found: tuple[int, bytes | None] | None = None
    async for _, records in iter_to_end(consumer, [TopicPartition(topic, partition)]):
        for record in records:
            if record.key == key:
                found = (record.offset, record.value)
    if found is None or found[1] is None:
        return None
    return decode_view(partition, found[0], found[1])


async def recent_records(
    consumer: AIOKafkaConsumer,
    topic: str,
    partitions: int,
    session: str,
    *,
    limit: int = 10,
    window: int = 5000,
) -> list[Any]:
    """The last ``limit`` records keyed by ``session`` among the last ``window`` of its
    partition of ``topic`` (the output topic is keyed by session)."""
    tp = TopicPartition(topic, home_partition(session, partitions))
    ends = await consumer.end_offsets([tp])
    key = session.encode()
    kept: list[Any] = []
    async for _, records in iter_to_end(consumer, [tp], start={tp: max(0, ends[tp] - window)}):
        for record in records:
            if record.key == key:
                kept.append(record)
                if len(kept) > limit:
                    del kept[0]
    return kept
