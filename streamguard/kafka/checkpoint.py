"""Checkpoints: the one owner of what has been processed and what is yet to be made durable.

A checkpoint, in this order and never otherwise:

1. every produced record it covers (outputs, dead letters, re-routes) is
   acknowledged by the brokers;
2. a snapshot of every session changed since the last checkpoint (a tombstone
   for every dropped one) is written to the changelog and acknowledged; each
   snapshot names the offsets it has applied;
3. the offsets of the records *processed* (never merely fetched) are committed.

What a checkpoint covers is fixed by :meth:`Checkpointer.stage`: the sends in
flight, the changed sessions as they are then and the positions processed so
far. Only staging holds up processing. The sessions are then encoded a slice
at a time between the loop's batches; a staged session about to take a record
is encoded first (:meth:`Checkpointer.before_change`: copy on write), so every
snapshot is its state at the start. The three steps run while the loop goes
on; whatever it processes meanwhile belongs to the next checkpoint. At most one
checkpoint is pending: the next, a revocation and the shutdown wait for it.

The checkpointer owns: the changed sessions (``dirty``), the staged ones not yet
encoded (``unstaged``) and their encoded records, the processed positions and
committed offsets, the event counter and the deadline. Everything it needs from
the rest of the processor is passed in: how to snapshot a session, the
changelog producer, how to commit, and the fault hook.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, NamedTuple

from aiokafka import AIOKafkaProducer, TopicPartition

from .config import ProcessorConfig
from .metrics import Metrics

log = logging.getLogger("streamguard.kafka")

# Sessions encoded between two turns of the loop (about 0.5 ms).
ENCODE_SLICE = 128

ChangelogRecord = tuple[int, bytes, bytes | None]  # (changelog partition, key, value or tombstone)


async def within(awaitable: Awaitable[Any], seconds: float, what: str) -> Any:
    """``awaitable``, or a :class:`TimeoutError` that says what did not happen in time."""
    try:
        return await asyncio.wait_for(awaitable, seconds)
    except TimeoutError:
        raise TimeoutError(f"{what} within {seconds:g} s") from None


REVOCATION_SHARE = 0.8
"""The share of ``rebalance_timeout_ms`` a checkpoint at a revocation may take: the rest
is the group's, which expels a member slower than the whole."""


async def revocation_checkpoint(
    checkpoint: Awaitable[Any], rebalance_timeout_ms: int, what: str = "the checkpoint on revocation"
) -> None:
    """``checkpoint``, run as a revocation's (:data:`REVOCATION_SHARE` of the rebalance
    timeout, else a :class:`TimeoutError` saying so). What a failure does is the
    caller's: aiokafka logs and swallows a rebalance listener's exception."""
    await within(
        checkpoint, rebalance_timeout_ms / 1000 * REVOCATION_SHARE,
        f"{what} did not finish (rebalance_timeout_ms)",
    )


class CheckpointPlan(NamedTuple):
    """What one checkpoint covers, fixed when it starts."""

    started: float
    outputs: list[asyncio.Future[Any]]  # every send made before it
    records: list[ChangelogRecord]  # filled as its sessions are encoded
    offsets: dict[TopicPartition, int]  # next offset to process, per partition


class Checkpointer:
    """Positions, changed sessions and the checkpoint cycle (see the module docstring)."""

    def __init__(
        self,
        config: ProcessorConfig,
        metrics: Metrics,
        *,
        snapshot: Callable[[str, int], ChangelogRecord],
        changelog_producer: Callable[[], AIOKafkaProducer | None],
        commit: Callable[[dict[TopicPartition, int]], Awaitable[bool]],
        hook: Callable[[str], None],
        on_complete: Callable[[], None] = lambda: None,
    ) -> None:
        self.config = config
        self.metrics = metrics
        self._snapshot = snapshot
        self._changelog_producer = changelog_producer
        self._commit = commit
        self._hook = hook
        self._on_complete = on_complete
        # session -> the changelog partition its record goes to
        self.dirty: dict[str, int] = {}
        # Sessions the pending checkpoint covers but has not encoded yet, and where
        # their records go. A session is encoded before its next record is applied
        # (copy on write), so each snapshot is the state as of the checkpoint's start.
        self.unstaged: dict[str, int] = {}
        self.staged_records: list[ChangelogRecord] = []
        self.positions: dict[TopicPartition, int] = {}  # next offset to process
        self.committed: dict[TopicPartition, int] = {}
        self.since = 0  # records processed since the last checkpoint started
        self.next_due = time.monotonic() + config.checkpoint_interval_ms / 1000
        self.pending: asyncio.Task[None] | None = None
        # Test seam: awaited by a checkpoint right after it is staged, before it
        # encodes or waits for anything (processing goes on meanwhile).
        self.gate: Callable[[], Awaitable[None]] | None = None
        self.on_failure: Callable[[BaseException], None] = lambda exc: None

    # ------------------------------------------------------- what happened

    def changed(self, session: str, partition: int) -> None:
        self.dirty[session] = partition

    def applied(self, tp: TopicPartition, next_offset: int) -> None:
        self.positions[tp] = next_offset

    def counted(self, records: int) -> None:
        self.since += records

    def before_change(self, session: str) -> None:
        """Copy on write: encode ``session`` for the pending checkpoint now, if it
        covers it and has not encoded it yet (it is about to change)."""
        partition = self.unstaged.pop(session, None)
        if partition is not None:
            self.staged_records.append(self._snapshot(session, partition))

    def forget(self, tps: Iterable[TopicPartition], sessions: Iterable[str] = ()) -> None:
        """A partition left this processor: its positions and changed sessions go too."""
        for tp in tps:
            self.positions.pop(tp, None)
            self.committed.pop(tp, None)
        for session in sessions:
            self.dirty.pop(session, None)

    def forget_session(self, session: str) -> None:
        self.dirty.pop(session, None)

    # --------------------------------------------------------------- timing

    def has_work(self, outbox_busy: bool) -> bool:
        if self.dirty or outbox_busy:
            return True
        return any(self.committed.get(tp) != pos for tp, pos in self.positions.items())

    def due(self, now: float, outbox_busy: bool) -> bool:
        """Whether the loop should start a checkpoint now."""
        if self.since >= self.config.checkpoint_every_events:
            return True
        return now >= self.next_due and self.has_work(outbox_busy)

    def idle_tick(self, now: float) -> None:
        """The deadline passed with nothing to checkpoint: set the next one."""
        self.next_due = now + self.config.checkpoint_interval_ms / 1000

    # ---------------------------------------------------------------- cycle

    def stage(
        self, outputs: list[asyncio.Future[Any]], include: Callable[[int], bool]
    ) -> CheckpointPlan:
        """Fix what this checkpoint covers: ``outputs`` (every send so far), every
        session changed since the last checkpoint as it is now, every position
        processed so far on the partitions ``include`` accepts (owned, restored).

        This is all that holds up processing. Whatever is processed after this
        point belongs to the next checkpoint, so the order the guarantees rest on
        holds for exactly the records this checkpoint covers.
        """
        started = time.monotonic()
        records: list[ChangelogRecord] = []
        self.unstaged, self.dirty = self.dirty, {}
        self.staged_records = records
        offsets = {
            tp: pos
            for tp, pos in self.positions.items()
            if self.committed.get(tp) != pos and include(tp.partition)
        }
        self.since = 0
        now = time.monotonic()
        self.next_due = now + self.config.checkpoint_interval_ms / 1000
        self.metrics.checkpoint_pause.observe(now - started)
        return CheckpointPlan(started, outputs, records, offsets)

    async def complete(self, plan: CheckpointPlan) -> None:
        """Outputs acked -> snapshots encoded, written and acked -> offsets committed."""
        if self.gate is not None:
            await self.gate()
        timeout = self.config.send_timeout_ms / 1000
        if plan.outputs:
            await within(
                asyncio.gather(*plan.outputs),
                timeout,
                f"the brokers did not acknowledge {len(plan.outputs)} produced records "
                "(send_timeout_ms)",
            )
        self._hook("outputs_acked")
        await self._write_changelog(plan.records)
        self._hook("changelog_acked")
        if await self._commit(plan.offsets):
            self.committed.update(plan.offsets)
        self._hook("committed")
        self.metrics.checkpoints.inc()
        self.metrics.last_checkpoint.set(time.time())
        self.metrics.checkpoint_duration.observe(time.monotonic() - plan.started)
        self._on_complete()

    def start(self, plan: CheckpointPlan) -> None:
        """Let ``plan`` complete alongside the loop (see :meth:`finish_pending`)."""
        self.pending = asyncio.create_task(self._complete_pending(plan))

    async def finish_pending(self) -> None:
        """Wait for the pending checkpoint; re-raises its failure."""
        task, self.pending = self.pending, None
        if task is not None:
            await task

    async def cancel_pending(self) -> None:
        task, self.pending = self.pending, None
        if task is not None and not task.done():
            task.cancel()
        if task is not None:
            try:
                await task
            except BaseException as exc:  # a crash stops without committing: nothing to report
                log.debug("pending checkpoint ended: %r", exc)

    async def _complete_pending(self, plan: CheckpointPlan) -> None:
        try:
            await self.complete(plan)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            # The loop raises it at its next turn: stop without committing more.
            self.on_failure(exc)
            log.error("checkpoint failed: %r", exc)
            raise

    def encode_slice(self, limit: int = ENCODE_SLICE) -> bool:
        """Encode up to ``limit`` staged sessions; whether any are left."""
        unstaged = self.unstaged
        append = self.staged_records.append
        snapshot = self._snapshot
        for _ in range(min(limit, len(unstaged))):
            session, partition = unstaged.popitem()
            append(snapshot(session, partition))
        return bool(unstaged)

    async def _write_changelog(self, records: list[ChangelogRecord]) -> None:
        """Encode the staged sessions a slice at a time, send each slice as soon as it
        is encoded, then wait for every acknowledgement.

        ``records`` is the checkpoint's record list: sessions encoded early by copy
        on write are in it already, and are sent with the next slice. Each slice
        goes out as one producer batch per changelog partition (no per-record send,
        future or wake-up), so the broker takes a checkpoint as a stream of small
        requests rather than one burst of megabytes, and the loop gets a turn
        between slices.
        """
        producer = self._changelog_producer()
        assert producer is not None
        topic = self.config.changelog_topic
        observe = self.metrics.snapshot_bytes.observe
        sent: list[asyncio.Future[Any]] = []
        done = tombstones = 0
        more = True
        while more or done < len(records):
            more = self.encode_slice()
            end = len(records)  # copy on write may append while a send awaits
            batches: dict[int, Any] = {}
            for i in range(done, end):
                partition, key, value = records[i]
                if value is None:
                    tombstones += 1
                else:
                    observe(len(value))
                batch = batches.get(partition)
                if batch is None:
                    batch = batches[partition] = producer.create_batch()
                if batch.append(key=key, value=value, timestamp=None) is None:
                    sent.append(await producer.send_batch(batch, topic, partition=partition))
                    batch = batches[partition] = producer.create_batch()
                    batch.append(key=key, value=value, timestamp=None)  # a lone record fits
            for partition, batch in batches.items():
                if batch.record_count():
                    batch.close()
                    sent.append(await producer.send_batch(batch, topic, partition=partition))
            done = end
            if more:
                await asyncio.sleep(0)
        if tombstones < done:
            self.metrics.changelog_records.labels("snapshot").inc(done - tombstones)
        if tombstones:
            self.metrics.changelog_records.labels("tombstone").inc(tombstones)
        if sent:
            await within(
                asyncio.gather(*sent),
                self.config.send_timeout_ms / 1000,
                f"the brokers did not acknowledge {done} changelog records (send_timeout_ms)",
            )
