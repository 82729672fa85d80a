"""``long-loop``: the session keeps replaying a stretch of calls it has already made.

What it catches
    The loop the short detectors are blind to: a sequence of five to twenty
    different calls gone through in the same order again and again (open the
    file, search it, run the test, read the log, open the file...), perhaps with
    a new call wedged in now and then. ``alternating-tool-cycle`` only scans
    periods up to 4 and needs clean laps; ``dominant-tool-call`` needs one call to
    fill two thirds of a window. This signal asks a question that does not
    depend on the period: *how much of what the agent just did had it already
    done, in the same order, with the same outcome?*

    Each call becomes an element: its call key combined with the outcome of its
    result (payload fingerprint, error text hash, or nothing when no result is
    known). A step is a *replay* when the pair (previous element, this element)
    was already seen in this session. The signal keeps the last ``window`` steps
    as a bit mask and trips when ``threshold`` of them are replays. Pairs rather
    than single calls are what separates a loop from ordinary re-use: re-running
    one test after each edit repeats the test call, but each edit is new, so
    neither the pair (edit, test) nor (test, edit) comes back. Outcomes are what
    separates a loop from paging or polling: the same ``scroll_down`` returning a
    new page every time is a new element every time, and a poll's unchanged answer
    (``poll_answer``: a status under way asked after a pause, a value watched between
    deliberate waits) is a step of its own, never a replay.

Threshold: 18 replays among the last 24 steps (``threshold`` of ``window``)
    Three quarters of two dozen steps. A cycle of period ``p`` with unchanged
    outcomes replays from the second call of its second lap, so it trips
    ``p + 19`` calls in: call 24 for period 5, call 35 for period 16, call 47
    for period 28 — any period the memory below holds. One new call per lap costs
    two replays (the pairs into and out of it), so a period-8 loop interrupted on
    every lap still replays 7 steps in 9 (78 %) and trips; a loop interrupted
    more often than that is no longer replaying mostly. Short periods are caught
    earlier by the cycle and dominance detectors, which this one defers to.

Memory: 128 pairs (``memory``), first in, first out
    Pair hashes of 32 bits in one ``bytearray`` (512 bytes when full; a session
    that made fewer calls holds fewer). A replay can only be recognised while its
    first occurrence is remembered, so the memory bounds the longest period seen
    (128 here, far past the 16 a loop detector must reach). Per call the cost is
    one C-level search of that array, one mask shift and one popcount.

Severity: critical, session scope
    Three quarters of the recent steps reproduced earlier steps *and their
    outcomes*: the agent is going round, and every lap re-fetches answers it
    already holds. Under enforce it halts the session. The latch holds until the
    replay share falls to half the window, so one loop raises one alert.

Parallel calls
    A step is a call with the outcome of *its* result. An agent that sends several
    calls before their results (a batch of eight ``curl -sI`` checks, one per URL) has
    them all open at once (``open_keys``, at most :data:`MAX_OPEN`); each closes when
    its result comes, in call order (a result that comes before an earlier call's is
    held until that one closes), and a call of the last batch still unanswered when the
    next batch starts closes without an outcome. Before, each parallel call was closed
    unanswered by the next one, so a batch re-checked after a wait was compared by its
    calls alone and replayed whatever it returned. Until a session's first result
    arrives, a call closes at the next call (a stream without results compares calls
    alone, at once). The watchdog pairs at most eight pending calls with their results,
    so in a batch of more the earliest calls close without an outcome.

Known false positives
    A scripted, legitimately repetitive routine whose results never change (a
    monitor that reads the same three unchanged dashboards every cycle): exempt
    its tools or switch the signal off for that agent. Results that are
    unknown (a stream without ``tool_result`` events) make the signal compare
    calls alone, which a re-check routine can also satisfy.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from msgspec import Meta, Struct

from .base import CallView, Finding, ResultView, Signal, SignalConfig, poll_answer

SIGNAL_ID = "long-loop"
MAX_OPEN = 16
"""Calls held open for their results at once (parallel calls): past it, the oldest is
closed unanswered."""
WINDOW_LIMIT = 64
MEMORY_LIMIT = 1024
_WIDTH = 4
_M64 = (1 << 64) - 1
_M32 = (1 << 32) - 1


class LongLoopConfig(SignalConfig, kw_only=True, forbid_unknown_fields=True):
    """Policy table of ``long-loop``."""

    window: Annotated[int, Meta(ge=8, le=WINDOW_LIMIT)] = 24
    """Recent steps considered."""
    threshold: Annotated[int, Meta(ge=4, le=WINDOW_LIMIT)] = 18
    """Replayed steps among them that trip the signal (at most ``window``)."""
    memory: Annotated[int, Meta(ge=16, le=MEMORY_LIMIT)] = 128
    """Distinct step pairs remembered (the longest loop period that can be seen)."""

    at_most = (("threshold", "window"),)


class LongLoopState(Struct, tag=SIGNAL_ID, gc=False, omit_defaults=True):
    """Per-session state of ``long-loop``."""

    open_key: int = 0
    """Call key of the latest call, until its result (or the next call) closes it: before
    the session's first result (a stream without results compares calls alone)."""
    answered: bool = False
    """A result came in this session: calls stay open for theirs (``open_keys``)."""
    open_keys: list[int] = []
    """Keys of the calls sent and not yet closed, in call order (parallel calls), once the
    session is ``answered``; at most :data:`MAX_OPEN`."""
    early: list[tuple[int, int, bool]] = []
    """Results that came before an earlier call's (``(key, outcome, poll answer)``), held
    until the calls before them close."""
    after_result: bool = False
    """The last event seen was a result: the next call starts a new batch, and a call of
    the last batch still open then never got its result."""
    prev: int = 0
    """Element of the previous closed step (0: none yet)."""
    seen: bytearray = bytearray()
    """Pair hashes seen, 4 bytes each, oldest first."""
    mask: int = 0
    """One bit per recent step, newest lowest: the step was a replay."""
    steps: int = 0
    """Steps closed, capped at the window."""
    latched: bool = False
    polls: int = 0
    """Poll answers seen (``poll_answer``), each made a step of its own (wraps at 2**31)."""


class LongLoop(Signal):
    """Critical when ``threshold`` of the last ``window`` steps replay earlier steps."""

    id: ClassVar[str] = SIGNAL_ID
    severity = "critical"
    scope = "session"
    State = LongLoopState
    sees_waits = False  # a wait's answers are no loop evidence (signals/facts.py)
    Config = LongLoopConfig
    needs_pairing = True
    defers_to = ("failure-loop", "repeated-tool-call", "alternating-tool-cycle",
                 "dominant-tool-call", "setup-detour")

    config: LongLoopConfig

    def __init__(self, config: SignalConfig | None = None) -> None:
        super().__init__(config)
        cfg = self.config
        self.window, self.threshold, self.memory = cfg.window, cfg.threshold, cfg.memory
        self._full = (1 << cfg.window) - 1
        self._keep = (cfg.memory - 1) * _WIDTH
        self._release = cfg.window // 2

    def is_latched(self, state: Any) -> bool:
        return bool(state.latched)

    def on_call(self, state: Any, call: CallView) -> Finding | None:
        if self.exempt and call.tool in self.exempt:
            return None
        finding = None
        key = call.key or 1
        if not state.answered:
            if state.open_key:
                finding = self._close(state, state.open_key, 0)  # its result never came
            state.open_key = key
        else:
            opened = state.open_keys
            if state.after_result:
                # A new batch: what the last one left open never got its result.
                state.after_result = False
                if opened:
                    finding = self._drain(state, len(opened))
            elif len(opened) >= MAX_OPEN:
                finding = self._drain(state, 1)
            opened.append(key)
        if finding is not None:
            finding.detail["tool"] = call.tool
        return finding

    def on_result(self, state: Any, result: ResultView) -> Finding | None:
        key = result.call_key
        if not key:
            return None
        if not state.answered:
            # The session's first result: from now on calls wait for theirs.
            state.answered = state.after_result = True
            open_key, state.open_key = state.open_key, 0
            if key != open_key:
                if open_key:  # still open: its result may come yet
                    state.open_keys.append(open_key)
                return None
            finding = self._close(state, key, result.outcome, result)
        else:
            opened = state.open_keys
            if not opened:
                return None  # its call was closed already (its batch ended)
            if opened[0] == key:
                state.after_result = True
                del opened[0]
                finding = self._close(state, key, result.outcome, result)
                if state.early:
                    finding = self._drain(state, 0) or finding
            elif key in opened and len(state.early) < MAX_OPEN:
                # Before an earlier call's result (parallel calls answered out of order):
                # held until the calls before it close, the poll read now while its view is.
                state.after_result = True
                state.early.append((key, result.outcome, poll_answer(result)))
                return None
            else:
                # A result of a call already closed (late, or of an earlier batch): no
                # sign that the batch in flight is over.
                return None
        if finding is not None:
            finding.detail["tool"] = result.tool
        return finding

    def _drain(self, state: Any, unanswered: int) -> Finding | None:
        """Close the first ``unanswered`` open calls (with a result held for them, or none),
        then every call after them whose result came early."""
        opened, early = state.open_keys, state.early
        finding = None
        while opened:
            key = opened[0]
            for i, entry in enumerate(early):
                if entry[0] == key:
                    del early[i]
                    _, outcome, poll = entry
                    break
            else:
                if unanswered <= 0:
                    break
                outcome, poll = 0, False
            unanswered -= 1
            del opened[0]
            finding = self._close(state, key, outcome, None, poll) or finding
        if not opened:
            early.clear()
        return finding

    def _close(
        self, state: Any, key: int, outcome: int, result: ResultView | None = None,
        poll: bool = False,
    ) -> Finding | None:
        # Two multiply-xorshift rounds, inline: the element (call and outcome), then the
        # pair (previous element and this one).
        x = (key * 0x9E3779B97F4A7C15 + outcome) & _M64
        element = (x ^ (x >> 29)) or 1
        y = ((state.prev * 0xBF58476D1CE4E5B9 + element) & _M64)
        pair = ((y ^ (y >> 31)) >> 32).to_bytes(_WIDTH, "little")
        seen = state.seen
        at = seen.find(pair)  # (find_entry, inline: every step's lookup)
        while at > 0 and at % _WIDTH:
            at = seen.find(pair, at + 1)
        replay = at >= 0
        if replay and (poll or (result is not None and (result.asked_runs or poll_answer(result)))):
            # A poll's answer (a status under way, or a value watched between waits) is
            # no replay: waiting for a job is not going round. Nor is one of the runs its
            # user asked for ("run it 15 times"), within their count. A step of its own,
            # with an outcome no other step has (read only where it would count as a
            # replay: the answer is read once there).
            state.polls = polls = (state.polls + 1) & 0x7FFFFFFF
            return self._close(state, key, outcome ^ polls * 0xD6E8FEB86659FD93 & _M64)
        state.prev = element
        if not replay:
            excess = len(seen) - self._keep
            if excess > 0:
                del seen[:excess]
            seen.extend(pair)
        state.mask = ((state.mask << 1) | replay) & self._full
        if state.steps < self.window:
            state.steps += 1
            if state.steps < self.window:
                return None
        replays = state.mask.bit_count()
        if state.latched:
            if replays <= self._release:
                state.latched = False
            return None
        if replays < self.threshold:
            return None
        state.latched = True
        return self._finding(state, replays)

    def _finding(self, state: Any, replays: int) -> Finding:
        window = self.window
        return Finding(
            signal=SIGNAL_ID,
            severity="critical",
            scope="session",
            reason=(
                f"{replays} of the agent's last {window} steps replayed steps it had already "
                "taken in this session, in the same order and with the same results. This is "
                "a loop longer than the short cycles the other detectors see, possibly with "
                "the odd new call wedged in. Under enforce the halting controller stops the "
                "session."
            ),
            guidance=(
                f"Most of your last {window} tool calls repeated a sequence you had already "
                "gone through, and they returned what they returned before. Going round again "
                "will not change that. Stop, state what you have established so far and what "
                "is missing, and take a different route or ask for help."
            ),
            detail={"replays": replays, "window": window, "threshold": self.threshold,
                    "memory": self.memory},
        )
