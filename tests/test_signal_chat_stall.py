"""chat-stall: the same message to the user, again and again, or talk without action."""

from __future__ import annotations

from typing import Any

import pytest

from streamguard.engine import Engine
from streamguard.events import Alert, FinalAnswer, Text, ToolCall, ToolResult, TurnStart
from streamguard.policy import PolicyError, parse_policy_set
from streamguard.signals.chat_stall import similarity, sketch
from streamguard.watchdog import Watchdog

WARN = 'mode = "warn"\n'


def hits(trace: list[Any], policy: str = WARN) -> list[tuple[int, Alert]]:
    engine = Engine(parse_policy_set(policy))
    out = []
    for n, event in enumerate(trace, 1):
        out += [(n, o) for o in engine.process(event)
                if isinstance(o, Alert) and o.signal == "chat-stall"]
    return out


def say(text: str, turn: int) -> list[Any]:
    return [TurnStart(session="c", turn=turn), Text(session="c", text=text, turn=turn),
            Text(session="c", role="user", text="I already told you.", turn=turn)]


ASK = [
    "Could you please confirm your booking reference so I can look it up?",
    "Could you please confirm your booking reference, so that I can look it up?",
    "Could you please confirm your booking reference so I can look it up for you?",
]


def test_sketch_similarity() -> None:
    assert similarity(sketch(ASK[0]), sketch(ASK[1])) >= 0.7
    assert similarity(sketch(ASK[0]), sketch("Your flight leaves at 9 from gate 12.")) < 0.3
    assert similarity(sketch("Order 1234 is shipped."), sketch("Order 98 is shipped.")) == 1.0
    assert sketch("") == b"" and sketch("...") == b""


def test_the_same_question_three_times_warns() -> None:
    trace: list[Any] = []
    for turn, text in enumerate(ASK):
        trace += say(text, turn)
    got = hits(trace)
    assert len(got) == 1
    alert = got[0][1]
    assert alert.severity == "warn" and alert.detail["rule"] == "repeated_message"
    assert alert.detail["count"] == 3


def test_twice_is_not_a_stall() -> None:
    trace = say(ASK[0], 0) + say(ASK[1], 1) + say("Thanks, I found it: flight 12 at 9am.", 2)
    assert hits(trace) == []


def test_a_tool_call_in_between_resets() -> None:
    trace = say(ASK[0], 0) + say(ASK[1], 1)
    trace += [ToolCall(session="c", tool="lookup", args={"q": "x"}),
              ToolResult(session="c", tool="lookup", result="none")]
    trace += say(ASK[2], 2)
    assert hits(trace) == []


def ask_through_a_tool(question: str, turn: int, tool: str = "ask_followup_question") -> list[Any]:
    return [TurnStart(session="c", turn=turn),
            ToolCall(session="c", tool=tool, args={"question": question, "follow_up": ["Postgres"]},
                     turn=turn),
            ToolResult(session="c", tool=tool, result="<answer>Postgres, as I said</answer>", turn=turn)]


def reread(turn: int) -> list[Any]:
    return [ToolCall(session="c", tool="read_file", args={"path": "services/shared/db.ts"}, turn=turn),
            ToolResult(session="c", tool="read_file", result="export const pool = new Pool()", turn=turn)]


@pytest.mark.parametrize("tool", ["ask_traveller", "ask_student", "ask_dispatcher", "mcp__crm__ask_customer"])
def test_a_question_to_a_person_named_by_their_role_is_a_question_to_the_user(tool: str) -> None:
    """A tool that asks the traveller, the student or the dispatcher asks a person, as
    `ask_human` does: the same question through it, turn after turn, is one message said
    again. A tool that asks a codebase or another agent is not one."""
    trace: list[Any] = []
    for turn, question in enumerate(ASK):
        trace += ask_through_a_tool(question, turn, tool) + reread(turn)
    assert [a.detail["rule"] for _, a in hits(trace)] == ["repeated_message"]
    other: list[Any] = []
    for turn, question in enumerate(ASK):
        other += ask_through_a_tool(question, turn, "ask_codebase") + reread(turn)
    assert hits(other) == []


def test_a_question_asked_through_a_tool_is_a_message_kept_past_other_calls() -> None:
    """ask_followup_question with the same question, the user answering each time, a
    file re-read in between: the question is a message to the user, and the agent's
    other calls do not make it a new one."""
    trace: list[Any] = []
    for turn, question in enumerate(ASK):
        trace += ask_through_a_tool(question, turn) + reread(turn)
    got = hits(trace)
    assert [(a.detail["rule"], a.detail["count"]) for _, a in got] == [("repeated_message", 3)]
    # said in plain text with the same calls between, each call still starts afresh
    plain: list[Any] = []
    for turn, question in enumerate(ASK):
        plain += say(question, turn) + reread(turn)
    assert hits(plain) == []
    # three different questions through the tool: no stall
    varied: list[Any] = []
    for turn, question in enumerate(["Which database?", "Which region should it run in?",
                                     "Should I add a migration for the audit table?"]):
        varied += ask_through_a_tool(question, turn) + reread(turn)
    assert hits(varied) == []


def test_a_varied_conversation_is_silent() -> None:
    lines = ["Hello, how can I help?", "Which city are you flying from?",
             "And on which date would you like to travel?", "I found three flights on that day.",
             "The cheapest leaves at nine in the morning.", "Shall I book it for you?",
             "Done: you are booked, the confirmation is on its way.", "Anything else today?"]
    trace: list[Any] = []
    for turn, text in enumerate(lines):
        trace += say(text, turn)
    assert hits(trace) == []


def test_talking_without_acting_in_a_session_with_tools() -> None:
    lines = ["Hello there.", "Which city?", "What date suits you?", "Morning or evening?",
             "Window seat or aisle?", "Any luggage to check?", "Do you travel with pets?",
             "Would you like a meal?", "Is this for business?", "Do you hold a loyalty card?",
             "Shall I add insurance?", "Paying by card?", "One more thing: your name?"]
    chat: list[Any] = [TurnStart(session="c", turn=1)]
    chat += [Text(session="c", text=text, turn=1) for text in lines]  # the user never speaks
    assert hits(chat) == []  # never acted: a pure chat agent talks
    acted = [ToolCall(session="c", tool="lookup", args={}),
             ToolResult(session="c", tool="lookup", result="ok"), *chat]
    got = hits(acted)
    assert [a.detail["rule"] for _, a in got] == ["talking_without_acting"]
    assert got[0][1].detail["count"] == 12


def test_answering_a_new_question_every_turn_is_no_monologue() -> None:
    # A tutor that looked one thing up, then answers twelve questions in twelve turns.
    answers = ["Fractions add once their denominators match.", "A prime has exactly two divisors.",
               "Multiply both sides by the same number.", "The slope is rise over run.",
               "Area of a circle: pi times r squared.", "Negative times negative is positive.",
               "Percent means per hundred.", "An equation balances like scales.",
               "Exponents multiply when you raise a power.", "Parallel lines never meet.",
               "A ratio compares two quantities.", "Round half up at five.",
               "Angles in a triangle sum to 180 degrees.", "Square roots undo squares."]
    trace: list[Any] = [ToolCall(session="c", tool="lookup", args={}),
                        ToolResult(session="c", tool="lookup", result="ok")]
    for turn, text in enumerate(answers):
        trace += say(text, turn)
    assert hits(trace) == []


def test_reasoning_and_user_text_do_not_count() -> None:
    trace: list[Any] = []
    for turn, text in enumerate(ASK):
        trace += [Text(session="c", role="reasoning", text=text, turn=turn),
                  Text(session="c", role="user", text=text, turn=turn)]
    assert hits(trace) == []


def test_policy_validation() -> None:
    with pytest.raises(PolicyError, match="chat-stall"):
        parse_policy_set("[signals.chat-stall]\nrepeats = 1\n")
    with pytest.raises(PolicyError, match="chat-stall"):
        parse_policy_set("[signals.chat-stall]\nmin_similarity = 2.0\n")
    trace = say(ASK[0], 0) + say(ASK[1], 1)
    assert hits(trace, WARN + "[signals.chat-stall]\nrepeats = 2\n")


def test_snapshot_round_trip() -> None:
    watchdog = Watchdog(parse_policy_set(WARN).base)
    state = watchdog.new_state("c")
    for event in say(ASK[0], 0) + say(ASK[1], 1):
        watchdog.process(state, event)
    restored = watchdog.decode_state(watchdog.encode_state(state))
    out = [o for e in say(ASK[2], 2) for o in watchdog.process(restored, e) if isinstance(o, Alert)]
    assert [o.signal for o in out] == ["chat-stall"]


PROMISES = [
    "Great! I'll now update the migration: add the column nullable, backfill, then set NOT NULL.",
    "Understood. I'm going to edit the migration file now to implement the three-step approach.",
    "You're right, let me get to it. The upgrade() function gets the new column first.",
    "Sorry about that! Making the change now: nullable column, backfill with 'USD', NOT NULL.",
]


def promise_turns(texts: list[str], act_in_turn: int | None = None) -> list[Any]:
    """One read, then a turn per text: the user says "go ahead", the agent announces."""
    trace: list[Any] = [TurnStart(session="c", turn=0),
                        ToolCall(session="c", tool="read_file", args={"path": "m.py"}, call_id="r"),
                        ToolResult(session="c", tool="read_file", call_id="r", result="def upgrade(): ...")]
    for turn, text in enumerate(texts, 1):
        trace += [TurnStart(session="c", turn=turn),
                  Text(session="c", role="user", text="go ahead, edit the file", turn=turn),
                  Text(session="c", text=text, turn=turn)]
        if turn == act_in_turn:
            trace += [ToolCall(session="c", tool="edit_file", args={"path": "m.py"}, call_id=f"e{turn}",
                               turn=turn)]
    return [*trace, TurnStart(session="c", turn=len(texts) + 1)]


def test_announcing_an_act_turn_after_turn_without_one_warns() -> None:
    got = hits(promise_turns(PROMISES[:3]))
    assert [a.detail["rule"] for _, a in got] == ["promised_without_acting"]
    assert got[0][1].severity == "warn" and got[0][1].detail["count"] == 3


ANALYST_PROMISES = [
    "Next, I'll query the Postgres max_connections setting and the connection count.",
    "To proceed, I will (1) retrieve postgres.connections.max and (2) the checkout failures.",
    "Understood. I'm going to look up the database connection metrics next.",
    "Proceeding. I'll now gather the Postgres connection metrics to confirm the saturation.",
    "Next step: query the connection metrics and the failure counts, then the document.",
]


@pytest.mark.parametrize("start", [0, 1, 2])
def test_an_analyst_announcing_queries_turn_after_turn_without_one_warns(start: int) -> None:
    """A post-mortem writer told "proceed" turn after turn, announcing each time the
    metrics it will query and querying nothing: the acts of an analyst are acts too."""
    got = hits(promise_turns(ANALYST_PROMISES[start:start + 3]))
    assert [a.detail["rule"] for _, a in got] == ["promised_without_acting"]


def test_an_announced_act_that_is_then_made_is_work() -> None:
    assert hits(promise_turns(PROMISES, act_in_turn=2)) == []
    assert hits(promise_turns(PROMISES[:2])) == []  # twice: a slip, not a stall


@pytest.mark.parametrize("text", [
    "Let me know if you want the backfill value to be something other than USD.",
    "I'll need your booking reference to look that up.",
    "The migration adds the column as NOT NULL without a default, which fails on existing rows.",
    # an act put to the user, or waiting on them
    "Revised plan: I will update the schema, then backfill. Does that look right?",
    "I'll fix that once you confirm which currency the old rows should get.",
    # no act of the agent's own
    "Let me make sure I understand: the old rows have no currency at all?",
    "Let me run through the options: a default, a backfill, or a nullable column.",
    "I'm about to run out of context, so here is a summary of where we are.",
    # what a model does in its own text, an offer, a plan put to the user, prose
    "Let me draft that for you:\n\nSubject: Q3 numbers\nHi all, ...",
    "Let me calculate: 12 * 7 = 84, so the total is 84.",
    "Let me analyze the trade-off. Option A keeps the column; option B drops it.",
    "If anything else comes up, I'll look into it.",
    "I'll search for that too if you want.",
    "Here's the plan: I'll query the metrics, then the logs. Let me know if that works.",
    "Proceeding with the migration as-is would drop the column.",
    # a state, an apology or a feeling, not an act under way
    "I'm sorry, cancelling is not possible right now.",
    "I'm afraid the store is closed right now.",
    "Everything is done now. Anything else?",
    "Your order is now cancelled.",
    "I'm waiting for the payment to clear now.",
    # a calculation, a phrase, a fact stated now
    "Let me check: 12 x 4 = 48, so the total is 48.",
    "Let me place this in context: the plan covers two sites.",
    "Shipping is now free on orders over 50 euros.",
    "Existing customers are now on the new plan.",
    "I'm assuming the deadline is now Friday.",
])
def test_what_is_no_announced_act(text: str) -> None:
    def rules(texts: list[str]) -> list[str]:
        # (the repeated-message rule held off: its latch would hide this one)
        no_repeats = WARN + "[signals.chat-stall]\nrepeats = 20\n"
        return [a.detail["rule"] for _, a in hits(promise_turns(texts), no_repeats)]

    heads = ["", "Thanks. ", "Right. ", "Noted. "]
    assert "promised_without_acting" not in rules([head + text for head in heads])
    # the same turns around a promise do warn: the test tells the two apart
    promise = "I'll now update the migration file with the backfill."
    assert "promised_without_acting" in rules([head + promise for head in heads])


def test_promised_turns_is_policy() -> None:
    off = WARN + "[signals.chat-stall]\npromised_turns = 0\n"
    assert hits(promise_turns(PROMISES), off) == []
    two = WARN + "[signals.chat-stall]\npromised_turns = 2\n"
    assert [a.detail["count"] for _, a in hits(promise_turns(PROMISES[:2]), two)] == [2]


def test_a_turn_that_acted_then_announces_the_next_step_is_no_unkept_promise() -> None:
    """"I'll now update the next resource" at the end of a turn that made its calls is no
    promise broken: that turn acted. Two call-less promise turns after it are two, not
    three."""
    trace = promise_turns(PROMISES[:3], act_in_turn=1)
    # the act comes before the turn's message: move it there
    act = next(e for e in trace if isinstance(e, ToolCall) and e.tool == "edit_file")
    trace.remove(act)
    trace.insert(next(i for i, e in enumerate(trace) if isinstance(e, Text) and e.role == "user"
                      and e.turn == 1) + 1, act)
    assert hits(trace) == []


def test_a_question_put_through_a_tool_ends_a_promise() -> None:
    trace = promise_turns(PROMISES[:3])
    questions = ["Which currency should the old rows get?", "Should the backfill run in one batch?",
                 "May I lock the invoices table for a minute?"]
    for turn, question in zip((1, 2, 3), questions, strict=True):
        at = next(i for i, e in enumerate(trace) if isinstance(e, Text) and e.role != "user" and e.turn == turn)
        trace.insert(at + 1, ToolCall(session="c", tool="ask_followup_question",
                                      args={"question": question}, call_id=f"q{turn}", turn=turn))
    assert "promised_without_acting" not in [a.detail["rule"] for _, a in hits(trace)]


def test_a_sign_off_does_not_hide_a_promise() -> None:
    sign_off = " Let me know if you have any questions."
    got = hits(promise_turns([p + sign_off for p in PROMISES[:3]]))
    assert [a.detail["rule"] for _, a in got] == ["promised_without_acting"]


def test_a_message_with_a_lone_surrogate_still_snapshots() -> None:
    engine = Engine(parse_policy_set(WARN))
    for event in promise_turns(["I'll now update the migration \ud800 as planned."]):
        engine.process(event)
    engine.process(Text(session="c", text="I'll now update it \ud800", turn=9))
    data = engine.snapshot("c")
    assert data is not None
    assert Engine(parse_policy_set(WARN)).restore("c", data) is not None


SERVICE_PROMISES = [
    "Sure! I'm cancelling your order HK-40918227 right now. This will just take a moment.",
    "I'm processing the cancellation for HK-40918227 now. You'll get a confirmation shortly!",
    "Yes, I'm on it. The cancellation request is being submitted.",
    "Absolutely, I'll cancel it right now before dispatch. One moment please.",
    "Of course! Cancelling order HK-40918227 now.",
    "Let me check the balcony availability for your sailing.",
]


@pytest.mark.parametrize("start", [0, 1, 2, 3])
def test_a_service_agent_announcing_an_act_under_way_turn_after_turn_warns(start: int) -> None:
    """A support agent saying turn after turn that it is cancelling the order, and never
    calling the tool that would: acts under way ("I'm cancelling ... right now",
    "Cancelling ... now", "I'm on it") and a service's acts (cancel, check) are announced
    acts too."""
    got = hits(promise_turns(SERVICE_PROMISES[start:start + 3]))
    assert [a.detail["rule"] for _, a in got] == ["promised_without_acting"]


def promise_answers(texts: list[str], also_as_text: bool, text_suffix: str = "") -> list[Any]:
    """promise_turns, the agent's words sent as each turn's final answer (and, with
    ``also_as_text``, as an assistant text first)."""
    trace: list[Any] = [TurnStart(session="c", turn=0),
                        ToolCall(session="c", tool="list_events", args={"day": "Thu"}, call_id="r"),
                        ToolResult(session="c", tool="list_events", call_id="r", result="[]")]
    for turn, text in enumerate(texts, 1):
        trace += [TurnStart(session="c", turn=turn),
                  Text(session="c", role="user", text="please create them", turn=turn)]
        if also_as_text:
            trace.append(Text(session="c", text=text + text_suffix, turn=turn))
        trace.append(FinalAnswer(session="c", text=text, turn=turn))
    return [*trace, TurnStart(session="c", turn=len(texts) + 1)]


def test_a_final_answer_is_a_message_to_the_user() -> None:
    texts = ["On it! I'm adding the 12 events now.", "Sorry - I'm creating them right now.",
             "Yes! I'm creating the events now, starting with Alvarez."]
    assert [a.detail["rule"] for _, a in hits(promise_answers(texts, False))] == ["promised_without_acting"]


def test_a_final_answer_repeating_the_turns_text_is_one_message() -> None:
    """A runtime that sends the words as a text and again as the final answer: one
    message a turn, so two turns of one question are two askings, not four."""
    question = ["Could you confirm the date of the conference, please?"] * 2
    assert hits(promise_answers(question, True)) == []
    assert hits(promise_answers(question, True, text_suffix="\n")) == []  # the text with a newline
    assert [a.detail["rule"] for _, a in hits(promise_answers(question * 2, True))] == ["repeated_message"]


def _service_turns(promise: str, looks: list[tuple[str, dict[str, Any], str]], turns: int = 4) -> list[Any]:
    """Turns of a support chat: the customer asks, the agent looks things up, then ends on
    ``promise``."""
    trace: list[Any] = []
    for turn in range(1, turns + 1):
        trace += [TurnStart(session="c", turn=turn),
                  Text(session="c", role="user", text=f"any news? ({turn})", turn=turn)]
        for i, (tool, args, answer) in enumerate(looks):
            trace += [ToolCall(session="c", tool=tool, args=args, call_id=f"l{turn}{i}", turn=turn),
                      ToolResult(session="c", tool=tool, call_id=f"l{turn}{i}", result=answer, turn=turn)]
        trace.append(Text(session="c", text=promise, turn=turn))
    return [*trace, TurnStart(session="c", turn=turns + 1)]


STATUS = ("get_claim_status", {"claim_no": "CLM-448120"}, "under document review")


def test_an_act_promised_after_the_same_lookups_turn_after_turn_warns() -> None:
    """'I'm raising the escalation ticket now' at the end of turn after turn, each turn
    only reading the claim's status again: the reads do not raise the ticket."""
    trace = _service_turns("I'm raising the escalation ticket for your claim now.", [STATUS])
    assert [a.detail["rule"] for _, a in hits(trace)] == ["promised_without_acting"]


def test_a_look_announced_then_made_is_work() -> None:
    """"Let me check the availability" followed by the check, turn after turn: the look
    announced is the look made, so no promise is broken."""
    trace: list[Any] = []
    for turn in range(1, 5):
        trace += [TurnStart(session="c", turn=turn),
                  Text(session="c", role="user", text=f"and on day {turn}?", turn=turn),
                  Text(session="c", text="Let me check the availability for that day.", turn=turn),
                  ToolCall(session="c", tool="get_availability", args={"day": turn}, call_id=f"a{turn}", turn=turn),
                  ToolResult(session="c", tool="get_availability", call_id=f"a{turn}", result="2 slots", turn=turn)]
    trace.append(TurnStart(session="c", turn=5))
    assert hits(trace) == []


def test_an_act_promised_and_made_in_the_next_turn_is_work() -> None:
    trace = _service_turns("I'm raising the escalation ticket for your claim now.", [STATUS], turns=2)
    trace[-1:-1] = [ToolCall(session="c", tool="create_ticket", args={"claim": "CLM-448120"}, call_id="t"),
                    ToolResult(session="c", tool="create_ticket", call_id="t", result={"id": "T-1"})]
    trace += _service_turns("I'm raising the escalation ticket for your claim now.", [STATUS], turns=2)[2:]
    assert hits(trace) == []


def test_an_agent_saying_it_stops_is_no_promise_unkept() -> None:
    """Told to stop, the agent makes no call and says "I'm stopping the rollout right
    now" turn after turn: obeying is no broken promise."""
    trace: list[Any] = [TurnStart(session="c", turn=0),
                        ToolCall(session="c", tool="deploy", args={"v": 2}, call_id="d"),
                        ToolResult(session="c", tool="deploy", call_id="d", result="rolling")]
    for turn in range(1, 5):
        trace += [TurnStart(session="c", turn=turn), Text(session="c", role="user", text="STOP", turn=turn),
                  Text(session="c", text="I'm stopping the rollout right now.", turn=turn)]
    trace.append(TurnStart(session="c", turn=5))
    # (saying it four times is the repeated-message rule's, a warning of its own)
    assert "promised_without_acting" not in [a.detail["rule"] for _, a in hits(trace)]


def test_a_look_reported_in_the_progressive_after_the_look_is_no_promise() -> None:
    """"I'm checking order 101 now: it is in transit" after the status read of that turn
    reports the look; turn after turn, it is work."""
    trace: list[Any] = []
    for turn in range(1, 5):
        trace += [TurnStart(session="c", turn=turn),
                  Text(session="c", role="user", text=f"and order {100 + turn}?", turn=turn),
                  ToolCall(session="c", tool="get_order", args={"id": 100 + turn}, call_id=f"o{turn}", turn=turn),
                  ToolResult(session="c", tool="get_order", call_id=f"o{turn}", result="in transit", turn=turn),
                  Text(session="c", text=f"I'm checking order {100 + turn} now: it is in transit.", turn=turn)]
    trace.append(TurnStart(session="c", turn=5))
    assert hits(trace) == []
