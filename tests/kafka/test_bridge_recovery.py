"""The bridge's state across crashes, on the real broker, with ``streamguard run`` downstream.

A bridge crashes inside a checkpoint (the processor's fault points, see
``streamguard.otel.bridge.FAULT_POINTS``), a new one takes over from what was
durable, and the events topic and the processor are checked:

* ``outputs_acked``: events released and acknowledged, the sessions' state not
  yet snapshotted, no offset committed. The new bridge reads the same records
  again from the previous snapshot and releases the same events again, with the
  **same seq**: nothing is lost, every copy is byte-identical, and the processor
  skips the copies as replays (``seq_not_newer``), applying each event once;
* ``changelog_acked``: the snapshot is written, the offsets are not committed.
  The records read again are known to the restored state: nothing is released
  twice.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from streamguard.events import decode_agent_event
from streamguard.kafka.processor import SimulatedCrash
from streamguard.otel.bridge import Bridge, create_bridge_topics

from ..otel.agent import SWEEP, Collecting, provider, run_agent
from ..otel.otlp_fixtures import spans_proto
from .conftest import Topics, poll_until
from .test_bridge import EVENTS_PER_RUN, bridge_config

pytestmark = pytest.mark.kafka

SESSION = "conv-crash"


class CrashInCheckpoint:
    """A fault hook: crash at ``point`` in the first checkpoint, once armed, that has
    released events since the last snapshot (so the crash loses something)."""

    def __init__(self, point: str) -> None:
        self.point = point
        self.armed = False
        self.bridge: Bridge | None = None

    def __call__(self, where: str) -> None:
        if not self.armed or where != self.point or self.bridge is None:
            return
        released_since_snapshot = any(w.changed for w in self.bridge.windows.values())
        if self.point != "outputs_acked" or released_since_snapshot:
            self.armed = False
            raise SimulatedCrash(where)


async def run_bridge(topics: Topics, **kwargs: Any) -> tuple[Bridge, asyncio.Task[None]]:
    bridge = Bridge(bridge_config(topics), **kwargs)
    task = asyncio.create_task(bridge.run())
    await poll_until(lambda: bridge.ready, 30, "bridge ready", task=task)
    return bridge, task


async def wait_bridge_committed(topics: Topics, bridge: Bridge) -> None:
    """Wait until the bridge's group has committed everything now in its sessions topic."""
    topic = bridge.config.sessions_topic
    ends = await topics.end_offsets(topic)

    async def committed() -> bool:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=topics.bootstrap, group_id=bridge.config.group_id,
            enable_auto_commit=False,
        )
        await consumer.start()
        try:
            for partition, end in ends.items():
                offset = await consumer.committed(TopicPartition(topic, partition))
                if end > 0 and (offset is None or offset < end):
                    return False
            return True
        finally:
            await consumer.stop()

    await poll_until(committed, 30, "the bridge's commit")


def events_released(bridge: Bridge) -> float:
    return bridge.metrics.registry.get_sample_value("streamguard_bridge_events_total") or 0.0


async def events_of(topics: Topics) -> list[tuple[int, bytes]]:
    out = []
    for record in await topics.read_all(topics.events):
        event = decode_agent_event(record.value)
        if event.session == SESSION:
            out.append((event.seq, record.value))
    return out


@pytest.mark.parametrize("point, copies_expected", [("outputs_acked", True), ("changelog_acked", False)])
async def test_a_crash_in_a_checkpoint_loses_nothing_and_repeats_only_same_seq(
    topics: Topics, start_processor: Any, point: str, copies_expected: bool
) -> None:
    await create_bridge_topics(bridge_config(topics), topics.partitions)
    processor = await start_processor()
    exporter = Collecting()
    run_agent(provider(exporter), SESSION, SWEEP)
    spans = exporter.spans
    crash = CrashInCheckpoint(point)
    bridge, task = await run_bridge(topics, fault=crash)
    crash.bridge = bridge
    spans_topic = bridge.config.spans_topic

    # the first half goes through and is checkpointed; the crash hits the second
    await topics.send(spans_topic, spans_proto(spans[:8]), key=b"exporter-1")
    await poll_until(lambda: events_released(bridge) > 0, 30, "first events")
    await wait_bridge_committed(topics, bridge)
    crash.armed = True
    await topics.send(spans_topic, spans_proto(spans[8:]), key=b"exporter-1")
    with contextlib.suppress(BaseException):
        await asyncio.wait_for(asyncio.shield(task), 30)
    assert task.done() and isinstance(task.exception(), SimulatedCrash), "the bridge did not crash"

    again, again_task = await run_bridge(topics)
    try:
        found: list[tuple[int, bytes]] = []

        async def complete() -> bool:
            found[:] = await events_of(topics)
            return {seq for seq, _ in found} >= set(range(1, EVENTS_PER_RUN + 1))

        await poll_until(complete, 30, "every event of the run", task=again_task)
        await topics.wait_committed(topics=[topics.events])
        await wait_bridge_committed(topics, again)
        found[:] = await events_of(topics)

        copies: dict[int, set[bytes]] = defaultdict(set)
        for seq, value in found:
            copies[seq].add(value)
        assert sorted(copies) == list(range(1, EVENTS_PER_RUN + 1))  # none lost, seq dense
        assert all(len(values) == 1 for values in copies.values())  # a copy is the same event
        repeated = len(found) - EVENTS_PER_RUN
        assert (repeated > 0) == copies_expected, f"{repeated} events released twice"

        state = processor.processor.engine.sessions[SESSION]
        assert state.applied == EVENTS_PER_RUN  # each event applied once
        engine = processor.processor.engine
        # the copies reach the processor as replays: skipped (seq_not_newer), not applied
        await poll_until(lambda: engine.stats.replays_skipped >= repeated, 30, "the replays skipped")
        assert engine.stats.replays_skipped == repeated
        assert engine.sessions[SESSION].applied == EVENTS_PER_RUN
        assert again.fatal is None and processor.processor.fatal is None
    finally:
        again.request_stop()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(again_task, 30)
