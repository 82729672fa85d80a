"""alternating-tool-cycle: a short block of calls repeated lap after lap."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamguard.canonical import canonicalize, stable_hash
from streamguard.engine import Engine
from streamguard.events import Text, ToolCall, ToolResult
from streamguard.policy import parse_policy_set
from streamguard.signals.base import CallView
from streamguard.signals.cycle import AlternatingToolCycle, smallest_rotation
from streamguard.signals.dominant import DominantToolCall
from streamguard.signals.repeat import RepeatedToolCall
from streamguard.signals.tool_name import RepeatedToolName
from tests.harness import Driver, engine_alerts

Config = AlternatingToolCycle.Config
FORBIDDEN_IN_GUIDANCE = ("/interrupt", "--max-turn-cost-usd", "cost ceiling", "operator")

Call = tuple[str, Any]


def c(name: str) -> Call:
    """A call per letter: tool ``t<letter>``, fixed arguments."""
    return (f"t{name}", {"id": name})


def calls(pattern: str, laps: int = 1) -> list[Call]:
    return [c(ch) for ch in pattern] * laps


def drive(seq: list[Call], signal: AlternatingToolCycle | None = None, history: int | None = None) -> Driver:
    driver = Driver(signal or AlternatingToolCycle(), history)
    for tool, args in seq:
        driver.call(tool, args)
    return driver


def fired_at(seq: list[Call], signal: AlternatingToolCycle | None = None, history: int | None = None) -> list[int]:
    driver = Driver(signal or AlternatingToolCycle(), history)
    return [i for i, (tool, args) in enumerate(seq, 1) if driver.call(tool, args) is not None]


# --------------------------------------------------------------------------- reference cases


def test_uat_list_agents_check_agent_loop() -> None:
    seq = [("list_agents", {}), ("check_agent", {"name": "gke-1"})] * 3
    driver = drive(seq)
    assert len(driver.findings) == 1
    finding = driver.findings[0]
    assert finding.signal == "alternating-tool-cycle"
    assert finding.severity == "critical" and finding.scope == "session"
    for text in (finding.reason, finding.guidance):
        assert "list_agents → check_agent" in text
    assert finding.detail == {
        "period": 2, "laps": 3, "calls": 6, "tools": ["list_agents", "check_agent"], "max_period": 4,
    }


def test_two_laps_are_not_a_cycle() -> None:
    assert fired_at(calls("ab", 2)) == []
    assert fired_at(calls("abc", 2)) == []
    assert fired_at(calls("abcd", 2)) == []


def test_varying_arguments_each_lap_are_not_a_cycle() -> None:
    seq = [x for lap in range(3) for x in (("list_agents", {"page": lap}), ("check_agent", {}))]
    assert fired_at(seq) == []


def test_pure_repeat_is_left_to_the_repeat_detector() -> None:
    assert fired_at(calls("a", 6)) == []
    assert fired_at(calls("a", 40)) == []


@pytest.mark.parametrize(("pattern", "trip"), [("ab", 6), ("abc", 9), ("abcd", 12), ("aab", 9), ("abab", 6)])
def test_trip_call_by_period(pattern: str, trip: int) -> None:
    assert fired_at(calls(pattern, 6)) == [trip]


def test_period_three_needs_max_period_three() -> None:
    assert len(drive(calls("abc", 3), AlternatingToolCycle(Config(max_period=4))).findings) == 1
    assert drive(calls("abc", 3), AlternatingToolCycle(Config(max_period=2))).findings == []


def test_period_five_is_never_seen() -> None:
    assert fired_at(calls("abcde", 10)) == []
    assert fired_at(calls("aaaab", 10)) == []


def test_max_two_laps_two_then_a_new_pattern() -> None:
    signal = AlternatingToolCycle(Config(max_period=2, laps=2))
    driver = Driver(signal)
    for tool, args in calls("ab", 4):
        driver.call(tool, args)
    assert len(driver.findings) == 1
    driver.call(*c("z"))
    for tool, args in calls("cd", 2):
        driver.call(tool, args)
    assert len(driver.findings) == 2
    assert "tc → td" in driver.findings[1].reason
    assert driver.findings[1].detail["tools"] == ["tc", "td"]


def test_one_alert_per_pattern_across_rotations() -> None:
    # Starting on either call of the pair, and continuing for many laps: one alert.
    assert fired_at(calls("ab", 20)) == [6]
    assert fired_at([c("b"), *calls("ab", 20)]) == [6]  # b a b a b a is three laps already
    for start in range(3):
        assert fired_at([c(ch) for ch in ("abc" * 10)[start:]]) == [9]


def test_text_names_the_current_rotation() -> None:
    assert "ta → tb" in drive(calls("ab", 3)).findings[0].reason
    assert "tb → ta" in drive(calls("ba", 3)).findings[0].reason
    assert "tc → ta → tb" in drive(calls("cab", 3)).findings[0].guidance


def test_latch_clears_when_no_period_matches_and_rearms() -> None:
    signal = AlternatingToolCycle()
    driver = Driver(signal)
    for tool, args in calls("ab", 3):
        driver.call(tool, args)
    assert signal.is_latched(driver.state)
    driver.call(*c("x"))
    assert not signal.is_latched(driver.state)
    for tool, args in calls("ab", 3):
        driver.call(tool, args)
    assert len(driver.findings) == 2


def test_a_different_pattern_alerts_while_latched() -> None:
    # The ab cycle flows straight into an ac cycle: a new fingerprint alerts.
    assert fired_at(calls("ab", 3) + calls("ac", 3)) == [6, 12]


def test_cleaned_path_laps() -> None:
    seq = []
    for path in ["main.go", "./main.go", "dir/../main.go"]:
        seq += [("read_file", {"path": path}), ("grep", {"pattern": "func main"})]
    assert fired_at(seq) == [6]


def test_suffix_spellings_are_deliberately_different_keys() -> None:
    seq = []
    for path in ["main.go", "/workspace/main.go", "main.go"]:
        seq += [("read_file", {"path": path}), ("grep", {"pattern": "x"})]
    assert fired_at(seq) == []


def test_reset_drops_a_half_built_cycle() -> None:
    driver = Driver(AlternatingToolCycle())
    for tool, args in calls("ab", 2):
        driver.call(tool, args)
    driver.reset()
    for tool, args in calls("ab", 1):
        driver.call(tool, args)
    assert driver.findings == []  # three laps in total, but only one since the reset
    for tool, args in calls("ab", 2):
        driver.call(tool, args)
    assert len(driver.findings) == 1


def test_state_reset_alone_ignores_stale_shared_history() -> None:
    # A watchdog that resets signal states but keeps its call ring must not
    # let the cycle see calls from before the reset.
    signal = AlternatingToolCycle()
    driver = Driver(signal)
    for tool, args in calls("ab", 2):
        driver.call(tool, args)
    driver.state = signal.new_state()
    for tool, args in calls("ab", 1):
        driver.call(tool, args)
    assert driver.findings == []
    for tool, args in calls("ab", 2):
        driver.call(tool, args)
    assert len(driver.findings) == 1


def test_longer_shared_history_changes_nothing() -> None:
    seq = calls("ab", 3) + calls("x") + calls("abc", 4) + calls("q", 5) + calls("abcd", 3)
    assert fired_at(seq, history=40) == fired_at(seq) == [6, 16, 36]


# --------------------------------------------------------------------------- config


@pytest.mark.parametrize(
    ("max_period", "laps", "expected"),
    [(0, 1, (2, 2)), (1, 0, (2, 2)), (-5, -5, (2, 2)), (4, 3, (4, 3)), (99, 99, (8, 8))],
)
def test_clamps(max_period: int, laps: int, expected: tuple[int, int]) -> None:
    signal = AlternatingToolCycle(Config(max_period=max_period, laps=laps))
    assert (signal.max_period, signal.laps) == expected
    assert signal.history_needed() == expected[0] * expected[1]


def test_clamped_single_lap_raises_nothing() -> None:
    signal = AlternatingToolCycle(Config(max_period=0, laps=1))
    assert fired_at(calls("ab", 1), signal) == []
    assert fired_at(calls("ab", 2), signal) == [4]


def test_policy_rejects_out_of_range_values() -> None:
    for bad in ({"max_period": 1}, {"laps": 1}, {"max_period": 9}, {"laps": 0}):
        with pytest.raises(msgspec.ValidationError):
            msgspec.convert(bad, Config)
    assert msgspec.convert({"max_period": 3, "laps": 4}, Config).laps == 4


def test_defaults() -> None:
    signal = AlternatingToolCycle()
    assert (signal.max_period, signal.laps, signal.history_needed()) == (4, 3, 12)


def test_exempt_tools_are_invisible() -> None:
    poll = ("poll_status", {})
    seq = [x for _ in range(3) for x in (c("a"), poll)]
    assert fired_at(seq) == [6]  # a → poll_status is a cycle
    signal = AlternatingToolCycle(Config(exempt_tools=["poll_status"]))
    assert signal.history_needed() == 0
    assert fired_at(seq, signal) == []  # only `a a a` is visible: a plain repeat
    seq = [x for _ in range(3) for x in (c("a"), poll, c("b"), poll)]
    driver = drive(seq * 5, signal)
    assert [f.detail["tools"] for f in driver.findings] == [["ta", "tb"]]
    assert len(driver.state.ring) == 12  # its own ring, bounded by max_period × laps


def test_state_stays_small() -> None:
    driver = drive([("t", {"n": i, "blob": "x" * 1000}) for i in range(500)])
    assert len(driver.state.names) <= 4
    assert not driver.state.ring
    assert len(msgspec.msgpack.encode(driver.state)) < 100


# --------------------------------------------------------------------------- text


def test_reason_and_guidance() -> None:
    finding = drive(calls("abc", 3)).findings[0]
    assert "halting controller" in finding.reason
    assert "3-call" in finding.reason and "3 times" in finding.reason
    assert "ta → tb → tc" in finding.reason
    guidance = finding.guidance.lower()
    for word in FORBIDDEN_IN_GUIDANCE:
        assert word not in guidance
    assert "threshold" not in guidance and "policy" not in guidance
    assert "ta → tb → tc" in finding.guidance and "3 times" in finding.guidance


# --------------------------------------------------------------------------- preview


def test_would_trip_previews_without_mutation() -> None:
    signal = AlternatingToolCycle()
    driver = Driver(signal)
    for tool, args in calls("ab", 2) + calls("a"):
        driver.call(tool, args)
    before = msgspec.msgpack.encode(driver.state)

    def view(call: Call) -> CallView:
        canonical = canonicalize(call[1])
        key = stable_hash(call[0], canonical.text)
        history = [*driver.history, key][-driver.capacity :]
        return CallView(ToolCall(session="s", tool=call[0], args=call[1]), canonical, key, history, None)

    assert signal.would_trip(driver.state, view(c("b")))
    assert not signal.would_trip(driver.state, view(c("c")))
    assert msgspec.msgpack.encode(driver.state) == before
    driver.call(*c("b"))
    assert len(driver.findings) == 1
    assert signal.would_trip(driver.state, view(c("a")))  # continuing a reported loop


# --------------------------------------------------------------------------- cross-signal


def test_cycle_alone_reports_a_two_call_loop() -> None:
    seq = calls("aab", 4)
    ids = []
    for signal in (RepeatedToolCall(), AlternatingToolCycle(), DominantToolCall(), RepeatedToolName()):
        ids += drive(seq, signal).ids()
    assert ids == ["alternating-tool-cycle"]


# --------------------------------------------------------------------------- model


def smallest(block: tuple[str, ...]) -> tuple[str, ...]:
    return min(block[i:] + block[:i] for i in range(len(block)))


def model(seq: str, max_period: int, laps: int) -> list[int]:
    """The rule, literally, on the whole sequence."""
    fired, latched = [], None
    for n in range(1, len(seq) + 1):
        done = seq[:n]
        found = None
        for p in range(2, max_period + 1):
            if len(done) < p * laps:
                break
            tail = done[-p * laps :]
            block = tail[-p:]
            if tail == block * laps and len(set(block)) > 1:
                found = smallest(tuple(block))
                break
        if found is None:
            latched = None
        elif found != latched:
            latched = found
            fired.append(n)
    return fired


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="abc", max_size=40), st.integers(2, 4), st.integers(2, 4))
def test_matches_the_literal_rule(seq: str, max_period: int, laps: int) -> None:
    signal = AlternatingToolCycle(Config(max_period=max_period, laps=laps))
    assert fired_at([c(ch) for ch in seq], signal) == model(seq, max_period, laps)


@given(st.lists(st.integers(0, 3), min_size=1, max_size=6))
def test_smallest_rotation(block: list[int]) -> None:
    rotations = [block[i:] + block[:i] for i in range(len(block))]
    assert smallest_rotation(block) == tuple(min(rotations))
    assert all(smallest_rotation(r) == tuple(min(rotations)) for r in rotations)


def test_tool_names_are_shared_between_sessions() -> None:
    signal = AlternatingToolCycle()
    first, second = Driver(signal), Driver(signal)
    first.call("".join(["list_", "agents"]), {})
    second.call("".join(["list", "_agents"]), {})
    assert first.state.names[0] is second.state.names[0]


# ----------------------------------------------------------------------- result-aware

QUIET = 'mode = "warn"\ndisabled_signals = ["tools-without-text", "near-duplicate-calls"]\n'
REFERENCE = QUIET + "[signals.alternating-tool-cycle]\nresult_aware = false\n"


def lap_trace(answers: list[tuple[Any, Any]], with_results: bool = True) -> list[Any]:
    """``scroll_down`` then ``extract`` once per pair of answers."""
    trace: list[Any] = []
    for n, (scrolled, extracted) in enumerate(answers):
        for i, (tool, args, answer) in enumerate((
            ("scroll_down", {}, scrolled),
            ("extract", {"query": "reviews on the page"}, extracted),
        )):
            cid = f"c{n}{i}"
            trace.append(ToolCall(session="y", tool=tool, args=args, call_id=cid))
            if with_results:
                trace.append(ToolResult(session="y", tool=tool, call_id=cid, result=answer))
    return trace


SIGNAL = "alternating-tool-cycle"
SCROLLED = "Scrolled down the page by one page"
PAGES = ["stars 2: the lid leaks", "stars 1: broke in a week", "stars 2: loud when boiling",
         "stars 1: handle melted", "stars 2: slow", "stars 1: smells of plastic"]


def _alerts(trace: list[Any], policy: str = QUIET) -> list[str]:
    return [a.signal for a in engine_alerts(trace, policy, "y") if a.signal == SIGNAL]


def test_a_lap_that_reads_something_new_each_time_is_paging() -> None:
    trace = lap_trace([(SCROLLED, page) for page in PAGES])
    assert _alerts(trace) == []
    assert _alerts(trace, REFERENCE) == [SIGNAL]  # the reference rule ignores answers


def test_a_lap_whose_answers_stop_changing_trips_when_they_stop() -> None:
    # Three pages of new reviews, then the bottom of the page: the same extract again.
    trace = lap_trace([(SCROLLED, page) for page in PAGES[:3]] + [(SCROLLED, PAGES[2])] * 3)
    assert _alerts(trace) == [SIGNAL]


def test_answers_that_differ_only_in_their_numbers_are_no_news() -> None:
    # A crash-looping pod: the restart count and the age move, nothing else does.
    trace = lap_trace([(f"pod web 0/1 CrashLoopBackOff restarts {14 + n} ({n}m ago)",
                        f"Last State: Terminated, OOMKilled, Restart Count: {14 + n}")
                       for n in range(4)])
    assert _alerts(trace) == [SIGNAL]


def test_a_crash_loop_answered_as_json_with_a_fresh_timestamp_is_still_a_cycle() -> None:
    # Restart, read the status: JSON whose only change is when it was checked. Its digits
    # are taken out like any text's, so the fresh timestamp is not news.
    trace = lap_trace([(f'{{"restarted": true, "at": "2025-03-01T00:{n:02d}:00Z"}}',
                        f'{{"status": "crashloop", "checked_at": "2025-03-01T00:{n:02d}:30Z"}}')
                       for n in range(6)])
    assert _alerts(trace) == [SIGNAL]


def test_a_structured_answer_whose_only_change_is_its_timestamp_is_no_news() -> None:
    """An owner set through an API and read back, lap after lap: an automation reverts
    it, so the read answers the same object each time with only its ``updated_at``
    moved. A structured answer is compared exactly except for its timestamps."""
    def item(n: int, owner: str) -> dict[str, Any]:
        return {"data": {"items": [{"id": "51023501", "people": owner,
                                    "updated_at": f"2025-12-09T06:00:{n:02d}Z"}]}}
    reverted = lap_trace([({"id": "51023501"}, item(n, "Hana K.")) for n in range(6)])
    assert _alerts(reverted) == [SIGNAL]
    # the same laps with a field of the answer moving (a count growing): news
    growing = lap_trace([({"id": "51023501"}, {**item(n, "Hana K."), "count": n}) for n in range(6)])
    assert _alerts(growing) == []
    # and one that moves in what it says, the timestamp beside it
    moving = lap_trace([({"id": "51023501"}, item(n, f"owner {chr(65 + n)}")) for n in range(6)])
    assert _alerts(moving) == []


def test_a_digest_is_the_answer_whatever_payload_is_sent_beside_it() -> None:
    """A runtime that sends a digest of the whole answer and a preview of it: two answers
    whose digests differ are two answers, even when the previews differ only in a
    timestamp (the preview is no measure of the whole)."""
    from streamguard.canonical import fingerprint_payload
    from streamguard.signals.base import ResultView, answer_gist

    def gist(payload: Any, digest: str | None) -> int:
        event = ToolResult(session="s", tool="t", result=payload, result_digest=digest)
        return answer_gist(ResultView(event, False, fingerprint_payload(payload, digest), 30))

    preview = {"at": "2024-01-01T00:00:00Z"}
    assert gist(preview, "digest-A") != gist(preview, "digest-B")
    assert gist({"updated_at": "2024-01-01T00:00:00Z"}, None) == gist({"updated_at": "2024-01-02T09:30:00Z"}, None)
    # a time that is the data (when it is scheduled, when it is due) is compared
    assert gist({"scheduled_at": "2024-01-01T00:00:00Z"}, None) != gist({"scheduled_at": "2024-01-02T09:30:00Z"}, None)


def test_without_results_the_rule_is_the_reference_one() -> None:
    trace = lap_trace([(SCROLLED, page) for page in PAGES], with_results=False)
    assert _alerts(trace) == _alerts(trace, REFERENCE) == [SIGNAL]


def test_pages_that_stop_coming_back_end_the_change() -> None:
    # Two pages of reviews, then the extract answers nothing (or fails): an empty answer
    # is an answer, so the lap that brought it is no news and the cycle trips.
    empty = lap_trace([(SCROLLED, PAGES[0]), (SCROLLED, PAGES[1])] + [(SCROLLED, "")] * 4)
    assert _alerts(empty) == [SIGNAL]
    failing = lap_trace([(SCROLLED, PAGES[0]), (SCROLLED, PAGES[1])] + [(SCROLLED, "x")] * 4)
    failing = [ToolResult(session="y", tool=e.tool, call_id=e.call_id, error="element not found")
               if isinstance(e, ToolResult) and e.result == "x" else e for e in failing]
    assert _alerts(failing) == [SIGNAL]


def test_answers_that_alternate_are_no_news() -> None:
    # edit → test → edit back → test: the test fails one way, then the other, then the
    # first way again. Each answer differs from the last, but not from the one before it.
    trace: list[Any] = []
    failures = ["FAIL keeps the time zone", "FAIL selects the given day"]
    for lap in range(4):
        for step, (tool, args) in enumerate((("Edit", {"old": "a", "new": "b"}), ("Bash", {"cmd": "vitest"}),
                                             ("Edit", {"old": "b", "new": "a"}), ("Bash", {"cmd": "vitest"}))):
            cid = f"c{lap}{step}"
            trace.append(ToolCall(session="y", tool=tool, args=args, call_id=cid))
            if tool == "Bash":
                trace.append(ToolResult(session="y", tool=tool, call_id=cid, error=failures[step // 2]))
            else:
                trace.append(ToolResult(session="y", tool=tool, call_id=cid, result="updated"))
    assert _alerts(trace) == [SIGNAL]


def test_the_answer_memory_survives_a_snapshot() -> None:
    # Each value packs two answers and a count into one integer a snapshot can hold
    # (msgpack: 64 bits), whatever the answers hash to.
    from streamguard.policy import Policy
    from streamguard.watchdog import Watchdog

    watchdog = Watchdog(Policy())
    state = watchdog.new_state("y")
    trace = lap_trace([(SCROLLED, f"{page} and more {chr(0x41 + n)}") for n, page in
                       enumerate(PAGES)])
    for event in trace[:-4]:
        watchdog.process(state, event)
    restored = watchdog.decode_state(watchdog.encode_state(state))
    index = [s.id for s in watchdog.signals].index(SIGNAL)
    assert restored.signals[index].answers == state.signals[index].answers
    assert all(0 <= v < 1 << 63 for v in state.signals[index].answers.values())


def call_laps(laps: list[list[tuple[str, Any, Any]]]) -> list[Any]:
    """Each lap's (tool, args, answer) steps as calls and their results."""
    trace: list[Any] = []
    for n, lap in enumerate(laps):
        for i, (tool, args, answer) in enumerate(lap):
            cid = f"c{n}{i}"
            trace += [ToolCall(session="y", tool=tool, args=args, call_id=cid),
                      ToolResult(session="y", tool=tool, call_id=cid, result=answer)]
    return trace


def test_a_lap_that_asks_the_user_again_is_no_poll() -> None:
    """read_file, then the same question to the user, lap after lap: the user's replies
    differ ("staging", "staging like I said", "STAGING"), but a reply is no news of the
    world, so the lap brings nothing new and trips."""
    trace = call_laps([
        [("read_file", {"path": "deploy/values-staging.yaml"}, "image:\n  tag: 1.9.0\n"),
         ("ask_followup_question", {"question": "Which environment should I deploy to?"},
          f"<answer>{reply}</answer>")]
        for reply in ["staging", "staging like I said", "STAGING", "staging!!"]
    ])
    assert _alerts(trace) == [SIGNAL]


def test_a_tool_that_asks_a_codebase_is_no_question_to_the_user() -> None:
    """ask_codebase answers with information: a lap whose ask_codebase answer moves is
    still reading something new."""
    trace = call_laps([
        [("read_file", {"path": "src/app.py"}, "def main(): ..."),
         ("ask_codebase", {"question": "where is the retry policy?"}, f"see src/{where}.py")]
        for where in ("retry", "policy", "backoff", "client")
    ])
    assert _alerts(trace) == []


def test_a_lap_that_re_sends_one_write_moves_its_reads_itself() -> None:
    """The same comment posted again, the comment list read between: the list grows
    because of the posts, so its moving answer is no news and the lap trips. A lap whose
    one step scrolls (a computer-use action, no named write) and reads a new screen is
    paging, as before."""
    trace = call_laps([
        [("bitbucket_post_comment", {"pr_id": 3391, "content": "Race on the idempotency key"},
          {"id": 551202 + 3 * n, "warning": "line 61 not in diff"}),
         ("bitbucket_list_comments", {"pr_id": 3391},
          {"values": [{"id": 551202 + 3 * k} for k in range(n + 1)]})]
        for n in range(4)
    ])
    assert _alerts(trace) == [SIGNAL]
    paging = call_laps([
        [("computer", {"action": "scroll", "scroll_direction": "down"}, "scrolled"),
         ("computer", {"action": "screenshot"}, [{"type": "image", "sha256": page}])]
        for page in PAGES[:5]
    ])
    assert _alerts(paging) == []


def test_a_write_answered_alike_every_lap_leaves_its_reads_to_count() -> None:
    """A keystroke sent to a pager, a heartbeat: the write answers alike every lap, so
    the lap's new screen or new task is news, as before."""
    pager = call_laps([
        [("send_message", {"to": "pager", "text": "Space"}, "sent"),
         ("read_output", {}, f"--- page {page} ---")]
        for page in PAGES[:5]
    ])
    assert _alerts(pager) == []


def _upload_through_incident(errors: list[str], backoff: float) -> list[Any]:
    """An upload refused with each of ``errors`` in turn, the status page read after each
    refusal, ``backoff`` seconds (doubling) before the next try."""
    trace: list[Any] = []
    clock, wait = 1_000.0, backoff
    upload = {"file": "exports/look_06.jpg", "folder": "lookbook/spring", "public_id": "look_06"}
    status = '{"status": {"indicator": "minor", "description": "Partially Degraded Service"}}'
    for n, error in enumerate(errors):
        trace += [ToolCall(session="y", tool="cloudinary_upload", args=upload, call_id=f"u{n}", ts=clock),
                  ToolResult(session="y", tool="cloudinary_upload", call_id=f"u{n}", error=error, ts=clock + 1)]
        trace += [ToolCall(session="y", tool="http_get", args={"url": "https://status.example.com/api"},
                           call_id=f"s{n}", ts=clock + 2),
                  ToolResult(session="y", tool="http_get", call_id=f"s{n}", result=status, ts=clock + 3)]
        clock += 3 + wait
        wait *= 2
    return trace


TRANSIENT = ["502 Bad Gateway: upstream connect error", "504 Gateway Timeout",
             "503 Service Unavailable: please retry", "502 Bad Gateway: upstream reset"]


def test_a_write_refused_by_a_service_down_and_retried_after_back_off_is_no_lap() -> None:
    """An upload retried through an incident with a growing back-off, the status page
    read between: the upload made nothing, so its changing refusals are the service's
    news, not new things the laps made."""
    assert _alerts(_upload_through_incident(TRANSIENT, backoff=16.0)) == []


def test_an_outage_whose_refusals_never_end_is_a_lap_after_so_many_retries() -> None:
    """Each refusal carries a new request id, so the failures never repeat: past
    REFUSED_RETRIES of them the re-sent write is judged as before and the laps trip."""
    from streamguard.signals.cycle import REFUSED_RETRIES

    outage = [f"503 Service Unavailable (request id {n:08x}{n * 7919:08x})" for n in range(40)]
    found = _alerts(_upload_through_incident(outage, backoff=16.0))
    assert found == [SIGNAL]
    early = _alerts(_upload_through_incident(outage[: REFUSED_RETRIES - 1], backoff=16.0))
    assert early == []


def test_a_write_refused_again_without_back_off_or_for_its_own_fault_is_a_lap() -> None:
    from streamguard.signals.cycle import TRANSIENT_LAPS

    # the same refusals retried at once: the agent is not waiting for the service, but the
    # service said the refusal may pass, so the laps trip at TRANSIENT_LAPS times the count
    laps = 3 * TRANSIENT_LAPS
    retried = (TRANSIENT * laps)[:laps]
    assert _alerts(_upload_through_incident(retried, backoff=0.5)) == [SIGNAL]
    assert _alerts(_upload_through_incident(retried[:-1], backoff=0.5)) == []
    # refusals of the request itself, however paced and however worded: a wait changes
    # nothing, and a write answered differently each lap moves its reads itself
    own = ["Invalid preset 'lookbook'", "Unknown folder 'lookbook/spring'",
           "Upload preset must be signed", "Invalid public_id 'look_06'"]
    assert _alerts(_upload_through_incident(own, backoff=16.0)) == [SIGNAL]


TIMED_OUT = "BankAPIError: 504 Gateway Timeout"


def _payments(outcomes: list[str | None]) -> list[Any]:
    """A payment sent once per outcome (a failure's text, or None: it went through), the
    account's transactions read after each try to see what was booked, 25 s apart."""
    trace: list[Any] = []
    clock = 1_000.0
    payment = {"recipient": "UK12345678901234567890", "amount": 98.7, "subject": "Car rental"}
    booked = "- id: 1\n  recipient: CH93\n  amount: 100.0\n  subject: Pizza party"
    for n, error in enumerate(outcomes):
        trace += [ToolCall(session="y", tool="send_money", args=payment, call_id=f"p{n}", ts=clock),
                  ToolResult(session="y", tool="send_money", call_id=f"p{n}", error=error,
                             result=None if error else "Transaction sent.", ts=clock + 1),
                  ToolCall(session="y", tool="get_most_recent_transactions", args={"n": 5},
                           call_id=f"t{n}", ts=clock + 3),
                  ToolResult(session="y", tool="get_most_recent_transactions", call_id=f"t{n}",
                             result=booked, ts=clock + 4)]
        clock += 25.0
    return trace


def _payment_retried(refusals: int, then_paid: bool) -> list[Any]:
    """Refused with a 504 ``refusals`` times; then, when ``then_paid``, sent once more."""
    return _payments([TIMED_OUT] * refusals + ([None] if then_paid else []))


def test_a_payment_retried_after_time_outs_with_a_check_between_is_no_loop() -> None:
    """A payment that timed out three times, the transactions read after each to see that
    no double charge would follow, then paid: a careful retry. The payment going through is
    news, so the read after it starts the laps anew."""
    assert _alerts(_payment_retried(3, then_paid=True)) == []
    assert _alerts(_payment_retried(5, then_paid=False)) == []


def test_a_payment_retried_after_time_outs_for_ever_is_a_loop() -> None:
    from streamguard.signals.cycle import TRANSIENT_LAPS

    assert _alerts(_payment_retried(3 * TRANSIENT_LAPS, then_paid=False)) == [SIGNAL]


def test_a_payment_that_times_out_and_goes_through_by_turns_is_a_loop() -> None:
    """A payment sent again and again, each time timing out or going through, the
    transactions read between: going through the first time is news, again is not (a
    payment made each lap). The laps trip, through the time-outs."""
    assert _alerts(_payments([TIMED_OUT if n % 2 == 0 else None for n in range(20)])) == [SIGNAL]


def _playbook(user_says: list[str], every: float = 1800.0) -> list[Any]:
    """The user's message, then the same four checks answered the same way; a run
    every ``every`` seconds."""
    trace: list[Any] = []
    for n, message in enumerate(user_says):
        at = n * every
        trace.append(Text(session="y", role="user", text=message, ts=at))
        for i, (tool, answer) in enumerate((("connections", "active: 29"), ("cpu", "avg 11%"),
                                            ("error_logs", "No ERROR entries"), ("slow_queries", "none"))):
            trace += [ToolCall(session="y", tool=tool, args={}, call_id=f"c{n}{i}", ts=at + i),
                      ToolResult(session="y", tool=tool, call_id=f"c{n}{i}", result=answer, ts=at + i)]
    return trace


def test_the_same_request_again_restarts_the_laps() -> None:
    """A monitoring playbook asked for every half hour in the same words (a scheduler):
    each run answers the request, so the runs are no laps of the agent's own."""
    assert _alerts(_playbook(["Run the monitoring playbook for clinic-prod."] * 6)) == []


def test_replies_in_new_words_leave_the_laps_counting() -> None:
    """The user replying each time in other words ("Postgres, as I said") while the agent
    goes through the same calls: the agent's own loop, counted across the replies."""
    replies = ["Run the checks.", "I said run them once.", "Stop repeating.", "Why again?",
               "Please stop.", "STOP"]
    assert _alerts(_playbook(replies, every=20.0)) == [SIGNAL]


@pytest.mark.parametrize("message", ["Please continue working on the task.", "STOP"])
def test_the_same_message_within_minutes_is_no_scheduled_request(message: str) -> None:
    """A harness's nudge whenever the agent stops, or a user saying "STOP" again: the
    same words, seconds apart. The loop they interrupt goes on."""
    assert _alerts(_playbook(["Run the checks."] + [message] * 5, every=30.0)) == [SIGNAL]


def _switch_laps(user_says: list[str | None], every: float = 600.0) -> list[Any]:
    """Open the settings page, click the maintenance switch, save, look at the shop: one
    lap per entry, the switch on after one lap, off after the next, a lap every ``every``
    seconds. A message is the user's, said before its lap (``None``: no message)."""
    trace: list[Any] = []
    for n, message in enumerate(user_says):
        at = n * every
        if message is not None:
            trace.append(Text(session="y", role="user", text=message, ts=at))
        on = n % 2 == 0
        state = "checked" if on else "unchecked"
        for i, (tool, args, answer) in enumerate((
            ("browser_navigate", {"url": "https://admin.example/settings"}, f"switch [{'checked' if not on else 'unchecked'}]"),
            ("browser_click", {"element": "Maintenance mode switch"}, f"switch [{state}] Unsaved changes"),
            ("browser_click", {"element": "Save changes"}, f"switch [{state}] Saved at {n}:00"),
            ("browser_navigate", {"url": "https://shop.example/"}, "We'll be right back" if on else "New arrivals"),
        )):
            cid = f"c{n}{i}"
            trace += [ToolCall(session="y", tool=tool, args=args, call_id=cid, ts=at + 5 * i + 1),
                      ToolResult(session="y", tool=tool, call_id=cid, result=answer, ts=at + 5 * i + 3)]
    return trace


def test_a_switch_turned_on_and_off_at_each_new_request_of_the_user_is_no_loop() -> None:
    """The user asks, in new words each time, for the shop's maintenance mode on, then
    off, then on again: each lap answers the way the one before last did, which alone
    reads as a flip-flop, but the user asked for it."""
    asked = ["Turn on maintenance mode, we're migrating the catalog.",
             "Step 1 done, turn it off for the lunch traffic.", "Back on please, starting step 2.",
             "All done! Switch it off.", "One more import, on again.", "Finished, off for good."]
    assert _alerts(_switch_laps(asked)) == []


@pytest.mark.parametrize("user_says", [
    # the agent flipping the switch on its own, lap after lap
    ["Turn on maintenance mode, we're migrating the catalog."] + [None] * 5,
    # the same words again within minutes, a harness's nudge: no new request
    ["Turn on maintenance mode."] + ["Please continue."] * 5,
    # two nudges taking turns are no new request either
    ["Turn on maintenance mode."] + ["Please continue.", "Keep going."] * 3,
], ids=["on-its-own", "nudged", "nudges-in-turn"])
def test_a_switch_flipped_back_and_forth_without_new_requests_is_a_loop(user_says: list[str | None]) -> None:
    assert _alerts(_switch_laps(user_says, every=60.0)) == [SIGNAL]


def test_a_nudge_is_no_new_request_whatever_system_notes_come_between() -> None:
    trace = _switch_laps(["Turn on maintenance mode."] + ["Please continue."] * 5, every=60.0)
    noted: list[Any] = []
    for event in trace:
        if isinstance(event, Text) and event.text == "Please continue.":
            noted.append(Text(session="y", role="system", text="Reminder: stay on task.", ts=event.ts))
        noted.append(event)
    assert _alerts(noted) == [SIGNAL]


def _owner_laps(payloads: list[Any], result_bytes: list[int | None]) -> list[Any]:
    trace: list[Any] = []
    for n, (payload, size) in enumerate(zip(payloads, result_bytes, strict=True)):
        trace += [ToolCall(session="y", tool="scroll_down", args={}, call_id=f"s{n}"),
                  ToolResult(session="y", tool="scroll_down", call_id=f"s{n}", result=SCROLLED),
                  ToolCall(session="y", tool="extract", args={"q": "owner"}, call_id=f"e{n}"),
                  ToolResult(session="y", tool="extract", call_id=f"e{n}", result=payload, result_bytes=size)]
    return trace


def test_an_answer_changed_in_place_is_read_as_it_is_now() -> None:
    """One dict sent again each lap with its owner changed in place, the later answers
    with a declared size (no fingerprint made): each gist is of the answer as it is."""
    payload: dict[str, Any] = {}
    engine = Engine(parse_policy_set(QUIET))
    alerts = []
    for n in range(6):  # each lap processed as it arrives, while the dict holds that lap
        payload["owner"], payload["updated_at"] = f"owner {chr(65 + n)}", f"2025-12-09T06:00:{n:02d}Z"
        for event in _owner_laps([payload], [None if n == 0 else 60]):
            alerts += [o.signal for o in engine.process(event) if getattr(o, "signal", None) == SIGNAL]
    assert alerts == []


@pytest.mark.parametrize("policy", [QUIET, QUIET.replace(
    '"near-duplicate-calls"]', '"near-duplicate-calls", "result-stall", "no-new-state", "context-budget"]')])
def test_the_bound_of_a_gist_is_the_answers_own_size(policy: str) -> None:
    """An answer over 4 KiB is compared exactly whatever the other signals (which decide
    whether the watchdog measures sizes) and whatever size the agent declares."""
    big = [{"owner": "Hana K.", "notes": "x" * 6000, "updated_at": f"2025-12-09T06:00:{n:02d}Z"}
           for n in range(6)]
    assert _alerts(_owner_laps(big, [None] * 6), policy) == []
    assert _alerts(_owner_laps(big, [100] * 6), policy) == []


def _reload_and_read(page_texts: list[str], read: bool = True) -> list[Any]:
    """A computer-use keypress (a new screenshot each time), then a read of the page."""
    trace: list[Any] = []
    for n, text in enumerate(page_texts):
        trace += [ToolCall(session="y", tool="computer", args={"action": {"type": "keypress", "keys": ["CMD", "R"]}},
                           call_id=f"k{n}"),
                  ToolResult(session="y", tool="computer", call_id=f"k{n}",
                             result={"type": "computer_screenshot", "image_url": f"file_{n:08x}"})]
        if read:
            trace += [ToolCall(session="y", tool="read_page", args={"selector": "main"}, call_id=f"r{n}"),
                      ToolResult(session="y", tool="read_page", call_id=f"r{n}", result={"text": text})]
    return trace


def test_a_page_reloaded_and_read_the_same_each_lap_is_a_cycle() -> None:
    """The screenshot of each reload is new; the page's text is not. Beside a read that
    says the same each lap, the pixels are no news."""
    assert _alerts(_reload_and_read(["Label Created"] * 6)) == [SIGNAL]
    # the page's text moving (the parcel on its way) is news
    assert _alerts(_reload_and_read([f"In transit: {city}" for city in PAGES])) == []


def test_computer_use_acts_with_nothing_else_answering_keep_their_screens_as_news() -> None:
    """An agent whose only answers are screenshots: a lap of acts whose screens move is
    judged by them, as before."""
    trace: list[Any] = []
    for n in range(6):
        for i, action in enumerate(({"type": "click", "x": 700, "y": 842}, {"type": "scroll", "scroll_y": 600})):
            trace += [ToolCall(session="y", tool="computer", args={"action": action}, call_id=f"c{n}{i}"),
                      ToolResult(session="y", tool="computer", call_id=f"c{n}{i}",
                                 result={"type": "computer_screenshot", "image_url": f"file_{n}{i}"})]
    assert _alerts(trace) == []


def test_an_answer_that_is_its_numbers_keeps_them_in_the_gist() -> None:
    """A queue drained a thousand retries at a time, its stats read after each batch and a
    wait: "[56, 11.1, 13006, 1454]", then "[233, 3.6, 12006, 1458]". Without its digits
    the answer is a few marks, so the figures are what it says and each lap moved (it was
    halted as a cycle). A status in words keeps its digits out, as before."""
    from streamguard.canonical import fingerprint_payload
    from streamguard.signals.base import ResultView, answer_gist

    def gist(payload: str) -> int:
        event = ToolResult(session="s", tool="t", result=payload)
        return answer_gist(ResultView(event, False, fingerprint_payload(payload, None), 30))

    assert gist("[56, 11.1, 13006, 1454]") != gist("[233, 3.6, 12006, 1458]")
    assert gist("4.1\n") != gist("1.2\n")
    assert gist("api-7d4 CrashLoopBackOff 5 (2m ago)") == gist("api-7d4 CrashLoopBackOff 6 (3m ago)")


def test_a_status_read_between_powershell_sleeps_is_a_poll() -> None:
    """`run_powershell(script="Start-Sleep -Seconds 120")` between reads of a batch
    operation that is still "NotStarted": a wait, as `sleep 120` is, so the reads are a
    poll, not a two-call lap."""
    from streamguard.signals.facts import sleep_facts

    assert sleep_facts({"script": "Start-Sleep -Seconds 120"}) is not None
    assert sleep_facts({"computer": "aadc01", "script": "Start-Sleep 30"}) is not None
    assert sleep_facts({"script": "Start-Sleep -Seconds 30; Get-ADSyncScheduler"}) is None
    trace: list[Any] = []
    clock = 1_000.0
    for n in range(8):
        trace += [ToolCall(session="y", tool="run_powershell", call_id=f"s{n}", ts=clock,
                           args={"script": "Get-CsBatchPolicyAssignmentOperation -OperationId b8f9 | Format-List"}),
                  ToolResult(session="y", tool="run_powershell", call_id=f"s{n}", ts=clock + 1,
                             result="OverallStatus : NotStarted\nCompletedCount : 0\n")]
        trace += [ToolCall(session="y", tool="run_powershell", call_id=f"w{n}", ts=clock + 2,
                           args={"script": "Start-Sleep -Seconds 120"}),
                  ToolResult(session="y", tool="run_powershell", call_id=f"w{n}", ts=clock + 122, result="")]
        clock += 125
    assert _alerts(trace) == []


def test_a_named_tool_that_sleeps_then_reads_is_a_read_after_a_wait() -> None:
    """`ssh_exec(command="sleep 240; tail -n 2 convert.log")` between a look at the
    server's processlist and the size of the table being rebuilt, lap after lap while a
    schema conversion runs: the log says the work is under way after each deliberate
    wait, a poll. The same laps without the sleep are a cycle."""
    from streamguard.engine import Engine
    from streamguard.events import Alert, ToolCall, ToolResult
    from streamguard.policy import parse_policy_set
    from streamguard.signals.facts import CallFacts, argument_facts

    looked = argument_facts("ssh_exec", {"host": "db01", "command": "sleep 240; tail -n 2 /var/log/convert.log"},
                            CallFacts("ssh_exec", False, False))
    assert looked.waits_first and looked.read and not looked.write
    # a batch scheduler's status read after a sleep is one too; a client's request is not
    queue = argument_facts("ssh_exec", {"host": "login", "command": "sleep 300; squeue -j 4418207 -h -o '%T'"},
                           CallFacts("ssh_exec", False, False))
    assert queue.waits_first and queue.read and not queue.write
    for acting in ("sleep 300; curl -X POST https://x/api", "sleep 300; squeue -j 1; scancel 1",
                   "sleep 60; nvidia-smi -r -i 0", "sleep 60; du -sh /data > /tmp/size"):
        # a request, a cancel after the look, a GPU reset, a file written: no mere look
        assert not argument_facts("ssh_exec", {"host": "login", "command": acting},
                                  CallFacts("ssh_exec", False, False)).waits_first, acting

    def laps(tail: str) -> list[str]:
        engine = Engine(parse_policy_set('mode = "warn"\n'))
        out: list[str] = []
        at = 1000.0
        for lap in range(5):
            for command, answer in ((tail, "slurmdbd: converting step table for titan"),
                                    ("mysql -N -e 'SELECT state, time FROM processlist'", f"copy to tmp table\t{480 * lap}"),
                                    ("du -sh /var/lib/mysql/#sql-*.ibd | tail -1", f"{19 + 8 * lap}.8G\t#sql-1.ibd")):
                wait = 240.0 if command.startswith("sleep") else 3.0
                events = [ToolCall(session="c", tool="ssh_exec", args={"host": "db01", "command": command}, ts=at),
                          ToolResult(session="c", tool="ssh_exec", result=answer, ts=at + wait)]
                at += wait + 2
                out += [o.signal for e in events for o in engine.process(e, e.ts)
                        if isinstance(o, Alert) and o.severity == "critical"]
        return out

    assert laps("sleep 240; tail -n 2 /var/log/convert.log") == []
    assert laps("tail -n 2 /var/log/convert.log") != []


def test_a_wakeup_the_agent_schedules_is_a_wait() -> None:
    """A domain transfer watched as its user asked: its status read, then
    `schedule_wakeup(minutes=20)`, answered when the agent wakes, again and again while the
    transfer is pending. The wake-up is a wait, and the status after it a poll."""
    from streamguard.engine import Engine
    from streamguard.events import Alert, Text, ToolCall, ToolResult
    from streamguard.policy import parse_policy_set

    engine = Engine(parse_policy_set('mode = "warn"\n'))
    events: list[Any] = [Text(session="w", role="user", text="Keep an eye on the transfer and tell me when it lands.",
                              ts=1000.0)]
    at = 1001.0
    for _ in range(6):
        events += [ToolCall(session="w", tool="cf_registrar_get_domain", args={"domain": "kestrelpay.net"}, ts=at),
                   ToolResult(session="w", tool="cf_registrar_get_domain", ts=at + 1,
                              result={"transfer_in": {"approve_transfer": "pending"}}),
                   ToolCall(session="w", tool="schedule_wakeup", args={"minutes": 20, "note": "recheck"}, ts=at + 3),
                   ToolResult(session="w", tool="schedule_wakeup", result={"scheduled": True}, ts=at + 1203)]
        at += 1205
    assert [o.signal for e in events for o in engine.process(e, e.ts)
            if isinstance(o, Alert) and o.severity == "critical"] == []
