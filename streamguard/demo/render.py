"""Rendering the demo: the live table, the status line, the summary report.

Text is built by pure functions of what they are handed (a :class:`Frame`, a
summary dict), so a view can be checked without running anything;
:class:`LiveView` is the one part that writes to a terminal: it redraws the
table in place, cut to the terminal's size, or prints status lines when the
output is not a terminal.
"""

from __future__ import annotations

import shutil
from collections import Counter
from dataclasses import dataclass
from typing import Any, TextIO

from .score import LiveTally, OutputTally
from .shapes import ALL_FAILURES, ALL_PLANTED, Shape

# The live table's "planted in" column: the longest shape name and a space.
SHAPE_WIDTH = max([18, *(len(str(kind)) + 1 for kind in ALL_FAILURES)])

SIDE_NOTES = {
    "halt-ignored": "kept working after its halt",
    "unverified-write": "verification side finding",
    "write-without-target": "verification side finding",
}


@dataclass(frozen=True, slots=True)
class Frame:
    """One moment of a run, as the live view shows it."""

    elapsed: float  # seconds of publishing so far
    duration: float  # seconds of publishing planned
    rate: float  # events accepted per second, lately
    published: int
    processed: int
    sessions: LiveTally
    outputs: OutputTally
    final: bool = False  # the run is over (the last frame)
    interrupted: str | None = None  # what stopped the run early, if anything


def status_line(frame: Frame) -> str:
    """The one-line status printed every few seconds when the output is not a terminal."""
    outputs = frame.outputs
    return (
        f"[{frame.elapsed:6.1f} s] events {frame.published:,} published ({frame.rate:,.0f}/s), "
        f"{frame.processed:,} processed; alerts {sum(outputs.signal_alerts.values()):,}, "
        f"trips {sum(outputs.signal_trips.values()):,}, halted {outputs.halted:,}, "
        f"false alarms {frame.sessions.false_alarms}"
    )


def table(frame: Frame) -> list[str]:
    """The live table: counts, alerts and trips per signal against the planted shapes,
    the busiest agents, the latest halts."""
    tally, outputs, final = frame.sessions, frame.outputs, frame.final
    published, processed = frame.published, frame.processed
    signal_alerts, signal_trips = outputs.signal_alerts, outputs.signal_trips
    if not final:
        state = f"{frame.elapsed:5.1f} s of {frame.duration:g} s"
    else:
        state = f"stopped by {frame.interrupted}" if frame.interrupted else "done"
    lines = [
        f"{state}   events {published:,} published ({frame.rate:,.0f}/s), {processed:,} processed, "
        f"lag {max(published - processed, 0):,}",
        f"sessions {tally.started:,} started, {tally.running:,} {'unfinished' if final else 'running'}, "
        f"{outputs.halted:,} halted, {outputs.turns_cut:,} turns cut",
        "",
        f"{'signal':<24}{'alerts':>7}{'trips':>7}  {'planted in':<{SHAPE_WIDTH}}{'caught':>9}",
    ]
    planted_in: dict[str, Shape] = {}
    for kind in ALL_FAILURES:
        for name in sorted(ALL_PLANTED[kind], key=lambda n: (n != "context-pressure", n)):
            planted_in.setdefault(name, kind)
    caught, started = tally.caught, tally.started_by_shape
    shown: set[Shape] = set()
    names = list(planted_in) + sorted((set(signal_alerts) | set(signal_trips)) - set(planted_in))
    for name in names:
        planted = planted_in.get(name)
        if planted is None:
            where, score = f"({SIDE_NOTES.get(name, 'not planted')})", ""
        elif planted in shown:
            where, score = f"{planted}", ""
        else:
            shown.add(planted)
            where, score = str(planted), f"{caught[planted]}/{started[planted]}"
        trips = signal_trips[name]
        lines.append(
            f"{name:<24}{signal_alerts[name]:>7}{trips or '-':>7}  {where:<{SHAPE_WIDTH}}{score:>9}"
            if planted is not None
            else f"{name:<24}{signal_alerts[name]:>7}{trips or '-':>7}  {where}"
        )
    lines.append("")
    lines.extend(_agent_cells(outputs.agent_alerts, outputs.agent_trips))
    lines.append("")
    lines.append(f"latest halts ({outputs.halted:,} sessions halted):")
    for session, agent, signal_id, reason in reversed(outputs.latest_halts):
        text = " ".join(reason.split())
        lines.append(f"  {session} {agent[:10]:<10} {signal_id:<22} {text}")
    lines.append(
        f"false alarms: {tally.false_alarms} (healthy sessions with an alert, of {tally.healthy:,} healthy)"
    )
    return lines


def _agent_cells(alerts: Counter[str], trips: Counter[str]) -> list[str]:
    """The twelve busiest agents, three to a line."""
    agents = sorted(set(alerts) | set(trips), key=lambda a: (-(alerts[a] + trips[a]), a))
    cells = [f"{a[:12]:<12}{alerts[a]:>6}{trips[a]:>6}" for a in agents[:12]]
    header = f"{'agent':<12}{'alerts':>6}{'trips':>6}"
    lines = ["  ".join([header] * min(3, max(len(cells), 1)))]
    for row in range(0, len(cells), 3):
        lines.append("  ".join(cells[row : row + 3]))
    if len(agents) > 12:
        lines.append(f"(+{len(agents) - 12} more agents)")
    return lines


def fit_to_height(lines: list[str], height: int) -> list[str]:
    """``lines`` cut to a terminal of ``height`` rows (one left for the cursor).

    A view that redraws in place and is taller than the terminal scrolls, and its
    redraw then climbs into the scrollback. The head (counts and the signal table)
    and the last line (false alarms) are what a reader watches; what does not fit
    between them is replaced by a line saying how much was left out.
    """
    room = max(height - 1, 3)
    if len(lines) <= room:
        return lines
    head = lines[: room - 2]
    return [*head, f"… {len(lines) - len(head) - 1} more lines (a taller terminal shows them)", lines[-1]]


class LiveView:
    """Writes frames to ``out``: in place on a terminal (``tty``), as status lines otherwise."""

    def __init__(self, out: TextIO, *, tty: bool) -> None:
        self.out = out
        self.tty = tty
        self._drawn_lines = 0

    def hide_cursor(self) -> None:
        if self.tty:
            self.out.write("\x1b[?25l")

    def show_cursor(self) -> None:
        if self.tty:
            self.out.write("\x1b[?25h")
            self.out.flush()

    def draw(self, frame: Frame) -> None:
        """Redraw the table (terminal) or print a status line (not for the final frame)."""
        out = self.out
        if self.tty:
            size = shutil.get_terminal_size()
            width = max(size.columns - 1, 40)
            lines = [
                line if len(line) <= width else line[: width - 1] + "…"
                for line in (raw.rstrip() for raw in table(frame))
            ]
            if not frame.final:  # the live view redraws in place: it must not scroll
                lines = fit_to_height(lines, size.lines)
            clear = f"\x1b[{self._drawn_lines}A\r\x1b[J" if self._drawn_lines else ""
            out.write(clear + "\n".join(lines) + "\n")
            self._drawn_lines = len(lines)
        elif not frame.final:
            out.write(status_line(frame) + "\n")
        out.flush()


def header(
    bootstrap_servers: str | None,
    metrics_url: str | None,
    *,
    agents: int,
    rate: float,
    duration: float,
    seed: int,
) -> str:
    """The two lines printed once publishing starts."""
    return (
        f"streamguard demo: broker {bootstrap_servers}, metrics {metrics_url}\n"
        f"  {agents} concurrent sessions, {rate:g} events/s for {duration:g} s, "
        f"seed {seed}; Ctrl-C stops early\n"
    )


def format_summary(summary: dict[str, Any]) -> str:
    """The human-readable end-of-run report."""
    events = summary["events"]
    sessions = summary["sessions"]
    lines = []
    if summary["error"]:
        lines.append(f"streamguard demo: {summary['error']}")
    head = (
        f"{summary['elapsed_s']:.1f} s, {events['published']:,} events published, "
        f"{events['processed']:,} processed, {sessions['finished']:,} sessions finished "
        f"(seed {summary['seed']})"
    )
    if summary["interrupted"]:
        head = f"interrupted by {summary['interrupted']} after " + head
    lines.append(head)
    if not summary["drained"]:
        lines.append("  (not drained: outputs still in flight are not counted)")
    lines.append("")
    # the shape names set the first column (the longest are 22 characters)
    w = max([18, *(len(name) + 2 for name in summary["planted"])])
    lines.append(
        f"{'planted shape':<{w}}{'must raise':<33}{'sessions':>8}{'caught':>7}{'missed':>7}{'open':>6}"
    )
    for name, row in summary["planted"].items():
        lines.append(
            f"{name:<{w}}{', '.join(row['signals']):<33}{row['sessions']:>8}{row['caught']:>7}"
            f"{row['missed']:>7}{row['open']:>6}"
            + ("" if row["verdict"] == "caught" else f"  {row['verdict'].upper()}")
        )
    healthy = summary["healthy"]
    lines.append(
        f"{'healthy':<{w}}{'(nothing)':<33}{healthy['sessions']:>8}"
        f"   false alarms: {healthy['false_alarms']}"
    )
    lines.append("(open: not finished when the run ended, nothing raised yet)")
    if healthy["false_alarm_signals"]:
        listed = ", ".join(f"{k} x{v}" for k, v in healthy["false_alarm_signals"].items())
        lines.append(f"  false alarms raised: {listed}")
    if summary["other_findings"]:
        listed = ", ".join(f"{k} x{v}" for k, v in summary["other_findings"].items())
        lines.append(f"also raised on failure sessions (not false alarms): {listed}")
    lines.append(f"halted sessions {sessions['halted']:,}, turns cut {sessions['turns_cut']:,}")
    lines.append("")
    if summary["ok"]:
        verdict = "PASS: every planted shape caught, no false alarms"
    else:
        problems = []
        if summary["missed"]:
            problems.append("missed " + ", ".join(summary["missed"]))
        if summary["unconfirmed"]:
            problems.append(
                "not caught yet " + ", ".join(summary["unconfirmed"]) + " (run longer)"
            )
        if healthy["false_alarms"]:
            problems.append(f"{healthy['false_alarms']} false alarm(s)")
        if summary["error"]:
            problems.append("the run failed")
        verdict = ("STOPPED EARLY: " if summary["interrupted"] else "FAIL: ") + "; ".join(problems)
    lines.append(f"{verdict} (exit {summary['exit_code']})")
    return "\n".join(lines) + "\n"
