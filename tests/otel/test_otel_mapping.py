"""The pure part of the bridge: OTLP decoding and the mapping to contract-v1 events."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from streamguard.engine import Engine
from streamguard.events import ToolCall, ToolResult, decode_agent_event
from streamguard.otel import otlp
from streamguard.otel.mapping import MappingConfig, TraceSessions, map_logs, map_spans
from streamguard.otel.receiver import _field
from streamguard.otel.window import ReorderWindow
from streamguard.policy import load_policy_set

from .agent import LOOP, SWEEP, Collecting, provider, run_agent
from .otlp_fixtures import proto_from_dict, spans_json, spans_proto

CONFIG = MappingConfig()


def sdk_spans(conversation: str | None, calls: list[Any], **kwargs: Any) -> list[Any]:
    exporter = Collecting()
    run_agent(provider(exporter), conversation, calls, **kwargs)
    return exporter.spans


def events_of(payload: bytes, config: MappingConfig = CONFIG) -> list[Any]:
    """Decode, map and order one payload as the bridge does; the events with seq."""
    result = map_spans(otlp.decode_spans(payload), config, TraceSessions())
    window = ReorderWindow(window_s=0)
    for mapped in result.mapped:
        items = [(t, r, msgspec.json.encode(e)) for t, r, e in mapped.items]
        window.add(mapped.session, mapped.key, items, 0, 0.0)
    return [decode_agent_event(r.data) for r in window.flush()]


def outputs_of(events: list[Any]) -> list[Any]:
    engine = Engine(load_policy_set(None))
    out = []
    for event in events:
        out.extend(engine.process(event, event.ts))
    return out


def test_proto_and_collector_json_decode_to_the_same_spans() -> None:
    spans = sdk_spans("conv-1", LOOP[:2])
    from_proto = otlp.decode_spans(spans_proto(spans))
    from_json = otlp.decode_spans(spans_json(spans))
    assert len(from_proto) == 6
    assert from_proto == from_json
    assert all(len(s.trace_id) == 32 and len(s.span_id) == 16 for s in from_proto)


def test_a_loop_through_the_mapping_trips_and_a_sweep_does_not() -> None:
    loop = events_of(spans_proto(sdk_spans("loop", LOOP)))
    sweep = events_of(spans_proto(sdk_spans("sweep", SWEEP)))
    calls = [e for e in loop if isinstance(e, ToolCall)]
    assert [c.args for c in calls] == [json.dumps({"path": "./main.go"})] * 6
    assert [e.seq for e in loop] == list(range(1, len(loop) + 1))
    trips = [o for o in outputs_of(loop) if type(o).__name__ == "GuardrailTrip"]
    assert trips and trips[0].signal == "repeated-tool-call" and trips[0].session_halted
    assert outputs_of(sweep) == []


def test_content_off_never_makes_two_calls_the_same_call() -> None:
    events = events_of(spans_proto(sdk_spans("off", LOOP, capture=False)))
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert len({json.dumps(c.args) for c in calls}) == 6
    assert all(set(c.args) == {"otel.span_id"} for c in calls)
    results = [e for e in events if isinstance(e, ToolResult)]
    assert all(r.result is None for r in results)
    assert outputs_of(events) == []


def test_content_off_keeps_the_name_based_signals() -> None:
    calls = [("mark_task_done", {"note": f"attempt {i}"}) for i in range(16)]
    events = events_of(spans_proto(sdk_spans("names", calls, capture=False)))
    signals = {getattr(o, "signal", None) for o in outputs_of(events)}
    assert "repeated-tool-name" in signals
    assert "repeated-tool-call" not in signals


def test_failures_map_from_status_and_error_type() -> None:
    events = events_of(spans_proto(sdk_spans("fail", SWEEP[:4], failing=frozenset({0, 1, 2}))))
    errors = [e.error for e in events if isinstance(e, ToolResult)]
    assert errors == ["tool failed", "tool failed", "tool failed", None]
    signals = {getattr(o, "signal", None) for o in outputs_of(events)}
    assert signals & {"tool-failure-streak", "tool-failure-guidance"}  # one alert: deference


def test_a_token_count_that_is_not_finite_is_no_count() -> None:
    # OTLP/JSON may carry a double as "Infinity" or "NaN": that span's count is dropped,
    # the payload and its other events map as usual.
    document = json.loads(spans_json(sdk_spans("inf", SWEEP[:1])))
    changed = 0
    for resource in document["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for attribute in span.get("attributes", []):
                    if attribute["key"] == "gen_ai.usage.input_tokens":
                        attribute["value"] = {"doubleValue": "Infinity" if not changed else "NaN"}
                        changed += 1
    assert changed == 2
    events = events_of(json.dumps(document).encode())
    assert [type(e).__name__ for e in events] == ["Usage", "ToolCall", "ToolResult", "Usage", "Text", "TurnEnd"]
    usages = [e for e in events if type(e).__name__ == "Usage"]
    assert [u.input_tokens for u in usages] == [None, None]
    assert all(u.output_tokens is not None for u in usages)


def test_usage_text_and_turns() -> None:
    events = events_of(spans_proto(sdk_spans("turns", SWEEP[:1])))
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["Usage", "ToolCall", "ToolResult", "Usage", "Text", "TurnEnd"]
    assert events[0].model == "model-x" and events[0].input_tokens == 1000
    assert events[4].text == "Done."
    assert len({e.turn for e in events}) == 1  # the trace: one run, one turn


def test_content_off_text_is_estimated_only_when_the_model_answered_in_words() -> None:
    events = events_of(spans_proto(sdk_spans("words", SWEEP[:2], capture=False)))
    texts = [e for e in events if type(e).__name__ == "Text"]
    assert len(texts) == 1 and texts[0].text is None and texts[0].chars == 50 * 4


def test_missing_conversation_id_falls_back_to_the_trace() -> None:
    spans = sdk_spans(None, SWEEP[:2])
    events = events_of(spans_proto(spans))
    assert {e.session for e in events} == {spans[0].context.trace_id.to_bytes(16, "big").hex()}


def test_a_payload_batched_across_sessions_is_split_by_session() -> None:
    payload = spans_proto(sdk_spans("a", SWEEP[:2]) + sdk_spans("b", LOOP[:3]))
    events = events_of(payload)
    by_session: dict[str, list[int]] = {}
    for e in events:
        by_session.setdefault(e.session, []).append(e.seq)
    assert set(by_session) == {"a", "b"}
    assert all(seqs == list(range(1, len(seqs) + 1)) for seqs in by_session.values())


def test_a_sibling_without_the_conversation_joins_its_trace() -> None:
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "AAAAAAAAAAAAAAAAAAAAAQ==", "spanId": "AAAAAAAAAAE=", "name": "execute_tool x",
         "startTimeUnixNano": "1000", "endTimeUnixNano": "2000",
         "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                        {"key": "gen_ai.tool.name", "value": {"stringValue": "x"}}]},
        {"traceId": "AAAAAAAAAAAAAAAAAAAAAQ==", "spanId": "AAAAAAAAAAI=", "name": "invoke_agent",
         "startTimeUnixNano": "500", "endTimeUnixNano": "3000",
         "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}},
                        {"key": "gen_ai.conversation.id", "value": {"stringValue": "conv-9"}}]},
    ]}]}]}
    events = events_of(proto_from_dict("traces", doc))
    assert {e.session for e in events} == {"conv-9"}


def test_openinference_spans() -> None:
    def kv(key: str, value: Any) -> dict[str, Any]:
        if isinstance(value, int):
            return {"key": key, "value": {"intValue": str(value)}}
        return {"key": key, "value": {"stringValue": value}}

    doc = {"resourceSpans": [{"resource": {"attributes": [kv("service.name", "lg-app")]},
                              "scopeSpans": [{"spans": [
        {"traceId": "0" * 31 + "1", "spanId": "0" * 15 + "1", "name": "search",
         "startTimeUnixNano": "1000", "endTimeUnixNano": "2000",
         "attributes": [kv("openinference.span.kind", "TOOL"), kv("tool.name", "search"),
                        kv("input.value", '{"q": "x"}'), kv("output.value", "found"),
                        kv("session.id", "oi-1")]},
        {"traceId": "0" * 31 + "1", "spanId": "0" * 15 + "2", "name": "llm",
         "startTimeUnixNano": "2500", "endTimeUnixNano": "3000",
         "attributes": [kv("openinference.span.kind", "LLM"), kv("llm.model_name", "m"),
                        kv("llm.token_count.prompt", 300), kv("llm.token_count.completion", 7),
                        kv("llm.output_messages.0.message.role", "assistant"),
                        kv("llm.output_messages.0.message.content", "hello"),
                        kv("session.id", "oi-1")]},
    ]}]}]}
    events = events_of(json.dumps(doc).encode())
    assert [type(e).__name__ for e in events] == ["ToolCall", "ToolResult", "Usage", "Text"]
    assert events[0].args == '{"q": "x"}' and events[1].result == "found"
    assert events[0].agent == "lg-app"
    assert events[2].input_tokens == 300 and events[3].text == "hello"


def test_claude_code_log_events() -> None:
    def kv(key: str, value: str) -> dict[str, Any]:
        return {"key": key, "value": {"stringValue": value}}

    def record(name: str, t: int, *attrs: dict[str, Any]) -> dict[str, Any]:
        return {"timeUnixNano": str(t), "body": {"stringValue": f"claude_code.{name}"},
                "attributes": [kv("event.name", name), kv("session.id", "cc-1"), *attrs]}

    doc = {"resourceLogs": [{"resource": {"attributes": [kv("service.name", "claude-code")]},
                             "scopeLogs": [{"logRecords": [
        record("user_prompt", 1_000_000_000, kv("prompt_length", "12")),
        record("api_request", 2_000_000_000, kv("model", "claude-x"), kv("input_tokens", "10"),
               kv("cache_read_tokens", "5000"), kv("output_tokens", "40"), kv("cost_usd", "0.02")),
        record("tool_result", 4_000_000_000, kv("tool_name", "Bash"), kv("success", "false"),
               kv("error", "exit 1"), kv("duration_ms", "1000"),
               kv("tool_parameters", '{"bash_command": "make"}')),
        record("tool_result", 5_000_000_000, kv("tool_name", "Read"), kv("success", "true")),
        record("tool_decision", 5_000_000_001, kv("tool_name", "Read")),
    ]}]}]}
    result = map_logs(otlp.decode_logs(json.dumps(doc).encode()), CONFIG)
    assert result.ignored == {"unknown_log_event": 1}
    items = sorted((t, r, e) for m in result.mapped for t, r, e in m.items)
    kinds = [type(e).__name__ for _, _, e in items]
    assert kinds == ["TurnStart", "Usage", "ToolCall", "ToolResult", "ToolCall", "ToolResult"]
    usage = items[1][2]
    assert usage.input_tokens == 5010 and usage.cost_usd == 0.02 and usage.agent == "claude-code"
    assert items[2][0] == 3_000_000_000  # the call began duration_ms before its result
    assert items[2][2].args == '{"bash_command": "make"}' and items[3][2].error == "exit 1"
    assert set(items[4][2].args) == {"otel.record"}  # no parameters: a distinct call


@pytest.mark.parametrize(
    "payload, reason",
    [
        (b"\xff\xff\xff\xff not protobuf", "malformed_otlp"),
        (b'{"resourceSpans": 7}', "malformed_otlp"),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz!"}]}]}]}', "malformed_otlp"),
        (b"[" * 100_000, "malformed_otlp"),
    ],
)
def test_malformed_payloads_raise_with_a_reason(payload: bytes, reason: str) -> None:
    with pytest.raises(otlp.OtlpError) as caught:
        otlp.decode_spans(payload)
    assert caught.value.reason == reason


def _deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"stringValue": "leaf"}
    for _ in range(levels):
        value = {"kvlistValue": {"values": [{"key": "k", "value": value}]}}
    return value


def test_attribute_values_nested_too_deep_are_refused_in_both_encodings() -> None:
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "0" * 31 + "1", "spanId": "0" * 15 + "1", "name": "s",
         "attributes": [{"key": "deep", "value": _deep(80)}]}]}]}]}
    with pytest.raises(otlp.OtlpError) as caught:
        otlp.decode_spans(json.dumps(doc).encode())
    assert caught.value.reason == "too_deep"
    # protobuf: built on the wire (the library refuses to build it), refused on the way in
    value = _field(1, b"leaf")  # AnyValue.string_value
    for _ in range(80):
        value = _field(6, _field(1, _field(1, b"k") + _field(2, value)))  # kvlist_value
    span = _field(1, b"\x01" * 16) + _field(2, b"\x02" * 8) + _field(9, _field(1, b"deep") + _field(2, value))
    payload = _field(1, _field(2, _field(2, span)))
    with pytest.raises(otlp.OtlpError) as caught:
        otlp.decode_spans(payload)
    assert caught.value.reason in ("too_deep", "malformed_otlp")


def test_deep_json_in_captured_arguments_is_dropped_not_passed_on() -> None:
    deep_args = "[" * 70 + "]" * 70
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "0" * 31 + "1", "spanId": "0" * 15 + "1", "name": "execute_tool t",
         "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                        {"key": "gen_ai.tool.name", "value": {"stringValue": "t"}},
                        {"key": "gen_ai.tool.call.arguments", "value": {"stringValue": deep_args}}]}]}]}]}
    events = events_of(json.dumps(doc).encode())
    assert events[0].args["otel.args_dropped"] == "nested too deep"


def test_oversized_names_and_content_are_bounded() -> None:
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "0" * 31 + "1", "spanId": "0" * 15 + "1", "name": "execute_tool",
         "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                        {"key": "gen_ai.tool.name", "value": {"stringValue": "t" * 5000}},
                        {"key": "gen_ai.conversation.id", "value": {"stringValue": "c" * 5000}},
                        {"key": "gen_ai.tool.call.arguments", "value": {"stringValue": "a" * 100_000}}]}]}]}]}
    events = events_of(json.dumps(doc).encode())  # decode_agent_event accepted them
    assert len(events[0].tool) == 256 and len(events[0].session) <= 256
    assert len(events[0].args.encode()) <= CONFIG.max_content_bytes


def test_decoding_only_the_wanted_attributes_maps_to_the_same_events() -> None:
    from streamguard.otel.mapping import span_filter

    def attr(key: str, value: str) -> dict[str, Any]:
        return {"key": key, "value": {"stringValue": value}}

    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "0" * 31 + "1", "spanId": "0" * 15 + "1", "name": "execute_tool t",
         "attributes": [attr("gen_ai.operation.name", "execute_tool"), attr("gen_ai.tool.name", "t"),
                        attr("gen_ai.conversation.id", "c"), attr("http.url", "https://x"),
                        attr("gen_ai.input.messages", "[]"),
                        {"key": "deep", "value": _deep(80)}]}]}]}]}  # never read: never refused
    payload = json.dumps(doc).encode()
    wanted = otlp.decode_spans(payload, "auto", span_filter(CONFIG))
    assert set(wanted[0].attrs) == {"gen_ai.operation.name", "gen_ai.tool.name", "gen_ai.conversation.id"}
    del doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"][-1]
    everything = otlp.decode_spans(json.dumps(doc).encode())
    assert map_spans(everything, CONFIG) == map_spans(wanted, CONFIG)
    spans = sdk_spans("conv-f", LOOP[:3])
    for payload in (spans_proto(spans), spans_json(spans)):
        assert map_spans(otlp.decode_spans(payload), CONFIG) == map_spans(
            otlp.decode_spans(payload, "auto", span_filter(CONFIG)), CONFIG
        )


def test_session_records_group_a_payload_by_session_and_read_the_older_shape() -> None:
    from streamguard.otel.records import decode_session_record, session_records

    spans = sdk_spans("conv-a", LOOP[:2]) + sdk_spans("conv-b", SWEEP[:2])
    result = map_spans(otlp.decode_spans(spans_proto(spans)), CONFIG, TraceSessions())
    records = session_records(result.mapped)
    assert [session for session, _ in records] == ["conv-a", "conv-b"]
    for session, value in records:
        entries = decode_session_record(value)
        mine = [m for m in result.mapped if m.session == session]
        assert [key for key, _ in entries] == [m.key for m in mine]
    single = msgspec.msgpack.encode(("k", [(1, 2, b'{"type":"text"}')]))  # one span a record
    assert decode_session_record(single) == [("k", [(1, 2, b'{"type":"text"}')])]
    with pytest.raises(msgspec.DecodeError):
        decode_session_record(b"\x01 not a session record")


def test_a_sibling_joins_its_trace_even_when_the_trace_is_no_session_key() -> None:
    """Without `trace` among the keys, a span alone is no session; a span whose trace a
    sibling named is that sibling's session, as with it."""
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "0" * 31 + "1", "spanId": "0" * 15 + "1", "name": "execute_tool x",
         "startTimeUnixNano": "1000", "endTimeUnixNano": "2000",
         "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                        {"key": "gen_ai.tool.name", "value": {"stringValue": "x"}}]},
        {"traceId": "0" * 31 + "1", "spanId": "0" * 15 + "2", "name": "invoke_agent",
         "startTimeUnixNano": "500", "endTimeUnixNano": "3000",
         "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}},
                        {"key": "gen_ai.conversation.id", "value": {"stringValue": "conv-9"}}]},
        {"traceId": "0" * 31 + "2", "spanId": "0" * 15 + "3", "name": "execute_tool y",
         "startTimeUnixNano": "1000", "endTimeUnixNano": "2000",
         "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                        {"key": "gen_ai.tool.name", "value": {"stringValue": "y"}}]},
    ]}]}]}
    config = MappingConfig(session_keys=("gen_ai.conversation.id", "session.id"))
    payload = json.dumps(doc).encode()
    events = events_of(payload, config)
    assert [(type(e).__name__, e.session) for e in events] == [
        ("ToolCall", "conv-9"), ("ToolResult", "conv-9"), ("TurnEnd", "conv-9")]
    result = map_spans(otlp.decode_spans(payload), config, TraceSessions())
    assert result.ignored == {"no_session": 1}  # the lone span of the other trace


def _openinference_tool(span: int, hidden: bool) -> dict[str, Any]:
    def kv(key: str, value: str) -> dict[str, Any]:
        return {"key": key, "value": {"stringValue": value}}

    return {"traceId": "0" * 31 + "1", "spanId": f"{span:016x}", "name": "read_file",
            "startTimeUnixNano": str(1000 * span), "endTimeUnixNano": str(1000 * span + 500),
            "attributes": [kv("openinference.span.kind", "TOOL"), kv("tool.name", "read_file"),
                           kv("session.id", "oi-2"),
                           kv("input.value", "__REDACTED__" if hidden else f'{{"path": "f{span}.py"}}'),
                           kv("output.value", "__REDACTED__" if hidden else f"text of f{span}")]}


def test_content_openinference_hides_is_not_captured_content() -> None:
    """OPENINFERENCE_HIDE_INPUTS/OUTPUTS write "__REDACTED__" in place of the content:
    six reads of six files are six calls, not one call six times."""
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [_openinference_tool(n, True) for n in range(1, 7)]}]}]}
    events = events_of(json.dumps(doc).encode())
    calls = [e for e in events if type(e).__name__ == "ToolCall"]
    assert len({json.dumps(c.args) for c in calls}) == 6
    assert all("__REDACTED__" not in json.dumps(e.args if hasattr(e, "args") else getattr(e, "result", None))
               for e in events)
    assert not [o for o in outputs_of(events) if getattr(o, "severity", None) == "critical"]
    llm = {"traceId": "0" * 31 + "1", "spanId": "0" * 15 + "9", "name": "llm",
           "startTimeUnixNano": "9000", "endTimeUnixNano": "9500",
           "attributes": [{"key": "openinference.span.kind", "value": {"stringValue": "LLM"}},
                          {"key": "session.id", "value": {"stringValue": "oi-2"}},
                          {"key": "output.value", "value": {"stringValue": "__REDACTED__"}}]}
    texts = [e for e in events_of(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [llm]}]}]}).encode())
             if type(e).__name__ == "Text"]
    assert not [t for t in texts if t.text == "__REDACTED__"]


def test_contents_cut_to_the_bound_stay_distinct_when_their_middles_differ() -> None:
    """A large file written again with one function changed: its two ends are the same,
    and without a digest of the whole the two writes were one call twice."""
    def write(span: int, middle: str) -> dict[str, Any]:
        content = "x" * 24_000 + middle + "y" * 24_000
        return {"traceId": "0" * 31 + "1", "spanId": f"{span:016x}", "name": "execute_tool write_file",
                "startTimeUnixNano": str(1000 * span), "endTimeUnixNano": str(1000 * span + 500),
                "attributes": [
                    {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                    {"key": "gen_ai.tool.name", "value": {"stringValue": "write_file"}},
                    {"key": "gen_ai.conversation.id", "value": {"stringValue": "c-big"}},
                    {"key": "gen_ai.tool.call.arguments",
                     "value": {"stringValue": json.dumps({"path": "big.py", "content": content})}}]}

    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [write(n, f"def f{n}(): pass") for n in range(1, 6)]}]}]}
    calls = [e for e in events_of(json.dumps(doc).encode()) if type(e).__name__ == "ToolCall"]
    assert len(calls) == 5 and len({c.args for c in calls}) == 5
    assert all(len(c.args.encode()) <= CONFIG.max_content_bytes for c in calls)


def test_openinference_messages_of_several_parts_are_the_models_text() -> None:
    """The OpenAI Agents SDK's Responses, through OpenInference: the text sits in the
    parts of a message, and output.value holds the whole Response as JSON."""
    def kv(key: str, value: Any) -> dict[str, Any]:
        if isinstance(value, int):
            return {"key": key, "value": {"intValue": str(value)}}
        return {"key": key, "value": {"stringValue": value}}

    parts = "llm.output_messages.0.message.contents"
    span = {"traceId": "0" * 31 + "1", "spanId": "0" * 15 + "1", "name": "response",
            "startTimeUnixNano": "1000", "endTimeUnixNano": "2000",
            "attributes": [kv("openinference.span.kind", "LLM"), kv("llm.model_name", "gpt-4o"),
                           kv("session.id", "oi-3"), kv("llm.token_count.prompt", 500),
                           kv("llm.token_count.completion", 7),
                           kv("llm.output_messages.0.message.role", "assistant"),
                           kv(f"{parts}.0.message_content.type", "text"),
                           kv(f"{parts}.0.message_content.text", "The build is green now."),
                           kv(f"{parts}.1.message_content.text", "Shall I merge?"),
                           kv("output.value", json.dumps({"id": "resp_1", "output": [{"type": "message"}]}))]}
    events = events_of(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode())
    assert [e.text for e in events if type(e).__name__ == "Text"] == ["The build is green now.\nShall I merge?"]
