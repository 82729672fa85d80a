"""near-duplicate-calls: one target, varied only in numbers or spelling."""

from __future__ import annotations

from typing import Any

import pytest

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


def sh(command: str) -> list[Any]:
    return [ToolCall(session="n", tool="bash", args={"command": command}),
            ToolResult(session="n", tool="bash", result=f"lines of {command!r}"),
            Text(session="n", text="Reading on.")]


def test_shapes() -> None:
    assert shape("sed -n '1,50p' src/app.py") == shape("sed -n '51,100p' src/app.py")
    assert shape('grep -rn "parseConfig" src/') == shape("grep -rni parse_config src")
    assert shape("grep -rn parseConfig src") != shape("grep -rn loadConfig src")
    assert shape('{"path":"a.py","view_range":[1,40]}') == shape('{"path":"a.py","view_range":[41,80]}')


def test_paging_through_one_file_warns_at_the_eighth_page() -> None:
    trace: list[Any] = []
    for page in range(12):
        trace += sh(f"sed -n '{page * 50 + 1},{page * 50 + 50}p' src/app.py")
    got = hits(trace)
    assert [at for at, _ in got] == [8]
    alert = got[0][1]
    assert alert.severity == "warn"
    assert alert.detail["count"] == 8 and "src/app.py" in alert.detail["target"]
    assert alert.detail["action"] == "sed"


def test_a_few_pages_are_reading() -> None:
    trace: list[Any] = []
    for page in range(7):
        trace += sh(f"sed -n '{page * 50 + 1},{page * 50 + 50}p' src/app.py")
    for name in NAMES[:8]:
        trace += sh(f"cat src/{name}.py")
    for page in range(7):
        trace += sh(f"sed -n '{page * 50 + 1},{page * 50 + 50}p' src/app.py")
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
    assert [at for at, _ in hits(trace)] == [8]


def test_one_alert_per_scan_until_it_ends() -> None:
    trace: list[Any] = []
    for page in range(30):
        trace += sh(f"goto {page * 100}")
    assert len(hits(trace)) == 1


def test_policy_validation_and_tuning() -> None:
    with pytest.raises(PolicyError, match="near-duplicate-calls"):
        parse_policy_set("[signals.near-duplicate-calls]\nwindow = 6\nthreshold = 7\n")
    trace: list[Any] = []
    for page in range(5):
        trace += sh(f"goto {page * 100}")
    assert hits(trace, WARN + "[signals.near-duplicate-calls]\nthreshold = 4\n")


def test_snapshot_round_trip() -> None:
    watchdog = Watchdog(parse_policy_set(WARN).base)
    state = watchdog.new_state("n")
    trace: list[Any] = []
    for page in range(8):
        trace += sh(f"goto {page * 100}")
    for event in trace[:-3]:
        watchdog.process(state, event)
    restored = watchdog.decode_state(watchdog.encode_state(state))
    out = [o for e in trace[-3:] for o in watchdog.process(restored, e) if isinstance(o, Alert)]
    assert [o.signal for o in out] == ["near-duplicate-calls"]
