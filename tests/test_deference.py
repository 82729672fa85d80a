"""One behaviour, one alert: every row of the deference table in docs/signals.md.

Each row drives the full default watchdog (warn mode, so every alert is visible
and no cut resets the detectors) and asserts the exact alerts raised.
"""

from __future__ import annotations

from typing import Any

import pytest

from streamguard.engine import Engine
from streamguard.events import Alert, Text, ToolCall, ToolResult, TurnStart
from streamguard.policy import parse_policy_set


def run(trace: list[Any], policy: str = 'mode = "warn"\n') -> list[str]:
    engine = Engine(parse_policy_set(policy))
    engine.process(TurnStart(session="d"))
    signals = []
    for event in trace:
        signals += [o.signal for o in engine.process(event) if isinstance(o, Alert)]
    return signals


def call(tool: str, **args: Any) -> ToolCall:
    return ToolCall(session="d", tool=tool, args=args)


def ok(tool: str, result: Any = "payload") -> ToolResult:
    return ToolResult(session="d", tool=tool, result=result)


def fail(tool: str, error: str = "permission denied") -> ToolResult:
    return ToolResult(session="d", tool=tool, error=error)


def say() -> Text:
    return Text(session="d", text="Working through the list.")


QUIET_OFF = 'mode = "warn"\ndisabled_signals = ["tools-without-text"]\n'


def test_row_repeat_owns_uniform_blocks_not_cycle():
    assert run([call("read_file", path="a.go")] * 6) == ["repeated-tool-call"]


def test_row_repeat_owns_runs_inside_dominant_window():
    a, g = call("read_file", path="a.go"), call("grep", pattern="x")
    trace = [a] * 5 + [g] + [a] * 3 + [g] + [a] * 2
    assert run(trace, QUIET_OFF) == ["repeated-tool-call"]


def test_row_cycle_owns_periodic_windows_not_dominant():
    a, b = call("read_file", path="a.go"), call("grep", pattern="x")
    assert run([a, a, b] * 4) == ["alternating-tool-cycle"]


def test_row_dominant_owns_period_five():
    a, b = call("read_file", path="a.go"), call("grep", pattern="x")
    assert run(([a] * 4 + [b]) * 3) == ["dominant-tool-call"]


def test_row_repeat_owns_identical_name_runs():
    assert run([call("mark_task_done", summary="done")] * 15) == ["repeated-tool-call"]


def test_row_name_run_of_a_cycle_belongs_to_the_cycle():
    a, b = call("read_file", path="a.go"), call("read_file", path="b.go")
    assert run([a, b] * 8, 'mode = "warn"\ndisabled_signals = ["tools-without-text"]\n') == [
        "alternating-tool-cycle"
    ]


WORDS = ("alpha", "bravo", "carol", "delta", "echo", "fox", "golf", "hotel", "india", "juliet",
         "kilo", "lima", "mike", "nancy", "oscar", "papa", "quebec", "romeo", "sierra", "tango")


def test_row_reworded_name_run_is_the_name_signal_alone():
    trace = [call("mark_task_done", summary=f"done, {w} said so") for w in WORDS[:15]]
    assert run(trace, 'mode = "warn"\ndisabled_signals = ["tools-without-text"]\n') == [
        "repeated-tool-name"
    ]


def test_row_name_run_differing_only_in_numbers_is_the_near_duplicate_scan():
    trace = [call("mark_task_done", summary=f"done, take {i}") for i in range(15)]
    assert run(trace, QUIET_OFF) == ["near-duplicate-calls"]


def test_row_stall_behind_a_repeat_is_the_repeat():
    trace = []
    for _ in range(8):
        trace += [call("read_file", path="a.go"), ok("read_file", "same bytes")]
    assert run(trace) == ["repeated-tool-call"]


def test_row_stall_with_reworded_calls_is_no_new_state():
    trace = []
    for i in range(7):
        trace += [call("search", q=f"where is the config, attempt {i}"), ok("search", "no match"), say()]
    assert run(trace) == ["no-new-state"]


def test_row_silent_identical_loop_is_the_repeat_not_silence():
    assert run([call("read_file", path="a.go")] * 12) == ["repeated-tool-call"]


def test_row_silent_distinct_sweep_is_silence():
    trace = [say()] + [call("read_file", path=f"{w}.go") for w in WORDS[:12]]
    assert run(trace) == ["tools-without-text"]


def test_row_one_tool_failing_is_failure_guidance_not_streak():
    trace = []
    for i in range(3):
        trace += [call("kubectl", cmd=f"get pods -n ns{i}"), fail("kubectl")]
    assert run(trace) == ["tool-failure-guidance"]


def test_row_identical_failing_call_is_guidance_then_the_failure_loop():
    trace = []
    for _ in range(6):
        trace += [call("kubectl", cmd="get pods"), fail("kubectl")]
    # The advisory note at the second identical failure, the proof at the third; the
    # streak and the repeat (at the fifth identical call) stay silent.
    assert run(trace) == ["tool-failure-guidance", "failure-loop"]


def test_row_mixed_tools_failing_is_the_streak():
    trace = []
    for tool in ("kubectl", "helm", "curl"):
        trace += [call(tool, x=1), fail(tool)]
    assert run(trace) == ["tool-failure-streak"]


WINDOW = 'mode = "warn"\n[signals.window-repeat]\nenabled = true\n'


def test_row_window_repeat_warns_early_then_dominant_owns_the_loop():
    a = call("search", q="status")
    others = [call("read_file", path=f"f{i}.go") for i in range(20)]
    trace = []
    for i in range(12):
        trace += [a, others[i]] if i % 3 else [a, others[i], say()]
    got = run(trace, WINDOW)
    assert got.count("window-repeat") == 1
    assert got.index("window-repeat") == 0


def test_row_window_repeat_warns_once_before_the_repeat():
    # 3 in 8 at the third call, then the repeat detector owns the run; no second warn.
    got = run([call("read_file", path="a.go")] * 8, WINDOW)
    assert got == ["window-repeat", "repeated-tool-call"]


def test_row_window_repeat_silent_while_a_loop_detector_is_latched():
    # With threshold 5 both would trip on the fifth identical call: the repeat detector
    # runs first and latches, so the window stays silent (and keeps its own latch).
    policy = WINDOW + "threshold = 5\n"
    got = run([call("read_file", path="a.go")] * 8, policy)
    assert got == ["repeated-tool-call"]
    without_repeat = policy.replace(
        'mode = "warn"\n', 'mode = "warn"\ndisabled_signals = ["repeated-tool-call"]\n'
    )
    assert run([call("read_file", path="a.go")] * 8, without_repeat) == ["window-repeat"]


@pytest.mark.parametrize("calls_after_halt", [1, 3])
def test_row_halt_ignored_once_per_halt_until_next_turn(calls_after_halt):
    engine = Engine()
    engine.process(TurnStart(session="h"))
    for _ in range(5):
        engine.process(ToolCall(session="h", tool="read_file", args={"path": "a"}))
    raised = []
    for i in range(calls_after_halt):
        raised += [o.signal for o in engine.process(ToolCall(session="h", tool="x", args={"i": i}))]
    assert raised == ["halt-ignored"]


# --------------------------------------------------------------------------- failure loops


def sh(command: str) -> ToolCall:
    return ToolCall(session="d", tool="bash", args={"command": command})


def test_row_failure_loop_owns_an_unchanged_failing_run_not_repeat_or_streak():
    trace = []
    for _ in range(8):
        trace += [call("read_file", path="a.go"), fail("read_file", "EACCES")]
    assert run(trace) == ["tool-failure-guidance", "failure-loop"]


def test_row_a_cycle_of_failing_calls_is_the_cycle_not_the_failure_loop():
    trace = []
    for _ in range(6):
        trace += [sh("pytest -x"), fail("bash", "1 error"), sh("cat setup.cfg"), fail("bash", "EIO")]
    # Advice first; the cycle detector proves the loop at the third lap, and the
    # failure loop it is (the fifth failure of one unchanged call) stays silent.
    got = run(trace, QUIET_OFF)
    assert got.count("alternating-tool-cycle") == 1 and "failure-loop" not in got


def test_row_edit_rerun_fail_is_nobodys():
    trace = []
    for i in range(6):
        trace += [sh("pytest -x"), fail("bash", f"assert {i}"), sh(f"sed -i 's/{i}/{i + 1}/' a.py"),
                  ok("bash", "")]
    assert run(trace, QUIET_OFF) == []


# --------------------------------------------------------------------------- result-aware repeats


def test_row_identical_pairs_are_the_repeat_not_no_new_state_or_long_loop():
    trace = []
    for _ in range(40):
        trace += [call("read_file", path="a.go"), ok("read_file", "same bytes")]
    assert run(trace, QUIET_OFF) == ["repeated-tool-call"]


def test_row_poll_then_frozen_is_the_repeat_once():
    trace = []
    for i in range(10):
        trace += [call("job_state", id="7"), ok("job_state", f"step {i}"), say()]
    for _ in range(8):
        trace += [call("job_state", id="7"), ok("job_state", "stuck"), say()]
    assert run(trace) == ["repeated-tool-call"]


# --------------------------------------------------------------------------- long loops


def test_row_long_cycle_is_long_loop_not_dominant_or_name():
    tools = ["open", "grep", "test", "log", "ls", "show", "stat"]
    trace = []
    for _ in range(6):
        for i, tool in enumerate(tools):
            trace += [call(tool, arg=i), ok(tool, f"r{i}"), say()]
    got = run(trace)
    assert "long-loop" in got
    assert "dominant-tool-call" not in got and "alternating-tool-cycle" not in got


def test_row_long_cycle_of_one_runner_is_long_loop_not_the_name_rule():
    commands = ["grep -rn x src", "cat src/a.py", "pytest -x", "git diff", "ls src", "cat log"]
    trace = []
    for _ in range(8):
        for i, command in enumerate(commands):
            trace += [sh(command), ok("bash", f"out {i}")]
    got = run(trace, QUIET_OFF)
    assert "long-loop" in got and "repeated-tool-name" not in got


def test_row_short_cycle_is_the_cycle_not_long_loop():
    a, b = call("list_agents"), call("check_agent", id="a")
    trace = []
    for _ in range(20):
        trace += [a, ok("list_agents", "a b"), b, ok("check_agent", "up")]
    assert run(trace, QUIET_OFF) == ["alternating-tool-cycle"]


def test_row_an_answered_repeat_after_interleaves_is_one_alert():
    """Four identical answers trip the same-result rule; the same call coming back
    after an interleave is that behaviour going on: no second repeat alert, and
    the density rule (8 of the last 12) defers to it."""
    status, logs = call("get_job_status", job="b1"), call("read_logs", job="b1")
    trace: list[Any] = []
    for lap in range(3):
        for _ in range(4):
            trace += [status, ok("get_job_status", {"state": "running"})]
        trace += [logs, ok("read_logs", f"page {lap}")]
    assert run(trace, QUIET_OFF) == ["repeated-tool-call"]


def test_row_call_only_repeats_alert_again_after_an_interleave():
    """Without results the reference rule holds: a new run of five alerts again."""
    a, b = call("read_file", path="a.go"), call("grep", pattern="x")
    policy = 'mode = "warn"\ndisabled_signals = ["tools-without-text", "dominant-tool-call"]\n'
    assert run([a] * 5 + [b] + [a] * 5, policy) == ["repeated-tool-call", "repeated-tool-call"]


def test_row_loop_detectors_defer_to_a_latched_setup_detour():
    # The same install failing between mirror edits: a detour, and at its eighth
    # failure failure-loop's across-writes case. One behaviour, one alert. (The failing
    # build first: a detour turns from task work.)
    trace: list[Any] = [sh("mvn -q compile"), fail("bash", "mvn: command not found")]
    for i in range(10):
        trace += [sh("sudo apt-get install -y maven"), fail("bash", "EXECUTION TIMED OUT"),
                  sh(f"sudo sed -i 's/m{i}/m{i + 1}/' /etc/apt/sources.list"), ok("bash", "")]
    got = run(trace)
    assert got.count("setup-detour") == 1
    for silent in ("failure-loop", "result-stall", "long-loop", "tool-failure-streak"):
        assert silent not in got


def test_row_system_search_finding_nothing_is_one_setup_detour():
    roots = ["/usr", "/opt", "/usr/local", "/usr/lib", "/opt/java", "/", "/lib", "/usr/share",
             "/opt/jdk", "/usr/lib/jvm", "/usr/java", "/opt/local"]
    trace: list[Any] = [sh("javac Main.java"), fail("bash", "javac: command not found")]
    for root in roots:
        trace += [sh(f"find {root} -name javac 2>/dev/null"), ok("bash", "")]
    got = run(trace, QUIET_OFF)
    assert got == ["setup-detour"]


def test_row_an_identical_failing_install_is_failure_loop_then_the_detour():
    # Not deferred: failure-loop comes after setup-detour in the fan-out, so the
    # detour cannot wait on its latch; the stretch going on is reported once more.
    trace = [sh("mvn -q compile"), fail("bash", "mvn: command not found")]
    trace += [sh("sudo apt-get install -y maven"), fail("bash", "EXECUTION TIMED OUT")] * 8
    got = run(trace, QUIET_OFF)
    assert [s for s in got if s in ("failure-loop", "setup-detour")] == ["failure-loop", "setup-detour"]


def test_row_writes_going_round_between_moving_reads_are_the_write_cycle():
    """Buy, sell, buy, sell the same order while the quote moves (the bars re-read now and
    then): only the writes repeat, and only write-cycle reports them."""
    trace: list[Any] = []
    for lap in range(4):
        if lap % 3 == 1:
            trace += [call("get_bars", symbol="T"), ok("get_bars", "256.28 256.6")]
        for side in ("buy", "sell"):
            trace += [call("get_quote", symbol="T"), ok("get_quote", f"ask {256 + lap} venue {'ZVQNKP'[(2 * lap + (side == 'sell')) % 6]}"),
                      call("place_order", symbol="T", qty=50, side=side), ok("place_order", f"order {lap}{side} accepted")]
    assert run(trace, QUIET_OFF) == ["write-cycle"]


def test_row_a_cycle_of_writes_answered_alike_is_the_cycle_not_the_write_cycle():
    """The same flip of a setting with the same check before each, every lap answered
    alike: the lap ends on the write that also completes the write cycle, the cycle
    detector (earlier in the fan-out) holds it, and write-cycle defers."""
    trace: list[Any] = []
    for _ in range(6):
        for value in ("y", "n"):
            trace += [call("build"), ok("build", "region dram0 overflowed"),
                      call("set_config", key="CONFIG_SPIRAM", value=value), ok("set_config", "saved")]
    assert run(trace, QUIET_OFF) == ["alternating-tool-cycle"]
