"""Detection bench: the default detectors over real recorded sessions.

Usage::

    python bench/detection.py CORPUS...                 # e.g. ../shared/corpus
    python bench/detection.py CORPUS --policy p.toml    # another policy
    python bench/detection.py CORPUS --json             # machine-readable
    python bench/detection.py CORPUS --source NAME      # one top-level folder only
    python bench/detection.py CORPUS --sessions now.jsonl            # one line per session
    python bench/detection.py CORPUS --against before.jsonl          # what a change moved

Every file under each CORPUS folder that an importer recognises
(:mod:`streamguard.importers`, format detected per file) becomes one or more
sessions. A session's *source* is the top-level folder of CORPUS that holds
it. The sessions are replayed interleaved, as a fleet would send them: one
event of each session in turn (round-robin, in sorted order), through one
:class:`~streamguard.engine.Engine` under the policy.

Each session is labelled by how its run ended, never by its events
(:func:`label_of`, the one place that maps a source's end label):

* ``normal``: the agent finished (SWE-agent ``submitted`` and the agent's own
  ``exit_command`` / ``exit_forfeit``, mini-SWE-agent ``Submitted``, tau-bench
  and tau2 ``user_stop`` / ``agent_stop``, Who&When and AgentDojo
  ``finished``). An alert here is a false alarm, or a loop the agent got out of;
* ``budget``: the harness stopped the run for its budget (``exit_cost``,
  ``exit_context``, ``exit_total_execution_time``, ``max_rounds``,
  ``max_time``, ``max_steps``, tau2 ``timeout`` / ``too_many_errors`` /
  ``context_window_exceeded``, ``LimitsExceeded``, ``TimeExceeded``,
  ``ContextWindowExceededError``). Not always a loop: a slow honest run also
  runs out;
* ``api_failure``: the model's API or its infrastructure failed
  (``RateLimitError``, ``InternalServerError``, ``exit_api``, tau2
  ``infrastructure_error``, Claude Code ``api_error``...): neither;
* ``unknown``: no label (Claude Code, runs without an exit status) or one not
  listed above, among them the stops that are neither a budget nor the API:
  format failures (``exit_format``, ``RepeatedFormatError``, tau2
  ``agent_error``), harness or environment errors (``exit_error``,
  ``exit_environment_error``, ``exit_command_timeout``, ``early_exit``),
  ``skipped``, ``interrupted``.

SWE-agent's ``submitted (X)`` (the harness stopped the run for X, then
submitted the patch so far) is labelled as X is.

Figures, per source and overall: for normal endings, the sessions with any
alert and with any critical alert, by signal; for budget stops, the sessions
with a critical alert and with any alert, and how many tool calls came after
the event that raised the first critical (median: the calls a halt would have
saved); the engine's events/s over the run (import not timed). A recorded
agent cannot be halted, so under ``enforce`` every halt is followed by
``halt-ignored`` criticals: they never make a session critical on their own,
but they show in the by-signal counts.

Judged loops: ``bench/judged_loops.toml`` (``--judged FILE``) lists sessions a
person read call by call, ``[[session]]`` with ``source``, ``file`` (relative to
the source folder), ``session`` and ``loop`` (true, false or "unclear"). For
the genuine loops the bench reports the share with a critical alert (target
80 %) and the median calls after the first critical; for the judged non-loops,
the share with a critical (false alarms). A missing file skips the section.

Per session: ``--sessions FILE`` writes one JSON line per session (its source,
file, id, label, judged verdict, calls, every alert as ``[seq, signal,
severity]``, and the calls after the first critical). ``--against FILE`` reads
such a file from an earlier run (another commit, another policy) and lists every
session whose alerts differ, with its label and both alert lists: a rule change
is judged by the sessions it moves, not only by the totals it leaves.

Exit codes: 0 the report was printed; 1 some file failed to import (the report
is still printed; the failures are listed on stderr); 2 a CORPUS folder is
absent or holds no session (nothing is measured), or a usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

try:
    import streamguard  # noqa: F401
except ModuleNotFoundError:  # run from a checkout without an installed package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from streamguard.engine import Engine
from streamguard.events import Alert, ToolCall
from streamguard.importers import ImportedSession, ImportFailure, iter_sessions
from streamguard.policy import PolicySet, load_policy_set

DEFAULT_JUDGED = Path(__file__).resolve().parent / "judged_loops.toml"
JUDGED_TARGET = 0.80

NORMAL, BUDGET, API_FAILURE, UNKNOWN = "normal", "budget", "api_failure", "unknown"
LABELS = (NORMAL, BUDGET, API_FAILURE, UNKNOWN)

# The one mapping from a source's end label (ImportedSession.ended, compared
# case-insensitively) to the bench's label. Anything not listed is unknown.
_END_LABELS: dict[str, str] = {
    # the agent finished
    "submitted": NORMAL,  # SWE-agent, mini-SWE-agent
    "finished": NORMAL,  # Who&When, AgentDojo
    "user_stop": NORMAL,  # tau-bench, tau2
    "agent_stop": NORMAL,
    "exit_command": NORMAL,  # SWE-agent 1.x: the agent typed `exit`
    "exit_forfeit": NORMAL,  # SWE-agent: the agent gave up
    # the harness stopped it for its budget
    "exit_cost": BUDGET,  # SWE-agent
    "exit_context": BUDGET,
    "exit_total_execution_time": BUDGET,
    "max_rounds": BUDGET,  # Who&When
    "max_time": BUDGET,
    "max_steps": BUDGET,  # tau-bench, tau2
    "too_many_errors": BUDGET,  # tau2: its max_errors limit on failed tool calls
    "context_window_exceeded": BUDGET,  # tau2
    "limitsexceeded": BUDGET,  # mini-SWE-agent: step or cost limit
    "timeexceeded": BUDGET,  # mini-SWE-agent 2.x: wall-clock limit
    "contextwindowexceedederror": BUDGET,  # mini-SWE-agent: the model's exception class
    "budgetexceedederror": BUDGET,
    # the model's API (or the run's infrastructure) failed
    "ratelimiterror": API_FAILURE,
    "internalservererror": API_FAILURE,
    "apierror": API_FAILURE,
    "apiconnectionerror": API_FAILURE,
    "apitimeouterror": API_FAILURE,
    "serviceunavailableerror": API_FAILURE,
    "badrequesterror": API_FAILURE,
    "authenticationerror": API_FAILURE,
    "permissiondeniederror": API_FAILURE,
    "notfounderror": API_FAILURE,
    "overloadederror": API_FAILURE,
    "contentpolicyviolationerror": API_FAILURE,
    "apiresponsevalidationerror": API_FAILURE,
    "exit_api": API_FAILURE,  # SWE-agent: the model's retries ran out
    "infrastructure_error": API_FAILURE,  # tau2
    "api_error": API_FAILURE,  # Claude Code: the session ended on an API error notice
}
# Labels whose case tells two harnesses apart: tau2's `timeout` is its simulation
# time limit; mini-SWE-agent's `Timeout` is the model client's exception class.
_CASED_END_LABELS: dict[str, str] = {"timeout": BUDGET, "Timeout": API_FAILURE}
# SWE-agent's "submitted (exit_cost)": stopped for exit_cost, then autosubmitted.
_AUTOSUBMITTED = re.compile(r"submitted \((.+)\)", re.IGNORECASE)


def label_of(ended: str | None) -> str:
    """The bench label of a session whose source says it ended ``ended``
    (``submitted (X)`` is labelled as X is)."""
    if ended is None:
        return UNKNOWN
    ended = ended.strip()
    autosubmitted = _AUTOSUBMITTED.fullmatch(ended)
    if autosubmitted:
        ended = autosubmitted.group(1).strip()
    if ended in _CASED_END_LABELS:
        return _CASED_END_LABELS[ended]
    return _END_LABELS.get(ended.lower(), UNKNOWN)


class Corpus:
    """The sessions of the given corpus folders, each with its source and file."""

    def __init__(self) -> None:
        self.sessions: list[ImportedSession] = []
        self.source_of: dict[str, str] = {}  # session id -> source folder
        self.file_of: dict[str, str] = {}  # session id -> file, relative to its source
        self.failures: list[ImportFailure] = []
        self.skipped: list[str] = []


def load_corpus(roots: list[str], only_sources: set[str] | None = None) -> Corpus:
    corpus = Corpus()
    for root in roots:
        for session in iter_sessions(None, [root], on_error=corpus.failures.append, on_skip=corpus.skipped.append):
            relative = Path(os.path.relpath(session.source, root))
            source = relative.parts[0] if len(relative.parts) > 1 else Path(root).name
            if only_sources is not None and source not in only_sources:
                continue
            name = session.session
            if name in corpus.source_of:  # two sources with the same id: keep both, distinctly
                n = 2
                while f"{name}#{n}" in corpus.source_of:
                    n += 1
                name = f"{name}#{n}"
                session = _renamed(session, name)
            corpus.sessions.append(session)
            corpus.source_of[name] = source
            corpus.file_of[name] = Path(*relative.parts[1:]).as_posix() if len(relative.parts) > 1 else relative.as_posix()
    corpus.sessions.sort(key=lambda s: (corpus.source_of[s.session], corpus.file_of[s.session], s.session))
    return corpus


def _renamed(session: ImportedSession, name: str) -> ImportedSession:
    from msgspec import structs

    events = [structs.replace(event, session=name) for event in session.events]
    return structs.replace(session, session=name, events=events)


def interleave(sessions: list[ImportedSession]) -> list[Any]:
    """One event of each session in turn, until every session is spent."""
    queues = [s.events for s in sessions]
    longest = max((len(q) for q in queues), default=0)
    return [q[i] for i in range(longest) for q in queues if i < len(q)]


class SessionOutcome:
    __slots__ = (
        "alert_signals", "alerts", "calls", "calls_after_first_critical", "critical_signals",
        "first_critical_seq",
    )

    def __init__(self) -> None:
        self.alerts: list[tuple[int, str, str]] = []  # (seq, signal, severity), in output order
        self.alert_signals: set[str] = set()
        self.critical_signals: set[str] = set()
        self.first_critical_seq: int | None = None
        self.calls = 0
        self.calls_after_first_critical: int | None = None


def replay(sessions: list[ImportedSession], policy: PolicySet) -> tuple[dict[str, SessionOutcome], float, int]:
    """Outcomes per session, the engine's events/s and the number of events."""
    stream = interleave(sessions)
    engine = Engine(policy)
    outputs: list[Any] = []
    started = time.perf_counter()
    for event in stream:
        found = engine.process(event)
        if found:
            outputs.extend(found)
    elapsed = time.perf_counter() - started
    rate = len(stream) / elapsed if elapsed > 0 else 0.0
    return outcomes_of(sessions, outputs), rate, len(stream)


def outcomes_of(sessions: list[ImportedSession], outputs: list[Any]) -> dict[str, SessionOutcome]:
    """Per session: the signals that alerted, and the calls after the first critical's event."""
    outcomes = {s.session: SessionOutcome() for s in sessions}
    for output in outputs:
        if not isinstance(output, Alert):
            continue
        outcome = outcomes[output.session]
        outcome.alerts.append((output.seq or 0, output.signal, output.severity))
        outcome.alert_signals.add(output.signal)
        if output.severity == "critical":
            outcome.critical_signals.add(output.signal)
            if outcome.first_critical_seq is None or (output.seq or 0) < outcome.first_critical_seq:
                outcome.first_critical_seq = output.seq or 0
    for session in sessions:
        outcome = outcomes[session.session]
        call_seqs = [e.seq or 0 for e in session.events if isinstance(e, ToolCall)]
        outcome.calls = len(call_seqs)
        if outcome.first_critical_seq is not None:
            outcome.calls_after_first_critical = sum(1 for seq in call_seqs if seq > outcome.first_critical_seq)
    return outcomes


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _median(values: list[int]) -> float | None:
    return float(statistics.median(values)) if values else None


def summarise(sessions: list[ImportedSession], outcomes: dict[str, SessionOutcome]) -> dict[str, Any]:
    by_label: dict[str, list[ImportedSession]] = {label: [] for label in LABELS}
    for session in sessions:
        by_label[label_of(session.ended)].append(session)
    normal = [outcomes[s.session] for s in by_label[NORMAL]]
    budget = [outcomes[s.session] for s in by_label[BUDGET]]
    signals_normal: Counter[str] = Counter()
    critical_normal: Counter[str] = Counter()
    for outcome in normal:
        signals_normal.update(outcome.alert_signals)
        critical_normal.update(outcome.critical_signals)
    critical_budget: Counter[str] = Counter()
    for outcome in budget:
        critical_budget.update(outcome.critical_signals)
    budget_critical = [o for o in budget if o.first_critical_seq is not None]
    return {
        "sessions": len(sessions),
        "events": sum(len(s.events) for s in sessions),
        "calls": sum(outcomes[s.session].calls for s in sessions),
        "labels": {label: len(by_label[label]) for label in LABELS},
        "ended_normally": {
            "sessions": len(normal),
            "any_alert": sum(1 for o in normal if o.alert_signals),
            "any_alert_share": _share(sum(1 for o in normal if o.alert_signals), len(normal)),
            "any_critical": sum(1 for o in normal if o.critical_signals),
            "any_critical_share": _share(sum(1 for o in normal if o.critical_signals), len(normal)),
            "alert_by_signal": dict(sorted(signals_normal.items())),
            "critical_by_signal": dict(sorted(critical_normal.items())),
        },
        "budget_stop": {
            "sessions": len(budget),
            "any_critical": len(budget_critical),
            "any_critical_share": _share(len(budget_critical), len(budget)),
            "any_alert": sum(1 for o in budget if o.alert_signals),
            "any_alert_share": _share(sum(1 for o in budget if o.alert_signals), len(budget)),
            "critical_by_signal": dict(sorted(critical_budget.items())),
            "median_calls_after_first_critical": _median(
                [o.calls_after_first_critical for o in budget_critical if o.calls_after_first_critical is not None]
            ),
        },
        "api_failure": {
            "sessions": len(by_label[API_FAILURE]),
            "any_critical": sum(1 for s in by_label[API_FAILURE] if outcomes[s.session].critical_signals),
        },
        "unknown": {
            "sessions": len(by_label[UNKNOWN]),
            "any_alert": sum(1 for s in by_label[UNKNOWN] if outcomes[s.session].alert_signals),
            "any_critical": sum(1 for s in by_label[UNKNOWN] if outcomes[s.session].critical_signals),
        },
    }


def match_judged(entries: list[dict[str, Any]] | None, corpus: Corpus) -> tuple[dict[str, Any], list[str]]:
    """Judged entries matched to imported sessions by source and file (and the
    session id when a file holds several): session id -> its ``loop`` value (True,
    False or "unclear"), and the entries that matched no single session."""
    by_file: dict[tuple[str, str], list[str]] = {}
    for name, source in corpus.source_of.items():
        by_file.setdefault((source, corpus.file_of[name]), []).append(name)
    verdicts: dict[str, Any] = {}
    unmatched: list[str] = []
    for entry in entries or []:
        candidates = by_file.get((str(entry.get("source", "")), str(entry.get("file", ""))), [])
        wanted = str(entry.get("session", ""))
        if len(candidates) > 1:
            candidates = [c for c in candidates if c == wanted or c.endswith("/" + wanted)]
        if len(candidates) != 1:
            unmatched.append(f"{entry.get('source')}/{entry.get('file')}")
            continue
        loop = entry.get("loop")
        verdicts[candidates[0]] = loop if loop is True or loop is False else "unclear"
    return verdicts, unmatched


def session_lines(
    corpus: Corpus, outcomes: dict[str, SessionOutcome], verdicts: dict[str, Any]
) -> list[dict[str, Any]]:
    """One record per session, in the corpus' order (``--sessions``)."""
    lines = []
    for session in corpus.sessions:
        name = session.session
        outcome = outcomes[name]
        lines.append({
            "source": corpus.source_of[name],
            "file": corpus.file_of[name],
            "session": name,
            "label": label_of(session.ended),
            "judged": verdicts.get(name),
            "calls": outcome.calls,
            "alerts": [list(alert) for alert in outcome.alerts],
            "calls_after_first_critical": outcome.calls_after_first_critical,
        })
    return lines


def compare_sessions(before: list[dict[str, Any]], now: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The sessions whose alerts differ between two ``--sessions`` files (matched by
    source, file and id; a session in one file only is listed too)."""
    def key(line: dict[str, Any]) -> tuple[str, str, str]:
        return (str(line.get("source")), str(line.get("file")), str(line.get("session")))

    earlier = {key(line): line for line in before}
    changed = []
    for line in now:
        old = earlier.pop(key(line), None)
        if old is None or old.get("alerts") != line["alerts"]:
            changed.append({
                "source": line["source"], "file": line["file"], "session": line["session"],
                "label": line["label"], "judged": line["judged"],
                "before": None if old is None else old.get("alerts"), "now": line["alerts"],
                "calls_after_first_critical": [
                    None if old is None else old.get("calls_after_first_critical"),
                    line["calls_after_first_critical"],
                ],
            })
    for old in earlier.values():
        changed.append({
            "source": old.get("source"), "file": old.get("file"), "session": old.get("session"),
            "label": old.get("label"), "judged": old.get("judged"),
            "before": old.get("alerts"), "now": None,
            "calls_after_first_critical": [old.get("calls_after_first_critical"), None],
        })
    return changed


def read_session_lines(path: Path) -> list[dict[str, Any]]:
    lines = []
    with path.open(encoding="utf-8") as handle:
        for number, text in enumerate(handle, 1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not a session line ({exc})") from None
            if not isinstance(line, dict) or not isinstance(line.get("alerts"), list):
                raise ValueError(f"{path}:{number}: not a session line (no alerts list)")
            lines.append(line)
    return lines


def load_judged(path: Path) -> list[dict[str, Any]] | None:
    if not path.is_file():
        return None
    with path.open("rb") as handle:
        data = tomllib.load(handle)
    entries = data.get("session", [])
    return [e for e in entries if isinstance(e, dict)]


def judged_section(
    entries: list[dict[str, Any]], corpus: Corpus, outcomes: dict[str, SessionOutcome]
) -> dict[str, Any]:
    """Score the judged entries (matched as :func:`match_judged` does)."""
    verdicts, unmatched = match_judged(entries, corpus)
    groups: dict[str, list[SessionOutcome]] = {"loop": [], "not_loop": [], "unclear": []}
    for name, loop in verdicts.items():
        group = "loop" if loop is True else "not_loop" if loop is False else "unclear"
        groups[group].append(outcomes[name])
    loops = groups["loop"]
    caught = [o for o in loops if o.first_critical_seq is not None]
    share = _share(len(caught), len(loops))
    not_loops = groups["not_loop"]
    return {
        "entries": len(entries),
        "matched": len(entries) - len(unmatched),
        "unmatched": unmatched,
        "genuine_loops": len(loops),
        "genuine_with_critical": len(caught),
        "genuine_with_critical_share": share,
        "target_share": JUDGED_TARGET,
        "target_met": share is not None and share >= JUDGED_TARGET,
        "median_calls_after_first_critical": _median(
            [o.calls_after_first_critical for o in caught if o.calls_after_first_critical is not None]
        ),
        "judged_not_loops": len(not_loops),
        "not_loops_with_critical": sum(1 for o in not_loops if o.first_critical_seq is not None),
        "unclear": len(groups["unclear"]),
        "unclear_with_critical": sum(1 for o in groups["unclear"] if o.first_critical_seq is not None),
    }


def run(args: argparse.Namespace) -> tuple[dict[str, Any], int]:
    policy = load_policy_set(args.policy) if args.policy else PolicySet()
    started = time.perf_counter()
    corpus = load_corpus(args.corpus, set(args.source) if args.source else None)
    import_s = time.perf_counter() - started
    outcomes, rate, events = replay(corpus.sessions, policy)
    sources = sorted(set(corpus.source_of.values()))
    report: dict[str, Any] = {
        "corpus": [str(c) for c in args.corpus],
        "policy": args.policy or "default",
        "import_s": round(import_s, 3),
        "engine_events": events,
        "engine_events_per_s": round(rate),
        "files_failed": len(corpus.failures),
        "files_skipped": len(corpus.skipped),
        "overall": summarise(corpus.sessions, outcomes),
        "by_source": {
            source: summarise([s for s in corpus.sessions if corpus.source_of[s.session] == source], outcomes)
            for source in sources
        },
    }
    judged_path = Path(args.judged) if args.judged else DEFAULT_JUDGED
    entries = load_judged(judged_path)
    report["judged_loops"] = (
        judged_section(entries, corpus, outcomes) if entries is not None else {"file": str(judged_path), "absent": True}
    )
    if args.sessions or args.against:
        lines = session_lines(corpus, outcomes, match_judged(entries, corpus)[0])
        if args.sessions:
            with open(args.sessions, "w", encoding="utf-8") as handle:
                for line in lines:
                    handle.write(json.dumps(line, sort_keys=True) + "\n")
        if args.against:
            report["changed_sessions"] = compare_sessions(read_session_lines(Path(args.against)), lines)
    for failure in corpus.failures:
        print(f"detection: import failed: {failure}", file=sys.stderr)
    return report, (1 if corpus.failures else 0)


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{share * 100:.1f} %"


def _signals(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))) or "none"


def render(report: dict[str, Any]) -> str:
    lines = [
        f"corpus: {', '.join(report['corpus'])}   policy: {report['policy']}",
        f"engine: {report['engine_events']} events at {report['engine_events_per_s']:,} events/s "
        f"(import {report['import_s']:.2f} s; files failed {report['files_failed']}, skipped {report['files_skipped']})",
    ]
    for name, summary in [("overall", report["overall"]), *report["by_source"].items()]:
        normal, budget, labels = summary["ended_normally"], summary["budget_stop"], summary["labels"]
        lines += [
            "",
            f"== {name}: {summary['sessions']} sessions, {summary['events']} events, {summary['calls']} calls "
            f"(normal {labels['normal']}, budget {labels['budget']}, api failure {labels['api_failure']}, "
            f"unknown {labels['unknown']})",
        ]
        if normal["sessions"]:
            lines += [
                f"  ended normally {normal['sessions']}: any alert {normal['any_alert']} "
                f"({_pct(normal['any_alert_share'])}), any critical {normal['any_critical']} "
                f"({_pct(normal['any_critical_share'])})",
                f"    alerts by signal:   {_signals(normal['alert_by_signal'])}",
                f"    critical by signal: {_signals(normal['critical_by_signal'])}",
            ]
        if budget["sessions"]:
            median = budget["median_calls_after_first_critical"]
            lines += [
                f"  budget stop {budget['sessions']}: critical {budget['any_critical']} "
                f"({_pct(budget['any_critical_share'])}), any alert {budget['any_alert']} "
                f"({_pct(budget['any_alert_share'])}), median calls after the first critical "
                f"{'-' if median is None else f'{median:g}'}",
                f"    critical by signal: {_signals(budget['critical_by_signal'])}",
            ]
        if summary["api_failure"]["sessions"]:
            lines.append(
                f"  api failure {summary['api_failure']['sessions']}: critical {summary['api_failure']['any_critical']}"
            )
        if summary["unknown"]["sessions"]:
            unknown = summary["unknown"]
            lines.append(
                f"  unknown {unknown['sessions']}: any alert {unknown['any_alert']}, critical {unknown['any_critical']}"
            )
    judged = report["judged_loops"]
    lines.append("")
    if judged.get("absent"):
        lines.append(f"== judged loops: {judged['file']} absent, section skipped")
    else:
        median = judged["median_calls_after_first_critical"]
        verdict = "met" if judged["target_met"] else "NOT met"
        lines += [
            f"== judged loops: {judged['matched']} of {judged['entries']} entries matched",
            f"  genuine loops {judged['genuine_loops']}: critical {judged['genuine_with_critical']} "
            f"({_pct(judged['genuine_with_critical_share'])}; target {judged['target_share'] * 100:.0f} %: {verdict}), "
            f"median calls after the first critical {'-' if median is None else f'{median:g}'}",
            f"  judged not loops {judged['judged_not_loops']}: critical {judged['not_loops_with_critical']}; "
            f"unclear {judged['unclear']}: critical {judged['unclear_with_critical']}",
        ]
        for missing in judged["unmatched"][:10]:
            lines.append(f"  unmatched: {missing}")
    if "changed_sessions" in report:
        changed = report["changed_sessions"]
        lines += ["", f"== sessions whose alerts changed: {len(changed)}"]
        for change in changed:
            saved = change["calls_after_first_critical"]
            lines.append(
                f"  {change['source']}/{change['file']} ({change['label']}, judged {change['judged']}): "
                f"first critical {_first_critical(change['before'])} -> {_first_critical(change['now'])}, "
                f"calls after it {saved[0]} -> {saved[1]}"
            )
    return "\n".join(lines) + "\n"


def _first_critical(alerts: list[Any] | None) -> str:
    if alerts is None:
        return "(absent)"
    for seq, signal, severity in alerts:
        if severity == "critical":
            return f"{signal}@{seq}"
    return "none"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", nargs="+", help="corpus folder(s); each top-level folder is a source")
    parser.add_argument("--policy", help="policy TOML file (default: built-in defaults)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--source", action="append", help="only this top-level folder (repeatable)")
    parser.add_argument("--judged", help=f"judged sessions TOML (default: {DEFAULT_JUDGED.name} beside this file)")
    parser.add_argument("--sessions", metavar="FILE", help="write one JSON line per session to FILE")
    parser.add_argument("--against", metavar="FILE",
                        help="list the sessions whose alerts differ from an earlier --sessions FILE")
    args = parser.parse_args(argv)
    if args.against and not os.path.isfile(args.against):
        print(f"detection: --against {args.against} is absent", file=sys.stderr)
        return 2
    for folder in args.corpus:
        if not os.path.isdir(folder):
            print(f"detection: corpus folder {folder} is absent (nothing to measure)", file=sys.stderr)
            return 2
    try:
        report, code = run(args)
    except ValueError as exc:  # an --against file that is not one this bench wrote
        print(f"detection: {exc}", file=sys.stderr)
        return 2
    if report["overall"]["sessions"] == 0:
        print(f"detection: no session found under {', '.join(args.corpus)}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        sys.stdout.write(render(report))
    return code


if __name__ == "__main__":
    sys.exit(main())
