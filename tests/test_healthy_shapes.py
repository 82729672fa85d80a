"""Healthy work of common agent runtimes that once drew a critical, and the loops beside them
that must still be halted: each case is the smallest trace that showed the shape.

- editors whose names open with another word (``MultiEdit``, ``replace_in_file``, ``replace``)
  are writes, so edit, re-run, fail is debugging;
- an error that says only ``exit code 1`` is told apart by the output it came with;
- a write tool's bare acknowledgement is news, never stale;
- JSON delivered as text is compared exactly, like a JSON payload;
- a call that waits on purpose (``sleep 60 && ...``, OpenHands' empty command) is a poll,
  and a failing one no failure to count or advise against.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from msgspec import structs

from streamguard.engine import Engine
from streamguard.events import Alert, Text, ToolCall, ToolResult, TurnStart
from streamguard.policy import parse_policy_set
from streamguard.signals.base import failure_outcome, found_nothing, says_only_status
from streamguard.signals.facts import (
    CallFacts,
    argument_facts,
    cell_error,
    code_executor_report,
    context_items,
    names_write,
    operation_facts,
    request_facts,
    runner_facts,
    script_report,
    shell_facts,
    silent_run,
    terminal_screen,
    wrapped_call,
)
from streamguard.signals.result_stall import is_json_text, template
from streamguard.watchdog import Watchdog
from tests.harness import engine_alerts

DEFAULT = ""


def word(i: int) -> str:
    return "".join("abcdefghij"[int(d)] for d in str(i))


def alerts(trace: list[Any], policy: str = DEFAULT) -> list[Alert]:
    return engine_alerts(trace, policy, "h")


def criticals(trace: list[Any], policy: str = DEFAULT) -> list[str]:
    return [a.signal for a in alerts(trace, policy) if a.severity == "critical"]


class Calls:
    """Calls and their results with ids, as runtimes send them."""

    def __init__(self) -> None:
        self.n = 0

    def call(self, tool: str, args: Any) -> tuple[ToolCall, str]:
        self.n += 1
        cid = f"c{self.n}"
        return ToolCall(session="h", tool=tool, args=args, call_id=cid), cid

    def pair(self, tool: str, args: Any, result: Any = None, error: str | None = None) -> list[Any]:
        call, cid = self.call(tool, args)
        return [call, ToolResult(session="h", tool=tool, call_id=cid, result=result, error=error)]


# ----------------------------------------------------------------------- editors


@pytest.mark.parametrize("editor", ["MultiEdit", "replace_in_file", "replace", "NotebookEdit",
                                    "str_replace", "insert_lines", "apply_diff",
                                    "mcp__filesystem__edit_file", "mcp__filesystem__write_file"])
def test_edit_rerun_fail_with_named_editors_is_debugging(editor: str) -> None:
    c = Calls()
    trace: list[Any] = []
    for attempt in range(7):
        trace += c.pair(editor, {"file_path": "src/app.py", "edits": [f"fix {attempt}"]}, "ok")
        trace += c.pair("Bash", {"command": "pytest tests/test_app.py -x"},
                        error="1 failed: assert parse('a') == 'A'")
    assert "failure-loop" not in criticals(trace)


def test_rerun_fail_with_no_edit_between_is_still_a_loop() -> None:
    c = Calls()
    trace: list[Any] = []
    for i in range(6):
        trace += c.pair("Read", {"file_path": f"src/mod_{i}.py"}, f"def parse_{i}(s): ...")
        trace += c.pair("Bash", {"command": "pytest tests/test_app.py -x"},
                        error="1 failed: assert parse('a') == 'A'")
    assert "failure-loop" in criticals(trace)


# ------------------------------------------------------------- bare exit statuses


@pytest.mark.parametrize("error", ["exit code 1", "Command failed with exit status 2",
                                   "returncode=127", "Error: exit status 1", "failed"])
def test_an_error_with_only_a_status_says_only_status(error: str) -> None:
    assert says_only_status(error)


@pytest.mark.parametrize("error", ["timed out", "1 failed: assert 3 == 4",
                                   "/bin/bash: line 3: foo: command not found",
                                   "ModuleNotFoundError: No module named 'x'", "exit code 1 " * 10])
def test_an_error_that_says_what_failed_is_its_own_identity(error: str) -> None:
    assert not says_only_status(error)


def test_a_bare_status_failure_is_told_apart_by_its_output() -> None:
    def result(output: str, error: str = "exit code 1") -> ToolResult:
        return ToolResult(session="h", tool="bash", error=error, result=output)

    red_a, red_b = result("FAILED test_a - assert 1 == 2"), result("FAILED test_a - assert 2 == 3")
    assert failure_outcome(red_a) != failure_outcome(red_b)
    assert failure_outcome(red_a) == failure_outcome(result("FAILED test_a - assert 1 == 2"))
    # An error that says what went wrong is the identity alone (outputs carry timings).
    timeout_a = result("Retrying after 0.41 s", error="ConnectTimeout: pypi.org")
    timeout_b = result("Retrying after 0.73 s", error="ConnectTimeout: pypi.org")
    assert failure_outcome(timeout_a) == failure_outcome(timeout_b)


def _exit_code_debugging(outputs: list[str]) -> list[Any]:
    c = Calls()
    trace: list[Any] = []
    for i, output in enumerate(outputs):
        trace += c.pair("bash", {"command": f"sed -i 's/x{i}/x{i + 1}/' src/app.py"}, "")
        trace += c.pair("bash", {"command": "pytest -x -q"}, output, error="exit code 1")
    return trace


def test_edits_changing_an_exit_code_failure_are_debugging() -> None:
    outputs = [f"FAILED tests/test_app.py::test_parse - AssertionError: assert {i} == 9" for i in range(9)]
    found = criticals(_exit_code_debugging(outputs))
    assert "result-stall" not in found and "failure-loop" not in found


def test_edits_that_never_change_an_exit_code_failure_are_futile() -> None:
    outputs = ["FAILED tests/test_app.py::test_parse - ImportError: cannot import name 'parse'"] * 9
    found = criticals(_exit_code_debugging(outputs))
    assert {"result-stall", "failure-loop"} & set(found)


# ------------------------------------------------------------ write acknowledgements


def test_a_write_tools_bare_acknowledgement_is_never_stale() -> None:
    c = Calls()
    trace: list[Any] = []
    for i in range(14):
        trace += c.pair("write_to_file", {"path": f"src/pkg/module_{i}.py", "content": f"X = {i}\n"},
                        "File written successfully.")
    for i in range(10):
        trace += c.pair("update_ticket", {"ticket": 4100 + i, "label": "billing"}, {"ok": True})
    assert criticals(trace) == []


def test_a_command_that_writes_and_prints_the_same_again_is_still_stale() -> None:
    # The re-sent "rm, create, edit" command of a stuck agent prints the same file each time.
    c = Calls()
    trace: list[Any] = []
    for i in range(12):
        script = f"rm repro.py\ncreate repro.py\nedit 1:1\n# attempt {i}\nend_of_edit"
        trace += c.pair("bash", {"command": script},
                        f"[File: /repo/repro.py (1 lines total)]\n1:\n/bin/bash: line {900 + i}: "
                        "end_of_edit: command not found")
    assert "result-stall" in criticals(trace)


# -------------------------------------------------------------------- JSON as text


def test_json_text_is_recognised_and_prose_is_not() -> None:
    assert is_json_text('{"page": 3, "items": []}') and is_json_text("[1, 2]\n")
    assert not is_json_text("[File: /repo/a.py (10 lines total)]")
    assert not is_json_text("{not json}") and not is_json_text("plain text")


def test_pages_of_a_json_text_api_are_news() -> None:
    c = Calls()
    trace: list[Any] = []
    for page in range(1, 13):
        body = {"page": page, "total": 12, "items": [{"id": 1000 + page * 10 + k} for k in range(3)]}
        trace += c.pair("list_invoices", {"page": page}, json.dumps(body))
    assert "result-stall" not in criticals(trace)


def test_the_same_json_text_again_and_again_is_stale() -> None:
    c = Calls()
    trace: list[Any] = []
    body = json.dumps({"status": "not_found", "flight": None})
    for day in range(1, 12):
        trace += c.pair("search_flights", {"origin": "SFO", "dest": "JFK", "date": f"2026-05-{day:02d}"},
                        body)
    assert "result-stall" in criticals(trace)


# ----------------------------------------------------------------------------- waits


@pytest.mark.parametrize("command,wait", [
    ("sleep 60", True),
    ("sleep 60 && gh run view 42", False),  # a read after a wait of its own (waits_first)
    ("until curl -sf localhost:8000; do sleep 2; done", True),
    ("gh run view 42", False),
    ("sleepy_script.sh", False),
])
def test_a_command_with_a_sleep_waits(command: str, wait: bool) -> None:
    assert shell_facts(command).wait is wait


def test_an_empty_runner_command_waits_and_an_absent_one_does_not() -> None:
    assert runner_facts({"command": "", "is_input": "false"}).wait
    assert not runner_facts({"timeout": 30}).wait


def _ci_watch(polls: int) -> list[Any]:
    c = Calls()
    return [e for _ in range(polls)
            for e in c.pair("bash", {"command": "sleep 60 && gh run view 42 --json status"},
                            '{"status": "in_progress"}')]


def test_waiting_on_a_ci_run_is_a_poll_not_a_loop() -> None:
    got = alerts(_ci_watch(12))
    assert [a for a in got if a.severity == "critical"] == []


def test_a_wait_that_goes_on_for_long_draws_one_polling_warning() -> None:
    warns = [a for a in alerts(_ci_watch(24)) if a.signal == "repeated-tool-call"]
    assert [(a.severity, a.detail["rule"]) for a in warns] == [("warn", "polling")]


def test_under_the_reference_rule_a_wait_counts_like_any_call() -> None:
    policy = "[signals.repeated-tool-call]\nresult_aware = false\n"
    assert "repeated-tool-call" in criticals(_ci_watch(5), policy)


def test_openhands_empty_command_waits() -> None:
    c = Calls()
    note = "[The command has no new output after 30 seconds. You may wait longer by sending empty command '']"
    trace = [e for _ in range(10) for e in c.pair("execute_bash", {"command": "", "is_input": "false"}, note)]
    assert criticals(trace) == []


def test_a_server_start_waited_out_with_sleep_is_no_failure_loop() -> None:
    c = Calls()
    trace: list[Any] = c.pair("bash", {"command": "nohup uvicorn app:api --port 8000 &"}, "")
    for _ in range(7):
        trace += c.pair("bash", {"command": "sleep 3 && curl -sf localhost:8000/health"},
                        error="curl: (7) Failed to connect to localhost port 8000")
    assert criticals(trace) == []


def test_a_failing_wait_draws_no_failure_warning_either() -> None:
    # Five failed waits before the server is up: a poll not yet answered. The failure
    # signals' reference rule (waits_are_polls = false) counts them like any call.
    c = Calls()
    trace: list[Any] = c.pair("bash", {"command": "nohup uvicorn app:api --port 8000 &"}, "")
    for _ in range(5):
        trace += c.pair("bash", {"command": "sleep 3 && curl -sf localhost:8000/version"},
                        error="exit code 7")
    trace += c.pair("bash", {"command": "sleep 3 && curl -sf localhost:8000/version"}, '{"v": 1}')
    assert alerts(trace) == []
    reference = ("[signals.tool-failure-guidance]\nwaits_are_polls = false\n"
                 "[signals.tool-failure-streak]\nwaits_are_polls = false\n")
    assert {a.signal for a in alerts(trace, reference)} == {"tool-failure-guidance"}
    only_streak = ("disabled_signals = [\"tool-failure-guidance\"]\n"
                   "[signals.tool-failure-streak]\nwaits_are_polls = false\n")
    assert {a.signal for a in alerts(trace, only_streak)} == {"tool-failure-streak"}


def test_a_wait_that_never_succeeds_draws_the_polling_warning() -> None:
    # Hidden from the failure signals, a wait failing for good still gets one warning.
    c = Calls()
    trace: list[Any] = []
    for _ in range(24):
        trace += c.pair("bash", {"command": "sleep 3 && curl -sf localhost:8000/health"},
                        error="curl: (7) Failed to connect to localhost port 8000")
    got = [(a.signal, a.severity, a.detail.get("rule")) for a in alerts(trace)]
    assert got == [("repeated-tool-call", "warn", "polling")]


def test_a_wait_between_failures_neither_counts_nor_breaks_the_streak() -> None:
    c = Calls()
    trace: list[Any] = []
    for n in range(4):
        trace += c.pair("bash", {"command": f"python probe_{n}.py"}, error="exit code 1")
        trace += c.pair("bash", {"command": "sleep 5"}, None if n % 2 else "",
                        error=None if n % 2 else "exit code 130")
    assert [a.signal for a in alerts(trace, 'disabled_signals = ["tool-failure-guidance"]')] == [
        "tool-failure-streak"]


def test_a_read_after_a_wait_of_its_own_fails_as_a_wait_and_succeeds_as_a_read() -> None:
    """`sleep 5 && curl` failing while a server starts counts for no failure rule; its
    success is a read's, which ends a failure streak like any success."""
    policy = 'disabled_signals = ["tool-failure-guidance"]'
    c = Calls()
    failing: list[Any] = []
    for n in range(4):
        failing += c.pair("bash", {"command": f"python probe_{n}.py"}, error="exit code 1")
        failing += c.pair("bash", {"command": "sleep 5 && curl -sf localhost:8000/version"},
                          error="exit code 7")
    assert [a.signal for a in alerts(failing, policy)] == ["tool-failure-streak"]
    answering: list[Any] = []
    for n in range(4):
        answering += c.pair("bash", {"command": f"python probe_{n}.py"}, error="exit code 1")
        answering += c.pair("bash", {"command": "sleep 5 && curl -sf localhost:8000/version"},
                            '{"v": 1}')
    assert [a.signal for a in alerts(answering, policy)] == []


def test_the_same_failing_call_without_a_sleep_is_still_a_failure_loop() -> None:
    c = Calls()
    trace: list[Any] = []
    for _ in range(6):
        trace += c.pair("bash", {"command": "curl -sf localhost:8000/health"},
                        error="curl: (7) Failed to connect to localhost port 8000")
    assert "failure-loop" in criticals(trace)


# ------------------------------------------------------------ numbers and bare answers


def test_successes_that_differ_in_their_numbers_are_news() -> None:
    # A learning-rate sweep: one line of metrics per run, only the numbers differ.
    c = Calls()
    trace: list[Any] = []
    for i in range(12):
        lr = 10 ** -(i % 6 + 1)
        trace += c.pair("bash", {"command": f"python train.py --lr {lr} --seed {i}"},
                        f"epoch 3/3 loss={0.9 - i / 40:.4f} acc={0.61 + i / 100:.3f} time=41.{i}s")
    assert "result-stall" not in criticals(trace)


def test_failures_and_search_answers_still_have_their_numbers_masked() -> None:
    c = Calls()
    trace: list[Any] = []
    for i in range(10):
        trace += c.pair("bash", {"command": f"DISCUSSION step {i}"},
                        error=f"/bin/bash: line {27_000 + i * 37}: DISCUSSION: command not found")
    assert "result-stall" in criticals(trace)
    c = Calls()
    trace = []
    for i in range(10):
        trace += c.pair("search_dir", {"term": f"parseConfig{i}"},
                        f'No matches found for "parseConfig{i}" in /repo ({300 + i} files searched)')
    assert "result-stall" in criticals(trace)


@pytest.mark.parametrize("answer", ["200", "true", "OK", "0", "3.14", "done"])
def test_a_bare_answer_to_different_calls_is_neither_stale_nor_news(answer: str) -> None:
    c = Calls()
    trace: list[Any] = []
    for endpoint in ["health", "ready", "users", "orders", "items", "carts", "search", "login",
                     "logout", "metrics", "admin"]:
        trace += c.pair("bash", {"command": f"curl -s -o /dev/null -w '%{{http_code}}' localhost/{endpoint}"},
                        answer)
    assert "result-stall" not in criticals(trace)


def test_write_acknowledgements_are_no_data_already_seen() -> None:
    c = Calls()
    writes: list[Any] = []
    for i in range(9):
        writes += c.pair("update_record", {"id": 300 + i, "status": "done"}, "ok")
    assert [a for a in alerts(writes) if a.signal == "no-new-state"] == []
    reads: list[Any] = []
    for i in range(9):
        reads += c.pair("get_record", {"id": 300 + i}, '{"id": 300, "status": "open"}')
    assert "no-new-state" in [a.signal for a in alerts(reads, 'disabled_signals = ["result-stall"]')]


# ------------------------------------------------------------------ paging a file


def _paging(pages: list[str]) -> list[Any]:
    c = Calls()
    trace: list[Any] = []
    for i, page in enumerate(pages):
        if i % 4 == 3:
            trace += c.pair("search_file", {"term": f"parse{i}"}, f"Found {i} matches for parse{i}")
        trace += c.pair("scroll_down", {}, page)
    return trace


def test_scrolling_through_a_file_with_searches_between_is_paging() -> None:
    pages = [f"[File: /repo/big.py (2000 lines total)]\n{100 * i}: def f{i}(): ..." for i in range(12)]
    assert "dominant-tool-call" not in criticals(_paging(pages))


def test_scrolling_that_shows_the_same_page_again_and_again_is_still_a_loop() -> None:
    pages = ["[File: /repo/big.py (2000 lines total)]\n(this is the end of the file)"] * 12
    assert {"dominant-tool-call", "repeated-tool-call", "result-stall"} & set(criticals(_paging(pages)))


def test_under_the_reference_rule_dominance_ignores_the_answers() -> None:
    pages = [f"[File: /repo/big.py (2000 lines total)]\n{100 * i}: def f{i}(): ..." for i in range(12)]
    policy = "[signals.dominant-tool-call]\nresult_aware = false\n"
    assert "dominant-tool-call" in criticals(_paging(pages), policy)


# ------------------------------------------------------------- review regressions


def test_a_wait_between_reads_is_no_cycle_and_no_dominance() -> None:
    c = Calls()
    trace: list[Any] = []
    for i in range(10):
        trace += c.pair("bash", {"command": "sleep 30 && gh run view 42"}, f"in_progress {i} min")
        trace += c.pair("read_file", {"path": "ci.log"}, f"step {i} of 40")
    assert "alternating-tool-cycle" not in criticals(trace)
    assert "dominant-tool-call" not in criticals(trace, "[signals.dominant-tool-call]\nthreshold = 5\n")


def test_a_write_late_in_a_long_script_is_still_a_write() -> None:
    script = "\n".join([f"echo step {i}" for i in range(40)] + ["rm -rf build; git commit -m release"])
    assert shell_facts(script).write
    assert not shell_facts("\n".join(["ls -la"] * 40 + ["git status"])).write


def test_open_for_writing_with_a_comma_in_the_path_is_a_write() -> None:
    from streamguard.signals.facts import code_facts

    assert code_facts('open(f"{a},{b}.csv", "w").write(row)').write


def test_a_write_tool_answering_with_the_same_large_document_can_stall() -> None:
    c = Calls()
    document = json.dumps({"errors": [{"line": i, "message": "schema mismatch"} for i in range(60)]})
    trace: list[Any] = []
    for i in range(14):
        trace += c.pair("update_schema", {"field": f"f{i}", "type": "int"}, document)
    assert "result-stall" in criticals(trace)


def test_another_sessions_answers_never_change_how_this_one_is_read() -> None:
    # The same payload answers a plain call in one session and a search in another: the
    # search's answer is read with its digits masked whatever the other session did.
    def searches(session: str) -> list[Any]:
        trace: list[Any] = []
        for i in range(10):
            trace += [ToolCall(session=session, tool="search_dir", args={"term": f"cfg{i}"}, call_id=f"s{i}"),
                      ToolResult(session=session, tool="search_dir", call_id=f"s{i}",
                                 result=f"No matches found ({300 + i} files searched)")]
        return trace

    def signals_of(engine: Engine, trace: list[Any]) -> list[str]:
        return [o.signal for e in trace for o in engine.process(e) if isinstance(o, Alert)]

    alone = Engine(parse_policy_set(DEFAULT))
    expected = signals_of(alone, searches("y"))
    assert "result-stall" in expected
    shared = Engine(parse_policy_set(DEFAULT))
    signals_of(shared, [ToolCall(session="x", tool="read_log", args={}, call_id="r"),
                        ToolResult(session="x", tool="read_log", call_id="r",
                                   result="No matches found (300 files searched)")])
    assert signals_of(shared, searches("y")) == expected


# ----------------------------------------------------------------------- bisection


def test_a_bisection_is_no_cycle_and_its_failing_test_no_retry() -> None:
    # go test, git bisect good/bad, go test, ...: each bisect step checks out another
    # commit (a write), so the same test failing again is a new test; and each step's
    # answer names a new commit, so the lap is no cycle.
    c = Calls()
    test = {"command": "go test ./internal/api/ -run TestTransfer -count=1"}
    trace: list[Any] = c.pair("bash", {"command": "git bisect start HEAD v2.3.0"},
                              "Bisecting: 48 revisions left to test after this (roughly 6 steps)")
    commits = ["ab93c1e store: pool", "1e2f7d0 api: retries", "661a5be store: pgx v5",
               "062c509 api: request logging", "e2a220d deps: bump chi", "ad04f11 api: idem"]
    verdicts = ["bad", "bad", "good", "good", "good", "bad"]
    left = 24
    for commit, verdict in zip(commits, verdicts, strict=True):
        if verdict == "bad":
            trace += c.pair("bash", test, "--- FAIL: TestTransfer (0.02s)", error="exit code 1")
        else:
            trace += c.pair("bash", test, "ok  github.com/acme/ledger/internal/api 0.43s")
        trace += c.pair("bash", {"command": f"git bisect {verdict}"},
                        f"Bisecting: {left} revisions left to test after this\n[{commit}]")
        left //= 2
    assert alerts(trace) == []
    reference = ("[signals.alternating-tool-cycle]\nresult_aware = false\n")
    assert "alternating-tool-cycle" in criticals(trace, reference)


# ------------------------------------------------- items of a list, by their identifiers


@pytest.mark.parametrize(("tool", "args_of"), [
    # a machine per work center, a trade per id beside the file it is matched in, a price
    # per ISIN (JSON text arguments)
    ("Mes-GetMachineStatus", lambda i: {"workCenter": f"CNC-{i:02d}"}),
    ("recon_match_trade", lambda i: {"trade_id": f"T26050{i:02d}", "source": "bnym_2025-05-06.fin"}),
    ("ValidatePrice", lambda i: json.dumps({"isin": f"XS11419434{i:02d}", "date": "2025-12-01"})),
])
def test_items_of_a_list_answering_alike_are_a_sweep(tool: str, args_of: Any) -> None:
    c = Calls()
    trace: list[Any] = []
    for i in range(24):
        trace += c.pair(tool, args_of(i), {"status": "OK", "alarms": []})
    assert "result-stall" not in criticals(trace)


@pytest.mark.parametrize("args_of", [
    # what is asked, re-worded (a read, not a search: searches never name a place)
    lambda i: {"query": f"pink mouse left {i}h", "from": f"2025-01-{i + 1:02d}"},
    # a window of time moved along, by any name
    lambda i: {"metric": "cpu_usge", "start": f"2025-01-{i + 1:02d}"},
    lambda i: {"metric": "cpu_usge", "window": f"{i + 1}m"},
    lambda i: {"metric": "cpu_usge", "startTime": f"2025-01-{i + 1:02d}T00:00"},
])
def test_reworded_words_or_windows_answering_alike_are_still_a_stall(args_of: Any) -> None:
    """What is asked, or when, is no identifier of a place: one read re-worded, or moved
    along in time, answering the same is the hunt going on."""
    c = Calls()
    trace: list[Any] = []
    for i in range(12):
        trace += c.pair("fetch_customer_record", args_of(i), {"status": "OK", "alarms": []})
    assert "result-stall" in criticals(trace)


def test_a_code_executors_shell_block_is_read_as_a_command_line() -> None:
    """AutoGen's code executor: `{"language": "sh", "code": "sleep 90; squeue ..."}` waits,
    then reads; a Python block is free code."""
    facts = runner_facts({"language": "sh", "code": "sleep 90; squeue -j 4418027 -h"})
    assert facts.waits_first and facts.action == "squeue"
    assert runner_facts({"language": "python", "code": "print(1)"}).action == ""
    c = Calls()
    trace: list[Any] = []
    for _ in range(6):
        trace += c.pair("code_executor", {"language": "sh", "code": "sleep 90; squeue -j 4418027 -h"},
                        "exitcode: 0 (execution succeeded)\nCode output: PENDING 0:00 (Resources)")
    assert criticals(trace) == []


def test_a_scan_re_run_unchanged_but_for_its_duration_is_a_loop() -> None:
    c = Calls()
    trace: list[Any] = []
    for n in range(8):
        trace += c.pair("terminal", {"cmd": "sudo nmap -sV -p- 10.20.4.0/24 -oN scans/full.txt"},
                        "Nmap scan report for 10.20.4.10\n22/tcp open ssh\n"
                        f"Nmap done: 256 IP addresses (3 hosts up) scanned in {183 + n * 3}.11 seconds")
    assert "repeated-tool-call" in criticals(trace)


def test_a_step_back_to_the_listing_between_items_is_neither_stale_nor_news() -> None:
    """WebShop: the same search again, an item opened, its empty reviews, back to the
    search, for item after item: each item is new, the steps back show the page seen
    before. Opening the same item again and again is still the same answer."""
    c = Calls()
    listing = "[Back to Search]\nPage 1 (Total results: 50)\n[B01]\nPillow A\n$70.07\n[B02]\nPillow B\n$73.35"
    home = "WebShop\nInstruction:\ni want a queen size pillow under 75 dollars\n[Search]"
    items: list[Any] = []
    for n, item in enumerate(("B01", "B02", "B03", "B04", "B05")):
        items += c.pair("search", {"query": "queen size bed pillow"}, listing)
        items += c.pair("click", {"element": item}, f"[Back to Search]\n[< Prev]\nPillow {item}\nPrice: ${40 + n * 7}.07")
        items += c.pair("click", {"element": "Reviews"}, "[Back to Search]\n[< Prev]\nN.A.")
        items += c.pair("back_to_search", {}, home)
    assert "result-stall" not in criticals(items)
    # the same item opened again and again, its page alternating between two versions (a
    # rotating recommendation): still the same answers, for result-stall itself
    no_cycle = 'mode = "warn"\n[signals.alternating-tool-cycle]\nenabled = false\n'
    same: list[Any] = []
    for n in range(12):
        same += c.pair("click", {"element": "B01"},
                       f"[Back to Search]\nPillow B01\nPrice: $40.07\nRecommended: {'Lamp A' if n % 2 else 'Chair B'}")
        same += c.pair("go_back", {}, listing)
    assert "result-stall" in criticals(same, no_cycle)
    # a step back answered by an error page is read as any answer
    errors: list[Any] = []
    for n in range(10):
        errors += c.pair("search", {"query": f"pillow {['queen', 'king', 'twin'][n % 3]}"},
                         "Error: session expired. Please reload the page.")
        errors += c.pair("back_to_search", {}, "Error: session expired. Please reload the page.")
    assert "result-stall" in criticals(errors, no_cycle)
    # a name with "back" in it that is no step back is read as any tool
    for tool in ("get_back_office_data", "roll_back_migration", "cash_back_balance"):
        stalled: list[Any] = []
        for n in range(12):
            stalled += c.pair(tool, {"query": f"acme {n % 3}", "attempt": n}, '{"rows": [], "status": "locked"}')
        assert "result-stall" in criticals(stalled, no_cycle), tool


def test_a_fetch_written_into_a_new_file_each_time_is_that_files_answer() -> None:
    """Twelve batches of genomes fetched into twelve files, each command printing the same
    status and count: twelve answers, one per file. The same file fetched again and
    again, printing the same, is the same answer."""
    c = Calls()
    sweep: list[Any] = []
    for n in range(12):
        sweep += c.pair("bash", {"command": f"cd /work/cov && curl -s -w '\\nHTTP %{{http_code}}\\n' "
                                            f"\"https://eutils.example.gov/efetch?id=$(paste -sd, batch_{n:02})\" "
                                            f"> genomes/batch_{n:02}.fa; tail -1 genomes/batch_{n:02}.fa"},
                        "<returncode>0</returncode>\n<output>\nHTTP 200\n50\n</output>")
    assert "result-stall" not in criticals(sweep)
    again: list[Any] = []
    for n in range(12):
        again += c.pair("bash", {"command": f"cd /work/cov && curl -s 'https://eutils.example.gov/efetch?id=X&try={n}' "
                                            "> genomes/batch_07.fa; tail -1 genomes/batch_07.fa"},
                        "<returncode>0</returncode>\n<output>\nHTTP 200\n50\n</output>")
    assert "result-stall" in criticals(again)
    # a retry into a new file each time, refused the same way, is the same refusal
    refused: list[Any] = []
    for n in range(12):
        refused += c.pair("bash", {"command": f"python scripts/fetch.py --attempt {n} > out/res_{n:02}.txt; "
                                              f"tail -1 out/res_{n:02}.txt"},
                          "<returncode>0</returncode>\n<output>\nHTTP 503\n0\n</output>")
    assert "result-stall" in criticals(refused)
    # a `>` inside quotes is no redirect
    assert written_names_of("awk '$3 > 100' data.tsv") == ""
    assert written_names_of("curl -s x > 'quoted name.txt'; make > build.log 2>&1") == "build.log"


def written_names_of(command: str) -> str:
    from streamguard.canonical import canonicalize
    from streamguard.events import ToolCall as Call
    from streamguard.signals.base import CallView
    from streamguard.signals.result_stall import written_names
    args = {"command": command}
    return written_names(CallView(Call(session="s", tool="bash", args=args), canonicalize(args), 1, [], None))


def _trace_hops(n: int, last_hop: int) -> str:
    """A traceroute whose probes' times jitter with ``n``, stopping after ``last_hop``."""
    lines = ["traceroute to 198.18.20.10 (198.18.20.10), 30 hops max, 60 byte packets"]
    for hop in range(1, 8):
        if hop <= last_hop:
            times = "  ".join(f"{hop + (n * 7 + k) % 5 / 10:.3f} ms" for k in range(3))
            lines.append(f" {hop}  r{hop}.net.example.com (10.110.{hop}.1)  {times}")
        else:
            lines.append(f" {hop}  * * *")
    return "\n".join(lines)


def test_a_probe_re_run_unchanged_but_for_its_round_trip_times_is_a_loop() -> None:
    """A dead host pinged again and again, a traceroute stopping at the same hop each time:
    the times the packets took jitter, what the probe found does not."""
    c = Calls()
    pings: list[Any] = []
    for n in range(8):
        pings += c.pair("ping", {"host": "10.62.0.1", "count": 4},
                        "PING 10.62.0.1 (10.62.0.1) 56(84) bytes of data.\n\n--- 10.62.0.1 ping statistics ---\n"
                        f"4 packets transmitted, 0 received, 100% packet loss, time {3050 + n * 7}ms\n")
    assert "repeated-tool-call" in criticals(pings)
    traces: list[Any] = []
    for n in range(8):
        traces += c.pair("traceroute", {"source": "bgo-probe01", "destination": "198.18.20.10"},
                         _trace_hops(n, 5))
    assert "repeated-tool-call" in criticals(traces)
    # the forms other systems print: `traceroute -n` (bare addresses, a probe lost first),
    # BusyBox's ping
    bare: list[Any] = []
    for n in range(8):
        hops = "\n".join(f" {h}  10.0.{h}.1  {'*  ' if h == 2 else ''}{h + (n * 3 + h) % 7 / 10:.3f} ms  {h + 0.1:.3f} ms"
                         for h in range(1, 5))
        bare += c.pair("traceroute", {"destination": "10.9.9.9", "numeric": True},
                       f"traceroute to 10.9.9.9 (10.9.9.9), 30 hops max, 60 byte packets\n{hops}\n 5  * * *")
    assert "repeated-tool-call" in criticals(bare)
    busybox: list[Any] = []
    for n in range(8):
        busybox += c.pair("ping", {"host": "10.62.0.9", "count": 1},
                          f"PING 10.62.0.9 (10.62.0.9): 56 data bytes\n64 bytes from 10.62.0.9: seq=0 ttl=64 "
                          f"time={0.1 + n / 100:.3f} ms\n\n1 packets transmitted, 1 packets received, 0% packet loss")
    assert "repeated-tool-call" in criticals(busybox)
    # the route growing hop by hop as a link comes back is news each time
    growing: list[Any] = []
    for n in range(7):
        growing += c.pair("traceroute", {"source": "bgo-probe01", "destination": "198.18.20.10"},
                          _trace_hops(n, n + 1))
    assert criticals(growing) == []
    # a host coming back: the loss falls
    back: list[Any] = []
    for n, received in enumerate((0, 0, 1, 3, 4, 4)):
        back += c.pair("ping", {"host": "10.62.0.9", "count": 4},
                       f"4 packets transmitted, {received} received, {100 - received * 25}% packet loss, "
                       f"time {3050 + n}ms")
    assert "repeated-tool-call" not in criticals(back)
    # a millisecond figure anywhere else is what a check measured: a latency falling while
    # a fix rolls out, asked back to back, is news each time
    for answer in ("status=200 time={ms}ms", "select  {ms}.000 ms  {double}.000 ms"):
        timed: list[Any] = []
        for n, ms in enumerate((950, 610, 300, 120, 40, 12)):
            timed += c.pair("bash", {"command": f"curl -s -w 'time=%{{time_total}}' https://api.example.net/{n % 1}"},
                            answer.format(ms=ms, double=ms * 2))
        assert "repeated-tool-call" not in criticals(timed)


@pytest.mark.parametrize("language", [["sh"], {"x": 1}, 7, None, "SH"])
def test_a_code_blocks_language_of_any_type_is_read_without_raising(language: Any) -> None:
    facts = runner_facts({"language": language, "code": "ls -la"})
    assert facts.action == ("ls" if language == "SH" else "")
    c = Calls()
    assert criticals(c.pair("bash", {"language": language, "code": "ls"}, "a b")) == []


def test_an_act_acknowledged_alike_after_each_write_is_no_futile_check() -> None:
    """Stagehand: type a case number (a write), "click the Search button" (a tool nobody
    classified, answered "Action completed successfully" each time), extract: the click
    is an act, not a check that the typing failed to move."""
    c = Calls()
    trace: list[Any] = []
    for case in range(12):
        call, cid = c.call("stagehand_act", {"action": f"type '24-CV-0{case}187' into the Case Number field"})
        trace += [ToolCall(session="h", tool="stagehand_act", args=call.args, call_id=cid, kind="write"),
                  ToolResult(session="h", tool="stagehand_act", call_id=cid,
                             result={"success": True, "message": "Action completed successfully"})]
        trace += c.pair("stagehand_act", {"action": "click the Search button"},
                        {"success": True, "message": "Action completed successfully"})
        trace += c.pair("stagehand_extract", {"instruction": "extract the case title"},
                        {"title": f"Case {case}", "status": "Active"})
    assert "result-stall" not in criticals(trace)


def test_a_document_re_read_unchanged_after_each_message_is_still_futile() -> None:
    """A planner re-reading one ticket after each message sent to the coder: the ticket
    answers as before, the messages change nothing."""
    c = Calls()
    trace: list[Any] = []
    for n in range(8):
        trace += c.pair("jira_get_issue", {"key": "ENG-902"},
                        {"key": "ENG-902", "summary": "Add /v2/exports", "description": "See guidelines."})
        trace += c.pair("send_message", {"to": "coder", "content": f"Please implement it ({n})."},
                        {"delivered": True})
    assert "result-stall" in criticals(trace)


def test_a_filter_selecting_one_item_after_another_is_a_sweep() -> None:
    """ServiceNow's encoded query selecting each server in turn: the identifier it selects
    by is the place (`child.name=lnx-epic-app07`), the relation's words are not."""
    c = Calls()
    trace: list[Any] = []
    for i in range(18):
        trace += c.pair("table_get", {"table": "cmdb_rel_ci",
                                      "query": f"child.name=lnx-epic-app{i:02d}^type.name=Runs on::Runs"},
                        {"result": [{"parent.name": "Epic Cache/IRIS App"}]})
    assert "result-stall" not in criticals(trace)


def test_a_filter_re_worded_answering_alike_is_still_a_stall() -> None:
    c = Calls()
    trace: list[Any] = []
    for words in ("disk full", "disk is full", "no space left", "disk space", "full disk",
                  "storage full", "out of disk", "volume full", "disk quota", "space exhausted",
                  "filesystem full", "disk usage high"):
        trace += c.pair("table_get", {"table": "incident", "query": f"short_descriptionLIKE{words}^active=true"},
                        {"result": [{"number": "INC0000042", "state": "New"}]})
    assert "result-stall" in criticals(trace)



def test_a_check_reporting_its_failure_in_few_words_is_still_futile() -> None:
    """An unclassified check whose short answer is a verdict (`{"success": false}`) is no
    bare acknowledgement: edits that never move it are futile."""
    c = Calls()
    trace: list[Any] = []
    for i in range(12):
        trace += c.pair("edit_file", {"path": "a.rs", "new": str(i)}, "File edited successfully.")
        trace += c.pair("cargo_check", {}, {"success": False, "errors": ["E0308 mismatched types"]})
    assert "result-stall" in criticals(trace)


@pytest.mark.parametrize("moment", [lambda i: f"2025-01-05T10:{i:02d}:00Z", lambda i: f"{i}m",
                                    lambda i: str(100 + i)])
def test_a_moment_a_quantity_or_a_bare_number_names_no_place(moment: Any) -> None:
    """A time stamp, `15m` or `100` under any argument name is no identifier: the same
    answer for each is still stale."""
    c = Calls()
    trace: list[Any] = []
    for i in range(12):
        trace += c.pair("get_queue_depth", {"queue": "orders", "at": moment(i)}, "orders: 1523 messages")
    assert "result-stall" in criticals(trace)


# ------------------------------------------------ listings, executors, pages, figures

LONDON = "Restaurant in London: Azabu Ramen\nHouse of Sushi\nHome Kitchen\nThe Spice Route\n"
CUISINES = "{'Azabu Ramen': 'Japanese', 'House of Sushi': 'Japanese', 'Home Kitchen': 'Chinese'}"


def test_empty_listings_under_a_heading_do_not_hide_a_stall() -> None:
    """AgentDojo's city listings name the city in their heading, so an empty one
    ("Restaurant in Soho: ") was a new answer every time and counted as news: an agent
    re-reading London's restaurants between reworded districts for a cuisine no
    restaurant serves was never halted. An empty listing is now neither news nor stale."""
    c = Calls()
    trace: list[Any] = []
    trace += c.pair("get_all_restaurants_in_city", {"city": "London"}, LONDON)
    trace += c.pair("get_cuisine_type_for_restaurants", {"restaurant_names": ["Azabu Ramen"]}, CUISINES)
    districts = ["London, UK", "Greater London", "Soho", "Shoreditch", "Camden", "Brixton",
                 "Westminster", "Hackney", "Islington", "Peckham", "Kentish Town", "Bow"]
    for pair in range(0, len(districts), 2):
        for district in districts[pair : pair + 2]:
            trace += c.pair("get_all_restaurants_in_city", {"city": district},
                            f"Restaurant in {district}: \n")
        trace += c.pair("get_all_restaurants_in_city", {"city": "London"}, LONDON)
        trace += c.pair("get_cuisine_type_for_restaurants", {"restaurant_names": ["Azabu Ramen"]}, CUISINES)
    assert "result-stall" in criticals(trace)


def test_a_sweep_of_places_mostly_empty_is_no_stall() -> None:
    c = Calls()
    trace: list[Any] = []
    for i, city in enumerate(["Paris", "Lyon", "Nice", "Lille", "Nantes", "Metz", "Brest", "Tours",
                              "Dijon", "Reims", "Caen", "Pau", "Rouen", "Amiens", "Nancy", "Arles"]):
        listing = f"Hotels in {city}: " + (f"Hotel {city} Centre\n" if i % 5 == 0 else "\n")
        trace += c.pair("get_all_hotels_in_city", {"city": city}, listing)
    assert criticals(trace) == []


def test_the_same_empty_listing_asked_again_is_stale() -> None:
    """A city spelt a dozen ways, each spelling asked again lap after lap, every listing
    empty: the first asking of each is neither news nor stale (a sweep), asking the very
    same call again for the same empty listing is the hunt going round."""
    c = Calls()
    trace: list[Any] = []
    spellings = ["Nice", "Nice, France", "nice", "NICE", "Nice France", "Nizza", "Nice (France)"]
    for lap in range(4):  # each lap in another order: no lap replays the last
        for city in spellings[lap * 3 % 7 :] + spellings[: lap * 3 % 7]:
            trace += c.pair("get_all_restaurants_in_city", {"city": city}, f"Restaurant in {city}: \n")
        trace += c.pair("get_all_hotels_in_city", {"city": "Nice"}, "Hotel Names: \n")
    assert criticals(trace)


def traceback(code_file: str) -> dict[str, Any]:
    return {"exit_code": 1, "code_file": f"/workspace/{code_file}.py",
            "output": f'Traceback (most recent call last):\n  File "/workspace/{code_file}.py", line 3, '
                      "in <module>\n    with open('/workspace/data.jsonld') as f:\nFileNotFoundError: "
                      "[Errno 2] No such file or directory: '/workspace/data.jsonld'\n"}


def test_an_autogen_executor_failing_the_same_script_again_is_a_failure_loop() -> None:
    """AutoGen's code executors answer with a run record (``exit_code``, ``output``,
    ``code_file``): read as output and exit code, an identical script re-sent and failing
    the same way is halted; before, nothing in the answer said it failed and every
    answer named a new temporary file."""
    c = Calls()
    trace: list[Any] = []
    script = {"code_blocks": [{"language": "python", "code": "import json\nwith open('/workspace/data.jsonld') as f:\n    data = json.load(f)\n"}]}
    trace += c.pair("open_path", {"path": "/workspace/bec745.jsonld"}, "Path: /workspace/bec745.jsonld\n{...}")
    for attempt in range(8):
        trace += c.pair("execute_code_blocks", script, traceback(f"tmp_code_{attempt:016x}a"))
    assert "failure-loop" in criticals(trace)


def test_an_autogen_executor_whose_script_changes_is_debugging() -> None:
    c = Calls()
    trace: list[Any] = []
    for attempt in range(8):
        script = {"code_blocks": [{"language": "python", "code": f"print(load('/workspace/v{attempt}.json'))"}]}
        trace += c.pair("execute_code_blocks", script, traceback(f"tmp_code_{attempt:016x}b"))
        trace += c.pair("open_path", {"path": f"/workspace/notes_{attempt}.md"}, f"notes {attempt}")
    assert "failure-loop" not in criticals(trace)


def revision_page(act: str, offset: int, where: str) -> str:
    return (f"I {act}.\n\nThe web browser is open to the page [Example: Revision history - Wikipedia]"
            f"(https://en.wikipedia.org/w/index.php?title=Example&action=history&limit=500&offset={offset}).\n"
            f"The viewport shows 2% of the webpage, and is positioned at the {where} of the page\n"
            "The following text is visible in the viewport:\n\n(newer 500 | older 500)\n"
            f"curprev {offset % 24:02d}:33, 8 November {2000 + offset % 20} Editor talk contribs")


def test_a_browser_paging_on_to_other_addresses_is_no_cycle() -> None:
    """A click on 'older 500' and a scroll, lap after lap, each lap on a page whose address
    differs only in a number: another page each time (the answers' digits taken out, every
    lap read the same)."""
    c = Calls()
    trace: list[Any] = []
    for offset in (20230701000000, 20141108173315, 20090616115238, 20070912033155, 20050101000000):
        trace += c.pair("click", {"target_id": 56}, revision_page("clicked 'older 500'", offset, "top"))
        trace += c.pair("page_down", {}, revision_page("scrolled down one page in the browser", offset, "bottom"))
    assert "alternating-tool-cycle" not in criticals(trace)


def test_a_browser_going_back_and_forth_on_one_address_is_still_a_cycle() -> None:
    c = Calls()
    trace: list[Any] = []
    for _lap in range(5):
        trace += c.pair("click", {"target_id": 56}, revision_page("clicked 'older 500'", 20141108173315, "top"))
        trace += c.pair("page_up", {}, revision_page("scrolled up one page in the browser", 20141108173315, "top"))
    assert "alternating-tool-cycle" in criticals(trace)


def test_quoted_figures_in_an_answer_are_its_data() -> None:
    """A tuple of strings printed (`Kenya ('2', '3', '0')`) holds figures, kept where a
    success's digits are; a quoted term in an answer whose digits are noise is still masked."""
    assert template("Kenya ('2', '3', '0')\nEthiopia ('1', '4', '3')", digits=False) != template(
        "Kenya ('6', '1', '0')\nEthiopia ('4', '0', '4')", digits=False)
    assert template("Said 'hello' to Kenya", digits=False) == template("Said 'bye' to Kenya", digits=False)
    assert template('No matches found for "805" in /repo', digits=True) == template(
        'No matches found for "README" in /repo', digits=True)
    c = Calls()
    trace: list[Any] = []
    for year in range(1964, 2024, 4):
        medals = (year % 17, year % 13, year % 11)  # a different count every Games
        trace += c.pair("python_interpreter", f'page = visit_webpage("https://en.wikipedia.org/wiki/{year}_Summer_Olympics_medal_table")',
                        f"Execution logs:\nKenya {tuple(str(m) for m in medals)}\nLast output from code snippet:\nNone")
    assert "result-stall" not in criticals(trace)


def bing(query: str, results: list[str]) -> str:
    url = "https://www.bing.com/search?q=" + query.replace(" ", "+") + "&FORM=QBLH"
    found = "\n".join(f"{r.split(' › ')[0][8:]}\n{r}\nA page about it ..." for r in results)
    return (f"I typed '{query}' into the browser search bar.\n\nThe web browser is open to the page "
            f"[{query} - Search]({url}).\nThe viewport shows 22% of the webpage\n"
            f"The following text is visible in the viewport:\n\n{query}\nAbout 9,000 results\n{found}")


HITS = ["https://county.example.gov › EN › Parks › Trails › KK-River-Trail",
        "https://www.reddit.com › r › milwaukee › comments › kk_trail_friends",
        "https://www.facebook.com › FriendsKKTrail"]


def test_reworded_web_searches_finding_the_same_pages_are_a_stall() -> None:
    """Magentic-One's web surfer answers a search with the results page, whose own address
    carries the query: it named a new address every time, so reworded searches finding the
    same three pages were never stale."""
    c = Calls()
    trace: list[Any] = []
    words = ["annual report", "2019 report", "volunteer hours", "year in review", "report pdf",
             "annual summary", "yearly report", "hours logged", "stewardship report", "recap",
             "annual report 2019", "report volunteers", "total hours", "annual review"]
    for extra in words:
        query = f"Friends of the KK River Trail {extra}"
        trace += c.pair("web_search", {"query": query}, bing(query, HITS))
    assert "result-stall" in criticals(trace)


def test_reworded_web_searches_finding_new_pages_of_one_site_are_news() -> None:
    c = Calls()
    trace: list[Any] = []
    topics = ["mills", "bridges", "floods", "parks", "tanneries", "railways", "shipyards", "canals",
              "breweries", "dams", "wetlands", "fisheries", "harbors", "foundries"]
    for topic in topics:
        query = f"Kinnickinnic River history {topic}"
        pages = [f"https://en.wikipedia.org › wiki › Kinnickinnic_{topic}_{part}" for part in ("era", "sites", "people")]
        trace += c.pair("web_search", {"query": query}, bing(query, pages))
    assert "result-stall" not in criticals(trace)


@pytest.mark.parametrize(("line", "action", "write"), [
    ("docker compose ps db", "docker-compose ps", False),
    ("docker compose -f ci.yml logs db", "docker-compose logs", False),
    ("docker compose up -d db", "docker-compose up", True),
    ("docker --context prod compose down", "docker-compose down", True),
    ("docker-compose ps", "docker-compose ps", False),
    ("docker-compose restart web", "docker-compose restart", True),
    ("cd app && docker compose build api", "docker-compose build", True),
    ("docker compose --parallel 2 up -d", "docker-compose up", True),
    # a command run in a container: the action stays the exec (work in the task's
    # containers, setup-detour's task work); whether the line writes is what runs inside
    ('docker compose exec -T db psql -U app -c "INSERT INTO seats VALUES (1)"', "docker-compose exec", True),
    ('docker exec db psql -c "SELECT count(*) FROM seats"', "docker exec", False),
    ("docker exec -u root web sed -i s/a/b/ /etc/app.conf", "docker exec", True),
    ("sleep 5; docker compose exec db pg_isready", "docker-compose exec", False),
    ("podman exec c rm -rf /tmp/cache", "podman exec", True),
    ("docker exec web export DEBUG=1", "docker exec", False),  # the container's shell, not ours
])
def test_compose_and_containers_are_read_by_what_they_run(line: str, action: str, write: bool) -> None:
    facts = shell_facts(line)
    assert (facts.action, facts.write) == (action, write)


@pytest.mark.parametrize(("line", "action", "search"), [
    # PowerShell given a command: what it runs; a search through what a lister lists
    ("""pwsh -c "Get-ChildItem '\\\\corp\\SYSVOL' -Recurse -Include *.xml | Select-String -Pattern 'ScreenSave'" """,
     "get-childitem", True),
    ('pwsh -NoProfile -c "(Get-GPO -All).Count"', "get-gpo", False),
    ("powershell -ExecutionPolicy Bypass -Command Get-Service", "get-service", False),
    ("powershell -File deploy.ps1", "powershell", False),
    ("cat logs/app.log | grep -n ERROR", "cat", True), ("ls src | grep config", "ls", True),
    ("Get-Content app.log | sls 'timeout'", "get-content", True),
    # a search after a program that does more than list is no search of the line
    ("kubectl get pods -A | grep web", "kubectl get", False), ("pytest -q | grep FAILED", "pytest", False),
    # a lister earlier in the line, not right before the search
    ("ls && make build && grep -rn TODO src", "ls", False), ("cat notes.txt; pytest -q | grep FAILED", "cat", False),
])
def test_powershell_and_a_search_through_a_listing(line: str, action: str, search: bool) -> None:
    facts = shell_facts(line)
    assert (facts.action, facts.search) == (action, search)


@pytest.mark.parametrize(("line", "action", "write"), [
    # Git LFS, as git's sub-command or its own program: its sub-command is the act
    ("cd ~/mossgrove && git lfs track '*.psd'", "git-lfs track", True),
    ("git -C repo lfs migrate import --include='*.wav'", "git-lfs migrate", True),
    ("git-lfs untrack '*.tmp'", "git-lfs untrack", True),
    ("git lfs ls-files | wc -l", "git-lfs ls-files", False),
    ("git lfs fsck", "git-lfs fsck", False),
    ("git lfs", "git-lfs", False),
    ("git log --oneline", "git log", False),
])
def test_git_lfs_is_read_by_its_own_sub_command(line: str, action: str, write: bool) -> None:
    facts = shell_facts(line)
    assert (facts.action, facts.write) == (action, write)


@pytest.mark.parametrize(("output", "action", "acknowledges"), [
    ('Tracking "*.wav"', "git-lfs track", True), ("pod/web-1 labeled", "kubectl label", True),
    ("deployment.apps/web scaled", "kubectl scale", True), ('pod "x" deleted', "kubectl delete", True),
    # it did nothing, or something went wrong
    ('"*.psd" already supported', "git-lfs track", False), ("deployment.apps/web unchanged", "kubectl apply", False),
    ("Tracking failed: not a git repository", "git-lfs track", False),
    # no word of the act, more than one line, a sub-command too short to say
    ("c0f3a19 Track art", "git commit", False), ('Tracking "*.wav"\nTracking "*.png"', "git-lfs track", False),
    ("added 1 package", "npm i", False), ("Retracking x", "git-lfs track", False),
])
def test_a_one_line_output_naming_its_act_acknowledges_a_write(output: str, action: str, acknowledges: bool) -> None:
    from streamguard.signals.base import _reports_its_act

    assert _reports_its_act(output, action) is acknowledges


def test_a_sweep_of_writes_each_acknowledged_by_its_act_is_work() -> None:
    """Binary types put under Git LFS one extension at a time, each answered `Tracking
    "*.wav"`: distinct writes, each acknowledged by the act its sub-command names. The
    same write re-sent and answered alike is still no news; nor is "already supported"."""
    c = Calls()
    sweep: list[Any] = []
    for ext in ["wav", "png", "tga", "ogg", "exr", "ttf", "mp4", "aif", "spp", "sbsar", "mov", "hdr", "uasset"]:
        sweep += c.pair("bash", {"command": f"cd ~/mossgrove && git lfs track '*.{ext}'"}, f'Tracking "*.{ext}"')
    assert criticals(sweep) == []
    again: list[Any] = []
    for _ in range(13):
        again += c.pair("bash", {"command": "cd ~/mossgrove && git lfs track '*.wav'"}, 'Tracking "*.wav"')
    assert criticals(again) != []


def test_a_compose_health_poll_after_sleeps_is_a_poll() -> None:
    """`sleep 5; docker compose ps db` while a database loads its seed: a read after a wait
    of its own. `docker compose` was a write whatever its sub-command, so the poll was no
    poll and its fifth status was halted."""
    c = Calls()
    trace: list[Any] = []
    for age in range(4, 64, 6):
        trace += c.pair("execute_bash", {"command": "sleep 5; docker compose ps db"},
                        f"NAME  IMAGE  STATUS\nbookings-db-1  postgres:16  Up {age} seconds (health: starting)\n"
                        "[Command finished with exit code 0]")
    assert criticals(trace) == []


def cell_traceback(cell: int, code: str) -> str:
    return ("-" * 75 + "\nNameError                                 Traceback (most recent call last)\n"
            f"Cell In[{cell}], line 1\n----> 1 {code}\n\nNameError: name 'load_frame' is not defined\n"
            "[Jupyter current working directory: /workspace]")


def test_a_notebook_cell_raising_is_a_failure() -> None:
    """An IPython traceback is how a cell fails (it has no exit code): the same cell run
    again and again, raising the same way, is a failure loop (the cell's number moved, so
    every answer was a new success)."""
    c = Calls()
    trace: list[Any] = []
    for cell in range(1, 9):
        trace += c.pair("execute_ipython_cell", {"code": "df = load_frame('/workspace/ames.csv')"},
                        cell_traceback(cell, "df = load_frame('/workspace/ames.csv')"))
    assert "failure-loop" in criticals(trace)
    assert cell_error(cell_traceback(3, "x")) is not None
    assert cell_error("-" * 40 + "\n| col | n |\n" + "-" * 40) is None


def interpreter_answer(*logs: str) -> dict[str, Any]:
    """OpenAI's code interpreter as the Assistants record it: its outputs, logs and images."""
    return {"outputs": [*({"type": "logs", "logs": text} for text in logs),
                        {"type": "image", "image": {"file_id": "file-7Qm"}}]}


def test_a_code_interpreter_cell_raising_is_a_failure_and_its_name_says_nothing() -> None:
    """OpenAI's `code_interpreter` is a runner of cells: its name says nothing of what a call
    does (a sweep of analyses was warned as the same tool again), and its answer is its
    logs. A groupby on a column that does not exist, re-run unchanged, raised the same
    `KeyError` each time under a new cell number: read as sent, a new success every time,
    never halted."""
    from streamguard.signals.facts import CommandRunners, interpreter_logs, is_code_tool

    assert CommandRunners()("code_interpreter") and is_code_tool("code_interpreter")
    assert CommandRunners()("python_repl_ast") and is_code_tool("Python_REPL")
    assert CommandRunners()("append_execute_code_cell") and is_code_tool("insert_execute_code_cell")
    # a notebook's editing tools edit: named so, they stay writes
    assert not any(CommandRunners()(t) for t in ("edit_code_cell", "insert_code_cell", "add_code_cell"))
    from streamguard.signals.facts import code_facts

    # in code, ">" compares; only a notebook's shell line redirects
    assert not code_facts("recent = events[events.ts > now - 300]").write
    assert code_facts("!ls /mnt/data > files.txt").write
    assert code_facts("%%bash\necho done > status.txt").write
    assert CommandRunners()("run_code_cell") and is_code_tool("run_code_cell")
    assert interpreter_logs(interpreter_answer("a\n", "b")) == ("a\n\nb", None)
    assert interpreter_logs({"outputs": "x"}) is None
    assert interpreter_logs({"outputs": [{"type": "logs", "logs": 3}]}) is None
    failed = interpreter_logs(interpreter_answer(cell_traceback(4, "x")), cell=True)
    assert failed is not None and failed[1] is not None
    c = Calls()
    rerun: list[Any] = []
    code = "monthly = orders.groupby('month')['Revenue'].sum()\nmonthly.plot()"
    for cell in range(4, 14):
        rerun += c.pair("code_interpreter", {"input": code}, interpreter_answer(cell_traceback(cell, code)))
    assert "failure-loop" in criticals(rerun)
    # Open Interpreter's `execute` runs Python in a kernel too: its tracebacks are failures
    oom: list[Any] = []
    read = "import pandas as pd\ntx = pd.read_csv('/data/transactions.csv')"
    for cell in range(1, 11):
        oom += c.pair("execute", {"language": "python", "code": read}, cell_traceback(cell, read))
    assert "failure-loop" in criticals(oom)
    sweep: list[Any] = []
    for n, column in enumerate(["units", "unit_price", "discount", "net_sales", "region", "category",
                                "product", "customer_id", "order_date", "month", "channel", "store",
                                "promo", "returns", "margin", "cost", "tax"]):
        sweep += c.pair("code_interpreter", {"input": f"orders['{column}'].describe()"},
                        interpreter_answer(f"count 4826\nunique {n * 7 + 3}\ntop {column}-{n}"))
    assert [a.signal for a in alerts(sweep) if a.signal == "repeated-tool-name"] == []
    # LangChain's pandas agent sends its code as `query`
    assert CommandRunners()("python_repl_ast")
    from streamguard.signals.facts import runner_facts

    assert runner_facts({"query": "open('out.txt', 'w').write(report)"}, True).write
    assert not runner_facts({"query": "df.head()"}, True).write


def npm_failure(stamp: str) -> str:
    return ("npm ERR! code EAI_AGAIN\nnpm ERR! syscall getaddrinfo\nnpm ERR! request to "
            "https://registry.npmjs.org/rollup failed, reason: getaddrinfo EAI_AGAIN registry.npmjs.org\n\n"
            "npm ERR! A complete log of this run can be found in:\n"
            f"npm ERR!     /root/.npm/_logs/{stamp}-debug-0.log\n(Current directory: /markedjs__marked)\nbash-$")


def test_npm_failing_offline_again_and_again_is_a_stall() -> None:
    """A runtime that records no exit code (SWE-agent 0.x) sends npm's failure as output,
    and npm names the log of every failed run by when it failed: the same install failing
    the same way was a new answer every time, and never halted."""
    c = Calls()
    trace: list[Any] = []
    commands = ["npm install", "npm ci", "npm install rollup", "npm install --fetch-timeout=120000"]
    for n in range(20):
        stamp = f"2024-08-14T13_{10 + n:02d}_52_{100 + n}Z"
        trace += c.pair("bash", commands[n % 4], npm_failure(stamp))
        if n % 4 == 3:
            trace += c.pair("bash", "ls node_modules | head",
                            "ls: cannot access 'node_modules': No such file or directory")
    assert "result-stall" in criticals(trace)


@pytest.mark.parametrize("line", ["docker Compose ps", "DOCKER COMPOSE up", 'bash -c "docker compose"',
                                  "docker compose", "docker exec", "docker compose exec -T",
                                  "docker exec c docker exec d docker exec e rm -rf x"])
def test_compose_and_exec_lines_of_any_shape_are_read_without_error(line: str) -> None:
    facts = shell_facts(line)
    assert facts.action.startswith("docker")


def test_a_seed_through_compose_exec_is_writes() -> None:
    """Twelve rows inserted through `docker compose exec -T db psql`, each answered `INSERT 0
    1`: a statement that changes what is stored, run in a container, is a write."""
    c = Calls()
    trace: list[Any] = []
    for n in range(12):
        trace += c.pair("bash", {"command": f'docker compose exec -T db psql -U app -c "INSERT INTO seats VALUES ({n})"'},
                        "INSERT 0 1")
    assert criticals(trace) == []


def test_a_log_that_opens_like_a_cell_is_a_log_for_a_shell() -> None:
    """Only a notebook's runner answers with a cell's traceback: a shell reading job logs that
    open with a rule of dashes and a traceback is reading logs."""
    c = Calls()
    trace: list[Any] = []
    for job in range(12):
        trace += c.pair("bash", {"command": f"cat logs/job_{job}.log"},
                        cell_traceback(job, f"run_job({job * 37})") + f"\njob {job} exit after {job * 13} s")
    assert criticals(trace) == []


def test_moving_query_parameters_of_an_address_are_no_news() -> None:
    """A page's path and paging parameters keep their digits; a dashboard link's `from=<now>`
    or a search's `qid=<time>` is the same page at another moment: the laps still repeat."""
    c = Calls()
    trace: list[Any] = []
    for lap in range(6):
        now = 1_733_000_000 + 60 * lap
        trace += c.pair("get_active_alerts", {"team": "payments"},
                        f"1 alert firing: HighErrorRate (https://grafana.example.net/d/abc?from={now - 3600}&to={now})")
        trace += c.pair("query_metric", {"metric": "http_errors_total"},
                        f"error rate 4.2% (https://grafana.example.net/d/xyz?orgId=1&from={now - 3600}&to={now})")
    assert "alternating-tool-cycle" in criticals(trace)


@pytest.mark.parametrize("prompt", ["Password for user postgres: ", "[sudo] password for agent: ",
                                    "Enter passphrase for key '/root/.ssh/id_ed25519': ",
                                    "Traceback (most recent call last):"])
def test_a_prompt_or_a_traceback_head_is_no_empty_listing(prompt: str) -> None:
    c = Calls()
    trace: list[Any] = []
    for n in range(14):
        trace += c.pair("db_console", {"statement": f"\\c app_{n}"}, prompt)
        trace += c.pair("db_console", {"statement": f"\\dt app_{n}"}, prompt)
    assert "result-stall" in criticals(trace)


def test_a_runner_answer_that_is_only_output_is_its_data() -> None:
    """`{"output": ...}` with no exit code is no run record: read as sent."""
    c = Calls()
    trace: list[Any] = []
    for name in ["ana", "ben", "cho", "dee", "eli", "fay", "gus", "hal", "ivy", "jon", "kim", "lou"]:
        trace += c.pair("python", {"code": f"create_user('{name}')"}, {"output": f"created user '{name}'"})
    assert criticals(trace) == []


def test_waiting_on_a_command_that_no_longer_runs_is_a_loop() -> None:
    """OpenHands waits for more output of a running command with an empty command; when
    nothing runs it answers "ERROR: No previous running command to retrieve logs from.".
    An agent waiting so, again and again, after its test run was killed, was a poll for
    ever; the fourth such answer in a row is now the same question asked again."""
    trace = openhands_waits(
        "....x..s [ 23%]\n[gw3] node down: Not properly terminated\n[Command finished with exit code 137]",
        "ERROR: No previous running command to retrieve logs from.\n[Current working directory: /workspace/matplotlib]", 6)
    assert "repeated-tool-call" in criticals(trace)


def test_waiting_on_a_command_still_running_is_a_poll() -> None:
    trace = openhands_waits(
        "....x..s [ 3%]\n[The command has no new output after 30 seconds.]",
        "[The command has no new output after 30 seconds. You may wait longer to see additional output]", 8)
    assert criticals(trace) == []


def test_waiting_on_a_command_that_never_prints_again_is_stuck() -> None:
    """The same wait answered that nothing new came, the 25th time in a row: the hung test
    run it reads has not moved in all those waits. One that printed in between waits
    twice as long since."""
    nothing = ("[Below is the output of the previous command.]\n[The command has no new output after 30 seconds."
               " You may wait longer to see additional output by sending empty command '', send other commands"
               " to interact with the current process, or send keys to interrupt/kill the command.]")
    started = "....x..s [ 23%]\n[The command has no new output after 30 seconds.]"
    assert criticals(openhands_waits(started, nothing, 24)) == []
    assert "repeated-tool-call" in criticals(openhands_waits(started, nothing, 25))

    def printed_between(after: int) -> list[Any]:
        c = Calls()
        trace = openhands_waits(started, nothing, 20)
        trace += c.pair("execute_bash", {"command": "", "is_input": "true"}, "..... [ 31%]")
        for _ in range(after):
            trace += c.pair("execute_bash", {"command": "", "is_input": "true"}, nothing)
        return trace

    assert criticals(printed_between(49)) == []
    assert "repeated-tool-call" in criticals(printed_between(50))

    # a note the agent keeps between the waits ("still uninstalling, keep waiting") does
    # not break the run: a prompt never answered is waited on for ever all the same
    c = Calls()
    noted = openhands_waits(started, nothing, 0)
    for n in range(25):
        if n % 10 == 9:
            noted += c.pair("think", {"thought": "It is taking a while; I'll keep waiting."}, "Your thought has been logged.")
        noted += c.pair("execute_bash", {"command": "", "is_input": "true"}, nothing)
    assert "repeated-tool-call" in criticals(noted)


def openhands_waits(started: str, waited: str, waits: int) -> list[Any]:
    """A test run started through OpenHands' `execute_bash`, then `waits` empty commands
    (its way to wait for more output), each answered `waited`."""
    c = Calls()
    trace = c.pair("execute_bash", {"command": "python -m pytest lib/tests -q -n 8"}, started)
    for _ in range(waits):
        trace += c.pair("execute_bash", {"command": "", "is_input": "true"}, waited)
    return trace


def test_an_empty_page_stating_its_number_and_size_found_nothing() -> None:
    assert found_nothing({"query": "Wren's End", "format": None, "page": 1, "page_size": 10,
                          "total_results": 0, "results": []})
    assert not found_nothing({"query": "Wren's End", "page": 1, "total_results": 3, "results": []})
    c = Calls()
    trace: list[Any] = []
    for query in ["The Lighthouse at Wren's End", "Lighthouse Wren's End Ashby", "Wren's End",
                  "Corinne Ashby", "Lighthouse Wrens End", "lighthouse wren", "Ashby",
                  "Wren's End Ashby", "Wren's End mystery", "Corinne Ashby mystery", "Ashby, Corinne"]:
        trace += c.pair("search_catalog", json.dumps({"query": query}),
                        json.dumps({"query": query, "format": None, "page": 1, "page_size": 10,
                                    "total_results": 0, "results": []}))
    assert "result-stall" in criticals(trace)


def test_an_answer_that_is_one_quoted_value_is_that_value() -> None:
    """`python -c "print(repr(camel2under('HTTPResponseCode')))"` answers `'http_response_code'`:
    the quoted string is the answer, not a term in a message; a dozen probes of different
    names were one answer a dozen times, and halted."""
    c = Calls()
    trace: list[Any] = []
    for name, snake in [("HTTPResponseCode", "http_response_code"), ("BasicParseTest", "basic_parse_test"),
                        ("ParseHTTP", "parse_http"), ("XMLHTTPRequest", "xmlhttp_request"),
                        ("Base64Encoder", "base64_encoder"), ("Vector3D", "vector3_d"), ("A", "a"),
                        ("already_snake", "already_snake"), ("getHTTPResponse", "get_http_response"),
                        ("IO_Error", "io__error"), ("SimpleXMLParser", "simple_xml_parser"),
                        ("JSONToYAML", "json_to_yaml")]:
        trace += c.pair("bash", {"command": f"python -c \"print(repr(camel2under('{name}')))\""}, f"'{snake}'\n")
    assert "result-stall" not in criticals(trace)
    # The same quoted value again and again is still the same answer.
    assert template("'http_response_code'\n", digits=False) != template("'parse_http'\n", digits=False)
    assert template("No such key 'a' in config", digits=False) == template("No such key 'b' in config", digits=False)


def test_a_terminal_agents_script_report_is_read_as_output_and_exit_code() -> None:
    """Magentic-One's ComputerTerminal and AutoGen's executor agents report a run in words
    (`The script ran, then exited with an error (POSIX exit code: 1)` / `Its output was:`):
    the same failing script re-sent, its temporary file named anew by a hash each time, is
    a failure loop; read as sent it was a new success every time."""
    c = Calls()
    trace: list[Any] = []
    script = "import fitz\ndoc = fitz.open('report.pdf')\nprint(doc.page_count)"
    for n in range(8):
        trace += c.pair("ComputerTerminal", {"code": script},
                        "The script ran, then exited with an error (POSIX exit code: 1)\nIts output was:\n"
                        f'Traceback (most recent call last):\n  File "/workspace/tmp_code_{n:064x}.py", line 1\n'
                        "ModuleNotFoundError: No module named 'fitz'")
    assert "failure-loop" in criticals(trace)
    assert script_report("The script ran, then exited with Unix exit code: 0\nIts output was:\nTotal: 344") == ("Total: 344", None)
    assert script_report("The script ran but produced no output to console. The Unix exit code was: 0. If you...") == ("", None)
    assert script_report("The script ran, then exited with an error (POSIX exit code: 3221225477)\nIts output was:\n") == (
        "", "exit code 3221225477")
    assert script_report("The script ran fine") is None


def test_autogens_code_executor_answer_is_read_as_output_and_exit_code() -> None:
    """AutoGen's code executors answer `exitcode: 0 (execution succeeded)` / `Code output:`.
    A Space's build stage read through `execute_code` after each `sleep 30` is a poll while
    it says BUILDING (read with the envelope, every stage was one template); the same
    failing script re-sent is a failure loop."""
    c = Calls()
    trace: list[Any] = []
    stage = ("sleep 30; curl -s https://huggingface.co/api/spaces/orchid-lab/leaf-classifier/runtime")
    clock = 1_000.0
    for _ in range(14):
        trace += c.pair("execute_code", {"language": "sh", "code": stage},
                        'exitcode: 0 (execution succeeded)\nCode output: {"stage":"BUILDING","hardware":null}')
    for event in trace:
        event.ts = clock
        clock += 17.0
    assert criticals(trace) == []
    c = Calls()
    failing: list[Any] = []
    for _ in range(8):
        failing += c.pair("execute_code", {"language": "python", "code": "import fitz"},
                          "exitcode: 1 (execution failed)\nCode output: Traceback (most recent call last):\n"
                          "ModuleNotFoundError: No module named 'fitz'")
    assert "failure-loop" in criticals(failing)
    assert code_executor_report("exitcode: 0 (execution succeeded)\nCode output: 42\n") == ("42\n", None)
    assert code_executor_report("exitcode: 124 (execution failed)\nCode output: \nTimeout") == ("Timeout", "exit code 124")
    # a Windows status code, unsigned (0xC0000005, an access violation), in an IDE
    # agent's run report too, never cut to its first six digits
    from streamguard.signals.facts import run_report
    assert run_report("Command failed.\nExit code: 3221225477\nOutput:\nboom") == ("boom", "exit code 3221225477")
    assert code_executor_report("exitcode: 3221225477 (execution failed)\nCode output: ") == ("", "exit code 3221225477")
    assert code_executor_report("exitcode: zero") is None


def test_swe_agents_words_for_no_output_are_an_empty_output() -> None:
    """SWE-agent answers a command that printed nothing with `Your command ran successfully
    and did not produce any output.` (1.x under its `OBSERVATION:` line). A reproducer's
    project written file after file with `cat > ... <<EOF`, each variant built and checked,
    was one answer told eight times and halted; a silent write is news."""
    silent = "Your command ran successfully and did not produce any output."
    for answer in (silent, "OBSERVATION:\n" + silent):
        c = Calls()
        trace: list[Any] = []
        trace += c.pair("bash", {"command": "mkdir -p /tmp/dec && cd /tmp/dec"}, answer)
        for variant in range(8):
            trace += c.pair("bash", {"command": f"cd /tmp/dec && cat > mod.py <<'EOF'\nclass A{variant}:\n    pass\nEOF"}, answer)
            trace += c.pair("bash", {"command": "cd /tmp/dec && python -m sphinx -q -b html . _build; grep -c init _build/index.html"},
                            str(variant % 2))
        assert criticals(trace) == [], answer
    assert silent_run(silent + "\n") == ("", None)
    assert silent_run("OBSERVATION:\n" + silent) == ("", None)
    # 0.x's harness state after it is the harness's, not the command's
    assert silent_run(silent + "\n(Open file: /repo/a.js)\n(Current directory: /repo)\nbash-$") == ("", None)
    assert silent_run("OBSERVATION:\nfoo.py:3: error") is None
    assert silent_run(silent + "\nbut then: Killed") is None
    # The same silent command re-sent, nothing written, is still a loop.
    c = Calls()
    trace = []
    for _ in range(6):
        trace += c.pair("bash", {"command": "cd /testbed && python reproduce.py > /dev/null"}, silent)
    assert "repeated-tool-call" in criticals(trace)


def test_a_progress_line_read_after_each_sleep_is_a_poll() -> None:
    """`sleep 60; grep '===>' /tmp/playtests.log | tail -1` while a test suite runs in the
    background: the `>` of the pattern is no redirection, so the line is a read after a
    wait, answered by the section the suite has reached. Read as a write, five identical
    lines were a write re-sent and halted."""
    c = Calls()
    trace: list[Any] = []
    trace += c.pair("bash", {"command": "cd tests && nohup make test-zstd > /tmp/playtests.log 2>&1 &"}, "")
    for section in ["simple tests", "multiple_thread test", "--fast_argument test", "--exclude-compressed flag",
                    "recursive mode test", "file removal", "decompression only tests", "compress multiple files",
                    "multiple files and shell completion", "permissions", "dictionary tests", "zstd --list"]:
        trace += c.pair("bash", {"command": "sleep 60; grep '===>' /tmp/playtests.log | tail -1"}, f"===>  {section} ")
    assert criticals(trace) == []


def test_a_background_study_polled_between_sleeps_is_a_poll() -> None:
    """A background Optuna study read with BashOutput after each sleep, its progress
    counted now and then in its database: BashOutput's own `<status>running</status>` says
    the run goes on, whatever its latest lines say ("Trial 25 finished", "Trial 26
    pruned"), and its lines, one of two kinds once their digits are out, are a poll's
    answers, not a lap of a cycle."""
    c = Calls()
    trace: list[Any] = []
    trace += c.pair("Bash", {"command": "uv run python scripts/tune.py --trials 60 > tune.log 2>&1", "run_in_background": True},
                    "Command running in background with ID: bash_1")
    done = 0
    for lap in range(6):
        for kind in ("finished with value: 0.8{n:03d}. Best is trial {b}", "pruned at step {b}."):
            trace += c.pair("Bash", {"command": f"sleep {180 + 60 * (lap % 3)}"}, "")
            done += 4
            trace += c.pair("BashOutput", {"bash_id": "bash_1"},
                            f"<status>running</status>\n\n<stdout>\n[I 2025-08-20 13:{done:02d}:21,104] Trial {done} "
                            + kind.format(n=done, b=done // 2) + "\n</stdout>")
        trace += c.pair("Bash", {"command": "sqlite3 reports/optuna.db \"select state, count(*) from trials group by state\""},
                        f"COMPLETE|{done}\nRUNNING|1")
    assert criticals(trace) == []


def test_a_finished_ci_run_watched_again_is_a_loop() -> None:
    """`gh run view` says how long ago the run was triggered ("about 33 minutes ago"): an
    age that moves by itself. A run that ended, watched again after each sleep, is the
    same answer every time."""
    c = Calls()
    trace: list[Any] = []
    for minute in range(32, 44):
        trace += c.pair("Bash", {"command": "sleep 60"}, "")
        trace += c.pair("Bash", {"command": "gh run view 17640022815"},
                        f"X fix/lockfile CI · 17640022815\nTriggered via pull_request about {minute} minutes ago\n\n"
                        "JOBS\n✓ lint in 31s (ID 50128844007)\nX test in 21s (ID 50128844120)\n\n"
                        "ANNOTATIONS\nX Process completed with exit code 2.\n")
        trace += c.pair("Bash", {"command": "gh run watch 17640022815"}, "Run CI (17640022815) has already completed with 'failure'")
    assert "result-stall" in criticals(trace)


def test_a_ci_run_still_going_watched_now_and_then_is_a_poll() -> None:
    """The same `gh run view` of a run still in progress (`*` marks a job under way, no
    word of an end), a minute or two apart: its age is all that says time passed, and
    each answer is a poll's, not the same answer again."""
    c = Calls()
    trace: list[Any] = []
    ts = 1_750_000_000.0
    for minute in range(3, 12):
        ts += 60 + 30 * (minute % 3)
        call, result = c.pair("Bash", {"command": "gh run view 17640022815"},
                              f"* main CI · 17640022815\nTriggered via push about {minute} minutes ago\n\n"
                              "JOBS\n✓ lint in 31s (ID 50128844007)\n* test (ID 50128844120)\n")
        trace += [structs.replace(call, ts=ts), structs.replace(result, ts=ts + 2)]
    assert criticals(trace) == []


JQ_RUN = "sleep 120 && gh run view 191 --json status,conclusion,jobs --jq '\"\\(.status) \\(.conclusion)\", (.jobs[0].steps[] | \"\\(.status) \\(.conclusion) \\(.name)\")'"
STEPS = ["Set up job", "Checkout", "Set up QEMU", "Login to GHCR", "Build and push", "Sign image", "Attach SBOM"]


def jq_run_view(run: str, done: int, running: bool) -> str:
    rows = [f"completed success {step}" for step in STEPS[:done]]
    if running:
        rows.append(f"in_progress  {STEPS[done]}")
    return f"<returncode>0</returncode>\n<output>\n{run}\n" + "\n".join(rows) + "\n</output>"


def jq_polls(answers: list[str]) -> list[Any]:
    return stamped([("bash", {"command": JQ_RUN}, answer) for answer in answers], gap=125)


def test_a_run_listed_step_by_step_while_in_progress_is_a_poll() -> None:
    """`gh run view --jq` printing the run's own status, then each step's ("completed
    success Checkout"), one per line: the steps done are parts of a run still
    ``in_progress``. Read as words of an end, a slow build step polled after each sleep
    was the same finished answer again and a healthy release wait was halted at its
    twelfth call."""
    answers = [jq_run_view("in_progress ", 4, True)] * 9 + [jq_run_view("in_progress ", n, True) for n in (5, 6)]
    answers.append(jq_run_view("completed success", 7, False))
    assert criticals(jq_polls(answers)) == []


def test_a_run_listed_step_by_step_that_ended_polled_again_is_a_loop() -> None:
    """The same listing once the run's own line says it ended ("completed success"):
    asked again after every sleep, the same answer every time."""
    assert criticals(jq_polls([jq_run_view("in_progress ", 6, True)] + [jq_run_view("completed success", 7, False)] * 14))


def test_a_prompt_for_input_at_the_head_of_a_line_is_no_status_under_way() -> None:
    """"waiting for input" opens a line as a status token would, but it waits on the agent:
    the same command re-run into it is the same answer, not a job under way."""
    answer = "Plan: 3 to add, 0 to change, 0 to destroy.\nwaiting for input (press y to continue)"
    assert criticals(stamped([("bash", {"command": "./deploy.sh staging"}, answer)] * 8, gap=15))


def stamped(pairs: list[tuple[str, Any, Any]], gap: float = 5.0, start: float = 1_763_000_000.0) -> list[Any]:
    """Calls and results with times: ``gap`` seconds apart, a ``sleep*`` call's seconds on top."""
    c = Calls()
    trace: list[Any] = []
    ts = start
    for tool, args, result in pairs:
        call, answer = c.pair(tool, args, result)
        ts += gap + (args.get("seconds", 0) if tool.startswith("sleep") and type(args) is dict else 0)
        trace += [structs.replace(call, ts=ts), structs.replace(answer, ts=ts + 1)]
    return trace


def test_a_browser_going_back_to_the_same_list_after_each_save_is_no_futile_write() -> None:
    """browser-use answers a navigation with where it went ("🔗  Navigated to ..."): the same
    answer after every saved product says nothing of the page, and is no check a write
    failed to move (a dozen stock updates were halted as futile)."""
    pairs: list[tuple[str, Any, Any]] = []
    for n, sku in enumerate(["DESK", "LAMP", "SCONCE", "PEND", "ARC", "TRI", "WALL", "OPAL"]):
        pairs += [("input_text", {"index": 31, "text": f"LH-{sku}"}, f"⌨️  Input LH-{sku} into index 31"),
                  ("click_element_by_index", {"index": 60 + n}, f"🖱️  Clicked button with index {60 + n}: {sku}"),
                  ("input_text", {"index": 240 + n, "text": str(n + 3)}, f"⌨️  Input {n + 3} into index {240 + n}"),
                  ("click_element_by_index", {"index": 120 + n}, f"🖱️  Clicked button with index {120 + n}: Update"),
                  ("go_to_url", {"url": "https://shop.example/wp-admin/edit.php?post_type=product"},
                   "🔗  Navigated to https://shop.example/wp-admin/edit.php?post_type=product")]
    assert criticals(stamped(pairs)) == []


def aws_answer(status: str) -> dict[str, Any]:
    inner = json.dumps({"response": {"error": None, "json": json.dumps([status, []]), "status_code": 200,
                                     "error_code": None}, "metadata": {"service": "eks"}})
    return {"content": [{"type": "text", "text": inner}], "isError": False}


def test_an_aws_status_projected_as_an_array_in_an_envelope_is_a_poll() -> None:
    """`--query update.[status,errors]` answers `["InProgress", []]`, here as JSON text in an
    MCP envelope beside `"error": null`: a status under way (an array's element that is the
    word alone) and no failure (an error key with nothing in it). Polled between sleeps of
    minutes, it is a poll; before, the word "error" made it an end and the eighth reading
    was halted."""
    describe = {"cli_command": "aws eks describe-update --name prod --nodegroup-name ng --update-id 4d98 "
                               "--query update.[status,errors]"}
    pairs: list[tuple[str, Any, Any]] = []
    for _ in range(10):
        pairs += [("sleep_seconds", {"seconds": 240}, "slept 240s"), ("call_aws", describe, aws_answer("InProgress"))]
    assert criticals(stamped(pairs)) == []


def plan(tenant: str, answer: str = "No changes. Your infrastructure matches the configuration.") -> tuple[str, Any, Any]:
    return ("shell", {"command": ["bash", "-lc", f"terraform workspace select {tenant} >/dev/null && terraform plan "
                                  f"-detailed-exitcode -var-file=tenants/{tenant}.tfvars"]},
            f"Exit code: 0\nWall time: {len(tenant)}.2 seconds\nOutput:\n{answer}\nexit=0")


def test_a_sweep_of_terraform_workspaces_without_changes_is_no_stall() -> None:
    """Each tenant's plan is that tenant's answer (its workspace and variables file name the
    place): fifteen "No changes." are fifteen answers."""
    tenants = ["acme", "aperture", "bluefin", "contoso", "cyberdyne", "globex", "hooli", "initech",
               "massive", "northwind", "piper", "soylent", "stark", "umbrella", "wonka"]
    assert criticals(stamped([plan(t) for t in tenants])) == []


def test_one_terraform_workspace_planned_again_and_again_is_a_stall() -> None:
    assert criticals(stamped([plan("acme", "Error: state lock held by another run")] * 2
                             + [plan("acme")] * 12))


def dig(resolver: str) -> tuple[str, Any, Any]:
    return ("dig", {"name": "status.acme.io", "record_type": "CNAME", "nameserver": resolver},
            f"; <<>> DiG 9.18.28 <<>> @{resolver} status.acme.io CNAME\n;; ->>HEADER<<- opcode: QUERY, "
            "status: NOERROR, id: 47934\n;; ANSWER SECTION:\nstatus.acme.io. 300 IN CNAME old-lb.acme.io.\n")


def test_three_resolvers_dug_again_after_each_sleep_are_a_poll() -> None:
    """A DNS change propagating: the same three resolvers asked after each minute's sleep.
    DNS's own rcode ``NOERROR`` says no error; read as one, every answer was an end and
    the third lap was halted as a cycle."""
    pairs: list[tuple[str, Any, Any]] = []
    for _ in range(5):
        pairs += [("sleep", {"seconds": 60}, "Slept for 60 seconds."), dig("8.8.8.8"), dig("1.1.1.1"), dig("9.9.9.9")]
    assert criticals(stamped(pairs)) == []


def batch_format(sheet_id: int) -> tuple[str, Any, Any]:
    return ("sheets_batch_update",
            {"spreadsheet_id": "10Qh8B", "requests": [{"repeatCell": {"range": {"sheetId": sheet_id}}}]},
            {"spreadsheetId": "10Qh8B", "replies": [{}, {}, {}]})


def test_the_same_format_applied_to_twelve_tabs_is_no_stall() -> None:
    """`sheets_batch_update` is a write (a verb done in bulk), and its answer only
    acknowledges it: twelve tabs formatted are twelve writes, not twelve answers already
    held."""
    assert criticals(stamped([batch_format(1000 + n) for n in range(12)])) == []


def snowflake_error(query_id: str, column: str, query: str) -> str:
    return (f"Error: (snowflake.connector.errors.ProgrammingError) 000904 (42000): {query_id}: SQL compilation "
            f"error: error line 1 at position 168\ninvalid identifier 'A.{column.upper()}'\n[SQL: {query}]")


def test_a_failure_told_as_text_reworded_again_and_again_is_a_stall() -> None:
    """LangChain's SQL tool answers a failed query with its error as text: "Error: ...", a
    new query id each time, the query echoed back. Read without the id and the echo (and
    Snowflake's quoted identifier masked as any quoted term near an answer's start), a
    column that does not exist reworded a dozen times is one answer; before, each was new.
    (An error that names the column unquoted, SQLite's "no such column: a.churn_flag",
    stays a new answer for each name.)"""
    pairs: list[tuple[str, Any, Any]] = [("sql_db_list_tables", {"tool_input": ""}, "accounts, subscriptions")]
    for n, column in enumerate(["churn_flag", "is_churn_risk", "churn_risk", "churn_risk_flag", "risk_flag",
                                "is_at_risk", "churn_indicator", "flagged_churn", "at_risk", "churn_status",
                                "risk_level", "churnrisk"]):
        query = f"SELECT COUNT(*) FROM accounts a WHERE a.{column} = TRUE"
        pairs.append(("sql_db_query", {"query": query},
                      snowflake_error(f"01be{n:04x}-0f52-7fb4-0000-486a7a881d05", column, query)))
    assert "result-stall" in criticals(stamped(pairs))


def test_a_query_fixed_step_by_step_after_told_failures_is_work() -> None:
    """The healthy side: each told failure answered by a fix that changes what fails, then
    rows: no stall."""
    pairs: list[tuple[str, Any, Any]] = []
    errors = ["invalid identifier 'A.CHURN_FLAG'", "Division by zero", "SQL compilation error: syntax error line 3",
              "Numeric value 'n/a' is not recognized"]
    for n, error in enumerate(errors):
        pairs.append(("sql_db_query", {"query": f"SELECT {n}"}, f"Error: 100051 (22012): 01be{n:04x}-00c1-bcb0-0000-bb8fd1d0c9c7: {error}"))
        pairs.append(("sql_db_schema", {"table_names": f"t{n}"}, f"CREATE TABLE t{n} (id INT, c{n} TEXT)"))
    pairs.append(("sql_db_query", {"query": "SELECT 5"}, "[(0.42,)]"))
    assert criticals(stamped(pairs)) == []


def test_pages_of_a_log_whose_lines_open_with_error_are_each_their_own_answer() -> None:
    """Python's default log format opens a line with ``ERROR:``: a page of such a log is a
    page, its numbers its own; fourteen pages read in turn are fourteen answers."""
    def page(n: int) -> str:
        return "\n".join(f"ERROR:payments.worker:Order {180000 + n * 20 + i} charge failed: card declined"
                         for i in range(20)) + "\n"
    pairs = [("Bash", {"command": f"sed -n '{1 + 20 * n},{20 * (n + 1)}p' /var/log/payments/worker.log"}, page(n))
             for n in range(14)]
    assert criticals(stamped(pairs)) == []


def test_one_variables_file_name_in_many_stacks_is_many_places() -> None:
    """`plan -var-file=prod.tfvars` run in each stack's directory (`workdir`): the file's
    name is the same, the place is the directory too."""
    pairs = [("shell", {"command": ["bash", "-lc", "terraform plan -detailed-exitcode -var-file=prod.tfvars"],
                        "workdir": f"/repo/infra/stack-{n}"},
              "Exit code: 0\nOutput:\nNo changes. Your infrastructure matches the configuration.\n")
             for n in range(14)]
    assert criticals(stamped(pairs)) == []


def test_data_files_described_one_by_one_are_each_their_own_answer() -> None:
    """A query names the file it reads bare (`FROM 'events_2025-06-02.parquet'`): forty-eight
    daily files of one schema are forty-eight answers, and the same file described again
    and again is one."""
    def describe(day: int) -> tuple[str, Any, Any]:
        return ("bash", {"command": f"cd /data/events && duckdb -list -c \"DESCRIBE SELECT * FROM 'events_2025-06-{day:02d}.parquet'\""},
                "<returncode>0</returncode>\n<output>\nevent_id|VARCHAR\nuser_id|BIGINT\nrevenue|DOUBLE\n</output>")
    assert criticals(stamped([describe(day) for day in range(1, 29)])) == []
    assert criticals(stamped([describe(3)] * 2 + [("bash", {"command": "ls"}, "a b")] + [describe(3)] * 12))


def shipment(status: str) -> dict[str, Any]:
    return {"proNumber": "0481-40231", "status": status, "lastScan": "Denver, CO",
            "pod": {"available": False, "howToObtain": "request via request_pod"}}


def waited_polls(statuses: list[str], reading: Any = shipment) -> list[Any]:
    """A wait tool of ten minutes, then the same shipment read again, once per status."""
    c = Calls()
    trace: list[Any] = []
    ts = 1_760_000_000.0
    for status in statuses:
        for tool, args, result in (("wait", {"minutes": 10}, {"waitedSeconds": 600}),
                                   ("check_shipment", {"carrier": "Estes", "proNumber": "0481-40231"},
                                    reading(status))):
            call, answer = c.pair(tool, args, result)
            ts += 600 if tool == "check_shipment" else 3
            trace += [structs.replace(call, ts=ts), structs.replace(answer, ts=ts + 1)]
    return trace


def test_a_delivered_shipment_read_again_after_each_wait_is_a_loop() -> None:
    """A parcel said ``Delivered`` is over: read again every ten minutes for a proof of
    delivery that only a request would bring, it is the same answer every time. Before,
    "Delivered" was no word of an end, so each reading after a wait was a poll's."""
    assert criticals(waited_polls(["Delivered"] * 16))


def test_a_delivered_shipment_with_its_scans_read_again_after_each_wait_is_a_loop() -> None:
    """The status one level down, beside a history of scans that says "In Transit": the
    shipment's own status decides."""
    def nested(status: str) -> dict[str, Any]:
        return {"shipment": {"status": status, "pod": {"available": False},
                             "history": [{"status": "In Transit"}, {"status": "Out for delivery"},
                                         {"status": status}]}}
    assert criticals(waited_polls(["Delivered"] * 16, nested))


@pytest.mark.parametrize("status", ["In Transit", "Out for delivery", "Undelivered - retry scheduled"])
def test_a_shipment_still_on_its_way_read_after_each_wait_is_a_poll(status: str) -> None:
    assert criticals(waited_polls([status] * 16)) == []


@pytest.mark.parametrize("answer", [
    {"status": "In Transit", "eta": "Scheduled to be delivered Fri, Nov 28 by 8:00 PM"},
    {"status": "pending", "detail": "Not delivered yet; next attempt in 5 min"},
    "Webhook delivery wd_9\nStatus: pending\nDelivered: no\nAttempts: 2",
    {"status": "queued", "message": "Queued. The message will be delivered shortly."},
    {"conversation": "c-81", "messages": [{"from": "agent", "text": "Could you confirm the address?",
                                           "status": "delivered"}]},
])
def test_delivered_said_of_what_is_awaited_is_no_end(answer: Any) -> None:
    """Only the answer's own status ``Delivered`` is an end: a delivery promised, not yet
    made, or a message delivered while its reply is awaited, read after each wait, is a poll."""
    assert criticals(waited_polls(["x"] * 16, lambda _: answer)) == []


def test_a_background_process_repeating_an_error_is_no_work_going_on() -> None:
    """BashOutput says the process still runs, but what it printed since the last read is
    the same failure again ("Connection refused ... Retrying in 5s"): read between sleeps
    for a quarter of an hour, that is a loop, whatever the status says."""
    c = Calls()
    trace: list[Any] = []
    trace += c.pair("Bash", {"command": "uv run python worker.py", "run_in_background": True},
                    "Command running in background with ID: bash_1")
    for n in range(16):
        trace += c.pair("Bash", {"command": "sleep 30"}, "")
        trace += c.pair("BashOutput", {"bash_id": "bash_1"},
                        "<status>running</status>\n\n<stdout>\nERROR: could not connect to redis:6379: Connection "
                        f"refused\nRetrying in 5s...\n</stdout>\n\n<timestamp>2025-11-01T15:{22 + n // 2:02d}:{(30 * n) % 60:02d}.093Z</timestamp>")
    assert criticals(trace)


def maven_failure(seconds: float, at: str) -> str:
    return ("[ERROR] /repo/src/test/java/FindValuesTest.java:[5,29] package org.junit.jupiter.api does not exist\n"
            "[INFO] ------------------------------------------------------------------------\n[INFO] BUILD FAILURE\n"
            "[INFO] ------------------------------------------------------------------------\n"
            f"[INFO] Total time:  {seconds:.3f} s\n[INFO] Finished at: 2025-04-11T08:{at}Z\n"
            "[ERROR] Failed to execute goal maven-compiler-plugin:3.11.0:testCompile (default-testCompile)")


def test_a_failing_build_rerun_after_each_rewrite_is_futile() -> None:
    """Maven says how long a build took and when it ended: the same test-compile failure
    after every rewrite of the method (three versions in turn) is the same answer, not a
    new one each time."""
    c = Calls()
    trace: list[Any] = []
    versions = ["for (Map.Entry<String, JsonNode> e : _children.entrySet()) {", "for (String k : _children.keySet()) {",
                "Iterator<Map.Entry<String, JsonNode>> it = _children.entrySet().iterator();"]
    for n in range(10):
        trace += c.pair("edit", {"start_line": 389, "end_line": 399, "replacement_text": versions[n % 3]},
                        f"[File: /repo/src/main/java/ObjectNode.java (1143 lines total)]\n389:        {versions[n % 3]}")
        trace += c.pair("bash", {"command": "mvn -o test -Dtest=FindValuesTest 2>&1 | tail -n 40"},
                        maven_failure(20 + 7.3 * n, f"{54 + n // 2:02d}:{(13 * n) % 60:02d}"))
    assert "result-stall" in criticals(trace)


def test_a_sweep_of_passing_test_classes_keeps_each_builds_time() -> None:
    """Fifteen test classes run one by one, each answered by the same quiet Gradle build
    but for its time: a sweep, not one answer fifteen times (a build that succeeded keeps
    its time)."""
    c = Calls()
    trace: list[Any] = []
    for n in range(15):
        trace += c.pair("bash", {"command": f"./gradlew :test --tests org.mockitousage.Case{n}Test --offline"},
                        "> Task :compileJava\n> Task :compileTestJava\n> Task :test\n\n"
                        f"BUILD SUCCESSFUL in {30 + 7 * n}s\n4 actionable tasks: 2 executed, 2 up-to-date")
    assert criticals(trace) == []


def test_network_probes_inside_containers_are_task_work() -> None:
    """`docker exec web ping db`, `nslookup` and package installs inside the task's
    containers are the task's debugging, not a detour into setting up the machine."""
    c = Calls()
    trace: list[Any] = []
    trace += c.pair("Bash", {"command": "cat docker-compose.yml"}, "services:\n  web:\n    networks: [front]\n  db:\n    networks: [back]")
    trace += c.pair("Bash", {"command": "docker compose ps"}, "NAME  STATUS\nweb-1  Up 2 minutes\ndb-1  Up 2 minutes")
    failing = [("ping -c1 db", "ping: command not found"), ("nslookup db", "nslookup: command not found"),
               ("apt-get update", "E: List directory /var/lib/apt/lists/partial is missing. (13: Permission denied)")]
    for probe, error in failing:
        trace += c.pair("Bash", {"command": f"docker exec web {probe}"}, error=error)
    for probe, answer in [("getent hosts db", ""), ("cat /etc/resolv.conf", "nameserver 127.0.0.11")]:
        trace += c.pair("Bash", {"command": f"docker exec web {probe}"}, answer)
    trace += c.pair("Bash", {"command": "docker exec web curl -sS db:5432"}, error="curl: (6) Could not resolve host: db")
    for probe in ["apt-get install -y iputils-ping", "apt-get install -y dnsutils"]:
        trace += c.pair("Bash", {"command": f"docker exec -u root web {probe}"}, "Setting up iputils-ping ...")
    trace += c.pair("Bash", {"command": "docker network inspect app_front"}, '[{"Name": "app_front", "Containers": {"web": {}}}]')
    assert criticals(trace) == []


def test_a_dev_server_started_again_on_the_next_port_is_the_same_page() -> None:
    """`npm run dev &` again without stopping the last one: Next.js comes up on the next
    port each lap, and the same page answers the same 500. Another port is no other page."""
    c = Calls()
    trace: list[Any] = []
    for lap in range(6):
        port = 3000 + lap
        trace += c.pair("Bash", {"command": "npm run dev > dev.log 2>&1 &"}, "")
        trace += c.pair("Bash", {"command": "sleep 3 && tail -3 dev.log"},
                        f"  ▲ Next.js 14.2.3\n  - Local: http://localhost:{port}\n ✓ Ready in 2.1s")
        trace += c.pair("Bash", {"command": "curl -s -o /dev/null -w '%{http_code}' localhost:3000/api/health"}, "500")
    assert any(s in criticals(trace) for s in ("alternating-tool-cycle", "result-stall", "long-loop"))


def _mcp_text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


def _wrapped(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Cline's ``use_mcp_tool`` arguments: the server's tool and its arguments as JSON text."""
    return {"server_name": "crm", "tool_name": tool, "arguments": json.dumps(arguments)}


def test_a_call_through_an_mcp_wrapper_is_read_as_the_tool_it_carries() -> None:
    calls = Calls()
    trace: list[Any] = []
    # twenty owners reassigned in batches, every batch acknowledged alike, between reads of
    # other tools through the same wrapper
    trace += calls.pair("use_mcp_tool", _wrapped("crm_query_records", {"object": "Account"}),
                        _mcp_text("Query returned 200 records: ..."))
    for batch in range(20):
        records = [{"Id": f"001{batch:03d}{i:02d}", "OwnerId": "005A"} for i in range(25)]
        trace += calls.pair(
            "use_mcp_tool",
            _wrapped("crm_dml_records", {"operation": "update", "objectName": "Account", "records": records}),
            _mcp_text("UPDATE operation completed.\nProcessed 25 records:\n- Successful: 25\n- Failed: 0\n"),
        )
    assert criticals(trace) == []
    # the wrapped tool, not the wrapper, is what the alerts name
    stuck = Calls()
    loop: list[Any] = []
    for _ in range(6):
        loop += stuck.pair("use_mcp_tool", _wrapped("crm_get_case", {"case": "500X1"}),
                           _mcp_text('{"case": "500X1", "status": "Closed"}'))
    found = [a for a in alerts(loop) if a.severity == "critical"]
    assert found and found[0].signal == "repeated-tool-call" and "crm_get_case" in found[0].reason


def test_fifteen_different_tools_through_one_wrapper_are_no_run_of_one_name() -> None:
    calls = Calls()
    trace: list[Any] = []
    for i in range(16):
        trace += calls.pair("use_mcp_tool", _wrapped(f"jira_tool_{'abcdefghijklmnop'[i]}", {"issue": f"OPS-{i}"}),
                            _mcp_text(f"Issue OPS-{i}: fields updated {i}"))
    assert "repeated-tool-name" not in {a.signal for a in alerts(trace)}
    # without the wrapper's arguments naming a tool, the wrapper is a tool like any other
    plain = Calls()
    bare: list[Any] = []
    for i in range(16):
        bare += plain.pair("use_mcp_tool", {"server_name": "jira", "note": f"n{i}"}, _mcp_text(f"ok {i}"))
    assert "repeated-tool-name" in {a.signal for a in alerts(bare)}


def test_an_operation_named_as_a_write_makes_the_call_a_write() -> None:
    acknowledged = "UPDATE operation completed. Processed 1 records: Successful: 1"
    calls = Calls()
    sweep: list[Any] = []
    for i in range(14):
        sweep += calls.pair("salesforce_dml_records",
                            {"operation": "update", "records": [{"Id": f"006{i:04d}", "NextStep": f"step {i}"}]},
                            acknowledged)
    assert criticals(sweep) == []
    # the same acknowledgements for a tool told to query are answers already held
    reads = Calls()
    stale: list[Any] = []
    for i in range(14):
        stale += reads.pair("salesforce_dml_records",
                            {"operation": "query", "records": [{"Id": f"006{i:04d}"}]}, acknowledged)
    assert "result-stall" in criticals(stale)


@pytest.mark.parametrize(
    ("args", "wrapped"),
    [
        ({"server_name": "s", "tool_name": "get_x", "arguments": '{"id": 1}'}, ("mcp__s__get_x", {"id": 1})),
        ('{"server_name": "s", "tool_name": "get_x", "arguments": {"id": 1}}', ("mcp__s__get_x", {"id": 1})),
        ({"server_name": "github.com/acme/mcp-crm", "tool_name": "q"}, ("mcp__github.com_acme_mcp-crm__q", {})),
        ({"server_name": "a b\n", "tool_name": "q"}, ("mcp__q", {})),  # no plain name: left out
        ({"name": "list_y"}, ("mcp__list_y", {})),
        ({"tool_name": "t" * 101, "arguments": "{}"}, None),  # no tool's name
        ({"tool_name": "", "arguments": "{}"}, None),
        ({"tool_name": 7, "arguments": "{}"}, None),
        ("not json", None),
        (["tool_name", "x"], None),
    ],
)
def test_wrapped_call_reads_the_tool_and_arguments_a_wrapper_carries(args: Any, wrapped: Any) -> None:
    assert wrapped_call(args) == wrapped


def test_a_computer_use_scroll_answered_by_the_next_part_of_a_page_is_paging() -> None:
    scroll = {"action": "scroll", "coordinate": [760, 480], "scroll_direction": "down", "scroll_amount": 5}
    calls = Calls()
    paging: list[Any] = calls.pair("computer", {"action": "screenshot"}, "Chrome Settings: You and Google.")
    for section in ("Autofill", "Privacy", "Security", "Performance", "Appearance", "Search engine",
                    "Default browser", "On startup"):
        paging += calls.pair("computer", scroll, f"Settings scrolled: '{section}' section, its options listed.")
    assert criticals(paging) == []
    # scrolled at the bottom of the page, the same screen again and again
    stuck = Calls()
    bottom: list[Any] = stuck.pair("computer", {"action": "screenshot"}, "Chrome Settings: You and Google.")
    for _ in range(8):
        bottom += stuck.pair("computer", scroll, "Settings scrolled to bottom: 'On startup'. No more content below.")
    assert "repeated-tool-call" in criticals(bottom)


@pytest.mark.parametrize(
    ("tool", "write"),
    [("HassTurnOn", True), ("HassListAddItem", True), ("HassClimateSetTemperature", True),
     ("HassListCompleteItem", True), ("HassGetState", False), ("HassClimateGetTemperature", False),
     ("HassNevermind", False), ("hassio_status", False)],
)
def test_home_assistant_intents_are_commands_but_those_that_get(tool: str, write: bool) -> None:
    assert names_write(tool) is write


@pytest.mark.parametrize(
    ("tool", "write"),
    [("mcp__gmail__send_email", True), ("mcp__github__create_issue", True),
     ("mcp__github__merge_pull_request", True), ("mcp__filesystem__write_file", True),
     ("mcp__netmiko__send_config_set", True), ("mcp__slack__slack_post_message", True),
     ("mcp__jira__get_issue", False), ("mcp__playwright__browser_type", False),
     ("mcp__microsoft-todo__add_task", True),  # a server's name is not the tool's
     ("mcp__netmiko__send_command", False), ("netmiko_send_command", False),
     ("mcp__postman__send_request", False), ("mcp__bigquery__submit_query", False),
     ("send_friend_request", True), ("submit_order", True),
     ("tmux_send_keys", True), ("send_message", True),
     # the acts of operations desks
     ("bms_ack_alarm", True), ("acknowledge_alert", True), ("escalate_ticket", True),
     ("dispatch_vendor", True), ("delegate_task", True), ("rebook_passenger", True),
     ("request_documents", True), ("request_approval", True), ("reconcile_transactions", True),
     ("fleet_request_refresh", True), ("terminate_instances", True), ("ec2_terminate_instances", True),
     ("terminate", False),
     # a request as a noun, or a fetch: what a look reads
     ("request_status", False), ("get_request", False), ("pull_request_details", False),
     ("pull_request_comments", False), ("kyc_request_documents", False), ("request_url", False),
     ("feature_flag_evaluate", False), ("label_studio_projects", False),
     ("forward_geocode_tool", False), ("port_forward", False), ("terminate", False)],
)
def test_an_mcp_tool_is_named_by_its_own_name_and_a_command_sent_is_no_message(
    tool: str, write: bool
) -> None:
    """An MCP server's name is no word of its tools' names (``mcp__gmail__send_email``
    sends mail); a command, an HTTP request or a query sent is a call whose effect its
    name does not say, no write by name (a router's ``send_command`` runs ``show bgp
    summary``); keys typed into a terminal are typing, a write."""
    assert names_write(tool) is write


@pytest.mark.parametrize(
    ("tool", "write"),
    [("spreadsheets_values_append", True), ("spreadsheets_values_update", True),
     ("users_messages_send", True), ("calendar_events_delete", True),
     ("spreadsheets_values_get", False), ("users_messages_list", False),
     ("append_rows", True), ("adjust_inventory", True),
     ("spreadsheets_values_batchUpdate", True),
     # a namespace of two words, then the verb and its object
     ("google_calendar_create_event", True), ("aws_dynamodb_put_item", True),
     ("google_sheets_append_row", True), ("cloudflare_zone_purge_cache", True),
     ("cloudformation_stack_update_events", False), ("github_issue_create_time", False),
     ("git_branch_merge_base", False), ("car_battery_charge_level", False),
     # a look or a verb as often a noun keeps its reading
     ("order_status_update", False), ("get_values_update", False), ("chess_best_move", False),
     # a status, a progress or a list after the verb; a noun's verb; a call sent
     ("device_firmware_update_status", False), ("aws_stack_update_status", False),
     ("ecs_service_deploy_status", False), ("users_settings_sendAs_list", False),
     ("google_maps_place_photos", False), ("stock_price_change", False),
     ("sql_result_set", False), ("router_command_send", False), ("trigger_cache_purge", False),
     # a path of three words, the verb last (Google Play's edits.tracks.update)
     ("play_edits_tracks_update", True), ("androidpublisher_edits_tracks_update", True),
     ("repo_branch_protection_update", True), ("play_edits_tracks_list", False),
     ("order_status_history_update", False), ("get_user_status_update", False),
     # the state of a run read, not a state set or made
     ("content_deploy_status", False), ("deploy_status", False), ("db_migrate_progress", False),
     ("restart_state", False), ("jira_update_status", True), ("update_status", True),
     ("create_status", True), ("ticket_set_status", True)],
)
def test_a_method_named_after_its_resource_path_is_named_by_its_verb(tool: str, write: bool) -> None:
    """Google's APIs name a method after the resource it acts on (``spreadsheets.values.append``,
    ``users.messages.send``): the verb after a path of two words is the method's."""
    assert names_write(tool) is write


def stuck_export(append_tool: str) -> list[Any]:
    """A listing re-asked with the first page's cursor: the same page every time, its rows
    appended to a sheet again and again, each time at the next free rows."""
    c = Calls()
    page = {"object": "list", "has_more": True,
            "data": [{"id": f"ch_{n}", "amount": 100 * n} for n in range(1, 6)]}
    trace: list[Any] = []
    for lap in range(14):
        trace += c.pair("list_charges", {"limit": 100, "starting_after": "ch_0"}, page)
        first = 2 + 100 * lap
        trace += c.pair(append_tool, {"range": "Charges!A:F", "values": [["ch_1", 100]]},
                        {"updates": {"updatedRange": f"Charges!A{first}:F{first + 99}",
                                     "updatedRows": 100}})
    return trace


def test_the_same_page_appended_again_and_again_is_halted() -> None:
    # Named by the resource path first, the append was read as a look, not an act: the
    # two calls answered alike again and again were a cycle of reads whose answers move.
    assert criticals(stuck_export("spreadsheets_values_append"))


def test_an_update_polled_by_its_status_tool_is_a_poll() -> None:
    # `device_firmware_update_status` reads an update's status: no write, so its answer
    # under way, asked after a pause, is a poll's.
    c = Calls()
    trace: list[Any] = [TurnStart(session="h")]
    clock = 1_000.0
    for _ in range(10):
        call, cid = c.call("device_firmware_update_status", {"device": "ap-7"})
        call.ts = clock
        trace += [call, ToolResult(session="h", tool=call.tool, call_id=cid, ts=clock + 1,
                                   result='{"update_id": "fw-7", "status": "in_progress"}')]
        clock += 30.0
    assert criticals(trace) == []


def test_pages_exported_one_after_another_are_work() -> None:
    c = Calls()
    trace: list[Any] = []
    for n in range(14):
        page = {"object": "list", "has_more": n < 13,
                "data": [{"id": f"ch_{n}_{k}", "amount": k} for k in range(5)]}
        trace += c.pair("list_charges", {"limit": 100, "starting_after": f"ch_{n - 1}_4"}, page)
        first = 2 + 100 * n
        trace += c.pair("spreadsheets_values_append",
                        {"range": "Charges!A:F", "values": [[f"ch_{n}_0", 0]]},
                        {"updates": {"updatedRange": f"Charges!A{first}:F{first + 99}",
                                     "updatedRows": 100}})
    assert criticals(trace) == []


def test_items_added_to_a_list_one_by_one_are_writes_not_answers_already_held() -> None:
    done = {"speech": {}, "response_type": "action_done",
            "data": {"targets": [], "success": [{"name": "Shopping List", "type": "entity",
                                                 "id": "todo.shopping_list"}], "failed": []}}
    calls = Calls()
    trace: list[Any] = []
    for item in ("eggs", "flour", "butter", "caster sugar", "vanilla", "lemons", "icing sugar",
                 "cat food", "bin bags", "oat milk", "rice", "tea"):
        trace += calls.pair("HassListAddItem", {"item": item, "name": "Shopping List"}, done)
    assert criticals(trace) == []


def test_the_same_tool_on_several_servers_is_several_tools() -> None:
    """One health check put to six clusters' servers is six questions, not one asked six times."""
    calls = Calls()
    trace: list[Any] = []
    for cluster in ("eu-1", "eu-2", "us-1", "us-2", "ap-1", "ap-2"):
        trace += calls.pair("use_mcp_tool", {"server_name": f"k8s-{cluster}", "tool_name": "get_cluster_health",
                                             "arguments": "{}"}, _mcp_text('{"status": "green", "nodes_ready": true}'))
    assert criticals(trace) == []


def test_wrapped_calls_without_ids_are_answered_in_order() -> None:
    trace: list[Any] = []
    for batch in range(20):
        records = [{"Id": f"001{batch:03d}{i:02d}", "OwnerId": "005A"} for i in range(25)]
        trace += [
            ToolCall(session="h", tool="use_mcp_tool",
                     args=_wrapped("crm_dml_records", {"operation": "update", "records": records})),
            ToolResult(session="h", tool="use_mcp_tool",
                       result=_mcp_text("UPDATE operation completed.\nProcessed 25 records:\n- Successful: 25\n")),
        ]
    assert criticals(trace) == []


def test_an_operation_is_no_write_for_a_search_a_look_or_a_dry_run() -> None:
    assert operation_facts("search_traces", {"operation": "UpdateCart"}) is None
    assert operation_facts("get_audit_events", {"operation": "DeleteBucket"}) is None
    assert operation_facts("crm_records", {"operation": "delete", "dry_run": True}) is None
    assert operation_facts("crm_records", {"operation": "set_difference"}) is None
    assert operation_facts("crm_records", {"operation": "merge"}) is None
    bulk = operation_facts("crm_records", {"operation": "bulk_update"})
    assert bulk is not None and bulk.write
    # the call and its preview read the arguments by one rule
    looked = CallFacts("records", False, False, read=True)
    assert argument_facts("crm_records", {"action": "records", "operation": "update"}, looked).write
    searched = CallFacts("", False, True)
    assert argument_facts("search_traces", {"operation": "update"}, searched) is searched


def test_a_request_told_to_change_something_is_a_write() -> None:
    created = request_facts("stripe_api", {"method": "POST", "path": "/v1/webhook_endpoints"})
    assert created is not None and created.write
    for method in ("put", "PATCH", "Delete"):
        made = request_facts("http_request", {"method": method, "url": "https://api.example.com/v2/items/7"})
        assert made is not None and made.write
    mutation = request_facts("shopify_graphql", {"query": "  mutation($in: ProductInput!) { productCreate }"})
    assert mutation is not None and mutation.write
    # a look: a GET, a query, a search or a token asked by POST, no path at all, a dry run
    assert request_facts("stripe_api", {"method": "GET", "path": "/v1/webhook_endpoints"}) is None
    assert request_facts("shopify_graphql", {"query": "{ productVariants(first: 1) { nodes { id } } }"}) is None
    assert request_facts("es", {"method": "POST", "path": "/logs-*/_search"}) is None
    assert request_facts("gh", {"method": "POST", "url": "https://api.github.com/graphql"}) is None
    assert request_facts("idp", {"method": "POST", "url": "https://idp.example.com/oauth/token"}) is None
    assert request_facts("x", {"method": "POST"}) is None
    assert request_facts("x", {"method": "DELETE", "path": "/v1/items/7", "dry_run": True}) is None
    # a GraphQL mutation by its shape, not the word: a query about a mutation reads
    assert request_facts("clinvar", {"query": "mutation BRCA1 c.68_69delAG"}) is None
    assert request_facts("clinvar", {"query": "mutations in TP53"}) is None
    commented = request_facts("gql", {"query": "# make it\nmutation CreateX { x { id } }"})
    assert commented is not None and commented.write
    # the path's words, not the host's; a change named beside a look's; any DELETE
    for method, target in (("POST", "https://acme.us.auth0.com/api/v2/users"),
                           ("POST", "https://api.render.com/v1/services"),
                           ("POST", "/orders/_delete_by_query"),
                           ("DELETE", "/1/indexes/products_search")):
        made = request_facts("http_request", {"method": method, "url": target})
        assert made is not None and made.write, target
    # the call reads its arguments so, unless its name already says what it does
    searched = CallFacts("", False, True)
    assert argument_facts("search_api", {"method": "POST", "path": "/v1/items"}, searched) is searched


def test_a_webhook_created_again_at_every_lap_is_a_loop() -> None:
    """Create, then list with the wrong key (nothing listed), create again: a new id each
    time. Read as a look, the create's new ids moved every lap and it ran for ever."""
    calls = Calls()
    trace: list[Any] = []
    for i in range(8):
        trace += calls.pair("stripe_api", {"method": "POST", "path": "/v1/webhook_endpoints",
                                           "params": {"url": "https://hooks.example.com/payouts"}},
                            {"id": f"we_{1000 + i}", "object": "webhook_endpoint", "status": "enabled"})
        trace += calls.pair("stripe_api", {"method": "GET", "path": "/v1/webhook_endpoints", "api_key": "test"},
                            {"object": "list", "data": [], "has_more": False})
    assert "alternating-tool-cycle" in criticals(trace)
    # a page of items each created once, read back after each, is work
    work = Calls()
    sweep: list[Any] = []
    for i in range(8):
        sweep += work.pair("stripe_api", {"method": "POST", "path": "/v1/products", "params": {"name": f"plan {i}"}},
                           {"id": f"prod_{i}", "object": "product"})
        sweep += work.pair("stripe_api", {"method": "GET", "path": f"/v1/products/prod_{i}"},
                           {"id": f"prod_{i}", "object": "product", "active": True})
    assert criticals(sweep) == []


_PROMPT = "root@e84bc8ce87e6:/app/netmon# "


def _screen(*lines: str) -> str:
    return "Current Terminal Screen:\n" + "\n".join(lines)


def test_a_terminal_screen_is_read_as_what_its_last_command_printed() -> None:
    failed = ["cc -O2 -c src/tls.c -o build/tls.o", "src/tls.c:4:10: fatal error: openssl/ssl.h: No such file",
              "make: *** [Makefile:14: build/tls.o] Error 1"]
    screen = _screen("E: Unable to locate package libssl-dev", _PROMPT + "make", *failed, _PROMPT)
    assert terminal_screen(screen) == ("\n".join(failed), None)
    # a program's own screen (an editor, a pager) has no prompt: read whole
    assert terminal_screen("New Terminal Output:\n~\n~\n-- INSERT --") == ("~\n~\n-- INSERT --", None)
    assert terminal_screen("no screen") is None


def test_terminal_keystrokes_watching_a_build_are_no_loop_and_a_retyped_failure_is() -> None:
    calls = Calls()
    build: list[Any] = calls.pair("send_keys", {"keystrokes": "cmake --build . -j8\n", "duration_sec": 15.0},
                                  _screen(_PROMPT + "cmake --build . -j8", "[  0%] Building C object zlib/adler32.c.o"))
    for percent in range(5, 100, 7):
        # nothing typed: wait, then look at the screen again, the build further on each time
        build += calls.pair("send_keys", {"keystrokes": "", "duration_sec": 30.0},
                            _screen(_PROMPT + "cmake --build . -j8", f"[{percent:3d}%] Building CXX object core/m{percent}.cpp.o"))
    assert criticals(build) == []
    # the same failing make typed again and again: each screen shows the last attempt
    # scrolling above the new one, and the new one answers as before
    failed = ["src/tls.c:4:10: fatal error: openssl/ssl.h: No such file", "make: *** Error 1"]
    retyped = Calls()
    loop: list[Any] = []
    above = "apt-get update"
    for attempt in range(14):
        command = ("make", "make -j1", "make clean && make", "make V=1")[attempt % 4]
        loop += retyped.pair("send_keys", {"keystrokes": command + "\n", "duration_sec": 1.2},
                             _screen(*failed, _PROMPT + above, *failed[:1], _PROMPT + command, *failed, _PROMPT))
        above = command
    assert "result-stall" in criticals(loop)


def test_keys_that_move_the_view_are_paging_not_a_write_re_sent() -> None:
    """browser-use's `send_keys` sends `keys` to a page (a named tool, not a terminal); a
    key that moves the view, answered by the next part of the page, is paging."""
    calls = Calls()
    trace: list[Any] = []
    for i in range(12):
        trace += calls.pair("send_keys", {"keys": "PageDown"}, f"Scrolled: rows {i * 20}-{i * 20 + 19} of 400 shown")
    assert criticals(trace) == []
    viewer = Calls()
    pages: list[Any] = []
    for i in range(12):
        pages += viewer.pair("computer", {"action": "key", "text": "Page_Down"}, f"Viewer: page {i + 2} of 40")
    assert criticals(pages) == []
    # at the end of the page, the same screen again and again
    stuck = Calls()
    end: list[Any] = []
    for _ in range(8):
        end += stuck.pair("send_keys", {"keys": "PageDown"}, "Scrolled: rows 380-399 of 400 shown")
    assert "repeated-tool-call" in criticals(end)
    # a key that types or submits is still an act re-sent
    enter = Calls()
    submitted: list[Any] = []
    for i in range(8):
        submitted += enter.pair("send_keys", {"keys": "Enter"}, f"Form submitted: request #{i}")
    assert "repeated-tool-call" in criticals(submitted)


def _jest(failing: int, seconds: float) -> dict[str, Any]:
    """Jest's output through an MCP shell that sends no exit code."""
    text = (f"FAIL src/utils/formatDate.test.ts\n  ✕ {failing} of 3 failed\n\n"
            f"Tests:       {failing} failed, {3 - failing} passed, 3 total\nTime:        {seconds} s\n")
    return _mcp_text(text)


def _edits_then_jest(failing: list[int]) -> list[Any]:
    """An edit of one file, then the same jest run, once per count of failing tests."""
    calls = Calls()
    trace: list[Any] = []
    for i, count in enumerate(failing):
        trace += calls.pair("developer__text_editor",
                            {"command": "str_replace", "path": "/repo/src/formatDate.ts",
                             "old_str": f"v{i}", "new_str": f"v{i + 1}"}, _mcp_text("The file has been edited."))
        trace += calls.pair("developer__shell", {"command": "npx jest src/utils/formatDate.test.ts 2>&1"},
                            _jest(count, 0.4 + i * 0.137))
    return trace


def test_a_failing_check_reported_as_output_changes_by_what_failed_not_how_long_it_took() -> None:
    assert "result-stall" in criticals(_edits_then_jest([1] * 8))
    # the same check answering with fewer failures after each edit is work converging
    assert criticals(_edits_then_jest([3, 2, 1])) == []


def test_a_failing_run_reported_as_output_again_is_the_same_answer_whenever_it_started() -> None:
    calls = Calls()
    trace: list[Any] = []
    commands = ("npm test", "npm run test", "npx vitest run", "npm test --silent")
    for i in range(12):
        output = (" ❯ src/recurring.test.ts (9 tests | 2 failed) 21ms\n"
                  " Test Files  1 failed | 3 passed (4)\n"
                  f"   Start at  10:{14 + i // 6:02d}:{(i * 7) % 60:02d}\n   Duration  1.{i}2s\n")
        trace += calls.pair("run_terminal_command", {"command": commands[i % 4]}, output)
    assert "result-stall" in criticals(trace)


def test_continue_context_items_are_read_as_their_contents() -> None:
    item = {"name": "Terminal", "description": "Terminal command output", "content": "ok\n"}
    assert context_items([item, {**item, "content": "done"}]) == ("ok\n\ndone", None)
    assert context_items([{"name": "x"}]) is None and context_items([]) is None
    assert context_items([item] * 9) is None
    calls = Calls()
    trace: list[Any] = []
    for i in range(12):
        output = ("Command timed out after 120 seconds. Output so far:\n"
                  " ❯ src/recurring.test.ts (9 tests | 2 failed) 21ms\n"
                  f"   Start at  10:14:{i * 4:02d}\n FAIL  Tests failed. Watching for file changes...")
        trace += calls.pair("builtin_run_terminal_command",
                            {"command": ("npm test", "npm run test", "npx vitest")[i % 3], "waitForCompletion": True},
                            [{**item, "content": output}])
    assert {"result-stall", "alternating-tool-cycle"} & set(criticals(trace))


def test_a_hunt_over_guessed_places_that_find_nothing_is_still_a_hunt() -> None:
    """A search's nothing is stale wherever it looked: twelve guessed repositories, each
    answered with no issues, are one hunt (a rule that made each place's nothing news was
    withdrawn: it let such hunts run on for ever)."""
    calls = Calls()
    trace: list[Any] = []
    for i in range(12):
        trace += calls.pair("search_issues", {"repo": f"acme/{word(i)}-api", "issue_number": 4242}, [])
    assert "result-stall" in criticals(trace)


def test_a_cli_sweep_over_objects_by_id_and_dry_runs_that_would_succeed_are_no_stall() -> None:
    calls = Calls()
    trace: list[Any] = []
    for i in range(10):
        command = f"aws ec2 delete-snapshot --region eu-west-1 --snapshot-id snap-0{i}c625c8f28ffc02c --dry-run"
        trace += calls.pair("run_shell_command", {"command": command}, None,
                            error="An error occurred (DryRunOperation) when calling the DeleteSnapshot operation: "
                                  "Request would have succeeded, but DryRun flag is set.")
    assert criticals(trace) == []
    # a dry run refused beside the one that would succeed is a failure, retried: halted
    mixed = Calls()
    loop: list[Any] = []
    for i in range(12):
        command = f"aws ec2 stop-instances --dry-run --instance-ids i-0{i}ab; aws ec2 terminate-instances --dry-run"
        loop += mixed.pair("run_shell_command", {"command": command}, None,
                           error="An error occurred (DryRunOperation) when calling the StopInstances operation: "
                                 "Request would have succeeded, but DryRun flag is set.\n"
                                 "An error occurred (UnauthorizedOperation) when calling the TerminateInstances "
                                 "operation: You are not authorized to perform this operation.")
    assert "result-stall" in criticals(loop)


def test_a_splash_screen_waited_through_by_openai_computer_use_is_no_loop() -> None:
    """OpenAI's computer-use actions sent as the arguments ({"type": "wait"}) were read as no
    action at all: five waits while a slow application started were five identical calls,
    halted by the blind rule."""
    calls = Calls()
    trace: list[Any] = calls.pair("computer", {"type": "double_click", "x": 62, "y": 214}, None)
    for _ in range(6):
        trace += calls.pair("computer", {"type": "wait"}, None)
    trace += calls.pair("computer", {"type": "screenshot"}, None)
    assert criticals(trace) == []


def test_the_second_reading_of_keys_operations_and_intents() -> None:
    """What a review of the rules above found, each now read as it is."""
    # an operation on a tool whose name holds a look as a thing is a write...
    assert operation_facts("sharepoint_list_items", {"operation": "update"}) is not None
    # ...an API operation name filters, whatever tool is given it
    assert operation_facts("crm_records", {"operation": "UpdateCart"}) is None
    # Enter is a key pressed; nothing typed is a wait, then a look; Codex's write_stdin
    # with `chars` left out is nothing typed
    assert not runner_facts({"keystrokes": "\n"}).waits_first
    assert runner_facts({"keystrokes": ""}).waits_first
    assert runner_facts({"session_id": 3, "yield_time_ms": 1000}).waits_first
    # OpenAI's keypress nests its keys in the action
    assert not runner_facts({"action": {"type": "keypress", "keys": ["PAGEDOWN"]}}).write
    assert runner_facts({"action": {"type": "keypress", "keys": ["ENTER"]}}).write
    # ... or sends its action object as the arguments: read the same
    assert runner_facts({"type": "wait"}).wait and not runner_facts({"type": "screenshot"}).write
    assert runner_facts({"type": "double_click", "x": 62, "y": 214}).write
    assert not runner_facts({"type": "keypress", "keys": ["PAGEDOWN"]}).write
    # a `key` argument of a tool that sends no keys is no key
    written = CallFacts("kv_set", True, False)
    assert argument_facts("kv_set", {"key": "next", "value": "c_17"}, written).write
    # Home Assistant's intents behind a server's name; not every tool of a server named so
    assert names_write("mcp__home-assistant__HassListAddItem")
    assert not names_write("mcp__hass__entity_history")
    # a hyphenated receipt is a receipt
    assert found_nothing({"X-Request-ID": "7f3a", "offers": [], "message": "No offers found"})


@pytest.mark.parametrize(("tool", "write"), [
    ("file_str_replace", True), ("replace_in_file", True), ("file_replace", True),
    ("str_length", False), ("search_and_replace_preview", False),
])
def test_a_replacement_is_a_write_whatever_words_come_before_it(tool: str, write: bool) -> None:
    """Manus' `file_str_replace`: `str` is no word of what the tool does."""
    assert names_write(tool) is write


def test_edits_of_one_memo_each_acknowledged_alike_are_writes() -> None:
    calls = Calls()
    trace: list[Any] = []
    for i in range(12):
        trace += calls.pair("file_str_replace", {"file": "/home/ubuntu/upload/board_memo.md",
                                                 "old_str": f"figure {word(i)}", "new_str": f"final {word(i)}"},
                            "Replaced 1 occurrence in /home/ubuntu/upload/board_memo.md")
    assert criticals(trace) == []


def test_the_third_reading_of_screens_runs_and_prompts() -> None:
    """What a third review found, each read as it is."""
    # a job still running beside a failed one moves by its elapsed time: a poll
    calls = Calls()
    poll: list[Any] = []
    for i in range(12):
        poll += calls.pair("bash", {"command": "sleep 60 && sacct -j 4241,4242 --format=JobID,State,Elapsed"},
                           f"4241 FAILED 00:01:12\n4242 RUNNING 00:{10 + i:02d}:04\n")
    assert criticals(poll) == []
    # bash's own prompt is a prompt
    assert terminal_screen("Current Terminal Screen:\nold\nbash-5.2# make -j4\nerr 1\nbash-5.2# ") == ("err 1", None)
    # Enter with a wait of its own is a wait, then a look; a space paging a pager is a key
    assert runner_facts({"keystrokes": "\n", "duration_sec": 60}).waits_first
    assert not runner_facts({"keystrokes": " ", "timeout_sec": 1.0}).waits_first


def test_a_click_back_to_the_listing_after_each_row_saved_is_no_check_of_the_row() -> None:
    listing = ("Current URL: https://www.pisos.example/alquiler/madrid/\nTitle: 22 pisos en alquiler\n"
               "Interactive elements:\n[0]<a>Piso 1</a>\n[1]<a>Piso 2</a>\n[2]<a>Piso 3</a>")
    calls = Calls()
    trace: list[Any] = calls.pair("browser_navigate", {"url": "https://www.pisos.example/alquiler/madrid/"}, listing)
    for i in range(1, 10):
        trace += calls.pair("browser_click", {"index": i}, f"Current URL: https://www.pisos.example/inmueble/4{i}/\n"
                                                           f"Title: Piso {i} - {1200 + i * 25} €")
        trace += calls.pair("file_write", {"file": "/home/ubuntu/listings.csv", "content": f"piso {i},{1200 + i * 25}\n",
                                           "append": True}, f"Appended {20 + i} bytes to /home/ubuntu/listings.csv")
        trace += calls.pair("browser_click", {"index": 0}, listing)
    assert criticals(trace) == []


def test_a_query_answer_with_its_columns_and_cost_but_no_row_found_nothing() -> None:
    """Defender's advanced hunting answers its columns and what the query cost beside the
    rows; with no row it found nothing, and reworded hunts for a process that never ran
    are one hunt."""
    empty = {"Schema": [{"Name": "DeviceName", "Type": "String"}], "Results": [],
             "Stats": {"ExecutionTime": 6.4, "resource_usage": {"cpu": {"user": "00:00:04.7"}}}}
    assert found_nothing(empty)
    assert found_nothing({"columns": ["TABLE_NAME"], "rows": [], "rowcount": 0})
    assert not found_nothing({**empty, "Results": [{"DeviceName": "wks-12"}]})
    # statistics that count what was found are a hit, the rows not shown
    assert not found_nothing({"stats": {"total_matches": 1234}, "results": []})
    assert not found_nothing({"statistics": {"hits": 57}, "hits": []})
    calls = Calls()
    trace: list[Any] = []
    for i, table in enumerate(["DeviceProcessEvents", "DeviceFileEvents", "DeviceImageLoadEvents",
                               "DeviceNetworkEvents", "DeviceEvents", "DeviceRegistryEvents"] * 2):
        query = f"{table} | where Timestamp > ago({30 + i}d) | where FileName =~ 'svchost32.exe'"
        trace += calls.pair("mde_advanced_hunting", {"query": query},
                            {**empty, "Stats": {"ExecutionTime": 1.5 + i, "resource_usage": {}}})
    assert "result-stall" in criticals(trace)


@pytest.mark.parametrize(("tool", "search"), [
    ("mde_advanced_hunting", True), ("run_hunting_query", True), ("runHuntingQuery", True),
    ("hunt_iocs", True), ("hunting_lodge_booking", False),
])
def test_a_threat_hunt_is_a_search(tool: str, search: bool) -> None:
    assert Watchdog()._tool_facts(tool, None).search is search  # type: ignore[union-attr]


def test_gh_pr_checks_exit_8_is_checks_pending_not_a_failure() -> None:
    """`gh pr checks` exits 8 while checks are pending: polled until green, as its user
    asked, it is a wait for CI, not five identical failures. Another program's exit
    status 8, the same each time with nothing changed, is still a failure loop."""
    pending = "lint\tpass\t1m12s\nunit (3.11)\tpass\t4m03s\nunit (3.12)\tpass\t4m21s\ne2e\tpending\n"

    def polls(command: str, error: str) -> list[Any]:
        # checked every two and a half minutes
        trace: list[Any] = []
        for n in range(9):
            done = n == 8
            at = 1_731_931_222.0 + 150 * n
            trace += [ToolCall(session="h", tool="run_command", args={"command": command}, call_id=f"c{n}", ts=at),
                      ToolResult(session="h", tool="run_command", call_id=f"c{n}", ts=at + 2,
                                 result=pending.replace("pending", "pass\t19m02s") if done else pending,
                                 error=None if done else error)]
        return trace

    assert criticals(polls("gh pr checks 2187", "exit status 8 (checks pending)")) == []
    assert criticals(polls("sleep 150 && gh pr checks 252", "Exit code 8")) == []
    assert "failure-loop" in criticals(polls("./ci-status.sh 2187", "exit status 8"))


def test_a_record_re_read_after_each_report_of_the_user_is_no_loop() -> None:
    """A telecom agent re-reads the customer's line after each thing the user tried on
    the phone, with the next step to try each time: the user's report is the news the read
    answers. The same reads while the agent says the same thing again and again (an
    upload asked for turn after turn, the folder empty each time) are a loop."""
    line = {"line_id": "L1161", "status": "Active", "roaming_enabled": False, "data_used_gb": 9.7}
    reports = ["Turned Wi-Fi Calling off, still 'Message not sent'.", "The MMSC field is empty.",
               "Reset done, it now says 'Storage permission required'.", "Granted the permission, sending again.",
               "Rebooted, the status bar shows 5G now.", "Sent a photo to my wife and it went through!"]

    def call(agent_says: list[str]) -> list[Any]:
        trace: list[Any] = [Text(session="h", role="user", text="Picture messages fail on my phone.")]
        for n, (report, says) in enumerate(zip(reports, agent_says, strict=True)):
            trace += [Text(session="h", role="assistant", text=says), Text(session="h", role="user", text=report),
                      ToolCall(session="h", tool="get_details_by_id", args={"id": "L1161"}, call_id=f"c{n}"),
                      ToolResult(session="h", tool="get_details_by_id", call_id=f"c{n}", result=line)]
        return trace

    steps = ["Please turn Wi-Fi Calling off and try again.", "Open Access Point Names and read me the MMSC field.",
             "Reset the APN to default, then try again.", "Allow Messages to read photos in Settings.",
             "Reboot the phone and check the status bar.", "Try sending a photo once more."]
    assert criticals(call(steps)) == []
    same = ["Please upload the signed BAA with the paperclip button.", "I don't see it yet. Please upload the signed BAA."] * 3
    assert "repeated-tool-call" in criticals(call(same))
