"""The per-session watchdog: signals in, alerts, trips and feedback out.

Pure, synchronous and deterministic: a :class:`Watchdog` holds one policy's
signals and no session data; every call takes the session's
:class:`SessionState` and mutates it. The same stream of events always yields
the same outputs, with the same ids — which is what replay, snapshot/restore and
duplicate-dropping consumers rely on.

What happens to a signal's finding depends on the mode (a ladder: each rung
includes the one before it):

``off``
    The watchdog's signals do not run. (Cost ceiling and context budget are
    separate guardrails: they act whenever configured.)
``warn``
    Every finding becomes an ``alert`` event.
``feedback``
    ... and its model-facing guidance is queued (at most ``feedback_queue_size``
    notes, oldest dropped) and delivered as one ``feedback`` event at the next
    real turn start — the block an agent runtime prepends to the model's next
    turn. A note from a signal that is ``withdrawn_by_text`` is dropped when the
    agent speaks before delivery. Nothing is queued below this mode, so raising
    the mode later never delivers a stale backlog.
``enforce``
    ... and a critical finding trips: session scope halts the session
    (``guardrail_trip`` with ``session_halted``), turn scope cuts the turn in
    flight. ``halt_after_cut_turns`` (3) consecutive turns cut by the same
    guardrail halt the session; a turn that ends without a cut clears the count.
    After a non-escalating watchdog cut the detectors start afresh.

streamguard watches from outside: it cannot refuse a turn. A halted session
that starts another turn therefore raises ``halt-ignored`` (critical) at each
such ``turn_start`` — which is *not* a turn boundary, just as a refused turn is
not one — and at the first tool call that arrives with no ``turn_start`` since
the halt or the cut: the halting controller did not stop the agent.

Operator resets (``watchdog``, ``cost_ceiling``, ``all``) clear halts, cut counts
and run-length state but keep queued feedback, so the first turn after a reset
tells the model why it was stopped.
"""

from __future__ import annotations

import re
import zlib
from hashlib import blake2b
from itertools import islice
from sys import intern
from typing import Any

import msgspec
from msgspec import Struct, structs

from .canonical import (
    call_key,
    canonicalize,
    fingerprint_payload,
    fingerprint_size_encoding,
    payload_size,
)
from .events import (
    Alert,
    FinalAnswer,
    GuardrailReset,
    GuardrailTrip,
    Output,
    Reset,
    Text,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnStart,
    Usage,
)
from .events import Feedback as FeedbackEvent
from .fleet_windows import FLEET_GUARDRAIL, FLEET_SIGNAL, fleet_trip_id
from .policy import MODES, Policy
from .signals import signal_classes
from .signals.base import (
    ACTED,
    ANSWERED_KEPT,
    COUNT_MASK,
    DIGIT_CHARS,
    HALT_IGNORED,
    NO_OP_OUTCOME,
    WAITED,
    CallView,
    Finding,
    ResultView,
    Signal,
    add_request,
    asked_between,
    find_entry,
    outcome_of,
    overrides,
    paced_between,
    paused_between,
    previews,
    retry_after_seconds,
    says_unreachable,
    waited_between,
)
from .signals.facts import (
    ASKED_REPETITIONS_MAX,
    CELL_ERROR_HEAD,
    CELL_TOOLS,
    FLAG_ASK,
    FLAG_ASKED,
    FLAG_AWAITS_OWN,
    FLAG_LONG_POLL,
    FLAG_READ,
    FLAG_RESTART,
    FLAG_RUNNER,
    FLAG_SEARCH,
    FLAG_SHELL,
    FLAG_WAIT,
    FLAG_WAITS_FIRST,
    FLAG_WRITE,
    HANDED_BACK,
    LONG_POLL_KEYS,
    MCP_WRAPPERS,
    OBSERVATION_TOOLS,
    RUNNER_ANSWER_HEADS,
    SCREEN_HEADS,
    TIME_LIKE,
    WRAPPED_PREFIX,
    CallFacts,
    CommandRunners,
    ToolGlobs,
    act_items,
    argument_facts,
    asked_interval,
    asked_repetitions,
    asks_to_wait,
    asks_watch,
    call_args,
    command_text,
    commands_restart,
    ends_with_exit_code,
    handed_ids,
    id_text,
    is_code_tool,
    mcp_answer,
    name_words,
    names_no_act,
    names_restart,
    pattern_search,
    plain_facts,
    runner_answer,
    runner_facts,
    sent_values,
    wrapped_call,
)
from .snapshot import SnapshotCodec, peek_agent

OFF, WARN, FEEDBACK, ENFORCE = range(4)
_NO_OUTPUT: list[Output] = []  # shared, never mutated: the common case allocates nothing

MAX_PENDING = 8
"""Calls remembered while they await their result (oldest dropped)."""
MADE_KEPT = 16
"""Distinct named writes remembered, for whether a write is made again (SessionState.made)."""
SUBMITTED_KEPT = 8
"""Ids the session's acts handed back, remembered (SessionState.submitted)."""
ACTS_KEPT = 4
"""Calls that act remembered while their answers are awaited (SessionState.acts)."""
ASKED_SEEN = 8
"""Calls remembered after a user asked for runs, until one of them is sent again."""
ASKED_SETTLED = 3
"""Sends after which the call taken for the asked one keeps that place."""
SUBMITTED_READ = 4096
"""Characters of a read's canonical arguments looked through for an id the session's acts
handed back."""
SUBMITTED_MIN = 8
"""Fewest characters of an id remembered so (a short number would be found anywhere; dates,
as long, are left out by their shape)."""
MAX_KEYED_ARGS = 64
"""Arguments of one call read for ids a write handed back (as the canonical form reads paths)."""
_FACTS_CACHE_MAX = 512
PROMPT_READ = 512
"""Characters of a message to the agent compared with the one before (``SessionState.prompt``)."""
_CHECKS_PENDING_EXIT = re.compile(r"(?i)\bexit(?:ed)?(?: with)? (?:code|status):? 8\b")
"""An error that says the program exited with status 8 (``Exit code 8``, ``exit status 8
(checks pending)``): ``gh pr checks``' status for checks still pending."""


def _pending_action(pending: list[tuple[str, str, int, int, str]], event: ToolResult) -> str:
    """The action of the pending call ``event`` answers, as :meth:`Watchdog._pair` would
    take it, without taking it ("" when none)."""
    call_id = event.call_id
    for entry in pending:
        if (entry[0] == call_id) if call_id else (not entry[0] and entry[1] == event.tool):
            return entry[4]
    return ""


DRY_RUN_PASSED = "OK"
"""What AWS's ``DryRunOperation`` error says, read as the success it is: a bare answer, as
"200" for one more endpoint is (neither stale nor news to result-stall)."""
_DRY_RUN_ONLY = re.compile(
    r"\s*(?:[\w ]{0,32}:\s*)?An error occurred \(DryRunOperation\) when calling the \w{1,64}"
    r" operation: Request would have succeeded, but DryRun flag is set\.?\s*"
)
ASKED_PACE = 0.5
"""Share of the interval a user asked checks at ("every 30 seconds") that a quiet before
the agent's next step must last to be a deliberate wait (``SessionState.watch_every``): an
agent pacing its checks as asked waits about the whole interval; one going round does not
wait at all. Never less than ``[waits] pause_seconds``."""
SCHEDULE_GAP = 600.0
"""Seconds between two identical messages to the agent for the second to be a scheduled
request repeated (``Watchdog._prompt``): schedules run every ten minutes or less often
(``*/10`` in cron); a harness's nudge comes within a minute or two."""
REQUESTS_KEPT = 4
"""The user's messages a new one is compared with to tell a request in new words from a
nudge sent again (``SessionState.asks``)."""
SAID_KEPT = 4
"""The agent's messages a new one is compared with to tell a next step from the agent saying
again what it said (``SessionState.said``, ``ResultView.parrot``)."""
_TOOL_HOOKS_MAX = 512

FEEDBACK_HEADER = (
    "[streamguard] An automated monitor observed your previous turn. This note is not from "
    "the user, and the user cannot see it."
)
FEEDBACK_FOOTER = "Change your approach in this turn accordingly."


def _dispatch(
    hooks: list[tuple[int, Signal, Any]],
) -> tuple[list[tuple[int, Any]] | None, list[tuple[int, frozenset[str] | None, Any]]]:
    """The dispatch lists of one event type: ``(index, exempt tools or None, bound hook)``
    for every reader, and, when no reader exempts a tool (the usual policy), the same
    without the exemption (``(index, bound hook)``; None otherwise), so those events run a
    loop with no exemption test at all."""
    exempting = [(i, s.exempt or None, h) for i, s, h in hooks]
    plain = None if any(e for _, e, _ in exempting) else [(i, h) for i, _, h in exempting]
    return plain, exempting


def _hooks_for(
    cache: dict[str, list[tuple[int, Any]]],
    exempting: list[tuple[int, frozenset[str] | None, Any]],
    tool: str,
) -> list[tuple[int, Any]]:
    """The ``(index, bound hook)`` list of the readers that do not exempt ``tool``, in
    order, kept in ``cache`` (one per event type): when some reader exempts tools, an
    event then runs the same loop as under a policy without exemptions, instead of
    testing every reader's exemptions."""
    hooks = [(i, h) for i, exempt, h in exempting if exempt is None or tool not in exempt]
    if len(cache) >= _TOOL_HOOKS_MAX:  # bounded: tool names come from untrusted input
        cache.clear()
    cache[tool] = hooks
    return hooks


RESETS_KEPT = 4
"""Operator resets a session remembers, to skip one delivered twice (``Watchdog.reset``)."""


RETRY_AFTER_FLOOR = 5.0
"""Shortest quiet before a retry that counts as keeping the back-off a failure asked for
(``SessionState.retry_after``): an agent's own step takes a few seconds."""


class SessionState(Struct, kw_only=True, gc=False, omit_defaults=True):
    """Everything the watchdog remembers about one session.

    ``gc=False``: nothing in a session's state refers back to it, so it can
    never be part of a reference cycle (and 100,000 of them stay out of the
    collector's way).
    """

    session: str
    agent: str | None = None
    tenant: str | None = None  # the first event's: a scope of [[fleet]] rules
    last_seq: int = -1
    applied: int = 0  # events and controls applied; keys deterministic output ids
    last_ts: float | None = None
    # The last RESETS_KEPT operator resets applied, each (its stamp, by, guardrail,
    # budget): the same reset delivered again is skipped (Watchdog.reset).
    resets: tuple[tuple[float, str, str, float], ...] = ()
    # The time of the first record (an event, or an operator's control) of this state,
    # set by the engine that makes it: a session evicted and seen again starts a new
    # state, and the fleet stage tells its facts from a replay of the old state's by it
    # (fleet_windows.apply_fact), as output ids are. None in states from before it, or
    # made with no time.
    born: float | None = None
    # Pauses so far: quiet gaps of [waits] pause_seconds between two events, calls that
    # wait, and the user's messages. A status that says the work is still under way,
    # asked again after a pause, is a poll (signals/base.py, says_in_progress). The bits
    # from WAITS_SHIFT up count the deliberate waits among them (a wait call, a long poll
    # that waited, minutes of quiet), those from REQUESTS_SHIFT to WAITS_SHIFT the user's
    # requests in new words (ResultView.asked), those from ACTS_SHIFT up the acts (a write, a call
    # not known to only read, a failed answer): after a wait and no act, an answer that
    # says nothing of an end is a poll's too (poll_answer).
    pauses: int = 0
    # The back-off the session's last failure asked for, in seconds ("retry_after": 6,
    # base.retry_after_seconds; 0.0: none), until the next call: a quiet of that long
    # before it is a pause, as pause_seconds of quiet is (a 429's retry after its 6 s).
    retry_after: float = 0.0
    # CRC-32 of the latest message to the agent (role user or system, its first
    # PROMPT_READ characters) and its time: the same message again, SCHEDULE_GAP seconds
    # or more later, is the same request repeated by a scheduler, and the loop detectors
    # that count laps start again from it.
    prompt: int = 0
    prompt_ts: float | None = None
    # CRC-32s of the user's last REQUESTS_KEPT messages (as `prompt` reads them): a user
    # message none of them matches is a request in new words (ResultView.asked); a nudge
    # sent again, or two taking turns, is none, whatever system notes come between.
    asks: tuple[int, ...] = ()
    # The agent's last SAID_KEPT messages (4 bytes each: a CRC-32 of their first 512
    # characters, case and spacing folded), and whether the latest said one of the others
    # again (ResultView.parrot).
    said: bytes = b""
    parrot: bool = False
    # The time and call key of the session's last restart that went through (a device's
    # `reload`, `systemctl restart`, `reboot_device`, answered without a failure): for
    # [waits] restart_seconds after it, a probe asked again after a pause that answers
    # the same, saying no end, or fails to reach what it probes, is waiting for what was
    # restarted to come back (ResultView.restarting).
    restarted: tuple[float, int] | None = None
    # The interval the user asked checks at ("check about every 30 seconds"; 0: none
    # asked): a quiet of half of it or more before the agent's next step is a deliberate
    # wait, as minutes of quiet are ([waits] asked_intervals).
    watch_every: float = 0.0
    # The user asked the agent to watch for something ("let me know once it's live"; an
    # asked interval is one too): nothing yet, asked again after a deliberate wait, is the
    # answer awaited ([waits] asked_watches), and without an asked interval, quiet of half
    # of [waits] watch_seconds is a deliberate wait.
    watching: bool = False
    # How many times the session's user last asked for something to be done ("run it 15
    # times": facts.asked_repetitions; 0 when the user's last message asked for no count),
    # the call it is taken to be (the first sent a second time since the ask, until one has
    # been sent ASKED_SETTLED times; 0 until then),
    # the calls seen since the ask until one came again (at most ASKED_SEEN) and how many
    # times that call was made: only that call, and only that many times, is what was asked.
    asked_runs: int = 0
    asked_key: int = 0
    asked_seen: tuple[int, ...] = ()
    asked_made: int = 0
    # The pause count at the last answer of each of the last ANSWERED_KEPT calls (by key):
    # whether the session paused since a call was last answered (ResultView.paused).
    answered: dict[int, int] = {}
    turn_id: str | int | None = None
    in_turn: bool = False
    turn_cut: str | None = None  # guardrail that cut the current turn (a turn is cut once)
    cut_kind: str | None = None  # guardrail of the current run of consecutive cut turns
    cut_streak: int = 0
    halted_by: tuple[str, ...] = ()  # guardrails holding a session halt
    halt_signal: str | None = None
    halt_reason: str | None = None
    halted_at: float | None = None  # event time of the first halt still held
    ignored_latched: bool = False  # halt-ignored already raised since the last turn start
    feedback: tuple[tuple[str, str], ...] = ()  # (signal, model-facing text), oldest first
    history: list[int] = []  # recent call keys shared by the history-reading signals
    # The ids a named write made again handed back (facts.handed_ids), until the agent's
    # next write: a call naming one of them is keyed by which one (_keyed_args).
    handed: tuple[str, ...] = ()
    # The ids the session's acts handed back (calls not known to only read, no command
    # runner's: facts.handed_ids, those of at least SUBMITTED_MIN characters), newest
    # last, at most SUBMITTED_KEPT: a read naming one
    # reads what the session itself submitted (a job, a render), and its empty answer is
    # nothing yet from that work (FLAG_AWAITS_OWN).
    submitted: tuple[str, ...] = ()
    # The calls that act (not known to only read, no command runner's, wait or question to
    # the user) whose answers are awaited, at most ACTS_KEPT, oldest first: (call id, the
    # values naming what each was about, facts.act_items), so that an answer's echo of
    # them is no id handed back, and a no-op's answer is known by its item.
    acts: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # The last call sent, when it was a named write made before (its key among `made`):
    # (call id, key, the id-like values it sent). Its answer hands ids back only if no
    # other call was sent after it.
    last_write: tuple[str, int, tuple[str, ...]] | None = None
    made: list[int] = []  # keys of the last MADE_KEPT distinct named writes, oldest first
    # Calls awaiting their result, oldest first, when a signal pairs results with calls:
    # (call id or "", tool, call key, fact flags, action).
    pending: list[tuple[str, str, int, int, str]] = []
    signals: list[Any] = []  # per-signal states, aligned with Watchdog.signals
    # The session's spend (sums of usage events), and how much of it fleet facts
    # have already published (docs/fleet.md).
    spend_usd: float = 0.0
    spend_tokens: int = 0
    fleet_usd: float = 0.0
    fleet_tokens: int = 0
    fleet_scope: str | None = None  # the scope whose open circuit halts the session

    @property
    def halted(self) -> bool:
        return bool(self.halted_by)


class Watchdog:
    """The decision logic for every session under one policy."""

    def __init__(
        self, policy: Policy | None = None, classes: list[type[Signal]] | None = None
    ) -> None:
        self.policy = policy if policy is not None else Policy()
        self.mode = MODES.index(self.policy.mode)
        self.feedback_limit = self.policy.feedback_queue_size
        self.halt_after = self.policy.halt_after_cut_turns
        self._ignore_fields = self.policy.arguments
        self._has_ignores = bool(self.policy.arguments.ignore_fields or self.policy.arguments.tools)

        signals: list[Signal] = []
        classes = classes if classes is not None else signal_classes()
        for cls in classes:
            try:
                config = self.policy.config_for(cls)
            except AttributeError:  # a signal outside the registry (library use, tests)
                config = cls.Config()
            enabled = cls.default_enabled if config.enabled is None else config.enabled
            if not enabled or cls.id in self.policy.disabled_signals:
                continue
            if cls.guardrail == "watchdog" and self.mode == OFF:
                continue
            signal = cls(config)
            if not signal.active:  # e.g. a cost ceiling with no bound set
                continue
            signals.append(signal)
        self.signals = signals
        index = {s.id: i for i, s in enumerate(signals)}
        self._defers: list[tuple[int, ...]] = [
            tuple(index[d] for d in s.defers_to if d in index) for s in signals
        ]
        self._withdrawn = frozenset(s.id for s in signals if s.withdrawn_by_text)

        def hooked(hook: str) -> list[tuple[int, Signal, Any]]:
            return [(i, s, getattr(s, hook)) for i, s in enumerate(signals) if overrides(s, hook)]

        self._on_call = hooked("on_call")
        self._on_result = hooked("on_result")
        self._on_text = hooked("on_text")
        self._on_repeated_prompt = hooked("on_repeated_prompt")
        self._on_turn_start = hooked("on_turn_start")
        self._on_turn_end = hooked("on_turn_end")
        self._on_usage = hooked("on_usage")
        self._on_final = hooked("on_final_answer")
        self._call_plain, self._call_hooks = _dispatch(self._on_call)
        self._result_plain, self._result_hooks = _dispatch(self._on_result)
        # A call that waits on purpose (CallView.wait) and its result reach only the
        # signals that read waits: to the loop detectors a wait is no evidence.
        self._wait_call_plain, self._wait_call_hooks = _dispatch(
            [h for h in self._on_call if h[1].sees_waits]
        )
        self._wait_result_plain, self._wait_result_hooks = _dispatch(
            [h for h in self._on_result if h[1].sees_waits]
        )
        # Per tool, when some reader exempts tools (see _hooks_for).
        self._call_by_tool: dict[str, list[tuple[int, Any]]] = {}
        self._wait_call_by_tool: dict[str, list[tuple[int, Any]]] = {}
        self._result_by_tool: dict[str, list[tuple[int, Any]]] = {}
        self._wait_result_by_tool: dict[str, list[tuple[int, Any]]] = {}
        self.history_len = max((s.history_needed() for s in signals), default=0)
        self._need_fingerprint = any(s.needs_fingerprint for _, s, _ in self._on_result)
        self._need_size = any(s.needs_result_size for _, s, _ in self._on_result)
        self._watchdog_indices = [i for i, s in enumerate(signals) if s.guardrail == "watchdog"]
        self._ctx = _Ctx(None, None)  # type: ignore[arg-type]
        self._runners = CommandRunners(self.policy.command_runners.tools)
        self._waits = ToolGlobs(self.policy.waits.tools, styled=True)
        # A gap this long between two events is a pause (never, when 0: only waits are).
        self._pause_seconds = self.policy.waits.pause_seconds or float("inf")
        # A back-off a failure asks for is a pause when kept, but never one shorter than
        # RETRY_AFTER_FLOOR (nor any, with pauses by the clock off: pause_seconds = 0).
        self._retry_after_floor = (
            min(self._pause_seconds, RETRY_AFTER_FLOOR) if self.policy.waits.pause_seconds else float("inf")
        )
        # ...and a gap this long a deliberate wait (a check scheduled every few minutes).
        self._wait_seconds = self.policy.waits.wait_seconds or float("inf")
        # ...and how long after a restart a probe's unchanged answer is waiting for what
        # was restarted to come back (None: never).
        self._restart_seconds = self.policy.waits.restart_seconds or None
        self._restart_names: dict[str, bool] = {}
        # Whether the interval a user asks checks at paces deliberate waits.
        self._asked_intervals = self.policy.waits.asked_intervals
        self._asked_watches = self.policy.waits.asked_watches
        self._asked_repetitions = self.policy.waits.asked_repetitions
        self._watch_seconds = self.policy.waits.watch_seconds
        # Plain tools' write facts use the verification signal's name classification.
        self._classify = self.policy.verification.classify
        # Keyed by the tool alone for a call without a kind (the usual call: no tuple to
        # build and hash), by (tool, kind) otherwise; a string never equals a tuple.
        self._plain_facts: dict[str | tuple[str, str], CallFacts | bool] = {}
        # The views handed to the hooks, refilled per event (see _call and _result).
        self._call_view: CallView = CallView.__new__(CallView)
        self._result_view: ResultView = ResultView.__new__(ResultView)
        self._need_pairing = any(s.needs_pairing for s in signals)
        self._previews = [(i, s) for i, s in enumerate(signals) if previews(s)]
        # The guardrails an operator resets by name come from the registry, whatever this
        # watchdog runs: a reset releases a guardrail's halt even where its signal is
        # inactive (a restored halt, a bound since removed).
        known = [*signal_classes(), *classes]
        self._resettable = tuple(dict.fromkeys(c.guardrail for c in known if c.resettable))
        self._budget_guardrails = tuple(dict.fromkeys(c.guardrail for c in known if c.takes_budget))
        self._guardrail_signals = [
            (i, s) for i, s in enumerate(signals) if s.guardrail in self._resettable
        ]
        self._codec = SnapshotCodec(SessionState, [s.id for s in signals])
        self._state_decoders = {s.id: msgspec.msgpack.Decoder(s.State) for s in signals}

    # ------------------------------------------------------------------ state

    def new_state(self, session: str, agent: str | None = None) -> SessionState:
        # Interned: a fleet has few agent names and many sessions per name.
        return SessionState(
            session=session,
            agent=intern(agent) if type(agent) is str else agent,
            signals=[s.new_state() for s in self.signals],
        )

    def encode_state(self, state: SessionState) -> bytes:
        """Snapshot bytes (:mod:`streamguard.snapshot`); signal states named by id.

        Fields at their defaults are left out (``omit_defaults``), which makes
        the typical snapshot a third smaller and its encoding faster.
        """
        if len(state.signals) != len(self.signals):
            raise ValueError("state was not built by this watchdog (signal count differs)")
        return self._codec.encode(state)

    @staticmethod
    def peek_agent(data: bytes) -> str | None:
        """The agent a snapshot belongs to (to pick its policy before decoding it)."""
        return peek_agent(data)

    def decode_state(self, data: bytes) -> SessionState:
        """Rebuild a state from :meth:`encode_state` bytes (or a version 1 snapshot).

        Signals added to the policy since the snapshot start fresh; signals
        removed are dropped. Restored state never overrules live configuration.
        """
        state, by_id = self._codec.decode(data)
        decoders = self._state_decoders
        state.signals = [
            decoders[s.id].decode(raw) if (raw := by_id.get(s.id)) is not None else s.new_state()
            for s in self.signals
        ]
        # Live configuration wins: no watchdog halt restored below enforce, no cost
        # halt restored once no ceiling is configured.
        live = {s.guardrail for s in self.signals}
        state.halted_by = tuple(
            g
            for g in state.halted_by
            if (g == "watchdog" and self.mode == ENFORCE)
            or (g != "watchdog" and g in live)
            or g == FLEET_GUARDRAIL  # held by the fleet circuit, whatever the session's policy
        )
        if len(state.history) > self.history_len:
            del state.history[: len(state.history) - self.history_len]
        return state

    # --------------------------------------------------------------- process

    def process(self, state: SessionState, event: Any, ts: float | None = None) -> list[Output]:
        """Apply one agent event; return the outputs it caused (often none)."""
        state.applied += 1
        kind = type(event)
        quiet = False
        if ts is not None:
            last = state.last_ts
            # The quiet before the agent's next step (not a tool's own time to answer: a
            # status that takes 12 s to come back, asked again at once, is no pause).
            if last is not None:
                gap = ts - last
                if kind is ToolResult:
                    # a pause only for a call that asked the tool to wait (_result)
                    quiet = gap >= self._pause_seconds
                elif gap >= self._wait_seconds:
                    # minutes of quiet: a deliberate wait, and a pause (a check scheduled
                    # every few minutes: the agent's own step takes seconds, a reasoning
                    # model's rarely two minutes). Whatever pause_seconds says.
                    state.pauses = (state.pauses + WAITED) & COUNT_MASK
                elif gap >= self._pause_seconds:
                    # the session went quiet: a poll's pause (see SessionState); a
                    # deliberate wait when it is the pace its user asked checks at
                    watch = state.watch_every if self._asked_intervals else 0.0
                    if not watch and state.watching and self._asked_watches:
                        watch = self._watch_seconds
                    state.pauses = (
                        state.pauses + (WAITED if watch and gap >= watch * ASKED_PACE else 1)
                    ) & COUNT_MASK
                elif (
                    state.retry_after and kind is ToolCall
                    and gap >= max(state.retry_after, self._retry_after_floor)
                ):
                    # the back-off the last failure asked for, kept before the retry (at
                    # least RETRY_AFTER_FLOOR: "try again in 2.1s" is an agent's own step)
                    state.pauses = (state.pauses + 1) & COUNT_MASK
            state.last_ts = ts
        ctx = self._ctx  # reused: processing is strictly one event at a time
        ctx.state = state
        ctx.event = event
        ctx.outputs = None
        ctx.quiet = quiet
        ctx.ts = ts
        turn = event.turn
        if turn is not None and turn != state.turn_id and kind is not TurnStart:
            if state.turn_id is not None:
                self._turn_start(ctx)
            state.turn_id = turn
        if kind is ToolCall:
            if state.retry_after:
                state.retry_after = 0.0  # (asked of this call alone)
            self._call(ctx, event)
        elif kind is ToolResult:
            self._result(ctx, event)
        elif kind is Text:
            role = event.role
            if role == "user" or role == "system":
                if role == "user":
                    # the agent waited for its user: a pause (see SessionState)
                    state.pauses = (state.pauses + 1) & COUNT_MASK
                    if self._asked_repetitions and type(event.text) is str:
                        # (each message of the user's replaces what the last one asked)
                        runs = asked_repetitions(event.text)
                        if runs or state.asked_runs:
                            state.asked_runs = runs
                            state.asked_key = state.asked_made = 0
                            state.asked_seen = ()
                    if (self._asked_intervals or self._asked_watches) and type(event.text) is str:
                        asked = asked_interval(event.text)
                        if asked and self._asked_intervals:
                            state.watch_every = asked
                        if self._asked_watches and not state.watching and (asked or asks_watch(event.text)):
                            state.watching = True
                self._prompt(state, event, ts)
            self._text(ctx, event)
        elif kind is TurnStart:
            self._turn_start(ctx)
            if turn is not None:
                state.turn_id = turn
        elif kind is TurnEnd:
            for i, _, hook in self._on_turn_end:
                finding = hook(state.signals[i])
                if finding is not None:
                    self._handle(ctx, i, finding)
            self._close_turn(state)
        elif kind is Usage:
            if not state.in_turn:  # a state field's store costs several times the test
                state.in_turn = True
            if event.cost_usd:
                state.spend_usd += event.cost_usd
            if event.input_tokens or event.output_tokens:
                state.spend_tokens += (event.input_tokens or 0) + (event.output_tokens or 0)
            for i, _, hook in self._on_usage:
                finding = hook(state.signals[i], event)
                if finding is not None:
                    self._handle(ctx, i, finding)
        elif kind is FinalAnswer:
            for i, _, hook in self._on_final:
                finding = hook(state.signals[i], event)
                if finding is not None:
                    self._handle(ctx, i, finding)
        return ctx.outputs if ctx.outputs is not None else _NO_OUTPUT

    def _call(self, ctx: _Ctx, event: ToolCall) -> None:
        state = ctx.state
        if not state.in_turn:  # a state field's store costs several times the test
            state.in_turn = True
        if (state.halted_by or state.turn_cut is not None) and not state.ignored_latched:
            state.ignored_latched = True
            self._halt_ignored(ctx, at="tool_call")
        if not self._on_call:
            return
        if event.tool in MCP_WRAPPERS:
            event = unwrapped(event)
        tool = event.tool
        # A JSON object sent as a string is read once, here, for every reader.
        args = call_args(event.args)
        keyed = args
        if state.handed and type(args) is dict:
            keyed = _keyed_args(args, state.handed)
        canonical = canonicalize(
            keyed, self._ignore_fields.fields_for(tool) if self._has_ignores else None
        )
        key = call_key(tool, canonical)
        history = state.history
        kind = event.kind
        facts = self._plain_facts.get(tool if kind is None else (tool, kind))
        if facts is None:
            facts = self._tool_facts(tool, kind)
        # One view per watchdog, refilled for every call: events are processed one at a
        # time and no signal keeps a view past its hook, so no call allocates one.
        view = self._call_view
        if facts is True or facts is False:
            facts = runner_facts(args, facts, kind)
            view.runner = runner = True
        elif type(args) is dict:
            facts, runner = plain_call_facts(tool, args, kind, facts)
            view.runner = runner
        else:
            view.runner = runner = False
        view.event = event
        view.tool = tool
        view.args = args
        view.call_id = call_id = event.call_id
        view.canonical = canonical
        view.key = key
        view.asked_runs = (
            self._asked_allowance(state, key) if state.asked_runs and self._asked_repetitions else 0
        )
        view.history = history
        view.kind = kind
        view.action = action = facts.action
        view.write = write = facts.write
        view.search = search = facts.search
        view.wait = wait = facts.wait
        view.shell = facts.shell
        view.ask = facts.ask
        view.read = read = facts.read
        # A read asked after a wait of its own (`sleep 120; ray job status ...`) is a read
        # whose answer follows a deliberate wait: read by the loop detectors with their
        # polls' rules (a job polled after it failed is a loop), a run of it a poll to
        # repeated-tool-call and no evidence to no-new-state.
        view.waits_first = waits_first = facts.waits_first
        if not wait:  # the history's readers (cycle, dominance) take no wait as evidence
            history.append(key)
            if len(history) > self.history_len:
                del history[0]
        if wait or waits_first:
            state.pauses = (state.pauses + WAITED) & COUNT_MASK  # a wait, whatever the clock says
        if not (read or wait):
            # (no pause: an act, after which the same answer may be the act's own)
            state.pauses = (state.pauses + ACTED) & COUNT_MASK
        if write:
            if state.handed:
                state.handed = ()  # a write of its own: what it names from here is its own
            made_again = False
            if not runner and type(args) is dict:
                made = state.made
                if key in made:
                    made_again = True
                    if made[-1] != key:
                        made.remove(key)
                        made.append(key)
                else:
                    made.append(key)
                    if len(made) > MADE_KEPT:
                        del made[0]
            if made_again and self._need_pairing:
                # made again: what its answer hands back is the new copy's (_result)
                state.last_write = (call_id or "", key, sent_values(args))
            elif state.last_write is not None:
                state.last_write = None
        elif state.last_write is not None:
            state.last_write = None  # another call since: its answer hands nothing back
        if self._need_pairing:
            pending = state.pending
            if len(pending) >= MAX_PENDING:
                del pending[0]
            flags = (FLAG_WRITE if write else 0) | (FLAG_SEARCH if search else 0)
            if runner:
                flags |= FLAG_RUNNER
            if wait:
                flags |= FLAG_WAIT
            if facts.shell:
                flags |= FLAG_SHELL
            if facts.ask:
                flags |= FLAG_ASK
            if read:
                flags |= FLAG_READ
            if waits_first:
                flags |= FLAG_WAITS_FIRST
            if read and state.submitted and _names_any(canonical.text[:SUBMITTED_READ], state.submitted):
                # (one search of the head of the call's canonical text, only in a session
                # whose acts handed ids back; an id is named early or not at all)
                flags |= FLAG_AWAITS_OWN
            if not (read or runner or wait or facts.ask):
                sent = act_items(args) if type(args) is dict else ()
                state.acts = (*state.acts[1 - ACTS_KEPT :], (call_id or "", sent))
            if view.asked_runs:
                flags |= FLAG_ASKED
            if (
                # A restart: its successful answer starts the restart wait (_result). (The
                # usual call, a tool known not to restart and no command line, is decided
                # here without a call.)
                self._restart_seconds is not None
                and (runner or self._restart_names.get(tool) is not False
                     or (type(args) is dict and "command" in args))
                and self._restarts(tool, args, runner, read)
            ):
                flags |= FLAG_RESTART
            if not wait and (
                (type(args) is dict and not LONG_POLL_KEYS.isdisjoint(args) and asks_to_wait(args))
                or facts.listens
            ):
                flags |= FLAG_LONG_POLL
            pending.append((call_id or "", intern(tool), key, flags, action))
        signals = state.signals
        plain = self._wait_call_plain if wait else self._call_plain
        if plain is None:  # some reader exempts tools: this tool's readers
            cache = self._wait_call_by_tool if wait else self._call_by_tool
            plain = cache.get(tool)
            if plain is None:
                plain = _hooks_for(cache, self._wait_call_hooks if wait else self._call_hooks, tool)
        for i, hook in plain:
            finding = hook(signals[i], view)
            if finding is not None:
                self._handle(ctx, i, finding)

    def _view(self, event: ToolCall, canonical: Any, key: int, history: list[int]) -> CallView:
        """The call's view with its shared facts (action, write, search; see signals/facts.py).

        One bounded dict answers the per-tool questions at once: for a plain tool, its
        facts (a pure function of the tool name and the event's kind); for a command
        runner, whether it is an interpreter (its facts depend on the arguments and are
        derived per call).
        """
        tool = event.tool
        kind = event.kind
        facts = self._plain_facts.get(tool if kind is None else (tool, kind))
        if facts is None:
            facts = self._tool_facts(tool, kind)
        if facts is True or facts is False:
            facts = runner_facts(event.args, facts, kind)
            return CallView(event, canonical, key, history, kind, facts, True)
        args = call_args(event.args)
        runner = False
        if type(args) is dict:
            facts, runner = plain_call_facts(tool, args, kind, facts)
        return CallView(event, canonical, key, history, kind, facts, runner)

    def _tool_facts(self, tool: str, kind: str | None) -> CallFacts | bool:
        """Fill the per-tool cache of :meth:`_view` for ``(tool, kind)`` and return the entry."""
        if self._runners(tool):
            facts: CallFacts | bool = is_code_tool(tool)
        else:
            named = kind
            if named is None and self._classify is not None:
                named = self._classify(tool)
            words = name_words(tool)
            if ("search" in words and (
                kind == "read" or (named is None and names_no_act(tool))
            )) or ("grep" in words and kind in (None, "read") and named in (None, "read")):
                # A search the runtime calls a read (`kind: "read"` on `tavily_search`: a
                # search reads), or one no glob names, the word in the middle and no verb
                # of an act (LangChain's `tavily_search_results_json`), is a search. (Named
                # so, not by every resolve pattern: `query_db` sent as a read stays a read.)
                # So is a grep tool (Claude Code's `Grep`, an MCP server's `grep`), which
                # the verification machine's defaults call a read: a pattern looked for,
                # as `grep` through a shell is.
                named = "resolve"
            facts = plain_facts(tool, named, self._waits(tool), kind)
        cache = self._plain_facts
        if len(cache) >= _FACTS_CACHE_MAX:  # bounded: tool names come from untrusted input
            cache.clear()
        cache[tool if kind is None else (tool, kind)] = facts
        return facts

    def _restarts(self, tool: str, args: Any, runner: bool, read: bool) -> bool:
        """Whether a call restarts something: a tool named so that is not known to only
        look (``reboot_device``, not ``get_reload_status``), or a command line that does
        (``reload`` through a device's ssh tool, ``systemctl restart``: a command runner
        calls it a read, as it writes no file)."""
        named = self._restart_names.get(tool)
        if named is None:
            cache = self._restart_names
            if len(cache) >= _FACTS_CACHE_MAX:  # bounded: tool names come from untrusted input
                cache.clear()
            named = cache[tool] = names_restart(tool)
        if named and not read:
            return True
        if runner or (type(args) is dict and "command" in args):
            text = command_text(args)
            return text is not None and commands_restart(text)
        return False

    @staticmethod
    def _pair(state: SessionState, event: ToolResult) -> tuple[str, str, int, int, str] | None:
        """Take the pending call this result answers: by call id, else the oldest id-less
        call of the same tool (results of id-less calls come back in call order)."""
        pending = state.pending
        call_id = event.call_id
        tool = event.tool
        if call_id:
            for i, entry in enumerate(pending):
                if entry[0] == call_id:
                    return pending.pop(i)
        for i, entry in enumerate(pending):
            if not entry[0] and entry[1] == tool:
                return pending.pop(i)
        if not call_id:
            for i in range(len(pending) - 1, -1, -1):
                if pending[i][1] == tool:
                    return pending.pop(i)
        return None

    def _result(self, ctx: _Ctx, event: ToolResult) -> None:
        state = ctx.state
        if not state.in_turn:  # a state field's store costs several times the test
            state.in_turn = True
        if not self._on_result:
            return
        if event.tool in MCP_WRAPPERS:
            # The answer of a wrapped call (_call) is its tool's: the call of its id, or,
            # without one, the oldest wrapped call without one.
            call_id = event.call_id
            for entry in state.pending:
                if entry[0] == call_id if call_id else (
                    not entry[0] and entry[1].startswith(WRAPPED_PREFIX)
                ):
                    if entry[1] != event.tool:
                        event = structs.replace(event, tool=entry[1])
                    break
        payload = event.result
        if type(payload) is dict and "content" in payload:
            # An MCP CallToolResult passed through: read as what it says (facts.mcp_answer).
            unwrapped = mcp_answer(payload, event.error)
            if unwrapped is not None:
                event = structs.replace(event, result=unwrapped[0], error=unwrapped[1])
        elif type(payload) is dict and "jsonrpc" in payload and len(payload) <= 4 and "id" in payload:
            # A JSON-RPC response passed through (an Ethereum node's `{"jsonrpc": "2.0",
            # "id": 7, "result": null}`): its id is the request's own, new on every call,
            # and says nothing of the answer; read without it, so that the same receipt
            # asked forty times is the same answer forty times.
            event = structs.replace(event, result={k: v for k, v in payload.items() if k != "id"})
        elif (
            (type(payload) is str and (
                payload.startswith(RUNNER_ANSWER_HEADS)
                or (event.tool in OBSERVATION_TOOLS and ends_with_exit_code(payload))
            ))
            or (type(payload) is dict and (
                "stdout" in payload or "metadata" in payload or "outputs" in payload
                # a run record with its output in one stream (AutoGen's, Amp's)
                or ("output" in payload and ("exit_code" in payload or "exitCode" in payload))
            ))
            # Continue's context items (facts.context_items)
            or (type(payload) is list and payload and type(payload[0]) is dict and "content" in payload[0])
        ) and (
            self._runners(event.tool)
            # a terminal's screen answers keystrokes, whatever the tool is named
            or (type(payload) is str and payload.startswith(SCREEN_HEADS))
        ):
            # A runner's answer wrapped by its runtime (a transcript, an observation's
            # markup, a run report, a run record, an envelope, OpenHands' exit code, a code
            # interpreter's logs): its output and exit code (facts.runner_answer). A
            # runner's only: a named tool's answer of one of these shapes, or a file that
            # holds one, is its data. Except a terminal's screen, whatever tool answers
            # with it (Terminus' `send_keys`): read by patterns bounded for any text
            # (tests/test_hostile_cost.py).
            answer = runner_answer(
                payload, event.tool in OBSERVATION_TOOLS,
                # (a notebook's runner: asked only of an answer that opens as a cell's
                # traceback, or of an interpreter's logs)
                (
                    (type(payload) is str and payload.startswith(CELL_ERROR_HEAD))
                    or (type(payload) is dict and "outputs" in payload)
                ) and CELL_TOOLS.search(event.tool[:256]) is not None,
            )
            if answer is not None:
                event = structs.replace(event, result=answer[0], error=event.error or answer[1])
        if event.error and "(DryRunOperation)" in event.error and _DRY_RUN_ONLY.fullmatch(event.error):
            # AWS answers a dry run that would have succeeded with this error, and only
            # this one (a second dry run refused in the same answer is a failure): a
            # success, read as the bare answer it means, neither news nor stale.
            event = structs.replace(event, result=DRY_RUN_PASSED, error=None)
        elif (
            event.error and state.pending and len(event.error) <= 64
            and _CHECKS_PENDING_EXIT.search(event.error) is not None
            and _pending_action(state.pending, event) == "gh pr"
        ):
            # `gh pr checks` exits 8 while checks are pending (gh's documented exit code,
            # and the only `gh pr` command that exits so): a status under way, no failure.
            # Read as a failure, a CI wait polled every few minutes was five identical
            # failures and halted by failure-loop in two blind batches.
            event = structs.replace(event, error=None)
        failed = bool(event.error)
        if failed:
            after = retry_after_seconds(event.error)
            if after:
                state.retry_after = after
        fingerprint = size = 0
        encoded = None  # the payload's sorted JSON, when the fingerprint made it (answer_gist)
        want_fingerprint = self._need_fingerprint and not failed and not event.no_op
        if self._need_size and event.result_bytes is None:
            if want_fingerprint:  # both from one encoding of the payload
                fingerprint, size, encoded = fingerprint_size_encoding(event.result, event.result_digest)
            else:
                size = payload_size(event.result)
        else:
            if want_fingerprint:
                fingerprint = fingerprint_payload(event.result, event.result_digest)
            if self._need_size:
                size = event.result_bytes or 0
        # The outcome, once for every reader (see ResultView): only a failure hashes.
        if failed:
            outcome = outcome_of(event, True, 0)
        elif event.no_op:
            outcome = NO_OP_OUTCOME
        else:
            outcome = fingerprint
        # Refilled like the call view (see _call): what ResultView's constructor would set.
        view = self._result_view
        tool = event.tool
        paired = None
        if self._need_pairing:
            pending = state.pending
            if pending:
                # The usual case inline: the result of the oldest pending call, by its id
                # (what _pair finds first).
                call_id = event.call_id
                if call_id and pending[0][0] == call_id:
                    paired = pending.pop(0)
                else:
                    paired = self._pair(state, event)
        wait = False
        if paired is not None:
            view.call_key = key = paired[2]
            view.call_flags = flags = paired[3]
            view.action = paired[4]
            last_write = state.last_write
            if (
                last_write is not None and not failed
                and last_write[1] == key and last_write[0] == paired[0]
            ):
                # A named write made again as it was made before (the same draft saved
                # again, the same job resubmitted), answered before any other call: the
                # ids it handed back are the new copy's, and the next calls naming them
                # act on that copy (a new cell or invoice per item of a sweep is made from
                # other arguments each time: its ids are its own).
                state.handed = handed_ids(event.result, last_write[2])
                state.last_write = None
            acts = state.acts
            last_act = next((act for act in acts if act[0] == paired[0]), None) if acts else None
            view.sent = last_act[1] if last_act is not None else ()
            if last_act is not None:
                state.acts = tuple(act for act in acts if act is not last_act)
                if not failed and type(event.result) is dict:
                    # The object answer of a call that acts (not known to only read; no
                    # command runner's, whose output names anything) handing ids back (a
                    # job submitted, a render queued: `{"prompt_id": "5a319e01-..."}`), not
                    # those it was sent nor a date: what the session itself set going,
                    # which a read naming it may find not done yet (FLAG_AWAITS_OWN).
                    handed = [
                        i for i in handed_ids(event.result, last_act[1])
                        if len(i) >= SUBMITTED_MIN and TIME_LIKE.match(i) is None
                    ]
                    if handed:
                        kept = [i for i in state.submitted if i not in handed]
                        state.submitted = (*kept, *handed)[-SUBMITTED_KEPT:]
            # A read after a wait of its own that fails (`sleep 3 && curl` while a server
            # starts) fails until what it waits for is ready: a wait's failure.
            wait = flags & FLAG_WAIT != 0 or (failed and flags & FLAG_WAITS_FIRST != 0)
            if ctx.quiet and flags & FLAG_LONG_POLL:
                # The call asked the tool to wait (a long poll: `wait_seconds=30`) and it
                # did: a wait, as a `sleep 30` before an instant status would be.
                state.pauses = (state.pauses + WAITED) & COUNT_MASK
            if failed:
                # A failed answer is something happening (a wait for an element that timed
                # out): the same answer of another call after it is no poll's.
                state.pauses = (state.pauses + ACTED) & COUNT_MASK
            # Whether the session paused since this call was last answered: the pause
            # count at each of the last ANSWERED_KEPT calls' answers, oldest first.
            pauses = state.pauses
            answered = state.answered
            before = answered.pop(key, None)
            answered[key] = pauses
            if len(answered) > ANSWERED_KEPT:
                del answered[next(iter(answered))]
            if before is None:
                # A read asked after a wait of its own (`sleep 120; status`, each time with
                # another sleep: another call) follows a deliberate wait all the same.
                view.paused = view.waited = view.paced = paused = flags & FLAG_WAITS_FIRST != 0
                view.asked = False
            else:
                view.paused = paused = paused_between(before, pauses)
                view.waited = waited_between(before, pauses)
                view.paced = paced_between(before, pauses)
                view.asked = asked_between(before, pauses)
            view.parrot = state.parrot
            restarted = state.restarted
            now = ctx.ts
            within = (
                restarted is not None and now is not None
                and 0 <= now - restarted[0] <= self._restart_seconds  # type: ignore[operator]
            )
            if flags & FLAG_RESTART and not failed and now is not None and not (
                within and restarted[1] == key  # type: ignore[index]
            ):
                # a restart that went through (the same one sent again within its wait
                # does not extend it); the restart's own answer is no probe of it
                state.restarted = (now, key)
                within = False
            view.restarting = restarting = (
                within and paused and flags & FLAG_READ != 0 and key != restarted[1]  # type: ignore[index]
            )
            if restarting and failed and says_unreachable(event.error or event.result):
                # (the error, else the output of a command whose exit status failed it)
                # A probe that fails after a pause while what was restarted comes back
                # (curl "connection refused", ssh "no route to host"): a wait's failure.
                wait = True
        else:
            view.call_key = view.call_flags = 0
            view.action = tool
            view.paused = view.waited = view.paced = view.restarting = view.asked = view.parrot = False
            view.sent = ()
        view.watched = state.watching and self._asked_watches
        # (the call's own allowance, marked when it was sent: a result answers that call)
        view.asked_runs = state.asked_runs if view.call_flags & FLAG_ASKED else 0
        view.event = event
        view.tool = tool
        view.call_id = event.call_id
        view.error = event.error
        view.no_op = event.no_op
        view.failed = failed
        view.fingerprint = fingerprint
        view.size = size
        view.outcome = outcome
        view.gist = view.progress = 0
        view.transient = -1
        view.encoded = encoded
        signals = state.signals
        plain = self._wait_result_plain if wait else self._result_plain
        if plain is None:  # some reader exempts tools (no-new-state does by default)
            cache = self._wait_result_by_tool if wait else self._result_by_tool
            plain = cache.get(tool)
            if plain is None:
                hooks = self._wait_result_hooks if wait else self._result_hooks
                plain = _hooks_for(cache, hooks, tool)
        for i, hook in plain:
            finding = hook(signals[i], view)
            if finding is not None:
                self._handle(ctx, i, finding)

    def _prompt(self, state: SessionState, event: Text, ts: float | None) -> None:
        """A message to the agent: the same one as the last, word for word but for its
        digits (a scheduler's tick names its time), at least
        :data:`SCHEDULE_GAP` seconds after it (a scheduler asking for the same run every
        half hour), is a request repeated, and the signals that count laps or runs of
        calls start again from it (``on_repeated_prompt``). Not a nudge a harness sends
        whenever the agent stops ("Please continue"), nor a user saying "STOP" twice: those
        come within minutes, and the loop they interrupt goes on."""
        text = event.text
        if type(text) is not str or not text:
            return
        # Its digits left out: a scheduler's tick names its time ("tick 06:15 UTC: check
        # the batch window", then "tick 06:30 UTC: ...").
        said = zlib.crc32(
            text[:PROMPT_READ].encode("utf-8", "surrogatepass").translate(None, DIGIT_CHARS)
        ) or 1
        # (``ts``: the event's time, else its record's, as the engine passes it)
        last = state.prompt_ts
        state.prompt_ts = ts
        if event.role == "user" and said not in state.asks:
            # the user asking for something in new words (ResultView.asked); not a nudge
            # sent again, nor two taking turns, whatever system notes come between
            state.pauses = add_request(state.pauses)
            state.asks = (*state.asks[1 - REQUESTS_KEPT :], said)
        if said != state.prompt:
            state.prompt = said
            return
        if ts is None or last is None or ts - last < SCHEDULE_GAP:
            return
        for i, _, hook in self._on_repeated_prompt:
            hook(state.signals[i])

    def _text(self, ctx: _Ctx, event: Text) -> None:
        if event.role != "assistant":
            return
        text = event.text
        if text is not None:
            if not text or text.isspace():
                return
        elif not event.chars:
            return
        state = ctx.state
        if not state.in_turn:  # a state field's store costs several times the test
            state.in_turn = True
        if text:
            said = (zlib.crc32(" ".join(text[:512].lower().split()).encode("utf-8", "surrogatepass")) or 1).to_bytes(
                4, "little"
            )
            kept = state.said
            parrot = find_entry(kept, said, 4) >= 0
            if state.parrot is not parrot:
                state.parrot = parrot
            if not parrot:
                state.said = (kept + said)[-4 * SAID_KEPT :]
        if state.feedback and self._withdrawn:
            state.feedback = tuple(i for i in state.feedback if i[0] not in self._withdrawn)
        for i, _, hook in self._on_text:
            finding = hook(state.signals[i], event)
            if finding is not None:
                self._handle(ctx, i, finding)

    # ------------------------------------------------------------------ turns

    def _close_turn(self, state: SessionState) -> None:
        if state.in_turn and state.turn_cut is None:
            state.cut_streak = 0
            state.cut_kind = None
        state.in_turn = False
        state.turn_cut = None

    def _turn_start(self, ctx: _Ctx) -> None:
        state = ctx.state
        if state.halted_by:
            # The turn should have been refused; it is not a boundary.
            state.ignored_latched = True
            self._halt_ignored(ctx, at="turn_start")
            return
        self._close_turn(state)
        if not state.in_turn:  # a state field's store costs several times the test
            state.in_turn = True
        state.ignored_latched = False
        if state.feedback and self.mode >= FEEDBACK:
            self._deliver_feedback(ctx)
        for i, _, hook in self._on_turn_start:
            self._handle(ctx, i, hook(state.signals[i]))

    def _deliver_feedback(self, ctx: _Ctx) -> None:
        state = ctx.state
        items = state.feedback
        state.feedback = ()
        lines = [FEEDBACK_HEADER]
        lines += [f"- {signal}: {text}" for signal, text in items]
        lines.append(FEEDBACK_FOOTER)
        ctx.emit(
            FeedbackEvent,
            signals=[signal for signal, _ in items],
            text="\n".join(lines),
        )

    def _halt_ignored(self, ctx: _Ctx, at: str) -> None:
        state = ctx.state
        if state.halted_by:
            what = "halted by " + ", ".join(state.halted_by)
            scope = "session"
        else:
            what = f"turn cut by {state.turn_cut}"
            scope = "turn"
        event_name = "started a new turn" if at == "turn_start" else "made another tool call"
        ctx.emit(
            Alert,
            signal=HALT_IGNORED,
            severity="critical",
            scope=scope,
            reason=(
                f"The session is {what} but {event_name}: the halting controller did not "
                f"stop the agent. Check the controller that consumes guardrail trips."
            ),
            guidance="",
            detail={"at": at, "halted_by": list(state.halted_by), "turn_cut": state.turn_cut},
        )

    # --------------------------------------------------------------- findings

    def _handle(self, ctx: _Ctx, index: int, finding: Finding | None) -> None:
        if finding is None:
            return
        state = ctx.state
        for dep in self._defers[index]:
            if self.signals[dep].is_latched(state.signals[dep]):
                return  # one behaviour, one alert: the deferred-to signal owns it
        if not finding.trip_only:
            ctx.emit(
                Alert,
                signal=finding.signal,
                severity=finding.severity,
                scope=finding.scope,
                reason=finding.reason,
                guidance=finding.guidance,
                detail=finding.detail,
            )
        if finding.guardrail == "watchdog":
            if self.mode >= FEEDBACK:
                self._queue_feedback(state, finding)
            if self.mode == ENFORCE and finding.severity == "critical":
                self._trip(ctx, finding)
        elif finding.enforced:
            self._trip(ctx, finding)

    def _queue_feedback(self, state: SessionState, finding: Finding) -> None:
        text = finding.guidance or finding.reason
        state.feedback = (*state.feedback, (finding.signal, text))[-self.feedback_limit :]

    def _trip(self, ctx: _Ctx, finding: Finding) -> None:
        state = ctx.state
        guardrail = finding.guardrail
        if finding.scope == "session":
            if guardrail in state.halted_by:
                return  # idempotent latch
            self._halt(ctx, finding, finding.reason, consecutive=state.cut_streak)
            return
        if state.turn_cut is not None:
            return  # a turn is cut once, however many findings it has
        state.turn_cut = guardrail
        state.ignored_latched = False
        if not finding.escalates:
            self._emit_trip(ctx, finding, finding.reason, scope="turn", halted=False, consecutive=0)
            return
        if state.cut_kind == guardrail:
            state.cut_streak += 1
        else:
            state.cut_kind = guardrail
            state.cut_streak = 1
        if state.cut_streak >= self.halt_after:
            reason = (
                f"{state.cut_streak} turns in a row were cut by {guardrail} "
                f"(last: {finding.signal}); the session is halted until an operator resets "
                f"it. Last cut: {finding.reason}"
            )
            self._halt(ctx, finding, reason, consecutive=state.cut_streak)
            return
        # Say what the session's state is: a cut by one guardrail leaves a halt by
        # another in place, and "not halted" would then be wrong.
        if state.halted_by:
            outcome = (
                f"The turn in flight was cut; {guardrail} did not halt the session, which "
                f"stays halted by {', '.join(state.halted_by)}."
            )
        else:
            outcome = "The turn in flight was cut; the session was NOT halted."
        self._emit_trip(
            ctx,
            finding,
            f"{outcome} {finding.reason}",
            scope="turn",
            halted=False,
            consecutive=state.cut_streak,
        )
        if guardrail == "watchdog":
            self._reset_detectors(state)

    def _halt(self, ctx: _Ctx, finding: Finding, reason: str, consecutive: int) -> None:
        state = ctx.state
        if not state.halted_by:
            state.halted_at = state.last_ts
        state.halted_by = (*state.halted_by, finding.guardrail)
        state.halt_signal = finding.signal
        state.halt_reason = reason
        state.ignored_latched = False
        self._emit_trip(ctx, finding, reason, scope="session", halted=True, consecutive=consecutive)

    def _emit_trip(
        self, ctx: _Ctx, finding: Finding, reason: str, scope: str, halted: bool, consecutive: int
    ) -> None:
        ctx.emit(
            GuardrailTrip,
            guardrail=finding.guardrail,
            signal=finding.signal,
            scope=scope,
            halted_turn=ctx.state.in_turn,
            session_halted=halted,
            reason=reason,
            consecutive_cuts=consecutive,
            bound=finding.bound,
        )

    @staticmethod
    def _asked_allowance(state: SessionState, key: int) -> int:
        """The runs its user asked for that this call may be one of (``asked_runs`` while
        it is the asked call and within the count, else 0), counting the call."""
        asked = state.asked_key
        if key != asked:
            seen = state.asked_seen
            if key not in seen:
                if len(seen) < ASKED_SEEN:
                    state.asked_seen = (*seen, key)
                return 0
            if asked and state.asked_made >= ASKED_SETTLED:
                return 0
            # the first call sent again since the ask is the one asked to be run again
            # (until it has been, ASKED_SETTLED times: a file read twice before the runs
            # gives way to the run sent again after it)
            state.asked_key = asked = key
            state.asked_made = 1
        state.asked_made = made = min(state.asked_made + 1, ASKED_REPETITIONS_MAX + 1)
        return state.asked_runs if made <= state.asked_runs else 0

    def _reset_detectors(self, state: SessionState) -> None:
        for i in self._watchdog_indices:
            state.signals[i] = self.signals[i].new_state()
        state.history.clear()
        state.handed = ()
        state.submitted = ()
        state.acts = ()
        state.asked_runs = state.asked_key = state.asked_made = 0
        state.asked_seen = ()
        state.last_write = None
        state.made.clear()

    # ----------------------------------------------------------------- resets

    def reset(self, state: SessionState, event: Reset, ts: float | None = None) -> list[Output]:
        """Apply an operator reset (from the control source only) and acknowledge it.

        A reset the operator stamped (``ts``: the command line and the client do) that
        the session already applied is skipped: a copy of it delivered again (a reset
        re-routed to the session's home partition, copied a second time after a crash)
        must not raise a budget twice."""
        if event.ts is not None:
            identity = (event.ts, event.by or "", event.guardrail, event.additional_budget_usd or 0.0)
            if identity in state.resets:
                return []
            state.resets = (*state.resets[-(RESETS_KEPT - 1) :], identity)
        state.applied += 1
        if ts is not None:
            state.last_ts = ts
        ctx = _Ctx(state, event)
        target = event.guardrail
        budget = event.additional_budget_usd
        guardrails: tuple[str, ...] = (
            self._resettable if target == "all" else () if target == "watchdog" else (target,)
        )
        chosen = [(i, s) for i, s in self._guardrail_signals if s.guardrail in guardrails]

        refusal = None
        if budget is not None and not any(s.takes_budget for _, s in chosen):
            budgeted = [g for g in guardrails if g in self._budget_guardrails]
            if budgeted:
                what = " or ".join(g.replace("_", " ") for g in budgeted)
                refusal = f"no {what} is configured for this session: nothing to raise"
            else:
                what = " or ".join(self._budget_guardrails)
                refusal = f"additional_budget_usd applies to the {what} guardrail, not the {target}"
        for i, sig in chosen:
            refusal = refusal or sig.check_reset(state.signals[i], budget)

        if refusal is None:
            if target in ("watchdog", "all"):
                self._release(state, "watchdog")
                self._reset_detectors(state)
            for guardrail in guardrails:
                self._release(state, guardrail)
            for i, sig in chosen:
                state.signals[i] = sig.apply_reset(state.signals[i], budget)
            if not state.halted_by:
                state.halt_signal = state.halt_reason = state.halted_at = None
            state.ignored_latched = False
            reason = f"reset of {target} accepted"
            if state.halted_by:
                reason += "; still halted by " + ", ".join(state.halted_by)
        else:
            reason = f"reset of {target} refused: {refusal}"

        ceiling = None
        for i, sig in self._guardrail_signals:
            ceiling = sig.describe(state.signals[i]).get("max_session_usd", ceiling)
        ctx.emit(
            GuardrailReset,
            guardrail=target,
            accepted=refusal is None,
            reason=reason,
            by=event.by,
            max_session_usd=ceiling,
            still_halted_by=list(state.halted_by),
        )
        return ctx.outputs or []

    @staticmethod
    def _release(state: SessionState, guardrail: str) -> None:
        """Lift ``guardrail``'s halt, its run of cut turns and its cut of this turn."""
        state.halted_by = tuple(g for g in state.halted_by if g != guardrail)
        if state.cut_kind == guardrail:
            state.cut_kind, state.cut_streak = None, 0
        if state.turn_cut == guardrail:
            state.turn_cut = None

    # ---------------------------------------------------------- fleet circuits

    def fleet_halt(
        self, state: SessionState, scope: str, generation: int, reason: str, ts: float | None
    ) -> list[Output]:
        """Halt the session because the circuit of ``scope`` is open (docs/fleet.md).

        Enforced whatever the session's mode, like a cost ceiling. Idempotent: a
        session halted by a fleet circuit already is left alone. The trip's id
        names the session, the scope and the circuit's generation, not the
        session's record count: the circuit comes from outside the session's
        stream, and every instance or replay that applies it must make the same id.
        """
        if FLEET_GUARDRAIL in state.halted_by:
            return []
        if not state.halted_by:
            state.halted_at = ts if ts is not None else state.last_ts
        state.halted_by = (*state.halted_by, FLEET_GUARDRAIL)
        state.halt_signal = FLEET_SIGNAL
        state.halt_reason = reason
        state.fleet_scope = scope
        state.ignored_latched = False
        trip = GuardrailTrip(
            id=fleet_trip_id(state.session, scope, generation),
            session=state.session,
            agent=state.agent,
            ts=ts if ts is not None else state.last_ts,
            seq=None,
            guardrail=FLEET_GUARDRAIL,
            signal=FLEET_SIGNAL,
            scope="session",
            halted_turn=state.in_turn,
            session_halted=True,
            reason=reason,
        )
        return [trip]

    def fleet_handover(self, state: SessionState, scope: str, to_scope: str, reason: str) -> bool:
        """The circuit of ``scope`` closed while another open circuit, ``to_scope``,
        covers the session too: the fleet halt stays and is now that circuit's (its
        close lifts it). Nothing is emitted: the session was halted and stays halted."""
        if FLEET_GUARDRAIL not in state.halted_by or state.fleet_scope != scope:
            return False
        state.fleet_scope = to_scope
        state.halt_reason = reason
        return True

    def fleet_release(
        self, state: SessionState, scope: str, generation: int, reason: str, ts: float | None
    ) -> list[Output]:
        """The circuit of ``scope`` closed: lift the fleet halt it put on the session."""
        if FLEET_GUARDRAIL not in state.halted_by or state.fleet_scope != scope:
            return []
        state.halted_by = tuple(g for g in state.halted_by if g != FLEET_GUARDRAIL)
        state.fleet_scope = None
        if not state.halted_by:
            state.halt_signal = state.halt_reason = state.halted_at = None
        state.ignored_latched = False
        receipt = GuardrailReset(
            id=fleet_trip_id(state.session, scope, generation, "release"),
            session=state.session,
            agent=state.agent,
            ts=ts if ts is not None else state.last_ts,
            seq=None,
            guardrail=FLEET_GUARDRAIL,
            accepted=True,
            reason=reason + (
                "; still halted by " + ", ".join(state.halted_by) if state.halted_by else ""
            ),
            still_halted_by=list(state.halted_by),
        )
        return [receipt]

    # ---------------------------------------------------------------- preview

    def would_trip(self, state: SessionState, event: ToolCall) -> list[str]:
        """Signals whose ``would_trip`` preview says this call would trip them (no mutation)."""
        if event.tool in MCP_WRAPPERS:
            event = unwrapped(event)
        args = call_args(event.args)
        if state.handed and type(args) is dict:
            args = _keyed_args(args, state.handed)
        canonical = canonicalize(
            args, self._ignore_fields.fields_for(event.tool) if self._has_ignores else None
        )
        key = call_key(event.tool, canonical)
        history = [*state.history, key][-max(self.history_len, 1) :]
        view = self._view(event, canonical, key, history)
        return [sig.id for i, sig in self._previews if sig.would_trip(state.signals[i], view)]


_NAMED_IDS: dict[tuple[str, ...], re.Pattern[str]] = {}
"""The pattern that finds any of a session's ids as a whole word, per set of ids (bounded:
the ids come from untrusted answers)."""


def _names_any(text: str, ids: tuple[str, ...]) -> bool:
    """Whether ``text`` names one of ``ids`` as a whole word (no letter, digit, ``_`` or
    ``-`` right before or after it: ``job-123`` is not in ``job-1234``): one search, in C."""
    pattern = _NAMED_IDS.get(ids)
    if pattern is None:
        if len(_NAMED_IDS) >= 1024:
            _NAMED_IDS.clear()
        pattern = _NAMED_IDS[ids] = re.compile(
            r"(?<![\w-])(?:" + "|".join(re.escape(name) for name in sorted(ids, key=len, reverse=True)) + r")(?![\w-])"
        )
    return pattern.search(text) is not None


def _keyed_args(args: dict[Any, Any], handed: tuple[str, ...]) -> dict[Any, Any]:
    """The arguments a call is keyed by, while a write made again has handed ids back (until
    the agent's next write): each value naming one of them as :data:`HANDED_BACK` and its
    place in the answer (``discard_draft(draft_id="drf_4472")`` after the draft
    ``drf_4472`` was saved again is the discard of the copy just made, whatever its id), the
    others as they are."""
    keyed = None
    for name, value in islice(args.items(), MAX_KEYED_ARGS):
        text = id_text(value)
        if text is not None and text in handed:
            if keyed is None:
                keyed = dict(args)
            # which of them, by its place in the answer: the same place lap after lap is
            # one call, two ids of one answer are two
            keyed[name] = f"{HANDED_BACK} #{handed.index(text)}"
    return keyed if keyed is not None else args


def unwrapped(event: ToolCall) -> ToolCall:
    """A call carried by an MCP wrapper (``use_mcp_tool``) as a call of the tool it carries,
    with the arguments it carries (:func:`facts.wrapped_call`); any other call as it is."""
    wrapped = wrapped_call(event.args)
    if wrapped is None:
        return event
    return structs.replace(event, tool=wrapped[0], args=wrapped[1])


def plain_call_facts(
    tool: str, args: dict[Any, Any], kind: str | None, facts: CallFacts
) -> tuple[CallFacts, bool]:
    """A plain tool's call facts (``facts``, by its name) as its arguments amend them, and
    whether the call is a command runner's: keystrokes for a terminal (Terminus'
    ``send_keys``, whatever the tool is named; browser-use's ``send_keys`` sends ``keys``)
    are; with no ``kind`` from the runtime, a command line or an action that only waits, or
    a tool of several operations told to write (:func:`facts.argument_facts`). One rule for
    a call and its preview."""
    if type(args.get("keystrokes")) is str:
        return runner_facts(args, False, kind), True
    if kind is None:
        return argument_facts(tool, args, facts), False
    if kind == "read":
        return pattern_search(tool, args, facts) or facts, False
    return facts, False


class _Ctx:
    """Per-event emission context: builds outputs with deterministic ids."""

    __slots__ = ("event", "outputs", "quiet", "state", "ts")

    def __init__(self, state: SessionState, event: Any) -> None:
        self.state = state
        self.event = event
        self.outputs: list[Output] | None = None
        # The event came after [waits] pause_seconds of quiet (read for a result only).
        self.quiet = False
        self.ts: float | None = None  # the event's time (else its record's), if known

    def emit(self, cls: type[Output], **fields: Any) -> None:
        state = self.state
        if self.outputs is None:
            self.outputs = []
        ordinal = len(self.outputs)
        # The session's state, not only its name: a session evicted and seen again starts
        # its count afresh, and its first trip would repeat an id its controller already
        # handled (dropped as a duplicate). ``born`` tells the two states apart; a state
        # from before it keeps the ids it had.
        born = state.born
        seed = (
            f"{state.session}\x1f{state.applied}\x1f{ordinal}" if born is None
            else f"{state.session}\x1f{born!r}\x1f{state.applied}\x1f{ordinal}"
        )
        digest = blake2b(seed.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
        event = self.event
        self.outputs.append(
            cls(
                id=digest,
                session=state.session,
                agent=state.agent,
                ts=state.last_ts,
                seq=getattr(event, "seq", None),
                **fields,
            )
        )
