"""What to do with one input record: apply it, skip it, dead-letter it, re-route it.

Pure functions over a record's bytes and what the processor knows of its
session; the processor acts on the verdict (and counts it). Every reason a
record can be dead-lettered or skipped is a :data:`DeadLetterReason` or a
:data:`SkipReason`: the documented label values of
``streamguard_dead_letters_total`` and ``streamguard_events_skipped_total``.

The hot path of the processor inlines the common case (a well-formed event of
a session already held on its home partition, in order) and calls
:func:`route_event` for everything else.
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple, Protocol, get_args

import msgspec

from ..events import (
    AgentEvent,
    ControlEvent,
    ControlOnAgentStream,
    NestingTooDeep,
    Reset,
    ScopeReset,
    UnknownEventType,
    decode_agent_event,
    decode_operator_event,
)

DeadLetterReason = Literal[
    "malformed",
    "invalid_event",
    "too_deep",
    "null_value",
    "key_mismatch",
    "not_home_partition",
    "partition_mismatch",
    "control_on_events_topic",
    "not_a_control_event",
    "unknown_type",
    "processing_error",
    "output_too_large",
    "invalid_fleet_fact",
    "invalid_circuit",
]
SkipReason = Literal[
    "unknown_type",
    "already_applied",
    "already_processed",
    "unrestorable_snapshot",
    "duplicate_snapshot",
    "seq_not_newer",
]
SecurityKind = Literal[
    "control_on_events_topic", "forged_header", "forged_reroute", "agent_header_missing",
    "tenant_header_missing",
]

DEAD_LETTER_REASONS: tuple[str, ...] = get_args(DeadLetterReason)
SKIP_REASONS: tuple[str, ...] = get_args(SkipReason)
SECURITY_KINDS: tuple[str, ...] = get_args(SecurityKind)


class Apply(NamedTuple):
    """Apply the event to its session."""

    event: Any


class Skip(NamedTuple):
    """Consumed, deliberately not applied (counted)."""

    reason: SkipReason


class DeadLetter(NamedTuple):
    """Copy the record to the dead-letter topic with ``reason``; ``security`` names the
    security event it also is, ``misrouted`` that it sits on a foreign partition."""

    reason: DeadLetterReason
    error: str
    security: SecurityKind | None = None
    misrouted: bool = False


class Reroute(NamedTuple):
    """Re-produce the control record to its session's home partition."""

    target: int


class Held(Protocol):
    """Where the processor holds a session: its partition, the last events and
    control offsets applied to it (:class:`~streamguard.kafka.sessions.SessionMeta`)."""

    @property
    def partition(self) -> int: ...
    @property
    def events_offset(self) -> int: ...
    @property
    def control_offset(self) -> int: ...


def _malformed(exc: Exception) -> DeadLetter:
    """The dead letter of a value the decoders refused (either topic)."""
    if isinstance(exc, NestingTooDeep):
        return DeadLetter("too_deep", str(exc))
    if isinstance(exc, msgspec.ValidationError):
        return DeadLetter("invalid_event", str(exc))
    if isinstance(exc, msgspec.DecodeError):
        return DeadLetter("malformed", str(exc))
    return DeadLetter("malformed", repr(exc))  # a value that is not bytes (a broken deserializer)


def decode_event(value: bytes | None) -> AgentEvent | DeadLetter | Skip:
    """An events-topic record's value as an agent event, or why not."""
    if value is None:
        return DeadLetter("null_value", "an events record needs a JSON value")
    try:
        return decode_agent_event(value)
    except UnknownEventType:
        return Skip("unknown_type")
    except ControlOnAgentStream as exc:
        return DeadLetter("control_on_events_topic", str(exc), security="control_on_events_topic")
    except (msgspec.DecodeError, TypeError) as exc:
        return _malformed(exc)


def _shown(key: bytes | None) -> bytes | None:
    """A record key as a dead letter's reason quotes it: its first 64 bytes."""
    return key if key is None or len(key) <= 64 else key[:64] + b"..."


def route_event(
    event: AgentEvent,
    key: bytes | None,
    offset: int,
    partition: int,
    held: Held | None,
    home: int,
) -> Apply | DeadLetter | Skip:
    """Whether ``event`` (at ``offset`` of events ``partition``) may be applied.

    A session's state is created only on its ``home`` partition (the
    partitioner's choice for its key): a record keyed as a session but produced
    to another partition can neither start a rival state nor make the real
    session's records look misplaced.
    """
    session = event.session
    if key is None or key != session.encode():
        return DeadLetter("key_mismatch", f"record key {_shown(key)!r} is not the event's session {session!r}")
    if (held is None or held.partition != partition) and home != partition:
        return DeadLetter(
            "not_home_partition",
            f"session {session!r} belongs on partition {home} (murmur2 of its key); "
            "publishers must use the default partitioner",
            misrouted=True,
        )
    if held is not None:
        if held.partition != partition:
            # state from before the home rule, held on another partition of ours
            return DeadLetter(
                "partition_mismatch", f"session {session!r} lives on partition {held.partition}"
            )
        if offset <= held.events_offset:
            return Skip("already_applied")
    return Apply(event)


def decode_control(value: bytes | None) -> ControlEvent | DeadLetter:
    """A control-topic record's value as a control event, or why not."""
    if value is None:
        return DeadLetter("null_value", "a control record needs a JSON value")
    try:
        event = decode_operator_event(value)
    except UnknownEventType as exc:
        return DeadLetter("unknown_type", str(exc))
    except (msgspec.DecodeError, TypeError) as exc:
        return _malformed(exc)
    if not isinstance(event, Reset | ScopeReset):
        tag = type(event).__struct_config__.tag
        return DeadLetter(
            "not_a_control_event",
            f"{tag!r} is an agent event; the control topic takes control events only",
        )
    return event


def route_scope_reset(event: ScopeReset, key: bytes | None, known_rules: set[str]) -> Apply | DeadLetter:
    """Whether an operator's close of a fleet circuit may be forwarded to the fleet stage.

    Any control partition will do (the fleet stage owns scopes by the facts
    topic's partitioning, not the sessions'); the key must be the scope, and
    the scope must name a rule of the policy.
    """
    from ..fleet_windows import parse_scope

    scope = event.scope
    if key is not None and key != scope.encode():
        return DeadLetter("key_mismatch", f"record key {_shown(key)!r} is not the event's scope {scope!r}")
    parsed = parse_scope(scope)
    if parsed is None:
        return DeadLetter("invalid_event", f"{scope!r} is not a scope (rule:agent=value or rule:tenant=value)")
    if parsed[0] not in known_rules:
        return DeadLetter("invalid_event", f"scope {scope!r} names no [[fleet]] rule of the policy")
    return Apply(event)


def route_control(
    event: Reset,
    key: bytes | None,
    offset: int,
    partition: int,
    held: Held | None,
    home: int,
    rerouted: bool,
) -> Apply | DeadLetter | Skip | Reroute:
    """Whether a control record may be applied here, or must go home.

    The home partition always wins: a control record elsewhere is re-routed
    there once; one that already carries the re-route header and is still not
    home was not re-routed by streamguard (its copies always land at home).
    """
    session = event.session
    if key is not None and key != session.encode():
        return DeadLetter("key_mismatch", f"record key {_shown(key)!r} is not the event's session {session!r}")
    if home != partition:
        if rerouted:
            return DeadLetter(
                "not_home_partition",
                f"session {session!r} belongs on partition {home}; a re-routed record "
                "never lands elsewhere",
                security="forged_reroute",
                misrouted=True,
            )
        return Reroute(home)
    if held is not None:
        if held.partition != partition:
            return DeadLetter(
                "partition_mismatch", f"session {session!r} lives on partition {held.partition}"
            )
        if offset <= held.control_offset:
            return Skip("already_applied")
    return Apply(event)
