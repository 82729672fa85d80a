"""The fleet guardrails' arithmetic (streamguard/fleet_windows.py): windows, de-duplication,
limits and circuits, as properties over generated fact streams and as examples."""

from __future__ import annotations

import math

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamguard.fleet_windows import (
    BUCKETS,
    HALTED,
    MAX_FACTS_PER_RECORD,
    MAX_SESSIONS,
    STARTED,
    TRIPPED,
    Closed,
    Crossed,
    Fact,
    FleetLimit,
    FleetRule,
    ScopeState,
    apply_fact,
    circuit_record,
    close,
    decode_circuit,
    decode_fact,
    decode_facts,
    decode_scope,
    encode_fact,
    encode_scope,
    fleet_alert,
    new_scope,
    parse_scope,
    scopes_for,
    tick,
    window_totals,
)

NOW = 1_800_000_000.0
SKEW = 300.0
SCOPE = "spend:agent=hot"


def rule(*limits: FleetLimit, window_s: float = 3600.0, cooldown_s: float = 0.0) -> FleetRule:
    return FleetRule(
        name="spend",
        by="agent",
        window_s=window_s,
        cooldown_s=cooldown_s,
        limits=list(limits) or [FleetLimit(metric="spend_usd", above=1e9, action="alert")],
    )


def fact(session: str, index: int, cum: float, usd: float, ts: float = NOW, flags: int = 0) -> Fact:
    return Fact(
        kind="session", scope=SCOPE, session=session, index=index, ts=ts, flags=flags,
        cum_usd=cum, usd=usd, cum_tokens=int(cum * 100), tokens=int(usd * 100),
    )


# ----------------------------------------------------------- generated streams


@st.composite
def session_deliveries(draw: st.DrawFn, name: str) -> tuple[list[Fact], float]:
    """One session's facts as a stage could receive them: runs of increasing indices,
    each later run a replay from an earlier point (a crash of the session stage,
    batching its spend differently); returns them and the cumulative spend of the
    highest index delivered."""
    n = draw(st.integers(1, 12))
    increments = draw(st.lists(st.integers(0, 500), min_size=n, max_size=n))
    cum = [0.0]
    for cents in increments:
        cum.append(cum[-1] + cents / 100)
    facts: list[Fact] = []
    highest = 0
    for run in range(draw(st.integers(1, 3))):
        start = 1 if run == 0 else draw(st.integers(1, n))
        indices = sorted(draw(st.sets(st.integers(start, n), min_size=1)))
        # What the publisher had marked as published before this run: nothing for the
        # first, a restored snapshot's mark (some earlier index) for a replay.
        previous = 0 if run == 0 else draw(st.integers(0, indices[0] - 1))
        for index in indices:
            facts.append(fact(name, index, cum[index], cum[index] - cum[previous]))
            previous = index
        highest = max(highest, indices[-1])
    return facts, cum[highest]


@st.composite
def fleet_streams(draw: st.DrawFn) -> tuple[list[Fact], float]:
    """Several sessions' deliveries interleaved at random, each session's own order kept."""
    count = draw(st.integers(1, 5))
    queues = []
    expected = 0.0
    for i in range(count):
        facts, total = draw(session_deliveries(f"s{i}"))
        queues.append(facts)
        expected += total
    order = draw(st.permutations([i for i, q in enumerate(queues) for _ in q]))
    cursors = [0] * count
    stream = []
    for i in order:
        stream.append(queues[i][cursors[i]])
        cursors[i] += 1
    return stream, expected


@settings(max_examples=300, deadline=None)
@given(fleet_streams())
def test_window_total_is_the_spend_of_every_session_whatever_the_duplicates(
    stream: tuple[list[Fact], float],
) -> None:
    facts, expected = stream
    state = new_scope(SCOPE, rule())
    for f in facts:
        apply_fact(state, rule(), f, NOW, SKEW)
    totals = window_totals(state, rule())
    assert math.isclose(totals.spend_usd, expected, abs_tol=1e-6)
    assert totals.tokens == pytest.approx(expected * 100, abs=len(facts) + 1)


@settings(max_examples=200, deadline=None)
@given(fleet_streams(), st.data())
def test_delivering_a_stream_twice_counts_it_once(stream: tuple[list[Fact], float], data: st.DataObject) -> None:
    facts, _ = stream
    once = new_scope(SCOPE, rule())
    twice = new_scope(SCOPE, rule())
    for f in facts:
        apply_fact(once, rule(), f, NOW, SKEW)
    cut = data.draw(st.integers(0, len(facts)))
    for f in facts[:cut] + facts + facts[cut:]:  # a prefix again, then the rest again
        apply_fact(twice, rule(), f, NOW, SKEW)
    assert window_totals(twice, rule()) == window_totals(once, rule())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 9000)), min_size=1, max_size=40))
def test_window_holds_exactly_the_facts_of_its_buckets(steps: list[tuple[int, int]]) -> None:
    """One session, facts in order with event times moving forward by up to 2.5 h:
    the total is the sum of the facts whose bucket lies in the window ending at the
    latest time seen. Times past the stage's clock are read as that clock (as the stage
    does: one forged time cannot slide the window forward), so the model reads them so
    too."""
    r = rule(window_s=3600.0)
    width = r.window_s / BUCKETS
    state = new_scope(SCOPE, r)
    cum = 0.0
    ts = NOW - 86400
    kept: list[tuple[float, float]] = []
    for index, (cents, advance) in enumerate(steps, start=1):
        ts += advance
        usd = cents / 100
        cum += usd
        apply_fact(state, r, fact("s", index, cum, usd, ts=ts), NOW, SKEW)
        kept.append((min(ts, NOW), usd))
    watermark = max(t for t, _ in kept)
    expected = sum(
        usd for t, usd in kept if math.floor(t / width) * width > watermark - r.window_s - width
    )
    assert math.isclose(window_totals(state, r).spend_usd, expected, abs_tol=1e-6)
    assert len(state.buckets) <= BUCKETS + 1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 300), min_size=1, max_size=40), st.integers(1, 3000))
def test_circuit_opens_exactly_when_the_limit_is_crossed(increments: list[int], bound: int) -> None:
    limit = bound / 100
    r = rule(FleetLimit(metric="spend_usd", above=limit, action="halt"))
    state = new_scope(SCOPE, r)
    cum = 0.0
    for index, cents in enumerate(increments, start=1):
        before = cum
        cum += cents / 100
        applied = apply_fact(state, r, fact("s", index, cum, cents / 100), NOW, SKEW)
        crossed = [d for d in applied.decisions if isinstance(d, Crossed)]
        crosses_now = before <= limit < cum
        assert bool(crossed) == crosses_now
        if crossed:
            assert crossed[0].opened and state.circuit.state == "open"
            assert state.circuit.generation == 1
        assert (state.circuit.state == "open") == (cum > limit)


@settings(max_examples=100, deadline=None)
@given(fleet_streams(), st.data())
def test_a_snapshot_taken_anywhere_continues_the_same(stream: tuple[list[Fact], float], data: st.DataObject) -> None:
    facts, _ = stream
    r = rule(FleetLimit(metric="spend_usd", above=5.0, action="halt"))
    straight = new_scope(SCOPE, r)
    for f in facts:
        apply_fact(straight, r, f, NOW, SKEW)
    cut = data.draw(st.integers(0, len(facts)))
    restored = new_scope(SCOPE, r)
    for f in facts[:cut]:
        apply_fact(restored, r, f, NOW, SKEW)
    restored = decode_scope(encode_scope(restored))
    for f in facts[cut:]:
        apply_fact(restored, r, f, NOW, SKEW)
    assert encode_scope(restored) == encode_scope(straight)


# ------------------------------------------------------------------- examples


def test_sessions_started_tripped_and_halted_count_once_per_session() -> None:
    r = rule(
        FleetLimit(metric="sessions_tripped", above=1, action="alert"),
        FleetLimit(metric="tripped_share", above=0.5, action="halt", min_sessions=3),
    )
    state = new_scope(SCOPE, r)
    for i in range(4):
        apply_fact(state, r, fact(f"s{i}", 1, 0, 0, flags=STARTED), NOW, SKEW)
    apply_fact(state, r, fact("s0", 5, 0, 0, flags=TRIPPED), NOW, SKEW)
    apply_fact(state, r, fact("s0", 6, 0, 0, flags=TRIPPED | HALTED), NOW, SKEW)  # again: counted once
    totals = window_totals(state, r)
    assert (totals.sessions_started, totals.sessions_tripped, totals.sessions_halted) == (4, 1, 1)
    applied = apply_fact(state, r, fact("s1", 2, 0, 0, flags=TRIPPED), NOW, SKEW)
    assert [d.limit.metric for d in applied.decisions if isinstance(d, Crossed)] == ["sessions_tripped"]
    applied = apply_fact(state, r, fact("s2", 2, 0, 0, flags=TRIPPED), NOW, SKEW)
    crossed = [d for d in applied.decisions if isinstance(d, Crossed)]
    assert [d.limit.metric for d in crossed] == ["tripped_share"] and crossed[0].opened
    assert window_totals(state, r).tripped_share == 0.75


def test_share_waits_for_min_sessions() -> None:
    r = rule(FleetLimit(metric="tripped_share", above=0.3, action="halt", min_sessions=5))
    state = new_scope(SCOPE, r)
    apply_fact(state, r, fact("a", 1, 0, 0, flags=STARTED | TRIPPED), NOW, SKEW)
    assert state.circuit.state == "closed"  # one session of one is 100 %, but too few


def test_limits_fire_on_the_edge_and_rearm_below() -> None:
    r = rule(FleetLimit(metric="spend_usd", above=10, action="alert"), window_s=600.0)
    state = new_scope(SCOPE, r)
    first = apply_fact(state, r, fact("s", 1, 11, 11, ts=NOW), NOW, SKEW)
    assert len(first.decisions) == 1 and state.circuit.state == "closed"  # alert only
    assert apply_fact(state, r, fact("s", 2, 12, 1, ts=NOW + 1), NOW, SKEW).decisions == []
    # 20 minutes later the old spend is out of the window: re-armed, then it fires again.
    later = NOW + 1200
    assert apply_fact(state, r, fact("s", 3, 12.5, 0.5, ts=later), later, SKEW).decisions == []
    again = apply_fact(state, r, fact("s", 4, 23, 10.5, ts=later), later, SKEW)
    assert [d.number for d in again.decisions if isinstance(d, Crossed)] == [2]


def test_operator_close_restarts_the_windows_and_a_replayed_close_does_nothing() -> None:
    r = rule(FleetLimit(metric="spend_usd", above=1, action="halt"))
    state = new_scope(SCOPE, r)
    apply_fact(state, r, fact("s", 1, 2, 2), NOW, SKEW)
    assert state.circuit.state == "open"
    closing = Fact(kind="close", scope=SCOPE, ts=NOW + 5, by="ops")
    decisions = apply_fact(state, r, closing, NOW + 5, SKEW).decisions
    assert isinstance(decisions[0], Closed) and decisions[0].was_open
    assert state.circuit.state == "closed" and window_totals(state, r).spend_usd == 0
    apply_fact(state, r, fact("s", 2, 2.5, 0.5), NOW, SKEW)
    assert state.circuit.state == "closed"  # 0.5 since the close
    assert apply_fact(state, r, closing, NOW + 9, SKEW).skip == "duplicate"
    assert window_totals(state, r).spend_usd == 0.5
    apply_fact(state, r, fact("s", 3, 3.6, 1.1), NOW, SKEW)
    assert state.circuit.state == "open" and state.circuit.generation == 2


def test_cool_down_closes_on_processing_time() -> None:
    r = rule(FleetLimit(metric="spend_usd", above=1, action="halt"), cooldown_s=600)
    state = new_scope(SCOPE, r)
    apply_fact(state, r, fact("s", 1, 2, 2), NOW, SKEW)
    assert state.circuit.until == NOW + 600
    assert tick(state, r, NOW + 599) == []
    decisions = tick(state, r, NOW + 600)
    assert isinstance(decisions[0], Closed) and state.circuit.state == "closed"


def test_a_forged_future_time_is_clamped() -> None:
    r = rule()
    state = new_scope(SCOPE, r)
    applied = apply_fact(state, r, fact("s", 1, 1, 1, ts=NOW + 86400 * 30), NOW, SKEW)
    assert applied.clamped and state.watermark == NOW
    # ...so an honest fact of now is still inside the window.
    assert apply_fact(state, r, fact("t", 1, 1, 1, ts=NOW), NOW, SKEW).counted
    # a clock a little ahead is read as now, and not reported as forged
    ahead = apply_fact(state, r, fact("u", 1, 1, 1, ts=NOW + 10), NOW, SKEW)
    assert ahead.counted and not ahead.clamped and state.watermark == NOW


def test_a_future_fact_cannot_empty_a_window_shorter_than_the_skew_allowance() -> None:
    short = FleetRule(name="burst", window_s=120, limits=[FleetLimit(metric="spend_usd", above=100, action="halt")])
    short.validate()
    state = new_scope("burst:agent=bot", short)
    apply_fact(state, short, fact("forged", 1, 1, 1, ts=NOW + 86400), NOW, SKEW)
    for n in range(10):  # ten sessions spend $50 each over the next three minutes
        at = NOW + 18 * n
        apply_fact(state, short, Fact(kind="session", scope=state.scope, session=f"s{n}", index=1,
                                      ts=at, cum_usd=50.0, usd=50.0), at, SKEW)
    assert window_totals(state, short).spend_usd > 100 and state.circuit.state == "open"


def test_session_marks_are_bounded() -> None:
    r = rule()
    state = new_scope(SCOPE, r)
    for i in range(MAX_SESSIONS + 10):
        apply_fact(state, r, fact(f"s{i}", 1, 0.01, 0.01), NOW, SKEW)
    assert len(state.sessions) == MAX_SESSIONS
    assert "s0" not in state.sessions and f"s{MAX_SESSIONS + 9}" in state.sessions


def test_scopes_of_a_session() -> None:
    rules = [
        FleetRule(name="agents", by="agent", match="triage-*", limits=[FleetLimit(metric="tokens", above=1)]),
        FleetRule(name="tenants", by="tenant", limits=[FleetLimit(metric="spend_usd", above=1)]),
    ]
    assert scopes_for(rules, "triage-bot", "acme") == ("agents:agent=triage-bot", "tenants:tenant=acme")
    assert scopes_for(rules, "other", None) == ()
    assert parse_scope("tenants:tenant=acme:eu") == ("tenants", "tenant", "acme:eu")
    assert parse_scope("nonsense") is None


@pytest.mark.parametrize(
    "raw",
    [
        b"\x00\x01garbage",
        msgspec.msgpack.encode(["session", "no-scope", "s", 1, 1.0]),
        msgspec.msgpack.encode(["session", SCOPE, "", 1, 1.0]),  # no session
        msgspec.msgpack.encode(["session", SCOPE, "s", -1, 1.0]),
        msgspec.msgpack.encode(["session", SCOPE, "s", 1, 1e12]),  # ts out of range
        msgspec.msgpack.encode(["session", SCOPE, "s", 1, 1.0, 0, float("inf")]),
        msgspec.msgpack.encode(["session", "x" * 2000 + ":agent=a", "s", 1, 1.0]),
    ],
)
def test_hostile_facts_are_refused_at_decoding(raw: bytes) -> None:
    with pytest.raises((msgspec.DecodeError, ValueError)):
        decode_fact(raw)


@pytest.mark.parametrize(
    "raw",
    [
        msgspec.msgpack.encode([]),
        msgspec.msgpack.encode([["session", SCOPE, "s", 1, 1.0]] * (MAX_FACTS_PER_RECORD + 1)),
        msgspec.msgpack.encode([["session", SCOPE, "s", 1, 1.0], ["session", "bad", "s", 2, 1.0]]),
    ],
)
def test_hostile_fact_records_are_refused_whole(raw: bytes) -> None:
    with pytest.raises((msgspec.DecodeError, ValueError)):
        decode_facts(raw)


def test_fact_and_circuit_round_trip() -> None:
    f = fact("s", 3, 1.5, 0.5, flags=STARTED)
    assert decode_fact(encode_fact(f)) == f
    r = rule(FleetLimit(metric="spend_usd", above=1, action="halt"))
    state = new_scope(SCOPE, r)
    applied = apply_fact(state, r, fact("s", 1, 2, 2), NOW, SKEW)
    record = circuit_record(state)
    assert decode_circuit(msgspec.json.encode(record)) == record
    assert record.state == "open" and record.value == "hot"
    alert = fleet_alert(state, r, applied.decisions[0])  # type: ignore[arg-type]
    assert alert.session == SCOPE and alert.agent == "hot" and "circuit opened" in alert.reason
    forged = msgspec.json.encode({**msgspec.to_builtins(record), "value": "cold"})
    with pytest.raises(ValueError):
        decode_circuit(forged)
    closed = close(state, "ops", NOW)
    assert closed and circuit_record(state).state == "closed"


def test_a_session_evicted_and_seen_again_is_counted_afresh_and_its_old_facts_stay_duplicates() -> None:
    """The session stage forgets an idle session; when it comes back its state, index
    and spend start from 0. Its facts name the new state's first event time, so they
    are told from a replay of the old state's, which stay duplicates."""
    rule = FleetRule(name="daily", window_s=86400, limits=[FleetLimit(metric="spend_usd", above=200, action="halt")])
    rule.validate()
    state = new_scope("daily:agent=bot", rule)
    now = 1_000_000.0

    def fact(index: int, cum: float, usd: float, ts: float, born: float) -> Fact:
        return Fact(kind="session", scope=state.scope, session="s1", index=index, ts=ts,
                    flags=STARTED if index == 1 else 0, cum_usd=cum, usd=usd, born=born)

    first = [fact(1, 0.0, 0.0, now + 1, now + 1), fact(20, 80.0, 80.0, now + 20, now + 1),
             fact(40, 150.0, 70.0, now + 40, now + 1)]
    for f in first:
        assert apply_fact(state, rule, f, f.ts, 300).counted
    later = now + 7 * 3600
    second = [fact(1, 0.0, 0.0, later + 1, later + 1), fact(15, 60.0, 60.0, later + 15, later + 1),
              fact(39, 150.0, 90.0, later + 39, later + 1)]
    for f in second:
        assert apply_fact(state, rule, f, f.ts, 300).counted
    assert window_totals(state, rule).spend_usd == 300.0
    assert window_totals(state, rule).sessions_started == 2  # each state starts once
    assert state.circuit.state == "open"
    for f in first:  # a replay of the first state's facts changes nothing
        assert apply_fact(state, rule, f, later + 60, 300).skip == "duplicate"
    assert window_totals(state, rule).spend_usd == 300.0


def test_a_session_state_is_born_at_its_first_event_and_again_after_eviction() -> None:
    from streamguard.engine import Engine
    from streamguard.events import TurnStart
    from streamguard.policy import PolicySet

    engine = Engine(PolicySet())
    engine.process(TurnStart(session="s1"), 100.0)
    engine.process(TurnStart(session="s1"), 200.0)
    assert engine.sessions["s1"].born == 100.0
    restored = Engine(PolicySet())
    restored.restore("s1", engine.snapshot("s1") or b"")
    assert restored.sessions["s1"].born == 100.0  # a restart is the same state
    engine.evict("s1")
    engine.process(TurnStart(session="s1"), 30_000.0)
    assert engine.sessions["s1"].born == 30_000.0


def _closed_by_alice_then_reopened(read_at: float, reopened_at: float) -> tuple[FleetRule, ScopeState, Fact]:
    """A scope whose circuit opened, was closed by Alice's close (stamped two minutes
    after NOW, read by the stage at ``read_at``) and opened again at ``reopened_at``."""
    r = rule(FleetLimit(metric="spend_usd", above=1, action="halt"))
    state = new_scope(SCOPE, r)
    apply_fact(state, r, fact("s", 1, 2, 2), NOW, SKEW)
    alice = Fact(kind="close", scope=SCOPE, ts=NOW + 120, by="alice")
    assert apply_fact(state, r, alice, read_at, SKEW).counted
    apply_fact(state, r, fact("s", 2, 4, 2, ts=reopened_at), reopened_at, SKEW)
    assert state.circuit.state == "open" and state.circuit.generation == 2
    return r, state, alice


def test_a_close_from_a_clock_running_behind_an_earlier_ones_still_closes() -> None:
    """Alice's clock is two minutes fast; the circuit reopens; Bob closes it 55 s
    later by the true time. His close is a new one, not a replay of hers."""
    r, state, alice = _closed_by_alice_then_reopened(read_at=NOW + 200, reopened_at=NOW + 201)
    bob = Fact(kind="close", scope=SCOPE, ts=NOW + 65, by="bob")
    assert apply_fact(state, r, bob, NOW + 256, SKEW).counted
    assert state.circuit.state == "closed"
    assert apply_fact(state, r, bob, NOW + 300, SKEW).skip == "duplicate"  # forwarded again
    restored = decode_scope(encode_scope(state))
    assert apply_fact(restored, r, alice, NOW + 300, SKEW).skip == "duplicate"


def test_a_close_stamped_ahead_of_the_stage_is_still_told_apart_when_forwarded_again() -> None:
    """The operator's clock runs ahead: the close is read at the stage's clock for the
    window, but known by its own stamp, so the same close forwarded again after a crash
    (read at another moment) closes nothing twice."""
    r, state, alice = _closed_by_alice_then_reopened(read_at=NOW + 1, reopened_at=NOW + 30)
    assert apply_fact(state, r, alice, NOW + 60, SKEW).skip == "duplicate"
    assert state.circuit.state == "open"


def test_a_returning_session_stamped_before_its_old_state_is_counted_too() -> None:
    """States are told apart by identity, not by order: a session back with a clock set
    earlier is a new state all the same; the old state's facts stay duplicates."""
    limit = FleetRule(name="daily", window_s=86400, limits=[FleetLimit(metric="spend_usd", above=100, action="halt")])
    limit.validate()
    state = new_scope("daily:agent=bot", limit)

    def spend(index: int, cum: float, usd: float, born: float) -> Fact:
        return Fact(kind="session", scope=state.scope, session="s1", index=index, ts=NOW,
                    cum_usd=cum, usd=usd, born=born)

    old = spend(3, 5.0, 5.0, NOW - 10)
    assert apply_fact(state, limit, old, NOW, SKEW).counted
    for index, cum, usd in ((1, 50.0, 50.0), (2, 150.0, 100.0)):
        assert apply_fact(state, limit, spend(index, cum, usd, NOW - 20), NOW, SKEW).counted
    assert window_totals(state, limit).spend_usd == 155.0 and state.circuit.state == "open"
    assert apply_fact(state, limit, old, NOW, SKEW).skip == "duplicate"
