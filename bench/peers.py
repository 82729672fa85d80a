"""Against the in-process peers: calls per second and what each guard catches, on one stream.

Usage::

    make bench-peers                       # own venv (.venv-peers) with the peers, full run
    python bench/peers.py                  # full run: ~1M calls, 10,000 sessions, 200 open
    python bench/peers.py --scale 0.05     # the same mix, 5 % of the sessions
    python bench/peers.py --guards streamguard,null --scale 0.005   # no peers needed
    python bench/peers.py --json           # machine-readable result on stdout

The stream
    One deterministic, call-heavy stream: every event is a tool call or its result
    (contract-v1 :class:`~streamguard.events.ToolCall` / ``ToolResult``), no text,
    no usage, no turn markers. 10,000 sessions of 80-120 calls (``--scale`` scales
    the number of sessions), 200 of them open at any moment; a seeded scheduler
    picks the next event from a random open session, and a finished session's slot
    is taken by the next one, the way one partition carries a fleet. The mix:

    * ``clean`` (70 %): distinct calls over a dozen tools (reads, searches, tests,
      writes, HTTP), worded from a vocabulary so no two calls share a shape, and
      no tool called more than four times in a row;
    * ``polling`` (15 %): clean work around a stretch of 10-24 identical status
      calls whose result changes each time (a job's progress);
    * three planted loops (5 % each), after a clean prefix and followed by clean
      calls: ``loop-repeat`` (one call and its unchanged result, 6-10 times),
      ``loop-cycle`` (three calls in a fixed order, four laps, results unchanged)
      and ``loop-reworded`` (one tool with reworded free-text arguments, 16-20
      times, the same acknowledgement each time).

    The stream is built before anything is timed, and every guard gets the very
    same event objects.

The guards
    Each guard is an adapter in this file: one guard object per session, created
    at the session's first event (so creation is timed), fed through the peer's
    documented hook for a tool call (and for its result, where it has one). An
    adapter returns a label when the guard reports something on that event (a
    warning, a halt, an exception it raises); what a guard does after it has
    tripped is its own business (some refuse every later call, some go on
    checking), and the stream is fed to the end regardless.

    * ``null``: does nothing; the harness's own cost per event (the floor);
    * ``baseline``: a minimal sliding window of this file's own, one rule
      (the same call three times among the last eight);
    * ``streamguard``: :class:`~streamguard.engine.Engine` with the default policy,
      and with every guardrail on (``bench/engine.py --all-enabled``);
    * the peers from PyPI, pinned in the Makefile (see ``PEERS`` below for what
      each adapter calls). A peer that is not installed is skipped with a note.

Timing
    ``calls/s`` counts (call + result) pairs per second: events fed / 2 / seconds,
    the median of ``--repeats`` passes. The passes go round the guards, repeat by
    repeat (each repeat starting at a different guard), so a noisy machine slows
    all of them alike. A pass that runs past ``--time-budget`` seconds stops there:
    the guard is marked ``capped``, its rate is the rate over the calls it was fed,
    its detection shares cover only the sessions it saw to the end, and it is not
    repeated. Ratios are to the fastest uncapped peer.

Detection
    From the first pass: the share of each planted-loop kind a guard *caught* (it
    reported something during the loop: from its first call to its last call's
    result) and the share of clean
    and polling sessions it *flagged* (it reported anything at all). For loop
    sessions, a report during the clean prefix is counted separately. The labels
    (streamguard's signal ids, the peers' rule names) are counted by kind in
    ``--json``.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import gc
import importlib.util
import json
import os
import platform
import random
import statistics
import sys
import time
import warnings
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol

import msgspec

from streamguard.engine import Engine
from streamguard.events import Alert, GuardrailTrip, ToolCall, ToolResult
from streamguard.policy import PolicySet, parse_policy_set

FULL_SESSIONS = 10_000
OPEN_SESSIONS = 200
AGENT = "bench-agent"
BASE_TS = 1_750_000_000.0
# The time between a session's events: only its order matters to the guards here.
EVENT_STEP_S = 0.5
CHECK_EVERY = 4096  # events between two looks at the clock (the time budget)

MIX: tuple[tuple[str, float], ...] = (
    ("clean", 0.70),
    ("polling", 0.15),
    ("loop-repeat", 0.05),
    ("loop-cycle", 0.05),
    ("loop-reworded", 0.05),
)
LOOP_KINDS = ("loop-repeat", "loop-cycle", "loop-reworded")

# Targets from the issue that asked for this benchmark (met by the engine work, not here).
TARGET_DEFAULT_RATIO = 1.0
TARGET_ALL_ENABLED_RATIO = 0.75

# ------------------------------------------------------------------ the stream

WORDS = (
    "alpha", "atlas", "beacon", "border", "cache", "canyon", "cedar", "chart", "cipher",
    "cobalt", "comet", "copper", "delta", "drift", "ember", "falcon", "fable", "fern",
    "forge", "galaxy", "garnet", "glacier", "harbor", "hazel", "helix", "indigo", "island",
    "jasper", "juniper", "kernel", "lantern", "ledger", "lilac", "lumen", "magnet", "maple",
    "meadow", "mercury", "nebula", "nimbus", "oasis", "onyx", "orbit", "pepper", "pixel",
    "prairie", "quartz", "quill", "radar", "raven", "ripple", "saffron", "signal", "sonnet",
    "spruce", "summit", "tangent", "thistle", "timber", "topaz", "tundra", "umber", "vector",
    "velvet", "willow", "winter", "yarrow", "zenith", "zephyr", "marble", "socket", "parser",
)
REWORDINGS = (
    "Marked the task as complete",
    "The task is finished now",
    "All steps are done, closing the task",
    "Task completed successfully",
    "Finished everything that was asked",
    "Work is done; marking it complete",
    "Completed the requested change",
    "Done: the task needs nothing more",
    "Wrapping up, the task is complete",
    "Everything requested has been handled",
    "The job is complete",
    "Closing this task as done",
    "The requested work is finished",
    "Nothing left to do, task complete",
    "Task done, all checks passed",
    "I have completed the task",
    "Marking this one finished",
    "The change is in; task complete",
    "Complete: the work is finished",
    "Task finished as requested",
)


@dataclass(frozen=True, slots=True)
class Call:
    tool: str
    args: dict[str, Any]
    result: str


@dataclass(slots=True)
class SessionPlan:
    session: str
    kind: str
    calls: list[Call]
    loop_start: int = -1  # index of the loop's first call (planted loops only)
    loop_end: int = -1  # index of the first call after the loop
    last_index: int = -1  # position of the session's last event in the stream


class _Words:
    """Fresh phrases for one session, and the calls it has made (so none is made twice)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.seen: set[str] = set()
        self.calls: set[str] = set()

    def phrase(self, n: int, sep: str) -> str:
        if n == 1:  # single words repeat (there are few); the calls they are part of do not
            return self.rng.choice(WORDS)
        while True:
            text = sep.join(self.rng.sample(WORDS, n))
            if text not in self.seen:
                self.seen.add(text)
                return text


def _clean_call(tool: str, words: _Words, rng: random.Random) -> Call:
    w = words.phrase
    number = rng.randrange(10, 99_999)
    if tool == "read_file":
        path = f"src/{w(2, '/')}.py"
        return Call(tool, {"path": path}, f"# {path}\n" + "\n".join(
            f"def {w(2, '_')}(x):\n    return x + {rng.randrange(1000)}" for _ in range(4)))
    if tool == "search_files":
        term = w(1, "")
        return Call(tool, {"pattern": term, "path": f"src/{w(1, '')}"},
                    f"{rng.randrange(1, 9)} matches for {term}: src/{w(2, '/')}.py, src/{w(2, '/')}.py")
    if tool == "web_search":
        query = w(3, " ")
        return Call(tool, {"query": query},
                    f"Results for {query!r}: {w(4, ' ')}; {w(4, ' ')}; {w(4, ' ')}.")
    if tool == "list_directory":
        path = f"src/{w(2, '/')}"
        return Call(tool, {"path": path}, "\n".join(f"{w(1, '')}.py" for _ in range(6)))
    if tool == "run_tests":
        target = f"tests/test_{w(2, '_')}.py"
        return Call(tool, {"target": target, "verbose": False},
                    f"{target}: {rng.randrange(3, 40)} passed in {rng.random() * 4:.2f}s")
    if tool == "write_file":
        path = f"src/{w(2, '/')}.py"
        return Call(tool, {"path": path, "content": f"VALUE = {w(3, ' ')!r}\n"},
                    f"wrote {rng.randrange(40, 4000)} bytes to {path}")
    if tool == "http_get":
        url = f"https://api.example.com/{w(2, '/')}"
        return Call(tool, {"url": url, "timeout": 10},
                    json.dumps({"status": 200, "name": w(2, " "), "id": number}))
    if tool == "get_issue":
        return Call(tool, {"repo": f"{w(1, '')}/{w(1, '')}", "title": w(3, " ")},
                    f"Issue {w(3, ' ')}: open, {rng.randrange(0, 30)} comments")
    if tool == "query_db":
        table = w(1, "")
        return Call(tool, {"sql": f"select * from {table} where {w(1, '')} = {number}"},
                    f"{rng.randrange(0, 200)} rows from {table}")
    if tool == "grep_logs":
        return Call(tool, {"service": w(1, ""), "needle": w(2, " ")},
                    f"{rng.randrange(0, 50)} lines; last: {w(5, ' ')}")
    raise ValueError(tool)


CLEAN_TOOLS = ("read_file", "search_files", "web_search", "list_directory", "run_tests",
               "write_file", "http_get", "get_issue", "query_db", "grep_logs")
MAX_TOOL_RUN = 4


def _clean_calls(count: int, words: _Words, rng: random.Random, last: str | None = None) -> list[Call]:
    calls = []
    run = 0
    for _ in range(count):
        tool = rng.choice(CLEAN_TOOLS)
        if tool == last and run >= MAX_TOOL_RUN:
            tool = rng.choice([t for t in CLEAN_TOOLS if t != last])
        run = run + 1 if tool == last else 1
        last = tool
        while True:
            call = _clean_call(tool, words, rng)
            key = json.dumps([call.tool, call.args], sort_keys=True)
            if key not in words.calls:
                words.calls.add(key)
                break
        calls.append(call)
    return calls


def plan_session(index: int, kind: str, rng: random.Random) -> SessionPlan:
    session = f"peer-{index:06d}"
    words = _Words(rng)
    total = rng.randint(80, 120)
    if kind == "clean":
        return SessionPlan(session, kind, _clean_calls(total, words, rng))
    if kind == "polling":
        job = f"job-{words.phrase(2, '-')}"
        polls = rng.randint(10, 24)
        prefix = _clean_calls(rng.randint(10, total - polls - 10), words, rng)
        progress = sorted(rng.sample(range(1, 100), polls))
        poll = [Call("get_job_status", {"job_id": job},
                     json.dumps({"job": job, "state": "running", "progress": p,
                                 "eta_s": (100 - p) * 3}))
                for p in progress]
        suffix = _clean_calls(total - len(prefix) - polls, words, rng)
        return SessionPlan(session, kind, prefix + poll + suffix)
    prefix = _clean_calls(rng.randint(10, 50), words, rng)
    if kind == "loop-repeat":
        one = _clean_call(rng.choice(("read_file", "http_get", "query_db", "search_files")),
                          words, rng)
        loop = [one] * rng.randint(6, 10)
    elif kind == "loop-cycle":
        lap = [_clean_call(tool, words, rng)
               for tool in rng.sample(("read_file", "run_tests", "write_file", "grep_logs"), 3)]
        loop = lap * 4
    elif kind == "loop-reworded":
        task = f"TASK-{rng.randrange(100, 9999)}"
        texts = rng.sample(REWORDINGS, rng.randint(16, 20))
        loop = [Call("mark_task_done", {"task": task, "summary": text},
                     f"{task} is already marked as done.") for text in texts]
    else:
        raise ValueError(kind)
    suffix = _clean_calls(max(0, total - len(prefix) - len(loop)), words, rng)
    return SessionPlan(session, kind, prefix + loop + suffix, loop_start=len(prefix),
                       loop_end=len(prefix) + len(loop))


def plan_stream(n_sessions: int, seed: int) -> list[SessionPlan]:
    rng = random.Random(f"peers/{seed}")
    kinds = [kind for kind, _ in MIX]
    weights = [share for _, share in MIX]
    return [plan_session(i, rng.choices(kinds, weights)[0], rng) for i in range(n_sessions)]


def build_stream(plans: list[SessionPlan], seed: int,
                 open_sessions: int) -> list[ToolCall | ToolResult]:
    """Interleave the sessions' events, ``open_sessions`` at a time, in one list."""
    rng = random.Random(f"interleave/{seed}")
    events: list[ToolCall | ToolResult] = []
    waiting = iter(plans)
    # An open session: its plan and the position of its next event (call i is 2i, result 2i+1).
    slots: list[list[Any]] = []
    for plan in waiting:
        slots.append([plan, 0])
        if len(slots) == open_sessions:
            break
    started = 0
    while slots:
        pick = rng.randrange(len(slots))
        slot = slots[pick]
        plan, position = slot
        if position == 0:
            started += 1
        call_index, is_result = divmod(position, 2)
        call = plan.calls[call_index]
        seq = position + 1
        ts = BASE_TS + started * 0.01 + position * EVENT_STEP_S
        call_id = f"{plan.session}-c{call_index}"
        if is_result:
            events.append(ToolResult(session=plan.session, agent=AGENT, seq=seq, ts=ts,
                                     tool=call.tool, call_id=call_id, result=call.result))
        else:
            events.append(ToolCall(session=plan.session, agent=AGENT, seq=seq, ts=ts,
                                   tool=call.tool, args=call.args, call_id=call_id))
        slot[1] = position + 1
        if slot[1] == 2 * len(plan.calls):
            plan.last_index = len(events) - 1
            following = next(waiting, None)
            if following is None:
                slots[pick] = slots[-1]
                slots.pop()
            else:
                slots[pick] = [following, 0]
    return events


# ------------------------------------------------------------------ adapters


class Adapter(Protocol):
    """One guard over many sessions: one guard object per session, kept by the adapter."""

    def on_call(self, event: ToolCall) -> str | None: ...

    def on_result(self, event: ToolResult) -> str | None: ...


class NullAdapter:
    """No guard at all: what the harness itself costs per event."""

    def on_call(self, event: ToolCall) -> str | None:
        return None

    def on_result(self, event: ToolResult) -> str | None:
        return None


class SlidingWindowAdapter:
    """The simplest guard worth the name: the same call 3 times among a session's last 8."""

    window = 8
    threshold = 3

    def __init__(self) -> None:
        self._recent: dict[str, deque[int]] = {}
        self._encode = msgspec.json.Encoder(order="sorted").encode

    def on_call(self, event: ToolCall) -> str | None:
        recent = self._recent.get(event.session)
        if recent is None:
            recent = self._recent[event.session] = deque(maxlen=self.window)
        key = hash((event.tool, self._encode(event.args)))
        recent.append(key)
        if recent.count(key) >= self.threshold:
            return "same-call-in-window"
        return None

    def on_result(self, event: ToolResult) -> str | None:
        return None


class StreamguardAdapter:
    """The engine itself: every event through ``Engine.process``; any alert or trip is a flag."""

    def __init__(self, policy: PolicySet) -> None:
        process = Engine(policy).process

        def feed(event: ToolCall | ToolResult) -> str | None:
            outputs = process(event)
            if outputs:
                for output in outputs:
                    if isinstance(output, Alert | GuardrailTrip):
                        return output.signal
            return None

        self.on_call = feed
        self.on_result = feed


class AgentWatchdogAdapter:
    """agent-watchdog: ``AgentWatchdog.record_tool_call(tool, args)`` inside ``watch()``.

    The library has no result hook. Its timeout runs a thread per run, so it is off
    (``timeout_seconds=None``); the budget is left at its default (no tokens here).
    """

    def __init__(self) -> None:
        from agent_watchdog import AgentWatchdog, WatchdogHalt

        self._new = AgentWatchdog
        self._halt = WatchdogHalt
        # The watch() context of each session is kept open (and referenced) for the run.
        self._runs: dict[str, tuple[Any, Any]] = {}

    def on_call(self, event: ToolCall) -> str | None:
        run = self._runs.get(event.session)
        if run is None:
            watchdog = self._new(timeout_seconds=None)
            context = watchdog.watch(run_id=event.session)
            context.__enter__()
            run = self._runs[event.session] = (watchdog, context)
        try:
            run[0].record_tool_call(event.tool, event.args)
        except self._halt as halt:
            return str(halt.report.reason.value)
        return None

    def on_result(self, event: ToolResult) -> str | None:
        return None


class AgentcapAdapter:
    """agentcap-guard: ``LoopDetector.record({"tool", "args"})`` per call, its defaults.

    agentcap's ``BudgetGuard.check(step_signature=...)`` runs this same detector,
    but also writes an audit log to disk and prices a model call; the loop guard on
    its own is the in-process part that compares with the others.
    """

    def __init__(self) -> None:
        from agentcap import LoopDetector

        self._new = LoopDetector
        self._detectors: dict[str, Any] = {}

    def on_call(self, event: ToolCall) -> str | None:
        detector = self._detectors.get(event.session)
        if detector is None:
            detector = self._detectors[event.session] = self._new()
        if detector.record({"tool": event.tool, "args": event.args}).is_loop:
            return "loop"
        return None

    def on_result(self, event: ToolResult) -> str | None:
        return None


class AgentBudgetGuardAdapter:
    """agent-budget-guard-py: ``with guard.tool(name, args): ...`` per call.

    One ``Guard`` per session, sharing one price table (built once: a guard that
    loads its pricing config costs about half a millisecond to create). With
    ``similarity=False`` the detectors are its repeat and cycle ones; its defaults add
    the similarity detector (difflib over the window), which is far slower.
    """

    def __init__(self, similarity: bool) -> None:
        from agentguard import CycleDetector, Guard, GuardTripped, RepeatDetector

        self._table = Guard(use_config=False).price_table
        self._tripped = GuardTripped
        if similarity:
            self._new: Callable[[], Any] = lambda: Guard(price_table=self._table)
        else:
            self._new = lambda: Guard(price_table=self._table,
                                      detectors=[RepeatDetector(), CycleDetector()])
        self._guards: dict[str, Any] = {}

    def on_call(self, event: ToolCall) -> str | None:
        guard = self._guards.get(event.session)
        if guard is None:
            guard = self._guards[event.session] = self._new()
        try:
            with guard.tool(event.tool, event.args):
                pass
        except self._tripped as tripped:
            verdict = getattr(tripped, "verdict", None)
            return getattr(verdict, "kind", None) or type(tripped).__name__
        return None

    def on_result(self, event: ToolResult) -> str | None:
        return None


class LoopGuardrailAdapter:
    """loop-guardrail: ``before_call(tool, args)`` and ``after_call(tool, args, result)``.

    Its default configuration (warnings on, hard stop off); a decision other than
    ``allow`` is a flag. ``after_call`` needs the call's arguments, so the adapter
    keeps each session's last call.
    """

    def __init__(self) -> None:
        from loop_guardrail import ToolCallGuardrailController

        self._new = ToolCallGuardrailController
        self._sessions: dict[str, list[Any]] = {}

    def on_call(self, event: ToolCall) -> str | None:
        entry = self._sessions.get(event.session)
        if entry is None:
            entry = self._sessions[event.session] = [self._new(), None]
        entry[1] = event.args
        decision = entry[0].before_call(event.tool, event.args)
        return None if decision.action == "allow" else decision.code

    def on_result(self, event: ToolResult) -> str | None:
        entry = self._sessions[event.session]
        decision = entry[0].after_call(event.tool, entry[1], event.result)
        return None if decision.action == "allow" else decision.code


class AgentSeatbeltAdapter:
    """agentseatbelt: ``Guard.checkpoint(tool, **args)`` inside the session's run.

    Its public entry point, ``Guard.run(agent_fn)``, owns the agent's thread (and
    starts a watchdog thread per run), which cannot interleave sessions. So each
    session's run is opened the way ``Guard.run`` opens it (``Guard._start``), and
    the public ``checkpoint`` is called inside that run's context.
    """

    def __init__(self) -> None:
        from agentseatbelt import Guard, GuardStop
        from agentseatbelt import _state as seatbelt_state

        self._new = Guard
        self._stop = GuardStop
        self._current = seatbelt_state.current
        self._sessions: dict[str, tuple[Any, contextvars.Context]] = {}

    def on_call(self, event: ToolCall) -> str | None:
        entry = self._sessions.get(event.session)
        if entry is None:
            guard = self._new()
            run = guard._start()
            context = contextvars.copy_context()
            context.run(self._current.set, run)
            entry = self._sessions[event.session] = (guard, context)
        guard, context = entry
        try:
            context.run(guard.checkpoint, event.tool, **event.args)
        except self._stop as stop:
            return str(getattr(stop, "reason", None) or type(stop).__name__)
        return None

    def on_result(self, event: ToolResult) -> str | None:
        return None


def _all_enabled_policy() -> PolicySet:
    """Every guardrail on, exactly as ``bench/engine.py --all-enabled`` turns them on."""
    spec = importlib.util.spec_from_file_location(
        "streamguard_bench_engine", Path(__file__).with_name("engine.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return parse_policy_set(module.ALL_ENABLED_POLICY, "all-enabled")


@dataclass(frozen=True)
class GuardSpec:
    name: str
    role: str  # floor | baseline | streamguard | peer
    rules: str
    factory: Callable[[], Adapter]
    distribution: str | None = None  # the PyPI distribution a peer comes from
    version: str | None = None  # the version pinned in the Makefile


def guard_specs() -> list[GuardSpec]:
    all_enabled = _all_enabled_policy()
    return [
        GuardSpec("null", "floor", "nothing: the harness's own cost", NullAdapter),
        GuardSpec("baseline", "baseline", "own sliding window: the same call 3x in the last 8",
                  SlidingWindowAdapter),
        GuardSpec("streamguard", "streamguard", "default policy",
                  lambda: StreamguardAdapter(PolicySet())),
        GuardSpec("streamguard-all", "streamguard",
                  "every guardrail on (bench/engine.py --all-enabled)",
                  lambda: StreamguardAdapter(all_enabled)),
        GuardSpec("agent-watchdog", "peer",
                  "identical run (3) + repeating pattern (window 8), record_tool_call",
                  AgentWatchdogAdapter, "agent-watchdog", "0.1.5"),
        GuardSpec("agentcap", "peer", "LoopDetector: the same call 3x in the last 12",
                  AgentcapAdapter, "agentcap-guard", "0.1.0"),
        GuardSpec("agentguard", "peer", "Guard.tool: repeat + cycle detectors (similarity off)",
                  lambda: AgentBudgetGuardAdapter(similarity=False),
                  "agent-budget-guard-py", "0.4.0"),
        GuardSpec("agentguard-defaults", "peer",
                  "Guard.tool: repeat + cycle + similarity detectors (its defaults)",
                  lambda: AgentBudgetGuardAdapter(similarity=True),
                  "agent-budget-guard-py", "0.4.0"),
        GuardSpec("loop-guardrail", "peer",
                  "before_call/after_call: failure and no-progress counts, defaults",
                  LoopGuardrailAdapter, "loop-guardrail", "1.0.0"),
        GuardSpec("agentseatbelt", "peer", "Guard.checkpoint: the same call 5x in the last 20",
                  AgentSeatbeltAdapter, "agentseatbelt", "0.3.0"),
    ]


# ------------------------------------------------------------------ timing


class _Discard:
    """A stdout that drops what peers print when they halt a run (one line each)."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


@dataclass
class PassResult:
    seconds: float
    events_fed: int
    capped: bool
    flags: list[tuple[str, int, str]]


def timed_pass(factory: Callable[[], Adapter], events: list[ToolCall | ToolResult],
               time_budget_s: float) -> PassResult:
    adapter = factory()
    on_call = adapter.on_call
    on_result = adapter.on_result
    flags: list[tuple[str, int, str]] = []
    flag = flags.append
    call_type = ToolCall
    n = len(events)
    fed = 0
    capped = False
    gc.collect()
    with contextlib.redirect_stdout(_Discard()), warnings.catch_warnings():  # type: ignore[type-var]
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        for low in range(0, n, CHECK_EVERY):
            for event in events[low:low + CHECK_EVERY]:
                label = on_call(event) if type(event) is call_type else on_result(event)
                if label is not None:
                    flag((event.session, event.seq, label))
            fed = min(n, low + CHECK_EVERY)
            if fed < n and time.perf_counter() - start > time_budget_s:
                capped = True
                break
        elapsed = time.perf_counter() - start
    del adapter, on_call, on_result
    return PassResult(elapsed, fed, capped, flags)


def detection(plans: list[SessionPlan], result: PassResult) -> dict[str, Any]:
    """Per kind of session: how many were seen to the end, caught or flagged, and by what."""
    by_session: dict[str, list[tuple[int, str]]] = {}
    for session, seq, label in result.flags:
        by_session.setdefault(session, []).append((seq or 0, label))
    out: dict[str, Any] = {}
    for kind, _ in MIX:
        seen = [p for p in plans if p.kind == kind and p.last_index < result.events_fed]
        labels: Counter[str] = Counter()
        hit = early = 0
        for plan in seen:
            flags = by_session.get(plan.session, [])
            labels.update({label for _, label in flags})
            if kind in LOOP_KINDS:
                # From the loop's first call to its last call's result: a report after
                # the loop is over comes too late to count as catching it.
                first_seq, last_seq = 2 * plan.loop_start + 1, 2 * plan.loop_end
                if any(first_seq <= seq <= last_seq for seq, _ in flags):
                    hit += 1
                if any(seq < first_seq for seq, _ in flags):
                    early += 1
            elif flags:
                hit += 1
        entry: dict[str, Any] = {
            "sessions": len(seen),
            ("caught" if kind in LOOP_KINDS else "flagged"): hit,
            "share": round(hit / len(seen), 4) if seen else None,
            "labels": dict(labels.most_common()),
        }
        if kind in LOOP_KINDS:
            entry["flagged_before_loop"] = early
        out[kind] = entry
    loops = [out[k] for k in LOOP_KINDS]
    seen_loops = sum(e["sessions"] for e in loops)
    out["loops"] = {
        "sessions": seen_loops,
        "caught": sum(e["caught"] for e in loops),
        "share": round(sum(e["caught"] for e in loops) / seen_loops, 4) if seen_loops else None,
    }
    return out


def _installed(spec: GuardSpec) -> tuple[bool, str | None, str | None]:
    """Whether a peer can run here, its installed version, and a note when it cannot."""
    if spec.distribution is None:
        return True, None, None
    try:
        version = metadata.version(spec.distribution)
    except metadata.PackageNotFoundError:
        return False, None, (f"not installed: pip install {spec.distribution}=={spec.version} "
                             "(make bench-peers installs every peer)")
    try:
        spec.factory()
    except Exception as error:  # an incompatible version: skip it, say why
        return False, version, f"cannot start: {type(error).__name__}: {error}"
    note = None if version == spec.version else f"version {version}, pinned {spec.version}"
    return True, version, note


def machine() -> dict[str, Any]:
    model = platform.processor() or "unknown"
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"cpu": model, "nproc": os.cpu_count(), "python": platform.python_version(),
            "msgspec": msgspec.__version__, "platform": platform.platform(),
            "loadavg_at_start": [round(x, 2) for x in os.getloadavg()]}


def _rotations(specs: list[Any], repeats: int) -> Iterator[tuple[int, Any]]:
    for repeat in range(repeats):
        shift = repeat % len(specs)
        for spec in specs[shift:] + specs[:shift]:
            yield repeat, spec


def run(args: argparse.Namespace) -> dict[str, Any]:
    specs = guard_specs()
    if args.guards:
        wanted = [name.strip() for name in args.guards.split(",") if name.strip()]
        known = {spec.name for spec in specs}
        unknown = [name for name in wanted if name not in known]
        if unknown:
            raise SystemExit(f"unknown guard(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        specs = [spec for spec in specs if spec.name in wanted]

    n_sessions = max(1, round(FULL_SESSIONS * args.scale))
    started = time.perf_counter()
    plans = plan_stream(n_sessions, args.seed)
    events = build_stream(plans, args.seed, min(args.open_sessions, n_sessions))
    build_s = time.perf_counter() - started
    calls = len(events) // 2
    kinds = Counter(plan.kind for plan in plans)

    rows: dict[str, dict[str, Any]] = {}
    runnable = []
    for spec in specs:
        ok, version, note = _installed(spec)
        rows[spec.name] = {"guard": spec.name, "role": spec.role, "rules": spec.rules,
                           "distribution": spec.distribution, "pinned": spec.version,
                           "version": version, "status": "ok" if ok else "skipped",
                           "note": note, "pass_s": [], "pass_calls_per_s": []}
        if ok:
            runnable.append(spec)

    first: dict[str, PassResult] = {}
    for repeat, spec in _rotations(runnable, args.repeats):
        row = rows[spec.name]
        if row["status"] == "capped":
            continue  # a capped guard is measured once
        result = timed_pass(spec.factory, events, args.time_budget)
        pairs = result.events_fed / 2
        row["pass_s"].append(round(result.seconds, 3))
        row["pass_calls_per_s"].append(round(pairs / result.seconds) if result.seconds else None)
        if repeat == 0:
            first[spec.name] = result
            row["calls_measured"] = int(pairs)
            if result.capped:
                row["status"] = "capped"
                row["note"] = (f"capped at {args.time_budget:g} s: {int(pairs):,} of {calls:,} calls "
                               "fed in one pass; rate and detection over that part")
        if not args.quiet:
            print(f"  [{repeat + 1}/{args.repeats}] {spec.name:<20} "
                  f"{row['pass_calls_per_s'][-1]:>10,} calls/s", file=sys.stderr, flush=True)
        del result

    for spec in runnable:
        row = rows[spec.name]
        rates = [r for r in row["pass_calls_per_s"] if r]
        row["calls_per_s"] = round(statistics.median(rates)) if rates else None
        row["us_per_call"] = round(1e6 / row["calls_per_s"], 2) if row["calls_per_s"] else None
        row["detection"] = detection(plans, first[spec.name])

    peers = [r for r in rows.values() if r["role"] == "peer" and r["status"] == "ok"]
    fastest = max(peers, key=lambda r: r["calls_per_s"], default=None)
    for row in rows.values():
        rate = row.get("calls_per_s")
        row["ratio_to_fastest_peer"] = (round(rate / fastest["calls_per_s"], 3)
                                        if fastest and rate else None)

    targets: dict[str, Any] = {"default_ratio": TARGET_DEFAULT_RATIO,
                               "all_enabled_ratio": TARGET_ALL_ENABLED_RATIO}
    for name, key, bound in (("streamguard", "default_met", TARGET_DEFAULT_RATIO),
                             ("streamguard-all", "all_enabled_met", TARGET_ALL_ENABLED_RATIO)):
        ratio = rows.get(name, {}).get("ratio_to_fastest_peer")
        targets[key] = None if ratio is None else ratio >= bound

    return {
        "machine": machine(),
        "command": " ".join(["bench/peers.py", *sys.argv[1:]]),
        "stream": {
            "seed": args.seed, "scale": args.scale, "sessions": n_sessions,
            "open_sessions": min(args.open_sessions, n_sessions), "calls": calls,
            "events": len(events), "session_kinds": dict(sorted(kinds.items())),
            "build_s": round(build_s, 1),
        },
        "repeats": args.repeats,
        "time_budget_s": args.time_budget,
        "fastest_peer": fastest["guard"] if fastest else None,
        "guards": list(rows.values()),
        "targets": targets,
    }


def _share(entry: dict[str, Any]) -> str:
    share = entry.get("share")
    return "-" if share is None else f"{share * 100:.0f}%"


def render(result: dict[str, Any]) -> str:
    stream = result["stream"]
    lines = [
        f"machine: {result['machine']['cpu']}, nproc {result['machine']['nproc']}, "
        f"Python {result['machine']['python']}",
        f"stream: {stream['calls']:,} calls ({stream['events']:,} events), "
        f"{stream['sessions']:,} sessions, {stream['open_sessions']} open at once; "
        + ", ".join(f"{k} {v:,}" for k, v in stream["session_kinds"].items()),
        f"calls/s = (call + result) pairs per second, median of {result['repeats']}; "
        f"ratio to the fastest peer ({result['fastest_peer'] or 'none ran'})",
        "",
    ]
    header = ("guard", "calls/s", "ratio", "repeat", "cycle", "reworded", "clean", "polling",
              "status")
    table = [header]
    for row in result["guards"]:
        if row["status"] == "skipped":
            table.append((row["guard"], "-", "-", "", "", "", "", "", f"skipped: {row['note']}"))
            continue
        d = row["detection"]
        ratio = row["ratio_to_fastest_peer"]
        status = row["status"] + (f" ({row['note']})" if row["note"] else "")
        table.append((row["guard"], f"{row['calls_per_s']:,}",
                      "-" if ratio is None else f"{ratio:.2f}x",
                      _share(d["loop-repeat"]), _share(d["loop-cycle"]), _share(d["loop-reworded"]),
                      _share(d["clean"]), _share(d["polling"]), status))
    widths = [max(len(str(r[i])) for r in table) for i in range(len(header) - 1)]
    for r in table:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(r[:-1], widths, strict=True))
                     + "  " + str(r[-1]))
    lines.append("")
    lines.append("repeat/cycle/reworded: planted loops caught; clean/polling: sessions flagged")
    targets = result["targets"]
    for key, label, bound in (("default_met", "streamguard (default)", targets["default_ratio"]),
                              ("all_enabled_met", "streamguard (every guardrail on)",
                               targets["all_enabled_ratio"])):
        met = targets.get(key)
        verdict = "not measured" if met is None else ("met" if met else "MISSED")
        lines.append(f"target: {label} >= {bound:g}x the fastest peer: {verdict}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0,
                        help=f"share of the {FULL_SESSIONS:,} sessions to generate (default 1)")
    parser.add_argument("--open-sessions", type=int, default=OPEN_SESSIONS,
                        help="sessions interleaved at a time")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes per guard (K)")
    parser.add_argument("--time-budget", type=float, default=120.0,
                        help="seconds one pass of one guard may take before it is capped")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--guards", help="comma-separated guards to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the guards and exit")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = parser.parse_args(argv)
    if args.scale <= 0 or args.repeats < 1 or args.time_budget <= 0 or args.open_sessions < 1:
        parser.error("--scale, --repeats, --time-budget and --open-sessions must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list:
        for spec in guard_specs():
            print(f"{spec.name:<20} {spec.role:<12} {spec.rules}")
        return 0
    result = run(args)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
