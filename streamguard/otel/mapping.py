"""OTLP spans and log records to contract-v1 events: the functional core of the bridge.

Pure and deterministic: the same records (and the same :class:`TraceSessions`
contents) give the same events. No I/O, no clock. ``docs/otel.md`` is this
module's reference, attribute by attribute; the rules in brief:

* a GenAI ``execute_tool`` span (or an OpenInference ``TOOL`` span) is a
  ``tool_call`` at its start and a ``tool_result`` at its end;
* an inference span (``chat``, ``text_completion``, ``generate_content``, an
  OpenInference ``LLM`` span, or an older span with a model and token counts)
  is a ``usage`` at its end, plus assistant ``text`` when its output was
  captured (or, when it was not, a ``chars`` estimate if the model finished
  with text rather than with tool calls);
* a root ``invoke_agent`` (OpenInference ``AGENT``) span ends a turn; turns
  begin through the ``turn`` field, which is the trace id: one agent run, one
  trace, one turn;
* Claude Code's log events ``claude_code.tool_result``, ``claude_code.api_request``
  and ``claude_code.user_prompt`` become a call and its result, a ``usage``, and
  a turn start.

**Absent content is not equal content.** Instrumentations do not capture tool
arguments by default. A call whose arguments were not captured gets
``{"otel.span_id": <its span id>}`` (log events: ``{"otel.record": <digest>}``)
as its arguments, so every such call is distinct: the argument-keyed detectors
never take a sweep of different reads for a loop of one read, while the
name-keyed ones (``repeated-tool-name``, ``tool-failure-streak``...) still see
every call. ``docs/otel.md`` lists what runs at which capture level.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import lru_cache
from hashlib import blake2b
from typing import Any, Literal

import msgspec
from msgspec import Struct

from ..canonical import truncate_middle
from ..events import (
    MAX_COUNT,
    MAX_NAME_CHARS,
    MAX_NESTING,
    MAX_TS,
    MAX_USD,
    AgentEvent,
    NestingTooDeep,
    Text,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnStart,
    Usage,
    check_nesting,
)
from .otlp import AttributeFilter, LogRecordView, SpanRecord

TRACE = "trace"
"""In :attr:`MappingConfig.session_keys`: the span's (or log record's) trace id."""

# Order of events that share a timestamp: a turn opens before the calls in it,
# a call before its result, the model's usage and text after, the turn's end last.
RANK_TURN_START, RANK_CALL, RANK_RESULT, RANK_USAGE, RANK_TEXT, RANK_TURN_END = 0, 1, 2, 3, 4, 9

INFERENCE_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "completion"})
AGENT_OPERATIONS = frozenset({"invoke_agent"})
# Finish reasons that mean the model answered in text (not with tool calls).
TEXT_FINISH_REASONS = frozenset({"stop", "end_turn", "length", "max_tokens", "stop_sequence"})
CHARS_PER_TOKEN = 4
REDACTED = "__REDACTED__"
"""What OpenInference writes in place of content its configuration hides
(``OPENINFERENCE_HIDE_INPUTS`` / ``_OUTPUTS``...): read as content not captured,
never as an argument or an answer that every call shares."""

IgnoredReason = Literal[
    "not_genai", "no_session", "no_span_id", "no_tool_name", "unknown_log_event", "mapping_error"
]

_json = msgspec.json.Decoder()
_encode = msgspec.json.Encoder().encode


class MappingConfig(Struct, kw_only=True, frozen=True):
    """What the mapping may be told (``streamguard bridge`` flags)."""

    session_keys: tuple[str, ...] = ("gen_ai.conversation.id", "session.id", TRACE)
    """Attributes tried in order for the session id (span, then resource); ``trace``
    is the trace id."""
    max_content_bytes: int = 16 * 1024
    """Captured arguments, results and text are cut to this many UTF-8 bytes."""
    max_trace_sessions: int = 100_000
    """Traces whose session id is remembered for spans that do not carry one."""


# Every span attribute the mapping reads (and the prefixes of flattened message
# lists): the decode converts only these (:class:`~.otlp.AttributeFilter`).
SPAN_ATTRIBUTES = frozenset({
    "error.type", "event.name",
    "gen_ai.agent.name", "gen_ai.completion", "gen_ai.conversation.id", "gen_ai.operation.name",
    "gen_ai.output.messages", "gen_ai.request.model", "gen_ai.response.finish_reasons",
    "gen_ai.response.model", "gen_ai.system", "gen_ai.tool.call.arguments", "gen_ai.tool.call.id",
    "gen_ai.tool.call.result", "gen_ai.tool.name",
    "gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.cache_creation_input_tokens",
    "gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens",
    "gen_ai.usage.completion_tokens", "gen_ai.usage.cost", "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens", "gen_ai.usage.prompt_tokens",
    "input.value", "output.value", "openinference.span.kind",
    "llm.cost.total", "llm.model_name", "llm.token_count.completion", "llm.token_count.prompt",
    "llm.token_count.prompt_details.cache_read", "llm.token_count.prompt_details.cache_write",
    "service.name", "session.id", "tool.name",
    "tool_call.function.arguments", "tool_call.function.name", "tool_call.id",
    "message",  # of a gen_ai.choice span event
})
SPAN_ATTRIBUTE_PREFIXES = ("gen_ai.completion.", "llm.output_messages.")
SPAN_EVENT_NAMES = frozenset({"gen_ai.choice", "gen_ai.content.completion"})


def span_filter(config: MappingConfig) -> AttributeFilter:
    """What the decode must keep of spans for this configuration (its session keys too)."""
    return AttributeFilter(
        keys=SPAN_ATTRIBUTES | {k for k in config.session_keys if k != TRACE},
        prefixes=SPAN_ATTRIBUTE_PREFIXES,
        event_names=SPAN_EVENT_NAMES,
    )


class Mapped(Struct, gc=False):
    """The events of one span or log record, for one session.

    ``key`` identifies the source record (``trace:span``, or a digest of a log
    record): a duplicate export of the same record has the same key.
    ``items`` are ``(time_ns, rank, event)``; events carry no ``seq`` yet (the
    window assigns it in session order).
    """

    session: str
    key: str
    items: list[tuple[int, int, AgentEvent]]


class TraceSessions:
    """Bounded memory of which session each recent trace belongs to.

    A span may lack the conversation attribute that a sibling carries (some
    instrumentations set it on the agent and model spans only). When any span
    of a trace names a session, later spans of that trace without one join it.
    Least recently used traces are forgotten beyond ``limit``.
    """

    __slots__ = ("_map", "limit")

    def __init__(self, limit: int = 100_000) -> None:
        self._map: OrderedDict[str, str] = OrderedDict()
        self.limit = limit

    def learn(self, trace_id: str, session: str) -> None:
        """That ``trace_id`` belongs to ``session`` (a trace already known keeps its first
        session and becomes the most recently used)."""
        self.learn_all([trace_id], [session])

    def learn_all(self, trace_ids: list[str], sessions: list[str | None]) -> None:
        """:meth:`learn` for each pair whose session is known, in order (one call a
        payload rather than one a span)."""
        known = self._map
        limit = self.limit
        for trace_id, session in zip(trace_ids, sessions, strict=True):
            if session is None or not trace_id:
                continue
            if trace_id in known:
                known.move_to_end(trace_id)
            else:
                known[trace_id] = session
                if len(known) > limit:
                    known.popitem(last=False)

    def get(self, trace_id: str) -> str | None:
        return self._map.get(trace_id)

    def __len__(self) -> int:
        return len(self._map)


# --------------------------------------------------------------------- helpers


def _name(value: Any) -> str | None:
    """A contract name (≤ 256 characters) from an attribute, or None."""
    if type(value) is str and 0 < len(value) <= MAX_NAME_CHARS:
        return value  # almost always
    if value is None or isinstance(value, (bytes, list, dict)):
        return None
    text = value if isinstance(value, str) else str(value)
    if not text:
        return None
    return text if len(text) <= MAX_NAME_CHARS else text[:MAX_NAME_CHARS]


def _count(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not math.isfinite(value):
            return None  # NaN, or an infinity int() cannot take
        value = int(value)
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            return None
    if isinstance(value, int) and 0 <= value <= MAX_COUNT:
        return value
    return None


def _first(attrs: dict[str, Any], keys: Sequence[str]) -> Any:
    value = attrs.get(keys[0])
    if value is not None and value != "":
        return value  # the current convention's name: the usual case, one look-up
    for key in keys[1:]:
        value = attrs.get(key)
        if value is not None and value != "":
            return value
    return None


def _seconds(time_ns: int) -> float | None:
    if time_ns <= 0:
        return None
    ts = time_ns / 1e9
    return ts if ts <= MAX_TS else None


def _session_value(value: Any) -> str | None:
    if value is None or isinstance(value, (bytes, list, dict)):
        return None
    text = value if isinstance(value, str) else str(value)
    if not text:
        return None
    if len(text) > MAX_NAME_CHARS:
        # Too long to be a key: a stable digest keeps one session one session.
        return "otel:" + blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    return text


def _may_be_deep(value: Any) -> bool:
    """Cheap bound first (as the contract's decoder does): only a value with more
    brackets than the nesting bound can nest past it."""
    if isinstance(value, str):
        return value.count("[") + value.count("{") > MAX_NESTING
    return isinstance(value, (list, dict))


_DIGEST_NOTE_BYTES = 64
"""Room kept for the digest a cut content carries (`` [cut from N bytes, blake2b X]``)."""


def _cut(text: str, limit: int) -> str:
    """``text`` within ``limit`` UTF-8 bytes: as it is when it fits, else its two ends
    around ``…`` and a digest of the whole, so that two contents that differ only in
    the middle (a large file written again with one function changed) stay two."""
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= limit:
        return text
    note = f" [cut from {len(raw)} bytes, blake2b {blake2b(raw, digest_size=8).hexdigest()}]"
    return truncate_middle(text, max(limit - _DIGEST_NOTE_BYTES, 3)) + note


def _content(value: Any, limit: int) -> Any:
    """Captured content, bounded: strings cut in the middle, containers re-encoded if big."""
    if isinstance(value, str):
        return _cut(value, limit) if len(value) > limit // 4 else value
    if isinstance(value, bytes):
        return _cut(value.decode("utf-8", "replace"), limit)
    if isinstance(value, (list, dict)):
        try:
            encoded = _encode(value)
        except (TypeError, ValueError, OverflowError):
            return None
        if len(encoded) > limit:
            return _cut(encoded.decode(), limit)
    return value


def _as_json(value: Any) -> Any:
    """Attributes that hold JSON text (messages) decoded; anything else as is."""
    if isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            return _json.decode(value)
        except (msgspec.DecodeError, RecursionError):
            return None
    return value


def _message_text(messages: Any) -> str | None:
    """Assistant text of GenAI output messages (current and older shapes)."""
    messages = _as_json(messages)
    if isinstance(messages, dict):
        messages = [messages]
    if not isinstance(messages, list):
        return messages if isinstance(messages, str) and messages.strip() else None
    texts: list[str] = []
    for message in messages[:64]:
        if not isinstance(message, dict):
            continue
        inner = message.get("message")  # gen_ai.choice events: {"message": {...}}
        if isinstance(inner, dict):
            message = inner
        role = message.get("role", "assistant")
        if role not in ("assistant", "model", None):
            continue
        parts = message.get("parts")
        if isinstance(parts, list):
            for part in parts[:64]:
                if isinstance(part, dict) and part.get("type") == "text":
                    content = part.get("content")
                    if isinstance(content, str):
                        texts.append(content)
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            for part in content[:64]:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    texts.append(part["text"])
    text = "\n".join(t for t in texts if t.strip())
    return text or None


def _indexed_keys(prefix: str, role_suffix: str, content_suffix: str) -> tuple[tuple[str, str], ...]:
    return tuple((f"{prefix}{i}{content_suffix}", f"{prefix}{i}{role_suffix}") for i in range(16))


# Built once: the look-ups of flattened message lists are on every inference span.
_OPENLLMETRY_COMPLETIONS = _indexed_keys("gen_ai.completion.", ".role", ".content")
_OPENINFERENCE_OUTPUTS = _indexed_keys("llm.output_messages.", ".message.role", ".message.content")
# A message of several parts (the OpenAI Agents SDK's Responses, through OpenInference):
# ``llm.output_messages.0.message.contents.0.message_content.text``; per message, its role
# key and its parts' text keys.
_OPENINFERENCE_PARTS = tuple(
    (
        f"llm.output_messages.{i}.message.role",
        tuple(f"llm.output_messages.{i}.message.contents.{j}.message_content.text" for j in range(16)),
    )
    for i in range(16)
)


def _openinference_parts(attrs: dict[str, Any]) -> str | None:
    """The assistant's text of messages flattened part by part (see above)."""
    get = attrs.get
    texts: list[str] = []
    for role_key, part_keys in _OPENINFERENCE_PARTS:
        role = get(role_key)
        if role is None and get(part_keys[0]) is None:
            break
        if (role or "assistant") not in ("assistant", "model"):
            continue
        for key in part_keys:
            part = get(key)
            if part is None:
                break
            if isinstance(part, str) and part.strip():
                texts.append(part)
    return "\n".join(texts) or None


def _indexed_text(attrs: dict[str, Any], keys: tuple[tuple[str, str], ...]) -> str | None:
    """Flattened message lists: ``gen_ai.completion.0.content`` (OpenLLMetry),
    ``llm.output_messages.0.message.content`` (OpenInference)."""
    get = attrs.get
    if get(keys[0][0]) is None and get(keys[1][0]) is None:
        return None  # the common case: nothing captured
    texts: list[str] = []
    for i, (content_key, role_key) in enumerate(keys):
        content = get(content_key)
        if content is None:
            if i > 0:
                break
            continue
        role = get(role_key, "assistant")
        if role in ("assistant", "model") and isinstance(content, str) and content.strip():
            texts.append(content)
    return "\n".join(texts) or None


# ------------------------------------------------------------------------ spans


def span_kind(span: SpanRecord) -> Literal["tool", "inference", "agent", None]:
    """What a span is, by the GenAI conventions or OpenInference's span kind."""
    attrs = span.attrs
    operation = attrs.get("gen_ai.operation.name")
    if type(operation) is not str and operation is not None:
        operation = ""  # a list or a number names no operation (and is no set member)
    if operation == "execute_tool":
        return "tool"
    if operation in INFERENCE_OPERATIONS:
        return "inference"
    if operation in AGENT_OPERATIONS:
        return "agent"
    oi_kind = attrs.get("openinference.span.kind")
    if isinstance(oi_kind, str):
        oi_kind = oi_kind.upper()
        if oi_kind == "TOOL":
            return "tool"
        if oi_kind == "LLM":
            return "inference"
        if oi_kind == "AGENT":
            return "agent"
        return None
    if operation is None:
        if "gen_ai.tool.name" in attrs:
            return "tool"
        if ("gen_ai.request.model" in attrs or "gen_ai.system" in attrs) and (
            "gen_ai.usage.input_tokens" in attrs
            or "gen_ai.usage.prompt_tokens" in attrs
            or "gen_ai.usage.output_tokens" in attrs
            or "gen_ai.usage.completion_tokens" in attrs
        ):
            return "inference"  # older conventions (≤ 1.26) had no operation name
    return None


def _sessions_named(trace_ids: list[str], found: list[str | None]) -> dict[str, str]:
    """Each trace's session as the first of its spans in one payload that names one
    (``trace_ids`` and ``found``: the payload's spans' trace ids and own sessions)."""
    named: dict[str, str] = {}
    for trace_id, session in zip(trace_ids, found, strict=True):
        if session is not None and trace_id and trace_id not in named:
            named[trace_id] = session
    return named


@lru_cache(maxsize=64)
def _session_plan(session_keys: tuple[str, ...]) -> tuple[tuple[str, ...], bool]:
    """The attribute keys tried before ``trace``, and whether ``trace`` is tried at all."""
    if TRACE in session_keys:
        return session_keys[: session_keys.index(TRACE)], True
    return session_keys, False


def _attribute_session(
    attrs: dict[str, Any], resource: dict[str, Any], keys: tuple[str, ...]
) -> str | None:
    """The first of ``keys`` the span (then its resource) carries, as a session id."""
    for key in keys:
        value = attrs.get(key)
        if type(value) is str and 0 < len(value) <= MAX_NAME_CHARS:
            return value  # the usual case, without a call
        session = _session_value(value) if value is not None else None
        if session is None:
            value = resource.get(key)
            session = _session_value(value) if value is not None else None
        if session is not None:
            return session
    return None


def trace_session(
    trace_id: str, named: dict[str, str], traces: TraceSessions | None, uses_trace: bool
) -> str | None:
    """The session of a span whose own attributes name none: its trace's, as the payload
    names it (``named``), else as learned before (``traces``); a sibling's session joins
    it whatever the keys. Else the trace id itself, only when ``trace`` is a session key."""
    learned = named.get(trace_id)
    if learned is None and traces is not None:
        learned = traces.get(trace_id)
    if learned is not None:
        return learned
    return (trace_id or None) if uses_trace else None


def span_session(
    span: SpanRecord, config: MappingConfig, traces: TraceSessions | None = None
) -> str | None:
    """The session id of a span: the first of ``session_keys`` it (or its resource) has."""
    keys, uses_trace = _session_plan(config.session_keys)
    session = _attribute_session(span.attrs, span.resource, keys)
    if session is not None:
        if traces is not None:
            traces.learn(span.trace_id, session)
        return session
    return trace_session(span.trace_id, {}, traces, uses_trace)


def _agent(attrs: dict[str, Any], resource: dict[str, Any]) -> str | None:
    return _name(attrs.get("gen_ai.agent.name")) or _name(resource.get("service.name"))


def _span_error(span: SpanRecord) -> str | None:
    if span.status_code == 2:
        error_type = span.attrs.get("error.type")
        message = span.status_message or (str(error_type) if error_type else "") or "error"
        return truncate_middle(message, 1024)
    error_type = span.attrs.get("error.type")
    if error_type:
        return truncate_middle(str(error_type), 1024)
    return None


# Keys whose presence means the slower, general rules must run; a span carrying
# none of them (the usual case) skips them with one set test.
_CACHE_KEYS = frozenset({
    "gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens",
    "llm.token_count.prompt_details.cache_read", "gen_ai.usage.cache_creation.input_tokens",
    "gen_ai.usage.cache_creation_input_tokens", "llm.token_count.prompt_details.cache_write",
})
_OUTPUT_KEYS = frozenset({
    "gen_ai.output.messages", "gen_ai.completion", "output.value",
    *(content for content, _ in _OPENLLMETRY_COMPLETIONS[:2]),
    *(content for content, _ in _OPENINFERENCE_OUTPUTS[:2]),
    *(parts[0] for _, parts in _OPENINFERENCE_PARTS[:2]),
})
_PART_KEYS = frozenset(parts[0] for _, parts in _OPENINFERENCE_PARTS)
_TOOL_KEYS = ("gen_ai.tool.name", "tool.name", "tool_call.function.name")
_CALL_ID_KEYS = ("gen_ai.tool.call.id", "tool_call.id")
_ARGS_KEYS = ("gen_ai.tool.call.arguments", "input.value", "tool_call.function.arguments")
_RESULT_KEYS = ("gen_ai.tool.call.result", "output.value")
_MODEL_KEYS = ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name")
_INPUT_KEYS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt")
_OUTPUT_TOKEN_KEYS = (
    "gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion"
)
_CACHE_READ_KEYS = (
    "gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens",
    "llm.token_count.prompt_details.cache_read",
)
_CACHE_WRITE_KEYS = (
    "gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.cache_creation_input_tokens",
    "llm.token_count.prompt_details.cache_write",
)
_COST_KEYS = ("gen_ai.usage.cost", "llm.cost.total")


def _name_of(attrs: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    """``_name(_first(attrs, keys))``, the common case (the first key holds a valid
    name) without a call."""
    value = attrs.get(keys[0])
    if type(value) is str and 0 < len(value) <= MAX_NAME_CHARS:
        return value
    return _name(_first(attrs, keys))


def _count_of(attrs: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    """``_count(_first(attrs, keys))``, the common case (an int under the first key) without a call."""
    value = attrs.get(keys[0])
    if type(value) is int and 0 <= value <= MAX_COUNT:
        return value
    return _count(_first(attrs, keys))


def _bounded_content(value: Any, limit: int) -> Any:
    """``_content``, a short string (the usual captured argument) without a call."""
    if type(value) is str and len(value) <= limit // 4:
        return value
    return _content(value, limit)


def _tool_events(
    span: SpanRecord, session: str, agent: str | None, config: MappingConfig
) -> list[tuple[int, int, AgentEvent]] | None:
    attrs = span.attrs
    tool = _name_of(attrs, _TOOL_KEYS)
    if tool is None:
        name = span.name
        if name.startswith("execute_tool "):
            tool = _name(name[len("execute_tool ") :])
    if tool is None:
        return None
    call_id = _name_of(attrs, _CALL_ID_KEYS)
    limit = config.max_content_bytes
    raw_args = attrs.get(_ARGS_KEYS[0])
    if raw_args is None or raw_args == "":
        raw_args = _first(attrs, _ARGS_KEYS)
    if raw_args == REDACTED:
        raw_args = None  # content hidden: no argument, never "the same" one
    args: Any = (
        _bounded_content(raw_args, limit) if raw_args is not None else {"otel.span_id": span.span_id}
    )
    raw_result = attrs.get(_RESULT_KEYS[0])
    if raw_result is None or raw_result == "":
        raw_result = _first(attrs, _RESULT_KEYS)
    if raw_result == REDACTED:
        raw_result = None
    result = _bounded_content(raw_result, limit) if raw_result is not None else None
    turn = span.trace_id or None
    start_ns, end_ns = span.start_ns, span.end_ns
    call = ToolCall(
        session=session, agent=agent, ts=_seconds(start_ns), turn=turn, tool=tool,
        args=args, call_id=call_id,
    )
    if _may_be_deep(args):
        try:
            check_nesting(call)
        except NestingTooDeep:
            call.args = {"otel.span_id": span.span_id, "otel.args_dropped": "nested too deep"}
    outcome = ToolResult(
        session=session, agent=agent, ts=_seconds(end_ns), turn=turn, tool=tool,
        call_id=call_id,
        error=_span_error(span) if span.status_code == 2 or attrs.get("error.type") else None,
        result=result,
    )
    if result is not None and _may_be_deep(result):
        try:
            check_nesting(outcome)
        except NestingTooDeep:
            outcome.result = None
    return [(start_ns, RANK_CALL, call), (end_ns, RANK_RESULT, outcome)]


def _inference_events(
    span: SpanRecord, session: str, agent: str | None, config: MappingConfig
) -> list[tuple[int, int, AgentEvent]]:
    attrs = span.attrs
    model = _name_of(attrs, _MODEL_KEYS)
    input_tokens = _count_of(attrs, _INPUT_KEYS)
    output_tokens = _count_of(attrs, _OUTPUT_TOKEN_KEYS)
    if not _CACHE_KEYS.isdisjoint(attrs):
        cached = (_count(_first(attrs, _CACHE_READ_KEYS)) or 0) + (
            _count(_first(attrs, _CACHE_WRITE_KEYS)) or 0
        )
        if cached and (input_tokens is None or cached > input_tokens):
            # The current conventions count cached tokens inside the input tokens; a
            # producer whose cache counts exceed its input count reports them apart.
            input_tokens = min((input_tokens or 0) + cached, MAX_COUNT)
    cost = attrs.get(_COST_KEYS[0])
    if cost is None or cost == "":
        cost = _first(attrs, _COST_KEYS)
    cost_usd = _usd(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None
    turn = span.trace_id or None
    end_ns = span.end_ns
    ts = _seconds(end_ns)
    items: list[tuple[int, int, AgentEvent]] = [
        (
            end_ns,
            RANK_USAGE,
            Usage(
                session=session, agent=agent, ts=ts, turn=turn, model=model,
                input_tokens=input_tokens, output_tokens=output_tokens, cost_usd=cost_usd,
            ),
        )
    ]
    # Content is rarely captured: a span without any output attribute or event
    # has no text to find.
    text = _captured_output(span) if span.events or not _OUTPUT_KEYS.isdisjoint(attrs) else None
    if text is not None:
        items.append(
            (end_ns, RANK_TEXT, Text(
                session=session, agent=agent, ts=ts, turn=turn,
                text=_cut(text, config.max_content_bytes),
            ))
        )
    elif output_tokens and _finished_with_text(attrs):
        # Content not captured, but the model answered in words: that is the agent
        # speaking, whose size is estimated from the output tokens.
        items.append(
            (end_ns, RANK_TEXT, Text(
                session=session, agent=agent, ts=ts, turn=turn,
                chars=min(output_tokens * CHARS_PER_TOKEN, MAX_COUNT),
            ))
        )
    return items


def _captured_output(span: SpanRecord) -> str | None:
    """The model's captured answer (None: not captured, or hidden as redacted)."""
    text = _captured_text(span)
    return None if text is None or text.strip() == REDACTED else text


def _captured_text(span: SpanRecord) -> str | None:
    attrs = span.attrs
    for key in ("gen_ai.output.messages", "gen_ai.completion"):
        value = attrs.get(key)
        if value is not None:
            return _message_text(value)
    text = _indexed_text(attrs, _OPENLLMETRY_COMPLETIONS)
    if text is None:
        text = _indexed_text(attrs, _OPENINFERENCE_OUTPUTS)
    if text is None and not _PART_KEYS.isdisjoint(attrs):
        text = _openinference_parts(attrs)
    if text is not None:
        return text
    for event in span.events:
        if event.name == "gen_ai.choice":
            text = _message_text(event.attrs.get("message", event.attrs))
        elif event.name == "gen_ai.content.completion":
            text = _message_text(event.attrs.get("gen_ai.completion"))
        if text:
            return text
    if attrs.get("openinference.span.kind") == "LLM":
        output = attrs.get("output.value")
        if isinstance(output, str) and output.strip():
            return _message_text(output) or None
    return None


def _finished_with_text(attrs: dict[str, Any]) -> bool:
    reasons = attrs.get("gen_ai.response.finish_reasons")
    if type(reasons) is list and len(reasons) == 1 and type(reasons[0]) is str:
        # one reason (the usual case): text, or not (the two sets are disjoint)
        return reasons[0].lower() in TEXT_FINISH_REASONS
    if isinstance(reasons, str):
        reasons = [reasons]
    if not isinstance(reasons, list) or not reasons:
        return False
    lowered = {str(r).lower() for r in reasons}
    return bool(lowered & TEXT_FINISH_REASONS) and not lowered & {"tool_calls", "tool_use", "function_call"}


def _span_items(
    span: SpanRecord,
    kind: Literal["tool", "inference", "agent"],
    session: str,
    config: MappingConfig,
) -> Mapped | IgnoredReason:
    agent = span.attrs.get("gen_ai.agent.name")
    if type(agent) is not str or not 0 < len(agent) <= MAX_NAME_CHARS:
        agent = _agent(span.attrs, span.resource)
    key = f"{span.trace_id}:{span.span_id}"
    if kind == "tool":
        items = _tool_events(span, session, agent, config)
        if items is None:
            return "no_tool_name"
        return Mapped(session, key, items)
    if kind == "inference":
        return Mapped(session, key, _inference_events(span, session, agent, config))
    # an agent invocation: a root one is the turn; nested ones are sub-agents
    if span.parent_span_id:
        return "not_genai"
    end = TurnEnd(session=session, agent=agent, ts=_seconds(span.end_ns), turn=span.trace_id or None)
    return Mapped(session, key, [(span.end_ns, RANK_TURN_END, end)])


def _mapped_alone(
    span: SpanRecord, kind: Literal["tool", "inference", "agent"], session: str, config: MappingConfig
) -> Mapped | IgnoredReason:
    """:func:`_span_items`, with any failure of this span's values its own
    (``mapping_error``): a payload mixes the spans of many sessions, and one span no
    rule foresaw must not take the others with it to the dead-letter topic."""
    try:
        return _span_items(span, kind, session, config)
    except Exception:
        return "mapping_error"


def map_span(
    span: SpanRecord, config: MappingConfig, traces: TraceSessions | None = None
) -> Mapped | IgnoredReason:
    """The events of one span, or why it has none."""
    if not span.span_id:
        return "no_span_id"  # no identity: duplicates could not be told apart
    kind = span_kind(span)
    if kind is None:
        # Not a GenAI span, but it may still tell which session its trace is.
        span_session(span, config, traces)
        return "not_genai"
    session = span_session(span, config, traces)
    if session is None:
        return "no_session"
    return _span_items(span, kind, session, config)


# ------------------------------------------------------------------------- logs


def _usd(value: Any) -> float | None:
    """A cost in USD within the contract's bounds, or None (a number of 400 digits, a
    string that is none, infinity)."""
    try:
        usd = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return usd if 0 <= usd <= MAX_USD else None


def _log_time(record: LogRecordView) -> int:
    if record.time_ns > 0:
        return record.time_ns
    stamp = record.attrs.get("event.timestamp")
    if isinstance(stamp, str):
        try:
            time_ns = int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1e9)
        except (ValueError, OverflowError):
            pass
        else:
            if 0 < time_ns < 2**63:  # year 9999 or 0001 is no time a record can carry
                return time_ns
    return record.observed_ns


def log_event_name(record: LogRecordView) -> str | None:
    """``tool_result`` for ``claude_code.tool_result`` (event name, attribute or body)."""
    name = record.event_name or record.attrs.get("event.name")
    if not isinstance(name, str) or not name:
        name = record.body if isinstance(record.body, str) else None
    if not name:
        return None
    return name.removeprefix("claude_code.")


def _log_key(record: LogRecordView, name: str, session: str) -> str:
    try:
        attrs = _encode(sorted((k, v) for k, v in record.attrs.items() if not isinstance(v, bytes)))
    except (TypeError, ValueError, OverflowError):
        attrs = b""
    digest = blake2b(digest_size=12)
    digest.update(f"{session}\0{record.time_ns}\0{name}\0".encode("utf-8", "surrogatepass"))
    digest.update(attrs)
    return "log:" + digest.hexdigest()


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def map_log(record: LogRecordView, config: MappingConfig) -> Mapped | IgnoredReason:
    """The events of one log record (Claude Code's events), or why it has none."""
    name = log_event_name(record)
    if name not in ("tool_result", "api_request", "user_prompt"):
        return "unknown_log_event"
    attrs, resource = record.attrs, record.resource
    session: str | None = None
    for key in config.session_keys:
        if key == TRACE:
            session = record.trace_id or None
        else:
            session = _session_value(attrs.get(key)) or _session_value(resource.get(key))
        if session is not None:
            break
    if session is None:
        return "no_session"
    agent = _agent(attrs, resource)
    time_ns = _log_time(record)
    ts = _seconds(time_ns)
    turn = _name(attrs.get("prompt.id"))
    key = _log_key(record, name, session)
    items: list[tuple[int, int, AgentEvent]]
    if name == "user_prompt":
        items = [(time_ns, RANK_TURN_START, TurnStart(session=session, agent=agent, ts=ts, turn=turn))]
    elif name == "api_request":
        input_tokens = _count(attrs.get("input_tokens"))
        # Claude Code reports cache reads and writes apart from the input tokens;
        # the context the model saw is their sum.
        context = sum(
            _count(attrs.get(k)) or 0
            for k in ("input_tokens", "cache_read_tokens", "cache_creation_tokens")
        )
        cost = attrs.get("cost_usd")
        cost_usd = _usd(cost) if cost is not None else None
        usage = Usage(
            session=session, agent=agent, ts=ts, turn=turn, model=_name(attrs.get("model")),
            input_tokens=min(context, MAX_COUNT) if input_tokens is not None else None,
            output_tokens=_count(attrs.get("output_tokens")), cost_usd=cost_usd,
        )
        items = [(time_ns, RANK_USAGE, usage)]
    else:
        tool = _name(attrs.get("tool_name"))
        if tool is None:
            return "no_tool_name"
        parameters = attrs.get("tool_parameters")
        args: Any = (
            _content(parameters, config.max_content_bytes)
            if parameters not in (None, "", "{}")
            else {"otel.record": key}
        )
        error: str | None = None
        if not _truthy(attrs.get("success", True)):
            error = truncate_middle(str(attrs.get("error") or "failed"), 1024)
        elif attrs.get("decision") == "reject":
            error = "rejected"
        duration_ms = _count(attrs.get("duration_ms")) or 0
        start_ns = max(time_ns - duration_ms * 1_000_000, 0)
        call = ToolCall(
            session=session, agent=agent, ts=_seconds(start_ns), turn=turn, tool=tool, args=args
        )
        try:
            check_nesting(call)
        except NestingTooDeep:
            call.args = {"otel.record": key, "otel.args_dropped": "nested too deep"}
        outcome = ToolResult(
            session=session, agent=agent, ts=ts, turn=turn, tool=tool, error=error,
            result_bytes=_count(attrs.get("tool_result_size_bytes")),
        )
        items = [(start_ns, RANK_CALL, call), (time_ns, RANK_RESULT, outcome)]
    return Mapped(session, key, items)


# ------------------------------------------------------------------------ batch


class BatchResult(Struct, gc=False):
    """The mapped records of one payload and the counts of those left out, by reason."""

    mapped: list[Mapped]
    ignored: dict[str, int]


def map_spans(
    spans: Iterable[SpanRecord], config: MappingConfig, traces: TraceSessions | None = None
) -> BatchResult:
    """Map a payload's spans. Spans carrying a session are read first, so that a
    sibling without one, in the same payload, joins its trace's session. Each
    span's session attributes are read once (this is :func:`map_span` per span,
    with the look-ups shared)."""
    spans = spans if isinstance(spans, list) else list(spans)
    keys, uses_trace = _session_plan(config.session_keys)
    found = [_attribute_session(span.attrs, span.resource, keys) for span in spans]
    trace_ids = [span.trace_id for span in spans]
    named = _sessions_named(trace_ids, found) if None in found else {}
    if traces is not None:
        traces.learn_all(trace_ids, found)
    mapped: list[Mapped] = []
    ignored: dict[str, int] = {}
    for span, session in zip(spans, found, strict=True):
        result: Mapped | IgnoredReason
        if not span.span_id:
            result = "no_span_id"
        else:
            operation = span.attrs.get("gen_ai.operation.name")
            kind = (
                "tool" if operation == "execute_tool"
                else "inference" if operation == "chat"
                else span_kind(span)
            )
            if kind is None:
                result = "not_genai"
            else:
                if session is None:
                    session = trace_session(span.trace_id, named, traces, uses_trace)
                result = "no_session" if session is None else _mapped_alone(span, kind, session, config)
        if isinstance(result, str):
            ignored[result] = ignored.get(result, 0) + 1
        else:
            mapped.append(result)
    return BatchResult(mapped, ignored)


def map_logs(records: Iterable[LogRecordView], config: MappingConfig) -> BatchResult:
    mapped: list[Mapped] = []
    ignored: dict[str, int] = {}
    for record in records:
        try:
            result = map_log(record, config)
        except Exception:  # one record's odd values fail it alone, not its payload
            result = "mapping_error"
        if isinstance(result, str):
            ignored[result] = ignored.get(result, 0) + 1
        else:
            mapped.append(result)
    return BatchResult(mapped, ignored)


__all__ = [
    "TRACE",
    "BatchResult",
    "Mapped",
    "MappingConfig",
    "TraceSessions",
    "map_log",
    "map_logs",
    "map_span",
    "map_spans",
    "span_filter",
    "span_kind",
    "span_session",
]
