"""Hostile records on a real broker: the group survives, good records keep their outputs.

Each poison record must end in the dead-letter topic with its reason, every
member of the group stays up (a poison that crashed its owner would crash the
next owner too), offsets are committed past it, and the sessions around it
publish exactly the outputs an in-process engine gives them. Then writers that
target *other* sessions: a forged timestamp, a claim on a foreign partition, a
huge ``seq``, forged dead-letter headers.
"""

from __future__ import annotations

import json

import pytest
from aiokafka.partitioner import murmur2

from streamguard.events import MAX_NESTING, Reset, ToolCall, Usage
from tests.kafka.conftest import ManualClock, metric_value, poll_until
from tests.kafka.scenarios import T0, by_id, calm, expected_outputs, repeat_loop

pytestmark = pytest.mark.kafka

DEEP = 1000


def home(session: str, partitions: int) -> int:
    return (murmur2(session.encode()) & 0x7FFFFFFF) % partitions


def sessions_on_every_partition(partitions: int, prefix: str) -> list[str]:
    chosen: dict[int, str] = {}
    i = 0
    while len(chosen) < partitions:
        session = f"{prefix}-{i}"
        chosen.setdefault(home(session, partitions), session)
        i += 1
    return [chosen[p] for p in range(partitions)]


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def poison_records() -> list[tuple[str, bytes, str]]:
    """(session key, raw value, the dead-letter reason it must get)."""
    call = '{"type":"tool_call","session":"%s","tool":"t","args":%s}'
    records = [
        ("p-deep-args", (call % ("p-deep-args", nested(DEEP))).encode(), "too_deep"),
        (
            "p-deep-string",
            (call % ("p-deep-string", json.dumps({"q": nested(DEEP)}))).encode(),
            "too_deep",
        ),
        (
            "p-deep-result",
            (
                '{"type":"tool_result","session":"p-deep-result","tool":"t","result":'
                + nested(MAX_NESTING + 1)
                + "}"
            ).encode(),
            "too_deep",
        ),
        (
            "p-huge-seq",
            b'{"type":"tool_call","session":"p-huge-seq","tool":"t","seq":18446744073709551616}',
            "invalid_event",
        ),
        (
            "p-huge-tokens",
            b'{"type":"usage","session":"p-huge-tokens","input_tokens":18446744073709551616}',
            "invalid_event",
        ),
        (
            "p-long-tool",
            ('{"type":"tool_call","session":"p-long-tool","tool":"%s"}' % ("x" * 400_000)).encode(),
            "invalid_event",
        ),
        ("p-not-json", b"{" * 600_000, "malformed"),
    ]
    return records


async def test_poison_records_go_to_the_dlq_and_the_group_survives(
    topics, start_processor
) -> None:
    n = topics.partitions
    a = await start_processor()
    b = await start_processor(ready=False)
    await poll_until(
        lambda: a.processor.ready
        and b.processor.ready
        and set(a.processor.sessions.partitions) | set(b.processor.sessions.partitions) == set(range(n))
        and not set(a.processor.sessions.partitions) & set(b.processor.sessions.partitions),
        40,
        "two members sharing the partitions",
    )
    good = sessions_on_every_partition(n, "good")
    streams = {s: (repeat_loop(s) if i % 2 == 0 else calm(s)) for i, s in enumerate(good)}
    poisons = poison_records()
    longest = max(len(e) for e in streams.values())
    for i in range(longest):
        for events in streams.values():
            if i < len(events):
                await topics.send(topics.events, events[i])
        if i < len(poisons):
            key, value, _ = poisons[i]
            await topics.send(topics.events, value, key=key)
    for key, value, _ in poisons[longest:]:
        await topics.send(topics.events, value, key=key)
    # and one for the control path: a reset whose `by` nests past the decoder
    deep_by = ('{"type":"reset","session":"' + good[0] + '","by":' + nested(DEEP) + "}").encode()
    await topics.send(topics.control, deep_by, key=good[0])

    expected: dict = {}
    for events in streams.values():
        expected.update(by_id(expected_outputs(events)))
    await topics.read_until(
        topics.alerts, lambda rs: len(rs) >= len(expected), what="the good sessions' outputs"
    )
    wanted = len(poisons) + 1
    dead = await topics.read_until(
        topics.dlq, lambda rs: len(rs) >= wanted, what="every poison record dead-lettered"
    )
    await topics.wait_committed()
    assert by_id(await topics.outputs()) == expected
    reasons = {
        (r.key.decode(), dict(r.headers)["dlq.reason"].decode()) for r in dead if r.key
    }
    for key, _, reason in poisons:
        assert (key, reason) in reasons
    assert (good[0], "too_deep") in reasons
    for r in dead:
        assert len(r.value or b"") < a.processor.config.max_output_bytes
    oversized = [r for r in dead if r.key == b"p-not-json"]
    assert dict(oversized[0].headers)["dlq.value-truncated-from"] == b"600000"
    assert not a.task.done() and not b.task.done()  # nobody crashed
    assert a.processor.ready and b.processor.ready
    total = 0.0
    for member in (a, b):
        text = await member.metrics_text()
        total += metric_value(text, "streamguard_dead_letters_total", reason="too_deep") or 0.0
    assert total == 4.0
    await a.stop()
    await b.stop()

    # A restart finds nothing left to do: the poison was committed past.
    again = await start_processor()
    await topics.wait_committed()
    assert by_id(await topics.outputs()) == expected
    assert len(await topics.read_all(topics.dlq)) == wanted
    await again.stop()


@pytest.mark.parametrize("topics", [2], indirect=True)
async def test_writers_cannot_clear_or_blind_other_sessions(topics, start_processor) -> None:
    n = topics.partitions
    clock = ManualClock()
    running = await start_processor(
        session_idle_ttl_s=3600, halted_session_ttl_s=7200, clock=clock
    )
    proc = running.processor
    victim, bystander = sessions_on_every_partition(n, "victim")
    loop = repeat_loop(victim, n=3)  # three of the five calls of a loop so far
    await topics.send_events(loop)
    await topics.send_events(repeat_loop(bystander))  # halted
    await poll_until(
        lambda: victim in proc.engine.sessions and proc.engine.is_halted(bystander),
        20,
        "the victim's state and the bystander's halt",
    )

    # 1. A record dated eight days ahead, on each partition: nothing is evicted.
    ahead = int((clock() + 8 * 24 * 3600) * 1000)
    for session in sessions_on_every_partition(n, "clock"):
        await topics.send(
            topics.events, ToolCall(session=session, tool="ls", ts=T0), timestamp_ms=ahead
        )
    # 2. The victim's key produced to the other partition, and a control record
    #    with a forged re-route header there.
    other = (home(victim, n) + 1) % n
    await topics.send(
        topics.events, ToolCall(session=victim, tool="ls", ts=T0), partition=other
    )
    await topics.send(
        topics.control,
        Reset(session=bystander, by="forger"),
        partition=(home(bystander, n) + 1) % n,
        headers=[("streamguard.rerouted-from", b"0:0")],
    )
    # 3. A huge seq, then the victim's own events without seq: still applied.
    await topics.send(topics.events, Usage(session=victim, seq=2**53, ts=T0 + 10))
    # 4. Forged dead-letter headers on a malformed record.
    await topics.send(
        topics.events,
        b"{not json",
        key=victim,
        headers=[("dlq.reason", b"all_fine"), ("dlq.source.offset", b"0")],
    )
    rest = [
        ToolCall(session=victim, agent="coder", tool="read_file", args={"path": "main.go"}, ts=T0 + 20 + i, seq=5 + i)
        for i in range(2)
    ]
    for event in rest:
        await topics.send(topics.events, event)
    await poll_until(lambda: proc.engine.is_halted(victim), 20, "the victim's loop to halt")
    await topics.wait_committed()

    assert proc.engine.is_halted(bystander)  # no forged reset, no eviction
    assert proc.metrics.timestamps_clamped._value.get() == n
    state = proc.engine.sessions[victim]
    assert proc.sessions.meta[victim].partition == home(victim, n)
    assert state.last_seq == 6  # the forged seq did not move the replay mark
    dead = await topics.read_all(topics.dlq)
    by_reason: dict[str, list] = {}
    for record in dead:
        headers = [(k, v) for k, v in record.headers]
        reasons = [v.decode() for k, v in headers if k == "dlq.reason"]
        assert len(reasons) == 1  # the forged one was stripped
        by_reason.setdefault(reasons[0], []).append(record)
    assert len(by_reason["not_home_partition"]) == 2
    assert len(by_reason["malformed"]) == 1
    text = await running.metrics_text()
    assert metric_value(text, "streamguard_security_events_total", kind="forged_header") == 3.0
    assert metric_value(text, "streamguard_security_events_total", kind="forged_reroute") == 1.0
    assert metric_value(text, "streamguard_seq_jumps_total") == 1.0
    await running.stop()
