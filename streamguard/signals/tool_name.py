"""``repeated-tool-name``: one tool, called over and over, whatever the arguments.

What it catches
    The loop that defeats every argument-keyed detector: the agent calls one
    tool again and again with model-written free text in its arguments (a
    summary, a note, a goal) and rewords it every time, so each call hashes
    differently while doing the same nothing. Only the tool name is compared;
    only a call to a different tool breaks the run. Assistant text, results
    and turn boundaries do not, so a daemon polling one tool across wakes is
    warned once every ``threshold`` consecutive calls.

Threshold
    15 consecutive calls (``threshold``, clamped to at least 2), one alert per
    run. The number is set by the severity: with no argument evidence the
    signal cannot tell a loop from a sweep, so it must clear ordinary sweeps.
    It sits above the 12 distinct reads that ``dominant-tool-call`` treats as
    legitimate work, with margin, and still fires well before a grind reaches
    20. It is a backstop, not tuned to catch a nine-call reworded loop; that
    belongs at the tool layer (a tool that cannot act twice should say so, which
    ``no-op-streak`` reads).

    Deference (``defer_run``, default 5, the repeat threshold): the signal
    tracks the trailing stretch of its run whose cleaned arguments are
    identical. While that stretch is at least ``defer_run`` long the run is
    ``repeated-tool-call``'s (critical, and able to prove the calls were
    redundant), so this signal stays silent without marking the run as
    reported. 0 switches the deference off.

Severity
    Warn, never critical: a long same-name run is a loop *or* a sweep, and a
    guard that halted every agent in the middle of a long list would itself
    be the incident. The warning still reaches the operator and, under
    feedback, the model, which is the party that can stop.

Command runners (``by_action``, default on; off is the reference)
    For a tool whose name carries no meaning (``bash``, ``python``,
    ``str_replace_editor``: the ``[command_runners]`` list) the name compared
    is the call's action, ``bash: grep`` or ``str_replace_editor: view a.py``.
    Keyed on the tool name, a coding agent with one shell tool is one endless
    run and warned in every session (every mini-SWE-agent session of the
    development corpus was); keyed on the action, fifteen ``grep`` calls in a
    row still warn. A runner call whose action cannot be read (free code for an
    interpreter) breaks the run and is not counted: the rule stands down
    rather than guess.

Known false positives
    A genuine sweep longer than the threshold with no other tool in between
    (reading twenty files in a row). The price is one alert line and a short
    note to the model, which tells a sweeping agent to continue; nothing is
    stopped. Workloads with long single-tool sweeps can raise the threshold or
    exempt the tool in the policy.
"""

from __future__ import annotations

from sys import intern
from typing import Annotated, Any

from msgspec import Meta, Struct
from msgspec.structs import replace

from .base import CallView, Finding, Signal, SignalConfig

SIGNAL_ID = "repeated-tool-name"



class RepeatedToolNameConfig(SignalConfig, kw_only=True, forbid_unknown_fields=True):
    """Policy table of ``repeated-tool-name``."""

    threshold: Annotated[int, Meta(ge=2)] = 15
    """Consecutive same-name calls that trip the signal."""
    defer_run: Annotated[int, Meta(ge=0)] = 5
    """Stay silent while the run's args-identical tail is this long (0: never)."""
    by_action: bool = True
    """Command runners (``[command_runners]``) are compared by action, not by name
    (false: the reference behaviour, every call of one runner is one name)."""


class RepeatedToolNameState(Struct, tag=SIGNAL_ID, gc=False, omit_defaults=True):
    """Per-session state: the name run, its args-identical tail and the latch."""

    run: int = 0
    """Consecutive calls to ``tool``."""
    same: int = 0
    """Length of the run's trailing stretch with identical cleaned arguments."""
    latched: bool = False
    """The current run has already been reported."""
    tool: str = ""
    last_key: int = 0
    """Call key of the most recent call."""


class RepeatedToolName(Signal):
    """Trips on ``threshold`` consecutive calls to the same tool, whatever the arguments."""

    id = SIGNAL_ID
    # A same-name run that is also a latched cycle or dominant loop is their behaviour.
    defers_to = ("alternating-tool-cycle", "dominant-tool-call", "long-loop", "result-stall",
                 "near-duplicate-calls")
    severity = "warn"
    scope = "session"
    Config = RepeatedToolNameConfig
    State = RepeatedToolNameState

    config: RepeatedToolNameConfig

    def __init__(self, config: SignalConfig | None = None) -> None:
        super().__init__(config)
        cfg = self.config
        self.threshold: int = cfg.threshold
        self.defer_run: int = cfg.defer_run
        self.by_action: bool = cfg.by_action

    def is_latched(self, state: Any) -> bool:
        return bool(state.latched)

    def on_call(self, state: Any, call: CallView) -> Finding | None:
        if self.exempt and call.tool in self.exempt:
            return None
        key = call.key
        if call.runner and self.by_action:
            if not call.action:
                # What this call does cannot be read: stand down, and let it break
                # the run rather than guess that it continues one.
                state.run = state.same = 0
                state.tool = ""
                state.latched = False
                state.last_key = key
                return None
            name = f"{call.tool}: {call.action}"
        else:
            name = call.tool
        if state.run and name == state.tool:
            state.run += 1
            state.same = state.same + 1 if key == state.last_key else 1
        else:
            state.tool = intern(name) if len(name) <= 64 else name
            # Stores only where a value changes (a state field's store costs several
            # times the test): a session of distinct tools restarts a run of 1 each call.
            if state.run != 1:
                state.run = 1
            if state.same != 1:
                state.same = 1
            if state.latched:
                state.latched = False
        state.last_key = key
        if state.run < self.threshold or state.latched:
            return None
        if self.defer_run and state.same >= self.defer_run:
            return None  # repeated-tool-call's run; the latch stays as it is
        state.latched = True
        return self._finding(name, state.run)

    def preview_state(self, state: Any) -> Struct:
        return replace(state, latched=False)

    def _finding(self, tool: str, count: int) -> Finding:
        reason = (
            f"{tool} was called {count} times in a row with no other tool in between. "
            "Arguments are not compared, so this is either a loop whose free-text arguments "
            "are reworded on every call (which the argument-keyed checks cannot see) or a "
            "legitimate sweep over many items. This alert never halts the agent. If it is a "
            "sweep, exempt the tool or raise the threshold in the policy; if it is a loop, "
            "stop the agent through the halting controller."
        )
        guidance = (
            f"You have called {tool} {count} times in a row and nothing else. If these calls "
            "walk through a list of items, continue, and state what the list is and how much "
            "of it remains. If you are retrying one thing in new words, stop: a new phrasing "
            "of the request moves nothing forward. Explain what you are trying to achieve and "
            "what is in the way."
        )
        return Finding(
            signal=SIGNAL_ID,
            severity="warn",
            scope="session",
            reason=reason,
            guidance=guidance,
            detail={"tool": tool, "count": count, "threshold": self.threshold},
        )
