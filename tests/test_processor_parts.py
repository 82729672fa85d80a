"""Parts of the processor against what a hostile writer or client can send: the session table
restored from a changelog, and the HTTP endpoint."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from streamguard.engine import Engine
from streamguard.events import TurnStart
from streamguard.kafka.changelog import ChangelogEntry
from streamguard.kafka.sessions import OwnedPartition, PartitionStatus, SessionTable
from streamguard.policy import PolicySet

DAY = 86_400.0


def _fleet_processor(policy_text: str, now: float, status: PartitionStatus = PartitionStatus.ACTIVE
                     ) -> tuple[Any, OwnedPartition, list[Any]]:
    """A processor owning partition 0 of one, under a policy, at a fixed clock; its outputs
    are captured rather than sent. Returns the processor, its partition and the outputs."""
    from streamguard.kafka.config import ProcessorConfig
    from streamguard.kafka.processor import Processor
    from streamguard.policy import parse_policy_set

    processor = Processor(ProcessorConfig(), policy=parse_policy_set(policy_text), clock=lambda: now)
    processor.partition_count = 1
    part = processor.sessions.add_partition(0, status)

    async def no_send() -> None:
        return None

    processor._send_outbox = no_send
    emitted: list[Any] = []
    processor.outbox.emit = lambda output, ts: emitted.append(output)
    return processor, part, emitted


def _event_records(events: list[dict[str, Any]], first_offset: int = 0) -> list[Any]:
    """Events as the consumer hands them over: JSON values keyed by session."""
    import json
    from types import SimpleNamespace

    return [SimpleNamespace(offset=first_offset + n, key=event["session"].encode(), timestamp=1_000_000,
                            headers=[], value=json.dumps(event).encode())
            for n, event in enumerate(events)]


def test_a_restored_last_activity_from_the_future_does_not_block_eviction() -> None:
    engine = Engine(PolicySet())
    evicted: list[str] = []
    table = SessionTable(engine, lambda session, part: evicted.append(session), lambda kind: None)
    part = OwnedPartition(0, PartitionStatus.ACTIVE)
    table.partitions[0] = part
    now = 1_760_000_000.0
    entries = []
    for name, last_seen in [("forged", 1e300), ("nan", float("nan")), ("old-1", now - 2 * DAY),
                            ("old-2", now - 2 * DAY + 1)]:
        engine.process(TurnStart(session=name))
        entries.append((name, ChangelogEntry(1, 5, 0, last_seen, b"")))
    assert table.install(part, entries, now) == 4
    # a forged time reads as the restore's own: the old sessions behind it still expire
    assert table.meta["forged"].last_seen == now and table.meta["nan"].last_seen == now
    table.sweep(now + DAY / 2, idle_ttl=DAY, halted_ttl=7 * DAY, budget=100)
    assert evicted == ["old-1", "old-2"]
    table.sweep(now + 2 * DAY, idle_ttl=DAY, halted_ttl=7 * DAY, budget=100)
    assert sorted(evicted) == ["forged", "nan", "old-1", "old-2"]


async def test_the_endpoint_answers_a_request_line_past_its_limit_with_a_400() -> None:
    import asyncio

    from prometheus_client import CollectorRegistry

    from streamguard.kafka.health import HealthServer

    server = HealthServer(CollectorRegistry(), liveness=lambda: (True, ""), readiness=lambda: (True, ""))
    await server.start()
    try:
        async def ask(request: bytes) -> bytes:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(request)
            await writer.drain()
            answer = await asyncio.wait_for(reader.read(), 10)
            writer.close()
            return answer

        assert (await ask(b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 400")
        assert (await ask(b"GET /healthz HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 200")
    finally:
        await server.close()


def test_a_partition_holds_at_most_its_bound_and_never_evicts_a_halt_for_room() -> None:
    from streamguard.events import ToolCall

    engine = Engine(PolicySet())
    evicted: list[tuple[str, str]] = []
    dropped: list[str] = []
    table = SessionTable(engine, lambda session, part: dropped.append(session),
                         lambda kind: evicted.append((kind, "")), max_per_partition=3)
    part = OwnedPartition(0, PartitionStatus.ACTIVE)
    table.partitions[0] = part

    def record(session: str, now: float, *events: Any) -> None:
        for event in events or (TurnStart(session=session),):
            engine.process(event)
        table.touch(part, session, table.meta.get(session), now)

    # "halted" trips repeated-tool-call and is held halted
    record("halted", 1.0, *[ToolCall(session="halted", tool="read_file", args={"path": "a"}) for _ in range(5)])
    assert engine.is_halted("halted")
    for i, name in enumerate(["a", "b", "c", "d"]):
        record(name, 2.0 + i)
    # bound 3: the oldest idle ones went, the halt was parked (kept), the newest stays
    assert set(table.meta) == {"halted", "c", "d"} and engine.is_halted("halted")
    assert dropped == ["a", "b"] and [k for k, _ in evicted] == ["capacity", "capacity"]
    assert "a" not in engine.sessions  # its state is gone with it: memory, not only bookkeeping
    record("c", 10.0)  # activity moves a session to the back of the idle order
    record("e", 11.0)
    assert set(table.meta) == {"halted", "c", "e"}


class _Record:
    def __init__(self, key: bytes, value: bytes, offset: int) -> None:
        self.key, self.value, self.offset, self.headers = key, value, offset, []


def test_the_fleet_stage_forgets_idle_scopes_that_never_crossed_a_limit() -> None:
    from aiokafka import TopicPartition

    from streamguard.fleet_windows import Fact, FleetLimit, FleetRule, encode_facts
    from streamguard.kafka.config import ProcessorConfig
    from streamguard.kafka.fleet_stage import FleetStage
    from streamguard.kafka.metrics import Metrics

    clock = [1_800_000_000.0]
    rule = FleetRule(name="spend", by="tenant", window_s=3600.0,
                     limits=[FleetLimit(metric="spend_usd", above=100.0, action="halt")])
    stage = FleetStage(ProcessorConfig.build({}), [rule], Metrics(), clock=lambda: clock[0])
    tp = TopicPartition("fleet.facts", 0)
    scopes: dict[str, Any] = {}
    stage.scopes[0] = scopes

    def spend(tenant: str, usd: float, offset: int) -> None:
        scope = f"spend:tenant={tenant}"
        fact = Fact(kind="session", scope=scope, session=f"s-{tenant}", index=offset + 1,
                    ts=clock[0], flags=0, cum_usd=usd, usd=usd, cum_tokens=0, tokens=0)
        stage._apply(tp, _Record(scope.encode(), encode_facts([fact]), offset), scopes, clock[0], 300.0)

    for i in range(50):  # fifty invented tenants, a cent each
        spend(f"invented-{i}", 0.01, i)
    spend("crossed", 150.0, 50)  # one that crossed its limit: its circuit opened
    assert len(scopes) == 51
    for state in list(scopes.values()):
        stage._gauge(state)  # as a checkpoint sets them
    series = stage.metrics.fleet_window.collect()[0].samples
    assert any(s.labels["scope"] == "invented-3" for s in series)
    stage.dirty.clear()
    clock[0] += 3600.0  # within the window (and its skew): all kept
    stage._tick()
    assert len(scopes) == 51
    clock[0] += 3600.0  # past it: the fifty go, each with a tombstone; the crossed one stays
    stage._tick()
    assert set(scopes) == {"spend:tenant=crossed"}
    assert len(stage.dirty) == 50 and all(p == 0 for p in stage.dirty.values())
    assert stage.metrics.fleet_scopes_forgotten._value.get() == 50
    series = stage.metrics.fleet_window.collect()[0].samples
    assert not any(s.labels["scope"] == "invented-3" for s in series)  # its series went too
    kept = stage.metrics.scope_label("crossed")  # ("other": fifty names took the labels)
    assert any(s.labels["scope"] == kept for s in series)
    # a forgotten tenant that comes back starts afresh
    spend("invented-7", 0.02, 51)
    assert "spend:tenant=invented-7" in scopes


def _origins_from_states(table: SessionTable) -> dict[tuple[str | None, str | None], set[str]]:
    expected: dict[tuple[str | None, str | None], set[str]] = {}
    for session in table.meta:
        state = table.engine.sessions[session]
        expected.setdefault((state.agent, state.tenant), set()).add(session)
    return expected


_SESSION_OPS = st.lists(
    st.tuples(
        st.sampled_from(["event", "evict_idle", "drop", "drop_partition", "restore"]),
        st.integers(0, 11),  # session
        st.sampled_from([None, "coder", "triage"]),  # agent named by this event
        st.sampled_from([None, "acme", "globex"]),  # tenant named by this event
        st.integers(0, 1),  # partition
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(_SESSION_OPS)
def test_the_origin_index_always_matches_the_held_sessions_states(ops: list[Any]) -> None:
    """The sessions of each origin (agent, tenant), which a circuit change visits instead
    of every held session, are exactly the held sessions whose state has that origin,
    through arrivals, agents and tenants named late, evictions, drops and restores."""
    from streamguard.events import ToolCall
    from streamguard.policy import parse_policy_set

    # An [[agents]] override, so an agent (and tenant) named after a session's first
    # event is taken (engine._session): the index must follow the late name.
    engine = Engine(parse_policy_set('[[agents]]\nmatch = "lab-*"\nmode = "warn"\n'))
    table = SessionTable(engine, lambda session, part: None, lambda kind: None, max_per_partition=5)
    parts = {n: table.add_partition(n, PartitionStatus.ACTIVE) for n in (0, 1)}
    now = 1_000.0
    for op, number, agent, tenant, partition in ops:
        now += 10.0
        session = f"s{number}"
        meta = table.meta.get(session)
        part = parts.get(meta.partition if meta is not None else partition)
        if op == "event" and part is not None:
            engine.process(ToolCall(session=session, agent=agent, tenant=tenant, tool="t", args={"n": now}))
            table.touch(part, session, meta, now)
        elif op == "evict_idle":
            table.sweep(now, idle_ttl=25.0, halted_ttl=50.0, budget=3)
        elif op == "drop" and meta is not None:
            table.drop_session(session)
        elif op == "drop_partition" and partition in parts:
            table.drop_partition(partition)
            del parts[partition]
        elif op == "restore" and partition not in parts:
            parts[partition] = table.add_partition(partition, PartitionStatus.ACTIVE)
            restored = f"r{number}-p{partition}"  # a session lives on one partition
            engine.process(TurnStart(session=restored, agent=agent, tenant=tenant))
            table.install(parts[partition], [(restored, ChangelogEntry(1, 1, 0, now, b""))], now)
        got = {origin: set(members) for origin, members in table.by_origin.items()}
        assert got == _origins_from_states(table)


async def test_a_circuit_opening_halts_a_session_whose_tenant_was_named_after_its_first_event() -> None:
    """The processor keeps its held sessions' bookkeeping inline on its hot path: an agent
    and tenant named by a later event (an [[agents]] override makes the engine take them)
    must move the session to its origin there too, or an opening circuit of that tenant
    would not visit it (it would be tripped only at its next event)."""
    from aiokafka.structs import TopicPartition

    from streamguard.fleet_windows import CircuitRecord

    processor, part, emitted = _fleet_processor(
        '[[agents]]\nmatch = "lab-*"\nmode = "warn"\n'
        '[[fleet]]\nname = "spend"\nby = "tenant"\n[[fleet.limits]]\nmetric = "tokens"\nabove = 1\n',
        now=1000.0)
    tp = TopicPartition("agent.events", 0)
    processor._process_events(part, tp, _event_records([{"type": "turn_start", "session": "s1"}]))
    processor._process_events(part, tp, _event_records([{
        "type": "tool_call", "session": "s1", "agent": "coder", "tenant": "acme", "tool": "t", "args": {}}],
        first_offset=1))
    assert processor.engine.sessions["s1"].tenant == "acme"
    assert {origin: set(members) for origin, members in processor.sessions.by_origin.items()} == {
        ("coder", "acme"): {"s1"}}
    assert emitted == []  # naming the session's tenant emits nothing by itself

    circuit = CircuitRecord(scope="spend:tenant=acme", rule="spend", by="tenant", value="acme",
                            state="open", generation=1, reason="spend above 1")
    await processor.apply_circuit(circuit, None)
    assert processor.engine.sessions["s1"].halted_by == ("fleet",)
    assert [getattr(output, "session", None) for output in emitted] == ["s1"]


async def test_a_circuit_closed_while_a_partition_was_restoring_releases_its_sessions_once_active() -> None:
    """apply_circuit passes over partitions being restored; the restored session is
    released when its partition is applied to again, with its receipt, not left
    halted for good (a halted agent sends nothing that could release it)."""
    from types import SimpleNamespace

    from aiokafka.structs import TopicPartition

    from streamguard.fleet_windows import CircuitRecord

    policy = '[[fleet]]\nname = "spend"\nby = "tenant"\n[[fleet.limits]]\nmetric = "tokens"\nabove = 1\n'
    opened = CircuitRecord(scope="spend:tenant=acme", rule="spend", by="tenant", value="acme",
                           state="open", generation=1, reason="spend above 1")
    closed = CircuitRecord(scope="spend:tenant=acme", rule="spend", by="tenant", value="acme",
                           state="closed", generation=1, reason="closed by an operator")

    before, part, _ = _fleet_processor(policy, now=1000.0)
    before._process_events(part, TopicPartition("agent.events", 0), _event_records(
        [{"type": "tool_call", "session": "s1", "tenant": "acme", "tool": "t", "args": {}}]))
    await before.apply_circuit(opened, None)
    assert before.engine.sessions["s1"].halted_by == ("fleet",)
    snapshot = before.snapshot_record("s1", 0)[2]
    assert snapshot is not None

    after, restoring, emitted = _fleet_processor(policy, now=2000.0, status=PartitionStatus.RESTORING)
    after.circuits = SimpleNamespace(open={}, circuits={closed.scope: closed}, open_for=lambda scopes: None)
    await after.apply_circuit(closed, opened)  # the close arrives mid-restore: nothing held yet
    after.rebalancer._install(restoring, {"s1": snapshot})
    assert after.engine.sessions["s1"].halted_by == ("fleet",)
    restoring.status = PartitionStatus.ACTIVE
    after.partition_active(restoring)
    assert after.engine.sessions["s1"].halted_by == ()
    assert "s1" not in after.sessions.halted
    assert [type(output).__name__ for output in emitted] == ["GuardrailReset"]
    after.partition_active(restoring)  # a second pass finds nothing to release
    assert len(emitted) == 1


def test_sessions_that_all_get_halted_are_bounded_too() -> None:
    """Five identical calls halt a new session: a writer making halted sessions at
    line rate must not grow memory past the bound. Halts go for room only when no
    other session is left to evict, the least recently active first, counted."""
    from streamguard.events import ToolCall

    engine = Engine(PolicySet())
    evicted: list[str] = []
    table = SessionTable(engine, lambda session, part: None, evicted.append, max_per_partition=10)
    part = OwnedPartition(0, PartitionStatus.ACTIVE)
    table.partitions[0] = part
    for i in range(200):
        session = f"h{i}"
        for _ in range(5):
            engine.process(ToolCall(session=session, tool="read_file", args={"path": "a"}))
        table.touch(part, session, table.meta.get(session), float(i))
        assert engine.is_halted(session)
        assert len(part.sessions()) <= 10 and len(engine.sessions) <= 10
    assert set(table.meta) == {f"h{i}" for i in range(190, 200)}
    assert evicted == ["halted_capacity"] * 190


async def test_the_circuit_gauge_stays_up_while_any_scope_sharing_its_label_is_open() -> None:
    """Scopes past the label bound share scope="other": one of them closing must not
    clear the gauge (and the alert built on it) while another is still open."""
    from streamguard.fleet_windows import CircuitRecord
    from streamguard.kafka.config import ProcessorConfig
    from streamguard.kafka.processor import Processor

    processor = Processor(ProcessorConfig.build({"metrics_max_agents": 1}))

    def circuit(value: str, state: str) -> CircuitRecord:
        return CircuitRecord(scope=f"agent-spend:agent={value}", rule="agent-spend", by="agent",
                             value=value, state=state, generation=1, opened_at=1.0)

    def gauge(scope: str) -> float | None:
        return processor.metrics.registry.get_sample_value(
            "streamguard_fleet_circuit_open", {"rule": "agent-spend", "scope": scope})

    for value in ("a1", "a2", "a3"):
        await processor.apply_circuit(circuit(value, "open"), None)
    assert gauge("a1") == 1 and gauge("other") == 2
    await processor.apply_circuit(circuit("a3", "closed"), None)
    assert gauge("other") == 1  # a2 is still open
    await processor.apply_circuit(circuit("a2", "closed"), None)
    await processor.apply_circuit(circuit("a1", "closed"), None)
    assert gauge("other") == 0 and gauge("a1") == 0


async def test_a_revoked_fleet_stage_stops_exporting_its_scopes_window_values() -> None:
    """The scopes' next owner exports them; a value left behind would stand beside its
    own, and the dashboard takes the max over instances."""
    from streamguard.fleet_windows import new_scope, scope_key
    from streamguard.kafka.config import ProcessorConfig
    from streamguard.kafka.fleet_stage import FleetStage
    from streamguard.kafka.metrics import Metrics
    from streamguard.policy import parse_policy_set

    rules = parse_policy_set(
        '[[fleet]]\nname="agent-spend"\n[[fleet.limits]]\nmetric="sessions_started"\nabove=100\n'
    ).fleet
    metrics = Metrics()
    stage = FleetStage(ProcessorConfig(), rules, metrics)
    state = new_scope(scope_key(rules[0], "billing"), rules[0])
    stage.scopes[0] = {state.scope: state}
    stage._gauge(state)
    labels = {"rule": "agent-spend", "scope": "billing", "metric": "sessions_started"}
    assert metrics.registry.get_sample_value("streamguard_fleet_window_value", labels) == 0
    await stage.on_revoked()
    assert metrics.registry.get_sample_value("streamguard_fleet_window_value", labels) is None


async def test_a_session_under_two_open_circuits_stays_halted_until_both_close() -> None:
    """An agent's rule and its tenant's: the circuit that halted the session closes
    while the other is still open. The halt stays, now the other's, with nothing
    emitted; its close releases the session with its receipt."""
    from types import SimpleNamespace

    from aiokafka.structs import TopicPartition

    from streamguard.fleet_windows import CircuitRecord

    processor, part, emitted = _fleet_processor(
        '[[fleet]]\nname = "aspend"\nby = "agent"\n[[fleet.limits]]\nmetric = "tokens"\nabove = 1\n'
        '[[fleet]]\nname = "tspend"\nby = "tenant"\n[[fleet.limits]]\nmetric = "tokens"\nabove = 1\n',
        now=1000.0)
    table: dict[str, CircuitRecord] = {}
    open_: dict[str, CircuitRecord] = {}
    processor.circuits = SimpleNamespace(
        open=open_, circuits=table,
        open_for=lambda scopes: next((open_[s] for s in scopes if s in open_), None))
    processor._process_events(part, TopicPartition("agent.events", 0), _event_records(
        [{"type": "turn_start", "session": "s1", "agent": "bot", "tenant": "acme"}]))

    async def apply(scope: str, state: str) -> None:
        rule, _, rest = scope.partition(":")
        by, _, value = rest.partition("=")
        circuit = CircuitRecord(scope=scope, rule=rule, by=by, value=value, state=state,
                                generation=1, reason="x")
        table[scope] = circuit
        if state == "open":
            open_[scope] = circuit
        else:
            open_.pop(scope, None)
        await processor.apply_circuit(circuit, None)

    def kinds() -> list[str]:
        return [type(output).__name__ for output in emitted]

    await apply("aspend:agent=bot", "open")
    await apply("tspend:tenant=acme", "open")
    assert processor.engine.sessions["s1"].halted_by == ("fleet",) and kinds() == ["GuardrailTrip"]
    await apply("aspend:agent=bot", "closed")
    state = processor.engine.sessions["s1"]
    assert state.halted_by == ("fleet",) and state.fleet_scope == "tspend:tenant=acme"
    assert kinds() == ["GuardrailTrip"] and "s1" in processor.sessions.halted
    await apply("tspend:tenant=acme", "closed")
    assert processor.engine.sessions["s1"].halted_by == () and kinds() == ["GuardrailTrip", "GuardrailReset"]


def test_a_back_dated_usage_event_does_not_carry_its_batchs_spend_out_of_the_window() -> None:
    """Spend is published once per checkpoint, dated by the batch's latest usage
    event: one late (or forged) event dated two hours back must not date the batch."""
    import json
    from types import SimpleNamespace

    from aiokafka.structs import TopicPartition

    from streamguard.fleet_windows import Fact

    now = 1_700_000_000.0
    processor, part, _ = _fleet_processor(
        '[[fleet]]\nname = "spend"\n[[fleet.limits]]\nmetric = "spend_usd"\nabove = 200\n', now=now)
    sent: list[Fact] = []
    assert processor.facts is not None
    processor.facts._send = lambda scope, facts: sent.extend(facts)  # type: ignore[method-assign]
    events = [{"type": "turn_start", "ts": now}, *[{"type": "usage", "cost_usd": 50.0, "ts": now}] * 6,
              {"type": "usage", "cost_usd": 0.0, "ts": now - 7200}]
    processor._process_events(part, TopicPartition("agent.events", 0), [
        SimpleNamespace(offset=n, key=b"s1", timestamp=int(now * 1000), headers=[],
                        value=json.dumps({"session": "s1", "agent": "bot", **event}).encode())
        for n, event in enumerate(events)
    ])
    processor.facts.flush(processor.engine, lambda session: None)
    spend = [fact for fact in sent if fact.usd > 0]
    assert [(fact.usd, fact.ts) for fact in spend] == [(300.0, now)]
