"""The processor's own view of its sessions over HTTP: /sessions and /sessions/ID."""

from __future__ import annotations

import json

import pytest

from tests.kafka.conftest import http_get, poll_until
from tests.kafka.scenarios import calm, repeat_loop

pytestmark = pytest.mark.kafka


async def test_sessions_endpoint_lists_what_this_instance_holds(topics, start_processor) -> None:
    running = await start_processor()
    proc = running.processor
    await topics.send_events(repeat_loop("s-loop", agent="coder"))
    await topics.send_events(calm("s-calm", agent="ops"))
    await poll_until(
        lambda: proc.engine.is_halted("s-loop") and "s-calm" in proc.engine.sessions,
        20,
        "both sessions",
    )
    port = proc.metrics_port

    status, body = await http_get(port, "/sessions")
    assert status == 200
    listing = json.loads(body)
    assert {row["session"] for row in listing["sessions"]} == {"s-loop", "s-calm"}
    assert listing["held"] == 2 and listing["matched"] == 2 and not listing["truncated"]
    assert listing["partitions"] == sorted(proc.sessions.partitions)

    status, body = await http_get(port, "/sessions?halted=1")
    rows = json.loads(body)["sessions"]
    assert [(r["session"], r["halted_by"], r["halt_signal"]) for r in rows] == [
        ("s-loop", ["watchdog"], "repeated-tool-call")
    ]
    status, body = await http_get(port, "/sessions?agent=op*")
    assert [r["session"] for r in json.loads(body)["sessions"]] == ["s-calm"]
    status, body = await http_get(port, "/sessions?limit=1")
    listing = json.loads(body)
    assert len(listing["sessions"]) == 1 and listing["truncated"] and listing["matched"] == 2

    status, body = await http_get(port, "/sessions/s-loop")
    assert status == 200
    one = json.loads(body)
    assert one["session"] == "s-loop" and one["halted_by"] == ["watchdog"]
    assert one["partition"] == proc.sessions.meta["s-loop"].partition
    assert one["events_offset"] == proc.sessions.meta["s-loop"].events_offset

    status, body = await http_get(port, "/sessions/nobody")
    assert status == 404 and "not held here" in json.loads(body)["error"]
    status, _ = await http_get(port, "/sessions?limit=many")
    assert status == 400
    await running.stop()
