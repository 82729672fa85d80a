"""The stream processor behind ``streamguard run``.

One :class:`Processor` is one member of a consumer group. It consumes the
agents' events topic and the co-partitioned control topic, feeds one
:class:`~streamguard.engine.Engine` that holds every owned session's state, and
publishes the engine's outputs. A session lives on exactly one partition
(records are keyed by session id), each partition's records are applied in
offset order by a single loop, so each session behaves as an actor: private
state, one record at a time, no locks in the hot path and no task per session.

Checkpoint cycle (every ``checkpoint_every_events`` records or
``checkpoint_interval_ms``, at every revocation and at shutdown), strictly in
this order:

1. every produced output (alerts, trips, feedback, dead letters, re-routed
   control records) is acknowledged by the brokers;
2. a snapshot of every session changed since the last cycle (or a tombstone of
   every evicted one) is written to the changelog and acknowledged; each
   snapshot names the offsets it has applied;
3. the offsets of the records *processed* (never merely fetched) are
   committed.

What a checkpoint covers is fixed when it starts: the outputs sent so far,
the changed sessions as they are then and the offsets processed so far. Only
that staging holds up processing. The sessions are then encoded a slice at a
time between the loop's batches (one about to change is encoded first, so
every snapshot is its state at the start), and the three steps run while the
loop goes on; whatever it processes meanwhile belongs to the next checkpoint.
One checkpoint is pending at most: the next one, a revocation and the shutdown
each wait for it first.

A crash anywhere therefore loses nothing (step 3 never runs before 1 and 2),
and replays after a crash never apply an event twice to a session's state
(restored snapshots skip the offsets they already contain). The only visible
effect of a crash is that outputs produced since the last snapshot can be
produced again, with the same deterministic ids. ``docs/guarantees.md`` has
the full argument.

Rebalances are eager in aiokafka: every rebalance revokes everything and then
assigns. Revoked partitions are checkpointed and *suspended*; when the new
assignment hands a partition straight back and its changelog has not moved
since, its sessions are kept instead of being reloaded.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, NamedTuple

import msgspec
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.errors import (
    CommitFailedError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    MessageSizeTooLargeError,
)
from aiokafka.partitioner import murmur2

from ..canonical import truncate_middle
from ..engine import Engine
from ..events import (
    Alert,
    ControlOnAgentStream,
    Feedback,
    GuardrailTrip,
    NestingTooDeep,
    Output,
    Reset,
    UnknownEventType,
    decode_agent_event,
    decode_agent_record,
    decode_operator_event,
    encode,
)
from ..policy import Policy, PolicySet, load_policy_set
from .changelog import ChangelogError, decode_entry, encode_entry, read_partitions
from .config import ProcessorConfig
from .health import HealthServer
from .metrics import AgentLabels, Metrics

log = logging.getLogger("streamguard.kafka")

# Named points where a test can inject a crash (see ``fault``).
FAULT_POINTS = ("record_processed", "outputs_acked", "changelog_acked", "committed")

RESTORING, ACTIVE, SUSPENDED = "restoring", "active", "suspended"
REROUTED_HEADER = "streamguard.rerouted-from"
# Header namespaces only streamguard writes. An incoming record's headers in them
# are dropped (and counted) before the record is copied anywhere: a writer must
# not be able to pre-fill a dead letter's reason or fake a re-route.
OWNED_HEADER_PREFIXES = ("dlq.", "streamguard.")
MAX_ERROR_HEADER = 1000
# What a dead letter copies of a hostile record's key and headers.
MAX_DEAD_LETTER_KEY = 1024
MAX_COPIED_HEADER_BYTES = 16 * 1024
# Text fields of an output cut down to a stub (reason, guidance, feedback text).
STUB_TEXT_BYTES = 2048
POLL_MS = 200
# Largest record batch the producer builds. A checkpoint writes thousands of
# snapshots at once, and the producer sends one batch per partition per round
# trip: with the client's 16 KiB default a checkpoint would be a chain of
# dozens of round trips. Well under every broker default of message.max.bytes
# (1,000,012 bytes before Kafka 2.4, 1,048,588 since).
PRODUCE_BATCH_BYTES = 512 * 1024
# Sessions a checkpoint encodes between two turns of the loop (about 0.5 ms).
ENCODE_SLICE = 128


class StartupError(RuntimeError):
    """The cluster is not in a state the processor can run against (missing or mismatched topics)."""


class SimulatedCrash(Exception):
    """Raised by test fault hooks; the processor stops without flushing or committing."""


class _Meta(msgspec.Struct, gc=False):
    """What the processor (not the engine) remembers about one session.

    Scalars only, so the garbage collector need not track one object per held
    session (``gc=False``): full collections stay short with many sessions.
    """

    partition: int
    events_offset: int
    control_offset: int
    last_seen: float  # processing time (the processor's clock) of the last record
    parked: bool = False


class _Stage(NamedTuple):
    """What one checkpoint covers, fixed when it starts."""

    started: float
    outputs: list[asyncio.Future[Any]]  # every output sent before it
    records: list[tuple[int, bytes, bytes | None]]  # changelog (partition, key, value)
    offsets: dict[TopicPartition, int]  # next offset to process, per partition


class _Partition:
    """One owned events partition (and its control and changelog twins)."""

    __slots__ = ("active", "changelog_mark", "number", "parked", "status")

    def __init__(self, number: int, status: str) -> None:
        self.number = number
        self.status = status
        # Sessions in (approximate) order of last activity, oldest first; halted
        # sessions past the idle TTL move to ``parked`` and wait for the longer TTL.
        self.active: OrderedDict[str, None] = OrderedDict()
        self.parked: OrderedDict[str, None] = OrderedDict()
        # The changelog's end offset (as ListOffsets reports it) when the partition
        # was suspended; unchanged at re-assignment = nobody else wrote meanwhile.
        self.changelog_mark: int | None = None

    def sessions(self) -> list[str]:
        return [*self.active, *self.parked]


class _Listener(ConsumerRebalanceListener):
    def __init__(self, processor: Processor) -> None:
        self.processor = processor

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self.processor._on_revoked(set(revoked))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        await self.processor._on_assigned(set(assigned))


def _tag(obj: Any) -> str:
    return type(obj).__struct_config__.tag


class Processor:
    """One consumer-group member driving one engine. See the module docstring.

    ``policy`` overrides ``config.policy`` (a loaded policy set or a single
    policy). ``fault`` is a test hook: it is called with a name from
    :data:`FAULT_POINTS` at that point of the processing; if it raises, the
    processor stops there as a crash would, without flushing or committing.
    ``clock`` is the processing-time clock (unix seconds) that session TTLs
    and the timestamp clamp run on; tests pass their own.
    """

    def __init__(
        self,
        config: ProcessorConfig,
        *,
        policy: Policy | PolicySet | None = None,
        fault: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        if policy is None:
            policy = load_policy_set(config.policy)
        self.engine = Engine(policy)
        self.fault = fault
        self.clock = clock
        # engine counters already exported (seq replays and jumps are counted
        # there, once per event; the processor adds the difference per batch)
        self._engine_replays = 0
        self._engine_jumps = 0
        self._last_skip_log = 0.0
        self.metrics = Metrics(
            agents=AgentLabels(config.metrics_agents, config.metrics_max_agents),
            active_sessions=lambda: len(self.engine.sessions),
            halted_sessions=lambda: len(self._halted),
        )
        self.metrics.ready.set_function(lambda: 1.0 if self.ready else 0.0)
        self.health: HealthServer | None = None
        self.metrics_port: int | None = None

        self._consumer: AIOKafkaConsumer | None = None
        self._producer: AIOKafkaProducer | None = None  # outputs, dead letters, re-routes
        self._changelog_producer: AIOKafkaProducer | None = None
        self._restorer: AIOKafkaConsumer | None = None
        self._partition_count = 0

        self._lock = asyncio.Lock()
        self._stopping = asyncio.Event()
        self._fatal: BaseException | None = None
        self._generation = 0
        self._assigned_once = False
        self._started = False
        self._loop_beat = time.monotonic()

        self._partitions: dict[int, _Partition] = {}
        self._meta: dict[str, _Meta] = {}
        self._halted: set[str] = set()
        self._dirty: dict[str, int] = {}  # session -> partition its changelog record goes to
        self._positions: dict[TopicPartition, int] = {}  # next offset to process
        self._committed: dict[TopicPartition, int] = {}
        self._outbox: list[
            tuple[str, bytes | None, bytes | None, int | None, list, int | None]
        ] = []
        self._inflight: deque[asyncio.Future[Any]] = deque()
        self._since_checkpoint = 0
        self._next_checkpoint = 0.0
        self._restore_task: asyncio.Task[None] | None = None
        self._pending: asyncio.Task[None] | None = None  # checkpoint still completing
        # Sessions the pending checkpoint covers but has not encoded yet (session ->
        # changelog partition), and where their records go. A session is encoded
        # before its next record is applied (copy on write), so each snapshot is the
        # state as of the checkpoint's start however long the encoding takes.
        self._unstaged: dict[str, int] = {}
        self._staged_records: list[tuple[int, bytes, bytes | None]] = []
        # Test seam: awaited by a checkpoint right after it is staged, before it
        # encodes or waits for anything (processing goes on meanwhile).
        self.checkpoint_gate: Callable[[], Awaitable[None]] | None = None

        # per-class/agent caches for the hot path
        self._event_counters: dict[tuple[type, str], Any] = {}
        self._skip_counters: dict[str, Any] = {}

    # =============================================================== lifecycle

    @property
    def ready(self) -> bool:
        return (
            self._started
            and self._assigned_once
            and not self._stopping.is_set()
            and self._fatal is None
            and all(p.status != RESTORING for p in self._partitions.values())
        )

    def _liveness(self) -> tuple[bool, str]:
        if self._fatal is not None:
            return False, f"failed: {self._fatal!r}"
        stall = time.monotonic() - self._loop_beat
        limit = self.config.send_timeout_ms / 1000 * 2 + 30
        if self._started and stall > limit:
            return False, f"processing loop stalled for {stall:.0f} s"
        return True, ""

    def _readiness(self) -> tuple[bool, str]:
        if self.ready:
            return True, f"{len(self._partitions)} partitions"
        if not self._assigned_once:
            return False, "waiting for a partition assignment"
        if self._fatal is not None:
            return False, "failed"
        restoring = sorted(p.number for p in self._partitions.values() if p.status == RESTORING)
        if restoring:
            return False, f"restoring partitions {restoring}"
        return False, "stopping"

    def request_stop(self) -> None:
        """Stop fetching, finish the batch in hand, checkpoint, leave the group."""
        if self._stopping.is_set():
            return
        log.info("stop requested: finishing the current batch, then flushing and committing")
        self._stopping.set()
        consumer = self._consumer
        if consumer is not None:
            with contextlib.suppress(IllegalStateError, KafkaError):
                assignment = consumer.assignment()
                if assignment:
                    consumer.pause(*assignment)

    async def start(self) -> None:
        """Connect, check (or create) the topics, start the HTTP endpoint, join the group."""
        cfg = self.config
        options = cfg.client_options()
        if cfg.metrics_port is not None:
            self.health = HealthServer(
                self.metrics.registry,
                liveness=self._liveness,
                readiness=self._readiness,
                host=cfg.metrics_host,
                port=cfg.metrics_port,
            )
            self.metrics_port = await self.health.start()
        try:
            self._partition_count = await self._prepare_topics(options)
            self._producer = AIOKafkaProducer(
                **options,
                acks="all",
                enable_idempotence=False,
                linger_ms=cfg.linger_ms,
                max_batch_size=PRODUCE_BATCH_BYTES,
            )
            await self._producer.start()
            # Snapshots get their own producer (and connection): a client keeps one
            # request in flight per broker, and a checkpoint's megabytes of
            # snapshots must not hold up the alerts queued behind them.
            self._changelog_producer = AIOKafkaProducer(
                **options,
                acks="all",
                enable_idempotence=False,
                linger_ms=0,
                max_batch_size=PRODUCE_BATCH_BYTES,
            )
            await self._changelog_producer.start()
            self._restorer = AIOKafkaConsumer(
                **options,
                group_id=None,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
            )
            await self._restorer.start()
            self._consumer = AIOKafkaConsumer(
                **options,
                group_id=cfg.group_id,
                group_instance_id=cfg.group_instance_id,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                partition_assignment_strategy=(RangePartitionAssignor,),
                session_timeout_ms=cfg.session_timeout_ms,
                heartbeat_interval_ms=cfg.heartbeat_interval_ms,
                rebalance_timeout_ms=cfg.rebalance_timeout_ms,
                max_poll_interval_ms=cfg.max_poll_interval_ms,
                fetch_max_wait_ms=cfg.fetch_max_wait_ms,
            )
            self._consumer.subscribe(
                [cfg.events_topic, cfg.control_topic], listener=_Listener(self)
            )
            await self._consumer.start()
        except BaseException:
            await self._close_clients()
            raise
        self._started = True
        self._loop_beat = time.monotonic()
        self._next_checkpoint = time.monotonic() + cfg.checkpoint_interval_ms / 1000
        log.info(
            "joined group %r on %s + %s (%d partitions); metrics on port %s",
            cfg.group_id,
            cfg.events_topic,
            cfg.control_topic,
            self._partition_count,
            self.metrics_port,
        )

    async def run(self) -> None:
        """Run until :meth:`request_stop` (graceful) or a failure (no flush, no commit)."""
        if not self._started:
            await self.start()
        try:
            await self._loop()
        except BaseException as exc:
            self._fatal = self._fatal or exc
            log.error("processor failed: %r; stopping without a checkpoint", exc)
            await self._close_clients()
            raise
        await self._shutdown()

    async def _shutdown(self) -> None:
        cfg = self.config
        try:
            async with self._lock:
                await asyncio.wait_for(self._checkpoint(), cfg.shutdown_timeout_s)
            log.info("final checkpoint done; leaving the group")
        except BaseException as exc:
            log.error("final checkpoint failed (%r): offsets left uncommitted", exc)
            await self._close_clients()
            raise
        await self._close_clients()

    async def _close_clients(self) -> None:
        for task in (self._restore_task, self._pending):
            if task is not None and not task.done():
                task.cancel()
            if task is not None:
                with contextlib.suppress(BaseException):
                    await task
        self._pending = None
        for client in (self._consumer, self._restorer, self._producer, self._changelog_producer):
            if client is None:
                continue
            try:
                await asyncio.wait_for(client.stop(), 10)
            except Exception as exc:
                log.warning("closing %s failed: %r", type(client).__name__, exc)
        self._consumer = self._restorer = self._producer = self._changelog_producer = None
        if self.health is not None:
            await self.health.close()
            self.health = None

    # ================================================================== topics

    async def _prepare_topics(self, options: dict[str, Any]) -> int:
        cfg = self.config
        admin = AIOKafkaAdminClient(**options)
        await admin.start()
        try:
            existing = set(await admin.list_topics())
            co_partitioned = [cfg.events_topic, cfg.control_topic, cfg.changelog_topic]
            wanted = [*co_partitioned, cfg.alerts_topic, cfg.dlq_topic]
            missing = [t for t in wanted if t not in existing]
            if missing and cfg.create_topics:
                count = cfg.partitions
                present = [t for t in co_partitioned if t in existing]
                if present:  # keep new co-partitioned topics aligned with existing ones
                    described = await admin.describe_topics(present)
                    count = len(described[0]["partitions"])
                new = []
                for topic in missing:
                    configs = {"cleanup.policy": "compact"} if topic == cfg.changelog_topic else {}
                    if cfg.replication_factor >= 3:
                        # acks=all only means "on two brokers" with this floor
                        configs["min.insync.replicas"] = "2"
                    new.append(
                        NewTopic(topic, count, cfg.replication_factor, topic_configs=configs)
                    )
                response = await admin.create_topics(new)
                for topic, code, message in _topic_errors(response):
                    if code not in (0, 36):  # 36: created meanwhile by another instance
                        raise StartupError(f"cannot create topic {topic!r}: {message} ({code})")
                log.info("created topics %s", ", ".join(missing))
                missing = []
            if missing:
                raise StartupError(
                    f"missing topics: {', '.join(missing)}; create them (the changelog "
                    "with cleanup.policy=compact) or pass --create-topics"
                )
            counts = await self._partition_counts(admin, co_partitioned)
        finally:
            await admin.close()
        if len(set(counts.values())) != 1:
            listing = ", ".join(f"{t}={n}" for t, n in counts.items())
            raise StartupError(
                "the events, control and changelog topics must have the same partition count "
                f"(co-partitioning by session): {listing}"
            )
        return counts[cfg.events_topic]

    @staticmethod
    async def _partition_counts(admin: AIOKafkaAdminClient, topics: list[str]) -> dict[str, int]:
        deadline = time.monotonic() + 15
        while True:
            described = await admin.describe_topics(topics)
            counts = {
                d["topic"]: len(d["partitions"]) for d in described if d.get("error_code", 0) == 0
            }
            if all(counts.get(t, 0) > 0 for t in topics) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
        missing = [t for t in topics if counts.get(t, 0) == 0]
        if missing:
            raise StartupError(f"topics without partitions (metadata): {', '.join(missing)}")
        return {t: counts[t] for t in topics}

    # ============================================================== main loop

    async def _loop(self) -> None:
        cfg = self.config
        consumer = self._consumer
        assert consumer is not None
        interval = cfg.checkpoint_interval_ms / 1000
        while not self._stopping.is_set():
            self._loop_beat = time.monotonic()
            if self._fatal is not None:
                raise self._fatal
            batch = await consumer.getmany(timeout_ms=POLL_MS, max_records=cfg.max_poll_records)
            generation = self._generation
            if self._fatal is not None:
                raise self._fatal
            async with self._lock:
                if generation != self._generation:
                    # A rebalance ran while this batch waited for the lock. The new
                    # assignment re-fetches from the committed offsets; rewinding
                    # also covers a partition that kept its fetch position.
                    for tp, records in batch.items():
                        self._rewind(tp, records)
                    continue
                processed = 0
                for tp, records in batch.items():
                    processed += self._process(tp, records)
                    if len(self._outbox) >= 256:
                        await self._send_outbox()
                await self._send_outbox()
                self._since_checkpoint += processed
                now = time.monotonic()
                due = now >= self._next_checkpoint
                if due:
                    # on the timer too, so partitions that receive nothing are swept
                    self._sweep()
                if self._since_checkpoint >= cfg.checkpoint_every_events or (
                    due and self._has_work()
                ):
                    await self._start_checkpoint()
                elif due:
                    self._next_checkpoint = now + interval
                    self._update_lag()
        self._loop_beat = time.monotonic()

    def _has_work(self) -> bool:
        if self._dirty or self._outbox or self._inflight:
            return True
        return any(self._committed.get(tp) != pos for tp, pos in self._positions.items())

    # ------------------------------------------------------------- records

    def _rewind(self, tp: TopicPartition, records: list[Any]) -> None:
        """Fetch ``records`` again later: they were returned but not processed."""
        consumer = self._consumer
        if consumer is None or not records:
            return
        with contextlib.suppress(IllegalStateError, KafkaError, AssertionError):
            if tp in consumer.assignment():
                consumer.seek(tp, records[0].offset)

    def _process(self, tp: TopicPartition, records: list[Any]) -> int:
        if not records:
            return 0
        part = self._partitions.get(tp.partition)
        if part is None:
            return 0
        if part.status != ACTIVE:
            # Not ours to process yet (restoring): never let the fetch position
            # run past records we did not apply.
            self._rewind(tp, records)
            return 0
        if tp.topic == self.config.events_topic:
            return self._process_events(part, tp, records)
        position = self._positions.get(tp)
        count = 0
        for record in records:
            if position is not None and record.offset < position:
                self._skip("already_processed")
                continue
            try:
                self._on_control(part, tp, record)
            except Exception as exc:
                self._record_failed(tp, record, exc)
            count += 1
            if self.fault is not None:
                self.fault("record_processed")
        self._positions[tp] = records[-1].offset + 1
        return count

    def _process_events(self, part: _Partition, tp: TopicPartition, records: list[Any]) -> int:
        """The hot path: one batch of one events partition.

        Does exactly what :meth:`_on_event` does for each record, but the common
        case (a well-formed event of a session already held on this partition)
        runs inline, with the lookups bound once per batch, and the events
        counter is added to once per batch and label set rather than per
        record. Everything else (new sessions, bad records, replays) goes
        through :meth:`_on_event` / :meth:`_apply_event`.

        Whatever a record does, it fails alone: any exception on its path is
        caught at the record, dead-lettered with a reason and counted, and the
        partition moves on. Only the processor's own infrastructure (the
        producer, the group) stops the loop.
        """
        position = self._positions.get(tp)
        number = part.number
        fault = self.fault
        decode = decode_agent_record
        process = self.engine.process
        sessions_get = self.engine.sessions.get
        meta_get = self._meta.get
        dirty = self._dirty
        unstaged = self._unstaged
        halted = self._halted
        active = part.active
        move_to_end = active.move_to_end
        agent_label = self.metrics.agent_label
        agent_header = self.config.agent_header
        now = self.clock()
        # Record time later than this is a forged or broken producer clock.
        horizon_ms = (now + self.config.max_clock_skew_s) * 1000.0
        clamped = 0
        counts: dict[tuple[type, str | None], list[Any]] = {}
        counts_get = counts.get
        count = 0
        try:
            for record in records:
                offset = record.offset
                if position is not None and offset < position:
                    self._skip("already_processed")
                    continue
                count += 1
                try:
                    value = record.value
                    try:
                        event = decode(value)
                    except (msgspec.DecodeError, TypeError):
                        # malformed, unknown or forbidden type, null value: classified there
                        self._on_event(part, tp, record)
                        if fault is not None:
                            fault("record_processed")
                        continue
                    if agent_header is not None:
                        event.agent = self._header_agent(record, agent_header)
                    session = event.session
                    meta = meta_get(session)
                    key = record.key
                    if (
                        meta is None
                        or meta.partition != number
                        or offset <= meta.events_offset
                        or key is None
                        or key != session.encode()
                    ):
                        self._apply_event(part, tp, record, event, meta, now)
                        if fault is not None:
                            fault("record_processed")
                        continue
                    record_ts = record.timestamp
                    if record_ts > horizon_ms:
                        record_ts = int(horizon_ms)
                        clamped += 1
                    if unstaged and session in unstaged:
                        self._stage_session(session)
                        if meta_get(session) is None:  # dropped: its state was unencodable
                            self._apply_event(part, tp, record, event, None, now)
                            continue
                    try:
                        outputs = process(event, record_ts / 1000.0)
                    except Exception as exc:
                        outputs = self._processing_error(tp, record, exc)
                    # the bookkeeping of _touch, for a session that has a _Meta
                    state = sessions_get(session)
                    if state is not None:
                        if meta.parked:
                            meta.parked = False
                            part.parked.pop(session, None)
                            active[session] = None
                        else:
                            move_to_end(session)
                        meta.last_seen = now
                        dirty[session] = number
                        if state.halted_by:
                            halted.add(session)
                        else:
                            halted.discard(session)
                    meta.events_offset = offset
                    label_key = (type(event), event.agent)
                    tally = counts_get(label_key)
                    if tally is None:
                        # resolved at first sight, so labels and series appear in stream order
                        counter = self._event_counter(type(event), agent_label(event.agent))
                        counts[label_key] = [counter, 1]
                    else:
                        tally[1] += 1
                    if outputs:
                        for output in outputs:
                            self._emit(output, record_ts)
                except SimulatedCrash:
                    raise
                except Exception as exc:
                    self._record_failed(tp, record, exc)
                if fault is not None:
                    fault("record_processed")
        finally:
            for counter, n in counts.values():
                counter.inc(n)
            if clamped:
                self.metrics.timestamps_clamped.inc(clamped)
            self._account_engine_skips()
        self._positions[tp] = records[-1].offset + 1
        return count

    def _header_agent(self, record: Any, name: str) -> str | None:
        """The agent name the publishing service put in header ``name`` (None: absent)."""
        for header, value in record.headers or ():
            if header == name:
                if value is None or len(value) > 256:
                    return None
                return value.decode("utf-8", "replace") or None
        self.metrics.security_events.labels("agent_header_missing").inc()
        return None

    def _account_engine_skips(self) -> None:
        """Export the engine's seq-based skips (counted per event there) once per batch."""
        stats = self.engine.stats
        replays = stats.replays_skipped - self._engine_replays
        jumps = stats.seq_jumps - self._engine_jumps
        if not (replays or jumps):
            return
        self._engine_replays = stats.replays_skipped
        self._engine_jumps = stats.seq_jumps
        if replays:
            self.metrics.skipped.labels("seq_not_newer").inc(replays)
        if jumps:
            self.metrics.seq_jumps.inc(jumps)
        now = time.monotonic()
        if now - self._last_skip_log >= 10.0:  # rate-limited: a replayed trace is one line
            self._last_skip_log = now
            log.warning(
                "skipped %d events whose seq was not newer than their session's last and "
                "kept the replay mark on %d events whose seq jumped ahead by more than %d "
                "(streamguard_events_skipped_total)",
                replays,
                jumps,
                self.engine.max_seq_jump,
            )

    def _record_failed(self, tp: TopicPartition, record: Any, exc: BaseException) -> None:
        """A record whose handling raised: dead-letter it, count it, move on."""
        log.error(
            "record %s[%d]@%d failed (%r); dead-lettered",
            tp.topic,
            tp.partition,
            record.offset,
            exc,
        )
        self.metrics.processing_errors.inc()
        self._dead_letter(tp, record, "processing_error", repr(exc))

    def _event_counter(self, cls: type, label: str) -> Any:
        cache_key = (cls, label)
        counter = self._event_counters.get(cache_key)
        if counter is None:
            counter = self.metrics.events.labels(cls.__struct_config__.tag, label)
            self._event_counters[cache_key] = counter
        return counter

    def _skip(self, reason: str) -> None:
        counter = self._skip_counters.get(reason)
        if counter is None:
            counter = self._skip_counters[reason] = self.metrics.skipped.labels(reason)
        counter.inc()

    def _on_event(self, part: _Partition, tp: TopicPartition, record: Any) -> None:
        value = record.value
        if value is None:
            self._dead_letter(tp, record, "null_value", "an events record needs a JSON value")
            return
        try:
            event = decode_agent_event(value)
        except UnknownEventType:
            self._skip("unknown_type")
            return
        except NestingTooDeep as exc:
            self._dead_letter(tp, record, "too_deep", str(exc))
            return
        except ControlOnAgentStream as exc:
            self.metrics.security_events.labels("control_on_events_topic").inc()
            log.warning(
                "control event on the events topic (%s[%d]@%d) refused: %s",
                tp.topic,
                tp.partition,
                record.offset,
                exc,
            )
            self._dead_letter(tp, record, "control_on_events_topic", str(exc))
            return
        except msgspec.ValidationError as exc:
            self._dead_letter(tp, record, "invalid_event", str(exc))
            return
        except msgspec.DecodeError as exc:
            self._dead_letter(tp, record, "malformed", str(exc))
            return
        except TypeError as exc:  # a value that is not bytes (a broken deserializer)
            self._dead_letter(tp, record, "malformed", repr(exc))
            return
        if self.config.agent_header is not None:
            event.agent = self._header_agent(record, self.config.agent_header)
        self._apply_event(part, tp, record, event, self._meta.get(event.session), self.clock())

    def _apply_event(
        self,
        part: _Partition,
        tp: TopicPartition,
        record: Any,
        event: Any,
        meta: _Meta | None,
        now: float,
    ) -> None:
        """Check, apply and account one decoded event (``meta``: the session's, if held).

        A session's state is only ever created on its home partition (the
        partitioner's choice for its key): a record keyed as another session but
        produced to some other partition is dead-lettered there, so it can
        neither create a rival state nor make the real session's records look
        misplaced.
        """
        session = event.session
        key = record.key
        if key is None or (key != session.encode()):
            self._dead_letter(
                tp,
                record,
                "key_mismatch",
                f"record key {key!r} is not the event's session {session!r}",
            )
            return
        if (meta is None or meta.partition != part.number) and (
            home := self._murmur_partition(key)
        ) != part.number:
            self.metrics.misrouted.labels(tp.topic).inc()
            self._dead_letter(
                tp,
                record,
                "not_home_partition",
                f"session {session!r} belongs on partition {home} (murmur2 of its key); "
                "publishers must use the default partitioner",
            )
            return
        if meta is not None:
            if meta.partition != part.number:
                # state from before the home rule, held on another partition of ours
                self._dead_letter(
                    tp,
                    record,
                    "partition_mismatch",
                    f"session {session!r} lives on partition {meta.partition}",
                )
                return
            if record.offset <= meta.events_offset:
                self._skip("already_applied")
                return
        record_ts = self._clamped(record.timestamp, now)
        if session in self._unstaged:
            self._stage_session(session)
            meta = self._meta.get(session)
        try:
            outputs = self.engine.process(event, record_ts / 1000.0)
        except Exception as exc:
            outputs = self._processing_error(tp, record, exc)
        meta = self._touch(part, session, meta, now)
        if meta is None:
            return
        meta.events_offset = record.offset
        self._event_counter(type(event), self.metrics.agent_label(event.agent)).inc()
        if outputs:
            for output in outputs:
                self._emit(output, record_ts)

    def _clamped(self, record_ts_ms: int, now: float) -> int:
        """The record timestamp, clamped to the processor's clock plus the allowed skew."""
        horizon_ms = (now + self.config.max_clock_skew_s) * 1000.0
        if record_ts_ms > horizon_ms:
            self.metrics.timestamps_clamped.inc()
            return int(horizon_ms)
        return record_ts_ms

    def _processing_error(self, tp: TopicPartition, record: Any, exc: Exception) -> list[Output]:
        log.exception(
            "processing %s[%d]@%d failed", tp.topic, tp.partition, record.offset, exc_info=exc
        )
        self.metrics.processing_errors.inc()
        self._dead_letter(tp, record, "processing_error", repr(exc))
        return []

    def _on_control(self, part: _Partition, tp: TopicPartition, record: Any) -> None:
        value = record.value
        if value is None:
            self._dead_letter(tp, record, "null_value", "a control record needs a JSON value")
            return
        try:
            event = decode_operator_event(value)
        except UnknownEventType as exc:
            self._dead_letter(tp, record, "unknown_type", str(exc))
            return
        except NestingTooDeep as exc:
            self._dead_letter(tp, record, "too_deep", str(exc))
            return
        except msgspec.ValidationError as exc:
            self._dead_letter(tp, record, "invalid_event", str(exc))
            return
        except msgspec.DecodeError as exc:
            self._dead_letter(tp, record, "malformed", str(exc))
            return
        if not isinstance(event, Reset):
            self._dead_letter(
                tp,
                record,
                "not_a_control_event",
                f"{_tag(event)!r} is an agent event; the control topic takes control events only",
            )
            return
        session = event.session
        key = record.key
        if key is not None and key != session.encode():
            self._dead_letter(
                tp,
                record,
                "key_mismatch",
                f"record key {key!r} is not the event's session {session!r}",
            )
            return
        meta = self._meta.get(session)
        # The home partition always wins: a control record elsewhere is re-routed
        # there once; one that claims to be re-routed already and is still not
        # home was forged (or the partition count changed): refused.
        target = self._murmur_partition(session.encode())
        if target != part.number:
            self.metrics.misrouted.labels(tp.topic).inc()
            if any(h[0] == REROUTED_HEADER for h in record.headers or ()):
                self.metrics.security_events.labels("forged_reroute").inc()
                self._dead_letter(
                    tp,
                    record,
                    "not_home_partition",
                    f"session {session!r} belongs on partition {target}; a re-routed "
                    "record never lands elsewhere",
                )
            else:
                self._reroute(tp, record, session, target)
            return
        if meta is not None and meta.partition != part.number:
            self._dead_letter(
                tp,
                record,
                "partition_mismatch",
                f"session {session!r} lives on partition {meta.partition}",
            )
            return
        if meta is not None and record.offset <= meta.control_offset:
            self._skip("already_applied")
            return
        now = self.clock()
        record_ts = self._clamped(record.timestamp, now)
        ts = record_ts / 1000.0
        if session in self._unstaged:
            self._stage_session(session)
            meta = self._meta.get(session)
        self.metrics.controls.labels(_tag(event)).inc()
        try:
            outputs = self.engine.control(event, ts)
        except Exception as exc:
            log.exception("control %s[%d]@%d failed", tp.topic, tp.partition, record.offset)
            self.metrics.processing_errors.inc()
            self._dead_letter(tp, record, "processing_error", repr(exc))
            outputs = []
        meta = self._touch(part, session, meta, now)
        if meta is None:
            return
        meta.control_offset = record.offset
        for output in outputs:
            self._emit(output, record_ts)

    def _touch(
        self, part: _Partition, session: str, meta: _Meta | None, now: float
    ) -> _Meta | None:
        """Book-keeping after the engine saw a record of ``session`` (``now``: processing time)."""
        state = self.engine.sessions.get(session)
        if state is None:
            return meta
        if meta is None:
            meta = _Meta(part.number, -1, -1, now)
            self._meta[session] = meta
            part.active[session] = None
        else:
            if meta.parked:
                meta.parked = False
                part.parked.pop(session, None)
                part.active[session] = None
            else:
                part.active.move_to_end(session)
            meta.last_seen = now
        self._dirty[session] = part.number
        if state.halted_by:
            self._halted.add(session)
        else:
            self._halted.discard(session)
        return meta

    def _murmur_partition(self, key: bytes) -> int:
        return (murmur2(key) & 0x7FFFFFFF) % self._partition_count

    # ------------------------------------------------------------- outputs

    def _emit(self, output: Output, record_ts_ms: int | None) -> None:
        tag = _tag(output)
        headers: list[tuple[str, bytes]] = [("type", tag.encode())]
        agent = self.metrics.agent_label(output.agent)
        if isinstance(output, Alert):
            headers.append(("signal", output.signal.encode()))
            self.metrics.alerts.labels(output.signal, output.severity, agent).inc()
        elif isinstance(output, GuardrailTrip):
            headers.append(("signal", output.signal.encode()))
            headers.append(("guardrail", output.guardrail.encode()))
            self.metrics.trips.labels(output.guardrail, output.signal, output.scope, agent).inc()
        elif isinstance(output, Feedback):
            headers.append(("signal", ",".join(output.signals).encode()))
        else:
            guardrail = getattr(output, "guardrail", None)
            if guardrail:
                headers.append(("guardrail", str(guardrail).encode()))
        self.metrics.outputs.labels(tag).inc()
        value = encode(output)
        if len(value) > self.config.max_output_bytes:
            value = self._output_stub(output, len(value))
            headers.append(("streamguard.truncated", b"1"))
        self._outbox.append(
            (
                self.config.alerts_topic,
                output.session.encode(),
                value,
                None,
                headers,
                record_ts_ms,
            )
        )

    def _output_stub(self, output: Output, size: int) -> bytes:
        """``output`` cut down to fit: its identity and decision kept, free text cut,
        its ``detail`` replaced by a note saying what was cut. Consumers parse it as
        the same output type."""
        self.metrics.outputs_truncated.labels("output").inc()
        log.warning(
            "%s %s of session %r is %d bytes, over max_output_bytes: produced as a stub",
            _tag(output),
            output.id,
            output.session[:64],
            size,
        )
        changes: dict[str, Any] = {}
        for field in msgspec.structs.fields(output):
            value = getattr(output, field.name)
            if isinstance(value, str) and len(value) > STUB_TEXT_BYTES // 4:
                changes[field.name] = truncate_middle(value, STUB_TEXT_BYTES)
            elif isinstance(value, list) and field.name != "signals":
                changes[field.name] = []
        if isinstance(output, Alert):
            changes["detail"] = {"truncated": True, "original_bytes": size}
        elif isinstance(output, Feedback):
            changes["signals"] = [truncate_middle(s, 256) for s in output.signals[:16]]
        return encode(msgspec.structs.replace(output, **changes))

    def _copied_headers(self, record: Any) -> list[tuple[str, bytes]]:
        """The headers of ``record`` that may be copied onto what streamguard writes:
        none in streamguard's own namespaces, and a bounded amount in all."""
        copied: list[tuple[str, bytes]] = []
        budget = MAX_COPIED_HEADER_BYTES
        for name, value in record.headers or ():
            if name.startswith(OWNED_HEADER_PREFIXES):
                self.metrics.security_events.labels("forged_header").inc()
                continue
            size = len(name) + (len(value) if value else 0)
            if size > budget:
                copied.append(("streamguard.headers-truncated", b"1"))
                break
            budget -= size
            copied.append((name, value))
        return copied

    def _dead_letter(self, tp: TopicPartition, record: Any, reason: str, error: str) -> None:
        headers = self._copied_headers(record)
        headers += [
            ("dlq.reason", reason.encode()),
            ("dlq.error", error[:MAX_ERROR_HEADER].encode("utf-8", "replace")),
            ("dlq.source.topic", tp.topic.encode()),
            ("dlq.source.partition", str(tp.partition).encode()),
            ("dlq.source.offset", str(record.offset).encode()),
            ("dlq.source.timestamp", str(record.timestamp).encode()),
        ]
        key, value = record.key, record.value
        limit = self.config.max_output_bytes
        if key is not None and len(key) > MAX_DEAD_LETTER_KEY:
            headers.append(("dlq.key-truncated-from", str(len(key)).encode()))
            key = key[:MAX_DEAD_LETTER_KEY]
        if value is not None and len(value) > limit - MAX_COPIED_HEADER_BYTES - 4096:
            # Too big to produce again with our headers: keep the start, say so.
            self.metrics.outputs_truncated.labels("dead_letter").inc()
            headers.append(("dlq.value-truncated-from", str(len(value)).encode()))
            value = value[: limit // 2]
        self.metrics.dead_letters.labels(reason).inc()
        self._outbox.append((self.config.dlq_topic, key, value, None, headers, None))

    def _reroute(self, tp: TopicPartition, record: Any, session: str, target: int) -> None:
        headers = self._copied_headers(record)
        headers.append((REROUTED_HEADER, f"{tp.partition}:{record.offset}".encode()))
        self.metrics.rerouted.inc()
        log.info(
            "control record %s[%d]@%d for session %r re-routed to partition %d",
            tp.topic,
            tp.partition,
            record.offset,
            session,
            target,
        )
        self._outbox.append(
            (self.config.control_topic, session.encode(), record.value, target, headers, None)
        )

    async def _send_outbox(self) -> None:
        if not self._outbox:
            return
        producer = self._producer
        assert producer is not None
        outbox, self._outbox = self._outbox, []
        limit = self.config.max_in_flight
        for topic, key, value, partition, headers, record_ts in outbox:
            try:
                future = await producer.send(
                    topic, value=value, key=key, partition=partition, headers=headers
                )
            except MessageSizeTooLargeError:
                # Every output is capped before it gets here; this is the last line
                # of defence (headers, a smaller producer limit): a stub, never a crash.
                future = await producer.send(
                    self.config.dlq_topic,
                    value=None,
                    key=key[:MAX_DEAD_LETTER_KEY] if key else key,
                    headers=[
                        ("dlq.reason", b"output_too_large"),
                        ("dlq.error", f"{len(value or b'')} bytes for {topic}".encode()),
                    ],
                )
                self.metrics.outputs_truncated.labels("unproducible").inc()
                self.metrics.dead_letters.labels("output_too_large").inc()
            if record_ts is not None:
                future.add_done_callback(self._latency_observer(record_ts))
            self._inflight.append(future)
            if len(self._inflight) >= limit:
                await self._relieve()

    def _latency_observer(self, record_ts_ms: int) -> Callable[[asyncio.Future[Any]], None]:
        histogram = self.metrics.latency

        def observe(future: asyncio.Future[Any]) -> None:
            if not future.cancelled() and future.exception() is None:
                histogram.observe(max(0.0, time.time() - record_ts_ms / 1000.0))

        return observe

    async def _relieve(self) -> None:
        """Backpressure: pause fetching until half the in-flight sends are acknowledged."""
        consumer = self._consumer
        assert consumer is not None
        self.metrics.backpressure.inc()
        paused = set()
        with contextlib.suppress(IllegalStateError):
            paused = set(consumer.assignment())
            if paused:
                consumer.pause(*paused)
        try:
            target = self.config.max_in_flight // 2
            timeout = self.config.send_timeout_ms / 1000
            while len(self._inflight) > target:
                future = self._inflight.popleft()
                await asyncio.wait_for(asyncio.shield(future), timeout)
        finally:
            self._resume_active(paused)

    def _resume_active(self, tps: Iterable[TopicPartition]) -> None:
        consumer = self._consumer
        if consumer is None or self._stopping.is_set():
            return
        resumable = []
        for tp in tps:
            part = self._partitions.get(tp.partition)
            if part is not None and part.status == ACTIVE:
                resumable.append(tp)
        with contextlib.suppress(IllegalStateError):
            assigned = consumer.assignment()
            resumable = [tp for tp in resumable if tp in assigned]
            if resumable:
                consumer.resume(*resumable)

    # ========================================================== checkpoints

    async def _checkpoint(self) -> None:
        """A whole checkpoint, waited for (revocation, shutdown). Caller holds the lock."""
        await self._finish_pending()
        await self._complete(await self._stage())

    async def _start_checkpoint(self) -> None:
        """A checkpoint from the loop: stage it now, let its acknowledgements overlap processing.

        Only one is ever pending: the next checkpoint, a revocation and the
        shutdown each wait for it first, so changelog writes and commits stay
        in checkpoint order. Caller holds the lock.
        """
        await self._finish_pending()
        stage = await self._stage()
        self._pending = asyncio.create_task(self._complete_pending(stage))

    async def _finish_pending(self) -> None:
        task, self._pending = self._pending, None
        if task is not None:
            await task  # re-raises the failure of a pending checkpoint

    async def _stage(self) -> _Stage:
        """Fix what this checkpoint covers: every output sent so far, every session
        changed since the last checkpoint as it is now, every offset processed so far.

        This is all that holds up processing. The sessions are encoded afterwards,
        a slice at a time between the loop's batches, and any of them about to
        change is encoded first (:meth:`_stage_session`). Whatever is processed
        after this point belongs to the next checkpoint, so the order the
        guarantees rest on (outputs acknowledged, then snapshots, then the
        commit) holds for exactly the records this checkpoint covers.
        """
        started = time.monotonic()
        self._sweep()
        await self._send_outbox()
        outputs, self._inflight = list(self._inflight), deque()
        records: list[tuple[int, bytes, bytes | None]] = []
        self._unstaged, self._dirty = self._dirty, {}
        self._staged_records = records
        offsets = {
            tp: pos
            for tp, pos in self._positions.items()
            if self._committed.get(tp) != pos
            and (part := self._partitions.get(tp.partition)) is not None
            and part.status != RESTORING
        }
        self._since_checkpoint = 0
        now = time.monotonic()
        self._next_checkpoint = now + self.config.checkpoint_interval_ms / 1000
        self.metrics.checkpoint_pause.observe(now - started)
        return _Stage(started, outputs, records, offsets)

    async def _complete(self, stage: _Stage) -> None:
        """Outputs acked -> snapshots encoded, written and acked -> offsets committed,
        for one staged checkpoint."""
        if self.checkpoint_gate is not None:
            await self.checkpoint_gate()
        timeout = self.config.send_timeout_ms / 1000
        if stage.outputs:
            await asyncio.wait_for(asyncio.gather(*stage.outputs), timeout)
        self._hook("outputs_acked")
        await self._write_changelog(stage.records)
        self._hook("changelog_acked")
        await self._commit(stage.offsets)
        self._hook("committed")
        self.metrics.checkpoints.inc()
        self.metrics.last_checkpoint.set(time.time())
        self.metrics.checkpoint_duration.observe(time.monotonic() - stage.started)
        self._update_lag()

    async def _complete_pending(self, stage: _Stage) -> None:
        try:
            await self._complete(stage)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            # The loop raises it at its next turn: stop without committing more.
            self._fatal = self._fatal or exc
            log.error("checkpoint failed: %r", exc)
            raise

    def _hook(self, point: str) -> None:
        if self.fault is not None:
            self.fault(point)

    def _snapshot_record(self, session: str, partition: int) -> tuple[int, bytes, bytes | None]:
        """(changelog partition, key, value) of one session: its snapshot, or a
        tombstone if it is no longer held there."""
        meta = self._meta.get(session)
        value = None
        if meta is not None and meta.partition == partition:
            try:
                state = self.engine.snapshot(session)
                if state is not None:
                    value = encode_entry(
                        meta.events_offset, meta.control_offset, meta.last_seen, state
                    )
            except Exception as exc:
                # One session's state must never fail a checkpoint (and with it
                # every commit of the partition): that session alone is dropped.
                self._drop_unencodable(session, exc)
                value = None
        return partition, session.encode(), value

    def _drop_unencodable(self, session: str, exc: Exception) -> None:
        log.error("session %r cannot be snapshotted (%r): dropped, a tombstone written", session, exc)
        self.metrics.snapshot_failures.inc()
        meta = self._meta.pop(session, None)
        if meta is not None:
            part = self._partitions.get(meta.partition)
            if part is not None:
                part.active.pop(session, None)
                part.parked.pop(session, None)
        self.engine.evict(session)
        self._halted.discard(session)
        self._dirty.pop(session, None)

    def _stage_session(self, session: str) -> None:
        """Encode ``session`` for the pending checkpoint now: it is about to change."""
        self._staged_records.append(self._snapshot_record(session, self._unstaged.pop(session)))

    def _encode_slice(self, limit: int = ENCODE_SLICE) -> bool:
        """Encode up to ``limit`` staged sessions; whether any are left."""
        unstaged = self._unstaged
        append = self._staged_records.append
        snapshot_record = self._snapshot_record
        for _ in range(min(limit, len(unstaged))):
            session, partition = unstaged.popitem()
            append(snapshot_record(session, partition))
        return bool(unstaged)

    async def _write_changelog(self, records: list[tuple[int, bytes, bytes | None]]) -> None:
        """Encode the staged sessions a slice at a time, send each slice as soon as it
        is encoded, then wait for every acknowledgement.

        ``records`` is the checkpoint's record list: sessions encoded early by copy
        on write are in it already, and are sent with the next slice. Each slice
        goes out as one producer batch per changelog partition (no per-record send,
        future or wake-up), so the broker takes a checkpoint as a stream of small
        requests rather than one burst of megabytes, and the loop gets a turn
        between slices.
        """
        producer = self._changelog_producer
        assert producer is not None
        topic = self.config.changelog_topic
        observe = self.metrics.snapshot_bytes.observe
        sent: list[asyncio.Future[Any]] = []
        done = tombstones = 0
        more = True
        while more or done < len(records):
            more = self._encode_slice()
            end = len(records)  # copy on write may append while a send awaits
            batches: dict[int, Any] = {}
            for i in range(done, end):
                partition, key, value = records[i]
                if value is None:
                    tombstones += 1
                else:
                    observe(len(value))
                batch = batches.get(partition)
                if batch is None:
                    batch = batches[partition] = producer.create_batch()
                if batch.append(key=key, value=value, timestamp=None) is None:
                    sent.append(await producer.send_batch(batch, topic, partition=partition))
                    batch = batches[partition] = producer.create_batch()
                    batch.append(key=key, value=value, timestamp=None)  # a lone record fits
            for partition, batch in batches.items():
                if batch.record_count():
                    batch.close()
                    sent.append(await producer.send_batch(batch, topic, partition=partition))
            done = end
            if more:
                await asyncio.sleep(0)
        if tombstones < done:
            self.metrics.changelog_records.labels("snapshot").inc(done - tombstones)
        if tombstones:
            self.metrics.changelog_records.labels("tombstone").inc(tombstones)
        if sent:
            await asyncio.wait_for(asyncio.gather(*sent), self.config.send_timeout_ms / 1000)

    async def _commit(self, offsets: dict[TopicPartition, int]) -> bool:
        consumer = self._consumer
        assert consumer is not None
        if not offsets:
            return True
        try:
            await consumer.commit(offsets)
        except (CommitFailedError, IllegalStateError) as exc:
            # Membership changed under us: the group will hand the partitions out
            # again and the changelog (already flushed) keeps state consistent.
            self.metrics.commit_failures.inc()
            log.warning("offset commit refused (%s); the group is rebalancing", exc)
            return False
        self._committed.update(offsets)
        return True

    def _update_lag(self) -> None:
        consumer = self._consumer
        if consumer is None:
            return
        for tp, pos in self._positions.items():
            try:
                high = consumer.highwater(tp)
            except IllegalStateError:
                continue
            if high is not None:
                self.metrics.lag.labels(tp.topic, str(tp.partition)).set(max(0, high - pos))

    # ============================================================ eviction

    def _sweep(self) -> None:
        """Evict sessions idle past their TTL, on processing time.

        Processing time, not record time: record timestamps are written by the
        producers, and one record dated a week ahead would otherwise expire every
        session of its partition, halted ones included. It also lets a partition
        that receives nothing more be swept (the loop calls this on its timer).
        """
        idle_ttl = self.config.session_idle_ttl_s
        halted_ttl = self.config.halted_session_ttl_s
        now = self.clock()
        for part in self._partitions.values():
            if part.status != ACTIVE:
                continue
            budget = self.config.eviction_batch
            active, parked = part.active, part.parked
            while active and budget > 0:
                session = next(iter(active))
                meta = self._meta[session]
                if now - meta.last_seen < idle_ttl:
                    break
                budget -= 1
                if session in self._halted:
                    del active[session]
                    parked[session] = None
                    meta.parked = True
                else:
                    self._evict(part, session, "idle")
            while parked and budget > 0:
                session = next(iter(parked))
                if now - self._meta[session].last_seen < halted_ttl:
                    break
                budget -= 1
                self._evict(part, session, "halted")

    def _evict(self, part: _Partition, session: str, kind: str) -> None:
        self.engine.evict(session)
        part.active.pop(session, None)
        part.parked.pop(session, None)
        self._meta.pop(session, None)
        self._halted.discard(session)
        self._dirty[session] = part.number  # a tombstone at the next flush
        self.metrics.evictions.labels(kind).inc()

    # ============================================================ rebalances

    def _tps(self, partition: int) -> tuple[TopicPartition, TopicPartition]:
        return (
            TopicPartition(self.config.events_topic, partition),
            TopicPartition(self.config.control_topic, partition),
        )

    async def _on_revoked(self, revoked: set[TopicPartition]) -> None:
        async with self._lock:
            self._generation += 1
            if self._fatal is not None or not self._partitions:
                return
            try:
                await asyncio.wait_for(
                    self._checkpoint(), self.config.rebalance_timeout_ms / 1000 * 0.8
                )
            except BaseException as exc:
                # aiokafka would log and swallow this; make the loop fail loudly instead.
                self._fatal = exc
                log.error("checkpoint on revocation failed: %r", exc)
                return
            suspended = [n for n, p in self._partitions.items() if p.status == ACTIVE]
            marks: dict[int, int] = {}
            if suspended:
                with contextlib.suppress(KafkaError, asyncio.TimeoutError):
                    marks = await asyncio.wait_for(self._changelog_ends(suspended), 5)
            for number in suspended:
                part = self._partitions[number]
                part.status = SUSPENDED
                part.changelog_mark = marks.get(number)
            log.info("partitions revoked: %s", _describe(revoked))

    async def _on_assigned(self, assigned: set[TopicPartition]) -> None:
        async with self._lock:
            self._generation += 1
            self.metrics.rebalances.inc()
            if self._fatal is not None:
                return
            try:
                await self._assign(assigned)
            except BaseException as exc:
                # aiokafka would log and swallow this, leaving partitions unprocessed.
                self._fatal = exc
                log.error("handling the partition assignment failed: %r", exc)

    async def _assign(self, assigned: set[TopicPartition]) -> None:
        """The assignment, under the lock: drop, keep or restore each partition."""
        cfg = self.config
        events = {tp.partition for tp in assigned if tp.topic == cfg.events_topic}
        control = {tp.partition for tp in assigned if tp.topic == cfg.control_topic}
        if events != control:
            log.error(
                "events and control partitions are not co-partitioned (%s vs %s); "
                "is another assignor in use by a member of group %r?",
                sorted(events),
                sorted(control),
                cfg.group_id,
            )
        for number in list(self._partitions):
            if number not in events:
                self._drop_partition(number)
        kept = [n for n, p in self._partitions.items() if p.status in (SUSPENDED, ACTIVE)]
        if kept:
            try:
                ends = await asyncio.wait_for(self._changelog_ends(kept), 10)
            except (TimeoutError, KafkaError) as exc:
                log.warning("cannot check the changelog (%r): reloading kept partitions", exc)
                ends = {}
            for number in kept:
                part = self._partitions[number]
                if part.changelog_mark is not None and ends.get(number) == part.changelog_mark:
                    part.status = ACTIVE
                else:
                    log.info("partition %d changed hands meanwhile: reloading it", number)
                    self._drop_partition(number)
        restoring = []
        for number in sorted(events):
            part = self._partitions.get(number)
            if part is None:
                self._partitions[number] = _Partition(number, RESTORING)
                for tp in self._tps(number):
                    self._positions.pop(tp, None)
                    self._committed.pop(tp, None)
                restoring.append(number)
            elif part.status == RESTORING:
                restoring.append(number)
        consumer = self._consumer
        if restoring and consumer is not None:
            tps = [tp for n in restoring for tp in self._tps(n) if tp in assigned]
            if tps:
                consumer.pause(*tps)
        if self._stopping.is_set() and consumer is not None and assigned:
            consumer.pause(*assigned)
        self.metrics.owned_partitions.set(len(events))
        self._assigned_once = True
        log.info("assigned partitions %s (restoring %s)", sorted(events), restoring or "none")
        if restoring and (self._restore_task is None or self._restore_task.done()):
            self._restore_task = asyncio.create_task(self._restore_worker())

    def _drop_partition(self, number: int) -> None:
        part = self._partitions.pop(number, None)
        if part is None:
            return
        for session in part.sessions():
            self.engine.evict(session)
            self._meta.pop(session, None)
            self._halted.discard(session)
            self._dirty.pop(session, None)
        for tp in self._tps(number):
            self._positions.pop(tp, None)
            self._committed.pop(tp, None)
            with contextlib.suppress(KeyError):
                self.metrics.lag.remove(tp.topic, str(number))

    async def _changelog_ends(self, partitions: list[int]) -> dict[int, int]:
        restorer = self._restorer
        assert restorer is not None
        tps = [TopicPartition(self.config.changelog_topic, n) for n in partitions]
        ends = await restorer.end_offsets(tps)
        return {tp.partition: offset for tp, offset in ends.items()}

    async def _restore_worker(self) -> None:
        try:
            while True:
                wanted = {n: p for n, p in self._partitions.items() if p.status == RESTORING}
                if not wanted:
                    return
                restorer = self._restorer
                assert restorer is not None
                started = time.monotonic()
                loaded = await read_partitions(restorer, self.config.changelog_topic, wanted)
                async with self._lock:
                    for number, original in wanted.items():
                        part = self._partitions.get(number)
                        if part is not original or part.status != RESTORING:
                            continue  # dropped (or replaced) while we were reading
                        self._install(part, loaded[number].entries)
                        part.status = ACTIVE
                        self._resume_active(self._tps(number))
                        log.info(
                            "restored partition %d: %d sessions from %d changelog records",
                            number,
                            len(part.active),
                            loaded[number].records_read,
                        )
                self.metrics.restore_duration.observe(time.monotonic() - started)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            log.error("restore failed: %r", exc)
            self._fatal = exc

    def _install(self, part: _Partition, entries: dict[str, bytes]) -> None:
        decoded = []
        for session, value in entries.items():
            try:
                entry = decode_entry(value)
                self.engine.restore(session, entry.state)
            except (ChangelogError, msgspec.DecodeError, ValueError) as exc:
                log.error(
                    "session %r: snapshot not restorable (%s); it starts afresh", session, exc
                )
                self.metrics.skipped.labels("unrestorable_snapshot").inc()
                continue
            decoded.append((entry.last_seen, session, entry))
        decoded.sort(key=lambda item: item[0])
        for last_seen, session, entry in decoded:
            meta = _Meta(part.number, entry.events_offset, entry.control_offset, last_seen)
            self._meta[session] = meta
            part.active[session] = None
            state = self.engine.sessions.get(session)
            if state is not None and state.halted_by:
                self._halted.add(session)
        self.metrics.restored_sessions.inc(len(decoded))


def _topic_errors(response: Any) -> list[tuple[str, int, str | None]]:
    out = []
    for item in getattr(response, "topic_errors", []):
        topic, code = item[0], item[1]
        message = item[2] if len(item) > 2 else None
        out.append((topic, code, message))
    return out


def _describe(tps: Iterable[TopicPartition]) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ", ".join(f"{t}{sorted(ps)}" for t, ps in sorted(by_topic.items())) or "none"


async def run_processor(config: ProcessorConfig) -> None:
    """Entry point of ``streamguard run``: run until SIGTERM/SIGINT, then shut down cleanly."""
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
    processor = Processor(config)
    # What exists now (modules, policy, clients' plumbing) lives as long as the
    # process: leave it out of every future collection, so that full passes
    # scan only what processing creates and stall the loop for less.
    gc.collect()
    gc.freeze()
    loop = asyncio.get_running_loop()
    installed = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, processor.request_stop)
            installed.append(signum)
    try:
        await processor.run()
    except (StartupError, KafkaConnectionError) as exc:
        log.error("cannot start: %s", exc)
        raise SystemExit(1) from None
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
