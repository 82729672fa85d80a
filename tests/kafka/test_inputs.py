"""Bad input and operator input: dead letters, resets, re-routing."""

from __future__ import annotations

import msgspec
import pytest
from aiokafka.partitioner import murmur2

from streamguard.events import GuardrailReset, Reset, ToolCall
from streamguard.kafka.outbox import MAX_DEAD_LETTER_KEY, REROUTED_HEADER
from tests.kafka.conftest import metric_value, poll_until
from tests.kafka.scenarios import T0, repeat_loop

pytestmark = pytest.mark.kafka


def home(session: str, partitions: int) -> int:
    return (murmur2(session.encode()) & 0x7FFFFFFF) % partitions


async def test_poison_records_are_dead_lettered_and_processing_continues(
    topics, start_processor
) -> None:
    running = await start_processor()
    good = ToolCall(session="s-1", tool="ls", args={}, ts=T0)
    poison = [
        # (key, value, reason)
        (b"s-1", b"{not json", "malformed"),
        (b"s-1", b'{"type": "tool_call", "session": "s-1"}', "invalid_event"),  # no tool
        (b"s-1", b'{"type": "tool_call", "session": "", "tool": "x"}', "invalid_event"),
        (b"s-1", b'{"type": "reset", "session": "s-1"}', "control_on_events_topic"),
        (b"s-other", msgspec.json.encode(good), "key_mismatch"),
        (None, msgspec.json.encode(good), "key_mismatch"),
        # a key no session id can be: refused before the partitioner hashes it
        (b"k" * 200_000, msgspec.json.encode(good), "key_mismatch"),
        (b"s-1", None, "null_value"),
    ]
    sent = []
    for key, value, _ in poison:
        meta = await topics.send(topics.events, value, key=key, headers=[("origin", b"test")])
        sent.append(meta)
    # an event type from a newer contract is skipped and counted, not dead-lettered
    await topics.send(topics.events, b'{"type": "thought", "session": "s-1"}', key=b"s-1")
    # and the partition keeps flowing: a loop after the poison still trips
    await topics.send_events(repeat_loop("s-1"))

    dlq = await topics.read_until(
        topics.dlq, lambda rs: len(rs) >= len(poison), what="dead letters"
    )
    await topics.read_until(
        topics.alerts, lambda rs: len(rs) >= 2, what="the loop's alert and trip"
    )
    assert len(dlq) == len(poison)
    by_offset = {
        (int(dict(r.headers)["dlq.source.partition"]), int(dict(r.headers)["dlq.source.offset"])): r
        for r in dlq
    }
    for (key, value, reason), meta in zip(poison, sent, strict=True):
        record = by_offset[(meta.partition, meta.offset)]
        headers = dict(record.headers)
        assert record.key == (key if key is None else key[:MAX_DEAD_LETTER_KEY])
        assert record.value == value
        assert headers["dlq.reason"] == reason.encode()
        assert headers["dlq.source.topic"] == topics.events.encode()
        assert headers["origin"] == b"test"  # the original headers are kept
        assert headers["dlq.error"] and len(headers["dlq.error"]) < 300  # a key is quoted short
    assert running.processor.engine.is_halted("s-1")

    await topics.wait_committed()
    text = await running.metrics_text()
    assert metric_value(text, "streamguard_dead_letters_total", reason="invalid_event") == 2.0
    assert metric_value(text, "streamguard_dead_letters_total", reason="key_mismatch") == 3.0
    assert (
        metric_value(text, "streamguard_security_events_total", kind="control_on_events_topic")
        == 1.0
    )
    assert metric_value(text, "streamguard_events_skipped_total", reason="unknown_type") == 1.0


async def test_resets_work_on_the_control_topic_and_not_on_the_events_topic(
    topics, start_processor
) -> None:
    running = await start_processor()
    engine = running.processor.engine
    await topics.send_events(repeat_loop("s-r"))
    await poll_until(lambda: engine.is_halted("s-r"), 20, "the halt")

    # A reset smuggled into the agents' stream changes nothing.
    await topics.send(topics.events, Reset(session="s-r", by="agent"))
    await topics.read_until(topics.dlq, lambda rs: len(rs) == 1, what="the refused reset")
    await topics.wait_committed()
    assert engine.is_halted("s-r")

    # The operator's reset on the control topic clears the halt and is acknowledged.
    await topics.send(topics.control, Reset(session="s-r", by="oncall"))
    await poll_until(lambda: not engine.is_halted("s-r"), 20, "the reset")
    outputs = await topics.outputs()
    receipts = [o for o in outputs if isinstance(o, GuardrailReset)]
    assert len(receipts) == 1
    assert receipts[0].accepted and receipts[0].by == "oncall"

    # Agent events on the control topic are refused.
    await topics.send(topics.control, ToolCall(session="s-r", tool="ls", args={}))
    dlq = await topics.read_until(topics.dlq, lambda rs: len(rs) == 2, what="the agent event")
    reasons = sorted(dict(r.headers)["dlq.reason"] for r in dlq)
    assert reasons == [b"control_on_events_topic", b"not_a_control_event"]


async def test_control_records_on_the_wrong_partition_are_rerouted(topics, start_processor) -> None:
    """A control producer with another partitioner (librdkafka's default) still reaches the session."""
    running = await start_processor()
    engine = running.processor.engine
    n = topics.partitions
    # a session with state: the reset lands elsewhere and is sent to the session's partition
    await topics.send_events(repeat_loop("s-a"))
    await poll_until(lambda: engine.is_halted("s-a"), 20, "the halt")
    wrong = (home("s-a", n) + 1) % n
    await topics.send(topics.control, Reset(session="s-a", by="ops"), partition=wrong)
    await poll_until(lambda: not engine.is_halted("s-a"), 20, "the re-routed reset")

    # a session without state yet: routed by the murmur2 hash of its id
    wrong_b = (home("s-b", n) + 1) % n
    await topics.send(topics.control, Reset(session="s-b", by="ops"), partition=wrong_b)
    await poll_until(lambda: "s-b" in engine.sessions, 20, "the routed reset")

    control = await topics.read_all(topics.control)
    rerouted = [r for r in control if REROUTED_HEADER in dict(r.headers)]
    assert sorted((r.key, r.partition) for r in rerouted) == [
        (b"s-a", home("s-a", n)),
        (b"s-b", home("s-b", n)),
    ]
    assert running.processor.sessions.meta["s-b"].partition == home("s-b", n)
    receipts = [o for o in await topics.outputs() if isinstance(o, GuardrailReset)]
    assert sorted(o.session for o in receipts) == ["s-a", "s-b"]
    await topics.wait_committed()
    text = await running.metrics_text()
    assert metric_value(text, "streamguard_control_rerouted_total") == 2.0
