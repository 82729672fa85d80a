"""Event streams for the Kafka tests: the seeds' loops, and the outputs they must cause.

Expected outputs come from a fresh in-process :class:`Engine` fed the same
events: the Kafka path must publish exactly those (same ids, same payloads).
Events carry explicit ``ts`` so the record timestamps do not influence outputs,
and no ``seq`` unless a test wants the engine's own replay guard: without
``seq`` only the processor's offset bookkeeping stands between a replay and a
double-applied event.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from streamguard.engine import Engine
from streamguard.events import Output, ToolCall, ToolResult, TurnStart

T0 = 1_700_000_000.0


def repeat_loop(session: str, *, n: int = 5, agent: str = "coder", t0: float = T0) -> list[Any]:
    """The same call ``n`` times: repeated-tool-call at the 5th (critical, halts under enforce)."""
    events: list[Any] = [TurnStart(session=session, agent=agent, ts=t0)]
    for i in range(n):
        events.append(
            ToolCall(
                session=session,
                agent=agent,
                tool="read_file",
                args={"path": "main.go"},
                ts=t0 + 1 + i,
            )
        )
    return events


def cycle_loop(session: str, *, agent: str = "coder", t0: float = T0) -> list[Any]:
    """a, b alternating for three laps: alternating-tool-cycle."""
    events: list[Any] = [TurnStart(session=session, agent=agent, ts=t0)]
    for lap in range(3):
        for j, tool in enumerate(("grep", "edit")):
            events.append(
                ToolCall(
                    session=session,
                    agent=agent,
                    tool=tool,
                    args={"q": tool},
                    ts=t0 + 1 + lap * 2 + j,
                )
            )
    return events


def failure_streak(session: str, *, agent: str = "ops", t0: float = T0) -> list[Any]:
    """Three failed results in a row: tool-failure-streak (warn)."""
    events: list[Any] = [TurnStart(session=session, agent=agent, ts=t0)]
    for i in range(3):
        events.append(
            ToolCall(
                session=session,
                agent=agent,
                tool="deploy",
                args={"try": i},
                call_id=f"c{i}",
                ts=t0 + 1 + 2 * i,
            )
        )
        events.append(
            ToolResult(
                session=session,
                agent=agent,
                tool="deploy",
                call_id=f"c{i}",
                error="denied",
                ts=t0 + 2 + 2 * i,
            )
        )
    return events


def calm(session: str, *, n: int = 6, agent: str = "coder", t0: float = T0) -> list[Any]:
    """Distinct calls: no signal should fire."""
    events: list[Any] = [TurnStart(session=session, agent=agent, ts=t0)]
    for i in range(n):
        events.append(
            ToolCall(
                session=session,
                agent=agent,
                tool="read_file",
                args={"path": f"f{i}.go"},
                ts=t0 + 1 + i,
            )
        )
    return events


def expected_outputs(events: Iterable[Any], engine: Engine | None = None) -> list[Output]:
    engine = engine or Engine()
    out: list[Output] = []
    for event in events:
        if event.__struct_config__.tag == "reset":
            out += engine.control(event)
        else:
            out += engine.process(event)
    return out


def by_id(outputs: Iterable[Output]) -> dict[str, Output]:
    return {o.id: o for o in outputs}
