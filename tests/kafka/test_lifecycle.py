"""Topic set-up, session TTLs, backpressure, probes."""

from __future__ import annotations

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from streamguard.events import ToolCall
from streamguard.kafka.processor import Processor, StartupError
from tests.kafka.conftest import ManualClock, Topics, http_get, metric_value, poll_until
from tests.kafka.scenarios import T0, by_id, calm, expected_outputs, repeat_loop

pytestmark = pytest.mark.kafka


async def send_at(topics: Topics, events: list, offset_s: float = 0.0) -> None:
    """Send events with record timestamps equal to their event time (+ offset)."""
    for event in events:
        await topics.send(topics.events, event, timestamp_ms=int((event.ts + offset_s) * 1000))


@pytest.mark.parametrize("topics", [1], indirect=True)
async def test_idle_sessions_are_evicted_and_halted_ones_kept_longer(
    topics, start_processor
) -> None:
    clock = ManualClock()
    running = await start_processor(
        session_idle_ttl_s=100, halted_session_ttl_s=1000, clock=clock
    )
    proc = running.processor
    await send_at(topics, repeat_loop("s-halted"))
    await send_at(topics, calm("s-idle"))
    await poll_until(
        lambda: proc.engine.is_halted("s-halted") and "s-idle" in proc.engine.sessions,
        20,
        "both sessions",
    )

    # A record stamped a week ahead is clamped to the clock and evicts nothing.
    future = ToolCall(session="s-clock", tool="ls", args={}, ts=T0)
    await topics.send(
        topics.events, future, timestamp_ms=int((clock() + 7 * 24 * 3600) * 1000)
    )
    await poll_until(lambda: "s-clock" in proc.engine.sessions, 20, "the future-stamped record")
    await topics.wait_committed()
    assert {"s-idle", "s-halted", "s-clock"} <= set(proc.engine.sessions)
    assert proc.metrics.timestamps_clamped._value.get() == 1

    # Processing time moves on, with no record at all: the timer sweep evicts the
    # idle sessions; the halted one stays.
    clock.advance(200)
    await poll_until(lambda: "s-idle" not in proc.engine.sessions, 20, "the idle eviction")
    assert "s-clock" not in proc.engine.sessions
    assert proc.engine.is_halted("s-halted")
    await send_at(topics, [ToolCall(session="s-clock", tool="ls", args={"n": 1}, ts=T0 + 200)])
    await poll_until(lambda: "s-clock" in proc.engine.sessions, 20, "s-clock again")

    # 2000 s later even the halted session has outlived its TTL (and s-clock is idle).
    clock.advance(2000)
    await poll_until(
        lambda: not {"s-halted", "s-clock"} & set(proc.engine.sessions), 20, "the evictions"
    )
    await send_at(topics, [ToolCall(session="s-clock", tool="ls", args={"n": 2}, ts=T0 + 2000)])
    await poll_until(lambda: "s-clock" in proc.engine.sessions, 20, "s-clock once more")
    await topics.wait_committed()

    latest: dict[bytes, bytes | None] = {}
    for record in await topics.read_all(topics.changelog):
        latest[record.key] = record.value
    assert latest[b"s-idle"] is None and latest[b"s-halted"] is None  # tombstones
    assert latest[b"s-clock"] is not None
    text = await running.metrics_text()
    assert metric_value(text, "streamguard_sessions_evicted_total", kind="idle") == 3.0
    assert metric_value(text, "streamguard_sessions_evicted_total", kind="halted") == 1.0
    assert metric_value(text, "streamguard_sessions_halted") == 0.0
    await running.stop()

    # A restart restores only what is left.
    again = await start_processor(
        session_idle_ttl_s=100, halted_session_ttl_s=1000, clock=clock
    )
    assert set(again.processor.engine.sessions) == {"s-clock"}
    # An evicted session that comes back starts afresh.
    await send_at(topics, [ToolCall(session="s-idle", tool="ls", args={}, ts=T0 + 2001)])
    await poll_until(lambda: "s-idle" in again.processor.engine.sessions, 20, "the fresh session")
    assert again.processor.engine.sessions["s-idle"].applied == 1


async def test_backpressure_pauses_fetching_and_loses_nothing(topics, start_processor) -> None:
    running = await start_processor(max_in_flight=1)
    streams = [repeat_loop(f"s-{i}") for i in range(4)]
    expected: dict = {}
    for events in streams:
        expected.update(by_id(expected_outputs(events)))
        await topics.send_events(events)
    await topics.read_until(topics.alerts, lambda rs: len(rs) >= len(expected))
    assert by_id(await topics.outputs()) == expected
    await topics.wait_committed()
    text = await running.metrics_text()
    assert (metric_value(text, "streamguard_backpressure_pauses_total") or 0) >= 1


async def test_create_topics_makes_co_partitioned_topics_and_a_compacted_changelog(broker) -> None:
    topics = Topics(broker.bootstrap_servers, "fresh-create", 3)
    processor = Processor(topics.config(create_topics=True, partitions=3))
    await processor.start()
    try:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        await admin.start()
        try:
            described = await admin.describe_topics(topics.all())
            assert {d["topic"]: len(d["partitions"]) for d in described} == dict.fromkeys(
                topics.all(), 3
            )
            # the default replication factor of 3, placed on the one broker there is
            replicas = {len(p["replicas"]) for d in described for p in d["partitions"]}
            assert replicas == {1}
            configs = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, topics.changelog)]
            )
            entries = {e[0]: e[1] for e in configs[0].resources[0][4]}
            assert entries["cleanup.policy"] == "compact"
        finally:
            await admin.close()
    finally:
        processor.request_stop()
        await processor._close_clients()
    await topics.close()


async def test_missing_or_mismatched_topics_fail_at_start(broker) -> None:
    missing = Topics(broker.bootstrap_servers, "never-made", 2)
    with pytest.raises(StartupError, match=r"missing topics: never-made\.events"):
        await Processor(missing.config()).start()

    skewed = Topics(broker.bootstrap_servers, "skewed", 2)
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    await admin.start()
    try:
        await admin.create_topics(
            [NewTopic(t, 3 if t == skewed.changelog else 2, 1) for t in skewed.all()]
        )
    finally:
        await admin.close()
    with pytest.raises(StartupError, match=r"same partition count.*changelog=3"):
        await Processor(skewed.config()).start()


async def test_probes_before_and_after_assignment(topics) -> None:
    processor = Processor(topics.config())
    ok, detail = processor._readiness()
    assert not ok and "assignment" in detail
    await processor.start()
    try:
        port = processor.metrics_port
        assert (await http_get(port, "/healthz"))[0] == 200
        await poll_until(lambda: processor.ready, 30, "readiness")
        assert (await http_get(port, "/readyz"))[0] == 200
        processor.request_stop()
        status, body = await http_get(port, "/readyz")
        assert status == 503 and "stopping" in body
    finally:
        await processor._close_clients()
