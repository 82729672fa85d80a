"""Resetting sessions through ``streamguard.client.control``, against a real broker and processor."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from streamguard.client import (
    AsyncSessionControl,
    InvalidReset,
    ResetConfirmed,
    ResetTimedOut,
    SessionControl,
    TopicNotFound,
    make_reset,
)
from streamguard.events import GuardrailReset, Reset, control_decoder
from tests.kafka.conftest import poll_until

pytestmark = pytest.mark.kafka


def looping(session: str) -> list[dict[str, Any]]:
    """A session that reads one file five times in a row: the watchdog halts it."""
    events: list[dict[str, Any]] = [{"type": "turn_start", "session": session, "seq": 1}]
    for seq in range(2, 7):
        events.append(
            {"type": "tool_call", "session": session, "seq": seq, "tool": "read_file",
             "args": {"path": "main.go"}}
        )
    return events


def control_for(topics, **options: Any) -> AsyncSessionControl:
    topic_names = {"control_topic": topics.control, "alerts_topic": topics.alerts}
    return AsyncSessionControl(topics.bootstrap, **{**topic_names, **options})


async def halted(running, *sessions: str) -> None:
    await poll_until(
        lambda: all(running.processor.engine.is_halted(s) for s in sessions), 15, f"halts of {sessions}"
    )


async def test_a_reset_is_confirmed_by_the_processor_and_clears_the_halt(topics, start_processor) -> None:
    running = await start_processor()
    await topics.send_events(looping("s-loop"))
    await halted(running, "s-loop")

    async with control_for(topics, by="controller-1") as control:
        outcome = await control.reset("s-loop", "watchdog", timeout=20)

    assert isinstance(outcome, ResetConfirmed), outcome
    assert outcome.confirmed and outcome.accepted and outcome.still_halted_by == ()
    confirmation = outcome.confirmation
    assert (confirmation.session, confirmation.guardrail, confirmation.by) == ("s-loop", "watchdog", "controller-1")
    assert confirmation.ts == outcome.sent.reset.ts is not None
    assert not running.processor.engine.is_halted("s-loop")
    # The reset is where the result says it is, as the processor decodes it.
    [record] = await topics.read_all(topics.control)
    assert (record.partition, record.offset, record.key) == (outcome.sent.partition, outcome.sent.offset, b"s-loop")
    assert control_decoder.decode(record.value) == outcome.sent.reset
    # ``value`` is the confirmation's record as published.
    [published] = [r for r in await topics.read_all(topics.alerts) if b"guardrail_reset" in r.value]
    assert outcome.value == published.value


async def test_a_refusal_is_a_confirmation_that_was_not_accepted(topics, start_processor) -> None:
    await start_processor()  # the default policy configures no cost ceiling
    async with control_for(topics) as control:
        outcome = await control.reset("s-any", "cost_ceiling", add_budget_usd=2.0, timeout=20)
    assert isinstance(outcome, ResetConfirmed)
    assert not outcome.accepted
    assert "refused" in outcome.confirmation.reason


async def test_without_a_processor_the_wait_times_out_and_the_reset_stays_sent(topics) -> None:
    async with control_for(topics) as control:
        outcome = await control.reset("s-idle", "all", timeout=0.5)
    assert isinstance(outcome, ResetTimedOut)
    assert not outcome.confirmed and outcome.timeout == 0.5
    [record] = await topics.read_all(topics.control)
    assert control_decoder.decode(record.value) == outcome.sent.reset


async def test_resetting_one_session_leaves_another_halted(topics, start_processor) -> None:
    running = await start_processor()
    await topics.send_events(looping("s-one") + looping("s-two"))
    await halted(running, "s-one", "s-two")

    async with control_for(topics) as control:
        outcome = await control.reset("s-one", "all", timeout=20)

    assert isinstance(outcome, ResetConfirmed) and outcome.accepted
    assert outcome.confirmation.session == "s-one"
    assert not running.processor.engine.is_halted("s-one")
    assert running.processor.engine.is_halted("s-two")
    state = running.processor.engine.state("s-two")
    assert state is not None and state.halted_by == ("watchdog",)


async def test_answers_to_other_resets_are_not_taken_for_ours(topics, start_processor) -> None:
    """Earlier resets of the same session (older, or by someone else) and a reset of another
    session are all answered before ours: the wait skips every one of those answers."""
    ours = make_reset("s-mine", "watchdog", by="alice")
    others = [
        make_reset("s-mine", "watchdog", by="alice", ts=ours.ts - 60),  # an older reset
        make_reset("s-mine", "watchdog", by="bob", ts=ours.ts),  # someone else's, same instant
        make_reset("s-theirs", "watchdog", by="alice", ts=ours.ts),  # another session's
    ]
    async with control_for(topics) as control:
        for reset in others:
            await control.publish(reset)
        # No processor yet: the four resets wait on the control topic, in this order.
        pending = await control.request(ours)
        assert not pending.done()
        await start_processor()
        outcome = await pending.wait(20)

    assert isinstance(outcome, ResetConfirmed)
    assert outcome.sent.reset == ours
    assert (outcome.confirmation.session, outcome.confirmation.by, outcome.confirmation.ts) == (
        "s-mine", "alice", ours.ts
    )
    # The processor did answer the others, on the topic the wait was reading.
    answers = [o for o in await topics.outputs() if isinstance(o, GuardrailReset)]
    answered = {(a.session, a.by, a.ts) for a in answers}
    assert {(r.session, r.by, r.ts) for r in [*others, ours]} <= answered


async def test_a_reset_without_a_timestamp_is_stamped_so_its_answer_can_be_told_apart(
    topics, start_processor
) -> None:
    await start_processor()
    async with control_for(topics) as control:
        pending = await control.request(Reset(session="s-bare", guardrail="watchdog"))
        outcome = await pending.wait(20)
    assert pending.reset.ts is not None
    assert isinstance(outcome, ResetConfirmed) and outcome.confirmation.ts == pending.reset.ts


async def test_the_sync_client_resets_and_waits(topics, start_processor) -> None:
    running = await start_processor()
    await topics.send_events(looping("s-sync"))
    await halted(running, "s-sync")

    def reset_from_a_thread() -> Any:
        with SessionControl(
            topics.bootstrap, control_topic=topics.control, alerts_topic=topics.alerts, by="script"
        ) as control:
            return control.reset("s-sync", "watchdog", timeout=20)

    outcome = await asyncio.to_thread(reset_from_a_thread)
    assert isinstance(outcome, ResetConfirmed) and outcome.accepted
    assert outcome.confirmation.by == "script"
    assert not running.processor.engine.is_halted("s-sync")


async def test_fire_and_forget_needs_no_output_topic(topics) -> None:
    async with control_for(topics, confirm=False, alerts_topic="no.such.alerts") as control:
        sent = await control.publish(make_reset("s-ff", "all"))
        with pytest.raises(RuntimeError, match="confirm=False"):
            await control.request(make_reset("s-ff", "all"))
    [record] = await topics.read_all(topics.control)
    assert control_decoder.decode(record.value) == sent.reset


@pytest.mark.parametrize(("missing", "role"), [("alerts_topic", "alerts"), ("control_topic", "control")])
async def test_a_missing_topic_is_named_with_its_role(topics, missing, role) -> None:
    control = control_for(topics, **{missing: "no.such.topic"})
    with pytest.raises(TopicNotFound) as caught:
        await control.start()
    assert (caught.value.topic, caught.value.role) == ("no.such.topic", role)
    await control.close()


async def test_closing_ends_a_wait_with_an_error_not_a_timeout(topics) -> None:
    control = control_for(topics)
    await control.start()
    pending = await control.request(make_reset("s-close", "all"))
    await control.close()
    with pytest.raises(RuntimeError, match="closed before the reset was confirmed"):
        await pending.wait(20)


def test_an_invalid_reset_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(InvalidReset):
        make_reset("x" * 300, "all")
    with pytest.raises(InvalidReset):
        make_reset("s", "cost_ceiling", add_budget_usd=-1.0)


async def test_a_wait_cut_by_the_client_closing_is_the_documented_error(topics) -> None:
    """close() ends every wait with RuntimeError: a CancelledError would read as the
    waiting task's own cancellation (except Exception and task groups mishandle it)."""
    control = control_for(topics)
    await control.start()
    pending = await control.request(make_reset("s-wait-close", "watchdog", by="t"))

    async def close_soon() -> None:
        await asyncio.sleep(0.05)
        await control.close()

    closing = asyncio.create_task(close_soon())
    with pytest.raises(RuntimeError, match="closed before the reset was confirmed"):
        await pending.wait(30)
    await closing
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
