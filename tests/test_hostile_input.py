"""Hostile input without a broker: the contract's bounds, the engine's seq mark,
replay's resilience and bounds, and the processor's per-record isolation."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import msgspec
import pytest
from aiokafka import TopicPartition
from aiokafka.structs import ConsumerRecord

from streamguard.engine import MAX_SEQ_JUMP, Engine
from streamguard.events import (
    MAX_COUNT,
    MAX_NAME_CHARS,
    MAX_NESTING,
    MAX_SEQ,
    Alert,
    NestingTooDeep,
    Text,
    ToolCall,
    ToolResult,
    Usage,
    decode_agent_event,
    decode_agent_record,
    decode_operator_event,
    encode,
    output_decoder,
)
from streamguard.kafka.config import ProcessorConfig
from streamguard.kafka.processor import Processor
from streamguard.kafka.sessions import PartitionStatus
from streamguard.policy import Policy
from streamguard.replay import ReplayLimits, ReplayReport, halted_sessions, replay_lines


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def call_with_args(args_json: str, session: str = "s") -> str:
    return '{"type":"tool_call","session":"' + session + '","tool":"t","args":' + args_json + "}"


# ------------------------------------------------------------------ nesting


@pytest.mark.parametrize("decode", [decode_agent_event, decode_agent_record, decode_operator_event])
@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 1000, 100_000])
def test_args_nested_past_the_bound_are_refused(decode, depth) -> None:
    with pytest.raises(NestingTooDeep):
        decode(call_with_args(nested(depth)))


@pytest.mark.parametrize("decode", [decode_agent_event, decode_agent_record, decode_operator_event])
def test_nesting_at_the_bound_is_accepted(decode) -> None:
    event = decode(call_with_args(nested(MAX_NESTING)))
    assert isinstance(event, ToolCall)


def test_json_text_inside_a_string_argument_counts_with_its_depth() -> None:
    # the dict holding it is one level: its JSON text may nest one level less
    ok = call_with_args(json.dumps({"q": nested(MAX_NESTING - 1)}))
    assert isinstance(decode_agent_event(ok), ToolCall)
    with pytest.raises(NestingTooDeep):
        decode_agent_event(call_with_args(json.dumps({"q": nested(MAX_NESTING)})))
    # JSON text of a JSON string is an opaque string: nothing reads inside it
    assert decode_agent_event(call_with_args(json.dumps(json.dumps(nested(5000)))))
    # brackets in plain text are not nesting
    text = call_with_args(json.dumps({"q": "[" * 500 + " not json"}))
    assert isinstance(decode_agent_event(text), ToolCall)


def test_deep_results_and_deep_control_fields_are_refused() -> None:
    result = '{"type":"tool_result","session":"s","tool":"t","result":' + nested(200) + "}"
    with pytest.raises(NestingTooDeep):
        decode_agent_event(result)
    reset = '{"type":"reset","session":"s","by":' + nested(5000) + "}"
    with pytest.raises(NestingTooDeep):
        decode_operator_event(reset)
    with pytest.raises(NestingTooDeep):  # the classification of a refused type, too
        decode_agent_event(reset)


# ------------------------------------------------------------------- bounds


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("seq", MAX_SEQ + 1),
        ("seq", 2**64),
        ("ts", 1e12),
        ("turn", 2**63),
    ],
)
def test_integers_beyond_the_snapshot_are_refused(field, value) -> None:
    raw = {"type": "tool_call", "session": "s", "tool": "t", field: value}
    with pytest.raises(msgspec.ValidationError):
        decode_agent_event(json.dumps(raw))


@pytest.mark.parametrize(
    "field", ["input_tokens", "output_tokens", "context_window"]
)
def test_usage_counts_are_bounded(field) -> None:
    assert decode_agent_event(json.dumps({"type": "usage", "session": "s", field: MAX_COUNT}))
    with pytest.raises(msgspec.ValidationError):
        decode_agent_event(json.dumps({"type": "usage", "session": "s", field: MAX_COUNT + 1}))


@pytest.mark.parametrize("field", ["tool", "call_id", "agent"])
def test_names_are_bounded(field) -> None:
    raw = {"type": "tool_call", "session": "s", "tool": "t"}
    raw[field] = "x" * MAX_NAME_CHARS
    assert decode_agent_event(json.dumps(raw))
    raw[field] = "x" * (MAX_NAME_CHARS + 1)
    with pytest.raises(msgspec.ValidationError):
        decode_agent_event(json.dumps(raw))


# --------------------------------------------------------------------- seq


def test_a_forged_seq_does_not_blind_the_session() -> None:
    engine = Engine(Policy(mode="enforce"))
    call = {"session": "s", "agent": "a", "tool": "read_file", "args": {"path": "x"}}
    engine.process(ToolCall(**call, seq=1))
    engine.process(Usage(session="s", seq=MAX_SEQ))  # forged: applied, the mark stays
    assert engine.sessions["s"].last_seq == 1
    assert engine.stats.seq_jumps == 1
    outputs = []
    for seq in range(2, 6):
        outputs += engine.process(ToolCall(**call, seq=seq))
    assert engine.sessions["s"].halted_by  # the loop is still seen
    assert any(isinstance(o, Alert) and o.signal == "repeated-tool-call" for o in outputs)
    # and replays are still dropped
    assert engine.process(ToolCall(**call, seq=3)) == []
    assert engine.stats.replays_skipped == 1


def test_a_first_seq_out_of_reach_does_not_set_the_mark() -> None:
    engine = Engine()
    engine.process(Usage(session="s", seq=MAX_SEQ_JUMP + 1))
    assert engine.sessions["s"].last_seq == -1
    engine.process(Usage(session="s", seq=1))
    assert engine.sessions["s"].last_seq == 1
    engine.process(Usage(session="s", seq=1 + MAX_SEQ_JUMP))  # the largest step allowed
    assert engine.sessions["s"].last_seq == 1 + MAX_SEQ_JUMP


# ------------------------------------------------------------------ replay


def _loop_lines(session: str, n: int = 5, t0: float = 1000.0) -> list[str]:
    return [
        encode(
            ToolCall(session=session, tool="read_file", args={"path": "a"}, ts=t0 + i)
        ).decode()
        for i in range(n)
    ]


def test_replay_survives_poison_lines_and_keeps_later_outputs() -> None:
    lines = [
        *_loop_lines("before"),
        call_with_args(nested(100_000), session="poison"),
        '{"type":"reset","session":"x","by":' + nested(5000) + "}",
        '{"type":"tool_call","session":"s","tool":"t","seq":18446744073709551616}',
        *_loop_lines("after"),
    ]
    errors = io.StringIO()
    report = ReplayReport()
    outputs = [json.loads(o) for o in replay_lines(lines, Engine(), errors=errors, report=report)]
    assert {o["session"] for o in outputs} == {"before", "after"}
    assert report.malformed == 3
    assert "line 6" in errors.getvalue() and "line 8" in errors.getvalue()


def test_replay_survives_an_engine_failure(monkeypatch) -> None:
    engine = Engine()
    real = engine.process

    def flaky(event: Any, ts: float | None = None) -> Any:
        if event.session == "boom":
            raise RuntimeError("engine bug")
        return real(event, ts)

    monkeypatch.setattr(engine, "process", flaky)
    lines = [*_loop_lines("boom", 1), *_loop_lines("fine")]
    errors = io.StringIO()
    report = ReplayReport()
    outputs = list(replay_lines(lines, engine, errors=errors, report=report))
    assert outputs and report.failed == 1
    assert "line 1: processing failed" in errors.getvalue()


def test_replay_holds_a_bounded_number_of_sessions() -> None:
    engine = Engine()
    lines = [
        encode(ToolCall(session=f"s-{i}", tool="ls", ts=float(i))).decode() for i in range(500)
    ]
    report = ReplayReport()
    list(replay_lines(lines, engine, report=report, limits=ReplayLimits(max_sessions=50)))
    assert len(engine.sessions) == 50
    assert report.evicted == 450


def test_replay_evicts_idle_sessions_on_trace_time_and_keeps_halts_longer() -> None:
    def trace(later_until: float) -> list[str]:
        lines = [
            *_loop_lines("halted", t0=0.0),
            encode(ToolCall(session="idle", tool="ls", ts=1.0)).decode(),
        ]
        lines += [
            encode(ToolCall(session="clock", tool="ls", args={"i": i}, ts=10.0 + i)).decode()
            for i in range(2048)
        ]
        lines += [
            encode(ToolCall(session="clock", tool="ls", args={"i": i}, ts=later_until)).decode()
            for i in range(1024)
        ]
        return lines

    limits = ReplayLimits(session_idle_ttl_s=100, halted_session_ttl_s=10_000)
    engine, report = Engine(Policy(mode="enforce")), ReplayReport()
    list(replay_lines(trace(5_000.0), engine, report=report, limits=limits))
    assert "idle" not in engine.sessions
    assert engine.is_halted("halted")  # past the idle TTL, within the halted one
    assert halted_sessions(engine, report) == ["halted"]

    engine, report = Engine(Policy(mode="enforce")), ReplayReport()
    list(replay_lines(trace(50_000.0), engine, report=report, limits=limits))
    assert "halted" not in engine.sessions  # past the halted TTL too
    assert report.halted_evicted == 1
    assert halted_sessions(engine, report) == ["halted"]  # still in the summary


# --------------------------------------------------------------- processor


class _AckedProducer:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def send(self, topic: str, **kwargs: Any) -> asyncio.Future[Any]:
        self.sent.append({"topic": topic, **kwargs})
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future


def _processor(partitions: int = 1, **config: Any) -> tuple[Processor, _AckedProducer]:
    processor = Processor(ProcessorConfig.build(config), policy=Policy(mode="enforce"))
    processor.partition_count = partitions
    for n in range(partitions):
        processor.sessions.add_partition(n, PartitionStatus.ACTIVE)
    producer = _AckedProducer()
    processor._producer = producer  # type: ignore[assignment]
    return processor, producer


def _record(
    value: bytes | None,
    key: bytes | None,
    offset: int = 0,
    partition: int = 0,
    topic: str = "agent.events",
    headers: list[tuple[str, bytes]] | None = None,
) -> ConsumerRecord:
    return ConsumerRecord(
        topic,
        partition,
        offset,
        1_767_225_600_000,
        0,
        key,
        value,
        None,
        len(key or b""),
        len(value or b""),
        headers or [],
    )


def _run(processor: Processor, records: list[ConsumerRecord]) -> None:
    async def go() -> None:
        for record in records:
            processor._process(TopicPartition(record.topic, record.partition), [record])
        await processor._send_outbox()

    asyncio.run(go())


def _dead_letters(producer: _AckedProducer) -> list[dict[str, Any]]:
    return [s for s in producer.sent if s["topic"] == "streamguard.dlq"]


def test_an_exception_anywhere_on_a_record_s_path_is_dead_lettered(monkeypatch) -> None:
    processor, producer = _processor()

    def broken_emit(output: Any, ts: Any) -> None:
        raise RuntimeError("emit bug")

    monkeypatch.setattr(processor.outbox, "emit", broken_emit)
    loop = [
        _record(encode(ToolCall(session="s", tool="ls", args={})), b"s", offset=i)
        for i in range(5)
    ]
    _run(processor, loop)  # the fifth call trips, and emitting it raises
    letters = _dead_letters(producer)
    assert len(letters) == 1
    headers = dict(letters[0]["headers"])
    assert headers["dlq.reason"] == b"processing_error"
    assert b"emit bug" in headers["dlq.error"]
    assert processor.checkpointer.positions[TopicPartition("agent.events", 0)] == 5


def test_forged_owned_headers_are_stripped_from_dead_letters() -> None:
    processor, producer = _processor()
    forged = [("dlq.reason", b"fine"), ("streamguard.rerouted-from", b"0:0"), ("trace", b"t1")]
    _run(processor, [_record(b"{not json", b"s", headers=forged)])
    (letter,) = _dead_letters(producer)
    names = [name for name, _ in letter["headers"]]
    assert names.count("dlq.reason") == 1 and dict(letter["headers"])["dlq.reason"] == b"malformed"
    assert "streamguard.rerouted-from" not in names and "trace" in names
    assert processor.metrics.security_events.labels("forged_header")._value.get() == 2


def test_oversized_dead_letters_are_cut_and_say_so() -> None:
    processor, producer = _processor(max_output_bytes=64 * 1024)
    value = b"{" * 300_000
    key = b"k" * 5000
    _run(processor, [_record(value, key)])
    (letter,) = _dead_letters(producer)
    headers = dict(letter["headers"])
    assert len(letter["value"]) <= 32 * 1024
    assert headers["dlq.value-truncated-from"] == b"300000"
    assert headers["dlq.key-truncated-from"] == b"5000" and len(letter["key"]) == 1024


@pytest.mark.parametrize("limit", [4096, 8192, 20 * 1024, 64 * 1024])
def test_a_dead_letter_fits_the_output_limit_whatever_the_limit(limit: int) -> None:
    """A broker sized to --max-output-bytes refuses anything bigger for good, and a
    refused dead letter would stall the partition: key, copied headers, error and
    value each get a share of the limit."""
    processor, producer = _processor(max_output_bytes=limit)
    # header names of characters four bytes long each: counted in bytes, as sent
    headers = [(f"e{i}" + "\U0001F600" * 60, b"") for i in range(16)] + [
        (f"h{i}", b"x" * 1000) for i in range(16)
    ]
    _run(processor, [_record(b"{" + b"x" * 100_000, b"k" * 2000, headers=headers)])
    (letter,) = _dead_letters(producer)
    size = len(letter["key"] or b"") + len(letter["value"] or b"") + sum(
        len(name.encode()) + len(value or b"") + 10 for name, value in letter["headers"]
    )
    assert size + 128 <= limit
    assert letter["value"] and dict(letter["headers"])["dlq.value-truncated-from"] == b"100001"


def test_an_output_too_large_is_produced_as_a_stub() -> None:
    processor, _ = _processor(max_output_bytes=8192)
    alert = Alert(
        id="a1",
        session="s",
        agent="coder",
        ts=1.0,
        seq=None,
        signal="repeated-tool-call",
        severity="critical",
        scope="session",
        reason="r" * 100_000,
        guidance="g" * 100_000,
        detail={"args": "x" * 100_000},
    )
    processor.outbox.emit(alert, None)
    _, _, value, _, headers, _ = processor.outbox.queued[-1]
    assert len(value) <= 8192
    stub = output_decoder.decode(value)
    assert isinstance(stub, Alert) and stub.id == "a1" and stub.severity == "critical"
    assert stub.detail == {"truncated": True, "original_bytes": len(encode(alert))}
    assert ("streamguard.truncated", b"1") in headers


def test_a_session_that_cannot_be_snapshotted_is_dropped_alone(monkeypatch) -> None:
    processor, _ = _processor()
    for session in ("bad", "good"):
        _run(processor, [_record(encode(ToolCall(session=session, tool="ls")), session.encode(), offset=0 if session == "bad" else 1)])
    real = processor.engine.snapshot

    def snapshot(session: str) -> bytes | None:
        if session == "bad":
            raise OverflowError("integer out of range")
        return real(session)

    monkeypatch.setattr(processor.engine, "snapshot", snapshot)
    bad = processor.snapshot_record("bad", 0)
    good = processor.snapshot_record("good", 0)
    assert bad == (0, b"bad", None)  # a tombstone
    assert good[2] is not None
    assert "bad" not in processor.engine.sessions and "bad" not in processor.sessions.meta
    assert "good" in processor.engine.sessions
    assert processor.metrics.snapshot_failures._value.get() == 1


def test_a_session_s_state_is_created_only_on_its_home_partition() -> None:
    processor, producer = _processor(partitions=4)
    victim = "victim"
    home = processor._home(victim.encode())
    other = (home + 1) % 4
    claim = _record(encode(ToolCall(session=victim, tool="ls")), b"victim", partition=other)
    real = _record(encode(ToolCall(session=victim, tool="ls")), b"victim", partition=home)
    _run(processor, [claim, real])
    (letter,) = _dead_letters(producer)
    assert dict(letter["headers"])["dlq.reason"] == b"not_home_partition"
    assert processor.sessions.meta[victim].partition == home
    assert processor.engine.sessions[victim].applied == 1


@pytest.mark.parametrize("field", ["agent", "tenant"])
def test_the_agent_name_and_the_tenant_can_come_from_a_trusted_header(field: str) -> None:
    # Self-declared, an agent could name itself into a lenient policy override, and a
    # tenant (a scope of fleet rules) could open the circuit of any tenant it names.
    processor, _ = _processor(**{f"{field}_header": f"x-{field}"})
    event = ToolCall(session="s", tool="ls", **{field: "forged"})
    _run(processor, [_record(encode(event), b"s", headers=[(f"x-{field}", b"billing-bot")])])
    assert getattr(processor.engine.sessions["s"], field) == "billing-bot"
    event = ToolCall(session="t", tool="ls", **{field: "forged"})
    _run(processor, [_record(encode(event), b"t", offset=1)])  # no header: none
    assert getattr(processor.engine.sessions["t"], field) is None
    counted = processor.metrics.security_events.labels
    other = "tenant" if field == "agent" else "agent"
    assert counted(f"{field}_header_missing")._value.get() == 1
    assert counted(f"{other}_header_missing")._value.get() == 0


def test_a_timeout_says_what_did_not_happen() -> None:
    from streamguard.kafka.checkpoint import within

    async def never() -> None:
        await asyncio.Event().wait()

    async def go() -> None:
        with pytest.raises(TimeoutError, match=r"the brokers did not acknowledge 3 records within 0\.01 s"):
            await within(never(), 0.01, "the brokers did not acknowledge 3 records")

    asyncio.run(go())


@pytest.mark.parametrize("order", [(0, 1), (1, 0)], ids=["home-first", "home-last"])
def test_two_snapshots_of_one_session_install_the_home_one_alone(order: tuple[int, int]) -> None:
    """A session with snapshots on two changelog partitions (the partition count was
    changed, or a record was forged) is restored once, from its home partition, in
    whichever order the partitions are restored: listed on two partitions it would
    lose its halt, see its own events dead-lettered and crash the sweep."""
    from streamguard.kafka.changelog import encode_entry

    processor, producer = _processor(partitions=2)
    session = next(f"s{i}" for i in range(100) if processor._home(f"s{i}".encode()) == 0)
    live = Engine(Policy(mode="enforce"))
    for _ in range(6):
        live.process(ToolCall(session=session, tool="ls", args={}), 100.0)
    assert live.sessions[session].halted_by
    stale = Engine(Policy(mode="enforce"))
    stale.process(ToolCall(session=session, tool="ls", args={}), 1.0)
    changelog = {
        0: {session: encode_entry(5, -1, 100.0, live.snapshot(session))},
        1: {session: encode_entry(0, -1, 1.0, stale.snapshot(session))},
    }
    for number in order:
        part = processor.sessions.partitions[number]
        part.status = PartitionStatus.RESTORING
        processor.rebalancer._install(part, changelog[number])
        part.status = PartitionStatus.ACTIVE

    assert processor.engine.sessions[session].halted_by == live.sessions[session].halted_by
    assert processor.sessions.meta[session].partition == 0
    assert session in processor.sessions.partitions[0].active
    assert session not in processor.sessions.partitions[1].sessions()
    assert processor.metrics.registry.get_sample_value(
        "streamguard_events_skipped_total", {"reason": "duplicate_snapshot"}
    ) == 1
    sent = len(producer.sent)
    _run(processor, [_record(encode(ToolCall(session=session, tool="ls", args={})), session.encode(), offset=6)])
    assert not [s for s in producer.sent[sent:] if dict(s["headers"]).get("dlq.reason")]
    processor.sessions.sweep(10**12, 1.0, 1.0, 1000)  # both TTLs past: nothing left to trip on
    assert session not in processor.sessions.meta


_LONE = "\ud800"


@pytest.mark.parametrize("payload", [
    f'["{_LONE}","bb","cc"]', f'{{"a": "{_LONE}"}}', f'[{{"name": "{_LONE}x"}}, {{"name": "b"}}, {{"name": "c"}}]',
    f'{{"exit_code": 0, "stdout": "16 {_LONE}"}}', f"{_LONE} pending", f"{_LONE}\n{_LONE}x\nabc\n",
    f"HTTP/2 503\r\ndate: Wed, 29 Oct 2025 12:28:00 GMT\r\n{_LONE}", f'No matches found for "{_LONE}"',
])
def test_a_library_caller_s_lone_surrogate_in_a_result_stops_nothing(payload: str) -> None:
    """No wire decoder lets a lone surrogate through, but a Python caller building events
    may: the JSON text a result holds, its size, its listing, read as any other answer,
    as success and as failure, through a runner, a read, a search and an address."""
    calls = [("bash", {"command": f"cat {_LONE}.txt"}), ("read", {"path": f"/a/{_LONE}"}),
             ("search", {"query": f"x {_LONE}"}), ("fetch_url", {"url": f"https://x.example/?q=%22{_LONE}%22"})]
    for tool, args in calls:
        engine = Engine(Policy())
        for n in range(6):
            engine.process(Text(session="s", text=f"please keep watching {_LONE}", role="user"))
            engine.process(ToolCall(session="s", tool=tool, args=args, call_id=str(n)))
            engine.process(ToolResult(session="s", tool=tool, result=payload, call_id=str(n)))
            engine.process(ToolCall(session="s", tool=tool, args=args, call_id=f"{n}e"))
            engine.process(ToolResult(session="s", tool=tool, error=payload, call_id=f"{n}e"))
            engine.process(Text(session="s", text=payload))
        assert engine.snapshot("s")
