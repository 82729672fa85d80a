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

A user's word between failures
    The session's user saying something new since the call last failed ("ok I did: turn
    off wifi calling", ``ResultView.asked``) starts the five-failure count again: what the
    user did in their world may change what fails, as a write would. A telecom
    troubleshooting session of a blind batch, a test MMS sent after each thing the user
    did on the phone, was halted at its fifth. The same error to the eighth is still the
    across-writes rule's.

Across writes: 8 identical failures since the call last worked (``across_writes``)
    Writes do not always reach what fails. The environment-repair loop re-sends
    one install command that times out, with a mirror switch, an index update
    or a network probe in between; each of those is a write and ends the count
    above, so the loop runs until the budget does. The second rule counts, for
    each call, its failures *with the same error text* since it last
    succeeded, whatever happened in between, and trips at 8. The error must
    match (a hash of its text, unmasked): debugging changes the failure (a new
    assertion, another line, a different exception), and a changed error
    restarts the count, so edit, re-run, fail stays work for as long as the
    edits change anything. In the real-session benchmark, no normally-ended
    session had a call fail the same way more than 4 times in a row of its own
    attempts except one that was already halted by the first rule (7); judged
    loops that reach 8 include the package install timing out nine times
    between mirror edits. Eight is the first rule's five plus the three
    attempts a fair fix-and-retry gets (twice that for a failure that may pass by
    itself, retried after a pause each time: below). 0 switches the rule off;
    otherwise it must be above ``threshold``.

Severity: critical, session scope
    The call is byte-for-byte the one that failed, and nothing that could change
    its outcome has happened since: the loop is proven, not inferred, like
    ``repeated-tool-call``'s. Under enforce it halts the session.

A check the user asked for
    A failure that says what it looked for is not there (yet) — "No such file", "not
    found", a 404, a search's "No emails found." (AgentDojo's inbox watched for a reply,
    halted at its fifth check in a blind batch) — checked again after a deliberate wait in a session whose user
    asked the agent to watch ("check every 10 minutes for up to two hours":
    ``ResultView.watched`` and ``paced``) is not counted: the same "No such file" at
    each check is what waiting for a bank's late file looks like. In a blind batch
    such a wait was halted at its fifth check. A failure no wait can change (a module
    or a command missing) counts, watch or not, and so does any failure with no
    request to watch.

A retry that backs off
    A failure that says it may pass by itself (the service it reached down or busy:
    a 503 or a 429 given as a status, a rate limit or a quota spent ("429
    RESOURCE_EXHAUSTED", AWS's ``SlowDown`` and its other codes of a request rate refused),
    a connection refused, a read timed out, a database not up yet (``pg_isready``'s "no
    response"), ``curl``'s exit status of a server that did not answer, a concurrency
    limit: ``says_transient``; not a timeout of the agent's
    own, such as a page element's; read in the output when the error says only the
    exit status, and beside it when the error is a short verdict, ``Test-Migration...
    returned Result: Failed`` over "(503) Server Unavailable", halted at its fifth retest
    in a blind batch), retried after a pause since the call's last answer (a ``sleep``
    call, a wait, or ``[waits] pause_seconds`` of quiet: ``ResultView.paused``), is
    backing off, not re-sending blindly: not counted by the five-failure rule, but
    counted apart, per call until it works, to three times the threshold (fifteen),
    however the errors are worded (a request id new in each): an endless retry is halted
    all the same. The same error again and again is still a loop, for the across-writes
    rule at twice its count (sixteen) when its retries are backed off from: an API-Football fetch refused with "429 Too
    Many Requests" nine times while an upgraded plan's limit caught up, each retry after
    the Retry-After asked and a growing back-off, was halted at its eighth in a blind
    batch (it went through at the tenth). In a blind batch a Qualys fetch retried through
    503s, 409s and a time-out after sleeps of 15 s to 2 minutes, then answered, was
    halted at its fifth attempt, and in another a GA4 report retried through "429
    RESOURCE_EXHAUSTED" after 30 s to 4 minutes, then answered (the status first in
    the error was not read as one until then). A failure that asks for its own
    back-off (``"retry_after": 6``, ``Retry-After: 30``, "Please try again in 20s":
    ``retry_after_seconds``) is retried after a pause when the agent kept that long, and at
    least 5 s (an agent's own step takes a few seconds): a blind batch's OCR vendor asking 6 s between submissions, each
    kept, was halted at the fifth 429 of one file.

    Retried at once, such failures still count, towards twice the threshold (10) while
    every failure of the call's run says so: a client retries a provider's incident a
    few times before it backs off (a blind batch's number update got 503, 503, 429, 503,
    503 during Twilio's incident, with a look at the status page between, and went
    through at the sixth); a failure of any other kind in the run brings the threshold
    back to five.

Known false positives
    Waiting for something outside the agent's reach by retrying a call (a
    service still starting, a lock held elsewhere): three failures in a row of
    the very same call with no sleep-and-check tool in between. Poll with a
    tool that waits (``wait_and_verify``), put a ``sleep`` in the command (a
    call that waits on purpose is no evidence here: signals/facts.py), or
    exempt the tool. A write the classification misses makes this signal
    *louder*: an edit tool whose name is not in ``[verification] write_tools``
    turns edit, re-run, fail into re-run, fail. The defaults name the editors of
    the common harnesses (``Edit``, ``MultiEdit``, ``NotebookEdit``,
    ``replace_in_file``, ``replace``, ``str_replace``, ``apply_diff``...); add a
    runtime's own, or send ``kind: write`` on the event.

Errors that say only ``exit code 1``
    The error text identifies the failure for the across-writes rule. Where a
    runtime records only the exit status as the error and the program's output
    as the result, the output is part of the failure's identity
    (:func:`~streamguard.signals.base.failure_outcome`): a red test run that
    fails differently after an edit is a different failure.

State: up to 8 failing calls since the last write (56 bits of the call key and
a 7-bit count, packed in one integer each) and the keys of those whose failures
all said they may pass, up to 8 calls whose failures that may pass were retried after
a pause (the same packing), up to 8 calls failing since they
last worked (the same, with the error's hash), the latched calls and the last
call.
Results are paired with their calls by the watchdog (``ResultView.call_key``);
an unpaired result is not counted.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Self

from msgspec import Meta, Struct, structs

from ..canonical import truncate_middle
from .base import (
    CallView,
    Finding,
    ResultView,
    Signal,
    SignalConfig,
    failed_transiently,
    failure_text,
)
from .facts import FLAG_WRITE

SIGNAL_ID = "failure-loop"
_NOT_THERE_YET = re.compile(
    r"(?i)no such (?:file|key|object|bucket|table|resource)|does ?n[o']t exist|not (?:yet )?(?:found|available|ready)"
    r"|cannot (?:access|find|open)|\b404\b|nosuchkey"
    # a search that found nothing yet, told as a failure (AgentDojo's "No emails found.
    # Try with a different query."): the reply the user asked the agent to wait for
    r"|\bno (?:[a-z]+ ){0,2}(?:found|yet)\b|\bnothing (?:found|yet)\b"
)
_WAIT_CANNOT_CHANGE = re.compile(r"(?i)command not found|no module named|not recognized as|modulenotfound|importerror")


def _not_there_yet(result: ResultView) -> bool:
    """Whether a failure says that what it looked for is not there, as a file or an
    object awaited is until it lands, and not a failure no wait can change (read in the
    output too when the error says only the exit status)."""
    head = failure_text(result)
    return _NOT_THERE_YET.search(head) is not None and _WAIT_CANNOT_CHANGE.search(head) is None
MAX_CALLS = 8
_KEY_MASK = (1 << 56) - 1
_COUNT_MASK = 0x7F


class FailureLoopConfig(SignalConfig, kw_only=True, forbid_unknown_fields=True):
    """Policy table of ``failure-loop``."""

    threshold: Annotated[int, Meta(ge=2, le=100)] = 5
    """Failures of one unchanged call, with no write in between, that trip the signal."""
    across_writes: Annotated[int, Meta(ge=0, le=100)] = 8
    """Failures of one unchanged call with one unchanged error since it last succeeded,
    whatever was written in between, that trip the signal (0: off; otherwise above
    ``threshold``)."""

    def validate(self) -> None:
        if self.across_writes and self.across_writes <= self.threshold:
            raise ValueError(
                f"across_writes ({self.across_writes}) must be 0 or above threshold ({self.threshold})"
            )

    def resolved(self) -> Self:
        config = super().resolved()
        if config.across_writes and config.across_writes <= config.threshold:
            return structs.replace(config, across_writes=0)  # hand-built: the rule off
        return config


def _take_count(entries: list[int], key: int) -> int:
    """The count packed with ``key`` in ``entries`` (key56 << 7 | count), taken out of
    them; 0 when the key has none."""
    for i, entry in enumerate(entries):
        if entry >> 7 == key:
            del entries[i]
            return entry & _COUNT_MASK
    return 0


class FailureLoopState(Struct, tag=SIGNAL_ID, gc=False, omit_defaults=True):
    """Per-session state of ``failure-loop``."""

    failing: list[int] = []
    """Calls that failed since the last write: key56 << 7 | failures, least recent first."""
    backed_off: list[int] = []
    """Calls whose failures that may pass were retried after a pause: key56 << 7 |
    failures, since the call last worked, least recent first."""
    passing: list[int] = []
    """key56 of the calls among ``failing`` whose every failure said it may pass by itself
    (``says_transient``), least recent first: they trip at twice the threshold."""
    latched: int = 0
    """key56 of the reported call (0: none). Until a write (or a success of that call)
    no other call's failures are reported: the stretch is one loop."""
    persistent: list[tuple[int, int]] = []
    """Calls whose latest failures since they last succeeded, writes or not, came back
    with one unchanged error: (key56 << 7 | failures, the error's outcome hash), least
    recently failed first."""
    persistent_latched: int = 0
    """key56 of the call last reported (by either rule), until it succeeds: the
    across-writes rule does not report the same loop again after a write."""
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
    State = FailureLoopState
    sees_waits = False  # a wait's answers are no loop evidence (signals/facts.py)
    Config = FailureLoopConfig
    needs_pairing = True
    needs_fingerprint = False
    # A cycle or a dominant call that fails unchanged is already reported by them.
    defers_to = ("repeated-tool-call", "alternating-tool-cycle", "dominant-tool-call",
                 "setup-detour")

    config: FailureLoopConfig

    def __init__(self, config: SignalConfig | None = None) -> None:
        super().__init__(config)
        self.threshold = self.config.threshold
        self.across_writes = self.config.across_writes

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
        if (state.failing and any(entry >> 7 == key for entry in state.failing)) or (
            state.persistent and any(entry >> 7 == key for entry, _ in state.persistent)
        ):
            state.args = truncate_middle(call.canonical.text, 200)
        return None

    def on_result(self, state: Any, result: ResultView) -> Finding | None:
        if self.exempt and result.tool in self.exempt:
            return None
        if result.failed and result.watched and result.paced and _not_there_yet(result):
            # Checks the session's user asked for ("check every 10 minutes for up to two
            # hours"), each after a deliberate wait: the same "No such file" again, until
            # the bank's file lands, is what the user asked the agent to wait through.
            # Only a failure saying what it looked for is not there (yet): a failure that
            # waiting cannot change (a module missing, a command not found) is counted.
            return None
        key = result.call_key & _KEY_MASK
        if key and self.across_writes and (
            result.failed or state.persistent or state.persistent_latched == key
        ):
            # Before the write check: a write that keeps failing (an install) is counted too.
            # (A success with no failing call on record and no latch on this one changes
            # nothing there: the usual result skips the call.)
            finding = self._across_writes(state, result, key)
            if finding is not None:
                if result.call_flags & FLAG_WRITE:
                    state.write_pending = False  # a failed write changed nothing
                return finding
        if result.call_flags & FLAG_WRITE:
            state.write_pending = False
            if not result.failed:
                self._clear(state)
                return None
        if not key:
            return None
        transient = failed_transiently(result)
        if transient and result.paused:
            # A retry after a deliberate wait of a failure that may pass by itself (a
            # 503, a rate limit, a concurrency limit, a timeout): backing off, not
            # re-sending blindly. Not counted by the five-failure rule; the same error
            # again and again is still the across-writes rule's (above), and any such
            # failures, however worded, trip at three times the threshold.
            return self._backed_off(state, result, key)
        failing = state.failing
        count = _take_count(failing, key)
        if result.asked and count:
            # The user said something new since the call last failed ("ok I did: turn off
            # wifi calling"): what the user did in their world may change what fails, as a
            # write would; the count starts again.
            count = 0
        if not result.failed:
            if state.latched == key:
                state.latched = 0
            if state.passing and key in state.passing:
                state.passing.remove(key)
            if state.backed_off:
                _take_count(state.backed_off, key)  # it worked: its backed-off count ends
            return None
        count = min(count + 1, _COUNT_MASK)
        if len(failing) >= MAX_CALLS:
            del failing[0]
        failing.append(key << 7 | count)
        if count == 1:
            state.tool = result.tool
            state.args = ""
        passing = state.passing
        if transient:
            if count == 1 and key not in passing:
                if len(passing) >= MAX_CALLS:
                    del passing[0]
                passing.append(key)
        elif passing and key in passing:
            passing.remove(key)
        threshold = self.threshold
        if passing and key in passing:
            # Every failure of the run said it may pass by itself (a 503 or a 429 during a
            # provider's incident, retried at once): a fair client retries that a few
            # times; twice the threshold.
            threshold *= 2
        if count < threshold or state.latched or count <= result.asked_runs:
            # (one alert per stretch without a write: it is one behaviour; and no more
            # failures than the runs its user asked for, "run it 15 times", are a loop)
            return None
        state.latched = key
        state.persistent_latched = key
        return self._finding(state, result, count, threshold=threshold)

    def _across_writes(self, state: Any, result: ResultView, key: int) -> Finding | None:
        """The same call failing ``across_writes`` times since it last worked: the writes
        in between (edits, installs, mirror switches) are not reaching it."""
        persistent = state.persistent
        count = 0
        outcome = result.outcome
        for i, (entry, previous) in enumerate(persistent):
            if entry >> 7 == key:
                # A different error is a different failure: the write reached the call.
                count = entry & _COUNT_MASK if previous == outcome else 0
                del persistent[i]
                break
        if not result.failed:
            if state.persistent_latched == key:
                state.persistent_latched = 0
            return None
        count = min(count + 1, _COUNT_MASK)
        if len(persistent) >= MAX_CALLS:
            del persistent[0]
        persistent.append((key << 7 | count, outcome))
        threshold = self.across_writes
        if result.paused and failed_transiently(result):
            # A failure that may pass by itself, retried after a pause each time (a 429
            # whose Retry-After the agent keeps, with a growing back-off): twice as many.
            threshold *= 2
        if (
            count < threshold or state.persistent_latched == key or state.latched
            or count <= result.asked_runs
        ):
            return None
        state.persistent_latched = key
        state.latched = key
        return self._finding(state, result, count, across=True, threshold=threshold)

    def _backed_off(self, state: Any, result: ResultView, key: int) -> Finding | None:
        """A failure that may pass, retried after a pause: counted apart, per call, until
        the call works (a write does not end it: what it waits for is outside), and
        tripping at three times the threshold, however its errors are worded (a request id,
        a quota used, new in each)."""
        backed_off = state.backed_off
        count = min(_take_count(backed_off, key) + 1, _COUNT_MASK)
        if len(backed_off) >= MAX_CALLS:
            del backed_off[0]
        backed_off.append(key << 7 | count)
        threshold = 3 * self.threshold
        if count < threshold or state.latched or state.persistent_latched == key or count <= result.asked_runs:
            return None
        state.latched = key
        state.persistent_latched = key
        return self._finding(state, result, count, threshold=threshold)

    @staticmethod
    def _clear(state: Any) -> None:
        state.failing = []
        if state.passing:
            state.passing = []
        state.latched = 0
        state.write_pending = False
        state.args = ""

    def _finding(
        self, state: Any, result: ResultView, count: int, across: bool = False, threshold: int = 0
    ) -> Finding:
        tool = result.tool or "unnamed tool"
        what = f"{tool} ({result.action})" if result.action and result.action != tool else tool
        args = state.args or "(arguments not retained)"
        error = truncate_middle((result.error or "").strip(), 200) or "(no error text)"
        detail: dict[str, Any] = {
            "tool": tool,
            "action": result.action,
            "count": count,
            "threshold": threshold or (self.across_writes if across else self.threshold),
            "args": args,
            "error": error,
        }
        if across:
            detail["rule"] = "across_writes"
            reason = (
                f"{what} failed {count} times with identical arguments {args} since it last "
                f"succeeded, with writes in between that did not change that; last error: "
                f"{error}. The agent keeps changing something that does not reach this call "
                "and re-sending it: it is looping."
            )
            guidance = (
                f"{what} has failed {count} times with exactly the same arguments (last "
                f"error: {error}), and what you changed in between did not help. Running it "
                "again will fail again. Stop retrying it: find out why it fails, try a "
                "different way to reach the goal, or stop and explain what is blocking you."
            )
        else:
            reason = (
                f"{what} failed {count} times with identical arguments {args} and nothing was "
                f"changed in between (no write since the first failure); last error: {error}. "
                "An unchanged call against an unchanged state fails the same way: the agent is "
                "looping."
            )
            guidance = (
                f"{what} has failed {count} times with exactly the same arguments and you "
                f"changed nothing in between (last error: {error}). Running it again will fail "
                "again. Read the error and change something first (the code, the arguments, "
                "the approach), or stop and explain what is blocking you."
            )
        return Finding(
            signal=SIGNAL_ID,
            severity="critical",
            scope="session",
            reason=(
                f"{reason} Under enforce the halting controller stops the session; if this call "
                "waits for something outside the agent, exempt the tool in the policy."
            ),
            guidance=guidance,
            detail=detail,
        )
