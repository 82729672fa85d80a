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


def parallel_rounds(rounds: int, *, answers: Any, wait: bool, reverse: bool = False,
                    width: int = 8, batches: int = 1) -> list[Any]:
    """Rounds of ``batches`` parallel batches of ``width`` curls each (every call sent,
    then every result), one URL per call, the same URLs every round; ``answers(r, i)``
    is the answer of URL ``i`` in round ``r``; ``wait``: a ``sleep 60`` between rounds;
    ``reverse``: each batch answered last call first."""
    trace: list[Any] = []
    clock = 1000.0
    n = 0
    for r in range(rounds):
        if wait and r:
            n += 1
            trace += [ToolCall(session="l", tool="bash", args={"command": "sleep 60"},
                               call_id=f"c{n}", ts=clock),
                      ToolResult(session="l", tool="bash", call_id=f"c{n}", result="",
                                 ts=clock + 60)]
            clock += 61
        for b in range(batches):
            ids = []
            for i in range(b * width, (b + 1) * width):
                n += 1
                ids.append((f"c{n}", i))
                trace.append(ToolCall(
                    session="l", tool="bash", call_id=f"c{n}", ts=clock,
                    args={"command": f"curl -sI https://www.example.io/p/{chr(97 + i)} | grep cache"}))
            for call_id, i in reversed(ids) if reverse else ids:
                trace.append(ToolResult(session="l", tool="bash", call_id=call_id, ts=clock + 0.2,
                                        result=answers(r, i)))
            clock += 1
    return trace


ONLY_LONG = WARN + "".join(
    f"[signals.{s}]\nenabled = false\n"
    for s in ("result-stall", "repeated-tool-call", "alternating-tool-cycle", "dominant-tool-call")
)


@pytest.mark.parametrize("reverse", [False, True])
def test_parallel_calls_are_judged_with_their_results(reverse: bool) -> None:
    """Eight pages checked in one batch of parallel calls, again after a minute's
    wait, answering as before: each answer is a value watched between waits, no replay.
    Before, every parallel call was closed unanswered by the next one, so two rounds of
    the same calls replayed whatever they returned."""
    same = parallel_rounds(5, answers=lambda r, i: "cf-cache-status: MISS", wait=True,
                           reverse=reverse)
    assert "long-loop" not in positions(same, ONLY_LONG)
    # the same rounds with no wait between them are going round (a fifth round: the
    # session's first batch, sent before any result came, is compared by its calls alone)
    busy = parallel_rounds(5, answers=lambda r, i: "cf-cache-status: MISS", wait=False,
                           reverse=reverse)
    assert "long-loop" in positions(busy, ONLY_LONG)
    # and new answers every round are work, wait or not
    moving = parallel_rounds(5, answers=lambda r, i: f"age: {r * 100 + i}s", wait=False,
                             reverse=reverse)
    assert "long-loop" not in positions(moving, ONLY_LONG)


def test_a_parallel_call_whose_result_never_comes_closes_with_its_batch() -> None:
    """A batch of the second round has one call never answered: it stays open while its
    batch is in flight, and is closed unanswered when the next batch starts."""
    trace = parallel_rounds(4, answers=lambda r, i: f"v{r}-{i}", wait=False)
    dropped_id = "c11"  # the third call of the second round (8 calls a round)
    dropped = [e for e in trace if not (isinstance(e, ToolResult) and e.call_id == dropped_id)]
    watchdog = Watchdog(parse_policy_set(ONLY_LONG).base)
    state = watchdog.new_state("l")
    index = [s.id for s in watchdog.signals].index("long-loop")
    key = None
    seen_open = False
    for event in dropped:
        watchdog.process(state, event)
        if isinstance(event, ToolCall) and event.call_id == dropped_id:
            key = state.signals[index].open_keys[-1]
        if key is not None and isinstance(event, ToolResult) and event.call_id == "c16":
            # the second round answered but for the dropped call: it is still open, and the
            # five answers after it are held until it closes
            assert state.signals[index].open_keys[0] == key
            assert len(state.signals[index].early) == 5
            seen_open = True
        if isinstance(event, ToolCall) and event.call_id == "c17":
            # the next batch closed it, and the held ones with it
            assert len(state.signals[index].open_keys) == 1 and not state.signals[index].early
    assert seen_open and "long-loop" not in positions(dropped, ONLY_LONG)


def test_a_late_result_does_not_close_the_batch_in_flight() -> None:
    """A result of a call already closed (late) says nothing of the batch in flight: its
    calls stay open for their own results."""
    watchdog = Watchdog(parse_policy_set(ONLY_LONG).base)
    state = watchdog.new_state("l")
    index = [s.id for s in watchdog.signals].index("long-loop")

    def call(call_id: str, n: int) -> ToolCall:
        return ToolCall(session="l", tool="t", args={"n": n}, call_id=call_id)

    def result(call_id: str) -> ToolResult:
        return ToolResult(session="l", tool="t", call_id=call_id, result="r")

    for event in (call("a", 0), result("a"), call("b1", 1), call("b2", 2), result("b1"),
                  call("c1", 3), result("b2"), call("c2", 4)):
        watchdog.process(state, event)
    long_state = state.signals[index]
    assert len(long_state.open_keys) == 2  # c1 and c2, both waiting for their results


def test_results_for_an_open_call_are_held_within_bounds() -> None:
    """Sixteen calls open, the first never answered, and results for the others sent again
    and again (a hostile stream): the held results fill to MAX_OPEN and no further."""
    from streamguard.signals.base import ResultView
    from streamguard.signals.long_loop import MAX_OPEN, LongLoop, LongLoopState

    signal = LongLoop()
    state = LongLoopState()
    first = ToolResult(session="l", tool="t", result="x")
    signal.on_result(state, ResultView(first, False, 1, 1, call_key=1))  # answered from now on
    state.open_keys = list(range(100, 100 + MAX_OPEN))
    for _ in range(50):
        for key in range(101, 100 + MAX_OPEN):
            event = ToolResult(session="l", tool="t", result="y")
            signal.on_result(state, ResultView(event, False, 7, 1, call_key=key))
    assert len(state.early) == MAX_OPEN
    assert state.open_keys[0] == 100


def test_snapshot_round_trip_inside_a_parallel_batch() -> None:
    """Restored wherever results are held for an earlier call (a batch answered last call
    first), the session goes on as if never restored."""
    watchdog = Watchdog(parse_policy_set(ONLY_LONG).base)
    index = [s.id for s in watchdog.signals].index("long-loop")
    trace = parallel_rounds(5, answers=lambda r, i: "same", wait=False, reverse=True)
    probe = watchdog.new_state("l")
    cuts = []
    for n, event in enumerate(trace):
        watchdog.process(probe, event)
        if probe.signals[index].early:
            cuts.append(n + 1)
    assert cuts  # the trace holds results for earlier calls at these points
    for cut in cuts[:: max(1, len(cuts) // 6)]:
        state = watchdog.new_state("l")
        fresh = watchdog.new_state("l")
        got, expected = [], []
        for n, event in enumerate(trace):
            if n == cut:
                state = watchdog.decode_state(watchdog.encode_state(state))
            got += [o.signal for o in watchdog.process(state, event) if isinstance(o, Alert)]
            expected += [o.signal for o in watchdog.process(fresh, event) if isinstance(o, Alert)]
        assert "long-loop" in got and got == expected


def test_laps_whose_figures_are_the_news_are_no_replays() -> None:
    """Five implementations benchmarked in turn, round after round: each answer differs
    from the last only in its figures, and the figures are what was measured. Answers are
    compared as sent (comparing them without their digits was tried and withdrawn: it
    halted these, a canary watch and a numeric CSV paged through, at the 24th call)."""
    trace: list[Any] = []
    impls = ("btree", "skiplist", "hashmap", "radix", "lsm")
    for lap in range(6):
        for i, impl in enumerate(impls):
            ops = 1000 + 37 * lap + 101 * i
            trace += step("bash", f"python bench.py --impl {impl}",
                          f"impl={impl}: {ops}.5 ops/s p50 {3 + lap}.{i}ms p99 {11 + lap}.{i}ms")
    assert "long-loop" not in positions(trace, ONLY_LONG)
