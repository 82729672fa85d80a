"""``tool-failure-streak``: several tool results in a row came back as errors.

What it catches
    An agent that currently holds no tool-verified evidence about anything.
    The motivating session was an agent that could not reach its cluster at
    all, every call erroring, which then told the user the incident was
    resolved. Its calls looked ordinary; only the outcomes showed the problem.
    This signal therefore reads results, never calls, and it reads nothing but
    the objective ``failed`` bit (a non-empty ``error``). It inspects no prose:
    recognising an over-confident sentence would be a language heuristic posing
    as a runtime guarantee. It covers the *evidence* half of that failure, not
    the honesty half: a confident answer built on calls that all succeeded and
    said nothing useful is out of its reach.

Threshold: 3 consecutive failed results (clamped to at least 2)
    One error is routine and two are common (a wrong path, then the right
    one; a transient, then a retry). A third in a row with no success in
    between means the agent has gone a stretch with zero evidence, which is
    exactly when it is most tempted to narrate instead of report. Any result
    that is not a failure resets the streak and re-arms the alert, and that
    includes a result flagged ``no_op``: the tool answered, and an answer is
    evidence. The streak ignores calls, text and turn boundaries. One alert
    per streak, because under feedback a signal that re-emits on every further
    failure leaks into the prompt over and over. Below 2 the signal would
    fire on every single error, so the threshold is clamped there.

Severity: warn
    Under enforce a critical finding stops the agent, and unattended fleets
    are exactly where enforce runs. An agent collecting permission denials
    during a legitimate access probe fails several calls in a row on purpose;
    halting it there would turn the guardrail into the outage. A failure
    streak is an evidence problem, so it belongs in the operator log and,
    under feedback, in the model's next turn. Runaway *behaviour* is already
    critical through the argument-keyed loop detectors.

Failed searches (``search_failures_are_answers``, default on)
    A search that finds nothing (``grep`` exits 1) is not an error: it neither
    counts nor breaks the streak. Off is the reference behaviour.

Waits (``waits_are_polls``, default on)
    A call that waits on purpose (``sleep 3 && curl …`` while a server starts,
    ``CallView.wait``) fails until what it waits for is ready: that is a poll
    not yet answered, not a stretch without evidence. Such calls neither count
    nor break the streak; a wait that never succeeds meets the polling warning
    of ``repeated-tool-call`` instead. Off is the reference behaviour.

Command runners (``runner_threshold``, default 4)
    A streak made only of command-runner results (the policy's
    ``[command_runners]`` list) trips at 4. A runner's failure is a program's
    non-zero exit, and in coding work that is mostly an answer, not missing
    evidence: a failing test, a compiler error, the traceback of a probe
    script. Three in a row is the rhythm of setting up an environment
    (``pytest: command not found``, then ``python -m pytest``, then a script
    that imports the module by hand). In the real-session benchmark, 7 of the
    617 normally-ended sessions had a streak of exactly three runner failures
    (4 of them mini-SWE-agent debugging) and only two had four, both agents
    sending one rejected edit over and over. A single failure of a named tool
    puts the streak back on ``threshold``, so an agent whose ``kubectl_get``,
    ``get_events`` and a shell probe all fail still warns at the third; the
    reference cases, which use named tools, are unchanged.

Known false positives
    Deliberate probing (RBAC checks, existence tests that are expected to
    fail) and a dependency that is down for a while. Both cost one log line
    and one paragraph of next-turn context; the guidance asks the model to
    report what it could not check, which is the right outcome in both cases.

State: the run length, whether a named tool failed in it, whether it has
alerted, up to ``threshold`` distinct tool names (each cut to
64 bytes; real tool names are far shorter) and the last error cut to 200
bytes. The names and the error stop being updated once the streak has
alerted, since nothing else reads them.
"""

from __future__ import annotations

from typing import Annotated, Any

from msgspec import Meta, Struct

from ..canonical import truncate_middle
from .base import Finding, ResultView, Signal, SignalConfig, streak_tools, tool_list_text
from .facts import FLAG_RUNNER, FLAG_SEARCH

SIGNAL_ID = "tool-failure-streak"
ERROR_LIMIT = 200  # bytes kept of the last error message


class ToolFailureStreakConfig(SignalConfig, kw_only=True, forbid_unknown_fields=True):
    """Policy table of ``tool-failure-streak``."""

    threshold: Annotated[int, Meta(ge=2)] = 3
    """Consecutive failed results that trip the signal."""
    runner_threshold: Annotated[int, Meta(ge=2)] = 4
    """The same, for a streak made only of command-runner results (whose failures
    are mostly a program's answer: a failing test, a compiler error)."""
    search_failures_are_answers: bool = True
    """A failed search (grep finding nothing) neither counts nor breaks the streak
    (false: the reference behaviour, every failed result counts)."""
    waits_are_polls: bool = True
    """A call that waits on purpose (``sleep 3 && curl …``) neither counts nor breaks the
    streak (false: the reference behaviour, every failed result counts)."""


class ToolFailureStreakState(Struct, tag=SIGNAL_ID, gc=False, omit_defaults=True):
    """Per-session state of ``tool-failure-streak``."""

    run: int = 0
    """Consecutive failed results so far."""
    tools: tuple[str, ...] = ()
    """Distinct tool names of the streak, at most ``threshold`` of them."""
    last_error: str = ""
    """The latest error of the streak, cut to 200 bytes."""
    named: bool = False
    """A failure of the streak came from a tool that is not a command runner."""
    reported: bool = False
    """The streak has alerted."""



def _cut(text: str, limit: int) -> str:
    # len(text) * 4 bounds the UTF-8 size, so short strings skip the encode
    if len(text) * 4 > limit:
        text = truncate_middle(text, limit)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            # a lone surrogate (a library caller's): kept as "?", since the state is
            # snapshotted as UTF-8 and could not be written with it
            text = text.encode("utf-8", "replace").decode("utf-8")
    return text



class ToolFailureStreak(Signal):
    """Warns after ``threshold`` consecutive failed tool results."""

    id = SIGNAL_ID
    defers_to = ("setup-detour", "failure-loop", "tool-failure-guidance")
    needs_fingerprint = False
    needs_pairing = True  # whether the failed call was a search
    severity = "warn"
    State = ToolFailureStreakState
    Config = ToolFailureStreakConfig

    config: ToolFailureStreakConfig

    def __init__(self, config: SignalConfig | None = None) -> None:
        super().__init__(config)
        self.threshold = self.config.threshold
        self.runner_threshold = self.config.runner_threshold
        self.search_answers = self.config.search_failures_are_answers
        self.sees_waits = not self.config.waits_are_polls

    def is_latched(self, state: Any) -> bool:
        return state.reported

    def on_result(self, state: Any, result: ResultView) -> Finding | None:
        if self.exempt and result.tool in self.exempt:
            return None
        if result.failed and self.search_answers and result.call_flags & FLAG_SEARCH:
            return None  # a search that found nothing answered the question
        if not result.failed:
            if state.run:
                state.run = 0
                state.tools = ()
                state.last_error = ""
                state.named = False
                state.reported = False
            return None
        state.run += 1
        if state.reported:
            return None  # already reported this streak
        if not result.call_flags & FLAG_RUNNER:
            state.named = True
        threshold = self.threshold if state.named else self.runner_threshold
        state.tools = streak_tools(state.tools, result.tool, threshold)
        state.last_error = _cut(result.error or "", ERROR_LIMIT)
        if state.run < threshold:
            return None
        state.reported = True
        return self._finding(state)

    def _finding(self, state: Any) -> Finding:
        count = state.run
        names = tool_list_text(state.tools)
        return Finding(
            signal=self.id,
            severity=self.severity,
            scope=self.scope,
            reason=(
                f"{count} tool results in a row failed ({names}); last error: "
                f"{state.last_error!r}. The agent has no tool-verified evidence at the "
                "moment: treat any claim in its next answer that something is healthy "
                "or fixed as unconfirmed until a call succeeds."
            ),
            guidance=(
                f"Your last {count} tool calls ({names}) all returned errors, so nothing "
                "you have concluded since then has been verified. Do not describe "
                "anything as healthy, fixed or resolved. Either find a call that works, "
                "or tell the user plainly what you could not check, and stop there."
            ),
            detail={
                "count": count,
                "threshold": self.threshold if state.named else self.runner_threshold,
                "tools": [name or "unnamed tool" for name in state.tools],
                "last_error": state.last_error,
            },
        )
