"""The peer benchmark runs on a tiny stream with streamguard and the null adapter only.

No peer library is needed: a peer that is not installed is skipped with a note. These
tests check the report's fields and what the guards flag, never a timing.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
TINY = ["--scale", "0.004", "--quiet"]  # 40 sessions, every kind of session present


def _peers_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_peers", ROOT / "bench" / "peers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def peers() -> ModuleType:
    return _peers_module()


def test_json_run_with_streamguard_and_null():
    done = subprocess.run(
        [sys.executable, "bench/peers.py", *TINY, "--repeats", "2", "--json",
         "--guards", "null,streamguard,streamguard-all"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=True,
    )
    result = json.loads(done.stdout)
    stream = result["stream"]
    assert stream["sessions"] == 40 and stream["events"] == 2 * stream["calls"] > 0
    assert set(stream["session_kinds"]) == {"clean", "polling", "loop-repeat", "loop-cycle",
                                            "loop-reworded"}
    rows = {row["guard"]: row for row in result["guards"]}
    assert list(rows) == ["null", "streamguard", "streamguard-all"]
    for row in rows.values():
        assert row["status"] == "ok"
        assert isinstance(row["calls_per_s"], int) and row["calls_per_s"] > 0
        assert len(row["pass_calls_per_s"]) == 2
        assert row["calls_measured"] == stream["calls"]
        assert row["ratio_to_fastest_peer"] is None  # no peer ran
    assert result["fastest_peer"] is None
    assert result["targets"]["default_met"] is None

    null = rows["null"]["detection"]
    assert all(null[kind]["share"] == 0 for kind in ("clean", "polling", "loop-repeat"))
    # A planted run of 6-10 identical calls with identical results is what the default
    # policy exists to catch; a harness that mislaid flags or loop positions would miss it.
    caught = rows["streamguard"]["detection"]["loop-repeat"]
    assert caught["sessions"] == 3 and caught["caught"] == 3
    assert "repeated-tool-call" in caught["labels"]
    assert rows["streamguard"]["detection"]["loops"]["sessions"] == 5


def test_stream_is_deterministic_and_interleaved(peers):
    plans = peers.plan_stream(30, seed=7)
    events = peers.build_stream(plans, seed=7, open_sessions=10)
    again = peers.build_stream(peers.plan_stream(30, seed=7), seed=7, open_sessions=10)
    assert [(e.session, e.seq) for e in events] == [(e.session, e.seq) for e in again]
    assert len(events) == 2 * sum(len(plan.calls) for plan in plans)
    # Every session's events are in order, a call before its result; at most 10 open.
    last_seq: dict[str, int] = {}
    open_now: set[str] = set()
    ends = {plan.last_index: plan.session for plan in plans}
    for index, event in enumerate(events):
        assert event.seq == last_seq.get(event.session, 0) + 1
        assert isinstance(event, peers.ToolCall) == (event.seq % 2 == 1)
        last_seq[event.session] = event.seq
        open_now.add(event.session)
        assert len(open_now) <= 10
        if index in ends:
            open_now.discard(ends[index])
    for plan in plans:
        if plan.kind == "polling":
            polls = [c for c in plan.calls if c.tool == "get_job_status"]
            assert len({json.dumps(c.args) for c in polls}) == 1
            assert len({c.result for c in polls}) == len(polls)
        elif plan.kind == "clean":
            assert len({json.dumps([c.tool, c.args]) for c in plan.calls}) == len(plan.calls)


def test_missing_peer_is_skipped_with_a_note(peers, monkeypatch):
    specs = [spec for spec in peers.guard_specs() if spec.name == "null"]
    specs.append(peers.GuardSpec("absent-peer", "peer", "never installed", peers.NullAdapter,
                                 "streamguard-absent-peer-for-tests", "9.9.9"))
    monkeypatch.setattr(peers, "guard_specs", lambda: specs)
    result = peers.run(peers.parse_args([*TINY, "--repeats", "1"]))
    rows = {row["guard"]: row for row in result["guards"]}
    assert rows["absent-peer"]["status"] == "skipped"
    assert "pip install streamguard-absent-peer-for-tests==9.9.9" in rows["absent-peer"]["note"]
    assert rows["null"]["status"] == "ok"
    assert "skipped: not installed" in peers.render(result)


def test_a_pass_over_its_time_budget_is_capped_and_not_repeated(peers):
    # A budget no pass can stay under: the first look at the clock stops the pass.
    args = peers.parse_args([*TINY, "--repeats", "3", "--time-budget", "1e-9",
                             "--guards", "null"])
    result = peers.run(args)
    (row,) = result["guards"]
    assert row["status"] == "capped" and "capped" in row["note"]
    assert row["calls_measured"] == peers.CHECK_EVERY // 2 < result["stream"]["calls"]
    assert len(row["pass_calls_per_s"]) == 1
    seen = row["detection"]["clean"]["sessions"]
    assert seen < result["stream"]["session_kinds"]["clean"]
