"""Decoded spans straight to sessions-topic records: the bridge's stage 1, fast (pure).

:func:`.mapping.map_spans` builds contract Structs (:class:`~streamguard.events.ToolCall`
...) in :class:`~.mapping.Mapped` records, which :func:`.records.session_records`
then encodes. That is the reference: every rule of ``docs/otel.md`` is written
there once. This module writes the same records with less in between, for the
spans nearly every producer sends: a tool span whose name, call id, arguments and
result are short strings under the current attributes, without an error; a model
call with its model and token counts and no captured output or cache counts. Such
a span's events are built as plain dicts whose keys are the contract Structs'
fields in the order msgspec writes them (the tag, the event type's own fields,
then the keyword-only fields common to every event), so the JSON is the same, and go into the
session's record without a ``Mapped`` or an event Struct. Every other span (an
error status, older attribute names, long or deeply nested content, captured
output, agent spans, ...) goes through the reference mapping, per span.

The two must agree byte for byte: ``tests/otel/test_otel_direct.py`` checks it
over generated spans, and the fast path takes a span only when each of its
conditions means the reference would take its first, common branch.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from msgspec import Struct

from ..events import MAX_COUNT, MAX_NAME_CHARS, MAX_NESTING, MAX_TS, encoder
from .mapping import (
    _CACHE_KEYS,
    _OUTPUT_KEYS,
    CHARS_PER_TOKEN,
    REDACTED,
    TEXT_FINISH_REASONS,
    MappingConfig,
    TraceSessions,
    _agent,
    _attribute_session,
    _session_plan,
    _sessions_named,
    _span_items,
    map_logs,
    span_kind,
    trace_session,
)
from .otlp import LogRecordView, SpanRecord
from .records import EventItems, SessionEntries, grouped_records, session_records


class SessionBatch(Struct, gc=False):
    """One payload's sessions-topic records (``(session, value)``, one per session,
    in the order each session first appears), how many spans or log records were
    mapped, and the counts of those left out, by reason."""

    records: list[tuple[str, bytes]]
    mapped: int
    ignored: dict[str, int]


def span_session_records(
    spans: Iterable[SpanRecord], config: MappingConfig, traces: TraceSessions | None = None
) -> SessionBatch:
    """``session_records(map_spans(spans, config, traces).mapped)`` and its counts,
    with the same effect on ``traces``."""
    spans = spans if isinstance(spans, list) else list(spans)
    keys, uses_trace = _session_plan(config.session_keys)
    first_key = keys[0] if keys else None
    # Sessions first, for every span (as map_spans does): a span without one, in
    # the same payload, joins the session its trace's siblings name.
    found: list[str | None] = []
    add_found = found.append
    for span in spans:
        if first_key is not None:
            value = span.attrs.get(first_key)
            if type(value) is str and 0 < len(value) <= MAX_NAME_CHARS:
                add_found(value)
                continue
        add_found(_attribute_session(span.attrs, span.resource, keys))
    trace_ids = [span.trace_id for span in spans]
    if traces is not None:
        traces.learn_all(trace_ids, found)
    # A trace's session as this payload names it first; the memory only for traces it
    # does not name (an earlier claim, by another producer, does not outrank a sibling).
    named = _sessions_named(trace_ids, found) if None in found else {}
    grouped: dict[str, SessionEntries] = {}
    ignored: dict[str, int] = {}
    mapped = 0
    short = config.max_content_bytes // 4
    for span, session in zip(spans, found, strict=True):
        entry = span_entry(span, session, named, traces, uses_trace, config, short, ignored)
        if entry is None:
            continue
        mapped += 1
        session, encoded = entry
        grouped.setdefault(session, []).append((f"{span.trace_id}:{span.span_id}", encoded))
    return SessionBatch(grouped_records(grouped), mapped, ignored)


def span_entry(
    span: SpanRecord,
    session: str | None,
    named: dict[str, str],
    traces: TraceSessions | None,
    uses_trace: bool,
    config: MappingConfig,
    short: int,
    ignored: dict[str, int],
) -> tuple[str, EventItems] | None:
    """One span's session and encoded events, or None with the reason counted in
    ``ignored``. ``session`` is what its own attributes name (None: its trace's, by
    ``named`` then ``traces``, or the trace id); ``short``: a quarter of the content
    bound, the longest captured string kept as it is."""
    span_id = span.span_id
    if not span_id:
        ignored["no_span_id"] = ignored.get("no_span_id", 0) + 1
        return None
    attrs = span.attrs
    operation = attrs.get("gen_ai.operation.name")
    kind = (
        "tool" if operation == "execute_tool"
        else "inference" if operation == "chat"
        else span_kind(span)
    )
    if kind is None:
        ignored["not_genai"] = ignored.get("not_genai", 0) + 1
        return None
    if session is None:
        session = trace_session(span.trace_id, named, traces, uses_trace)
        if session is None:
            ignored["no_session"] = ignored.get("no_session", 0) + 1
            return None
    try:
        encoded: EventItems | None = None
        agent = attrs.get("gen_ai.agent.name")
        if type(agent) is not str or not 0 < len(agent) <= MAX_NAME_CHARS:
            agent = _agent(attrs, span.resource)
        if agent is not None and span.trace_id:
            if kind == "tool":
                encoded = _tool_items(span, attrs, session, agent, short)
            elif kind == "inference":
                encoded = _inference_items(span, attrs, session, agent)
        if encoded is None:
            # the reference, for everything the fast path does not take
            result = _span_items(span, kind, session, config)
            if isinstance(result, str):
                ignored[result] = ignored.get(result, 0) + 1
                return None
            encode = encoder.encode
            encoded = [(t, rank, encode(event)) for t, rank, event in result.items]
    except Exception:  # one span's odd values fail it alone, not its payload
        ignored["mapping_error"] = ignored.get("mapping_error", 0) + 1
        return None
    return session, encoded


def _tool_items(
    span: SpanRecord, attrs: dict[str, Any], session: str, agent: str, short: int
) -> EventItems | None:
    """A tool span's call and result, or None for the reference to map it."""
    if span.status_code == 2 or attrs.get("error.type"):
        return None
    tool = attrs.get("gen_ai.tool.name")
    if type(tool) is not str or not 0 < len(tool) <= MAX_NAME_CHARS:
        return None
    call_id = attrs.get("gen_ai.tool.call.id")
    if type(call_id) is not str or not 0 < len(call_id) <= MAX_NAME_CHARS:
        return None
    # Captured content the reference keeps as it is: a string not cut (at most a
    # quarter of the content bound, so its UTF-8 bytes are within it) and with too
    # few brackets to nest past the contract's bound (counted only in a string longer
    # than the bound: a shorter one cannot hold that many).
    args: Any = attrs.get("gen_ai.tool.call.arguments")
    if args is None:
        if "input.value" in attrs or "tool_call.function.arguments" in attrs:
            return None
        args = {"otel.span_id": span.span_id}
    elif (
        type(args) is not str or not 0 < len(args) <= short or args == REDACTED
        or (len(args) > MAX_NESTING and args.count("[") + args.count("{") > MAX_NESTING)
    ):
        return None
    result = attrs.get("gen_ai.tool.call.result")
    if result is None:
        if "output.value" in attrs:
            return None
    elif (
        type(result) is not str or not 0 < len(result) <= short or result == REDACTED
        or (len(result) > MAX_NESTING and result.count("[") + result.count("{") > MAX_NESTING)
    ):
        return None
    start_ns, end_ns = span.start_ns, span.end_ns
    if not (start_ns > 0 and end_ns > 0 and end_ns / 1e9 <= MAX_TS and start_ns / 1e9 <= MAX_TS):
        return None
    turn = span.trace_id
    encode = encoder.encode
    call = encode({
        "type": "tool_call", "tool": tool, "args": args, "call_id": call_id,
        "session": session, "agent": agent, "ts": start_ns / 1e9, "turn": turn,
    })
    if result is None:
        outcome = encode({
            "type": "tool_result", "tool": tool, "call_id": call_id,
            "session": session, "agent": agent, "ts": end_ns / 1e9, "turn": turn,
        })
    else:
        outcome = encode({
            "type": "tool_result", "tool": tool, "call_id": call_id, "result": result,
            "session": session, "agent": agent, "ts": end_ns / 1e9, "turn": turn,
        })
    return [(start_ns, 1, call), (end_ns, 2, outcome)]


def _inference_items(
    span: SpanRecord, attrs: dict[str, Any], session: str, agent: str
) -> EventItems | None:
    """A model call's usage (and its text estimate), or None for the reference."""
    if span.events or not _CACHE_KEYS.isdisjoint(attrs) or not _OUTPUT_KEYS.isdisjoint(attrs):
        return None
    model = attrs.get("gen_ai.response.model")
    if model is None:
        model = attrs.get("gen_ai.request.model")
    if type(model) is not str or not 0 < len(model) <= MAX_NAME_CHARS:
        return None
    input_tokens = attrs.get("gen_ai.usage.input_tokens")
    output_tokens = attrs.get("gen_ai.usage.output_tokens")
    if (
        type(input_tokens) is not int or not 0 <= input_tokens <= MAX_COUNT
        or type(output_tokens) is not int or not 0 <= output_tokens <= MAX_COUNT
        or "gen_ai.usage.cost" in attrs or "llm.cost.total" in attrs
    ):
        return None
    end_ns = span.end_ns
    if end_ns <= 0 or end_ns / 1e9 > MAX_TS:
        return None
    ts = end_ns / 1e9
    turn = span.trace_id
    encode = encoder.encode
    usage = encode({
        "type": "usage", "model": model, "input_tokens": input_tokens,
        "output_tokens": output_tokens, "session": session, "agent": agent, "ts": ts, "turn": turn,
    })
    if output_tokens:
        reasons = attrs.get("gen_ai.response.finish_reasons")
        if type(reasons) is not list or len(reasons) != 1 or type(reasons[0]) is not str:
            return None  # several reasons, or an odd value: the reference's general rule
        if reasons[0].lower() in TEXT_FINISH_REASONS:
            text = encode({
                "type": "text", "chars": min(output_tokens * CHARS_PER_TOKEN, MAX_COUNT),
                "session": session, "agent": agent, "ts": ts, "turn": turn,
            })
            return [(end_ns, 3, usage), (end_ns, 4, text)]
    return [(end_ns, 3, usage)]


def log_session_records(records: Iterable[LogRecordView], config: MappingConfig) -> SessionBatch:
    """Log records (Claude Code's events, a few per turn) through the reference mapping."""
    result = map_logs(records, config)
    return SessionBatch(session_records(result.mapped), len(result.mapped), result.ignored)


__all__ = ["SessionBatch", "log_session_records", "span_session_records"]
