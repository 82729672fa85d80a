from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamguard.signals.base import SignalConfig, overrides
from streamguard.signals.facts import FLAG_RUNNER
from streamguard.signals.failure_streak import ToolFailureStreak
from tests.harness import Driver

Config = ToolFailureStreak.Config
State = ToolFailureStreak.State

OPERATOR_WORDS = ("threshold", "policy", "operator", "/interrupt", "reset", "exempt", "--")


def driver(threshold: int | None = None, **config: object) -> Driver:
    if threshold is not None:
        config["threshold"] = threshold
    return Driver(ToolFailureStreak(Config(**config)))


def fail(d: Driver, tool: str = "kubectl_get", error: str = "forbidden") -> object:
    return d.result(tool, error=error)


def ok(d: Driver, tool: str = "kubectl_get") -> object:
    return d.result(tool, result={"items": []})


# --------------------------------------------------------------------- identity


def test_identity_and_defaults() -> None:
    signal = ToolFailureStreak()
    assert signal.id == "tool-failure-streak"
    assert signal.severity == "warn"
    assert signal.scope == "session"
    assert signal.threshold == 3
    assert signal.config.threshold == 3
    assert isinstance(signal.new_state(), State)
    assert State.__struct_config__.tag == "tool-failure-streak"
    # results only: calls, text and turn boundaries never reach it
    assert overrides(signal, "on_result")
    for hook in ("on_call", "on_text", "on_turn_start", "on_turn_end"):
        assert not overrides(signal, hook)


# --------------------------------------------------------------------- counts


def test_two_failures_silent_third_trips_naming_tools_and_last_error() -> None:
    d = driver()
    assert fail(d, "get_pods", "pods is forbidden") is None
    assert fail(d, "get_nodes", "nodes is forbidden") is None
    finding = fail(d, "get_pods", "connection refused")
    assert finding is not None
    assert finding.signal == "tool-failure-streak"
    assert finding.severity == "warn"
    assert "get_pods" in finding.reason and "get_nodes" in finding.reason
    assert "connection refused" in finding.reason
    assert "pods is forbidden" not in finding.reason  # only the last error
    assert finding.detail == {
        "count": 3,
        "threshold": 3,
        "tools": ["get_pods", "get_nodes"],
        "last_error": "connection refused",
    }


def test_one_alert_per_streak() -> None:
    d = driver()
    for _ in range(20):
        fail(d)
    assert len(d.findings) == 1


def test_success_in_between_breaks_the_streak() -> None:
    d = driver()
    fail(d)
    fail(d)
    ok(d)
    fail(d)
    fail(d)
    assert d.findings == []
    assert fail(d) is not None


def test_threshold_two_five_failures_one_alert_then_rearm_after_success() -> None:
    d = driver(2)
    for _ in range(5):
        fail(d)
    assert len(d.findings) == 1
    ok(d)
    assert fail(d) is None
    assert fail(d) is not None
    assert len(d.findings) == 2


def test_no_op_result_counts_as_success() -> None:
    d = driver()
    fail(d)
    fail(d)
    d.result("mark_task_done", result={"status": "already recorded"}, no_op=True)
    fail(d)
    fail(d)
    assert d.findings == []
    assert fail(d) is not None


def test_failed_result_with_no_op_flag_is_still_a_failure() -> None:
    d = driver()
    fail(d)
    fail(d)
    assert d.result("mark_task_done", error="unbound agent", no_op=True) is not None


def test_empty_error_string_is_success() -> None:
    d = driver()
    fail(d)
    fail(d)
    d.result("kubectl_get", error="")
    fail(d)
    fail(d)
    assert d.findings == []


# --------------------------------------------------------------------- what does not reset


def test_calls_are_ignored() -> None:
    d = driver()
    for _ in range(2):
        d.call("kubectl_get", {"ns": "a"})
        fail(d)
    d.call("kubectl_get", {"ns": "b"})
    assert fail(d) is not None


def test_streak_survives_text_and_turn_boundaries() -> None:
    d = driver()
    fail(d)
    d.turn_end()
    d.turn_start()
    fail(d)
    d.text("still trying")
    assert fail(d) is not None


def test_reset_clears_the_streak() -> None:
    d = driver()
    fail(d)
    fail(d)
    d.reset()
    fail(d)
    fail(d)
    assert d.findings == []
    assert fail(d) is not None


# --------------------------------------------------------------------- latch


def test_is_latched_follows_the_streak() -> None:
    d = driver()
    signal = d.signal
    fail(d)
    fail(d)
    assert not signal.is_latched(d.state)
    fail(d)
    assert signal.is_latched(d.state)
    fail(d)
    assert signal.is_latched(d.state)
    ok(d)
    assert not signal.is_latched(d.state)


# --------------------------------------------------------------------- text


def test_repeated_tool_name_appears_once() -> None:
    d = driver()
    for _ in range(3):
        finding = fail(d, "read_file", "no such file")
    assert finding is not None
    assert finding.reason.count("read_file") == 1
    assert finding.detail["tools"] == ["read_file"]


def test_names_are_capped_at_threshold_entries() -> None:
    d = driver(4)
    for i in range(4):
        finding = fail(d, f"tool_{i}")
    assert finding is not None
    assert finding.detail["tools"] == ["tool_0", "tool_1", "tool_2", "tool_3"]
    for i in range(4, 100):
        fail(d, f"tool_{i}")
    assert len(d.state.tools) <= 4


def test_empty_tool_name_reads_unnamed_tool() -> None:
    d = driver()
    fail(d, "")
    fail(d, "")
    finding = fail(d, "read_file")
    assert finding is not None
    assert "unnamed tool" in finding.reason
    assert finding.detail["tools"] == ["unnamed tool", "read_file"]


def test_last_error_is_truncated_to_200_bytes() -> None:
    d = driver()
    fail(d)
    fail(d)
    error = "HEAD-" + "é" * 5000 + "-TAIL"
    finding = fail(d, error=error)
    assert finding is not None
    kept = finding.detail["last_error"]
    assert len(kept.encode()) <= 200
    assert "…" in kept
    assert kept.startswith("HEAD-") and kept.endswith("-TAIL")
    assert len(d.state.last_error.encode()) <= 200
    assert error not in finding.reason


@pytest.mark.parametrize(
    ("error", "kept_whole"),
    [("😀" * 50, True), ("é" * 100, True), ("é" * 101, False), ("x" * 200, True), ("x" * 201, False)],
)
def test_error_byte_limit_edges(error: str, kept_whole: bool) -> None:
    d = driver(2)
    fail(d)
    finding = fail(d, error=error)
    assert finding is not None
    assert (finding.detail["last_error"] == error) is kept_whole
    assert len(finding.detail["last_error"].encode()) <= 200


def test_long_tool_names_are_truncated_in_state() -> None:
    d = driver()
    fail(d, "t" * 10_000)
    assert len(d.state.tools[0].encode()) <= 64


def test_guidance_words_and_no_operator_controls() -> None:
    d = driver()
    for _ in range(3):
        finding = fail(d, "get_pods")
    assert finding is not None
    for word in ("verified", "resolved", "could not check"):
        assert word in finding.guidance
    assert "get_pods" in finding.guidance
    lowered = finding.guidance.lower()
    for word in OPERATOR_WORDS:
        assert word not in lowered


# --------------------------------------------------------------------- config


@pytest.mark.parametrize(("raw", "effective"), [(-3, 2), (0, 2), (1, 2), (2, 2), (7, 7)])
def test_threshold_clamp(raw: int, effective: int) -> None:
    signal = ToolFailureStreak(Config(threshold=raw))
    assert signal.threshold == effective
    assert signal.config.threshold == effective


def test_clamp_one_trips_on_second_failure() -> None:
    d = driver(1)
    assert fail(d) is None
    assert fail(d) is not None


@pytest.mark.parametrize(("raw", "effective"), [("abc", 3), (None, 3), ("4", 4), (4.9, 4), (True, 2)])
def test_raw_config_values_from_direct_construction(raw: object, effective: int) -> None:
    # msgspec does not validate on direct construction; the signal must cope
    assert ToolFailureStreak(Config(threshold=raw)).threshold == effective  # type: ignore[arg-type]


def test_policy_validation_rejects_out_of_range() -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"threshold": 1}, Config)
    assert msgspec.convert({"threshold": 2}, Config).threshold == 2
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"threshhold": 4}, Config)


def test_plain_signal_config_is_accepted() -> None:
    signal = ToolFailureStreak(SignalConfig(exempt_tools=["probe"]))
    assert signal.threshold == 3
    assert signal.exempt == frozenset({"probe"})


def test_exempt_tools_are_invisible() -> None:
    d = driver(exempt_tools=["probe_access"])
    fail(d)
    fail(d)
    assert fail(d, "probe_access") is None  # does not count
    ok(d, "probe_access")  # does not reset
    assert fail(d) is not None


def test_state_stays_small() -> None:
    d = driver()
    for i in range(1000):
        fail(d, f"{i}" * 300, "e" * 10_000)
    assert len(msgspec.msgpack.encode(d.state)) <= 2048
    assert len(msgspec.json.encode(d.state)) <= 2048


def test_state_round_trips() -> None:
    d = driver()
    fail(d, "a")
    fail(d, "b")
    restored = msgspec.msgpack.decode(msgspec.msgpack.encode(d.state), type=State)
    d.state = restored
    assert fail(d, "c") is not None


# --------------------------------------------------------------------- invariant

outcome = st.sampled_from(["fail", "ok", "noop", "call", "text", "turn"])


@given(st.lists(outcome, max_size=60), st.integers(min_value=-2, max_value=6))
def test_one_alert_per_failure_run_at_least_threshold(events: list[str], raw: int) -> None:
    d = driver(raw)
    threshold = max(2, raw)
    expected = 0
    run = 0
    for event in events:
        if event == "fail":
            fail(d)
            run += 1
            if run == threshold:
                expected += 1
        elif event == "ok":
            ok(d)
            run = 0
        elif event == "noop":
            d.result("mark_task_done", result="x", no_op=True)
            run = 0
        elif event == "call":
            d.call("kubectl_get")
        elif event == "text":
            d.text()
        else:
            d.turn_start()
        assert d.signal.is_latched(d.state) == (run >= threshold)
        assert len(d.state.tools) <= threshold
    assert len(d.findings) == expected


# --------------------------------------------------------------------- command runners


def runner_fail(d: Driver, error: str = "exit code 1") -> object:
    return d.result("bash", error=error, call_flags=FLAG_RUNNER)


def test_a_streak_of_runner_failures_trips_at_the_runner_threshold() -> None:
    d = driver()
    assert [runner_fail(d) for _ in range(3)] == [None, None, None]
    finding = runner_fail(d)
    assert finding is not None
    assert finding.detail["count"] == 4
    assert finding.detail["threshold"] == 4
    assert runner_fail(d) is None  # one alert per streak


def test_one_named_failure_puts_the_streak_on_the_named_threshold() -> None:
    d = driver()
    runner_fail(d)
    runner_fail(d)
    finding = fail(d)
    assert finding is not None
    assert finding.detail["threshold"] == 3


def test_a_success_clears_the_named_mark() -> None:
    d = driver()
    fail(d)
    ok(d)
    assert [runner_fail(d) for _ in range(3)] == [None, None, None]
    assert runner_fail(d) is not None


def test_runner_threshold_is_configurable_and_clamped() -> None:
    assert ToolFailureStreak(Config(runner_threshold=6)).runner_threshold == 6
    assert ToolFailureStreak(SignalConfig()).runner_threshold == 4
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"runner_threshold": 1}, Config)


@given(st.lists(st.sampled_from(["ok", "named", "runner"]), max_size=40))
def test_one_alert_when_the_streak_reaches_its_threshold(events: list[str]) -> None:
    d = driver()
    run, named, alerted = 0, False, False
    for event in events:
        if event == "ok":
            found = ok(d)
            run, named, alerted = 0, False, False
            assert found is None
            continue
        found = fail(d) if event == "named" else runner_fail(d)
        run += 1
        named = named or event == "named"
        due = not alerted and run >= (3 if named else 4)
        assert (found is not None) == due
        alerted = alerted or due
        assert d.signal.is_latched(d.state) == alerted
