"""The demo's scoring, without a broker: hand-written session facts, judged against the planted shapes."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from streamguard.demo import ALL_FAILURES, ALL_PLANTED, DemoShape
from streamguard.demo.score import (
    MAX_LISTED,
    OutputTally,
    SessionFacts,
    live_tally,
    score,
    verdict,
)
from streamguard.events import Alert, Feedback, GuardrailReset, GuardrailTrip
from streamguard.fleet import Scenario

READ_LOOP = Scenario.READ_LOOP  # plants repeated-tool-call
FLOOD = Scenario.CONTEXT_FLOOD  # plants context-budget and context-pressure
HEALTHY = Scenario.SWEEP
HEALTHY_RUNNER = DemoShape.RUNNER_DISTINCT


def facts(
    session: str,
    kind: Scenario | DemoShape,
    fired: Iterable[str] = (),
    *,
    started: bool = True,
    done: bool = False,
    processed: bool = False,
) -> SessionFacts:
    """One session; ``processed``: the processor applied its last event (finished once done too)."""
    return SessionFacts(
        session=session,
        kind=kind,
        fired=frozenset(fired),
        started=started,
        done=done,
        finished=done and processed,
    )


def finished(session: str, kind: Scenario | DemoShape, fired: Iterable[str] = ()) -> SessionFacts:
    return facts(session, kind, fired, done=True, processed=True)


def row(result, kind) -> dict:
    return result.planted[str(kind)]


# --------------------------------------------------------------------------- catches and misses


def test_a_session_that_raised_every_planted_signal_is_caught_finished_or_not() -> None:
    result = score(
        [
            finished("s-1", READ_LOOP, {"repeated-tool-call"}),
            facts("s-2", READ_LOOP, {"repeated-tool-call"}),  # still running
        ],
        drained=True,
    )
    assert row(result, READ_LOOP) == {
        "signals": ["repeated-tool-call"],
        "sessions": 2,
        "finished": 1,
        "caught": 2,
        "missed": 0,
        "open": 0,
        "missed_sessions": [],
        "verdict": "caught",
    }


def test_a_shape_with_two_planted_signals_needs_both() -> None:
    result = score([finished("s-1", FLOOD, {"context-pressure"})], drained=True)
    flood = row(result, FLOOD)
    assert (flood["caught"], flood["missed"], flood["verdict"]) == (0, 1, "missed")
    assert flood["missed_sessions"] == ["s-1"]
    assert result.missed == ["context_flood"]


@pytest.mark.parametrize(
    ("done", "processed", "drained"),
    [
        (False, False, True),  # still publishing
        (True, False, True),  # published all, the processor has not applied the last event
        (False, True, True),  # applied so far, but more is to come
        (True, True, False),  # finished, but its outputs may still be on the way
    ],
    ids=["running", "not-processed", "not-done", "not-drained"],
)
def test_a_session_not_caught_is_missed_only_when_finished_and_drained(done, processed, drained) -> None:
    result = score([facts("s-1", READ_LOOP, done=done, processed=processed)], drained=drained)
    loop = row(result, READ_LOOP)
    assert (loop["caught"], loop["missed"], loop["open"]) == (0, 0, 1)
    assert loop["verdict"] == "pending"
    assert result.missed == [] and "read_loop" in result.unconfirmed


def test_a_session_nothing_of_which_was_published_is_not_counted() -> None:
    result = score(
        [
            facts("s-new", READ_LOOP, started=False),
            facts("s-new-healthy", HEALTHY, {"repeated-tool-call"}, started=False),
        ],
        drained=True,
    )
    assert row(result, READ_LOOP)["sessions"] == 0
    assert row(result, READ_LOOP)["verdict"] == "absent"
    assert result.healthy["sessions"] == 0 and result.healthy["false_alarms"] == 0
    assert (result.started, result.finished, result.unfinished) == (0, 0, 0)


# --------------------------------------------------------------------------- false alarms and side findings


def test_a_healthy_session_with_any_finding_is_one_false_alarm() -> None:
    result = score(
        [
            finished("h-2", HEALTHY, {"repeated-tool-call", "halt-ignored"}),
            facts("h-1", HEALTHY_RUNNER, {"repeated-tool-call"}),  # unfinished counts too
            finished("h-3", HEALTHY),
        ],
        drained=True,
    )
    assert result.healthy == {
        "sessions": 3,
        "finished": 2,
        "false_alarms": 2,
        "false_alarm_signals": {"halt-ignored": 1, "repeated-tool-call": 2},
        "false_alarm_sessions": ["h-1", "h-2"],
    }
    assert not result.passed


def test_extra_findings_on_failure_sessions_are_not_false_alarms() -> None:
    result = score(
        [
            finished("s-1", READ_LOOP, {"repeated-tool-call", "halt-ignored"}),
            finished("s-2", FLOOD, {"unverified-write"}),  # missed, and a side finding
        ],
        drained=True,
    )
    assert result.other_findings == {"halt-ignored": 1, "unverified-write": 1}
    assert result.healthy["false_alarms"] == 0
    assert row(result, READ_LOOP)["verdict"] == "caught"


def test_listed_sessions_are_capped_and_false_alarms_sorted() -> None:
    many = [finished(f"s-{i:03d}", READ_LOOP) for i in range(MAX_LISTED + 5)]
    alarms = [finished(f"h-{i:03d}", HEALTHY, {"chat-stall"}) for i in reversed(range(MAX_LISTED + 5))]
    result = score(many + alarms, drained=True)
    loop = row(result, READ_LOOP)
    assert loop["missed"] == MAX_LISTED + 5
    assert loop["missed_sessions"] == [f"s-{i:03d}" for i in range(MAX_LISTED)]
    assert result.healthy["false_alarms"] == MAX_LISTED + 5
    assert result.healthy["false_alarm_sessions"] == [f"h-{i:03d}" for i in range(MAX_LISTED)]


# --------------------------------------------------------------------------- verdicts and the whole run


def test_a_miss_outweighs_a_catch_and_a_catch_outweighs_open_sessions() -> None:
    result = score(
        [
            finished("a", READ_LOOP, {"repeated-tool-call"}),
            finished("b", READ_LOOP),
            facts("c", FLOOD, {"context-budget", "context-pressure"}),
            facts("d", FLOOD),
        ],
        drained=True,
    )
    assert row(result, READ_LOOP)["verdict"] == "missed"
    assert row(result, FLOOD)["verdict"] == "caught"
    assert row(result, FLOOD)["open"] == 1


def test_verdict_order() -> None:
    base = {"caught": 0, "missed": 0, "open": 0}
    assert verdict(base) == "absent"
    assert verdict(base | {"open": 2}) == "pending"
    assert verdict(base | {"open": 2, "caught": 1}) == "caught"
    assert verdict(base | {"open": 2, "caught": 1, "missed": 1}) == "missed"


def test_a_run_passes_when_every_shape_is_caught_and_no_healthy_session_raised_anything() -> None:
    caught = [finished(f"s-{kind}", kind, ALL_PLANTED[kind]) for kind in ALL_FAILURES]
    healthy = [finished("h-1", HEALTHY), facts("h-2", HEALTHY_RUNNER)]
    result = score(caught + healthy, drained=True)
    assert result.passed
    assert result.missed == result.unconfirmed == []
    assert {name: r["verdict"] for name, r in result.planted.items()} == {
        str(kind): "caught" for kind in ALL_FAILURES
    }
    assert (result.started, result.finished, result.unfinished) == (len(ALL_FAILURES) + 2, len(ALL_FAILURES) + 1, 1)

    # One shape not seen yet is enough to fail (a run too short), as is one false alarm.
    assert not score(caught[1:] + healthy, drained=True).passed
    assert score(caught[1:] + healthy, drained=True).unconfirmed == [str(ALL_FAILURES[0])]
    assert not score([*caught, finished("h-3", HEALTHY, {"no-new-state"})], drained=True).passed


def test_every_failure_shape_has_a_row_in_shape_order() -> None:
    assert list(score([], drained=True).planted) == [str(kind) for kind in ALL_FAILURES]


# --------------------------------------------------------------------------- the live view's counts


def test_live_tally_counts_started_running_and_catches_per_shape() -> None:
    tally = live_tally(
        [
            facts("a", READ_LOOP, {"repeated-tool-call"}),
            finished("b", READ_LOOP),
            facts("c", READ_LOOP, started=False),
            facts("h", HEALTHY, {"chat-stall"}),
            facts("h2", HEALTHY_RUNNER, done=True),
        ]
    )
    assert (tally.started, tally.running, tally.healthy, tally.false_alarms) == (4, 2, 2, 1)
    assert tally.started_by_shape == {READ_LOOP: 2}
    assert tally.caught == {READ_LOOP: 1}


# --------------------------------------------------------------------------- the controller's counts


def alert(session: str, signal: str, agent: str | None = "coder") -> Alert:
    return Alert(
        id=f"a-{session}-{signal}", session=session, agent=agent, ts=1.0, seq=1,
        signal=signal, severity="warn", scope="session", reason="r", guidance="",
    )


def trip(session: str, signal: str, *, halt: bool, agent: str = "ops") -> GuardrailTrip:
    return GuardrailTrip(
        id=f"t-{session}-{signal}", session=session, agent=agent, ts=1.0, seq=1,
        guardrail="watchdog", signal=signal, scope="session" if halt else "turn",
        halted_turn=True, session_halted=halt, reason=f"{signal} on {session}",
    )


def test_output_tally_counts_alerts_trips_halts_and_cuts() -> None:
    tally = OutputTally()
    for output in [
        alert("s-1", "repeated-tool-call"),
        alert("s-2", "repeated-tool-call", agent=None),
        trip("s-1", "repeated-tool-call", halt=True),
        trip("s-3", "no-op-streak", halt=False),
        Feedback(id="f", session="s-1", agent="coder", ts=1.0, seq=1, signals=["x"], text="t"),
        GuardrailReset(id="r", session="s-1", agent="coder", ts=1.0, seq=None,
                       guardrail="all", accepted=True, reason="ok"),
    ]:
        tally.count(output)
    assert tally.signals() == {
        "no-op-streak": {"alerts": 0, "trips": 1},
        "repeated-tool-call": {"alerts": 2, "trips": 1},
    }
    assert tally.agents() == {
        "-": {"alerts": 1, "trips": 0},
        "coder": {"alerts": 1, "trips": 0},
        "ops": {"alerts": 0, "trips": 2},
    }
    assert (tally.halted, tally.turns_cut) == (1, 1)
    assert list(tally.latest_halts) == [("s-1", "ops", "repeated-tool-call", "repeated-tool-call on s-1")]


def test_output_tally_keeps_the_three_latest_halts() -> None:
    tally = OutputTally()
    for i in range(5):
        tally.count(trip(f"s-{i}", "tool-cycle", halt=True))
    assert tally.halted == 5
    assert [halt[0] for halt in tally.latest_halts] == ["s-2", "s-3", "s-4"]
