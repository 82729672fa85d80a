"""``streamguard bridge`` end to end on the real broker, with the real OpenTelemetry SDK.

A test agent instrumented with ``opentelemetry-sdk`` runs a loop (the same read
six times) and a healthy sweep (six different reads). Its spans reach the
bridge (a) through the SDK's own OTLP/HTTP exporter into the bridge's receiver
and (b) as the Collector's Kafka exporter writes them (``TracesData`` in
protobuf and in JSON) on the spans topic; ``streamguard run`` consumes the
events the bridge publishes. The loop must end in a halting trip, the sweep in
nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import msgspec
import pytest

from streamguard.events import GuardrailTrip, decode_agent_event
from streamguard.otel.bridge import Bridge, create_bridge_topics
from streamguard.otel.config import BridgeConfig

from ..otel.agent import LOOP, SWEEP, Collecting, provider, run_agent
from ..otel.otlp_fixtures import spans_json, spans_proto
from .conftest import FAST_GROUP, Topics, poll_until

pytestmark = pytest.mark.kafka


def bridge_config(topics: Topics, **overrides: Any) -> BridgeConfig:
    raw: dict[str, Any] = {
        "bootstrap_servers": topics.bootstrap,
        "group_id": f"{topics.prefix}.bridge",
        "spans_topic": f"{topics.prefix}.otlp_spans",
        "logs_topic": f"{topics.prefix}.otlp_logs",
        "sessions_topic": f"{topics.prefix}.otel.sessions",
        "bridge_changelog_topic": f"{topics.prefix}.otel.changelog",
        "dlq_topic": f"{topics.prefix}.otel.dlq",
        "events_topic": topics.events,
        "metrics_host": "127.0.0.1",
        "metrics_port": 0,
        "reorder_window_ms": 100,
        "checkpoint_interval_ms": 200,
        "linger_ms": 0,
        **FAST_GROUP,
    }
    raw.update(overrides)
    return BridgeConfig.build(raw)


@pytest.fixture
async def start_bridge(topics: Topics) -> AsyncIterator[Callable[..., Awaitable[Bridge]]]:
    await create_bridge_topics(bridge_config(topics), topics.partitions)
    running: list[tuple[Bridge, asyncio.Task[None]]] = []

    async def start(**overrides: Any) -> Bridge:
        bridge = Bridge(bridge_config(topics, **overrides))
        task = asyncio.create_task(bridge.run())
        running.append((bridge, task))
        await poll_until(lambda: bridge.ready, 30, "bridge ready", task=task)
        return bridge

    yield start
    for bridge, task in running:
        bridge.request_stop()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(task, 30)


def sdk_spans(conversation: str, calls: list[Any], **kwargs: Any) -> list[Any]:
    exporter = Collecting()
    run_agent(provider(exporter), conversation, calls, **kwargs)
    return exporter.spans


async def events_by_session(topics: Topics) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for record in await topics.read_all(topics.events):
        event = decode_agent_event(record.value)
        assert record.key == event.session.encode()
        out.setdefault(event.session, []).append(event)
    return out


async def wait_events(topics: Topics, expected: dict[str, int]) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}

    async def complete() -> bool:
        nonlocal found
        found = await events_by_session(topics)
        return all(len(found.get(s, [])) >= n for s, n in expected.items())

    await poll_until(complete, 30, f"events of {sorted(expected)}")
    return found


# 6 calls: 7 model calls (usage), 6 calls, 6 results, 1 text, 1 turn end
EVENTS_PER_RUN = 7 + 6 + 6 + 1 + 1


async def test_collector_kafka_exporter_proto_and_json_through_bridge_and_run(
    topics: Topics, start_processor: Any, start_bridge: Any
) -> None:
    processor = await start_processor()
    bridge = await start_bridge()
    spans_topic = bridge.config.spans_topic
    loop_spans = sdk_spans("conv-loop", LOOP)
    sweep_spans = sdk_spans("conv-sweep", SWEEP)
    # exported in two batches each, the later half first (out of order across batches),
    # the loop as protobuf, the sweep as JSON, and one batch exported twice (a retry)
    await topics.send(spans_topic, spans_proto(loop_spans[8:]), key=b"")
    await topics.send(spans_topic, spans_json(sweep_spans[8:]))
    await topics.send(spans_topic, spans_proto(loop_spans[:8]))
    await topics.send(spans_topic, spans_proto(loop_spans[:8]))
    await topics.send(spans_topic, spans_json(sweep_spans[:8]))
    await topics.send(spans_topic, b"\x0a\xff\xff garbage")

    found = await wait_events(topics, {"conv-loop": EVENTS_PER_RUN, "conv-sweep": EVENTS_PER_RUN})
    for session in ("conv-loop", "conv-sweep"):
        events = found[session]
        assert len(events) == EVENTS_PER_RUN  # the retried batch was dropped
        assert [e.seq for e in events] == list(range(1, EVENTS_PER_RUN + 1))
        assert [e.ts for e in events] == sorted(e.ts for e in events)

    trips = []

    async def tripped() -> bool:
        trips[:] = [o for o in await topics.outputs() if isinstance(o, GuardrailTrip)]
        return bool(trips)

    await poll_until(tripped, 30, "a trip for the loop")
    await topics.wait_committed(topics=[topics.events])
    outputs = await topics.outputs()
    assert {o.session for o in outputs} == {"conv-loop"}
    assert trips[0].signal == "repeated-tool-call" and trips[0].session_halted

    dlq = await topics.read_until(bridge.config.dlq_topic, lambda r: len(r) >= 1, what="a dead letter")
    headers = dict(dlq[0].headers)
    assert headers["dlq.reason"] == b"malformed_otlp"
    assert processor.processor.fatal is None and bridge.fatal is None


async def test_sdk_otlp_http_exporter_into_the_receiver(
    topics: Topics, start_processor: Any, start_bridge: Any
) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    await start_processor()
    bridge = await start_bridge(otlp_http_host="127.0.0.1", otlp_http_port=0)
    endpoint = f"http://127.0.0.1:{bridge.http_port}/v1/traces"

    def agent_runs() -> None:
        exporter = OTLPSpanExporter(endpoint=endpoint, timeout=10)
        # batches of 5 spans: a session's spans spread over several requests
        processor = BatchSpanProcessor(exporter, max_export_batch_size=5, schedule_delay_millis=50)
        tp = provider(exporter, processor=processor)
        run_agent(tp, "http-loop", LOOP)
        run_agent(tp, "http-sweep", SWEEP)
        run_agent(tp, "http-off", LOOP, capture=False)  # content off: no arguments at all
        tp.shutdown()

    # the SDK exporter blocks: run the agent in a thread, the receiver on this loop
    await asyncio.to_thread(agent_runs)
    await wait_events(
        topics, {"http-loop": EVENTS_PER_RUN, "http-sweep": EVENTS_PER_RUN, "http-off": EVENTS_PER_RUN}
    )

    async def tripped() -> bool:
        return any(isinstance(o, GuardrailTrip) for o in await topics.outputs())

    await poll_until(tripped, 30, "a trip for the loop")
    await topics.wait_committed(topics=[topics.events])
    outputs = await topics.outputs()
    assert {o.session for o in outputs} == {"http-loop"}
    text = msgspec.json.encode([o.signal for o in outputs if isinstance(o, GuardrailTrip)])
    assert b"repeated-tool-call" in text


async def test_a_restart_publishes_nothing_twice(topics: Topics, start_bridge: Any) -> None:
    bridge = await start_bridge()
    spans_topic = bridge.config.spans_topic
    payload = spans_proto(sdk_spans("conv-r", SWEEP))
    await topics.send(spans_topic, payload, key=b"exporter-1")
    await wait_events(topics, {"conv-r": EVENTS_PER_RUN})
    bridge.request_stop()
    await poll_until(lambda: bridge._consumer is None, 30, "bridge stopped")
    # after the restart: the same batch again (a Collector retry), then a new run
    again = await start_bridge()
    await topics.send(again.config.spans_topic, payload, key=b"exporter-1")
    await topics.send(again.config.spans_topic, spans_proto(sdk_spans("conv-r", SWEEP[:1])), key=b"exporter-1")
    found = await wait_events(topics, {"conv-r": EVENTS_PER_RUN + 6})
    events = found["conv-r"]
    assert len(events) == EVENTS_PER_RUN + 6  # the retried batch was known across the restart
    assert [e.seq for e in events] == list(range(1, len(events) + 1))  # seq went on
