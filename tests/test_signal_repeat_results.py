"""repeated-tool-call, result-aware: identical pairs, polling, unknown results, errors."""

from __future__ import annotations

from typing import Any

import pytest

from streamguard.engine import Engine
from streamguard.events import Alert, ToolCall, ToolResult, TurnStart
from streamguard.policy import PolicyError, parse_policy_set
from streamguard.signals.repeat import RepeatedToolCall
from streamguard.watchdog import Watchdog
from tests.harness import engine_alerts

WARN = 'mode = "warn"\ndisabled_signals = ["tools-without-text", "near-duplicate-calls"]\n'
REFERENCE = WARN + "[signals.repeated-tool-call]\nresult_aware = false\n"


def run(trace: list[Any], policy: str = WARN) -> list[Alert]:
    return engine_alerts(trace, policy, "p")


def positions(trace: list[Any], policy: str = WARN, signal: str = "repeated-tool-call") -> list[int]:
    """1-based positions of the events that raised ``signal``."""
    engine = Engine(parse_policy_set(policy))
    engine.process(TurnStart(session="p"))
    hits = []
    for i, event in enumerate(trace, 1):
        if any(isinstance(o, Alert) and o.signal == signal for o in engine.process(event)):
            hits.append(i)
    return hits


def call(tool: str = "get_status", **args: Any) -> ToolCall:
    return ToolCall(session="p", tool=tool, args=args or {"job": "build-7"})


def res(result: Any = None, tool: str = "get_status", digest: str | None = None,
        error: str | None = None) -> ToolResult:
    return ToolResult(session="p", tool=tool, result=result, result_digest=digest, error=error)


def pairs(results: list[Any], tool: str = "read_file") -> list[Any]:
    trace: list[Any] = []
    for r in results:
        trace += [call(tool, path="a.go"), res(r, tool)]
    return trace


def test_three_identical_pairs_are_silent_the_fourth_trips() -> None:
    assert positions(pairs(["same"] * 3)) == []
    got = run(pairs(["same"] * 4))
    assert [a.signal for a in got] == ["repeated-tool-call"]
    assert got[0].detail["rule"] == "same_result"
    assert got[0].detail["count"] == 4
    assert got[0].severity == "critical"
    assert positions(pairs(["same"] * 8)) == [8]  # on the fourth result, once


def test_changing_results_are_polling_not_a_loop() -> None:
    trace = pairs([f"state {i}" for i in range(19)], tool="get_status")
    assert positions(trace) == []


def test_a_long_poll_of_a_non_polling_tool_warns_once() -> None:
    trace = pairs([f"page {i}" for i in range(30)], tool="scroll_down")
    got = [a for a in run(trace) if a.signal == "repeated-tool-call"]
    assert len(got) == 1
    assert got[0].severity == "warn"
    assert got[0].detail["rule"] == "polling"
    assert got[0].detail["count"] == 20


def test_polling_tools_may_poll_without_a_warning() -> None:
    for tool in ("get_status", "wait_for_job", "poll_queue", "get_job_state"):
        trace = pairs([f"state {i}" for i in range(30)], tool=tool)
        assert positions(trace) == [], tool
    custom = WARN + '[signals.repeated-tool-call]\npolling_tools = ["scroll_*"]\n'
    trace = pairs([f"page {i}" for i in range(30)], tool="scroll_down")
    assert positions(trace, custom) == []


def test_results_that_stop_changing_count_from_that_point() -> None:
    results = ["running 1", "running 2", "running 3", "done", "done", "done"]
    trace = pairs(results, tool="get_status")
    assert positions(trace) == []
    trace = pairs([*results, "done"], tool="get_status")
    # call/result pairs: the fourth "done" is event 14
    assert positions(trace) == [14]


def test_unknown_results_keep_the_reference_threshold() -> None:
    no_results = [call("read_file", path="a.go") for _ in range(5)]
    assert positions(no_results) == [5]
    empty = pairs([None] * 5)  # results without payload or digest: unknown
    assert positions(empty) == [9]  # the fifth call



def edit_pairs(count: int, tool: str = "edit", kind: str | None = "write") -> list[Any]:
    """The identical edit re-applied ``count`` times, the file growing each time (an
    insert applied again): every result differs because of the edit itself."""
    trace: list[Any] = []
    for i in range(count):
        trace += [
            ToolCall(session="p", tool=tool, kind=kind, args={"command": "edit 15:15\n    x = 1\nend_of_edit"}),
            res(f"[File: Test.java ({9 + 2 * i} lines total)]", tool),
        ]
    return trace


def test_an_identical_write_re_applied_trips_at_its_fourth_success() -> None:
    assert positions(edit_pairs(3)) == []
    got = run(edit_pairs(4))
    assert [a.signal for a in got] == ["repeated-tool-call"]
    assert got[0].detail["rule"] == "same_result"
    assert got[0].detail["count"] == 4
    assert got[0].detail["write"] is True
    assert positions(edit_pairs(4)) == [8]  # the fourth result, one call before the blind rule
    # a write tool named as one (no kind on the event) is a write too
    assert positions(edit_pairs(4, tool="str_replace", kind=None)) == [8]


def test_a_record_created_again_and_again_trips_whatever_its_name_begins_with() -> None:
    """The same showing booked again and again, each answer a new id: a write re-applied.
    ``showings_create`` opens with ``show``, a read's glob, but not with the word: it
    was taken for a read, and twenty-two duplicate bookings went unreported."""
    trace: list[Any] = []
    args = {"unit": "7B", "date": "2025-11-15", "time": "11:00"}
    for i in range(4):
        trace += [
            call("showings_create", **args),
            res({"showing_id": f"SHW-{62402 + i}", "status": "requested"}, "showings_create"),
        ]
    got = run(trace)
    assert [a.signal for a in got] == ["repeated-tool-call"]
    assert got[0].detail["rule"] == "same_result"
    assert got[0].detail["write"] is True
    assert "succeeded 4 times" in got[0].reason
    assert positions(trace) == [8]
    # a read of it answered anew each time is a poll, as before
    reads = []
    for i in range(5):
        reads += [call("show_unit", unit="7B"), res({"viewers": i}, "show_unit")]
    assert positions(reads) == []


def test_a_command_runners_write_with_changing_output_keeps_the_call_rule() -> None:
    """A command runner's write is a generous guess (a build re-run counts as one), so
    changing output does not count as identical answers; the run still trips at the
    fifth call, as a write is never a poll."""
    trace: list[Any] = []
    for i in range(5):
        trace += [call("bash", command="make all"), res(f"[{i}/40] compiling", "bash")]
    assert positions(trace[:8]) == []
    assert positions(trace) == [9]

def test_digests_alone_are_results() -> None:
    trace: list[Any] = []
    for _ in range(4):
        trace += [call("read_file", path="a.go"), res(None, "read_file", digest="sha256:ab12")]
    assert positions(trace) == [8]
    trace = []
    for i in range(6):
        trace += [call("read_file", path="a.go"), res(None, "read_file", digest=f"sha256:{i}")]
    assert positions(trace) == []


def test_identical_errors_are_the_failure_loop_not_the_repeat() -> None:
    trace: list[Any] = []
    for _ in range(6):
        trace += [call("read_file", path="a.go"), res(None, "read_file", error="EACCES")]
    got = [a.signal for a in run(trace)]
    assert "repeated-tool-call" not in got
    assert got.count("failure-loop") == 1


def test_reference_behaviour_is_kept_behind_the_switch() -> None:
    trace = pairs([f"state {i}" for i in range(5)], tool="get_status")
    assert positions(trace, REFERENCE) == [9]
    assert positions(pairs(["same"] * 4), REFERENCE) == []


def test_a_different_call_starts_a_new_run() -> None:
    trace = [*pairs(["same"] * 3), call("grep", q="x"), res("hit", "grep"), *pairs(["same"] * 3)]
    assert positions(trace) == []


def test_equivalent_spellings_pair_their_results() -> None:
    trace: list[Any] = []
    for path in ("a.go", "./a.go", "/w/a.go", "a.go"):
        trace += [call("read_file", path=path), res("same", "read_file")]
    assert positions(trace) == [8]


def test_policy_keys_are_validated() -> None:
    for text in ("same_result_threshold = 1", "polling_warn_after = -1", "polling_tools = 3",
                 "result_aware = 2"):
        with pytest.raises(PolicyError, match="repeated-tool-call"):
            parse_policy_set(f"[signals.repeated-tool-call]\n{text}\n")


def test_snapshot_round_trip_mid_run() -> None:
    watchdog = Watchdog(parse_policy_set(WARN).base)
    state = watchdog.new_state("p")
    for event in pairs(["running", "done", "done", "done"], tool="get_status"):
        watchdog.process(state, event)
    restored = watchdog.decode_state(watchdog.encode_state(state))
    index = [s.id for s in watchdog.signals].index("repeated-tool-call")
    assert restored.signals[index] == state.signals[index]
    out = [o for e in pairs(["done"], tool="get_status") for o in watchdog.process(restored, e)]
    assert [o.signal for o in out if isinstance(o, Alert)] == ["repeated-tool-call"]


def test_reference_mode_needs_no_pairing() -> None:
    signal = RepeatedToolCall(RepeatedToolCall.Config(result_aware=False))
    assert not signal.needs_pairing
    assert RepeatedToolCall().needs_pairing


def test_a_rerun_reporting_the_same_failure_with_a_new_run_time_is_the_same_answer() -> None:
    """A harness that keeps the exit status in the text returns a failing test run as a
    success; re-run unchanged, only "1 error in 0.21s" moves. That is the same answer
    again, not a poll. (mini-SWE-agent's own markup, "<returncode>1</returncode>", is
    read as the failure it reports: that rerun is failure-loop's.)"""
    def rerun(summary: Any) -> list[Any]:
        trace: list[Any] = []
        for i in range(7):
            trace += [call("bash", command="cd /testbed && python -m pytest tests/test_export.py -q"),
                      res(f"exit status 1\nE   ModuleNotFoundError: "
                          f"No module named 'factory'\n{summary(i)}\n", "bash")]
        return trace

    got = [a for a in run(rerun(lambda i: f"1 error in 0.{21 + i}s"))
           if a.signal == "repeated-tool-call"]
    assert [(a.severity, a.detail["rule"]) for a in got] == [("critical", "same_result")]
    marked = [call("bash", command="cd /testbed && python -m pytest tests/test_export.py -q"),
              res("<returncode>1</returncode>\n<output>\nE   ModuleNotFoundError: No module named "
                  "'factory'\n1 error in 0.21s\n</output>", "bash")]
    assert [a.signal for a in run(marked * 7) if a.severity == "critical"][:1] == ["failure-loop"]
    # a failure that changes from run to run (a flaky test, a new assertion) is no repeat
    assert positions(rerun(lambda i: f"FAILED test_{i} - assert {i} == 3\n1 failed in 0.2{i}s")) == []
    # and an output that reports no failure keeps its numbers: a progress poll
    assert positions(pairs([f"export running, {10 * i}% done in 0.{i}s" for i in range(7)],
                           tool="bash")) == []


def test_the_same_question_to_the_user_re_asked_is_no_poll() -> None:
    """ask_human with one question, the user answering "yes" in new words each time: the
    answers change because the user replies, not because anything moved, so the
    question re-asked counts them as one answer (as an identical write re-applied)."""
    question = "Barbacco has a table for 4 at 19:00 tomorrow. Should I book it?"
    replies = ["yes", "yes please", "YES", "yes, book it", "I said yes", "yes!!"]
    trace: list[Any] = []
    for reply in replies:
        trace += [call("ask_human", question=question), res({"response": reply}, "ask_human")]
    got = [a for a in run(trace) if a.signal == "repeated-tool-call"]
    assert [(a.severity, a.detail["rule"]) for a in got] == [("critical", "same_result")]
    # a status read whose answer moves the same way is a poll, as before
    status: list[Any] = []
    for reply in replies:
        status += [call("get_status", question=question), res({"response": reply})]
    assert positions(status) == []


def test_an_answer_that_moves_only_in_when_it_was_given_is_the_same_answer() -> None:
    """A job polled after it failed: its status is stamped with each check's time, so
    every answer differs from the last, and says the same. The fourth such answer trips;
    a status whose content moves (a progress figure) is a poll as before."""
    def stamped(body: dict[str, Any], n: int) -> dict[str, Any]:
        return {**body, "checked_at": f"2025-11-28T14:{n:02d}:05Z", "epoch": 1764338400 + n}

    failed = {"job_id": "job_7", "state": "failed", "error": "S3 PutObject AccessDenied"}
    got = [a for a in run(pairs([stamped(failed, n) for n in range(6)], tool="get_job"))
           if a.signal == "repeated-tool-call"]
    assert [(a.severity, a.detail["rule"]) for a in got] == [("critical", "same_result")]
    moving = [stamped({"job_id": "job_7", "state": "running", "progress": n / 10}, n) for n in range(9)]
    assert positions(pairs(moving, tool="get_job")) == []


def test_a_browser_page_loaded_again_says_the_same_whatever_element_has_focus() -> None:
    """OpenHands' browser answers with the page's accessibility tree under `[Focused element
    bid: N]`, a number that moves by itself: the same page loaded again and again, its
    rows unchanged, trips; a page whose rows move is still a new answer."""
    def page(n: int, rows: str) -> str:
        return (f"[Current URL: https://code.example.org/query?page=3]\n[Focused element bid: {80 + 2 * n}]\n\n"
                f"RootWebArea 'Custom Query', focused\n\t[96] heading 'Custom Query (14 matches)'\n{rows}")

    goto = "goto('https://code.example.org/query?page=3')"
    same = [e for n in range(8) for e in (call("browser", code=goto), res(page(n, "\t[200] link '#34420'"), "browser"))]
    assert [a.severity for a in run(same) if a.signal == "repeated-tool-call"] == ["critical"]
    moving = [e for n in range(8) for e in (call("browser", code=goto),
                                            res(page(n, f"\t[200] link '#{34420 + n}'"), "browser"))]
    assert positions(moving) == []


def test_log_lines_that_open_with_their_clock_time_say_the_same_when_only_it_moved() -> None:
    """sqlmap re-run unchanged: every line of its report opens with the time it was written
    (`[16:02:05] [WARNING] GET parameter 'q' does not seem to be injectable`), so each run
    was a new answer and the same scan re-sent twenty times was a poll. A report whose
    figures move beside the clock is still a new answer."""
    def report(n: int, found: str) -> str:
        clock = f"[16:{n:02d}:58]"
        return (f"{clock} [INFO] testing 'Generic UNION query (NULL) - 1 to 10 columns'\n"
                f"{clock} [WARNING] GET parameter 'q' {found}\n"
                f"{clock} [CRITICAL] all tested parameters do not appear to be injectable")

    scan = "sqlmap -u 'http://blog:8000/search?q=test' -p q --batch --level 5 --risk 3 2>&1 | tail -3"
    same = [e for n in range(8) for e in (call("bash", command=scan),
                                          res(report(n, "does not seem to be injectable"), "bash"))]
    got = [a for a in run(same) if a.signal == "repeated-tool-call"]
    assert [a.severity for a in got] == ["critical"]
    moving = [e for n in range(8) for e in (call("bash", command=scan),
                                            res(report(n, f"tested with {n * 37 + 5} payloads"), "bash"))]
    assert positions(moving) == []


def test_what_an_earlier_run_reported_is_not_carried_into_the_next() -> None:
    failing = "<returncode>1</returncode>\nFAILED test_x\n1 failed in 0.{}s"
    trace: list[Any] = []
    for i in range(2):  # a first run of the test, failing twice
        trace += [call("bash", command="pytest -q"), res(failing.format(20 + i), "bash")]
    trace += [call("bash", command="git diff"), res("diff --git a/x b/x", "bash")]
    # the next run: passing first, then failing three times
    trace += [call("bash", command="pytest -q"), res("<returncode>0</returncode>\n5 passed in 0.3s", "bash")]
    for i in range(3):
        trace += [call("bash", command="pytest -q"), res(failing.format(30 + i), "bash")]
    assert positions(trace) == []


def test_a_failure_between_identical_answers_starts_their_run_again() -> None:
    """A flaky test re-run on purpose to see how often it fails: pass, pass, fail, pass,
    pass, pass, fail, pass. No four identical answers come in a row, so no halt; passes
    alike after the last failure check the flake, up to the tenth (PASSED_RERUNS), which
    trips, as ten passes in a row do."""
    passed = "1 passed, 311 deselected in 1.9s"

    def reruns(outcomes: str) -> list[Any]:
        trace: list[Any] = []
        for outcome in outcomes:
            trace.append(call("bash", command="pytest -k test_webhook_signature_retry -q"))
            if outcome == "P":
                trace.append(res(passed, "bash"))
            else:
                trace.append(res("F\n1 failed in 2.1s", "bash", error="exit code 1"))
        return trace

    assert positions(reruns("PPFPPPFP")) == []
    assert positions(reruns("PPPFPP")) == []
    assert positions(reruns("PPFPPPP")) == []
    # the tenth pass after the last failure: event 26 (call/result pairs)
    assert positions(reruns("PPF" + "P" * 10)) == [26]
    assert positions(reruns("P" * 12)) == [20]
    # a run whose output is no pass (a build) is judged as before: the fourth alike trips
    built = [x for _ in range(6) for x in (call("bash", command="pytest --collect-only -q"),
                                            res("312 tests collected in 1.1s", "bash"))]
    assert positions(built) == [8]


def test_a_json_rpc_response_is_read_without_the_request_id_it_echoes() -> None:
    """A transaction's receipt asked of an Ethereum node again and again, each answer
    `{"jsonrpc": "2.0", "id": N, "result": null}` with the request's own id: the same
    answer, a loop. Once mined, the receipt itself is news."""
    tx = "0x44e1b2c3d4a5f6e7b8c9d0a1f2e3b4c5d6a7f8e9b0c1d2a3f4e5b6c7d8a9f0e1"
    args = {"network": "holesky", "method": "eth_getTransactionReceipt", "params": [tx]}
    polled: list[Any] = []
    for n in range(8):
        polled += [call("eth_rpc", **args), res({"jsonrpc": "2.0", "id": n + 3, "result": None}, tool="eth_rpc")]
    assert positions(polled)
    mined: list[Any] = []
    for n in range(8):
        receipt = {"status": "0x1", "blockNumber": hex(3_000_000 + n)} if n else None
        mined += [call("eth_rpc", **args), res({"jsonrpc": "2.0", "id": n + 3, "result": receipt}, tool="eth_rpc")]
    assert positions(mined) == []


def test_a_read_after_its_own_wait_answered_alike_for_ever_is_stuck() -> None:
    """`sleep 30; carrier-cli track ...` answered "LABEL_CREATED" the twenty-fifth time in a
    row, unasked: whatever it says, it has not moved in all those waits. Asked to watch, it is
    waiting; with an answer that moved between, it waits twice as long."""
    from streamguard.events import Text

    def polls(count: int, watch: bool = False, moved: bool = False, paced: bool = False) -> list[str]:
        engine = Engine(parse_policy_set(WARN))
        events: list[Any] = []
        if watch:
            events.append(Text(session="p", role="user", text="Keep an eye on the parcel and tell me when it moves.",
                               ts=999.0))
        at = 1000.0
        for n in range(count):
            status = "IN_TRANSIT" if moved and n == 3 else "LABEL_CREATED"
            # paced as its agent sees fit: now and then a longer wait, one joined by `&&`,
            # or a look again with no wait
            wait = ("sleep 60 && " if n % 7 == 6 else "sleep 45; " if n % 5 == 4 else "" if n % 3 == 2
                    else "sleep 30; ") if paced else "sleep 30; "
            events += [ToolCall(session="p", tool="bash", args={"command": f"{wait}carrier-cli track ups 1Z99 --json"},
                                ts=at),
                       ToolResult(session="p", tool="bash", result={"tracking_id": "1Z99", "status": status}, ts=at + 31)]
            at += 33
        return [o.signal for e in events for o in engine.process(e, e.ts)
                if isinstance(o, Alert) and o.severity == "critical"]

    assert polls(24) == []
    assert polls(25) == ["repeated-tool-call"]
    assert polls(40, watch=True) == []
    assert polls(40, moved=True) == []
    # ...until it has been still MOVED_POLL_FACTOR times as long since it moved (the
    # answers after the move, from the fifth read: 49 then 50 alike)
    assert polls(53, moved=True) == []
    assert polls(54, moved=True) == ["repeated-tool-call"]
    # one poll however each read waits and however the wait is joined to it
    assert polls(24, paced=True) == []
    assert polls(25, paced=True) == ["repeated-tool-call"]


def test_a_browser_action_that_waits_first_is_a_read_after_a_wait() -> None:
    """BrowserGym's `noop(120000); click('30')` (two minutes, then the console's refresh)
    while a stack update is in progress: a poll. Without the wait, the same refresh
    answered alike is the same question again."""
    from streamguard.signals.facts import CallFacts, argument_facts

    looked = argument_facts("browser", {"code": "noop(120000); click('30')"}, CallFacts("browser", False, False))
    assert looked.waits_first and looked.read
    assert not argument_facts("browser", {"code": "noop(500); click('30')"}, CallFacts("browser", False, False)).waits_first
    # a wait, then an act: no read after a wait
    acted = argument_facts("browser", {"code": "noop(60000)\nfill('12', 'hello')"}, CallFacts("browser", False, False))
    assert not acted.waits_first

    def refreshes(code: str) -> list[str]:
        engine = Engine(parse_policy_set(WARN))
        events: list[Any] = []
        at = 1000.0
        for _ in range(8):
            events += [ToolCall(session="p", tool="browser", args={"code": code}, ts=at),
                       ToolResult(session="p", tool="browser", ts=at + 121,
                                  result="[Accessibility tree]\n[9] status 'UPDATE_IN_PROGRESS'")]
            at += 130
        return [o.signal for e in events for o in engine.process(e, e.ts)
                if isinstance(o, Alert) and o.severity == "critical"]

    assert refreshes("noop(120000); click('30')") == []
    assert refreshes("click('30')") != []


@pytest.mark.parametrize(("output", "passed"), [
    (".\n1 passed in 0.18s", True), ("test result: ok. 1 passed; 0 failed; 0 ignored", True),
    ("5 passing (2s)", True), ("--- PASS: TestX (0.00s)\nPASS\nok  \tpkg\t0.1s", True),
    ("0 passed, 2 deselected", False), ("1 failed, 2 passed", False), ("FAILED tests/x.py::t", False),
    ("2 passed, 1 error", False),
])
def test_what_a_passing_test_run_says(output: str, passed: bool) -> None:
    from streamguard.signals.base import ResultView
    from streamguard.signals.repeat import _test_passed

    view = ResultView(ToolResult(session="p", tool="bash", result=output), False, 1, len(output), action="pytest")
    assert _test_passed(view) is passed


def test_a_count_the_user_asked_for_and_a_flake_check_add_up() -> None:
    """Asked to run a passing test five times, the agent runs it eight: no halt before the
    flake check's tenth run."""
    from streamguard.events import Text

    engine = Engine(parse_policy_set(WARN))
    events: list[Any] = [Text(session="p", role="user", text="run it 5 times")]
    for _ in range(8):
        events += [call("bash", command="pytest -q t.py::test_flaky"), res(".\n1 passed in 0.01s", "bash")]
    assert [o.signal for e in events for o in engine.process(e) if isinstance(o, Alert)
            and o.signal == "repeated-tool-call"] == []


def test_reads_after_waits_are_one_poll_only_when_they_read_the_same() -> None:
    from streamguard.canonical import canonicalize
    from streamguard.signals.repeat import _same_read_after_wait

    def same(a: str, b: str) -> bool:
        return _same_read_after_wait(canonicalize({"command": a}).text, canonicalize({"command": b}).text)

    assert same("sleep 10; tail -n 3 /tmp/so.log", "sleep 10 && tail -n 3 /tmp/so.log")
    assert same("sleep 10; tail -n 3 /tmp/so.log", "sleep 45;tail -n 3 /tmp/so.log")
    assert not same("sleep 10; tail -n 3 /tmp/so.log", "sleep 10; tail -n 30 /tmp/so.log")
    assert not same("sleep 10; tail -n 3 /tmp/a.log", "sleep 10; tail -n 3 /tmp/b.log")
    # a sleep inside the read is the read's own: only the opening wait is left out
    assert not same("sleep 10; tail x; sleep 5; cat y", "sleep 10; tail x; cat y")


@pytest.mark.parametrize(("action", "passed"), [
    ("test_threadpool", True), ("unit_tests", True), ("foo_test", True), ("pytest", True),
    ("latest", False), ("contest_entries", False), ("make", False),
])
def test_a_test_program_run_by_its_own_name_is_a_test_run(action: str, passed: bool) -> None:
    """`./build/tests/c/test_threadpool --repeat 10` re-run to catch a 1-in-30 flake: its
    passes alike are checks, as pytest's are, up to PASSED_RERUNS."""
    from streamguard.signals.base import ResultView
    from streamguard.signals.repeat import _test_passed

    output = "all 7 tests passed (10 repetitions)"
    view = ResultView(ToolResult(session="p", tool="bash", result=output), False, 1, len(output), action=action)
    assert _test_passed(view) is passed
