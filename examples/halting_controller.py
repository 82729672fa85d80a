"""A reference halting controller.

streamguard detects; it cannot stop an agent. This controller closes the loop:
it follows the output topic in a consumer group and, for each

* ``guardrail_trip`` with ``session_halted``: calls ``halt(session, trip)``:
  stop the session's agent and refuse its further turns;
* ``guardrail_trip`` with only ``halted_turn``: calls ``cut_turn(session, trip)``:
  end the current turn, the session may continue;
* ``alert`` from ``halt-ignored``: the session was halted but keeps working,
  so the earlier halt did not take: calls ``halt`` again and logs an error.

``halt`` and ``cut_turn`` are yours (kill a pod, cancel a task, flip a flag in
the runtime's session store); they are async and should be idempotent: each
trip is handled exactly once per process (duplicates are dropped by the
output's deterministic ``id``), but a trip handled just before a crash, and
not yet committed, is delivered again after the restart.

A halted session stays halted in streamguard until an operator resets it:

    streamguard reset SESSION --guardrail watchdog --wait
    streamguard reset SESSION --guardrail cost_ceiling --add-budget 5 --wait

Run it (the default functions only log)::

    python examples/halting_controller.py --bootstrap-servers kafka:9092
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from typing import Any

from streamguard.client import DEFAULT_ALERTS_TOPIC, Filter, TripSubscriber
from streamguard.events import Alert, GuardrailTrip, Output

log = logging.getLogger("halting-controller")

Action = Callable[[str, Output], Awaitable[Any]]

# What the controller listens to: every trip, and the alert that says a halt was ignored.
CONTROLLER_FILTERS = (
    Filter(types=["guardrail_trip"]),
    Filter(types=["alert"], signals=["halt-ignored"]),
)

# The `streamguard reset --guardrail` value that clears a trip of each guardrail.
RESET_TARGET = {"watchdog": "watchdog", "cost_ceiling": "cost_ceiling"}


class HaltingController:
    """Calls ``halt`` / ``cut_turn`` for the trips on the output topic."""

    def __init__(
        self,
        halt: Action,
        cut_turn: Action,
        *,
        bootstrap_servers: str = "localhost:9092",
        topic: str = DEFAULT_ALERTS_TOPIC,
        group_id: str = "streamguard-halting-controller",
        **subscriber_options: Any,
    ) -> None:
        self.halt = halt
        self.cut_turn = cut_turn
        self.subscriber = TripSubscriber(
            bootstrap_servers,
            group_id=group_id,
            topic=topic,
            filters=CONTROLLER_FILTERS,
            **subscriber_options,
        )

    async def run(self) -> None:
        """Handle trips until :meth:`stop`. A failing action stops the controller
        without committing that trip, so it is retried after a restart."""
        async with self.subscriber as outputs:
            async for output in outputs:
                await self.handle(output)

    def stop(self) -> None:
        self.subscriber.stop()

    async def handle(self, output: Output) -> None:
        if isinstance(output, GuardrailTrip):
            if output.session_halted:
                log.warning(
                    "halting session %s (%s tripped by %s): %s",
                    output.session,
                    output.guardrail,
                    output.signal,
                    output.reason,
                )
                await self.halt(output.session, output)
                if output.guardrail == "fleet":
                    # no session reset lifts it: its scope's circuit closing does
                    log.info(
                        "session %s stays halted until its fleet circuit closes "
                        "(streamguard fleet --open; streamguard reset --scope SCOPE)",
                        output.session,
                    )
                else:
                    target = RESET_TARGET.get(output.guardrail, "all")
                    log.info(
                        "session %s stays halted until reset: streamguard reset %s --guardrail %s --wait",
                        output.session,
                        output.session,
                        target,
                    )
            elif output.halted_turn:
                log.warning(
                    "cutting the current turn of session %s (%s tripped by %s): %s",
                    output.session,
                    output.guardrail,
                    output.signal,
                    output.reason,
                )
                await self.cut_turn(output.session, output)
        elif isinstance(output, Alert) and output.signal == "halt-ignored":
            log.error(
                "session %s keeps working although halted; halting again: %s",
                output.session,
                output.reason,
            )
            await self.halt(output.session, output)


# --------------------------------------------------------------------------- demo entry point


async def log_halt(session: str, trip: Output) -> None:
    """Stand-in for a real halt: replace with a call into your agent runtime."""
    log.info("[stand-in] would stop every turn of session %s", session)


async def log_cut_turn(session: str, trip: Output) -> None:
    """Stand-in for a real turn cut."""
    log.info("[stand-in] would end the current turn of session %s", session)


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Reference halting controller for streamguard.")
    parser.add_argument(
        "--bootstrap-servers",
        default=os.environ.get("STREAMGUARD_BOOTSTRAP_SERVERS", "localhost:9092"),
    )
    parser.add_argument(
        "--alerts-topic", default=os.environ.get("STREAMGUARD_ALERTS_TOPIC", DEFAULT_ALERTS_TOPIC)
    )
    parser.add_argument("--group", default="streamguard-halting-controller")
    parser.add_argument(
        "--from-beginning",
        action="store_true",
        help="a new group starts at the oldest retained trip (default: at the present)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    controller = HaltingController(
        log_halt,
        log_cut_turn,
        bootstrap_servers=args.bootstrap_servers,
        topic=args.alerts_topic,
        group_id=args.group,
        auto_offset_reset="earliest" if args.from_beginning else "latest",
    )
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, controller.stop)
    await controller.run()


if __name__ == "__main__":
    asyncio.run(main())
