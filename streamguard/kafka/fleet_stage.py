"""The fleet stage: rolling windows per fleet scope, limits, circuits.

A role of ``streamguard run`` (on unless ``--no-fleet-stage``, and only when the
policy has ``[[fleet]]`` rules), in a consumer group of its own
(``<group-id>.fleet``) over the fleet facts topic. The facts are keyed by scope,
so every fact of a scope reaches the one member that owns its partition,
whichever instances the scope's sessions live on. The arithmetic is
:mod:`streamguard.fleet_windows` (pure); this module owns what is around it:

* the scopes of the owned fact partitions (:class:`~streamguard.fleet_windows.ScopeState`),
  the positions processed and the offsets committed, the scopes changed since
  the last checkpoint;
* the checkpoint, in the session stage's order: the outputs (``fleet_alert``
  on the alerts topic, circuit records on the circuits topic, dead letters)
  acknowledged, then the changed scopes' snapshots written to the compacted
  fleet state topic (co-partitioned with the facts) and acknowledged, then the
  offsets committed;
* restore on assignment: a fact partition is paused, its state partition read
  to the end, and each scope skips the facts at or below the offset its
  snapshot has applied (so a crash between a snapshot and its commit counts
  nothing twice; the facts' own index covers replays by the session stage);
* processing-time housekeeping: cool-downs, forgotten idle sessions.

A fact that does not decode, or whose key is not its scope, goes to the
dead-letter topic with reason ``invalid_fleet_fact``; a fact of a rule the
policy no longer has is skipped and counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

import msgspec
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError, IllegalStateError

from ..events import encode
from ..fleet_windows import (
    Closed,
    Crossed,
    Decision,
    FleetRule,
    ScopeState,
    apply_fact,
    circuit_record,
    decode_facts,
    decode_scope,
    encode_scope,
    fleet_alert,
    forgettable,
    new_scope,
    parse_scope,
    tick,
    window_totals,
)
from .changelog import read_partitions
from .checkpoint import revocation_checkpoint, within
from .config import ProcessorConfig
from .inspect import home_partition
from .metrics import Metrics
from .outbox import Outbox, OutputRecord
from .rebalance import rewind

log = logging.getLogger("streamguard.kafka.fleet")

POLL_MS = 100
FLEET_FAULT_POINTS = ("fleet_fact_applied", "fleet_outputs_acked", "fleet_state_acked", "fleet_committed")


class _Listener(ConsumerRebalanceListener):
    def __init__(self, stage: FleetStage) -> None:
        self.stage = stage

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self.stage.on_revoked()

    async def on_partitions_assigned(self, assigned: Any) -> None:
        await self.stage.on_assigned(set(assigned))


class FleetStage:
    """The fleet stage of one instance (see the module docstring)."""

    def __init__(
        self,
        config: ProcessorConfig,
        rules: list[FleetRule],
        metrics: Metrics,
        *,
        clock: Callable[[], float] = time.time,
        fault: Callable[[str], None] | None = None,
        on_failure: Callable[[BaseException], None] = lambda exc: None,
    ) -> None:
        self.config = config
        self.rules = {rule.name: rule for rule in rules}
        self.metrics = metrics
        self.clock = clock
        self.fault = fault
        self.on_failure = on_failure
        self.outbox = Outbox(config, metrics)
        self.lock = asyncio.Lock()
        self.scopes: dict[int, dict[str, ScopeState]] = {}  # fact partition -> its scopes
        self.restoring: set[int] = set()
        self.dirty: dict[str, int] = {}  # scope -> its partition (no state there: a tombstone)
        # scope -> processing time of its last fact (or of its restore): an idle scope
        # whose window has passed and that never crossed a limit is forgotten
        self.touched: dict[str, float] = {}
        self.positions: dict[TopicPartition, int] = {}
        self.committed: dict[TopicPartition, int] = {}
        self.generation = 0
        self.assigned_once = False
        self._consumer: AIOKafkaConsumer | None = None
        self._restorer: AIOKafkaConsumer | None = None
        self._producer: AIOKafkaProducer | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._next_checkpoint = time.monotonic()
        self._gauges: dict[tuple[str, str], list[Any]] = {}

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        cfg = self.config
        self._producer = AIOKafkaProducer(
            **cfg.producer_options(), acks="all", enable_idempotence=False, linger_ms=0
        )
        await self._producer.start()
        self._restorer = AIOKafkaConsumer(
            **cfg.consumer_options(),
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await self._restorer.start()
        options = cfg.group_consumer_options()
        options["group_id"] = cfg.fleet_group_id
        options["group_instance_id"] = (
            f"{cfg.group_instance_id}.fleet" if cfg.group_instance_id else None
        )
        # Facts are few and a limit's delay matters more than fetch efficiency.
        options["fetch_max_wait_ms"] = min(cfg.fetch_max_wait_ms, 100)
        self._consumer = AIOKafkaConsumer(**options)
        self._consumer.subscribe([cfg.fleet_facts_topic], listener=_Listener(self))
        await self._consumer.start()
        self._task = asyncio.create_task(self._run())

    async def stop(self, *, checkpoint: bool) -> None:
        """Stop the loop; with ``checkpoint``, take a last checkpoint first (shutdown)."""
        self._stopping = True
        task, self._task = self._task, None
        if task is not None:
            if checkpoint:
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(asyncio.shield(task), self.config.shutdown_timeout_s)
            if not task.done():
                task.cancel()
            with contextlib.suppress(BaseException):
                await task
        if checkpoint and self._consumer is not None and self._producer is not None:
            try:
                async with self.lock:
                    await within(
                        self.checkpoint(), self.config.shutdown_timeout_s, "the fleet stage's final checkpoint"
                    )
            except BaseException as exc:
                log.error("the fleet stage's final checkpoint failed: %r", exc)
        for client in (self._consumer, self._restorer, self._producer):
            if client is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(client.stop(), 10)
        self._consumer = self._restorer = self._producer = None

    def _hook(self, point: str) -> None:
        if self.fault is not None:
            self.fault(point)

    # ----------------------------------------------------------------- loop

    async def _run(self) -> None:
        try:
            consumer = self._consumer
            assert consumer is not None
            while not self._stopping:
                batch = await consumer.getmany(timeout_ms=POLL_MS, max_records=self.config.max_poll_records)
                generation = self.generation
                async with self.lock:
                    if generation != self.generation:
                        for tp, records in batch.items():
                            self._rewind(tp, records)
                        continue
                    for tp, records in batch.items():
                        self._process(tp, records)
                    self._tick()
                    await self._send()
                    if time.monotonic() >= self._next_checkpoint:
                        await self.checkpoint()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            log.error("the fleet stage failed: %r", exc)
            self.on_failure(exc)
            raise

    def _rewind(self, tp: TopicPartition, records: list[Any]) -> None:
        rewind(self._consumer, tp, records)

    def _process(self, tp: TopicPartition, records: list[Any]) -> None:
        if not records:
            return
        scopes = self.scopes.get(tp.partition)
        if scopes is None or tp.partition in self.restoring:
            self._rewind(tp, records)
            return
        position = self.positions.get(tp)
        now = self.clock()
        skew = self.config.max_clock_skew_s
        metrics = self.metrics
        for record in records:
            if position is not None and record.offset < position:
                continue
            try:
                self._apply(tp, record, scopes, now, skew)
            except Exception as exc:  # a fact fails alone
                log.exception("fleet fact %s[%d]@%d failed", tp.topic, tp.partition, record.offset)
                metrics.processing_errors.inc()
                self.outbox.dead_letter(tp, record, "processing_error", repr(exc))
            self._hook("fleet_fact_applied")
        self.positions[tp] = records[-1].offset + 1

    def _apply(
        self, tp: TopicPartition, record: Any, scopes: dict[str, ScopeState], now: float, skew: float
    ) -> None:
        """One record: the facts of one scope, applied in order (all or none of them)."""
        metrics = self.metrics
        if record.value is None:
            self.outbox.dead_letter(tp, record, "invalid_fleet_fact", "a fleet fact needs a value")
            return
        try:
            facts = decode_facts(record.value)
        except (msgspec.DecodeError, ValueError, RecursionError) as exc:
            self.outbox.dead_letter(tp, record, "invalid_fleet_fact", str(exc))
            return
        scope = facts[0].scope
        if record.key != scope.encode() or any(f.scope != scope for f in facts):
            self.outbox.dead_letter(
                tp, record, "invalid_fleet_fact", f"record key {record.key!r} is not its facts' scope"
            )
            return
        parsed = parse_scope(scope)
        rule = self.rules.get(parsed[0]) if parsed else None
        if rule is None or parsed is None or parsed[1] != rule.by:
            metrics.fleet_facts_skipped.labels("unknown_rule").inc(len(facts))
            return
        state = scopes.get(scope)
        if state is None:
            state = scopes[scope] = new_scope(scope, rule)
        if record.offset <= state.offset:
            metrics.fleet_facts_skipped.labels("already_applied").inc(len(facts))
            return
        counted = clamped = 0
        skipped: dict[str, int] = {}
        for fact in facts:
            applied = apply_fact(state, rule, fact, now, skew)
            clamped += applied.clamped
            if applied.counted:
                counted += 1
            elif applied.skip is not None:
                skipped[applied.skip] = skipped.get(applied.skip, 0) + 1
            self._decide(state, rule, applied.decisions)
        state.offset = record.offset
        self.dirty[scope] = tp.partition
        self.touched[scope] = now
        if clamped:
            metrics.timestamps_clamped.inc(clamped)
        if counted:
            metrics.fleet_facts_applied.labels(rule.name, metrics.scope_label(parsed[2])).inc(counted)
        for reason, n in skipped.items():
            metrics.fleet_facts_skipped.labels(reason).inc(n)

    def _decide(self, state: ScopeState, rule: FleetRule, decisions: list[Decision]) -> None:
        if not decisions:
            return
        for decision in decisions:
            if isinstance(decision, Crossed):
                alert = fleet_alert(state, rule, decision)
                self.outbox.emit(alert, None)
                self.metrics.fleet_alerts.labels(rule.name, decision.limit.metric, decision.limit.action).inc()
                log.warning("%s", alert.reason)
                if decision.opened:
                    self._publish_circuit(state)
            elif isinstance(decision, Closed):
                log.info("circuit of scope %s closed: %s", state.scope, decision.reason)
                self._publish_circuit(state)

    def _publish_circuit(self, state: ScopeState) -> None:
        value = encode(circuit_record(state))
        self.outbox.queued.append(
            OutputRecord(self.config.fleet_circuits_topic, state.scope.encode(), value, None, [], None)
        )

    def _tick(self) -> None:
        now = self.clock()
        touched = self.touched
        for partition, scopes in self.scopes.items():
            if partition in self.restoring:
                continue
            idle: list[tuple[str, FleetRule]] = []
            for scope, state in scopes.items():
                rule = self.rules.get(state.rule)
                if rule is None:
                    continue
                if state.circuit.state == "open" or len(state.sessions) > 0:
                    decisions = tick(state, rule, now)
                    if decisions:
                        self.dirty[scope] = partition
                        self._decide(state, rule, decisions)
                # Processing time, as every TTL here: facts whose event times stop
                # moving (an idle scope) never slide a window by themselves.
                if now - touched.get(scope, now) > self._idle_after(rule) and forgettable(state):
                    idle.append((scope, rule))
            for scope, rule in idle:
                # Nothing of it is left in its window, and no id depends on it: a scope
                # per name a writer invents, or a tenant gone for good, does not stay.
                del scopes[scope]
                del touched[scope]
                self.dirty[scope] = partition  # its tombstone at the next checkpoint
                self.metrics.fleet_scopes_forgotten.inc()
                self._forget_gauges(scope, rule)

    def _forget_gauges(self, scope: str, rule: FleetRule) -> None:
        """A forgotten scope's window series go with it (a series of its own: one shared
        under the `other` label stays, as other scopes still set it)."""
        parsed = parse_scope(scope)
        if parsed is None:
            return
        label = self.metrics.scope_label(parsed[2])
        if label != parsed[2]:
            return
        for limit in rule.limits:
            with contextlib.suppress(KeyError):
                self.metrics.fleet_window.remove(rule.name, label, limit.metric)

    def _idle_after(self, rule: FleetRule) -> float:
        """Processing time without facts after which a scope's window holds none of
        them, whatever their event times (up to the clock plus the skew)."""
        return rule.window_s + rule.bucket_s + self.config.max_clock_skew_s

    async def _send(self) -> None:
        producer = self._producer
        if producer is None or not self.outbox.queued:
            return
        await self.outbox.send(producer, lambda: set(), lambda tps: None)

    # ----------------------------------------------------------- checkpoint

    async def checkpoint(self) -> None:
        """Outputs acknowledged, then the changed scopes' snapshots, then the offsets. Under the lock."""
        cfg = self.config
        producer = self._producer
        consumer = self._consumer
        assert producer is not None and consumer is not None
        self._next_checkpoint = time.monotonic() + cfg.checkpoint_interval_ms / 1000
        await self._send()
        timeout = cfg.send_timeout_ms / 1000
        outputs = self.outbox.take_in_flight()
        if outputs:
            await within(asyncio.gather(*outputs), timeout, "the fleet stage's outputs were not acknowledged")
        self._hook("fleet_outputs_acked")
        dirty, self.dirty = self.dirty, {}
        sent = []
        for scope, partition in dirty.items():
            state = self.scopes.get(partition, {}).get(scope)
            sent.append(
                await producer.send(
                    cfg.fleet_state_topic, key=scope.encode(),
                    value=None if state is None else encode_scope(state),  # forgotten: a tombstone
                    partition=partition,
                )
            )
            if state is not None:
                self._gauge(state)
        if sent:
            await within(asyncio.gather(*sent), timeout, "the fleet state snapshots were not acknowledged")
        self._hook("fleet_state_acked")
        offsets = {
            tp: pos
            for tp, pos in self.positions.items()
            if self.committed.get(tp) != pos and tp.partition in self.scopes and tp.partition not in self.restoring
        }
        if offsets:
            try:
                await consumer.commit(offsets)
                self.committed.update(offsets)
            except (CommitFailedError, IllegalStateError) as exc:
                self.metrics.commit_failures.inc()
                log.warning("fleet offset commit refused (%s); the group is rebalancing", exc)
        self._hook("fleet_committed")

    def _gauge(self, state: ScopeState) -> None:
        rule = self.rules.get(state.rule)
        parsed = parse_scope(state.scope)
        if rule is None or parsed is None:
            return
        totals = window_totals(state, rule)
        label = self.metrics.scope_label(parsed[2])
        for limit in rule.limits:
            self.metrics.fleet_window.labels(rule.name, label, limit.metric).set(totals.value(limit.metric))

    # ----------------------------------------------------------- rebalances

    async def on_revoked(self) -> None:
        async with self.lock:
            self.generation += 1
            if self._producer is not None and self._consumer is not None and self.scopes:
                try:
                    await revocation_checkpoint(
                        self.checkpoint(), self.config.rebalance_timeout_ms,
                        "the fleet stage's checkpoint on revocation",
                    )
                except BaseException as exc:
                    self.on_failure(exc)
                    raise
            # Eager rebalances revoke everything; the states are small: reload on assignment.
            # The window values go with them: the scopes' next owner exports them now, and
            # a value left here would stand beside its own (the dashboard takes the max).
            self.metrics.fleet_window.clear()
            self.scopes = {}
            self.positions = {}
            self.committed = {}
            self.dirty = {}
            self.touched = {}

    async def on_assigned(self, assigned: set[TopicPartition]) -> None:
        async with self.lock:
            self.generation += 1
            partitions = sorted(tp.partition for tp in assigned if tp.topic == self.config.fleet_facts_topic)
            restorer = self._restorer
            if restorer is None:
                return
            self.restoring = set(partitions)
            try:
                loaded = await read_partitions(restorer, self.config.fleet_state_topic, partitions)
            except BaseException as exc:
                self.on_failure(exc)
                raise
            installed = misplaced = 0
            consumer = self._consumer
            listed = consumer.partitions_for_topic(self.config.fleet_facts_topic) if consumer is not None else None
            count = len(listed) if listed else 0
            for partition in partitions:
                scopes: dict[str, ScopeState] = {}
                for scope, value in loaded[partition].entries.items():
                    try:
                        state = decode_scope(value)
                    except (msgspec.DecodeError, ValueError) as exc:
                        log.error("fleet scope %r: snapshot not restorable (%s); it starts afresh", scope, exc)
                        continue
                    if state.scope != scope:
                        continue
                    scopes[scope] = state
                    if count and home_partition(scope, count) != partition:
                        misplaced += 1  # its facts arrive elsewhere now
                    self.touched[scope] = self.clock()  # idle from here, as far as we know
                    self._gauge(state)
                    installed += 1
                self.scopes[partition] = scopes
            if misplaced:
                log.warning(
                    "fleet stage: %d restored scope state(s) belong on other partitions of %d (the "
                    "partition count changed?); their facts arrive elsewhere, where their windows "
                    "start empty. Stop the processors and run `streamguard rehome --fleet` (docs/fleet.md)",
                    misplaced, count,
                )
            self.restoring = set()
            self.assigned_once = True
            log.info("fleet stage: assigned fact partitions %s, %d scopes restored", partitions, installed)

    # ------------------------------------------------------------- queries

    def scope(self, scope: str) -> ScopeState | None:
        for scopes in self.scopes.values():
            state = scopes.get(scope)
            if state is not None:
                return state
        return None
