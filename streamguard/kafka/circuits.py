"""The circuits table: every fleet scope's circuit, read in full by every instance.

The fleet stage writes each scope's circuit to a compacted topic, keyed by
scope (:class:`~streamguard.fleet_windows.CircuitRecord`, JSON). Every
instance of ``streamguard run`` reads that topic from its beginning, with a
group-less consumer assigned every partition, and keeps following it: a
global table. The processor applies each change to the sessions it holds
(:meth:`Processor.apply_circuit`) and asks :meth:`CircuitTable.open_for` on
every event while any circuit is open, so sessions it restores or starts later
are tripped at their first event.

A record that does not decode is handed to ``on_invalid`` (the processor
dead-letters it with reason ``invalid_circuit``) and the table moves on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from ..fleet_windows import CircuitRecord, decode_circuit

log = logging.getLogger("streamguard.kafka")

POLL_MS = 100


class CircuitTable:
    """The latest circuit of every scope, and a task that keeps it current."""

    def __init__(
        self,
        consumer_options: dict[str, Any],
        topic: str,
        *,
        on_change: Callable[[CircuitRecord, CircuitRecord | None], Awaitable[None]],
        on_invalid: Callable[[TopicPartition, Any, str], None],
        on_failure: Callable[[BaseException], None] = lambda exc: None,
        fetch_max_wait_ms: int = 100,
    ) -> None:
        self._options = consumer_options
        self.topic = topic
        self._on_change = on_change
        self._on_invalid = on_invalid
        self._on_failure = on_failure
        self._fetch_max_wait_ms = fetch_max_wait_ms
        self.circuits: dict[str, CircuitRecord] = {}
        self.open: dict[str, CircuitRecord] = {}  # scope -> its circuit, while open
        self.loaded = asyncio.Event()  # the topic was read to the end seen at start
        self._consumer: AIOKafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None
        self.failure: BaseException | None = None

    async def start(self) -> None:
        consumer = AIOKafkaConsumer(
            **self._options,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=self._fetch_max_wait_ms,
        )
        await consumer.start()
        self._consumer = consumer
        try:
            partitions = consumer.partitions_for_topic(self.topic)
            if partitions is None:
                await consumer.topics()  # refresh the metadata once
                partitions = consumer.partitions_for_topic(self.topic) or set()
            tps = [TopicPartition(self.topic, p) for p in sorted(partitions)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            ends = await consumer.end_offsets(tps) if tps else {}
        except BaseException:
            await consumer.stop()
            self._consumer = None
            raise
        self._task = asyncio.create_task(self._follow(tps, ends))

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(consumer.stop(), 10)

    def open_for(self, scopes: tuple[str, ...]) -> CircuitRecord | None:
        """The first open circuit among ``scopes`` (None: all closed)."""
        open_ = self.open
        for scope in scopes:
            circuit = open_.get(scope)
            if circuit is not None:
                return circuit
        return None

    async def _follow(self, tps: list[TopicPartition], ends: dict[TopicPartition, int]) -> None:
        consumer = self._consumer
        assert consumer is not None
        # The end of each partition at start: the larger of ListOffsets and the first
        # fetch's high watermark (some brokers undercount ListOffsets, see changelog.py).
        remaining = {tp: end for tp, end in ends.items() if end > 0}
        if not remaining:
            self.loaded.set()
        try:
            while True:
                batch = await consumer.getmany(timeout_ms=POLL_MS)
                for tp, records in batch.items():
                    for record in records:
                        await self._apply(tp, record)
                if remaining:
                    for tp in list(remaining):
                        high = consumer.highwater(tp)
                        end = max(remaining[tp], high or 0)
                        if await consumer.position(tp) >= end:
                            del remaining[tp]
                    if not remaining:
                        self.loaded.set()
                        log.info("circuits table loaded: %d scopes, %d open", len(self.circuits), len(self.open))
        except asyncio.CancelledError:
            raise
        except (KafkaError, OSError) as exc:
            # A table that stops following its topic would leave circuits unapplied
            # without a sound: the instance fails, and its orchestrator restarts it.
            self.failure = exc
            log.error("reading the circuits table failed: %r", exc)
            self._on_failure(exc)
            raise

    async def _apply(self, tp: TopicPartition, record: Any) -> None:
        if record.value is None:
            return  # a tombstone: nothing streamguard writes; ignored
        try:
            circuit = decode_circuit(record.value)
            if record.key is not None and record.key != circuit.scope.encode():
                raise ValueError(f"record key {record.key!r} is not the circuit's scope")
        except (msgspec.DecodeError, ValueError, RecursionError) as exc:
            self._on_invalid(tp, record, str(exc))
            return
        previous = self.circuits.get(circuit.scope)
        if previous is not None and (circuit.generation, circuit.state == "closed") < (
            previous.generation,
            previous.state == "closed",
        ):
            return  # older than what the table has (a zombie's late write)
        self.circuits[circuit.scope] = circuit
        if circuit.state == "open":
            self.open[circuit.scope] = circuit
        else:
            self.open.pop(circuit.scope, None)
        if previous is None or (previous.state, previous.generation) != (circuit.state, circuit.generation):
            try:
                await self._on_change(circuit, previous)
            except Exception:  # a bug applying one circuit must not stop the table
                log.exception("applying the circuit of scope %s failed", circuit.scope)
