"""The reference halting controller (examples/) against a real broker, with fake actions."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from streamguard.events import GuardrailReset, Output
from tests.kafka.conftest import REPO_ROOT, poll_until
from tests.kafka.test_client import QUICK_GROUP, alert, send_output, trip

pytestmark = pytest.mark.kafka


def load_example() -> ModuleType:
    path = Path(REPO_ROOT) / "examples" / "halting_controller.py"
    spec = importlib.util.spec_from_file_location("halting_controller_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


async def test_each_trip_is_acted_on_exactly_once(topics) -> None:
    example = load_example()
    halted: list[tuple[str, str]] = []
    cut: list[tuple[str, str]] = []

    async def halt(session: str, output: Output) -> None:
        halted.append((session, output.id))

    async def cut_turn(session: str, output: Output) -> None:
        cut.append((session, output.id))

    session_trip = trip("trip-halt", session="s-1")
    turn_trip = trip(
        "trip-cut", session="s-1", guardrail="context_budget", signal="context-budget",
        scope="turn", session_halted=False,
    )
    other_session = trip("trip-other", session="s-2", guardrail="cost_ceiling", signal="cost-ceiling")
    await send_output(topics, session_trip)
    await send_output(topics, session_trip)  # the same trip delivered twice
    await send_output(topics, alert("alert-loop", "repeated-tool-call"))  # not for the controller
    await send_output(topics, turn_trip)
    await send_output(topics, turn_trip)  # and again
    await send_output(topics, alert("alert-ignored", "halt-ignored"))
    await send_output(
        topics,
        GuardrailReset(
            id="reset-1", session="s-1", agent=None, ts=2.0, seq=None, guardrail="watchdog",
            accepted=True, reason="ok",
        ),
    )
    await send_output(topics, other_session)
    await send_output(topics, other_session)

    controller = example.HaltingController(
        halt, cut_turn, bootstrap_servers=topics.bootstrap, topic=topics.alerts,
        group_id=topics.group, auto_offset_reset="earliest", **QUICK_GROUP,
    )
    task = asyncio.create_task(controller.run())
    expected_halts = {("s-1", "trip-halt"), ("s-1", "alert-ignored"), ("s-2", "trip-other")}
    try:
        await poll_until(
            lambda: set(halted) == expected_halts and len(cut) == 1,
            20, "the controller to act on every trip", task=task,
        )
        # Every duplicate sits before a record that was handled (same partition,
        # in order), or is the last record of its partition: wait for the
        # commits to reach the end, then nothing is left to deliver.
        ends = await topics.end_offsets(topics.alerts)

        async def all_committed() -> bool:
            committed = await topics.committed(topics.alerts)
            return all(committed[p] >= end for p, end in ends.items() if end)

        await poll_until(all_committed, 20, "the controller to commit every record", task=task)
    finally:
        controller.stop()
        await asyncio.wait_for(task, 10)

    assert sorted(halted) == sorted(expected_halts)  # once each: duplicates dropped
    assert cut == [("s-1", "trip-cut")]
    stats = controller.subscriber.stats
    assert stats.duplicates == 3
    assert stats.handled == 4
