"""The per-session watchdog's own rules, with scripted signals standing in for detectors."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from msgspec import Struct

from streamguard.events import (
    Alert,
    Feedback,
    GuardrailReset,
    GuardrailTrip,
    Reset,
    Text,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnStart,
)
from streamguard.policy import Policy
from streamguard.signals.base import CallView, Finding, Signal
from streamguard.watchdog import HALT_IGNORED, Watchdog


class CountState(Struct, tag="scripted", gc=False):
    calls: int = 0
    latched: bool = False


class Scripted(Signal):
    """Trips with its configured severity/scope on a call to tool `fire`, once per run."""

    id = "scripted"
    severity = "critical"
    scope = "session"
    State = CountState

    def on_call(self, state: CountState, call: CallView) -> Finding | None:
        state.calls += 1
        if call.tool != self.trigger:
            state.latched = False
            return None
        if state.latched and not self.every_time:
            return None
        state.latched = True
        return Finding(
            signal=self.id, severity=self.severity, scope=self.scope,
            reason=f"{self.id} reason", guidance=f"{self.id} guidance",
        )

    trigger = "fire"
    every_time = False

    def is_latched(self, state: CountState) -> bool:
        return state.latched


def make(cls_id: str, severity: str, scope: str, trigger: str, **extra: Any) -> type[Signal]:
    state_cls = type(f"State_{cls_id}", (CountState,), {}, tag=cls_id)
    attrs = {"id": cls_id, "severity": severity, "scope": scope, "trigger": trigger,
             "State": state_cls, **extra}
    return type(f"Sig_{cls_id}", (Scripted,), attrs)


SessionCrit = make("sess-crit", "critical", "session", "loop")
TurnCrit = make("turn-crit", "critical", "turn", "noop", every_time=True)
Warn = make("warn-sig", "warn", "session", "sweep")
Quiet = make("quiet-sig", "warn", "session", "quiet", withdrawn_by_text=True)
Deferring = make("deferring", "critical", "session", "loop", defers_to=("sess-crit",))
ALL = [SessionCrit, TurnCrit, Warn, Quiet]


def dog(mode: str = "enforce", classes: list[type[Signal]] | None = None, **policy: Any) -> Watchdog:
    return Watchdog(Policy(mode=mode, **policy), classes=classes or ALL)


class Run:
    def __init__(self, watchdog: Watchdog) -> None:
        self.w = watchdog
        self.state = watchdog.new_state("s1", "agent-a")
        self.seq = 0
        self.out: list[Any] = []

    def feed(self, event: Any) -> list[Any]:
        got = self.w.process(self.state, event, 1000.0 + self.seq)
        self.out.extend(got)
        return got

    def call(self, tool: str) -> list[Any]:
        self.seq += 1
        return self.feed(ToolCall(session="s1", tool=tool, args={"n": self.seq}, seq=self.seq))

    def turn(self) -> list[Any]:
        self.seq += 1
        return self.feed(TurnStart(session="s1", seq=self.seq))

    def end(self) -> list[Any]:
        self.seq += 1
        return self.feed(TurnEnd(session="s1", seq=self.seq))

    def say(self, text: str = "status: reading the logs") -> list[Any]:
        self.seq += 1
        return self.feed(Text(session="s1", text=text, seq=self.seq))

    def reset(self, guardrail: str = "all", budget: float | None = None) -> list[Any]:
        got = self.w.reset(self.state, Reset(session="s1", guardrail=guardrail,
                                             additional_budget_usd=budget, by="ops"))
        self.out.extend(got)
        return got


def kinds(outputs: list[Any]) -> list[str]:
    return [type(o).__name__ for o in outputs]


def test_off_mode_runs_no_watchdog_signal():
    run = Run(dog("off"))
    run.turn()
    assert run.call("loop") == []
    assert run.w.signals == []


def test_warn_mode_alerts_but_never_queues_or_trips():
    run = Run(dog("warn"))
    run.turn()
    got = run.call("loop")
    assert kinds(got) == ["Alert"]
    assert got[0].severity == "critical" and got[0].reason == "sess-crit reason"
    assert run.state.feedback == ()
    assert run.turn() == []  # nothing delivered
    assert not run.state.halted


def test_feedback_mode_delivers_guidance_once_at_next_turn_start():
    run = Run(dog("feedback"))
    run.turn()
    run.call("loop")
    assert run.call("x") == []
    delivered = run.turn()
    assert kinds(delivered) == ["Feedback"]
    fb = delivered[0]
    assert fb.signals == ["sess-crit"]
    assert "- sess-crit: sess-crit guidance" in fb.text
    assert "sess-crit reason" not in fb.text  # the model reads guidance, never the operator text
    assert run.turn() == []  # delivered once
    assert not run.state.halted  # feedback never halts


def test_feedback_queue_keeps_newest_four():
    run = Run(dog("feedback"))
    run.turn()
    for _ in range(7):
        run.call("sweep")
        run.call("other")  # breaks the run so the scripted signal re-arms
    fb = run.turn()[0]
    assert len(fb.signals) == 4
    assert fb.text.count("- warn-sig:") == 4


def test_feedback_queue_size_is_configurable():
    run = Run(dog("feedback", feedback_queue_size=2))
    run.turn()
    for _ in range(5):
        run.call("sweep")
        run.call("other")
    assert len(run.turn()[0].signals) == 2


def test_text_withdraws_undelivered_note_of_withdrawable_signal_only():
    run = Run(dog("feedback"))
    run.turn()
    run.call("quiet")
    run.call("sweep")
    run.say()
    fb = run.turn()[0]
    assert fb.signals == ["warn-sig"]


@pytest.mark.parametrize("blank", ["", "   \n\t"])
def test_whitespace_text_is_not_speech(blank):
    run = Run(dog("feedback"))
    run.turn()
    run.call("quiet")
    run.say(blank)
    assert run.turn()[0].signals == ["quiet-sig"]


def test_non_assistant_roles_are_not_speech():
    run = Run(dog("feedback"))
    run.turn()
    run.call("quiet")
    for role in ("reasoning", "user", "system", "tool"):
        run.feed(Text(session="s1", text="words", role=role))
    assert run.turn()[0].signals == ["quiet-sig"]


def test_enforce_session_critical_halts_once():
    run = Run(dog("enforce"))
    run.turn()
    got = run.call("loop")
    assert kinds(got) == ["Alert", "GuardrailTrip"]
    trip = got[1]
    assert trip.guardrail == "watchdog" and trip.scope == "session"
    assert trip.session_halted and trip.halted_turn
    assert run.state.halted_by == ("watchdog",)
    run.call("x")  # halt-ignored at the first call after the halt
    again = run.call("loop")
    assert kinds(again) == ["Alert"]  # alert again (new run), but no second trip


def test_enforce_warn_never_trips():
    run = Run(dog("enforce"))
    run.turn()
    assert kinds(run.call("sweep")) == ["Alert"]
    assert not run.state.halted


def test_halt_ignored_at_first_call_and_each_turn_start():
    run = Run(dog("enforce"))
    run.turn()
    run.call("loop")
    first = run.call("x")
    assert [o.signal for o in first] == [HALT_IGNORED]
    assert first[0].severity == "critical" and first[0].scope == "session"
    assert run.call("y") == []  # once per halt until the next turn start
    t = run.turn()
    assert [o.signal for o in t] == [HALT_IGNORED]
    assert t[0].detail["at"] == "turn_start"
    assert run.call("z") == []
    assert [o.signal for o in run.turn()] == [HALT_IGNORED]


def test_refused_turn_is_not_a_boundary_so_feedback_waits_for_reset():
    run = Run(dog("enforce"))
    run.turn()
    run.call("loop")
    refused = run.turn()
    assert kinds(refused) == ["Alert"]  # halt-ignored, no feedback delivered
    ack = run.reset("watchdog")
    assert ack[0].accepted and ack[0].still_halted_by == []
    delivered = run.turn()
    assert kinds(delivered) == ["Feedback"]  # the observation survived the reset
    assert delivered[0].signals == ["sess-crit"]


def test_turn_scope_cuts_turn_without_halting():
    run = Run(dog("enforce"))
    run.turn()
    got = run.call("noop")
    trip = got[1]
    assert trip.scope == "turn" and not trip.session_halted and trip.halted_turn
    assert "NOT halted" in trip.reason
    assert trip.consecutive_cuts == 1
    assert not run.state.halted


def test_a_turn_is_cut_once():
    run = Run(dog("enforce"))
    run.turn()
    run.call("noop")
    ignored = run.call("noop")  # the call after the cut: halt-ignored (turn scope), no second trip
    assert kinds(ignored) == ["Alert", "Alert"]
    assert ignored[0].signal == HALT_IGNORED and ignored[0].scope == "turn"
    assert run.state.cut_streak == 1


def test_three_consecutive_cut_turns_halt_the_session():
    run = Run(dog("enforce"))
    trips = []
    for _ in range(3):
        run.turn()
        trips += [o for o in run.call("noop") if isinstance(o, GuardrailTrip)]
        run.end()
    assert [t.session_halted for t in trips] == [False, False, True]
    assert trips[-1].scope == "session" and "3 turns in a row" in trips[-1].reason
    assert run.state.halted_by == ("watchdog",)


def test_clean_turn_clears_the_cut_count():
    run = Run(dog("enforce"))
    for pattern in ["cut", "cut", "clean", "cut", "cut"]:
        run.turn()
        run.call("noop" if pattern == "cut" else "x")
        run.end()
    assert not run.state.halted
    assert run.state.cut_streak == 2


def test_cut_count_without_turn_end_events():
    run = Run(dog("enforce"))
    for _ in range(3):
        run.turn()
        run.call("noop")
    assert run.state.halted


def test_escalation_threshold_is_configurable():
    run = Run(dog("enforce", halt_after_cut_turns=2))
    for _ in range(2):
        run.turn()
        run.call("noop")
    assert run.state.halted


def test_reset_clears_cut_count():
    run = Run(dog("enforce"))
    for _ in range(2):
        run.turn()
        run.call("noop")
    run.reset("watchdog")
    assert run.state.cut_streak == 0
    run.turn()
    run.call("noop")
    assert not run.state.halted


def test_non_escalating_cut_resets_detectors():
    run = Run(dog("enforce"))
    run.turn()
    run.call("a")
    run.call("noop")
    idx = [s.id for s in run.w.signals].index("sess-crit")
    assert run.state.signals[idx].calls == 0
    assert run.state.history == []


def test_deference_silences_while_owner_is_latched():
    run = Run(dog("warn", classes=[SessionCrit, Deferring]))
    run.turn()
    got = run.call("loop")
    assert [o.signal for o in got] == ["sess-crit"]


def test_deference_off_when_owner_not_enabled():
    run = Run(dog("warn", classes=[Deferring]))
    run.turn()
    assert [o.signal for o in run.call("loop")] == ["deferring"]


def test_watchdog_reset_refuses_budget():
    run = Run(dog("enforce"))
    ack = run.reset("watchdog", budget=5.0)[0]
    assert isinstance(ack, GuardrailReset) and not ack.accepted
    assert "cost_ceiling" in ack.reason


def test_cost_reset_with_budget_and_no_ceiling_is_refused():
    run = Run(dog("enforce"))
    ack = run.reset("cost_ceiling", budget=5.0)[0]
    assert not ack.accepted and "nothing to raise" in ack.reason


def test_output_ids_are_deterministic_and_distinct():
    def trace() -> list[Any]:
        run = Run(dog("enforce"))
        run.turn()
        run.call("loop")
        run.call("x")
        run.turn()
        return run.out

    a, b = trace(), trace()
    assert [o.id for o in a] == [o.id for o in b]
    assert len({o.id for o in a}) == len(a)


def test_outputs_carry_causing_seq_and_ts():
    run = Run(dog("enforce"))
    run.turn()
    got = run.call("loop")
    assert {o.seq for o in got} == {2}
    assert {o.ts for o in got} == {1002.0}
    assert {o.agent for o in got} == {"agent-a"}


def test_implicit_turn_boundary_from_turn_field():
    run = Run(dog("feedback"))
    run.feed(ToolCall(session="s1", tool="loop", turn=1))
    delivered = run.feed(ToolCall(session="s1", tool="x", turn=2))
    assert kinds(delivered) == ["Feedback"]


def test_snapshot_roundtrip_preserves_halt_and_queue():
    w = dog("enforce")
    run = Run(w)
    run.turn()
    run.call("loop")
    restored = w.decode_state(w.encode_state(run.state))
    assert restored == run.state
    assert restored.halted_by == ("watchdog",)


def test_restore_under_warn_does_not_resurrect_watchdog_halt():
    w = dog("enforce")
    run = Run(w)
    run.turn()
    run.call("loop")
    data = w.encode_state(run.state)
    assert dog("warn").decode_state(data).halted_by == ()


def _v1_snapshot(w: Watchdog, state: Any) -> bytes:
    """A snapshot as version 1 wrote it: core state, then a map of signal states."""
    core = msgspec.structs.replace(state, signals=[])
    by_id = {s.id: msgspec.Raw(msgspec.msgpack.encode(st))
             for s, st in zip(w.signals, state.signals, strict=True)}
    return msgspec.msgpack.encode([1, msgspec.Raw(msgspec.msgpack.encode(core)), by_id])


def test_version_1_snapshots_still_restore():
    w = dog("enforce")
    run = Run(w)
    run.turn()
    run.call("loop")
    run.call("sweep")
    restored = w.decode_state(_v1_snapshot(w, run.state))
    assert restored == run.state
    assert Watchdog.peek_agent(_v1_snapshot(w, run.state)) == "agent-a"


def test_snapshot_names_signals_so_policy_changes_restore_by_id():
    old = dog("enforce", classes=[SessionCrit, Warn, TurnCrit])
    run = Run(old)
    run.turn()
    run.call("loop")
    run.call("sweep")
    data = old.encode_state(run.state)
    # Different order, one signal gone, one new: each state finds its signal by id.
    new = dog("enforce", classes=[Quiet, TurnCrit, SessionCrit])
    restored = new.decode_state(data)
    by_id = dict(zip([s.id for s in new.signals], restored.signals, strict=True))
    assert by_id["sess-crit"] == run.state.signals[0]
    assert by_id["turn-crit"] == run.state.signals[2]
    assert by_id["quiet-sig"] == Quiet.State()
    assert restored.halted_by == ("watchdog",)


def test_snapshot_leaves_default_fields_out():
    w = dog("enforce")
    fresh = w.new_state("s1", "agent-a")
    data = w.encode_state(fresh)
    assert b"halt_reason" not in data and b"cut_streak" not in data
    assert w.decode_state(data) == fresh
    assert Watchdog.peek_agent(data) == "agent-a"


def test_snapshot_refuses_a_state_of_another_watchdog():
    state = dog("enforce", classes=[SessionCrit]).new_state("s1")
    with pytest.raises(ValueError, match="signal count"):
        dog("enforce").encode_state(state)


def test_unknown_snapshot_version_is_an_error():
    with pytest.raises(ValueError, match="unsupported snapshot version 9"):
        dog().decode_state(msgspec.msgpack.encode([9, [], {}]))


def test_result_and_alerts_types():
    run = Run(dog("warn"))
    run.turn()
    assert run.feed(ToolResult(session="s1", tool="t", result={"a": 1})) == []
    got = run.call("sweep")
    assert isinstance(got[0], Alert)
    assert not any(isinstance(o, Feedback) for o in run.out)


def test_a_turn_cut_on_a_session_halted_by_another_guardrail_says_it_stays_halted() -> None:
    from streamguard.engine import Engine
    from streamguard.events import GuardrailTrip, ToolCall, ToolResult, TurnStart, Usage
    from streamguard.policy import parse_policy_set

    engine = Engine(parse_policy_set('mode = "enforce"\n[cost_ceiling]\nmax_session_usd = 1.0\n'))
    engine.process(TurnStart(session="s", ts=100.0))
    outputs = engine.process(Usage(session="s", cost_usd=2.0, ts=101.0))
    assert any(isinstance(o, GuardrailTrip) and o.session_halted for o in outputs)
    state = engine.sessions["s"]
    assert state.halted_by == ("cost_ceiling",) and state.halted_at == 101.0
    trips = []
    for i in range(3):
        engine.process(ToolCall(session="s", tool="apply", args={"i": i}, ts=102.0 + i))
        trips += [
            o
            for o in engine.process(ToolResult(session="s", tool="apply", no_op=True, ts=102.5 + i))
            if isinstance(o, GuardrailTrip)
        ]
    (cut,) = [t for t in trips if t.guardrail == "watchdog"]
    assert cut.scope == "turn"
    assert "stays halted by cost_ceiling" in cut.reason and "NOT halted" not in cut.reason
    assert engine.sessions["s"].halted_at == 101.0  # the first halt's time is kept


def test_the_halt_time_survives_a_snapshot_and_goes_with_the_reset() -> None:
    from streamguard.engine import Engine
    from streamguard.events import Reset, ToolCall
    from streamguard.policy import parse_policy_set

    policy = parse_policy_set('mode = "enforce"\n')
    engine = Engine(policy)
    for i in range(5):
        engine.process(ToolCall(session="s", tool="read_file", args={"path": "a"}, ts=10.0 + i))
    assert engine.sessions["s"].halted_at == 14.0
    assert engine.describe("s")["halted_at"] == 14.0
    again = Engine(policy)
    again.restore("s", engine.snapshot("s"))
    assert again.sessions["s"].halted_at == 14.0
    again.control(Reset(session="s", by="ops"), 20.0)
    assert again.sessions["s"].halted_at is None and not again.sessions["s"].halted_by


def test_snapshots_from_a_newer_writer_with_an_unknown_field_still_decode() -> None:
    """Rule 1 of the snapshot format: a field added later is ignored by older readers."""
    import msgspec

    from streamguard.events import ToolCall
    from streamguard.snapshot import SNAPSHOT_VERSION
    from streamguard.watchdog import Watchdog

    watchdog = Watchdog()
    state = watchdog.new_state("s", "coder")
    watchdog.process(state, ToolCall(session="s", tool="ls", args={"p": 1}), 5.0)
    version, ids, body = msgspec.msgpack.decode(watchdog.encode_state(state))
    assert version == SNAPSHOT_VERSION and "halted_at" not in body  # defaults are left out
    body["a_field_from_the_future"] = [1, 2, 3]
    restored = watchdog.decode_state(msgspec.msgpack.encode([version, ids, body]))
    assert watchdog.encode_state(restored) == watchdog.encode_state(state)


def test_the_signal_registry_is_checked() -> None:
    import pytest

    from streamguard.signals import RegistryError, check_registry, signal_classes

    classes = signal_classes()
    check_registry(classes)  # the shipped order holds
    ids = [c.id for c in classes]
    repeat = classes[ids.index("repeated-tool-call")]
    dominant = classes[ids.index("dominant-tool-call")]
    with pytest.raises(RegistryError, match="comes after it"):
        check_registry([dominant, repeat])  # dominant defers to the repeat rule
    with pytest.raises(RegistryError, match="registered twice"):
        check_registry([repeat, repeat])

    class Orphan(repeat):  # type: ignore[misc, valid-type]
        id = "orphan"
        defers_to = ("no-such-signal",)

    with pytest.raises(RegistryError, match="not a signal"):
        check_registry([repeat, Orphan])
