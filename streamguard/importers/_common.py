"""Shared pieces of the importers: the session builder, bounds, errors, small parsers.

Everything here is pure: the builder only accumulates events, the parsers only
look at the values they are given.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import PurePath
from typing import Any

import msgspec

from ..events import (
    MAX_COUNT,
    MAX_NAME_CHARS,
    MAX_TS,
    MAX_USD,
    AgentEvent,
    FinalAnswer,
    Text,
    TextRole,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnStart,
    Usage,
    check_nesting,
    decode_agent_event,
    encode,
)

#: Tool results, texts and string arguments longer than this (UTF-8 bytes) are cut,
#: with a note saying how much was cut. Detectors fingerprint the kept prefix.
MAX_PAYLOAD_BYTES = 64 * 1024
#: Error strings are kept shorter: they name a failure, they are not the evidence.
MAX_ERROR_CHARS = 2_000
MAX_SESSION_CHARS = 256


class ImportedSession(msgspec.Struct, kw_only=True):
    """One recorded session, mapped to contract-v1 events."""

    session: str
    agent: str | None
    source: str
    events: list[AgentEvent]
    #: The source's own label for how the run ended (``info.exit_status``,
    #: ``termination_reason``, ...), unchanged; None when the source records none.
    ended: str | None = None
    extra: dict[str, Any] = {}


class RecordError(Exception):
    """A record of the source that does not have the shape its format needs.

    ``record`` is 1-based: the line of a JSONL file, or the position in the
    list named by ``where`` (``trajectory``, ``messages``, ``history``...).
    """

    def __init__(self, record: int | None, message: str, where: str | None = None) -> None:
        super().__init__(message)
        self.record = record
        self.where = where
        self.message = message


class ImportFailure(Exception):
    """A file that could not be imported: names the file and, when known, the record."""

    def __init__(self, path: str, message: str, record: int | None = None, where: str | None = None) -> None:
        self.path = path
        self.record = record
        self.where = where
        self.message = message
        location = f"{path}: "
        if record is not None:
            location += f"record {record}" + (f" ({where})" if where else "") + ": "
        super().__init__(location + message)


def bounded(text: str, limit: int = MAX_PAYLOAD_BYTES) -> str:
    """``text`` cut to ``limit`` UTF-8 bytes, with a note of what was cut."""
    if len(text) * 4 <= limit:  # fast path: cannot exceed the limit
        return text
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text
    kept = data[:limit].decode("utf-8", "ignore")
    return f"{kept}\n[... truncated {len(data) - len(kept.encode('utf-8'))} bytes]"


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "replace"))


def bounded_error(text: str) -> str:
    text = text.strip() or "error"
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


def session_id(raw: str) -> str:
    """A contract session id (1–256 chars): long ids keep a prefix and a hash of the whole."""
    raw = raw.strip() or "session"
    if len(raw) <= MAX_SESSION_CHARS:
        return raw
    digest = hashlib.sha256(raw.encode("utf-8")).hexdigest()[:16]
    return raw[: MAX_SESSION_CHARS - 17] + "~" + digest


def parse_ts(value: Any) -> float | None:
    """Unix seconds from a number or an ISO 8601 string; naive times are taken as UTC."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        if not (value >= 0 and math.isfinite(value)):
            return None
        return seconds(float(value))  # harnesses write milliseconds too
    if isinstance(value, str) and value:
        try:
            when = datetime.fromisoformat(value)
        except (ValueError, OverflowError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        try:
            stamp = when.timestamp()
        except (ValueError, OverflowError):
            return None
        return stamp if 0 <= stamp <= MAX_TS else None
    return None


def non_negative_int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None  # 1e400 decodes as infinity, which int() refuses
    return int(value) if value >= 0 else None


def non_negative_float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return float(value) if value >= 0 else None


#: Content blocks that are not the message's text: hidden thinking (read with
#: :func:`reasoning_text`; a redacted block's "content" is an opaque blob).
_NOT_TEXT_BLOCKS = frozenset({"thinking", "redacted_thinking", "reasoning"})


def block_text(content: Any) -> str:
    """The text of a message ``content``: a string, or a list of blocks with text parts
    (thinking blocks are not its text)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and block.get("type") in _NOT_TEXT_BLOCKS:
                continue
            elif isinstance(block, dict):
                # OpenAI/Anthropic blocks say "text"; AgentDojo's say "content".
                value = block.get("text", block.get("content"))
                if isinstance(value, str):
                    parts.append(value)
                elif isinstance(value, list):
                    parts.append(block_text(value))
        return "\n".join(parts)
    if isinstance(content, dict):
        return block_text([content])
    return json.dumps(content, sort_keys=True, default=str)


def reasoning_text(content: Any) -> str:
    """The thinking blocks of a message ``content`` (Anthropic's ``thinking`` key,
    AgentDojo's ``content``); redacted thinking has no readable text."""
    if not isinstance(content, list):
        return ""
    parts = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "thinking":
            value = block.get("thinking", block.get("content"))
            if isinstance(value, str):
                parts.append(value)
    return "\n".join(parts)


def parse_arguments(raw: Any) -> Any:
    """Tool-call arguments: a JSON object string becomes the object; anything else is kept."""
    if isinstance(raw, str):
        stripped = raw.strip()
        if stripped.startswith("{"):
            try:
                return json.loads(stripped)
            except ValueError:
                return raw
    return raw


_GENERIC_DIRS = frozenset({"trajs", "trajectories", "results", "runs", "logs", "data", "simulations"})


def run_label(path: str, instance: str | None = None) -> str | None:
    """The name of the run folder holding ``path``: the nearest parent that is not
    the instance's own folder nor a generic one (``trajs``, ``results``...). Read from
    the absolute path: the same file gives the same label from any working folder."""
    for parent in PurePath(os.path.abspath(path)).parents:
        name = parent.name
        if not name or name in (".", ".."):
            return None
        if name == instance or name.lower() in _GENERIC_DIRS:
            continue
        return name
    return None


class SessionBuilder:
    """Accumulates one session's events with ``seq`` 1, 2, 3... and the turn state."""

    def __init__(self, session: str, agent: str | None) -> None:
        self.session = session_id(session)
        self.agent = agent
        self.events: list[AgentEvent] = []
        self.in_turn = False
        self.calls = 0
        self.tool_of_call: dict[str, str] = {}

    def _common(self, ts: float | None) -> dict[str, Any]:
        return {"session": self.session, "agent": self.agent, "seq": len(self.events) + 1, "ts": ts}

    def turn_start(self, ts: float | None = None) -> None:
        if self.in_turn:
            self.turn_end(ts)
        self.events.append(TurnStart(**self._common(ts)))
        self.in_turn = True

    def ensure_turn(self, ts: float | None = None) -> None:
        if not self.in_turn:
            self.turn_start(ts)

    def turn_end(self, ts: float | None = None) -> None:
        if self.in_turn:
            self.events.append(TurnEnd(**self._common(ts)))
            self.in_turn = False

    def text(self, text: str, role: TextRole = "assistant", ts: float | None = None) -> None:
        if not text.strip():
            return
        self.ensure_turn(ts)
        self.events.append(Text(**self._common(ts), text=bounded(text), role=role))

    def call(self, tool: str, args: Any, call_id: str | None = None, ts: float | None = None) -> None:
        self.ensure_turn(ts)
        tool = tool or "unknown"
        if isinstance(args, str):
            args = bounded(args)
        elif isinstance(args, dict):
            args = {k: bounded(v) if isinstance(v, str) else v for k, v in args.items()}
        self.events.append(ToolCall(**self._common(ts), tool=tool, args=args, call_id=call_id))
        self.calls += 1
        if call_id is not None:
            self.tool_of_call[call_id] = tool

    def result(
        self,
        tool: str,
        result: str,
        call_id: str | None = None,
        error: str | None = None,
        ts: float | None = None,
    ) -> None:
        self.ensure_turn(ts)
        self.events.append(
            ToolResult(
                **self._common(ts),
                tool=tool or "unknown",
                call_id=call_id,
                error=bounded_error(error) if error is not None else None,
                result=bounded(result),
                result_bytes=utf8_len(result),
            )
        )

    def usage(
        self,
        model: str | None = None,
        input_tokens: Any = None,
        output_tokens: Any = None,
        cost_usd: Any = None,
        ts: float | None = None,
        context_window: int | None = None,
    ) -> None:
        fields: dict[str, Any] = {
            "input_tokens": non_negative_int(input_tokens),
            "output_tokens": non_negative_int(output_tokens),
            "cost_usd": non_negative_float(cost_usd),
        }
        if all(v is None for v in fields.values()):
            return
        self.ensure_turn(ts)
        self.events.append(
            Usage(**self._common(ts), model=model or None, context_window=context_window, **fields)
        )

    def final_answer(self, text: str, ts: float | None = None) -> None:
        if not text.strip():
            return
        self.ensure_turn(ts)
        self.events.append(FinalAnswer(**self._common(ts), text=bounded(text)))

    def finish(
        self, source: str, ended: str | None, extra: dict[str, Any] | None = None
    ) -> ImportedSession:
        self.turn_end()
        return ImportedSession(
            session=self.session,
            agent=self.agent,
            source=source,
            events=self.events,
            ended=ended,
            extra=extra or {},
        )


def sub(obj: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``obj[key]`` when it is an object, else an empty one (formats leave fields out)."""
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def require_dict(value: Any, record: int | None, where: str, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RecordError(record, f"{what} must be an object, not {type(value).__name__}", where)
    return value


def require_list(value: Any, record: int | None, where: str | None, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise RecordError(record, f"{what} must be a list, not {type(value).__name__}", where)
    return value


_LEADING_EXCEPTION = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Timeout))\b")


def exception_name(text: str) -> str | None:
    """``RateLimitError`` from ``"litellm.RateLimitError: ..."`` or ``"InternalServerError(...)"``."""
    match = _LEADING_EXCEPTION.match(text)
    if not match:
        return None
    return match.group(1).rsplit(".", 1)[-1]


# ------------------------------------------------------------------ conformance
#
# Recorded sessions carry what their harness wrote: millisecond timestamps, model
# names of any length, token counts no real call has, a file name that is not UTF-8,
# a lone surrogate a JSON parser let through. Every event leaves an importer inside
# the contract's bounds (events.py), so that what `import` writes, `replay` and the
# processor accept; what cannot be brought inside is named as the file's failure.

_NAME_FIELDS = ("session", "agent", "tool", "call_id", "model", "result_digest")
_COUNT_FIELDS = ("input_tokens", "output_tokens", "context_window", "chars", "result_bytes")
_TEXT_FIELDS = ("text", "error")
_FREE_FIELDS = ("args", "result")
_TOO_DEEP = "[a value nested deeper than the contract's 64 levels, left out]"


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate (which UTF-8 cannot carry) as ``?``."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def name_id(raw: str) -> str:
    """A contract name (1–256 chars, UTF-8): long ones keep a prefix and a hash of the whole."""
    return session_id(clean_text(raw))


def _clean_value(value: Any, budget: list[int]) -> Any:
    """A JSON value with its strings (keys too) cleaned, walked at most ``budget`` nodes."""
    budget[0] -= 1
    if budget[0] < 0:
        raise RecordError(None, "a value too large to check")
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        return [_clean_value(item, budget) for item in value]
    if isinstance(value, dict):
        return {clean_text(str(k)): _clean_value(v, budget) for k, v in value.items()}
    return value


def seconds(value: float) -> float | None:
    """Unix seconds from a stamp in seconds, milliseconds, microseconds or nanoseconds
    (harnesses write all four); None for a time no unit brings within the contract."""
    for divisor in (1.0, 1e3, 1e6, 1e9):
        scaled = value / divisor
        if scaled <= MAX_TS:
            return scaled
    return None


def conform(session: ImportedSession) -> ImportedSession:
    """The session with every event inside the contract's bounds (see above).

    Raises :class:`RecordError` (no record number: the file's failure) for an event
    that still does not decode after that, which is a fault of the importer."""
    name = name_id(session.session)
    agent = name_id(session.agent) if session.agent else session.agent
    events: list[AgentEvent] = []
    for index, event in enumerate(session.events, start=1):
        changes: dict[str, Any] = {}
        if event.session != name:
            changes["session"] = name
        if event.agent != agent:
            changes["agent"] = agent
        for field in _NAME_FIELDS[2:]:
            value = getattr(event, field, None)
            if isinstance(value, str) and len(value) > MAX_NAME_CHARS:
                changes[field] = name_id(value)
        for field in _COUNT_FIELDS:
            value = getattr(event, field, None)
            if isinstance(value, int) and value > MAX_COUNT:
                changes[field] = None  # no call has that many: a broken counter
        cost = getattr(event, "cost_usd", None)
        if isinstance(cost, float) and cost > MAX_USD:
            changes["cost_usd"] = None
        if event.ts is not None and event.ts > MAX_TS:
            changes["ts"] = None  # parse_ts reads the units; this is a stamp from elsewhere
        for field in _FREE_FIELDS:
            value = getattr(event, field, None)
            if value is not None and _too_deep(value):
                changes[field] = _TOO_DEEP
        if changes:
            event = msgspec.structs.replace(event, **changes)
        try:
            encoded = encode(event)
        except UnicodeEncodeError:
            fixed: dict[str, Any] = {}
            for field in (*_NAME_FIELDS, *_TEXT_FIELDS):
                value = getattr(event, field, None)
                if isinstance(value, str):
                    fixed[field] = clean_text(value)
            for field in _FREE_FIELDS:
                value = getattr(event, field, None)
                if value is not None:
                    fixed[field] = _clean_value(value, [1_000_000])
            event = msgspec.structs.replace(event, **fixed)
            encoded = encode(event)
        try:
            decode_agent_event(encoded)
        except (msgspec.DecodeError, ValueError) as exc:
            raise RecordError(
                None, f"event {index} of session {name!r} is outside the contract: {exc}"
            ) from None
        events.append(event)
    return msgspec.structs.replace(session, session=name, agent=agent, events=events)


def _too_deep(value: Any) -> bool:
    try:
        check_nesting(ToolResult(session="s", tool="t", result=value))
    except msgspec.ValidationError:
        return True
    return False
