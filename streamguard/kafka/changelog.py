"""Session snapshots on a compacted changelog topic.

One record per session, keyed by the session id, written to the changelog
partition with the **same number** as the events partition the session lives
on. The value is a small msgpack envelope around the engine's snapshot bytes:

``[version, events_offset, control_offset, last_seen, state]``

``events_offset`` / ``control_offset`` are the offsets of the last events-topic
and control-topic records applied to the snapshot (-1: none yet). On restore,
records at or below them are skipped, so a record that was applied and
snapshotted but whose offset commit never happened is not applied twice.
``last_seen`` is the record timestamp (seconds) of the session's last record,
the clock of the idle TTL. A ``null`` value (tombstone) deletes the session;
compaction eventually removes both.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

import msgspec
from aiokafka import AIOKafkaConsumer, TopicPartition
from msgspec import Struct

ENVELOPE_VERSION = 1


class ChangelogEntry(Struct, array_like=True, gc=False):
    version: int
    events_offset: int
    control_offset: int
    last_seen: float
    state: bytes


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(ChangelogEntry)


class ChangelogError(ValueError):
    """A changelog record this version cannot read."""


def encode_entry(events_offset: int, control_offset: int, last_seen: float, state: bytes) -> bytes:
    return _encoder.encode(
        ChangelogEntry(ENVELOPE_VERSION, events_offset, control_offset, last_seen, state)
    )


def decode_entry(data: bytes) -> ChangelogEntry:
    try:
        entry = _decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise ChangelogError(f"unreadable changelog record: {exc}") from None
    if entry.version != ENVELOPE_VERSION:
        raise ChangelogError(f"changelog envelope version {entry.version} is not supported")
    return entry


def rehomed_entry(data: bytes) -> tuple[float, bytes]:
    """A snapshot to write on the session's new home partition after a partition-count
    change, with its ``last_seen``: the same state, the offsets -1 (they were the old
    partition's; kept, the new partition's first records would look applied already).
    Raises :class:`ChangelogError` for a record this version cannot read."""
    entry = decode_entry(data)
    return entry.last_seen, encode_entry(-1, -1, entry.last_seen, entry.state)


class RestoredPartition(Struct, kw_only=True):
    """The latest record per session key of one changelog partition (tombstones dropped)."""

    partition: int
    entries: dict[str, bytes]
    records_read: int
    seconds: float


async def iter_to_end(
    consumer: AIOKafkaConsumer,
    tps: Iterable[TopicPartition],
    *,
    poll_ms: int = 200,
    start: Mapping[TopicPartition, int] | None = None,
) -> AsyncIterator[tuple[TopicPartition, list[Any]]]:
    """Yield every record of ``tps`` from the beginning to the end seen at the start.

    ``start`` (optional) gives a partition's first offset to read instead of
    its beginning (clamped to what the broker holds; a record or so before it
    may be yielded too): readers that only want a partition's last records,
    such as ``streamguard session``.

    ``consumer`` must be group-less; it is assigned the non-empty ones of ``tps``. The end of a
    partition is the larger of the ListOffsets answer and the high watermark of
    the first fetch response: some Kafka-protocol brokers (Tansu 0.6) answer
    ListOffsets with the base offset of the last record batch plus one, which
    undercounts batches of several records; the fetch high watermark is right
    everywhere. Records appended after that end (a previous owner's straggling
    write) are not yielded.
    """
    tps = list(tps)
    if not tps:
        return
    begin = await consumer.beginning_offsets(tps)
    listed = await consumer.end_offsets(tps)
    ends: dict[TopicPartition, int | None] = {}
    firsts: dict[TopicPartition, int] = {}
    for tp in tps:
        if listed[tp] > begin[tp]:
            first = begin[tp]
            if start is not None and tp in start:
                # At most the last listed record: one record is always fetched, so
                # the high watermark of the fetch becomes known (see below).
                first = max(begin[tp], min(start[tp], listed[tp] - 1))
            firsts[tp] = first
            ends[tp] = None
    pending = set(firsts)
    if not pending:
        # Nothing to read. Not assigning at all also avoids aiokafka 0.14's fetcher
        # hanging in stop() after an assignment that was dropped before any fetch.
        return
    consumer.assign(list(firsts))
    for tp, first in firsts.items():
        consumer.seek(tp, first)
    try:
        while pending:
            batch = await consumer.getmany(*pending, timeout_ms=poll_ms)
            for tp in pending:
                if ends[tp] is None:
                    high = consumer.highwater(tp)
                    if high is not None:
                        ends[tp] = max(high, listed[tp])
            for tp, records in batch.items():
                end = ends.get(tp)
                if tp not in pending or end is None:
                    continue
                kept = [r for r in records if r.offset < end]
                if kept:
                    yield tp, kept
            for tp in list(pending):
                end = ends[tp]
                if end is not None and await consumer.position(tp) >= end:
                    pending.discard(tp)
    finally:
        consumer.assign([])


async def read_partitions(
    consumer: AIOKafkaConsumer,
    topic: str,
    partitions: Iterable[int],
    *,
    poll_ms: int = 200,
) -> dict[int, RestoredPartition]:
    """The latest snapshot per session of changelog partitions, read to their end."""
    started = time.monotonic()
    tps = [TopicPartition(topic, p) for p in sorted(set(partitions))]
    latest: dict[TopicPartition, dict[bytes, bytes | None]] = {tp: {} for tp in tps}
    counts = dict.fromkeys(tps, 0)
    async for tp, records in iter_to_end(consumer, tps, poll_ms=poll_ms):
        table = latest[tp]
        for record in records:
            if record.key is not None:
                table[record.key] = record.value
        counts[tp] += len(records)
    elapsed = time.monotonic() - started
    result = {}
    for tp in tps:
        entries = {}
        for key, value in latest[tp].items():
            if value is None:
                continue
            try:
                entries[key.decode()] = value
            except UnicodeDecodeError:
                continue
        result[tp.partition] = RestoredPartition(
            partition=tp.partition, entries=entries, records_read=counts[tp], seconds=elapsed
        )
    return result
