"""Checkpoint staging without a broker: every snapshot is the state at the checkpoint's start.

A checkpoint fixes the sessions it covers when it starts, then encodes them a
slice at a time while the processor keeps applying records; a covered session
about to take a record is encoded first. Whatever the interleaving of records,
controls, evictions and slices, the records a checkpoint writes must be exactly
the snapshots (or tombstones) of its sessions as they were when it started.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import TopicPartition
from aiokafka.structs import ConsumerRecord
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamguard.events import Reset, Text, ToolCall, TurnStart, encode
from streamguard.kafka.changelog import encode_entry
from streamguard.kafka.config import ProcessorConfig
from streamguard.kafka.processor import Processor
from streamguard.kafka.sessions import PartitionStatus
from streamguard.policy import Policy

EVENTS, CONTROL = "agent.events", "streamguard.control"
SESSIONS = ("s-a", "s-b", "s-c", "s-d")
IDLE_TTL_S = 30.0


class _AckedProducer:
    """Stands in for the producer: every send is acknowledged at once."""

    async def send(self, topic: str, **_: Any) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future


def _processor(clock: Any = None) -> Processor:
    config = ProcessorConfig.build(
        {"session_idle_ttl_s": IDLE_TTL_S, "halted_session_ttl_s": 10 * IDLE_TTL_S}
    )
    processor = Processor(
        config, policy=Policy(mode="enforce"), clock=clock or (lambda: 1_767_225_600.0)
    )
    processor.partition_count = 1
    processor.sessions.add_partition(0, PartitionStatus.ACTIVE)
    processor._producer = _AckedProducer()  # type: ignore[assignment]
    return processor


def expected_value(processor: Processor, session: str) -> bytes | None:
    """A session's changelog value computed from the engine and the session table
    directly (not through the checkpoint code under test): its snapshot, or a
    tombstone when it is no longer held."""
    meta = processor.sessions.meta.get(session)
    state = processor.engine.snapshot(session)
    if meta is None or state is None:
        return None
    return encode_entry(meta.events_offset, meta.control_offset, meta.last_seen, state)


def _record(topic: str, offset: int, ts: float, event: Any) -> ConsumerRecord:
    value = encode(event)
    key = event.session.encode()
    return ConsumerRecord(
        topic, 0, offset, int(ts * 1000), 0, key, value, None, len(key), len(value), []
    )


session = st.sampled_from(SESSIONS)
# Few tools, so loops (outputs, halts) happen; big time steps, so idle sessions are evicted.
step = st.one_of(
    st.tuples(st.just("call"), session, st.sampled_from(["ls", "read", "grep"])),
    st.tuples(st.just("text"), session, st.just("")),
    st.tuples(st.just("turn"), session, st.just("")),
    st.tuples(st.just("reset"), session, st.just("")),
    st.tuples(st.just("later"), st.just(""), st.sampled_from(["1", "40"])),
    st.tuples(st.just("checkpoint"), st.just(""), st.just("")),
    st.tuples(st.just("slice"), st.just(""), st.sampled_from(["1", "2"])),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, min_size=1, max_size=80))
def test_staged_records_are_the_sessions_as_they_were_at_the_start(steps) -> None:
    async def run() -> None:
        ts = 1_767_225_600.0
        processor = _processor(clock=lambda: ts)  # processing time moves with the records
        offsets = {EVENTS: 0, CONTROL: 0}
        expected: dict[bytes, bytes | None] | None = None
        checked = 0

        def finish() -> None:
            nonlocal expected, checked
            if expected is None:
                return
            while processor.checkpointer.encode_slice():
                pass
            written = processor.checkpointer.staged_records
            assert len({key for _, key, _ in written}) == len(written), "a session written twice"
            assert {key: value for _, key, value in written} == expected
            checked += 1
            expected = None

        def feed(topic: str, event: Any) -> None:
            record = _record(topic, offsets[topic], ts, event)
            offsets[topic] += 1
            processor._process(TopicPartition(topic, 0), [record])

        for kind, who, arg in steps:
            if kind == "call":
                feed(EVENTS, ToolCall(session=who, agent="coder", tool=arg, args={"p": 1}))
            elif kind == "text":
                feed(EVENTS, Text(session=who, agent="coder", text="status: working"))
            elif kind == "turn":
                feed(EVENTS, TurnStart(session=who, agent="coder"))
            elif kind == "reset":
                feed(CONTROL, Reset(session=who, by="ops"))
            elif kind == "later":
                ts += float(arg)
            elif kind == "slice":
                processor.checkpointer.encode_slice(int(arg))
            else:
                finish()  # the next checkpoint waits for the pending one
                await processor._stage()
                expected = {
                    session.encode(): expected_value(processor, session)
                    for session in processor.checkpointer.unstaged
                }
        finish()

    asyncio.run(run())


def test_a_session_changed_after_the_start_is_encoded_before_the_change() -> None:
    """The plain case of the property above, spelled out."""

    async def run() -> None:
        processor = _processor()
        tp = TopicPartition(EVENTS, 0)
        t0 = 1_767_225_600.0
        first = ToolCall(session="s-a", agent="coder", tool="ls", args={})
        processor._process(tp, [_record(EVENTS, 0, t0, first)])
        await processor._stage()
        before = processor.snapshot_record("s-a", 0)
        assert "s-a" in processor.checkpointer.unstaged
        second = ToolCall(session="s-a", agent="coder", tool="ls", args={})
        processor._process(tp, [_record(EVENTS, 1, t0 + 1, second)])
        assert "s-a" not in processor.checkpointer.unstaged
        assert processor.checkpointer.staged_records == [before]
        assert processor.snapshot_record("s-a", 0) != before  # the live state moved on
        assert processor.checkpointer.dirty == {"s-a": 0}  # and is covered by the next checkpoint

    asyncio.run(run())
