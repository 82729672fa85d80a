"""tool-failure-guidance: one tool keeps failing, and the model needs to be told how to stop.

**What it catches.** Two shapes of retrying a failing tool, after the ChatCLI
tool guard:

* *same signature*: the exact same call (tool plus whitespace-normalised
  arguments) failed ``warn_after_same_signature`` times (default 2) since the
  tool last succeeded. A call that failed unchanged will fail unchanged again;
* *argument drift*: the tool failed ``warn_after_tool_failures`` times (default
  3) since it last succeeded, with arguments that changed along the way. Each
  retry is a new signature, so no identical-call detector sees it.

A tool's streak is broken only by a success *of that tool* (results of other
tools do not break it: reading the docs between two failed attempts is still
retrying), and it survives turn boundaries, like the cross-tool
``tool-failure-streak``. A success clears the tool's streak and every signature
counted for it, and re-arms both rules. Each signature warns once per streak;
the drift guidance fires exactly when the streak reaches its threshold and only
if the failures spanned more than one signature (identical failures belong to
the same-signature rule). One streak can therefore produce a same-signature
warning and later a drift warning when the model starts varying the arguments.

**Thresholds** (the reference defaults). Retrying an identical call once is a
fair reaction to what may have been a transient; failing identically a second
time means the error was not read, so 2. Varying the arguments deserves one more
try, so 3. Non-positive values fall back to these defaults, as in the reference;
a drift threshold of 1 is raised to 2, since a single failure is a single
signature and could never count as drift. The signature is built on the shared
canonical arguments (sorted keys, cleaned paths, policy noise fields dropped),
with runs of whitespace inside values collapsed.

**Guidance.** It names the tool, quotes the last error (cut to 200 bytes) so the
advice is concrete, and says what to do instead: do not repeat the identical
call, change the arguments or the route; or, for drift, step back and rethink
instead of trying yet another variation.

**Severity: warn**, on purpose. A failing tool is not yet a runaway: probing for
a file, a retry after a transient error, a test that is expected to fail first
all look like this. The reference guard is advisory by design (it only adds
feedback), and the watchdog's other failure signal is warn for the same reason.

**Opt-in halt.** ``halt_after_same_signature`` (default 0, off): when one
signature has failed that many times the finding is *critical* (once per
signature streak; it takes precedence over the same-signature warning), so
enforce mode acts on it. Its scope is ``turn``: the reference halt ends the
agent's run and hands control back to the user, which is a turn cut here, not a
session halt that needs an operator; three cut turns in a row still escalate to
a session halt.

**Matching results to calls.** Results carry no arguments. A result is matched
to its call by ``call_id`` when both have one, else to the most recent call of
that tool without an id; unmatched results count for the tool streak only. The
pending map holds at most 16 calls (oldest evicted; a result removes its call)
as their ids (at most 64 characters kept) and 24-bit signatures, and per session
at most 4 failing tools and 8 failing signatures are tracked (least recently
failed evicted), each packed into one integer.

**Deference.** ``tool-failure-streak`` (three failed results in a row, any tools)
defers to this signal. :meth:`ToolFailureGuidance.is_latched` is true while the
current run of consecutive failed results is all one tool *and* this signal has
already spoken during that tool's streak, so a run of failures of one tool
yields one alert. A run that mixes tools is not this signal's behaviour and the
streak reports it. The thresholds keep this true as long as
``warn_after_tool_failures`` does not exceed the streak's threshold.

**Changes to the reference, all default on.** ``reset_on_write``: a write call
(``CallView.write``: declared ``kind``, name classification, or the command-runner
heuristic) clears every streak. Edit, re-run the failing test, fail again is
debugging: the re-run tests new code, so it is not a retry, and the reference
warned on it at the second identical run. ``waits_are_polls``: a call that waits on
purpose (``sleep 3 && curl …`` while a server starts; ``CallView.wait``) is not read
at all: it fails until what it waits for is ready, which is what a poll is for (a
hand-written server-start trace warned at its second wait). ``search_failures_are_answers``: a failed
search (``grep`` exiting 1, ``find_file`` finding nothing) is skipped: nothing was
wrong with the call, the answer is "not there". For command runners the one-tool
streak is kept per action (``bash: pytest``), not per tool, so three different
commands failing are not one tool failing with drifting arguments.

**Known false positives.** Tools whose failures are answers (an existence check
returning an error for "not found"; exempt them), and expected-to-fail test runs
while fixing code (the drift rule fires on the third red run with different
arguments; the advice is then merely redundant).
"""

from __future__ import annotations

import zlib
from typing import Annotated, ClassVar, Self

from msgspec import Meta, Struct, structs

from ..canonical import stable_hash, truncate_middle
from ..events import Scope, Severity
from .base import (
    CallView,
    Finding,
    ResultView,
    Signal,
    SignalConfig,
    config_int,
    field_default,
    within_bounds,
)
from .facts import FLAG_RUNNER, FLAG_SEARCH

SIGNAL_ID = "tool-failure-guidance"

MAX_TOOLS = 4
MAX_SIGNATURES = 8
MAX_PENDING = 16

# Every packed integer stays below 2**63 so any snapshot codec can carry it.
_M16, _M24 = 0xFFFF, 0xFFFFFF
# Tool entry:      tool32 << 20 | failures << 1 | alerted
_FAILS_MAX = (1 << 19) - 1
# Signature entry: sig24 << 36 | tool16 << 20 | failures << 2 | halted << 1 | warned
_SIG_COUNT_MAX = (1 << 18) - 1
# Pending call:    call id (or tool name) in pending_ids; sig24 in pending_sigs, negated
#                  for a call without an id (keyed by its tool name)
_NAME_MAX = 64
_MIXED = -1



def _crc(text: str) -> int:
    try:
        return zlib.crc32(text.encode())
    except UnicodeEncodeError:  # a lone surrogate
        return zlib.crc32(text.encode(errors="surrogatepass"))


def identity(result: ResultView, sig: int) -> str:
    """Whose streak a result counts for: the tool, or a command runner's action.

    A runner call whose action cannot be read counts for its own signature only,
    so the drift rule (one tool, changing arguments) stands down for it.
    """
    if not result.call_flags & FLAG_RUNNER:
        return result.tool
    if result.action:
        return f"{result.tool}: {result.action}"
    return f"{result.tool}: #{sig}"


SIGNATURE_TEXT_LIMIT = 4096
"""Longest canonical text normalised for a signature; a longer call is known by its key."""


def signature(tool: str, canonical_text: str) -> int:
    """A stable 24-bit identity of a call: tool plus whitespace-normalised arguments.

    Never 0 (0 means "unknown signature").
    """
    normalised = " ".join(canonical_text.split())
    return (stable_hash(tool, normalised) & _M24) or 1


class ToolFailureGuidanceConfig(SignalConfig, kw_only=True, forbid_unknown_fields=True):
    warn_after_tool_failures: Annotated[int, Meta(ge=2)] = 3
    warn_after_same_signature: Annotated[int, Meta(ge=1)] = 2
    halt_after_same_signature: Annotated[int, Meta(ge=0)] = 0
    reset_on_write: bool = True
    """A write call clears every streak: edit, re-run, fail again is debugging (false:
    the reference behaviour, where only a success of the tool clears its streak)."""
    search_failures_are_answers: bool = True
    """A failed search (grep finding nothing) is neither a failure nor a success here."""
    waits_are_polls: bool = True
    """A call that waits on purpose (``sleep 3 && curl …``) is not read: it fails until
    what it waits for is ready (false: the reference behaviour, it counts like any call)."""

    def resolved(self) -> Self:
        # The reference replaces a non-positive threshold by its default (the bounds
        # would make it the lowest value instead). A drift threshold of 1 could never
        # fire (one failure is one signature): its bound raises it to 2.
        fallback = {}
        for name in ("warn_after_tool_failures", "warn_after_same_signature"):
            default = field_default(type(self), name)
            if config_int(getattr(self, name), default) <= 0:
                fallback[name] = default
        return within_bounds(structs.replace(self, **fallback) if fallback else self)


class ToolFailureGuidanceState(Struct, tag=SIGNAL_ID, gc=False, omit_defaults=True):
    tools: list[int] | None = None
    """Failing tools, least recently failed first (packed, at most MAX_TOOLS)."""
    sigs: list[int] | None = None
    """Failing signatures, least recently failed first (packed, at most MAX_SIGNATURES)."""
    pending_ids: list[str] | None = None
    """Calls awaiting their result, oldest first: the call id, or the tool name for a
    call without one (last 64 characters; at most MAX_PENDING)."""
    pending_sigs: list[int] | None = None
    """Their signatures, parallel to ``pending_ids``; negative for a call without an id."""
    run: int = 0
    """Current run of consecutive failed results: 0 none, -1 several tools, else tool32 + 1."""



class ToolFailureGuidance(Signal):
    id: ClassVar[str] = SIGNAL_ID
    severity: ClassVar[Severity] = "warn"
    scope: ClassVar[Scope] = "session"
    State = ToolFailureGuidanceState
    Config = ToolFailureGuidanceConfig
    needs_fingerprint = False  # reads only the failed bit and the error
    needs_pairing = True  # the call's action, write and search facts

    config: ToolFailureGuidanceConfig

    def __init__(self, config: SignalConfig | None = None) -> None:
        super().__init__(config)
        cfg = self.config
        self.warn_after_tool_failures = cfg.warn_after_tool_failures
        self.warn_after_same_signature = cfg.warn_after_same_signature
        self.halt_after_same_signature = cfg.halt_after_same_signature
        self.reset_on_write = cfg.reset_on_write
        self.sees_waits = not cfg.waits_are_polls
        self.search_answers = cfg.search_failures_are_answers

    # ------------------------------------------------------------------ calls

    def on_call(self, state: ToolFailureGuidanceState, call: CallView) -> Finding | None:
        tool = call.tool
        if tool in self.exempt:
            return None
        if call.write and self.reset_on_write and (state.tools or state.sigs):
            # Something changed: the next failure is a new attempt, not a retry.
            state.tools = state.sigs = None
        text = call.canonical.text
        # Canonical JSON has no whitespace between tokens and escapes control
        # characters, so only runs of spaces (or non-ASCII spaces) inside strings
        # can change under normalisation; otherwise the shared call key serves.
        if (
            len(text) <= SIGNATURE_TEXT_LIMIT
            and ("  " in text or not text.isascii())
            and (normalised := " ".join(text.split())) != text
        ):
            sig = (stable_hash(tool, normalised) & _M24) or 1  # signature(), normalised once
        else:
            sig = (call.key & _M24) or 1
        ids, sigs = state.pending_ids, state.pending_sigs
        if ids is None or sigs is None:  # created on demand: most sessions hold none
            ids, sigs = state.pending_ids, state.pending_sigs = [], []
        call_id = call.call_id
        if call_id:
            key = call_id if len(call_id) <= _NAME_MAX else call_id[-_NAME_MAX:]
        else:
            # The newest id-less call of a tool stands for it: replace the older one.
            key = tool if len(tool) <= _NAME_MAX else tool[-_NAME_MAX:]
            sig = -sig
            if key in ids:
                i = ids.index(key)
                if sigs[i] < 0:
                    del ids[i], sigs[i]
        if len(ids) >= MAX_PENDING:
            del ids[0], sigs[0]
        ids.append(key)
        sigs.append(sig)
        return None

    # ------------------------------------------------------------------ results

    def on_result(self, state: ToolFailureGuidanceState, result: ResultView) -> Finding | None:
        tool = result.tool
        if tool in self.exempt:
            return None
        # The signature of the call this result answers (0: unknown).
        sig = 0
        ids = state.pending_ids
        if ids:
            sigs = state.pending_sigs
            assert sigs is not None  # kept parallel to pending_ids
            call_id = result.call_id
            i = -1
            if call_id:
                key = call_id if len(call_id) <= _NAME_MAX else call_id[-_NAME_MAX:]
                if key in ids and sigs[j := ids.index(key)] > 0:
                    i = j
            if i < 0:
                key = tool if len(tool) <= _NAME_MAX else tool[-_NAME_MAX:]
                if key in ids and sigs[j := ids.index(key)] < 0:
                    i = j
            if i >= 0:
                del ids[i]
                sig = abs(sigs.pop(i))
                if not ids:
                    state.pending_ids = state.pending_sigs = None
        if result.failed and self.search_answers and result.call_flags & FLAG_SEARCH:
            return None  # a search that found nothing answered the question
        if not result.failed:
            if state.run:  # a state field's store costs several times the test
                state.run = 0
            if state.tools:  # the label only matters to a tool with failures on record
                self._clear_tool(state, _crc(identity(result, sig)))
            return None

        label = identity(result, sig)
        tool32 = _crc(label)
        run = state.run
        if run == 0:
            state.run = tool32 + 1
        elif run != tool32 + 1:
            state.run = _MIXED

        tools = state.tools
        if tools is None:
            tools = state.tools = []
        failures, alerted = 1, 0
        for i, entry in enumerate(tools):
            if entry >> 20 == tool32:
                del tools[i]
                failures = min(((entry >> 1) & _FAILS_MAX) + 1, _FAILS_MAX)
                alerted = entry & 1
                break
        else:
            if len(tools) >= MAX_TOOLS:
                self._drop_signatures(state, (tools.pop(0) >> 20) & _M16)

        same, warned, halted = 0, 0, 0
        tool16 = tool32 & _M16
        if sig:
            sigs = state.sigs
            if sigs is None:
                sigs = state.sigs = []
            ident = (sig << 16) | tool16
            for i, entry in enumerate(sigs):
                if entry >> 20 == ident:
                    del sigs[i]
                    same = min(((entry >> 2) & _SIG_COUNT_MAX) + 1, _SIG_COUNT_MAX)
                    warned = entry & 1
                    halted = (entry >> 1) & 1
                    break
            else:
                if len(sigs) >= MAX_SIGNATURES:
                    del sigs[0]
                same = 1

        finding: Finding | None = None
        halt_n = self.halt_after_same_signature
        if halt_n and same >= halt_n:
            if not halted:
                halted = 1
                finding = self._finding("halt", result, failures, same, label)
        elif same >= self.warn_after_same_signature and not warned:
            warned = 1
            finding = self._finding("same_signature", result, failures, same, label)
        elif failures == self.warn_after_tool_failures and same < failures:
            finding = self._finding("argument_drift", result, failures, same, label)
        if finding is not None:
            alerted = 1

        tools.append((tool32 << 20) | (failures << 1) | alerted)
        if sig:
            assert sigs is not None  # made above for a result with a signature
            sigs.append(
                (sig << 36) | (tool16 << 20) | (same << 2) | (halted << 1) | warned
            )
        return finding

    def _clear_tool(self, state: ToolFailureGuidanceState, tool32: int) -> None:
        tools = state.tools or []
        for i, entry in enumerate(tools):
            if entry >> 20 == tool32:
                del tools[i]
                self._drop_signatures(state, tool32 & _M16)
                if not tools:
                    state.tools = None
                return

    @staticmethod
    def _drop_signatures(state: ToolFailureGuidanceState, tool16: int) -> None:
        sigs = state.sigs
        if sigs:
            sigs[:] = [e for e in sigs if (e >> 20) & _M16 != tool16]
            if not sigs:
                state.sigs = None

    def is_latched(self, state: ToolFailureGuidanceState) -> bool:
        """True while the current failure run is all one tool this signal already spoke about."""
        run = state.run
        if run <= 0:
            return False
        tool32 = run - 1
        for entry in state.tools or ():
            if entry >> 20 == tool32:
                return bool(entry & 1)
        return False

    # ------------------------------------------------------------------ text

    def _finding(
        self, rule: str, result: ResultView, failures: int, same: int, label: str
    ) -> Finding:
        tool = label or "unnamed tool"
        error = truncate_middle((result.error or "").strip(), 200) or "(no error text)"
        if rule == "halt":
            reason = (
                f"tool {tool!r} failed {same} times with identical arguments "
                f"(halt_after_same_signature={self.halt_after_same_signature}); last error: "
                f"{error}. The agent is retrying a call that cannot succeed unchanged; under "
                "enforce this cuts the turn in flight (the session stays available)."
            )
            guidance = (
                f"{tool} has now failed {same} times with exactly the same arguments "
                f"(last error: {error}). This is a loop: do not issue that call again as it "
                "is. Tell the user what failed, quote the error, and ask for the information "
                "or access you are missing."
            )
            severity: Severity = "critical"
            scope: Scope = "turn"
        elif rule == "same_signature":
            reason = (
                f"tool {tool!r} failed {same} times with identical arguments since it last "
                f"succeeded; last error: {error}. Advisory: the agent is retrying a call that "
                "cannot succeed unchanged. Set halt_after_same_signature in the policy to stop "
                "such retries automatically, or exempt the tool if its failures are answers."
            )
            guidance = (
                f"{tool} has failed {same} times with exactly the same arguments (last error: "
                f"{error}). Running the identical call again will fail the same way. Read the "
                "error, then change the arguments or reach the goal another way."
            )
            severity = "warn"
            scope = "session"
        else:
            reason = (
                f"tool {tool!r} failed {failures} times in a row with varying arguments "
                f"(argument drift); last error: {error}. Advisory: the agent keeps retrying "
                "variations instead of changing approach. Exempt the tool in the policy if its "
                "failures are expected probes."
            )
            guidance = (
                f"{tool} has failed {failures} times in a row, each time with slightly "
                f"different arguments (last error: {error}). Another variation is unlikely to "
                "work. Step back: check what the error says is wrong, whether a precondition "
                "is missing or whether this is the right tool, and change the approach."
            )
            severity = "warn"
            scope = "session"
        return Finding(
            signal=SIGNAL_ID,
            severity=severity,
            scope=scope,
            reason=reason,
            guidance=guidance,
            detail={
                "tool": tool,
                "rule": rule,
                "failures": failures,
                "same_signature_failures": same,
                "error": error,
            },
        )
