"""The stream processor behind ``streamguard run``: the conductor of the shell's parts.

One :class:`Processor` is one member of a consumer group. It consumes the
agents' events topic and the co-partitioned control topic, feeds one
:class:`~streamguard.engine.Engine` that holds every owned session's detector
state, and publishes the engine's outputs. A session lives on exactly one
partition (its home: records are keyed by session id), each partition's records
are applied in offset order by a single loop, so each session behaves as an
actor: private state, one record at a time, no locks in the hot path and no
task per session.

The parts, each the only owner of its state (``docs/architecture.md``):

* :mod:`.routing` — pure: what to do with one record (apply, skip,
  dead-letter, re-route) and every reason why;
* :mod:`.sessions` — the session table: where each session lives, its offsets,
  its last activity, the owned partitions, eviction on processing time;
* :mod:`.outbox` — outgoing records, their bounds, in-flight sends, backpressure;
* :mod:`.checkpoint` — positions, changed sessions and the checkpoint cycle
  (outputs acknowledged, then snapshots, then the commit), copy on write;
* :mod:`.rebalance` — revoke, suspend, assign, restore;
* :mod:`.topics` — the topics' shape and creation;
* :mod:`.fleet_facts`, :mod:`.fleet_stage`, :mod:`.circuits` — fleet
  guardrails (``docs/fleet.md``): the facts this stage publishes, the fleet
  stage's windows and circuits, the circuits table every instance applies.

This module wires them to the Kafka clients and runs the loop. The loop's hot
path (a well-formed event of a held session, in order) is inlined here with
the parts' state bound once per batch; everything else goes through
:mod:`.routing`. ``docs/guarantees.md`` argues what a crash can and cannot do.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from fnmatch import fnmatchcase
from typing import Any

import msgspec
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import (
    CommitFailedError,
    IllegalStateError,
    KafkaError,
)
from aiokafka.partitioner import murmur2

from ..engine import Engine
from ..events import MAX_NAME_CHARS, Output, Reset, ScopeReset, Usage, decode_agent_record
from ..fleet_windows import FLEET_GUARDRAIL, CircuitRecord
from ..policy import Policy, PolicySet, load_policy_set
from ..watchdog import SessionState
from . import routing
from .changelog import encode_entry
from .checkpoint import ENCODE_SLICE, ChangelogRecord, Checkpointer, CheckpointPlan, within
from .circuits import CircuitTable
from .config import ProcessorConfig
from .fleet_facts import FactPublisher
from .fleet_stage import FLEET_FAULT_POINTS, FleetStage
from .health import HealthServer
from .lifecycle import serve
from .metrics import AgentLabels, Metrics
from .outbox import REROUTED_HEADER, SEND_EVERY, Outbox
from .rebalance import Listener, Rebalancer, rewind
from .sessions import OwnedPartition, PartitionStatus, SessionMeta, SessionTable
from .topics import StartupError, prepare_topics

log = logging.getLogger("streamguard.kafka")
MAX_SESSION_KEY_BYTES = 4 * MAX_NAME_CHARS
"""The longest record key a session id can be (256 characters of UTF-8)."""

# Named points where a test can inject a crash (see ``fault``).
FAULT_POINTS = (
    "record_processed",
    "outputs_acked",
    "changelog_acked",
    "committed",
    *FLEET_FAULT_POINTS,
)

POLL_MS = 200
# Largest record batch the producer builds. A checkpoint writes thousands of
# snapshots at once, and the producer sends one batch per partition per round
# trip: with the client's 16 KiB default a checkpoint would be a chain of
# dozens of round trips. Well under every broker default of message.max.bytes
# (1,000,012 bytes before Kafka 2.4, 1,048,588 since).
PRODUCE_BATCH_BYTES = 512 * 1024

__all__ = [
    "ENCODE_SLICE",
    "FAULT_POINTS",
    "Processor",
    "SimulatedCrash",
    "StartupError",
    "run_processor",
]


class SimulatedCrash(Exception):
    """Raised by test fault hooks; the processor stops without flushing or committing."""


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
        self.metrics = Metrics(
            agents=AgentLabels(config.metrics_agents, config.metrics_max_agents),
            active_sessions=lambda: len(self.engine.sessions),
            halted_sessions=lambda: len(self.sessions.halted),
        )
        self.metrics.ready.set_function(lambda: 1.0 if self.ready else 0.0)
        self.health: HealthServer | None = None
        self.metrics_port: int | None = None

        self.lock = asyncio.Lock()  # the loop's batches vs. rebalance callbacks
        self.stopping = asyncio.Event()
        self.fatal: BaseException | None = None
        self._started = False
        self._loop_beat = time.monotonic()

        self._consumer: AIOKafkaConsumer | None = None
        self._producer: AIOKafkaProducer | None = None  # outputs, dead letters, re-routes
        self._changelog_producer: AIOKafkaProducer | None = None
        self._restorer: AIOKafkaConsumer | None = None
        self.partition_count = 0

        metrics = self.metrics
        self.outbox = Outbox(config, metrics)
        self.sessions = SessionTable(
            self.engine,
            on_dropped=lambda session, partition: self.checkpointer.changed(session, partition),
            on_evicted=lambda kind: metrics.evictions.labels(kind).inc(),
            max_per_partition=config.max_sessions_per_partition,
        )
        self.checkpointer = Checkpointer(
            config,
            metrics,
            snapshot=self.snapshot_record,
            changelog_producer=lambda: self._changelog_producer,
            commit=self._commit,
            hook=self._hook,
            on_complete=self._update_lag,
        )
        self.checkpointer.on_failure = self._fail
        self.rebalancer = Rebalancer(
            config, metrics, self.engine, self.sessions, self.checkpointer, host=self
        )
        # Fleet guardrails (docs/fleet.md): only with [[fleet]] rules in the policy.
        self.fleet_rules = list(getattr(self.engine.policies, "fleet", []))
        self.facts: FactPublisher | None = (
            FactPublisher(
                self.fleet_rules,
                config.fleet_facts_topic,
                metrics,
                # not the list's bound append: the outbox swaps its queue for a new list
                lambda record: self.outbox.queued.append(record),
            )
            if self.fleet_rules
            else None
        )
        self.fleet_stage: FleetStage | None = None
        self.circuits: CircuitTable | None = None
        # (rule, scope label) -> the scopes whose circuit is open, for the gauge
        self._open_under_label: dict[tuple[str, str], set[str]] = {}

        # engine counters already exported (seq replays and jumps are counted
        # there, once per event; the processor adds the difference per batch)
        self._engine_replays = 0
        self._engine_jumps = 0
        self._last_skip_log = 0.0
        # per-class/agent caches for the hot path
        self._event_counters: dict[tuple[type, str], Any] = {}
        self._skip_counters: dict[str, Any] = {}

    # ============================================================ host side

    @property
    def consumer(self) -> AIOKafkaConsumer | None:
        return self._consumer

    @property
    def restorer(self) -> AIOKafkaConsumer | None:
        return self._restorer

    @property
    def checkpoint_gate(self) -> Callable[[], Awaitable[None]] | None:
        """Test seam: awaited by a checkpoint right after it is staged."""
        return self.checkpointer.gate

    @checkpoint_gate.setter
    def checkpoint_gate(self, gate: Callable[[], Awaitable[None]] | None) -> None:
        self.checkpointer.gate = gate

    def _fail(self, exc: BaseException) -> None:
        self.fatal = self.fatal or exc

    def _hook(self, point: str) -> None:
        if self.fault is not None:
            self.fault(point)

    def sessions_view(self, path: str, params: dict[str, str]) -> tuple[int, bytes]:
        """``/sessions`` and ``/sessions/ID`` of the HTTP endpoint: what this instance holds."""
        engine = self.engine
        if path:
            described = engine.describe(path)
            meta = self.sessions.meta.get(path)
            if described is None or meta is None:
                return 404, msgspec.json.encode({"error": f"session {path!r} is not held here"})
            described.update(
                partition=meta.partition,
                last_seen=meta.last_seen,
                events_offset=meta.events_offset,
                control_offset=meta.control_offset,
            )
            return 200, msgspec.json.encode(described)
        try:
            limit = max(1, min(int(params.get("limit", "1000")), 10_000))
        except ValueError:
            return 400, msgspec.json.encode({"error": "limit must be an integer"})
        halted_only = params.get("halted", "0") not in ("0", "false", "")
        pattern = params.get("agent")
        table = self.sessions
        metas = table.meta
        rows: list[dict[str, Any]] = []

        def add(session: str) -> bool:
            """Append the session's row; False when it is not (or no longer) held."""
            meta = metas.get(session)
            state = engine.sessions.get(session)
            if meta is None or state is None:
                return False
            if len(rows) < limit:
                rows.append(
                    {
                        "session": session,
                        "agent": state.agent,
                        "partition": meta.partition,
                        "halted_by": list(state.halted_by),
                        "halt_signal": state.halt_signal,
                        "last_seen": meta.last_seen,
                    }
                )
            return True

        matched = 0
        if halted_only:
            # The halted are a set of their own: listing them reads only them.
            for session in sorted(table.halted):
                state = engine.sessions.get(session)
                if state is None or (
                    pattern is not None and not fnmatchcase(state.agent or "", pattern)
                ):
                    continue
                matched += add(session)
        else:
            # The sessions of each origin (agent, tenant), the agent pattern tested once
            # an origin: a listing reads the origins and the rows it returns, not every
            # session held (the count is the index's).
            origins = [
                members for (agent, _tenant), members in table.by_origin.items()
                if pattern is None or fnmatchcase(agent or "", pattern)
            ]
            matched = sum(len(members) for members in origins)
            for members in origins:
                for session in members:
                    if len(rows) >= limit:
                        break
                    add(session)
        body = {
            "partitions": sorted(self.sessions.partitions),
            "held": len(self.sessions.meta),
            "matched": matched,
            "truncated": matched > len(rows),
            "sessions": rows,
        }
        return 200, msgspec.json.encode(body)

    # =============================================================== lifecycle

    @property
    def ready(self) -> bool:
        return (
            self._started
            and self.rebalancer.assigned_once
            and not self.stopping.is_set()
            and self.fatal is None
            and not self.sessions.restoring()
            and (self.circuits is None or self.circuits.loaded.is_set())
        )

    def _liveness(self) -> tuple[bool, str]:
        if self.fatal is not None:
            return False, f"failed: {self.fatal!r}"
        stall = time.monotonic() - self._loop_beat
        limit = self.config.send_timeout_ms / 1000 * 2 + 30
        if self._started and stall > limit:
            return False, f"processing loop stalled for {stall:.0f} s"
        return True, ""

    def _readiness(self) -> tuple[bool, str]:
        if self.ready:
            return True, f"{len(self.sessions.partitions)} partitions"
        if not self.rebalancer.assigned_once:
            return False, "waiting for a partition assignment"
        if self.fatal is not None:
            return False, "failed"
        restoring = self.sessions.restoring()
        if restoring:
            return False, f"restoring partitions {restoring}"
        if self.circuits is not None and not self.circuits.loaded.is_set():
            return False, "reading the fleet circuits table"
        return False, "stopping"

    def request_stop(self) -> None:
        """Stop fetching, finish the batch in hand, checkpoint, leave the group."""
        if self.stopping.is_set():
            return
        log.info("stop requested: finishing the current batch, then flushing and committing")
        self.stopping.set()
        consumer = self._consumer
        if consumer is not None:
            with contextlib.suppress(IllegalStateError, KafkaError):
                assignment = consumer.assignment()
                if assignment:
                    consumer.pause(*assignment)

    async def start(self) -> None:
        """Connect, check (or create) the topics, start the HTTP endpoint, join the group."""
        cfg = self.config
        producer_options = cfg.producer_options()
        consumer_options = cfg.consumer_options()
        if cfg.metrics_port is not None:
            self.health = HealthServer(
                self.metrics.registry,
                liveness=self._liveness,
                readiness=self._readiness,
                host=cfg.metrics_host,
                port=cfg.metrics_port,
                sessions=self.sessions_view,
            )
            self.metrics_port = await self.health.start()
        try:
            self.partition_count = await prepare_topics(cfg, fleet=bool(self.fleet_rules))
            self._producer = AIOKafkaProducer(
                **producer_options,
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
                **producer_options,
                acks="all",
                enable_idempotence=False,
                linger_ms=0,
                max_batch_size=PRODUCE_BATCH_BYTES,
            )
            await self._changelog_producer.start()
            self._restorer = AIOKafkaConsumer(
                **consumer_options,
                group_id=None,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
            )
            await self._restorer.start()
            self._consumer = AIOKafkaConsumer(**cfg.group_consumer_options())
            self._consumer.subscribe(
                [cfg.events_topic, cfg.control_topic], listener=Listener(self.rebalancer)
            )
            await self._consumer.start()
            if self.fleet_rules:
                await self._start_fleet()
        except BaseException:
            await self._close_clients()
            raise
        self._started = True
        self._loop_beat = time.monotonic()
        self.checkpointer.idle_tick(time.monotonic())
        log.info(
            "joined group %r on %s + %s (%d partitions); metrics on port %s",
            cfg.group_id,
            cfg.events_topic,
            cfg.control_topic,
            self.partition_count,
            self.metrics_port,
        )

    async def _start_fleet(self) -> None:
        """The circuits table (every instance) and, unless switched off, the fleet stage."""
        cfg = self.config
        self.circuits = CircuitTable(
            cfg.consumer_options(),
            cfg.fleet_circuits_topic,
            on_change=self.apply_circuit,
            on_invalid=self._invalid_circuit,
            on_failure=self._fail,
            fetch_max_wait_ms=min(cfg.fetch_max_wait_ms, 100),
        )
        await self.circuits.start()
        if cfg.fleet_stage:
            self.fleet_stage = FleetStage(
                cfg,
                self.fleet_rules,
                self.metrics,
                clock=self.clock,
                fault=self.fault,
                on_failure=self._fail,
            )
            await self.fleet_stage.start()

    async def run(self) -> None:
        """Run until :meth:`request_stop` (graceful) or a failure (no flush, no commit)."""
        if not self._started:
            await self.start()
        try:
            await self._loop()
        except BaseException as exc:
            self.fatal = self.fatal or exc
            log.error("processor failed: %r; stopping without a checkpoint", exc)
            await self._close_clients()
            raise
        await self._shutdown()

    async def _shutdown(self) -> None:
        cfg = self.config
        try:
            async with self.lock:
                await within(
                    self.checkpoint(),
                    cfg.shutdown_timeout_s,
                    "the final checkpoint did not finish (shutdown_timeout_s)",
                )
            log.info("final checkpoint done; leaving the group")
            if self.fleet_stage is not None:
                await self.fleet_stage.stop(checkpoint=True)
        except BaseException as exc:
            log.error("final checkpoint failed (%r): offsets left uncommitted", exc)
            await self._close_clients()
            raise
        await self._close_clients()

    async def _close_clients(self) -> None:
        await self.rebalancer.cancel()
        await self.checkpointer.cancel_pending()
        stage, self.fleet_stage = self.fleet_stage, None
        if stage is not None:
            await stage.stop(checkpoint=False)
        circuits, self.circuits = self.circuits, None
        if circuits is not None:
            await circuits.stop()
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

    # ============================================================== main loop

    async def _loop(self) -> None:
        cfg = self.config
        consumer = self._consumer
        assert consumer is not None
        checkpointer = self.checkpointer
        while not self.stopping.is_set():
            self._loop_beat = time.monotonic()
            if self.fatal is not None:
                raise self.fatal
            batch = await consumer.getmany(timeout_ms=POLL_MS, max_records=cfg.max_poll_records)
            generation = self.rebalancer.generation
            if self.fatal is not None:
                raise self.fatal
            async with self.lock:
                if generation != self.rebalancer.generation:
                    # A rebalance ran while this batch waited for the lock. The new
                    # assignment re-fetches from the committed offsets; rewinding
                    # also covers a partition that kept its fetch position.
                    for tp, records in batch.items():
                        self._rewind(tp, records)
                    continue
                processed = 0
                for tp, records in batch.items():
                    processed += self._process(tp, records)
                    if len(self.outbox.queued) >= SEND_EVERY:
                        await self._send_outbox()
                await self._send_outbox()
                checkpointer.counted(processed)
                now = time.monotonic()
                if now >= checkpointer.next_due:
                    # on the timer too, so partitions that receive nothing are swept
                    self._sweep()
                if checkpointer.due(now, self.outbox.busy()):
                    await self._start_checkpoint()
                elif now >= checkpointer.next_due:
                    checkpointer.idle_tick(now)
                    self._update_lag()
        self._loop_beat = time.monotonic()

    def _rewind(self, tp: TopicPartition, records: list[Any]) -> None:
        rewind(self._consumer, tp, records)

    # ------------------------------------------------------------- records

    def _process(self, tp: TopicPartition, records: list[Any]) -> int:
        if not records:
            return 0
        part = self.sessions.partitions.get(tp.partition)
        if part is None:
            return 0
        if part.status is not PartitionStatus.ACTIVE:
            # Not ours to process yet (restoring): never let the fetch position
            # run past records we did not apply.
            self._rewind(tp, records)
            return 0
        if tp.topic == self.config.events_topic:
            return self._process_events(part, tp, records)
        position = self.checkpointer.positions.get(tp)
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
        self.checkpointer.applied(tp, records[-1].offset + 1)
        return count

    def _process_events(self, part: OwnedPartition, tp: TopicPartition, records: list[Any]) -> int:
        """The hot path: one batch of one events partition.

        The common case (a well-formed event of a session already held on this
        partition, in order) runs inline, with the parts' state bound once per
        batch, and the events counter is added to once per batch and label set
        rather than per record. Everything else (new sessions, bad records,
        replays) goes through :mod:`.routing` in :meth:`_on_event`.

        Whatever a record does, it fails alone: any exception on its path is
        caught at the record, dead-lettered with a reason and counted, and the
        partition moves on. Only the processor's own infrastructure (the
        producer, the group) stops the loop.
        """
        checkpointer = self.checkpointer
        position = checkpointer.positions.get(tp)
        number = part.number
        fault = self.fault
        decode = decode_agent_record
        process = self.engine.process
        sessions_get = self.engine.sessions.get
        meta_get = self.sessions.meta.get
        dirty = checkpointer.dirty
        unstaged = checkpointer.unstaged
        table = self.sessions
        halted = table.halted
        active = part.active
        move_to_end = active.move_to_end
        agent_label = self.metrics.agent_label
        agent_header = self.config.agent_header
        tenant_header = self.config.tenant_header
        emit = self.outbox.emit
        facts = self.facts
        fleet_pending = facts.pending if facts is not None else None
        circuits = self.circuits
        fleet_open = circuits.open if circuits is not None else None
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
                    try:
                        event = decode(record.value)
                    except Exception:
                        # malformed, unknown or forbidden type, null value: classified there
                        self._on_event(part, tp, record, None, now)
                        continue
                    if agent_header is not None:
                        event.agent = self._header_value(record, agent_header, "agent_header_missing")
                    if tenant_header is not None:
                        event.tenant = self._header_value(record, tenant_header, "tenant_header_missing")
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
                        self._on_event(part, tp, record, event, now)
                        continue
                    record_ts = record.timestamp
                    if record_ts > horizon_ms:
                        record_ts = int(horizon_ms)
                        clamped += 1
                    if unstaged and session in unstaged:
                        checkpointer.before_change(session)
                        if meta_get(session) is None:  # dropped: its state was unencodable
                            self._on_event(part, tp, record, event, now)
                            continue
                    try:
                        outputs = process(event, record_ts / 1000.0)
                    except Exception as exc:
                        outputs = self._processing_error(tp, record, exc)
                    # the bookkeeping of SessionTable.touch, for a held session
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
                        if meta.agent is not state.agent or meta.tenant is not state.tenant:
                            table.reorigin(session, meta, state)  # named after its first event
                    meta.events_offset = offset
                    if fleet_pending is not None and state is not None:
                        if type(event) is Usage:  # spend, published at the next checkpoint
                            usage_ts = event.ts if event.ts is not None else record_ts / 1000.0
                            # dated by the batch's latest usage: one back-dated event
                            # must not carry the batch's spend out of the window
                            previous = fleet_pending.get(session)
                            if previous is not None and previous > usage_ts:
                                usage_ts = previous
                            fleet_pending[session] = usage_ts
                        if outputs:
                            facts.after_event(  # type: ignore[union-attr]  # set with fleet_pending
                                state, outputs, event.ts or record_ts / 1000.0, False
                            )
                        if fleet_open and FLEET_GUARDRAIL not in state.halted_by:
                            tripped = self._fleet_gate(state, record_ts / 1000.0)
                            if tripped:
                                outputs = [*outputs, *tripped]
                                halted.add(session)
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
                            emit(output, record_ts)
                except SimulatedCrash:
                    raise
                except Exception as exc:
                    self._record_failed(tp, record, exc)
                finally:
                    if fault is not None:
                        fault("record_processed")
        finally:
            for counter, n in counts.values():
                counter.inc(n)
            if clamped:
                self.metrics.timestamps_clamped.inc(clamped)
            self._account_engine_skips()
        checkpointer.applied(tp, records[-1].offset + 1)
        return count

    def _on_event(
        self,
        part: OwnedPartition,
        tp: TopicPartition,
        record: Any,
        event: Any | None,
        now: float,
    ) -> None:
        """The slow path of one events record: classify (decoding it if the hot path
        could not), then apply, skip or dead-letter it."""
        if event is None:
            decoded = routing.decode_event(record.value)
            if not isinstance(decoded, (routing.DeadLetter, routing.Skip)):
                if self.config.agent_header is not None:
                    decoded.agent = self._header_value(
                        record, self.config.agent_header, "agent_header_missing"
                    )
                if self.config.tenant_header is not None:
                    decoded.tenant = self._header_value(
                        record, self.config.tenant_header, "tenant_header_missing"
                    )
        else:
            decoded = event
        if isinstance(decoded, (routing.DeadLetter, routing.Skip)):
            self._refuse(tp, record, decoded)
            return
        event = decoded
        session = event.session
        meta = self.sessions.meta.get(session)
        key = record.key
        if key is None or len(key) > MAX_SESSION_KEY_BYTES:
            # No key, or one no session's can be: route_event dead-letters it as
            # key_mismatch. The partitioner's hash is pure Python, and hashing a
            # megabyte of key held every partition of the instance for a fifth of a second.
            home = -1
        elif meta is not None and meta.partition == part.number:
            home = part.number  # held here, so here is home: spare the hash (replays take this path)
        else:
            home = self._home(key)
        verdict = routing.route_event(event, key, record.offset, part.number, meta, home)
        if not isinstance(verdict, routing.Apply):
            self._refuse(tp, record, verdict)
            return
        record_ts = self._clamped(record.timestamp, now)
        if session in self.checkpointer.unstaged:
            self.checkpointer.before_change(session)
            meta = self.sessions.meta.get(session)
        started = session not in self.engine.sessions
        try:
            outputs = self.engine.process(event, record_ts / 1000.0)
        except Exception as exc:
            outputs = self._processing_error(tp, record, exc)
        meta = self.sessions.touch(part, session, meta, now)
        if meta is None:
            return
        facts = self.facts
        state = self.engine.sessions.get(session)
        if facts is not None and state is not None:
            ts = event.ts if event.ts is not None else record_ts / 1000.0
            if isinstance(event, Usage):
                facts.pending[session] = max(ts, facts.pending.get(session, ts))
            facts.after_event(state, outputs, ts, started)
            if self.circuits is not None and self.circuits.open:
                tripped = self._fleet_gate(state, record_ts / 1000.0)
                if tripped:
                    outputs = [*outputs, *tripped]
                    self.sessions.halted.add(session)
        self.checkpointer.changed(session, part.number)
        meta.events_offset = record.offset
        self._event_counter(type(event), self.metrics.agent_label(event.agent)).inc()
        for output in outputs:
            self.outbox.emit(output, record_ts)

    def _on_control(self, part: OwnedPartition, tp: TopicPartition, record: Any) -> None:
        decoded = routing.decode_control(record.value)
        if isinstance(decoded, routing.DeadLetter):
            self._refuse(tp, record, decoded)
            return
        if isinstance(decoded, ScopeReset):
            self._on_scope_reset(tp, record, decoded)
            return
        event: Reset = decoded
        session = event.session
        meta = self.sessions.meta.get(session)
        rerouted = any(h[0] == REROUTED_HEADER for h in record.headers or ())
        verdict = routing.route_control(
            event,
            record.key,
            record.offset,
            part.number,
            meta,
            self._home(session.encode()),
            rerouted,
        )
        if isinstance(verdict, routing.Reroute):
            self.metrics.misrouted.labels(tp.topic).inc()
            self.outbox.reroute(tp, record, session, verdict.target)
            return
        if not isinstance(verdict, routing.Apply):
            self._refuse(tp, record, verdict)
            return
        now = self.clock()
        record_ts = self._clamped(record.timestamp, now)
        if session in self.checkpointer.unstaged:
            self.checkpointer.before_change(session)
            meta = self.sessions.meta.get(session)
        self.metrics.controls.labels("reset").inc()
        try:
            outputs = self.engine.control(event, record_ts / 1000.0)
        except Exception as exc:
            log.exception(
                "control %s[%d]@%d failed",
                tp.topic,
                tp.partition,
                record.offset,
                extra=_where(tp, record, session),
            )
            self.metrics.processing_errors.inc()
            self.outbox.dead_letter(tp, record, "processing_error", repr(exc))
            outputs = []
        meta = self.sessions.touch(part, session, meta, now)
        if meta is None:
            return
        self.checkpointer.changed(session, part.number)
        meta.control_offset = record.offset
        for output in outputs:
            self.outbox.emit(output, record_ts)

    # ------------------------------------------------------------ fleet

    def _on_scope_reset(self, tp: TopicPartition, record: Any, event: ScopeReset) -> None:
        """An operator closes a fleet circuit: forward it to the fleet stage owning the scope."""
        verdict = routing.route_scope_reset(
            event, record.key, {rule.name for rule in self.fleet_rules}
        )
        if isinstance(verdict, routing.DeadLetter):
            self._refuse(tp, record, verdict)
            return
        if self.facts is None:  # no rules: route_scope_reset refused it already
            return
        self.metrics.controls.labels("scope_reset").inc()
        ts = event.ts if event.ts is not None else record.timestamp / 1000.0
        log.info("close of the circuit of scope %s by %s forwarded", event.scope, event.by or "?")
        self.facts.close(event.scope, event.by, ts)

    def _fleet_gate(self, state: Any, ts: float) -> list[Output]:
        """Trip a session whose scope's circuit is open (its first event, or any later one)."""
        circuits, facts = self.circuits, self.facts
        if circuits is None or facts is None:
            return []
        circuit = circuits.open_for(facts.scopes(state))
        if circuit is None:
            return []
        outputs = self.engine.fleet_halt(
            state.session, circuit.scope, circuit.generation, self._circuit_reason(circuit), ts
        )
        self._count_fleet_trips(circuit, outputs)
        return outputs

    @staticmethod
    def _circuit_reason(circuit: CircuitRecord) -> str:
        return (
            f"The fleet circuit of scope {circuit.scope} is open: {circuit.reason}. Every session "
            "of the scope is halted until an operator closes it (`streamguard reset --scope "
            f"{circuit.scope}`)" + (" or its cool-down ends." if circuit.until is not None else ".")
        )

    @staticmethod
    def _closed_reason(circuit: CircuitRecord) -> str:
        return (
            f"The fleet circuit of scope {circuit.scope} closed ({circuit.reason}); the "
            "session may run again."
        )

    def _count_fleet_trips(self, circuit: CircuitRecord, outputs: list[Output]) -> None:
        if outputs:
            self.metrics.fleet_trips.labels(
                circuit.rule, self.metrics.scope_label(circuit.value)
            ).inc(len(outputs))

    async def apply_circuit(self, circuit: CircuitRecord, previous: CircuitRecord | None) -> None:
        """A scope's circuit changed (the circuits table): halt or release the sessions
        of the scope held here."""
        metrics = self.metrics
        is_open = circuit.state == "open"
        # Scopes past the label bound share the label `other`: the gauge counts the open
        # circuits under each label, so one of them closing cannot zero it while another
        # is still open.
        label = (circuit.rule, metrics.scope_label(circuit.value))
        open_here = self._open_under_label.setdefault(label, set())
        if is_open:
            open_here.add(circuit.scope)
        else:
            open_here.discard(circuit.scope)
        metrics.fleet_circuit_open.labels(*label).set(float(len(open_here)))
        if is_open and circuit.opened_at is not None:
            metrics.fleet_apply_delay.observe(max(0.0, self.clock() - circuit.opened_at))
        facts = self.facts
        if facts is None:
            return
        async with self.lock:
            now = self.clock()
            engine = self.engine
            checkpointer = self.checkpointer
            partitions = self.sessions.partitions
            reason = self._circuit_reason(circuit) if is_open else self._closed_reason(circuit)
            affected = 0
            scope = circuit.scope
            table = self.sessions
            # Only the sessions the change can concern: an opening circuit's are those of
            # the origins (agent, tenant) in its scope, a closing one's are halted. A
            # circuit change costs the scope's sessions, not every session held.
            if is_open:
                candidates = table.of_origins(
                    lambda agent, tenant: scope in facts.scopes_of(agent, tenant)
                )
            else:
                candidates = sorted(table.halted)
            for session in candidates:
                meta = table.meta.get(session)
                if meta is None:
                    continue
                part = partitions.get(meta.partition)
                if part is None or part.status is not PartitionStatus.ACTIVE:
                    continue
                state = engine.sessions.get(session)
                if state is None:
                    continue
                if is_open:
                    if FLEET_GUARDRAIL in state.halted_by or scope not in facts.scopes(state):
                        continue
                elif state.fleet_scope != scope:
                    continue
                if not is_open:
                    affected += self._release_fleet_halt(session, state, circuit, meta.partition, now)
                    continue
                if session in checkpointer.unstaged:
                    checkpointer.before_change(session)
                outputs = engine.fleet_halt(session, circuit.scope, circuit.generation, reason, now)
                self._count_fleet_trips(circuit, outputs)
                if outputs:
                    affected += 1
                    if state.halted_by:
                        self.sessions.halted.add(session)
                    checkpointer.changed(session, meta.partition)
                    for output in outputs:
                        self.outbox.emit(output, None)
            if affected:
                log.warning(
                    "fleet circuit of scope %s %s: %d sessions here %s",
                    circuit.scope,
                    circuit.state,
                    affected,
                    "halted" if is_open else "released",
                )
            await self._send_outbox()

    def partition_active(self, part: OwnedPartition) -> None:
        """A partition's sessions are applied to again (restored, or kept through a
        rebalance): release those halted by a fleet circuit that closed meanwhile.
        :meth:`apply_circuit` passes over partitions that are restoring or suspended,
        and nothing else lifts a fleet halt: a halted agent sends no event that could.
        (A circuit that opened meanwhile needs no such pass: each session's next event
        meets it.) Caller holds the lock."""
        circuits = self.circuits
        if circuits is None or self.facts is None:
            return
        engine, table = self.engine, self.sessions
        now = self.clock()
        for session in [s for s in part.sessions() if s in table.halted]:
            state = engine.sessions.get(session)
            if state is None or FLEET_GUARDRAIL not in state.halted_by:
                continue
            scope = state.fleet_scope
            circuit = circuits.circuits.get(scope) if scope is not None else None
            if circuit is None or circuit.state == "open":
                continue
            if self._release_fleet_halt(session, state, circuit, part.number, now):
                log.info("session %r released: the circuit of scope %s closed meanwhile", session, circuit.scope)

    def _release_fleet_halt(
        self, session: str, state: SessionState, circuit: CircuitRecord, partition: int, now: float
    ) -> bool:
        """Lift a closed circuit's halt from one held session (or hand it to another open
        circuit covering it), with the snapshot and the outputs that follow; whether it
        said anything. Caller holds the lock."""
        checkpointer = self.checkpointer
        if session in checkpointer.unstaged:
            checkpointer.before_change(session)
        outputs, handed_over = self._lift_fleet_halt(session, state, circuit, now)
        if handed_over or outputs:
            checkpointer.changed(session, partition)
        if not state.halted_by:
            self.sessions.halted.discard(session)
        for output in outputs:
            self.outbox.emit(output, None)
        return bool(outputs)

    def _lift_fleet_halt(
        self, session: str, state: SessionState, circuit: CircuitRecord, now: float
    ) -> tuple[list[Output], bool]:
        """The circuit that halted ``session`` closed: release it, unless another open
        circuit covers it too (an agent's rule and its tenant's): then the halt stays,
        now that circuit's, and its close lifts it. ``(outputs, handed over)``."""
        circuits, facts = self.circuits, self.facts
        other = circuits.open_for(facts.scopes(state)) if circuits is not None and facts is not None else None
        if other is not None and other.scope != circuit.scope:
            handed = self.engine.fleet_handover(
                session, circuit.scope, other.scope, self._circuit_reason(other)
            )
            return [], handed
        outputs = self.engine.fleet_release(
            session, circuit.scope, circuit.generation, self._closed_reason(circuit), now
        )
        return outputs, False

    def _invalid_circuit(self, tp: TopicPartition, record: Any, error: str) -> None:
        log.error("unreadable circuit record %s[%d]@%d: %s", tp.topic, tp.partition, record.offset, error)
        self.outbox.dead_letter(tp, record, "invalid_circuit", error)

    def _flush_facts(self) -> None:
        facts = self.facts
        if facts is None or not facts.pending:
            return
        meta = self.sessions.meta
        checkpointer = self.checkpointer

        def changed(session: str) -> None:
            held = meta.get(session)
            if held is not None:
                checkpointer.changed(session, held.partition)

        facts.flush(self.engine, changed)

    def _refuse(
        self, tp: TopicPartition, record: Any, verdict: routing.DeadLetter | routing.Skip
    ) -> None:
        if isinstance(verdict, routing.Skip):
            self._skip(verdict.reason)
            return
        if verdict.misrouted:
            self.metrics.misrouted.labels(tp.topic).inc()
        if verdict.security is not None:
            self.metrics.security_events.labels(verdict.security).inc()
            log.warning(
                "%s record %s[%d]@%d refused: %s",
                verdict.security,
                tp.topic,
                tp.partition,
                record.offset,
                verdict.error,
                extra=_where(tp, record),
            )
        self.outbox.dead_letter(tp, record, verdict.reason, verdict.error)

    def _home(self, key: bytes) -> int:
        """The home partition of a key: the partitioner's choice (Java-compatible murmur2)."""
        return (murmur2(key) & 0x7FFFFFFF) % self.partition_count

    def _clamped(self, record_ts_ms: int, now: float) -> int:
        """The record timestamp, clamped to the processor's clock plus the allowed skew."""
        horizon_ms = (now + self.config.max_clock_skew_s) * 1000.0
        if record_ts_ms > horizon_ms:
            self.metrics.timestamps_clamped.inc()
            return int(horizon_ms)
        return record_ts_ms

    def _header_value(
        self, record: Any, name: str, missing: routing.SecurityKind
    ) -> str | None:
        """The agent name or tenant the publishing service put in header ``name``
        (None: absent, counted as ``missing``)."""
        for header, value in record.headers or ():
            if header == name:
                if value is None or len(value) > 256:
                    return None
                return value.decode("utf-8", "replace") or None
        self.metrics.security_events.labels(missing).inc()
        return None

    def _processing_error(self, tp: TopicPartition, record: Any, exc: Exception) -> list[Output]:
        log.exception(
            "processing %s[%d]@%d failed",
            tp.topic,
            tp.partition,
            record.offset,
            exc_info=exc,
            extra=_where(tp, record),
        )
        self.metrics.processing_errors.inc()
        self.outbox.dead_letter(tp, record, "processing_error", repr(exc))
        return []

    def _record_failed(self, tp: TopicPartition, record: Any, exc: BaseException) -> None:
        """A record whose handling raised: dead-letter it, count it, move on."""
        log.error(
            "record %s[%d]@%d failed (%r); dead-lettered",
            tp.topic,
            tp.partition,
            record.offset,
            exc,
            extra=_where(tp, record),
        )
        self.metrics.processing_errors.inc()
        self.outbox.dead_letter(tp, record, "processing_error", repr(exc))

    def _event_counter(self, cls: type, label: str) -> Any:
        cache_key = (cls, label)
        counter = self._event_counters.get(cache_key)
        if counter is None:
            tag = cls.__struct_config__.tag  # type: ignore[attr-defined]  # a msgspec Struct class
            counter = self.metrics.events.labels(tag, label)
            self._event_counters[cache_key] = counter
        return counter

    def _skip(self, reason: routing.SkipReason) -> None:
        counter = self._skip_counters.get(reason)
        if counter is None:
            counter = self._skip_counters[reason] = self.metrics.skipped.labels(reason)
        counter.inc()

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

    # ------------------------------------------------------------- outputs

    async def _send_outbox(self) -> None:
        if not self.outbox.queued:
            return
        producer = self._producer
        assert producer is not None
        await self.outbox.send(producer, self._pause_all, self.resume_active)

    def _pause_all(self) -> set[TopicPartition]:
        consumer = self._consumer
        assert consumer is not None
        paused: set[TopicPartition] = set()
        with contextlib.suppress(IllegalStateError):
            paused = set(consumer.assignment())
            if paused:
                consumer.pause(*paused)
        return paused

    def resume_active(self, tps: Iterable[TopicPartition]) -> None:
        consumer = self._consumer
        if consumer is None or self.stopping.is_set():
            return
        resumable = []
        for tp in tps:
            part = self.sessions.partitions.get(tp.partition)
            if part is not None and part.status is PartitionStatus.ACTIVE:
                resumable.append(tp)
        with contextlib.suppress(IllegalStateError):
            assigned = consumer.assignment()
            resumable = [tp for tp in resumable if tp in assigned]
            if resumable:
                consumer.resume(*resumable)

    # ========================================================== checkpoints

    async def checkpoint(self) -> None:
        """A whole checkpoint, waited for (revocation, shutdown). Caller holds the lock."""
        await self.checkpointer.finish_pending()
        await self.checkpointer.complete(await self._stage())

    async def _start_checkpoint(self) -> None:
        """A checkpoint from the loop: stage it now, let its acknowledgements overlap
        processing. Caller holds the lock."""
        await self.checkpointer.finish_pending()
        self.checkpointer.start(await self._stage())

    async def _stage(self) -> CheckpointPlan:
        self._sweep()
        # Spend facts go out with the checkpoint that snapshots them as published.
        self._flush_facts()
        await self._send_outbox()
        partitions = self.sessions.partitions
        return self.checkpointer.stage(
            self.outbox.take_in_flight(),
            include=lambda n: (part := partitions.get(n)) is not None
            and part.status is not PartitionStatus.RESTORING,
        )

    def _sweep(self) -> None:
        """Evict idle sessions on processing time (record timestamps are the producers')."""
        cfg = self.config
        self.sessions.sweep(
            self.clock(), cfg.session_idle_ttl_s, cfg.halted_session_ttl_s, cfg.eviction_batch
        )

    def snapshot_record(self, session: str, partition: int) -> ChangelogRecord:
        """(changelog partition, key, value) of one session: its snapshot, or a
        tombstone if it is no longer held there."""
        meta: SessionMeta | None = self.sessions.meta.get(session)
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
                log.error(
                    "session %r cannot be snapshotted (%r): dropped, a tombstone written",
                    session,
                    exc,
                )
                self.metrics.snapshot_failures.inc()
                self.sessions.drop_session(session)
                self.checkpointer.forget_session(session)
                value = None
        return partition, session.encode(), value

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
        return True

    def _update_lag(self) -> None:
        consumer = self._consumer
        if consumer is None:
            return
        for tp, pos in self.checkpointer.positions.items():
            try:
                high = consumer.highwater(tp)
            except IllegalStateError:
                continue
            if high is not None:
                self.metrics.lag.labels(tp.topic, str(tp.partition)).set(max(0, high - pos))


def _where(tp: TopicPartition, record: Any, session: str | None = None) -> dict[str, Any]:
    """Structured fields of a log line about one record (JSON logs carry them)."""
    fields: dict[str, Any] = {"topic": tp.topic, "partition": tp.partition, "offset": record.offset}
    key = record.key
    if session is None and key is not None and len(key) <= 256:
        session = key.decode("utf-8", "replace")
    if session is not None:
        fields["session"] = session
    return fields


async def run_processor(config: ProcessorConfig) -> None:
    """Entry point of ``streamguard run``: run until SIGTERM/SIGINT, then shut down cleanly."""
    await serve(Processor(config), config.bootstrap_servers, log)
