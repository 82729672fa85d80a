from __future__ import annotations

from collections.abc import Callable

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamguard.signals.base import SignalConfig, overrides
from streamguard.signals.noop_streak import NoOpStreak
from tests.harness import Driver

Config = NoOpStreak.Config
State = NoOpStreak.State

OPERATOR_WORDS = ("threshold", "policy", "operator", "/interrupt", "reset", "exempt", "--")


def driver(threshold: int | None = None, **config: object) -> Driver:
    if threshold is not None:
        config["threshold"] = threshold
    return Driver(NoOpStreak(Config(**config)))


def noop(d: Driver, tool: str = "mark_task_done") -> object:
    return d.result(tool, result={"status": "already recorded for this turn"}, no_op=True)


def ok(d: Driver, tool: str = "read_file") -> object:
    return d.result(tool, result={"content": "package main"})


def fail(d: Driver, tool: str = "mark_task_done") -> object:
    return d.result(tool, error="agent not bound")


# --------------------------------------------------------------------- identity


def test_identity_and_defaults() -> None:
    signal = NoOpStreak()
    assert signal.id == "no-op-streak"
    assert signal.severity == "critical"
    assert signal.scope == "turn"
    assert signal.threshold == 3
    assert signal.defers_to == ()
    assert isinstance(signal.new_state(), State)
    assert State.__struct_config__.tag == "no-op-streak"
    assert overrides(signal, "on_result")
    for hook in ("on_call", "on_text", "on_turn_start", "on_turn_end"):
        assert not overrides(signal, hook)


# --------------------------------------------------------------------- counts


def test_two_silent_third_trips_critical_turn_scoped() -> None:
    d = driver()
    assert noop(d) is None
    assert noop(d) is None
    finding = noop(d)
    assert finding is not None
    assert finding.signal == "no-op-streak"
    assert finding.severity == "critical"
    assert finding.scope == "turn"
    assert finding.detail == {"count": 3, "threshold": 3, "tools": ["mark_task_done"]}


def test_thirteen_no_ops_one_alert() -> None:
    d = driver()
    for _ in range(13):
        noop(d)
    assert len(d.findings) == 1


def test_productive_result_breaks_the_streak() -> None:
    d = driver()
    noop(d)
    noop(d)
    ok(d)
    noop(d)
    noop(d)
    assert d.findings == []
    assert noop(d) is not None


def test_failure_breaks_the_streak() -> None:
    d = driver()
    noop(d)
    noop(d)
    fail(d)
    noop(d)
    noop(d)
    assert d.findings == []


def test_failed_result_flagged_no_op_is_a_failure_not_a_no_op() -> None:
    d = driver()
    noop(d)
    noop(d)
    assert d.result("mark_task_done", error="agent not bound", no_op=True) is None
    noop(d)
    noop(d)
    assert d.findings == []


def test_streak_spans_tools() -> None:
    d = driver()
    noop(d, "mark_task_done")
    noop(d, "record_plan")
    finding = noop(d, "mark_task_done")
    assert finding is not None
    assert finding.detail["tools"] == ["mark_task_done", "record_plan"]
    assert "record_plan" in finding.guidance and "mark_task_done" in finding.guidance


def test_mixed_workload_is_silent() -> None:
    d = driver()
    for kind in ("noop", "ok", "noop", "noop", "ok", "fail", "noop", "ok", "noop", "noop"):
        {"noop": noop, "ok": ok, "fail": fail}[kind](d)
    assert d.findings == []


def test_recorded_905_trace_raises_two() -> None:
    d = driver()
    d.result("mark_task_done", result={"status": "recorded"})
    for _ in range(7):
        noop(d)
    d.result("read_file", result={"content": "apiVersion: v1"})
    for _ in range(6):
        noop(d)
    assert len(d.findings) == 2
    for finding in d.findings:
        assert "mark_task_done" in finding.guidance


def test_arguments_and_calls_never_matter() -> None:
    d = driver()
    for i in range(3):
        d.call("mark_task_done", {"detail": f"reworded summary {i}"})
        noop(d)
    assert len(d.findings) == 1


def test_text_and_turn_start_do_not_break_the_streak() -> None:
    d = driver()
    noop(d)
    d.text("recording the checkpoint")
    noop(d)
    d.turn_start()
    assert noop(d) is not None


def test_reset_rearms() -> None:
    d = driver()
    for _ in range(3):
        noop(d)
    assert len(d.findings) == 1
    d.reset()
    noop(d)
    noop(d)
    assert len(d.findings) == 1
    assert noop(d) is not None


def test_is_latched_follows_the_streak() -> None:
    d = driver()
    noop(d)
    noop(d)
    assert not d.signal.is_latched(d.state)
    noop(d)
    assert d.signal.is_latched(d.state)
    ok(d)
    assert not d.signal.is_latched(d.state)


# --------------------------------------------------------------------- text


def test_texts() -> None:
    d = driver()
    for _ in range(3):
        finding = noop(d)
    assert finding is not None
    assert "3 tool results" in finding.reason
    assert "mark_task_done" in finding.reason
    assert finding.reason.count("mark_task_done") == 1
    assert "mark_task_done" in finding.guidance
    lowered = finding.guidance.lower()
    for word in OPERATOR_WORDS:
        assert word not in lowered


def test_unnamed_tool() -> None:
    d = driver()
    for _ in range(3):
        finding = noop(d, "")
    assert finding is not None
    assert "unnamed tool" in finding.guidance


def test_long_tool_names_are_truncated_and_names_bounded() -> None:
    d = driver()
    for i in range(50):
        noop(d, f"{i}-" + "x" * 5000)
    assert len(d.state.tools) <= 3
    assert all(len(name.encode()) <= 64 for name in d.state.tools)
    assert len(msgspec.msgpack.encode(d.state)) <= 2048


# --------------------------------------------------------------------- config


@pytest.mark.parametrize(("raw", "effective"), [(-3, 2), (0, 2), (1, 2), (2, 2), (5, 5)])
def test_threshold_clamp(raw: int, effective: int) -> None:
    signal = NoOpStreak(Config(threshold=raw))
    assert signal.threshold == effective
    assert signal.config.threshold == effective


def test_clamp_one_first_silent_second_trips() -> None:
    d = driver(1)
    assert noop(d) is None
    assert noop(d) is not None


@pytest.mark.parametrize(("raw", "effective"), [("abc", 3), (None, 3), ("4", 4), (4.9, 4), (True, 2)])
def test_raw_config_values_from_direct_construction(raw: object, effective: int) -> None:
    # msgspec does not validate on direct construction; the signal must cope
    assert NoOpStreak(Config(threshold=raw)).threshold == effective  # type: ignore[arg-type]


def test_policy_validation_rejects_out_of_range() -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"threshold": 1}, Config)
    assert msgspec.convert({"threshold": 4}, Config).threshold == 4


def test_plain_signal_config_is_accepted() -> None:
    assert NoOpStreak(SignalConfig()).threshold == 3


def test_exempt_tools_are_invisible() -> None:
    d = driver(exempt_tools=["converge"])
    noop(d)
    noop(d)
    assert noop(d, "converge") is None  # neither counts
    ok(d, "converge")  # nor resets
    assert noop(d) is not None


# --------------------------------------------------------------------- invariant

outcome = st.sampled_from(["noop", "ok", "fail", "failnoop", "call", "text", "turn"])


@given(st.lists(outcome, max_size=60), st.integers(min_value=-2, max_value=6))
def test_one_alert_per_no_op_run_at_least_threshold(events: list[str], raw: int) -> None:
    d = driver(raw)
    threshold = max(2, raw)
    expected = 0
    run = 0
    for event in events:
        if event == "noop":
            noop(d)
            run += 1
            if run == threshold:
                expected += 1
        elif event == "ok":
            ok(d)
            run = 0
        elif event == "fail":
            fail(d)
            run = 0
        elif event == "failnoop":
            d.result("mark_task_done", error="boom", no_op=True)
            run = 0
        elif event == "call":
            d.call("mark_task_done")
        elif event == "text":
            d.text()
        else:
            d.turn_start()
        assert d.signal.is_latched(d.state) == (run >= threshold)
    assert len(d.findings) == expected


def test_a_sweep_whose_no_ops_each_name_their_item_is_no_streak() -> None:
    """An update per provider of a directory, most answering that nothing changed, each
    answer naming its provider: the sweep converging item by item. The same refusal
    heard again, or no-ops that say nothing, still trip at the threshold."""
    d = driver()
    for n in range(12):
        assert d.result("directory_update_provider", result={"npi": f"13054012{n:02d}", "updated_fields": []},
                        no_op=True) is None
    d = driver()
    found = [noop(d) for _ in range(3)]
    assert found[:2] == [None, None] and found[2] is not None
    d = driver()
    d.result("update", result={"id": "a"}, no_op=True)
    d.result("update", result={"id": "b"}, no_op=True)
    d.result("update", result={"id": "a"}, no_op=True)  # an item again: the streak counts on
    assert d.result("update", result={"id": "a"}, no_op=True) is not None


def test_no_ops_of_a_sweeps_acts_about_other_items_are_each_items_answer() -> None:
    """Receipts attached one by one, several answered alike "already attached" (flagged
    no-op): each receipt's answer. The same receipt attached again and again, or a task
    marked done in reworded words each time, are the same no-op again."""
    from streamguard.engine import Engine
    from streamguard.events import Alert, ToolCall, ToolResult
    from streamguard.policy import parse_policy_set

    def run(args_of: Callable[[int], dict[str, object]]) -> list[str]:
        engine = Engine(parse_policy_set('mode = "warn"\n'))
        out: list[str] = []
        for n in range(8):
            call_id = f"c{n}"
            events = [ToolCall(session="n", tool="qbo_attach_receipt", args=args_of(n), call_id=call_id, kind="write"),
                      ToolResult(session="n", tool="qbo_attach_receipt", call_id=call_id, no_op=True,
                                 result={"status": "skipped", "reason": "already_attached"})]
            out += [o.signal for e in events for o in engine.process(e) if isinstance(o, Alert)]
        return out

    assert "no-op-streak" not in run(lambda n: {"receipt_id": f"dx_7120{n:02d}", "match": {"amount": 76.07 + n}})
    assert "no-op-streak" not in run(lambda n: {"market_id": f"61299001-total_goals_{n}.5"})
    assert "no-op-streak" in run(lambda n: {"receipt_id": "dx_712000", "match": {"amount": 76.07 + n}})
    assert "no-op-streak" in run(lambda n: {"task_id": "T-4", "summary": f"Marked the task as done, take {n}"})


def test_a_no_ops_own_time_or_nonce_names_no_item() -> None:
    """The same task marked done again and again, each call stamped with the time it was
    sent (`done_at`) or an idempotency key: one no-op again, a streak."""
    from streamguard.engine import Engine
    from streamguard.events import Alert, ToolCall, ToolResult
    from streamguard.policy import parse_policy_set

    def run(args_of: Callable[[int], dict[str, object]]) -> list[str]:
        engine = Engine(parse_policy_set('mode = "warn"\n'))
        out: list[str] = []
        for n in range(8):
            events = [ToolCall(session="n", tool="mark_task_done", args=args_of(n), call_id=f"c{n}", kind="write"),
                      ToolResult(session="n", tool="mark_task_done", call_id=f"c{n}", no_op=True,
                                 result={"status": "skipped", "reason": "already_done"})]
            out += [o.signal for e in events for o in engine.process(e) if isinstance(o, Alert)]
        return out

    assert "no-op-streak" in run(lambda n: {"task_id": "T-7", "done_at": f"2025-03-01T10:{n:02d}:00Z"})
    assert "no-op-streak" in run(lambda n: {"task_id": "T-7", "idempotency_key": f"k{n}x9", "ts": 1733000000 + n})


def test_a_command_s_no_op_is_its_own_line_s() -> None:
    """Card statements imported one by one through a shell, several answering that every
    row was already there: each line names its file, so each no-op is that file's. The
    same line answered so again and again is one no-op again."""
    from streamguard.engine import Engine
    from streamguard.events import Alert, ToolCall, ToolResult
    from streamguard.policy import parse_policy_set

    def run(command_of: Callable[[int], str]) -> list[str]:
        engine = Engine(parse_policy_set('mode = "warn"\n'))
        out: list[str] = []
        for n in range(8):
            call_id = f"c{n}"
            events = [ToolCall(session="n", tool="run_command", args={"cmd": command_of(n)}, call_id=call_id),
                      ToolResult(session="n", tool="run_command", call_id=call_id, no_op=True,
                                 result='{"exit_code": 0, "stdout": "imported 0 new rows (all rows already present)"}')]
            out += [o.signal for e in events for o in engine.process(e) if isinstance(o, Alert)]
        return out

    def each(n: int) -> str:
        return f"finops import-bank --account CARD-AMEX --file /data/inbound/amex/amex_holder{n}_202510.csv"

    assert "no-op-streak" not in run(each)
    assert "no-op-streak" in run(lambda n: each(0))
