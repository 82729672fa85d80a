"""The client library against a real broker: publishers in, subscriber out (no processor)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import msgspec
import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.partitioner import murmur2

from streamguard.client import AsyncPublisher, Publisher, TripSubscriber
from streamguard.events import Alert, GuardrailTrip, Output, agent_decoder, encode
from streamguard.kafka.broker import LocalBroker, free_port
from tests.kafka.conftest import poll_until

pytestmark = pytest.mark.kafka

# A single-member group joins in about half the session timeout on the test
# broker; 2 s keeps each subscriber test near one second, with ten heartbeats
# of margin per session.
QUICK_GROUP = {"session_timeout_ms": 2000, "heartbeat_interval_ms": 200, "rebalance_timeout_ms": 4000}


def output_headers(output: Output) -> list[tuple[str, bytes]]:
    """The headers the processor puts on an output record."""
    headers = [("type", output.__struct_config__.tag.encode())]
    if isinstance(output, Alert | GuardrailTrip):
        headers.append(("signal", output.signal.encode()))
    if isinstance(output, GuardrailTrip):
        headers.append(("guardrail", output.guardrail.encode()))
    return headers


def trip(id_: str, session: str = "s-1", **overrides: Any) -> GuardrailTrip:
    fields: dict[str, Any] = {
        "id": id_,
        "session": session,
        "agent": "coder",
        "ts": 1.0,
        "seq": 1,
        "guardrail": "watchdog",
        "signal": "repeated-tool-call",
        "scope": "session",
        "halted_turn": True,
        "session_halted": True,
        "reason": "looping",
    }
    fields.update(overrides)
    return GuardrailTrip(**fields)


def alert(id_: str, signal: str, session: str = "s-1") -> Alert:
    return Alert(
        id=id_,
        session=session,
        agent="coder",
        ts=1.0,
        seq=1,
        signal=signal,
        severity="critical",
        scope="session",
        reason="r",
        guidance="g",
    )


async def send_output(
    topics, output: Output, *, headers: bool = True, value: bytes | None = None
) -> None:
    await topics.send(
        topics.alerts,
        encode(output) if value is None else value,
        key=output.session,
        headers=output_headers(output) if headers else None,
    )


# --------------------------------------------------------------------------- publishers


async def test_async_publisher_delivers_keyed_ordered_events(topics) -> None:
    async with AsyncPublisher(
        topics.bootstrap, topic=topics.events, agent="coder", linger_ms=5
    ) as pub:
        for session in ("s-a", "s-b", "s-c"):
            pub.turn_start(session)
            for i in range(3):
                pub.tool_call(session, "read_file", {"path": f"f{i}"}, call_id=f"c{i}")
                pub.tool_result(session, "read_file", call_id=f"c{i}", result_bytes=10)
            pub.usage(session, model="m", input_tokens=100, cost_usd=0.01)
        pub.publish({"type": "final_answer", "session": "s-a", "text": "done", "x-extra": 1})
    stats = pub.stats
    assert stats.as_dict() | {"last_error": None} == {
        "accepted": 25,
        "dropped": 0,
        "sent": 25,
        "published": 25,
        "failed": 0,
        "in_flight": 0,
        "connected": False,
        "last_error": None,
    }

    records = await topics.read_until(topics.events, lambda rs: len(rs) >= 25)
    assert len(records) == 25
    by_session: dict[str, list[Any]] = {}
    for record in records:
        event = agent_decoder.decode(record.value)
        assert record.key == event.session.encode()
        # aiokafka's default partitioner is the Java client's murmur2
        assert record.partition == (murmur2(record.key) & 0x7FFFFFFF) % topics.partitions
        by_session.setdefault(event.session, []).append((record.offset, event))
    for events in by_session.values():
        events.sort(key=lambda pair: pair[0])
        seqs = [e.seq for _, e in events if e.seq is not None]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        assert all(e.agent == "coder" for _, e in events if e.seq is not None)
    extra = [r for r in records if b"x-extra" in r.value]
    assert len(extra) == 1 and msgspec.json.decode(extra[0].value)["x-extra"] == 1


async def test_sync_publisher_delivers_from_a_plain_thread(topics) -> None:
    def agent() -> Publisher:
        publisher = Publisher(topics.bootstrap, topic=topics.events, agent="sync-bot")
        for i in range(10):
            publisher.text("s-sync", f"step {i}")
        assert publisher.close(timeout=10) is True
        return publisher

    publisher = await asyncio.to_thread(agent)
    assert publisher.stats.published == 10 and publisher.stats.dropped == 0
    records = await topics.read_until(topics.events, lambda rs: len(rs) >= 10)
    texts = [agent_decoder.decode(r.value).text for r in sorted(records, key=lambda r: r.offset)]
    assert texts == [f"step {i}" for i in range(10)]


async def test_publisher_buffers_until_the_broker_appears() -> None:
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    pub = AsyncPublisher(bootstrap, topic="late.events", retry_backoff=(0.05, 0.2))
    await pub.start()
    for i in range(5):
        pub.tool_call("s-late", "t", {"i": i})
    await poll_until(lambda: pub.stats.last_error is not None, 5, "a failed connection attempt")
    assert pub.stats.published == 0 and pub.buffered == 5

    with LocalBroker(port=port) as broker:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        await admin.start()
        try:
            await admin.create_topics([NewTopic("late.events", 1, 1)])
        finally:
            await admin.close()
        await poll_until(lambda: pub.stats.published == 5, 20, "delivery after the broker started")
        assert await pub.close(timeout=5) is True
    assert pub.stats.dropped == 0 and pub.stats.failed == 0


# --------------------------------------------------------------------------- subscriber


async def collect(subscriber: TripSubscriber, until_id: str, timeout: float = 20.0) -> list[Output]:
    seen: list[Output] = []

    async def run() -> None:
        async for output in subscriber:
            seen.append(output)
            if output.id == until_id:
                return

    await asyncio.wait_for(run(), timeout)
    return seen


async def test_subscriber_filters_on_headers_dedups_and_commits(topics) -> None:
    first = trip("t-1")
    await send_output(topics, first)
    await send_output(topics, first)  # delivered twice upstream
    # selected by nothing: never decoded, so even garbage bytes pass through harmlessly
    await send_output(topics, alert("a-1", "repeated-tool-call"), value=b"\xff garbage")
    await send_output(
        topics, trip("t-2", signal="cost-ceiling", guardrail="cost_ceiling"), headers=False
    )
    await send_output(topics, trip("t-3"))

    subscriber = TripSubscriber(
        topics.bootstrap,
        group_id=topics.group,
        topic=topics.alerts,
        auto_offset_reset="earliest",
        **QUICK_GROUP,
    )
    async with subscriber:
        got = await collect(subscriber, "t-3")
    assert [o.id for o in got] == ["t-1", "t-2", "t-3"]
    assert got[0] == first and isinstance(got[1], GuardrailTrip)
    assert subscriber.stats.duplicates == 1
    assert subscriber.stats.handled == 3
    assert subscriber.stats.malformed == 0

    ends = await topics.end_offsets(topics.alerts)
    committed = await topics.committed(topics.alerts)
    partition = next(p for p, end in ends.items() if end)
    assert committed[partition] == ends[partition] == 5


async def test_subscriber_does_not_commit_a_record_whose_handler_failed(topics) -> None:
    await send_output(topics, trip("t-ok"))
    await send_output(topics, trip("t-boom"))
    await send_output(topics, trip("t-after"))

    class Boom(Exception):
        pass

    handled: list[str] = []
    subscriber = TripSubscriber(
        topics.bootstrap,
        group_id=topics.group,
        topic=topics.alerts,
        auto_offset_reset="earliest",
        **QUICK_GROUP,
    )
    with pytest.raises(Boom):
        async with subscriber:
            async for output in subscriber:
                if output.id == "t-boom":
                    raise Boom
                handled.append(output.id)
    assert handled == ["t-ok"]
    committed = await topics.committed(topics.alerts)
    # t-ok (offset 0) is committed; t-boom (offset 1) is not, so the group reads it again
    assert sorted(committed.values())[-1] == 1


async def test_subscriber_selects_alerts_by_signal_and_stops_on_request(topics) -> None:
    await send_output(topics, alert("a-loop", "repeated-tool-call"))
    await send_output(topics, alert("a-ignored", "halt-ignored"))
    await send_output(topics, trip("t-x"))
    subscriber = TripSubscriber(
        topics.bootstrap,
        group_id=topics.group,
        topic=topics.alerts,
        types=["alert"],
        signals=["halt-ignored"],
        auto_offset_reset="earliest",
        **QUICK_GROUP,
    )
    got: list[str] = []

    async def handler(output: Output) -> None:
        got.append(output.id)
        subscriber.stop()

    async with subscriber:
        await asyncio.wait_for(subscriber.run(handler), 20)
    assert got == ["a-ignored"]
    with contextlib.suppress(Exception):
        await subscriber.close()


async def test_a_restarted_subscriber_reads_a_trip_sent_to_a_quiet_partition_while_it_was_down(topics) -> None:
    """With auto_offset_reset="latest", a partition that carried nothing since the group
    first joined had no commit: a restart applied "latest" to it again and skipped a trip
    written there meanwhile. The starting offsets are committed at assignment."""
    options = dict(group_id=topics.group, topic=topics.alerts, auto_offset_reset="latest", **QUICK_GROUP)
    first = TripSubscriber(topics.bootstrap, **options)
    async with first:
        await poll_until(lambda: bool(first._assigned), timeout=20, what="an assignment")
        await poll_until(lambda: first.stats.commits > 0, timeout=20, what="the starting offsets committed")
    await send_output(topics, trip("t-while-down"))
    second = TripSubscriber(topics.bootstrap, **options)
    async with second:
        got = await collect(second, "t-while-down")
    assert [o.id for o in got] == ["t-while-down"]
