"""Client library: publish agent events, subscribe to trips to halt agents, reset sessions.

Three modules: :mod:`.publish` (the publishers), :mod:`.subscribe` (filters and
the trip subscriber) and :mod:`.control` (resetting a session and waiting for
the processor's confirmation); everything is importable from here.

The main classes:

* :class:`AsyncPublisher`, for asyncio agent runtimes. Events go into a
  bounded in-memory buffer; a background task drains it into an aiokafka
  producer (``acks="all"``, ``enable_idempotence=False``, batching through
  ``linger_ms`` / ``max_batch_size``). Publishing is a plain method call that
  never awaits the network, so a slow or absent broker never stalls the agent.
  When the buffer is full the **oldest** buffered event is dropped and counted
  in ``publisher.stats.dropped``: the newest events describe what the agent is
  doing now, which is what the watchdog needs when the broker comes back, and
  dropping old events leaves the per-session ``seq`` order intact (the
  processor only skips a ``seq`` that is not above the last one applied).
* :class:`Publisher`, the same for synchronous runtimes: an
  :class:`AsyncPublisher` on a background thread with its own event loop.
  Its methods return after a put into the bounded buffer.
* :class:`TripSubscriber`, for halting controllers: consumes the output topic
  in a consumer group, selects records by their ``type`` / ``signal`` /
  ``guardrail`` headers without decoding the others, decodes the selected ones
  into output Structs, drops duplicates by their deterministic ``id``, and
  commits a record's offset only after the code handling it has returned
  (at-least-once).
* :class:`AsyncSessionControl` (and :class:`SessionControl`, its synchronous
  twin), for whoever clears halts: sends a validated ``reset`` to the control
  topic keyed by the session and waits, with a timeout, for the
  ``guardrail_reset`` the processor answers it with, telling this reset's
  answer from any other's by the fields the processor echoes. The result is
  typed: :class:`ResetConfirmed` (with the answer) or :class:`ResetTimedOut`.
  ``streamguard reset`` is built on it.

Each publisher has helpers (``tool_call``, ``tool_result``, ``text``,
``turn_start``, ``turn_end``, ``usage``, ``final_answer``) that fill ``agent``,
``ts`` (wall clock) and ``seq``. ``seq`` is kept per session by the publisher
and increases by one per event; a session's first ``seq`` is the current time
in microseconds (and never below a value already handed out), so a restarted
runtime, or a session whose counter was forgotten, keeps publishing values
above the ones the processor has already applied.

Partitioning: records are keyed by session id and aiokafka's default
partitioner is murmur2, the hash the Java client uses. Every publisher of the
events topic must agree on it, or one session's events could be split over
two partitions and reach two processor instances. Publishers built on
librdkafka (confluent-kafka, rdkafka-based Go and Rust clients) default to a
CRC32-based partitioner: set ``partitioner=murmur2_random`` on them.

See ``docs/client.md`` for examples.
"""

from __future__ import annotations

from .control import (
    AsyncSessionControl,
    InvalidReset,
    PendingReset,
    ResetConfirmed,
    ResetOutcome,
    ResetSent,
    ResetTimedOut,
    SessionControl,
    TopicNotFound,
    confirms,
    encode_reset,
    make_reset,
)
from .defaults import DEFAULT_ALERTS_TOPIC, DEFAULT_CONTROL_TOPIC, DEFAULT_EVENTS_TOPIC
from .publish import AsyncPublisher, InvalidEvent, Publisher, PublisherStats, encode_event
from .subscribe import (
    Filter,
    SubscriberStats,
    TripSubscriber,
    header_decision,
    header_fields,
    output_fields,
    select_record,
)

__all__ = [
    "DEFAULT_ALERTS_TOPIC",
    "DEFAULT_CONTROL_TOPIC",
    "DEFAULT_EVENTS_TOPIC",
    "AsyncPublisher",
    "AsyncSessionControl",
    "Filter",
    "InvalidEvent",
    "InvalidReset",
    "PendingReset",
    "Publisher",
    "PublisherStats",
    "ResetConfirmed",
    "ResetOutcome",
    "ResetSent",
    "ResetTimedOut",
    "SessionControl",
    "SubscriberStats",
    "TopicNotFound",
    "TripSubscriber",
    "confirms",
    "encode_event",
    "encode_reset",
    "header_decision",
    "header_fields",
    "make_reset",
    "output_fields",
    "select_record",
]
