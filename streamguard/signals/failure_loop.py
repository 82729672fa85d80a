"""``failure-loop``: the same failing call, re-sent with nothing changed in between.

What it catches
    An agent that runs a command, sees it fail, and runs the identical command
    again, and again, without editing, installing or building anything in
    between: the test that fails the same way because the code under it never
    changed, the edit the harness keeps rejecting, the request to a service
    that is down. Other calls may come in between (reading the error, listing a
    directory): a read cannot make an unchanged call succeed. Only a *write*
    can (``CallView.write``: the event's ``kind``, the verification name
    classification, or the command-runner heuristic of
    :mod:`~streamguard.signals.facts`, which errs towards calling a doubtful
    command a write), so a write ends every count, and so does a success of
    that call.

    This is what tells debugging from looping: edit, re-run, fail is work (each
    run tests new code); re-run, fail, re-run, fail is not. It is also the one
    rule for "identical call, identical error": the result-aware
    ``repeated-tool-call`` leaves failed results to this signal, and defers to
    it. The error text does not need to match: an unchanged call that keeps
    failing is stuck whatever the error says (time stamps and process ids make
    error texts differ from run to run).

Threshold: 5 failures of one call since the last write (``threshold``, ≥ 2)
    The first failure is information and the second may be a fair retry after a
    transient error; by the fifth identical attempt with nothing changed the
    error has been ignored four times. OpenHands' stuck detector stops at three
    identical actions each answered by an error, and the ChatCLI guard warns at
    two (``tool-failure-guidance`` keeps that earlier, advisory note). Three is
    too early for a halt on recorded coding sessions: agents that finished
    normally re-sent an edit the linter had rejected three and four times
    before fixing it (docs/detection.md), and a halt there would have stopped
    a run that was about to recover. Five is also the consecutive-repeat
    threshold, so "the same call, five times, nothing learned" means one thing
    whether the answers were results or errors.

Severity: critical, session scope
    The call is byte-for-byte the one that failed, and nothing that could change
    its outcome has happened since: the loop is proven, not inferred, like
    ``repeated-tool-call``'s. Under enforce it halts the session.

Known false positives
    Waiting for something outside the agent's reach by retrying a call (a
    service still starting, a lock held elsewhere): three failures in a row of
    the very same call with no sleep-and-check tool in between. Poll with a
    tool that waits (``wait_and_verify``), or exempt the tool. A command that
    writes in a way the heuristic misses only makes this signal quieter.

State: up to 8 failing calls since the last write (56 bits of the call key and
a 7-bit count, packed in one integer each), the latched call and the last call.
Results are paired with their calls by the watchdog (``ResultView.call_key``);
an unpaired result is not counted.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from msgspec import Meta, Struct, structs

from ..canonical import truncate_middle
from .base import CallView, Finding, ResultView, Signal, SignalConfig, config_int
from .facts import FLAG_WRITE

SIGNAL_ID = "failure-loop"
MAX_CALLS = 8
_KEY_MASK = (1 << 56) - 1
_COUNT_MASK = 0x7F


class Config(SignalConfig, kw_only=True, forbid_unknown_fields=True):
    """Policy table of ``failure-loop``."""

    threshold: Annotated[int, Meta(ge=2, le=100)] = 5
    """Failures of one unchanged call, with no write in between, that trip the signal."""


class State(Struct, tag=SIGNAL_ID, gc=False, omit_defaults=True):
    """Per-session state of ``failure-loop``."""

    failing: list[int] = []
    """Calls that failed since the last write: key56 << 7 | failures, least recent first."""
    latched: int = 0
    """key56 of the reported call (0: none). Until a write (or a success of that call)
    no other call's failures are reported: the stretch is one loop."""
    last: int = 0
    """key56 of the most recent call."""
    write_pending: bool = False
    """A write call is awaiting its result (a failed write changed nothing)."""
    tool: str = ""
    """Tool of the most recent failing call counted (alert text)."""
    args: str = ""
    """Its canonical arguments, cut to 200 bytes (alert text), kept only while counting."""


class FailureLoop(Signal):
    """Critical when one call fails ``threshold`` times with no write in between."""

    id: ClassVar[str] = SIGNAL_ID
    severity = "critical"
    scope = "session"
    State = State
    Config = Config
    needs_pairing = True
    needs_fingerprint = False
    # A cycle or a dominant call that fails unchanged is already reported by them.
    defers_to = ("repeated-tool-call", "alternating-tool-cycle", "dominant-tool-call")

    def __init__(self, config: SignalConfig | None = None) -> None:
        if config is not None and not isinstance(config, Config):
            config = Config(enabled=config.enabled, exempt_tools=list(config.exempt_tools))
        super().__init__(config)
        threshold = min(max(2, config_int(getattr(self.config, "threshold", 5), 5)), 100)
        self.config = structs.replace(self.config, threshold=threshold)
        self.threshold = threshold

    def is_latched(self, state: Any) -> bool:
        """True while a reported loop goes on: the latest call is one of its failing calls."""
        if not state.latched:
            return False
        last = state.last
        return any(entry >> 7 == last for entry in state.failing)

    def on_call(self, state: Any, call: CallView) -> Finding | None:
        if self.exempt and call.tool in self.exempt:
            return None
        if state.write_pending:
            # The write's result never came: assume it changed something.
            self._clear(state)
        if call.write:
            state.write_pending = True
        key = call.key & _KEY_MASK
        state.last = key
        if state.failing and any(entry >> 7 == key for entry in state.failing):
            state.args = truncate_middle(call.canonical.text, 200)
        return None

    def on_result(self, state: Any, result: ResultView) -> Finding | None:
        if self.exempt and result.tool in self.exempt:
            return None
        if result.call_flags & FLAG_WRITE:
            state.write_pending = False
            if not result.failed:
                self._clear(state)
                return None
        key = result.call_key & _KEY_MASK
        if not key:
            return None
        failing = state.failing
        count = 0
        for i, entry in enumerate(failing):
            if entry >> 7 == key:
                count = entry & _COUNT_MASK
                del failing[i]
                break
        if not result.failed:
            if state.latched == key:
                state.latched = 0
            return None
        count = min(count + 1, _COUNT_MASK)
        if len(failing) >= MAX_CALLS:
            del failing[0]
        failing.append(key << 7 | count)
        if count == 1:
            state.tool = result.tool
            state.args = ""
        if count < self.threshold or state.latched:
            return None  # one alert per stretch without a write: it is one behaviour
        state.latched = key
        return self._finding(state, result, count)

    @staticmethod
    def _clear(state: Any) -> None:
        state.failing = []
        state.latched = 0
        state.write_pending = False
        state.args = ""

    def _finding(self, state: Any, result: ResultView, count: int) -> Finding:
        tool = result.tool or "unnamed tool"
        what = f"{tool} ({result.action})" if result.action and result.action != tool else tool
        args = state.args or "(arguments not retained)"
        error = truncate_middle((result.error or "").strip(), 200) or "(no error text)"
        return Finding(
            signal=SIGNAL_ID,
            severity="critical",
            scope="session",
            reason=(
                f"{what} failed {count} times with identical arguments {args} and nothing was "
                f"changed in between (no write since the first failure); last error: {error}. "
                "An unchanged call against an unchanged state fails the same way: the agent is "
                "looping. Under enforce the halting controller stops the session; if this call "
                "waits for something outside the agent, exempt the tool in the policy."
            ),
            guidance=(
                f"{what} has failed {count} times with exactly the same arguments and you "
                f"changed nothing in between (last error: {error}). Running it again will fail "
                "again. Read the error and change something first (the code, the arguments, "
                "the approach), or stop and explain what is blocking you."
            ),
            detail={
                "tool": tool,
                "action": result.action,
                "count": count,
                "threshold": self.threshold,
                "args": args,
                "error": error,
            },
        )
