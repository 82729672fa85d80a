"""`streamguard emit`, `tail` and `reset` against a real broker, as an operator runs them."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from streamguard.cli import main
from streamguard.events import GuardrailReset, Reset, agent_decoder, control_decoder, encode
from streamguard.kafka.broker import free_port
from tests.harness import interruptible
from tests.kafka.conftest import REPO_ROOT, poll_until
from tests.kafka.test_client import alert, send_output, trip

kafka = pytest.mark.kafka


def kafka_args(topics, *names: str) -> list[str]:
    args = ["--bootstrap-servers", topics.bootstrap]
    for name in names:
        args += [f"--{name}-topic", getattr(topics, name)]
    return args


async def run_main(argv: list[str]) -> int:
    """The CLI in a worker thread (it runs its own event loop)."""
    return await asyncio.to_thread(main, argv)


def clean_env(monkeypatch) -> None:
    for name in list(os.environ):
        if name.startswith("STREAMGUARD_"):
            monkeypatch.delenv(name)


# --------------------------------------------------------------------------- emit


GOOD = [
    {"type": "turn_start", "session": "s-a", "seq": 1},
    {"type": "tool_call", "session": "s-a", "seq": 2, "tool": "read_file", "args": {"path": "a"}},
    {"type": "tool_call", "session": "s-b", "tool": "grep", "args": "x", "x-runtime": "v1"},
]


@kafka
async def test_emit_publishes_valid_lines_and_reports_bad_ones(topics, tmp_path, capsys) -> None:
    trace = tmp_path / "trace.jsonl"
    lines = [
        json.dumps(GOOD[0]),
        '{"type": "tool_call", "session": "s-a"}',  # line 2: no tool
        json.dumps(GOOD[1]),
        "",  # blank lines are skipped silently
        '{"type": "reset", "session": "s-a"}',  # line 5: control event
        "{not json",  # line 6
        json.dumps(GOOD[2]),
    ]
    trace.write_text("\n".join(lines) + "\n")
    code = await run_main(["emit", str(trace), *kafka_args(topics, "events")])
    err = capsys.readouterr().err
    assert code == 3, err
    assert "line 2: Object missing required field `tool`" in err
    assert "line 5: 'reset' is a control event" in err and "streamguard reset" in err
    assert "line 6: JSON is malformed" in err
    assert "published 3 events" in err and "3 bad line(s)" in err
    assert "Traceback" not in err

    records = await topics.read_until(topics.events, lambda rs: len(rs) >= 3)
    assert len(records) == 3
    for record in records:
        assert record.key == agent_decoder.decode(record.value).session.encode()
    by_session = {}
    for record in sorted(records, key=lambda r: r.offset):
        by_session.setdefault(record.key, []).append(json.loads(record.value))
    assert by_session[b"s-a"] == GOOD[:2]  # in file order, bytes as written
    assert by_session[b"s-b"] == [GOOD[2]]  # extra fields kept


@kafka
async def test_emit_reads_stdin_and_paces_with_rate(topics, monkeypatch, capsys) -> None:
    data = "".join(json.dumps({"type": "text", "session": "s-r", "text": f"t{i}"}) + "\n" for i in range(6))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data.encode())))
    started = time.monotonic()
    code = await run_main(["emit", "-", "--rate", "50", *kafka_args(topics, "events")])
    elapsed = time.monotonic() - started
    assert code == 0, capsys.readouterr().err
    assert elapsed >= 5 / 50  # six events at 50/s: at least five gaps of 20 ms
    records = await topics.read_until(topics.events, lambda rs: len(rs) >= 6)
    texts = [json.loads(r.value)["text"] for r in sorted(records, key=lambda r: r.offset)]
    assert texts == [f"t{i}" for i in range(6)]


def test_emit_check_validates_without_a_broker(tmp_path, capsys) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps(GOOD[0]) + "\n" + '{"type": "usage", "session": "s", "cost_usd": -1}\n')
    assert main(["emit", str(trace), "--check", "--bootstrap-servers", "127.0.0.1:1"]) == 3
    err = capsys.readouterr().err
    assert "line 2:" in err and "1 valid event(s), 1 bad line(s)" in err
    trace.write_text(json.dumps(GOOD[0]) + "\n")
    assert main(["emit", str(trace), "--check"]) == 0


def test_emit_missing_file_is_a_runtime_failure(tmp_path, capsys) -> None:
    assert main(["emit", str(tmp_path / "nope.jsonl")]) == 1
    assert "cannot read" in capsys.readouterr().err


# --------------------------------------------------------------------------- tail


async def seed_outputs(topics) -> dict[str, Any]:
    outputs = {
        "loop": alert("a-loop", "repeated-tool-call", session="s-1"),
        "trip1": trip("t-1", session="s-1"),
        "trip2": trip("t-2", session="s-2", guardrail="cost_ceiling", signal="cost-ceiling",
                      scope="turn", session_halted=False),
        "ignored": alert("a-ignored", "halt-ignored", session="s-2"),
    }
    for output in outputs.values():
        await send_output(topics, output)
    return outputs


@kafka
async def test_tail_json_filters_by_type_signal_and_session(topics, capsys) -> None:
    outputs = await seed_outputs(topics)
    base = ["tail", "--json", "--from-beginning", *kafka_args(topics, "alerts")]

    assert await run_main([*base, "--type", "guardrail_trip", "-n", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert sorted(json.loads(line)["id"] for line in lines) == ["t-1", "t-2"]
    assert {line.encode() for line in lines} == {encode(outputs["trip1"]), encode(outputs["trip2"])}

    assert await run_main([*base, "--signal", "halt-ignored", "-n", "1"]) == 0
    assert [json.loads(line)["id"] for line in capsys.readouterr().out.splitlines()] == ["a-ignored"]

    assert await run_main([*base, "--session", "s-1", "--type", "alert", "-n", "1"]) == 0
    assert [json.loads(line)["id"] for line in capsys.readouterr().out.splitlines()] == ["a-loop"]


@kafka
async def test_tail_pretty_prints_one_line_per_event(topics, capsys) -> None:
    await seed_outputs(topics)
    code = await run_main(["tail", "--from-beginning", "-n", "4", *kafka_args(topics, "alerts")])
    assert code == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4
    by_kind = {line.split()[1]: line for line in lines if "ignored" not in line}
    assert "s-1 (coder) repeated-tool-call critical/session seq=1: r" in by_kind["ALERT"]
    trips = [line for line in lines if " TRIP " in line]
    assert any("s-1 (coder) watchdog/repeated-tool-call -> halt session" in t for t in trips)
    assert any("s-2 (coder) cost_ceiling/cost-ceiling -> cut turn" in t for t in trips)
    assert all(line.startswith("1970-01-01T00:00:01.000Z ") for line in lines)


@kafka
async def test_tail_follows_and_exits_zero_on_ctrl_c(topics) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMGUARD_")}
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["STREAMGUARD_BOOTSTRAP_SERVERS"] = topics.bootstrap  # the environment works too
    env["STREAMGUARD_ALERTS_TOPIC"] = topics.alerts
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "streamguard.cli", "tail", "--type", "guardrail_trip",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
        preexec_fn=interruptible,
    )
    try:
        assert proc.stdout is not None
        line = b""
        deadline = time.monotonic() + 20
        n = 0
        # tail starts at the end: keep publishing until it shows one
        while not line and time.monotonic() < deadline:
            n += 1
            await send_output(topics, trip(f"live-{n}", session="s-live"))
            try:
                line = await asyncio.wait_for(proc.stdout.readline(), 0.5)
            except TimeoutError:
                continue
        assert b"TRIP" in line and b"s-live" in line, line
        proc.send_signal(signal.SIGINT)
        code = await asyncio.wait_for(proc.wait(), 15)
        err = (await proc.stderr.read()).decode()
        assert code == 0, err
        assert "Traceback" not in err
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


# --------------------------------------------------------------------------- reset


async def read_controls(topics, count: int) -> list[Any]:
    return await topics.read_until(topics.control, lambda rs: len(rs) >= count)


@kafka
async def test_reset_writes_a_keyed_reset_to_the_control_topic(topics, capsys) -> None:
    code = await run_main(
        ["reset", "s-9", "--guardrail", "cost_ceiling", "--add-budget", "2.5", "--by", "alice", "--force",
         *kafka_args(topics, "control")]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "reset of cost_ceiling for session 's-9' sent to" in out
    [record] = await read_controls(topics, 1)
    assert record.key == b"s-9"
    event = control_decoder.decode(record.value)
    assert isinstance(event, Reset)
    assert (event.session, event.guardrail, event.additional_budget_usd, event.by) == (
        "s-9", "cost_ceiling", 2.5, "alice"
    )
    assert event.ts is not None and abs(event.ts - time.time()) < 60


class FakeProcessor:
    """Answers resets on the control topic the way the processor does (enough for --wait)."""

    def __init__(self, topics, *, accept: bool) -> None:
        self.topics = topics
        self.accept = accept
        self.task = asyncio.create_task(self.run())

    async def run(self) -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.topics.bootstrap, enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            consumer.assign([TopicPartition(self.topics.control, p) for p in range(self.topics.partitions)])
            while True:
                batch = await consumer.getmany(timeout_ms=100)
                for records in batch.values():
                    for record in records:
                        reset = control_decoder.decode(record.value)
                        # first an acknowledgement of someone else's reset: must be ignored
                        await send_output(self.topics, self.ack(reset, "other-1", by="bob", accepted=not self.accept))
                        await send_output(self.topics, self.ack(reset, "mine-1", by=reset.by, accepted=self.accept))
        finally:
            await consumer.stop()

    def ack(self, reset: Reset, id_: str, *, by: str | None, accepted: bool) -> GuardrailReset:
        return GuardrailReset(
            id=id_, session=reset.session, agent=None, ts=reset.ts if by == reset.by else 5.0,
            seq=None, guardrail=reset.guardrail, accepted=accepted, by=by,
            reason=f"reset of {reset.guardrail} " + ("accepted" if accepted else "refused: nothing to raise"),
        )

    async def stop(self) -> None:
        self.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self.task


@kafka
@pytest.mark.parametrize(("accept", "exit_code", "word"), [(True, 0, "accepted"), (False, 3, "refused")])
async def test_reset_wait_reports_the_acknowledgement(topics, capsys, accept, exit_code, word) -> None:
    await send_output(topics, trip("t-old", session="s-w"))  # history before the reset
    fake = FakeProcessor(topics, accept=accept)
    try:
        code = await run_main(
            ["reset", "s-w", "--guardrail", "watchdog", "--by", "carol", "--wait", "--timeout", "15",
             "--force", *kafka_args(topics, "control", "alerts")]
        )
    finally:
        await fake.stop()
    captured = capsys.readouterr()
    assert code == exit_code, captured.err
    [line] = captured.out.splitlines()
    assert f"RESET    s-w watchdog {word} by carol" in line
    assert "waiting for the acknowledgement" in captured.err


@kafka
async def test_reset_wait_times_out_without_a_processor(topics, capsys) -> None:
    started = time.monotonic()
    code = await run_main(
        ["reset", "s-t", "--guardrail", "all", "--wait", "--timeout", "0.5", "--json", "--force",
         *kafka_args(topics, "control", "alerts")]
    )
    err = capsys.readouterr().err
    assert code == 4
    assert time.monotonic() - started < 10
    assert "no acknowledgement" in err and "streamguard run" in err
    assert len(await read_controls(topics, 1)) == 1  # it was sent all the same


# --------------------------------------------------------------------------- failures


@pytest.mark.parametrize(
    "argv",
    [
        ["tail"],
        ["reset", "s-1", "--guardrail", "watchdog"],
        ["reset", "s-1", "--guardrail", "watchdog", "--wait"],
    ],
)
def test_an_unreachable_cluster_is_one_sentence_and_exit_1(argv, capsys, monkeypatch) -> None:
    clean_env(monkeypatch)
    monkeypatch.setenv("STREAMGUARD_BOOTSTRAP_SERVERS", f"127.0.0.1:{free_port()}")
    started = time.monotonic()
    assert main(argv) == 1
    assert time.monotonic() - started < 10
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "cannot reach the Kafka cluster at 127.0.0.1:" in err and "Traceback" not in err


def test_emit_to_an_unreachable_cluster(tmp_path, capsys) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps(GOOD[0]) + "\n")
    assert main(["emit", str(trace), "--bootstrap-servers", f"127.0.0.1:{free_port()}"]) == 1
    assert "cannot reach the Kafka cluster" in capsys.readouterr().err


@kafka
async def test_a_missing_topic_is_named(topics, capsys) -> None:
    code = await run_main(["tail", "--bootstrap-servers", topics.bootstrap, "--alerts-topic", "no.such.topic"])
    err = capsys.readouterr().err
    assert code == 1
    assert "topic 'no.such.topic' does not exist" in err and "--alerts-topic" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["tail", "--bootstrap-servers", "nohost"], "--bootstrap-servers / STREAMGUARD_BOOTSTRAP_SERVERS"),
        (["tail", "--alerts-topic", "bad topic!"], "--alerts-topic"),
        (["tail", "-n", "0"], "--max-events"),
        (["reset", "s", "--guardrail", "watchdog", "--add-budget", "5"], "--add-budget"),
        (["reset", "s", "--guardrail", "cost_ceiling", "--add-budget", "-1"], "positive"),
        # infinity would be sent as a bare reset (JSON has no infinity); NaN would wait forever
        (["reset", "s", "--guardrail", "cost_ceiling", "--add-budget", "inf"], "at most"),
        (["reset", "s", "--guardrail", "cost_ceiling", "--add-budget", "nan"], "positive"),
        (["reset", "s", "--guardrail", "watchdog", "--timeout", "nan", "--wait"], "--timeout"),
        (["reset", "x" * 300, "--guardrail", "all"], "invalid reset"),
        (["emit", "-", "--rate", "0"], "--rate"),
    ],
)
def test_usage_errors_exit_2(argv, message, capsys, monkeypatch) -> None:
    clean_env(monkeypatch)
    assert main(argv) == 2
    assert message in capsys.readouterr().err


# --------------------------------------------------------------------------- with the processor


@kafka
async def test_emit_tail_reset_round_trip_through_the_processor(topics, start_processor, capsys) -> None:
    running = await start_processor()
    trace = Path(REPO_ROOT) / "examples" / "traces" / "read_file_loop.jsonl"
    assert await run_main(["emit", str(trace), *kafka_args(topics, "events")]) == 0
    capsys.readouterr()

    assert await run_main(
        ["tail", "--from-beginning", "--type", "guardrail_trip", "-n", "1", *kafka_args(topics, "alerts")]
    ) == 0
    line = capsys.readouterr().out
    assert "TRIP     s-read-loop (triage-bot) watchdog/repeated-tool-call -> halt session" in line
    await poll_until(lambda: running.processor.engine.is_halted("s-read-loop"), 10, "the halt")

    code = await run_main(
        ["reset", "s-read-loop", "--guardrail", "watchdog", "--wait", "--timeout", "20", "--json",
         *kafka_args(topics, "control", "alerts", "changelog")]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    ack = msgspec.json.decode(captured.out)
    assert ack["type"] == "guardrail_reset" and ack["accepted"] is True
    assert not running.processor.engine.is_halted("s-read-loop")
    await running.stop()
