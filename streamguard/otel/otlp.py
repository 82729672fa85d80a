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
import re
from collections.abc import Callable
from typing import Any, Literal, TypeVar

import msgspec
from msgspec import Struct

from ..events import MAX_NESTING

_T = TypeVar("_T")

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


def _containers(resources: Any, scopes_of: str) -> Any:
    """``resources`` after a check that they and their scopes number at most
    :data:`MAX_RECORDS_PER_PAYLOAD`: a payload of millions of empty containers holds no
    span, and walking it would hold the bridge for seconds (16 MiB of them is 8 million
    resources, and a few kilobytes gzipped)."""
    count = len(resources)
    if count <= MAX_RECORDS_PER_PAYLOAD:
        for resource in resources:
            count += len(getattr(resource, scopes_of))
            if count > MAX_RECORDS_PER_PAYLOAD:
                break
    if count > MAX_RECORDS_PER_PAYLOAD:
        raise OtlpError("too_large", f"more than {MAX_RECORDS_PER_PAYLOAD} resources and scopes")
    return resources


class AttributeFilter(Struct, frozen=True, gc=False):
    """Which attributes a decode keeps: the exact ``keys`` and any key starting with
    one of ``prefixes`` (flattened message lists); span events only when their
    name is in ``event_names``.

    The mapping reads a dozen attributes of spans that carry dozens (HTTP,
    messages sent to the model, framework internals): turning only the wanted
    ones into Python values is most of what makes decoding cheap. Everything
    else is skipped on the way, never converted, so it never counts against the
    nesting bound either.
    """

    keys: frozenset[str]
    prefixes: tuple[str, ...] = ()
    event_names: frozenset[str] = frozenset()

    def wants(self, key: str) -> bool:
        return key in self.keys or (bool(self.prefixes) and key.startswith(self.prefixes))


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
# Only the fields the bridge reads; msgspec skips the rest without building them.
# gc=False: these trees hold no cycles, so the collector need not track (and
# repeatedly traverse) the thousands of them one payload builds.


class _JKeyValue(Struct, rename="camel", gc=False):
    key: str = ""
    value: _JAnyValue | None = None


class _JArray(Struct, rename="camel", gc=False):
    values: list[_JAnyValue] = []


class _JKvList(Struct, rename="camel", gc=False):
    values: list[_JKeyValue] = []


class _JAnyValue(Struct, rename="camel", gc=False):
    string_value: str | None = None
    bool_value: bool | None = None
    int_value: int | str | None = None
    double_value: float | int | str | None = None
    array_value: _JArray | None = None
    kvlist_value: _JKvList | None = None
    bytes_value: str | None = None


class _JResource(Struct, rename="camel", gc=False):
    attributes: list[_JKeyValue] = []


class _JStatus(Struct, rename="camel", gc=False):
    code: int | str = 0
    message: str = ""


class _JSpanEvent(Struct, rename="camel", gc=False):
    time_unix_nano: int | str = 0
    name: str = ""
    attributes: list[_JKeyValue] = []


class _JSpan(Struct, rename="camel", gc=False):
    trace_id: str = ""
    span_id: str = ""
    parent_span_id: str = ""
    name: str = ""
    start_time_unix_nano: int | str = 0
    end_time_unix_nano: int | str = 0
    attributes: list[_JKeyValue] = []
    events: list[_JSpanEvent] = []
    status: _JStatus | None = None


class _JScopeSpans(Struct, rename="camel", gc=False):
    spans: list[_JSpan] = []


class _JResourceSpans(Struct, rename="camel", gc=False):
    resource: _JResource | None = None
    scope_spans: list[_JScopeSpans] = []


class _JTracesData(Struct, rename="camel", gc=False):
    resource_spans: list[_JResourceSpans] = []


class _JLogRecord(Struct, rename="camel", gc=False):
    time_unix_nano: int | str = 0
    observed_time_unix_nano: int | str = 0
    body: _JAnyValue | None = None
    attributes: list[_JKeyValue] = []
    trace_id: str = ""
    span_id: str = ""
    event_name: str = ""


class _JScopeLogs(Struct, rename="camel", gc=False):
    log_records: list[_JLogRecord] = []


class _JResourceLogs(Struct, rename="camel", gc=False):
    resource: _JResource | None = None
    scope_logs: list[_JScopeLogs] = []


class _JLogsData(Struct, rename="camel", gc=False):
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


TRACE_ID_HEX, SPAN_ID_HEX = 32, 16
"""An id of any other length is no id (OTLP: 16 and 8 bytes): it reads as absent, so a
megabyte of "trace id" can become no session, no key, no memory entry."""


def _json_id(value: str, size: int = SPAN_ID_HEX) -> str:
    """OTLP/JSON ids are hex; some writers use base64 (protobuf's JSON mapping). ``size``:
    the hex length of a valid id; an id of another length is absent (``""``)."""
    if not value:
        return ""
    if len(value) == size:
        try:
            int(value, 16)
            return value.lower()
        except ValueError:
            pass
    if len(value) > 2 * size:
        return ""  # longer than any encoding of a valid id
    try:
        decoded = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise OtlpError("malformed_otlp", f"id is neither hex nor base64: {value[:40]!r}") from None
    return decoded.hex() if 2 * len(decoded) == size else ""


def _proto_id(value: bytes, size: int) -> str:
    """A protobuf id as hex, or ``""`` when it is not ``size`` hex digits long."""
    return value.hex() if 2 * len(value) == size else ""


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


def _json_attrs(attributes: list[_JKeyValue], wanted: AttributeFilter | None) -> dict[str, Any]:
    """One pass over the key-values, converting only the wanted ones; strings (most
    attributes) without a call."""
    out: dict[str, Any] = {}
    if len(attributes) > MAX_ATTRIBUTES:
        attributes = attributes[:MAX_ATTRIBUTES]
    if wanted is None:
        for kv in attributes:
            value = kv.value
            text = value.string_value if value is not None else None
            out[kv.key] = text if text is not None else _json_value(value)
        return out
    keys, prefixes = wanted.keys, wanted.prefixes
    for kv in attributes:
        key = kv.key
        if key in keys or (prefixes and key.startswith(prefixes)):
            value = kv.value
            text = value.string_value if value is not None else None
            out[key] = text if text is not None else _json_value(value)
    return out


def _json_decode(decoder: msgspec.json.Decoder[Any], data: bytes) -> Any:
    try:
        return decoder.decode(data)
    except RecursionError:
        raise OtlpError("too_deep", "the JSON document is nested too deep") from None
    except msgspec.DecodeError as exc:
        raise OtlpError("malformed_otlp", f"not OTLP/JSON: {exc}") from None


def _json_events(events: list[_JSpanEvent], wanted: AttributeFilter | None) -> list[SpanEvent]:
    if wanted is not None:
        names = wanted.event_names
        events = [e for e in events if e.name in names]
    return [
        SpanEvent(e.name, _nanos(e.time_unix_nano), _json_attrs(e.attributes, wanted))
        for e in events[:MAX_SPAN_EVENTS]
    ]


_HEX_DIGITS = "0123456789abcdef"


def _span_id(value: str) -> str:
    """:func:`_json_id` for a span id: lower-case hex (what writers send) without a call."""
    if len(value) == 16 and not value.strip(_HEX_DIGITS):
        return value
    return _json_id(value)


def json_trace_id(raw: str, trace_ids: dict[str, str]) -> str:
    """An OTLP/JSON trace id as lower-case hex (``""``: none), each of a payload's read once
    (``trace_ids``: a payload holds few traces and many spans of each)."""
    trace_id = trace_ids.get(raw)
    if trace_id is None:
        trace_id = trace_ids[raw] = _json_id(raw, TRACE_ID_HEX)
    return trace_id


def json_span_record(
    span: _JSpan, trace_ids: dict[str, str], resource: dict[str, Any], wanted: AttributeFilter | None
) -> SpanRecord:
    """One decoded OTLP/JSON span as a :class:`SpanRecord` (raises :class:`OtlpError`);
    ``trace_ids``: the payload's trace ids read so far (:func:`json_trace_id`)."""
    status = span.status
    if status is None:
        code = 0
        message = ""
    else:
        raw_code, message = status.code, status.message
        code = _STATUS_NAMES.get(raw_code, 0) if isinstance(raw_code, str) else raw_code
    start, end = span.start_time_unix_nano, span.end_time_unix_nano
    trace_id = json_trace_id(span.trace_id, trace_ids)
    parent = span.parent_span_id
    attributes = span.attributes
    if wanted is None or len(attributes) > MAX_ATTRIBUTES:
        attrs = _json_attrs(attributes, wanted)
    else:
        # _json_attrs, inlined: this loop is most of the decode's own work
        keys, prefixes = wanted.keys, wanted.prefixes
        attrs = {}
        for kv in attributes:
            key = kv.key
            if key in keys or (prefixes and key.startswith(prefixes)):
                value = kv.value
                if value is None:
                    attrs[key] = None
                    continue
                text = value.string_value
                if text is not None:
                    attrs[key] = text
                    continue
                number = value.int_value  # int64 as a JSON string
                if (
                    type(number) is str and value.bool_value is None
                    and len(number) <= 20 and number.isdecimal()
                ):
                    attrs[key] = int(number)
                else:
                    attrs[key] = _json_value(value)
    return SpanRecord(
        trace_id,
        _span_id(span.span_id),
        _span_id(parent) if parent else "",
        span.name,
        start if type(start) is int and 0 <= start < 2**64
        else int(start) if type(start) is str and len(start) < 20 and start.isdecimal()
        else _nanos(start),
        end if type(end) is int and 0 <= end < 2**64
        else int(end) if type(end) is str and len(end) < 20 and end.isdecimal()
        else _nanos(end),
        code,
        message,
        attrs,
        resource,
        _json_events(span.events, wanted) if span.events else [],
    )


def _spans_from_json(data: bytes, wanted: AttributeFilter | None) -> list[SpanRecord]:
    traces: _JTracesData = _json_decode(_traces_json, data)
    out: list[SpanRecord] = []
    append = out.append
    trace_ids: dict[str, str] = {}
    for rs in _containers(traces.resource_spans, "scope_spans"):
        resource = _json_attrs(rs.resource.attributes, wanted) if rs.resource is not None else {}
        for ss in rs.scope_spans:
            spans = ss.spans
            if len(out) + len(spans) > MAX_RECORDS_PER_PAYLOAD:
                raise OtlpError("too_large", f"more than {MAX_RECORDS_PER_PAYLOAD} spans")
            for span in spans:
                append(json_span_record(span, trace_ids, resource, wanted))
    return out


def _logs_from_json(data: bytes, wanted: AttributeFilter | None) -> list[LogRecordView]:
    logs: _JLogsData = _json_decode(_logs_json, data)
    out: list[LogRecordView] = []
    for rl in _containers(logs.resource_logs, "scope_logs"):
        resource = _json_attrs(rl.resource.attributes, wanted) if rl.resource is not None else {}
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
                        _json_attrs(rec.attributes, wanted),
                        resource,
                        _json_id(rec.trace_id, TRACE_ID_HEX),
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


def _proto_attrs(attributes: Any, wanted: AttributeFilter | None) -> dict[str, Any]:
    """One pass over the key-values, converting only the wanted ones: with upb,
    every field read builds a Python object, so an unwanted value costs only its key."""
    out: dict[str, Any] = {}
    if not attributes:
        return out
    if len(attributes) > MAX_ATTRIBUTES:
        attributes = attributes[:MAX_ATTRIBUTES]
    keys = wanted.keys if wanted is not None else None
    prefixes = wanted.prefixes if wanted is not None else ()
    for kv in attributes:
        key = kv.key
        if keys is not None and key not in keys and not (prefixes and key.startswith(prefixes)):
            continue
        value = kv.value
        text = value.string_value  # what almost every attribute is: one read
        if text:
            out[key] = text
            continue
        # then counts (tokens): a non-zero int_value can only be the oneof's case,
        # so no WhichOneof (the dearest read) is needed for it
        number = value.int_value
        out[key] = number if number else _proto_value(value)
    return out


def _proto_parse(cls: Any, decode_error: type[Exception], data: bytes) -> Any:
    try:
        return cls.FromString(data)
    except RecursionError:
        raise OtlpError("too_deep", "the protobuf message is nested too deep") from None
    except decode_error as exc:
        raise OtlpError("malformed_otlp", f"not OTLP protobuf: {exc}") from None


def _proto_events(events: Any, wanted: AttributeFilter | None) -> list[SpanEvent]:
    names = wanted.event_names if wanted is not None else None
    out: list[SpanEvent] = []
    for e in events:
        name = e.name
        if names is not None and name not in names:
            continue
        out.append(SpanEvent(name, e.time_unix_nano, _proto_attrs(e.attributes, wanted)))
        if len(out) >= MAX_SPAN_EVENTS:
            break
    return out


def _spans_from_proto(data: bytes, wanted: AttributeFilter | None) -> list[SpanRecord]:
    traces_cls, _, decode_error = _proto_modules()
    traces = _proto_parse(traces_cls, decode_error, data)
    out: list[SpanRecord] = []
    append = out.append
    for rs in _containers(traces.resource_spans, "scope_spans"):
        resource = _proto_attrs(rs.resource.attributes, wanted)
        for ss in rs.scope_spans:
            spans = ss.spans
            if len(out) + len(spans) > MAX_RECORDS_PER_PAYLOAD:
                raise OtlpError("too_large", f"more than {MAX_RECORDS_PER_PAYLOAD} spans")
            for span in spans:
                status = span.status
                events = span.events
                append(
                    SpanRecord(
                        _proto_id(span.trace_id, TRACE_ID_HEX),
                        _proto_id(span.span_id, SPAN_ID_HEX),
                        _proto_id(span.parent_span_id, SPAN_ID_HEX),
                        span.name,
                        span.start_time_unix_nano,
                        span.end_time_unix_nano,
                        status.code,
                        status.message,
                        _proto_attrs(span.attributes, wanted),
                        resource,
                        _proto_events(events, wanted) if events else [],
                    )
                )
    return out


def _logs_from_proto(data: bytes, wanted: AttributeFilter | None) -> list[LogRecordView]:
    _, logs_cls, decode_error = _proto_modules()
    logs = _proto_parse(logs_cls, decode_error, data)
    out: list[LogRecordView] = []
    for rl in _containers(logs.resource_logs, "scope_logs"):
        resource = _proto_attrs(rl.resource.attributes, wanted)
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
                        _proto_attrs(rec.attributes, wanted),
                        resource,
                        _proto_id(rec.trace_id, TRACE_ID_HEX),
                        _proto_id(rec.span_id, SPAN_ID_HEX),
                    )
                )
    return out


# ------------------------------------------------------------------------ public


ENCODING_HEADER = "otlp.encoding"
"""The header the OTLP/HTTP receiver puts on each record it forwards: the encoding
its Content-Type named (``otlp_proto`` or ``otlp_json``), which the bridge follows."""

_JSON_SPACE = re.compile(rb"[ \t\r\n]*")


def sniff(data: bytes) -> Literal["otlp_proto", "otlp_json"]:
    """Which encoding ``data`` most likely is: a JSON object starts with ``{`` after
    any JSON whitespace; a protobuf ``TracesData``/``LogsData`` with field 1's tag byte
    (0x0A) or is empty. 0x0A is also a line feed: a protobuf payload whose first
    resource is 123 bytes long starts ``\n{``, as JSON may; :func:`read_payload` then
    tries the other reading before the payload is refused."""
    start = _JSON_SPACE.match(data).end()  # type: ignore[union-attr]  # matches ""
    return "otlp_json" if data[start : start + 1] == b"{" else "otlp_proto"


def _may_be_proto(data: bytes) -> bool:
    """Whether ``data``, sniffed as JSON, may be protobuf all the same (it starts with
    field 1's tag byte)."""
    return data[:1] == b"\n"


def decode_spans(
    data: bytes, encoding: Encoding = "auto", wanted: AttributeFilter | None = None
) -> list[SpanRecord]:
    """Every span of one ``TracesData`` / ``ExportTraceServiceRequest`` payload, with
    the attributes ``wanted`` lets through (None: all of them). With ``"auto"``, a
    payload sniffed as JSON that JSON cannot read but protobuf can is read as protobuf."""
    return read_payload(
        data, encoding, lambda raw: _spans_from_json(raw, wanted), lambda raw: _spans_from_proto(raw, wanted)
    )


def decode_logs(
    data: bytes, encoding: Encoding = "auto", wanted: AttributeFilter | None = None
) -> list[LogRecordView]:
    """Every log record of one ``LogsData`` / ``ExportLogsServiceRequest`` payload
    (``"auto"`` as :func:`decode_spans`)."""
    return read_payload(
        data, encoding, lambda raw: _logs_from_json(raw, wanted), lambda raw: _logs_from_proto(raw, wanted)
    )


def read_payload(
    data: bytes,
    encoding: Encoding,
    from_json: Callable[[bytes], _T],
    from_proto: Callable[[bytes], _T],
) -> _T:
    """``data`` read by ``from_json`` or ``from_proto`` as ``encoding`` says (``"auto"``:
    :func:`sniff`), the one rule for every reader of a payload: sniffed as JSON, a payload
    JSON cannot read but protobuf can is read as protobuf (the JSON error raised when
    neither can). Raises :class:`OtlpError`."""
    sniffed = encoding == "auto"
    if sniffed:
        encoding = sniff(data)
    try:
        if encoding != "otlp_json":
            return from_proto(data)
        try:
            return from_json(data)
        except OtlpError as json_error:
            if not (sniffed and _may_be_proto(data)):
                raise
            try:
                return from_proto(data)
            except OtlpError:
                raise json_error from None  # the likelier reading's error
    except RecursionError:
        raise OtlpError("too_deep", "the payload is nested too deep") from None
