"""``repeated-tool-call``: the same call, issued again and again in a row.

What it catches
    The plainest runaway there is: an agent that keeps issuing one tool call
    with the same arguments back to back, most often re-reading one file. The
    run is anchored on its *first* call: a call extends the run when it names
    the same tool and its arguments are equivalent to the anchor's under
    :func:`streamguard.canonical.args_equivalent` (path-shaped values cleaned,
    plus the path suffix relation, so ``main.go``, ``./main.go`` and
    ``/workspace/main.go`` are one call). Anything else starts a new run of one.
    Anchoring, rather than comparing with the previous call, is what keeps the
    non-transitive suffix relation from chaining: ``/repo/a/main.go`` followed
    by ``b/main.go`` is a break. The price is accepted: ``main.go``,
    ``a/main.go``, ``b/main.go``, ... all relate to the anchor, so they are one
    run. A note the agent keeps between the calls (``think``, ``TodoWrite``:
    ``NEUTRAL_TOOLS``) is no call of the run and does not break it.

Threshold
    Five calls (``threshold``, clamped to at least 2). Re-issuing a call once
    or twice is ordinary (a re-read after an edit, a retry after a transient
    error); by the fifth unchanged call the agent has had four identical
    answers and is learning nothing. One alert per run: the latch clears only
    when a non-equivalent call starts a new run (or on a reset), and the next
    run alerts again. A message to the agent that repeats the one before word for
    word, ten minutes or more after it (a daily "Scheduled task run: check
    my case", ``on_repeated_prompt``), ends the run: the same read after it answers the request anew (a scheduled status
    check, a week of "Case Was Received", was halted at its fifth day). Messages in
    new words do not, nor the same words within minutes (a harness's nudge): the
    same call after each is the agent's own repeat. The same answer to a call asked
    again after the user said something new (``ResultView.asked``), the agent itself
    having said something new since (``ResultView.parrot`` false), counts as a change of the
    run: the read answers the user's report (a customer's line re-read after each thing
    they tried on the phone). An agent that says again what it said before gets no such
    credit.

Severity
    Critical, session scope. This detector can prove what it reports: the
    arguments are equivalent on every call, so the results are too, and no
    progress is possible by repeating. Under enforce it halts the session.

Results (``result_aware``, default on; off is the reference behaviour)
    The watchdog pairs each result with its call, so the run knows what its
    calls returned (``ResultView.outcome``: the payload fingerprint or the
    agent's digest; unknown for an empty payload).

    * *Identical call, identical result*: ``same_result_threshold`` (4) pairs in
      a row trip at the fourth result, one call before the blind rule. Four
      identical answers to one question are as conclusive as five questions:
      OpenHands' stuck detector stops an agent on four identical
      action-observation pairs, and in the development corpus
      (docs/detection.md) no normally finished session had more than four.
    * *Identical call, changing result*: a poll (a job's status, SWE-agent's
      ``scroll_down`` paging through a file), not a loop. No halt while each
      result differs from the last; the moment results stop changing the pair
      count starts from there. A poll that goes on for ``polling_warn_after``
      (20) calls raises one warning, since an agent waiting that long should
      say what it waits for; tools in ``polling_tools`` (``*status*``,
      ``wait*``, ``poll*``, ``get_job*``...) poll by design and get none.
    * *Identical call, the same answer given at another time*: an answer that
      differs from the last only in the points in time it carries
      (``steady_answer``: ``"checked_at": "2025-11-28T14:01:20Z"``, an epoch,
      the clock time each line of a log opens with, ``[16:02:05] [WARNING] ...``),
      or in how long the run took, where the output says so ("1 error in
      0.21s", then "in 0.23s"; an ``nmap`` scan "scanned in 183.11 seconds",
      then "in 192.20 seconds"), is the same answer again, not a poll: a job
      polled after it failed, its status stamped with each check's time,
      mini-SWE-agent re-running one failing test thirteen times, a full-port
      scan re-run twelve times unchanged and ``sqlmap ... | tail`` re-run against a
      parameter it found not injectable trip at the fifth answer of
      the run (the first is never compared: it is read only once an answer
      changes, so the usual path costs nothing). What this costs: a command
      timed by hand, run again and again with nothing else in its output
      changing, reads as one question asked again (a benchmark prints what
      it measured, which is news).
    * *Identical call, failing*: an unchanged failing call is ``failure-loop``'s
      (one rule for "same call, same error"), so a run with failed results
      does not trip here. A failure between two identical answers ends their run
      (identical answers are counted in a row): a flaky test re-run on purpose to
      see how often it fails (pass, pass, fail, pass, pass, pass, fail...) was
      halted at its fourth pass in two blind batches, the failures between not
      counted; the fourth identical answer after the last failure trips.
    * Calls that write (an identical edit re-sent) are never a poll: their
      result changes because of them. For the same reason an identical write
      re-applied counts its successes as identical answers, whatever they say
      (the file a re-applied insert grows, a new message id for the same
      message sent again): its fourth success trips, one call before the
      blind rule, reported as the same change made again (not "the same
      result"). Which calls write is the watchdog's reading (the event's kind,
      the verification globs, the words of the tool's name); a read's glob such
      as ``show*`` names only tools that open with its word, so
      ``showings_create``, one showing booked twenty-two times over in a blind
      batch, is a write made again and no look. In the real-session benchmark this halts a loop of one
      SWE-agent edit re-applied four times at its fourth application rather
      than at a later run's fifth call (11 calls before the budget ran out
      instead of 0) and four other loops of re-applied edits one call sooner;
      no normally finished session changes. A command runner's write
      is left to the blind rule: it is a generous guess (a build or a test
      script re-run counts as one, see :mod:`streamguard.signals.facts`), and a
      build's changing output is no proof of a loop.
    * A question to the user (``CallView.ask``: ``ask_human``, ``kind:
      "user_input"``) re-asked identically is read like a write re-applied: its
      answers change because the user replies ("yes", "yes please", "I said
      yes"), not because anything the agent waits for moved, so the fourth reply
      to one question trips.
    * *A test that passes, re-run*: the same test command (``pytest``, ``jest``, ``go
      test``, ``cargo test``...) answered with a pass and no failure, alike, is a check
      that it no longer flakes, up to ``PASSED_RERUNS`` (10) runs: five blind sessions
      re-running a fixed flaky test on purpose were halted at the fifth run. Past the
      tenth pass in a row it trips.
    * Calls that wait on purpose (``sleep 60``, the empty command OpenHands
      sends to wait for more output; ``CallView.wait``) and reads after a wait of
      their own (``sleep 60 && gh run view 42``: ``CallView.waits_first``) are
      a poll whatever they answer: identical answers are what waiting looks
      like. They get the polling warning after ``polling_warn_after`` calls,
      failing or not (the failure signals do not read waits), even a tool in
      ``polling_tools`` when its answer never changed (a ``wait_for_approval``
      denied again and again has nothing else to report it), never a halt but at the
      ``polling_halt_after``-th identical failure in a row (below), or, for a read after
      a wait of its own, at the ``polling_halt_after``-th identical answer in a row that
      never moved (``MOVED_POLL_FACTOR`` times as many after one that moved; the reads one
      poll however each waits and is joined to its wait, :func:`_same_read_after_wait`;
      and so for OpenHands' wait for more output answered that none came,
      :func:`_nothing_new`, which reads that output), when no watch was asked (a parcel's tracking read after ``sleep 30``,
      "LABEL_CREATED" 110 times in a blind batch, was only warned; no healthy session of
      the 72 blind batches 263rd–334th had so many)
      (under ``result_aware = false``, the reference rule, they count like any
      call). Except a wait answered that nothing is running (OpenHands' empty command
      answered ``ERROR: No previous running command``, :data:`NOTHING_RUNNING`): there
      is nothing to wait for, and the fourth such answer in a row trips like any
      identical pair (an agent waiting for output of a test run killed long before
      was a poll for ever).
    * *A status still under way, asked after a pause*: the same answer for the
      fourth time that says the work it reports on has not ended
      (``says_in_progress``: ``"status": "pending_payment"``, ``State: RUNNING``)
      when the session paused since the call was last answered (a wait, its
      user's message, or ``[waits] pause_seconds`` of quiet:
      ``ResultView.paused``) is a poll like a wait's: the polling warning after
      ``polling_warn_after`` calls; a halt only at the ``polling_halt_after``-th (25)
      such answer in a row, when what the poll waits for has not moved in all those
      checks (a job that will never start; never under a watch the session's user asked
      for: the user asked to wait). In the blind batches 183–262 this halts 23 loops that
      were only warned (polls of 26 to 48 identical answers) and adds one false critical,
      a 64-node job pending for resources read every minute for 33 minutes; no other of
      the 3,360 healthy sessions had more than 21 such answers in a row. A poll paced by
      wait calls of its own (a wait, the status, a wait...), whose asks each start a run,
      is followed across the waits (``poll_key``, ``poll_count``) and trips the same way,
      once: three more loops, no healthy session. Only answers that say the work is under
      way count, or a value with no word of an end read after each wait by a call known
      to only read, when it never moved since the poll began (``poll_moved``) and no
      watch was asked: a download dead at 1.9G, its ``du -sh`` read after each ``sleep
      30`` forty times, was only warned in a blind batch, while ``sleep 30; du -sh`` in
      one command tripped (above); a value that moved earlier in the poll trips only at
      ``MOVED_POLL_FACTOR`` (2) times as many identical reads since it last moved. A wait
      that fails the same way again and
      again (``kubectl rollout status --timeout=60s`` timing out on the same replicas; the
      failure signals do not read waits) trips at its ``polling_halt_after``-th identical
      failure in a row: one more loop, no healthy session. A booking polled every sixteen seconds while its payment
      authorises, or a refund checked again each time the customer asks, is
      waiting; so is a bill "Awaiting Payment" checked each time its customer reports
      from the bank app (tau2-bench's telecom bills; halted at the fourth check before
      "awaiting" was read as a status under way). The same status asked as fast as the agent can ask (the
      ``list_agents → check_agent`` "pending" loop), or a status that says the
      work ended ("failed" four times), trips as before. After a deliberate wait
      (a wait call, a ``sleep``, or ``[waits] wait_seconds`` of quiet, two minutes by
      default: a check scheduled every few minutes; or half the interval its user asked
      checks at, ``[waits] asked_intervals``: a breaker read every 30 s as asked until it
      opens), an unchanged value with no word
      of an end is a poll's answer too (``poll_answer``): a storm-alert list read every
      ten minutes, unchanged for a while, was halted in a blind batch. Nothing found is
      not excused so, unless the session's user asked the agent to watch for something
      (``[waits] asked_watches``: "text me the moment it arrives", "tell me if anything
      fires"): nothing yet is then the answer awaited (an inbox read empty every five
      minutes for a lease renewal was halted in a blind batch). Each ask needs a wait of
      its own. Within ``[waits]
      restart_seconds`` (20 minutes) of a call that restarted something (a router's
      ``reload`` through its ssh tool, ``systemctl restart``, ``reboot_device``), a read
      asked after a pause that answers the same again is a probe waiting for it to come
      back (``ResultView.restarting``): two healthy sessions of one blind batch, a switch
      and a router pinged every minute while they rebooted, were halted at the fifth ping.
      And once the run's answer has moved on its own (the same answer at least twice,
      then another: a room ``VD``, ``VD``, then ``CIP``), the same answer again asked
      after a pause is a poll's when it says a value and no word of an end to a call
      known to only read (``moved_poll_answer``): what moved once moves again, and a
      stage that lasts a few checks is waiting. A hotel's room polled every two minutes
      through dirty, cleaning, clean and inspected was halted at the fourth "cleaning in
      progress" (a code, ``CIP``, no word of work under way). What moved to an end
      ("failed" after "pending"), to nothing, or is asked without a pause trips as before.
    * Unknown results keep the blind rule: ``threshold`` calls in a row. An
      empty payload is unknown (a runtime that does not capture results sends
      none), except an empty answer to a read by an id the session's own act
      handed back (``FLAG_AWAITS_OWN``: a render's history read by the id its
      queueing returned, ``{}`` until it is done; work under way, read as
      ``says_in_progress`` reads "pending": a blind batch's render poll every
      16 s was halted at its fifth read) and the empty output of a command
      runner's call (``""`` sent as the result of ``bash``): a program that printed nothing has
      answered, and the same command printing nothing four times is four
      identical pairs. In the real-session benchmark this halts one loop (a
      script re-run 24 times, silent every time) one call sooner, and no
      normally finished session.
    * One behaviour, one alert: a call this rule reported that comes back after
      an interleaved call (``status ×4, logs, status ×4…``) is the same answered
      question asked again; its new run starts latched, and ``dominant-tool-call``
      defers to that latch. Runs reported by the blind rule alert again after an
      interleave, as the reference does.

Known false positives
    A hand-rolled poll that re-issues one status call until something changes
    and gets the same answer four times (``wait_and_verify`` is the supported
    way to wait), and the anchoring consequence above, where calls naming
    different files that all end in the anchor's path are counted as one run.
    Free-text arguments go the other way (a reworded call is a different call);
    ``repeated-tool-name`` covers them.
"""

from __future__ import annotations

import re
from sys import intern
from typing import Annotated, Any

from msgspec import Meta, Struct, field
from msgspec.structs import replace

from ..canonical import CanonicalArgs, args_equivalent, restore_canonical, truncate_middle
from .base import (
    CallView,
    Finding,
    ResultView,
    Signal,
    SignalConfig,
    moved_poll_answer,
    poll_answer,
    says_in_progress,
    steady_answer,
)
from .facts import (
    FLAG_ASK,
    FLAG_AWAITS_OWN,
    FLAG_READ,
    FLAG_RUNNER,
    FLAG_WAITS_FIRST,
    FLAG_WRITE,
    NEUTRAL_TOOLS,
    tool_glob_matcher,
)

MOVED_POLL_FACTOR = 2
"""How many times ``polling_halt_after`` identical reads a value read between waits needs
when it moved earlier in the poll (a download that grew, then stalled): what moved once
may move again, so it waits longer, but not for ever."""
_LEADING_SLEEP = re.compile(r'"sleep[ \t]{1,8}\d{1,6}(?:\.\d{1,3})?[smh]?[ \t]{0,8}(?:;|&&)[ \t]{0,8}')
"""A command's opening wait and what joins it to the rest (``sleep 10; ``, ``sleep 30 &&
``), in canonical text: both joins run what follows, since a sleep always succeeds."""


def _same_read_after_wait(anchor: str, text: str) -> bool:
    """Whether two reads read the same thing, whatever each waited first and however the
    wait was joined to the read (``sleep 10; tail -n 3 run.log``, ``sleep 30 && tail -n 3
    run.log``, ``tail -n 3 run.log``): one poll, paced as its agent saw fit (on_call asks
    it only of a run that opened with a read after a wait). Compared as sent, sixty polls
    of a hung test log, one in eleven joined by ``&&``, were six runs and never reached the
    count of a read that does not move."""
    return _LEADING_SLEEP.sub('"', anchor, count=1) == _LEADING_SLEEP.sub('"', text, count=1)


PASSED_RERUNS = 10
"""Identical passing runs of one test command that are a check of its flakiness, not a loop
(:func:`_test_passed`)."""
_TEST_ACTION = re.compile(
    r"(?:(?:npx|bunx) )?(?:pytest|py\.test|jest|vitest|mocha|rspec|phpunit|tox|nox|ctest"
    r"|(?:go|cargo|npm|yarn|pnpm|mvn|gradle|dotnet|make|bazel) test)\b"
    # a test program run by its own name (`./build/tests/test_threadpool --repeat 10`,
    # `./bin/unit_tests`): its action is the program's name
    r"|test_[\w-]{1,64}$|[\w-]{1,64}_tests?$"
)
_TEST_PASSED = re.compile(
    r"(?i)\b[1-9]\d*\s+pass(?:ed|ing)\b|^ok\s|(?-i:\bPASS(?:ED)?\b)|\ball tests passed\b|\btests? passed\b"
)
_TEST_FAILED = re.compile(r"(?i)\b[1-9]\d*\s+(?:failed|failing|errors?)\b|(?-i:\bFAIL(?:ED|URE)?\b)")


def _test_passed(result: ResultView) -> bool:
    """Whether ``result`` is a test run's that passed (its action a test runner's:
    :data:`_TEST_ACTION`; its short output a pass and no failure): the same test re-run
    after a fix, its passes alike, checks that it is no longer flaky."""
    if result.failed or not _TEST_ACTION.match(result.action or ""):
        return False
    payload = result.event.result
    if type(payload) is not str or len(payload) > PASSED_TEXT:
        return False
    return _TEST_PASSED.search(payload) is not None and _TEST_FAILED.search(payload) is None


PASSED_TEXT = 2_048
"""Longest test output read for a pass."""

SIGNAL_ID = "repeated-tool-call"
EMPTY_OUTPUT = 0x454D505459
"""The outcome of a command runner's empty output (a program that printed nothing)."""
ARGS_LIMIT = 200
"""Bytes of arguments quoted in alert text."""
DEFAULT_POLLING_TOOLS = ("*status*", "wait*", "poll*", "get_job*", "check_job*", "*progress*",
                         "watch*", "tail_log*", "health*", "healthcheck*")
ANCHOR_TEXT_LIMIT = 512
"""Largest anchor text kept for the path suffix comparison (bytes of canonical JSON).

Larger anchors are compared by call key only: cleaned spellings still match,
only the suffix relation (``/workspace/a.go`` against ``a.go``) is lost. This
bounds per-session state when path-bearing calls carry bulky content.
"""


class RepeatedToolCallConfig(SignalConfig, kw_only=True, forbid_unknown_fields=True):
    """Policy table of ``repeated-tool-call``."""

    threshold: Annotated[int, Meta(ge=2)] = 5
    """Consecutive equivalent calls that trip the signal (results unknown)."""
    result_aware: bool = True
    """Read the results of the run's calls (false: the reference behaviour)."""
    same_result_threshold: Annotated[int, Meta(ge=2)] = 4
    """Consecutive identical call-and-result pairs that trip the signal."""
    polling_warn_after: Annotated[int, Meta(ge=0)] = 20
    """Identical calls with changing results that raise one warning (0: never)."""
    polling_halt_after: Annotated[int, Meta(ge=0)] = 25
    """Identical answers in a row, each a poll's (the work still under way, asked after a
    pause), that trip the signal: what the poll waits for has not moved in that many
    checks (0: never; a watch the session's user asked for never trips so)."""
    polling_tools: list[str] = field(default_factory=lambda: list(DEFAULT_POLLING_TOOLS))
    """Tools that poll by design: no warning while their results change (globs)."""


class RepeatedToolCallState(Struct, tag=SIGNAL_ID, gc=False, omit_defaults=True):
    """Per-session state: the current run and its anchor (never raw payloads)."""

    run: int = 0
    """Length of the current run of equivalent calls (0: no call seen yet)."""
    latched: bool = False
    """The current run has already been reported."""
    tool: str = ""
    """Tool name of the anchor."""
    key: int = 0
    """Call key of the anchor (tool plus cleaned arguments)."""
    text: str = ""
    """The anchor's canonical text, kept only when it has path-shaped keys or is a read
    after a wait of its own, and is at most :data:`ANCHOR_TEXT_LIMIT` long; empty
    otherwise."""
    last_key: int = 0
    """Call key of the run's latest call (an equivalent spelling may differ)."""
    outcome: int = 0
    """Outcome of the run's latest known successful result (0: none yet)."""
    frozen: int = 0
    """Consecutive results of the run equal to ``outcome``, ending at the latest."""
    changes: int = 0
    """Times a result of the run differed from the one before it."""
    poll_key: int = 0
    """Call key of the read a wait came after (0: none since the last other call): a read
    asked again between waits (``sleep 60``, the status, ``sleep 60``, the status) is
    followed across them."""
    poll_count: int = 0
    """That call's answers in a row saying its work is under way, asked after a pause
    (``says_in_progress``), or a value with no end said, read after a wait, the same each
    time, waits between them not counted: a poll that never moves, however it paces
    itself."""
    poll_report: int = 0
    """What the latest of them said apart from when it was given (``steady_answer``)."""
    poll_moved: bool = False
    """Whether that call's answer changed since the poll began: a value read between waits
    (no word of work under way) trips only when it never did."""
    fail_code: int = 0
    """32 bits of the latest failure of a run of waits (``failure_outcome``)."""
    fail_run: int = 0
    """That run's failures in a row equal to ``fail_code``: a wait that fails the same way
    again and again (reset by a success)."""
    moved: bool = False
    """The run's answer changed after it had stayed the same (a room "VD" twice, then
    "CIP"): what the run polls moves on its own."""
    polled: bool = False
    """The polling warning was raised for this run."""
    passed: bool = False
    """The run's latest answer was a test that passed (``_test_passed``): re-runs up to
    ``PASSED_RERUNS`` check its flakiness."""
    write: bool = False
    """The run's calls write, or ask the user: their results change because of them (or
    of the user's reply), which is no poll."""
    wait: bool = False
    """The run's calls wait on purpose (``sleep 60 && gh run view``): a poll, whatever
    their answers."""
    progress: bool = False
    """The run's unchanged answer is a poll's (``poll_answer``: it says the work it reports
    on is still under way and the agent paused before asking again, or it says a value
    after a deliberate wait): a poll, like a wait."""
    report: int = 0
    """What the run's latest changed answer said apart from when it was given
    (``steady_answer``; 0: not compared yet)."""
    failed: int = 0
    """Failed results of the run (an unchanged failing call is failure-loop's)."""
    reported: int = 0
    """Call key of the last run reported by the same-result rule: a later run of
    the same call, after an interleaved one, asks the same answered question
    again; it is the same behaviour going on and starts latched (one behaviour,
    one alert; the density rule defers to that latch). Runs reported by the
    call-only rule keep the reference behaviour: a new run alerts again."""


class RepeatedToolCall(Signal):
    """Trips on ``threshold`` consecutive calls equivalent to the run's first call."""

    id = SIGNAL_ID
    severity = "critical"
    scope = "session"
    Config = RepeatedToolCallConfig
    State = RepeatedToolCallState

    config: RepeatedToolCallConfig

    def __init__(self, config: SignalConfig | None = None) -> None:
        super().__init__(config)
        cfg = self.config
        self.threshold: int = cfg.threshold
        self.result_aware: bool = cfg.result_aware
        self.same_result_threshold: int = cfg.same_result_threshold
        self.polling_warn_after: int = cfg.polling_warn_after
        self.polling_halt_after: int = cfg.polling_halt_after
        # Results are read (paired with their calls, fingerprinted) only when result-aware.
        self.needs_pairing = self.needs_fingerprint = self.result_aware
        self._polling = tool_glob_matcher(cfg.polling_tools)
        self._polling_cache: dict[str, bool] = {}
        # One-entry cache of the last anchor parsed back from its text: a sweep
        # compares every call with the previous one, which was just canonicalised.
        self._anchor_text: str | None = None
        self._anchor: CanonicalArgs | None = None

    def is_latched(self, state: Any) -> bool:
        return bool(state.latched)

    def is_polling_tool(self, tool: str) -> bool:
        """Whether ``tool`` is in ``polling_tools`` (case-insensitive glob)."""
        cached = self._polling_cache.get(tool)
        if cached is None:
            cached = self._polling is not None and self._polling(tool)
            if len(self._polling_cache) >= 512:  # bounded: tool names are untrusted
                self._polling_cache.clear()
            self._polling_cache[tool] = cached
        return cached

    def on_repeated_prompt(self, state: Any) -> None:
        # The request repeated word for word (a daily "Scheduled task run: check my
        # case"): the same read again answers it, and is no repeat of the agent's own.
        # The next call starts a run.
        if state.run:
            state.run = 0
        if state.poll_key:
            state.poll_key = state.poll_count = 0
            state.poll_moved = False

    def on_call(self, state: Any, call: CallView) -> Finding | None:
        if (self.exempt and call.tool in self.exempt) or call.tool in NEUTRAL_TOOLS:
            # (a note the agent keeps, `think`, between the calls of a run: the run goes
            # on, as a message of its own would not break it)
            return None
        if call.wait:
            if not state.poll_key and state.run and not state.wait and self.polling_halt_after:
                # a wait after a read: the read may be a poll paced by waits
                state.poll_key = state.last_key
                state.poll_moved = False
        elif state.poll_key and call.key != state.poll_key:
            state.poll_key = 0  # another call: no paced poll of it
            if state.poll_count:
                state.poll_count = 0
            if state.poll_moved:
                state.poll_moved = False
        if state.run and (
            call.key == state.key
            # _equivalent's first test inline: most calls are another tool's, or their
            # run's anchor has no paths, and the call would only say no.
            or (state.text and call.tool == state.tool and (
                self._equivalent(state, call)
                or (state.wait and not call.wait and _same_read_after_wait(state.text, call.canonical.text))
            ))
        ):
            state.run += 1
            state.last_key = call.key
        else:
            canonical = call.canonical
            # A new run: the fields that restart are stored only where they change (a
            # state field's store costs several times the test, and in a session of
            # distinct calls every call starts a run).
            if state.run != 1:
                state.run = 1
            latched = state.reported != 0 and call.key == state.reported
            if state.latched is not latched:
                state.latched = latched
            state.tool = intern(call.tool)
            state.key = state.last_key = call.key
            if state.outcome:
                state.outcome = 0
            if state.frozen:
                state.frozen = 0
            if state.changes:
                state.changes = 0
            if state.moved:
                state.moved = False
            if state.fail_run:
                state.fail_run = state.fail_code = 0
            if state.polled:
                state.polled = False
            if state.passed:
                state.passed = False
            # An identical question to the user re-asked is read like a write re-applied:
            # its answers change because the user answers, not because anything moved.
            write = call.write or call.ask
            if state.write is not write:
                state.write = write
            # A read asked after a wait of its own (`sleep 30; gh run view`) polls like a
            # wait: a run's jobs answer "completed" and "in_progress" together.
            wait = call.wait or call.waits_first
            if state.wait is not wait:
                state.wait = wait
            if state.progress:
                state.progress = False
            if state.report:
                state.report = 0
            if state.failed:
                state.failed = 0
            if (canonical.paths or call.waits_first) and len(canonical.text) <= ANCHOR_TEXT_LIMIT:
                state.text = canonical.text
                self._anchor_text = canonical.text
                self._anchor = canonical
            elif state.text:
                state.text = ""
        if state.run < self.threshold or state.latched or state.run <= call.asked_runs or (
            state.passed and state.run <= PASSED_RERUNS
        ):
            # (a run no longer than the count its user asked for, "run it 15 times", is
            # what was asked; a test that passed, re-run to see whether it still flakes)
            return None
        if self.result_aware:
            if (state.wait or state.progress) and not state.write:
                # A wait is a poll whatever it answers, failures included (the failure
                # signals do not read waits): one polling warning if it goes on and on, and a
                # halt at the polling_halt_after-th identical failure in a row (on_result).
                # So is a status read whose answer says the work is still under way.
                return self._polling_finding(state, call)
            if state.failed:
                return None  # failing unchanged calls: failure-loop's rule, on the result
            if state.changes and not state.write:
                # Results have been changing: a poll, not (yet) a loop. It becomes
                # one on the result side, once results stop changing.
                return self._polling_finding(state, call)
        state.latched = True
        return self._finding(call, state.run)

    @staticmethod
    def _passed(state: Any, result: ResultView) -> bool:
        """Whether ``result`` is a passing test run's (:func:`_test_passed`), kept on the
        run for its next call."""
        passed = _test_passed(result)
        if state.passed is not passed:
            state.passed = passed
        return passed

    def on_result(self, state: Any, result: ResultView) -> Finding | None:
        if not self.result_aware or not state.run:
            return None
        key = result.call_key
        if key and key == state.poll_key and not state.latched and state.reported != key:
            # The poll followed across the waits that pace it (its run was broken by them).
            finding = self._paced_poll(state, result)
            if finding is not None:
                return finding
        if not key or (key != state.key and key != state.last_key):
            return None
        if result.failed:
            state.failed += 1
            if state.wait and self.polling_halt_after and not state.write:
                # A wait that fails the same way again and again (`kubectl rollout status
                # --timeout=60s` timing out on the same replicas): the failure signals do not
                # read waits, so it is counted here, apart from the run's answers, and what
                # it waits for has not moved at the polling_halt_after-th identical failure
                # in a row (a success between starts the count again).
                code = result.outcome & 0xFFFFFFFF
                if code and code == state.fail_code:
                    state.fail_run += 1
                else:
                    state.fail_code, state.fail_run = code, 1
                if state.fail_run >= self.polling_halt_after and not state.latched and not result.watched:
                    return self._stuck_poll(state, result, state.fail_run)
            if state.frozen:
                # The answers changed: a failure came between them (a flaky test re-run to
                # see how often it fails: pass, pass, fail, pass...). The run of identical
                # answers starts again after it.
                state.frozen = 0
                state.outcome = 0
            return None  # an unchanged failing call is failure-loop's to report
        if state.fail_run:
            state.fail_run = 0  # a success between a wait's failures: they start again
        outcome = result.outcome
        if not outcome:
            if result.call_flags & FLAG_AWAITS_OWN and result.event.result in ({}, [], ""):
                # Asked by the id the session's own write handed back: an empty answer is
                # an answer (nothing yet from that work), not a runtime that sends none.
                outcome = EMPTY_OUTPUT
            elif result.event.result != "" or not result.call_flags & FLAG_RUNNER:
                return None  # unknown: no evidence either way
            else:
                outcome = EMPTY_OUTPUT  # a command that printed nothing said so
        last = state.outcome
        if outcome != last and last and not state.write:
            # A changed answer that says the same apart from when it was given ("checked_at"
            # moved; a failure reported again, "1 error in 0.21s" then "in 0.23s", kept in
            # the text by a harness that records the exit status there): the same again.
            report = steady_answer(result)
            if report and report == state.report:
                outcome = last
            elif state.report != report:
                state.report = report
        if outcome == last and result.asked and not result.parrot and not state.write:
            # Asked again after its user said something new, the agent itself having said
            # something new since (a customer's line record re-read after each thing they
            # tried on the phone, each time with the next step to try): the read answers
            # the user's report, and what the run is about moved on, as a change does.
            # Not when the agent says again what it said before (an upload asked for turn
            # after turn, the empty folder listed after each plea): one of the same.
            state.changes += 1
        elif outcome == last or (state.write and not result.call_flags & FLAG_RUNNER):
            # An identical write re-applied counts like an identical answer: its result
            # changes because of the write itself (the file grows, a new message id),
            # so the change is no news. Not a command runner's: its write is a
            # generous guess (a build or a test script re-run counts as one).
            state.frozen += 1
        else:
            if last:
                state.changes += 1
                if (state.frozen >= 2 or state.changes >= 3) and not state.moved:
                    # (held, then moved; or moved again and again: a replication's table
                    # states, copying one after another. One change alone may be the
                    # answer's own clock, read the first time it is compared.)
                    state.moved = True
            state.outcome = outcome
            state.frozen = 1
            if state.passed:
                state.passed = False
        if (
            state.wait and self.polling_halt_after
            and (result.call_flags & FLAG_WAITS_FIRST or _nothing_new(result))
            and state.frozen >= self.polling_halt_after * (MOVED_POLL_FACTOR if state.moved else 1)
            and not state.latched and not state.write and not result.watched
            and state.frozen > result.asked_runs
        ):
            # A read after a wait of its own answered exactly alike the polling_halt_after-th
            # time in a row, unasked (a parcel's tracking read after `sleep 30`, "LABEL_CREATED"
            # a hundred times): whatever it says, it has not moved in all those waits. One
            # that moved earlier waits MOVED_POLL_FACTOR times as long, as a poll paced by
            # wait calls does (_paced_poll). So does a wait for a running command's output
            # answered that none came (_nothing_new): it reads that output.
            return self._stuck_poll(state, result, state.frozen)
        # (read only once the run's answers repeat, and kept for its next call; a new
        # answer clears it, above)
        passed = state.frozen > 1 and self._passed(state, result)
        if state.frozen < self.same_result_threshold or state.latched or (
            state.wait and not _waits_on_nothing(result)
        ) or state.frozen <= result.asked_runs or (state.frozen < PASSED_RERUNS and passed):
            # (a wait answered the same again: still waiting, see on_call; a test that
            # passes re-run a few times: its flakiness checked, up to PASSED_RERUNS)
            return None
        if not state.write and (
            poll_answer(result) or (state.moved and moved_poll_answer(result))
        ):
            # "processing" for the fourth time, asked again after a pause: the job is
            # still running and the agent waits for it (see on_call). Not "failed" for
            # the fourth time, nor "pending" asked again without a pause: every answer
            # past the threshold is judged so, and the first asked without one trips.
            if not state.progress:
                state.progress = True
            halt = self.polling_halt_after
            if halt and state.frozen >= halt and not result.watched and result.progress == 2:
                # Still "queued" at the twenty-fifth check in a row: what the poll waits
                # for has not moved in all that time (a job that will never start, a
                # hook that never completes). Not under a watch the user asked for: the
                # user asked to wait for it.
                return self._stuck_poll(state, result, state.frozen)
            return None
        if state.progress:
            state.progress = False
        state.latched = True
        state.reported = state.key
        return self._same_result_finding(state, result)

    def _polling_finding(self, state: Any, call: CallView) -> Finding | None:
        after = self.polling_warn_after
        if not after or state.run < after or state.polled:
            return None
        if self.is_polling_tool(call.tool) and (state.changes or not (state.wait or state.progress)):
            # A status read polls by design, and so does a wait whose answer moves. Not a
            # wait whose answer never changes (or that always fails), nor a status that
            # never moves from "processing": neither is read by the loop signals, so this
            # warning is all they get.
            return None
        state.polled = True
        tool = call.tool
        args = truncate_middle(call.canonical.text, ARGS_LIMIT)
        return Finding(
            signal=SIGNAL_ID,
            severity="warn",
            scope="session",
            reason=(
                f"{tool} was called {state.run} times in a row with equivalent arguments {args}; "
                + (
                    "it waits on purpose, so this is a poll, not a proven loop, and nothing is "
                    "halted." if state.wait else
                    "it is asked again after the session paused and its answer says the work "
                    "is still under way, or says the same value after a deliberate wait, so "
                    "this is a poll, not a proven loop, and nothing is halted."
                    if state.progress else
                    f"its result changed {state.changes} times, so this is a poll, not a "
                    "proven loop, and nothing is halted."
                )
                + " A poll this long is worth a look; if the tool "
                "polls by design, add it to polling_tools in the policy."
            ),
            guidance=(
                f"You have called {tool} {state.run} times in a row with the same arguments"
                + (" to wait." if state.wait else
                   " while you wait for its answer to change." if state.progress else
                   " while its answer keeps changing.")
                + " If you are waiting for something, say what "
                "you are waiting for and how long you will wait; if you are not, stop polling "
                "and act on what you have."
            ),
            detail={"tool": tool, "count": state.run, "changes": state.changes,
                    "rule": "polling", "args": args},
        )

    def _same_result_finding(self, state: Any, result: ResultView) -> Finding:
        tool = result.tool or "unnamed tool"
        count = state.frozen
        made = bool(state.write and not result.call_flags & (FLAG_RUNNER | FLAG_ASK))
        if made:
            # A write re-applied: its answers differ by what each application made (a new
            # id, a longer file), so "the same answer" would misreport it.
            reason = (
                f"{tool} was called with equivalent arguments and succeeded {count} times in "
                "a row: the agent keeps making the same change again (each answer differs "
                "only by what the call itself made, such as a new id). Under enforce the "
                "halting controller stops the session; look for duplicates it made, then "
                "`streamguard reset` the session."
            )
            guidance = (
                f"You have made the same {tool} call {count} times in a row and it succeeded "
                "every time, so the change is made, more than once. Do not send it again: "
                "read back what exists, remove the duplicates if they harm, and tell the user "
                "where things stand."
            )
        else:
            reason = (
                f"{tool} was called with equivalent arguments and returned the same result "
                f"{count} times in a row: the agent keeps asking a question it already has "
                "the answer to. Under enforce the halting controller stops the session; look "
                "at what it was trying to do, then `streamguard reset` the session."
            )
            guidance = (
                f"You have made the same {tool} call {count} times in a row and got the same "
                "answer every time. Another identical call will return it again. Use the "
                "answer you have, change the arguments or the tool, or stop and explain where "
                "you are blocked."
            )
        return Finding(
            signal=SIGNAL_ID,
            severity="critical",
            scope="session",
            reason=reason,
            guidance=guidance,
            detail={"tool": tool, "count": count, "threshold": self.same_result_threshold,
                    "calls": state.run, "rule": "same_result",
                    "write": made},
        )

    def _paced_poll(self, state: Any, result: ResultView) -> Finding | None:
        """A read asked again between waits (`sleep 60`, the status, `sleep 60`...): the
        same answer under way at the ``polling_halt_after``-th time in a row trips, as in
        a run; anything else starts the count again."""
        under_way = False
        if (
            result.failed or result.call_flags & (FLAG_WRITE | FLAG_ASK) or not result.outcome
            or not result.paused or not (
                (under_way := says_in_progress(result))
                # or a value with no word of an end, read after a deliberate wait by a
                # call known to only read (a download's size, `du -sh` after each `sleep 30`)
                or (result.waited and result.progress == 3 and result.call_flags & FLAG_READ)
            )
        ):
            # (the answered call's own nature: the run in progress may be another call's;
            # and only work said to be under way, or a value read after a wait: not an
            # end, nothing found, or a read asked without a pause)
            if state.poll_count:
                state.poll_count = 0
            return None
        report = steady_answer(result) or result.outcome & 0xFFFFFFFF
        if state.poll_count and report == state.poll_report:
            state.poll_count += 1
        else:
            if state.poll_count and not state.poll_moved:
                state.poll_moved = True
            state.poll_count, state.poll_report = 1, report
        if state.poll_count < self.polling_halt_after or result.watched:
            return None
        if not under_way and (
            (state.poll_moved and state.poll_count < self.polling_halt_after * MOVED_POLL_FACTOR)
            or state.poll_count <= result.asked_runs
        ):
            # A value that moved once may move again (a slow step of a build): it waits
            # MOVED_POLL_FACTOR times as many reads since it last moved; one that never did
            # in all those waits is not coming (a download dead at 1.9G), unless its user
            # asked for so many reads.
            return None
        count = state.poll_count
        state.poll_key = state.poll_count = 0
        state.poll_moved = False
        return self._stuck_poll(state, result, count)

    def _stuck_poll(self, state: Any, result: ResultView, count: int) -> Finding:
        """Trip on a poll that has not moved in ``count`` checks: the same poll asked again
        starts latched (``reported``), and so does the run it is part of, asked on without
        a wait."""
        key = result.call_key
        state.reported = key
        if key == state.key or key == state.last_key:
            state.latched = True
        tool = result.tool or "unnamed tool"
        answered = (
            "failed the same way each time" if result.failed
            else "answered the same each time that the work is still under way"
        )
        return Finding(
            signal=SIGNAL_ID,
            severity="critical",
            scope="session",
            reason=(
                f"{tool} was asked the same thing {count} times in a row, after pauses, and "
                f"{answered}: what the agent "
                f"waits for has not moved in {count} checks. Under enforce the halting "
                "controller stops the session; look at why it does not move (a job that cannot "
                "start, a step that never completes), then `streamguard reset` the session."
            ),
            guidance=(
                f"You have checked {tool} {count} times and it has not moved once. Checking "
                "again will not move it. Find out why it is stuck, do something about it, or "
                "stop and report what you are waiting for."
            ),
            detail={"tool": tool, "count": count, "threshold": self.polling_halt_after,
                    "calls": state.run, "rule": "stuck_poll", "write": False},
        )

    def preview_state(self, state: Any) -> Struct:
        return replace(state, latched=False)

    def _equivalent(self, state: Any, call: CallView) -> bool:
        """Slow path (keys differ): same tool and path-suffix equivalent arguments."""
        paths = call.canonical.paths
        if not state.text or not paths or call.tool != state.tool:
            return False
        text = state.text
        for value in paths.values():
            # Suffix-equivalent paths share their last component: a cheap necessary
            # condition that spares decoding the anchor for a sweep of distinct files.
            if value.rpartition("/")[2] not in text:
                return False
        anchor = self._anchor
        if anchor is None or self._anchor_text != state.text:
            anchor = restore_canonical(state.text)
            self._anchor_text = state.text
            self._anchor = anchor
        return args_equivalent(anchor, call.canonical)

    def _finding(self, call: CallView, count: int) -> Finding:
        tool = call.tool
        args = truncate_middle(call.canonical.text, ARGS_LIMIT)
        reason = (
            f"{tool} was called {count} times in a row with equivalent arguments {args}; "
            "the agent is most likely stuck in a loop. Under enforce the halting controller "
            "stops the session; look at what it was trying to do, then `streamguard reset` "
            "the session. A cost ceiling is the hard backstop if nobody steps in."
        )
        guidance = (
            f"You have called {tool} {count} times in a row with the same arguments {args}. "
            "An unchanged call gives back an unchanged answer, so another one cannot move "
            "you forward. Vary the arguments or reach for another tool; if no step different "
            "from this one is left, stop making tool calls and explain where you are blocked. "
            "Issuing this call again as it is will not help."
        )
        return Finding(
            signal=SIGNAL_ID,
            severity="critical",
            scope="session",
            reason=reason,
            guidance=guidance,
            detail={"tool": tool, "count": count, "threshold": self.threshold, "args": args},
        )


NOTHING_RUNNING = "ERROR: No previous running command"
"""How OpenHands answers the empty command it sends to wait for more output when no command
is running (``... to retrieve logs from.``, ``... to interact with.``)."""


NO_NEW_OUTPUT = "[The command has no new output after "
"""How OpenHands answers the empty command it sends to wait for more output of a command
still running when none came (``... 30 seconds. You may wait longer ...``)."""
_PREVIOUS_OUTPUT = "[Below is the output of the previous command.]\n"


def _nothing_new(result: ResultView) -> bool:
    """Whether a wait's answer says the command it waits on printed nothing new
    (:data:`NO_NEW_OUTPUT`, after the runtime's ``[Below is the output of the previous
    command.]``): the wait reads that command's output, and reads it unchanged. A hung test
    run waited on forty times in a blind batch was only warned; no healthy session of the
    batches 263rd–352nd had more than 15 such answers in a row."""
    payload = result.event.result
    if type(payload) is not str:
        return False
    if payload.startswith(_PREVIOUS_OUTPUT):
        payload = payload[len(_PREVIOUS_OUTPUT):]
    return payload.startswith(NO_NEW_OUTPUT)


def _waits_on_nothing(result: ResultView) -> bool:
    """Whether a wait's answer says there is nothing to wait for: OpenHands' empty command
    answered :data:`NOTHING_RUNNING` (the test suite it waited on was killed long ago).
    Such a wait answered alike four times is the same question asked again, not waiting."""
    payload = result.event.result
    return type(payload) is str and payload.startswith(NOTHING_RUNNING)
