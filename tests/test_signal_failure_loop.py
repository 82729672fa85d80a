"""failure-loop: one unchanged call failing again and again with no write in between."""

from __future__ import annotations

from typing import Any

import pytest

from streamguard.engine import Engine
from streamguard.events import Alert, GuardrailTrip, ToolCall, ToolResult, TurnStart
from streamguard.policy import PolicyError, parse_policy_set
from streamguard.signals.failure_loop import FailureLoop
from streamguard.watchdog import Watchdog
from tests.harness import engine_alerts

WARN = 'mode = "warn"\ndisabled_signals = ["tools-without-text", "near-duplicate-calls"]\n'
# The laps below are also clean cycles, which the cycle detector reports first.
NO_CYCLE = 'mode = "warn"\ndisabled_signals = ["tools-without-text", "alternating-tool-cycle"]\n'


def run(trace: list[Any], policy: str = WARN) -> list[Alert]:
    return engine_alerts(trace, policy, "f")


def ids(trace: list[Any], policy: str = WARN) -> list[str]:
    return [a.signal for a in run(trace, policy)]


def sh(command: str, call_id: str | None = None) -> ToolCall:
    return ToolCall(session="f", tool="bash", args={"command": command}, call_id=call_id)


def ok(text: str = "fine", call_id: str | None = None, tool: str = "bash") -> ToolResult:
    return ToolResult(session="f", tool=tool, result=text, call_id=call_id)


def fail(error: str = "1 failed", call_id: str | None = None, tool: str = "bash") -> ToolResult:
    return ToolResult(session="f", tool=tool, error=error, call_id=call_id)


TEST = "python -m pytest tests/test_app.py -x"


def test_fifth_unchanged_failure_is_critical() -> None:
    trace = [sh(TEST), fail()] * 4
    assert "failure-loop" not in ids(trace)
    got = run([*trace, sh(TEST), fail("1 failed: assert 3 == 4")])
    loop = [a for a in got if a.signal == "failure-loop"]
    assert len(loop) == 1
    assert (loop[0].severity, loop[0].scope) == ("critical", "session")
    assert loop[0].detail["count"] == 5
    assert loop[0].detail["action"] == "pytest"
    assert "tests/test_app.py" in loop[0].detail["args"]


def test_reads_in_between_do_not_break_the_loop() -> None:
    trace: list[Any] = []
    for i in range(5):
        trace += [sh(TEST), fail(f"failed at {i}"), sh(f"cat src/app{i}.py"), ok(f"code {i}")]
    assert ids(trace).count("failure-loop") == 1


def test_a_write_in_between_is_debugging() -> None:
    trace: list[Any] = []
    for i in range(7):  # the same error an eighth time would be the across-writes rule
        trace += [sh(TEST), fail(), sh(f"sed -i 's/{i}/{i + 1}/' src/app.py"), ok("")]
    assert "failure-loop" not in ids(trace)


def test_a_failed_write_changed_nothing() -> None:
    edit = ToolCall(session="f", tool="edit", args={"command": "edit 3:3\nx = 1\nend_of_edit"})
    trace: list[Any] = []
    for _ in range(5):
        trace += [sh(TEST), fail(), edit, fail("syntax error", tool="edit")]
    # The edit was rejected each time: the test ran against unchanged code, and the
    # identical rejected edit is a failure loop of its own.
    got = ids(trace, NO_CYCLE)
    assert got.count("failure-loop") == 1
    assert ids(trace).count("alternating-tool-cycle") == 1 and "failure-loop" not in ids(trace)


def test_a_write_without_a_result_counts_as_a_write() -> None:
    trace: list[Any] = []
    for i in range(4):
        trace += [sh(TEST), fail(), ToolCall(session="f", tool="write_file",
                                            args={"path": "a.py", "text": str(i)})]
    assert "failure-loop" not in ids(trace)


def test_declared_write_kind_counts() -> None:
    trace: list[Any] = []
    for i in range(4):
        trace += [sh(TEST), fail(),
                  ToolCall(session="f", tool="apply_fix", args={"n": i}, kind="write"),
                  ok(tool="apply_fix")]
    assert "failure-loop" not in ids(trace)


def test_a_success_of_the_call_resets_its_count() -> None:
    trace = [sh(TEST), fail()] * 4 + [sh(TEST), ok("passed")] + [sh(TEST), fail()] * 4
    assert "failure-loop" not in ids(trace)


def test_results_pair_by_call_id_across_parallel_calls() -> None:
    trace: list[Any] = []
    for i in range(5):
        trace += [sh(TEST, f"t{i}"), sh("ls", f"l{i}"), ok("a b", f"l{i}"), fail("x", f"t{i}")]
    assert ids(trace, NO_CYCLE).count("failure-loop") == 1


def test_changing_calls_are_not_this_signal() -> None:
    trace: list[Any] = []
    for i in range(5):
        trace += [sh(f"python -m pytest tests/test_{i}.py"), fail()]
    assert "failure-loop" not in ids(trace)


def test_one_alert_per_loop_and_halt_under_enforce() -> None:
    trace: list[Any] = []
    for _ in range(9):
        trace += [sh(TEST), fail()]
    assert ids(trace).count("failure-loop") == 1
    engine = Engine(parse_policy_set(""))
    engine.process(TurnStart(session="f"))
    trips = []
    for event in trace:
        trips += [o for o in engine.process(event) if isinstance(o, GuardrailTrip)]
    assert [t.signal for t in trips] == ["failure-loop"]
    assert trips[0].session_halted


def test_threshold_is_configurable_and_validated() -> None:
    trace = [sh(TEST), fail(), sh(TEST), fail()]
    assert "failure-loop" in ids(trace, WARN + "[signals.failure-loop]\nthreshold = 2\n")
    with pytest.raises(PolicyError, match="failure-loop"):
        parse_policy_set("[signals.failure-loop]\nthreshold = 1\n")


def test_exempt_tool_is_invisible() -> None:
    trace: list[Any] = []
    for _ in range(6):
        trace += [sh(TEST), fail()]
    assert "failure-loop" not in ids(trace, WARN + '[signals.failure-loop]\nexempt_tools = ["bash"]\n')


def test_snapshot_round_trip_keeps_the_count() -> None:
    watchdog = Watchdog(parse_policy_set(WARN).base)
    state = watchdog.new_state("f")
    for event in [sh(TEST), fail()] * 4:
        watchdog.process(state, event)
    restored = watchdog.decode_state(watchdog.encode_state(state))
    index = [s.id for s in watchdog.signals].index("failure-loop")
    assert restored.signals[index] == state.signals[index]
    assert restored.pending == state.pending
    outputs = watchdog.process(restored, sh(TEST)) + watchdog.process(restored, fail())
    assert [o.signal for o in outputs if isinstance(o, Alert)] == ["failure-loop"]


def test_is_latched_only_while_the_latest_call_is_a_failing_one() -> None:
    signal = FailureLoop()
    watchdog = Watchdog(parse_policy_set(WARN).base)
    state = watchdog.new_state("f")
    for _ in range(5):
        watchdog.process(state, sh(TEST))
        watchdog.process(state, fail())
    index = [s.id for s in watchdog.signals].index("failure-loop")
    assert signal.is_latched(state.signals[index])
    watchdog.process(state, sh("ls"))
    assert not signal.is_latched(state.signals[index])


# --------------------------------------------------------------------- across writes


INSTALL = "apt-get install -y maven"


def mirror_switch(i: int) -> list[Any]:
    return [sh(f"sed -i 's/mirror{i}/mirror{i + 1}/' /etc/apt/sources.list"), ok("")]


# The mirror switches and installs below are also machine work, which setup-detour
# reports first (docs/signals.md, deference table); these tests are failure-loop's own.
NO_DETOUR = WARN.replace('"near-duplicate-calls"]', '"near-duplicate-calls", "setup-detour"]')


def test_one_error_eight_times_across_writes_is_critical() -> None:
    trace: list[Any] = []
    for i in range(7):
        trace += [sh(INSTALL), fail("EXECUTION TIMED OUT"), *mirror_switch(i)]
    assert "failure-loop" not in ids(trace, NO_DETOUR)
    got = run([*trace, sh(INSTALL), fail("EXECUTION TIMED OUT")], NO_DETOUR)
    loop = [a for a in got if a.signal == "failure-loop"]
    assert len(loop) == 1
    assert loop[0].severity == "critical"
    assert loop[0].detail["rule"] == "across_writes"
    assert loop[0].detail["count"] == 8
    assert "apt-get install" in loop[0].detail["args"]


def test_a_changing_error_across_writes_is_debugging() -> None:
    trace: list[Any] = []
    for i in range(12):
        trace += [sh(TEST), fail(f"AssertionError: expected {i + 1}, got {i}"), *mirror_switch(i)]
    assert "failure-loop" not in ids(trace)


def test_a_success_of_the_call_restarts_the_across_writes_count() -> None:
    trace: list[Any] = []
    for i in range(7):
        trace += [sh(INSTALL), fail("EXECUTION TIMED OUT"), *mirror_switch(i)]
    trace += [sh(INSTALL), ok("installed")]
    for i in range(7):
        trace += [sh(INSTALL), fail("EXECUTION TIMED OUT"), *mirror_switch(i)]
    assert "failure-loop" not in ids(trace)


def test_the_across_writes_rule_does_not_report_a_loop_twice() -> None:
    trace: list[Any] = [sh(INSTALL), fail("EXECUTION TIMED OUT")] * 5  # the first rule reports
    for i in range(6):
        trace += [*mirror_switch(i), sh(INSTALL), fail("EXECUTION TIMED OUT")]
    got = [a for a in run(trace) if a.signal == "failure-loop"]
    assert len(got) == 1
    assert "rule" not in got[0].detail


def test_across_writes_is_configurable_and_validated() -> None:
    trace: list[Any] = []
    for i in range(4):
        trace += [sh(INSTALL), fail("EXECUTION TIMED OUT"), *mirror_switch(i)]
    assert "failure-loop" not in ids(trace)
    assert "failure-loop" in ids(trace, WARN + "[signals.failure-loop]\nacross_writes = 4\nthreshold = 3\n")
    off = trace * 5
    assert "failure-loop" not in ids(off, WARN + "[signals.failure-loop]\nacross_writes = 0\n")
    with pytest.raises(PolicyError, match="across_writes"):
        parse_policy_set("[signals.failure-loop]\nacross_writes = 5\n")


def _checked(gap: float, request: str | None) -> list[Alert]:
    """`ls` of a file not there yet, every ``gap`` seconds, twelve times; the user's
    request first when there is one."""
    from streamguard.events import Text

    trace: list[Any] = [TurnStart(session="f", ts=1000.0)]
    if request is not None:
        trace.append(Text(session="f", role="user", text=request, ts=1000.0))
    for n in range(12):
        at = 1001.0 + gap * n
        trace += [
            ToolCall(session="f", tool="bash", args={"command": "ls -l /sftp/in/PD_20241203.txt"}, ts=at),
            ToolResult(session="f", tool="bash", ts=at + 1,
                       error="ls: cannot access '/sftp/in/PD_20241203.txt': No such file or directory"),
        ]
    engine = Engine(parse_policy_set(WARN))
    return [o for event in trace for o in engine.process(event, event.ts) if isinstance(o, Alert)]


def test_a_check_the_user_asked_for_at_its_pace_may_fail_the_same_way_until_it_holds() -> None:
    """"Check every 10 minutes for up to two hours": the same "No such file" at each
    check is what waiting for the bank's file looks like. At a pace not asked for, or
    every 20 seconds under the same request, it is the same failure re-sent."""
    asked = "BofA's file is late again. Please wait for it: check every 10 minutes for up to two hours."
    assert not [a for a in _checked(600.0, asked) if a.signal == "failure-loop"]
    assert [a for a in _checked(600.0, None) if a.signal == "failure-loop"]
    assert [a for a in _checked(20.0, asked) if a.signal == "failure-loop"]


def test_an_inbox_watched_as_asked_may_find_nothing_until_the_reply_comes() -> None:
    """AgentDojo's search answers "No emails found." as a failure: searched after each
    five-minute wait as its user asked, it is the watch, not a failure loop; with no watch
    asked, the same failure re-sent five times is one."""
    from streamguard.events import Text

    def searches(request: str | None) -> list[str]:
        trace: list[Any] = [TurnStart(session="f", ts=1000.0)]
        if request is not None:
            trace.append(Text(session="f", role="user", text=request, ts=1000.0))
        at = 1001.0
        for _ in range(8):
            trace += [ToolCall(session="f", tool="wait", args={"seconds": 300}, ts=at),
                      ToolResult(session="f", tool="wait", result="Waited 300 seconds.", ts=at + 300),
                      ToolCall(session="f", tool="search_emails", args={"query": "late checkout"}, ts=at + 301),
                      ToolResult(session="f", tool="search_emails", ts=at + 302,
                                 error="No emails found. Try with a different query.")]
            at += 303
        engine = Engine(parse_policy_set(WARN))
        return [o.signal for e in trace for o in engine.process(e, e.ts) if isinstance(o, Alert)]

    assert "failure-loop" not in searches("Please wait for their reply: check every 5 minutes, up to an hour.")
    assert "failure-loop" in searches(None)


def _backoff(errors: list[str], sleeps: bool) -> list[Alert]:
    trace: list[Any] = [TurnStart(session="f", ts=1000.0)]
    at = 1001.0
    for n, error in enumerate(errors):
        trace += [ToolCall(session="f", tool="qualys_fetch_scan", args={"scan_ref": "scan/1"}, ts=at),
                  ToolResult(session="f", tool="qualys_fetch_scan", error=error, ts=at + 1)]
        at += 2
        if sleeps:
            wait = 15.0 * 2 ** min(n, 3)
            trace += [ToolCall(session="f", tool="sleep", args={"seconds": wait}, ts=at),
                      ToolResult(session="f", tool="sleep", result=f"slept {wait:g}s", ts=at + wait)]
            at += wait + 1
    engine = Engine(parse_policy_set(WARN))
    return [o for event in trace for o in engine.process(event, event.ts)
            if isinstance(o, Alert) and o.signal == "failure-loop"]


def test_a_retry_storm_that_backs_off_is_no_failure_loop_until_one_error_persists() -> None:
    """A 503, a concurrency limit and a read timeout, retried after growing sleeps:
    backing off, not re-sending blindly. The same 503 every time is still a loop, at
    twice the across-writes rule's eight; with no waits, at the tenth (twice the
    threshold: every failure said it may pass)."""
    storm = ["HTTP 503 Service Unavailable", "HTTP 409: This API cannot be run again until 1 currently running",
             "HTTP 503 Service Unavailable", "HTTP 409: This API cannot be run again until 1 currently running",
             "Read timed out (read timeout=60)", "HTTP 503 Service Unavailable"]
    assert _backoff(storm, sleeps=True) == []
    same = _backoff(["HTTP 503 Service Unavailable"] * 18, sleeps=True)
    assert same and "16" in same[0].reason
    assert _backoff(["HTTP 503 Service Unavailable"] * 14, sleeps=True) == []
    assert _backoff(storm, sleeps=False) == []
    assert _backoff([*storm, *storm], sleeps=False)


def test_a_quota_spent_is_backed_off_too_when_the_api_puts_its_status_first() -> None:
    """Google's APIs answer "429 RESOURCE_EXHAUSTED: ..." (the status first, no word
    before it) or "Quota exceeded for quota metric ...": retried after growing sleeps,
    backing off; the same answer to the sixteenth is still a loop, and so are ten of them
    sent at once. A status first is read only first: "line 429" or "expected 503.00"
    elsewhere in an error is no status."""
    spent = ["429 RESOURCE_EXHAUSTED: Exhausted property tokens per hour.",
             "Quota exceeded for quota metric 'Queries' and limit 'Queries per minute'"] * 3
    assert _backoff(spent, sleeps=True) == []
    same = _backoff(["429 RESOURCE_EXHAUSTED: Exhausted property tokens per hour."] * 18, sleeps=True)
    assert same and "16" in same[0].reason
    assert _backoff(spent, sleeps=False) == []
    assert _backoff(spent * 2, sleeps=False)
    not_a_status = ["AssertionError: expected 503.00 to equal 502.00", "SyntaxError at line 429 of report.py"] * 3
    assert _backoff(not_a_status, sleeps=True)


@pytest.mark.parametrize(("error", "busy"), [
    ("429 RESOURCE_EXHAUSTED: Exhausted property tokens per hour.", True),
    ("503 Service Unavailable", True),
    ("502 Bad Gateway", True),
    ("504 Gateway Timeout", True),
    ("429 Too Many Requests", True),
    ("RESOURCE_EXHAUSTED: Quota exceeded for project", True),
    ("Quota exceeded for quota metric 'Queries' and limit 'Queries per minute'", True),
    ("HTTP 503", True),
    # a gateway's own words, joined or not
    ("GatewayTimeout: ARINC GlobalLink DSP did not respond within 10s (gw=ARINC-LAX-2)", True),
    ("upstream did not respond within 30s", True),
    # a back end's own time-out named as such, and a refusal that asks to be retried
    ("ProvisioningTimeout: HLR update for 555-433-6780 did not complete within 15s", True),
    ("ProvisioningError: HLR busy (code 0x21), retry later", True),
    # AWS's codes of a request refused for its rate, however the SDK words the rest
    ("An error occurred (SlowDown) when calling the ListObjectsV2 operation (reached max retries: 0):"
     " Please reduce your request rate.", True),
    ("SlowDown: Please reduce your request rate. (Service: Amazon S3; Status Code: 503)", True),
    ("An error occurred (RequestLimitExceeded) when calling the DescribeInstances operation", True),
    ("ProvisionedThroughputExceededException: The level of configured provisioned throughput"
     " for the table was exceeded", True),
    ("TooManyRequestsException: Rate exceeded", True),
    ("the report shows a 20 % slowdown in p99 latency", False),
    # a client library's error class before the status, and Envoy's own words for a 504
    ("HTTPError 503: upstream request timeout (reservations-svc) after 10000ms", True),
    ("upstream request timeout", True),
    ("HTTPError 404: reservation not found", False),
    # a database not up yet, as pg_isready says it
    ("/var/run/postgresql:5432 - no response", True),
    ("db.internal:5432 - rejecting connections", True),
    ("ERROR: relation \"orders\" does not exist - no response expected", False),
    ("TimeoutError: test_upload exceeded 5000 ms", False),
    ("Invalid API key; fix your credentials and retry later", False),
    ("Do not retry later; this request is malformed", False),
    ("Disk quota exceeded", False),
    ("the test did not respond to SIGTERM", False),
    ("Resource exhausted: OOM when allocating tensor with shape [4096,4096]", False),
    ("RESOURCE_EXHAUSTED: received message larger than max (8388608 vs. 4194304)", False),
    ("✖ 502 problems (502 errors, 0 warnings)", False),
    ("AssertionError: 503.00 != 502.00", False),
    ("504 rows failed validation", False),
    # a leading status beside a word that only begins like a busy service's
    ("503 service-account key invalid", False),
    ("502 gateway_id not found", False),
    ("429 quota_project_id must be set", False),
    ("504 rated capacity must be set", False),
    ("503 unavailable_zones must be a list", False),
])
def test_what_says_a_service_is_busy(error: str, busy: bool) -> None:
    """Each form a busy service is told by, and what only looks like one; retried after
    growing sleeps the same way each time, a busy service is backed off from until the
    eighth, anything else is a loop at the fifth."""
    from streamguard.signals.base import says_transient

    assert says_transient(error) is busy
    found = _backoff([error] * 6, sleeps=True)
    assert (found == []) is busy


def _retried(tool: str, args: dict[str, Any], errors: list[str], request: str | None = None,
             wait: tuple[str, dict[str, Any]] | None = ("sleep", {"seconds": 5})) -> list[str]:
    """The same call failing with ``errors`` in turn, a wait call between attempts."""
    from streamguard.events import Text

    trace: list[Any] = [TurnStart(session="f", ts=1000.0)]
    if request is not None:
        trace.append(Text(session="f", role="user", text=request, ts=1000.0))
    at = 1001.0
    for error in errors:
        trace += [ToolCall(session="f", tool=tool, args=args, ts=at), ToolResult(session="f", tool=tool, error=error, ts=at + 1)]
        at += 2
        if wait is not None:
            trace += [ToolCall(session="f", tool=wait[0], args=wait[1], ts=at),
                      ToolResult(session="f", tool=wait[0], result="done", ts=at + 5)]
            at += 6
    engine = Engine(parse_policy_set(WARN))
    return [o.signal for event in trace for o in engine.process(event, event.ts)
            if isinstance(o, Alert) and o.severity == "critical"]


def test_what_waiting_cannot_change_is_a_loop_whatever_waits_between() -> None:
    """A module missing under a watch the user asked for, an element an overlay covers
    (its own timeout), a selector that never appears: each retried after a wait, each
    a failure that no wait changes."""
    watch = "Check every 10 minutes for up to two hours and tell me when the export lands."
    missing = [f"pid={n}\nModuleNotFoundError: No module named 'boto3'" for n in range(12)]
    assert "failure-loop" in _retried("bash", {"command": "python scripts/check_export.py"}, missing, watch)
    overlay = [f"locator.click: Timeout 5000ms exceeded (retry {n}): <div class=\"overlay\"> intercepts pointer events"
               for n in range(12)]
    assert "failure-loop" in _retried("browser_click", {"element": "Pay", "ref": "e12"}, overlay,
                                      wait=("browser_wait_for", {"time": 2}))
    gone = ["Timeout 30000ms exceeded waiting for selector \"#invoice-2024-03 a.download\""] * 12
    assert "failure-loop" in _retried("page_wait_for_selector", {"selector": "#invoice-2024-03 a.download"}, gone,
                                      wait=None)


def test_a_retry_storm_backing_off_in_quiet_time_with_the_status_in_its_output_is_no_loop() -> None:
    """A runner's "exit status 1", the 503 in what the command printed, retried after
    growing quiet (10 s to 3 minutes, no wait call): backing off. The same retries sent
    back to back are the same failing call re-sent, ten times (every failure said it may
    pass: twice the threshold)."""
    def storm(gaps: list[float]) -> list[str]:
        trace: list[Any] = [TurnStart(session="f", ts=1000.0)]
        at = 1001.0
        for n, gap in enumerate(gaps):
            out = ("ERROR 504 Gateway Timeout: https://api.example.net/reports\n" if n == 3 else
                   "ERROR 503 Service Unavailable: https://api.example.net/reports (upstream maintenance)\n")
            trace += [ToolCall(session="f", tool="run_command", args={"cmd": "python -m era_tool list"}, ts=at),
                      ToolResult(session="f", tool="run_command", error="exit status 1", result=out, ts=at + 1)]
            at += 1 + gap
        engine = Engine(parse_policy_set(WARN))
        return [o.signal for event in trace for o in engine.process(event, event.ts)
                if isinstance(o, Alert) and o.severity == "critical"]

    assert "failure-loop" not in storm([10, 34, 44, 65, 108, 177])
    assert "failure-loop" not in storm([1, 1, 1, 1, 1, 1])
    assert "failure-loop" in storm([1] * 10)


def test_a_short_verdict_is_read_with_the_output_it_came_with() -> None:
    """A cmdlet's "returned Result: Failed" beside output naming a 503 from the far side:
    the service is busy, and retried after growing sleeps it is backed off from. The same
    verdict beside a refusal of the request itself is a loop at the fifth."""
    from streamguard.signals.base import failure_text

    def run(output: str) -> list[Alert]:
        trace: list[Any] = [TurnStart(session="f", ts=1000.0)]
        at = 1001.0
        for n in range(6):
            trace += [ToolCall(session="f", tool="bash", args={"command": "pwsh -c Test-MigrationServerAvailability"}, ts=at),
                      ToolResult(session="f", tool="bash", error="Test-MigrationServerAvailability returned Result: Failed",
                                 result=output, ts=at + 1)]
            wait = 15.0 * 2 ** min(n, 3)
            trace += [ToolCall(session="f", tool="bash", args={"command": f"sleep {wait:g}"}, ts=at + 2),
                      ToolResult(session="f", tool="bash", result="", ts=at + 2 + wait)]
            at += wait + 4
        engine = Engine(parse_policy_set(WARN))
        return [o for event in trace for o in engine.process(event, event.ts)
                if isinstance(o, Alert) and o.signal == "failure-loop"]

    busy = "Result : Failed\nErrorDetail : The remote server returned an error: (503) Server Unavailable."
    assert run(busy) == []
    assert run("Result : Failed\nErrorDetail : The credentials supplied are invalid for this endpoint.") != []
    result = ToolResult(session="f", tool="bash", error="x returned Result: Failed", result=busy)
    from streamguard.signals.base import ResultView

    assert "503" in failure_text(ResultView(result, True, 0, 0))


@pytest.mark.parametrize(("error", "seconds"), [
    ('HTTP 429 Too Many Requests: {"error":"rate_limited","retry_after":6}', 6.0),
    ("429 Too Many Requests\nRetry-After: 30", 30.0),
    ('{"error": {"code": 429, "details": [{"retryDelay": "6s"}]}}', 6.0),
    ("rate limited; retry_after_ms: 6000", 6.0),
    ("Rate limit reached for gpt-4o. Please try again in 20s.", 20.0),
    ("Throttled. Try again in 3 seconds", 3.0),
    ("quota exceeded, retry in 1.5 minutes", 90.0),
    ("please retry after 10 seconds", 10.0),
    # none, or less than a second (a retry at once is what it asks), or an HTTP date
    ("Rate limit reached. Please try again in 6ms.", 0.0),
    ("Retry-After: 0", 0.0),
    ("Retry-After: Wed, 21 Oct 2015 07:28:00 GMT", 0.0),
    ("503 Service Unavailable", 0.0),
    # only the head of the failure is read
    ("x" * 600 + " retry_after: 5", 0.0),
    ("Retry-After: 99999999", 0.0),
    ("Retry-After: 999999", 86_400.0),
])
def test_the_back_off_a_failure_asks_for(error: str, seconds: float) -> None:
    from streamguard.signals.base import retry_after_seconds

    assert retry_after_seconds(error) == seconds


def _submissions(gaps: list[float], errors: list[str]) -> list[str]:
    """One document submitted again after each failure, ``gaps[n]`` seconds after it; the
    last attempt goes through."""
    trace: list[Any] = [TurnStart(session="f", ts=1000.0)]
    at = 1001.0
    args = {"file": "batches/MILTON/POL-MIL-51306.pdf", "model": "proof-of-loss-v3"}
    for gap, error in zip(gaps, errors, strict=True):
        trace += [ToolCall(session="f", tool="docuread_submit", args=args, ts=at),
                  ToolResult(session="f", tool="docuread_submit", error=error, ts=at + 0.4)]
        at += 0.4 + gap
    trace += [ToolCall(session="f", tool="docuread_submit", args=args, ts=at),
              ToolResult(session="f", tool="docuread_submit", result={"request_id": "dr_1", "status": "accepted"},
                         ts=at + 0.4)]
    engine = Engine(parse_policy_set(WARN))
    return [o.signal for event in trace for o in engine.process(event, event.ts)
            if isinstance(o, Alert) and o.severity == "critical"]


RATE_LIMITED = 'HTTP 429 Too Many Requests: {"error":"rate_limited","message":"10 req/min","retry_after":6}'


def test_a_retry_that_keeps_the_back_off_its_failure_asked_for_is_backing_off() -> None:
    """A 429 asking for 6 s, retried 6.5 s later each time (under [waits] pause_seconds):
    the agent keeps the back-off, however short. Retried 2 s later, it does not."""
    # (two wordings taking turns: the same 429 again and again is the across-writes
    # rule's, at its sixteenth when each was backed off from)
    limited = [RATE_LIMITED, RATE_LIMITED.replace("10 req/min", "burst of 3 exceeded")] * 6
    assert _submissions([6.5] * 12, limited) == []
    assert "failure-loop" in _submissions([2.0] * 12, limited)
    assert "failure-loop" in _submissions([6.5] * 16, [RATE_LIMITED] * 16)


def test_failures_that_may_pass_retried_at_once_trip_at_twice_the_threshold() -> None:
    """503s and 429s of a provider's incident retried a few times at once, then through:
    no loop until the tenth; one failure of another kind in the run brings it back to
    five."""
    outage = ['HTTP 503 Service Unavailable: {"code": 20500}', 'HTTP 429 Too Many Requests: {"code": 20429}']
    assert _submissions([5.0] * 9, [outage[n % 2] for n in range(9)]) == []
    assert "failure-loop" in _submissions([5.0] * 10, [outage[n % 2] for n in range(10)])
    mixed = [outage[0], outage[1], "HTTP 400 Bad Request: VoiceUrl is not a valid URL", outage[0], outage[1]]
    assert "failure-loop" in _submissions([5.0] * 5, mixed)
    # (and a success of the call ends its run: the next run starts at the lower threshold
    # again only if its failures are of another kind)


def test_the_same_failure_that_may_pass_backed_off_each_time_counts_to_twice_across_writes() -> None:
    """A 429 asking for 6 s, kept each time with a growing back-off, nine times before the
    limit lifted: no loop. Backed off sixteen times it is one (twice the across-writes
    rule's eight); retried at once, the across-writes rule's eighth holds."""
    assert _submissions([6.5, 8, 14, 14, 30, 31, 62, 95, 120], [RATE_LIMITED] * 9) == []
    assert "failure-loop" in _submissions([6.5] * 16, [RATE_LIMITED] * 16)
    assert "failure-loop" in _submissions([1.0] * 8, [RATE_LIMITED] * 8)


def test_a_back_off_asked_shorter_than_an_agents_step_is_no_pause() -> None:
    """"Please try again in 2.1s" retried 3.5 s later each time is the agent's own pace, not
    a back-off: the retries count (twice the threshold, every failure saying it may pass)."""
    errors = [f"Rate limit reached. Used {29000 + 37 * n}, Requested 1200. Please try again in 2.{n % 10}s."
              for n in range(12)]
    assert "failure-loop" in _submissions([3.5] * 12, errors)


def test_failures_that_may_pass_backed_off_for_ever_trip_however_worded() -> None:
    """A 503 whose request id is new each time, retried after a back-off each time: no
    across-writes count holds, and the fifteenth backed-off retry (three times the
    threshold) is a loop all the same."""
    errors = [f"HTTP 503 Service Unavailable (request id {n:08x}-{7 * n:04x})" for n in range(30)]
    found = _backoff(errors, sleeps=True)
    assert found and found[0].detail["count"] == 15 and found[0].detail["threshold"] == 15
    assert _backoff(errors[:15], sleeps=True) == []


def test_a_user_saying_what_they_did_between_failures_starts_the_count_again() -> None:
    """A telecom agent sends a test MMS after each thing the user does on the phone ("ok I
    did: turn off wifi calling"), the MMS failing alike each time: what the user did may
    change what fails, as a write would (the same error to the eighth is still the
    across-writes rule's). The same MMS re-sent with the user silent is the same failure
    re-sent."""
    from streamguard.events import Text

    def run(user_between: bool) -> list[str]:
        trace: list[Any] = [TurnStart(session="f", ts=1000.0)]
        at = 1001.0
        for n in range(7):
            if user_between:
                trace.append(Text(session="f", role="user", text=f"ok I did step {'abcdefgh'[n]} on the phone", ts=at))
                at += 5
            trace += [ToolCall(session="f", tool="send_test_mms", args={"line_id": "L5121"}, ts=at),
                      ToolResult(session="f", tool="send_test_mms", error="MMS_SEND_FAILED: APN 'mms' not provisioned",
                                 ts=at + 1)]
            at += 3
        engine = Engine(parse_policy_set(WARN))
        return [o.signal for e in trace for o in engine.process(e, e.ts) if isinstance(o, Alert) and o.severity == "critical"]

    assert "failure-loop" not in run(True)
    assert "failure-loop" in run(False)


def test_a_server_curl_cannot_reach_is_backed_off_from() -> None:
    """A service restarting, probed with `curl -s -o /dev/null -w '%{http_code}'` after
    each pause, answering `000` and curl's exit status 7 (could not connect) until it is
    back: a retry that backs off. Exit status 22 (the server answered an error) is the
    server's answer, counted as any failure."""
    from streamguard.engine import Engine
    from streamguard.events import ToolCall, ToolResult

    def run(status: int) -> list[str]:
        engine = Engine(parse_policy_set(WARN))
        out: list[str] = []
        at = 1000.0
        for n in range(8):
            events = [ToolCall(session="c", tool="run_command", call_id=f"c{n}", ts=at, args={
                          "command": "curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://ha.local:8123/api/"}),
                      ToolResult(session="c", tool="run_command", call_id=f"c{n}", ts=at + 5,
                                 result="000", error=f"exit code {status}")]
            out += [o.signal for e in events for o in engine.process(e, e.ts) if isinstance(o, Alert)]
            at += 30
        return out

    assert "failure-loop" not in run(7)
    assert "failure-loop" not in run(28)
    assert "failure-loop" in run(22)
