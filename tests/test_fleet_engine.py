"""Fleet guardrails in the core and the session stage, without a broker: a session's spend
and tenant, the fleet halt and its release, and the facts the session stage publishes."""

from __future__ import annotations

import msgspec
import pytest

from streamguard.engine import Engine
from streamguard.events import (
    GuardrailReset,
    GuardrailTrip,
    Reset,
    ToolCall,
    Usage,
    decode_agent_event,
)
from streamguard.fleet_windows import HALTED, STARTED, TRIPPED, FleetLimit, FleetRule, decode_facts
from streamguard.kafka.fleet_facts import FactPublisher
from streamguard.kafka.metrics import Metrics
from streamguard.kafka.outbox import OutputRecord
from streamguard.policy import parse_policy_set

SCOPE = "spend:agent=bot"


def test_spend_and_tenant_are_part_of_the_session_and_its_snapshot() -> None:
    engine = Engine()
    engine.process(Usage(session="s", agent="bot", tenant="acme", cost_usd=0.5, input_tokens=10, output_tokens=2))
    engine.process(Usage(session="s", tenant="other", cost_usd=0.25, input_tokens=5))
    state = engine.sessions["s"]
    assert (state.tenant, state.spend_usd, state.spend_tokens) == ("acme", 0.75, 17)
    restored = Engine()
    restored.restore("s", engine.snapshot("s") or b"")
    assert (restored.sessions["s"].tenant, restored.sessions["s"].spend_usd) == ("acme", 0.75)


def test_the_tenant_is_bounded_like_every_name() -> None:
    with pytest.raises(msgspec.ValidationError):
        decode_agent_event(msgspec.json.encode({"type": "turn_start", "session": "s", "tenant": "t" * 257}))


def test_a_fleet_halt_holds_through_restore_and_session_resets_until_its_circuit_closes() -> None:
    policy = parse_policy_set('mode = "warn"')  # enforced whatever the session's mode
    engine = Engine(policy)
    engine.process(ToolCall(session="s", agent="bot", tool="read_file", args={}))
    (trip,) = engine.fleet_halt("s", SCOPE, 1, "over the limit", 10.0)
    assert isinstance(trip, GuardrailTrip)
    assert (trip.guardrail, trip.signal, trip.session_halted, trip.seq) == ("fleet", "fleet-circuit", True, None)
    assert engine.fleet_halt("s", SCOPE, 1, "again", 11.0) == []  # idempotent
    # Another engine (a restart, another instance) makes the same trip id.
    other = Engine(policy)
    other.process(ToolCall(session="s", agent="bot", tool="read_file", args={}))
    assert other.fleet_halt("s", SCOPE, 1, "over the limit", 10.0)[0].id == trip.id
    restored = Engine(policy)
    restored.restore("s", engine.snapshot("s") or b"")
    assert restored.sessions["s"].halted_by == ("fleet",)
    restored.control(Reset(session="s", guardrail="all"))
    assert restored.sessions["s"].halted_by == ("fleet",)  # the circuit's, not the session's
    assert restored.fleet_release("s", "other:agent=bot", 1, "closed", 12.0) == []
    (receipt,) = restored.fleet_release("s", SCOPE, 1, "closed", 12.0)
    assert isinstance(receipt, GuardrailReset) and receipt.guardrail == "fleet" and receipt.accepted
    assert restored.sessions["s"].halted_by == () and restored.sessions["s"].fleet_scope is None


def publisher(*rules: FleetRule) -> tuple[FactPublisher, list[OutputRecord]]:
    records: list[OutputRecord] = []
    return FactPublisher(list(rules), "facts", Metrics(), records.append), records


RULES = (
    FleetRule(name="spend", limits=[FleetLimit(metric="spend_usd", above=1)]),
    FleetRule(name="tenants", by="tenant", limits=[FleetLimit(metric="tokens", above=1)]),
)


def test_spend_is_published_once_per_flush_as_cumulative_and_delta_per_scope() -> None:
    engine = Engine()
    facts, records = publisher(*RULES)
    for cost in (0.5, 0.25):
        engine.process(Usage(session="s", agent="bot", tenant="acme", cost_usd=cost, input_tokens=100))
        facts.pending["s"] = 100.0
    changed: list[str] = []
    assert facts.flush(engine, changed.append) == 1
    assert changed == ["s"]
    assert [r.key for r in records] == [b"spend:agent=bot", b"tenants:tenant=acme"]  # a record per scope
    first = decode_facts(records[0].value or b"")[0]
    assert (first.index, first.cum_usd, first.usd, first.cum_tokens, first.ts) == (2, 0.75, 0.75, 200, 100.0)
    assert facts.flush(engine, changed.append) == 0  # nothing new
    engine.process(Usage(session="s", cost_usd=1.0))
    facts.pending["s"] = 101.0
    facts.flush(engine, changed.append)
    second = decode_facts(records[2].value or b"")[0]
    assert (second.index, second.cum_usd, second.usd) == (3, 1.75, 1.0)


def test_start_trip_and_halt_are_published_at_once_and_fleet_trips_are_not() -> None:
    engine = Engine()
    facts, records = publisher(RULES[0])
    state_outputs = engine.process(Usage(session="s", agent="bot", cost_usd=0.5))
    facts.pending["s"] = 1.0
    facts.after_event(engine.sessions["s"], state_outputs, 1.0, started=True)
    assert "s" not in facts.pending  # its spend went with the start
    trip = GuardrailTrip(id="x", session="s", agent="bot", ts=2.0, seq=None, guardrail="watchdog",
                         signal="repeated-tool-call", scope="session", halted_turn=True,
                         session_halted=True, reason="")
    facts.after_event(engine.sessions["s"], [trip], 2.0, started=False)
    fleet = engine.fleet_halt("s", "spend:agent=bot", 1, "r", 3.0)
    facts.after_event(engine.sessions["s"], fleet, 3.0, started=False)
    flags = [decode_facts(r.value or b"")[0].flags for r in records]
    assert flags == [STARTED, TRIPPED | HALTED]
    assert decode_facts(records[0].value or b"")[0].usd == 0.5


def test_sessions_outside_every_rule_publish_nothing() -> None:
    engine = Engine()
    facts, records = publisher(FleetRule(name="triage", match="triage-*", limits=[FleetLimit(metric="tokens", above=1)]))
    engine.process(Usage(session="s", agent="coder", cost_usd=0.5))
    facts.after_event(engine.sessions["s"], [], 1.0, started=True)
    facts.pending["s"] = 1.0
    changed: list[str] = []
    assert facts.flush(engine, changed.append) == 0
    assert records == [] and changed == []


def test_a_flush_sends_the_facts_of_one_scope_together() -> None:
    engine = Engine()
    facts, records = publisher(RULES[0])
    for i in range(3):
        engine.process(Usage(session=f"s{i}", agent="bot", cost_usd=0.1))
        facts.pending[f"s{i}"] = 1.0
    assert facts.flush(engine, lambda s: None) == 3
    (record,) = records
    assert [f.session for f in decode_facts(record.value or b"")] == ["s0", "s1", "s2"]
