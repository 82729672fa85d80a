"""Importers: each recorded format maps to the contract-v1 events its docs promise."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from streamguard.events import (
    FinalAnswer,
    Text,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnStart,
    Usage,
    decode_agent_event,
    encode,
)
from streamguard.importers import (
    FORMATS,
    MAX_PAYLOAD_BYTES,
    ImportedSession,
    ImportFailure,
    detect_format,
    iter_sessions,
    read_sessions,
)
from streamguard.importers.swe_agent import observation_error

FIXTURES = Path(__file__).parent / "fixtures" / "import"


def only(format: str, relative: str) -> ImportedSession:
    sessions = read_sessions(format, FIXTURES / relative)
    assert len(sessions) == 1
    return sessions[0]


def calls(session: ImportedSession) -> list[ToolCall]:
    return [e for e in session.events if isinstance(e, ToolCall)]


def results(session: ImportedSession) -> list[ToolResult]:
    return [e for e in session.events if isinstance(e, ToolResult)]


def texts(session: ImportedSession, role: str = "assistant") -> list[str]:
    return [e.text or "" for e in session.events if isinstance(e, Text) and e.role == role]


def kinds(session: ImportedSession) -> list[str]:
    return [type(e).__name__ for e in session.events]


ALL_FIXTURES = sorted(p for p in FIXTURES.rglob("*") if p.is_file())


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=lambda p: p.relative_to(FIXTURES).as_posix())
def test_every_event_round_trips_through_the_contract_decoder(path: Path):
    for session in read_sessions(None, path):
        assert [e.seq for e in session.events] == list(range(1, len(session.events) + 1))
        assert isinstance(session.events[0], TurnStart) and isinstance(session.events[-1], TurnEnd)
        for event in session.events:
            assert event.session == session.session and event.agent == session.agent
            assert decode_agent_event(encode(event)) == event


def test_formats_are_detected_from_the_files():
    detected = {p.relative_to(FIXTURES).parts[0]: set() for p in ALL_FIXTURES}
    for path in ALL_FIXTURES:
        detected[path.relative_to(FIXTURES).parts[0]].add(detect_format(path))
    assert detected == {name: {name} for name in FORMATS}


def test_mapping_is_deterministic():
    first = [encode(e) for s in iter_sessions(None, [FIXTURES]) for e in s.events]
    second = [encode(e) for s in iter_sessions(None, [FIXTURES]) for e in s.events]
    assert first == second and first


# --------------------------------------------------------------------------- SWE-agent


def test_swe_agent_0x_commands_results_and_heuristic_errors():
    session = only("swe-agent", "swe-agent/20240101_SWE-agent_test-model/trajs/acme__widgets-7.traj")
    assert session.session == "20240101_SWE-agent_test-model/acme__widgets-7"
    assert session.agent == "swe-agent/test-model"
    assert session.ended == "submitted (exit_cost)"
    assert session.extra["harness_steps_dropped"] == 1
    # SWE-agent's own commands by name, plain shell as "bash"; the raw command line in args.
    assert [(c.tool, c.args["command"]) for c in calls(session)] == [
        ("find_file", 'find_file "Widget.java"'),
        ("search_dir", 'search_dir "frobnicate"'),
        ("bash", "ls src"),
        ("bash", "javac src/Widget.java"),
        ("edit", "edit 3:3\n    int size = 0\nend_of_edit"),
        ("bash", "python check.py"),
    ]  # the harness's exit_cost step is no call
    errors = [r.error for r in results(session)]
    assert errors == [
        None,
        'No matches found for "frobnicate" in /acme__widgets',
        None,
        "/bin/bash: line 12: javac: command not found",
        errors[4],
        "Traceback (most recent call last):",
    ]
    assert errors[4] and errors[4].startswith("Your proposed edit has introduced new syntax error")
    assert [r.call_id for r in results(session)] == [c.call_id for c in calls(session)]
    assert texts(session)[0] == "DISCUSSION\nFind the widget class first.\n"
    usage = [e for e in session.events if isinstance(e, Usage)]
    assert [(u.cost_usd, u.input_tokens) for u in usage] == [(2.5, None)]
    assert all(e.ts is None for e in session.events)  # 0.x records no times


def test_swe_agent_1x_function_calls():
    session = only("swe-agent", "swe-agent/run-1x/acme__widgets-8.traj")
    assert session.session == "run-1x/acme__widgets-8" and session.agent == "swe-agent"
    assert session.ended == "submitted" and session.extra["format_version"] == "1.x"
    assert [(c.tool, c.args, c.call_id) for c in calls(session)] == [
        ("bash", {"command": "ls"}, "call_a"),
        ("str_replace_editor", {"command": "view", "path": "/repo/b.py"}, "call_b"),
        ("submit", {}, "call_c"),
    ]
    assert [(r.tool, r.error) for r in results(session)] == [
        ("bash", None),
        ("str_replace_editor", "The path /repo/b.py does not exist."),
        ("submit", None),
    ]


@pytest.mark.parametrize(
    ("observation", "failed"),
    [
        ("bash: line 3: mvn: command not found", True),
        ("ls: cannot access 'x': No such file or directory", True),
        ("Usage: edit <start_line>:<end_line>", True),
        ("src/A.java:12: error: ';' expected\n1 error", True),
        ("build output\nException in thread \"main\" java.lang.NullPointerException", True),
        ("", False),
        ("Found 3 matches for \"x\" in /repo", False),
        ("The word Error: appears later on this line", False),
        ("[File: /repo/A.java (10 lines total)]\n1:class A {}", False),
    ],
)
def test_observation_heuristics_are_conservative(observation: str, failed: bool):
    assert (observation_error(observation) is not None) is failed


# --------------------------------------------------------------------------- mini-SWE-agent


def test_mini_swe_agent_tool_calls_return_codes_usage_and_format_complaints():
    session = only("mini-swe-agent", "mini-swe-agent/run-a/acme__widgets-9/acme__widgets-9.traj.json")
    assert session.session == "run-a/acme__widgets-9"
    assert session.agent == "mini-swe-agent/openai/test-mini"
    assert session.ended == "Submitted"
    assert [(c.tool, c.args, c.call_id) for c in calls(session)] == [
        ("bash", {"command": "grep -rn blue ."}, "call_1"),
        ("bash", {"command": "python -m pytest -q"}, "call_2"),
    ]
    assert [(r.error, r.result) for r in results(session)] == [
        (None, "./widget.py:3: color = 'red'\n"),
        ("exit code 1", "1 failed\n"),
    ]
    # The format complaint is harness text, never a call nor the agent speaking.
    assert texts(session, "system") == [
        "Format error: this reply has no tool call; send one."
    ]
    assert texts(session) == []
    usage = [(u.model, u.input_tokens, u.output_tokens, u.cost_usd, u.ts) for u in session.events if isinstance(u, Usage)]
    assert usage == [
        ("test-mini-2025", 1500, 40, 0.001, 1700000000.5),
        ("test-mini-2025", 1700, 30, 0.001, 1700000003.0),
    ]


def test_mini_swe_agent_text_actions():
    session = only("mini-swe-agent", "mini-swe-agent/run-b/acme__widgets-10.traj.json")
    assert session.ended == "LimitsExceeded" and session.extra["harness_messages"] == 1
    assert [c.args for c in calls(session)] == [{"command": "ls -la"}, {"command": "cat nothere.py"}]
    assert [r.error for r in results(session)] == [None, "exit code 1"]
    assert texts(session, "system") == ["Format error: two actions in one reply; send exactly one."]
    assert len(texts(session)) == 3  # the model's answers, the refused one included
    assert texts(session, "user") == ["Make widgets green."]


# --------------------------------------------------------------------------- Claude Code


def test_claude_code_main_chain_turns_errors_usage_and_interrupt():
    session = only("claude-code", "claude-code/session.jsonl")
    assert session.session == "5e1f0a2c-0000-4000-8000-000000000001"
    assert session.agent == "claude-code/claude-test-1"
    assert session.ended == "interrupted"
    assert session.extra == {"sidechain_records_dropped": 2, "title": "Fixing the build"}
    assert [(c.tool, c.call_id) for c in calls(session)] == [("Bash", "toolu_1"), ("Read", "toolu_2"), ("Bash", "toolu_3")]
    assert [(r.tool, r.error) for r in results(session)] == [("Bash", "make: *** [all] Error 2"), ("Read", None)]
    assert results(session)[1].result == "all:\n\tcc main.c"
    assert texts(session, "reasoning") == ["The build is broken; look at make."]
    assert texts(session) == ["I'll run the build."]
    assert texts(session, "user") == ["Fix the build please.", "Now try the tests.", "[Request interrupted by user for tool use]"]
    # Compaction summary and system notice are system text; meta and local-command records are dropped.
    system = texts(session, "system")
    assert len(system) == 2 and system[0].startswith("This session is being continued")
    assert not any("Caveat" in t or "command-name" in t for t in texts(session, "user"))
    # One usage per model message, with its last record's figures; input = input + cache.
    usage = [(u.input_tokens, u.output_tokens) for u in session.events if isinstance(u, Usage)]
    assert usage == [(1510, 60), (1510, 20), (1510, 15)]
    assert kinds(session).count("TurnStart") == 2
    assert session.events[0].ts == 1735725600.0


def test_claude_code_usage_carries_the_window_of_claude_models(tmp_path: Path):
    session = only("claude-code", "claude-code/session.jsonl")
    assert {u.context_window for u in session.events if isinstance(u, Usage)} == {200_000}
    lines = (FIXTURES / "claude-code" / "session.jsonl").read_text().splitlines()
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(line.replace("claude-test-1", "other-model") for line in lines) + "\n")
    other = read_sessions("claude-code", path)[0]
    assert {u.context_window for u in other.events if isinstance(u, Usage)} == {None}


def test_claude_code_without_an_interrupt_has_no_end_label(tmp_path: Path):
    lines = (FIXTURES / "claude-code" / "session.jsonl").read_text().splitlines()
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(lines[:-1]) + "\n")
    assert read_sessions("claude-code", path)[0].ended is None


# --------------------------------------------------------------------------- OpenAI-style chat


def test_openai_plain_message_list():
    session = only("openai-chat", "openai-chat/plain.json")
    assert session.session == "plain" and session.agent == "openai-chat" and session.ended is None
    assert [(c.tool, c.args) for c in calls(session)] == [("get_order", {"id": 5})]
    assert [(r.tool, r.error, r.result) for r in results(session)] == [("get_order", None, '{"status": "shipped"}')]
    assert texts(session) == ["Let me look.", "Order 5 has shipped."]


def test_agentdojo_errors_and_run_failure():
    session = only("openai-chat", "openai-chat/agentdojo_run.json")
    assert session.session == "shop_t01_seed_1_abc" and session.agent == "agentdojo/test-pipeline"
    assert session.ended == "InternalServerError"
    assert session.extra["outcome"] == "task_failure_safe"
    assert [(c.tool, c.args) for c in calls(session)] == [("search_items", {"query": "lamp"})]
    assert [r.error for r in results(session)] == ["ValueError: index offline"]
    assert texts(session) == ["The search is offline."]


def test_tau2_simulations_are_sessions_and_the_users_own_tools_are_dropped():
    sessions = read_sessions("openai-chat", FIXTURES / "openai-chat" / "tau2_results.json")
    assert [(s.session, s.agent, s.ended, s.extra["reward"]) for s in sessions] == [
        ("tau2_results/sim-a", "tau2/test/agent-llm", "user_stop", 1.0),
        ("tau2_results/sim-b", "tau2/test/agent-llm", "max_steps", 0.0),
    ]
    first = sessions[0]
    assert [c.tool for c in calls(first)] == ["check_stock"]  # not toggle_airplane_mode
    assert [(r.tool, r.error) for r in results(first)] == [("check_stock", "Item 7 not found")]
    usage = [(u.input_tokens, u.output_tokens, u.cost_usd) for u in first.events if isinstance(u, Usage)]
    assert usage == [(900, 12, 0.002)]
    assert first.events[0].ts == 1767225601.0  # naive ISO times are UTC
    assert kinds(first).count("TurnStart") == 2  # the greeting, then the user's question


def test_tau_bench_result_list():
    (session,) = read_sessions("openai-chat", FIXTURES / "openai-chat" / "tau_bench_results.json")
    assert session.session == "tau_bench_results/task-3/trial-0" and session.agent == "tau-bench"
    assert [c.args for c in calls(session)] == [{"id": "R1"}]
    assert results(session)[0].error is None  # plain logs record no error; no heuristic is applied


# --------------------------------------------------------------------------- Who&When


def test_magentic_one_instructions_are_calls_and_the_termination_labels_the_end():
    session = only("who-and-when", "who-and-when/Hand-Crafted/4.json")
    assert session.session == "Hand-Crafted/4" and session.agent == "magentic-one"
    assert session.ended == "max_rounds"
    assert [(c.tool, c.args) for c in calls(session)] == [
        ("WebSurfer", {"instruction": "Search for the height of the tower."}),
        ("ComputerTerminal", {"instruction": "Compute 1000 feet in metres."}),
    ]
    out = results(session)
    assert [(r.tool, r.call_id) for r in out] == [("WebSurfer", "step-3"), ("ComputerTerminal", "step-6")]
    assert out[0].error is None and out[1].error and out[1].error.startswith("No code block detected")
    assert texts(session, "tool") == ["Nobody asked me."]
    assert [e.text for e in session.events if isinstance(e, FinalAnswer)] == ["305"]
    assert session.extra["mistake_step"] == "3"


def test_captain_agent_terminal_runs_are_calls():
    session = only("who-and-when", "who-and-when/Algorithm-Generated/9.json")
    assert session.agent == "captain-agent" and session.ended == "finished"
    assert [c.args for c in calls(session)] == [{"code": "print(2 + 3)"}, {"code": "print(2 / 0)"}]
    assert [r.error for r in results(session)] == [None, "exitcode: 1 (execution failed)"]
    assert len(texts(session, "system")) == 1  # "no code to execute": bookkeeping, no call
    assert texts(session, "user")[0].startswith("You are given a task")


@pytest.mark.parametrize(
    ("termination", "ended"),
    [("Max rounds (30) reached.", "max_rounds"), ("Max time (1500s) reached.", "max_time"),
     ("No agent selected.\nFINAL ANSWER: 3", "finished"), ("Something else", "terminated")],
)
def test_magentic_one_termination_classes(tmp_path: Path, termination: str, ended: str):
    path = tmp_path / "Hand-Crafted" / "1.json"
    path.parent.mkdir()
    history = [{"role": "human", "content": "q"}, {"role": "Orchestrator (termination condition)", "content": termination}]
    path.write_text(json.dumps({"history": history}))
    assert read_sessions("who-and-when", path)[0].ended == ended


# --------------------------------------------------------------------------- bounds and bad input


def test_long_results_are_truncated_with_a_note_and_their_size_kept(tmp_path: Path):
    big = "x" * (MAX_PAYLOAD_BYTES + 5000)
    path = tmp_path / "big.traj"
    path.write_text(json.dumps({"trajectory": [{"action": "cat big.txt", "observation": big, "thought": ""}], "info": {}}))
    (result,) = results(read_sessions("swe-agent", path)[0])
    assert result.result_bytes == len(big)
    assert result.result.startswith("x" * 1000) and result.result.endswith("[... truncated 5000 bytes]")
    assert len(result.result.encode()) < MAX_PAYLOAD_BYTES + 100


def test_session_ids_are_bounded_and_stay_distinct(tmp_path: Path):
    names = ["a" * 300 + "-one", "a" * 300 + "-two"]
    ids = []
    for name in names:
        path = tmp_path / f"{name[-4:]}.json"
        path.write_text(json.dumps({"run_id": name, "messages": [{"role": "user", "content": "hi"}]}))
        (session,) = read_sessions("openai-chat", path)
        assert len(session.session) == 256
        ids.append(session.session)
    assert ids[0] != ids[1]


def test_a_bad_record_names_the_file_and_record_and_the_other_files_go_on(tmp_path: Path):
    bad_traj = tmp_path / "bad.traj"
    bad_traj.write_text(json.dumps({"trajectory": [{"action": "ls", "observation": ""}, "oops"], "info": {}}))
    bad_jsonl = tmp_path / "bad.jsonl"
    good = (FIXTURES / "claude-code" / "session.jsonl").read_text().splitlines()
    bad_jsonl.write_text("\n".join([good[0], good[1], "{not json"]) + "\n")
    shutil.copy(FIXTURES / "openai-chat" / "plain.json", tmp_path / "plain.json")
    failures: list[ImportFailure] = []
    sessions = list(iter_sessions(None, [bad_traj, bad_jsonl, tmp_path / "plain.json"], on_error=failures.append))
    assert [s.session for s in sessions] == ["plain"]
    assert [(Path(f.path).name, f.record) for f in failures] == [("bad.traj", 2), ("bad.jsonl", 3)]
    assert str(failures[0]).startswith(f"{bad_traj}: record 2 (trajectory): ")
    assert str(failures[1]).startswith(f"{bad_jsonl}: record 3 (line): not JSON")


def test_failures_raise_without_a_handler_and_unknown_files_in_folders_are_skipped(tmp_path: Path):
    (tmp_path / "results.json").write_text(json.dumps({"resolved": ["a"]}))
    (tmp_path / "LICENSE").write_text("text")
    skipped: list[str] = []
    assert list(iter_sessions(None, [tmp_path], on_skip=skipped.append)) == []
    assert [Path(p).name for p in skipped] == ["results.json"]
    with pytest.raises(ImportFailure, match="not a recognised session file"):
        list(iter_sessions(None, [tmp_path / "results.json"]))
    with pytest.raises(ImportFailure, match="not a JSON document"):
        (tmp_path / "broken.json").write_text("{")
        read_sessions("openai-chat", tmp_path / "broken.json")
    with pytest.raises(ValueError, match="unknown format"):
        read_sessions("nope", tmp_path / "results.json")


# --------------------------------------------------------------------------- format variants across versions


def write_json(path: Path, document: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    return path


def test_swe_agent_1x_errors_are_read_under_the_observation_template_and_the_harness_exit_is_dropped():
    session = only("swe-agent", "swe-agent/run-1x-fc/acme__widgets-11.traj")
    assert session.ended == "submitted (exit_cost)" and session.extra["harness_steps_dropped"] == 1
    # exit_forfeit is a tool the model called: 1.x writes its own exits as no call at all.
    assert [(c.tool, c.call_id) for c in calls(session)] == [("bash", "call_1"), ("bash", "call_2"), ("exit_forfeit", "call_3")]
    assert [r.error for r in results(session)] == [None, "bash: javac: command not found", None]
    assert results(session)[0].result == "OBSERVATION:\nWidget.java"  # what the model was shown
    assert "Exit due to cost limit" not in texts(session)  # the harness's words, not the model's


def test_swe_agent_1x_text_actions_make_no_call_for_steps_no_shell_ran():
    session = only("swe-agent", "swe-agent/run-1x-text/acme__widgets-12.traj")
    assert session.extra["format_version"] == "1.x"
    assert session.ended == "submitted (exit_context)"
    # An unparsed reply and a refused action ran nothing; the harness's exit step is dropped.
    assert [c.args["command"] for c in calls(session)] == ["cat src/Widget.java"]
    assert session.extra["unexecuted_steps"] == 2 and session.extra["harness_steps_dropped"] == 1
    assert texts(session) == ["I am not sure what to do.", "Edit interactively.", "Read it instead."]


def test_swe_agent_0x_empty_action_runs_nothing(tmp_path: Path):
    steps = [
        {"action": "ls", "observation": "a.py", "thought": "List."},
        {"action": "\n", "observation": "", "thought": "DISCUSSION\nno command given"},
        {"action": "exit_cost", "observation": "Exited (autosubmitted)", "thought": "Exit due to cost limit"},
    ]
    path = write_json(tmp_path / "r" / "x__y-1.traj", {"trajectory": steps, "info": {"exit_status": "submitted (exit_cost)"}})
    session = read_sessions("swe-agent", path)[0]
    assert [c.args["command"] for c in calls(session)] == ["ls"]
    assert session.extra == {"format_version": "0.x", "harness_steps_dropped": 1, "unexecuted_steps": 1}
    assert texts(session) == ["List.", "DISCUSSION\nno command given"]


def test_swe_agent_retry_loop_files(tmp_path: Path):
    attempt = {"trajectory": [{"action": "ls", "observation": "a.py", "thought": "t"}], "history": [], "info": {"exit_status": "submitted"}}
    second = {"trajectory": [{"action": "pwd", "observation": "/repo", "thought": "t"}], "history": [], "info": {}}
    chosen = write_json(tmp_path / "run" / "a__b-1.traj", {"attempts": [attempt, second], **attempt})
    assert [c.args["command"] for c in calls(read_sessions(None, chosen)[0])] == ["ls"]
    # Saved before the loop chose an attempt: only ``attempts``, the last one still running.
    running = write_json(tmp_path / "run" / "a__b-2.traj", {"attempts": [attempt, second]})
    assert detect_format(running) == "swe-agent"
    session = read_sessions(None, running)[0]
    assert [c.args["command"] for c in calls(session)] == ["pwd"] and session.ended is None


def test_mini_swe_agent_2x_text_model_uses_the_harness_parse_and_recorded_return_codes():
    session = only("mini-swe-agent", "mini-swe-agent/run-c/acme__widgets-13.traj.json")
    assert session.ended == "LimitsExceeded"  # info.exit_status unset: the exit message says
    assert [(c.args, c.call_id) for c in calls(session)] == [({"command": "ls"}, "message-3"), ({"command": "python widget.py"}, "message-5")]
    # The second observation uses another template: its recorded fields give the result.
    assert [(r.result, r.error) for r in results(session)] == [
        ("widget.py\n", None),
        ("Traceback (most recent call last):\nNameError: green\n", "exit code 1"),
    ]
    assert session.extra["harness_messages"] == 0
    assert calls(session)[0].ts == 1700000100.0


@pytest.mark.parametrize(
    ("text", "blocks"),
    [
        ("```bash\nls\n```", ["ls"]),
        ("```mswea_bash_command\nls -la\n```", ["ls -la"]),
        ("<bash_code>cat a</bash_code>", ["cat a"]),
        ("<mswea_bash_command>\npwd\n</mswea_bash_command>", ["pwd"]),
        ("```python\nprint(1)\n```", []),
        ("```bash\nls\n```\n```bash\npwd\n```", ["ls", "pwd"]),
    ],
)
def test_mini_swe_agent_action_formats(text: str, blocks: list[str]):
    from streamguard.importers.mini_swe_agent import action_blocks

    assert action_blocks(text) == blocks


def test_mini_swe_agent_responses_api_items_are_messages_calls_and_results():
    session = only("mini-swe-agent", "mini-swe-agent/run-d/acme__widgets-14.traj.json")
    assert session.ended == "Submitted" and session.agent == "mini-swe-agent/openai/test-resp"
    assert [(c.args, c.call_id) for c in calls(session)] == [
        ({"command": "grep -rn red ."}, "call_r1"),
        ({"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}, "call_r2"),
    ]
    assert [(r.call_id, r.result, r.error) for r in results(session)] == [("call_r1", "./widget.py:3: color = 'red'\n", None)]
    assert texts(session, "reasoning") == ["Find the colour first."] and texts(session) == ["Searching."]
    assert texts(session, "system") == ["Format error: this reply has no tool call; send one."]
    usage = [(u.model, u.input_tokens, u.output_tokens, u.cost_usd) for u in session.events if isinstance(u, Usage)]
    assert usage == [("test-resp-2025", 1200, 50, 0.005), ("test-resp-2025", 1400, 20, 0.005)]


def test_mini_swe_agent_1x_submission_answers_the_last_command_and_message_stamps_are_times():
    session = only("mini-swe-agent", "mini-swe-agent/run-e/acme__widgets-15.traj.json")
    assert [(r.call_id, r.result, r.error) for r in results(session)] == [
        ("message-3", "", None),
        ("message-5", "diff --git a/widget.py", None),
    ]
    assert session.extra["harness_messages"] == 0
    assert calls(session)[0].ts == 1700000301.0


def test_claude_code_2x_bookkeeping_first_lines_api_error_and_system_subtypes():
    path = FIXTURES / "claude-code" / "v2-session.jsonl"
    assert detect_format(path) == "claude-code"  # the first records are a file snapshot and a queue operation
    session = read_sessions(None, path)[0]
    assert session.session == "5e1f0a2c-0000-4000-8000-000000000002" and session.agent == "claude-code/claude-test-2"
    assert session.ended == "api_error"
    assert [(r.tool, r.result, r.error) for r in results(session)] == [("Bash", "1 failed", "1 failed")]
    assert texts(session, "reasoning") == ["Run pytest."] and texts(session) == []
    # The local command echo is dropped; the compaction notice and the API error are the harness's.
    assert texts(session, "system") == ["Conversation compacted", "API Error: 529 Overloaded"]
    assert [(u.model, u.input_tokens, u.output_tokens) for u in session.events if isinstance(u, Usage)] == [
        ("claude-test-2", 2010, 30)
    ]


def test_claude_code_subagent_transcript_is_its_own_session():
    sid = "5e1f0a2c-0000-4000-8000-000000000002"
    session = only("claude-code", f"claude-code/{sid}/subagents/agent-a1b2c3.jsonl")
    assert session.session == f"{sid}/agent-a1b2c3" and session.extra["subagent"] is True
    assert [(c.tool, c.call_id) for c in calls(session)] == [("Grep", "toolu_s1")]
    assert [r.result for r in results(session)] == ["tests/test_w.py:3:def test_green"]


def test_claude_code_detection_gives_up_on_a_foreign_jsonl(tmp_path: Path):
    path = tmp_path / "other.jsonl"
    path.write_text('{"type": "file-history-snapshot", "snapshot": {}}\n{"event": "click"}\n')
    assert detect_format(path) is None


def test_tau2_directory_format_simulation_files_and_their_index_is_skipped(tmp_path: Path):
    run = tmp_path / "tau2-dir-run"
    shutil.copytree(FIXTURES / "openai-chat" / "tau2-dir-run", run)
    (run / "results.json").write_text(json.dumps({"info": {"agent_info": {"llm": "x"}}, "tasks": [],
                                                  "simulation_index": [{"id": "sim-c", "task_id": "7", "trial": 0}]}))
    skipped: list[str] = []
    (session,) = list(iter_sessions(None, [tmp_path], on_skip=skipped.append))
    assert [Path(p).name for p in skipped] == ["results.json"]
    assert (session.session, session.agent, session.ended) == ("tau2-dir-run/sim-c", "tau2", "too_many_errors")
    # A grouped tool message is one result per call.
    assert [(c.tool, c.call_id) for c in calls(session)] == [("cancel_order", "c1"), ("cancel_order", "c2")]
    assert [(r.call_id, r.error) for r in results(session)] == [("c1", "Order 1 not found"), ("c2", None)]


def test_tau2_voice_simulation_is_refused_by_name(tmp_path: Path):
    path = write_json(tmp_path / "simulations" / "v.json",
                      {"id": "v", "task_id": "1", "termination_reason": "user_stop", "messages": [], "ticks": []})
    assert len(read_sessions(None, path)) == 1  # an empty message list is still a simulation
    path.write_text(json.dumps({"id": "v", "task_id": "1", "termination_reason": "user_stop", "messages": None, "ticks": [{}]}))
    for format in ("openai-chat", None):
        with pytest.raises(ImportFailure, match="full-duplex"):
            read_sessions(format, path)


def test_agentdojo_own_log_ids_thinking_and_end():
    path = "openai-chat/agentdojo-runs/test-pipeline/workspace/user_task_3/important_instructions/injection_task_1.json"
    session = only("openai-chat", path)
    assert session.session == "test-pipeline/workspace/user_task_3/important_instructions/injection_task_1"
    assert session.agent == "agentdojo/test-pipeline"
    assert session.ended == "finished"  # no error, and the model answered without a tool call
    assert session.extra == {"utility": True, "security": False}
    assert texts(session, "reasoning") == ["Look at the calendar."]  # the redacted block is no text
    assert texts(session) == ["Your meeting is in room 4."]
    assert [(r.tool, r.result) for r in results(session)] == [("search_calendar", "Room 4")]


def test_agentdojo_own_log_ending_on_a_tool_result_has_no_end_label(tmp_path: Path):
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": None,
                "tool_calls": [{"function": "f", "args": {}, "id": "1"}]}, {"role": "tool", "content": "r", "tool_call_id": "1"}]
    path = write_json(tmp_path / "none.json", {"suite_name": "s", "pipeline_name": "p", "user_task_id": "user_task_0",
                                               "injection_task_id": None, "attack_type": None, "messages": messages, "error": None})
    session = read_sessions("openai-chat", path)[0]
    assert session.session == "p/s/user_task_0/none/none" and session.ended is None


def test_tau_bench_react_calls_and_end_labels_from_info():
    s1, s2 = read_sessions(None, FIXTURES / "openai-chat" / "react-gpt-test-0.0_range_0-2_user-gpt-test-llm_0101.json")
    assert (s1.ended, s2.ended) == ("user_stop", "max_steps")
    assert [(c.tool, c.args, c.call_id) for c in calls(s1)] == [("get_order_details", {"order_id": "R7"}, "message-3")]
    assert [(r.call_id, r.result) for r in results(s1)] == [("message-3", '{"status": "delivered"}')]
    assert texts(s1, "user") == ["Where is order R7?", "Thanks! ###STOP###"]  # no "API output:" as the user's words
    assert [c.tool for c in calls(s2)] == ["get_order_details"]


def test_tau_bench_errors_and_early_claude_agent_blocks(tmp_path: Path):
    traj = [
        {"role": "system", "content": "policy"},
        {"role": "user", "content": "Cancel R1."},
        {"role": "assistant", "content": [{"type": "text", "text": "Checking."},
                                          {"type": "tool_use", "id": "tu1", "name": "cancel", "input": {"id": "R1"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": "cancelled"}]},
    ]
    results_list = [
        {"task_id": 0, "reward": 0.0, "trial": 0, "info": {"error": "litellm.RateLimitError: slow down", "traceback": "..."}, "traj": []},
        {"task_id": 1, "reward": 0.0, "trial": 0, "info": "Error: boom", "traj": traj},
    ]
    path = write_json(tmp_path / "tool-calling-x.json", results_list)
    errored, early = read_sessions("openai-chat", path)
    assert errored.ended == "RateLimitError" and early.ended == "error"
    assert [(c.tool, c.args, c.call_id) for c in calls(early)] == [("cancel", {"id": "R1"}, "tu1")]
    assert [(r.tool, r.result) for r in results(early)] == [("cancel", "cancelled")]
    assert texts(early, "user") == ["Cancel R1."] and texts(early) == ["Checking."]


def test_bench_labels_the_end_states_these_harnesses_write():
    import importlib.util

    spec = importlib.util.spec_from_file_location("detection_bench_labels", Path(__file__).resolve().parent.parent / "bench" / "detection.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    expected = {
        bench.NORMAL: ["submitted", "Submitted", "exit_command", "user_stop", "agent_stop", "finished"],
        bench.BUDGET: ["exit_cost", "submitted (exit_cost)", "submitted (exit_total_execution_time)", "exit_context",
                       "LimitsExceeded", "TimeExceeded", "ContextWindowExceededError", "max_steps", "timeout",
                       "too_many_errors", "context_window_exceeded", "max_rounds", "max_time"],
        bench.API_FAILURE: ["exit_api", "submitted (exit_api)", "RateLimitError", "APIConnectionError", "Timeout",
                            "infrastructure_error", "api_error", "InternalServerError"],
        bench.UNKNOWN: ["exit_format", "submitted (exit_format)", "exit_error", "early_exit", "skipped",
                        "RepeatedFormatError", "agent_error", "user_error", "interrupted", "terminated", "", None],
    }
    assert {label: [bench.label_of(x) for x in ends] for label, ends in expected.items()} == {
        label: [label] * len(ends) for label, ends in expected.items()
    }


def test_openai_legacy_function_calls(tmp_path: Path):
    messages = [
        {"role": "user", "content": "Weather in Bern?"},
        {"role": "assistant", "content": None, "function_call": {"name": "get_weather", "arguments": "{\"city\": \"Bern\"}"}},
        {"role": "function", "name": "get_weather", "content": "sunny"},
        {"role": "assistant", "content": "It is sunny."},
    ]
    session = read_sessions(None, write_json(tmp_path / "legacy.json", messages))[0]
    assert [(c.tool, c.args) for c in calls(session)] == [("get_weather", {"city": "Bern"})]
    assert [(r.tool, r.result) for r in results(session)] == [("get_weather", "sunny")]


def test_claude_code_shell_mode_echoes_are_neither_prompts_nor_calls(tmp_path: Path):
    base = {"sessionId": "s-1", "parentUuid": None, "isSidechain": False, "timestamp": "2026-01-02T10:00:00Z"}
    records = [
        {**base, "type": "user", "message": {"role": "user", "content": "<bash-input>git status</bash-input>"}},
        {**base, "type": "user", "message": {"role": "user", "content": "<bash-stdout>clean</bash-stdout><bash-stderr></bash-stderr>"}},
        {**base, "type": "user", "message": {"role": "user", "content": "Commit it."}},
    ]
    path = tmp_path / "s-1.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    session = read_sessions(None, path)[0]
    assert texts(session, "user") == ["Commit it."] and kinds(session).count("TurnStart") == 1


# --------------------------------------------------------------------------- hostile values

# Every fixture with its values replaced, one kind at a time, by values of the wrong
# type or out of range (a number JSON can carry but no field can hold: 1e400 decodes
# as infinity). Each file must import or fail as an ImportFailure naming it, and what
# imports must encode as contract events: never another exception.
_NUMBER = r"(?<=[:\[,]\s)-?\d+(\.\d+)?(?=[,\]}\s])"
_STRING = r"(?<=:)\s*\"[^\"\n]*\"(?=\s*[,}])"
_LITERAL = r"(?<=:\s)(true|false|null)(?=[,}\s])"
_HOSTILE = ["1e400", "-1e400", "9" * 30, "-1", "null", "[]", "{}", '"x"', "true", "[[[[[[1]]]]]]"]


@pytest.mark.parametrize("pattern", [_NUMBER, _STRING, _LITERAL], ids=["numbers", "strings", "literals"])
def test_no_value_of_the_wrong_type_escapes_as_another_exception(pattern: str, tmp_path: Path) -> None:
    import re

    from streamguard.events import encode

    variants = 0
    for source in sorted(p for p in FIXTURES.rglob("*") if p.is_file()):
        text = source.read_text()
        for n, value in enumerate(_HOSTILE):
            mutated = re.sub(pattern, value, text)
            if mutated == text:
                continue
            variants += 1
            folder = tmp_path / f"{source.parent.name}-{source.stem}-{n}"
            folder.mkdir()
            target = folder / source.name
            target.write_text(mutated)
            failures: list[ImportFailure] = []
            for session in iter_sessions(None, [target], on_error=failures.append):
                for event in session.events:
                    encode(event)
            assert all(failure.path == str(target) for failure in failures)
    assert variants > 50


# --------------------------------------------------------------------------- the contract's bounds


def _round_trips(sessions: list[ImportedSession]) -> list[ToolCall | ToolResult | Text | Usage]:
    events = [event for session in sessions for event in session.events]
    for event in events:
        assert decode_agent_event(encode(event)) == event
    return events  # type: ignore[return-value]


def test_what_no_contract_field_can_carry_is_brought_inside_it(tmp_path: Path):
    """Millisecond stamps, a 300-character tool name, counts and costs no call has,
    arguments nested past 64 levels: every event written decodes, so that `replay`
    and the processor take what `import` wrote."""
    deep: object = "x"
    for _ in range(70):
        deep = {"a": deep}
    messages = [
        {"role": "user", "content": "go", "timestamp": 1_735_689_600_123},
        {"role": "assistant", "content": "", "timestamp": 1_735_689_601_000,
         "tool_calls": [{"id": "c1", "type": "function",
                         "function": {"name": "t" * 300, "arguments": json.dumps(deep)}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok", "timestamp": 1_735_689_602_000},
        {"role": "assistant", "content": "done", "timestamp": "9999-12-31T00:00:00Z"},
    ]
    events = _round_trips(read_sessions("openai-chat", write_json(tmp_path / "ms.json", messages)))
    assert [e.ts for e in events if isinstance(e, ToolCall | ToolResult)] == [1_735_689_601.0, 1_735_689_602.0]
    [call] = [e for e in events if isinstance(e, ToolCall)]
    assert call.tool.startswith("t" * 200) and len(call.tool) <= 256
    assert isinstance(call.args, str) and "nested deeper" in call.args
    assert [e.ts for e in events if isinstance(e, Text) and e.text == "done"] == [None]


def test_text_no_utf8_can_carry_and_file_names_that_are_not_utf8_are_imported(tmp_path: Path):
    lines = (FIXTURES / "claude-code" / "session.jsonl").read_text().splitlines()
    surrogate = tmp_path / "s.jsonl"
    surrogate.write_text("\n".join(line.replace("I'll run the build.", "I'll run \\ud800 the build.") for line in lines) + "\n")
    events = _round_trips(read_sessions("claude-code", surrogate))
    assert "I'll run ? the build." in [e.text for e in events if isinstance(e, Text)]
    folder = tmp_path / "chats"
    folder.mkdir()
    name = os.fsencode(folder) + b"/chat\xff.json"
    with open(name, "wb") as handle:
        handle.write(json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]).encode())
    [session] = list(iter_sessions(None, [folder]))
    _round_trips([session])
    assert session.session == "chat?"


def test_a_file_gets_the_same_ids_from_any_working_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    run = tmp_path / "20240825_SWE-agent_gpt-4o" / "trajs"
    shutil.copytree(FIXTURES / "swe-agent" / "20240101_SWE-agent_test-model", run)
    traj = next(p for p in run.rglob("*.traj"))
    hand = tmp_path / "Hand-Crafted"
    hand.mkdir()
    log = shutil.copy(next((FIXTURES / "who-and-when").rglob("*.json")), hand / "4.json")
    seen = []
    for folder in (tmp_path, traj.parent, hand):
        monkeypatch.chdir(folder)
        seen.append([
            (s.session, s.agent)
            for path in (traj, Path(log))
            for s in read_sessions(None, os.path.relpath(path, folder))
        ])
    assert seen[0] == seen[1] == seen[2]
    assert seen[0][0][1] == "swe-agent/gpt-4o" and seen[0][1][0] == "Hand-Crafted/4"


def test_mini_swe_agent_reads_the_recorded_return_code_before_the_text(tmp_path: Path):
    """An output that mentions a timeout, or holds a <returncode> of its own, is what
    the command printed: the recorded fields say how it ended."""
    source = FIXTURES / "mini-swe-agent" / "run-a" / "acme__widgets-9" / "acme__widgets-9.traj.json"
    document = json.loads(source.read_text())
    tool = next(m for m in document["messages"] if m["role"] == "tool")
    tool["content"] = "1 passed (retry: request has timed out once, then ok)\n[exit code 0]"
    tool["extra"] = {"returncode": 0, "raw_output": "1 passed (retry: request has timed out once, then ok)\n"}
    [first, *_] = results(read_sessions("mini-swe-agent", write_json(tmp_path / "a.traj.json", document))[0])
    assert (first.error, first.result) == (None, "1 passed (retry: request has timed out once, then ok)\n")
    tool["content"] = "<returncode>3</returncode><output>a test printed this</output>"
    tool["extra"] = {"returncode": 0, "raw_output": "<returncode>3</returncode>"}
    [first, *_] = results(read_sessions("mini-swe-agent", write_json(tmp_path / "b.traj.json", document))[0])
    assert first.error is None


def test_mini_swe_agent_output_openers_without_a_closer_are_the_output():
    """Each opener with no closer after it once cost a scan to the end (quadratic: a
    240 KB file took half a minute); the search now stops at the last closer."""
    from streamguard.importers.mini_swe_agent import harness_reply

    text = "<returncode>0</returncode>" + "<output>" * 20_000
    assert harness_reply(text) == ("<output>" * 20_000, None)
    closed = "<returncode>2</returncode><output>\nout</output>" + "<output>" * 20_000
    assert harness_reply(closed) == ("out", "exit code 2")


def test_a_bare_tool_call_id_answers_its_call_not_one_call_per_character(tmp_path: Path):
    document = json.loads((FIXTURES / "swe-agent" / "run-1x-fc" / "acme__widgets-11.traj").read_text())
    first = next(m for m in document["history"] if m.get("tool_call_ids"))
    [call_id] = first["tool_call_ids"]
    first["tool_call_ids"] = call_id
    session = read_sessions("swe-agent", write_json(tmp_path / "run" / "x.traj", document))[0]
    expected = only("swe-agent", "swe-agent/run-1x-fc/acme__widgets-11.traj")
    assert [(r.tool, r.call_id) for r in results(session)] == [(r.tool, r.call_id) for r in results(expected)]
    first["tool_call_ids"] = {"id": call_id}
    with pytest.raises(ImportFailure, match="tool_call_ids must be a list"):
        read_sessions("swe-agent", write_json(tmp_path / "run" / "y.traj", document))


def test_claude_code_values_of_the_wrong_type_fail_the_file_and_echoes_in_blocks_are_dropped(tmp_path: Path):
    lines = (FIXTURES / "claude-code" / "session.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assistant = next(i for i, r in enumerate(records) if r.get("type") == "assistant")

    def write(name: str, changed: list[dict]) -> Path:
        path = tmp_path / name
        path.write_text("\n".join(json.dumps(r) for r in changed) + "\n")
        return path

    listed = [dict(r) for r in records]
    listed[assistant]["type"] = ["assistant"]
    with pytest.raises(ImportFailure, match=rf"record {assistant + 1} \(line\): type must be a string"):
        read_sessions("claude-code", write("listed.jsonl", listed))
    stamped = [dict(r) for r in records]
    stamped[assistant]["timestamp"] = {"a": 1}
    with pytest.raises(ImportFailure, match="timestamp must be a string"):
        read_sessions("claude-code", write("stamped.jsonl", stamped))
    echo = dict(records[0], uuid="echo-1", type="user", message={
        "role": "user", "content": [{"type": "text", "text": "<bash-input>git status</bash-input>"}]})
    session = read_sessions("claude-code", write("echo.jsonl", [*records, echo]))[0]
    assert not [t for t in texts(session, "user") if "bash-input" in t]


def test_a_folder_read_with_a_named_format_skips_its_other_files_and_pipes(tmp_path: Path):
    """A tau2 run folder holds a results.json with no messages: skipped there as it is
    when formats are detected. A named pipe would block the read for good."""
    shutil.copy(FIXTURES / "openai-chat" / "plain.json", tmp_path / "plain.json")
    (tmp_path / "results.json").write_text(json.dumps({"info": {}, "tasks": []}))
    os.mkfifo(tmp_path / "pipe.json")
    skipped: list[str] = []
    sessions = list(iter_sessions("openai-chat", [tmp_path], on_skip=skipped.append))
    assert [s.session for s in sessions] == ["plain"]
    assert [Path(p).name for p in skipped] == ["results.json"]
    with pytest.raises(ImportFailure):  # named on its own, a file of another shape still fails
        read_sessions("openai-chat", tmp_path / "results.json")


def test_a_folder_that_cannot_be_listed_is_reported_and_the_rest_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    (tmp_path / "ok").mkdir()
    (tmp_path / "locked").mkdir()
    shutil.copy(FIXTURES / "openai-chat" / "plain.json", tmp_path / "ok" / "plain.json")
    real = os.scandir

    def scandir(path: str | os.PathLike[str] = ".") -> object:
        if os.fspath(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    failures: list[ImportFailure] = []
    sessions = list(iter_sessions(None, [tmp_path], on_error=failures.append))
    assert [s.session for s in sessions] == ["plain"]
    assert [str(f) for f in failures] == [f"{tmp_path / 'locked'}: cannot list folder: Permission denied"]
