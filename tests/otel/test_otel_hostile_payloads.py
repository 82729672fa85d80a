"""Payloads built to hurt the bridge: each fails alone, costs little, and moves no other
session.

A Collector's batch mixes the spans of many agents in one payload; a span that no rule
foresaw must not take its neighbours to the dead-letter topic, a payload must not
become a sessions-topic record a broker refuses, and ids, containers and the trace
memory are bounded whatever a producer sends.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from streamguard.events import decode_agent_event
from streamguard.otel import otlp
from streamguard.otel.direct import log_session_records, span_session_records
from streamguard.otel.mapping import MappingConfig, TraceSessions, map_logs, map_spans, span_filter
from streamguard.otel.otlp import LogRecordView, OtlpError, SpanRecord
from streamguard.otel.records import MAX_RECORD_BYTES, decode_session_record, session_records
from streamguard.otel.window import ReorderWindow

CONFIG = MappingConfig()
T0 = 1_760_000_000 * 10**9


def kv(key: str, value: dict[str, Any]) -> dict[str, Any]:
    return {"key": key, "value": value}


def text(value: str) -> dict[str, Any]:
    return {"stringValue": value}


def json_span(i: int, attributes: list[dict[str, Any]], trace: str | None = None) -> dict[str, Any]:
    return {
        "traceId": trace or f"{i:032x}", "spanId": f"{i:016x}",
        "startTimeUnixNano": str(T0 + i), "endTimeUnixNano": str(T0 + i + 1000),
        "attributes": attributes,
    }


def tool_attrs(conversation: str, tool: str = "read_file") -> list[dict[str, Any]]:
    return [
        kv("gen_ai.operation.name", text("execute_tool")), kv("gen_ai.tool.name", text(tool)),
        kv("gen_ai.tool.call.id", text(f"call-{conversation}")),
        kv("gen_ai.conversation.id", text(conversation)), kv("gen_ai.agent.name", text("agent")),
    ]


def payload(spans: list[dict[str, Any]]) -> bytes:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).encode()


def stage1(data: bytes) -> Any:
    return span_session_records(otlp.decode_spans(data, "auto", span_filter(CONFIG)), CONFIG, TraceSessions())


def sessions_of(batch: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for session, value in batch.records:
        counts[session] = counts.get(session, 0) + sum(len(items) for _, items in decode_session_record(value))
    return counts


@pytest.mark.parametrize(
    "bad",
    [
        # an operation name that is a list (any SDK's set_attribute may send one)
        [kv("gen_ai.operation.name", {"arrayValue": {"values": [text("chat")]}})],
        [kv("gen_ai.operation.name", {"kvlistValue": {"values": []}}), *tool_attrs("odd")[1:]],
        # a cost of 400 digits: no float holds it
        [kv("gen_ai.operation.name", text("chat")), kv("gen_ai.request.model", text("m")),
         kv("gen_ai.usage.input_tokens", {"intValue": "10"}),
         kv("gen_ai.usage.cost", {"intValue": "9" * 400}), kv("gen_ai.conversation.id", text("odd"))],
    ],
)
def test_one_odd_span_leaves_its_neighbours_mapped(bad: list[dict[str, Any]]) -> None:
    data = payload([json_span(1, tool_attrs("victim-1")), json_span(2, bad), json_span(3, tool_attrs("victim-2"))])
    batch = stage1(data)
    assert sessions_of(batch).get("victim-1") == 2 and sessions_of(batch).get("victim-2") == 2
    assert "mapping_error" not in batch.ignored  # each case is handled, not merely contained
    # the reference mapping agrees
    spans = otlp.decode_spans(data, "auto", span_filter(CONFIG))
    reference = map_spans(spans, CONFIG, TraceSessions())
    assert session_records(reference.mapped) == batch.records


def test_a_failure_no_rule_foresaw_is_the_spans_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    from streamguard.otel import direct

    real = direct._tool_items

    def fails_for_one(span: SpanRecord, *args: Any) -> Any:
        if span.attrs.get("gen_ai.conversation.id") == "boom":
            raise RuntimeError("a rule that was never written")
        return real(span, *args)

    monkeypatch.setattr(direct, "_tool_items", fails_for_one)
    batch = stage1(payload([json_span(1, tool_attrs("boom")), json_span(2, tool_attrs("fine"))]))
    assert sessions_of(batch) == {"fine": 2}
    assert batch.ignored == {"mapping_error": 1}


@pytest.mark.parametrize("stamp", ["9999-12-31T23:59:59+00:00", "0001-01-01T00:00:00+00:00"])
def test_a_log_stamped_beyond_any_time_is_mapped_at_its_observed_time(stamp: str) -> None:
    record = LogRecordView(
        time_ns=0, observed_ns=T0, event_name="claude_code.api_request", body=None,
        attrs={"session.id": "s", "event.timestamp": stamp, "model": "m", "input_tokens": 10,
               "cost_usd": "1e999"},
        resource={"service.name": "claude-code"}, trace_id="", span_id="",
    )
    batch = log_session_records([record], CONFIG)
    [(session, value)] = batch.records
    [(_, items)] = decode_session_record(value)
    assert session == "s" and items[0][0] == T0
    usage = decode_agent_event(items[0][2])
    assert usage.cost_usd is None  # infinity is no cost
    assert map_logs([record], CONFIG).ignored == {}


def test_ids_of_the_wrong_length_are_absent() -> None:
    from opentelemetry.proto.trace.v1 import trace_pb2

    huge = b"\x07" * 1000
    span = trace_pb2.Span(trace_id=huge, span_id=huge[:8], parent_span_id=huge, name="x",
                          start_time_unix_nano=T0, end_time_unix_nano=T0 + 1)
    data = trace_pb2.TracesData(
        resource_spans=[trace_pb2.ResourceSpans(scope_spans=[trace_pb2.ScopeSpans(spans=[span])])]
    ).SerializeToString()
    [record] = otlp.decode_spans(data, "otlp_proto")
    assert (record.trace_id, record.span_id, record.parent_span_id) == ("", "07" * 8, "")
    # OTLP/JSON: hex of the wrong length, or base64 of the wrong size, is no id either
    doc = payload([{"traceId": "ab" * 500, "spanId": "AQEBAQEBAQE=", "parentSpanId": "abcd"}])
    [record] = otlp.decode_spans(doc, "otlp_json")
    assert (record.trace_id, record.span_id, record.parent_span_id) == ("", "0101010101010101", "")
    # without a conversation, a span with no trace id has no session: never a
    # 2,000-character one
    tool = [a for a in tool_attrs("x") if a["key"] != "gen_ai.conversation.id"]
    batch = stage1(payload([{**json_span(1, tool), "traceId": "ab" * 500}]))
    assert batch.records == [] and batch.ignored == {"no_session": 1}


@pytest.mark.parametrize("encoding", ["otlp_proto", "otlp_json"])
def test_millions_of_empty_containers_are_refused_before_they_are_walked(encoding: str) -> None:
    count = otlp.MAX_RECORDS_PER_PAYLOAD + 1
    data = b"\x0a\x00" * count if encoding == "otlp_proto" else json.dumps({"resourceSpans": [{}] * count}).encode()
    with pytest.raises(OtlpError) as refused:
        otlp.decode_spans(data, encoding)
    assert refused.value.reason == "too_large"
    scopes = json.dumps({"resourceSpans": [{"scopeSpans": [{}] * count}]}).encode()
    with pytest.raises(OtlpError):
        otlp.decode_spans(scopes, "otlp_json")
    logs = json.dumps({"resourceLogs": [{}] * count}).encode()
    with pytest.raises(OtlpError):
        otlp.decode_logs(logs, "otlp_json")


def test_a_sessions_record_is_split_before_a_broker_would_refuse_it() -> None:
    spans = []
    for i in range(1500):
        attrs = [*tool_attrs("big"), kv("gen_ai.tool.call.result", text(f"{i:04d}" + "x" * 1000))]
        spans.append(json_span(i + 1, attrs, trace=f"{1:032x}"))
    batch = stage1(payload(spans))
    assert len(batch.records) > 2
    assert all(session == "big" for session, _ in batch.records)
    assert all(len(value) <= MAX_RECORD_BYTES + 4096 for _, value in batch.records)
    # every span once, in payload order, across the records
    keys = [key for _, value in batch.records for key, _ in decode_session_record(value)]
    assert keys == [f"{1:032x}:{i + 1:016x}" for i in range(1500)]
    # and the window orders them as one record would have been
    window = ReorderWindow(window_s=0.0)
    released = []
    for offset, (session, value) in enumerate(batch.records):
        released += window.add_entries(session, decode_session_record(value), offset, 0.0)
    released += window.release(0.0)
    assert [r.seq for r in released] == list(range(1, 3001))
    assert window.stats.late == 0


def test_a_payload_names_its_traces_sessions_before_any_earlier_claim() -> None:
    trace = f"{9:032x}"
    memory = TraceSessions()
    # an earlier payload (anyone's) claims the trace with a span that is no GenAI span
    earlier = payload([json_span(1, [kv("gen_ai.conversation.id", text("claimed"))], trace=trace)])
    span_session_records(otlp.decode_spans(earlier, "auto", span_filter(CONFIG)), CONFIG, memory)
    # this payload's agent span names the conversation; its tool span names none
    agent = [kv("gen_ai.operation.name", text("invoke_agent")), kv("gen_ai.conversation.id", text("mine")),
             kv("gen_ai.agent.name", text("agent"))]
    tool = [a for a in tool_attrs("mine") if a["key"] != "gen_ai.conversation.id"]
    data = payload([json_span(2, agent, trace=trace), json_span(3, tool, trace=trace)])
    spans = otlp.decode_spans(data, "auto", span_filter(CONFIG))
    fast = span_session_records(spans, CONFIG, memory)
    assert set(sessions_of(fast)) == {"mine"}
    assert session_records(map_spans(spans, CONFIG, TraceSessions()).mapped) == fast.records
    # a tool span alone, in a later payload, still joins the trace's remembered session
    alone = span_session_records(
        otlp.decode_spans(payload([json_span(4, tool, trace=trace)]), "auto", span_filter(CONFIG)), CONFIG, memory
    )
    assert set(sessions_of(alone)) == {"claimed"}


def test_a_full_window_forgets_only_what_it_must() -> None:
    window = ReorderWindow(window_s=10.0, max_sessions=50)
    for i in range(50):
        window.add(f"s{i}", f"k{i}", [(T0 + i, 1, b'{"type":"text"}')], i, float(i))
    window.release(100.0)  # everything released: all 50 idle
    window.add("busy", "kb", [(T0, 1, b'{"type":"text"}')], 50, 100.0)  # 51: one over
    assert "s0" not in window.sessions and "s1" in window.sessions
    for i in range(5):  # five more arriving: the five least recently active go
        window.add(f"new{i}", f"kn{i}", [(T0, 1, b'{"type":"text"}')], 51 + i, 101.0)
    assert len(window.sessions) == 50
    assert [s for s in ("s1", "s2", "s3", "s4", "s5", "s6") if s in window.sessions] == ["s6"]
    assert "busy" in window.sessions  # pending events are never forgotten
    assert window.stats.evicted == 6


def _proto_with_first_resource_of(size: int) -> bytes:
    """A protobuf TracesData whose first ResourceSpans is ``size`` bytes long."""
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue
    from opentelemetry.proto.trace.v1 import trace_pb2

    for pad in range(200):
        data = trace_pb2.TracesData()
        spans = data.resource_spans.add().scope_spans.add()
        span = spans.spans.add(
            trace_id=bytes(range(16)), span_id=bytes(range(8)),
            start_time_unix_nano=T0, end_time_unix_nano=T0 + 1000,
        )
        for key, value in (("gen_ai.tool.name", "read"), ("gen_ai.tool.call.id", "c" * (1 + pad))):
            span.attributes.add(key=key, value=AnyValue(string_value=value))
        if data.resource_spans[0].ByteSize() == size:
            return data.SerializeToString()
    raise AssertionError(f"no payload with a first resource of {size} bytes")


def test_a_protobuf_payload_that_starts_like_json_is_read_as_protobuf() -> None:
    """Field 1's tag byte is a line feed, and a first resource of 123 bytes has the
    length byte ``{``: the payload starts as JSON may. JSON cannot read it; protobuf
    can, and the bridge maps it whichever way the spans topic is read."""
    from streamguard.otel.bridge import Bridge
    from streamguard.otel.config import BridgeConfig

    data = _proto_with_first_resource_of(123)
    assert data[:2] == b"\n{" and otlp.sniff(data) == "otlp_json"
    assert len(otlp.decode_spans(data, "auto")) == 1
    bridge = Bridge(BridgeConfig.build({}))
    assert bridge.map_payload(bridge.config.spans_topic, data).mapped == 1
    # told it is JSON, it is not read as anything else
    with pytest.raises(OtlpError):
        otlp.decode_spans(data, "otlp_json")


def test_json_after_any_run_of_whitespace_is_json() -> None:
    data = b"\n" + b" " * 100 + payload([json_span(1, tool_attrs("c1"))])
    assert otlp.sniff(data) == "otlp_json"
    assert sessions_of(stage1(data)) == {"c1": 2}


def test_a_record_header_names_the_encoding_over_the_configured_one() -> None:
    """The receiver forwards each body with the encoding its Content-Type named: a
    bridge configured for protobuf reads a JSON body the receiver took."""
    from streamguard.otel.bridge import Bridge
    from streamguard.otel.config import BridgeConfig

    bridge = Bridge(BridgeConfig.build({"otlp_encoding": "otlp_proto"}))
    topic = bridge.config.spans_topic
    data = payload([json_span(1, tool_attrs("c1"))])
    with pytest.raises(OtlpError):
        bridge.map_payload(topic, data)
    assert bridge.map_payload(topic, data, "otlp_json").mapped == 1
