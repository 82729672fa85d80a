"""Ids a write hands back: the next calls that name them are keyed by what they name
(the thing just made), not by the id it happened to get."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from streamguard.engine import Engine
from streamguard.events import Alert, Reset, ToolCall, ToolResult, TurnStart
from streamguard.policy import parse_policy_set
from streamguard.signals.facts import HANDED_KEPT, handed_ids, id_text, sent_values

SESSION = "h"
DRAFT = {"to": "panel@example.com", "subject": "Onsite tomorrow", "body": "Agenda attached."}


def _call(tool: str, args: Any, cid: str) -> ToolCall:
    return ToolCall(session=SESSION, tool=tool, args=args, call_id=cid)


def _answer(tool: str, result: Any, cid: str) -> ToolResult:
    return ToolResult(session=SESSION, tool=tool, result=result, call_id=cid)


def draft_and_discard(laps: int, first_id: int = 4471) -> list[Any]:
    """The same draft saved and discarded, lap after lap, each draft under a new id."""
    trace: list[Any] = []
    for lap in range(laps):
        draft = f"drf_{first_id + lap}"
        trace += [
            _call("draft_email", DRAFT, f"d{lap}"),
            _answer("draft_email", f"Draft saved with id {draft}. Use send_draft(draft_id) to send it.", f"d{lap}"),
            _call("discard_draft", {"draft_id": draft}, f"x{lap}"),
            _answer("discard_draft", f"Draft {draft} discarded.", f"x{lap}"),
        ]
    return trace


def critical_alerts(trace: list[Any], policy: str = "") -> list[tuple[int, str]]:
    """(call number, signal) of each critical alert a fresh engine raises on ``trace``
    (but the controller's ``halt-ignored``: these traces go on after a halt)."""
    engine = Engine(parse_policy_set(policy))
    engine.process(TurnStart(session=SESSION))
    calls = 0
    out: list[tuple[int, str]] = []
    for event in trace:
        if isinstance(event, ToolCall):
            calls += 1
        out += [
            (calls, o.signal) for o in engine.process(event)
            if isinstance(o, Alert) and o.severity == "critical" and o.signal != "halt-ignored"
        ]
    return out


def test_a_draft_made_and_discarded_again_and_again_is_one_lap_repeated() -> None:
    """Each discard names a new draft, but always the copy just made again: from the second
    lap on, the laps are one, and the third of them is the loop the cycle detector halts."""
    assert critical_alerts(draft_and_discard(8)) == [(8, "alternating-tool-cycle")]


def test_each_new_thing_made_and_then_used_is_a_sweep() -> None:
    """An invoice made per customer and sent: the sends all name the invoice just made,
    but each invoice is another customer's, so no lap repeats."""
    trace: list[Any] = []
    for n in range(30):
        invoice = f"INV-{1001 + n}"
        trace += [
            _call("create_invoice", {"customer_id": f"C-{200 + n}", "amount": 1500}, f"c{n}"),
            _answer("create_invoice", {"invoice_id": invoice, "status": "draft"}, f"c{n}"),
            _call("send_invoice", {"invoice_id": invoice}, f"s{n}"),
            _answer("send_invoice", {"sent": True}, f"s{n}"),
        ]
    assert critical_alerts(trace) == []


def test_without_the_handed_back_id_the_laps_differ() -> None:
    """The same laps, the discard naming a draft the write did not hand back (an id from
    elsewhere): every discard is its own call, as before."""
    trace = draft_and_discard(8)
    for event in trace:
        if isinstance(event, ToolResult) and event.tool == "draft_email":
            event.result = "Draft saved."
    assert critical_alerts(trace) == []


def test_the_ids_are_named_until_the_next_write() -> None:
    engine = Engine(parse_policy_set(""))
    engine.process(_call("create_job", {"name": "nightly"}, "c0"))
    engine.process(_answer("create_job", "Job job-8811 created", "c0"))
    state = engine.state(SESSION)
    assert state is not None
    assert state.handed == ()  # made once: its id is its own
    engine.process(_call("create_job", {"name": "nightly"}, "c1"))
    engine.process(_answer("create_job", "Job job-8812 created", "c1"))
    assert state.handed == ("job-8812",)  # made again: the new copy's
    for n in range(12):  # however long the agent reads what it made
        engine.process(_call("get_job", {"job_id": "job-8812"}, f"g{n}"))
        engine.process(_answer("get_job", "job-8812: running", f"g{n}"))
        assert state.handed == ("job-8812",)
    # a write of the agent's own ends them at once
    engine.process(_call("delete_job", {"job_id": "job-8812"}, "d1"))
    assert state.handed == ()
    # a job made from other arguments is a new one: its id is its own
    engine.process(_call("create_job", {"name": "weekly"}, "c3"))
    engine.process(_answer("create_job", "Job job-8814 created", "c3"))
    assert state.handed == ()


def test_two_ids_of_one_answer_are_two_calls() -> None:
    """A run started again hands back its jobs; reading each job's log once is a sweep,
    not one call repeated (each id is keyed by its place in the answer)."""
    trace: list[Any] = []
    for lap in range(2):
        jobs = [f"j-{1000 + lap * 10 + n}" for n in range(4)]
        trace += [_call("rerun_workflow", {"workflow": "nightly"}, f"r{lap}"),
                  _answer("rerun_workflow", f"Run r-90{lap} started with jobs {', '.join(jobs)}", f"r{lap}")]
        for n, job in enumerate(jobs):
            trace += [_call("get_job_log", {"job_id": job}, f"l{lap}{n}"),
                      _answer("get_job_log", "tests passed", f"l{lap}{n}")]
    assert critical_alerts(trace) == []


def test_the_preview_keys_a_call_as_the_call_itself() -> None:
    """Arguments sent as a JSON string (as OpenTelemetry carries them) are keyed alike by
    the preview and by the call."""
    engine = Engine(parse_policy_set(""))
    for event in draft_and_discard(8):
        if isinstance(event, ToolCall):
            event.args = json.dumps(event.args)
            preview = engine.would_trip(event)
            tripped = [o.signal for o in engine.process(event)
                       if isinstance(o, Alert) and o.severity == "critical" and o.signal != "halt-ignored"]
            assert [s for s in preview if s in tripped] == tripped
        else:
            engine.process(event)


def test_an_answer_hands_ids_back_only_to_the_write_sent_last() -> None:
    engine = Engine(parse_policy_set(""))
    state = None
    for n in range(2):  # the write made again, answered before anything else is sent
        engine.process(_call("update_record", {"record_id": "REC-1", "status": "open"}, f"u{n}"))
        engine.process(_answer("update_record", f"Record REC-1 updated; audit AUD-{n}7", f"u{n}"))
        state = engine.state(SESSION)
    assert state is not None and state.handed == ("AUD-17",)  # not REC-1: the write sent it
    # another call sent before the answer came: which call names what is unclear
    engine.process(_call("update_record", {"record_id": "REC-1", "status": "open"}, "u2"))
    engine.process(_call("add_label", {"record_id": "REC-9"}, "a2"))
    engine.process(_answer("add_label", "ok", "a2"))
    engine.process(_answer("update_record", "Record REC-1 updated; audit AUD-27", "u2"))
    assert state.handed == ()
    # a call never answered does not stop a later write from handing ids back
    engine.process(_call("Read", {"file_path": "notes.md"}, "never"))
    engine.process(_call("update_record", {"record_id": "REC-1", "status": "open"}, "u3"))
    engine.process(_answer("update_record", "Record REC-1 updated; audit AUD-37", "u3"))
    assert state.handed == ("AUD-37",)


def test_only_a_named_write_answered_before_the_next_call_hands_ids_back() -> None:
    engine = Engine(parse_policy_set(""))
    # a read's answer names ids the agent looked up, nothing it made
    engine.process(_call("list_jobs", {}, "l1"))
    engine.process(_answer("list_jobs", "job-8812 job-8813", "l1"))
    state = engine.state(SESSION)
    assert state is not None and state.handed == ()
    # a failed write made nothing
    engine.process(_call("create_job", {"name": "nightly"}, "c0"))
    engine.process(_answer("create_job", "Job job-8811 created", "c0"))
    engine.process(_call("create_job", {"name": "nightly"}, "c1"))
    engine.process(ToolResult(session=SESSION, tool="create_job", call_id="c1", error="quota job-8812"))
    assert state.handed == ()
    # a write answered after another call was sent: which call names what is unclear
    engine.process(_call("create_job", {"name": "nightly"}, "c2"))
    engine.process(_call("list_jobs", {}, "l2"))
    engine.process(_answer("create_job", "Job job-8814 created", "c2"))
    assert state.handed == ()
    # an operator's reset forgets them with the rest of the loop detectors' memory
    engine.process(_call("create_job", {"name": "nightly"}, "c3"))
    engine.process(_answer("create_job", "Job job-8815 created", "c3"))
    assert state.handed == ("job-8815",)
    engine.control(Reset(session=SESSION, guardrail="watchdog"))
    assert state.handed == () and state.last_write is None


def test_an_id_the_write_was_sent_is_no_id_it_handed_back() -> None:
    assert sent_values({"record_id": "REC-1001", "status": "closed", "count": 7}) == ("REC-1001",)
    assert handed_ids("Record REC-1001 updated; audit entry AUD-77120 written", ("REC-1001",)) == ("AUD-77120",)


def test_what_reads_as_an_id() -> None:
    for value in ("drf_4471", "INV-1001", "r-7723618157252860000", "550e8400-e29b-41d4-a716-446655440000", 12345):
        assert id_text(value) == str(value)
    for value in ("draft", "src/main.py", "two words 12", "12", 42, True, 3.5, None, "x" * 81, "a_1" * 30,
                  10**20, 10**4000):
        assert id_text(value) is None


def test_an_object_answer_hands_back_its_ids_and_those_of_the_objects_in_it() -> None:
    answer = {"id": "r-772361", "message": {"id": "f59a9444eb0a0041", "labelIds": ["DRAFT"]}, "ok": True}
    assert handed_ids(answer, ()) == ("r-772361", "f59a9444eb0a0041")


def test_an_answer_is_read_only_so_far() -> None:
    """A megabyte of answer costs the first kilobyte's scan: an id past it is not read,
    and no more than HANDED_KEPT ids are kept."""
    assert handed_ids("ok " * 400_000 + "drf_4471", ()) == ()
    many = " ".join(f"id-{n}" for n in range(100))
    assert handed_ids(many, ()) == tuple(f"id-{n}" for n in range(HANDED_KEPT))
    deep: dict[str, Any] = {"a": {"b": {"c": "id-1"}}}
    assert handed_ids(deep, ()) == ()  # two levels down: not read
    wide = {f"k{n}": f"id-{n}" for n in range(100_000)}
    assert handed_ids(wide, ()) == tuple(f"id-{n}" for n in range(HANDED_KEPT))


def test_a_draft_is_written_but_its_status_is_read() -> None:
    from streamguard.signals.facts import names_write
    assert names_write("draft_email") and names_write("gmail_draft_reply") and names_write("discard_draft")
    assert not names_write("draft_status") and not names_write("email_draft_details")


@settings(max_examples=60, deadline=None)
@given(cut=st.integers(min_value=1, max_value=31))
def test_a_restored_session_keys_the_ids_as_the_uninterrupted_one(cut: int) -> None:
    """The ids handed back are session state: a snapshot taken anywhere (between a write's
    answer and the call naming its id too) restores to the same alerts."""
    trace = draft_and_discard(8)
    whole = Engine(parse_policy_set(""))
    expected = [o for e in trace for o in whole.process(e) if isinstance(o, Alert)]
    first = Engine(parse_policy_set(""))
    got = [o for e in trace[:cut] for o in first.process(e) if isinstance(o, Alert)]
    data = first.snapshot(SESSION)
    assert data is not None
    second = Engine(parse_policy_set(""))
    second.restore(SESSION, data)
    got += [o for e in trace[cut:] for o in second.process(e) if isinstance(o, Alert)]
    assert [(a.signal, a.severity) for a in got] == [(a.signal, a.severity) for a in expected]
    assert expected  # the loop is found either way
