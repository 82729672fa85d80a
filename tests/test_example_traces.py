"""The example traces in examples/traces replay to the alerts their names promise."""

from __future__ import annotations

import json
from pathlib import Path

from streamguard.engine import Engine
from streamguard.policy import load_policy_set
from streamguard.replay import ReplayReport, replay_lines

ROOT = Path(__file__).resolve().parent.parent / "examples"


def replay(name: str, *more: Path) -> tuple[list[dict], ReplayReport]:
    report = ReplayReport()
    engine = Engine(load_policy_set(ROOT / "policy.toml"))
    lines: list[bytes] = []
    for path in (ROOT / "traces" / f"{name}.jsonl", *more):
        lines += path.read_bytes().splitlines()
    outs = [json.loads(line) for line in replay_lines(lines, engine, report=report)]
    assert report.malformed == 0
    return outs, report


def test_agent_event_examples_hold_no_control_events():
    # `emit` refuses them and a processor dead-letters them as a security event:
    # an operator's resets live in examples/operator/.
    from streamguard.events import decode_agent_event

    for trace in sorted((ROOT / "traces").glob("*.jsonl")):
        for line in trace.read_bytes().splitlines():
            if line.strip():
                decode_agent_event(line)


def signals(outs: list[dict]) -> list[str]:
    return [o["signal"] for o in outs if o["type"] == "alert"]


def test_read_file_loop():
    outs, _ = replay("read_file_loop")
    # Five reads of one file under four spellings are one loop.
    assert signals(outs)[0] == "repeated-tool-call"
    trip = next(o for o in outs if o["type"] == "guardrail_trip")
    assert trip["session_halted"] and trip["signal"] == "repeated-tool-call"


def test_list_agents_cycle():
    outs, _ = replay("list_agents_cycle")
    assert signals(outs) == ["alternating-tool-cycle"]


def test_noop_streak_cuts_the_turn():
    outs, _ = replay("noop_streak")
    assert "no-op-streak" in signals(outs)
    trips = [o for o in outs if o["type"] == "guardrail_trip"]
    assert trips[0]["scope"] == "turn" and not trips[0]["session_halted"]


def test_cost_runaway_halts_and_needs_budget():
    outs, report = replay("cost_runaway", ROOT / "operator" / "cost_runaway.resets.jsonl")
    trip = next(o for o in outs if o["type"] == "guardrail_trip")
    assert trip["guardrail"] == "cost_ceiling" and trip["bound"] == "per_session"
    acks = [o for o in outs if o["type"] == "guardrail_reset"]
    assert [a["accepted"] for a in acks] == [False, True]
    assert acks[1]["max_session_usd"] == 2.0
    assert report.controls == 2


def test_example_policy_is_valid():
    policies = load_policy_set(ROOT / "policy.toml")
    assert policies.base.mode == "enforce"
    assert policies.for_agent("research-7").mode == "feedback"
