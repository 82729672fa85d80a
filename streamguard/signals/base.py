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
watchdog, the policy loader and the snapshot format need no change.
"""

from __future__ import annotations

from typing import Any, ClassVar

from msgspec import Struct

from ..canonical import CanonicalArgs, stable_hash
from ..events import FinalAnswer, Scope, Severity, Text, ToolCall, Usage
from .facts import CallFacts, CommandRunners, is_code_tool, plain_facts, runner_facts

_default_runners = CommandRunners()


class SignalConfig(Struct, kw_only=True, forbid_unknown_fields=True):
    """Options every signal's policy table accepts.

    ``enabled``: ``None`` keeps the signal's default (most are on; opt-in
    guardrails are off). ``exempt_tools``: calls and results of these tools are
    invisible to this signal.
    """

    enabled: bool | None = None
    exempt_tools: list[str] = []


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

    ``runner``, ``action``, ``write`` and ``search`` are the shared call facts
    of :mod:`streamguard.signals.facts`: whether the tool is a command runner,
    what the call does (the program and sub-command for a runner, empty when
    that cannot be read; the tool name otherwise), and whether it changes
    something or looks something up. The watchdog computes them once per call
    from the policy; a view built without them (a signal tested alone) derives
    them with the default command-runner list.
    """

    __slots__ = (
        "action", "args", "call_id", "canonical", "event", "history", "key", "kind", "runner",
        "search", "tool", "write",
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
        self.args = event.args
        self.call_id = event.call_id
        self.canonical = canonical
        self.key = key
        self.history = history
        self.kind = kind  # the event's kind, else the policy's tool-name pattern, else None
        if facts is None:
            runner = _default_runners(event.tool)
            if runner:
                facts = runner_facts(event.args, is_code_tool(event.tool))
            else:
                facts = plain_facts(event.tool, kind)
            if kind == "write":
                facts.write = True
        self.runner = bool(runner)
        self.action = facts.action
        self.write = facts.write
        self.search = facts.search


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
    of the error text of a failure, a constant for a no-op; ``0`` when unknown.
    """

    __slots__ = (
        "action", "call_flags", "call_id", "call_key", "error", "event", "failed", "fingerprint",
        "no_op", "outcome", "size", "tool",
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


NO_OP_OUTCOME = 0x6E6F2D6F70  # any fixed non-zero value: every no-op says the same thing


def outcome_of(event: Any, failed: bool, fingerprint: int) -> int:
    """The ``outcome`` of a result (see :class:`ResultView`)."""
    if failed:
        return stable_hash("\0error", event.error)
    if event.no_op:
        return NO_OP_OUTCOME
    return fingerprint


class Signal:
    """Base class of every detector. Subclasses override the hooks they need."""

    id: ClassVar[str]
    severity: ClassVar[Severity]
    scope: ClassVar[Scope] = "session"
    guardrail: ClassVar[str] = "watchdog"
    default_enabled: ClassVar[bool] = True
    State: ClassVar[type[Struct]]
    Config: ClassVar[type[SignalConfig]] = SignalConfig
    defers_to: ClassVar[tuple[str, ...]] = ()
    """Signal ids whose *active latch* silences this signal (one behaviour, one alert)."""
    withdrawn_by_text: ClassVar[bool] = False
    """A queued feedback note from this signal is dropped if the agent speaks first."""
    needs_pairing: ClassVar[bool] = False
    """The signal reads ``ResultView.call_key``/``call_flags``/``action``: the watchdog
    keeps the session's pending calls only when some active signal does."""
    policy_table: ClassVar[str | None] = None
    """A guardrail with a top-level policy table of its own (``[cost_ceiling]``) names it;
    other signals are configured under ``[signals.<id>]``."""

    def __init__(self, config: SignalConfig | None = None) -> None:
        self.config = config if config is not None else self.Config()
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

    def on_turn_start(self, state: Any) -> Finding | None:  # pragma: no cover
        """A real turn boundary (a turn refused because the session is halted is not one)."""
        return None

    def on_turn_end(self, state: Any) -> Finding | None:  # pragma: no cover
        return None

    def on_usage(self, state: Any, event: Usage) -> Finding | None:  # pragma: no cover
        return None

    def on_final_answer(self, state: Any, event: FinalAnswer) -> Finding | None:  # pragma: no cover
        return None

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


def tool_list_text(tools: Any) -> str:
    """Tool names for an alert text: ``unnamed tool`` for blanks, ``unknown tools`` for none."""
    if not tools:
        return "unknown tools"
    return ", ".join(name or "unnamed tool" for name in tools)


def overrides(signal: Signal, hook: str) -> bool:
    """Whether ``signal`` implements ``hook`` itself (the watchdog skips the rest)."""
    return getattr(type(signal), hook) is not getattr(Signal, hook)
