"""The processor end to end against a real broker: loops in, alerts out."""

from __future__ import annotations

import msgspec
import pytest

from streamguard.events import Alert, GuardrailTrip
from tests.kafka.conftest import http_get, metric_value
from tests.kafka.scenarios import (
    by_id,
    calm,
    cycle_loop,
    expected_outputs,
    failure_streak,
    repeat_loop,
)

pytestmark = pytest.mark.kafka


async def test_seed_loops_produce_the_expected_alerts(topics, start_processor) -> None:
    running = await start_processor()
    streams = {
        "s-repeat": repeat_loop("s-repeat"),
        "s-cycle": cycle_loop("s-cycle"),
        "s-fail": failure_streak("s-fail"),
        "s-calm": calm("s-calm"),
    }
    expected = {}
    for events in streams.values():
        expected.update(by_id(expected_outputs(events)))
    # interleave sessions the way a fleet would
    longest = max(len(e) for e in streams.values())
    for i in range(longest):
        for events in streams.values():
            if i < len(events):
                await topics.send(topics.events, events[i])

    records = await topics.read_until(
        topics.alerts, lambda rs: len(rs) >= len(expected), what="all expected outputs"
    )
    outputs = await topics.outputs()
    assert by_id(outputs) == expected
    assert len(outputs) == len(expected)  # no duplicates without a crash
    signals = {
        (type(o).__name__, o.signal) for o in outputs if isinstance(o, Alert | GuardrailTrip)
    }
    assert ("Alert", "repeated-tool-call") in signals
    assert ("GuardrailTrip", "repeated-tool-call") in signals
    assert ("Alert", "alternating-tool-cycle") in signals
    # the failure streak raises a warning (which signal words it is the engine's business)
    assert any(
        isinstance(o, Alert) and o.severity == "warn" for o in outputs if o.session == "s-fail"
    )
    assert {o.session for o in outputs} == {"s-repeat", "s-cycle", "s-fail"}

    for record in records:
        headers = dict(record.headers)
        output = by_id(outputs)[msgspec.json.decode(record.value)["id"]]
        assert record.key == output.session.encode()
        assert headers["type"] == type(output).__struct_config__.tag.encode()
        if isinstance(output, Alert | GuardrailTrip):
            assert headers["signal"] == output.signal.encode()

    processor = running.processor
    assert processor.engine.is_halted("s-repeat")
    assert processor.engine.is_halted("s-cycle")
    assert not processor.engine.is_halted("s-fail")
    await topics.wait_committed()

    text = await running.metrics_text()
    assert (
        metric_value(
            text,
            "streamguard_alerts_total",
            agent="coder",
            severity="critical",
            signal="repeated-tool-call",
        )
        == 1.0
    )
    assert metric_value(text, "streamguard_sessions_halted") == 2.0
    assert metric_value(text, "streamguard_active_sessions") == 4.0
    assert (
        metric_value(text, "streamguard_events_consumed_total", type="tool_call", agent="coder")
        == 17.0
    )
    port = processor.metrics_port
    assert (await http_get(port, "/healthz"))[0] == 200
    assert (await http_get(port, "/readyz"))[0] == 200
    assert (await http_get(port, "/nope"))[0] == 404
    await running.stop()
