"""OTLP decoding: protobuf or OTLP/JSON bytes into plain, bounded records.

Both encodings the OpenTelemetry Collector's Kafka exporter writes
(``otlp_proto``, ``otlp_json``) and both bodies OTLP/HTTP accepts decode into
the same two record types, :class:`SpanRecord` and :class:`LogRecordView`,
whose attribute values are plain Python values (``str``, ``int``, ``float``,
``bool``, ``bytes``, lists and dicts). Everything downstream (the mapping)
reads only these.

Decoding is the trust boundary: a payload that is not OTLP raises
:class:`OtlpError` with a reason (the bridge dead-letters the record), and the
sizes of what is kept are bounded here once: attributes per span or record,
items per array, nesting of arrays and key-value lists, spans per payload. Span
and trace ids become lower-case hex, as OTLP/JSON writes them.

Protobuf decoding uses ``opentelemetry-proto`` (the ``[otel]`` extra), imported
only when a protobuf payload arrives; OTLP/JSON is decoded with msgspec Structs.
``bench/bridge.py`` measures both.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Literal

import msgspec
from msgspec import Struct

from ..events import MAX_NESTING

Encoding = Literal["otlp_proto", "otlp_json", "auto"]
OtlpErrorReason = Literal["malformed_otlp", "too_deep", "too_large", "unsupported_encoding"]

# What one decoded payload may keep. A span beyond these limits keeps the first
# items, never fails: OTLP exporters are allowed to send large but valid data.
MAX_ATTRIBUTES = 256
MAX_ARRAY_ITEMS = 1024
MAX_SPAN_EVENTS = 64
MAX_RECORDS_PER_PAYLOAD = 100_000
MAX_VALUE_DEPTH = MAX_NESTING


class OtlpError(ValueError):
    """A payload that cannot be decoded as OTLP; ``reason`` is the dead-letter reason."""

    def __init__(self, reason: OtlpErrorReason, message: str) -> None:
        super().__init__(message)
        self.reason: OtlpErrorReason = reason


class SpanEvent(Struct, gc=False):
    name: str
    time_ns: int
    attrs: dict[str, Any]


class SpanRecord(Struct, gc=False):
    """One span with its resource's attributes."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    start_ns: int
    end_ns: int
    status_code: int  # 0 unset, 1 ok, 2 error
    status_message: str
    attrs: dict[str, Any]
    resource: dict[str, Any]
    events: list[SpanEvent]


class LogRecordView(Struct, gc=False):
    """One log record with its resource's attributes."""

    time_ns: int
    observed_ns: int
    event_name: str
    body: Any
    attrs: dict[str, Any]
    resource: dict[str, Any]
    trace_id: str
    span_id: str


# --------------------------------------------------------------------------- JSON


class _JKeyValue(Struct, rename="camel"):
    key: str = ""
    value: _JAnyValue | None = None


class _JArray(Struct, rename="camel"):
    values: list[_JAnyValue] = []


class _JKvList(Struct, rename="camel"):
    values: list[_JKeyValue] = []


class _JAnyValue(Struct, rename="camel"):
    string_value: str | None = None
    bool_value: bool | None = None
    int_value: int | str | None = None
    double_value: float | int | str | None = None
    array_value: _JArray | None = None
    kvlist_value: _JKvList | None = None
    bytes_value: str | None = None


class _JResource(Struct, rename="camel"):
    attributes: list[_JKeyValue] = []


class _JStatus(Struct, rename="camel"):
    code: int | str = 0
    message: str = ""


class _JSpanEvent(Struct, rename="camel"):
    time_unix_nano: int | str = 0
    name: str = ""
    attributes: list[_JKeyValue] = []


class _JSpan(Struct, rename="camel"):
    trace_id: str = ""
    span_id: str = ""
    parent_span_id: str = ""
    name: str = ""
    start_time_unix_nano: int | str = 0
    end_time_unix_nano: int | str = 0
    attributes: list[_JKeyValue] = []
    events: list[_JSpanEvent] = []
    status: _JStatus | None = None


class _JScopeSpans(Struct, rename="camel"):
    spans: list[_JSpan] = []


class _JResourceSpans(Struct, rename="camel"):
    resource: _JResource | None = None
    scope_spans: list[_JScopeSpans] = []


class _JTracesData(Struct, rename="camel"):
    resource_spans: list[_JResourceSpans] = []


class _JLogRecord(Struct, rename="camel"):
    time_unix_nano: int | str = 0
    observed_time_unix_nano: int | str = 0
    body: _JAnyValue | None = None
    attributes: list[_JKeyValue] = []
    trace_id: str = ""
    span_id: str = ""
    event_name: str = ""


class _JScopeLogs(Struct, rename="camel"):
    log_records: list[_JLogRecord] = []


class _JResourceLogs(Struct, rename="camel"):
    resource: _JResource | None = None
    scope_logs: list[_JScopeLogs] = []


class _JLogsData(Struct, rename="camel"):
    resource_logs: list[_JResourceLogs] = []


_traces_json = msgspec.json.Decoder(_JTracesData)
_logs_json = msgspec.json.Decoder(_JLogsData)

_STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}


def _nanos(value: int | str) -> int:
    if isinstance(value, int):
        return value if 0 <= value < 2**64 else 0
    try:
        parsed = int(value)
    except ValueError:
        raise OtlpError("malformed_otlp", f"not an integer time: {value[:40]!r}") from None
    return parsed if 0 <= parsed < 2**64 else 0


def _json_id(value: str) -> str:
    """OTLP/JSON ids are hex; some writers use base64 (protobuf's JSON mapping)."""
    if not value:
        return ""
    if len(value) in (16, 32):
        try:
            int(value, 16)
            return value.lower()
        except ValueError:
            pass
    try:
        return base64.b64decode(value, validate=True).hex()
    except (binascii.Error, ValueError):
        raise OtlpError("malformed_otlp", f"id is neither hex nor base64: {value[:40]!r}") from None


def _json_value(value: _JAnyValue | None, depth: int = 0) -> Any:
    if value is None:
        return None
    if value.string_value is not None:
        return value.string_value
    if value.bool_value is not None:
        return value.bool_value
    if value.int_value is not None:
        if isinstance(value.int_value, int):
            return value.int_value
        try:
            return int(value.int_value)
        except ValueError:
            raise OtlpError("malformed_otlp", "intValue is not an integer") from None
    if value.double_value is not None:
        try:
            return float(value.double_value)
        except ValueError:
            raise OtlpError("malformed_otlp", "doubleValue is not a number") from None
    if depth >= MAX_VALUE_DEPTH:
        raise OtlpError("too_deep", f"an attribute value is nested deeper than {MAX_VALUE_DEPTH}")
    if value.array_value is not None:
        return [_json_value(v, depth + 1) for v in value.array_value.values[:MAX_ARRAY_ITEMS]]
    if value.kvlist_value is not None:
        return {
            kv.key: _json_value(kv.value, depth + 1)
            for kv in value.kvlist_value.values[:MAX_ARRAY_ITEMS]
        }
    if value.bytes_value is not None:
        try:
            return base64.b64decode(value.bytes_value)
        except (binascii.Error, ValueError):
            raise OtlpError("malformed_otlp", "bytesValue is not base64") from None
    return None


def _json_attrs(attributes: list[_JKeyValue]) -> dict[str, Any]:
    return {kv.key: _json_value(kv.value) for kv in attributes[:MAX_ATTRIBUTES]}


def _json_decode(decoder: msgspec.json.Decoder[Any], data: bytes) -> Any:
    try:
        return decoder.decode(data)
    except RecursionError:
        raise OtlpError("too_deep", "the JSON document is nested too deep") from None
    except msgspec.DecodeError as exc:
        raise OtlpError("malformed_otlp", f"not OTLP/JSON: {exc}") from None


def _spans_from_json(data: bytes) -> list[SpanRecord]:
    traces: _JTracesData = _json_decode(_traces_json, data)
    out: list[SpanRecord] = []
    for rs in traces.resource_spans:
        resource = _json_attrs(rs.resource.attributes) if rs.resource is not None else {}
        for ss in rs.scope_spans:
            for span in ss.spans:
                if len(out) >= MAX_RECORDS_PER_PAYLOAD:
                    raise OtlpError("too_large", f"more than {MAX_RECORDS_PER_PAYLOAD} spans")
                status = span.status
                code: int | str = status.code if status is not None else 0
                if isinstance(code, str):
                    code = _STATUS_NAMES.get(code, 0)
                out.append(
                    SpanRecord(
                        _json_id(span.trace_id),
                        _json_id(span.span_id),
                        _json_id(span.parent_span_id),
                        span.name,
                        _nanos(span.start_time_unix_nano),
                        _nanos(span.end_time_unix_nano),
                        code,
                        status.message if status is not None else "",
                        _json_attrs(span.attributes),
                        resource,
                        [
                            SpanEvent(e.name, _nanos(e.time_unix_nano), _json_attrs(e.attributes))
                            for e in span.events[:MAX_SPAN_EVENTS]
                        ],
                    )
                )
    return out


def _logs_from_json(data: bytes) -> list[LogRecordView]:
    logs: _JLogsData = _json_decode(_logs_json, data)
    out: list[LogRecordView] = []
    for rl in logs.resource_logs:
        resource = _json_attrs(rl.resource.attributes) if rl.resource is not None else {}
        for sl in rl.scope_logs:
            for rec in sl.log_records:
                if len(out) >= MAX_RECORDS_PER_PAYLOAD:
                    raise OtlpError("too_large", f"more than {MAX_RECORDS_PER_PAYLOAD} records")
                out.append(
                    LogRecordView(
                        _nanos(rec.time_unix_nano),
                        _nanos(rec.observed_time_unix_nano),
                        getattr(rec, "event_name", ""),  # OTLP ≥ 1.5
                        _json_value(rec.body),
                        _json_attrs(rec.attributes),
                        resource,
                        _json_id(rec.trace_id),
                        _json_id(rec.span_id),
                    )
                )
    return out


# ----------------------------------------------------------------------- protobuf

_proto: Any = None


def _proto_modules() -> Any:
    global _proto
    if _proto is None:
        try:
            from google.protobuf.message import DecodeError
            from opentelemetry.proto.logs.v1 import logs_pb2
            from opentelemetry.proto.trace.v1 import trace_pb2
        except ImportError as exc:  # pragma: no cover - the [otel] extra is missing
            raise OtlpError(
                "unsupported_encoding",
                "OTLP protobuf needs the [otel] extra (opentelemetry-proto, protobuf)",
            ) from exc
        _proto = (trace_pb2.TracesData, logs_pb2.LogsData, DecodeError)
    return _proto


def _proto_value(value: Any, depth: int = 0) -> Any:
    which = value.WhichOneof("value")
    if which == "string_value":
        return value.string_value
    if which == "int_value":
        return value.int_value
    if which == "bool_value":
        return value.bool_value
    if which == "double_value":
        return value.double_value
    if which is None:
        return None
    if depth >= MAX_VALUE_DEPTH:
        raise OtlpError("too_deep", f"an attribute value is nested deeper than {MAX_VALUE_DEPTH}")
    if which == "array_value":
        return [_proto_value(v, depth + 1) for v in value.array_value.values[:MAX_ARRAY_ITEMS]]
    if which == "kvlist_value":
        return {
            kv.key: _proto_value(kv.value, depth + 1)
            for kv in value.kvlist_value.values[:MAX_ARRAY_ITEMS]
        }
    if which == "bytes_value":
        return bytes(value.bytes_value)
    return None


def _proto_attrs(attributes: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in attributes[:MAX_ATTRIBUTES]:
        value = kv.value
        # the two oneof cases almost every attribute is, without WhichOneof
        if value.HasField("string_value"):
            out[kv.key] = value.string_value
        elif value.HasField("int_value"):
            out[kv.key] = value.int_value
        else:
            out[kv.key] = _proto_value(value)
    return out


def _proto_parse(cls: Any, decode_error: type[Exception], data: bytes) -> Any:
    try:
        return cls.FromString(data)
    except RecursionError:
        raise OtlpError("too_deep", "the protobuf message is nested too deep") from None
    except decode_error as exc:
        raise OtlpError("malformed_otlp", f"not OTLP protobuf: {exc}") from None


def _spans_from_proto(data: bytes) -> list[SpanRecord]:
    traces_cls, _, decode_error = _proto_modules()
    traces = _proto_parse(traces_cls, decode_error, data)
    out: list[SpanRecord] = []
    for rs in traces.resource_spans:
        resource = _proto_attrs(rs.resource.attributes)
        for ss in rs.scope_spans:
            spans = ss.spans
            if len(out) + len(spans) > MAX_RECORDS_PER_PAYLOAD:
                raise OtlpError("too_large", f"more than {MAX_RECORDS_PER_PAYLOAD} spans")
            for span in spans:
                status = span.status
                events = span.events
                out.append(
                    SpanRecord(
                        span.trace_id.hex(),
                        span.span_id.hex(),
                        span.parent_span_id.hex(),
                        span.name,
                        span.start_time_unix_nano,
                        span.end_time_unix_nano,
                        status.code,
                        status.message,
                        _proto_attrs(span.attributes),
                        resource,
                        [
                            SpanEvent(e.name, e.time_unix_nano, _proto_attrs(e.attributes))
                            for e in events[:MAX_SPAN_EVENTS]
                        ]
                        if events
                        else [],
                    )
                )
    return out


def _logs_from_proto(data: bytes) -> list[LogRecordView]:
    _, logs_cls, decode_error = _proto_modules()
    logs = _proto_parse(logs_cls, decode_error, data)
    out: list[LogRecordView] = []
    for rl in logs.resource_logs:
        resource = _proto_attrs(rl.resource.attributes)
        for sl in rl.scope_logs:
            records = sl.log_records
            if len(out) + len(records) > MAX_RECORDS_PER_PAYLOAD:
                raise OtlpError("too_large", f"more than {MAX_RECORDS_PER_PAYLOAD} records")
            for rec in records:
                out.append(
                    LogRecordView(
                        rec.time_unix_nano,
                        rec.observed_time_unix_nano,
                        getattr(rec, "event_name", ""),  # OTLP ≥ 1.5
                        _proto_value(rec.body) if rec.HasField("body") else None,
                        _proto_attrs(rec.attributes),
                        resource,
                        rec.trace_id.hex(),
                        rec.span_id.hex(),
                    )
                )
    return out


# ------------------------------------------------------------------------ public


def sniff(data: bytes) -> Literal["otlp_proto", "otlp_json"]:
    """Which encoding ``data`` is: a JSON object starts with ``{``; a protobuf
    ``TracesData``/``LogsData`` with field 1's tag byte (0x0A) or is empty."""
    head = data[:64].lstrip()
    return "otlp_json" if head[:1] == b"{" else "otlp_proto"


def decode_spans(data: bytes, encoding: Encoding = "auto") -> list[SpanRecord]:
    """Every span of one ``TracesData`` / ``ExportTraceServiceRequest`` payload."""
    if encoding == "auto":
        encoding = sniff(data)
    try:
        return _spans_from_json(data) if encoding == "otlp_json" else _spans_from_proto(data)
    except RecursionError:
        raise OtlpError("too_deep", "the payload is nested too deep") from None


def decode_logs(data: bytes, encoding: Encoding = "auto") -> list[LogRecordView]:
    """Every log record of one ``LogsData`` / ``ExportLogsServiceRequest`` payload."""
    if encoding == "auto":
        encoding = sniff(data)
    try:
        return _logs_from_json(data) if encoding == "otlp_json" else _logs_from_proto(data)
    except RecursionError:
        raise OtlpError("too_deep", "the payload is nested too deep") from None
