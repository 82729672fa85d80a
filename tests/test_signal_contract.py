"""The signal contract: what every signal declares, how a config is resolved, how
guardrails reset, and the mechanics written once in ``signals/base.py``."""

from __future__ import annotations

import sys
from typing import Any, get_args

import msgspec
import pytest
from msgspec import Struct

from streamguard.engine import Engine
from streamguard.events import Alert, GuardrailTrip, Reset, ResetTarget, ToolCall, ToolResult, Usage
from streamguard.fleet import fleet
from streamguard.policy import Policy, parse_policy_set
from streamguard.signals import RegistryError, check_registry, check_signal, signal_classes
from streamguard.signals.base import (
    HALT_IGNORED,
    NAME_LIMIT,
    CallView,
    Finding,
    Signal,
    SignalConfig,
    alert_ids,
    field_default,
    previews,
    streak_tools,
    within_bounds,
)
from streamguard.signals.context_budget import ContextBudget
from streamguard.signals.cost_ceiling import CostCeiling
from streamguard.signals.window_repeat import WindowRepeat
from streamguard.watchdog import Watchdog

ALL_ON = """
[signals.window-repeat]
enabled = true
[verification]
enabled = true
[cost_ceiling]
max_turn_usd = 0.05
max_session_usd = 5.0
"""


# ------------------------------------------------------------------ declarations


class ProbeState(Struct, tag="probe", gc=False, omit_defaults=True):
    calls: int = 0


class Probe(Signal):
    """A minimal signal that keeps the contract; the cases below each break one rule."""

    id = "probe"
    severity = "warn"
    State = ProbeState

    def on_call(self, state: ProbeState, call: CallView) -> Finding | None:
        state.calls += 1
        return None


def variant(**members: Any) -> type[Signal]:
    return type("Variant", (Probe,), members)


class UntaggedState(Struct, gc=False):
    calls: int = 0


class MistaggedState(Struct, tag="repeated-tool-call", gc=False):
    calls: int = 0


class NoDefaultState(Struct, tag="probe", gc=False):
    calls: int


class ByConfig(Probe):
    @property
    def needs_pairing(self) -> bool:  # type: ignore[override]
        return True


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        (ByConfig, r"`needs_pairing` must be a bool \(got property\); set it in __init__"),
        (variant(needs_fingerprint="yes"), r"`needs_fingerprint` must be a bool"),
        (variant(needs_payload=True), r"`needs_payload` is not a member the watchdog reads"),
        (variant(on_call=None), r"`on_call` must be a method"),
        (variant(severity="fatal"), r"`severity` must be one of"),
        (variant(scope="fleet"), r"`scope` must be one of"),
        (variant(id=""), r"`id` must be a non-empty string"),
        (variant(State=UntaggedState), r"`State` must be tagged with the signal id"),
        (variant(State=MistaggedState), r"tagged with the signal id .*snapshots carry the tag"),
        (variant(State=NoDefaultState), r"every `State` field needs a default.*calls has none"),
        (variant(State=dict), r"`State` must be a msgspec Struct"),
        (variant(Config=Struct), r"`Config` must be a subclass of SignalConfig"),
        (variant(defers_to=["repeated-tool-call"]), r"`defers_to` must be a tuple"),
        (variant(alert_ids=("probe", "")), r"`alert_ids` must be a tuple of non-empty strings"),
        (variant(alert_ids=(HALT_IGNORED,)), r"is the watchdog's own"),
        (variant(resettable=True), r"only a guardrail .* is `resettable`"),
        (variant(guardrail="probe_budget", takes_budget=True), r"`takes_budget` needs `resettable`"),
    ],
)
def test_a_signal_that_declares_a_member_wrongly_is_refused(cls: type[Signal], message: str) -> None:
    with pytest.raises(RegistryError, match=message):
        check_signal(cls)
    with pytest.raises(RegistryError, match=message):
        check_registry([*signal_classes(), cls])


def test_the_probe_itself_keeps_the_contract() -> None:
    check_signal(Probe)
    check_registry([*signal_classes(), Probe])


def test_alert_ids_and_policy_tables_belong_to_one_signal() -> None:
    classes = signal_classes()
    pressure = variant(alert_ids=("context-pressure",))
    with pytest.raises(RegistryError, match="'probe' emits alert id 'context-pressure', which "
                                            "'context-budget' emits too"):
        check_registry([*classes, pressure])
    shadow = variant(policy_table="cost_ceiling")
    with pytest.raises(RegistryError, match="policy table 'cost_ceiling', which 'cost-ceiling'"):
        check_registry([*classes, shadow])


def test_the_shipped_signals_declare_their_alert_ids() -> None:
    by_id = {c.id: c for c in signal_classes()}
    assert alert_ids(by_id["verification"]) == (
        "write-without-target", "unverified-write", "unverified-final-answer",
    )
    assert alert_ids(by_id["context-budget"]) == ("context-pressure", "context-budget")
    assert alert_ids(by_id["repeated-tool-call"]) == ("repeated-tool-call",)


def test_every_alert_and_trip_of_a_fleet_is_declared_by_the_signal_that_raised_it() -> None:
    owner = {alert: cls for cls in signal_classes() for alert in alert_ids(cls)}
    engine = Engine(parse_policy_set(ALL_ON, "all-on"))
    seen: set[str] = set()
    for event in fleet(150, seed="contract", loops_fraction=0.6):
        if isinstance(event, ToolCall) and event.session in engine.sessions:
            before = engine.snapshot(event.session)
            engine.would_trip(event)
            assert engine.snapshot(event.session) == before  # a preview changes nothing
        for output in engine.process(event):
            if isinstance(output, Alert) and output.signal != HALT_IGNORED:
                assert output.signal in owner, output.signal
                seen.add(output.signal)
            elif isinstance(output, GuardrailTrip) and output.signal != HALT_IGNORED:
                assert owner[output.signal].guardrail == output.guardrail
    assert len(seen) >= 10  # the fleet exercised most of the registry


def test_watchdog_reads_declared_members_only() -> None:
    # A repeat rule that is not result-aware needs no pairing and no payload hashes:
    # the capabilities follow the config, set in __init__.
    policy = msgspec.convert({"signals": {"repeated-tool-call": {"result_aware": False}}}, Policy)
    repeat = next(s for s in Watchdog(policy).signals if s.id == "repeated-tool-call")
    assert (repeat.needs_pairing, repeat.needs_fingerprint) == (False, False)
    assert [s.id for s in Watchdog().signals if previews(s)] == [
        "repeated-tool-call", "alternating-tool-cycle", "dominant-tool-call", "write-cycle", "repeated-tool-name",
    ]


# ------------------------------------------------------------------ configs


def bounded_fields() -> list[tuple[type[SignalConfig], str, Any, Any]]:
    """(Config, field, ge, le) of every bounded number of every registered signal."""
    found = []
    for cls in signal_classes():
        for name, meta in _metas(cls.Config):
            if meta.ge is not None or meta.le is not None:
                found.append((cls.Config, name, meta.ge, meta.le))
    return found


def _metas(config: type[SignalConfig]) -> list[tuple[str, msgspec.Meta]]:
    from typing import Annotated, get_origin, get_type_hints

    out = []
    for name, hint in get_type_hints(config, include_extras=True).items():
        if get_origin(hint) is Annotated and get_args(hint)[0] in (int, float):
            out += [(name, m) for m in get_args(hint)[1:] if isinstance(m, msgspec.Meta)]
    return out


BOUNDED = bounded_fields()


def test_every_bounded_number_is_found() -> None:
    names = {(c.__name__, n) for c, n, _, _ in BOUNDED}
    assert ("RepeatedToolCallConfig", "threshold") in names
    assert ("LongLoopConfig", "memory") in names
    assert ("CostCeilingConfig", "max_turn_usd") in names
    assert len(BOUNDED) >= 40


@pytest.mark.parametrize(("config", "name", "lower", "upper"), BOUNDED,
                         ids=[f"{c.__name__}.{n}" for c, n, _, _ in BOUNDED])
def test_one_place_for_bounds(config: type[SignalConfig], name: str, lower: Any, upper: Any) -> None:
    kind = type(field_default(config, name))
    if lower is not None:
        below = lower - 1
        with pytest.raises(msgspec.ValidationError):  # a policy saying it is refused...
            msgspec.convert({name: below}, config)
        assert getattr(within_bounds(config(**{name: below})), name) == lower  # ...hand-built, clamped
    if upper is not None:
        with pytest.raises(msgspec.ValidationError):
            msgspec.convert({name: upper + 1}, config)
        assert getattr(within_bounds(config(**{name: upper + 1})), name) == upper
    garbage = within_bounds(config(**{name: "not a number"}))
    assert getattr(garbage, name) == field_default(config, name)
    assert type(getattr(garbage, name)) is kind


@pytest.mark.parametrize("cls", signal_classes(), ids=lambda c: c.id)
def test_a_policy_config_resolves_to_itself(cls: type[Signal]) -> None:
    config = cls.Config()
    assert config.resolved() is config
    loaded = msgspec.convert({}, cls.Config)
    assert loaded.resolved() is loaded
    assert cls(loaded).config == loaded


def test_rules_across_fields_are_validate_for_a_policy_and_resolved_for_a_signal() -> None:
    from streamguard.signals.long_loop import LongLoop

    config = LongLoop.Config(window=8, threshold=20)
    with pytest.raises(ValueError, match="threshold"):
        config.validate()
    assert LongLoop(config).threshold == 8  # a hand-built config is repaired
    with pytest.raises(ValueError, match="threshold"):  # the crate's rule: refused
        WindowRepeat(WindowRepeat.Config(window=4, threshold=5))


def test_a_bare_config_gives_the_signals_defaults() -> None:
    for cls in signal_classes():
        signal = cls(SignalConfig(exempt_tools=["probe"]))
        assert isinstance(signal.config, cls.Config)
        assert signal.exempt >= {"probe"}


# ------------------------------------------------------------------ guardrail resets


def test_the_reset_targets_are_the_watchdog_and_the_resettable_guardrails() -> None:
    resettable = [c.guardrail for c in signal_classes() if c.resettable]
    assert set(get_args(ResetTarget)) == {"watchdog", "all", *resettable}
    guardrails = {c.guardrail: c for c in signal_classes() if c.guardrail != "watchdog"}
    assert set(guardrails) == {"cost_ceiling", "context_budget"}
    assert guardrails["cost_ceiling"].resettable and guardrails["cost_ceiling"].takes_budget
    assert not guardrails["context_budget"].resettable  # a turn cut needs no reset


def guardrail_watchdog() -> tuple[Watchdog, Any, int, int]:
    policy = msgspec.convert({"cost_ceiling": {"max_session_usd": 1.0}}, Policy)
    watchdog = Watchdog(policy)
    ids = [s.id for s in watchdog.signals]
    state = watchdog.new_state("s", "a")
    return watchdog, state, ids.index(CostCeiling.id), ids.index(ContextBudget.id)


def test_reset_all_goes_through_both_guardrails_interfaces() -> None:
    watchdog, state, cost, context = guardrail_watchdog()
    watchdog.process(state, Usage(session="s", model="m", input_tokens=1_000, cost_usd=2.0))
    watchdog.process(state, ToolResult(session="s", tool="read", result_bytes=250_000 * 3))
    assert state.halted_by == ("cost_ceiling",) and state.turn_cut == "context_budget"
    measured = msgspec.structs.asdict(state.signals[context])
    refused = watchdog.reset(state, Reset(session="s", guardrail="all"))[0]
    assert not refused.accepted and "add more than" in refused.reason  # the ceiling's own rule
    accepted = watchdog.reset(state, Reset(session="s", guardrail="all", additional_budget_usd=5))[0]
    assert accepted.accepted and accepted.max_session_usd == 6.0  # the ceiling's describe()
    assert not state.halted_by and not state.signals[cost].session_tripped
    # The context budget is no reset target: its cut and what it measured survive.
    assert state.turn_cut == "context_budget"
    assert msgspec.structs.asdict(state.signals[context]) == measured


class MeterState(Struct, tag="meter", gc=False):
    used: int = 0
    refuse: bool = False


class Meter(Signal):
    """A resettable guardrail of a test's own: the watchdog names no guardrail."""

    id = "meter"
    severity = "critical"
    scope = "session"
    guardrail = "meter"
    resettable = True
    State = MeterState

    def on_call(self, state: MeterState, call: CallView) -> Finding | None:
        state.used += 1
        if state.used != 2:
            return None
        return Finding(signal=self.id, severity="critical", reason="metered out",
                       guardrail=self.guardrail, enforced=True)

    def check_reset(self, state: MeterState, additional_budget_usd: float | None) -> str | None:
        return "the meter says no" if state.refuse else None

    def apply_reset(self, state: MeterState, additional_budget_usd: float | None) -> Struct:
        return MeterState(used=0)


def test_any_resettable_guardrail_is_reset_through_the_interface() -> None:
    watchdog = Watchdog(Policy(), classes=[Meter])
    state = watchdog.new_state("s", "a")
    for _ in range(2):
        watchdog.process(state, ToolCall(session="s", tool="t"))
    assert state.halted_by == ("meter",)
    state.signals[0].refuse = True
    ack = watchdog.reset(state, Reset(session="s", guardrail="all"))[0]
    assert not ack.accepted and "the meter says no" in ack.reason
    assert state.halted_by == ("meter",)
    state.signals[0].refuse = False
    ack = watchdog.reset(state, Reset(session="s", guardrail="all"))[0]
    assert ack.accepted and not state.halted_by and state.signals[0] == MeterState()
    assert watchdog.reset(state, Reset(session="s", guardrail="watchdog"))[0].accepted


# ------------------------------------------------------------------ shared mechanics


def test_streak_tools_keeps_distinct_short_interned_names() -> None:
    long_name = "t" * 100
    tools = streak_tools((), "read", 2)
    tools = streak_tools(tools, "read", 2)
    assert tools == ("read",)
    tools = streak_tools(tools, long_name, 2)
    assert len(tools) == 2 and len(tools[1].encode()) <= NAME_LIMIT
    assert streak_tools(tools, "grep", 2) is tools  # at most two
    built = "".join(["re", "ad"])
    assert streak_tools((), built, 3)[0] is sys.intern("read")


def test_a_signal_without_a_preview_never_trips_one() -> None:
    signal = Probe()
    state = signal.new_state()
    view = CallView(ToolCall(session="s", tool="t"), *_canonical("t"), [], None)
    assert not previews(signal) and signal.would_trip(state, view) is False
    assert state == ProbeState()


def _canonical(tool: str) -> tuple[Any, int]:
    from streamguard.canonical import canonicalize, stable_hash

    canonical = canonicalize(None)
    return canonical, stable_hash(tool, canonical.text)
