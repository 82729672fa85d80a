"""``write-cycle``: the agent's writes go round, each one a change it already made.

What it catches
    The loop the argument-keyed detectors miss because the calls between the writes
    read something that moves: an agent that flips a setting back and forth, or goes
    round two or three variants of one change, checking after each. A trading agent
    buying and selling the same 50 shares on every tick of the quote, an exploit's
    offset edited from 40 to 44 and back between runs that crash the same way, one
    bank transaction re-categorised Meals, Entertainment, Uncategorized and Meals again
    while a rules check fails the same way. Each write is one the session already made
    (the same tool with equivalent arguments: the same call key), so after it the world
    is in a state the agent has already had, and what the next check says it has
    already heard. The quotes, the process ids and the sync tokens in between move, so
    the cycle and dominance detectors read the laps as polling, and no single call
    repeats back to back.

    The signal remembers the keys of the session's last ``memory`` distinct calls (not
    waits, not questions to the user, not a multi-agent handoff). A named write
    (``CallView.write``; not a command runner's, whose "write" is a generous guess that
    counts a build or a test run) whose key is among them, and is not the call just
    before it (the same write twice in a row is the repeat detector's), is a
    *re-application*. Any call not among them ends the run: an edit never made before is
    work (edit → test → fail → edit converges), and so is a read of something not read
    before (the next record of a sweep opened, a new job's status), so work that goes
    over new items with the same few writes for each is no cycle. A read that differs
    from one made before only in the points in time it names (a metric queried over a
    window that moves with the clock, ``from=1767450378``) is the same read again. A new turn, or the same
    request repeated by a scheduler (``on_repeated_prompt``), ends it too: a user who asks
    for the light on, then off, then on again is served, not looped on.

Threshold
    ``threshold`` (4, at least 3) re-applications in a row, of at least two different
    writes, and the run back at a write it had already re-applied. Going back once to
    compare (a flag turned off to see whether it was the cause, then on again) is two; a
    back-and-forth of two writes trips at its sixth write (``buy, sell, buy, sell, buy,
    sell``), a round of three at its seventh, and a second pass over a longer sequence (a
    patrol's second lap, each waypoint re-sent once) not at all until it comes round again.
    One write re-applied after each check, alone (``restart`` after every status read), is
    not a cycle of writes: it is left to the failure and stall detectors.

Severity
    Critical, session scope: four times in a row the agent put the world back into a
    state it had already put it in, with no change it had not tried and nothing new read;
    another lap can only repeat what the last ones showed. Under enforce it halts the
    session.

False positives
    Work that goes round by design: a grid-trading bot re-placing the same limit orders as
    they fill, a pick-and-place robot moving between the same two poses for every item of
    a conveyor with nothing else read, an A/B benchmark interleaved over three rounds or
    more (the same two settings, the same benchmark run after each). Exempt those tools for
    such agents (``exempt_tools``) or switch the signal off in their policy.

The signal keeps the keys of the last ``memory`` distinct calls (32-bit, most recent
last), the count of re-applications in a row and the distinct writes among them (at most
``memory``), and their tool names for the alert text (at most ``threshold``).
"""

from __future__ import annotations

import re
import zlib
from typing import Annotated, Any

from msgspec import Meta, Struct
from msgspec.structs import replace

from .base import TIMESTAMP, CallView, Finding, Signal, SignalConfig, streak_tools, tool_list_text

SIGNAL_ID = "write-cycle"
_HANDOFF = re.compile(r"(?i)^(?:transfer|handoff|hand_off|delegate)_(?:back_)?to_")
"""A multi-agent runtime's handoff by its name (``transfer_to_refund_agent``,
``transfer_back_to_supervisor``, OpenAI's and AutoGen's ``transfer_to_<agent>``,
``handoff_to_analyst``): control passed between agents, no change to the world, whatever
its verb; only with no arguments but what is said to the next agent
(:data:`_HANDOFF_ARGS`), and never a call the runtime says is a write: a
``transfer_to_savings(amount=...)`` moves money."""
_HANDOFF_ARGS = frozenset({
    "reason", "message", "context", "summary", "task", "instructions", "input", "request",
    "note", "query", "handoff_message", "assignment",
})
MEMORY_LIMIT = 64


_TIMELESS_READ = 1024
"""Characters of a call's canonical arguments searched for the points in time it names."""


def _timeless_key(call: CallView, key: int) -> int:
    """A read's key without the points in time its arguments name (``query_metrics(...,
    from=1767450378, to=1767450978)``, the same metric over a window that moves with the
    clock): the same read asked again, not something new read. ``key`` when it names none."""
    raw = call.canonical.raw
    text = raw if raw is not None else call.canonical.text.encode("utf-8", "surrogatepass")
    head = text[:_TIMELESS_READ]
    if TIMESTAMP.search(head) is None:
        return key
    return zlib.crc32(TIMESTAMP.sub(b"#", head), zlib.crc32(call.tool.encode("utf-8", "surrogatepass"))) or 1


class WriteCycleConfig(SignalConfig, kw_only=True, forbid_unknown_fields=True):
    """Policy table of ``write-cycle``."""

    threshold: Annotated[int, Meta(ge=3, le=16)] = 4
    """Re-applied writes in a row (of at least two different ones, back at one already
    re-applied: at least 3) that trip the signal."""
    memory: Annotated[int, Meta(ge=2, le=MEMORY_LIMIT)] = 16
    """Distinct recent calls remembered: a write among them made again is a
    re-application, a call not among them ends the run."""


class WriteCycleState(Struct, tag=SIGNAL_ID, gc=False, omit_defaults=True):
    """Per-session state of ``write-cycle``."""

    seen: list[int] = []
    """Keys (32 bits) of the last ``memory`` distinct calls, least recent first."""
    run: int = 0
    """Re-applications in a row since the last new write."""
    cycled: list[int] = []
    """The distinct writes re-applied in the run (at most ``memory``)."""
    tools: tuple[str, ...] = ()
    """Their tool names, for the alert text."""
    returned: bool = False
    """Whether the run came back to a write it had already re-applied."""
    latched: bool = False


class WriteCycle(Signal):
    """Session-scoped critical after ``threshold`` re-applied writes in a row."""

    id = SIGNAL_ID
    severity = "critical"
    scope = "session"
    State = WriteCycleState
    Config = WriteCycleConfig
    # A cycle the argument-keyed detectors already hold (the writes and the checks between
    # them answered alike) is theirs to report.
    defers_to = ("repeated-tool-call", "alternating-tool-cycle", "dominant-tool-call",
                 "setup-detour", "failure-loop", "long-loop")

    config: WriteCycleConfig

    def __init__(self, config: SignalConfig | None = None) -> None:
        super().__init__(config)
        self.threshold = self.config.threshold
        self.memory = self.config.memory

    def is_latched(self, state: Any) -> bool:
        return state.latched

    def preview_state(self, state: Any) -> Struct:
        return replace(state, seen=list(state.seen), cycled=list(state.cycled), latched=False)

    def on_turn_start(self, state: Any) -> Finding | None:
        # The user spoke: what the agent does next answers them (a light turned on, then
        # off, then on again, each asked for).
        self._end_run(state)
        return None

    def on_repeated_prompt(self, state: Any) -> None:
        self._end_run(state)

    @staticmethod
    def _end_run(state: Any) -> None:
        if state.run or state.latched:
            state.run = 0
            state.cycled = []
            state.tools = ()
            state.returned = state.latched = False

    def on_call(self, state: Any, call: CallView) -> Finding | None:
        if call.wait or call.ask or (
            _HANDOFF.match(call.tool) is not None and call.kind != "write"
            and (type(call.args) is not dict or _HANDOFF_ARGS.issuperset(call.args))
        ):
            return None
        if self.exempt and call.tool in self.exempt:
            return None
        key = call.key & 0xFFFFFFFF
        seen = state.seen
        if seen and seen[-1] == key:
            return None  # the same call again at once: the repeat detector's
        known = key in seen
        if not known and state.run and not call.write:
            # (only while a run is under way: a new read outside one ends nothing, and the
            # search costs a scan of the arguments)
            key = _timeless_key(call, key)
            known = key in seen
        if not known:
            # Something not done or read before: the agent tries or learns something new.
            seen.append(key)
            if len(seen) > self.memory:
                del seen[0]
            self._end_run(state)
            return None
        seen.remove(key)
        seen.append(key)
        if not call.write or call.runner:
            return None
        state.run += 1
        cycled = state.cycled
        if key in cycled:
            # back to a write already made again in this run: going round, not a second
            # pass over the same steps (a patrol's second lap)
            state.returned = True
        elif len(cycled) < self.memory:
            cycled.append(key)
            state.tools = streak_tools(state.tools, call.tool, self.threshold)
        if state.latched or state.run < self.threshold or len(cycled) < 2 or not state.returned:
            return None
        state.latched = True
        return self._finding(state)

    def _finding(self, state: Any) -> Finding:
        count = state.run
        names = tool_list_text(state.tools)
        return Finding(
            signal=self.id,
            severity=self.severity,
            scope=self.scope,
            reason=(
                f"The agent's last {count} writes ({names}) each re-applied a change it had "
                f"already made in this session, going round {len(state.cycled)} of them with "
                "no new change between: it keeps putting things back into states it has "
                "already tried. If this agent cycles writes by design (a grid of orders, a "
                "pick-and-place robot), exempt those tools in the policy."
            ),
            guidance=(
                f"Your last {count} changes ({names}) each repeated one you had already made: "
                "you are switching between the same few states and the checks between them "
                "tell you nothing new. Stop flipping. Work out why none of these states is "
                "right, try a change you have not made, or tell the user what blocks you."
            ),
            detail={
                "count": count,
                "threshold": self.threshold,
                "distinct_writes": len(state.cycled),
                "tools": [name or "unnamed tool" for name in state.tools],
            },
        )
