"""near-duplicate-calls: one target, varied only in numbers or spelling."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamguard.engine import Engine
from streamguard.events import Alert, Text, ToolCall, ToolResult, TurnStart
from streamguard.policy import PolicyError, parse_policy_set
from streamguard.signals.near_duplicate import shape
from streamguard.watchdog import Watchdog

WARN = 'mode = "warn"\ndisabled_signals = ["tools-without-text"]\n'
NAMES = ("alpha", "bravo", "carol", "delta", "echo", "fox", "golf", "hotel", "india", "juliet",
         "kilo", "lima", "mike", "nancy", "oscar", "papa")


def hits(trace: list[Any], policy: str = WARN) -> list[tuple[int, Alert]]:
    engine = Engine(parse_policy_set(policy))
    engine.process(TurnStart(session="n"))
    calls, out = 0, []
    for event in trace:
        calls += isinstance(event, ToolCall)
        out += [(calls, o) for o in engine.process(event)
                if isinstance(o, Alert) and o.signal == "near-duplicate-calls"]
    return out


CALL_ONLY = WARN + "[signals.near-duplicate-calls]\nresult_aware = false\n"
SAME_VIEW = "[File: src/app.py (34 lines total)]\n1: import os\n2: ..."


def sh(command: str, result: Any = None, *, error: str | None = None) -> list[Any]:
    """A shell call, its answer (by default one new to the session) and a word."""
    answer = f"lines of {command}" if result is None and error is None else result
    return [ToolCall(session="n", tool="bash", args={"command": command}),
            ToolResult(session="n", tool="bash", result=answer, error=error),
            Text(session="n", text="Reading on.")]


def same(command: str) -> list[Any]:
    """A shell call answered by the same view whatever its numbers (a short file)."""
    return sh(command, SAME_VIEW)


def page(n: int, path: str) -> str:
    """The command reading the ``n``-th fifty-line page of ``path``."""
    return f"sed -n '{n * 50 + 1},{n * 50 + 50}p' {path}"


def feed(watchdog: Watchdog, state: Any, events: list[Any]) -> list[str]:
    """Run ``events`` through ``watchdog`` on ``state``: the near-duplicate alerts."""
    return [o.signal for e in events for o in watchdog.process(state, e)
            if isinstance(o, Alert) and o.signal == "near-duplicate-calls"]


def handed_over(state: Any, writer: Watchdog, reader: Watchdog) -> Any:
    """``state`` through a snapshot written by ``writer`` and read by ``reader``."""
    return reader.decode_state(writer.encode_state(state))


def test_shapes() -> None:
    assert shape("sed -n '1,50p' src/app.py") == shape("sed -n '51,100p' src/app.py")
    assert shape('grep -rn "parseConfig" src/') == shape("grep -rni parse_config src")
    assert shape("grep -rn parseConfig src") != shape("grep -rn loadConfig src")
    assert shape('{"path":"a.py","view_range":[1,40]}') == shape('{"path":"a.py","view_range":[41,80]}')


def test_paging_that_shows_the_same_view_warns_at_the_eighth_page() -> None:
    trace: list[Any] = []
    for page in range(12):
        trace += same(f"sed -n '{page * 50 + 1},{page * 50 + 50}p' src/app.py")
    got = hits(trace)
    assert [at for at, _ in got] == [8]
    alert = got[0][1]
    assert alert.severity == "warn"
    assert alert.detail["count"] == 8 and "src/app.py" in alert.detail["target"]
    assert alert.detail["action"] == "sed"


def test_paging_through_new_content_is_reading() -> None:
    # Every page brings back lines the agent had not seen: a long log read in order.
    trace: list[Any] = []
    for page in range(30):
        trace += sh(f"sed -n '{page * 100 + 1},{page * 100 + 100}p' build.log")
    assert hits(trace) == []
    # The call-only rule (the reference behaviour of a scan) warns at the eighth page.
    assert [at for at, _ in hits(trace, CALL_ONLY)] == [8]


def test_a_walk_whose_pages_come_back_empty_or_failing_warns() -> None:
    empty: list[Any] = []
    failing: list[Any] = []
    for page in range(10):
        empty += sh(f"sed -n '{page * 50 + 1},{page * 50 + 50}p' short.py", "")
        failing += sh(f"goto {page * 100 + 40}", error="Error: <line> must be at most 34")
    assert [at for at, _ in hits(empty)] == [8]
    assert [at for at, _ in hits(failing)] == [8]


def test_one_empty_page_in_a_walk_is_still_reading() -> None:
    trace: list[Any] = []
    for page in range(9):
        trace += sh(f"sed -n '{page * 50 + 1},{page * 50 + 50}p' app.log")
    trace += sh("sed -n '451,500p' app.log", "")  # past the end
    assert hits(trace) == []


def test_a_walk_that_revisits_its_answers_warns() -> None:
    # Pages of a file whose views come round again: three views for eight offsets.
    trace: list[Any] = []
    for page in range(10):
        trace += sh(f"goto {page * 7 + 1}", f"[view {page % 3}]")
    assert [at for at, _ in hits(trace)] == [8]


def test_a_sweep_over_numbered_items_is_reading() -> None:
    orders: list[Any] = []
    labels: list[Any] = []
    for n in range(12):
        orders += [ToolCall(session="n", tool="get_order", args={"order_id": 1040 + n}),
                   ToolResult(session="n", tool="get_order",
                              result={"id": 1040 + n, "status": NAMES[n], "total": n * 7})]
        # Writes acknowledged alike: each changed another ticket.
        labels += [ToolCall(session="n", tool="add_ticket_label",
                            args={"ticket_id": 48120 + 3 * n, "label": "billing"}, kind="write"),
                   ToolResult(session="n", tool="add_ticket_label", result={"ok": True})]
    assert hits(orders) == []
    assert hits(labels) == []
    assert [at for at, _ in hits(orders, CALL_ONLY)] == [8]


def test_without_results_the_rule_is_the_call_only_one() -> None:
    # A runtime that publishes no results (or content capture off): nothing is known
    # to be new, so the walk warns as the call-only rule does.
    calls = [ToolCall(session="n", tool="bash", args={"command": f"sed -n '{p * 50},{p * 50 + 49}p' a.log"})
             for p in range(12)]
    assert [at for at, _ in hits(calls)] == [at for at, _ in hits(calls, CALL_ONLY)] == [8]


def test_reworded_searches_warn_whatever_they_answer() -> None:
    # A re-spelled search is no walk over numbers: new answers do not excuse it.
    spellings = ["parseConfig", "parse_config", "ParseConfig", "parse-config", "PARSE_CONFIG",
                 "parseconfig", "Parse_Config", "parse__config"]
    trace: list[Any] = []
    for s in spellings:
        trace += sh(f"grep -rn {s} src/", f'No matches found for "{s}" in /repo')
    assert [at for at, _ in hits(trace)] == [8]


def test_a_few_pages_are_reading() -> None:
    trace: list[Any] = []
    for page in range(7):
        trace += same(f"sed -n '{page * 50 + 1},{page * 50 + 50}p' src/app.py")
    for name in NAMES[:8]:
        trace += sh(f"cat src/{name}.py")
    for page in range(7):
        trace += same(f"sed -n '{page * 50 + 1},{page * 50 + 50}p' src/app.py")
    assert hits(trace) == []


def test_re_spelled_greps_warn() -> None:
    spellings = ["parseConfig", "parse_config", "ParseConfig", "parse-config", "PARSE_CONFIG",
                 "parseconfig", "Parse_Config", "parse__config"]
    flags = ["-rn", "-rni", "-r", "-rnw"]
    trace: list[Any] = []
    for i, s in enumerate(spellings):
        trace += sh(f"grep {flags[i % 4]} {s} src/")
    assert [at for at, _ in hits(trace)] == [8]


def test_distinct_targets_are_exploration() -> None:
    trace: list[Any] = []
    for name in NAMES:
        trace += sh(f"grep -rn {name} src/")
    assert hits(trace) == []


def test_editor_views_with_ranges() -> None:
    trace: list[Any] = []
    for page in range(10):
        trace += [ToolCall(session="n", tool="str_replace_editor",
                           args={"command": "view", "path": "/w/big.py",
                                 "view_range": [page * 40 + 1, page * 40 + 40]}),
                  ToolResult(session="n", tool="str_replace_editor", result=f"page {NAMES[page]}")]
    assert [at for at, _ in hits(trace, CALL_ONLY)] == [8]
    assert hits(trace) == []  # every page was new


def test_one_alert_per_scan_until_it_ends() -> None:
    trace: list[Any] = []
    for page in range(30):
        trace += same(f"goto {page * 100}")
    assert len(hits(trace)) == 1


def test_policy_validation_and_tuning() -> None:
    with pytest.raises(PolicyError, match="near-duplicate-calls"):
        parse_policy_set("[signals.near-duplicate-calls]\nwindow = 6\nthreshold = 7\n")
    trace: list[Any] = []
    for page in range(5):
        trace += same(f"goto {page * 100}")
    assert hits(trace, WARN + "[signals.near-duplicate-calls]\nthreshold = 4\n")


def test_snapshot_round_trip() -> None:
    watchdog = Watchdog(parse_policy_set(WARN).base)
    state = watchdog.new_state("n")
    trace: list[Any] = [e for n in range(8) for e in same(f"goto {n * 100}")]
    assert feed(watchdog, state, trace[:-3]) == []
    restored = handed_over(state, watchdog, watchdog)
    assert feed(watchdog, restored, trace[-3:]) == ["near-duplicate-calls"]


def test_a_snapshot_without_answers_reads_as_unanswered() -> None:
    # A snapshot written before answers were kept (or by a call-only policy) restores
    # with its calls and no answers: the walk is judged as the call-only rule would.
    call_only = Watchdog(parse_policy_set(CALL_ONLY).base)
    aware = Watchdog(parse_policy_set(WARN).base)
    state = call_only.new_state("n")
    trace: list[Any] = [e for n in range(9) for e in sh(page(n, "app.log"))]
    assert feed(call_only, state, trace[:-6]) == []
    restored = handed_over(state, call_only, aware)
    assert feed(aware, restored, trace[-6:]) == ["near-duplicate-calls"]


_COMMANDS = st.sampled_from(["goto {n}", "sed -n '{n},{m}p' a.log", "grep -rn item{n} src/",
                              "grep -rni Item_{n} src/", "cat notes{n}.md"])


@settings(max_examples=80, deadline=None)
@given(steps=st.lists(st.tuples(_COMMANDS, st.integers(0, 40), st.booleans()), max_size=40))
def test_result_aware_never_warns_earlier_and_matches_without_results(
    steps: list[tuple[str, int, bool]],
) -> None:
    calls = [ToolCall(session="n", tool="bash",
                      args={"command": command.format(n=n, m=n + 49)}) for command, n, _ in steps]
    # Without results the two rules are one rule.
    assert [at for at, _ in hits(calls)] == [at for at, _ in hits(calls, CALL_ONLY)]
    # With results, an answer can only excuse a walk: the first warning is never earlier.
    answered: list[Any] = []
    for call, (_, n, fresh) in zip(calls, steps, strict=True):
        answered += [call, ToolResult(session="n", tool="bash",
                                      result=f"view {n}" if fresh else "the same view")]
    aware, call_only = hits(answered), hits(answered, CALL_ONLY)
    if aware:
        assert call_only and aware[0][0] >= call_only[0][0]


def test_answers_of_parallel_calls_reach_their_own_calls() -> None:
    # Pages requested two at a time, answered in reverse order: each answer is filed
    # under its own call, so a walk through new pages stays reading, and one whose
    # second page of every pair repeats the first warns.
    def walk(answer: Any) -> list[Any]:
        trace: list[Any] = []
        for pair in range(6):
            ids = [f"c{pair}a", f"c{pair}b"]
            pages = [pair * 2, pair * 2 + 1]
            trace += [ToolCall(session="n", tool="read_log", call_id=cid,
                               args={"offset": page * 100, "limit": 100})
                      for cid, page in zip(ids, pages, strict=True)]
            trace += [ToolResult(session="n", tool="read_log", call_id=cid, result=answer(page))
                      for cid, page in reversed(list(zip(ids, pages, strict=True)))]
        return trace

    assert hits(walk(lambda page: f"log lines {page}00 to {page}99")) == []
    assert [at for at, _ in hits(walk(lambda page: f"log lines {page // 2}"))] == [8]


def test_answers_kept_by_a_result_aware_policy_do_not_outlive_a_call_only_one() -> None:
    # A session moved to a call-only policy and back: the answers the first policy kept
    # are dropped when the call-only one slides the window, not read against new calls.
    aware, call_only = (Watchdog(parse_policy_set(p).base) for p in (WARN, CALL_ONLY))
    state = aware.new_state("n")
    assert feed(aware, state, [e for n in range(12) for e in sh(page(n, "build.log"))]) == []
    state = handed_over(state, aware, call_only)
    feed(call_only, state, [e for name in NAMES[:8] for e in sh(f"ls {name}")])
    feed(call_only, state, [e for n in range(12, 19) for e in sh(page(n, "build.log"), "")])
    state = handed_over(state, call_only, aware)
    assert feed(aware, state, sh(page(19, "build.log"), "")) == ["near-duplicate-calls"]
