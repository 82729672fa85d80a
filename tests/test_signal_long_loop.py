"""long-loop: most recent steps replay steps (and outcomes) the session already had."""

from __future__ import annotations

from typing import Any

import pytest

from streamguard.engine import Engine
from streamguard.events import Alert, Text, ToolCall, ToolResult, TurnStart
from streamguard.policy import PolicyError, parse_policy_set
from streamguard.signals.long_loop import LongLoop
from streamguard.watchdog import Watchdog

WARN = 'mode = "warn"\ndisabled_signals = ["tools-without-text", "near-duplicate-calls"]\n'


def positions(trace: list[Any], policy: str = WARN) -> dict[str, list[int]]:
    """Signal id -> 1-based call numbers (counting calls only) at which it alerted."""
    engine = Engine(parse_policy_set(policy))
    engine.process(TurnStart(session="l"))
    calls = 0
    hits: dict[str, list[int]] = {}
    for event in trace:
        if isinstance(event, ToolCall):
            calls += 1
        for o in engine.process(event):
            if isinstance(o, Alert):
                hits.setdefault(o.signal, []).append(calls)
    return hits


def step(tool: str, arg: Any, result: Any = "ok") -> list[Any]:
    return [ToolCall(session="l", tool=tool, args={"arg": arg}),
            ToolResult(session="l", tool=tool, result=result)]


def lap(period: int, tag: str = "") -> list[Any]:
    tools = ["open_file", "search", "run_tests", "read_log", "list_dir", "grep", "show", "stat"]
    out: list[Any] = []
    for i in range(period):
        out += step(tools[i % len(tools)], f"{tag}{i}", f"result {i}")
    return out


@pytest.mark.parametrize(("period", "first"), [(5, 24), (8, 27), (12, 31), (16, 35), (20, 39)])
def test_cycles_of_long_periods_trip_once(period: int, first: int) -> None:
    trace: list[Any] = []
    for _ in range(6):
        trace += lap(period)
    hits = positions(trace)
    assert hits.get("long-loop") == [first], hits
    assert "alternating-tool-cycle" not in hits


def test_interrupted_now_and_then_still_trips() -> None:
    trace: list[Any] = []
    for n in range(8):
        trace += lap(8)
        trace += step("fetch_url", f"new {n}", f"page {n}")  # a new call on every lap
    hits = positions(trace)
    assert hits.get("long-loop") and len(hits["long-loop"]) == 1


def test_edit_test_cycles_are_work() -> None:
    trace: list[Any] = []
    for i in range(40):
        trace += step("edit_file", f"change {i}", "edited")
        trace += step("run_tests", "all", "1 failed" if i % 3 else "2 failed")
    assert "long-loop" not in positions(trace)


def test_paging_with_new_results_is_not_a_replay() -> None:
    trace: list[Any] = []
    for i in range(60):
        trace += step("scroll_down", "", f"lines {i * 100}-{i * 100 + 99}")
    assert "long-loop" not in positions(trace)


def test_distinct_work_is_silent() -> None:
    trace: list[Any] = []
    for i in range(80):
        answer = "out " + "".join("abcdefghij"[int(d)] for d in str(i))  # differs beyond digits
        trace += step(["read", "grep", "ls"][i % 3], f"target {i}", answer)
    assert positions(trace) == {}


def test_unknown_results_compare_calls_alone() -> None:
    trace = [ToolCall(session="l", tool=f"t{i % 6}", args={"i": i % 6}) for i in range(40)]
    # each step closes at the next call when no result comes: one call later
    assert positions(trace).get("long-loop") == [26]


def test_deference_to_the_short_loop_detectors() -> None:
    same = []
    for _ in range(40):
        same += step("read_file", "a.go", "same")
    assert positions(same) == {"repeated-tool-call": [4]}
    cycle: list[Any] = []
    for _ in range(20):
        cycle += step("list_agents", "", "a b") + step("check_agent", "a", "up")
    assert positions(cycle) == {"alternating-tool-cycle": [6]}


def test_latch_releases_after_the_loop_ends_and_a_new_loop_alerts() -> None:
    trace: list[Any] = []
    for _ in range(6):
        trace += lap(6, "a")
    for i in range(30):
        trace += step("fresh", i, f"new {i}")
    for _ in range(6):
        trace += lap(6, "b")
    assert len(positions(trace).get("long-loop", [])) == 2


def test_window_threshold_and_memory_are_validated() -> None:
    with pytest.raises(PolicyError, match="long-loop"):
        parse_policy_set("[signals.long-loop]\nwindow = 10\nthreshold = 12\n")
    with pytest.raises(PolicyError, match="long-loop"):
        parse_policy_set("[signals.long-loop]\nmemory = 4\n")
    policy = parse_policy_set("[signals.long-loop]\nwindow = 12\nthreshold = 9\n").base
    assert LongLoop(policy.signals.long_loop).window == 12


def test_memory_bounds_the_state() -> None:
    watchdog = Watchdog(parse_policy_set(WARN).base)
    state = watchdog.new_state("l")
    for event in [e for i in range(500) for e in step("read", i, f"r{i}")]:
        watchdog.process(state, event)
    index = [s.id for s in watchdog.signals].index("long-loop")
    assert len(state.signals[index].seen) == 128 * 4


def test_snapshot_round_trip_mid_loop() -> None:
    watchdog = Watchdog(parse_policy_set(WARN).base)
    trace: list[Any] = []
    for _ in range(6):
        trace += lap(8)
    state = watchdog.new_state("l")
    fresh = watchdog.new_state("l")
    restored = None
    got, expected = [], []
    for n, event in enumerate(trace):
        if n == 30:
            restored = watchdog.decode_state(watchdog.encode_state(state))
        expected += [o.signal for o in watchdog.process(fresh, event) if isinstance(o, Alert)]
        if restored is not None:
            got += [o.signal for o in watchdog.process(restored, event) if isinstance(o, Alert)]
        watchdog.process(state, event)
    assert "long-loop" in got and got == [s for s in expected if s in got]


def test_text_does_not_matter() -> None:
    trace: list[Any] = []
    for _ in range(6):
        for e in lap(8):
            trace.append(e)
            if isinstance(e, ToolResult):
                trace.append(Text(session="l", text="Trying again."))
    assert positions(trace).get("long-loop") == [27]
