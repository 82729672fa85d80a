from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamguard.signals.base import SignalConfig, overrides
from streamguard.signals.silence import CORPUS_LONGEST_SILENT_RUN, ToolsWithoutText
from tests.harness import Driver

Config = ToolsWithoutText.Config
State = ToolsWithoutText.State

OPERATOR_WORDS = ("threshold", "policy", "operator", "/interrupt", "reset", "exempt", "--")


def driver(threshold: int | None = None, **config: object) -> Driver:
    if threshold is not None:
        config["threshold"] = threshold
    # These tests count from the first call, as the reference does.
    config.setdefault("after_first_text", False)
    return Driver(ToolsWithoutText(Config(**config)))


def calls(d: Driver, count: int, tool: str = "read_file") -> list[int]:
    """Make ``count`` calls; return the 1-based positions that tripped."""
    hits = []
    for i in range(count):
        if d.call(tool, {"path": f"f{i}.go"}) is not None:
            hits.append(i + 1)
    return hits


# --------------------------------------------------------------------- identity


def test_identity_and_defaults() -> None:
    signal = ToolsWithoutText()
    assert signal.id == "tools-without-text"
    assert signal.severity == "warn"
    assert signal.scope == "session"
    assert signal.threshold == 12
    assert signal.withdrawn_by_text is True
    assert signal.defers_to == (
        "failure-loop",
        "repeated-tool-call",
        "alternating-tool-cycle",
        "dominant-tool-call",
        "long-loop",
        "result-stall",
    )
    assert isinstance(signal.new_state(), State)
    assert State.__struct_config__.tag == "tools-without-text"
    assert overrides(signal, "on_call") and overrides(signal, "on_text")
    # results and turn boundaries never reach it
    for hook in ("on_result", "on_turn_start", "on_turn_end"):
        assert not overrides(signal, hook)


def test_default_clears_the_recorded_corpus_with_margin() -> None:
    default = Config().threshold
    assert default > CORPUS_LONGEST_SILENT_RUN
    assert default <= 3 * CORPUS_LONGEST_SILENT_RUN


# --------------------------------------------------------------------- counts at threshold 5


def test_four_calls_silent_fifth_trips() -> None:
    d = driver(5)
    assert calls(d, 4) == []
    finding = d.call("grep", {"pattern": "TODO"})
    assert finding is not None
    assert finding.signal == "tools-without-text"
    assert finding.severity == "warn"
    assert finding.detail == {"count": 5, "threshold": 5, "tool": "grep"}


def test_text_in_between_resets() -> None:
    d = driver(5)
    calls(d, 4)
    d.text("found the handler, checking its callers")
    assert calls(d, 4) == []


def test_whitespace_is_not_speech() -> None:
    # The watchdog filters whitespace-only text and never calls on_text for it,
    # so from the signal's point of view the run simply continues.
    d = driver(5)
    calls(d, 4)
    assert calls(d, 1) == [1]


def test_twenty_calls_one_alert() -> None:
    d = driver(5)
    assert calls(d, 20) == [5]


def test_text_rearms() -> None:
    d = driver(5)
    assert calls(d, 5) == [5]
    d.text("update")
    assert calls(d, 5) == [5]
    assert len(d.findings) == 2


def test_results_and_turn_boundaries_do_not_reset() -> None:
    d = driver(5)
    for _ in range(2):
        calls(d, 1)
        d.result("read_file", result="package main")
    d.turn_end()
    d.turn_start()
    calls(d, 2)
    d.result("read_file", error="boom")
    assert calls(d, 1) == [1]


def test_reset_clears_the_run() -> None:
    d = driver(5)
    calls(d, 4)
    d.reset()
    assert calls(d, 4) == []


def test_is_latched_follows_the_run() -> None:
    d = driver(5)
    calls(d, 4)
    assert not d.signal.is_latched(d.state)
    calls(d, 1)
    assert d.signal.is_latched(d.state)
    calls(d, 3)
    assert d.signal.is_latched(d.state)
    d.text()
    assert not d.signal.is_latched(d.state)


# --------------------------------------------------------------------- default threshold


def test_default_twelve_distinct_silent_tools_one_alert() -> None:
    d = driver()
    for i in range(11):
        assert d.call(f"tool_{i}", {"n": i}) is None
    assert d.call("tool_11", {"n": 11}) is not None
    for i in range(12, 30):
        d.call(f"tool_{i}", {"n": i})
    assert len(d.findings) == 1


def test_default_speech_halfway_is_silent() -> None:
    d = driver()
    for i in range(6):
        d.call(f"tool_{i}")
    d.text("halfway: nodes look healthy, checking pods next")
    for i in range(6, 12):
        d.call(f"tool_{i}")
    assert d.findings == []


# --------------------------------------------------------------------- text


def test_texts() -> None:
    d = driver(3)
    calls(d, 2, "list_pods")
    finding = d.call("describe_pod", {"name": "web-0"})
    assert finding is not None
    assert "3 tool calls" in finding.reason
    assert finding.severity == "warn"
    assert "describe_pod" in finding.guidance
    lowered = finding.guidance.lower()
    for word in OPERATOR_WORDS:
        assert word not in lowered


def test_unnamed_and_long_tool_names() -> None:
    d = driver(2)
    d.call("")
    finding = d.call("")
    assert finding is not None and "unnamed tool" in finding.guidance
    d.text()
    d.call("x" * 5000)
    finding = d.call("x" * 5000)
    assert finding is not None
    assert len(finding.detail["tool"].encode()) <= 200


# --------------------------------------------------------------------- config


@pytest.mark.parametrize(("raw", "effective"), [(-3, 2), (0, 2), (1, 2), (2, 2), (30, 30)])
def test_threshold_clamp(raw: int, effective: int) -> None:
    signal = ToolsWithoutText(Config(threshold=raw))
    assert signal.threshold == effective
    assert signal.config.threshold == effective


def test_clamp_one_trips_on_second_call() -> None:
    d = driver(1)
    assert calls(d, 2) == [2]


@pytest.mark.parametrize(("raw", "effective"), [("abc", 12), (None, 12), ("4", 4), (4.9, 4), (True, 2)])
def test_raw_config_values_from_direct_construction(raw: object, effective: int) -> None:
    # msgspec does not validate on direct construction; the signal must cope
    assert ToolsWithoutText(Config(threshold=raw)).threshold == effective  # type: ignore[arg-type]


def test_policy_validation_rejects_out_of_range() -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"threshold": 1}, Config)
    assert msgspec.convert({"threshold": 20}, Config).threshold == 20


def test_plain_signal_config_is_accepted() -> None:
    assert ToolsWithoutText(SignalConfig()).threshold == 12


def test_exempt_tools_are_not_counted() -> None:
    d = driver(3, exempt_tools=["heartbeat"])
    calls(d, 2)
    assert calls(d, 10, "heartbeat") == []
    assert calls(d, 1) == [1]


def test_state_stays_small_and_round_trips() -> None:
    d = driver()
    calls(d, 10_000)
    assert len(msgspec.msgpack.encode(d.state)) <= 64
    d.state = msgspec.msgpack.decode(msgspec.msgpack.encode(d.state), type=State)
    assert d.state.calls == 10_000


# --------------------------------------------------------------------- invariant


@given(
    st.lists(st.sampled_from(["call", "text", "result", "turn"]), max_size=80),
    st.integers(min_value=-1, max_value=8),
)
def test_one_alert_per_silent_run_at_least_threshold(events: list[str], raw: int) -> None:
    d = driver(raw)
    threshold = max(2, raw)
    run = 0
    expected = 0
    for event in events:
        if event == "call":
            d.call("read_file")
            run += 1
            if run == threshold:
                expected += 1
        elif event == "text":
            d.text()
            run = 0
        elif event == "result":
            d.result("read_file", result="x")
        else:
            d.turn_start()
        assert d.signal.is_latched(d.state) == (run >= threshold)
    assert len(d.findings) == expected


# --------------------------------------------------------------------- after the first word


def test_counting_starts_at_the_first_word_by_default() -> None:
    d = Driver(ToolsWithoutText())
    assert calls(d, 30) == []  # an agent that never spoke: no baseline of speech
    d.text("Starting on the config loader.")
    assert calls(d, 12) == [12]


def test_reference_counts_from_the_first_call() -> None:
    d = Driver(ToolsWithoutText(Config(after_first_text=False)))
    assert calls(d, 12) == [12]


# --------------------------------------------------------------------- command runners


def shell_calls(d: Driver, count: int) -> list[int]:
    hits = []
    for i in range(count):
        if d.call("bash", {"command": f"grep -n item{i} src/app.py"}) is not None:
            hits.append(i + 1)
    return hits


def test_a_silent_stretch_of_runner_calls_trips_at_the_runner_threshold() -> None:
    d = driver()
    assert shell_calls(d, 40) == [25]
    assert d.findings[0].detail == {"count": 25, "threshold": 25, "tool": "bash"}


def test_one_named_call_puts_the_stretch_on_the_named_threshold() -> None:
    d = driver()
    assert shell_calls(d, 14) == []
    assert d.call("get_ticket", {"id": "T-1"}) is not None  # 15 >= 12
    assert d.findings[0].detail["threshold"] == 12
    assert shell_calls(d, 20) == []  # one alert per stretch


def test_speech_clears_the_named_mark() -> None:
    d = driver()
    d.call("read_file", {"path": "a.go"})
    d.text("found it")
    assert shell_calls(d, 24) == []
    assert shell_calls(d, 1) == [1]


def test_runner_threshold_is_configurable_and_clamped() -> None:
    assert ToolsWithoutText(Config(runner_threshold=30)).runner_threshold == 30
    assert ToolsWithoutText(SignalConfig()).runner_threshold == 25
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"runner_threshold": 1}, Config)


# ------------------------------------------------- coding agents' own tools, plans


def claude_code_calls(d: Driver, count: int) -> list[int]:
    """Silent reads and edits through Claude Code's own tools, file after file."""
    hits = []
    for i in range(count):
        tool, args = ("Read", {"file_path": f"src/m{i}.py"}) if i % 2 else ("Edit", {"file_path": f"src/m{i}.py"})
        if d.call(tool, args) is not None:
            hits.append(i + 1)
    return hits


def test_a_silent_stretch_of_file_tools_trips_at_the_runner_threshold() -> None:
    d = driver()
    assert claude_code_calls(d, 24) == []
    assert shell_calls(d, 1) == [1]  # 25 with the shell's
    assert d.findings[0].detail["threshold"] == 25


def test_file_tools_match_with_their_case_and_generic_names_stay_named() -> None:
    d = driver()
    assert calls(d, 12, tool="read_file") == [12]  # an assistant's named read
    d = driver()
    assert calls(d, 12, tool="read") == [12]
    d = driver()
    assert calls(d, 12, tool="Read") == []


def test_a_named_call_among_file_tools_puts_the_stretch_on_the_named_threshold() -> None:
    d = driver()
    assert claude_code_calls(d, 11) == []
    assert d.call("mcp__jira__get_issue", {"key": "ENG-1"}) is not None


def test_a_plan_update_counts_as_speech() -> None:
    d = driver(after_first_text=True)
    assert d.call("TodoWrite", {"todos": [{"content": "migrate", "status": "in_progress"}]}) is None
    # the plan was the agent's first word: counting starts, and each plan re-arms it
    assert calls(d, 11) == []
    d.call("update_plan", {"plan": [{"step": "a", "status": "completed"}]})
    assert calls(d, 11) == []
    assert calls(d, 1) == [1]
    d.call("TodoWrite", {"todos": []})
    assert calls(d, 12) == [12]  # re-armed: one alert per stretch


def test_a_message_written_through_a_tool_counts_as_speech() -> None:
    d = driver(after_first_text=True)
    d.text("on it")
    assert shell_calls(d, 11) == []
    assert d.call("think", {"thought": "the pipe runs first"}) is None  # a coding tool
    assert d.call("finish", {"message": "Tests are green."}) is None
    assert shell_calls(d, 24) == []  # the count started again at the message


def test_plan_and_file_tools_are_configurable() -> None:
    d = driver(speech_tools=[], coding_tools=["fs_*"])
    assert d.call("TodoWrite", {"todos": []}) is None
    assert calls(d, 11) == [11]  # no plan tool now: the plan was the stretch's first call
    d = driver(speech_tools=["show_plan"])
    d.call("show_plan", {"steps": 3})
    assert calls(d, 11) == []
    d = driver(coding_tools=["fs_*"])
    assert calls(d, 24, tool="fs_read") == []
    assert calls(d, 1, tool="fs_read") == [1]


def test_in_a_session_that_drives_a_shell_a_call_naming_a_file_is_file_work() -> None:
    """Cursor's search_replace, Copilot's replace_string_in_file, a read_file beside
    run_terminal_cmd: named by each runtime its own way, they name the file they work on.
    In a session that has called a command runner, such a call keeps the stretch on the
    runner threshold; in a session of named tools only (the reference's kind) a read of a
    file is a named call, as before."""
    d = driver()
    assert shell_calls(d, 2) == []
    edits = [d.call(tool, {key: f"src/m{i}.ts", "old_string": "a", "new_string": "b"})
             for i in range(20)
             for tool, key in [("search_replace", "file_path"), ("replace_string_in_file", "filePath")][i % 2:i % 2 + 1]]
    assert edits == [None] * 20  # 22 calls, under 25
    assert shell_calls(d, 3) == [3]  # the 25th
    d = driver()
    assert calls(d, 12, tool="read_file") == [12]  # no shell in this session
    d = driver()
    assert shell_calls(d, 2) == []
    assert calls(d, 9, tool="read_file") == []
    assert d.call("get_ticket", {"id": "T-1"}) is not None  # a call naming no file: 12


def test_the_same_plan_or_message_again_is_no_speech() -> None:
    """A completion the harness keeps rejecting, re-sent word for word, or the same plan
    again: the person hears nothing new, and the count goes on."""
    d = driver(after_first_text=True)
    d.text("on it")
    hits = [n for n in range(1, 21) if d.call("attempt_completion", {"result": "Done: the tests pass."}) is not None]
    assert hits == [13]  # the first is speech; the next twelve are silent named calls
    d = driver(after_first_text=True)
    d.text("on it")
    plans = [d.call("TodoWrite", {"todos": [{"content": f"step {n}", "status": "done"}]}) for n in range(30)]
    assert plans == [None] * 30  # a new plan each time: speech each time


def test_a_call_names_a_file_by_a_path_in_its_value_not_by_its_arguments_name() -> None:
    """`direction`, `profile`, `target` hold "dir", "file" or a path's name but no path: a
    browser agent with a shell keeps the named threshold for its scrolls and clicks."""
    d = driver()
    assert shell_calls(d, 1) == []
    named = [d.call(tool, args) for tool, args in [
        ("browser_scroll", {"direction": "down"}), ("browser_click", {"target": "e12"}),
        ("get_user", {"profile": "default"})] * 4]
    assert [i + 2 for i, f in enumerate(named) if f is not None] == [12]
    d = driver()
    assert shell_calls(d, 1) == []
    files = [d.call("view_file", {"AbsolutePath": f"/src/m{i}.ts"}) for i in range(20)]
    assert files == [None] * 20


def test_a_coding_tool_makes_the_session_a_coding_agents() -> None:
    """Cursor before its first terminal command: after a `grep_search` (a coding tool),
    its `read_file` and `edit_file` of one component after another, with `read_lints`
    between, are file work on the runner threshold (a healthy extraction sweep of the
    fifty-eighth batch warned at its twelfth silent call). Without a coding tool or a
    shell, a read of a file is a named call, as before."""
    d = driver()
    assert d.call("grep_search", {"query": "placeholder="}) is None
    sweep = []
    for i in range(8):
        path = f"src/components/C{i}.tsx"
        sweep += [d.call("read_file", {"target_file": path}), d.call("edit_file", {"target_file": path}),
                  d.call("read_lints", {"paths": [path]})]
    # with the search, the 25th silent call trips
    assert [n + 2 for n, finding in enumerate(sweep) if finding is not None] == [25]
    d = driver()
    assert calls(d, 12, tool="read_file") == [12]


def test_in_a_coding_agents_session_a_plan_sent_again_is_its_own_tool() -> None:
    """Codex CLI re-sends its plan unchanged between patches and builds: no speech, but no
    named action either, so the stretch stays on the runner threshold (warned at twelve in
    the fifty-eighth batch). In a session of named tools a completion re-sent as it was is
    a named call (test_the_same_plan_or_message_again_is_no_speech)."""
    d = driver()
    assert shell_calls(d, 1) == []
    plan = {"plan": [{"step": "store: add ctx", "status": "completed"}]}
    got = []
    for i in range(10):
        got += [d.call("update_plan", plan), d.call("apply_patch", {"input": f"*** Update File: m{i}.go"})]
    assert got == [None] * 20  # the first plan is speech; 19 silent calls after it
    assert shell_calls(d, 6) == [6]  # the 25th silent call


def test_a_shared_tool_name_does_not_make_a_coding_agents_session() -> None:
    """A support agent that thinks once (the think-tool pattern) and then extracts thirty
    invoices by their file paths is an assistant with named tools: the named threshold."""
    d = driver()
    assert d.call("think", {"thought": "thirty invoices to extract"}) is None
    got = [d.call("extract_invoice", {"file_path": f"inbox/invoice_{n}.pdf"}) for n in range(20)]
    assert [n + 2 for n, finding in enumerate(got) if finding is not None] == [12]
