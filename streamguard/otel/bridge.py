"""``streamguard bridge``: OTLP telemetry in, contract-v1 events keyed by session out.

One :class:`Bridge` is one member of a consumer group, in two stages that share
its loop:

1. **map** (stateless): records of the OTLP topics (``otlp_spans``,
   ``otlp_logs``: one exported batch each, unkeyed or keyed by trace id, never
   by conversation) are decoded (:mod:`.otlp`) and mapped (:mod:`.direct`, :mod:`.mapping`);
   each span's or log record's events go to the bridge's *sessions topic*,
   keyed by session. This is the repartition: from here on a session lives on
   one partition and is handled by one member, whatever partitions its spans
   came from;
2. **order** (stateful): records of the sessions topic enter their
   partition's :class:`~.window.ReorderWindow`, which orders each session's
   events by event time, drops duplicates and assigns ``seq``; released events
   are produced to the events topic, keyed by session, where ``streamguard run``
   takes over.

Delivery is at least once, with the processor's discipline: a checkpoint
waits for every produced record's acknowledgement, then writes the changed
sessions' state (next ``seq``, remembered keys) to the compacted bridge
changelog and waits for that, then commits offsets: the OTLP topics' up to
what was mapped, the sessions topic's up to the oldest record with events
still in a window. A restart therefore reads again exactly what was not
finished: pending events are re-derived, keys already released are dropped,
and events released after the last snapshot are released again with the same
``seq``, which the processor skips as replays. ``docs/otel.md`` says what a
crash can cost.

Hostile input: a record that is not OTLP, too large or too deep goes to the
bridge's dead-letter topic with a reason (``dlq.reason``) and is counted; the
partition moves on. Nothing a record contains stops the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

import msgspec
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import CommitFailedError, IllegalStateError
from aiokafka.partitioner import murmur2
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ..kafka.changelog import iter_to_end
from ..kafka.checkpoint import revocation_checkpoint
from ..kafka.health import HealthServer
from ..kafka.inspect import home_partition
from ..kafka.lifecycle import serve
from ..kafka.topics import StartupError
from . import otlp
from .config import BridgeConfig
from .direct import SessionBatch, log_session_records, span_session_records
from .direct_json import json_span_session_records
from .mapping import MappingConfig, TraceSessions, span_filter
from .records import decode_session_record
from .window import Released, ReorderWindow

log = logging.getLogger("streamguard.otel")

POLL_MS = 200
MAX_IN_FLIGHT = 10_000
MAX_CACHED_PARTITIONS = 200_000
MAX_ERROR_HEADER = 1000
MAX_DEAD_LETTER_VALUE = 512 * 1024
OWNED_HEADER_PREFIXES = ("dlq.", "streamguard.")
_ALREADY_EXISTS = 36

# Named points where a test can inject a crash (see ``Bridge.fault``).
FAULT_POINTS = ("outputs_acked", "changelog_acked", "committed")


class BridgeMetrics:
    """The bridge's series, in a registry of its own."""

    def __init__(self) -> None:
        self.registry = r = CollectorRegistry(auto_describe=True)
        self.records = Counter(
            "streamguard_bridge_records_total",
            "Input records consumed, by topic and outcome (mapped, dead_lettered).",
            ["topic", "outcome"],
            registry=r,
        )
        self.items = Counter(
            "streamguard_bridge_otlp_items_total",
            "OTLP spans and log records decoded, by kind and outcome (mapped, or why not).",
            ["kind", "outcome"],
            registry=r,
        )
        self.events = Counter(
            "streamguard_bridge_events_total",
            "Contract-v1 events produced to the events topic.",
            registry=r,
        )
        self.dead_letters = Counter(
            "streamguard_bridge_dead_letters_total",
            "Records sent to the bridge's dead-letter topic, by reason.",
            ["reason"],
            registry=r,
        )
        self.duplicates = Counter(
            "streamguard_bridge_duplicates_total",
            "Span or log records dropped because their session already had them.",
            registry=r,
        )
        self.late = Counter(
            "streamguard_bridge_late_events_total",
            "Events released after a later event of their session (outside the window).",
            registry=r,
        )
        self.forced = Counter(
            "streamguard_bridge_forced_releases_total",
            "Events released before their window elapsed (a session's pending bound).",
            registry=r,
        )
        self.forgotten = Counter(
            "streamguard_bridge_sessions_forgotten_total",
            "Sessions whose state was dropped, by reason (expired, evicted).",
            ["reason"],
            registry=r,
        )
        self.misplaced = Counter(
            "streamguard_bridge_misplaced_sessions_total",
            "Session states restored from a changelog partition that is not their home (the sessions "
            "topic's partition count changed and `streamguard rehome --bridge` was not run): where their "
            "events now arrive they are numbered from 1 again.",
            registry=r,
        )
        self.pending = Gauge(
            "streamguard_bridge_pending_events", "Events waiting in reorder windows.", registry=r
        )
        self.sessions = Gauge(
            "streamguard_bridge_sessions", "Sessions whose state this instance holds.", registry=r
        )
        self.commit_failures = Counter(
            "streamguard_bridge_commit_failures_total",
            "Offset commits refused (the group was rebalancing).",
            registry=r,
        )
        self.checkpoint_seconds = Histogram(
            "streamguard_bridge_checkpoint_duration_seconds",
            "Acknowledge, snapshot and commit: one checkpoint.",
            registry=r,
        )
        self.http_requests = Counter(
            "streamguard_bridge_http_requests_total",
            "OTLP/HTTP requests, by path and status code.",
            ["path", "code"],
            registry=r,
        )
        self.ready = Gauge("streamguard_bridge_ready", "1 when ready.", registry=r)


class _Listener(ConsumerRebalanceListener):
    def __init__(self, bridge: Bridge) -> None:
        self.bridge = bridge

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self.bridge.on_revoked(set(revoked))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        await self.bridge.on_assigned(set(assigned))


def dead_letter_headers(
    record: Any, tp: TopicPartition, reason: str, error: str
) -> list[tuple[str, bytes]]:
    """The original headers (none in streamguard's namespaces), then reason and source."""
    headers = [
        (name, value or b"")
        for name, value in (record.headers or ())
        if not name.startswith(OWNED_HEADER_PREFIXES)
    ][:64]
    headers += [
        ("dlq.reason", reason.encode()),
        ("dlq.error", error[:MAX_ERROR_HEADER].encode("utf-8", "replace")),
        ("dlq.source.topic", tp.topic.encode()),
        ("dlq.source.partition", str(tp.partition).encode()),
        ("dlq.source.offset", str(record.offset).encode()),
    ]
    return headers


_HEADER_ENCODINGS: dict[bytes, otlp.Encoding] = {b"otlp_proto": "otlp_proto", b"otlp_json": "otlp_json"}


def _header_encoding(record: Any) -> otlp.Encoding | None:
    """The encoding a record's ``otlp.encoding`` header names (None: no such header,
    or a value that names none: the configured encoding then)."""
    for name, value in record.headers or ():
        if name == otlp.ENCODING_HEADER:
            return _HEADER_ENCODINGS.get(value or b"")
    return None


class Bridge:
    """One member of the bridge's consumer group. See the module docstring.

    ``clock`` is the wall clock of sessions' activity and TTLs (snapshots carry it
    from one process to the next); ``ticker`` the monotonic clock the reorder
    windows' deadlines are counted on (default: ``time.monotonic`` with the real
    wall clock, else ``clock`` itself, so that a test's clock drives both);
    ``fault`` is a test hook (see :data:`FAULT_POINTS`).
    """

    def __init__(
        self,
        config: BridgeConfig,
        *,
        clock: Callable[[], float] = time.time,
        ticker: Callable[[], float] | None = None,
        fault: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.ticker = ticker or (time.monotonic if clock is time.time else clock)
        self.mapping: MappingConfig = config.mapping()
        self.span_filter = span_filter(self.mapping)
        self.traces = TraceSessions(config.max_trace_sessions)
        self.metrics = BridgeMetrics()
        self.metrics.ready.set_function(lambda: 1.0 if self.ready else 0.0)
        self.metrics.pending.set_function(
            lambda: float(sum(w.pending_count() for w in self.windows.values()))
        )
        self.metrics.sessions.set_function(
            lambda: float(sum(len(w.sessions) for w in self.windows.values()))
        )
        self.windows: dict[int, ReorderWindow] = {}
        self.positions: dict[TopicPartition, int] = {}
        self.in_flight: list[asyncio.Future[Any]] = []
        self.lock = asyncio.Lock()
        self.stopping = asyncio.Event()
        self.fatal: BaseException | None = None
        self.assigned_once = False
        self.generation = 0
        self.health: HealthServer | None = None
        self.metrics_port: int | None = None
        self.receiver: Any = None
        self.http_port: int | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._producer: AIOKafkaProducer | None = None
        self._restorer: AIOKafkaConsumer | None = None
        self._started = False
        self._next_checkpoint = 0.0
        self._stats_seen: dict[int, tuple[int, int, int, int, int]] = {}
        # Records for the sessions and events topics, gathered per partition and
        # sent as one batch each after every fetched batch (a send per record is
        # most of what producing costs in aiokafka).
        self._batches: dict[tuple[str, int], Any] = {}
        self._partition_counts: dict[str, int] = {}
        self._partitions: dict[tuple[str, bytes], int] = {}  # (topic, key) -> partition
        # The test hook: called with a name from FAULT_POINTS; what it raises
        # stops the bridge there, without a checkpoint (a crash).
        self.fault = fault
        # Sessions-topic partitions whose state is being read back, and progress.
        self.restoring: set[int] = set()
        self.restore_records = 0
        self.restore_task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------- lifecycle

    @property
    def ready(self) -> bool:
        return (
            self._started
            and self.assigned_once
            and not self.restoring
            and not self.stopping.is_set()
            and self.fatal is None
        )

    def readiness(self) -> tuple[bool, str]:
        """``/readyz``: ready, or why not (restore progress while state is read back)."""
        if self.ready:
            return True, ""
        if self.fatal is not None:
            return False, f"failed: {self.fatal!r}"
        if self.stopping.is_set():
            return False, "stopping"
        if not self._started or not self.assigned_once:
            return False, "joining the group"
        return False, (
            f"restoring bridge state of partitions {sorted(self.restoring)} "
            f"({self.restore_records} changelog records read)"
        )

    def _fault(self, point: str) -> None:
        if self.fault is not None:
            self.fault(point)

    def request_stop(self) -> None:
        self.stopping.set()

    async def start(self) -> None:
        cfg = self.config
        if cfg.metrics_port is not None:
            self.health = HealthServer(
                self.metrics.registry,
                liveness=lambda: (self.fatal is None, "" if self.fatal is None else repr(self.fatal)),
                readiness=self.readiness,
                host=cfg.metrics_host,
                port=cfg.metrics_port,
            )
            self.metrics_port = await self.health.start()
        try:
            await prepare_bridge_topics(cfg)
            options = cfg.producer_options()
            # a dead letter copies a payload of up to max_payload_bytes: never below that
            request_size = max(options.pop("max_request_size", 0), cfg.max_payload_bytes + 65536)
            self._producer = AIOKafkaProducer(
                **options, acks="all", enable_idempotence=False, linger_ms=cfg.linger_ms,
                max_batch_size=512 * 1024, max_request_size=request_size,
            )
            await self._producer.start()
            self._restorer = AIOKafkaConsumer(
                **cfg.consumer_options(), group_id=None, enable_auto_commit=False, auto_offset_reset="earliest"
            )
            await self._restorer.start()
            self._consumer = AIOKafkaConsumer(
                **{
                    **cfg.group_consumer_options(),
                    # one OTLP export batch is one record: fetches must hold the largest
                    "fetch_max_bytes": max(52428800, cfg.max_payload_bytes * 2),
                    "max_partition_fetch_bytes": cfg.max_payload_bytes + 65536,
                }
            )
            self._consumer.subscribe(
                [cfg.spans_topic, cfg.logs_topic, cfg.sessions_topic], listener=_Listener(self)
            )
            await self._consumer.start()
            if cfg.otlp_http_port is not None:
                from .receiver import OtlpReceiver

                self.receiver = OtlpReceiver(
                    self._producer, cfg, self.metrics, host=cfg.otlp_http_host, port=cfg.otlp_http_port,
                    wanted=self.span_filter,
                )
                self.http_port = await self.receiver.start()
        except BaseException:
            await self._close()
            raise
        self._started = True
        self._next_checkpoint = time.monotonic() + cfg.checkpoint_interval_ms / 1000
        log.info(
            "bridge joined group %r on %s, %s, %s; events to %s; OTLP/HTTP on %s",
            cfg.group_id, cfg.spans_topic, cfg.logs_topic, cfg.sessions_topic, cfg.events_topic,
            self.http_port,
        )

    async def run(self) -> None:
        if not self._started:
            await self.start()
        try:
            await self._loop()
        except BaseException as exc:
            self.fatal = self.fatal or exc
            log.error("bridge failed: %r; stopping without a checkpoint", exc)
            await self._close()
            raise
        try:
            async with self.lock:
                await asyncio.wait_for(self.checkpoint(), self.config.shutdown_timeout_s)
        finally:
            await self._close()

    async def _close(self) -> None:
        task, self.restore_task = self.restore_task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        if self.receiver is not None:
            await self.receiver.close()
            self.receiver = None
        for client in (self._consumer, self._restorer, self._producer):
            if client is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(client.stop(), 10)
        self._consumer = self._restorer = self._producer = None
        if self.health is not None:
            await self.health.close()
            self.health = None

    # ------------------------------------------------------------------ loop

    async def _loop(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        interval = self.config.checkpoint_interval_ms / 1000
        while not self.stopping.is_set():
            if self.fatal is not None:
                raise self.fatal  # the restore task failed
            batch = await consumer.getmany(timeout_ms=POLL_MS, max_records=self.config.max_poll_records)
            generation = self.generation
            async with self.lock:
                if generation != self.generation:
                    for tp, records in batch.items():
                        if records and tp in consumer.assignment():
                            consumer.seek(tp, records[0].offset)
                    continue
                now = (self.clock(), self.ticker())
                for tp, records in batch.items():
                    if records:
                        await self._process(tp, records, now)
                await self._release(self.ticker())
                await self._send_batches()
                if time.monotonic() >= self._next_checkpoint:
                    await self.checkpoint()
                    self._next_checkpoint = time.monotonic() + interval

    async def _process(self, tp: TopicPartition, records: list[Any], now: tuple[float, float]) -> None:
        cfg = self.config
        if tp.topic == cfg.sessions_topic and tp.partition not in self.windows:
            # Restoring (or no longer ours): never let the position run past
            # records whose session state is not there yet.
            consumer = self._consumer
            if consumer is not None and tp in consumer.assignment():
                consumer.seek(tp, records[0].offset)
            return
        position = self.positions.get(tp)
        for record in records:
            if position is not None and record.offset < position:
                continue
            try:
                if tp.topic == cfg.sessions_topic:
                    await self._order(tp, record, now)
                else:
                    await self._map(tp, record)
            except Exception as exc:  # a record fails alone
                log.exception("record %s[%d]@%d failed", tp.topic, tp.partition, record.offset)
                await self._dead_letter(tp, record, "processing_error", repr(exc))
        self.positions[tp] = records[-1].offset + 1

    # ------------------------------------------------------------ stage 1: map

    def map_payload(self, topic: str, value: bytes, encoding: otlp.Encoding | None = None) -> SessionBatch:
        """Decode and map one OTLP payload into its sessions-topic records (raises
        :class:`~.otlp.OtlpError`). ``encoding``: the one its record's header names
        (the receiver's records say what their Content-Type said), else the configured one."""
        cfg = self.config
        if len(value) > cfg.max_payload_bytes:
            raise otlp.OtlpError("too_large", f"{len(value)} bytes, over max_payload_bytes")
        configured = encoding or cfg.otlp_encoding
        if topic == cfg.logs_topic:
            result = log_session_records(otlp.decode_logs(value, configured), self.mapping)
            kind = "log"
        else:
            mapping, wanted, traces = self.mapping, self.span_filter, self.traces
            result = otlp.read_payload(
                value, configured,
                # straight from the decoded JSON, without span records (the same result)
                lambda data: json_span_session_records(data, mapping, wanted, traces),
                lambda data: span_session_records(otlp.decode_spans(data, "otlp_proto", wanted), mapping, traces),
            )
            kind = "span"
        items = self.metrics.items
        if result.mapped:
            items.labels(kind, "mapped").inc(result.mapped)
        for reason, count in result.ignored.items():
            items.labels(kind, reason).inc(count)
        return result

    async def _map(self, tp: TopicPartition, record: Any) -> None:
        if record.value is None:
            await self._dead_letter(tp, record, "null_value", "a record without a value")
            return
        try:
            result = self.map_payload(tp.topic, record.value, _header_encoding(record))
        except otlp.OtlpError as exc:
            await self._dead_letter(tp, record, exc.reason, str(exc))
            return
        self.metrics.records.labels(tp.topic, "mapped").inc()
        topic = self.config.sessions_topic
        for session, value in result.records:
            await self._queue(topic, session.encode(), value, record.timestamp)

    # ---------------------------------------------------------- stage 2: order

    async def _order(self, tp: TopicPartition, record: Any, now: tuple[float, float]) -> None:
        """``now``: the wall clock and the ticker's reading."""
        window = self.windows.get(tp.partition)
        if window is None:
            return  # not assigned any more
        try:
            if record.key is None or record.value is None:
                raise ValueError("a session record needs a key and a value")
            session = record.key.decode()
            entries = decode_session_record(record.value)
        except (ValueError, msgspec.DecodeError) as exc:
            await self._dead_letter(tp, record, "malformed_session_record", repr(exc))
            return
        early = window.add_entries(session, entries, record.offset, now[0], now[1])
        if early:
            await self._produce_released(early)

    async def _release(self, tick: float) -> None:
        for window in self.windows.values():
            released = window.release(tick)
            if released:
                await self._produce_released(released)
            self._account(window)

    async def _produce_released(self, released: list[Released]) -> None:
        topic = self.config.events_topic
        queue = self._queue
        for item in released:
            await queue(topic, item.session.encode(), item.data, None)
        if released:
            self.metrics.events.inc(len(released))

    def _account(self, window: ReorderWindow) -> None:
        stats = window.stats
        now = (stats.duplicates, stats.late, stats.forced, stats.expired, stats.evicted)
        before = self._stats_seen.get(id(window), (0, 0, 0, 0, 0))
        if now == before:
            return
        self._stats_seen[id(window)] = now
        m = self.metrics
        m.duplicates.inc(now[0] - before[0])
        m.late.inc(now[1] - before[1])
        m.forced.inc(now[2] - before[2])
        m.forgotten.labels("expired").inc(now[3] - before[3])
        m.forgotten.labels("evicted").inc(now[4] - before[4])

    # ---------------------------------------------------------------- output

    def _follow_partition_counts(self) -> None:
        """Hash keys over a topic's partition count as the producer's metadata now lists it
        (refreshed every ``metadata.max.age.ms``), as any publisher with the default
        partitioner does: a count raised while the bridge runs must not leave it writing
        sessions to their old partitions, where the processor dead-letters them."""
        producer = self._producer
        if producer is None or not self._partition_counts:
            return
        cluster = producer.client.cluster
        for topic, count in list(self._partition_counts.items()):
            listed = cluster.partitions_for_topic(topic)
            if listed and len(listed) != count:
                log.warning(
                    "topic %r has %d partitions now (%d before): keys are hashed over the new count",
                    topic, len(listed), count,
                )
                self._partition_counts[topic] = len(listed)
                self._partitions = {key: p for key, p in self._partitions.items() if key[0] != topic}

    async def _partition_count(self, topic: str) -> int:
        count = self._partition_counts.get(topic)
        if count is None:
            producer = self._producer
            assert producer is not None
            count = self._partition_counts[topic] = len(await producer.partitions_for(topic))
        return count

    async def _queue(self, topic: str, key: bytes, value: bytes, timestamp_ms: int | None) -> None:
        """Add a keyed record to its partition's batch: the partition the default
        partitioner would choose (murmur2 of the key, as the processor expects)."""
        partition = self._partitions.get((topic, key))
        if partition is None:
            # murmur2 is pure Python in aiokafka (microseconds a key); a session's
            # records all go to one partition, so each key is hashed once
            count = self._partition_counts.get(topic) or await self._partition_count(topic)
            partition = (murmur2(key) & 0x7FFFFFFF) % count
            if len(self._partitions) >= MAX_CACHED_PARTITIONS:
                self._partitions.clear()
            self._partitions[(topic, key)] = partition
        batches = self._batches
        batch = batches.get((topic, partition))
        if batch is None:
            producer = self._producer
            assert producer is not None
            batch = batches[(topic, partition)] = producer.create_batch()
        if batch.append(key=key, value=value, timestamp=timestamp_ms) is None:
            # full: send it, start another (a lone record always fits)
            del batches[(topic, partition)]
            await self._send_batch(topic, partition, batch)
            await self._queue(topic, key, value, timestamp_ms)

    async def _send_batch(self, topic: str, partition: int, batch: Any) -> None:
        producer = self._producer
        assert producer is not None
        batch.close()
        self.in_flight.append(await producer.send_batch(batch, topic, partition=partition))
        if len(self.in_flight) >= MAX_IN_FLIGHT:
            await self._acknowledge()

    async def _send_batches(self) -> None:
        """Send every gathered batch (after each fetched batch, and at checkpoints)."""
        batches, self._batches = self._batches, {}
        for (topic, partition), batch in batches.items():
            if batch.record_count():
                await self._send_batch(topic, partition, batch)

    async def _send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        *,
        partition: int | None = None,
        headers: list[tuple[str, bytes]] | None = None,
        timestamp_ms: int | None = None,
    ) -> None:
        producer = self._producer
        assert producer is not None
        future = await producer.send(
            topic, value=value, key=key, partition=partition, headers=headers,
            timestamp_ms=timestamp_ms,
        )
        self.in_flight.append(future)
        if len(self.in_flight) >= MAX_IN_FLIGHT:
            await self._acknowledge()

    async def _dead_letter(self, tp: TopicPartition, record: Any, reason: str, error: str) -> None:
        self.metrics.dead_letters.labels(reason).inc()
        self.metrics.records.labels(tp.topic, "dead_lettered").inc()
        log.warning("%s[%d]@%d dead-lettered: %s (%s)", tp.topic, tp.partition, record.offset, reason, error[:200])
        headers = dead_letter_headers(record, tp, reason, error)
        value = record.value
        if value is not None and len(value) > MAX_DEAD_LETTER_VALUE:
            headers.append(("dlq.value-truncated-from", str(len(value)).encode()))
            value = value[:MAX_DEAD_LETTER_VALUE]
        key = record.key[:1024] if record.key else record.key
        await self._send(self.config.dlq_topic, key, value, headers=headers)

    async def _acknowledge(self) -> None:
        futures, self.in_flight = self.in_flight, []
        if futures:
            await asyncio.wait_for(
                asyncio.gather(*futures), self.config.send_timeout_ms / 1000
            )

    # ----------------------------------------------------------- checkpoints

    async def checkpoint(self) -> None:
        """Outputs acknowledged, then changed sessions' state, then offsets. Caller holds the lock."""
        started = time.monotonic()
        cfg = self.config
        for window in self.windows.values():
            window.sweep(self.clock())
            self._account(window)
        await self._send_batches()
        self._follow_partition_counts()  # for the records of the next interval
        await self._acknowledge()
        self._fault("outputs_acked")
        for partition, window in self.windows.items():
            for session in window.take_changed():
                await self._send(
                    cfg.bridge_changelog_topic, session.encode(), window.snapshot(session),
                    partition=partition,
                )
        await self._acknowledge()
        self._fault("changelog_acked")
        offsets: dict[TopicPartition, int] = {}
        for tp, position in self.positions.items():
            if tp.topic == cfg.sessions_topic:
                held = self.windows.get(tp.partition)
                if held is None:
                    continue
                low = held.low_offset()
                if low is not None:
                    position = min(position, low)
            offsets[tp] = position
        consumer = self._consumer
        if offsets and consumer is not None:
            try:
                await consumer.commit(offsets)
            except (CommitFailedError, IllegalStateError) as exc:
                self.metrics.commit_failures.inc()
                log.warning("offset commit refused (%s); the group is rebalancing", exc)
        self._fault("committed")
        self.metrics.checkpoint_seconds.observe(time.monotonic() - started)

    # ------------------------------------------------------------ rebalances

    async def on_revoked(self, revoked: set[TopicPartition]) -> None:
        async with self.lock:
            self.generation += 1
            if self._consumer is not None and self._producer is not None and self.fatal is None:
                try:
                    await revocation_checkpoint(self.checkpoint(), self.config.rebalance_timeout_ms)
                except BaseException as exc:
                    # aiokafka logs and swallows a listener's exception and goes on with
                    # the rebalance: fail the loop instead, and give up the partitions
                    # below all the same, so that nothing is produced or snapshotted
                    # for sessions another member now owns.
                    self.fatal = self.fatal or exc
                    log.error("checkpoint on revocation failed: %r", exc)
            # Pending events are dropped here on purpose: their records are not
            # committed, so whoever owns the partition next derives them again.
            for tp in revoked:
                self.positions.pop(tp, None)
                if tp.topic == self.config.sessions_topic:
                    self.restoring.discard(tp.partition)
                    window = self.windows.pop(tp.partition, None)
                    if window is not None:
                        self._stats_seen.pop(id(window), None)

    async def on_assigned(self, assigned: set[TopicPartition]) -> None:
        """New sessions-topic partitions are paused and their state read back by a
        background task (as the processor restores): the loop, the OTLP topics'
        partitions and the partitions already held go on meanwhile, and the
        rebalance callback returns at once however long the changelog is."""
        async with self.lock:
            self.generation += 1
            self._partition_counts.clear()  # partitions may have been added
            self._partitions.clear()
            cfg = self.config
            new = sorted(
                tp.partition
                for tp in assigned
                if tp.topic == cfg.sessions_topic and tp.partition not in self.windows
            )
            self.restoring.update(new)
            consumer = self._consumer
            if self.restoring and consumer is not None:
                paused = [TopicPartition(cfg.sessions_topic, n) for n in sorted(self.restoring)]
                consumer.pause(*[tp for tp in paused if tp in assigned])
            self.assigned_once = True
            if self.restoring and (self.restore_task is None or self.restore_task.done()):
                self.restore_task = asyncio.create_task(self._restore_worker())

    def _new_window(self) -> ReorderWindow:
        cfg = self.config
        return ReorderWindow(
            window_s=cfg.reorder_window_ms / 1000,
            max_pending_per_session=cfg.max_pending_per_session,
            max_seen=cfg.max_seen_per_session,
            max_sessions=cfg.max_sessions_per_partition,
            session_ttl_s=cfg.session_ttl_s,
        )

    async def _restore_worker(self) -> None:
        """Read the restoring partitions' states, install them, resume the partitions.

        The read runs outside the lock; a rebalance meanwhile (the generation
        moved) may have handed a partition to another member and back, so what
        was read is thrown away and read again."""
        try:
            while True:
                wanted = sorted(self.restoring)
                if not wanted:
                    return
                generation = self.generation
                windows = await self._restore(wanted)
                async with self.lock:
                    if generation != self.generation:
                        continue
                    consumer = self._consumer
                    for partition, window in windows.items():
                        if partition not in self.restoring:
                            continue
                        self.windows[partition] = window
                        self.restoring.discard(partition)
                        tp = TopicPartition(self.config.sessions_topic, partition)
                        if consumer is not None and not self.stopping.is_set():
                            with contextlib.suppress(IllegalStateError):
                                if tp in consumer.assignment():
                                    consumer.resume(tp)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            log.error("restoring the bridge state failed: %r", exc)
            self.fatal = self.fatal or exc

    async def _restore(self, partitions: list[int]) -> dict[int, ReorderWindow]:
        """Partitions' sessions from the bridge changelog, read to its end."""
        cfg = self.config
        windows = {partition: self._new_window() for partition in partitions}
        restorer = self._restorer
        assert restorer is not None
        self.restore_records = 0
        tps = [TopicPartition(cfg.bridge_changelog_topic, partition) for partition in partitions]
        async for tp, records in iter_to_end(restorer, tps):
            window = windows[tp.partition]
            for record in records:
                if record.key is None:
                    continue
                try:
                    window.restore(record.key.decode(), record.value)
                except (ValueError, msgspec.DecodeError) as exc:
                    log.error("bridge changelog %d@%d unreadable: %r", tp.partition, record.offset, exc)
            self.restore_records += len(records)
        consumer = self._consumer
        listed = consumer.partitions_for_topic(cfg.sessions_topic) if consumer is not None else None
        count = len(listed) if listed else 0
        for partition, window in windows.items():
            window.take_changed()
            log.info("restored %d session states of partition %d", len(window.sessions), partition)
            misplaced = sum(home_partition(s, count) != partition for s in window.sessions) if count else 0
            if misplaced:
                # Kept, but said: their events arrive on another partition now.
                self.metrics.misplaced.inc(misplaced)
                log.warning(
                    "partition %d: %d restored session state(s) belong on other partitions of %d (the "
                    "partition count changed?); their events are numbered from 1 again where they now "
                    "arrive. Stop the bridges and run `streamguard rehome --bridge` (docs/otel.md)",
                    partition, misplaced, count,
                )
        return windows


# --------------------------------------------------------------------- topics


async def prepare_bridge_topics(config: BridgeConfig) -> None:
    """Check (or, with ``create_topics``, create) the bridge's topics.

    The sessions topic and the bridge changelog must have the same partition
    count: the state of sessions-topic partition *p* is changelog partition *p*.
    """
    admin = AIOKafkaAdminClient(**config.client_options())
    await admin.start()
    try:
        wanted = [
            config.spans_topic, config.logs_topic, config.sessions_topic,
            config.bridge_changelog_topic, config.events_topic, config.dlq_topic,
        ]
        existing = set(await admin.list_topics())
        missing = [t for t in wanted if t not in existing]
        if missing and config.create_topics:
            count = config.partitions
            if config.sessions_topic in existing or config.bridge_changelog_topic in existing:
                present = [
                    t for t in (config.sessions_topic, config.bridge_changelog_topic) if t in existing
                ]
                described = await admin.describe_topics(present)
                count = len(described[0]["partitions"])
            topics = []
            for topic in missing:
                configs = {"cleanup.policy": "compact"} if topic == config.bridge_changelog_topic else {}
                if config.replication_factor >= 3:
                    configs["min.insync.replicas"] = "2"
                topics.append(NewTopic(topic, count, config.replication_factor, topic_configs=configs))
            response = await admin.create_topics(topics)
            for item in getattr(response, "topic_errors", []):
                if item[1] not in (0, _ALREADY_EXISTS):
                    raise StartupError(f"cannot create topic {item[0]!r}: {item[2]} ({item[1]})")
            missing = []
        if missing:
            raise StartupError(
                f"missing topics: {', '.join(missing)}; create them (the bridge changelog with "
                "cleanup.policy=compact) or pass --create-topics"
            )
        described = await admin.describe_topics([config.sessions_topic, config.bridge_changelog_topic])
        counts = {d["topic"]: len(d["partitions"]) for d in described}
        if len(set(counts.values())) != 1:
            raise StartupError(
                "the sessions topic and the bridge changelog must have the same partition count: "
                + ", ".join(f"{t}={n}" for t, n in counts.items())
            )
    finally:
        await admin.close()


async def create_bridge_topics(config: BridgeConfig, partitions: int) -> None:
    """Create every topic of the bridge (tests, demo): existing ones are kept."""
    admin = AIOKafkaAdminClient(**config.client_options())
    await admin.start()
    try:
        topics = [
            NewTopic(
                t, partitions, 1,
                topic_configs={"cleanup.policy": "compact"} if t == config.bridge_changelog_topic else {},
            )
            for t in (
                config.spans_topic, config.logs_topic, config.sessions_topic,
                config.bridge_changelog_topic, config.events_topic, config.dlq_topic,
            )
        ]
        await admin.create_topics(topics)
    finally:
        await admin.close()


async def run_bridge(config: BridgeConfig) -> None:
    """Entry point of ``streamguard bridge``: run until SIGTERM/SIGINT, then checkpoint."""
    try:
        await serve(Bridge(config), config.bootstrap_servers, log)
    except OSError as exc:  # the receiver's or the health port already taken
        log.error("cannot start: %s", exc)
        raise SystemExit(1) from None
