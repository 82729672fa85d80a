"""Stage 1 straight from OTLP/JSON (:mod:`streamguard.otel.direct_json`) against the
reference: ``decode_spans`` then ``span_session_records``.

Both must write the same records byte for byte, count the same spans out for the same
reasons, teach the trace memory the same sessions, and fail a payload that is not OTLP
with the same reason and message, whatever its spans carry and however the JSON
writes it (ids in upper case or base64, times and counts as numbers or strings,
status codes by name, values of every shape, keys twice, span events).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamguard.otel import direct_json, otlp
from streamguard.otel.direct import span_session_records
from streamguard.otel.direct_json import json_span_session_records
from streamguard.otel.mapping import MappingConfig, TraceSessions, span_filter
from streamguard.otel.otlp import OtlpError, SpanRecord

from .test_otel_direct import spans

CONFIGS = [
    MappingConfig(),
    MappingConfig(max_content_bytes=64),
    MappingConfig(session_keys=("session.id",)),
    MappingConfig(session_keys=("gen_ai.conversation.id", "session.id")),  # siblings join, no trace
    MappingConfig(session_keys=("session.id", "gen_ai.conversation.id", "trace")),
    MappingConfig(session_keys=("trace",)),  # no attribute first: the reference reads all
    MappingConfig(session_keys=("gen_ai.agent.name", "trace")),  # a slot as the session
    # session attributes the mapping also reads otherwise, later and first
    MappingConfig(session_keys=("gen_ai.conversation.id", "error.type", "input.value", "trace")),
    MappingConfig(session_keys=("gen_ai.conversation.id", "gen_ai.usage.cache_read.input_tokens")),
    MappingConfig(session_keys=("gen_ai.conversation.id", "gen_ai.completion.0.content", "output.value")),
    MappingConfig(session_keys=("gen_ai.usage.cache_read.input_tokens", "trace")),
    MappingConfig(session_keys=("gen_ai.output.messages", "gen_ai.conversation.id")),
    MappingConfig(session_keys=("gen_ai.conversation.id", "gen_ai.system", "custom.session")),
]

Outcome = tuple[Any, ...]


def any_value(draw: st.DrawFn, value: Any) -> Any:
    """``value`` as OTLP/JSON writes an AnyValue, in one of the ways writers do."""
    if value is None:
        return draw(st.sampled_from([None, {}]))
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            return {"stringValue": str(value)}
        return {"intValue": draw(st.sampled_from([str(value), value]))}
    if isinstance(value, float):
        return {"doubleValue": value if value == value else "NaN"}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, bytes):
        return {"bytesValue": base64.b64encode(value).decode()}
    if isinstance(value, list):
        return {"arrayValue": {"values": [any_value(draw, v) for v in value]}}
    return {"kvlistValue": {"values": [{"key": k, "value": any_value(draw, v)} for k, v in value.items()]}}


ODD_VALUES = st.sampled_from([
    {"intValue": "12a"},  # not a number: the payload is malformed
    {"intValue": "9" * 30},  # a number longer than any count
    {"stringValue": "x", "intValue": "3"},  # a string first, as the reference reads it
    {"boolValue": True, "intValue": "3"},
    {"doubleValue": "1.5"},
    {"arrayValue": {"values": [None]}},
    {"arrayValue": {"values": [{"stringValue": "stop"}, {"stringValue": "length"}]}},
    {"arrayValue": {}},
    {"bytesValue": "%%%"},
])


@st.composite
def json_span(draw: st.DrawFn) -> dict[str, Any]:
    span: SpanRecord = draw(spans())
    attributes = [{"key": k, "value": any_value(draw, v)} for k, v in span.attrs.items()]
    if draw(st.integers(0, 9)) == 0:  # a key of the slots, or any, with an odd value
        key = draw(st.sampled_from([*span.attrs, "gen_ai.usage.input_tokens", "gen_ai.tool.name"]))
        attributes.insert(draw(st.integers(0, len(attributes))), {"key": key, "value": draw(ODD_VALUES)})
    if draw(st.integers(0, 9)) == 0 and attributes:  # a key twice: the last one counts
        attributes.append(dict(draw(st.sampled_from(attributes))))
    if draw(st.integers(0, 4)) == 0:  # attributes the mapping never reads
        attributes.insert(0, {"key": "http.method", "value": {"stringValue": "GET"}})
    if draw(st.integers(0, 19)) == 0:
        attributes.append({"key": "gen_ai.tool.name", "value": None})

    def an_id(hex_id: str) -> Any:
        way = draw(st.integers(0, 19))
        if not hex_id or way < 15:
            return hex_id
        if way < 17:
            return hex_id.upper()
        if way < 18:
            return base64.b64encode(bytes.fromhex(hex_id)).decode()
        return draw(st.sampled_from(["abc", "zz" * 8, "0" * 40]))

    def a_time(ns: int) -> Any:
        way = draw(st.integers(0, 29))
        if way < 14:
            return str(ns)
        if way < 28:
            return ns
        return draw(st.sampled_from(["-5", "1e9", "x", str(2**64), " 12"]))

    document: dict[str, Any] = {
        "traceId": an_id(span.trace_id),
        "spanId": an_id(span.span_id),
        "name": span.name,
        "startTimeUnixNano": a_time(span.start_ns),
        "endTimeUnixNano": a_time(span.end_ns),
        "attributes": attributes,
    }
    if span.parent_span_id or draw(st.booleans()):
        document["parentSpanId"] = an_id(span.parent_span_id)
    if span.status_code or span.status_message or draw(st.booleans()):
        names = {0: "STATUS_CODE_UNSET", 1: "STATUS_CODE_OK", 2: "STATUS_CODE_ERROR"}
        code = draw(st.sampled_from([span.status_code, names[span.status_code]]))
        document["status"] = {"code": code, "message": span.status_message}
    events = [
        {"name": e.name, "timeUnixNano": str(e.time_ns), "attributes": [
            {"key": k, "value": any_value(draw, v)} for k, v in e.attrs.items()
        ]}
        for e in span.events
    ]
    if draw(st.integers(0, 9)) == 0:
        events.append({"name": "exception", "timeUnixNano": "5", "attributes": []})
    if events:
        document["events"] = events
    return document


def string(value: str) -> dict[str, Any]:
    return {"stringValue": value}


def count(value: int) -> dict[str, Any]:
    return {"intValue": str(value)}


def reasons(*values: str) -> dict[str, Any]:
    return {"arrayValue": {"values": [string(v) for v in values]}}


# One change to a common span each: what would make the reference take another branch,
# or make its decode fail, next to what would not.
NEAR_MISSES: list[tuple[str, Any]] = [
    ("status", {"code": 2, "message": "boom"}),
    ("status", {"code": "STATUS_CODE_ERROR"}),
    ("status", {"code": "STATUS_CODE_OK"}),
    ("status", {"code": 1}),
    ("attr", ("error.type", string("Timeout"))),
    ("attr", ("input.value", string("{}"))),
    ("attr", ("output.value", string("out"))),
    ("attr", ("gen_ai.usage.cost", {"doubleValue": 0.5})),
    ("attr", ("gen_ai.usage.cache_read.input_tokens", count(3))),
    ("attr", ("gen_ai.completion.0.content", string("hi"))),
    ("attr", ("session.id", string("other"))),
    ("attr", ("service.name", string("svc-2"))),
    ("attr", ("http.method", string("GET"))),
    ("attr", ("gen_ai.system", string("openai"))),
    ("attr", ("gen_ai.system", None)),
    ("attr", ("gen_ai.system", count(3))),
    ("attr", ("gen_ai.system", {"doubleValue": "x"})),
    ("attr", ("session.id", count(3))),
    ("attr", ("message", {"arrayValue": {"values": [string("m")]}})),
    ("attr", ("event.name", string("e"))),
    ("attr", ("gen_ai.tool.name", None)),
    ("attr", ("gen_ai.tool.name", {})),
    ("attr", ("gen_ai.tool.name", count(5))),
    ("attr", ("gen_ai.tool.name", string(""))),
    ("attr", ("gen_ai.tool.name", string("t" * 257))),
    ("attr", ("gen_ai.tool.call.id", {"boolValue": True})),
    ("attr", ("gen_ai.conversation.id", string(""))),
    ("attr", ("gen_ai.conversation.id", count(9))),
    ("drop", "gen_ai.conversation.id"),
    ("drop", "gen_ai.agent.name"),
    ("attr", ("gen_ai.agent.name", string(""))),
    ("attr", ("gen_ai.agent.name", {"doubleValue": 1.5})),
    ("drop", "gen_ai.operation.name"),
    ("attr", ("gen_ai.operation.name", string("invoke_agent"))),
    ("attr", ("gen_ai.operation.name", string("text_completion"))),
    ("attr", ("gen_ai.operation.name", {"arrayValue": {"values": []}})),
    ("attr", ("gen_ai.tool.call.arguments", string("a" * 16))),
    ("attr", ("gen_ai.tool.call.arguments", string("a" * 17))),
    ("attr", ("gen_ai.tool.call.arguments", string("["))),
    ("attr", ("gen_ai.tool.call.arguments", string("{" * 65))),
    ("attr", ("gen_ai.tool.call.arguments", string("{" * 64))),
    ("attr", ("gen_ai.tool.call.arguments", string(""))),
    ("attr", ("gen_ai.tool.call.arguments", string("a" * 65))),  # past the small bound: cut
    ("attr", ("gen_ai.tool.call.arguments", string("é" * 33))),  # 66 bytes
    ("attr", ("gen_ai.tool.call.arguments", {"kvlistValue": {"values": [{"key": "p", "value": count(1)}]}})),
    ("drop", "gen_ai.tool.call.arguments"),
    ("attr", ("gen_ai.tool.call.result", string("r" * 17))),
    ("attr", ("gen_ai.tool.call.result", string("[" * 40 + "{" * 30))),
    ("drop", "gen_ai.tool.call.result"),
    ("attr", ("gen_ai.tool.call.result", string("r" * 65))),
    ("attr", ("gen_ai.tool.call.result", {"arrayValue": {"values": [string("x")]}})),
    ("attr", ("gen_ai.usage.input_tokens", {"intValue": 12})),
    ("attr", ("gen_ai.usage.input_tokens", {"intValue": "-3"})),
    ("attr", ("gen_ai.usage.input_tokens", {"intValue": str(2**40)})),
    ("attr", ("gen_ai.usage.input_tokens", {"intValue": str(2**40 + 1)})),
    ("attr", ("gen_ai.usage.input_tokens", {"intValue": "9" * 19})),
    ("attr", ("gen_ai.usage.input_tokens", {"intValue": "9" * 30})),
    ("attr", ("gen_ai.usage.input_tokens", {"intValue": "9" * 5000})),  # past int()'s digits
    ("attr", ("gen_ai.usage.input_tokens", string("12"))),
    ("attr", ("gen_ai.usage.input_tokens", {"doubleValue": 12.0})),
    ("attr", ("gen_ai.usage.input_tokens", {"boolValue": True, "intValue": "1"})),
    ("attr", ("gen_ai.usage.output_tokens", count(0))),
    ("drop", "gen_ai.usage.output_tokens"),
    ("attr", ("gen_ai.response.finish_reasons", reasons("stop", "length"))),
    ("attr", ("gen_ai.response.finish_reasons", reasons())),
    ("attr", ("gen_ai.response.finish_reasons", reasons("END_TURN"))),
    ("attr", ("gen_ai.response.finish_reasons", string("stop"))),
    ("attr", ("gen_ai.response.finish_reasons", {"arrayValue": {"values": [None]}})),
    ("attr", ("gen_ai.response.finish_reasons", {"arrayValue": {"values": [count(3)]}})),
    ("attr", ("gen_ai.response.finish_reasons", {"intValue": "1", "arrayValue": {"values": [string("stop")]}})),
    ("attr", ("gen_ai.response.finish_reasons", {"doubleValue": 1.0, "arrayValue": {"values": [string("stop")]}})),
    ("attr", ("gen_ai.response.finish_reasons", {"boolValue": False, "arrayValue": {"values": [string("stop")]}})),
    ("drop", "gen_ai.response.finish_reasons"),
    ("attr", ("gen_ai.response.model", string("m-2025"))),
    ("attr", ("gen_ai.response.model", count(3))),
    ("drop", "gen_ai.request.model"),
    ("dup", "gen_ai.tool.name"),
    ("dup", "gen_ai.usage.input_tokens"),
    ("span", ("spanId", "ABCDEF0123456789")),
    ("span", ("spanId", "q83vASNFZ4k=")),  # base64 of 8 bytes
    ("span", ("spanId", "")),
    ("span", ("parentSpanId", "0101010101010101")),
    ("span", ("parentSpanId", "ZZ01010101010101")),
    ("span", ("traceId", "")),
    ("span", ("traceId", "0" * 31 + "A")),
    ("span", ("startTimeUnixNano", 1_760_000_000 * 10**9)),
    ("span", ("startTimeUnixNano", "0")),
    ("span", ("startTimeUnixNano", str(2**64))),
    ("span", ("startTimeUnixNano", str(10**12 * 10**9))),
    ("span", ("endTimeUnixNano", 0)),
    ("span", ("endTimeUnixNano", -1)),
    ("span", ("startTimeUnixNano", -(2**63))),
    ("span", ("endTimeUnixNano", 2**64 - 1)),
    ("span", ("endTimeUnixNano", "-1")),
    ("events", [{"name": "gen_ai.choice", "timeUnixNano": "5", "attributes": [
        {"key": "message", "value": string('{"role": "assistant", "content": "ev"}')}]}]),
    ("events", [{"name": "exception", "timeUnixNano": "5", "attributes": []}]),
]


# Changes that make the reference decode fail the whole payload.
FAILURES: list[tuple[str, Any]] = [
    ("attr", ("gen_ai.usage.input_tokens", {"intValue": "12a"})),
    ("span", ("spanId", "abc")),
    ("span", ("spanId", "not hex at all!!")),
    ("span", ("parentSpanId", "ab")),
    ("span", ("traceId", "xyz")),
    ("span", ("endTimeUnixNano", "soon")),
]


def apply(span: dict[str, Any], attributes: dict[str, Any], changes: list[tuple[str, Any]]) -> dict[str, Any]:
    """``span`` with its ``attributes`` and each change made."""
    extra: list[dict[str, Any]] = []
    for kind, change in changes:
        if kind == "status":
            span["status"] = change
        elif kind == "attr":
            key, value = change
            attributes.pop(key, None)
            attributes[key] = value  # last: after the slots the span carries
        elif kind == "drop":
            attributes.pop(change, None)
        elif kind == "dup" and change in attributes:
            extra.append({"key": change, "value": string("x")})
        elif kind == "span":
            key, value = change
            span[key] = value
        elif kind == "events":
            span["events"] = change
    span["attributes"] = [{"key": k, "value": v} for k, v in attributes.items()] + extra
    return span


def tool_attributes(n: int, arguments: str = '{"path": "a"}', result: str = "ok") -> dict[str, Any]:
    return {
        "gen_ai.conversation.id": string("conv-1"), "gen_ai.agent.name": string("agent"),
        "gen_ai.operation.name": string("execute_tool"), "gen_ai.tool.name": string("read_file"),
        "gen_ai.tool.call.id": string(f"call-{n}"), "gen_ai.tool.call.arguments": string(arguments),
        "gen_ai.tool.call.result": string(result),
    }


def chat_attributes(input_tokens: int = 100, output_tokens: int = 7, reason: str = "stop") -> dict[str, Any]:
    return {
        "gen_ai.conversation.id": string("conv-1"), "gen_ai.agent.name": string("agent"),
        "gen_ai.operation.name": string("chat"), "gen_ai.request.model": string("m-1"),
        "gen_ai.usage.input_tokens": count(input_tokens), "gen_ai.usage.output_tokens": count(output_tokens),
        "gen_ai.response.finish_reasons": reasons(reason),
    }


def a_span(n: int, trace: int = 1, start: int = 1_760_000_000 * 10**9) -> dict[str, Any]:
    return {
        "traceId": f"{trace:032x}", "spanId": f"{n + 1:016x}", "name": "span",
        "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + 500_000),
    }


def payload_of(spans_: list[dict[str, Any]], resource: dict[str, Any] | None = None) -> bytes:
    attributes = [{"key": k, "value": string(v)} for k, v in (resource or {"service.name": "svc"}).items()]
    return json.dumps(
        {"resourceSpans": [{"resource": {"attributes": attributes}, "scopeSpans": [{"spans": spans_}]}]}
    ).encode()


@st.composite
def common_span(draw: st.DrawFn, n: int) -> dict[str, Any]:
    """A common tool or model span with up to two near misses."""
    if draw(st.booleans()):
        # now and then the content OpenInference writes when it hides it
        content = st.text(min_size=1, max_size=20) | st.just("__REDACTED__")
        attributes = tool_attributes(n, draw(content), draw(content))
    else:
        attributes = chat_attributes(
            draw(st.integers(0, 10_000)), draw(st.integers(0, 500)),
            draw(st.sampled_from(["stop", "tool_calls", "length"])),
        )
    conversation = draw(st.sampled_from(["conv-1", "conv-2", 'c"3']))
    attributes["gen_ai.conversation.id"] = string(conversation)
    attributes["gen_ai.agent.name"] = string(draw(st.sampled_from(["agent", "é-agent"])))
    span = a_span(n, draw(st.integers(1, 3)), 1_760_000_000 * 10**9 + draw(st.integers(0, 10**9)))
    # indices drawn evenly: a sampled_from list would favour its first entries
    changes = [
        NEAR_MISSES[draw(st.integers(0, len(NEAR_MISSES) - 1))] for _ in range(draw(st.integers(0, 2)))
    ]
    if draw(st.integers(0, 79)) == 0:
        changes.append(draw(st.sampled_from(FAILURES)))
    return apply(span, attributes, changes)


@pytest.mark.parametrize("change", NEAR_MISSES + FAILURES, ids=repr)
@pytest.mark.parametrize("kind", ["tool", "chat"])
@pytest.mark.parametrize("config", CONFIGS, ids=repr)
def test_each_near_miss_alone(change: tuple[str, Any], kind: str, config: MappingConfig) -> None:
    """Every change once, to each kind of common span, between two common spans."""
    attributes = tool_attributes(2) if kind == "tool" else chat_attributes()
    spans_ = [apply(a_span(1), tool_attributes(1), []), apply(a_span(2), attributes, [change]),
              apply(a_span(3), chat_attributes(), [])]
    for resource in ({"service.name": "svc"}, {"session.id": "res-s"}):
        data = payload_of(spans_, resource)
        mine, theirs = TraceSessions(), TraceSessions()
        assert ours(data, config, mine) == reference(data, config, theirs)
        assert list(mine._map.items()) == list(theirs._map.items())


@st.composite
def payloads(draw: st.DrawFn) -> bytes:
    """Mostly common spans with near misses; now and then one of anything."""
    resources = []
    n = 0
    for _ in range(draw(st.integers(1, 2))):
        resource = draw(st.sampled_from([
            {"service.name": "svc"}, {}, {"service.name": "svc", "session.id": "res-s"},
            {"service.name": ""}, {"service.name": 7}, {"gen_ai.conversation.id": "res-conv"},
        ]))
        scopes = []
        for _ in range(draw(st.integers(1, 2))):
            spans_: list[dict[str, Any]] = []
            for _ in range(draw(st.integers(0, 6))):
                n += 1
                spans_.append(draw(json_span() if draw(st.integers(0, 59)) == 0 else common_span(n)))
            scopes.append({"scope": {"name": "s"}, "spans": spans_})
        resources.append({
            "resource": {"attributes": [{"key": k, "value": any_value(draw, v)} for k, v in resource.items()]},
            "scopeSpans": scopes,
        })
    return json.dumps({"resourceSpans": resources}).encode()


def reference(data: bytes, config: MappingConfig, traces: TraceSessions) -> Outcome:
    try:
        spans_ = otlp.decode_spans(data, "otlp_json", span_filter(config))
    except OtlpError as exc:
        return ("error", exc.reason, str(exc))
    result = span_session_records(spans_, config, traces)
    return (result.records, result.mapped, result.ignored)


def ours(data: bytes, config: MappingConfig, traces: TraceSessions) -> Outcome:
    try:
        result = json_span_session_records(data, config, span_filter(config), traces)
    except OtlpError as exc:
        return ("error", exc.reason, str(exc))
    return (result.records, result.mapped, result.ignored)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(payloads(), min_size=1, max_size=3), config=st.sampled_from(CONFIGS))
def test_the_json_path_writes_what_the_reference_writes(batch: list[bytes], config: MappingConfig) -> None:
    mine, theirs = TraceSessions(limit=4), TraceSessions(limit=4)
    for data in batch:
        assert ours(data, config, mine) == reference(data, config, theirs)
        assert list(mine._map.items()) == list(theirs._map.items())


def common_payload() -> bytes:
    # a provider name and a second session attribute, as SDKs send them, are not read
    # on such spans: they keep them common
    neutral = [("attr", ("gen_ai.system", string("openai"))), ("attr", ("session.id", string("s")))]
    return payload_of([
        apply(a_span(1), tool_attributes(1), []),
        apply(a_span(2), chat_attributes(), neutral),
        apply(a_span(3), tool_attributes(3), neutral[:1]),
    ])


def test_common_spans_skip_the_span_records(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without this, the equivalence above would also hold if every span were read the
    reference way."""
    data = common_payload()
    config = MappingConfig()
    expected = reference(data, config, TraceSessions())
    assert expected[1] == 3

    def no_record(*args: Any) -> Any:
        raise AssertionError("a common span was read the reference way")

    monkeypatch.setattr(direct_json, "json_span_record", no_record)
    assert ours(data, config, TraceSessions()) == expected


def test_a_payload_that_fails_teaches_the_trace_memory_nothing() -> None:
    good = json.loads(common_payload())
    spans_ = good["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans_.append({**spans_[0], "spanId": "00000000000000ff", "endTimeUnixNano": "soon"})
    traces = TraceSessions()
    with pytest.raises(OtlpError) as raised:
        json_span_session_records(json.dumps(good).encode(), MappingConfig(), span_filter(MappingConfig()), traces)
    assert raised.value.reason == "malformed_otlp"
    assert len(traces) == 0


def test_the_key_memory_is_bounded() -> None:
    """Keys the mapping never reads are remembered only while few and short: a plan
    lives as long as the process."""
    config = MappingConfig()
    wanted = span_filter(config)
    span = apply(a_span(1), tool_attributes(1), [])
    span["attributes"] = [{"key": f"{n}-" + "k" * 200, "value": string("v")} for n in range(5)] + [
        {"key": f"short.{n}", "value": string("v")} for n in range(5)
    ] + span["attributes"]
    json_span_session_records(payload_of([span]), config, wanted, TraceSessions())
    remembered = direct_json._plan(wanted, config.session_keys)
    assert remembered is not None
    assert {f"short.{n}" for n in range(5)} <= remembered.classes.keys()
    assert not any(len(key) > 128 for key in remembered.classes)
