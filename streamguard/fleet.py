"""A deterministic synthetic fleet: agent sessions, healthy and failing, as events.

Benchmarks, tests and demos need traffic that looks like a real fleet without
recording one. This module builds it from a seed:

* :func:`generate_session` renders one session of a given :class:`Scenario` as
  the ordered events an agent runtime would publish: turn markers, the user's
  prompt, one ``usage`` event per model call (tokens and cost), assistant
  narration between tool calls, tool calls with their results, and a final
  answer that closes each turn. Every event carries ``seq`` (from 0), ``ts``
  (strictly increasing) and ``turn``.
* :func:`fleet` interleaves many sessions in timestamp order, the way a
  partition of the events topic would carry them; each session's own events stay
  in order.

Healthy scenarios are the work the watchdog must leave alone: sweeps of
distinct reads, edit-test cycles, waits through ``wait_and_verify``, narrated
mixed work, and failures that recover. Under the default policy they raise
nothing. Failure scenarios reproduce the shapes each signal exists for; every
one starts from healthy work and then plants exactly one behaviour. :data:`PLANTED`
says which signals a failure shape must trigger, and :data:`PLANTED_POLICY` what
policy it needs beyond the defaults (a cost ceiling, for instance).

Everything is derived from ``random.Random`` instances seeded with strings, so
the same arguments give the same events in every process.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from enum import StrEnum
from itertools import product
from typing import Any, NamedTuple

from .events import (
    AgentEvent,
    FinalAnswer,
    Text,
    ToolCall,
    ToolKind,
    ToolResult,
    TurnEnd,
    TurnStart,
    Usage,
)


class Scenario(StrEnum):
    """The session shapes the generator knows."""

    # healthy
    SWEEP = "sweep"
    EDIT_TEST = "edit_test"
    POLLING = "polling"
    NARRATED = "narrated"
    RECOVERING = "recovering"
    # failures
    READ_LOOP = "read_loop"
    TOOL_CYCLE = "tool_cycle"
    INTERLEAVED_LOOP = "interleaved_loop"
    REWORDED_CALLS = "reworded_calls"
    NOOP_STREAK = "noop_streak"
    REWORDED_QUESTION = "reworded_question"
    SILENT_GRIND = "silent_grind"
    FAILURE_STREAK = "failure_streak"
    FAILING_TOOL = "failing_tool"
    COST_RUNAWAY = "cost_runaway"
    CONTEXT_FLOOD = "context_flood"
    UNVERIFIED_WRITE = "unverified_write"


HEALTHY: tuple[Scenario, ...] = (
    Scenario.SWEEP,
    Scenario.EDIT_TEST,
    Scenario.POLLING,
    Scenario.NARRATED,
    Scenario.RECOVERING,
)
FAILURES: tuple[Scenario, ...] = tuple(s for s in Scenario if s not in HEALTHY)

PLANTED: dict[Scenario, frozenset[str]] = {
    **{s: frozenset() for s in HEALTHY},
    Scenario.READ_LOOP: frozenset({"repeated-tool-call"}),
    Scenario.TOOL_CYCLE: frozenset({"alternating-tool-cycle"}),
    # The status answer never changes, so the fourth identical answer trips the
    # result-aware repeat rule first; the density rule defers to it after interleaves.
    Scenario.INTERLEAVED_LOOP: frozenset({"repeated-tool-call"}),
    Scenario.REWORDED_CALLS: frozenset({"repeated-tool-name"}),
    Scenario.NOOP_STREAK: frozenset({"no-op-streak"}),
    Scenario.REWORDED_QUESTION: frozenset({"no-new-state"}),
    Scenario.SILENT_GRIND: frozenset({"tools-without-text"}),
    Scenario.FAILURE_STREAK: frozenset({"tool-failure-streak"}),
    Scenario.FAILING_TOOL: frozenset({"tool-failure-guidance"}),
    Scenario.COST_RUNAWAY: frozenset({"cost-ceiling"}),
    Scenario.CONTEXT_FLOOD: frozenset({"context-pressure", "context-budget"}),
    Scenario.UNVERIFIED_WRITE: frozenset({"unverified-final-answer"}),
}
"""Signals each scenario must trigger, and no others (healthy scenarios: none)."""

COST_RUNAWAY_TURN_CAP_USD = 5.0
"""Per-turn ceiling that separates the cost runaway from healthy turns.

Healthy turns stay well under it (small contexts on a mid-priced model); the
runaway turn spends several times more.
"""

PLANTED_POLICY: dict[Scenario, dict[str, Any]] = {
    Scenario.COST_RUNAWAY: {"cost_ceiling": {"max_turn_usd": COST_RUNAWAY_TURN_CAP_USD}},
    Scenario.UNVERIFIED_WRITE: {"verification": {"enabled": True}},
}
"""Raw policy fragments (TOML shape) a failure shape needs beyond the defaults."""

EPOCH = 1_767_225_600.0  # 2026-01-01T00:00:00Z: where generated clocks start
WINDOW = 200_000
MODEL = "claude-sonnet-4-5"
BIG_MODEL = "claude-opus-4-1"
_PRICES = {MODEL: (3e-6, 15e-6), BIG_MODEL: (15e-6, 75e-6)}  # USD per input / output token
_COMPACT_AT = 60_000  # healthy contexts are compacted well before any pressure threshold

_LOREM = (
    "func handle(w http.ResponseWriter, r *http.Request) { ctx := r.Context(); "
    "cfg, err := loadConfig(ctx); if err != nil { http.Error(w, err.Error(), 500); return } "
    "rows, err := db.QueryContext(ctx, cfg.Query, r.URL.Query().Get(\"id\")); "
    "defer rows.Close(); for rows.Next() { var item Item; rows.Scan(&item.ID, &item.Name) } } "
) * 40

_DIRS = ("pkg/api", "pkg/store", "internal/auth", "cmd/worker", "web/src", "services/billing")
_FILES = (
    "handler.go", "routes.go", "config.go", "client.go", "types.go", "retry.go",
    "cache.go", "schema.sql", "index.ts", "session.py", "limits.yaml", "README.md",
)
_WORDS = (
    "timeout", "retry", "tenant_id", "deadline", "rate limit", "migration", "cursor",
    "idempotency", "backoff", "quota", "token refresh", "pagination",
)
_SERVICES = ("checkout", "search", "ingest", "notifier", "ledger", "gateway")
_PROMPTS = (
    "The nightly job failed, can you find out why?",
    "Please add pagination to the list endpoint and make the tests pass.",
    "Roll out the new version of the service and confirm it is healthy.",
    "Why are requests timing out for some tenants?",
    "Review the retry logic and tighten it where needed.",
    "Summarise what changed in the auth package this week.",
)
_NARRATION = (
    "Looking at {x} next.",
    "{x} looks fine; moving on.",
    "Found something relevant in {x}.",
    "Checking how {x} is used.",
    "So far the problem is not in {x}.",
    "Reading {x} to confirm the behaviour.",
    "{x} explains part of it; continuing.",
)
_ROLES = ("coder", "support", "ops", "research")


def _payload(head: str, rng: random.Random, lo: int = 200, hi: int = 3000) -> str:
    size = rng.randint(lo, hi)
    start = rng.randrange(0, 400)
    return f"// {head}\n{_LOREM[start : start + size]}"


class _Builder:
    """Renders one session's events (ordered, numbered, timestamped)."""

    def __init__(
        self, session: str, agent: str, rng: random.Random, start_ts: float, narrate_p: float
    ) -> None:
        self.session = session
        self.agent = agent
        self.rng = rng
        self.ts = start_ts
        self.events: list[AgentEvent] = []
        self.turn = 0
        self.calls = 0
        self.context = rng.randint(3_000, 6_000)
        self.model_name = MODEL
        self.silent = 0  # calls since the agent last spoke
        self.narrate_p = narrate_p
        self.max_silent = rng.randint(3, 8)
        self.measured = 0  # input tokens of the last model call

    # -- primitives

    def _tick(self, lo: float, hi: float) -> None:
        self.ts += self.rng.uniform(lo, hi)

    def _emit(self, cls: type[Any], **fields: Any) -> None:
        self.events.append(
            cls(
                session=self.session,
                agent=self.agent,
                ts=round(self.ts, 3),
                seq=len(self.events),
                turn=self.turn,
                **fields,
            )
        )
        self._tick(0.005, 0.05)

    def begin_turn(self) -> None:
        self.turn += 1
        self._tick(5.0, 90.0)
        self._emit(TurnStart)
        prompt = self.rng.choice(_PROMPTS)
        self._emit(Text, text=prompt, role="user")
        self.context += len(prompt) // 4 + 20

    def model(self, out_lo: int = 40, out_hi: int = 400) -> None:
        """One model call: a ``usage`` event with tokens and cost."""
        if self.context > _COMPACT_AT and self.model_name == MODEL:
            self.context = self.rng.randint(9_000, 14_000)
        self._tick(0.8, 6.0)
        out = self.rng.randint(out_lo, out_hi)
        price_in, price_out = _PRICES[self.model_name]
        self.measured = self.context
        self._emit(
            Usage,
            model=self.model_name,
            input_tokens=self.context,
            output_tokens=out,
            cost_usd=round(self.context * price_in + out * price_out, 6),
            context_window=WINDOW,
        )
        self.context += out

    def say(self, text: str) -> None:
        self._emit(Text, text=text, role="assistant")
        self.context += len(text) // 4
        self.silent = 0

    def narrate(self, about: str) -> None:
        self.say(self.rng.choice(_NARRATION).format(x=about))

    def _call_event(self, tool: str, args: Any, kind: ToolKind | None) -> str:
        self.calls += 1
        call_id = f"call_{self.calls}"
        self._emit(ToolCall, tool=tool, args=args, call_id=call_id, kind=kind)
        self.silent += 1
        return call_id

    def _result_event(
        self,
        tool: str,
        call_id: str,
        result: Any,
        error: str | None,
        no_op: bool,
        result_bytes: int | None,
    ) -> None:
        fields: dict[str, Any] = {"tool": tool, "call_id": call_id}
        if error is not None:
            fields["error"] = error
        else:
            fields["result"] = result
        if no_op:
            fields["no_op"] = True
        if result_bytes is not None:
            fields["result_bytes"] = result_bytes
        self._emit(ToolResult, **fields)
        size = result_bytes if result_bytes is not None else len(str(result))
        self.context += size // 4 + 10

    def call(
        self,
        tool: str,
        args: Any,
        kind: ToolKind | None,
        result: Any = None,
        error: str | None = None,
        no_op: bool = False,
        result_bytes: int | None = None,
    ) -> None:
        call_id = self._call_event(tool, args, kind)
        self._tick(0.05, 3.0)
        self._result_event(tool, call_id, result, error, no_op, result_bytes)

    def step(
        self,
        tool: str,
        args: Any,
        kind: ToolKind | None,
        result: Any = None,
        *,
        about: str | None = None,
        narrate: bool | None = None,
        error: str | None = None,
        no_op: bool = False,
    ) -> None:
        """A model call, narration when the agent would speak, then one tool call.

        ``narrate=None`` lets healthy pacing decide: speak with probability
        ``narrate_p``, and always before the silent run reaches the session's
        limit (3..8 calls, below the longest silent run of real good sessions).
        """
        self.model()
        if narrate is None:
            narrate = self.silent >= self.max_silent or self.rng.random() < self.narrate_p
        if narrate:
            self.narrate(about or tool)
        self.call(tool, args, kind, result, error=error, no_op=no_op)

    def end_turn(self, summary: str) -> None:
        self.model(100, 700)
        self.say(summary)
        self._emit(FinalAnswer, text=summary)
        self._tick(0.01, 0.2)
        self._emit(TurnEnd)


# --------------------------------------------------------------------- healthy


def _read_result(path: str, rng: random.Random) -> dict[str, Any]:
    content = _payload(path, rng)
    return {"path": path, "content": content, "lines": content.count(";") + 1}


def _sweep(b: _Builder) -> None:
    """List a directory or two and read distinct files, ending each with a grep."""
    rng = b.rng
    for directory in rng.sample(_DIRS, rng.randint(1, 2)):
        names = rng.sample(_FILES, rng.randint(3, 7))
        b.step("list_dir", {"path": directory}, "resolve", {"entries": names}, about=directory)
        for name in names:
            path = f"{directory}/{name}"
            b.step("read_file", {"path": path}, "read", _read_result(path, rng), about=path)
        word = rng.choice(_WORDS)
        b.step(
            "grep",
            {"pattern": word, "path": directory},
            "read",
            {"matches": [f"{directory}/{n}:{rng.randint(1, 400)}" for n in names[:2]]},
            about=f"uses of {word}",
        )


def _edit_test(b: _Builder) -> None:
    """Read a file, then edit and re-run its tests until they pass."""
    rng = b.rng
    directory = rng.choice(_DIRS)
    path = f"{directory}/{rng.choice(_FILES)}"
    b.step("read_file", {"path": path}, "read", _read_result(path, rng), about=path)
    failing = rng.randint(1, 3)
    for attempt in range(failing + 1):
        old = _LOREM[attempt * 37 : attempt * 37 + rng.randint(20, 60)]
        new = f"{old} // fix {attempt}: {rng.choice(_WORDS)}"
        b.step(
            "edit_file",
            {"path": path, "old_text": old, "new_text": new},
            "write",
            {"ok": True, "path": path, "bytes_changed": len(new) - len(old) + attempt},
            about=path,
        )
        left = failing - attempt
        b.step(
            "run_tests",
            {"package": f"./{directory}/..."},
            "read",
            {
                "passed": 40 + attempt,
                "failed": left,
                "failures": [f"Test{rng.choice(_WORDS).title().replace(' ', '')}" for _ in range(left)],
                "duration_ms": rng.randint(800, 9000),
            },
            about="the test run",
        )


def _polling(b: _Builder) -> None:
    """Deploy, wait through ``wait_and_verify``, then confirm with a status read."""
    rng = b.rng
    for service in rng.sample(_SERVICES, rng.randint(1, 2)):
        version = f"v1.{rng.randint(2, 40)}.{rng.randint(0, 9)}"
        rollout = f"ro-{rng.randrange(10**6):06d}"
        b.step(
            "get_status",
            {"service": service, "verbose": True},
            "read",
            {"service": service, "version": "previous", "healthy": True},
            about=service,
        )
        b.step(
            "deploy",
            {"service": service, "version": version},
            "write",
            {"rollout": rollout, "status": "started"},
            about=service,
        )
        waits = rng.randint(1, 3)
        for i in range(waits):
            done = i == waits - 1
            b.step(
                "wait_and_verify",
                {"condition": f"rollout {rollout} ready", "timeout_s": 120},
                "read",
                {"ready": done, "waited_s": 120 if not done else rng.randint(5, 119)},
                about=f"rollout {rollout}",
            )
        b.step(
            "get_status",
            {"service": service},
            "read",
            {"service": service, "version": version, "healthy": True,
             "p99_ms": rng.randint(40, 400)},
            about=service,
        )


def _mixed_call(b: _Builder, i: int) -> tuple[str, dict[str, Any], ToolKind, Any]:
    rng = b.rng
    choice = rng.randrange(5)
    if choice == 0:
        word = rng.choice(_WORDS)
        return "grep", {"pattern": f"{word}.*{i}"}, "read", {"matches": rng.randint(0, 30)}
    if choice == 1:
        path = f"{rng.choice(_DIRS)}/{rng.choice(_FILES)}"
        return "read_file", {"path": path, "offset": i * 100}, "read", _read_result(path, rng)
    if choice == 2:
        svc = rng.choice(_SERVICES)
        return ("http_get", {"url": f"https://{svc}.internal/debug/vars?i={i}"}, "read",
                {"status": 200, "body": _payload(svc, rng, 100, 800)})
    if choice == 3:
        return ("query_db", {"sql": f"select count(*) from events where shard = {i}"}, "read",
                {"rows": [[rng.randint(0, 10**6)]]})
    directory = rng.choice(_DIRS)
    return "list_dir", {"path": directory, "depth": 1 + i % 3}, "resolve", {
        "entries": rng.sample(_FILES, 4)}


def _narrated(b: _Builder) -> None:
    """Mixed investigation, with the agent speaking between most calls."""
    for i in range(b.rng.randint(4, 10)):
        tool, args, kind, result = _mixed_call(b, i)
        b.step(tool, args, kind, result, narrate=b.rng.random() < 0.8 or b.silent >= 3)


_TRANSIENT = ("timeout after 30s", "connection reset by peer", "503 Service Unavailable")


def _recovering(b: _Builder) -> None:
    """Calls that fail and then go through: a retry after a transient error, or a
    corrected argument (at most two failures in a row, never the same call twice)."""
    rng = b.rng
    for i in range(rng.randint(2, 4)):
        tool, args, kind, result = _mixed_call(b, i)
        if rng.random() < 0.5:
            wrong = {k: f"{v}~" if isinstance(v, str) else v for k, v in args.items()}
            b.step(tool, wrong, kind, error="invalid argument: no such file or object")
            if rng.random() < 0.5:
                b.step(tool, args, kind, error=rng.choice(_TRANSIENT), narrate=False)
            b.say("Corrected the argument; trying again.")
        else:
            b.step(tool, args, kind, error=rng.choice(_TRANSIENT))
            b.say("That looked transient; retrying once.")
        b.step(tool, args, kind, result, narrate=False)
        tool, args, kind, result = _mixed_call(b, i + 10)
        b.step(tool, args, kind, result)


_HEALTHY_TURNS: dict[Scenario, Callable[[_Builder], None]] = {
    Scenario.SWEEP: _sweep,
    Scenario.EDIT_TEST: _edit_test,
    Scenario.POLLING: _polling,
    Scenario.NARRATED: _narrated,
    Scenario.RECOVERING: _recovering,
}

# --------------------------------------------------------------------- failures


def _reworded(rng: random.Random, n: int, parts: Sequence[Sequence[str]]) -> list[str]:
    """``n`` distinct phrasings of one thing (combinations of the given fragments)."""
    combos = ["".join(c) for c in product(*parts)]
    return rng.sample(combos, n)


def _read_loop(b: _Builder) -> None:
    """One file re-read under several spellings (``main.go``, ``./main.go``, ...)."""
    rng = b.rng
    name = rng.choice(("main.go", "server.py", "index.ts"))
    b.step("list_dir", {"path": "."}, "resolve", {"entries": [name, "go.mod"]}, narrate=True)
    content = _read_result(name, rng)
    spellings = [name, f"./{name}"] + [
        rng.choice((name, f"./{name}", f"/workspace/{name}", f"dir/../{name}"))
        for _ in range(rng.randint(3, 4))
    ]
    for spelling in spellings:
        b.step("read_file", {"path": spelling}, "read", content, about=name)


def _tool_cycle(b: _Builder) -> None:
    """``list_agents`` then ``check_agent`` on the same agent, lap after lap."""
    rng = b.rng
    worker = f"worker-{rng.randint(1, 9)}"
    b.say(f"Checking on {worker}.")
    agents = {"agents": [f"worker-{i}" for i in range(1, 10)]}
    status = {"agent": worker, "state": "busy", "task": "reindex"}
    for _ in range(rng.randint(3, 4)):
        b.step("list_agents", {}, "resolve", agents, narrate=False)
        b.step("check_agent", {"agent": worker}, "read", status, narrate=False)


def _interleaved_loop(b: _Builder) -> None:
    """A status call made four times between each read of new log lines."""
    rng = b.rng
    job = f"build-{rng.randint(100, 999)}"
    status = {"job": job, "state": "running", "step": "link"}
    b.say(f"Waiting for {job} to finish.")
    offset = 0
    for _ in range(3):
        for _ in range(4):
            b.step("get_job_status", {"job": job}, "read", status, narrate=False)
        offset += rng.randint(50, 200)
        b.step(
            "read_logs", {"job": job, "offset": offset}, "read",
            {"lines": _payload(f"{job}@{offset}", rng, 100, 600)}, narrate=False,
        )
        b.say(f"{job} is still running.")


_DONE_PARTS = (
    ("Completed", "Finished", "Done with", "Wrapped up", "Closed out"),
    (" the config migration", " migrating the config", " the settings move", " config cleanup"),
    ("", " - all checks pass", "; verified locally", " (ready for review)"),
)


def _reworded_calls(b: _Builder) -> None:
    """``mark_task_done`` with a freshly reworded summary each time."""
    rng = b.rng
    task = f"T-{rng.randint(100, 999)}"
    b.step("get_task", {"task": task}, "read", {"task": task, "state": "open"}, narrate=True)
    for i, summary in enumerate(_reworded(rng, rng.randint(15, 18), _DONE_PARTS)):
        b.step(
            "mark_task_done", {"task": task, "summary": summary}, "write",
            {"recorded": True, "entry": 1000 + i},
            narrate=i % 4 == 3,
            about=task,
        )
    b.step("get_task", {"task": task}, "read", {"task": task, "state": "open", "notes": 18})


def _noop_streak(b: _Builder) -> None:
    """Calls the tool itself reports as having changed nothing."""
    rng = b.rng
    task = f"T-{rng.randint(100, 999)}"
    b.step("get_task", {"task": task}, "read", {"task": task, "state": "done"}, narrate=True)
    for summary in _reworded(rng, rng.randint(3, 5), _DONE_PARTS):
        b.step(
            "mark_task_done", {"task": task, "summary": summary}, "write",
            {"changed": False, "state": "done"}, no_op=True, about=task,
        )


_QUESTION_PARTS = (
    ("how do I ", "how to ", "ways to ", "steps to "),
    ("rotate ", "renew ", "refresh ", "roll "),
    ("the signing key", "signing keys", "the JWT key"),
    ("", " safely", " without downtime"),
)


def _reworded_question(b: _Builder) -> None:
    """One question asked in different words; the answer never changes."""
    rng = b.rng
    answer = {"hits": [{"doc": "security/keys.md", "score": 0.41}], "total": 1}
    # 7 or 8 asks: past no-new-state's 1 + 6, short of result-stall's 1 + 8, so the
    # shape plants exactly the warn (a ninth identical answer is result-stall's loop).
    for i, query in enumerate(_reworded(rng, rng.randint(7, 8), _QUESTION_PARTS)):
        b.step("search_docs", {"query": query}, "read", answer, narrate=i % 3 == 0,
               about="the docs")


def _silent_grind(b: _Builder) -> None:
    """Varied, distinct calls and not a word to the user."""
    rng = b.rng
    b.say("Investigating.")
    tools = ("grep", "read_file", "query_db", "http_get", "list_dir")
    last = ""
    for i in range(rng.randint(12, 16)):
        tool = rng.choice([t for t in tools if t != last])
        last = tool
        args: dict[str, Any] = {"grep": {"pattern": f"err{i}"},
                                "read_file": {"path": f"{rng.choice(_DIRS)}/f{i}.go"},
                                "query_db": {"sql": f"select * from jobs where id = {i}"},
                                "http_get": {"url": f"https://svc.internal/jobs/{i}"},
                                "list_dir": {"path": f"logs/{i}"}}[tool]
        b.step(tool, args, "read", {"n": i, "data": _payload(tool, rng, 50, 400)}, narrate=False)


def _failure_streak(b: _Builder) -> None:
    """Every call is denied, whichever tool the agent tries (an RBAC wall)."""
    rng = b.rng
    ns = rng.choice(("prod", "payments", "kube-system"))
    probes = [
        ("kubectl_get", {"resource": "pods", "namespace": ns}),
        ("kubectl_describe", {"resource": "deployment/api", "namespace": ns}),
        ("kubectl_logs", {"pod": "api-0", "namespace": ns}),
        ("get_events", {"namespace": ns}),
        ("get_metrics", {"namespace": ns, "window": "1h"}),
    ]
    for tool, args in rng.sample(probes, rng.randint(3, 5)):
        b.step(tool, args, "read", error=f'forbidden: {tool} is not allowed in namespace "{ns}"')
    b.say(f"I cannot read anything in {ns}.")


def _failing_tool(b: _Builder) -> None:
    """One tool failing while the agent keeps varying its arguments."""
    rng = b.rng
    ns = rng.choice(("prod", "payments", "kube-system"))
    for resource in rng.sample(("pods", "deployments", "secrets", "configmaps", "events"),
                               rng.randint(3, 4)):
        b.step(
            "kubectl_get", {"resource": resource, "namespace": ns}, "read",
            error=f'{resource} is forbidden: cannot list resource "{resource}" in "{ns}"',
            about=resource,
        )
    b.say(f"kubectl keeps being refused in {ns}.")


def _cost_runaway(b: _Builder) -> None:
    """A long turn on an expensive model with a context that keeps growing."""
    rng = b.rng
    b.model_name = BIG_MODEL
    b.context = rng.randint(40_000, 50_000)
    for i in range(rng.randint(10, 12)):
        tool, args, kind, result = _mixed_call(b, 100 + i)
        b.step(tool, args, kind, result)
        b.context += 7_000  # pasted documents, long reasoning: the prompt only grows
    b.model_name = MODEL


def _context_flood(b: _Builder) -> None:
    """Two huge log dumps read in parallel, before the next model call measures them."""
    rng = b.rng
    b.model()
    b.say("Pulling the full logs for both shards.")
    measured = b.measured
    first = 3 * (rng.randint(140_000, 170_000) - measured)  # past the 0.65 pressure mark
    second = 3 * (rng.randint(195_000, 230_000) - measured) - first  # past the 0.95 ceiling
    ids = [
        b._call_event("read_logs", {"shard": shard, "since": "24h"}, "read") for shard in (1, 2)
    ]
    b._tick(1.0, 5.0)
    for shard, (call_id, size) in enumerate(zip(ids, (first, second), strict=True), 1):
        b._result_event("read_logs", call_id, {"shard": shard, "truncated_preview": "..."},
                        None, False, size)


def _unverified_write(b: _Builder) -> None:
    """A restart, then a final answer claiming success with nothing read since."""
    rng = b.rng
    service = rng.choice(_SERVICES)
    b.step("get_status", {"service": service}, "read", {"service": service, "healthy": False},
           narrate=True)
    b.step("restart_service", {"service": service}, "write", {"restarted": True}, narrate=True)


_FAILURE_TURNS: dict[Scenario, Callable[[_Builder], None]] = {
    Scenario.READ_LOOP: _read_loop,
    Scenario.TOOL_CYCLE: _tool_cycle,
    Scenario.INTERLEAVED_LOOP: _interleaved_loop,
    Scenario.REWORDED_CALLS: _reworded_calls,
    Scenario.NOOP_STREAK: _noop_streak,
    Scenario.REWORDED_QUESTION: _reworded_question,
    Scenario.SILENT_GRIND: _silent_grind,
    Scenario.FAILURE_STREAK: _failure_streak,
    Scenario.FAILING_TOOL: _failing_tool,
    Scenario.COST_RUNAWAY: _cost_runaway,
    Scenario.CONTEXT_FLOOD: _context_flood,
    Scenario.UNVERIFIED_WRITE: _unverified_write,
}

# --------------------------------------------------------------------- sessions


def generate_session(
    kind: Scenario | str,
    session: str,
    agent: str,
    rng: random.Random,
    start_ts: float = EPOCH,
) -> list[AgentEvent]:
    """Every event of one session of shape ``kind``, in order.

    Healthy sessions have one to three turns of their shape. A failure session
    has zero to two healthy turns first (of random healthy shapes), then one turn
    holding the failure.
    """
    kind = Scenario(kind)
    b = _Builder(session, agent, rng, start_ts, narrate_p=rng.uniform(0.35, 0.6))
    if kind in _HEALTHY_TURNS:
        turns = [_HEALTHY_TURNS[kind]] * rng.randint(1, 3)
    else:
        turns = [_HEALTHY_TURNS[rng.choice(HEALTHY)] for _ in range(rng.randint(0, 2))]
    for shape in turns:
        b.begin_turn()
        shape(b)  # every healthy shape checks what it changed before answering
        b.end_turn(rng.choice(("Done: the change is in and tests pass.",
                               "Here is what I found.", "Summary of the findings below.")))
    if kind in _FAILURE_TURNS:
        b.begin_turn()
        _FAILURE_TURNS[kind](b)
        b.end_turn("That should be everything.")
    return b.events


class SessionPlan(NamedTuple):
    """What :func:`fleet` will generate for one session."""

    index: int  # type: ignore[assignment]  # a field, shadowing tuple.index on purpose
    session: str
    agent: str
    kind: Scenario
    start_ts: float
    seed: str


def default_mix(loops_fraction: float = 0.1) -> dict[Scenario, float]:
    """Equal shares of the healthy shapes, ``loops_fraction`` spread over the failures."""
    if not 0.0 <= loops_fraction <= 1.0:
        raise ValueError("loops_fraction must be within [0, 1]")
    mix = {s: (1.0 - loops_fraction) / len(HEALTHY) for s in HEALTHY}
    mix.update({s: loops_fraction / len(FAILURES) for s in FAILURES})
    return mix


def plan_fleet(
    n_sessions: int,
    seed: int | str = 0,
    mix: Mapping[Scenario | str, float] | None = None,
    loops_fraction: float = 0.1,
    arrival_rate: float = 20.0,
) -> list[SessionPlan]:
    """The sessions of a fleet: kind, agent and start time of each, by start time.

    ``mix`` weighs scenarios (defaults to :func:`default_mix` of
    ``loops_fraction``); ``arrival_rate`` is new sessions per second.
    """
    weights = default_mix(loops_fraction) if mix is None else {Scenario(k): v for k, v in mix.items()}
    kinds = list(weights)
    shares = list(weights.values())
    rng = random.Random(f"fleet/{seed}")
    plans = []
    ts = EPOCH
    for index in range(n_sessions):
        ts += rng.expovariate(arrival_rate)
        kind = rng.choices(kinds, shares)[0]
        agent = f"{rng.choice(_ROLES)}-{rng.randrange(8)}"
        plans.append(SessionPlan(index, f"sess-{index:06d}", agent, kind, ts, f"{seed}/{index}"))
    return plans


def session_events(plan: SessionPlan) -> list[AgentEvent]:
    """The events of one planned session (same plan, same events)."""
    return generate_session(plan.kind, plan.session, plan.agent, random.Random(plan.seed),
                            plan.start_ts)


def fleet(
    n_sessions: int,
    seed: int | str = 0,
    mix: Mapping[Scenario | str, float] | None = None,
    loops_fraction: float = 0.1,
    arrival_rate: float = 20.0,
) -> Iterator[AgentEvent]:
    """The events of ``n_sessions`` sessions, interleaved by timestamp.

    Sessions are generated lazily as their start time comes up, so memory holds
    only the sessions in flight. Ties are broken by session index, which keeps
    the order deterministic.
    """
    plans = plan_fleet(n_sessions, seed, mix, loops_fraction, arrival_rate)
    heap: list[tuple[float, int, int, list[AgentEvent]]] = []
    upcoming = iter(plans)
    pending = next(upcoming, None)
    while heap or pending is not None:
        while pending is not None and (not heap or pending.start_ts <= heap[0][0]):
            events = session_events(pending)
            if events:
                heapq.heappush(heap, (events[0].ts or 0.0, pending.index, 0, events))
            pending = next(upcoming, None)
        _, index, position, events = heapq.heappop(heap)
        yield events[position]
        position += 1
        if position < len(events):
            heapq.heappush(heap, (events[position].ts or 0.0, index, position, events))


__all__ = [
    "FAILURES",
    "HEALTHY",
    "PLANTED",
    "PLANTED_POLICY",
    "Scenario",
    "SessionPlan",
    "default_mix",
    "fleet",
    "generate_session",
    "plan_fleet",
    "session_events",
]
