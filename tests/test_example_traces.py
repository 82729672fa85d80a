"""The example traces in examples/traces replay to the alerts their names promise."""

from __future__ import annotations

import json
from pathlib import Path

from streamguard.engine import Engine
from streamguard.policy import load_policy_set
from streamguard.replay import ReplayReport, replay_lines

ROOT = Path(__file__).resolve().parent.parent / "examples"


def replay(name: str) -> tuple[list[dict], ReplayReport]:
    report = ReplayReport()
    engine = Engine(load_policy_set(ROOT / "policy.toml"))
    with open(ROOT / "traces" / f"{name}.jsonl", "rb") as handle:
        outs = [json.loads(line) for line in replay_lines(handle, engine, report=report)]
    assert report.malformed == 0
    return outs, report


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
    outs, report = replay("cost_runaway")
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
