"""The client library without a broker: buffering, drop accounting, seq, validation, selection."""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamguard.client import (
    DEFAULT_ALERTS_TOPIC,
    DEFAULT_CONTROL_TOPIC,
    DEFAULT_EVENTS_TOPIC,
    AsyncPublisher,
    Filter,
    InvalidEvent,
    Publisher,
    encode_event,
    header_decision,
    select_record,
)
from streamguard.events import (
    Alert,
    GuardrailTrip,
    Reset,
    ToolCall,
    agent_decoder,
    encode,
)
from streamguard.kafka.broker import free_port
from streamguard.kafka.config import ProcessorConfig


@pytest.fixture
def dead_bootstrap() -> str:
    """A loopback port nothing listens on: every connection attempt is refused."""
    return f"127.0.0.1:{free_port()}"


def buffered_events(publisher: AsyncPublisher) -> list:
    return [agent_decoder.decode(value) for _, value in list(publisher._buffer)]


def test_default_topics_match_the_processor() -> None:
    defaults = ProcessorConfig()
    assert (
        defaults.events_topic,
        defaults.control_topic,
        defaults.alerts_topic,
    ) == (DEFAULT_EVENTS_TOPIC, DEFAULT_CONTROL_TOPIC, DEFAULT_ALERTS_TOPIC)


# --------------------------------------------------------------------------- validation


def test_encode_event_accepts_structs_and_dicts_and_keeps_extra_fields() -> None:
    session, data = encode_event(ToolCall(session="s1", tool="read_file", args={"path": "a"}))
    assert session == "s1"
    assert msgspec.json.decode(data)["tool"] == "read_file"
    session, data = encode_event(
        {"type": "text", "session": "s2", "text": "hi", "x-runtime": "v7"}
    )
    assert session == "s2"
    assert msgspec.json.decode(data)["x-runtime"] == "v7"  # publishers may add fields


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ({"type": "tool_call", "tool": "x"}, "session"),
        ({"type": "tool_call", "session": "s", "tool": "x", "seq": -1}, "seq"),
        ({"type": "teleport", "session": "s"}, "unknown event type"),
        ({"type": "reset", "session": "s"}, "control event"),
        (Reset(session="s"), "control event"),
        (ToolCall(session="", tool="x"), "length"),
        ({"type": "tool_call", "session": "s", "tool": "x", "args": {1j: 2}}, "encode"),
        ("not an event", "expected an event"),
    ],
)
def test_invalid_events_are_refused_at_once(event, message) -> None:
    with pytest.raises(InvalidEvent, match=message):
        encode_event(event)


def test_publish_refuses_invalid_events_without_buffering(dead_bootstrap) -> None:
    publisher = AsyncPublisher(dead_bootstrap)
    with pytest.raises(InvalidEvent):
        publisher.publish({"type": "usage", "session": "s", "cost_usd": -1})
    with pytest.raises(InvalidEvent):
        publisher.usage("s", cost_usd=-1.0)
    assert publisher.buffered == 0
    assert publisher.stats.accepted == 0


# --------------------------------------------------------------------------- buffering


async def test_absent_broker_never_blocks_and_counts_drops(dead_bootstrap) -> None:
    publisher = AsyncPublisher(dead_bootstrap, buffer_size=5, retry_backoff=(0.01, 0.05))
    await publisher.start()
    started = time.monotonic()
    for i in range(12):
        publisher.tool_call("s1", "read_file", {"path": f"f{i}"})
        await asyncio.sleep(0)  # let the drain task run between publishes
    elapsed = time.monotonic() - started
    assert elapsed < 1.0, f"publishing took {elapsed:.2f} s with the broker away"
    stats = publisher.stats
    assert stats.accepted == 12
    assert stats.dropped == 7
    assert publisher.buffered == 5
    assert stats.sent == stats.published == 0
    # the oldest were dropped: the five newest remain, in order
    assert [e.args["path"] for e in buffered_events(publisher)] == [f"f{i}" for i in range(7, 12)]

    started = time.monotonic()
    assert await publisher.close(timeout=0.3) is False
    assert time.monotonic() - started < 3.0
    assert stats.dropped == 12  # the five left at close count too
    assert not stats.connected
    assert stats.last_error and "KafkaConnectionError" in stats.last_error
    with pytest.raises(RuntimeError):
        publisher.text("s1", "after close")


async def test_publish_inside_a_loop_starts_the_drain_lazily(dead_bootstrap) -> None:
    publisher = AsyncPublisher(dead_bootstrap, retry_backoff=(0.01, 0.05))
    assert publisher._task is None
    publisher.turn_start("s1")
    assert publisher._task is not None
    await publisher.close(timeout=0.1)
    assert publisher.stats.dropped == 1


async def test_context_manager_closes_within_its_timeout(dead_bootstrap) -> None:
    started = time.monotonic()
    async with AsyncPublisher(dead_bootstrap, close_timeout=0.2) as publisher:
        publisher.text("s1", "hello")
    assert time.monotonic() - started < 3.0
    assert publisher.stats.dropped == 1


@settings(max_examples=60, deadline=None)
@given(size=st.integers(1, 8), count=st.integers(0, 30))
def test_drop_accounting_invariant(size: int, count: int) -> None:
    """Without a drain: accepted = dropped + buffered, and the buffer keeps the newest events."""
    publisher = AsyncPublisher("127.0.0.1:9", buffer_size=size)
    for i in range(count):
        publisher.publish(ToolCall(session="s", tool="t", args=i))
    stats = publisher.stats
    assert stats.accepted == count
    assert stats.dropped == max(count - size, 0)
    assert stats.accepted == stats.dropped + publisher.buffered
    assert [e.args for e in buffered_events(publisher)] == list(range(count))[-size:]


# --------------------------------------------------------------------------- helpers and seq


def test_helpers_fill_session_agent_seq_and_ts() -> None:
    publisher = AsyncPublisher("127.0.0.1:9", agent="triage-bot")
    before_us = time.time_ns() // 1000
    call = publisher.tool_call("s1", "read_file", {"path": "a"}, call_id="c1", kind="read", turn=3)
    result = publisher.tool_result("s1", "read_file", call_id="c1", error="denied")
    other = publisher.text("s2", "thinking", role="reasoning", agent="other-bot")
    usage = publisher.usage("s1", model="m", input_tokens=10, cost_usd=0.5)
    answer = publisher.final_answer("s1", "done")
    start, end = publisher.turn_start("s2"), publisher.turn_end("s2")

    assert call.agent == "triage-bot" and other.agent == "other-bot"
    assert call.turn == 3 and call.kind == "read" and result.error == "denied"
    assert usage.cost_usd == 0.5 and answer.text == "done"
    assert all(e.ts is not None and abs(e.ts - time.time()) < 5 for e in (call, other, end))
    # per-session, contiguous, starting at (or above) the current time in microseconds
    assert call.seq >= before_us
    assert [result.seq, usage.seq, answer.seq] == [call.seq + 1, call.seq + 2, call.seq + 3]
    assert [start.seq, end.seq] == [other.seq + 1, other.seq + 2]
    # what was buffered is what the helpers returned
    assert buffered_events(publisher) == [call, result, other, usage, answer, start, end]


def test_a_forgotten_or_evicted_session_restarts_above_every_seq_handed_out() -> None:
    publisher = AsyncPublisher("127.0.0.1:9", max_sessions=2)
    first = [publisher.next_seq("a") for _ in range(3)]
    publisher.forget("a")
    again = publisher.next_seq("a")
    assert again > first[-1]
    publisher.next_seq("b")
    publisher.next_seq("c")  # evicts "a" (least recently used)
    assert "a" not in publisher._seqs
    assert publisher.next_seq("a") > again


def test_seq_survives_a_backwards_clock(monkeypatch) -> None:
    publisher = AsyncPublisher("127.0.0.1:9")
    high = publisher.next_seq("a")
    monkeypatch.setattr(time, "time_ns", lambda: 1_000_000_000)  # 1970
    assert publisher.next_seq("b") > high


def test_publish_sends_structs_as_given() -> None:
    publisher = AsyncPublisher("127.0.0.1:9")
    event = ToolCall(session="s", tool="t", seq=7)
    publisher.publish(event)
    publisher.publish({"type": "turn_end", "session": "s"})
    key, value = publisher._buffer[0]
    assert key == b"s" and value == encode(event)
    assert buffered_events(publisher)[1].seq is None


# --------------------------------------------------------------------------- sync publisher


def test_sync_publisher_never_blocks_and_keeps_seq_order_across_threads(dead_bootstrap) -> None:
    publisher = Publisher(dead_bootstrap, buffer_size=100_000, retry_backoff=(0.01, 0.05))
    try:
        durations: list[float] = []

        def worker(n: int) -> None:
            for i in range(300):
                started = time.monotonic()
                publisher.tool_call("shared", "t", {"worker": n, "i": i})
                durations.append(time.monotonic() - started)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert publisher.stats.accepted == 1200
        assert max(durations) < 0.5
        seqs = [e.seq for e in buffered_events(publisher._async)]
        assert len(seqs) == 1200
        assert seqs == sorted(seqs) and len(set(seqs)) == 1200  # buffer order == seq order
    finally:
        started = time.monotonic()
        assert publisher.close(timeout=0.2) is False
        assert time.monotonic() - started < 5.0
    assert publisher.stats.dropped == 1200
    assert not publisher._thread.is_alive()


def test_sync_publisher_drops_oldest_when_full(dead_bootstrap) -> None:
    with Publisher(dead_bootstrap, buffer_size=3, close_timeout=0.1) as publisher:
        for i in range(10):
            publisher.publish({"type": "tool_call", "session": "s", "tool": "t", "args": i})
        assert publisher.stats.dropped == 7
        assert publisher.buffered == 3
        assert [e.args for e in buffered_events(publisher._async)] == [7, 8, 9]
    assert publisher.stats.dropped == 10


# --------------------------------------------------------------------------- selection


def record(value: bytes, headers=None, key: bytes = b"s1"):
    return SimpleNamespace(
        value=value, headers=tuple(headers or ()), key=key, topic="t", partition=0, offset=0
    )


TRIP = GuardrailTrip(
    id="t1", session="s1", agent=None, ts=1.0, seq=5, guardrail="watchdog",
    signal="repeated-tool-call", scope="session", halted_turn=True, session_halted=True, reason="r",
)
ALERT = Alert(
    id="a1", session="s1", agent=None, ts=1.0, seq=5, signal="halt-ignored", severity="critical",
    scope="session", reason="r", guidance="g",
)


def test_headers_decide_without_decoding() -> None:
    trips = (Filter(types=["guardrail_trip"]),)
    # a non-matching record is never decoded: garbage bytes are fine
    garbage = record(b"\xff not json", [("type", b"alert"), ("signal", b"repeated-tool-call")])
    assert select_record(garbage, trips) == (False, None)
    assert header_decision(garbage, trips) is False
    # a matching one is decoded
    selected, output = select_record(
        record(encode(TRIP), [("type", b"guardrail_trip"), ("signal", b"repeated-tool-call"),
                              ("guardrail", b"watchdog")]),
        trips,
    )
    assert selected and output == TRIP
    # and a matching one that does not decode raises
    with pytest.raises(msgspec.DecodeError):
        select_record(record(b"{}", [("type", b"guardrail_trip")]), trips)


def test_filters_combine_criteria_and_alternatives() -> None:
    controller = (
        Filter(types=["guardrail_trip"]),
        Filter(types=["alert"], signals=["halt-ignored"]),
    )
    halt_ignored = [("type", b"alert"), ("signal", b"halt-ignored")]
    other_alert = [("type", b"alert"), ("signal", b"repeated-tool-call")]
    feedback = [("type", b"feedback"), ("signal", b"a,halt-ignored")]
    assert header_decision(record(b"", halt_ignored), controller) is True
    assert header_decision(record(b"", other_alert), controller) is False
    assert header_decision(record(b"", feedback), controller) is False
    assert header_decision(record(b"", feedback), (Filter(signals=["halt-ignored"]),)) is True
    cost = (Filter(guardrails="cost_ceiling"),)
    assert header_decision(record(b"", [("type", b"guardrail_trip"), ("guardrail", b"watchdog")]), cost) is False
    assert header_decision(record(b"", [("type", b"x")]), ()) is True  # no filter: everything


def test_records_without_headers_are_judged_on_their_fields() -> None:
    controller = (
        Filter(types=["guardrail_trip"]),
        Filter(types=["alert"], signals=["halt-ignored"]),
    )
    assert header_decision(record(encode(ALERT)), controller) is None
    assert select_record(record(encode(ALERT)), controller) == (True, ALERT)
    other = msgspec.structs.replace(ALERT, signal="repeated-tool-call")
    assert select_record(record(encode(other)), controller) == (False, None)
