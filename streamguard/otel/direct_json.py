"""OTLP/JSON payloads straight to sessions-topic records: stage 1 without span records (pure).

The reference way from a payload to the sessions topic is two steps:
:func:`.otlp.decode_spans` turns every span into a :class:`~.otlp.SpanRecord` (its
wanted attributes converted into a dict), and :func:`.direct.span_session_records`
reads those dicts back to write each span's events. For the spans nearly every
producer sends, both steps do little but move strings from one container to the next.
:func:`json_span_session_records` reads the decoded OTLP/JSON Structs once instead:
each span's attributes are looked up by key in one table, into the handful of slots
the common cases read (the session, agent, operation, tool, call id, arguments,
result, model and token counts), and a span whose slots hold the simple shapes, with
no other attribute the mapping reads on such a span (a provider name or a second
session attribute, read only on other spans, may be there), has its events written
at once from them. Every other
span (an error status, another wanted attribute such as ``error.type`` or
``input.value``, an odd value, id or time, kept span events, a session only its trace
names) becomes the very :class:`~.otlp.SpanRecord` the reference decode would build
and goes through :func:`.direct.span_entry`, the same code as every other payload.

The result is the reference's, byte for byte, with the same effect on the trace
memory and the same :class:`~.otlp.OtlpError` for a payload that is not OTLP:
``tests/otel/test_otel_direct_json.py`` holds the two to it over generated payloads.
A fast span is taken only when none of its values could make the reference decode
raise (every slot value is of the simple shape, ids are lower-case hex, times are
integers in range), so the first error of a payload is the reference's first.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import msgspec
from msgspec import Struct

from ..events import MAX_COUNT, MAX_NAME_CHARS, MAX_NESTING, MAX_TS
from .direct import SessionBatch, span_entry, span_session_records
from .mapping import (
    CHARS_PER_TOKEN,
    REDACTED,
    SPAN_ATTRIBUTE_PREFIXES,
    SPAN_ATTRIBUTES,
    TEXT_FINISH_REASONS,
    MappingConfig,
    TraceSessions,
    _attribute_session,
    _name,
    _session_plan,
    _sessions_named,
)
from .otlp import (
    _STATUS_NAMES,
    MAX_ATTRIBUTES,
    MAX_RECORDS_PER_PAYLOAD,
    AttributeFilter,
    OtlpError,
    SpanRecord,
    _containers,
    _json_attrs,
    _json_decode,
    _JSpan,
    _JTracesData,
    _traces_json,
    decode_spans,
    json_span_record,
    json_trace_id,
)
from .records import EventItems, SessionEntries, grouped_records

# The slots: what the common tool and model spans carry. SESSION is the first
# configured session attribute (``gen_ai.conversation.id`` by default).
SESSION, AGENT, OPERATION, TOOL, CALL_ID, ARGS, RESULT = 0, 1, 2, 3, 4, 5, 6
REQUEST_MODEL, RESPONSE_MODEL, INPUT_TOKENS, OUTPUT_TOKENS, FINISH_REASONS = 7, 8, 9, 10, 11
_SLOT_KEYS = (
    "gen_ai.agent.name", "gen_ai.operation.name", "gen_ai.tool.name", "gen_ai.tool.call.id",
    "gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "gen_ai.request.model",
    "gen_ai.response.model", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
    "gen_ai.response.finish_reasons",
)
_SLOTS = 1 + len(_SLOT_KEYS)
OTHER = -1
"""A wanted attribute no slot holds: the span is read the reference way."""
UNWANTED = -2
"""An attribute the mapping never reads: skipped, as the reference decode skips it."""
NEUTRAL = -3
"""A wanted attribute the mapping does not read on a common span: on others only (the
provider name, for a span without an operation name; the next session attributes,
for a span without the first; a service name, on the resource). The reference decode
converts it all the same, so it must be a string (or None), which cannot fail."""
_NEUTRAL_KEYS = ("gen_ai.system", "service.name", "event.name", "message")
_MAX_REMEMBERED_KEYS = 4096
"""Attribute keys whose class a plan remembers: producers use a few dozen; a payload
of millions of made-up keys is classified key by key, never remembered."""
_MAX_REMEMBERED_KEY_CHARS = 128
"""Nor a key longer than this: a plan lives as long as the process, and 4,096 keys of
megabytes each would hold gigabytes."""
_HEX_DIGITS = "0123456789abcdef"


class _Plan:
    """How one configuration's attribute keys are read: the slot of each, or NEUTRAL,
    OTHER or UNWANTED (a memo of :meth:`.otlp.AttributeFilter.wants`)."""

    __slots__ = ("classes", "first_key", "wanted")

    def __init__(self, wanted: AttributeFilter, session_keys: tuple[str, ...]) -> None:
        self.wanted = wanted
        self.first_key = session_keys[0]
        self.classes: dict[str, int] = {}
        for key in (*_NEUTRAL_KEYS, *session_keys[1:]):
            # a later session attribute the mapping also reads otherwise (error.type,
            # a cache count...) is no neutral one: the span goes the reference way
            if wanted.wants(key) and (key in _NEUTRAL_KEYS or not _read_on_common_spans(key)):
                self.classes[key] = NEUTRAL
        self.classes[self.first_key] = SESSION
        for slot, key in enumerate(_SLOT_KEYS, start=1):
            self.classes[key] = slot

    def classify(self, key: str) -> int:
        found = OTHER if self.wanted.wants(key) else UNWANTED
        if len(self.classes) < _MAX_REMEMBERED_KEYS and len(key) <= _MAX_REMEMBERED_KEY_CHARS:
            self.classes[key] = found
        return found


@lru_cache(maxsize=16)
def _plan(wanted: AttributeFilter, session_keys: tuple[str, ...]) -> _Plan | None:
    """The plan for a configuration, or None when its slots cannot be read this way
    (no session attribute first, a session attribute that is also a slot, or a filter
    that would not keep a slot's attribute): the reference then reads every span."""
    keys, _ = _session_plan(session_keys)
    if not keys:
        return None
    first_key = keys[0]
    if (
        first_key in _SLOT_KEYS or _read_on_common_spans(first_key)
        or not all(wanted.wants(k) for k in (first_key, *_SLOT_KEYS))
    ):
        return None
    return _Plan(wanted, keys)


def _read_on_common_spans(key: str) -> bool:
    """Whether the mapping reads ``key`` on a tool span or a model call other than as a
    session attribute (an error type, captured content, cache counts, costs...): as a
    session attribute too, it would be read one way and not the other."""
    if key in ("gen_ai.conversation.id", "session.id"):
        return False
    return key in SPAN_ATTRIBUTES or key.startswith(SPAN_ATTRIBUTE_PREFIXES)


# The contract's events as the reference writes them: the tag, the event type's own
# fields, then the fields every event has, in msgspec's order (a test holds them to
# the contract Structs' bytes).
class _Call(Struct, tag_field="type", tag="tool_call", gc=False):
    tool: str
    args: Any
    call_id: str
    session: str
    agent: str
    ts: float
    turn: str


class _Result(Struct, tag_field="type", tag="tool_result", gc=False):
    tool: str
    call_id: str
    result: str
    session: str
    agent: str
    ts: float
    turn: str


class _Answered(Struct, tag_field="type", tag="tool_result", gc=False):
    tool: str
    call_id: str
    session: str
    agent: str
    ts: float
    turn: str


class _Usage(Struct, tag_field="type", tag="usage", gc=False):
    model: str
    input_tokens: int
    output_tokens: int
    session: str
    agent: str
    ts: float
    turn: str


class _Text(Struct, tag_field="type", tag="text", gc=False):
    chars: int
    session: str
    agent: str
    ts: float
    turn: str


_encode = msgspec.json.Encoder().encode


def _fast_items(
    span: _JSpan,
    slots: list[Any],
    code: int,
    trace_id: str,
    session: str,
    agent: str,
    short: int,
) -> EventItems | None:
    """The events of a common tool or model span from its slots (each a string, a
    count or the one finish reason), or None for the reference way."""
    # Each time as the reference decode reads it without a call (an int64 as a number or
    # a short decimal string, in range), else the reference way. Inline: with the trace
    # id's memory read inline in _read, 2.7 % of stage 1's time.
    start, end = span.start_time_unix_nano, span.end_time_unix_nano
    if isinstance(start, str):
        if len(start) >= 20 or not start.isdecimal():
            return None
        start_ns = int(start)
    elif 0 <= start < 2**64:
        start_ns = start
    else:
        return None
    if isinstance(end, str):
        if len(end) >= 20 or not end.isdecimal():
            return None
        end_ns = int(end)
    elif 0 <= end < 2**64:
        end_ns = end
    else:
        return None
    parent = span.parent_span_id
    if parent and (len(parent) != 16 or parent.strip(_HEX_DIGITS)):
        return None
    if slots[OPERATION] == "execute_tool":
        if code == 2 or not (
            start_ns > 0 and end_ns > 0 and end_ns / 1e9 <= MAX_TS and start_ns / 1e9 <= MAX_TS
        ):
            return None
        tool, call_id = slots[TOOL], slots[CALL_ID]
        if tool is None or not 0 < len(tool) <= MAX_NAME_CHARS:
            return None
        if call_id is None or not 0 < len(call_id) <= MAX_NAME_CHARS:
            return None
        args: Any = slots[ARGS]
        if args is None:
            args = {"otel.span_id": span.span_id}
        elif (
            not 0 < len(args) <= short or args == REDACTED
            or (len(args) > MAX_NESTING and args.count("[") + args.count("{") > MAX_NESTING)
        ):
            return None
        result = slots[RESULT]
        if result is not None and (
            not 0 < len(result) <= short or result == REDACTED
            or (len(result) > MAX_NESTING and result.count("[") + result.count("{") > MAX_NESTING)
        ):
            return None
        call = _encode(_Call(tool, args, call_id, session, agent, start_ns / 1e9, trace_id))
        if result is None:
            outcome = _encode(_Answered(tool, call_id, session, agent, end_ns / 1e9, trace_id))
        else:
            outcome = _encode(_Result(tool, call_id, result, session, agent, end_ns / 1e9, trace_id))
        return [(start_ns, 1, call), (end_ns, 2, outcome)]
    # a model call ("chat")
    model = slots[RESPONSE_MODEL]
    if model is None:
        model = slots[REQUEST_MODEL]
    if model is None or not 0 < len(model) <= MAX_NAME_CHARS:
        return None
    input_tokens, output_tokens = slots[INPUT_TOKENS], slots[OUTPUT_TOKENS]
    if input_tokens is None or output_tokens is None or end_ns <= 0 or end_ns / 1e9 > MAX_TS:
        return None
    ts = end_ns / 1e9
    usage = _encode(_Usage(model, input_tokens, output_tokens, session, agent, ts, trace_id))
    if output_tokens:
        reason = slots[FINISH_REASONS]
        if reason is None:
            return None
        if reason.lower() in TEXT_FINISH_REASONS:
            chars = min(output_tokens * CHARS_PER_TOKEN, MAX_COUNT)
            return [(end_ns, 3, usage), (end_ns, 4, _encode(_Text(chars, session, agent, ts, trace_id)))]
    return [(end_ns, 3, usage)]


def json_span_session_records(
    data: bytes, config: MappingConfig, wanted: AttributeFilter, traces: TraceSessions | None = None
) -> SessionBatch:
    """``span_session_records(decode_spans(data, "otlp_json", wanted), config, traces)``,
    with the same result, the same effect on ``traces`` and the same errors
    (:class:`~.otlp.OtlpError`)."""
    plan = _plan(wanted, config.session_keys)
    if plan is None:
        return span_session_records(decode_spans(data, "otlp_json", wanted), config, traces)
    keys, uses_trace = _session_plan(config.session_keys)
    short = config.max_content_bytes // 4
    try:
        grouped, work, found, trace_ids = _read(data, plan, keys, wanted, short)
    except RecursionError:
        raise OtlpError("too_deep", "the payload is nested too deep") from None
    # As the reference: the whole payload read first (a payload that fails teaches the
    # trace memory nothing), then every span's own session learnt, in order.
    if traces is not None:
        traces.learn_all(trace_ids, found)
    mapped = len(found) - len(work)  # the spans written at once, before the first other
    if not work:
        return SessionBatch(grouped_records(grouped), mapped, {})
    named = _sessions_named(trace_ids, found) if None in found else {}
    ignored: dict[str, int] = {}
    for item, session in zip(work, found[mapped:], strict=True):
        if isinstance(item, SpanRecord):
            entry = span_entry(item, session, named, traces, uses_trace, config, short, ignored)
            if entry is None:
                continue
            session, encoded = entry
            key = f"{item.trace_id}:{item.span_id}"
        else:
            session, key, encoded = item
        mapped += 1
        grouped.setdefault(session, []).append((key, encoded))
    return SessionBatch(grouped_records(grouped), mapped, ignored)


def _read(
    data: bytes, plan: _Plan, keys: tuple[str, ...], wanted: AttributeFilter, short: int
) -> tuple[
    dict[str, SessionEntries], list[tuple[str, str, EventItems] | SpanRecord], list[str | None], list[str]
]:
    """The payload's spans: the events of those before the first span read the reference
    way, grouped by session; every span from that one on, in order, as
    ``(session, key, events)`` when written at once, else its SpanRecord; and for every
    span, in order, the session its own attributes name and its trace id."""
    document: _JTracesData = _json_decode(_traces_json, data)
    grouped: dict[str, SessionEntries] = {}
    first_key = plan.first_key
    classes_get, classify = plan.classes.get, plan.classify
    input_tokens_slot, reasons_slot = INPUT_TOKENS, FINISH_REASONS  # locals: read per attribute
    event_names = wanted.event_names
    work: list[tuple[str, str, EventItems] | SpanRecord] = []
    found: list[str | None] = []
    span_traces: list[str] = []
    trace_ids: dict[str, str] = {}
    trace_ids_get = trace_ids.get
    spans_seen = 0
    for rs in _containers(document.resource_spans, "scope_spans"):
        resource = _json_attrs(rs.resource.attributes, wanted) if rs.resource is not None else {}
        resource_agent = _name(resource.get("service.name"))
        for ss in rs.scope_spans:
            spans = ss.spans
            spans_seen += len(spans)
            if spans_seen > MAX_RECORDS_PER_PAYLOAD:
                raise OtlpError("too_large", f"more than {MAX_RECORDS_PER_PAYLOAD} spans")
            for span in spans:
                trace_id = trace_ids_get(span.trace_id)  # json_trace_id's memo, inline
                if trace_id is None:
                    trace_id = json_trace_id(span.trace_id, trace_ids)
                attributes = span.attributes
                span_id = span.span_id
                if (
                    trace_id and len(attributes) <= MAX_ATTRIBUTES
                    and len(span_id) == 16 and not span_id.strip(_HEX_DIGITS)
                ):
                    # each slot's value as the reference decode converts it: a string,
                    # a count, the one finish reason; any other shape, a None, or a
                    # wanted attribute no slot holds: the reference way
                    slots: list[Any] = [None] * _SLOTS
                    for kv in attributes:
                        slot = classes_get(kv.key)
                        if slot is None:
                            slot = classify(kv.key)
                        if slot < 0:
                            if slot == OTHER:
                                break
                            if slot == NEUTRAL:
                                value = kv.value
                                if value is not None and value.string_value is None:
                                    break
                            continue
                        value = kv.value
                        if value is None:
                            break
                        if slot < input_tokens_slot:
                            text = value.string_value
                            if text is None:
                                break
                            slots[slot] = text
                        elif slot < reasons_slot:
                            number = value.int_value
                            if value.string_value is not None or value.bool_value is not None:
                                break
                            if type(number) is str:
                                if len(number) > 18 or not number.isdecimal():
                                    break
                                number = int(number)
                            elif type(number) is not int:
                                break
                            if not 0 <= number <= MAX_COUNT:
                                break
                            slots[slot] = number
                        else:
                            # a list of one string, and nothing read before the list
                            listed = value.array_value
                            if (
                                listed is None or value.string_value is not None
                                or value.bool_value is not None or value.int_value is not None
                                or value.double_value is not None
                                or len(listed.values) != 1
                            ):
                                break
                            reason = listed.values[0]
                            if reason is None or reason.string_value is None:
                                break
                            slots[slot] = reason.string_value
                    else:
                        session, operation = slots[SESSION], slots[OPERATION]
                        agent = slots[AGENT]
                        if agent is None:
                            agent = resource_agent
                        if (
                            session is not None and 0 < len(session) <= MAX_NAME_CHARS
                            and agent is not None and 0 < len(agent) <= MAX_NAME_CHARS
                            and (operation == "execute_tool" or operation == "chat")
                            and not (span.events and any(e.name in event_names for e in span.events))
                        ):
                            status = span.status
                            raw_code = 0 if status is None else status.code
                            code = _STATUS_NAMES.get(raw_code, 0) if isinstance(raw_code, str) else raw_code
                            try:
                                items = _fast_items(span, slots, code, trace_id, session, agent, short)
                            except Exception:  # e.g. a string msgspec cannot write
                                items = None
                            if items is not None:
                                if work:  # behind a span read the reference way, in order
                                    work.append((session, f"{trace_id}:{span_id}", items))
                                else:
                                    entries = grouped.get(session)
                                    if entries is None:
                                        grouped[session] = [(f"{trace_id}:{span_id}", items)]
                                    else:
                                        entries.append((f"{trace_id}:{span_id}", items))
                                found.append(session)
                                span_traces.append(trace_id)
                                continue
                record = json_span_record(span, trace_ids, resource, wanted)
                value = record.attrs.get(first_key)
                if type(value) is str and 0 < len(value) <= MAX_NAME_CHARS:
                    found.append(value)
                else:
                    found.append(_attribute_session(record.attrs, record.resource, keys))
                work.append(record)
                span_traces.append(record.trace_id)
    return grouped, work, found, span_traces


__all__ = ["json_span_session_records"]
