"""Rebalances: revoke, suspend, assign, restore.

Rebalances are eager in aiokafka: every rebalance revokes everything and then
assigns. Revoked partitions are checkpointed and *suspended*; when the new
assignment hands a partition straight back and its changelog has not moved
since, its sessions are kept instead of being reloaded. New partitions are
*restoring* (paused) until their sessions have been read from the changelog
by a background task; then they are *active* and resumed.

The rebalancer owns the assignment generation, the restore task and every
partition status change. It reaches the rest of the processor only through
the :class:`RebalanceHost` it is given.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import msgspec
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import IllegalStateError, KafkaError

from ..engine import Engine
from .changelog import ChangelogEntry, ChangelogError, decode_entry, read_partitions
from .checkpoint import Checkpointer, revocation_checkpoint
from .config import ProcessorConfig
from .inspect import home_partition
from .metrics import Metrics
from .sessions import OwnedPartition, PartitionStatus, SessionTable
from .topics import PartitionCountChanged

log = logging.getLogger("streamguard.kafka")


class RebalanceHost(Protocol):
    """What the rebalancer needs from the processor."""

    lock: asyncio.Lock
    fatal: BaseException | None
    stopping: asyncio.Event
    clock: Callable[[], float]
    partition_count: int

    @property
    def consumer(self) -> AIOKafkaConsumer | None: ...
    @property
    def restorer(self) -> AIOKafkaConsumer | None: ...
    async def checkpoint(self) -> None: ...
    def resume_active(self, tps: Iterable[TopicPartition]) -> None: ...
    def partition_active(self, part: OwnedPartition) -> None: ...


class Listener(ConsumerRebalanceListener):
    def __init__(self, rebalancer: Rebalancer) -> None:
        self.rebalancer = rebalancer

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self.rebalancer.on_revoked(set(revoked))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        await self.rebalancer.on_assigned(set(assigned))


def describe(tps: Iterable[TopicPartition]) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ", ".join(f"{t}{sorted(ps)}" for t, ps in sorted(by_topic.items())) or "none"


class Rebalancer:
    """Partition ownership over the group's rebalances (see the module docstring)."""

    def __init__(
        self,
        config: ProcessorConfig,
        metrics: Metrics,
        engine: Engine,
        sessions: SessionTable,
        checkpointer: Checkpointer,
        host: RebalanceHost,
    ) -> None:
        self.config = config
        self.metrics = metrics
        self.engine = engine
        self.sessions = sessions
        self.checkpointer = checkpointer
        self.host = host
        self.generation = 0
        self.assigned_once = False
        self.restore_task: asyncio.Task[None] | None = None

    def tps(self, partition: int) -> tuple[TopicPartition, TopicPartition]:
        return (
            TopicPartition(self.config.events_topic, partition),
            TopicPartition(self.config.control_topic, partition),
        )

    # ----------------------------------------------------------- callbacks

    async def on_revoked(self, revoked: set[TopicPartition]) -> None:
        host = self.host
        async with host.lock:
            self.generation += 1
            if host.fatal is not None or not self.sessions.partitions:
                return
            try:
                await revocation_checkpoint(host.checkpoint(), self.config.rebalance_timeout_ms)
            except BaseException as exc:
                # aiokafka would log and swallow this; make the loop fail loudly instead.
                host.fatal = exc
                log.error("checkpoint on revocation failed: %r", exc)
                return
            suspended = [
                n for n, p in self.sessions.partitions.items() if p.status is PartitionStatus.ACTIVE
            ]
            marks: dict[int, int] = {}
            if suspended:
                with contextlib.suppress(KafkaError, asyncio.TimeoutError):
                    marks = await asyncio.wait_for(self._changelog_ends(suspended), 5)
            for number in suspended:
                part = self.sessions.partitions[number]
                part.status = PartitionStatus.SUSPENDED
                part.changelog_mark = marks.get(number)
            log.info("partitions revoked: %s", describe(revoked))

    async def on_assigned(self, assigned: set[TopicPartition]) -> None:
        host = self.host
        async with host.lock:
            self.generation += 1
            self.metrics.rebalances.inc()
            if host.fatal is not None:
                return
            try:
                await self._assign(assigned)
            except BaseException as exc:
                # aiokafka would log and swallow this, leaving partitions unprocessed.
                host.fatal = exc
                log.error("handling the partition assignment failed: %r", exc)

    # ----------------------------------------------------------- assignment

    async def _assign(self, assigned: set[TopicPartition]) -> None:
        """The assignment, under the lock: drop, keep or restore each partition."""
        cfg = self.config
        partitions = self.sessions.partitions
        events = {tp.partition for tp in assigned if tp.topic == cfg.events_topic}
        self._check_partition_count(events)
        control = {tp.partition for tp in assigned if tp.topic == cfg.control_topic}
        if events != control:
            log.error(
                "events and control partitions are not co-partitioned (%s vs %s); "
                "is another assignor in use by a member of group %r?",
                sorted(events),
                sorted(control),
                cfg.group_id,
            )
        for number in list(partitions):
            if number not in events:
                self.drop_partition(number)
        kept = [
            n
            for n, p in partitions.items()
            if p.status in (PartitionStatus.SUSPENDED, PartitionStatus.ACTIVE)
        ]
        if kept:
            try:
                ends = await asyncio.wait_for(self._changelog_ends(kept), 10)
            except (TimeoutError, KafkaError) as exc:
                log.warning("cannot check the changelog (%r): reloading kept partitions", exc)
                ends = {}
            for number in kept:
                part = partitions[number]
                if part.changelog_mark is not None and ends.get(number) == part.changelog_mark:
                    part.status = PartitionStatus.ACTIVE
                    self.host.partition_active(part)
                else:
                    log.info("partition %d changed hands meanwhile: reloading it", number)
                    self.drop_partition(number)
        restoring = []
        for number in sorted(events):
            owned = partitions.get(number)
            if owned is None:
                self.sessions.add_partition(number, PartitionStatus.RESTORING)
                self.checkpointer.forget(self.tps(number))
                restoring.append(number)
            elif owned.status is PartitionStatus.RESTORING:
                restoring.append(number)
        consumer = self.host.consumer
        if restoring and consumer is not None:
            tps = [tp for n in restoring for tp in self.tps(n) if tp in assigned]
            if tps:
                consumer.pause(*tps)
        if self.host.stopping.is_set() and consumer is not None and assigned:
            consumer.pause(*assigned)
        self.metrics.owned_partitions.set(len(events))
        self.assigned_once = True
        log.info("assigned partitions %s (restoring %s)", sorted(events), restoring or "none")
        if restoring and (self.restore_task is None or self.restore_task.done()):
            self.restore_task = asyncio.create_task(self._restore_worker())

    def _check_partition_count(self, events: set[int]) -> None:
        """Stop when the events topic's partition count changed since start-up. Every key's
        home partition moved with it, and whether the control and changelog topics were
        raised alike is checked only at start-up: going on would dead-letter records on
        their new homes, or co-partition nothing. A restart reads the new count (and
        refuses to start until the three topics agree).

        Two signs, either enough: a partition at or beyond the count is assigned (the
        group's leader saw the new count before this member's metadata did), or this
        member's metadata lists another count."""
        known = self.host.partition_count
        if known <= 0:
            return
        consumer = self.host.consumer
        listed = consumer.partitions_for_topic(self.config.events_topic) if consumer is not None else None
        if listed and len(listed) != known:
            now = f"{len(listed)}"
        elif events and max(events) >= known:
            now = f"at least {max(events) + 1}"
        else:
            return
        raise PartitionCountChanged(
            f"the partition count of {self.config.events_topic!r} changed from {known} to {now} "
            "while running: stopping so that a restart reads it. Raise the control and changelog "
            "topics to the same count, and run `streamguard rehome` with the processors stopped "
            "to keep the state of the sessions that moved (docs/kafka.md#changing-the-partition-count)"
        )

    def drop_partition(self, number: int) -> None:
        """Forget a partition that left: its sessions, positions and lag series."""
        if number not in self.sessions.partitions:
            return
        dropped = self.sessions.drop_partition(number)
        tps = self.tps(number)
        self.checkpointer.forget(tps, dropped)
        for tp in tps:
            with contextlib.suppress(KeyError):
                self.metrics.lag.remove(tp.topic, str(number))

    async def _changelog_ends(self, partitions: list[int]) -> dict[int, int]:
        restorer = self.host.restorer
        assert restorer is not None
        tps = [TopicPartition(self.config.changelog_topic, n) for n in partitions]
        ends = await restorer.end_offsets(tps)
        return {tp.partition: offset for tp, offset in ends.items()}

    # -------------------------------------------------------------- restore

    async def _restore_worker(self) -> None:
        host = self.host
        try:
            while True:
                wanted = {
                    n: p
                    for n, p in self.sessions.partitions.items()
                    if p.status is PartitionStatus.RESTORING
                }
                if not wanted:
                    return
                restorer = host.restorer
                assert restorer is not None
                started = time.monotonic()
                loaded = await read_partitions(restorer, self.config.changelog_topic, wanted)
                async with host.lock:
                    for number, original in wanted.items():
                        part = self.sessions.partitions.get(number)
                        if part is not original or part.status is not PartitionStatus.RESTORING:
                            continue  # dropped (or replaced) while we were reading
                        installed = self._install(part, loaded[number].entries)
                        part.status = PartitionStatus.ACTIVE
                        host.partition_active(part)
                        host.resume_active(self.tps(number))
                        log.info(
                            "restored partition %d: %d sessions from %d changelog records",
                            number,
                            installed,
                            loaded[number].records_read,
                        )
                self.metrics.restore_duration.observe(time.monotonic() - started)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            log.error("restore failed: %r", exc)
            host.fatal = exc

    def _install(self, part: OwnedPartition, entries: dict[str, bytes]) -> int:
        decoded: list[tuple[str, ChangelogEntry]] = []
        meta = self.sessions.meta
        count = self.host.partition_count
        misplaced = 0
        for session, value in entries.items():
            try:
                entry = decode_entry(value)
                held = meta.get(session)
                if held is not None and held.partition != part.number:
                    # Two snapshots of one session on two changelog partitions (the
                    # topics' partition count was changed, or a record was forged). One
                    # state per session: the one on its home partition, where its events
                    # arrive. Installing both would list it on two partitions.
                    self.metrics.skipped.labels("duplicate_snapshot").inc()
                    if count <= 0 or home_partition(session, count) != part.number:
                        log.warning(
                            "session %r: a second snapshot, on changelog partition %d, skipped: "
                            "it is held on partition %d", session, part.number, held.partition,
                        )
                        continue
                    log.warning(
                        "session %r: the snapshot on its home partition %d replaces the one "
                        "installed from partition %d", session, part.number, held.partition,
                    )
                    self.sessions.drop_session(session)
                self.engine.restore(session, entry.state)
            except (ChangelogError, msgspec.DecodeError, ValueError) as exc:
                log.error(
                    "session %r: snapshot not restorable (%s); it starts afresh", session, exc
                )
                self.metrics.skipped.labels("unrestorable_snapshot").inc()
                continue
            decoded.append((session, entry))
            if count > 0 and home_partition(session, count) != part.number:
                misplaced += 1
        if misplaced:
            # Kept (its events may still come here: a publisher on the old count), but
            # said: after a count change these sessions' events arrive elsewhere, where
            # they start afresh, halts forgotten.
            self.metrics.misplaced_sessions.inc(misplaced)
            log.warning(
                "partition %d: %d restored session(s) belong on other partitions of %d (the partition "
                "count changed?); their events arrive elsewhere and start afresh there. Stop the "
                "processors and run `streamguard rehome` (docs/kafka.md)",
                part.number, misplaced, count,
            )
        installed = self.sessions.install(part, decoded, self.host.clock())
        self.metrics.restored_sessions.inc(installed)
        return installed

    async def cancel(self) -> None:
        task, self.restore_task = self.restore_task, None
        if task is not None and not task.done():
            task.cancel()
        if task is not None:
            with contextlib.suppress(BaseException):
                await task


def rewind(consumer: AIOKafkaConsumer | None, tp: TopicPartition, records: list[Any]) -> None:
    """Fetch ``records`` again later: they were returned but not processed.

    A partition revoked meanwhile is left alone: its new owner starts from the
    committed offset.
    """
    if consumer is None or not records:
        return
    with contextlib.suppress(IllegalStateError, KafkaError, AssertionError):
        if tp in consumer.assignment():
            consumer.seek(tp, records[0].offset)
