"""repeated-tool-call: consecutive equivalent calls, anchored on the run's first call."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamguard.canonical import args_equivalent, canonicalize, stable_hash
from streamguard.events import ToolCall
from streamguard.signals.base import CallView, overrides
from streamguard.signals.cycle import AlternatingToolCycle
from streamguard.signals.dominant import DominantToolCall
from streamguard.signals.repeat import ANCHOR_TEXT_LIMIT, RepeatedToolCall
from streamguard.signals.tool_name import RepeatedToolName
from tests.harness import Driver

Config = RepeatedToolCall.Config
FORBIDDEN_IN_GUIDANCE = ("/interrupt", "--max-turn-cost-usd", "cost ceiling", "operator")


def read(path: str) -> tuple[str, dict[str, Any]]:
    return ("read_file", {"path": path})


def drive(calls: list[tuple[str, Any]], signal: RepeatedToolCall | None = None) -> list[int]:
    """1-based positions of the calls that raised a finding."""
    driver = Driver(signal or RepeatedToolCall())
    return [i for i, (tool, args) in enumerate(calls, 1) if driver.call(tool, args) is not None]


def preview_view(driver: Driver, tool: str, args: Any) -> CallView:
    canonical = canonicalize(args)
    key = stable_hash(tool, canonical.text)
    history = [*driver.history, key][-driver.capacity :]
    return CallView(ToolCall(session="s", tool=tool, args=args), canonical, key, history, None)


# --------------------------------------------------------------------------- thresholds


def test_four_silent_fifth_trips_once() -> None:
    driver = Driver(RepeatedToolCall())
    for _ in range(4):
        assert driver.call("read_file", {"path": "a.txt"}) is None
    finding = driver.call("read_file", {"path": "a.txt"})
    assert finding is not None
    assert finding.signal == "repeated-tool-call"
    assert finding.severity == "critical"
    assert finding.scope == "session"
    assert finding.guardrail == "watchdog"
    assert finding.detail == {"tool": "read_file", "count": 5, "threshold": 5, "args": '{"path":"a.txt"}'}
    for _ in range(20):
        assert driver.call("read_file", {"path": "a.txt"}) is None
    assert len(driver.findings) == 1


def test_one_alert_per_run_at_threshold_three() -> None:
    assert drive([read("a")] * 10, RepeatedToolCall(Config(threshold=3))) == [3]


def test_interrupted_run_restarts_the_count() -> None:
    signal = RepeatedToolCall(Config(threshold=3))
    calls = [read("a"), read("a"), read("b"), read("a"), read("a")]
    assert drive(calls, signal) == []
    assert drive([*calls, read("a")], signal) == [6]


@pytest.mark.parametrize("raw", [0, 1, -3, 2])
def test_threshold_clamped_to_two(raw: int) -> None:
    signal = RepeatedToolCall(Config(threshold=raw))
    assert signal.threshold == 2
    assert drive([read("a")] * 2, signal) == [2]


def test_policy_rejects_out_of_range_threshold() -> None:
    with pytest.raises(msgspec.ValidationError, match="threshold"):
        msgspec.convert({"threshold": 1}, Config)
    assert msgspec.convert({"threshold": 7}, Config).threshold == 7


def test_different_argument_breaks_and_next_run_alerts_again() -> None:
    calls = [read("a")] * 5 + [read("b")] + [read("a")] * 5
    assert drive(calls) == [5, 11]


def test_different_tool_breaks_the_run() -> None:
    calls = [read("a")] * 4 + [("cat_file", {"path": "a"})] + [read("a")] * 4
    assert drive(calls) == []
    calls = [read("a")] * 4 + [("cat_file", {"path": "a"})] * 5
    assert drive(calls) == [9]


def test_latch_clears_only_on_a_different_call() -> None:
    signal = RepeatedToolCall()
    driver = Driver(signal)
    assert not signal.is_latched(driver.state)
    for _ in range(5):
        driver.call("read_file", {"path": "a"})
    assert signal.is_latched(driver.state)
    driver.text("still here")
    driver.result("read_file", {"content": "x"})
    driver.turn_start()
    driver.call("read_file", {"path": "./a"})  # an equivalent spelling continues the run
    assert signal.is_latched(driver.state)
    driver.call("read_file", {"path": "b"})
    assert not signal.is_latched(driver.state)


def test_text_results_and_turns_are_not_observed() -> None:
    signal = RepeatedToolCall()
    for hook in ("on_text", "on_turn_start", "on_turn_end", "on_usage"):
        assert not overrides(signal, hook)
    assert overrides(signal, "on_result")  # result-aware; unpaired results are ignored
    driver = Driver(signal)
    for _ in range(4):
        driver.call("read_file", {"path": "a"})
        driver.text("thinking out loud")
        driver.result("read_file", error="boom")
        driver.turn_start()
    assert driver.call("read_file", {"path": "a"}) is not None


# --------------------------------------------------------------------------- equivalence


def test_path_spellings_are_one_run() -> None:
    spellings = ["main.go", "./main.go", "/workspace/main.go", "main.go", "dir/../main.go"]
    assert drive([read(p) for p in spellings]) == [5]


def test_run_is_anchored_on_its_first_call() -> None:
    # Every later path relates to the anchor `main.go`, so this is one run (accepted).
    assert drive([read(p) for p in ["main.go", "a/main.go", "b/main.go", "c/main.go", "d/main.go"]]) == [5]
    # Anchored on /repo/a/main.go, `b/main.go` is not equivalent and breaks the run,
    # although it is equivalent to the previous call `main.go`.
    calls = [read(p) for p in ["/repo/a/main.go", "main.go", "a/main.go", "b/main.go", "/repo/a/main.go"]]
    assert drive(calls) == []
    calls = [read(p) for p in ["/repo/a/main.go", "main.go", "a/main.go", "/repo/a/main.go", "a/main.go"]]
    assert drive(calls) == [5]


def test_non_path_arguments_compare_exactly() -> None:
    calls = [("grep", {"pattern": p}) for p in ["a/b", "b", "a/b", "a/b", "a/b"]]
    assert drive(calls) == []
    calls = [("bash", {"command": c}) for c in ["ls /tmp"] * 4 + ["ls /tmp/"]]
    assert drive(calls) == []
    calls = [("read_file", {"path": "/w/a.go", "limit": n}) for n in [5, 5, 5, 5, 6]]
    assert drive(calls) == []
    calls = [("read_file", {"path": p, "limit": 5}) for p in ["/w/a.go", "a.go", "w/a.go", "a.go", "./a.go"]]
    assert drive(calls) == [5]


def test_json_string_arguments_and_blobs() -> None:
    calls = [("read_file", '{"path":"./a.go"}'), read("a.go"), read("/w/a.go"),
             ("read_file", '{"path": "a.go"}'), read("a.go")]
    assert drive(calls) == [5]
    assert drive([("shell", "ls -la")] * 5) == [5]
    assert drive([("shell", "ls -la")] * 4 + [("shell", "ls -l")]) == []


def test_big_path_anchor_falls_back_to_exact_keys() -> None:
    content = "x" * (ANCHOR_TEXT_LIMIT * 4)
    signal = RepeatedToolCall()
    driver = Driver(signal)
    for path in ["./a.go", "a.go", "a.go/", "a.go", "dir/../a.go"]:
        driver.call("write_file", {"path": path, "content": content})
    assert len(driver.findings) == 1  # cleaned spellings still share one key
    assert driver.state.text == ""  # the bulky anchor is not kept
    assert len(msgspec.msgpack.encode(driver.state)) < 200


def test_state_is_small_and_holds_no_payload() -> None:
    driver = Driver(RepeatedToolCall())
    blob = {"pattern": "y" * 50_000}
    for _ in range(5):
        driver.call("grep", blob)
    assert len(driver.findings) == 1
    assert len(msgspec.msgpack.encode(driver.state)) < 100
    args = driver.findings[0].detail["args"]
    assert len(args.encode()) <= 200 and "…" in args


def test_state_snapshot_round_trip_keeps_suffix_equivalence() -> None:
    signal = RepeatedToolCall()
    driver = Driver(signal)
    driver.call("read_file", {"path": "/workspace/main.go"})
    driver.call("read_file", {"path": "main.go"})
    raw = msgspec.msgpack.encode(driver.state)
    fresh = Driver(RepeatedToolCall())  # a new instance: nothing cached
    fresh.state = msgspec.msgpack.decode(raw, type=RepeatedToolCall.State)
    fresh.call("read_file", {"path": "pkg/../main.go"})
    fresh.call("read_file", {"path": "/workspace/main.go"})
    assert fresh.call("read_file", {"path": "workspace/main.go"}) is not None


def test_exempt_tools_are_invisible() -> None:
    signal = RepeatedToolCall(Config(exempt_tools=["wait_and_verify"]))
    calls = [read("a")] * 3 + [("wait_and_verify", {})] + [read("a")] * 2
    assert drive(calls, signal) == [6]
    assert drive([("wait_and_verify", {})] * 10, signal) == []


# --------------------------------------------------------------------------- text


def test_reason_and_guidance() -> None:
    finding = drive_finding([read("a.txt")] * 5)
    assert "halting controller" in finding.reason
    assert "read_file" in finding.reason and "5" in finding.reason
    assert '{"path":"a.txt"}' in finding.reason
    guidance = finding.guidance.lower()
    for word in FORBIDDEN_IN_GUIDANCE:
        assert word not in guidance
    assert "read_file" in finding.guidance and "5 times" in finding.guidance
    assert "threshold" not in guidance and "policy" not in guidance


def drive_finding(calls: list[tuple[str, Any]], signal: RepeatedToolCall | None = None) -> Any:
    driver = Driver(signal or RepeatedToolCall())
    for tool, args in calls:
        driver.call(tool, args)
    assert len(driver.findings) == 1
    return driver.findings[0]


# --------------------------------------------------------------------------- preview


def test_would_trip_previews_without_mutation() -> None:
    signal = RepeatedToolCall()
    driver = Driver(signal)
    for _ in range(4):
        driver.call("read_file", {"path": "a"})
    before = msgspec.msgpack.encode(driver.state)
    assert signal.would_trip(driver.state, preview_view(driver, "read_file", {"path": "/w/a"}))
    assert not signal.would_trip(driver.state, preview_view(driver, "read_file", {"path": "b"}))
    assert msgspec.msgpack.encode(driver.state) == before
    driver.call("read_file", {"path": "a"})
    assert signal.would_trip(driver.state, preview_view(driver, "read_file", {"path": "a"}))


# --------------------------------------------------------------------------- cross-signal


def test_path_spellings_raise_exactly_one_alert_from_the_call_detectors() -> None:
    spellings = ["main.go", "./main.go", "/workspace/main.go", "main.go", "dir/../main.go"]
    fired = []
    for signal in (RepeatedToolCall(), AlternatingToolCycle(), DominantToolCall(), RepeatedToolName()):
        driver = Driver(signal)
        for path in spellings:
            driver.call("read_file", {"path": path})
        fired += driver.ids()
    assert fired == ["repeated-tool-call"]


# --------------------------------------------------------------------------- model


def model(calls: list[tuple[str, Any]], threshold: int) -> list[int]:
    """The rule, literally: compare each call with the run's anchor."""
    fired, anchor, run, latched = [], None, 0, False
    for i, (tool, args) in enumerate(calls, 1):
        canonical = canonicalize(args)
        if anchor is not None and anchor[0] == tool and args_equivalent(anchor[1], canonical):
            run += 1
        else:
            anchor, run, latched = (tool, canonical), 1, False
        if run >= threshold and not latched:
            latched = True
            fired.append(i)
    return fired


_paths = st.sampled_from(["a.go", "./a.go", "/w/a.go", "w/a.go", "b/a.go", "/v/w/a.go", "b.go", ""])
_call = st.one_of(
    st.tuples(st.sampled_from(["read_file", "open"]), st.fixed_dictionaries({"path": _paths})),
    st.tuples(st.just("read_file"), st.fixed_dictionaries({"path": _paths, "limit": st.integers(1, 2)})),
    st.tuples(st.just("grep"), st.fixed_dictionaries({"pattern": _paths})),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_call, max_size=30), st.integers(2, 5))
def test_matches_the_literal_rule(calls: list[tuple[str, Any]], threshold: int) -> None:
    assert drive(calls, RepeatedToolCall(Config(threshold=threshold))) == model(calls, threshold)


@settings(max_examples=50, deadline=None)
@given(st.lists(_call, max_size=20), st.integers(0, 20))
def test_restore_at_any_point_changes_nothing(calls: list[tuple[str, Any]], cut: int) -> None:
    expected = drive(calls)
    driver = Driver(RepeatedToolCall())
    fired = []
    for i, (tool, args) in enumerate(calls, 1):
        if i == cut:
            raw = msgspec.msgpack.encode(driver.state)
            driver = Driver(RepeatedToolCall())
            driver.state = msgspec.msgpack.decode(raw, type=RepeatedToolCall.State)
        if driver.call(tool, args) is not None:
            fired.append(i)
    assert fired == expected


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.booleans(), _call), max_size=40))
def test_sessions_sharing_one_signal_do_not_interfere(steps: list[tuple[bool, tuple[str, Any]]]) -> None:
    shared = RepeatedToolCall(Config(threshold=3))
    drivers = {True: Driver(shared), False: Driver(shared)}
    for side, (tool, args) in steps:
        drivers[side].call(tool, args)
    for side in (True, False):
        alone = [call for s, call in steps if s is side]
        assert len(drivers[side].findings) == len(model(alone, 3))


@pytest.mark.parametrize(("raw", "effective"), [(3.0, 3), ("4", 4), (None, 5), ("x", 5)])
def test_raw_config_values_from_library_users(raw: Any, effective: int) -> None:
    assert RepeatedToolCall(Config(threshold=raw)).threshold == effective


def _daily_runs(prompts: list[str], every: float = 86400.0) -> list[Any]:
    """Each run: the message that starts it, the same status read, the same answer."""
    from streamguard.events import Text, ToolResult

    trace: list[Any] = []
    for n, prompt in enumerate(prompts):
        at = n * every
        trace += [Text(session="d", role="system", text=prompt, ts=at),
                  ToolCall(session="d", tool="web_open_url", args={"url": "https://example.org/case/IOE1"},
                           call_id=f"c{n}", ts=at + 1),
                  ToolResult(session="d", tool="web_open_url", call_id=f"c{n}", result="Case Was Received",
                             ts=at + 2),
                  Text(session="d", text="Status unchanged. No notification sent.", ts=at + 3)]
    return trace


def test_a_scheduled_request_repeated_word_for_word_starts_the_run_again() -> None:
    """A daily scheduled check ("Scheduled task run: ..."), the same read answering the
    same for a week: each run answers the request, no repeat of the agent's own. The same
    reads after messages in new words, or after the same message seconds apart (a nudge),
    are the agent's own repeats."""
    from tests.harness import engine_alerts

    quiet = 'mode = "warn"\ndisabled_signals = ["tools-without-text", "near-duplicate-calls"]\n'

    def criticals(trace: list[Any]) -> list[str]:
        return [a.signal for a in engine_alerts(trace, quiet, "d") if a.severity == "critical"]

    assert criticals(_daily_runs(["Scheduled task run: case status check"] * 8)) == []
    assert "repeated-tool-call" in criticals(_daily_runs([f"check it again ({word})" for word in
                                                          ("now", "please", "once more", "again",
                                                           "quickly", "really", "last", "ok")]))
    assert "repeated-tool-call" in criticals(_daily_runs(["Please continue."] * 8, every=40.0))


def test_a_scheduled_request_is_timed_by_its_record_when_it_has_no_ts() -> None:
    """Events without `ts` are timed by their record (the engine's `record_ts`): a daily
    scheduled check sent so is the same request repeated."""
    from streamguard.engine import Engine
    from streamguard.events import Alert
    from streamguard.policy import parse_policy_set

    quiet = 'mode = "warn"\ndisabled_signals = ["tools-without-text", "near-duplicate-calls"]\n'
    engine = Engine(parse_policy_set(quiet))
    criticals: list[str] = []
    for event in _daily_runs(["Scheduled task run: case status check"] * 8):
        untimed = msgspec.structs.replace(event, ts=None)
        criticals += [o.signal for o in engine.process(untimed, record_ts=event.ts)
                      if isinstance(o, Alert) and o.severity == "critical"]
    assert criticals == []


def _quiet_criticals(session: str, trace: list[Any]) -> list[str]:
    """The criticals of ``trace`` under a warn policy without the two signals that would
    speak for any long run of calls."""
    from tests.harness import engine_alerts

    quiet = 'mode = "warn"\ndisabled_signals = ["tools-without-text", "near-duplicate-calls"]\n'
    return [a.signal for a in engine_alerts(trace, quiet, session) if a.severity == "critical"]


def test_a_schedulers_tick_that_names_its_time_is_the_same_request() -> None:
    """A monitoring schedule every quarter hour whose tick names its time ("tick 06:15
    UTC: check the batch window"): the same request, its digits aside. The two checks of
    each tick find nothing failed again and again, which is what was asked for: no
    stall (`result-stall` counts from the tick too). The same ticks minutes apart are
    nudges, and the same empty answers then are the agent's own."""
    from streamguard.events import Text, ToolResult

    def watch(every: float) -> list[Any]:
        trace: list[Any] = []
        for n in range(12):
            at = n * every
            minute = 15 * (n + 1)
            trace.append(Text(session="t", role="system", ts=at,
                              text=f"[scheduler] tick {6 + minute // 60:02d}:{minute % 60:02d} UTC: check the "
                                   "batch window (failed runs, runs past SLA)."))
            for k, state in enumerate(("failed", "running")):
                trace += [ToolCall(session="t", tool="list_dag_runs", call_id=f"c{n}-{k}", ts=at + 1 + k,
                                   args={"dag_id": "~", "state": [state], "updated_at_gte": f"T{n}"}),
                          ToolResult(session="t", tool="list_dag_runs", call_id=f"c{n}-{k}", ts=at + 2 + k,
                                     result={"dag_runs": [], "total_entries": 0})]
            trace.append(Text(session="t", text="All clear.", ts=at + 5))
        return trace

    assert _quiet_criticals("t", watch(900.0)) == []
    assert "result-stall" in _quiet_criticals("t", watch(60.0))


def test_a_status_page_watched_every_ten_minutes_is_the_same_request() -> None:
    """A vendor's status page read on a ten-minute schedule ("Scheduled check 07:10 UTC:
    fetch the status, post only on a change"): each read answers its tick (it was halted
    as the same call ten times while the gap for a repeated request was fifteen minutes).
    Ticks a minute apart are nudges: the same read then is the agent's own repeat."""
    from streamguard.events import Text, ToolResult

    def watch(every: float) -> list[Any]:
        trace: list[Any] = []
        for n in range(12):
            at = n * every
            trace += [Text(session="w", role="user", ts=at,
                           text=f"Scheduled check 07:{n % 6}0 UTC. Fetch the status; post only on a change."),
                      ToolCall(session="w", tool="get_status_summary", call_id=f"c{n}", ts=at + 1,
                               args={"url": "https://status.example.com/api/v2/summary.json"}),
                      ToolResult(session="w", tool="get_status_summary", call_id=f"c{n}", ts=at + 2,
                                 result={"status": {"indicator": "minor"}, "incidents": ["identified"]}),
                      Text(session="w", text="No change; nothing posted.", ts=at + 3)]
        return trace

    assert _quiet_criticals("w", watch(600.0)) == []
    assert "repeated-tool-call" in _quiet_criticals("w", watch(45.0))
