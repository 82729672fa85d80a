"""Settings of ``streamguard run``: flags, environment, defaults, validation.

Every setting has a flag (``--events-topic``) and an environment variable
(``STREAMGUARD_EVENTS_TOPIC``); a flag wins over the environment, the
environment over the default. Values are validated together at start-up and an
invalid one is reported with both of its names, so a typo in a deployment
manifest fails the pod at once instead of at the first rebalance.

Secrets (``STREAMGUARD_SASL_PASSWORD``, ``STREAMGUARD_SSL_KEY_PASSWORD``) are
better passed through the environment than on a command line that ``ps`` shows.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal, Self

import msgspec
from msgspec import Meta, Struct

ENV_PREFIX = "STREAMGUARD_"

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER"]
CompressionType = Literal["none", "gzip", "snappy", "lz4", "zstd"]
LogLevel = Literal["debug", "info", "warning", "error"]
LogFormat = Literal["text", "json"]

Port = Annotated[int, Meta(ge=0, le=65535)]
PositiveInt = Annotated[int, Meta(ge=1)]
# The group protocol carries session, rebalance and poll timeouts as Int32: a larger
# value would pass here and fail inside the client after the join, naming no field.
Millis = Annotated[int, Meta(ge=1, le=2**31 - 1)]
Seconds = Annotated[float, Meta(gt=0)]
TopicName = Annotated[str, Meta(min_length=1, max_length=249, pattern=r"^[A-Za-z0-9._-]+$")]


class ConfigError(ValueError):
    """An invalid setting; the message names its flag and environment variable."""


class KafkaSettings(Struct, kw_only=True, forbid_unknown_fields=True):
    """What every streamguard job that talks to Kafka can be told: the connection,
    and the machinery that reads settings from flags and the environment,
    validates them and builds the clients' options.

    A job's settings subclass it with their own fields, ``ENV_PREFIX``, ``PROG``,
    ``DESCRIPTION`` and ``HELP``; ``validate`` checks the connection and the job's
    override adds its own cross-field checks.
    """

    ENV_PREFIX: ClassVar[str] = ENV_PREFIX
    PROG: ClassVar[str] = "streamguard"
    DESCRIPTION: ClassVar[str] = ""
    SECRETS: ClassVar[frozenset[str]] = frozenset({"sasl_password", "ssl_key_password"})

    # -- connection
    bootstrap_servers: Annotated[str, Meta(min_length=1)] = "localhost:9092"
    client_id: Annotated[str, Meta(min_length=1)] = "streamguard"
    security_protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: SaslMechanism = "PLAIN"
    sasl_username: str | None = None
    sasl_password: str | None = None
    sasl_kerberos_service_name: str = "kafka"
    sasl_kerberos_domain_name: str | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_key_password: str | None = None
    ssl_check_hostname: bool = True
    sasl_oauth_token_provider: str | None = None
    request_timeout_ms: Millis = 40_000
    compression_type: CompressionType = "none"
    client_properties: list[str] = []

    HELP: ClassVar[dict[str, str]] = {
        "bootstrap_servers": "comma-separated host:port list of the Kafka cluster",
        "client_id": "client id reported to the brokers",
        "security_protocol": "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
        "sasl_mechanism": "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, GSSAPI or OAUTHBEARER",
        "sasl_oauth_token_provider": "OAUTHBEARER: `module:name` of an aiokafka AbstractTokenProvider subclass or factory, called with no arguments (MSK IAM, Confluent Cloud)",
        "compression_type": "compression of produced records: none, gzip, snappy, lz4 or zstd (snappy, lz4 and zstd need the cramjam package)",
        "client_properties": "comma-separated KEY=VALUE options passed to the aiokafka clients as they are (aiokafka's parameter names, e.g. metadata_max_age_ms=60000), like kcat's -X; each goes to the clients that take it",
        "sasl_username": "SASL user name (PLAIN and SCRAM)",
        "sasl_password": "SASL password (prefer the environment variable)",
        "sasl_kerberos_service_name": "Kerberos service name (GSSAPI)",
        "sasl_kerberos_domain_name": "Kerberos domain name (GSSAPI)",
        "ssl_cafile": "CA bundle that signs the brokers' certificates",
        "ssl_certfile": "client certificate (mutual TLS)",
        "ssl_keyfile": "client private key (mutual TLS)",
        "ssl_key_password": "password of the client private key",
        "ssl_check_hostname": "verify that broker certificates match their host names",
        "request_timeout_ms": "timeout of one broker request",
    }

    # -------------------------------------------------------------- building

    @staticmethod
    def flag(name: str) -> str:
        return "--" + name.replace("_", "-")

    @classmethod
    def env_name(cls, name: str) -> str:
        return cls.ENV_PREFIX + name.upper()

    @classmethod
    def describe(cls, name: str) -> str:
        return f"{cls.flag(name)} / {cls.env_name(name)}"

    @classmethod
    def parser(cls, prog: str | None = None) -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser(prog=prog or cls.PROG, description=cls.DESCRIPTION)
        defaults = cls()
        for field in msgspec.structs.fields(cls):
            name = field.name
            default = getattr(defaults, name)
            help_text = cls.HELP.get(name, "")
            help_text += f" [env {cls.env_name(name)}"
            if name not in cls.SECRETS:
                shown = ",".join(default) if isinstance(default, list) else default
                help_text += f"; default {shown}"
            help_text += "]"
            if isinstance(default, bool):
                parser.add_argument(
                    cls.flag(name),
                    dest=name,
                    action=argparse.BooleanOptionalAction,
                    default=None,
                    help=help_text,
                )
            else:
                parser.add_argument(
                    cls.flag(name), dest=name, default=None, metavar="VALUE", help=help_text
                )
        return parser

    @classmethod
    def from_env_and_args(
        cls,
        argv: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Self:
        """Parse flags (``argv``, without the program name) over ``env`` over defaults."""
        args = cls.parser().parse_args(list(argv) if argv is not None else [])
        return cls.from_namespace(args, env)

    @classmethod
    def from_args(
        cls,
        argv: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Self:
        """The CLI's spelling of :meth:`from_env_and_args`."""
        return cls.from_env_and_args(argv, env)

    @classmethod
    def from_namespace(cls, args: argparse.Namespace, env: Mapping[str, str] | None = None) -> Self:
        env = os.environ if env is None else env
        raw: dict[str, Any] = {}
        for field in msgspec.structs.fields(cls):
            name = field.name
            value = getattr(args, name, None)
            if value is None:
                value = env.get(cls.env_name(name))
                if value is not None and value.strip() == "":
                    value = None
            if value is None:
                continue
            raw[name] = cls._coerce(name, value)
        return cls.build(raw)

    @classmethod
    def _coerce(cls, name: str, value: Any) -> Any:
        default = getattr(cls(), name)
        if isinstance(default, list) and isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        if isinstance(default, bool) and isinstance(value, str):
            lowered = value.strip().lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
            raise ConfigError(f"{cls.describe(name)}: expected true or false, got {value!r}")
        return value

    @classmethod
    def build(cls, raw: Mapping[str, Any]) -> Self:
        """Validate a mapping of settings (strings are coerced) into settings."""
        try:
            config = msgspec.convert(dict(raw), cls, strict=False)
        except msgspec.ValidationError as exc:
            message = str(exc)
            what, sep, at = message.rpartition(" - at `")
            if sep:
                name = at.rstrip("`").removeprefix("$.").split(".")[0].split("[")[0]
                if name in cls.__struct_fields__:
                    allowed = _allowed_values(cls, name)
                    if allowed and what.startswith("Invalid enum value"):
                        what += f"; expected one of {', '.join(allowed)}"
                    raise ConfigError(f"invalid {cls.describe(name)}: {what}") from None
            if message.startswith("Object contains unknown field"):
                import difflib

                unknown = message.split("`")[1] if "`" in message else ""
                near = difflib.get_close_matches(unknown, list(cls.__struct_fields__), n=1)
                hint = f"; did you mean {cls.describe(near[0])}?" if near else ""
                raise ConfigError(f"unknown setting: {message}{hint}") from None
            raise ConfigError(f"invalid settings: {message}") from None
        config.validate()
        return config

    # ------------------------------------------------------------ validation

    def validate(self) -> None:
        """The connection's cross-field checks; raises :class:`ConfigError` naming the setting."""
        d = type(self).describe
        for server in self.bootstrap_servers.split(","):
            host, sep, port = server.strip().rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ConfigError(
                    f"invalid {d('bootstrap_servers')}: {server.strip()!r} is not host:port"
                )
        if self.security_protocol.startswith("SASL") and self.sasl_mechanism == "OAUTHBEARER":
            if not self.sasl_oauth_token_provider:
                raise ConfigError(
                    f"missing {d('sasl_oauth_token_provider')}: required by OAUTHBEARER (the "
                    "`module:name` of a token provider)"
                )
            self.token_provider()  # importable and built now, not at the first connection
        elif self.security_protocol.startswith("SASL") and self.sasl_mechanism == "GSSAPI":
            import importlib.util

            # aiokafka asserts this at the first connection, with a traceback
            if importlib.util.find_spec("gssapi") is None:
                raise ConfigError(
                    f"invalid {d('sasl_mechanism')}: GSSAPI (Kerberos) needs the `gssapi` "
                    "package (`pip install gssapi`, which builds against the system's "
                    "Kerberos libraries)"
                )
        elif self.security_protocol.startswith("SASL"):
            for name in ("sasl_username", "sasl_password"):
                if not getattr(self, name):
                    raise ConfigError(
                        f"missing {d(name)}: required by {self.sasl_mechanism} over "
                        f"{self.security_protocol}"
                    )
        if (self.ssl_certfile is None) != (self.ssl_keyfile is None):
            raise ConfigError(
                f"invalid {d('ssl_certfile')}: mutual TLS needs both {d('ssl_certfile')} "
                f"and {d('ssl_keyfile')}"
            )
        for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
            path = getattr(self, name)
            if path is not None and not os.access(path, os.R_OK):
                raise ConfigError(f"invalid {d(name)}: cannot read {path!r}")
        if self.compression_type != "none":
            from aiokafka import codec

            if not getattr(codec, f"has_{self.compression_type}")():
                raise ConfigError(
                    f"invalid {d('compression_type')}: {self.compression_type} needs a codec this "
                    "installation lacks (pip install cramjam)"
                )
        self.client_overrides()  # every KEY=VALUE known to some client

    # --------------------------------------------------------------- clients

    def uses_ssl(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    def token_provider(self) -> Any:
        """The OAUTHBEARER token provider named by ``sasl_oauth_token_provider`` (built)."""
        import importlib

        d = type(self).describe
        spec = self.sasl_oauth_token_provider or ""
        module_name, sep, attr = spec.partition(":")
        if not sep or not module_name or not attr:
            raise ConfigError(f"invalid {d('sasl_oauth_token_provider')}: {spec!r} is not module:name")
        try:
            target = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"invalid {d('sasl_oauth_token_provider')}: cannot import {spec!r} ({exc})") from None
        from aiokafka.abc import AbstractTokenProvider

        provider = target if isinstance(target, AbstractTokenProvider) else target()
        if not isinstance(provider, AbstractTokenProvider):
            raise ConfigError(
                f"invalid {d('sasl_oauth_token_provider')}: {spec!r} did not give an "
                "aiokafka.abc.AbstractTokenProvider"
            )
        return provider

    def client_overrides(self) -> dict[str, dict[str, Any]]:
        """``client_properties`` by client kind (``common``, ``producer``, ``consumer``):
        a key goes to every client whose constructor takes it."""
        import difflib

        d = type(self).describe
        accepted = _client_parameters()
        out: dict[str, dict[str, Any]] = {"common": {}, "producer": {}, "consumer": {}}
        for item in self.client_properties:
            key, sep, raw = item.partition("=")
            key = key.strip()
            if not sep or not key:
                raise ConfigError(f"invalid {d('client_properties')}: {item!r} is not KEY=VALUE")
            kinds = [kind for kind, names in accepted.items() if key in names]
            if not kinds:
                known = sorted(set().union(*accepted.values()))
                near = difflib.get_close_matches(key.replace(".", "_"), known, n=1)
                hint = f"; did you mean {near[0]!r}?" if near else ""
                raise ConfigError(
                    f"invalid {d('client_properties')}: {key!r} is not an aiokafka client option{hint}"
                )
            if key in _MANAGED:
                raise ConfigError(
                    f"invalid {d('client_properties')}: {key!r} is set by streamguard itself "
                    f"({_MANAGED[key]})"
                )
            value = _property_value(raw.strip())
            expected = _client_defaults().get(key)
            if expected is not None and not _fits(value, expected):
                raise ConfigError(
                    f"invalid {d('client_properties')}: {key}={raw.strip()!r}: "
                    f"expected {'true or false' if expected is bool else 'a number'}"
                )
            if len(kinds) == 3:
                out["common"][key] = value
            else:
                for kind in kinds:
                    if kind != "admin":
                        out[kind][key] = value
        return out

    def producer_options(self) -> dict[str, Any]:
        """:meth:`client_options` plus what only producers take (compression, properties)."""
        options = self.client_options()
        if self.compression_type != "none":
            options["compression_type"] = self.compression_type
        options.update(self.client_overrides()["producer"])
        return options

    def consumer_options(self) -> dict[str, Any]:
        """:meth:`client_options` plus the properties only consumers take."""
        options = self.client_options()
        options.update(self.client_overrides()["consumer"])
        return options

    def client_options(self) -> dict[str, Any]:
        """Connection options shared by aiokafka's consumer, producer and admin client
        (with the ``client_properties`` every one of them takes)."""
        options: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap_servers,
            "client_id": self.client_id,
            "request_timeout_ms": self.request_timeout_ms,
            "security_protocol": self.security_protocol,
        }
        if self.security_protocol.startswith("SASL"):
            options["sasl_mechanism"] = self.sasl_mechanism
            options["sasl_plain_username"] = self.sasl_username
            options["sasl_plain_password"] = self.sasl_password
            options["sasl_kerberos_service_name"] = self.sasl_kerberos_service_name
            options["sasl_kerberos_domain_name"] = self.sasl_kerberos_domain_name
        if self.uses_ssl():
            from aiokafka.helpers import create_ssl_context

            context = create_ssl_context(
                cafile=self.ssl_cafile,
                certfile=self.ssl_certfile,
                keyfile=self.ssl_keyfile,
                password=self.ssl_key_password,
            )
            context.check_hostname = self.ssl_check_hostname
            options["ssl_context"] = context
        if self.security_protocol.startswith("SASL") and self.sasl_mechanism == "OAUTHBEARER":
            options["sasl_oauth_token_provider"] = self.token_provider()
        options.update(self.client_overrides()["common"])
        return options


class GroupSettings(KafkaSettings, kw_only=True, forbid_unknown_fields=True):
    """:class:`KafkaSettings` of a job that consumes in a consumer group of its own."""

    # -- consumer group
    group_id: Annotated[str, Meta(min_length=1)] = "streamguard"
    group_instance_id: str | None = None
    session_timeout_ms: Millis = 10_000
    heartbeat_interval_ms: Millis = 3_000
    rebalance_timeout_ms: Millis = 60_000
    max_poll_interval_ms: Millis = 300_000
    fetch_max_wait_ms: Millis = 500

    HELP: ClassVar[dict[str, str]] = {
        **KafkaSettings.HELP,
        "group_id": "consumer group shared by every instance of this job",
        "group_instance_id": "static membership id (stable per replica, e.g. the pod name)",
        "session_timeout_ms": "how long the group waits for a silent member before rebalancing",
        "heartbeat_interval_ms": "heartbeat period (well below the session timeout)",
        "rebalance_timeout_ms": "time a member has to flush and commit during a rebalance",
        "max_poll_interval_ms": "longest pause between fetches before the member is evicted",
        "fetch_max_wait_ms": "longest time the broker may hold a fetch waiting for data (lower it for latency on brokers that hold fetches)",
    }

    def validate(self) -> None:
        super().validate()
        d = type(self).describe
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ConfigError(
                f"invalid {d('heartbeat_interval_ms')}: must be below "
                f"{d('session_timeout_ms')} ({self.session_timeout_ms})"
            )
        if self.group_instance_id is not None and not self.group_instance_id:
            raise ConfigError(f"invalid {d('group_instance_id')}: must not be empty")

    def group_consumer_options(self) -> dict[str, Any]:
        """:meth:`consumer_options` for the job's group member: the group, its timings,
        manual commits (offsets are committed after each checkpoint) and the range
        assignor (which keeps co-partitioned topics on one member)."""
        from aiokafka.coordinator.assignors.range import RangePartitionAssignor

        return {
            **self.consumer_options(),
            "group_id": self.group_id,
            "group_instance_id": self.group_instance_id,
            "enable_auto_commit": False,
            "auto_offset_reset": "earliest",
            "partition_assignment_strategy": (RangePartitionAssignor,),
            "session_timeout_ms": self.session_timeout_ms,
            "heartbeat_interval_ms": self.heartbeat_interval_ms,
            "rebalance_timeout_ms": self.rebalance_timeout_ms,
            "max_poll_interval_ms": self.max_poll_interval_ms,
            "fetch_max_wait_ms": self.fetch_max_wait_ms,
        }


class ProcessorConfig(GroupSettings, kw_only=True, forbid_unknown_fields=True):
    """Everything ``streamguard run`` can be told. Defaults suit a production cluster."""

    PROG: ClassVar[str] = "streamguard run"
    DESCRIPTION: ClassVar[str] = (
        "Run the stream processor: consume agent events, publish alerts and "
        "guardrail trips. Every flag also reads STREAMGUARD_<NAME> from the "
        "environment (flags win)."
    )

    # -- topics
    events_topic: TopicName = "agent.events"
    control_topic: TopicName = "streamguard.control"
    alerts_topic: TopicName = "streamguard.alerts"
    dlq_topic: TopicName = "streamguard.dlq"
    changelog_topic: TopicName = "streamguard.changelog"
    fleet_facts_topic: TopicName = "streamguard.fleet.facts"
    fleet_state_topic: TopicName = "streamguard.fleet.state"
    fleet_circuits_topic: TopicName = "streamguard.fleet.circuits"
    fleet_stage: bool = True
    create_topics: bool = False
    partitions: Annotated[int, Meta(ge=1, le=100_000)] = 12
    replication_factor: Annotated[int, Meta(ge=1, le=32)] = 3

    # -- detection
    policy: str | None = None
    agent_header: Annotated[str, Meta(min_length=1, max_length=249)] | None = None
    tenant_header: Annotated[str, Meta(min_length=1, max_length=249)] | None = None

    # -- processing and checkpoints
    max_poll_records: Annotated[int, Meta(ge=1, le=1_000_000)] = 500
    checkpoint_every_events: PositiveInt = 5_000
    checkpoint_interval_ms: Millis = 1_000
    max_in_flight: PositiveInt = 10_000
    send_timeout_ms: Millis = 30_000
    linger_ms: Annotated[int, Meta(ge=0, le=60_000)] = 5
    max_output_bytes: Annotated[int, Meta(ge=4096, le=64 * 1024 * 1024)] = 256 * 1024
    max_clock_skew_s: Annotated[float, Meta(ge=0, le=7 * 24 * 3600.0)] = 300.0

    # -- session state
    session_idle_ttl_s: Seconds = 6 * 3600.0
    halted_session_ttl_s: Seconds = 7 * 24 * 3600.0
    eviction_batch: PositiveInt = 10_000
    max_sessions_per_partition: Annotated[int, Meta(ge=0, le=100_000_000)] = 200_000

    # -- observability and lifecycle
    metrics_host: Annotated[str, Meta(min_length=1)] = "0.0.0.0"
    metrics_port: Port = 9464
    metrics_agents: list[str] = []
    metrics_max_agents: Annotated[int, Meta(ge=0, le=10_000)] = 50
    shutdown_timeout_s: Seconds = 25.0
    log_level: LogLevel = "info"
    log_format: LogFormat = "text"

    HELP: ClassVar[dict[str, str]] = {
        **GroupSettings.HELP,
        "group_id": "consumer group shared by every instance of this processor",
        "events_topic": "topic of agent events, keyed by session",
        "control_topic": "topic of operator commands (resets), co-partitioned with the events",
        "alerts_topic": "topic the alerts, trips, feedback and reset receipts go to",
        "dlq_topic": "dead-letter topic for records that cannot be processed",
        "changelog_topic": "compacted topic of session snapshots, co-partitioned with the events",
        "fleet_facts_topic": "internal topic of fleet facts (spend, session starts, trips, halts), keyed by fleet scope; used when the policy has [[fleet]] rules",
        "fleet_state_topic": "compacted topic of the fleet stage's window snapshots, co-partitioned with the fleet facts",
        "fleet_circuits_topic": "compacted topic of every fleet scope's circuit, read in full by every instance",
        "fleet_stage": "run the fleet stage (windows per scope, circuits) in this instance too, in the consumer group <group-id>.fleet; with --no-fleet-stage the instance only publishes facts and applies circuits",
        "create_topics": "create missing topics at start-up",
        "partitions": "partition count of topics created by --create-topics",
        "replication_factor": "replication factor of created topics (1 for a single-broker dev cluster)",
        "policy": "policy TOML file (default: the built-in defaults)",
        "agent_header": "take each event's agent name (which picks its policy) from this record header, set by the publishing service, instead of the event's own `agent` field",
        "tenant_header": "take each event's tenant (a scope of [[fleet]] guardrails) from this record header, set by the publishing service, instead of the event's own `tenant` field",
        "max_poll_records": "most records taken from the consumer per batch",
        "checkpoint_every_events": "checkpoint (flush outputs and snapshots, commit) after this many records",
        "checkpoint_interval_ms": "checkpoint at least this often while records flow",
        "max_in_flight": "unacknowledged produced records before fetching pauses",
        "send_timeout_ms": "how long a checkpoint waits for acknowledgements before failing",
        "linger_ms": "producer batching delay",
        "max_output_bytes": "largest output or dead letter produced; a bigger one is cut down to a stub that says so (keep below the producer's and the topics' message size limits)",
        "max_clock_skew_s": "record timestamps later than the processor's clock plus this are clamped to it (and counted)",
        "session_idle_ttl_s": "evict a session after this long without records (processing time)",
        "halted_session_ttl_s": "keep halted sessions this long without records (processing time)",
        "eviction_batch": "most sessions examined per partition per eviction sweep",
        "max_sessions_per_partition": "sessions held per partition at most; past it the least recently active one that is not halted is evicted (0: no bound but the TTLs)",
        "metrics_host": "address of the /metrics, /healthz and /readyz endpoint",
        "metrics_port": "port of that endpoint (0: any free port)",
        "metrics_agents": "comma-separated agent names used as metric labels (others: `other`)",
        "metrics_max_agents": "without an allow-list: label the first N agents seen, the rest `other`",
        "shutdown_timeout_s": "bound on the final flush and commit at shutdown",
        "log_level": "debug, info, warning or error",
        "log_format": "text (for people) or json (one object per line, for log pipelines)",
    }

    # ------------------------------------------------------------ validation

    @property
    def fleet_group_id(self) -> str:
        """The consumer group of the fleet stage: its own, beside the session stage's."""
        return f"{self.group_id}.fleet"

    def validate(self) -> None:
        """Cross-field checks; raises :class:`ConfigError` naming the setting."""
        super().validate()
        d = type(self).describe
        if self.halted_session_ttl_s < self.session_idle_ttl_s:
            raise ConfigError(
                f"invalid {d('halted_session_ttl_s')}: must be at least "
                f"{d('session_idle_ttl_s')} ({self.session_idle_ttl_s:g}); halted sessions are "
                "kept longer than idle ones"
            )
        topics = {
            "events_topic": self.events_topic,
            "control_topic": self.control_topic,
            "alerts_topic": self.alerts_topic,
            "dlq_topic": self.dlq_topic,
            "changelog_topic": self.changelog_topic,
            "fleet_facts_topic": self.fleet_facts_topic,
            "fleet_state_topic": self.fleet_state_topic,
            "fleet_circuits_topic": self.fleet_circuits_topic,
        }
        seen: dict[str, str] = {}
        for name, topic in topics.items():
            if topic in seen:
                raise ConfigError(
                    f"invalid {d(name)}: {topic!r} is already used by {d(seen[topic])}"
                )
            seen[topic] = name
        if self.policy is not None:
            if not os.access(self.policy, os.R_OK):
                raise ConfigError(f"invalid {d('policy')}: cannot read {self.policy!r}")
            from ..policy import PolicyError, load_policy_set

            try:
                load_policy_set(self.policy)
            except PolicyError as exc:
                raise ConfigError(f"invalid {d('policy')}: {exc}") from None


# Options streamguard sets itself, for its guarantees: not to be overridden.
_MANAGED = {
    "acks": "outputs need acks=all",
    "enable_idempotence": "the processor runs without it (see docs/guarantees.md)",
    "enable_auto_commit": "offsets are committed after each checkpoint",
    "group_id": "use --group-id",
    "bootstrap_servers": "use --bootstrap-servers",
    "security_protocol": "use --security-protocol",
    "compression_type": "use --compression-type",
    "partition_assignment_strategy": "the range assignor keeps topics co-partitioned",
    "isolation_level": "",
    "key_serializer": "",
    "value_serializer": "",
    "key_deserializer": "",
    "value_deserializer": "",
    "loop": "",
    # set explicitly where streamguard builds a client: given here too, the client
    # would be handed the keyword twice and fail at start-up with a traceback
    "linger_ms": "use --linger-ms",
    "fetch_max_wait_ms": "use --fetch-max-wait-ms",
    "max_batch_size": "streamguard sizes its produce batches for its checkpoints",
    "auto_offset_reset": "state topics are read from their start, inputs from the committed offsets",
}


def _client_parameters() -> dict[str, set[str]]:
    """Keyword parameters of aiokafka's three clients, by kind."""
    import inspect

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient

    def names(cls: type) -> set[str]:
        params = inspect.signature(cls).parameters.values()
        return {p.name for p in params if p.kind is p.KEYWORD_ONLY or p.kind is p.POSITIONAL_OR_KEYWORD} - {"self"}

    return {
        "producer": names(AIOKafkaProducer),
        "consumer": names(AIOKafkaConsumer),
        "admin": names(AIOKafkaAdminClient),
    }


def _client_defaults() -> dict[str, type]:
    """The type of each aiokafka client option whose default is a number or a flag
    (the value a property must then have): an ``int``, ``float`` or ``bool``."""
    import inspect

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient

    found: dict[str, type] = {}
    for cls in (AIOKafkaProducer, AIOKafkaConsumer, AIOKafkaAdminClient):
        for param in inspect.signature(cls).parameters.values():
            if type(param.default) in (int, float, bool):
                found.setdefault(param.name, type(param.default))
    return found


def _fits(value: Any, expected: type) -> bool:
    if expected is bool:
        return isinstance(value, bool)
    return isinstance(value, int | float) and not isinstance(value, bool)


def _property_value(raw: str) -> Any:
    """A ``client_properties`` value: an int, a float, true/false, none, or the string."""
    lowered = raw.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    return raw


def _allowed_values(cls: type, name: str) -> list[str]:
    """The values of a Literal setting (for error messages)."""
    from typing import get_args, get_origin, get_type_hints

    hint = get_type_hints(cls, include_extras=True).get(name)
    if hint is not None and get_origin(hint) is Literal:
        return [str(v) for v in get_args(hint)]
    return []
