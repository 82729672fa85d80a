"""Scoring the demo: what fired against what was planted. Pure: no broker, no clock.

The run hands over, per session, the facts scoring needs (:class:`SessionFacts`)
and every output the controller read (:class:`OutputTally`); everything the
summary and the live view say about catches, misses and false alarms is
computed here, so the rules can be tested on hand-written fixtures.

The rules:

* a session counts only once something of it was published (``started``);
* a failure session is **caught** once every signal planted in its shape
  (:data:`~streamguard.demo.shapes.ALL_PLANTED`) has fired, alert or trip,
  whether or not it finished;
* it is **missed** when it is finished (nothing more to publish, and the
  processor applied its last event) without them, but only if the run
  *drained* (every output read back): otherwise its outputs may still be on
  the way, and it is **open**, as is every session not finished yet;
* a healthy session with any alert or trip is a **false alarm**;
* signals on failure sessions beyond the planted ones are *other findings*,
  not false alarms;
* a shape's verdict: ``missed`` if any of its sessions was missed, else
  ``caught`` if any was caught, else ``pending`` if any is open, else
  ``absent``.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..events import Alert, GuardrailTrip, Output
from .shapes import ALL_FAILURES, ALL_HEALTHY, ALL_PLANTED, Shape

Verdict = Literal["caught", "missed", "pending", "absent"]

MAX_LISTED = 20  # sessions named per list in the summary (missed, false alarms)


@dataclass(frozen=True, slots=True)
class SessionFacts:
    """What scoring needs to know about one session of the fleet."""

    session: str
    kind: Shape
    fired: frozenset[str]
    started: bool  # at least one of its events was published
    done: bool = False  # nothing more of it will be published
    finished: bool = False  # done, and the processor applied its last published event


@dataclass(slots=True)
class Score:
    """The verdict of a run: per planted shape, over the healthy sessions, and overall."""

    planted: dict[str, dict[str, Any]]
    healthy: dict[str, Any]
    missed: list[str]
    unconfirmed: list[str]
    other_findings: dict[str, int]
    started: int
    finished: int
    unfinished: int

    @property
    def passed(self) -> bool:
        """Every shape caught and none missed, and no false alarm (the run's own errors aside)."""
        return not self.missed and not self.unconfirmed and not self.healthy["false_alarms"]


def _empty_row(kind: Shape) -> dict[str, Any]:
    return {
        "signals": sorted(ALL_PLANTED[kind]),
        "sessions": 0,
        "finished": 0,
        "caught": 0,
        "missed": 0,
        "open": 0,
        "missed_sessions": [],
    }


def verdict(row: dict[str, Any]) -> Verdict:
    """The verdict of one shape's row (see the module docstring)."""
    if row["missed"]:
        return "missed"
    if row["caught"]:
        return "caught"
    if row["open"]:
        return "pending"  # its sessions had not got to the failure yet
    return "absent"


def score(sessions: Iterable[SessionFacts], *, drained: bool) -> Score:
    """Judge every started session against its shape (see the module docstring)."""
    shapes: dict[str, dict[str, Any]] = {str(kind): _empty_row(kind) for kind in ALL_FAILURES}
    healthy = {"sessions": 0, "finished": 0}
    false_alarms: Counter[str] = Counter()
    false_sessions: list[str] = []
    extra: Counter[str] = Counter()
    unfinished = finished_total = 0
    for session in sessions:
        if not session.started:
            continue  # nothing of it was published
        finished = session.finished
        finished_total += finished
        unfinished += not finished
        if session.kind in ALL_HEALTHY:
            healthy["sessions"] += 1
            healthy["finished"] += finished
            if session.fired:
                false_sessions.append(session.session)
                false_alarms.update(session.fired)
            continue
        row = shapes[str(session.kind)]
        expected = ALL_PLANTED[session.kind]
        row["sessions"] += 1
        row["finished"] += finished
        extra.update(session.fired - expected)
        if expected <= session.fired:
            row["caught"] += 1
        elif finished and drained:
            # Without the drain its outputs may still be on the way: not judged.
            row["missed"] += 1
            if len(row["missed_sessions"]) < MAX_LISTED:
                row["missed_sessions"].append(session.session)
        else:
            row["open"] += 1
    for row in shapes.values():
        row["verdict"] = verdict(row)
    missed = sorted(name for name, row in shapes.items() if row["verdict"] == "missed")
    unseen = sorted(name for name, row in shapes.items() if row["verdict"] in ("pending", "absent"))
    return Score(
        planted=shapes,
        healthy={
            "sessions": healthy["sessions"],
            "finished": healthy["finished"],
            "false_alarms": len(false_sessions),
            "false_alarm_signals": dict(sorted(false_alarms.items())),
            "false_alarm_sessions": sorted(false_sessions)[:MAX_LISTED],
        },
        missed=missed,
        unconfirmed=unseen,
        other_findings=dict(sorted(extra.items())),
        started=healthy["sessions"] + sum(r["sessions"] for r in shapes.values()),
        finished=finished_total,
        unfinished=unfinished,
    )


@dataclass(frozen=True, slots=True)
class LiveTally:
    """The counts the live view shows while the run goes on."""

    started: int
    running: int
    healthy: int
    false_alarms: int
    caught: Counter[Shape]  # failure sessions of a shape that raised all of its planted signals
    started_by_shape: Counter[Shape]  # failure sessions of a shape started so far


def live_tally(sessions: Iterable[SessionFacts]) -> LiveTally:
    """Counts for the live view: the summary's catches, without judging misses yet."""
    started = running = healthy = false_alarms = 0
    caught: Counter[Shape] = Counter()
    by_shape: Counter[Shape] = Counter()
    for s in sessions:
        is_healthy = s.kind in ALL_HEALTHY
        # A session's outputs follow its published events, so only started ones have fired.
        false_alarms += is_healthy and bool(s.fired)
        if not s.started:
            continue
        started += 1
        running += not s.done
        if is_healthy:
            healthy += 1
            continue
        by_shape[s.kind] += 1
        caught[s.kind] += ALL_PLANTED[s.kind] <= s.fired
    return LiveTally(started, running, healthy, false_alarms, caught, by_shape)


@dataclass(slots=True)
class OutputTally:
    """Every alert and trip the controller read: per signal, per agent, and the halts."""

    signal_alerts: Counter[str] = field(default_factory=Counter)
    signal_trips: Counter[str] = field(default_factory=Counter)
    agent_alerts: Counter[str] = field(default_factory=Counter)
    agent_trips: Counter[str] = field(default_factory=Counter)
    # (session, agent, signal, reason) of the latest session halts, newest last
    latest_halts: deque[tuple[str, str, str, str]] = field(default_factory=lambda: deque(maxlen=3))
    halted: int = 0
    turns_cut: int = 0

    def count(self, output: Output) -> None:
        """Count one output (outputs other than alerts and trips are not counted)."""
        agent = output.agent or "-"
        if isinstance(output, Alert):
            self.signal_alerts[output.signal] += 1
            self.agent_alerts[agent] += 1
        elif isinstance(output, GuardrailTrip):
            self.signal_trips[output.signal] += 1
            self.agent_trips[agent] += 1
            if output.session_halted:
                self.halted += 1
                self.latest_halts.append((output.session, agent, output.signal, output.reason))
            elif output.halted_turn:
                self.turns_cut += 1

    def signals(self) -> dict[str, dict[str, int]]:
        """Alerts and trips per signal, by name."""
        return {
            name: {"alerts": self.signal_alerts[name], "trips": self.signal_trips[name]}
            for name in sorted(set(self.signal_alerts) | set(self.signal_trips))
        }

    def agents(self) -> dict[str, dict[str, int]]:
        """Alerts and trips per agent, by name."""
        return {
            name: {"alerts": self.agent_alerts[name], "trips": self.agent_trips[name]}
            for name in sorted(set(self.agent_alerts) | set(self.agent_trips))
        }
