"""write-cycle: the agent's writes go round, each one a change it already made."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from streamguard.engine import Engine
from streamguard.events import Alert, ToolCall, ToolResult, TurnStart
from streamguard.policy import parse_policy_set
from streamguard.signals.write_cycle import WriteCycle

SIGNAL = "write-cycle"
QUIET = 'mode = "warn"\ndisabled_signals = ["tools-without-text"]\n'


class Trace:
    def __init__(self) -> None:
        self.events: list[Any] = []
        self.n = 0

    def pair(self, tool: str, args: Any, result: Any = None, error: str | None = None) -> None:
        self.n += 1
        cid = f"c{self.n}"
        self.events += [ToolCall(session="w", tool=tool, args=args, call_id=cid),
                        ToolResult(session="w", tool=tool, call_id=cid, result=result, error=error)]


def alerts(trace: Trace, policy: str = QUIET) -> list[tuple[int, str, str]]:
    """(call number, signal, severity) of every alert."""
    engine = Engine(parse_policy_set(policy))
    engine.process(TurnStart(session="w"))
    calls = 0
    out: list[tuple[int, str, str]] = []
    for event in trace.events:
        if isinstance(event, ToolCall):
            calls += 1
        out += [(calls, o.signal, o.severity) for o in engine.process(event) if isinstance(o, Alert)]
    return out


def cycle_at(trace: Trace, policy: str = QUIET) -> list[int]:
    return [n for n, signal, _ in alerts(trace, policy) if signal == SIGNAL]


def flip_flop(laps: int, server: str = "") -> Trace:
    """Buy and sell the same 50 shares on every tick of a quote that keeps moving
    (through an MCP server's tools when ``server`` names one)."""
    t = Trace()
    prefix = f"mcp__{server}__" if server else ""
    t.pair(f"{prefix}get_account", {}, {"buying_power": "96400.00"})
    venues = "ZVQNKP"
    for lap in range(laps):
        if lap % 3 == 1:  # the bars re-read now and then: no lap is the last one again
            t.pair(f"{prefix}get_bars", {"symbol": "TSLA", "timeframe": "5Min"}, {"bars": [256.28, 256.6]})
        for side in ("buy", "sell"):
            # each quote from another venue: the quotes move, so the cycle detector reads
            # the laps as polling until they come round
            t.pair(f"{prefix}get_quote", {"symbol": "TSLA"},
                   {"ap": 256.42 + lap / 10, "ax": venues[(2 * lap + (side == "sell")) % 6]})
            t.pair(f"{prefix}place_order", {"symbol": "TSLA", "qty": 50, "side": side, "type": "market"},
                   {"id": f"ord-{lap}-{side}", "status": "accepted"})
    return t


@pytest.mark.parametrize("server", ["", "alpaca"])
def test_buying_and_selling_the_same_order_again_and_again_trips_at_the_sixth_order(server: str) -> None:
    got = alerts(flip_flop(8, server))
    assert next((n, s) for n, s, severity in got if severity == "critical") == (14, SIGNAL)
    # the sixth order is the fourteenth call: the account, the bars once, a quote before
    # each order


def test_an_edit_flipped_back_and_forth_between_runs_that_crash_alike() -> None:
    t = Trace()
    t.pair("Read", {"file_path": "exploit.py"}, "OFFSET = 40\n")
    for lap in range(6):
        for old, new in (("OFFSET = 40", "OFFSET = 44"), ("OFFSET = 44", "OFFSET = 40")):
            t.pair("Edit", {"file_path": "exploit.py", "old_string": old, "new_string": new},
                   "The file exploit.py has been updated.")
            t.pair("Bash", {"command": "python3 exploit.py"},
                   f"[+] Starting local process './canteen': pid {5150 + lap * 7}\n"
                   "[*] Process './canteen' stopped with exit code -11 (SIGSEGV)")
    assert cycle_at(t) == [12]


def test_edits_never_made_before_are_work() -> None:
    """Edit, re-run, fail differently, edit again: every change is new."""
    t = Trace()
    for attempt in range(12):
        t.pair("Edit", {"file_path": "calc.py", "old_string": f"v{attempt}", "new_string": f"v{attempt + 1}"},
               "The file calc.py has been updated.")
        t.pair("Bash", {"command": "pytest -q"}, f"1 failed: expected {attempt + 1}")
    assert cycle_at(t) == []


WAYPOINTS = [{"x": 1.5, "y": 0.5}, {"x": 14.2, "y": 0.8}, {"x": 18.6, "y": 6.1}, {"x": 12.0, "y": 11.4},
             {"x": 3.3, "y": 10.9}]


def test_a_patrol_gone_round_twice_is_a_second_pass_not_a_cycle() -> None:
    t = Trace()
    for lap in range(2):
        for goal in WAYPOINTS:
            t.pair("send_nav_goal", goal, {"accepted": True})
            t.pair("get_pose", {}, {"x": goal["x"], "y": goal["y"], "lap": lap})
    assert cycle_at(t) == []
    # a third lap comes back to waypoints the second lap already went to again
    for goal in WAYPOINTS[:2]:
        t.pair("send_nav_goal", goal, {"accepted": True})
    assert cycle_at(t) == [21]


def test_a_read_of_something_new_ends_the_run() -> None:
    """Each record of a sweep opened by its own address: the same few writes for each new
    item are work, record after record."""
    t = Trace()
    for record in range(12):
        t.pair("browser_navigate", {"url": f"https://crm.example.com/r/{record}"}, f"Record {record}")
        t.pair("set_field", {"name": "status", "value": "Reviewed"}, "ok")
        t.pair("set_field", {"name": "reviewer", "value": "alice"}, "ok")
        t.pair("save_record", {}, "saved")
    assert cycle_at(t) == []


def test_a_metric_read_over_a_window_that_moves_is_the_same_read() -> None:
    """A rollout flipped between 10 % and 20 % while the same metric is read over the last
    ten minutes each time: its `from`/`to` move with the clock, what it reads does not."""
    t = Trace()
    t.pair("get_flag", {"key": "recs-v4"}, {"rollout": 10})
    clock = 1767450378
    for lap in range(6):
        for weight in (20000, 10000):
            t.pair("update_rollout", {"flag": "recs-v4", "weight": weight}, {"ok": True, "version": lap})
            clock += 11
            t.pair("query_metrics", {"query": "avg:memory{app:recs}", "from": clock - 600, "to": clock},
                   {"series": [71.2 + lap / 10]})
    # (a read's points in time are looked for only while a run is under way: the read before
    # the first re-application is kept as it was sent, and the first one within the run is
    # new; from the next lap on they are one read)
    assert cycle_at(t) == [14]
    # the record of a sweep named by a small number is something new each time, not a time
    t = Trace()
    for record in range(1000, 1012):
        t.pair("open_record", {"id": record}, f"Record {record}")
        t.pair("set_field", {"name": "status", "value": "Reviewed"}, "ok")
        t.pair("set_field", {"name": "reviewer", "value": "alice"}, "ok")
    assert cycle_at(t) == []


def test_a_run_that_goes_round_after_a_second_pass_is_found() -> None:
    """Four settings written again once each, then two of them flipped: the flip is a
    cycle whatever came before it in the run."""
    t = Trace()
    for n in range(6):
        t.pair("set_param", {"name": f"p{n}", "value": 1}, "ok")
    for n in range(4):
        t.pair("set_param", {"name": f"p{n}", "value": 1}, "ok")
        t.pair("read_alarm", {}, "ALARM 7")
    for n in range(10):
        t.pair("set_param", {"name": f"p{4 + n % 2}", "value": 1}, "ok")
        t.pair("read_alarm", {}, "ALARM 7")
    assert cycle_at(t) != []


def test_toggles_the_user_asks_for_turn_by_turn_are_served() -> None:
    t = Trace()
    for turn in range(8):
        t.events.append(TurnStart(session="w"))
        t.pair("HassTurnOn" if turn % 2 == 0 else "HassTurnOff", {"name": "kitchen light"}, "done")
        t.pair("GetLiveContext", {}, f"kitchen light: {'on' if turn % 2 == 0 else 'off'} at 20:{turn:02}")
    assert cycle_at(t) == []


def test_a_new_act_between_the_writes_ends_the_run() -> None:
    """A gripper closed with a force not tried before, each lap, between the same moves:
    a trial of something new every lap."""
    t = Trace()
    for force in range(15, 75, 10):
        t.pair("move_relative", {"dz": -0.06}, "ok")
        t.pair("gripper_close", {"force_pct": force}, "closed")
        t.pair("move_relative", {"dz": 0.3}, "ok")
        t.pair("lift_test", {"height_m": 0.3}, {"slipped": force < 45})
    assert cycle_at(t) == []
    # the same laps with the same force every time go round (the lift answering alike, the
    # cycle detector owns them; with the lift's readings moving, this signal)
    t = Trace()
    for n in range(6):
        t.pair("move_relative", {"dz": -0.06}, "ok")
        t.pair("gripper_close", {"force_pct": 15}, "closed")
        t.pair("move_relative", {"dz": 0.3}, "ok")
        t.pair("lift_test", {"height_m": 0.3}, {"slipped": True, "at": "abcdef"[n]})
    assert cycle_at(t) == [11]


def test_handoffs_between_agents_are_no_writes() -> None:
    t = Trace()
    for _ in range(10):
        t.pair("transfer_to_researcher", {}, "Transferred")
        t.pair("transfer_to_analyst", {"reason": "numbers"}, "Transferred")
        t.pair("get_board", {}, "unchanged")
    assert cycle_at(t) == []
    # money moved back and forth is no handoff, whatever the tool is called
    t = Trace()
    for _ in range(10):
        t.pair("transfer_to_savings", {"amount": 500}, "moved")
        t.pair("get_balance", {}, "checking 1200")
        t.pair("transfer_to_checking", {"amount": 500}, "moved")
        t.pair("get_balance", {}, "checking 1700")
    assert cycle_at(t) != []


def test_one_write_re_applied_after_each_check_is_no_cycle_of_writes() -> None:
    """A restart after every status read is the failure and stall detectors' to judge:
    it never goes round two states."""
    t = Trace()
    t.pair("restart_service", {"name": "api"}, "restarted")
    for n in range(10):
        t.pair("get_status", {"name": "api", "n": n}, "crashlooping")
        t.pair("restart_service", {"name": "api"}, "restarted")
    assert cycle_at(t) == []


def test_exempt_tools_and_a_disabled_signal() -> None:
    exempt = QUIET + '[signals.write-cycle]\nexempt_tools = ["place_order"]\n'
    assert cycle_at(flip_flop(8), exempt) == []
    off = QUIET.replace('["tools-without-text"]', '["tools-without-text", "write-cycle"]')
    assert cycle_at(flip_flop(8), off) == []


@pytest.mark.parametrize(("table", "field"), [("threshold = 2", "threshold"), ("threshold = 17", "threshold"),
                                              ("memory = 1", "memory"), ("memory = 65", "memory")])
def test_config_bounds_are_named(table: str, field: str) -> None:
    with pytest.raises(Exception, match=field):
        parse_policy_set(f"[signals.write-cycle]\n{table}\n")


def test_threshold_moves_the_trip() -> None:
    earlier = QUIET + "[signals.write-cycle]\nthreshold = 3\n"
    assert cycle_at(flip_flop(8), earlier) == [12]


def test_the_preview_names_the_order_that_would_trip() -> None:
    engine = Engine(parse_policy_set(QUIET))
    engine.process(TurnStart(session="w"))
    for event in flip_flop(8).events:
        if isinstance(event, ToolCall):
            preview = engine.would_trip(event)
            tripped = [o.signal for o in engine.process(event) if isinstance(o, Alert) and o.signal == SIGNAL]
            if tripped:
                assert SIGNAL in preview
                return
        else:
            engine.process(event)
    raise AssertionError("the flip-flop never tripped")


def test_state_survives_a_snapshot_and_stays_bounded() -> None:
    signal = WriteCycle()
    state = signal.new_state()
    encoded = msgspec.msgpack.encode(state)
    assert msgspec.msgpack.decode(encoded, type=type(state)) == state
    # mid-run, a session restored from its snapshot trips where the uninterrupted one does
    events = flip_flop(8).events
    whole = alerts(flip_flop(8))
    for cut in range(4, len(events), 3):
        first = Engine(parse_policy_set(QUIET))
        first.process(TurnStart(session="w"))
        for event in events[:cut]:
            first.process(event)
        live = next(s for s in first.state("w").signals if isinstance(s, type(state)))  # type: ignore[union-attr]
        assert msgspec.msgpack.decode(msgspec.msgpack.encode(live), type=type(state)) == live
        data = first.snapshot("w")
        assert data is not None
        second = Engine(parse_policy_set(QUIET))
        second.restore("w", data)
        calls = sum(isinstance(e, ToolCall) for e in events[:cut])
        got = []
        for event in events[cut:]:
            if isinstance(event, ToolCall):
                calls += 1
            got += [(calls, o.signal) for o in second.process(event) if isinstance(o, Alert) and o.signal == SIGNAL]
        assert got == [(n, s) for n, s, _ in whole if s == SIGNAL and n > sum(
            isinstance(e, ToolCall) for e in events[:cut])]
    engine = Engine(parse_policy_set(QUIET))
    t = Trace()
    for n in range(500):
        t.pair("update_record", {"record_id": f"R-{n}", "status": "done"}, "ok")
    for event in t.events:
        engine.process(event)
    session = engine.state("w")
    assert session is not None
    own = [s for s in session.signals if isinstance(s, type(state))]
    assert len(own) == 1 and len(own[0].seen) == 16
