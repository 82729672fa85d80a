"""``alternating-tool-cycle``: a short sequence of calls replayed lap after lap.

What it catches
    The loop the consecutive-repeat detector cannot see because no call ever
    follows itself: ``list_agents → check_agent → list_agents → check_agent``,
    or ``read → grep → test`` over and over, each lap with unchanged
    arguments. On every call it scans periods ``p`` from 2 to ``max_period``
    and takes the shortest one for which the last ``p × laps`` call keys are
    ``laps`` copies of one ``p``-call block. Keys are the hashed cleaned form
    (``./main.go`` and ``main.go`` are one call); the repeat detector's path
    suffix relation is not transitive and so cannot key a history.

    A call naming an id that a write made again just handed back is keyed by what
    it names (the watchdog's ``SessionState.handed``, docs/signals.md "Ids a write
    hands back"): a draft saved and discarded lap after lap, each draft under a new
    id, is one lap repeated.

    A block made of one call repeated is skipped: that is a plain repeat and
    belongs to ``repeated-tool-call`` (one behaviour, one alert). The block is
    fingerprinted by its lexicographically smallest rotation, so ``a → b`` and
    ``b → a`` are the same pattern and raise one alert between them. The latch
    clears as soon as no period matches; the same cycle resuming afterwards
    for fresh laps is reported again.

Threshold
    Three laps (``laps``) of a block of period 2 to 4 (``max_period``): six
    calls for ``a → b``, nine for a period of three, twelve for four. Going
    over a short sequence twice is how exploration looks (open a file, search
    it, open the next, search again), so two laps never count; a third pass
    with unchanged arguments can only fetch what the first two already
    returned. Periods above ``max_period`` are never examined;
    ``dominant-tool-call`` covers long, lopsided loops. Both values are
    clamped to at least 2 (two laps are the fewest that can show a
    repetition). Both are also capped at 8, which the reference does not do:
    the history the session keeps for this signal is their product, and it
    must stay small.

Severity
    Critical, session scope: every lap is argument-for-argument the previous
    one, so the agent provably learns nothing from the next lap.

Result-aware (``result_aware``, default on; not in the reference)
    The claim behind a trip is that every lap "could only hand back what the
    previous lap returned". A lap one of whose calls answered differently
    each time says otherwise: ``scroll_down → extract`` reading a page further
    down each lap, ``git bisect good → go test`` walking a bisection,
    ``kubectl get pods → kubectl logs`` watching a rollout come up. So the
    signal keeps, as ``dominant-tool-call`` does, the last answer of the 16
    most recently answered calls and whether it differed from the one before
    (compared with every digit taken out, ``answer_gist``: a crash-looping
    pod's ``Restart Count: 15`` after ``14``, an age or a timestamp is no news; a
    structured answer is compared exactly but for its ISO timestamps: an owner set
    and read back while an automation reverts it answers the same object with a new
    ``updated_at`` each lap, a loop; a count or a lag that moves is news; the
    pages a text answer names keep their digits (an address's path on its host and its
    paging parameters, ``page``, ``offset``, ``start``...; not a dashboard link's
    ``from=<now>``, a search's ``qid=<time>`` or a dev server's port, which move by
    themselves): a browser open at
    ``...&offset=20090616115238`` after ``...&offset=20141108173315`` shows another page,
    and a web surfer clicking "older 500" and scrolling, lap after lap through a
    revision history, was halted at its third lap),
    and a cycle with a call whose latest answer was new is paging or polling
    and does not trip (at the third lap a call has answered twice: one change
    is all it can have shown). An empty answer or a failure is an answer
    too, so a page that stops coming back ends the change. Once a lap brings
    nothing new the cycle trips as before; without results (a runtime that publishes none) nothing
    changes; ``result_aware = false`` is the reference rule. A poll whose
    answers keep moving is left to the cost ceilings and to
    ``tools-without-text``.

    Four of forty hand-written healthy traces of other runtimes tripped the
    reference rule (docs/detection.md). A bisection, a rollout watch and a
    browser agent scrolling reviews no longer do. The eight loops beside them,
    a crash-looping pod among them, are caught as before.

    A call whose answer says the work is still under way, the same again
    after the session paused (``says_in_progress``, ``ResultView.paused``: a
    wait, the user's message or ``[waits] pause_seconds`` of quiet), counts as
    a moving answer (``note_answer``): exports polled one after the other with
    a wait between laps, or Glue job runs asked again each minute while
    ``RUNNING``, are a poll. The same laps with no pause (``list_agents →
    check_agent`` "pending" as fast as the agent can ask), or over statuses
    that say the work ended, trip as before. A question to the user
    (``FLAG_ASK``) is never the lap's moving answer: the user's reply in new
    words ("staging", "staging like I said") is no news of the world, so
    re-reading a file and re-asking an answered question, lap after lap, trips.
    Nor does a lap that re-sends one named write as it was (``writes``: the
    same comment posted again, the same message sent) count its reads' moving
    answers when that write's own answer moves too (a new comment id each
    time: it created a new thing): the comment list grows because of the posts
    themselves, unless the write was refused by a service down or busy (a 502, a
    429: ``says_transient``) after a pause (``refused``): it made nothing, and its
    changing refusals are the service's news (an upload retried with a growing
    back-off through an incident, the status page read between tries, was halted
    at its third lap in a blind batch; refused for its own fault, the lap trips as
    before). Refused at once for a reason that may pass (a 504, a 429, a time-out:
    ``failed_transiently``), the laps through that write trip at ``TRANSIENT_LAPS`` (2)
    times the count, as ``failure-loop`` reads such failures: a payment that timed out
    three times, the transactions read after each to see that nothing was booked, was
    halted at its third try in a blind batch; its going through at last is news, and the
    laps count from there, once (``through``: going through again between refusals is a
    payment made each lap). A submission answered 429 fifty times, the quota read
    between, is still halted, at its sixth lap. A write answered alike every time (a keystroke sent to a pager,
    a heartbeat) leaves its lap's reads to count, and a computer-use scroll is no
    named write, so scroll → screenshot stays paging. A computer-use act's answer (a
    click's or a keystroke's screenshot, new every time) moves a lap only when nothing
    else in it answers: a tracking page reloaded and read, its text the same every lap,
    is a cycle whatever the screenshots (``screens``).

The same request again
    A message to the agent (its user's, or a system message) that repeats the one
    before word for word, ten minutes or more after it (a scheduler asking
    "Run the monitoring playbook for clinic-prod" every half hour;
    ``on_repeated_prompt``), restarts the laps:
    what the agent does next answers that request, so the same four checks run again
    for it are no lap of the agent's own. A reply in new words ("Postgres, as I
    said", "STOP") does not, nor the same words again within minutes (a harness's
    "Please continue" whenever the agent stops, "STOP" twice): an agent going through
    the same calls while its user protests or its harness nudges it is looping, and two such loops of the blind batches are halted only
    across the replies. (One healthy overnight monitor of the twenty-third batch was
    halted at its third scheduled run before this.)

    A request in new words (``ResultView.asked``) restarts nothing, but an answer back
    to the one before last after it is news (``note_answer``): a shop's maintenance mode
    turned on, off and on again, each time at its user's word, is the user's doing; the
    same flips with no request between them are the agent's flip-flop and trip.

Known false positives
    A polling loop written by hand as alternating calls whose answers do not
    change and do not say the work is under way, or polled with no pause
    (pods listed ``Pending`` and nodes listed, back and forth every two
    seconds while an autoscaler adds a node). ``wait_and_verify`` exists for
    that; deployments that poll this way on purpose can exempt the polling
    tools or switch the signal off in the policy. Answers whose moving numbers
    are the news itself (two metrics queried in turn while an error rate
    falls, sent as JSON text) read as unchanged, since the gist takes every
    digit out. A lap that re-posts one message whose answer carries a new id
    each time, while what it reads moves for another reason (a status page that
    updates), trips on the re-sent write. An agent acting in a game or a simulation
    whose recipe is a short sequence done again (``pickup(onion) → put_onion_in_pot``
    three times for one soup, each answered ``executed: true`` at a later time step)
    trips at the third lap: the answers differ only in their numbers. Exempt the
    environment's act tool for such agents.

The signal keeps no history of its own: it reads the session's shared ring
(``CallView.history``) and only remembers how many of its entries belong to it
(so a reset drops a half-built cycle) plus the last ``max_period`` tool names
for the alert text. With ``exempt_tools`` set it keeps its own short ring,
because an exempt call must be invisible and the shared ring still holds it.
"""

from __future__ import annotations

from sys import intern
from typing import Annotated, Any

from msgspec import Meta, Struct
from msgspec.structs import replace

from .base import (
    CallView,
    Finding,
    ResultView,
    Signal,
    SignalConfig,
    answer_just_changed,
    failed_transiently,
    note_answer,
    push_own_ring,
    says_transient,
)
from .facts import COMPUTER_ACTS, FLAG_ASK

SIGNAL_ID = "alternating-tool-cycle"
MAX_PERIOD_LIMIT = 8
LAPS_LIMIT = 8


def smallest_rotation(block: list[int]) -> tuple[int, ...]:
    """The rotation of ``block`` that sorts first (the pattern's fingerprint)."""
    best = block
    for start in range(1, len(block)):
        candidate = block[start:] + block[:start]
        if candidate < best:
            best = candidate
    return tuple(best)


def _repeats(history: list[int], period: int, span: int) -> bool:
    """Whether the last ``span`` keys are copies of the last ``period`` keys."""
    # Shifting the stretch by one period must give the stretch back.
    return history[-span:-period] == history[period - span :]


def _lap_moves(state: Any, block: list[int]) -> bool:
    """Whether a lap brought something new: one of its calls' answers moved, and no
    named write of it was re-sent making a new thing (the same comment posted again
    under a new id moves the comment list read beside it by itself; a write answered
    alike every time, a keystroke to a pager or a heartbeat, leaves the reads to count).
    A computer-use act's answer (a new screenshot every time) counts only in a lap with
    no other answer: beside a read of the page that says the same each lap, the pixels
    are no news (a tracking page reloaded and read, lap after lap)."""
    moved = screen_moved = read_still = False
    writes, screens, answers = state.writes, state.screens, state.answers
    for key in set(block):
        screen = bool(screens) and key in screens
        if answer_just_changed(state, key):
            if writes and key in writes and (key not in state.refused or state.refusals > REFUSED_RETRIES):
                # (a refused write's changing failures are news only for so many
                # retries: an outage's errors carry a new request id every time)
                return False
            if screen:
                screen_moved = True
            else:
                moved = True
        elif not screen and answers and key in answers:
            read_still = True
    return moved or (screen_moved and not read_still)


TRANSIENT_LAPS = 2
"""How many times the laps a cycle needs when one of its named writes was last refused by a
service that says the refusal may pass (a payment sent again after each 504, the account
read between tries to see that nothing was booked): ``failure-loop`` reads such a run of
failures at twice its threshold too."""
REFUSED_RETRIES = 8
"""Refusals of a busy service whose changing failures move a lap: a back-off that doubles
from a few seconds has waited minutes by then, and an outage's errors, each with a new
request id, would otherwise move every lap for as long as it lasts."""


class AlternatingToolCycleConfig(SignalConfig, kw_only=True, forbid_unknown_fields=True):
    """Policy table of ``alternating-tool-cycle``."""

    max_period: Annotated[int, Meta(ge=2, le=MAX_PERIOD_LIMIT)] = 4
    """Longest block length examined (periods start at 2)."""
    laps: Annotated[int, Meta(ge=2, le=LAPS_LIMIT)] = 3
    """Consecutive copies of the block that trip the signal."""
    result_aware: bool = True
    """A cycle with a call whose answer keeps changing (a page further down, a bisection
    step, a rollout coming up) is paging or polling, not a loop: no trip (false: the
    reference rule, results ignored)."""


class AlternatingToolCycleState(Struct, tag=SIGNAL_ID, gc=False, omit_defaults=True):
    """Per-session state: a few ints and the last ``max_period`` tool names."""

    seen: int = 0
    """Calls observed since the last reset, capped at the history needed."""
    pattern: tuple[int, ...] = ()
    """Fingerprint of the latched cycle (empty: not latched)."""
    names: list[str] = []
    """Tool names of the most recent calls, oldest first (at most ``max_period``)."""
    ring: list[int] | None = None
    """Own key history, used only when the policy exempts tools."""
    writes: tuple[int, ...] = ()
    """Keys of the recent calls that wrote through a named write tool (at most
    ``max_period``): a lap that re-sends one of them moves its other answers itself."""
    refused: tuple[int, ...] = ()
    """Keys of the recent named writes whose latest answer was a failure that says the
    service was down or busy, after a pause (at most ``max_period``): they made nothing,
    so their changing failures move a lap, for ``REFUSED_RETRIES`` refusals."""
    refusals: int = 0
    """Such refusals since a refused write last answered otherwise."""
    flaky: tuple[int, ...] = ()
    """Keys of the recent named writes whose latest answer was a failure that says it may
    pass (a 504, a 429, a time-out: ``failed_transiently``), paused or not (at most
    ``max_period``): a cycle through one is a retry that checks between tries, and trips
    only at ``TRANSIENT_LAPS`` times the laps."""
    through: tuple[int, ...] = ()
    """Keys of the recent named writes that went through after such refusals (at most
    ``max_period``): the first time is news and the laps count from there; a write that
    goes through again and again between refusals is no news (a payment made each lap)."""
    flaky_run: int = 0
    """Calls in a row that completed the laps of a cycle through one of ``flaky``: it trips
    once they make ``TRANSIENT_LAPS`` times the laps."""
    screens: tuple[int, ...] = ()
    """Keys of the recent computer-use acts (a click, a keystroke; at most ``max_period``):
    their answers are screenshots, news only where nothing else answers."""
    answers: dict[int, int] | None = None
    """Recent calls' answers (``note_answer``): call key -> (last gist, 32 bits) << 8 |
    times it changed, with a bit for "that answer was new"; at most ``ANSWERS_KEPT`` calls,
    least recently answered first (when result-aware)."""


class AlternatingToolCycle(Signal):
    """Trips when a non-uniform block of 2..``max_period`` calls repeats ``laps`` times."""

    id = SIGNAL_ID
    severity = "critical"
    scope = "session"
    Config = AlternatingToolCycleConfig
    State = AlternatingToolCycleState
    sees_waits = False  # a wait's answers are no loop evidence (signals/facts.py)

    config: AlternatingToolCycleConfig

    def __init__(self, config: SignalConfig | None = None) -> None:
        super().__init__(config)
        self.max_period: int = self.config.max_period
        self.laps: int = self.config.laps
        self.need: int = self.max_period * self.laps
        self._spans = tuple((p, p * self.laps) for p in range(2, self.max_period + 1))
        self.result_aware: bool = self.config.result_aware
        # Results are read (paired with their calls, fingerprinted) only when result-aware.
        self.needs_pairing = self.needs_fingerprint = self.result_aware

    def history_needed(self) -> int:
        return 0 if self.exempt else self.need

    def is_latched(self, state: Any) -> bool:
        return bool(state.pattern)

    def on_result(self, state: Any, result: ResultView) -> Finding | None:
        if not self.result_aware:
            if state.answers is not None:
                state.answers = None  # kept by a result-aware policy: stale from here on
        elif not (self.exempt and result.tool in self.exempt) and not result.call_flags & FLAG_ASK:
            # (A question to the user is answered by the user: a reply in new words is
            # no news of the world, so an ask is never the lap's moving answer.)
            # By the gist: a crash loop's "Restart Count: 15" after "14", or a clock in
            # the answer, is no news; a page further down or a bisection step is.
            # ("processing" again after a pause is news too: the job is still running and
            # the agent waits for it; see note_answer.)
            key = result.call_key
            if state.writes and key in state.writes:
                flaky = state.flaky
                if failed_transiently(result):
                    if key not in flaky:
                        state.flaky = (*flaky[1 - self.max_period :], key)
                elif key in flaky:
                    state.flaky = tuple(k for k in flaky if k != key)
                    if not result.failed and key not in state.through:
                        # It went through at last: news of the world (a payment made after
                        # three time-outs), so laps count from here, as after a request.
                        # Once: going through again after more refusals is no news.
                        state.through = (*state.through[1 - self.max_period :], key)
                        self.on_repeated_prompt(state)
                # A write refused by a service down or busy (a 502, a 429), sent again
                # after a back-off, made nothing: its changing failures are the service's
                # news, not new things its laps made (an upload retried through an
                # incident, the status page read between tries, was halted at its third
                # lap). Any other answer of it ends that.
                refused = state.refused
                if result.failed and result.paused and says_transient(result.error):
                    if key not in refused:
                        if not refused:
                            state.refusals = 0  # (a new outage's refusals count from one)
                        state.refused = (*refused[1 - self.max_period :], key)
                    state.refusals = min(state.refusals + 1, 255)
                elif key in refused:
                    state.refused = tuple(k for k in refused if k != key)
                    state.refusals = 0
            note_answer(state, result, gist=True)
        return None

    def on_repeated_prompt(self, state: Any) -> None:
        # The request repeated word for word ("Run the monitoring playbook for
        # clinic-prod", from a scheduler every half hour): the same playbook gone through
        # again answers it and is no lap of the agent's own. Laps count from here. (A
        # reply in new words, "Postgres, as I said", is no repeat: an agent going through
        # the same calls while its user protests is looping.)
        if state.seen:
            state.seen = 0
        if state.ring:
            state.ring.clear()

    def on_call(self, state: Any, call: CallView) -> Finding | None:
        key = call.key
        if self.exempt:
            if call.tool in self.exempt:
                return None
            history = push_own_ring(state, key, self.need)
            available = len(history)
        else:
            history = call.history
            if state.seen < self.need:
                state.seen += 1
            available = state.seen
            if len(history) < available:
                available = len(history)
        names = state.names
        names.append(intern(call.tool))  # shared, not one copy per session
        if len(names) > self.max_period:
            del names[0]
        if call.write and not call.runner and key not in state.writes:
            state.writes = (*state.writes[1 - self.max_period :], key)
        elif call.runner and call.write and call.action in COMPUTER_ACTS and key not in state.screens:
            state.screens = (*state.screens[1 - self.max_period :], key)

        for period, span in self._spans:
            if span > available:
                break
            # Cheapest rejection first: this call against its echo one lap back.
            if history[-1 - period] != key or not _repeats(history, period, span):
                continue
            block = history[-period:]
            if block.count(key) == period:
                continue  # one call repeated: repeated-tool-call's to report
            pattern = smallest_rotation(block)
            if pattern == state.pattern:
                return None
            flaky = state.flaky
            if flaky and any(k in flaky for k in block):
                # A retry of a write the service refused for a passing reason, with checks
                # between tries: failure-loop's rule for such failures, twice the laps.
                # Counted call by call while the laps go on (no longer history kept).
                state.flaky_run += 1
                if state.flaky_run <= span * (TRANSIENT_LAPS - 1):
                    return None
            if self.result_aware and state.answers and _lap_moves(state, block):
                # A lap whose answers move (a page further down, a bisection step):
                # paging or polling, not a loop. Left unlatched, so a lap that stops
                # moving is judged again.
                return None
            state.pattern = pattern
            return self._finding(names[-period:], period)
        if state.pattern:
            state.pattern = ()
        if state.flaky_run:
            state.flaky_run = 0
        return None

    def preview_state(self, state: Any) -> Struct:
        ring = list(state.ring) if state.ring is not None else None
        answers = dict(state.answers) if state.answers is not None else None
        return replace(state, pattern=(), names=list(state.names), ring=ring, answers=answers)

    def _finding(self, tools: list[str], period: int) -> Finding:
        sequence = " → ".join(tools)
        laps = self.laps
        reason = (
            f"The agent ran the same {period}-call sequence ({sequence}) {laps} times in a "
            "row with unchanged arguments on every lap. No single call repeats back to back, "
            "so the consecutive-repeat check cannot see this loop. Under enforce the halting "
            "controller stops the session; a cost ceiling is the hard backstop. If this is a "
            "hand-rolled poll, wait_and_verify is the supported way to wait."
        )
        guidance = (
            f"You have gone through the same sequence of {period} calls ({sequence}) {laps} "
            "times with unchanged arguments. Every lap fed in what the previous lap fed in, so "
            "it could only hand back what you already had. Step out of the pattern: act on "
            "the results you hold, alter an argument or a tool, or stop and explain what you "
            "need in order to continue."
        )
        return Finding(
            signal=SIGNAL_ID,
            severity="critical",
            scope="session",
            reason=reason,
            guidance=guidance,
            detail={
                "period": period,
                "laps": laps,
                "calls": period * laps,
                "tools": list(tools),
                "max_period": self.max_period,
            },
        )
