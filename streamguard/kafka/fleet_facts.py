"""The session stage's side of fleet guardrails: publishing fleet facts.

One :class:`FactPublisher` per processor. It owns the sessions whose spend
has changed since their last fact (``pending``) and the cache of scopes per
(agent, tenant). Facts go out through the processor's outbox, to the fleet
facts topic, keyed by scope, so they are covered by the checkpoint like every
output (acknowledged before the snapshot that says they were published).

Cost on the hot path: a usage event costs one dict store (``pending``). Spend
is published once per session per checkpoint (``flush``, called when a
checkpoint is staged: every ``--checkpoint-interval-ms`` or
``--checkpoint-every-events``), as the session's cumulative spend plus the
spend since its previous fact, the facts of one scope together in one record. A session's start, trip and halt are published
at once, with its spend up to that event, since they are rare and a share of
tripped sessions should not wait. Facts carry the session's applied-record
count as ``index``: the fleet stage drops any fact not above the last one it
has of that session (``streamguard/fleet_windows.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..engine import Engine
from ..events import GuardrailTrip, Output
from ..fleet_windows import (
    FLEET_GUARDRAIL,
    HALTED,
    STARTED,
    TRIPPED,
    Fact,
    FleetRule,
    encode_facts,
    parse_scope,
    scopes_for,
)
from ..watchdog import SessionState
from .metrics import Metrics
from .outbox import OutputRecord

_SCOPES_CACHE_MAX = 4096
# Facts of one scope per record at a flush: about 60 bytes each, so a record stays
# far below --max-output-bytes.
FACTS_PER_RECORD = 1024


class FactPublisher:
    """Fleet facts of the sessions held here (see the module docstring)."""

    def __init__(
        self,
        rules: list[FleetRule],
        topic: str,
        metrics: Metrics,
        queue: Callable[[OutputRecord], None],
    ) -> None:
        self.rules = rules
        self.topic = topic
        self.metrics = metrics
        self._queue = queue
        # session -> event time of its latest usage event not yet published
        self.pending: dict[str, float] = {}
        self._scopes: dict[tuple[str | None, str | None], tuple[str, ...]] = {}
        self._counters: dict[str, Any] = {}

    def scopes(self, state: SessionState) -> tuple[str, ...]:
        """The scopes of a session (cached per agent and tenant: few of them, many sessions)."""
        return self.scopes_of(state.agent, state.tenant)

    def scopes_of(self, agent: str | None, tenant: str | None) -> tuple[str, ...]:
        """The scopes of the sessions of one origin (agent and tenant)."""
        key = (agent, tenant)
        scopes = self._scopes.get(key)
        if scopes is None:
            scopes = scopes_for(self.rules, agent, tenant)
            if len(self._scopes) >= _SCOPES_CACHE_MAX:  # bounded: names come from the stream
                self._scopes.clear()
            self._scopes[key] = scopes
        return scopes

    # ----------------------------------------------------------- what happened

    def after_event(
        self, state: SessionState, outputs: list[Output], ts: float, started: bool
    ) -> None:
        """A session's start and trips, published at once (its pending spend with them)."""
        flags = STARTED if started else 0
        for output in outputs:
            if isinstance(output, GuardrailTrip) and output.guardrail != FLEET_GUARDRAIL:
                flags |= TRIPPED
                if output.session_halted:
                    flags |= HALTED
        if flags:
            self.publish(state, ts, flags)

    def flush(self, engine: Engine, changed: Callable[[str], None]) -> int:
        """Publish the spend of every session with usage since its last fact.

        The facts of one scope go out together, :data:`FACTS_PER_RECORD` to a
        record: a record costs the producer, the broker and the fleet stage's
        consumer far more than a fact inside it.
        """
        pending, self.pending = self.pending, {}
        sessions = engine.sessions
        published = 0
        by_scope: dict[str, list[Fact]] = {}
        for session, ts in pending.items():
            state = sessions.get(session)
            if state is None:
                continue  # evicted meanwhile
            if not self.scopes(state):
                continue  # in no rule's scope: nothing to publish, nothing changed
            if state.spend_usd != state.fleet_usd or state.spend_tokens != state.fleet_tokens:
                for fact in self._facts(state, ts, 0):
                    by_scope.setdefault(fact.scope, []).append(fact)
                changed(session)
                published += 1
        for scope, facts in by_scope.items():
            for start in range(0, len(facts), FACTS_PER_RECORD):
                self._send(scope, facts[start : start + FACTS_PER_RECORD])
        return published

    def forget(self, sessions: list[str] | set[str]) -> None:
        for session in sessions:
            self.pending.pop(session, None)

    # ------------------------------------------------------------- publishing

    def publish(self, state: SessionState, ts: float, flags: int) -> None:
        """A fact per scope of the session, sent now; marks its spend as published."""
        self.pending.pop(state.session, None)
        for fact in self._facts(state, ts, flags):
            self._send(fact.scope, [fact])

    def _facts(self, state: SessionState, ts: float, flags: int) -> list[Fact]:
        scopes = self.scopes(state)
        if not scopes:
            return []
        usd = max(0.0, state.spend_usd - state.fleet_usd)
        tokens = max(0, state.spend_tokens - state.fleet_tokens)
        state.fleet_usd = state.spend_usd
        state.fleet_tokens = state.spend_tokens
        return [
            Fact(
                kind="session",
                scope=scope,
                session=state.session,
                index=state.applied,
                ts=max(0.0, ts),
                flags=flags,
                cum_usd=state.spend_usd,
                cum_tokens=state.spend_tokens,
                usd=usd,
                tokens=tokens,
                born=max(0.0, state.born or 0.0),
            )
            for scope in scopes
        ]

    def close(self, scope: str, by: str | None, ts: float) -> None:
        """Forward an operator's close of a circuit to the fleet stage owning the scope."""
        self._send(scope, [Fact(kind="close", scope=scope, ts=max(0.0, ts), by=by)])

    def _send(self, scope: str, facts: list[Fact]) -> None:
        self._queue(OutputRecord(self.topic, scope.encode(), encode_facts(facts), None, [], None))
        self._count(scope, len(facts))

    def _count(self, scope: str, n: int) -> None:
        counter = self._counters.get(scope)
        if counter is None:
            parsed = parse_scope(scope)
            rule, value = (parsed[0], parsed[2]) if parsed else ("?", "?")
            counter = self.metrics.fleet_facts.labels(rule, self.metrics.scope_label(value))
            if len(self._counters) < _SCOPES_CACHE_MAX:
                self._counters[scope] = counter
        counter.inc(n)
