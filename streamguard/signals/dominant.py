"""``dominant-tool-call``: one call crowding out everything else in a window.

What it catches
    The loop that falls between the other two argument-keyed detectors: the
    agent issues mostly one call, with the odd other call wedged in. Each
    interleave restarts the consecutive-repeat count, and the cycle detector
    sees a nearly uniform block and leaves it alone, so a loop that is plainly
    stuck after a handful of calls can run for dozens. Density does not care
    where the interleaves fall: the signal looks at the last ``window`` call
    keys (the hashed cleaned form, as the cycle detector uses) and finds the
    most frequent key, ties going to the key that first appears earliest in
    the window.

Threshold
    8 of the last 12 (``threshold`` of ``window``). When two calls in three
    fetch an answer the agent already holds, the work has stalled; a window
    of 12 reaches that verdict within the first dozen calls of a loop, however
    the interleaves fall. The window counts as soon as it holds enough calls:
    ``a×4 b`` repeated trips at call 9. Window and threshold are clamped to
    at least 2 and the threshold to at most the window; the window is also
    capped at 64 (not in the reference) to keep the session's history small.

    The signal stands down, keeping its latch, while another detector owns
    the window, so one behaviour raises one alert:

    * run deference (``defer_run``, default 5, the repeat threshold): the
      dominant key has a consecutive run of at least that length *inside the
      current window*. Once the run slides out, density may fire
      (``a×5 b a a c a a d a a`` trips at call 13);
    * cycle deference (``defer_cycle_period``, default 4, the cycle
      detector's longest period): the whole window repeats a block of period
      2 up to that value (shorter than the window) that is not one call
      repeated. ``a a b`` repeated is the cycle detector's, found at call 9,
      before density could reach 8; ``a a a a b`` (period 5) is this one's.

    Either deference is switched off with 0 (for a policy that runs this
    signal without the detector it defers to). The latch is keyed on the
    dominant call and clears when the top count drops below the threshold,
    which in practice takes a window of other work; the same loop then alerts
    again.

Severity
    Critical, session scope, like the other argument-keyed loop detectors and
    for their reason: the dominant call's arguments are equivalent every time,
    so its answers are too.

Result-aware (``result_aware``, default on; not in the reference)
    The claim behind a trip is that the dominant call's answers do not change,
    so another one cannot help. A call whose answer has changed twice or more
    (``scroll_down`` paging through a file with a search between pages, a
    status that moves) is paging or polling, and does not trip; so is one whose
    unchanged answer is a poll's (``poll_answer``: a certificate's status read
    after each wait until it is issued, counted as a change); the call's
    last answer and how often it changed are kept for the 16 most recently
    answered calls. An answer that closes with the time the runtime read it
    (``read_stamped``: Claude Code's ``BashOutput`` ends every answer with
    ``<timestamp>...</timestamp>``) is compared without that stamp, and only that:
    a background job that died long ago, read between sleeps and a look at its
    results folder, answers ``<status>failed</status>`` with the time of each read,
    which compared byte for byte was a poll of something moving (a loop of the
    fifty-third blind batch, 40 calls, never halted; halted at its nineteenth call
    now). Times in what the answer says (a heartbeat, a last sync, a run's
    duration) are the news, and compared as sent: a first version that masked every
    timestamp and duration halted a worker's heartbeat watch and a timing loop. Without results (a runtime that sends none) nothing
    changes; ``result_aware = false`` is the reference rule.

    An interface act answered only by its own report (``reports_act``:
    browser-use's "🔍  Scrolled down the page by one page", "Clicked element
    'button.load-more'") says nothing of what it did: its answer is the same
    every time, whether the page moved or not. What the act did is what the
    other calls of the window see, so such a dominant act does not trip while
    what they saw keeps moving: their latest answers at least two, no two
    alike, and a call made more than once in the window last answered
    something new (an infinite feed scrolled twice between extractions, each
    extraction listing new posts, was halted at the sixteenth call). Scrolling
    a page that has stopped moving still trips, however the reads between are
    worded (each extraction answered "end of feed", a page-info read answered
    the same each time), and so does any other dominant call.

The runs its user asked for
    A call the session's user asked to be run a number of times ("run it 10 more times
    like that", ``CallView.asked_runs``) is no dominant call while within that count,
    whatever is read between the runs (``asked_key``), as ``repeated-tool-call``,
    ``failure-loop`` and ``long-loop`` wait past it; past the count it is judged as any.

Known false positives
    A hand-rolled poll with other calls interleaved. Without the interleaves
    such a poll would meet ``repeated-tool-call`` after five calls anyway, so
    density adds little exposure for polling; ``wait_and_verify`` is the
    supported way to wait.

Cost: the signal reads the session's shared history ring. While no key in
the window has reached the threshold, only the current key can cross it, so a
call costs one ``list.count`` over the window; the full count (and the
deference scans) runs only when a key is at or above the threshold. With
``exempt_tools`` set it keeps its own ring, because an exempt call must be
invisible and the shared ring still holds it.
"""

from __future__ import annotations

from operator import itemgetter
from sys import intern
from typing import Annotated, Any, Self

from msgspec import Meta, Struct
from msgspec.structs import replace

from ..canonical import truncate_middle
from .base import (
    CallView,
    Finding,
    ResultView,
    Signal,
    SignalConfig,
    answer_just_changed,
    answer_keeps_changing,
    note_answer,
    push_own_ring,
)
from .facts import FLAG_RUNNER, FLAG_WRITE
from .result_stall import UI_ACT_TOOLS, reports_act

_RUNNER_WRITE = FLAG_RUNNER | FLAG_WRITE

SIGNAL_ID = "dominant-tool-call"
ARGS_LIMIT = 200
"""Bytes of arguments kept for alert text (the counting key is never truncated)."""
WINDOW_LIMIT = 64

_second = itemgetter(1)



def longest_run(window: list[int], key: int) -> int:
    """Length of the longest consecutive stretch of ``key`` in ``window``."""
    best = run = 0
    for item in window:
        if item == key:
            run += 1
            if run > best:
                best = run
        else:
            run = 0
    return best


def periodic(window: list[int], max_period: int) -> bool:
    """Whether ``window`` repeats a non-uniform block of period 2..``max_period`` (< its length)."""
    size = len(window)
    for period in range(2, min(max_period, size - 1) + 1):
        if all(window[i] == window[i + period] for i in range(size - period)):
            first = window[0]
            if any(window[i] != first for i in range(1, period)):
                return True
    return False


def _others_move(state: Any, counts: dict[int, int], top: int) -> bool:
    """Whether what the calls of the window (``counts``: call key -> its calls in the
    window) other than ``top`` saw kept moving: their
    latest answers (exact outcomes, as ``note_answer`` keeps them) are at least two, no
    two of them alike (an extraction reworded and answered "end of feed" each time is
    one answer), and a call made more than once in the window last answered something
    new (a page-info read answered the same every time is no movement)."""
    answers = state.answers
    if not answers:
        return False
    seen: set[int] = set()
    for key, count in counts.items():
        if key == top:
            continue
        packed = answers.get(key)
        if packed is None:
            continue
        outcome = packed >> 8 & 0xFFFFFFFF
        if outcome in seen:
            return False
        seen.add(outcome)
        if count > 1 and not answer_just_changed(state, key):
            return False
    return len(seen) >= 2


class DominantToolCallConfig(SignalConfig, kw_only=True, forbid_unknown_fields=True):
    """Policy table of ``dominant-tool-call``."""

    window: Annotated[int, Meta(ge=2, le=WINDOW_LIMIT)] = 12
    """How many recent calls are considered."""
    threshold: Annotated[int, Meta(ge=2)] = 8
    """How many of them must be the same call (at most ``window``)."""
    defer_run: Annotated[int, Meta(ge=0)] = 5
    """Stand down while the dominant call has a run this long in the window (0: never)."""
    defer_cycle_period: Annotated[int, Meta(ge=0)] = 4
    """Stand down while the window is a clean cycle of period 2..this (0: never)."""
    result_aware: bool = True
    """A dominant call whose answer keeps changing (``scroll_down`` paging through a file,
    a status that moves) is paging or polling, not a loop: no trip (false: the reference
    rule, results ignored)."""

    def resolved(self) -> Self:
        config = super().resolved()
        if config.threshold > config.window:  # accepted from a policy too: the window
            return replace(config, threshold=config.window)
        return config


class DominantToolCallState(Struct, tag=SIGNAL_ID, gc=False, omit_defaults=True):
    """Per-session state: the latch, a hot flag and the candidate's alert text."""

    seen: int = 0
    """Calls observed since the last reset, capped at the window."""
    hot: bool = False
    """Some key was at or above the threshold at the last evaluation."""
    latched: bool = False
    """An alert was raised for ``latched_key`` and the window still shows it."""
    latched_key: int = 0
    cand_key: int = 0
    """Key whose tool name and arguments are kept below (the most recent call
    of a key at or above the threshold)."""
    cand_tool: str = ""
    cand_args: str = ""
    """Canonical arguments of that call, cut to :data:`ARGS_LIMIT` bytes."""
    ring: list[int] | None = None
    """Own key history, used only when the policy exempts tools."""
    act_key: int = 0
    """The call whose latest answer only reported the interface act it asked for."""
    asked_key: int = 0
    """The call its user asked to be run a number of times, while within that count
    (``CallView.asked_runs``): its share of the window is what was asked (0: none)."""
    answers: dict[int, int] | None = None
    """Recent calls' answers (``note_answer``): call key -> (last outcome, 32 bits) << 8 |
    times it changed, with a bit for "that answer was new"; at most ``ANSWERS_KEPT`` calls,
    least recently answered first."""


class DominantToolCall(Signal):
    """Trips when one call key makes up ``threshold`` of the last ``window`` calls."""

    id = SIGNAL_ID
    severity = "critical"
    scope = "session"
    # A loop the result-aware repeat rule already reported (four identical answers)
    # and that goes on between interleaves is that rule's behaviour, not a new one.
    defers_to = ("repeated-tool-call",)
    Config = DominantToolCallConfig
    State = DominantToolCallState
    sees_waits = False  # a wait's answers are no loop evidence (signals/facts.py)

    config: DominantToolCallConfig

    def __init__(self, config: SignalConfig | None = None) -> None:
        super().__init__(config)
        cfg = self.config
        self.window: int = cfg.window
        self.threshold: int = cfg.threshold
        self.defer_run: int = cfg.defer_run
        self.defer_cycle_period: int = cfg.defer_cycle_period
        self.result_aware: bool = cfg.result_aware
        # Results are read (paired with their calls, fingerprinted) only when result-aware.
        self.needs_pairing = self.needs_fingerprint = self.result_aware

    def history_needed(self) -> int:
        return 0 if self.exempt else self.window

    def on_result(self, state: Any, result: ResultView) -> Finding | None:
        if not self.result_aware:
            if state.answers is not None:
                state.answers = None  # kept by a result-aware policy: stale from here on
        elif not (self.exempt and result.tool in self.exempt):
            note_answer(state, result)
            # (reports_act only for an act: a computer-use one, or a tool named by one;
            # the names already judged are looked up without a call)
            if (
                result.call_flags & _RUNNER_WRITE == _RUNNER_WRITE
                or UI_ACT_TOOLS.get(result.tool, True)
            ) and reports_act(result):
                state.act_key = result.call_key
            elif state.act_key and state.act_key == result.call_key:
                state.act_key = 0
        return None

    def is_latched(self, state: Any) -> bool:
        return bool(state.latched)

    def on_call(self, state: Any, call: CallView) -> Finding | None:
        size = self.window
        if self.exempt:
            if call.tool in self.exempt:
                return None
            window = push_own_ring(state, call.key, size)
        else:
            window = call.history
            if state.seen < size:
                state.seen += 1
            keep = state.seen
            if len(window) > keep:
                window = window[-keep:]
        key = call.key
        if call.asked_runs:
            if state.asked_key != key:
                state.asked_key = key
        elif state.asked_key == key:
            state.asked_key = 0  # past the count asked: judged as any
        if not state.hot and window.count(key) < self.threshold:
            # Nothing was at the threshold before this call and only this
            # call's key gained a count: the top count is still below it.
            return None
        return self._evaluate(state, call, window)

    def preview_state(self, state: Any) -> Struct:
        ring = list(state.ring) if state.ring is not None else None
        answers = dict(state.answers) if state.answers is not None else None
        # hot: evaluate the window in full, as the latch may hide a key at the threshold.
        return replace(state, latched=False, hot=True, ring=ring, answers=answers)

    def _evaluate(self, state: Any, call: CallView, window: list[int]) -> Finding | None:
        counts: dict[int, int] = {}
        for item in window:
            counts[item] = counts.get(item, 0) + 1
        # Dicts keep insertion order and max() keeps the first maximum, so a
        # tie goes to the key that first appears earliest in the window.
        top, count = max(counts.items(), key=_second)
        threshold = self.threshold
        if count < threshold:
            state.hot = False
            state.latched = False
            return None
        state.hot = True
        key = call.key
        if counts[key] >= threshold and state.cand_key != key:
            state.cand_key = key
            state.cand_tool = intern(call.tool)
            state.cand_args = truncate_middle(call.canonical.text, ARGS_LIMIT)
        if self.defer_run and longest_run(window, top) >= self.defer_run:
            return None
        if self.defer_cycle_period and periodic(window, self.defer_cycle_period):
            return None
        if state.latched and state.latched_key == top:
            return None
        if top == state.asked_key:
            # The runs its user asked for ("CI runs it with -n 4: try that, 10 more times"),
            # within their count, whatever is read between them: as repeated-tool-call and
            # long-loop wait past them.
            return None
        if self.result_aware and answer_keeps_changing(state, top):
            return None  # its answer keeps changing: paging or polling, not a loop
        if self.result_aware and top == state.act_key and _others_move(state, counts, top):
            return None  # an act that only reports itself, whose effect the others see
        state.latched = True
        state.latched_key = top
        return self._finding(state, top, count, len(window))

    def _finding(self, state: Any, top: int, count: int, size: int) -> Finding:
        if state.cand_key == top:
            tool, args = state.cand_tool, state.cand_args
        else:  # only reachable when the threshold allows two keys at once
            tool, args = "one tool", "(arguments not retained)"
        reason = (
            f"{tool} with equivalent arguments {args} made up {count} of the last {size} "
            "tool calls. This is a loop with other calls wedged in, which keeps resetting the "
            "consecutive-repeat count. Under enforce the halting controller stops the "
            "session; a cost ceiling is the hard backstop."
        )
        guidance = (
            f"{count} of your last {size} tool calls were {tool} with the same arguments "
            f"{args}. Nothing you did in between altered what that call returns. Work with "
            "the answer you already hold, ask with different arguments, or stop and explain "
            "what stands in your way."
        )
        return Finding(
            signal=SIGNAL_ID,
            severity="critical",
            scope="session",
            reason=reason,
            guidance=guidance,
            detail={
                "tool": tool,
                "count": count,
                "window": size,
                "threshold": self.threshold,
                "args": args,
            },
        )
