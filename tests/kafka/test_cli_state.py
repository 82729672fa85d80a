"""`streamguard sessions`, `session`, `reset`'s look-up and `emit --restamp`, on a real broker
with a real processor, as an operator meets them."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from streamguard.cli import main
from streamguard.events import GuardrailTrip
from tests.harness import interruptible
from tests.kafka.conftest import REPO_ROOT, metric_value, poll_until
from tests.kafka.test_cli_ops import kafka_args, run_main

kafka = pytest.mark.kafka

LOOP_TRACE = Path(REPO_ROOT) / "examples" / "traces" / "read_file_loop.jsonl"


def healthy(session: str, agent: str) -> list[dict[str, Any]]:
    return [
        {"type": "turn_start", "session": session, "agent": agent, "seq": 1},
        {"type": "tool_call", "session": session, "agent": agent, "seq": 2, "tool": "grep", "args": "x"},
        {"type": "text", "session": session, "agent": agent, "seq": 3, "text": "found it"},
    ]


async def sessions_json(topics, *extra: str, capsys) -> list[dict[str, Any]]:
    assert await run_main(["sessions", "--json", *extra, *kafka_args(topics, "changelog")]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


async def wait_listed(topics, capsys, predicate, what: str) -> list[dict[str, Any]]:
    """Re-run `sessions --json` until the changelog shows what the test waits for."""
    deadline = time.monotonic() + 20
    views: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        views = await sessions_json(topics, capsys=capsys)
        if predicate(views):
            return views
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}; sessions: {views}")


def halted(views: list[dict[str, Any]], session: str) -> bool:
    return any(v["session"] == session and v["halted"] for v in views)


@kafka
async def test_sessions_and_session_show_the_fleet_from_the_changelog(topics, start_processor, capsys) -> None:
    await start_processor()
    assert await run_main(["emit", str(LOOP_TRACE), *kafka_args(topics, "events")]) == 0
    await topics.send_events(healthy("s-ok", "billing-bot"))
    capsys.readouterr()
    views = await wait_listed(
        topics, capsys,
        lambda vs: halted(vs, "s-read-loop") and any(v["session"] == "s-ok" for v in vs),
        "the halted loop and the healthy session",
    )
    loop = next(v for v in views if v["session"] == "s-read-loop")
    assert loop["agent"] == "triage-bot" and loop["halted_by"] == ["watchdog"]
    assert loop["halt_signal"] == "repeated-tool-call" and loop["halt_reason"]
    assert loop["last_seq"] == 13 and loop["records_applied"] == 13
    assert loop["halted_at"] is not None  # since when, from the snapshot itself
    assert next(v for v in views if v["session"] == "s-ok")["halted_at"] is None

    assert [v["session"] for v in await sessions_json(topics, "--halted", capsys=capsys)] == ["s-read-loop"]
    assert [v["session"] for v in await sessions_json(topics, "--agent", "billing-*", capsys=capsys)] == ["s-ok"]

    assert await run_main(["sessions", *kafka_args(topics, "changelog")]) == 0
    captured = capsys.readouterr()
    [line] = [x for x in captured.out.splitlines() if "s-read-loop" in x]
    assert "s-read-loop (triage-bot)" in line and "HALTED by watchdog (repeated-tool-call) since " in line
    assert "2 session(s), 1 halted" in captured.err

    code = await run_main(["session", "s-read-loop", *kafka_args(topics, "changelog", "alerts")])
    out = capsys.readouterr().out
    assert code == 0
    assert "HALTED by watchdog since " in out and "(repeated-tool-call)" in out
    assert "streamguard reset s-read-loop --guardrail watchdog" in out
    assert "TRIP     s-read-loop (triage-bot) watchdog/repeated-tool-call -> halt session" in out

    code = await run_main(["session", "s-read-loop", "--json", *kafka_args(topics, "changelog", "alerts")])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["halted_since"] is not None
    types = [o["type"] for o in doc["recent_outputs"]]
    assert types[:2] == ["alert", "guardrail_trip"]  # oldest first, as they were published

    assert await run_main(["session", "s-nobody", *kafka_args(topics, "changelog", "alerts")]) == 6
    assert "no session 's-nobody'" in capsys.readouterr().err


@kafka
async def test_reset_of_an_unknown_session_sends_nothing_and_exits_6(topics, capsys) -> None:
    code = await run_main(
        ["reset", "s-ghost", "--guardrail", "watchdog", *kafka_args(topics, "control", "changelog")]
    )
    err = capsys.readouterr().err
    assert code == 6
    assert "no session 's-ghost'" in err and "nothing was sent" in err and "--force" in err
    assert await topics.read_all(topics.control) == []


COST_POLICY = "[cost_ceiling]\nmax_session_usd = 0.05\n"


def cost_and_loop(session: str) -> list[dict[str, Any]]:
    """A session over its cost ceiling (halted by cost_ceiling) that then loops (halted by
    the watchdog too)."""
    events: list[dict[str, Any]] = [{"type": "turn_start", "session": session, "seq": 1}]
    events.append({"type": "usage", "session": session, "seq": 2, "cost_usd": 0.10})
    for i, path in enumerate(["a.go", "./a.go", "a.go", "./a.go", "a.go"], start=3):
        events.append({"type": "tool_call", "session": session, "seq": i, "tool": "read_file", "args": {"path": path}})
    return events


@kafka
@pytest.mark.parametrize("wait", [False, True], ids=["from-the-snapshot", "from-the-acknowledgement"])
async def test_reset_that_leaves_a_halt_in_place_exits_5(topics, start_processor, tmp_path, capsys, wait) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text(COST_POLICY)
    await start_processor(policy=str(policy))
    await topics.send_events(cost_and_loop("s-both"))
    await wait_listed(
        topics, capsys,
        lambda vs: any(v["session"] == "s-both" and len(v["halted_by"]) == 2 for v in vs),
        "both halts on the changelog",
    )
    argv = ["reset", "s-both", "--guardrail", "watchdog", *kafka_args(topics, "control", "alerts", "changelog")]
    if wait:
        argv += ["--wait", "--timeout", "20"]
    code = await run_main(argv)
    captured = capsys.readouterr()
    assert code == 5, captured.err
    assert "stays halted by cost_ceiling" in captured.err
    if wait:
        assert "RESET    s-both watchdog accepted" in captured.out


@kafka
async def test_emit_restamp_replays_a_trace_the_processor_already_applied(topics, start_processor, capsys) -> None:
    running = await start_processor()
    assert await run_main(["emit", str(LOOP_TRACE), *kafka_args(topics, "events")]) == 0
    await poll_until(lambda: running.processor.engine.is_halted("s-read-loop"), 15, "the halt")
    code = await run_main(
        ["reset", "s-read-loop", "--guardrail", "watchdog", "--wait", "--timeout", "20",
         *kafka_args(topics, "control", "alerts", "changelog")]
    )
    assert code == 0, capsys.readouterr().err

    async def trips() -> int:
        return sum(isinstance(o, GuardrailTrip) for o in await topics.outputs())

    async def skipped() -> float:
        return metric_value(await running.metrics_text(), "streamguard_events_skipped_total", reason="seq_not_newer") or 0

    # The same trace again: every event is skipped as not newer, and counted.
    assert await run_main(["emit", str(LOOP_TRACE), *kafka_args(topics, "events")]) == 0
    await poll_until(lambda: skipped_at_least(skipped, 13), 15, "13 events skipped as seq_not_newer")
    assert await trips() == 1
    assert not running.processor.engine.is_halted("s-read-loop")

    # Restamped: applied again, the loop is caught again.
    assert await run_main(["emit", "--restamp", str(LOOP_TRACE), *kafka_args(topics, "events")]) == 0
    await poll_until(lambda: running.processor.engine.is_halted("s-read-loop"), 15, "the second halt")
    assert await trips() == 2
    restamped = [o for o in await topics.outputs() if isinstance(o, GuardrailTrip)][-1]
    assert restamped.seq is None and restamped.ts is not None and restamped.ts > time.time() - 120


async def skipped_at_least(skipped, n: float) -> bool:
    return await skipped() >= n


@kafka
async def test_emit_ctrl_c_reports_what_was_published(topics) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMGUARD_")}
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "streamguard.cli", "emit", "-", *kafka_args(topics, "events"),
        stdin=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
        preexec_fn=interruptible,
    )
    try:
        assert proc.stdin is not None and proc.stderr is not None
        for i in range(3):
            proc.stdin.write((json.dumps({"type": "text", "session": "s-c", "text": f"t{i}"}) + "\n").encode())
        await proc.stdin.drain()
        await topics.read_until(topics.events, lambda rs: len(rs) >= 3)  # stdin stays open: emit waits
        proc.send_signal(signal.SIGINT)
        code = await asyncio.wait_for(proc.wait(), 15)
        err = (await proc.stderr.read()).decode()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert code == 130, err
    assert "interrupted: published 3 events to" in err and "Traceback" not in err


def test_sessions_against_an_unreachable_cluster_is_one_sentence(capsys, monkeypatch) -> None:
    from streamguard.kafka.broker import free_port

    for name in list(os.environ):
        if name.startswith("STREAMGUARD_"):
            monkeypatch.delenv(name)
    assert main(["sessions", "--bootstrap-servers", f"127.0.0.1:{free_port()}"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot reach the Kafka cluster" in err
