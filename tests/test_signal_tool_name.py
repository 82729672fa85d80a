"""repeated-tool-name: one tool name, called again and again, whatever the arguments."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamguard.canonical import canonicalize, stable_hash
from streamguard.events import ToolCall
from streamguard.signals.base import CallView, overrides
from streamguard.signals.cycle import AlternatingToolCycle
from streamguard.signals.dominant import DominantToolCall
from streamguard.signals.repeat import RepeatedToolCall
from streamguard.signals.tool_name import RepeatedToolName
from tests.harness import Driver

Config = RepeatedToolName.Config
FORBIDDEN_IN_GUIDANCE = (
    "/interrupt", "--watchdog", "threshold", "operator", "same result", "identical", "same argument",
)

Call = tuple[str, Any]


def reworded(n: int, start: int = 0) -> list[Call]:
    return [("mark_task_done", {"detail": f"Checkpoint recorded, take {i}: all steps are done."})
            for i in range(start, start + n)]


def reads(n: int, start: int = 0) -> list[Call]:
    return [("read_file", {"path": f"pkg/f{i}.go"}) for i in range(start, start + n)]


def fired_at(calls: list[Call], signal: RepeatedToolName | None = None) -> list[int]:
    driver = Driver(signal or RepeatedToolName())
    return [i for i, (tool, args) in enumerate(calls, 1) if driver.call(tool, args) is not None]


def ids_by_signal(calls: list[Call]) -> dict[str, list[int]]:
    out = {}
    for signal in (RepeatedToolCall(), AlternatingToolCycle(), DominantToolCall(), RepeatedToolName()):
        driver = Driver(signal)
        out[signal.id] = [i for i, (t, a) in enumerate(calls, 1) if driver.call(t, a) is not None]
    return out


# --------------------------------------------------------------------------- reference cases


def test_fifteen_reworded_calls_warn_once_and_only_here() -> None:
    fired = ids_by_signal(reworded(15))
    assert fired == {
        "repeated-tool-call": [], "alternating-tool-cycle": [], "dominant-tool-call": [],
        "repeated-tool-name": [15],
    }
    driver = Driver(RepeatedToolName())
    for tool, args in reworded(15):
        driver.call(tool, args)
    finding = driver.findings[0]
    assert finding.signal == "repeated-tool-name"
    assert finding.severity == "warn"
    assert finding.detail == {"tool": "mark_task_done", "count": 15, "threshold": 15}


@pytest.mark.parametrize(
    "calls",
    [
        pytest.param(reworded(14), id="14-reworded"),
        pytest.param(reads(12), id="12-distinct-reads"),
        pytest.param(
            [x for k in range(4) for x in [*reads(10, 10 * k), ("grep", {"pattern": f"p{k}"})]],
            id="40-reads-grep-every-10",
        ),
        pytest.param(
            [x for k in range(10) for x in (*reads(3, 3 * k), ("grep", {"pattern": "x"}),
                                              ("edit_file", {"path": f"e{k}"}))],
            id="varied-work",
        ),
    ],
)
def test_silent_cases(calls: list[Call]) -> None:
    assert fired_at(calls) == []


def test_identical_calls_belong_to_the_repeat_detector() -> None:
    calls = [("read_file", {"path": "a.go"})] * 15
    fired = ids_by_signal(calls)
    assert fired["repeated-tool-name"] == []
    assert fired["repeated-tool-call"] == [5]
    assert fired_at(calls, RepeatedToolName(Config(defer_run=0))) == [15]
    assert fired_at(calls * 3) == []


def test_reworded_then_settled() -> None:
    calls = reworded(14) + [("mark_task_done", {"detail": "settled"})] * 5
    fired = ids_by_signal(calls)
    assert fired["repeated-tool-name"] == [15]  # the identical tail is 1 long there
    assert fired["repeated-tool-call"] == [19]


def test_one_alert_per_run_and_a_new_run_alerts_again() -> None:
    assert fired_at(reworded(45)) == [15]
    calls = [*reworded(45), ("read_file", {"path": "x"}), *reworded(15, start=100)]
    assert fired_at(calls) == [15, 61]


def test_deference_does_not_mark_the_run_as_reported() -> None:
    # Deferring leaves the latch alone: once the identical tail is broken while the
    # name run continues, the run is reported.
    calls = [("mark_task_done", {"detail": "same"})] * 15 + reworded(1)
    assert fired_at(calls) == [16]
    signal = RepeatedToolName()
    driver = Driver(signal)
    for tool, args in calls[:15]:
        driver.call(tool, args)
    assert not signal.is_latched(driver.state)
    driver.call(*calls[15])
    assert signal.is_latched(driver.state)


def test_only_another_tool_breaks_the_run() -> None:
    signal = RepeatedToolName()
    for hook in ("on_result", "on_text", "on_turn_start", "on_turn_end"):
        assert not overrides(signal, hook)
    driver = Driver(signal)
    for i, (tool, args) in enumerate(reworded(15)):
        if i % 4 == 0:
            driver.text("still working")
            driver.result(tool, {"ok": True})
            driver.turn_start()
        driver.call(tool, args)
    assert len(driver.findings) == 1


def test_reset_then_one_call_is_silent() -> None:
    driver = Driver(RepeatedToolName())
    for tool, args in reworded(14):
        driver.call(tool, args)
    driver.reset()
    assert driver.call(*reworded(1, start=50)[0]) is None


@pytest.mark.parametrize(("raw", "effective"), [(0, 2), (1, 2), (2, 2), (20, 20), (-4, 2)])
def test_threshold_clamp(raw: int, effective: int) -> None:
    signal = RepeatedToolName(Config(threshold=raw))
    assert signal.threshold == effective
    assert fired_at(reworded(effective), signal) == [effective]
    assert fired_at(reworded(effective - 1), signal) == []


def test_negative_deference_is_off() -> None:
    signal = RepeatedToolName(Config(defer_run=-1))
    assert signal.defer_run == 0
    assert fired_at([("read_file", {"path": "a"})] * 15, signal) == [15]


def test_policy_rejects_out_of_range_values() -> None:
    for bad in ({"threshold": 1}, {"defer_run": -1}):
        with pytest.raises(msgspec.ValidationError):
            msgspec.convert(bad, Config)


def test_default_clears_the_dominant_detectors_sweep() -> None:
    # 12 distinct reads is work by the dominant detector's own account; the name
    # threshold must sit above it.
    assert RepeatedToolName().threshold == 15
    assert RepeatedToolName().threshold > DominantToolCall().window


def test_exempt_tools_are_invisible() -> None:
    signal = RepeatedToolName(Config(exempt_tools=["heartbeat"]))
    calls = [*reworded(7), ("heartbeat", {}), *reworded(8, start=7)]
    assert fired_at(calls) == []
    assert fired_at(calls, signal) == [16]
    assert fired_at([("heartbeat", {"n": i}) for i in range(40)], signal) == []


def test_state_is_small() -> None:
    driver = Driver(RepeatedToolName())
    for tool, args in reworded(500):
        driver.call(tool, {"detail": args["detail"] * 1000})
    assert len(msgspec.msgpack.encode(driver.state)) < 100


def test_reason_and_guidance() -> None:
    driver = Driver(RepeatedToolName())
    for tool, args in reworded(15):
        driver.call(tool, args)
    finding = driver.findings[0]
    assert "15" in finding.reason and "mark_task_done" in finding.reason
    assert "halting controller" in finding.reason and "threshold" in finding.reason
    assert "sweep" in finding.reason
    guidance = finding.guidance.lower()
    for word in FORBIDDEN_IN_GUIDANCE:
        assert word not in guidance
    assert "mark_task_done" in finding.guidance and "15" in finding.guidance
    assert "list" in guidance and "new phrasing" in guidance


def test_would_trip_previews_without_mutation() -> None:
    signal = RepeatedToolName()
    driver = Driver(signal)
    for tool, args in reworded(14):
        driver.call(tool, args)
    before = msgspec.msgpack.encode(driver.state)

    def view(call: Call) -> CallView:
        canonical = canonicalize(call[1])
        key = stable_hash(call[0], canonical.text)
        return CallView(ToolCall(session="s", tool=call[0], args=call[1]), canonical, key, [key], None)

    assert signal.would_trip(driver.state, view(reworded(1, start=99)[0]))
    assert not signal.would_trip(driver.state, view(("read_file", {"path": "x"})))
    assert msgspec.msgpack.encode(driver.state) == before


# --------------------------------------------------------------------------- model


def model(calls: list[tuple[str, str]], threshold: int, defer_run: int) -> list[int]:
    fired, latched = [], False
    for n in range(1, len(calls) + 1):
        tool = calls[n - 1][0]
        run = 0
        while run < n and calls[n - 1 - run][0] == tool:
            run += 1
        if run == 1:
            latched = False
        same = 0
        while same < run and calls[n - 1 - same] == calls[n - 1]:
            same += 1
        if run >= threshold and not latched and not (defer_run and same >= defer_run):
            latched = True
            fired.append(n)
    return fired


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["a", "a", "a", "b"]), st.sampled_from(["x", "x", "y"])), max_size=60),
    st.integers(2, 8),
    st.integers(0, 4),
)
def test_matches_the_literal_rule(calls: list[tuple[str, str]], threshold: int, defer_run: int) -> None:
    signal = RepeatedToolName(Config(threshold=threshold, defer_run=defer_run))
    driven = [(tool, {"arg": arg}) for tool, arg in calls]
    assert fired_at(driven, signal) == model(calls, threshold, defer_run)
