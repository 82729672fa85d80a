"""The engine: sessions, seq de-duplication, policy per agent, snapshots."""

from __future__ import annotations

import pytest

from streamguard.engine import Engine
from streamguard.events import Reset, ToolCall, TurnStart
from streamguard.policy import parse_policy_set


def call(session: str, tool: str, seq: int | None = None, agent: str | None = None, **args):
    return ToolCall(session=session, tool=tool, args=args or {"path": "main.go"}, seq=seq, agent=agent)


def test_replayed_seq_is_skipped_and_counted():
    engine = Engine()
    engine.process(call("a", "read_file", seq=1))
    engine.process(call("a", "read_file", seq=2))
    assert engine.process(call("a", "read_file", seq=2)) == []
    assert engine.process(call("a", "read_file", seq=1)) == []
    assert engine.stats.replays_skipped == 2
    assert engine.sessions["a"].last_seq == 2


def test_seq_is_per_session():
    engine = Engine()
    engine.process(call("a", "t", seq=5))
    engine.process(call("b", "t", seq=1))
    assert engine.stats.replays_skipped == 0


def test_events_without_seq_are_never_deduplicated():
    engine = Engine()
    for _ in range(5):
        engine.process(call("a", "read_file"))
    assert engine.stats.events == 5


def test_sessions_are_independent():
    engine = Engine()
    outs = []
    for i in range(5):
        outs += engine.process(call("a", "read_file"))
        outs += engine.process(call("b", "read_file", path=f"f{i}.go"))
    assert {o.session for o in outs} == {"a"}


def test_agent_overrides_select_policy():
    policies = parse_policy_set('mode = "enforce"\n[[agents]]\nmatch = "lab-*"\nmode = "warn"\n')
    engine = Engine(policies)
    for s, agent in (("p", "prod-1"), ("l", "lab-1")):
        engine.process(TurnStart(session=s, agent=agent))
        for _ in range(5):
            engine.process(call(s, "read_file", agent=agent))
    assert engine.is_halted("p")
    assert not engine.is_halted("l")
    assert engine.watchdog_for("lab-9") is engine.watchdog_for("lab-1")


def test_first_agent_name_sticks():
    engine = Engine(parse_policy_set('[[agents]]\nmatch = "x"\nmode = "off"\n'))
    engine.process(call("s", "t", agent="y"))
    engine.process(call("s", "t", agent="x"))
    assert engine.sessions["s"].agent == "y"


def test_snapshot_restore_into_another_engine():
    a = Engine()
    for _ in range(3):
        a.process(call("s", "read_file", seq=None))
    data = a.snapshot("s")
    b = Engine()
    b.restore("s", data)
    assert b.sessions["s"] == a.sessions["s"]
    outs_a = [o.id for _ in range(2) for o in a.process(call("s", "read_file"))]
    outs_b = [o.id for _ in range(2) for o in b.process(call("s", "read_file"))]
    assert outs_a == outs_b and outs_a


def test_restore_checks_session_id():
    a = Engine()
    a.process(call("s", "t"))
    with pytest.raises(ValueError):
        Engine().restore("other", a.snapshot("s"))


def test_unknown_session_snapshot_is_none_and_evict_counts():
    engine = Engine()
    assert engine.snapshot("nope") is None
    engine.process(call("s", "t"))
    engine.evict("s")
    assert "s" not in engine.sessions and engine.stats.sessions_evicted == 1


def test_control_reset_for_unknown_session_is_acknowledged():
    engine = Engine()
    (ack,) = engine.control(Reset(session="new", guardrail="watchdog"))
    assert ack.accepted and ack.session == "new"


def test_would_trip_previews_without_mutation():
    engine = Engine(parse_policy_set('[signals.window-repeat]\nenabled = true\n'))
    engine.process(call("s", "read_file"))
    assert engine.would_trip(call("s", "read_file")) == []
    engine.process(call("s", "read_file"))
    assert engine.would_trip(call("s", "read_file")) == ["window-repeat"]
    engine.process(call("s", "read_file"))
    engine.process(call("s", "read_file"))
    before = engine.snapshot("s")
    preview = engine.would_trip(call("s", "read_file"))
    assert "repeated-tool-call" in preview
    assert engine.would_trip(call("s", "grep", pattern="x")) == []
    assert engine.snapshot("s") == before  # nothing moved
    assert engine.process(call("s", "read_file"))[0].signal == "repeated-tool-call"


def test_would_trip_for_unknown_session_creates_nothing():
    engine = Engine()
    assert engine.would_trip(call("new", "read_file")) == []
    assert "new" not in engine.sessions


@pytest.mark.parametrize("overrides", ["", '[[agents]]\nmatch = "lab-*"\nmode = "warn"\n'])
def test_a_session_takes_the_agent_and_tenant_its_events_name_first_whatever_the_policy(overrides: str) -> None:
    """The first event names neither; later ones do. With [[agents]] overrides or
    without, the session takes both (its tenant decides the fleet scopes its spend
    counts toward; its agent is what its outputs carry)."""
    from streamguard.events import Alert, ToolCall, TurnStart
    from streamguard.policy import parse_policy_set

    engine = Engine(parse_policy_set('mode = "warn"\n' + overrides))
    engine.process(TurnStart(session="s"))
    outputs = []
    for _ in range(5):
        outputs += engine.process(ToolCall(session="s", agent="bot", tenant="acme", tool="read_file", args={"p": 1}))
    state = engine.sessions["s"]
    assert (state.agent, state.tenant) == ("bot", "acme")
    assert {o.agent for o in outputs if isinstance(o, Alert)} == {"bot"}


def test_a_session_evicted_and_seen_again_gets_new_output_ids() -> None:
    """Output ids name the session's state (its first event's time), not only its
    name and count: a nightly session evicted between runs trips at the same count
    again, and a controller remembering the first night's id dropped the second's."""
    from streamguard.events import GuardrailTrip, ToolCall, TurnStart

    def night(engine: Engine, start: float) -> list[str]:
        ids = []
        engine.process(TurnStart(session="s-nightly"), start)
        for n in range(6):
            ids += [o.id for o in engine.process(
                ToolCall(session="s-nightly", tool="read_file", args={"path": "a.py"}), start + n + 1)
                if isinstance(o, GuardrailTrip)]
        return ids

    engine = Engine()
    first = night(engine, 1_000.0)
    engine.evict("s-nightly")
    second = night(engine, 90_000.0)
    assert first and second and set(first).isdisjoint(second)
    replayed = night(Engine(), 1_000.0)
    assert replayed == first  # the same input, the same ids


def test_a_state_made_by_an_operators_reset_is_born_at_it() -> None:
    """A halted session evicted while idle, reset by its operator, then back at work:
    its new state is born at the reset, so its outputs and fleet facts are its own."""
    from streamguard.events import GuardrailTrip, Reset, ToolCall

    def life(engine: Engine, start: float) -> list[str]:
        engine.control(Reset(session="s", guardrail="all"), start)
        return [o.id for n in range(6) for o in engine.process(
            ToolCall(session="s", tool="read_file", args={"path": "a.py"}), start + n + 1)
            if isinstance(o, GuardrailTrip)]

    engine = Engine()
    first = life(engine, 1_000.0)
    assert engine.sessions["s"].born == 1_000.0
    engine.evict("s")
    second = life(engine, 90_000.0)
    assert engine.sessions["s"].born == 90_000.0
    assert first and second and set(first).isdisjoint(second)


def test_the_same_stamped_reset_delivered_twice_raises_a_budget_once() -> None:
    """A reset re-routed to its session's home partition can be copied there twice
    (the copy acknowledged, the original's offset not yet committed, a crash): the
    second copy, the operator's own stamp and all, is skipped. Two resets stamped
    apart are two."""
    from streamguard.events import GuardrailReset, Reset, Usage
    from streamguard.policy import parse_policy_set

    engine = Engine(parse_policy_set('mode = "enforce"\n[cost_ceiling]\nmax_session_usd = 1.0\n'))
    engine.process(Usage(session="s", cost_usd=1.2), 100.0)
    reset = Reset(session="s", guardrail="cost_ceiling", additional_budget_usd=1.0, by="oncall", ts=200.0)
    first = engine.control(reset, 201.0)
    again = engine.control(reset, 260.0)
    assert [type(o) for o in first] == [GuardrailReset] and again == []
    assert first[0].max_session_usd == 2.0
    later = engine.control(Reset(session="s", guardrail="cost_ceiling", additional_budget_usd=1.0, by="oncall", ts=300.0))
    assert later[0].max_session_usd == 3.0
