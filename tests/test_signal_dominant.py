"""dominant-tool-call: one call making up most of a recent window."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamguard.canonical import canonicalize, stable_hash
from streamguard.events import Alert, ToolCall
from streamguard.policy import Policy
from streamguard.signals.base import CallView
from streamguard.signals.cycle import AlternatingToolCycle
from streamguard.signals.dominant import DominantToolCall
from streamguard.signals.repeat import RepeatedToolCall
from streamguard.signals.tool_name import RepeatedToolName
from streamguard.watchdog import Watchdog
from tests.harness import Driver

Config = DominantToolCall.Config
FORBIDDEN_IN_GUIDANCE = ("/interrupt", "--max-turn-cost-usd", "cost ceiling", "operator", "threshold")

Call = tuple[str, Any]


def c(name: str) -> Call:
    """One call per name: tool ``t<name>`` with fixed arguments."""
    return (f"t{name}", {"id": name})


def seq(text: str) -> list[Call]:
    """``"a*5 b a a"`` → calls; ``x*n`` repeats a name."""
    out: list[Call] = []
    for word in text.split():
        name, _, times = word.partition("*")
        out += [c(name)] * int(times or 1)
    return out


def interleaved(run: int, rounds: int, tag: str = "") -> list[Call]:
    """``rounds`` × (``run`` identical calls, then one distinct filler)."""
    out: list[Call] = []
    for r in range(rounds):
        out += [("gke_list_clusters", {"project": "p"})] * run
        out.append(("read_file", {"path": f"notes{tag}-{r}.md"}))
    return out


def fired_at(calls: list[Call], signal: DominantToolCall | None = None, history: int | None = None) -> list[int]:
    driver = Driver(signal or DominantToolCall(), history)
    return [i for i, (tool, args) in enumerate(calls, 1) if driver.call(tool, args) is not None]


def drive(calls: list[Call], signal: DominantToolCall | None = None) -> Driver:
    driver = Driver(signal or DominantToolCall())
    for tool, args in calls:
        driver.call(tool, args)
    return driver


def all_ids(calls: list[Call]) -> list[str]:
    ids: list[str] = []
    for signal in (RepeatedToolCall(), AlternatingToolCycle(), DominantToolCall(), RepeatedToolName()):
        ids += drive(calls, signal).ids()  # type: ignore[arg-type]
    return ids


# --------------------------------------------------------------------------- reference cases


def test_interleaved_loop_is_caught_by_density_alone() -> None:
    calls = interleaved(4, 3)
    assert len(calls) == 15
    assert all_ids(calls) == ["dominant-tool-call"]
    finding = drive(calls).findings[0]
    assert finding.severity == "critical" and finding.scope == "session"
    assert finding.detail == {
        "tool": "gke_list_clusters", "count": 8, "window": 9, "threshold": 8,
        "args": '{"project":"p"}',
    }


def test_interleaved_four_four_alerts_by_call_twelve() -> None:
    fired = fired_at(interleaved(4, 4))
    assert len(fired) == 1 and fired[0] <= 12


def test_run_deference() -> None:
    calls = seq("a*5 g a*3 g a*2")
    assert fired_at(calls) == []
    assert all_ids(calls) == ["repeated-tool-call"]
    assert fired_at(calls, DominantToolCall(Config(defer_run=0))) == [9]
    assert fired_at(seq("a*12")) == []
    assert fired_at(seq("a*12"), DominantToolCall(Config(defer_run=0))) == [8]
    # A uniform window is not a cycle, so cycle deference never hides a pure run.
    assert fired_at(seq("a*12"), DominantToolCall(Config(defer_run=0, defer_cycle_period=4))) == [8]


def test_cycle_deference() -> None:
    calls = seq("a a b") * 4
    assert fired_at(calls) == []
    assert all_ids(calls) == ["alternating-tool-cycle"]
    assert fired_at(calls, DominantToolCall(Config(defer_cycle_period=0))) == [11]
    calls = seq("a a a b") * 3
    assert fired_at(calls) == []
    assert fired_at(calls, DominantToolCall(Config(defer_cycle_period=3))) == [10]


def test_period_five_belongs_to_density() -> None:
    calls = seq("a*4 b") * 3
    assert fired_at(calls) == [9]
    assert all_ids(calls) == ["dominant-tool-call"]


def test_density_fires_once_the_run_slides_out_of_the_window() -> None:
    calls = seq("a*5 b a a c a a d a a e a a f a a")
    assert fired_at(calls) == [13]


def test_legitimate_work_is_silent() -> None:
    varied = [("read_file", {"path": f"f{i % 5}.go"}) if i % 2 else ("grep", {"pattern": f"p{i % 3}"})
              for i in range(40)]
    assert fired_at(varied) == []
    assert fired_at([("read_file", {"path": f"pkg/f{i}.go"}) for i in range(12)]) == []
    poll = [("poll", {"job": 1}) if i % 2 else ("read_file", {"path": f"{i}.log"}) for i in range(40)]
    assert fired_at(poll) == []  # 6 of 12


def test_rearms_after_a_window_of_other_work() -> None:
    edits = [("edit_file", {"path": f"e{i}.go"}) for i in range(12)]
    first = interleaved(4, 6)
    calls = first + edits + interleaved(4, 6, tag="b")
    fired = fired_at(calls)
    assert len(fired) == 2
    assert fired[0] == 9 and fired[1] == len(first) + len(edits) + 9


def test_latch_holds_while_deferring() -> None:
    # Alert at 9, then a run of 5 forms (deferred), then slides out while the
    # same call still dominates: no second alert, the latch was kept.
    calls = seq("a*4 b a*4 a b a*4 b a a")
    signal = DominantToolCall()
    driver = Driver(signal)
    fired = []
    for i, (tool, args) in enumerate(calls, 1):
        if driver.call(tool, args) is not None:
            fired.append(i)
        if i >= 9:
            assert signal.is_latched(driver.state)
    assert fired == [9]


def test_ties_go_to_the_earliest_first_occurrence() -> None:
    signal = DominantToolCall(Config(window=8, threshold=3, defer_run=0, defer_cycle_period=0))
    driver = Driver(signal)
    fired = []
    for i, (tool, args) in enumerate(seq("a*3 b*3 x y z"), 1):
        if driver.call(tool, args) is not None:
            fired.append(i)
    # At call 6 `a` and `b` both have 3; `a` came first and is already reported.
    assert fired == [3, 9]
    assert [f.detail["tool"] for f in driver.findings] == ["ta", "tb"]


def test_spelling_mix_is_counted_by_cleaned_key() -> None:
    spellings = ["main.go", "./main.go", "dir/../main.go", "main.go/", "a/../main.go", ".//main.go"]
    calls: list[Call] = []
    i = 0
    for r in range(6):
        for _ in range(2 if r % 2 else 3):
            calls.append(("read_file", {"path": spellings[i % len(spellings)]}))
            i += 1
        calls.append(("grep", {"pattern": f"q{r}"}))
    literal: dict[str, int] = {}
    for _, args in calls:
        literal[args.get("path", "")] = literal.get(args.get("path", ""), 0) + 1
    assert max(literal.values()) < 8
    assert all_ids(calls) == ["dominant-tool-call"]


def test_state_stays_bounded() -> None:
    signal = DominantToolCall()
    driver = Driver(signal)
    big = {"path": "a.go", "content": "z" * 50_000}
    for i in range(500):
        driver.call("write_file", big if i % 3 else {"path": f"{i}.go"})
        assert len(driver.history) <= 12
        assert len(driver.state.cand_args.encode()) <= 200
    assert signal.history_needed() == 12
    assert not driver.state.ring
    assert len(driver.findings) == 1
    assert len(msgspec.msgpack.encode(driver.state)) < 400


def test_big_blobs_differing_in_the_middle_stay_distinct() -> None:
    head, tail = "h" * 25_000, "t" * 25_000
    x = ("write_file", {"content": head + "X" + tail})
    y = ("write_file", {"content": head + "Y" + tail})
    assert fired_at([x, y] * 6) == []
    driver = drive([x, y] * 6, DominantToolCall(Config(threshold=6, defer_cycle_period=0)))
    assert [f.detail["count"] for f in driver.findings] == [6]


@pytest.mark.parametrize(
    ("window", "threshold", "expected"),
    [(1, 1, (2, 2)), (12, 0, (12, 2)), (6, 99, (6, 6)), (12, 8, (12, 8)), (1000, 8, (64, 8))],
)
def test_clamps(window: int, threshold: int, expected: tuple[int, int]) -> None:
    signal = DominantToolCall(Config(window=window, threshold=threshold))
    assert (signal.window, signal.threshold) == expected


def test_negative_deference_is_off() -> None:
    signal = DominantToolCall(Config(defer_run=-1, defer_cycle_period=-3))
    assert (signal.defer_run, signal.defer_cycle_period) == (0, 0)
    assert fired_at(seq("a*12"), signal) == [8]


def test_policy_rejects_out_of_range_values() -> None:
    for bad in ({"window": 1}, {"threshold": 1}, {"defer_run": -1}, {"defer_cycle_period": -1},
                {"window": 65}):
        with pytest.raises(msgspec.ValidationError):
            msgspec.convert(bad, Config)
    assert msgspec.convert({"window": 20, "threshold": 10}, Config).window == 20


def test_exempt_tools_are_invisible() -> None:
    calls = [x for _ in range(8) for x in (c("a"), ("poll", {}))]
    assert fired_at(calls, DominantToolCall(Config(defer_run=0))) == []  # 6 of 12
    signal = DominantToolCall(Config(defer_run=0, exempt_tools=["poll"]))
    assert signal.history_needed() == 0
    assert fired_at(calls, signal) == [15]  # the 8th visible `a`
    assert len(drive(calls * 5, signal).state.ring) == 12


def test_reset_starts_a_fresh_window() -> None:
    signal = DominantToolCall()
    driver = Driver(signal)
    for tool, args in seq("a*4 b a*3"):
        driver.call(tool, args)
    driver.state = signal.new_state()  # the shared ring is deliberately kept
    driver.call(*c("a"))
    assert driver.findings == []
    for tool, args in seq("a*3 b a*3"):
        driver.call(tool, args)
    assert driver.findings == []  # 7 of the 8 calls since the reset
    driver.call(*c("a"))
    assert len(driver.findings) == 1


def test_longer_shared_history_changes_nothing() -> None:
    calls = interleaved(4, 6) + seq("q r s t u v w x y z k l") + seq("a*5 b a a c a a d a a")
    assert fired_at(calls, history=40) == fired_at(calls)


def test_reason_and_guidance() -> None:
    finding = drive(interleaved(4, 3)).findings[0]
    assert "halting controller" in finding.reason
    assert "gke_list_clusters" in finding.reason and "8 of the last 9" in finding.reason
    guidance = finding.guidance.lower()
    for word in FORBIDDEN_IN_GUIDANCE:
        assert word not in guidance
    assert "gke_list_clusters" in finding.guidance and '{"project":"p"}' in finding.guidance


def test_would_trip_previews_without_mutation() -> None:
    signal = DominantToolCall()
    driver = Driver(signal)
    for tool, args in seq("a*4 b a*3"):
        driver.call(tool, args)
    before = msgspec.msgpack.encode(driver.state)

    def view(call: Call) -> CallView:
        canonical = canonicalize(call[1])
        key = stable_hash(call[0], canonical.text)
        history = [*driver.history, key][-driver.capacity :]
        return CallView(ToolCall(session="s", tool=call[0], args=call[1]), canonical, key, history, None)

    assert signal.would_trip(driver.state, view(c("a")))
    assert not signal.would_trip(driver.state, view(c("b")))
    assert msgspec.msgpack.encode(driver.state) == before
    driver.call(*c("a"))
    assert len(driver.findings) == 1
    assert signal.would_trip(driver.state, view(c("c")))  # still 8 of the window


# --------------------------------------------------------------------------- model


def model(keys: str, window: int, threshold: int, defer_run: int, defer_cycle: int) -> list[int]:
    """The rule, literally: recount the whole window on every call."""
    fired, latched = [], None
    for n in range(1, len(keys) + 1):
        w = keys[max(0, n - window) : n]
        order = list(dict.fromkeys(w))
        top = max(order, key=w.count)  # first of the maxima: earliest first occurrence
        if w.count(top) < threshold:
            latched = None
            continue
        run = longest = 0
        for ch in w:
            run = run + 1 if ch == top else 0
            longest = max(longest, run)
        if defer_run and longest >= defer_run:
            continue
        cyclic = any(
            all(w[i] == w[i + p] for i in range(len(w) - p)) and len(set(w[:p])) > 1
            for p in range(2, min(defer_cycle, len(w) - 1) + 1)
        )
        if defer_cycle and cyclic:
            continue
        if latched == top:
            continue
        latched = top
        fired.append(n)
    return fired


@st.composite
def configs(draw: Any) -> tuple[int, int, int, int]:
    window = draw(st.integers(2, 12))
    threshold = draw(st.integers(2, window))
    return window, threshold, draw(st.integers(0, 6)), draw(st.integers(0, 5))


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="aaabcd", max_size=45), configs())
def test_matches_the_literal_rule(keys: str, config: tuple[int, int, int, int]) -> None:
    window, threshold, defer_run, defer_cycle = config
    signal = DominantToolCall(Config(window=window, threshold=threshold, defer_run=defer_run,
                                     defer_cycle_period=defer_cycle))
    driver = Driver(signal)
    fired = []
    for i, ch in enumerate(keys, 1):
        finding = driver.call(*c(ch))
        if finding is not None:
            fired.append(i)
            if 2 * threshold > window:  # a single key can dominate: its text is always kept
                assert finding.detail["tool"].startswith("t")
    assert fired == model(keys, window, threshold, defer_run, defer_cycle)


# --------------------------------------------------------------------------- through the watchdog


def watchdog_alerts(calls: list[Call], restore_every: int = 0) -> list[tuple[int, str]]:
    """Alerts of the four call detectors run together by the watchdog (warn mode)."""
    watchdog = Watchdog(
        Policy(mode="warn"),
        classes=[RepeatedToolCall, AlternatingToolCycle, DominantToolCall, RepeatedToolName],
    )
    state = watchdog.new_state("s")
    out = []
    for i, (tool, args) in enumerate(calls, 1):
        if restore_every and i % restore_every == 0:
            state = watchdog.decode_state(watchdog.encode_state(state))
        for output in watchdog.process(state, ToolCall(session="s", tool=tool, args=args)):
            if isinstance(output, Alert):
                out.append((i, output.signal))
    return out


WATCHDOG_CASES = [
    pytest.param(
        [("read_file", {"path": p}) for p in
         ["main.go", "./main.go", "/workspace/main.go", "main.go", "dir/../main.go"]],
        [(5, "repeated-tool-call")], id="path-spellings",
    ),
    pytest.param(interleaved(4, 3), [(9, "dominant-tool-call")], id="interleaved-4-3"),
    pytest.param(seq("a a b") * 4, [(9, "alternating-tool-cycle")], id="aab-x4"),
    pytest.param(seq("a*4 b") * 3, [(9, "dominant-tool-call")], id="period-5"),
    pytest.param(seq("a*15"), [(5, "repeated-tool-call")], id="15-identical"),
    pytest.param(
        [("mark_task_done", {"detail": f"take {i}"}) for i in range(15)],
        [(15, "repeated-tool-name")], id="15-reworded",
    ),
    pytest.param(
        seq("a*5 b a a c a a d a a"),
        [(5, "repeated-tool-call"), (13, "dominant-tool-call")], id="run-slides-out",
    ),
]


@pytest.mark.parametrize(("calls", "expected"), WATCHDOG_CASES)
def test_one_behaviour_one_alert_through_the_watchdog(calls: list[Call], expected: list[tuple[int, str]]) -> None:
    assert watchdog_alerts(calls) == expected
    assert watchdog_alerts(calls, restore_every=3) == expected


def test_raw_config_values_from_library_users() -> None:
    signal = DominantToolCall(Config(window=10.0, threshold=None, defer_run="3", defer_cycle_period=None))  # type: ignore[arg-type]
    assert (signal.window, signal.threshold, signal.defer_run, signal.defer_cycle_period) == (10, 8, 3, 4)


def test_a_change_count_written_before_the_just_changed_flag_reads_the_same() -> None:
    # Earlier snapshots kept ``outcome << 8 | changes`` with up to 255 changes; the flag
    # for "the latest answer was new" is the sign, so every such value keeps its count.
    from types import SimpleNamespace

    from streamguard.signals.base import answer_just_changed, answer_keeps_changing

    for changes in (0, 1, 2, 127, 128, 129, 255):
        state = SimpleNamespace(answers={7: 0xABCDEF << 8 | changes})
        assert answer_keeps_changing(state, 7) is (changes >= 2)
        assert answer_just_changed(state, 7) is False


def test_a_status_read_between_waits_until_it_changes_is_a_poll() -> None:
    """A certificate's status read after each 20-second wait (a wait tool), with a look at
    the challenge and the ingress between, answering "Issuing" the same way until it is
    issued: each answer after a wait is a poll's, counted as a change. The same reads with
    no wait between them are the call crowding out everything else."""
    from streamguard.engine import Engine
    from streamguard.events import ToolResult, TurnStart
    from streamguard.policy import parse_policy_set

    status = ("NAME              READY   SECRET            ISSUER             STATUS\n"
              "api-gateway-tls   False   api-gateway-tls   letsencrypt-prod   Issuing certificate")
    read = {"resource_type": "certificate", "resource_name": "api-gateway-tls", "namespace": "edge"}

    def trace(wait: bool) -> list[Any]:
        out: list[Any] = [TurnStart(session="k")]
        n = 0
        for lap in range(14):
            if wait:
                n += 1
                out += [ToolCall(session="k", tool="wait_seconds", args={"seconds": 20}, call_id=f"c{n}"),
                        ToolResult(session="k", tool="wait_seconds", call_id=f"c{n}", result="waited 20s")]
            n += 1
            out += [ToolCall(session="k", tool="k8s_get_resources", args=read, call_id=f"c{n}"),
                    ToolResult(session="k", tool="k8s_get_resources", call_id=f"c{n}", result=status)]
            if lap % 3 == 2:
                n += 1
                out += [ToolCall(session="k", tool="k8s_get_resources", args={"resource_type": "challenges",
                                 "namespace": "edge", "lap": lap}, call_id=f"c{n}"),
                        ToolResult(session="k", tool="k8s_get_resources", call_id=f"c{n}",
                                   result=f"challenge {lap} pending")]
        return out

    def dominant(events: list[Any]) -> list[str]:
        engine = Engine(parse_policy_set('mode = "warn"\n'))
        return [o.severity for e in events for o in engine.process(e)
                if isinstance(o, Alert) and o.signal == "dominant-tool-call"]

    assert dominant(trace(wait=True)) == []
    assert "critical" in dominant(trace(wait=False))


# ------------------------------------------- an act that only reports itself


def feed(extracts: list[str], scrolls: int = 2, tool: str = "scroll_down",
         scrolled: str = "\U0001f50d  Scrolled down the page by one page") -> list[Any]:
    """browser-use collecting an infinite feed: two scrolls, then an extraction."""
    from streamguard.events import ToolResult

    trace: list[Any] = []
    for n, extract in enumerate(extracts):
        for _ in range(scrolls):
            trace += [ToolCall(session="d", tool=tool, args={}), ToolResult(session="d", tool=tool, result=scrolled)]
        trace += [ToolCall(session="d", tool="extract_content", args={"goal": f"posts after #{5 * n}"}),
                  ToolResult(session="d", tool="extract_content", result=extract)]
    return trace


def dominant_alerts(trace: list[Any]) -> list[str]:
    from tests.harness import engine_alerts

    policy = 'mode = "warn"\ndisabled_signals = ["result-stall", "tools-without-text", "long-loop"]\n'
    return [a.signal for a in engine_alerts(trace, policy, "d") if a.signal == "dominant-tool-call"]


def test_an_act_that_only_reports_itself_is_judged_by_what_the_others_see() -> None:
    """The scroll says "Scrolled down" every time, whether the feed moved or not: while
    the extractions between the scrolls list new posts, the feed moves; when they list
    the same posts, the scrolls are a loop."""
    moving = feed([f"posts: {chr(65 + n) * 3} by u/{chr(97 + n)}" for n in range(10)])
    assert dominant_alerts(moving) == []
    stuck = feed(["posts: the last five, end of feed"] * 10)  # reworded extractions, one answer
    assert dominant_alerts(stuck) == ["dominant-tool-call"]
    # one read made again and again, answered the same each time, is no movement either,
    # whatever another read says
    from streamguard.events import ToolResult

    def with_page_info(trace: list[Any]) -> list[Any]:
        out: list[Any] = []
        for event in trace:
            out.append(event)
            if isinstance(event, ToolResult) and event.tool == "extract_content":
                out += [ToolCall(session="d", tool="get_page_info", args={}),
                        ToolResult(session="d", tool="get_page_info", result="scrolled to 100% of the page")]
        return out

    moving_posts = [f"posts: {chr(65 + n) * 3}" for n in range(14)]
    assert dominant_alerts(feed(moving_posts, scrolls=4)) == []
    assert dominant_alerts(with_page_info(feed(moving_posts, scrolls=4))) == ["dominant-tool-call"]
    # a dominant call whose answer is data (not an act's report) trips as before,
    # whatever the others see
    read = feed([f"posts: {chr(65 + n) * 3}" for n in range(10)], tool="get_feed_status",
                scrolled='{"status": "ok", "items": 25}')
    assert dominant_alerts(read) == ["dominant-tool-call"]


# ------------------------------------------- answers stamped with the time they were given


def dead_job_reads(answers: list[str]) -> list[Any]:
    """A background job read (BashOutput) after sleeps, with a look at the results folder
    or the GPUs after every third read: the read fills three quarters of the calls."""
    from streamguard.events import ToolResult, TurnStart

    trace: list[Any] = [TurnStart(session="j")]
    for n, answer in enumerate(answers):
        trace += [ToolCall(session="j", tool="Bash", args={"command": f"sleep {60 + 30 * (n % 3)}"},
                           call_id=f"s{n}"),
                  ToolResult(session="j", tool="Bash", call_id=f"s{n}", result=""),
                  ToolCall(session="j", tool="BashOutput", args={"bash_id": "bash_1"}, call_id=f"r{n}"),
                  ToolResult(session="j", tool="BashOutput", call_id=f"r{n}", result=answer)]
        if n % 3 == 2:
            look = ("ls results/", "nvidia-smi --query-compute-apps=pid --format=csv")[n % 2]
            trace += [ToolCall(session="j", tool="Bash", args={"command": look}, call_id=f"l{n}"),
                      ToolResult(session="j", tool="Bash", call_id=f"l{n}", result="")]
    return trace


def test_a_dead_job_read_again_and_again_is_one_answer_whatever_time_it_tells() -> None:
    """Each read of a job that failed long ago says so with the time of the read
    (``<timestamp>``): compared exactly every answer was new, so the read looked like a
    poll of something moving and was never halted. What it says apart from when it was
    given is compared once the answer has changed."""
    dead = [f"<status>failed</status>\n\n<exit_code>1</exit_code>\n\n"
            f"<timestamp>2025-11-01T15:{20 + n:02d}:32.093Z</timestamp>" for n in range(14)]
    assert "dominant-tool-call" in dominant_alerts(dead_job_reads(dead))
    # a job whose output grows is watched, not replayed
    done = "task done\n"
    running = [f"<status>running</status>\n\n<stdout>\n{done * n}</stdout>\n\n"
               f"<timestamp>2025-11-01T15:{20 + n:02d}:32.093Z</timestamp>" for n in range(14)]
    assert dominant_alerts(dead_job_reads(running)) == []
    # and a figure that moves is news, not a time
    epochs = [f"epoch {n} loss 0.{90 - 3 * n}" for n in range(14)]
    assert dominant_alerts(dead_job_reads(epochs)) == []


def test_what_an_answer_says_of_time_is_news() -> None:
    """Only the runtime's stamp of when it read the answer is taken off: a heartbeat that
    moves, a run's timing and an answer sent with a digest are compared as sent (a first
    version that masked every timestamp, epoch and duration halted these)."""
    heartbeat = [f'{{"state": "busy", "last_heartbeat": "2025-11-01T15:{20 + n:02d}:05Z"}}' for n in range(14)]
    assert dominant_alerts(dead_job_reads(heartbeat)) == []
    timing = [f"real\t0m{1 + n % 3}.{n:03d}s\nuser\t0m0.{n + 100}s" for n in range(14)]
    assert dominant_alerts(dead_job_reads(timing)) == []
    # a stamp that does not close the answer is part of what it says
    opened = [f"<timestamp>2025-11-01T15:{20 + n:02d}:32Z</timestamp>\n<status>failed</status>" for n in range(14)]
    assert dominant_alerts(dead_job_reads(opened)) == []


def test_the_read_stamp_comparison_survives_a_snapshot() -> None:
    """A processor restored from a snapshot after every event halts the dead job's reads
    at the same call as one that never stopped."""
    from streamguard.engine import Engine
    from streamguard.policy import parse_policy_set

    dead = [f"<status>failed</status>\n<timestamp>2025-11-01T15:{20 + n:02d}:00Z</timestamp>"
            for n in range(14)]
    policy = parse_policy_set('mode = "warn"\ndisabled_signals = ["result-stall", '
                              '"tools-without-text", "long-loop"]\n')

    def positions(restore: bool) -> list[int]:
        engine = Engine(policy)
        calls, got = 0, []
        for event in dead_job_reads(dead):
            calls += isinstance(event, ToolCall)
            got += [calls for o in engine.process(event)
                    if isinstance(o, Alert) and o.signal == "dominant-tool-call"]
            data = engine.snapshot("j") if restore else None
            if data is not None:
                engine = Engine(policy)
                engine.restore("j", data)
        return got

    straight = positions(False)
    assert straight and positions(True) == straight
    # and a read whose answer changed twice (paging, not a loop) stays so after a restore
    dead[:3] = [f"<status>running</status>\n<stdout>{'x' * n}</stdout>" for n in (1, 2, 3)]
    assert positions(False) == positions(True) == []


def test_a_quiet_background_job_still_running_is_a_poll() -> None:
    """Claude Code's BashOutput answers only new output: a build printing nothing for a
    while answers `<status>running</status>` and the time of the read, again and again,
    with a look at a file between reads. Its status element says the work is under way,
    so asked again after a pause it is a poll, not a loop (once the stamp was taken off,
    it was halted at the twelfth call until the element was read as a status)."""
    from streamguard.engine import Engine
    from streamguard.events import ToolResult, TurnStart
    from streamguard.policy import parse_policy_set

    trace: list[Any] = [TurnStart(session="q")]
    clock = 1_000.0
    for n in range(24):
        if n % 3 == 2:
            tool, args, answer = "Read", {"file_path": f"src/m{n}.ts"}, f"export const m{n} = {n};"
        else:
            tool, args = "BashOutput", {"bash_id": "bash_1"}
            answer = (f"<status>running</status>\n\n<timestamp>2025-11-01T15:{n:02d}:05.000Z"
                      "</timestamp>")
        trace += [ToolCall(session="q", tool=tool, args=args, call_id=f"c{n}", ts=clock),
                  ToolResult(session="q", tool=tool, call_id=f"c{n}", result=answer, ts=clock + 0.2)]
        clock += 25.0
    engine = Engine(parse_policy_set('mode = "warn"\n'))
    got = [o.signal for e in trace for o in engine.process(e) if isinstance(o, Alert) and o.severity == "critical"]
    assert got == []


def test_the_runs_its_user_asked_for_are_no_dominant_call() -> None:
    """"Run it 10 more times": a flaky test re-run as asked, the log read between runs,
    is what the user asked for, within the count (as `repeated-tool-call` and `long-loop`
    wait past it); the same runs unasked dominate the window."""
    from streamguard.engine import Engine
    from streamguard.events import Text, ToolResult
    from streamguard.policy import parse_policy_set

    def runs(asked: bool) -> list[str]:
        engine = Engine(parse_policy_set('mode = "warn"\n'))
        out: list[Alert] = []
        clock = 1_000.0
        if asked:
            out += engine.process(Text(session="d", role="user", ts=clock,
                                       text="CI runs it with -n 4: run it 10 more times like that."))
        test = ("python -m pytest tests/test_dask.py::test_persist -q -n 4", "1 passed")
        for n in range(5):  # ten runs, two at a time, a log read after each pair
            for command, answer in (test, test, (f"tail -3 /tmp/run_{n}.log", f"worker gw{n % 4} finished")):
                clock += 5.0
                out += engine.process(ToolCall(session="d", tool="bash", args={"command": command},
                                               call_id=f"{n}{command[:4]}", ts=clock))
                out += engine.process(ToolResult(session="d", tool="bash", call_id=f"{n}{command[:4]}",
                                                 result=answer, ts=clock + 1))
        return [o.signal for o in out if isinstance(o, Alert) and o.severity == "critical"]

    assert "dominant-tool-call" not in runs(asked=True)
    assert "dominant-tool-call" in runs(asked=False)
