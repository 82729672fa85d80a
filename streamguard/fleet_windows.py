"""Fleet guardrails' arithmetic: scopes, rolling windows, limits, circuits, de-duplication.

Pure and deterministic, like the rest of the core: no I/O, no clock (the
shell passes ``now``). ``docs/fleet.md`` is the reference; this module is what
it describes.

* A **rule** (``[[fleet]]`` in the policy) groups sessions into **scopes**: one
  scope per agent name (``by = "agent"``) or per tenant (``by = "tenant"``),
  among the sessions whose agent matches the rule's glob. A scope is named
  ``rule:by=value``.
* The per-session stage describes what its sessions do as **facts**, one per
  session and scope at a time, keyed by scope: the session's cumulative spend
  (and the spend since its previous fact), and whether it started, tripped or
  halted with the event that caused the fact. ``index`` is the session's count
  of applied records at the fact, the same after any replay.
* The fleet stage folds facts into a :class:`ScopeState` per scope: buckets of
  a rolling event-time window, a mark per session, the limits' latches and
  the scope's **circuit**.

De-duplication. Facts of one session reach a scope in the order they were
made, and a replay after a crash makes the same ``index`` again. A fact whose
``index`` is not above the session's mark is a duplicate and changes nothing.
Spend is taken as the rise of the cumulative spend over the mark, so it never
depends on how the per-session stage batched it: any subsequence of a
session's facts, duplicated, adds up to the cumulative spend of the last one.
Only a session whose mark was forgotten (idle for two windows, or pushed out
by :data:`MAX_SESSIONS`) is counted by the fact's own delta.

Limits are edge-triggered: a limit fires when its value goes above the
bound, and again only after the value has been at or below it. A firing
``halt`` limit opens the circuit (if closed); the circuit closes when an
operator closes it or, with ``cooldown_s``, when the cool-down has passed on
the stage's processing clock. Closing starts the scope's windows afresh (the
session marks stay, so a replay is still not counted).
"""

from __future__ import annotations

import fnmatch
import math
from hashlib import blake2b
from typing import Annotated, Literal

import msgspec
from msgspec import Meta, Struct

from .events import MAX_NAME_CHARS, MAX_SEQ, MAX_TS, FleetAlert

ByField = Literal["agent", "tenant"]
MetricName = Literal[
    "spend_usd", "tokens", "sessions_started", "sessions_tripped", "tripped_share", "sessions_halted"
]
Action = Literal["alert", "halt"]
METRICS: tuple[str, ...] = (
    "spend_usd", "tokens", "sessions_started", "sessions_tripped", "tripped_share", "sessions_halted"
)

BUCKETS = 60  # a window is 60 buckets: a one-hour window moves by the minute
MAX_SESSIONS = 8_000  # session marks kept per scope (its snapshot stays well under 1 MiB)
MAX_SCOPE_CHARS = 64 + 8 + MAX_NAME_CHARS  # rule name, ":tenant=", value
MAX_FACT_USD = 1e12  # a session's cumulative spend (10**6 per call, at most 2**40 calls... bounded)
FLEET_GUARDRAIL: Literal["fleet"] = "fleet"
FLEET_SIGNAL = "fleet-circuit"

RuleName = Annotated[str, Meta(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]


class FleetLimit(Struct, kw_only=True, forbid_unknown_fields=True):
    """One bound of a rule: ``metric`` above ``above`` in the window does ``action``."""

    metric: MetricName
    above: Annotated[float, Meta(ge=0)]
    action: Action = "alert"
    min_sessions: Annotated[int, Meta(ge=1, le=1_000_000)] = 10  # tripped_share: sessions started first

    @property
    def key(self) -> str:
        return f"{self.metric}>{self.above:g}:{self.action}"


class FleetRule(Struct, kw_only=True, forbid_unknown_fields=True):
    """A ``[[fleet]]`` table of the policy."""

    name: RuleName
    by: ByField = "agent"
    match: Annotated[str, Meta(min_length=1, max_length=MAX_NAME_CHARS)] = "*"
    window_s: Annotated[float, Meta(ge=60, le=7 * 86400)] = 3600.0
    cooldown_s: Annotated[float, Meta(ge=0, le=30 * 86400)] = 0.0  # 0: until an operator closes it
    limits: list[FleetLimit]

    def validate(self) -> None:
        """Cross-field checks; raises ValueError naming the field."""
        if not self.limits:
            raise ValueError("`limits` must name at least one limit ([[fleet.limits]])")
        seen: set[str] = set()
        for i, limit in enumerate(self.limits):
            if limit.metric == "tripped_share" and limit.above >= 1:
                raise ValueError(f"`limits[{i}].above`: a share is below 1 (got {limit.above:g})")
            if limit.key in seen:
                raise ValueError(f"`limits[{i}]`: the same limit twice ({limit.key})")
            seen.add(limit.key)

    @property
    def bucket_s(self) -> float:
        return self.window_s / BUCKETS

    def value_of(self, agent: str | None, tenant: str | None) -> str | None:
        """The scope value of a session of ``agent`` and ``tenant`` (None: not in this rule)."""
        if not fnmatch.fnmatchcase(agent or "", self.match):
            return None
        return agent if self.by == "agent" else tenant


def validate_rules(rules: list[FleetRule]) -> None:
    """The checks across rules: unique names."""
    names: set[str] = set()
    for i, rule in enumerate(rules):
        if rule.name in names:
            raise ValueError(f"`fleet[{i}].name`: {rule.name!r} is used by an earlier rule")
        names.add(rule.name)


def scope_key(rule: FleetRule, value: str) -> str:
    return f"{rule.name}:{rule.by}={value}"


def parse_scope(scope: str) -> tuple[str, str, str] | None:
    """``(rule, by, value)`` of a scope key, or None if it is not one."""
    rule, sep, rest = scope.partition(":")
    by, eq, value = rest.partition("=")
    if not sep or not eq or not rule or not value or by not in ("agent", "tenant"):
        return None
    return rule, by, value


def scopes_for(rules: list[FleetRule], agent: str | None, tenant: str | None) -> tuple[str, ...]:
    """Every scope a session of ``agent`` and ``tenant`` belongs to, in rule order."""
    scopes = []
    for rule in rules:
        value = rule.value_of(agent, tenant)
        if value:
            scopes.append(scope_key(rule, value))
    return tuple(scopes)


# ------------------------------------------------------------------- facts

FactCount = Annotated[int, Meta(ge=0, le=MAX_SEQ)]
FactUsd = Annotated[float, Meta(ge=0, le=MAX_FACT_USD)]
FactTs = Annotated[float, Meta(ge=0, le=MAX_TS)]

STARTED, TRIPPED, HALTED = 1, 2, 4


class Fact(Struct, array_like=True, kw_only=True, gc=False):
    """One fleet fact (msgpack, an array): what one session did, for one scope.

    ``kind`` is ``session`` (``flags``: STARTED | TRIPPED | HALTED for what the
    event that made the fact did; spend in ``cum_*`` and ``usd``/``tokens``) or
    ``close`` (an operator closed the scope's circuit; ``by`` says who).
    """

    kind: Literal["session", "close"]
    scope: Annotated[str, Meta(min_length=1, max_length=MAX_SCOPE_CHARS)]
    session: Annotated[str, Meta(max_length=MAX_NAME_CHARS)] = ""
    index: FactCount = 0
    ts: FactTs = 0.0
    flags: Annotated[int, Meta(ge=0, le=7)] = 0
    cum_usd: FactUsd = 0.0
    cum_tokens: FactCount = 0
    usd: FactUsd = 0.0
    tokens: FactCount = 0
    by: Annotated[str, Meta(max_length=MAX_NAME_CHARS)] | None = None
    # The first event time of the session state the fact is of (0: not known): a
    # session evicted and seen again is a new state, its index and spend from 0.
    born: FactTs = 0.0


MAX_FACTS_PER_RECORD = 4096

_fact_encoder = msgspec.msgpack.Encoder()
fact_decoder = msgspec.msgpack.Decoder(Fact)
_facts_decoder = msgspec.msgpack.Decoder(
    Annotated[list[Fact], Meta(min_length=1, max_length=MAX_FACTS_PER_RECORD)]
)


def encode_fact(fact: Fact) -> bytes:
    return _fact_encoder.encode(fact)


def encode_facts(facts: list[Fact]) -> bytes:
    """One record's value: the facts of one scope, in the order they were made."""
    return _fact_encoder.encode(facts)


def decode_facts(data: bytes) -> list[Fact]:
    """The facts of one record, each checked as :func:`decode_fact` checks one."""
    facts = _facts_decoder.decode(data)
    for fact in facts:
        _check_fact(fact)
    return facts


def decode_fact(data: bytes) -> Fact:
    """A fact from its bytes; raises ``msgspec.DecodeError`` (or ``ValueError``) when bad."""
    return _check_fact(fact_decoder.decode(data))


def _check_fact(fact: Fact) -> Fact:
    if parse_scope(fact.scope) is None:
        raise ValueError(f"{fact.scope!r} is not a scope (rule:agent=value or rule:tenant=value)")
    if fact.kind == "session" and not fact.session:
        raise ValueError("a session fact names its session")
    if not (math.isfinite(fact.cum_usd) and math.isfinite(fact.usd)):
        raise ValueError("spend must be finite")
    return fact


# ------------------------------------------------------------------- state


class SessionMark(Struct, array_like=True, gc=False):
    """What a scope remembers of one session: its last fact's index and cumulative spend."""

    index: int
    cum_usd: float
    cum_tokens: int
    last_ts: float
    flags: int
    born: float = 0.0  # the session state's first event time (Fact.born)
    older: list[float] = []  # the first event times of its states before, newest last


class Bucket(Struct, array_like=True, gc=False):
    start: float
    usd: float = 0.0
    tokens: int = 0
    started: int = 0
    tripped: int = 0
    halted: int = 0


class Circuit(Struct, kw_only=True, omit_defaults=True):
    state: Literal["open", "closed"] = "closed"
    generation: int = 0  # opened this many times
    opened_at: float | None = None  # the stage's processing time
    until: float | None = None  # cool-down end (processing time); None: until an operator closes it
    metric: str | None = None
    observed: float = 0.0
    limit: float = 0.0
    reason: str = ""
    closed_by: str | None = None


CLOSES_KEPT = 16
BORNS_KEPT = 4
"""States of one session before its present one whose facts a scope still tells apart."""


class ScopeState(Struct, kw_only=True, omit_defaults=True):
    """One scope's windows, marks, latches and circuit (snapshotted by the fleet stage)."""

    scope: str
    rule: str
    buckets: list[Bucket] = []  # oldest first
    sessions: dict[str, SessionMark] = {}  # least recently updated first
    watermark: float = 0.0  # latest (clamped) event time seen
    fired: list[str] = []  # keys of limits above their bound (latched)
    crossings: int = 0  # limits fired so far: numbers the alerts (deterministic ids)
    circuit: Circuit = msgspec.field(default_factory=Circuit)
    last_close: float = 0.0  # event time of the latest operator close applied
    # The last CLOSES_KEPT closes applied, as (time, by): a close forwarded again after a
    # crash is one of them. Told by identity, not by order: another operator's close
    # from a clock running behind the first one's is a new close.
    closes: list[tuple[float, str]] = []
    offset: int = -1  # the last facts-topic offset applied (kept by the shell)


class Totals(Struct, kw_only=True):
    spend_usd: float = 0.0
    tokens: int = 0
    sessions_started: int = 0
    sessions_tripped: int = 0
    sessions_halted: int = 0

    @property
    def tripped_share(self) -> float:
        return self.sessions_tripped / self.sessions_started if self.sessions_started else 0.0

    def value(self, metric: str) -> float:
        if metric == "tripped_share":
            return self.tripped_share
        return float(getattr(self, metric))


class Crossed(Struct, kw_only=True):
    """A limit went above its bound (``opened``: this opened the circuit)."""

    limit: FleetLimit
    observed: float
    opened: bool
    number: int


class Closed(Struct, kw_only=True):
    """The circuit closed (``was_open`` False: it was closed already; windows still restart)."""

    reason: str
    by: str | None
    generation: int
    was_open: bool


Decision = Crossed | Closed


class Applied(Struct, kw_only=True):
    """What one fact did: counted or skipped (and why), and the decisions it caused."""

    counted: bool
    skip: Literal["duplicate", "outside_window"] | None = None
    clamped: bool = False
    decisions: list[Decision] = []


def new_scope(scope: str, rule: FleetRule) -> ScopeState:
    return ScopeState(scope=scope, rule=rule.name)


def window_totals(state: ScopeState, rule: FleetRule) -> Totals:
    """The sums over the buckets inside the window ending at the watermark."""
    horizon = state.watermark - rule.window_s
    totals = Totals()
    for bucket in state.buckets:
        if bucket.start > horizon - rule.bucket_s:  # a bucket partly inside counts
            totals.spend_usd += bucket.usd
            totals.tokens += bucket.tokens
            totals.sessions_started += bucket.started
            totals.sessions_tripped += bucket.tripped
            totals.sessions_halted += bucket.halted
    return totals


def _bucket_for(state: ScopeState, rule: FleetRule, ts: float) -> Bucket | None:
    width = rule.bucket_s
    start = math.floor(ts / width) * width
    if start <= state.watermark - rule.window_s - width:
        return None  # older than the window
    buckets = state.buckets
    # Facts come nearly in time order: look from the newest bucket back.
    for i in range(len(buckets) - 1, -1, -1):
        existing = buckets[i]
        if existing.start == start:
            return existing
        if existing.start < start:
            bucket = Bucket(start)
            buckets.insert(i + 1, bucket)
            return bucket
    bucket = Bucket(start)
    buckets.insert(0, bucket)
    return bucket


def _slide(state: ScopeState, rule: FleetRule) -> None:
    horizon = state.watermark - rule.window_s - rule.bucket_s
    buckets = state.buckets
    drop = 0
    while drop < len(buckets) and buckets[drop].start <= horizon:
        drop += 1
    if drop:
        del buckets[:drop]


def apply_fact(
    state: ScopeState, rule: FleetRule, fact: Fact, now: float, max_skew_s: float
) -> Applied:
    """Fold one fact into its scope; ``now`` is the stage's processing clock.

    A fact's event time later than ``now`` is read as ``now``: the window never
    runs ahead of the stage's clock, so one forged fact cannot slide it forward
    (nor, when the window is shorter than the clock-skew allowance, empty it).
    Times past ``now + max_skew_s``, beyond any clock's honest error, are counted
    as clamped.
    """
    ts = fact.ts
    clamped = ts > now + max_skew_s
    if ts > now:
        ts = now
    if fact.kind == "close":
        # A close is an operator's reset, forwarded again after a crash: by its time as
        # stamped (not as read against this clock, which moves between the forwards)
        # and its author, a replayed one is told from a new one and closes nothing twice.
        stamped = min(fact.ts, now + max_skew_s)
        identity = (stamped, fact.by or "")
        if identity in state.closes or (not state.closes and stamped <= state.last_close):
            # (no closes listed: a state from before the list, read by order as then)
            return Applied(counted=False, skip="duplicate", clamped=clamped)
        state.closes = [*state.closes[-(CLOSES_KEPT - 1) :], identity]
        state.last_close = max(state.last_close, stamped)
        return Applied(counted=True, clamped=clamped, decisions=close(state, fact.by, now))
    sessions = state.sessions
    mark = sessions.get(fact.session)
    older: list[float] = []
    if mark is not None and fact.born != mark.born:
        if fact.born in mark.older:  # a replay of a state before the one counted now
            return Applied(counted=False, skip="duplicate", clamped=clamped)
        # The session was evicted and came back: a new state, counted from 0. Told by
        # identity, not order: its first event may be stamped before the old state's.
        older = [*mark.older[-(BORNS_KEPT - 1) :], mark.born]
        del sessions[fact.session]
        mark = None
    if mark is not None and fact.index <= mark.index:
        return Applied(counted=False, skip="duplicate", clamped=clamped)
    if mark is None:
        usd, tokens = min(fact.usd, fact.cum_usd), min(fact.tokens, fact.cum_tokens)
        new_flags = fact.flags
        mark = SessionMark(fact.index, fact.cum_usd, fact.cum_tokens, ts, fact.flags, fact.born, older)
        if len(sessions) >= MAX_SESSIONS:
            del sessions[next(iter(sessions))]  # the least recently updated
    else:
        usd = max(0.0, fact.cum_usd - mark.cum_usd)
        tokens = max(0, fact.cum_tokens - mark.cum_tokens)
        new_flags = fact.flags & ~mark.flags  # each of start, trip, halt counts once per session
        del sessions[fact.session]  # re-inserted last: the dict stays in update order
        mark.index = fact.index
        mark.cum_usd = max(mark.cum_usd, fact.cum_usd)
        mark.cum_tokens = max(mark.cum_tokens, fact.cum_tokens)
        mark.last_ts = max(mark.last_ts, ts)
        mark.flags |= fact.flags
    sessions[fact.session] = mark
    if ts > state.watermark:
        state.watermark = ts
        _slide(state, rule)
    bucket = _bucket_for(state, rule, ts)
    if bucket is None:
        return Applied(counted=False, skip="outside_window", clamped=clamped)
    bucket.usd += usd
    bucket.tokens += tokens
    if new_flags & STARTED:
        bucket.started += 1
    if new_flags & TRIPPED:
        bucket.tripped += 1
    if new_flags & HALTED:
        bucket.halted += 1
    return Applied(counted=True, clamped=clamped, decisions=evaluate(state, rule, now))


def evaluate(state: ScopeState, rule: FleetRule, now: float) -> list[Decision]:
    """Fire the limits that went above their bound, re-arm those back at or below it."""
    totals = window_totals(state, rule)
    decisions: list[Decision] = []
    for limit in rule.limits:
        value = totals.value(limit.metric)
        over = value > limit.above
        if limit.metric == "tripped_share" and totals.sessions_started < limit.min_sessions:
            over = False
        key = limit.key
        if over and key not in state.fired:
            state.fired.append(key)
            state.crossings += 1
            opened = False
            circuit = state.circuit
            if limit.action == "halt" and circuit.state == "closed":
                opened = True
                state.circuit = Circuit(
                    state="open",
                    generation=circuit.generation + 1,
                    opened_at=now,
                    until=now + rule.cooldown_s if rule.cooldown_s > 0 else None,
                    metric=limit.metric,
                    observed=value,
                    limit=limit.above,
                    reason=describe_crossing(state.scope, rule, limit, value),
                )
            decisions.append(Crossed(limit=limit, observed=value, opened=opened, number=state.crossings))
        elif not over and key in state.fired:
            state.fired.remove(key)
    return decisions


def describe_crossing(scope: str, rule: FleetRule, limit: FleetLimit, value: float) -> str:
    what = {
        "spend_usd": f"spent {value:.2f} USD",
        "tokens": f"used {value:.0f} tokens",
        "sessions_started": f"started {value:.0f} sessions",
        "sessions_tripped": f"had {value:.0f} sessions tripped",
        "tripped_share": f"had {value:.0%} of its sessions tripped",
        "sessions_halted": f"had {value:.0f} sessions halted",
    }[limit.metric]
    bound = f"{limit.above:.0%}" if limit.metric == "tripped_share" else f"{limit.above:g}"
    window = f"{rule.window_s / 60:g} min" if rule.window_s < 7200 else f"{rule.window_s / 3600:g} h"
    return f"scope {scope} {what} in the last {window} (limit {limit.metric} > {bound})"


def close(state: ScopeState, by: str | None, now: float, reason: str | None = None) -> list[Decision]:
    """Close the circuit (an operator, or the cool-down) and start the windows afresh."""
    circuit = state.circuit
    was_open = circuit.state == "open"
    why = reason or (f"closed by {by}" if by else "closed by an operator")
    state.circuit = Circuit(state="closed", generation=circuit.generation, reason=why, closed_by=by)
    state.buckets = []
    state.fired = []
    return [Closed(reason=why, by=by, generation=circuit.generation, was_open=was_open)]


def forgettable(state: ScopeState) -> bool:
    """Whether a scope may be forgotten once idle for longer than its window: its
    circuit never opened and no limit of it ever crossed. Those numbers key the ids of
    its alerts and trips (deterministic, and de-duplicated downstream by id), so a
    scope that has them is kept: forgotten and met again, it would reuse an id of its
    own past, and a halting controller would drop the new trip as a duplicate."""
    return (
        state.circuit.state == "closed" and state.circuit.generation == 0
        and state.crossings == 0 and not state.fired
    )


def tick(state: ScopeState, rule: FleetRule, now: float) -> list[Decision]:
    """Processing-time housekeeping: the cool-down's end, forgotten idle sessions."""
    decisions: list[Decision] = []
    circuit = state.circuit
    if circuit.state == "open" and circuit.until is not None and now >= circuit.until:
        decisions = close(state, None, now, reason=f"cool-down of {rule.cooldown_s:g} s passed")
    stale = state.watermark - 2 * rule.window_s
    sessions = state.sessions
    while sessions:
        first = next(iter(sessions))
        if sessions[first].last_ts >= stale:
            break
        del sessions[first]
    return decisions


# ---------------------------------------------------------- the global table


class CircuitRecord(Struct, kw_only=True, omit_defaults=True):
    """A scope's circuit on the compacted circuits topic (JSON), keyed by scope."""

    scope: Annotated[str, Meta(min_length=1, max_length=MAX_SCOPE_CHARS)]
    rule: RuleName
    by: ByField
    value: Annotated[str, Meta(min_length=1, max_length=MAX_NAME_CHARS)]
    state: Literal["open", "closed"]
    generation: Annotated[int, Meta(ge=0, le=MAX_SEQ)]
    opened_at: Annotated[float, Meta(ge=0, le=MAX_TS)] | None = None
    until: Annotated[float, Meta(ge=0, le=MAX_TS)] | None = None
    reason: Annotated[str, Meta(max_length=4096)] = ""
    metric: str | None = None
    observed: float = 0.0
    limit: float = 0.0


circuit_decoder = msgspec.json.Decoder(CircuitRecord)


def decode_circuit(data: bytes) -> CircuitRecord:
    record = circuit_decoder.decode(data)
    parsed = parse_scope(record.scope)
    if parsed is None or parsed != (record.rule, record.by, record.value):
        raise ValueError(f"scope {record.scope!r} does not match rule, by and value")
    return record


def circuit_record(state: ScopeState) -> CircuitRecord:
    parsed = parse_scope(state.scope)
    assert parsed is not None
    rule, by, value = parsed
    c = state.circuit
    return CircuitRecord(
        scope=state.scope,
        rule=rule,
        by=by,  # type: ignore[arg-type]  # parse_scope checked it
        value=value,
        state=c.state,
        generation=c.generation,
        opened_at=c.opened_at,
        until=c.until,
        reason=c.reason,
        metric=c.metric,
        observed=c.observed,
        limit=c.limit,
    )


def fleet_alert(state: ScopeState, rule: FleetRule, crossed: Crossed) -> FleetAlert:
    """The ``fleet_alert`` output of one crossing; its id is the scope's crossing number."""
    parsed = parse_scope(state.scope)
    assert parsed is not None
    _, by, value = parsed
    limit = crossed.limit
    digest = blake2b(f"{state.scope}\x1ffleet_alert\x1f{crossed.number}".encode(), digest_size=16)
    reason = describe_crossing(state.scope, rule, limit, crossed.observed)
    if crossed.opened:
        reason += f": circuit opened (generation {state.circuit.generation}), its sessions are halted"
    elif limit.action == "halt":
        reason += ": the circuit was open already"
    return FleetAlert(
        id=digest.hexdigest(),
        session=state.scope,
        agent=value if by == "agent" else None,
        ts=state.watermark or None,
        seq=None,
        rule=rule.name,
        by=by,  # type: ignore[arg-type]
        value=value,
        metric=limit.metric,
        observed=crossed.observed,
        limit=limit.above,
        window_s=rule.window_s,
        action=limit.action,
        circuit=state.circuit.state,
        reason=reason,
    )


def fleet_trip_id(session: str, scope: str, generation: int, kind: str = "trip") -> str:
    """The id of a session's trip (or release) by a scope's circuit: the same on every
    instance and after every replay, so consumers drop the duplicates."""
    return blake2b(f"{session}\x1f{kind}\x1f{scope}\x1f{generation}".encode(), digest_size=16).hexdigest()


# ------------------------------------------------------------- snapshots

_state_encoder = msgspec.msgpack.Encoder()
_state_decoder = msgspec.msgpack.Decoder(ScopeState)


def encode_scope(state: ScopeState) -> bytes:
    return _state_encoder.encode(state)


def decode_scope(data: bytes) -> ScopeState:
    return _state_decoder.decode(data)


def rehomed_scope(data: bytes) -> tuple[float, bytes]:
    """A scope's snapshot to write on its new home partition after the facts topic's
    partition count changed, with its latest event time: the same windows, marks and
    circuit, without the facts offset (an offset of the old partition; kept, the new
    partition's first facts would look applied already). Raises ValueError (a msgspec
    DecodeError) for a value the fleet stage could not restore."""
    state = decode_scope(data)
    state.offset = -1
    return state.watermark, encode_scope(state)
