"""Stage 1's fast path (:mod:`streamguard.otel.direct`) against the reference mapping.

``span_session_records`` must write, byte for byte, what ``session_records`` writes
of ``map_spans``'s contract events, count the same spans out for the same reasons
and teach the trace memory the same sessions, whatever the spans carry.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamguard.events import decode_agent_event
from streamguard.otel import direct
from streamguard.otel.direct import span_session_records
from streamguard.otel.mapping import MappingConfig, TraceSessions, map_spans
from streamguard.otel.otlp import SpanEvent, SpanRecord
from streamguard.otel.records import decode_session_record, session_records

CONFIG = MappingConfig()
SMALL_CONTENT = MappingConfig(max_content_bytes=64)  # content near the bound is common here

# Values an attribute may hold after decoding: the common, valid ones more often.
NAMES = st.one_of(
    st.sampled_from(["read_file", "bash", "call-1", "m-1", "conv-1", "conv-2"]),
    st.sampled_from(["", "x" * 256, "y" * 257, "é" * 10, 'quo"te\\n']),
    st.text(max_size=12),
    st.integers(-3, 3),
    st.booleans(),
    st.floats(allow_nan=True, allow_infinity=False),
    st.binary(max_size=4),
    st.lists(st.sampled_from(["a", 1]), max_size=2),
    st.none(),
)
CONTENT = st.one_of(
    st.sampled_from(['{"path": "src/a.go"}', "ok", "", "[" * 70 + "]" * 70, "{" * 30 + "[" * 40]),
    st.text(max_size=40),
    st.text(min_size=10, max_size=80),
    st.integers(),
    st.dictionaries(st.sampled_from(["k", "z"]), st.integers(), max_size=2),
    st.lists(st.integers(), max_size=3),
    st.binary(max_size=8),
    st.none(),
)
COUNTS = st.one_of(
    st.integers(0, 5000), st.sampled_from([-1, 2**40, 2**40 + 1, 2**62]), st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(["77", "x", ""]), st.none(),
)
REASONS = st.one_of(
    st.lists(st.sampled_from(["stop", "STOP", "tool_calls", "length", "end_turn", 3]), max_size=3),
    st.sampled_from(["stop", "tool_calls", 3]),
    st.none(),
)
TIMES = st.one_of(
    st.integers(1_700_000_000 * 10**9, 1_800_000_000 * 10**9),
    st.sampled_from([0, 1, 999, 10**19, 2**64 - 1]),
)
OPERATIONS = st.sampled_from(
    ["execute_tool", "chat", "text_completion", "generate_content", "invoke_agent", "embeddings", None]
)

ATTRIBUTES: dict[str, Any] = {
    "gen_ai.conversation.id": NAMES,
    "session.id": NAMES,
    "gen_ai.agent.name": NAMES,
    "gen_ai.tool.name": NAMES,
    "tool.name": NAMES,
    "gen_ai.tool.call.id": NAMES,
    "tool_call.id": NAMES,
    "gen_ai.tool.call.arguments": CONTENT,
    "input.value": CONTENT,
    "gen_ai.tool.call.result": CONTENT,
    "output.value": CONTENT,
    "error.type": NAMES,
    "gen_ai.request.model": NAMES,
    "gen_ai.response.model": NAMES,
    "llm.model_name": NAMES,
    "gen_ai.usage.input_tokens": COUNTS,
    "gen_ai.usage.prompt_tokens": COUNTS,
    "gen_ai.usage.output_tokens": COUNTS,
    "gen_ai.usage.completion_tokens": COUNTS,
    "gen_ai.usage.cache_read.input_tokens": COUNTS,
    "gen_ai.usage.cost": st.one_of(st.floats(-1, 2e6), COUNTS),
    "llm.cost.total": st.floats(0, 1),
    "gen_ai.response.finish_reasons": REASONS,
    "gen_ai.output.messages": st.sampled_from(['[{"role": "assistant", "content": "hi"}]', "not json"]),
    "gen_ai.completion.0.content": st.sampled_from(["part", ""]),
    "openinference.span.kind": st.sampled_from(["TOOL", "LLM", "AGENT", "CHAIN", "tool"]),
    "gen_ai.system": st.sampled_from(["openai"]),
}
# The attributes of the spans producers send most, with their usual values: mostly
# these, so that most spans are the fast path's and the rest are near misses.
TYPICAL: dict[str, Any] = {
    "gen_ai.conversation.id": st.sampled_from(["conv-1", "conv-2", 'c"3']),
    "gen_ai.agent.name": st.sampled_from(["agent", "é-agent"]),
    "gen_ai.tool.name": st.sampled_from(["read_file", "bash"]),
    "gen_ai.tool.call.id": st.sampled_from(["call-1", "call-2"]),
    "gen_ai.tool.call.arguments": st.one_of(st.text(min_size=1, max_size=20), st.just('{"p": 1}')),
    "gen_ai.tool.call.result": st.text(min_size=1, max_size=20),
    "gen_ai.request.model": st.sampled_from(["m-1", "m-2"]),
    "gen_ai.response.model": st.sampled_from(["m-1-2025"]),
    "gen_ai.usage.input_tokens": st.integers(0, 10_000),
    "gen_ai.usage.output_tokens": st.integers(0, 500),
    "gen_ai.response.finish_reasons": st.sampled_from([["stop"], ["tool_calls"], ["end_turn"]]),
}
COMMON = tuple(TYPICAL)


@st.composite
def spans(draw: st.DrawFn) -> SpanRecord:
    attrs: dict[str, Any] = {}
    operation = draw(OPERATIONS)
    if operation is not None:
        attrs["gen_ai.operation.name"] = operation
    rare = [k for k in ATTRIBUTES if k not in COMMON]
    for key in COMMON:
        choice = draw(st.integers(0, 19))
        if choice < 14:
            attrs[key] = draw(TYPICAL[key])
        elif choice < 17:
            attrs[key] = draw(ATTRIBUTES.get(key, NAMES))
    for key in draw(st.lists(st.sampled_from(rare), max_size=2, unique=True)):
        attrs[key] = draw(ATTRIBUTES[key])
    resource: dict[str, Any] = draw(
        st.sampled_from([{"service.name": "svc"}, {}, {"service.name": "svc", "session.id": "res-s"}])
    )
    start = draw(st.one_of(TIMES, st.integers(1_700_000_000 * 10**9, 1_800_000_000 * 10**9)))
    end = draw(st.one_of(st.just(min(start + 500_000, 2**64 - 1)), TIMES))  # decoded times are u64
    events = draw(st.sampled_from([
        [],
        [SpanEvent("gen_ai.choice", end, {"message": '{"role": "assistant", "content": "ev"}'})],
    ]))
    return SpanRecord(
        trace_id=draw(st.sampled_from([f"{n:032x}" for n in range(1, 4)] * 3 + [""])),
        span_id=draw(st.sampled_from(["", *["00000000000000aa", f"{2**63:016x}", "abcdef0123456789"] * 3])),
        parent_span_id=draw(st.sampled_from(["", "0101010101010101"])),
        name=draw(st.sampled_from(["execute_tool grep", "chat m", "span", "execute_tool "])),
        start_ns=start,
        end_ns=end,
        status_code=draw(st.sampled_from([0, 0, 0, 0, 0, 1, 2])),
        status_message=draw(st.sampled_from(["", "boom"])),
        attrs=attrs,
        resource=resource,
        events=events,
    )


def reference(
    batch: list[SpanRecord], config: MappingConfig, traces: TraceSessions
) -> tuple[list[tuple[str, bytes]], int, dict[str, int]]:
    result = map_spans(batch, config, traces)
    return session_records(result.mapped), len(result.mapped), result.ignored


def fast(
    batch: list[SpanRecord], config: MappingConfig, traces: TraceSessions
) -> tuple[list[tuple[str, bytes]], int, dict[str, int]]:
    result = span_session_records(batch, config, traces)
    return result.records, result.mapped, result.ignored


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    payloads=st.lists(st.lists(spans(), max_size=12), min_size=1, max_size=3),
    config=st.sampled_from([CONFIG, SMALL_CONTENT, MappingConfig(session_keys=("session.id",))]),
)
def test_the_fast_path_writes_what_the_reference_writes(
    payloads: list[list[SpanRecord]], config: MappingConfig
) -> None:
    ours, theirs = TraceSessions(limit=4), TraceSessions(limit=4)
    for batch in payloads:
        assert fast(batch, config, ours) == reference(batch, config, theirs)
        assert list(ours._map.items()) == list(theirs._map.items())


def tool_span(n: int, **attrs: Any) -> SpanRecord:
    base = {
        "gen_ai.operation.name": "execute_tool", "gen_ai.conversation.id": "conv-1",
        "gen_ai.agent.name": "agent", "gen_ai.tool.name": "read_file",
        "gen_ai.tool.call.id": f"call-{n}", "gen_ai.tool.call.arguments": '{"path": "a"}',
    }
    return SpanRecord(
        f"{1:032x}", f"{n + 1:016x}", "", "execute_tool read_file", 1_760_000_000 * 10**9 + n,
        1_760_000_001 * 10**9 + n, 0, "", {**base, **attrs}, {"service.name": "svc"}, [],
    )


def chat_span(n: int, **attrs: Any) -> SpanRecord:
    base = {
        "gen_ai.operation.name": "chat", "gen_ai.conversation.id": "conv-1",
        "gen_ai.agent.name": "agent", "gen_ai.request.model": "m",
        "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 7,
        "gen_ai.response.finish_reasons": ["stop"],
    }
    return SpanRecord(
        f"{1:032x}", f"{n + 100:016x}", "", "chat m", 1_760_000_000 * 10**9,
        1_760_000_002 * 10**9 + n, 0, "", {**base, **attrs}, {}, [],
    )


def test_common_spans_take_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without this, the equivalence above would also hold if every span went to
    the reference."""
    common = [
        tool_span(1), tool_span(2, **{"gen_ai.tool.call.result": "ok"}),
        chat_span(3), chat_span(4, **{"gen_ai.response.finish_reasons": ["tool_calls"]}),
    ]
    expected = reference(common, CONFIG, TraceSessions())

    def no_reference(*args: Any) -> Any:
        raise AssertionError("a common span went to the reference mapping")

    monkeypatch.setattr(direct, "_span_items", no_reference)
    assert fast(common, CONFIG, TraceSessions()) == expected
    # an uncommon span goes to the reference, whose failure is that span's alone
    _, mapped, ignored = fast([tool_span(5, **{"error.type": "Timeout"})], CONFIG, TraceSessions())
    assert (mapped, ignored) == (0, {"mapping_error": 1})


def test_fast_path_events_are_contract_events_in_field_order() -> None:
    records, mapped, ignored = fast([tool_span(1), chat_span(2)], CONFIG, TraceSessions())
    assert (mapped, ignored) == (2, {})
    [(_, value)] = records
    events = [data for _, items in decode_session_record(value) for _, _, data in items]
    assert [decode_agent_event(e).__class__.__name__ for e in events] == [
        "ToolCall", "ToolResult", "Usage", "Text",
    ]
    for data in events:  # what the contract Struct itself writes
        assert msgspec.json.encode(decode_agent_event(data)) == data
