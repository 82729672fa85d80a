"""The engine: every session's watchdog state, in one pure object.

The engine is what the Kafka processor and ``streamguard replay`` drive. It
keeps one :class:`~streamguard.watchdog.SessionState` per session (an actor's
state: the processor guarantees ordered, one-at-a-time processing per
partition), resolves each session's policy from its ``agent`` once, drops
replayed events by ``seq``, and snapshots/restores sessions as bytes.
"""

from __future__ import annotations

from sys import intern
from typing import Any

from msgspec import Struct

from .events import AgentEvent, Output, Reset, ToolCall
from .policy import Policy, PolicySet
from .watchdog import SessionState, Watchdog

_AGENT_MEMO_MAX = 4096
# Largest forward step of a session's ``seq`` that moves its replay mark. A
# bigger one is applied but leaves the mark where it was: one forged
# ``seq = 2**53`` would otherwise make every later real event look like a
# replay, blinding the session for good.
MAX_SEQ_JUMP = 1_000_000


class EngineStats(Struct, kw_only=True):
    events: int = 0
    replays_skipped: int = 0
    seq_jumps: int = 0
    controls: int = 0
    sessions_created: int = 0
    sessions_evicted: int = 0
    sessions_restored: int = 0


class Engine:
    """All sessions of one processor (or one replay), under one policy set."""

    def __init__(
        self, policy: Policy | PolicySet | None = None, *, max_seq_jump: int = MAX_SEQ_JUMP
    ) -> None:
        self.max_seq_jump = max_seq_jump
        if policy is None:
            policy = PolicySet()
        elif isinstance(policy, Policy):
            policy_set = PolicySet()
            policy_set.base = policy
            policy = policy_set
        self.policies = policy
        self._watchdogs: dict[int, Watchdog] = {}
        # Memo of watchdog_for: the policy set is fixed for the engine's life.
        self._by_agent: dict[str | None, Watchdog] = {}
        self.sessions: dict[str, SessionState] = {}
        self.stats = EngineStats()
        self._single: Watchdog | None = (
            None if self.policies.overrides else self.watchdog_for(None)
        )

    # ----------------------------------------------------------- policy lookup

    def watchdog_for(self, agent: str | None) -> Watchdog:
        """The watchdog of the policy that applies to ``agent`` (built once per override)."""
        watchdog = self._by_agent.get(agent)
        if watchdog is not None:
            return watchdog
        index = self.policies.matching(agent)
        watchdog = self._watchdogs.get(index)
        if watchdog is None:
            watchdog = Watchdog(self.policies.for_index(index))
            self._watchdogs[index] = watchdog
        if len(self._by_agent) < _AGENT_MEMO_MAX:  # bounded: agent names come from the stream
            self._by_agent[agent] = watchdog
        return watchdog

    def _session(
        self, session: str, agent: str | None, ts: float | None = None
    ) -> tuple[SessionState, Watchdog]:
        state = self.sessions.get(session)
        if state is None:
            watchdog = self.watchdog_for(agent)
            state = watchdog.new_state(session, agent)
            # The state's first record's time, event or control alike (SessionState.born)
            state.born = ts
            self.sessions[session] = state
            self.stats.sessions_created += 1
            return state, watchdog
        if state.agent is None and agent is not None:
            # The first event named no agent; the policy follows the first name seen,
            # and only while nothing but defaults could have applied yet.
            watchdog = self.watchdog_for(agent)
            if watchdog is self.watchdog_for(None):
                state.agent = intern(agent) if type(agent) is str else agent
        return state, self.watchdog_for(state.agent)

    # ---------------------------------------------------------------- process

    def process(self, event: AgentEvent, record_ts: float | None = None) -> list[Output]:
        """Apply one agent event; return its outputs (an empty list, usually).

        The list is the caller's to read, not to change: when there is no output it is one
        shared empty list (the common case allocates nothing), so copy it before adding to
        it (``outputs = list(engine.process(event))``)."""
        state = self.sessions.get(event.session)
        single = self._single
        if state is not None and single is not None:
            watchdog = single  # no [[agents]] overrides: one watchdog for every session
            if state.agent is None and event.agent is not None:
                # named after its first event: one policy for all, so taken as it comes
                state.agent = intern(event.agent)
        elif state is not None and (state.agent is not None or event.agent is None):
            # Hot path: a known session whose policy is settled (see _session).
            watchdog = self._by_agent.get(state.agent) or self.watchdog_for(state.agent)
        else:
            state, watchdog = self._session(
                event.session, event.agent, event.ts if event.ts is not None else record_ts
            )
        if state.tenant is None and event.tenant is not None:
            # A session's tenant is the first one its events name, whichever path it came by.
            state.tenant = intern(event.tenant)
        seq = event.seq
        if seq is not None:
            last = state.last_seq
            if seq <= last:
                self.stats.replays_skipped += 1
                return []
            # A counter starts near 0: the first seq is held to the same bound, so a
            # forged first event cannot set the mark out of reach either.
            if seq - (last if last > 0 else 0) <= self.max_seq_jump:
                state.last_seq = seq
            else:
                self.stats.seq_jumps += 1  # applied, the mark kept (see MAX_SEQ_JUMP)
        self.stats.events += 1
        ts = event.ts if event.ts is not None else record_ts
        return watchdog.process(state, event, ts)

    def control(self, event: Reset, record_ts: float | None = None) -> list[Output]:
        """Apply an operator control event (trusted sources only)."""
        ts = event.ts if event.ts is not None else record_ts
        state, watchdog = self._session(event.session, None, ts)
        self.stats.controls += 1
        return watchdog.reset(state, event, ts)

    def fleet_halt(
        self, session: str, scope: str, generation: int, reason: str, ts: float | None = None
    ) -> list[Output]:
        """Halt a held session because its scope's fleet circuit is open (none: not held)."""
        state = self.sessions.get(session)
        if state is None:
            return []
        return self.watchdog_for(state.agent).fleet_halt(state, scope, generation, reason, ts)

    def fleet_release(
        self, session: str, scope: str, generation: int, reason: str, ts: float | None = None
    ) -> list[Output]:
        """Lift the fleet halt of a held session: its scope's circuit closed."""
        state = self.sessions.get(session)
        if state is None:
            return []
        return self.watchdog_for(state.agent).fleet_release(state, scope, generation, reason, ts)

    def fleet_handover(self, session: str, scope: str, to_scope: str, reason: str) -> bool:
        """Keep a held session's fleet halt under another open circuit that covers it
        (``scope``'s closed); False when the session holds no halt of ``scope``."""
        state = self.sessions.get(session)
        if state is None:
            return False
        return self.watchdog_for(state.agent).fleet_handover(state, scope, to_scope, reason)

    def would_trip(self, event: ToolCall) -> list[str]:
        """Preview: which preview-capable signals this call would trip. Mutates nothing."""
        state = self.sessions.get(event.session)
        watchdog = self.watchdog_for(state.agent if state else event.agent)
        if state is None:
            state = watchdog.new_state(event.session, event.agent)
        return watchdog.would_trip(state, event)

    # ------------------------------------------------------------ persistence

    def snapshot(self, session: str) -> bytes | None:
        state = self.sessions.get(session)
        if state is None:
            return None
        return self.watchdog_for(state.agent).encode_state(state)

    def restore(self, session: str, data: bytes) -> SessionState:
        """Install a session from snapshot bytes (replacing any state it had)."""
        probe = Watchdog.peek_agent(data)
        watchdog = self.watchdog_for(probe)
        state = watchdog.decode_state(data)
        if state.session != session:
            raise ValueError(f"snapshot is of session {state.session!r}, not {session!r}")
        self.sessions[session] = state
        self.stats.sessions_restored += 1
        return state

    def evict(self, session: str) -> None:
        if self.sessions.pop(session, None) is not None:
            self.stats.sessions_evicted += 1

    def is_halted(self, session: str) -> bool:
        state = self.sessions.get(session)
        return bool(state and state.halted_by)

    def state(self, session: str) -> SessionState | None:
        return self.sessions.get(session)

    def describe(self, session: str) -> dict[str, Any] | None:
        state = self.sessions.get(session)
        if state is None:
            return None
        return {
            "session": state.session,
            "agent": state.agent,
            "halted_by": list(state.halted_by),
            "halt_signal": state.halt_signal,
            "halt_reason": state.halt_reason,
            "halted_at": state.halted_at,
            "cut_streak": state.cut_streak,
            "queued_feedback": [signal for signal, _ in state.feedback],
            "last_seq": state.last_seq,
            "tenant": state.tenant,
            "spend_usd": state.spend_usd,
            "fleet_scope": state.fleet_scope,
        }
