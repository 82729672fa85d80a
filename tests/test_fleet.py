"""The synthetic fleet: deterministic, well-formed, and honest about what it plants.

Every failure shape must trigger exactly the signals :data:`PLANTED` names
(once each) through a real engine, and every healthy shape must trigger nothing
under the default policy.
"""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys
from collections import Counter, defaultdict
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamguard.engine import Engine
from streamguard.events import (
    Alert,
    FinalAnswer,
    GuardrailTrip,
    Text,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnStart,
    Usage,
    encode,
)
from streamguard.fleet import (
    FAILURES,
    HEALTHY,
    PLANTED,
    PLANTED_POLICY,
    Scenario,
    default_mix,
    fleet,
    generate_session,
    plan_fleet,
    session_events,
)
from streamguard.policy import PolicySet
from streamguard.signals import signal_classes
from streamguard.watchdog import HALT_IGNORED

ROOT = Path(__file__).resolve().parent.parent
SEEDS = range(12)

# Finding ids emitted by a signal class under another id.
EMITTED_BY = {
    "context-pressure": "context-budget",
    "write-without-target": "verification",
    "unverified-write": "verification",
    "unverified-final-answer": "verification",
}


def registered() -> set[str]:
    return {cls.id for cls in signal_classes()}


def missing(signals: frozenset[str]) -> set[str]:
    ids = registered()
    return {s for s in signals if EMITTED_BY.get(s, s) not in ids}


def merge(*parts: dict[str, Any]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for part in parts:
        for key, value in part.items():
            if isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key] = merge(merged[key], value)
            else:
                merged[key] = value
    return merged


def usable_policies() -> dict[str, Any]:
    """Every planted policy fragment whose signals are registered, merged."""
    return merge(*(PLANTED_POLICY[s] for s in PLANTED_POLICY if not missing(PLANTED[s])))


def run(events: list[Any], raw_policy: dict[str, Any] | None = None) -> list[Any]:
    engine = Engine(PolicySet(raw_policy or {}))
    return [out for event in events for out in engine.process(event)]


def signal_counts(outputs: list[Any]) -> Counter[str]:
    return Counter(o.signal for o in outputs if isinstance(o, Alert) and o.signal != HALT_IGNORED)


def session(kind: Scenario, seed: int) -> list[Any]:
    return generate_session(kind, f"s-{kind}-{seed}", "coder-1", random.Random(f"t/{kind}/{seed}"))


# ------------------------------------------------------------------ determinism


def test_same_seed_same_fleet():
    assert list(fleet(40, seed=7)) == list(fleet(40, seed=7))


def test_different_seed_different_fleet():
    assert list(fleet(40, seed=7)) != list(fleet(40, seed=8))


def test_same_rng_same_session():
    for kind in Scenario:
        assert session(kind, 3) == session(kind, 3)


def test_plan_is_deterministic_and_follows_the_mix():
    assert plan_fleet(50, seed="x") == plan_fleet(50, seed="x")
    plans = plan_fleet(60, seed=1, mix={"sweep": 1.0})
    assert {p.kind for p in plans} == {Scenario.SWEEP}
    healthy_only = plan_fleet(200, seed=1, loops_fraction=0.0)
    assert {p.kind for p in healthy_only} <= set(HEALTHY)
    assert {p.kind for p in plan_fleet(400, seed=1, loops_fraction=1.0)} <= set(FAILURES)


def test_plan_is_prefix_stable():
    """Plan i does not depend on how many sessions are planned (the demo relies on it)."""
    assert plan_fleet(30, seed="p")[:10] == plan_fleet(10, seed="p")


def test_same_seed_same_events_in_another_process():
    """String seeds hash the same under any PYTHONHASHSEED."""
    script = (
        "import hashlib\n"
        "from streamguard.events import encode\n"
        "from streamguard.fleet import fleet\n"
        "print(hashlib.sha256(b''.join(encode(e) for e in fleet(25, seed=4))).hexdigest())\n"
    )
    digests = set()
    for hash_seed in ("1", "2"):
        done = subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(ROOT)},
            capture_output=True, text=True, timeout=60, check=True,
        )
        digests.add(done.stdout.strip())
    here = hashlib.sha256(b"".join(encode(e) for e in fleet(25, seed=4))).hexdigest()
    assert digests == {here}


def test_default_mix_shares():
    mix = default_mix(0.2)
    assert sum(mix.values()) == pytest.approx(1.0)
    assert sum(mix[s] for s in FAILURES) == pytest.approx(0.2)
    with pytest.raises(ValueError):
        default_mix(1.5)


# ------------------------------------------------------------------ well-formed


def check_session(events: list[Any]) -> None:
    """One session's events: numbered from 0, strictly timed, turns well nested."""
    assert [e.seq for e in events] == list(range(len(events)))
    stamps = [e.ts for e in events]
    assert all(a < b for a, b in pairwise(stamps))
    assert len({e.session for e in events}) == 1
    open_turn = None
    calls: dict[str, str] = {}
    for event in events:
        if isinstance(event, TurnStart):
            assert open_turn is None
            open_turn = event.turn
            continue
        assert event.turn == open_turn, "every event belongs to the open turn"
        if isinstance(event, TurnEnd):
            open_turn = None
        elif isinstance(event, ToolCall):
            assert event.call_id not in calls
            assert event.kind in ("resolve", "read", "write")
            calls[event.call_id] = event.tool
        elif isinstance(event, ToolResult):
            assert calls.pop(event.call_id) == event.tool, "a result answers an earlier call"
        elif isinstance(event, Usage):
            assert event.cost_usd is not None and event.cost_usd > 0
            assert event.input_tokens and event.output_tokens
    assert open_turn is None, "the last turn is closed"
    assert not calls, "every call got its result"
    assert isinstance(events[-3], Text) and isinstance(events[-2], FinalAnswer)


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(list(Scenario)), seed=st.integers(0, 2**32))
def test_sessions_are_well_formed(kind: Scenario, seed: int):
    check_session(generate_session(kind, "s", "a", random.Random(seed)))


def test_fleet_interleaves_sessions_and_keeps_each_in_order():
    plans = plan_fleet(120, seed=3)
    events = list(fleet(120, seed=3))
    by_session: dict[str, list[Any]] = defaultdict(list)
    for event in events:
        by_session[event.session].append(event)
    assert set(by_session) == {p.session for p in plans}
    for plan in plans:
        assert by_session[plan.session] == session_events(plan)
        check_session(by_session[plan.session])
    stamps = [e.ts for e in events]
    assert stamps == sorted(stamps)
    # Interleaved, not concatenated: sessions overlap in time.
    switches = sum(a.session != b.session for a, b in pairwise(events))
    assert switches > len(events) // 4


# ------------------------------------------------------------------ planted shapes


@pytest.mark.parametrize("mode", ["warn", "enforce"])
@pytest.mark.parametrize("kind", FAILURES, ids=str)
def test_failure_shape_triggers_exactly_its_signals(kind: Scenario, mode: str):
    expected = PLANTED[kind]
    if missing(expected):
        pytest.skip(f"not registered yet: {sorted(missing(expected))}")
    for seed in SEEDS:
        outputs = run(session(kind, seed), merge({"mode": mode}, PLANTED_POLICY.get(kind, {})))
        counts = signal_counts(outputs)
        assert set(counts) == expected, (seed, counts)
        assert all(n == 1 for n in counts.values()), ("one behaviour, one alert", seed, counts)


@pytest.mark.parametrize("kind", FAILURES, ids=str)
def test_critical_planted_findings_trip_under_enforce(kind: Scenario):
    if missing(PLANTED[kind]):
        pytest.skip(f"not registered yet: {sorted(missing(PLANTED[kind]))}")
    outputs = run(session(kind, 0), merge({"mode": "enforce"}, PLANTED_POLICY.get(kind, {})))
    critical = {o.signal for o in outputs if isinstance(o, Alert) and o.severity == "critical"}
    critical.discard(HALT_IGNORED)
    tripped = {o.signal for o in outputs if isinstance(o, GuardrailTrip)}
    assert tripped == critical


def test_failure_shapes_need_their_policy():
    """Without a ceiling the cost runaway is just an expensive session."""
    for seed in SEEDS:
        assert not signal_counts(run(session(Scenario.COST_RUNAWAY, seed)))


@pytest.mark.parametrize("kind", HEALTHY, ids=str)
def test_healthy_shape_is_silent_under_default_policy(kind: Scenario):
    for seed in range(40):
        assert run(session(kind, seed)) == [], seed


@pytest.mark.parametrize("kind", HEALTHY, ids=str)
def test_healthy_shape_is_silent_under_the_planted_policies(kind: Scenario):
    """A healthy turn stays under the cost ceiling and verifies what it changes."""
    policy = usable_policies()
    for seed in range(20):
        assert run(session(kind, seed), policy) == [], seed


def test_mixed_fleet_alerts_only_where_planted():
    """Default signal set plus the cost ceiling: each session raises its planted signals.

    Shapes planted for an opt-in signal stay silent here (the signal is off).
    Opt-in signals are left out because they may rightly flag other failure
    shapes too (a stream of unverified ``mark_task_done`` writes, for one).
    """
    opt_in = {cls.id for cls in signal_classes() if not cls.default_enabled}

    def expected(kind: Scenario) -> frozenset[str]:
        emitters = {EMITTED_BY.get(s, s) for s in PLANTED[kind]}
        return frozenset() if emitters & opt_in else PLANTED[kind]

    plans = {p.session: p for p in plan_fleet(150, seed=11, loops_fraction=0.4)}
    policy = merge({"mode": "warn"}, PLANTED_POLICY[Scenario.COST_RUNAWAY])
    engine = Engine(PolicySet(policy))
    seen: dict[str, set[str]] = defaultdict(set)
    for event in fleet(150, seed=11, loops_fraction=0.4):
        for out in engine.process(event):
            if isinstance(out, Alert) and out.signal != HALT_IGNORED:
                seen[out.session].add(out.signal)
    for name, plan in plans.items():
        if missing(PLANTED[plan.kind]):
            continue
        assert seen.get(name, set()) == expected(plan.kind), (name, plan.kind)
    assert sum(bool(expected(p.kind)) for p in plans.values()) > 20, "the mix planted enough"
