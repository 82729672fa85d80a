"""Fleet guardrails on the real broker: facts from every partition, the fleet stage's
windows, the circuits table applied by every instance, the operator's close, and a
crash of the fleet stage in the middle of a window (docs/fleet.md)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
from aiokafka.partitioner import murmur2

from streamguard.events import FleetAlert, GuardrailReset, GuardrailTrip, ScopeReset, output_decoder
from streamguard.fleet_windows import decode_scope, window_totals
from streamguard.kafka.processor import SimulatedCrash
from streamguard.policy import parse_policy_set

from .conftest import Topics, metric_value, poll_until

pytestmark = pytest.mark.kafka

SCOPE = "spend:agent=hot"
POLICY = """
[[fleet]]
name = "spend"
by = "agent"
match = "*"
window_s = 3600
[[fleet.limits]]
metric = "spend_usd"
above = {limit}
action = "halt"
"""


def policy_file(tmp_path: Path, limit: float) -> str:
    path = tmp_path / "policy.toml"
    path.write_text(POLICY.format(limit=limit))
    return str(path)


def home(session: str, partitions: int) -> int:
    return (murmur2(session.encode()) & 0x7FFFFFFF) % partitions


def sessions_on_every_partition(prefix: str, partitions: int, per_partition: int) -> list[str]:
    found: dict[int, list[str]] = {p: [] for p in range(partitions)}
    i = 0
    while any(len(v) < per_partition for v in found.values()):
        name = f"{prefix}-{i}"
        bucket = found[home(name, partitions)]
        if len(bucket) < per_partition:
            bucket.append(name)
        i += 1
    return [s for p in sorted(found) for s in found[p]]


def usage(session: str, agent: str, seq: int, usd: float) -> dict[str, Any]:
    return {"type": "usage", "session": session, "agent": agent, "seq": seq, "cost_usd": usd,
            "input_tokens": 100}


def call(session: str, agent: str, seq: int, path: str = "main.go") -> dict[str, Any]:
    return {"type": "tool_call", "session": session, "agent": agent, "seq": seq, "tool": "read_file",
            "args": {"path": path}}


async def outputs_with_time(topics: Topics) -> list[tuple[Any, float]]:
    return [(output_decoder.decode(r.value), r.timestamp / 1000.0) for r in await topics.read_all(topics.alerts)]


def fleet_trips(outputs: list[Any]) -> dict[str, Any]:
    return {
        o.session: o
        for o in outputs
        if isinstance(o, GuardrailTrip) and o.guardrail == "fleet" and o.session_halted
    }


async def scope_states(topics: Topics) -> dict[str, Any]:
    latest: dict[str, bytes] = {}
    for record in await topics.read_all(topics.fleet_state):
        latest[record.key.decode()] = record.value
    return {scope: decode_scope(value) for scope, value in latest.items()}


def report(name: str, figures: dict[str, Any]) -> None:
    """Measured figures go to stdout and, with STREAMGUARD_FLEET_REPORT, to a JSON file."""
    print(f"\n{name}: {json.dumps(figures)}")
    target = os.environ.get("STREAMGUARD_FLEET_REPORT")
    if target:
        with open(target, "a") as handle:
            handle.write(json.dumps({"test": name, **figures}) + "\n")


async def test_one_agents_spend_over_the_limit_halts_its_sessions_on_every_instance(
    topics: Topics, start_processor: Any, tmp_path: Path
) -> None:
    policy = policy_file(tmp_path, 10.0)
    instances = [await start_processor(policy=policy) for _ in range(3)]
    await poll_until(
        lambda: all(i.processor.fleet_stage is not None and i.processor.fleet_stage.assigned_once
                    for i in instances) and sum(
            len(i.processor.sessions.partitions) for i in instances) == topics.partitions,
        60, "three instances sharing the partitions and the fleet stage",
    )
    hot = sessions_on_every_partition("hot", topics.partitions, 2)
    cool = sessions_on_every_partition("cool", topics.partitions, 1)
    assert {home(s, topics.partitions) for s in hot} == set(range(topics.partitions))
    # 8 hot sessions spend 1 USD each, the cool ones 0.5: both scopes stay under 10 USD.
    for s in hot:
        await topics.send(topics.events, usage(s, "hot", 1, 1.0))
    for s in cool:
        await topics.send(topics.events, usage(s, "cool", 1, 0.5))

    def hot_spend() -> float:
        for i in instances:
            stage = i.processor.fleet_stage
            state = stage.scope(SCOPE) if stage is not None else None
            if state is not None:
                rule = stage.rules["spend"]  # type: ignore[union-attr]
                return window_totals(state, rule).spend_usd
        return 0.0

    await poll_until(lambda: hot_spend() == pytest.approx(len(hot) * 1.0), 30, "the hot scope at 8 USD")
    # The fact that crosses the limit: 3 USD more in one session.
    crossing = await topics.send(topics.events, usage(hot[0], "hot", 2, 3.0))
    crossed_at = crossing.timestamp / 1000.0
    records = await topics.read_until(
        topics.alerts,
        lambda rs: len(fleet_trips([output_decoder.decode(r.value) for r in rs])) >= len(hot),
        timeout=30,
        what="a fleet trip for every hot session",
    )
    decoded = [(output_decoder.decode(r.value), r.timestamp / 1000.0) for r in records]
    trips = fleet_trips([o for o, _ in decoded])
    assert set(trips) == set(hot), "every running session of the scope, on every partition"
    assert not set(trips) & set(cool), "other agents are untouched"
    alerts = [o for o, _ in decoded if isinstance(o, FleetAlert)]
    assert [(a.session, a.metric, a.circuit) for a in alerts] == [(SCOPE, "spend_usd", "open")]
    assert alerts[0].observed == pytest.approx(11.0)
    delays = sorted(ts - crossed_at for o, ts in decoded if isinstance(o, GuardrailTrip) and o.guardrail == "fleet")
    report("fleet_trip_delay_s", {
        "sessions": len(delays), "min": round(delays[0], 3), "median": round(delays[len(delays) // 2], 3),
        "max": round(delays[-1], 3),
    })

    # A new session of the scope trips at its first event; a new cool one does not.
    await topics.send(topics.events, call("hot-new", "hot", 1))
    await topics.send(topics.events, call("cool-new", "cool", 1))
    for n in range(2, 7):  # a loop, so the cool session's own alert shows it was processed
        await topics.send(topics.events, call("cool-new", "cool", n))
    outputs = await topics.read_until(
        topics.alerts,
        lambda rs: any(output_decoder.decode(r.value).session == "cool-new" for r in rs)
        and "hot-new" in fleet_trips([output_decoder.decode(r.value) for r in rs]),
        timeout=30,
        what="the new hot session tripped and the cool one processed",
    )
    new_outputs = [output_decoder.decode(r.value) for r in outputs]
    assert "cool-new" not in fleet_trips(new_outputs)
    first = [o for o in new_outputs if o.session == "hot-new"]
    assert isinstance(first[0], GuardrailTrip) and first[0].guardrail == "fleet" and first[0].seq is None

    # The operator closes the circuit (control topic only): every session halted by it runs again.
    await topics.send(topics.control, ScopeReset(scope=SCOPE, by="ops", ts=time.time()), key=SCOPE)
    released = await topics.read_until(
        topics.alerts,
        lambda rs: {
            o.session for o in map(lambda r: output_decoder.decode(r.value), rs)
            if isinstance(o, GuardrailReset) and o.guardrail == "fleet"
        } >= {*hot, "hot-new"},
        timeout=30,
        what="a release receipt for every halted hot session",
    )
    assert len(released) > len(outputs)
    for n in range(2, 7):
        await topics.send(topics.events, call(hot[1], "hot", 1 + n))
    after = await topics.read_until(
        topics.alerts,
        lambda rs: any(
            isinstance(o, GuardrailTrip) and o.session == hot[1] and o.guardrail == "watchdog"
            for o in map(lambda r: output_decoder.decode(r.value), rs)
        ),
        timeout=30,
        what="the released session's own loop caught again",
    )
    tail = [output_decoder.decode(r.value) for r in after][len(released):]
    assert not [o for o in tail if o.session == hot[1] and getattr(o, "signal", "") == "halt-ignored"]
    text = await instances[0].metrics_text()
    assert metric_value(text, "streamguard_fleet_circuit_open", rule="spend", scope="hot") == 0.0


async def test_a_crash_of_the_fleet_stage_mid_window_neither_loses_nor_double_counts(
    topics: Topics, start_processor: Any, tmp_path: Path
) -> None:
    policy = policy_file(tmp_path, 1e6)  # never crossed: the test is about the totals
    rule = parse_policy_set(Path(policy).read_text()).fleet[0]
    armed = {"at": None}
    first_proc: list[Any] = []

    def fault(point: str) -> None:
        # After the snapshot of a checkpoint that applied the second batch, before its
        # commit: the restart must skip what the snapshot has and apply the rest.
        if point == "fleet_state_acked" and armed["at"] is not None:
            applied = first_proc[0].metrics.fleet_facts_applied.labels("spend", "hot")._value.get()
            if applied >= armed["at"]:
                raise SimulatedCrash(point)

    a = await start_processor(policy=policy, fault=fault)
    first_proc.append(a.processor)
    await poll_until(lambda: a.processor.fleet_stage is not None and a.processor.fleet_stage.assigned_once,
                     30, "the fleet stage assigned")
    hot = sessions_on_every_partition("hot", topics.partitions, 2)
    expected = 0.0
    seq = 1
    for s in hot:
        await topics.send(topics.events, usage(s, "hot", seq, 0.25))
        expected += 0.25
    await poll_until(
        lambda: a.processor.metrics.fleet_facts_applied.labels("spend", "hot")._value.get() >= len(hot),
        30, "the first batch applied", task=a.task,
    )
    armed["at"] = 2 * len(hot)
    seq += 1
    for s in hot:
        await topics.send(topics.events, usage(s, "hot", seq, 0.5))
        expected += 0.5
    exc = await a.crashed()
    assert isinstance(exc, SimulatedCrash)

    b = await start_processor(policy=policy)
    seq += 1
    for s in hot:
        await topics.send(topics.events, usage(s, "hot", seq, 1.0))
        expected += 1.0

    observed: list[float] = []

    async def totals_right() -> bool:
        states = await scope_states(topics)
        state = states.get(SCOPE)
        if state is None:
            return False
        observed.append(window_totals(state, rule).spend_usd)
        return observed[-1] == pytest.approx(expected)

    try:
        await poll_until(totals_right, 60, "the window total of every usage event, once", task=b.task)
    except AssertionError:
        raise AssertionError(f"window totals seen {observed[-5:]}, expected {expected}") from None
    text = await b.metrics_text()
    # The restart did replay facts the crashed checkpoint's snapshot had applied.
    assert (metric_value(text, "streamguard_fleet_facts_skipped_total", reason="already_applied") or 0) > 0


async def test_hostile_fleet_records_go_to_the_dead_letter_topic(
    topics: Topics, start_processor: Any, tmp_path: Path
) -> None:
    running = await start_processor(policy=policy_file(tmp_path, 10.0))
    await poll_until(
        lambda: running.processor.fleet_stage is not None and running.processor.fleet_stage.assigned_once,
        30, "the fleet stage assigned",
    )
    await topics.send(topics.fleet_facts, b"\x93not a fact", key=SCOPE)
    await topics.send(topics.fleet_facts, msgspec.msgpack.encode([["session", SCOPE, "s", 1, 1.0]]), key="other")
    await topics.send(topics.fleet_circuits, b'{"scope": "spend:agent=hot", "state": "ajar"}', key=SCOPE)
    await topics.send(topics.control, ScopeReset(scope="nope:agent=hot"), key="nope:agent=hot")
    dead = await topics.read_until(topics.dlq, lambda rs: len(rs) >= 4, timeout=30, what="four dead letters")
    reasons = sorted(dict(r.headers)["dlq.reason"].decode() for r in dead)
    assert reasons == ["invalid_circuit", "invalid_event", "invalid_fleet_fact", "invalid_fleet_fact"]
    # Still up, and a good session is still watched.
    await topics.send(topics.events, usage("s-ok", "hot", 1, 20.0))
    await topics.read_until(
        topics.alerts, lambda rs: any(isinstance(output_decoder.decode(r.value), FleetAlert) for r in rs),
        timeout=30, what="the scope's alert",
    )
    assert not running.task.done()


async def test_fleet_lists_the_scopes_and_reset_scope_closes_a_circuit(
    topics: Topics, start_processor: Any, tmp_path: Path, capsys: Any
) -> None:
    from tests.kafka.test_cli_ops import run_main

    args = [
        "--bootstrap-servers", topics.bootstrap,
        "--fleet-state-topic", topics.fleet_state,
        "--fleet-circuits-topic", topics.fleet_circuits,
    ]
    await start_processor(policy=policy_file(tmp_path, 2.0))
    await topics.send(topics.events, usage("s-1", "hot", 1, 1.5))
    await topics.send(topics.events, usage("s-2", "hot", 1, 1.0))
    await topics.send(topics.events, usage("s-3", "cool", 1, 0.25))

    async def listed() -> dict[str, Any]:
        assert await run_main(["fleet", "--json", *args]) == 0
        return {v["scope"]: v for v in map(json.loads, capsys.readouterr().out.splitlines())}

    views: dict[str, Any] = {}

    async def both_listed_and_open() -> bool:
        views.update(await listed())
        hot = views.get(SCOPE)
        return hot is not None and hot["circuit"] == "open" and "spend:agent=cool" in views

    await poll_until(both_listed_and_open, 30, "the hot scope open, the cool one listed")
    assert views[SCOPE]["spend_usd"] == pytest.approx(2.5)
    assert views[SCOPE]["sessions_started"] == 2
    assert views["spend:agent=cool"]["spend_usd"] == pytest.approx(0.25)
    assert await run_main(["fleet", "--open", *args]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"{SCOPE} OPEN since") and "cool" not in text

    reset_args = ["--bootstrap-servers", topics.bootstrap, "--control-topic", topics.control,
                  "--fleet-circuits-topic", topics.fleet_circuits]
    assert await run_main(["reset", "--scope", "spend:agent=hot", "--wait", "--by", "ops", *reset_args]) == 0
    assert "closed: closed by ops" in capsys.readouterr().out

    async def closed() -> bool:
        return (await listed())[SCOPE]["circuit"] == "closed"

    await poll_until(closed, 20, "`fleet` to show the circuit closed")
    assert await run_main(["reset", "--scope", "nonsense", *reset_args]) == 2


async def test_fleet_topics_are_required_with_rules_and_created_on_request(broker: Any, tmp_path: Path) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    from streamguard.kafka.processor import Processor, StartupError

    policy = policy_file(tmp_path, 10.0)
    bare = Topics(broker.bootstrap_servers, f"fleet-bare-{int(time.time() * 1000) % 100000}", 2)
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(t, 2, 1) for t in bare.all()])
    finally:
        await admin.close()
    # Without rules, the fleet topics are not needed...
    plain = Processor(bare.config())
    await plain.start()
    plain.request_stop()
    await plain._close_clients()
    # ...with rules they are, and the error names them.
    with pytest.raises(StartupError, match=r"missing topics: .*fleet\.facts.*fleet\.state.*fleet\.circuits"):
        await Processor(bare.config(policy=policy)).start()

    created = Processor(bare.config(policy=policy, create_topics=True))
    await created.start()
    try:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        await admin.start()
        try:
            fleet = [bare.fleet_facts, bare.fleet_state, bare.fleet_circuits]
            described = await admin.describe_topics(fleet)
            assert {d["topic"]: len(d["partitions"]) for d in described} == dict.fromkeys(fleet, 2)
            configs = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, t) for t in fleet]
            )
            cleanup = {
                resource[3]: {e[0]: e[1] for e in resource[4]}.get("cleanup.policy")
                for response in configs
                for resource in response.resources
            }
            assert cleanup[bare.fleet_state] == cleanup[bare.fleet_circuits] == "compact"
            assert cleanup.get(bare.fleet_facts) != "compact"
        finally:
            await admin.close()
    finally:
        created.request_stop()
        await created._close_clients()
    await bare.close()
