"""Offline replay: contract-v1 JSONL in, output events as JSONL out.

A replay file is operator-supplied, so ``reset`` control events may appear
inline. Many sessions may be interleaved. A malformed line is reported with its
line number and skipped; so is a line whose processing fails (counted as
``failed``): the run goes on, and later outputs are never lost. Output is
deterministic: the same file and policy always give the same bytes.

Memory is bounded as in ``streamguard run``: sessions idle past their TTL are
evicted (on the trace's own time, the events' ``ts``, since a trace is replayed
far faster than it was recorded), halted ones after the longer TTL, and at
most :attr:`ReplayLimits.max_sessions` are held at once (least recently active
first out). An evicted session that comes back starts afresh, as it would in
the processor.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

import msgspec

from .engine import Engine
from .events import (
    Alert,
    Feedback,
    GuardrailTrip,
    Output,
    Reset,
    ScopeReset,
    UnknownEventType,
    decode_operator_event,
    encode,
)


class TextSink(Protocol):
    """Where replay reports bad lines: a text stream, or anything with ``write``."""

    def write(self, text: str, /) -> Any: ...


# Halted session names kept for the summary once their state is evicted.
MAX_HALTED_LISTED = 1000
_SWEEP_EVERY = 1024  # events between two TTL sweeps


class ReplayLimits(msgspec.Struct, kw_only=True, frozen=True):
    """Bounds on what a replay holds (the processor's defaults)."""

    session_idle_ttl_s: float = 6 * 3600.0
    halted_session_ttl_s: float = 7 * 24 * 3600.0
    max_sessions: int = 100_000


class ReplayReport(msgspec.Struct, kw_only=True):
    lines: int = 0
    events: int = 0
    controls: int = 0
    outputs: int = 0
    malformed: int = 0
    unknown_types: int = 0
    replays_skipped: int = 0
    seq_jumps: int = 0
    failed: int = 0
    evicted: int = 0
    # halted sessions whose state was evicted (bounded; halted_evicted counts all)
    halted_evicted: int = 0
    halted_listed: list[str] = []
    # outputs by signal: alerts (per severity) and guardrail trips (per scope)
    alerts_by_signal: dict[str, int] = {}
    trips_by_signal: dict[str, int] = {}
    feedback: int = 0
    resets: int = 0

    def count(self, output: Output) -> None:
        if isinstance(output, Alert):
            self.alerts_by_signal[output.signal] = self.alerts_by_signal.get(output.signal, 0) + 1
        elif isinstance(output, GuardrailTrip):
            key = f"{output.guardrail}/{output.signal}"
            self.trips_by_signal[key] = self.trips_by_signal.get(key, 0) + 1
        elif isinstance(output, Feedback):
            self.feedback += 1
        else:
            self.resets += 1


class _Recency:
    """Sessions by last activity on the trace's clock, oldest first; halted ones past
    the idle TTL wait in ``parked`` for the longer one (as in the processor)."""

    def __init__(self, engine: Engine, limits: ReplayLimits, report: ReplayReport) -> None:
        self.engine = engine
        self.limits = limits
        self.report = report
        self.active: OrderedDict[str, float] = OrderedDict()
        self.parked: OrderedDict[str, float] = OrderedDict()
        self.now = 0.0
        self.since_sweep = 0

    def touch(self, session: str, ts: float | None) -> None:
        if ts is not None and ts > self.now:
            self.now = ts
        self.parked.pop(session, None)
        self.active[session] = self.now
        self.active.move_to_end(session)
        if len(self.active) + len(self.parked) > self.limits.max_sessions:
            self.evict(next(iter(self.parked or self.active)))
        self.since_sweep += 1
        if self.since_sweep >= _SWEEP_EVERY:
            self.since_sweep = 0
            self.sweep()

    def sweep(self) -> None:
        now, active, parked = self.now, self.active, self.parked
        while active:
            session, seen = next(iter(active.items()))
            if now - seen < self.limits.session_idle_ttl_s:
                break
            if self.engine.is_halted(session):
                del active[session]
                parked[session] = seen
            else:
                self.evict(session)
        while parked:
            session, seen = next(iter(parked.items()))
            if now - seen < self.limits.halted_session_ttl_s:
                break
            self.evict(session)

    def evict(self, session: str) -> None:
        report = self.report
        if self.engine.is_halted(session):
            report.halted_evicted += 1
            if len(report.halted_listed) < MAX_HALTED_LISTED:
                report.halted_listed.append(session)
        self.engine.evict(session)
        self.active.pop(session, None)
        self.parked.pop(session, None)
        report.evicted += 1


def replay_lines(
    lines: Iterable[bytes | str],
    engine: Engine,
    errors: TextSink | None = None,
    report: ReplayReport | None = None,
    limits: ReplayLimits | None = None,
) -> Iterator[bytes]:
    """Yield one encoded output event per item; report bad lines to ``errors``."""
    for output in replay_sources([("", lines)], engine, errors, report, limits):
        yield encode(output)


def replay_sources(
    sources: Iterable[tuple[str, Iterable[bytes | str]]],
    engine: Engine,
    errors: TextSink | None = None,
    report: ReplayReport | None = None,
    limits: ReplayLimits | None = None,
) -> Iterator[Output]:
    """Yield the output events of several ``(name, lines)`` sources, replayed in turn.

    The sources share one engine and one set of bounds, so a session that goes
    on from one file to the next (a trace, then an operator's resets) is one
    session. Bad lines are reported as ``name: line N: ...`` (``line N: ...``
    for a source without a name), numbered within their source.
    """
    report = report if report is not None else ReplayReport()
    recency = _Recency(engine, limits or ReplayLimits(), report)
    stats = engine.stats
    for name, lines in sources:
        where = f"{name}: " if name else ""
        for number, line in enumerate(lines, start=1):
            report.lines += 1
            if not line.strip():
                continue
            try:
                event = decode_operator_event(line)
            except UnknownEventType as exc:
                report.unknown_types += 1
                if errors is not None:
                    errors.write(f"{where}line {number}: skipped: {exc}\n")
                continue
            except (msgspec.DecodeError, ValueError) as exc:
                report.malformed += 1
                if errors is not None:
                    errors.write(f"{where}line {number}: malformed event skipped: {exc}\n")
                continue
            replays, jumps = stats.replays_skipped, stats.seq_jumps
            try:
                if isinstance(event, ScopeReset):
                    # Fleet circuits live in the fleet stage of `run`, not in a replay.
                    report.unknown_types += 1
                    if errors is not None:
                        errors.write(f"{where}line {number}: skipped: scope_reset applies to fleet circuits, which replay does not keep\n")
                    continue
                if isinstance(event, Reset):
                    report.controls += 1
                    outputs = engine.control(event)
                else:
                    report.events += 1
                    outputs = engine.process(event)
            except Exception as exc:  # one bad line never ends the replay
                report.failed += 1
                if errors is not None:
                    errors.write(f"{where}line {number}: processing failed, skipped: {exc!r}\n")
                continue
            report.replays_skipped += stats.replays_skipped - replays
            report.seq_jumps += stats.seq_jumps - jumps
            if event.session in engine.sessions:
                recency.touch(event.session, event.ts)
            for output in outputs:
                report.outputs += 1
                report.count(output)
                yield output


def halted_sessions(
    engine: Engine, report: ReplayReport, limit: int | None = None
) -> list[str]:
    """Sessions halted at the end of a replay, evicted ones included, sorted; at most
    ``limit`` of them (:func:`halted_total` counts them all)."""
    held = {s for s, state in engine.sessions.items() if state.halted_by}
    names = sorted(held.union(report.halted_listed))
    return names if limit is None else names[:limit]


def halted_total(engine: Engine, report: ReplayReport) -> int:
    """How many sessions were halted at the end of a replay (evicted ones included)."""
    held = sum(1 for state in engine.sessions.values() if state.halted_by)
    return held + report.halted_evicted
