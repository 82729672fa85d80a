"""``no-new-state``: successful results keep returning data the turn already had.

What it catches
    The reworded loop. Every call-keyed detector shares one blind spot: a
    model that rephrases its arguments produces a new key each time while
    asking the same question, and a tool that never sets ``no_op`` gives the
    no-op detector nothing to read either (a ``read_file`` returning the same
    bytes for the sixth time did exactly what it was asked). This signal
    compares the *answers* instead of the questions: two calls that ask the
    same thing in different words get the same payload back, so a fingerprint
    of the payload catches the rewording without understanding it — no
    semantic comparison, no second model.

    It keys on the payload, not on the tool: the fingerprint deliberately
    leaves the tool name out, so a model that rewords its way from one tool
    into another and keeps receiving the same bytes is still seen.

Rules, per successful result
    * failed and ``no_op`` results are skipped: they neither count nor reset.
      They belong to ``tool-failure-streak`` and ``no-op-streak``, and letting
      them reset the run would let a stalled agent that errors once every few
      calls stay under the threshold forever;
    * ``wait_and_verify`` (and any tool in ``exempt_tools``) is skipped
      outright: its contract is "call me until the state changes" and it bounds
      its own waiting, so flagging it would flag the cure for hand-rolled polls;
    * a payload that could not be fingerprinted (``fingerprint == 0``) resets
      the run: absence of evidence is not evidence of a stall, and every such
      reset costs recall, never precision — the right direction for a signal
      whose alert becomes prompt text;
    * a payload not seen before in this turn is remembered and resets the run
      (new information, which also re-arms the alert);
    * a write tool's acknowledgement seen before (``is_write_acknowledgement``:
      ``ok``, ``{"ok": true}``) neither counts nor resets: it says the write
      worked, and seven writes that each worked are no stall;
    * a payload seen before extends the run; the run reaching the threshold
      raises one alert, and nothing more until the run is broken.

Threshold: 6 already-seen results in a row (clamped to at least 3)
    It sits between the no-op streak's 3 and the name detector's 15 for the
    reason both of those give: a no-op is a confession and needs no margin, a
    tool name is nearly no evidence and needs a lot, and an identical payload
    is strong evidence with one confound — polling (below). Note what is
    counted: the first sighting of a payload is news, not repetition, so a
    trip needs seven results, one fresh and six repeats. Below 3 the signal
    would fire on an ordinary read, check, re-read sequence.

Memory: 64 distinct fingerprints per turn (raised to at least the threshold)
    A first-in, first-out record of fingerprints. Seeing a payload again does
    not move it to the back: the claim is "this turn already had it", and once
    64 newer distinct payloads have pushed it out the signal honestly no
    longer knows that, so it reads as new once. The bound is what keeps
    per-session state small. The record is one ``bytearray`` of packed 8-byte
    little-endian fingerprints rather than a list of integers: 64 entries take
    about 570 bytes in memory instead of about 2.9 KB (each 64-bit integer is a
    separate object), serialise to 512 bytes, and a miss — the common case,
    since most results are new — is one C-level substring search instead of
    64 Python comparisons. :func:`remembered` unpacks it for inspection.

    Memory is scoped to the turn, the one piece of watchdog state that is not
    session-lived. Every other signal counts a consecutive run, which limits
    itself; a remembered payload does not. Without the boundary a daemon woken
    every few minutes to read the same unchanged resources would be told it was
    stalling on every wake after the first, although it is monitoring
    correctly. A loop that survives a turn boundary is re-driven work, which
    the cost ceiling already covers. A turn refused because the session is
    halted is not a boundary (it never ran), which the watchdog enforces by not
    calling ``on_turn_start`` for it.

Severity: warn
    A repeated answer cannot tell a stalled agent from one polling a system
    that has not converged yet, and on infrastructure work polling is routine.
    Under feedback the guidance still reaches the model, the only party that
    can stop making the call, and it names ``wait_and_verify`` as the bounded
    alternative.

Deference
    ``defers_to`` lists the three argument-keyed loop detectors. When one of
    them is latched, the agent is re-issuing the same call, and the same call
    naturally returns the same payload: the stall is that loop seen from the
    result side, already reported by a stronger, critical alert. The watchdog
    checks those latches (they run earlier in the fan-out) and keeps this
    signal quiet meanwhile. It does not defer to ``no-op-streak`` or
    ``tool-failure-streak``: their results are skipped here anyway.

Known false positives
    A hand-rolled poll of a resource that has not changed yet (use
    ``wait_and_verify``, or exempt the tool), and a deliberate re-read of an
    unchanged file after editing something else. Both cost a log line.
"""

from __future__ import annotations

from typing import Annotated, Any, Self

from msgspec import Meta, Struct, structs

from ..canonical import truncate_middle
from .base import (
    Finding,
    ResultView,
    Signal,
    SignalConfig,
    is_write_acknowledgement,
)
from .facts import FLAG_WAITS_FIRST

SIGNAL_ID = "no-new-state"
WAIT_TOOL = "wait_and_verify"
_WIDTH = 8  # bytes per packed fingerprint
_MASK = (1 << 64) - 1


class NoNewStateConfig(SignalConfig, kw_only=True, forbid_unknown_fields=True):
    """Policy table of ``no-new-state``."""

    threshold: Annotated[int, Meta(ge=3)] = 6
    """Consecutive already-seen results that trip the signal."""
    memory: Annotated[int, Meta(ge=3)] = 64
    """Distinct payload fingerprints remembered per turn (raised to at least ``threshold``)."""

    def resolved(self) -> Self:
        config = super().resolved()
        if config.memory < config.threshold:  # accepted from a policy too: raised
            return structs.replace(config, memory=config.threshold)
        return config


class NoNewStateState(Struct, tag=SIGNAL_ID, gc=False, omit_defaults=True):
    """Per-session state of ``no-new-state``."""

    run: int = 0
    """Consecutive successful results whose payload this turn had already seen."""
    seen: bytearray = bytearray()
    """This turn's distinct fingerprints, 8 bytes each (little-endian), oldest first."""



def remembered(state: NoNewStateState) -> list[int]:
    """The fingerprints ``state`` remembers, oldest first."""
    seen = state.seen
    return [
        int.from_bytes(seen[i : i + _WIDTH], "little") for i in range(0, len(seen), _WIDTH)
    ]


class NoNewState(Signal):
    """Warns after ``threshold`` successful results in a row whose payload the turn already had."""

    id = SIGNAL_ID
    severity = "warn"
    State = NoNewStateState
    sees_waits = False  # a wait's answers are no loop evidence (signals/facts.py)
    needs_pairing = True  # call_flags: a write's acknowledgement is no data
    needs_result_size = True
    Config = NoNewStateConfig
    defers_to = (
        "failure-loop",
        "repeated-tool-call",
        "alternating-tool-cycle",
        "dominant-tool-call",
        "long-loop",
        "result-stall",
    )

    config: NoNewStateConfig

    def __init__(self, config: SignalConfig | None = None) -> None:
        super().__init__(config)
        self.threshold, self.memory = self.config.threshold, self.config.memory
        self._keep = (self.memory - 1) * _WIDTH  # bytes that may stay before one more entry
        self.exempt = self.exempt | {WAIT_TOOL}

    def is_latched(self, state: Any) -> bool:
        return state.run >= self.threshold

    def on_result(self, state: Any, result: ResultView) -> Finding | None:
        if result.failed or result.no_op or result.tool in self.exempt:
            return None
        if result.call_flags & FLAG_WAITS_FIRST:
            return None  # a read after a wait of its own (`sleep 30; gh run view`): a wait's
        fingerprint = result.fingerprint
        if not fingerprint:
            state.run = 0
            return None
        key = (fingerprint & _MASK).to_bytes(_WIDTH, "little")
        seen = state.seen
        at = seen.find(key)  # (find_entry, inline: every result's lookup)
        while at > 0 and at % _WIDTH:
            at = seen.find(key, at + 1)
        if at >= 0 and is_write_acknowledgement(result):
            return None  # a write tool's bare acknowledgement ("ok") is no data: neither
        if at >= 0:
            state.run += 1
            if state.run == self.threshold:
                return self._finding(state, result.tool)
            return None
        excess = len(seen) - self._keep
        if excess > 0:
            del seen[:excess]
        seen.extend(key)
        if state.run:  # a state field's store costs several times the test
            state.run = 0
        return None

    def on_turn_start(self, state: Any) -> Finding | None:
        state.run = 0
        state.seen.clear()
        return None

    def _finding(self, state: Any, tool: str) -> Finding:
        count = state.run
        label = truncate_middle(tool, 200) if tool else "unnamed tool"
        return Finding(
            signal=self.id,
            severity=self.severity,
            scope=self.scope,
            reason=(
                f"{count} tool results in a row returned data this turn had already "
                f"seen (latest from {label!r}). Reworded calls escape the argument-keyed "
                "detectors, but the answers stayed the same: a stall, or a poll of "
                "something that has not changed yet. Polls should use "
                f"{WAIT_TOOL}; if this tool is polled on purpose, exempt it in the policy."
            ),
            guidance=(
                f"Your last {count} results (the latest from {label}) held nothing you "
                "had not already received in this turn. Asking again in other words "
                "will not produce a different answer. If what you are looking for is "
                "not there, say so; otherwise get it from a different source. If you "
                f"are waiting for something to change, call {WAIT_TOOL} instead of "
                "reading it again."
            ),
            detail={
                "count": count,
                "threshold": self.threshold,
                "memory": self.memory,
                "remembered": len(state.seen) // _WIDTH,
                "tool": label,
            },
        )
