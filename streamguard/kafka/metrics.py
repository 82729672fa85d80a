"""Prometheus metrics of one processor.

Each processor owns a :class:`~prometheus_client.CollectorRegistry`, so several
processors in one Python process (tests, embedding) never share or collide on
series. Names follow the Prometheus conventions: a ``streamguard_`` prefix,
``_total`` on counters, base units (``_seconds``, ``_bytes``).

The ``agent`` label comes from event data and is therefore bounded by
:class:`AgentLabels`: an allow-list when configured, otherwise the first N
distinct agents seen; everything else is reported as ``other`` (and a missing
agent as ``none``).
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterable, Iterator

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

# `_created` series (a sample per counter and histogram child holding its creation
# time) double the series count and serve no query here: switched off for the
# process, before any series exists.
disable_created_metrics()

OTHER = "other"
NONE = "none"

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
SIZE_BUCKETS = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 65536)


class AgentLabels:
    """Maps agent names onto a bounded label set."""

    __slots__ = ("_allowed", "_limit", "_seen")

    def __init__(self, allowed: Iterable[str] = (), limit: int = 50) -> None:
        self._allowed = frozenset(allowed)
        self._limit = limit
        self._seen: dict[str, str] = {}

    def __call__(self, agent: str | None) -> str:
        if agent is None:
            return NONE
        label = self._seen.get(agent)
        if label is not None:
            return label
        if self._allowed:
            label = agent if agent in self._allowed else OTHER
        elif len(self._seen) < self._limit and agent not in (OTHER, NONE):
            label = agent
        else:
            label = OTHER
        # Remember "other" verdicts too, but bound the cache: unbounded agent
        # names must not grow memory either.
        if len(self._seen) < self._limit * 4 + 1024 or label != OTHER:
            self._seen[agent] = label
        return label


class BuildInfo(Collector):
    """``streamguard_build_info{version, python, implementation} 1``: which build runs where."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from .. import __version__

        family = GaugeMetricFamily(
            "streamguard_build_info",
            "Always 1; the labels say which streamguard and Python this instance runs.",
            labels=["version", "python", "implementation"],
        )
        family.add_metric([__version__, platform.python_version(), platform.python_implementation()], 1.0)
        yield family


def add_runtime_collectors(registry: CollectorRegistry) -> None:
    """Process (RSS, CPU, open fds, start time), Python (version) and GC collectors,
    plus :class:`BuildInfo`: the standard ``process_*`` and ``python_*`` series."""
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    registry.register(BuildInfo())


class Metrics:
    """The processor's series. Gauges computed at scrape time read the given callables.

    The registry also carries the runtime collectors (:func:`add_runtime_collectors`);
    they are not attributes, since they are not the processor's own series.
    """

    def __init__(
        self,
        *,
        agents: AgentLabels | None = None,
        active_sessions: Callable[[], float] | None = None,
        halted_sessions: Callable[[], float] | None = None,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.agent_label = agents or AgentLabels()
        # Fleet scope values (agent names, tenants) come from event data too: the
        # same bound, a label set of its own.
        self.scope_label = AgentLabels((), getattr(agents, "_limit", 50))
        r = self.registry
        add_runtime_collectors(r)
        self.events = Counter(
            "streamguard_events_consumed_total",
            "Agent events consumed and decoded, by event type and agent.",
            ["type", "agent"],
            registry=r,
        )
        self.controls = Counter(
            "streamguard_control_events_total",
            "Operator control events consumed from the control topic, by type.",
            ["type"],
            registry=r,
        )
        self.skipped = Counter(
            "streamguard_events_skipped_total",
            "Records consumed but deliberately not applied, by reason.",
            ["reason"],
            registry=r,
        )
        self.seq_jumps = Counter(
            "streamguard_seq_jumps_total",
            "Events applied whose seq jumped too far ahead to move the session's replay mark.",
            registry=r,
        )
        self.timestamps_clamped = Counter(
            "streamguard_timestamps_clamped_total",
            "Records whose producer timestamp was ahead of the processor's clock by more than the allowed skew.",
            registry=r,
        )
        self.snapshot_failures = Counter(
            "streamguard_snapshot_failures_total",
            "Sessions whose state could not be snapshotted; each was dropped (a tombstone written).",
            registry=r,
        )
        self.outputs_truncated = Counter(
            "streamguard_outputs_truncated_total",
            "Outputs and dead letters too large to produce, cut down to a stub, by topic kind.",
            ["kind"],
            registry=r,
        )
        self.alerts = Counter(
            "streamguard_alerts_total",
            "Alerts published, by signal, severity and agent.",
            ["signal", "severity", "agent"],
            registry=r,
        )
        self.trips = Counter(
            "streamguard_guardrail_trips_total",
            "Guardrail trips published, by guardrail, signal and scope.",
            ["guardrail", "signal", "scope", "agent"],
            registry=r,
        )
        self.outputs = Counter(
            "streamguard_outputs_total",
            "Output events published, by type.",
            ["type"],
            registry=r,
        )
        self.dead_letters = Counter(
            "streamguard_dead_letters_total",
            "Records sent to the dead-letter topic, by reason.",
            ["reason"],
            registry=r,
        )
        self.security_events = Counter(
            "streamguard_security_events_total",
            "Suspicious input, such as a control event on the agents' topic.",
            ["kind"],
            registry=r,
        )
        self.misrouted = Counter(
            "streamguard_misrouted_records_total",
            "Records on another partition than the murmur2 hash of their key selects.",
            ["topic"],
            registry=r,
        )
        self.rerouted = Counter(
            "streamguard_control_rerouted_total",
            "Control records re-produced to the control partition that owns their session.",
            registry=r,
        )
        self.latency = Histogram(
            "streamguard_event_to_output_latency_seconds",
            "From the input record's timestamp to the acknowledgement of its output.",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.lag = Gauge(
            "streamguard_consumer_lag",
            "Records behind the partition's high watermark (last fetch), per owned partition.",
            ["topic", "partition"],
            registry=r,
        )
        self.restore_duration = Histogram(
            "streamguard_restore_duration_seconds",
            "Time to rebuild assigned partitions' sessions from the changelog.",
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.restored_sessions = Counter(
            "streamguard_restored_sessions_total",
            "Sessions rebuilt from the changelog.",
            registry=r,
        )
        self.misplaced_sessions = Counter(
            "streamguard_misplaced_sessions_total",
            "Sessions restored from a changelog partition that is not their home partition (the partition "
            "count changed and `streamguard rehome` was not run): their events arrive on another partition.",
            registry=r,
        )
        self.rebalances = Counter(
            "streamguard_rebalances_total",
            "Partition assignments received from the consumer group.",
            registry=r,
        )
        self.snapshot_bytes = Histogram(
            "streamguard_snapshot_bytes",
            "Size of session snapshots written to the changelog.",
            buckets=SIZE_BUCKETS,
            registry=r,
        )
        self.changelog_records = Counter(
            "streamguard_changelog_records_total",
            "Changelog records written, by kind (snapshot or tombstone).",
            ["kind"],
            registry=r,
        )
        self.evictions = Counter(
            "streamguard_sessions_evicted_total",
            "Sessions evicted, by kind (idle or halted: after their TTL; capacity: past --max-sessions-per-partition; halted_capacity: a halted session past it, when nothing else was left to evict).",
            ["kind"],
            registry=r,
        )
        self.checkpoints = Counter(
            "streamguard_checkpoints_total",
            "Checkpoints completed (outputs and snapshots acknowledged, offsets committed).",
            registry=r,
        )
        self.last_checkpoint = Gauge(
            "streamguard_last_checkpoint_timestamp_seconds",
            "Unix time of the last completed checkpoint (alert on its age).",
            registry=r,
        )
        self.checkpoint_duration = Histogram(
            "streamguard_checkpoint_duration_seconds",
            "Duration of a checkpoint, from its start to its offset commit.",
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.checkpoint_pause = Histogram(
            "streamguard_checkpoint_pause_seconds",
            "Time a checkpoint holds up processing when it starts; the rest overlaps it.",
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.commit_failures = Counter(
            "streamguard_commit_failures_total",
            "Offset commits refused by the group coordinator (membership changed).",
            registry=r,
        )
        self.backpressure = Counter(
            "streamguard_backpressure_pauses_total",
            "Times fetching paused because too many produced records awaited acknowledgement.",
            registry=r,
        )
        self.processing_errors = Counter(
            "streamguard_processing_errors_total",
            "Events whose processing raised (dead-lettered with reason processing_error).",
            registry=r,
        )
        self.active_sessions = Gauge(
            "streamguard_active_sessions",
            "Sessions held in memory.",
            registry=r,
        )
        self.halted_sessions = Gauge(
            "streamguard_sessions_halted",
            "Sessions currently halted by a guardrail.",
            registry=r,
        )
        if active_sessions is not None:
            self.active_sessions.set_function(active_sessions)
        if halted_sessions is not None:
            self.halted_sessions.set_function(halted_sessions)
        self.ready = Gauge(
            "streamguard_ready",
            "1 when every assigned partition is restored and processing.",
            registry=r,
        )
        self.owned_partitions = Gauge(
            "streamguard_owned_partitions",
            "Events-topic partitions currently assigned to this instance.",
            registry=r,
        )
        # ------------------------------------------------ fleet guardrails (docs/fleet.md)
        self.fleet_facts = Counter(
            "streamguard_fleet_facts_published_total",
            "Fleet facts published by the session stage, by rule and scope value (bounded).",
            ["rule", "scope"],
            registry=r,
        )
        self.fleet_facts_applied = Counter(
            "streamguard_fleet_facts_applied_total",
            "Fleet facts folded into a scope's windows by the fleet stage, by rule and scope value (bounded).",
            ["rule", "scope"],
            registry=r,
        )
        self.fleet_facts_skipped = Counter(
            "streamguard_fleet_facts_skipped_total",
            "Fleet facts the fleet stage consumed and did not count, by reason.",
            ["reason"],
            registry=r,
        )
        self.fleet_scopes_forgotten = Counter(
            "streamguard_fleet_scopes_forgotten_total",
            "Fleet scopes the fleet stage forgot: idle past their window, never crossed a limit.",
            registry=r,
        )
        self.fleet_window = Gauge(
            "streamguard_fleet_window_value",
            "A fleet scope's rolling-window value per limited metric, as the fleet stage owning the scope has it.",
            ["rule", "scope", "metric"],
            registry=r,
        )
        self.fleet_alerts = Counter(
            "streamguard_fleet_alerts_total",
            "Fleet limits crossed (fleet_alert outputs), by rule, metric and action.",
            ["rule", "metric", "action"],
            registry=r,
        )
        self.fleet_circuit_open = Gauge(
            "streamguard_fleet_circuit_open",
            "1 while a fleet scope's circuit is open, as this instance's copy of the circuits table has it (scopes past the label bound share scope=\"other\": the number of them open).",
            ["rule", "scope"],
            registry=r,
        )
        self.fleet_trips = Counter(
            "streamguard_fleet_trips_total",
            "Sessions halted by an open fleet circuit on this instance, by rule and scope value (bounded).",
            ["rule", "scope"],
            registry=r,
        )
        self.fleet_apply_delay = Histogram(
            "streamguard_fleet_circuit_apply_seconds",
            "From the fleet stage opening or closing a circuit to this instance applying it to its sessions.",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
