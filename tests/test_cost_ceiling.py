"""Cost ceilings through the watchdog: trips, escalation, bump-only resets."""

from __future__ import annotations

from typing import Any

import pytest

from streamguard.events import (
    GuardrailReset,
    GuardrailTrip,
    Reset,
    ToolCall,
    TurnEnd,
    TurnStart,
    Usage,
)
from streamguard.policy import parse_policy_set
from streamguard.signals.cost_ceiling import CostCeiling, CostCeilingConfig
from streamguard.watchdog import HALT_IGNORED, Watchdog


def watchdog(mode: str = "warn", turn: float = 0.0, session: float = 0.0) -> Watchdog:
    policy = parse_policy_set(
        f'mode = "{mode}"\n[cost_ceiling]\nmax_turn_usd = {turn}\nmax_session_usd = {session}\n'
    ).base
    return Watchdog(policy)


class Run:
    def __init__(self, w: Watchdog) -> None:
        self.w = w
        self.state = w.new_state("c1")
        self.out: list[Any] = []

    def feed(self, event: Any) -> list[Any]:
        got = self.w.process(self.state, event)
        self.out += got
        return got

    def turn(self) -> list[Any]:
        return self.feed(TurnStart(session="c1"))

    def end(self) -> list[Any]:
        return self.feed(TurnEnd(session="c1"))

    def spend(self, usd: float) -> list[Any]:
        return self.feed(Usage(session="c1", cost_usd=usd, input_tokens=100))

    def reset(self, guardrail: str = "cost_ceiling", budget: float | None = None) -> GuardrailReset:
        got = self.w.reset(self.state, Reset(session="c1", guardrail=guardrail,
                                             additional_budget_usd=budget))
        self.out += got
        return got[0]


def trips(outputs: list[Any]) -> list[GuardrailTrip]:
    return [o for o in outputs if isinstance(o, GuardrailTrip)]


def test_inactive_without_bounds():
    w = watchdog(turn=0, session=0)
    assert "cost-ceiling" not in [s.id for s in w.signals]
    assert CostCeiling(CostCeilingConfig(max_turn_usd=-1)).active is False
    assert CostCeiling(CostCeilingConfig(max_turn_usd=0.1)).active
    assert CostCeiling(CostCeilingConfig(max_session_usd=1)).active


def test_per_turn_trip_reason_and_bound():
    run = Run(watchdog(turn=0.10))
    run.turn()
    got = run.spend(0.15)
    (trip,) = trips(got)
    assert trip.guardrail == "cost_ceiling" and trip.bound == "per_turn"
    assert trip.scope == "turn" and not trip.session_halted
    assert "per-turn" in trip.reason and "$0.1500" in trip.reason and "$0.1000" in trip.reason


def test_under_the_cap_does_not_trip():
    run = Run(watchdog(turn=0.10))
    run.turn()
    assert trips(run.spend(0.005)) == []


def test_equality_trips():
    run = Run(watchdog(turn=0.10))
    run.turn()
    assert len(trips(run.spend(0.10))) == 1


def test_enforced_even_in_warn_mode_and_off_mode():
    for mode in ("off", "warn"):
        run = Run(watchdog(mode=mode, session=1.0))
        run.turn()
        (trip,) = trips(run.spend(1.0))
        assert trip.session_halted and run.state.halted_by == ("cost_ceiling",)


def test_per_turn_needs_a_seen_turn_start():
    run = Run(watchdog(turn=0.10))
    assert trips(run.spend(0.5)) == []


def test_turn_baseline_moves_at_turn_start():
    run = Run(watchdog(turn=0.10))
    run.turn()
    run.spend(0.08)
    run.turn()
    assert trips(run.spend(0.08)) == []


def test_settle_pass_counts_usage_after_turn_end():
    run = Run(watchdog(turn=0.10))
    run.turn()
    run.spend(0.06)
    run.end()
    assert len(trips(run.spend(0.06))) == 1


def test_per_turn_trip_is_idempotent_within_a_turn():
    run = Run(watchdog(turn=0.10))
    run.turn()
    run.spend(0.2)
    assert trips(run.spend(0.2)) == []


def test_three_turn_trips_in_a_row_halt_and_bare_reset_clears():
    run = Run(watchdog(turn=0.10))
    for _ in range(3):
        run.turn()
        run.spend(0.2)
        run.end()
    final = trips(run.out)[-1]
    assert final.session_halted and final.consecutive_cuts == 3
    assert run.state.halted_by == ("cost_ceiling",)
    ack = run.reset()
    assert ack.accepted and run.state.halted_by == () and run.state.cut_streak == 0


def test_a_turn_within_bound_clears_escalation():
    run = Run(watchdog(turn=0.10))
    for cost in (0.2, 0.2, 0.01, 0.2, 0.2):
        run.turn()
        run.spend(cost)
        run.end()
    assert not run.state.halted


def test_session_trip_labelled_per_session_when_turn_is_under_its_cap():
    run = Run(watchdog(turn=1.0, session=0.5))
    run.turn()
    run.spend(0.3)
    run.end()
    run.turn()
    (trip,) = trips(run.spend(0.3))
    assert trip.bound == "per_session" and trip.session_halted and trip.scope == "session"
    assert "additional budget" in trip.reason


def test_bare_reset_of_session_trip_is_refused_and_changes_nothing():
    run = Run(watchdog(session=1.0))
    run.turn()
    run.spend(1.2)
    before = run.w.encode_state(run.state)
    ack = run.reset()
    assert not ack.accepted
    assert "add more than $0.2000" in ack.reason
    assert ack.max_session_usd == 1.0
    assert ack.still_halted_by == ["cost_ceiling"]
    # A refusal changes nothing except the applied-event counter.
    after = run.w.decode_state(run.w.encode_state(run.state))
    restored = run.w.decode_state(before)
    restored.applied = after.applied
    assert after == restored


@pytest.mark.parametrize("budget", [0.1, 0.2])
def test_reset_with_too_little_budget_is_refused(budget):
    run = Run(watchdog(session=1.0))
    run.turn()
    run.spend(1.2)
    assert not run.reset(budget=budget).accepted


def test_reset_with_enough_budget_raises_ceiling_and_keeps_spend():
    run = Run(watchdog(session=1.0))
    run.turn()
    run.spend(1.2)
    ack = run.reset(budget=0.5)
    assert ack.accepted and ack.max_session_usd == pytest.approx(1.5)
    assert run.state.halted_by == ()
    idx = [s.id for s in run.w.signals].index("cost-ceiling")
    assert run.state.signals[idx].spent == pytest.approx(1.2)
    run.turn()
    assert trips(run.spend(0.2)) == []
    (trip,) = trips(run.spend(0.1))
    assert trip.bound == "per_session"


def test_budget_on_watchdog_reset_is_refused():
    run = Run(watchdog(session=1.0))
    assert not run.reset(guardrail="watchdog", budget=1.0).accepted


def test_budget_without_session_bound_is_refused():
    run = Run(watchdog(turn=1.0))
    ack = run.reset(budget=1.0)
    assert not ack.accepted and "nothing to raise" in ack.reason


def test_watchdog_reset_neither_clears_nor_is_blocked_by_cost_halt():
    run = Run(watchdog(mode="enforce", session=1.0))
    run.turn()
    run.spend(2.0)
    ack = run.reset(guardrail="watchdog")
    assert ack.accepted
    assert ack.still_halted_by == ["cost_ceiling"]
    assert "still halted by cost_ceiling" in ack.reason


def test_all_reset_refused_when_cost_part_would_retrip():
    run = Run(watchdog(mode="enforce", session=1.0))
    run.turn()
    run.spend(2.0)
    assert not run.reset(guardrail="all").accepted
    assert run.state.halted_by == ("cost_ceiling",)


def test_cost_halt_gets_halt_ignored():
    run = Run(watchdog(session=1.0))
    run.turn()
    run.spend(2.0)
    got = run.feed(ToolCall(session="c1", tool="read_file"))
    assert [o.signal for o in got] == [HALT_IGNORED]
    assert [o.signal for o in run.turn()] == [HALT_IGNORED]


def test_snapshot_restores_spend_and_granted_budget():
    run = Run(watchdog(session=1.0))
    run.turn()
    run.spend(1.2)
    run.reset(budget=0.5)
    restored = run.w.decode_state(run.w.encode_state(run.state))
    assert restored == run.state


def test_cost_halt_not_restored_when_no_ceiling_configured():
    run = Run(watchdog(session=1.0))
    run.turn()
    run.spend(2.0)
    data = run.w.encode_state(run.state)
    assert watchdog(session=0).decode_state(data).halted_by == ()
