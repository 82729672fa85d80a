"""Importers: each recorded format maps to the contract-v1 events its docs promise."""

from __future__ import annotations

import json
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
        "No tool calls found in the response. Every response MUST include at least one tool call."
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
    assert texts(session, "system") == ["Please always provide EXACTLY ONE action in triple backticks, found 2 actions."]
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
