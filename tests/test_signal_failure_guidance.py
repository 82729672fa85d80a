from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamguard.canonical import canonicalize, stable_hash
from streamguard.events import ToolCall, ToolResult
from streamguard.signals.base import CallView, Finding, ResultView, SignalConfig
from streamguard.signals.failure_guidance import (
    MAX_PENDING,
    MAX_SIGNATURES,
    MAX_TOOLS,
    ToolFailureGuidance,
    signature,
)
from tests.harness import Driver

Config = ToolFailureGuidance.Config
State = ToolFailureGuidance.State


class IdDriver(Driver):
    """The harness driver, plus call ids on calls and results."""

    def call_id(self, tool: str, args: Any = None, call_id: str | None = None) -> Finding | None:
        event = ToolCall(session="s", tool=tool, args=args, call_id=call_id)
        canonical = canonicalize(args)
        view = CallView(event, canonical, stable_hash(tool, canonical.text), [], None)
        return self._keep(self.signal.on_call(self.state, view))

    def result_id(
        self, tool: str, call_id: str | None = None, error: str | None = None
    ) -> Finding | None:
        event = ToolResult(session="s", tool=tool, call_id=call_id, error=error)
        view = ResultView(event, bool(error), 0, 0)
        return self._keep(self.signal.on_result(self.state, view))

    def attempt(self, tool: str, args: Any = None, error: str | None = "boom") -> Finding | None:
        """A call and its result, back to back."""
        self.call(tool, args)
        return self.result(tool, error=error)


def driver(**config: Any) -> IdDriver:
    return IdDriver(ToolFailureGuidance(Config(**config)))


def rules(d: Driver) -> list[str]:
    return [f.detail["rule"] for f in d.findings]


# ---------------------------------------------------------------- identity, defaults


def test_identity_and_defaults() -> None:
    sig = ToolFailureGuidance()
    assert sig.id == "tool-failure-guidance"
    assert sig.severity == "warn"
    assert sig.default_enabled is True
    assert sig.defers_to == ()
    assert (
        sig.warn_after_tool_failures,
        sig.warn_after_same_signature,
        sig.halt_after_same_signature,
    ) == (3, 2, 0)


# ---------------------------------------------------------------- same signature


def test_same_signature_warns_on_the_second_failure_once() -> None:
    d = driver()
    assert d.attempt("run", {"cmd": "make"}) is None
    finding = d.attempt("run", {"cmd": "make"})
    assert finding is not None
    assert finding.signal == "tool-failure-guidance"
    assert finding.severity == "warn"
    assert finding.detail == {
        "tool": "run", "rule": "same_signature", "failures": 2,
        "same_signature_failures": 2, "error": "boom",
    }
    for _ in range(8):
        assert d.attempt("run", {"cmd": "make"}) is None  # identical streak: no drift warning
    assert rules(d) == ["same_signature"]


def test_signature_repeats_need_not_be_adjacent() -> None:
    d = driver()
    d.attempt("run", {"cmd": "a"})
    d.attempt("run", {"cmd": "b"})
    d.attempt("run", {"cmd": "a"})
    assert rules(d) == ["same_signature"]  # not drift: 'a' failed twice


def test_whitespace_and_key_order_do_not_change_the_signature() -> None:
    d = driver()
    d.attempt("sh", {"cmd": "ls  -la", "cwd": "/tmp"})
    assert d.attempt("sh", '{"cwd": "/tmp", "cmd": "ls -la"}') is not None
    assert rules(d) == ["same_signature"]
    assert signature("sh", "ls  -la\u00a0x") == signature("sh", "ls -la x")
    assert signature("sh", "a") != signature("sh", "b") != signature("other", "b")


def test_success_of_the_tool_rearms() -> None:
    d = driver()
    d.attempt("run", {"cmd": "make"})
    d.attempt("run", {"cmd": "make"})
    d.attempt("run", {"cmd": "make"}, error=None)
    assert d.attempt("run", {"cmd": "make"}) is None
    assert d.attempt("run", {"cmd": "make"}) is not None
    assert rules(d) == ["same_signature", "same_signature"]


def test_no_op_result_counts_as_success() -> None:
    d = driver()
    d.attempt("run", {"cmd": "make"})
    d.call("run", {"cmd": "make"})
    d.result("run", no_op=True)
    assert d.attempt("run", {"cmd": "make"}) is None


def test_other_tools_do_not_break_a_tools_streak() -> None:
    d = driver()
    d.attempt("run", {"cmd": "make"})
    d.attempt("read", {"path": "Makefile"}, error=None)
    d.attempt("grep", {"q": "x"})
    assert d.attempt("run", {"cmd": "make"}) is not None
    assert rules(d) == ["same_signature"]


# ---------------------------------------------------------------- argument drift


def test_drift_warns_exactly_at_the_third_failure() -> None:
    d = driver()
    assert d.attempt("fetch", {"url": "a"}) is None
    assert d.attempt("fetch", {"url": "b"}) is None
    finding = d.attempt("fetch", {"url": "c"})
    assert finding is not None and finding.detail["rule"] == "argument_drift"
    assert finding.severity == "warn" and finding.detail["failures"] == 3
    for url in "defgh":
        assert d.attempt("fetch", {"url": url}) is None
    assert rules(d) == ["argument_drift"]


def test_identical_then_drifting_gives_both_warnings() -> None:
    d = driver()
    d.attempt("fetch", {"url": "a"})
    d.attempt("fetch", {"url": "a"})
    d.attempt("fetch", {"url": "b"})
    assert rules(d) == ["same_signature", "argument_drift"]


def test_drift_across_interleaved_other_work() -> None:
    d = driver()
    d.attempt("fetch", {"url": "a"})
    d.attempt("other", {"x": 1})
    d.attempt("read", {"x": 1}, error=None)
    d.attempt("fetch", {"url": "b"})
    assert d.attempt("fetch", {"url": "c"}) is not None
    assert rules(d) == ["argument_drift"]


def test_streaks_survive_turn_boundaries_and_text() -> None:
    d = driver()
    d.attempt("fetch", {"url": "a"})
    d.turn_start()
    d.text("trying again")
    assert d.attempt("fetch", {"url": "a"}) is not None


# ---------------------------------------------------------------- halt


def test_halt_is_off_by_default() -> None:
    d = driver()
    for _ in range(20):
        d.attempt("run", {"cmd": "make"})
    assert all(f.severity == "warn" for f in d.findings)


def test_halt_after_same_signature() -> None:
    d = driver(halt_after_same_signature=3)
    d.attempt("run", {"cmd": "make"})
    assert d.attempt("run", {"cmd": "make"}).severity == "warn"  # type: ignore[union-attr]
    halt = d.attempt("run", {"cmd": "make"}, error="  permission denied\n")
    assert halt is not None
    assert (halt.severity, halt.scope, halt.detail["rule"]) == ("critical", "turn", "halt")
    assert halt.detail["error"] == "permission denied"
    assert d.attempt("run", {"cmd": "make"}) is None  # once per signature streak
    d.attempt("run", {"cmd": "make"}, error=None)
    d.attempt("run", {"cmd": "make"})
    d.attempt("run", {"cmd": "make"})
    assert d.attempt("run", {"cmd": "make"}) is not None
    assert rules(d) == ["same_signature", "halt", "same_signature", "halt"]


def test_halt_takes_precedence_over_the_warning() -> None:
    d = driver(halt_after_same_signature=2)
    d.attempt("run", {"cmd": "make"})
    finding = d.attempt("run", {"cmd": "make"})
    assert finding is not None and finding.severity == "critical"
    assert d.attempt("run", {"cmd": "make"}) is None
    assert rules(d) == ["halt"]


def test_drifting_failures_never_halt() -> None:
    d = driver(halt_after_same_signature=2)
    for url in "abcdef":
        d.attempt("fetch", {"url": url})
    assert rules(d) == ["argument_drift"]


# ---------------------------------------------------------------- clamps and bounds


@pytest.mark.parametrize(
    ("raw", "effective"),
    [
        ({"warn_after_tool_failures": 0}, (3, 2, 0)),
        ({"warn_after_tool_failures": -4}, (3, 2, 0)),
        ({"warn_after_tool_failures": 1}, (2, 2, 0)),
        ({"warn_after_tool_failures": 5}, (5, 2, 0)),
        ({"warn_after_same_signature": 0}, (3, 2, 0)),
        ({"warn_after_same_signature": -1}, (3, 2, 0)),
        ({"warn_after_same_signature": 1}, (3, 1, 0)),
        ({"halt_after_same_signature": -3}, (3, 2, 0)),
        ({"halt_after_same_signature": 4}, (3, 2, 4)),
    ],
)
def test_clamps(raw: dict[str, int], effective: tuple[int, int, int]) -> None:
    sig = ToolFailureGuidance(Config(**raw))
    assert (
        sig.warn_after_tool_failures,
        sig.warn_after_same_signature,
        sig.halt_after_same_signature,
    ) == effective


def test_raw_values_from_library_callers() -> None:
    sig = ToolFailureGuidance(
        Config(warn_after_tool_failures="5", warn_after_same_signature="x",  # type: ignore[arg-type]
               halt_after_same_signature=None)  # type: ignore[arg-type]
    )
    assert (
        sig.warn_after_tool_failures,
        sig.warn_after_same_signature,
        sig.halt_after_same_signature,
    ) == (5, 2, 0)
    bare = ToolFailureGuidance(SignalConfig(exempt_tools=["probe"]))
    assert bare.warn_after_tool_failures == 3 and bare.exempt == frozenset({"probe"})


def test_clamped_drift_threshold_of_one_fires_at_two() -> None:
    d = driver(warn_after_tool_failures=1)
    d.attempt("fetch", {"url": "a"})
    assert d.attempt("fetch", {"url": "b"}) is not None


def test_same_signature_threshold_of_one_fires_on_the_first_failure() -> None:
    d = driver(warn_after_same_signature=1)
    assert d.attempt("fetch", {"url": "a"}) is not None


def test_policy_bounds() -> None:
    for bad in (
        {"warn_after_tool_failures": 1},
        {"warn_after_same_signature": 0},
        {"halt_after_same_signature": -1},
    ):
        with pytest.raises(msgspec.ValidationError):
            msgspec.convert(bad, Config)
    cfg = msgspec.convert({"halt_after_same_signature": 3}, Config)
    assert cfg.halt_after_same_signature == 3


def test_exempt_tools_are_invisible() -> None:
    d = driver(exempt_tools=["probe"])
    for _ in range(5):
        d.attempt("probe", {"path": "x"})
    assert d.findings == []
    assert not d.state.tools and not d.state.pending_ids and not d.state.pending_sigs


def test_memory_stays_bounded() -> None:
    d = driver()
    for i in range(200):
        d.call_id("t", {"i": i}, f"id{i}")  # results never come
    assert len(d.state.pending_ids) == MAX_PENDING
    for i in range(200):
        d.call(f"t{i}", {"i": i})
    assert len(d.state.pending_ids) == MAX_PENDING
    d.reset()
    for i in range(50):
        d.call("same", {"i": i})  # id-less: the newest call of a tool replaces the older
    assert len(d.state.pending_ids) == 1
    for i in range(50):
        d.attempt(f"tool{i % 7}", {"i": i})
    assert len(d.state.tools) <= MAX_TOOLS
    assert len(d.state.sigs) <= MAX_SIGNATURES
    assert len(msgspec.json.encode(d.state)) < 1200


# ---------------------------------------------------------------- matching results to calls


def test_results_match_calls_by_id_in_any_order() -> None:
    d = driver()
    d.call_id("fetch", {"url": "a"}, "1")
    d.call_id("fetch", {"url": "b"}, "2")
    d.result_id("fetch", "2", error="x")
    d.result_id("fetch", "1", error="x")
    assert d.findings == []
    d.call_id("fetch", {"url": "b"}, "3")
    finding = d.result_id("fetch", "3", error="x")
    assert finding is not None and finding.detail["rule"] == "same_signature"
    assert not d.state.pending_ids and not d.state.pending_sigs


def test_result_without_id_goes_to_the_most_recent_call_of_that_tool() -> None:
    d = driver()
    d.call("fetch", {"url": "a"})
    d.call("fetch", {"url": "b"})
    d.call("read", {"p": 1})
    d.result("fetch", error="x")  # counted as url=b
    d.call("fetch", {"url": "b"})
    assert d.result("fetch", error="x") is not None
    assert rules(d) == ["same_signature"]


def test_unmatched_results_count_for_the_tool_streak_only() -> None:
    d = driver()
    for i in range(3):
        d.result_id("fetch", f"unknown-{i}", error="x")
    assert rules(d) == ["argument_drift"]
    assert d.findings[0].detail["same_signature_failures"] == 0


def test_result_with_unknown_id_falls_back_to_the_tools_id_less_call() -> None:
    d = driver()
    for _ in range(2):
        d.call("fetch", {"url": "a"})
        d.result_id("fetch", "late-id", error="x")
    assert rules(d) == ["same_signature"]


# ---------------------------------------------------------------- text


def test_guidance_quotes_the_error_and_keeps_operator_words_out() -> None:
    long_error = "E" * 150 + " middle " + "Z" * 150
    for config, args in (({}, ["a", "a"]), ({}, ["a", "b", "c"]), ({"halt_after_same_signature": 2}, ["a", "a"])):
        d = driver(**config)
        for arg in args:
            d.attempt("run_migration", {"target": arg}, error=long_error)
        finding = d.findings[-1]
        error = finding.detail["error"]
        assert len(error.encode()) <= 200 and error.startswith("EEE") and error.endswith("ZZZ")
        assert error in finding.guidance and error in finding.reason
        assert "run_migration" in finding.guidance and "'run_migration'" in finding.reason
        lowered = finding.guidance.lower()
        for word in ("policy", "threshold", "operator", "exempt", "halt_after", "watchdog", "enforce"):
            assert word not in lowered


def test_guidance_advice_by_rule() -> None:
    same = driver()
    same.attempt("run", {"c": 1}, error="nope")
    same.attempt("run", {"c": 1}, error="nope")
    assert "same arguments" in same.findings[0].guidance
    assert "change the arguments" in same.findings[0].guidance
    drift = driver()
    for c in range(3):
        drift.attempt("run", {"c": c}, error="nope")
    assert "Step back" in drift.findings[0].guidance
    assert "last error: nope" in drift.findings[0].guidance


def test_blank_error_text() -> None:
    d = driver()
    d.attempt("run", {"c": 1}, error="   ")
    finding = d.attempt("run", {"c": 1}, error="   ")
    assert finding is not None and finding.detail["error"] == "(no error text)"


# ---------------------------------------------------------------- deference (is_latched)


def test_latched_across_a_one_tool_failure_run() -> None:
    d = driver()
    sig = d.signal
    d.attempt("run", {"c": 1})
    assert not sig.is_latched(d.state)
    d.attempt("run", {"c": 1})
    assert sig.is_latched(d.state)
    d.attempt("run", {"c": 1})  # where the cross-tool streak (3) trips
    assert sig.is_latched(d.state)
    d.attempt("run", {"c": 1}, error=None)
    assert not sig.is_latched(d.state)


def test_drift_latches_on_the_streak_event() -> None:
    d = driver()
    for c in range(3):
        d.attempt("run", {"c": c})
    assert d.signal.is_latched(d.state)


def test_not_latched_when_the_failure_run_mixes_tools() -> None:
    d = driver()
    d.attempt("run", {"c": 1})
    d.attempt("other", {"c": 1})
    d.attempt("run", {"c": 1})  # 'run' warns (same signature), but the run mixes tools
    assert rules(d) == ["same_signature"]
    assert not d.signal.is_latched(d.state)


def test_latched_again_when_a_new_run_is_all_the_alerted_tool() -> None:
    d = driver()
    d.attempt("run", {"c": 1})
    d.attempt("run", {"c": 1})
    d.attempt("read", {"p": 1}, error=None)  # breaks the cross-tool run, not the tool's streak
    assert not d.signal.is_latched(d.state)
    d.attempt("run", {"c": 2})
    assert d.signal.is_latched(d.state)


class StreakModel:
    """tool-failure-streak: N consecutive failed results of any tools, one alert per streak."""

    def __init__(self, threshold: int = 3) -> None:
        self.threshold, self.run, self.tools = threshold, 0, []  # type: ignore[var-annotated]
        self.latched = False

    def observe(self, tool: str, failed: bool) -> bool:
        if not failed:
            self.run, self.tools, self.latched = 0, [], False
            return False
        self.run += 1
        self.tools.append(tool)
        if self.run >= self.threshold and not self.latched:
            self.latched = True
            return True
        return False


steps = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), st.sampled_from([1, 2, 3]), st.booleans()),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(steps)
def test_one_tool_failure_run_gives_one_alert_with_the_streak(seq: list[tuple[str, int, bool]]) -> None:
    d = driver()
    streak = StreakModel()
    for tool, arg, failed in seq:
        d.call(tool, {"x": arg})
        d.result(tool, error="e" if failed else None)
        if streak.observe(tool, failed):
            one_tool = len(set(streak.tools)) == 1
            # The streak is silenced exactly when the run is one tool.
            assert d.signal.is_latched(d.state) == one_tool


# ---------------------------------------------------------------- model check


class Reference:
    """An unbounded port of the reference guard's rules (maps, no packing)."""

    def __init__(self, tool_n: int = 3, same_n: int = 2, halt_n: int = 0) -> None:
        self.tool_n, self.same_n, self.halt_n = tool_n, same_n, halt_n
        self.tool_fails: dict[str, int] = {}
        self.sig_fails: dict[tuple[str, int], int] = {}
        self.warned: set[tuple[str, int]] = set()
        self.halted: set[tuple[str, int]] = set()

    def observe(self, tool: str, arg: int, failed: bool) -> str | None:
        sig = (tool, arg)
        if not failed:
            self.tool_fails.pop(tool, None)
            for key in [k for k in self.sig_fails if k[0] == tool]:
                del self.sig_fails[key]
                self.warned.discard(key)
                self.halted.discard(key)
            return None
        self.tool_fails[tool] = tool_n = self.tool_fails.get(tool, 0) + 1
        self.sig_fails[sig] = sig_n = self.sig_fails.get(sig, 0) + 1
        if self.halt_n and sig_n >= self.halt_n:
            if sig in self.halted:
                return None
            self.halted.add(sig)
            return "halt"
        if sig_n >= self.same_n and sig not in self.warned:
            self.warned.add(sig)
            return "same_signature"
        if tool_n == self.tool_n and sig_n < tool_n:
            return "argument_drift"
        return None


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from([1, 2]), st.booleans()),
        max_size=50,
    ),
    st.sampled_from([0, 2, 3, 4]),
    st.booleans(),
)
def test_matches_the_reference_rules(
    seq: list[tuple[str, int, bool]], halt: int, with_ids: bool
) -> None:
    # 3 tools x 2 argument values stay within the bounded tables.
    d = driver(halt_after_same_signature=halt)
    ref = Reference(halt_n=halt)
    for i, (tool, arg, failed) in enumerate(seq):
        call_id = f"c{i}" if with_ids else None
        d.call_id(tool, {"x": arg}, call_id)
        finding = d.result_id(tool, call_id, error="e" if failed else None)
        expected = ref.observe(tool, arg, failed)
        assert (finding.detail["rule"] if finding else None) == expected
        msgspec.msgpack.encode(d.state)  # every packed integer fits a 64-bit codec
        if finding is not None:
            assert finding.severity == ("critical" if expected == "halt" else "warn")


def test_long_call_ids_and_odd_tool_names() -> None:
    d = driver()
    prefix = "x" * 80
    d.call_id("fetch", {"url": "a"}, prefix + "-1")
    d.call_id("fetch", {"url": "b"}, prefix + "-2")
    assert all(len(i) <= 64 for i in d.state.pending_ids)
    d.result_id("fetch", prefix + "-2", error="x")
    d.call_id("fetch", {"url": "b"}, prefix + "-3")
    assert d.result_id("fetch", prefix + "-3", error="x") is not None  # b twice
    odd = driver()
    for arg in "abc":
        odd.attempt("\ud800tool", {"x": arg})  # a lone surrogate still hashes
    assert rules(odd) == ["argument_drift"]


def test_state_round_trips_through_a_snapshot() -> None:
    d = driver()
    d.call_id("run", {"c": 1}, "1")
    d.result_id("run", "1", error="x")
    d.call_id("run", {"c": 1}, "2")
    d.state = msgspec.json.decode(msgspec.json.encode(d.state), type=State)
    assert d.result_id("run", "2", error="x") is not None


def test_reset_clears_the_streak() -> None:
    d = driver()
    d.attempt("run", {"c": 1})
    d.reset()
    assert d.attempt("run", {"c": 1}) is None
