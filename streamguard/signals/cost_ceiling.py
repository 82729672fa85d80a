"""``cost-ceiling``: dollar bounds on a turn and on a session.

What it catches
    Spend that keeps climbing: a loop the behavioural signals have not named
    yet, a model gone off the rails, an unexpectedly expensive prompt. The
    loop detectors bound *behaviour*; this bounds the *outcome*. Spend comes
    from ``usage`` events: ``cost_usd`` is the cost of the model call that the
    event reports, and the session total is their sum.

Bounds and why
    ``max_turn_usd`` caps the spend of one turn (session total minus the total
    at the turn's start); ``max_session_usd`` caps the session total. Both are
    off (0) by default: a dollar figure is a budget decision, not something a
    library can guess. A bound trips when spend is **at or above** it, checked on
    every ``usage`` event — in-turn, so a runaway turn is stopped while it is
    still spending rather than billed after it ends. Usage that arrives after a
    turn's end still counts toward that turn (the settle pass): the baseline
    moves only at the next turn start. The per-turn bound needs a baseline, so it
    is evaluated only once a turn start has been seen; restored spend never
    counts toward a turn this instance did not see begin.

Severity and scope
    Always critical, always enforced while configured, whatever the watchdog
    mode — a ceiling whose whole job is to stop spending is not advisory.
    A per-turn trip cuts that turn and nothing else (one expensive turn in a
    long unattended run is no reason to end the run); three turns in a row that
    each end in a per-turn trip halt the session, because a driver that simply
    re-drives would otherwise turn a hard stop into an unbounded spend loop. A
    per-session trip halts the session.

Resets
    Bump-only. Spend is never zeroed: ``additional_budget_usd`` raises the
    session ceiling and the total keeps counting the same dollars. A reset of a
    per-session trip that would re-trip at once (spend at or above the ceiling
    plus the added budget) is refused, and the refusal says how much must be
    added; a refused reset changes nothing. A bare reset is enough after
    per-turn trips. Adding budget to a session bound nobody configured is
    refused: it would arm a bound out of thin air.

Known false positives
    None in the detection sense — spend is measured, not inferred. The cost is
    operational: a bound set too low halts legitimate long work.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from msgspec import Meta, Struct

from ..events import Usage
from .base import Finding, Signal, SignalConfig

SIGNAL_ID = "cost-ceiling"


class CostCeilingConfig(SignalConfig, kw_only=True, forbid_unknown_fields=True):
    max_turn_usd: Annotated[float, Meta(ge=0)] = 0.0
    max_session_usd: Annotated[float, Meta(ge=0)] = 0.0


class CostCeilingState(Struct, tag=SIGNAL_ID, gc=False, omit_defaults=True):
    spent: float = 0.0
    turn_baseline: float = 0.0
    baseline_set: bool = False
    granted: float = 0.0
    turn_tripped: bool = False
    session_tripped: bool = False


def _usd(value: float) -> str:
    return f"${value:.4f}"


class CostCeiling(Signal):
    id: ClassVar[str] = SIGNAL_ID
    severity = "critical"
    scope = "turn"
    guardrail: ClassVar[str] = "cost_ceiling"
    policy_table: ClassVar[str] = "cost_ceiling"
    resettable = True  # a halt by spend needs an operator (and maybe more budget)
    takes_budget = True
    State = CostCeilingState
    Config = CostCeilingConfig
    needs_fingerprint = False

    config: CostCeilingConfig

    def __init__(self, config: SignalConfig | None = None) -> None:
        super().__init__(config)
        self.max_turn = self.config.max_turn_usd
        self.max_session = self.config.max_session_usd
        self.active = self.max_turn > 0 or self.max_session > 0  # no bound set: nothing to do

    def session_cap(self, state: CostCeilingState) -> float:
        return self.max_session + state.granted

    def on_turn_start(self, state: CostCeilingState) -> Finding | None:
        state.turn_baseline = state.spent
        state.baseline_set = True
        state.turn_tripped = False
        return None

    def on_usage(self, state: CostCeilingState, event: Usage) -> Finding | None:
        cost = event.cost_usd
        if not cost:
            return None
        state.spent += cost
        if self.max_session > 0 and not state.session_tripped:
            cap = self.session_cap(state)
            if state.spent >= cap:
                state.session_tripped = True
                return self._finding(
                    "per_session",
                    "session",
                    f"per-session spend {_usd(state.spent)} reached the session ceiling "
                    f"{_usd(cap)}; the session is halted. A bare reset would re-trip at once: "
                    f"reset the cost_ceiling guardrail WITH additional budget "
                    f"(more than {_usd(state.spent - cap)}).",
                    {"spent_usd": state.spent, "ceiling_usd": cap, "granted_usd": state.granted},
                )
        if self.max_turn > 0 and state.baseline_set and not state.turn_tripped:
            turn_spend = state.spent - state.turn_baseline
            if turn_spend >= self.max_turn:
                state.turn_tripped = True
                return self._finding(
                    "per_turn",
                    "turn",
                    f"per-turn spend {_usd(turn_spend)} reached the per-turn ceiling "
                    f"{_usd(self.max_turn)}; the turn is cut. Three cut turns in a row halt the "
                    f"session (a bare reset of cost_ceiling clears that).",
                    {"turn_spent_usd": turn_spend, "ceiling_usd": self.max_turn,
                     "spent_usd": state.spent},
                )
        return None

    def _finding(self, bound: str, scope: str, reason: str, detail: dict[str, Any]) -> Finding:
        detail["bound"] = bound
        return Finding(
            signal=SIGNAL_ID,
            severity="critical",
            scope=scope,  # type: ignore[arg-type]
            reason=reason,
            guidance=(
                "This work has used up its spending budget. Stop making calls, and state what "
                "is done and what remains."
            ),
            detail=detail,
            guardrail="cost_ceiling",
            enforced=True,
            escalates=True,
            bound=bound,
        )

    def is_latched(self, state: CostCeilingState) -> bool:
        return state.turn_tripped or state.session_tripped

    def check_reset(self, state: CostCeilingState, additional_budget_usd: float | None) -> str | None:
        if additional_budget_usd is not None and self.max_session <= 0:
            return "no per-session cost ceiling is configured: nothing to raise"
        if state.session_tripped:
            cap = self.session_cap(state)
            added = additional_budget_usd or 0.0
            if state.spent >= cap + added:
                return (
                    f"session spend {_usd(state.spent)} is at or above the ceiling {_usd(cap)}"
                    + (f" even with {_usd(added)} added" if added else "")
                    + f"; a reset would re-trip at once: add more than {_usd(state.spent - cap)}"
                )
        return None

    def apply_reset(self, state: CostCeilingState, additional_budget_usd: float | None) -> Struct:
        if additional_budget_usd:
            state.granted += additional_budget_usd
        state.session_tripped = False
        state.turn_tripped = False
        # The next turn is measured from here, so a cut turn's spend is not charged twice.
        state.turn_baseline = state.spent
        return state

    def describe(self, state: CostCeilingState) -> dict[str, Any]:
        return {
            "max_session_usd": self.session_cap(state) if self.max_session > 0 else None,
            "spent_usd": state.spent,
        }
