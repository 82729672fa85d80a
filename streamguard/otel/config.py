"""Settings of ``streamguard bridge``: the same style as ``streamguard run``.

Every setting has a flag (``--spans-topic``) and an environment variable with
the bridge's own prefix (``STREAMGUARD_BRIDGE_SPANS_TOPIC``), so a bridge and a
processor deployed from one environment never read each other's group id. A
flag wins over the environment, the environment over the default; values are
validated together at start-up and an invalid one is named with both spellings.
The connection settings, the parsing and the Kafka client options are the
shared :class:`~streamguard.kafka.config.KafkaSettings`, as for the processor.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

import msgspec
from msgspec import Meta

from ..kafka.config import (
    ConfigError,
    GroupSettings,
    Millis,
    Port,
    Seconds,
    TopicName,
)
from .mapping import TRACE, MappingConfig
from .otlp import Encoding

ENV_PREFIX = "STREAMGUARD_BRIDGE_"


class BridgeConfig(GroupSettings, kw_only=True, forbid_unknown_fields=True):
    """Everything ``streamguard bridge`` can be told."""

    ENV_PREFIX: ClassVar[str] = ENV_PREFIX
    PROG: ClassVar[str] = "streamguard bridge"
    DESCRIPTION: ClassVar[str] = (
        "Run the OpenTelemetry bridge: consume OTLP spans and logs (the Collector's "
        "Kafka exporter, or OTLP/HTTP), publish contract-v1 events keyed by session. "
        "Every flag also reads STREAMGUARD_BRIDGE_<NAME> from the environment (flags win)."
    )

    # -- connection: as `streamguard run` (KafkaSettings), under the bridge's own id
    client_id: Annotated[str, Meta(min_length=1)] = "streamguard-bridge"

    # -- consumer group: as `streamguard run` (GroupSettings), a group of its own
    group_id: Annotated[str, Meta(min_length=1)] = "streamguard-bridge"

    # -- topics
    spans_topic: TopicName = "otlp_spans"
    logs_topic: TopicName = "otlp_logs"
    sessions_topic: TopicName = "streamguard.otel.sessions"
    bridge_changelog_topic: TopicName = "streamguard.otel.changelog"
    events_topic: TopicName = "agent.events"
    dlq_topic: TopicName = "streamguard.otel.dlq"
    create_topics: bool = False
    partitions: Annotated[int, Meta(ge=1, le=100_000)] = 12
    replication_factor: Annotated[int, Meta(ge=1, le=32)] = 3

    # -- decoding and mapping
    otlp_encoding: Encoding = "auto"
    session_keys: list[str] = msgspec.field(
        default_factory=lambda: ["gen_ai.conversation.id", "session.id", TRACE]
    )
    max_payload_bytes: Annotated[int, Meta(ge=1024, le=256 * 1024 * 1024)] = 16 * 1024 * 1024
    max_content_bytes: Annotated[int, Meta(ge=256, le=1024 * 1024)] = 16 * 1024
    max_trace_sessions: Annotated[int, Meta(ge=0, le=10_000_000)] = 100_000

    # -- the reorder window and the bridge's state
    reorder_window_ms: Annotated[int, Meta(ge=0, le=600_000)] = 2_000
    max_pending_per_session: Annotated[int, Meta(ge=1, le=1_000_000)] = 1_000
    max_seen_per_session: Annotated[int, Meta(ge=1, le=100_000)] = 256
    max_sessions_per_partition: Annotated[int, Meta(ge=1, le=100_000_000)] = 200_000
    session_ttl_s: Seconds = 8 * 24 * 3600.0

    # -- processing and checkpoints
    max_poll_records: Annotated[int, Meta(ge=1, le=1_000_000)] = 500
    checkpoint_interval_ms: Millis = 1_000
    send_timeout_ms: Millis = 30_000
    linger_ms: Annotated[int, Meta(ge=0, le=60_000)] = 5

    # -- OTLP/HTTP receiver
    otlp_http_host: Annotated[str, Meta(min_length=1)] = "0.0.0.0"
    otlp_http_port: Port | None = None

    # -- observability and lifecycle
    metrics_host: Annotated[str, Meta(min_length=1)] = "0.0.0.0"
    metrics_port: Port = 9465
    shutdown_timeout_s: Seconds = 25.0

    HELP: ClassVar[dict[str, str]] = {
        **GroupSettings.HELP,
        "group_id": "consumer group shared by every bridge instance (never the processor's)",
        "spans_topic": "topic the Collector's Kafka exporter writes traces to",
        "logs_topic": "topic the Collector's Kafka exporter writes logs to",
        "sessions_topic": "the bridge's own topic of mapped records, keyed by session",
        "bridge_changelog_topic": "compacted topic of the bridge's per-session state, co-partitioned with the sessions topic",
        "events_topic": "topic of contract-v1 agent events that `streamguard run` consumes",
        "dlq_topic": "dead-letter topic for records the bridge cannot decode",
        "partitions": "partition count of the bridge's topics created by --create-topics",
        "otlp_encoding": "otlp_proto, otlp_json or auto (sniffed per record)",
        "session_keys": "attributes tried in order for the session id; `trace` is the trace id",
        "max_payload_bytes": "largest OTLP payload decoded (a bigger one is dead-lettered)",
        "max_content_bytes": "captured arguments, results and text are cut to this many bytes",
        "max_trace_sessions": "traces whose session is remembered for spans that carry none",
        "reorder_window_ms": "how long a session's events wait to be put in event-time order",
        "max_pending_per_session": "events a session may hold in its window (beyond: released early, counted)",
        "max_seen_per_session": "released record keys remembered per session to drop duplicates",
        "max_sessions_per_partition": "sessions whose seq counter is kept per partition (beyond: least recently active forgotten, counted)",
        "session_ttl_s": "forget a session's seq counter after this long without records (keep above the processor's halted TTL)",
        "checkpoint_interval_ms": "acknowledge, snapshot and commit at least this often",
        "otlp_http_host": "address of the OTLP/HTTP receiver",
        "otlp_http_port": "port of the OTLP/HTTP receiver (POST /v1/traces, /v1/logs); unset: off",
        "metrics_port": "port of /metrics, /healthz and /readyz (0: any free port)",
    }

    def validate(self) -> None:
        super().validate()
        d = type(self).describe
        topics = {
            name: getattr(self, name)
            for name in (
                "spans_topic", "logs_topic", "sessions_topic", "bridge_changelog_topic",
                "events_topic", "dlq_topic",
            )
        }
        seen: dict[str, str] = {}
        for name, topic in topics.items():
            if topic in seen:
                raise ConfigError(f"invalid {d(name)}: {topic!r} is already used by {d(seen[topic])}")
            seen[topic] = name
        if not self.session_keys:
            raise ConfigError(f"invalid {d('session_keys')}: name at least one attribute")

    def mapping(self) -> MappingConfig:
        return MappingConfig(
            session_keys=tuple(self.session_keys),
            max_content_bytes=self.max_content_bytes,
            max_trace_sessions=self.max_trace_sessions,
        )

    def input_topics(self) -> list[str]:
        return [self.spans_topic, self.logs_topic]


__all__ = ["BridgeConfig", "ConfigError"]
