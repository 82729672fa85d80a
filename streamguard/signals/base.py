"""The signal interface: how a detector plugs into the per-session watchdog.

A signal is a stateless object built from its policy table; everything it
remembers about one session lives in a small msgspec ``State`` Struct that the
watchdog owns, snapshots and restores. The watchdog calls only the hooks a
signal overrides (it checks at construction time), so a signal that reads only
tool calls costs nothing on results, text or usage.

Hooks receive views computed once per event and shared by every signal: a
:class:`CallView` (canonical arguments, a stable 64-bit call key, and the shared
recent-call history) or a :class:`ResultView` (failed, no-op, payload
fingerprint). A hook returns a :class:`Finding` when the signal trips on that
event, else ``None``. What happens to a finding — an alert, a feedback note, a
turn cut, a session halt — is the watchdog's decision, driven by the mode and
by the finding's severity, scope and guardrail; signals never decide it.

Adding a signal: subclass :class:`Signal`, give it ``id``, ``severity``,
``State`` and ``Config``, and register it in :mod:`streamguard.signals`. The
watchdog, the policy loader and the snapshot format need no change. Every member
the watchdog reads is declared on :class:`Signal` (the contract, checked for each
registered signal at first use by :func:`streamguard.signals.check_registry`):

* class declarations: ``id``, ``severity``, ``scope``, ``guardrail``,
  ``default_enabled``, ``State``, ``Config``, ``defers_to``,
  ``withdrawn_by_text``, ``policy_table``, ``alert_ids`` (the alert ids its
  findings carry, when more than its ``id``), and for guardrails ``resettable``
  and ``takes_budget``;
* what the watchdog asks an instance, which may depend on its config and so is
  set in ``__init__``: ``active``, ``needs_fingerprint``, ``needs_result_size``,
  ``needs_pairing``;
* hooks: ``on_call`` ... ``on_final_answer``, ``history_needed``,
  ``is_latched``, ``would_trip`` (through ``preview_state``), and for guardrails
  ``check_reset``, ``apply_reset``, ``describe``.

``Config`` and ``State`` are module-level classes named for their signal
(``RepeatedToolCallConfig``, ``RepeatedToolCallState``), assigned on the class.
A config's bounds are declared once, on its fields (``Annotated[int,
Meta(ge=2)]``): the policy loader rejects a value outside them, and
:meth:`SignalConfig.resolved` clamps a hand-built one into them (msgspec does
not validate direct construction). Rules across fields are ``validate`` (what a
policy must not say) and ``resolved`` (how a signal repairs a hand-built config).
"""

from __future__ import annotations

import re
import zlib
from functools import cache
from sys import intern
from typing import Annotated, Any, ClassVar, Self, TypeVar, get_args, get_origin, get_type_hints

import msgspec
from msgspec import Meta, Struct, structs
from msgspec.json import encode as _json_encode

from ..canonical import CanonicalArgs, fingerprint_payload, stable_hash, truncate_middle
from ..events import FinalAnswer, Scope, Severity, Text, ToolCall, Usage
from .facts import (
    COMPUTER_ACTIONS,
    DEFAULT_WAIT_TOOLS,
    FLAG_AWAITS_OWN,
    FLAG_READ,
    FLAG_RUNNER,
    FLAG_WRITE,
    SQL_ACTION,
    CallFacts,
    CommandRunners,
    ToolGlobs,
    call_args,
    is_code_tool,
    plain_facts,
    runner_facts,
)

_json_decode = msgspec.json.Decoder().decode
_default_runners = CommandRunners()
_default_waits = ToolGlobs(DEFAULT_WAIT_TOOLS, styled=True)

HALT_IGNORED = "halt-ignored"
"""The watchdog's own alert (a halted session that keeps working): no signal emits it."""


class SignalConfig(Struct, kw_only=True, forbid_unknown_fields=True):
    """Options every signal's policy table accepts.

    ``enabled``: ``None`` keeps the signal's default (most are on; opt-in
    guardrails are off). ``exempt_tools``: calls and results of these tools are
    invisible to this signal.
    """

    enabled: bool | None = None
    exempt_tools: list[str] = []

    at_most: ClassVar[tuple[tuple[str, str], ...]] = ()
    """``(field, bound)`` pairs: ``field`` must not exceed ``bound`` (a threshold and its
    window). :meth:`validate` refuses a policy that breaks one; :meth:`resolved` clamps
    a hand-built config onto it."""

    def validate(self) -> None:
        """Refuse a combination of values a policy must not hold (``ValueError``, its
        message starting with the field at fault).

        One field's bounds are its ``Meta`` annotation, which msgspec checks when
        the policy is loaded; the loader then calls this for the rules across fields.
        """
        for name, bound in self.at_most:
            value, limit = getattr(self, name), getattr(self, bound)
            if value > limit:
                raise ValueError(f"{name} ({value}) must not exceed {bound} ({limit})")

    def resolved(self) -> Self:
        """The config as a signal runs it: :func:`within_bounds`, then the repair of any
        rule across fields (a subclass extends this). ``self`` when nothing changes:
        always for a config a policy loaded, except for the few values a policy may give
        and the signal repairs (a dominant-call threshold above its window is the window)."""
        config = within_bounds(self)
        for name, bound in self.at_most:
            limit = getattr(config, bound)
            if getattr(config, name) > limit:  # hand-built: the bound
                config = structs.replace(config, **{name: limit})
        return config


class Finding(Struct, kw_only=True, gc=False):
    """What a signal reports when it trips on an event.

    ``guardrail`` names the guardrail that owns the finding: ``watchdog``
    findings obey the watchdog mode (only critical ones cut or halt, only under
    enforce); ``cost_ceiling`` and ``context_budget`` findings with
    ``enforced=True`` cut or halt whenever their guardrail is configured.
    ``escalates``: whether a turn cut from this finding counts toward the
    three-consecutive-cut-turns session halt. ``bound`` qualifies cost trips.
    ``trip_only``: the finding is a guardrail action with no separate alert.
    """

    signal: str
    severity: Severity
    scope: Scope = "session"
    reason: str
    guidance: str = ""
    detail: dict[str, Any] = {}
    guardrail: str = "watchdog"
    enforced: bool = False
    escalates: bool = True
    bound: str | None = None
    trip_only: bool = False


class CallView:
    """One tool call as the signals see it (built once per call event).

    ``key`` is the stable hash of ``tool`` and the canonical arguments;
    ``history`` is the session's shared list of recent call keys, oldest
    first, *including* this call as its last element. Signals must not mutate
    ``history``; its length is the largest ``history_needed()`` of the active
    signals.

    ``runner``, ``action``, ``write``, ``search``, ``wait``, ``waits_first`` (a read
    asked after a wait of its own: ``sleep 120; ray job status``), ``shell`` and ``ask`` are
    the shared call facts of :mod:`streamguard.signals.facts` (and ``read``: the call is
    known to only look, ``CallFacts.read``): whether the tool is a
    command runner, what the call does (the program and sub-command for a runner,
    empty when that cannot be read; the tool name otherwise), and whether it
    changes something, looks something up, waits on purpose, writes only by
    changing the shell, or asks the agent's user. The watchdog computes them once
    per call from the policy; a view built without them (a signal tested alone)
    derives them with the default command-runner list. ``args`` are the call's arguments as the contract reads
    them: a string holding a JSON object is that object.

    A view is valid for the duration of the hook it is passed to: the watchdog refills
    one view object for every call (no allocation per event), so a signal keeps the
    values it needs, never the view.
    """

    __slots__ = (
        "action", "args", "ask", "asked_runs", "call_id", "canonical", "event", "history", "key",
        "kind", "read", "runner", "search", "shell", "tool", "wait", "waits_first", "write",
    )

    def __init__(
        self,
        event: ToolCall,
        canonical: CanonicalArgs,
        key: int,
        history: list[int],
        kind: str | None,
        facts: CallFacts | None = None,
        runner: bool | None = None,
    ) -> None:
        self.event = event
        self.tool = event.tool
        self.args = args = call_args(event.args)
        self.call_id = event.call_id
        self.canonical = canonical
        self.key = key
        self.history = history
        self.kind = kind  # the event's kind, else the policy's tool-name pattern, else None
        if facts is None:
            runner = _default_runners(event.tool)
            if runner:
                facts = runner_facts(args, is_code_tool(event.tool), kind)
            else:
                facts = plain_facts(event.tool, kind, _default_waits(event.tool), kind)
        self.runner = bool(runner)
        self.action = facts.action
        self.write = facts.write
        self.search = facts.search
        self.wait = facts.wait
        self.waits_first = facts.waits_first
        self.shell = facts.shell
        self.ask = facts.ask
        self.read = facts.read
        # The runs the session's user asked for ("run it 15 times": [waits]
        # asked_repetitions) when this call is the asked one, within that count; else 0.
        self.asked_runs = 0


class ResultView:
    """One tool result as the signals see it.

    ``failed``: the error is a non-empty string. ``fingerprint``: a stable
    64-bit hash of the payload (or of the agent's ``result_digest``), ``0``
    when the payload is empty or unencodable — and also ``0`` for failed and
    no-op results, which no payload-keyed signal reads. ``size``: payload bytes
    (``result_bytes`` when the agent sent it).

    The call this result answers, when the watchdog could pair them (by
    ``call_id``, else the newest pending call of the same tool): ``call_key``
    (its call key, ``0`` when unpaired), ``call_flags`` (``FLAG_WRITE``,
    ``FLAG_SEARCH``, ``FLAG_RUNNER`` of :mod:`~streamguard.signals.facts`) and
    ``action`` (the call's action; the tool name when unpaired). ``outcome``
    identifies what came back: the fingerprint of a successful payload, a hash
    of the error text of a failure (:func:`failure_outcome`), a constant for a no-op; ``0`` when unknown.

    ``paused``: the session paused (waited, heard from its user, or went quiet for
    ``[waits] pause_seconds``) since the same call was last answered: a status asked
    again after a pause is a poll (:func:`says_in_progress`). False for a call answered
    for the first time (or not among the session's last :data:`ANSWERED_KEPT` answered),
    unless the call waited before it read (``CallFacts.waits_first``: ``sleep 120; ray
    job status``, each time with another sleep): then ``paused`` and ``waited`` are true.
    ``waited``: one of those pauses was a deliberate wait (a wait call, ``sleep 60`` in
    a command, a long poll whose tool held the answer) and the session did nothing else
    since the call was last answered (no write, no call of a tool not known to only read,
    no failed answer): an answer that says nothing of an end, asked again after such a
    wait, is a poll's too (:func:`poll_answer`).
    ``restarting``: ``paused``, the call is known to only read, and the session restarted
    something (a device's ``reload``, ``systemctl restart``, ``reboot_device``, answered
    without a failure) with another call at most ``[waits] restart_seconds`` before: the
    probe's answer, the same again and saying no end, is a poll's (:func:`poll_answer`),
    and its failure, saying what it reached for is down (:func:`says_unreachable`), a
    wait's.
    ``asked``: one of those pauses was the session's user asking for something in new
    words (none of the user's last four messages again: ``SessionState.asks``): what the
    call answers now may be what the user just asked for (a switch turned back off at the
    user's word).
    ``parrot``: the agent's latest message said again one of its four before it
    (``SessionState.said``): an agent repeating itself, whose user's new words answer the
    same request again, not a next step.
    ``paced``: one of those pauses was a deliberate wait, whatever else came between
    (a failed answer is an act: the same failure checked again at the pace the user
    asked for has ``paced`` and not ``waited``).
    ``watched``: the session's user asked the agent to watch for something to happen
    ("let me know once it's live", or a pace of checks: ``[waits] asked_watches``).
    ``asked_runs``: how many times the session's user asked for something to be done ("run
    it 15 times": ``[waits] asked_repetitions``) when this answers the call asked for,
    within that count; else 0.
    ``encoded``: the payload's sorted JSON, when the watchdog encoded it for the fingerprint
    (``None`` otherwise: a string, a digest, a declared size), so the gist need not encode
    it again.
    ``sent``: the values naming what the call was about (``facts.act_items``: its
    id-like values and short tokens with a digit), when it acts (not known to only read,
    no command runner's); ``()`` otherwise: which item a sweep's act was about.

    Like :class:`CallView`, valid only during the hook (the watchdog refills one object).
    """

    __slots__ = (
        "action", "asked", "asked_runs", "call_flags", "call_id", "call_key", "encoded", "error", "event", "failed",
        "fingerprint", "gist", "no_op", "outcome", "paced", "parrot", "paused", "progress", "restarting", "sent",
        "size", "tool", "transient", "waited", "watched",
    )

    def __init__(
        self,
        event: Any,
        failed: bool,
        fingerprint: int,
        size: int,
        call_key: int = 0,
        call_flags: int = 0,
        action: str | None = None,
        outcome: int | None = None,
        paused: bool = False,
        waited: bool = False,
        restarting: bool = False,
    ) -> None:
        self.event = event
        self.tool = event.tool
        self.call_id = event.call_id
        self.error = event.error
        self.no_op = event.no_op
        self.failed = failed
        self.fingerprint = fingerprint
        self.size = size
        self.call_key = call_key
        self.call_flags = call_flags
        self.action = event.tool if action is None else action
        self.outcome = outcome_of(event, failed, fingerprint) if outcome is None else outcome
        self.gist = 0  # computed on first use: answer_gist
        self.encoded: bytes | None = None  # the payload's sorted JSON, when the watchdog made it
        # on first use: says_in_progress (1 an end, or nothing read; 2 under way; 3 a value,
        # no end; 4 nothing yet, no end: NOTHING_YET)
        self.progress = 0
        self.transient = -1  # on first use: failed_transiently (-1 not read yet)
        self.paused = paused
        self.waited = waited
        self.paced = waited
        self.restarting = restarting
        self.asked = False
        self.parrot = False
        self.watched = False
        self.asked_runs = 0
        self.sent: tuple[str, ...] = ()


NO_OP_OUTCOME = 0x6E6F2D6F70  # any fixed non-zero value: every no-op says the same thing


def outcome_of(event: Any, failed: bool, fingerprint: int) -> int:
    """The ``outcome`` of a result (see :class:`ResultView`)."""
    if failed:
        return failure_outcome(event)
    if event.no_op:
        return NO_OP_OUTCOME
    return fingerprint


_STATUS_ONLY = re.compile(
    r"(?i)command|process|program|exit(?:ed)?|return(?:ed)?|returncode|rc|status|code|with"
    r"|non-?zero|errors?|failed|failure|[\W\d_]"
)


def says_only_status(error: str) -> bool:
    """Whether an error text says no more than that the program failed, and with which
    status (``exit code 1``, ``Command failed with exit status 2``, ``error``)."""
    return len(error) <= 64 and not _STATUS_ONLY.sub("", error)


def failure_outcome(event: Any) -> int:
    """A failure's identity: its error text; when that says only that the program failed
    (:func:`says_only_status`), also the output the failure came with.

    Runtimes that record an exit status say ``exit code 1`` for every red test run and
    put what the program printed in ``result``: by the error alone, each of those runs
    would be the same failure. An error that says what went wrong is the identity on its
    own (outputs carry timings and addresses that differ from run to run).
    """
    error = event.error
    if says_only_status(error):
        payload = fingerprint_payload(event.result, event.result_digest)
        if payload:
            return stable_hash("\0error", f"{error}\0{payload:016x}")
    return stable_hash("\0error", error)


ACK_BYTES = 200
"""Largest answer of a write tool read as a bare acknowledgement."""


def is_write_acknowledgement(result: ResultView) -> bool:
    """Whether a result is a write tool's bare acknowledgement ("File written
    successfully.", ``{"ok": true}``: a success of at most :data:`ACK_BYTES` from a write
    that is no command runner's, or a computer-use tool's click or keystroke: "clicked";
    a command's when it is a database client's command tags or one line naming the act
    its sub-command did, :func:`_reports_its_act`). It says only that the write worked:
    readers of repeated answers take it as no evidence. A command's other output says
    what happened."""
    flags = result.call_flags
    if not flags & FLAG_WRITE or result.failed:
        return False
    payload = result.event.result
    if type(payload) is str and payload.startswith("<file_write_result>") and len(payload) <= FILE_WRITE_RESULT_LIMIT:
        # Roo Code's report of a file written: the file and what was done to it, and a
        # notice that the agent need not read it again; with no problems found, no more
        # than "File written successfully." in its markup.
        return "<problems>" not in payload and (
            "<operation>modified</operation>" in payload or "<operation>created</operation>" in payload
        )
    if result.size > ACK_BYTES:
        return False
    # A runner's output says what happened; not an SQL statement's "Success. No rows
    # returned" or a computer-use click's "clicked", nor a database client's command tag
    # ("ALTER TABLE", "INSERT 0 1", "BEGIN\nUPDATE 3\nCOMMIT": psql's, Trino's).
    action = result.action
    if not flags & FLAG_RUNNER or action in COMPUTER_ACTIONS or action.startswith(SQL_ACTION):
        return True
    return type(payload) is str and (_command_tags(payload) or _reports_its_act(payload, action))


TAGS_TEXT_LIMIT = 1024
FILE_WRITE_RESULT_LIMIT = 1024
"""Longest Roo Code file-write report read as an acknowledgement (a report with its
problems listed is longer, and is an answer)."""


_NOTHING_DONE = re.compile(
    r"(?i)\b(?:already|unchanged|no[ _-]?op|nothing|no changes?|not|up[ _-]to[ _-]date|skipp)"
    r"|error|fail|warn|denied|invalid|refus|cannot|can't|unable"
)
"""Words of a one-line output that say its act did nothing, or went wrong."""


def _reports_its_act(text: str, action: str) -> bool:
    """Whether a command's output is one short line naming the act its sub-command did
    (``git lfs track '*.wav'`` answering ``Tracking "*.wav"``, ``kubectl label pod web-1
    tier=fe`` answering ``pod/web-1 labeled``, ``kubectl scale`` answering ``...
    scaled``): the first five letters of the sub-command (of at least four) begin a word
    of it, and no word says the act did nothing or went wrong (:data:`_NOTHING_DONE`:
    ``"*.psd" already supported``, ``unchanged``). Such a line acknowledges a write as
    "File written." does; a longer output says what happened."""
    sub = action.rpartition(" ")[2]
    if len(sub) < 4 or not sub.isalpha() or len(text) > ACK_BYTES or "\n" in text.rstrip("\n"):
        return False
    low = text.lower()
    stem = sub[:5].lower()
    at = low.find(stem)
    while at >= 0:
        if at == 0 or not low[at - 1].isalnum():
            return _NOTHING_DONE.search(text) is None
        at = low.find(stem, at + 1)
    return False


def _command_tags(text: str) -> bool:
    """Whether every line of ``text`` is a database client's command tag (:data:`_SQL_TAG`,
    one line at a time: no pattern repeats over the whole text) and none says it changed
    nothing (``UPDATE 0``, ``DELETE 0``: no row matched). At most :data:`TAGS_TEXT_LIMIT`
    characters: tags are short, and the size a runtime declares is no bound on the text."""
    if len(text) > TAGS_TEXT_LIMIT:
        return False
    tags = [tag for tag in (line.strip() for line in text.splitlines()) if tag]
    if not tags or any(_SQL_TAG.fullmatch(tag) is None for tag in tags):
        return False
    return not any(tag.endswith(" 0") for tag in tags)


_SQL_TAG = re.compile(
    r"(?:ALTER|CREATE|DROP|INSERT|UPDATE|DELETE|TRUNCATE|GRANT|REVOKE|COMMENT|VACUUM|ANALYZE"
    r"|COPY|MERGE|SET|RESET|BEGIN|COMMIT|CALL|REFRESH|CLUSTER|REINDEX)(?: [A-Z]+){0,3}"
    r"(?: \d+){0,2}"
)
"""A database client's command tags, one a statement: what psql or Trino print for a
statement that changed something and returned no rows."""


class Signal:
    """Base class of every detector. Subclasses override the hooks they need."""

    # ------------------------------------------------------------ declarations
    id: ClassVar[str]
    severity: ClassVar[Severity]
    scope: ClassVar[Scope] = "session"
    guardrail: ClassVar[str] = "watchdog"
    """``watchdog`` (the mode decides), or the guardrail that owns this signal's findings."""
    default_enabled: ClassVar[bool] = True
    State: ClassVar[type[Struct]]
    """Per-session state: every field has a default, its tag is the signal's ``id``
    (snapshots carry it; see :mod:`streamguard.snapshot` for evolving it)."""
    Config: ClassVar[type[SignalConfig]] = SignalConfig
    defers_to: ClassVar[tuple[str, ...]] = ()
    """Signal ids whose *active latch* silences this signal (one behaviour, one alert)."""
    withdrawn_by_text: ClassVar[bool] = False
    """A queued feedback note from this signal is dropped if the agent speaks first."""
    policy_table: ClassVar[str | None] = None
    """A guardrail with a top-level policy table of its own (``[cost_ceiling]``) names it;
    other signals are configured under ``[signals.<id>]``."""
    alert_ids: ClassVar[tuple[str, ...]] = ()
    """The alert ids of this signal's findings when they are not just its ``id``
    (``verification`` reports three rules under their own ids); see :func:`alert_ids`."""
    resettable: ClassVar[bool] = False
    """A guardrail an operator resets by name (``streamguard reset --guardrail``), through
    :meth:`check_reset` and :meth:`apply_reset`; ``all`` resets every one of them."""
    takes_budget: ClassVar[bool] = False
    """A resettable guardrail that a reset's ``additional_budget_usd`` raises."""

    # ------------------------------------- what the watchdog asks an instance
    # Instance attributes, set in __init__ when they depend on the config.
    active: bool = True
    """False: the signal has nothing to do under its config (a cost ceiling with no
    bound set) and the watchdog leaves it out."""
    needs_fingerprint: bool = True
    """The signal reads ``ResultView.fingerprint`` (the watchdog hashes payloads only
    when an active result reader does)."""
    needs_result_size: bool = False
    """The signal reads ``ResultView.size``."""
    needs_pairing: bool = False
    """The signal reads ``ResultView.call_key``/``call_flags``/``action``: the watchdog
    keeps the session's pending calls only when some active signal does."""
    sees_waits: bool = True
    """The signal's call and result hooks see calls that wait on purpose
    (``CallView.wait``: ``sleep 60``, ``kubectl rollout status``) and their results. Loop
    detectors set it False: identical answers to a wait are what waiting looks like;
    the failure signals from their ``waits_are_polls`` setting. Read once, when the
    watchdog is built."""

    config: SignalConfig

    def __init__(self, config: SignalConfig | None = None) -> None:
        if config is None:
            config = self.Config()
        elif not isinstance(config, self.Config):
            # A bare SignalConfig (enabled/exempt_tools only): this signal's defaults.
            config = self.Config(enabled=config.enabled, exempt_tools=list(config.exempt_tools))
        self.config = config.resolved()
        self.exempt = frozenset(self.config.exempt_tools)

    def new_state(self) -> Struct:
        return self.State()

    def history_needed(self) -> int:
        """How many recent call keys this signal reads from ``CallView.history``."""
        return 0

    def is_latched(self, state: Any) -> bool:
        """Whether the signal is currently latched on a behaviour it reported."""
        return False

    # Hooks. Return a Finding when the signal trips on this event.
    def on_call(self, state: Any, call: CallView) -> Finding | None:  # pragma: no cover
        return None

    def on_result(self, state: Any, result: ResultView) -> Finding | None:  # pragma: no cover
        return None

    def on_text(self, state: Any, event: Text) -> Finding | None:  # pragma: no cover
        """Assistant speech: non-whitespace text (or ``chars > 0``) with role ``assistant``."""
        return None

    def on_repeated_prompt(self, state: Any) -> None:  # pragma: no cover
        """A message to the agent (``role`` user or system) the same, word for word, as the
        one before it: the request repeated (a scheduler's), so what the agent does next
        answers it anew. Nothing is reported on it."""
        return None

    def on_turn_start(self, state: Any) -> Finding | None:  # pragma: no cover
        """A real turn boundary (a turn refused because the session is halted is not one)."""
        return None

    def on_turn_end(self, state: Any) -> Finding | None:  # pragma: no cover
        return None

    def on_usage(self, state: Any, event: Usage) -> Finding | None:  # pragma: no cover
        return None

    def on_final_answer(self, state: Any, event: FinalAnswer) -> Finding | None:  # pragma: no cover
        return None

    # Previews, for a caller that gates a call before running it.
    def preview_state(self, state: Any) -> Struct | None:
        """A copy of ``state`` that :meth:`on_call` may change, its latches cleared,
        for :meth:`would_trip`; ``None`` (the default): this signal has no preview."""
        return None

    def would_trip(self, state: Any, call: CallView) -> bool:
        """Whether ``call``, observed next, would find this signal tripped (state untouched).

        A behaviour that was already reported still counts: :meth:`on_call` runs on
        :meth:`preview_state`'s copy, whose latches are cleared, so every call that
        continues a reported loop answers ``True``.
        """
        if call.tool in self.exempt:
            return False
        probe = self.preview_state(state)
        return probe is not None and self.on_call(probe, call) is not None

    # Guardrail signals (guardrail != "watchdog") keep state that a watchdog
    # reset must not wipe (spend, for instance) and decide their own resets.
    def check_reset(self, state: Any, additional_budget_usd: float | None) -> str | None:
        """Why a reset of this guardrail must be refused (``None``: accept)."""
        return None

    def apply_reset(self, state: Any, additional_budget_usd: float | None) -> Struct:
        """The state after an accepted reset of this guardrail."""
        return self.new_state()

    def describe(self, state: Any) -> dict[str, Any]:
        """Extra facts for a reset acknowledgement (e.g. the session ceiling after it)."""
        return {}


def config_int(value: Any, default: int) -> int:
    """A configured number as an int; an unusable raw value falls back to the default.

    Policies are validated at load time; this guards library users who build a
    ``Config`` by hand (msgspec does not validate direct construction).
    """
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


_ConfigT = TypeVar("_ConfigT", bound=SignalConfig)


@cache
def _bounded_fields(cls: type[SignalConfig]) -> tuple[tuple[str, type, Any, Any, Any], ...]:
    """(name, int/float/bool, lower, upper, default) of the fields :func:`within_bounds`
    coerces; inclusive bounds only (``gt``/``lt`` cannot be clamped onto)."""
    hints = get_type_hints(cls, include_extras=True)
    names = cls.__struct_fields__
    defaults = dict(zip(names[len(names) - len(cls.__struct_defaults__) :],
                        cls.__struct_defaults__, strict=True))
    bounded = []
    for name in names:
        hint = hints[name]
        metas: tuple[Any, ...] = ()
        if get_origin(hint) is Annotated:
            hint, *extra = get_args(hint)
            metas = tuple(m for m in extra if isinstance(m, Meta))
        if hint not in (int, float, bool) or name not in defaults:
            continue
        lower = max((m.ge for m in metas if m.ge is not None), default=None)
        upper = min((m.le for m in metas if m.le is not None), default=None)
        bounded.append((name, hint, lower, upper, defaults[name]))
    return tuple(bounded)


def within_bounds(config: _ConfigT) -> _ConfigT:
    """``config`` with every number and flag coerced to its declared type (a value
    that cannot be falls back to the field's default) and clamped into its declared
    inclusive bounds; ``config`` itself when nothing changes."""
    changes: dict[str, Any] = {}
    for name, kind, lower, upper, default in _bounded_fields(type(config)):
        raw = getattr(config, name)
        if kind is bool:
            value: Any = bool(raw)
        else:
            try:
                value = kind(raw)
            except (TypeError, ValueError, OverflowError):
                value = default
            if lower is not None and value < lower:
                value = kind(lower)
            if upper is not None and value > upper:
                value = kind(upper)
        if type(value) is not type(raw) or value != raw:
            changes[name] = value
    return structs.replace(config, **changes) if changes else config


def field_default(cls: type[SignalConfig], name: str) -> Any:
    """The declared default of one of ``cls``'s fields."""
    names = cls.__struct_fields__
    defaults = cls.__struct_defaults__
    return defaults[names.index(name) - (len(names) - len(defaults))]


ANSWERS_KEPT = 16
"""Calls whose last answer a result-aware loop detector remembers (:func:`note_answer`)."""
ANSWERED_KEPT = 16
"""Calls whose pause count at their last answer the watchdog keeps (``ResultView.paused``)."""
REQUESTS_SHIFT, WAITS_SHIFT, ACTS_SHIFT = 24, 32, 48
PAUSES_MASK = (1 << WAITS_SHIFT) - 1
REQUESTS_MASK = 0xFF << REQUESTS_SHIFT
COUNT_MASK = (1 << 63) - 1
"""A session's pause count packs four counters that are only ever compared for change:
pauses (bits 0-23), the user's requests in new words among them (24-31), deliberate
waits (32-47) and acts (48-62). The count is masked to 63 bits where waits and acts are
added (a snapshot holds a signed 64-bit integer), so it never grows past them; a field
that fills carries into the next (16,777,216 pauses read as a request, 65,536 waits as
an act: the cautious side), the requests field wraps in place (:func:`add_request`) and
the acts field wraps (32,768 acts between two answers of one call read as none)."""
WAITED = 1 << WAITS_SHIFT | 1
"""What a deliberate wait adds to a session's pause count: one pause, and one wait
(``ResultView.waited``)."""
ACTED = 1 << ACTS_SHIFT
"""What an act adds to it (a write, a call of a tool not known to only read, a failed
answer): no pause; doing something and then waiting for its effect is no poll
(``ResultView.waited``)."""


def add_request(pauses: int) -> int:
    """``pauses`` with one more of the user's requests in new words (the message's pause
    is counted apart), the requests field wrapping in place: 256 requests between two
    answers of one call read as none, and never as a wait."""
    return pauses & ~REQUESTS_MASK | (pauses + (1 << REQUESTS_SHIFT)) & REQUESTS_MASK


def asked_between(before: int, now: int) -> bool:
    """Whether the session's user asked for something in new words between two readings
    of its pause count (``ResultView.asked``): the requests field changed."""
    return (before ^ now) & REQUESTS_MASK != 0


def paused_between(before: int, now: int) -> bool:
    """Whether the session paused between two readings of its pause count
    (``ResultView.paused``): its pauses field changed."""
    return (before ^ now) & PAUSES_MASK != 0


def paced_between(before: int, now: int) -> bool:
    """Whether the session waited on purpose between two readings of its pause count,
    whatever else it did (``ResultView.paced``): the waits field changed."""
    return (before ^ now) >> WAITS_SHIFT & 0xFFFF != 0


def waited_between(before: int, now: int) -> bool:
    """Whether the session waited on purpose, and did nothing else, between two readings
    of its pause count (``ResultView.waited``): the waits field changed, the acts field
    did not."""
    changed = before ^ now
    return changed >> ACTS_SHIFT == 0 and changed >> WAITS_SHIFT != 0
CHANGES_FOR_PAGING = 2
"""Changes of a call's answer that make it paging or polling rather than a loop."""


DIGIT_CHARS = b"0123456789"
MASK_DIGITS = bytes.maketrans(DIGIT_CHARS, b"##########")
"""``bytes.translate`` table turning every digit into ``#`` (runs squeezed by
:func:`squeeze_marks`): how the masked comparisons of answers and calls forget numbers."""


def find_entry(buf: bytes | bytearray, entry: bytes, width: int) -> int:
    """The offset of the first occurrence of ``entry`` that starts an entry of a memory
    of ``width``-byte entries, -1 when there is none: a C-level search, then the
    alignment test (a hit straddling two entries, or inside one, is no hit). The
    lookups made on every result keep this loop inline (a call costs more than it)."""
    at = buf.find(entry)
    while at > 0 and at % width:
        at = buf.find(entry, at + 1)
    return at


def squeeze_marks(data: bytes) -> bytes:
    """Every run of ``#`` as one ``#`` (a few C-level passes; runs halve each time)."""
    # find, not ``in``: a bytes ``in`` first tries its operand as an integer, and the
    # TypeError it raises and clears costs several times the search itself.
    while data.find(b"##") >= 0:
        data = data.replace(b"##", b"#")
    return data


_SECONDS = rb"[ \t]+\d+(?:\.\d+)?[ \t]?(?:ms|s|sec|secs|seconds)\b"
_DURATION = (
    # how long a run took, where a runner says so: "Time elapsed: 0.123 s", "took 12 ms",
    # "Duration: 3.1s", `time`'s "real 0m1.204s"
    rb"\b(?:took|elapsed:?|[Tt]ime:|[Dd]uration:?)" + _SECONDS
    + rb"|\b(?:real|user|sys)[ \t]+\d+m\d+(?:\.\d+)?s\b"
)
_ROUND_TRIPS = (
    # how long a ping's packets took, on its own lines: "100% packet loss, time 3058ms",
    # each reply's "icmp_seq=1 ttl=57 time=0.045 ms" (BusyBox: "seq=0 ttl=64 time=0.108
    # ms"; Windows: "bytes=32 time<1ms"), "rtt min/avg/max/mdev = 0.041/0.045/0.052/0.004
    # ms" (Windows: "Minimum = 1ms, Maximum = 3ms, Average = 2ms"). Not a millisecond
    # figure anywhere else: `curl -w 'time=%{time_total}'` or a benchmark's table is what
    # a check measured. (A traceroute's hops: TRACEROUTE_TIMES.)
    rb"|(?<=packet loss, )time \d+ ?ms\b"
    rb"|\b(?:icmp_)?seq=\d+ ttl=\d+ time=\d+(?:\.\d+)? ?ms\b|\bbytes=\d+ time[=<]\d+ms\b"
    rb"|\b(?:rtt|round-trip) min/avg/max(?:/mdev|/stddev)? = [\d./]+ ?ms\b"
    rb"|\bMinimum = \d+ms, Maximum = \d+ms, Average = \d+ms\b"
)
TRACEROUTE_TIMES = re.compile(rb"\b\d+(?:\.\d+)? ms\b")
"""A traceroute's probe times ("0.428 ms  0.413 ms  *  0.824 ms"), masked in an answer that
is a traceroute's (it holds ``traceroute to ``): every millisecond figure of such an answer
is a hop's, and they jitter on every run (:func:`mask_run_duration`)."""


def mask_run_duration(data: bytes) -> bytes:
    """``data`` with its run's duration and a probe's round-trip times masked
    (:data:`RUN_DURATION`; a traceroute's hop times, :data:`TRACEROUTE_TIMES`)."""
    data = RUN_DURATION.sub(b"#", data)
    if data.find(b"traceroute to ") >= 0:
        data = TRACEROUTE_TIMES.sub(b"#", data)
    return data


RUN_DURATION = re.compile(
    # ...and "in N s" after what was done: "scanned in 183.11 seconds", "12 passed in
    # 0.2s", "Ran 12 tests in 0.3s" (not "next sync in 162 seconds": a countdown moves)
    _DURATION + rb"|\b(?:\w+ed|done|tests?)[ \t]+in" + _SECONDS + _ROUND_TRIPS
)
"""A run's duration, where a runner reports it, and a network probe's round-trip times
(masked wherever two runs of one call are compared: "scanned in 183.11 seconds", then "in
192.20 seconds", says the same; so does a dead host pinged again, "100% packet loss, time
3058ms" then "time 3064ms", or a traceroute that stops at the same hop, each hop's times
jittering)."""
RUN_TIME = re.compile(
    _DURATION + rb"|\bin" + _SECONDS
    + rb"|(?<![\w.:])\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?"  # a clock time: 12:04:31.5
)
"""A run's duration or a clock time, in a failure's text (masked where two runs of one
failing check are compared; in a successful answer a clock-like figure may be what moves,
a job's elapsed time in ``squeue``). Not any number with a unit:
"p99 900ms exceeds 200ms" is what a performance test found, and it changes when an edit
works."""
SAYS_FAILED = re.compile(rb"\b(?:[Ee]rrors?|ERRORS?|[Ff]ailed|FAILED|[Ff]ailures?|FAIL|Traceback)\b")
"""A successful output that reports a failure (a build or a test run whose exit status a
pipe or a harness kept in the text): read like a failure where runs are compared. Counts
of none are taken out first (:data:`NO_FAILURES`)."""
NO_FAILURES = re.compile(
    rb"\b0\s+(?:[Ee]rrors?|ERRORS?|[Ff]ailed|FAILED|[Ff]ailures?|Error\(s\))"
    rb"|\b(?:[Ee]rrors?|ERRORS?|[Ff]ailed|FAILED|[Ff]ailures?)\s*[:=]\s*0\b"
)
"""A summary that counts no failure ("Failures: 0, Errors: 0", "0 errors, 0 warnings",
"0 Error(s)"): a successful build says so, and it is no report of a failure."""


def reports_failure(data: bytes) -> bool:
    """Whether a successful output's text reports a failure (:data:`SAYS_FAILED`, once
    its counts of none are taken out)."""
    # Three C-level scans first: the pattern's alternatives are tried at every byte.
    low = data.lower()
    if low.find(b"error") < 0 and low.find(b"fail") < 0 and low.find(b"traceback") < 0:
        return False
    if SAYS_FAILED.search(data) is None:
        return False
    return SAYS_FAILED.search(NO_FAILURES.sub(b"", data)) is not None


TIMESTAMP = re.compile(
    rb"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?(?:Z|[+-]\d\d:?\d\d)?"  # ISO 8601
    rb"|(?<![\d.])1\d{9}(?:\d{3})?(?:\.\d+)?(?![\d.])"  # seconds or milliseconds since 1970
)
"""A point in time written into an answer (``"checked_at": "2025-11-28T14:01:20Z"``, an
epoch): when it was asked, not what it says."""


_AGO_SOURCE = (
    r"(?i)\b(?:about |almost |over |less than )?(?:\d{1,6}|an?) ?"
    r"(?:s|sec|secs|seconds?|m|min|mins|minutes?|h|hrs?|hours?|d|days?)(?: \d{1,6} ?\w{1,7})? ago\b"
)
AGO = re.compile(_AGO_SOURCE)
"""How long ago something happened, as a CLI says it (``about 33 minutes ago``, ``2h
ago``, ``an hour ago``): the same run described a minute later says another age."""
_AGO_BYTES = re.compile(_AGO_SOURCE.encode())


def says_ended(text: str) -> bool:
    """Whether ``text`` holds a word of an end, good or bad (:data:`_FINISHED`: failed,
    error, completed, succeeded, done...)."""
    return _FINISHED_FOLDED.search(fold_case(text)) is not None


_FOCUSED_BID = re.compile(rb"\[Focused element bid: [^\]\n]{0,40}\]")
"""The element a browser's observation says has focus (OpenHands' ``[Focused element bid:
84]``), read in :func:`steady_answer` only."""


def steady_answer(result: ResultView) -> int:
    """A 32-bit code of what an answer says apart from when it was given: its first
    :data:`GIST_TEXT_LIMIT` characters (a structured payload's JSON) with the points in
    time it carries masked (:data:`TIMESTAMP`, and in an answer that says its work ended,
    ages: :data:`AGO`), a server's reference for the response (:data:`RESPONSE_REFERENCE`), the run's duration where it reports one (:data:`RUN_DURATION`:
    "scanned in 183.11 seconds"), and, in one that reports a failure, its clock times too
    (:data:`RUN_TIME`), and a browser observation's focused element (:data:`_FOCUSED_BID`).
    Two answers of one call that differ only so say the same. 0 when the answer has no text. For the rare paths that
    compare a call's changed answers."""
    if result.failed:
        text: Any = result.error
    else:
        text = result.event.result
        if text is not None and type(text) is not str:
            try:
                text = _json_encode(text)[: GIST_TEXT_LIMIT * 4].decode("utf-8", "replace")
            except (TypeError, ValueError, OverflowError):
                return 0
    if type(text) is not str or not text:
        return 0
    head = text[:GIST_TEXT_LIMIT]
    data = TIMESTAMP.sub(b"#", head.encode("utf-8", "surrogatepass"))
    if has_response_reference(data):
        data = _RESPONSE_REFERENCE_BYTES.sub(b"#", data)
    if data.startswith(b"[Current URL:"):
        # a browser's observation (OpenHands): the element the page focused moves by
        # itself, so the same page loaded again says the same with another focus id
        data = _FOCUSED_BID.sub(b"#", data, 1)
    if b":" in data[1:4]:
        # log lines that open with the clock time they were written at (sqlmap's
        # "[16:02:05] [WARNING] ...", `tsc --watch`'s "[12:04:31 PM] ...")
        data = LOG_CLOCK.sub(b"#", data)
    if b" ago" in data and says_ended(head):
        # An age ("about 33 minutes ago") moves by itself, in an answer that says its work
        # ended (a CI run that failed, watched again); in one still going ("* test"), the
        # age is all that says time passed, and each answer is a poll's.
        data = _AGO_BYTES.sub(b"#", data)
    if result.failed or reports_failure(data):
        data = RUN_TIME.sub(b"#", data)
    else:
        data = mask_run_duration(data)
    return zlib.crc32(data) or 1


RESPONSE_REFERENCE = (
    r"(?:Reference #|errors\.edgesuite\.net/)\d{1,3}(?:\.[0-9a-f]{1,16}){2,4}"  # Akamai's "Access Denied" page
    r"|Ray ID: ?[0-9a-f]{16}"  # Cloudflare's block and error pages
)
"""The reference a server's error page gives the one response it is (Akamai's ``Reference
#18.724ee3ef.1718796126.2b63fce``, again in its ``errors.edgesuite.net`` address;
Cloudflare's ``Ray ID: 8c1f2a3b4d5e6f70``): new on
every request, so the same blocked page read again was a new answer every time (a research
agent re-reading a page that answered "Access Denied" twenty times was never halted).
Masked by :func:`steady_answer` and in result-stall's templates, behind a substring test
(:func:`has_response_reference`)."""
_RESPONSE_REFERENCE_BYTES = re.compile(RESPONSE_REFERENCE.encode())
RESPONSE_REFERENCE_TEXT = re.compile(RESPONSE_REFERENCE)
"""The same, for text (result-stall's templates)."""


def has_response_reference(text: str | bytes) -> bool:
    """Whether ``text`` may hold a :data:`RESPONSE_REFERENCE` (substring tests)."""
    if type(text) is str:
        return "Reference #" in text or "Ray ID" in text
    return b"Reference #" in text or b"Ray ID" in text


LOG_CLOCK = re.compile(rb"(?m)^\[\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?(?: ?[AP]M)?\]")
"""The clock time a log line opens with (``[16:02:05]``, ``[12:04:31 PM]``): when the line
was written, not what it says (:func:`steady_answer`, for an answer whose first line opens
so)."""
GIST_TEXT_LIMIT = 2048
"""Characters of a text answer (or error) that its gist reads (:func:`answer_gist`)."""
GIST_STRUCTURED_LIMIT = 4096
"""Largest structured payload (bytes of its JSON) whose gist is taken with its timestamps
out; a larger one is compared exactly (its outcome)."""
_gist_encoder = msgspec.json.Encoder(order="sorted")
_TIMESTAMP_HINT = re.compile(rb"-\d\d-\d\d[T ]\d\d:")
_TIMESTAMP = re.compile(rb"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)?")
_STAMPED = re.compile(
    rb'("(?:\w{0,32}(?:[uU]pdated|[mM]odified|[cC]hecked|[sS]een|[sS]ynced|[rR]efreshed'
    rb'|[tT]imestamp)\w{0,16}|ts)":[ ]?)"' + _TIMESTAMP.pattern + rb'"'
)
"""A timestamp under a name that says when the object was touched or looked at
(``updated_at``, ``date_modified``, ``lastModified``, ``checked_at``, ``last_seen``,
``ts``): it moves by itself. Not one under any other name (``"slots":
["2025-11-12T14:20:00-08:00", ...]``, ``scheduled_at``, ``due_on``, ``date``): there the
time is the data."""
EMPTY_GIST = 0x454D5054
"""The gist of an empty or unknown answer: every one says the same (nothing)."""
READ_STAMP_SPAN = 96
"""Characters at the end of a text answer looked at for the time it was read."""
TIMESTAMP_ELEMENT = r"<timestamp>[^<]{0,64}</timestamp>"
"""When an answer was written, as its own element (Claude Code's ``BashOutput``:
``<timestamp>2025-11-01T15:22:32.093Z</timestamp>``); one pattern for its readers here and
in ``result-stall``."""
_READ_STAMP = re.compile(r"\s*" + TIMESTAMP_ELEMENT + r"\s*\Z")
"""The time a runtime stamps on an answer when it was read, closing it."""


def read_stamped(result: ResultView) -> int:
    """A 32-bit code of a text answer without the time it was read (:data:`_READ_STAMP`)
    where it closes with one, else 0 (and 0 for an answer sent with a digest: the digest
    is the answer). The stamp is the runtime's, so the rest is compared as sent: what it
    says of a job, its figures and its own times, is the news."""
    payload = result.event.result
    if type(payload) is not str or result.event.result_digest or "<timestamp>" not in payload[-READ_STAMP_SPAN:]:
        return 0
    stamp = _READ_STAMP.search(payload, max(0, len(payload) - READ_STAMP_SPAN))
    if stamp is None:
        return 0
    return zlib.crc32(payload[: stamp.start()].encode("utf-8", "surrogatepass")) or 1


_ANSWER_WAS_NEW = 1 << 40
"""The bit of a value of :func:`note_answer` that says its call's latest answer was new."""


_ADDRESS = re.compile(rb"(?<![a-z0-9+.-])[a-z][a-z0-9+.-]{0,31}://[^\s()\[\]<>\"'`]+")
"""An address in an answer's text (its path's digits are part of it: :func:`answer_gist`)."""
_PAGE_PARAMETER = re.compile(
    rb"(?i)(?:^|&)(?:page|p|pg|pn|page_?no|page_?number|offset|start|skip|cursor|after|before)"
    rb"=[^&#]{0,64}"
)
"""The parameters of an address's query that name a page of a listing (their digits are the
page: :func:`answer_gist`)."""
NUMBERS_ONLY = 16
"""At most this many bytes left once its digits are out, and at most half of it: a text
answer that is its numbers (:func:`answer_gist` keeps them)."""


def stamped_code(text: str) -> int:
    """A code of JSON text with the timestamps of when it was touched taken out
    (:data:`_STAMPED`, at most :data:`GIST_STRUCTURED_LIMIT` characters; 0 past that):
    :func:`answer_gist`'s structured rule for an object sent as text, its digits kept."""
    if len(text) > GIST_STRUCTURED_LIMIT:
        return 0
    return zlib.crc32(_unstamped(text.encode("utf-8", "surrogatepass"))) or 1


def _unstamped(data: bytes) -> bytes:
    """JSON with the timestamps of :data:`_STAMPED` taken out (a C-level scan for the middle
    of a timestamp first: most answers hold none, and are returned as they are)."""
    if _TIMESTAMP_HINT.search(data) is None:
        return data
    return _STAMPED.sub(rb'\1"T"', data)


def answer_gist(result: ResultView) -> int:
    """What an answer says, with the parts that move by themselves taken out: for a text
    payload, or a failure's error, a 32-bit code of its first :data:`GIST_TEXT_LIMIT`
    characters with every digit removed (a restart count, an age, a timestamp, a
    duration, a shell's ``line 27424``) but those of the pages it names (an
    :data:`_ADDRESS`'s path and its :data:`_PAGE_PARAMETER` s: another page is news); for
    a structured payload of at most
    :data:`GIST_STRUCTURED_LIMIT` bytes, a code of its sorted JSON with its timestamps
    (ISO 8601, :data:`_TIMESTAMP`) under names of when it was touched or looked at
    (:data:`_STAMPED`) taken out, and only those: its other numbers are its
    data (a count, a price, a lag), while an ``updated_at`` moved by the write the agent
    keeps re-sending is no news of what the object says; for a larger one or a digest,
    its outcome (a payload sent beside a ``result_digest`` included: the digest is the
    answer); :data:`EMPTY_GIST` for an empty or unknown answer. Never ``0``.

    Computed once per result, on first use, and kept for every reader (``ResultView.gist``).
    """
    gist = result.gist
    if gist:
        return gist
    text = result.error if result.failed else result.event.result
    if type(text) is str and text:
        data = text[:GIST_TEXT_LIMIT].encode("utf-8", "surrogatepass")
        words = data.translate(None, DIGIT_CHARS)
        # An answer that is its numbers ("4.1", "[56, 11.1, 13006, 1454]": what is left
        # without them is a few marks) keeps them: there the figures are what it says.
        numbers_only = len(words) <= NUMBERS_ONLY and 2 * len(words) <= len(data)
        gist = zlib.crc32(data if numbers_only else words) or 1
        if b"://" in data and not numbers_only:
            # The pages it names keep their numbers: a browser open at another page
            # (``...&offset=20090616115238``, ``?page=3``, ``/page/3``) shows another page,
            # not the same one at a later time. Only an address's path and its paging
            # parameters: a dashboard link's ``from=<now>`` or a search's ``qid=<time>``
            # moves by itself.
            for address in _ADDRESS.findall(data):
                path, _, query = address.partition(b"?")
                # the path on its host, not the host: a dev server started again comes up
                # on the next port, the same page
                slash = path.find(b"/", path.find(b"://") + 3)
                gist = zlib.crc32(path[slash:] if slash > 0 else b"/", gist) or 1
                if query:
                    for page in _PAGE_PARAMETER.findall(query):
                        gist = zlib.crc32(page, gist) or 1
    elif result.outcome and not result.failed:
        gist = result.outcome & 0xFFFFFFFF or 1
        payload = result.event.result
        # (A digest the runtime sent is what the answer is: the payload beside it may be a
        # cut or a preview, so its timestamps are no measure of the whole.)
        if (
            payload is not None and not result.event.result_digest
            and result.size <= GIST_STRUCTURED_LIMIT
        ):
            encoded = result.encoded  # the fingerprint's, when it made one
            if encoded is None:
                try:
                    encoded = _gist_encoder.encode(payload)
                except (TypeError, ValueError, OverflowError, RecursionError):
                    encoded = b""
            # (The bound by the encoding itself: `size` is what the agent declared, or 0
            # when no signal wanted it. An answer with no such timestamp keeps the outcome
            # as its gist, as always.)
            if encoded and len(encoded) <= GIST_STRUCTURED_LIMIT:
                unstamped = _unstamped(encoded)
                if unstamped is not encoded:
                    gist = zlib.crc32(unstamped) or 1
    else:
        gist = EMPTY_GIST
    result.gist = gist
    return gist


_STATUS_ELEMENT = re.compile(r"<status>(\w{1,32})</status>")
"""A background shell's status as Claude Code's ``BashOutput`` opens its answer with it
(``running``, ``completed``, ``failed``, ``killed``)."""
PROGRESS_TEXT_LIMIT = 4096
"""Longest answer (characters of text, bytes of a structured payload) read for whether it
says the work is still under way (:func:`says_in_progress`): a status is short."""
_PROCESS_NOUNS = (
    r"\b(?:execution|operation|request|query|job|task|deployment|rollout|build|backup|restore"
    r"|upgrade|migration|sync|synchronization|import|export|scan|indexing|provisioning"
    r"|replication|installation|update|transfer|upload|download|reindex|snapshot|compaction)"
)
"""Work an API's sentence may say is in progress (see :data:`_IN_PROGRESS`)."""
_PROCESS_IN_PROGRESS = re.compile(
    rf"{_PROCESS_NOUNS}\s+(?:is\s+)?(?:still\s+)?in[ _-]progress\b"
    r"(?![ _-]*(?:flag|field|marker|label|state|status)\b)"
)
_NEGATIONS = frozenset({"no", "not", "nothing", "none"})


def _says_process_in_progress(folded: str) -> bool:
    """An API's sentence naming the work and saying it is in progress (Snowflake's
    "Asynchronous execution in progress.", "Deployment in progress", "Backup is still in
    progress"), over folded text: the sentence opens with the work's own word, one word
    before it at most and no negation. Not "work in progress" (a draft's label), "No
    backup operation in progress", "- [ ] Task in progress" or an "in-progress flag".
    Read only where the status patterns found nothing and the text says "progress"."""
    for match in _PROCESS_IN_PROGRESS.finditer(folded):
        start = match.start()
        head = folded[max(0, start - 64) : start]
        cut = max(head.rfind(mark) for mark in '.!?":')
        if cut < 0 and start > 64:
            continue  # no sentence opening within reach
        words = head[cut + 1 :].split()
        if len(words) > 1 or (words and words[0] in _NEGATIONS):
            continue
        return True
    return False
_PROGRESS_WORDS = (
    r"pending\w*|queued|queue?ing|in[ _-]?progress|in[ _-]?queue|running|executing|processing|provisioning"
    r"|creating|starting|initiali[sz]ing|deploying|building|waiting|scheduled"
    # awaiting what another party does ("Awaiting Payment", AWAITING_APPROVAL); not what
    # the agent itself must give (awaiting_input, "awaiting your reply")
    r"|awaiting(?![ _-]?(?:input|user|your|response|reply|action|agent))\w*"
    r"|authori[sz]ing|updating|progressing|not[ _-]?(?:yet[ _-]?)?ready"
    # a review or a check another party runs (a customs entry UNDER_REVIEW, a document
    # "in review"; an export "validating"), and work that moves data while it runs
    r"|under[ _-]?review|in[ _-]?review|reviewing|validating|verifying|scanning|analy[sz]ing"
    r"|syncing|uploading|exporting|importing|indexing|transferring|migrating|restoring"
    # (a download, an install or a transcode under way: an ingest "downloading" while
    # its upstream is slow)
    r"|downloading|installing|copying|replicating|transcoding|rendering|extracting"
    # (a page or a feed that has more coming: "status": "Loading more products...")
    r"|loading"
    # a resource between two states (a fleet ACTIVATING, an instance stopping, a volume
    # deleting, a node upgrading)
    r"|activating|deactivating|stopping|deleting|upgrading|rebooting"
    r"|restarting|terminating|resizing"
    # a submission another party takes in (Gusto's payroll "submitting"), a send, a
    # publication, a settlement or a DNS change on its way
    r"|submitting|sending|publishing|settling|propagating"
    # an end or a step on its way (a Kafka group "CompletingRebalance", "PreparingRebalance",
    # a job "finishing"): "completing" is no "completed"
    r"|completing\w*|finishing|preparing\w*|rebalancing"
    # data being rewritten in place (slurmdbd "converting job table", a table rebuilt, a
    # store compacted, a replica recovering)
    r"|converting|rebuilding|compacting|recovering"
    # a clock or a schedule moving on to its target (Stripe's test clock "advancing")
    r"|advancing"
    r"|in[ _-]?transit|out[ _-]?for[ _-]?delivery"
    # a booking a property confirms by hand (Amadeus' hotel booking "ON_REQUEST")
    r"|on[ _-]request"
    # ISO 20022 payment statuses: pending, accepted with settlement in process
    r"|pdng|acsp"
)
_FLAG_UNDER_WAY = (
    r"(?:in[ _-]?progress|pending|queued|processing|uploading|transcoding|rendering|building"
    r"|indexing|syncing|provisioning)"
)
"""The words a boolean flag is named by when what it names is under way while it is true."""
_FLAG_NOT_NAMES = (
    r"(?!(?:non?|not|enable|allow|include|show|skip|auto|supports?|requires?|needs?|use|disable"
    rf"|should|can|must|wait[_-]?for)[_-]?{_FLAG_UNDER_WAY}\")"
)
"""Openings of a flag's name that make it no status: negated (``not_pending``) or a setting
(``include_pending``, ``enable_syncing``, ``skip_processing``, ``requires_building``)."""
_IN_PROGRESS = re.compile(
    # a field's value ("status": "processing", State: RUNNING, {"s": "RUNNING"}) or a
    # sentence that says it is not over (the export is still processing; "nginx is
    # running" is where a service stays, so a bare "is" does not count)
    # (or an element's: Claude Code's BashOutput answers <status>running</status>)
    # A quoted value must be the word alone ("status": "processing", "s": "RUNNING",
    # 'processing...'): a name that opens with one ("name": "Running Shoes", a product)
    # is no status; under a key of status or progress a value may go on ("status":
    # "Awaiting Payment", "status_text": "Waiting for approval", "progress": "Running
    # step 3 of 5"). An unquoted value (State: RUNNING, YAML's status on the next line)
    # is read as before.
    rf"(?i:[:=]\s*[\"'](?:{_PROGRESS_WORDS})[.…!]{{0,3}}[\"'])"
    # an array's element that is the word alone (an AWS CLI --query or jq projection,
    # ["InProgress", []], as JSON text inside a tool's envelope too: its quotes escaped)
    rf"|(?i:[\[,]\s*\\{{0,3}}[\"'](?:{_PROGRESS_WORDS})\\{{0,3}}[\"']\s*[,\]])"
    rf"|(?i:(?:status|state|phase|stage|progress)\w{{0,12}}[\"']?\s*[:=]\s*[\"'](?:{_PROGRESS_WORDS})\b)"
    rf"|(?i:[:=]\s*|<(?:status|state|phase)>\s*|\b(?:still|currently|remains?)\s+(?:still\s+)?)"
    rf"(?i:{_PROGRESS_WORDS})\b"
    # A status may name the step under way first: Render's "status": "build_in_progress",
    # CloudFormation's "StackStatus": "UPDATE_IN_PROGRESS" (a status key's value only, so
    # a service named "order-processing" is no status; no negation: "not_running").
    rf"|(?i:(?:status|state|phase|stage)[\"']?\s*[:=]\s*[\"']?"
    rf"(?:(?!not[_-]|non[_-]|no[_-]|never[_-]|un)[a-z]+[_-]){{1,3}}(?:{_PROGRESS_WORDS})\b)"
    # ...or in words, quoted (tau2-bench's bill "status": "Payment Pending")
    rf"|(?i:(?:status|state|phase|stage)[\"']?\s*[:=]\s*[\"']"
    rf"(?:(?!not |non |no |never |un)[a-z]+ ){{1,2}}(?:{_PROGRESS_WORDS})\b)"
    # A count of things under way, keyed by the word alone, above zero: a quiz's
    # {"complete": 62, "in_progress": 1}, a queue's {"queued": 4}. Not "running" (a
    # cluster's {"running": 3} pods is where they stay) and not zero (nothing under way).
    r'|(?i:"(?:in[ _-]?progress|pending|queued|processing)"\s*:\s*[1-9])'
    # A flag that says what it names is under way, true: a podcast host's
    # {"audio_processing": true} while the upload is transcoded, {"isPending": true}. Not
    # a negated name ("not_pending") and not "running" (a service's {"running": true} is
    # where it stays).
    rf'|(?i:"(?:{_FLAG_NOT_NAMES}[a-z]{{1,16}}[_-]?)?{_FLAG_UNDER_WAY}"\s*:\s*true\b)'
    # a Jupyter kernel running a cell: "execution_state": "busy" (not any "busy": a
    # call's terminal status, a person's presence)
    r'|(?i:"execution_state"\s*:\s*"busy")'
)
BARE_STATUS_LIMIT = 48
"""Longest answer read as a status printed alone (:data:`_BARE_UNDER_WAY`)."""
_BARE_UNDER_WAY = re.compile(rf"\s*[\"']?(?:{_PROGRESS_WORDS})[\"']?[.…]{{0,3}}\s*")
"""An answer that is a word of work under way and nothing else (``creating``, ``PENDING``,
``"IN_PROGRESS"``), read over folded text."""
_FIELD_TOKEN = r"(?=[^\s\d]*\d)[^\s\"'=:]{1,40}"
"""A field a template prints beside a status that holds a digit and no key: a number, a
version, a count of ready replicas (``16``, ``v1.4.2``, ``2/3``); not ``reason=Unschedulable``."""
_BARE_FIELDS_UNDER_WAY = re.compile(
    # (not "running" beside such a field: `web-1 running`, `4321 running` are a pod's and a
    # process's steady state)
    rf"\s*(?:{_FIELD_TOKEN}[ \t]+){{1,3}}[\"']?(?!running\b)(?:{_PROGRESS_WORDS})[\"']?[.…]{{0,3}}"
    rf"(?:[ \t]+{_FIELD_TOKEN}){{0,3}}\s*"
    rf"|\s*[\"']?(?!running\b)(?:{_PROGRESS_WORDS})[\"']?(?:[ \t]+{_FIELD_TOKEN}){{1,3}}\s*"
)
"""A line of a few fields, one of them a word of work under way (not ``running``) and each
of the others a figure (``16 Updating``, ``Pending 0/3``), read over folded text: ``nginx
running`` or ``web-1 running`` is a name and where it stays, no work under way."""
_JOB_ACTIVE = re.compile(r"\"(?:status|state|job_?status)\"\s*:\s*\"active\"")
"""A status ``"active"`` (read over folded text), which says work under way beside a job's
id (:data:`_JOB_KEY`)."""
_JOB_KEY = re.compile(r"\"job_?(?:id|name)\"\s*:")
"""A job's id or name as a key, over folded text (``"jobid"``, ``"job_id"``, ``"jobname"``)."""
_STATUS_LINE_UNDER_WAY = re.compile(
    r"(?m)^[ \t]*(?:in_progress|InProgress|IN_PROGRESS|queued|QUEUED|pending|PENDING|requested)(?:[ \t]|$)"
)
"""A line that opens with an API's status token of work under way (as a script prints a
field: ``in_progress null``; the AWS CLI's text output, ``InProgress\tConfigUpdate``), not
prose ("Running 12 tests", "waiting for input", which is the agent's to give)."""
_DONE_TOKENS = r"(?:completed|success|succeeded|successful|done|finished|skipped|neutral)"
_DONE_ROW = re.compile(rf"(?m)^[ \t]*((?:{_DONE_TOKENS}[ \t]+)+)(?!{_DONE_TOKENS}\b)(?=\S)")
"""A line that opens with status tokens of an end and goes on to name what ended
(``completed success Set up job``): a part done. A line of status tokens alone
(``completed success``) is the whole's own status, no part."""
_ROW_DONE = frozenset({"completed", "success", "succeeded", "successful", "done", "finished"})
_ROW_UNDER_WAY = frozenset({
    "running", "queued", "pending", "scheduled", "deferred", "up_for_retry",
    "up_for_reschedule", "in_progress", "starting", "waiting", "restarting",
})
"""Status tokens a row closes with (lower case, as schedulers print a task's state)."""
STATUS_ROWS = 64
"""Rows of an answer read for the statuses they close with (:func:`status_rows_done`)."""


def status_rows_done(folded: str) -> int:
    """The rows done in an answer whose rows each name something and close with its
    status (``build_triangles success``, ``chain_ladder running``; a table's ``| ... |
    success |``), when at least one other row closes with a status under way
    (:data:`_ROW_UNDER_WAY`); 0 otherwise, or past :data:`STATUS_ROWS` rows.
    Read over folded text, so the count is comparable to ``_DONE_FOLDED``'s."""
    rows = folded.split("\n", STATUS_ROWS)
    if len(rows) > STATUS_ROWS:
        return 0
    done = 0
    under_way = False
    for row in rows:
        tokens = row.replace("|", " ").split()
        if len(tokens) < 2:
            continue
        last = tokens[-1]
        if last in _ROW_DONE:
            done += 1
        elif last in _ROW_UNDER_WAY:
            under_way = True
    return done if under_way else 0


# A listing with a status column whose rows are still coming up (a pod's Running is
# where it stays, so it is not one of them): the header, then a row after it (two
# searches, so the cost stays linear in the text). Each word opens with its literal
# letter, its word boundary a look-behind after it, so the search skips to where one can
# start: \b(?:STATUS|STATE|PHASE)\b, then \b(?:Pending|ContainerCreating|PodInitializing|Init:\d).
_LISTING_HEADER = re.compile(r"S(?<!\wS)(?:TATUS|TATE)\b|P(?<!\wP)HASE\b")
_LISTING_ROW = re.compile(r"P(?<!\wP)(?:ending|odInitializing)|C(?<!\wC)ontainerCreating|I(?<!\wI)nit:\d")
# A batch scheduler's queue with a job still waiting to run: Slurm's `squeue` (`ST`, a
# row `PD` or `CF`) and LSF's `bjobs` (`STAT`, `PEND`). A header at a line's start, then
# a row after it (linear, as above).
_QUEUE_HEADER = re.compile(r"(?m)^[ \t]*JOBID\b[^\n]*\bST(?:AT)?\b")
_QUEUE_ROW = re.compile(r"(?m) (?:PD|CF|PEND)(?: |$)")
_QUEUE_NEVER = re.compile(
    r"\((?:DependencyNeverSatisfied|JobHeld(?:User|Admin)|PartitionTimeLimit|BadConstraints"
    r"|ReqNodeNotAvail|InvalidAccount|InvalidQOS)|\b(?:EXIT|OOM|TO|NF|BF|F)\b(?= )"
)
"""A waiting job that will not run as it stands (held, a dependency never met, nodes
down, a limit it exceeds), or a job of the listing that ended badly (LSF's ``EXIT``,
Slurm's ``OOM``, ``TO``, ``NF``, ``BF``, ``F``): the queue says no work under way."""
_FAILED_WORDS = (
    # (not DNS's rcode NOERROR, which says none; not a CDN's cache invalidation, which is
    # no failure: "InvalidationBatch", "invalidation_id", "invalidates"; a session
    # "invalidated" is one; not a failover, "failing over reads to replica-1", "failed
    # over to the standby", but "tests fail over and over", "failed over the weekend",
    # "failed back to back")
    r"fail(?![_-]?(?:over|back)|(?:ing|ed|s)[ _-]?(?:over|back)[ \t]{1,3}(?:(?:to|from)\b(?![ \t]+back\b)|reads\b|writes\b|traffic\b))"
    r"|(?<!no)error|cancel|abort|timed?[ _-]?out|reject|backoff"
    r"|crash|evict|expire|terminat|killed|denied|not[ _-]found|invalid(?!at(?:ion|ing|e(?!d)))"
    r"|exception|refused"
    r"|stopped|unhealthy|degraded|\bdead\b"
)
_DONE_WORDS = r"succe|complet(?!ing)|done\b|finish(?!ing)"
_FINISHED = re.compile(rf"(?i){_FAILED_WORDS}|{_DONE_WORDS}")
"""Words of an end, good or bad: an answer with one says nothing of an end only if it has none."""
_FAILED = re.compile(rf"(?i){_FAILED_WORDS}")
"""The words of :data:`_FINISHED` that say something went wrong: beside one, a part still
running is no poll's answer (a run with a failed job is over, whatever else is running)."""
_DONE = re.compile(rf"(?i){_DONE_WORDS}")
_END_AWAITED = re.compile(
    r"(?i)(\b(?:wait|waits|waiting|awaiting|poll|polls|polling|watch|watching)\b[^.;\n\"{}]{0,40}?"
    r"\b(?:to|until|till|for)\s+(?:[\w-]+\s+){0,3}?)(?:finish|complet|succe)\w*"
)
"""An end named as what a wait awaits ("waiting for rollout to finish", "polling until job
42 completes"): no word of an end (:func:`says_in_progress`). Not an end said ("changed to
SUCCEEDED", "unable to complete")."""
_COUNT_KEY = re.compile(
    rf"(?i)\"[^\"]{{0,40}}(?:{_DONE_WORDS})[^\"]{{0,40}}\"\s*:\s*(?:\d|null\b|false\b|\"\"|\[)"
    # (not a key that says the failure's absence and is false, "error_free": false,
    # "failureFreeRun": false: that false says a failure; "failsafe": false or null, or
    # "error_free": null, says nothing)
    rf"|\"[^\"]{{0,40}}(?:{_FAILED_WORDS})(?![a-z_ -]{{0,12}}?(?:free|less)[a-z_]{{0,20}}\"\s*:\s*false\b)[^\"]{{0,40}}\"\s*:\s*(?:0\b(?!\.\d*[1-9])|null\b|false\b|\"\"|\[\s{{0,8}}\]|\{{\s{{0,8}}\}})"
    # when something will expire, not that it did: an invitation's or a token's
    # "expires_at": "2025-12-09T14:00:00Z", "expiresIn": 3600
    r"|\"(?:[^\"]{0,40}[_-])?expires(?:[_-]?(?:at|on|in|after))?\"\s*:"
    # and when it is expected to end: AWS' "EstimatedCompletionTime", "expected_finish_at"
    r"|\"(?i:estimated|expected|projected)[_-]?(?i:complet|finish)\w{0,20}\"\s*:"
)
"""A key named by a word of an end that says no end: of work done, a count, nothing yet
or a list of the parts done (``"cells_complete": 0``, ``"succeeded": 3``, ``"finishedAt":
null``, ``"completed": false``, ``"completed_at": ""``, ``"completed_checks": ["credit"]``
beside ``"status": "in_progress"``); of failures, zero or nothing (``"failed": 0``,
``"error": null``, ``"error": ""``, ``"errors": []``,
``"error_code": null``: an API's envelope saying no error); and when something will
expire (``"expires_at"``, ``"expiresIn"``) or is expected to end
(``"EstimatedCompletionTime"``), which says nothing of an end yet."""
_DONE_VALUE = re.compile(rf"(?i)[:=]\s*[\"']?(?:{_DONE_WORDS})")
"""Words of a good end, anywhere, and as a field's value (``"status": "completed"``: a part
done); as a key or in prose (``"completed": true``, "job 42 done") they say it is over."""


_ABSENT = re.compile(
    r"(?i)\b(?:no|none|nil|nothing|empty|missing|absent|unknown|unavailable"
    r"|unreachable|unable|cannot|can't|couldn't|could not|no such|n/a)\b"
    # the answer itself null ({"data": null}), not any field of a record
    r"|\"(?:data|result|results|value|values|items|records|series|body|output|rows)\"\s*:\s*null"
    # an HTTP status of failure, not any number from 400 to 599 (a port, a TTL)
    r"|\bHTTP/[\d.]+\s+[45]\d\d\b|\bstatus(?:_?code)?\"?\s*[:=]\s*\"?[45]\d\d\b"
    r"|\b[45]\d\d\s+(?:Service|Not|Bad|Gateway|Internal|Too|Forbidden|Unauthorized)\b"
)
"""Words of an answer that says something is not there (yet) or out of reach ("No data
points", ``{"data": null}``, "Couldn't connect to server", a 503): asked again after a
wait it is no value being watched but one that is not coming."""


# How the patterns above are run. Case-insensitive matching makes the regular-expression
# engine try every alternative at every position of the text (about 1 ms for each of
# them over 4 KB); an answer is therefore folded to lower case once (fold_case) and read
# by case-sensitive equivalents written so that every alternative opens with a literal
# character (a word boundary before it becomes a look-behind after it), which lets the
# engine skip in C to the positions where one can start: each a few tens of
# microseconds over 4 KB. The patterns above stay the definitions; a property test holds
# every folded form to the same matches, spans and groups as its definition.
_FOLD_TO_ASCII = {0x130: "i", 0x131: "i", 0x17F: "s"}
"""The characters a case-insensitive ``i`` or ``s`` matches that ``str.lower`` does not
turn into them (``İ``, ``ı``, ``ſ``; the Kelvin sign ``K`` lowers to ``k`` by itself)."""


def fold_case(text: str) -> str:
    """``text`` in the lower case a case-insensitive match of ASCII letters reads it in,
    character for character (same length, same positions): what the folded patterns of
    :func:`says_in_progress` run on."""
    if text.isascii():
        return text.lower()
    if "\u0130" in text or "\u0131" in text or "\u017f" in text:
        text = text.translate(_FOLD_TO_ASCII)
    return text.lower()


_FAILED_FOLDED_WORDS = (
    r"a(?:bort)|b(?:ackoff)|c(?:ancel|rash)|d(?:enied|egraded|ead\b(?<!\wdead))"
    r"|e(?:rror(?<!noerror)|vict|xpire|xception)|f(?:ail(?![_-]?(?:over|back)|(?:ing|ed|s)[ _-]?(?:over|back)[ \t]{1,3}(?:(?:to|from)\b(?![ \t]+back\b)|reads\b|writes\b|traffic\b)))|i(?:nvalid(?!at(?:ion|ing|e(?!d))))|k(?:illed)"
    r"|n(?:ot[ _-]found)|r(?:eject|efused)|s(?:topped)|t(?:erminat|imed?[ _-]?out)|u(?:nhealthy)"
)
_DONE_FOLDED_WORDS = r"s(?:ucce)|c(?:omplet(?!ing))|d(?:one\b)|f(?:inish(?!ing))"
_FAILED_FOLDED = re.compile(_FAILED_FOLDED_WORDS)
""":data:`_FAILED` over folded text."""
_DONE_FOLDED = re.compile(_DONE_FOLDED_WORDS)
""":data:`_DONE` over folded text."""
_FINISHED_FOLDED = re.compile(f"{_FAILED_FOLDED_WORDS}|{_DONE_FOLDED_WORDS}")
""":data:`_FINISHED` over folded text."""
_DONE_VALUE_FOLDED = re.compile(rf"[:=/](?:(?<=completed/)|(?<!/)\s*[\"']?)(?:{_DONE_FOLDED_WORDS})")
""":data:`_DONE_VALUE` over folded text; and a conclusion after a part's status, as ``gh run
view --jq`` prints a job's ``status/conclusion`` (``"build-image: completed/success"``):
the same part done, counted once for each of its words."""
_STEP_DONE_NEXT_AWAITED_FOLDED = re.compile(
    r"\b(?:complete|completed|done|finished|succeeded)[ \t]{0,2}[,;\u2013-]?[ \t]{1,3}(?:(?:and[ \t]+)?now[ \t]+)?"
    r"(?:awaiting|pending|waiting[ \t]+(?:for|on))[ \t]+"
    r"(?!(?:your|you|user|input|response|reply|action|agent|further|next|the|new|more"
    r"|instructions?|commands?|tasks?)\b)[a-z][\w-]{0,40}(?![\w-]*[ \t]*[:=])"
)
"""A step said done and the next one awaited, in one clause ("Distribution complete,
awaiting install job", "upload finished; pending review"), over folded text: the step
is a part done and the whole still under way (:func:`says_in_progress`). Not what the
agent or its user must give next ("complete, awaiting your reply", "done, waiting for
new tasks"), not across a sentence ("Task complete. Waiting for the user"), and not a
label ("All migrations complete; pending migrations: none")."""
_END_AWAITED_FOLDED = re.compile(
    r"((?:w(?<!\ww)(?:ait|aits|aiting|atch|atching)|a(?<!\wa)waiting|p(?<!\wp)(?:oll|olls|olling))"
    r"\b[^.;\n\"{}]{0,40}?\b(?:to|until|till|for)\s+(?:[\w-]+\s+){0,3}?)(?:finish|complet|succe)\w*"
)
""":data:`_END_AWAITED` over folded text."""
_NO_COUNT_FOLDED = re.compile(
    r"(?:^|[,/|(])[ \t]{0,8}(?:0[ \t]{1,8})?(?:succeeded|failed|completed)(?=[ \t]{0,8}(?:[,/|)]|$))",
    re.MULTILINE,
)
"""A count of ended work that is zero or left blank, in a line of counts (``kubectl
describe job``'s "1 Active (0 Ready) / 0 Succeeded / 0 Failed", a jsonpath's "1 active,
succeeded,  failed" with the empty ones blank): how many, no end said (over folded
text; the JSON form is :data:`_COUNT_KEY_FOLDED`'s)."""
_PARTS_DONE_FOLDED = re.compile(
    r"(?<![\d./])(\d{1,9})[ \t]{0,3}/[ \t]{0,3}(\d{1,9})(?![\d./])(?:[ \t]{1,8}[a-z_-]{1,24}){0,2}[ \t]{1,8}"
    r"(?=d(?:one)\b|c(?:omplete)|f(?:inish))"
)
"""A count of parts done out of all (``Progress: 109/114 simulations done``, ``3/10
complete``), before its word of an end: under way while fewer than all are (over folded
text)."""
_COUNT_KEY_FOLDED = re.compile(
    # every alternative is a quoted key of at most 89 characters followed by a colon:
    # asked first, so a quote that opens no key is passed over in one scan
    # (and the two that name a word anywhere in the key ask first for their values)
    r"\"(?=[^\"]{0,100}\"\s*:)(?:"
    r"(?=[^\"]{0,89}\"\s*:\s*(?:\d|null\b|false\b|\"\"|\[))"
    rf"[^\"]{{0,40}}(?:{_DONE_FOLDED_WORDS})[^\"]{{0,40}}\"\s*:\s*(?:\d|null\b|false\b|\"\"|\[)"
    r"|(?=[^\"]{0,89}\"\s*:\s*(?:0|null\b|false\b|\"\"|\[\s{0,8}\]|\{\s{0,8}\}))"
    rf"[^\"]{{0,40}}(?:{_FAILED_FOLDED_WORDS})(?![a-z_ -]{{0,12}}?(?:free|less)[a-z_]{{0,20}}\"\s*:\s*false\b)[^\"]{{0,40}}\"\s*:\s*(?:0\b(?!\.\d*[1-9])|null\b|false\b|\"\"|\[\s{{0,8}}\]|\{{\s{{0,8}}\}})"
    r"|(?:[^\"]{0,40}[_-])?expires(?:[_-]?(?:at|on|in|after))?\"\s*:"
    r"|(?:estimated|expected|projected)[_-]?(?:complet|finish)\w{0,20}\"\s*:)"
)
""":data:`_COUNT_KEY` over folded text."""
# :data:`_PROGRESS_WORDS` by their first letter, so that one test of a letter passes
# over the words that cannot start there (words of one letter keep their order)
_PROGRESS_FOLDED_WORDS = (
    r"p(?:ending\w*|rocessing|rovisioning|rogressing|dng|ublishing|ropagating|reparing\w*)"
    r"|q(?:ueued|ueue?ing)"
    r"|i(?:n[ _-]?progress|n[ _-]?queue|nitiali[sz]ing|n[ _-]?transit|n[ _-]?review|mporting"
    r"|ndexing|nstalling)|r(?:unning|eviewing|estoring|eplicating|endering|ebooting"
    r"|estarting|esizing|ebalancing|ebuilding|ecovering)"
    r"|e(?:xecuting|xporting|xtracting)"
    r"|c(?:reating|opying|ompleting\w*|onverting|ompacting)|f(?:inishing)|s(?:tarting|cheduled|canning|yncing|topping|ubmitting|ending"
    r"|ettling)"
    r"|d(?:eploying|ownloading|eactivating|eleting)"
    r"|b(?:uilding)|w(?:aiting)"
    r"|a(?:waiting(?![ _-]?(?:input|user|your|response|reply|action|agent))\w*|uthori[sz]ing|csp"
    r"|naly[sz]ing|ctivating|dvancing)"
    r"|u(?:pdating|nder[ _-]?review|ploading|pgrading)|n(?:ot[ _-]?(?:yet[ _-]?)?ready)"
    r"|o(?:ut[ _-]?for[ _-]?delivery|n[ _-]request)|v(?:alidating|erifying)"
    r"|t(?:ransferring|ranscoding|erminating)"
    r"|m(?:igrating)|l(?:oading)"
)
_W = _PROGRESS_FOLDED_WORDS
_FOLDED_VALUE = rf"\s*(?:[\"'](?:{_W})[.…!]{{0,3}}[\"']|(?:{_W})\b)"
_FOLDED_ELEMENT = rf"\s*\\{{0,3}}[\"'](?:{_W})\\{{0,3}}[\"']\s*[,\]]"
_FOLDED_STILL = rf"\s+(?:still\s+)?(?:{_W})\b"
_FOLDED_KEY = rf"\w{{0,12}}[\"']?\s*[:=]\s*[\"'](?:{_W})\b"
_FOLDED_STEP = (
    r"[\"']?\s*[:=]\s*[\"']?(?:(?!not[_-]|non[_-]|no[_-]|never[_-]|un)[a-z]+[_-]){1,3}"
    rf"(?:{_W})\b"
)
_FOLDED_PHRASE = rf"[\"']?\s*[:=]\s*[\"'](?:(?!not |non |no |never |un)[a-z]+ ){{1,2}}(?:{_W})\b"
_IN_PROGRESS_FOLDED = re.compile(
    rf":{_FOLDED_VALUE}|={_FOLDED_VALUE}|\[{_FOLDED_ELEMENT}|,{_FOLDED_ELEMENT}"
    rf"|<(?:status|state|phase)>\s*(?:{_W})\b"
    rf"|s(?<!\ws)till{_FOLDED_STILL}|c(?<!\wc)urrently{_FOLDED_STILL}|r(?<!\wr)emains?{_FOLDED_STILL}"
    rf"|s(?:tatus|tate|tage)(?:{_FOLDED_KEY}|{_FOLDED_STEP}|{_FOLDED_PHRASE})"
    rf"|p(?:hase(?:{_FOLDED_KEY}|{_FOLDED_STEP}|{_FOLDED_PHRASE})|rogress{_FOLDED_KEY})"
    r'|"(?:in[ _-]?progress|pending|queued|processing)"\s*:\s*[1-9]'
    rf'|"(?:{_FLAG_NOT_NAMES}[a-z]{{1,16}}[_-]?)?{_FLAG_UNDER_WAY}"\s*:\s*true\b'
    r'|"execution_state"\s*:\s*"busy"'
)
""":data:`_IN_PROGRESS` over folded text."""
_FOLDED_HTTP_WORD = r"\d\d\s+(?:service|not|bad|gateway|internal|too|forbidden|unauthorized)\b"
_ABSENT_FOLDED = re.compile(
    r"n(?<!\wn)(?:o|one|il|othing|o such|/a)\b|e(?<!\we)mpty\b|m(?<!\wm)issing\b|a(?<!\wa)bsent\b"
    r"|u(?<!\wu)(?:nknown|navailable|nreachable|nable)\b|c(?<!\wc)(?:annot|an't|ouldn't|ould not)\b"
    r"|\"(?:data|result|results|value|values|items|records|series|body|output|rows)\"\s*:\s*null"
    r"|h(?<!\wh)ttp/[\d.]+\s+[45]\d\d\b|s(?<!\ws)tatus(?:_?code)?\"?\s*[:=]\s*\"?[45]\d\d\b"
    rf"|4(?<!\w4){_FOLDED_HTTP_WORD}|5(?<!\w5){_FOLDED_HTTP_WORD}"
)
""":data:`_ABSENT` over folded text."""


def _replaced(pattern: re.Pattern[str], text: str, folded: str, keep_group: bool) -> tuple[str, str]:
    """``text`` with every match of ``pattern`` over its folded form replaced by ``#``
    (after the match's first group when ``keep_group``), as ``re.sub`` would replace the
    matches of its case-insensitive definition; and the result folded."""
    pieces: list[str] = []
    at = 0
    for match in pattern.finditer(folded):
        start, end = match.span()
        pieces.append(text[at:start])
        if keep_group:
            pieces.append(text[start:match.end(1)])
        pieces.append("#")
        at = end
    if not pieces:
        return text, folded
    pieces.append(text[at:])
    text = "".join(pieces)
    return text, fold_case(text)


_TOP_STATUS_KEYS = ("status", "state", "phase", "conclusion", "result")


def _top_object(payload: Any) -> dict[str, Any] | None:
    """A structured answer as its top-level object (JSON text decoded), or ``None``."""
    if type(payload) is str and payload[:1] == "{":
        try:
            payload = _json_decode(payload)
        except (msgspec.DecodeError, RecursionError, UnicodeEncodeError):
            return None
    return payload if type(payload) is dict else None


def _failures_only_counted(payload: Any) -> bool:
    """Whether a structured answer's words of a failure or an end are all keys of its
    top-level object that count (``{"newIssues": 1, "crashEvents": 1}``): a metric's values,
    not a status. Any such word elsewhere (a status "failed", a message, a nested object,
    a key whose value is no number) and it is not."""
    top = _top_object(payload)
    if top is None or len(top) > 64:
        return False
    counted = False
    for key, value in top.items():
        if type(key) is not str:
            return False
        if _FINISHED_FOLDED.search(fold_case(key)) is not None:
            if type(value) is not int or value < 0:
                return False
            counted = True
        elif type(value) is str:
            if _FINISHED_FOLDED.search(fold_case(value[:256])) is not None:
                return False
        elif type(value) is not int and type(value) is not float and value is not None:
            return False  # a nested part or a flag: read as before
    return counted


def _delivered_at_top(payload: Any) -> bool:
    """Whether a structured answer's own status (a top-level ``status`` or ``state``, or
    one level down under a single key, ``{"shipment": {"status": "Delivered"}}``) is
    ``delivered``: a parcel, a message or a webhook delivered is over. Read again after
    every wait, it is no poll (a shipment said delivered, read every ten minutes for a
    proof of delivery only a request would bring)."""
    top = _top_object(payload)
    if top is None:
        return False
    if len(top) == 1:
        (inner,) = top.values()
        if type(inner) is dict:
            top = inner
    for key in ("status", "state"):
        value = top.get(key)
        if type(value) is str and value.strip().lower() == "delivered":
            return True
    return False


def _over_at_top(payload: Any) -> bool:
    """Whether a structured answer's own status (a top-level ``status``, ``state``,
    ``phase``, ``conclusion`` or ``result``) says it ended: ``{"status": "done",
    "children": [{"status": "pending"}]}`` is over, whatever its parts say."""
    payload = _top_object(payload)
    if payload is None:
        return False
    for key in _TOP_STATUS_KEYS:
        value = payload.get(key)
        if type(value) is str and _FINISHED.search(value[:64]) is not None:
            return True
    return False


_AWAITING = frozenset(
    ("sent", "awaiting", "waiting", "partial", "partially_signed",
     "partially_approved", "in_review", "under_review", "pending_approval")
)
"""A whole's own status that says it waits on others: an envelope "sent" (its signers have
not all signed), a review "under_review", an approval "partially_approved". Not "open" or
"active": many resources rest there when their work is done (a service "ACTIVE" after
its deployment "COMPLETED"); not "delivered", read as an end (:func:`_delivered_at_top`)."""


def _open_at_top(payload: Any) -> bool:
    """Whether a structured answer's own status (a top-level ``status``, ``state``...)
    says it waits on its parts (:data:`_AWAITING`): ``{"status": "sent", "signers":
    [{"status": "completed"}, {"status": "sent"}]}`` is not over, whatever its parts say
    (the mirror of :func:`_over_at_top`). An own status that is no such word
    ("closed") is judged as before."""
    payload = _top_object(payload)
    if payload is None or _over_at_top(payload):
        return False
    for key in _TOP_STATUS_KEYS:
        value = payload.get(key)
        if type(value) is str and value.strip().lower().replace(" ", "_").replace("-", "_") in _AWAITING:
            return True
    return False


def _a_listing(payload: Any) -> bool:
    """Whether a structured answer is a listing of items (a list of two objects or more,
    or an object that holds one) with no status of its own: no top-level ``status``,
    ``state``..., nor one in an object beside the list, and no word of an end among its
    other top-level text values (nor ``true`` under a key of one). The statuses of its
    items are theirs (an application "screening_complete", another "withdrawn"): they
    say nothing of the listing as a whole, which a watch re-reads until an item comes.
    Not one item (a run's own answer in a list of one), nor items that all say they
    ended (every run of the listing completed: the work watched is over)."""
    if type(payload) is str and payload[:1] == "[":
        try:
            payload = _json_decode(payload)
        except (msgspec.DecodeError, RecursionError, UnicodeEncodeError):
            return False
    if type(payload) is list:
        return _items_listed(payload)
    top = _top_object(payload)
    if top is None:
        return False
    listed = False
    for key, value in top.items():
        if type(key) is not str:
            return False
        kind = type(value)
        if kind is list:
            if _items_listed(value):
                listed = True
        elif key in _TOP_STATUS_KEYS:
            return False
        elif kind is str:
            if _FINISHED.search(value[:64]) is not None or _FINISHED.search(key[:64]) is not None:
                return False  # "message": "sync finished", "finished_at": "2025-..."
        elif value is True:
            if _FINISHED.search(key[:64]) is not None:
                return False  # "completed": true (a count of them, "completed_count": 1, is no end)
        elif kind is dict and _over_at_top(value):
            return False  # {"job": {"status": "done"}, "artifacts": [...]}
    return listed


def _items_listed(items: list[Any]) -> bool:
    """Whether a list is a listing's items: two objects or more, not all of them saying
    they ended (their own top-level status a word of an end)."""
    if len(items) < 2 or type(items[0]) is not dict:
        return False
    return any(type(item) is not dict or not _over_at_top(item) for item in items)


NOTHING_YET = 4
"""``ResultView.progress`` of an answer that says nothing yet and no end (``[]``, ``{"messages":
[]}``, "No data points"): read by :func:`poll_answer` under a watch."""


def says_in_progress(result: ResultView) -> bool:
    """Whether a successful answer is a status saying the work it reports on is still
    under way (``{"status": "processing"}``, ``State: RUNNING``, "the export is still
    queued", a pod listing whose rows are ``Pending``) and says nothing of a failure (no
    failure, error, cancellation, time-out, crash...: one such word anywhere and it is
    not). A background shell's answer that opens with its own status (``BashOutput``'s
    ``<status>running</status>``) is read by that status and the failures of its output
    alone, however long, whatever words of a good end the output holds. A key named by a
    word of an end that says no end (a count, ``"cells_complete":
    0``, ``"succeeded": 3``; nothing yet, ``"finishedAt": null``, ``"completed": false``;
    of failures, only zero or nothing: ``"failed": 0``, ``"error": null``) is read as no word at all, and so is an end
    named as what is awaited ("waiting for rollout to finish", "until the build
    completes": :data:`_END_AWAITED`).
    Words of a good end (success, completion) as other fields' values beside the
    status are parts done (a CI run whose lint job's status is "completed" while its
    tests' is "in_progress"); as a key or in prose (``"completed": true``), or with no
    status under way, they say the work is over.

    Asking again for such a status is polling, and the same answer again is what
    waiting looks like; polling a job that has already failed is a loop. Read by the
    loop detectors only where they would otherwise count an answer as unchanged, so its
    cost is paid on that path alone. At most :data:`PROGRESS_TEXT_LIMIT` characters (a
    longer answer is no status). Computed once per result and kept on the view.
    """
    progress = result.progress
    if progress:
        return progress == 2
    text: Any = None
    payload: Any = None
    if not result.failed and not result.no_op:
        payload = result.event.result
        if type(payload) is str:
            text = payload
        elif payload is not None:
            # Encoded to be measured: the size an agent declares (result_bytes) is its
            # word, and a structured status is small.
            try:
                text = _json_encode(payload).decode("utf-8", "replace")
            except (TypeError, ValueError, OverflowError, RecursionError):
                text = None
    progress = 1
    if type(payload) is str and payload.startswith("<status>"):
        # A background shell's own status before its output (Claude Code's BashOutput:
        # "<status>running</status>", then what it printed so far): that status is the
        # answer's, whatever words of a good end the output holds ("Trial 25 finished")
        # and however long it is.
        status = _STATUS_ELEMENT.match(payload)
        if status is not None:
            # Unless what it printed says something failed ("Connection refused ...
            # retrying", a traceback): a process repeating an error is no work going on.
            progress = (
                2 if status[1].lower() == "running"
                and _FAILED_FOLDED.search(
                    fold_case(payload[status.end():status.end() + PROGRESS_TEXT_LIMIT])
                ) is None
                else 1
            )
            result.progress = progress
            return progress == 2
    if text and len(text) <= PROGRESS_TEXT_LIMIT:
        if "elivered" in text and _delivered_at_top(payload):
            # A shipment's, a message's or a webhook's own status "Delivered": over,
            # whatever its history says ("In Transit" among its scans). Only the answer's
            # own status: "to be delivered Friday", "Delivered: no" or a conversation whose
            # messages were delivered while a reply is awaited say no end.
            result.progress = 1
            return False
        # Words read in lower case, once (fold_case): a pattern each, skipping in C to
        # where its words can start. Patterns that care for case read the text itself.
        folded = fold_case(text)
        if '":' in text:
            # Keys of an end that say no end ("cells_complete": 0, "failed": 0) say how
            # many, not that the work ended: read without them.
            text, folded = _replaced(_COUNT_KEY_FOLDED, text, folded, False)
        if ("ucceeded" in folded or "failed" in folded or "ompleted" in folded) and (
            "/" in folded or "," in folded
        ):
            # Counts of ended work that are zero or blank (a job's "0 Succeeded / 0
            # Failed" while its pod runs) say how many, not that the work ended.
            text, folded = _replaced(_NO_COUNT_FOLDED, text, folded, False)
        # An end waited for ("waiting for rollout to finish", "until it completes") is
        # no end: read without it.
        text, folded = _replaced(_END_AWAITED_FOLDED, text, folded, True)
        if _FAILED_FOLDED.search(folded) is None:
            done = len(_DONE_FOLDED.findall(folded))
            under_way = _IN_PROGRESS_FOLDED.search(folded) is not None or (
                "progress" in folded and _says_process_in_progress(folded)
            )
            done_parts = len(_DONE_VALUE_FOLDED.findall(folded)) if done else 0
            if done and "/" in folded:
                # Fewer parts done than all ("Progress: 109/114 simulations done", an
                # evaluation's log read between sleeps): the word of an end counts parts,
                # and the whole is under way. All of them ("114/114 done") is an end.
                partial = sum(
                    1 for count in _PARTS_DONE_FOLDED.finditer(folded) if int(count[1]) < int(count[2])
                )
                if partial:
                    under_way = True
                    done_parts = min(done, done_parts + partial)
            if not under_way and not done and "ctive" in folded and _JOB_ACTIVE.search(folded) is not None:
                # A job's own status "ACTIVE" (z/OSMF's JES job: INPUT, ACTIVE, OUTPUT):
                # executing. Elsewhere "active" is where a resource stays (a cluster, a
                # subscription), so only beside a job's id.
                under_way = _JOB_KEY.search(folded) is not None
            if not under_way and done and ("wait" in folded or "pending" in folded):
                # A step done and the next awaited in one sentence (ChangeMan's "CMN8700I -
                # Distribution complete, awaiting install job" until the install window):
                # the step is a part, the whole under way.
                steps = len(_STEP_DONE_NEXT_AWAITED_FOLDED.findall(folded))
                if steps:
                    under_way = True
                    done_parts = min(done, done_parts + steps)
            if not under_way and len(text) <= BARE_STATUS_LIMIT and (
                _BARE_UNDER_WAY.fullmatch(folded) is not None
                or _BARE_FIELDS_UNDER_WAY.fullmatch(folded) is not None
            ):
                # A status printed alone (`aws rds describe-db-instances --query
                # '...DBInstanceStatus' --output text` answering "creating"): its value; or
                # beside the other fields a template printed, each of them a figure
                # (`kubectl get postgresql ... -o jsonpath='{.spec.postgresql.version}
                # {.status.PostgresClusterStatus}'` answering "16 Updating").
                under_way = True
            if (
                not under_way and ("\n" in text or "\t" in text)
                and _STATUS_LINE_UNDER_WAY.search(text) is not None
            ):
                # Lines that each open with a status, as `gh ... --jq` prints them: the
                # run's own "in_progress", then its steps' "completed success Checkout".
                # The steps done are parts, as a field's value would be.
                under_way = True
                if done:
                    done_parts += sum(len(_DONE_FOLDED.findall(row[1])) for row in _DONE_ROW.finditer(text))
            if done and done != done_parts and "\n" in text:
                # Rows that each close with their status (`airflow tasks states-for-dag-run`
                # piped to awk: "build_triangles success", "chain_ladder running"): the
                # rows done are parts of a run still going when another row closes under
                # way (a row alone "running" may be a service's steady state: no part).
                rows_done = status_rows_done(folded)
                if rows_done:
                    under_way = True
                    done_parts += rows_done
            if under_way and (not done or (done == done_parts and not _over_at_top(payload))):
                # under way, even with parts of it done (a CI run whose lint job's status is
                # "completed" while its tests' is "in_progress")
                progress = 2
            elif done:
                if _a_listing(payload) or _open_at_top(payload):
                    # a listing whose items' statuses are theirs, or a whole whose own
                    # status says no end while parts of it ended (an envelope "sent" with
                    # one signer "completed"): a value being watched (poll_answer), not
                    # an end
                    progress = 3
                # else over, and it went well
            else:
                header = _LISTING_HEADER.search(text)
                found = header is not None and _LISTING_ROW.search(text, header.end()) is not None
                if not found and "JOBID" in text:
                    queue = _QUEUE_HEADER.search(text)
                    found = (
                        queue is not None and _QUEUE_ROW.search(text, queue.end()) is not None
                        and _QUEUE_NEVER.search(text, queue.end()) is None
                    )
                # 3: no end said, and no "nothing yet" ({"series": []}, "No data points", a
                # 503: _ABSENT), which poll_answer reads as a value being watched; 4: nothing
                # yet, no end said (the keys of an end that say no end read as none, above)
                progress = (
                    2 if found else NOTHING_YET if "[]" in text or "{}" in text or _ABSENT_FOLDED.search(folded)
                    else 3
                )
    if result.call_flags & FLAG_AWAITS_OWN and (
        # (payload is None for a failure or a no-op)
        payload in ("", [], {})
        or (progress == NOTHING_YET and (found_nothing(payload) or empty_page(payload)))
    ):
        # Nothing yet from what the session itself set going: a render's history asked by
        # the id its queueing handed back answers {} until the render is done (ComfyUI),
        # a batch's output list stays empty while it runs. That is work under way, as
        # "pending" would say.
        progress = 2
    result.progress = progress
    return progress == 2


_UNREACHABLE = re.compile(
    r"(?i)refused|timed?[ _-]?out|unreachable|no route|packet loss|connection reset"
    r"|reset by peer|host is down|could not resolve|name or service not known"
    r"|name resolution|service unavailable|bad gateway|gateway time|not responding"
    r"|\b50[234]\b|econnrefused|ehostunreach|enetunreach|etimedout"
)
"""What a probe's failure says while what it probes is down: the connection refused or
timed out, the host unreachable, a proxy's 502 to 504."""


def says_unreachable(error: object) -> bool:
    """Whether a failure says what it reached for is down or unreachable
    (:data:`_UNREACHABLE`, in its first 512 characters): a probe's failure while what was
    restarted comes back (``ResultView.restarting``), unlike a file not found or a
    refused request, which a restart does not explain."""
    return type(error) is str and _UNREACHABLE.search(error, 0, 512) is not None


_TRANSIENT = re.compile(
    # an HTTP status of a service down or busy, as a status (not any 503 in the text:
    # "expected 503.00", a line 429 of a traceback)
    r"(?i)\b(?:http(?:/[\d.]+)?|httperror|status(?:[ _]?code)?|code|error)\W{0,3}(?:429|50[234])\b"
    # or leading the error, as APIs put their status first ("429 RESOURCE_EXHAUSTED: ...",
    # "503 Service Unavailable"), its name beside it (not "502 problems", "503.00 != 502")
    r"|^\W{0,3}(?:429|50[234])(?![.\d])[\s:-]+(?=(?:resource[ _]exhausted|too many|service|bad gateway"
    r"|gateway|unavailable|rate|slow ?down|throttl(?:e|ed|es|ing)|try again|quota)(?![\w-]))"
    r"|too many requests|rate[ _-]?limit(?:ed|ing| exceeded)?\b|throttl"
    # a quota spent (gRPC's RESOURCE_EXHAUSTED), not a memory or a message size exhausted,
    # nor a disk's quota
    r"|resource[ _]exhausted(?![\s:]*(?:oom|out of memory|received message|message larger))"
    r"|(?<!disk )quota exceeded"
    r"|service unavailable|bad gateway|gateway[ _-]?time-?out|temporarily unavailable|try again later"
    # (asked of the caller as it is, not after a fix: "fix your credentials and retry later",
    # "do not retry later")
    r"|(?<!and )(?<!not )(?<!never )retry later"
    # (a gateway's "did not respond within 10s": the far side busy, not the request wrong)
    r"|did not respond within|no response within"
    # (a back end's own time-out named as such: a carrier's HLR "ProvisioningTimeout", an
    # upstream's; not a test's or a page element's)
    r"|(?:provisioning|upstream|backend)[ _-]?(?:request[ _-])?time-?out"
    r"|connection (?:refused|reset|timed out)|(?:read|connect|request) timed out|econnrefused|etimedout"
    r"|could not resolve host|name resolution|concurrency limit|currently running|lock wait timeout"
    # AWS's own codes of a request refused for its rate (S3's "An error occurred (SlowDown)
    # ... Please reduce your request rate", EC2's RequestLimitExceeded, DynamoDB's
    # ProvisionedThroughputExceededException, API Gateway's TooManyRequestsException)
    r"|\(slow ?down\)|reduce your request rate|request ?limit ?exceeded|toomanyrequests"
    r"|provisioned ?throughput ?exceeded"
    # a database not up yet, as pg_isready says it ("/var/run/postgresql:5432 - no response",
    # "- rejecting connections")
    r"|\d - (?:no response|rejecting connections)\b"
)
"""What a failure says when the service it reached is down or busy rather than the
request wrong: a 429 or a 502 to 504 given as a status (after a word that says so, or
first in the error), a rate limit or a quota spent (gRPC's ``RESOURCE_EXHAUSTED``), a
connection refused or reset, a read timed out, a concurrency limit, a lock to wait for.
Not a timeout of the agent's own (a test's, a page element's), not an error that merely
holds the number."""


VERDICT_HEAD = 80
"""Longest verdict read with the output it came with (:func:`failure_text`)."""
_VERDICT = re.compile(r"(?i)\b(?:returned|result|status|state)\b[^\n]{0,40}\bfail")
"""An error that is a verdict and no more (``X returned Result: Failed``): what failed is
in the output (not ``KeyError: 'lr'`` or an assertion, which say it themselves)."""


def failure_text(result: ResultView) -> str:
    """What a failure says: its error, or the output it came with when the error says
    only the exit status (``exit status 1`` beside "ERROR 503 Service Unavailable"), or
    both when the error is a short verdict (``Test-MigrationServerAvailability returned
    Result: Failed`` beside "(503) Server Unavailable")."""
    error = result.error or ""
    payload = result.event.result
    if type(payload) is str and payload:
        if says_only_status(error):
            return payload[:512]
        if len(error) <= VERDICT_HEAD and _VERDICT.search(error) is not None:
            return f"{error}\n{payload[:512]}"[:512]
    return error[:512]


_RETRY_AFTER = re.compile(
    # a field or a header ("retry_after": 6, Retry-After: 6, "retryDelay": "6s",
    # retry_after_ms: 6000), or a sentence ("Please try again in 20s", "retry in 6.2s")
    r"(?i)(?:retry[ _-]?(?:after|delay)(?P<ms>[ _-]?ms)?[\"']?\s*[:=]\s*[\"']?"
    r"|(?:try again|retry) in |retry after )"
    r"(?P<value>\d{1,6}(?:\.\d{1,6})?)(?![\d.])\s*(?P<unit>ms\b|milliseconds?|s\b|secs?\b|seconds?|m\b|mins?\b|minutes?)?"
)
RETRY_AFTER_LIMIT = 86_400.0
"""Longest back-off read from a failure (:func:`retry_after_seconds`), in seconds."""


def retry_after_seconds(error: object) -> float:
    """The back-off a failure asks for, in seconds (``"retry_after": 6``, ``Retry-After:
    6``, ``"retryDelay": "6s"``, ``retry_after_ms: 6000``, "Please try again in 20s"; in
    its first 512 characters; seconds unless a unit says otherwise), 0.0 for none, for
    one under a second (a retry at once is what it asks) or for an HTTP date."""
    if type(error) is not str:
        return 0.0
    head = error[:512]
    lowered = head.lower()
    if "etry" not in lowered and "ry again" not in lowered:  # (most failures: scans in C)
        return 0.0
    match = _RETRY_AFTER.search(head)
    if match is None:
        return 0.0
    value = float(match["value"])
    unit = (match["unit"] or ("ms" if match["ms"] else "s")).lower()
    if unit.startswith("ms") or unit.startswith("milli"):
        value /= 1000.0
    elif unit.startswith("m"):
        value *= 60.0
    return min(value, RETRY_AFTER_LIMIT) if value >= 1.0 else 0.0


def says_transient(error: object) -> bool:
    """Whether a failure says it may pass by itself (:data:`_TRANSIENT`, in its first
    512 characters)."""
    return type(error) is str and _TRANSIENT.search(error, 0, 512) is not None


def failed_transiently(result: ResultView) -> bool:
    """Whether ``result`` is a failure that says it may pass by itself
    (:func:`says_transient` of :func:`failure_text`): read once per result, for every
    signal that asks."""
    transient = result.transient
    if transient < 0:
        result.transient = transient = int(
            result.failed and (says_transient(failure_text(result)) or _curl_unreachable(result))
        )
    return transient == 1


_CURL_UNREACHABLE = frozenset({7, 28, 52, 56})
"""curl's exit statuses of a server that did not answer: it could not connect (7), the
time ran out (28), the reply was empty (52) or broke off (56)."""
_EXIT_STATUS = re.compile(r"\bexit (?:code|status)[ :=]*(\d{1,3})\b")


def _curl_unreachable(result: ResultView) -> bool:
    """Whether a failed ``curl`` says by its exit status that the server did not answer
    (:data:`_CURL_UNREACHABLE`): a service restarting probed with `curl -s -o /dev/null -w
    '%{http_code}'`, answering `000` until it is back, was halted at its fifth probe."""
    if result.action != "curl" or type(result.error) is not str:
        return False
    status = _EXIT_STATUS.search(result.error, 0, 64)
    return status is not None and int(status[1]) in _CURL_UNREACHABLE


def poll_answer(result: ResultView) -> bool:
    """Whether ``result`` is a poll's answer: the session paused since the same call was
    last answered (``ResultView.paused``), and the answer says the work is still under
    way (:func:`says_in_progress`) or, when one of those pauses was a deliberate wait
    (``ResultView.waited``: a wait call, a ``sleep``, a long poll, or minutes of quiet,
    ``[waits] wait_seconds``: a check scheduled every few minutes),
    says nothing of an end at all (``198.51.100.7`` from ``dig`` a minute after the last
    ``dig``, while a DNS change propagates: no failure, error, success, completion...
    anywhere in it; no act since: no write, no call not known to only read, no failed
    answer), says some value (not an empty list or a zero count:
    :func:`found_nothing`, :func:`says_bare_value`; no word of absence or of a server
    out of reach: :data:`_ABSENT`) and answers a call known to only read.

    Where the session's user asked the agent to watch for something to happen
    (``ResultView.watched``), nothing yet (an empty list or object, a command's empty output,
    a zero count, nothing listed beside the request echoed, a short answer known only by its
    digest: :func:`found_nothing`, :func:`empty_page`, :func:`says_bare_value`; and any
    object whose only news is nothing yet or a service unavailable, a status page read
    while the outage the user asked to watch goes on; no word of an end beside it) asked
    again after such a wait is a poll's answer too: it is the answer the watch awaits.

    The same answer again is then what waiting looks like, not a loop. Polling what has
    ended ("failed", "succeeded") is a loop, however long the agent sleeps between; and
    what merely took a while (a slow model, a slow tool) is no deliberate wait, so a
    neutral answer asked again after it is judged as before. Only the loop detectors'
    unchanged-answer paths read this, so its cost is paid there alone.
    """
    if not result.paused:
        return False
    if says_in_progress(result):
        return True
    if result.restarting and not result.failed:
        # a probe of what was restarted, answering the same while it comes back: a
        # poll's answer when it says no end (ping's "100% packet loss") or that what it
        # reached for is down (curl's "Connection refused" as its output); not a job's
        # "failed", nothing found, or an answer too long to read
        if result.progress != 1 and result.progress != NOTHING_YET:
            return True
        payload = result.event.result
        return type(payload) is str and says_unreachable(payload) and not _over_at_top(payload)
    if not result.waited or not result.call_flags & FLAG_READ:
        return False
    payload = result.event.result
    progress = result.progress
    if progress == 3:
        # A value, not "nothing yet": an empty series, a zero count, "No data points" or an
        # unreachable server asked again and again is the agent waiting for what is not
        # coming (a misspelled metric, a wrong host), as before. Unless its user asked it
        # to watch for something to happen ("text me the moment it arrives", "tell me if
        # anything fires"): nothing yet is then the answer the watch awaits.
        # (The words of absence were read with the rest in says_in_progress.)
        return result.watched or (not found_nothing(payload) and not says_bare_value(payload, result.size))
    if progress == 1 and result.watched and not result.failed and _failures_only_counted(payload):
        # Under a watch the user asked for, a count of failures is the value watched
        # ("crashEvents": 1 in a crash watch, read every three minutes after the first
        # crash came): the same count again is nothing new yet, not an end polled again.
        return True
    # Nothing yet, and only under a watch: no text at all (a command's empty output, a
    # short answer's digest: a long one known only by its digest may say anything), or an
    # empty answer with no end said beside it (not {"status": "failed", "items": []},
    # {"done": true}: says_in_progress read them as ends). Prose ("No new messages.") is
    # not read so: words of absence say an outage too ("unavailable", a 503).
    if not result.watched or result.failed or result.no_op:
        return False
    if progress == 1:
        return not payload and result.size <= NONE_ANSWER
    return progress == NOTHING_YET and (
        # (empty_page: nothing listed beside the request echoed, {"venue": "Carbone",
        # "day": "2025-12-06", "slots": [], "checked_at": "..."})
        found_nothing(payload) or empty_page(payload) or says_bare_value(payload, result.size)
        or type(json_value(payload)) is dict
    )


def moved_poll_answer(result: ResultView) -> bool:
    """Whether ``result`` answers a poll whose answers already moved on their own (a room
    "VD", "VD", then "CIP": ``repeated-tool-call``'s reading of its run), the same again:
    asked after a pause (``ResultView.paused``), answering a call known to only read,
    saying a value (not nothing: :func:`found_nothing`, :func:`says_bare_value`) and no
    word of an end (:func:`says_in_progress`). What moved once moves again; a stage of a
    process that lasts a few checks is waiting, as a deliberate wait's unchanged value
    is (:func:`poll_answer`). What ended ("failed" after "pending") is no poll."""
    if not result.paused or not result.call_flags & FLAG_READ or result.failed:
        return False
    says_in_progress(result)  # reads the answer once, into result.progress
    if result.progress != 3:
        return False
    payload = result.event.result
    return not found_nothing(payload) and not says_bare_value(payload, result.size)


NONE_ANSWER = 64
"""Longest answer (characters of text, bytes of a structured payload) read for whether it
says "none" (:func:`says_bare_value`)."""
_ZERO_COUNT = re.compile(r"[A-Za-z (),.:=-]*(?<![0-9.])0(?![0-9.])[A-Za-z (),.:=%-]*")
_ZERO_CELL = re.compile(r"\+-+\+\s*\|\s*\w+\s*\|\s*\+-+\+\s*\|\s*0\s*\|\s*\+-+\+")
"""A one-cell ASCII table of zero (``+-----+ |nulls| +-----+ |    0| +-----+``)."""

_PAGING_FIELDS = frozenset({
    "page", "page_size", "pagesize", "per_page", "perpage", "page_number", "pagenumber",
    "pageno", "page_no", "limit", "offset", "size", "start", "skip", "max_results",
    "maxresults", "top",
})
"""Numbers an empty result page states of itself: which page and how large (:func:`found_nothing`)."""
_NOTHING_TEXT_FIELDS = frozenset({
    "query", "q", "search", "search_query", "searchquery", "term", "terms", "keyword",
    "keywords", "text", "input", "question", "filter", "filters", "sort", "order", "status",
    "state", "message", "msg", "note", "info", "detail", "reason", "type", "kind", "object",
    "as_of", "timestamp", "time", "date", "generated_at", "retrieved_at", "updated_at",
    "created_at", "createdat", "requested_at", "searched_at",
})
"""The fields whose text a search's empty answer may carry: the echoed query, a status,
when it was asked."""
_REQUEST_IDS = frozenset({
    "request_id", "requestid", "x_request_id", "search_id", "searchid", "sid", "response_id",
    "responseid", "correlation_id", "correlationid", "offer_request_id",
})
"""The names of the id an API gives the request itself (Tavily's ``request_id``, Duffel's
``offer_request_id``, Splunk's ``sid``, ``searchId`` and ``X-Request-ID`` read lower-cased,
hyphens as underscores): the search's own receipt, new on
every call (:func:`found_nothing`). Exact names: an id whose name only ends so may be what
was found (a ``pull_request_id``, a tracing backend's ``trace_id``)."""
_WINDOW_FIELDS = frozenset({
    "from", "to", "from_date", "to_date", "from_ts", "to_ts", "start_time", "end_time",
    "since", "until", "earliest", "latest",
})
"""Numbers an empty answer echoes of the window it searched (Datadog's ``from_date`` and
``to_date``): when it looked, not what it found (:func:`found_nothing`)."""
_REQUEST_NUMBERS = frozenset({
    "took", "took_ms", "response_time", "responsetime", "response_time_ms", "search_time_ms",
    "query_time_ms", "processing_time_ms", "elapsed", "elapsed_ms",
})
"""Numbers an answer states of its own request, how long it took (Tavily's
``response_time``, Elasticsearch's ``took``): no count of what it found. Not a
``duration`` or a ``latency``, which may be what a search found."""
_SCORE_FIELDS = frozenset({
    "threshold", "min_score", "minscore", "score_threshold", "scorethreshold",
    "similarity_threshold", "similaritythreshold", "min_similarity", "minsimilarity", "top_k",
    "topk", "max_score", "maxscore", "max_score_seen", "maxscoreseen", "best_score",
    "bestscore", "top_score", "topscore",
})
"""Numbers an empty answer of a scored search states of its cut-off and of the best it saw
below it (``"threshold": 0.6, "max_score_seen": 0.35``, ``"maxScoreSeen"`` read lower-cased):
the results above the cut-off are the hits, and there are none (:func:`found_nothing`)."""
_ANSWER_NUMBERS = _REQUEST_NUMBERS | _WINDOW_FIELDS | _SCORE_FIELDS
"""The numbers an answer states of its request and of the window it searched."""


def _bare_leaves(value: Any, found: list[int], depth: int = 0) -> bool:
    """Count a small JSON value's leaves into ``found`` (values that are not zero, false
    or null; empty containers); False as soon as a string (a name, an id, a status)
    or a deeper nesting makes it more than a bare value."""
    kind = type(value)
    if kind is dict or kind is list:
        items = value.values() if kind is dict else value
        if not items:
            found[1] += 1
            return True
        if len(items) > NONE_ANSWER // 2:
            return False  # more than a small answer can hold (a size declared is a word)
        return depth < 4 and all(_bare_leaves(item, found, depth + 1) for item in items)
    if value is None or value is False or (kind in (int, float) and value == 0):
        return True
    if kind in (bool, int, float):
        found[0] += 1
        return True
    return False


def says_bare_value(payload: Any, size: int) -> bool:
    """Whether a successful answer says no more than a bare value: a small JSON value
    with no text in it (``[]``, ``[{"stuck": 0}]``, ``{"saved": true}``: a bare number or
    ``true`` in JSON's clothing), or a short sentence whose one number is a zero
    (``Listed 0 items.``, ``(0 rows)``). At most :data:`NONE_ANSWER` characters. For a
    call that is no search this is a bare answer or an empty output in other words,
    and is read like one: what it says is in the call."""
    if type(payload) is str:
        if len(payload) > NONE_ANSWER:
            return False
        if payload[:1] not in ("{", "["):
            stripped = payload.strip()
            return (
                _ZERO_COUNT.fullmatch(stripped) is not None
                or (stripped[:1] == "+" and _ZERO_CELL.fullmatch(stripped) is not None)
            )
        try:
            payload = _json_decode(payload)
        except (msgspec.DecodeError, RecursionError, UnicodeEncodeError):
            return False
    elif size > NONE_ANSWER:
        return False
    if type(payload) not in (dict, list):
        return False
    found = [0, 0]  # leaves that say something; empty containers
    # All zero, false, null or empty: none. One value alone in JSON's clothing: bare.
    # An empty result set beside a figure ({"rows": [], "elapsed_ms": 9}) is neither:
    # it is what a query found, compared as it is.
    return _bare_leaves(payload, found) and (not found[0] or (found[0] == 1 and not found[1]))


_SHAPE_FIELDS = frozenset({
    "schema", "columns", "column_names", "columnnames", "stats", "statistics", "query_stats",
    "querystats",
})
"""What a query's answer says of itself beside its rows: the columns it would have
(Defender's advanced hunting ``Schema``, a warehouse's ``columns``) and what running it
cost (``Stats``: execution time, resources). With no row, the query found nothing
(:func:`found_nothing`)."""


_HIT_COUNT = re.compile(r"(?i)total|hit|match|count|result|found|row|record|item")


def _counts_a_hit(stats: dict[Any, Any]) -> bool:
    """Whether a query's statistics count something found (``"total_matches": 1234``,
    ``"hits": 57``), at their top or one level down; not what the query cost
    (``"ExecutionTime": 6.4``, ``"resource_usage": {...}``, ``"table_row_count": 0``)."""
    return any(
        any(_hit_count(k, v) for k, v in value.items()) if type(value) is dict else _hit_count(key, value)
        for key, value in stats.items()
    )


def _hit_count(key: Any, value: Any) -> bool:
    """A non-zero number under a name of what was found (``"total_matches": 1234``)."""
    return type(key) is str and type(value) in (int, float) and bool(value) and _HIT_COUNT.search(key) is not None


_NOT_JSON = object()


def json_value(payload: Any) -> Any:
    """A structured answer as its JSON value: itself, or decoded from JSON text of at most
    1 KiB that opens like an object or an array; :data:`_NOT_JSON` for any other text (which
    the readings of structured answers below take as no structure). Readers that ask
    several of them decode once with it."""
    if type(payload) is not str:
        return payload
    if len(payload) > 1024 or payload[:1] not in ("{", "["):
        return _NOT_JSON
    try:
        return _json_decode(payload)
    except (msgspec.DecodeError, RecursionError, UnicodeEncodeError):
        return _NOT_JSON


_PAGE_STRINGS = 3
"""Short strings an empty page may hold in each object (its status, its query echoed)."""


def empty_page(payload: Any, depth: int = 0) -> bool:
    """Whether a structured answer (a JSON value, or JSON text) is a page with nothing on
    it: its lists all empty (at least one; objects nested at most two deep), its other
    values numbers, booleans or nulls and at most three short strings in each object
    (``{"people": [],
    "pagination": {"page": 7, "total_pages": 6}}``, ``{"code": 200, "msg": "success",
    "data": {"total": 1843, "pageNo": 20, "list": []}}``)."""
    if depth == 0:
        payload = json_value(payload)
        if payload is _NOT_JSON:
            return False
    return _empty_page(payload, 0) > 0


def _empty_page(value: Any, depth: int) -> int:
    """Empty lists found (-1: something on the page)."""
    kind = type(value)
    if kind is list:
        return 1 if not value else -1
    if kind is not dict or depth > 2 or len(value) > 12:
        return -1
    empties = strings = 0
    for item in value.values():
        kind = type(item)
        if kind is list or kind is dict:
            found = _empty_page(item, depth + 1)
            if found < 0:
                return -1
            empties += found
        elif kind is str:
            strings += 1
            if strings > _PAGE_STRINGS or len(item) > 64:
                return -1
        elif item is not None and kind is not int and kind is not float and kind is not bool:
            return -1
    return empties


def found_nothing(payload: Any, depth: int = 0, echoed: tuple[str, ...] = ()) -> bool:
    """Whether a search's structured answer (a JSON value, or JSON text) found nothing:
    an empty array or object, or an object whose containers are all empty (at least one:
    the results) and whose other fields are nulls, zeros or false and at most three
    strings under the names of an echoed query, a status, a time or the kind of answer
    (``query``, ``status``, ``message``, ``as_of``...: :data:`_NOTHING_TEXT_FIELDS`;
    Datadog's ``res_type``), empty strings under any name, the columns of an answer and the
    cost of its query (``"Schema": [...]``, ``"Stats": {...}``: :data:`_SHAPE_FIELDS`), the
    numbers a page states of
    itself (``"page": 1, "page_size": 10``: :data:`_PAGING_FIELDS`), of the window it
    searched (``"from_date"``, ``"to_date"``: :data:`_WINDOW_FIELDS`) and of a score's
    cut-off and the best score below it (``"threshold"``, ``"max_score_seen"``:
    :data:`_SCORE_FIELDS`), and what it says of
    its own request, its id and how long it took (``"request_id": "..."``,
    ``"response_time": 1.67``: :data:`_REQUEST_IDS`, :data:`_REQUEST_NUMBERS`), and, under
    any name, a string the search was given (``echoed``: the call's own argument values,
    ``{"supplier": "SNDSRC", "query": "HP220", "total": 0, "hits": []}`` for
    ``supplier="SNDSRC"``). A count, any other string (an id, a name, a cursor to the next
    page) or any non-empty container is a hit: a customer found with no open tickets found
    something."""
    payload = json_value(payload)
    if payload is _NOT_JSON:
        return False
    if type(payload) is list:
        return not payload
    if type(payload) is not dict or len(payload) > 8:
        return False
    if not payload:
        return True
    empties = strings = 0
    for key, value in payload.items():
        kind = type(value)
        if (kind is list or kind is dict) and type(key) is str and key.lower() in _SHAPE_FIELDS:
            if kind is dict and _counts_a_hit(value):
                return False  # {"stats": {"total_matches": 1234}, "results": []}: found, not shown
            continue  # the shape of the answer and the cost of the query, not a hit
        if kind is list:
            if value:
                return False
            empties += 1
        elif kind is dict:
            if value and (depth or not found_nothing(value, 1, echoed)):
                return False  # one level of wrapping ({"data": {"items": []}}) at most
            empties += 1
        elif kind is str:
            if type(key) is not str:
                return False
            if not value:
                continue  # an empty string says no more than a null
            name = key.lower()
            if name not in _NOTHING_TEXT_FIELDS and not name.endswith(("query", "_type")) and not (
                # (an echoed query under any name: `cqlQuery`, `searchQuery`), or the
                # request's own receipt (Tavily's `request_id`)
                name.replace("-", "_") in _REQUEST_IDS and len(value) <= 128
            ) and value not in echoed:
                return False
            strings += 1
        elif value is not None and value is not False and value != 0 and not (
            # where the empty page is, not what it found ({"page": 1, "page_size": 10,
            # "total_results": 0, "results": []}), and how long the request took
            type(key) is str and (
                (kind is int and key.lower() in _PAGING_FIELDS)
                or (kind in (int, float) and key.lower() in _ANSWER_NUMBERS)
            )
        ):
            return False
    return empties > 0 and strings <= 3


def named_back(payload: Any, given: tuple[str, ...]) -> tuple[str, ...]:
    """The strings of a structured answer (its top level and the objects in it) that its
    search was given (``given``), each once, sorted, but the query it echoes: where an
    empty answer says it looked (``{"store": "0315", "matches": []}``; the window and the
    filters it was given, ``"date": "2025-03-04"``, ``"status": "shipped"``, are part of
    where). Read only for an answer :func:`found_nothing` takes as nothing found with
    ``given``, an object of at most 8 fields."""
    payload = json_value(payload)
    named: list[str] = []
    if type(payload) is dict:
        for key, value in payload.items():
            inner = value.items() if type(value) is dict else ((key, value),)
            for name, item in inner:
                if (
                    type(item) is str and item in given and item not in named
                    and not _names_the_query(name)  # (the query echoed: no place)
                ):
                    named.append(item)
    return tuple(sorted(named))


_QUERY_FIELDS = frozenset({
    "q", "query", "search", "search_query", "searchquery", "term", "terms", "keyword",
    "keywords", "text", "input", "question",
})
"""The names under which a search's answer echoes what it looked for (:func:`named_back`)."""


def _names_the_query(key: Any) -> bool:
    """Whether a string field of a search's answer is named as its query echoed (any name
    that ends in ``query``: ``skuQuery``, ``cql_query``)."""
    if type(key) is not str:
        return False
    name = key.lower()
    return name in _QUERY_FIELDS or name.endswith("query")


def note_answer(state: Any, result: ResultView, gist: bool = False) -> None:
    """Remember ``result`` as its call's latest answer in ``state.answers``, for at most
    :data:`ANSWERS_KEPT` calls, least recently answered forgotten first.

    A value packs, lowest bits first: how often the answer changed (8 bits, capped at
    255), the last answer (32 bits), whether that answer was new (1 bit: unlike both
    answers before it, so a call whose answers alternate, a test failing one way, then
    the other, then the first again, is not news) and the low 16 bits of the answer
    before it. 57 bits in all: a snapshot stores it as one integer. Exact (``gist``
    false, as ``dominant-tool-call`` compares): the answer is the outcome, or, once it
    has changed, the answer without the time a runtime stamped on it when it was read
    (:func:`read_stamped`), and unknown and failed results are no evidence of a
    changing answer and are not noted. By
    :func:`answer_gist` (``alternating-tool-cycle``): digits taken out, and an empty
    answer or a failure is an answer too, so a page that stops coming back ends the change.
    By the gist, a poll's answer (:func:`poll_answer`: a status under way asked again
    after a pause, a value watched between deliberate waits) counts as new, and exactly
    it counts as a change: a poll waiting for a job is no loop; so does an answer back
    to the one before last when the user asked for something in new words since the
    call was last answered (``ResultView.asked``: a switch turned off again at the
    user's word).
    Shared by the result-aware loop detectors: a loop's claim is that its calls' answers
    do not change.
    """
    key = result.call_key
    if not key:
        return
    if gist:
        outcome = answer_gist(result)
    else:
        outcome = result.outcome & 0xFFFFFFFF
        if not outcome or result.failed:
            return
    answers = state.answers
    if answers is None:
        answers = state.answers = {}
    packed = answers.pop(key, None)
    if packed is None:
        if len(answers) >= ANSWERS_KEPT:
            del answers[next(iter(answers))]
        answers[key] = outcome << 8
        return
    last = packed >> 8 & 0xFFFFFFFF
    if not gist and outcome != last:
        # (exact) A changed answer that closes with the time it was read (read_stamped:
        # Claude Code's BashOutput) is compared without that stamp: a dead background job
        # read again and again is one answer. Read only where an answer changed; the
        # stamp is the runtime's, so the rest of the answer is compared as sent.
        unstamped = read_stamped(result)
        if unstamped:
            outcome = unstamped
    if last == outcome:
        if gist and poll_answer(result):
            # "processing" again, asked after a pause: the job is still running and the
            # agent waits for it, which is a poll's answer, as a moving one is.
            answers[key] = packed | _ANSWER_WAS_NEW
        elif not gist and poll_answer(result):
            # (exact, dominant-tool-call) the same, counted as a change: a certificate's
            # status read between waits until it is issued is polled, not replayed
            answers[key] = packed & ~0xFF | min((packed & 0xFF) + 1, 0xFF)
        else:
            answers[key] = packed & ~_ANSWER_WAS_NEW  # the same again: not news
        return
    new = _ANSWER_WAS_NEW if packed >> 41 != outcome & 0xFFFF else 0
    if not new and gist and (result.asked or poll_answer(result)):
        # Back to the answer before last, after the user asked for something in new
        # words (a switch turned on, off and on again, each time at the user's word:
        # the user's request, not the agent's flip-flop), or asked after a pause while
        # the work is under way (a background run's output, "running", its latest lines
        # alike once their digits are out): a poll's answer, new as any poll's is.
        new = _ANSWER_WAS_NEW
    answers[key] = (last & 0xFFFF) << 41 | new | outcome << 8 | min((packed & 0xFF) + 1, 0xFF)


def answer_keeps_changing(state: Any, key: int) -> bool:
    """Whether the answer of the call ``key`` changed :data:`CHANGES_FOR_PAGING` times."""
    answers = state.answers
    if not answers:
        return False
    packed = answers.get(key)
    return packed is not None and packed & 0xFF >= CHANGES_FOR_PAGING


def answer_just_changed(state: Any, key: int) -> bool:
    """Whether the latest answer of the call ``key`` was new: unlike the two before it."""
    answers = state.answers
    if not answers:
        return False
    packed = answers.get(key)
    return packed is not None and bool(packed & _ANSWER_WAS_NEW)


def push_own_ring(state: Any, key: int, size: int) -> list[int]:
    """Append ``key`` to ``state.ring``, the signal's own recent call keys (created on
    demand, at most ``size``), and return it.

    A signal that exempts tools keeps this ring instead of reading the shared
    history, which also holds the exempt calls.
    """
    ring = state.ring
    if ring is None:
        ring = state.ring = []
    ring.append(key)
    if len(ring) > size:
        del ring[0]
    return ring


NAME_LIMIT = 64
"""Bytes kept of a tool name in a streak's state (real tool names are far shorter)."""


def streak_tools(tools: tuple[str, ...], tool: str, most: int) -> tuple[str, ...]:
    """``tools``, the distinct tool names of a streak (for its alert text), with ``tool``
    added: cut to :data:`NAME_LIMIT` bytes, interned (one copy across the fleet), at
    most ``most`` of them."""
    # len(tool) * 4 bounds the UTF-8 size, so a short name skips the encode.
    name = tool if len(tool) * 4 <= NAME_LIMIT else truncate_middle(tool, NAME_LIMIT)
    if name in tools or len(tools) >= most:
        return tools
    return (*tools, intern(name))


def tool_list_text(tools: Any) -> str:
    """Tool names for an alert text: ``unnamed tool`` for blanks, ``unknown tools`` for none."""
    if not tools:
        return "unknown tools"
    return ", ".join(name or "unnamed tool" for name in tools)


def overrides(signal: Signal | type[Signal], hook: str) -> bool:
    """Whether ``signal`` implements ``hook`` itself (the watchdog skips the rest)."""
    cls = signal if isinstance(signal, type) else type(signal)
    return getattr(cls, hook) is not getattr(Signal, hook)


def previews(signal: Signal | type[Signal]) -> bool:
    """Whether ``signal`` answers :meth:`Signal.would_trip` (others always say no)."""
    return overrides(signal, "would_trip") or overrides(signal, "preview_state")


def alert_ids(cls: type[Signal]) -> tuple[str, ...]:
    """The alert ids ``cls``'s findings carry: its ``alert_ids``, else its ``id``."""
    return cls.alert_ids or (cls.id,)
