"""The demo's live view, without a broker."""

from __future__ import annotations


def test_the_demo_live_view_fits_the_terminal_height():
    from streamguard.demo import fit_to_height

    lines = [f"line {i}" for i in range(40)]
    fitted = fit_to_height(lines, 24)
    assert len(fitted) == 23
    assert fitted[:21] == lines[:21] and fitted[-1] == lines[-1]
    assert fitted[21] == "… 18 more lines (a taller terminal shows them)"
    assert fit_to_height(lines[:10], 24) == lines[:10]
    assert len(fit_to_height(lines, 2)) == 3  # never less than head, note and last line


def _frame(final: bool = False):
    from streamguard.demo.render import Frame
    from streamguard.demo.score import OutputTally, SessionFacts, live_tally
    from streamguard.events import Alert
    from streamguard.fleet import Scenario

    outputs = OutputTally()
    for session, signal in [("s-1", "repeated-tool-call"), ("s-2", "halt-ignored"), ("h-1", "chat-stall")]:
        outputs.count(Alert(id=session + signal, session=session, agent="coder", ts=1.0, seq=1,
                            signal=signal, severity="warn", scope="session", reason="r", guidance=""))
    sessions = [
        SessionFacts("s-1", Scenario.READ_LOOP, frozenset({"repeated-tool-call"}), started=True),
        SessionFacts("s-2", Scenario.READ_LOOP, frozenset({"halt-ignored"}), started=True, done=True),
        SessionFacts("h-1", Scenario.SWEEP, frozenset({"chat-stall"}), started=True),
    ]
    return Frame(elapsed=4.0, duration=30.0, rate=1999.6, published=8000, processed=7900,
                 sessions=live_tally(sessions), outputs=outputs, final=final)


def test_the_live_table_scores_each_planted_shape_and_notes_side_findings():
    from streamguard.demo.render import table

    lines = table(_frame())
    assert lines[0] == "  4.0 s of 30 s   events 8,000 published (2,000/s), 7,900 processed, lag 100"
    assert lines[1] == "sessions 3 started, 2 running, 0 halted, 0 turns cut"
    [loop] = [line for line in lines if line.startswith("repeated-tool-call")]
    assert loop.split() == ["repeated-tool-call", "1", "-", "read_loop", "1/2"]
    [side] = [line for line in lines if line.startswith("halt-ignored")]
    assert side.endswith("(kept working after its halt)")
    assert lines[-1] == "false alarms: 1 (healthy sessions with an alert, of 1 healthy)"
    assert table(_frame(final=True))[1].startswith("sessions 3 started, 2 unfinished")


def test_the_status_line_counts_what_the_controller_read():
    from streamguard.demo.render import status_line

    assert status_line(_frame()) == (
        "[   4.0 s] events 8,000 published (2,000/s), 7,900 processed; alerts 3, trips 0, "
        "halted 0, false alarms 1"
    )


def test_the_summary_keeps_long_shape_names_apart_from_their_signals():
    from streamguard.demo.render import format_summary

    row = {"signals": ["failure-loop"], "sessions": 3, "caught": 3, "missed": 0, "open": 0,
           "verdict": "caught"}
    summary = {
        "error": None, "elapsed_s": 1.0, "events": {"published": 10, "processed": 10},
        "sessions": {"finished": 3, "halted": 3, "turns_cut": 0}, "seed": 0, "interrupted": None,
        "drained": True, "planted": {"read_loop": row, "runner_failing_rerun": row},
        "healthy": {"sessions": 5, "false_alarms": 0, "false_alarm_signals": {}},
        "other_findings": {}, "ok": True, "missed": [], "unconfirmed": [], "exit_code": 0,
    }
    lines = format_summary(summary).splitlines()
    rows = [line for line in lines if line.startswith(("read_loop", "runner_failing_rerun"))]
    assert [line.split()[:2] for line in rows] == [["read_loop", "failure-loop"],
                                                  ["runner_failing_rerun", "failure-loop"]]
    assert len({line.index("failure-loop") for line in rows}) == 1  # one column
