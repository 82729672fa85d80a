"""The event contract, version 1.

Agent runtimes publish one JSON object per Kafka record (UTF-8), keyed by the
session id. Each object carries a ``type`` tag; msgspec decodes the tagged union
straight into the Structs below, validating types and bounds on the way.

Three families live here:

* **agent events** (:data:`AgentEvent`): what the agents' events topic may carry;
* **control events** (:data:`ControlEvent`): operator commands. They are accepted
  only from the control source (the control topic, or an operator-supplied replay
  file), never from the agents' stream: an agent that could clear its own
  guardrail would not be guarded;
* **output events** (:data:`OutputEvent`): what streamguard publishes.

``docs/events.md`` documents every field; ``streamguard schema`` prints the JSON
Schemas generated from these classes.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

CONTRACT_VERSION = 1

# Every field is bounded to what the engine's state and its msgpack snapshots can
# hold, and to what an output may copy without outgrowing a Kafka request: an
# event outside these bounds is refused at decoding (dead-lettered by the
# processor), never accepted and then failed on at a checkpoint.
MAX_NAME_CHARS = 256
MAX_SEQ = 2**53  # exact in every JSON reader, far below msgpack's 2**64
MAX_COUNT = 2**40  # tokens, bytes, chars per event: session sums stay far below 2**63
MAX_TS = 1e11  # unix seconds (the year 5138); also rules out nonsense far-future stamps
MAX_USD = 1e6  # the cost of one model call
MAX_NESTING = 64  # levels of arrays/objects in a value, nested JSON strings included

SessionId = Annotated[str, Meta(min_length=1, max_length=MAX_NAME_CHARS)]
Name = Annotated[str, Meta(max_length=MAX_NAME_CHARS)]
NonNegInt = Annotated[int, Meta(ge=0, le=MAX_COUNT)]
NonNegFloat = Annotated[float, Meta(ge=0, le=MAX_USD)]
Seq = Annotated[int, Meta(ge=0, le=MAX_SEQ)]
TurnNumber = Annotated[int, Meta(ge=-MAX_SEQ, le=MAX_SEQ)]
Timestamp = Annotated[float, Meta(ge=0, le=MAX_TS)]

ToolKind = Literal["resolve", "read", "write", "user_input"]
TextRole = Literal["assistant", "reasoning", "user", "system", "tool"]
Severity = Literal["warn", "critical"]
Scope = Literal["session", "turn"]
Guardrail = Literal["watchdog", "cost_ceiling", "context_budget", "fleet"]
ResetTarget = Literal["watchdog", "cost_ceiling", "all"]
# What a reset receipt can name: a session reset's target, or ``fleet`` when a
# fleet circuit that halted the session closed (docs/fleet.md).
ReleasedGuardrail = Literal["watchdog", "cost_ceiling", "all", "fleet"]


class Event(Struct, tag_field="type", kw_only=True, omit_defaults=True):
    """Fields common to every agent event."""

    session: Annotated[SessionId, Meta(description="the session id; must equal the record key")]
    agent: Annotated[Name, Meta(description="the deployment or agent name: selects [[agents]] policy overrides")] | None = None
    tenant: Annotated[Name, Meta(description="the customer or user the session works for: a scope of [[fleet]] guardrails (docs/fleet.md)")] | None = None
    ts: Annotated[Timestamp, Meta(description="event time, unix seconds (default: the record timestamp)")] | None = None
    seq: Annotated[Seq, Meta(description="per-session counter: an event not above the last one applied is a replay")] | None = None
    turn: Annotated[Name | TurnNumber, Meta(description="the turn the event belongs to; a change acts as a turn start")] | None = None


class ToolCall(Event, tag="tool_call"):
    tool: Annotated[Name, Meta(description="the tool called")]
    args: Annotated[Any, Meta(description="the arguments (any JSON; a string holding a JSON object is read as it)")] = None
    call_id: Annotated[Name, Meta(description="pairs the call with its result")] | None = None
    kind: Annotated[ToolKind, Meta(description="what the call does, for the verification machine")] | None = None


class ToolResult(Event, tag="tool_result"):
    tool: Annotated[Name, Meta(description="the tool that answered")]
    call_id: Annotated[Name, Meta(description="the call this result answers")] | None = None
    error: Annotated[str, Meta(description="non-empty: the call failed, with this message")] | None = None
    no_op: Annotated[bool, Meta(description="the tool says the call changed nothing")] = False
    result: Annotated[Any, Meta(description="the payload (any JSON)")] = None
    result_digest: Annotated[Name, Meta(description="a fingerprint of the payload, for agents that must not ship it")] | None = None
    result_bytes: Annotated[NonNegInt, Meta(description="the payload size as the agent saw it")] | None = None


class Text(Event, tag="text"):
    text: Annotated[str, Meta(description="what was said")] | None = None
    chars: Annotated[NonNegInt, Meta(description="its length, when the text itself is not shipped")] | None = None
    role: Annotated[TextRole, Meta(description="who said it; only assistant text counts as the agent speaking")] = "assistant"


class TurnStart(Event, tag="turn_start"):
    pass


class TurnEnd(Event, tag="turn_end"):
    pass


class Usage(Event, tag="usage"):
    model: Annotated[Name, Meta(description="the model called")] | None = None
    input_tokens: Annotated[NonNegInt, Meta(description="tokens sent: the measured context")] | None = None
    output_tokens: Annotated[NonNegInt, Meta(description="tokens generated")] | None = None
    cost_usd: Annotated[NonNegFloat, Meta(description="the cost of this model call; the session's spend is their sum")] | None = None
    context_window: Annotated[NonNegInt, Meta(description="the model's context window, in tokens")] | None = None


class FinalAnswer(Event, tag="final_answer"):
    text: Annotated[str, Meta(description="the agent's answer for the turn")] | None = None


AgentEvent = ToolCall | ToolResult | Text | TurnStart | TurnEnd | Usage | FinalAnswer
AGENT_EVENT_TYPES: frozenset[str] = frozenset(
    str(c.__struct_config__.tag)
    for c in (ToolCall, ToolResult, Text, TurnStart, TurnEnd, Usage, FinalAnswer)
)


class Reset(Struct, tag_field="type", tag="reset", kw_only=True, omit_defaults=True):
    """Operator reset of a session's guardrails (control source only)."""

    session: SessionId
    guardrail: ResetTarget = "all"
    additional_budget_usd: Annotated[float, Meta(gt=0, le=MAX_USD)] | None = None
    by: Name | None = None
    ts: Timestamp | None = None


class ScopeReset(Struct, tag_field="type", tag="scope_reset", kw_only=True, omit_defaults=True):
    """Operator close of a fleet circuit (control source only): every session the
    circuit halted runs again (docs/fleet.md). Keyed by the scope on the control topic."""

    scope: SessionId
    by: Name | None = None
    ts: Timestamp | None = None


ControlEvent = Reset | ScopeReset
CONTROL_EVENT_TYPES: frozenset[str] = frozenset({"reset", "scope_reset"})


# --------------------------------------------------------------------------- outputs


class Output(Struct, tag_field="type", kw_only=True):
    """Fields common to every output event.

    ``id`` is deterministic: the same input stream yields the same ids, so a
    consumer can drop the duplicates an at-least-once pipeline may deliver.
    ``seq`` is the ``seq`` of the input event that caused the output (null when
    that event carried none).
    """

    id: str
    session: str
    agent: str | None
    ts: float | None
    seq: int | None


class Alert(Output, tag="alert"):
    signal: str
    severity: Severity
    scope: Scope
    reason: str
    guidance: str
    detail: dict[str, Any] = {}


class GuardrailTrip(Output, tag="guardrail_trip"):
    guardrail: Guardrail
    signal: str
    scope: Scope
    halted_turn: bool
    session_halted: bool
    reason: str
    consecutive_cuts: int = 0
    bound: Literal["per_turn", "per_session"] | None = None


class Feedback(Output, tag="feedback"):
    signals: list[str]
    text: str


class GuardrailReset(Output, tag="guardrail_reset"):
    guardrail: ReleasedGuardrail
    accepted: bool
    reason: str
    by: str | None = None
    max_session_usd: float | None = None
    still_halted_by: list[str] = []


class FleetAlert(Output, tag="fleet_alert"):
    """A ``[[fleet]]`` limit crossed by one scope (docs/fleet.md).

    Keyed by the scope on the alerts topic, and ``session`` carries the scope
    (``rule:by=value``), so consumers that de-duplicate by ``id`` and route by
    ``session`` handle it like any output; ``agent`` is the scope's agent when
    the rule groups by agent. ``seq`` is always null.
    """

    rule: str
    by: Literal["agent", "tenant"]
    value: str
    metric: str
    observed: float
    limit: float
    window_s: float
    action: Literal["alert", "halt"]
    circuit: Literal["open", "closed"]
    reason: str


OutputEvent = Alert | GuardrailTrip | Feedback | GuardrailReset | FleetAlert


# --------------------------------------------------------------------------- codecs

agent_decoder = msgspec.json.Decoder(AgentEvent)
control_decoder = msgspec.json.Decoder(ControlEvent)
output_decoder = msgspec.json.Decoder(OutputEvent)
_any_decoder = msgspec.json.Decoder()
encoder = msgspec.json.Encoder()


class UnknownEventType(Exception):
    """A well-formed object whose ``type`` this version does not know (skip, count)."""

    def __init__(self, type_name: str) -> None:
        super().__init__(f"unknown event type {type_name!r}")
        self.type_name = type_name


class ControlOnAgentStream(Exception):
    """A control event (``reset``) found where only agent events are allowed."""

    def __init__(self, type_name: str) -> None:
        super().__init__(
            f"{type_name!r} is a control event and is accepted only from the control source"
        )
        self.type_name = type_name


class NestingTooDeep(msgspec.ValidationError):
    """A value nested deeper than :data:`MAX_NESTING` levels (arrays, objects, or
    JSON text inside a string argument). Refused: nothing downstream has to
    defend its recursion against it."""

    def __init__(self, where: str = "the event") -> None:
        super().__init__(f"{where} is nested deeper than {MAX_NESTING} levels")


MAX_INT_DIGITS = 640
"""Digits of the longest integer `streamguard run` and `bridge` decode (the interpreter's
``sys.set_int_max_str_digits``, set by :mod:`streamguard.kafka.lifecycle`): reading and
writing an integer costs time quadratic in its digits, and CPython's default allows
4,300. A record with a longer one is refused by the decoder (``invalid_event``)."""


def _may_be_deep(data: bytes | str) -> bool:
    """Cheap upper bound: a value cannot nest deeper than the record has brackets.

    Two C-speed counts per record; only the rare record with more than
    :data:`MAX_NESTING` brackets is examined (:func:`_record_too_deep`). Brackets spelled
    as unicode escapes inside a string are not counted (a third search on every record
    would cost more than the rest of this test): JSON text written that way is read
    downstream by code that guards its own recursion (``tests/test_hostile_cost.py``).
    """
    if isinstance(data, str):
        return data.count("[") + data.count("{") > MAX_NESTING
    return data.count(b"[") + data.count(b"{") > MAX_NESTING


_JSON_OPENERS = frozenset("[{")
_JSON_SPACE = " \t\n\r"


def _json_opener(text: str) -> bool:
    """Whether a string starts like JSON text (leading whitespace allowed), without copying it."""
    head = text[:1]
    if head in _JSON_SPACE and head:
        head = text.lstrip(_JSON_SPACE)[:1]
    return head in _JSON_OPENERS


def _depth_exceeds(value: Any, limit: int) -> bool:
    """Whether ``value`` nests deeper than ``limit`` levels.

    A string that holds JSON text counts with its own depth, since the canonicalization
    of string arguments reads it as JSON. The walk goes level by level, children
    gathered in C (``list.extend``), with no per-element tuple or recursion: its cost is
    one type test per element.
    """
    level: list[Any] = [value]
    depth = 0
    while level:
        children: list[Any] = []
        extend = children.extend
        containers = False
        for item in level:  # the list grows with decoded JSON text of this level
            kind = type(item)
            if kind is dict:
                containers = True
                extend(item.values())
            elif kind is list:
                containers = True
                extend(item)
            elif (
                kind is str
                and item[:1]
                and _json_opener(item)
                and item.count("[") + item.count("{") > limit - depth
            ):
                try:
                    inner = _any_decoder.decode(item)
                except RecursionError:
                    return True
                except msgspec.DecodeError:
                    continue  # not JSON: a plain string
                level.append(inner)  # at this string's depth
        if containers:
            depth += 1
            if depth > limit:
                return True
        level = children
    return False


# The raw record's own bracket depth, computed in C: strings removed, every bracket kept
# as "[" or "]" (valid JSON nests them properly, whatever their kind), then innermost
# pairs removed a level per pass. Exact for a record with no string that may hold JSON
# text (which the walk decodes and counts); the event object is one level.
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
# A string that may open with JSON text: "[", "{", after whitespace or escaped whitespace,
# or any string opening with a \u escape (which may spell a bracket).
_JSON_TEXT_STRING = re.compile(rb'"(?:[ \t]|\\[nrt])*(?:[\[{]|\\u)')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_ONE_KIND = bytes.maketrans(b"{}", b"[]")


def _record_too_deep(data: bytes | str, event: Any) -> None:
    """Raise :class:`NestingTooDeep` for a record whose ``args`` or ``result`` nest too deep
    (called only for records with more than :data:`MAX_NESTING` brackets)."""
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
    if (b'"[' in raw or b'"{' in raw or b'" ' in raw or b'"\t' in raw or b'"\\' in raw) and (
        _JSON_TEXT_STRING.search(raw)  # the substring tests spare the pattern most records
    ):
        check_nesting(event)  # JSON text inside a string counts: the walk decodes it
        return
    # Without an escaped quote, every other piece between quotes is a string's content.
    unquoted = b"".join(raw.split(b'"')[::2]) if b'\\"' not in raw else _STRING.sub(b"", raw)
    skeleton = unquoted.translate(_ONE_KIND, _NOT_BRACKETS)
    for _ in range(MAX_NESTING + 1):  # the event object's level, then the bound
        if not skeleton:
            return
        skeleton = skeleton.replace(b"[]", b"")
    if skeleton:
        # Deeper than the bound somewhere: the walk says whether in args or result (a
        # field the contract does not know is ignored, deep or not).
        check_nesting(event)


def check_nesting(event: Any) -> None:
    """Raise :class:`NestingTooDeep` if a free-form field of ``event`` nests too deep."""
    for field in ("args", "result"):
        value = getattr(event, field, None)
        if value is not None and _depth_exceeds(value, MAX_NESTING):
            raise NestingTooDeep(f"{field!r}")


def _classify_failure(data: bytes | str, error: msgspec.DecodeError) -> Exception:
    """Tell an unknown/forbidden ``type`` apart from a malformed event.

    Runs only on the error path, so the extra untyped decode costs nothing on
    the hot path.
    """
    try:
        raw = _any_decoder.decode(data)
    except RecursionError:
        return NestingTooDeep()
    except msgspec.DecodeError:
        return error
    if not isinstance(raw, dict):
        return error
    type_name = raw.get("type")
    if not isinstance(type_name, str):
        return error
    if type_name in CONTROL_EVENT_TYPES:
        return ControlOnAgentStream(type_name)
    if type_name not in AGENT_EVENT_TYPES:
        return UnknownEventType(type_name)
    return error


def decode_agent_record(data: bytes | str) -> AgentEvent:
    """The hot path's decoder: typed decode plus the nesting bound.

    Raises :class:`msgspec.DecodeError` (a :class:`NestingTooDeep` among its
    subclasses) for anything the processor must classify further (through
    :func:`decode_agent_event`); a valid shallow event costs two byte counts
    on top of the decode.
    """
    try:
        event = agent_decoder.decode(data)
    except RecursionError:
        raise NestingTooDeep() from None
    if _may_be_deep(data):
        _record_too_deep(data, event)
    return event


def decode_agent_event(data: bytes | str) -> AgentEvent:
    """Decode one agent event.

    Raises :class:`UnknownEventType` for a future event type (skip and count),
    :class:`ControlOnAgentStream` for a control event on the agents' stream
    (refuse, count as a security event), :class:`NestingTooDeep` for a value
    nested deeper than :data:`MAX_NESTING`, and :class:`msgspec.DecodeError`
    (or its subclass ``ValidationError``) for anything else malformed.
    """
    try:
        event = agent_decoder.decode(data)
    except RecursionError:
        raise NestingTooDeep() from None
    except msgspec.DecodeError as exc:
        raise _classify_failure(data, exc) from exc
    if _may_be_deep(data):
        _record_too_deep(data, event)
    return event


def decode_operator_event(data: bytes | str) -> AgentEvent | ControlEvent:
    """Decode one event from an operator-trusted source (control topic, replay file).

    Such a source may carry control events as well as agent events.
    """
    try:
        event = agent_decoder.decode(data)
    except RecursionError:
        raise NestingTooDeep() from None
    except msgspec.DecodeError as exc:
        failure = _classify_failure(data, exc)
        if isinstance(failure, ControlOnAgentStream):
            return control_decoder.decode(data)
        raise failure from exc
    if _may_be_deep(data):
        _record_too_deep(data, event)
    return event


def encode(obj: Any) -> bytes:
    return encoder.encode(obj)


def json_schemas() -> dict[str, Any]:
    """JSON Schemas for the three families, generated from the Structs."""
    return {
        "contract_version": CONTRACT_VERSION,
        "agent_event": msgspec.json.schema(AgentEvent),
        "control_event": msgspec.json.schema(ControlEvent),
        "output_event": msgspec.json.schema(OutputEvent),
    }
