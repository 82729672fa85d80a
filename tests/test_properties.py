"""Invariants over random event streams: replay determinism, restore equivalence, ordering."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamguard.engine import Engine
from streamguard.events import (
    FinalAnswer,
    Reset,
    Text,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnStart,
    Usage,
    encode,
)
from streamguard.policy import parse_policy_set

POLICY = """
mode = "enforce"
[cost_ceiling]
max_turn_usd = 0.5
max_session_usd = 2.0
[context_budget]
assumed_window = 2000
[verification]
enabled = true
[signals.window-repeat]
enabled = true
[signals.tool-failure-guidance]
halt_after_same_signature = 3
"""

SESSIONS = ["s1", "s2", "s3"]
TOOLS = ["read_file", "grep", "list_agents", "check_agent", "mark_task_done", "write_file"]
PATHS = ["main.go", "./main.go", "/w/main.go", "a/doc.go", "b/doc.go"]


@st.composite
def agent_event(draw: Any) -> Any:
    session = draw(st.sampled_from(SESSIONS))
    kind = draw(st.sampled_from(["call"] * 6 + ["result"] * 4 + ["text", "turn", "end", "usage", "final", "reset"]))
    if kind == "call":
        args = draw(st.one_of(
            st.fixed_dictionaries({"path": st.sampled_from(PATHS)}),
            st.fixed_dictionaries({"q": st.sampled_from(["x", "y"])}),
            st.none(),
        ))
        return ToolCall(session=session, tool=draw(st.sampled_from(TOOLS)), args=args,
                        kind=draw(st.sampled_from([None, "read", "write", "resolve"])))
    if kind == "result":
        return ToolResult(
            session=session, tool=draw(st.sampled_from(TOOLS)),
            error=draw(st.sampled_from([None, None, "denied"])),
            no_op=draw(st.booleans()),
            result=draw(st.sampled_from([None, "same", {"v": 1}, {"v": 2}, "x" * 40])),
            # one digest for several payloads: what identifies an answer, and what it
            # says, may differ (a cache keyed by one must not serve the other)
            result_digest=draw(st.sampled_from([None, None, None, "d41d8cd98f00"])),
        )
    if kind == "text":
        return Text(session=session, text=draw(st.sampled_from(["", "  ", "progress"])))
    if kind == "turn":
        return TurnStart(session=session)
    if kind == "end":
        return TurnEnd(session=session)
    if kind == "usage":
        return Usage(session=session, cost_usd=draw(st.sampled_from([0.0, 0.1, 0.3])),
                     input_tokens=draw(st.integers(0, 130_000)))
    if kind == "final":
        return FinalAnswer(session=session, text="done")
    return Reset(session=session, guardrail=draw(st.sampled_from(["watchdog", "cost_ceiling", "all"])),
                 additional_budget_usd=draw(st.sampled_from([None, 1.0])))


@st.composite
def behaviour(draw: Any) -> list[Any]:
    """A short burst of one behaviour: loops, streaks and turn structure, so restored
    states carry latches, cut counts, halts and queued feedback, not just counters."""
    session = draw(st.sampled_from(SESSIONS[:2]))
    n = draw(st.integers(1, 7))
    shape = draw(st.sampled_from(["repeat", "cycle", "noop", "fail", "turn", "spend", "single"]))
    if shape == "repeat":
        event = ToolCall(session=session, tool="read_file", args={"path": draw(st.sampled_from(PATHS))})
        return [event] * n
    if shape == "cycle":
        a = ToolCall(session=session, tool="list_agents", args={})
        b = ToolCall(session=session, tool="check_agent", args={"id": 1})
        return [a, b] * n
    if shape == "noop":
        return [ToolResult(session=session, tool="mark_task_done", no_op=True)] * n
    if shape == "fail":
        return [ToolResult(session=session, tool="kubectl", error="denied")] * n
    if shape == "turn":
        return [TurnEnd(session=session), TurnStart(session=session)]
    if shape == "spend":
        return [Usage(session=session, cost_usd=0.2, input_tokens=1500)] * n
    return [draw(agent_event())]


def behaviours() -> Any:
    return st.lists(behaviour(), max_size=40).map(lambda chunks: [e for c in chunks for e in c])


def feed(engine: Engine, event: Any) -> list[bytes]:
    outs = engine.control(event) if isinstance(event, Reset) else engine.process(event)
    return [encode(o) for o in outs]


def fresh() -> Engine:
    return Engine(parse_policy_set(POLICY))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=st.one_of(st.lists(agent_event(), max_size=120), behaviours()),
    cut=st.integers(min_value=0, max_value=150),
)
def test_restore_then_continue_equals_uninterrupted(events: list[Any], cut: int) -> None:
    cut = min(cut, len(events))
    whole = fresh()
    expected = [o for e in events for o in feed(whole, e)]

    first = fresh()
    got = [o for e in events[:cut] for o in feed(first, e)]
    second = fresh()
    for session in list(first.sessions):
        second.restore(session, first.snapshot(session))
    got += [o for e in events[cut:] for o in feed(second, e)]

    assert got == expected
    assert second.sessions == whole.sessions


@settings(max_examples=60, deadline=None)
@given(events=st.lists(agent_event(), max_size=80))
def test_replay_is_deterministic(events: list[Any]) -> None:
    one, two = fresh(), fresh()
    assert [o for e in events for o in feed(one, e)] == [o for e in events for o in feed(two, e)]


@settings(max_examples=60, deadline=None)
@given(events=st.lists(agent_event(), max_size=80))
def test_sessions_do_not_interfere(events: list[Any]) -> None:
    """A session's outputs do not depend on other sessions' events interleaved with it."""
    mixed = fresh()
    mixed_out: dict[str, list[bytes]] = {s: [] for s in SESSIONS}
    for e in events:
        mixed_out[e.session] += feed(mixed, e)
    for session in SESSIONS:
        alone = fresh()
        alone_out = [o for e in events if e.session == session for o in feed(alone, e)]
        assert alone_out == mixed_out[session]


@settings(max_examples=60, deadline=None)
@given(events=st.lists(agent_event(), max_size=80), dup=st.data())
def test_redelivered_events_with_seq_change_nothing(events: list[Any], dup: Any) -> None:
    """At-least-once delivery: re-sent events (same seq) are skipped, so outputs are unchanged."""
    numbered = []
    counters: dict[str, int] = {}
    for e in events:
        if isinstance(e, Reset):
            continue
        counters[e.session] = counters.get(e.session, 0) + 1
        e.seq = counters[e.session]
        numbered.append(e)
    clean = fresh()
    expected = [o for e in numbered for o in feed(clean, e)]
    noisy = fresh()
    got = []
    for i, e in enumerate(numbered):
        got += feed(noisy, e)
        if numbered and dup.draw(st.booleans()):
            got += feed(noisy, numbered[dup.draw(st.integers(0, i))])  # a redelivery
    assert got == expected


# Keys the detectors look for in structured payloads (MCP results, images, statuses...),
# with values of every JSON type: a key a detector reads may hold anything.
_READ_KEYS = st.sampled_from([
    "type", "status", "state", "content", "text", "isError", "structuredContent", "error",
    "data", "results", "items", "source", "media_type", "message", "path", "command",
])
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12) | st.sampled_from(["image", "text", "running", "failed", "{\"a\": 1}"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_READ_KEYS, inner, max_size=4),
    max_leaves=24,
)


@st.composite
def odd_payload_event(draw: Any) -> Any:
    tool = draw(st.sampled_from(["bash", "computer", "read_file", "mcp__fs__read", "http_request"]))
    if draw(st.booleans()):
        return ToolCall(session="p", tool=tool, args=draw(_JSON), call_id=draw(st.sampled_from([None, "c1", "c2"])))
    return ToolResult(
        session="p", tool=tool, result=draw(_JSON), call_id=draw(st.sampled_from([None, "c1", "c2"])),
        error=draw(st.sampled_from([None, None, "failed"])),
        result_bytes=draw(st.sampled_from([None, None, 20_000, 3_000_000])),
    )


@given(events=st.lists(odd_payload_event(), max_size=30))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_json_in_args_and_results_is_read_without_raising(events: list[Any]) -> None:
    """The contract admits any JSON in ``args`` and ``result``; an exception inside the
    engine would leave the event half applied (its record dead-lettered, its effects
    kept). A list as a block's ``type``, beside a size over 16 KB, once raised."""
    engine = fresh()
    for event in events:
        engine.process(event)
